"""Broker actors: registered in ZooKeeper, holding replicas of partition logs.

Messages are emulated as offset ranges, so a replica is just its log start,
its log end offset (LEO) and, on the leader, the high watermark (HW). Produce
and fetch take whole batches (one Ray call per producer or consumer host per
tick). Replication follows Kafka 0.8.2.2 (kafka-protocols.md A8;
``cluster/Partition.scala``, ``server/ReplicaManager.scala``,
``server/ReplicaFetcherThread.scala``):

* Every broker holds a replica of each partition assigned to it in
  ``/brokers/topics/<t>``. A follower fetches from the leader in one Ray call
  per (follower, leader) pair per replica tick (:data:`REPLICA_TICK_S`),
  copying at most ``replica.fetch.max.bytes`` (1048576) / 1 KiB = 1024
  messages per partition per fetch. An answer below the follower's LEO
  (``OffsetOutOfRange``) truncates the follower to the leader's LEO
  (``ReplicaFetcherThread.handleOffsetOutOfRange``).
* The leader records each follower's LEO (the fetch offset) and when it was
  last updated; HW = the least LEO over the ISR; consumer fetches are served
  only up to the HW.
* Every ``replica.lag.time.max.ms`` the leader removes the out-of-sync
  followers from the ISR (``maybeShrinkIsr``); a follower whose LEO reaches
  the HW is added back (``maybeExpandIsr``). Both are conditional writes of
  the partition state znode (``ReplicationUtils.updateLeaderAndIsr``).
* Produce is answered once the HW covers the batch: the emulator always
  produces with ``acks=all`` (Kafka's ``request.required.acks=-1`` in the 0.8
  producer, ``acks=all`` in the modern one, whose default since 3.0), bounded
  by :data:`PRODUCE_ACK_TIMEOUT_MS`.
* Leader moves come from the controller as :meth:`BrokerCore.leader_and_isr`
  (``LeaderAndIsrRequest``) and :meth:`BrokerCore.update_metadata`
  (``UpdateMetadataRequest``); clients read the leader map with
  :meth:`BrokerCore.metadata`. Whichever broker is controller pushes them
  (:meth:`BrokerCore.on_leader_and_isr`).

Emulator choices (not Kafka): a broker keeps its logs in memory, so a
restarted broker comes back with empty replicas (a replaced disk) and catches
up from the leaders; a partition with no other replica loses its data.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import ray

from actors.context import RunContext, process_usage
from actors.metadata import LeaderCache
from actors.placement import Locatable
from emulator.events import EventKind

TopicPartition = tuple[str, int]
OFFSETS_TOPIC = "__consumer_offsets"

#: Answer codes in place of a start offset.
NOT_LEADER = -1  # NotLeaderForPartition (or UnknownTopicOrPartition)
TIMED_OUT = -2  # RequestTimedOut: the HW did not cover the batch in time

#: Wall seconds between two replica fetches of a follower (emulator knob: Kafka's
#: fetcher loops on ``replica.fetch.wait.max.ms`` = 500 ms long polls; the
#: emulator polls instead).
REPLICA_TICK_S = 0.025
#: Bytes of one emulated message (emulator knob), so a fetch of
#: ``replica.fetch.max.bytes`` = 1048576 copies 1024 messages.
MESSAGE_BYTES = 1024
#: How long a produce waits for the HW to cover its batch, in emulated ms: the
#: 0.8 producer's ``request.timeout.ms`` (10000), the ack timeout it sends.
PRODUCE_ACK_TIMEOUT_MS = 10000.0
#: Emulator bound on one replica fetch call, wall seconds.
REPLICA_CALL_TIMEOUT_S = 5.0


@dataclass
class Replica:
    """This broker's replica of one partition, and the leader's view of its followers.

    Attributes:
        replicas: the assigned replicas (head = preferred).
        leader: the leader's broker id (-1: none).
        leader_epoch, controller_epoch: from the partition state.
        isr: the in-sync replicas as last written to ZooKeeper.
        zk_version: the state znode's version, for conditional ISR writes.
        leo, log_start, hw: the log.
        follower_leo: the leader's record of each follower's LEO (absent: unknown).
        follower_update_ms: when each follower's LEO was last updated
            (``logEndOffsetUpdateTimeMs``), emulated ms.
        follower_caught_up_ms: when each follower last reached the leader's LEO.
    """

    replicas: tuple[int, ...]
    leader: int = -1
    leader_epoch: int = -1
    controller_epoch: int = 0
    isr: tuple[int, ...] = ()
    zk_version: int = 0
    leo: int = 0
    log_start: int = 0
    hw: int = 0
    follower_leo: dict[int, int] = field(default_factory=dict)
    follower_update_ms: dict[int, float] = field(default_factory=dict)
    follower_caught_up_ms: dict[int, float] = field(default_factory=dict)
    waiters: list[tuple[int, asyncio.Future[bool]]] = field(default_factory=list)
    isr_write_pending: bool = False


@dataclass
class FetchSession:
    """One consumer host's fetch session on this broker (KIP-227's incremental fetch).

    A fetch that finds no data stays *parked* here, as the broker holds a
    fetch request until ``fetch.min.bytes`` (1) is there or the wait runs out;
    the host's next request carries only what changed (new fetches, withdrawn
    ones), not every partition again.

    Attributes:
        parked: slot -> ``(partition, offset, reset, max)``; the offset is
            already resolved (never None, never out of range when parked).
        ready: the parked slots that may have an answer (data, or no longer
            the leader).
        wake: set when ``ready`` gains a slot.
    """

    parked: dict[int, tuple[TopicPartition, int, str, int]] = field(default_factory=dict)
    ready: set[int] = field(default_factory=set)
    wake: asyncio.Event = field(default_factory=asyncio.Event)


def state_tuple(state: Any) -> tuple[int, int, tuple[int, ...], int, int]:
    """``(leader, leader_epoch, isr, controller_epoch, zk_version)`` of a state.

    Accepts a ``LeaderIsr``/``PartitionState``-like object (attributes
    ``leader``, ``leader_epoch``, ``isr``, ``controller_epoch``, ``zk_version``)
    or a tuple in that order (the last two optional). An unknown zkVersion is -1.
    """
    if isinstance(state, tuple | list):
        leader, epoch, isr = int(state[0]), int(state[1]), tuple(int(r) for r in state[2])
        cepoch = int(state[3]) if len(state) > 3 else 0
        version = int(state[4]) if len(state) > 4 and state[4] is not None else -1
        return leader, epoch, isr, cepoch, version
    zk_version = getattr(state, "zk_version", None)
    return (
        int(state.leader),
        int(state.leader_epoch),
        tuple(int(r) for r in state.isr),
        int(getattr(state, "controller_epoch", 0) or 0),
        -1 if zk_version is None else int(zk_version),
    )


def _kafka_bool(value: object) -> bool:
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return bool(value)


class BrokerCore(Locatable):
    """One broker, without Ray: unit-testable on its own.

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
    """

    def __init__(
        self,
        broker_id: int,
        ctx: RunContext,
        partitions: list[TopicPartition],
        port: int,
        offsets_leaders: dict[int, int] | None = None,
        partitions_per_topic: dict[str, int] | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.ctx = ctx
        self.port = port
        self.replicas: dict[TopicPartition, Replica] = {
            tp: Replica(replicas=(broker_id,), leader=broker_id, leader_epoch=0, isr=(broker_id,))
            for tp in partitions
        }
        self.leaders: dict[TopicPartition, int] = dict(ctx.leaders)
        self.live_brokers: list[int] = []
        self.clock = ctx.clock()
        self.events = ctx.writer(f"broker-{broker_id}", self.clock)
        self._zk: Any = None
        self.fetch_calls = 0
        self.fetch_sessions: dict[str, FetchSession] = {}
        # Partition -> the (session, slot) of the fetches parked on it.
        self._parked: dict[TopicPartition, dict[tuple[str, int], None]] = {}
        self.produce_calls = 0
        self.replica_fetch_calls = 0
        self.coordinators: Any = None
        self._tasks: list[asyncio.Task[None]] = []
        self._bg: set[asyncio.Task[Any]] = set()
        self._fetch_inflight: set[int] = set()
        # The replicas this broker follows, by leader: rebuilt only when a
        # replica is added, dropped or changes leader (not on every fetch tick,
        # which would walk every partition of the cluster 40 times a second).
        self._followers: dict[int, list[tuple[TopicPartition, Replica]]] = {}
        self._followers_dirty = True
        self.peers = LeaderCache(ctx, {})
        self.controller: Any = None
        self.offsets_replica: dict[int, dict[str, dict[TopicPartition, int]]] = {}
        self.assignments: dict[TopicPartition, tuple[int, ...]] = {}
        kafka = ctx.kafka
        self.max_fetch = max(
            1, int(str(kafka.get("replica.fetch.max.bytes", 1048576))) // MESSAGE_BYTES
        )
        self.lag_time_ms = float(str(kafka.get("replica.lag.time.max.ms", 10000)))
        self.lag_max_messages = int(str(kafka.get("replica.lag.max.messages", 4000)))
        self._push_queue: asyncio.Queue[Any] | None = None
        # The metadata image the group coordinators assign from (KIP-848).
        self.partition_counts: dict[str, int] = dict(
            partitions_per_topic or ctx.partitions_per_topic
        )
        if ctx.protocol != "zookeeper":
            from actors.coordinator_host import CoordinatorHost
            from actors.protocols import make_coordinator_factory

            if offsets_leaders is None:
                offsets_leaders = {p: b for (t, p), b in ctx.leaders.items() if t == OFFSETS_TOPIC}
            if offsets_leaders:
                factory = make_coordinator_factory(
                    ctx.protocol,
                    dict(ctx.kafka),
                    broker_id,
                    ctx.seed,
                    self.partition_counts,  # shared: new groups see grown topics
                )
                self.coordinators = CoordinatorHost(
                    broker_id, offsets_leaders, factory, self._emit_group
                )

    # ---------------------------------------------------------------- events

    def _emit_group(self, kind: EventKind, **fields: Any) -> None:
        fields.setdefault("group", self.ctx.group)
        self.events.emit(kind, **fields)

    # --------------------------------------------------------------- groups

    async def group_exchange(self, host_key: str, requests: list[Any]) -> list[Any]:
        """A consumer host's batch of group requests; the answers ready for that host."""
        if self.coordinators is None:
            from actors.coordinator_host import error_response
            from emulator.modern.errors import Errors

            return [error_response(r, Errors.COORDINATOR_NOT_AVAILABLE) for r in requests]
        answers: list[Any] = self.coordinators.exchange(self.clock.now_ms(), host_key, requests)
        return answers

    async def _coordinator_timers(self) -> None:
        while True:
            if self.coordinators is not None:
                self.coordinators.poll(self.clock.now_ms())
            await asyncio.sleep(0.01)

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
        from zk_registry.client import ZkClient

        session_s = self.ctx.scaled_s(
            float(str(self.ctx.kafka.get("zookeeper.session.timeout.ms", 6000)))
        )
        self._zk = ZkClient(self.ctx.zk_connect, session_s, auth=self.ctx.zk_auth)
        await self._zk.start_async()
        await register_broker(
            self._zk,
            self.broker_id,
            "127.0.0.1",
            self.port,
            timestamp_ms=int(time.time() * 1000),
            session_timeout_s=session_s,
        )
        await self._load_from_zk()
        led = sum(1 for r in self.replicas.values() if r.leader == self.broker_id)
        self.events.emit(EventKind.BROKER_STARTED, broker=self.broker_id, count=led)
        self._push_queue = asyncio.Queue()
        self._tasks = [
            asyncio.ensure_future(self._replica_fetch_loop()),
            asyncio.ensure_future(self._isr_expiration_loop()),
            asyncio.ensure_future(self._push_loop()),
            asyncio.ensure_future(self._flush_loop()),
        ]
        if self.coordinators is not None:
            self._tasks.append(asyncio.ensure_future(self._coordinator_timers()))
        if with_controller:
            await self.start_controller()
        self.events.flush()
        return self.broker_id

    async def _flush_loop(self) -> None:
        """Write buffered events out every 0.25 s, so a killed broker loses at most that."""
        while not self.events.closed:
            await asyncio.sleep(0.25)
            self.events.flush()

    async def _load_from_zk(self) -> None:
        """Read every topic's assignment and partition state (what this broker replicates)."""
        from zk_registry.brokers import live_brokers, read_partition_state, read_topic_assignment
        from zk_registry.client import ZkUtils
        from zk_registry.layout import BROKER_TOPICS_PATH

        topics = await ZkUtils(self._zk).children_maybe(BROKER_TOPICS_PATH)
        self.live_brokers = await live_brokers(self._zk)
        now = self.clock.now_ms()
        for topic in sorted(topics):
            assignment = await read_topic_assignment(self._zk, topic)
            parts = sorted((assignment or {}).items())
            # The states are read 256 at a time (pipelined on the one session),
            # so a broker of a 100,000-partition cluster starts in seconds.
            read: list[Any] = []
            for i in range(0, len(parts), 256):
                read += await asyncio.gather(
                    *(read_partition_state(self._zk, topic, p) for p, _ in parts[i : i + 256])
                )
            for (p, reps), st in zip(parts, read, strict=True):
                tp = (topic, p)
                self.assignments[tp] = tuple(reps)
                if st is not None:
                    self.leaders[tp] = st.leader
                if self.broker_id not in reps:
                    self.replicas.pop(tp, None)
                    self._followers_dirty = True
                    self._wake_parked(tp)
                    continue
                rep = self.replicas.get(tp)
                if rep is None:
                    rep = self.replicas[tp] = Replica(replicas=tuple(reps))
                    self._followers_dirty = True
                rep.replicas = tuple(reps)
                if st is not None:
                    self._apply_state(
                        tp,
                        rep,
                        (
                            st.leader,
                            st.leader_epoch,
                            tuple(st.isr),
                            st.controller_epoch,
                            st.zk_version or 0,
                        ),
                        now,
                    )

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
        )
        await self.controller.start()

    def controller_config(self) -> Any:
        """The controller's settings from the run's Kafka configs, scaled by ``time_scale``.

        ``unclean.leader.election.enable`` defaults to true for the
        ``zookeeper`` protocol (0.8.2) and false for the modern ones (Kafka >=
        0.11, KIP-106); ``auto.leader.rebalance.enable`` true,
        ``leader.imbalance.per.broker.percentage`` 10,
        ``leader.imbalance.check.interval.seconds`` 300 (and Kafka's fixed 5 s
        before the first check). Any of them set in ``ctx.kafka`` wins.
        """
        from zk_registry.controller import ControllerConfig

        k = self.ctx.kafka
        return ControllerConfig(
            auto_leader_rebalance_enable=_kafka_bool(k.get("auto.leader.rebalance.enable", True)),
            leader_imbalance_per_broker_percentage=int(
                str(k.get("leader.imbalance.per.broker.percentage", 10))
            ),
            leader_imbalance_check_interval_s=self.ctx.scaled_s(
                1000.0 * float(str(k.get("leader.imbalance.check.interval.seconds", 300)))
            ),
            first_check_delay_s=self.ctx.scaled_s(5000.0),
            unclean_leader_election_enable=_kafka_bool(
                k.get("unclean.leader.election.enable", self.ctx.protocol == "zookeeper")
            ),
            zk_session_timeout_s=self.ctx.scaled_s(
                float(str(k.get("zookeeper.session.timeout.ms", 6000)))
            ),
            replica_lag_time_max_ms=int(self.lag_time_ms),
            replica_lag_max_messages=self.lag_max_messages,
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
        await self.stop_controller()
        for rep in self.replicas.values():
            self._fail_waiters(rep)
        for sess in self.fetch_sessions.values():
            sess.wake.set()  # parked fetches answer now, with what they have
        self.events.emit(EventKind.BROKER_STOPPED, broker=self.broker_id)
        if self._zk is not None:
            await self._zk.stop_async()
            self._zk = None
        self.events.close()

    def set_origin(self, origin_wall: float) -> None:
        """Fix the run's emulated time 0 (called once every actor is up)."""
        self.clock.rebase(origin_wall)

    def origin_wall(self) -> float:
        """The run's emulated time 0 as this broker has it (for a restarted broker)."""
        return self.clock.origin_wall

    # ------------------------------------------------------------ produce

    async def produce(
        self, batch: dict[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[int, int]]:
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
        out: dict[TopicPartition, tuple[int, int]] = {}
        pending: dict[TopicPartition, tuple[int, int, asyncio.Future[bool]]] = {}
        loop = asyncio.get_running_loop()
        for tp, n in batch.items():
            rep = self.replicas.get(tp)
            if rep is None or rep.leader != self.broker_id or n <= 0:
                out[tp] = (NOT_LEADER, NOT_LEADER)
                continue
            start = rep.leo
            rep.leo += n
            fut: asyncio.Future[bool] = loop.create_future()
            rep.waiters.append((rep.leo, fut))
            pending[tp] = (start, rep.leo, fut)
            self._maybe_advance_hw(tp, rep)
        if pending:
            futs = [f for _s, _e, f in pending.values()]
            await asyncio.wait(futs, timeout=self.ctx.scaled_s(PRODUCE_ACK_TIMEOUT_MS))
            for tp, (start, end, fut) in pending.items():
                if not fut.done():
                    fut.cancel()
                    rep = self.replicas.get(tp)
                    if rep is not None:
                        rep.waiters = [(e, f) for e, f in rep.waiters if f is not fut]
                    out[tp] = (TIMED_OUT, TIMED_OUT)
                elif fut.result():
                    out[tp] = (start, end)
                else:
                    out[tp] = (NOT_LEADER, NOT_LEADER)
        return out

    def _maybe_advance_hw(self, tp: TopicPartition, rep: Replica) -> None:
        """``maybeIncrementLeaderHW``: HW = the least LEO over the ISR (never backwards)."""
        if rep.leader != self.broker_id:
            return
        leos = [rep.leo]
        for r in rep.isr:
            if r == self.broker_id:
                continue
            leo = rep.follower_leo.get(r)
            if leo is None:
                return  # a follower of unknown LEO holds the HW where it is
            leos.append(leo)
        hw = min(leos)
        if hw > rep.hw:
            rep.hw = hw
            if tp in self._parked:
                self._wake_parked(tp)
        if rep.waiters:
            keep: list[tuple[int, asyncio.Future[bool]]] = []
            for end, fut in rep.waiters:
                if fut.done():
                    continue
                if end <= rep.hw:
                    fut.set_result(True)
                else:
                    keep.append((end, fut))
            rep.waiters = keep

    @staticmethod
    def _fail_waiters(rep: Replica) -> None:
        for _end, fut in rep.waiters:
            if not fut.done():
                fut.set_result(False)
        rep.waiters = []

    # --------------------------------------------------------------- fetch

    def fetch(
        self, requests: list[tuple[str, int, int | None, str, int]]
    ) -> list[tuple[str, int, int, int]]:
        """Serve a batch of consumer fetches: ``(topic, partition, offset, reset, max)``.

        Only committed messages (below the HW) are served. ``offset`` ``None``
        or out of range (below the log start or above the LEO) is resolved by
        ``reset`` (``smallest``/``earliest`` or ``largest``/``latest``); an
        offset between the HW and the LEO gets an empty answer. Returns
        ``(topic, partition, start, end)`` per request; ``start == -1``
        (:data:`NOT_LEADER`) means "not leader".
        """
        self.fetch_calls += 1
        out: list[tuple[str, int, int, int]] = []
        for topic, partition, offset, reset, max_n in requests:
            start, end = self._serve((topic, partition), offset, reset, max_n)
            out.append((topic, partition, start, end))
        return out

    def _serve(
        self, tp: TopicPartition, offset: int | None, reset: str, max_n: int
    ) -> tuple[int, int]:
        """One partition's fetch answer ``(start, end)`` (see :meth:`fetch`)."""
        rep = self.replicas.get(tp)
        if rep is None or rep.leader != self.broker_id:
            return NOT_LEADER, NOT_LEADER
        if offset is None or offset < rep.log_start or offset > rep.leo:
            offset = rep.log_start if reset in ("smallest", "earliest") else rep.hw
        return offset, max(offset, min(rep.hw, offset + max_n))

    async def fetch_session(
        self,
        session: str,
        new_session: bool,
        adds: list[tuple[int, str, int, int | None, str, int]],
        withdrawn: list[int],
        max_wait_ms: float,
    ) -> list[tuple[int, int, int]]:
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
        sess = self.fetch_sessions.get(session)
        if sess is None or new_session:
            if sess is not None:
                self._close_fetch_session(session, sess)
            sess = self.fetch_sessions[session] = FetchSession()
        for slot in withdrawn:
            sess.ready.discard(slot)
            entry = sess.parked.pop(slot, None)
            if entry is not None:
                self._unpark(entry[0], session, slot)
        out: list[tuple[int, int, int]] = []
        for slot, topic, partition, offset, reset, max_n in adds:
            tp = (topic, partition)
            start, end = self._serve(tp, offset, reset, max_n)
            if start < 0 or end > start:
                out.append((slot, start, end))
                continue
            sess.parked[slot] = (tp, start, reset, max_n)
            self._parked.setdefault(tp, {})[(session, slot)] = None
        if not out and not sess.ready and sess.parked and max_wait_ms > 0:
            sess.wake.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(sess.wake.wait(), self.ctx.scaled_s(max_wait_ms))
        if sess.ready:
            ready, sess.ready = sess.ready, set()
            for slot in ready:
                entry = sess.parked.get(slot)
                if entry is None:
                    continue
                tp, offset, reset, max_n = entry
                start, end = self._serve(tp, offset, reset, max_n)
                if start >= 0 and end == start:
                    continue  # woken but still nothing there: stays parked
                del sess.parked[slot]
                self._unpark(tp, session, slot)
                out.append((slot, start, end))
        return out

    def _unpark(self, tp: TopicPartition, session: str, slot: int) -> None:
        waiting = self._parked.get(tp)
        if waiting is not None:
            waiting.pop((session, slot), None)
            if not waiting:
                del self._parked[tp]

    def _close_fetch_session(self, session: str, sess: FetchSession) -> None:
        for slot, (tp, *_rest) in sess.parked.items():
            self._unpark(tp, session, slot)
        sess.parked.clear()
        sess.ready.clear()
        sess.wake.set()

    def _wake_parked(self, tp: TopicPartition) -> None:
        """Data (or a leadership change) on ``tp``: its parked fetches may be answered."""
        waiting = self._parked.get(tp)
        if not waiting:
            return
        for session, slot in waiting:
            sess = self.fetch_sessions.get(session)
            if sess is not None:
                sess.ready.add(slot)
                sess.wake.set()

    def log_end_offsets(self) -> dict[TopicPartition, int]:
        """The HW of each partition this broker leads (what consumers can reach)."""
        return {
            tp: r.hw
            for tp, r in self.replicas.items()
            if r.leader == self.broker_id and tp[0] != OFFSETS_TOPIC
        }

    # ------------------------------------------------------------ replication

    def replica_fetch(
        self, follower: int, fetches: dict[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[int, int, int, Any]]:
        """A follower's fetch of the partitions this broker leads (a replica ``FetchRequest``).

        Args:
            follower: the follower's broker id.
            fetches: partition -> the follower's LEO (its fetch offset).

        Returns:
            Partition -> ``(new_leo, hw, log_start, offsets)``: the follower
            sets its LEO to ``new_leo`` (below its own LEO: truncate), takes
            the HW, and for ``__consumer_offsets`` the committed offsets of the
            partition's groups (group -> {partition: offset}). ``new_leo ==
            -1``: not leader.
        """
        from emulator.controller import caught_up_for_expand

        self.replica_fetch_calls += 1
        now = self.clock.now_ms()
        out: dict[TopicPartition, tuple[int, int, int, Any]] = {}
        for tp, offset in fetches.items():
            rep = self.replicas.get(tp)
            if rep is None or rep.leader != self.broker_id or follower not in rep.replicas:
                out[tp] = (NOT_LEADER, NOT_LEADER, NOT_LEADER, None)
                continue
            if offset > rep.leo:  # OffsetOutOfRange: the follower truncates
                out[tp] = (rep.leo, rep.hw, rep.log_start, None)
                continue
            rep.follower_leo[follower] = offset
            rep.follower_update_ms[follower] = now
            if offset >= rep.leo:
                rep.follower_caught_up_ms[follower] = now
            self._maybe_advance_hw(tp, rep)
            if caught_up_for_expand(follower, offset, rep.hw, rep.replicas, rep.isr):
                self._spawn(self._expand_isr(tp, rep, follower))
            payload = None
            if tp[0] == OFFSETS_TOPIC and self.coordinators is not None:
                payload = self.coordinators.offsets_snapshot(tp[1])
            new_leo = min(rep.leo, offset + self.max_fetch)
            out[tp] = (new_leo, min(rep.hw, new_leo), rep.log_start, payload)
        return out

    async def _replica_fetch_loop(self) -> None:
        while True:
            if self._followers_dirty:
                self._followers_dirty = False
                followers: dict[int, list[tuple[TopicPartition, Replica]]] = {}
                for tp, rep in self.replicas.items():
                    if rep.leader >= 0 and rep.leader != self.broker_id:
                        followers.setdefault(rep.leader, []).append((tp, rep))
                self._followers = followers
            for leader, reps in self._followers.items():
                if leader in self._fetch_inflight:
                    continue
                self._fetch_inflight.add(leader)
                self._spawn(self._fetch_from(leader, {tp: rep.leo for tp, rep in reps}))
            await asyncio.sleep(REPLICA_TICK_S)

    async def _fetch_from(self, leader: int, fetches: dict[TopicPartition, int]) -> None:
        try:
            h = self.peers.handle(leader)
            if h is None:
                return
            try:
                answer = await asyncio.wait_for(
                    _await(h.replica_fetch.remote(self.broker_id, fetches)),
                    REPLICA_CALL_TIMEOUT_S,
                )
            except Exception:
                self.peers.failed(leader)
                await asyncio.sleep(REPLICA_TICK_S * 4)
                return
            for tp, (new_leo, hw, log_start, payload) in answer.items():
                rep = self.replicas.get(tp)
                if rep is None or rep.leader != leader or new_leo < 0:
                    continue
                rep.leo = new_leo
                rep.log_start = log_start
                rep.hw = min(hw, rep.leo)
                if payload is not None:
                    self.offsets_replica[tp[1]] = payload
        finally:
            self._fetch_inflight.discard(leader)

    # ----------------------------------------------------------------- ISR

    async def _isr_expiration_loop(self) -> None:
        """The ``isr-expiration`` task: every ``replica.lag.time.max.ms``, shrink the ISRs."""
        period = self.ctx.scaled_s(self.lag_time_ms)
        while True:
            await asyncio.sleep(period)
            for tp, rep in list(self.replicas.items()):
                if rep.leader == self.broker_id and len(rep.isr) > 1:
                    await self._maybe_shrink_isr(tp, rep)

    def _out_of_sync(self, rep: Replica, now: float) -> set[int]:
        from emulator.controller import out_of_sync_replicas

        return out_of_sync_replicas(
            self.broker_id,
            rep.isr,
            rep.follower_update_ms,
            rep.follower_leo,
            rep.leo,
            now,
            lag_time_max_ms=self.lag_time_ms,
            lag_max_messages=self.lag_max_messages,
        )

    async def _maybe_shrink_isr(self, tp: TopicPartition, rep: Replica) -> None:
        """``Partition.maybeShrinkIsr`` (K@0.8.2.2)."""
        if rep.isr_write_pending:
            return
        out = self._out_of_sync(rep, self.clock.now_ms())
        if not out:
            return
        new_isr = tuple(r for r in rep.isr if r not in out)
        if await self._write_isr(tp, rep, new_isr, "shrink"):
            for r in out:
                rep.follower_leo.pop(r, None)
            self._maybe_advance_hw(tp, rep)

    async def _expand_isr(self, tp: TopicPartition, rep: Replica, follower: int) -> None:
        """``Partition.maybeExpandIsr``: a follower reached the HW, add it to the ISR."""
        if rep.isr_write_pending or follower in rep.isr:
            return
        order = [r for r in rep.replicas if r in rep.isr or r == follower]
        order += [r for r in rep.isr if r not in order]
        await self._write_isr(tp, rep, tuple(order), "expand")

    async def _write_isr(
        self, tp: TopicPartition, rep: Replica, new_isr: tuple[int, ...], reason: str
    ) -> bool:
        """Write ``new_isr`` to the state znode, conditional on the cached zkVersion."""
        from emulator.controller import LeaderIsr
        from zk_registry.controller import read_leader_and_isr, update_leader_and_isr

        if self._zk is None:
            return False
        rep.isr_write_pending = True
        epoch = rep.leader_epoch
        try:
            if rep.zk_version < 0:  # a controller's state carries no zkVersion: read it
                got = await read_leader_and_isr(self._zk, tp[0], tp[1])
                if got is None:
                    return False
                st, ver = got
                if st.leader != self.broker_id or st.leader_epoch != epoch:
                    return False
                rep.zk_version = int(ver)
                rep.controller_epoch = st.controller_epoch
            new = LeaderIsr(
                leader=self.broker_id,
                leader_epoch=epoch,
                isr=new_isr,
                controller_epoch=rep.controller_epoch,
            )
            try:
                version = await update_leader_and_isr(self._zk, tp[0], tp[1], new, rep.zk_version)
            except Exception:
                version = None
            if rep.leader != self.broker_id or rep.leader_epoch != epoch:
                return False  # the controller moved the partition meanwhile
            if version is None:
                # "Cached zkVersion ... not equal to that in zookeeper, skip updating
                # ISR": re-read, keep leading only what the znode says we lead.
                with contextlib.suppress(Exception):
                    got = await read_leader_and_isr(self._zk, tp[0], tp[1])
                    if got is not None:
                        st, ver = got
                        if st.leader == self.broker_id and st.leader_epoch == rep.leader_epoch:
                            rep.isr = tuple(st.isr)
                            rep.zk_version = int(ver)
                            rep.controller_epoch = st.controller_epoch
                return False
            rep.isr = new_isr
            rep.zk_version = int(version)
            self.events.emit(
                EventKind.ISR_CHANGED,
                topic=tp[0],
                partition=tp[1],
                broker=self.broker_id,
                reason=reason,
                generation=rep.leader_epoch,
                detail=json.dumps(list(new_isr), separators=(",", ":")),
            )
            return True
        finally:
            rep.isr_write_pending = False

    # -------------------------------------------------- leader and ISR moves

    def _apply_state(
        self,
        tp: TopicPartition,
        rep: Replica,
        state: tuple[int, int, tuple[int, ...], int, int],
        now: float,
    ) -> str | None:
        """Become leader or follower of ``tp``; return ``"lead"``/``"follow"`` on a change."""
        leader, epoch, isr, cepoch, version = state
        if epoch < rep.leader_epoch:
            return None  # a stale request (Kafka: "stale leader epoch")
        was_leader = rep.leader == self.broker_id
        rep.isr = tuple(isr)
        rep.zk_version = version
        rep.controller_epoch = cepoch
        changed = leader != rep.leader or epoch != rep.leader_epoch
        if leader != rep.leader:
            self._followers_dirty = True
            if tp in self._parked:
                self._wake_parked(tp)  # a fetch parked here now gets NotLeader
        rep.leader_epoch = epoch
        rep.leader = leader
        if leader == self.broker_id:
            if changed and not was_leader:
                # makeLeader: the HW stays the replica's own; follower LEOs are unknown.
                rep.follower_leo = {}
                rep.follower_update_ms = {r: now for r in rep.replicas if r != leader}
                rep.follower_caught_up_ms = {}
                self._maybe_advance_hw(tp, rep)
                return "lead"
            self._maybe_advance_hw(tp, rep)
            return None
        if was_leader:
            self._fail_waiters(rep)
            rep.follower_leo = {}
            return "follow"
        return None

    def leader_and_isr(
        self,
        states: Mapping[TopicPartition, Any],
        live_brokers: list[int],
        replicas: Mapping[TopicPartition, list[int]] | None = None,
    ) -> dict[TopicPartition, str]:
        """``LeaderAndIsrRequest``: lead or follow each partition this broker replicates.

        Args:
            states: partition -> its ``LeaderIsr`` (or a ``(leader,
                leader_epoch, isr, controller_epoch, zk_version)`` tuple).
            live_brokers: the live broker ids.
            replicas: the assignment of partitions this broker may not know
                yet (new topics or partitions).

        A new leader starts from its own LEO and HW; a follower fetches from
        the new leader and truncates to the leader's LEO if it is ahead. A
        state with an older leader epoch than the replica's is ignored.
        Returns partition -> ``lead``/``follow`` for the role changes.
        """
        now = self.clock.now_ms()
        self.live_brokers = sorted(live_brokers)
        changes: dict[TopicPartition, str] = {}
        for tp, raw in states.items():
            st = state_tuple(raw)
            reps = tuple((replicas or {}).get(tp, ())) or self.assignments.get(tp, ())
            if reps:
                self.assignments[tp] = tuple(reps)
            self.leaders[tp] = st[0]
            rep = self.replicas.get(tp)
            if rep is None:
                if self.broker_id not in reps and self.broker_id != st[0]:
                    continue
                rep = self.replicas[tp] = Replica(replicas=tuple(reps) or (self.broker_id,))
                self._followers_dirty = True
            elif reps:
                rep.replicas = tuple(reps)
            change = self._apply_state(tp, rep, st, now)
            if change is not None:
                changes[tp] = change
        self._coordinator_moves(changes)
        return changes

    def _coordinator_moves(self, changes: Mapping[TopicPartition, str]) -> None:
        """Load or drop the groups of ``__consumer_offsets`` partitions that moved."""
        if self.coordinators is None:
            return
        now = self.clock.now_ms()
        self.coordinators.set_leaders(
            {p: b for (t, p), b in self.leaders.items() if t == OFFSETS_TOPIC}
        )
        for (topic, p), change in sorted(changes.items()):
            if topic != OFFSETS_TOPIC:
                continue
            if change == "lead":
                groups = self.offsets_replica.get(p, {})
                self.coordinators.load_partition(p, groups)
                self.events.emit(
                    EventKind.COORDINATOR_STARTED,
                    broker=self.broker_id,
                    partition=p,
                    count=len(groups),
                    reason="leader_elected",
                )
            else:
                snapshot = self.coordinators.offsets_snapshot(p)
                self.offsets_replica[p] = snapshot
                self.coordinators.unload_partition(p, now)

    def update_metadata(
        self, leaders: Mapping[TopicPartition, int], live_brokers: list[int]
    ) -> None:
        """``UpdateMetadataRequest``: changed leader map entries and the live brokers."""
        self.leaders.update(leaders)
        self.live_brokers = sorted(live_brokers)
        if self.coordinators is not None:
            self.coordinators.set_leaders(
                {p: b for (t, p), b in self.leaders.items() if t == OFFSETS_TOPIC}
            )
            self._maybe_grow_topics()

    def _maybe_grow_topics(self) -> None:
        """A topic grew (new partitions in the metadata): tell the group coordinators.

        A KIP-848 coordinator bumps the group epoch on its next heartbeat
        (``update_topics``); a classic coordinator does not use partition
        counts (its group leader notices on a metadata refresh).
        """
        counts: dict[str, int] = {}
        for t, p in self.leaders:
            if t != OFFSETS_TOPIC:
                counts[t] = max(counts.get(t, 0), p + 1)
        grown = {t: n for t, n in counts.items() if n > self.partition_counts.get(t, 0)}
        if not grown or self.coordinators is None:
            return
        self.partition_counts.update(grown)
        now = self.clock.now_ms()
        for coord in self.coordinators.coordinators.values():
            update = getattr(coord, "update_topics", None)
            if update is not None:
                update(now, dict(self.partition_counts))

    def metadata(self) -> dict[TopicPartition, int]:
        """``TopicMetadataRequest``: partition -> leader broker id (-1: none)."""
        return dict(self.leaders)

    def replica_state(self) -> dict[TopicPartition, dict[str, Any]]:
        """Each replica's role and log (tests and the live display)."""
        return {
            tp: {
                "leader": r.leader,
                "leader_epoch": r.leader_epoch,
                "isr": list(r.isr),
                "leo": r.leo,
                "hw": r.hw,
                "replicas": list(r.replicas),
            }
            for tp, r in self.replicas.items()
        }

    # ------------------------------------------------------ controller side

    def on_leader_and_isr(self, changes: Mapping[TopicPartition, Any], reason: str) -> None:
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

    async def _push_loop(self) -> None:
        assert self._push_queue is not None
        while True:
            changes, reason = await self._push_queue.get()
            with contextlib.suppress(Exception):
                await self._push(changes, reason)

    async def _push(self, changes: dict[TopicPartition, Any], reason: str) -> None:
        from zk_registry.brokers import live_brokers, read_topic_assignment

        if self._zk is None or not changes:
            return
        live = await live_brokers(self._zk)
        for tp in changes:
            if tp not in self.assignments:
                a = await read_topic_assignment(self._zk, tp[0]) or {}
                for p, reps in a.items():
                    self.assignments[(tp[0], p)] = tuple(reps)
        per_broker: dict[int, dict[TopicPartition, Any]] = {}
        leaders: dict[TopicPartition, int] = {}
        for tp, st in changes.items():
            t = state_tuple(st)
            leaders[tp] = t[0]
            for b in set(self.assignments.get(tp, ())) | {t[0]}:
                if b in live:
                    per_broker.setdefault(b, {})[tp] = t
        assigned = {tp: list(self.assignments.get(tp, ())) for tp in changes}
        calls: list[Any] = []
        for b, states in sorted(per_broker.items()):
            if b == self.broker_id:
                self.leader_and_isr(states, live, assigned)
                continue
            h = self.peers.handle(b)
            if h is not None:
                calls.append((b, h.leader_and_isr.remote(states, live, assigned)))
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
        del reason

    # --------------------------------------------------------------- misc

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._bg.add(task)
        task.add_done_callback(self._bg.discard)

    def stats(self) -> dict[str, Any]:
        """Counters for the live display."""
        led = [r for r in self.replicas.values() if r.leader == self.broker_id]
        return {
            "fetch_calls": self.fetch_calls,
            "produce_calls": self.produce_calls,
            "replica_fetch_calls": self.replica_fetch_calls,
            "leader_of": len(led),
            "replicas": len(self.replicas),
            "messages": sum(r.hw for r in led),
            "coordinator": None if self.coordinators is None else self.coordinators.stats(),
            **process_usage(),
        }


async def _await(ref: Any) -> Any:
    return await ref


BrokerActor = ray.remote(num_cpus=0)(BrokerCore)
