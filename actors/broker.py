"""Broker actors: registered in ZooKeeper, holding replicas of partition logs.

The rules (partition logs, high watermark, ISR, fetch sessions, the hosting
of group coordinators) are :class:`~emulator.broker.replica_manager.ReplicaManager`'s,
in the core; this actor drives it and does what it asks. It keeps the
broker's loops (a replica fetcher per leader it follows, the
``isr-expiration`` task every ``replica.lag.time.max.ms``, the coordinators'
timers, the controller's pushes, the event flush), its Ray calls (produce,
fetch, fetch sessions and replica fetches with their long polls, group
requests, ``LeaderAndIsr``/``UpdateMetadata``), the futures that wait for the
high watermark, and its ZooKeeper I/O (registration, the state read at start,
the conditional ISR writes, the controller).

Replication is Kafka's long poll, in both engines: a follower's fetcher for a
leader sends its next fetch as soon as it has applied the last answer
(K@0.8.2.2 ``AbstractFetcherThread.doWork``, a loop with no pause), and the
leader holds a fetch that finds nothing new for up to
``replica.fetch.wait.max.ms`` (500), answering it the moment a partition of it
is appended to or changes leader (``DelayedFetch`` in the fetch purgatory;
:mod:`emulator.broker.fetch`). So a batch produced with ``acks=all`` is
committed one fetch round trip after the append (the followers' parked
fetches carry it out, their next fetches report the new LEOs and move the HW),
and an idle follower fetches twice a second, which keeps it in the ISR
(``replica.fetch.wait.max.ms`` <= ``replica.lag.time.max.ms``).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from actors.context import RunContext, process_usage
from actors.io import ActorIO, RealIO
from actors.locate import Locatable
from actors.long_poll import long_poll
from actors.metadata import LeaderCache
from actors.share import ShareService
from emulator.broker.coordinators import (
    CoordinatorHost,
    error_response,
    make_coordinator_factory,
)
from emulator.broker.fetch import FetchSession
from emulator.broker.isr import IsrWrite, WriteResult
from emulator.broker.messages import (
    NOT_LEADER_ANSWER,
    TIMED_OUT_ANSWER,
    AckProduce,
    BrokerOutput,
    ExpandIsr,
    FetchAnswer,
    FetchRequest,
    LeaderAndIsrState,
    ProduceAnswer,
    ReplicaFetchAnswer,
    SessionAnswer,
    SessionFetch,
    TopicPartition,
    WakeFetchSession,
    WakeReplicaFetch,
)
from emulator.broker.replica_manager import BrokerConfig, ReplicaManager, RoleChange
from emulator.broker.share_fetch import ShareFetchRequest, ShareFetchResponse
from emulator.controller import LeaderIsr
from emulator.events import EventKind
from emulator.modern.errors import Errors
from emulator.modern.messages import GroupRequest, GroupResponse
from emulator.modern.placement import OFFSETS_TOPIC
from emulator.protocols import spec

if TYPE_CHECKING:
    from zk_registry.client import ZkClient
    from zk_registry.controller import BrokerController, ControllerConfig
    from zk_registry.layout import PartitionState

#: Wall seconds a follower's fetcher pauses before its next fetch from a leader
#: after a failed call or an answer with an error (emulator knob: the 0.8.2
#: fetcher did not pause, KAFKA-1461; from 0.9 it waits ``replica.fetch.backoff.ms``,
#: 1000, in ``AbstractFetcherThread.handlePartitionsWithErrors``).
REPLICA_BACKOFF_S = 0.1
#: How long a produce waits for the HW to cover its batch, in emulated ms: the
#: 0.8 producer's ``request.timeout.ms`` (10000), the ack timeout it sends.
PRODUCE_ACK_TIMEOUT_MS = 10000.0
#: Emulator bound on one replica fetch call beyond the leader's long-poll wait
#: (``replica.fetch.wait.max.ms`` scaled), wall seconds; also the bound on a push.
REPLICA_CALL_TIMEOUT_S = 5.0


class BrokerCore(Locatable):
    """One broker as a Ray actor (:data:`actors.remote.BrokerActor`); usable without Ray.

    Args:
        broker_id: Kafka's ``broker.id``.
        ctx: the run.
        partitions: the partitions this broker leads before :meth:`start` reads
            ZooKeeper (without ZooKeeper, e.g. in the bench, these stay its
            only, leader-only replicas).
        port: the advertised port written to ``/brokers/ids/<id>``.
        offsets_leaders: ``__consumer_offsets`` partition -> leader, for the
            coordinators; by default taken from ``ctx.leaders``.
        partitions_per_topic: the metadata image of the coordinators.
        io: its ZooKeeper sessions, peer look-ups, wall clock, host name, event
            tap and coordinator factory (default :class:`~actors.io.RealIO`:
            kazoo, Ray, the machine's; a simulation passes its own).
    """

    def __init__(
        self,
        broker_id: int,
        ctx: RunContext,
        partitions: list[TopicPartition],
        port: int,
        offsets_leaders: dict[int, int] | None = None,
        partitions_per_topic: dict[str, int] | None = None,
        *,
        io: ActorIO | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.ctx = ctx
        self.port = port
        self.io: ActorIO = io if io is not None else RealIO()
        self.clock = ctx.clock()
        self.events = ctx.writer(
            f"broker-{broker_id}", self.clock, node=self.io.hostname(), tap=self.io.tap
        )
        # The metadata image the group coordinators assign from (KIP-848),
        # shared by the manager (grown topics) and the coordinator factory.
        counts = dict(partitions_per_topic or ctx.partitions_per_topic)
        coordinators = None
        if ctx.protocol != "zookeeper":
            if offsets_leaders is None:
                offsets_leaders = {p: b for (t, p), b in ctx.leaders.items() if t == OFFSETS_TOPIC}
            if offsets_leaders:
                make = self.io.coordinator_factory or make_coordinator_factory
                factory = make(
                    ctx.protocol,
                    dict(ctx.kafka),
                    broker_id,
                    ctx.seed,
                    counts,
                    mixed_protocols=ctx.mixed_protocols,
                )
                coordinators = CoordinatorHost(
                    broker_id, offsets_leaders, factory, self._emit_group
                )
        self.manager = ReplicaManager(
            broker_id,
            BrokerConfig.from_settings(
                ctx.settings.broker, fetch_checks_metadata=ctx.protocol != "zookeeper"
            ),
            partitions,
            ctx.leaders,
            self.events.emit,
            coordinators,
            counts,
        )
        self._zk: ZkClient | None = None
        self.peers = LeaderCache(ctx, {}, io=self.io)
        self.controller: BrokerController | None = None
        self.fetch_calls = 0
        self.produce_calls = 0
        self.replica_fetch_calls = 0
        self._acks: dict[int, asyncio.Future[bool]] = {}  # produce waiter -> its future
        self._wakes: dict[str, asyncio.Event] = {}  # fetch session -> its long poll's wake-up
        # parked replica fetch (its ReplicaWait.key) -> its long poll's wake-up
        self._replica_wakes: dict[int, asyncio.Event] = {}
        wait_ms = float(ctx.settings.broker.replica_fetch_wait_max_ms)
        self._replica_wait_ms = wait_ms  # replica.fetch.wait.max.ms, emulated ms
        self._replica_call_timeout_s = REPLICA_CALL_TIMEOUT_S + ctx.scaled_s(wait_ms)
        self._tasks: list[asyncio.Task[None]] = []
        self._bg: set[asyncio.Task[None]] = set()
        self._fetchers: dict[int, asyncio.Task[None]] = {}  # leader -> its replica fetcher
        self._followers_changed = asyncio.Event()  # the replicas this broker follows changed
        self._push_queue: asyncio.Queue[_Push] | None = None
        self.auto_created = 0  # topics this broker created for a metadata request
        # Share groups (KIP-932): the share-partitions this broker leads.
        self.share: ShareService | None = None
        if spec(ctx.protocol).generation == "share":
            self.share = self._share_service()

    @property
    def coordinators(self) -> CoordinatorHost | None:
        """The group coordinators this broker hosts (None in a ``zookeeper`` run)."""
        return self.manager.coordinators

    @property
    def fetch_sessions(self) -> dict[str, FetchSession]:
        """The consumer hosts' fetch sessions, by session key."""
        return self.manager.fetch.sessions

    @property
    def _parked(self) -> dict[TopicPartition, dict[tuple[str, int], None]]:
        """Partition -> the ``(session, slot)`` of the fetches parked on it (tests)."""
        return self.manager.fetch.parked

    def _emit_group(self, kind: EventKind, **fields: object) -> None:
        fields.setdefault("group", self.ctx.group)
        self.events.emit(kind, **fields)

    def _apply(self, outputs: Sequence[BrokerOutput]) -> None:
        """Do what the manager asks: end produce waits, wake long polls, start ISR writes."""
        if self.share is not None and outputs:
            self.share.notify()  # a high watermark may have moved: records for share fetches
        for out in outputs:
            if isinstance(out, AckProduce):
                fut = self._acks.pop(out.waiter, None)
                if fut is not None and not fut.done():
                    fut.set_result(out.committed)
            elif isinstance(out, WakeFetchSession):
                wake = self._wakes.get(out.session)
                if wake is not None:
                    wake.set()
            elif isinstance(out, WakeReplicaFetch):
                wake = self._replica_wakes.get(out.key)
                if wake is not None:
                    wake.set()
            elif isinstance(out, ExpandIsr):
                self._spawn(self._expand_isr(out))

    # --------------------------------------------------------------- groups

    async def group_exchange(
        self, host_key: str, requests: list[GroupRequest]
    ) -> list[GroupResponse]:
        """A consumer host's batch of group requests; the answers ready for that host."""
        if self.coordinators is None:
            return [error_response(r, Errors.COORDINATOR_NOT_AVAILABLE) for r in requests]
        answers, outputs = self.manager.group_exchange(self.clock.now_ms(), host_key, requests)
        self._apply(outputs)
        return answers

    async def _coordinator_timers(self) -> None:
        """Run the coordinators' timers (session, rebalance, join, sync, ...) at their deadlines.

        Kafka's coordinators fire their timers from a timing wheel of 1 ms ticks
        (``SystemTimer``: the classic ``DelayedOperationPurgatory``'s heartbeat
        and join operations, the new coordinator's ``CoordinatorTimer``). The
        task sleeps until the earliest deadline of any coordinator here, or
        until the coordinators say their timers may have changed (a request,
        a partition loaded or unloaded); a poll then runs the ones due.
        """
        coordinators = self.coordinators
        if coordinators is None:
            return
        wake = asyncio.Event()
        coordinators.on_change = wake.set
        clock = self.clock
        while True:
            wake.clear()
            deadline = coordinators.next_deadline()
            if deadline is None:
                await wake.wait()
                continue
            now = clock.now_ms()
            if now >= deadline:
                coordinators.poll(now)
                continue
            # at least a microsecond: a deadline a rounding error away is due next time
            await long_poll(wake, max(MIN_TIMER_S, clock.wall_seconds(deadline - now)))

    # ------------------------------------------------------------- lifecycle

    async def start(self, with_controller: bool = True) -> int:
        """Register ``/brokers/ids/<id>``, read the replica assignment, start replicating.

        Args:
            with_controller: also stand for controller now. A cluster started
                all at once passes ``False`` and calls :meth:`start_controller`
                once every broker is registered, so that the first controller
                does not see the others as dead.

        Returns the broker id.
        """
        from zk_registry.brokers import register_broker

        session_s = self.ctx.scaled_s(self.ctx.settings.broker.zookeeper_session_timeout_ms)
        zk = self._zk = self.io.zk_client(self.ctx.zk_connect, session_s, auth=self.ctx.zk_auth)
        await zk.start_async()
        await register_broker(
            zk,
            self.broker_id,
            "127.0.0.1",
            self.port,
            timestamp_ms=self.io.wall_ms(),
            session_timeout_s=session_s,
        )
        await self._load_from_zk(zk)
        self.events.emit(
            EventKind.BROKER_STARTED, broker=self.broker_id, count=len(self.manager.led())
        )
        self._push_queue = asyncio.Queue()
        self._tasks = [
            asyncio.ensure_future(self._replica_fetch_loop()),
            asyncio.ensure_future(self._isr_expiration_loop()),
            asyncio.ensure_future(self._push_loop()),
            asyncio.ensure_future(self._flush_loop()),
        ]
        if self.coordinators is not None:
            self._tasks.append(asyncio.ensure_future(self._coordinator_timers()))
        if self.share is not None:
            self.share.start()
            me = self.broker_id
            self.share.led(tp for tp, r in self.manager.replicas.items() if r.leader == me)
        if with_controller:
            await self.start_controller()
        self.events.flush()
        return self.broker_id

    async def _flush_loop(self) -> None:
        """Write buffered events out every 0.25 s, so a killed broker loses at most that."""
        while not self.events.closed:
            await asyncio.sleep(0.25)
            self.events.flush()

    async def _load_from_zk(self, zk: ZkClient) -> None:
        """Read every topic's assignment and partition state (what this broker replicates)."""
        from zk_registry.brokers import live_brokers, read_partition_state, read_topic_assignment
        from zk_registry.client import ZkUtils
        from zk_registry.layout import BROKER_TOPICS_PATH

        topics = await ZkUtils(zk).children_maybe(BROKER_TOPICS_PATH)
        self.manager.live_brokers = await live_brokers(zk)
        self.manager.keep_topics(set(topics))  # topics deleted since the run began go
        now = self.clock.now_ms()
        for topic in sorted(topics):
            assignment = await read_topic_assignment(zk, topic)
            parts = sorted((assignment or {}).items())
            # The states are read 256 at a time (pipelined on the one session),
            # so a broker of a 100,000-partition cluster starts in seconds.
            read: list[PartitionState | None] = []
            for i in range(0, len(parts), 256):
                read += await asyncio.gather(
                    *(read_partition_state(zk, topic, p) for p, _ in parts[i : i + 256])
                )
            states = [
                (
                    p,
                    reps,
                    None
                    if st is None
                    else LeaderAndIsrState(
                        st.leader,
                        st.leader_epoch,
                        tuple(st.isr),
                        st.controller_epoch,
                        st.zk_version or 0,
                    ),
                )
                for (p, reps), st in zip(parts, read, strict=True)
            ]
            self._apply(self.manager.load_topic(now, topic, states))
        self._followers_changed.set()

    async def start_controller(self) -> None:
        """Stand for controller (``KafkaController.startup``): elect once, then watch."""
        from zk_registry.controller import BrokerController

        if self.controller is not None or self._zk is None:
            return
        self.controller = BrokerController(
            self._zk,
            self.broker_id,
            self.controller_config(),
            self.on_leader_and_isr,
            self.events.emit,
            now_ms=self.io.wall_ms,
            on_topic_deletion=self.on_topic_deletion,
            stop_replicas=self.stop_replicas,
        )
        await self.controller.start()

    def controller_config(self) -> ControllerConfig:
        """The controller's settings from the run's Kafka settings, scaled by ``time_scale``.

        Kafka's defaults come from the key registry (:mod:`emulator.kafka_keys`):
        ``unclean.leader.election.enable`` true for the ``zookeeper`` protocol
        (0.8.2) and false for the modern ones (Kafka >= 0.11, KIP-106);
        ``delete.topic.enable`` false before 1.0 and true from it (KIP-162). The
        controller waits Kafka's fixed 5 s before its first leader-balance check.
        """
        from zk_registry.controller import ControllerConfig

        b = self.ctx.settings.broker
        return ControllerConfig(
            auto_leader_rebalance_enable=b.auto_leader_rebalance_enable,
            leader_imbalance_per_broker_percentage=b.leader_imbalance_per_broker_percentage,
            leader_imbalance_check_interval_s=self.ctx.scaled_s(
                1000.0 * b.leader_imbalance_check_interval_seconds
            ),
            first_check_delay_s=self.ctx.scaled_s(5000.0),
            unclean_leader_election_enable=b.unclean_leader_election_enable,
            zk_session_timeout_s=self.ctx.scaled_s(b.zookeeper_session_timeout_ms),
            replica_lag_time_max_ms=int(self.manager.config.lag_time_max_ms),
            replica_lag_max_messages=self.manager.config.lag_max_messages,
            delete_topic_enable=b.delete_topic_enable,
        )

    async def stop_controller(self) -> None:
        """Leave the controller role and stop standing for it (``KafkaController.shutdown``).

        The orchestrator stops every broker's controller before the brokers, so
        the end of a run does not trigger elections and leader moves.
        """
        ctl, self.controller = self.controller, None
        if ctl is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ctl.stop(), 10.0)

    async def stop(self) -> None:
        """Stop replicating and the controller; close the ZooKeeper session and the log."""
        if self.events.closed:
            return
        for t in self._tasks:
            t.cancel()
        for t in self._fetchers.values():
            t.cancel()
        self._fetchers.clear()
        await self.stop_controller()
        if self.share is not None:
            await self.share.stop()
        self._apply(self.manager.fail_waiters())
        for wake in (*self._wakes.values(), *self._replica_wakes.values()):
            wake.set()  # parked fetches answer now, with what they have
        self.events.emit(EventKind.BROKER_STOPPED, broker=self.broker_id)
        if self._zk is not None:
            await self._zk.stop_async()
            self._zk = None
        self.events.close()

    def set_origin(self, origin_wall: float) -> None:
        """Fix the run's emulated time 0 (called once every actor is up).

        The events logged before are written now, restamped on it.
        """
        self.events.release(self.clock.rebase(origin_wall))

    def origin_wall(self) -> float:
        """The run's emulated time 0 as this broker has it (for a restarted broker)."""
        return self.clock.origin_wall

    # ------------------------------------------------------------ produce

    async def produce(
        self, batch: dict[TopicPartition, int]
    ) -> dict[TopicPartition, ProduceAnswer]:
        """Append ``count`` messages to each partition; answer once they are committed.

        The emulator always produces with ``acks=all`` (Kafka: the 0.8
        producer's ``request.required.acks``, the modern ``acks``): the answer
        for a partition comes when the HW covers its batch. Returns each
        ``[start, end)``; ``(NOT_LEADER, NOT_LEADER)`` for a partition this
        broker does not lead (or stopped leading before the batch was
        committed), ``(TIMED_OUT, TIMED_OUT)`` when the HW did not reach the
        batch's end within :data:`PRODUCE_ACK_TIMEOUT_MS` (the messages stay
        in the log, as in Kafka).
        """
        self.produce_calls += 1
        step = self.manager.produce(batch)
        if self.share is not None:
            self.share.notify()
        out = dict(step.answers)
        loop = asyncio.get_running_loop()
        futs = {tp: loop.create_future() for tp in step.pending}
        for tp, p in step.pending.items():
            self._acks[p.waiter] = futs[tp]
        self._apply(step.outputs)
        if step.pending:
            if not all(f.done() for f in futs.values()):  # else committed at once (ISR = leader)
                await asyncio.wait(futs.values(), timeout=self.ctx.scaled_s(PRODUCE_ACK_TIMEOUT_MS))
            for tp, p in step.pending.items():
                fut = futs[tp]
                if not fut.done():
                    fut.cancel()
                    self._acks.pop(p.waiter, None)
                    self.manager.drop_waiter(tp, p.waiter)
                    out[tp] = TIMED_OUT_ANSWER
                elif fut.result():
                    out[tp] = ProduceAnswer(p.start, p.end)
                else:
                    out[tp] = NOT_LEADER_ANSWER
        return out

    # --------------------------------------------------------------- fetch

    def fetch(self, requests: list[FetchRequest]) -> list[FetchAnswer]:
        """Serve a batch of consumer fetches: ``(topic, partition, offset, reset, max)``.

        Only committed messages (below the HW) are served. ``offset`` ``None``
        or out of range (below the log start or above the LEO) is resolved by
        ``reset`` (``smallest``/``earliest`` or ``largest``/``latest``); an
        offset between the HW and the LEO gets an empty answer. Returns
        ``(topic, partition, start, end)`` per request; ``start == -1``
        (``NOT_LEADER``) means "not leader".
        """
        self.fetch_calls += 1
        return self.manager.fetch_now(requests)

    async def fetch_session(
        self,
        session: str,
        new_session: bool,
        adds: list[SessionFetch],
        withdrawn: list[int],
        max_wait_ms: float,
    ) -> list[SessionAnswer]:
        """A consumer host's incremental fetch (KIP-227) with a long poll.

        Args:
            session: the host's session key; ``new_session`` drops what the
                session held before (the host lost track of it).
            adds: new fetches ``(slot, topic, partition, offset, reset, max)``
                (the fields of :meth:`fetch`, under a slot number).
            withdrawn: slots whose fetch the host no longer wants.
            max_wait_ms: ``fetch.max.wait.ms`` (``fetch.wait.max.ms`` in 0.8),
                emulated ms: how long the answer may wait for data when there
                is none (``fetch.min.bytes`` = 1).

        Returns:
            ``(slot, start, end)`` for each fetch answered: ones with data, or
            ``start == NOT_LEADER``. A fetch with no data stays parked in the
            session and is answered by a later call once data is there.
        """
        self.fetch_calls += 1
        step = self.manager.fetch.begin(
            self.clock.now_ms(), session, new_session, adds, withdrawn, max_wait_ms
        )
        if step.replaced is not None:
            old = self._wakes.pop(session, None)
            if old is not None:
                old.set()  # a call still waiting on the old session answers now
        wake = self._wakes.get(session)
        if wake is None:
            wake = self._wakes[session] = asyncio.Event()
        out = list(step.answers)
        if step.wait_ms is not None:
            wake.clear()
            await long_poll(wake, self.ctx.scaled_s(step.wait_ms))
        out += self.manager.fetch.collect(step.session)
        return out

    def log_end_offsets(self) -> dict[TopicPartition, int]:
        """The HW of each partition this broker leads (what consumers can reach)."""
        return self.manager.log_end_offsets()

    # ---------------------------------------------------------------- share

    async def share_fetch(self, request: ShareFetchRequest) -> ShareFetchResponse:
        """A share consumer's ShareFetch or ShareAcknowledge (KIP-932): :class:`ShareService`."""
        if self.share is None:
            return ShareFetchResponse(request.corr, request.member, Errors.UNSUPPORTED_VERSION)
        return await self.share.fetch(request)

    def share_disconnect(self, group: str, member_id: str) -> None:
        """A share member's connection dropped (4.1+ ``ShareSessionCache``'s disconnect
        listener): its share session closes and its records are released."""
        if self.share is not None:
            self.share.disconnect(group, member_id)

    def _share_service(self) -> ShareService:
        """The share-partitions' settings of the run's Kafka version and ``[kafka]`` table."""
        from emulator.broker.share_partition import SharePartitionConfig
        from emulator.kafka_keys import DEFAULT_KAFKA_VERSION, KafkaSettings

        ctx = self.ctx
        version = str(ctx.kafka.get("kafka.version") or DEFAULT_KAFKA_VERSION)
        explicit = {k: v for k, v in ctx.kafka.items() if isinstance(v, int | float | str | bool)}
        kafka = KafkaSettings("share", version, explicit)
        keys = (
            "group.share.record.lock.duration.ms",
            "group.share.delivery.count.limit",
            "group.share.partition.max.record.locks",
        )
        config = SharePartitionConfig.for_version(version, {k: kafka.value(k) for k in keys})

        def high_watermark(tp: TopicPartition) -> int:
            rep = self.manager.replicas.get(tp)
            return 0 if rep is None else rep.hw

        def log_start(tp: TopicPartition) -> int:
            rep = self.manager.replicas.get(tp)
            return 0 if rep is None else rep.log_start

        def leads(tp: TopicPartition) -> bool:
            rep = self.manager.replicas.get(tp)
            return rep is not None and rep.leader == self.broker_id

        return ShareService(
            self.broker_id,
            config,
            kafka.get_str("share.auto.offset.reset"),
            high_watermark,
            log_start,
            leads,
            self.clock.now_ms,
            self.clock.wall_seconds,
            self.events.emit,
            lambda: self._zk,
        )

    # ------------------------------------------------------------ replication

    async def replica_fetch(
        self, follower: int, fetches: dict[TopicPartition, int]
    ) -> dict[TopicPartition, ReplicaFetchAnswer]:
        """A follower's fetch of the partitions this broker leads (a replica ``FetchRequest``).

        A long poll: answered at once when some partition has data beyond the
        follower's offset or an error; otherwise held until one of its
        partitions is appended to or changes leader, or
        ``replica.fetch.wait.max.ms`` (scaled) runs out, then answered with
        what the log holds (:meth:`ReplicaManager.replica_fetch`).

        Args:
            follower: the follower's broker id.
            fetches: partition -> the follower's LEO (its fetch offset).

        Returns:
            Partition -> its :class:`~emulator.broker.messages.ReplicaFetchAnswer`.
        """
        self.replica_fetch_calls += 1
        result = self.manager.replica_fetch(
            self.clock.now_ms(), follower, fetches, self._replica_wait_ms
        )
        self._apply(result.outputs)
        wait = result.wait
        if wait is None:
            return result.answers
        wake = self._replica_wakes[wait.key] = asyncio.Event()
        try:
            await long_poll(wake, self.ctx.scaled_s(self._replica_wait_ms))
        except BaseException:
            self.manager.replica_waits.done(wait)
            raise
        finally:
            del self._replica_wakes[wait.key]
        return self.manager.replica_fetch_collect(wait)

    async def _replica_fetch_loop(self) -> None:
        """Start a fetcher for each leader this broker follows that has none.

        ``ReplicaFetcherManager.addFetcherForPartitions``: it runs when the
        replicas this broker follows change (a ``LeaderAndIsr``, the state read
        at start) or a fetcher ends, never on a timer. A partition that starts
        following a leader whose fetcher is waiting on a fetch joins its next
        fetch, as in Kafka (``AbstractFetcherThread.addPartitions``).
        """
        changed = self._followers_changed
        fetchers = self._fetchers
        while True:
            changed.clear()
            for leader in [b for b, t in fetchers.items() if t.done()]:
                del fetchers[leader]
            for leader in self.manager.followed_leaders():
                if leader not in fetchers:
                    fetchers[leader] = asyncio.ensure_future(self._fetcher(leader))
            await changed.wait()

    async def _fetcher(self, leader: int) -> None:
        """One leader's fetcher (``ReplicaFetcherThread``): fetch, apply, fetch again at once.

        It pauses :data:`REPLICA_BACKOFF_S` after a failed call or an answer
        with an error (a leader that no longer leads answers at once: without
        the pause the follower would spin until its own ``LeaderAndIsr``), and
        ends when this broker follows nothing of ``leader`` (then the fetch
        loop looks again: a partition may have come back meanwhile).
        """
        while True:
            fetches = self.manager.replica_fetch_for(leader)
            if not fetches:
                break
            if not await self._fetch_from(leader, fetches):
                await asyncio.sleep(REPLICA_BACKOFF_S)
        self._followers_changed.set()

    async def _fetch_from(self, leader: int, fetches: dict[TopicPartition, int]) -> bool:
        """One fetch from ``leader``, applied; whether it went through without an error."""
        h = self.peers.handle(leader)
        if h is None:
            return False
        try:
            answer = await _bounded(
                h.replica_fetch.remote(self.broker_id, fetches), self._replica_call_timeout_s
            )
        except Exception:
            self.peers.failed(leader)
            return False
        return not self.manager.apply_replica_answer(leader, answer)

    # ----------------------------------------------------------------- ISR

    async def _isr_expiration_loop(self) -> None:
        """The ``isr-expiration`` task: every ``replica.lag.time.max.ms``, shrink the ISRs."""
        period = self.ctx.scaled_s(self.manager.config.lag_time_max_ms)
        while True:
            await asyncio.sleep(period)
            for tp, rep in self.manager.shrink_candidates():
                zk = self._zk
                if zk is None:
                    continue
                write = self.manager.begin_shrink(tp, rep, self.clock.now_ms())
                if write is not None:
                    await self._write_isr(zk, write)

    async def _expand_isr(self, expand: ExpandIsr) -> None:
        """``Partition.maybeExpandIsr``: a follower reached the HW, add it to the ISR."""
        zk = self._zk
        if zk is None:
            return
        write = self.manager.begin_expand(expand)
        if write is not None:
            await self._write_isr(zk, write)

    async def _write_isr(self, zk: ZkClient, write: IsrWrite) -> bool:
        """Write an ISR change to the state znode, conditional on the cached zkVersion."""
        written = False
        try:
            written = await self._write_isr_znode(zk, write)
        finally:
            self._apply(self.manager.end_isr_write(write, written))
        return written

    async def _write_isr_znode(self, zk: ZkClient, write: IsrWrite) -> bool:
        from zk_registry.controller import read_leader_and_isr, update_leader_and_isr

        topic, partition = write.tp
        if write.needs_version:  # a controller's state carries no zkVersion: read it
            got = await read_leader_and_isr(zk, topic, partition)
            if not self.manager.isr_version_read(write, got):
                return False
        try:
            version = await update_leader_and_isr(
                zk, topic, partition, write.state(self.broker_id), write.expected_version
            )
        except Exception:
            version = None
        result = self.manager.isr_written(write, version)
        if result is WriteResult.CONFLICT:
            with contextlib.suppress(Exception):
                got = await read_leader_and_isr(zk, topic, partition)
                self.manager.isr_reread(write, got)
        return result is WriteResult.WRITTEN

    # -------------------------------------------------- leader and ISR moves

    def leader_and_isr(
        self,
        states: Mapping[TopicPartition, LeaderIsr | Sequence[object]],
        live_brokers: list[int],
        replicas: Mapping[TopicPartition, list[int]] | None = None,
    ) -> dict[TopicPartition, RoleChange]:
        """``LeaderAndIsrRequest``: lead or follow each partition this broker replicates.

        See :meth:`ReplicaManager.leader_and_isr`. Returns partition ->
        ``lead``/``follow`` for the role changes.
        """
        result = self.manager.leader_and_isr(self.clock.now_ms(), states, live_brokers, replicas)
        self._apply(result.outputs)
        self._followers_changed.set()  # a new leader to fetch from starts now
        if self.share is not None:
            self.share.followed(tp for tp, c in result.changes.items() if c == "follow")
            self.share.led(tp for tp, c in result.changes.items() if c == "lead")
        return result.changes

    def update_metadata(
        self, leaders: Mapping[TopicPartition, int], live_brokers: list[int]
    ) -> None:
        """``UpdateMetadataRequest``: changed leader map entries and the live brokers.

        A leader of -2 (``LeaderDuringDelete``) removes the partition (a topic
        being deleted): see :meth:`ReplicaManager.update_metadata`.
        """
        self._apply(self.manager.update_metadata(self.clock.now_ms(), leaders, live_brokers))

    def stop_replica(self, partitions: list[TopicPartition]) -> bool:
        """``StopReplicaRequest`` with delete=true: drop these replicas and their logs.

        Returns ``True`` (no error), as the controller's callback reads it.
        """
        self._apply(self.manager.stop_replica(partitions))
        return True

    async def metadata(
        self, topics: list[str] | None = None, allow_auto_create: bool = False
    ) -> dict[TopicPartition, int]:
        """``TopicMetadataRequest``: partition -> leader broker id (-1: none).

        The whole metadata cache, as the emulator's clients read it. ``topics``
        are the topics the client asks about by name: with
        ``allow_auto_create`` (the client's side: the 0.8 clients always, the
        modern ones ``allow.auto.create.topics`` for names they subscribe to or
        produce to) and the broker's ``auto.create.topics.enable``, one missing
        from the metadata cache is created with ``num.partitions`` and
        ``default.replication.factor`` through ``AdminUtils.createTopic``
        (K@0.8.2.2 ``KafkaApis.getTopicMetadata`` 499-529; K@3.9
        ``KafkaApis.scala`` 1392 and ``AutoTopicCreationManager``), and is
        absent from this answer (Kafka answers LEADER_NOT_AVAILABLE): the
        controller's ``topic_created`` says ``reason=auto``. A topic still
        being deleted (its znode not gone yet) is not created again
        (TopicExistsException, swallowed).
        """
        if topics and allow_auto_create:
            await self._auto_create(topics)
        return self.manager.metadata()

    async def _auto_create(self, topics: list[str]) -> None:
        from emulator.placement import AdminOperationError
        from zk_registry.brokers import create_topic

        b = self.ctx.settings.broker
        zk = self._zk
        if not b.auto_create_topics_enable or zk is None:
            return
        known = {t for t, _ in self.manager.leaders}
        for topic in sorted(set(topics) - known):
            if topic == OFFSETS_TOPIC:
                continue
            rng = random.Random(
                f"{self.ctx.seed}/auto/{topic}/{self.broker_id}/{self.auto_created}"
            )
            try:
                await create_topic(
                    zk, topic, b.num_partitions, b.default_replication_factor, rng, reason="auto"
                )
            except AdminOperationError as exc:
                self.events.emit(
                    EventKind.REQUEST_ERROR,
                    reason="INVALID_REPLICATION_FACTOR",
                    topic=topic,
                    broker=self.broker_id,
                    detail=f"auto-create: {exc}",
                )
                continue
            except Exception as exc:  # ZooKeeper trouble: the client asks again later
                self.events.emit(
                    EventKind.REQUEST_ERROR,
                    reason="LEADER_NOT_AVAILABLE",
                    topic=topic,
                    broker=self.broker_id,
                    detail=f"auto-create: {type(exc).__name__}",
                )
                continue
            self.auto_created += 1

    def replica_state(self) -> dict[TopicPartition, dict[str, object]]:
        """Each replica's role and log (tests and the live display)."""
        return self.manager.replica_state()

    # ------------------------------------------------------ controller side

    def on_leader_and_isr(self, changes: Mapping[TopicPartition, LeaderIsr], reason: str) -> None:
        """The controller's callback: push the new states to the brokers.

        ``LeaderAndIsrRequest`` goes to the assigned replicas of each changed
        partition, ``UpdateMetadataRequest`` to every live broker
        (``ControllerBrokerRequestBatch.sendRequestsToBrokers``). The pushes
        run in order on this broker's loop; a broker that does not answer is
        skipped.
        """
        if self._push_queue is None:
            return
        self._push_queue.put_nowait((dict(changes), reason))

    def on_topic_deletion(self, partitions: list[TopicPartition]) -> None:
        """The controller's deletion callback: UpdateMetadata with leader -2 to every live broker.

        Queued behind the pushes already waiting, as the controller's requests
        to one broker go in order.
        """
        if self._push_queue is not None:
            self._push_queue.put_nowait(_DeletingPush(list(partitions)))

    async def stop_replicas(self, broker: int, partitions: list[TopicPartition]) -> bool:
        """The controller's StopReplica (delete=true) to ``broker``; whether it succeeded."""
        if self._push_queue is None:
            return False
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._push_queue.put_nowait(_StopPush(broker, list(partitions), done))
        return await done

    async def _push_loop(self) -> None:
        assert self._push_queue is not None
        while True:
            item = await self._push_queue.get()
            if isinstance(item, _StopPush):
                ok = False
                try:
                    ok = await self._stop_replica_at(item.broker, item.partitions)
                finally:
                    if not item.done.done():
                        item.done.set_result(ok)
                continue
            with contextlib.suppress(Exception):
                if isinstance(item, _DeletingPush):
                    await self._push_deleting(item.partitions)
                else:
                    await self._push(*item)

    async def _push_deleting(self, partitions: list[TopicPartition]) -> None:
        from emulator.controller import LEADER_DURING_DELETE
        from zk_registry.brokers import live_brokers

        if self._zk is None or not partitions:
            return
        live = await live_brokers(self._zk)
        leaders = dict.fromkeys(partitions, LEADER_DURING_DELETE)
        calls: list[tuple[int, Any]] = []
        for b in live:
            if b == self.broker_id:
                self.update_metadata(leaders, live)
                continue
            h = self.peers.handle(b)
            if h is not None:
                calls.append((b, h.update_metadata.remote(leaders, live)))
        for b, ref in calls:
            try:
                await asyncio.wait_for(_await(ref), REPLICA_CALL_TIMEOUT_S)
            except Exception:
                self.peers.failed(b)

    async def _stop_replica_at(self, broker: int, partitions: list[TopicPartition]) -> bool:
        if broker == self.broker_id:
            return self.stop_replica(partitions)
        h = self.peers.handle(broker)
        if h is None:
            return False
        try:
            return bool(
                await asyncio.wait_for(
                    _await(h.stop_replica.remote(partitions)), REPLICA_CALL_TIMEOUT_S
                )
            )
        except Exception:
            self.peers.failed(broker)
            return False

    async def _push(self, changes: dict[TopicPartition, LeaderIsr], reason: str) -> None:
        from zk_registry.brokers import live_brokers, read_topic_assignment

        del reason
        if self._zk is None or not changes:
            return
        live = await live_brokers(self._zk)
        for tp in changes:
            if not self.manager.knows_assignment(tp):
                assignment = await read_topic_assignment(self._zk, tp[0]) or {}
                self.manager.record_assignment(tp[0], assignment)
        plan = self.manager.push_plan(changes, live)
        calls: list[tuple[int, Any]] = []
        for b, states in plan.leader_and_isr.items():
            if b == self.broker_id:
                self.leader_and_isr(states, live, plan.assigned)
                continue
            h = self.peers.handle(b)
            if h is not None:
                calls.append((b, h.leader_and_isr.remote(states, live, plan.assigned)))
        for b in live:
            if b == self.broker_id:
                self.update_metadata(plan.leaders, live)
                continue
            h = self.peers.handle(b)
            if h is not None:
                calls.append((b, h.update_metadata.remote(plan.leaders, live)))
        for b, ref in calls:
            try:
                await asyncio.wait_for(_await(ref), REPLICA_CALL_TIMEOUT_S)
            except Exception:
                self.peers.failed(b)

    # --------------------------------------------------------------- misc

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._bg.add(task)
        task.add_done_callback(self._bg.discard)

    def stats(self) -> dict[str, object]:
        """Counters for the live display."""
        led = self.manager.led()
        return {
            "fetch_calls": self.fetch_calls,
            "produce_calls": self.produce_calls,
            "replica_fetch_calls": self.replica_fetch_calls,
            "leader_of": len(led),
            "replicas": len(self.manager.replicas),
            "messages": sum(r.hw for r in led),
            "coordinator": None if self.coordinators is None else self.coordinators.stats(),
            **process_usage(),
        }


@dataclass(frozen=True)
class _DeletingPush:
    """UpdateMetadata with leader -2 for a topic being deleted, to every live broker."""

    partitions: list[TopicPartition]


@dataclass(frozen=True)
class _StopPush:
    """StopReplica (delete=true) to one broker; ``done`` gets whether it succeeded."""

    broker: int
    partitions: list[TopicPartition]
    done: asyncio.Future[bool]


_Push = tuple[dict[TopicPartition, LeaderIsr], str] | _DeletingPush | _StopPush
"""What the controller's push loop sends, in order."""


async def _await(ref: Any) -> Any:
    return await ref


async def _bounded(ref: Any, timeout_s: float) -> Any:
    """``await ref`` (an actor call's ref) for at most ``timeout_s`` wall seconds.

    ``asyncio.wait_for`` would wrap the call in a task of its own and a waiter
    future; a follower's fetcher makes one call after another for the whole
    run. Here the ref's own future (``as_future``, Ray's ``ObjectRef`` and the
    sim's ``SimRef`` alike; a future or task as it is) is awaited, and a timer
    cancels it.

    Raises:
        TimeoutError: no answer within ``timeout_s``.
    """
    if asyncio.isfuture(ref):
        fut = ref
    elif hasattr(ref, "as_future"):
        fut = ref.as_future()
    else:
        fut = asyncio.ensure_future(ref)
    if fut.done():
        return fut.result()
    expired = False

    def expire() -> None:
        nonlocal expired
        if not fut.done():
            expired = True
            fut.cancel()

    timer = asyncio.get_running_loop().call_later(timeout_s, expire)
    try:
        return await fut
    except asyncio.CancelledError:
        if expired:
            raise TimeoutError(f"no answer within {timeout_s} s") from None
        raise
    finally:
        timer.cancel()


MIN_TIMER_S = 1e-6
"""The shortest sleep of the coordinators' timer task (wall seconds)."""
