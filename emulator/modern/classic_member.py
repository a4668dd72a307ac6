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
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from emulator.delivery import REBALANCE_LISTENERS
from emulator.events import EventKind, format_partitions
from emulator.modern.assignors import (
    ClientAssignor,
    MemberSubscription,
    client_assignor,
    validate_cooperative_assignment,
)
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
    StartFetching,
    StopFetching,
    Subscription,
    SyncGroupRequest,
    SyncGroupResponse,
    TopicPartition,
    commit_age_ms,
)

PROTOCOL_TYPE: Final = "consumer"
"""``ConsumerProtocol.PROTOCOL_TYPE``."""

JOIN_GROUP_TIMEOUT_LAPSE_MS: Final = 5000
"""``AbstractCoordinator.JOIN_GROUP_TIMEOUT_LAPSE``: JoinGroup waits the rebalance timeout + 5 s."""

COOPERATIVE_STICKY: Final = "cooperative-sticky"
EAGER: Final = "EAGER"
COOPERATIVE: Final = "COOPERATIVE"

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
        topics: the subscribed topics.
        config: the consumer's settings.
        partitions_per_topic: the cluster metadata the leader assigns from
            (topic -> partition count); see :meth:`update_metadata`.
        assignors: the ``partition.assignment.strategy`` instances in
            preference order; by default looked up by name in the client
            assignor registry (:func:`emulator.modern.assignors.client_assignor`).
        validate_cooperative: the leader's COOPERATIVE check; by default the
            registry's ``validate_cooperative_assignment``.
        corr_start: the first correlation id this member uses.

    Raises:
        ValueError: no topics, or assignors with no common rebalance protocol.
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
    ) -> None:
        if not topics:
            raise ValueError("a member subscribes to at least one topic")
        if rebalance_listener not in REBALANCE_LISTENERS:
            raise ValueError(f"rebalance_listener must be one of {REBALANCE_LISTENERS}")
        self.rebalance_listener = rebalance_listener
        self._app_commit: _Commit | None = None
        self.member = member
        self.group = group
        self.topics = tuple(sorted(set(topics)))
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
        self._metadata = dict(partitions_per_topic)
        self._assignment_snapshot: dict[str, int] | None = None
        self._group_topics: frozenset[str] = frozenset(self.topics)
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

    # ----------------------------------------------------------------- inputs

    def start(self, now_ms: float) -> list[MemberOutput]:
        """``subscribe()`` and the first ``poll()``: find the coordinator, then join."""
        if self._started:
            raise RuntimeError(f"member {self.member} already started")
        self._started = True
        self._now = now_ms
        self._last_app_poll = now_ms
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
        """New cluster metadata; the leader rejoins if the assigned topics changed."""
        self._now = now_ms
        self._metadata = dict(partitions_per_topic)
        return self._run()

    def subscribe(self, now_ms: float, topics: Sequence[str]) -> list[MemberOutput]:
        """``KafkaConsumer.subscribe`` with another set of topics.

        ``ConsumerCoordinator.rejoinNeededOrPending`` sees that the
        subscription differs from the one it joined with and requests a
        rejoin ("subscription has changed"); the JoinGroup carries the new
        topics. Partitions of dropped topics stay assigned until that
        rebalance's ``onJoinPrepare`` (EAGER: all revoked; COOPERATIVE: those
        of the dropped topics).
        """
        self._now = now_ms
        new = tuple(sorted(set(topics)))
        if not new:
            raise ValueError("a member subscribes to at least one topic")
        if new == self.topics or self.closed or self._closing:
            return []
        self.topics = new
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
        if self._app_in_poll and not self._closing and self.coordinator is not None:
            if self._rejoin_needed or self._join is not None or self._metadata_changed():
                times.append(self._join_retry_at)
                times.append(self._join_prepare_retry_at)
                if self._join_prepare_deadline is not None:
                    times.append(self._join_prepare_deadline)
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
        out, self._out = self._out, []
        return out

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
        """``ConsumerCoordinator.rejoinNeededOrPending``: also the leader's metadata check."""
        if self._metadata_changed():
            if not self._rejoin_needed:
                self._request_rejoin("cached metadata has changed")
            return True
        return self._rejoin_needed or self._join is not None

    def _metadata_changed(self) -> bool:
        return (
            self._assignment_snapshot is not None
            and self._assignment_snapshot != self._metadata_snapshot()
        )

    def _metadata_snapshot(self) -> dict[str, int]:
        """Partition counts of the topics the group subscribes to (``MetadataSnapshot``)."""
        return {t: self._metadata.get(t, 0) for t in sorted(self._group_topics)}

    # --------------------------------------------------- application thread

    def _application_thread(self) -> None:
        """``ConsumerCoordinator.poll`` and ``updateFetchPositions``, non-blocking."""
        if self.coordinator is None:
            self._lookup_coordinator()
            return
        if self._rejoin_needed_or_pending() and not self._join_group_if_needed():
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
        """``ConsumerCoordinator.metadata``: one subscription per assignor."""
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
        """``ConsumerCoordinator.onLeaderElected``: run the assignor, send SyncGroup."""
        assignor = self._lookup_assignor(resp.protocol_name)
        if assignor is None:
            self._fail_join(_Outcome(False, None, "IllegalStateException:invalid protocol"))
            return
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
        self._group_topics = frozenset(t for m in members.values() for t in m.topics)
        if resp.skip_assignment:
            self._assignment_snapshot = self._metadata_snapshot()
            self._send_sync_group(())
            return
        try:
            assignment = assignor.assign(self._metadata, members)
            if self.protocol == COOPERATIVE and assignor.name != COOPERATIVE_STICKY:
                owned = {mid: m.owned_partitions for mid, m in members.items()}
                self._validate_cooperative(owned, assignment)
        except (ValueError, RuntimeError) as exc:  # IllegalStateException in Java
            self._emit(EventKind.REQUEST_ERROR, reason="IllegalStateException", detail=str(exc))
            self._fail_join(_Outcome(False, None, "IllegalStateException"))
            return
        self._assignment_snapshot = self._metadata_snapshot()
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

        Returns False while the pre-rebalance commit is in flight or backing off.
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
        if any(tp[0] not in self.topics for tp in assigned):
            self._request_rejoin("received assignment does not match the current subscription")
            return
        owned = self.owned
        added = assigned - owned
        if self.protocol == COOPERATIVE:
            revoked = owned - assigned
            if revoked:
                self._drop_partitions(revoked, lost=False)
                self._request_rejoin("need to revoke partitions and re-join")
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
        elif err is Errors.COORDINATOR_LOAD_IN_PROGRESS:
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
