"""The server-side ``uniform`` assignor (KIP-848), the default ``group.remote.assignor``.

Sources (kafka-protocols.md C6), K@trunk, in
``group-coordinator/src/main/java/org/apache/kafka/coordinator/group/assignor/``:
``UniformAssignor.java``, ``UniformHomogeneousAssignmentBuilder.java`` and
``UniformHeterogeneousAssignmentBuilder.java``. Priority: balance, then
stickiness. Member order is :meth:`.server.GroupSpec.member_ids` (member ids
sorted by ``String.compareTo``); topic ties are broken by name (see
:mod:`.server` for both choices).

**Homogeneous** (every member subscribes to the same topics):

1. ``P`` = partitions of the subscribed topics, ``M`` members,
   ``minQuota = P // M``; the first ``P % M`` members in member order get
   ``minQuota + 1``.
2. The unassigned list starts with every partition no member currently holds
   (topics sorted, partitions ascending).
3. Each member, in member order, keeps its current partitions (topics sorted,
   partitions ascending) up to its quota; the excess is appended to the
   unassigned list.
4. The members still below quota, in member order, each take their missing
   count as one contiguous chunk of the unassigned list (not round-robin).

With ``stable_quota`` (KAFKA-18688, apache/kafka#19677: Kafka 4.0.1 and 4.1.0
on): a member granted the extra slot that cannot fill it from partitions it
already owns hands the slot back, unless it is one of the last members that
must take one, so a balanced previous assignment moves nothing.

**Heterogeneous** (``UniformHeterogeneousAssignmentBuilder``, the 2024
rewrite with ``MAX_ITERATION_COUNT = 16``):

1. Each member keeps every current partition of the topics it still
   subscribes to.
2. Unassigned partitions go topic by topic (topics by partitions per
   subscriber descending, then subscriber count ascending, then name) to the
   least-loaded subscribers, levelling them up range by range
   (``MemberAssignmentBalancer.nextLeastLoadedMember``).
3. Balancing: topics with two or more subscribers are visited in the same
   order; for each, partitions move from the most-loaded subscribers (their
   highest-sorted partition of the topic first) to the least-loaded ones
   until the two ranges differ by at most one. The sweep over all topics
   repeats until a full sweep moves nothing, at most 16 times.

Deviation (input hygiene): if two members' current assignments share a
partition (Kafka's target assignment never does), the first member in member
order keeps it and the other's claim is ignored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from emulator.modern.assignors._java import java_key
from emulator.modern.assignors.server import (
    GroupSpec,
    PartitionAssignorError,
    ServerAssignment,
    SubscriptionType,
    existing_topics,
    valid_current_assignment,
)
from emulator.modern.messages import TopicPartition

__all__ = ["MAX_ITERATION_COUNT", "UniformAssignor", "uniform_heterogeneous", "uniform_homogeneous"]

MAX_ITERATION_COUNT = 16
"""``UniformHeterogeneousAssignmentBuilder.MAX_ITERATION_COUNT``."""


# --------------------------------------------------------------------------- homogeneous


def uniform_homogeneous(
    group_spec: GroupSpec, topics: Mapping[str, int], *, stable_quota: bool = False
) -> ServerAssignment:
    """``UniformHomogeneousAssignmentBuilder.build``.

    Args:
        group_spec: members whose subscriptions are all equal.
        topics: topic -> partition count.
        stable_quota: the KAFKA-18688 rule for the extra slots (Kafka 4.0.1+).

    Returns:
        Member id -> target partitions, for every member.

    Raises:
        PartitionAssignorError: partitions were left unassigned (a bug).
    """
    member_ids = group_spec.member_ids()
    if not member_ids:
        return {}
    members = group_spec.members
    subscribed = existing_topics(members[member_ids[0]].subscribed_topics, topics)
    if not subscribed:
        return {m: frozenset() for m in member_ids}
    rank = {t: i for i, t in enumerate(subscribed)}

    def order(partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
        return sorted(partitions, key=lambda tp: (rank[tp[0]], tp[1]))

    # Every subscribed partition, topics sorted and partitions ascending.
    universe_list = [(t, p) for t in subscribed for p in range(topics[t])]
    universe: frozenset[TopicPartition] | None = None

    # Each member's current partitions that still count: subscribed topics,
    # existing partitions, not already held by an earlier member.
    current: list[frozenset[TopicPartition]] = []
    held: set[TopicPartition] = set()
    for member_id in member_ids:
        mine = members[member_id].assignment
        if mine:
            if universe is None:
                universe = frozenset(universe_list)
            if not mine <= universe:
                mine = mine & universe
            if not held.isdisjoint(mine):
                mine = mine - held
            held |= mine
        current.append(mine)

    # The unassigned list starts with every partition nobody holds.
    unassigned = universe_list
    if held:
        unassigned = order(frozenset(universe_list) - held if universe is None else universe - held)
    total = len(universe_list)
    min_quota, with_extra = divmod(total, len(member_ids))

    # maybeRevokePartitions: keep up to the quota (topics sorted, partitions
    # ascending); the first ``with_extra`` members in member order get one more.
    kept: list[frozenset[TopicPartition] | list[TopicPartition]] = []
    unfilled: list[tuple[int, int]] = []
    member_count = len(member_ids)
    extra_left = with_extra  # remainingMembersToGetAnExtraPartition
    for index, mine in enumerate(current):
        has_extra = extra_left > 0 if stable_quota else index < with_extra
        quota = min_quota + (1 if has_extra else 0)
        if len(mine) <= quota:
            kept.append(mine)
            quota -= len(mine)
        else:
            keep: list[TopicPartition] = []
            ordered = order(mine)
            start = 0
            while start < len(ordered):
                topic = ordered[start][0]
                end = start
                while end < len(ordered) and ordered[end][0] == topic:
                    end += 1
                size = end - start
                if size <= quota:
                    keep.extend(ordered[start:end])
                    quota -= size
                else:
                    keep.extend(ordered[start : start + quota])
                    unassigned.extend(ordered[start + quota : end])
                    quota = 0
                start = end
            kept.append(keep)
        if stable_quota:
            if quota > 0 and has_extra and member_count - index > extra_left:
                # Give the extra slot back for a later member to claim.
                quota -= 1
                has_extra = False
            if has_extra:
                extra_left -= 1
        if quota > 0:
            unfilled.append((index, quota))

    # assignRemainingPartitions: contiguous chunks, member by member.
    result: ServerAssignment = {}
    for index, partitions in enumerate(kept):
        result[member_ids[index]] = (
            partitions if isinstance(partitions, frozenset) else frozenset(partitions)
        )
    position = 0
    for index, remaining in unfilled:
        chunk = unassigned[position : position + remaining]
        position += len(chunk)
        member_id = member_ids[index]
        result[member_id] = result[member_id].union(chunk)
    if position < len(unassigned):
        raise PartitionAssignorError("Partitions were left unassigned")
    return result


# --------------------------------------------------------------------------- heterogeneous


class _MemberAssignmentBalancer:
    """``UniformHeterogeneousAssignmentBuilder.MemberAssignmentBalancer``.

    Tracks the least-loaded range ``[0, least_end)`` and the most-loaded range
    ``[most_start, most_end)`` of the members sorted by (size, index).
    """

    def __init__(self, sizes: list[int]):
        self.sizes = sizes
        self.sorted: list[int] = []
        self.least_end = 0
        self.least_count = -1
        self.next_least = 0
        self.most_start = 0
        self.most_end = 0
        self.most_count = 1
        self.next_most = -1

    def initialize(self, members: Sequence[int]) -> int:
        if not members:
            raise ValueError("Cannot balance an empty subscriber list.")
        sizes = self.sizes
        self.sorted = sorted(members, key=lambda i: (sizes[i], i))
        n = len(self.sorted)
        self.least_end = 0
        self.least_count = sizes[self.sorted[0]] - 1
        self.next_least = 0
        self.most_start = n
        self.most_end = n
        self.most_count = sizes[self.sorted[-1]] + 1
        self.next_most = n - 1
        return sizes[self.sorted[-1]] - sizes[self.sorted[0]]

    def next_least_loaded(self) -> int:
        if self.next_least >= self.least_end:
            self.least_count += 1
            while (
                self.least_end < len(self.sorted)
                and self.sizes[self.sorted[self.least_end]] == self.least_count
            ):
                self.least_end += 1
            self.next_least = 0
        member = self.sorted[self.next_least]
        self.next_least += 1
        return member

    def next_most_loaded(self) -> int:
        if self.next_most < self.most_start:
            if self.most_end <= self.most_start and self.most_start > 0:
                self.most_count = self.sizes[self.sorted[self.most_start - 1]]
            else:
                self.most_count -= 1
            while (
                self.most_start > 0
                and self.sizes[self.sorted[self.most_start - 1]] == self.most_count
            ):
                self.most_start -= 1
            self.next_most = self.most_end - 1
        if self.next_most < 0:
            return -1
        member = self.sorted[self.next_most]
        self.next_most -= 1
        return member

    def exclude_most_loaded(self) -> None:
        i = self.next_most + 1
        member = self.sorted[i]
        self.sorted[i] = self.sorted[self.most_end - 1]
        self.sorted[self.most_end - 1] = member
        self.most_end -= 1

    def is_balanced(self) -> bool:
        return self.most_count - self.least_count <= 1


class _HeterogeneousBuilder:
    def __init__(self, group_spec: GroupSpec, topics: Mapping[str, int]):
        self.topics = topics
        self.members = group_spec.members
        self.member_ids = group_spec.member_ids()
        self.subscriptions: list[frozenset[str]] = []
        self.topic_subscribers: dict[str, list[int]] = {}
        for index, member_id in enumerate(self.member_ids):
            mine = existing_topics(self.members[member_id].subscribed_topics, topics)
            self.subscriptions.append(frozenset(mine))
            for topic in mine:
                self.topic_subscribers.setdefault(topic, []).append(index)
        self.sizes = [0] * len(self.member_ids)
        self.owners: dict[str, list[int]] = {
            t: [-1] * topics[t] for t in sorted(self.topic_subscribers, key=java_key)
        }
        keys = {t: java_key(t) for t in self.owners}
        self.topic_order = {
            t: (-(topics[t] / len(s)), len(s), keys[t]) for t, s in self.topic_subscribers.items()
        }

    def _sorted_topics(self, topic_names: Sequence[str]) -> list[str]:
        return sorted(topic_names, key=self.topic_order.__getitem__)

    def build(self) -> ServerAssignment:
        if not self.owners:
            return {m: frozenset() for m in self.member_ids}
        self._maybe_revoke_partitions()
        self._assign_remaining_partitions()
        self._balance()
        target: dict[str, list[TopicPartition]] = {m: [] for m in self.member_ids}
        for topic, owners in self.owners.items():
            for partition, owner in enumerate(owners):
                if owner < 0:
                    raise PartitionAssignorError("Some partitions were left unassigned")
                target[self.member_ids[owner]].append((topic, partition))
        return {m: frozenset(tps) for m, tps in target.items()}

    def _maybe_revoke_partitions(self) -> None:
        for index, member_id in enumerate(self.member_ids):
            subscribed = self.subscriptions[index]
            for topic, partitions in valid_current_assignment(
                self.members[member_id], self.topics
            ).items():
                if topic not in subscribed:
                    continue  # the whole topic is revoked
                owners = self.owners[topic]
                for p in partitions:
                    if owners[p] == -1:
                        owners[p] = index
                        self.sizes[index] += 1

    def _assign(self, topic: str, partition: int, member: int) -> None:
        owners = self.owners[topic]
        old = owners[partition]
        if old != -1:
            self.sizes[old] -= 1
        owners[partition] = member
        self.sizes[member] += 1

    def _assign_remaining_partitions(self) -> None:
        unassigned = {
            t: [p for p, owner in enumerate(owners) if owner == -1]
            for t, owners in self.owners.items()
        }
        balancer = _MemberAssignmentBalancer(self.sizes)
        for topic in self._sorted_topics([t for t, ps in unassigned.items() if ps]):
            balancer.initialize(self.topic_subscribers[topic])
            for partition in unassigned[topic]:
                self._assign(topic, partition, balancer.next_least_loaded())

    def _balance(self) -> None:
        candidates = [t for t, s in self.topic_subscribers.items() if len(s) >= 2]
        if not candidates:
            return
        sorted_topics = self._sorted_topics(candidates)
        last_rebalanced = -1
        balancer = _MemberAssignmentBalancer(self.sizes)
        for _ in range(MAX_ITERATION_COUNT):
            for index, topic in enumerate(sorted_topics):
                if index == last_rebalanced:
                    return
                moved = self._balance_topic(topic, balancer)
                if moved > 0 or last_rebalanced == -1:
                    last_rebalanced = index

    def _balance_topic(self, topic: str, balancer: _MemberAssignmentBalancer) -> int:
        if balancer.initialize(self.topic_subscribers[topic]) <= 1:
            return 0
        owners = self.owners[topic]
        partitions = sorted(range(len(owners)), key=lambda p: (owners[p], p))
        start: dict[int, int] = {}
        end: dict[int, int] = {}
        for i, p in enumerate(partitions):
            start.setdefault(owners[p], i)
            end[owners[p]] = i + 1
        moved = 0
        while not balancer.is_balanced():
            most = -1
            while True:
                most = balancer.next_most_loaded()
                if most == -1:
                    break
                if most not in end or end[most] - start[most] <= 0:
                    balancer.exclude_most_loaded()
                    continue
                break
            if most == -1:
                break
            end[most] -= 1
            partition = partitions[end[most]]
            least = balancer.next_least_loaded()
            if balancer.is_balanced():
                break
            self._assign(topic, partition, least)
            moved += 1
        return moved


def uniform_heterogeneous(group_spec: GroupSpec, topics: Mapping[str, int]) -> ServerAssignment:
    """``UniformHeterogeneousAssignmentBuilder.build``.

    Args:
        group_spec: members with possibly different subscriptions.
        topics: topic -> partition count.

    Returns:
        Member id -> target partitions, for every member.

    Raises:
        PartitionAssignorError: partitions were left unassigned (a bug).
    """
    return _HeterogeneousBuilder(group_spec, topics).build()


class UniformAssignor:
    """``UniformAssignor`` (``"uniform"``).

    Args:
        stable_quota: follow KAFKA-18688 in the homogeneous builder (Kafka 4.0.1+).
    """

    name: str = "uniform"

    def __init__(self, *, stable_quota: bool = False) -> None:
        self.stable_quota = stable_quota

    def assign(self, group_spec: GroupSpec, topics: Mapping[str, int]) -> ServerAssignment:
        """Pick the homogeneous or heterogeneous builder by subscription type.

        Args:
            group_spec: members, subscriptions and current target assignment.
            topics: topic -> partition count.

        Returns:
            Member id -> target partitions, for every member.

        Raises:
            PartitionAssignorError: partitions were left unassigned (a bug).
            ValueError: a partition count is invalid.
        """
        if not group_spec.members:
            return {}
        if group_spec.subscription_type() is SubscriptionType.HOMOGENEOUS:
            return uniform_homogeneous(group_spec, topics, stable_quota=self.stable_quota)
        return uniform_heterogeneous(group_spec, topics)
