"""The share-partition state machine (KIP-932) on explicit times: acquisition, locks,
delivery counts, archiving, acknowledgement types, session close, leader change.

Each test names the ``SharePartition`` method (core/.../server/share/SharePartition.java)
or ``InFlightState`` rule it follows (facts: notes/share-facts.md).
"""

from __future__ import annotations

import pytest

from emulator.broker.share_partition import (
    AckBatch,
    AckType,
    Acquired,
    RecordState,
    SharePartition,
    SharePartitionConfig,
)
from emulator.modern.errors import Errors

A, B = "m-a", "m-b"
LOCK = 30_000.0
CFG = SharePartitionConfig(lock_duration_ms=LOCK, delivery_count_limit=5, max_record_locks=100)


def sp(cfg: SharePartitionConfig = CFG, start: int = 0) -> SharePartition:
    return SharePartition(cfg, start)


def ack(p: SharePartition, member: str, first: int, last: int, t: AckType, at: float = 0.0):
    return p.acknowledge(member, [AckBatch(first, last, t)], at)


class TestAcquire:
    def test_new_records_are_acquired_with_a_lock_from_that_instant(self) -> None:
        p = sp()
        got, ts = p.acquire(A, 1_000.0, log_end_offset=10, max_records=4)
        assert got == [Acquired(0, 3, 1)]
        assert [p.state_of(o) for o in range(5)] == [RecordState.ACQUIRED] * 4 + [None]
        assert p.owner(2) == A and p.next_deadline() == 1_000.0 + LOCK
        assert (p.spso, p.speo) == (0, 3)
        assert all(t.redelivery_of is None for t in ts)

    def test_a_second_member_gets_the_next_records_not_the_held_ones(self) -> None:
        p = sp()
        p.acquire(A, 0.0, 10, 4)
        got, _ = p.acquire(B, 0.0, 10, 4)
        assert got == [Acquired(4, 7, 1)]

    def test_nothing_past_the_high_watermark(self) -> None:
        p = sp(start=5)
        assert p.acquire(A, 0.0, 5, 10) == ([], [])
        assert p.acquire(A, 0.0, 7, 10)[0] == [Acquired(5, 6, 1)]

    def test_the_in_flight_span_caps_new_records_even_acknowledged_ones_behind_a_stuck_one(
        self,
    ) -> None:
        """``lastOffsetAndMaxRecordsToAcquire``: the span SPSO..SPEO counts every offset."""
        p = sp(SharePartitionConfig(max_record_locks=100))
        p.acquire(A, 0.0, 1_000, 1)  # offset 0: A holds it
        p.acquire(B, 0.0, 1_000, 99)
        assert ack(p, B, 1, 99, AckType.ACCEPT)[0] is None
        assert p.spso == 0  # stuck behind offset 0
        assert p.acquire(B, 0.0, 1_000, 50) == ([], [])
        assert ack(p, A, 0, 0, AckType.ACCEPT)[0] is None
        assert p.spso == 100 and p.in_flight() == 0
        assert p.acquire(B, 0.0, 1_000, 50)[0] == [Acquired(100, 149, 1)]


class TestLocks:
    def test_an_expired_lock_makes_the_record_available_again(self) -> None:
        p = sp()
        p.acquire(A, 0.0, 10, 2)
        assert p.expire(LOCK - 1) == []
        ts = p.expire(LOCK)
        assert [(t.offset, t.new, t.cause) for t in ts] == [
            (0, RecordState.AVAILABLE, "lock_expiry"),
            (1, RecordState.AVAILABLE, "lock_expiry"),
        ]
        assert p.next_deadline() is None and p.owner(0) is None
        # Redelivered first, to whoever fetches next, with the cause of the redelivery.
        got, ts = p.acquire(B, LOCK + 5, 10, 5)
        assert got == [Acquired(0, 1, 2), Acquired(2, 4, 1)]
        assert [t.redelivery_of for t in ts[:2]] == ["lock_expiry", "lock_expiry"]

    def test_a_late_acknowledgement_after_expiry_changes_nothing(self) -> None:
        p = sp()
        p.acquire(A, 0.0, 10, 1)
        p.expire(LOCK)
        p.acquire(B, LOCK, 10, 1)
        err, ts = ack(p, A, 0, 0, AckType.ACCEPT, LOCK + 1)
        assert err is Errors.INVALID_RECORD_STATE and ts == []
        assert p.owner(0) == B and p.delivery_count(0) == 2

    def test_renew_restarts_the_lock_from_4_2(self) -> None:
        p = sp()
        p.acquire(A, 0.0, 10, 1)
        assert ack(p, A, 0, 0, AckType.RENEW, 20_000.0)[0] is None
        assert p.expire(LOCK) == [] and p.next_deadline() == 20_000.0 + LOCK
        old = SharePartitionConfig.for_version("4.1")
        q = SharePartition(old, 0)
        q.acquire(A, 0.0, 10, 1)
        assert ack(q, A, 0, 0, AckType.RENEW)[0] is Errors.INVALID_REQUEST


class TestDeliveryLimit:
    def test_the_fifth_failed_delivery_archives_the_record(self) -> None:
        """``InFlightState.tryUpdateState``: back to AVAILABLE at count >= limit is ARCHIVED."""
        p = sp()
        t = 0.0
        for n in range(1, 6):
            got, _ = p.acquire(A, t, 1, 10)
            assert got == [Acquired(0, 0, n)]
            t += LOCK
            ts = p.expire(t)
        assert ts[0].new is RecordState.ARCHIVED and ts[0].archived_by == "delivery_limit"
        assert p.acquire(B, t, 1, 10) == ([], [])
        assert p.spso == 1  # archived is final: the start offset passes it

    def test_a_release_counts_as_a_failed_delivery(self) -> None:
        p = sp(SharePartitionConfig(delivery_count_limit=2))
        p.acquire(A, 0.0, 1, 1)
        assert ack(p, A, 0, 0, AckType.RELEASE)[1][0].new is RecordState.AVAILABLE
        p.acquire(A, 0.0, 1, 1)
        assert ack(p, A, 0, 0, AckType.RELEASE)[1][0].new is RecordState.ARCHIVED

    def test_a_record_on_its_last_attempt_is_delivered_alone(self) -> None:
        p = sp(SharePartitionConfig(delivery_count_limit=3))
        p.acquire(A, 0.0, 5, 1)
        for _ in range(2):
            p.expire(p.next_deadline() or 0.0)
            if p.delivery_count(0) < 2:
                p.acquire(A, 0.0, 5, 1)
        assert p.delivery_count(0) == 2 and p.state_of(0) is RecordState.AVAILABLE
        got, _ = p.acquire(B, 0.0, 5, 5)
        assert got == [Acquired(0, 0, 3)]  # alone
        assert p.acquire(B, 0.0, 5, 5)[0] == [Acquired(1, 4, 1)]

    def test_a_fetch_stops_before_a_record_on_its_last_attempt(self) -> None:
        p = sp(SharePartitionConfig(delivery_count_limit=3))
        p.acquire(A, 0.0, 2, 2)  # 0 and 1, count 1
        ack(p, A, 1, 1, AckType.RELEASE)
        p.acquire(A, 0.0, 2, 2)  # 1 again, count 2
        ack(p, A, 0, 1, AckType.RELEASE)
        assert (p.delivery_count(0), p.delivery_count(1)) == (1, 2)
        assert p.acquire(B, 0.0, 2, 5)[0] == [Acquired(0, 0, 2)]
        assert p.acquire(B, 0.0, 2, 5)[0] == [Acquired(1, 1, 3)]


class TestAcknowledge:
    def test_accept_reject_gap_and_the_start_offset(self) -> None:
        p = sp()
        p.acquire(A, 0.0, 10, 6)
        err, ts = p.acknowledge(
            A,
            [
                AckBatch(0, 1, AckType.ACCEPT),
                AckBatch(2, 2, AckType.REJECT),
                AckBatch(3, 3, AckType.GAP),
                AckBatch(5, 5, AckType.ACCEPT),
            ],
            0.0,
        )
        assert err is None
        assert [(t.offset, t.new) for t in ts] == [
            (0, RecordState.ACKNOWLEDGED),
            (1, RecordState.ACKNOWLEDGED),
            (2, RecordState.ARCHIVED),
            (3, RecordState.ARCHIVED),
            (5, RecordState.ACKNOWLEDGED),
        ]
        assert p.spso == 4 and p.state_of(4) is RecordState.ACQUIRED
        # Below SPSO: skipped, not an error.
        assert ack(p, A, 0, 0, AckType.ACCEPT)[0] is None

    def test_one_bad_offset_fails_the_whole_call(self) -> None:
        """``rollbackOrProcessStateUpdates``: nothing of the call is applied."""
        p = sp()
        p.acquire(A, 0.0, 10, 2)
        p.acquire(B, 0.0, 10, 2)
        err, ts = p.acknowledge(
            A, [AckBatch(0, 1, AckType.ACCEPT), AckBatch(2, 2, AckType.ACCEPT)], 0.0
        )
        assert err is Errors.INVALID_RECORD_STATE and ts == []
        assert p.state_of(0) is RecordState.ACQUIRED and p.spso == 0

    def test_past_the_end_offset_is_an_invalid_request(self) -> None:
        p = sp()
        p.acquire(A, 0.0, 10, 2)
        assert ack(p, A, 0, 5, AckType.ACCEPT)[0] is Errors.INVALID_REQUEST


class TestSessionClose:
    def test_from_4_1_a_close_lowers_the_count_and_never_archives(self) -> None:
        cfg = SharePartitionConfig.for_version("4.1", {"group.share.delivery.count.limit": 2})
        p = SharePartition(cfg, 0)
        p.acquire(A, 0.0, 3, 3)
        p.expire(LOCK)
        p.acquire(A, LOCK, 3, 3)  # count 2 = the limit
        ts = p.release_member(A, LOCK + 1)
        assert [(t.new, t.delivery_count, t.cause) for t in ts] == [
            (RecordState.AVAILABLE, 1, "session_close")
        ] * 3

    def test_a_record_back_at_count_zero_is_still_a_redelivery(self) -> None:
        """The lowered count says nothing of the first delivery: ``redelivery_of`` does."""
        p = sp()
        p.acquire(A, 0.0, 2, 2)
        p.release_member(A, 1.0)  # counts 1 -> 0
        got, ts = p.acquire(B, 2.0, 2, 2)
        assert got == [Acquired(0, 1, 1)]
        assert [t.redelivery_of for t in ts] == ["session_close"] * 2
        fresh = sp()
        _, first = fresh.acquire(A, 0.0, 1, 1)
        assert first[0].redelivery_of is None

    def test_in_4_0_a_close_keeps_the_count_and_archives_at_the_limit(self) -> None:
        cfg = SharePartitionConfig.for_version("4.0", {"group.share.delivery.count.limit": 2})
        assert cfg.max_record_locks == 200 and not cfg.renew
        p = SharePartition(cfg, 0)
        p.acquire(A, 0.0, 1, 1)
        p.expire(LOCK)
        p.acquire(A, LOCK, 1, 1)
        (t,) = p.release_member(A, LOCK + 1)
        assert t.new is RecordState.ARCHIVED and t.archived_by == "delivery_limit"

    def test_only_the_closing_members_records_go_back(self) -> None:
        p = sp()
        p.acquire(A, 0.0, 10, 2)
        p.acquire(B, 0.0, 10, 2)
        assert [t.offset for t in p.release_member(A, 1.0)] == [0, 1]
        assert p.owner(2) == B and p.owner(0) is None


class TestLeaderChange:
    def test_the_new_leader_starts_from_what_was_written(self) -> None:
        """``maybeInitialize``: acquisition is never written; written records keep their
        state and count; offsets never written are fetched as new."""
        p = sp()
        p.acquire(A, 0.0, 10, 6)
        ack(p, A, 0, 1, AckType.ACCEPT)  # written: SPSO 2
        ack(p, A, 2, 2, AckType.RELEASE)  # written: AVAILABLE, count 1
        p.expire(LOCK)  # 3..5 back, written with count 1
        p.acquire(B, LOCK, 10, 2)  # 2 and 3 acquired again (count 2): not written
        state = p.persisted()
        assert state.start_offset == 2
        assert state.records[2] == (RecordState.AVAILABLE, 1)
        q = SharePartition.from_persisted(CFG, state)
        assert (q.spso, q.owner(2), q.owner(3)) == (2, None, None)
        got, ts = q.acquire(A, LOCK + 1, 10, 10)
        # The lost attempt is not counted: 2..5 come back at count 2, 6.. are new.
        assert got == [Acquired(2, 5, 2), Acquired(6, 9, 1)]
        assert {t.redelivery_of for t in ts[:4]} == {"failover"}

    def test_versions_before_share_groups_are_refused(self) -> None:
        with pytest.raises(ValueError, match=r"4\.0 or later"):
            SharePartitionConfig.for_version("3.9")
        with pytest.raises(ValueError, match=r"delivery\.count\.limit"):
            SharePartitionConfig.for_version("4.2", {"group.share.delivery.count.limit": 11})
