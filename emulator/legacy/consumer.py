"""The Kafka 0.8.2 ZooKeeper-coordinated consumer as a sans-I/O state machine.

This is ``ZookeeperConsumerConnector`` (K@0.8.2.2, kafka-protocols.md A4-A5)
without its I/O: the machine is fed events (start, a watch firing, a new
ZooKeeper session, the result of a ZooKeeper request, the passing of time) and
returns :mod:`requests and effects <emulator.legacy.messages>`. A driver does
the ZooKeeper work and the fetching; unit tests drive it on a fake clock.

What it reproduces, step by step:

* **Triggers (A4).** Watch callbacks only set ``isWatcherTriggered``; one
  watcher-executor runs a single ``syncedRebalance`` for any number of
  coalesced events, and runs again if more arrived meanwhile. Start-up and
  ``handleNewSession`` call ``syncedRebalance`` directly. All of them
  serialize on ``rebalanceLock``.
* **syncedRebalance (A5).** Up to ``rebalance.max.retries`` attempts. Each
  attempt reads the cluster, then ``rebalance``: read my topic count and the
  brokers; stop fetchers and commit (auto-commit on) *before* releasing;
  release every owned partition; compute the assignment on a fresh read of the
  group; fetch offsets; claim every assigned partition with an ephemeral
  create. Any NodeExists rolls back all of this attempt's claims. A failed
  attempt stops fetchers, commits again and sleeps ``rebalance.backoff.ms``
  (after the last attempt too). After the last failure the consumer gives up
  ("can't rebalance after N retries") and owns nothing until the next event.
* **Session expiry.** ``handleStateChanged`` is a no-op: a disconnected
  consumer keeps fetching. ``handleNewSession`` clears the partition registry
  (its owner nodes are gone with the old session) without stopping the
  fetchers, re-registers at once (outside ``rebalanceLock``, so a rebalance
  in flight finds its ids znode again), then rebalances under the lock. This
  is the zombie window.
* **Commits.** ``commitOffsets`` writes the consumed offset of every
  partition in the registry that changed since the last checkpoint
  (``checkpointedZkOffsets``): in ``closeFetchers`` during a rebalance, at
  ``shutdown()`` and from the auto-commit thread, scheduled at a fixed period
  of ``auto.commit.interval.ms`` (60 s) beside the rebalances, all only with
  ``auto.commit.enable``; without it only the application commits
  (:meth:`LegacyConsumer.app_commit`).
* **Positions.** The consumed offset is the iterator's: ``ConsumerIterator.next()``
  moves it to ``offset + 1`` as it hands a message to the application, before
  the application processes it (K@0.8.2.2 ``ConsumerIterator.scala`` 46-54).
  The data path reports it (:meth:`LegacyConsumer.consumed`) before every
  call into the machine, so a commit includes the message in hand: the
  rebalance commit after ``closeFetchers`` is exactly where the next owner
  starts, and a crash after a commit loses the message that was in hand.
* **Subscription by filter** (:class:`~emulator.legacy.wildcard.WildcardSubscription`,
  ``createMessageStreamsByFilter``; issue-19 facts A4). The start is
  ``WildcardStreamsHandler``'s (K@0.8.2.2 ``ZookeeperConsumerConnector.scala``
  908-945): bootstrap ``wildcardTopics`` from ``/brokers/topics`` filtered,
  register the ``WildcardTopicCount``, ``reinitializeConsumer`` (its
  subscriptions, then ``syncedRebalance``), then the
  ``ZookeeperTopicEventWatcher`` with its immediate bootstrap call
  (``ZookeeperTopicEventWatcher.scala`` 32-44). Each change of the
  ``/brokers/topics`` children (watch source ``topics``) runs
  ``handleChildChange`` (a ``getChildren`` of its own, 67) and
  ``handleTopicEvent`` (947-972): if the filtered list gained or lost a topic,
  ``reinitializeConsumer`` calls ``syncedRebalance`` *itself* and waits for it,
  on the zkclient event thread, not through the coalescing watcher executor:
  every wildcard member of the group rebalances on its own watch at about the
  same moment (the herd), with no ``/ids`` change. A change the filter does
  not allow costs only the reads. The watcher's lock serializes its events;
  one more arrives at most while it is busy (zkclient's one armed watch). A
  deleted topic leaves behind what 0.8 leaves (the TODO at 957-961): its data
  watch and its place in ``topicStreamsMap`` (:attr:`LegacyConsumer.stream_topics`),
  its offsets znodes (nothing deletes them); its owner znodes go at the
  rebalance the deletion itself triggers. A *static* consumer whose topic is
  deleted only logs (``ZKTopicPartitionChangeListener.handleDataDeleted``,
  510-513: the driver does not wake it), and keeps its owner znodes until the
  next rebalance for any reason.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field

from emulator.events import EventKind, format_partitions, format_topics
from emulator.legacy.assignors import range_assign, roundrobin_assign, strategy_from_config
from emulator.legacy.config import LegacyConsumerConfig
from emulator.legacy.messages import (
    ClaimOwnership,
    ClaimResult,
    CloseSession,
    CommitOffsets,
    Effect,
    Emit,
    FetchOffsets,
    GroupView,
    IoResult,
    Output,
    ReadAssignmentContext,
    ReadCluster,
    ReadRebalanceContext,
    ReadTopics,
    RebalanceContext,
    RegisterConsumer,
    ReinitializeWildcard,
    ReleaseOwnership,
    Request,
    Sleep,
    StartFetchers,
    StopFetchers,
    TopicPartition,
    WatchBrokers,
    WatchTopics,
)
from emulator.legacy.wildcard import WildcardSubscription, topic_event


@dataclass(frozen=True)
class _AwaitRebalance:
    """A channel calls ``syncedRebalance`` itself and waits for ``rebalanceLock`` and its end.

    The topic watcher's ``reinitializeConsumer`` does (K@0.8.2.2
    ``ZookeeperConsumerConnector.scala`` 905, from 971): the rebalance runs as a
    job of the lock, and the channel goes on once it is over.
    """

    reason: str


# A protocol procedure: yields effects, requests and rebalance waits, is sent
# the result of each request (``None`` after an effect or a rebalance wait).
Proc = Generator[Output | _AwaitRebalance, IoResult | None, bool]

TOPICS_SOURCE = "topics"
"""The watch source of a ``/brokers/topics`` child change (the topic event watcher)."""
TOPIC_EVENT = "topic_event"
"""The reason of the rebalance ``handleTopicEvent`` runs."""


class ConsumerState(enum.StrEnum):
    """Where the consumer is, as a person reading its log would say it."""

    NEW = "new"
    REGISTERING = "registering"
    REBALANCING = "rebalancing"
    BACKOFF = "backoff"
    STABLE = "stable"  # the last syncedRebalance succeeded
    GAVE_UP = "gave_up"  # the last syncedRebalance failed: owns nothing
    SHUTTING_DOWN = "shutting_down"
    CLOSED = "closed"


class RebalanceFailed(Exception):
    """An attempt failed with a ZooKeeper error or a broken view (Kafka logs it at info)."""


@dataclass
class ConsumerStats:
    """Running counters, for live progress; the event log is the record."""

    rebalances: int = 0
    attempts: int = 0
    conflicts: int = 0
    gave_up: int = 0
    commits: int = 0
    zk_reads: int = 0
    zk_writes: int = 0
    watch_events: int = 0


@dataclass
class _Channel:
    """One thread of control: the rebalance lock holder, the auto-committer, or shutdown."""

    name: str
    proc: Proc | None = None
    waiting_rid: int | None = None
    sleep_until: float | None = None
    on_done: list[object] = field(default_factory=list)
    awaits_rebalance: bool = False  # parked until the rebalance it asked for is over


class LegacyConsumer:
    """One legacy high-level consumer (one ``ZookeeperConsumerConnector``).

    Args:
        member: the scenario's name for it (``c-0``), for events.
        consumer_id: the A2 consumer id (``<group>_<host>-<ms>-<hex>``).
        group: ``group.id``.
        subscription: ``{topic: numStreams}`` (``createMessageStreams``), or a
            :class:`~emulator.legacy.wildcard.WildcardSubscription`
            (``createMessageStreamsByFilter``).
        config: the Kafka settings.
    """

    def __init__(
        self,
        *,
        member: str,
        consumer_id: str,
        group: str,
        subscription: Mapping[str, int] | WildcardSubscription,
        config: LegacyConsumerConfig,
    ) -> None:
        self.wildcard: WildcardSubscription | None = None
        if isinstance(subscription, WildcardSubscription):
            self.wildcard = subscription
            subscription = subscription.topic_count_map()
        if not subscription or any(n < 1 for n in subscription.values()):
            raise ValueError("a consumer subscribes to at least one topic with >= 1 stream")
        self.member = member
        self.consumer_id = consumer_id
        self.group = group
        # What the ids znode's "subscription" holds: {topic: n}, or {regex: n}.
        self.subscription = dict(subscription)
        self.config = config
        # WildcardStreamsHandler.wildcardTopics: the filtered topics it last saw.
        self.wildcard_topics: tuple[str, ...] = ()
        # topicStreamsMap's topics: every topic reinitializeConsumer gave streams
        # (only grows, a deleted topic's too: its data watch stays).
        self.stream_topics: dict[str, None] = {}
        self.state = ConsumerState.NEW
        self.stats = ConsumerStats()
        # topicRegistry: partition -> thread id, and what the fetchers run.
        self.owned: dict[TopicPartition, str] = {}
        self.fetching: dict[TopicPartition, str] = {}
        self._consumed: dict[TopicPartition, int] = {}
        self._checkpointed: dict[TopicPartition, int | None] = {}
        self._now = 0.0
        self._rid = 0
        self._shutting_down = False
        self._watcher_triggered = False
        self._trigger_reasons: list[str] = []
        self._executor_busy = False
        self._lock_jobs: deque[tuple[str, str]] = deque()  # (job, reason)
        self._lock = _Channel("lock")
        self._autocommit = _Channel("autocommit")
        self._shutdown = _Channel("shutdown")
        # zkclient's event thread running handleNewSession's registration,
        # which Kafka does outside rebalanceLock.
        self._session = _Channel("session")
        # The application thread's own commitOffsets() (auto-commit off).
        self._app = _Channel("app")
        # The ZookeeperTopicEventWatcher's lock holder: its creation, each
        # /brokers/topics event, its re-subscription on a new session.
        self._topics = _Channel("topics")
        self._topic_jobs: deque[str] = deque()
        self._watcher_created = False
        # zkclient's event thread runs handleNewSession, syncedRebalance
        # included, before the events queued behind it (the topic watcher's).
        self._event_thread_held = False
        self._resume_awaiting = False
        self._topic_job_on_event_thread = False
        self._new_session_deferred = False
        self._channels = (
            self._lock,
            self._autocommit,
            self._shutdown,
            self._session,
            self._app,
            self._topics,
        )
        self._next_autocommit: float | None = None
        self._attempt_reads = 0
        self._attempt_writes = 0

    # ------------------------------------------------------------------ inputs

    def start(self, now_ms: float) -> list[Output]:
        """``createMessageStreams``: register, subscribe the watches, rebalance.

        The driver subscribes the child watch on ``/consumers/<g>/ids`` and the
        data watches on ``/brokers/topics/<t>`` when it performs the
        :class:`RegisterConsumer` request.
        """
        if self.state is not ConsumerState.NEW:
            raise RuntimeError(f"consumer {self.member} already started")
        self._now = now_ms
        self.state = ConsumerState.REGISTERING
        if self.config.auto_commit_enable:
            self._next_autocommit = now_ms + self.config.auto_commit_interval_ms
        out: list[Output] = [self._emit(EventKind.CONSUMER_STARTED)]
        self._lock_jobs.append(("register_and_rebalance", "start"))
        out.extend(self._pump_lock())
        return out

    def watch_fired(self, now_ms: float, source: str) -> list[Output]:
        """A watched znode changed: ``ids`` (group membership), ``topic:<t>``, ``brokers``
        or ``topics`` (the children of ``/brokers/topics``, a wildcard consumer's).

        ``ids``, ``topic:<t>`` and ``brokers`` only set ``isWatcherTriggered``
        and wake the executor, as ``ZKRebalancerListener.rebalanceEventTriggered``
        does (K@0.8.2.2 ``ZookeeperConsumerConnector.scala`` 562-571, 497-501).
        ``topics`` is the topic event watcher's ``handleChildChange``
        (``ZookeeperTopicEventWatcher.scala`` 63-77): it runs under the
        watcher's lock, after the event it may still be handling; one event
        waits at most (zkclient re-arms its one-shot watch only when it runs
        the event, ``ZkClient.java`` 556-578 at zkclient 0.3).
        """
        self._now = now_ms
        self.stats.watch_events += 1
        if self._shutting_down or self.state is ConsumerState.CLOSED:
            return []
        if source == TOPICS_SOURCE:
            if self.wildcard is None or not self._watcher_created:
                return []  # nobody listens to /brokers/topics
            if "event" not in self._topic_jobs:
                self._topic_jobs.append("event")
            return self._pump_topics()
        out: list[Output] = [self._emit(EventKind.REBALANCE_TRIGGERED, reason=source)]
        self._watcher_triggered = True
        self._trigger_reasons.append(source)
        out.extend(self._wake_executor())
        return out

    def new_session(self, now_ms: float) -> list[Output]:
        """``ZKSessionExpireListener.handleNewSession`` after the old session expired.

        Clears the registry without stopping the fetchers (``resetState``) and
        re-registers at once, *outside* ``rebalanceLock`` as Kafka does, so a
        rebalance that holds the lock meanwhile finds its ids znode again on its
        next attempt. Then ``syncedRebalance`` runs under the lock. While the
        registration is in flight no lock job starts: Kafka runs
        ``handleNewSession`` on the zkclient event thread, which delivers no
        watch event until it returns.

        That thread may itself be busy: a wildcard consumer's topic event runs
        its ``syncedRebalance`` on it (``handleTopicEvent``, K@0.8.2.2
        ``ZookeeperConsumerConnector.scala`` 971). zkclient queues the new
        session's events behind it (``ZkClient.java`` 466-476 at zkclient 0.3),
        so ``handleNewSession`` waits until that event is handled; meanwhile the
        topic event's rebalance works on the new session without its ids znode.
        """
        self._now = now_ms
        if self._shutting_down or self.state is ConsumerState.CLOSED:
            return []
        if self._topics.proc is not None and self._topic_job_on_event_thread:
            self._new_session_deferred = True
            return []
        return self._begin_new_session()

    def _begin_new_session(self) -> list[Output]:
        out: list[Output] = [self._emit(EventKind.REBALANCE_TRIGGERED, reason="new_session")]
        self.owned.clear()
        ch = self._session
        if ch.proc is not None:  # the registration for an earlier session is moot
            ch.proc.close()
        if self._watcher_created and "resubscribe" not in self._topic_jobs:
            # The topic watcher's own ZkSessionExpireListener.handleNewSession
            # (ZookeeperTopicEventWatcher.scala 88-95), behind the connector's.
            self._topic_jobs.append("resubscribe")
        self._event_thread_held = True
        ch.proc, ch.waiting_rid, ch.sleep_until = self._handle_new_session(), None, None
        out.extend(self._advance(ch, None))
        return out

    def consumed(self, tp: TopicPartition, next_offset: int) -> None:
        """The iterator handed out ``tp`` up to ``next_offset`` (exclusive).

        ``PartitionTopicInfo.resetConsumeOffset`` as ``ConsumerIterator.next()``
        returns a message. Progress on a partition that is no longer in the
        registry (a message handed out after a rebalance took the partition
        away) is not committed, as in Kafka where it updates a dropped
        ``PartitionTopicInfo``.
        """
        if tp in self.owned:
            self._consumed[tp] = next_offset

    @property
    def consumed_offsets(self) -> dict[TopicPartition, int]:
        """The registry's consumed offsets (what ``commitOffsets`` would write)."""
        return {tp: off for tp, off in self._consumed.items() if tp in self.owned}

    @property
    def app_committing(self) -> bool:
        """Whether the application's ``commitOffsets()`` is still running."""
        return self._app.proc is not None

    def app_commit(self, now_ms: float) -> list[Output]:
        """The application calls ``commitOffsets()`` (its pattern with auto-commit off).

        Writes the consumed offsets that changed, as the rebalance and the
        auto-committer do; the call is synchronous (ZooKeeper writes), so the
        application waits (:attr:`app_committing`). A call while one runs is
        dropped (the application thread cannot make two at once).
        """
        self._now = now_ms
        if self._app.proc is not None or self._shutting_down:
            return []
        self._app.proc = self._commit_proc("manual")
        return self._advance(self._app, None)

    def complete(self, now_ms: float, rid: int, result: IoResult) -> list[Output]:
        """The driver's answer to request ``rid``."""
        self._now = now_ms
        self.stats.zk_reads += result.reads
        self.stats.zk_writes += result.writes
        for ch in self._channels:
            if ch.waiting_rid == rid:
                ch.waiting_rid = None
                if ch is self._lock:
                    self._attempt_reads += result.reads
                    self._attempt_writes += result.writes
                return self._advance(ch, result)
        raise KeyError(f"consumer {self.member}: no request {rid} is outstanding")

    def poll(self, now_ms: float) -> list[Output]:
        """Let time pass: wake sleepers and run the auto-committer."""
        self._now = now_ms
        out: list[Output] = []
        for ch in self._channels:
            if ch.sleep_until is not None and now_ms >= ch.sleep_until:
                ch.sleep_until = None
                out.extend(self._advance(ch, None))
        if (
            self._next_autocommit is not None
            and now_ms >= self._next_autocommit
            and not self._shutting_down
        ):
            # scheduleAtFixedRate: the next run is one period after the last due time.
            while self._next_autocommit <= now_ms:
                self._next_autocommit += self.config.auto_commit_interval_ms
            if self._autocommit.proc is None:
                self._autocommit.proc = self._commit_proc("auto")
                out.extend(self._advance(self._autocommit, None))
        return out

    def next_deadline(self) -> float | None:
        """The emulated time at which :meth:`poll` has work to do, if any."""
        times = [
            t
            for t in (
                self._lock.sleep_until,
                self._autocommit.sleep_until,
                self._shutdown.sleep_until,
                None if self._shutting_down else self._next_autocommit,
            )
            if t is not None
        ]
        return min(times) if times else None

    def shutdown(self, now_ms: float) -> list[Output]:
        """Graceful ``shutdown()``: stop fetchers, commit, close the ZooKeeper session.

        An in-flight rebalance is abandoned (``isShuttingDown``); the closed
        session deletes the ids and owner znodes on the server.
        """
        self._now = now_ms
        if self._shutting_down:
            return []
        self._shutting_down = True
        self.state = ConsumerState.SHUTTING_DOWN
        self._next_autocommit = None
        for ch in (self._lock, self._autocommit, self._session, self._app, self._topics):
            if ch.proc is not None:
                ch.proc.close()
            ch.proc, ch.waiting_rid, ch.sleep_until = None, None, None
            ch.awaits_rebalance = False
        self._lock_jobs.clear()
        self._topic_jobs.clear()
        self._shutdown.proc = self._shutdown_proc()
        return self._advance(self._shutdown, None)

    @property
    def outstanding(self) -> list[int]:
        """Request ids the driver still owes an answer to."""
        return [ch.waiting_rid for ch in self._channels if ch.waiting_rid is not None]

    # ---------------------------------------------------------------- plumbing

    def _next_rid(self) -> int:
        self._rid += 1
        return self._rid

    def _emit(self, kind: EventKind, **fields: object) -> Emit:
        base: dict[str, object] = {
            "group": self.group,
            "member": self.member,
            "member_id": self.consumer_id,
        }
        base.update(fields)
        return Emit(kind, base)

    def _advance(self, ch: _Channel, value: IoResult | None) -> list[Output]:
        """Run a channel's procedure until it waits on a request or ends."""
        out: list[Output] = []
        proc = ch.proc
        if proc is None:
            return out
        while True:
            try:
                item = proc.send(value)
            except StopIteration:
                ch.proc = None
                out.extend(self._channel_done(ch))
                return out
            if isinstance(item, Effect):
                out.append(item)
                value = None
                continue
            if isinstance(item, Sleep):
                ch.sleep_until = item.until_ms
                return out
            if isinstance(item, _AwaitRebalance):
                ch.awaits_rebalance = True
                self._lock_jobs.append(("awaited_rebalance", item.reason))
                out.extend(self._pump_lock())
                return out
            assert isinstance(item, Request)
            ch.waiting_rid = item.rid
            out.append(item)
            return out

    def _channel_done(self, ch: _Channel) -> list[Output]:
        if ch is self._lock or ch is self._session:
            out: list[Output] = []
            if ch is self._lock and self._resume_awaiting:
                self._resume_awaiting = False
                out.extend(self._rebalance_over())
            out.extend(self._pump_lock())
            out.extend(self._pump_topics())
            return out
        if ch is self._topics:
            out = []
            if self._new_session_deferred and not self._shutting_down:
                self._new_session_deferred = False
                out.extend(self._begin_new_session())
            out.extend(self._pump_topics())
            return out
        if ch is self._shutdown:
            self.state = ConsumerState.CLOSED
        return []

    def _rebalance_over(self) -> list[Output]:
        """The awaited rebalance ended: the channel that waits for it goes on."""
        for ch in self._channels:
            if ch.awaits_rebalance:
                ch.awaits_rebalance = False
                return self._advance(ch, None)
        return []

    def _pump_topics(self) -> list[Output]:
        """Start the topic watcher's next job if its lock and the event thread are free."""
        ch = self._topics
        if (
            ch.proc is not None
            or self._shutting_down
            or self._event_thread_held
            or self._session.proc is not None
            or not self._topic_jobs
        ):
            return []
        job = self._topic_jobs.popleft()
        # The watcher's creation runs on the application thread (the
        # constructor); its events and re-subscription on zkclient's event thread.
        self._topic_job_on_event_thread = job != "watch"
        if job == "watch":
            ch.proc = self._create_topic_watcher()
        elif job == "resubscribe":
            ch.proc = self._resubscribe_topic_watcher()
        else:
            ch.proc = self._handle_child_change()
        return self._advance(ch, None)

    def _wake_executor(self) -> list[Output]:
        """The watcher executor takes the trigger flag if it is free."""
        if self._watcher_triggered and not self._executor_busy:
            self._watcher_triggered = False
            reasons = self._trigger_reasons
            self._trigger_reasons = []
            self._executor_busy = True
            self._lock_jobs.append(("executor_rebalance", ",".join(sorted(set(reasons)))))
            return self._pump_lock()
        return []

    def _pump_lock(self) -> list[Output]:
        """Start the next job waiting for ``rebalanceLock`` if the lock is free."""
        if self._lock.proc is not None or self._session.proc is not None or self._shutting_down:
            return []
        if not self._lock_jobs:
            return []
        job, reason = self._lock_jobs.popleft()
        if job == "register_and_rebalance":
            self._lock.proc = self._register_and_rebalance(reason)
        elif job == "synced_rebalance":
            self._lock.proc = self._new_session_rebalance(reason)
        elif job == "awaited_rebalance":
            self._lock.proc = self._awaited_rebalance(reason)
        else:
            self._lock.proc = self._executor_job(reason)
        return self._advance(self._lock, None)

    # -------------------------------------------------------------- procedures

    def _executor_job(self, reason: str) -> Proc:
        yield from self._synced_rebalance(reason)
        self._executor_busy = False
        # The executor loops: more events may have been coalesced meanwhile.
        if self._watcher_triggered:
            self._watcher_triggered = False
            reasons = self._trigger_reasons
            self._trigger_reasons = []
            self._executor_busy = True
            self._lock_jobs.append(("executor_rebalance", ",".join(sorted(set(reasons)))))
        return True

    def _register_request(self) -> RegisterConsumer:
        """``registerConsumerInZK`` with this consumer's ``TopicCount``."""
        if self.wildcard is None:
            return RegisterConsumer(self._next_rid(), self.subscription)
        return RegisterConsumer(self._next_rid(), self.subscription, self.wildcard.pattern)

    def _register_and_rebalance(self, reason: str) -> Proc:
        """``createMessageStreams`` (``consume``) or ``WildcardStreamsHandler``'s constructor.

        Static: register, then ``reinitializeConsumer`` (the driver subscribes
        with the registration) and ``syncedRebalance``. By filter (K@0.8.2.2
        ``ZookeeperConsumerConnector.scala`` 929-945): read and filter
        ``/brokers/topics`` (``wildcardTopics``), register the
        ``WildcardTopicCount``, ``reinitializeConsumer`` (:class:`ReinitializeWildcard`,
        then ``syncedRebalance``), and only then create the topic event
        watcher. ``syncedRebalance`` throws once it gives up (633): the
        exception leaves the constructor before 945, and that consumer never
        watches ``/brokers/topics``.
        """
        self.state = ConsumerState.REGISTERING
        wild = self.wildcard
        if wild is not None:
            res = yield ReadTopics(self._next_rid(), parent_may_not_exist=True)
            assert res is not None
            if res.error is not None:
                yield self._emit(EventKind.REBALANCE_FAILED, reason=f"read_topics:{res.error}")
                self.state = ConsumerState.GAVE_UP
                return False
            self.wildcard_topics = wild.select(
                self._topic_names(res.value), self.config.exclude_internal_topics
            )
            yield self._resolved("start")
        res = yield self._register_request()
        assert res is not None
        if res.error is not None:
            # Kafka lets the exception escape (createMessageStreams or the
            # zkclient event thread); the consumer is left unregistered.
            yield self._emit(EventKind.REBALANCE_FAILED, reason=f"register:{res.error}")
            self.state = ConsumerState.GAVE_UP
            return False
        yield self._emit(EventKind.CONSUMER_REGISTERED, reason=reason)
        if wild is not None and not (yield from self._reinitialize_wildcard()):
            self.state = ConsumerState.GAVE_UP
            return False
        ok = yield from self._synced_rebalance(reason)
        if ok and wild is not None:
            self._topic_jobs.append("watch")  # started once the lock is free
        return ok

    def _reinitialize_wildcard(self) -> Generator[Output, IoResult | None, bool]:
        """``reinitializeConsumer``'s subscriptions for a ``WildcardTopicCount`` (820-902).

        An error escapes ``reinitializeConsumer`` before its ``syncedRebalance``.
        """
        assert self.wildcard is not None
        req = ReinitializeWildcard(
            self._next_rid(), self.wildcard, self.config.exclude_internal_topics
        )
        res = yield req
        assert res is not None
        if res.error is not None:
            yield self._emit(EventKind.REBALANCE_FAILED, reason=f"reinitialize:{res.error}")
            return False
        for topic in self._topic_names(res.value):
            self.stream_topics.setdefault(topic, None)
        return True

    def _handle_new_session(self) -> Proc:
        """``handleNewSession`` after ``resetState``: register, then queue ``syncedRebalance``."""
        if self._lock.proc is None:
            self.state = ConsumerState.REGISTERING
        res = yield self._register_request()
        assert res is not None
        if res.error is not None:
            # The exception escapes to zkclient; no syncedRebalance follows.
            self._event_thread_held = False
            yield self._emit(EventKind.REBALANCE_FAILED, reason=f"register:{res.error}")
            if self._lock.proc is None:
                self.state = ConsumerState.GAVE_UP
            return False
        yield self._emit(EventKind.CONSUMER_REGISTERED, reason="new_session")
        # Ahead of any watcher-executor job: the event thread runs this
        # syncedRebalance before it delivers the events queued behind it.
        self._lock_jobs.appendleft(("synced_rebalance", "new_session"))
        return True

    def _new_session_rebalance(self, reason: str) -> Proc:
        """``handleNewSession``'s ``syncedRebalance``; the event thread is free after it."""
        try:
            ok = yield from self._synced_rebalance(reason)
        finally:
            self._event_thread_held = False
        return ok

    def _awaited_rebalance(self, reason: str) -> Proc:
        """A ``syncedRebalance`` a channel runs itself (the topic watcher's reinitialize)."""
        ok = yield from self._synced_rebalance(reason)
        self._resume_awaiting = True
        return ok

    # ------------------------------------------------------ topic event watcher

    def _resolved(self, reason: str, detail: str | None = None) -> Emit:
        """``info("Topics to consume = ...")``: the topics the filter gives now."""
        assert self.wildcard is not None
        return self._emit(
            EventKind.TOPIC_PATTERN_RESOLVED,
            pattern=self.wildcard.topic_filter.raw,
            topics=format_topics(self.wildcard_topics),
            reason=reason,
            detail=self.wildcard.topic_filter.kind + ("" if detail is None else " " + detail),
        )

    @staticmethod
    def _topic_names(value: object) -> tuple[str, ...]:
        if isinstance(value, list | tuple):
            return tuple(str(t) for t in value)
        return ()

    def _create_topic_watcher(self) -> Proc:
        """``new ZookeeperTopicEventWatcher(zkClient, this)``.

        K@0.8.2.2 ``consumer/ZookeeperTopicEventWatcher.scala`` 32-44 (created
        at ``ZookeeperConsumerConnector.scala`` 945). Subscribe to the children
        of ``/brokers/topics``, then the bootstrap call ``handleChildChange``
        (43), which reads them again and runs ``handleTopicEvent``: a topic
        created since the start is seen here.
        """
        # zkclient adds the listener before it reads (ZkClient.java 105-115):
        # a change meanwhile is an event that waits for the watcher's lock.
        self._watcher_created = True
        res = yield WatchTopics(self._next_rid())
        assert res is not None
        if res.error is not None:
            # The constructor throws: no watcher (and no bootstrap call).
            self._watcher_created = False
            self._topic_jobs.clear()
            yield self._emit(EventKind.REBALANCE_FAILED, reason=f"watch_topics:{res.error}")
            return False
        ok = yield from self._handle_child_change()
        return ok

    def _resubscribe_topic_watcher(self) -> Proc:
        """The watcher's ``handleNewSession``: ``subscribeChildChanges`` again (88-95)."""
        res = yield WatchTopics(self._next_rid(), resubscribe=True)
        assert res is not None
        return res.error is None

    def _handle_child_change(self) -> Proc:
        """``ZkTopicEventListener.handleChildChange`` then ``handleTopicEvent``.

        K@0.8.2.2 ``ZookeeperTopicEventWatcher.scala`` 63-77: ``getChildren``
        of its own (67); an exception is logged ("error in handling child
        changes", 72-74) and nothing else happens. ``handleTopicEvent``
        (``ZookeeperConsumerConnector.scala`` 947-972): the filtered topics
        against ``wildcardTopics``, which it replaces; on any addition or
        deletion ``reinitializeConsumer`` (971), which ends in a
        ``syncedRebalance`` of its own (905), on this thread: it waits for
        ``rebalanceLock`` and for the whole rebalance, and a failure
        ("can't rebalance after N retries") is only logged here.
        """
        wild = self.wildcard
        assert wild is not None
        res = yield ReadTopics(self._next_rid())
        assert res is not None
        if res.error is not None:
            return False
        change = topic_event(
            self.wildcard_topics,
            self._topic_names(res.value),
            wild,
            self.config.exclude_internal_topics,
        )
        self.wildcard_topics = change.topics
        yield self._resolved(TOPIC_EVENT, change.describe())
        if not change.changed:
            return True
        yield self._emit(
            EventKind.REBALANCE_TRIGGERED, reason=TOPIC_EVENT, detail=change.describe()
        )
        if not (yield from self._reinitialize_wildcard()):
            return False
        yield _AwaitRebalance(TOPIC_EVENT)
        return True

    def _synced_rebalance(self, reason: str) -> Proc:
        """``syncedRebalance``: bounded attempts with a fixed back-off."""
        if self._shutting_down:
            return False
        self.stats.rebalances += 1
        self.state = ConsumerState.REBALANCING
        yield self._emit(EventKind.REBALANCE_STARTED, reason=reason)
        retries = self.config.rebalance_max_retries
        for attempt in range(retries):
            self.stats.attempts += 1
            self.state = ConsumerState.REBALANCING
            self._attempt_reads = self._attempt_writes = 0
            started = self._now
            yield self._emit(EventKind.ATTEMPT_STARTED, attempt=attempt)
            outcome = "ok"
            try:
                res = yield ReadCluster(self._next_rid())
                self._raise_on_error(res)
                done = yield from self._rebalance(attempt)
                if not done:
                    outcome = "conflict"
            except RebalanceFailed as exc:
                done = False
                outcome = f"error:{exc}"
            yield self._emit(
                EventKind.ATTEMPT_FINISHED,
                attempt=attempt,
                reason=outcome,
                zk_reads=self._attempt_reads,
                zk_writes=self._attempt_writes,
                duration_ms=self._now - started,
            )
            if done:
                self.state = ConsumerState.STABLE
                yield self._emit(
                    EventKind.REBALANCE_COMPLETED,
                    attempt=attempt,
                    count=len(self.owned),
                    partitions=format_partitions(self.owned),
                )
                return True
            # closeFetchersForQueues: stop fetchers, clear queues, commit again.
            yield from self._stop_fetchers()
            if self.config.auto_commit_enable:
                yield from self._commit_proc("after_failed_attempt")
            self.state = ConsumerState.BACKOFF
            backoff = self.config.rebalance_backoff_ms
            yield self._emit(EventKind.REBALANCE_BACKOFF, attempt=attempt, duration_ms=backoff)
            yield Sleep(self._next_rid(), self._now + backoff)
        self.stats.gave_up += 1
        self.state = ConsumerState.GAVE_UP
        yield self._emit(
            EventKind.REBALANCE_FAILED,
            reason=f"{self.consumer_id} can't rebalance after {retries} retries",
            count=len(self.owned),
        )
        return False

    def _rebalance(self, attempt: int) -> Proc:
        """``rebalance(cluster)``: one attempt; True when every claim succeeded."""
        res = yield ReadRebalanceContext(self._next_rid())
        self._raise_on_error(res)
        assert res is not None and isinstance(res.value, RebalanceContext)
        ctx = res.value
        if not ctx.brokers:
            # "no brokers found when trying to rebalance": watch /brokers/ids, succeed.
            res = yield WatchBrokers(self._next_rid())
            self._raise_on_error(res)
            return True
        # (b) stop fetchers and commit before releasing.
        yield from self._stop_fetchers()
        if self.config.auto_commit_enable:
            yield from self._commit_proc("rebalance")
        # (c) release ownership.
        released = tuple(sorted(self.owned))
        if released:
            res = yield ReleaseOwnership(self._next_rid(), released)
            self._raise_on_error(res)
            for t, p in released:
                yield self._emit(
                    EventKind.OWNERSHIP_RELEASED,
                    topic=t,
                    partition=p,
                    reason="release",
                    thread_id=self.owned.get((t, p)),
                )
        self.owned.clear()
        # (d) compute the assignment from a fresh read.
        topics = tuple(sorted(ctx.my_subscription))
        res = yield ReadAssignmentContext(self._next_rid(), topics)
        self._raise_on_error(res)
        assert res is not None and isinstance(res.value, GroupView)
        decision = self._assign(res.value, ctx.my_subscription)
        yield self._emit(
            EventKind.ASSIGNMENT_COMPUTED,
            attempt=attempt,
            count=len(decision),
            partitions=format_partitions(decision),
            detail=f"members={len(res.value.consumers)}",
        )
        # (e) fetch offsets.
        wanted = tuple(sorted(decision))
        offsets: dict[TopicPartition, int | None] = {}
        if wanted:
            res = yield FetchOffsets(self._next_rid(), wanted)
            self._raise_on_error(res)
            assert res is not None and isinstance(res.value, dict)
            offsets = res.value
        if self._shutting_down:
            return False
        # (f) claim every assigned partition.
        if decision:
            res = yield ClaimOwnership(self._next_rid(), decision)
            self._raise_on_error(res)
            assert res is not None and isinstance(res.value, ClaimResult)
            claim = res.value
            for t, p in claim.created:
                # The owner znode's czxid: ZooKeeper's order of the claims, which
                # the checkers use across nodes (wall clocks may be skewed).
                zxid = claim.zxids.get((t, p))
                yield self._emit(
                    EventKind.OWNERSHIP_CLAIMED,
                    topic=t,
                    partition=p,
                    thread_id=decision[(t, p)],
                    attempt=attempt,
                    **({} if zxid is None else {"zxid": zxid}),
                )
            if claim.conflicts:
                self.stats.conflicts += len(claim.conflicts)
                for (t, p), holder in sorted(claim.conflicts.items()):
                    yield self._emit(
                        EventKind.CLAIM_CONFLICT,
                        topic=t,
                        partition=p,
                        attempt=attempt,
                        thread_id=decision[(t, p)],
                        detail=holder,
                    )
                if claim.created:
                    res = yield ReleaseOwnership(self._next_rid(), claim.created, rollback=True)
                    # As for the release in (c): no "released" events for deletes
                    # that failed; the nodes stay ours until the session ends.
                    self._raise_on_error(res)
                    for t, p in claim.created:
                        yield self._emit(
                            EventKind.OWNERSHIP_RELEASED,
                            topic=t,
                            partition=p,
                            reason="rollback",
                            thread_id=decision[(t, p)],
                        )
                return False
        # (g) swap the registry and restart the fetchers.
        self.owned = dict(decision)
        self._consumed = {tp: off for tp, off in offsets.items() if off is not None}
        self._checkpointed = dict(offsets)
        self.fetching = dict(decision)
        positions = {tp: (decision[tp], offsets.get(tp)) for tp in wanted}
        for (t, p), (thread, off) in positions.items():
            yield self._emit(
                EventKind.FETCHING_STARTED,
                topic=t,
                partition=p,
                thread_id=thread,
                offset_start=-1 if off is None else off,
            )
        yield StartFetchers(positions)
        return True

    def _assign(
        self, view: GroupView, my_subscription: Mapping[str, int]
    ) -> dict[TopicPartition, str]:
        if self.consumer_id not in view.consumers:
            # Kafka asserts that the consumer finds its own threads in the view.
            raise RebalanceFailed("AssertionError")
        consumers = {cid: dict(sub) for cid, sub in view.consumers.items()}
        consumers[self.consumer_id] = dict(my_subscription)
        parts = {
            t: tuple(sorted(ps))
            for t, ps in view.partitions_per_topic.items()
            if t in my_subscription
        }
        strategy = strategy_from_config(self.config.partition_assignment_strategy)
        fn = roundrobin_assign if strategy == "roundrobin" else range_assign
        try:
            mine = fn(self.consumer_id, consumers, parts)
        except ValueError as exc:  # roundrobin's require: IllegalArgumentException
            raise RebalanceFailed("IllegalArgumentException") from exc
        return {tp: str(thread) for tp, thread in mine.items()}

    def _stop_fetchers(self) -> Generator[Output, IoResult | None, None]:
        if self.fetching:
            self.fetching = {}
            yield StopFetchers()
            yield self._emit(EventKind.FETCHERS_STOPPED)

    def _commit_proc(self, reason: str) -> Proc:
        """``commitOffsets``: write what changed since the last checkpoint."""
        offsets = {
            tp: off
            for tp, off in self._consumed.items()
            if tp in self.owned and self._checkpointed.get(tp) != off
        }
        if not offsets:
            return True
        res = yield CommitOffsets(self._next_rid(), offsets)
        assert res is not None
        written = res.value if isinstance(res.value, list) else []
        self.stats.commits += 1
        for tp in written:
            self._checkpointed[tp] = offsets[tp]
            yield self._emit(
                EventKind.OFFSETS_COMMITTED,
                topic=tp[0],
                partition=tp[1],
                offset_end=offsets[tp],
                reason=reason,
            )
        return True

    def _shutdown_proc(self) -> Proc:
        yield from self._stop_fetchers()
        if self.config.auto_commit_enable:
            yield from self._commit_proc("shutdown")
        yield CloseSession(self._next_rid())
        self.owned.clear()
        yield self._emit(EventKind.CONSUMER_STOPPED)
        return True

    @staticmethod
    def _raise_on_error(res: IoResult | None) -> None:
        if res is None:
            raise RebalanceFailed("NoResult")
        if res.error is not None:
            raise RebalanceFailed(res.error)
