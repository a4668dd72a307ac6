"""The KIP-848 group coordinator on a fake clock (kafka-protocols.md C2-C6).

Modelled on Kafka's ``GroupMetadataManagerTest`` with its
``GroupMetadataManagerTestContext`` and ``MockPartitionAssignor``: each test
prepares the target assignment the assignor will return, sends hand-made
ConsumerGroupHeartbeat, OffsetCommit and OffsetFetch requests, and checks the
responses, the member and partition epochs, the group state and the events.
``reconcile`` (the ``CurrentAssignmentBuilder`` port) is also tested on its
own, as ``CurrentAssignmentBuilderTest`` does.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

import pytest

from emulator.events import EventKind as K
from emulator.modern.assignors import GroupSpec, ServerAssignment, ServerAssignor, server_assignor
from emulator.modern.config import GroupCoordinatorConfig
from emulator.modern.consumer_coordinator import (
    ConsumerGroupCoordinator,
    GroupMember,
    GroupState,
    MemberState,
    ProtocolError,
    make_consumer_coordinator,
    reconcile,
)
from emulator.modern.errors import Errors
from emulator.modern.messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    Emit,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatRequest,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    TopicPartition,
)
from tests.group_context import GroupTestContext

GROUP = "grp"


def foo(*ps: int) -> frozenset[TopicPartition]:
    return frozenset(("foo", p) for p in ps)


def bar(*ps: int) -> frozenset[TopicPartition]:
    return frozenset(("bar", p) for p in ps)


class MockAssignor:
    """``MockPartitionAssignor``: returns the prepared assignment, records its input."""

    def __init__(self) -> None:
        self.prepared: dict[str, frozenset[TopicPartition]] = {}
        self.calls: list[tuple[str, GroupSpec, dict[str, int]]] = []
        self.current_name = "uniform"

    @property
    def name(self) -> str:
        return self.current_name

    def assign(self, group_spec: GroupSpec, topics: Mapping[str, int]) -> ServerAssignment:
        self.calls.append((self.current_name, group_spec, dict(topics)))
        return {m: self.prepared.get(m, frozenset()) for m in group_spec.members}


class Ctx(GroupTestContext):
    """``GroupMetadataManagerTestContext`` for one consumer group."""

    def __init__(self, topics: Mapping[str, int] | None = None, **kw: object) -> None:
        super().__init__()
        self.assignor = MockAssignor()

        def lookup(name: str) -> ServerAssignor:
            self.assignor.current_name = name
            return self.assignor

        self.coord = ConsumerGroupCoordinator(
            GROUP,
            topics=topics if topics is not None else {"foo": 6, "bar": 3},
            rng=random.Random(42),
            node_id=7,
            assignor_lookup=lookup,
            **kw,  # type: ignore[arg-type]
        )
        self._corr = 0

    @property
    def events(self) -> list[Emit]:
        return self.emits()

    def prepare(self, **assignment: frozenset[TopicPartition]) -> None:
        self.assignor.prepared = dict(assignment)

    def heartbeat(self, **fields: object) -> ConsumerGroupHeartbeatResponse:
        self._corr += 1
        req = ConsumerGroupHeartbeatRequest(self._corr, GROUP, **fields)  # type: ignore[arg-type]
        resp = self.request(req)
        assert isinstance(resp, ConsumerGroupHeartbeatResponse)
        return resp

    def join(
        self,
        member_id: str,
        topics: tuple[str, ...] = ("foo", "bar"),
        **fields: object,
    ) -> ConsumerGroupHeartbeatResponse:
        base: dict[str, object] = {
            "member_id": member_id,
            "member_epoch": 0,
            "rebalance_timeout_ms": 5000,
            "subscribed_topic_names": topics,
            "topic_partitions": (),
        }
        base.update(fields)
        return self.heartbeat(**base)

    def request(self, req: object) -> object:
        """Send ``req`` now; its response (the events it caused are recorded)."""
        out = self.coord.handle(self.now, req)  # type: ignore[arg-type]
        self.record("coordinator", [e for e in out[1:] if isinstance(e, Emit)])
        return out[0]

    def sleep(self, ms: float) -> list[Emit]:
        """Move the clock by ``ms``, then poll once; the events of that poll."""
        self.clock.advance(ms)
        out = [e for e in self.coord.poll(self.now) if isinstance(e, Emit)]
        self.record("coordinator", out)
        return out

    def member(self, member_id: str) -> GroupMember:
        return self.coord.members[member_id]

    def kinds(self, kind: K) -> list[Mapping[str, object]]:
        return [r.emit.fields for r in self.emitted(kind)]


def state(ctx: Ctx) -> GroupState:
    """The group state (a call, so that mypy does not narrow it across requests)."""
    return ctx.coord.state


def ok(resp: ConsumerGroupHeartbeatResponse) -> ConsumerGroupHeartbeatResponse:
    assert resp.error is Errors.NONE, resp.error_message
    return resp


def assignment(resp: ConsumerGroupHeartbeatResponse) -> frozenset[TopicPartition] | None:
    return None if resp.assignment is None else frozenset(resp.assignment)


def two_member_group() -> Ctx:
    """m1 owns foo-0..5 and bar-0..2 at epoch 1; m2 has just joined at epoch 2 (target
    m1: foo 0-2 + bar 0-1, m2: foo 3-5 + bar 2), nothing revoked yet."""
    ctx = Ctx()
    ctx.prepare(m1=foo(0, 1, 2, 3, 4, 5) | bar(0, 1, 2))
    ok(ctx.join("m1"))
    ctx.prepare(m1=foo(0, 1, 2) | bar(0, 1), m2=foo(3, 4, 5) | bar(2))
    ok(ctx.join("m2"))
    return ctx


# ------------------------------------------------------------------------- joining


def test_first_heartbeat_creates_the_member_with_a_generated_id() -> None:
    ctx = Ctx()
    ctx.prepare()  # the member id is unknown yet: the mock gives everyone nothing
    resp = ok(ctx.join(""))
    assert resp.member_id is not None and len(resp.member_id) == 22  # Kafka's base64 Uuid
    assert resp.member_epoch == 1 and resp.heartbeat_interval_ms == 5000
    assert resp.assignment == ()
    assert ctx.coord.group_epoch == ctx.coord.assignment_epoch == 1
    assert ctx.kinds(K.MEMBER_JOINED) == [
        {"group": GROUP, "member_id": resp.member_id, "reason": "new"}
    ]
    assert [f["state"] for f in ctx.kinds(K.GROUP_STATE_CHANGED)] == ["Stable"]


def test_member_ids_are_drawn_from_the_injected_rng() -> None:
    ids = [ok(Ctx().join("")).member_id for _ in range(2)]
    assert ids[0] == ids[1]
    other = ConsumerGroupCoordinator(GROUP, topics={"foo": 1}, rng=random.Random(1))
    out = other.handle(
        0,
        ConsumerGroupHeartbeatRequest(
            1, GROUP, rebalance_timeout_ms=1, subscribed_topic_names=("foo",), topic_partitions=()
        ),
    )
    assert isinstance(out[0], ConsumerGroupHeartbeatResponse)
    assert out[0].member_id != ids[0]


def test_join_gets_the_whole_target_when_partitions_are_free() -> None:
    ctx = Ctx()
    ctx.prepare(m1=foo(0, 1) | bar(0))
    resp = ok(ctx.join("m1"))
    assert (resp.member_epoch, assignment(resp)) == (1, foo(0, 1) | bar(0))
    m = ctx.member("m1")
    assert (m.state, m.member_epoch, m.previous_member_epoch) == (MemberState.STABLE, 1, 0)
    assert ctx.coord.partition_epochs == {tp: 1 for tp in foo(0, 1) | bar(0)}
    spec = ctx.assignor.calls[-1][1]
    assert spec.members["m1"].subscribed_topics == {"foo", "bar"}


# ---------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"member_id": "", "member_epoch": 1}, "MemberId can't be empty."),
        ({"member_id": "", "member_epoch": -1}, "MemberId can't be empty."),
        ({"member_id": "m", "member_epoch": 1, "instance_id": " "}, "InstanceId can't be empty."),
        ({"member_id": "m", "member_epoch": 1, "rack_id": ""}, "RackId can't be empty."),
        (
            {"member_epoch": 0, "subscribed_topic_names": ("foo",), "topic_partitions": ()},
            "RebalanceTimeoutMs must be provided in first request.",
        ),
        (
            {
                "member_epoch": 0,
                "rebalance_timeout_ms": 1,
                "subscribed_topic_names": ("foo",),
                "topic_partitions": (("foo", 0),),
            },
            "TopicPartitions must be empty when (re-)joining.",
        ),
        (
            {"member_epoch": 0, "rebalance_timeout_ms": 1, "subscribed_topic_names": ("foo",)},
            "TopicPartitions must be empty when (re-)joining.",
        ),
        (
            {"member_epoch": 0, "rebalance_timeout_ms": 1, "topic_partitions": ()},
            "SubscribedTopicNames must be set in first request.",
        ),
        ({"member_id": "m", "member_epoch": -2}, "InstanceId can't be null."),
        ({"member_id": "m", "member_epoch": -3}, "MemberEpoch is invalid."),
    ],
)
def test_invalid_requests_are_rejected(fields: dict[str, object], message: str) -> None:
    ctx = Ctx()
    resp = ctx.heartbeat(**fields)
    assert (resp.error, resp.error_message) == (Errors.INVALID_REQUEST, message)
    assert ctx.coord.members == {} and ctx.coord.group_epoch == 0


def test_unknown_server_assignor_is_unsupported() -> None:
    resp = Ctx().join("m1", server_assignor="sticky")
    assert resp.error is Errors.UNSUPPORTED_ASSIGNOR
    assert resp.error_message is not None and "uniform, range" in resp.error_message


def test_full_group_refuses_new_members_but_not_its_own() -> None:
    ctx = Ctx(max_size=1)
    ok(ctx.join("m1"))
    assert ctx.join("m2").error is Errors.GROUP_MAX_SIZE_REACHED
    assert ctx.join("").error is Errors.GROUP_MAX_SIZE_REACHED
    ok(ctx.heartbeat(member_id="m1", member_epoch=1))


def test_unknown_member_id() -> None:
    ctx = Ctx()
    assert ctx.heartbeat(member_id="ghost", member_epoch=3).error is Errors.UNKNOWN_MEMBER_ID
    assert ctx.heartbeat(member_id="ghost", member_epoch=-1).error is Errors.UNKNOWN_MEMBER_ID


def test_request_for_another_group_or_an_unavailable_coordinator() -> None:
    ctx = Ctx()
    resp = ctx.request(ConsumerGroupHeartbeatRequest(1, "other", member_id="m", member_epoch=1))
    assert isinstance(resp, ConsumerGroupHeartbeatResponse)
    assert resp.error is Errors.NOT_COORDINATOR
    ctx.coord.set_unavailable(Errors.COORDINATOR_NOT_AVAILABLE)
    assert ctx.join("m1").error is Errors.COORDINATOR_NOT_AVAILABLE
    commit = ctx.request(OffsetCommitRequest(2, GROUP, offsets={("foo", 0): 1}))
    assert isinstance(commit, OffsetCommitResponse)
    assert commit.partition_errors == {("foo", 0): Errors.COORDINATOR_NOT_AVAILABLE}
    found = ctx.request(FindCoordinatorRequest(3, GROUP))
    assert found == FindCoordinatorResponse(3, node_id=7)
    ctx.coord.set_unavailable(None)
    ok(ctx.join("m1"))
    with pytest.raises(ValueError, match="not a coordinator error"):
        ctx.coord.set_unavailable(Errors.UNKNOWN_MEMBER_ID)
    with pytest.raises(TypeError):
        ctx.request(HeartbeatRequest(4, GROUP))


# ------------------------------------------------------------------- member epochs


def test_member_epoch_validation() -> None:
    """``throwIfConsumerGroupMemberEpochIsInvalid``, including the lost-response tolerance."""
    ctx = two_member_group()
    # m1 is at epoch 1 (previous 0): revoking towards epoch 2.
    fenced = ctx.heartbeat(member_id="m1", member_epoch=2)
    assert fenced.error is Errors.FENCED_MEMBER_EPOCH
    assert fenced.error_message is not None and "greater member epoch (2)" in fenced.error_message
    # m1 revokes and moves to epoch 2 (previous 1) ...
    ok(ctx.heartbeat(member_id="m1", member_epoch=1, topic_partitions=()))
    ok(ctx.heartbeat(member_id="m1", member_epoch=1, topic_partitions=tuple(foo(0, 1, 2))))
    assert (ctx.member("m1").member_epoch, ctx.member("m1").previous_member_epoch) == (2, 1)
    # ... and the response was lost: epoch 1 with a subset of the assignment is accepted.
    resp = ok(ctx.heartbeat(member_id="m1", member_epoch=1, topic_partitions=tuple(foo(0))))
    assert resp.member_epoch == 2
    # Not a subset, or no owned partitions, or not the previous epoch: fenced.
    for fields in (
        {"member_epoch": 1, "topic_partitions": tuple(foo(3))},
        {"member_epoch": 1},
        {"member_epoch": 1, "topic_partitions": tuple(foo(0, 4))},
    ):
        resp = ctx.heartbeat(member_id="m1", **fields)
        assert resp.error is Errors.FENCED_MEMBER_EPOCH, fields
    ctx.coord.members["m1"] = ctx.member("m1").with_epoch(5)  # previous 2, current 5
    ctx.coord.partition_epochs.update({tp: 5 for tp in ctx.member("m1").assigned})
    resp = ctx.heartbeat(member_id="m1", member_epoch=1, topic_partitions=())
    assert resp.error is Errors.FENCED_MEMBER_EPOCH
    assert resp.error_message is not None and "smaller member epoch (1)" in resp.error_message
    # A fenced member is not removed and its session is not renewed.
    assert "m1" in ctx.coord.members


def test_existing_member_may_rejoin_with_epoch_zero() -> None:
    """KAFKA-19233: a fenced client rejoins under its member id with epoch 0."""
    ctx = two_member_group()
    ok(ctx.heartbeat(member_id="m2", member_epoch=2))
    epoch = ctx.coord.group_epoch
    resp = ok(ctx.join("m2"))
    assert resp.member_epoch == 2 and assignment(resp) == frozenset()  # full response
    assert ctx.coord.group_epoch == epoch
    assert ctx.kinds(K.MEMBER_JOINED)[-1]["reason"] == "rejoin"


# ---------------------------------------------------------------- group epoch bumps


def test_subscription_change_bumps_the_group_epoch_and_recomputes_the_target() -> None:
    ctx = Ctx()
    ctx.prepare(m1=foo(0, 1, 2, 3, 4, 5) | bar(0, 1, 2))
    ok(ctx.join("m1"))
    calls = len(ctx.assignor.calls)
    ok(ctx.heartbeat(member_id="m1", member_epoch=1, subscribed_topic_names=("bar", "foo")))
    assert ctx.coord.group_epoch == 1 and len(ctx.assignor.calls) == calls  # same set
    ctx.prepare(m1=foo(0, 1, 2, 3, 4, 5))
    resp = ok(ctx.heartbeat(member_id="m1", member_epoch=1, subscribed_topic_names=("foo",)))
    assert ctx.coord.group_epoch == ctx.coord.assignment_epoch == 2
    assert ctx.coord.subscription_metadata == {"foo": 6}
    # bar is revoked first (the member has not reported its owned partitions).
    assert resp.member_epoch == 1 and assignment(resp) == foo(0, 1, 2, 3, 4, 5)
    assert ctx.member("m1").state is MemberState.UNREVOKED_PARTITIONS
    assert ctx.member("m1").pending_revocation == bar(0, 1, 2)
    target = ctx.kinds(K.TARGET_ASSIGNMENT)[-1]
    assert (target["member_id"], target["group_epoch"], target["partitions"]) == (
        "m1",
        2,
        "foo:0,foo:1,foo:2,foo:3,foo:4,foo:5",
    )


def test_new_partitions_bump_the_group_epoch_at_the_next_heartbeat() -> None:
    ctx = Ctx()
    ctx.prepare(m1=foo(0, 1, 2, 3, 4, 5) | bar(0, 1, 2))
    ok(ctx.join("m1"))
    ctx.coord.update_topics(0, {"foo": 6, "bar": 3, "zzz": 9})  # unrelated topic
    ok(ctx.heartbeat(member_id="m1", member_epoch=1))
    assert ctx.coord.group_epoch == 1
    ctx.coord.update_topics(0, {"foo": 8, "bar": 3})
    assert ctx.coord.group_epoch == 1  # nothing happens until a heartbeat
    ctx.prepare(m1=foo(0, 1, 2, 3, 4, 5, 6, 7) | bar(0, 1, 2))
    resp = ok(ctx.heartbeat(member_id="m1", member_epoch=1))
    assert ctx.coord.group_epoch == 2 and resp.member_epoch == 2
    assert assignment(resp) == foo(0, 1, 2, 3, 4, 5, 6, 7) | bar(0, 1, 2)
    assert ctx.assignor.calls[-1][2] == {"bar": 3, "foo": 8}


# ------------------------------------------------------------------ reconciliation


def test_revoke_first_then_assign_once_released() -> None:
    ctx = two_member_group()
    m2 = ctx.member("m2")
    # m2 joined at epoch 2 but everything it targets is still m1's.
    assert (m2.state, m2.member_epoch, m2.assigned) == (
        MemberState.UNRELEASED_PARTITIONS,
        2,
        frozenset(),
    )
    assert state(ctx) is GroupState.RECONCILING

    # m1 heartbeats without owned partitions: told to revoke, epoch unchanged.
    resp = ok(ctx.heartbeat(member_id="m1", member_epoch=1))
    assert (resp.member_epoch, assignment(resp)) == (1, foo(0, 1, 2) | bar(0, 1))
    m1 = ctx.member("m1")
    assert m1.state is MemberState.UNREVOKED_PARTITIONS
    assert m1.pending_revocation == foo(3, 4, 5) | bar(2)
    assert ctx.coord.rebalance_deadline("m1") == 5000
    assert ctx.coord.partition_epochs[("foo", 3)] == 1  # still m1's

    # m2 still cannot get anything.
    resp = ok(ctx.heartbeat(member_id="m2", member_epoch=2))
    assert resp.assignment is None and ctx.member("m2").assigned == frozenset()

    # m1 still reports foo-3: nothing moves.
    still = foo(0, 1, 2, 3) | bar(0, 1)
    resp = ok(ctx.heartbeat(member_id="m1", member_epoch=1, topic_partitions=tuple(still)))
    assert resp.member_epoch == 1 and resp.assignment is None

    # m1 has revoked: epoch 2, stable; the rebalance timer is cancelled.
    kept = foo(0, 1, 2) | bar(0, 1)
    resp = ok(ctx.heartbeat(member_id="m1", member_epoch=1, topic_partitions=tuple(kept)))
    assert (resp.member_epoch, resp.assignment) == (2, None)
    assert ctx.member("m1").state is MemberState.STABLE
    assert ctx.coord.rebalance_deadline("m1") is None
    assert ("foo", 3) not in ctx.coord.partition_epochs

    # m2 now gets its partitions.
    resp = ok(ctx.heartbeat(member_id="m2", member_epoch=2))
    assert assignment(resp) == foo(3, 4, 5) | bar(2)
    assert ctx.member("m2").state is MemberState.STABLE
    assert ctx.coord.partition_epochs[("foo", 3)] == 2
    assert state(ctx) is GroupState.STABLE
    states = [f["state"] for f in ctx.kinds(K.GROUP_STATE_CHANGED)]
    assert states == ["Stable", "Reconciling", "Stable"]


def test_assignment_is_sent_on_a_full_request_even_when_unchanged() -> None:
    ctx = Ctx()
    ctx.prepare(m1=foo(0))
    ok(ctx.join("m1"))
    assert ok(ctx.heartbeat(member_id="m1", member_epoch=1)).assignment is None
    full = ctx.heartbeat(
        member_id="m1",
        member_epoch=1,
        rebalance_timeout_ms=5000,
        subscribed_topic_names=("foo", "bar"),
        topic_partitions=(("foo", 0),),
    )
    assert ok(full).assignment == (("foo", 0),)


def test_group_is_assigning_until_someone_heartbeats() -> None:
    ctx = two_member_group()
    ok(ctx.heartbeat(member_id="m1", member_epoch=1, topic_partitions=()))
    ok(ctx.heartbeat(member_id="m2", member_epoch=2))
    assert state(ctx) is GroupState.STABLE
    ok(ctx.heartbeat(member_id="m1", member_epoch=-1))
    assert ctx.coord.group_epoch == 3 and ctx.coord.assignment_epoch == 2
    assert state(ctx) is GroupState.ASSIGNING
    ctx.prepare(m2=foo(0, 1, 2, 3, 4, 5) | bar(0, 1, 2))
    resp = ok(ctx.heartbeat(member_id="m2", member_epoch=2))
    assert resp.member_epoch == 3 and assignment(resp) == foo(0, 1, 2, 3, 4, 5) | bar(0, 1, 2)
    assert state(ctx) is GroupState.STABLE


# -------------------------------------------------------------------------- timers


def test_session_timeout_fences_and_bumps_the_group_epoch() -> None:
    ctx = two_member_group()
    assert ctx.coord.next_deadline() == 45_000
    ctx.clock.advance(40_000)
    kept = tuple(foo(0, 1, 2) | bar(0, 1))
    ok(ctx.heartbeat(member_id="m1", member_epoch=1, topic_partitions=kept))  # m2 stays silent
    assert ctx.sleep(4_999) == []
    out = ctx.sleep(1)
    assert [(e.kind, e.fields.get("member_id"), e.fields.get("reason")) for e in out] == [
        (K.MEMBER_REMOVED, "m2", "session_timeout"),
        (K.GROUP_STATE_CHANGED, None, "session_timeout"),
    ]
    assert "m2" not in ctx.coord.members and "m2" not in ctx.coord.target_assignment
    assert ctx.coord.group_epoch == 3 and state(ctx) is GroupState.ASSIGNING
    assert ctx.coord.next_deadline() == 85_000
    ctx.sleep(40_000)
    assert ctx.coord.members == {} and state(ctx) is GroupState.EMPTY
    assert ctx.coord.partition_epochs == {}
    assert ctx.coord.next_deadline() is None


def test_rebalance_timeout_fences_a_member_still_at_its_epoch() -> None:
    ctx = two_member_group()
    ok(ctx.heartbeat(member_id="m1", member_epoch=1))  # UNREVOKED, timer armed at 5000
    ctx.sleep(4_000)
    ok(ctx.heartbeat(member_id="m1", member_epoch=1))  # no progress: timer not re-armed
    out = ctx.sleep(1_000)
    assert (out[0].fields.get("member_id"), out[0].fields.get("reason")) == (
        "m1",
        "rebalance_timeout",
    )
    assert ctx.heartbeat(member_id="m1", member_epoch=1).error is Errors.UNKNOWN_MEMBER_ID
    # Its partitions are free now.
    ctx.prepare(m2=foo(0, 1, 2, 3, 4, 5) | bar(0, 1, 2))
    resp = ok(ctx.heartbeat(member_id="m2", member_epoch=2))
    assert assignment(resp) == foo(0, 1, 2, 3, 4, 5) | bar(0, 1, 2)


def test_rebalance_timeout_is_cancelled_when_the_member_revokes_in_time() -> None:
    ctx = two_member_group()
    ok(ctx.heartbeat(member_id="m1", member_epoch=1))
    ctx.sleep(4_999)
    kept = foo(0, 1, 2) | bar(0, 1)
    ok(ctx.heartbeat(member_id="m1", member_epoch=1, topic_partitions=tuple(kept)))
    assert ctx.sleep(10_000) == []
    assert ctx.member("m1").member_epoch == 2


def test_rebalance_timeout_uses_the_latest_timeout_the_member_sent() -> None:
    ctx = two_member_group()
    ok(ctx.heartbeat(member_id="m1", member_epoch=1, rebalance_timeout_ms=9000))
    assert ctx.coord.rebalance_deadline("m1") == 9000


# --------------------------------------------------------------------------- leave


def test_leave_fences_the_member_and_frees_its_partitions() -> None:
    ctx = two_member_group()
    resp = ok(ctx.heartbeat(member_id="m1", member_epoch=-1))
    assert (resp.member_id, resp.member_epoch, resp.assignment) == ("m1", -1, None)
    assert "m1" not in ctx.coord.members and ctx.coord.partition_epochs == {}
    assert ctx.coord.group_epoch == 3
    removed = ctx.kinds(K.MEMBER_REMOVED)[-1]
    assert (removed["member_id"], removed["reason"], removed["generation"]) == ("m1", "leave", 1)
    assert ctx.coord.session_deadline("m1") is None


# -------------------------------------------------------------------------- static


def static_pair() -> Ctx:
    ctx = Ctx()
    ctx.prepare(s1=foo(0, 1, 2) | bar(0, 1), s2=foo(3, 4, 5) | bar(2))
    ok(ctx.join("s1", instance_id="i1"))
    ok(ctx.join("s2", instance_id="i2"))
    ok(ctx.heartbeat(member_id="s1", member_epoch=1, instance_id="i1", topic_partitions=()))
    ok(ctx.heartbeat(member_id="s1", member_epoch=1, instance_id="i1", topic_partitions=()))
    ok(ctx.heartbeat(member_id="s2", member_epoch=2, instance_id="i2"))
    assert state(ctx) is GroupState.STABLE
    return ctx


def test_static_member_leave_keeps_its_assignment_and_partitions() -> None:
    ctx = static_pair()
    epoch = ctx.coord.group_epoch
    resp = ok(ctx.heartbeat(member_id="s1", member_epoch=-2, instance_id="i1"))
    assert (resp.member_id, resp.member_epoch) == ("s1", -2)
    s1 = ctx.member("s1")
    assert s1.member_epoch == -2 and s1.assigned == foo(0, 1, 2) | bar(0, 1)
    assert ctx.coord.partition_epochs[("foo", 0)] == -2  # not free
    assert ctx.coord.group_epoch == epoch
    assert ctx.kinds(K.MEMBER_REMOVED) == []
    assert ctx.kinds(K.GROUP_STATE_CHANGED)[-1]["reason"] == "static_leave"
    assert state(ctx) is GroupState.RECONCILING


def test_static_member_rejoin_takes_over_without_a_group_epoch_bump() -> None:
    ctx = static_pair()
    ok(ctx.heartbeat(member_id="s1", member_epoch=-2, instance_id="i1"))
    epoch, calls = ctx.coord.group_epoch, len(ctx.assignor.calls)
    resp = ok(ctx.join("s1-new", instance_id="i1"))
    assert resp.member_id == "s1-new" and resp.member_epoch == ctx.coord.assignment_epoch
    assert assignment(resp) == foo(0, 1, 2) | bar(0, 1)
    assert ctx.coord.group_epoch == epoch and len(ctx.assignor.calls) == calls
    assert "s1" not in ctx.coord.members
    assert ctx.coord.target_assignment["s1-new"] == foo(0, 1, 2) | bar(0, 1)
    assert ctx.coord.partition_epochs[("foo", 0)] == ctx.coord.assignment_epoch
    assert [(e.kind, e.fields["member_id"], e.fields["reason"]) for e in ctx.events[-3:-1]] == [
        (K.MEMBER_REMOVED, "s1", "static_replace"),
        (K.MEMBER_JOINED, "s1-new", "static_replace"),
    ]
    assert state(ctx) is GroupState.STABLE
    # The old member id is gone for good.
    old = ctx.heartbeat(member_id="s1", member_epoch=2, instance_id="i1")
    assert old.error is Errors.FENCED_INSTANCE_ID


def test_static_member_errors() -> None:
    ctx = static_pair()
    # An active instance id cannot be taken over.
    assert ctx.join("s1-twin", instance_id="i1").error is Errors.UNRELEASED_INSTANCE_ID
    # Another member id with the same instance id is fenced.
    resp = ctx.heartbeat(member_id="intruder", member_epoch=1, instance_id="i2")
    assert resp.error is Errors.FENCED_INSTANCE_ID
    assert ctx.heartbeat(member_id="x", member_epoch=-2, instance_id="i2").error is (
        Errors.FENCED_INSTANCE_ID
    )
    # An unknown instance id.
    assert ctx.heartbeat(member_id="s9", member_epoch=3, instance_id="i9").error is (
        Errors.UNKNOWN_MEMBER_ID
    )
    assert ctx.heartbeat(member_id="s9", member_epoch=-2, instance_id="i9").error is (
        Errors.UNKNOWN_MEMBER_ID
    )


def test_static_member_that_does_not_come_back_is_removed_at_session_timeout() -> None:
    ctx = static_pair()
    ctx.clock.advance(10_000)
    ok(ctx.heartbeat(member_id="s2", member_epoch=2, instance_id="i2"))
    ok(ctx.heartbeat(member_id="s1", member_epoch=-2, instance_id="i1"))
    assert ctx.coord.session_deadline("s1") == 45_000  # the leave does not renew it
    ctx.sleep(35_000)
    assert ctx.kinds(K.MEMBER_REMOVED)[-1]["reason"] == "session_timeout"
    assert ctx.coord.member_by_instance("i1") is None
    assert ctx.coord.group_epoch == 3
    # A static member leaving for good (-1) is removed at once.
    ok(ctx.heartbeat(member_id="s2", member_epoch=2, instance_id="i2"))
    ok(ctx.heartbeat(member_id="s2", member_epoch=-1, instance_id="i2"))
    assert ctx.coord.members == {}


# ------------------------------------------------------------------ server assignor


def test_preferred_server_assignor() -> None:
    ctx = Ctx()
    ok(ctx.join("m1"))
    assert ctx.assignor.calls[-1][0] == "uniform"  # group.consumer.assignors[0]
    ok(ctx.join("m2", server_assignor="range"))
    assert ctx.assignor.calls[-1][0] == "range"
    ok(ctx.join("m3", server_assignor="uniform"))
    assert ctx.coord.preferred_assignor() == "range"  # tie: by name


def test_default_assignors_come_from_the_registry() -> None:
    config = GroupCoordinatorConfig.from_kafka({"group.consumer.session.timeout.ms": 50000})
    coord = ConsumerGroupCoordinator.from_config(
        GROUP, config, topics={"foo": 4}, rng=random.Random(3), node_id=2
    )
    assert (coord.session_timeout_ms, coord.heartbeat_interval_ms) == (50000, 5000)
    assert coord.assignors == ("uniform", "range") and coord.node_id == 2
    out = coord.handle(
        0,
        ConsumerGroupHeartbeatRequest(
            1, GROUP, rebalance_timeout_ms=1, subscribed_topic_names=("foo",), topic_partitions=()
        ),
    )
    resp = out[0]
    assert isinstance(resp, ConsumerGroupHeartbeatResponse)
    assert resp.assignment == tuple(sorted(foo(0, 1, 2, 3)))
    assert server_assignor("uniform").name == "uniform"


# ------------------------------------------------------------------------- offsets


def test_offset_commit_requires_the_current_member_epoch() -> None:
    ctx = two_member_group()

    def commit(epoch: int, member_id: str = "m1", corr: int = 1) -> OffsetCommitResponse:
        resp = ctx.request(
            OffsetCommitRequest(
                corr,
                GROUP,
                generation_id_or_member_epoch=epoch,
                member_id=member_id,
                offsets={("foo", 0): 42, ("foo", 3): 7},
            )
        )
        assert isinstance(resp, OffsetCommitResponse)
        return resp

    assert commit(1).error is Errors.NONE
    assert ctx.coord.committed_offsets() == {("foo", 0): 42, ("foo", 3): 7}
    stale = commit(2)
    assert stale.error is Errors.STALE_MEMBER_EPOCH
    assert stale.partition_errors == {
        ("foo", 0): Errors.STALE_MEMBER_EPOCH,
        ("foo", 3): Errors.STALE_MEMBER_EPOCH,
    }
    assert commit(0).error is Errors.STALE_MEMBER_EPOCH
    assert commit(1, "ghost").error is Errors.UNKNOWN_MEMBER_ID
    assert commit(-1, "").error is Errors.UNKNOWN_MEMBER_ID  # group not empty
    empty = Ctx()
    resp = empty.request(OffsetCommitRequest(1, GROUP, offsets={("foo", 1): 3}))
    assert isinstance(resp, OffsetCommitResponse) and resp.error is Errors.NONE
    assert empty.coord.committed_offsets() == {("foo", 1): 3}


def test_offset_fetch_validation_and_results() -> None:
    ctx = two_member_group()
    ctx.request(
        OffsetCommitRequest(
            1, GROUP, generation_id_or_member_epoch=1, member_id="m1", offsets={("foo", 0): 9}
        )
    )

    def fetch(**kw: object) -> OffsetFetchResponse:
        resp = ctx.request(OffsetFetchRequest(2, GROUP, **kw))  # type: ignore[arg-type]
        assert isinstance(resp, OffsetFetchResponse)
        return resp

    assert fetch(partitions=(("foo", 0), ("foo", 1))).offsets == {
        ("foo", 0): 9,
        ("foo", 1): None,
    }
    assert fetch().offsets == {("foo", 0): 9}
    assert fetch(member_id="m2", member_epoch=2, partitions=(("foo", 0),)).error is Errors.NONE
    assert fetch(member_id="m2", member_epoch=1).error is Errors.STALE_MEMBER_EPOCH
    assert fetch(member_id="m9", member_epoch=1).error is Errors.UNKNOWN_MEMBER_ID


# ------------------------------------------------------------ CurrentAssignmentBuilder


def builder(
    member: GroupMember,
    target: frozenset[TopicPartition],
    *,
    epoch: int,
    owned: frozenset[TopicPartition] | None,
    epochs: Mapping[TopicPartition, int] | None = None,
    topics: frozenset[str] = frozenset({"foo", "bar"}),
    changed: bool = False,
) -> GroupMember:
    return reconcile(
        member,
        target_epoch=epoch,
        target=target,
        partition_epoch=lambda tp: (epochs or {}).get(tp, -1),
        owned=owned,
        subscribed_topics=topics,
        has_subscription_changed=changed,
    )


STABLE_10 = GroupMember(
    "m",
    member_epoch=10,
    previous_member_epoch=9,
    subscribed_topic_names=frozenset({"foo", "bar"}),
    assigned=foo(1, 2, 3) | bar(4, 5, 6),
)


def test_builder_stable_at_the_target_epoch_is_unchanged() -> None:
    assert builder(STABLE_10, foo(1), epoch=10, owned=None) is STABLE_10


def test_builder_stable_to_stable_when_new_partitions_are_free() -> None:
    m = builder(STABLE_10, foo(1, 2, 3, 4) | bar(4, 5, 6, 7), epoch=11, owned=None)
    assert (m.state, m.member_epoch, m.previous_member_epoch) == (MemberState.STABLE, 11, 10)
    assert m.assigned == foo(1, 2, 3, 4) | bar(4, 5, 6, 7)


def test_builder_stable_to_unreleased_when_new_partitions_are_taken() -> None:
    target = foo(1, 2, 3, 4) | bar(4, 5, 6, 7)
    m = builder(STABLE_10, target, epoch=11, owned=None, epochs={("foo", 4): 10})
    assert (m.state, m.member_epoch) == (MemberState.UNRELEASED_PARTITIONS, 11)
    assert m.assigned == foo(1, 2, 3) | bar(4, 5, 6, 7)
    # Once foo-4 is free, it is assigned.
    m2 = builder(m, target, epoch=11, owned=m.assigned)
    assert (m2.state, m2.assigned) == (MemberState.STABLE, target)


def test_builder_stable_to_unrevoked_then_to_the_next_epoch() -> None:
    m = builder(STABLE_10, foo(2, 3) | bar(5, 6), epoch=11, owned=None)
    assert (m.state, m.member_epoch) == (MemberState.UNREVOKED_PARTITIONS, 10)
    assert (m.assigned, m.pending_revocation) == (foo(2, 3) | bar(5, 6), foo(1) | bar(4))
    assert builder(m, foo(2, 3) | bar(5, 6), epoch=11, owned=foo(1, 2, 3)) is m
    assert builder(m, foo(2, 3) | bar(5, 6), epoch=11, owned=None) is m
    done = builder(m, foo(2, 3) | bar(5, 6), epoch=11, owned=foo(2, 3) | bar(5, 6))
    assert (done.state, done.member_epoch, done.pending_revocation) == (
        MemberState.STABLE,
        11,
        frozenset(),
    )


def test_builder_owned_revocations_are_not_unreleased() -> None:
    """A partition pending revocation by the member itself is not waited for."""
    m = GroupMember(
        "m",
        member_epoch=10,
        state=MemberState.UNREVOKED_PARTITIONS,
        subscribed_topic_names=frozenset({"foo"}),
        assigned=foo(1),
        pending_revocation=foo(2),
    )
    out = builder(m, foo(1, 2), epoch=12, owned=foo(1), epochs={("foo", 2): 10})
    assert (out.state, out.member_epoch, out.assigned) == (MemberState.STABLE, 12, foo(1, 2))


def test_builder_revocation_of_an_unsubscribed_topic() -> None:
    m = builder(
        STABLE_10,
        foo(1, 2, 3) | bar(4, 5, 6),
        epoch=10,
        owned=None,
        topics=frozenset({"foo"}),
        changed=True,
    )
    assert (m.state, m.member_epoch) == (MemberState.UNREVOKED_PARTITIONS, 10)
    assert (m.assigned, m.pending_revocation) == (foo(1, 2, 3), bar(4, 5, 6))
    # Already revoked: the assignment just shrinks.
    m2 = builder(
        STABLE_10,
        foo(1, 2, 3) | bar(4, 5, 6),
        epoch=10,
        owned=foo(1, 2, 3),
        topics=frozenset({"foo"}),
        changed=True,
    )
    assert (m2.state, m2.assigned) == (MemberState.STABLE, foo(1, 2, 3))


def test_builder_unknown_state_fences_a_member_with_partitions() -> None:
    m = GroupMember("m", member_epoch=10, state=MemberState.UNKNOWN, assigned=foo(1))
    with pytest.raises(ProtocolError) as exc:
        builder(m, foo(1), epoch=11, owned=foo(1))
    assert exc.value.error is Errors.FENCED_MEMBER_EPOCH
    out = builder(m, foo(1), epoch=11, owned=frozenset())
    assert (out.state, out.member_epoch) == (MemberState.STABLE, 11)


def test_factory_for_the_actors() -> None:
    coord = make_consumer_coordinator(
        GROUP,
        {"group.consumer.heartbeat.interval.ms": 6000, "max.poll.interval.ms": 1},
        random.Random(0),
        4,
        {"foo": 2},
    )
    assert (coord.node_id, coord.heartbeat_interval_ms) == (4, 6000)
    assert coord.session_timeout_ms == 45000
    assert coord.handle(0, FindCoordinatorRequest(1, GROUP)) == [
        FindCoordinatorResponse(1, node_id=4)
    ]


# ------------------------------------------------ group.consumer.assignment.interval.ms


def test_assignment_interval_defers_the_assignor_and_batches_joins() -> None:
    """Kafka 4.3: the assignor runs at most once per interval. A join inside the
    interval leaves the group ASSIGNING; the first heartbeat after the interval
    computes one target for every join in between."""
    ctx = Ctx(assignment_interval_ms=1000)
    ctx.prepare(m1=foo(0, 1, 2, 3, 4, 5) | bar(0, 1, 2))
    resp = ok(ctx.join("m1"))  # the first assignment ever runs at once
    assert resp.member_epoch == 1 and len(ctx.assignor.calls) == 1
    ctx.clock.advance(100)
    resp = ok(ctx.join("m2"))
    ctx.clock.advance(100)
    ok(ctx.join("m3"))
    assert len(ctx.assignor.calls) == 1, "joins inside the interval do not run the assignor"
    assert ctx.coord.group_epoch == 3 and ctx.coord.assignment_epoch == 1
    assert state(ctx) is GroupState.ASSIGNING
    # m2 is a member reconciled to the old target, which has nothing for it.
    assert resp.member_epoch == 1 and assignment(resp) == frozenset()
    ctx.clock.advance(700)  # 900 ms after the last assignment: still deferred
    ok(ctx.heartbeat(member_id="m2", member_epoch=1))
    assert len(ctx.assignor.calls) == 1
    ctx.clock.advance(100)  # 1000 ms: this heartbeat runs it, for both joins
    ctx.prepare(m1=foo(0, 1) | bar(0), m2=foo(2, 3) | bar(1), m3=foo(4, 5) | bar(2))
    ok(ctx.heartbeat(member_id="m2", member_epoch=1))
    assert len(ctx.assignor.calls) == 2
    assert sorted(ctx.assignor.calls[-1][1].members) == ["m1", "m2", "m3"]
    assert ctx.coord.assignment_epoch == 3
    assert {e["member_id"] for e in ctx.kinds(K.TARGET_ASSIGNMENT)} == {"m1", "m2", "m3"}


def test_without_an_assignment_interval_every_join_runs_the_assignor() -> None:
    ctx = Ctx()  # 0, as before Kafka 4.3
    ctx.prepare(m1=foo(0, 1, 2, 3, 4, 5) | bar(0, 1, 2))
    ok(ctx.join("m1"))
    ok(ctx.join("m2"))
    ok(ctx.join("m3"))
    assert len(ctx.assignor.calls) == 3 and ctx.coord.assignment_epoch == 3


def test_assignment_interval_default_follows_the_kafka_release() -> None:
    assert GroupCoordinatorConfig.for_version("3.9").group_consumer_assignment_interval_ms == 0
    assert GroupCoordinatorConfig.for_version("4.2").group_consumer_assignment_interval_ms == 0
    assert GroupCoordinatorConfig.for_version("4.3").group_consumer_assignment_interval_ms == 1000
    cfg = GroupCoordinatorConfig.from_kafka({"group.consumer.assignment.interval.ms": 250})
    coord = ConsumerGroupCoordinator.from_config(
        GROUP, cfg, topics={"foo": 1}, rng=random.Random(1)
    )
    assert coord.assignment_interval_ms == 250
    with pytest.raises(ValueError, match=r"group\.consumer\.assignment\.interval\.ms"):
        GroupCoordinatorConfig.from_kafka({"group.consumer.assignment.interval.ms": -1})


def test_subscription_metadata_follows_members_leaving_and_resubscribing() -> None:
    """The per-topic subscriber counts: a topic stays while anyone subscribes to it."""
    ctx = Ctx()
    ok(ctx.join("m1", topics=("foo",)))
    ok(ctx.join("m2", topics=("foo", "bar")))
    assert ctx.coord.subscription_metadata == {"bar": 3, "foo": 6}
    ok(
        ctx.heartbeat(
            member_id="m2",
            member_epoch=ctx.member("m2").member_epoch,
            subscribed_topic_names=("foo",),
        )
    )
    assert ctx.coord.subscription_metadata == {"foo": 6}
    ok(
        ctx.heartbeat(
            member_id="m1",
            member_epoch=ctx.member("m1").member_epoch,
            subscribed_topic_names=("bar",),
        )
    )
    assert ctx.coord.subscription_metadata == {"bar": 3, "foo": 6}
    ok(ctx.heartbeat(member_id="m2", member_epoch=-1))
    ok(ctx.heartbeat(member_id="m1", member_epoch=ctx.member("m1").member_epoch))
    assert ctx.coord.subscription_metadata == {"bar": 3}
