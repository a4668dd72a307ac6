"""The KIP-848 consumer (``group.protocol=consumer``) as a sans-I/O state machine.

This is the membership half of Kafka's new consumer
(``clients/.../consumer/internals/AbstractMembershipManager``,
``ConsumerMembershipManager``, ``ConsumerHeartbeatRequestManager``,
``AbstractHeartbeatRequestManager``, ``CoordinatorRequestManager`` and the
auto-commit of ``CommitRequestManager``; kafka-protocols.md C2, C5) without
its threads and sockets. It is fed responses, application polls and the
passing of time, and returns requests (FindCoordinator, ConsumerGroupHeartbeat,
OffsetCommit, OffsetFetch) and effects (StartFetching, StopFetching, Emit).

What it reproduces:

* **States** (``MemberState``): UNSUBSCRIBED, JOINING, RECONCILING,
  ACKNOWLEDGING, STABLE, FENCED, PREPARE_LEAVING, LEAVING, FATAL, STALE.
* **Heartbeats.** One in flight at a time, ``HeartbeatIntervalMs`` after the
  previous one was sent (and not before its answer), or at once when JOINING,
  ACKNOWLEDGING or LEAVING. A
  request carries only what changed since the last one (``HeartbeatState``):
  all fields when joining, the owned partitions only after a reconciliation.
* **Reconciliation.** A new target assignment starts it: stop fetching what
  is revoked, commit the consumed offsets (``enable.auto.commit``), revoke
  (PARTITIONS_REVOKED, OWNERSHIP_RELEASED), fetch the committed offsets of
  the added partitions and assign them (StartFetching, PARTITIONS_ASSIGNED,
  OWNERSHIP_CLAIMED), then ACKNOWLEDGING: the next heartbeat reports the new
  owned set. A reconciliation overtaken by a fence or a rejoin is abandoned.
* **Errors.** FENCED_MEMBER_EPOCH and UNKNOWN_MEMBER_ID: FENCED, every
  partition is lost, rejoin at epoch 0 with the same member id.
  NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE: rediscover the coordinator
  and heartbeat as soon as it is found. COORDINATOR_LOAD_IN_PROGRESS: retry
  after ``retry.backoff.ms`` (exponential to ``retry.backoff.max.ms``, 20%
  jitter). UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID, INVALID_REQUEST,
  GROUP_MAX_SIZE_REACHED, UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION
  ("Invalid RE2J SubscriptionPattern", CK@4.1 ``AbstractHeartbeatRequestManager``
  427-431) and anything unexpected: FATAL.
* **Regex subscription (Kafka 4.0+).** ``subscribe(SubscriptionPattern)``:
  the member's topic names are empty and the pattern goes in
  ``SubscribedTopicRegex``, sent when joining and whenever it changed since the
  last heartbeat; ``""`` tells the coordinator the pattern is gone (CK@4.1
  ``ConsumerHeartbeatRequestManager.HeartbeatState`` 281-288). The coordinator
  resolves it; the member only sees assignments. Before 4.0 there is no such
  field: a 3.9 client matches a ``java.util.regex.Pattern`` on its own
  metadata and sends names (not modelled here; :func:`make_consumer_member`
  then subscribes by the names the pattern selected when the run was planned).
* **Commits to deleted partitions.** A partition's UNKNOWN_TOPIC_OR_PARTITION
  fails the whole commit (``OffsetCommitRequestState.onResponse``, CK@4.1
  ``CommitRequestManager`` 747-810: the other partitions were stored). The
  commit before a revocation does not retry it from 3.8 (KAFKA-16224, 321-360):
  the revocation goes on, so a deleted topic's partitions leave the member
  through an ordinary reconciliation instead of stalling it until the
  rebalance timeout. An auto-commit retries at its next interval; nothing
  waits for it.
* **Poll timer.** ``max.poll.interval.ms`` without :meth:`ConsumerMember.app_polled`
  sends the leave heartbeat (-1, or -2 for a static member), then the member
  loses its partitions and stays STALE until the application polls again.
* **Close.** Commit, revoke everything, send the leave heartbeat (-1; -2 for
  a static member, whose partitions then stay with it until its session
  expires or it comes back).
* **Auto-commit** every ``auto.commit.interval.ms``, reset when a
  reconciliation completes.

Emulator choices (not Kafka):

* the coordinator generates the member id (K@trunk Oct 2024, before
  KIP-1082), and a fenced member keeps it when it rejoins;
* the committed offsets of added partitions are fetched before the
  reconciliation is acknowledged (Kafka acknowledges after the callbacks and
  initialises positions afterwards), so an acknowledged partition is fetching;
* commits carry only offsets that changed since the last commit (Kafka
  commits every consumed position);
* the periodic auto-commit waits while a reconciliation runs (that
  reconciliation commits first anyway).
"""

from __future__ import annotations

import enum
import math
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from emulator.delivery import REBALANCE_LISTENERS
from emulator.events import EventKind, format_partitions
from emulator.modern.config import Kip848ConsumerConfig
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
    MemberOutput,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    StartFetching,
    StopFetching,
    TopicPartition,
    commit_age_ms,
)

FATAL_HEARTBEAT_ERRORS = frozenset(
    {
        Errors.UNRELEASED_INSTANCE_ID,
        Errors.FENCED_INSTANCE_ID,
        Errors.INVALID_REQUEST,
        Errors.GROUP_MAX_SIZE_REACHED,
        Errors.UNSUPPORTED_ASSIGNOR,
        Errors.INVALID_REGULAR_EXPRESSION,
    }
)
COORDINATOR_ERRORS = frozenset({Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE})
RETRY_BACKOFF_JITTER = 0.2  # CommonClientConfigs.RETRY_BACKOFF_JITTER


def retry_backoff_ms(initial_ms: float, max_ms: float, attempts: int, u: float) -> float:
    """``ExponentialBackoff(initial_ms, 2, max_ms, RETRY_BACKOFF_JITTER).backoff(attempts)``.

    As ``org.apache.kafka.common.utils.ExponentialBackoff``: the exponent stops
    where ``initial x 2^exp`` reaches ``max_ms``; the jitter factor is drawn
    from ``[1 - jitter, 1 + jitter)`` (``u``, uniform in ``[0, 1)``, is the
    draw); the product is truncated to whole milliseconds and capped at
    ``max_ms`` (the jitter never takes it above); a ``max_ms`` at or below
    ``initial_ms`` gives a constant ``max_ms``.
    """
    if max_ms <= initial_ms:
        return float(max_ms)
    exp = min(float(max(attempts, 0)), math.log(max_ms / max(initial_ms, 1.0), 2))
    factor = (1.0 - RETRY_BACKOFF_JITTER) + 2.0 * RETRY_BACKOFF_JITTER * u
    return float(min(math.floor(factor * initial_ms * 2.0**exp), max_ms))


class MemberState(enum.StrEnum):
    """The client's ``MemberState`` (C5 client side)."""

    UNSUBSCRIBED = "unsubscribed"
    JOINING = "joining"
    RECONCILING = "reconciling"
    ACKNOWLEDGING = "acknowledging"
    STABLE = "stable"
    FENCED = "fenced"
    PREPARE_LEAVING = "prepare_leaving"
    LEAVING = "leaving"
    FATAL = "fatal"
    STALE = "stale"


# MemberState.getPreviousValidStates.
_VALID_FROM: Mapping[MemberState, frozenset[MemberState]] = {
    MemberState.UNSUBSCRIBED: frozenset(
        {MemberState.PREPARE_LEAVING, MemberState.LEAVING, MemberState.FENCED}
    ),
    MemberState.JOINING: frozenset(
        {MemberState.FENCED, MemberState.UNSUBSCRIBED, MemberState.STALE}
    ),
    MemberState.RECONCILING: frozenset(
        {
            MemberState.STABLE,
            MemberState.JOINING,
            MemberState.ACKNOWLEDGING,
            MemberState.RECONCILING,
        }
    ),
    MemberState.ACKNOWLEDGING: frozenset({MemberState.RECONCILING}),
    MemberState.STABLE: frozenset(
        {MemberState.JOINING, MemberState.ACKNOWLEDGING, MemberState.RECONCILING}
    ),
    MemberState.FENCED: frozenset(
        {
            MemberState.JOINING,
            MemberState.STABLE,
            MemberState.RECONCILING,
            MemberState.ACKNOWLEDGING,
            MemberState.PREPARE_LEAVING,
            MemberState.LEAVING,
        }
    ),
    MemberState.PREPARE_LEAVING: frozenset(
        {
            MemberState.JOINING,
            MemberState.STABLE,
            MemberState.RECONCILING,
            MemberState.ACKNOWLEDGING,
            MemberState.UNSUBSCRIBED,
        }
    ),
    MemberState.LEAVING: frozenset({MemberState.PREPARE_LEAVING}),
    MemberState.FATAL: frozenset(
        {
            MemberState.JOINING,
            MemberState.STABLE,
            MemberState.RECONCILING,
            MemberState.ACKNOWLEDGING,
            MemberState.PREPARE_LEAVING,
            MemberState.LEAVING,
            MemberState.UNSUBSCRIBED,
        }
    ),
    MemberState.STALE: frozenset({MemberState.LEAVING}),
}

_CAN_HANDLE_NEW_ASSIGNMENT = frozenset(
    {MemberState.JOINING, MemberState.RECONCILING, MemberState.ACKNOWLEDGING, MemberState.STABLE}
)
_NOT_IN_GROUP = frozenset(
    {MemberState.UNSUBSCRIBED, MemberState.FENCED, MemberState.FATAL, MemberState.STALE}
)


@dataclass(frozen=True)
class LocalAssignment:
    """``AbstractMembershipManager.LocalAssignment``: partitions plus a local epoch.

    The local epoch grows with every new target assignment, so that an
    acknowledgement is sent even when the partitions are the same as before.
    """

    local_epoch: int
    partitions: frozenset[TopicPartition]

    @property
    def is_none(self) -> bool:
        """Whether this is ``LocalAssignment.NONE``."""
        return self.local_epoch == -1

    def update_with(self, partitions: frozenset[TopicPartition]) -> LocalAssignment | None:
        """The next target assignment, or None when it is the same."""
        if not self.is_none and self.partitions == partitions:
            return None
        return LocalAssignment(self.local_epoch + 1, partitions)


NONE_ASSIGNMENT = LocalAssignment(-1, frozenset())


@dataclass
class MemberStats:
    """Running counters, for live progress; the event log is the record.

    Attributes:
        heartbeats: heartbeat requests sent (leaves included).
        joins: heartbeats sent with epoch 0 (joins and rejoins).
        rebalances: reconciliations started.
        fenced: times the member was fenced (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID).
        commits: commits that succeeded.
        commit_failures: commits that failed (COMMIT_FAILED events).
    """

    heartbeats: int = 0
    joins: int = 0
    rebalances: int = 0
    fenced: int = 0
    commits: int = 0
    commit_failures: int = 0


@dataclass
class _Reconciliation:
    """One ``maybeReconcile`` run in progress."""

    target: LocalAssignment
    added: frozenset[TopicPartition]
    revoked: frozenset[TopicPartition]
    step: str  # "commit" | "callback" | "revoke" | "fetch"
    deadline: float
    awaiting: int | None = None
    retry_at: float | None = None
    attempts: int = 0


@dataclass
class _Commit:
    """An OffsetCommit in flight or waiting to be retried."""

    reason: str  # "auto" | "reconcile" | "close"
    offsets: dict[TopicPartition, int]
    epoch: int


class ConsumerMember:
    """One KIP-848 consumer (the membership and heartbeat managers of the new consumer).

    Args:
        member: the scenario's name for it (``c-0``), for events.
        group: ``group.id``.
        topics: the subscription by names (ignored with ``topic_pattern``).
        config: the consumer settings.
        rng: the seeded generator for retry jitter.
        corr_start: the correlation id before this member's first request.
        rebalance_listener: the application's ``ConsumerRebalanceListener``:
            ``none`` (the revocation does not wait for the application) or
            ``commit-on-revoke`` (``onPartitionsRevoked`` runs on the
            application thread inside ``poll()`` and commits synchronously).
            An emulator knob naming an application pattern.
        topic_pattern: ``subscribe(SubscriptionPattern)``: an RE2/J pattern the
            coordinator resolves (needs ``config.broker_regex``, Kafka 4.0+).

    Raises:
        ValueError: no topic and no pattern; a pattern before Kafka 4.0.
    """

    def __init__(
        self,
        *,
        member: str,
        group: str,
        topics: Iterable[str],
        config: Kip848ConsumerConfig,
        rng: random.Random,
        corr_start: int = 0,
        rebalance_listener: str = "none",
        topic_pattern: str | None = None,
    ) -> None:
        if rebalance_listener not in REBALANCE_LISTENERS:
            raise ValueError(f"rebalance_listener must be one of {REBALANCE_LISTENERS}")
        self.rebalance_listener = rebalance_listener
        self.member = member
        self.group = group
        self.config = config
        self.topic_pattern: str | None = None
        self.topics: tuple[str, ...] = ()
        if topic_pattern is not None:
            self._check_pattern(topic_pattern)
            self.topic_pattern = topic_pattern
        else:
            self.topics = tuple(sorted(set(topics)))
            if not self.topics:
                raise ValueError("a consumer subscribes to at least one topic")
        self._rng = rng
        self.state = MemberState.UNSUBSCRIBED
        self.member_id = ""
        self.member_epoch = JOIN_GROUP_MEMBER_EPOCH
        self.coordinator: int | None = None
        self.owned: frozenset[TopicPartition] = frozenset()
        self.closed = False
        self.stats = MemberStats()
        self._now = 0.0
        self._corr = corr_start
        # Coordinator discovery (CoordinatorRequestManager).
        self._find_corr: int | None = None
        self._find_at: float | None = None
        self._find_attempts = 0
        # Heartbeats (AbstractHeartbeatRequestManager / HeartbeatState).
        self._hb_corr: int | None = None
        self._hb_interval_ms = 0
        self._hb_at = 0.0
        self._hb_attempts = 0
        self._sent_rebalance_timeout: int | None = None
        self._sent_topics: tuple[str, ...] | None = None
        self._sent_pattern: str | None = None
        self._sent_assignor: str | None = None
        self._sent_local: LocalAssignment | None = None
        # Assignment (AbstractMembershipManager).
        self._target = NONE_ASSIGNMENT
        self._current = NONE_ASSIGNMENT
        self._recon: _Reconciliation | None = None
        self._rejoined_while_reconciling = False
        self._poll_timer_expired = False
        self._poll_deadline: float | None = None
        # Offsets (CommitRequestManager).
        self._consumed: dict[TopicPartition, int] = {}
        self._committed: dict[TopicPartition, int] = {}
        self._commits: dict[int, _Commit] = {}
        self._auto_commit_at: float | None = None
        self._fetches: set[int] = set()
        self._unsent: list[GroupRequest] = []
        self._closing = False
        self._close_commit: int | None = None
        self._started = False
        # The application thread: processing a batch poll() returned, or in poll().
        self._app_busy = False
        # A commitSync of the application's own (manual commit) in flight.
        self._app_commit: int | None = None

    # ------------------------------------------------------------------ inputs

    def start(self, now_ms: float) -> list[MemberOutput]:
        """``subscribe`` and the first ``poll``: find the coordinator and join."""
        if self._started:
            raise RuntimeError(f"member {self.member} already started")
        self._started = True
        self._now = now_ms
        out: list[MemberOutput] = [self._emit(EventKind.CONSUMER_STARTED)]
        self._poll_deadline = now_ms + self.config.max_poll_interval_ms
        if self.config.enable_auto_commit:
            self._auto_commit_at = now_ms + self.config.auto_commit_interval_ms
        self._transition_to_joining()
        out.extend(self._pump())
        return out

    def on_response(self, now_ms: float, response: GroupResponse) -> list[MemberOutput]:
        """The answer to one of this member's requests (matched by ``corr``).

        Responses to requests the member no longer waits for are ignored.
        """
        self._now = now_ms
        out: list[MemberOutput] = []
        corr = response.corr
        if corr == self._find_corr and isinstance(response, FindCoordinatorResponse):
            self._find_corr = None
            out.extend(self._on_find_coordinator(response))
        elif corr == self._hb_corr and isinstance(response, ConsumerGroupHeartbeatResponse):
            self._hb_corr = None
            out.extend(self._on_heartbeat(response))
        elif corr in self._commits and isinstance(response, OffsetCommitResponse):
            out.extend(self._on_commit(corr, response))
        elif corr in self._fetches and isinstance(response, OffsetFetchResponse):
            self._fetches.discard(corr)
            out.extend(self._on_offset_fetch(corr, response))
        elif isinstance(response, ConsumerGroupHeartbeatResponse):
            # A leave heartbeat's answer, or one we stopped waiting for.
            return out
        out.extend(self._pump())
        return out

    def poll(self, now_ms: float) -> list[MemberOutput]:
        """Let time pass: heartbeats, retries, auto-commit, the poll timer."""
        self._now = now_ms
        return self._pump()

    def next_deadline(self) -> float | None:
        """The emulated time at which :meth:`poll` has work to do, if any."""
        if self.closed and not self._closing:
            return None
        # Work that is due at once (what the next _pump would send without
        # waiting for any timer) makes the deadline now.
        now = self._now
        if self.coordinator is None:
            if self.state is MemberState.LEAVING:
                return now  # the leave cannot be sent: close now
            if self._find_corr is None and self._find_at is None and self._needs_coordinator():
                return now
        else:
            if self._unsent:
                return now
            if self._hb_corr is None and not self._skip_heartbeat() and self._heartbeat_now():
                return now
        # The earliest of the timers that apply (called every host tick for
        # every member: no list, and each condition only when it could win).
        best = math.inf
        if self.coordinator is None:
            if self._find_corr is None and self._find_at is not None and self._needs_coordinator():
                best = self._find_at
        elif not self._skip_heartbeat():
            if self._hb_corr is None:
                best = self._hb_at
            poll = self._poll_deadline
            if poll is not None and poll < best and not self._is_leaving():
                best = poll
        commit = self._auto_commit_at
        if commit is not None and commit < best and self._can_auto_commit():
            best = commit
        recon = self._recon
        if recon is not None and recon.retry_at is not None and recon.retry_at < best:
            best = recon.retry_at
        return None if best == math.inf else best

    def app_polled(self, now_ms: float) -> list[MemberOutput]:
        """The application called ``poll()``: reset the poll timer; a STALE member rejoins.

        A revocation waiting for the application's rebalance listener runs now
        (``processBackgroundEvents`` inside ``poll()``).
        """
        self._now = now_ms
        self._app_busy = False
        self._poll_deadline = now_ms + self.config.max_poll_interval_ms
        self._poll_timer_expired = False
        out: list[MemberOutput] = []
        if self.state is MemberState.STALE and not self.closed:
            self._transition_to_joining()
        out.extend(self._pump())
        return out

    def app_idle(self, now_ms: float) -> list[MemberOutput] | None:
        """The application is still in ``poll()`` with nothing to process.

        As :meth:`app_polled` (the poll timer restarts, a STALE member
        rejoins), but the timers are left to :meth:`poll`: an emulator
        shortcut for the host loop, which calls :meth:`poll` whenever
        :meth:`next_deadline` is due and this every tick.

        Returns:
            None when only the poll timer moved (later: :meth:`next_deadline`
            can only grow), else what :meth:`app_polled` returns.
        """
        self._now = now_ms
        self._poll_deadline = now_ms + self.config.max_poll_interval_ms
        self._poll_timer_expired = False
        if self._app_busy:
            return self.app_polled(now_ms)
        if self.state is MemberState.STALE and not self.closed:
            self._transition_to_joining()
            return self._pump()
        return None

    def app_processing(self, now_ms: float) -> list[MemberOutput]:
        """``poll()`` returned records: the application processes them until :meth:`app_polled`.

        The poll timer runs from this call. Nothing else waits for the
        application: without a rebalance listener the new consumer reconciles,
        commits and heartbeats on its background thread (unlike the classic
        consumer, whose rebalance happens inside ``poll()``). The host calls
        :meth:`app_polled` first (``poll()`` began: its ``PollEvent``), then
        :meth:`consumed` (the positions move), then this.
        """
        self._now = now_ms
        self._poll_deadline = now_ms + self.config.max_poll_interval_ms
        self._poll_timer_expired = False
        self._app_busy = True
        return []

    def consumed(self, tp: TopicPartition, next_offset: int) -> None:
        """``poll()`` returned records of ``tp`` up to ``next_offset`` (exclusive).

        The position (``SubscriptionState``) moves when ``poll()`` hands the
        records to the application, before it processes them, so
        ``allConsumed()`` and every commit of it include the batch in hand
        (K@4.0 ``FetchCollector``). Positions of a partition the member no
        longer owns are dropped, as the new consumer drops a revoked one.
        """
        if tp in self.owned:
            self._consumed[tp] = next_offset

    @property
    def app_committing(self) -> bool:
        """Whether the application's own ``commitSync`` is still in flight."""
        return self._app_commit is not None and self._app_commit in self._commits

    def app_commit(self, now_ms: float, *, sync: bool) -> list[MemberOutput]:
        """The application commits ``allConsumed()`` itself (``commitSync``/``commitAsync``).

        An emulator knob (``[group].manual_commit``) naming the usual pattern
        with ``enable.auto.commit=false``: commit after each processed batch.
        With ``sync`` the application waits for the answer
        (:attr:`app_committing`). A member outside the group (epoch <= 0)
        has nothing it may commit.
        """
        self._now = now_ms
        out: list[MemberOutput] = []
        offsets = self._offsets_to_commit()
        if offsets and self.member_epoch > 0 and not self._closing and not self.closed:
            corr = self._send_commit("manual", offsets, out)
            if sync:
                self._app_commit = corr
        out.extend(self._pump())
        return out

    def close(self, now_ms: float) -> list[MemberOutput]:
        """``close()``: commit, revoke everything, leave (-1; -2 for a static member)."""
        self._now = now_ms
        out: list[MemberOutput] = []
        if self.closed or self._closing:
            return out
        self._closing = True
        self._abort_reconciliation()
        if self.state in _NOT_IN_GROUP:
            out.extend(self._release(EventKind.PARTITIONS_LOST, "close"))
            out.extend(self._finish_close())
            return out
        offsets = self._offsets_to_commit()
        if self.config.enable_auto_commit and offsets and self.member_epoch > 0:
            corr = self._send_commit("close", offsets, out)
            self._close_commit = corr
        else:
            out.extend(self._close_after_commit())
        out.extend(self._pump())
        return out

    def request_failed(self, now_ms: float, corr: int) -> list[MemberOutput]:
        """Request ``corr`` got no answer within ``request.timeout.ms``.

        ``NetworkClient`` then drops the connection and the request fails with
        a ``DisconnectException`` (retriable): a heartbeat backs off, forgets
        the coordinator (``handleCoordinatorDisconnect``) and sends every field
        again next time; a FindCoordinator backs off; a commit or an offset
        fetch is retried as after COORDINATOR_NOT_AVAILABLE (which is what the
        commit manager does with a disconnect: rediscover, then retry).
        Unknown ``corr`` (answered or abandoned meanwhile) is ignored.
        """
        self._now = now_ms
        out: list[MemberOutput] = []
        if corr == self._find_corr:
            self._find_corr = None
            out.append(self._timed_out("FindCoordinator"))
            self._find_at = now_ms + self._backoff(self._find_attempts)
            self._find_attempts += 1
        elif corr == self._hb_corr:
            self._hb_corr = None
            out.append(self._timed_out("ConsumerGroupHeartbeat"))
            self._reset_sent_fields()
            self._mark_coordinator_unknown()
            self._hb_at = now_ms + self._backoff(self._hb_attempts)
            self._hb_attempts += 1
        elif corr in self._commits:
            out.append(self._timed_out("OffsetCommit"))
            return out + self.on_response(
                now_ms, OffsetCommitResponse(corr, Errors.COORDINATOR_NOT_AVAILABLE)
            )
        elif corr in self._fetches:
            out.append(self._timed_out("OffsetFetch"))
            return out + self.on_response(
                now_ms, OffsetFetchResponse(corr, Errors.COORDINATOR_NOT_AVAILABLE)
            )
        else:
            return out
        out.extend(self._pump())
        return out

    def subscribe(
        self, now_ms: float, topics: Iterable[str], topic_pattern: str | None = None
    ) -> list[MemberOutput]:
        """``KafkaConsumer.subscribe`` with another set of topics, or a pattern.

        The next heartbeat carries the new ``SubscribedTopicNames`` and, for a
        pattern (or when one is dropped), ``SubscribedTopicRegex`` (the
        heartbeat state sends a field when it changed); the coordinator
        computes the new target assignment and the member reconciles to it.
        Java requires ``unsubscribe()`` between a names and a pattern
        subscription (``SubscriptionState.setSubscriptionType``); here the
        subscription changes directly (an emulator shortcut).

        Args:
            now_ms: emulated time.
            topics: the new names (ignored with ``topic_pattern``).
            topic_pattern: ``subscribe(SubscriptionPattern)`` instead (Kafka 4.0+).

        Raises:
            ValueError: no topic and no pattern; a pattern before Kafka 4.0.
        """
        self._now = now_ms
        new: tuple[str, ...] = ()
        if topic_pattern is not None:
            self._check_pattern(topic_pattern)
        else:
            new = tuple(sorted(set(topics)))
            if not new:
                raise ValueError("a consumer subscribes to at least one topic")
        if (new, topic_pattern) == (self.topics, self.topic_pattern):
            return []
        if self.closed or self._closing:
            return []
        self.topics = new
        self.topic_pattern = topic_pattern
        out: list[MemberOutput] = [
            self._emit(
                EventKind.REBALANCE_TRIGGERED,
                reason="subscription_changed",
                detail=",".join(new) if topic_pattern is None else f"pattern={topic_pattern}",
            )
        ]
        out.extend(self._pump())
        return out

    def _check_pattern(self, pattern: str) -> None:
        if not pattern:
            raise ValueError("Topic pattern to subscribe to cannot be empty")
        if not self.config.broker_regex:
            raise ValueError(
                "subscribe(SubscriptionPattern) needs Kafka 4.0+ (ConsumerGroupHeartbeat v1 "
                "SubscribedTopicRegex); before, the client matches a Pattern itself"
            )

    def update_metadata(
        self, now_ms: float, partitions_per_topic: Mapping[str, int]
    ) -> list[MemberOutput]:
        """New cluster metadata: nothing to do here.

        A KIP-848 member does not use partition counts; the coordinator sees
        the new partitions and computes the target assignment itself.
        """
        return []

    def request_metadata_update(self, now_ms: float) -> list[MemberOutput]:
        """A fetch error or a dropped connection: nothing to do here.

        The member keeps no partition counts of its own (the coordinator
        assigns from its metadata image), so no metadata request is emulated.
        """
        return []

    def metadata_failed(self, now_ms: float) -> list[MemberOutput]:
        """No metadata answer: never asked for one (see :meth:`request_metadata_update`)."""
        return []

    @property
    def is_static(self) -> bool:
        """Whether ``group.instance.id`` is set."""
        return self.config.group_instance_id is not None

    @property
    def target(self) -> frozenset[TopicPartition]:
        """The last target assignment received from the coordinator."""
        return self._target.partitions

    @property
    def committed(self) -> Mapping[TopicPartition, int]:
        """Offsets this member committed successfully (its last acknowledged view)."""
        return dict(self._committed)

    # ----------------------------------------------------------------- pumping

    def _pump(self) -> list[MemberOutput]:
        """Do everything that is due now."""
        out: list[MemberOutput] = []
        if self.closed and not self._closing:
            return out
        now = self._now
        if self._needs_coordinator():
            if self._find_corr is None and (self._find_at is None or now >= self._find_at):
                self._find_corr = self._next_corr()
                self._find_at = None
                out.append(FindCoordinatorRequest(self._find_corr, self.group))
        elif self._unsent:
            out.extend(self._unsent)
            self._unsent = []
        out.extend(self._maybe_reconcile())
        recon = self._recon
        if recon is not None and recon.retry_at is not None and now >= recon.retry_at:
            recon.retry_at = None
            out.extend(self._reconcile_step())
        elif (
            recon is not None
            and recon.step == "callback"
            and recon.awaiting is None
            and recon.retry_at is None
            and not self._app_busy
        ):
            out.extend(self._reconcile_step())  # the listener's turn came (poll())
        # The commit before the heartbeat: the network thread polls the commit
        # request manager before the heartbeat's (K@3.7 RequestManagers 73-75,
        # ConsumerNetworkThread.runOnce), and both go on one connection, so an
        # auto-commit due with a heartbeat that acknowledges a new epoch carries
        # (and is judged by) the epoch it was made with.
        if (
            self._auto_commit_at is not None
            and now >= self._auto_commit_at
            and self._can_auto_commit()
        ):
            out.extend(self._auto_commit())
        out.extend(self._heartbeat_poll())
        return out

    def _needs_coordinator(self) -> bool:
        if self.coordinator is not None:
            return False
        if self.state in (MemberState.UNSUBSCRIBED, MemberState.FATAL) and not self._closing:
            return False
        return not (self.closed and not self._closing)

    # -------------------------------------------------------- coordinator lookup

    def _on_find_coordinator(self, resp: FindCoordinatorResponse) -> list[MemberOutput]:
        out: list[MemberOutput] = []
        if resp.error is not Errors.NONE or resp.node_id < 0:
            out.append(self._request_error(resp.error, "FindCoordinator"))
            self._find_at = self._now + self._backoff(self._find_attempts)
            self._find_attempts += 1
            return out
        # RequestState: even after a success the next lookup waits one backoff.
        self._find_attempts = 0
        self._find_at = self._now + self._backoff(0)
        self.coordinator = resp.node_id
        out.append(self._emit(EventKind.COORDINATOR_FOUND, broker=resp.node_id))
        return out

    def _mark_coordinator_unknown(self) -> None:
        self.coordinator = None

    # ----------------------------------------------------------------- heartbeat

    def _skip_heartbeat(self) -> bool:
        """``shouldSkipHeartbeat``: not an active member of the group."""
        return self.state in _NOT_IN_GROUP

    def _is_leaving(self) -> bool:
        return self.state in (MemberState.PREPARE_LEAVING, MemberState.LEAVING)

    def _heartbeat_now(self) -> bool:
        """``shouldHeartbeatNow``."""
        return self.state in (
            MemberState.ACKNOWLEDGING,
            MemberState.LEAVING,
            MemberState.JOINING,
        )

    def _heartbeat_poll(self) -> list[MemberOutput]:
        """``AbstractHeartbeatRequestManager.poll``."""
        out: list[MemberOutput] = []
        if self.coordinator is None or self._skip_heartbeat():
            if self.state is MemberState.LEAVING:
                # onHeartbeatRequestSkipped: the leave cannot be sent.
                self._transition(MemberState.UNSUBSCRIBED)
                out.extend(self._finish_close())
            return out
        if (
            self._poll_deadline is not None
            and self._now >= self._poll_deadline
            and not self._is_leaving()
        ):
            # Poll timeout: leave now (even with a heartbeat in flight), then go STALE.
            self._poll_timer_expired = True
            self._transition(MemberState.PREPARE_LEAVING)
            self._abort_reconciliation()
            out.extend(self._transition_to_sending_leave())
            out.extend(self._send_heartbeat(leave=True))
            self._hb_attempts = 0
            self._hb_at = self._now + self._hb_interval_ms
            self._reset_sent_fields()
            return out
        if self._hb_corr is not None:
            return out
        if self._heartbeat_now() or self._now >= self._hb_at:
            out.extend(self._send_heartbeat(leave=self.state is MemberState.LEAVING))
        return out

    def _send_heartbeat(self, *, leave: bool) -> list[MemberOutput]:
        """``HeartbeatState.buildRequestData``, then ``onHeartbeatRequestGenerated``."""
        out: list[MemberOutput] = []
        send_all = self.state is MemberState.JOINING
        rebalance_timeout = -1
        if send_all or self._sent_rebalance_timeout != self.config.max_poll_interval_ms:
            rebalance_timeout = self.config.max_poll_interval_ms
            self._sent_rebalance_timeout = rebalance_timeout
        topics: tuple[str, ...] | None = None
        if send_all or self._sent_topics != self.topics:
            topics = self.topics
            self._sent_topics = topics
        # SubscribedTopicRegex: when joining with a pattern, or when it changed;
        # "" removes it.
        regex: str | None = None
        pattern = self.topic_pattern
        if (send_all and pattern is not None) or pattern != self._sent_pattern:
            regex = pattern if pattern is not None else ""
            self._sent_pattern = pattern
        assignor: str | None = None
        wanted = self.config.group_remote_assignor
        if wanted is not None and (send_all or self._sent_assignor != wanted):
            assignor = wanted
            self._sent_assignor = wanted
        owned: tuple[TopicPartition, ...] | None = None
        if send_all or self._current != self._sent_local:
            owned = tuple(sorted(self._current.partitions))
            self._sent_local = self._current
        corr = self._next_corr()
        self.stats.heartbeats += 1
        if self.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
            self.stats.joins += 1
        request = ConsumerGroupHeartbeatRequest(
            corr,
            self.group,
            member_id=self.member_id,
            member_epoch=self.member_epoch,
            instance_id=self.config.group_instance_id,
            rack_id=self.config.client_rack if send_all else None,
            rebalance_timeout_ms=rebalance_timeout,
            subscribed_topic_names=topics,
            server_assignor=assignor,
            topic_partitions=owned,
            subscribed_topic_regex=regex,
        )
        if not leave:
            self._hb_corr = corr
            # makeHeartbeatRequest: the interval counts from the send.
            self._hb_at = self._now + self._hb_interval_ms
        out.append(request)
        # onHeartbeatRequestGenerated.
        if self.state is MemberState.ACKNOWLEDGING:
            if self._target == self._current:
                self._transition(MemberState.STABLE)
            else:
                self._transition(MemberState.RECONCILING)
        elif self.state is MemberState.LEAVING:
            if self._poll_timer_expired:
                out.extend(self._transition_to_stale())
            else:
                self._transition(MemberState.UNSUBSCRIBED)
                out.extend(self._finish_close())
        return out

    def _on_heartbeat(self, resp: ConsumerGroupHeartbeatResponse) -> list[MemberOutput]:
        out: list[MemberOutput] = []
        if resp.error is not Errors.NONE:
            out.extend(self._on_heartbeat_error(resp))
            return out
        self._hb_attempts = 0
        if resp.heartbeat_interval_ms > 0 and resp.heartbeat_interval_ms != self._hb_interval_ms:
            # updateHeartbeatIntervalMs: a new interval restarts the timer.
            self._hb_interval_ms = resp.heartbeat_interval_ms
            self._hb_at = self._now + self._hb_interval_ms
        # ConsumerMembershipManager.onHeartbeatSuccess.
        if self.state is MemberState.LEAVING or self.state in _NOT_IN_GROUP:
            return out
        if resp.member_epoch < 0:
            return out
        if resp.member_id:
            self.member_id = resp.member_id
        self.member_epoch = resp.member_epoch
        if resp.assignment is not None and self.state in _CAN_HANDLE_NEW_ASSIGNMENT:
            self._process_assignment(frozenset(resp.assignment))
        return out

    def _on_heartbeat_error(self, resp: ConsumerGroupHeartbeatResponse) -> list[MemberOutput]:
        """``AbstractHeartbeatRequestManager.onErrorResponse``."""
        error = resp.error
        out: list[MemberOutput] = [self._request_error(error, "ConsumerGroupHeartbeat")]
        self._reset_sent_fields()
        if error in COORDINATOR_ERRORS:
            self._mark_coordinator_unknown()
            self._hb_attempts = 0
            self._hb_at = self._now  # heartbeat as soon as the coordinator is found
        elif error is Errors.COORDINATOR_LOAD_IN_PROGRESS:
            self._hb_at = self._now + self._backoff(self._hb_attempts)
            self._hb_attempts += 1
        elif error in (Errors.FENCED_MEMBER_EPOCH, Errors.UNKNOWN_MEMBER_ID):
            self._hb_attempts = 0
            self._hb_at = self._now
            out.extend(self._transition_to_fenced())
        else:
            out.extend(self._transition_to_fatal())
        return out

    def _reset_sent_fields(self) -> None:
        self._sent_rebalance_timeout = None
        self._sent_topics = None
        self._sent_pattern = None
        self._sent_assignor = None
        self._sent_local = None

    # ------------------------------------------------------------ state changes

    def _transition(self, state: MemberState) -> None:
        if state is self.state:
            return
        if self.state not in _VALID_FROM[state]:
            raise RuntimeError(
                f"member {self.member}: invalid transition from {self.state} to {state}"
            )
        self.state = state

    def _transition_to_joining(self) -> None:
        if self.state is MemberState.FATAL:
            return
        if self._recon is not None:
            self._rejoined_while_reconciling = True
        self.member_epoch = JOIN_GROUP_MEMBER_EPOCH
        self._transition(MemberState.JOINING)
        self._target = NONE_ASSIGNMENT

    def _transition_to_fenced(self) -> list[MemberOutput]:
        out: list[MemberOutput] = []
        if self.state is MemberState.PREPARE_LEAVING:
            self.member_epoch = self._leave_epoch()
            self._current = NONE_ASSIGNMENT
            self._transition(MemberState.LEAVING)
            self._transition(MemberState.UNSUBSCRIBED)
            out.extend(self._release(EventKind.PARTITIONS_LOST, "fenced"))
            out.extend(self._finish_close())
            return out
        if self.state is MemberState.LEAVING:
            self._transition(MemberState.UNSUBSCRIBED)
            out.extend(self._finish_close())
            return out
        if self.state in _NOT_IN_GROUP:
            return out
        self._transition(MemberState.FENCED)
        self.stats.fenced += 1
        self.member_epoch = JOIN_GROUP_MEMBER_EPOCH
        # Kafka lets the overtaken reconciliation run out (it aborts at its
        # next step); dropping it at once has the same effect and does not
        # leave the rejoin waiting on an answer that may never come.
        self._abort_reconciliation()
        out.extend(self._release(EventKind.PARTITIONS_LOST, "fenced"))
        self._current = NONE_ASSIGNMENT
        if self.state is MemberState.FENCED:
            self._transition_to_joining()
        return out

    def _transition_to_fatal(self) -> list[MemberOutput]:
        previous = self.state
        out: list[MemberOutput] = []
        if previous not in _VALID_FROM[MemberState.FATAL]:
            return out  # a late error for a member already out of the group
        self._transition(MemberState.FATAL)
        self._abort_reconciliation()
        if previous not in (MemberState.LEAVING, MemberState.PREPARE_LEAVING):
            out.extend(self._release(EventKind.PARTITIONS_LOST, "fatal"))
        self._current = NONE_ASSIGNMENT
        if self._closing:
            out.extend(self._finish_close())
        return out

    def _transition_to_sending_leave(self) -> list[MemberOutput]:
        """``transitionToSendingLeaveGroup``: leave epoch, no assignment, LEAVING."""
        self.member_epoch = self._leave_epoch()
        self._current = NONE_ASSIGNMENT
        self._transition(MemberState.LEAVING)
        return []

    def _transition_to_stale(self) -> list[MemberOutput]:
        """``transitionToStale``: the leave is sent; lose the assignment, wait for a poll."""
        self._transition(MemberState.STALE)
        self._abort_reconciliation()
        out = self._release(EventKind.PARTITIONS_LOST, "poll_timeout")
        self._current = NONE_ASSIGNMENT
        self._target = NONE_ASSIGNMENT
        return out

    def _leave_epoch(self) -> int:
        return LEAVE_GROUP_STATIC_MEMBER_EPOCH if self.is_static else LEAVE_GROUP_MEMBER_EPOCH

    def _release(self, kind: EventKind, reason: str) -> list[MemberOutput]:
        """Give up every owned partition (lost or revoked) and stop fetching it."""
        out: list[MemberOutput] = []
        dropped = self.owned
        if not dropped:
            return out
        out.append(StopFetching(tuple(sorted(dropped))))
        out.append(
            self._emit(
                kind,
                count=len(dropped),
                partitions=format_partitions(dropped),
                reason=reason,
                generation=self.member_epoch,
            )
        )
        for t, p in sorted(dropped):
            out.append(
                self._emit(
                    EventKind.OWNERSHIP_RELEASED,
                    topic=t,
                    partition=p,
                    reason=reason,
                    generation=self.member_epoch,
                )
            )
        self.owned = frozenset()
        self._consumed = {}
        return out

    # ------------------------------------------------------------ reconciliation

    def _process_assignment(self, partitions: frozenset[TopicPartition]) -> None:
        """``processAssignmentReceived``."""
        updated = self._target.update_with(partitions)
        if updated is not None:
            self._target = updated
        if self._target != self._current:
            self._transition(MemberState.RECONCILING)
        elif self.state in (MemberState.RECONCILING, MemberState.JOINING):
            self._transition(MemberState.STABLE)

    def _maybe_reconcile(self) -> list[MemberOutput]:
        """``maybeReconcile``: start a reconciliation towards the target if none runs."""
        out: list[MemberOutput] = []
        if self.state is not MemberState.RECONCILING or self._target == self._current:
            return out
        if self._recon is not None:
            return out
        if self.config.commit_on_poll and self.config.enable_auto_commit and self._app_busy:
            # 4.0+: with auto-commit on, reconciling waits for the application's
            # poll() ("if (autoCommitEnabled && !canCommit) return").
            return out
        target = self._target
        if not self._current.is_none and target.partitions == self._current.partitions:
            self._current = target
            self._transition(MemberState.ACKNOWLEDGING)
            return out
        added = target.partitions - self.owned
        revoked = self.owned - target.partitions
        self._rejoined_while_reconciling = False
        self.stats.rebalances += 1
        self._recon = _Reconciliation(
            target,
            added,
            revoked,
            step="commit",
            deadline=self._now + self.config.max_poll_interval_ms,
        )
        out.append(
            self._emit(
                EventKind.REBALANCE_STARTED,
                generation=self.member_epoch,
                count=len(target.partitions),
                partitions=format_partitions(target.partitions),
                detail=f"added={format_partitions(added)} revoked={format_partitions(revoked)}",
            )
        )
        if revoked:
            # markPendingRevocationToPauseFetching.
            out.append(StopFetching(tuple(sorted(revoked))))
        out.extend(self._reconcile_step())
        return out

    def _should_abort(self) -> bool:
        """``maybeAbortReconciliation``."""
        if self._recon is None:
            return True
        if self.state is not MemberState.RECONCILING or self._rejoined_while_reconciling:
            self._recon = None
            self._rejoined_while_reconciling = False
            return True
        return False

    def _abort_reconciliation(self) -> None:
        self._recon = None
        self._rejoined_while_reconciling = False

    def _reconcile_step(self) -> list[MemberOutput]:
        out: list[MemberOutput] = []
        recon = self._recon
        if recon is None or self._should_abort():
            return out
        if recon.step == "commit":
            offsets = self._offsets_to_commit()
            if self.config.enable_auto_commit and offsets and recon.awaiting is None:
                recon.awaiting = self._send_commit("reconcile", offsets, out)
                return out
            recon.step = "callback"
        if recon.step == "callback":
            if recon.revoked & self.owned and self.rebalance_listener != "none":
                # The listener runs on the application thread inside poll():
                # the revocation waits until the application is back there.
                if self._app_busy:
                    return out
                if self.rebalance_listener == "commit-on-revoke" and recon.awaiting is None:
                    mine = recon.revoked & self.owned
                    offsets = {
                        tp: off for tp, off in self._offsets_to_commit().items() if tp in mine
                    }
                    if offsets and self.member_epoch > 0:
                        recon.awaiting = self._send_commit("revoke_callback", offsets, out)
                        return out
            recon.step = "revoke"
        if recon.step == "revoke":
            if recon.revoked:
                revoked = recon.revoked & self.owned
                out.append(
                    self._emit(
                        EventKind.PARTITIONS_REVOKED,
                        count=len(revoked),
                        partitions=format_partitions(revoked),
                        generation=self.member_epoch,
                    )
                )
                for t, p in sorted(revoked):
                    out.append(
                        self._emit(
                            EventKind.OWNERSHIP_RELEASED,
                            topic=t,
                            partition=p,
                            reason="revoked",
                            generation=self.member_epoch,
                        )
                    )
                self.owned = self.owned - revoked
                for tp in revoked:
                    self._consumed.pop(tp, None)
            recon.step = "fetch"
        if recon.step == "fetch" and recon.added:
            if recon.awaiting is None:
                corr = self._next_corr()
                recon.awaiting = corr
                self._fetches.add(corr)
                self._send(
                    OffsetFetchRequest(
                        corr,
                        self.group,
                        partitions=tuple(sorted(recon.added)),
                        member_id=self.member_id,
                        member_epoch=self.member_epoch,
                    ),
                    out,
                )
            return out
        out.extend(self._complete_reconciliation({}))
        return out

    def _on_offset_fetch(self, corr: int, resp: OffsetFetchResponse) -> list[MemberOutput]:
        out: list[MemberOutput] = []
        recon = self._recon
        if recon is None or recon.awaiting != corr:
            return out
        recon.awaiting = None
        if self._should_abort():
            return out
        if resp.error is not Errors.NONE:
            out.append(self._request_error(resp.error, "OffsetFetch"))
            if resp.error in COORDINATOR_ERRORS:
                self._mark_coordinator_unknown()
            recon.retry_at = self._now + self._backoff(recon.attempts)
            recon.attempts += 1
            return out
        out.extend(self._complete_reconciliation(resp.offsets))
        return out

    def _complete_reconciliation(
        self, offsets: Mapping[TopicPartition, int | None]
    ) -> list[MemberOutput]:
        """``assignPartitions`` and the end of ``revokeAndAssign``."""
        recon = self._recon
        assert recon is not None
        out: list[MemberOutput] = []
        added = recon.added - self.owned
        if added:
            positions = {tp: offsets.get(tp) for tp in sorted(added)}
            self.owned = self.owned | added
            for tp, off in positions.items():
                if off is not None:
                    self._consumed[tp] = off
                    self._committed[tp] = off
            out.append(StartFetching(positions))
        # onPartitionsAssigned is invoked after every reconciliation, with
        # nothing added too (ConsumerMembershipManager.revokeAndAssign).
        out.append(
            self._emit(
                EventKind.PARTITIONS_ASSIGNED,
                count=len(added),
                partitions=format_partitions(added),
                generation=self.member_epoch,
            )
        )
        if added:
            for t, p in sorted(added):
                out.append(
                    self._emit(
                        EventKind.OWNERSHIP_CLAIMED,
                        topic=t,
                        partition=p,
                        generation=self.member_epoch,
                        offset_start=-1 if positions[(t, p)] is None else positions[(t, p)],
                    )
                )
        self._current = recon.target
        self._recon = None
        self._transition(MemberState.ACKNOWLEDGING)
        if self.config.enable_auto_commit:
            self._auto_commit_at = self._now + self.config.auto_commit_interval_ms
        out.append(
            self._emit(
                EventKind.REBALANCE_COMPLETED,
                generation=self.member_epoch,
                count=len(self.owned),
                partitions=format_partitions(self.owned),
            )
        )
        return out

    # ------------------------------------------------------------------ commits

    def _offsets_to_commit(self) -> dict[TopicPartition, int]:
        return {
            tp: off
            for tp, off in sorted(self._consumed.items())
            if tp in self.owned and self._committed.get(tp) != off
        }

    def _can_auto_commit(self) -> bool:
        return (
            self.config.enable_auto_commit
            and not self._closing
            and self.member_epoch > 0
            and self.state in (MemberState.STABLE, MemberState.ACKNOWLEDGING)
            and self._recon is None
            and not any(c.reason == "auto" for c in self._commits.values())
            # 4.0+: only on the application's poll() (KAFKA-18641).
            and not (self.config.commit_on_poll and self._app_busy)
        )

    def _auto_commit(self) -> list[MemberOutput]:
        out: list[MemberOutput] = []
        interval = self.config.auto_commit_interval_ms
        while self._auto_commit_at is not None and self._auto_commit_at <= self._now:
            self._auto_commit_at += interval
        offsets = self._offsets_to_commit()
        if offsets:
            self._send_commit("auto", offsets, out)
        return out

    def _send_commit(
        self, reason: str, offsets: dict[TopicPartition, int], out: list[MemberOutput]
    ) -> int:
        corr = self._next_corr()
        self._commits[corr] = _Commit(reason, offsets, self.member_epoch)
        self._send(
            OffsetCommitRequest(
                corr,
                self.group,
                generation_id_or_member_epoch=self.member_epoch,
                member_id=self.member_id,
                group_instance_id=self.config.group_instance_id,
                offsets=dict(offsets),
            ),
            out,
        )
        return corr

    def _on_commit(self, corr: int, resp: OffsetCommitResponse) -> list[MemberOutput]:
        """``OffsetCommitRequestState.onResponse`` (CK@4.1 ``CommitRequestManager`` 747-810).

        A partition's error fails the whole commit with that error (the
        partitions without one were stored: their OFFSETS_COMMITTED events are
        written); COMMIT_FAILED names the failed partitions.
        """
        commit = self._commits.pop(corr)
        out: list[MemberOutput] = []
        error = resp.error
        failed = {
            tp: e
            for tp, e in sorted(resp.partition_errors.items())
            if e is not Errors.NONE and tp in commit.offsets
        }
        if error is Errors.NONE:
            if not failed:
                self.stats.commits += 1
            for (t, p), off in sorted(commit.offsets.items()):
                if (t, p) in failed:
                    continue
                self._committed[(t, p)] = off
                out.append(
                    self._emit(
                        EventKind.OFFSETS_COMMITTED,
                        topic=t,
                        partition=p,
                        offset_end=off,
                        reason=commit.reason,
                        generation=commit.epoch,
                        duration_ms=commit_age_ms(self._now, resp.accepted_ms),
                    )
                )
            if failed:
                error = next(iter(failed.values()))
                commit = _Commit(
                    commit.reason, {tp: commit.offsets[tp] for tp in failed}, commit.epoch
                )
        else:
            out.append(self._request_error(error, "OffsetCommit"))
            if error in COORDINATOR_ERRORS:
                self._mark_coordinator_unknown()
        recon = self._recon
        if commit.reason == "reconcile" and recon is not None and recon.awaiting == corr:
            recon.awaiting = None
            if error is not Errors.NONE and self._retry_reconcile_commit(error, recon):
                return out
            if error is not Errors.NONE:
                out.append(self._commit_failed(error, commit))
            recon.step = "callback"
            out.extend(self._reconcile_step())
        elif commit.reason == "revoke_callback" and recon is not None and recon.awaiting == corr:
            # The listener's commitSync returned (or threw, which the
            # application's listener logs): the revocation goes on.
            recon.awaiting = None
            if error is not Errors.NONE:
                out.append(self._commit_failed(error, commit))
            recon.step = "revoke"
            out.extend(self._reconcile_step())
        elif commit.reason == "close" and corr == self._close_commit:
            self._close_commit = None
            if error is not Errors.NONE:
                out.append(self._commit_failed(error, commit))
            out.extend(self._close_after_commit())
        elif error is not Errors.NONE:
            out.append(self._commit_failed(error, commit))
        return out

    def _retry_reconcile_commit(self, error: Errors, recon: _Reconciliation) -> bool:
        """``maybeAutoCommitSyncBeforeRebalance``: retry retriable and stale-epoch errors.

        Not UNKNOWN_TOPIC_OR_PARTITION from 3.8 (KAFKA-16224, K@3.8
        ``CommitRequestManager`` 329; CK@4.1 344-346): a deleted topic would
        keep the revocation waiting until the rebalance timeout.
        """
        if not (error.retriable or error is Errors.STALE_MEMBER_EPOCH):
            return False
        if (
            error is Errors.UNKNOWN_TOPIC_OR_PARTITION
            and self.config.rebalance_commit_unknown_topic_fatal
        ):
            return False
        retry_at = self._now + self._backoff(recon.attempts)
        if retry_at > recon.deadline:
            return False
        recon.attempts += 1
        recon.retry_at = retry_at
        return True

    def _commit_failed(self, error: Errors, commit: _Commit) -> Emit:
        self.stats.commit_failures += 1
        return self._emit(
            EventKind.COMMIT_FAILED,
            reason=error.name,
            count=len(commit.offsets),
            partitions=format_partitions(commit.offsets),
            generation=commit.epoch,
            detail=commit.reason,
        )

    # -------------------------------------------------------------------- close

    def _close_after_commit(self) -> list[MemberOutput]:
        """Release the assignment (revoked when in the group, else lost) and leave."""
        out: list[MemberOutput] = []
        if self.state in _NOT_IN_GROUP:
            out.extend(self._release(EventKind.PARTITIONS_LOST, "close"))
            out.extend(self._finish_close())
            return out
        kind = EventKind.PARTITIONS_REVOKED if self.member_epoch > 0 else EventKind.PARTITIONS_LOST
        out.extend(self._release(kind, "close"))
        self._transition(MemberState.PREPARE_LEAVING)
        out.extend(self._transition_to_sending_leave())
        out.extend(self._pump())
        return out

    def _finish_close(self) -> list[MemberOutput]:
        if not self._closing or self.closed:
            return []
        self.closed = True
        self._closing = False
        self._auto_commit_at = None
        self._poll_deadline = None
        return [self._emit(EventKind.CONSUMER_STOPPED)]

    # ----------------------------------------------------------------- plumbing

    def _send(self, request: GroupRequest, out: list[MemberOutput]) -> None:
        """Send a request to the coordinator, or hold it until one is known."""
        if self.coordinator is None:
            self._unsent.append(request)
        else:
            out.append(request)

    def _backoff(self, attempts: int) -> float:
        """``ExponentialBackoff(retry.backoff.ms, 2, retry.backoff.max.ms, 0.2)``."""
        return retry_backoff_ms(
            self.config.retry_backoff_ms,
            self.config.retry_backoff_max_ms,
            attempts,
            self._rng.random(),
        )

    def _next_corr(self) -> int:
        self._corr += 1
        return self._corr

    def _timed_out(self, what: str) -> Emit:
        return self._emit(
            EventKind.REQUEST_ERROR,
            reason="REQUEST_TIMED_OUT",
            detail=what,
            generation=self.member_epoch,
        )

    def _request_error(self, error: Errors, what: str) -> Emit:
        return self._emit(
            EventKind.REQUEST_ERROR, reason=error.name, detail=what, generation=self.member_epoch
        )

    def _emit(self, kind: EventKind, **fields: object) -> Emit:
        base: dict[str, object] = {
            "group": self.group,
            "member": self.member,
            "member_id": self.member_id or None,
        }
        base.update(fields)
        return Emit(kind, base)


def make_consumer_member(
    *,
    name: str,
    group: str,
    topics: Iterable[str],
    props: Mapping[str, object],
    server_assignor: str | None = None,
    corr_start: int = 0,
    seed: int | None = None,
    rebalance_listener: str = "none",
    topic_pattern: str | None = None,
) -> ConsumerMember:
    """A KIP-848 member from Kafka consumer properties (for the actors).

    Args:
        name: the scenario's member name.
        group: ``group.id``.
        topics: the subscription.
        props: consumer properties by Kafka name; settings that do not apply
            to ``group.protocol=consumer`` (``session.timeout.ms`` ...) are ignored.
        server_assignor: ``group.remote.assignor`` unless ``props`` sets it.
        corr_start: the correlation id before the member's first request.
        seed: the scenario's seed (the retry jitter is drawn from it).
        rebalance_listener: see :class:`ConsumerMember`.
        topic_pattern: the group's ``topic_pattern``. From Kafka 4.0 (``kafka.version``)
            the member subscribes with it (``SubscribedTopicRegex``, resolved by the
            coordinator); before, it subscribes by ``topics``, the names the
            pattern selected when the run was planned (a 3.9 client matches a
            ``java.util.regex.Pattern`` on its metadata; not modelled here).

    Returns:
        The member, with a generator seeded from ``seed``, ``group`` and ``name``.

    Raises:
        ValueError: a property of the wrong type or range.
    """
    merged = dict(props)
    if server_assignor is not None:
        merged.setdefault("group.remote.assignor", server_assignor)
    config = Kip848ConsumerConfig.from_kafka(merged)
    return ConsumerMember(
        member=name,
        group=group,
        topics=topics,
        topic_pattern=topic_pattern if config.broker_regex else None,
        config=config,
        rng=random.Random(f"{seed}/{group}/{name}" if seed is not None else f"{group}/{name}"),
        corr_start=corr_start,
        rebalance_listener=rebalance_listener,
    )
