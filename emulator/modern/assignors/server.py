"""The server-side (KIP-848) assignor interface.

Under the ``consumer`` protocol the group coordinator computes the whole
group's *target assignment* itself whenever the group epoch moves past the
target assignment epoch (kafka-protocols.md C3, C4, C6), with the assignor
named by ``group.remote.assignor`` among ``group.consumer.assignors``
(default ``[uniform, range]``, the first one is the default).

Sources: K@trunk, in
``group-coordinator/src/main/java/org/apache/kafka/coordinator/group/api/assignor/``
(``ConsumerGroupPartitionAssignor``, ``GroupSpec``, ``MemberSubscription``,
``SubscriptionType``, ``PartitionAssignorException``) and
``modern/TargetAssignmentBuilder`` / ``ModernGroup.subscriptionType``.

Emulator choices (not Kafka):

* Topics are named, not identified by ``Uuid``. Where Kafka breaks ties by
  topic id, the emulator uses the topic name (``String.compareTo``); topic ids
  are random, so no particular order is lost.
* :meth:`GroupSpec.member_ids` is the member iteration order. Kafka iterates
  a ``HashMap`` of member ids (random UUIDs), so its order is arbitrary; the
  emulator fixes it to member ids sorted by ``String.compareTo``. Every
  "first N members" rule of the assignors uses this order.
* As the coordinator does before calling the assignor (it resolves topic
  names to ids from the metadata image), subscribed topics that do not exist
  in ``topics`` are ignored; a current assignment's partitions of topics or
  partition numbers that do not exist are dropped.
* The result has an entry for every member (possibly empty); Kafka may leave
  a member out, which the coordinator reads as an empty assignment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from emulator.modern.assignors._java import java_key
from emulator.modern.messages import TopicPartition

__all__ = [
    "GroupSpec",
    "MemberSpec",
    "PartitionAssignorError",
    "ServerAssignment",
    "ServerAssignor",
    "SubscriptionType",
    "existing_topics",
    "valid_current_assignment",
]

ServerAssignment = dict[str, frozenset[TopicPartition]]
"""Member id -> its target partitions (every member of the spec is a key)."""


class PartitionAssignorError(Exception):
    """``PartitionAssignorException``: the assignor cannot produce an assignment."""


class SubscriptionType(StrEnum):
    """``SubscriptionType``: whether all members subscribe to the same topics."""

    HOMOGENEOUS = "HOMOGENEOUS"
    HETEROGENEOUS = "HETEROGENEOUS"


@dataclass(frozen=True)
class MemberSpec:
    """One member in the group spec (``MemberSubscriptionAndAssignmentImpl``).

    Attributes:
        subscribed_topics: the topics the member subscribes to (by name).
        instance_id: ``group.instance.id`` of a static member, or None.
        assignment: the member's current *target* assignment.
        rack_id: the member's rack (carried, not used: rack-aware server
            assignment is not fully supported in 4.0, KAFKA-17747).
    """

    subscribed_topics: frozenset[str]
    instance_id: str | None = None
    assignment: frozenset[TopicPartition] = frozenset()
    rack_id: str | None = None


@dataclass(frozen=True)
class GroupSpec:
    """``GroupSpec``: every member's subscription and current target assignment.

    Attributes:
        members: member id -> spec.
    """

    members: Mapping[str, MemberSpec] = field(default_factory=dict)

    def member_ids(self) -> list[str]:
        """The member iteration order: member ids sorted by ``String.compareTo``.

        Returns:
            The member ids (see the module docstring for why this order).
        """
        return sorted(self.members, key=java_key)

    def subscription_type(self) -> SubscriptionType:
        """``ModernGroup.subscriptionType``: HOMOGENEOUS iff all subscriptions are equal.

        Computed on subscribed topic *names*, as the coordinator does, so a
        member subscribing to a topic that does not exist makes the group
        heterogeneous.

        Returns:
            The subscription type (HOMOGENEOUS for an empty group).
        """
        subscriptions = {spec.subscribed_topics for spec in self.members.values()}
        if len(subscriptions) <= 1:
            return SubscriptionType.HOMOGENEOUS
        return SubscriptionType.HETEROGENEOUS


class ServerAssignor(Protocol):
    """``ConsumerGroupPartitionAssignor``."""

    @property
    def name(self) -> str:
        """The ``group.remote.assignor`` name, e.g. ``"uniform"``."""
        ...

    def assign(self, group_spec: GroupSpec, topics: Mapping[str, int]) -> ServerAssignment:
        """Compute the target assignment.

        Args:
            group_spec: members, subscriptions and current target assignment.
            topics: topic -> partition count (the coordinator's metadata).

        Returns:
            Member id -> target partitions, for every member.
        """
        ...


def existing_topics(subscribed: frozenset[str], topics: Mapping[str, int]) -> list[str]:
    """The subscribed topics that exist, sorted by ``String.compareTo``.

    Args:
        subscribed: a member's subscribed topic names.
        topics: topic -> partition count.

    Returns:
        The existing subscribed topics, sorted.

    Raises:
        ValueError: a partition count is negative or not an int.
    """
    out: list[str] = []
    for topic in subscribed:
        count = topics.get(topic)
        if count is None:
            continue
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"topic {topic!r} has partition count {count!r}")
        out.append(topic)
    out.sort(key=java_key)
    return out


def valid_current_assignment(spec: MemberSpec, topics: Mapping[str, int]) -> dict[str, list[int]]:
    """A member's current assignment by topic, without partitions that do not exist.

    Topics are in ``String.compareTo`` order and partitions ascending; this
    is the emulator's stand-in for Kafka's iteration over the member's
    ``Map<Uuid, Set<Integer>>`` (hash order by topic id; ascending partitions
    for small partition numbers).

    Args:
        spec: the member.
        topics: topic -> partition count.

    Returns:
        Topic -> sorted partition ids.
    """
    by_topic: dict[str, list[int]] = {}
    for topic, partition in spec.assignment:
        count = topics.get(topic)
        if count is not None and 0 <= partition < count:
            by_topic.setdefault(topic, []).append(partition)
    return {t: sorted(by_topic[t]) for t in sorted(by_topic, key=java_key)}
