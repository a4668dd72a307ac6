"""The KIP-848 group coordinator for one consumer group, as a sans-I/O state machine.

This is the ``consumer`` protocol half of Kafka's ``GroupMetadataManager`` and
``modern/consumer/ConsumerGroup`` (kafka-protocols.md C3-C6; K@trunk, read in
apache/kafka ``group-coordinator/src/main/java/org/apache/kafka/coordinator/group/``)
without the record log: state changes are applied directly, the records
Kafka would write become :class:`~emulator.modern.messages.Emit` events.
:meth:`ConsumerGroupCoordinator.handle` takes one request and returns its
response plus events; :meth:`ConsumerGroupCoordinator.poll` fires the timers
(``next_deadline`` says when).

What it reproduces:

* **Epochs (C3).** Group epoch, target assignment epoch, member epoch and
  previous member epoch, and the partition epochs (the epoch of the member
  owning or revoking a partition; -1 when free).
* **Heartbeat (C4, ``consumerGroupHeartbeat``).** Request validation
  (``throwIfConsumerGroupHeartbeatRequestIsInvalid``); group size; get or
  create the member (dynamic, or static with ``UNRELEASED_INSTANCE_ID``,
  ``FENCED_INSTANCE_ID`` and replacement of a member that left with epoch -2);
  the epoch check of ``throwIfConsumerGroupMemberEpochIsInvalid`` (tolerating
  the previous epoch with owned partitions a subset of the assignment); a
  subscription change or new subscription metadata bumps the group epoch; the
  target assignment is recomputed for the whole group with the server
  assignor when the group epoch is ahead of the assignment epoch; only this
  member is reconciled (``maybeReconcile`` with :func:`reconcile`, the port
  of ``CurrentAssignmentBuilder``); the session timer is re-armed; the
  assignment is returned on a full request or when it changed.
* **Leave.** Epoch -1 fences the member (removed, group epoch bumped); -2 on a
  static member keeps it, its assignment and its partitions, at epoch -2
  until its session expires or a member with the same instance id replaces it
  without a group epoch bump (``consumerGroupStaticMemberGroupLeave``).
* **Timers.** ``group.consumer.session.timeout.ms`` per member (fence and
  remove); the member's rebalance timeout while it is in
  ``UNREVOKED_PARTITIONS``, which fences it if it is still at the same epoch
  when the timer fires.
* **Offsets (C6, ``ConsumerGroup.validateOffsetCommit`` /
  ``validateOffsetFetch``).** A member's commit or fetch must carry its
  current member epoch (``STALE_MEMBER_EPOCH``) and an existing member id
  (``UNKNOWN_MEMBER_ID``); a request with a negative epoch and no member is
  accepted when the group is empty (commit) or always (fetch, admin).
* **Topics come and go (issue-19 facts C3, C4).** :meth:`update_topics` is a
  new metadata image (``onNewMetadataImage``, CK@4.1 ``GroupMetadataManager``
  5815-5856): the next heartbeat of any member recomputes the subscription
  metadata from it (``hasMetadataExpired``); a created, grown or deleted
  subscribed topic changes it, so the group epoch goes up and the new target
  assignment leaves a deleted topic out. Its partitions then leave their
  owners as any revocation does (``CurrentAssignmentBuilder``: pending
  revocation until the member stops reporting them); the offsets go through
  :meth:`delete_offsets`.
* **Regex subscriptions (Kafka 4.0+, issue-19 facts C1-C2).** A member may
  subscribe with ``SubscribedTopicRegex`` (RE2/J: :mod:`emulator.topic_regex`,
  RE2/J 1.7 in 4.0 and 1.8 from 4.1). ``maybeUpdateRegularExpressions``
  (CK@4.1 3131-3230; CK@4.0 2385-2478) runs on every heartbeat: a regex new to
  the group must compile (else ``INVALID_REGULAR_EXPRESSION``, ``Utils``
  337-347) and asks for a resolution; one already resolved for other members
  bumps the group epoch; dropping a regex bumps it from 4.1 only. A
  resolution of all the group's regexes is started when none is running, the
  last one is more than ``REGEX_BATCH_REFRESH_MIN_INTERVAL_MS`` (10 s) old, and
  a regex is unresolved, or topics were created since the image the last
  resolution read, or (4.1, KAFKA-18961) the last one is older than
  ``group.consumer.regex.refresh.interval.ms``. The resolution is an
  asynchronous executor task (``refreshRegularExpressions`` 3249-3304): it
  runs :attr:`ConsumerGroupCoordinator.regex_resolution_ms` after the
  heartbeat that scheduled it, from :meth:`poll`, against the image of that
  moment, a full match over every topic name, internal topics included
  (``__consumer_offsets``). Its result (``handleRegularExpressionsResult``
  3354-3439) bumps the group epoch when a regex's topics or the subscription
  metadata changed; the next heartbeat computes the new target assignment.
  A member's subscription is its names plus its regex's resolved topics
  (``TargetAssignmentBuilder`` 159-170), so a member whose regex is not
  resolved yet gets its epoch but no partitions. A regex loses its resolution
  when its last member leaves it or is fenced (``maybeDeleteResolvedRegularExpressions``
  4287-4306); a deleted topic stays in a resolution until the next one
  ("cleaned up on the next refresh", 5826-5829) but is no longer assigned.

Events (the records Kafka would write, as :class:`~emulator.modern.messages.Emit`):
MEMBER_JOINED (reason ``new``, ``rejoin`` or ``static_replace``), MEMBER_REMOVED
(``leave``, ``session_timeout``, ``rebalance_timeout`` or ``static_replace``),
TARGET_ASSIGNMENT for each member whose target changed, and
GROUP_STATE_CHANGED whenever the state or the group epoch moves (reason
``join``, ``heartbeat``, ``leave``, ``static_leave``, ``session_timeout``,
``rebalance_timeout`` or ``regex_resolved``; a static member's -2 leave shows
only there). A resolution writes TOPIC_PATTERN_RESOLVED per regex (the
``ResolvedRegularExpression`` record): ``pattern``, ``topics``, ``broker`` (the
resolver), ``reason`` (why it ran: ``new_regex``, ``unresolved``,
``new_topics`` or ``periodic``), ``group_epoch`` after it, ``detail``
``version=<image> changed=<bool>``.

Emulator choices (not Kafka), each named where it applies:

* a member rejoining with epoch 0 under its existing member id is accepted
  (KAFKA-19233, merged 2026-01; the Oct 2024 trunk answered
  ``FENCED_MEMBER_EPOCH`` until the old member's session expired);
* the preferred server assignor breaks a tie between equally popular
  assignors by name (Kafka: ``HashMap`` order);
* member ids are Kafka-style base64 UUIDs drawn from the injected
  ``random.Random``;
* a request for another group is answered ``NOT_COORDINATOR``, and
  :meth:`set_unavailable` makes the coordinator answer every request with a
  coordinator error, to exercise rediscovery;
* the metadata image's version is a count of the images this coordinator
  saw (Kafka: the image's last contained offset), and a metadata change
  expires the subscription metadata of every group, not only of the groups
  subscribed to the changed topics (the outcome is the same: a group whose
  subscribed topics did not change keeps its epoch);
* the regex executor's delay (:attr:`ConsumerGroupCoordinator.regex_resolution_ms`,
  default 0: the next :meth:`poll`) stands for the executor thread's scan
  and the write operation that applies its result;
* a ``SubscribedTopicRegex`` sent to a coordinator before 4.0 (which has no
  v1) is answered ``UNSUPPORTED_VERSION``.
"""

from __future__ import annotations

import base64
import enum
import heapq
import math
import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Self

from emulator.events import EventKind, format_partitions, format_topics
from emulator.kafka_keys import DEFAULT_KAFKA_VERSION, kafka_version_at_least
from emulator.modern.assignors import (
    GroupSpec,
    MemberSpec,
    ServerAssignor,
    UniformAssignor,
    server_assignor,
)
from emulator.modern.config import (
    KIP848_REGEX_SINCE,
    REGEX_BATCH_REFRESH_MIN_INTERVAL_MS,
    REGEX_REMOVAL_BUMPS_SINCE,
    UNIFORM_STABLE_QUOTA_SINCE,
    GroupCoordinatorConfig,
)
from emulator.modern.coordinator import GroupCoordinator
from emulator.modern.errors import Errors
from emulator.modern.messages import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    Emit,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    GroupRequest,
    GroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    Subscription,
    TopicPartition,
)
from emulator.modern.placement import DEFAULT_OFFSETS_TOPIC_NUM_PARTITIONS, OFFSETS_TOPIC
from emulator.topic_regex import Re2jVersion, TopicRegexError, compile_pattern, re2j_version_for

Output = GroupResponse | Emit

# GroupCoordinatorConfig defaults (C6).
DEFAULT_SESSION_TIMEOUT_MS = 45000
DEFAULT_HEARTBEAT_INTERVAL_MS = 5000
DEFAULT_ASSIGNORS = ("uniform", "range")
DEFAULT_MAX_SIZE = 2**31 - 1
NO_PARTITION_EPOCH = -1
STATIC_PROTOCOL_SWITCH_SINCE = (4, 0)
"""KAFKA-17228 (K@trunk ed0e1086a97, in 4.0): a ``consumer``-protocol static member
replaces at once a classic member holding its instance id (online migration);
before, it got UNRELEASED_INSTANCE_ID until the classic member's session expired
(``getOrMaybeSubscribeStaticConsumerGroupMember``, GMM@3.9 2220-2260)."""
RELEASE_DEFAULT = -1
"""``regex_refresh_interval_ms`` = this: the Kafka release's own (600000 from 4.1, none before)."""


class GroupState(enum.StrEnum):
    """``ConsumerGroup.ConsumerGroupState`` (C3), as Kafka prints it."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"


class MemberState(enum.StrEnum):
    """``modern/MemberState``: where a member is in its reconciliation (C5)."""

    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class ClassicMemberMetadata:
    """``ConsumerGroupMemberMetadataValue.ClassicMemberMetadata``: a classic member of a
    consumer group (online migration, Kafka 3.8+; CG@3.9 ``ConsumerGroupMember``).

    Attributes:
        session_timeout_ms: the ``session.timeout.ms`` of its last JoinGroup; its
            session runs on it, not on ``group.consumer.session.timeout.ms``
            (K@3.8 11c85a93c3f).
        protocols: the (assignor name, subscription) pairs of its last JoinGroup.
    """

    session_timeout_ms: int
    protocols: tuple[tuple[str, Subscription], ...]

    @property
    def protocol_names(self) -> tuple[str, ...]:
        """Its assignors, in preference order."""
        return tuple(name for name, _ in self.protocols)


class ProtocolError(Exception):
    """A Kafka error raised while handling a request; becomes the response's error."""

    def __init__(self, error: Errors, message: str) -> None:
        super().__init__(message)
        self.error = error


@dataclass(frozen=True)
class GroupMember:
    """``ConsumerGroupMember``: what the coordinator knows of one member.

    Attributes:
        member_id: the id the coordinator generated.
        instance_id: ``group.instance.id`` of a static member, else None.
        rack_id: the member's rack, if any.
        member_epoch: the epoch the member is reconciled to (-2: a static
            member that left temporarily).
        previous_member_epoch: the epoch before the last change.
        state: the reconciliation state.
        rebalance_timeout_ms: how long it may take to revoke.
        subscribed_topic_names: its subscription by names.
        subscribed_topic_regex: its ``SubscribedTopicRegex`` (None: none; Kafka
            4.0+), resolved by the coordinator.
        server_assignor: the assignor it asked for, if any.
        assigned: partitions it is assigned (its current assignment).
        pending_revocation: partitions it must revoke before it moves on.
        classic: set for a member that speaks the classic protocol
            (JoinGroup/SyncGroup/Heartbeat) in this consumer group (online
            migration, :mod:`emulator.modern.mixed_group`); None for a
            ``consumer``-protocol member.
    """

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: frozenset[str] = frozenset()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    assigned: frozenset[TopicPartition] = frozenset()
    pending_revocation: frozenset[TopicPartition] = frozenset()
    classic: ClassicMemberMetadata | None = None

    @property
    def uses_classic_protocol(self) -> bool:
        """``useClassicProtocol``: the member joined with JoinGroup."""
        return self.classic is not None

    def is_reconciled_to(self, target_assignment_epoch: int) -> bool:
        """``isReconciledTo``: STABLE at the target assignment epoch."""
        return self.state is MemberState.STABLE and self.member_epoch == target_assignment_epoch

    def with_epoch(self, epoch: int) -> GroupMember:
        """``Builder.updateMemberEpoch``: the current epoch becomes the previous one."""
        return replace(self, member_epoch=epoch, previous_member_epoch=self.member_epoch)


# --------------------------------------------------------- CurrentAssignmentBuilder


def reconcile(
    member: GroupMember,
    *,
    target_epoch: int,
    target: frozenset[TopicPartition],
    partition_epoch: Callable[[TopicPartition], int],
    owned: frozenset[TopicPartition] | None,
    subscribed_topics: frozenset[str],
    has_subscription_changed: bool = False,
) -> GroupMember:
    """``CurrentAssignmentBuilder.build``: move ``member`` one step towards its target (C5).

    Args:
        member: the member before this heartbeat.
        target_epoch: the target assignment epoch.
        target: the member's target assignment.
        partition_epoch: the epoch of a partition's current owner, -1 when free.
        owned: the partitions the heartbeat reports as owned (None: not sent,
            which counts as still owning everything).
        subscribed_topics: the member's subscribed topics that exist.
        has_subscription_changed: the heartbeat changed the subscription.

    Returns:
        The member unchanged, or its next state.

    Raises:
        ProtocolError: ``FENCED_MEMBER_EPOCH`` for a member in state UNKNOWN
            that still reports partitions.
    """

    def owns_revoked(pending: frozenset[TopicPartition]) -> bool:
        return owned is None or not owned.isdisjoint(pending)

    def update_current() -> GroupMember:
        # updateCurrentAssignment: drop unsubscribed topics from the assignment.
        if not subscribed_topics and not member.pending_revocation:
            new_assigned: frozenset[TopicPartition] = frozenset()
            new_pending = member.assigned
        else:
            removed = frozenset(tp for tp in member.assigned if tp[0] not in subscribed_topics)
            if not removed:
                return member
            new_assigned = member.assigned - removed
            new_pending = member.pending_revocation | removed
        if new_assigned == member.assigned and new_pending == member.pending_revocation:
            return member
        if new_pending and owns_revoked(new_pending):
            return replace(
                member,
                state=MemberState.UNREVOKED_PARTITIONS,
                assigned=new_assigned,
                pending_revocation=new_pending,
            )
        return replace(member, assigned=new_assigned)

    def next_assignment(epoch: int) -> GroupMember:
        # computeNextAssignment, per partition rather than per topic.
        tgt = frozenset(tp for tp in target if tp[0] in subscribed_topics)
        assigned = member.assigned & tgt
        pending_revocation = member.assigned - assigned
        candidates = tgt - assigned
        unreleased = frozenset(
            tp
            for tp in candidates
            if partition_epoch(tp) != NO_PARTITION_EPOCH and tp not in member.pending_revocation
        )
        pending_assignment = candidates - unreleased
        if pending_revocation and owns_revoked(pending_revocation):
            return replace(
                member.with_epoch(epoch),
                state=MemberState.UNREVOKED_PARTITIONS,
                assigned=assigned,
                pending_revocation=pending_revocation,
            )
        state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        return replace(
            member.with_epoch(target_epoch),
            state=state,
            assigned=assigned | pending_assignment,
            pending_revocation=frozenset(),
        )

    if member.state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return next_assignment(member.member_epoch)
        if has_subscription_changed:
            return update_current()
        return member
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if owns_revoked(member.pending_revocation):
            return update_current() if has_subscription_changed else member
        # Do not move past the target epoch when a subscription change alone
        # caused the revocation.
        return next_assignment(min(member.member_epoch + 1, target_epoch))
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        return next_assignment(member.member_epoch)
    if owned is None or owned:
        raise ProtocolError(
            Errors.FENCED_MEMBER_EPOCH,
            "The consumer group member is in a unknown state. "
            "The member must abandon all its partitions and rejoin.",
        )
    return next_assignment(target_epoch)


# ---------------------------------------------------------------------- timers


@dataclass(order=True)
class _Timer:
    deadline: float
    seq: int
    kind: str = field(compare=False)  # "session" | "rebalance" | "join" | "sync"
    member_id: str = field(compare=False)
    epoch: int = field(compare=False, default=0)
    cancelled: bool = field(compare=False, default=False)


# --------------------------------------------------------------------- regexes


@dataclass(frozen=True)
class ResolvedRegex:
    """``ResolvedRegularExpression``: what one regex matched, in which image, and when.

    Attributes:
        topics: the topic names it matched (a full match, internal topics included).
        version: the metadata image it read (:meth:`ConsumerGroupCoordinator.update_topics`
            counts them).
        timestamp_ms: when the resolution started (the group's last refresh).
    """

    topics: frozenset[str]
    version: int
    timestamp_ms: float


@dataclass(frozen=True)
class _RegexTask:
    """The ``<group>-regex`` task in the coordinator's executor: scheduled, not yet applied."""

    due_ms: float
    started_ms: float
    regexes: frozenset[str]
    reason: str


# ------------------------------------------------------------------ coordinator


class ConsumerGroupCoordinator(GroupCoordinator):
    """The coordinator of one consumer-protocol group (one ``ConsumerGroup``).

    Args:
        group_id: ``group.id`` of the group it hosts.
        topics: partition count of every existing topic (the metadata image).
        rng: the seeded generator for member ids.
        node_id: the broker that hosts it, returned to FindCoordinator.
        session_timeout_ms: ``group.consumer.session.timeout.ms``.
        heartbeat_interval_ms: ``group.consumer.heartbeat.interval.ms``.
        assignors: ``group.consumer.assignors``; the first is the default.
        max_size: ``group.consumer.max.size``.
        assignor_lookup: finds a server assignor by name (default: the registry).
        assignment_interval_ms: ``group.consumer.assignment.interval.ms``
            (Kafka 4.3+): a heartbeat that finds the group epoch ahead of the
            target assignment runs the assignor only if this long has passed
            since it last ran; otherwise the group stays ASSIGNING and a later
            heartbeat runs it, so a burst of joins costs one assignment per
            interval instead of one per join. 0 = run it on every such
            heartbeat, as before 4.3.
        kafka_version: the broker's release: regexes from 4.0 (RE2/J 1.7;
            1.8 from 4.1), and from 4.1 a dropped regex bumps the group epoch.
        regex_refresh_interval_ms: ``group.consumer.regex.refresh.interval.ms``
            (None: no periodic refresh, as before 4.1; :data:`RELEASE_DEFAULT`:
            the release's own).
        internal_topics: partition counts of the internal topics
            (``__consumer_offsets``): part of the image a regex is matched
            against, not of the topics a name subscription sees changing.
        regex_resolution_ms: how long after the heartbeat that scheduled it
            the regex task's result is applied (an emulator knob; 0: the next
            :meth:`poll`).

    Attributes:
        group_epoch: the group epoch (0 until the first member joins).
        assignment_epoch: the epoch of the current target assignment.
        members: member id -> :class:`GroupMember`.
        target_assignment: member id -> its target partitions.
        partition_epochs: partition -> epoch of the member holding it (absent: free).
        subscription_metadata: partition count of every subscribed, existing topic.
        committed: the committed offsets (also :meth:`committed_offsets`).
        state: the :class:`GroupState` after the last input.
        resolved_regexes: regex -> its last resolution (``resolvedRegularExpressions``).
    """

    def __init__(
        self,
        group_id: str,
        *,
        topics: Mapping[str, int],
        rng: random.Random,
        node_id: int = 0,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_INTERVAL_MS,
        assignors: Iterable[str] = DEFAULT_ASSIGNORS,
        max_size: int = DEFAULT_MAX_SIZE,
        assignor_lookup: Callable[[str], ServerAssignor] | None = None,
        assignment_interval_ms: int = 0,
        kafka_version: str = DEFAULT_KAFKA_VERSION,
        regex_refresh_interval_ms: int | None = RELEASE_DEFAULT,
        internal_topics: Mapping[str, int] | None = None,
        regex_resolution_ms: float = 0.0,
    ) -> None:
        self.group_id = group_id
        self.assignment_interval_ms = assignment_interval_ms
        self.kafka_version = kafka_version
        self._re2j: Re2jVersion | None = (
            re2j_version_for(kafka_version)
            if kafka_version_at_least(kafka_version, KIP848_REGEX_SINCE)
            else None
        )
        self._regex_removal_bumps = kafka_version_at_least(kafka_version, REGEX_REMOVAL_BUMPS_SINCE)
        if regex_refresh_interval_ms == RELEASE_DEFAULT:
            regex_refresh_interval_ms = GroupCoordinatorConfig.for_version(
                kafka_version
            ).regex_refresh_interval_ms
        self.regex_refresh_interval_ms = regex_refresh_interval_ms
        self.regex_resolution_ms = regex_resolution_ms
        self._internal_topics: dict[str, int] = dict(internal_topics or {})
        # The metadata image's version, and the last one that created topics
        # (lastMetadataImageWithNewTopics, set to the first image's).
        self._image_version = 0
        self._last_image_with_new_topics = 0
        # Members per regex (subscribedRegularExpressions: no zero entries),
        # kept by _put_member and _remove_member.
        self._regex_subscribers: dict[str, int] = {}
        self.resolved_regexes: dict[str, ResolvedRegex] = {}
        # Resolutions per topic name (SubscriptionCount.byRegexCount).
        self._regex_topics: Counter[str] = Counter()
        self._regex_task: _RegexTask | None = None
        self._last_assignment_ms = -math.inf
        self.node_id = node_id
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.assignors = tuple(assignors)
        if not self.assignors:
            raise ValueError("group.consumer.assignors needs at least one assignor")
        self.max_size = max_size
        self._lookup = assignor_lookup if assignor_lookup is not None else server_assignor
        self._rng = rng
        self._topics: dict[str, int] = dict(topics)
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, GroupMember] = {}
        # Ids of the members not reconciled to assignment_epoch, so the group
        # state costs O(1) per request: kept exact by _put_member,
        # _remove_member and _update_target_assignment (the only writers of
        # members and assignment_epoch).
        self._unreconciled: set[str] = set()
        self.target_assignment: dict[str, frozenset[TopicPartition]] = {}
        self.partition_epochs: dict[TopicPartition, int] = {}
        self.subscription_metadata: dict[str, int] = {}
        # Members per subscribed topic name, kept by _put_member and
        # _remove_member (Kafka's ConsumerGroup.subscribedTopicNames), so the
        # subscription metadata costs O(topics), not O(members), per join.
        self._subscribers: Counter[str] = Counter()
        # Member id per static instance id (Kafka's ConsumerGroup.staticMembers),
        # kept by _put_member and _remove_member.
        self._static: dict[str, str] = {}
        self.committed: dict[TopicPartition, int] = {}
        self.state = GroupState.EMPTY
        self._metadata_expired = False
        self._unavailable: Errors | None = None
        self._timers: list[_Timer] = []
        self._timer_by_key: dict[tuple[str, str], _Timer] = {}
        self._timer_seq = 0
        self._now = 0.0
        self._emitted_state: tuple[GroupState, int] = (GroupState.EMPTY, 0)
        #: Online downgrade (set by :class:`emulator.modern.migration.MigratingGroupCoordinator`):
        #: whether ``group.consumer.migration.policy`` allows it, and ``group.max.size``.
        self.downgrade_enabled = False
        self.classic_max_size = DEFAULT_MAX_SIZE
        #: The fenced member whose leaving turns this group into a classic group,
        #: and why it was fenced; the caller converts the group and clears it.
        self.downgrade: tuple[GroupMember, str] | None = None

    @classmethod
    def from_config(
        cls,
        group_id: str,
        config: GroupCoordinatorConfig,
        *,
        topics: Mapping[str, int],
        rng: random.Random,
        node_id: int = 0,
        assignor_lookup: Callable[[str], ServerAssignor] | None = None,
        internal_topics: Mapping[str, int] | None = None,
    ) -> Self:
        """A coordinator with the broker's ``group.consumer.*`` settings.

        Args:
            group_id: the group.
            config: the broker's group-coordinator settings (and release).
            topics: partition count of every existing topic.
            rng: the seeded generator for member ids.
            node_id: the hosting broker.
            assignor_lookup: finds a server assignor by name (default: the registry).
            internal_topics: partition counts of the internal topics.
        """
        return cls(
            group_id,
            topics=topics,
            rng=rng,
            node_id=node_id,
            session_timeout_ms=config.group_consumer_session_timeout_ms,
            heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
            assignors=config.group_consumer_assignors,
            max_size=config.group_consumer_max_size,
            assignor_lookup=assignor_lookup,
            assignment_interval_ms=config.group_consumer_assignment_interval_ms,
            kafka_version=config.kafka_version,
            regex_refresh_interval_ms=config.regex_refresh_interval_ms,
            internal_topics=internal_topics,
        )

    # ------------------------------------------------------------------ inputs

    def handle(
        self, now_ms: float, request: GroupRequest, *, client_id: str = "consumer"
    ) -> list[Output]:
        """Handle one request; the first output is its response.

        Args:
            now_ms: emulated time in ms.
            request: a FindCoordinator, ConsumerGroupHeartbeat, OffsetCommit
                or OffsetFetch request.
            client_id: the request header's ``client.id``; unused (a KIP-848
                member chooses its own member id).

        Returns:
            The response, then the events of the state changes it caused.

        Raises:
            TypeError: a request kind this coordinator does not serve.
        """
        del client_id
        self._now = now_ms
        out: list[Output] = []
        if isinstance(request, FindCoordinatorRequest):
            return [FindCoordinatorResponse(request.corr, node_id=self.node_id)]
        if request.group_id != self.group_id:
            return [self._error_response(request, Errors.NOT_COORDINATOR, "wrong group")]
        if self._unavailable is not None:
            return [self._error_response(request, self._unavailable, "coordinator unavailable")]
        try:
            response = self._serve(request, out)
        except ProtocolError as exc:
            response = self._error_response(request, exc.error, str(exc))
        out.extend(self._state_events(self._cause(request)))
        return [response, *out]

    def _serve(self, request: GroupRequest, out: list[Output]) -> GroupResponse:
        """The response to one request of this group (events go to ``out``).

        Raises:
            ProtocolError: the request fails with a Kafka error.
            TypeError: a request kind this coordinator does not serve.
        """
        if isinstance(request, ConsumerGroupHeartbeatRequest):
            return self._heartbeat(request, out)
        if isinstance(request, OffsetCommitRequest):
            return self._offset_commit(request)
        if isinstance(request, OffsetFetchRequest):
            return self._offset_fetch(request)
        raise TypeError(f"the consumer group coordinator does not serve {request!r}")

    @classmethod
    def _cause(cls, request: GroupRequest) -> str:
        """What a request does to the group, as the reason of a state change."""
        if not isinstance(request, ConsumerGroupHeartbeatRequest):
            return "offsets"
        return {
            JOIN_GROUP_MEMBER_EPOCH: "join",
            LEAVE_GROUP_MEMBER_EPOCH: "leave",
            LEAVE_GROUP_STATIC_MEMBER_EPOCH: "static_leave",
        }.get(request.member_epoch, "heartbeat")

    def poll(self, now_ms: float) -> list[Output]:
        """Fire every timer due at ``now_ms`` (session and rebalance timeouts), then
        apply the regex task's result if it is due."""
        self._now = now_ms
        out: list[Output] = []
        while self._timers and self._timers[0].deadline <= now_ms:
            timer = heapq.heappop(self._timers)
            if timer.cancelled:
                continue
            self._timer_by_key.pop((timer.kind, timer.member_id), None)
            member = self.members.get(timer.member_id)
            if member is None:
                continue
            if timer.kind != "rebalance" or member.member_epoch == timer.epoch:
                self._fence(member, timer.kind + "_timeout", out)
            out.extend(self._state_events(timer.kind + "_timeout"))
            if self.downgrade is not None:
                return out  # the group becomes a classic group: its timers are over
        task = self._regex_task
        if task is not None and task.due_ms <= now_ms:
            self._regex_task = None
            self._apply_regex_task(task, out)
            out.extend(self._state_events("regex_resolved"))
        return out

    def next_deadline(self) -> float | None:
        """When :meth:`poll` next has work, if ever."""
        while self._timers and self._timers[0].cancelled:
            heapq.heappop(self._timers)
        deadline = self._timers[0].deadline if self._timers else None
        task = self._regex_task
        if task is not None and (deadline is None or task.due_ms < deadline):
            return task.due_ms
        return deadline

    def update_topics(self, now_ms: float, topics: Mapping[str, int]) -> None:
        """A new metadata image (``onNewMetadataImage``, CK@4.1 5815-5856).

        The next heartbeat recomputes the subscription metadata
        (``requestMetadataRefresh``): a subscribed topic created, grown or
        deleted bumps the group epoch then. A created topic also arms a regex
        resolution (``lastMetadataImageWithNewTopics``); a deleted one does not.
        """
        self._now = now_ms
        self._image_version += 1
        if any(t not in self._topics for t in topics):
            self._last_image_with_new_topics = self._image_version
        self._topics = dict(topics)
        self._metadata_expired = True

    @property
    def regex_task_due(self) -> float | None:
        """When the scheduled regex resolution's result is applied (None: none scheduled)."""
        return None if self._regex_task is None else self._regex_task.due_ms

    def delete_offsets(self, now_ms: float, partitions: Iterable[TopicPartition]) -> None:
        """Deleted partitions: their offsets are tombstoned.

        CK@4.1 ``OffsetMetadataManager.onPartitionsDeleted`` (1063-1099), called
        through ``GroupCoordinatorService.onPartitionsDeleted`` (2115-2129).
        """
        self._now = now_ms
        for tp in partitions:
            self.committed.pop(tp, None)

    def set_unavailable(self, error: Errors | None) -> None:
        """Answer every group request with ``error`` (e.g. NOT_COORDINATOR), or stop doing so."""
        if error is not None and error not in (
            Errors.NOT_COORDINATOR,
            Errors.COORDINATOR_NOT_AVAILABLE,
            Errors.COORDINATOR_LOAD_IN_PROGRESS,
        ):
            raise ValueError(f"{error.name} is not a coordinator error")
        self._unavailable = error

    def committed_offsets(self) -> dict[TopicPartition, int]:
        """The committed offsets (``__consumer_offsets`` of this group).

        A method, as :meth:`ClassicGroupCoordinator.committed_offsets`: the
        broker's replica fetch of ``__consumer_offsets`` calls it on either.
        """
        return dict(self.committed)

    def validate_online_downgrade(self, fenced: GroupMember) -> bool:
        """``validateOnlineDowngrade`` (GMM@3.9 1021-1046): may fencing ``fenced`` turn
        this group into a classic group?

        Only when ``fenced`` is the last ``consumer``-protocol member
        (``allMembersUseClassicProtocolExcept``), at least one member stays, the
        migration policy allows a downgrade, and the members left fit in
        ``group.max.size``.
        """
        if not self.downgrade_enabled or fenced.uses_classic_protocol or len(self.members) <= 1:
            return False
        if any(
            not m.uses_classic_protocol
            for mid, m in self.members.items()
            if mid != fenced.member_id
        ):
            return False
        return len(self.members) - 1 <= self.classic_max_size

    def member_by_instance(self, instance_id: str) -> GroupMember | None:
        """The static member holding ``instance_id``, if any."""
        member_id = self._static.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    # --------------------------------------------------------------- heartbeat

    def _heartbeat(
        self, req: ConsumerGroupHeartbeatRequest, out: list[Output]
    ) -> ConsumerGroupHeartbeatResponse:
        self._validate(req)
        if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(req, out)
        create = req.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        owned = None if req.topic_partitions is None else frozenset(req.topic_partitions)
        if len(self.members) >= self.max_size and (
            not req.member_id or req.member_id not in self.members
        ):
            raise ProtocolError(
                Errors.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {self.max_size} members.",
            )
        member_id = req.member_id or self._new_member_id()
        regex_in = req.subscribed_topic_regex
        if regex_in and regex_in not in self._regex_subscribers:
            # A regex new to the group must compile (throwIfRegularExpressionIsInvalid,
            # reached only for such a regex). Checked before the member is looked up
            # (Kafka: after), so that a static replacement is never half done; a
            # request with an invalid new regex and a bad epoch gets this error first.
            self._throw_if_regex_invalid(regex_in)
        if req.instance_id is None:
            member, joined = self._dynamic_member(member_id, req.member_epoch, owned, create)
        else:
            member, joined = self._static_member(
                member_id, req.member_epoch, req.instance_id, owned, create, out
            )
        if joined is not None:
            out.append(self._emit(EventKind.MEMBER_JOINED, member_id=member_id, reason=joined))

        # 1. Update the member; bump the group epoch on a subscription change.
        instance_id = req.instance_id if req.instance_id is not None else member.instance_id
        rack_id = req.rack_id if req.rack_id is not None else member.rack_id
        rebalance_timeout_ms = member.rebalance_timeout_ms
        if req.rebalance_timeout_ms != -1:
            rebalance_timeout_ms = req.rebalance_timeout_ms
        server_assignor = (
            req.server_assignor if req.server_assignor is not None else member.server_assignor
        )
        subscribed = (
            frozenset(req.subscribed_topic_names)
            if req.subscribed_topic_names is not None
            else member.subscribed_topic_names
        )
        # "" removes the regex (stored as None, subscribedTopicRegexOrNull).
        regex = (regex_in or None) if regex_in is not None else member.subscribed_topic_regex
        unchanged = (
            joined is None
            and instance_id == member.instance_id
            and rack_id == member.rack_id
            and rebalance_timeout_ms == member.rebalance_timeout_ms
            and server_assignor == member.server_assignor
            and subscribed == member.subscribed_topic_names
            and regex == member.subscribed_topic_regex
        )
        # A plain heartbeat (the client sends only what changed) leaves the
        # member as it is: no copy, and its partition epochs stay put.
        updated = (
            member
            if unchanged
            else replace(
                member,
                instance_id=instance_id,
                rack_id=rack_id,
                rebalance_timeout_ms=rebalance_timeout_ms,
                server_assignor=server_assignor,
                subscribed_topic_names=subscribed,
                subscribed_topic_regex=regex,
            )
        )
        updated = self._subscribe_and_reconcile(member, updated, owned, out)
        self._schedule("session", updated.member_id, self.session_timeout_ms)

        full = req.member_epoch == JOIN_GROUP_MEMBER_EPOCH or (
            req.rebalance_timeout_ms != -1
            and req.subscribed_topic_names is not None
            and req.topic_partitions is not None
        )
        assignment = None
        if full or updated.assigned != member.assigned:
            assignment = tuple(sorted(updated.assigned))
        return ConsumerGroupHeartbeatResponse(
            req.corr,
            member_id=updated.member_id,
            member_epoch=updated.member_epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            assignment=assignment,
        )

    def _subscribe_and_reconcile(
        self,
        member: GroupMember,
        updated: GroupMember,
        owned: frozenset[TopicPartition] | None,
        out: list[Output],
    ) -> GroupMember:
        """What ``consumerGroupHeartbeat`` and ``classicGroupJoinToConsumerGroup`` do once
        the member is found and its request applied (``updated``): bump the group epoch
        on a subscription change, recompute the target assignment if due, and reconcile
        this member against the partitions it reports as ``owned``.

        Returns:
            The member as it is now in the group.
        """
        # 1. A subscription change bumps the group epoch.
        subscription_changed = updated.subscribed_topic_names != member.subscribed_topic_names
        bump = self.group_epoch == 0 or subscription_changed
        if updated.subscribed_topic_regex != member.subscribed_topic_regex or (
            self._regex_subscribers
        ):
            bump = self._maybe_update_regexes(member, updated) or bump
        group_epoch = self.group_epoch
        if bump or self._metadata_expired:
            metadata = self._subscription_metadata(replacing=(member.member_id, updated))
            if metadata != self.subscription_metadata:
                bump = True
                self.subscription_metadata = metadata
            self._metadata_expired = False
            if bump:
                group_epoch += 1
                self.group_epoch = group_epoch
        # The member joins the group (with its new subscription) before the
        # target assignment is computed, as Kafka's records are replayed.
        if updated is not member or self.members.get(member.member_id) is not member:
            self._put_member(updated)

        # 2. Recompute the target assignment of the whole group if needed (at
        # most once per group.consumer.assignment.interval.ms).
        if (
            group_epoch > self.assignment_epoch
            and self._now - self._last_assignment_ms >= self.assignment_interval_ms
        ):
            self._update_target_assignment(group_epoch, out)
        target = self.target_assignment.get(updated.member_id, frozenset())

        # 3. Reconcile this member only.
        before_reconcile = updated
        if not updated.is_reconciled_to(self.assignment_epoch) or subscription_changed:
            updated = reconcile(
                updated,
                target_epoch=self.assignment_epoch,
                target=target,
                partition_epoch=self._partition_epoch,
                owned=owned,
                subscribed_topics=frozenset(
                    t for t in self._member_topics(updated) if self._exists(t)
                ),
                has_subscription_changed=subscription_changed,
            )
            if updated != before_reconcile:
                self._put_member(updated)
                if updated.state is MemberState.UNREVOKED_PARTITIONS and not updated.classic:
                    self._schedule(
                        "rebalance",
                        updated.member_id,
                        updated.rebalance_timeout_ms,
                        epoch=updated.member_epoch,
                    )
                else:
                    self._cancel("rebalance", updated.member_id)
        return updated

    def _validate(self, req: ConsumerGroupHeartbeatRequest) -> None:
        """``throwIfConsumerGroupHeartbeatRequestIsInvalid`` (v0: server-side member ids).

        From 4.0 (CK@4.1 ``GroupCoordinatorService`` 406-442) a joining member may
        send an empty list of names, or a regex instead of names.
        """

        def invalid(message: str) -> ProtocolError:
            return ProtocolError(Errors.INVALID_REQUEST, message)

        if (req.member_epoch > 0 or req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH) and (
            not req.member_id.strip()
        ):
            raise invalid("MemberId can't be empty.")
        if not req.group_id.strip():
            raise invalid("GroupId can't be empty.")
        if req.instance_id is not None and not req.instance_id.strip():
            raise invalid("InstanceId can't be empty.")
        if req.rack_id is not None and not req.rack_id.strip():
            raise invalid("RackId can't be empty.")
        if req.subscribed_topic_regex is not None and self._re2j is None:
            raise ProtocolError(
                Errors.UNSUPPORTED_VERSION,
                "SubscribedTopicRegex needs ConsumerGroupHeartbeat v1 (Kafka 4.0+); "
                f"this broker is Kafka {self.kafka_version}.",
            )
        if req.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
            if req.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if req.topic_partitions is None or req.topic_partitions:
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if self._re2j is None:
                if not req.subscribed_topic_names:
                    raise invalid("SubscribedTopicNames must be set in first request.")
            elif req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                # 4.0+ (GroupCoordinatorService 428-433): an empty list or regex is accepted.
                raise invalid(
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null "
                    "when (re-)joining."
                )
        elif req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if req.instance_id is None:
                raise invalid("InstanceId can't be null.")
        elif req.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise invalid("MemberEpoch is invalid.")
        if req.server_assignor is not None and req.server_assignor not in self.assignors:
            raise ProtocolError(
                Errors.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {req.server_assignor} is not supported. "
                f"Supported assignors: {', '.join(self.assignors)}.",
            )

    def _dynamic_member(
        self,
        member_id: str,
        epoch: int,
        owned: frozenset[TopicPartition] | None,
        create: bool,
    ) -> tuple[GroupMember, str | None]:
        """``getOrMaybeSubscribeDynamicConsumerGroupMember``.

        Returns:
            The member, and why it joins (``new``, ``rejoin``) or None.
        """
        member = self.members.get(member_id)
        if member is None:
            if not create:
                self._known_member(member_id)  # raises UNKNOWN_MEMBER_ID
            return GroupMember(member_id), "new"
        self._check_epoch(member, epoch, owned)
        return member, "rejoin" if create else None

    def _static_member(
        self,
        member_id: str,
        epoch: int,
        instance_id: str,
        owned: frozenset[TopicPartition] | None,
        create: bool,
        out: list[Output],
    ) -> tuple[GroupMember, str | None]:
        """``getOrMaybeSubscribeStaticConsumerGroupMember``.

        Returns:
            The member, and why it joins (``new``, ``rejoin``) or None (a
            replacement records its own events).
        """
        existing = self.member_by_instance(instance_id)
        if create:
            if existing is None:
                member = self.members.get(member_id)
                if member is not None:  # getOrMaybeCreateMember returns it as is
                    return member, "rejoin"
                return GroupMember(member_id, instance_id=instance_id), "new"
            switching = existing.uses_classic_protocol and kafka_version_at_least(
                self.kafka_version, STATIC_PROTOCOL_SWITCH_SINCE
            )
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH and not switching:
                raise ProtocolError(
                    Errors.UNRELEASED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {instance_id} cannot join the "
                    f"group because the instance id is owned by {existing.member_id} member.",
                )
            # Replace the member that left temporarily (or, from 4.0, the classic
            # member this one was before it switched protocol).
            return self._replace_static(existing, member_id, None, out), None
        existing = self._static_holder(member_id, instance_id)
        self._check_epoch(existing, epoch, owned)
        return existing, None

    def _replace_static(
        self,
        existing: GroupMember,
        member_id: str,
        classic: ClassicMemberMetadata | None,
        out: list[Output],
        **joined: object,
    ) -> GroupMember:
        """``replaceMember``: ``existing``'s state, assignment and target under
        ``member_id`` at epoch 0, speaking the protocol ``classic`` says (None: ``consumer``);
        ``joined``: more fields of its MEMBER_JOINED event."""
        instance_id = existing.instance_id
        new = replace(
            existing, member_id=member_id, member_epoch=0, previous_member_epoch=0, classic=classic
        )
        self._remove_member(existing)
        target = self.target_assignment.pop(existing.member_id, None)
        if target is not None:
            self.target_assignment[member_id] = target
        self._put_member(new)
        out.append(
            self._emit(
                EventKind.MEMBER_REMOVED,
                member_id=existing.member_id,
                reason="static_replace",
                detail=f"instance_id={instance_id} replaced_by={member_id}",
            )
        )
        out.append(
            self._emit(
                EventKind.MEMBER_JOINED,
                member_id=member_id,
                reason="static_replace",
                **joined,
                detail=f"instance_id={instance_id} replaces={existing.member_id}",
            )
        )
        return new

    def _static_holder(self, member_id: str, instance_id: str) -> GroupMember:
        """``throwIfStaticMemberIsUnknown`` and ``throwIfInstanceIdIsFenced``: the member
        holding ``instance_id``, which must be ``member_id``."""
        existing = self.member_by_instance(instance_id)
        if existing is None:
            raise ProtocolError(Errors.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            raise ProtocolError(
                Errors.FENCED_INSTANCE_ID,
                f"Static member {member_id} with instance id {instance_id} was fenced by "
                f"member {existing.member_id}.",
            )
        return existing

    def _known_member(self, member_id: str) -> GroupMember:
        """The member ``member_id`` (UNKNOWN_MEMBER_ID when the group has none)."""
        member = self.members.get(member_id)
        if member is None:
            raise ProtocolError(
                Errors.UNKNOWN_MEMBER_ID,
                f"Member {member_id} is not a member of group {self.group_id}.",
            )
        return member

    @staticmethod
    def _check_epoch(
        member: GroupMember, received: int, owned: frozenset[TopicPartition] | None
    ) -> None:
        """``throwIfConsumerGroupMemberEpochIsInvalid`` (with the KAFKA-19233 rejoin)."""
        if received == JOIN_GROUP_MEMBER_EPOCH:
            return
        if received > member.member_epoch:
            raise ProtocolError(
                Errors.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a greater member epoch ({received}) than the "
                f"one known by the group coordinator ({member.member_epoch}). "
                "The member must abandon all its partitions and rejoin.",
            )
        if received < member.member_epoch and (
            received != member.previous_member_epoch
            or owned is None
            or not owned <= member.assigned
        ):
            raise ProtocolError(
                Errors.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a smaller member epoch ({received}) than the "
                f"one known by the group coordinator ({member.member_epoch}). "
                "The member must abandon all its partitions and rejoin.",
            )

    def _leave(
        self, req: ConsumerGroupHeartbeatRequest, out: list[Output]
    ) -> ConsumerGroupHeartbeatResponse:
        """``consumerGroupLeave``: -1 fences the member; -2 parks a static member."""
        if req.instance_id is None:
            self._fence(self._known_member(req.member_id), "leave", out)
        else:
            member = self._static_holder(req.member_id, req.instance_id)
            if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # consumerGroupStaticMemberGroupLeave: keep it (and its
                # partitions) at epoch -2 until its session expires.
                # Not removed: GROUP_STATE_CHANGED (reason static_leave) records it.
                self._put_member(
                    replace(
                        member,
                        member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                        pending_revocation=frozenset(),
                    )
                )
            else:
                self._fence(member, "leave", out)
        return ConsumerGroupHeartbeatResponse(
            req.corr, member_id=req.member_id, member_epoch=req.member_epoch
        )

    # ---------------------------------------------------------------- offsets

    def _offset_commit(self, req: OffsetCommitRequest) -> OffsetCommitResponse:
        """``OffsetMetadataManager.commitOffset`` with ``ConsumerGroup.validateOffsetCommit``."""
        epoch = req.generation_id_or_member_epoch
        if not (epoch < 0 and not self.members):
            self._validate_member_epoch(self._known_member(req.member_id), epoch)
        for tp, offset in sorted(req.offsets.items()):
            self.committed[tp] = offset
        return OffsetCommitResponse(
            req.corr,
            partition_errors={tp: Errors.NONE for tp in req.offsets},
            accepted_ms=self._now,
        )

    def _offset_fetch(self, req: OffsetFetchRequest) -> OffsetFetchResponse:
        """``OffsetMetadataManager.fetchOffsets`` with ``ConsumerGroup.validateOffsetFetch``."""
        epoch = -1 if req.member_epoch is None else req.member_epoch
        if not (req.member_id is None and epoch < 0):
            member = self.members.get(req.member_id or "")
            if member is None:
                raise ProtocolError(
                    Errors.UNKNOWN_MEMBER_ID,
                    f"Member {req.member_id} is not a member of group {self.group_id}.",
                )
            self._validate_member_epoch(member, epoch)
        wanted = req.partitions or tuple(sorted(self.committed))
        return OffsetFetchResponse(req.corr, offsets={tp: self.committed.get(tp) for tp in wanted})

    @staticmethod
    def _validate_member_epoch(member: GroupMember, epoch: int) -> None:
        """``ConsumerGroup.validateMemberEpoch``: a classic member's generation must be its
        member epoch (ILLEGAL_GENERATION), a ``consumer`` member's epoch too
        (STALE_MEMBER_EPOCH). CG@3.9 531-545."""
        if epoch == member.member_epoch:
            return
        if member.uses_classic_protocol:
            raise ProtocolError(
                Errors.ILLEGAL_GENERATION,
                f"The received generation id {epoch} does not match the expected member "
                f"epoch {member.member_epoch}.",
            )
        raise ProtocolError(
            Errors.STALE_MEMBER_EPOCH,
            f"The received member epoch {epoch} does not match the expected member "
            f"epoch {member.member_epoch}.",
        )

    # ----------------------------------------------------------------- regexes

    def _throw_if_regex_invalid(self, regex: str) -> None:
        """``Utils.throwIfRegularExpressionIsInvalid`` (CK@4.1 337-347): RE2/J must compile it."""
        assert self._re2j is not None  # _validate refused a regex before 4.0
        try:
            compile_pattern(regex, "re2j", re2j_version=self._re2j)
        except TopicRegexError as err:
            raise ProtocolError(
                Errors.INVALID_REGULAR_EXPRESSION,
                f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {err.reason}.",
            ) from None

    def _count_regex(self, regex: str, delta: int) -> None:
        """``subscribedRegularExpressions`` with ``incValue``/``decValue`` (no zero entries)."""
        n = self._regex_subscribers.get(regex, 0) + delta
        if n > 0:
            self._regex_subscribers[regex] = n
        else:
            self._regex_subscribers.pop(regex, None)

    def _drop_resolution(self, regex: str) -> None:
        """The regex's tombstone: its resolution goes, and its topics' regex counts."""
        old = self.resolved_regexes.pop(regex, None)
        if old is not None:
            self._regex_topics.subtract(old.topics)
            self._regex_topics = +self._regex_topics

    def _set_resolution(self, regex: str, resolved: ResolvedRegex) -> None:
        """``ConsumerGroup.updateResolvedRegularExpression``."""
        self._drop_resolution(regex)
        self.resolved_regexes[regex] = resolved
        self._regex_topics.update(resolved.topics)

    def _last_regex_refresh_ms(self) -> float:
        """``lastResolvedRegularExpressionRefreshTimeMs`` (``Long.MIN_VALUE`` when none).

        The regexes are always resolved together, so any one's timestamp is the
        group's (CK@4.1 ``ConsumerGroup`` 492-504).
        """
        if not self.resolved_regexes:
            return -math.inf
        return min(r.timestamp_ms for r in self.resolved_regexes.values())

    def _last_regex_version(self) -> int:
        """``lastResolvedRegularExpressionVersion`` (0 when none)."""
        if not self.resolved_regexes:
            return 0
        return min(r.version for r in self.resolved_regexes.values())

    def _member_topics(self, member: GroupMember) -> frozenset[str]:
        """A member's subscription: its names and its regex's resolved topics (if resolved)."""
        regex = member.subscribed_topic_regex
        resolved = None if regex is None else self.resolved_regexes.get(regex)
        if resolved is None:
            return member.subscribed_topic_names
        return member.subscribed_topic_names | resolved.topics

    def _exists(self, topic: str) -> bool:
        return topic in self._topics or topic in self._internal_topics

    def _partition_count(self, topic: str) -> int:
        count = self._topics.get(topic)
        return self._internal_topics[topic] if count is None else count

    def _maybe_update_regexes(self, member: GroupMember, updated: GroupMember) -> bool:
        """``maybeUpdateRegularExpressions`` (CK@4.1 3131-3230; CK@4.0 2385-2478).

        Called on every heartbeat of a group that has regexes or of a member
        that changes its own, before the member's update is applied (the
        counts are the group's before it). May schedule the ``<group>-regex``
        task (:meth:`poll` applies its result).

        Returns:
            Whether the group epoch must be bumped now (a regex that other
            members already resolved, or, from 4.1, a regex dropped).
        """
        old = member.subscribed_topic_regex
        new = updated.subscribed_topic_regex
        bump = False
        require = False
        tombstone: str | None = None
        if old != new:
            if old is not None and self._regex_subscribers.get(old, 0) == 1:
                tombstone = old  # its last member leaves it
            if new is not None:
                if new not in self._regex_subscribers:
                    require = True  # compiled in _heartbeat already
                else:
                    bump = new in self.resolved_regexes
            elif old is not None and self._regex_removal_bumps:
                bump = True
        self._maybe_schedule_regex_task(old, new, require)
        if tombstone is not None:
            self._drop_resolution(tombstone)
        return bump

    def _maybe_schedule_regex_task(self, old: str | None, new: str | None, new_regex: bool) -> None:
        """The refresh conditions of ``maybeUpdateRegularExpressions``; all must hold.

        The group has regexes (the member's new one included); no task is
        scheduled; the last resolution is more than 10 s old; and a regex is
        unresolved, or topics were created since the image the last resolution
        read, or (4.1) the last one is older than the refresh interval.
        """
        if not new_regex and not self._regex_subscribers:
            return
        if self._regex_task is not None:  # executor.isScheduled(groupId + "-regex")
            return
        last = self._last_regex_refresh_ms()
        if self._now <= last + REGEX_BATCH_REFRESH_MIN_INTERVAL_MS:
            return
        after = dict(self._regex_subscribers)
        if old is not None and old != new:
            after[old] = after.get(old, 0) - 1
            if after[old] <= 0:
                del after[old]
        if new is not None and new != old:
            after[new] = after.get(new, 0) + 1
        if not after:
            return
        unresolved = len(after) != len(self.resolved_regexes)
        new_topics = self._last_regex_version() < self._last_image_with_new_topics
        interval = self.regex_refresh_interval_ms
        periodic = interval is not None and self._now > last + interval
        if not (new_regex or unresolved or new_topics or periodic):
            return
        reason = (
            "new_regex"
            if new_regex
            else "unresolved"
            if unresolved
            else "new_topics"
            if new_topics
            else "periodic"
        )
        self._regex_task = _RegexTask(
            due_ms=self._now + self.regex_resolution_ms,
            started_ms=self._now,
            regexes=frozenset(after),
            reason=reason,
        )

    def _apply_regex_task(self, task: _RegexTask, out: list[Output]) -> None:
        """``refreshRegularExpressions`` then ``handleRegularExpressionsResult``.

        The resolution (CK@4.1 3249-3304) matches every topic name of the
        current image, internal topics included, in full with RE2/J; a regex
        that does not compile resolves to nothing (Kafka logs and ignores it).
        The result (3354-3439; CK@4.0 2602-2685) skips the regexes nobody has
        any more, and bumps the group epoch when a regex's topics or the
        subscription metadata changed; the metadata refresh is then done
        (``setMetadataRefreshDeadline``).
        """
        assert self._re2j is not None
        names = sorted({*self._topics, *self._internal_topics})
        version = self._image_version
        bump = False
        resolved: list[tuple[str, frozenset[str], bool]] = []
        for regex in sorted(task.regexes):
            try:
                matcher = compile_pattern(regex, "re2j", re2j_version=self._re2j)
                topics = frozenset(t for t in names if matcher.matches(t))
            except TopicRegexError:
                topics = frozenset()
            if regex not in self._regex_subscribers:
                continue
            previous = self.resolved_regexes.get(regex)
            changed = (frozenset() if previous is None else previous.topics) != topics
            bump = bump or changed
            self._set_resolution(regex, ResolvedRegex(topics, version, task.started_ms))
            resolved.append((regex, topics, changed))
        metadata = self._subscription_metadata()
        if metadata != self.subscription_metadata:
            bump = True
            self.subscription_metadata = metadata
        if bump:
            self.group_epoch += 1
            self._metadata_expired = False
        for regex, topics, changed in resolved:
            out.append(
                self._emit(
                    EventKind.TOPIC_PATTERN_RESOLVED,
                    pattern=regex,
                    topics=format_topics(topics),
                    count=len(topics),
                    broker=self.node_id,
                    group_epoch=self.group_epoch,
                    reason=task.reason,
                    duration_ms=self._now - task.started_ms,
                    detail=f"version={version} changed={str(changed).lower()}",
                )
            )

    # ------------------------------------------------------------- group state

    def _new_member_id(self) -> str:
        """``Uuid.randomUuid().toString()``: 16 random bytes, URL-safe base64, no padding."""
        raw = self._rng.getrandbits(128).to_bytes(16, "big")
        return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")

    def _partition_epoch(self, tp: TopicPartition) -> int:
        return self.partition_epochs.get(tp, NO_PARTITION_EPOCH)

    def _put_member(self, new: GroupMember) -> None:
        """``ConsumerGroup.updateMember``, keeping the partition epochs consistent."""
        old = self.members.get(new.member_id)
        if old is not None:
            self._remove_partition_epochs(old)
            self._subscribers.subtract(old.subscribed_topic_names)
            if old.instance_id is not None and old.instance_id != new.instance_id:
                self._drop_static(old)
            if old.subscribed_topic_regex is not None:
                self._count_regex(old.subscribed_topic_regex, -1)
        if new.instance_id is not None:
            self._static[new.instance_id] = new.member_id
        self._subscribers.update(new.subscribed_topic_names)
        if new.subscribed_topic_regex is not None:
            self._count_regex(new.subscribed_topic_regex, +1)
        for tp in new.assigned | new.pending_revocation:
            prev = self.partition_epochs.get(tp)
            if prev is not None:
                raise AssertionError(
                    f"Cannot set the epoch of {tp} to {new.member_epoch} because the partition "
                    f"is still owned at epoch {prev}"
                )
            self.partition_epochs[tp] = new.member_epoch
        self.members[new.member_id] = new
        if new.is_reconciled_to(self.assignment_epoch):
            self._unreconciled.discard(new.member_id)
        else:
            self._unreconciled.add(new.member_id)

    def _remove_partition_epochs(self, old: GroupMember) -> None:
        for tp in old.assigned | old.pending_revocation:
            prev = self.partition_epochs.pop(tp, None)
            if prev != old.member_epoch:
                raise AssertionError(
                    f"Cannot remove the epoch {old.member_epoch} from {tp} because the "
                    f"partition is still owned at a different epoch {prev}"
                )

    def _drop_static(self, member: GroupMember) -> None:
        if member.instance_id is not None and self._static.get(member.instance_id) == (
            member.member_id
        ):
            del self._static[member.instance_id]

    def _remove_member(self, member: GroupMember) -> None:
        """Drop the member, its partition epochs and its timers (no epoch bump)."""
        self._remove_partition_epochs(member)
        del self.members[member.member_id]
        self._subscribers.subtract(member.subscribed_topic_names)
        if member.subscribed_topic_regex is not None:
            self._count_regex(member.subscribed_topic_regex, -1)
        self._drop_static(member)
        self._unreconciled.discard(member.member_id)
        for kind in ("session", "rebalance", "join", "sync"):
            self._cancel(kind, member.member_id)

    def _fence(self, member: GroupMember, reason: str, out: list[Output]) -> None:
        """``consumerGroupFenceMember``: remove the member and bump the group epoch.

        Its regex loses its resolution if no other member has it
        (``maybeDeleteResolvedRegularExpressions``, CK@4.1 4287-4306).

        When the member is the last ``consumer``-protocol member of a group whose
        other members are classic and :meth:`validate_online_downgrade` passes,
        the group is not changed here: :attr:`downgrade` records the member and
        why, and the caller (:class:`emulator.modern.migration.MigratingGroupCoordinator`)
        converts the group to a classic group without it (``convertToClassicGroup``).
        """
        if self.validate_online_downgrade(member):
            self.downgrade = (member, reason)
            return
        self._remove_member(member)
        regex = member.subscribed_topic_regex
        if regex is not None and regex not in self._regex_subscribers:
            self._drop_resolution(regex)
        self.target_assignment.pop(member.member_id, None)
        self.subscription_metadata = self._subscription_metadata()
        self.group_epoch += 1
        out.append(self.removal_event(member, reason))

    def removal_event(self, member: GroupMember, reason: str) -> Emit:
        """MEMBER_REMOVED of ``member``: why, its epoch, and what it held."""
        return self._emit(
            EventKind.MEMBER_REMOVED,
            member_id=member.member_id,
            reason=reason,
            generation=member.member_epoch,
            partitions=format_partitions(member.assigned | member.pending_revocation),
        )

    def _subscription_metadata(
        self, replacing: tuple[str, GroupMember] | None = None
    ) -> dict[str, int]:
        """Partition counts of the existing topics some member subscribes to.

        By name or through a resolved regex (``SubscriptionCount``: byNameCount
        plus byRegexCount); internal topics count only through a regex.
        """
        counts = Counter(self._subscribers)
        if replacing is not None:
            old = self.members.get(replacing[0])
            if old is not None:
                counts.subtract(old.subscribed_topic_names)
            counts.update(replacing[1].subscribed_topic_names)
        counts.update(self._regex_topics)
        return {
            t: self._partition_count(t) for t in sorted(counts) if counts[t] > 0 and self._exists(t)
        }

    def preferred_assignor(self) -> str:
        """``computePreferredServerAssignor``: the most used, else the default (ties by name)."""
        counts = Counter(
            m.server_assignor for m in self.members.values() if m.server_assignor is not None
        )
        if not counts:
            return self.assignors[0]
        best = max(counts.values())
        return min(name for name, n in counts.items() if n == best)

    def _update_target_assignment(self, group_epoch: int, out: list[Output]) -> None:
        """``updateTargetAssignment`` through ``TargetAssignmentBuilder``."""
        topics = dict(self.subscription_metadata)
        spec = GroupSpec(
            {
                mid: MemberSpec(
                    subscribed_topics=self._member_topics(m),
                    instance_id=m.instance_id,
                    assignment=self.target_assignment.get(mid, frozenset()),
                    rack_id=m.rack_id,
                )
                for mid, m in sorted(self.members.items())
            }
        )
        name = self.preferred_assignor()
        new = self._lookup(name).assign(spec, topics)
        result = {mid: frozenset(new.get(mid, frozenset())) for mid in spec.members}
        for mid, parts in result.items():
            if parts != self.target_assignment.get(mid):
                out.append(
                    self._emit(
                        EventKind.TARGET_ASSIGNMENT,
                        member_id=mid,
                        group_epoch=group_epoch,
                        count=len(parts),
                        partitions=format_partitions(parts),
                        detail=f"assignor={name}",
                    )
                )
        self.target_assignment = result
        self.assignment_epoch = group_epoch
        self._last_assignment_ms = self._now
        self._unreconciled = {
            mid for mid, m in self.members.items() if not m.is_reconciled_to(group_epoch)
        }

    def _compute_state(self) -> GroupState:
        """``maybeUpdateGroupState``."""
        if not self.members:
            return GroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return GroupState.ASSIGNING
        if self._unreconciled:
            return GroupState.RECONCILING
        return GroupState.STABLE

    def _state_events(self, reason: str) -> list[Output]:
        self.state = self._compute_state()
        now = (self.state, self.group_epoch)
        if now == self._emitted_state:
            return []
        self._emitted_state = now
        return [
            self._emit(
                EventKind.GROUP_STATE_CHANGED,
                state=self.state.value,
                group_epoch=self.group_epoch,
                generation=self.group_epoch,
                count=len(self.members),
                reason=reason,
                detail=f"assignment_epoch={self.assignment_epoch}",
            )
        ]

    # ------------------------------------------------------------------ timers

    def _schedule(self, kind: str, member_id: str, delay_ms: float, epoch: int = 0) -> None:
        self._cancel(kind, member_id)
        self._timer_seq += 1
        timer = _Timer(self._now + delay_ms, self._timer_seq, kind, member_id, epoch)
        self._timer_by_key[(kind, member_id)] = timer
        heapq.heappush(self._timers, timer)

    def _cancel(self, kind: str, member_id: str) -> None:
        timer = self._timer_by_key.pop((kind, member_id), None)
        if timer is not None:
            timer.cancelled = True

    def session_deadline(self, member_id: str) -> float | None:
        """When the member's session expires, if it has one."""
        timer = self._timer_by_key.get(("session", member_id))
        return None if timer is None else timer.deadline

    def rebalance_deadline(self, member_id: str) -> float | None:
        """When the member's rebalance timeout fires, if it is armed."""
        timer = self._timer_by_key.get(("rebalance", member_id))
        return None if timer is None else timer.deadline

    # ---------------------------------------------------------------- plumbing

    def _emit(self, kind: EventKind, **fields: object) -> Emit:
        base: dict[str, object] = {"group": self.group_id}
        base.update(fields)
        return Emit(kind, base)

    @staticmethod
    def _error_response(request: GroupRequest, error: Errors, message: str) -> GroupResponse:
        if isinstance(request, ConsumerGroupHeartbeatRequest):
            return ConsumerGroupHeartbeatResponse(request.corr, error=error, error_message=message)
        if isinstance(request, OffsetCommitRequest):
            return OffsetCommitResponse(
                request.corr, error=error, partition_errors={tp: error for tp in request.offsets}
            )
        if isinstance(request, OffsetFetchRequest):
            return OffsetFetchResponse(request.corr, error=error)
        if isinstance(request, FindCoordinatorRequest):
            return FindCoordinatorResponse(request.corr, error=error)
        return GroupResponse(request.corr, error=error)


def make_consumer_coordinator(
    group_id: str,
    props: Mapping[str, object],
    rng: random.Random,
    broker_id: int,
    partitions_per_topic: Mapping[str, int],
    cls: type[ConsumerGroupCoordinator] | None = None,
) -> ConsumerGroupCoordinator:
    """A KIP-848 coordinator from broker properties (for the actors).

    Args:
        group_id: the group.
        props: broker properties by Kafka name (``group.consumer.*``,
            ``kafka.version``, ``offsets.topic.num.partitions``; others ignored).
        rng: the seeded generator for member ids.
        broker_id: the hosting broker.
        partitions_per_topic: the metadata image (the topics of the run;
            ``__consumer_offsets``, which a regex may match, is added here).
        cls: the coordinator class (default :class:`ConsumerGroupCoordinator`).

    Raises:
        ValueError: a property of the wrong type or range.
    """
    config = GroupCoordinatorConfig.from_kafka(props)
    offsets = props.get("offsets.topic.num.partitions", DEFAULT_OFFSETS_TOPIC_NUM_PARTITIONS)
    if isinstance(offsets, bool) or not isinstance(offsets, int | str):
        raise ValueError(f"offsets.topic.num.partitions must be an integer, got {offsets!r}")
    # KAFKA-18688 changed the uniform assignor's extra slots; earlier
    # releases keep the first-members rule.
    stable = kafka_version_at_least(config.kafka_version, UNIFORM_STABLE_QUOTA_SINCE)

    def lookup(name: str) -> ServerAssignor:
        if name == "uniform":
            return UniformAssignor(stable_quota=stable)
        return server_assignor(name)

    return (cls or ConsumerGroupCoordinator).from_config(
        group_id,
        config,
        topics=partitions_per_topic,
        rng=rng,
        node_id=broker_id,
        assignor_lookup=lookup,
        internal_topics={OFFSETS_TOPIC: int(offsets)},
    )
