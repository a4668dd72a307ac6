"""The classic ``range`` assignor (client side, EAGER).

Source: K@3.9 ``clients/src/main/java/org/apache/kafka/clients/consumer/RangeAssignor.java``
with ``AbstractPartitionAssignor.MemberInfo`` (kafka-protocols.md B8).

Per topic, independently: the topic's subscribers are sorted with
``MemberInfo.compareTo`` (static members first by ``group.instance.id``, then
dynamic members by member id, ``String.compareTo``); with ``P`` partitions and
``N`` subscribers, subscriber ``i`` gets ``P // N + (1 if i < P % N else 0)``
partitions starting at ``(P // N) * i + min(i, P % N)``. So the first
``P % N`` subscribers of *every* topic get one extra partition.

Not emulated: the rack-aware variant of KIP-881 (3.5+), which applies only
when both consumers and partitions carry racks. Without racks its co-partitioned
grouping of topics gives exactly the per-topic result above.

Emulator choice: each member's list is in (topic, partition) order; Kafka's
list order follows ``HashMap`` iteration over topics and means nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from emulator.modern.assignors._java import java_sorted
from emulator.modern.assignors.client import (
    ClientAssignment,
    MemberSubscription,
    in_member_order,
    subscribed_partitions_per_topic,
    subscribers_by_topic,
    validate_members,
)
from emulator.modern.messages import TopicPartition

__all__ = ["RangeAssignor", "deal_ranges"]


def deal_ranges(
    topic: str,
    num_partitions: int,
    subscribers: Sequence[str],
    out: Mapping[str, list[TopicPartition]],
) -> None:
    """Append one topic's contiguous ranges to its subscribers' lists.

    With ``P`` partitions and ``N`` subscribers (in order), subscriber ``i``
    gets ``P // N`` partitions, plus one if ``i < P % N``, starting at
    ``(P // N) * i + min(i, P % N)``. Subscribers past the last partition get
    nothing (Kafka loops over them too, adding empty ranges).

    Args:
        topic: the topic.
        num_partitions: its partition count ``P``.
        subscribers: its subscribers' member ids, in assignment order (``N > 0``).
        out: member id -> list to extend.
    """
    per_member, with_extra = divmod(num_partitions, len(subscribers))
    partitions = [(topic, p) for p in range(num_partitions)]
    if per_member == 0:
        for member_id, tp in zip(subscribers, partitions, strict=False):
            out[member_id].append(tp)
        return
    start = 0
    for i, member_id in enumerate(subscribers):
        end = start + per_member + (1 if i < with_extra else 0)
        out[member_id].extend(partitions[start:end])
        start = end


class RangeAssignor:
    """``org.apache.kafka.clients.consumer.RangeAssignor`` (``"range"``, EAGER only)."""

    name: str = "range"
    supported_protocols: tuple[str, ...] = ("EAGER",)

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        members: Mapping[str, MemberSubscription],
    ) -> ClientAssignment:
        """Assign every subscribed topic's partitions in contiguous ranges.

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
        result: dict[str, list[TopicPartition]] = {m: [] for m in members}
        topics = java_sorted(counts)
        per_topic = subscribers_by_topic(ordered, topics)
        for topic in topics:
            deal_ranges(topic, counts[topic], per_topic[topic], result)
        return {m: tuple(tps) for m, tps in result.items()}
