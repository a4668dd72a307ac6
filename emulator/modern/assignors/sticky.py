"""The sticky assignment algorithm shared by ``sticky`` and ``cooperative-sticky``.

Source: K@3.9 ``AbstractStickyAssignor.java`` in
``clients/src/main/java/org/apache/kafka/clients/consumer/internals/``
(``allSubscriptionsEqual``, ``ConstrainedAssignmentBuilder``,
``GeneralAssignmentBuilder``, ``PartitionMovements``); kafka-protocols.md B8.

1. **Ownership claims** (``allSubscriptionsEqual``). Members are visited in the
   iteration order of the ``HashMap`` the leader builds from the JoinGroup
   response (emulated, see :mod:`._java`). Each claimed partition of a topic
   with metadata is kept by one claimant: a claim from a higher generation
   takes the partition from a lower one; a lower one is ignored; two claims of
   the *same* generation drop the partition from both and mark it "claimed by
   multiple previous owners". This is K@3.9's per-partition rule, which is how
   kafka-protocols.md B8's "claims are taken only from members with the
   highest generation" is read here: a member of an older generation keeps the
   claims nobody newer disputes (Kafka's ``testNoReassignmentOnCurrentMembers``
   depends on it; 2.x cleared every claim of an older generation).
2. **Identical subscriptions** → ``constrainedAssign``: with ``P`` partitions
   and ``N`` members, ``minQuota = P // N``, ``maxQuota = ceil(P / N)`` and
   ``P % N`` members may hold ``maxQuota``. Each member, in map order, sorts its
   claims by (partition, topic) and keeps all of them if it has fewer than
   ``minQuota``; ``maxQuota`` of them if it has at least that many while
   max-capacity slots remain; otherwise ``minQuota``. The rest are revoked.
   The unassigned partitions, in (topic, partition) order, are then dealt
   round-robin to the members below ``minQuota`` (sorted by member id); once
   those all have ``minQuota``, one each to the members of the at-``minQuota``
   queue (first those that kept ``minQuota`` claims while max-capacity slots
   remained, sorted by member id, then those that reached ``minQuota`` in the
   round-robin, in that order). A revoked or multiply-claimed partition given
   to a member is "transferring ownership".
   Unlike ``range`` and ``roundrobin``, the sticky assignors order members by
   member id alone (``Collections.sort``); ``group.instance.id`` plays no part.
3. **Different subscriptions** → ``generalAssign``: keep every valid claim,
   drop claims on unsubscribed topics, give each unassigned partition (topics
   with fewer potential consumers first) to the least-loaded subscriber
   (``TreeSet`` by (assignment size, member id)), then repeatedly move
   partitions from a member to a less-loaded subscriber (or back to its
   previous-generation owner) until balanced, preferring to reverse earlier
   moves (``PartitionMovements``). A rebalance that does not lower the
   balance score is reverted.

Deviations (all documented where they apply):

* The reassignment loop of ``performReassignments`` (a ``do ... while
  (modified)`` in Java, unbounded) stops after :data:`MAX_REASSIGNMENT_PASSES`
  passes.
* ``isBalanced`` is computed from per-topic owner counts instead of a full
  scan; it returns the same answer as Kafka's (see :meth:`_GeneralBuilder._is_balanced`).
* Where Java picks "any" element of a ``HashSet`` (the partition to move back
  in ``getTheActualPartitionToBeMoved``) the first one recorded is taken.
* Input hygiene Kafka does not need: claims on partitions beyond a topic's
  partition count are ignored, and a partition listed twice by one member
  counts once. A move back to a previous-generation owner happens only if that
  owner still subscribes to the topic (Java does not check).
* Not emulated: rack-aware assignment (KIP-881), which needs consumer racks,
  and ``isSticky()`` (cycle detection in ``PartitionMovements``), which Kafka
  uses only in tests.
"""

from __future__ import annotations

import bisect
import contextlib
import operator
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from emulator.modern.assignors._java import java_hashmap_order, java_key
from emulator.modern.assignors.client import (
    ClientAssignment,
    MemberSubscription,
    subscribed_partitions_per_topic,
    validate_members,
)
from emulator.modern.messages import TopicPartition

__all__ = [
    "DEFAULT_GENERATION",
    "MAX_REASSIGNMENT_PASSES",
    "IllegalAssignorStateError",
    "StickyAssignor",
    "StickyOutcome",
    "sticky_assign",
]

DEFAULT_GENERATION = -1
"""``AbstractStickyAssignor.DEFAULT_GENERATION``: no generation known."""

MAX_REASSIGNMENT_PASSES = 64
"""Bound on ``performReassignments`` passes (Java loops until nothing moves)."""


class IllegalAssignorStateError(RuntimeError):
    """An internal consistency check of the assignor failed (Java ``IllegalStateException``)."""


@dataclass
class StickyOutcome:
    """What ``AbstractStickyAssignor.assignPartitions`` leaves behind.

    Attributes:
        assignment: member id -> assigned partitions (Java list order).
        partitions_transferring_ownership: partition -> new owner, for the
            constrained path; None after the general path (Kafka sets the
            field to null so that the cooperative assignor recomputes it).
        max_generation: the highest generation among the subscriptions.
        constrained: whether ``constrainedAssign`` ran.
    """

    assignment: dict[str, list[TopicPartition]]
    partitions_transferring_ownership: dict[TopicPartition, str] | None
    max_generation: int
    constrained: bool


@dataclass
class _Claims:
    all_equal: bool
    owned: dict[str, list[TopicPartition]]
    multiple_owners: set[TopicPartition]
    max_generation: int


def _remove_if_present(items: list[TopicPartition], tp: TopicPartition) -> None:
    # Java List.remove(Object): removes the first occurrence, if any.
    with contextlib.suppress(ValueError):
        items.remove(tp)


def _collect_claims(
    counts: Mapping[str, int],
    order: Sequence[str],
    members: Mapping[str, MemberSubscription],
) -> _Claims:
    """``allSubscriptionsEqual``: subscription equality and resolved ownership claims."""
    all_equal = True
    subscribed: frozenset[str] = frozenset()
    as_set: dict[int, frozenset[str]] = {}  # by id(): the tuples live through the call
    owner_of: dict[TopicPartition, str] = {}
    owned: dict[str, list[TopicPartition]] = {}
    multiple: set[TopicPartition] = set()
    max_generation = DEFAULT_GENERATION
    for consumer in order:
        member = members[consumer]
        topics = as_set.get(id(member.topics))
        if topics is None:
            topics = as_set[id(member.topics)] = frozenset(member.topics)
        if not subscribed:
            subscribed = topics
        elif all_equal and topics is not subscribed and topics != subscribed:
            all_equal = False
        generation = member.generation_id
        max_generation = max(max_generation, generation)
        claims = [
            tp for tp in dict.fromkeys(member.owned_partitions) if 0 <= tp[1] < counts.get(tp[0], 0)
        ]
        if owner_of.keys().isdisjoint(claims):
            # The common case: nobody claimed these yet.
            owned[consumer] = claims
            owner_of.update(dict.fromkeys(claims, consumer))
            continue
        mine: list[TopicPartition] = []
        owned[consumer] = mine
        for tp in claims:
            other = owner_of.get(tp)
            if other is None:
                mine.append(tp)
                owner_of[tp] = consumer
                continue
            other_generation = members[other].generation_id
            if generation == other_generation:
                # Same generation: invalid input; the partition is dropped from both.
                multiple.add(tp)
                _remove_if_present(owned[other], tp)
                owner_of[tp] = consumer
            elif generation > other_generation:
                mine.append(tp)
                _remove_if_present(owned[other], tp)
                owner_of[tp] = consumer
            # else: the other member's newer claim stands.
    return _Claims(all_equal, owned, multiple, max_generation)


def _all_partitions(counts: Mapping[str, int], topics: Sequence[str]) -> list[TopicPartition]:
    return [(topic, p) for topic in topics for p in range(counts[topic])]


# --------------------------------------------------------------------------- constrained


def _constrained_assign(
    counts: Mapping[str, int],
    order: Sequence[str],
    claims: _Claims,
    transferring: dict[TopicPartition, str],
) -> dict[str, list[TopicPartition]]:
    """``ConstrainedAssignmentBuilder.build`` without racks."""
    topics_sorted = sorted(counts, key=java_key)
    rank = {topic: i for i, topic in enumerate(topics_sorted)}
    total = sum(counts.values())
    members_count = len(order)
    min_quota, expected_over_min = divmod(total, members_count)
    max_quota = min_quota + (1 if expected_over_min else 0)
    current_over_min = 0

    multiple = claims.multiple_owners
    assignment: dict[str, list[TopicPartition]] = {c: [] for c in order}
    assigned: set[TopicPartition] = set()
    revoked: set[TopicPartition] = set()
    under_min: list[str] = []
    exactly_min: list[str] = []

    # (partition, topic) order; itemgetter is the same order, in C, when every
    # topic name is its own Java sort key (no character beyond U+FFFF).
    by_partition: Callable[[TopicPartition], Any] = (
        operator.itemgetter(1, 0)
        if all(java_key(t) is t for t in counts)
        else (lambda tp: (tp[1], rank[tp[0]]))
    )

    # assignOwnedPartitions
    for consumer in order:
        owned = sorted(claims.owned[consumer], key=by_partition)
        if multiple:
            owned = [tp for tp in owned if tp not in multiple]
        target = assignment[consumer]
        if len(owned) < min_quota:
            target.extend(owned)
            assigned.update(owned)
            under_min.append(consumer)
        elif len(owned) >= max_quota and current_over_min < expected_over_min:
            current_over_min += 1
            if current_over_min == expected_over_min:
                exactly_min.clear()
            target.extend(owned[:max_quota])
            assigned.update(owned[:max_quota])
            revoked.update(owned[max_quota:])
        else:
            target.extend(owned[:min_quota])
            assigned.update(owned[:min_quota])
            revoked.update(owned[min_quota:])
            if current_over_min < expected_over_min:
                exactly_min.append(consumer)

    unassigned = [tp for tp in _all_partitions(counts, topics_sorted) if tp not in assigned]
    under_min.sort(key=java_key)
    exactly_min.sort(key=java_key)

    # assignRoundRobin: passes over the members below minQuota (sorted by member
    # id), one partition each per pass; a member reaching minQuota leaves the
    # list and joins the back of the at-minQuota queue. Once that list is empty,
    # each remaining partition goes to the member at the front of the queue.
    check_transfer = bool(revoked or multiple)
    position = 0
    n_unassigned = len(unassigned)
    at_min: deque[str] = deque(exactly_min)
    remaining: list[str] = under_min
    while remaining and position < n_unassigned:
        next_pass: list[str] = []
        for i, consumer in enumerate(remaining):
            if position == n_unassigned:
                next_pass.extend(remaining[i:])
                break
            tp = unassigned[position]
            position += 1
            target = assignment[consumer]
            target.append(tp)
            if check_transfer and (tp in revoked or tp in multiple):
                transferring[tp] = consumer
            if len(target) == min_quota:
                at_min.append(consumer)
            else:
                next_pass.append(consumer)
        remaining = next_pass
    while position < n_unassigned:
        if not at_min:
            raise IllegalAssignorStateError("No more unfilled consumers to be assigned.")
        consumer = at_min.popleft()
        tp = unassigned[position]
        position += 1
        target = assignment[consumer]
        target.append(tp)
        if check_transfer and (tp in revoked or tp in multiple):
            transferring[tp] = consumer
        if len(target) == max_quota:
            current_over_min += 1

    # verifyUnfilledMembers
    if remaining:
        if current_over_min != expected_over_min:
            raise IllegalAssignorStateError(
                "We haven't reached the expected number of members with more than the "
                "minQuota partitions, but no more partitions to be assigned"
            )
        for consumer in remaining:
            if len(assignment[consumer]) != min_quota:
                raise IllegalAssignorStateError(
                    f"Consumer: [{consumer}] doesn't reach minQuota partitions, and no more "
                    "partitions to be assigned"
                )
    return assignment


# --------------------------------------------------------------------------- general


class _SizeOrderedMembers:
    """``TreeSet<String>`` ordered by (assignment size, member id) (``SubscriptionComparator``).

    As in Java, an entry is keyed by the size it had when added; callers
    remove a member before its size changes and add it back afterwards.
    """

    def __init__(self, assignment: Mapping[str, list[TopicPartition]], keys: Mapping[str, str]):
        self._assignment = assignment
        self._keys = keys
        self._items: list[tuple[int, str, str]] = []
        self._entry: dict[str, tuple[int, str, str]] = {}

    def add(self, member: str) -> None:
        if member in self._entry:
            return
        entry = (len(self._assignment[member]), self._keys[member], member)
        self._entry[member] = entry
        bisect.insort(self._items, entry)

    def discard(self, member: str) -> None:
        entry = self._entry.pop(member, None)
        if entry is not None:
            del self._items[bisect.bisect_left(self._items, entry)]

    def __iter__(self) -> Iterator[str]:
        return (member for _, _, member in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def first(self) -> str:
        return self._items[0][2]

    def last(self) -> str:
        return self._items[-1][2]


class _PartitionMovements:
    """``AbstractStickyAssignor.PartitionMovements`` (without the test-only cycle check)."""

    def __init__(self) -> None:
        self._by_topic: dict[str, dict[tuple[str, str], dict[TopicPartition, None]]] = {}
        self._movements: dict[TopicPartition, tuple[str, str]] = {}

    def _remove(self, tp: TopicPartition) -> tuple[str, str]:
        pair = self._movements.pop(tp)
        for_topic = self._by_topic[tp[0]]
        del for_topic[pair][tp]
        if not for_topic[pair]:
            del for_topic[pair]
        if not for_topic:
            del self._by_topic[tp[0]]
        return pair

    def _add(self, tp: TopicPartition, pair: tuple[str, str]) -> None:
        self._movements[tp] = pair
        self._by_topic.setdefault(tp[0], {}).setdefault(pair, {})[tp] = None

    def move(self, tp: TopicPartition, old: str, new: str) -> None:
        if tp in self._movements:
            src, _ = self._remove(tp)
            if src != new:
                self._add(tp, (src, new))
        else:
            self._add(tp, (old, new))

    def actual_partition_to_move(self, tp: TopicPartition, old: str, new: str) -> TopicPartition:
        for_topic = self._by_topic.get(tp[0])
        if for_topic is None:
            return tp
        if tp in self._movements:
            old = self._movements[tp][0]
        reverse = for_topic.get((new, old))
        if not reverse:
            return tp
        return next(iter(reverse))


class _GeneralBuilder:
    """``GeneralAssignmentBuilder`` without racks."""

    def __init__(
        self,
        counts: Mapping[str, int],
        order: Sequence[str],
        members: Mapping[str, MemberSubscription],
        claims: _Claims,
    ):
        self.counts = counts
        self.members = members
        self.order = order
        self.max_generation = claims.max_generation
        self.keys = {c: java_key(c) for c in order}
        self.topic_consumers: dict[str, list[str]] = {t: [] for t in counts}
        self.consumer_topics: dict[str, list[str]] = {}
        self.consumer_topic_sets: dict[str, frozenset[str]] = {}
        for consumer in order:
            topics = [t for t in dict.fromkeys(members[consumer].topics) if t in counts]
            self.consumer_topics[consumer] = topics
            self.consumer_topic_sets[consumer] = frozenset(topics)
            for topic in topics:
                self.topic_consumers[topic].append(consumer)
        self.total = sum(counts.values())
        self.current: dict[str, list[TopicPartition]] = {
            c: list(claims.owned.get(c, ())) for c in order
        }
        self.partition_consumer: dict[TopicPartition, str] = {
            tp: c for c, tps in self.current.items() for tp in tps
        }
        topic_keys = {t: java_key(t) for t in counts}
        self.sorted_topics = sorted(
            counts, key=lambda t: (len(self.topic_consumers[t]), topic_keys[t])
        )
        self.sorted_partitions = _all_partitions(counts, self.sorted_topics)
        self.sorted_members = _SizeOrderedMembers(self.current, self.keys)
        self.movements = _PartitionMovements()
        self.revocation_required = False
        # Derived views kept in step with ``current``.
        self.sets: dict[str, set[TopicPartition]] = {}
        self.topic_counts: dict[str, Counter[str]] = {}

    # -- bookkeeping

    def _rebuild_views(self) -> None:
        self.sets = {c: set(tps) for c, tps in self.current.items()}
        self.topic_counts = {c: Counter(t for t, _ in tps) for c, tps in self.current.items()}

    def _add_partition(self, consumer: str, tp: TopicPartition) -> None:
        self.current[consumer].append(tp)
        self.sets[consumer].add(tp)
        self.topic_counts[consumer][tp[0]] += 1
        self.partition_consumer[tp] = consumer

    def _remove_partition(self, consumer: str, tp: TopicPartition) -> None:
        self.current[consumer].remove(tp)
        self.sets[consumer].discard(tp)
        self.topic_counts[consumer][tp[0]] -= 1

    def _max_assignment_size(self, consumer: str) -> int:
        topics = self.consumer_topics[consumer]
        if len(topics) == len(self.counts):
            return self.total
        return sum(self.counts[t] for t in topics)

    # -- build

    def build(self) -> dict[str, list[TopicPartition]]:
        prev_assignment = self._previous_assignment()
        assigned = self._assign_owned_partitions()
        unassigned = [tp for tp in self.sorted_partitions if tp not in assigned]
        self._rebuild_views()
        for consumer in self.current:
            self.sorted_members.add(consumer)
        self._balance(prev_assignment, unassigned)
        return self.current

    def _previous_assignment(self) -> dict[TopicPartition, tuple[str, int]]:
        """``prepopulateCurrentAssignments``: claims of older generations, newest first."""
        prev: dict[TopicPartition, tuple[str, int]] = {}
        for consumer in self.order:
            member = self.members[consumer]
            generation = member.generation_id
            if generation >= self.max_generation:
                continue
            for tp in member.owned_partitions:
                known = prev.get(tp)
                if known is None or generation > known[1]:
                    prev[tp] = (consumer, generation)
        return prev

    def _assign_owned_partitions(self) -> set[TopicPartition]:
        assigned: set[TopicPartition] = set()
        for consumer, partitions in self.current.items():
            subscribed = set(self.members[consumer].topics)
            kept: list[TopicPartition] = []
            for tp in partitions:
                if tp[0] not in self.counts:
                    self.partition_consumer.pop(tp, None)
                elif tp[0] not in subscribed:
                    self.revocation_required = True
                else:
                    kept.append(tp)
                    assigned.add(tp)
            partitions[:] = kept
        return assigned

    def _maybe_assign_partition(self, tp: TopicPartition) -> bool:
        for consumer in self.sorted_members:
            if tp[0] in self.consumer_topic_sets[consumer]:
                self.sorted_members.discard(consumer)
                self._add_partition(consumer, tp)
                self.sorted_members.add(consumer)
                return True
        return False

    def _can_consumer_participate(self, consumer: str) -> bool:
        size = len(self.current[consumer])
        if size < self._max_assignment_size(consumer):
            return True
        return any(len(self.topic_consumers[tp[0]]) >= 2 for tp in self.current[consumer])

    def _balance_score(self, assignment: Mapping[str, list[TopicPartition]]) -> int:
        sizes = sorted(len(tps) for tps in assignment.values())
        n = len(sizes)
        return sum(size * (2 * i - (n - 1)) for i, size in enumerate(sizes))

    def _balance(
        self,
        prev_assignment: Mapping[TopicPartition, tuple[str, int]],
        unassigned: list[TopicPartition],
    ) -> None:
        initializing = not self.current[self.sorted_members.last()]
        for tp in unassigned:
            if self.topic_consumers[tp[0]]:
                self._maybe_assign_partition(tp)

        fixed_topics = {t for t, cs in self.topic_consumers.items() if len(cs) < 2}
        reassignable_all = [tp for tp in self.sorted_partitions if tp[0] not in fixed_topics]
        reassignable_new = [tp for tp in unassigned if tp[0] not in fixed_topics]

        fixed: dict[str, list[TopicPartition]] = {}
        for consumer in self.order:
            if not self._can_consumer_participate(consumer):
                self.sorted_members.discard(consumer)
                fixed[consumer] = self.current.pop(consumer)

        before = {c: list(tps) for c, tps in self.current.items()}
        before_owner = dict(self.partition_consumer)

        if not self.revocation_required:
            self._perform_reassignments(reassignable_new, prev_assignment)
        performed = self._perform_reassignments(reassignable_all, prev_assignment)

        if (
            not initializing
            and performed
            and self._balance_score(self.current) >= self._balance_score(before)
        ):
            self.current.clear()
            self.current.update({c: list(tps) for c, tps in before.items()})
            self.partition_consumer = before_owner

        for consumer, partitions in fixed.items():
            self.current[consumer] = partitions
            self.sets[consumer] = set(partitions)
            self.sorted_members.add(consumer)

    def _is_balanced(self) -> bool:
        """``isBalanced``.

        Kafka scans, for each member below its maximum, every partition of its
        topics that it does not own and asks whether the owner has more than
        one partition more than the member. The owner with the most partitions
        among a topic's owners answers that for the whole topic (the member
        itself can never satisfy the test), so this computes per-topic maxima
        over the members in play once per call.
        """
        members = self.sorted_members
        if not len(members):
            return True
        low = len(self.current[members.first()])
        high = len(self.current[members.last()])
        if low >= high - 1:
            return True
        topic_max: dict[str, int] = {}
        for consumer, per_topic in self.topic_counts.items():
            if consumer not in self.current:
                continue
            size = len(self.current[consumer])
            for topic, count in per_topic.items():
                if count > 0 and size > topic_max.get(topic, -1):
                    topic_max[topic] = size
        for consumer in members:
            size = len(self.current[consumer])
            if size == self._max_assignment_size(consumer):
                continue
            for topic in self.consumer_topics[consumer]:
                if topic_max.get(topic, -1) > size + 1:
                    return False
        return True

    def _perform_reassignments(
        self,
        reassignable: Sequence[TopicPartition],
        prev_assignment: Mapping[TopicPartition, tuple[str, int]],
    ) -> bool:
        performed = False
        for _ in range(MAX_REASSIGNMENT_PASSES):
            modified = False
            for tp in reassignable:
                if self._is_balanced():
                    break
                consumer = self.partition_consumer.get(tp)
                if consumer is None or consumer not in self.current:
                    continue  # Java: logs an error (and would fail on it)
                size = len(self.current[consumer])
                prev = prev_assignment.get(tp)
                if (
                    prev is not None
                    and prev[0] in self.current
                    and tp[0] in self.consumer_topic_sets[prev[0]]
                    and size > len(self.current[prev[0]]) + 1
                ):
                    self._reassign_to(tp, prev[0])
                    performed = modified = True
                    continue
                for other in self.topic_consumers[tp[0]]:
                    if other in self.current and size > len(self.current[other]) + 1:
                        self._reassign(tp)
                        performed = modified = True
                        break
            if not modified:
                break
        return performed

    def _reassign(self, tp: TopicPartition) -> None:
        for candidate in self.sorted_members:
            if tp[0] in self.consumer_topic_sets[candidate]:
                self._reassign_to(tp, candidate)
                return
        raise IllegalAssignorStateError(f"no consumer for {tp}")

    def _reassign_to(self, tp: TopicPartition, new: str) -> None:
        old = self.partition_consumer[tp]
        actual = self.movements.actual_partition_to_move(tp, old, new)
        self._process_movement(actual, new)

    def _process_movement(self, tp: TopicPartition, new: str) -> None:
        old = self.partition_consumer[tp]
        self.sorted_members.discard(old)
        self.sorted_members.discard(new)
        self.movements.move(tp, old, new)
        self._remove_partition(old, tp)
        self._add_partition(new, tp)
        self.sorted_members.add(new)
        self.sorted_members.add(old)


# --------------------------------------------------------------------------- entry


def sticky_assign(
    counts: Mapping[str, int], members: Mapping[str, MemberSubscription]
) -> StickyOutcome:
    """``AbstractStickyAssignor.assignPartitions`` without racks.

    Args:
        counts: topic -> partition count, already reduced to subscribed topics
            with metadata (see :func:`.client.subscribed_partitions_per_topic`).
        members: member id -> subscription; the mapping's order stands for the
            order in which the leader put the JoinGroup members into its
            ``HashMap``.

    Returns:
        The assignment and the partitions transferring ownership.

    Raises:
        IllegalAssignorStateError: an internal check failed (a bug).
    """
    if not members:
        return StickyOutcome({}, {}, DEFAULT_GENERATION, True)
    order = java_hashmap_order(list(members))
    claims = _collect_claims(counts, order, members)
    if claims.all_equal:
        transferring: dict[TopicPartition, str] = {}
        assignment = _constrained_assign(counts, order, claims, transferring)
        return StickyOutcome(assignment, transferring, claims.max_generation, True)
    assignment = _GeneralBuilder(counts, order, members, claims).build()
    return StickyOutcome(assignment, None, claims.max_generation, False)


class StickyAssignor:
    """``org.apache.kafka.clients.consumer.StickyAssignor`` (``"sticky"``, EAGER only).

    Kafka's ``StickyAssignor.memberData`` reads the previous assignment and
    generation from the subscription's ``userData`` (``StickyAssignorUserDataV1``),
    because an eager member has revoked everything before it joins. Here the
    caller passes that content as :attr:`MemberSubscription.owned_partitions`
    and :attr:`MemberSubscription.generation_id`.
    """

    name: str = "sticky"
    supported_protocols: tuple[str, ...] = ("EAGER",)

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        members: Mapping[str, MemberSubscription],
    ) -> ClientAssignment:
        """Run the sticky algorithm.

        Args:
            partitions_per_topic: topic -> partition count.
            members: member id -> subscription, in JoinGroup response order.

        Returns:
            Member id -> partitions, for every member (possibly empty).

        Raises:
            ValueError: a members key is not its member's id, or a partition
                count is invalid.
            IllegalAssignorStateError: an internal check failed (a bug).
        """
        validate_members(members)
        counts = subscribed_partitions_per_topic(partitions_per_topic, members)
        outcome = sticky_assign(counts, members)
        return {m: tuple(tps) for m, tps in outcome.assignment.items()}
