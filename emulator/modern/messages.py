"""Requests and responses of the broker-coordinated protocols (classic and KIP-848).

These mirror Kafka's RPCs (``clients/src/main/resources/common/message/*.json``,
K@3.9 and K@trunk) with the fields the emulation needs, as plain frozen
dataclasses instead of bytes. Emulator choices (not Kafka):

* topics are named, not identified by topic id;
* the consumer protocol's subscription and assignment travel as
  :class:`Subscription` and :class:`Assignment` objects, not serialized bytes;
* every request carries ``corr``, a correlation id the sender chooses and the
  coordinator copies into the response, because responses to JoinGroup and
  SyncGroup may come back later, out of order, when the group moves on.

Topic-partitions are ``(topic, partition)`` tuples.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from emulator.events import EventKind
from emulator.modern.errors import Errors

TopicPartition = tuple[str, int]

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1
# ConsumerGroupHeartbeat epochs (C2): 0 joins, -1 leaves, -2 leaves temporarily (static).
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


# --------------------------------------------------------------------- consumer protocol


@dataclass(frozen=True)
class Subscription:
    """``ConsumerProtocolSubscription`` (v0-v3): what a member sends in JoinGroup.

    Attributes:
        topics: subscribed topics.
        owned_partitions: v1+ (KIP-429), what the member owns now.
        generation_id: v2+ (KIP-792), the generation of ``owned_partitions``.
        rack_id: v3+.
        user_data: assignor-specific data (e.g. the sticky assignor's).
    """

    topics: tuple[str, ...]
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = NO_GENERATION
    rack_id: str | None = None
    user_data: bytes | None = None


@dataclass(frozen=True)
class Assignment:
    """``ConsumerProtocolAssignment``: what the leader assigns a member."""

    partitions: tuple[TopicPartition, ...] = ()
    user_data: bytes | None = None


# ------------------------------------------------------------------------- base


@dataclass(frozen=True)
class GroupRequest:
    """Base of every request to a group coordinator."""

    corr: int
    group_id: str


@dataclass(frozen=True)
class GroupResponse:
    """Base of every response; ``corr`` is the request's."""

    corr: int
    error: Errors = Errors.NONE


# ------------------------------------------------------------------- discovery


@dataclass(frozen=True)
class FindCoordinatorRequest(GroupRequest):
    """FindCoordinator (key type GROUP)."""


@dataclass(frozen=True)
class FindCoordinatorResponse(GroupResponse):
    """The broker that hosts the group's coordinator."""

    node_id: int = -1


# ---------------------------------------------------------------- classic group


@dataclass(frozen=True)
class JoinGroupRequest(GroupRequest):
    """JoinGroup (v5+ fields; ``protocols`` in the member's preference order)."""

    session_timeout_ms: int = 45000
    rebalance_timeout_ms: int = 300000
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None
    protocol_type: str = "consumer"
    protocols: tuple[tuple[str, Subscription], ...] = ()
    reason: str | None = None
    # The RPC header's client.id (the coordinator prefixes a new member id with it).
    client_id: str | None = None


@dataclass(frozen=True)
class JoinGroupMember:
    """One member in the leader's JoinGroup response."""

    member_id: str
    group_instance_id: str | None
    metadata: Subscription


@dataclass(frozen=True)
class JoinGroupResponse(GroupResponse):
    """JoinGroup's answer; ``members`` is filled for the leader only."""

    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    member_id: str = ""
    members: tuple[JoinGroupMember, ...] = ()


@dataclass(frozen=True)
class SyncGroupRequest(GroupRequest):
    """SyncGroup; the leader sends every member's assignment, followers send none."""

    generation_id: int = NO_GENERATION
    member_id: str = ""
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: tuple[tuple[str, Assignment], ...] = ()


@dataclass(frozen=True)
class SyncGroupResponse(GroupResponse):
    """SyncGroup's answer: this member's assignment."""

    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: Assignment = field(default_factory=Assignment)


@dataclass(frozen=True)
class HeartbeatRequest(GroupRequest):
    """Heartbeat (classic)."""

    generation_id: int = NO_GENERATION
    member_id: str = ""
    group_instance_id: str | None = None


@dataclass(frozen=True)
class HeartbeatResponse(GroupResponse):
    """Heartbeat's answer: only an error code."""


@dataclass(frozen=True)
class LeaveGroupRequest(GroupRequest):
    """LeaveGroup v3+: a batch of ``(member_id, group_instance_id)``."""

    members: tuple[tuple[str, str | None], ...] = ()
    reason: str | None = None


@dataclass(frozen=True)
class LeaveGroupResponse(GroupResponse):
    """LeaveGroup's answer, with an error per member."""

    member_errors: tuple[tuple[str, str | None, Errors], ...] = ()


# ------------------------------------------------------------------- offsets


@dataclass(frozen=True)
class OffsetCommitRequest(GroupRequest):
    """OffsetCommit; ``generation_id_or_member_epoch`` is the member epoch under KIP-848."""

    generation_id_or_member_epoch: int = NO_GENERATION
    member_id: str = ""
    group_instance_id: str | None = None
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)


@dataclass(frozen=True)
class OffsetCommitResponse(GroupResponse):
    """OffsetCommit's answer: an error per partition (``error`` is the first one).

    ``accepted_ms`` is the coordinator's emulated time when it stored the
    offsets (``None`` when it did not). Kafka's response carries no time: the
    emulator adds it so that the member's ``offsets_committed`` event can say
    when the commit took effect, which is earlier than when the member learns
    it by as much as the answer was delayed (a pause, a slow link).
    """

    partition_errors: Mapping[TopicPartition, Errors] = field(default_factory=dict)
    accepted_ms: float | None = None


def commit_age_ms(now_ms: float, accepted_ms: float | None) -> float | None:
    """How long before ``now_ms`` a commit was stored (never negative), ``None`` if not known.

    The ``duration_ms`` of a member's ``offsets_committed`` event: the event's
    time minus this is when the commit took effect at the coordinator.
    """
    return None if accepted_ms is None else max(0.0, now_ms - accepted_ms)


@dataclass(frozen=True)
class OffsetFetchRequest(GroupRequest):
    """OffsetFetch for some partitions."""

    partitions: tuple[TopicPartition, ...] = ()
    member_id: str | None = None
    member_epoch: int | None = None


@dataclass(frozen=True)
class OffsetFetchResponse(GroupResponse):
    """Committed offsets; a partition with none maps to ``None``."""

    offsets: Mapping[TopicPartition, int | None] = field(default_factory=dict)


# ------------------------------------------------------------------ KIP-848


@dataclass(frozen=True)
class ConsumerGroupHeartbeatRequest(GroupRequest):
    """ConsumerGroupHeartbeat (api key 68, C2). Optional fields are None when unchanged.

    ``subscribed_topic_regex`` is v1's ``SubscribedTopicRegex`` (Kafka 4.0+, KIP-848:
    CK@4.0 ``ConsumerGroupHeartbeatRequest.json``): an RE2/J regex the coordinator
    resolves against its metadata; ``""`` removes the member's regex.
    """

    member_id: str = ""
    member_epoch: int = JOIN_GROUP_MEMBER_EPOCH
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    server_assignor: str | None = None
    topic_partitions: tuple[TopicPartition, ...] | None = None
    subscribed_topic_regex: str | None = None


@dataclass(frozen=True)
class ConsumerGroupHeartbeatResponse(GroupResponse):
    """ConsumerGroupHeartbeat's answer; ``assignment`` only when it changed."""

    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: tuple[TopicPartition, ...] | None = None


@dataclass(frozen=True)
class ShareGroupHeartbeatRequest(GroupRequest):
    """ShareGroupHeartbeat (api key 76, KIP-932). ``member_epoch`` 0 joins, -1 leaves;
    ``subscribed_topic_names`` is None when unchanged (ShareGroupHeartbeatRequest.json)."""

    member_id: str = ""
    member_epoch: int = JOIN_GROUP_MEMBER_EPOCH
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None


@dataclass(frozen=True)
class ShareGroupHeartbeatResponse(GroupResponse):
    """ShareGroupHeartbeat's answer; ``assignment`` only when it changed (or on a join)."""

    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: tuple[TopicPartition, ...] | None = None


# ------------------------------------------------------------------- effects


@dataclass(frozen=True)
class Emit:
    """An event for the log (see :mod:`emulator.events`)."""

    kind: EventKind
    fields: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class StartFetching:
    """Fetch these partitions from these offsets (``None``: apply ``auto.offset.reset``)."""

    positions: Mapping[TopicPartition, int | None]


@dataclass(frozen=True)
class StopFetching:
    """Stop fetching these partitions and drop what is queued for them.

    A batch the application is processing finishes (its PROCESSED event is the
    evidence of any double processing).
    """

    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class ShareAssignment:
    """A share member's partitions from now on (KIP-932: no revocation step).

    The host fetches from these with ShareFetch; a partition that goes stops
    being fetched (acknowledgements for its records still go to its leader).
    """

    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class RequestMetadata:
    """Send a MetadataRequest for this member (its host makes the call, one at a time).

    The answer comes back through ``update_metadata`` (or ``metadata_failed``
    when no broker answered). What the request names is
    ``ConsumerMetadata.newMetadataRequestBuilder`` (K@3.9): every topic for a
    pattern subscription (``MetadataRequest.Builder.allTopics()``, which never
    creates one), else the member's metadata topics, which a broker with
    ``auto.create.topics.enable`` creates when missing if ``allow_auto_create``.

    Attributes:
        topics: the topics named; ``None``: all topics.
        allow_auto_create: ``allow.auto.create.topics`` for the named topics.
    """

    topics: tuple[str, ...] | None
    allow_auto_create: bool = False


Effect = Emit | StartFetching | StopFetching | RequestMetadata | ShareAssignment
"""What a member does besides sending group requests: log, start or stop fetching,
ask for metadata."""

MemberOutput = GroupRequest | Effect
"""What a member state machine returns (classic and KIP-848 alike): requests
for the coordinator (or any broker) and effects."""
