"""The broker's rules on a fake clock, without Ray, asyncio or ZooKeeper.

:class:`~emulator.broker.replica_manager.ReplicaManager` is driven step by
step: the high watermark and the produces waiting on it, ISR shrink and
expand (the ZooKeeper write's result is fed in by hand), fetch-session
parking with its wake-ups (data, a leader move, ``fetch.max.wait.ms``),
leader changes and fencing, and the hosting of group coordinators.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pytest

from emulator.broker.coordinators import CoordinatorHost
from emulator.broker.isr import IsrWrite, WriteResult
from emulator.broker.messages import (
    NOT_LEADER,
    UNKNOWN_TOPIC_OR_PARTITION,
    AckProduce,
    BrokerOutput,
    ExpandIsr,
    LeaderAndIsrState,
    ReplicaFetchAnswer,
    SessionAnswer,
    SessionFetch,
    WakeFetchSession,
    WakeReplicaFetch,
)
from emulator.broker.replica_manager import BrokerConfig, ReplicaManager
from emulator.clock import FakeClock
from emulator.controller import LeaderIsr
from emulator.events import EventKind
from emulator.modern.coordinator import CoordinatorOutput, GroupCoordinator
from emulator.modern.errors import Errors
from emulator.modern.messages import (
    GroupRequest,
    OffsetCommitRequest,
    OffsetCommitResponse,
    TopicPartition,
)
from emulator.modern.placement import OFFSETS_TOPIC

T = "t"
TP = (T, 0)
LAG_MS = 10_000.0  # replica.lag.time.max.ms


class Broker:
    """One broker's core on a fake clock, with its event log as a list."""

    def __init__(
        self,
        broker_id: int = 0,
        partitions: tuple[TopicPartition, ...] = (),
        coordinators: CoordinatorHost | None = None,
        counts: dict[str, int] | None = None,
    ) -> None:
        self.clock = FakeClock()
        self.events: list[tuple[EventKind, dict[str, object]]] = []
        self.rm = ReplicaManager(
            broker_id,
            BrokerConfig(max_fetch_messages=1024, lag_time_max_ms=LAG_MS, lag_max_messages=4000),
            partitions,
            {},
            self._emit,
            coordinators,
            counts,
        )

    def _emit(self, kind: EventKind, **fields: object) -> None:
        self.events.append((kind, fields))

    def at(self, now_ms: float) -> float:
        self.clock.advance(now_ms - self.clock.now_ms())
        return now_ms

    def lead(
        self, tp: TopicPartition = TP, isr: tuple[int, ...] = (0, 1, 2), epoch: int = 0
    ) -> None:
        """The controller makes this broker leader of ``tp`` (replicas 0, 1, 2; zkVersion 3)."""
        got = self.rm.leader_and_isr(
            self.clock.now_ms(),
            {tp: (self.rm.broker_id, epoch, isr, 1, 3)},
            [0, 1, 2],
            {tp: [0, 1, 2]},
        )
        assert got.changes == {tp: "lead"}

    def follower_fetch(self, follower: int, offset: int) -> list[BrokerOutput]:
        result = self.rm.replica_fetch(self.clock.now_ms(), follower, {TP: offset})
        return result.outputs

    def isr_events(self) -> list[tuple[object, object]]:
        return [(f["reason"], f["detail"]) for k, f in self.events if k is EventKind.ISR_CHANGED]


def acks(outputs: list[BrokerOutput]) -> list[AckProduce]:
    return [o for o in outputs if isinstance(o, AckProduce)]


# ------------------------------------------------------------- high watermark


def test_the_hw_is_the_least_leo_over_the_isr_and_acks_wait_for_it() -> None:
    b = Broker()
    b.lead()
    step = b.rm.produce({TP: 10})
    (pending,) = step.pending.values()
    assert (pending.start, pending.end) == (0, 10)
    # makeLeader: the followers' LEOs are unknown, so the HW holds.
    assert acks(step.outputs) == [] and b.rm.replicas[TP].hw == 0

    assert acks(b.follower_fetch(1, 10)) == []  # follower 2 still unknown
    assert b.rm.replicas[TP].hw == 0
    assert acks(b.follower_fetch(2, 4)) == []
    assert b.rm.replicas[TP].hw == 4  # min(10, 10, 4)
    # Consumers see only what the HW covers.
    assert b.rm.serve(TP, 0, "smallest", 100) == (0, 4)

    second = b.rm.produce({TP: 5}).pending[TP]
    assert acks(b.follower_fetch(2, 10)) == [AckProduce(pending.waiter, True)]
    assert b.rm.replicas[TP].hw == 10
    assert acks(b.follower_fetch(1, 15)) == []  # follower 2 is at 10
    assert acks(b.follower_fetch(2, 15)) == [AckProduce(second.waiter, True)]
    assert b.rm.replicas[TP].hw == 15


def test_the_hw_never_goes_backwards() -> None:
    b = Broker()
    b.lead(isr=(0, 1))
    b.rm.produce({TP: 8})
    b.follower_fetch(1, 8)
    assert b.rm.replicas[TP].hw == 8
    b.follower_fetch(1, 3)  # a follower that truncated reports a lower LEO
    assert b.rm.replicas[TP].hw == 8


def test_a_produce_to_a_follower_is_not_leader_and_to_an_unknown_partition_unknown() -> None:
    b = Broker(broker_id=1)
    b.rm.leader_and_isr(0.0, {TP: (0, 0, (0, 1), 0, 1)}, [0, 1], {TP: [0, 1]})
    step = b.rm.produce({TP: 5, ("other", 0): 5})
    assert step.pending == {}
    unknown = (UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_OR_PARTITION)
    assert step.answers == {TP: (NOT_LEADER, NOT_LEADER), ("other", 0): unknown}


def test_a_timed_out_produce_is_no_longer_acked() -> None:
    b = Broker()
    b.lead(isr=(0, 1))
    waiter = b.rm.produce({TP: 5}).pending[TP].waiter
    b.rm.drop_waiter(TP, waiter)
    assert acks(b.follower_fetch(1, 5)) == []
    assert b.rm.replicas[TP].hw == 5  # the messages stay in the log and commit


# ------------------------------------------------------------------------ ISR


def _write(b: Broker, write: IsrWrite | None, version: int | None = 4) -> WriteResult:
    """The shell's part of an ISR write: the conditional update returned ``version``."""
    assert write is not None
    result = b.rm.isr_written(write, version)
    b.rm.end_isr_write(write, result is WriteResult.WRITTEN)
    return result


def test_isr_shrinks_after_replica_lag_time_max_ms_and_the_waiting_produce_commits() -> None:
    b = Broker()
    b.lead()  # at t=0: both followers count as updated now
    waiter = b.rm.produce({TP: 10}).pending[TP].waiter
    rep = b.rm.replicas[TP]
    b.at(5_000)
    b.follower_fetch(1, 10)  # follower 1 keeps up; follower 2 is dead
    b.at(LAG_MS)
    assert b.rm.begin_shrink(TP, rep, LAG_MS) is None  # not *more* than the lag yet
    b.at(LAG_MS + 1)
    write = b.rm.begin_shrink(TP, rep, LAG_MS + 1)
    assert write is not None and write.new_isr == (0, 1) and write.removed == {2}
    assert write.state(0) == LeaderIsr(0, 0, (0, 1), 1)
    assert not write.needs_version and write.expected_version == 3
    # One write at a time per partition.
    assert b.rm.begin_shrink(TP, rep, LAG_MS + 2) is None

    result = b.rm.isr_written(write, 4)
    assert result is WriteResult.WRITTEN
    assert rep.isr == (0, 1) and rep.zk_version == 4
    assert b.isr_events() == [("shrink", "[0,1]")]
    # The dropped follower no longer holds the HW: the produce commits.
    out = b.rm.end_isr_write(write, True)
    assert acks(out) == [AckProduce(waiter, True)] and rep.hw == 10
    assert not rep.isr_write_pending


def test_an_isr_pass_checks_the_led_partitions_with_followers_as_it_reaches_them() -> None:
    """``shrink_candidates`` leaves out only what ``begin_shrink`` would refuse at once."""
    solo, followed, grows, other = (T, 1), (T, 2), (T, 3), (T, 4)
    b = Broker()
    b.lead(solo, isr=(0,))
    b.lead(followed)
    b.lead(grows, isr=(0,))
    b.rm.leader_and_isr(0.0, {other: (1, 0, (1, 0), 1, 3)}, [0, 1, 2], {other: [1, 0]})
    assert set(b.rm.replicas) == {solo, followed, grows, other}
    for tp, rep in b.rm.replicas.items():  # the others: nothing to shrink, whatever the lag
        if tp != followed:
            assert b.rm.begin_shrink(tp, rep, 10 * LAG_MS) is None
    seen = []
    for tp, _rep in b.rm.shrink_candidates():
        seen.append(tp)
        # An ISR that grows while the pass waits on a write is checked when reached.
        b.rm.replicas[grows].isr = (0, 1)
    assert seen == [followed, grows]


def test_a_slow_follower_is_dropped_too() -> None:
    b = Broker()
    b.lead(isr=(0, 1))
    b.rm.produce({TP: 5000})
    b.follower_fetch(1, 999)  # 4001 behind: more than replica.lag.max.messages
    write = b.rm.begin_shrink(TP, b.rm.replicas[TP], 1.0)
    assert write is not None and write.new_isr == (0,)


def test_isr_expands_when_the_follower_reaches_the_hw() -> None:
    b = Broker()
    b.lead(isr=(0, 1))
    b.rm.produce({TP: 100})
    b.follower_fetch(1, 100)
    assert b.rm.replicas[TP].hw == 100
    # Follower 2 (assigned, out of the ISR) catches up one fetch at a time.
    assert [o for o in b.follower_fetch(2, 0) if isinstance(o, ExpandIsr)] == []
    assert [o for o in b.follower_fetch(2, 99) if isinstance(o, ExpandIsr)] == []
    (expand,) = [o for o in b.follower_fetch(2, 100) if isinstance(o, ExpandIsr)]
    assert expand.follower == 2
    write = b.rm.begin_expand(expand)
    assert write is not None and write.new_isr == (0, 1, 2)  # in assignment order
    assert b.rm.begin_expand(expand) is None  # a second task finds one under way
    assert _write(b, write) is WriteResult.WRITTEN
    assert b.rm.replicas[TP].isr == (0, 1, 2)
    assert b.isr_events() == [("expand", "[0,1,2]")]
    assert b.rm.begin_expand(expand) is None  # already in the ISR


def test_a_version_conflict_rereads_the_znode_and_a_moved_partition_writes_nothing() -> None:
    b = Broker()
    b.lead()
    rep = b.rm.replicas[TP]
    b.at(LAG_MS + 1)
    write = b.rm.begin_shrink(TP, rep, LAG_MS + 1)
    assert write is not None
    assert b.rm.isr_written(write, None) is WriteResult.CONFLICT
    # The znode says another ISR (written by the controller) at version 7.
    b.rm.isr_reread(write, (LeaderIsr(0, 0, (0, 2), 2), 7))
    b.rm.end_isr_write(write, False)
    assert (rep.isr, rep.zk_version, rep.controller_epoch) == ((0, 2), 7, 2)
    assert b.isr_events() == []

    write = b.rm.begin_shrink(TP, rep, LAG_MS + 2)
    assert write is not None
    # Meanwhile the controller moves the partition to broker 1 (epoch 1).
    b.rm.leader_and_isr(LAG_MS + 2, {TP: (1, 1, (1, 2), 2, 8)}, [0, 1, 2])
    assert b.rm.isr_written(write, 9) is WriteResult.MOVED
    assert rep.isr == (1, 2) and b.isr_events() == []


def test_an_unknown_zk_version_is_read_before_the_write() -> None:
    b = Broker()
    # A controller's LeaderIsr carries no zkVersion.
    b.rm.leader_and_isr(0.0, {TP: LeaderIsr(0, 0, (0, 1), 1)}, [0, 1], {TP: [0, 1]})
    rep = b.rm.replicas[TP]
    write = b.rm.begin_shrink(TP, rep, LAG_MS + 1)
    assert write is not None and write.needs_version
    # The znode names another leader epoch: the write does not go ahead.
    assert not b.rm.isr_version_read(write, (LeaderIsr(0, 5, (0, 1), 1), 2))
    assert b.rm.isr_version_read(write, (LeaderIsr(0, 0, (0, 1), 1), 2))
    assert write.expected_version == 2


# -------------------------------------------------------------- fetch sessions


def _add(slot: int, partition: int, offset: int | None) -> SessionFetch:
    return SessionFetch(slot, T, partition, offset, "smallest", 100)


def test_an_empty_fetch_parks_and_a_produce_wakes_it() -> None:
    b = Broker(partitions=((T, 0), (T, 1)))  # leads both alone: a produce commits at once
    b.rm.produce({(T, 0): 5})
    step = b.rm.fetch.begin(0.0, "h", True, [_add(1, 0, 0), _add(2, 1, 0)], [], 500.0)
    assert step.answers == [SessionAnswer(1, 0, 5)]
    assert step.wait_ms is None  # something was answered: no long poll
    assert set(step.session.parked) == {2}

    step = b.rm.fetch.begin(10.0, "h", False, [], [], 500.0)
    assert step.answers == [] and step.wait_ms == 500.0
    out = b.rm.produce({(T, 1): 3}).outputs
    assert WakeFetchSession("h") in out
    assert b.rm.fetch.collect(step.session) == [SessionAnswer(2, 0, 3)]
    assert b.rm.fetch.parked == {} and step.session.parked == {}


def test_a_long_poll_runs_out_after_fetch_max_wait_ms() -> None:
    b = Broker(partitions=(TP,))
    step = b.rm.fetch.begin(1_000.0, "h", True, [_add(1, 0, 0)], [], 500.0)
    assert step.wait_ms == 500.0
    assert b.rm.fetch.next_deadline() == 1_500.0
    assert b.rm.fetch.expired(1_499.0) == []
    assert b.rm.fetch.expired(1_500.0) == [WakeFetchSession("h")]
    assert b.rm.fetch.collect(step.session) == []  # nothing came: it stays parked
    assert set(step.session.parked) == {1} and b.rm.fetch.next_deadline() is None
    # No wait at all when fetch.max.wait.ms is 0.
    assert b.rm.fetch.begin(2_000.0, "h", False, [], [], 0.0).wait_ms is None


def test_a_parked_fetch_is_answered_not_leader_when_the_partition_moves() -> None:
    b = Broker(partitions=(TP,))
    b.rm.produce({TP: 2})
    step = b.rm.fetch.begin(0.0, "h", True, [_add(7, 0, 2)], [], 500.0)
    assert step.answers == [] and step.wait_ms == 500.0
    got = b.rm.leader_and_isr(1.0, {TP: (1, 1, (1,), 0, 1)}, [0, 1], {TP: [1, 0]})
    assert got.changes == {TP: "follow"} and WakeFetchSession("h") in got.outputs
    assert b.rm.fetch.collect(step.session) == [SessionAnswer(7, NOT_LEADER, NOT_LEADER)]


def test_withdrawn_fetches_and_replaced_sessions_are_never_answered() -> None:
    b = Broker(partitions=((T, 0), (T, 1)))
    first = b.rm.fetch.begin(0.0, "h", True, [_add(1, 0, 0), _add(2, 1, 0)], [], 0.0)
    b.rm.fetch.begin(0.0, "h", False, [], [1], 0.0)
    assert set(first.session.parked) == {2}
    assert b.rm.fetch.parked == {(T, 1): {("h", 2): None}}
    # The host lost its session: a new one drops what the old one parked.
    step = b.rm.fetch.begin(0.0, "h", True, [_add(3, 0, 0)], [], 0.0)
    assert step.replaced is first.session and first.session.closed
    assert b.rm.fetch.parked == {(T, 0): {("h", 3): None}}
    out = b.rm.produce({(T, 0): 1, (T, 1): 1}).outputs
    assert [o for o in out if isinstance(o, WakeFetchSession)] == [WakeFetchSession("h")]
    assert b.rm.fetch.collect(step.session) == [SessionAnswer(3, 0, 1)]


# ------------------------------------------------------- replica fetch long poll

REPLICA_WAIT_MS = 500.0  # replica.fetch.wait.max.ms


def replica_wakes(outputs: list[BrokerOutput]) -> list[WakeReplicaFetch]:
    return [o for o in outputs if isinstance(o, WakeReplicaFetch)]


def test_a_follower_fetch_with_data_or_an_error_is_answered_at_once() -> None:
    b = Broker()
    b.lead(isr=(0, 1))
    b.rm.produce({TP: 3})
    now = b.clock.now_ms()
    got = b.rm.replica_fetch(now, 1, {TP: 0}, REPLICA_WAIT_MS)  # data beyond its offset
    assert got.wait is None and got.answers == {TP: ReplicaFetchAnswer(3, 0, 0, None)}
    got = b.rm.replica_fetch(now, 1, {TP: 5}, REPLICA_WAIT_MS)  # ahead: it truncates
    assert got.wait is None and got.answers[TP].new_leo == 3
    got = b.rm.replica_fetch(now, 1, {TP: 3, (T, 9): 0}, REPLICA_WAIT_MS)  # (t, 9): not led
    assert got.wait is None and got.answers[(T, 9)].new_leo == NOT_LEADER
    assert got.answers[TP] == ReplicaFetchAnswer(3, 3, 0, None)  # the HW moved: answered
    got = b.rm.replica_fetch(now, 1, {TP: 3}, 0.0)  # no wait asked
    # The same answer again would change nothing at the follower: left out.
    assert got.wait is None and got.answers == {}
    assert b.rm.replica_waits.waits == {} and b.rm.replica_waits.parked == {}


def test_a_follower_is_answered_what_would_change_its_replica_and_nothing_else() -> None:
    b = Broker()
    b.lead(isr=(0, 1))
    now = b.clock.now_ms()
    idle = {TP: 0}
    assert b.rm.replica_fetch(now, 1, idle, 0.0).answers == {TP: ReplicaFetchAnswer(0, 0, 0, None)}
    assert b.rm.replica_fetch(now, 1, idle, 0.0).answers == {}  # it holds that answer
    assert b.rm.replica_fetch(now, 2, idle, 0.0).answers == {TP: ReplicaFetchAnswer(0, 0, 0, None)}
    # A parked fetch's look at the log on arrival is not an answer: what the
    # follower gets when the fetch is answered is compared with what it holds.
    got = b.rm.replica_fetch(now, 1, idle, REPLICA_WAIT_MS)
    assert got.wait is not None
    b.rm.produce({TP: 2})
    assert b.rm.replica_fetch_collect(got.wait) == {TP: ReplicaFetchAnswer(2, 0, 0, None)}
    # Another fetch offset than the one it was given: answered again.
    assert b.rm.replica_fetch(now, 1, {TP: 1}, 0.0).answers[TP].new_leo == 2
    caught_up = {TP: ReplicaFetchAnswer(2, 2, 0, None)}
    assert b.rm.replica_fetch(now, 1, {TP: 2}, 0.0).answers == caught_up
    assert b.rm.replica_fetch(now, 1, {TP: 2}, 0.0).answers == {}
    # A new leader epoch: the follower may have been told otherwise meanwhile.
    b.rm.leader_and_isr(now, {TP: (0, 1, (0, 1), 0, 1)}, [0, 1], {TP: [0, 1]})
    assert b.rm.replica_fetch(now, 1, {TP: 2}, 0.0).answers == caught_up


def test_a_follower_fetch_with_nothing_new_parks_until_an_append() -> None:
    b = Broker()
    b.lead(isr=(0, 1))
    b.rm.produce({TP: 4})
    b.follower_fetch(1, 4)
    assert b.rm.replicas[TP].hw == 4
    got = b.rm.replica_fetch(b.at(100.0), 1, {TP: 4}, REPLICA_WAIT_MS)
    wait = got.wait
    assert wait is not None and got.answers == {}
    assert b.rm.replica_waits.parked == {TP: {wait.key: None}}
    assert b.rm.replica_waits.next_deadline() == 100.0 + REPLICA_WAIT_MS
    assert b.rm.replica_waits.expired(599.0) == []
    # The follower was recorded when its fetch arrived: it is caught up, in sync.
    assert b.rm.replicas[TP].follower_update_ms[1] == 100.0

    step = b.rm.produce({TP: 2})
    assert replica_wakes(step.outputs) == [WakeReplicaFetch(wait.key)]
    assert b.rm.replica_waits.parked == {}  # answered once, whatever comes next
    assert replica_wakes(b.rm.produce({TP: 1}).outputs) == []
    b.at(130.0)
    answer = b.rm.replica_fetch_collect(wait)
    assert answer == {TP: ReplicaFetchAnswer(7, 4, 0, None)}  # the HW waits for its next fetch
    assert b.rm.replica_waits.waits == {}
    # Answering does not record the follower again (only a fetch's arrival does).
    assert b.rm.replicas[TP].follower_update_ms[1] == 100.0
    (pending,) = step.pending.values()
    assert acks(b.follower_fetch(1, 7)) == [AckProduce(pending.waiter, True), AckProduce(3, True)]


def test_a_parked_follower_fetch_runs_out_after_replica_fetch_wait_max_ms() -> None:
    b = Broker()
    b.lead(isr=(0, 1))
    wait = b.rm.replica_fetch(0.0, 1, {TP: 0}, REPLICA_WAIT_MS).wait
    assert wait is not None
    assert b.rm.replica_waits.expired(REPLICA_WAIT_MS - 1) == []
    assert b.rm.replica_waits.expired(REPLICA_WAIT_MS) == [WakeReplicaFetch(wait.key)]
    assert b.rm.replica_fetch_collect(wait) == {TP: ReplicaFetchAnswer(0, 0, 0, None)}
    assert b.rm.replica_waits.parked == {} and b.rm.replica_waits.next_deadline() is None


def test_an_hw_move_alone_does_not_answer_a_parked_follower_fetch() -> None:
    b = Broker()
    b.lead(isr=(0, 1, 2))
    b.rm.produce({TP: 5})
    b.follower_fetch(2, 5)
    wait = b.rm.replica_fetch(0.0, 2, {TP: 5}, REPLICA_WAIT_MS).wait
    assert wait is not None
    out = b.follower_fetch(1, 5)  # the HW moves to 5: follower 2 fetches up to the LEO
    assert b.rm.replicas[TP].hw == 5 and replica_wakes(out) == []
    assert b.rm.replica_waits.parked == {TP: {wait.key: None}}


def test_a_parked_follower_fetch_is_answered_not_leader_when_the_leader_moves() -> None:
    b = Broker()
    b.lead(isr=(0, 1))
    other = (T, 1)
    b.lead(other, isr=(0, 1))
    wait = b.rm.replica_fetch(0.0, 1, {TP: 0, other: 0}, REPLICA_WAIT_MS).wait
    assert wait is not None
    # The controller makes broker 2 the leader of TP: the parked fetch answers at once.
    got = b.rm.leader_and_isr(10.0, {TP: (2, 1, (2, 1), 1, 4)}, [0, 1, 2])
    assert got.changes == {TP: "follow"}
    assert replica_wakes(got.outputs) == [WakeReplicaFetch(wait.key)]
    answer = b.rm.replica_fetch_collect(wait)
    assert answer[TP].new_leo == NOT_LEADER and answer[other] == ReplicaFetchAnswer(0, 0, 0, None)
    assert b.rm.replica_waits.parked == {}


def test_two_parked_fetches_of_one_follower_are_answered_each() -> None:
    b = Broker()
    b.lead(isr=(0, 1))
    first = b.rm.replica_fetch(0.0, 1, {TP: 0}, REPLICA_WAIT_MS).wait
    second = b.rm.replica_fetch(5.0, 1, {TP: 0}, REPLICA_WAIT_MS).wait  # its call timed out
    assert first is not None and second is not None and first.key != second.key
    wakes = replica_wakes(b.rm.produce({TP: 1}).outputs)
    assert wakes == [WakeReplicaFetch(first.key), WakeReplicaFetch(second.key)]
    assert b.rm.replica_fetch_collect(first) == b.rm.replica_fetch_collect(second)
    b.rm.replica_waits.done(first)  # twice: nothing happens
    assert b.rm.replica_waits.waits == {}


def test_a_follower_fetches_each_leader_it_follows() -> None:
    f = Broker(broker_id=1)
    other = (T, 1)
    f.rm.leader_and_isr(
        0.0,
        {TP: (0, 0, (0, 1), 0, 1), other: (2, 0, (2, 1), 0, 1)},
        [0, 1, 2],
        {TP: [0, 1], other: [2, 1]},
    )
    assert f.rm.followed_leaders() == [0, 2]
    assert f.rm.replica_fetch_for(0) == {TP: 0} and f.rm.replica_fetch_for(2) == {other: 0}
    assert f.rm.replica_fetch_for(1) == {}
    # An answer with an error tells the fetcher to back off; a clean one does not.
    assert f.rm.apply_replica_answer(0, {TP: ReplicaFetchAnswer(3, 1, 0, None)}) is False
    assert f.rm.apply_replica_answer(2, {other: ReplicaFetchAnswer(-1, -1, -1, None)}) is True
    # ... but not an error for a partition it no longer follows from that leader.
    assert f.rm.apply_replica_answer(2, {TP: ReplicaFetchAnswer(-1, -1, -1, None)}) is False
    assert f.rm.replica_fetch_for(0) == {TP: 3}
    f.rm.leader_and_isr(1.0, {other: (0, 1, (0, 1), 0, 2)}, [0, 1, 2])
    assert f.rm.followed_leaders() == [0] and f.rm.replica_fetch_for(2) == {}
    assert f.rm.replica_fetch_for(0) == {TP: 3, other: 0}


# -------------------------------------------------------- leader changes, fencing


def test_a_leader_that_becomes_a_follower_fails_its_waiting_produces() -> None:
    b = Broker()
    b.lead(isr=(0, 1))
    waiter = b.rm.produce({TP: 5}).pending[TP].waiter
    got = b.rm.leader_and_isr(0.0, {TP: (1, 1, (1,), 1, 5)}, [0, 1])
    assert got.changes == {TP: "follow"}
    assert acks(got.outputs) == [AckProduce(waiter, False)]
    assert b.rm.metadata()[TP] == 1
    assert b.rm.serve(TP, 0, "smallest", 10) == (NOT_LEADER, NOT_LEADER)


def test_a_stale_leader_epoch_is_ignored() -> None:
    b = Broker()
    b.lead(epoch=3)
    got = b.rm.leader_and_isr(0.0, {TP: (1, 2, (1,), 1, 9)}, [0, 1, 2])
    assert got.changes == {} and got.outputs == []
    rep = b.rm.replicas[TP]
    assert (rep.leader, rep.leader_epoch, rep.isr) == (0, 3, (0, 1, 2))


def test_a_follower_fetches_from_its_leader_and_truncates_to_it() -> None:
    follower = Broker(broker_id=1)
    follower.rm.leader_and_isr(0.0, {TP: (0, 0, (0, 1), 0, 1)}, [0, 1], {TP: [0, 1]})
    assert follower.rm.replica_fetches(busy=()) == {0: {TP: 0}}
    assert follower.rm.replica_fetches(busy={0}) == {}

    leader = Broker(broker_id=0)
    leader.lead(isr=(0, 1))
    leader.rm.produce({TP: 2000})
    answer = leader.rm.replica_fetch(0.0, 1, {TP: 0}).answers
    assert answer == {TP: ReplicaFetchAnswer(1024, 0, 0, None)}  # one fetch: 1024 messages
    follower.rm.apply_replica_answer(0, answer)
    assert follower.rm.replicas[TP].leo == 1024
    # Ahead of the leader (OffsetOutOfRange): the leader's LEO, to truncate to.
    answer = leader.rm.replica_fetch(0.0, 1, {TP: 2500}).answers
    assert answer[TP].new_leo == 2000
    follower.rm.replicas[TP].leo = 2500
    follower.rm.apply_replica_answer(0, answer)
    assert follower.rm.replicas[TP].leo == 2000
    # A broker that is not an assigned replica gets NotLeader.
    assert leader.rm.replica_fetch(0.0, 7, {TP: 0}).answers[TP].new_leo == NOT_LEADER
    # An answer from a broker that is no longer the leader is dropped.
    follower.rm.apply_replica_answer(2, {TP: ReplicaFetchAnswer(5, 5, 0, None)})
    assert follower.rm.replicas[TP].leo == 2000


def test_leader_and_isr_states_come_as_tuples_or_controller_states() -> None:
    assert LeaderAndIsrState.of((1, 2, [0, 1])) == LeaderAndIsrState(1, 2, (0, 1), 0, -1)
    assert LeaderAndIsrState.of((1, 2, (0,), 3, None)) == (1, 2, (0,), 3, -1)
    assert LeaderAndIsrState.of(LeaderIsr(1, 2, (0, 1), 4)) == (1, 2, (0, 1), 4, -1)


def test_push_plan_sends_leader_and_isr_to_live_replicas_and_the_leader() -> None:
    b = Broker()
    b.rm.record_assignment(T, {0: [0, 1, 2]})
    plan = b.rm.push_plan({TP: LeaderIsr(1, 1, (1, 2), 1)}, live=[1, 2])
    state = LeaderAndIsrState(1, 1, (1, 2), 1, -1)
    assert plan.leader_and_isr == {1: {TP: state}, 2: {TP: state}}
    assert plan.leaders == {TP: 1} and plan.assigned == {TP: [0, 1, 2]}


# ------------------------------------------------------------- coordinators


def _silent(kind: EventKind, **fields: object) -> None:
    del kind, fields


class Recording(GroupCoordinator):
    """A coordinator that records the optional calls; ``unload``/``update_topics`` kept default."""

    def __init__(self, committed: Mapping[TopicPartition, int] | None) -> None:
        self.committed = dict(committed or {})
        self.handled: list[GroupRequest] = []

    def handle(
        self, now_ms: float, request: GroupRequest, *, client_id: str = "consumer"
    ) -> list[CoordinatorOutput]:
        self.handled.append(request)
        return []

    def poll(self, now_ms: float) -> list[CoordinatorOutput]:
        return []

    def next_deadline(self) -> float | None:
        return None

    def committed_offsets(self) -> dict[TopicPartition, int]:
        return dict(self.committed)

    def delete_offsets(self, now_ms: float, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self.committed.pop(tp, None)


class Growing(Recording):
    def __init__(self, committed: Mapping[TopicPartition, int] | None) -> None:
        super().__init__(committed)
        self.topics: list[dict[str, int]] = []

    def update_topics(self, now_ms: float, topics: Mapping[str, int]) -> None:
        self.topics.append(dict(topics))


def test_leading_an_offsets_partition_loads_its_groups_and_following_unloads_them() -> None:
    made: dict[str, Recording] = {}

    def factory(group: str, committed: dict[TopicPartition, int] | None) -> GroupCoordinator:
        made[group] = Recording(committed)
        return made[group]

    host = CoordinatorHost(0, {0: 1}, factory, _silent)
    b = Broker(coordinators=host)
    otp = (OFFSETS_TOPIC, 0)
    b.rm.leader_and_isr(0.0, {otp: (1, 0, (1, 0), 0, 1)}, [0, 1], {otp: [1, 0]})
    # As a follower it copies the leader's offsets with each replica fetch.
    b.rm.apply_replica_answer(1, {otp: ReplicaFetchAnswer(0, 0, 0, {"g": {TP: 7}})})
    got = b.rm.leader_and_isr(1.0, {otp: (0, 1, (0,), 0, 2)}, [0, 1])
    assert got.changes == {otp: "lead"}
    started = [f for k, f in b.events if k is EventKind.COORDINATOR_STARTED]
    assert started == [{"broker": 0, "partition": 0, "count": 1, "reason": "leader_elected"}]
    assert host.coordinator_for("g") == 0
    host.exchange(2.0, "h", [GroupRequest(1, "g")])
    assert made["g"].committed == {TP: 7}  # the new coordinator starts from the replica
    made["g"].committed[TP] = 9
    got = b.rm.leader_and_isr(3.0, {otp: (1, 2, (1, 0), 0, 3)}, [0, 1])
    assert got.changes == {otp: "follow"}
    assert host.coordinators == {} and b.rm.offsets_replica[0] == {"g": {TP: 9}}


class Committing(Recording):
    """Accepts the commits of member ``m``, refuses the others'."""

    def handle(
        self, now_ms: float, request: GroupRequest, *, client_id: str = "consumer"
    ) -> list[CoordinatorOutput]:
        super().handle(now_ms, request, client_id=client_id)
        if not isinstance(request, OffsetCommitRequest):
            return []
        if request.member_id != "m":
            return [OffsetCommitResponse(request.corr, Errors.UNKNOWN_MEMBER_ID)]
        self.committed.update(request.offsets)
        return [OffsetCommitResponse(request.corr, accepted_ms=now_ms)]


def test_an_accepted_commit_is_appended_and_wakes_the_followers_parked_fetch() -> None:
    coord = Committing(None)
    host = CoordinatorHost(0, {0: 0}, lambda g, _c: coord, _silent)
    b = Broker(coordinators=host)
    otp = (OFFSETS_TOPIC, 0)
    b.lead(otp, isr=(0, 1))
    b.rm.leaders[TP] = 2  # the committed partition is in the metadata cache (led elsewhere)
    wait = b.rm.replica_fetch(0.0, 1, {otp: 0}, REPLICA_WAIT_MS).wait
    assert wait is not None  # nothing committed yet: parked
    answers, out = b.rm.group_exchange(
        1.0, "h", [OffsetCommitRequest(1, "g", member_id="x", offsets={TP: 5})]
    )
    assert answers[0].error is Errors.UNKNOWN_MEMBER_ID and out == []  # refused: no record
    answers, out = b.rm.group_exchange(
        2.0, "h", [OffsetCommitRequest(2, "g", member_id="m", offsets={TP: 5})]
    )
    assert answers[0].error is Errors.NONE
    assert replica_wakes(out) == [WakeReplicaFetch(wait.key)]
    assert b.rm.replicas[otp].leo == 1 and b.rm.replicas[otp].waiters == []
    answer = b.rm.replica_fetch_collect(wait)
    assert answer[otp].new_leo == 1 and answer[otp].offsets == {"g": {TP: 5}}
    assert host.take_commits() == {}  # taken by the broker


def test_a_grown_topic_reaches_the_coordinators_that_take_it() -> None:
    counts = {T: 2}
    growing, plain = Growing(None), Recording(None)
    host = CoordinatorHost(0, {0: 0}, lambda g, _c: growing if g == "a" else plain, _silent)
    b = Broker(coordinators=host, counts=counts)
    host.exchange(0.0, "h", [GroupRequest(1, "a"), GroupRequest(2, "b")])
    b.rm.update_metadata(1.0, {(T, 0): 0, (T, 1): 0}, [0])
    assert growing.topics == []  # no growth
    b.rm.update_metadata(2.0, {(T, 2): 0}, [0])
    assert growing.topics == [{T: 3}] and counts == {T: 3}  # the factory's image too
    assert plain.unload(2.0) == []  # the default of a coordinator without it


@pytest.mark.parametrize("protocol", ["classic-eager", "consumer"])
def test_both_coordinators_are_group_coordinators(protocol: str) -> None:
    from emulator.broker.coordinators import make_coordinator_factory

    coord = make_coordinator_factory(protocol, {}, 0, 1, {T: 2})("g", {TP: 3})
    assert coord.committed_offsets() == {TP: 3}
    coord.update_topics(0.0, {T: 3})  # the classic one's is the protocol's no-op default
