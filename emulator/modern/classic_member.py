"""A classic-protocol consumer (group member) as a sans-I/O state machine.

This is Kafka 3.9's client side of the classic group protocol without its
I/O: ``AbstractCoordinator`` (discovery, JoinGroup/SyncGroup, the heartbeat
thread with its ``Heartbeat`` timers, LeaveGroup) and ``ConsumerCoordinator``
(subscription metadata, the leader's assignment, ``onJoinPrepare`` /
``onJoinComplete``, offset commits and fetches), read from K@3.9
``clients/.../consumer/internals/`` (kafka-protocols.md B2-B9). It is fed
responses, the passing of time and what the application does, and returns
requests for the coordinator and effects for the host.

Two threads of control are kept apart, as in Kafka:

* **The heartbeat thread** (:meth:`poll` always runs it): once the member has
  joined, it heartbeats every ``heartbeat.interval.ms``, marks the
  coordinator unknown when no heartbeat succeeded for ``session.timeout.ms``,
  and sends LeaveGroup when the application has not returned to ``poll()``
  for ``max.poll.interval.ms`` (B5).
* **The application thread** runs only while the application is inside
  ``poll()``: the rebalance callbacks (``onJoinPrepare``, ``onJoinComplete``),
  sending JoinGroup, auto-commit and the committed-offset fetch. The host
  tells the member when the application starts processing a batch
  (:meth:`app_processing`) and when it is back in ``poll()``
  (:meth:`app_polled`); a member whose host never calls
  :meth:`app_processing` is always in ``poll()``. So a member busy with a
  batch delays the group's rebalance, as in Kafka (E#8).

Responses are handled when they arrive (Kafka's network client completes
them from either thread): a JoinGroup response makes the leader run the
assignor and send SyncGroup at once.

Rebalance protocols (B7): the common protocol of the configured assignors,
COOPERATIVE if all support it, else EAGER. EAGER revokes every partition in
``onJoinPrepare`` (stop the world; the fetch of partitions pending revocation
stops when the pre-rebalance commit is sent). COOPERATIVE keeps its
partitions, reports them as ``owned_partitions`` and, in ``onJoinComplete``,
revokes only what the new assignment removed and rejoins ("need to revoke
partitions and re-join"). If the generation was reset, what was owned is
"lost" instead. The leader checks a COOPERATIVE assignment with
``validate_cooperative_assignment`` unless the assignor is the built-in
cooperative-sticky one, as ``ConsumerCoordinator.onLeaderElected`` does.

Metadata and topics that come and go (:class:`~emulator.modern.client_metadata.ClientMetadata`,
K@3.9 ``Metadata``, ``ConsumerMetadata``, ``ConsumerCoordinator``): the member
asks its host for metadata (:class:`~emulator.modern.messages.RequestMetadata`)
every ``metadata.max.age.ms`` after the last answer, and sooner when Kafka
forces it: a fetch error or a dropped connection
(:meth:`ClassicMember.request_metadata_update`), new topics in its
subscription, a leader whose group subscribes to topics it does not, and a
pattern subscriber about to rejoin. At the next ``poll()`` after an answer
(``maybeUpdateSubscriptionMetadata``) a ``subscribe(Pattern)`` member matches
its pattern (Java's full match, :func:`emulator.topic_regex.compile_pattern`)
against the topics of its metadata, logs TOPIC_PATTERN_RESOLVED when the
match changed and rejoins ("subscription has changed"); the leader compares
the snapshot of its group's topics with the one it assigned from and rejoins
when a count changed or a topic appeared or went ("cached metadata has
changed"). A deleted topic gets no partitions from the assignor
(``AbstractPartitionAssignor``: no metadata, skipped), so its partitions are
revoked at that rebalance: EAGER in ``onJoinPrepare`` as always; COOPERATIVE
in ``onJoinPrepare`` when the topic left a pattern subscription, else in
``onJoinComplete`` (owned, not assigned) with one more rejoin. The commit
before it retries the deleted partitions until the rebalance timeout
(KAFKA-16235, :meth:`ClassicMember._on_join_prepare`).

Errors (B4): REBALANCE_IN_PROGRESS -> rejoin; ILLEGAL_GENERATION -> reset the
generation, keep the member id; UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID ->
reset both; NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE -> rediscover the
coordinator. Exceptions that Kafka throws to the application
(FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL, a broken cooperative
assignment, ...) end the member (:attr:`failed`).

The host routes :class:`FindCoordinatorRequest` to any broker and every other
request to the broker in :attr:`coordinator` at the time it is returned; a
request the network loses or a broker that dies is noticed by the
``request.timeout.ms`` of the request.

Emulator choices (not Kafka):

* ``auto.offset.reset`` is the host's: a partition without a committed
  offset starts at ``None``.
* The application patterns are knobs: ``rebalance_listener`` (``none`` or
  ``commit-on-revoke``: ``onPartitionsRevoked`` commits the revoked
  partitions' positions; the revocation does not wait for that commit's
  answer, which the coordinator handles before the JoinGroup sent after it)
  and the host's ``manual_commit`` (:meth:`ClassicMember.app_commit`).
* The auto-commit before a rebalance and at close is bounded as in Kafka
  (rebalance timeout, ``close()``'s 30 s) but retried after a fixed
  ``retry.backoff.ms`` (Kafka 3.7+ backs off exponentially).
* An exception Kafka throws from ``poll()`` is taken as the application's
  death: the member stops fetching, reports its partitions lost and sends
  nothing more (no LeaveGroup).
* The ``sticky`` assignor's user data (its previous assignment and
  generation) is JSON, not Kafka's struct.
* Metadata timing as :mod:`emulator.modern.client_metadata` says (a fixed
  back-off, every answer a full one, the first metadata given at creation);
  a metadata request is answered by the host's one call for all its members
  that asked (:class:`emulator.host.core.HostCore`).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from emulator.delivery import REBALANCE_LISTENERS
from emulator.events import EventKind, format_partitions, format_topics
from emulator.kafka_keys import kafka_version_at_least
from emulator.modern.assignors import (
    ClientAssignor,
    MemberSubscription,
    client_assignor,
    validate_cooperative_assignment,
)
from emulator.modern.client_metadata import ClientMetadata
from emulator.modern.config import ClassicConsumerConfig
from emulator.modern.errors import Errors
from emulator.modern.messages import (
    NO_GENERATION,
    UNKNOWN_MEMBER_ID,
    Assignment,
    Emit,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    GroupRequest,
    GroupResponse,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberOutput,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    RequestMetadata,
    StartFetching,
    StopFetching,
    Subscription,
    SyncGroupRequest,
    SyncGroupResponse,
    TopicPartition,
    commit_age_ms,
)
from emulator.topic_regex import INTERNAL_TOPICS, TopicMatcher, compile_pattern

PROTOCOL_TYPE: Final = "consumer"
"""``ConsumerProtocol.PROTOCOL_TYPE``."""

JOIN_GROUP_TIMEOUT_LAPSE_MS: Final = 5000
"""``AbstractCoordinator.JOIN_GROUP_TIMEOUT_LAPSE``: JoinGroup waits the rebalance timeout + 5 s."""

COOPERATIVE_STICKY: Final = "cooperative-sticky"
EAGER: Final = "EAGER"
COOPERATIVE: Final = "COOPERATIVE"

UNKNOWN_TOPIC_COMMIT_RETRIABLE_SINCE: Final = (2, 0)
"""KAFKA-6829 (K@2.0.0 ``OffsetCommitResponseHandler``, commit 04a70bd3fe4): an
OffsetCommit's UNKNOWN_TOPIC_OR_PARTITION is raised as the retriable error itself
("just retry"); before, as a ``KafkaException`` ("Topic or Partition ... does not exist")."""

PATTERN_REFRESH_BEFORE_JOIN_SINCE: Final = (2, 1)
"""KAFKA-7126 (K@2.1.0, commit a932520135d): a pattern subscriber asks for fresh
metadata before each rejoin once the back-off allows (``ConsumerCoordinator.poll``);
before, it only waited for an update already requested or due (``ensureFreshMetadata``)."""

# Errors after which joinGroupIfNeeded retries at once (no back-off).
_REJOIN_AT_ONCE: Final = frozenset(
    {
        Errors.UNKNOWN_MEMBER_ID,
        Errors.ILLEGAL_GENERATION,
        Errors.REBALANCE_IN_PROGRESS,
        Errors.MEMBER_ID_REQUIRED,
    }
)


class MemberState(enum.StrEnum):
    """``AbstractCoordinator.MemberState``."""

    UNJOINED = "UNJOINED"
    PREPARING_REBALANCE = "PREPARING_REBALANCE"
    COMPLETING_REBALANCE = "COMPLETING_REBALANCE"
    STABLE = "STABLE"

    @property
    def has_not_joined_group(self) -> bool:
        """``hasNotJoinedGroup``: no heartbeats are sent in these states."""
        return self in (MemberState.UNJOINED, MemberState.PREPARING_REBALANCE)


@dataclass(frozen=True)
class Generation:
    """``AbstractCoordinator.Generation``: what the member last joined with."""

    generation_id: int = NO_GENERATION
    member_id: str = UNKNOWN_MEMBER_ID
    protocol_name: str | None = None

    @property
    def has_member_id(self) -> bool:
        """Whether a member id is known."""
        return self.member_id != UNKNOWN_MEMBER_ID

    @property
    def is_reset(self) -> bool:
        """``hasGenerationReset``: no generation and no protocol."""
        return self.generation_id == NO_GENERATION and self.protocol_name is None


NO_GENERATION_INFO: Final = Generation()


@dataclass(frozen=True)
class MetadataSnapshot:
    """``ConsumerCoordinator.MetadataSnapshot``: partition counts of the metadata topics.

    Attributes:
        version: the ``Metadata.updateVersion`` it was taken at.
        partitions: topic -> partition count, for the metadata topics
            (``SubscriptionState.metadataTopics``) the metadata has.
    """

    version: int
    partitions: Mapping[str, int]

    def matches(self, other: MetadataSnapshot) -> bool:
        """``matches``: the same version, or the same partitions."""
        return self.version == other.version or dict(self.partitions) == dict(other.partitions)


@dataclass
class _Outcome:
    """How a request future ended: success, or an error and how Kafka classifies it."""

    ok: bool
    error: Errors | None = None
    exception: str = ""
    retriable: bool = False


_OK: Final = _Outcome(True)
_DISCONNECTED: Final = _Outcome(False, None, "DisconnectException", True)


@dataclass
class _Commit:
    """One OffsetCommit future."""

    offsets: dict[TopicPartition, int]
    reason: str
    outcome: _Outcome | None = None


@dataclass
class _JoinFuture:
    """``joinFuture``: JoinGroup, then SyncGroup, then the assignment or an error."""

    stage: str = "join"  # join | sync | done
    assignment: Assignment | None = None
    outcome: _Outcome | None = None


@dataclass
class _Pending:
    """An outstanding request."""

    kind: str  # find | join | sync | heartbeat | commit | fetch | leave
    generation: Generation
    expires_at: float
    commit: _Commit | None = None
    partitions: tuple[TopicPartition, ...] = ()
    sent_at: float = 0.0


@dataclass
class MemberStats:
    """Running counters, for live progress; the event log is the record."""

    joins: int = 0
    rebalances: int = 0
    heartbeats: int = 0
    commits: int = 0
    commit_failures: int = 0
    lookups: int = 0
    errors: dict[str, int] = field(default_factory=dict)


CooperativeValidator = Callable[
    [Mapping[str, Iterable[TopicPartition]], Mapping[str, Iterable[TopicPartition]]], None
]
"""``validate_cooperative_assignment(owned, assigned)``; raises on a violation."""


class ClassicMember:
    """One consumer of a classic group (``ConsumerCoordinator`` + its heartbeat thread).

    Args:
        member: the scenario's name for it (``c-0``), for events.
        group: ``group.id``.
        topics: the subscribed topics (ignored with ``topic_pattern``).
        config: the consumer's settings.
        partitions_per_topic: the cluster metadata it starts with (topic ->
            partition count), taken as the answer to its first metadata request
            at :meth:`start`; later answers come through :meth:`update_metadata`.
        assignors: the ``partition.assignment.strategy`` instances in
            preference order; by default looked up by name in the client
            assignor registry (:func:`emulator.modern.assignors.client_assignor`).
        validate_cooperative: the leader's COOPERATIVE check; by default the
            registry's ``validate_cooperative_assignment``.
        corr_start: the first correlation id this member uses.
        rebalance_listener: the application's listener (an emulator knob).
        topic_pattern: ``subscribe(Pattern)``: the subscription is what the
            pattern matches in full among the topics of its metadata, at each
            metadata update (``updatePatternSubscription``).

    Raises:
        ValueError: no topics and no pattern, or assignors with no common
            rebalance protocol.
        TopicRegexError: a pattern ``java.util.regex`` rejects (or the emulator
            cannot read faithfully).
    """

    def __init__(
        self,
        *,
        member: str,
        group: str,
        topics: Sequence[str],
        config: ClassicConsumerConfig,
        partitions_per_topic: Mapping[str, int],
        assignors: Sequence[ClientAssignor] | None = None,
        validate_cooperative: CooperativeValidator | None = None,
        corr_start: int = 0,
        rebalance_listener: str = "none",
        topic_pattern: str | None = None,
    ) -> None:
        if not topics and topic_pattern is None:
            raise ValueError("a member subscribes to at least one topic")
        if rebalance_listener not in REBALANCE_LISTENERS:
            raise ValueError(f"rebalance_listener must be one of {REBALANCE_LISTENERS}")
        self.rebalance_listener = rebalance_listener
        self._app_commit: _Commit | None = None
        self.member = member
        self.group = group
        # SubscriptionState: by names, or by a pattern (empty until it matched).
        self.topic_pattern = topic_pattern
        self._matcher: TopicMatcher | None = (
            None if topic_pattern is None else compile_pattern(topic_pattern, "java")
        )
        self.topics: tuple[str, ...] = (
            () if topic_pattern is not None else tuple(sorted(set(topics)))
        )
        self.config = config
        if assignors is None:
            assignors = [client_assignor(name) for name in config.partition_assignment_strategy]
        if not assignors:
            raise ValueError("partition.assignment.strategy must name at least one assignor")
        self._assignors: tuple[ClientAssignor, ...] = tuple(assignors)
        self._validate_cooperative = validate_cooperative or validate_cooperative_assignment
        self.protocol = _common_rebalance_protocol(self._assignors)
        self.stats = MemberStats()
        # AbstractCoordinator
        self.state = MemberState.UNJOINED
        self.generation = NO_GENERATION_INFO
        self.coordinator: int | None = None
        self._rejoin_needed = True
        self._rejoin_reason = ""
        self._needs_join_prepare = True
        self._join: _JoinFuture | None = None
        self._join_retry_at = 0.0
        self._last_rebalance_start: float | None = None
        # Latencies of the successful JoinGroup / SyncGroup requests since the
        # last completed rebalance (Kafka's join-time / sync-time sensors):
        # written into that rebalance's REBALANCE_COMPLETED detail.
        self._join_ms: list[float] = []
        self._sync_ms: list[float] = []
        # ConsumerCoordinator / SubscriptionState
        self.owned: frozenset[TopicPartition] = frozenset()
        self.positions: dict[TopicPartition, int] = {}
        self.fetching: frozenset[TopicPartition] = frozenset()
        self._initializing: set[TopicPartition] = set()
        # Metadata / ConsumerMetadata, and ConsumerCoordinator's snapshots of it.
        self._first_metadata = dict(partitions_per_topic)
        self._md = ClientMetadata(float(config.metadata_max_age_ms), float(config.retry_backoff_ms))
        self._snapshot = MetadataSnapshot(0, {})  # metadataSnapshot
        self._assignment_snapshot: MetadataSnapshot | None = None
        self._group_subscription: frozenset[str] = frozenset()  # groupSubscription
        self._joined_subscription: tuple[str, ...] | None = None  # joinedSubscription
        # awaitMetadataUpdate in poll() (a pattern subscriber before a rejoin):
        # the version the application thread waits to see change.
        self._md_wait_version: int | None = None
        # onLeaderElected's ensureFreshMetadata: the JoinGroup response whose
        # assignment waits for a metadata update, and the version it waits past.
        self._leader_wait: tuple[JoinGroupResponse, int] | None = None
        self._is_leader = False
        self._last_assignment: tuple[TopicPartition, ...] = ()
        self._last_assignment_generation = NO_GENERATION
        self._prepare_commit: _Commit | None = None
        self._join_prepare_deadline: float | None = None
        self._join_prepare_retry_at = 0.0
        self._next_auto_commit: float | None = None
        self._fetch_corr: int | None = None
        self._next_fetch_at = 0.0
        # heartbeat thread and its Heartbeat timers
        self._hb_enabled = False
        self._poll_exception: Errors | None = None
        self._session_deadline = 0.0
        self._next_heartbeat_at = 0.0
        self._app_in_poll = True
        self._last_app_poll = 0.0
        # discovery
        self._find_corr: int | None = None
        self._next_lookup_at = 0.0
        # lifecycle
        self._started = False
        self._closing = False
        self._close_deadline = 0.0
        self._close_commit: _Commit | None = None
        self._close_retry_at: float | None = None
        self.closed = False
        self.failed: str | None = None
        self._pending: dict[int, _Pending] = {}
        self._corr = corr_start
        self._now = 0.0
        self._out: list[MemberOutput] = []

    # ------------------------------------------------------------------ views

    @property
    def client_id(self) -> str:
        """``client.id``, the RPC header the coordinator prefixes member ids with."""
        return self.config.client_id

    @property
    def member_id(self) -> str:
        """The current member id (empty before the first JoinGroup answer)."""
        return self.generation.member_id

    @property
    def is_leader(self) -> bool:
        """Whether this member computed the group's last assignment."""
        return self._is_leader

    @property
    def rejoin_needed(self) -> bool:
        """``rejoinNeededOrPending`` without side effects."""
        return self._rejoin_needed or self._join is not None

    @property
    def app_in_poll(self) -> bool:
        """Whether the application is inside ``poll()`` (not processing a batch)."""
        return self._app_in_poll

    @property
    def outstanding(self) -> list[int]:
        """Correlation ids of requests not yet answered."""
        return list(self._pending)

    @property
    def metadata(self) -> ClientMetadata:
        """Its metadata cache (``Metadata``): the retained topics, version and timers."""
        return self._md

    # ----------------------------------------------------------------- inputs

    def start(self, now_ms: float) -> list[MemberOutput]:
        """``subscribe()`` and the first ``poll()``: find the coordinator, then join."""
        if self._started:
            raise RuntimeError(f"member {self.member} already started")
        self._started = True
        self._now = now_ms
        self._last_app_poll = now_ms
        self._md.bootstrap(now_ms, self._retain(self._first_metadata))
        if self.config.enable_auto_commit:
            self._next_auto_commit = now_ms + self.config.auto_commit_interval_ms
        self._emit(EventKind.CONSUMER_STARTED, detail=f"protocol={self.protocol}")
        self._request_rejoin("initial join")
        return self._run()

    def on_response(self, now_ms: float, response: GroupResponse) -> list[MemberOutput]:
        """A response to one of this member's requests (unknown ``corr`` is ignored)."""
        self._now = now_ms
        pending = self._pending.pop(response.corr, None)
        if pending is None or self.closed:
            return self._run()
        if response.error is not Errors.NONE:
            name = response.error.name
            self.stats.errors[name] = self.stats.errors.get(name, 0) + 1
            self._emit(EventKind.REQUEST_ERROR, reason=response.error.name, detail=pending.kind)
        handler = {
            "find": self._on_find_coordinator,
            "join": self._on_join_group,
            "sync": self._on_sync_group,
            "heartbeat": self._on_heartbeat,
            "commit": self._on_offset_commit,
            "fetch": self._on_offset_fetch,
            "leave": self._on_leave_group,
        }[pending.kind]
        handler(pending, response)
        return self._run()

    def poll(self, now_ms: float) -> list[MemberOutput]:
        """Let time pass: request timeouts, the heartbeat thread, and the application
        thread's pending work if the application is inside ``poll()``."""
        self._now = now_ms
        for corr, p in sorted(self._pending.items()):
            if corr in self._pending and now_ms >= p.expires_at:
                self._on_request_timeout(corr, p)
        return self._run()

    def app_polled(self, now_ms: float) -> list[MemberOutput]:
        """The application called ``poll()`` again (its batch is done).

        Resets the ``max.poll.interval.ms`` timer (``pollHeartbeat``) and runs
        what waited for the application thread: rejoining, the rebalance
        callbacks, auto-commit, committed-offset fetches.
        """
        self._now = now_ms
        self._app_in_poll = True
        self._last_app_poll = now_ms
        return self._run()

    def app_idle(self, now_ms: float) -> list[MemberOutput] | None:
        """The application is still in ``poll()`` with nothing to process.

        An emulator shortcut for the host loop, which calls this every tick
        and :meth:`poll` whenever :meth:`next_deadline` is due: an application
        already inside ``poll()`` changes nothing (every input already ran the
        application thread's work, and the poll timer does not run inside
        ``poll()``), so None is returned; otherwise it is :meth:`app_polled`.
        """
        if self._app_in_poll:
            return None
        return self.app_polled(now_ms)

    def app_processing(self, now_ms: float) -> list[MemberOutput]:
        """``poll()`` returned records: the application is processing them until
        :meth:`app_polled`. The poll timer runs from now."""
        self._now = now_ms
        self._app_in_poll = False
        self._last_app_poll = now_ms
        return self._run()

    def consumed(self, tp: TopicPartition, next_offset: int) -> None:
        """``poll()`` returned records of ``tp`` up to ``next_offset`` (exclusive).

        The position moves when ``poll()`` hands the records out
        (``FetchCollector``), before the application processes them; every
        commit here runs inside ``poll()`` (the application thread), when the
        batch it returned last has been processed. Progress on a partition
        the member no longer owns is dropped, as Kafka drops the position of
        an unassigned partition.
        """
        if tp in self.owned:
            self.positions[tp] = next_offset

    @property
    def app_committing(self) -> bool:
        """Whether the application's own ``commitSync`` waits for its answer."""
        c = self._app_commit
        return c is not None and c.outcome is None

    def app_commit(self, now_ms: float, *, sync: bool) -> list[MemberOutput]:
        """The application commits ``allConsumed()`` (``commitSync`` / ``commitAsync``).

        An emulator knob (``[group].manual_commit``) naming the usual pattern
        with ``enable.auto.commit=false``: commit after each processed batch.
        Outside a stable generation the commit fails at once
        (``RebalanceInProgressException`` / ``CommitFailedException``), which
        the application logs. With ``sync`` it waits (:attr:`app_committing`).
        """
        self._now = now_ms
        commit = self._commit_async(self._all_consumed(), "manual")
        if sync:
            self._app_commit = commit
        return self._run()

    def update_metadata(
        self, now_ms: float, partitions_per_topic: Mapping[str, int]
    ) -> list[MemberOutput]:
        """A metadata answer: the cluster's topics and partition counts.

        ``Metadata.update`` keeps the topics ``ConsumerMetadata.retainTopic``
        keeps and bumps ``updateVersion``; the application thread then runs
        ``maybeUpdateSubscriptionMetadata`` at its next ``poll()``: a pattern
        subscription matches again (``updatePatternSubscription``; a changed
        subscription rejoins, "subscription has changed") and the leader
        compares the new snapshot with the one it assigned from (a changed
        partition count, a created or a deleted topic: "cached metadata has
        changed"). A leader waiting in ``onLeaderElected`` for fresh
        metadata assigns now.
        """
        self._now = now_ms
        self._md.update(now_ms, self._retain(partitions_per_topic))
        if self._leader_wait is not None and self._md.version > self._leader_wait[1]:
            resp, _version = self._leader_wait
            self._leader_wait = None
            if self._join is not None and self._join.stage == "join":
                self._leader_assign(resp)
        return self._run()

    def metadata_failed(self, now_ms: float) -> list[MemberOutput]:
        """No broker answered its metadata request (``failedUpdate``): it tries again later."""
        self._now = now_ms
        self._md.failed(now_ms)
        return self._run()

    def request_metadata_update(self, now_ms: float) -> list[MemberOutput]:
        """``Metadata.requestUpdate(false)``: its metadata may be stale.

        A fetch answered NOT_LEADER_OR_FOLLOWER or UNKNOWN_TOPIC_OR_PARTITION
        (K@3.9 ``FetchCollector.handleInitializeErrors`` 333-339,
        ``FetchUtils.requestMetadataUpdate``), a partition without a known
        leader (``AbstractFetch.prepareFetchRequests`` 421) or a dropped
        connection (``NetworkClient.handleServerDisconnect`` 1189). The request
        goes once the back-off after the last one allows; nothing else runs.
        """
        self._now = now_ms
        if self.closed or not self._started:
            return []
        self._md.request_update()
        self._maybe_request_metadata()
        out, self._out = self._out, []
        return out

    def subscribe(
        self, now_ms: float, topics: Sequence[str], topic_pattern: str | None = None
    ) -> list[MemberOutput]:
        """``KafkaConsumer.subscribe`` with another set of topics, or a pattern.

        ``ConsumerCoordinator.rejoinNeededOrPending`` sees that the
        subscription differs from the one it joined with and requests a
        rejoin ("subscription has changed"); the JoinGroup carries the new
        topics. Partitions of dropped topics stay assigned until that
        rebalance's ``onJoinPrepare`` (EAGER: all revoked; COOPERATIVE: those
        of the dropped topics). Metadata for the new topics is asked for at
        once (``requestUpdateForNewTopics``, K@3.9 ``ClassicKafkaConsumer``
        483, 581); a pattern is matched against the metadata held now
        (``updatePatternSubscription``) and again at that answer. Java
        requires ``unsubscribe()`` between a names and a pattern subscription;
        here it changes directly (an emulator shortcut).

        Raises:
            ValueError: no topics and no pattern.
            TopicRegexError: a pattern ``java.util.regex`` rejects.
        """
        self._now = now_ms
        if topic_pattern is None:
            new = tuple(sorted(set(topics)))
            if not new:
                raise ValueError("a member subscribes to at least one topic")
            if (new, None) == (self.topics, self.topic_pattern) or self.closed or self._closing:
                return []
            self.topic_pattern, self._matcher = None, None
            self.topics = new
        else:
            matcher = compile_pattern(topic_pattern, "java")
            if topic_pattern == self.topic_pattern or self.closed or self._closing:
                return []
            self.topic_pattern, self._matcher = topic_pattern, matcher
            self._update_pattern_subscription("subscribe")
        self._md.request_update_for_new_topics()
        if self._joined_subscription is None or self._joined_subscription != self.topics:
            self._request_rejoin("subscription has changed")
        return self._run()

    def request_failed(self, now_ms: float, corr: int) -> list[MemberOutput]:
        """Request ``corr``'s connection dropped (the broker is gone): ``DisconnectException``.

        A FindCoordinator is retried after ``retry.backoff.ms``; anything sent
        to the coordinator marks it unknown, which fails every request in
        flight to it (``markCoordinatorUnknown``). Unknown ``corr`` (answered
        or abandoned meanwhile) is ignored.
        """
        self._now = now_ms
        p = self._pending.get(corr)
        if p is None:
            return []
        self._md.request_update()  # NetworkClient.handleServerDisconnect
        if p.kind == "find":
            del self._pending[corr]
            self._find_corr = None
            self._next_lookup_at = now_ms + self.config.retry_backoff_ms
        else:
            self._mark_coordinator_unknown("disconnected", log=True)
        return self._run()

    def close(self, now_ms: float) -> list[MemberOutput]:
        """``KafkaConsumer.close()``: commit (auto-commit on), revoke, leave if dynamic.

        The last commit is waited for up to ``close_timeout_ms``; a dynamic
        member then sends LeaveGroup, a static one does not (B5, B9).
        """
        self._now = now_ms
        if self.closed or self._closing:
            return []
        self._closing = True
        self._close_deadline = now_ms + self.config.close_timeout_ms
        if self.config.enable_auto_commit and self._all_consumed():
            self._close_commit = self._commit_async(self._all_consumed(), "close")
        return self._run()

    def next_deadline(self) -> float | None:
        """The earliest time after the last input at which :meth:`poll` has work to do.

        Every input already ran what was due at its time, so only later
        times are reported.
        """
        if self.closed:
            return None
        times = [p.expires_at for p in self._pending.values()]
        if self.coordinator is None and self._find_corr is None:
            times.append(self._next_lookup_at)
        if self._closing:
            times.append(self._close_deadline)
            if self._close_retry_at is not None:
                times.append(self._close_retry_at)
        if self._hb_active() and self.coordinator is not None:
            times.append(self._session_deadline)
            times.append(self._next_heartbeat_at)
            poll_deadline = self._poll_deadline()
            if poll_deadline is not None:
                times.append(poll_deadline)
        if self._started:
            md_due = self._md.request_due_at(self._now)
            if md_due is not None:
                times.append(md_due)
        if self._app_in_poll and not self._closing and self.coordinator is not None:
            if self._rejoin_needed or self._join is not None or self._metadata_changed():
                times.append(self._join_retry_at)
                times.append(self._join_prepare_retry_at)
                if self._join_prepare_deadline is not None:
                    times.append(self._join_prepare_deadline)
                if self._refreshes_before_join() and self._md_wait_version is None:
                    # poll() asks for fresh metadata again once the back-off allows
                    times.append(self._md.last_refresh_ms + self._md.backoff_ms)
            else:
                if self._next_auto_commit is not None and self.config.enable_auto_commit:
                    times.append(self._next_auto_commit)
                if self._initializing and self._fetch_corr is None:
                    times.append(self._next_fetch_at)
        future = [t for t in times if t > self._now]
        return min(future) if future else None

    # ---------------------------------------------------------------- plumbing

    def _next_corr(self) -> int:
        self._corr += 1
        return self._corr

    def _emit(self, kind: EventKind, **fields: object) -> None:
        base: dict[str, object] = {
            "group": self.group,
            "member": self.member,
            "generation": self.generation.generation_id,
        }
        if self.generation.member_id:
            base["member_id"] = self.generation.member_id
        base.update({k: v for k, v in fields.items() if v is not None})
        self._out.append(Emit(kind, base))

    def _send(
        self,
        request: GroupRequest,
        kind: str,
        *,
        timeout_ms: int | None = None,
        commit: _Commit | None = None,
        partitions: tuple[TopicPartition, ...] = (),
    ) -> None:
        timeout = self.config.request_timeout_ms if timeout_ms is None else timeout_ms
        self._pending[request.corr] = _Pending(
            kind, self.generation, self._now + timeout, commit, partitions, self._now
        )
        self._out.append(request)

    def _run(self) -> list[MemberOutput]:
        """Run whatever can run now, then hand back what was produced."""
        if not self.closed and self._started:
            self._heartbeat_thread()
            if self._poll_exception is not None and self._app_in_poll and not self.closed:
                self._fatal(self._poll_exception.name)
            if self._app_in_poll and not self._closing and not self.closed:
                self._application_thread()
            if self._closing and not self.closed:
                self._closing_step()
            if not self.closed:
                self._maybe_request_metadata()
        out, self._out = self._out, []
        return out

    def _maybe_request_metadata(self) -> None:
        """``NetworkClient.DefaultMetadataUpdater.maybeUpdate``: ask when the cache says it is time.

        The request names the metadata topics (``ConsumerMetadata.newMetadataRequestBuilder``,
        which may create a missing one with ``allow.auto.create.topics``), or
        every topic for a pattern subscription (``allTopics()``).
        """
        due = self._md.request_due_at(self._now)
        if due is None or due > self._now:
            return
        self._md.sent()
        if self._matcher is not None:
            self._out.append(RequestMetadata(None, False))
        else:
            self._out.append(
                RequestMetadata(
                    tuple(sorted(self._metadata_topics())), self.config.allow_auto_create_topics
                )
            )

    def _fatal(self, reason: str) -> None:
        """An exception reached the application, which dies with it."""
        if self.closed:
            return
        self.failed = reason
        self._drop_partitions(self.owned, lost=True)
        self.closed = True
        self._hb_enabled = False
        self._pending.clear()
        self._emit(EventKind.CONSUMER_STOPPED, reason=f"fatal:{reason}")

    def _hb_active(self) -> bool:
        return self._hb_enabled and not self.closed and not self.state.has_not_joined_group

    def _poll_deadline(self) -> float | None:
        if self._app_in_poll:
            return None
        return self._last_app_poll + self.config.max_poll_interval_ms

    # ---------------------------------------------------------- coordinator

    def _lookup_coordinator(self) -> None:
        """``lookupCoordinator``: one FindCoordinator at a time, spaced by the back-off."""
        if self._find_corr is not None or self._now < self._next_lookup_at:
            return
        self.stats.lookups += 1
        req = FindCoordinatorRequest(self._next_corr(), self.group)
        self._find_corr = req.corr
        self._send(req, "find")

    def _on_find_coordinator(self, p: _Pending, resp: GroupResponse) -> None:
        self._find_corr = None
        assert isinstance(resp, FindCoordinatorResponse)
        if resp.error is Errors.NONE and resp.node_id >= 0:
            self.coordinator = resp.node_id
            self._session_deadline = self._now + self.config.session_timeout_ms
            self._emit(EventKind.COORDINATOR_FOUND, broker=resp.node_id)
        else:
            self._next_lookup_at = self._now + self.config.retry_backoff_ms

    def _mark_coordinator_unknown(self, cause: str, *, log: bool = False) -> None:
        """``markCoordinatorUnknown``: forget it and fail what was sent to it.

        ``log`` records the cause when no error response was logged for it.
        """
        if self.coordinator is None:
            return
        if log:
            self._emit(
                EventKind.REQUEST_ERROR, reason=Errors.COORDINATOR_NOT_AVAILABLE.name, detail=cause
            )
        self.coordinator = None
        for corr, p in sorted(self._pending.items()):
            if p.kind != "find":
                del self._pending[corr]
                self._fail_disconnected(p)

    def _fail_disconnected(self, p: _Pending) -> None:
        """A request lost with its connection: ``onFailure(DisconnectException)``."""
        if p.kind in ("join", "sync"):
            self._fail_join(_DISCONNECTED)
        elif p.kind == "heartbeat":
            self._fail_heartbeat()
        elif p.kind == "commit":
            assert p.commit is not None
            self._complete_commit(p.commit, _DISCONNECTED)
        elif p.kind == "fetch":
            self._fetch_corr = None
            self._next_fetch_at = self._now + self.config.retry_backoff_ms

    def _on_request_timeout(self, corr: int, p: _Pending) -> None:
        del self._pending[corr]
        self._emit(EventKind.REQUEST_ERROR, reason="REQUEST_TIMED_OUT", detail=p.kind)
        # NetworkClient.handleTimedOutRequests: a disconnection, which asks for metadata
        self._md.request_update()
        if p.kind == "find":
            self._find_corr = None
            self._next_lookup_at = self._now + self.config.retry_backoff_ms
            return
        self._fail_disconnected(p)
        self._mark_coordinator_unknown(f"{p.kind} request timed out")

    # ---------------------------------------------------- heartbeat thread

    def _heartbeat_thread(self) -> None:
        """One pass of ``HeartbeatThread.run``."""
        if not self._hb_enabled or self.closed:
            return
        if self.state.has_not_joined_group:
            self._hb_enabled = False
            return
        now = self._now
        if self.coordinator is None:
            self._lookup_coordinator()
        elif now >= self._session_deadline:
            self._mark_coordinator_unknown(
                "session timed out without receiving a heartbeat response", log=True
            )
            self._lookup_coordinator()
        elif (deadline := self._poll_deadline()) is not None and now >= deadline:
            self._emit(
                EventKind.REBALANCE_TRIGGERED,
                reason="poll_timeout",
                detail="consumer poll timeout has expired",
                duration_ms=float(now - self._last_app_poll),
            )
            self._maybe_leave_group("consumer poll timeout has expired.")
        elif now >= self._next_heartbeat_at:
            self._next_heartbeat_at = now + self.config.heartbeat_interval_ms
            self.stats.heartbeats += 1
            self._send(
                HeartbeatRequest(
                    self._next_corr(),
                    self.group,
                    generation_id=self.generation.generation_id,
                    member_id=self.generation.member_id,
                    group_instance_id=self.config.group_instance_id,
                ),
                "heartbeat",
            )

    def _enable_heartbeat(self) -> None:
        """``HeartbeatThread.enable``: ``resetTimeouts`` (session, poll and heartbeat timers)."""
        self._hb_enabled = True
        self._session_deadline = self._now + self.config.session_timeout_ms
        self._last_app_poll = self._now
        self._next_heartbeat_at = self._now + self.config.heartbeat_interval_ms

    def _receive_heartbeat(self) -> None:
        self._session_deadline = self._now + self.config.session_timeout_ms

    def _fail_heartbeat(self) -> None:
        self._next_heartbeat_at = self._now + self.config.retry_backoff_ms

    def _on_heartbeat(self, p: _Pending, resp: GroupResponse) -> None:
        """``HeartbeatResponseHandler`` and the heartbeat thread's listener."""
        err = resp.error
        if err is Errors.NONE:
            self._receive_heartbeat()
        elif err in (Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR):
            self._mark_coordinator_unknown(f"heartbeat: {err.name}")
            self._fail_heartbeat()
        elif err is Errors.REBALANCE_IN_PROGRESS:
            if self.state is MemberState.STABLE:
                self._request_rejoin("group is already rebalancing")
            self._receive_heartbeat()
        elif err in (
            Errors.ILLEGAL_GENERATION,
            Errors.UNKNOWN_MEMBER_ID,
            Errors.FENCED_INSTANCE_ID,
        ):
            if self.generation == p.generation:
                self._reset_state_and_rejoin(
                    f"encountered {err.name} from HEARTBEAT response",
                    reset_member_id=err is not Errors.ILLEGAL_GENERATION,
                )
                if err is Errors.FENCED_INSTANCE_ID:
                    self._poll_exception = err
                else:
                    self._fail_heartbeat()
            else:
                self._receive_heartbeat()  # stale generation: ignored
        else:
            self._fail_heartbeat()

    def _maybe_leave_group(self, reason: str) -> None:
        """``maybeLeaveGroup``: only dynamic members send LeaveGroup (2.3+)."""
        if (
            not self.config.is_static
            and self.coordinator is not None
            and self.state is not MemberState.UNJOINED
            and self.generation.has_member_id
        ):
            self._send(
                LeaveGroupRequest(
                    self._next_corr(),
                    self.group,
                    members=((self.generation.member_id, None),),
                    reason=reason,
                ),
                "leave",
            )
        self._reset_state_and_rejoin("consumer pro-actively leaving the group", True)

    def _on_leave_group(self, p: _Pending, resp: GroupResponse) -> None:
        assert isinstance(resp, LeaveGroupResponse)
        if resp.error in (Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR):
            self._mark_coordinator_unknown(f"leave group: {resp.error.name}")

    # --------------------------------------------------------- rejoin state

    def _request_rejoin(self, reason: str) -> None:
        if not self._rejoin_needed and not self._closing:
            self._emit(EventKind.REBALANCE_TRIGGERED, reason=reason)
        self._rejoin_reason = reason
        self._rejoin_needed = True

    def _reset_state_and_rejoin(self, reason: str, reset_member_id: bool) -> None:
        """``resetStateAndRejoin``: UNJOINED, generation reset (member id kept or not)."""
        self.state = MemberState.UNJOINED
        if reset_member_id:
            self.generation = NO_GENERATION_INFO
        else:
            self.generation = Generation(NO_GENERATION, self.generation.member_id, None)
        self._request_rejoin(reason)
        self._needs_join_prepare = True

    def _rejoin_needed_or_pending(self) -> bool:
        """``ConsumerCoordinator.rejoinNeededOrPending`` (K@3.9 874-896).

        The leader rejoins when the metadata snapshot no longer matches the
        one it assigned from ("cached metadata has changed": a partition
        count changed, a subscribed topic was created or deleted); any member
        when its subscription is not the one it joined with ("subscription has
        changed": a pattern matched other topics).
        """
        if self._metadata_changed():
            if not self._rejoin_needed:
                self._request_rejoin("cached metadata has changed")
            return True
        if self._subscription_changed():
            if not self._rejoin_needed:
                self._request_rejoin("subscription has changed")
            return True
        return self._rejoin_needed or self._join is not None

    def _metadata_changed(self) -> bool:
        a = self._assignment_snapshot
        return a is not None and not a.matches(self._snapshot)

    def _subscription_changed(self) -> bool:
        j = self._joined_subscription
        return j is not None and j != self.topics

    # ------------------------------------------------------------- metadata

    def _pattern_matches(self, topic: str) -> bool:
        """``matchesSubscribedPattern``, with ``exclude.internal.topics`` (``retainTopic``)."""
        if self._matcher is None:
            return False
        if self.config.exclude_internal_topics and topic in INTERNAL_TOPICS:
            return False
        return self._matcher.matches(topic)

    def _retain(self, partitions_per_topic: Mapping[str, int]) -> dict[str, int]:
        """``ConsumerMetadata.retainTopic``: the topics of an answer the cache keeps.

        Those the member or (a leader) the group subscribes to
        (``needsMetadata``), and those its pattern matches (never an internal
        topic with ``exclude.internal.topics``).
        """
        needed = set(self.topics) | self._group_subscription
        return {
            t: n
            for t, n in sorted(partitions_per_topic.items())
            if t in needed or self._pattern_matches(t)
        }

    def _metadata_topics(self) -> frozenset[str]:
        """``SubscriptionState.metadataTopics``: the group's topics for a leader, else its own."""
        own = frozenset(self.topics)
        group = self._group_subscription
        if not group:
            return own
        return group if group >= own else group | own

    def _maybe_update_subscription_metadata(self) -> None:
        """``maybeUpdateSubscriptionMetadata`` (K@3.9 436-448): on a new metadata version,
        match the pattern again and take a new snapshot."""
        if self._md.version <= self._snapshot.version:
            return
        if self._matcher is not None:
            self._update_pattern_subscription("metadata" if self._snapshot.version else "start")
        topics = self._md.topics
        self._snapshot = MetadataSnapshot(
            self._md.version,
            {t: topics[t] for t in sorted(self._metadata_topics()) if t in topics},
        )

    def _update_pattern_subscription(self, reason: str) -> None:
        """``updatePatternSubscription`` (K@3.9 281-287): the subscription is what the
        pattern matches among the topics of the metadata.

        A change is logged (TOPIC_PATTERN_RESOLVED) and asks for metadata of the
        new topics at once (``requestUpdateForNewTopics``).
        """
        if self._matcher is None:
            return
        matched = tuple(t for t in sorted(self._md.topics) if self._pattern_matches(t))
        if matched == self.topics:
            return
        self.topics = matched
        self._log_pattern(reason)
        self._md.request_update_for_new_topics()

    def _log_pattern(self, reason: str) -> None:
        self._emit(
            EventKind.TOPIC_PATTERN_RESOLVED,
            pattern=self.topic_pattern,
            topics=format_topics(self.topics),
            count=len(self.topics),
            reason=reason,
            detail=f"version={self._md.version}",
        )

    def _refreshes_before_join(self) -> bool:
        """Whether ``poll()`` asks for fresh metadata before rejoining (a pattern, KAFKA-7126)."""
        return self._matcher is not None and kafka_version_at_least(
            self.config.kafka_version, PATTERN_REFRESH_BEFORE_JOIN_SINCE
        )

    # --------------------------------------------------- application thread

    def _application_thread(self) -> None:
        """``ConsumerCoordinator.poll`` (K@3.9 470-535) and ``updateFetchPositions``, non-blocking.

        A pattern subscriber about to (re)join asks for fresh metadata when the
        back-off allows (``requestUpdate(true)``, from 2.1: KAFKA-7126) and
        waits for an update requested or due (``ensureFreshMetadata``) before
        it goes on, matching the pattern on that answer; meanwhile nothing
        else of ``poll()`` runs (no join, no auto-commit).
        """
        if self._md_wait_version is not None:
            if self._md.version == self._md_wait_version:
                return  # awaitMetadataUpdate
            self._md_wait_version = None
        self._maybe_update_subscription_metadata()
        if self.coordinator is None:
            self._lookup_coordinator()
            return
        if self._rejoin_needed_or_pending():
            if self._matcher is not None:
                now = self._now
                if self._refreshes_before_join() and self._md.time_to_allow_update(now) == 0:
                    self._md.request_update()
                if self._md.update_requested or self._md.time_to_next_update(now) == 0:
                    self._md_wait_version = self._md.version
                    return
                self._maybe_update_subscription_metadata()
            if not self._join_group_if_needed():
                return
        self._maybe_auto_commit()
        self._maybe_fetch_committed()

    def _join_group_if_needed(self) -> bool:
        """``joinGroupIfNeeded`` with a zero timer: True once the group is joined."""
        while self._rejoin_needed_or_pending():
            if self.closed:
                return False
            if self.coordinator is None:
                self._lookup_coordinator()
                return False
            if self._now < self._join_retry_at:
                return False
            if self._needs_join_prepare:
                self._needs_join_prepare = False
                if not self._on_join_prepare():
                    self._needs_join_prepare = True
                    return False
            if self._join is None:
                self._initiate_join_group()
                return False
            fut = self._join
            if fut.stage != "done":
                return False
            self._join = None
            outcome = fut.outcome
            assert outcome is not None
            if outcome.ok:
                if not self.generation.is_reset and self.state is MemberState.STABLE:
                    assert fut.assignment is not None
                    self._on_join_complete(fut.assignment)
                    self._needs_join_prepare = True
                else:
                    self._reset_state_and_rejoin(
                        "rebalance failed since the generation/state was modified by "
                        "heartbeat thread before the rebalance callback triggered",
                        True,
                    )
                continue
            if outcome.error is not Errors.MEMBER_ID_REQUIRED:
                self._request_rejoin(f"rebalance failed due to {outcome.exception}")
            if outcome.error in _REJOIN_AT_ONCE:
                continue
            if not outcome.retriable:
                self._fatal(outcome.exception)
                return False
            self._join_retry_at = self._now + self.config.retry_backoff_ms
            return False
        return True

    def _initiate_join_group(self) -> None:
        """``initiateJoinGroup`` / ``sendJoinGroupRequest``."""
        self.state = MemberState.PREPARING_REBALANCE
        if self._last_rebalance_start is None:
            self._last_rebalance_start = self._now
            self.stats.rebalances += 1
            self._emit(EventKind.REBALANCE_STARTED, reason=self._rejoin_reason)
        self.stats.joins += 1
        self._join = _JoinFuture()
        timeout = max(
            self.config.request_timeout_ms,
            self.config.rebalance_timeout_ms + JOIN_GROUP_TIMEOUT_LAPSE_MS,
        )
        self._send(
            JoinGroupRequest(
                self._next_corr(),
                self.group,
                session_timeout_ms=self.config.session_timeout_ms,
                rebalance_timeout_ms=self.config.rebalance_timeout_ms,
                member_id=self.generation.member_id,
                group_instance_id=self.config.group_instance_id,
                protocol_type=PROTOCOL_TYPE,
                protocols=self._join_protocols(),
                reason=self._rejoin_reason or None,
                client_id=self.config.client_id,
            ),
            "join",
            timeout_ms=timeout,
        )

    def _join_protocols(self) -> tuple[tuple[str, Subscription], ...]:
        """``ConsumerCoordinator.metadata``: one subscription per assignor; it is the
        ``joinedSubscription`` from now on."""
        self._joined_subscription = self.topics
        owned = tuple(sorted(self.owned))
        out: list[tuple[str, Subscription]] = []
        for a in self._assignors:
            user_data = None
            if a.name == "sticky":
                user_data = _encode_sticky_user_data(
                    self._last_assignment, self._last_assignment_generation
                )
            out.append(
                (
                    a.name,
                    Subscription(
                        topics=self.topics,
                        owned_partitions=owned,
                        generation_id=self.generation.generation_id,
                        user_data=user_data,
                    ),
                )
            )
        return tuple(out)

    def _fail_join(self, outcome: _Outcome) -> None:
        self._leader_wait = None
        fut = self._join
        if fut is not None and fut.stage != "done":
            fut.stage = "done"
            fut.outcome = outcome

    def _on_join_group(self, p: _Pending, resp: GroupResponse) -> None:
        """``JoinGroupResponseHandler``."""
        assert isinstance(resp, JoinGroupResponse)
        if self._join is None or self._join.stage != "join":
            return  # the future this answers was already failed (disconnect)
        err = resp.error
        if err is Errors.NONE:
            self._join_ms.append(round(self._now - p.sent_at, 1))  # sensors.joinSensor
            if resp.protocol_type is not None and resp.protocol_type != PROTOCOL_TYPE:
                self._fail_join(
                    _Outcome(
                        False,
                        Errors.INCONSISTENT_GROUP_PROTOCOL,
                        "InconsistentGroupProtocolException",
                    )
                )
            elif self.state is not MemberState.PREPARING_REBALANCE:
                self._fail_join(_Outcome(False, None, "UnjoinedGroupException", True))
            else:
                self.state = MemberState.COMPLETING_REBALANCE
                self._enable_heartbeat()
                self.generation = Generation(resp.generation_id, resp.member_id, resp.protocol_name)
                if resp.leader == resp.member_id:
                    self._on_leader_elected(resp)
                else:
                    self._is_leader = False
                    self._send_sync_group(())
        elif err is Errors.UNKNOWN_MEMBER_ID:
            if self.generation == p.generation:
                self._reset_state_and_rejoin(
                    f"encountered {err.name} from JOIN_GROUP response", True
                )
            self._fail_join(_outcome_of(err))
        elif err in (Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR):
            self._mark_coordinator_unknown(f"join group: {err.name}")
            self._fail_join(_outcome_of(err))
        elif err is Errors.MEMBER_ID_REQUIRED:
            self.generation = Generation(NO_GENERATION, resp.member_id, None)
            self._request_rejoin(f"need to re-join with the given member-id: {resp.member_id}")
            self._fail_join(_outcome_of(err))
        else:
            # FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL, INVALID_SESSION_TIMEOUT,
            # GROUP_MAX_SIZE_REACHED are fatal; REBALANCE_IN_PROGRESS and
            # COORDINATOR_LOAD_IN_PROGRESS are retried.
            self._fail_join(_outcome_of(err))

    def _on_leader_elected(self, resp: JoinGroupResponse) -> None:
        """``ConsumerCoordinator.onLeaderElected``: run the assignor, send SyncGroup.

        ``updateGroupSubscription`` (K@3.9 550-562) first: the leader's
        metadata topics become the whole group's; if some member subscribes
        to a topic it does not, it asks for their metadata at once
        (``requestUpdateForNewTopics``), and it waits for an update requested
        or due (``ensureFreshMetadata``) before it assigns: the SyncGroup
        goes after that answer (:meth:`update_metadata`).
        """
        if self._lookup_assignor(resp.protocol_name) is None:
            self._fail_join(_Outcome(False, None, "IllegalStateException:invalid protocol"))
            return
        group = frozenset(t for m in resp.members for t in m.metadata.topics)
        self._group_subscription = group
        if not frozenset(self.topics) >= group:
            self._md.request_update_for_new_topics()
        if self._md.update_requested or self._md.time_to_next_update(self._now) == 0:
            self._leader_wait = (resp, self._md.version)
            return
        self._leader_assign(resp)

    def _leader_assign(self, resp: JoinGroupResponse) -> None:
        """The rest of ``onLeaderElected``, on fresh metadata: assign, snapshot, SyncGroup."""
        self._maybe_update_subscription_metadata()
        assignor = self._lookup_assignor(resp.protocol_name)
        assert assignor is not None
        members: dict[str, MemberSubscription] = {}
        for m in resp.members:
            sub = MemberSubscription.from_join_group_member(m)
            if assignor.name == "sticky" and m.metadata.user_data:
                prev, gen = _decode_sticky_user_data(m.metadata.user_data)
                if not sub.owned_partitions:
                    sub = MemberSubscription(
                        sub.member_id, sub.group_instance_id, sub.topics, prev, gen
                    )
            members[m.member_id] = sub
        self._is_leader = True
        if resp.skip_assignment:
            self._assignment_snapshot = self._snapshot
            self._send_sync_group(())
            return
        try:
            assignment = assignor.assign(self._md.topics, members)
            if self.protocol == COOPERATIVE and assignor.name != COOPERATIVE_STICKY:
                owned = {mid: m.owned_partitions for mid, m in members.items()}
                self._validate_cooperative(owned, assignment)
        except (ValueError, RuntimeError) as exc:  # IllegalStateException in Java
            self._emit(EventKind.REQUEST_ERROR, reason="IllegalStateException", detail=str(exc))
            self._fail_join(_Outcome(False, None, "IllegalStateException"))
            return
        self._assignment_snapshot = self._snapshot
        self._send_sync_group(
            tuple((mid, Assignment(tuple(parts))) for mid, parts in assignment.items())
        )

    def _lookup_assignor(self, name: str | None) -> ClientAssignor | None:
        for a in self._assignors:
            if a.name == name:
                return a
        return None

    def _send_sync_group(self, assignments: tuple[tuple[str, Assignment], ...]) -> None:
        fut = self._join
        if fut is not None:
            fut.stage = "sync"
        self._send(
            SyncGroupRequest(
                self._next_corr(),
                self.group,
                generation_id=self.generation.generation_id,
                member_id=self.generation.member_id,
                group_instance_id=self.config.group_instance_id,
                protocol_type=PROTOCOL_TYPE,
                protocol_name=self.generation.protocol_name,
                assignments=assignments,
            ),
            "sync",
        )

    def _on_sync_group(self, p: _Pending, resp: GroupResponse) -> None:
        """``SyncGroupResponseHandler``."""
        assert isinstance(resp, SyncGroupResponse)
        if self._join is None or self._join.stage != "sync":
            return  # the future this answers was already failed (disconnect)
        err = resp.error
        if err is Errors.NONE:
            self._sync_ms.append(round(self._now - p.sent_at, 1))  # sensors.syncSensor
            if resp.protocol_type is not None and resp.protocol_type != PROTOCOL_TYPE:
                self._fail_join(
                    _Outcome(
                        False,
                        Errors.INCONSISTENT_GROUP_PROTOCOL,
                        "InconsistentGroupProtocolException",
                    )
                )
            elif not self.generation.is_reset and self.state is MemberState.COMPLETING_REBALANCE:
                name = resp.protocol_name
                if name is not None and name != self.generation.protocol_name:
                    self._fail_join(
                        _Outcome(
                            False,
                            Errors.INCONSISTENT_GROUP_PROTOCOL,
                            "InconsistentGroupProtocolException",
                        )
                    )
                    return
                self.state = MemberState.STABLE
                self._rejoin_reason = ""
                self._rejoin_needed = False
                started = self._last_rebalance_start
                self._last_rebalance_start = None
                self._emit(
                    EventKind.REBALANCE_COMPLETED,
                    duration_ms=None if started is None else float(self._now - started),
                    count=len(resp.assignment.partitions),
                    partitions=format_partitions(resp.assignment.partitions),
                    detail=json.dumps({"join_ms": self._join_ms, "sync_ms": self._sync_ms}),
                )
                self._join_ms, self._sync_ms = [], []
                fut = self._join
                if fut is not None:
                    fut.stage = "done"
                    fut.assignment = resp.assignment
                    fut.outcome = _OK
            else:
                self._fail_join(_outcome_of(Errors.ILLEGAL_GENERATION))
            return
        if err in (Errors.UNKNOWN_MEMBER_ID, Errors.ILLEGAL_GENERATION):
            if self.generation == p.generation:
                self._reset_state_and_rejoin(
                    f"encountered {err.name} from SYNC_GROUP response",
                    err is not Errors.ILLEGAL_GENERATION,
                )
        elif err in (Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR):
            self._mark_coordinator_unknown(f"sync group: {err.name}")
        self._fail_join(_outcome_of(err))

    # ------------------------------------------------ rebalance callbacks

    def _on_join_prepare(self) -> bool:
        """``ConsumerCoordinator.onJoinPrepare``: commit, then revoke (or lose).

        Returns False while the pre-rebalance commit is in flight or backing
        off. A retriable failure is retried until ``joinPrepareTimer`` (the
        rebalance timeout, ``max.poll.interval.ms``) runs out (K@3.9 711-806).

        KAFKA-16235 (open in 3.9; a regression since 3.2.1, KAFKA-14024): the
        commit is ``allConsumed()``, so once a topic the member owns is
        deleted its partitions fail with UNKNOWN_TOPIC_OR_PARTITION, retriable
        since 2.0 (KAFKA-6829), and every retry fails the same way: the
        rebalance waits the whole rebalance timeout, and an EAGER member,
        whose partitions are pending revocation, fetches nothing meanwhile.
        2.0 to 3.1 retried inside ``commitOffsetsSync`` bounded by the same
        timeout (the same wait here); 3.2.0 retried without a bound
        (KAFKA-13310's ``onJoinPrepare``), which is not emulated; before 2.0 the
        error was not retriable and the rebalance went on at once.
        """
        now = self._now
        if self._join_prepare_deadline is None:
            self._join_prepare_deadline = now + self.config.rebalance_timeout_ms
        if now < self._join_prepare_retry_at:
            return False
        if self.config.enable_auto_commit and self._prepare_commit is None:
            if self.protocol == EAGER:
                self._stop_fetching(self.owned)  # maybeMarkPartitionsPendingRevocation
            self._prepare_commit = self._commit_async(self._all_consumed(), "rebalance")
        commit = self._prepare_commit
        if commit is not None:
            completed = True
            if now >= self._join_prepare_deadline:
                pass  # "joinPrepare timeout. Will continue to join group"
            elif commit.outcome is None or (not commit.outcome.ok and commit.outcome.retriable):
                completed = False
            if commit.outcome is not None:
                self._prepare_commit = None
            if not completed:
                if commit.outcome is not None:
                    self._join_prepare_retry_at = now + self.config.retry_backoff_ms
                return False
        if self.generation.generation_id == NO_GENERATION or not self.generation.has_member_id:
            if self.owned:
                self._drop_partitions(self.owned, lost=True)
        elif self.protocol == EAGER:
            self._drop_partitions(self.owned, lost=False)
        else:
            gone = frozenset(tp for tp in self.owned if tp[0] not in self.topics)
            if gone:
                self._drop_partitions(gone, lost=False)
        self._is_leader = False
        self._group_subscription = frozenset()  # resetGroupSubscription
        self._join_prepare_deadline = None
        self._prepare_commit = None
        return True

    def _on_join_complete(self, assignment: Assignment) -> None:
        """``ConsumerCoordinator.onJoinComplete``."""
        if not self._is_leader:
            self._assignment_snapshot = None
        assigned = frozenset(assignment.partitions)
        self._last_assignment = tuple(sorted(assigned))
        self._last_assignment_generation = self.generation.generation_id
        # checkAssignmentMatchedSubscription: by the pattern itself for a pattern subscription
        if any(
            not (self._pattern_matches(t) if self._matcher is not None else t in self.topics)
            for t, _p in assigned
        ):
            self._request_rejoin("received assignment does not match the current subscription")
            return
        owned = self.owned
        added = assigned - owned
        if self.protocol == COOPERATIVE:
            revoked = owned - assigned
            if revoked:
                self._drop_partitions(revoked, lost=False)
                self._request_rejoin("need to revoke partitions and re-join")
        self._maybe_update_joined_subscription(assigned)
        if self.config.enable_auto_commit:
            self._next_auto_commit = self._now + self.config.auto_commit_interval_ms
        self.owned = assigned
        for tp in list(self.positions):
            if tp not in assigned:
                del self.positions[tp]
        # invokePartitionsAssigned runs after every join, with nothing added too.
        ordered = sorted(added)
        self._emit(
            EventKind.PARTITIONS_ASSIGNED,
            count=len(ordered),
            partitions=format_partitions(ordered),
        )
        if added:
            for t, part in ordered:
                self._emit(EventKind.OWNERSHIP_CLAIMED, topic=t, partition=part)
            self._initializing |= added
            self._next_fetch_at = self._now

    def _maybe_update_joined_subscription(self, assigned: frozenset[TopicPartition]) -> None:
        """``maybeUpdateJoinedSubscription`` (K@3.9 298-321): a pattern subscriber takes the
        topics the leader assigned that it did not join with (the leader's metadata
        was newer), into its subscription and its joined subscription."""
        if self._matcher is None:
            return
        joined = frozenset(self._joined_subscription or ())
        added = {t for t, _p in assigned} - joined
        if not added:
            return
        new = tuple(sorted(set(self.topics) | added))
        if new != self.topics:
            self.topics = new
            self._log_pattern("assignment")
            self._md.request_update_for_new_topics()
        self._joined_subscription = tuple(sorted(joined | added))

    def _drop_partitions(self, partitions: Iterable[TopicPartition], *, lost: bool) -> None:
        """``onPartitionsRevoked`` / ``onPartitionsLost`` and the assignment change."""
        gone = sorted(set(partitions) & self.owned)
        if not gone:
            return
        if not lost and self.rebalance_listener == "commit-on-revoke":
            # onPartitionsRevoked: the application commits what it consumed.
            mine = {tp: off for tp, off in self._all_consumed().items() if tp in set(gone)}
            if mine:
                self._commit_async(mine, "revoke_callback")
        self._stop_fetching(gone)
        kind = EventKind.PARTITIONS_LOST if lost else EventKind.PARTITIONS_REVOKED
        self._emit(kind, count=len(gone), partitions=format_partitions(gone))
        for t, part in gone:
            self._emit(
                EventKind.OWNERSHIP_RELEASED,
                topic=t,
                partition=part,
                reason="lost" if lost else "revoked",
            )
        self.owned = self.owned - frozenset(gone)
        for tp in gone:
            self.positions.pop(tp, None)
            self._initializing.discard(tp)

    def _stop_fetching(self, partitions: Iterable[TopicPartition]) -> None:
        stop = sorted(set(partitions) & self.fetching)
        if stop:
            self.fetching = self.fetching - frozenset(stop)
            self._out.append(StopFetching(tuple(stop)))

    # ------------------------------------------------------------- offsets

    def _all_consumed(self) -> dict[TopicPartition, int]:
        """``SubscriptionState.allConsumed``: positions of owned partitions."""
        return {tp: off for tp, off in sorted(self.positions.items()) if tp in self.owned}

    def _maybe_auto_commit(self) -> None:
        """``maybeAutoCommitOffsetsAsync``."""
        if not self.config.enable_auto_commit or self._next_auto_commit is None:
            return
        if self._now >= self._next_auto_commit:
            self._next_auto_commit = self._now + self.config.auto_commit_interval_ms
            self._commit_async(self._all_consumed(), "auto")

    def _commit_async(self, offsets: dict[TopicPartition, int], reason: str) -> _Commit:
        """``commitOffsetsAsync`` / ``sendOffsetCommitRequest`` with the stable generation."""
        commit = _Commit(dict(offsets), reason)
        if not offsets:
            commit.outcome = _OK
            return commit
        if self.coordinator is None:
            self._complete_commit(
                commit,
                _Outcome(
                    False, Errors.COORDINATOR_NOT_AVAILABLE, "RetriableCommitFailedException", True
                ),
            )
            return commit
        if self.state is not MemberState.STABLE:
            if self.state in (MemberState.PREPARING_REBALANCE, MemberState.COMPLETING_REBALANCE):
                outcome = _Outcome(False, None, "RebalanceInProgressException")
            else:
                outcome = _Outcome(False, None, "CommitFailedException")
            self._complete_commit(commit, outcome)
            return commit
        self.stats.commits += 1
        self._send(
            OffsetCommitRequest(
                self._next_corr(),
                self.group,
                generation_id_or_member_epoch=self.generation.generation_id,
                member_id=self.generation.member_id,
                group_instance_id=self.config.group_instance_id,
                offsets=dict(offsets),
            ),
            "commit",
            commit=commit,
        )
        return commit

    def _on_offset_commit(self, p: _Pending, resp: GroupResponse) -> None:
        """``OffsetCommitResponseHandler``."""
        assert isinstance(resp, OffsetCommitResponse) and p.commit is not None
        errors = [e for e in resp.partition_errors.values() if e is not Errors.NONE]
        if resp.error is not Errors.NONE:
            errors.insert(0, resp.error)
        if not errors:
            self._complete_commit(p.commit, _OK, commit_age_ms(self._now, resp.accepted_ms))
            return
        err = errors[0]
        unchanged = self.generation == p.generation
        if err in (Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR):
            self._mark_coordinator_unknown(f"offset commit: {err.name}")
            outcome = _Outcome(False, err, "RetriableCommitFailedException", True)
        elif err is Errors.COORDINATOR_LOAD_IN_PROGRESS or (
            err is Errors.UNKNOWN_TOPIC_OR_PARTITION
            and kafka_version_at_least(
                self.config.kafka_version, UNKNOWN_TOPIC_COMMIT_RETRIABLE_SINCE
            )
        ):
            # "just retry" (KAFKA-6829 for UNKNOWN_TOPIC_OR_PARTITION, 2.0+): so the
            # commit before a rebalance retries a deleted topic's partitions until
            # the rebalance timeout (KAFKA-16235, see _on_join_prepare).
            outcome = _Outcome(False, err, "RetriableCommitFailedException", True)
        elif err is Errors.FENCED_INSTANCE_ID:
            if unchanged:
                outcome = _Outcome(False, err, "FencedInstanceIdException")
                self._poll_exception = err  # asyncCommitFenced: thrown from the next poll()
            elif self.state is MemberState.PREPARING_REBALANCE:
                outcome = _Outcome(False, err, "RebalanceInProgressException")
            else:
                outcome = _Outcome(False, err, "CommitFailedException")
        elif err is Errors.REBALANCE_IN_PROGRESS:
            self._request_rejoin("offset commit failed since group is already rebalancing")
            outcome = _Outcome(False, err, "RebalanceInProgressException")
        elif err in (Errors.UNKNOWN_MEMBER_ID, Errors.ILLEGAL_GENERATION):
            if not unchanged and self.state is MemberState.PREPARING_REBALANCE:
                outcome = _Outcome(False, err, "RebalanceInProgressException")
            else:
                self._reset_state_and_rejoin(
                    f"encountered {err.name} from OFFSET_COMMIT response",
                    err is not Errors.ILLEGAL_GENERATION,
                )
                outcome = _Outcome(False, err, "CommitFailedException")
        else:
            outcome = _Outcome(False, err, "KafkaException")
        self._complete_commit(p.commit, outcome)

    def _complete_commit(
        self, commit: _Commit, outcome: _Outcome, age_ms: float | None = None
    ) -> None:
        commit.outcome = outcome
        if outcome.ok:
            for (t, part), off in sorted(commit.offsets.items()):
                self._emit(
                    EventKind.OFFSETS_COMMITTED,
                    topic=t,
                    partition=part,
                    offset_end=off,
                    reason=commit.reason,
                    duration_ms=age_ms,
                )
            return
        self.stats.commit_failures += 1
        self._emit(
            EventKind.COMMIT_FAILED,
            reason=outcome.error.name if outcome.error is not None else outcome.exception,
            detail=f"{outcome.exception} ({commit.reason})",
            count=len(commit.offsets),
            partitions=format_partitions(commit.offsets),
        )
        if commit.reason == "auto" and outcome.retriable and self._next_auto_commit is not None:
            self._next_auto_commit = min(
                self._next_auto_commit, self._now + self.config.retry_backoff_ms
            )

    def _maybe_fetch_committed(self) -> None:
        """``refreshCommittedOffsetsIfNeeded``: OffsetFetch for partitions without a position."""
        if not self._initializing or self._fetch_corr is not None:
            return
        if self._now < self._next_fetch_at:
            return
        parts = tuple(sorted(self._initializing))
        req = OffsetFetchRequest(self._next_corr(), self.group, partitions=parts)
        self._fetch_corr = req.corr
        self._send(req, "fetch", partitions=parts)

    def _on_offset_fetch(self, p: _Pending, resp: GroupResponse) -> None:
        assert isinstance(resp, OffsetFetchResponse)
        self._fetch_corr = None
        if resp.error is not Errors.NONE:
            if resp.error in (Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE):
                self._mark_coordinator_unknown(f"offset fetch: {resp.error.name}")
            if not resp.error.retriable:
                self._poll_exception = resp.error  # KafkaException from poll()
            self._next_fetch_at = self._now + self.config.retry_backoff_ms
            return
        start: dict[TopicPartition, int | None] = {}
        for tp in p.partitions:
            if tp in self._initializing and tp in self.owned:
                self._initializing.discard(tp)
                off = resp.offsets.get(tp)
                start[tp] = off
                if off is not None:
                    self.positions[tp] = off
        if start:
            self.fetching = self.fetching | frozenset(start)
            for (t, part), off in sorted(start.items()):
                self._emit(
                    EventKind.FETCHING_STARTED,
                    topic=t,
                    partition=part,
                    offset_start=-1 if off is None else off,
                )
            self._out.append(StartFetching(dict(sorted(start.items()))))

    # ----------------------------------------------------------------- close

    def _closing_step(self) -> None:
        """``ConsumerCoordinator.close``: a synchronous commit, then ``AbstractCoordinator.close``.

        ``commitOffsetsSync`` retries a retriable failure after the back-off
        (rediscovering the coordinator first) until ``close_timeout_ms``.
        """
        now = self._now
        while (c := self._close_commit) is not None and now < self._close_deadline:
            if c.outcome is None:
                return
            if c.outcome.ok or not c.outcome.retriable:
                break
            if self._close_retry_at is None:
                self._close_retry_at = now + self.config.retry_backoff_ms
            if now < self._close_retry_at:
                return
            if self.coordinator is None:
                self._lookup_coordinator()
                return
            self._close_retry_at = None
            self._close_commit = self._commit_async(c.offsets, "close")
        self._finish_close()

    def _finish_close(self) -> None:
        self._hb_enabled = False
        # onLeavePrepare
        if self.owned:
            lost = (
                self.generation.generation_id == NO_GENERATION
                or not self.generation.has_member_id
                or self.state in (MemberState.PREPARING_REBALANCE, MemberState.COMPLETING_REBALANCE)
            )
            self._drop_partitions(self.owned, lost=lost)
        self._maybe_leave_group("the consumer is being closed")
        self.closed = True
        self._emit(EventKind.CONSUMER_STOPPED, reason="close")


# --------------------------------------------------------------------- helpers


def _outcome_of(err: Errors) -> _Outcome:
    """The exception Kafka raises for a coordinator error, and whether it is retriable."""
    name = "".join(w.capitalize() for w in err.name.split("_")) + "Exception"
    return _Outcome(False, err, name, err.retriable)


def _common_rebalance_protocol(assignors: Sequence[ClientAssignor]) -> str:
    """The ``ConsumerCoordinator`` constructor's choice: the highest common protocol."""
    common = set(assignors[0].supported_protocols)
    for a in assignors[1:]:
        common &= set(a.supported_protocols)
    if not common:
        names = ", ".join(a.name for a in assignors)
        raise ValueError(f"assignors {names} do not have a commonly supported rebalance protocol")
    return COOPERATIVE if COOPERATIVE in common else EAGER


def _encode_sticky_user_data(partitions: Sequence[TopicPartition], generation: int) -> bytes:
    return json.dumps(
        {"partitions": [[t, p] for t, p in partitions], "generation": generation},
        separators=(",", ":"),
    ).encode()


def _decode_sticky_user_data(data: bytes) -> tuple[tuple[TopicPartition, ...], int]:
    raw = json.loads(data.decode())
    parts = tuple((str(t), int(p)) for t, p in raw.get("partitions", []))
    return parts, int(raw.get("generation", NO_GENERATION))
