"""The classic ``roundrobin`` assignor (client side, EAGER).

Source: K@3.9 ``clients/src/main/java/org/apache/kafka/clients/consumer/RoundRobinAssignor.java``
with ``AbstractPartitionAssignor.MemberInfo`` and ``common/utils/CircularIterator``
(kafka-protocols.md B8).

All members are sorted with ``MemberInfo.compareTo`` (static members first by
``group.instance.id``, then by member id) into a circular iterator. The
partitions are laid out topic by topic (topics in ``TreeSet`` order, i.e.
``String.compareTo``; partitions ``0..n-1``). For each partition the iterator
skips members not subscribed to its topic and the next member takes it; the
iterator then stays just after that member. With identical subscriptions the
result is balanced within one; with different subscriptions it can be very
unbalanced (Kafka's own javadoc example is a hand test).
"""

from __future__ import annotations

from collections.abc import Mapping

from emulator.modern.assignors._java import java_sorted
from emulator.modern.assignors.client import (
    ClientAssignment,
    MemberSubscription,
    in_member_order,
    subscribed_partitions_per_topic,
    validate_members,
)
from emulator.modern.messages import TopicPartition

__all__ = ["RoundRobinAssignor"]


class RoundRobinAssignor:
    """``org.apache.kafka.clients.consumer.RoundRobinAssignor`` (``"roundrobin"``, EAGER)."""

    name: str = "roundrobin"
    supported_protocols: tuple[str, ...] = ("EAGER",)

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        members: Mapping[str, MemberSubscription],
    ) -> ClientAssignment:
        """Deal the sorted partitions to the sorted members, skipping non-subscribers.

        Args:
            partitions_per_topic: topic -> partition count.
            members: member id -> subscription.

        Returns:
            Member id -> partitions, for every member (possibly empty).

        Raises:
            ValueError: a members key is not its member's id, or a partition
                count is invalid.
        """
        validate_members(members)
        counts = subscribed_partitions_per_topic(partitions_per_topic, members)
        ordered = in_member_order(members)
        ids = [m.member_id for m in ordered]
        topic_sets = [frozenset(m.topics) for m in ordered]
        result: dict[str, list[TopicPartition]] = {m: [] for m in members}
        if not ids:
            return {}
        position = 0  # CircularIterator.peek()
        n = len(ids)
        for topic in java_sorted(counts):
            for partition in range(counts[topic]):
                # Some member subscribes to every topic in ``counts``, so this ends.
                while topic not in topic_sets[position]:
                    position = (position + 1) % n
                result[ids[position]].append((topic, partition))
                position = (position + 1) % n
        return {m: tuple(tps) for m, tps in result.items()}
