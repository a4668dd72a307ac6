"""ShareFetch on one broker (KIP-932) on explicit times: share sessions and their
epochs, acknowledgements carried by fetches, the long poll, and a session's close
(``SharePartitionManager``, ``ShareSessionCache``, ``DelayedShareFetch``)."""

from __future__ import annotations

from emulator.broker.share_fetch import (
    CLOSE_EPOCH,
    OPEN_EPOCH,
    ShareFetchBroker,
    ShareFetchRequest,
    ShareFetchResponse,
)
from emulator.broker.share_partition import (
    AckBatch,
    AckType,
    Acquired,
    PersistedState,
    RecordState,
    SharePartitionConfig,
)
from emulator.modern.errors import Errors

G, TP = "g", ("t", 0)
LOCK = 30_000.0


class Log:
    def __init__(self, hw: int = 10, start: int = 0) -> None:
        self.hw = hw
        self.start = start


def broker(log: Log, reset: str = "earliest") -> ShareFetchBroker:
    return ShareFetchBroker(
        SharePartitionConfig(lock_duration_ms=LOCK), lambda tp: log.hw, lambda tp: log.start, reset
    )


def req(
    member: str,
    epoch: int,
    corr: int = 1,
    wait: float = 500.0,
    n: int = 3,
    acks: dict[tuple[str, int], tuple[AckBatch, ...]] | None = None,
) -> ShareFetchRequest:
    return ShareFetchRequest(
        corr, G, member, epoch, (TP,), acks=acks or {}, max_records=n, max_wait_ms=wait
    )


def acquired(resp: ShareFetchResponse | None) -> tuple[Acquired, ...]:
    assert resp is not None and resp.error is Errors.NONE
    return resp.partitions[0].acquired


class TestSessions:
    def test_epochs_open_advance_and_are_checked(self) -> None:
        b = broker(Log())
        assert acquired(b.fetch(0.0, req("a", OPEN_EPOCH))) == (Acquired(0, 2, 1),)
        assert acquired(b.fetch(1.0, req("a", 1))) == (Acquired(3, 5, 1),)
        wrong = b.fetch(2.0, req("a", 1))
        assert wrong is not None and wrong.error is Errors.INVALID_SHARE_SESSION_EPOCH
        none = b.fetch(2.0, req("b", 4))
        assert none is not None and none.error is Errors.SHARE_SESSION_NOT_FOUND

    def test_acknowledgements_on_an_opening_fetch_are_refused(self) -> None:
        b = broker(Log())
        r = b.fetch(0.0, req("a", OPEN_EPOCH, acks={TP: (AckBatch(0, 0, AckType.ACCEPT),)}))
        assert r is not None and r.error is Errors.INVALID_REQUEST

    def test_the_start_offset_follows_share_auto_offset_reset(self) -> None:
        log = Log(hw=10, start=2)
        assert acquired(broker(log, "earliest").fetch(0.0, req("a", 0))) == (Acquired(2, 4, 1),)
        late = broker(log, "latest")
        assert (
            acquired(late.fetch(0.0, req("a", 0, wait=0.0))) == ()
        )  # the records before it: skipped
        log.hw = 12
        assert acquired(late.fetch(1.0, req("a", 1))) == (Acquired(10, 11, 1),)


class TestAcknowledgeAndPoll:
    def test_a_fetch_carries_the_previous_batchs_acknowledgements(self) -> None:
        b = broker(Log())
        b.fetch(0.0, req("a", 0))
        r = b.fetch(1.0, req("a", 1, acks={TP: (AckBatch(0, 2, AckType.ACCEPT),)}))
        assert r is not None and r.partitions[0].ack_error is None
        assert b.partitions[(G, TP)].spso == 3
        assert acquired(r) == (Acquired(3, 5, 1),)

    def test_a_fetch_with_nothing_to_acquire_waits_for_records(self) -> None:
        log = Log(hw=3)
        b = broker(log)
        b.fetch(0.0, req("a", 0))
        assert b.fetch(1.0, req("a", 1, corr=7)) is None
        assert b.next_deadline() == 501.0
        assert b.poll(100.0) == []
        log.hw = 5
        (r,) = b.poll(200.0)
        assert r.corr == 7 and acquired(r) == (Acquired(3, 4, 1),)

    def test_a_waiting_fetch_is_answered_empty_when_its_wait_runs_out(self) -> None:
        b = broker(Log(hw=0))
        assert b.fetch(0.0, req("a", 0)) is None
        (r,) = b.poll(500.0)
        assert acquired(r) == ()

    def test_a_lock_expiry_wakes_a_waiting_fetch_of_another_member(self) -> None:
        b = broker(Log(hw=3))
        b.fetch(0.0, req("a", 0))
        assert b.fetch(1.0, req("b", 0, wait=LOCK * 2)) is None
        (r,) = b.poll(LOCK)
        assert r.member == "b" and acquired(r) == (Acquired(0, 2, 2),)
        causes = {t.cause for _g, _tp, t in b.drain_transitions()}
        assert {"acquire", "lock_expiry"} <= causes


class TestClose:
    def test_closing_releases_the_members_records_for_the_others(self) -> None:
        b = broker(Log(hw=3))
        b.fetch(0.0, req("a", 0))
        r = b.fetch(1.0, ShareFetchRequest(2, G, "a", CLOSE_EPOCH))
        assert r is not None and r.error is Errors.NONE
        sp = b.partitions[(G, TP)]
        assert [sp.state_of(o) for o in range(3)] == [RecordState.AVAILABLE] * 3
        # 4.1+: the close lowered the counts: the next delivery is a first one again.
        assert acquired(b.fetch(2.0, req("b", 0))) == (Acquired(0, 2, 1),)
        again = b.fetch(3.0, req("a", 1))
        assert again is not None and again.error is Errors.SHARE_SESSION_NOT_FOUND

    def test_a_new_leader_serves_from_the_persisted_state(self) -> None:
        log = Log(hw=6)
        old = broker(log)
        old.fetch(0.0, req("a", 0, n=6))
        old.fetch(1.0, req("a", 1, n=0, acks={TP: (AckBatch(0, 1, AckType.ACCEPT),)}))
        state = old.persisted()[(G, TP)]
        assert state == PersistedState(2, {})
        new = broker(log)
        new.load(G, TP, state)
        # 2..5 were acquired, never written: new records again for the new leader.
        assert acquired(new.fetch(2.0, req("b", 0, n=10))) == (Acquired(2, 5, 1),)
