"""When each client commits, relative to what the application was handed: worked examples.

Kafka's clients move a partition's position when records are handed to the
application, before it processes them (0.8 ``ConsumerIterator.next()``, the
Java ``FetchCollector``), and commit positions. Where the commit sits relative
to processing decides duplicates, loss and per-partition order. These are the
examples of the README's fidelity section, each on a fake clock:

* KIP-848 before 4.0: the reconciliation commits the batch in hand and
  revokes without waiting for the application (no duplicate, an ordering
  overlap); the background auto-commit commits handed-out records (a crash
  then loses them).
* KIP-848 from 4.0 (KAFKA-18641): auto-commit and, with it on, the start of a
  reconciliation wait for the application's ``poll()``.
* KIP-848 with a rebalance listener: the revocation waits for ``poll()``.
* Classic: every commit runs inside ``poll()``, after the batch in hand.
* Manual ``commitSync``: the application waits for the answer.
* 0.8: a per-message iterator position, the message in hand included.
"""

from __future__ import annotations

from typing import Any

from emulator.modern.consumer_member import ConsumerGroupHeartbeatRequest
from tests.unit.test_consumer_member import (
    F0,
    F1,
    Driver,
    K,
    OffsetCommitRequest,
    OffsetCommitResponse,
    StopFetching,
    emits,
    kinds,
    of,
)


def batch_in_hand(d: Driver, tp: tuple[str, int], end: int) -> None:
    """poll() returned records of ``tp`` up to ``end``; the application processes them."""
    d.app_poll()
    d.m.consumed(tp, end)
    d.m.app_processing(d.now)


# ----------------------------------------------------------------- KIP-848, 3.9


def test_kip848_39_revocation_commits_the_batch_in_hand_and_does_not_wait() -> None:
    d = Driver()
    d.stable_with((F0, F1), {F0: 0, F1: 0})
    batch_in_hand(d, F1, 500)  # 500 records of F1 handed out, not processed yet
    hb = of(d.advance(5_000), ConsumerGroupHeartbeatRequest)[0]
    out = d.hb_response(hb, epoch=2, assignment=(F0,))
    (commit,) = of(out, OffsetCommitRequest)
    # allConsumed(): the position past the batch in hand.
    assert dict(commit.offsets) == {F1: 500}
    out = d.respond(OffsetCommitResponse(commit.corr))
    # Revoked while the application still processes F1's batch: the new owner
    # starts at 500 (no duplicate) while 0..499 are still being processed.
    assert "partitions_revoked" in kinds(out)
    assert F1 not in d.m.owned


def test_kip848_39_background_auto_commit_commits_unprocessed_records() -> None:
    d = Driver()
    d.stable_with((F0,), {F0: 0})
    batch_in_hand(d, F0, 300)
    out = d.advance(5_000)  # auto.commit.interval.ms while the batch is in hand
    (commit,) = of(out, OffsetCommitRequest)
    assert dict(commit.offsets) == {F0: 300}  # a crash now loses 0..299


# ------------------------------------------------------------- KIP-848, 4.0+


def test_kip848_40_auto_commit_waits_for_poll() -> None:
    d = Driver(commit_on_poll=True)
    d.stable_with((F0,), {F0: 0})
    batch_in_hand(d, F0, 300)
    assert of(d.advance(6_000), OffsetCommitRequest) == []  # busy: nothing committed
    out = d.app_poll()  # the batch is done: the PollEvent commits it
    (commit,) = of(out, OffsetCommitRequest)
    assert dict(commit.offsets) == {F0: 300}


def test_kip848_40_reconciliation_waits_for_poll_with_auto_commit() -> None:
    d = Driver(commit_on_poll=True)
    d.stable_with((F0, F1), {F0: 0, F1: 0})
    batch_in_hand(d, F1, 500)
    hb = of(d.advance(5_000), ConsumerGroupHeartbeatRequest)[0]
    out = d.hb_response(hb, epoch=2, assignment=(F0,))
    assert "rebalance_started" not in kinds(out)  # waits for the application's poll()
    out = d.app_poll()
    assert "rebalance_started" in kinds(out)
    (commit,) = of(out, OffsetCommitRequest)
    assert dict(commit.offsets)[F1] == 500


def test_kip848_40_without_auto_commit_revokes_at_once() -> None:
    d = Driver(commit_on_poll=True, enable_auto_commit=False)
    d.stable_with((F0, F1), {F0: 0, F1: 0})
    batch_in_hand(d, F1, 500)
    hb = of(d.advance(5_000), ConsumerGroupHeartbeatRequest)[0]
    out = d.hb_response(hb, epoch=2, assignment=(F0,))
    # Nothing is committed; F1 goes while its batch is in hand: the new owner
    # starts from the last commit and processes 0..499 again (duplicates).
    assert of(out, OffsetCommitRequest) == []
    assert "partitions_revoked" in kinds(out)


# ------------------------------------------------------ KIP-848 with listener


def test_kip848_listener_revocation_waits_for_poll_then_commits() -> None:
    d = Driver(enable_auto_commit=False)
    d.m.rebalance_listener = "commit-on-revoke"
    d.stable_with((F0, F1), {F0: 0, F1: 0})
    batch_in_hand(d, F1, 500)
    hb = of(d.advance(5_000), ConsumerGroupHeartbeatRequest)[0]
    out = d.hb_response(hb, epoch=2, assignment=(F0,))
    assert "partitions_revoked" not in kinds(out)
    assert of(out, StopFetching)[0].partitions == (F1,)  # fetching paused at once
    out = d.app_poll()  # the batch is processed: onPartitionsRevoked runs in poll()
    (commit,) = of(out, OffsetCommitRequest)
    assert dict(commit.offsets) == {F1: 500}
    out = d.respond(OffsetCommitResponse(commit.corr))
    assert emits(out, K.OFFSETS_COMMITTED)[0].fields["reason"] == "revoke_callback"
    assert "partitions_revoked" in kinds(out)


# ------------------------------------------------------------ manual commits


def test_kip848_manual_commit_sync_blocks_until_answered() -> None:
    d = Driver(enable_auto_commit=False)
    d.stable_with((F0,), {F0: 0})
    batch_in_hand(d, F0, 200)
    out = d.m.app_commit(d.now, sync=True)
    (commit,) = of(out, OffsetCommitRequest)
    assert dict(commit.offsets) == {F0: 200} and d.m.app_committing
    d.respond(OffsetCommitResponse(commit.corr))
    assert not d.m.app_committing


# ------------------------------------------------------------------ classic


def _classic(**props: object) -> object:
    from tests.unit.test_classic_member import Harness

    return Harness(**props)


def test_classic_eager_rebalance_with_a_batch_in_hand_commits_after_it() -> None:
    from emulator.modern.errors import Errors
    from emulator.modern.messages import HeartbeatRequest, HeartbeatResponse, JoinGroupRequest
    from tests.unit.test_classic_member import T0, T1

    h = _classic()
    h.joined()  # T0, T1 at generation 1
    h.take(h.member.app_polled(h.now))
    h.member.consumed(T0, 500)  # poll() returned 500 records of T0
    h.take(h.member.app_processing(h.now))
    h.advance(3_000)  # a heartbeat: the group is rebalancing
    h.answer(HeartbeatRequest, HeartbeatResponse, error=Errors.REBALANCE_IN_PROGRESS)
    # The application is busy: onJoinPrepare waits for poll(), so nothing is
    # committed and no JoinGroup goes out before the batch is done.
    assert not h.has(OffsetCommitRequest) and not h.has(JoinGroupRequest)
    h.take(h.member.app_polled(h.now))  # the batch is processed
    commit = h.req(OffsetCommitRequest)
    assert dict(commit.offsets) == {T0: 500}  # exactly what was processed
    h.answer(OffsetCommitRequest, OffsetCommitResponse)
    assert h.last(K.PARTITIONS_REVOKED).fields["partitions"] == "t:0,t:1"
    assert h.has(JoinGroupRequest)
    del T1


def test_classic_cooperative_listener_commits_at_the_later_revocation() -> None:
    from emulator.modern.errors import Errors
    from emulator.modern.messages import (
        Assignment,
        HeartbeatRequest,
        HeartbeatResponse,
        JoinGroupRequest,
        JoinGroupResponse,
        SyncGroupRequest,
        SyncGroupResponse,
    )
    from tests.unit.test_classic_member import T0, T1

    for listener, commits in (("none", []), ("commit-on-revoke", [{T1: 80}])):
        h = _classic(**{"partition.assignment.strategy": "cooperative-sticky"})
        h.member.rebalance_listener = listener
        h.joined()
        h.take(h.member.app_polled(h.now))
        h.member.consumed(T1, 40)
        h.take(h.member.app_processing(h.now))
        h.advance(3_000)
        h.answer(HeartbeatRequest, HeartbeatResponse, error=Errors.REBALANCE_IN_PROGRESS)
        h.take(h.member.app_polled(h.now))  # onJoinPrepare commits 40, keeps T0 and T1
        h.answer(OffsetCommitRequest, OffsetCommitResponse)
        h.answer(JoinGroupRequest, JoinGroupResponse, generation_id=2, protocol_type="consumer",
                 protocol_name="cooperative-sticky", leader="other", member_id="me-1")
        # Cooperative: fetching goes on during the rebalance; 40 more records.
        h.member.consumed(T1, 80)
        h.answer(SyncGroupRequest, SyncGroupResponse, protocol_type="consumer",
                 protocol_name="cooperative-sticky", assignment=Assignment((T0,)))
        h.take(h.member.app_polled(h.now))  # onJoinComplete revokes T1
        assert h.last(K.PARTITIONS_REVOKED).fields["partitions"] == "t:1"
        got = [dict(r.offsets) for r in h.pending if isinstance(r, OffsetCommitRequest)]
        # Without a listener 40..79 are not committed: the next owner repeats them.
        assert got == commits, listener


# ---------------------------------------------------------------------- 0.8


def _legacy_shell(
    now: list[float], first: int
) -> tuple[Any, list[tuple[str, dict[str, object]]]]:
    """A real legacy member shell around a real machine that owns t:0 (no ZooKeeper),
    its application in the middle of the batch ``[first, first + 10)`` (2 ms a message,
    started at 0)."""
    from actors.legacy_member import LegacyMember
    from emulator.legacy.config import LegacyConsumerConfig
    from emulator.legacy.consumer import LegacyConsumer

    emitted: list[tuple[str, dict[str, object]]] = []
    machine = LegacyConsumer(
        member="c-0",
        consumer_id="g_h-1-9a86b603",
        group="g",
        subscription={"t": 1},
        config=LegacyConsumerConfig(),
    )
    machine.owned = {("t", 0): "g_h-1-9a86b603-0"}
    shell = LegacyMember(
        "c-0", machine, None, None, lambda k, **f: emitted.append((str(k), f)), lambda: now[0]
    )
    shell.start_fetchers({("t", 0): ("s-0", first)})
    shell.fetched(("t", 0), first, first + 10, shell.fetch_epoch)
    shell.process(0.0, 2.0)
    return shell, emitted


def test_legacy_iterator_position_includes_the_message_in_hand() -> None:
    now = [0.0]
    m, _ = _legacy_shell(now, 100)
    tp = ("t", 0)
    now[0] = 5.0  # messages 100, 101 done; 102 in hand
    assert m.handed_out(5.0) == [(tp, 103)]
    m.sync_positions()
    assert m.machine.consumed_offsets == {tp: 103}
    # closeFetchers: the message in hand is the last the application gets.
    m.stop_fetchers()
    now[0] = 100.0
    m.process(100.0, 2.0)
    assert m.machine.consumed_offsets == {tp: 103}


def test_a_crash_records_what_was_processed_and_what_was_handed_out() -> None:
    for per_message, handed in ((True, 3), (False, 10)):
        # 0.8's iterator had handed out the message in progress; a modern
        # consumer's poll() had handed out the whole batch.
        m, emitted = _legacy_shell([0.0], 0)
        m.abandon(5.0, per_message=per_message)
        got = [(k, f["offset_start"], f["offset_end"]) for k, f in emitted]
        assert got == [("processed", 0, 2), ("records_abandoned", 2, handed)]


def test_legacy_consumer_reclaiming_its_own_partition_resumes_after_the_message_in_hand() -> None:
    """c0 keeps t:0 across c1's join: the rebalance commits the iterator position
    (the message in hand included) and c0 fetches again from exactly there."""
    from emulator.events import EventKind
    from tests.unit.fakezk import World

    w = World(topics={"t": 2})
    w.join("c0")
    w.settle()
    w.consume("c0", ("t", 0), 103)  # ConsumerIterator.next() handed out up to 102
    w.join("c1")
    w.settle()
    commits = [
        (e.fields["partition"], e.fields["offset_end"], e.fields["reason"])
        for e in w.events("c0", EventKind.OFFSETS_COMMITTED)
    ]
    assert commits == [(0, 103, "rebalance")]
    assert w.zk.offsets()[("t", 0)] == 103
    assert ("t", 0) in w.members["c0"].consumer.owned  # range: c0 keeps t:0
    assert w.members["c0"].fetching[("t", 0)][1] == 103  # no message is repeated


def test_kip848_crash_after_hand_out_manual_sync_loses_nothing() -> None:
    """Under manual commitSync a crash loses nothing: the last commit is the last
    processed batch, so the batch in hand (handed out, not processed) is fetched
    again by the next owner (duplicates of whatever of it had been processed)."""
    d = Driver(enable_auto_commit=False)
    d.stable_with((F0,), {F0: 0})
    batch_in_hand(d, F0, 200)  # processed, then the application commits
    (commit,) = of(d.m.app_commit(d.now, sync=True), OffsetCommitRequest)
    d.respond(OffsetCommitResponse(commit.corr))
    assert d.m.committed[F0] == 200
    batch_in_hand(d, F0, 400)  # the next batch is in hand when the process dies
    assert of(d.advance(60_000), OffsetCommitRequest) == []  # nothing commits it
    assert d.m.committed[F0] == 200  # the next owner starts at 200: nothing lost
