"""Incremental cooperative rebalancing on the client (KIP-429): the assignor and the leader's check.

Sources (kafka-protocols.md B7):

* K@3.9 ``clients/src/main/java/org/apache/kafka/clients/consumer/CooperativeStickyAssignor.java``:
  runs the sticky algorithm (:mod:`.sticky`), then removes from each member
  every partition it would take over from another member that still owns it
  (``adjustAssignment``). Those "partitions transferring ownership" come from
  the constrained algorithm's bookkeeping, or, after the general algorithm, are
  recomputed as the partitions added to one member and revoked from another
  (``computePartitionsTransferringOwnership``). The current owner is told to
  revoke them; the member that should get them receives them only in the
  rebalance that follows (the owner rejoins after revoking).
* K@3.9 ``ConsumerCoordinator.validateCooperativeAssignment``
  (``clients/src/main/java/org/apache/kafka/clients/consumer/internals/``):
  with the COOPERATIVE protocol the leader fails the assignment with
  ``IllegalStateException("Assignor supporting the COOPERATIVE protocol
  violates its requirements")`` if any partition is both revoked from some
  member and added to some member in the same assignment.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from emulator.modern.assignors._java import java_key
from emulator.modern.assignors.client import (
    ClientAssignment,
    MemberSubscription,
    subscribed_partitions_per_topic,
    validate_members,
)
from emulator.modern.assignors.sticky import sticky_assign
from emulator.modern.messages import TopicPartition

__all__ = [
    "CooperativeAssignmentError",
    "CooperativeStickyAssignor",
    "partitions_transferring_ownership",
    "validate_cooperative_assignment",
]


class CooperativeAssignmentError(RuntimeError):
    """The leader's ``IllegalStateException`` from ``validateCooperativeAssignment``.

    Attributes:
        partitions: the partitions both revoked and (re)assigned, sorted by
            (topic, partition).
    """

    MESSAGE = "Assignor supporting the COOPERATIVE protocol violates its requirements"

    def __init__(self, partitions: Iterable[TopicPartition]):
        self.partitions: tuple[TopicPartition, ...] = tuple(
            sorted(partitions, key=lambda tp: (java_key(tp[0]), tp[1]))
        )
        super().__init__(f"{self.MESSAGE}: {list(self.partitions)}")


def _added_and_revoked(
    owned: Mapping[str, Iterable[TopicPartition]],
    assigned: Mapping[str, Iterable[TopicPartition]],
) -> tuple[dict[TopicPartition, str], set[TopicPartition]]:
    added: dict[TopicPartition, str] = {}
    revoked: set[TopicPartition] = set()
    for member, partitions in assigned.items():
        now = set(partitions)
        before = set(owned.get(member, ()))
        for tp in now - before:
            added[tp] = member
        revoked.update(before - now)
    return added, revoked


def partitions_transferring_ownership(
    owned: Mapping[str, Iterable[TopicPartition]],
    assigned: Mapping[str, Iterable[TopicPartition]],
) -> dict[TopicPartition, str]:
    """``computePartitionsTransferringOwnership``: partitions moving between members.

    Args:
        owned: member id -> partitions it reported as owned.
        assigned: member id -> partitions the assignor gives it.

    Returns:
        Partition -> member it is being added to, for every partition that
        is also revoked from some member.
    """
    added, revoked = _added_and_revoked(owned, assigned)
    return {tp: member for tp, member in added.items() if tp in revoked}


def validate_cooperative_assignment(
    owned: Mapping[str, Iterable[TopicPartition]],
    assigned: Mapping[str, Iterable[TopicPartition]],
) -> None:
    """``ConsumerCoordinator.validateCooperativeAssignment`` (K@3.9).

    For each member in ``assigned``: added = assigned − owned, revoked =
    owned − assigned. A partition in both the union of added and the union of
    revoked would be handed to a new owner while its old owner still has it.
    A member missing from ``owned`` owns nothing (Java would fail on it).

    Args:
        owned: member id -> partitions owned (the subscriptions' ``ownedPartitions``).
        assigned: member id -> partitions assigned this round.

    Raises:
        CooperativeAssignmentError: some partition is revoked from one member
            and assigned to another in the same assignment.
    """
    added, revoked = _added_and_revoked(owned, assigned)
    both = [tp for tp in added if tp in revoked]
    if both:
        raise CooperativeAssignmentError(both)


class CooperativeStickyAssignor:
    """``org.apache.kafka.clients.consumer.CooperativeStickyAssignor`` (``"cooperative-sticky"``).

    Supports ``[COOPERATIVE, EAGER]`` (COOPERATIVE preferred). Its
    ``memberData`` takes the owned partitions and generation from the
    subscription (v2+ ``GenerationId``; older clients encode the generation in
    ``userData``), which :class:`MemberSubscription` carries directly.
    """

    name: str = "cooperative-sticky"
    supported_protocols: tuple[str, ...] = ("COOPERATIVE", "EAGER")

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        members: Mapping[str, MemberSubscription],
    ) -> ClientAssignment:
        """Sticky assignment minus the partitions that must first be revoked.

        Args:
            partitions_per_topic: topic -> partition count.
            members: member id -> subscription, in JoinGroup response order.

        Returns:
            Member id -> partitions, for every member (possibly empty). No
            partition is given to a member while another member still owns it.

        Raises:
            ValueError: a members key is not its member's id, or a partition
                count is invalid.
            IllegalAssignorStateError: an internal check failed (a bug).
        """
        validate_members(members)
        counts = subscribed_partitions_per_topic(partitions_per_topic, members)
        outcome = sticky_assign(counts, members)
        assignment = outcome.assignment
        transferring = outcome.partitions_transferring_ownership
        if transferring is None:
            transferring = partitions_transferring_ownership(
                {m: s.owned_partitions for m, s in members.items()}, assignment
            )
        for tp, member in transferring.items():
            partitions = assignment[member]
            if tp in partitions:  # Java List.remove(Object): no-op when absent
                partitions.remove(tp)
        return {m: tuple(tps) for m, tps in assignment.items()}
