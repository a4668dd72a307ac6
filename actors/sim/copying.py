"""How a message is copied between simulated actors: as Ray's serialization would, but cheaper.

Ray pickles a call's arguments and its result, so the receiver gets equal
values that share nothing mutable with the sender (design §1.3). The sim engine
keeps that guarantee (:func:`copy_message`) and keeps its cost down:

* a value that cannot change needs no copy: ``int``, ``float``, ``str``,
  ``bytes``, ``bool``, ``None``, enum members, the :data:`SHARED_TYPES`, and
  any tuple (named tuples included) made only of such values pass as
  themselves. An equal copy could be told apart from them by identity only.
* ``dict``, ``list`` and tuples holding something mutable are rebuilt, their
  parts copied by the same rules, with the message's own sharing kept (a
  container that appears twice in a message arrives as one container twice,
  as pickle's memo makes it).
* anything else (an actor handle, a dataclass, a set, a subclass of ``dict``,
  ...) sends the whole message through the C pickler, where an actor handle
  reduces to a reference to itself (:meth:`SimHandle.__reduce__
  <actors.sim.system.SimHandle.__reduce__>`) and a :data:`SHARED_TYPES` value
  passes by reference.

The common messages (a replica fetch and its answer, a produce, a fetch
session's call and answer) are dicts and lists of ints, strings and named
tuples of them: the quick path copies them in a fraction of what pickling
them cost (a follower's fetch answer: ~5 us instead of ~27 us), and with the
same result: an equal value, built in the same order, sharing nothing mutable.
"""

from __future__ import annotations

import copyreg
import enum
import io
import pickle
from itertools import chain
from typing import Any, Final

from emulator.broker.messages import OffsetsSnapshot

__all__ = ["SHARED_TYPES", "copy_message", "pickle_copy"]

SHARED_TYPES: tuple[type, ...] = (OffsetsSnapshot,)
"""Message parts that are immutable by type: a copy would equal them, so they pass as themselves.

A leader's ``__consumer_offsets`` snapshot rides every replica fetch answer
and grows with the group's committed offsets; pickling it was half the CPU of a
10,000-member run (when followers still polled forty times a second)."""

_in_flight: list[Any] = []
"""The shared parts of the message being pickled, by their place in it (see :func:`pickle_copy`)."""


def _shared_of(index: int) -> Any:
    return _in_flight[index]


def _by_reference(value: Any) -> tuple[Any, tuple[int]]:
    _in_flight.append(value)
    return (_shared_of, (len(_in_flight) - 1,))


_DISPATCH: dict[type, Any] = {
    **copyreg.dispatch_table,
    **dict.fromkeys(SHARED_TYPES, _by_reference),
}
"""The pickler's reducers: copyreg's, and :data:`SHARED_TYPES` by reference."""


def pickle_copy(value: Any) -> Any:
    """A copy of ``value`` through the C pickler (the general path of :func:`copy_message`).

    A :class:`~actors.sim.system.SimHandle` pickles to a reference to itself,
    so it arrives as the same handle, and a :data:`SHARED_TYPES` value arrives
    as itself.
    """
    buf = io.BytesIO()
    try:
        pickler = pickle.Pickler(buf, pickle.HIGHEST_PROTOCOL)
        pickler.dispatch_table = _DISPATCH
        pickler.dump(value)
        return pickle.loads(buf.getbuffer())
    finally:
        _in_flight.clear()


# ------------------------------------------------------------- the quick path

_ATOM: Final = 0  # immutable, no parts: passes as itself
_TUPLE: Final = 1  # a plain tuple
_NAMED: Final = 2  # a named tuple (a tuple subclass with ``_make``)
_DICT: Final = 3
_LIST: Final = 4
_SLOW: Final = 5  # anything else: the whole message is pickled

_KIND: dict[type, int] = {
    int: _ATOM,
    float: _ATOM,
    str: _ATOM,
    bytes: _ATOM,
    bool: _ATOM,
    type(None): _ATOM,
    complex: _ATOM,
    **dict.fromkeys(SHARED_TYPES, _ATOM),
    tuple: _TUPLE,
    dict: _DICT,
    list: _LIST,
}
"""What each type seen so far is (:func:`_kind_of` classifies a new one)."""

_ATOMS: set[type] = {t for t, k in _KIND.items() if k == _ATOM}
"""The types of :data:`_KIND` that are atoms (grows with it)."""
_TUPLES: set[type] = {tuple}
"""The plain and named tuple types seen so far (grows with :data:`_KIND`)."""


class _Slow(Exception):
    """The quick path met something it does not copy: pickle the whole message."""


def _kind_of(t: type) -> int:
    kind = _KIND.get(t)
    if kind is None:
        if issubclass(t, enum.Enum):
            kind = _ATOM  # members are singletons: pickle gives back the same member
        elif _plain_named_tuple(t):
            kind = _NAMED
        else:
            kind = _SLOW
        _KIND[t] = kind
        if kind == _ATOM:
            _ATOMS.add(t)
        elif kind == _NAMED:
            _TUPLES.add(t)
    return kind


_MADE = ("__new__", "__getnewargs__")
"""What pickle calls to rebuild a named tuple, as the named-tuple factory made them."""


def _plain_named_tuple(t: type) -> bool:
    """A named tuple that pickles as its items (``_make`` rebuilds what pickle would).

    No instance dict, no reducer of its own, and the ``__new__`` and
    ``__getnewargs__`` the named-tuple factory made (pickle calls them; ``_make``
    does not).
    """
    if not (issubclass(t, tuple) and hasattr(t, "_fields") and hasattr(t, "_make")):
        return False
    made = next((c for c in t.__mro__ if "_fields" in c.__dict__), None)
    return (
        made is not None
        and t.__dictoffset__ == 0
        and t.__reduce__ is tuple.__reduce__
        and t.__reduce_ex__ is tuple.__reduce_ex__
        and all(getattr(t, name, None) is getattr(made, name, None) for name in _MADE)
    )


def _all_immutable(values: Any) -> bool:
    """Whether every value of ``values`` (a re-iterable) is an atom or a tuple of atoms.

    Checked with C iteration only: the types of the values, then the types of
    the tuples' items. ``False`` is "not known to be": the caller copies item
    by item.
    """
    types = set(map(type, values))
    if types <= _ATOMS:
        return True
    if not types <= _TUPLES:
        for t in types - _ATOMS - _TUPLES:
            if _kind_of(t) not in (_ATOM, _NAMED):
                return False
        if not types <= _ATOMS | _TUPLES:  # pragma: no cover - classified just above
            return False
        if not types.isdisjoint(_ATOMS):
            return False  # mixed atoms and tuples: item by item
    return set(map(type, chain.from_iterable(values))) <= _ATOMS


_KNOWN_KEYS: dict[int, Any] = {}
"""Dict keys found immutable before, by id, each held (so its id stays its own).

The keys of the common messages are the same objects message after message (a
follower's fetch names its partitions by the tuples its replicas are keyed by,
and the answer by the same): found here, they need no second look."""
_KNOWN_KEYS_MAX = 100_000
"""Forget them all beyond this many (keys made for one message only would pile up)."""


def _immutable_keys(keys: Any) -> bool:
    """:func:`_all_immutable` for a dict's keys, remembering those it found immutable."""
    if None not in map(_KNOWN_KEYS.get, map(id, keys)):
        return True
    if not _all_immutable(keys):
        return False
    if len(_KNOWN_KEYS) > _KNOWN_KEYS_MAX:
        _KNOWN_KEYS.clear()
    _KNOWN_KEYS.update(zip(map(id, keys), keys, strict=True))
    return True


def _copy(value: Any, memo: dict[int, Any]) -> Any:
    t = type(value)
    kind = _KIND.get(t)
    if kind is None:
        kind = _kind_of(t)
    if kind == _ATOM:
        return value
    if kind in (_TUPLE, _NAMED):
        if set(map(type, value)) <= _ATOMS:
            return value
        items = []
        same = True  # every part immutable (passed as itself): the tuple is too
        for v in value:
            c = _copy(v, memo)
            same = same and c is v
            items.append(c)
        if same:
            return value
        return tuple(items) if kind == _TUPLE else t._make(items)
    if kind == _DICT:
        seen = memo.get(id(value))
        if seen is not None:
            return seen
        if _immutable_keys(value) and _all_immutable(value.values()):
            out: dict[Any, Any] = dict(value)
        else:
            out = {}
            memo[id(value)] = out
            for k, v in value.items():
                out[_copy(k, memo)] = _copy(v, memo)
        memo[id(value)] = out
        return out
    if kind == _LIST:
        seen = memo.get(id(value))
        if seen is not None:
            return seen
        if _all_immutable(value):
            new: list[Any] = list(value)
        else:
            new = []
            memo[id(value)] = new
            new.extend(_copy(v, memo) for v in value)
        memo[id(value)] = new
        return new
    raise _Slow


def copy_message(value: Any) -> Any:
    """A copy of a message as Ray's serialization would make it (see the module docstring).

    The result equals ``value``, shares no mutable part with it, and keeps the
    sharing among its own parts; actor handles and :data:`SHARED_TYPES` values
    arrive as themselves.
    """
    try:
        return _copy(value, {})
    except _Slow:
        return pickle_copy(value)
