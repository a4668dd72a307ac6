"""What a broker needs of the group coordinator of one group (either modern protocol).

A broker hosts one coordinator per group whose ``__consumer_offsets``
partition it leads (:class:`emulator.broker.coordinators.CoordinatorHost`):
the classic ``GroupCoordinator``
(:class:`~emulator.modern.classic_coordinator.ClassicGroupCoordinator`) or the
KIP-848 ``GroupMetadataManager`` of a consumer group
(:class:`~emulator.modern.consumer_coordinator.ConsumerGroupCoordinator`).
Both are sans-I/O state machines of the same shape (``handle(now_ms,
request)``, ``poll(now_ms)``, ``next_deadline()``) and both subclass
:class:`GroupCoordinator`, so the capabilities only one of them has come with
a no-op default here instead of being probed for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from emulator.modern.messages import Emit, GroupRequest, GroupResponse, TopicPartition

#: What a coordinator returns: responses (to route to the members' hosts) and events.
CoordinatorOutput = GroupResponse | Emit


class GroupCoordinator(Protocol):
    """The coordinator of one group, as a broker drives it.

    The first five methods are required; :meth:`unload` and
    :meth:`update_topics` are capabilities of one protocol each, with no-op
    defaults for the other.
    """

    def handle(
        self, now_ms: float, request: GroupRequest, *, client_id: str = "consumer"
    ) -> list[CoordinatorOutput]:
        """Handle one request of this group.

        Args:
            now_ms: the emulated time.
            request: the request.
            client_id: the request header's ``client.id`` (a classic
                coordinator prefixes new member ids with it; a KIP-848 member
                chooses its own id).

        Returns:
            Responses and events, in order.
        """
        ...

    def poll(self, now_ms: float) -> list[CoordinatorOutput]:
        """Fire the timers due at ``now_ms``."""
        ...

    def next_deadline(self) -> float | None:
        """When :meth:`poll` next has work (emulated ms), if ever."""
        ...

    def committed_offsets(self) -> dict[TopicPartition, int]:
        """The group's committed offsets (what its ``__consumer_offsets`` partition holds)."""
        ...

    def delete_offsets(self, now_ms: float, partitions: Iterable[TopicPartition]) -> None:
        """The partitions were deleted: their committed offsets go (tombstones).

        ``onPartitionsDeleted`` (K@3.9 ``GroupCoordinator.handleDeletedPartitions``
        1153-1157 -> ``GroupMetadataManager.cleanupGroupMetadata`` 863-930;
        CK@4.1 ``OffsetMetadataManager.onPartitionsDeleted`` 1063-1099).
        """
        ...

    def unload(self, now_ms: float) -> list[CoordinatorOutput]:
        """The broker stopped leading the group's offsets partition: let go of the group.

        The classic coordinator answers its parked JoinGroups and SyncGroups
        with NOT_COORDINATOR. Default: nothing to let go of.
        """
        del now_ms
        return []

    def update_topics(self, now_ms: float, topics: Mapping[str, int]) -> None:
        """A new metadata image (topic -> partition count): a topic created, grown or deleted.

        The KIP-848 coordinator recomputes its subscription metadata on the next
        heartbeat (a subscribed topic that changed bumps the group epoch) and a
        created topic arms its regex resolution. Default: ignored (a classic
        coordinator does not use partition counts; its group leader notices on
        a metadata refresh).
        """
        del now_ms, topics
