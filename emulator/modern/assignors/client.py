"""The client-side (classic protocol) assignor interface, run by the group leader.

In the classic protocol the coordinator elects a leader, sends it every
member's ``ConsumerProtocolSubscription`` in the JoinGroup response, and the
leader runs the chosen ``partition.assignment.strategy`` (kafka-protocols.md
B2, B3, B7, B8). This module holds what every such assignor shares:

* :class:`MemberSubscription`, one member's decoded subscription (v0-v3,
  K@3.9 ``ConsumerPartitionAssignor.Subscription``);
* :class:`ClientAssignor`, the interface (``ConsumerPartitionAssignor``:
  ``name()``, ``supportedProtocols()``, ``assign``);
* :func:`subscribed_partitions_per_topic`, the common preparation of
  ``AbstractPartitionAssignor.assign(Cluster, GroupSubscription)``.

Topic-partitions are ``(topic, partition)`` tuples.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from emulator.modern.assignors._java import static_first_key
from emulator.modern.messages import (
    NO_GENERATION,
    JoinGroupMember,
    Subscription,
    TopicPartition,
)

__all__ = [
    "ClientAssignment",
    "ClientAssignor",
    "MemberSubscription",
    "RebalanceProtocol",
    "in_member_order",
    "subscribed_partitions_per_topic",
    "subscribers_by_topic",
    "validate_members",
]

ClientAssignment = dict[str, tuple[TopicPartition, ...]]
"""Member id -> its assigned partitions (every member of the input is a key)."""


class RebalanceProtocol(StrEnum):
    """``ConsumerPartitionAssignor.RebalanceProtocol`` (KIP-429)."""

    EAGER = "EAGER"
    COOPERATIVE = "COOPERATIVE"


@dataclass(frozen=True)
class MemberSubscription:
    """One group member as the leader's assignor sees it.

    The fields are those of :class:`emulator.modern.messages.Subscription`
    plus the member's identity from the JoinGroup response.

    Attributes:
        member_id: the coordinator-assigned member id.
        group_instance_id: ``group.instance.id`` (static membership), or None.
        topics: subscribed topics.
        owned_partitions: v1+ owned partitions (KIP-429). For the EAGER
            ``sticky`` assignor pass what ``StickyAssignor`` keeps in its
            ``userData`` (the member's previous assignment), since an eager
            member revokes everything and reports no owned partitions.
        generation_id: v2+ generation of ``owned_partitions`` (KIP-792);
            ``NO_GENERATION`` (-1) when unknown, Kafka's ``DEFAULT_GENERATION``.
    """

    member_id: str
    group_instance_id: str | None = None
    topics: tuple[str, ...] = ()
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = NO_GENERATION

    @classmethod
    def of(
        cls,
        member_id: str,
        subscription: Subscription,
        group_instance_id: str | None = None,
    ) -> MemberSubscription:
        """Build from a decoded :class:`Subscription`.

        Args:
            member_id: the member id.
            subscription: what the member sent in JoinGroup.
            group_instance_id: its static instance id, if any.

        Returns:
            The assignor's view of the member.
        """
        return cls(
            member_id=member_id,
            group_instance_id=group_instance_id,
            topics=tuple(subscription.topics),
            owned_partitions=tuple(subscription.owned_partitions),
            generation_id=subscription.generation_id,
        )

    @classmethod
    def from_join_group_member(cls, member: JoinGroupMember) -> MemberSubscription:
        """Build from one entry of the leader's JoinGroup response.

        Args:
            member: the JoinGroup response member.

        Returns:
            The assignor's view of the member.
        """
        return cls.of(member.member_id, member.metadata, member.group_instance_id)


class ClientAssignor(Protocol):
    """``ConsumerPartitionAssignor`` as the emulated leader uses it."""

    @property
    def name(self) -> str:
        """The ``partition.assignment.strategy`` name, e.g. ``"cooperative-sticky"``."""
        ...

    @property
    def supported_protocols(self) -> tuple[str, ...]:
        """``supportedProtocols()``: ``"EAGER"`` and/or ``"COOPERATIVE"``, preferred last."""
        ...

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        members: Mapping[str, MemberSubscription],
    ) -> ClientAssignment:
        """Compute the whole group's assignment.

        Args:
            partitions_per_topic: topic -> partition count, from the leader's
                metadata (topics nobody subscribes to are ignored).
            members: member id -> subscription, in JoinGroup response order.

        Returns:
            Member id -> assigned partitions, for every member.
        """
        ...


def in_member_order(members: Mapping[str, MemberSubscription]) -> list[MemberSubscription]:
    """Members in ``AbstractPartitionAssignor.MemberInfo`` order: static members
    first by instance id, then dynamic ones by member id."""
    return sorted(
        members.values(), key=lambda m: static_first_key(m.member_id, m.group_instance_id)
    )


def validate_members(members: Mapping[str, MemberSubscription]) -> None:
    """Check that every key is its value's ``member_id``.

    Raises:
        ValueError: a key differs from the member id it maps to.
    """
    for key, member in members.items():
        if key != member.member_id:
            raise ValueError(f"members key {key!r} holds member {member.member_id!r}")


def subscribed_partitions_per_topic(
    partitions_per_topic: Mapping[str, int],
    members: Mapping[str, MemberSubscription],
) -> dict[str, int]:
    """The ``partitionsPerTopic`` that Kafka hands to an assignor.

    ``AbstractPartitionAssignor.assign(Cluster, GroupSubscription)`` (K@3.9)
    keeps only topics that some member subscribes to and that have metadata
    with at least one partition ("Skipping assignment for topic ... since no
    metadata is available").

    Args:
        partitions_per_topic: topic -> partition count known to the leader.
        members: the group's subscriptions.

    Returns:
        Subscribed topic -> partition count (> 0).

    Raises:
        ValueError: a partition count is negative or not an int.
    """
    # Deduplicate subscriptions first: a big homogeneous group has one.
    distinct = {id(m.topics): m.topics for m in members.values()}.values()
    subscribed = {topic for topics in distinct for topic in topics}
    result: dict[str, int] = {}
    for topic in subscribed:
        count = partitions_per_topic.get(topic)
        if count is None:
            continue
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"topic {topic!r} has partition count {count!r}")
        if count > 0:
            result[topic] = count
    return result


def subscribers_by_topic(
    ordered: Sequence[MemberSubscription], topics: Sequence[str]
) -> dict[str, list[str]]:
    """Each topic's subscribers (member ids), keeping the order of ``ordered``.

    Members with identical subscriptions are grouped first, and topics with
    the same subscribers share one list object, so a homogeneous group of M
    members and T topics costs O(M + T), not O(M * T). Do not mutate the lists.

    Args:
        ordered: the members, already in the wanted order.
        topics: the topics to report.

    Returns:
        Topic -> member ids subscribed to it, in ``ordered`` order.
    """
    groups: dict[frozenset[str], list[tuple[int, str]]] = {}
    as_set: dict[int, frozenset[str]] = {}  # by id(): the tuples live through the call
    for rank, member in enumerate(ordered):
        subscribed = as_set.get(id(member.topics))
        if subscribed is None:
            subscribed = as_set[id(member.topics)] = frozenset(member.topics)
        groups.setdefault(subscribed, []).append((rank, member.member_id))
    group_list = list(groups.items())
    merged: dict[tuple[int, ...], list[str]] = {}
    out: dict[str, list[str]] = {}
    for topic in topics:
        which = tuple(i for i, (subscribed, _) in enumerate(group_list) if topic in subscribed)
        subscribers = merged.get(which)
        if subscribers is None:
            # Topics with the same subscriber groups share one list (read-only).
            lists = [group_list[i][1] for i in which]
            subscribers = [member_id for _, member_id in heapq.merge(*lists)]
            merged[which] = subscribers
        out[topic] = subscribers
    return out
