"""Online migration between a classic group and a consumer group (KIP-848, Kafka 3.8+).

A broker's coordinator of one group id (:class:`MigratingGroupCoordinator`)
holds either a classic group
(:class:`~emulator.modern.classic_coordinator.ClassicGroupCoordinator`) or a
consumer group that also serves classic members
(:class:`~emulator.modern.mixed_group.MixedGroupCoordinator`) and turns one into
the other as Kafka's ``GroupMetadataManager`` does (GMM@3.9 in apache/kafka
``group-coordinator/``; 3.8 has the same rules; /work/notes/migration-facts.md
has every rule with its lines):

* **Upgrade** (``getOrMaybeCreateConsumerGroup``, GMM@3.9 717-800): a
  ConsumerGroupHeartbeat with epoch 0 for a classic group. An empty classic
  group is replaced by a new consumer group under any policy (offline
  migration). A non-empty one is converted if ``validateOnlineUpgrade``
  (1099-1121) passes: the policy allows upgrades, the protocol type is
  ``consumer``, and the members fit in ``group.consumer.max.size``; there is no
  check of the group's state. Otherwise GROUP_ID_NOT_FOUND (which the Java
  client treats as fatal). ``convertToConsumerGroup`` (1123-1176) answers the
  parked JoinGroups and SyncGroups REBALANCE_IN_PROGRESS and builds the
  consumer group with ``ConsumerGroup.fromClassicGroup`` (CG@3.9 711-766):
  group epoch = target epoch = member epochs = the classic generation, every
  member Stable with its synced assignment as its current and target
  assignment, its subscription from its JoinGroup metadata of the group's
  protocol, its own session timeout kept (``ClassicMemberMetadata``). The
  heartbeat that caused it then joins as any new member does, which bumps
  the group epoch, so every classic member is asked to rejoin.
* **Classic members in a consumer group**: :mod:`emulator.modern.mixed_group`.
  A JoinGroup for an empty consumer group replaces it with a new classic
  group under any policy (``maybeDeleteEmptyConsumerGroup``).
* **Downgrade** (``consumerGroupFenceMember`` -> ``validateOnlineDowngrade``,
  GMM@3.9 1021-1046, ``convertToClassicGroup`` 1048-1097): when the last
  ``consumer``-protocol member leaves or is fenced (session, rebalance, join or
  sync timeout) and the other members, at least one, are classic, the policy
  allows downgrades and they fit in ``group.max.size``, the group becomes a
  classic group without that member (``ClassicGroup.fromConsumerGroup``:
  Stable, generation = the group epoch, each member's target assignment as its
  assignment) and a rebalance starts at once.
* **Before 3.8** a group of the other type gets GROUP_ID_NOT_FOUND (K@3.7.0
  GMM 585 and 624: "We don't support upgrading/downgrading between protocols").

Versions: ``group.consumer.migration.policy`` exists from 3.8 and defaults to
``disabled`` in 3.8 and 3.9 and ``bidirectional`` from 4.0 (e1deeb4b914);
from 4.0 a member that never synced no longer fails an upgrade (KAFKA-17733:
before, its empty assignment bytes threw, and the upgrade answered
GROUP_ID_NOT_FOUND).

Emulator choices (not Kafka):

* a conversion writes one ``group_converted`` event where Kafka writes the
  tombstones and records of both groups;
* an upgrade during a classic group's first rebalance (no protocol chosen
  yet) is refused with UNKNOWN_SERVER_ERROR, what Kafka's code would raise
  there (``protocolName().get()`` on an empty Optional; no upstream test);
* KAFKA-17317 (4.0: the last ``consumer`` static member replaced by a classic
  one downgrades the group without a rebalance) is not modelled: the group
  stays a consumer group of classic members, as in 3.8-3.9. (KAFKA-17228, its
  other half, is: from 4.0 a static member that switches to ``consumer``
  replaces its classic self at once,
  :data:`~emulator.modern.consumer_coordinator.STATIC_PROTOCOL_SWITCH_SINCE`.)
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from typing import Final

from emulator.events import EventKind
from emulator.kafka_keys import kafka_version_at_least
from emulator.modern.classic_coordinator import (
    ClassicGroupCoordinator,
    GroupState,
    MemberMetadata,
)
from emulator.modern.config import MIGRATION_SINCE
from emulator.modern.consumer_coordinator import ClassicMemberMetadata, GroupMember, MemberState
from emulator.modern.coordinator import CoordinatorOutput, GroupCoordinator
from emulator.modern.errors import Errors
from emulator.modern.messages import (
    Assignment,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    Emit,
    GroupRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    TopicPartition,
)
from emulator.modern.mixed_group import CONSUMER_PROTOCOL_TYPE, MixedGroupCoordinator

EMPTY_ASSIGNMENT_UPGRADE_SINCE: Final = (4, 0)
"""KAFKA-17733: a member that never synced no longer fails an upgrade."""


class MigrationPolicy(enum.StrEnum):
    """``ConsumerGroupMigrationPolicy`` (``group.consumer.migration.policy``)."""

    DISABLED = "disabled"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    BIDIRECTIONAL = "bidirectional"

    @property
    def upgrade_enabled(self) -> bool:
        """``isUpgradeEnabled``."""
        return self in (MigrationPolicy.UPGRADE, MigrationPolicy.BIDIRECTIONAL)

    @property
    def downgrade_enabled(self) -> bool:
        """``isDowngradeEnabled``."""
        return self in (MigrationPolicy.DOWNGRADE, MigrationPolicy.BIDIRECTIONAL)


Group = ClassicGroupCoordinator | MixedGroupCoordinator


class MigratingGroupCoordinator(GroupCoordinator):
    """The coordinator of one group id that may change between classic and consumer.

    Args:
        group_id: the group.
        new_classic: makes an empty classic group from committed offsets.
        new_consumer: makes an empty consumer group from committed offsets.
        initial: the kind the group starts as (``classic`` or ``consumer``; the
            other kind's first request replaces it while it has never been used).
        policy: ``group.consumer.migration.policy``.
        kafka_version: the broker's release (migration from 3.8).
        classic_max_size: ``group.max.size`` (the downgrade's bound).
        consumer_max_size: ``group.consumer.max.size`` (the upgrade's bound).
        committed: committed offsets the group starts with.
    """

    def __init__(
        self,
        group_id: str,
        *,
        new_classic: Callable[[Mapping[TopicPartition, int] | None], ClassicGroupCoordinator],
        new_consumer: Callable[[Mapping[TopicPartition, int] | None], MixedGroupCoordinator],
        initial: str,
        policy: MigrationPolicy,
        kafka_version: str,
        classic_max_size: int,
        consumer_max_size: int,
        committed: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        if initial not in ("classic", "consumer"):
            raise ValueError(f"a group starts classic or consumer, not {initial!r}")
        self.group_id = group_id
        self._new_classic = new_classic
        self._new_consumer = new_consumer
        self.policy = policy
        self.kafka_version = kafka_version
        self.migration = kafka_version_at_least(kafka_version, MIGRATION_SINCE)
        self.classic_max_size = classic_max_size
        self.consumer_max_size = consumer_max_size
        self.group: Group = (
            new_classic(committed) if initial == "classic" else self._consumer(committed)
        )

    # ------------------------------------------------------------- the protocol

    def handle(
        self, now_ms: float, request: GroupRequest, *, client_id: str = "consumer"
    ) -> list[CoordinatorOutput]:
        out: list[CoordinatorOutput] = []
        group = self.group
        if isinstance(request, ConsumerGroupHeartbeatRequest) and isinstance(
            group, ClassicGroupCoordinator
        ):
            refused = self._maybe_upgrade(now_ms, group, request, out)
            if refused is not None:
                return [ConsumerGroupHeartbeatResponse(request.corr, refused), *out]
        elif isinstance(request, JoinGroupRequest) and isinstance(group, MixedGroupCoordinator):
            if not _exists(group) or (self.migration and not group.members):
                self._replace("classic", request, out)
            elif not self.migration:  # K@3.7.0 GMM 624: "not a classic group"
                return [JoinGroupResponse(request.corr, Errors.GROUP_ID_NOT_FOUND)]
        out = self.group.handle(now_ms, request, client_id=client_id) + out
        self._maybe_downgrade(now_ms, out)
        return out

    def poll(self, now_ms: float) -> list[CoordinatorOutput]:
        out = self.group.poll(now_ms)
        self._maybe_downgrade(now_ms, out)
        return out

    def next_deadline(self) -> float | None:
        return self.group.next_deadline()

    def committed_offsets(self) -> dict[TopicPartition, int]:
        return self.group.committed_offsets()

    def delete_offsets(self, now_ms: float, partitions: Iterable[TopicPartition]) -> None:
        self.group.delete_offsets(now_ms, partitions)

    def unload(self, now_ms: float) -> list[CoordinatorOutput]:
        return self.group.unload(now_ms)

    def update_topics(self, now_ms: float, topics: Mapping[str, int]) -> None:
        self.group.update_topics(now_ms, topics)

    # --------------------------------------------------------------- upgrades

    def _maybe_upgrade(
        self,
        now_ms: float,
        classic: ClassicGroupCoordinator,
        request: ConsumerGroupHeartbeatRequest,
        out: list[CoordinatorOutput],
    ) -> Errors | None:
        """``getOrMaybeCreateConsumerGroup``: None when the heartbeat goes to a consumer
        group now, else the error that refuses it."""
        joining = request.member_epoch == 0
        empty = classic.state is GroupState.EMPTY
        if not _exists(classic) or (self.migration and joining and empty):
            self._replace("consumer", request, out)
            return None
        if not (self.migration and joining) or not self.validate_online_upgrade(classic):
            return Errors.GROUP_ID_NOT_FOUND  # K@3.9 GMM 790: "not a consumer group"
        return self._convert_to_consumer(now_ms, classic, request, out)

    def validate_online_upgrade(self, classic: ClassicGroupCoordinator) -> bool:
        """``validateOnlineUpgrade`` (GMM@3.9 1099-1121): policy, protocol type, size."""
        return (
            self.policy.upgrade_enabled
            and classic.protocol_type == CONSUMER_PROTOCOL_TYPE
            and len(classic.members) <= self.consumer_max_size
        )

    def _convert_to_consumer(
        self,
        now_ms: float,
        classic: ClassicGroupCoordinator,
        request: ConsumerGroupHeartbeatRequest,
        out: list[CoordinatorOutput],
    ) -> Errors | None:
        """``convertToConsumerGroup`` with ``ConsumerGroup.fromClassicGroup``."""
        protocol = classic.protocol_name
        if protocol is None:
            return Errors.UNKNOWN_SERVER_ERROR  # emulator choice: see the module doc
        if not kafka_version_at_least(self.kafka_version, EMPTY_ASSIGNMENT_UPGRADE_SINCE) and any(
            m.assignment is None for m in classic.members.values()
        ):
            return Errors.GROUP_ID_NOT_FOUND  # "the embedded consumer protocol is malformed"
        out.extend(classic.abort_for_conversion(now_ms))
        consumer = self._consumer(classic.committed_offsets())
        generation = classic.generation_id
        consumer.begin_conversion(now_ms, generation)
        topics = consumer.topics_image
        for m in classic.members.values():
            sub = m.metadata(protocol)
            assigned = frozenset(
                tp for tp in (m.assignment or Assignment()).partitions if tp[0] in topics
            )
            consumer.adopt_member(
                GroupMember(
                    m.member_id,
                    instance_id=m.group_instance_id,
                    rack_id=sub.rack_id,
                    member_epoch=generation,
                    previous_member_epoch=generation,
                    state=MemberState.STABLE,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    subscribed_topic_names=frozenset(sub.topics),
                    assigned=assigned,
                    classic=ClassicMemberMetadata(m.session_timeout_ms, tuple(m.protocols)),
                )
            )
        self.group = consumer
        out.append(
            self._converted(
                "upgrade",
                "consumer_member_joined",
                "online",
                generation,
                len(classic.members),
                request.member_id or None,
            )
        )
        return None

    # ------------------------------------------------------------- downgrades

    def _maybe_downgrade(self, now_ms: float, out: list[CoordinatorOutput]) -> None:
        group = self.group
        if not isinstance(group, MixedGroupCoordinator) or group.downgrade is None:
            return
        fenced, reason = group.downgrade
        group.downgrade = None
        classic = self._new_classic(group.committed_offsets())
        members = []
        for m in group.members.values():
            if m.member_id == fenced.member_id:
                continue
            assert m.classic is not None
            members.append(
                MemberMetadata(
                    member_id=m.member_id,
                    group_instance_id=m.instance_id,
                    client_id="consumer",
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.classic.session_timeout_ms,
                    protocol_type=CONSUMER_PROTOCOL_TYPE,
                    protocols=m.classic.protocols,
                    assignment=Assignment(
                        tuple(sorted(group.target_assignment.get(m.member_id, frozenset())))
                    ),
                )
            )
        out.append(group.removal_event(fenced, reason))
        out.append(
            self._converted(
                "downgrade",
                reason,
                "online",
                group.group_epoch,
                len(members),
                fenced.member_id,
            )
        )
        out.extend(
            classic.adopt_converted(
                now_ms,
                group.group_epoch,
                members,
                rebalance=True,
                reason=f"Downgrade group {self.group_id} from consumer to classic.",
            )
        )
        self.group = classic

    # ----------------------------------------------------------------- helpers

    def _consumer(self, committed: Mapping[TopicPartition, int] | None) -> MixedGroupCoordinator:
        consumer = self._new_consumer(committed)
        consumer.downgrade_enabled = self.migration and self.policy.downgrade_enabled
        consumer.classic_max_size = self.classic_max_size
        return consumer

    def _replace(self, kind: str, request: GroupRequest, out: list[CoordinatorOutput]) -> None:
        """An empty group of the other kind is deleted and a new one made (offline migration)."""
        old = self.group
        used = _exists(old)
        committed = old.committed_offsets()
        new: Group = (
            self._new_classic(committed) if kind == "classic" else self._consumer(committed)
        )
        self.group = new
        if used:
            member = getattr(request, "member_id", None) or None
            direction = "upgrade" if kind == "consumer" else "downgrade"
            out.append(self._converted(direction, "empty_group", "offline", 0, 0, member))

    def _converted(
        self,
        direction: str,
        reason: str,
        how: str,
        generation: int,
        count: int,
        member_id: str | None,
    ) -> Emit:
        fields: dict[str, object] = {
            "group": self.group_id,
            "direction": direction,
            "reason": reason,
            "state": how,
            "generation": generation,
            "count": count,
        }
        if member_id:
            fields["member_id"] = member_id
        return Emit(EventKind.GROUP_CONVERTED, fields)


def _exists(group: Group) -> bool:
    """Whether Kafka's groups map holds the group: a request made it (a classic group
    that was joined; a consumer group with members or a group epoch)."""
    if isinstance(group, ClassicGroupCoordinator):
        return group.exists
    return bool(group.members) or group.group_epoch > 0
