"""Online migration between classic and consumer groups on a fake clock (issue 20).

Each test follows one rule of Kafka's ``GroupMetadataManager`` (GMM@3.9, apache/kafka
``group-coordinator/src/main/java/org/apache/kafka/coordinator/group/``; 3.8 has
the same logic) and names the method, and mostly the ``GroupMetadataManagerTest``
case, it follows: /work/notes/migration-facts.md has the lines. The coordinator
is :class:`~emulator.modern.migration.MigratingGroupCoordinator` over a real
classic coordinator and a real consumer group with the ``range`` server
assignor, so the target assignments are known in advance.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from emulator.events import EventKind as K
from emulator.modern.classic_coordinator import ClassicGroupCoordinator
from emulator.modern.classic_coordinator import GroupState as ClassicState
from emulator.modern.config import GroupCoordinatorConfig
from emulator.modern.consumer_coordinator import GroupState, MemberState
from emulator.modern.coordinator import CoordinatorOutput
from emulator.modern.errors import Errors
from emulator.modern.messages import (
    Assignment,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    Emit,
    GroupResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    Subscription,
    SyncGroupRequest,
    SyncGroupResponse,
    TopicPartition,
)
from emulator.modern.migration import MigratingGroupCoordinator, MigrationPolicy
from emulator.modern.mixed_group import MixedGroupCoordinator

GROUP = "grp"
T = "foo"
SESSION = 10_000
REBALANCE = 20_000


def tps(*ps: int) -> tuple[TopicPartition, ...]:
    return tuple((T, p) for p in ps)


class Ctx:
    """One group id on one broker, driven by hand on a fake clock."""

    def __init__(
        self,
        *,
        initial: str = "classic",
        policy: MigrationPolicy = MigrationPolicy.BIDIRECTIONAL,
        kafka_version: str = "4.0",
        partitions: int = 4,
        classic_max_size: int = 2**31 - 1,
    ) -> None:
        self.now = 0.0
        self.corr = 0
        self.events: list[Emit] = []
        self.parked: list[GroupResponse] = []
        cfg = GroupCoordinatorConfig.from_kafka({}, kafka_version=kafka_version)
        rng = random.Random(7)

        def new_classic(offsets: object) -> ClassicGroupCoordinator:
            return ClassicGroupCoordinator(GROUP, cfg, rng, broker=0, committed=offsets)  # type: ignore[arg-type]

        def new_consumer(offsets: object) -> MixedGroupCoordinator:
            coord = MixedGroupCoordinator(
                GROUP,
                topics={T: partitions},
                rng=rng,
                assignors=("range",),
                kafka_version=kafka_version,
            )
            coord.committed.update(offsets or {})  # type: ignore[call-overload]
            return coord

        self.coord = MigratingGroupCoordinator(
            GROUP,
            new_classic=new_classic,
            new_consumer=new_consumer,
            initial=initial,
            policy=policy,
            kafka_version=kafka_version,
            classic_max_size=classic_max_size,
            consumer_max_size=2**31 - 1,
        )

    # -- plumbing

    def _take(self, out: Sequence[CoordinatorOutput], corr: int) -> GroupResponse | None:
        mine = None
        for o in out:
            if isinstance(o, Emit):
                self.events.append(o)
            elif o.corr == corr:
                mine = o
            else:
                self.parked.append(o)
        return mine

    def send(self, req: object) -> GroupResponse | None:
        out = self.coord.handle(self.now, req)  # type: ignore[arg-type]
        return self._take(out, req.corr)  # type: ignore[attr-defined]

    def sleep(self, ms: float) -> None:
        """Move the clock, firing the timers due on the way in order."""
        end = self.now + ms
        while True:
            due = self.coord.next_deadline()
            if due is None or due > end:
                break
            self.now = max(self.now, due)
            self._take(self.coord.poll(self.now), -1)
        self.now = end

    def next_corr(self) -> int:
        self.corr += 1
        return self.corr

    def kinds(self, kind: K) -> list[dict[str, object]]:
        return [dict(e.fields) for e in self.events if e.kind is kind]

    # -- classic requests

    def join(
        self,
        member_id: str = "",
        *,
        owned: tuple[TopicPartition, ...] = (),
        instance: str | None = None,
        assignors: tuple[str, ...] = ("range",),
    ) -> JoinGroupResponse | None:
        sub = Subscription((T,), owned_partitions=owned)
        req = JoinGroupRequest(
            self.next_corr(),
            GROUP,
            session_timeout_ms=SESSION,
            rebalance_timeout_ms=REBALANCE,
            member_id=member_id,
            group_instance_id=instance,
            protocols=tuple((a, sub) for a in assignors),
        )
        resp = self.send(req)
        assert resp is None or isinstance(resp, JoinGroupResponse)
        return resp

    def join_new(self, **kw: object) -> JoinGroupResponse | None:
        """JoinGroup v4+: MEMBER_ID_REQUIRED, then again with the id."""
        first = self.join(**kw)  # type: ignore[arg-type]
        assert first is not None and first.error is Errors.MEMBER_ID_REQUIRED
        return self.join(first.member_id, **kw)  # type: ignore[arg-type]

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: tuple[tuple[str, Assignment], ...] = (),
    ) -> SyncGroupResponse | None:
        req = SyncGroupRequest(
            self.next_corr(),
            GROUP,
            generation_id=generation,
            member_id=member_id,
            protocol_type="consumer",
            protocol_name="range",
            assignments=assignments,
        )
        resp = self.send(req)
        assert resp is None or isinstance(resp, SyncGroupResponse)
        return resp

    def heartbeat(self, member_id: str, generation: int) -> HeartbeatResponse:
        resp = self.send(
            HeartbeatRequest(self.next_corr(), GROUP, generation_id=generation, member_id=member_id)
        )
        assert isinstance(resp, HeartbeatResponse)
        return resp

    def leave(self, member_id: str) -> LeaveGroupResponse:
        resp = self.send(LeaveGroupRequest(self.next_corr(), GROUP, members=((member_id, None),)))
        assert isinstance(resp, LeaveGroupResponse)
        return resp

    # -- consumer requests

    def cg_heartbeat(
        self, member_id: str, epoch: int, **kw: object
    ) -> ConsumerGroupHeartbeatResponse:
        fields: dict[str, object] = {"member_id": member_id, "member_epoch": epoch}
        if epoch == 0:
            fields.update(
                rebalance_timeout_ms=REBALANCE, subscribed_topic_names=(T,), topic_partitions=()
            )
        fields.update(kw)
        resp = self.send(ConsumerGroupHeartbeatRequest(self.next_corr(), GROUP, **fields))  # type: ignore[arg-type]
        assert isinstance(resp, ConsumerGroupHeartbeatResponse)
        return resp

    # -- a stable classic group

    def stable_classic(self, n: int = 2) -> list[str]:
        """n members join, the first (the leader) assigns range-style, all sync: Stable."""
        firsts = [self.join() for _ in range(n)]
        ids = [f.member_id for f in firsts if f is not None]
        corrs = []
        for mid in ids:
            sub = Subscription((T,))
            req = JoinGroupRequest(
                self.next_corr(),
                GROUP,
                session_timeout_ms=SESSION,
                rebalance_timeout_ms=REBALANCE,
                member_id=mid,
                protocols=(("range", sub),),
            )
            corrs.append(req.corr)
            assert self.send(req) is None  # parked until the join completes
        self.sleep(6000)  # group.initial.rebalance.delay.ms, re-armed once for the 2nd member
        joined = {r.corr: r for r in self.parked if isinstance(r, JoinGroupResponse)}
        self.parked.clear()
        gen = joined[corrs[0]].generation_id
        leader = joined[corrs[0]].leader
        assert leader == ids[0]
        per = 4 // n
        plan = tuple(
            (mid, Assignment(tps(*range(i * per, (i + 1) * per)))) for i, mid in enumerate(ids)
        )
        resp = self.sync(ids[0], gen, plan)
        assert resp is not None and resp.error is Errors.NONE
        for mid in ids[1:]:
            resp = self.sync(mid, gen, ())
            assert resp is not None and resp.error is Errors.NONE
        classic = self.coord.group
        assert isinstance(classic, ClassicGroupCoordinator)
        assert classic.state is ClassicState.STABLE and classic.generation_id == gen
        return ids

    @property
    def consumer(self) -> MixedGroupCoordinator:
        group = self.coord.group
        assert isinstance(group, MixedGroupCoordinator)
        return group

    @property
    def classic(self) -> ClassicGroupCoordinator:
        group = self.coord.group
        assert isinstance(group, ClassicGroupCoordinator)
        return group


# ------------------------------------------------------------------ upgrade


def test_a_consumer_heartbeat_converts_a_stable_classic_group() -> None:
    """``convertToConsumerGroup`` / ``ConsumerGroup.fromClassicGroup``
    (GMMT testConsumerGroupHeartbeatWithStableClassicGroup): members keep their ids,
    epochs = the generation, their synced assignment is current and target; the
    joining member bumps the group epoch, so the classic members are asked to rejoin."""
    ctx = Ctx()
    a, b = ctx.stable_classic()
    gen = ctx.classic.generation_id
    resp = ctx.cg_heartbeat("new-1", 0)
    assert resp.error is Errors.NONE and resp.member_epoch == gen + 1
    group = ctx.consumer
    assert group.group_epoch == gen + 1 and group.assignment_epoch == gen + 1
    ma, mb = group.members[a], group.members[b]
    assert ma.classic is not None and ma.classic.session_timeout_ms == SESSION
    assert ma.member_epoch == gen and mb.member_epoch == gen  # not yet reconciled
    assert ma.assigned == frozenset(tps(0, 1)) and mb.assigned == frozenset(tps(2, 3))
    assert group.members["new-1"].classic is None
    # The new member waits for partitions still owned by the classic members.
    assert group.members["new-1"].state is MemberState.UNRELEASED_PARTITIONS
    (conv,) = ctx.kinds(K.GROUP_CONVERTED)
    assert conv["direction"] == "upgrade" and conv["state"] == "online"
    assert conv["generation"] == gen and conv["count"] == 2 and conv["member_id"] == "new-1"
    # classicGroupHeartbeatToConsumerGroup: member epoch < group epoch -> rejoin.
    assert ctx.heartbeat(a, gen).error is Errors.REBALANCE_IN_PROGRESS
    # A session runs on the member's own classic timeout.
    assert group.session_deadline(a) == ctx.now + SESSION


def test_an_upgrade_aborts_a_classic_rebalance_in_progress() -> None:
    """``convertToConsumerGroup`` completes every parked JoinGroup with
    REBALANCE_IN_PROGRESS (testConsumerGroupHeartbeatWithPreparingRebalanceClassicGroup):
    no state check stops an upgrade."""
    ctx = Ctx()
    a, b = ctx.stable_classic()
    gen = ctx.classic.generation_id
    parked = ctx.join(a)  # the leader rejoins: PreparingRebalance, its join parked
    assert parked is None and ctx.classic.state is ClassicState.PREPARING_REBALANCE
    resp = ctx.cg_heartbeat("new-1", 0)
    assert resp.error is Errors.NONE
    (answer,) = [r for r in ctx.parked if isinstance(r, JoinGroupResponse)]
    assert answer.error is Errors.REBALANCE_IN_PROGRESS
    assert set(ctx.consumer.members) == {a, b, "new-1"} and ctx.consumer.group_epoch == gen + 1


@pytest.mark.parametrize(
    ("policy", "version"),
    [
        (MigrationPolicy.DISABLED, "4.0"),
        (MigrationPolicy.DOWNGRADE, "4.0"),
        (MigrationPolicy.BIDIRECTIONAL, "3.7"),
    ],
)
def test_an_upgrade_the_policy_or_release_refuses_is_group_id_not_found(
    policy: MigrationPolicy, version: str
) -> None:
    """``validateOnlineUpgrade`` (GMM@3.9 1099): the policy must allow upgrades; before
    3.8 a classic group is simply "not a consumer group" (K@3.7.0 GMM 585)."""
    ctx = Ctx(policy=policy, kafka_version=version)
    a, _ = ctx.stable_classic()
    gen = ctx.classic.generation_id
    assert ctx.cg_heartbeat("new-1", 0).error is Errors.GROUP_ID_NOT_FOUND
    assert ctx.classic.state is ClassicState.STABLE  # untouched
    assert ctx.heartbeat(a, gen).error is Errors.NONE
    assert ctx.kinds(K.GROUP_CONVERTED) == []


def test_a_member_that_never_synced_fails_the_upgrade_before_4_0() -> None:
    """KAFKA-17733 (4.0): before it, a member's empty assignment bytes threw while
    converting and the heartbeat got GROUP_ID_NOT_FOUND; from 4.0 it converts."""
    for version, expected in (("3.9", Errors.GROUP_ID_NOT_FOUND), ("4.0", Errors.NONE)):
        ctx = Ctx(kafka_version=version)
        a, b = ctx.stable_classic()
        gen = ctx.classic.generation_id
        # A third member joins; all rejoin; the join completes; nobody has synced yet,
        # so the newcomer has no assignment at all (EMPTY_ASSIGNMENT).
        assert ctx.join_new() is None
        ctx.join(a)
        ctx.join(b)
        assert ctx.classic.state is ClassicState.COMPLETING_REBALANCE
        assert ctx.classic.generation_id == gen + 1
        assert ctx.cg_heartbeat("new-1", 0).error is expected, version


def test_an_empty_classic_group_is_replaced_under_any_policy() -> None:
    """``maybeDeleteEmptyClassicGroup`` (offline migration, GMM@3.9 730): an Empty
    classic group is deleted and a consumer group created, whatever the policy;
    its committed offsets stay."""
    ctx = Ctx(policy=MigrationPolicy.DISABLED)
    a, b = ctx.stable_classic()
    gen = ctx.classic.generation_id
    commit = OffsetCommitRequest(
        ctx.next_corr(),
        GROUP,
        generation_id_or_member_epoch=gen,
        member_id=a,
        offsets={(T, 0): 5},
    )
    assert isinstance(ctx.send(commit), OffsetCommitResponse)
    ctx.leave(a)
    ctx.leave(b)
    assert ctx.classic.state is ClassicState.EMPTY
    resp = ctx.cg_heartbeat("new-1", 0)
    assert resp.error is Errors.NONE and ctx.consumer.group_epoch == 1
    assert ctx.coord.committed_offsets() == {(T, 0): 5}
    (conv,) = ctx.kinds(K.GROUP_CONVERTED)
    assert conv["state"] == "offline" and conv["direction"] == "upgrade"


# --------------------------------------------------- classic members in a consumer group


def upgraded(ctx: Ctx) -> tuple[str, str, int]:
    """A stable classic group of two, upgraded by member new-1: (a, b, generation)."""
    a, b = ctx.stable_classic()
    gen = ctx.classic.generation_id
    assert ctx.cg_heartbeat("new-1", 0).error is Errors.NONE
    return a, b, gen


def test_an_eager_classic_member_rejoins_owning_nothing_and_waits_for_released_partitions() -> None:
    """``classicGroupJoinToConsumerGroup`` (GMMT
    testReconciliationInJoiningConsumerGroupWithEagerProtocol): the JoinGroup is
    answered at once with generation = the member epoch, no leader and no members;
    the SyncGroup gives the current assignment."""
    ctx = Ctx()
    a, b, gen = upgraded(ctx)
    target_a = ctx.consumer.target_assignment[a]
    resp = ctx.join(a)  # eager: revoked everything before rejoining
    assert resp is not None and resp.error is Errors.NONE
    assert resp.generation_id == gen + 1 and resp.leader == "" and resp.members == ()
    assert resp.protocol_name == "range" and resp.protocol_type == "consumer"
    member = ctx.consumer.members[a]
    # It gets at once what nobody else owns; the rest waits for b to release it.
    free = frozenset(tp for tp in target_a if tp not in ctx.consumer.members[b].assigned)
    assert member.assigned == free
    sync = ctx.sync(a, resp.generation_id)
    assert sync is not None and sync.error is Errors.NONE
    assert frozenset(sync.assignment.partitions) == member.assigned


def test_a_cooperative_classic_member_revokes_through_a_sync_and_a_second_join() -> None:
    """GMMT testReconciliationInJoiningConsumerGroupWithCooperativeProtocol: a member
    still owning a revoked partition stays at its epoch (UNREVOKED_PARTITIONS); its
    SyncGroup is answered without the revoked partitions, its heartbeat says rejoin,
    and the join without them moves it to the new epoch."""
    ctx = Ctx()
    a, b, gen = upgraded(ctx)
    # Range over three members takes a partition from one of the classic members.
    (a,) = [
        m
        for m in (a, b)
        if not ctx.consumer.members[m].assigned <= ctx.consumer.target_assignment[m]
    ]
    owned_a = tuple(sorted(ctx.consumer.members[a].assigned))
    target_a = ctx.consumer.target_assignment[a]
    resp = ctx.join(a, owned=owned_a)
    assert resp is not None and resp.generation_id == gen  # still the old epoch
    assert ctx.consumer.members[a].state is MemberState.UNREVOKED_PARTITIONS
    sync = ctx.sync(a, gen)
    assert sync is not None and sync.error is Errors.NONE
    kept = tuple(sorted(frozenset(owned_a) & target_a))
    assert sync.assignment.partitions == kept
    assert ctx.heartbeat(a, gen).error is Errors.REBALANCE_IN_PROGRESS
    again = ctx.join(a, owned=kept)
    assert again is not None and again.generation_id == gen + 1
    assert ctx.consumer.members[a].state in (MemberState.STABLE, MemberState.UNRELEASED_PARTITIONS)


def test_classic_member_timers_fence_a_member_that_does_not_rejoin_or_sync() -> None:
    """``scheduleConsumerGroupJoinTimeoutIfAbsent`` after a REBALANCE_IN_PROGRESS and
    ``scheduleConsumerGroupSyncTimeout`` after a JoinGroup, both the rebalance timeout."""
    ctx = Ctx()
    a, b, gen = upgraded(ctx)
    assert ctx.heartbeat(a, gen).error is Errors.REBALANCE_IN_PROGRESS
    resp = ctx.join(b)
    assert resp is not None and resp.error is Errors.NONE
    # Heartbeats keep both sessions alive; a never rejoins, b never syncs.
    for _ in range(int(REBALANCE / 3000) + 1):
        ctx.sleep(3000)
        for mid, g in ((a, gen), (b, resp.generation_id)):
            if mid in ctx.consumer.members:
                ctx.heartbeat(mid, g)
    removed = {e["member_id"]: e["reason"] for e in ctx.kinds(K.MEMBER_REMOVED)}
    assert removed == {a: "join_timeout", b: "sync_timeout"}


def test_a_classic_member_s_session_runs_on_its_own_timeout() -> None:
    """11c85a93c3f (3.8): a converted or joining classic member's session is its
    JoinGroup's ``session.timeout.ms``, not ``group.consumer.session.timeout.ms``."""
    ctx = Ctx()
    a, b, _ = upgraded(ctx)
    ctx.sleep(SESSION + 1)
    removed = {e["member_id"]: e["reason"] for e in ctx.kinds(K.MEMBER_REMOVED)}
    assert removed == {a: "session_timeout", b: "session_timeout"}
    assert set(ctx.consumer.members) == {"new-1"}


def test_a_classic_leave_removes_the_member_bumps_once_and_never_downgrades() -> None:
    """``classicGroupLeaveToConsumerGroup``: removal for good, one epoch bump."""
    ctx = Ctx()
    a, _, _ = upgraded(ctx)
    epoch = ctx.consumer.group_epoch
    resp = ctx.leave(a)
    assert resp.member_errors == ((a, None, Errors.NONE),)
    assert a not in ctx.consumer.members and ctx.consumer.group_epoch == epoch + 1
    assert ctx.leave("nobody").member_errors == (("nobody", None, Errors.UNKNOWN_MEMBER_ID),)
    # new-1 speaks the consumer protocol: not a classic leave.
    assert ctx.leave("new-1").member_errors == (("new-1", None, Errors.UNKNOWN_MEMBER_ID),)
    assert [e["direction"] for e in ctx.kinds(K.GROUP_CONVERTED)] == ["upgrade"]


def test_a_classic_member_joins_a_consumer_group_with_a_known_assignor_only() -> None:
    """``throwIfClassicProtocolIsNotSupported``: some assignor of the request must be
    one every classic member has; a consumer-only group accepts any."""
    ctx = Ctx(initial="consumer")
    assert ctx.cg_heartbeat("c-1", 0).error is Errors.NONE
    first = ctx.join_new(assignors=("cooperative-sticky",))
    assert first is not None and first.error is Errors.NONE
    bad = ctx.join(assignors=("range",))
    assert bad is not None and bad.error is Errors.INCONSISTENT_GROUP_PROTOCOL
    good = ctx.join(assignors=("range", "cooperative-sticky"))
    assert good is not None and good.error is Errors.MEMBER_ID_REQUIRED


def test_a_classic_member_s_commit_carries_its_generation() -> None:
    """``ConsumerGroup.validateOffsetCommit``: generation = member epoch, else
    ILLEGAL_GENERATION for a classic member (STALE_MEMBER_EPOCH for a consumer one)."""
    ctx = Ctx()
    a, _, gen = upgraded(ctx)

    def commit(member: str, epoch: int) -> Errors:
        resp = ctx.send(
            OffsetCommitRequest(
                ctx.next_corr(),
                GROUP,
                generation_id_or_member_epoch=epoch,
                member_id=member,
                offsets={(T, 0): 1},
            )
        )
        assert isinstance(resp, OffsetCommitResponse)
        return resp.error

    assert commit(a, gen) is Errors.NONE
    assert commit(a, gen + 5) is Errors.ILLEGAL_GENERATION
    assert commit("new-1", gen + 5) is Errors.STALE_MEMBER_EPOCH


def test_a_join_to_an_empty_consumer_group_makes_a_classic_group() -> None:
    """``maybeDeleteEmptyConsumerGroup`` (offline downgrade): any policy."""
    ctx = Ctx(initial="consumer", policy=MigrationPolicy.DISABLED)
    assert ctx.cg_heartbeat("c-1", 0).error is Errors.NONE
    ctx.cg_heartbeat("c-1", -1)
    assert ctx.consumer.state is GroupState.EMPTY
    first = ctx.join()
    assert first is not None and first.error is Errors.MEMBER_ID_REQUIRED
    assert isinstance(ctx.coord.group, ClassicGroupCoordinator)
    (conv,) = ctx.kinds(K.GROUP_CONVERTED)
    assert conv["direction"] == "downgrade" and conv["state"] == "offline"


# ---------------------------------------------------------------- downgrade


def test_the_last_consumer_member_leaving_downgrades_and_starts_a_rebalance() -> None:
    """``validateOnlineDowngrade`` + ``convertToClassicGroup`` (GMMT
    testLastConsumerProtocolMemberLeavingConsumerGroup): Stable at generation = the
    group epoch, the target assignments kept, then PreparingRebalance; a member at
    that generation is told to rejoin."""
    ctx = Ctx()
    a, b, _ = upgraded(ctx)
    ra = ctx.join(a)
    rb = ctx.join(b)
    assert ra is not None and rb is not None
    epoch = ctx.consumer.group_epoch
    targets = {m: ctx.consumer.target_assignment[m] for m in (a, b)}
    resp = ctx.cg_heartbeat("new-1", -1)
    assert resp.error is Errors.NONE and resp.member_epoch == -1
    classic = ctx.classic
    assert classic.generation_id == epoch and classic.state is ClassicState.PREPARING_REBALANCE
    assert set(classic.members) == {a, b} and classic.protocol_name == "range"
    for m in (a, b):
        assignment = classic.members[m].assignment
        assert assignment is not None and frozenset(assignment.partitions) == targets[m]
    down = [e for e in ctx.kinds(K.GROUP_CONVERTED) if e["direction"] == "downgrade"]
    assert len(down) == 1 and down[0]["reason"] == "leave" and down[0]["member_id"] == "new-1"
    assert ctx.heartbeat(a, epoch).error is Errors.REBALANCE_IN_PROGRESS
    # The two rejoin; the join completes into the next generation.
    assert ctx.join(a) is None
    last = ctx.join(b)
    assert last is not None and last.generation_id == epoch + 1
    assert classic.state is ClassicState.COMPLETING_REBALANCE


@pytest.mark.parametrize(
    ("policy", "max_size"),
    [(MigrationPolicy.UPGRADE, 2**31 - 1), (MigrationPolicy.BIDIRECTIONAL, 1)],
)
def test_no_downgrade_without_the_policy_or_room_in_group_max_size(
    policy: MigrationPolicy, max_size: int
) -> None:
    """``validateOnlineDowngrade``: the policy must allow it, and the members left must
    fit in ``group.max.size`` (KAFKA-16861); otherwise the group stays a consumer
    group of classic members."""
    ctx = Ctx(policy=policy, classic_max_size=max_size)
    a, b, _ = upgraded(ctx)
    assert ctx.cg_heartbeat("new-1", -1).error is Errors.NONE
    assert set(ctx.consumer.members) == {a, b}
    assert [e["direction"] for e in ctx.kinds(K.GROUP_CONVERTED)] == ["upgrade"]


def test_a_session_timeout_of_the_last_consumer_member_downgrades_too() -> None:
    """``consumerGroupFenceMember`` is the one place the downgrade is checked: a
    session timeout reaches it as a leave does."""
    ctx = Ctx()
    a, b, gen = upgraded(ctx)
    generation = {a: gen, b: gen}
    for _ in range(20):  # the classic members stay in (eager); new-1 goes silent
        ctx.sleep(2500)
        if not isinstance(ctx.coord.group, MixedGroupCoordinator):
            break
        for m in (a, b):
            if ctx.heartbeat(m, generation[m]).error is Errors.REBALANCE_IN_PROGRESS:
                joined = ctx.join(m)
                assert joined is not None and joined.error is Errors.NONE
                generation[m] = joined.generation_id
                ctx.sync(m, generation[m])
    down = [e for e in ctx.kinds(K.GROUP_CONVERTED) if e["direction"] == "downgrade"]
    assert len(down) == 1 and down[0]["reason"] == "session_timeout"
    assert isinstance(ctx.coord.group, ClassicGroupCoordinator)


def test_schema_4_adds_the_conversion_event() -> None:
    """``group_converted`` must say its direction, reason and whether it was online."""
    from emulator.events import FIELD_TYPES, SCHEMA_VERSION, EventError, validate_event

    assert SCHEMA_VERSION >= 4  # versions only add
    assert FIELD_TYPES["direction"] == "string" and FIELD_TYPES["member_protocol"] == "string"
    good = {"kind": "group_converted", "direction": "upgrade", "reason": "x", "state": "online"}
    validate_event(good)
    with pytest.raises(EventError):
        validate_event({**good, "direction": "sideways"})
    with pytest.raises(EventError):
        validate_event({k: v for k, v in good.items() if k != "state"})


@pytest.mark.parametrize(
    ("version", "expected"), [("3.9", Errors.UNRELEASED_INSTANCE_ID), ("4.0", Errors.NONE)]
)
def test_a_static_member_switching_to_consumer_replaces_its_classic_self_from_4_0(
    version: str, expected: Errors
) -> None:
    """KAFKA-17228 (4.0, ``getOrMaybeSubscribeStaticConsumerGroupMember``): the new
    member takes the classic member's place and assignment at once; before 4.0 the
    instance id stays "unreleased" until the classic session expires."""
    ctx = Ctx(kafka_version=version, initial="consumer")
    assert ctx.cg_heartbeat("c-1", 0).error is Errors.NONE
    classic = ctx.join(instance="i-2")
    assert classic is not None and classic.error is Errors.NONE
    old_id = classic.member_id
    ctx.sync(old_id, classic.generation_id)
    target = ctx.consumer.target_assignment[old_id]
    assert target  # range gives the classic member half of the partitions
    resp = ctx.cg_heartbeat("c-2", 0, instance_id="i-2")
    assert resp.error is expected
    if expected is Errors.NONE:
        assert old_id not in ctx.consumer.members
        new = ctx.consumer.members["c-2"]
        assert new.classic is None and new.instance_id == "i-2"
        assert ctx.consumer.target_assignment["c-2"] == target  # its place, kept
        removed = [e for e in ctx.kinds(K.MEMBER_REMOVED) if e["member_id"] == old_id]
        assert removed and removed[0]["reason"] == "static_replace"
