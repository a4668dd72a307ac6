"""The server-side ``range`` assignor (KIP-848).

Source: K@trunk ``RangeAssignor.java`` in
``group-coordinator/src/main/java/org/apache/kafka/coordinator/group/assignor/``
(kafka-protocols.md C6). At that commit it is *not* sticky (earlier versions,
e.g. the one Kafka's ``RangeAssignorTest`` was first written for, kept
previously owned partitions up to the quota; the current assignment is now
ignored).

Members are sorted like the classic ``MemberInfo`` order: static members
first by instance id, then the others by member id (``String.compareTo``).
For each topic, its subscribers in that order take contiguous ranges
``[next, next + quota)``, where ``quota = P // M`` and the first ``P % M``
subscribers get one more. When every member subscribes to the same topics and
those topics have equal partition counts, the result is co-partitioned: a
member gets the same partition numbers of every topic.

Emulator choice (see :mod:`.server`): subscribed topics absent from the
metadata are ignored instead of failing with ``PartitionAssignorException``.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping

from emulator.modern.assignors._java import java_key, static_first_key
from emulator.modern.assignors.client_range import deal_ranges
from emulator.modern.assignors.server import GroupSpec, ServerAssignment, existing_topics
from emulator.modern.messages import TopicPartition

__all__ = ["ServerRangeAssignor"]


class ServerRangeAssignor:
    """``RangeAssignor`` of the group coordinator (``"range"``)."""

    name: str = "range"

    def assign(self, group_spec: GroupSpec, topics: Mapping[str, int]) -> ServerAssignment:
        """Contiguous ranges per topic, in static-first member order.

        Args:
            group_spec: members and subscriptions (current assignments unused).
            topics: topic -> partition count.

        Returns:
            Member id -> target partitions, for every member.

        Raises:
            ValueError: a partition count is invalid.
        """
        members = group_spec.members
        ordered = sorted(members, key=lambda m: static_first_key(m, members[m].instance_id))
        groups: dict[frozenset[str], list[tuple[int, str]]] = {}
        for rank, member_id in enumerate(ordered):
            groups.setdefault(members[member_id].subscribed_topics, []).append((rank, member_id))
        # Topic -> indices of the subscription groups that contain it.
        topic_groups: dict[str, list[int]] = {}
        for index, subscribed in enumerate(groups):
            for topic in existing_topics(subscribed, topics):
                topic_groups.setdefault(topic, []).append(index)
        group_lists = list(groups.values())
        merged: dict[tuple[int, ...], list[str]] = {}
        target: dict[str, list[TopicPartition]] = {m: [] for m in ordered}
        for topic in sorted(topic_groups, key=java_key):
            which = tuple(topic_groups[topic])
            subscribers = merged.get(which)
            if subscribers is None:
                lists = [group_lists[i] for i in which]
                subscribers = [member_id for _, member_id in heapq.merge(*lists)]
                merged[which] = subscribers
            deal_ranges(topic, topics[topic], subscribers, target)
        return {m: frozenset(tps) for m, tps in target.items()}
