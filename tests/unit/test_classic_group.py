"""Classic members and their coordinator together on a fake clock (kafka-protocols.md B1-B9).

A small in-test network, in the spirit of Kafka's
``GroupMetadataManagerTestContext`` and ``GroupCoordinatorTest``, carries the
requests of :class:`~emulator.modern.classic_member.ClassicMember` objects to a
:class:`~emulator.modern.classic_coordinator.ClassicGroupCoordinator` and the
responses back, each after a controllable delay; it renumbers correlation ids
as a broker connection would, can cut a member off, and applies the members'
fetch effects. Everything runs on one :class:`~emulator.clock.FakeClock`.

Covered: the worked example of B7 (eager revokes all three partitions and
settles in one rebalance; cooperative revokes only p2, gives it to c3 in a
second rebalance, and c1/c2 never stop p1/p3); static members restarting
within and beyond ``session.timeout.ms`` (B9); a zombie's commit rejected
after its partitions moved (B5); the initial rebalance delay and its
re-arming (B2); a join completing when everyone rejoined or at the rebalance
timeout (dynamic laggard removed, static kept); session expiry; the
poll-timeout LeaveGroup; a coordinator move (NOT_COORDINATOR); and a seeded
sweep of joins and leaves that must end with every partition owned once.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import pytest

from emulator.events import EventKind as K
from emulator.modern.classic_coordinator import ClassicGroupCoordinator, GroupState
from emulator.modern.classic_member import ClassicMember, MemberState
from emulator.modern.config import ClassicConsumerConfig, GroupCoordinatorConfig
from emulator.modern.messages import (
    Emit,
    FindCoordinatorRequest,
    GroupRequest,
    GroupResponse,
    OffsetCommitRequest,
    RequestMetadata,
    StartFetching,
    StopFetching,
    TopicPartition,
)
from tests.group_context import GroupTestContext, Record, Timed

TOPIC = "t"
P1, P2, P3 = (TOPIC, 0), (TOPIC, 1), (TOPIC, 2)


# --------------------------------------------------------------------------- the network


@dataclass
class Node:
    """One member on the network and what the host did for it."""

    name: str
    member: ClassicMember
    fetching: dict[TopicPartition, int | None] = field(default_factory=dict)
    alive: bool = True


class Net(GroupTestContext):
    """Members, coordinators and the wire between them.

    Args:
        partitions: the topic's partition count.
        broker: the broker hosting the group's coordinator.
        delay: ms a message takes, by default (both ways).
        **broker_props: Kafka broker properties for the coordinator.
    """

    def __init__(
        self, partitions: int = 3, *, broker: int = 1, delay: float = 1.0,
        seed: int = 7, **broker_props: object,
    ) -> None:
        super().__init__()
        self.partitions = {TOPIC: partitions}
        self.broker_config = GroupCoordinatorConfig.from_kafka(broker_props)
        self.rng = random.Random(seed)
        self.coordinators: dict[int, ClassicGroupCoordinator] = {
            broker: ClassicGroupCoordinator("g", self.broker_config, self.rng, broker=broker)
        }
        self.lead_broker = broker
        self.nodes: dict[str, Node] = {}
        self.delay = delay
        self.member_delay: dict[str, float] = {}
        self.cut_off: set[str] = set()
        self._net_corr = itertools.count(1)
        self._routes: dict[tuple[int, int], tuple[str, int]] = {}
        self.sent: list[tuple[float, str, GroupRequest]] = []
        # Metadata requests (a broker answers each with ``partitions`` after a round trip).
        self.metadata_requests: list[tuple[float, str]] = []

    @property
    def coordinator(self) -> ClassicGroupCoordinator:
        return self.coordinators[self.lead_broker]

    # ---------------------------------------------------------------- members

    def add(self, name: str, **props: object) -> ClassicMember:
        """Start a consumer called ``name`` (its ``client.id`` too)."""
        cfg = ClassicConsumerConfig.from_kafka({"client.id": name, **props})
        member = ClassicMember(
            member=name, group="g", topics=(TOPIC,), config=cfg,
            partitions_per_topic=self.partitions,
        )
        self.nodes[name] = Node(name, member)
        self._member_out(name, member.start(self.now))
        return member

    def m(self, name: str) -> ClassicMember:
        return self.nodes[name].member

    def crash(self, name: str) -> None:
        """The process dies: no more requests, nothing delivered (the host logs it)."""
        self.nodes[name].alive = False
        self.note(name, "crashed")

    def close(self, name: str) -> None:
        self._member_out(name, self.m(name).close(self.now))

    def busy(self, name: str) -> None:
        """The application starts processing a batch (leaves ``poll()``)."""
        self._member_out(name, self.m(name).app_processing(self.now))

    def idle(self, name: str) -> None:
        """The application is back in ``poll()``."""
        self._member_out(name, self.m(name).app_polled(self.now))

    def consume(self, name: str, tp: TopicPartition, next_offset: int) -> None:
        self.m(name).consumed(tp, next_offset)

    # ------------------------------------------------------------------ wire

    def _latency(self, name: str) -> float:
        return self.member_delay.get(name, self.delay)

    def _member_out(self, name: str, outs: list[object]) -> None:
        node = self.nodes[name]
        for o in outs:
            if isinstance(o, Emit):
                self.record(name, [o])
            elif isinstance(o, StartFetching):
                node.fetching.update(o.positions)
                self.record(name, [o])
            elif isinstance(o, StopFetching):
                for tp in o.partitions:
                    node.fetching.pop(tp, None)
                self.record(name, [o])
            elif isinstance(o, RequestMetadata):
                self.metadata_requests.append((self.now, name))

                def answer(name: str = name) -> None:
                    node = self.nodes[name]
                    if node.alive and name not in self.cut_off:
                        outs = node.member.update_metadata(self.now, dict(self.partitions))
                        self._member_out(name, outs)

                self.schedule(self.now + 2 * self._latency(name), answer)
            else:
                assert isinstance(o, GroupRequest)
                self.sent.append((self.now, name, o))
                target = self.lead_broker if isinstance(o, FindCoordinatorRequest) else (
                    node.member.coordinator
                )
                assert target is not None, f"{name} sent {o} with no coordinator"
                self._send_to_broker(name, target, o)

    def _send_to_broker(self, name: str, broker: int, req: GroupRequest) -> None:
        if name in self.cut_off:
            return
        net_corr = next(self._net_corr)
        self._routes[(broker, net_corr)] = (name, req.corr)
        wire = replace(req, corr=net_corr)

        def deliver() -> None:
            coord = self.coordinators.get(broker)
            if coord is None:
                return
            outs = coord.handle(self.now, wire, client_id=name)
            self._coord_out(broker, outs)

        self.schedule(self.now + self._latency(name), deliver)

    def _coord_out(self, broker: int, outs: list[object]) -> None:
        for o in outs:
            if isinstance(o, Emit):
                self.record(f"broker-{broker}", [o])
                continue
            assert isinstance(o, GroupResponse)
            name, corr = self._routes.pop((broker, o.corr))
            if name in self.cut_off:
                continue
            resp = replace(o, corr=corr)

            def deliver(name: str = name, resp: GroupResponse = resp) -> None:
                node = self.nodes[name]
                if node.alive and name not in self.cut_off:
                    self._member_out(name, node.member.on_response(self.now, resp))

            self.schedule(self.now + self._latency(name), deliver)

    # ------------------------------------------------------------------ time

    def timed(self) -> list[tuple[Timed, Callable[[Sequence[object]], None]]]:
        """The coordinators first, then the live members, as they are now."""
        out: list[tuple[Timed, Callable[[Sequence[object]], None]]] = []
        for broker, coord in self.coordinators.items():
            out.append((coord, lambda outs, b=broker: self._coord_out(b, list(outs))))
        for name, node in self.nodes.items():
            if node.alive:
                out.append((node.member, lambda outs, n=name: self._member_out(n, list(outs))))
        return out

    # ------------------------------------------------------------ inspection

    def events(self, kind: K, who: str | None = None, since: float = 0.0) -> list[Record]:
        return self.emitted(kind, who, since)

    def stops(self, who: str, since: float = 0.0) -> set[TopicPartition]:
        return {
            tp for r in self.records
            if r.who == who and r.t >= since and isinstance(r.what, StopFetching)
            for tp in r.what.partitions
        }

    def starts(self, who: str, since: float = 0.0) -> dict[TopicPartition, int | None]:
        out: dict[TopicPartition, int | None] = {}
        for r in self.records:
            if r.who == who and r.t >= since and isinstance(r.what, StartFetching):
                out.update(r.what.positions)
        return out

    def owners(self) -> dict[TopicPartition, list[str]]:
        """Who owns what, from the OWNERSHIP_CLAIMED / OWNERSHIP_RELEASED events."""
        held: dict[TopicPartition, list[str]] = {}
        for r in self.records:
            if r.what == "crashed":
                for who in held.values():
                    while r.who in who:
                        who.remove(r.who)
            if not isinstance(r.what, Emit):
                continue
            f = r.what.fields
            if r.what.kind is K.OWNERSHIP_CLAIMED:
                held.setdefault((str(f["topic"]), _int(f["partition"])), []).append(r.who)
            elif r.what.kind is K.OWNERSHIP_RELEASED:
                held[(str(f["topic"]), _int(f["partition"]))].remove(r.who)
        return {tp: who for tp, who in held.items() if who}

    def assert_one_owner_each(self) -> None:
        """Every partition has exactly one live, stable owner, who fetches it."""
        owners = self.owners()
        assert set(owners) == {(TOPIC, p) for p in range(self.partitions[TOPIC])}
        for tp, who in owners.items():
            assert len(who) == 1, f"{tp} owned by {who}"
            node = self.nodes[who[0]]
            assert tp in node.member.owned and tp in node.fetching, (tp, who)
        for node in self.nodes.values():
            if node.alive and not node.member.closed:
                assert node.member.state is MemberState.STABLE, node.name

    def rebalances(self, since: float = 0.0) -> int:
        """Rebalances the coordinator started since ``since``."""
        return len([r for r in self.events(K.REBALANCE_STARTED, since=since)
                    if r.who.startswith("broker")])


def _int(value: object) -> int:
    assert isinstance(value, int)
    return value


def owned(net: Net) -> dict[str, set[TopicPartition]]:
    return {n: set(node.member.owned) for n, node in net.nodes.items()
            if node.alive and not node.member.closed}


# ------------------------------------------------------------------ worked example (B7)


def test_eager_join_of_c3_revokes_all_three_partitions_and_settles_in_one_rebalance() -> None:
    net = Net()
    net.add("c1")
    net.add("c2")
    net.run(10_000)
    assert net.m("c1").protocol == "EAGER"
    assert owned(net) == {"c1": {P1, P2}, "c2": {P3}}
    net.assert_one_owner_each()
    gen_before = net.coordinator.generation_id
    net.consume("c1", P1, 10)
    net.consume("c1", P2, 20)
    net.consume("c2", P3, 30)

    mark = net.now
    net.add("c3")
    net.run(20_000)

    # Stop the world: every owner stopped every partition it had.
    assert net.stops("c1", mark) == {P1, P2}
    assert net.stops("c2", mark) == {P3}
    revoked = {r.who: r.what.fields["partitions"] for r in net.events(K.PARTITIONS_REVOKED,
                                                                         since=mark)}
    assert revoked == {"c1": "t:0,t:1", "c2": "t:2"}
    # One rebalance, one new generation, range over three members.
    assert net.rebalances(mark) == 1
    assert net.coordinator.generation_id == gen_before + 1
    assert net.coordinator.state is GroupState.STABLE
    assert owned(net) == {"c1": {P1}, "c2": {P2}, "c3": {P3}}
    net.assert_one_owner_each()
    # The pre-rebalance commit handed the positions on.
    assert net.coordinator.committed_offsets() == {P1: 10, P2: 20, P3: 30}
    assert net.nodes["c2"].fetching == {P2: 20}
    assert net.nodes["c3"].fetching == {P3: 30}


def test_cooperative_join_of_c3_revokes_only_p2_and_moves_it_in_a_second_rebalance() -> None:
    net = Net()
    coop = {"partition.assignment.strategy": "cooperative-sticky"}
    net.add("c1", **coop)
    net.run(10_000)
    net.add("c2", **coop)
    net.run(10_000)
    assert net.m("c1").protocol == "COOPERATIVE"
    assert owned(net) == {"c1": {P1, P2}, "c2": {P3}}
    net.assert_one_owner_each()
    gen_before = net.coordinator.generation_id
    net.consume("c1", P1, 11)
    net.consume("c1", P2, 22)
    net.consume("c2", P3, 33)

    mark = net.now
    net.add("c3", **coop)
    net.run(20_000)

    # c1 and c2 never stop p1 and p3; c1 gives up only p2.
    assert net.stops("c1", mark) == {P2}
    assert net.stops("c2", mark) == set()
    assert [r.what.fields["partitions"] for r in net.events(K.PARTITIONS_REVOKED, since=mark)
            ] == ["t:1"]
    assert net.events(K.PARTITIONS_LOST, since=mark) == []
    # Two rebalances: the first revokes p2 from c1, the second gives it to c3.
    assert net.rebalances(mark) == 2
    assert net.coordinator.generation_id == gen_before + 2
    released = net.events(K.OWNERSHIP_RELEASED, "c1", since=mark)
    claimed = net.events(K.OWNERSHIP_CLAIMED, "c3", since=mark)
    assert [(r.what.fields["partition"], r.what.fields["generation"]) for r in released] == [
        (1, gen_before + 1)
    ]
    assert [(r.what.fields["partition"], r.what.fields["generation"]) for r in claimed] == [
        (1, gen_before + 2)
    ]
    assert released[0].t < claimed[0].t
    assert owned(net) == {"c1": {P1}, "c2": {P3}, "c3": {P2}}
    net.assert_one_owner_each()
    # c3 starts p2 where c1's pre-rebalance commit left it.
    assert net.starts("c3", mark) == {P2: 22}
    assert net.nodes["c1"].fetching == {P1: None}


# ------------------------------------------------------------------ static membership (B9)


def test_static_member_restarting_within_the_session_timeout_causes_no_rebalance() -> None:
    net = Net()
    net.add("c1", **{"group.instance.id": "i1"})
    net.add("c2", **{"group.instance.id": "i2"})
    net.run(10_000)
    gen = net.coordinator.generation_id
    old_id = net.m("c2").member_id
    assert net.coordinator.state is GroupState.STABLE
    mark = net.now

    net.close("c2")  # static: no LeaveGroup
    net.run(100)
    assert not [r for _, who, r in net.sent if who == "c2" and "Leave" in type(r).__name__]
    net.run(20_000)  # < session.timeout.ms (45 s)
    del net.nodes["c2"]
    net.add("c2", **{"group.instance.id": "i2"})
    net.run(10_000)

    assert net.rebalances(mark) == 0
    assert net.coordinator.generation_id == gen
    assert net.coordinator.state is GroupState.STABLE
    assert net.m("c2").member_id != old_id
    assert net.coordinator.static_members["i2"] == net.m("c2").member_id
    assert net.m("c2").generation.generation_id == gen
    net.assert_one_owner_each()
    # The old member id's heartbeats would now be fenced.
    replaced = net.events(K.MEMBER_JOINED, since=mark)
    assert [r.what.fields["reason"] for r in replaced] == ["static_replace"]


def test_static_member_away_longer_than_the_session_timeout_causes_a_rebalance() -> None:
    net = Net()
    net.add("c1", **{"group.instance.id": "i1"})
    net.add("c2", **{"group.instance.id": "i2"})
    net.run(10_000)
    gen = net.coordinator.generation_id
    mark = net.now
    net.crash("c2")
    net.run(44_000)
    assert net.rebalances(mark) == 0  # still within session.timeout.ms
    net.run(10_000)
    removed = net.events(K.MEMBER_REMOVED, since=mark)
    assert [r.what.fields["reason"] for r in removed] == ["session_timeout"]
    assert net.rebalances(mark) == 1
    assert net.coordinator.generation_id == gen + 1
    assert owned(net)["c1"] == {P1, P2, P3}


def test_static_leader_restart_gets_skip_assignment_and_keeps_the_generation() -> None:
    net = Net()
    net.add("c1", **{"group.instance.id": "i1"})
    net.add("c2", **{"group.instance.id": "i2"})
    net.run(10_000)
    leader = net.coordinator.leader_id
    leader_name = "c1" if net.m("c1").member_id == leader else "c2"
    gen = net.coordinator.generation_id
    mark = net.now
    net.crash(leader_name)
    net.run(5_000)
    del net.nodes[leader_name]
    net.add(leader_name, **{"group.instance.id": "i" + leader_name[1]})
    net.run(5_000)
    assert net.rebalances(mark) == 0
    assert net.coordinator.generation_id == gen
    assert net.coordinator.leader_id == net.m(leader_name).member_id
    assert net.m(leader_name).is_leader
    net.assert_one_owner_each()


# ------------------------------------------------------------------ zombies (B5)


def test_zombie_commit_after_its_partitions_moved_is_rejected() -> None:
    """c1 is cut off past its session timeout; its partitions move; its commit then fails."""
    net = Net(**{"group.initial.rebalance.delay.ms": 0})
    net.add("c1", **{"session.timeout.ms": 10_000})
    net.add("c2", **{"session.timeout.ms": 10_000})
    net.run(5_000)
    assert owned(net) == {"c1": {P1, P2}, "c2": {P3}}
    net.consume("c1", P1, 5)
    net.run(10)
    net.cut_off.add("c1")
    net.run(15_000)  # the coordinator expires c1 and gives everything to c2
    assert owned(net)["c2"] == {P1, P2, P3}
    assert net.coordinator.committed_offsets() == {P1: 5}  # its last commit before the cut
    # c1 still thinks it owns p1 and p2 (the zombie window) ...
    assert net.m("c1").owned == {P1, P2}
    net.cut_off.discard("c1")
    net.consume("c1", P1, 7)
    mark = net.now
    # ... until its lost FindCoordinator times out (request.timeout.ms), it finds the
    # coordinator again and its overdue auto-commit is rejected.
    net.run(40_000)
    failed = net.events(K.COMMIT_FAILED, "c1", since=mark)
    # The heartbeat and the auto-commit go out together; the coordinator rejects both.
    # The heartbeat's UNKNOWN_MEMBER_ID resets c1 first, so its rebalance commit fails
    # locally (CommitFailedException) and the rejected auto-commit surfaces as a
    # RebalanceInProgressException, as ConsumerCoordinator classifies them.
    assert [(r.what.fields["reason"], r.what.fields["detail"]) for r in failed] == [
        ("CommitFailedException", "CommitFailedException (rebalance)"),
        ("UNKNOWN_MEMBER_ID", "RebalanceInProgressException (auto)"),
    ]
    assert net.coordinator.committed_offsets()[P1] == 5
    lost = net.events(K.PARTITIONS_LOST, "c1", since=mark)
    assert [r.what.fields["partitions"] for r in lost] == ["t:0,t:1"]
    assert lost[0].t <= failed[1].t
    net.assert_one_owner_each()


def test_commit_of_a_stale_generation_is_rejected_with_illegal_generation() -> None:
    """c1's commit is slow; by its arrival the group is at the next generation."""
    net = Net(**{"group.initial.rebalance.delay.ms": 0})
    net.add("c1")
    net.run(2_000)
    net.consume("c1", P1, 3)
    net.consume("c1", P3, 4)  # p3 will move to c2
    # The next auto-commit travels 3 s; meanwhile c2 joins and a generation passes.
    net.member_delay["c1"] = 1_500
    net.run(3_100)
    assert [r for t, who, r in net.sent[-3:] if isinstance(r, OffsetCommitRequest)]
    net.member_delay["c1"] = 1
    net.add("c2")
    net.run(10_000)
    failed = net.events(K.COMMIT_FAILED, "c1")
    # It lands in Stable at the next generation: ILLEGAL_GENERATION, which the client
    # turns into a CommitFailedException and a reset generation (ConsumerCoordinator
    # resets unless it is already preparing a rebalance), so c1 loses and rejoins.
    first = failed[0].what.fields
    assert (first["reason"], first["detail"]) == (
        "ILLEGAL_GENERATION", "CommitFailedException (auto)"
    )
    assert net.coordinator.committed_offsets()[P1] == 3
    assert [r.what.fields["partitions"] for r in net.events(K.PARTITIONS_LOST, "c1")] == [
        "t:0,t:1"
    ]
    net.run(20_000)
    net.assert_one_owner_each()


# ------------------------------------------------------------------ join barrier (B2)


def test_initial_rebalance_delay_rearms_while_members_keep_arriving() -> None:
    net = Net(delay=0)
    net.add("c1")
    net.run(2_000)
    net.add("c2")
    net.run(2_000)  # t = 4000: first delay expired at 3000, re-armed
    assert net.coordinator.state is GroupState.PREPARING_REBALANCE
    net.add("c3")
    net.run(1_500)  # t = 5500
    assert net.coordinator.state is GroupState.PREPARING_REBALANCE
    net.run(5_000)
    completing = [r for r in net.events(K.GROUP_STATE_CHANGED)
                  if r.what.fields["state"] == "CompletingRebalance"]
    assert [r.t for r in completing] == [9_000]
    assert net.coordinator.generation_id == 1
    net.assert_one_owner_each()


def test_join_completes_as_soon_as_every_known_member_rejoined() -> None:
    net = Net()
    for n in ("c1", "c2", "c3"):
        net.add(n)
    net.run(10_000)
    mark = net.now
    net.close("c3")  # LeaveGroup: the others rejoin at their next heartbeat
    net.run(10_000)
    changes = [r for r in net.events(K.GROUP_STATE_CHANGED, since=mark)]
    states = [(r.what.fields["state"]) for r in changes]
    assert states == ["PreparingRebalance", "CompletingRebalance", "Stable"]
    # Completed within one heartbeat interval and two round trips, not the 300 s timeout.
    assert changes[1].t - changes[0].t <= 3_000 + 10
    net.assert_one_owner_each()


@pytest.mark.parametrize("static", [False, True])
def test_rebalance_timeout_drops_a_dynamic_laggard_but_keeps_a_static_one(static: bool) -> None:
    props: dict[str, object] = {"max.poll.interval.ms": 20_000, "session.timeout.ms": 60_000}
    net = Net(**{"group.initial.rebalance.delay.ms": 0})
    net.add("c1", **props)
    lag_props = dict(props, **({"group.instance.id": "lag"} if static else {}))
    net.add("lag", **lag_props)
    net.run(5_000)
    lag_id = net.m("lag").member_id
    gen = net.coordinator.generation_id
    net.cut_off.add("lag")  # hears nothing of the coming rebalance
    mark = net.now
    net.add("c3", **props)
    net.run(25_000)
    start = net.events(K.REBALANCE_STARTED, "broker-1", since=mark)[0].t
    done = next(r for r in net.events(K.GROUP_STATE_CHANGED, since=mark)
                if r.what.fields["state"] == "CompletingRebalance").t
    assert done - start == pytest.approx(20_000, abs=2)  # the rebalance timeout
    assert net.coordinator.generation_id == gen + 1
    if static:
        assert lag_id in net.coordinator.members
        assert net.events(K.MEMBER_REMOVED, since=mark) == []
    else:
        assert lag_id not in net.coordinator.members
        removed = net.events(K.MEMBER_REMOVED, since=mark)
        assert [(r.what.fields["member_id"], r.what.fields["reason"]) for r in removed] == [
            (lag_id, "join_timeout")
        ]


def test_session_expiry_of_a_crashed_member_triggers_a_rebalance() -> None:
    net = Net()
    net.add("c1")
    net.add("c2")
    net.run(10_000)
    gen = net.coordinator.generation_id
    mark = net.now
    net.crash("c2")
    net.run(50_000)
    assert [r.what.fields["reason"] for r in net.events(K.MEMBER_REMOVED, since=mark)] == [
        "session_timeout"
    ]
    assert net.coordinator.generation_id == gen + 1
    assert owned(net)["c1"] == {P1, P2, P3}


def test_a_busy_member_holds_up_the_rebalance_until_it_polls() -> None:
    net = Net()
    net.add("c1")
    net.add("c2")
    net.run(10_000)
    net.busy("c2")  # a long batch
    mark = net.now
    net.add("c3")
    net.run(30_000)
    assert net.coordinator.state is GroupState.PREPARING_REBALANCE
    assert net.m("c2").owned  # c2 keeps its partitions while busy (it has not rejoined)
    net.idle("c2")
    net.run(5_000)
    assert net.coordinator.state is GroupState.STABLE
    assert net.rebalances(mark) == 1
    net.assert_one_owner_each()


def test_poll_timeout_sends_leave_group_from_the_heartbeat_thread() -> None:
    net = Net()
    props = {"max.poll.interval.ms": 20_000}
    net.add("c1", **props)
    net.add("c2", **props)
    net.run(10_000)
    net.busy("c2")
    busy_at = net.now
    net.run(25_000)
    leaves = [(t, r) for t, who, r in net.sent if who == "c2" and "Leave" in type(r).__name__]
    assert len(leaves) == 1 and leaves[0][0] == pytest.approx(busy_at + 20_000, abs=3_000)
    assert net.events(K.MEMBER_REMOVED, since=busy_at)[0].what.fields["reason"] == "leave"
    assert owned(net)["c1"] == {P1, P2, P3}
    # The zombie still holds its partitions until the application polls again ...
    assert net.m("c2").owned == {P3}
    net.idle("c2")
    net.run(10_000)
    # ... then they are lost (its generation was reset) and it rejoins.
    assert [r.what.fields["partitions"] for r in net.events(K.PARTITIONS_LOST, "c2")] == ["t:2"]
    net.assert_one_owner_each()


def test_dynamic_close_leaves_at_once_and_the_group_rebalances() -> None:
    net = Net()
    net.add("c1")
    net.add("c2")
    net.run(10_000)
    net.consume("c2", P3, 9)
    mark = net.now
    net.close("c2")
    net.run(5_000)
    assert net.m("c2").closed
    assert net.coordinator.committed_offsets()[P3] == 9
    assert net.events(K.MEMBER_REMOVED, since=mark)[0].what.fields["reason"] == "leave"
    assert owned(net) == {"c1": {P1, P2, P3}}
    assert net.starts("c1", mark)[P3] == 9
    net.assert_one_owner_each()


def test_members_follow_the_group_to_a_new_coordinator() -> None:
    net = Net()
    net.add("c1")
    net.add("c2")
    net.run(10_000)
    net.consume("c1", P1, 4)
    net.run(6_000)
    committed = net.coordinator.committed_offsets()
    old = net.coordinator
    net.coordinators[2] = ClassicGroupCoordinator(
        "g", net.broker_config, net.rng, broker=2, committed=committed
    )
    net.lead_broker = 2
    net._coord_out(1, old.unload(net.now))
    mark = net.now
    net.run(30_000)
    assert {r.what.fields["broker"] for r in net.events(K.COORDINATOR_FOUND, since=mark)} == {2}
    assert net.coordinator.state is GroupState.STABLE
    assert net.coordinator.committed_offsets()[P1] == 4
    net.assert_one_owner_each()


# ------------------------------------------------------------------ sweep


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky", "roundrobin", "sticky"])
def test_random_membership_changes_converge_to_one_owner_per_partition(
    seed: int, strategy: str
) -> None:
    rng = random.Random(seed)
    net = Net(partitions=rng.randint(1, 7), seed=seed, delay=rng.choice([0, 1, 5]))
    props: dict[str, object] = {"partition.assignment.strategy": strategy,
                                "session.timeout.ms": 10_000, "max.poll.interval.ms": 30_000}
    live: list[str] = []
    for i in range(rng.randint(4, 7)):
        action = rng.random()
        if not live or action < 0.6:
            name = f"c{i}"
            static = rng.random() < 0.3
            net.add(name, **props, **({"group.instance.id": f"s{i}"} if static else {}))
            live.append(name)
        elif action < 0.8:
            name = live.pop(rng.randrange(len(live)))
            net.close(name)
        else:
            name = live.pop(rng.randrange(len(live)))
            net.crash(name)
        net.run(rng.choice([100, 2_000, 8_000]))
    if not live:
        net.add("last", **props)
        live.append("last")
    net.run(120_000)
    assert net.coordinator.state is GroupState.STABLE
    assert set(net.coordinator.members) == {net.m(n).member_id for n in live}
    for n in live:
        assert net.m(n).generation.generation_id == net.coordinator.generation_id
    net.assert_one_owner_each()
