"""The run orchestrator: builds a run from a scenario, applies its timeline, collects logs.

One :func:`run_scenario` call runs one scenario once per protocol, each under
``<out>/<protocol>/`` with the same seed, workload and timeline, and writes
``<out>/manifest.json`` before the first actor starts (status ``running``) and
again at the end, so an interrupted run still says what it was.

The orchestrator lives in the driver process; brokers, producers and consumer
hosts are actors of the run's :class:`~actors.system.ActorSystem` (Ray actors on
the real engine). What differs between engines besides (ZooKeeper, Ray,
storage) is the :class:`~actors.engine.RunEngine`'s; this module imports no Ray.
"""

from __future__ import annotations

import contextlib
import json
import random
import socket
import sys
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from actors import timeline
from actors.context import RunContext
from actors.engine import RunEngine
from actors.run_files import (
    EventStorage,
    RunError,
    overall_status,
    redacted_argv,
    versions,
    write_manifest,
)
from actors.spool import collect
from actors.system import ActorSystem
from actors.timeline import Launch
from emulator.broker.coordinators import HEARTBEAT_GAP_BOUNDS_MS
from emulator.broker.share_partition import SHARE_GROUPS_SINCE
from emulator.delivery import DeliveryMode
from emulator.eventlog import ReadStats, read_run_events
from emulator.events import Event, EventKind
from emulator.host.core import MemberSpec
from emulator.kafka_keys import kafka_version_at_least
from emulator.protocols import RUN_PROTOCOLS, assignor_for, spec
from emulator.scenario import Scenario
from emulator.scenario.faults import switched_protocol
from emulator.sim.monitor import StopSimulation
from emulator.storage import Location, StorageError, resolve
from emulator.summary import RunSummary, summarize

_T = TypeVar("_T")

BASE_BROKER_PORT = 9092
TEARDOWN_S = 120.0
"""Bound on stopping a protocol's actors at the end of its run."""
INTERRUPTED_TEARDOWN_S = 2.5
"""The same bound after Ctrl-C/SIGTERM/SIGHUP: the CLI must be gone within seconds."""


@dataclass
class ProtocolResult:
    """One protocol's outcome."""

    protocol: str
    status: str
    summary: RunSummary
    wall_s: float
    notes: list[str] = field(default_factory=list)


Status = Callable[[dict[str, Any]], None]


class ProtocolRun:
    """One protocol's run of a scenario.

    Args:
        scenario: the validated scenario.
        protocol: the protocol to run.
        out_dir: the run directory (``<out_dir>/<protocol>/events``).
        run_id: the run's id.
        zk_hosts: the ZooKeeper members' ``host:port``.
        status: called with live counters about twice a second.
        system: what the actors run on and the driver's clocks
            (:class:`actors.ray_system.RaySystem` by default).
    """

    def __init__(
        self,
        scenario: Scenario,
        protocol: str,
        out_dir: Path,
        run_id: str,
        zk_hosts: list[str],
        status: Status | None = None,
        validate_events: bool = False,
        storage: EventStorage | None = None,
        system: ActorSystem | None = None,
    ) -> None:
        if system is None:
            from actors.ray_system import RaySystem

            system = RaySystem()
        self.system: ActorSystem = system
        self.scenario = scenario
        self.protocol = protocol
        self.dir = out_dir / protocol
        self.storage = storage or EventStorage("local", resolve(out_dir))
        # where each actor's log went (actors.spool.collect), for the manifest
        self.storage_report: dict[str, Any] = {}
        self.run_id = run_id
        self.zk_hosts = zk_hosts
        self.status = status or (lambda _s: None)
        self.validate_events = validate_events
        self.notes: list[str] = []
        self.brokers: dict[int, Any] = {}
        self.hosts: list[Any] = []
        self.producer: Any = None
        self.member_host: dict[str, int] = {}
        self.dead_hosts: set[int] = set()
        self.ensemble: Any = None  # the embedded ZooKeeper ensemble, for its faults
        self.zk_base = ""  # the chroot of a user's --zookeeper connect string
        self.zk_auth: Any = None  # --zk-auth (zk_registry.auth.ZkAuth)
        self.tap: Callable[[Event], None] | None = None  # sees the orchestrator's events
        # read the logs back for the result's summary at the end (explore's seeds do not)
        self.summarize_logs = True
        # actor -> node and each node's clock offset (actors.placement.measure_nodes)
        self.placement_report: dict[str, Any] = {}
        self.lost_hosts: set[int] = set()  # hosts that died unasked (their node was lost)
        self.lost_brokers: set[int] = set()  # brokers that died unasked
        # actors the timeline killed (host_crash, broker_crash): their logs end unclosed
        self.killed_actors: set[str] = set()
        self.interrupted = False  # Ctrl-C/SIGTERM/SIGHUP: the teardown is hurried
        self.live_members: set[str] = set()  # started, not yet left or crashed
        self._log: Any = None
        # What the run cost: each actor's CPU and peak memory at its end, and
        # (modern) the coordinators' request counts after each timeline action.
        self.resources: dict[str, Any] = {"actors": {}, "coordinator": []}
        self.ctx: RunContext | None = None  # set once the run's actors are being built
        self.result: ProtocolResult | None = None  # set when run() ends, however it ends
        self._broker_starts: list[Any] = []  # restarted brokers' start calls, in flight

    # ------------------------------------------------------------- set-up

    def _chroot(self) -> str:
        """The run's znodes: under the user's own chroot (``--zookeeper host:port/base``)."""
        return f"{self.zk_base}/rebalance-emu/{self.run_id}/{self.protocol}"

    def _context(self, leaders: dict[tuple[str, int], int], origin: float) -> RunContext:
        sc = self.scenario
        chroot = self._chroot()
        generation = spec(self.protocol).generation
        assignor, note = assignor_for(self.protocol, sc.group.assignor)
        if note and note not in self.notes:
            self.notes.append(note)
        if sc.group.static_membership and generation == "zookeeper":
            note = "static membership does not exist in the 0.8 consumer: ignored"
            if note not in self.notes:
                self.notes.append(note)
        if sc.group.mixed_to is not None and generation == "zookeeper":
            note = "the 0.8 consumer has no group protocol to mix: [group].mixed ignored"
            if note not in self.notes:
                self.notes.append(note)
        if sc.group.rebalance_listener != "none" and generation == "zookeeper":
            note = "the 0.8.2 consumer has no rebalance listener: rebalance_listener ignored"
            if note not in self.notes:
                self.notes.append(note)
        if sc.group.manual_commit == "async" and generation == "zookeeper":
            note = "the 0.8 commitOffsets() is synchronous: manual_commit async runs as sync"
            if note not in self.notes:
                self.notes.append(note)
        if generation == "zookeeper":
            kafka: dict[str, object] = dict(sc.effective_kafka_config(generation))
            kafka["partition.assignment.strategy"] = assignor
        else:
            # Only what the scenario sets: the rest follows the Kafka release's
            # defaults (B6), which the modern config builders apply.
            kafka = dict(sc.kafka)
            kafka["kafka.version"] = sc.kafka_version
            if generation == "consumer" and not kafka_version_at_least(sc.kafka_version, (3, 7)):
                note = (
                    f"KIP-848 ships from Kafka 3.7 (GA in 4.0); kafka_version "
                    f"{sc.kafka_version} only sets the defaults, the protocol is 4.0's"
                )
                if note not in self.notes:
                    self.notes.append(note)
        return RunContext(
            run_id=self.run_id,
            protocol=self.protocol,
            events_dir=str(self.dir / "events"),
            time_scale=sc.time_scale,
            origin_wall=origin,
            zk_connect=",".join(self.zk_hosts) + chroot,
            zk_hosts=tuple(self.zk_hosts),
            seed=sc.seed,
            group=sc.group.id,
            kafka=kafka,
            leaders=leaders,
            partitions_per_topic={t.name: t.partitions for t in sc.topics},
            assignor=assignor,
            static_membership=sc.group.static_membership and generation != "zookeeper",
            processing_ms_per_message=sc.group.processing_ms_per_message,
            manual_commit=sc.group.manual_commit,
            rebalance_listener=self.delivery_mode().rebalance_listener,
            share_release=sc.group.share_release,
            share_reject=sc.group.share_reject,
            topic_pattern=sc.group.topic_pattern,
            mixed_protocols=generation != "zookeeper"
            and (
                sc.group.mixed_to is not None
                or any(a.action == "upgrade" for a in sc.action_plan())
            ),
            validate_events=self.validate_events,
            storage_mode=self.storage.mode,
            events_url=self.storage.events_url(self.protocol),
            spool_root=self.storage.spool_root,
            driver_node=self.storage.driver_node,
            zk_auth=self.zk_auth,
            origin_fixed=False,  # fixed once every actor is up (set_origin)
            engine=self.system.engine,
            mono=self.system.mono_source(),
            wall=self.system.wall_source(),
        )

    def delivery_mode(self) -> DeliveryMode:
        """This protocol's commit settings (:mod:`emulator.delivery`)."""
        sc = self.scenario
        generation = spec(self.protocol).generation
        key = "auto.commit.enable" if generation == "zookeeper" else "enable.auto.commit"
        return DeliveryMode(
            protocol=self.protocol,
            auto_commit=bool(sc.kafka_config(key, generation)),
            manual_commit=sc.group.manual_commit,
            rebalance_listener="none" if generation == "zookeeper" else sc.group.rebalance_listener,
            kafka_version=sc.kafka_version,
        )

    def _create_topics(self, zk_hosts: str, chroot: str) -> dict[tuple[str, int], int]:
        """The admin step: the topic znodes (``AdminUtils.createTopic``).

        The partition ``state`` znodes are not written here: the controller
        elected once every broker has registered writes them
        (``onNewTopicCreation`` -> ``initializeLeaderAndIsrForPartition``, K@0.8.2.2
        ``PartitionStateMachine.scala``) and tells the brokers. Returns the
        leaders it will choose with every broker live (the first replica of
        each assignment, :func:`emulator.controller.new_partition_leader`), which
        the actors start from; they follow the controller's LeaderAndIsr after.
        """
        from emulator.controller import new_partition_leader
        from zk_registry.brokers import create_topic, setup_common_paths

        sc = self.scenario
        rng = random.Random(sc.seed)
        broker_ids = list(range(sc.cluster.brokers))

        leaders: dict[tuple[str, int], int] = {}

        def predict(topic: str, assignment: dict[int, list[int]]) -> None:
            for p, reps in assignment.items():
                st = new_partition_leader(reps, broker_ids, 1)
                if st is not None:
                    leaders[(topic, p)] = st.leader

        async def go() -> dict[tuple[str, int], int]:
            root = self.system.zk_client(zk_hosts, 10.0, auth=self.zk_auth)
            await root.start_async()
            try:
                await root.create_persistent_recursive(chroot)
            finally:
                await root.stop_async()
            zk = self.system.zk_client(zk_hosts, 10.0, chroot=chroot, auth=self.zk_auth)
            await zk.start_async()
            try:
                await setup_common_paths(zk)
                for topic in sc.topics:
                    assignment = await create_topic(
                        zk,
                        topic.name,
                        topic.partitions,
                        topic.replication_factor,
                        rng,
                        broker_ids=broker_ids,
                    )
                    predict(topic.name, assignment)
                if self.protocol != "zookeeper":
                    # __consumer_offsets, created like any topic so the controller
                    # moves its leaders (and the group coordinators) on failures.
                    # Placement: emulator.modern.placement.offsets_topic_assignment
                    # (the same draw, the replication factor capped at the brokers).
                    from emulator.modern.placement import OFFSETS_TOPIC

                    broker = sc.broker_settings(self.protocol)
                    n = broker.offsets_topic_num_partitions
                    rf = broker.offsets_topic_replication_factor
                    assignment = await create_topic(
                        zk,
                        OFFSETS_TOPIC,
                        n,
                        max(1, min(rf, len(broker_ids))),
                        random.Random(f"{sc.seed}/offsets"),
                        broker_ids=broker_ids,
                    )
                    predict(OFFSETS_TOPIC, assignment)
            finally:
                await zk.stop_async()
            return leaders

        leaders_now: dict[tuple[str, int], int] = self.system.run(go)
        return leaders_now

    def _consumer_id(self, name: str, origin: float, at_s: float) -> str:
        from zk_registry.layout import make_consumer_id

        rng = random.Random(f"{self.scenario.seed}/{name}")
        return make_consumer_id(
            self.scenario.group.id,
            self.system.hostname(),
            int(origin * 1000 + at_s * 1000),
            f"{rng.getrandbits(64):016x}",
        )

    # ---------------------------------------------------------------- run

    def run(self) -> ProtocolResult:
        """Run the scenario under this protocol; always tears down what it started."""
        sc = self.scenario
        wall0 = self.system.monotonic()
        status = "failed"
        try:
            self._run()
            self._check_brokers()
            status = "degraded" if self.lost_hosts or self.lost_brokers else "completed"
        except KeyboardInterrupt:
            status = "interrupted"
            self.interrupted = True
            raise
        except StopSimulation as stop:  # the sim's online checks found a violation
            status = "stopped"
            self.notes.append(f"stopped at its first invariant violation: {stop.violation}")
        finally:
            # An interruption that comes while the run is ending (its teardown, its
            # logs' summary) still leaves a result: the manifest then says the
            # protocol was interrupted instead of leaving it out.
            late: KeyboardInterrupt | None = None
            summary = RunSummary()
            try:
                try:
                    self._teardown()
                except StopSimulation as stop:  # found as the run ended; it is raised once
                    status = "stopped"
                    self.notes.append(f"stopped at its first invariant violation: {stop.violation}")
                    self._teardown()
                self._gather_logs()
                if not self.interrupted:
                    self._restore_zookeeper()
                if self.summarize_logs:
                    summary = summarize(self._read_events())
            except KeyboardInterrupt as exc:
                late = exc
                status = "interrupted"
                self.interrupted = True
            self.result = ProtocolResult(
                self.protocol, status, summary, self.system.monotonic() - wall0, self.notes
            )
            if late is not None:
                raise late
        del sc
        return self.result

    def _read_events(self) -> Any:
        """This protocol's events, wherever the run directory is."""
        loc = self.storage.location
        stats = ReadStats()  # damage is the comparison's to judge: the summary reads around it
        if loc.is_url:
            return loc.read_events(f"{self.protocol}/events", stats)
        return read_run_events(self.dir / "events", stats)

    def _gather_logs(self) -> None:
        """Bring spooled logs into the run directory; record where every log went."""
        ctx = self.ctx
        if ctx is None:
            return
        try:
            self.storage_report = collect(ctx, self.placement_report.get("actors", {}))
        except Exception as exc:  # never lose the run's result over the bookkeeping
            first = (str(exc).strip().splitlines() or [""])[0]
            note = f"event logs could not all be gathered: {type(exc).__name__}: {first}"
            self.notes.append(note)
            self.storage_report = {"error": note}
        for actor, why in self.storage_report.get("missing", {}).items():
            self.notes.append(
                f"the event log of {actor} is not in the run directory: {why.get('reason')}"
            )

    def _run(self) -> None:
        sc = self.scenario
        loc = self.storage.location
        if loc.is_url:  # --force: this protocol's old logs go, not appended to
            for old_url in loc.list_files(f"{self.protocol}/events", ".msgpack"):
                loc.delete(old_url)
        else:
            events_dir = self.dir / "events"
            if events_dir.exists():
                for old in events_dir.glob("*.msgpack"):
                    old.unlink()
            events_dir.mkdir(parents=True, exist_ok=True)
        # Emulated time 0 is a little ahead, so every actor is up by then.
        leaders = self._create_topics(",".join(self.zk_hosts), self._chroot())
        plan = sc.action_plan()
        # A legacy member that a fault cuts off ZooKeeper (crash, pause,
        # partition) talks to it through a fault proxy of its own.
        crashers = {
            m
            for a in plan
            if a.action in ("crash", "pause", "network_partition")
            for m in a.members
        }
        members = list(sc.all_members())
        n_hosts = sc.host_count
        self.member_host = {m: sc.host_of(m) for m in members}
        origin = self.system.wall()  # provisional: fixed once every actor is up
        ctx = self._context(leaders, origin)
        clock = ctx.clock()
        log = ctx.writer("orchestrator", clock, node=self.system.hostname(), tap=self.tap)
        self._log = log
        try:
            delivery = self.delivery_mode()
            log.emit(
                EventKind.RUN_STARTED,
                detail=json.dumps(
                    {
                        "scenario": sc.name,
                        "seed": sc.seed,
                        "time_scale": sc.time_scale,
                        # What the checkers allow and the report explains.
                        "commit_mode": delivery.key,
                        "allows_loss": delivery.allows_loss,
                        "guarantee": delivery.guarantee,
                    }
                ),
            )
            # Each broker reads its replicas and the leaders from ZooKeeper at start;
            # the controller election waits until every broker is registered.
            self.ctx = ctx
            for b in range(sc.cluster.brokers):
                self.brokers[b] = self._new_broker(b, ctx)
            system = self.system
            system.get([h.start.remote(False) for h in self.brokers.values()], 120)
            system.get([h.start_controller.remote() for h in self.brokers.values()], 120)
            topics = {t.name: t.partitions for t in sc.topics if t.name in sc.producer.topics}
            self.producer = system.spawn(
                "producer",
                (
                    0,
                    ctx,
                    topics,
                    sc.producer.rate_per_s,
                    sc.producer.partitioner,
                    sc.producer.batch_size,
                    sc.producer.explicit_partition,
                    self.brokers,
                ),
                options=system.actor_options(sc.placement, "producer"),
            )
            host_opts = system.actor_options(sc.placement, "consumer_hosts")
            self.hosts = [
                system.spawn("consumer_host", (i, ctx, self.brokers), options=host_opts)
                for i in range(n_hosts)
            ]
            system.get([h.start.remote() for h in self.hosts], 120)
            self.placement_report = system.measure_nodes(
                {
                    **{f"broker-{b}": a for b, a in self.brokers.items()},
                    "producer-0": self.producer,
                    **{f"host-{i}": h for i, h in enumerate(self.hosts)},
                }
            )
            self.placement_report["members"] = {
                m: f"host-{h}" for m, h in sorted(self.member_host.items())
            }
            # Every actor is up: fix emulated time 0 a moment from now, everywhere.
            origin = system.wall() + 0.5
            system.get(
                [
                    a.set_origin.remote(origin)
                    for a in [*self.brokers.values(), self.producer, *self.hosts]
                ],
                60,
            )
            log.release(clock.rebase(origin))
            wait = clock.wall_at(0.0) - system.monotonic()
            if wait > 0:
                system.sleep(wait)
            system.get(self.producer.start.remote(), 60)
            launch = Launch(origin, frozenset(crashers))
            self.join(sc.initial_members(), launch, 0.0)
            i = 0
            while i < len(plan):
                action = plan[i]
                self._wait_until(clock, action.at_s * 1000.0, sc)
                if action.action == "join":
                    # Joins of one instant start together (one call per host).
                    j = i
                    while (
                        j + 1 < len(plan)
                        and plan[j + 1].action == "join"
                        and plan[j + 1].at_s == action.at_s
                    ):
                        j += 1
                    burst = plan[i : j + 1]
                    for a in burst:
                        timeline.record(self, a, log)
                    self.join([m for a in burst for m in a.members], launch, action.at_s)
                    i = j + 1
                else:
                    timeline.apply(self, action, launch, log)
                    i += 1
                self._coordinator_snapshot(action.action, clock.now_ms())
                log.flush()
            self._wait_until(clock, sc.duration_s * 1000.0, sc)
            self._coordinator_snapshot("end", clock.now_ms())
            produced = system.get(self.producer.stop.remote(), 60)
            log.emit(
                EventKind.ACTION_APPLIED, reason="producer_stopped", count=int(produced["produced"])
            )
            self._drain(clock, sc)
        finally:
            log.emit(EventKind.RUN_FINISHED)
            log.close()
            self._log = None

    # ------------------------------------------------------------- timeline

    def host_of(self, name: str) -> Any:
        """The live host actor of a member (``None`` if its host is gone)."""
        h = self.member_host.get(name)
        if h is None or h in self.dead_hosts:
            return None
        return self.hosts[h]

    def crash_host(self, index: int) -> None:
        """Kill a consumer-host actor: every member on it dies without a goodbye.

        Its legacy members' ZooKeeper connections drop with the process, without
        a closeSession, so the server expires their sessions after the timeout.
        """
        self.dead_hosts.add(index)
        self.killed_actors.add(f"host-{index}")
        self.system.kill(self.hosts[index], no_restart=True)
        self._members_died(index, "host_crash")

    def add_partitions(self, topic: str, total: int) -> None:
        """Grow a topic, as ``kafka-topics.sh --alter --partitions`` does (AdminUtils).

        The new assignment goes to ``/brokers/topics/<topic>``; the controller
        brings the new partitions online, the producer and the consumers learn
        the new count.
        """
        from zk_registry.controller import add_partitions

        sc = self.scenario

        async def go() -> None:
            zk = self.system.zk_client(
                ",".join(self.zk_hosts), 10.0, chroot=self._chroot(), auth=self.zk_auth
            )
            await zk.start_async()
            try:
                await add_partitions(
                    zk,
                    topic,
                    total,
                    list(range(sc.cluster.brokers)),
                    random.Random(f"{sc.seed}/add/{topic}/{total}"),
                )
            finally:
                await zk.stop_async()

        self.system.run(go)
        calls = [
            self.hosts[h].update_partitions.remote(topic, total)
            for h in range(len(self.hosts))
            if h not in self.dead_hosts
        ]
        if self.producer is not None:
            calls.append(self.producer.update_partitions.remote(topic, total))
        self.system.get(calls, 120)

    def _admin(self, step: Callable[[Any], Awaitable[_T]]) -> _T:
        """Run one admin step on a ZooKeeper session of its own (as the admin tool does)."""

        async def go() -> _T:
            zk = self.system.zk_client(
                ",".join(self.zk_hosts), 10.0, chroot=self._chroot(), auth=self.zk_auth
            )
            await zk.start_async()
            try:
                return await step(zk)
            finally:
                await zk.stop_async()

        result: _T = self.system.run(go)
        return result

    def create_topic(self, topic: str, partitions: int, replication_factor: int) -> None:
        """``kafka-topics.sh --create`` (``AdminUtils.createTopic`` over the live brokers).

        The controller's TopicChangeListener brings the partitions online and
        logs ``topic_created`` (reason ``timeline``); the consumer hosts and the
        producer are told the count as for :meth:`add_partitions` (members learn
        it at their next metadata refresh). A placement error (more replicas
        than live brokers) is a note, as the tool's error message.
        """
        from emulator.placement import AdminOperationError
        from zk_registry.brokers import create_topic, read_topic_assignment

        rng = random.Random(f"{self.scenario.seed}/create/{topic}")

        async def step(zk: Any) -> bool:
            if await read_topic_assignment(zk, topic) is not None:
                return False  # TopicExistsException (e.g. a deletion not carried out)
            await create_topic(zk, topic, partitions, replication_factor, rng, reason="timeline")
            return True

        try:
            created: bool = self._admin(step)
        except AdminOperationError as exc:
            self.notes.append(f"create_topic {topic}: {exc}")
            return
        if not created:
            self.notes.append(f'create_topic {topic}: Topic "{topic}" already exists.')
            return
        calls = [
            self.hosts[h].update_partitions.remote(topic, partitions)
            for h in range(len(self.hosts))
            if h not in self.dead_hosts
        ]
        if self.producer is not None:
            calls.append(self.producer.update_partitions.remote(topic, partitions))
        self.system.get(calls, 120)

    def delete_topic(self, topic: str) -> bool:
        """``kafka-topics.sh --delete``: the marker ``/admin/delete_topics/<topic>``.

        What follows is the controller's (``delete.topic.enable``). Returns
        whether the marker was written (``False``: already marked).
        """
        from zk_registry.topics import request_topic_deletion

        marked: bool = self._admin(lambda zk: request_topic_deletion(zk, topic))
        return marked

    def join(self, names: Sequence[str], launch: Launch, at_s: float) -> None:
        """Start members on their hosts (one call per host)."""
        sub = self.scenario.subscription()
        by_host: dict[int, list[MemberSpec]] = {}
        legacy = self.protocol == "zookeeper"
        for name in names:
            index = int(name.rsplit("-", 1)[1])
            spec = MemberSpec(
                name,
                self._consumer_id(name, launch.origin, at_s) if legacy else name,
                sub,
                use_proxy=legacy and name in launch.crashers,
                index=index,
                bootstrap=index % self.scenario.cluster.brokers,
                zk_latency_ms=self.scenario.group.zk_latency_of(name, self.scenario.seed)
                if legacy
                else 0.0,
                topic_pattern=self.scenario.group.topic_pattern,
                topic_filter=self.scenario.group.topic_filter,
                pattern_streams=self.scenario.group.streams_per_consumer,
                protocol=self._start_protocol(name),
            )
            if self.member_host[name] in self.dead_hosts:
                continue  # its host is gone (a lost node): it cannot start
            by_host.setdefault(self.member_host[name], []).append(spec)
            self.live_members.add(name)
        self.gather(
            {h: self.hosts[h].add_consumers.remote(specs) for h, specs in by_host.items()}, 300
        )

    def _start_protocol(self, name: str) -> str | None:
        """The protocol ``name`` starts on when the group starts mixed (``[group].mixed``);
        ``None``: the run's."""
        group = self.scenario.group
        if group.mixed_to is None or name not in group.mixed_members:
            return None
        if spec(self.protocol).generation == "zookeeper":
            return None  # noted in the manifest
        protocol = switched_protocol(self.protocol, group.mixed_to)
        return None if protocol == self.protocol else protocol

    def gather(self, calls: dict[int, Any], timeout: float) -> dict[int, Any]:
        """Results of one call per consumer host; a host found dead is recorded as lost.

        A host actor dies unasked when its node leaves the Ray cluster (a
        machine lost): the run goes on without it, as a Kafka group goes on
        without a crashed machine's consumers.
        """
        out: dict[int, Any] = {}
        for i, ref in calls.items():
            try:
                out[i] = self.system.get(ref, timeout)
            except self.system.ActorDied as exc:
                self._host_lost(i, exc)
        return out

    def _host_lost(self, index: int, exc: BaseException) -> None:
        """Record that consumer host ``index`` died without being asked to."""
        if index in self.dead_hosts:
            return
        self.dead_hosts.add(index)
        self.lost_hosts.add(index)
        node = self.placement_report.get("actors", {}).get(f"host-{index}")
        why = type(exc).__name__
        note = (
            f"consumer host {index} was lost ({why}; node {str(node)[:12] or '?'}): "
            f"its members died with it"
        )
        self.notes.append(note)
        if self._log is not None:
            self._log.emit(
                EventKind.FAULT_INJECTED,
                reason="host_lost",
                detail=json.dumps({"host": index, "node": node, "error": why}),
                group=self.scenario.group.id,
            )
        self._members_died(index, "host_lost")

    def _members_died(self, index: int, reason: str) -> None:
        """``consumer_crashed`` for every live member of host ``index`` (the host died)."""
        for name in sorted(n for n, h in self.member_host.items() if h == index):
            if name in self.live_members:
                self.live_members.discard(name)
                if self._log is not None:
                    self._log.emit(
                        EventKind.CONSUMER_CRASHED,
                        member=name,
                        group=self.scenario.group.id,
                        reason=reason,
                    )

    def _live_indices(self) -> list[int]:
        return [i for i in range(len(self.hosts)) if i not in self.dead_hosts]

    def _live_stats(self) -> dict[str, Any]:
        stats: list[dict[str, Any]] = []
        for i in self._live_indices():
            try:
                stats.append(self.system.peek(self.hosts[i], "stats", 60))
            except self.system.ActorDied as exc:
                self._host_lost(i, exc)
        out: dict[str, Any] = {"protocol": self.protocol}
        for key in (
            "members",
            "processed",
            "rebalances",
            "attempts",
            "conflicts",
            "gave_up",
            "owned",
        ):
            out[key] = sum(int(s[key]) for s in stats)
        if self.producer is not None:
            with contextlib.suppress(Exception):
                produced = self.system.peek(self.producer, "stats", 10)
                out["produced"] = int(produced["produced"])
        return out

    def _wait_until(self, clock: Any, emu_ms: float, sc: Scenario) -> None:
        """Sleep until emulated time ``emu_ms``, updating the live status meanwhile.

        The status poll (a Ray call to every host) only runs when there is
        time for it, so a timeline action is applied on time.
        """
        while True:
            now = clock.now_ms()
            if now >= emu_ms:
                return
            remaining = clock.wall_seconds(emu_ms - now)
            if remaining > 0.6:
                st = self._live_stats()
                st.update(emu_s=now / 1000.0, duration_s=sc.duration_s, phase="running")
                self.status(st)
                remaining = clock.wall_seconds(emu_ms - clock.now_ms())
                self.system.sleep(max(0.0, min(0.5, remaining - 0.1)))
            else:
                self.system.sleep(max(0.0, remaining))

    def _drain(self, clock: Any, sc: Scenario) -> None:
        """Let the consumers finish the backlog, bounded in time."""
        ends: dict[tuple[str, int], int] = {}
        system = self.system
        for r in system.get([b.log_end_offsets.remote() for b in self.brokers.values()], 60):
            ends.update(r)
        budget = max(30.0, sc.wall_duration_s)
        deadline = system.monotonic() + budget
        while system.monotonic() < deadline:
            hw: dict[tuple[str, int], int] = {}
            calls = {i: self.hosts[i].progress.remote() for i in self._live_indices()}
            for r in self.gather(calls, 60).values():
                for tp, end in r.items():
                    hw[tp] = max(hw.get(tp, 0), end)
            behind = sum(max(0, e - hw.get(tp, 0)) for tp, e in ends.items())
            st = self._live_stats()
            st.update(
                emu_s=clock.now_ms() / 1000.0,
                duration_s=sc.duration_s,
                phase="draining",
                behind=behind,
            )
            self.status(st)
            if behind == 0:
                return
            system.sleep(0.25)
        self.notes.append(f"drain stopped after {budget:.0f} s with messages unprocessed")

    def _restore_zookeeper(self) -> None:
        """Restart ensemble members this run's faults left down, for the next protocol."""
        ens = self.ensemble
        if ens is None:
            return
        down = [i for i in range(ens.size) if not ens.member_alive(i)]
        for i in down:
            with contextlib.suppress(Exception):
                ens.restart_member(i, wait=False)
        if down:
            with contextlib.suppress(Exception):
                ens.wait_ready(timeout=60.0)

    # ------------------------------------------------------------- brokers

    def _new_broker(self, broker_id: int, ctx: RunContext) -> Any:
        """A broker actor, named so that clients find it again after a restart."""
        from actors.metadata import broker_actor_name

        name = broker_actor_name(self.run_id, self.protocol, broker_id)
        system = self.system
        deadline = system.monotonic() + 30.0
        while True:
            try:
                return system.spawn(
                    "broker",
                    (
                        broker_id,
                        ctx,
                        [],
                        BASE_BROKER_PORT + broker_id,
                        None,
                        {t.name: t.partitions for t in self.scenario.topics},
                    ),
                    name=name,
                    options=system.actor_options(self.scenario.placement, "brokers"),
                )
            except ValueError:  # the killed actor's name is not released yet
                if system.monotonic() > deadline:
                    raise
                system.sleep(0.1)

    def crash_broker(self, broker_id: int) -> None:
        """Kill a broker's actor without a goodbye (``kill -9``).

        Its ZooKeeper session is not closed: ``/brokers/ids/<id>`` goes when the
        session expires, and then the controller moves its leaderships. Emits
        nothing (the caller records the fault).
        """
        handle = self.brokers.pop(broker_id, None)
        if handle is not None:
            self.killed_actors.add(f"broker-{broker_id}")
            self.system.kill(handle, no_restart=True)

    def _check_brokers(self) -> None:
        """Record brokers that died without the timeline asking (a lost node)."""
        for b, h in list(self.brokers.items()):
            try:
                self.system.get(h.stats.remote(), 60)
            except self.system.ActorDied as exc:
                self.lost_brokers.add(b)
                self.brokers.pop(b, None)
                self.notes.append(f"broker {b} was lost ({type(exc).__name__}): not asked for")
            except self.system.GetTimeout:
                continue  # slow is not lost

    def restart_broker(self, broker_id: int) -> None:
        """Start a new broker actor with the same id (a no-op if it is running).

        The new broker comes back with empty replicas (the emulator keeps logs
        in memory), re-registers in ZooKeeper (waiting out the old session's
        ephemeral node, ZOOKEEPER-1740 handling) and catches up from the
        leaders; it rejoins the ISRs as it reaches their high watermarks. This
        call returns once the actor is created and its clock set; the
        registration goes on in the background.
        """
        if broker_id in self.brokers:
            return
        ctx = self.ctx
        assert ctx is not None, "a broker restarts only in a running run"
        origin = ctx.origin_wall
        for other in list(self.brokers.values()):
            with contextlib.suppress(Exception):
                origin = float(self.system.get(other.origin_wall.remote(), 10))
                break
        handle = self._new_broker(broker_id, ctx)
        self.system.get(handle.set_origin.remote(origin), 60)
        self._broker_starts.append(handle.start.remote())
        self.brokers[broker_id] = handle

    def _coordinator_snapshot(self, after: str, emu_ms: float) -> None:
        """Record the coordinators' request counts now (modern protocols; bounded)."""
        if self.protocol == "zookeeper" or not self.brokers:
            return
        by_kind: dict[str, int] = defaultdict(int)
        gap_max = 0.0
        hist = [0] * (len(HEARTBEAT_GAP_BOUNDS_MS) + 1)
        for st in self._broker_stats(10.0).values():
            coord = st.get("coordinator") or {}
            for kind, n in coord.get("by_kind", {}).items():
                by_kind[kind] += int(n)
            gap_max = max(gap_max, float(coord.get("heartbeat_gap_max_ms") or 0.0))
            for i, n in enumerate(coord.get("heartbeat_gap_histogram") or []):
                hist[i] += int(n)
        self.resources["coordinator"].append(
            {
                "after": after,
                "t_emu_ms": round(emu_ms, 1),
                "requests_by_kind": dict(sorted(by_kind.items())),
                "heartbeat_gap_max_ms": gap_max,
                # gaps per bucket, cumulative over the run so far, summed over brokers
                "heartbeat_gap_bounds_ms": list(HEARTBEAT_GAP_BOUNDS_MS),
                "heartbeat_gap_histogram": hist,
            }
        )

    def _broker_stats(self, timeout: float) -> dict[str, dict[str, Any]]:
        """Each live broker's ``stats()``; brokers that do not answer are left out."""
        out: dict[str, dict[str, Any]] = {}
        for b, h in list(self.brokers.items()):
            with contextlib.suppress(Exception):
                out[f"broker-{b}"] = self.system.get(h.stats.remote(), timeout)
        return out

    def _teardown(self) -> None:
        """Stop every actor (they close their logs), bounded in time; then kill them.

        Every call is waited for until one deadline: :data:`TEARDOWN_S`
        normally, :data:`INTERRUPTED_TEARDOWN_S` after an interruption (Ctrl-C,
        SIGTERM, SIGHUP), so the CLI exits within seconds. The hosts stop one
        after the other normally (their members leave in turn, as a run always
        ended), all at once after an interruption. An actor that has not
        stopped by the deadline is killed and its log stays as far as it was
        flushed (whole blocks, unclosed).
        """
        budget = INTERRUPTED_TEARDOWN_S if self.interrupted else TEARDOWN_S
        system = self.system
        deadline = system.monotonic() + budget
        actors = self.resources["actors"]
        live = self._live_indices()
        if not self.interrupted:  # what each host cost, in case its stop times out
            for i, st in self._wait_all({i: self.hosts[i].stats.remote() for i in live}, deadline):
                actors[f"host-{i}"] = st
        stops: dict[Any, Any] = {}
        for i in live:
            stops[f"host-{i}"] = self.hosts[i].stop.remote()
            if not self.interrupted:
                actors.update(self._wait_all(stops, deadline))
                stops = {}
        if self.producer is not None:
            stops["producer-0"] = self.producer.stop.remote()
        actors.update((k, st) for k, st in self._wait_all(stops, deadline) if k.startswith("host-"))
        if not self.interrupted:
            actors.update(self._broker_stats(max(1.0, deadline - system.monotonic())))
        # Controllers first, so stopping the brokers moves no leader.
        ctl = {b: h.stop_controller.remote() for b, h in self.brokers.items()}
        list(self._wait_all(ctl, deadline))
        list(self._wait_all({b: h.stop.remote() for b, h in self.brokers.items()}, deadline))
        for a in [*self.hosts, *self.brokers.values(), self.producer]:
            if a is not None:
                with contextlib.suppress(Exception):
                    system.kill(a, no_restart=False)

    def _wait_all(self, calls: dict[Any, Any], deadline: float) -> Iterator[tuple[Any, Any]]:
        """``(key, result)`` of each call that answered by ``deadline``; failures are skipped."""
        if not calls:
            return
        refs = {ref: key for key, ref in calls.items()}
        ready = self.system.wait(list(refs), deadline - self.system.monotonic())
        for ref in ready:
            with contextlib.suppress(Exception):
                yield refs[ref], self.system.get(ref, 0)


def _run_protocol(
    engine: RunEngine,
    scenario: Scenario,
    protocol: str,
    out_path: Path,
    run_id: str,
    status: Status | None,
    validate_events: bool,
    manifest: dict[str, Any],
    save: Callable[[], None],
) -> ProtocolResult:
    """One protocol's run on ``engine``; its entries go into ``manifest`` (then ``save``)."""
    mine = engine.begin_protocol(protocol)
    pr = ProtocolRun(
        scenario,
        protocol,
        out_path,
        run_id,
        mine.zk_hosts,
        status,
        validate_events,
        mine.storage,
        system=mine.system,
    )
    pr.ensemble = mine.ensemble
    pr.zk_base = mine.zk_base
    pr.zk_auth = mine.zk_auth
    pr.tap = mine.tap
    pr.summarize_logs = mine.summarize_logs
    try:
        return pr.run()
    finally:
        try:
            engine.protocol_done(pr, manifest)
        finally:  # the protocol's entry even when an interruption lands in protocol_done
            _record_protocol(pr, protocol, manifest, save)


def _record_protocol(
    pr: ProtocolRun, protocol: str, manifest: dict[str, Any], save: Callable[[], None]
) -> None:
    """``pr``'s entry in ``manifest`` (and its storage report), then ``save``."""
    r = pr.result
    if r is None:
        return
    manifest["protocols"][protocol] = {
        "status": r.status,
        "wall_s": round(r.wall_s, 2),
        "counts": r.summary.to_dict(),
        "notes": r.notes,
        "events_dir": f"{protocol}/events",
        "placement": pr.placement_report,
        "lost_hosts": sorted(pr.lost_hosts),
        "lost_brokers": sorted(pr.lost_brokers),
        "killed_actors": sorted(pr.killed_actors),
        "resources": pr.resources,
    }
    storage_info = manifest.setdefault("event_storage", {"protocols": {}})
    storage_info["protocols"][protocol] = pr.storage_report
    save()


def run_scenario(
    scenario: Scenario,
    protocols: list[str],
    out_dir: Path | str,
    *,
    zookeeper: str | None = None,
    ray_address: str | None = None,
    status: Status | None = None,
    validate_events: bool = False,
    shared_storage: bool = False,
    zk_auth: Any = None,
    keep_zk_data: bool = False,
    command: list[str] | None = None,
    engine: RunEngine | None = None,
) -> list[ProtocolResult]:
    """Run a scenario under each protocol; write the manifest; return the results.

    Args:
        scenario: the validated scenario.
        protocols: protocols to run, in order.
        out_dir: the run directory: a local path, or a URL pyarrow understands
            (``s3://``, ``gs://``, ``hdfs://``, ``file://``; see :mod:`emulator.storage`).
        zookeeper: a ZooKeeper connect string; ``None`` starts an embedded one.
        ray_address: a Ray cluster to join; ``None`` starts a local Ray.
        status: live-progress callback.
        validate_events: check every event against the schema while writing.
        shared_storage: a local ``out_dir`` is the same directory on every
            node (a shared mount): actors write there directly.
        zk_auth: a :class:`zk_registry.auth.ZkAuth`: every znode of the run gets
            a digest ACL for it alone.
        keep_zk_data: on a user's ``--zookeeper``, keep each protocol's chroot
            (by default it is deleted once the protocol's run ended).
        command: what the manifest records as the command (default this
            process's argv; an experiment's trial names the experiment's).
        engine: the engine (:class:`actors.engine.RunEngine`); ``None``: the real
            one, :class:`actors.real_engine.RealEngine`, with the ZooKeeper, Ray
            and storage arguments above (which only it reads).

    Raises:
        RunError: the run could not be set up (one-line message).
    """
    for p in protocols:
        if p not in RUN_PROTOCOLS:
            raise RunError(f"unknown protocol {p!r} (choose from {', '.join(RUN_PROTOCOLS)})")
        if spec(p).generation == "share" and not kafka_version_at_least(
            scenario.kafka_version, SHARE_GROUPS_SINCE
        ):
            raise RunError(
                f"share groups (KIP-932) need kafka_version 4.0 or later; the scenario "
                f'{scenario.name} has {scenario.kafka_version} (set kafka_version = "4.2")'
            )
    if engine is None:
        from actors.real_engine import RealEngine

        engine = RealEngine(zookeeper, ray_address, shared_storage, zk_auth, keep_zk_data)
    try:
        loc = resolve(out_dir)
        loc.makedirs()
    except StorageError as exc:
        raise RunError(str(exc)) from None
    out_path = Path(loc.root)  # the local run directory (unused for a URL)
    mpath: Path | Location = loc if loc.is_url else out_path / "manifest.json"
    run_id = engine.run_id(scenario)
    manifest: dict[str, Any] = {
        "run_id": run_id,
        "status": "running",
        "engine": {"name": engine.name},
        "scenario": scenario.to_dict(),
        "scenario_source": str(scenario.source),
        "seed": scenario.seed,
        "protocols": {},
        "protocols_planned": list(protocols),
        "versions": versions(),
        "command": redacted_argv(command if command is not None else sys.argv),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": socket.gethostname(),
        "event_log_layout": "<protocol>/events/*.msgpack",
    }
    write_manifest(mpath, manifest)
    results: list[ProtocolResult] = []
    try:
        engine.start(scenario, loc, out_path, manifest, partial(write_manifest, mpath, manifest))

        save = partial(write_manifest, mpath, manifest)

        def one(protocol: str, status: Status | None, save: Callable[[], None]) -> ProtocolResult:
            return _run_protocol(
                engine,
                scenario,
                protocol,
                out_path,
                run_id,
                status,
                validate_events,
                manifest,
                save,
            )

        # The sim engine may run its protocols' worlds in forked processes (they
        # share nothing: each has its own loop, streams and ensemble).
        workers = min(int(getattr(engine, "workers", 1)), len(protocols))
        if workers > 1:
            from actors.sim.forked import run_forked

            results = run_forked(protocols, workers, one, status, manifest, save)
        else:
            results = [one(protocol, status, save) for protocol in protocols]
        manifest["status"] = overall_status([r.status for r in results])
    except KeyboardInterrupt:
        manifest["status"] = "interrupted"
        raise
    except RunError as exc:
        manifest["status"] = "failed"
        manifest["error"] = str(exc)
        raise
    except Exception as exc:
        manifest["status"] = "failed"
        manifest["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
        raise
    finally:
        manifest["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        write_manifest(mpath, manifest)
        engine.close()
    return results
