"""The share consumer's membership (KIP-932) as a sans-I/O state machine.

The membership half of Kafka's ``KafkaShareConsumer``: ``ShareMembershipManager``,
``ShareHeartbeatRequestManager`` and the ``AbstractHeartbeatRequestManager`` /
``AbstractMembershipManager`` they share with the new consumer, plus the
``CoordinatorRequestManager``, without threads or sockets (read at the 4.0, 4.1
and 4.2 release commits into ``notes/share-client-facts.md`` §1; ``CI/`` is
``clients/.../consumer/internals/``). It is fed responses, application polls
and the passing of time, and returns requests (FindCoordinator,
ShareGroupHeartbeat) and effects (the partitions it may fetch from, events).
Fetching, acknowledging and the share sessions are the host's
(:mod:`emulator.host.share_fetch_client`).

What it reproduces:

* **Member id**: a UUID the client draws once and keeps for its life, in every
  version (``AbstractMembershipManager`` 80, KIP-1082); the first heartbeat
  goes with epoch 0, a leave with -1.
* **States** (``MemberState``): UNSUBSCRIBED, JOINING, RECONCILING,
  ACKNOWLEDGING, STABLE, FENCED, PREPARE_LEAVING, LEAVING, FATAL, STALE.
* **Heartbeats** (``AbstractHeartbeatRequestManager.poll`` 164-200): one in
  flight at a time; the first as soon as the coordinator is known (the
  interval starts at 0); then ``HeartbeatIntervalMs`` of the last successful
  response after the previous one was *sent*; at once when JOINING or
  ACKNOWLEDGING (nothing in flight), and LEAVING at once whatever is in
  flight. ``SubscribedTopicNames`` is sent when joining, when it changed, and
  after any error (``sentFields`` reset).
* **Assignment**: no revocation step and no callbacks (every share hook is a
  completed no-op, ``ShareMembershipManager`` 1007-1032): a new assignment is
  taken at once (RECONCILING, then ACKNOWLEDGING; logged as a
  ``rebalance_started`` and ``rebalance_completed`` in the same instant, as the
  other protocols' rebalances are counted), and acknowledged by the next
  heartbeat, sent at once with the same epoch; the same partitions again make
  the member STABLE.
* **Errors** (``onErrorResponse`` 351-446, ``ShareHeartbeatRequestManager``
  95-129): NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE forget the
  coordinator and heartbeat again as soon as it is found (no backoff);
  COORDINATOR_LOAD_IN_PROGRESS backs off ``retry.backoff.ms`` (100, doubling to
  ``retry.backoff.max.ms`` 1000, 20% jitter), except that JOINING and
  ACKNOWLEDGING send at once; FENCED_MEMBER_EPOCH and UNKNOWN_MEMBER_ID fence
  the member: its assignment is cleared and it rejoins at once with epoch 0;
  GROUP_MAX_SIZE_REACHED, INVALID_REQUEST, UNSUPPORTED_VERSION and anything
  unexpected are fatal (FATAL; ``poll()`` throws). A request that got no answer
  backs off and forgets the coordinator.
* **Poll timer** (``max.poll.interval.ms``, 300000; 171-185, 776-806): without
  an application ``poll()`` for that long the member sends a leave heartbeat
  whose answer it ignores, clears its assignment and stops heartbeating
  (STALE); the next ``poll()`` makes it join again with epoch 0.
* **Close** (``ShareConsumerImpl.close`` 950-1055): the host first closes the
  share sessions (their pending acknowledgements go with them, the broker
  releases what is still acquired), then :meth:`ShareMember.close` sends the
  leave heartbeat (-1) once, never retried.

Emulator choices (not Kafka): the reconciliation runs in the same call as the
heartbeat answer that brought it (Kafka: the network thread's next loop, the
same instant here); topic ids are names (no id resolution to wait for).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from dataclasses import dataclass

from emulator.events import EventKind, format_partitions
from emulator.modern.consumer_member import (
    COORDINATOR_ERRORS,
    MemberState,
    retry_backoff_ms,
)
from emulator.modern.errors import Errors
from emulator.modern.messages import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    Emit,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    GroupResponse,
    MemberOutput,
    ShareAssignment,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
    TopicPartition,
)

__all__ = ["MemberState", "ShareConsumerConfig", "ShareMember"]

_FENCING_ERRORS = frozenset({Errors.FENCED_MEMBER_EPOCH, Errors.UNKNOWN_MEMBER_ID})


_IN_GROUP = frozenset(
    {
        MemberState.JOINING,
        MemberState.RECONCILING,
        MemberState.ACKNOWLEDGING,
        MemberState.STABLE,
    }
)
# shouldSkipHeartbeat: no heartbeat in these states (754-760).
_NO_HEARTBEAT = frozenset(
    {
        MemberState.UNSUBSCRIBED,
        MemberState.FATAL,
        MemberState.STALE,
        MemberState.FENCED,
    }
)


@dataclass(frozen=True)
class ShareConsumerConfig:
    """A share consumer's settings, by Kafka's names (``C/ConsumerConfig.java``).

    The group's session timeout and heartbeat interval are the broker's
    (``group.share.session.timeout.ms``, ``group.share.heartbeat.interval.ms``):
    the interval comes in each heartbeat's answer.

    Attributes:
        max_poll_interval_ms: ``max.poll.interval.ms`` (300000).
        retry_backoff_ms: ``retry.backoff.ms`` (100).
        retry_backoff_max_ms: ``retry.backoff.max.ms`` (1000).
        request_timeout_ms: ``request.timeout.ms`` (30000).
        max_poll_records: ``max.poll.records`` (500): ShareFetch's MaxRecords.
        fetch_max_wait_ms: ``fetch.max.wait.ms`` (500): ShareFetch's MaxWaitMs.
        acknowledgement_mode: ``share.acknowledgement.mode`` (``implicit`` or
            ``explicit``, from 4.1); ``inferred`` in 4.0, which has no such config:
            explicit once the application calls ``acknowledge()`` (UNKNOWN, PENDING,
            then EXPLICIT, ``ShareConsumerImpl`` @40 176-188), else implicit.
        ignore_negative_epoch: an answer with a negative epoch is ignored (4.1+;
            4.0 lacks the check, ``ShareMembershipManager`` @40).
    """

    max_poll_interval_ms: int = 300_000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000
    request_timeout_ms: int = 30_000
    max_poll_records: int = 500
    fetch_max_wait_ms: int = 500
    acknowledgement_mode: str = "implicit"
    ignore_negative_epoch: bool = True


@dataclass
class ShareMemberStats:
    """Running counters for the live display; the event log is the record."""

    heartbeats: int = 0
    joins: int = 0
    rebalances: int = 0
    fenced: int = 0
    commits: int = 0  # (the host's MemberMachine counters; a share member commits none)


class ShareMember:
    """One share consumer's membership (ShareGroupHeartbeat).

    Args:
        member: the scenario's name for it (``c-0``), for events.
        group: ``group.id``.
        topics: the subscription (names).
        config: the consumer settings.
        rng: the seeded generator: the member id and the retry jitter.
        corr_start: the correlation id before this member's first request.

    Raises:
        ValueError: no topic.
    """

    def __init__(
        self,
        *,
        member: str,
        group: str,
        topics: Iterable[str],
        config: ShareConsumerConfig,
        rng: random.Random,
        corr_start: int = 0,
    ) -> None:
        self.member = member
        self.group = group
        self.config = config
        self.topics = tuple(sorted(set(topics)))
        if not self.topics:
            raise ValueError("a share consumer subscribes to at least one topic")
        self._rng = rng
        self.member_id = _uuid(rng)
        self.member_epoch = JOIN_GROUP_MEMBER_EPOCH
        self.state = MemberState.UNSUBSCRIBED
        self.coordinator: int | None = None
        self.assigned: frozenset[TopicPartition] = frozenset()
        self.closed = False
        self.stats = ShareMemberStats()
        self.fatal_error: str | None = None
        self._now = 0.0
        self._corr = corr_start
        self._started = False
        # CoordinatorRequestManager
        self._find_corr: int | None = None
        self._find_at: float | None = None
        self._find_attempts = 0
        # Heartbeats
        self._hb_corr: int | None = None
        self._hb_interval_ms = 0
        self._hb_at = 0.0
        self._hb_attempts = 0
        self._hb_backoff_until = 0.0
        self._sent_topics: tuple[str, ...] | None = None
        self._leave_from_poll_timer = False
        # The poll timer
        self._poll_deadline: float | None = None

    # ------------------------------------------------------------------ inputs

    def start(self, now_ms: float) -> list[MemberOutput]:
        """``subscribe`` and the first ``poll()``: find the coordinator and join."""
        if self._started:
            raise RuntimeError(f"member {self.member} already started")
        self._started = True
        self._now = now_ms
        self._poll_deadline = now_ms + self.config.max_poll_interval_ms
        out: list[MemberOutput] = [self._emit(EventKind.CONSUMER_STARTED)]
        self._transition_to_joining()
        out.extend(self._pump())
        return out

    def app_polled(self, now_ms: float) -> list[MemberOutput]:
        """The application called ``poll()``: the poll timer restarts; a STALE member rejoins."""
        self._now = now_ms
        self._poll_deadline = now_ms + self.config.max_poll_interval_ms
        if self.state is MemberState.STALE and not self.closed:
            self._transition_to_joining()
        return self._pump()

    def on_response(self, now_ms: float, response: GroupResponse) -> list[MemberOutput]:
        """The answer to one of this member's requests (matched by ``corr``)."""
        self._now = now_ms
        out: list[MemberOutput] = []
        if response.corr == self._find_corr and isinstance(response, FindCoordinatorResponse):
            self._find_corr = None
            out.extend(self._on_find_coordinator(response))
        elif response.corr == self._hb_corr and isinstance(response, ShareGroupHeartbeatResponse):
            self._hb_corr = None
            out.extend(self._on_heartbeat(response))
        else:
            return out  # a leave's answer, or one no longer waited for
        out.extend(self._pump())
        return out

    def request_failed(self, now_ms: float, corr: int) -> list[MemberOutput]:
        """Request ``corr`` got no answer within ``request.timeout.ms`` (a disconnect).

        A heartbeat backs off, forgets the coordinator
        (``handleCoordinatorDisconnect``) and sends every field again; a
        FindCoordinator backs off.
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
            out.append(self._timed_out("ShareGroupHeartbeat"))
            self._sent_topics = None
            self.coordinator = None
            self._failed_attempt()
        else:
            return out
        out.extend(self._pump())
        return out

    def poll(self, now_ms: float) -> list[MemberOutput]:
        """Let time pass: heartbeats, retries, the poll timer."""
        self._now = now_ms
        return self._pump()

    def close(self, now_ms: float) -> list[MemberOutput]:
        """``close()``'s last step (after the share sessions closed): leave the group.

        PREPARE_LEAVING clears the assignment, LEAVING sends the heartbeat with
        epoch -1 at once; it is sent once and never retried. A member outside
        the group just stops.
        """
        self._now = now_ms
        out: list[MemberOutput] = []
        if self.closed:
            return out
        out.extend(self._set_assignment(frozenset(), "close"))
        if self.state in _IN_GROUP and self.coordinator is not None:
            self.state = MemberState.PREPARE_LEAVING
            self.state = MemberState.LEAVING
            out.append(self._leave_heartbeat())
        self.state = MemberState.UNSUBSCRIBED
        self.closed = True
        out.append(self._emit(EventKind.CONSUMER_STOPPED, reason="close"))
        return out

    # ------------------------------------- the host's MemberMachine interface

    @property
    def owned(self) -> frozenset[TopicPartition]:
        """The partitions it fetches from now (shared with other members)."""
        return self.assigned

    @property
    def app_committing(self) -> bool:
        """A share consumer's acknowledgements are the host's (no commitSync here)."""
        return False

    def app_idle(self, now_ms: float) -> list[MemberOutput] | None:
        """The application sits in ``poll()``: as :meth:`app_polled`; ``None`` when
        only the poll timer moved."""
        self._now = now_ms
        self._poll_deadline = now_ms + self.config.max_poll_interval_ms
        if self.state is MemberState.STALE and not self.closed:
            self._transition_to_joining()
            return self._pump()
        return None

    def app_processing(self, now_ms: float) -> list[MemberOutput]:
        """``poll()`` returned records: the poll timer runs from now."""
        self._now = now_ms
        self._poll_deadline = now_ms + self.config.max_poll_interval_ms
        return []

    def consumed(self, tp: TopicPartition, next_offset: int) -> None:
        """No positions: a share consumer's progress is the share-partition's state."""
        del tp, next_offset

    def app_commit(self, now_ms: float, *, sync: bool) -> list[MemberOutput]:
        """No offsets to commit (the host sends the acknowledgements)."""
        del now_ms, sync
        return []

    def subscribe(
        self, now_ms: float, topics: Iterable[str], topic_pattern: str | None = None
    ) -> list[MemberOutput]:
        """``subscribe`` with other topics: the next heartbeat carries them.

        Raises:
            ValueError: a pattern (a share consumer subscribes by names only) or no topic.
        """
        if topic_pattern is not None:
            raise ValueError("a share consumer subscribes by topic names only")
        new = tuple(sorted(set(topics)))
        if not new:
            raise ValueError("a share consumer subscribes to at least one topic")
        self._now = now_ms
        self.topics = new
        return self._pump()

    def update_metadata(self, now_ms: float, partitions_per_topic: object) -> list[MemberOutput]:
        """Nothing to do: the coordinator assigns from its own metadata."""
        del now_ms, partitions_per_topic
        return []

    def metadata_failed(self, now_ms: float) -> list[MemberOutput]:
        """Never asked for metadata."""
        del now_ms
        return []

    def request_metadata_update(self, now_ms: float) -> list[MemberOutput]:
        """Nothing to do: the host's leader cache serves the share fetches."""
        del now_ms
        return []

    def next_deadline(self) -> float | None:
        """The emulated time at which :meth:`poll` has work to do, if any."""
        if self.closed:
            return None
        best = math.inf
        if self.coordinator is None:
            if self._find_corr is None and self._wants_coordinator():
                best = self._now if self._find_at is None else self._find_at
        elif self._hb_corr is None and self.state not in _NO_HEARTBEAT:
            best = self._hb_due()
        poll = self._poll_deadline
        if poll is not None and poll < best and self.state in _IN_GROUP:
            best = poll
        return None if best == math.inf else max(best, self._now)

    # ----------------------------------------------------------------- pumping

    def _pump(self) -> list[MemberOutput]:
        out: list[MemberOutput] = []
        if self.closed:
            return out
        now = self._now
        # The poll timer (maybePropagateCoordinatorFatalErrorEvent ... pollTimer).
        if (
            self._poll_deadline is not None
            and now >= self._poll_deadline
            and self.state in _IN_GROUP
        ):
            out.extend(self._poll_timer_expired())
        if self.coordinator is None:
            if (
                self._wants_coordinator()
                and self._find_corr is None
                and (self._find_at is None or now >= self._find_at)
            ):
                self._find_corr = self._next_corr()
                self._find_at = None
                out.append(FindCoordinatorRequest(self._find_corr, self.group))
            return out
        if self._hb_corr is None and self.state not in _NO_HEARTBEAT and now >= self._hb_due():
            out.append(self._heartbeat())
        return out

    def _wants_coordinator(self) -> bool:
        return self.state in _IN_GROUP

    def _hb_due(self) -> float:
        """When the next heartbeat may go (``canSendRequest`` / ``shouldHeartbeatNow``)."""
        if self.state in (MemberState.JOINING, MemberState.ACKNOWLEDGING):
            return self._now  # sent at once, the backoff included (shouldHeartbeatNow)
        return max(self._hb_at, self._hb_backoff_until)

    # ------------------------------------------------------- coordinator lookup

    def _on_find_coordinator(self, resp: FindCoordinatorResponse) -> list[MemberOutput]:
        out: list[MemberOutput] = []
        if resp.error is not Errors.NONE or resp.node_id < 0:
            out.append(self._request_error(resp.error, "FindCoordinator"))
            self._find_at = self._now + self._backoff(self._find_attempts)
            self._find_attempts += 1
            return out
        self._find_attempts = 0
        self._find_at = self._now + self._backoff(0)  # RequestState: one backoff after a success
        self.coordinator = resp.node_id
        out.append(self._emit(EventKind.COORDINATOR_FOUND, broker=resp.node_id))
        return out

    # ----------------------------------------------------------------- heartbeat

    def _heartbeat(self) -> ShareGroupHeartbeatRequest:
        corr = self._next_corr()
        self._hb_corr = corr
        joining = self.state is MemberState.JOINING
        topics: tuple[str, ...] | None = None
        if joining or self._sent_topics != self.topics:
            topics = self.topics
            self._sent_topics = self.topics
        self.stats.heartbeats += 1
        if self.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
            self.stats.joins += 1
        self._hb_at = self._now + self._hb_interval_ms  # resetTimer on send
        if self.state is MemberState.ACKNOWLEDGING:
            self.state = MemberState.STABLE  # onHeartbeatRequestGenerated
        return ShareGroupHeartbeatRequest(
            corr,
            self.group,
            member_id=self.member_id,
            member_epoch=self.member_epoch,
            subscribed_topic_names=topics,
        )

    def _leave_heartbeat(self) -> ShareGroupHeartbeatRequest:
        self.member_epoch = LEAVE_GROUP_MEMBER_EPOCH
        self.stats.heartbeats += 1
        self._hb_corr = None  # the leave's answer is not waited for
        return ShareGroupHeartbeatRequest(
            self._next_corr(),
            self.group,
            member_id=self.member_id,
            member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
        )

    def _on_heartbeat(self, resp: ShareGroupHeartbeatResponse) -> list[MemberOutput]:
        out: list[MemberOutput] = []
        if resp.error is not Errors.NONE:
            return self._on_heartbeat_error(resp)
        self._hb_attempts = 0
        self._hb_backoff_until = 0.0
        if resp.heartbeat_interval_ms != self._hb_interval_ms:
            self._hb_interval_ms = resp.heartbeat_interval_ms
            self._hb_at = self._now + self._hb_interval_ms  # updateAndReset at response
        if self.state not in _IN_GROUP:
            return out  # ignored: not in the group (onHeartbeatSuccess)
        if resp.member_epoch < 0 and self.config.ignore_negative_epoch:
            return out
        self.member_epoch = resp.member_epoch
        if resp.assignment is None:
            return out
        new = frozenset(resp.assignment)
        if new != self.assigned:
            self.state = MemberState.RECONCILING
            self.stats.rebalances += 1
            added, gone = new - self.assigned, self.assigned - new
            out.append(
                self._emit(
                    EventKind.REBALANCE_STARTED,
                    count=len(new),
                    partitions=format_partitions(new),
                    detail=f"added={format_partitions(added)} revoked={format_partitions(gone)}",
                )
            )
            out.extend(self._set_assignment(new, "assignment"))
            self.state = MemberState.ACKNOWLEDGING
            out.append(
                self._emit(
                    EventKind.REBALANCE_COMPLETED,
                    count=len(new),
                    partitions=format_partitions(new),
                )
            )
        elif self.state in (MemberState.RECONCILING, MemberState.JOINING):
            self.state = MemberState.STABLE
        return out

    def _on_heartbeat_error(self, resp: ShareGroupHeartbeatResponse) -> list[MemberOutput]:
        out: list[MemberOutput] = [self._request_error(resp.error, "ShareGroupHeartbeat")]
        self._sent_topics = None  # resetHeartbeatState: the next request is a full one
        error = resp.error
        if error in COORDINATOR_ERRORS:
            self.coordinator = None
            self._hb_attempts = 0
            self._hb_backoff_until = 0.0
            self._hb_at = self._now
        elif error is Errors.COORDINATOR_LOAD_IN_PROGRESS:
            self._failed_attempt()
        elif error in _FENCING_ERRORS:
            self._failed_attempt()
            self._hb_backoff_until = 0.0
            out.extend(self._fence())
        else:
            out.extend(self._fatal(error.name))
        return out

    def _failed_attempt(self) -> None:
        """``onFailedAttempt``: the backoff grows and the interval timer is zeroed."""
        self._hb_backoff_until = self._now + self._backoff(self._hb_attempts)
        self._hb_attempts += 1
        self._hb_at = self._now

    def _fence(self) -> list[MemberOutput]:
        out: list[MemberOutput] = []
        self.stats.fenced += 1
        self.state = MemberState.FENCED
        out.extend(self._set_assignment(frozenset(), "fenced", lost=True))
        self.member_epoch = JOIN_GROUP_MEMBER_EPOCH
        self._transition_to_joining()
        return out

    def _fatal(self, error: str) -> list[MemberOutput]:
        """FATAL: the assignment is gone and ``poll()`` throws from now on."""
        self.fatal_error = error
        out = self._set_assignment(frozenset(), "fatal", lost=True)
        self.state = MemberState.FATAL
        return out

    def _poll_timer_expired(self) -> list[MemberOutput]:
        """``max.poll.interval.ms`` passed: leave (answer ignored), STALE until the next poll."""
        out: list[MemberOutput] = [
            self._emit(
                EventKind.REQUEST_ERROR,
                reason="POLL_TIMEOUT",
                detail=f"max.poll.interval.ms {self.config.max_poll_interval_ms} expired",
            )
        ]
        out.extend(self._set_assignment(frozenset(), "poll_timeout", lost=True))
        if self.coordinator is not None:
            self.state = MemberState.PREPARE_LEAVING
            self.state = MemberState.LEAVING
            out.append(self._leave_heartbeat())
        self.state = MemberState.STALE
        self._poll_deadline = None
        return out

    def _transition_to_joining(self) -> None:
        self.state = MemberState.JOINING
        self.member_epoch = JOIN_GROUP_MEMBER_EPOCH
        self._sent_topics = None
        self._hb_corr = None

    # ---------------------------------------------------------------- assignment

    def _set_assignment(
        self, new: frozenset[TopicPartition], reason: str, *, lost: bool = False
    ) -> list[MemberOutput]:
        """Take ``new`` as the partitions to fetch from (no revocation step in share groups).

        Partitions that go are ``partitions_revoked``, or ``partitions_lost``
        when the member left the group without a say (fenced, fatal, stale).
        """
        old = self.assigned
        if new == old:
            return []
        self.assigned = new
        out: list[MemberOutput] = []
        gone = old - new
        added = new - old
        if gone:
            out.append(
                self._emit(
                    EventKind.PARTITIONS_LOST if lost else EventKind.PARTITIONS_REVOKED,
                    reason=reason,
                    count=len(gone),
                    partitions=format_partitions(gone),
                )
            )
        if added:
            out.append(
                self._emit(
                    EventKind.PARTITIONS_ASSIGNED,
                    reason=reason,
                    count=len(added),
                    partitions=format_partitions(added),
                )
            )
        out.append(ShareAssignment(tuple(sorted(new))))
        return out

    # ----------------------------------------------------------------- plumbing

    def next_corr(self) -> int:
        """A new correlation id of this member (its share fetches take theirs here too)."""
        self._corr += 1
        return self._corr

    _next_corr = next_corr

    def _backoff(self, attempts: int) -> float:
        """``ExponentialBackoff(retry.backoff.ms, 2, retry.backoff.max.ms, 0.2)``."""
        return retry_backoff_ms(
            self.config.retry_backoff_ms,
            self.config.retry_backoff_max_ms,
            attempts,
            self._rng.random(),
        )

    def _emit(self, kind: EventKind, **fields: object) -> Emit:
        base: dict[str, object] = {
            "group": self.group,
            "member": self.member,
            "member_id": self.member_id,
            "generation": self.member_epoch,
        }
        base.update({k: v for k, v in fields.items() if v is not None})
        return Emit(kind, base)

    def _request_error(self, error: Errors, kind: str) -> Emit:
        return self._emit(EventKind.REQUEST_ERROR, reason=error.name, detail=kind)

    def _timed_out(self, kind: str) -> Emit:
        return self._emit(EventKind.REQUEST_ERROR, reason="REQUEST_TIMED_OUT", detail=kind)


def _uuid(rng: random.Random) -> str:
    """A random (version 4) UUID as ``Uuid.toString`` prints it: base64url, no padding.

    Kafka's ``Uuid.randomUuid()`` (what the share consumer's member id is) prints
    as 22 characters of URL-safe base64; drawn from the seeded generator here.
    """
    import base64

    raw = bytearray(rng.getrandbits(8) for _ in range(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    return base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=")
