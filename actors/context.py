"""What every actor of one run needs to know, passed by value to each of them."""

from __future__ import annotations

import resource
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from actors.spool import log_target
from emulator.clock import ScaledClock
from emulator.eventlog import EventWriter
from emulator.events import Event
from emulator.settings import RunSettings
from zk_registry.auth import ZkAuth


@dataclass(frozen=True)
class RunContext:
    """The shared, immutable facts of one protocol's run.

    Attributes:
        run_id: unique id of the run (all protocols of one ``run`` share it).
        protocol: the protocol under test (``zookeeper`` ...).
        events_dir: where this protocol's ``*.msgpack`` logs go.
        time_scale: wall seconds per emulated second.
        origin_wall: ``time.time()`` at emulated time 0.
        zk_connect: ZooKeeper connect string *with* the run's chroot.
        zk_hosts: the ensemble members' ``host:port`` (no chroot), for proxies.
        seed: the scenario's seed.
        group: the consumer group id.
        kafka: the scenario's Kafka configs by Kafka name.
        leaders: ``(topic, partition) -> leader broker id``.
        processing_ms_per_message: emulated processing cost.
        validate_events: check every event against the schema (tests).
        storage_mode: where logs go (:mod:`actors.spool`): ``local`` (straight
            into ``events_dir``), ``shared`` (``events_dir`` is shared by every
            node, or, with ``events_url``, a local spool file copied there at
            close) or ``shipped`` (actors on the driver's node write into
            ``events_dir``, the others into a spool the driver fetches).
        events_url: ``shared``: the URL of this protocol's events directory.
        spool_root: the node-local spool root (``""``: each node's default,
            :func:`emulator.storage.default_spool_root`).
        driver_node: ``shipped``: the driver's Ray node id.
        share_release, share_reject: a share consumer's application releases and
            rejects these shares of its records (``[group]``, emulator knobs).
        zk_auth: ``--zk-auth``: the digest identity every ZooKeeper client of
            the run authenticates as; its znodes are readable by it alone.
        origin_fixed: whether ``origin_wall`` is final. The orchestrator hands
            out a provisional origin and fixes it once every actor is up; until
            then each actor's log holds its events, and ``set_origin`` writes
            them restamped on the final time 0 (start-up shows as negative times).
        engine: which engine runs the actors: ``real`` (Ray, the machine's
            clocks) or ``sim`` (one process on a virtual clock).
        mono, wall: the clock sources (seconds) :meth:`clock` and :meth:`writer`
            read; ``None``: the machine's (``time.monotonic``, ``time.time``).
            They belong to the process that set them: a pickled context (what
            Ray ships to an actor) leaves them out, and ``engine="sim"`` then
            refuses to make a clock rather than fall back to the machine's.
    """

    run_id: str
    protocol: str
    events_dir: str
    time_scale: float
    origin_wall: float
    zk_connect: str
    zk_hosts: tuple[str, ...]
    seed: int
    group: str
    kafka: dict[str, object] = field(default_factory=dict)
    leaders: dict[tuple[str, int], int] = field(default_factory=dict)
    processing_ms_per_message: float = 1.0
    validate_events: bool = False
    partitions_per_topic: dict[str, int] = field(default_factory=dict)
    assignor: str = "range"
    static_membership: bool = False
    # The application's commit pattern (emulator knobs, [group] in the scenario).
    manual_commit: str = "none"
    rebalance_listener: str = "none"
    share_release: float = 0.0
    share_reject: float = 0.0
    # [group].topic_pattern: the group subscribes by pattern (its clients' metadata
    # requests then name no topic to create).
    topic_pattern: str | None = None
    # The run's members switch group protocol (an ``upgrade`` action): brokers host
    # groups that convert between classic and consumer (online migration).
    mixed_protocols: bool = False
    storage_mode: str = "local"
    events_url: str = ""
    spool_root: str = ""
    driver_node: str = ""
    # --zk-auth: every znode of the run is created with a digest ACL for it
    zk_auth: ZkAuth | None = None
    # False while origin_wall is provisional: the actors' logs hold their
    # events until set_origin fixes time 0, then write them restamped.
    origin_fixed: bool = True
    engine: str = "real"
    # The sim engine's clock sources; never pickled (see __getstate__).
    mono: Callable[[], float] | None = field(default=None, repr=False, compare=False)
    wall: Callable[[], float] | None = field(default=None, repr=False, compare=False)

    def __getstate__(self) -> dict[str, Any]:
        """The pickled state: every field but the clock sources (they stay in this process)."""
        state = dict(self.__dict__)
        state["mono"] = None
        state["wall"] = None
        return state

    @cached_property
    def settings(self) -> RunSettings:
        """The run's Kafka settings, typed and resolved once from :attr:`kafka`."""
        return RunSettings.resolve(self.protocol, self.kafka)

    def clock(self) -> ScaledClock:
        """This run's emulated clock, on the context's sources (the machine's by default).

        Raises:
            ValueError: a ``sim`` context without its sources (e.g. one that was pickled).
        """
        if self.engine != "real" and (self.mono is None or self.wall is None):
            raise ValueError(f"a {self.engine!r} run context needs its mono and wall sources")
        return ScaledClock(
            self.time_scale,
            self.origin_wall,
            mono=self.mono or time.monotonic,
            wall=self.wall or time.time,
        )

    def writer(
        self,
        actor: str,
        clock: ScaledClock | None = None,
        *,
        node: str | None = None,
        tap: Callable[[Event], None] | None = None,
    ) -> EventWriter:
        """An event writer for one actor, in this run's events directory.

        Its ``t_emu_ms`` comes from ``clock`` (default: :meth:`clock`), and its
        ``ts_wall``/``ts_mono`` stamps and flush interval from that clock's sources.
        ``node`` is the machine name stamped on every event (default: this
        machine's, ``socket.gethostname()``); ``tap`` sees every event written
        (:class:`~emulator.eventlog.EventWriter`).
        """
        c = clock or self.clock()
        path, on_close = log_target(self, actor)
        return EventWriter(
            path,
            run_id=self.run_id,
            node=socket.gethostname() if node is None else node,
            actor=actor,
            protocol=self.protocol,
            emu_clock=c.now_ms,
            wall_clock=c.wall,
            mono_clock=c.mono,
            validate=self.validate_events,
            on_close=on_close,
            hold=not self.origin_fixed,
            tap=tap,
        )

    def scaled_s(self, kafka_ms: float) -> float:
        """Wall seconds for a duration in Kafka milliseconds."""
        return kafka_ms / 1000.0 * self.time_scale


def process_usage() -> dict[str, float]:
    """This process's CPU seconds (user + system), peak RSS (MiB) and wall clock.

    Every Ray actor is its own worker process, so called inside an actor
    this is that actor's cost.
    """
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "cpu_s": round(ru.ru_utime + ru.ru_stime, 3),
        "peak_rss_mib": round(ru.ru_maxrss / 1024.0, 1),  # Linux: KiB
        "wall": time.time(),
    }
