"""The share consumer's membership (``emulator.modern.share_member``) on explicit times.

Each test names the Kafka client behaviour it holds the machine to
(``notes/share-client-facts.md`` §1: ``ShareMembershipManager``,
``ShareHeartbeatRequestManager``, ``AbstractHeartbeatRequestManager`` at the
4.0, 4.1 and 4.2 release commits).
"""

from __future__ import annotations

import random

import pytest

from emulator.events import EventKind
from emulator.modern.consumer_member import MemberState
from emulator.modern.errors import Errors
from emulator.modern.messages import (
    Emit,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MemberOutput,
    ShareAssignment,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from emulator.modern.share_member import ShareConsumerConfig, ShareMember

TP0, TP1 = ("t", 0), ("t", 1)


def member(**config: int) -> ShareMember:
    return ShareMember(
        member="c-0",
        group="g",
        topics=["t"],
        config=ShareConsumerConfig(**config),  # type: ignore[arg-type]
        rng=random.Random(7),
    )


def only(out: list[MemberOutput], kind: type) -> list:  # type: ignore[type-arg]
    return [o for o in out if isinstance(o, kind)]


def heartbeat(out: list[MemberOutput]) -> ShareGroupHeartbeatRequest:
    (hb,) = only(out, ShareGroupHeartbeatRequest)
    return hb


def joined(m: ShareMember, now: float = 0.0) -> ShareGroupHeartbeatRequest:
    """Start, find the coordinator (broker 1): the first heartbeat."""
    out = m.start(now)
    (find,) = only(out, FindCoordinatorRequest)
    return heartbeat(m.on_response(now, FindCoordinatorResponse(find.corr, node_id=1)))


def answer(
    m: ShareMember,
    now: float,
    hb: ShareGroupHeartbeatRequest,
    *,
    epoch: int = 1,
    interval: int = 5000,
    assignment: tuple[tuple[str, int], ...] | None = None,
    error: Errors = Errors.NONE,
) -> list[MemberOutput]:
    return m.on_response(
        now,
        ShareGroupHeartbeatResponse(
            hb.corr,
            error,
            member_id=m.member_id,
            member_epoch=epoch,
            heartbeat_interval_ms=interval,
            assignment=assignment,
        ),
    )


def test_the_member_id_is_its_own_uuid_and_the_first_heartbeat_goes_at_once() -> None:
    m = member()
    hb = joined(m)
    # Uuid.randomUuid().toString(): 22 characters of URL-safe base64, kept for life
    assert len(m.member_id) == 22 and hb.member_id == m.member_id
    assert hb.member_epoch == 0 and hb.subscribed_topic_names == ("t",)
    assert m.state is MemberState.JOINING
    assert member().member_id == m.member_id  # the same seed, the same id
    other = ShareMember(
        member="c-1", group="g", topics=["t"], config=ShareConsumerConfig(), rng=random.Random(8)
    )
    assert other.member_id != m.member_id


def test_an_assignment_is_taken_at_once_and_acknowledged_by_an_immediate_heartbeat() -> None:
    m = member()
    hb = joined(m)
    out = answer(m, 10.0, hb, assignment=(TP0, TP1))
    assert only(out, ShareAssignment) == [ShareAssignment((TP0, TP1))]
    assigned = [e for e in only(out, Emit) if e.kind is EventKind.PARTITIONS_ASSIGNED]
    assert assigned and assigned[0].fields["partitions"] == "t:0,t:1"
    ack = heartbeat(out)  # ACKNOWLEDGING sends at once, the same epoch, no topics
    assert ack.member_epoch == 1 and ack.subscribed_topic_names is None
    assert m.state is MemberState.STABLE
    # Then the interval from the answer, timed from the send.
    answer(m, 20.0, ack, epoch=1)
    assert m.next_deadline() == pytest.approx(10.0 + 5000)
    assert m.poll(10.0 + 4999) == []
    later = m.poll(5010.0)
    assert heartbeat(later).member_epoch == 1


def test_one_heartbeat_in_flight_and_the_same_partitions_make_the_member_stable() -> None:
    m = member()
    hb = joined(m)
    assert m.poll(100_000.0) == []  # the join is in flight: nothing more
    out = answer(m, 5.0, hb, assignment=())
    assert only(out, ShareAssignment) == [] and m.state is MemberState.STABLE


def test_fencing_clears_the_assignment_and_rejoins_at_once_with_epoch_0() -> None:
    m = member()
    hb = joined(m)
    ack = heartbeat(answer(m, 1.0, hb, assignment=(TP0,)))
    answer(m, 2.0, ack)
    nxt = heartbeat(m.poll(5001.0))
    out = answer(m, 5002.0, nxt, error=Errors.FENCED_MEMBER_EPOCH)
    assert only(out, ShareAssignment) == [ShareAssignment(())]
    lost = [e for e in only(out, Emit) if e.kind is EventKind.PARTITIONS_LOST]
    assert lost and lost[0].fields["reason"] == "fenced"
    rejoin = heartbeat(out)
    assert rejoin.member_epoch == 0 and rejoin.subscribed_topic_names == ("t",)
    assert rejoin.member_id == m.member_id


def test_coordinator_errors_rediscover_it_without_backoff() -> None:
    m = member()
    hb = joined(m)
    out = answer(m, 1.0, hb, error=Errors.NOT_COORDINATOR)
    assert m.coordinator is None and only(out, ShareGroupHeartbeatRequest) == []
    # the lookup waits one retry.backoff.ms after the last one (RequestState), no more
    due = m.next_deadline()
    assert due is not None and due <= 120.0
    (find,) = only(m.poll(due), FindCoordinatorRequest)
    again = m.on_response(due, FindCoordinatorResponse(find.corr, node_id=2))
    assert heartbeat(again).member_epoch == 0  # still joining: a full heartbeat at once


def test_load_in_progress_backs_off_but_a_joining_member_sends_at_once() -> None:
    m = member()
    hb = joined(m)
    # shouldHeartbeatNow: JOINING skips the backoff (the code as read)
    again = heartbeat(answer(m, 1.0, hb, error=Errors.COORDINATOR_LOAD_IN_PROGRESS))
    ack = heartbeat(answer(m, 2.0, again, assignment=(TP0,)))
    answer(m, 3.0, ack)
    nxt = heartbeat(m.poll(5002.0))
    out = answer(m, 5003.0, nxt, error=Errors.COORDINATOR_LOAD_IN_PROGRESS)
    assert only(out, ShareGroupHeartbeatRequest) == []
    due = m.next_deadline()
    assert due is not None and 5003.0 + 80 <= due <= 5003.0 + 120  # 100 ms, 20% jitter
    assert heartbeat(m.poll(due)).subscribed_topic_names == ("t",)  # sentFields reset


@pytest.mark.parametrize(
    "error",
    [Errors.GROUP_MAX_SIZE_REACHED, Errors.INVALID_REQUEST, Errors.UNSUPPORTED_VERSION],
)
def test_fatal_errors_end_the_membership(error: Errors) -> None:
    m = member()
    hb = joined(m)
    answer(m, 1.0, hb, error=error)
    assert m.state is MemberState.FATAL and m.fatal_error == error.name
    assert m.poll(1_000_000.0) == [] and m.next_deadline() is None


def test_the_poll_timer_leaves_goes_stale_and_the_next_poll_rejoins() -> None:
    m = member(max_poll_interval_ms=1000)
    hb = joined(m)
    ack = heartbeat(answer(m, 1.0, hb, assignment=(TP0,), interval=400))
    answer(m, 2.0, ack, interval=400)
    for t in (401.0, 802.0):
        answer(m, t, heartbeat(m.poll(t)), interval=400)  # answered at once
    out = m.poll(1000.0)
    leave = heartbeat(out)
    assert leave.member_epoch == -1 and m.state is MemberState.STALE
    assert only(out, ShareAssignment) == [ShareAssignment(())]
    assert m.poll(100_000.0) == [] and m.next_deadline() is None  # no heartbeat while stale
    rejoin = heartbeat(m.app_polled(100_000.0))
    assert rejoin.member_epoch == 0 and m.state is MemberState.JOINING


def test_close_sends_the_leave_heartbeat_once() -> None:
    m = member()
    hb = joined(m)
    ack = heartbeat(answer(m, 1.0, hb, assignment=(TP0,)))
    answer(m, 2.0, ack)
    out = m.close(10.0)
    leave = heartbeat(out)
    assert leave.member_epoch == -1 and m.closed
    assert only(out, ShareAssignment) == [ShareAssignment(())]
    stopped = [e for e in only(out, Emit) if e.kind is EventKind.CONSUMER_STOPPED]
    assert stopped
    assert m.on_response(11.0, ShareGroupHeartbeatResponse(leave.corr, member_epoch=-1)) == []
    assert m.poll(1_000_000.0) == [] and m.next_deadline() is None
