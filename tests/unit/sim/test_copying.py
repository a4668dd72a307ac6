"""Message copies: equal to pickle's, sharing nothing mutable, quick for the common shapes."""

from __future__ import annotations

import collections
import enum
import pickle
import random
from collections import OrderedDict, defaultdict
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import pytest

from actors.sim import copying
from actors.sim.copying import SHARED_TYPES, copy_message, pickle_copy
from emulator.broker.messages import (
    OffsetsSnapshot,
    ReplicaFetchAnswer,
    SessionAnswer,
    SessionFetch,
)


class Color(enum.Enum):
    RED = (1, [2])  # a mutable part: the member is still a singleton


class Pair(NamedTuple):
    a: Any
    b: Any


class WithDict(Pair):  # no __slots__: instances have a __dict__
    pass


_Base = collections.namedtuple("_Base", "a b")


class OwnNew(_Base):
    """A named tuple with a ``__new__`` of its own, which pickle calls (``_make`` would not)."""

    __slots__ = ()
    made: ClassVar[int] = 0

    def __new__(cls, a: Any, b: Any) -> OwnNew:
        OwnNew.made += 1
        return super().__new__(cls, a, b)


@dataclass
class Box:
    items: list[int]


def _mutables(value: Any, out: dict[int, Any]) -> dict[int, Any]:
    """Every dict, list, set and Box inside ``value``, by id."""
    if isinstance(value, dict):
        out[id(value)] = value
        for k, v in value.items():
            _mutables(k, out)
            _mutables(v, out)
    elif isinstance(value, list | set | Box):
        out[id(value)] = value
        for v in value.items if isinstance(value, Box) else value:
            _mutables(v, out)
    elif isinstance(value, tuple):
        for v in value:
            _mutables(v, out)
    return out


def _same_shape(a: Any, b: Any) -> None:
    """Equal, of the same types all the way down (pickle's copy and the quick one)."""
    assert type(a) is type(b)
    assert a == b
    if isinstance(a, dict):
        assert list(a) == list(b)  # insertion order kept
        for k in a:
            _same_shape(a[k], b[k])
    elif isinstance(a, list | tuple):
        for x, y in zip(a, b, strict=True):
            _same_shape(x, y)


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    atoms: list[Any] = [
        rng.randrange(-5, 10**20),
        rng.random(),
        f"s{rng.randrange(9)}",
        b"b",
        True,
        None,
        Color.RED,
        OffsetsSnapshot({"g": {("t", 0): 1}}),
    ]
    if depth >= 3 or rng.random() < 0.35:
        return rng.choice(atoms)
    n = rng.randrange(0, 5)
    pick = rng.randrange(6)
    if pick == 0:
        return [_random_value(rng, depth + 1) for _ in range(n)]
    if pick == 1:
        return tuple(_random_value(rng, depth + 1) for _ in range(n))
    if pick == 2:
        return {(f"t{i}", i): _random_value(rng, depth + 1) for i in range(n)}
    if pick == 3:
        return Pair(_random_value(rng, depth + 1), _random_value(rng, depth + 1))
    if pick == 4:
        return ReplicaFetchAnswer(n, n, 0, None if n % 2 else OffsetsSnapshot({}))
    return [SessionAnswer(i, i, i + 1) for i in range(n)]


@pytest.mark.parametrize("seed", range(40))
def test_a_copy_equals_pickles_and_shares_nothing_mutable(seed: int) -> None:
    rng = random.Random(seed)
    value = (_random_value(rng), _random_value(rng), [_random_value(rng)])
    got = copy_message(value)
    _same_shape(got, pickle_copy(value))
    _same_shape(got, value)
    assert not set(_mutables(got, {})) & set(_mutables(value, {}))


def test_the_common_messages_take_the_quick_path(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(value: Any) -> Any:
        raise AssertionError(f"pickled: {value!r}")

    monkeypatch.setattr(copying, "pickle_copy", refused)
    snap = OffsetsSnapshot({"g": {("__consumer_offsets", 1): 3}})
    fetches = {("__consumer_offsets", i): i for i in range(20)}
    answer = {("__consumer_offsets", i): ReplicaFetchAnswer(i, i, 0, snap) for i in range(20)}
    session: tuple[Any, ...] = (
        "host-0",
        True,
        [SessionFetch(0, "t", 1, None, "smallest", 500)],
        [],
        1.5,
    )
    for value in ((1, fetches), answer, session, [SessionAnswer(0, 1, 2)], {"a": 1}):
        got = copy_message(value)
        assert got == value
    got_answer = copy_message(answer)
    assert got_answer is not answer
    assert got_answer[("__consumer_offsets", 3)].offsets is snap  # shared by type
    got_session = copy_message(session)
    assert got_session[2] is not session[2] and got_session[3] is not session[3]
    assert got_session[2][0] is session[2][0]  # a named tuple of atoms is immutable


def test_immutable_values_pass_as_themselves() -> None:
    value = ("a", 1, 2.5, None, Color.RED, Pair(1, ("x", b"y")), SHARED_TYPES[0]({}))
    assert copy_message(value) is value
    assert copy_message(Color.RED) is Color.RED


def test_sharing_inside_a_message_is_kept_and_cycles_copy() -> None:
    inner = [1, 2]
    value = {"a": inner, "b": (inner, 3), "c": [inner]}
    got = copy_message(value)
    assert got["a"] is got["b"][0] is got["c"][0]
    assert got["a"] is not inner
    loop: list[Any] = [1]
    loop.append(loop)
    again = copy_message(loop)
    assert again[1] is again and again is not loop


@pytest.mark.parametrize(
    "value",
    [
        {1, 2},
        frozenset({1}),
        Box([1]),
        OrderedDict(a=[1]),
        defaultdict(list, a=[1]),
        WithDict([1], 2),
        ([Box([2])], {"k": {3}}),
    ],
)
def test_other_types_go_through_pickle(value: Any) -> None:
    got = copy_message(value)
    assert got == value and type(got) is type(value)
    assert not set(_mutables(got, {})) & set(_mutables(value, {}))
    assert pickle.dumps(got) == pickle.dumps(pickle_copy(value))


class LikeKey:
    """Hashable, equal to a partition's key, and mutable: never to be shared."""

    def __init__(self) -> None:
        self.seen = 0

    def __hash__(self) -> int:
        return hash(("t", 0))

    def __eq__(self, other: object) -> bool:
        return other == ("t", 0)


def test_keys_known_immutable_are_known_by_identity_only() -> None:
    key = ("t", 0)
    assert copy_message({key: 1}) == {key: 1}  # now known
    got = copy_message({key: 2})
    assert next(iter(got)) is key  # shared: immutable
    odd = LikeKey()
    again = copy_message({odd: 3})
    assert next(iter(again)) is not odd  # equal to a known key, but not it: pickled
    assert isinstance(next(iter(again)), LikeKey)


def test_a_named_tuple_with_its_own_new_is_pickled() -> None:
    value = OwnNew(1, ["x"])
    before = OwnNew.made
    got = copy_message(value)
    assert OwnNew.made == before + 1  # pickle rebuilt it through its __new__
    assert got == value and type(got) is OwnNew and got.b is not value.b
