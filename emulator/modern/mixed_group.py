"""Classic members in a consumer group: the coordinator side of online migration.

A consumer group converted from a classic group (online upgrade,
:mod:`emulator.modern.migration`), or one that a classic member joins while it
has members, serves JoinGroup, SyncGroup, Heartbeat and LeaveGroup of its
classic members from the consumer group's own state: the member is a
:class:`~emulator.modern.consumer_coordinator.GroupMember` with
:class:`~emulator.modern.consumer_coordinator.ClassicMemberMetadata`, its
partitions come from the server assignor's target assignment, and it is
reconciled like a ``consumer`` member, with the partitions its JoinGroup
reports as owned in place of the heartbeat's. Read in apache/kafka
``group-coordinator/.../GroupMetadataManager.java`` at 3.9 (GMM@3.9; 3.8 has the
same logic): ``classicGroupJoinToConsumerGroup`` (1833-1990),
``classicGroupSyncToConsumerGroup`` (5197-5260), ``classicGroupHeartbeatToConsumerGroup``
(5449-5490), ``classicGroupLeaveToConsumerGroup`` (5547-5620) and
``ConsumerGroup.supportsClassicProtocols`` / ``waitingOnUnreleasedPartition``
(CG@3.9 802-833). /work/notes/migration-facts.md §3 has every rule with its lines.

What a classic member sees:

* **JoinGroup** is answered at once, never parked: generation = its member
  epoch after reconciliation (which may trail the group epoch), protocol =
  its own first assignor (no group vote), no leader and no member list, so
  every classic member is a follower and no client-side assignor runs. The
  coordinator then expects a SyncGroup within the rebalance timeout (else the
  member is fenced, ``sync_timeout``).
* **SyncGroup** returns the member's current assignment (without partitions
  pending revocation or not yet released); REBALANCE_IN_PROGRESS while the
  group epoch is ahead of the member's and it has nothing to revoke.
* **Heartbeat** says REBALANCE_IN_PROGRESS while the member's epoch trails the
  group epoch, while it has partitions to revoke, or once the partitions it
  waits for are free; each such answer arms a join timeout of the rebalance
  timeout (``join_timeout`` fences a member that does not rejoin).
* Its session runs on its own ``session.timeout.ms``; it has no rebalance
  timer (revocation is driven by its rejoins: an eager member rejoins owning
  nothing, a cooperative one first drops the revoked partitions after its
  SyncGroup, then rejoins without them).
* **LeaveGroup** removes it for good (a static member too: there is no epoch
  -2 for a classic member) and bumps the group epoch once per request; it
  never downgrades the group.

Emulator choices (not Kafka):

* member ids of classic members are drawn as Kafka's ``Uuid.randomUuid()``
  strings from the coordinator's seeded generator (Kafka: random);
* KAFKA-20640 (2026-06, in 4.0-4.3 patch releases: a classic member may not
  join a consumer group under the ``disabled`` policy) is not modelled: the
  emulated ``x.y`` releases are their ``.0`` releases, which admit it;
* KAFKA-20272 (trunk 2026-03: a classic member is told to rejoin only once a
  newer target assignment exists) is not modelled: the heartbeat compares
  the member epoch with the group epoch, as 3.8-4.3.0 do.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Self

from emulator.events import EventKind
from emulator.modern.config import GroupCoordinatorConfig
from emulator.modern.consumer_coordinator import (
    ClassicMemberMetadata,
    ConsumerGroupCoordinator,
    GroupMember,
    MemberState,
    Output,
    ProtocolError,
    make_consumer_coordinator,
)
from emulator.modern.errors import Errors
from emulator.modern.messages import (
    UNKNOWN_MEMBER_ID,
    Assignment,
    GroupRequest,
    GroupResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)

CONSUMER_PROTOCOL_TYPE = "consumer"
"""``ConsumerProtocol.PROTOCOL_TYPE``: the only protocol type a consumer group serves."""

CLASSIC = "classic"
"""The ``member_protocol`` of a classic member's events."""


class MixedGroupCoordinator(ConsumerGroupCoordinator):
    """A KIP-848 consumer group that also serves classic members (Kafka 3.8+).

    Attributes:
        min_session_timeout_ms: ``group.min.session.timeout.ms``, the lower
            bound of a JoinGroup's session timeout (set by the factory).
        max_session_timeout_ms: ``group.max.session.timeout.ms``.
    """

    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000

    @classmethod
    def from_config(cls, group_id: str, config: GroupCoordinatorConfig, **kwargs: Any) -> Self:
        """:meth:`ConsumerGroupCoordinator.from_config`, with the JoinGroup session bounds."""
        coord = super().from_config(group_id, config, **kwargs)
        coord.min_session_timeout_ms = config.group_min_session_timeout_ms
        coord.max_session_timeout_ms = config.group_max_session_timeout_ms
        return coord

    @property
    def topics_image(self) -> Mapping[str, int]:
        """The metadata image's topics (partition counts)."""
        return self._topics

    def begin_conversion(self, now_ms: float, generation: int) -> None:
        """Start as the consumer group of a classic group at ``generation``
        (``ConsumerGroup.fromClassicGroup``: group epoch = target assignment epoch =
        the generation; the subscription metadata is computed by the next request)."""
        self._now = now_ms
        self.group_epoch = generation
        self.assignment_epoch = generation
        self._metadata_expired = True

    def adopt_member(self, member: GroupMember) -> None:
        """A converted classic member: its assignment is its target too, and its session
        timer runs on its own timeout (``scheduleConsumerGroupSessionTimeout``)."""
        self.target_assignment[member.member_id] = member.assigned
        self._put_member(member)
        self._classic_session(member)

    def _serve(self, request: GroupRequest, out: list[Output]) -> GroupResponse:
        if isinstance(request, JoinGroupRequest):
            return self._classic_join(request, out)
        if isinstance(request, SyncGroupRequest):
            return self._classic_sync(request)
        if isinstance(request, HeartbeatRequest):
            return self._classic_heartbeat(request)
        if isinstance(request, LeaveGroupRequest):
            return self._classic_leave(request, out)
        return super()._serve(request, out)

    @classmethod
    def _cause(cls, request: GroupRequest) -> str:
        if isinstance(request, JoinGroupRequest):
            return "join"
        if isinstance(request, LeaveGroupRequest):
            return "leave"
        if isinstance(request, SyncGroupRequest | HeartbeatRequest):
            return "heartbeat"
        return super()._cause(request)

    @staticmethod
    def _error_response(request: GroupRequest, error: Errors, message: str) -> GroupResponse:
        if isinstance(request, JoinGroupRequest):
            return JoinGroupResponse(request.corr, error, member_id=request.member_id)
        if isinstance(request, SyncGroupRequest):
            return SyncGroupResponse(request.corr, error)
        if isinstance(request, HeartbeatRequest):
            return HeartbeatResponse(request.corr, error)
        if isinstance(request, LeaveGroupRequest):
            return LeaveGroupResponse(request.corr, error)
        return ConsumerGroupCoordinator._error_response(request, error, message)

    # ---------------------------------------------------------------- JoinGroup

    def _classic_join(self, req: JoinGroupRequest, out: list[Output]) -> JoinGroupResponse:
        """``classicGroupJoinToConsumerGroup`` (GMM@3.9 1833-1990)."""
        if (
            not self.min_session_timeout_ms
            <= req.session_timeout_ms
            <= (self.max_session_timeout_ms)
        ):
            # GroupCoordinatorService.joinGroup checks it for every group type.
            raise ProtocolError(Errors.INVALID_SESSION_TIMEOUT, "session timeout out of bounds")
        unknown = req.member_id == UNKNOWN_MEMBER_ID
        member_id = self._new_member_id() if unknown else req.member_id
        if len(self.members) >= self.max_size and member_id not in self.members:
            raise ProtocolError(
                Errors.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {self.max_size} members.",
            )
        self._throw_if_classic_protocol_not_supported(req)
        if unknown and req.group_instance_id is None:
            # JoinGroupRequest.requiresKnownMemberId (v4+): the id is not tracked as pending.
            return JoinGroupResponse(req.corr, Errors.MEMBER_ID_REQUIRED, member_id=member_id)
        member, joined = self._classic_member(member_id, unknown, req.group_instance_id, out)
        name, subscription = req.protocols[0]
        classic = ClassicMemberMetadata(req.session_timeout_ms, tuple(req.protocols))
        updated = replace(
            member,
            instance_id=req.group_instance_id,
            rack_id=subscription.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            subscribed_topic_names=frozenset(subscription.topics),
            # A classic member has no regex (KAFKA-19720 clears one it inherits).
            subscribed_topic_regex=None,
            server_assignor=None,
            classic=classic,
        )
        if joined is not None:
            out.append(
                self._emit(
                    EventKind.MEMBER_JOINED,
                    member_id=member_id,
                    reason=joined,
                    member_protocol=CLASSIC,
                )
            )
        # maybeReconcile with the subscription's ownedPartitions as the owned set.
        owned = frozenset(subscription.owned_partitions)
        updated = self._subscribe_and_reconcile(member, updated, owned, out)
        # On the records' commit: join timer off, session and sync timers on.
        self._cancel("join", member_id)
        self._schedule("session", member_id, req.session_timeout_ms)
        self._schedule("sync", member_id, req.rebalance_timeout_ms)
        return JoinGroupResponse(
            req.corr,
            generation_id=updated.member_epoch,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=name,
            leader="",
            member_id=member_id,
        )

    def _throw_if_classic_protocol_not_supported(self, req: JoinGroupRequest) -> None:
        """``throwIfClassicProtocolIsNotSupported`` (``supportsClassicProtocols``, CG@3.9 802)."""
        names = {name for name, _ in req.protocols}
        ok = req.protocol_type == CONSUMER_PROTOCOL_TYPE and bool(names)
        if ok and self.members:
            classic = [m.classic for m in self.members.values() if m.classic is not None]
            ok = any(all(n in c.protocol_names for c in classic) for n in names)
        if not ok:
            raise ProtocolError(
                Errors.INCONSISTENT_GROUP_PROTOCOL,
                f"Member {req.member_id or '<new>'} uses a protocol type or assignors the "
                "group's classic members do not share.",
            )

    def _classic_member(
        self, member_id: str, unknown: bool, instance_id: str | None, out: list[Output]
    ) -> tuple[GroupMember, str | None]:
        """``getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember`` for a classic join.

        Returns:
            The member, and why it joins (``new``, ``rejoin``) or None (a static
            replacement records its own events).
        """
        if instance_id is None:
            member = self.members.get(member_id)
            if member is None:  # a known id that is not in the group is created
                return GroupMember(member_id), "new"
            return member, "rejoin"
        existing = self.member_by_instance(instance_id)
        if unknown:
            if existing is None:
                return GroupMember(member_id, instance_id=instance_id), "new"
            # The instance id's holder is replaced at once, whatever its protocol (the
            # join then gives the new member its classic metadata).
            new = self._replace_static(
                existing, member_id, existing.classic, out, member_protocol=CLASSIC
            )
            return new, None
        return self._static_holder(member_id, instance_id), "rejoin"

    # ------------------------------------------------------- Sync and Heartbeat

    def _classic_member_of(self, member_id: str, instance_id: str | None) -> GroupMember:
        """``validateConsumerGroupMember`` then ``throwIfMemberDoesNotUseClassicProtocol``."""
        if instance_id is None:
            member = self._known_member(member_id)
        else:
            member = self._static_holder(member_id, instance_id)
        if not member.uses_classic_protocol:
            raise ProtocolError(
                Errors.UNKNOWN_MEMBER_ID,
                f"Member {member_id} does not use the classic protocol.",
            )
        return member

    @staticmethod
    def _throw_if_generation_unmatched(member: GroupMember, generation: int) -> None:
        if generation != member.member_epoch:
            raise ProtocolError(
                Errors.ILLEGAL_GENERATION,
                f"The request generation id {generation} is not equal to the member epoch "
                f"{member.member_epoch} of member {member.member_id}.",
            )

    def _rebalance_in_progress(self, member: GroupMember) -> ProtocolError:
        """REBALANCE_IN_PROGRESS, with the join timeout armed if it is not yet
        (``scheduleConsumerGroupJoinTimeoutIfAbsent``)."""
        if ("join", member.member_id) not in self._timer_by_key:
            self._schedule("join", member.member_id, member.rebalance_timeout_ms)
        return ProtocolError(
            Errors.REBALANCE_IN_PROGRESS,
            f"A new rebalance is triggered in group {self.group_id} and member "
            f"{member.member_id} should rejoin to catch up.",
        )

    def _classic_session(self, member: GroupMember) -> None:
        assert member.classic is not None
        self._schedule("session", member.member_id, member.classic.session_timeout_ms)

    def _classic_sync(self, req: SyncGroupRequest) -> SyncGroupResponse:
        """``classicGroupSyncToConsumerGroup`` (GMM@3.9 5197-5260)."""
        member = self._classic_member_of(req.member_id, req.group_instance_id)
        self._throw_if_generation_unmatched(member, req.generation_id)
        assert member.classic is not None
        name = member.classic.protocol_names[0]
        if (req.protocol_type is not None and req.protocol_type != CONSUMER_PROTOCOL_TYPE) or (
            req.protocol_name is not None and req.protocol_name != name
        ):
            raise ProtocolError(
                Errors.INCONSISTENT_GROUP_PROTOCOL, "protocol type or name does not match"
            )
        if (
            self.group_epoch > member.member_epoch
            and member.state is not MemberState.UNREVOKED_PARTITIONS
        ):
            raise self._rebalance_in_progress(member)
        self._cancel("sync", member.member_id)
        self._classic_session(member)
        return SyncGroupResponse(
            req.corr,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=name,
            assignment=Assignment(tuple(sorted(member.assigned))),
        )

    def _classic_heartbeat(self, req: HeartbeatRequest) -> HeartbeatResponse:
        """``classicGroupHeartbeatToConsumerGroup`` (GMM@3.9 5449-5490)."""
        member = self._classic_member_of(req.member_id, req.group_instance_id)
        self._throw_if_generation_unmatched(member, req.generation_id)
        self._classic_session(member)
        if (
            member.member_epoch < self.group_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (
                member.state is MemberState.UNRELEASED_PARTITIONS
                and not self.waiting_on_unreleased_partition(member)
            )
        ):
            raise self._rebalance_in_progress(member)
        return HeartbeatResponse(req.corr)

    def waiting_on_unreleased_partition(self, member: GroupMember) -> bool:
        """``ConsumerGroup.waitingOnUnreleasedPartition`` (CG@3.9 825-845): a partition of
        the member's target it does not have yet is still owned by another member."""
        if member.state is not MemberState.UNRELEASED_PARTITIONS:
            return False
        target = self.target_assignment.get(member.member_id, frozenset())
        return any(tp not in member.assigned and self._partition_epoch(tp) != -1 for tp in target)

    # --------------------------------------------------------------- LeaveGroup

    def _classic_leave(self, req: LeaveGroupRequest, out: list[Output]) -> LeaveGroupResponse:
        """``classicGroupLeaveToConsumerGroup`` (GMM@3.9 5547-5620): per-member errors,
        one group epoch bump for the members removed."""
        results: list[tuple[str, str | None, Errors]] = []
        removed: list[GroupMember] = []
        for member_id, instance_id in req.members:
            try:
                if instance_id is None:
                    member = self._classic_member_of(member_id, None)
                else:
                    holder = self.member_by_instance(instance_id)
                    if holder is None:
                        raise ProtocolError(Errors.UNKNOWN_MEMBER_ID, "unknown instance id")
                    if member_id != UNKNOWN_MEMBER_ID and member_id != holder.member_id:
                        raise ProtocolError(Errors.FENCED_INSTANCE_ID, "fenced instance id")
                    member = self._classic_member_of(holder.member_id, None)
            except ProtocolError as exc:
                results.append((member_id, instance_id, exc.error))
                continue
            self._remove_member(member)
            self.target_assignment.pop(member.member_id, None)
            removed.append(member)
            results.append((member_id, instance_id, Errors.NONE))
            out.append(self.removal_event(member, "leave"))
        if removed:
            self.subscription_metadata = self._subscription_metadata()
            self.group_epoch += 1
        return LeaveGroupResponse(req.corr, member_errors=tuple(results))


def make_mixed_coordinator(
    group_id: str,
    props: Mapping[str, object],
    rng: random.Random,
    broker_id: int,
    partitions_per_topic: Mapping[str, int],
) -> MixedGroupCoordinator:
    """A consumer group that serves classic members too, from broker properties
    (:func:`~emulator.modern.consumer_coordinator.make_consumer_coordinator`'s, plus
    ``group.min.session.timeout.ms`` and ``group.max.session.timeout.ms``).

    Raises:
        ValueError: a property of the wrong type or range.
    """
    coord = make_consumer_coordinator(
        group_id, props, rng, broker_id, partitions_per_topic, MixedGroupCoordinator
    )
    assert isinstance(coord, MixedGroupCoordinator)
    return coord
