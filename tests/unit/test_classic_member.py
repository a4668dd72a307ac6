"""The classic consumer's client side, response by response (kafka-protocols.md B2-B9).

In the style of Kafka's ``ConsumerCoordinatorTest`` / ``AbstractCoordinatorTest``
with a ``MockClient``: the test plays the coordinator by hand, answering each
request the :class:`~emulator.modern.classic_member.ClassicMember` returns, on a
:class:`~emulator.clock.FakeClock`. Covered: discovery and rediscovery, the
KIP-394 two-step join, follower and leader paths, heartbeats and the B4 error
reactions, client-side session and request timeouts, auto-commit (periodic and
before a rebalance) and rejected commits, the poll-timeout LeaveGroup,
close() for dynamic and static members, EAGER versus COOPERATIVE revocation,
the leader's cooperative check, and the client configuration of B6.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from emulator.events import EventKind as K
from emulator.modern.assignors import MemberSubscription
from emulator.modern.classic_member import ClassicMember, MemberState
from emulator.modern.config import ClassicConsumerConfig
from emulator.modern.errors import Errors
from emulator.modern.messages import (
    Assignment,
    Emit,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    GroupRequest,
    GroupResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupMember,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    StartFetching,
    StopFetching,
    Subscription,
    SyncGroupRequest,
    SyncGroupResponse,
    TopicPartition,
)
from tests.group_context import GroupTestContext

T0, T1, T2 = ("t", 0), ("t", 1), ("t", 2)


class StandInCooperative:
    """A deliberately bad COOPERATIVE assignor: gives everything to the first member."""

    name = "bad-cooperative"
    supported_protocols = ("COOPERATIVE",)

    def assign(self, partitions_per_topic: dict[str, int],
               members: dict[str, MemberSubscription]) -> dict[str, tuple[TopicPartition, ...]]:
        first = sorted(members)[0]
        everything = tuple(("t", p) for p in range(partitions_per_topic["t"]))
        return {m: everything if m == first else () for m in members}


class Harness(GroupTestContext):
    """One member on the mock time, and the requests it is waiting on."""

    def __init__(self, assignors: list[object] | None = None, **props: object) -> None:
        super().__init__()
        self.config = ClassicConsumerConfig.from_kafka({"client.id": "me", **props})
        self.member = ClassicMember(
            member="c-0", group="g", topics=("t",), config=self.config,
            partitions_per_topic={"t": 3},
            assignors=assignors,  # type: ignore[arg-type]
        )
        self.pending: list[GroupRequest] = []
        self.effects: list[object] = []
        self.with_machine("c-0", self.member, self.take)

    @property
    def events(self) -> list[Emit]:
        return self.emits()

    def take(self, outs: Sequence[object]) -> Sequence[object]:
        for o in self.record("c-0", outs):
            if isinstance(o, GroupRequest):
                self.pending.append(o)
            else:
                self.effects.append(o)
        return outs

    def start(self) -> None:
        self.take(self.member.start(self.now))

    def advance(self, ms: float) -> None:
        """Fire the member's timers on the way, then poll it once more at the end."""
        self.run(ms)
        self.take(self.member.poll(self.now))

    def req(self, kind: type) -> GroupRequest:
        """The oldest unanswered request of ``kind``."""
        for r in self.pending:
            if isinstance(r, kind):
                return r
        raise AssertionError(f"no {kind.__name__} pending; pending: {self.pending}")

    def has(self, kind: type) -> bool:
        return any(isinstance(r, kind) for r in self.pending)

    def answer(self, kind: type, response_type: type, **fields: object) -> GroupRequest:
        r = self.req(kind)
        self.pending.remove(r)
        resp: GroupResponse = response_type(r.corr, **fields)
        self.take(self.member.on_response(self.now, resp))
        return r

    def kinds(self) -> list[K]:
        return self.event_kinds()

    def last(self, kind: K) -> Emit:
        return self.last_event(kind)

    # canned exchanges -------------------------------------------------------

    def find(self, node: int = 5) -> None:
        self.answer(FindCoordinatorRequest, FindCoordinatorResponse, node_id=node)

    def join_as_follower(self, generation: int = 1, member_id: str = "me-1",
                         assignment: tuple[TopicPartition, ...] = (T0, T1),
                         committed: dict[TopicPartition, int | None] | None = None) -> None:
        """JoinGroup (MEMBER_ID_REQUIRED first if no id yet), SyncGroup, OffsetFetch."""
        join = self.req(JoinGroupRequest)
        assert isinstance(join, JoinGroupRequest)
        if not join.member_id and not self.config.is_static:
            self.answer(JoinGroupRequest, JoinGroupResponse,
                        error=Errors.MEMBER_ID_REQUIRED, member_id=member_id)
        self.answer(JoinGroupRequest, JoinGroupResponse, generation_id=generation,
                    protocol_type="consumer", protocol_name=self.proto(), leader="other",
                    member_id=member_id)
        self.answer(SyncGroupRequest, SyncGroupResponse, protocol_type="consumer",
                    protocol_name=self.proto(), assignment=Assignment(assignment))
        if assignment and self.has(OffsetFetchRequest):
            offsets = committed if committed is not None else {tp: None for tp in assignment}
            self.answer(OffsetFetchRequest, OffsetFetchResponse, offsets=offsets)

    def proto(self) -> str:
        return self.config.partition_assignment_strategy[0]

    def joined(self, **kw: object) -> None:
        self.start()
        self.find()
        self.join_as_follower(**kw)  # type: ignore[arg-type]
        assert self.member.state is MemberState.STABLE


def starts(h: Harness) -> list[dict[TopicPartition, int | None]]:
    return [dict(e.positions) for e in h.effects if isinstance(e, StartFetching)]


def stops(h: Harness) -> list[tuple[TopicPartition, ...]]:
    return [e.partitions for e in h.effects if isinstance(e, StopFetching)]


# ------------------------------------------------------------------- discovery and join


def test_start_finds_the_coordinator_then_joins_with_a_subscription_per_assignor() -> None:
    h = Harness()
    h.start()
    assert [type(r) for r in h.pending] == [FindCoordinatorRequest]
    h.find(node=4)
    assert h.member.coordinator == 4
    assert h.kinds()[:2] == [K.CONSUMER_STARTED, K.COORDINATOR_FOUND]
    join = h.req(JoinGroupRequest)
    assert isinstance(join, JoinGroupRequest)
    assert (join.session_timeout_ms, join.rebalance_timeout_ms, join.member_id) == (
        45_000, 300_000, "")
    assert join.protocol_type == "consumer" and join.group_instance_id is None
    assert [name for name, _ in join.protocols] == ["range", "cooperative-sticky"]
    assert {sub for _, sub in join.protocols} == {Subscription(("t",))}
    assert h.member.protocol == "EAGER"


def test_failed_lookup_is_retried_after_the_back_off() -> None:
    h = Harness()
    h.start()
    h.answer(FindCoordinatorRequest, FindCoordinatorResponse,
             error=Errors.COORDINATOR_NOT_AVAILABLE)
    assert not h.has(FindCoordinatorRequest)
    h.advance(99)
    assert not h.has(FindCoordinatorRequest)
    h.advance(1)
    assert h.has(FindCoordinatorRequest)


def test_member_id_required_then_rejoin_with_that_id() -> None:
    h = Harness()
    h.start()
    h.find()
    h.answer(JoinGroupRequest, JoinGroupResponse, error=Errors.MEMBER_ID_REQUIRED,
             member_id="me-abc")
    join = h.req(JoinGroupRequest)
    assert isinstance(join, JoinGroupRequest) and join.member_id == "me-abc"
    assert h.member.generation.generation_id == -1


def test_follower_syncs_empty_then_fetches_from_committed_offsets() -> None:
    h = Harness()
    h.start()
    h.find()
    h.answer(JoinGroupRequest, JoinGroupResponse, generation_id=3, protocol_name="range",
             protocol_type="consumer", leader="other", member_id="me-1")
    sync = h.req(SyncGroupRequest)
    assert isinstance(sync, SyncGroupRequest)
    assert (sync.generation_id, sync.member_id, sync.protocol_name, sync.assignments) == (
        3, "me-1", "range", ())
    assert h.member.state is MemberState.COMPLETING_REBALANCE
    h.answer(SyncGroupRequest, SyncGroupResponse, assignment=Assignment((T0, T1)))
    assert h.member.state is MemberState.STABLE
    assert h.member.owned == {T0, T1}
    fetch = h.req(OffsetFetchRequest)
    assert isinstance(fetch, OffsetFetchRequest) and fetch.partitions == (T0, T1)
    assert starts(h) == []  # not before the committed offsets are known
    h.answer(OffsetFetchRequest, OffsetFetchResponse, offsets={T0: 7, T1: None})
    assert starts(h) == [{T0: 7, T1: None}]
    assert [e.fields["partitions"] for e in h.events if e.kind is K.PARTITIONS_ASSIGNED] == [
        "t:0,t:1"]
    assert [e.fields["partition"] for e in h.events if e.kind is K.OWNERSHIP_CLAIMED] == [0, 1]
    completed = h.last(K.REBALANCE_COMPLETED)
    assert completed.fields["generation"] == 3


def test_leader_runs_the_selected_assignor_for_everyone() -> None:
    h = Harness()
    h.start()
    h.find()
    subs = Subscription(("t",))
    h.answer(JoinGroupRequest, JoinGroupResponse, generation_id=1, protocol_name="range",
             leader="me-1", member_id="me-1",
             members=(JoinGroupMember("me-1", None, subs), JoinGroupMember("zz-2", None, subs)))
    sync = h.req(SyncGroupRequest)
    assert isinstance(sync, SyncGroupRequest)
    assert dict(sync.assignments) == {"me-1": Assignment((T0, T1)), "zz-2": Assignment((T2,))}
    assert h.member.is_leader


def test_leader_with_skip_assignment_sends_no_assignment() -> None:
    h = Harness(**{"group.instance.id": "i"})
    h.start()
    h.find()
    h.answer(JoinGroupRequest, JoinGroupResponse, generation_id=4, protocol_name="range",
             leader="i-1", member_id="i-1", skip_assignment=True,
             members=(JoinGroupMember("i-1", "i", Subscription(("t",))),))
    sync = h.req(SyncGroupRequest)
    assert isinstance(sync, SyncGroupRequest) and sync.assignments == ()
    assert sync.group_instance_id == "i"


def test_eager_sticky_leader_reads_previous_assignments_from_user_data() -> None:
    h = Harness(**{"partition.assignment.strategy": "sticky"})
    h.joined(assignment=(T2,))
    h.advance(3_000)
    h.answer(HeartbeatRequest, HeartbeatResponse, error=Errors.REBALANCE_IN_PROGRESS)
    join = h.req(JoinGroupRequest)
    assert isinstance(join, JoinGroupRequest)
    (name, sub), = join.protocols
    assert name == "sticky" and sub.owned_partitions == ()  # EAGER revoked everything
    assert sub.user_data is not None
    other = Subscription(("t",))
    h.answer(JoinGroupRequest, JoinGroupResponse, generation_id=2, protocol_name="sticky",
             leader="me-1", member_id="me-1",
             members=(JoinGroupMember("me-1", None, sub), JoinGroupMember("a-0", None, other),
                      JoinGroupMember("b-0", None, other)))
    sync = h.req(SyncGroupRequest)
    assert isinstance(sync, SyncGroupRequest)
    assert dict(sync.assignments)["me-1"] == Assignment((T2,))  # stuck to its old partition


# ------------------------------------------------------------------------ heartbeats (B4)


def test_heartbeats_every_interval_once_joined() -> None:
    h = Harness()
    h.start()
    h.find()
    h.advance(10_000)
    assert not h.has(HeartbeatRequest)  # not joined: the heartbeat thread is disabled
    h.join_as_follower()
    h.advance(2_999)
    assert not h.has(HeartbeatRequest)
    h.advance(1)
    hb = h.req(HeartbeatRequest)
    assert isinstance(hb, HeartbeatRequest)
    assert (hb.generation_id, hb.member_id) == (1, "me-1")
    h.answer(HeartbeatRequest, HeartbeatResponse)
    h.advance(3_000)
    assert h.has(HeartbeatRequest)


def test_rebalance_in_progress_makes_an_eager_member_commit_revoke_all_and_rejoin() -> None:
    h = Harness()
    h.joined(assignment=(T0, T1))
    h.member.consumed(T0, 42)
    h.advance(3_000)
    h.answer(HeartbeatRequest, HeartbeatResponse, error=Errors.REBALANCE_IN_PROGRESS)
    # onJoinPrepare: the fetch stops, the commit goes out, JoinGroup waits for it.
    commit = h.req(OffsetCommitRequest)
    assert isinstance(commit, OffsetCommitRequest)
    assert (commit.generation_id_or_member_epoch, commit.member_id, dict(commit.offsets)) == (
        1, "me-1", {T0: 42})
    assert stops(h) == [(T0, T1)]
    assert not h.has(JoinGroupRequest)
    h.answer(OffsetCommitRequest, OffsetCommitResponse, partition_errors={T0: Errors.NONE})
    assert h.last(K.OFFSETS_COMMITTED).fields["offset_end"] == 42
    assert h.last(K.PARTITIONS_REVOKED).fields["partitions"] == "t:0,t:1"
    assert h.member.owned == frozenset()
    join = h.req(JoinGroupRequest)
    assert isinstance(join, JoinGroupRequest) and join.member_id == "me-1"


def test_illegal_generation_resets_the_generation_keeps_the_id_and_loses_partitions() -> None:
    h = Harness(**{"enable.auto.commit": False})
    h.joined()
    h.advance(3_000)
    h.answer(HeartbeatRequest, HeartbeatResponse, error=Errors.ILLEGAL_GENERATION)
    assert h.member.generation.generation_id == -1 and h.member.member_id == "me-1"
    assert h.last(K.PARTITIONS_LOST).fields["partitions"] == "t:0,t:1"
    assert K.PARTITIONS_REVOKED not in h.kinds()
    join = h.req(JoinGroupRequest)
    assert isinstance(join, JoinGroupRequest) and join.member_id == "me-1"


def test_unknown_member_id_resets_the_generation_and_the_id() -> None:
    h = Harness(**{"enable.auto.commit": False})
    h.joined()
    h.advance(3_000)
    h.answer(HeartbeatRequest, HeartbeatResponse, error=Errors.UNKNOWN_MEMBER_ID)
    assert h.member.member_id == ""
    join = h.req(JoinGroupRequest)
    assert isinstance(join, JoinGroupRequest) and join.member_id == ""
    assert K.PARTITIONS_LOST in h.kinds()


def test_fenced_instance_id_is_fatal() -> None:
    h = Harness(**{"group.instance.id": "i"})
    h.joined(member_id="i-1")
    h.advance(3_000)
    h.answer(HeartbeatRequest, HeartbeatResponse, error=Errors.FENCED_INSTANCE_ID)
    assert h.member.failed == "FENCED_INSTANCE_ID" and h.member.closed
    assert h.last(K.CONSUMER_STOPPED).fields["reason"] == "fatal:FENCED_INSTANCE_ID"
    assert h.last(K.PARTITIONS_LOST).fields["partitions"] == "t:0,t:1"
    assert stops(h) == [(T0, T1)]
    h.pending.clear()
    h.advance(60_000)
    assert h.pending == [] and h.member.next_deadline() is None


def test_stale_generation_heartbeat_error_is_ignored() -> None:
    h = Harness()
    h.joined()
    h.advance(3_000)
    hb = h.req(HeartbeatRequest)
    h.pending.remove(hb)
    h.member.generation = type(h.member.generation)(2, "me-1", "range")  # moved on meanwhile
    h.take(h.member.on_response(h.now, HeartbeatResponse(hb.corr, Errors.ILLEGAL_GENERATION)))
    assert h.member.generation.generation_id == 2
    assert not h.has(JoinGroupRequest)


@pytest.mark.parametrize("err", [Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE])
def test_coordinator_errors_send_the_member_to_rediscover(err: Errors) -> None:
    h = Harness()
    h.joined()
    h.advance(3_000)
    h.answer(HeartbeatRequest, HeartbeatResponse, error=err)
    assert h.member.coordinator is None
    assert h.has(FindCoordinatorRequest)
    h.find(node=9)
    h.advance(100)
    hb = [r for r in h.pending if isinstance(r, HeartbeatRequest)]
    assert hb and h.member.coordinator == 9
    assert h.member.state is MemberState.STABLE  # still a member of the same generation


def test_no_heartbeat_answer_for_the_session_timeout_marks_the_coordinator_unknown() -> None:
    h = Harness(**{"request.timeout.ms": 100_000, "session.timeout.ms": 10_000})
    h.joined()
    h.advance(9_999)
    assert h.member.coordinator == 5
    h.advance(1)
    assert h.member.coordinator is None and h.has(FindCoordinatorRequest)
    last = h.last(K.REQUEST_ERROR).fields
    assert (last["reason"], last["detail"]) == (
        "COORDINATOR_NOT_AVAILABLE", "session timed out without receiving a heartbeat response")


def test_an_unanswered_request_times_out_and_the_coordinator_is_rediscovered() -> None:
    h = Harness()
    h.joined()
    h.advance(3_000)  # heartbeat sent, never answered
    h.advance(29_999)
    assert h.member.coordinator == 5
    h.advance(1)
    timed_out = [e for e in h.events if e.kind is K.REQUEST_ERROR
                 and e.fields["reason"] == "REQUEST_TIMED_OUT"]
    assert [e.fields["detail"] for e in timed_out] == ["heartbeat"]
    assert h.member.coordinator is None


def test_join_group_waits_the_rebalance_timeout_plus_five_seconds() -> None:
    h = Harness(**{"max.poll.interval.ms": 60_000})
    h.start()
    h.find()
    h.advance(64_999)
    assert h.member.coordinator == 5
    h.advance(1)
    assert h.member.coordinator is None


# ------------------------------------------------------------------------- commits (B5)


def test_auto_commit_every_interval_with_the_current_generation() -> None:
    h = Harness(**{"auto.commit.interval.ms": 5_000})
    h.joined(generation=7)
    h.member.consumed(T0, 3)
    h.member.consumed(("other", 0), 9)  # not owned: ignored
    h.advance(5_000)
    commit = h.req(OffsetCommitRequest)
    assert isinstance(commit, OffsetCommitRequest)
    assert (commit.generation_id_or_member_epoch, dict(commit.offsets)) == (7, {T0: 3})
    h.answer(OffsetCommitRequest, OffsetCommitResponse, partition_errors={T0: Errors.NONE})
    ok = h.last(K.OFFSETS_COMMITTED)
    assert (ok.fields["partition"], ok.fields["offset_end"], ok.fields["reason"]) == (0, 3, "auto")


@pytest.mark.parametrize(("err", "member_id", "exception"), [
    (Errors.ILLEGAL_GENERATION, "me-1", "CommitFailedException"),
    (Errors.UNKNOWN_MEMBER_ID, "", "CommitFailedException"),
])
def test_rejected_commit_is_a_commit_failure_and_resets_the_member(
    err: Errors, member_id: str, exception: str
) -> None:
    h = Harness()
    h.joined()
    h.member.consumed(T1, 8)
    h.advance(5_000)
    h.answer(OffsetCommitRequest, OffsetCommitResponse, error=err, partition_errors={T1: err})
    failed = [e for e in h.events if e.kind is K.COMMIT_FAILED]
    assert failed[0].fields["reason"] == err.name
    assert failed[0].fields["detail"] == f"{exception} (auto)"
    # The rejoin's own commit then fails locally: no longer in an active group.
    assert failed[1].fields["detail"] == "CommitFailedException (rebalance)"
    assert h.member.member_id == member_id
    assert h.member.generation.generation_id == -1
    assert h.last(K.PARTITIONS_LOST).fields["partitions"] == "t:0,t:1"


def test_commit_answered_rebalance_in_progress_makes_the_member_rejoin() -> None:
    h = Harness()
    h.joined()
    h.member.consumed(T1, 8)
    h.advance(5_000)
    h.answer(OffsetCommitRequest, OffsetCommitResponse, error=Errors.REBALANCE_IN_PROGRESS,
             partition_errors={T1: Errors.REBALANCE_IN_PROGRESS})
    assert h.last(K.COMMIT_FAILED).fields["detail"] == "RebalanceInProgressException (auto)"
    assert h.member.generation.generation_id == 1  # not reset
    assert h.member.rejoin_needed


def test_failed_pre_rebalance_commit_is_retried_before_joining() -> None:
    h = Harness()
    h.joined()
    h.member.consumed(T0, 4)
    h.advance(3_000)
    h.answer(HeartbeatRequest, HeartbeatResponse, error=Errors.REBALANCE_IN_PROGRESS)
    h.answer(OffsetCommitRequest, OffsetCommitResponse,
             error=Errors.COORDINATOR_LOAD_IN_PROGRESS,
             partition_errors={T0: Errors.COORDINATOR_LOAD_IN_PROGRESS})
    assert not h.has(JoinGroupRequest) and not h.has(OffsetCommitRequest)
    h.advance(100)
    h.answer(OffsetCommitRequest, OffsetCommitResponse, partition_errors={T0: Errors.NONE})
    assert h.has(JoinGroupRequest)


# ------------------------------------------------------------- poll timeout and close (B5, B9)


def test_poll_timeout_sends_leave_group_and_the_next_poll_loses_and_rejoins() -> None:
    h = Harness(**{"max.poll.interval.ms": 20_000})
    h.joined()
    h.take(h.member.app_processing(h.now))
    for _ in range(6):
        h.advance(3_000)
        if h.has(HeartbeatRequest):
            h.answer(HeartbeatRequest, HeartbeatResponse)
    h.advance(2_000)  # 20 s since the application left poll()
    leave = h.req(LeaveGroupRequest)
    assert isinstance(leave, LeaveGroupRequest)
    assert leave.members == (("me-1", None),)
    assert leave.reason == "consumer poll timeout has expired."
    assert h.member.state is MemberState.UNJOINED
    assert h.member.owned == {T0, T1}  # until the application polls again
    assert not h.has(JoinGroupRequest)
    h.take(h.member.app_polled(h.now))
    assert h.last(K.PARTITIONS_LOST).fields["partitions"] == "t:0,t:1"
    join = h.req(JoinGroupRequest)
    assert isinstance(join, JoinGroupRequest) and join.member_id == ""


def test_static_member_poll_timeout_sends_no_leave_group() -> None:
    h = Harness(**{"max.poll.interval.ms": 20_000, "group.instance.id": "i"})
    h.joined(member_id="i-1")
    h.take(h.member.app_processing(h.now))
    h.advance(21_000)
    assert not h.has(LeaveGroupRequest)
    assert h.member.generation.generation_id == -1


def test_a_busy_application_defers_the_rejoin_until_it_polls() -> None:
    h = Harness()
    h.joined()
    h.take(h.member.app_processing(h.now))
    h.advance(3_000)
    h.answer(HeartbeatRequest, HeartbeatResponse, error=Errors.REBALANCE_IN_PROGRESS)
    h.advance(10_000)
    assert not h.has(JoinGroupRequest) and not h.has(OffsetCommitRequest)
    assert stops(h) == []  # still processing its partitions
    h.take(h.member.app_polled(h.now))
    assert h.has(OffsetCommitRequest) or h.has(JoinGroupRequest)


def test_dynamic_close_commits_revokes_and_leaves() -> None:
    h = Harness()
    h.joined()
    h.member.consumed(T0, 5)
    h.take(h.member.close(h.now))
    assert not h.has(LeaveGroupRequest)  # waits for the commit
    h.answer(OffsetCommitRequest, OffsetCommitResponse, partition_errors={T0: Errors.NONE})
    assert h.has(LeaveGroupRequest)
    assert h.last(K.PARTITIONS_REVOKED).fields["partitions"] == "t:0,t:1"
    assert h.kinds()[-1] is K.CONSUMER_STOPPED and h.member.closed
    h.answer(LeaveGroupRequest, LeaveGroupResponse)
    assert h.member.next_deadline() is None


def test_static_close_sends_no_leave_group() -> None:
    h = Harness(**{"group.instance.id": "i"})
    h.joined(member_id="i-1")
    h.take(h.member.close(h.now))
    assert not h.has(LeaveGroupRequest) and h.member.closed
    assert h.last(K.PARTITIONS_REVOKED).fields["partitions"] == "t:0,t:1"


def test_close_gives_up_on_an_unanswered_commit_after_its_timeout() -> None:
    h = Harness(**{"request.timeout.ms": 100_000, "session.timeout.ms": 60_000})
    h.joined()
    h.member.consumed(T0, 5)
    h.take(h.member.close(h.now))
    h.advance(29_999)
    assert not h.member.closed
    h.advance(1)
    assert h.member.closed and h.has(LeaveGroupRequest)


# ------------------------------------------------------------------------ cooperative (B7)


def test_cooperative_member_keeps_its_partitions_and_revokes_only_what_moved() -> None:
    h = Harness(**{"partition.assignment.strategy": "cooperative-sticky"})
    assert h.member.protocol == "COOPERATIVE"
    h.joined(assignment=(T0, T1, T2), committed={T0: 1, T1: 2, T2: 3})
    h.member.consumed(T1, 5)
    h.advance(3_000)
    h.answer(HeartbeatRequest, HeartbeatResponse, error=Errors.REBALANCE_IN_PROGRESS)
    h.answer(OffsetCommitRequest, OffsetCommitResponse,
             partition_errors={tp: Errors.NONE for tp in (T0, T1, T2)})
    join = h.req(JoinGroupRequest)
    assert isinstance(join, JoinGroupRequest)
    assert join.protocols[0][1].owned_partitions == (T0, T1, T2)
    assert join.protocols[0][1].generation_id == 1
    assert stops(h) == [] and K.PARTITIONS_REVOKED not in h.kinds()
    h.answer(JoinGroupRequest, JoinGroupResponse, generation_id=2,
             protocol_name="cooperative-sticky", leader="other", member_id="me-1")
    h.answer(SyncGroupRequest, SyncGroupResponse, assignment=Assignment((T0, T2)))
    assert stops(h) == [(T1,)]
    assert h.last(K.PARTITIONS_REVOKED).fields["partitions"] == "t:1"
    assert h.member.owned == {T0, T2}
    # "need to revoke partitions and re-join": a second JoinGroup, owning only T0 and T2.
    assert h.last(K.REBALANCE_TRIGGERED).fields["reason"] == "need to revoke partitions and re-join"
    h.answer(OffsetCommitRequest, OffsetCommitResponse,
             partition_errors={tp: Errors.NONE for tp in (T0, T2)})
    join2 = h.req(JoinGroupRequest)
    assert isinstance(join2, JoinGroupRequest)
    assert join2.protocols[0][1].owned_partitions == (T0, T2)


def test_leader_refuses_a_cooperative_assignment_that_moves_an_owned_partition() -> None:
    h = Harness(assignors=[StandInCooperative()])
    assert h.member.protocol == "COOPERATIVE"
    h.start()
    h.find()
    h.answer(JoinGroupRequest, JoinGroupResponse, generation_id=5, protocol_name="bad-cooperative",
             leader="me-1", member_id="me-1",
             members=(JoinGroupMember("a-0", None, Subscription(("t",))),
                      JoinGroupMember("me-1", None, Subscription(("t",), (T0,), 4))))
    assert h.member.failed == "IllegalStateException"
    assert not h.has(SyncGroupRequest)


def test_leader_skips_the_check_for_the_built_in_cooperative_sticky_assignor() -> None:
    calls: list[object] = []
    cfg = ClassicConsumerConfig.from_kafka({"partition.assignment.strategy": "cooperative-sticky"})
    m = ClassicMember(member="c", group="g", topics=("t",), config=cfg,
                      partitions_per_topic={"t": 3},
                      validate_cooperative=lambda owned, assigned: calls.append(1))
    outs = m.start(0)
    find = next(o for o in outs if isinstance(o, FindCoordinatorRequest))
    outs = m.on_response(0, FindCoordinatorResponse(find.corr, node_id=1))
    join = next(o for o in outs if isinstance(o, JoinGroupRequest))
    outs = m.on_response(0, JoinGroupResponse(
        join.corr, generation_id=1, protocol_name="cooperative-sticky", leader="c-1",
        member_id="c-1", members=(JoinGroupMember("c-1", None, Subscription(("t",))),)))
    assert any(isinstance(o, SyncGroupRequest) for o in outs)
    assert calls == []


# ------------------------------------------------------------------- other coordinator errors


def test_not_coordinator_on_join_rediscovers_and_retries() -> None:
    h = Harness()
    h.start()
    h.find(node=1)
    h.answer(JoinGroupRequest, JoinGroupResponse, error=Errors.NOT_COORDINATOR)
    assert h.member.coordinator is None
    h.find(node=2)
    h.advance(100)
    assert h.has(JoinGroupRequest) and h.member.coordinator == 2


@pytest.mark.parametrize("err", [Errors.INCONSISTENT_GROUP_PROTOCOL,
                                 Errors.INVALID_SESSION_TIMEOUT,
                                 Errors.GROUP_MAX_SIZE_REACHED])
def test_fatal_join_errors_end_the_member(err: Errors) -> None:
    h = Harness()
    h.start()
    h.find()
    h.answer(JoinGroupRequest, JoinGroupResponse, error=err)
    assert h.member.failed is not None and h.member.closed


def test_sync_rebalance_in_progress_rejoins_at_once() -> None:
    h = Harness()
    h.start()
    h.find()
    h.answer(JoinGroupRequest, JoinGroupResponse, generation_id=1, protocol_name="range",
             leader="other", member_id="me-1")
    h.answer(SyncGroupRequest, SyncGroupResponse, error=Errors.REBALANCE_IN_PROGRESS)
    join = h.req(JoinGroupRequest)
    assert isinstance(join, JoinGroupRequest) and join.member_id == "me-1"


def test_leader_rejoins_when_the_topic_metadata_changes() -> None:
    h = Harness(**{"enable.auto.commit": False})
    h.start()
    h.find()
    h.answer(JoinGroupRequest, JoinGroupResponse, generation_id=1, protocol_name="range",
             leader="me-1", member_id="me-1",
             members=(JoinGroupMember("me-1", None, Subscription(("t",))),))
    h.answer(SyncGroupRequest, SyncGroupResponse, assignment=Assignment((T0, T1, T2)))
    assert not h.has(JoinGroupRequest)
    h.take(h.member.update_metadata(h.now, {"t": 4}))
    assert h.last(K.REBALANCE_TRIGGERED).fields["reason"] == "cached metadata has changed"
    assert h.has(JoinGroupRequest)


# ------------------------------------------------------------------ client config (B6)


def test_client_defaults_follow_the_kafka_version() -> None:
    old = ClassicConsumerConfig.for_version("2.8")
    new = ClassicConsumerConfig.for_version("3.0")
    assert (old.session_timeout_ms, new.session_timeout_ms) == (10_000, 45_000)
    assert old.partition_assignment_strategy == ("range",)
    assert new.partition_assignment_strategy == ("range", "cooperative-sticky")
    for cfg in (old, new):
        assert (cfg.heartbeat_interval_ms, cfg.max_poll_interval_ms, cfg.rebalance_timeout_ms,
                cfg.enable_auto_commit, cfg.auto_commit_interval_ms) == (
            3_000, 300_000, 300_000, True, 5_000)
    assert ClassicConsumerConfig.for_version("1.1").request_timeout_ms == 305_000
    assert ClassicConsumerConfig().session_timeout_ms == 45_000  # 3.9's defaults
    cfg = ClassicConsumerConfig.from_kafka({
        "partition.assignment.strategy":
            "org.apache.kafka.clients.consumer.RoundRobinAssignor,StickyAssignor",
        "enable.auto.commit": "false", "group.instance.id": "host-1",
    })
    assert cfg.partition_assignment_strategy == ("roundrobin", "sticky")
    assert not cfg.enable_auto_commit and cfg.is_static


@pytest.mark.parametrize("props", [
    {"partition.assignment.strategy": "fancy"},
    {"group.instance.id": "x", "kafka.version": "2.2"},
    {"partition.assignment.strategy": "cooperative-sticky", "kafka.version": "2.3"},
    {"heartbeat.interval.ms": 50_000},
    {"session.timeout.ms": "soon"},
    {"enable.auto.commit": "maybe"},
    {"kafka.version": "0.10.0"},
    {"partition.assignment.strategy": "range,range"},
])
def test_bad_client_config_is_refused(props: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        ClassicConsumerConfig.from_kafka(props)


def test_assignors_without_a_common_protocol_are_refused() -> None:
    class OnlyCooperative(StandInCooperative):
        name = "c"

    class OnlyEager(StandInCooperative):
        name = "e"
        supported_protocols = ("EAGER",)

    with pytest.raises(ValueError, match="commonly supported"):
        Harness(assignors=[OnlyCooperative(), OnlyEager()])


def test_a_dropped_connection_fails_the_request_at_once_and_the_coordinator_is_rediscovered(
) -> None:
    h = Harness()
    h.joined()
    h.advance(3_000)  # a heartbeat is in flight to the coordinator, whose broker dies
    hb = h.req(HeartbeatRequest)
    h.pending.remove(hb)
    h.take(h.member.request_failed(h.now, hb.corr))
    assert h.member.coordinator is None and h.has(FindCoordinatorRequest)
    assert h.last(K.REQUEST_ERROR).fields["detail"] == "disconnected"
    assert h.member.state is MemberState.STABLE  # partitions kept: only the link is gone
    # A FindCoordinator to a dead broker is retried after retry.backoff.ms.
    find = h.req(FindCoordinatorRequest)
    h.pending.remove(find)
    h.take(h.member.request_failed(h.now, find.corr))
    assert not h.has(FindCoordinatorRequest)
    h.advance(100)
    assert h.has(FindCoordinatorRequest)
    # An answered (unknown) correlation id changes nothing.
    assert h.member.request_failed(h.now, 123_456) == []
