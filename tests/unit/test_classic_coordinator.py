"""The classic group coordinator, request by request, on a fake clock (kafka-protocols.md B1-B9).

In the style of Kafka's ``GroupCoordinatorTest``: a test context sends
requests straight to one :class:`ClassicGroupCoordinator` and collects the
responses by correlation id (parked JoinGroups and SyncGroups are answered by
later calls), while a :class:`~emulator.clock.FakeClock` drives the delayed
operations through ``poll``. Every state transition of B1 and every error of
B2-B5 is exercised, with the static-membership rules of B9, and the broker
configuration of B6.
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Sequence

import pytest

from emulator.events import EventKind as K
from emulator.modern.classic_coordinator import (
    VALID_PREVIOUS_STATES,
    ClassicGroupCoordinator,
    GroupState,
    IllegalStateTransition,
)
from emulator.modern.config import GroupCoordinatorConfig
from emulator.modern.errors import Errors
from emulator.modern.messages import (
    Assignment,
    Emit,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    GroupResponse,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    Subscription,
    SyncGroupRequest,
    SyncGroupResponse,
)
from tests.group_context import GroupTestContext

S = GroupState
T0 = ("t", 0)
T1 = ("t", 1)
UUID_RE = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"


def protos(*names: str, topics: tuple[str, ...] = ("t",), owned: tuple[tuple[str, int], ...] = ()
           ) -> tuple[tuple[str, Subscription], ...]:
    return tuple((n, Subscription(topics, owned_partitions=owned)) for n in names or ("range",))


class Ctx(GroupTestContext):
    """One coordinator on the mock time, and everything it answered."""

    def __init__(self, seed: int = 1, **props: object) -> None:
        super().__init__()
        self.config = GroupCoordinatorConfig.from_kafka(props)
        self.coord = ClassicGroupCoordinator("g", self.config, random.Random(seed), broker=3)
        self.corr = itertools.count(1)
        self.responses: dict[int, GroupResponse] = {}
        self.with_machine("coordinator", self.coord, self._take)

    @property
    def events(self) -> list[Emit]:
        return self.emits()

    def _take(self, outs: Sequence[object]) -> None:
        for o in self.record("coordinator", outs):
            assert isinstance(o, GroupResponse)
            assert o.corr not in self.responses, f"answered twice: {o}"
            self.responses[o.corr] = o

    def send(self, req: object, client_id: str = "cid") -> int:
        assert hasattr(req, "corr")
        self._take(self.coord.handle(self.now, req, client_id=client_id))  # type: ignore[arg-type]
        return int(req.corr)

    def advance(self, ms: float) -> None:
        """Move the clock, firing every timer on the way in order."""
        self.run(ms)

    def resp(self, corr: int) -> GroupResponse | None:
        return self.responses.get(corr)

    # requests ---------------------------------------------------------------

    def join(self, member_id: str = "", *, instance: str | None = None, session: int = 10_000,
             rebalance: int = 60_000, protocols: tuple[tuple[str, Subscription], ...] | None = None,
             protocol_type: str = "consumer", client_id: str = "cid") -> int:
        return self.send(JoinGroupRequest(
            next(self.corr), "g", session_timeout_ms=session, rebalance_timeout_ms=rebalance,
            member_id=member_id, group_instance_id=instance, protocol_type=protocol_type,
            protocols=protos() if protocols is None else protocols,
        ), client_id)

    def join_new(self, **kw: object) -> str:
        """A dynamic member's two JoinGroups (KIP-394); returns its member id."""
        corr = self.join(**kw)  # type: ignore[arg-type]
        r = self.responses[corr]
        assert isinstance(r, JoinGroupResponse) and r.error is Errors.MEMBER_ID_REQUIRED
        self.last = self.join(r.member_id, **kw)  # type: ignore[arg-type]
        return r.member_id

    def sync(self, member_id: str, generation: int, assignments: dict[str, tuple] | None = None,
             *, instance: str | None = None, protocol_name: str | None = None) -> int:
        return self.send(SyncGroupRequest(
            next(self.corr), "g", generation_id=generation, member_id=member_id,
            group_instance_id=instance, protocol_type="consumer", protocol_name=protocol_name,
            assignments=tuple((m, Assignment(p)) for m, p in (assignments or {}).items()),
        ))

    def heartbeat(self, member_id: str, generation: int, instance: str | None = None) -> Errors:
        corr = self.send(HeartbeatRequest(next(self.corr), "g", generation_id=generation,
                                          member_id=member_id, group_instance_id=instance))
        return self.responses[corr].error

    def commit(self, member_id: str, generation: int, offsets: dict, instance: str | None = None
               ) -> Errors:
        corr = self.send(OffsetCommitRequest(next(self.corr), "g",
                                             generation_id_or_member_epoch=generation,
                                             member_id=member_id, group_instance_id=instance,
                                             offsets=offsets))
        return self.responses[corr].error

    def leave(self, *members: tuple[str, str | None]) -> LeaveGroupResponse:
        corr = self.send(LeaveGroupRequest(next(self.corr), "g", members=members))
        r = self.responses[corr]
        assert isinstance(r, LeaveGroupResponse)
        return r

    def states(self) -> list[str]:
        return [str(e.fields["state"]) for e in self.events if e.kind is K.GROUP_STATE_CHANGED
                and e.fields.get("reason") not in ("created", "initial_rebalance_delay_rearmed")]


def jr(ctx: Ctx, corr: int) -> JoinGroupResponse:
    r = ctx.resp(corr)
    assert isinstance(r, JoinGroupResponse), r
    return r


def sr(ctx: Ctx, corr: int) -> SyncGroupResponse:
    r = ctx.resp(corr)
    assert isinstance(r, SyncGroupResponse), r
    return r


# ------------------------------------------------------------------------ JoinGroup (B2)


def test_dynamic_member_gets_member_id_required_then_joins_with_client_id_uuid() -> None:
    ctx = Ctx()
    corr = ctx.join(client_id="consumer-7")
    r = jr(ctx, corr)
    assert r.error is Errors.MEMBER_ID_REQUIRED
    assert re.fullmatch(r"consumer-7-" + UUID_RE, r.member_id)
    assert ctx.coord.pending_members == {r.member_id}
    assert ctx.coord.state is S.EMPTY and ctx.coord.members == {}
    corr2 = ctx.join(r.member_id)
    assert ctx.resp(corr2) is None  # parked
    assert ctx.coord.state is S.PREPARING_REBALANCE
    assert ctx.coord.pending_members == frozenset()
    # Same seed, same ids (injected randomness).
    again = Ctx()
    assert jr(again, again.join(client_id="consumer-7")).member_id == r.member_id


def test_static_member_id_is_instance_id_uuid_and_needs_no_second_join() -> None:
    ctx = Ctx()
    corr = ctx.join(instance="host-a")
    assert ctx.resp(corr) is None
    (mid,) = ctx.coord.members
    assert re.fullmatch(r"host-a-" + UUID_RE, mid)
    assert ctx.coord.static_members == {"host-a": mid}


@pytest.mark.parametrize("session", [5_999, 1_800_001])
def test_session_timeout_out_of_bounds_is_invalid(session: int) -> None:
    ctx = Ctx()
    r = jr(ctx, ctx.join(session=session))
    assert r.error is Errors.INVALID_SESSION_TIMEOUT
    assert not ctx.coord.exists


def test_join_with_a_member_id_to_a_missing_group_is_unknown_member() -> None:
    ctx = Ctx()
    assert jr(ctx, ctx.join("someone")).error is Errors.UNKNOWN_MEMBER_ID
    assert not ctx.coord.exists
    ctx.join_new()
    assert jr(ctx, ctx.join("stranger")).error is Errors.UNKNOWN_MEMBER_ID


def test_new_member_sharing_no_protocol_is_inconsistent() -> None:
    ctx = Ctx()
    ctx.join_new(protocols=protos("range"))
    r = jr(ctx, ctx.join(protocols=protos("roundrobin")))
    assert r.error is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert jr(ctx, ctx.join(protocol_type="connect")).error is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert jr(ctx, ctx.join(protocols=())).error is Errors.INCONSISTENT_GROUP_PROTOCOL


def test_initial_delay_waits_even_when_everyone_joined_then_leader_gets_all_metadata() -> None:
    ctx = Ctx()
    a = ctx.join_new(protocols=protos("range", "roundrobin"))
    ca = ctx.last
    b = ctx.join_new(protocols=protos("roundrobin", "range"))
    cb = ctx.last
    ctx.advance(2_999)
    assert ctx.resp(ca) is None and ctx.coord.state is S.PREPARING_REBALANCE
    ctx.advance(2_999)  # b joined during the delay (generation 0): re-armed once
    assert ctx.resp(ca) is None
    ctx.advance(2)
    ra, rb = jr(ctx, ca), jr(ctx, cb)
    assert ctx.coord.state is S.COMPLETING_REBALANCE
    assert (ra.generation_id, rb.generation_id) == (1, 1)
    assert ra.leader == rb.leader == a  # first member added
    assert [m.member_id for m in ra.members] == [a, b]
    assert rb.members == ()
    assert ra.protocol_name == rb.protocol_name
    assert ra.protocol_name in ("range", "roundrobin")  # a 1:1 tie: the first vote wins here
    assert ra.protocol_name == "range"


def test_protocol_vote_picks_the_most_preferred_common_protocol() -> None:
    ctx = Ctx(**{"group.initial.rebalance.delay.ms": 0})
    ctx.join_new(protocols=protos("range", "sticky"))
    ctx.join_new(protocols=protos("sticky", "range", "roundrobin"))
    ctx.join_new(protocols=protos("sticky", "range"))
    ctx.advance(0)
    assert ctx.coord.protocol_name == "sticky"  # 2 votes to 1; roundrobin is not common


def test_initial_delay_rearm_is_bounded_by_the_rebalance_timeout() -> None:
    ctx = Ctx()
    first = ctx.join_new(rebalance=7_000)
    c_first = ctx.last
    for t in (2_000, 3_000):  # new members keep arriving at t=2000 and t=5000
        ctx.advance(t)
        ctx.join_new(rebalance=7_000)
    ctx.advance(1_999)  # t = 6999
    assert ctx.resp(c_first) is None
    ctx.advance(1)  # t = 7000: 3000 + 3000 + 1000, then no time remains
    assert jr(ctx, c_first).generation_id == 1
    assert jr(ctx, c_first).leader == first
    rearms = [e for e in ctx.events if e.fields.get("reason") == "initial_rebalance_delay_rearmed"]
    assert [e.fields["duration_ms"] for e in rearms] == [3_000.0, 1_000.0]


def test_initial_delay_rearms_only_for_a_brand_new_group() -> None:
    """``newMemberAdded`` is set only at generation 0 (``addMemberAndRebalance``)."""
    ctx = Ctx()
    a, b = _stable(ctx)
    ctx.leave((a, None), (b, None))
    assert ctx.coord.state is S.EMPTY and ctx.coord.generation_id == 2
    c1 = ctx.join_new()
    c_first = ctx.last
    ctx.advance(1_000)
    ctx.join_new()
    ctx.advance(2_000)  # one initial delay after the first join, no re-arm
    assert jr(ctx, c_first).generation_id == 3
    assert jr(ctx, c_first).leader == c1


def test_rejoin_of_the_leader_in_stable_rebalances_and_completes_once_all_rejoined() -> None:
    ctx = Ctx()
    a, b = _stable(ctx)
    ca = ctx.join(a)
    assert ctx.coord.state is S.PREPARING_REBALANCE and ctx.resp(ca) is None
    assert ctx.heartbeat(b, 1) is Errors.REBALANCE_IN_PROGRESS
    cb = ctx.join(b)
    # Not the initial delay: complete as soon as every known member rejoined.
    assert jr(ctx, ca).generation_id == jr(ctx, cb).generation_id == 2
    assert ctx.coord.state is S.COMPLETING_REBALANCE


def test_follower_rejoin_in_stable_with_same_metadata_gets_the_current_generation() -> None:
    ctx = Ctx()
    a, b = _stable(ctx)
    r = jr(ctx, ctx.join(b))
    assert (r.error, r.generation_id, r.leader, r.members) == (Errors.NONE, 1, a, ())
    assert ctx.coord.state is S.STABLE
    ctx.join(b, protocols=protos("range", owned=(T1,)))
    assert ctx.coord.state is S.PREPARING_REBALANCE  # changed metadata


def test_rejoin_in_completing_rebalance_returns_generation_or_rebalances() -> None:
    ctx = Ctx()
    a, b = _joined(ctx)
    assert ctx.coord.state is S.COMPLETING_REBALANCE
    r = jr(ctx, ctx.join(a))  # lost its JoinGroup response: same metadata
    assert r.generation_id == 1 and [m.member_id for m in r.members] == [a, b]
    cs = ctx.sync(b, 1)  # parked
    ctx.join(b, protocols=protos("range", owned=(T0,)))
    assert ctx.coord.state is S.PREPARING_REBALANCE
    assert sr(ctx, cs).error is Errors.REBALANCE_IN_PROGRESS


def test_join_in_empty_after_all_left_gets_unknown_member_id() -> None:
    ctx = Ctx()
    a, b = _stable(ctx)
    ctx.leave((a, None), (b, None))
    assert ctx.coord.state is S.EMPTY
    assert ctx.coord.generation_id == 2
    assert jr(ctx, ctx.join(a)).error is Errors.UNKNOWN_MEMBER_ID


def test_group_max_size_refuses_extra_members() -> None:
    ctx = Ctx(**{"group.max.size": 1})
    _stable(ctx, 1)
    r = jr(ctx, ctx.join(instance="x"))
    assert r.error is Errors.GROUP_MAX_SIZE_REACHED


# -------------------------------------------------------------- join completion (B2)


def test_rebalance_timeout_removes_dynamic_laggards_and_keeps_static_ones() -> None:
    ctx = Ctx(**{"group.initial.rebalance.delay.ms": 0})
    a = ctx.join_new(rebalance=20_000, session=30_000)
    ctx.join(instance="s", rebalance=20_000, session=30_000)
    lazy = ctx.join_new(rebalance=20_000, session=30_000)
    ctx.advance(0)
    (s,) = ctx.coord.static_members.values()
    ctx.sync(a, 1, {a: (T0,), s: (T1,)})
    ctx.sync(s, 1, instance="s")
    ctx.sync(lazy, 1)
    assert ctx.coord.state is S.STABLE
    ca = ctx.join(a, rebalance=20_000, session=30_000)
    ctx.advance(19_999)
    assert ctx.resp(ca) is None
    ctx.advance(1)
    r = jr(ctx, ca)
    assert r.generation_id == 2 and [m.member_id for m in r.members] == [a, s]
    assert lazy not in ctx.coord.members and s in ctx.coord.members
    assert [(e.fields["member_id"], e.fields["reason"]) for e in ctx.events
            if e.kind is K.MEMBER_REMOVED] == [(lazy, "join_timeout")]


def test_a_static_laggard_kept_at_the_join_timeout_is_removed_at_the_sync_deadline() -> None:
    """K@3.9 ``onCompleteJoin`` makes every member, static or not, a pending-sync member."""
    ctx = Ctx(**{"group.initial.rebalance.delay.ms": 0})
    a = ctx.join_new(rebalance=20_000, session=120_000)
    ctx.join(instance="s", rebalance=20_000, session=120_000)
    ctx.advance(0)
    s = ctx.coord.static_members["s"]
    ctx.sync(a, 1, {a: (T0,), s: (T1,)})
    ctx.sync(s, 1, instance="s")
    ctx.join(a, rebalance=20_000, session=120_000)  # s never rejoins
    ctx.advance(20_000)
    assert ctx.coord.state is S.COMPLETING_REBALANCE and s in ctx.coord.members
    ctx.sync(a, 2, {a: (T0, T1)})
    assert ctx.coord.state is S.STABLE
    ctx.advance(19_999)
    assert s in ctx.coord.members
    ctx.advance(1)
    assert s not in ctx.coord.members and ctx.coord.state is S.PREPARING_REBALANCE
    assert [e.fields["reason"] for e in ctx.events if e.kind is K.MEMBER_REMOVED] == [
        "sync_timeout"
    ]


def test_new_leader_is_elected_when_the_leader_does_not_rejoin() -> None:
    ctx = Ctx(**{"group.initial.rebalance.delay.ms": 0})
    a = ctx.join_new(rebalance=10_000, session=30_000)
    ctx.join(instance="s", rebalance=10_000, session=30_000)
    ctx.advance(0)
    (s,) = ctx.coord.static_members.values()
    ctx.sync(a, 1)
    ctx.sync(s, 1, instance="s")
    # The leader's metadata changes arrive from the static follower only.
    assert ctx.coord.leader_id == a
    cs = ctx.join(s, instance="s", protocols=protos("range", owned=(T0,)), rebalance=10_000,
                  session=30_000)
    ctx.advance(10_000)
    r = jr(ctx, cs)
    assert r.leader == s and ctx.coord.leader_id == s
    assert a not in ctx.coord.members


def test_no_member_rejoined_waits_another_rebalance_timeout() -> None:
    ctx = Ctx(**{"group.initial.rebalance.delay.ms": 0})
    ctx.join(instance="s1", rebalance=10_000, session=60_000)
    ctx.advance(0)
    (s1,) = ctx.coord.members
    ctx.sync(s1, 1, instance="s1")
    ctx.leave(("", "nobody"))  # no-op
    # A new static member joins; the old one never rejoins.
    c2 = ctx.join(instance="s2", rebalance=10_000, session=60_000)
    ctx.advance(10_000)  # s1 did not rejoin but s2 did: s2 leads
    assert jr(ctx, c2).leader == ctx.coord.static_members["s2"]
    assert s1 in ctx.coord.members


def test_pending_member_blocks_join_until_it_expires_after_its_session_timeout() -> None:
    ctx = Ctx(**{"group.initial.rebalance.delay.ms": 0})
    a, b = _stable(ctx)
    pending = jr(ctx, ctx.join(session=8_000)).member_id  # never comes back
    ca, cb = ctx.join(a), ctx.join(b)
    assert ctx.resp(ca) is None  # waits for the pending member
    ctx.advance(7_999)
    assert ctx.resp(ca) is None
    ctx.advance(1)
    assert jr(ctx, ca).generation_id == jr(ctx, cb).generation_id == 2
    assert pending not in ctx.coord.pending_members


def test_new_member_join_times_out_after_300_s_and_is_removed() -> None:
    ctx = Ctx(**{"group.initial.rebalance.delay.ms": 0})
    old = ctx.join_new(rebalance=600_000, session=30_000)
    ctx.advance(0)
    ctx.sync(old, 1, {old: (T0,)})
    new = ctx.join_new(rebalance=600_000, session=30_000)
    c_new = ctx.last
    for _ in range(299_000 // 3_000):  # the old member heartbeats but never rejoins
        ctx.advance(3_000)
        assert ctx.heartbeat(old, 1) is Errors.REBALANCE_IN_PROGRESS
    ctx.advance(2_999)
    assert ctx.resp(c_new) is None
    ctx.advance(1)  # t = 300 000
    r = jr(ctx, c_new)
    assert (r.error, r.member_id) == (Errors.UNKNOWN_MEMBER_ID, "")
    assert new not in ctx.coord.members
    assert [e.fields["reason"] for e in ctx.events if e.kind is K.MEMBER_REMOVED] == [
        "new_member_join_timeout"
    ]


# ------------------------------------------------------------------------ SyncGroup (B3)


def test_followers_are_parked_until_the_leader_syncs_and_missing_members_get_nothing() -> None:
    ctx = Ctx()
    a, b = _joined(ctx)
    cb = ctx.sync(b, 1)
    assert ctx.resp(cb) is None
    ca = ctx.sync(a, 1, {a: (T0, T1), "not-a-member": (("t", 9),)})
    assert sr(ctx, ca).assignment.partitions == (T0, T1)
    assert sr(ctx, cb).assignment == Assignment()  # filled in for the missing member
    assert sr(ctx, cb).protocol_name == "range"
    assert ctx.coord.state is S.STABLE
    # Stable: any member gets its stored assignment again.
    assert sr(ctx, ctx.sync(a, 1)).assignment.partitions == (T0, T1)


def test_sync_errors_in_validation_order_and_by_state() -> None:
    ctx = Ctx()
    assert sr(ctx, ctx.sync("x", 0)).error is Errors.UNKNOWN_MEMBER_ID  # no group
    a, b = _joined(ctx)
    assert sr(ctx, ctx.sync("x", 1)).error is Errors.UNKNOWN_MEMBER_ID
    assert sr(ctx, ctx.sync(a, 0)).error is Errors.ILLEGAL_GENERATION
    assert sr(ctx, ctx.sync(a, 1, protocol_name="sticky")).error is (
        Errors.INCONSISTENT_GROUP_PROTOCOL
    )
    ctx.sync(a, 1)
    ctx.sync(b, 1)
    ctx.join(a)
    assert ctx.coord.state is S.PREPARING_REBALANCE
    assert sr(ctx, ctx.sync(b, 1)).error is Errors.REBALANCE_IN_PROGRESS


def test_members_that_do_not_sync_within_the_rebalance_timeout_are_removed() -> None:
    ctx = Ctx(**{"group.initial.rebalance.delay.ms": 0})
    a = ctx.join_new(rebalance=15_000, session=30_000)
    b = ctx.join_new(rebalance=15_000, session=30_000)
    ctx.advance(0)
    ca = ctx.sync(a, 1, {a: (T0,), b: (T1,)})
    assert ctx.coord.state is S.STABLE and sr(ctx, ca).error is Errors.NONE
    ctx.advance(14_999)
    assert ctx.coord.state is S.STABLE
    ctx.advance(1)
    assert b not in ctx.coord.members
    assert ctx.coord.state is S.PREPARING_REBALANCE
    assert [e.fields["reason"] for e in ctx.events if e.kind is K.MEMBER_REMOVED] == [
        "sync_timeout"
    ]


def test_sync_deadline_is_cancelled_once_everyone_synced() -> None:
    ctx = Ctx()
    a, b = _stable(ctx)
    for _ in range(30):  # 90 s, past the 60 s rebalance timeout of the sync deadline
        ctx.advance(3_000)
        assert ctx.heartbeat(a, 1) is ctx.heartbeat(b, 1) is Errors.NONE
    assert ctx.coord.state is S.STABLE and set(ctx.coord.members) == {a, b}


# ------------------------------------------------------------------------ Heartbeat (B4)


def test_heartbeat_answers_by_state_and_check_order() -> None:
    ctx = Ctx()
    assert ctx.heartbeat("x", 0) is Errors.UNKNOWN_MEMBER_ID  # no group
    a, b = _joined(ctx)
    assert ctx.heartbeat(a, 1) is Errors.NONE  # CompletingRebalance
    assert ctx.heartbeat("x", 1) is Errors.UNKNOWN_MEMBER_ID
    assert ctx.heartbeat(a, 0) is Errors.ILLEGAL_GENERATION
    ctx.sync(a, 1)
    ctx.sync(b, 1)
    assert ctx.heartbeat(b, 1) is Errors.NONE  # Stable
    ctx.join(a)
    assert ctx.heartbeat(b, 1) is Errors.REBALANCE_IN_PROGRESS  # PreparingRebalance
    assert ctx.heartbeat(b, 0) is Errors.ILLEGAL_GENERATION
    ctx.join(b)
    ctx.leave((a, None), (b, None))
    assert ctx.coord.state is S.EMPTY
    assert ctx.heartbeat(a, 2) is Errors.UNKNOWN_MEMBER_ID


def test_static_heartbeat_with_a_replaced_member_id_is_fenced() -> None:
    ctx = Ctx(**{"group.initial.rebalance.delay.ms": 0})
    ctx.join(instance="i")
    ctx.advance(0)
    (old,) = ctx.coord.members
    ctx.sync(old, 1, instance="i")
    r = jr(ctx, ctx.join(instance="i"))  # restarted: new id, same generation
    assert r.member_id != old and r.generation_id == 1 and r.skip_assignment
    assert ctx.heartbeat(old, 1, instance="i") is Errors.FENCED_INSTANCE_ID
    assert ctx.heartbeat(r.member_id, 1, instance="i") is Errors.NONE
    assert ctx.heartbeat(r.member_id, 1, instance="other") is Errors.UNKNOWN_MEMBER_ID


def test_session_expiry_removes_the_member_and_rebalances() -> None:
    ctx = Ctx()
    a, b = _stable(ctx)  # b's last sign of life: its SyncGroup at t = 6000
    for _ in range(3):
        ctx.advance(3_000)
        assert ctx.heartbeat(a, 1) is Errors.NONE
    ctx.advance(999)  # t = 15 999
    assert b in ctx.coord.members
    ctx.advance(1)  # session.timeout.ms = 10 000 after the SyncGroup
    assert ctx.heartbeat(a, 1) is Errors.REBALANCE_IN_PROGRESS
    assert ctx.coord.state is S.PREPARING_REBALANCE
    assert b not in ctx.coord.members
    assert [e.fields["reason"] for e in ctx.events if e.kind is K.MEMBER_REMOVED] == [
        "session_timeout"
    ]


def test_heartbeats_during_preparing_rebalance_keep_the_session_alive() -> None:
    ctx = Ctx()
    a, b = _stable(ctx)
    ctx.join(a)
    for _ in range(10):  # 30 s of REBALANCE_IN_PROGRESS heartbeats from b
        ctx.advance(3_000)
        assert ctx.heartbeat(b, 1) is Errors.REBALANCE_IN_PROGRESS
    assert b in ctx.coord.members
    assert ctx.coord.state is S.PREPARING_REBALANCE


def test_member_awaiting_join_needs_no_heartbeat() -> None:
    ctx = Ctx()
    a, b = _stable(ctx)
    ca = ctx.join(a)
    for _ in range(7):  # a is parked, well past its 10 s session timeout; b heartbeats
        ctx.advance(3_000)
        assert ctx.heartbeat(b, 1) is Errors.REBALANCE_IN_PROGRESS
    assert a in ctx.coord.members and ctx.resp(ca) is None
    ctx.join(b)
    assert jr(ctx, ca).generation_id == 2


def test_commit_counts_as_a_heartbeat() -> None:
    ctx = Ctx()
    a, b = _stable(ctx)
    for _ in range(5):
        ctx.advance(3_000)
        ctx.heartbeat(a, 1)
        assert ctx.commit(b, 1, {T1: 1}) is Errors.NONE
    assert set(ctx.coord.members) == {a, b} and ctx.coord.state is S.STABLE


# ------------------------------------------------------------------------ LeaveGroup (B5)


def test_leave_group_batch_removes_known_members_and_reports_each() -> None:
    ctx = Ctx()
    a, b = _stable(ctx)
    r = ctx.leave((b, None), ("ghost", None))
    assert r.error is Errors.NONE
    assert r.member_errors == ((b, None, Errors.NONE), ("ghost", None, Errors.UNKNOWN_MEMBER_ID))
    assert ctx.coord.state is S.PREPARING_REBALANCE
    assert list(ctx.coord.members) == [a]


def test_leave_in_completing_rebalance_cancels_parked_syncs() -> None:
    ctx = Ctx()
    a, b = _joined(ctx)
    cb = ctx.sync(b, 1)
    ctx.leave((a, None))
    assert sr(ctx, cb).error is Errors.REBALANCE_IN_PROGRESS
    assert ctx.coord.state is S.PREPARING_REBALANCE
    assert ctx.coord.leader_id == b  # the next oldest member


def test_leave_of_a_parked_joiner_answers_its_join_with_unknown_member() -> None:
    ctx = Ctx()
    _, b = _stable(ctx)
    cb = ctx.join(b, protocols=protos("range", owned=(T1,)))  # changed metadata: parked
    assert ctx.resp(cb) is None
    ctx.leave((b, None))
    assert jr(ctx, cb).error is Errors.UNKNOWN_MEMBER_ID


def test_admin_leave_by_instance_id_and_pending_member_leave() -> None:
    ctx = Ctx(**{"group.initial.rebalance.delay.ms": 0})
    ctx.join(instance="s")
    ctx.advance(0)
    pending = jr(ctx, ctx.join()).member_id
    r = ctx.leave(("", "s"), (pending, None), ("", "nope"))
    assert [e for _, _, e in r.member_errors] == [Errors.NONE, Errors.NONE,
                                                   Errors.UNKNOWN_MEMBER_ID]
    assert ctx.coord.members == {} and ctx.coord.pending_members == frozenset()


def test_leave_with_a_fenced_instance_is_refused() -> None:
    ctx = Ctx(**{"group.initial.rebalance.delay.ms": 0})
    ctx.join(instance="s")
    ctx.advance(0)
    r = ctx.leave(("not-the-id", "s"))
    assert r.member_errors[0][2] is Errors.FENCED_INSTANCE_ID


def test_leave_from_a_missing_group() -> None:
    ctx = Ctx()
    r = ctx.leave(("x", None))
    assert r.member_errors == (("x", None, Errors.UNKNOWN_MEMBER_ID),)


# ------------------------------------------------------------------ OffsetCommit (B5)


def test_commit_by_state_and_generation() -> None:
    ctx = Ctx()
    a, b = _joined(ctx)
    assert ctx.commit(a, 1, {T0: 5}) is Errors.REBALANCE_IN_PROGRESS  # CompletingRebalance
    ctx.sync(a, 1)
    ctx.sync(b, 1)
    assert ctx.commit(a, 1, {T0: 5}) is Errors.NONE  # Stable
    assert ctx.commit(a, 0, {T0: 6}) is Errors.ILLEGAL_GENERATION
    assert ctx.commit("x", 1, {T0: 6}) is Errors.UNKNOWN_MEMBER_ID
    assert ctx.commit("", -1, {T0: 6}) is Errors.UNKNOWN_MEMBER_ID  # non-empty group
    ctx.join(a)
    assert ctx.commit(b, 1, {T1: 7}) is Errors.NONE  # PreparingRebalance: still generation 1
    assert ctx.coord.committed_offsets() == {T0: 5, T1: 7}
    ctx.join(b)
    assert ctx.commit(b, 1, {T1: 8}) is Errors.ILLEGAL_GENERATION  # a zombie of generation 1
    ctx.leave((a, None), (b, None))
    assert ctx.coord.state is S.EMPTY
    assert ctx.commit(a, 2, {T0: 9}) is Errors.UNKNOWN_MEMBER_ID
    assert ctx.commit("", -1, {T0: 9}) is Errors.NONE  # admin / manual commit
    assert ctx.coord.committed_offsets() == {T0: 9, T1: 7}


def test_commit_to_a_missing_group() -> None:
    ctx = Ctx()
    assert ctx.commit("m", 3, {T0: 1}) is Errors.ILLEGAL_GENERATION
    assert not ctx.coord.exists
    assert ctx.commit("", -1, {T0: 1}) is Errors.NONE
    assert ctx.coord.exists and ctx.coord.state is S.EMPTY


def test_commit_response_carries_an_error_per_partition() -> None:
    ctx = Ctx()
    a, _ = _stable(ctx)
    corr = ctx.send(OffsetCommitRequest(99, "g", generation_id_or_member_epoch=0, member_id=a,
                                        offsets={T0: 1, T1: 2}))
    r = ctx.resp(corr)
    assert isinstance(r, OffsetCommitResponse)
    assert r.partition_errors == {T0: Errors.ILLEGAL_GENERATION, T1: Errors.ILLEGAL_GENERATION}


def test_offset_fetch_answers_in_any_state() -> None:
    ctx = Ctx()
    corr = ctx.send(OffsetFetchRequest(50, "g", partitions=(T0,)))
    r = ctx.resp(corr)
    assert isinstance(r, OffsetFetchResponse) and r.offsets == {T0: None}
    a, _ = _stable(ctx)
    ctx.commit(a, 1, {T0: 12})
    ctx.join(a)
    corr = ctx.send(OffsetFetchRequest(51, "g", partitions=(T0, T1)))
    r = ctx.resp(corr)
    assert isinstance(r, OffsetFetchResponse) and r.offsets == {T0: 12, T1: None}
    corr = ctx.send(OffsetFetchRequest(52, "g"))
    r = ctx.resp(corr)
    assert isinstance(r, OffsetFetchResponse) and r.offsets == {T0: 12}


# ------------------------------------------------------------ static membership (B9)


def test_static_rejoin_in_stable_replaces_the_id_without_rebalance() -> None:
    ctx = Ctx(**{"group.initial.rebalance.delay.ms": 0})
    ctx.join(instance="i1")
    ctx.join(instance="i2")
    ctx.advance(0)
    i1, i2 = ctx.coord.static_members["i1"], ctx.coord.static_members["i2"]
    ctx.sync(i1, 1, {i1: (T0,), i2: (T1,)}, instance="i1")
    ctx.sync(i2, 1, instance="i2")
    events_before = len(ctx.events)
    r = jr(ctx, ctx.join(instance="i2"))
    assert r.generation_id == 1 and r.leader == i1 and not r.skip_assignment
    assert r.members == ()
    assert ctx.coord.state is S.STABLE
    new = r.member_id
    assert sr(ctx, ctx.sync(new, 1, instance="i2")).assignment.partitions == (T1,)
    kinds = [e.kind for e in ctx.events[events_before:]]
    assert K.REBALANCE_STARTED not in kinds
    assert kinds.count(K.MEMBER_REMOVED) == kinds.count(K.MEMBER_JOINED) == 1


def test_static_rejoin_changing_the_selected_protocol_rebalances() -> None:
    ctx = Ctx(**{"group.initial.rebalance.delay.ms": 0})
    ctx.join(instance="i1", protocols=protos("range", "roundrobin"))
    ctx.advance(0)
    i1 = ctx.coord.static_members["i1"]
    ctx.sync(i1, 1, instance="i1")
    assert ctx.coord.protocol_name == "range"
    r = jr(ctx, ctx.join(instance="i1", protocols=protos("roundrobin", "range")))
    # The vote would change: a rebalance, which the lone member completes at once.
    assert r.generation_id == 2 and r.protocol_name == "roundrobin"
    assert ctx.coord.state is S.COMPLETING_REBALANCE
    assert [e.kind for e in ctx.events].count(K.REBALANCE_STARTED) == 2


def test_static_rejoin_during_completing_rebalance_forces_a_rebalance_and_fences() -> None:
    ctx = Ctx(**{"group.initial.rebalance.delay.ms": 0})
    ctx.join(instance="i1")
    ctx.join(instance="i2")
    ctx.advance(0)
    i2 = ctx.coord.static_members["i2"]
    c_old = ctx.sync(i2, 1, instance="i2")  # parked: the leader has not synced
    ctx.join(instance="i2")
    assert sr(ctx, c_old).error is Errors.FENCED_INSTANCE_ID
    assert ctx.coord.state is S.PREPARING_REBALANCE


def test_static_rejoin_during_preparing_rebalance_just_joins() -> None:
    ctx = Ctx(**{"group.initial.rebalance.delay.ms": 0})
    ctx.join(instance="i1")
    ctx.join(instance="i2")
    ctx.advance(0)
    i1, i2 = ctx.coord.static_members["i1"], ctx.coord.static_members["i2"]
    ctx.sync(i1, 1, instance="i1")
    ctx.sync(i2, 1, instance="i2")
    c_old = ctx.join(i1, instance="i1")
    c_new = ctx.join(instance="i1")  # the process restarted meanwhile
    assert jr(ctx, c_old).error is Errors.FENCED_INSTANCE_ID
    assert ctx.resp(c_new) is None
    c2 = ctx.join(i2, instance="i2")
    assert jr(ctx, c_new).generation_id == jr(ctx, c2).generation_id == 2
    assert jr(ctx, c_new).leader == jr(ctx, c_new).member_id  # took over the leader's role


def test_pending_member_cannot_be_static() -> None:
    ctx = Ctx()
    pending = jr(ctx, ctx.join()).member_id
    assert jr(ctx, ctx.join(pending, instance="i")).error is Errors.INVALID_REQUEST


# ------------------------------------------------------------------------ states (B1)


def test_every_valid_transition_is_taken_and_announced() -> None:
    ctx = Ctx()
    a, b = _stable(ctx)  # Empty -> Preparing -> Completing -> Stable
    ctx.join(a)  # Stable -> Preparing
    ctx.join(b)  # Preparing -> Completing
    ctx.join(b, protocols=protos("range", owned=(T0,)))  # Completing -> Preparing
    ctx.join(a)  # -> Completing
    ctx.leave((a, None), (b, None))  # Completing -> Preparing -> Empty
    assert ctx.states() == [
        "PreparingRebalance", "CompletingRebalance", "Stable",
        "PreparingRebalance", "CompletingRebalance",
        "PreparingRebalance", "CompletingRebalance",
        "PreparingRebalance", "Empty",
    ]
    gens = [e.fields["generation"] for e in ctx.events if e.kind is K.GROUP_STATE_CHANGED
            and e.fields["state"] in ("CompletingRebalance", "Empty")
            and e.fields["reason"] != "created"]
    assert gens == [1, 2, 3, 4]
    seen = set(zip(ctx.states(), ctx.states()[1:], strict=False))
    for prev, nxt in seen:
        assert S(prev) in VALID_PREVIOUS_STATES[S(nxt)]


@pytest.mark.parametrize("where", ["preparing", "completing", "stable", "empty"])
def test_unload_turns_the_group_dead_and_answers_not_coordinator(where: str) -> None:
    ctx = Ctx()
    a, b = _joined(ctx) if where == "completing" else _stable(ctx)
    parked = None
    if where == "completing":
        parked = ctx.sync(b, 1)
    elif where == "preparing":
        parked = ctx.join(a)
    elif where == "empty":
        ctx.leave((a, None), (b, None))
    ctx._take(ctx.coord.unload(ctx.now))
    assert ctx.coord.state is S.DEAD
    if parked is not None:
        assert ctx.responses[parked].error is Errors.NOT_COORDINATOR
    assert ctx.heartbeat(a, 1) is Errors.NOT_COORDINATOR
    assert jr(ctx, ctx.join()).error is Errors.NOT_COORDINATOR
    assert ctx.commit(a, 1, {T0: 1}) is Errors.NOT_COORDINATOR
    corr = ctx.send(FindCoordinatorRequest(77, "g"))
    assert ctx.responses[corr].error is Errors.COORDINATOR_NOT_AVAILABLE
    assert ctx.coord.next_deadline() is None


def test_invalid_transitions_are_refused() -> None:
    ctx = Ctx()
    with pytest.raises(IllegalStateTransition):
        ctx.coord._transition(S.STABLE, "bug")  # Empty -> Stable
    assert VALID_PREVIOUS_STATES[S.COMPLETING_REBALANCE] == {S.PREPARING_REBALANCE}
    assert VALID_PREVIOUS_STATES[S.EMPTY] == {S.PREPARING_REBALANCE}
    assert VALID_PREVIOUS_STATES[S.DEAD] == set(S)


def test_requests_for_another_group_are_not_ours() -> None:
    ctx = Ctx()
    corr = ctx.send(HeartbeatRequest(5, "other", generation_id=1, member_id="m"))
    assert ctx.responses[corr].error is Errors.NOT_COORDINATOR
    corr = ctx.send(FindCoordinatorRequest(6, "g"))
    r = ctx.responses[corr]
    assert isinstance(r, FindCoordinatorResponse) and r.node_id == 3


def test_every_event_names_the_group_and_generation() -> None:
    ctx = Ctx()
    _stable(ctx)
    assert ctx.events
    for e in ctx.events:
        assert e.fields["group"] == "g" and "generation" in e.fields and e.fields["broker"] == 3


# ------------------------------------------------------------------ broker config (B6)


def test_broker_defaults_follow_the_kafka_version() -> None:
    new = GroupCoordinatorConfig.for_version("3.9")
    assert (new.group_min_session_timeout_ms, new.group_max_session_timeout_ms,
            new.group_initial_rebalance_delay_ms) == (6_000, 1_800_000, 3_000)
    assert new.group_max_size == 2**31 - 1
    assert (new.group_consumer_session_timeout_ms, new.group_consumer_heartbeat_interval_ms,
            new.group_consumer_assignors) == (45_000, 5_000, ("uniform", "range"))
    assert new.new_member_join_timeout_ms == 300_000
    assert GroupCoordinatorConfig.for_version("2.2").group_max_session_timeout_ms == 300_000
    assert GroupCoordinatorConfig.for_version("2.3").group_max_session_timeout_ms == 1_800_000
    assert GroupCoordinatorConfig.for_version("0.10.2").group_initial_rebalance_delay_ms == 0
    cfg = GroupCoordinatorConfig.from_kafka({"group.initial.rebalance.delay.ms": "0",
                                             "group.consumer.assignors": "range,uniform"})
    assert cfg.group_initial_rebalance_delay_ms == 0
    assert cfg.group_consumer_assignors == ("range", "uniform")


@pytest.mark.parametrize("props", [
    {"group.min.session.timeout.ms": 10, "group.max.session.timeout.ms": 5},
    {"group.initial.rebalance.delay.ms": -1},
    {"group.consumer.session.timeout.ms": 30_000},
    {"group.consumer.heartbeat.interval.ms": 20_000},
    {"group.max.size": "many"},
    {"kafka.version": "0.9.0"},
    {"kafka.version": "three"},
])
def test_bad_broker_config_is_refused(props: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        GroupCoordinatorConfig.from_kafka(props)


# --------------------------------------------------------------------------- helpers


def _joined(ctx: Ctx) -> tuple[str, str]:
    """Two dynamic members through the initial delay: CompletingRebalance, generation 1."""
    a = ctx.join_new()
    b = ctx.join_new()
    # b joined generation 0 during the delay, so InitialDelayedJoin re-arms once.
    ctx.advance(2 * ctx.config.group_initial_rebalance_delay_ms)
    assert ctx.coord.state is S.COMPLETING_REBALANCE and ctx.coord.generation_id == 1
    return a, b


def _stable(ctx: Ctx, n: int = 2) -> tuple[str, ...]:
    """n dynamic members, joined and synced: Stable at generation 1; the first leads."""
    ids = [ctx.join_new() for _ in range(n)]
    ctx.advance(2 * ctx.config.group_initial_rebalance_delay_ms)
    ctx.sync(ids[0], 1, {mid: (("t", i),) for i, mid in enumerate(ids)})
    for mid in ids[1:]:
        ctx.sync(mid, 1)
    assert ctx.coord.state is S.STABLE
    return tuple(ids)
