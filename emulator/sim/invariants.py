"""The invariants of one protocol's run, checked incrementally over its events.

The offline checkers (``analysis/checkers.py``, Spark) read a whole event log;
the sim engine's monitor (:mod:`emulator.sim.monitor`, design §5.2) sees the same
events one at a time, in emission order, grouped into *instants* (every event
with one ``t_emu_ms``). This module re-expresses the offline rules over that
stream; each check says in its docstring which offline rule it mirrors. The
core may not import ``analysis``, so nothing here is shared with the Spark code
but the vocabulary (:mod:`emulator.anomalies`) and the interval arithmetic
(:mod:`emulator.intervals`).

A check hands back :class:`Finding` records, allowed or not; the monitor keeps
the ones the run's protocol and commit mode do not allow
(:func:`emulator.anomalies.allowed_kinds`) as violations and counts the rest.

**When a finding is certain.** A finding is made as soon as no later event can
undo it, which is when its instant closes for most rules:

* ``commit_by_non_owner``: at the commit's instant. Offline the owner at ``t``
  is the latest claimer (in the protocol's order) still holding; a later claim
  can only cut an ownership *after* its own start, which is after ``t``, so the
  verdict at ``t`` is final.
* ``invalid_assignment``: at the settle point, for the partitions the group is
  known to own by then; a partition that joins the group's universe later (its
  first claim or first produce comes after the settle point: offline the
  universe is the whole log's) is judged at :meth:`ProtocolChecks.finish`.
* ``double_processing``: as soon as two members' batches overlap in time and in
  offsets (the window is then certainly a double-processing one), once per
  partition; the exact windows, and ``ordering_overlap`` (which needs a closed
  window: a batch still in hand may yet share records), at the end.
* ``loss`` and ``double_ownership``: at the end (they need the whole log).

**Assumptions** (true of the sim engine's logs):

* one node: ``analysis.ownership.protocol_intervals`` reorders claims only
  across nodes (skewed clocks); on one node it is the identity, so the
  ownership intervals here are in the clock's order;
* claims carry their protocol order key (``zxid`` for the legacy consumer,
  ``generation`` for the modern ones), as the emulator's members write them;
  a partition with a claim without one falls back to time order from then on,
  as offline, but a verdict already given under the keyed order stays;
* ties at one instant that Spark leaves unordered (two events of one member at
  one ``t`` and ``ord``) are taken in emission order, which is the order they
  happened in.

Not checked here: ``duplicate`` and ``stranded_partition`` (allowed for every
protocol under every commit mode; :data:`UNCHECKED_KINDS`).
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from emulator.anomalies import (
    COMMIT_BY_NON_OWNER,
    DOUBLE_OWNERSHIP,
    DOUBLE_PROCESSING,
    DUPLICATE,
    INVALID_ASSIGNMENT,
    LOSS,
    LOSS_AT_END,
    LOSS_COMMITTED_BEFORE_PROCESSED,
    LOSS_SKIPPED,
    ORDERING_OVERLAP,
    STRANDED_PARTITION,
    UNBALANCED_ASSIGNMENT,
    base_protocol,
)
from emulator.events import EventKind as K
from emulator.intervals import overlap_windows, overlaps

# ----------------------------------------------------------------- vocabulary

NON_ZOMBIE_DOUBLE_OWNERSHIP: Final = "non_zombie_double_ownership"
"""Two members hold a partition at once and neither was removed from the group
since its claim (design §5.2 family 2): what a coordinator bug does, not a zombie."""
PRODUCED_OVERLAP: Final = "produced_overlap"
"""Two ``produced`` ranges of one partition share an offset (no unclean election)."""
LEADER_EPOCH_CONFLICT: Final = "leader_epoch_conflict"
"""Two leaders announced for one partition's leader epoch."""
CONTROLLER_EPOCH_CONFLICT: Final = "controller_epoch_conflict"
"""Two brokers elected controller with one controller epoch."""

STRICT_KINDS: Final = (NON_ZOMBIE_DOUBLE_OWNERSHIP,)
"""Strict safety (design §5.2 family 2): never allowed, checked when asked."""
SELF_CHECK_KINDS: Final = (PRODUCED_OVERLAP, LEADER_EPOCH_CONFLICT, CONTROLLER_EPOCH_CONFLICT)
"""Engine self-checks that events can tell (design §5.2 family 3): never allowed."""
CHECKED_KINDS: Final = (
    COMMIT_BY_NON_OWNER,
    INVALID_ASSIGNMENT,
    UNBALANCED_ASSIGNMENT,
    LOSS,
    DOUBLE_PROCESSING,
    ORDERING_OVERLAP,
    DOUBLE_OWNERSHIP,
)
"""The offline vocabulary's kinds these checks find."""
UNCHECKED_KINDS: Final = (DUPLICATE, STRANDED_PARTITION)
"""The offline vocabulary's kinds these checks do not find."""

SETTLED_STATES: Final = ("Stable", "Empty", "Dead")
"""The coordinator's group states that are not rebalancing (``analysis.timelines``)."""

TopicPartition = tuple[str, int]
Key = tuple[str | None, str, int]
"""A partition within a group: ``(group, topic, partition)`` (offline ``GTP`` less the protocol)."""
Event = Mapping[str, object]
Entry = tuple[int, Event]
"""An event and its arrival index at the monitor."""


@dataclass(frozen=True)
class EventRef:
    """Which event: its arrival index at the monitor, and its actor's log ``seq``.

    ``seq`` numbers the events of one actor's log file from 0 (so ``(actor, seq)``
    names an event in the run's logs); ``index`` numbers every event the monitor saw.
    """

    index: int
    actor: str
    seq: int


@dataclass(frozen=True)
class Finding:
    """One anomaly, in the offline checkers' terms (``ANOMALY_SCHEMA`` less the protocol).

    Attributes:
        kind: the anomaly kind (:mod:`emulator.anomalies`) or a strict / self-check kind.
        group: the consumer group, if the kind has one.
        topic: the partition's topic, if the kind is about a partition.
        partition: the partition number.
        members: the members involved, sorted.
        t_start_ms: where the anomaly starts, in emulated ms.
        t_end_ms: where it ends (``t_start_ms`` for an instant).
        refs: the events that show it.
        message: one human sentence.
        offset_start: first offset, for a range of offsets.
        offset_end: end of that range (exclusive).
        count: a count, as the offline row's (members, offsets, ...).
        detail: the offline row's ``detail`` (why, ``members=...``).
    """

    kind: str
    group: str | None
    topic: str | None
    partition: int | None
    members: tuple[str, ...]
    t_start_ms: float
    t_end_ms: float
    refs: tuple[EventRef, ...]
    message: str
    offset_start: int | None = None
    offset_end: int | None = None
    count: int | None = None
    detail: str | None = None


# -------------------------------------------------------------------- helpers


def _s(v: object) -> str | None:
    return v if isinstance(v, str) else None


def _i(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _f(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v)


def member_of(ev: Event) -> str | None:
    """A member's scenario name, its id when the name is absent (``analysis.frames.member_col``)."""
    m = _s(ev.get("member"))
    return m if m is not None else _s(ev.get("member_id"))


def who_of(ev: Event) -> str:
    """The processing identity :mod:`emulator.summary` uses: member id, else name, else ``?``."""
    return _s(ev.get("member_id")) or _s(ev.get("member")) or "?"


def parse_partitions(text: object) -> list[TopicPartition]:
    """``'topic:p,topic:p'`` as pairs, as ``analysis.frames.explode_partitions`` reads it."""
    out: list[TopicPartition] = []
    if not isinstance(text, str) or not text:
        return out
    for item in text.split(","):
        topic, sep, num = item.rpartition(":")
        if sep and num.isdigit():
            out.append((topic, int(num)))
    return out


def ref_of(entry: Entry) -> EventRef:
    """The :class:`EventRef` of an arrived event."""
    index, ev = entry
    seq = _i(ev.get("seq"))
    return EventRef(index, _s(ev.get("actor")) or "", -1 if seq is None else seq)


def _tp(ev: Event) -> TopicPartition | None:
    topic, part = _s(ev.get("topic")), _i(ev.get("partition"))
    return None if topic is None or part is None else (topic, part)


def _t(ev: Event) -> float:
    t = _f(ev.get("t_emu_ms"))
    return 0.0 if t is None else t


def _add_span(spans: list[tuple[int, int]], s: int, e: int) -> None:
    """Insert ``[s, e)`` into sorted disjoint spans, joining touching ones (``merge_spans``)."""
    if e <= s:
        return
    i = bisect.bisect_left(spans, (s, s))
    if i > 0 and spans[i - 1][1] >= s:
        i -= 1
    j = i
    while j < len(spans) and spans[j][0] <= e:
        s, e = min(s, spans[j][0]), max(e, spans[j][1])
        j += 1
    spans[i:j] = [(s, e)]


def _overlapping(spans: list[tuple[int, int]], s: int, e: int) -> tuple[int, int] | None:
    """The first of sorted disjoint spans that shares an offset with ``[s, e)``."""
    i = bisect.bisect_right(spans, (s, math.inf))  # the first span starting after s
    for k in (i - 1, i):
        if 0 <= k < len(spans) and spans[k][0] < e and s < spans[k][1]:
            return spans[k]
    return None


def _subtract(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The maximal ranges of sorted disjoint ``a`` that sorted disjoint ``b`` does not cover."""
    out: list[tuple[int, int]] = []
    j = 0
    for s, e in a:
        cur = s
        while j < len(b) and b[j][1] <= cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] < e:
            if b[k][0] > cur:
                out.append((cur, b[k][0]))
            cur = max(cur, b[k][1])
            k += 1
        if cur < e:
            out.append((cur, e))
    return out


# ------------------------------------------------------------------ ownership


@dataclass
class Holding:
    """One ownership interval: a member holds a partition from ``s`` until ``e``.

    Mirrors a row of ``analysis.ownership.ownership_intervals_all``: ``okey`` is
    the claim's protocol order key (``zxid`` / ``generation``), ``e`` is ``None``
    while the interval is open (offline: the run's last event time).
    """

    key: Key
    member: str
    s: float
    okey: int | None
    claim: EventRef
    e: float | None = None
    end: EventRef | None = None


class _Claims:
    """One partition's claims in the protocol's order (``effective_intervals``' window).

    Sorted by ``(okey, s, member)`` while every claim has an ``okey``, else by
    ``(s, member)``: the order in which each claim cuts the one before it.
    """

    def __init__(self) -> None:
        self.items: list[Holding] = []
        self.keyed = True

    def _key(self, h: Holding) -> tuple[int, float, str]:
        okey = h.okey if self.keyed and h.okey is not None else 0
        return (okey, h.s, h.member)

    def add(self, h: Holding) -> None:
        if self.keyed and h.okey is None:
            self.keyed = False
            self.items.sort(key=self._key)
        bisect.insort(self.items, h, key=self._key)


class Members:
    """Member names and their protocol ids, and the coordinator's removals.

    Mirrors the ``ids`` and ``removed`` frames of ``analysis.timelines.assignment_spans``:
    a ``member_removed`` (written by a coordinator: no ``member``) names a
    member id; the members' own events pair ids with names.
    """

    def __init__(self) -> None:
        self.names: dict[tuple[str | None, str], set[str]] = defaultdict(set)
        self.ids: dict[tuple[str | None, str], set[str]] = defaultdict(set)
        self.removals: dict[tuple[str | None, str], list[tuple[float, EventRef]]] = defaultdict(
            list
        )

    def learn(self, group: str | None, member: str, member_id: str) -> bool:
        """Pair ``member_id`` with ``member``; True if the pair is new."""
        names = self.names[(group, member_id)]
        if member in names:
            return False
        names.add(member)
        self.ids[(group, member)].add(member_id)
        return True

    def removed_since(self, group: str | None, member: str, t: float) -> EventRef | None:
        """A removal of one of ``member``'s ids at or after ``t``, if any."""
        for mid in sorted(self.ids.get((group, member), ())):
            for when, ref in self.removals.get((group, mid), ()):
                if when >= t:
                    return ref
        return None


_OWNERSHIP_KINDS: Final[frozenset[str]] = frozenset(
    k.value
    for k in (
        K.OWNERSHIP_CLAIMED,
        K.OWNERSHIP_RELEASED,
        K.PARTITIONS_ASSIGNED,
        K.PARTITIONS_REVOKED,
        K.PARTITIONS_LOST,
        K.CONSUMER_CRASHED,
        K.CONSUMER_STOPPED,
        K.ZK_SESSION_EXPIRED,
    )
)
"""The kinds :meth:`Ownership.apply` reads; it passes over the others."""


class Ownership:
    """Who holds which partition, from the claim and release events.

    Mirrors ``analysis.ownership.ownership_changes`` and ``ownership_intervals_all``:
    claims are ``ownership_claimed`` and the partition lists of
    ``partitions_assigned``; releases are ``ownership_released`` and the lists of
    ``partitions_revoked`` / ``partitions_lost``; a member's ``consumer_crashed``,
    ``consumer_stopped`` or ``zk_session_expired`` ends all it holds. At one
    instant a member's releases come before its claims, repeated claims and
    releases are dropped (a claim of what it holds, a release of what it does
    not), and duplicate claims of one instant merge (the largest order key).
    """

    def __init__(self, protocol: str) -> None:
        self.legacy = base_protocol(protocol) == "zookeeper"
        self.claims: dict[Key, _Claims] = {}
        self.open: dict[Key, dict[str, Holding]] = {}
        self.held: dict[tuple[str | None, str], set[Key]] = defaultdict(set)
        self.all: list[Holding] = []

    def _okey(self, ev: Event) -> int | None:
        return _i(ev.get("zxid")) if self.legacy else _i(ev.get("generation"))

    def apply(self, entries: Sequence[Entry]) -> list[Holding]:
        """Apply one instant's changes; return the intervals it opened."""
        # one row per (key, member, t, typ): the largest order key, the first event
        rows: dict[tuple[Key, str, float, int], tuple[int | None, EventRef]] = {}

        def row(key: Key, member: str, t: float, typ: int, okey: int | None, ref: EventRef) -> None:
            cur = rows.get((key, member, t, typ))
            if cur is None:
                rows[(key, member, t, typ)] = (okey, ref)
            elif okey is not None:
                rows[(key, member, t, typ)] = (
                    okey if cur[0] is None else max(cur[0], okey),
                    cur[1],
                )

        for entry in entries:
            ev = entry[1]
            kind = ev.get("kind")
            if not isinstance(kind, str) or kind not in _OWNERSHIP_KINDS:
                continue  # no claim, no release (most events: produced, processed)
            member = member_of(ev)
            if member is None:
                continue
            group = _s(ev.get("group"))
            t = _t(ev)
            if kind in (K.OWNERSHIP_CLAIMED, K.OWNERSHIP_RELEASED):
                tp = _tp(ev)
                if tp is not None:
                    typ = 1 if kind == K.OWNERSHIP_CLAIMED else 0
                    row((group, *tp), member, t, typ, self._okey(ev), ref_of(entry))
            elif kind in (K.PARTITIONS_ASSIGNED, K.PARTITIONS_REVOKED, K.PARTITIONS_LOST):
                typ = 1 if kind == K.PARTITIONS_ASSIGNED else 0
                for tp in parse_partitions(ev.get("partitions")):
                    row((group, *tp), member, t, typ, self._okey(ev), ref_of(entry))
            elif kind in (K.CONSUMER_CRASHED, K.CONSUMER_STOPPED, K.ZK_SESSION_EXPIRED):
                for key in sorted(self.held.get((group, member), ()), key=str):
                    row(key, member, t, 0, None, ref_of(entry))
        opened: list[Holding] = []
        if not rows:
            return opened
        for (key, member, t, typ), (okey, ref) in sorted(
            rows.items(), key=lambda kv: (kv[0][2], kv[0][3], str(kv[0][0]), kv[0][1])
        ):
            here = self.open.get(key)
            cur = None if here is None else here.get(member)
            if typ == 0:
                if here is not None and cur is not None:
                    cur.e, cur.end = t, ref
                    del here[member]
                    self.held[(key[0], member)].discard(key)
            elif cur is None:
                h = Holding(key, member, t, okey, ref)
                self.open.setdefault(key, {})[member] = h
                self.held[(key[0], member)].add(key)
                self.claims.setdefault(key, _Claims()).add(h)
                self.all.append(h)
                opened.append(h)
        return opened

    def owner_check(self, key: Key, member: str, t: float) -> tuple[bool, str | None]:
        """Whether ``member`` was the current owner of ``key`` at ``t``, and who was.

        Mirrors ``check_commit_by_non_owner`` over ``effective_intervals``: an
        interval is cut at the start of the next claim in the protocol's order;
        ``member`` is the owner if one of its cut intervals has ``s <= t <= e``;
        the owner named is one whose cut interval has ``s <= t < e`` (the largest
        name, as Spark's ``max``).
        """
        claims = self.claims.get(key)
        if claims is None:
            return False, None
        items = claims.items
        ok = False
        owner: str | None = None
        for i, h in enumerate(items):
            e = math.inf if h.e is None else h.e
            if i + 1 < len(items):
                e = min(e, items[i + 1].s)
            if h.s <= t <= e and h.member == member:
                ok = True
            if h.s <= t < e and (owner is None or h.member > owner):
                owner = h.member
        return ok, owner

    def holders(self, key: Key) -> list[Holding]:
        """The open intervals of ``key``, by member."""
        here = self.open.get(key, {})
        return [here[m] for m in sorted(here)]


# ----------------------------------------------------------- group timelines


@dataclass
class _Span:
    """A member's latest completed assignment (``assignment_spans``): ``None``: not in the group."""

    s: float
    partitions: tuple[TopicPartition, ...] | None
    ref: EventRef


@dataclass
class _Settle:
    """A settle point kept for the end: what it gave to partitions not yet known then."""

    batch: int
    t: float
    group: str | None
    given_unknown: dict[TopicPartition, tuple[str, ...]]
    refs: tuple[EventRef, ...]


@dataclass
class _Group:
    """One group's timeline state (``analysis.timelines.group_timeline``)."""

    reb: dict[str, int] = field(default_factory=dict)
    busy: int = 0
    settled: bool = True  # ``_was`` defaults to settled before the group's first row
    spans: dict[str, _Span] = field(default_factory=dict)


_LIFE_REB: Final[Mapping[str, tuple[int, int]]] = {
    # kind -> (ord, reb): ``member_timeline``'s ``reb_v`` and ``ord``
    K.CONSUMER_STARTED.value: (0, 1),
    K.REBALANCE_TRIGGERED.value: (2, 1),
    K.REBALANCE_STARTED.value: (2, 1),
    K.REBALANCE_COMPLETED.value: (2, 0),
    K.REBALANCE_FAILED.value: (2, 0),
    K.CONSUMER_STOPPED.value: (2, 0),
    K.CONSUMER_CRASHED.value: (2, 0),
}


_TIMELINE_KINDS: Final[frozenset[str]] = frozenset(
    {
        K.GROUP_STATE_CHANGED.value,
        K.MEMBER_REMOVED.value,
        K.REBALANCE_COMPLETED.value,
        K.REBALANCE_FAILED.value,
        K.CONSUMER_STOPPED.value,
        K.CONSUMER_CRASHED.value,
        *_LIFE_REB,
    }
)
"""The kinds :meth:`Assignments.on_batch` reads; it passes over the others."""


class Universe:
    """The partitions each group is expected to own (``analysis.timelines.partition_universe``).

    Those it ever claimed, and every produced partition of a topic it claimed
    from. Offline that is the whole log's; here it grows, and each partition
    remembers the instant (batch number) it joined.
    """

    def __init__(self) -> None:
        self.entered: dict[str | None, dict[TopicPartition, int]] = defaultdict(dict)
        self.topics: dict[str | None, set[str]] = defaultdict(set)
        self.produced: dict[str, set[int]] = defaultdict(set)

    def claim(self, group: str | None, tp: TopicPartition, batch: int) -> None:
        """A claim of ``tp`` by a member of ``group``."""
        got = self.entered[group]
        got.setdefault(tp, batch)
        if tp[0] not in self.topics[group]:
            self.topics[group].add(tp[0])
            for p in sorted(self.produced.get(tp[0], ())):
                got.setdefault((tp[0], p), batch)

    def produce(self, tp: TopicPartition, batch: int) -> None:
        """A ``produced`` batch of ``tp``."""
        if tp[1] in self.produced[tp[0]]:
            return
        self.produced[tp[0]].add(tp[1])
        for group, topics in self.topics.items():
            if tp[0] in topics:
                self.entered[group].setdefault(tp, batch)


class Assignments:
    """Settle points and the assignment check at each one.

    Mirrors ``analysis.timelines.settle_points`` and ``check_assignments``: a
    group settles at an instant where no member is mid-rebalance (per member the
    last of ``consumer_started`` / ``rebalance_triggered`` / ``rebalance_started``
    (mid) and ``rebalance_completed`` / ``rebalance_failed`` / ``consumer_stopped``
    / ``consumer_crashed`` (not), ``consumer_started`` first at an instant) and
    the coordinator's last ``group_state_changed`` is Stable, Empty or Dead,
    having not been so at its previous instant. There, the members' latest
    completed assignments (``rebalance_completed``'s partitions,
    ``rebalance_failed``: none; ended by a stop, a crash or the coordinator's
    ``member_removed`` of the member's id) must give every partition of the
    group's universe to exactly one member (``invalid_assignment``, ``count`` =
    how many), and their sizes may differ by one at most
    (``unbalanced_assignment``). Only settle points where some member has an
    assignment are judged.
    """

    def __init__(self, members: Members, universe: Universe) -> None:
        self.members = members
        self.universe = universe
        self.groups: dict[str | None, _Group] = {}
        self.settles: list[_Settle] = []

    def _group(self, g: str | None) -> _Group:
        grp = self.groups.get(g)
        if grp is None:
            grp = self.groups[g] = _Group()
        return grp

    def learned(self, group: str | None, member: str, member_id: str) -> None:
        """A member id paired with a name: removals of that id seen before apply now.

        Offline the pairing is the whole log's; here a removal that arrived before
        the pairing ends the member's assignment only from now on (a settle point
        judged in between saw it still assigned).
        """
        for t, ref in self.members.removals.get((group, member_id), ()):
            grp = self._group(group)
            span = grp.spans.get(member)
            if span is not None and span.s < t:
                grp.spans[member] = _Span(t, None, ref)

    def on_batch(self, batch: int, t_now: float, entries: Sequence[Entry]) -> list[Finding]:
        """Apply one instant's events; judge the groups that settle at it."""
        life: dict[tuple[str | None, str], list[tuple[int, int, int]]] = defaultdict(list)
        touched: set[str | None] = set()
        for entry in entries:
            index, ev = entry
            kind = _s(ev.get("kind")) or ""
            if kind not in _TIMELINE_KINDS:
                continue  # nothing of a group's timeline (most events: produced, processed)
            group = _s(ev.get("group"))
            member = _s(ev.get("member"))
            if kind == K.GROUP_STATE_CHANGED and group is not None:
                state = _s(ev.get("state"))
                self._group(group).busy = 0 if state in SETTLED_STATES else 1
                touched.add(group)
                continue
            if kind == K.MEMBER_REMOVED and member is None:
                mid = _s(ev.get("member_id"))
                if mid is not None:
                    when = _t(ev)
                    for name in sorted(self.members.names.get((group, mid), ())):
                        self._group(group).spans[name] = _Span(when, None, ref_of(entry))
                continue
            if member is None:
                continue
            if kind == K.REBALANCE_COMPLETED:
                parts = tuple(parse_partitions(ev.get("partitions")))
                self._group(group).spans[member] = _Span(_t(ev), parts, ref_of(entry))
            elif kind == K.REBALANCE_FAILED:
                self._group(group).spans[member] = _Span(_t(ev), (), ref_of(entry))
            elif kind in (K.CONSUMER_STOPPED, K.CONSUMER_CRASHED):
                self._group(group).spans[member] = _Span(_t(ev), None, ref_of(entry))
            if group is not None and kind in _LIFE_REB:
                order, reb = _LIFE_REB[kind]
                life[(group, member)].append((order, index, reb))
                touched.add(group)
        for (group, member), changes in life.items():
            self._group(group).reb[member] = max(changes)[2] if changes else 0
        out: list[Finding] = []
        for group in sorted(touched, key=str):
            grp = self._group(group)
            settled = sum(grp.reb.values()) <= 0 and grp.busy <= 0
            if settled and not grp.settled:
                out.extend(self._judge(batch, t_now, group, grp))
            grp.settled = settled
        return out

    def _judge(self, batch: int, t: float, group: str | None, grp: _Group) -> list[Finding]:
        snap = {m: sp for m, sp in sorted(grp.spans.items()) if sp.partitions is not None}
        if not snap:
            return []
        refs = tuple(sp.ref for sp in snap.values())
        out: list[Finding] = []
        sizes = [len(sp.partitions or ()) for sp in snap.values()]
        lo, hi = min(sizes), max(sizes)
        if hi - lo > 1:
            out.append(
                Finding(
                    UNBALANCED_ASSIGNMENT,
                    group,
                    None,
                    None,
                    tuple(snap),
                    t,
                    t,
                    refs,
                    f"group {group} settled at {t:.1f} ms with {lo} to {hi} partitions a member",
                    count=len(snap),
                    detail=f"min={lo} max={hi}",
                )
            )
        given: dict[TopicPartition, list[str]] = defaultdict(list)
        for m, sp in snap.items():
            for tp in sp.partitions or ():
                given[tp].append(m)
        known = self.universe.entered.get(group, {})
        for tp in sorted(known):
            who = tuple(sorted(given.get(tp, ())))
            if len(who) != 1:
                out.append(_invalid(group, tp, who, t, refs))
        unknown = {tp: tuple(sorted(ms)) for tp, ms in given.items() if tp not in known}
        self.settles.append(_Settle(batch, t, group, unknown, refs))
        return out

    def finish(self) -> list[Finding]:
        """Settle points judged again for the partitions that joined a universe after them."""
        out: list[Finding] = []
        for sp in self.settles:
            for tp, when in sorted(self.universe.entered.get(sp.group, {}).items()):
                if when > sp.batch:
                    who = sp.given_unknown.get(tp, ())
                    if len(who) != 1:
                        out.append(_invalid(sp.group, tp, who, sp.t, sp.refs))
        return out


def _invalid(
    group: str | None,
    tp: TopicPartition,
    who: tuple[str, ...],
    t: float,
    refs: tuple[EventRef, ...],
) -> Finding:
    what = "given to no member" if not who else f"given to {len(who)} members ({', '.join(who)})"
    return Finding(
        INVALID_ASSIGNMENT,
        group,
        tp[0],
        tp[1],
        who,
        t,
        t,
        refs,
        f"{tp[0]}:{tp[1]} was {what} when group {group} settled at {t:.1f} ms",
        count=len(who),
        detail="unassigned" if not who else "assigned to " + ",".join(who),
    )


# ----------------------------------------------------------------- data path


@dataclass(slots=True)
class _Batch:
    """One processed batch (``processed_batches``): ``[t0, t1]`` over offsets ``[os, oe)``.

    ``entry`` is the ``processed`` event as it arrived; its :class:`EventRef` is
    made only when a finding names the batch (:attr:`ref`).
    """

    t0: float
    t1: float
    who: str
    member: str
    group: str | None
    os: int
    oe: int
    entry: Entry

    @property
    def ref(self) -> EventRef:
        """The batch's event."""
        return ref_of(self.entry)


class _Busy:
    """One partition's processed batches, sorted by start, for range look-ups."""

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.items: list[_Batch] = []
        self.longest = 0.0

    def add(self, b: _Batch) -> None:
        i = bisect.bisect_right(self.starts, b.t0)
        self.starts.insert(i, b.t0)
        self.items.insert(i, b)
        self.longest = max(self.longest, b.t1 - b.t0)

    def during(self, w0: float, w1: float) -> list[_Batch]:
        """The batches busy somewhere in ``(w0, w1)``: ``t0 < w1`` and ``w0 < t1``."""
        lo = bisect.bisect_left(self.starts, w0 - self.longest)
        hi = bisect.bisect_left(self.starts, w1)
        return [b for b in self.items[lo:hi] if w0 < b.t1]


class Processing:
    """Two members processing one partition at once.

    Mirrors ``check_double_processing`` (``emulator.intervals.overlap_windows``
    over the ``processed`` batches ``[t_emu_ms - duration_ms, t_emu_ms]`` with a
    positive duration, per partition, by member id else name): a window in which
    two members processed a common offset is ``double_processing``, else
    ``ordering_overlap``.

    Args:
        early: whether to report ``double_processing`` as soon as two members'
            batches overlap in time and offsets (once per partition until the end).
    """

    def __init__(self, early: Callable[[], bool]) -> None:
        self.busy: dict[TopicPartition, _Busy] = defaultdict(_Busy)
        self.early = early
        self.reported: dict[TopicPartition, tuple[float, float]] = {}

    def add(self, entry: Entry) -> Finding | None:
        """One ``processed`` event; a certain ``double_processing`` finding if early."""
        ev = entry[1]
        tp = _tp(ev)
        t1, took = _f(ev.get("t_emu_ms")), _f(ev.get("duration_ms"))
        os_, oe = _i(ev.get("offset_start")), _i(ev.get("offset_end"))
        if tp is None or t1 is None or took is None or os_ is None or oe is None or took <= 0:
            return None
        t0 = t1 - took
        if not t1 > t0:
            return None
        group = _s(ev.get("group"))
        name = _s(ev.get("member"))
        mid = _s(ev.get("member_id"))
        # who_of and member_of, inlined: every processed batch passes here
        member = (name if name is not None else mid) or "?"
        b = _Batch(t0, t1, mid or name or "?", member, group, os_, oe, entry)
        busy = self.busy[tp]
        found: Finding | None = None
        if tp not in self.reported and self.early():
            for o in busy.during(b.t0, b.t1):
                if o.who != b.who and overlaps(o.os, o.oe, b.os, b.oe):
                    w0, w1 = max(o.t0, b.t0), min(o.t1, b.t1)
                    self.reported[tp] = (w0, w1)
                    found = _processing(DOUBLE_PROCESSING, tp, w0, w1, [o, b])
                    break
        busy.add(b)
        return found

    def finish(self) -> list[Finding]:
        """Every window, exactly; a double-processing window reported early is not repeated."""
        out: list[Finding] = []
        for tp in sorted(self.busy):
            busy = self.busy[tp]
            for w0, w1, _who in overlap_windows((b.t0, b.t1, b.who) for b in busy.items):
                inside = busy.during(w0, w1)
                same = any(
                    a.who != b.who and overlaps(a.os, a.oe, b.os, b.oe)
                    for i, a in enumerate(inside)
                    for b in inside[i + 1 :]
                )
                early = self.reported.get(tp)
                if same and early is not None and w0 <= early[0] and early[1] <= w1:
                    continue
                kind = DOUBLE_PROCESSING if same else ORDERING_OVERLAP
                out.append(_processing(kind, tp, w0, w1, inside))
        return out


def _processing(
    kind: str,
    tp: TopicPartition,
    w0: float,
    w1: float,
    batches: Sequence[_Batch],
) -> Finding:
    members = tuple(sorted({b.member for b in batches}))
    groups = sorted(b.group for b in batches if b.group is not None)
    group = groups[0] if groups else None  # Spark's min(group) of the window's batches
    what = "the same records" if kind == DOUBLE_PROCESSING else "different records at once"
    return Finding(
        kind,
        group,
        tp[0],
        tp[1],
        members,
        w0,
        w1,
        tuple(b.ref for b in sorted(batches, key=lambda b: b.entry[0])),
        f"{', '.join(members)} processed {what} of {tp[0]}:{tp[1]} "
        f"between {w0:.1f} and {w1:.1f} ms",
        offset_start=min(b.os for b in batches),
        offset_end=max(b.oe for b in batches),
        count=len({b.who for b in batches}),
        detail="members=" + ",".join(members),
    )


@dataclass
class _Offsets:
    """One partition's offsets: produced, processed, abandoned (``offset_coverage``)."""

    produced: list[tuple[int, int]] = field(default_factory=list)
    processed: list[tuple[int, int]] = field(default_factory=list)
    abandoned: list[tuple[int, int, EventRef]] = field(default_factory=list)
    last: int | None = None  # max offset_end of any processed batch
    unclean: bool = False  # an unclean leader election reuses offsets


class Offsets:
    """Produced and processed offsets: loss at the end, and the produce self-check.

    ``loss`` mirrors ``check_loss`` (and :func:`emulator.summary.summarize`'s
    ``unprocessed``): produced ranges no ``processed`` batch covers, each a
    maximal range, why: ``committed_before_processed`` if a
    ``records_abandoned`` range overlaps it, ``unprocessed_at_end`` if it starts
    at or after the partition's last processed offset (or nothing was
    processed), else ``skipped``. ``produced_overlap`` (design §5.2 family 3): a
    ``produced`` range sharing an offset with an earlier one, unless the
    partition had an unclean leader election (which may reuse offsets).
    """

    def __init__(self) -> None:
        self.parts: dict[TopicPartition, _Offsets] = defaultdict(_Offsets)

    def on_event(self, entry: Entry) -> Finding | None:
        """One ``produced``, ``processed``, ``records_abandoned`` or ``leader_changed``."""
        ev = entry[1]
        kind = ev.get("kind")
        tp = _tp(ev)
        if tp is None:
            return None
        po = self.parts[tp]
        if kind == K.LEADER_CHANGED:
            if ev.get("reason") == "unclean":
                po.unclean = True
            return None
        os_, oe = _i(ev.get("offset_start")), _i(ev.get("offset_end"))
        if os_ is None or oe is None:
            return None
        if kind == K.PRODUCED:
            hit = None if po.unclean else _overlapping(po.produced, os_, oe)
            _add_span(po.produced, os_, oe)
            if hit is not None:
                t = _t(ev)
                return Finding(
                    PRODUCED_OVERLAP,
                    None,
                    tp[0],
                    tp[1],
                    (),
                    t,
                    t,
                    (ref_of(entry),),
                    f"{tp[0]}:{tp[1]} offsets [{os_}, {oe}) were produced again "
                    f"(already produced: [{hit[0]}, {hit[1]}))",
                    offset_start=os_,
                    offset_end=oe,
                )
        elif kind == K.PROCESSED:
            _add_span(po.processed, os_, oe)
            po.last = oe if po.last is None else max(po.last, oe)
        elif kind == K.RECORDS_ABANDONED:
            po.abandoned.append((os_, oe, ref_of(entry)))
        return None

    def finish(
        self, group_of: Callable[[TopicPartition], str | None], t_end: float
    ) -> list[Finding]:
        """``loss`` rows, one per lost range."""
        out: list[Finding] = []
        for tp in sorted(self.parts):
            po = self.parts[tp]
            for s, e in _subtract(po.produced, po.processed):
                hits = [r for a, b, r in po.abandoned if a < e and s < b]
                if hits:
                    why = LOSS_COMMITTED_BEFORE_PROCESSED
                elif po.last is None or s >= po.last:
                    why = LOSS_AT_END
                else:
                    why = LOSS_SKIPPED
                out.append(
                    Finding(
                        LOSS,
                        group_of(tp),
                        tp[0],
                        tp[1],
                        (),
                        t_end,
                        t_end,
                        tuple(hits),
                        f"{tp[0]}:{tp[1]} offsets [{s}, {e}) were produced and never "
                        f"processed ({why})",
                        offset_start=s,
                        offset_end=e,
                        count=e - s,
                        detail=why,
                    )
                )
        return out


class Epochs:
    """At most one leader per partition leader epoch, one controller per controller epoch.

    Design §5.2 family 3 (the brokers' self-checks that events can tell): a
    ``leader_changed`` names the leader of a leader epoch (``generation``), a
    ``controller_elected`` the controller of a controller epoch; ZooKeeper's
    conditional writes make each unique.
    """

    def __init__(self) -> None:
        self.leaders: dict[tuple[str, int, int], tuple[int, EventRef]] = {}
        self.controllers: dict[int, tuple[int, EventRef]] = {}

    def on_event(self, entry: Entry) -> Finding | None:
        """One ``leader_changed`` or ``controller_elected``."""
        ev = entry[1]
        broker, epoch = _i(ev.get("broker")), _i(ev.get("generation"))
        if broker is None or epoch is None:
            return None
        t = _t(ev)
        if ev.get("kind") == K.LEADER_CHANGED:
            tp = _tp(ev)
            if tp is None:
                return None
            seen = self.leaders.setdefault((*tp, epoch), (broker, ref_of(entry)))
            if seen[0] != broker:
                return Finding(
                    LEADER_EPOCH_CONFLICT,
                    None,
                    tp[0],
                    tp[1],
                    (),
                    t,
                    t,
                    (seen[1], ref_of(entry)),
                    f"{tp[0]}:{tp[1]} leader epoch {epoch} was given to broker {seen[0]} "
                    f"and to broker {broker}",
                    detail=f"brokers={seen[0]},{broker}",
                )
            return None
        seen = self.controllers.setdefault(epoch, (broker, ref_of(entry)))
        if seen[0] != broker:
            return Finding(
                CONTROLLER_EPOCH_CONFLICT,
                None,
                None,
                None,
                (),
                t,
                t,
                (seen[1], ref_of(entry)),
                f"controller epoch {epoch} was won by broker {seen[0]} and by broker {broker}",
                detail=f"brokers={seen[0]},{broker}",
            )
        return None


# --------------------------------------------------------------- one protocol


_PROCESSED: Final = K.PROCESSED.value
_PRODUCED: Final = K.PRODUCED.value


class ProtocolChecks:
    """Every check of one protocol's run, fed one instant at a time.

    Args:
        protocol: the run protocol (or a series ``<protocol>@<trial>``).
        allowed: the anomaly kinds the run may show, asked when it matters
            (the commit mode is known once ``run_started`` arrived).
        strict: check strict safety (:data:`STRICT_KINDS`).
        self_checks: check what the engine guarantees (:data:`SELF_CHECK_KINDS`).
    """

    def __init__(
        self,
        protocol: str,
        allowed: Callable[[], frozenset[str]],
        *,
        strict: bool = True,
        self_checks: bool = True,
    ) -> None:
        self.protocol = protocol
        self.modern = base_protocol(protocol) != "zookeeper"
        self.allowed = allowed
        self.strict = strict
        self.self_checks = self_checks
        self.members = Members()
        self.ownership = Ownership(protocol)
        self.universe = Universe()
        self.assignments = Assignments(self.members, self.universe)
        self.processing = Processing(lambda: DOUBLE_PROCESSING not in self.allowed())
        self.offsets = Offsets()
        self.epochs = Epochs()
        self.t_last: float | None = None
        self.batches = 0
        self.first_group: str | None = None  # ``protocol_groups``: min group of members' events

    def on_batch(self, t: float, entries: Sequence[Entry]) -> list[Finding]:
        """Evaluate one instant (every event with one ``t_emu_ms``, in arrival order)."""
        self.batches += 1
        batch = self.batches
        out: list[Finding] = []
        # (_t, _s inlined: every event of the run passes here)
        t_last = self.t_last
        for entry in entries:
            ev = entry[1]
            v = ev.get("t_emu_ms")
            et = float(v) if isinstance(v, int | float) and not isinstance(v, bool) else 0.0
            if t_last is None or et > t_last:  # max(t_last, et)
                t_last = et
            v = ev.get("member")
            member = v if isinstance(v, str) else None
            v = ev.get("member_id")
            mid = v if isinstance(v, str) else None
            v = ev.get("group")
            group = v if isinstance(v, str) else None
            if member is not None:
                if group is not None and (self.first_group is None or group < self.first_group):
                    self.first_group = group
                if mid is not None and self.members.learn(group, member, mid):
                    self.assignments.learned(group, member, mid)
            elif mid is not None and ev.get("kind") == K.MEMBER_REMOVED:
                self.members.removals[(group, mid)].append((et, ref_of(entry)))
        self.t_last = t_last
        opened = self.ownership.apply(entries)
        for h in opened:
            self.universe.claim(h.key[0], (h.key[1], h.key[2]), batch)
        for entry in entries:
            ev = entry[1]
            kind = ev.get("kind")
            if kind == _PROCESSED:  # the two kinds of most events, first
                found = self.processing.add(entry)
                if found is not None:
                    out.append(found)
                self.offsets.on_event(entry)
            elif kind == _PRODUCED:
                tp = _tp(ev)
                if tp is not None:
                    self.universe.produce(tp, batch)
                found = self.offsets.on_event(entry)
                if found is not None and self.self_checks:
                    out.append(found)
            elif kind == K.OFFSETS_COMMITTED:
                out.extend(self._commit(entry))
            elif kind in (K.RECORDS_ABANDONED, K.LEADER_CHANGED):
                self.offsets.on_event(entry)
                if kind == K.LEADER_CHANGED and self.self_checks:
                    found = self.epochs.on_event(entry)
                    if found is not None:
                        out.append(found)
            elif kind == K.CONTROLLER_ELECTED and self.self_checks:
                found = self.epochs.on_event(entry)
                if found is not None:
                    out.append(found)
        if self.strict and self.modern:
            out.extend(self._strict(opened))
        out.extend(self.assignments.on_batch(batch, t, entries))
        return out

    def _commit(self, entry: Entry) -> list[Finding]:
        """``check_commit_by_non_owner``: an ``offsets_committed`` by a non-owner.

        The commit's instant is when the coordinator stored it: the event's
        time less its ``duration_ms`` (how long the answer took to reach the
        member; absent for the legacy consumer, whose event is the write).
        """
        ev = entry[1]
        tp, member = _tp(ev), member_of(ev)
        if tp is None:
            return []
        group = _s(ev.get("group"))
        age = ev.get("duration_ms")
        t = _t(ev) - (
            float(age) if isinstance(age, int | float) and not isinstance(age, bool) else 0.0
        )
        ok, owner = (
            (False, None) if member is None else self.ownership.owner_check((group, *tp), member, t)
        )
        if ok:
            return []
        who = member or "?"
        members = tuple(sorted({who} | ({owner} if owner else set())))
        return [
            Finding(
                COMMIT_BY_NON_OWNER,
                group,
                tp[0],
                tp[1],
                members,
                t,
                t,
                (ref_of(entry),),
                f"{who} committed {tp[0]}:{tp[1]} at {t:.1f} ms while "
                + (f"{owner} owned it" if owner else "no member owned it"),
                offset_end=_i(ev.get("offset_end")),
                count=1,
                detail=None if owner is None else f"owner={owner}",
            )
        ]

    def _strict(self, opened: Iterable[Holding]) -> list[Finding]:
        """Non-zombie double ownership (design §5.2 family 2, the modern protocols).

        A claim of a partition another member still holds, where neither has
        had one of its member ids removed by the coordinator (``member_removed``)
        at or after its own claim: a zombie (removed, not yet told) is allowed,
        two members in good standing are a coordinator's bug. The legacy
        consumer is not checked here: whether the earlier owner's ZooKeeper
        session was still alive at the later claim is the ensemble's to tell,
        not the events' (``zk_session_expired`` is the client's late discovery).
        """
        out: list[Finding] = []
        for h in opened:
            group = h.key[0]
            if self.members.removed_since(group, h.member, h.s) is not None:
                continue
            for other in self.ownership.holders(h.key):
                if other.member == h.member:
                    continue
                if self.members.removed_since(group, other.member, other.s) is not None:
                    continue
                members = tuple(sorted((h.member, other.member)))
                out.append(
                    Finding(
                        NON_ZOMBIE_DOUBLE_OWNERSHIP,
                        group,
                        h.key[1],
                        h.key[2],
                        members,
                        h.s,
                        h.s,
                        (other.claim, h.claim),
                        f"{h.member} claimed {h.key[1]}:{h.key[2]} at {h.s:.1f} ms while "
                        f"{other.member} (claim at {other.s:.1f} ms) still held it and neither "
                        "had been removed from the group",
                        detail=f"generations={other.okey},{h.okey}",
                    )
                )
        return out

    def _group_of(self) -> Callable[[TopicPartition], str | None]:
        """Per partition the group of a loss row: its first owning group, else the run's."""
        owners: dict[TopicPartition, str] = {}
        for h in self.ownership.all:
            tp = (h.key[1], h.key[2])
            g = h.key[0]
            cur = owners.get(tp)
            if g is not None and (cur is None or g < cur):
                owners[tp] = g
        return lambda tp: owners.get(tp, self.first_group)

    def finish(self) -> list[Finding]:
        """The end-of-run findings: loss, processing windows, double ownership, late universes."""
        t_end = 0.0 if self.t_last is None else self.t_last
        out = self.assignments.finish()
        out.extend(self.processing.finish())
        out.extend(self.offsets.finish(self._group_of(), t_end))
        out.extend(self._double_ownership(t_end))
        return out

    def _double_ownership(self, t_end: float) -> list[Finding]:
        """``check_double_ownership``: windows two or more members held one partition.

        Over the ownership intervals (open ones end at the run's last event), by
        member, as ``busy_windows`` / :func:`emulator.intervals.overlap_windows`.
        """
        per: dict[Key, list[Holding]] = defaultdict(list)
        for h in self.ownership.all:
            per[h.key].append(h)
        out: list[Finding] = []
        for key in sorted(per, key=str):
            hs = per[key]
            spans = [(h.s, max(t_end, h.s) if h.e is None else h.e, h.member) for h in hs]
            for w0, w1, members in overlap_windows(spans):
                refs = tuple(
                    h.claim for h, (s, e, _m) in zip(hs, spans, strict=True) if s < w1 and w0 < e
                )
                out.append(
                    Finding(
                        DOUBLE_OWNERSHIP,
                        key[0],
                        key[1],
                        key[2],
                        tuple(members),
                        w0,
                        w1,
                        refs,
                        f"{', '.join(members)} held {key[1]}:{key[2]} at once "
                        f"between {w0:.1f} and {w1:.1f} ms",
                        count=len(members),
                        detail="members=" + ",".join(members),
                    )
                )
        return out
