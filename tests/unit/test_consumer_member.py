"""The KIP-848 consumer's membership and heartbeat managers on a fake clock (C2, C5).

In the style of Kafka's ``ConsumerMembershipManagerTest`` and
``ConsumerHeartbeatRequestManagerTest``: the test plays the coordinator by
hand, answering each request the member sends with a scripted response, and
checks the requests, the effects (StartFetching, StopFetching), the events
and the member's state after each step.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TypeVar

import pytest

from emulator.events import EventKind as K
from emulator.modern.config import Kip848ConsumerConfig
from emulator.modern.consumer_member import (
    ConsumerMember,
    LocalAssignment,
    MemberState,
    make_consumer_member,
    retry_backoff_ms,
)
from emulator.modern.errors import Errors
from emulator.modern.messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    Emit,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    StartFetching,
    StopFetching,
    TopicPartition,
)
from emulator.modern.messages import MemberOutput as Output
from tests.group_context import GroupTestContext

GROUP = "grp"
F0, F1, F2 = ("foo", 0), ("foo", 1), ("foo", 2)
T = TypeVar("T")


def of(out: Sequence[Output], kind: type[T]) -> list[T]:
    return [o for o in out if isinstance(o, kind)]


def emits(out: Sequence[Output], kind: K | None = None) -> list[Emit]:
    return [o for o in out if isinstance(o, Emit) and (kind is None or o.kind is kind)]


def kinds(out: Sequence[Output]) -> list[str]:
    """The outputs in order, by effect name or event kind (requests by class)."""
    return [o.kind.value if isinstance(o, Emit) else type(o).__name__ for o in out]


class Driver(GroupTestContext):
    """Plays the coordinator for one member (its outputs are recorded as ``c``)."""

    def __init__(self, topics: tuple[str, ...] = ("foo",), **config: object) -> None:
        super().__init__()
        self.m = ConsumerMember(
            member="c",
            group=GROUP,
            topics=topics,
            config=Kip848ConsumerConfig(**config),  # type: ignore[arg-type]
            rng=random.Random(1),
        )

    def _out(self, outs: list[Output]) -> list[Output]:
        self.record("c", outs)
        return outs

    def start(self) -> list[Output]:
        return self._out(self.m.start(self.now))

    def respond(self, resp: object) -> list[Output]:
        return self._out(self.m.on_response(self.now, resp))  # type: ignore[arg-type]

    def advance(self, ms: float) -> list[Output]:
        """Move the clock by ``ms``, then poll once."""
        self.clock.advance(ms)
        return self._out(self.m.poll(self.now))

    def app_poll(self) -> list[Output]:
        return self._out(self.m.app_polled(self.now))

    def found(self) -> list[Output]:
        out = self.start()
        (find,) = of(out, FindCoordinatorRequest)
        return self.respond(FindCoordinatorResponse(find.corr, node_id=1))

    def hb_response(
        self,
        req: ConsumerGroupHeartbeatRequest,
        *,
        epoch: int,
        assignment: Sequence[TopicPartition] | None = None,
        member_id: str = "m-1",
    ) -> list[Output]:
        return self.respond(
            ConsumerGroupHeartbeatResponse(
                req.corr,
                member_id=member_id,
                member_epoch=epoch,
                heartbeat_interval_ms=5000,
                assignment=None if assignment is None else tuple(assignment),
            )
        )

    def stable_with(
        self, parts: Sequence[TopicPartition], offsets: dict[TopicPartition, int | None]
    ) -> list[Output]:
        """Join, get ``parts`` at epoch 1, fetch ``offsets``, acknowledge."""
        (join,) = of(self.found(), ConsumerGroupHeartbeatRequest)
        out = self.hb_response(join, epoch=1, assignment=parts)
        (fetch,) = of(out, OffsetFetchRequest)
        out = self.respond(OffsetFetchResponse(fetch.corr, offsets=offsets))
        (ack,) = of(out, ConsumerGroupHeartbeatRequest)
        done = self.hb_response(ack, epoch=1)
        assert state(self) is MemberState.STABLE
        return out + done


def state(d: Driver) -> MemberState:
    """The member's state (a call, so that mypy does not narrow it across steps)."""
    return d.m.state


def only(out: Sequence[Output], kind: type[T]) -> T:
    (item,) = of(out, kind)
    return item


# --------------------------------------------------------------------------- joining


def test_start_looks_up_the_coordinator_then_joins_with_every_field() -> None:
    d = Driver(group_remote_assignor="range", client_rack="r1")
    out = d.start()
    assert kinds(out) == ["consumer_started", "FindCoordinatorRequest"]
    assert state(d) is MemberState.JOINING
    out = d.respond(FindCoordinatorResponse(only(out, FindCoordinatorRequest).corr, node_id=3))
    assert d.m.coordinator == 3
    assert emits(out, K.COORDINATOR_FOUND)[0].fields["broker"] == 3
    join = only(out, ConsumerGroupHeartbeatRequest)
    assert join == ConsumerGroupHeartbeatRequest(
        join.corr,
        GROUP,
        member_id="",
        member_epoch=0,
        rack_id="r1",
        rebalance_timeout_ms=300000,
        subscribed_topic_names=("foo",),
        server_assignor="range",
        topic_partitions=(),
    )


def test_find_coordinator_failure_is_retried_after_a_backoff() -> None:
    d = Driver()
    find = only(d.start(), FindCoordinatorRequest)
    out = d.respond(FindCoordinatorResponse(find.corr, error=Errors.COORDINATOR_NOT_AVAILABLE))
    assert emits(out, K.REQUEST_ERROR)[0].fields["reason"] == "COORDINATOR_NOT_AVAILABLE"
    deadline = d.m.next_deadline()
    assert deadline is not None and 80 <= deadline <= 120  # retry.backoff.ms 100 +- 20%
    assert d.advance(deadline - 1) == []
    assert of(d.advance(1), FindCoordinatorRequest)


def test_join_reconcile_then_acknowledge() -> None:
    d = Driver()
    join = only(d.found(), ConsumerGroupHeartbeatRequest)
    out = d.hb_response(join, epoch=1, assignment=(F0, F1))
    assert d.m.member_id == "m-1" and d.m.member_epoch == 1
    assert state(d) is MemberState.RECONCILING
    assert kinds(out) == ["rebalance_started", "OffsetFetchRequest"]
    fetch = only(out, OffsetFetchRequest)
    assert (fetch.partitions, fetch.member_id, fetch.member_epoch) == ((F0, F1), "m-1", 1)

    out = d.respond(OffsetFetchResponse(fetch.corr, offsets={F0: 10, F1: None}))
    assert kinds(out) == [
        "StartFetching",
        "partitions_assigned",
        "ownership_claimed",
        "ownership_claimed",
        "rebalance_completed",
        "ConsumerGroupHeartbeatRequest",
    ]
    assert only(out, StartFetching).positions == {F0: 10, F1: None}
    claims = emits(out, K.OWNERSHIP_CLAIMED)
    assert [(e.fields["partition"], e.fields["generation"]) for e in claims] == [(0, 1), (1, 1)]
    ack = only(out, ConsumerGroupHeartbeatRequest)
    assert (ack.member_epoch, ack.topic_partitions, ack.subscribed_topic_names) == (
        1,
        (F0, F1),
        None,
    )
    assert state(d) is MemberState.STABLE and d.m.owned == {F0, F1}
    assert emits(out, K.REBALANCE_COMPLETED)[0].fields["count"] == 2


def test_empty_assignment_is_reconciled_and_acknowledged() -> None:
    d = Driver()
    out = d.hb_response(only(d.found(), ConsumerGroupHeartbeatRequest), epoch=1, assignment=())
    # onPartitionsAssigned runs with the empty set too.
    assert kinds(out) == [
        "rebalance_started",
        "partitions_assigned",
        "rebalance_completed",
        "ConsumerGroupHeartbeatRequest",
    ]
    assert emits(out, K.PARTITIONS_ASSIGNED)[0].fields["count"] == 0
    assert only(out, ConsumerGroupHeartbeatRequest).topic_partitions == ()
    assert state(d) is MemberState.STABLE


def test_heartbeats_follow_the_interval_and_carry_only_changes() -> None:
    d = Driver()
    d.stable_with((F0,), {F0: None})
    assert d.m.next_deadline() == 5000  # auto-commit and heartbeat both due then
    d.clock.advance(1_000)
    assert d.m.poll(d.now) == []
    hb = only(d.advance(4_000), ConsumerGroupHeartbeatRequest)
    assert (hb.member_epoch, hb.rebalance_timeout_ms, hb.subscribed_topic_names) == (1, -1, None)
    assert hb.topic_partitions is None and hb.server_assignor is None
    # One heartbeat in flight at a time.
    assert of(d.advance(10_000), ConsumerGroupHeartbeatRequest) == []
    d.hb_response(hb, epoch=1)
    assert d.m.next_deadline() == d.now + 5000


def test_heartbeat_interval_counts_from_the_send_not_the_answer() -> None:
    d = Driver(enable_auto_commit=False)
    d.stable_with((F0,), {F0: None})
    hb = only(d.advance(5_000), ConsumerGroupHeartbeatRequest)  # sent at 5000
    d.clock.advance(3_000)
    d.hb_response(hb, epoch=1)  # answered at 8000
    assert d.m.next_deadline() == 10_000
    hb = only(d.advance(2_000), ConsumerGroupHeartbeatRequest)  # sent at 10000
    d.clock.advance(7_000)
    out = d.hb_response(hb, epoch=1)  # answered late, at 17000: the next one goes at once
    hb = only(out, ConsumerGroupHeartbeatRequest)
    # A new interval from the coordinator restarts the timer.
    d.respond(
        ConsumerGroupHeartbeatResponse(
            hb.corr, member_id="m-1", member_epoch=1, heartbeat_interval_ms=8_000
        )
    )
    assert d.m.next_deadline() == d.now + 8_000


# ---------------------------------------------------------------------- revocation


def test_revocation_commits_then_revokes_then_acknowledges() -> None:
    d = Driver()
    d.stable_with((F0, F1), {F0: 0, F1: 0})
    d.m.consumed(F1, 50)
    d.m.consumed(F0, 20)
    hb = only(d.advance(5_000), ConsumerGroupHeartbeatRequest)
    out = d.hb_response(hb, epoch=1, assignment=(F0,))
    # Stop fetching what is revoked, then commit before releasing it.
    assert kinds(out) == ["rebalance_started", "StopFetching", "OffsetCommitRequest"]
    assert only(out, StopFetching).partitions == (F1,)
    commit = only(out, OffsetCommitRequest)
    assert (commit.generation_id_or_member_epoch, commit.member_id) == (1, "m-1")
    assert dict(commit.offsets) == {F0: 20, F1: 50}
    assert F1 in d.m.owned  # not released before the commit returns

    out = d.respond(OffsetCommitResponse(commit.corr))
    assert kinds(out) == [
        "offsets_committed",
        "offsets_committed",
        "partitions_revoked",
        "ownership_released",
        "partitions_assigned",  # with nothing added
        "rebalance_completed",
        "ConsumerGroupHeartbeatRequest",
    ]
    assert [e.fields["reason"] for e in emits(out, K.OFFSETS_COMMITTED)] == ["reconcile"] * 2
    released = emits(out, K.OWNERSHIP_RELEASED)[0].fields
    assert (released["partition"], released["reason"]) == (1, "revoked")
    assert only(out, ConsumerGroupHeartbeatRequest).topic_partitions == (F0,)
    assert d.m.owned == {F0} and d.m.committed == {F0: 20, F1: 50}


def test_revocation_without_auto_commit_is_immediate() -> None:
    d = Driver(enable_auto_commit=False)
    d.stable_with((F0, F1), {F0: 0, F1: 0})
    d.m.consumed(F1, 50)
    hb = only(d.advance(5_000), ConsumerGroupHeartbeatRequest)
    out = d.hb_response(hb, epoch=1, assignment=(F0,))
    assert of(out, OffsetCommitRequest) == []
    assert "partitions_revoked" in kinds(out)
    assert only(out, ConsumerGroupHeartbeatRequest).topic_partitions == (F0,)


def test_failed_commit_before_revocation_is_reported_and_revocation_proceeds() -> None:
    d = Driver()
    d.stable_with((F0, F1), {F0: 0, F1: 0})
    d.m.consumed(F1, 50)
    hb = only(d.advance(5_000), ConsumerGroupHeartbeatRequest)
    out = d.hb_response(hb, epoch=1, assignment=(F0,))
    commit = only(out, OffsetCommitRequest)
    out = d.respond(OffsetCommitResponse(commit.corr, error=Errors.UNKNOWN_MEMBER_ID))
    failed = emits(out, K.COMMIT_FAILED)
    assert [(e.fields["reason"], e.fields["detail"]) for e in failed] == [
        ("UNKNOWN_MEMBER_ID", "reconcile")
    ]
    assert "partitions_revoked" in kinds(out) and d.m.owned == {F0}


def test_stale_epoch_commit_before_revocation_is_retried_with_the_new_epoch() -> None:
    d = Driver()
    d.stable_with((F0, F1), {F0: 0, F1: 0})
    d.m.consumed(F1, 50)
    hb = only(d.advance(5_000), ConsumerGroupHeartbeatRequest)
    out = d.hb_response(hb, epoch=1, assignment=(F0,))
    commit = only(out, OffsetCommitRequest)
    # Meanwhile a heartbeat response moved the member to epoch 2.
    d.m.member_epoch = 2
    out = d.respond(OffsetCommitResponse(commit.corr, error=Errors.STALE_MEMBER_EPOCH))
    assert emits(out, K.COMMIT_FAILED) == [] and "partitions_revoked" not in kinds(out)
    deadline = d.m.next_deadline()
    assert deadline is not None and d.now + 80 <= deadline <= d.now + 120
    retry = only(d.advance(deadline - d.now), OffsetCommitRequest)
    assert retry.generation_id_or_member_epoch == 2
    out = d.respond(OffsetCommitResponse(retry.corr))
    assert "partitions_revoked" in kinds(out)


def test_new_target_while_reconciling_is_taken_after_the_acknowledgement() -> None:
    d = Driver()
    join = only(d.found(), ConsumerGroupHeartbeatRequest)
    out = d.hb_response(join, epoch=1, assignment=(F0,))
    fetch = only(out, OffsetFetchRequest)
    # An ack-less heartbeat brings a newer target before the fetch returns.
    d.clock.advance(5_000)
    hb = only(d.m.poll(d.now), ConsumerGroupHeartbeatRequest)
    assert d.hb_response(hb, epoch=2, assignment=(F0, F1)) == []  # waits its turn
    out = d.respond(OffsetFetchResponse(fetch.corr, offsets={F0: 1}))
    ack = only(out, ConsumerGroupHeartbeatRequest)
    assert ack.topic_partitions == (F0,)
    # The acknowledgement sent, the member reconciles the newer target.
    assert state(d) is MemberState.RECONCILING
    out = d.hb_response(ack, epoch=2)
    assert only(out, OffsetFetchRequest).partitions == (F1,)


def test_assignment_already_owned_is_only_acknowledged() -> None:
    d = Driver()
    d.stable_with((F0,), {F0: 0})
    hb = only(d.advance(5_000), ConsumerGroupHeartbeatRequest)
    # The same partitions again (e.g. an answer to a full request): nothing to do.
    assert d.hb_response(hb, epoch=2, assignment=(F0,)) == []
    assert state(d) is MemberState.STABLE and d.m.member_epoch == 2


# --------------------------------------------------------------------------- fencing


@pytest.mark.parametrize("error", [Errors.FENCED_MEMBER_EPOCH, Errors.UNKNOWN_MEMBER_ID])
def test_fenced_member_loses_everything_and_rejoins_with_the_same_id(error: Errors) -> None:
    d = Driver()
    d.stable_with((F0, F1), {F0: 0, F1: 0})
    hb = only(d.advance(5_000), ConsumerGroupHeartbeatRequest)
    out = d.respond(ConsumerGroupHeartbeatResponse(hb.corr, error=error))
    assert kinds(out) == [
        "request_error",
        "StopFetching",
        "partitions_lost",
        "ownership_released",
        "ownership_released",
        "ConsumerGroupHeartbeatRequest",
    ]
    assert emits(out, K.PARTITIONS_LOST)[0].fields["reason"] == "fenced"
    rejoin = only(out, ConsumerGroupHeartbeatRequest)
    assert (rejoin.member_id, rejoin.member_epoch, rejoin.topic_partitions) == ("m-1", 0, ())
    assert rejoin.rebalance_timeout_ms == 300000 and rejoin.subscribed_topic_names == ("foo",)
    assert state(d) is MemberState.JOINING and d.m.owned == set()
    assert (d.m.stats.fenced, d.m.stats.joins, d.m.stats.rebalances) == (1, 2, 1)


def test_fence_during_reconciliation_abandons_it() -> None:
    d = Driver()
    d.stable_with((F0, F1), {F0: 0, F1: 0})
    d.m.consumed(F1, 5)
    hb = only(d.advance(5_000), ConsumerGroupHeartbeatRequest)
    commit = only(d.hb_response(hb, epoch=1, assignment=(F0,)), OffsetCommitRequest)
    hb2 = only(d.advance(5_000), ConsumerGroupHeartbeatRequest)
    out = d.respond(ConsumerGroupHeartbeatResponse(hb2.corr, error=Errors.FENCED_MEMBER_EPOCH))
    assert "partitions_lost" in kinds(out)
    rejoin = only(out, ConsumerGroupHeartbeatRequest)
    # The commit of the abandoned reconciliation comes back: nothing is revoked twice.
    out = d.respond(OffsetCommitResponse(commit.corr))
    assert "partitions_revoked" not in kinds(out)
    out = d.hb_response(rejoin, epoch=4, assignment=(F2,))
    assert only(out, OffsetFetchRequest).partitions == (F2,)


# ------------------------------------------------------------------ coordinator errors


@pytest.mark.parametrize("error", [Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE])
def test_coordinator_errors_trigger_rediscovery(error: Errors) -> None:
    d = Driver()
    d.stable_with((F0,), {F0: 0})
    hb = only(d.advance(5_000), ConsumerGroupHeartbeatRequest)
    out = d.respond(ConsumerGroupHeartbeatResponse(hb.corr, error=error))
    assert d.m.coordinator is None
    find = only(out, FindCoordinatorRequest)
    out = d.respond(FindCoordinatorResponse(find.corr, node_id=2))
    # Heartbeat at once, with every field (the sent-fields state was reset).
    again = only(out, ConsumerGroupHeartbeatRequest)
    assert (again.member_epoch, again.topic_partitions, again.rebalance_timeout_ms) == (
        1,
        (F0,),
        300000,
    )
    assert d.m.coordinator == 2 and d.m.owned == {F0}


def test_coordinator_load_in_progress_is_retried_after_a_backoff() -> None:
    d = Driver()
    d.stable_with((F0,), {F0: 0})
    hb = only(d.advance(5_000), ConsumerGroupHeartbeatRequest)
    d.respond(ConsumerGroupHeartbeatResponse(hb.corr, error=Errors.COORDINATOR_LOAD_IN_PROGRESS))
    deadline = d.m.next_deadline()
    assert deadline is not None and d.now + 80 <= deadline <= d.now + 120
    assert of(d.advance(deadline - d.now), ConsumerGroupHeartbeatRequest)


def test_requests_wait_for_a_coordinator() -> None:
    d = Driver()
    d.stable_with((F0, F1), {F0: 0, F1: 0})
    d.m.consumed(F1, 7)
    hb = only(d.advance(5_000), ConsumerGroupHeartbeatRequest)
    out = d.hb_response(hb, epoch=1, assignment=(F0,))
    commit = only(out, OffsetCommitRequest)
    out = d.respond(OffsetCommitResponse(commit.corr, error=Errors.NOT_COORDINATOR))
    # A retriable failure: retried after a backoff, once a coordinator is known.
    assert d.m.coordinator is None and of(out, FindCoordinatorRequest)
    find = only(out, FindCoordinatorRequest)
    assert of(d.advance(200), OffsetCommitRequest) == []
    out = d.respond(FindCoordinatorResponse(find.corr, node_id=1))
    assert only(out, OffsetCommitRequest).offsets == {F1: 7}


@pytest.mark.parametrize(
    "error",
    [
        Errors.UNRELEASED_INSTANCE_ID,
        Errors.FENCED_INSTANCE_ID,
        Errors.INVALID_REQUEST,
        Errors.GROUP_MAX_SIZE_REACHED,
        Errors.UNSUPPORTED_ASSIGNOR,
        Errors.ILLEGAL_GENERATION,
    ],
)
def test_fatal_errors_stop_the_member(error: Errors) -> None:
    d = Driver()
    d.stable_with((F0,), {F0: 0})
    hb = only(d.advance(5_000), ConsumerGroupHeartbeatRequest)
    out = d.respond(ConsumerGroupHeartbeatResponse(hb.corr, error=error))
    assert state(d) is MemberState.FATAL
    assert kinds(out) == [
        "request_error",
        "StopFetching",
        "partitions_lost",
        "ownership_released",
    ]
    assert d.m.next_deadline() is None
    assert d.advance(60_000) == []


# ------------------------------------------------------------------- poll timeout


@pytest.mark.parametrize(("instance", "epoch"), [(None, -1), ("i1", -2)])
def test_poll_timeout_leaves_goes_stale_and_rejoins_on_poll(
    instance: str | None, epoch: int
) -> None:
    d = Driver(max_poll_interval_ms=12_000, group_instance_id=instance)
    d.stable_with((F0,), {F0: 0})
    hb = only(d.advance(5_000), ConsumerGroupHeartbeatRequest)
    d.hb_response(hb, epoch=1)
    assert d.m.next_deadline() == 10_000
    hb = only(d.advance(5_000), ConsumerGroupHeartbeatRequest)  # in flight at the timeout
    out = d.advance(2_000)
    assert kinds(out) == [
        "ConsumerGroupHeartbeatRequest",
        "StopFetching",
        "partitions_lost",
        "ownership_released",
    ]
    leave = only(out, ConsumerGroupHeartbeatRequest)
    assert (leave.member_epoch, leave.topic_partitions, leave.instance_id) == (
        epoch,
        (),
        instance,
    )
    assert emits(out, K.PARTITIONS_LOST)[0].fields["reason"] == "poll_timeout"
    assert state(d) is MemberState.STALE and d.m.owned == set()
    # The answer to the heartbeat in flight is ignored; a STALE member is silent.
    assert d.hb_response(hb, epoch=1, assignment=(F0,)) == []
    assert d.m.next_deadline() is None and d.advance(60_000) == []

    out = d.app_poll()
    join = only(out, ConsumerGroupHeartbeatRequest)
    assert (join.member_id, join.member_epoch, join.topic_partitions) == ("m-1", 0, ())
    assert state(d) is MemberState.JOINING


def test_app_polls_keep_the_member_in_the_group() -> None:
    d = Driver(max_poll_interval_ms=12_000)
    d.stable_with((F0,), {F0: 0})
    for _ in range(10):
        hb = only(d.advance(5_000), ConsumerGroupHeartbeatRequest)
        d.app_poll()
        d.hb_response(hb, epoch=1)
    assert state(d) is MemberState.STABLE


# ---------------------------------------------------------------------------- close


@pytest.mark.parametrize(("instance", "epoch"), [(None, -1), ("i1", -2)])
def test_close_commits_revokes_and_leaves(instance: str | None, epoch: int) -> None:
    d = Driver(group_instance_id=instance)
    d.stable_with((F0, F1), {F0: 0, F1: 0})
    d.m.consumed(F0, 30)
    out = d.m.close(d.now)
    commit = only(out, OffsetCommitRequest)
    assert dict(commit.offsets) == {F0: 30}
    out = d.respond(OffsetCommitResponse(commit.corr))
    assert kinds(out) == [
        "offsets_committed",
        "StopFetching",
        "partitions_revoked",
        "ownership_released",
        "ownership_released",
        "ConsumerGroupHeartbeatRequest",
        "consumer_stopped",
    ]
    leave = only(out, ConsumerGroupHeartbeatRequest)
    assert (leave.member_id, leave.member_epoch, leave.instance_id) == ("m-1", epoch, instance)
    assert d.m.closed and state(d) is MemberState.UNSUBSCRIBED
    assert d.m.next_deadline() is None and d.advance(60_000) == []
    assert d.m.close(d.now) == []


def test_close_waits_for_the_heartbeat_in_flight() -> None:
    d = Driver(enable_auto_commit=False)
    d.stable_with((F0,), {F0: 0})
    hb = only(d.advance(5_000), ConsumerGroupHeartbeatRequest)
    out = d.m.close(d.now)
    assert "partitions_revoked" in kinds(out) and of(out, ConsumerGroupHeartbeatRequest) == []
    assert state(d) is MemberState.LEAVING
    out = d.hb_response(hb, epoch=1, assignment=(F0, F1))  # ignored: leaving
    assert only(out, ConsumerGroupHeartbeatRequest).member_epoch == -1
    assert d.m.closed


def test_close_before_joining_or_when_out_of_the_group() -> None:
    d = Driver()
    out = d.m.close(d.now)
    assert kinds(out) == ["consumer_stopped"] and d.m.closed
    d2 = Driver()
    d2.stable_with((F0,), {F0: 0})
    hb = only(d2.advance(5_000), ConsumerGroupHeartbeatRequest)
    d2.respond(ConsumerGroupHeartbeatResponse(hb.corr, error=Errors.INVALID_REQUEST))
    out = d2.m.close(d2.now)
    assert kinds(out) == ["consumer_stopped"]


def test_close_with_the_coordinator_unknown_skips_the_leave() -> None:
    d = Driver(enable_auto_commit=False)
    d.stable_with((F0,), {F0: 0})
    hb = only(d.advance(5_000), ConsumerGroupHeartbeatRequest)
    out = d.respond(ConsumerGroupHeartbeatResponse(hb.corr, error=Errors.NOT_COORDINATOR))
    only(out, FindCoordinatorRequest)
    out = d.m.close(d.now)
    assert of(out, ConsumerGroupHeartbeatRequest) == []
    assert "consumer_stopped" in kinds(out) and d.m.closed


# ------------------------------------------------------------------------ auto-commit


def test_periodic_auto_commit_of_changed_offsets() -> None:
    d = Driver()
    d.stable_with((F0, F1), {F0: 0, F1: 5})
    d.m.consumed(F0, 10)
    d.m.consumed(("bar", 0), 99)  # not owned: dropped
    out = d.advance(5_000)
    commit = only(out, OffsetCommitRequest)
    assert dict(commit.offsets) == {F0: 10}
    out = d.respond(OffsetCommitResponse(commit.corr))
    assert [
        (e.fields["partition"], e.fields["offset_end"], e.fields["reason"])
        for e in emits(out, K.OFFSETS_COMMITTED)
    ] == [(0, 10, "auto")]
    # Nothing new: no commit at the next tick.
    assert of(d.advance(5_000), OffsetCommitRequest) == []


def test_rejected_auto_commit_is_a_commit_failure() -> None:
    d = Driver()
    d.stable_with((F0,), {F0: 0})
    d.m.consumed(F0, 10)
    commit = only(d.advance(5_000), OffsetCommitRequest)
    out = d.respond(OffsetCommitResponse(commit.corr, error=Errors.STALE_MEMBER_EPOCH))
    failed = emits(out, K.COMMIT_FAILED)[0].fields
    assert (failed["reason"], failed["detail"], failed["generation"]) == (
        "STALE_MEMBER_EPOCH",
        "auto",
        1,
    )
    assert d.m.committed == {F0: 0}
    # Retried (with the same offsets) at the next tick.
    assert only(d.advance(5_000), OffsetCommitRequest).offsets == {F0: 10}


def test_stray_responses_are_ignored() -> None:
    d = Driver()
    d.stable_with((F0,), {F0: 0})
    assert d.respond(OffsetCommitResponse(999)) == []
    assert d.respond(OffsetFetchResponse(999)) == []
    assert d.respond(ConsumerGroupHeartbeatResponse(999, member_epoch=7)) == []
    assert d.m.member_epoch == 1


# ------------------------------------------------------------------------ plumbing


def test_config_from_kafka_names() -> None:
    cfg = Kip848ConsumerConfig.from_kafka(
        {
            "group.instance.id": "i-7",
            "max.poll.interval.ms": "60000",
            "enable.auto.commit": "false",
            "auto.commit.interval.ms": 1000,
            "group.remote.assignor": "range",
            "client.rack": "r2",
        }
    )
    assert cfg == Kip848ConsumerConfig(
        group_instance_id="i-7",
        max_poll_interval_ms=60000,
        enable_auto_commit=False,
        auto_commit_interval_ms=1000,
        group_remote_assignor="range",
        client_rack="r2",
    )
    assert Kip848ConsumerConfig.from_kafka({}) == Kip848ConsumerConfig()
    for bad in (
        {"max.poll.interval.ms": "soon"},
        {"max.poll.interval.ms": 0},
        {"enable.auto.commit": "maybe"},
        {"group.instance.id": " "},
        {"retry.backoff.ms": 500, "retry.backoff.max.ms": 100},
    ):
        with pytest.raises(ValueError):
            Kip848ConsumerConfig.from_kafka(bad)


def test_local_assignment_epochs() -> None:
    none = LocalAssignment(-1, frozenset())
    first = none.update_with(frozenset())
    assert first == LocalAssignment(0, frozenset())
    assert first.update_with(frozenset()) is None
    assert first.update_with(frozenset({F0})) == LocalAssignment(1, frozenset({F0}))


def test_misuse_is_refused() -> None:
    d = Driver()
    d.start()
    with pytest.raises(RuntimeError, match="already started"):
        d.start()
    with pytest.raises(ValueError, match="at least one topic"):
        Driver(topics=())


def test_factory_for_the_actors() -> None:
    m = make_consumer_member(
        name="c-3",
        group=GROUP,
        topics=["foo", "bar"],
        props={"session.timeout.ms": 10000, "max.poll.interval.ms": 20000, "client.id": "c-3"},
        server_assignor="range",
        corr_start=5_000,
    )
    assert m.topics == ("bar", "foo") and m.config.max_poll_interval_ms == 20000
    assert m.config.group_remote_assignor == "range"
    find = only(m.start(0), FindCoordinatorRequest)
    assert find.corr == 5_001
    join = only(
        m.on_response(0, FindCoordinatorResponse(find.corr, node_id=1)),
        ConsumerGroupHeartbeatRequest,
    )
    assert join.server_assignor == "range" and join.rebalance_timeout_ms == 20000
    # An explicit group.remote.assignor wins over the protocol's default.
    m2 = make_consumer_member(
        name="c-4",
        group=GROUP,
        topics=["foo"],
        props={"group.remote.assignor": "uniform"},
        server_assignor="range",
    )
    assert m2.config.group_remote_assignor == "uniform"


def test_app_processing_only_restarts_the_poll_timer() -> None:
    d = Driver(max_poll_interval_ms=12_000)
    d.stable_with((F0,), {F0: 0})
    d.clock.advance(3_000)
    assert d.m.app_processing(d.now) == []
    hb = only(d.advance(2_000), ConsumerGroupHeartbeatRequest)
    # Busy with a batch, the member still reconciles on its own (background thread).
    out = d.hb_response(hb, epoch=2, assignment=(F0, F1))
    assert of(out, OffsetFetchRequest)
    assert d.m.next_deadline() == 10_000  # heartbeat; the poll timer runs until 15000
    hb = only(d.advance(5_000), ConsumerGroupHeartbeatRequest)
    d.hb_response(hb, epoch=2)
    out = d.advance(5_000)  # 15000: the poll timer expires
    assert only(out, ConsumerGroupHeartbeatRequest).member_epoch == -1


@pytest.mark.parametrize(
    ("initial", "cap", "attempts", "u", "expected"),
    [
        (100, 1000, 0, 0.5, 100.0),  # factor 1.0: the initial interval
        (100, 1000, 0, 0.0, 80.0),  # factor 0.8
        (100, 1000, 2, 0.25, 360.0),  # 400 x 0.9
        (100, 1000, 3, 0.999, 959.0),  # 800 x 1.1996 = 959.68, truncated
        (100, 1000, 4, 0.999, 1000.0),  # 1,199.6 capped after the jitter (Kafka's Math.min)
        (100, 1000, 4, 0.0, 800.0),  # the exponent stops at log2(10): 1000 x 0.8
        (100, 1000, 40, 0.5, 1000.0),
        (100, 1000, -1, 0.5, 100.0),
        (500, 200, 3, 0.9, 200.0),  # a max below the initial: constant max, no jitter
        (100, 100, 3, 0.9, 100.0),
    ],
)
def test_retry_backoff_is_kafka_s_exponential_backoff(
    initial: int, cap: int, attempts: int, u: float, expected: float
) -> None:
    """``ExponentialBackoff.backoff``: exponent capped at log2(max/initial), jitter,
    truncation to whole ms, then the cap (the jitter never exceeds ``max``)."""
    assert retry_backoff_ms(initial, cap, attempts, u) == expected
