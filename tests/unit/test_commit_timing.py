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
