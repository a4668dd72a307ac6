"""KIP-848 end to end: members and their coordinator on a fake clock (kafka-protocols.md C3-C6).

A small in-test network, in the spirit of Kafka's ``GroupMetadataManagerTestContext``
with real clients attached, carries every request and response between
:class:`~emulator.modern.consumer_member.ConsumerMember` instances and one
:class:`~emulator.modern.consumer_coordinator.ConsumerGroupCoordinator`, with a
delay chosen per message, and can freeze a member (a long pause: it neither
sends nor receives nor notices time) or crash it. A fake data path advances
the position of every fetched partition at each application poll.

Covered here: the worked example (p2 moves from c1 to c3 only after c1's
heartbeat stops reporting it; p1 and p3 never stop), zombie commits, the
session timeout, the rebalance timeout, a static member's restart, the poll
timeout, coordinator rediscovery, and a seeded sweep of random joins, leaves,
crashes and delays that must never show two owners of one partition and must
end with the target assignment owned exactly once.

Allowed anomalies (each pinned by a test): a zombie whose session expired
still believes it owns its partitions until it hears back; and a heartbeat
that reports the member's completed assignment while it is still adding a
partition from an older target lets the coordinator free that partition
early (it shows up with one-way delays of seconds; the sweep uses up to
300 ms, where 150 seeds showed none).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pytest

from emulator.events import EventKind as K
from emulator.modern.config import Kip848ConsumerConfig
from emulator.modern.consumer_coordinator import ConsumerGroupCoordinator, GroupState
from emulator.modern.consumer_member import ConsumerMember, MemberState
from emulator.modern.errors import Errors
from emulator.modern.messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    Emit,
    FindCoordinatorRequest,
    GroupRequest,
    GroupResponse,
    OffsetCommitRequest,
    OffsetFetchRequest,
    StartFetching,
    StopFetching,
    TopicPartition,
)
from tests.group_context import GroupTestContext, Record, Timed

GROUP = "g"
COORD = "coordinator"
P1, P2, P3 = ("t", 0), ("t", 1), ("t", 2)

Message = GroupRequest | GroupResponse
DelayFn = Callable[[str, str, Message], float | None]


class SequentialIds(random.Random):
    """A generator whose 128-bit draws count up, so member ids sort in join order."""

    def __init__(self) -> None:
        super().__init__(0)
        self._n = itertools.count(1)

    def getrandbits(self, k: int, /) -> int:
        return next(self._n) if k == 128 else super().getrandbits(k)


@dataclass
class Wire:
    """One message as it went over the network (``delivered`` None: lost or in flight)."""

    sent: float
    sent_seq: int
    src: str
    dst: str
    msg: Message
    delivered: float | None = None
    delivered_seq: int | None = None


@dataclass
class _AppLoop:
    """A member's application loop as the timer sees it: a poll every ``app_poll_ms``."""

    net: Net
    name: str

    def next_deadline(self) -> float | None:
        m = self.net.members[self.name]
        if self.name in self.net.stuck or m.closed:
            return None
        return self.net._next_app_poll[self.name]

    def poll(self, now: float) -> list[object]:
        self.net._next_app_poll[self.name] = now + self.net.app_poll_ms
        self.net._app_poll(self.name, self.net.members[self.name])
        return []


@dataclass
class Net(GroupTestContext):
    """The coordinator, the members and the wires between them."""

    topics: dict[str, int]
    seed: int = 0
    delay: DelayFn = lambda src, dst, msg: 0.0
    app_poll_ms: float = 1000.0
    ids: random.Random | None = None
    coord_kwargs: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        GroupTestContext.__init__(self)
        self.rng = random.Random(self.seed)
        self.coord = ConsumerGroupCoordinator(
            GROUP,
            topics=self.topics,
            rng=self.ids if self.ids is not None else random.Random(self.seed),
            node_id=1,
            **self.coord_kwargs,  # type: ignore[arg-type]
        )
        self.members: dict[str, ConsumerMember] = {}
        self.wires: list[Wire] = []
        self.frozen: set[str] = set()
        self.crashed: set[str] = set()
        self.stuck: set[str] = set()  # the application does not call poll()
        self.positions: dict[str, dict[TopicPartition, int]] = {}
        self.fail_next: dict[tuple[str, type[GroupRequest]], Errors] = {}
        self._next_app_poll: dict[str, float] = {}

    # ------------------------------------------------------------- membership

    def add(self, name: str, topics: tuple[str, ...] = ("t",), **config: object) -> ConsumerMember:
        """Start a member now."""
        m = ConsumerMember(
            member=name,
            group=GROUP,
            topics=topics,
            config=Kip848ConsumerConfig(**config),  # type: ignore[arg-type]
            rng=random.Random(f"{self.seed}-{name}-{len(self.members)}"),
        )
        self.members[name] = m
        self.crashed.discard(name)
        self.positions[name] = {}
        self._next_app_poll[name] = self.now + self.app_poll_ms
        self._route(name, m.start(self.now))
        return m

    def close(self, name: str) -> None:
        self._route(name, self.members[name].close(self.now))

    def crash(self, name: str) -> None:
        """Kill the member: no goodbye; its process (and ownership) ends now."""
        self.crashed.add(name)
        self.positions[name] = {}
        self.note(name, Emit(K.CONSUMER_CRASHED, {}))

    # ---------------------------------------------------------------- running

    def _alive(self) -> list[tuple[str, ConsumerMember]]:
        return [
            (n, m)
            for n, m in self.members.items()
            if n not in self.crashed and n not in self.frozen
        ]

    def timed(self) -> list[tuple[Timed, Callable[[Sequence[object]], None]]]:
        """The coordinator, then each live member and its application loop."""
        out: list[tuple[Timed, Callable[[Sequence[object]], None]]] = [
            (self.coord, lambda outs: self._coord_events(outs))
        ]
        for n, m in self._alive():
            out.append((m, lambda outs, n=n: self._route(n, outs)))
            out.append((_AppLoop(self, n), lambda outs: None))
        return out

    def _coord_events(self, outs: Sequence[object]) -> None:
        for e in outs:
            assert isinstance(e, Emit)
        self.record(COORD, outs)

    def _app_poll(self, name: str, m: ConsumerMember) -> None:
        for tp, pos in list(self.positions[name].items()):
            self.positions[name][tp] = pos + 10
            m.consumed(tp, pos + 10)
        self._route(name, m.app_polled(self.now))

    def _deliver(self, wire: Wire) -> None:
        wire.delivered, wire.delivered_seq = self.now, next(self._seq)
        if wire.dst == COORD:
            assert isinstance(wire.msg, GroupRequest)
            error = self.fail_next.pop((wire.src, type(wire.msg)), None)
            if error is not None:  # the broker answers instead of the coordinator
                assert isinstance(wire.msg, ConsumerGroupHeartbeatRequest)
                self._send(COORD, wire.src, ConsumerGroupHeartbeatResponse(wire.msg.corr, error))
                return
            outs = self.coord.handle(self.now, wire.msg)
            response, events = outs[0], outs[1:]
            self._coord_events(events)
            assert isinstance(response, GroupResponse)
            self._send(COORD, wire.src, response)
            return
        if wire.dst in self.crashed or wire.dst in self.frozen:
            return  # lost
        assert isinstance(wire.msg, GroupResponse)
        self._route(wire.dst, self.members[wire.dst].on_response(self.now, wire.msg))

    def _send(self, src: str, dst: str, msg: Message) -> None:
        if src in self.crashed or src in self.frozen:
            return
        wire = Wire(self.now, next(self._seq), src, dst, msg)
        self.wires.append(wire)
        d = self.delay(src, dst, msg)
        if d is not None:  # None: the network drops it
            self.schedule(self.now + d, lambda: self._deliver(wire))

    def _route(self, name: str, outputs: Sequence[object]) -> None:
        for o in outputs:
            if isinstance(o, Emit):
                self.record(name, [o])
            elif isinstance(o, StartFetching):
                for tp, off in o.positions.items():
                    self.positions[name][tp] = 0 if off is None else off
            elif isinstance(o, StopFetching):
                for tp in o.partitions:
                    self.positions[name].pop(tp, None)
            else:
                assert isinstance(o, GroupRequest), o
                self._send(name, COORD, o)

    # ------------------------------------------------------------- inspection

    def events(self, kind: K, source: str | None = None) -> list[Record]:
        return self.emitted(kind, source)

    @property
    def log(self) -> list[Record]:
        return self.records

    def requests_from(self, name: str, kind: type[GroupRequest]) -> list[Wire]:
        return [w for w in self.wires if w.src == name and isinstance(w.msg, kind)]

    def responses_to(self, name: str) -> list[Wire]:
        return [
            w
            for w in self.wires
            if w.dst == name and w.delivered is not None and isinstance(w.msg, GroupResponse)
        ]

    def owners(self) -> dict[TopicPartition, str]:
        """Replay the OWNERSHIP events in time order; fail on any double ownership."""
        return check_single_owner(self.log)

    def target_by_member(self) -> dict[str, frozenset[TopicPartition]]:
        by_id = {m.member_id: n for n, m in self.members.items() if n not in self.crashed}
        return {
            by_id[mid]: parts for mid, parts in self.coord.target_assignment.items() if mid in by_id
        }


def check_single_owner(
    log: list[Record], allowed_overlap: set[str] | None = None
) -> dict[TopicPartition, str]:
    """Replay OWNERSHIP_CLAIMED/RELEASED (and crashes) in time order.

    Args:
        log: the events.
        allowed_overlap: members whose claims may overlap (zombies).

    Returns:
        The owner of each owned partition at the end.
    """
    owner: dict[TopicPartition, str] = {}
    held: dict[str, set[TopicPartition]] = {}
    for e in sorted(log, key=lambda e: (e.t, e.seq)):
        if e.kind == K.OWNERSHIP_CLAIMED.value:
            tp = (str(e.fields["topic"]), int(e.fields["partition"]))  # type: ignore[call-overload]
            other = owner.get(tp)
            if other is not None and other != e.source:
                assert allowed_overlap and {other, e.source} & allowed_overlap, (
                    f"t={e.t}: {e.source} claims {tp} still owned by {other}"
                )
            owner[tp] = e.source
            held.setdefault(e.source, set()).add(tp)
        elif e.kind == K.OWNERSHIP_RELEASED.value:
            tp = (str(e.fields["topic"]), int(e.fields["partition"]))  # type: ignore[call-overload]
            assert tp in held.get(e.source, set()), f"t={e.t}: {e.source} releases {tp} it lacks"
            held[e.source].discard(tp)
            if owner.get(tp) == e.source:
                del owner[tp]
        elif e.kind == K.CONSUMER_CRASHED.value:
            for tp in held.pop(e.source, set()):
                if owner.get(tp) == e.source:
                    del owner[tp]
    return owner


# ------------------------------------------------------------------ helpers


def quiet_net(**kw: object) -> Net:
    """Topic ``t`` with p1..p3, member ids in join order, no delays."""
    return Net(topics={"t": 3}, ids=SequentialIds(), **kw)  # type: ignore[arg-type]


def owned(net: Net) -> dict[str, frozenset[TopicPartition]]:
    return {
        n: m.owned for n, m in net.members.items() if n not in net.crashed and not m.closed
    }


def stops_of(net: Net) -> list[tuple[str, tuple[TopicPartition, ...]]]:
    """Every StopFetching effect, recorded by wrapping the router."""
    stopped: list[tuple[str, tuple[TopicPartition, ...]]] = []
    route = net._route

    def spy(name: str, outputs: Sequence[object]) -> None:
        stopped.extend((name, o.partitions) for o in outputs if isinstance(o, StopFetching))
        route(name, outputs)

    net._route = spy  # type: ignore[method-assign]
    return stopped


def two_stable(**kw: object) -> Net:
    """c1 -> {p1, p2}, c2 -> {p3}, both stable."""
    net = quiet_net(**kw)
    net.add("c1")
    net.run(10_000)
    net.add("c2")
    net.run(30_000)
    assert owned(net) == {"c1": frozenset({P1, P2}), "c2": frozenset({P3})}
    return net


# ------------------------------------------------------------------ worked example


def test_worked_example_p2_moves_only_after_c1_stops_reporting_it() -> None:
    net = two_stable()
    stopped = stops_of(net)
    log_mark, wire_mark = len(net.log), len(net.wires)
    epoch_before = net.coord.group_epoch

    net.add("c3")
    net.run(30_000)

    assert owned(net) == {"c1": frozenset({P1}), "c2": frozenset({P3}), "c3": frozenset({P2})}
    assert net.coord.state is GroupState.STABLE
    assert net.coord.group_epoch == epoch_before + 1  # one bump: c3 joined
    wires = net.wires[wire_mark:]
    c1_id = net.members["c1"].member_id

    # The first heartbeat of c1 that no longer reports p2, as it reaches the coordinator.
    omitted = next(
        w
        for w in wires
        if isinstance(w.msg, ConsumerGroupHeartbeatRequest)
        and w.msg.member_id == c1_id
        and w.msg.topic_partitions is not None
        and P2 not in w.msg.topic_partitions
    )
    assert omitted.delivered_seq is not None
    # c3 was first told to wait (empty assignment) ...
    to_c3 = [
        w for w in wires if w.dst == "c3" and isinstance(w.msg, ConsumerGroupHeartbeatResponse)
    ]
    assert to_c3[0].msg.assignment == ()  # type: ignore[union-attr]
    assert to_c3[0].sent_seq < omitted.delivered_seq
    # ... and every response that gives it p2 left the coordinator after that heartbeat.
    told = [w for w in to_c3 if P2 in (w.msg.assignment or ())]  # type: ignore[union-attr]
    assert told
    assert all(w.sent_seq > omitted.delivered_seq for w in told)
    # c1 released p2 before it sent that heartbeat.
    release = next(
        e for e in net.log[log_mark:] if e.kind == K.OWNERSHIP_RELEASED.value and e.source == "c1"
    )
    assert release.seq < omitted.sent_seq and release.fields["partition"] == P2[1]

    # c1 keeps p1 and c2 keeps p3 throughout: nothing else stops or is released.
    assert stopped == [("c1", (P2,))]
    releases = [
        (e.source, e.fields["partition"])
        for e in net.log[log_mark:]
        if e.kind == K.OWNERSHIP_RELEASED.value
    ]
    assert releases == [("c1", P2[1])]
    assert not [e for e in net.log[log_mark:] if e.kind == K.PARTITIONS_LOST.value]
    net.owners()


def test_worked_example_with_slow_links_keeps_single_ownership() -> None:
    rng = random.Random(7)
    net = quiet_net(delay=lambda s, d, m: rng.uniform(0, 400))
    net.add("c1")
    net.run(10_000)
    net.add("c2")
    net.run(30_000)
    net.add("c3")
    net.run(30_000)
    assert sorted(owned(net).values(), key=sorted) == [{P1}, {P2}, {P3}]
    net.owners()


# ------------------------------------------------------------------------ zombies


def test_zombie_commit_after_its_partitions_moved_is_stale_member_epoch() -> None:
    """c1 pauses past its session; its partitions move; a commit from before is rejected."""
    slow_commits = {"on": False}

    def delay(src: str, dst: str, msg: Message) -> float:
        if slow_commits["on"] and src == "c1" and isinstance(msg, OffsetCommitRequest):
            return 2_000.0
        return 0.0

    net = two_stable(delay=delay)
    c1 = net.members["c1"]
    old_epoch, c1_id = c1.member_epoch, c1.member_id
    net.frozen.add("c1")
    net.run(60_000)  # the session (45 s) expires while c1 is paused

    removed = net.events(K.MEMBER_REMOVED, COORD)
    assert [(e.fields["member_id"], e.fields["reason"]) for e in removed] == [
        (c1_id, "session_timeout")
    ]
    assert net.members["c2"].owned == {P1, P2, P3}
    committed_by_c2 = dict(net.coord.committed_offsets())

    # c1 wakes up, still believing it owns p1 and p2, and commits with its old epoch.
    slow_commits["on"] = True
    net.frozen.discard("c1")
    net.run(1_000)
    # Its heartbeat was answered UNKNOWN_MEMBER_ID: fenced, partitions lost, rejoined
    # under the same member id at a new epoch ...
    assert c1.member_id == c1_id and c1.member_epoch > old_epoch
    lost = net.events(K.PARTITIONS_LOST, "c1")
    assert lost and lost[0].fields["partitions"] == "t:0,t:1"
    net.run(5_000)
    # ... so the zombie commit, sent before, arrives stale.
    zombie = [
        w
        for w in net.wires
        if w.src == "c1"
        and isinstance(w.msg, OffsetCommitRequest)
        and w.msg.generation_id_or_member_epoch == old_epoch
        and w.sent > 40_000
    ]
    assert zombie
    failed = net.events(K.COMMIT_FAILED, "c1")
    assert any(
        e.fields["reason"] == Errors.STALE_MEMBER_EPOCH.name and e.fields["generation"] == old_epoch
        for e in failed
    )
    for tp in (P1, P2):
        assert net.coord.committed_offsets()[tp] >= committed_by_c2[tp]
        assert net.coord.committed_offsets()[tp] != 0
    # The zombie window is visible in the ownership log: c2 claimed while c1 still held.
    with pytest.raises(AssertionError, match="still owned by c1"):
        net.owners()
    check_single_owner(net.log, allowed_overlap={"c1"})


def test_zombie_commit_after_removal_is_unknown_member_id() -> None:
    net = two_stable()
    c1 = net.members["c1"]
    old_epoch = c1.member_epoch
    net.frozen.add("c1")
    net.run(60_000)
    net.frozen.discard("c1")
    net.run(1)
    failed = net.events(K.COMMIT_FAILED, "c1")
    assert [(e.fields["reason"], e.fields["generation"]) for e in failed] == [
        (Errors.UNKNOWN_MEMBER_ID.name, old_epoch)
    ]


# --------------------------------------------------------------- session timeout


def test_session_timeout_fences_the_crashed_member_and_reassigns() -> None:
    net = two_stable()
    c2_id = net.members["c2"].member_id
    last_hb = max(
        w.delivered
        for w in net.wires
        if isinstance(w.msg, ConsumerGroupHeartbeatRequest) and w.src == "c2" and w.delivered
    )
    net.crash("c2")
    epoch = net.coord.group_epoch
    net.run(60_000)
    removed = net.events(K.MEMBER_REMOVED, COORD)
    assert [(e.fields["member_id"], e.fields["reason"], e.t) for e in removed] == [
        (c2_id, "session_timeout", last_hb + 45_000)
    ]
    assert net.coord.group_epoch == epoch + 1
    assert net.members["c1"].owned == {P1, P2, P3}
    claim = [e for e in net.events(K.OWNERSHIP_CLAIMED, "c1") if e.fields["partition"] == 2][-1]
    assert last_hb + 45_000 <= claim.t <= last_hb + 45_000 + 5_000
    assert net.coord.state is GroupState.STABLE
    net.owners()


def test_rebalance_timeout_fences_a_member_that_holds_a_revoked_partition() -> None:
    """c1 never finishes revoking p2 (its commits vanish): fenced after its rebalance timeout."""
    black_hole = {"on": False}

    def delay(src: str, dst: str, msg: Message) -> float | None:
        if black_hole["on"] and src == "c1" and isinstance(msg, OffsetCommitRequest):
            return None
        return 0.0

    net = quiet_net(delay=delay)
    net.add("c1", max_poll_interval_ms=20_000)
    net.run(10_000)
    net.add("c2", max_poll_interval_ms=20_000)
    net.run(30_000)
    # c1's commits vanish from now on, so its pre-revocation commit never returns.
    black_hole["on"] = True
    net.add("c3")
    c1_id = net.members["c1"].member_id
    net.run_until(lambda: net.coord.rebalance_deadline(c1_id) is not None, 10_000)
    armed = net.now
    assert net.coord.members[c1_id].pending_revocation == {P2}
    assert net.members["c3"].owned == set()

    net.run_until(lambda: bool(net.events(K.MEMBER_REMOVED, COORD)), 30_000)
    removed = net.events(K.MEMBER_REMOVED, COORD)
    assert [(e.fields["member_id"], e.fields["reason"], e.t) for e in removed] == [
        (c1_id, "rebalance_timeout", armed + 20_000)
    ]
    # Meanwhile p2 stayed with c1: c3 could not get it.
    assert not [e for e in net.events(K.OWNERSHIP_CLAIMED, "c3") if e.t < armed + 20_000]
    black_hole["on"] = False
    net.run(30_000)
    # c1 learnt it was fenced (UNKNOWN_MEMBER_ID), lost everything and rejoined.
    assert [e.fields["reason"] for e in net.events(K.REQUEST_ERROR, "c1")][:1] == [
        Errors.UNKNOWN_MEMBER_ID.name
    ]
    assert sorted(owned(net).values(), key=sorted) == [{P1}, {P2}, {P3}]
    assert net.coord.state is GroupState.STABLE


# ---------------------------------------------------------------- static members


def test_static_member_restart_within_session_timeout_keeps_its_partitions() -> None:
    net = quiet_net()
    net.add("c1", group_instance_id="i1")
    net.run(10_000)
    net.add("c2", group_instance_id="i2")
    net.run(30_000)
    assert owned(net) == {"c1": frozenset({P1, P2}), "c2": frozenset({P3})}
    stopped = stops_of(net)
    mark = len(net.log)
    epoch, assignment_epoch = net.coord.group_epoch, net.coord.assignment_epoch

    net.close("c1")
    net.run(20_000)
    leave = net.requests_from("c1", ConsumerGroupHeartbeatRequest)[-1].msg
    assert leave.member_epoch == -2  # type: ignore[union-attr]
    assert net.members["c1"].closed
    # Parked, not removed: its partitions are still taken (partition epoch -2).
    assert net.coord.member_by_instance("i1") is not None
    assert net.coord.partition_epochs[P1] == -2
    assert net.members["c2"].owned == {P3}

    net.add("c1b", group_instance_id="i1")
    net.run(30_000)
    assert owned(net) == {"c1b": frozenset({P1, P2}), "c2": frozenset({P3})}
    assert (net.coord.group_epoch, net.coord.assignment_epoch) == (epoch, assignment_epoch)
    assert not [e for e in net.log[mark:] if e.kind == K.TARGET_ASSIGNMENT.value]
    changes = [
        (e.kind, e.fields["reason"])
        for e in net.log[mark:]
        if e.kind in (K.MEMBER_JOINED.value, K.MEMBER_REMOVED.value)
    ]
    assert changes == [
        (K.MEMBER_REMOVED.value, "static_replace"),
        (K.MEMBER_JOINED.value, "static_replace"),
    ]
    # Nobody else moved: c2 never stopped anything.
    assert [s for s in stopped if s[0] == "c2"] == []
    assert net.coord.state is GroupState.STABLE
    net.owners()


def test_static_member_back_after_session_timeout_finds_its_partitions_gone() -> None:
    net = quiet_net()
    net.add("c1", group_instance_id="i1")
    net.run(10_000)
    net.add("c2", group_instance_id="i2")
    net.run(30_000)
    net.close("c1")
    net.run(60_000)
    assert [e.fields["reason"] for e in net.events(K.MEMBER_REMOVED, COORD)] == [
        "session_timeout"
    ]
    assert "static_leave" in [e.fields["reason"] for e in net.events(K.GROUP_STATE_CHANGED)]
    assert net.members["c2"].owned == {P1, P2, P3}
    net.add("c1b", group_instance_id="i1")
    net.run(30_000)
    assert sorted(len(p) for p in owned(net).values()) == [1, 2]
    net.owners()


def test_static_member_started_twice_gets_unreleased_instance_id() -> None:
    net = quiet_net()
    net.add("c1", group_instance_id="i1")
    net.run(10_000)
    twin = net.add("twin", group_instance_id="i1")
    net.run(10_000)
    assert twin.state is MemberState.FATAL
    assert [e.fields["reason"] for e in net.events(K.REQUEST_ERROR, "twin")] == [
        Errors.UNRELEASED_INSTANCE_ID.name
    ]
    assert net.members["c1"].owned == {P1, P2, P3}


# ------------------------------------------------------------------ poll timeout


@pytest.mark.parametrize(("static", "epoch"), [(False, -1), (True, -2)])
def test_poll_timeout_leaves_goes_stale_and_rejoins_on_the_next_poll(
    static: bool, epoch: int
) -> None:
    net = quiet_net()
    net.add("c1", max_poll_interval_ms=10_000, group_instance_id="i1" if static else None)
    net.run(10_000)
    net.add("c2")
    net.run(30_000)
    c1 = net.members["c1"]
    net.stuck.add("c1")  # the application stops calling poll() after this one
    last_poll = net.now
    net.run(15_000)

    assert c1.state is MemberState.STALE and c1.owned == set()
    leave = net.requests_from("c1", ConsumerGroupHeartbeatRequest)[-1]
    assert leave.msg.member_epoch == epoch  # type: ignore[union-attr]
    assert leave.sent == last_poll + 10_000
    lost = net.events(K.PARTITIONS_LOST, "c1")
    assert [(e.fields["reason"], e.t) for e in lost] == [("poll_timeout", leave.sent)]
    if not static:
        assert net.members["c2"].owned == {P1, P2, P3}
    else:  # parked at -2: its partitions wait for it
        assert net.members["c2"].owned == {P3}
    hb_count = len(net.requests_from("c1", ConsumerGroupHeartbeatRequest))
    net.run(20_000)
    assert len(net.requests_from("c1", ConsumerGroupHeartbeatRequest)) == hb_count  # STALE: silent

    net.stuck.discard("c1")
    net.run(30_000)
    assert net.members["c1"].state is MemberState.STABLE
    assert sorted(len(p) for p in owned(net).values()) == [1, 2]
    net.owners()


# ------------------------------------------------------------ allowed anomaly


def test_full_heartbeat_during_an_assignment_releases_the_partition_early() -> None:
    """An allowed KIP-848 anomaly (Kafka's client and coordinator behave the same way).

    The heartbeat reports the member's *completed* assignment (``currentAssignment``)
    whenever it changed since the last report or after any error response
    (``resetHeartbeatState``); a reconciliation still adding a partition does not
    count. If the target moves that partition away meanwhile, the coordinator
    reads its absence as "already revoked" (``CurrentAssignmentBuilder``),
    frees it and gives it to the new owner, while the old member finishes
    assigning it from the older target, then acknowledges and revokes it.
    """
    slow_fetch = {"on": False}

    def delay(src: str, dst: str, msg: Message) -> float:
        if slow_fetch["on"] and src == "c1" and isinstance(msg, OffsetFetchRequest):
            return 8_000.0
        return 0.0

    net = two_stable(delay=delay)
    net.close("c2")  # c1 will be given p3 ...
    slow_fetch["on"] = True  # ... and fetch its offset slowly
    net.run(5_000)
    c1 = net.members["c1"]
    assert c1.target == {P1, P2, P3} and c1.owned == {P1, P2}
    net.add("c3")  # the target moves p3 to c3 before c1 has it
    net.fail_next[("c1", ConsumerGroupHeartbeatRequest)] = Errors.NOT_COORDINATOR
    net.run(20_000)

    # c1's full heartbeat after the error reported {p1, p2}: p3 was freed and
    # given to c3, then c1 completed its older assignment of p3.
    full = next(
        w.msg
        for w in net.requests_from("c1", ConsumerGroupHeartbeatRequest)
        if w.msg.rebalance_timeout_ms != -1 and w.msg.member_epoch > 0  # type: ignore[union-attr]
    )
    assert full.topic_partitions == (P1, P2)  # type: ignore[union-attr]
    with pytest.raises(AssertionError, match=r"c1 claims \('t', 2\) still owned by c3"):
        net.owners()
    # The overlap ends as soon as c1 reconciles towards its newer target.
    claim = [e for e in net.events(K.OWNERSHIP_CLAIMED, "c1") if e.fields["partition"] == 2][-1]
    release = [e for e in net.events(K.OWNERSHIP_RELEASED, "c1") if e.fields["partition"] == 2][-1]
    assert release.seq > claim.seq and release.t - claim.t < 1_000
    assert owned(net) == {"c1": frozenset({P1, P2}), "c3": frozenset({P3})}
    assert net.coord.state is GroupState.STABLE


# ---------------------------------------------------------- coordinator failover


def test_member_rediscovers_the_coordinator_and_carries_on() -> None:
    net = two_stable()
    net.coord.set_unavailable(Errors.NOT_COORDINATOR)
    net.run(6_000)
    c1 = net.members["c1"]
    errors = [e.fields["reason"] for e in net.events(K.REQUEST_ERROR, "c1")]
    assert Errors.NOT_COORDINATOR.name in errors
    finds = len(net.requests_from("c1", FindCoordinatorRequest))
    assert finds >= 2
    net.coord.set_unavailable(None)
    net.run(10_000)
    assert c1.state is MemberState.STABLE and c1.coordinator == 1
    assert owned(net) == {"c1": frozenset({P1, P2}), "c2": frozenset({P3})}
    assert not net.events(K.PARTITIONS_LOST)


# ------------------------------------------------------------ randomized sweep


def _random_run(seed: int) -> Net:
    """Joins (dynamic and static, with several subscriptions), closes, crashes and
    static restarts at random times, with random per-message delays (so messages
    overtake one another), then a long quiet period."""
    rng = random.Random(seed)
    net = Net(
        topics={"t": 6, "u": 4},
        seed=seed,
        delay=lambda s, d, m: rng.choice((0.0, 0.0, rng.uniform(0, 300))),
    )
    names = itertools.count()
    live: list[str] = []
    statics: dict[str, str] = {}  # member name -> instance id
    parked: list[str] = []  # instance ids of static members that closed

    def join() -> None:
        name = f"m{next(names)}"
        if parked and rng.random() < 0.7:
            iid = parked.pop(0)
            net.add(name, topics=("t", "u"), group_instance_id=iid)
            statics[name] = iid
        else:
            topics = rng.choice((("t", "u"), ("t", "u"), ("t",), ("u",)))
            if rng.random() < 0.25:
                iid = statics[name] = f"i{len(statics)}"
                net.add(name, topics=topics, group_instance_id=iid)
            else:
                net.add(name, topics=topics)
        live.append(name)

    while net.now < 150_000:
        net.run(rng.uniform(300, 6_000))
        r = rng.random()
        if len(live) < 3 or (r < 0.5 and len(live) < 8):
            join()
        elif r < 0.8:
            name = live.pop(rng.randrange(len(live)))
            net.close(name)
            if name in statics:
                parked.append(statics[name])
        else:
            net.crash(live.pop(rng.randrange(len(live))))
    net.run(180_000)  # quiesce: crashed and parked sessions expire, everyone settles
    return net


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6])
def test_random_membership_never_double_owns_and_converges_to_the_target(seed: int) -> None:
    net = _random_run(seed)
    final = net.owners()  # raises on any overlap, in time order
    in_group = {
        n: m
        for n, m in net.members.items()
        if n not in net.crashed and not m.closed and m.state is not MemberState.FATAL
    }
    assert all(m.state is MemberState.STABLE for m in in_group.values()), {
        n: m.state for n, m in in_group.items()
    }
    assert net.coord.state in (GroupState.STABLE, GroupState.EMPTY)
    assert set(net.coord.members) == {m.member_id for m in in_group.values()}
    # Every member owns exactly its target ...
    for m in in_group.values():
        assert m.owned == net.coord.target_assignment[m.member_id]
    # ... and every subscribed partition is owned exactly once.
    subscribed = set().union(*(set(m.topics) for m in in_group.values())) if in_group else set()
    everything = {(t, p) for t in subscribed for p in range(net.topics[t])}
    assert {tp: n for n, m in in_group.items() for tp in m.owned} == final
    assert set(final) == everything
    assert sum(len(m.owned) for m in in_group.values()) == len(everything)
