#!/usr/bin/env python
"""Benchmark: the cost of ONE membership change in a legacy (0.8.2, ZooKeeper) consumer group.

What it measures (kafka-protocols.md A5, A7): for a group of C legacy
consumers on one topic of P partitions (one stream each, range assignment,
Kafka's defaults: ``rebalance.backoff.ms`` 2000, ``rebalance.max.retries`` 4,
``zookeeper.session.timeout.ms`` 6000, scaled by ``--time-scale``):

1. an embedded standalone ZooKeeper (127.0.0.1) is started once;
2. per size point, in a fresh chroot: B brokers register, the topic is
   created, and C consumers (each with its own ZooKeeper session) start in one
   :class:`~actors.consumer_host.ConsumerHostCore` (or ``--hosts`` of them)
   in this process's asyncio loop, with no fetching (``brokers={}``,
   ``leaders={}``); the bench waits until the group has *settled*: every
   member's state is ``stable`` with no request outstanding, the union of the
   members' registries equals the range assignment of the live members, and
   every ``/owners/<t>/<p>`` znode exists and holds the expected thread id.
   A group that goes quiet without settling (members that gave up after 4
   attempts own nothing until the next ZooKeeper event, A7) is nudged by
   rewriting the topic znode with the same data (a data watch fires on every
   member); each nudge is counted as a ``kick``;
3. the raw kazoo operation rate of this process against the same server is
   measured while the group is idle (one plain KazooClient issuing async
   gets, creates, sets, deletes in concurrent batches; also the same gets
   through :class:`zk_registry.client.ZkClient` + asyncio, and spread over the
   consumers' own sessions);
4. ONE member (the median consumer id) leaves gracefully; the bench measures
   the time until the group has settled again (wall and emulated = wall /
   time_scale), every ZooKeeper read, write and watch notification of all
   consumers' clients (their :class:`~zk_registry.client.ZkOpCounter`), the
   machines' stats deltas (syncedRebalance runs, attempts, conflicts,
   give-ups), and from the event log the per-attempt operation counts;
5. session health: negotiated session timeouts, connection drops and
   expirations (kazoo's warnings, the ZkClients' counters, the event log),
   event-loop tick lag and the scheduling lag of a probe thread (how late a
   kazoo thread can be to send its ping); peak RSS of this process per point.

Every wait is bounded; sessions, hosts and the ZooKeeper process are cleaned
up on error and on Ctrl-C (SIGINT/SIGTERM). Results: a table on stdout and
``tests/bench/results/legacy_group.json``. See ``tests/bench/README.md``.

Usage::

    .venv/bin/python tests/bench/bench_legacy_group.py            # 10x100 50x500 200x1000 500x2000
    .venv/bin/python tests/bench/bench_legacy_group.py --quick    # 10x100 50x500, fewer raw ops
    .venv/bin/python tests/bench/bench_legacy_group.py --sizes 20x200,100x800 --time-scale 0.5
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import math
import os
import platform
import random
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient  # type: ignore[import-untyped]

from actors.consumer_host import TICK_S, ConsumerHostCore
from actors.context import RunContext
from actors.legacy_member import LegacyMember
from emulator.eventlog import read_run_events
from emulator.host.core import MemberSpec
from emulator.legacy.assignors import AssignmentStrategy, assign_all
from emulator.legacy.consumer import ConsumerState
from zk_registry.brokers import create_topic, register_broker, setup_common_paths
from zk_registry.client import ZkClient
from zk_registry.layout import (
    decode_owner,
    make_consumer_id,
    owners_topic_path,
    topic_path,
)
from zk_registry.server import (
    HOST,
    ZooKeeperEnsemble,
    ZooKeeperError,
    four_letter_word,
    parse_srvr,
    tick_time_for,
)

REPO = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO / "tests" / "bench" / "results" / "legacy_group.json"
FULL_SIZES: tuple[tuple[int, int], ...] = ((10, 100), (50, 500), (200, 1000), (500, 2000))
QUICK_SIZES: tuple[tuple[int, int], ...] = ((10, 100), (50, 500))
KAFKA_DEFAULTS: dict[str, object] = {
    "zookeeper.session.timeout.ms": 6000,
    "zookeeper.sync.time.ms": 2000,
    "rebalance.backoff.ms": 2000,
    "rebalance.max.retries": 4,
    "partition.assignment.strategy": "range",
    "auto.commit.enable": True,
}
TOPIC = "bench"
GROUP = "bench-group"
POLL_S = 0.05
MAX_KICKS = 5

T0 = time.monotonic()
PROBE: LagProbe | None = None  # set by run_all
LOGS: LogCounter | None = None
#: Set by the first SIGINT/SIGTERM. Every wait of the bench checks it, so the run
#: stops even if the task's cancellation is slow to arrive in a flooded loop.
STOP = threading.Event()
DONE = threading.Event()
#: A cleanup that has not finished this long after the first signal is cut short
#: (ZooKeeper stopped, partial JSON written, exit 130).
STOP_GRACE_S = 300.0


class Interrupted(BaseException):
    """The run was interrupted (a BaseException: no ``except Exception`` swallows it)."""


def check_stop() -> None:
    if STOP.is_set():
        raise Interrupted()


def log(msg: str) -> None:
    """One progress line."""
    print(f"[{time.monotonic() - T0:8.1f}s] {msg}", flush=True)


# =========================================================================== probes


class LagProbe:
    """A thread that sleeps ``period`` in a loop and records how late it wakes.

    The lateness is what any other thread of this process (a kazoo connection
    thread about to send its ping) can suffer: GIL and CPU contention.
    """

    def __init__(self, period_s: float = 0.02) -> None:
        self.period_s = period_s
        self.samples: deque[tuple[float, float]] = deque(maxlen=200_000)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lag-probe", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)

    def _run(self) -> None:
        while not self._stop.is_set():
            t = time.monotonic()
            time.sleep(self.period_s)
            now = time.monotonic()
            self.samples.append((now, (now - t - self.period_s) * 1000.0))

    def window(self, t0: float, t1: float) -> dict[str, float | None]:
        """Lateness (ms) of the wake-ups between monotonic ``t0`` and ``t1``."""
        lags = sorted(lag for ts, lag in list(self.samples) if t0 <= ts <= t1)
        if not lags:
            return {"max_ms": None, "p99_ms": None, "p50_ms": None, "samples": 0}
        return {
            "max_ms": round(lags[-1], 1),
            "p99_ms": round(lags[min(len(lags) - 1, int(0.99 * len(lags)))], 1),
            "p50_ms": round(lags[len(lags) // 2], 2),
            "samples": len(lags),
        }


class LogCounter(logging.Handler):
    """Counts WARNING+ records (kazoo's "Connection dropped", "Session has expired" ...)."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.counts: Counter[str] = Counter()
        self.shown = 0

    def emit(self, record: logging.LogRecord) -> None:
        try:
            msg = record.getMessage()
        except Exception:
            msg = str(record.msg)
        key = f"{record.name}: {_normalize(msg)}"
        self.counts[key] += 1
        if self.shown < 5:
            self.shown += 1
            print(f"    (log {record.levelname}) {record.name}: {msg[:160]}", file=sys.stderr)

    def snapshot(self) -> Counter[str]:
        return Counter(self.counts)


def _normalize(msg: str) -> str:
    msg = re.sub(r"0x[0-9a-f]+", "0x…", msg)
    msg = re.sub(r"\d+", "N", msg)
    return msg[:120]


def _proc_status() -> dict[str, int]:
    out: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "Threads"):
                out[key] = int(value.split()[0])
    return out


def _reset_peak_rss() -> bool:
    """Reset VmHWM (Linux ``clear_refs`` 5) so the next peak is this point's alone."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _pid_rss_mb(pid: int | None) -> float | None:
    if pid is None:
        return None
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return None


def _mntr(port: int) -> dict[str, str]:
    with contextlib.suppress(OSError):
        text = four_letter_word(HOST, port, "mntr", timeout=5.0)
        return dict(line.split("\t", 1) for line in text.splitlines() if "\t" in line)
    return {}


class PySpy:
    """``py-spy record --gil`` of this process over one window (``--py-spy``), summarized.

    ``--gil`` keeps only samples of the thread holding the GIL: in a GIL-bound
    process that is where the CPU goes.
    """

    def __init__(self, out: Path, rate: int = 50) -> None:
        self.out = out
        self.rate = rate
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> bool:
        exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        if not Path(exe).exists():
            log("  py-spy not found (pip install py-spy): not profiling")
            return False
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [
                exe,
                "record",
                "--pid",
                str(os.getpid()),
                "--format",
                "raw",
                "--gil",
                "--nolineno",
                "--nonblocking",
                "--rate",
                str(self.rate),
                "--output",
                str(self.out),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        time.sleep(1.0)  # attach
        return True

    def stop(self) -> dict[str, Any] | None:
        if self.proc is None:
            return None
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=60.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10.0)
        self.proc = None
        return summarize_profile(self.out)


#: Components by source file (first match wins), for attributing a sample to the
#: leaf-most frame that belongs to a known component; stdlib frames (threading,
#: selectors, socket, json) are charged to their caller.
PROFILE_COMPONENTS: tuple[tuple[str, str], ...] = (
    ("tests/bench/", "bench itself (settle polls, probes)"),
    ("actors/consumer_host.py", "host tick loop (consumer_host._run)"),
    ("emulator/host/core.py", "host tick loop (HostCore.tick/send_fetches)"),
    ("emulator/host/fetch_client.py", "host tick loop (HostCore.tick/send_fetches)"),
    ("emulator/host/shell.py", "member shell (fetch_requests/process)"),
    ("emulator/host/legacy_shell.py", "legacy member (apply/_perform)"),
    ("actors/legacy_member.py", "legacy member (apply/_perform)"),
    ("emulator/eventlog.py", "event log (emit/pack)"),
    ("emulator/events.py", "event log (emit/pack)"),
    ("emulator/legacy/", "legacy state machine + assignor"),
    ("zk_registry/layout.py", "znode payload codecs (JSON)"),
    ("zk_registry/legacy_driver.py", "legacy driver"),
    ("zk_registry/client.py", "ZkClient/ZkUtils asyncio glue"),
    ("kazoo/protocol/", "kazoo protocol + connection loop"),
    ("kazoo/handlers/", "kazoo handlers (AsyncResult, queues, select)"),
    ("kazoo/client.py", "kazoo client API (_call)"),
    ("kazoo/", "kazoo other"),
    ("asyncio/", "asyncio machinery"),
)


def _thread_of(frames: list[str]) -> str:
    joined = ";".join(frames[:8])
    if "zk_loop (kazoo/protocol/connection.py)" in joined:
        return "kazoo connection threads"
    if "_thread_worker (kazoo/handlers/" in joined:
        return "kazoo worker threads"
    if "Thread._bootstrap" in joined:
        return "other threads"
    return "main thread (asyncio loop)"


def _component_of(frames: list[str]) -> str:
    for frame in reversed(frames):
        for pattern, name in PROFILE_COMPONENTS:
            if f"({pattern}" in frame:
                return name
    return "other"


def summarize_profile(path: Path) -> dict[str, Any] | None:
    """Where the GIL went: by thread kind, by component, top self and inclusive frames.

    Reads a py-spy ``raw`` (collapsed) file: one ``root;...;leaf count`` per line.
    """
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    total = 0
    threads: Counter[str] = Counter()
    components: Counter[str] = Counter()
    pairs: Counter[str] = Counter()
    self_: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    for line in lines:
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        thread, comp = _thread_of(frames), _component_of(frames)
        threads[thread] += n
        components[comp] += n
        pairs[f"{thread} / {comp}"] += n
        self_[frames[-1]] += n
        for f in set(frames):
            incl[f] += n

    def pct(c: Counter[str], k: int) -> list[tuple[str, float]]:
        return [(f, round(100.0 * v / total, 1)) for f, v in c.most_common(k)] if total else []

    return {
        "file": str(path),
        "samples_with_gil": total,
        "by_thread_pct": dict(pct(threads, 10)),
        "by_component_pct": dict(pct(components, 20)),
        "by_thread_and_component_pct": dict(pct(pairs, 15)),
        "top_self_pct": pct(self_, 20),
        "top_inclusive_pct": pct(incl, 40),
    }


def thread_cpu_s() -> Counter[str]:
    """CPU seconds (user + system) of this process's threads, by kind of thread.

    Kinds: the main thread (the asyncio loop: hosts, machines, driver, ZkClient
    glue), kazoo connection threads (one per session: socket I/O, pings),
    kazoo worker threads (two per session: completions and watch callbacks),
    executors, the lag probe.
    """
    kinds: dict[int, str] = {}
    for t in threading.enumerate():
        target = getattr(t, "_target", None)
        q = getattr(target, "__qualname__", "") if target is not None else ""
        if t is threading.main_thread():
            kind = "main thread (asyncio loop)"
        elif "zk_loop" in q:
            kind = "kazoo connection threads"
        elif "_thread_worker" in q:
            kind = "kazoo worker threads"
        elif t.name == "lag-probe":
            kind = "lag probe"
        else:
            kind = "executors and other"
        if t.native_id is not None:
            kinds[t.native_id] = kind
    out: Counter[str] = Counter()
    hz = os.sysconf("SC_CLK_TCK")
    with contextlib.suppress(OSError):
        for task in Path("/proc/self/task").iterdir():
            with contextlib.suppress(OSError, ValueError, IndexError):
                rest = (task / "stat").read_text().rpartition(")")[2].split()
                out[kinds.get(int(task.name), "executors and other")] += (
                    int(rest[11]) + int(rest[12])
                ) / hz
    return out


def pid_cpu_s(pid: int | None) -> float | None:
    """CPU seconds of another process (the ZooKeeper JVM), all threads."""
    if pid is None:
        return None
    with contextlib.suppress(OSError, ValueError, IndexError):
        rest = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")
    return None


def machine_cpu() -> tuple[int, int]:
    """``(busy, total)`` jiffies of all cores from ``/proc/stat``."""
    with contextlib.suppress(OSError, ValueError):
        parts = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        idle = parts[3] + (parts[4] if len(parts) > 4 else 0)
        return sum(parts) - idle, sum(parts)
    return 0, 0


@dataclass
class CpuMark:
    """CPU counters at one instant, to report a window's CPU use as % of one core."""

    t: float
    threads: Counter[str]
    zk: float | None
    machine: tuple[int, int]

    @classmethod
    def now(cls, zk_pid: int | None) -> CpuMark:
        return cls(time.monotonic(), thread_cpu_s(), pid_cpu_s(zk_pid), machine_cpu())

    def since(self, before: CpuMark) -> dict[str, Any]:
        dt = max(1e-6, self.t - before.t)
        by = {
            k: round(100.0 * (v - before.threads.get(k, 0.0)) / dt, 1)
            for k, v in self.threads.items()
        }
        zk = (
            None
            if self.zk is None or before.zk is None
            else round(100.0 * (self.zk - before.zk) / dt, 1)
        )
        busy = self.machine[0] - before.machine[0]
        total = self.machine[1] - before.machine[1]
        cores = os.cpu_count() or 1
        busy_cores_pct = 100.0 * cores * busy / total if total else None
        mine = sum(by.values()) + (zk or 0.0)
        return {
            "machine_busy_pct_of_all_cores": round(100.0 * busy / total, 1) if total else None,
            # Anything else on the machine (other jobs): busy cores - this process - ZooKeeper.
            "other_processes_pct_of_one_core": None
            if busy_cores_pct is None
            else round(max(0.0, busy_cores_pct - mine), 1),
            "loadavg_1m": round(os.getloadavg()[0], 2),
            "this_process_pct_of_one_core": round(sum(by.values()), 1),
            "by_thread_kind_pct": dict(sorted(by.items(), key=lambda kv: -kv[1])),
            "zookeeper_jvm_pct": zk,
        }


async def wait_machine_quiet(bound_s: float, zk_pid: int | None) -> dict[str, Any]:
    """Wait (at most ``bound_s``) until other processes use < 25% of a core over 2 s.

    The machine may be shared; the change is measured when it is quietest.
    """
    t0 = time.monotonic()
    last: dict[str, Any] = {}
    while True:
        before = CpuMark.now(zk_pid)
        await asyncio.sleep(2.0)
        last = CpuMark.now(zk_pid).since(before)
        check_stop()
        other = last.get("other_processes_pct_of_one_core")
        waited = time.monotonic() - t0
        if other is None or other < 25.0 or waited >= bound_s:
            if other is not None and other >= 25.0:
                log(f"  machine still busy: other processes at {other:.0f}% of a core")
            return {
                "waited_s": round(waited, 1),
                "other_processes_pct_of_one_core": other,
                "loadavg_1m": last.get("loadavg_1m"),
            }


# =========================================================================== raw rates


def raw_kazoo_rates(hosts: str, n: int, batch: int) -> dict[str, float]:
    """Raw kazoo async op rate from one plain client in this process (ops/s).

    ``n`` gets of one znode, then ``n`` creates, sets and deletes of distinct
    znodes, each issued ``batch`` at a time (issue the batch, wait for all);
    then 200 sequential gets for the round-trip latency. Every wait is bounded.
    """
    kz = KazooClient(hosts=hosts, timeout=10.0)
    kz.start(timeout=15.0)
    base = f"/rawbench-{os.getpid()}-{random.getrandbits(32):08x}"
    try:
        kz.ensure_path(base)
        kz.create(f"{base}/x", b"x" * 64)

        def timed(issue: Callable[[int], Any]) -> float:
            t = time.perf_counter()
            for start in range(0, n, batch):
                pending = [issue(i) for i in range(start, min(n, start + batch))]
                for r in pending:
                    r.get(timeout=60.0)
            return n / (time.perf_counter() - t)

        out = {
            "get_per_s": timed(lambda i: kz.get_async(f"{base}/x")),
            "create_per_s": timed(lambda i: kz.create_async(f"{base}/n{i}", b"0" * 16)),
            "set_per_s": timed(lambda i: kz.set_async(f"{base}/n{i}", b"1" * 16)),
            "delete_per_s": timed(lambda i: kz.delete_async(f"{base}/n{i}")),
        }
        t = time.perf_counter()
        for _ in range(200):
            kz.get(f"{base}/x")
        out["sync_get_latency_ms"] = (time.perf_counter() - t) / 200 * 1000.0
        return {k: round(v, 2) for k, v in out.items()}
    finally:
        with contextlib.suppress(Exception):
            kz.delete(base, recursive=True)
        with contextlib.suppress(Exception):
            kz.stop()
        with contextlib.suppress(Exception):
            kz.close()


def spread_get_rate(clients: Sequence[Any], path: str, n: int, batch: int) -> float:
    """Async gets spread round-robin over many kazoo clients (the consumers' sessions)."""
    t = time.perf_counter()
    k = 0
    for start in range(0, n, batch):
        pending = []
        for _ in range(start, min(n, start + batch)):
            pending.append(clients[k % len(clients)].get_async(path))
            k += 1
        for r in pending:
            r.get(timeout=60.0)
    return round(n / (time.perf_counter() - t), 2)


async def zkclient_rates(client: ZkClient, path: str, n: int, batch: int) -> dict[str, float]:
    """The emulator's path: ``ZkClient.get_async`` awaited in asyncio (gathered; sequential)."""
    t = time.perf_counter()
    for start in range(0, n, batch):
        await asyncio.wait_for(
            asyncio.gather(*(client.get_async(path) for _ in range(start, min(n, start + batch)))),
            120.0,
        )
    gathered = n / (time.perf_counter() - t)
    m = 200
    t = time.perf_counter()
    for _ in range(m):
        await asyncio.wait_for(client.get_async(path), 30.0)
    latency = (time.perf_counter() - t) / m * 1000.0
    return {"zkclient_get_per_s": round(gathered, 2), "zkclient_get_latency_ms": round(latency, 3)}


# =========================================================================== the group


class ResyncTickHost(ConsumerHostCore):
    """EXPERIMENT (``--patch-host-tick``): the host with the tick fix proposed for it.

    ``ConsumerHostCore._run`` advances ``next_tick`` by TICK_S per tick and
    never resynchronises: once the loop is busy it runs the missed ticks back to
    back (``sleep(0)``), each one a pass over every member and owned
    partition, until it has caught up, and ``tick_lag_max_ms`` reports that
    drift. Here a late tick drops the missed ones instead. Same body otherwise.
    """

    async def _run(self) -> None:
        next_tick = time.monotonic()
        while not self._stop:
            now = self.clock.now_ms()
            lag = (time.monotonic() - next_tick) * 1000.0
            self.tick_lag_max_ms = max(self.tick_lag_max_ms, lag)
            self.core.tick(now)
            next_tick += TICK_S
            mono = time.monotonic()
            if next_tick < mono:  # late: skip the missed ticks
                next_tick = mono + TICK_S
            await asyncio.sleep(next_tick - mono)


@dataclass
class Totals:
    """Summed counters of a set of members at one instant."""

    reads: int = 0
    writes: int = 0
    watch_notifications: int = 0
    m_reads: int = 0
    m_writes: int = 0
    watch_events: int = 0
    rebalances: int = 0
    attempts: int = 0
    conflicts: int = 0
    gave_up: int = 0
    expirations: int = 0
    sessions: int = 0

    def minus(self, other: Totals) -> Totals:
        return Totals(**{k: getattr(self, k) - getattr(other, k) for k in self.__dict__})

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def totals(members: Iterable[LegacyMember]) -> Totals:
    t = Totals()
    for m in members:
        r, w, n = m.zk.counter.snapshot()
        st = m.machine.stats
        t.reads += r
        t.writes += w
        t.watch_notifications += n
        t.m_reads += st.zk_reads
        t.m_writes += st.zk_writes
        t.watch_events += st.watch_events
        t.rebalances += st.rebalances
        t.attempts += st.attempts
        t.conflicts += st.conflicts
        t.gave_up += st.gave_up
        t.expirations += m.zk.expirations
        t.sessions += m.zk.sessions
    return t


@dataclass
class Group:
    """The hosts of one size point and the bench's own admin session."""

    hosts: list[ConsumerHostCore]
    admin: ZkClient
    partitions: int
    backoff_wall_s: float
    all_members: dict[str, LegacyMember] = field(default_factory=dict)  # ever started
    host_of: dict[str, ConsumerHostCore] = field(default_factory=dict)

    def live(self) -> list[LegacyMember]:
        return [m for h in self.hosts for m in h.members.values()]

    def expected(self) -> dict[tuple[str, int], str]:
        subs = {m.machine.consumer_id: {TOPIC: 1} for m in self.live()}
        if not subs:
            return {}
        got = assign_all(AssignmentStrategy.RANGE, subs, {TOPIC: range(self.partitions)})
        return {tp: str(th) for tp, th in got.items()}

    def owned_union(self) -> dict[tuple[str, int], str] | None:
        """Union of the registries; ``None`` if two members claim one partition."""
        out: dict[tuple[str, int], str] = {}
        for m in self.live():
            for tp, th in m.machine.owned.items():
                if tp in out:
                    return None
                out[tp] = th
        return out

    def idle(self) -> bool:
        """No member has a request outstanding or is rebalancing / backing off."""
        return all(
            not m.machine.outstanding
            and m.machine.state in (ConsumerState.STABLE, ConsumerState.GAVE_UP)
            for m in self.live()
        )

    def states(self) -> dict[str, int]:
        return dict(Counter(m.machine.state.value for m in self.live()))

    def in_memory_settled(self, watch_base: dict[str, int] | None) -> bool:
        for m in self.live():
            if m.machine.state is not ConsumerState.STABLE or m.machine.outstanding:
                return False
            if watch_base is not None and m.machine.stats.watch_events <= watch_base[m.name]:
                return False  # has not even seen the change yet
        union = self.owned_union()
        return union is not None and union == self.expected()

    async def zk_owners(self) -> dict[tuple[str, int], str]:
        """Every ``/owners/<topic>/<p>`` znode and its thread id, read by the admin session."""
        path = owners_topic_path(GROUP, TOPIC)
        try:
            names = await asyncio.wait_for(self.admin.get_children_async(path), 30.0)
        except Exception:
            return {}
        out: dict[tuple[str, int], str] = {}
        for start in range(0, len(names), 500):
            chunk = names[start : start + 500]
            got = await asyncio.wait_for(
                asyncio.gather(
                    *(self.admin.get_async(f"{path}/{n}") for n in chunk), return_exceptions=True
                ),
                60.0,
            )
            for n, r in zip(chunk, got, strict=True):
                if isinstance(r, BaseException):
                    continue
                out[(TOPIC, int(n))] = decode_owner(r[0])
        return out


def progress_line(g: Group, what: str, t0: float) -> str:
    now = time.monotonic()
    tt = totals(g.live())
    lag = PROBE.window(now - 10.0, now) if PROBE is not None else {}
    warn = LOGS.counts if LOGS is not None else Counter()
    drops = sum(v for k, v in warn.items() if "Connection dropped" in k)
    expired = sum(v for k, v in warn.items() if "expired" in k)
    return (
        f"  {what}: {now - t0:6.1f}s members={len(g.live())} states={g.states()} "
        f"reads={tt.reads} writes={tt.writes} attempts={tt.attempts} "
        f"thread-lag max {lag.get('max_ms')} ms | kazoo drops {drops} expiries {expired}"
    )


async def report_progress(g: Group, what: str, t0: float) -> None:
    """A progress line every 10 s until cancelled."""
    while True:
        await asyncio.sleep(10.0)
        log(progress_line(g, what, t0))


@dataclass
class SettleResult:
    settled: bool
    detect_s: float | None  # seconds from t0 to the first poll that found the group settled
    zk_verified: bool
    kicks: int
    reason: str
    polls: int


async def wait_settled(
    g: Group,
    t0: float,
    timeout_s: float,
    watch_base: dict[str, int] | None,
    *,
    allow_kicks: bool,
    what: str,
) -> SettleResult:
    """Poll until the group has settled (see module docstring), bounded by ``timeout_s``.

    With ``allow_kicks``, a group that stays idle but unsettled for a quiet
    window (twice the back-off, at least 1 s) is nudged with a same-data write
    of the topic znode, up to :data:`MAX_KICKS` times.
    """
    deadline = t0 + timeout_s
    quiet_s = max(1.0, 2.0 * g.backoff_wall_s)
    idle_since: float | None = None
    kicks = 0
    polls = 0
    last_report = time.monotonic()
    while time.monotonic() < deadline:
        check_stop()
        polls += 1
        now = time.monotonic()
        if g.in_memory_settled(watch_base):
            detect = now - t0
            owners = await g.zk_owners()
            if owners == g.expected() and g.in_memory_settled(watch_base):
                return SettleResult(True, detect, True, kicks, "settled", polls)
            log(f"  {what}: registries settled but ZooKeeper owners differ; polling on")
        if g.idle():
            idle_since = idle_since or now
            if allow_kicks and now - idle_since >= quiet_s and kicks < MAX_KICKS:
                kicks += 1
                log(f"  {what}: idle but not settled {g.states()}; kick {kicks} (topic rewrite)")
                data, _ = await asyncio.wait_for(g.admin.get_async(topic_path(TOPIC)), 30.0)
                await asyncio.wait_for(g.admin.set_async(topic_path(TOPIC), data), 30.0)
                idle_since = None
        else:
            idle_since = None
        if now - last_report >= 10.0:
            last_report = now
            log(progress_line(g, what, t0))
        await asyncio.sleep(POLL_S)
    return SettleResult(False, None, False, kicks, f"timeout after {timeout_s:.0f}s", polls)


# =========================================================================== event log


def analyze_events(events_dir: Path, t0: float, t1: float) -> dict[str, Any]:
    """What the hosts' event logs say about the window ``[t0, t1]`` (monotonic seconds)."""
    kinds: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    attempt_reads: list[int] = []
    attempt_writes: list[int] = []
    attempt_ms: list[float] = []
    session_states: Counter[str] = Counter()
    first_trigger = last_completed = last_attempt_end = None
    with contextlib.suppress(FileNotFoundError):
        for ev in read_run_events(events_dir):
            ts = float(ev.get("ts_mono", 0.0))  # type: ignore[arg-type]
            if not t0 <= ts <= t1:
                continue
            kind = str(ev["kind"])
            kinds[kind] += 1
            if kind == "rebalance_triggered" and first_trigger is None:
                first_trigger = ts - t0
            elif kind == "rebalance_completed":
                last_completed = max(last_completed or 0.0, ts - t0)
            elif kind == "attempt_finished":
                outcomes[str(ev.get("reason", "?")).split(":")[0]] += 1
                attempt_reads.append(int(ev.get("zk_reads", 0) or 0))  # type: ignore[call-overload]
                attempt_writes.append(int(ev.get("zk_writes", 0) or 0))  # type: ignore[call-overload]
                attempt_ms.append(float(ev.get("duration_ms", 0.0) or 0.0))  # type: ignore[arg-type]
                last_attempt_end = max(last_attempt_end or 0.0, ts - t0)
            elif kind == "zk_session_state":
                session_states[str(ev.get("state"))] += 1

    def stat(xs: list[float] | list[int]) -> dict[str, float] | None:
        if not xs:
            return None
        return {
            "mean": round(statistics.fmean(xs), 1),
            "min": min(xs),
            "max": max(xs),
        }

    return {
        "events": dict(kinds),
        "attempt_outcomes": dict(outcomes),
        "per_attempt_reads": stat(attempt_reads),
        "per_attempt_writes": stat(attempt_writes),
        "attempt_duration_emulated_ms": stat(attempt_ms),
        "first_trigger_s": None if first_trigger is None else round(first_trigger, 3),
        "last_rebalance_completed_s": None if last_completed is None else round(last_completed, 3),
        "last_attempt_finished_s": None if last_attempt_end is None else round(last_attempt_end, 3),
        "session_state_events": dict(session_states),
    }


# =========================================================================== one point


def a7_model(c_after: int, partitions: int, brokers: int, leaver_owned: int) -> dict[str, int]:
    """A7 / driver cost of one change if every remaining member needs ONE attempt.

    Per member: watch re-arm (exists + getChildren) 2; getCluster 1 + B;
    own node 1 + getAllBrokers 1 + B; AssignmentContext: own node 1, topic 1,
    getChildren 1, C' member reads, getChildren 1; offsets: one read per
    assigned partition. Writes: delete every owned (the leaver's owner nodes go
    with its session) + create every assigned.
    """
    reads = c_after * (2 + (1 + brokers) + (2 + brokers) + (4 + c_after)) + partitions
    return {"reads": reads, "writes": 2 * partitions - leaver_owned}


async def close_hosts(g: Group) -> None:
    """Fast teardown: silence every member first (no herd), then close the sessions in parallel."""
    members = g.live()
    for m in members:
        m.kill()  # alive = False: no more requests, watches ignored
        m.driver.stop_watches()
    loop = asyncio.get_running_loop()
    pool = ThreadPoolExecutor(64, thread_name_prefix="bench-close")
    try:
        futs = [loop.run_in_executor(pool, m.zk.stop) for m in members]
        if futs:
            await asyncio.wait_for(asyncio.gather(*futs, return_exceptions=True), 180.0)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    for h in g.hosts:
        h.members.clear()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(h.stop(), 30.0)


async def run_point(
    args: argparse.Namespace,
    server: ZooKeeperEnsemble,
    run_id: str,
    work: Path,
    consumers: int,
    partitions: int,
    probe: LagProbe,
    logs: LogCounter,
    point: dict[str, Any],
) -> dict[str, Any]:
    """Set up, start the group, measure raw rates, make one member leave; fill ``point``."""
    scale = float(args.time_scale)
    session_s = 6.0 * scale
    backoff_wall_s = 2.0 * scale
    connect = server.connect_string
    chroot = f"/bench/{run_id}/c{consumers}-p{partitions}"
    point.update({"consumers": consumers, "partitions": partitions, "status": "error"})
    rss_reset = _reset_peak_rss()
    t_point = time.monotonic()
    rng = random.Random(args.seed * 1_000_003 + consumers)
    events_dir = work / f"c{consumers}-p{partitions}" / "events"
    brokers: list[ZkClient] = []
    admin: ZkClient | None = None
    g: Group | None = None
    log_before = logs.snapshot()
    gc_offset = _file_size(work / "zk-gc.log")
    try:
        # ---------------------------------------------------------------- set-up
        log(f"point C={consumers} P={partitions}: set-up (chroot {chroot}, {args.brokers} brokers)")
        root = ZkClient(connect, 10.0)
        await root.start_async()
        try:
            await root.create_persistent_recursive(chroot)
        finally:
            await root.stop_async()
        admin = ZkClient(connect, 10.0, chroot=chroot)
        await admin.start_async()
        await setup_common_paths(admin)
        for b in range(args.brokers):
            zb = ZkClient(connect + chroot, session_s)
            brokers.append(zb)
            await zb.start_async()
            await register_broker(
                zb,
                b,
                "127.0.0.1",
                9092 + b,
                timestamp_ms=int(time.time() * 1000),
                session_timeout_s=session_s,
            )
        await create_topic(
            admin,
            TOPIC,
            partitions,
            min(2, args.brokers),
            rng,
            broker_ids=list(range(args.brokers)),
        )
        ctx = RunContext(
            run_id=run_id,
            protocol="zookeeper",
            events_dir=str(events_dir),
            time_scale=scale,
            origin_wall=time.time(),
            zk_connect=connect + chroot,
            zk_hosts=tuple(server.hosts),
            seed=args.seed,
            group=GROUP,
            kafka=dict(KAFKA_DEFAULTS),
            leaders={},
        )
        host_cls = ResyncTickHost if args.patch_host_tick else ConsumerHostCore
        hosts = [host_cls(i, ctx, {}) for i in range(args.hosts)]
        for h in hosts:
            await h.start()
        g = Group(hosts, admin, partitions, backoff_wall_s)

        # ---------------------------------------------------------------- start the group
        hostname = socket.gethostname()
        base_ms = int(time.time() * 1000)
        specs = [
            MemberSpec(
                f"c-{i:04d}",
                make_consumer_id(
                    GROUP, hostname, base_ms + i, f"{rng.getrandbits(63) | 1 << 63:x}"
                ),
                {TOPIC: 1},
            )
            for i in range(consumers)
        ]
        # add_consumers connects its members one after the other: the bench calls
        # it per member, join_concurrency at a time, so the group starts at about
        # the same time. A member whose start fails (ConnectionLoss under load) is
        # retried twice; the failures are reported.
        n_par = max(1, min(args.join_concurrency, consumers))
        start_timeout = args.start_timeout or (300.0 + 0.012 * consumers * consumers)
        log(
            f"  start: {consumers} consumers join, {n_par} add_consumers calls at a time "
            f"(timeout {start_timeout:.0f}s)"
        )
        zk_pid = server.pids[0]
        cpu_start = CpuMark.now(zk_pid)
        t_start = time.monotonic()
        point["startup"] = {"join_failures": {}}
        failures: Counter[str] = Counter()
        sem = asyncio.Semaphore(n_par)

        async def join(i: int, spec: MemberSpec) -> bool:
            host = hosts[i % len(hosts)]
            async with sem:
                if STOP.is_set():
                    return False
                try:
                    await host.add_consumers([spec])
                    return True
                except Exception as exc:
                    failures[type(exc).__name__] += 1
                    return False

        reporter = asyncio.ensure_future(report_progress(g, "start (joining)", t_start))
        try:
            pending = list(enumerate(specs))
            for _round in range(3):
                ok = await asyncio.wait_for(
                    asyncio.gather(*(join(i, sp) for i, sp in pending)),
                    max(10.0, t_start + start_timeout - time.monotonic()),
                )
                pending = [ip for ip, good in zip(pending, ok, strict=True) if not good]
                check_stop()
                if not pending:
                    break
                log(f"  start: {len(pending)} members failed to start {dict(failures)}; retrying")
                await asyncio.sleep(1.0)
        finally:
            reporter.cancel()
        point["startup"]["join_failures"] = dict(failures)
        for h in hosts:
            for name, m in h.members.items():
                g.all_members[name] = m
                g.host_of[name] = h
        if pending:
            raise RuntimeError(f"{len(pending)} members could not start: {dict(failures)}")
        join_s = time.monotonic() - t_start
        log(f"  start: all {consumers} sessions connected and registered in {join_s:.1f}s")
        remaining = max(10.0, start_timeout - join_s)
        st = await wait_settled(
            g, t_start, remaining + join_s, None, allow_kicks=True, what="start"
        )
        t_started = time.monotonic()
        start_tot = totals(g.live())
        point["startup"].update(
            {
                "join_s": round(join_s, 2),
                "settled": st.settled,
                "settle_wall_s": None if st.detect_s is None else round(st.detect_s, 2),
                "kicks": st.kicks,
                "reason": st.reason,
                **start_tot.as_dict(),
                "lag_probe": probe.window(t_start, t_started),
                "loop_tick_lag_max_ms": round(max(h.tick_lag_max_ms for h in hosts), 1),
                "cpu": CpuMark.now(zk_pid).since(cpu_start),
            }
        )
        negotiated = Counter(m.zk.negotiated_session_timeout_ms for m in g.live())
        neg_ms = min((k for k in negotiated if k), default=round(session_s * 1000))
        point["session"] = {
            "requested_ms": round(session_s * 1000),
            # kazoo pings after negotiated/3 - jitter (<= 400 ms) idle and drops the
            # connection if nothing answers within about the same again.
            "kazoo_ping_slack_ms": round(neg_ms / 3 - 400),
            "negotiated_ms": {str(k): v for k, v in negotiated.items()},
        }
        with contextlib.suppress(Exception):
            server_view = Counter(server.session_timeouts(timeout=10.0).values())
            point["session"]["server_cons_timeouts_ms"] = {
                str(k): v for k, v in server_view.items()
            }
        if not st.settled:
            log(f"  start: NOT settled ({st.reason}); states {g.states()}")
            point["status"] = "start_not_settled"
            return point
        log(
            f"  start: settled in {st.detect_s:.1f}s wall (kicks {st.kicks}; "
            f"{start_tot.reads} reads, {start_tot.writes} writes, {start_tot.attempts} attempts)"
        )
        # Let it stay quiet a moment: a late event would spoil the measurement.
        await asyncio.sleep(max(1.0, 2 * backoff_wall_s))
        if not g.in_memory_settled(None) or totals(g.live()).rebalances != start_tot.rebalances:
            log("  start: group moved again after settling; waiting once more")
            st2 = await wait_settled(
                g, time.monotonic(), remaining, None, allow_kicks=True, what="start-2"
            )
            if not st2.settled:
                point["status"] = "start_not_settled"
                return point
            await asyncio.sleep(max(1.0, 2 * backoff_wall_s))

        # ---------------------------------------------------------------- raw rates, group idle
        point["quiet_wait"] = await wait_machine_quiet(args.quiet_wait, zk_pid)
        log(f"  raw kazoo rate with the group idle ({args.raw_ops} ops per kind)")
        loop = asyncio.get_running_loop()
        t_raw = time.monotonic()
        tot_before_raw = totals(g.live())
        raw = await asyncio.wait_for(
            loop.run_in_executor(None, raw_kazoo_rates, connect + chroot, args.raw_ops, 1000), 600.0
        )
        raw.update(await zkclient_rates(admin, topic_path(TOPIC), args.raw_ops, 1000))
        member_clients = [m.zk.kazoo for m in g.live()]
        raw["spread_get_per_s"] = await asyncio.wait_for(
            loop.run_in_executor(
                None,
                spread_get_rate,
                member_clients,
                f"/brokers/topics/{TOPIC}",
                args.raw_ops,
                1000,
            ),
            600.0,
        )
        raw["seconds"] = round(time.monotonic() - t_raw, 2)
        # The spread gets went through the consumers' counters? No: straight to kazoo.
        raw_disturbed = totals(g.live()).minus(tot_before_raw)
        raw["group_ops_meanwhile"] = raw_disturbed.reads + raw_disturbed.writes
        point["raw_idle"] = raw
        log(
            "  raw: get {get_per_s:.0f}/s create {create_per_s:.0f}/s set {set_per_s:.0f}/s "
            "delete {delete_per_s:.0f}/s | ZkClient get {zkclient_get_per_s:.0f}/s | "
            "spread over sessions {spread_get_per_s:.0f}/s".format(**raw)
        )

        # ---------------------------------------------------------------- the change
        live = sorted(g.live(), key=lambda m: m.machine.consumer_id)
        leaver = live[len(live) // 2]
        leaver_owned = len(leaver.machine.owned)
        watch_base = {m.name: m.machine.stats.watch_events for m in live if m is not leaver}
        all_before = totals(g.all_members.values())
        mntr_before = _mntr(server.client_ports[0])
        logs_before_change = logs.snapshot()
        change_timeout = args.settle_timeout or (300.0 + 0.006 * consumers * consumers)
        log(f"  change: {leaver.name} leaves gracefully (timeout {change_timeout:.0f}s)")
        for h in hosts:
            h.tick_lag_max_ms = 0.0
        spy = None
        if args.py_spy:
            spy = PySpy(args.py_spy / f"change-c{consumers}-p{partitions}.txt")
            if not spy.start():
                spy = None
        cpu0 = CpuMark.now(zk_pid)
        t0 = time.monotonic()
        host = g.host_of[leaver.name]
        await asyncio.wait_for(host.leave(leaver.name), 120.0)
        leave_call_s = time.monotonic() - t0
        res = await wait_settled(
            g, t0, change_timeout, watch_base, allow_kicks=False, what="change"
        )
        t1 = time.monotonic()
        cpu = CpuMark.now(zk_pid).since(cpu0)
        at_settle = totals(g.all_members.values()).minus(all_before)
        profile = spy.stop() if spy is not None else None
        mntr_after = _mntr(server.client_ports[0])
        # A quiet window after settling: nothing more should happen.
        quiet_s = max(1.0, 2 * backoff_wall_s)
        await asyncio.sleep(quiet_s)
        after_quiet = totals(g.all_members.values()).minus(all_before)
        settle = res.detect_s
        c_after = consumers - 1
        model = a7_model(c_after, partitions, args.brokers, leaver_owned)
        wr = raw["create_per_s"] and raw["delete_per_s"]
        predicted = at_settle.reads / raw["get_per_s"] + at_settle.writes / (
            2.0 / (1.0 / raw["create_per_s"] + 1.0 / raw["delete_per_s"]) if wr else 1.0
        )
        model_predicted = model["reads"] / raw["get_per_s"] + model["writes"] / (
            2.0 / (1.0 / raw["create_per_s"] + 1.0 / raw["delete_per_s"]) if wr else 1.0
        )
        change: dict[str, Any] = {
            "leaver": leaver.name,
            "leaver_consumer_id": leaver.machine.consumer_id,
            "leave_call_s": round(leave_call_s, 3),
            "settled": res.settled,
            "zk_verified": res.zk_verified,
            "reason": res.reason,
            "settle_wall_s": None if settle is None else round(settle, 3),
            "settle_emulated_s": None if settle is None else round(settle / scale, 3),
            **{k: v for k, v in at_settle.as_dict().items()},
            "ops": at_settle.reads + at_settle.writes,
            "achieved_ops_per_s": None
            if not settle
            else round((at_settle.reads + at_settle.writes) / settle, 1),
            "a7_model_one_attempt_each": model,
            "reads_vs_model": round(at_settle.reads / model["reads"], 3),
            "writes_vs_model": round(at_settle.writes / max(1, model["writes"]), 3),
            "predicted_s_at_raw_rate": round(predicted, 3),
            "model_predicted_s_at_raw_rate": round(model_predicted, 3),
            "overhead_ratio": None if not settle else round(settle / predicted, 2),
            "after_quiet_window": {
                "seconds": quiet_s,
                "extra_reads": after_quiet.reads - at_settle.reads,
                "extra_writes": after_quiet.writes - at_settle.writes,
                "extra_rebalances": after_quiet.rebalances - at_settle.rebalances,
            },
            "lag_probe": probe.window(t0, t1),
            "loop_tick_lag_max_ms": round(max(h.tick_lag_max_ms for h in hosts), 1),
            "cpu": cpu,
            "zk_server_packets_received": _delta(mntr_after, mntr_before, "zk_packets_received"),
            "zk_server_packets_sent": _delta(mntr_after, mntr_before, "zk_packets_sent"),
            "zk_server_max_latency_ms": _num(mntr_after.get("zk_max_latency")),
            "zk_server_avg_latency_ms": _num(mntr_after.get("zk_avg_latency")),
            "log_warnings": dict(logs.snapshot() - logs_before_change),
        }
        if profile is not None:
            change["profile"] = profile
        point["change"] = change
        point["status"] = "ok" if res.settled else "change_not_settled"
        if res.settled:
            log(
                f"  change: settled in {settle:.2f}s wall ({settle / scale:.1f}s emulated): "
                f"{at_settle.reads} reads, {at_settle.writes} writes, "
                f"{at_settle.watch_notifications} watch notifications, "
                f"{at_settle.rebalances} runs, {at_settle.attempts} attempts, "
                f"{at_settle.conflicts} conflicts, {at_settle.gave_up} gave up"
            )
        else:
            log(f"  change: NOT settled: {res.reason}; states {g.states()}")
        point["_window"] = (t0, t1)
        point["_start_window"] = (t_start, t_started)
        return point
    except (Interrupted, asyncio.CancelledError):
        point["status"] = "interrupted"
        raise
    except Exception as exc:
        if "startup" in point and "settled" not in point["startup"]:
            t_now = time.monotonic()
            point["startup"]["at_error"] = {
                "seconds": round(t_now - t_start, 1),
                "lag_probe": probe.window(t_start, t_now),
                "cpu": CpuMark.now(zk_pid).since(cpu_start),
                "members_started": len(g.live()) if g is not None else 0,
            }
        point["error"] = f"{type(exc).__name__}: {exc}"
        log(f"  ERROR: {point['error']}")
        traceback.print_exc()
        return point
    finally:
        # ---------------------------------------------------------------- teardown
        t_td = time.monotonic()
        if g is not None:
            point["expirations_total"] = totals(g.all_members.values()).expirations
            with contextlib.suppress(Exception):
                await close_hosts(g)
        for zb in brokers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(zb.stop_async(), 30.0)
        if admin is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(admin.stop_async(), 30.0)
        ps = _proc_status()
        point["rss"] = {
            "peak_mb_point" if rss_reset else "peak_mb_process": round(
                ps.get("VmHWM", 0) / 1024, 1
            ),
            "ru_maxrss_mb_process": round(
                resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1
            ),
            "zookeeper_server_peak_mb": _pid_rss_mb(server.pids[0]),
        }
        point["log_warnings_point"] = dict(logs.snapshot() - log_before)
        point["zookeeper_gc"] = gc_pauses(work / "zk-gc.log", gc_offset)
        if "_window" in point:
            w0, w1 = point.pop("_window")
            point["change"]["events"] = analyze_events(events_dir, w0, w1)
        if "_start_window" in point:
            s0, s1 = point.pop("_start_window")
            point["startup"]["events"] = analyze_events(events_dir, s0, s1)
        point["teardown_s"] = round(time.monotonic() - t_td, 2)
        point["point_wall_s"] = round(time.monotonic() - t_point, 1)
        log(f"  teardown in {point['teardown_s']}s; point took {point['point_wall_s']}s")


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


_GC_PAUSE = re.compile(r"Pause.*?(\d+(?:\.\d+)?)ms\s*$")


def gc_pauses(path: Path, offset: int) -> dict[str, Any] | None:
    """The ZooKeeper JVM's GC pauses logged after byte ``offset`` (``-Xlog:gc``)."""
    try:
        with path.open("rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
    except OSError:
        return None
    ms = [float(m.group(1)) for line in text.splitlines() if (m := _GC_PAUSE.search(line))]
    return {
        "pauses": len(ms),
        "max_ms": max(ms, default=0.0),
        "total_ms": round(sum(ms), 1),
        "full_gcs": sum("Pause Full" in line for line in text.splitlines()),
    }


def _num(v: str | None) -> float | None:
    try:
        return None if v is None else float(v)
    except ValueError:
        return None


def _delta(after: dict[str, str], before: dict[str, str], key: str) -> int | None:
    a, b = _num(after.get(key)), _num(before.get(key))
    return None if a is None or b is None else int(a - b)


# =========================================================================== reporting


def machine_info(server: ZooKeeperEnsemble | None) -> dict[str, Any]:
    info: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "python_impl": platform.python_implementation(),
        "switch_interval_s": sys.getswitchinterval(),
    }
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                info["mem_total_gb"] = round(int(line.split()[1]) / 1024 / 1024, 1)
    with contextlib.suppress(Exception):
        import kazoo  # type: ignore[import-untyped]

        info["kazoo"] = getattr(kazoo, "__version__", None) or _dist_version("kazoo")
    with contextlib.suppress(Exception):
        out = subprocess.run(
            ["java", "-version"], capture_output=True, text=True, timeout=20, check=False
        )
        info["java"] = (out.stderr or out.stdout).splitlines()[0]
    if server is not None:
        with contextlib.suppress(OSError):
            srvr = parse_srvr(four_letter_word(HOST, server.client_ports[0], "srvr", timeout=5.0))
            info["zookeeper_version"] = srvr.get("Zookeeper version")
    return info


def _dist_version(name: str) -> str | None:
    from importlib.metadata import version

    try:
        return version(name)
    except Exception:
        return None


def growth(points: list[dict[str, Any]], key: str) -> float | None:
    """Least-squares slope of log(value) against log(C) over the settled points."""
    xs, ys = [], []
    for p in points:
        ch = p.get("change") or {}
        v = ch.get(key)
        if p.get("status") == "ok" and v:
            xs.append(math.log(p["consumers"]))
            ys.append(math.log(v))
    if len(xs) < 2:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    if den == 0:
        return None
    return round(sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den, 2)


def print_table(result: dict[str, Any]) -> None:
    cols = [
        ("C", 4),
        ("P", 5),
        ("status", 8),
        ("settle s", 8),
        ("emu s", 7),
        ("reads", 8),
        ("writes", 6),
        ("watch", 6),
        ("runs", 5),
        ("att", 5),
        ("confl", 5),
        ("gaveup", 6),
        ("ops/s", 7),
        ("raw get/s", 9),
        ("pred s", 7),
        ("ratio", 6),
        ("start s", 7),
        ("kicks", 5),
        ("RSS MB", 7),
        ("drops", 5),
        ("exp", 4),
    ]
    print()
    print(
        f"Legacy group, one graceful leave; time_scale={result['config']['time_scale']} "
        f"(session {result['config']['session_timeout_wall_ms']} ms wall, backoff "
        f"{result['config']['backoff_wall_ms']} ms wall); "
        f"{result['machine'].get('cores')} cores, Python {result['machine'].get('python')}, "
        f"ZooKeeper {result['machine'].get('zookeeper_version', '?')}"
    )
    print("  ".join(name.rjust(w) for name, w in cols))
    for p in result["points"]:
        ch = p.get("change") or {}
        su = p.get("startup") or {}
        raw = p.get("raw_idle") or {}
        rss = p.get("rss") or {}
        warn = p.get("log_warnings_point") or {}
        drops = sum(v for k, v in warn.items() if "Connection dropped" in k or "time-out" in k)
        row = [
            p["consumers"],
            p["partitions"],
            p.get("status", "?")[:8],
            _f(ch.get("settle_wall_s"), 2),
            _f(ch.get("settle_emulated_s"), 1),
            ch.get("reads", ""),
            ch.get("writes", ""),
            ch.get("watch_notifications", ""),
            ch.get("rebalances", ""),
            ch.get("attempts", ""),
            ch.get("conflicts", ""),
            ch.get("gave_up", ""),
            _f(ch.get("achieved_ops_per_s"), 0),
            _f(raw.get("get_per_s"), 0),
            _f(ch.get("predicted_s_at_raw_rate"), 2),
            _f(ch.get("overhead_ratio"), 1),
            _f(su.get("settle_wall_s"), 1),
            su.get("kicks", ""),
            _f(rss.get("peak_mb_point", rss.get("peak_mb_process")), 0),
            drops,
            p.get("expirations_total", ""),
        ]
        print("  ".join(str(v).rjust(w) for v, (_, w) in zip(row, cols, strict=True)))
    gl = result.get("growth") or {}
    print(
        f"growth vs C (log-log slope): settle time {gl.get('settle_wall_s')}, "
        f"reads {gl.get('reads')}, writes {gl.get('writes')}, "
        f"watch notifications {gl.get('watch_notifications')}"
    )
    print(
        "columns: settle s = wall seconds from the leave to the settled group; emu s = "
        "settle / time_scale; reads/writes/watch = ZooKeeper ops and watch notifications of "
        "all consumers' sessions for the change; runs/att/confl/gaveup = syncedRebalance runs, "
        "attempts, NodeExists conflicts, give-ups; pred s = those ops at the raw kazoo rate; "
        "ratio = settle / pred; start s / kicks = group start-up; drops = kazoo connection "
        "drops in the point; exp = session expirations"
    )


def _f(v: Any, nd: int) -> str:
    if v is None or v == "":
        return "-"
    return f"{float(v):.{nd}f}"


def parse_sizes(text: str) -> list[tuple[int, int]]:
    out = []
    for part in text.split(","):
        part = part.strip().lower()
        if not part:
            continue
        c, _, p = part.partition("x")
        if not c.isdigit() or not p.isdigit() or int(c) < 2 or int(p) < 1:
            raise argparse.ArgumentTypeError(f"size {part!r}: want CxP with C >= 2, e.g. 50x500")
        out.append((int(c), int(p)))
    if not out:
        raise argparse.ArgumentTypeError("no sizes")
    return out


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description="Legacy ZooKeeper consumer group: cost of one membership change.",
    )
    ap.add_argument(
        "--sizes",
        type=parse_sizes,
        default=None,
        help="comma-separated CxP points (consumers x partitions); "
        "default 10x100,50x500,200x1000,500x2000",
    )
    ap.add_argument("--quick", action="store_true", help="10x100,50x500 and fewer raw ops")
    ap.add_argument(
        "--time-scale",
        type=float,
        default=3.0,
        help="wall seconds per emulated second (default 3.0: 18 s sessions, 6 s back-off; "
        "at 1.0, 500 consumers in one process expire sessions)",
    )
    ap.add_argument("--brokers", type=int, default=3, help="registered brokers (default 3)")
    ap.add_argument("--hosts", type=int, default=1, help="ConsumerHostCores in this process")
    ap.add_argument("--raw-ops", type=int, default=None, help="ops per kind in the raw-rate test")
    ap.add_argument(
        "--join-concurrency",
        type=int,
        default=64,
        help="parallel add_consumers calls at start-up (1 = one after the other; default 64)",
    )
    ap.add_argument("--start-timeout", type=float, default=None, help="s; default 300+0.012*C^2")
    ap.add_argument("--settle-timeout", type=float, default=None, help="s; default 300+0.006*C^2")
    ap.add_argument(
        "--quiet-wait",
        type=float,
        default=60.0,
        help="s to wait at most for other processes to go quiet before the change (default 60)",
    )
    ap.add_argument(
        "--py-spy",
        type=Path,
        default=None,
        metavar="DIR",
        help="profile each change window with py-spy --gil into DIR (summary in the JSON)",
    )
    ap.add_argument(
        "--patch-host-tick",
        action="store_true",
        help="EXPERIMENT: run the hosts with the proposed tick-resync fix (ResyncTickHost)",
    )
    ap.add_argument("--zk-heap", default="256m", help="ZooKeeper JVM -Xmx (default 256m)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"JSON (default {DEFAULT_OUT})")
    ap.add_argument("--keep", action="store_true", help="keep the work dir (event logs, ZK logs)")
    args = ap.parse_args(argv)
    if args.sizes is None:
        args.sizes = list(QUICK_SIZES if args.quick else FULL_SIZES)
    if args.raw_ops is None:
        args.raw_ops = 2000 if args.quick else 5000
    if not 0.01 <= args.time_scale <= 10:
        ap.error("--time-scale must be in [0.01, 10]")
    if args.brokers < 1 or args.hosts < 1:
        ap.error("--brokers and --hosts must be >= 1")
    return args


# =========================================================================== main


async def run_all(
    args: argparse.Namespace, server: ZooKeeperEnsemble, work: Path, result: dict[str, Any]
) -> None:
    loop = asyncio.get_running_loop()
    # kazoo starts (add_consumers) and the raw-rate tests run in the default executor.
    loop.set_default_executor(ThreadPoolExecutor(max(8, args.join_concurrency + 4)))
    task = asyncio.current_task()
    assert task is not None

    def on_signal(signum: int, _frame: object) -> None:
        # A plain signal handler, not loop.add_signal_handler: that one reads the
        # signal number from the loop's wake-up pipe, which a flooded loop lets
        # fill up, and the signal is lost.
        if STOP.is_set():
            raise KeyboardInterrupt
        STOP.set()
        print(f"signal {signum}: stopping and cleaning up (again to force)", flush=True)
        task.cancel()
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(lambda: None)
        threading.Thread(target=_watchdog, args=(server, args, result), daemon=True).start()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    global PROBE, LOGS
    probe = LagProbe()
    probe.start()
    logs = LogCounter()
    PROBE, LOGS = probe, logs
    logging.getLogger().addHandler(logs)
    logging.getLogger().setLevel(logging.WARNING)
    try:
        run_id = time.strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}"
        log(f"raw kazoo rate, no group ({args.raw_ops} ops per kind)")
        t = time.monotonic()
        cpu0 = CpuMark.now(server.pids[0])
        base = await asyncio.wait_for(
            loop.run_in_executor(None, raw_kazoo_rates, server.connect_string, args.raw_ops, 1000),
            600.0,
        )
        base["lag_probe"] = probe.window(t, time.monotonic())
        base["cpu"] = CpuMark.now(server.pids[0]).since(cpu0)
        result["raw_baseline"] = base
        log(
            "  raw: get {get_per_s:.0f}/s create {create_per_s:.0f}/s set {set_per_s:.0f}/s "
            "delete {delete_per_s:.0f}/s sync get {sync_get_latency_ms:.2f} ms".format(**base)
        )
        for consumers, partitions in args.sizes:
            check_stop()
            point: dict[str, Any] = {}
            result["points"].append(point)  # present even if the run is interrupted
            await run_point(args, server, run_id, work, consumers, partitions, probe, logs, point)
            _write(args.out, result)  # partial results survive a later crash
    finally:
        probe.stop()
        logging.getLogger().removeHandler(logs)
        result["log_warnings_total"] = dict(logs.counts)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _watchdog(server: ZooKeeperEnsemble, args: argparse.Namespace, result: dict[str, Any]) -> None:
    """After a signal: if the cleanup hangs, stop ZooKeeper, write the JSON, exit."""
    if DONE.wait(STOP_GRACE_S):
        return
    print(f"cleanup still running {STOP_GRACE_S:.0f}s after the signal: forcing exit", flush=True)
    with contextlib.suppress(Exception):
        server.stop(timeout=5.0)
    result["status"] = "interrupted (forced)"
    for _ in range(3):
        try:
            _write(args.out, result)
            break
        except Exception:
            time.sleep(0.2)
    os._exit(130)


def _write(path: Path, result: dict[str, Any]) -> None:
    result["growth"] = {
        k: growth(result["points"], k)
        for k in ("settle_wall_s", "reads", "writes", "watch_notifications", "ops")
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=2, sort_keys=False, default=str) + "\n")
    tmp.replace(path)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    scale = args.time_scale
    tick = tick_time_for(6000, scale)
    work = Path(tempfile.mkdtemp(prefix="bench-legacy-"))
    gc_log = work / "zk-gc.log"
    # A standalone server (an ensemble of one), with its GC logged: a long GC
    # pause on the server also expires sessions.
    server = ZooKeeperEnsemble(
        1,
        work / "zk",
        tick_time_ms=tick,
        heap=args.zk_heap,
        jvm_args=(f"-Xlog:gc:file={gc_log}",),
        startup_timeout=60.0,
    )
    result: dict[str, Any] = {
        "benchmark": "legacy_group",
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": [sys.executable, *sys.argv],
        "status": "running",
        "config": {
            "time_scale": scale,
            "kafka": KAFKA_DEFAULTS,
            "session_timeout_wall_ms": round(6000 * scale),
            "backoff_wall_ms": round(2000 * scale),
            "zookeeper_tick_time_ms": tick,
            "zookeeper_heap": args.zk_heap,
            "brokers": args.brokers,
            "topics": 1,
            "streams_per_consumer": 1,
            "assignment": "range",
            "hosts": args.hosts,
            "join_concurrency": args.join_concurrency,
            "patched_host_tick": bool(args.patch_host_tick),
            "raw_ops_per_kind": args.raw_ops,
            "sizes": [f"{c}x{p}" for c, p in args.sizes],
            "host_tick_s": 0.02,
            "fetching": "none (brokers={}, leaders={})",
        },
        "points": [],
    }
    status = "failed"
    try:
        log(f"phase zookeeper: starting a standalone server (tickTime {tick} ms) in {work}")
        server.start()
        log(f"  serving on {server.connect_string}")
        result["machine"] = machine_info(server)
        result["zookeeper"] = server.describe()
        asyncio.run(run_all(args, server, work, result))
        status = "completed"
    except (KeyboardInterrupt, Interrupted):
        status = "interrupted"
        log("interrupted: cleaning up")
    except asyncio.CancelledError:
        status = "interrupted"
        log("terminated: cleaning up")
    except (ZooKeeperError, OSError) as exc:
        log(f"failed: {type(exc).__name__}: {str(exc).splitlines()[0]}")
    finally:
        with contextlib.suppress(Exception):
            server.stop()
        if STOP.is_set():
            status = "interrupted"
        result.setdefault("machine", machine_info(None))
        result["status"] = status
        result["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        result["wall_s"] = round(time.monotonic() - T0, 1)
        result["ru_maxrss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        _write(args.out, result)
        if args.keep:
            log(f"work dir kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
        if result["points"]:
            print_table(result)
        log(f"results written to {args.out} (status {status})")
        DONE.set()
    return (
        0 if status == "completed" and all(p.get("status") == "ok" for p in result["points"]) else 1
    )


if __name__ == "__main__":
    sys.exit(main())
