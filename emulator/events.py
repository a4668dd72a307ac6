"""The event log contract: every event kind the emulator writes, and its fields.

Every actor (broker, producer, consumer host, coordinator, orchestrator) records
what it does as events. Events are written as self-delimiting msgpack maps (see
:mod:`emulator.eventlog`), one map per event, with ``None`` fields left out.
Analysis derives its Spark schema from :data:`FIELDS` (never a copy), so adding
a field here adds a column there.

Time is carried three ways (architecture.md, "The event log is the contract"):

* ``t_emu_ms``: emulated Kafka time in milliseconds since the run started; the
  run's ``time_scale`` maps it to wall time. All protocol durations are in
  these units (``session.timeout.ms`` ...).
* ``ts_wall``: wall-clock seconds since the epoch on the emitting node, for
  cross-node alignment (skew is bounded by the manifest's clock offsets).
* ``ts_mono``: the emitting process's monotonic clock in seconds, for
  ordering within one process.

Across nodes, wall clocks may disagree by their skew, so the analysis orders a
partition's owners by what the protocol orders them by: ``zxid`` (the czxid of
a legacy owner znode) on legacy claims, ``generation`` (generation or member
epoch) on modern ones; time only within one node.

Offsets are carried as half-open ranges ``[offset_start, offset_end)``: one
event per batch, never one per message.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

SCHEMA_VERSION: Final = 5
"""The event schema's version, in every record's ``v``.

Versions only add (kinds, fields, values), so a reader of version ``n`` reads
every older log: a field an older record lacks is a null column. 1: unframed
logs; 2: framed logs (:mod:`emulator.logformat`, whose own framing version
follows the file, not this number); 3: the topic lifecycle (``topic_created``,
``topic_deletion_requested``, ``topic_deleted``, ``topic_pattern_resolved``) and
the fields ``incarnation``, ``replication_factor``, ``pattern`` and ``topics``; 4:
online migration (``group_converted``, the fields ``member_protocol`` and ``direction``);
5: share groups (``share_records``).
"""

FieldType = Literal["string", "long", "double", "boolean"]


@dataclass(frozen=True)
class Field:
    """One column of the event table.

    Attributes:
        name: the msgpack key and the Spark column name.
        type: the Spark type name (``string``, ``long``, ``double``, ``boolean``).
        doc: what the field means.
    """

    name: str
    type: FieldType
    doc: str


FIELDS: Final[tuple[Field, ...]] = (
    Field("v", "long", "schema version of the record (SCHEMA_VERSION)"),
    Field("seq", "long", "sequence number of the record within its file, from 0"),
    Field("kind", "string", "the event kind, an EventKind value"),
    Field("t_emu_ms", "double", "emulated Kafka time in ms since the run started"),
    Field("ts_wall", "double", "wall-clock seconds since the epoch on the emitting node"),
    Field("ts_mono", "double", "monotonic seconds of the emitting process"),
    Field("run_id", "string", "the run this event belongs to"),
    Field(
        "protocol", "string", "zookeeper | classic-eager | classic-cooperative | consumer | share"
    ),
    Field("node", "string", "host name or Ray node id of the emitting process"),
    Field("actor", "string", "emitting actor, e.g. broker-1, host-0, producer-0, orchestrator"),
    Field("group", "string", "consumer group id"),
    Field("member", "string", "emulated member name from the scenario (c-0, c-1, ...)"),
    Field("member_id", "string", "protocol-level id (legacy consumer id, member id)"),
    Field("thread_id", "string", "legacy consumer thread id <consumerId>-<i>"),
    Field("generation", "long", "generation, epoch or rebalance number, per protocol"),
    Field("group_epoch", "long", "KIP-848 group epoch (target assignment epoch in detail)"),
    Field("attempt", "long", "legacy rebalance attempt index from 0"),
    Field("broker", "long", "broker id"),
    Field("topic", "string", "topic name"),
    Field("partition", "long", "partition number"),
    Field("offset_start", "long", "first offset of a batch (inclusive)"),
    Field("offset_end", "long", "end of a batch (exclusive)"),
    Field("count", "long", "a count: messages, partitions, operations"),
    Field("duration_ms", "double", "a duration in emulated ms"),
    Field("reason", "string", "why: a trigger, an error name, a fault kind"),
    Field("state", "string", "a state name (session state, group state, consumer state)"),
    Field("session_id", "string", "ZooKeeper session id as hex"),
    Field("zk_reads", "long", "ZooKeeper reads (get, getChildren, exists) in the step"),
    Field("zk_writes", "long", "ZooKeeper writes (create, set, delete) in the step"),
    Field("zk_watches", "long", "ZooKeeper watch notifications in the step"),
    Field("partitions", "string", "a partition list as 'topic:p,topic:p'"),
    Field("detail", "string", "free text or JSON for anything else"),
    Field(
        "zxid",
        "long",
        "ZooKeeper zxid of the change: the czxid of the owner znode a legacy claim created",
    ),
    Field(
        "incarnation",
        "long",
        "a topic's incarnation, from 1: a topic deleted and created again under the same name "
        "is a new one, its offsets from 0 (Kafka's topic id from 2.8; 0.8 has none)",
    ),
    Field("replication_factor", "long", "a topic's replication factor"),
    Field("pattern", "string", "a subscription pattern (a regex, or a 0.8 filter string)"),
    Field("topics", "string", "a topic list as 'a,b,c' (sorted; empty: none)"),
    Field(
        "member_protocol",
        "string",
        "the group protocol a member speaks in a group that has both (online migration): "
        "classic | consumer",
    ),
    Field(
        "direction",
        "string",
        "a group conversion's direction: upgrade (classic to consumer) | downgrade",
    ),
)

FIELD_NAMES: Final[frozenset[str]] = frozenset(f.name for f in FIELDS)
FIELD_TYPES: Final[Mapping[str, FieldType]] = {f.name: f.type for f in FIELDS}

# Fields every event carries, stamped by the writer.
ENVELOPE: Final = ("v", "seq", "kind", "t_emu_ms", "ts_wall", "ts_mono", "run_id", "node", "actor")


class EventKind(enum.StrEnum):
    """Every event kind, grouped by who emits it."""

    # orchestrator
    RUN_STARTED = "run_started"
    RUN_FINISHED = "run_finished"
    ACTION_APPLIED = "action_applied"  # a timeline action: reason = join|leave|crash
    # brokers and producers
    BROKER_STARTED = "broker_started"
    BROKER_STOPPED = "broker_stopped"
    PRODUCED = "produced"  # topic, partition, offset_start, offset_end, broker
    # ZooKeeper sessions (any client)
    ZK_SESSION_STATE = "zk_session_state"  # state = CONNECTED | SUSPENDED | LOST; session_id
    ZK_SESSION_EXPIRED = "zk_session_expired"  # a new session replaced an expired one
    WATCH_FIRED = "watch_fired"  # reason = the watched path kind; zk_watches = 1
    # legacy consumer lifecycle
    CONSUMER_STARTED = "consumer_started"
    CONSUMER_REGISTERED = "consumer_registered"  # the /ids ephemeral exists
    CONSUMER_STOPPED = "consumer_stopped"  # graceful shutdown
    CONSUMER_CRASHED = "consumer_crashed"  # killed without goodbye
    # legacy rebalance steps (A5)
    REBALANCE_TRIGGERED = (
        "rebalance_triggered"  # reason = start | ids_changed | topic_changed | new_session
    )
    REBALANCE_STARTED = (
        "rebalance_started"  # one syncedRebalance begins; count = coalesced triggers
    )
    ATTEMPT_STARTED = "attempt_started"  # attempt
    FETCHERS_STOPPED = "fetchers_stopped"
    # topic, partition, offset_end = committed offset; modern members: duration_ms = how long
    # before this event the coordinator stored it (the commit's instant is t_emu_ms - duration_ms)
    OFFSETS_COMMITTED = "offsets_committed"
    OWNERSHIP_RELEASED = (
        "ownership_released"  # topic, partition: owner znode deleted (release/rollback)
    )
    ASSIGNMENT_COMPUTED = "assignment_computed"  # partitions = my share; count
    OWNERSHIP_CLAIMED = (
        "ownership_claimed"  # topic, partition, thread_id: owner znode created (zxid = its czxid)
    )
    CLAIM_CONFLICT = "claim_conflict"  # topic, partition: NodeExists; detail = current holder
    ATTEMPT_FINISHED = "attempt_finished"  # attempt, reason = ok | conflict | error:<name>; zk_*
    REBALANCE_BACKOFF = "rebalance_backoff"  # duration_ms = rebalance.backoff.ms
    REBALANCE_COMPLETED = "rebalance_completed"  # count = partitions owned; attempt
    REBALANCE_FAILED = "rebalance_failed"  # "can't rebalance after N retries"; owns nothing
    FETCHING_STARTED = "fetching_started"  # topic, partition, offset_start = fetch position
    # data path
    PROCESSED = (
        "processed"  # topic, partition, offset range, member; duration_ms = the batch's time
    )
    RECORDS_ABANDONED = (
        "records_abandoned"  # topic, partition, offset range handed to the application and
        # never processed (it crashed); reason = crash
    )
    FAULT_INJECTED = "fault_injected"  # reason = fault kind; detail = JSON of its parameters
    FAULT_CLEARED = "fault_cleared"  # reason = fault kind: a timed fault ended (heal, wake)
    # broker-side coordination through ZooKeeper (A8)
    CONTROLLER_ELECTED = "controller_elected"  # broker; generation = controller epoch
    CONTROLLER_RESIGNED = "controller_resigned"  # broker; reason
    LEADER_CHANGED = (
        "leader_changed"  # topic, partition, broker = new leader (-1 none); generation =
        # leader epoch; reason = new | offline | unclean | preferred | auto_rebalance; detail = ISR
    )
    ISR_CHANGED = "isr_changed"  # topic, partition, broker = leader; reason = shrink | expand
    BROKER_CRASHED = "broker_crashed"  # broker: killed without closing its session
    # modern group coordinator (classic and KIP-848)
    COORDINATOR_STARTED = "coordinator_started"  # broker, partition = __consumer_offsets partition
    GROUP_STATE_CHANGED = "group_state_changed"  # state, generation / group_epoch, reason
    MEMBER_JOINED = "member_joined"  # member_id, reason = new | rejoin | static_replace
    MEMBER_REMOVED = "member_removed"  # member_id, reason = leave | session_timeout | fenced ...
    TARGET_ASSIGNMENT = "target_assignment"  # group_epoch, member_id, partitions (KIP-848)
    GROUP_CONVERTED = (
        "group_converted"  # direction = upgrade | downgrade; reason = what caused it;
        # state = online | offline (an empty group replaced); generation = the epoch carried
        # over; count = members converted; member_id = the member whose request or fencing
        # caused it
    )
    # modern members (client side)
    COORDINATOR_FOUND = "coordinator_found"  # broker
    PARTITIONS_ASSIGNED = "partitions_assigned"  # partitions added (onPartitionsAssigned)
    PARTITIONS_REVOKED = "partitions_revoked"  # partitions revoked (onPartitionsRevoked)
    PARTITIONS_LOST = "partitions_lost"  # partitions lost (onPartitionsLost)
    REQUEST_ERROR = "request_error"  # reason = Kafka error name; detail = request kind
    COMMIT_FAILED = "commit_failed"  # reason = error name (CommitFailedException)
    # topics coming and going (the cluster: the 0.8 controller, the modern metadata)
    TOPIC_CREATED = (
        "topic_created"  # topic, count = partitions, replication_factor, incarnation;
        # reason = timeline (a create_topic action) | auto (auto.create.topics.enable)
    )
    TOPIC_DELETION_REQUESTED = (
        "topic_deletion_requested"  # topic; state = started | ignored (delete.topic.enable
        # false: the marker stays, nothing happens)
    )
    TOPIC_DELETED = "topic_deleted"  # topic, incarnation: the topic is gone
    TOPIC_PATTERN_RESOLVED = (
        "topic_pattern_resolved"  # pattern, topics = what it matched; member (a client
        # matching on its metadata) or broker (a KIP-848 coordinator resolving the regex)
    )
    # share groups (KIP-932), on the share-partition's leader
    SHARE_RECORDS = (
        "share_records"  # records [offset_start, offset_end) of a share-partition changed
        # state: state = acquired | available | acknowledged | archived; reason = why
        # (SHARE_REASONS); member_id = whose they were or became; count = their delivery
        # count; broker = the leader; group = the share group
    )


@dataclass(frozen=True)
class EventSpec:
    """The fields an event kind must carry beyond the envelope.

    Attributes:
        required: fields that must be set.
        any_of: at least one of these must be set (empty: no such rule).
        values: a field's allowed values, when it is set.
    """

    required: tuple[str, ...] = ()
    any_of: tuple[str, ...] = ()
    values: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


TOPIC_CREATED_REASONS: Final = ("timeline", "auto")
"""Why a topic was created: a ``create_topic`` timeline action, or auto-creation."""
CONVERSION_DIRECTIONS: Final = ("upgrade", "downgrade")
"""A group conversion: classic to consumer (upgrade) or back (downgrade)."""
TOPIC_DELETION_STATES: Final = ("started", "ignored")
"""What a deletion request did: the deletion started, or ``delete.topic.enable`` is false."""
SHARE_STATES: Final = ("acquired", "available", "acknowledged", "archived")
"""A share-partition's record states (KIP-932 ``RecordState``)."""
SHARE_REASONS: Final = (
    "acquire",
    "accept",
    "release",
    "reject",
    "gap",
    "renew",
    "lock_expiry",
    "session_close",
    "delivery_limit",
    "failover",
)
"""Why a share record changed state: an acquisition, the member's acknowledgement
(accept, release, reject, gap, renew), its lock expiring, its member's share
session closing, the delivery limit archiving it, a leader change."""


SPECS: Final[Mapping[EventKind, EventSpec]] = {
    EventKind.PRODUCED: EventSpec(("topic", "partition", "offset_start", "offset_end")),
    EventKind.ZK_SESSION_STATE: EventSpec(("state",)),
    EventKind.OFFSETS_COMMITTED: EventSpec(("topic", "partition", "offset_end")),
    EventKind.OWNERSHIP_RELEASED: EventSpec(("topic", "partition")),
    EventKind.OWNERSHIP_CLAIMED: EventSpec(("topic", "partition")),
    EventKind.CLAIM_CONFLICT: EventSpec(("topic", "partition")),
    EventKind.ATTEMPT_STARTED: EventSpec(("attempt",)),
    EventKind.ATTEMPT_FINISHED: EventSpec(("attempt", "reason")),
    EventKind.FETCHING_STARTED: EventSpec(("topic", "partition", "offset_start")),
    EventKind.PROCESSED: EventSpec(("topic", "partition", "offset_start", "offset_end")),
    EventKind.RECORDS_ABANDONED: EventSpec(("topic", "partition", "offset_start", "offset_end")),
    EventKind.ACTION_APPLIED: EventSpec(("reason",)),
    EventKind.FAULT_INJECTED: EventSpec(("reason",)),
    EventKind.FAULT_CLEARED: EventSpec(("reason",)),
    EventKind.CONTROLLER_ELECTED: EventSpec(("broker", "generation")),
    EventKind.LEADER_CHANGED: EventSpec(("topic", "partition", "broker", "generation", "reason")),
    EventKind.ISR_CHANGED: EventSpec(("topic", "partition", "broker", "reason", "detail")),
    EventKind.BROKER_CRASHED: EventSpec(("broker",)),
    EventKind.GROUP_STATE_CHANGED: EventSpec(("state",)),
    EventKind.GROUP_CONVERTED: EventSpec(
        ("direction", "reason", "state"),
        values={"direction": CONVERSION_DIRECTIONS, "state": ("online", "offline")},
    ),
    EventKind.REQUEST_ERROR: EventSpec(("reason",)),
    EventKind.COMMIT_FAILED: EventSpec(("reason",)),
    EventKind.TOPIC_CREATED: EventSpec(
        ("topic", "count", "replication_factor", "incarnation", "reason"),
        values={"reason": TOPIC_CREATED_REASONS},
    ),
    EventKind.TOPIC_DELETION_REQUESTED: EventSpec(
        ("topic", "state"), values={"state": TOPIC_DELETION_STATES}
    ),
    EventKind.TOPIC_DELETED: EventSpec(("topic", "incarnation")),
    EventKind.TOPIC_PATTERN_RESOLVED: EventSpec(("pattern", "topics"), any_of=("member", "broker")),
    EventKind.SHARE_RECORDS: EventSpec(
        ("topic", "partition", "offset_start", "offset_end", "state", "reason", "member_id"),
        values={"state": SHARE_STATES, "reason": SHARE_REASONS},
    ),
}

Event = dict[str, object]


class EventError(ValueError):
    """An event that does not match the schema."""


def validate_event(event: Mapping[str, object]) -> None:
    """Check one event against the schema.

    Args:
        event: the record, as written (``None`` fields may be absent).

    Raises:
        EventError: unknown field, wrong type, unknown kind, or a missing
            required field; the message names the field.
    """
    for name, value in event.items():
        if name not in FIELD_TYPES:
            raise EventError(f"unknown event field {name!r}")
        if value is None:
            continue
        ftype = FIELD_TYPES[name]
        ok: bool
        if ftype == "string":
            ok = isinstance(value, str)
        elif ftype == "long":
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif ftype == "double":
            ok = isinstance(value, int | float) and not isinstance(value, bool)
        else:
            ok = isinstance(value, bool)
        if not ok:
            raise EventError(f"event field {name!r} must be {ftype}, got {type(value).__name__}")
    kind = event.get("kind")
    try:
        ek = EventKind(str(kind))
    except ValueError:
        raise EventError(f"unknown event kind {kind!r}") from None
    spec = SPECS.get(ek)
    if spec is not None:
        for name in spec.required:
            if event.get(name) is None:
                raise EventError(f"event {ek.value!r} needs field {name!r}")
        if spec.any_of and all(event.get(name) is None for name in spec.any_of):
            needed = " or ".join(repr(name) for name in spec.any_of)
            raise EventError(f"event {ek.value!r} needs field {needed}")
        for name, allowed in spec.values.items():
            value = event.get(name)
            if value is not None and value not in allowed:
                raise EventError(
                    f"event {ek.value!r} field {name!r} must be one of {allowed}, got {value!r}"
                )


def format_topics(topics: Iterable[str]) -> str:
    """Render topic names as ``'a,b'`` (sorted, each once; ``''`` for none)."""
    return ",".join(sorted(set(topics)))


def format_partitions(partitions: object) -> str:
    """Render an iterable of ``(topic, partition)`` pairs as ``'t:0,t:1'`` (sorted)."""
    pairs = sorted(partitions)  # type: ignore[call-overload]
    return ",".join(f"{t}:{p}" for t, p in pairs)
