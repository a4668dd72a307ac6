"""Assignors of the broker-coordinated protocols (kafka-protocols.md B7, B8, C6).

Hand examples come from Kafka's own unit tests (test names cited; K@3.9
``clients/src/test/.../consumer/internals/AbstractStickyAssignorTest.java`` and
``AbstractPartitionAssignorTest.java``, K@trunk ``group-coordinator/src/test/.../assignor/``)
and from the Kafka javadoc. Then seeded property sweeps over 1..60 members,
1..300 partitions, several topics, static and dynamic members, identical and
mixed subscriptions: validity (every subscribed partition exactly once, only
to subscribers), balance, stickiness, the cooperative rule and determinism.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

import pytest

from emulator.javahash import java_string_sort_key
from emulator.modern.assignors import (
    CLIENT_ASSIGNORS,
    SERVER_ASSIGNORS,
    ClientAssignor,
    CooperativeAssignmentError,
    CooperativeStickyAssignor,
    GroupSpec,
    MemberSpec,
    MemberSubscription,
    RangeAssignor,
    RoundRobinAssignor,
    ServerRangeAssignor,
    StickyAssignor,
    SubscriptionType,
    UniformAssignor,
    client_assignor,
    partitions_transferring_ownership,
    server_assignor,
    validate_cooperative_assignment,
)
from emulator.modern.assignors._java import java_hashmap_capacity, java_hashmap_order, java_key
from emulator.modern.assignors.sticky import sticky_assign
from emulator.modern.messages import JoinGroupMember, Subscription

TP = tuple[str, int]
M = MemberSubscription


def members_of(*subs: M) -> dict[str, M]:
    return {m.member_id: m for m in subs}


def tps(topic: str, *partitions: int) -> list[TP]:
    return [(topic, p) for p in partitions]


def as_sets(result: Mapping[str, tuple[TP, ...] | frozenset[TP]]) -> dict[str, set[TP]]:
    return {m: set(v) for m, v in result.items()}


def sorted_strings(partitions: tuple[TP, ...]) -> str:
    """Kafka's ``toSortedString``: ``"t1-0, t1-3, ..."`` sorted as strings."""
    return ", ".join(sorted(f"{t}-{p}" for t, p in partitions))


# ============================================================================ Java orders


class TestJavaOrders:
    def test_hashmap_order_of_kafka_test_consumers(self) -> None:
        # "consumerN".hashCode() differ in the last char, so buckets 12, 11, 10, 9.
        order = java_hashmap_order(["consumer1", "consumer2", "consumer3", "consumer4"])
        assert order == ["consumer4", "consumer3", "consumer2", "consumer1"]

    def test_hashmap_capacity_grows_past_three_quarters(self) -> None:
        assert [java_hashmap_capacity(n) for n in (0, 12, 13, 24, 25, 48, 49)] == [
            16, 16, 32, 32, 64, 64, 128,
        ]  # fmt: skip

    def test_java_key_is_utf16_order(self) -> None:
        rng = random.Random(7)
        alphabet = ["a", "b", "Z", "-", "\u00e9", "\uffff", "\ue000", "\U0001f600", "\U00010000"]
        words = ["".join(rng.choices(alphabet, k=rng.randint(0, 4))) for _ in range(300)]
        assert sorted(words, key=java_key) == sorted(words, key=java_string_sort_key)
        # U+FFFF sorts after the surrogate pair of U+1F600 in Java, before it in Python.
        assert java_key("\U0001f600") < java_key("\uffff")

    def test_hashmap_bucket_collisions_keep_insertion_order(self) -> None:
        # "Aa" and "BB" share String.hashCode 2112.
        assert java_hashmap_order(["BB", "Aa"]) == ["BB", "Aa"]
        assert java_hashmap_order(["Aa", "BB"]) == ["Aa", "BB"]


# ============================================================================ range (client)


class TestClientRange:
    def test_javadoc_example(self) -> None:
        # RangeAssignor javadoc: C0, C1; t0, t1 with 3 partitions each.
        members = members_of(M("C0", topics=("t0", "t1")), M("C1", topics=("t0", "t1")))
        result = RangeAssignor().assign({"t0": 3, "t1": 3}, members)
        assert result == {
            "C0": (("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)),
            "C1": (("t0", 2), ("t1", 2)),
        }

    def test_static_members_first_by_instance_id(self) -> None:
        # MemberInfo.compareTo: static members (by instance id) before dynamic (by member id).
        members = members_of(
            M("a-dynamic", topics=("t",)),
            M("z-static", group_instance_id="i1", topics=("t",)),
            M("b-static", group_instance_id="i2", topics=("t",)),
        )
        result = RangeAssignor().assign({"t": 4}, members)
        assert result == {
            "z-static": (("t", 0), ("t", 1)),
            "b-static": (("t", 2),),
            "a-dynamic": (("t", 3),),
        }

    def test_member_id_order_is_java_string_order(self) -> None:
        # "c-10" < "c-2" in String.compareTo.
        members = members_of(M("c-2", topics=("t",)), M("c-10", topics=("t",)))
        assert RangeAssignor().assign({"t": 3}, members) == {
            "c-10": (("t", 0), ("t", 1)),
            "c-2": (("t", 2),),
        }

    def test_unknown_and_empty_topics_are_skipped(self) -> None:
        members = members_of(M("a", topics=("t", "missing", "empty")))
        assert RangeAssignor().assign({"t": 1, "empty": 0, "other": 5}, members) == {
            "a": (("t", 0),)
        }

    def test_members_key_must_match_member_id(self) -> None:
        with pytest.raises(ValueError, match="holds member"):
            RangeAssignor().assign({"t": 1}, {"x": M("y", topics=("t",))})


# ============================================================================ roundrobin


class TestRoundRobin:
    def test_javadoc_identical_subscriptions(self) -> None:
        members = members_of(M("C0", topics=("t0", "t1")), M("C1", topics=("t0", "t1")))
        assert RoundRobinAssignor().assign({"t0": 3, "t1": 3}, members) == {
            "C0": (("t0", 0), ("t0", 2), ("t1", 1)),
            "C1": (("t0", 1), ("t1", 0), ("t1", 2)),
        }

    def test_javadoc_different_subscriptions(self) -> None:
        members = members_of(
            M("C0", topics=("t0",)),
            M("C1", topics=("t0", "t1")),
            M("C2", topics=("t0", "t1", "t2")),
        )
        assert RoundRobinAssignor().assign({"t0": 1, "t1": 2, "t2": 3}, members) == {
            "C0": (("t0", 0),),
            "C1": (("t1", 0),),
            "C2": (("t1", 1), ("t2", 0), ("t2", 1), ("t2", 2)),
        }

    def test_static_members_first(self) -> None:
        members = members_of(M("a", topics=("t",)), M("b", group_instance_id="x", topics=("t",)))
        assert RoundRobinAssignor().assign({"t": 3}, members) == {
            "b": (("t", 0), ("t", 2)),
            "a": (("t", 1),),
        }


# ============================================================================ sticky (Kafka tests)


T, T1, T2, T3 = "topic", "topic1", "topic2", "topic3"
C1, C2, C3, C4 = "consumer1", "consumer2", "consumer3", "consumer4"


def sub(member: str, topics: tuple[str, ...], owned: list[TP] | None = None, gen: int = -1) -> M:
    return M(member, topics=topics, owned_partitions=tuple(owned or ()), generation_id=gen)


class TestStickyKafkaExamples:
    """Expectations of ``AbstractStickyAssignorTest`` (non-rack configurations)."""

    def test_two_consumers_two_topics_six_partitions(self) -> None:
        # testTwoConsumersTwoTopicsSixPartitions
        ms = members_of(sub(C1, (T1, T2)), sub(C2, (T1, T2)))
        result = StickyAssignor().assign({T1: 3, T2: 3}, ms)
        assert result[C1] == (*tps(T1, 0, 2), (T2, 1))
        assert result[C2] == ((T1, 1), *tps(T2, 0, 2))

    def test_multiple_consumers_mixed_topic_subscriptions(self) -> None:
        # testMultipleConsumersMixedTopicSubscriptions (general path)
        ms = members_of(sub(C1, (T1,)), sub(C2, (T1, T2)), sub(C3, (T1,)))
        outcome = sticky_assign({T1: 3, T2: 2}, ms)
        assert outcome.partitions_transferring_ownership is None
        assert outcome.assignment == {
            C1: tps(T1, 0, 2),
            C2: tps(T2, 0, 1),
            C3: tps(T1, 1),
        }

    def test_consumer_owning_min_quota_expected_max_quota(self) -> None:
        # testConsumerOwningMinQuotaExpectedMaxQuota
        ms = members_of(
            sub(C1, (T1, T2), [(T1, 0), (T2, 1)], 1), sub(C2, (T1, T2), [(T1, 1), (T2, 2)], 1)
        )
        outcome = sticky_assign({T1: 2, T2: 3}, ms)
        assert outcome.assignment[C1] == [(T1, 0), (T2, 1), (T2, 0)]
        assert outcome.assignment[C2] == [(T1, 1), (T2, 2)]
        assert outcome.partitions_transferring_ownership == {}

    def test_max_quota_consumer_more_than_num_expected_max_capacity_members(self) -> None:
        # testMaxQuotaConsumerMoreThanNumExpectedMaxCapacityMembers: which member keeps
        # maxQuota follows Java HashMap iteration order (consumer3, consumer2, consumer1).
        ms = members_of(
            sub(C1, (T1, T2), [(T1, 0), (T2, 0)], 1),
            sub(C2, (T1, T2), [(T1, 1), (T2, 1)], 1),
            sub(C3, (T1, T2), [], 1),
        )
        outcome = sticky_assign({T1: 2, T2: 2}, ms)
        assert outcome.partitions_transferring_ownership == {(T2, 0): C3}
        assert outcome.assignment == {C1: [(T1, 0)], C2: [(T1, 1), (T2, 1)], C3: [(T2, 0)]}

    def test_all_consumers_are_under_min_quota(self) -> None:
        # testAllConsumersAreUnderMinQuota
        ms = members_of(
            sub(C1, (T1, T2), [(T1, 0)], 1),
            sub(C2, (T1, T2), [(T1, 1)], 1),
            sub(C3, (T1, T2), [], 1),
        )
        outcome = sticky_assign({T1: 2, T2: 3}, ms)
        assert outcome.partitions_transferring_ownership == {}
        assert outcome.assignment == {
            C1: [(T1, 0), (T2, 1)],
            C2: [(T1, 1), (T2, 2)],
            C3: [(T2, 0)],
        }

    def test_add_remove_two_consumers_two_topics(self) -> None:
        # testAddRemoveTwoConsumersTwoTopics: three rounds.
        topics = (T1, T2)
        counts = {T1: 3, T2: 4}
        a = StickyAssignor().assign(counts, members_of(sub(C1, topics), sub(C2, topics)))
        assert a[C1] == (*tps(T1, 0, 2), *tps(T2, 1, 3))
        assert a[C2] == ((T1, 1), *tps(T2, 0, 2))

        ms = members_of(
            sub(C1, topics, list(a[C1]), 1),
            sub(C2, topics, list(a[C2]), 1),
            sub(C3, topics, [], 1),
            sub(C4, topics, [], 1),
        )
        outcome = sticky_assign(counts, ms)
        assert outcome.partitions_transferring_ownership == {
            (T1, 2): C3,
            (T2, 3): C3,
            (T2, 2): C4,
        }
        b = outcome.assignment
        assert b == {
            C1: [(T1, 0), (T2, 1)],
            C2: [(T2, 0), (T1, 1)],
            C3: [(T1, 2), (T2, 3)],
            C4: [(T2, 2)],
        }

        ms = members_of(sub(C3, topics, b[C3], 1), sub(C4, topics, b[C4], 1))
        c = sticky_assign(counts, ms).assignment
        assert c[C3] == [(T1, 2), (T2, 3), (T1, 0), (T2, 1)]
        assert c[C4] == [(T2, 2), (T1, 1), (T2, 0)]

    def test_all_consumers_reach_expected_quota(self) -> None:
        # testAllConsumersReachExpectedQuotaAndAreConsideredFilled
        ms = members_of(
            sub(C1, (T,), tps(T, 0, 1), 1), sub(C2, (T,), tps(T, 2), 1), sub(C3, (T,), [], 1)
        )
        assert StickyAssignor().assign({T: 4}, ms) == {
            C1: (*tps(T, 0, 1),),
            C2: ((T, 2),),
            C3: ((T, 3),),
        }

    def test_owned_partitions_invalidated_for_stale_generation(self) -> None:
        # testOwnedPartitionsAreInvalidatedForConsumerWithStaleGeneration
        owned = [(T, 0), (T, 2), (T2, 1)]
        ms = members_of(sub(C1, (T, T2), owned, 10), sub(C2, (T, T2), owned, 9))
        result = as_sets(StickyAssignor().assign({T: 3, T2: 3}, ms))
        assert result == {C1: set(owned), C2: {(T, 1), (T2, 0), (T2, 2)}}

    def test_owned_partitions_invalidated_for_no_generation(self) -> None:
        # testOwnedPartitionsAreInvalidatedForConsumerWithNoGeneration
        owned = [(T, 0), (T, 2), (T2, 1)]
        ms = members_of(sub(C1, (T, T2), owned, 10), sub(C2, (T, T2), owned, -1))
        result = as_sets(StickyAssignor().assign({T: 3, T2: 3}, ms))
        assert result == {C1: set(owned), C2: {(T, 1), (T2, 0), (T2, 2)}}

    def test_partition_claimed_by_two_members_of_same_generation(self) -> None:
        # testPartitionsTransferringOwnershipIncludeThePartitionClaimedBy
        # MultipleConsumersInSameGeneration
        ms = members_of(
            sub(C1, (T,), tps(T, 0, 1), 1), sub(C2, (T,), tps(T, 0, 2), 1), sub(C3, (T,), [], 1)
        )
        outcome = sticky_assign({T: 3}, ms)
        assert outcome.partitions_transferring_ownership == {(T, 0): C3}
        assert outcome.assignment == {C1: [(T, 1)], C2: [(T, 2)], C3: [(T, 0)]}

    def test_ensure_partitions_assigned_to_highest_generation(self) -> None:
        # testEnsurePartitionsAssignedToHighestGeneration
        topics = (T, T2, T3)
        ms = members_of(
            sub(C1, topics, [(T, 0), (T2, 0), (T3, 0)], 10),
            sub(C2, topics, [(T, 1), (T2, 1), (T3, 1)], 9),
            sub(C3, topics, [(T2, 1), (T3, 0), (T3, 2)], 8),
        )
        result = as_sets(StickyAssignor().assign({T: 3, T2: 3, T3: 3}, ms))
        assert result == {
            C1: {(T, 0), (T2, 0), (T3, 0)},
            C2: {(T, 1), (T2, 1), (T3, 1)},
            C3: {(T, 2), (T2, 2), (T3, 2)},
        }

    def test_no_reassignment_on_current_members(self) -> None:
        # testNoReassignmentOnCurrentMembers
        topics = (T, T2, T3, T1)
        ms = members_of(
            sub(C1, topics, [], -1),
            sub(C2, topics, [(T, 0), (T2, 0), (T1, 0)], 9),
            sub(C3, topics, [(T3, 2), (T2, 2), (T1, 1)], 8),
            sub(C4, topics, [(T3, 1), (T, 1), (T, 2)], 7),
        )
        outcome = sticky_assign({T: 3, T1: 3, T2: 3, T3: 3}, ms)
        assert set(outcome.assignment[C1]) == {(T1, 2), (T2, 1), (T3, 0)}
        assert outcome.partitions_transferring_ownership == {}

    def test_owned_partitions_invalidated_for_multiple_generations(self) -> None:
        # testOwnedPartitionsAreInvalidatedForConsumerWithMultipleGeneration
        ms = members_of(
            sub(C1, (T, T2), [(T, 0), (T2, 1), (T, 1)], 10),
            sub(C2, (T, T2), [(T, 0), (T2, 1), (T2, 2)], 8),
        )
        result = as_sets(StickyAssignor().assign({T: 3, T2: 3}, ms))
        assert result == {C1: {(T, 0), (T2, 1), (T, 1)}, C2: {(T, 2), (T2, 2), (T2, 0)}}

    def test_subscription_not_equal_and_same_partition_with_three_generations(self) -> None:
        # testSubscriptionNotEqualAndAssignSamePartitionWith3Generation
        for g1, g2, g3 in [(1, 2, 3), (1, 3, 2), (2, 1, 3), (2, 3, 1), (3, 1, 2), (3, 2, 1)]:
            ms = members_of(
                sub(C1, (T,), tps(T, 0, 2), g1),
                sub(C2, (T,), tps(T, 1, 2, 3), g2),
                sub(C3, (T,), tps(T, 2, 4, 5), g3),
                sub(C4, (T1,), tps(T1, 0), 2),
            )
            for assignor in (StickyAssignor(), CooperativeStickyAssignor()):
                result = assignor.assign({T: 6, T1: 1}, ms)
                flat = [tp for v in result.values() for tp in v]
                assert len(flat) == len(set(flat))
                if isinstance(assignor, StickyAssignor):
                    assert all(1 <= len(v) <= 2 for v in result.values())

    def test_assignment_updated_for_deleted_topic(self) -> None:
        # testAssignmentUpdatedForDeletedTopic
        ms = members_of(sub("consumer", (T1, T2, T3)))
        result = StickyAssignor().assign({T1: 1, T3: 100}, ms)
        assert len(result["consumer"]) == 101

    def test_rack_test_non_rack_expectation_uniform(self) -> None:
        # testRackAwareAssignmentWithUniformSubscription, nonRackAwareAssignment
        ms = {f"consumer{i}": sub(f"consumer{i}", ("t1", "t2", "t3")) for i in range(3)}
        result = StickyAssignor().assign({"t1": 6, "t2": 7, "t3": 2}, ms)
        assert [sorted_strings(result[f"consumer{i}"]) for i in range(3)] == [
            "t1-0, t1-3, t2-0, t2-3, t2-6",
            "t1-1, t1-4, t2-1, t2-4, t3-0",
            "t1-2, t1-5, t2-2, t2-5, t3-1",
        ]

    def test_rack_test_non_rack_expectation_non_equal(self) -> None:
        # testRackAwareAssignmentWithNonEqualSubscription, nonRackAwareAssignment (general path)
        topics = [("t1", "t2", "t3"), ("t1", "t2", "t3"), ("t1", "t3")]
        ms = {f"consumer{i}": sub(f"consumer{i}", topics[i]) for i in range(3)}
        result = StickyAssignor().assign({"t1": 6, "t2": 7, "t3": 2}, ms)
        assert [sorted_strings(result[f"consumer{i}"]) for i in range(3)] == [
            "t1-5, t2-0, t2-2, t2-4, t2-6",
            "t1-3, t2-1, t2-3, t2-5, t3-0",
            "t1-0, t1-1, t1-2, t1-4, t3-1",
        ]


# ============================================================================ cooperative


class TestCooperative:
    def test_b7_example_two_rounds(self) -> None:
        # kafka-protocols.md B7: p1, p2, p3; c1 -> {p1, p2}, c2 -> {p3}; c3 joins.
        p1, p2, p3 = ("t", 0), ("t", 1), ("t", 2)
        coop = CooperativeStickyAssignor()
        round1 = coop.assign(
            {"t": 3},
            members_of(
                sub("c1", ("t",), [p1, p2], 5), sub("c2", ("t",), [p3], 5), sub("c3", ("t",))
            ),
        )
        assert round1 == {"c1": (p1,), "c2": (p3,), "c3": ()}  # p2 revoked, c3 gets nothing
        owned = {"c1": [p1, p2], "c2": [p3], "c3": []}
        validate_cooperative_assignment(owned, round1)
        # c1 revokes p2 and rejoins; the second round gives p2 to c3.
        round2 = coop.assign(
            {"t": 3},
            members_of(
                sub("c1", ("t",), [p1], 6), sub("c2", ("t",), [p3], 6), sub("c3", ("t",), [], 6)
            ),
        )
        assert round2 == {"c1": (p1,), "c2": (p3,), "c3": (p2,)}
        validate_cooperative_assignment({m: list(v) for m, v in round1.items()}, round2)

    def test_eager_sticky_would_violate_the_cooperative_check(self) -> None:
        p1, p2, p3 = ("t", 0), ("t", 1), ("t", 2)
        ms = members_of(
            sub("c1", ("t",), [p1, p2], 5), sub("c2", ("t",), [p3], 5), sub("c3", ("t",))
        )
        eager = StickyAssignor().assign({"t": 3}, ms)
        assert eager["c3"] == (p2,)
        with pytest.raises(CooperativeAssignmentError) as err:
            validate_cooperative_assignment({m: s.owned_partitions for m, s in ms.items()}, eager)
        assert err.value.partitions == (p2,)
        assert "Assignor supporting the COOPERATIVE protocol violates its requirements" in str(
            err.value
        )

    def test_add_remove_two_consumers_two_topics_cooperative(self) -> None:
        # testAddRemoveTwoConsumersTwoTopics, second round, minus transferring partitions.
        topics = (T1, T2)
        ms = members_of(
            sub(C1, topics, [*tps(T1, 0, 2), *tps(T2, 1, 3)], 1),
            sub(C2, topics, [(T1, 1), *tps(T2, 0, 2)], 1),
            sub(C3, topics, [], 1),
            sub(C4, topics, [], 1),
        )
        result = CooperativeStickyAssignor().assign({T1: 3, T2: 4}, ms)
        assert result == {
            C1: ((T1, 0), (T2, 1)),
            C2: ((T2, 0), (T1, 1)),
            C3: (),
            C4: (),
        }

    def test_general_path_recomputes_transferring_partitions(self) -> None:
        # testMoveExistingAssignments: general path, partitionsTransferringOwnership is null.
        ms = members_of(
            sub(C1, (T1, T2), [(T1, 0)], 1),
            sub(C2, (T1, T2, T3, "topic4"), [(T2, 0), (T3, 0)], 1),
            sub(
                C3,
                (T2, T3, "topic4", "topic5", "topic6"),
                [("topic4", 0), ("topic5", 0), ("topic6", 0)],
                1,
            ),
        )
        counts = {f"topic{i}": 1 for i in range(1, 7)}
        outcome = sticky_assign(counts, ms)
        assert outcome.partitions_transferring_ownership is None
        owned = {m: s.owned_partitions for m, s in ms.items()}
        moving = partitions_transferring_ownership(owned, outcome.assignment)
        result = CooperativeStickyAssignor().assign(counts, ms)
        for tp, member in moving.items():
            assert tp not in result[member]
        validate_cooperative_assignment(owned, result)

    def test_validate_accepts_moves_through_unowned_partitions(self) -> None:
        validate_cooperative_assignment({"a": [("t", 0)], "b": []}, {"a": [], "b": []})
        validate_cooperative_assignment({"a": [], "b": []}, {"a": [("t", 0)], "b": [("t", 1)]})
        # A member missing from ``owned`` owns nothing.
        validate_cooperative_assignment({}, {"a": [("t", 0)]})

    def test_validate_rejects_direct_transfer(self) -> None:
        with pytest.raises(CooperativeAssignmentError):
            validate_cooperative_assignment({"a": [("t", 0)], "b": []}, {"a": [], "b": [("t", 0)]})

    def test_protocols(self) -> None:
        assert CooperativeStickyAssignor().supported_protocols == ("COOPERATIVE", "EAGER")
        assert StickyAssignor().supported_protocols == ("EAGER",)


# ============================================================================ server side


def spec(
    topics: tuple[str, ...] | list[str],
    assignment: list[TP] | None = None,
    instance: str | None = None,
) -> MemberSpec:
    return MemberSpec(
        frozenset(topics), instance_id=instance, assignment=frozenset(assignment or ())
    )


class TestUniformKafkaExamples:
    """``UniformHeterogeneousAssignmentBuilderTest`` (members in sorted order, as there)."""

    def test_first_assignment_two_members_two_topics(self) -> None:
        gs = GroupSpec({"A": spec(["t1", "t3"]), "B": spec(["t3"])})
        assert as_sets(UniformAssignor().assign(gs, {"t1": 3, "t3": 6})) == {
            "A": {*tps("t1", 0, 1, 2), ("t3", 4)},
            "B": set(tps("t3", 0, 1, 2, 3, 5)),
        }

    def test_first_assignment_num_members_greater_than_partitions(self) -> None:
        gs = GroupSpec({"A": spec(["t3"]), "B": spec(["t3"]), "C": spec(["t1"])})
        assert as_sets(UniformAssignor().assign(gs, {"t3": 1, "t1": 2})) == {
            "A": {("t3", 0)},
            "B": set(),
            "C": set(tps("t1", 0, 1)),
        }

    def test_reassignment_three_topics_unbalanced_prev_assignment(self) -> None:
        gs = GroupSpec(
            {
                "A": spec(["t1"], tps("t1", 0, 1, 2)),
                "B": spec(["t1", "t2"], [("t1", 3), ("t2", 0)]),
                "C": spec(
                    ["t1", "t2", "t3"],
                    [*tps("t1", 4, 5), *tps("t2", 1, 2, 3), *tps("t3", 0, 1, 2, 3)],
                ),
            }
        )
        assert as_sets(UniformAssignor().assign(gs, {"t1": 6, "t2": 4, "t3": 4})) == {
            "A": set(tps("t1", 0, 1, 2, 5)),
            "B": {("t1", 3), *tps("t2", 0, 1, 2, 3)},
            "C": {("t1", 4), *tps("t3", 0, 1, 2, 3)},
        }

    def test_reassignment_when_partitions_are_added(self) -> None:
        gs = GroupSpec(
            {
                "A": spec(["t1", "t3"], [*tps("t1", 0, 1, 2, 3), *tps("t3", 0, 1)]),
                "B": spec(["t1", "t2", "t3", "t4"], [*tps("t2", 0, 1, 2), *tps("t4", 0, 1, 2)]),
            }
        )
        assert as_sets(UniformAssignor().assign(gs, {"t1": 6, "t2": 5, "t3": 3, "t4": 3})) == {
            "A": {*tps("t1", 0, 1, 2, 3, 4, 5), *tps("t3", 0, 1, 2)},
            "B": {*tps("t2", 0, 1, 2, 3, 4), *tps("t4", 0, 1, 2)},
        }

    def test_reassignment_one_member_and_partitions_added(self) -> None:
        gs = GroupSpec(
            {
                "A": spec(["t1"], [*tps("t1", 0, 2), ("t2", 0)]),
                "B": spec(["t1", "t2"], [("t1", 1), *tps("t2", 1, 2)]),
                "C": spec(["t1", "t2"]),
            }
        )
        assert as_sets(UniformAssignor().assign(gs, {"t1": 6, "t2": 7})) == {
            "A": set(tps("t1", 0, 2, 3, 4, 5)),
            "B": {("t1", 1), *tps("t2", 1, 2, 6)},
            "C": set(tps("t2", 0, 3, 4, 5)),
        }


class TestUniformHomogeneous:
    """``UniformHomogenousAssignmentBuilderTest`` (2024). Kafka iterates topic ids in hash
    order; the emulator iterates names in String order, so the names below are chosen
    so that both orders agree for each case (noted per test)."""

    def test_first_assignment_two_members_two_topics(self) -> None:
        # Kafka iterated topic3 before topic1: named "a3" and "x1" here.
        gs = GroupSpec({"A": spec(["x1", "a3"]), "B": spec(["x1", "a3"])})
        assert as_sets(UniformAssignor().assign(gs, {"x1": 3, "a3": 2})) == {
            "A": {("x1", 0), *tps("a3", 0, 1)},
            "B": set(tps("x1", 1, 2)),
        }

    def test_first_assignment_num_members_greater_than_partitions(self) -> None:
        gs = GroupSpec({"A": spec(["t3"]), "B": spec(["t3"]), "C": spec(["t3"])})
        assert as_sets(UniformAssignor().assign(gs, {"t3": 2})) == {
            "A": {("t3", 0)},
            "B": {("t3", 1)},
            "C": set(),
        }

    def test_unbalanced_prev_assignment(self) -> None:
        # Current assignments iterated topic1 then topic2 (mkOrderedAssignment).
        gs = GroupSpec(
            {
                "A": spec(["t1", "t2"], [*tps("t1", 0, 1), *tps("t2", 0, 1)]),
                "B": spec(["t1", "t2"], [("t1", 2), ("t2", 2)]),
            }
        )
        assert as_sets(UniformAssignor().assign(gs, {"t1": 3, "t2": 3})) == {
            "A": {*tps("t1", 0, 1), ("t2", 0)},
            "B": {("t1", 2), *tps("t2", 1, 2)},
        }

    def test_partitions_added(self) -> None:
        # Kafka iterated topic2 before topic1: "b2" and "x1".
        gs = GroupSpec(
            {
                "A": spec(["x1", "b2"], [*tps("x1", 0, 2), ("b2", 0)]),
                "B": spec(["x1", "b2"], [("x1", 1), *tps("b2", 1, 2)]),
            }
        )
        assert as_sets(UniformAssignor().assign(gs, {"x1": 6, "b2": 5})) == {
            "A": {*tps("x1", 0, 2, 3), *tps("b2", 0, 3, 4)},
            "B": {*tps("x1", 1, 4, 5), *tps("b2", 1, 2)},
        }

    def test_one_member_added(self) -> None:
        gs = GroupSpec(
            {
                "A": spec(["t1", "t2"], [*tps("t1", 0, 2), ("t2", 0)]),
                "B": spec(["t1", "t2"], [("t1", 1), *tps("t2", 1, 2)]),
                "C": spec(["t1", "t2"]),
            }
        )
        assert as_sets(UniformAssignor().assign(gs, {"t1": 3, "t2": 3})) == {
            "A": set(tps("t1", 0, 2)),
            "B": {("t1", 1), ("t2", 1)},
            "C": set(tps("t2", 0, 2)),
        }

    def test_one_member_removed(self) -> None:
        # Kafka iterated topic2 before topic1: "b2" and "x1".
        gs = GroupSpec(
            {
                "A": spec(["x1", "b2"], [("x1", 0), ("b2", 0)]),
                "B": spec(["x1", "b2"], [("x1", 1), ("b2", 1)]),
            }
        )
        assert as_sets(UniformAssignor().assign(gs, {"x1": 3, "b2": 3})) == {
            "A": {("x1", 0), *tps("b2", 0, 2)},
            "B": {*tps("x1", 1, 2), ("b2", 1)},
        }

    def test_subscription_removed(self) -> None:
        gs = GroupSpec(
            {
                "A": spec(["t2"], [("t1", 0), ("t2", 0)]),
                "B": spec(["t2"], [("t1", 1), ("t2", 1)]),
            }
        )
        assert as_sets(UniformAssignor().assign(gs, {"t1": 2, "t2": 2})) == {
            "A": {("t2", 0)},
            "B": {("t2", 1)},
        }

    def test_quota_extras_go_to_first_members_in_member_id_order(self) -> None:
        gs = GroupSpec({m: spec(["t"]) for m in ("m-2", "m-10", "m-1")})
        # String order: m-1 < m-10 < m-2; P=5, M=3 -> the first two get 2.
        result = UniformAssignor().assign(gs, {"t": 5})
        assert {m: len(v) for m, v in result.items()} == {"m-1": 2, "m-10": 2, "m-2": 1}
        assert as_sets(result) == {
            "m-1": set(tps("t", 0, 1)),
            "m-10": set(tps("t", 2, 3)),
            "m-2": {("t", 4)},
        }

    def test_nonexistent_topics_are_ignored_and_empty_group(self) -> None:
        gs = GroupSpec({"A": spec(["missing"]), "B": spec(["missing"])})
        assert UniformAssignor().assign(gs, {"t": 3}) == {"A": frozenset(), "B": frozenset()}
        assert UniformAssignor().assign(GroupSpec({}), {"t": 3}) == {}


class TestServerRange:
    """``RangeAssignorTest`` (group coordinator) first-assignment cases."""

    def test_two_consumers_two_topics_same_subscriptions(self) -> None:
        gs = GroupSpec({"A": spec(["t1", "t3"]), "B": spec(["t1", "t3"])})
        assert as_sets(ServerRangeAssignor().assign(gs, {"t1": 3, "t3": 2})) == {
            "A": {*tps("t1", 0, 1), ("t3", 0)},
            "B": {("t1", 2), ("t3", 1)},
        }

    def test_three_consumers_three_topics_different_subscriptions(self) -> None:
        gs = GroupSpec({"A": spec(["t1", "t2"]), "B": spec(["t3"]), "C": spec(["t2", "t3"])})
        assert as_sets(ServerRangeAssignor().assign(gs, {"t1": 3, "t2": 3, "t3": 2})) == {
            "A": {*tps("t1", 0, 1, 2), *tps("t2", 0, 1)},
            "B": {("t3", 0)},
            "C": {("t2", 2), ("t3", 1)},
        }

    def test_num_consumers_greater_than_partitions(self) -> None:
        gs = GroupSpec({m: spec(["t1", "t3"]) for m in "ABC"})
        assert as_sets(ServerRangeAssignor().assign(gs, {"t1": 3, "t3": 2})) == {
            "A": {("t1", 0), ("t3", 0)},
            "B": {("t1", 1), ("t3", 1)},
            "C": {("t1", 2)},
        }

    def test_static_members_first_and_not_sticky(self) -> None:
        gs = GroupSpec(
            {
                "a": spec(["t"], tps("t", 2, 3)),
                "b": spec(["t"], instance="i2"),
                "c": spec(["t"], tps("t", 0, 1), instance="i1"),
            }
        )
        assert as_sets(ServerRangeAssignor().assign(gs, {"t": 4})) == {
            "c": set(tps("t", 0, 1)),
            "b": {("t", 2)},
            "a": {("t", 3)},
        }

    def test_co_partitioned(self) -> None:
        gs = GroupSpec({f"m{i}": spec(["x", "y", "z"]) for i in range(7)})
        result = ServerRangeAssignor().assign(gs, {"x": 20, "y": 20, "z": 20})
        for parts in result.values():
            by_topic = {t: {p for tt, p in parts if tt == t} for t in "xyz"}
            assert by_topic["x"] == by_topic["y"] == by_topic["z"]


class TestRegistry:
    def test_client_registry(self) -> None:
        for name in ("range", "roundrobin", "sticky", "cooperative-sticky"):
            assert client_assignor(name).name == name
        assert set(CLIENT_ASSIGNORS) == {"range", "roundrobin", "sticky", "cooperative-sticky"}
        with pytest.raises(KeyError):
            client_assignor("nope")

    def test_server_registry(self) -> None:
        assert server_assignor("uniform").name == "uniform"
        assert server_assignor("range").name == "range"
        assert list(SERVER_ASSIGNORS) == ["uniform", "range"]
        with pytest.raises(KeyError):
            server_assignor("sticky")

    def test_member_subscription_from_messages(self) -> None:
        s = Subscription(topics=("a",), owned_partitions=(("a", 1),), generation_id=4)
        m = MemberSubscription.from_join_group_member(JoinGroupMember("m1", "i1", s))
        assert m == M("m1", "i1", ("a",), (("a", 1),), 4)

    def test_subscription_type(self) -> None:
        assert GroupSpec({"a": spec(["t"]), "b": spec(["t"])}).subscription_type() is (
            SubscriptionType.HOMOGENEOUS
        )
        assert GroupSpec({"a": spec(["t"]), "b": spec(["u"])}).subscription_type() is (
            SubscriptionType.HETEROGENEOUS
        )


# ============================================================================ properties


SEEDS = range(64)


def make_group(
    rng: random.Random, identical: bool, max_members: int = 60, max_partitions: int = 300
) -> tuple[dict[str, int], list[tuple[str, str | None, tuple[str, ...]]]]:
    """Topics with counts, and (member id, instance id, topics) for a random group."""
    n_topics = rng.randint(1, 6)
    total = rng.randint(1, max_partitions)
    cuts = sorted(rng.sample(range(1, total), n_topics - 1)) if total >= n_topics else []
    sizes = [b - a for a, b in zip([0, *cuts], [*cuts, total], strict=True)] if cuts else [total]
    topics = {f"topic-{rng.getrandbits(20):05x}-{i}": max(1, n) for i, n in enumerate(sizes)}
    names = list(topics)
    n_members = rng.choice(
        [1, 2, 3, rng.randint(1, max_members), rng.randint(1, max_members), max_members]
    )
    members = []
    for i in range(n_members):
        member_id = f"consumer-{rng.getrandbits(24):06x}-{i}"
        instance = f"instance-{rng.getrandbits(16):04x}-{i}" if rng.random() < 0.4 else None
        if identical:
            subscribed = tuple(names)
        else:
            subscribed = tuple(rng.sample(names, rng.randint(1, len(names))))
        members.append((member_id, instance, subscribed))
    rng.shuffle(members)
    return topics, members


def check_client_validity(
    counts: Mapping[str, int],
    members: Mapping[str, M],
    result: Mapping[str, tuple[TP, ...]],
    complete: bool = True,
) -> None:
    assert set(result) == set(members)
    flat = [tp for v in result.values() for tp in v]
    assert len(flat) == len(set(flat)), "a partition is assigned twice"
    for member_id, parts in result.items():
        for topic, p in parts:
            assert topic in members[member_id].topics, "assigned to a non-subscriber"
            assert 0 <= p < counts[topic]
    subscribed = {t for m in members.values() for t in m.topics if counts.get(t, 0) > 0}
    expected = {(t, p) for t in subscribed for p in range(counts[t])}
    if complete:
        assert set(flat) == expected
    else:
        assert set(flat) <= expected


def sizes_within_one(result: Mapping[str, tuple[TP, ...] | frozenset[TP]]) -> bool:
    sizes = [len(v) for v in result.values()]
    return not sizes or max(sizes) - min(sizes) <= 1


def general_balance_ok(members: Mapping[str, M], result: Mapping[str, tuple[TP, ...]]) -> bool:
    """Kafka's verifyValidityAndBalance: a member with 2+ more partitions than another holds
    no partition of a topic the other subscribes to."""
    for pa in result.values():
        for b, pb in result.items():
            if len(pa) > len(pb) + 1 and any(t in members[b].topics for t, _ in pa):
                return False
    return True


def client_members(
    specs: list[tuple[str, str | None, tuple[str, ...]]],
    owned: Mapping[str, tuple[TP, ...]] | None = None,
    generation: int = -1,
) -> dict[str, M]:
    owned = owned or {}
    return {
        m: M(m, inst, topics, tuple(owned.get(m, ())), generation if m in owned else -1)
        for m, inst, topics in specs
    }


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("identical", [True, False], ids=["identical", "mixed"])
def test_range_and_roundrobin_properties(seed: int, identical: bool) -> None:
    rng = random.Random(seed * 2 + identical)
    counts, specs = make_group(rng, identical)
    members = client_members(specs)
    ranged = RangeAssignor().assign(counts, members)
    check_client_validity(counts, members, ranged)
    for topic, n in counts.items():
        per = [
            sum(1 for t, _ in ranged[m] if t == topic)
            for m in members
            if topic in members[m].topics
        ]
        assert not per or (max(per) - min(per) <= 1 and sum(per) == n)
    robin = RoundRobinAssignor().assign(counts, members)
    check_client_validity(counts, members, robin)
    if identical:
        assert sizes_within_one(robin)
    # Order independence: the same group given in another order.
    shuffled = dict(rng.sample(list(members.items()), len(members)))
    assert RangeAssignor().assign(counts, shuffled) == ranged
    assert RoundRobinAssignor().assign(counts, shuffled) == robin


def churn(
    rng: random.Random,
    specs: list[tuple[str, str | None, tuple[str, ...]]],
    identical: bool,
    names: list[str],
) -> list[tuple[str, str | None, tuple[str, ...]]]:
    """Remove some members, add some, as a membership change between generations."""
    kept = [s for s in specs if rng.random() > 0.3] or specs[:1]
    for i in range(rng.randint(0, 5)):
        topics = tuple(names) if identical else tuple(rng.sample(names, rng.randint(1, len(names))))
        kept.append((f"joiner-{rng.getrandbits(24):06x}-{i}", None, topics))
    rng.shuffle(kept)
    return kept


def minimal_revocations(claims: Mapping[str, int], total: int) -> int:
    """Least number of claimed partitions that must change owner for balance."""
    n = len(claims)
    min_q, extra = divmod(total, n)
    max_q = min_q + (1 if extra else 0)
    over = sum(max(0, c - max_q) for c in claims.values())
    at_max = sum(1 for c in claims.values() if c >= max_q)
    return over + max(0, at_max - extra) * (max_q - min_q)


def check_stickiness(
    counts: Mapping[str, int], members: Mapping[str, M], result: Mapping[str, tuple[TP, ...]]
) -> None:
    """Identical subscriptions, unique claims of one generation: Kafka's constrained rules."""
    total = sum(counts[t] for t in next(iter(members.values())).topics if t in counts)
    min_q = total // len(members)
    claims = {
        m: [tp for tp in s.owned_partitions if tp[0] in counts and tp[1] < counts[tp[0]]]
        for m, s in members.items()
    }
    revoked = 0
    for member_id, claimed in claims.items():
        kept = set(claimed) & set(result[member_id])
        if len(claimed) < min_q:
            assert kept == set(claimed), "a member below minQuota lost an owned partition"
        else:
            assert len(kept) >= min_q
        revoked += len(claimed) - len(kept)
    assert revoked == minimal_revocations({m: len(c) for m, c in claims.items()}, total)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("identical", [True, False], ids=["identical", "mixed"])
def test_sticky_properties(seed: int, identical: bool) -> None:
    rng = random.Random(1000 + seed * 2 + identical)
    counts, specs = make_group(rng, identical, max_members=60)
    first = StickyAssignor().assign(counts, client_members(specs))
    check_client_validity(counts, client_members(specs), first)
    if identical:
        assert sizes_within_one(first)
    else:
        assert general_balance_ok(client_members(specs), first)

    # Next generation: churn, maybe more partitions, everyone reports what it owned.
    names = list(counts)
    specs2 = churn(rng, specs, identical, names)
    counts2 = dict(counts)
    if rng.random() < 0.3:
        grown = rng.choice(names)
        counts2[grown] += rng.randint(1, 20)
    members2 = client_members(specs2, first, generation=7)
    second = StickyAssignor().assign(counts2, members2)
    check_client_validity(counts2, members2, second)
    if identical:
        assert sizes_within_one(second)
        check_stickiness(counts2, members2, second)
    else:
        assert general_balance_ok(members2, second)
    assert StickyAssignor().assign(counts2, members2) == second  # determinism


def run_cooperative(
    counts: Mapping[str, int], members: dict[str, M], rounds: int = 4
) -> list[dict[str, tuple[TP, ...]]]:
    """Rebalance until nothing is left unassigned, as members revoke and rejoin."""
    results = []
    generation = max([m.generation_id for m in members.values()] + [0])
    for _ in range(rounds):
        result = CooperativeStickyAssignor().assign(counts, members)
        owned = {m: s.owned_partitions for m, s in members.items()}
        validate_cooperative_assignment(owned, result)
        for member_id, parts in result.items():
            for tp in parts:
                others = [
                    o for o, s in members.items() if o != member_id and tp in s.owned_partitions
                ]
                assert not others, f"{tp} given to {member_id} while {others} still own it"
        results.append(result)
        check_client_validity(counts, members, result, complete=False)
        flat = {tp for v in result.values() for tp in v}
        subscribed = {t for m in members.values() for t in m.topics if t in counts}
        if flat == {(t, p) for t in subscribed for p in range(counts[t])}:
            return results
        generation += 1
        members = {
            m: M(m, s.group_instance_id, s.topics, result[m], generation)
            for m, s in members.items()
        }
    raise AssertionError(f"cooperative rebalance did not converge in {rounds} rounds")


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("identical", [True, False], ids=["identical", "mixed"])
def test_cooperative_sticky_properties(seed: int, identical: bool) -> None:
    rng = random.Random(2000 + seed * 2 + identical)
    counts, specs = make_group(rng, identical, max_members=60)
    settled = run_cooperative(counts, client_members(specs))[-1]
    names = list(counts)
    specs2 = churn(rng, specs, identical, names)
    members2 = client_members(specs2, settled, generation=9)
    rounds = run_cooperative(counts, members2)
    first, final = rounds[0], rounds[-1]
    if identical:
        # Round one keeps exactly what sticky keeps; the final round is balanced.
        sticky = StickyAssignor().assign(counts, members2)
        all_owned = {tp for s in members2.values() for tp in s.owned_partitions}
        for member_id, s in members2.items():
            others = all_owned - set(s.owned_partitions)
            assert set(first[member_id]) == set(sticky[member_id]) - others
        check_stickiness(counts, members2, first)
        assert sizes_within_one(final)
        assert len(rounds) <= 2
    assert CooperativeStickyAssignor().assign(counts, members2) == first  # determinism


@pytest.mark.parametrize("seed", range(24))
def test_sticky_conflicting_claims_stay_valid(seed: int) -> None:
    """Random overlapping claims across generations: still a valid assignment, and the
    cooperative result passes the leader's check."""
    rng = random.Random(3000 + seed)
    identical = seed % 2 == 0
    counts, specs = make_group(rng, identical, max_members=25, max_partitions=120)
    everything = [(t, p) for t, n in counts.items() for p in range(n + 2)]  # some do not exist
    members = {}
    for m, inst, topics in specs:
        claims = rng.sample(everything, rng.randint(0, min(10, len(everything))))
        members[m] = M(m, inst, topics, tuple(claims), rng.choice([-1, 3, 4, 5]))
    check_client_validity(counts, members, StickyAssignor().assign(counts, members))
    coop = CooperativeStickyAssignor().assign(counts, members)
    check_client_validity(counts, members, coop, complete=False)
    validate_cooperative_assignment({m: s.owned_partitions for m, s in members.items()}, coop)


def check_server_validity(
    topics: Mapping[str, int], gs: GroupSpec, result: Mapping[str, frozenset[TP]]
) -> None:
    assert set(result) == set(gs.members)
    flat = [tp for v in result.values() for tp in v]
    assert len(flat) == len(set(flat))
    for member_id, parts in result.items():
        for t, p in parts:
            assert t in gs.members[member_id].subscribed_topics and 0 <= p < topics[t]
    subscribed = {t for s in gs.members.values() for t in s.subscribed_topics if t in topics}
    assert set(flat) == {(t, p) for t in subscribed for p in range(topics[t])}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("identical", [True, False], ids=["homogeneous", "heterogeneous"])
def test_server_assignor_properties(seed: int, identical: bool) -> None:
    rng = random.Random(4000 + seed * 2 + identical)
    topics, specs = make_group(rng, identical)
    gs = GroupSpec({m: MemberSpec(frozenset(t), instance_id=i) for m, i, t in specs})
    uniform = UniformAssignor().assign(gs, topics)
    check_server_validity(topics, gs, uniform)
    if identical:
        assert sizes_within_one(uniform)
    ranged = ServerRangeAssignor().assign(gs, topics)
    check_server_validity(topics, gs, ranged)
    for topic, n in topics.items():
        per = [
            sum(1 for t, _ in ranged[m] if t == topic)
            for m, s in gs.members.items()
            if topic in s.subscribed_topics
        ]
        assert not per or (max(per) - min(per) <= 1 and sum(per) == n)

    # Next epoch: churn; the current target assignment carries over.
    specs2 = churn(rng, specs, identical, list(topics))
    gs2 = GroupSpec(
        {
            m: MemberSpec(frozenset(t), instance_id=i, assignment=uniform.get(m, frozenset()))
            for m, i, t in specs2
        }
    )
    again = UniformAssignor().assign(gs2, topics)
    check_server_validity(topics, gs2, again)
    if identical:
        assert sizes_within_one(again)
        # Stickiness: every member keeps min(current, quota) of its partitions.
        total = sum(topics.values())
        order = gs2.member_ids()
        min_q, extra = divmod(total, len(order))
        for i, member_id in enumerate(order):
            quota = min_q + (1 if i < extra else 0)
            kept = again[member_id] & gs2.members[member_id].assignment
            assert len(kept) == min(quota, len(gs2.members[member_id].assignment))
        # KAFKA-18688 (4.0.1+): still valid and balanced, and it never moves
        # more partitions than the earlier rule.
        stable = UniformAssignor(stable_quota=True).assign(gs2, topics)
        check_server_validity(topics, gs2, stable)
        assert sizes_within_one(stable)

        def moved(result: Mapping[str, frozenset[TP]]) -> int:
            return sum(len(gs2.members[m].assignment - result[m]) for m in result)

        assert moved(stable) <= moved(again)
    # Determinism and independence from the mapping's order.
    shuffled = GroupSpec(dict(rng.sample(list(gs2.members.items()), len(gs2.members))))
    assert UniformAssignor().assign(shuffled, topics) == again
    assert ServerRangeAssignor().assign(shuffled, topics) == ServerRangeAssignor().assign(
        gs2, topics
    )


@pytest.mark.parametrize("name", sorted(CLIENT_ASSIGNORS))
def test_client_edge_sizes(name: str) -> None:
    assignor: ClientAssignor = client_assignor(name)
    assert assignor.assign({"t": 3}, {}) == {}
    one = {"a": M("a", topics=("t",))}
    assert assignor.assign({"t": 0}, one) == {"a": ()}
    many = {f"m{i:02d}": M(f"m{i:02d}", topics=("t",)) for i in range(10)}
    result = assignor.assign({"t": 3}, many)
    check_client_validity({"t": 3}, many, result)
    assert sum(1 for v in result.values() if v) == 3


def test_uniform_kafka_18688_keeps_a_balanced_assignment() -> None:
    """apache/kafka#19677 ``testReassignmentStickinessWhenAlreadyBalanced``: three
    members hold 2, 2 and 3 partitions of 7; before the fix the first member, which
    holds 2, gets the extra slot and the third loses one; from 4.0.1 nothing moves."""
    from emulator.modern.assignors.server import GroupSpec as GS
    from emulator.modern.assignors.server import MemberSpec as MS
    from emulator.modern.assignors.uniform import uniform_homogeneous

    t = "t"
    current = {
        "m1": frozenset({(t, 0), (t, 1)}),
        "m2": frozenset({(t, 2), (t, 3)}),
        "m3": frozenset({(t, 4), (t, 5), (t, 6)}),
    }
    gs = GS({m: MS(frozenset({t}), assignment=a) for m, a in current.items()})
    after = uniform_homogeneous(gs, {t: 7}, stable_quota=True)
    assert after == current
    before = uniform_homogeneous(gs, {t: 7}, stable_quota=False)
    assert [len(before[m]) for m in ("m1", "m2", "m3")] == [3, 2, 2]
    assert before["m3"] < current["m3"]  # m3 gave up a partition: a needless move
