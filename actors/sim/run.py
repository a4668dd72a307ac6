"""``SimEngine``: a scenario's run on the simulation engine (``--engine sim``).

:func:`actors.orchestrator.run_scenario` with this :class:`~actors.engine.RunEngine`
runs every protocol of a scenario in this process, each in its own simulated
world (design §0, §4): a :class:`~emulator.sim.loop.SimEventLoop`, the run's
random :class:`~emulator.sim.rng.Streams` (seeded with the run's seed, the same
for every protocol, so a protocol's run does not depend on which others ran),
a simulated network, a simulated ZooKeeper ensemble of the scenario's size,
and the real engine's actor shells and orchestrator on top. The event logs
go to the run directory as the real engine's do; the manifest's ``engine``
block records the engine's version and, per protocol, a digest of the logs,
so that a replay (the same scenario, seed and engine version) can be checked
to be byte-identical.

Two options serve exploration (design §5, ``rebalance-emu explore``):

* a schedule :class:`~emulator.sim.profile.Profile` (latencies, drawn tie
  order, actor stalls; the baseline changes nothing);
* ``check``: the online invariant :class:`~emulator.sim.monitor.Monitor` on
  every event writer of the run (the shells' through ``SimIO.tap``, the
  orchestrator's through ``EngineParts.tap``); the first violation stops the
  protocol's run at that instant (its status is ``stopped``) and every
  violation, with what the monitor counted, goes into the manifest. The
  monitor reads events as they are emitted, so it also sees what a killed
  actor had not yet flushed to its log (an emulator choice: the offline
  checkers, reading the logs, do not).
"""

from __future__ import annotations

import contextvars
import gc
import hashlib
import json
import logging
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from actors.broker import BrokerCore
from actors.consumer_host import ConsumerHostCore
from actors.engine import EngineParts
from actors.io import MakeCoordinatorFactory
from actors.producer import ProducerCore
from actors.run_files import EventStorage, RunError
from actors.sim.io import SimIO
from actors.sim.system import HOSTNAME, SimActorSystem, SimHandle
from emulator.eventlog import EventWriter
from emulator.scenario import Scenario
from emulator.sim import ENGINE_NAME, engine_version
from emulator.sim.loop import SimEventLoop
from emulator.sim.monitor import Monitor, StopSimulation, Violation
from emulator.sim.network import RAY_LINK_LATENCY, Network
from emulator.sim.profile import BASELINE, Profile, stall_cap_ns
from emulator.sim.rng import Streams
from emulator.storage import Location
from zk_registry.client import ZkClient
from zk_registry.sim.server import SimEnsemble
from zk_registry.timeouts import tick_time_for

if TYPE_CHECKING:
    from actors.orchestrator import ProtocolRun


class _Shell(Protocol):
    """What the engine touches of a shell it kills: its event log."""

    events: EventWriter


SIM_GC_THRESHOLD2 = 1000
"""The cyclic collector's third threshold while a world runs (CPython's default: 10).

A simulated world holds every actor's state in this process (a 10,000-member
run: ~0.4 GiB) and makes objects that outlive two young collections by the
million (timers, pending calls), which by default sets off a full collection
each time they reach a quarter of the heap: 66 full collections, 16 of the 70
CPU seconds of a 10,000-member KIP-848 run. At 1000 a full collection comes at
most every 1000 middle ones (~7 million allocations): one in that run, 58 CPU
seconds in all, for 25% more peak memory (the cycles left for longer). The
schedule does not depend on it (same log digests)."""

SIM_GC_THRESHOLD0 = 10_000
"""The cyclic collector's first threshold while a world runs (CPython's default: 700).

A world allocates and frees containers by the hundred thousand a second of
virtual time (handles, futures, event dicts, messages), almost all freed by
their reference counts; at 700 the young generation was collected ~230 times
per explored seed for little garbage (~5% of its CPU), at 10,000 a few times.
The schedule does not depend on it (same log digests)."""

SIM_LOGGERS = ("zk_registry.sim",)
"""The loggers of the simulated parts, written to the run's ``sim-engine.log``."""


def log_digest(events_dir: Path) -> str:
    """sha256 over ``(file name, bytes)`` of a protocol's event logs, in name order."""
    h = hashlib.sha256()
    for path in sorted(events_dir.glob("*.msgpack")):
        h.update(path.name.encode() + b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


class SimEngine:
    """The simulation engine.

    Args:
        seed: the run's seed; ``None``: the scenario's.
        profile: how the schedule is drawn (default: the baseline).
        check: run the online invariant monitor and stop a protocol's run at
            its first violation.
        coordinator_factory: replaces the brokers' group coordinators (a
            test's planted bug), or ``None``.
        summaries: read each protocol's logs back at its end for its result's
            summary (the manifest's ``counts``); ``explore`` runs without, and
            sums up only the runs it keeps.
        workers: protocols simulated at once, each in a forked worker process
            (:mod:`actors.sim.forked`; the same logs as one after the other).
            A checked run (``check``) keeps its monitors in this process, so it
            runs its protocols one after the other whatever this says, and so
            does a run with a ``coordinator_factory``.
    """

    name = ENGINE_NAME

    def __init__(
        self,
        seed: int | None = None,
        *,
        profile: Profile = BASELINE,
        check: bool = False,
        coordinator_factory: MakeCoordinatorFactory | None = None,
        summaries: bool = True,
        workers: int = 1,
    ) -> None:
        self.seed = seed
        self._workers = max(1, int(workers))
        self.profile = profile
        self.check = check
        self.coordinator_factory = coordinator_factory
        self.summaries = summaries
        self.monitors: dict[str, Monitor] = {}
        """Per protocol, its run's monitor (with ``check``)."""
        self._scenario: Scenario | None = None
        self._storage: EventStorage | None = None
        self._handler: logging.Handler | None = None
        # each protocol's actor system (its loop is the protocol's world), kept
        # after the run, closed, for inspection
        self.systems: dict[str, SimActorSystem] = {}
        self._cpu0: dict[str, float] = {}  # the process's CPU seconds when each world began
        self._gc_threshold: tuple[int, int, int] | None = None  # to restore at close

    @property
    def workers(self) -> int:
        """How many protocols run at once (see the class's ``workers``)."""
        if self.check or self.coordinator_factory is not None:
            return 1
        return self._workers

    def _seed(self, scenario: Scenario) -> int:
        return scenario.seed if self.seed is None else self.seed

    def run_id(self, scenario: Scenario) -> str:
        """``sim-<scenario>-s<seed>-<digest of the scenario>``: the same for a replay."""
        doc = json.dumps(scenario.to_dict(), sort_keys=True, default=str)
        digest = hashlib.sha256(doc.encode()).hexdigest()[:8]
        profile = "" if self.profile.is_baseline else f"-{self.profile.name}"
        return f"sim-{scenario.name}-s{self._seed(scenario)}{profile}-{digest}"

    def start(
        self,
        scenario: Scenario,
        loc: Location,
        out_path: Path,
        manifest: dict[str, Any],
        save: Callable[[], None],
    ) -> None:
        """Check the run can be simulated; record the engine in the manifest."""
        if loc.is_url:
            raise RunError("--engine sim writes a local run directory, not a URL")
        self._scenario = scenario
        self._log_to(out_path / "sim-engine.log")
        seed = self._seed(scenario)
        session_ms = int(scenario.kafka_config("zookeeper.session.timeout.ms"))
        tick = tick_time_for(session_ms, scenario.time_scale)
        manifest["seed"] = seed
        manifest["engine"] = {
            "name": ENGINE_NAME,
            "version": engine_version(),
            "seed": seed,
            "log_digest": {},
        }
        if self.check or not self.profile.is_baseline:
            manifest["engine"]["profile"] = self.profile.to_dict()
            manifest["engine"]["checks"] = {}
        manifest["zookeeper"] = {
            "embedded": "sim",
            "members": scenario.cluster.zookeeper_ensemble,
            "tick_time_ms": tick,
            "scaled_session_timeout_ms": session_ms * scenario.time_scale,
        }
        manifest["event_storage"] = {
            "mode": "local",
            "url": loc.display(),
            "spool": "",
            "driver_node": HOSTNAME,
            "protocols": {},
        }
        save()
        self._storage = EventStorage("local", loc, "", HOSTNAME)

    def begin_protocol(self, protocol: str) -> EngineParts:
        """A fresh world: loop, streams, network, ensemble, actor system."""
        scenario = self._scenario
        if scenario is None or self._storage is None:
            raise RuntimeError("SimEngine.begin_protocol before start")
        profile = self.profile
        self._cpu0[protocol] = time.process_time()
        if self._gc_threshold is None:
            self._gc_threshold = gc.get_threshold()
            t0, t1, t2 = self._gc_threshold
            gc.set_threshold(max(t0, SIM_GC_THRESHOLD0), t1, max(t2, SIM_GC_THRESHOLD2))
        streams = Streams(self._seed(scenario))
        ties = streams.stream("explore/ties") if profile.ties else None
        late_table = profile.timer_late
        late = None if late_table is None else streams.stream("explore/timers")
        loop = SimEventLoop(
            tie_breaker=None if ties is None else partial(ties.getrandbits, 32),
            timer_lateness=None
            if late is None or late_table is None
            else partial(late_table.draw, late),
        )
        session_ms = int(scenario.kafka_config("zookeeper.session.timeout.ms"))
        ensemble = SimEnsemble(
            loop,
            streams,
            scenario.cluster.zookeeper_ensemble,
            tick_time_for(session_ms, scenario.time_scale),
            link_latency=profile.zk_latency,
            commit_latency=profile.zk_commit_latency,
        )
        ensemble.start()

        # The actors and the admin clients need the io, which needs the system:
        # these closures read ``io`` when they are called, after it is made.
        def broker(*args: Any) -> BrokerCore:
            return BrokerCore(*args, io=io)

        def producer(*args: Any) -> ProducerCore:
            return ProducerCore(*args, io=io)

        def host(*args: Any) -> ConsumerHostCore:
            return ConsumerHostCore(*args, io=io)

        def admin_zk(connect: str, timeout_s: float, **options: Any) -> ZkClient:
            return io.zk_client(connect, timeout_s, **options)

        network = Network(
            loop, streams, latency=profile.ray_latency or RAY_LINK_LATENCY, fifo=profile.ray_fifo
        )
        system = SimActorSystem(
            loop,
            streams,
            network,
            {"broker": broker, "producer": producer, "consumer_host": host},
            admin_zk,
        )
        monitor: Monitor | None = None
        if self.check:

            def stop(v: Violation) -> None:
                if not loop.is_closed():  # not at the end-of-run checks
                    system.halt(StopSimulation(v))

            monitor = Monitor(strict=True, on_violation=stop)
            self.monitors[protocol] = monitor
        io = SimIO(ensemble, system, tap=monitor, coordinator_factory=self.coordinator_factory)
        system.on_kill.append(lambda h: _killed(h, ensemble))
        if profile.stall_every is not None and profile.stall_for is not None:
            _Stalls(system, streams, profile, stall_cap_ns(_session_timeouts_ms(scenario))).start()
        self.systems[protocol] = system
        return EngineParts(
            zk_hosts=list(ensemble.hosts),
            zk_base="",
            ensemble=ensemble,
            storage=self._storage,
            system=system,
            tap=monitor,
            summarize_logs=self.summaries,
        )

    def protocol_done(self, run: ProtocolRun, manifest: dict[str, Any]) -> None:
        """Close the protocol's world; record its logs' digest and the loop's errors."""
        system = self.systems.get(run.protocol)
        if system is None or system.loop.is_closed():
            return
        loop = system.loop
        errors = list(loop.errors)
        loop.close()
        engine = manifest.setdefault("engine", {})
        monitor = self.monitors.get(run.protocol)
        if monitor is not None:
            monitor.finish(run.protocol, cut_short=system.halted)
            engine.setdefault("checks", {})[run.protocol] = check_record(monitor, run.protocol)
        engine.setdefault("log_digest", {})[run.protocol] = log_digest(run.dir / "events")
        engine.setdefault("virtual_s", {})[run.protocol] = round(loop.time(), 3)
        # what the world cost this process (its worker's, with --parallel): the
        # figure to compare on a loaded machine, where wall times mislead
        engine.setdefault("cpu_s", {})[run.protocol] = round(
            time.process_time() - self._cpu0.get(run.protocol, 0.0), 3
        )
        if errors:
            run.notes.append(
                f"{len(errors)} error(s) in simulated actors' callbacks; the first: "
                f"{errors[0].actor}: {errors[0].message}: {errors[0].exception!r}"[:400]
            )

    def close(self) -> None:
        """Close any world left open (an interrupted run); stop the engine's log.

        The cyclic collector's thresholds are the process's again.
        """
        for system in self.systems.values():
            if not system.loop.is_closed() and not system.loop.is_running():
                system.loop.close()
        if self._gc_threshold is not None:
            gc.set_threshold(*self._gc_threshold)
            self._gc_threshold = None
        if self._handler is not None:
            for name in SIM_LOGGERS:
                logger = logging.getLogger(name)
                logger.removeHandler(self._handler)
                logger.propagate = True
            self._handler.close()
            self._handler = None

    def _log_to(self, path: Path) -> None:
        """What the simulated kazoo clients log goes to the run directory, not the terminal.

        On the real engine kazoo's log lines (a reconnect given up when a crashed
        member's client is stopped, ...) land in the Ray actors' logs; here they
        go to ``sim-engine.log`` beside the manifest.
        """
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(path)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        for name in SIM_LOGGERS:
            logger = logging.getLogger(name)
            logger.addHandler(handler)
            logger.propagate = False
        self._handler = handler


MAX_RECORDED_VIOLATIONS = 20
"""Violations of one protocol's run written into its manifest (the first ones)."""


def check_record(monitor: Monitor, protocol: str) -> dict[str, Any]:
    """What the manifest says of a protocol's online checks.

    ``violations`` are the first :data:`MAX_RECORDED_VIOLATIONS` (``violation_count``
    says how many there were; the first stopped the run when it came before
    the end); ``counted`` the allowed findings per kind; ``unchecked`` the
    kinds the run may not show that the monitor does not look for (the
    offline checkers do).
    """
    found = [v for v in monitor.violations if v.protocol == protocol]
    return {
        "violation_count": len(found),
        "violations": [v.to_dict() for v in found[:MAX_RECORDED_VIOLATIONS]],
        "counted": monitor.counted(protocol),
        "unchecked": list(monitor.unchecked(protocol)),
    }


def _session_timeouts_ms(scenario: Scenario) -> list[float]:
    """The run's session timeouts as its protocols use them (scaled), in ms."""
    keys = (
        "zookeeper.session.timeout.ms",
        "session.timeout.ms",
        "group.consumer.session.timeout.ms",
    )
    return [float(scenario.kafka_config(k)) * scenario.time_scale for k in keys]


class _Stalls:
    """Now and then one live actor, drawn, is busy: its callbacks wait (design §5.1).

    The times between stalls and their lengths are drawn from the profile's
    tables on the stream ``explore/stall``; a stall is at most ``cap_ns``. An
    actor is live once built and until killed; the candidates are taken in
    spawn order.
    """

    def __init__(self, system: SimActorSystem, streams: Streams, profile: Profile, cap_ns: int):
        if profile.stall_every is None or profile.stall_for is None:
            raise ValueError("a profile without stalls")
        self.system = system
        self.rng = streams.stream("explore/stall")
        self.every = profile.stall_every
        self.length = profile.stall_for
        self.cap_ns = cap_ns
        self.count = 0

    def start(self) -> None:
        """Schedule the first stall."""
        self._next()

    def _next(self) -> None:
        loop = self.system.loop
        at = loop.now_ns + max(1, self.every.draw(self.rng))
        loop.call_at_ns(at, self._stall, context=contextvars.Context())

    def _stall(self) -> None:
        live = [h for h in self.system.handles if h.instance is not None and not h.actor.dead]
        if live:
            h = live[self.rng.randrange(len(live))]
            length = min(self.length.draw(self.rng), self.cap_ns)
            self.system.loop.stall_until_ns(h.actor, self.system.loop.now_ns + length)
            self.count += 1
        self._next()


def _killed(handle: SimHandle, ensemble: SimEnsemble) -> None:
    """A killed actor: its ZooKeeper connections close (no closeSession), its log is cut."""
    ensemble.abort_clients_of(handle.actor)
    shell: _Shell | None = handle.instance
    if shell is not None:  # killed before it was built: it has no log
        shell.events.abandon()
