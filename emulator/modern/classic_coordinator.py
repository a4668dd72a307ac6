"""The classic group coordinator (one group) as a sans-I/O state machine.

This is Kafka 3.9's ``GroupCoordinator`` for one group with its
``GroupMetadata``, ``MemberMetadata`` and the delayed operations of its
purgatories (``DelayedJoin``, ``InitialDelayedJoin``, ``DelayedSync``,
``DelayedHeartbeat``), read from K@3.9
``core/src/main/scala/kafka/coordinator/group/`` (kafka-protocols.md B1-B5,
B9). The machine is fed requests and the passing of time and returns
responses and events; the broker actor does the I/O.

* **States (B1).** Empty, PreparingRebalance, CompletingRebalance, Stable,
  Dead, with Kafka's valid-previous-state table enforced on every transition.
* **JoinGroup (B2).** Group creation only for an unknown member id; the
  session-timeout bounds; KIP-394 MEMBER_ID_REQUIRED with a pending-member
  expiry of the session timeout; leader = first member added; protocol vote;
  INCONSISTENT_GROUP_PROTOCOL; UNKNOWN_MEMBER_ID; parked JoinGroups answered
  when the join completes: as soon as every known member rejoined (and no
  pending member is left), or at the rebalance timeout, when dynamic laggards
  are removed and static ones kept. A new member's JoinGroup expires after
  ``NewMemberJoinTimeoutMs``. The first rebalance of an Empty group waits
  ``group.initial.rebalance.delay.ms`` (``InitialDelayedJoin``) and, for a
  brand-new group (generation 0, where ``newMemberAdded`` is set), re-arms
  while new members arrive, within the rebalance timeout.
* **SyncGroup (B3).** Followers are parked until the leader's assignment is
  stored; missing members get an empty assignment; members that do not sync
  within the rebalance timeout are removed (``DelayedSync``), static ones
  too: a static member kept at the join timeout is a pending-sync member of
  the new generation like any other.
* **Heartbeat (B4), LeaveGroup and OffsetCommit (B5), OffsetFetch.** As the
  tables of B4-B5 say; a commit in Stable or PreparingRebalance also counts
  as a heartbeat.
* **Static membership (B9).** A known ``group.instance.id`` joining with an
  unknown member id replaces the old id (the old id's parked requests get
  FENCED_INSTANCE_ID); in Stable without a protocol change there is no
  rebalance and the member gets the current generation (JoinGroup v9:
  ``skipAssignment`` for the leader).
* **Liveness.** A member's session timer is rescheduled by heartbeats,
  commits and by join/sync completion; a member awaiting join or sync
  satisfies it (``MemberMetadata.hasSatisfiedHeartbeat``).

Responses to parked requests come out of a later :meth:`handle` or
:meth:`poll` call; every response carries the ``corr`` of its request. The
coordinator keys nothing by sender, so ``corr`` must be unique among the
requests a coordinator has not answered yet: a host that multiplexes many
members renumbers them, as a network layer would.

Emulator choices (not Kafka):

* Writes to ``__consumer_offsets`` (group metadata, offsets) succeed at once;
  the committed offsets live in this object (:meth:`committed_offsets`).
* Members are kept in insertion order where Kafka's ``HashMap`` order is
  arbitrary: the new leader after a leader leaves is the oldest member, and a
  protocol vote tie goes to the protocol voted first in member order.
* An Empty group lingers (Kafka removes it when its offsets expire); offset
  retention, coordinator loading and ``group.max.size`` shrinking on load are
  not modelled. :meth:`unload` models the loss of the ``__consumer_offsets``
  partition's leadership (``onGroupUnloaded``).
* Both JoinGroup v4+ (KIP-394) and v9 (KIP-814) are assumed for every
  member, i.e. Kafka 3.9 clients.
* The RPC header's ``client.id`` is passed beside the request (``client_id``).
"""

from __future__ import annotations

import enum
import heapq
import itertools
import random
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Final, NamedTuple, TypeVar

from emulator.events import EventKind
from emulator.modern.config import GroupCoordinatorConfig
from emulator.modern.coordinator import GroupCoordinator
from emulator.modern.errors import Errors
from emulator.modern.messages import (
    UNKNOWN_MEMBER_ID,
    Assignment,
    Emit,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    GroupRequest,
    GroupResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupMember,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    Subscription,
    SyncGroupRequest,
    SyncGroupResponse,
    TopicPartition,
)

Output = GroupResponse | Emit
"""What the coordinator returns: responses (to any parked request) and events."""

MEMBER_ID_DELIMITER: Final = "-"
"""``GroupMetadata.MemberIdDelimiter``."""


class GroupState(enum.StrEnum):
    """``GroupState`` of ``GroupMetadata.scala`` (B1), named as Kafka logs them."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_S = GroupState
VALID_PREVIOUS_STATES: Final[Mapping[GroupState, frozenset[GroupState]]] = {
    _S.PREPARING_REBALANCE: frozenset({_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY}),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    _S.DEAD: frozenset(GroupState),
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
}
"""``validPreviousStates`` of each state (B1)."""


class IllegalStateTransition(RuntimeError):
    """A transition Kafka's ``assertValidTransition`` would refuse (a bug here)."""


@dataclass
class MemberMetadata:
    """``MemberMetadata.scala``: one member as the coordinator sees it.

    ``awaiting_join`` and ``awaiting_sync`` hold the ``corr`` of the parked
    JoinGroup / SyncGroup (Kafka keeps the response callbacks there).
    ``heartbeat_deadline`` is the expiry of the member's ``DelayedHeartbeat``,
    ``None`` when none is pending.
    """

    member_id: str
    group_instance_id: str | None
    client_id: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, Subscription], ...]
    assignment: Assignment | None = None
    awaiting_join: int | None = None
    awaiting_sync: int | None = None
    is_new: bool = False
    heartbeat_deadline: float | None = None

    @property
    def is_static(self) -> bool:
        """Whether the member has a ``group.instance.id``."""
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        """A JoinGroup of this member is parked."""
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        """A SyncGroup of this member is parked."""
        return self.awaiting_sync is not None

    @property
    def protocol_names(self) -> tuple[str, ...]:
        """The member's protocols (assignors) in preference order."""
        return tuple(name for name, _ in self.protocols)

    def has_satisfied_heartbeat(self) -> bool:
        """``hasSatisfiedHeartbeat`` at the expiry of the member's current ``DelayedHeartbeat``.

        Kafka sets ``heartbeatSatisfied`` back to false whenever it schedules
        the next expiry, so at that expiry only a non-new member awaiting join
        or sync is satisfied.
        """
        if self.is_new:
            return False
        return self.is_awaiting_join or self.is_awaiting_sync

    def metadata(self, protocol: str) -> Subscription:
        """The member's metadata for ``protocol``."""
        for name, sub in self.protocols:
            if name == protocol:
                return sub
        raise ValueError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: tuple[tuple[str, Subscription], ...]) -> bool:
        """Same protocols, in the same order, with the same metadata."""
        return tuple(protocols) == tuple(self.protocols)

    def vote(self, candidates: frozenset[str]) -> str:
        """The member's first protocol that every member supports (``MemberMetadata.vote``)."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


# Timer kinds, in the order timers due at the same time fire (then by key).
_HEARTBEAT: Final = 0
_PENDING: Final = 1
_SYNC: Final = 2
_JOIN: Final = 3


class _Timer(NamedTuple):
    """One armed delayed operation in the timer heap (compared as a tuple).

    Ordered by deadline, then kind (heartbeat < pending < sync < join), then
    key (a member id; ``""`` for the sync and join timers); ``seq`` is unique
    per arming and only tells a live entry from a stale one.
    """

    deadline: float
    kind: int
    key: str
    seq: int


@dataclass
class _JoinTimer:
    """The pending ``DelayedJoin`` (``initial`` for ``InitialDelayedJoin``)."""

    deadline: float
    initial: bool = False
    configured_delay_ms: int = 0
    delay_ms: int = 0
    remaining_ms: int = 0


class ClassicGroupCoordinator(GroupCoordinator):
    """The coordinator of one classic consumer group (K@3.9 ``GroupCoordinator``).

    Args:
        group_id: ``group.id``.
        config: the broker's group-coordinator settings.
        rng: a seeded random source for member-id UUIDs.
        broker: the hosting broker's id, for events and FindCoordinator.
        committed: committed offsets already in ``__consumer_offsets`` (a
            coordinator that takes over a group loads them).
    """

    def __init__(
        self,
        group_id: str,
        config: GroupCoordinatorConfig,
        rng: random.Random,
        *,
        broker: int | None = None,
        committed: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        self.group_id = group_id
        self.config = config
        self.broker = broker
        self._rng = rng
        self._now = 0.0
        self._active = True  # this coordinator hosts the group (validateGroupStatus)
        self._exists = bool(committed)
        self.state = GroupState.EMPTY
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self._members: dict[str, MemberMetadata] = {}
        self._static_members: dict[str, str] = {}
        self._pending_members: dict[str, float] = {}  # member id -> expiry
        self._pending_sync: set[str] = set()
        self._supported_protocols: Counter[str] = Counter()
        self._num_awaiting_join = 0
        self._new_member_added = False
        self._join_timer: _JoinTimer | None = None
        self._sync_deadline: float | None = None
        self._sync_generation = 0
        # Armed delayed operations: a heap with lazy cancellation. Every arming
        # pushes a _Timer and records its seq in _armed; an entry is live only
        # while its seq is the latest for its (kind, key) and the deadline it
        # carries is still the one set (clearing a deadline needs no heap work).
        self._heap: list[_Timer] = []
        self._armed: dict[tuple[int, str], int] = {}
        self._seq = itertools.count()
        self._offsets: dict[TopicPartition, int] = dict(committed or {})
        self._out: list[Output] = []

    # ------------------------------------------------------------------ views

    @property
    def members(self) -> Mapping[str, MemberMetadata]:
        """The members by member id (read-only view; do not mutate)."""
        return self._members

    @property
    def pending_members(self) -> frozenset[str]:
        """Member ids handed out with MEMBER_ID_REQUIRED and not yet joined."""
        return frozenset(self._pending_members)

    @property
    def static_members(self) -> Mapping[str, str]:
        """``group.instance.id`` -> current member id."""
        return dict(self._static_members)

    @property
    def pending_sync_members(self) -> frozenset[str]:
        """Members of this generation that have not sent SyncGroup yet."""
        return frozenset(self._pending_sync)

    @property
    def exists(self) -> bool:
        """Whether the group has been created (Kafka's ``getGroup`` finds it)."""
        return self._exists

    def committed_offsets(self) -> dict[TopicPartition, int]:
        """The group's committed offsets (the emulated ``__consumer_offsets`` content)."""
        return dict(self._offsets)

    def delete_offsets(self, now_ms: float, partitions: Iterable[TopicPartition]) -> None:
        """Deleted partitions: their offsets are tombstoned (``removeOffsets``).

        K@3.9 ``GroupCoordinator.handleDeletedPartitions`` (1153-1157) ->
        ``GroupMetadataManager.cleanupGroupMetadata`` (863-930). Not modelled:
        an Empty group left without offsets becoming Dead (it stays Empty here).
        """
        self._now = now_ms
        for tp in partitions:
            self._offsets.pop(tp, None)

    def rebalance_timeout_ms(self) -> int:
        """``GroupMetadata.rebalanceTimeoutMs``: the largest member rebalance timeout."""
        return max((m.rebalance_timeout_ms for m in self._members.values()), default=0)

    def has_all_members_joined(self) -> bool:
        """``hasAllMembersJoined``: every member awaits join and no member id is pending."""
        return len(self._members) == self._num_awaiting_join and not self._pending_members

    # ----------------------------------------------------------------- inputs

    def handle(
        self, now_ms: float, request: GroupRequest, *, client_id: str = "consumer"
    ) -> list[Output]:
        """Handle one request.

        Args:
            now_ms: the emulated time.
            request: any classic-group request (FindCoordinator, JoinGroup,
                SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch).
            client_id: the request header's ``client.id`` (prefix of new
                dynamic member ids).

        Returns:
            Responses (this request's unless it is parked, and any parked
            requests it releases) and events, in order.

        Raises:
            TypeError: a request kind the classic coordinator does not serve.
        """
        self._now = now_ms
        if isinstance(request, JoinGroupRequest):
            self._handle_join(request, client_id)
        elif isinstance(request, SyncGroupRequest):
            self._handle_sync(request)
        elif isinstance(request, HeartbeatRequest):
            self._handle_heartbeat(request)
        elif isinstance(request, LeaveGroupRequest):
            self._handle_leave(request)
        elif isinstance(request, OffsetCommitRequest):
            self._handle_commit(request)
        elif isinstance(request, OffsetFetchRequest):
            self._handle_fetch(request)
        elif isinstance(request, FindCoordinatorRequest):
            if self.broker is None or not self._active:
                self._reply(FindCoordinatorResponse(request.corr, Errors.COORDINATOR_NOT_AVAILABLE))
            else:
                self._reply(FindCoordinatorResponse(request.corr, node_id=self.broker))
        else:
            raise TypeError(f"the classic coordinator does not serve {type(request).__name__}")
        return self._drain()

    def poll(self, now_ms: float) -> list[Output]:
        """Let time pass: fire every delayed operation due by ``now_ms``, earliest first."""
        self._now = now_ms
        while True:
            due = self._pop_due(now_ms)
            if due is None:
                break
            kind, key = due
            if kind == _JOIN:
                self._on_join_timer()
            elif kind == _SYNC:
                self._sync_deadline = None
                self._on_expire_pending_sync(self._sync_generation)
            elif kind == _PENDING:
                self._on_expire_pending_member(key)
            else:
                member = self._members.get(key)
                if member is not None:
                    member.heartbeat_deadline = None
                    self._on_expire_heartbeat(member)
        return self._drain()

    def next_deadline(self) -> float | None:
        """The earliest time at which :meth:`poll` has work to do, if any."""
        top = self._peek()
        return None if top is None else top.deadline

    def unload(self, now_ms: float) -> list[Output]:
        """``onGroupUnloaded``: this broker no longer leads the group's offsets partition.

        Parked JoinGroups and SyncGroups get NOT_COORDINATOR, the group turns
        Dead, and every later request gets NOT_COORDINATOR.
        """
        self._now = now_ms
        if not self._active:
            return []
        previous = self.state
        self._active = False
        self._transition(GroupState.DEAD, "unloaded")
        if previous is GroupState.PREPARING_REBALANCE:
            for m in list(self._members.values()):
                self._invoke_join(m, self._join_error(m.member_id, Errors.NOT_COORDINATOR))
        elif previous in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            for m in list(self._members.values()):
                self._invoke_sync(m, SyncGroupResponse(0, Errors.NOT_COORDINATOR))
        self._join_timer = None
        self._sync_deadline = None
        self._pending_sync.clear()
        self._pending_members.clear()
        for m in self._members.values():
            m.heartbeat_deadline = None
        self._heap.clear()
        self._armed.clear()
        return self._drain()

    # ------------------------------------------------------- online migration

    def abort_for_conversion(self, now_ms: float) -> list[Output]:
        """The group becomes a consumer group (``convertToConsumerGroup``, GMM@3.9 1123-1176).

        Every parked JoinGroup and SyncGroup is answered REBALANCE_IN_PROGRESS
        (``completeAllJoinFutures`` / ``completeAllSyncFutures``) and this
        coordinator stops: its timers are dropped (Kafka leaves them to fire and
        find the group gone) and later requests are the consumer group's.
        """
        self._now = now_ms
        for m in list(self._members.values()):
            self._invoke_join(m, self._join_error(m.member_id, Errors.REBALANCE_IN_PROGRESS))
            self._invoke_sync(m, SyncGroupResponse(0, Errors.REBALANCE_IN_PROGRESS))
        self._active = False
        self._join_timer = None
        self._sync_deadline = None
        self._heap.clear()
        self._armed.clear()
        for m in self._members.values():
            m.heartbeat_deadline = None
        return self._drain()

    def adopt_converted(
        self,
        now_ms: float,
        generation: int,
        members: Iterable[MemberMetadata],
        *,
        rebalance: bool,
        reason: str,
    ) -> list[Output]:
        """Take a consumer group's classic members (``ClassicGroup.fromConsumerGroup``,
        CLG@3.9 1369-1420, then ``convertToClassicGroup``, GMM@3.9 1048-1097).

        The group starts Stable at the consumer group's epoch as its generation,
        protocol type ``consumer``, the leader the first member, the protocol
        voted as usual; every member's session timer starts now
        (``rescheduleClassicGroupMemberHeartbeat``). With ``rebalance`` it then
        prepares a rebalance (3.8-3.9: always after a leave or a fencing), so
        the members' next heartbeat says REBALANCE_IN_PROGRESS (or
        ILLEGAL_GENERATION to a member whose epoch trailed the group's).

        Args:
            now_ms: the emulated time.
            generation: the consumer group's epoch.
            members: the members, in the consumer group's order, with their
                target assignment as ``assignment``.
            rebalance: prepare a rebalance at once.
            reason: why (the rebalance's reason).
        """
        self._now = now_ms
        self._exists = True
        self.generation_id = generation
        for m in members:
            m.is_new = False
            self._add(m, None)
        self.protocol_name = self.select_protocol()
        self.state = GroupState.STABLE
        self._emit(
            EventKind.GROUP_STATE_CHANGED,
            state=self.state.value,
            reason="downgrade",
            count=len(self._members),
        )
        for m in self._members.values():
            self._schedule_heartbeat(m)
        if rebalance:
            self._prepare_rebalance(reason)
        return self._drain()

    # ---------------------------------------------------------------- plumbing

    def _drain(self) -> list[Output]:
        out, self._out = self._out, []
        return out

    def _reply(self, response: GroupResponse) -> None:
        self._out.append(response)

    def _emit(self, kind: EventKind, **fields: object) -> None:
        base: dict[str, object] = {"group": self.group_id, "generation": self.generation_id}
        if self.broker is not None:
            base["broker"] = self.broker
        base.update({k: v for k, v in fields.items() if v is not None})
        self._out.append(Emit(kind, base))

    def _transition(self, target: GroupState, reason: str) -> None:
        if self.state not in VALID_PREVIOUS_STATES[target]:
            raise IllegalStateTransition(
                f"group {self.group_id} should be in one of "
                f"{sorted(VALID_PREVIOUS_STATES[target])} before moving to {target}; "
                f"it is {self.state}"
            )
        self.state = target
        self._emit(
            EventKind.GROUP_STATE_CHANGED,
            state=target.value,
            reason=reason,
            count=len(self._members),
        )

    def _status_error(self) -> Errors | None:
        """``validateGroupStatus``: is this coordinator the group's?"""
        if not self._active:
            return Errors.NOT_COORDINATOR
        return None

    def _wrong_group(self, request: GroupRequest) -> bool:
        return request.group_id != self.group_id

    def _generate_member_id(self, client_id: str, instance_id: str | None) -> str:
        prefix = client_id if instance_id is None else instance_id
        member_uuid = uuid.UUID(int=self._rng.getrandbits(128), version=4)
        return prefix + MEMBER_ID_DELIMITER + str(member_uuid)

    def _join_error(self, member_id: str, error: Errors, corr: int = 0) -> JoinGroupResponse:
        """``JoinGroupResult(memberId, error)``: no generation, no leader, no members."""
        return JoinGroupResponse(corr, error, member_id=member_id)

    # ------------------------------------------------------- GroupMetadata ops

    def _add(self, member: MemberMetadata, join_corr: int | None) -> None:
        """``GroupMetadata.add``."""
        if member.group_instance_id is not None:
            if member.group_instance_id in self._static_members:
                raise IllegalStateTransition(
                    f"static member {member.group_instance_id} is already a member"
                )
            self._static_members[member.group_instance_id] = member.member_id
        if not self._members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self._members[member.member_id] = member
        self._supported_protocols.update(member.protocol_names)
        member.awaiting_join = join_corr
        if member.is_awaiting_join:
            self._num_awaiting_join += 1
        self._pending_members.pop(member.member_id, None)

    def _remove(self, member_id: str) -> None:
        """``GroupMetadata.remove``: also drops pending and pending-sync entries."""
        member = self._members.pop(member_id, None)
        if member is not None:
            self._supported_protocols.subtract(member.protocol_names)
            self._supported_protocols = +self._supported_protocols
            if member.is_awaiting_join:
                self._num_awaiting_join -= 1
            if member.group_instance_id is not None:
                self._static_members.pop(member.group_instance_id, None)
            member.heartbeat_deadline = None
        if self.leader_id == member_id:
            self.leader_id = next(iter(self._members), None)
        self._pending_members.pop(member_id, None)
        self._pending_sync.discard(member_id)
        self._maybe_clear_sync_timer()

    def _update_member(
        self,
        member: MemberMetadata,
        protocols: tuple[tuple[str, Subscription], ...],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        join_corr: int | None,
    ) -> None:
        """``GroupMetadata.updateMember``: new protocols and timeouts, park (or unpark) the join."""
        self._supported_protocols.subtract(member.protocol_names)
        self._supported_protocols = +self._supported_protocols
        member.protocols = tuple(protocols)
        self._supported_protocols.update(member.protocol_names)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if join_corr is not None and not member.is_awaiting_join:
            self._num_awaiting_join += 1
        elif join_corr is None and member.is_awaiting_join:
            self._num_awaiting_join -= 1
        member.awaiting_join = join_corr

    def _invoke_join(self, member: MemberMetadata, response: JoinGroupResponse) -> None:
        """``maybeInvokeJoinCallback``."""
        if member.awaiting_join is None:
            return
        corr = member.awaiting_join
        member.awaiting_join = None
        self._num_awaiting_join -= 1
        self._reply(_with_corr(response, corr))

    def _invoke_sync(self, member: MemberMetadata, response: SyncGroupResponse) -> bool:
        """``maybeInvokeSyncCallback``; True when a SyncGroup was answered."""
        if member.awaiting_sync is None:
            return False
        corr = member.awaiting_sync
        member.awaiting_sync = None
        self._reply(_with_corr(response, corr))
        return True

    def _candidate_protocols(self) -> frozenset[str]:
        n = len(self._members)
        return frozenset(p for p, c in self._supported_protocols.items() if c == n)

    def _supports_protocols(self, protocol_type: str, protocols: tuple[str, ...]) -> bool:
        """``GroupMetadata.supportsProtocols``."""
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(protocols)
        n = len(self._members)
        return self.protocol_type == protocol_type and any(
            self._supported_protocols.get(p, 0) == n for p in protocols
        )

    def select_protocol(self) -> str:
        """``GroupMetadata.selectProtocol``: each member votes its first common protocol.

        Raises:
            ValueError: the group has no members.
        """
        if not self._members:
            raise ValueError("cannot select a protocol for an empty group")
        candidates = self._candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self._members.values())
        # Counter keeps first-vote order, and max() returns the first maximum.
        return max(votes, key=lambda p: votes[p])

    def _current_member_metadata(self) -> tuple[JoinGroupMember, ...]:
        """``currentMemberMetadata``: every member's metadata for the selected protocol."""
        if self.state in (GroupState.DEAD, GroupState.PREPARING_REBALANCE):
            raise IllegalStateTransition(f"no member metadata in state {self.state}")
        assert self.protocol_name is not None
        return tuple(
            JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
            for m in self._members.values()
        )

    def _current_generation_response(self, member_id: str, *, members: bool) -> JoinGroupResponse:
        return JoinGroupResponse(
            0,
            Errors.NONE,
            generation_id=self.generation_id,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            leader=self.leader_id or "",
            member_id=member_id,
            members=self._current_member_metadata() if members else (),
        )

    def _validate_current_member(self, member_id: str, instance_id: str | None) -> Errors | None:
        """``validateCurrentMember``: FENCED_INSTANCE_ID or UNKNOWN_MEMBER_ID."""
        if instance_id is not None:
            current = self._static_members.get(instance_id)
            if current is None:
                return Errors.UNKNOWN_MEMBER_ID
            if current != member_id:
                return Errors.FENCED_INSTANCE_ID
            return None
        if member_id not in self._members:
            return Errors.UNKNOWN_MEMBER_ID
        return None

    # ----------------------------------------------------------------- timers

    def _arm(self, kind: int, key: str, deadline: float) -> None:
        """Record that the (kind, key) timer is now set to ``deadline``."""
        seq = next(self._seq)
        self._armed[(kind, key)] = seq
        heapq.heappush(self._heap, _Timer(deadline, kind, key, seq))
        if len(self._heap) > 64 and len(self._heap) > 4 * len(self._armed):
            self._compact()

    def _current_deadline(self, kind: int, key: str) -> float | None:
        """The deadline the (kind, key) timer is set to now, if any (the source of truth)."""
        if kind == _HEARTBEAT:
            member = self._members.get(key)
            return None if member is None else member.heartbeat_deadline
        if kind == _PENDING:
            return self._pending_members.get(key)
        if kind == _SYNC:
            return self._sync_deadline
        return None if self._join_timer is None else self._join_timer.deadline

    def _is_live(self, timer: _Timer) -> bool:
        return self._armed.get((timer.kind, timer.key)) == timer.seq and (
            self._current_deadline(timer.kind, timer.key) == timer.deadline
        )

    def _peek(self) -> _Timer | None:
        """The earliest live timer, after dropping the stale entries above it."""
        heap = self._heap
        while heap:
            top = heap[0]
            if self._is_live(top):
                return top
            heapq.heappop(heap)
            slot = (top.kind, top.key)
            if self._armed.get(slot) == top.seq:  # cleared, not re-armed: forget the slot
                del self._armed[slot]
        return None

    def _pop_due(self, now: float) -> tuple[int, str] | None:
        """Take the earliest live timer due by ``now``: the (kind, key) to fire."""
        top = self._peek()
        if top is None or top.deadline > now:
            return None
        heapq.heappop(self._heap)
        del self._armed[(top.kind, top.key)]
        return top.kind, top.key

    def _compact(self) -> None:
        """Drop every stale heap entry (amortized over the pushes that made them)."""
        live = [t for t in self._heap if self._is_live(t)]
        heapq.heapify(live)
        self._heap = live
        self._armed = {(t.kind, t.key): t.seq for t in live}

    def _set_heartbeat_deadline(self, member: MemberMetadata, deadline: float | None) -> None:
        member.heartbeat_deadline = deadline
        if deadline is not None:
            self._arm(_HEARTBEAT, member.member_id, deadline)

    def _set_sync_deadline(self, deadline: float | None) -> None:
        self._sync_deadline = deadline
        if deadline is not None:
            self._arm(_SYNC, "", deadline)

    def _set_join_timer(self, timer: _JoinTimer | None) -> None:
        self._join_timer = timer
        if timer is not None:
            self._arm(_JOIN, "", timer.deadline)

    def _schedule_expiration(self, member: MemberMetadata, timeout_ms: int) -> None:
        """``completeAndScheduleNextExpiration``: complete the old DelayedHeartbeat, arm a new one.

        ``tryCompleteElseWatch`` completes the new one at once when the member
        already satisfies it (a non-new member awaiting join or sync), so no
        expiry is pending then.
        """
        if not member.is_new and (member.is_awaiting_join or member.is_awaiting_sync):
            self._set_heartbeat_deadline(member, None)
        else:
            self._set_heartbeat_deadline(member, self._now + timeout_ms)

    def _schedule_heartbeat(self, member: MemberMetadata) -> None:
        """``completeAndScheduleNextHeartbeatExpiration``."""
        self._schedule_expiration(member, member.session_timeout_ms)

    def _maybe_clear_sync_timer(self) -> None:
        """``maybeCompleteSyncExpiration``: the DelayedSync completes once all synced."""
        if self._sync_deadline is not None and not self._pending_sync:
            self._sync_deadline = None

    def _try_complete_join(self) -> None:
        """``rebalancePurgatory.checkAndComplete(GroupJoinKey)``."""
        timer = self._join_timer
        if timer is None or timer.initial:  # InitialDelayedJoin.tryComplete is always false
            return
        if self.has_all_members_joined():
            self._join_timer = None
            self._on_complete_join()

    def _on_join_timer(self) -> None:
        timer = self._join_timer
        assert timer is not None
        self._join_timer = None
        if timer.initial and self._new_member_added and timer.remaining_ms != 0:
            # InitialDelayedJoin.onComplete: re-arm while members keep arriving.
            self._new_member_added = False
            delay = min(timer.configured_delay_ms, timer.remaining_ms)
            remaining = max(timer.remaining_ms - timer.delay_ms, 0)
            self._set_join_timer(
                _JoinTimer(self._now + delay, True, timer.configured_delay_ms, delay, remaining)
            )
            self._emit(
                EventKind.GROUP_STATE_CHANGED,
                state=self.state.value,
                reason="initial_rebalance_delay_rearmed",
                duration_ms=float(delay),
                count=len(self._members),
            )
            return
        self._on_complete_join()

    # -------------------------------------------------------------- rebalance

    def _maybe_prepare_rebalance(self, reason: str) -> None:
        if self.state in VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]:
            self._prepare_rebalance(reason)

    def _prepare_rebalance(self, reason: str) -> None:
        """``prepareRebalance``: cancel pending syncs, arm the (initial) delayed join."""
        if self.state is GroupState.COMPLETING_REBALANCE:
            self._reset_and_propagate_assignment_error(Errors.REBALANCE_IN_PROGRESS)
        self._pending_sync.clear()
        self._sync_deadline = None
        rebalance_timeout = self.rebalance_timeout_ms()
        if self.state is GroupState.EMPTY:
            delay = self.config.group_initial_rebalance_delay_ms
            self._set_join_timer(
                _JoinTimer(self._now + delay, True, delay, delay, max(rebalance_timeout - delay, 0))
            )
        else:
            self._set_join_timer(_JoinTimer(self._now + rebalance_timeout))
        self._transition(GroupState.PREPARING_REBALANCE, reason)
        self._emit(EventKind.REBALANCE_STARTED, reason=reason, count=len(self._members))
        self._try_complete_join()

    def _on_complete_join(self) -> None:
        """``onCompleteJoin``: drop dynamic laggards, start the next generation."""
        for m in [m for m in self._members.values() if not m.is_awaiting_join]:
            if m.is_static:
                continue
            self._remove(m.member_id)
            self._emit(EventKind.MEMBER_REMOVED, member_id=m.member_id, reason="join_timeout")
        if self.state is GroupState.DEAD:
            return
        if not self._maybe_elect_new_joined_leader() and self._members:
            # No member rejoined: wait another rebalance timeout.
            self._set_join_timer(_JoinTimer(self._now + self.rebalance_timeout_ms()))
            self._try_complete_join()
            return
        self._init_next_generation()
        if self.state is GroupState.EMPTY:
            return
        for m in list(self._members.values()):
            is_leader = m.member_id == self.leader_id
            self._invoke_join(m, self._current_generation_response(m.member_id, members=is_leader))
            self._schedule_heartbeat(m)
            m.is_new = False
            self._pending_sync.add(m.member_id)
        self._set_sync_deadline(self._now + self.rebalance_timeout_ms())
        self._sync_generation = self.generation_id

    def _maybe_elect_new_joined_leader(self) -> bool:
        """``maybeElectNewJoinedLeader``."""
        if self.leader_id is None:
            return False
        leader = self._members[self.leader_id]
        if leader.is_awaiting_join:
            return True
        for m in self._members.values():
            if m.is_awaiting_join:
                self.leader_id = m.member_id
                return True
        return False

    def _init_next_generation(self) -> None:
        """``initNextGeneration``: generation + 1, protocol chosen, CompletingRebalance or Empty."""
        self.generation_id += 1
        if self._members:
            self.protocol_name = self.select_protocol()
            self._transition(GroupState.COMPLETING_REBALANCE, "join_complete")
        else:
            self.protocol_name = None
            self._transition(GroupState.EMPTY, "no_members")
        self._pending_sync.clear()

    def _reset_and_propagate_assignment_error(self, error: Errors) -> None:
        for m in self._members.values():
            m.assignment = None
        self._propagate_assignment(error)

    def _propagate_assignment(self, error: Errors) -> None:
        ok = error is Errors.NONE
        for m in list(self._members.values()):
            response = SyncGroupResponse(
                0,
                error,
                protocol_type=self.protocol_type if ok else None,
                protocol_name=self.protocol_name if ok else None,
                assignment=(m.assignment or Assignment()) if ok else Assignment(),
            )
            if self._invoke_sync(m, response):
                self._schedule_heartbeat(m)

    def _remove_member_and_update_group(self, member: MemberMetadata, reason: str) -> None:
        """``removeMemberAndUpdateGroup``."""
        self._invoke_join(member, self._join_error(UNKNOWN_MEMBER_ID, Errors.UNKNOWN_MEMBER_ID))
        self._remove(member.member_id)
        self._emit(EventKind.MEMBER_REMOVED, member_id=member.member_id, reason=reason)
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(f"removing member {member.member_id} ({reason})")
        elif self.state is GroupState.PREPARING_REBALANCE:
            self._try_complete_join()

    def _on_expire_heartbeat(self, member: MemberMetadata) -> None:
        if self.state is GroupState.DEAD:
            return
        if not member.has_satisfied_heartbeat():
            reason = "new_member_join_timeout" if member.is_new else "session_timeout"
            self._remove_member_and_update_group(member, reason)

    def _on_expire_pending_member(self, member_id: str) -> None:
        """``onExpireHeartbeat`` of a pending (MEMBER_ID_REQUIRED) member."""
        self._pending_members.pop(member_id, None)
        if self.state is GroupState.PREPARING_REBALANCE:
            self._try_complete_join()

    def _on_expire_pending_sync(self, generation: int) -> None:
        """``onExpirePendingSync``: remove members that did not sync, rebalance."""
        if generation != self.generation_id:
            return
        if self.state not in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        if not self._pending_sync:
            return
        laggards = [mid for mid in self._members if mid in self._pending_sync]
        for mid in laggards:
            self._remove(mid)
            self._emit(EventKind.MEMBER_REMOVED, member_id=mid, reason="sync_timeout")
        self._prepare_rebalance(f"removing {laggards} on pending sync request expiration")

    # --------------------------------------------------------------- JoinGroup

    def _handle_join(self, req: JoinGroupRequest, client_id: str) -> None:
        def error(err: Errors, member_id: str = req.member_id) -> None:
            self._reply(self._join_error(member_id, err, req.corr))

        status = Errors.NOT_COORDINATOR if self._wrong_group(req) else self._status_error()
        if status is not None:
            error(status)
            return
        cfg = self.config
        if not (
            cfg.group_min_session_timeout_ms
            <= req.session_timeout_ms
            <= cfg.group_max_session_timeout_ms
        ):
            error(Errors.INVALID_SESSION_TIMEOUT)
            return
        is_unknown = req.member_id == UNKNOWN_MEMBER_ID
        if not self._exists:
            if not is_unknown:
                error(Errors.UNKNOWN_MEMBER_ID)
                return
            self._exists = True
            self._emit(
                EventKind.GROUP_STATE_CHANGED, state=self.state.value, reason="created", count=0
            )
        if not self._accept_joining_member(req.member_id):
            self._remove(req.member_id)
            error(Errors.GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID)
        elif is_unknown:
            self._do_new_member_join(req, client_id)
        else:
            self._do_current_member_join(req, client_id)
        if self.state is GroupState.PREPARING_REBALANCE:
            self._try_complete_join()

    def _accept_joining_member(self, member_id: str) -> bool:
        """``acceptJoiningMember`` (``group.max.size``)."""
        max_size = self.config.group_max_size
        if self.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if self.state is GroupState.PREPARING_REBALANCE:
            m = self._members.get(member_id)
            return (m is not None and m.is_awaiting_join) or self._num_awaiting_join < max_size
        return member_id in self._members or len(self._members) < max_size

    def _do_new_member_join(self, req: JoinGroupRequest, client_id: str) -> None:
        if self.state is GroupState.DEAD:
            self._reply(
                self._join_error(UNKNOWN_MEMBER_ID, Errors.COORDINATOR_NOT_AVAILABLE, req.corr)
            )
            return
        names = tuple(n for n, _ in req.protocols)
        if not self._supports_protocols(req.protocol_type, names):
            self._reply(
                self._join_error(UNKNOWN_MEMBER_ID, Errors.INCONSISTENT_GROUP_PROTOCOL, req.corr)
            )
            return
        new_id = self._generate_member_id(client_id, req.group_instance_id)
        if req.group_instance_id is not None:
            old_id = self._static_members.get(req.group_instance_id)
            if old_id is not None:
                self._update_static_member_and_rebalance(req, old_id, new_id)
            else:
                self._add_member_and_rebalance(req, new_id, client_id)
        else:
            # JoinGroup v4+ (KIP-394): hand out an id and ask for a second join.
            expiry = self._now + req.session_timeout_ms
            self._pending_members[new_id] = expiry
            self._arm(_PENDING, new_id, expiry)
            self._reply(self._join_error(new_id, Errors.MEMBER_ID_REQUIRED, req.corr))

    def _do_current_member_join(self, req: JoinGroupRequest, client_id: str) -> None:
        member_id = req.member_id
        if self.state is GroupState.DEAD:
            self._reply(self._join_error(member_id, Errors.COORDINATOR_NOT_AVAILABLE, req.corr))
            return
        names = tuple(n for n, _ in req.protocols)
        if not self._supports_protocols(req.protocol_type, names):
            self._reply(self._join_error(member_id, Errors.INCONSISTENT_GROUP_PROTOCOL, req.corr))
            return
        if member_id in self._pending_members:
            if req.group_instance_id is not None:
                # Kafka throws IllegalStateException: pending members are never static.
                self._reply(self._join_error(member_id, Errors.INVALID_REQUEST, req.corr))
                return
            self._add_member_and_rebalance(req, member_id, client_id)
            return
        err = self._validate_current_member(member_id, req.group_instance_id)
        if err is not None:
            self._reply(self._join_error(member_id, err, req.corr))
            return
        member = self._members[member_id]
        protocols = tuple(req.protocols)
        reason = req.reason or "not provided"
        if self.state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(
                member,
                req,
                f"member {member_id} joining group during {self.state}; client reason: {reason}",
            )
        elif self.state is GroupState.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # The member lost the JoinGroup response: return the current generation.
                resp = self._current_generation_response(
                    member_id, members=member_id == self.leader_id
                )
                self._reply(_with_corr(resp, req.corr))
            else:
                self._update_member_and_rebalance(
                    member,
                    req,
                    f"updating metadata for member {member_id} during {self.state}; "
                    f"client reason: {reason}",
                )
        elif self.state is GroupState.STABLE:
            if member_id == self.leader_id:
                self._update_member_and_rebalance(
                    member,
                    req,
                    f"leader {member_id} re-joining group during Stable; client reason: {reason}",
                )
            elif not member.matches(protocols):
                self._update_member_and_rebalance(
                    member,
                    req,
                    f"updating metadata for member {member_id} during Stable; "
                    f"client reason: {reason}",
                )
            else:
                resp = self._current_generation_response(member_id, members=False)
                self._reply(_with_corr(resp, req.corr))
        else:
            # Empty (Dead handled above): let the member reset and rejoin.
            self._reply(self._join_error(member_id, Errors.UNKNOWN_MEMBER_ID, req.corr))

    def _add_member_and_rebalance(
        self, req: JoinGroupRequest, member_id: str, client_id: str
    ) -> None:
        """``addMemberAndRebalance``."""
        member = MemberMetadata(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=client_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=tuple(req.protocols),
            is_new=True,
        )
        if self.state is GroupState.PREPARING_REBALANCE and self.generation_id == 0:
            self._new_member_added = True
        self._add(member, req.corr)
        self._emit(
            EventKind.MEMBER_JOINED,
            member_id=member_id,
            reason="new",
            detail=None if req.group_instance_id is None else f"instance={req.group_instance_id}",
            count=len(self._members),
        )
        self._schedule_expiration(member, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance(
            f"adding new member {member_id} with group instance id {req.group_instance_id}; "
            f"client reason: {req.reason or 'not provided'}"
        )

    def _update_member_and_rebalance(
        self, member: MemberMetadata, req: JoinGroupRequest, reason: str
    ) -> None:
        self._update_member(
            member, tuple(req.protocols), req.rebalance_timeout_ms, req.session_timeout_ms, req.corr
        )
        self._emit(
            EventKind.MEMBER_JOINED,
            member_id=member.member_id,
            reason="rejoin",
            count=len(self._members),
        )
        self._maybe_prepare_rebalance(reason)

    def _replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> MemberMetadata:
        """``replaceStaticMember``: fence the old id's parked requests, keep everything else."""
        member = self._members.pop(old_id)
        self._invoke_join(member, self._join_error(old_id, Errors.FENCED_INSTANCE_ID))
        self._invoke_sync(member, SyncGroupResponse(0, Errors.FENCED_INSTANCE_ID))
        member.member_id = new_id
        self._members[new_id] = member
        if member.heartbeat_deadline is not None:  # the pending expiry carries over
            self._arm(_HEARTBEAT, new_id, member.heartbeat_deadline)
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self._pending_sync:
            self._pending_sync.discard(old_id)
            self._pending_sync.add(new_id)
        self._static_members[instance_id] = new_id
        return member

    def _update_static_member_and_rebalance(
        self, req: JoinGroupRequest, old_id: str, new_id: str
    ) -> None:
        """``updateStaticMemberAndRebalance`` (B9)."""
        instance_id = req.group_instance_id
        assert instance_id is not None
        member = self._replace_static_member(instance_id, old_id, new_id)
        self._emit(
            EventKind.MEMBER_REMOVED,
            member_id=old_id,
            reason="static_replaced",
            detail=f"instance={instance_id}",
        )
        self._emit(
            EventKind.MEMBER_JOINED,
            member_id=new_id,
            reason="static_replace",
            detail=f"instance={instance_id} replaces {old_id}",
            count=len(self._members),
        )
        self._schedule_heartbeat(member)
        self._update_member(
            member, tuple(req.protocols), req.rebalance_timeout_ms, req.session_timeout_ms, req.corr
        )
        if self.state is GroupState.STABLE:
            # No rebalance unless the next generation's protocol would differ.
            if self.protocol_name == self.select_protocol():
                is_leader = new_id == self.leader_id
                resp = JoinGroupResponse(
                    0,
                    Errors.NONE,
                    generation_id=self.generation_id,
                    protocol_type=self.protocol_type,
                    protocol_name=self.protocol_name,
                    leader=self.leader_id or "",
                    skip_assignment=is_leader,
                    member_id=new_id,
                    members=self._current_member_metadata() if is_leader else (),
                )
                self._invoke_join(member, resp)
            else:
                self._maybe_prepare_rebalance(
                    f"group's selected protocol will change because static member {new_id} "
                    f"with instance id {instance_id} joined with a change of protocol"
                )
        elif self.state is GroupState.COMPLETING_REBALANCE:
            self._prepare_rebalance(
                f"updating metadata for static member {new_id} with instance id {instance_id}"
            )
        # PreparingRebalance: the member simply awaits the join.

    # --------------------------------------------------------------- SyncGroup

    def _handle_sync(self, req: SyncGroupRequest) -> None:
        def error(err: Errors) -> None:
            self._reply(SyncGroupResponse(req.corr, err))

        status = Errors.NOT_COORDINATOR if self._wrong_group(req) else self._status_error()
        if status is not None:
            error(status)
            return
        if not self._exists:
            error(Errors.UNKNOWN_MEMBER_ID)
            return
        err = self._validate_sync(req)
        if err is not None:
            error(err)
            return
        if self.state is GroupState.EMPTY:
            error(Errors.UNKNOWN_MEMBER_ID)
        elif self.state is GroupState.PREPARING_REBALANCE:
            error(Errors.REBALANCE_IN_PROGRESS)
        elif self.state is GroupState.COMPLETING_REBALANCE:
            member = self._members[req.member_id]
            member.awaiting_sync = req.corr
            self._pending_sync.discard(req.member_id)
            self._maybe_clear_sync_timer()
            if req.member_id == self.leader_id:
                given = dict(req.assignments)
                assignment = {mid: given.get(mid, Assignment()) for mid in self._members}
                # storeGroup succeeds at once: still CompletingRebalance, same generation.
                for mid, m in self._members.items():
                    m.assignment = assignment[mid]
                self._propagate_assignment(Errors.NONE)
                self._transition(GroupState.STABLE, "leader_assignment_stored")
                self._emit(
                    EventKind.REBALANCE_COMPLETED,
                    count=len(self._members),
                    detail=f"protocol={self.protocol_name}",
                )
        elif self.state is GroupState.STABLE:
            self._pending_sync.discard(req.member_id)
            self._maybe_clear_sync_timer()
            member = self._members[req.member_id]
            self._reply(
                SyncGroupResponse(
                    req.corr,
                    protocol_type=self.protocol_type,
                    protocol_name=self.protocol_name,
                    assignment=member.assignment or Assignment(),
                )
            )
            self._schedule_heartbeat(member)

    def _validate_sync(self, req: SyncGroupRequest) -> Errors | None:
        """``validateSyncGroup`` (B3 order)."""
        if self.state is GroupState.DEAD:
            return Errors.COORDINATOR_NOT_AVAILABLE
        err = self._validate_current_member(req.member_id, req.group_instance_id)
        if err is not None:
            return err
        if req.generation_id != self.generation_id:
            return Errors.ILLEGAL_GENERATION
        if req.protocol_type is not None and req.protocol_type != self.protocol_type:
            return Errors.INCONSISTENT_GROUP_PROTOCOL
        if req.protocol_name is not None and req.protocol_name != self.protocol_name:
            return Errors.INCONSISTENT_GROUP_PROTOCOL
        return None

    # --------------------------------------------------------------- Heartbeat

    def _handle_heartbeat(self, req: HeartbeatRequest) -> None:
        status = Errors.NOT_COORDINATOR if self._wrong_group(req) else self._status_error()
        if status is not None:
            self._reply(HeartbeatResponse(req.corr, status))
            return
        self._reply(HeartbeatResponse(req.corr, self._heartbeat_error(req)))

    def _heartbeat_error(self, req: HeartbeatRequest) -> Errors:
        """``handleHeartbeat`` (B4)."""
        if not self._exists:
            return Errors.UNKNOWN_MEMBER_ID
        if self.state is GroupState.DEAD:
            return Errors.COORDINATOR_NOT_AVAILABLE
        err = self._validate_current_member(req.member_id, req.group_instance_id)
        if err is not None:
            return err
        if req.generation_id != self.generation_id:
            return Errors.ILLEGAL_GENERATION
        if self.state is GroupState.EMPTY:
            return Errors.UNKNOWN_MEMBER_ID
        member = self._members[req.member_id]
        self._schedule_heartbeat(member)
        if self.state is GroupState.PREPARING_REBALANCE:
            return Errors.REBALANCE_IN_PROGRESS
        return Errors.NONE

    # -------------------------------------------------------------- LeaveGroup

    def _handle_leave(self, req: LeaveGroupRequest) -> None:
        status = Errors.NOT_COORDINATOR if self._wrong_group(req) else self._status_error()
        if status is not None:
            self._reply(LeaveGroupResponse(req.corr, status))
            return
        if not self._exists:
            self._reply(
                LeaveGroupResponse(
                    req.corr,
                    member_errors=tuple(
                        (mid, iid, Errors.UNKNOWN_MEMBER_ID) for mid, iid in req.members
                    ),
                )
            )
            return
        if self.state is GroupState.DEAD:
            self._reply(LeaveGroupResponse(req.corr, Errors.COORDINATOR_NOT_AVAILABLE))
            return
        results: list[tuple[str, str | None, Errors]] = []
        for member_id, instance_id in req.members:
            if member_id == UNKNOWN_MEMBER_ID:
                # Administrative removal of a static member by its instance id.
                current = None if instance_id is None else self._static_members.get(instance_id)
                if current is None:
                    results.append((member_id, instance_id, Errors.UNKNOWN_MEMBER_ID))
                else:
                    self._remove_member_and_update_group(self._members[current], "leave")
                    results.append((member_id, instance_id, Errors.NONE))
            elif member_id in self._pending_members:
                self._pending_members.pop(member_id, None)
                if self.state is GroupState.PREPARING_REBALANCE:
                    self._try_complete_join()
                results.append((member_id, instance_id, Errors.NONE))
            else:
                err = self._validate_current_member(member_id, instance_id)
                if err is None:
                    self._remove_member_and_update_group(self._members[member_id], "leave")
                    results.append((member_id, instance_id, Errors.NONE))
                else:
                    results.append((member_id, instance_id, err))
        self._reply(LeaveGroupResponse(req.corr, member_errors=tuple(results)))

    # ------------------------------------------------------------ OffsetCommit

    def _handle_commit(self, req: OffsetCommitRequest) -> None:
        def fail(err: Errors) -> None:
            self._reply(
                OffsetCommitResponse(
                    req.corr,
                    err if req.offsets else Errors.NONE,
                    partition_errors={tp: err for tp in req.offsets},
                )
            )

        status = Errors.NOT_COORDINATOR if self._wrong_group(req) else self._status_error()
        if status is not None:
            fail(status)
            return
        generation = req.generation_id_or_member_epoch
        if not self._exists:
            if generation < 0:
                # A group that does not use group management: created by the commit.
                self._exists = True
                self._emit(
                    EventKind.GROUP_STATE_CHANGED,
                    state=self.state.value,
                    reason="created_by_commit",
                    count=0,
                )
            else:
                fail(Errors.ILLEGAL_GENERATION)
                return
        err = self._validate_commit(req)
        if err is not None:
            fail(err)
            return
        if self.state is GroupState.COMPLETING_REBALANCE:
            fail(Errors.REBALANCE_IN_PROGRESS)
            return
        if self.state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            # The commit counts as a heartbeat of the member.
            self._schedule_heartbeat(self._members[req.member_id])
        self._offsets.update(req.offsets)
        self._reply(
            OffsetCommitResponse(
                req.corr,
                partition_errors={tp: Errors.NONE for tp in req.offsets},
                accepted_ms=self._now,
            )
        )

    def _validate_commit(self, req: OffsetCommitRequest) -> Errors | None:
        """``validateOffsetCommit`` (B5)."""
        generation = req.generation_id_or_member_epoch
        if self.state is GroupState.DEAD:
            return Errors.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and self.state is GroupState.EMPTY:
            return None
        if (
            generation >= 0
            or req.member_id != UNKNOWN_MEMBER_ID
            or req.group_instance_id is not None
        ):
            err = self._validate_current_member(req.member_id, req.group_instance_id)
            if err is not None:
                return err
            if generation != self.generation_id:
                return Errors.ILLEGAL_GENERATION
            return None
        if self.state is not GroupState.EMPTY:
            return Errors.UNKNOWN_MEMBER_ID
        return None

    # ------------------------------------------------------------- OffsetFetch

    def _handle_fetch(self, req: OffsetFetchRequest) -> None:
        status = Errors.NOT_COORDINATOR if self._wrong_group(req) else self._status_error()
        if status is not None:
            self._reply(OffsetFetchResponse(req.corr, status))
            return
        # Offsets are returned whatever the group state (handleFetchOffsets).
        if req.partitions:
            offsets: dict[TopicPartition, int | None] = {
                tp: self._offsets.get(tp) for tp in req.partitions
            }
        else:
            offsets = dict(self._offsets)
        self._reply(OffsetFetchResponse(req.corr, offsets=offsets))


_R = TypeVar("_R", bound=GroupResponse)


def _with_corr(response: _R, corr: int) -> _R:
    """The same response addressed to request ``corr``."""
    return replace(response, corr=corr)


__all__ = [
    "VALID_PREVIOUS_STATES",
    "ClassicGroupCoordinator",
    "GroupState",
    "IllegalStateTransition",
    "MemberMetadata",
    "Output",
]
