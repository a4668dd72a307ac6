"""The share-group coordinator (KIP-932) on a fake clock: ShareGroupHeartbeat's joins,
epochs, leaves and session expiry, and the simple assignor's balance and sharing.

Each test names the ``GroupMetadataManager`` share path or assignor step it follows
(facts: notes/share-facts.md, sections 2 and 7).
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from emulator.events import EventKind
from emulator.modern.errors import Errors
from emulator.modern.messages import (
    Emit,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
    TopicPartition,
)
from emulator.modern.share_group import (
    DEFAULT_SESSION_TIMEOUT_MS,
    ShareGroupCoordinator,
    ShareGroupState,
    simple_assignment,
)

G = "g"


def coordinator(partitions: int = 4, **kw: int) -> ShareGroupCoordinator:
    return ShareGroupCoordinator(G, topics={"t": partitions}, rng=random.Random(1), **kw)


def hb(
    c: ShareGroupCoordinator,
    now: float,
    member: str,
    epoch: int,
    topics: tuple[str, ...] | None = ("t",),
) -> ShareGroupHeartbeatResponse:
    out = c.handle(now, ShareGroupHeartbeatRequest(1, G, member, epoch, None, topics))
    (resp,) = [o for o in out if isinstance(o, ShareGroupHeartbeatResponse)]
    return resp


def events(out: list[object], kind: EventKind) -> list[Emit]:
    return [o for o in out if isinstance(o, Emit) and o.kind is kind]


def tps(*ps: int) -> tuple[TopicPartition, ...]:
    return tuple(("t", p) for p in ps)


class TestHeartbeat:
    def test_a_join_gets_every_partition_at_once(self) -> None:
        c = coordinator()
        r = hb(c, 0.0, "a", 0)
        assert (r.error, r.member_id, r.member_epoch) == (Errors.NONE, "a", 1)
        assert r.assignment == tps(0, 1, 2, 3)
        assert c.state is ShareGroupState.STABLE and c.group_epoch == 1

    def test_a_second_member_takes_half_and_the_first_hands_it_over_without_revoking(
        self,
    ) -> None:
        """``ShareGroupAssignmentBuilder``: the target applies on the next heartbeat."""
        c = coordinator()
        hb(c, 0.0, "a", 0)
        rb = hb(c, 10.0, "b", 0)
        assert rb.member_epoch == 2 and rb.assignment is not None and len(rb.assignment) == 2
        ra = hb(c, 20.0, "a", 1, None)
        assert ra.member_epoch == 2 and ra.assignment is not None
        assert set(ra.assignment) | set(rb.assignment) == set(tps(0, 1, 2, 3))
        assert not set(ra.assignment) & set(rb.assignment)
        # Nothing changed since: no assignment in the answer.
        assert hb(c, 30.0, "a", 2, None).assignment is None

    def test_the_join_needs_a_subscription(self) -> None:
        assert hb(coordinator(), 0.0, "a", 0, None).error is Errors.INVALID_REQUEST
        assert hb(coordinator(), 0.0, "a", -2).error is Errors.INVALID_REQUEST

    def test_epochs_ahead_or_stale_are_fenced_but_the_previous_one_passes(self) -> None:
        """``throwIfShareGroupMemberEpochIsInvalid``."""
        c = coordinator()
        hb(c, 0.0, "a", 0)
        hb(c, 1.0, "b", 0)
        assert hb(c, 2.0, "a", 5, None).error is Errors.FENCED_MEMBER_EPOCH
        hb(c, 3.0, "a", 1, None)  # a moves to epoch 2, previous 1
        assert hb(c, 4.0, "a", 1, None).error is Errors.NONE  # its answer was lost
        assert hb(c, 5.0, "b", 0, None).error is Errors.INVALID_REQUEST  # no subscription
        assert hb(c, 6.0, "zz", 3).error is Errors.UNKNOWN_MEMBER_ID

    def test_the_group_is_full_at_its_max_size(self) -> None:
        c = coordinator(max_size=2)
        hb(c, 0.0, "a", 0)
        hb(c, 0.0, "b", 0)
        assert hb(c, 0.0, "c", 0).error is Errors.GROUP_MAX_SIZE_REACHED

    def test_a_member_id_is_drawn_when_the_request_has_none(self) -> None:
        r = hb(coordinator(), 0.0, "", 0)
        assert r.member_id and len(r.member_id) == 22


class TestLeaving:
    def test_a_leave_bumps_the_epoch_and_the_others_take_its_partitions(self) -> None:
        """``shareGroupFenceMember``."""
        c = coordinator()
        hb(c, 0.0, "a", 0)
        hb(c, 0.0, "b", 0)
        hb(c, 0.0, "a", 1, None)
        out = c.handle(1.0, ShareGroupHeartbeatRequest(2, G, "b", -1))
        assert events(out, EventKind.MEMBER_REMOVED)[0].fields["reason"] == "leave"
        assert c.group_epoch == 3
        r = hb(c, 2.0, "a", 2, None)
        assert r.member_epoch == 3 and r.assignment == tps(0, 1, 2, 3)

    def test_a_silent_member_is_fenced_after_the_session_timeout(self) -> None:
        c = coordinator()
        hb(c, 0.0, "a", 0)
        assert c.next_deadline() == DEFAULT_SESSION_TIMEOUT_MS
        assert c.poll(DEFAULT_SESSION_TIMEOUT_MS - 1) == []
        out = c.poll(DEFAULT_SESSION_TIMEOUT_MS)
        assert events(out, EventKind.MEMBER_REMOVED)[0].fields["reason"] == "session_timeout"
        assert c.state is ShareGroupState.EMPTY and not c.members

    def test_a_heartbeat_moves_the_session_deadline(self) -> None:
        c = coordinator()
        hb(c, 0.0, "a", 0)
        hb(c, 10_000.0, "a", 1, None)
        assert c.poll(DEFAULT_SESSION_TIMEOUT_MS) == []
        assert c.session_deadline("a") == 10_000.0 + DEFAULT_SESSION_TIMEOUT_MS


def _shares(assign: dict[str, frozenset[TopicPartition]]) -> Counter[TopicPartition]:
    return Counter(tp for parts in assign.values() for tp in parts)


class TestSimpleAssignor:
    @pytest.mark.parametrize(("members", "partitions"), [(1, 4), (2, 4), (3, 4), (4, 4), (3, 10)])
    def test_fewer_members_than_partitions_one_owner_each_balanced(
        self, members: int, partitions: int
    ) -> None:
        ms = {f"m{i}": frozenset({"t"}) for i in range(members)}
        a = simple_assignment(ms, {}, {"t": partitions})
        assert set(_shares(a).values()) == {1} and len(_shares(a)) == partitions
        sizes = [len(p) for p in a.values()]
        assert max(sizes) - min(sizes) <= 1

    @pytest.mark.parametrize(
        ("members", "partitions", "sharing"), [(3, 2, 2), (5, 2, 3), (8, 4, 2)]
    )
    def test_more_members_than_partitions_share_them(
        self, members: int, partitions: int, sharing: int
    ) -> None:
        """``desiredSharing = ceil(M / P)`` members per partition."""
        ms = {f"m{i}": frozenset({"t"}) for i in range(members)}
        a = simple_assignment(ms, {}, {"t": partitions})
        assert set(_shares(a).values()) == {sharing}
        assert all(a.values())  # nobody idle

    def test_stickiness_a_joiner_moves_only_what_balance_needs(self) -> None:
        ms = {"m0": frozenset({"t"}), "m1": frozenset({"t"})}
        first = simple_assignment(ms, {}, {"t": 6})
        ms["m2"] = frozenset({"t"})
        second = simple_assignment(ms, first, {"t": 6})
        assert [len(second[m]) for m in ("m0", "m1", "m2")] == [2, 2, 2]
        assert second["m0"] <= first["m0"] and second["m1"] <= first["m1"]

    def test_unsubscribed_topics_are_dropped(self) -> None:
        ms = {"m0": frozenset({"u"})}
        a = simple_assignment(ms, {"m0": frozenset({("t", 0)})}, {"t": 2, "u": 1})
        assert a == {"m0": frozenset({("u", 0)})}


class TestSimpleAssignorAsShipped:
    """``SimpleHomogeneousAssignmentBuilder`` (trunk July 2025, in 4.2): the outcomes
    worked through in notes/share-facts.md section 7.2."""

    def test_members_are_numbered_in_java_hashmap_order(self) -> None:
        from emulator.modern.share_group import member_order

        # "z": hash 122, bucket 10; "ba": hash 3135, bucket 15; "aa": 3104, bucket 0.
        assert member_order(["ba", "z", "aa"]) == ["aa", "z", "ba"]

    def test_a_joiner_takes_exactly_what_the_holder_gives_back(self) -> None:
        first = {"a": frozenset({("t", p) for p in range(4)})}
        ms = {"a": frozenset({"t"}), "b": frozenset({"t"})}
        a = simple_assignment(ms, first, {"t": 4})
        assert len(a["a"]) == len(a["b"]) == 2
        assert a["a"] < first["a"] and not a["a"] & a["b"]

    def test_three_members_on_two_partitions_the_first_index_holds_both(self) -> None:
        from emulator.modern.share_group import member_order

        ms = {f"m{i}": frozenset({"t"}) for i in range(3)}
        a = simple_assignment(ms, {}, {"t": 2})
        first = member_order(ms)[0]
        assert len(a[first]) == 2 and sorted(len(p) for p in a.values()) == [1, 1, 2]
        assert set(_shares(a).values()) == {2}

    def test_a_leavers_partitions_go_to_the_survivors_who_keep_theirs(self) -> None:
        ms = {f"m{i}": frozenset({"t"}) for i in range(3)}
        before = simple_assignment(ms, {}, {"t": 6})
        gone = sorted(ms)[1]
        del ms[gone]
        after = simple_assignment(ms, {k: v for k, v in before.items() if k != gone}, {"t": 6})
        for mid in ms:
            assert before[mid] <= after[mid] and len(after[mid]) == 3
        assert set(_shares(after).values()) == {1}
