#!/usr/bin/env python
"""Benchmark: how large a broker-coordinated consumer group one process can emulate.

For each protocol (``classic-eager``, ``classic-cooperative``, ``consumer``,
kafka-protocols.md B and C) and group size N (default 100, 1,000, 10,000
members; partitions = 10 per member on ``--topics`` topics, fixed at start):

1. **Start.** ``--brokers`` :class:`~actors.broker.BrokerCore` objects (each
   with its :class:`~emulator.broker.coordinators.CoordinatorHost`, made by
   :func:`emulator.broker.coordinators.make_coordinator_factory`; no ZooKeeper: the broker
   is constructed but never ``start()``-ed, and its ``_coordinator_timers``
   loop is run as a task) and ``--hosts`` :class:`~actors.consumer_host.ConsumerHostCore`
   objects run in this process's asyncio loop, without Ray. Each host's
   ``brokers`` dict holds :class:`LocalBroker` adapters whose
   ``group_exchange.remote(...)`` and ``fetch_session.remote(...)`` return awaitables,
   like Ray actor handles; the call yields to the loop once (a network hop)
   and then runs the broker's method inline (``--pickle`` also round-trips
   arguments and answers through pickle, Ray's serialization cost). ``leaders``
   is empty, so nothing is fetched: only coordination runs. All N members are
   added at once (as the orchestrator does at t=0); the bench waits until the
   group has **settled** (:func:`settled`):

   * coordinator: Stable (classic: Stable with no pending or pending-sync
     member; consumer: state Stable, i.e. group epoch = target assignment
     epoch and every member reconciled to it) with exactly the live members;
   * every live member machine: classic ``STABLE``, at the coordinator's
     generation, no rejoin pending; consumer ``stable``, owned = target, member
     epoch = the coordinator's assignment epoch and the coordinator's view of
     its assignment = what it owns;
   * the host fetches exactly what each machine owns (the shell's fetch
     positions = owned: the committed-offset fetch was answered);
   * the owned sets are disjoint, cover every partition (complete) and are
     balanced (max - min owned <= 1).

2. **Hold** for ``--hold-intervals`` heartbeat intervals of the protocol
   (default 20: 60 s classic, 100 s consumer, both longer than the 45 s
   session timeout, so a member whose heartbeats stall is expired inside the
   window). Held = no member removed by the coordinator (session, join, sync
   or rebalance timeout), no fencing or membership error answered to a member
   (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_MEMBER_EPOCH, ...), no
   client-side session time-out or request time-out, no new generation / group
   epoch, and the group still settled at the end. Also measured: heartbeats
   served / heartbeats due, the oldest heartbeat the coordinator saw (its
   session timers, sampled), the hosts' tick period and ``tick_lag_max_ms``.

3. **Change**: ONE member joins (host ``N % hosts``). Measured until settled
   again with N + 1 members: wall and emulated seconds, coordinator requests by
   kind (all brokers' ``CoordinatorHost.requests_by_kind``), member-side stats
   (joins, rebalances, heartbeats), generations / epochs, removals and errors.

Per point: CPU seconds (user + system) and wall per phase, Python GC pauses,
time spent inside the brokers (exchanges, coordinator timers), peak RSS
(VmHWM, reset per point), load average and the machine's CPU used by other
processes (the machine may be shared). ``--py-spy DIR`` profiles every phase
of points with N >= ``--profile-min`` (py-spy needs ``pip install py-spy``).

The largest held size per protocol is reported; ``--search K`` adds up to K
geometric bisection points (start + hold only) between the largest held and
the smallest failed size.

Kafka defaults, set explicitly: ``heartbeat.interval.ms`` 3000,
``session.timeout.ms`` 45000 (classic), ``group.consumer.heartbeat.interval.ms``
5000, ``group.consumer.session.timeout.ms`` 45000, ``group.initial.rebalance.delay.ms``
3000, ``max.poll.interval.ms`` 300000; emulated with ``--time-scale``
(default 0.1: a 3 s heartbeat interval is 0.3 s of wall time).

Caveat: in the product each host and each broker is a Ray actor (its own
process); here they share one process, one event loop and one GIL, so the
brokers' CPU delays the hosts' ticks and vice versa. On a 2-core machine a Ray
deployment would run at most two of them in parallel.

Every wait is bounded; on Ctrl-C / SIGTERM / error the hosts' loops and the
brokers' timers are stopped, the event logs closed and the temporary work
directory removed, and the JSON is written with what was measured.

Usage::

    .venv/bin/python tests/bench/bench_modern_group.py            # 100, 1000, 10000 x 3 protocols
    .venv/bin/python tests/bench/bench_modern_group.py --quick           # 50, 200; short hold
    .venv/bin/python tests/bench/bench_modern_group.py --sizes 2000 --protocols consumer
    .venv/bin/python tests/bench/bench_modern_group.py --sizes 10000 --py-spy /tmp/prof
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import itertools
import json
import math
import os
import pickle
import platform
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from actors.broker import BrokerCore
from actors.consumer_host import TICK_S, ConsumerHostCore
from actors.context import RunContext
from emulator.eventlog import iter_events
from emulator.host.core import MemberSpec
from emulator.modern.placement import offsets_topic_assignment
from emulator.protocols import SPECS, assignor_for

REPO = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO / "tests" / "bench" / "results" / "modern_group.json"
PROTOCOLS = ("classic-eager", "classic-cooperative", "consumer")
FULL_SIZES = (100, 1000, 10000)
QUICK_SIZES = (50, 200)
PARTITIONS_PER_MEMBER = 10
GROUP = "bench-modern-group"
TOPIC_PREFIX = "bench"
KAFKA: dict[str, object] = {
    "kafka.version": "3.9",
    # classic client (B6)
    "heartbeat.interval.ms": 3000,
    "session.timeout.ms": 45000,
    "max.poll.interval.ms": 300000,
    # broker (B6, C6)
    "group.initial.rebalance.delay.ms": 3000,
    "group.consumer.heartbeat.interval.ms": 5000,
    "group.consumer.session.timeout.ms": 45000,
}
HB_INTERVAL_MS = {"classic": 3000, "consumer": 5000}
SESSION_MS = 45000
# Errors answered to a member that mean it was fenced or lost its membership.
FENCING_ERRORS = frozenset(
    {
        "UNKNOWN_MEMBER_ID",
        "ILLEGAL_GENERATION",
        "FENCED_INSTANCE_ID",
        "FENCED_MEMBER_EPOCH",
        "STALE_MEMBER_EPOCH",
    }
)

T0 = time.monotonic()
# Set when a point's clean-up starts: the --max-point-s alarm no longer raises then.
CLEANING = [False]


def log(msg: str) -> None:
    """One progress line."""
    print(f"[{time.monotonic() - T0:8.1f}s] {msg}", flush=True)


# ====================================================================== no-Ray adapters


class LocalCall:
    """A method of a local object behind Ray's calling convention: ``.remote(*args)``.

    ``remote`` returns an awaitable, as a Ray ``ObjectRef`` is: it yields to the
    loop once (the request is "on the wire"), then runs the method inline
    (awaiting it if it is a coroutine function). With ``pickled`` the
    arguments and the answer go through ``pickle`` as Ray would serialize them.
    """

    def __init__(self, fn: Callable[..., Any], stats: CallStats, pickled: bool) -> None:
        self._fn = fn
        self._stats = stats
        self._pickled = pickled

    def remote(self, *args: Any) -> Any:
        return self._call(*args)

    async def _call(self, *args: Any) -> Any:
        await asyncio.sleep(0)
        st = self._stats
        t = time.perf_counter()
        if self._pickled:
            blob = pickle.dumps(args, protocol=5)
            st.bytes_in += len(blob)
            st.max_in = max(st.max_in, len(blob))
            args = pickle.loads(blob)
        res = self._fn(*args)
        if asyncio.iscoroutine(res):
            res = await res
        if self._pickled:
            blob = pickle.dumps(res, protocol=5)
            st.bytes_out += len(blob)
            st.max_out = max(st.max_out, len(blob))
            res = pickle.loads(blob)
        dt = time.perf_counter() - t
        st.calls += 1
        st.seconds += dt
        st.max_s = max(st.max_s, dt)
        if isinstance(args[-1], list):
            st.items += len(args[-1])
        return res


@dataclass
class CallStats:
    calls: int = 0
    items: int = 0
    seconds: float = 0.0
    max_s: float = 0.0
    bytes_in: int = 0
    bytes_out: int = 0
    max_in: int = 0
    max_out: int = 0

    def snapshot(self) -> CallStats:
        return CallStats(**self.__dict__)

    def since(self, before: CallStats) -> dict[str, Any]:
        return {
            "calls": self.calls - before.calls,
            "requests": self.items - before.items,
            "seconds": round(self.seconds - before.seconds, 3),
            "max_call_ms": round(self.max_s * 1000, 1),
            "bytes_in": self.bytes_in - before.bytes_in,
            "bytes_out": self.bytes_out - before.bytes_out,
            "max_payload_in": self.max_in,
            "max_payload_out": self.max_out,
        }


class LocalBroker:
    """What a host's ``brokers[id]`` needs of a Ray broker handle, for a local BrokerCore."""

    def __init__(self, core: BrokerCore, pickled: bool) -> None:
        self.core = core
        self.exchange_stats = CallStats()
        self.fetch_stats = CallStats()
        self.group_exchange = LocalCall(core.group_exchange, self.exchange_stats, pickled)
        self.fetch_session = LocalCall(core.fetch_session, self.fetch_stats, pickled)


# ====================================================================== instrumentation


class TimedPoll:
    """Wraps ``CoordinatorHost.poll`` (the broker timer loop's work) to time it."""

    def __init__(self, host: Any) -> None:
        self.calls = 0
        self.seconds = 0.0
        self.max_s = 0.0
        self._orig = host.poll
        host.poll = self

    def __call__(self, now_ms: float) -> None:
        t = time.perf_counter()
        self._orig(now_ms)
        dt = time.perf_counter() - t
        self.calls += 1
        self.seconds += dt
        self.max_s = max(self.max_s, dt)


class TickProbe:
    """Records when each host tick runs (wraps ``HostCore.send_fetches``, called once per tick)."""

    def __init__(self, host: ConsumerHostCore) -> None:
        self.times: list[float] = []
        orig = host.core.send_fetches

        def wrapped() -> None:
            self.times.append(time.monotonic())
            orig()

        host.core.send_fetches = wrapped  # type: ignore[method-assign]

    def window(self, t0: float, t1: float) -> dict[str, Any]:
        ts = [t for t in self.times if t0 <= t <= t1]
        gaps = sorted(b - a for a, b in itertools.pairwise(ts))
        if not gaps:
            return {"ticks": len(ts)}
        return {
            "ticks": len(ts),
            "period_p50_ms": round(gaps[len(gaps) // 2] * 1000, 1),
            "period_p99_ms": round(gaps[min(len(gaps) - 1, int(0.99 * len(gaps)))] * 1000, 1),
            "period_max_ms": round(gaps[-1] * 1000, 1),
        }


class GcProbe:
    """Python cyclic-GC collections and their pauses, by generation."""

    def __init__(self) -> None:
        self.count: Counter[int] = Counter()
        self.seconds: dict[int, float] = defaultdict(float)
        self.max_s: dict[int, float] = defaultdict(float)
        self._t = 0.0
        gc.callbacks.append(self._cb)

    def _cb(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._t = time.perf_counter()
            return
        g = int(info.get("generation", 0))
        dt = time.perf_counter() - self._t
        self.count[g] += 1
        self.seconds[g] += dt
        self.max_s[g] = max(self.max_s[g], dt)

    def reset_max(self) -> None:
        self.max_s.clear()

    def snapshot(self) -> tuple[Counter[int], dict[int, float]]:
        return Counter(self.count), dict(self.seconds)

    def since(self, before: tuple[Counter[int], dict[int, float]]) -> dict[str, Any]:
        c0, s0 = before
        return {
            f"gen{g}": {
                "collections": self.count[g] - c0[g],
                "seconds": round(self.seconds[g] - s0.get(g, 0.0), 3),
                "max_pause_ms": round(self.max_s.get(g, 0.0) * 1000, 1),
            }
            for g in (0, 1, 2)
        }

    def close(self) -> None:
        with contextlib.suppress(ValueError):
            gc.callbacks.remove(self._cb)


def machine_cpu() -> tuple[int, int]:
    """``(busy, total)`` jiffies of all cores from ``/proc/stat``."""
    with contextlib.suppress(OSError, ValueError):
        parts = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        idle = parts[3] + (parts[4] if len(parts) > 4 else 0)
        return sum(parts) - idle, sum(parts)
    return 0, 0


def proc_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


@dataclass
class Mark:
    """Counters at one instant; ``since`` gives a phase's deltas."""

    wall: float
    cpu: float
    machine: tuple[int, int]
    gc: tuple[Counter[int], dict[int, float]]
    exchange: list[CallStats]
    timers: list[tuple[int, float]]
    requests: Counter[str]

    def since(self, now: Mark, gcp: GcProbe) -> dict[str, Any]:
        dt = max(1e-6, now.wall - self.wall)
        busy = now.machine[0] - self.machine[0]
        total = now.machine[1] - self.machine[1]
        cores = os.cpu_count() or 1
        cpu = now.cpu - self.cpu
        busy_cores = cores * busy / total if total else None
        ex = [a.since(b) for a, b in zip(now.exchange, self.exchange, strict=True)]
        return {
            "wall_s": round(dt, 3),
            "cpu_s": round(cpu, 2),
            "cpu_pct_of_one_core": round(100 * cpu / dt, 1),
            "machine_busy_pct_of_all_cores": round(100 * busy / total, 1) if total else None,
            "other_processes_pct_of_one_core": None
            if busy_cores is None
            else round(max(0.0, 100 * (busy_cores - cpu / dt)), 1),
            "loadavg_1m": round(os.getloadavg()[0], 2),
            "gc": gcp.since(self.gc),
            "broker_exchange_s": round(sum(e["seconds"] for e in ex), 3),
            "broker_exchange_calls": sum(e["calls"] for e in ex),
            "broker_exchange_max_call_ms": max((e["max_call_ms"] for e in ex), default=0.0),
            "broker_exchange_bytes": sum(e["bytes_in"] + e["bytes_out"] for e in ex),
            "broker_exchange_max_payload": max(
                (max(e["max_payload_in"], e["max_payload_out"]) for e in ex), default=0
            ),
            "coordinator_timer_s": round(
                sum(t1 - t0 for (_, t0), (_, t1) in zip(self.timers, now.timers, strict=True)), 3
            ),
            "requests_by_kind": dict(sorted((now.requests - self.requests).items())),
            "requests": sum((now.requests - self.requests).values()),
        }


def reset_peak_rss() -> bool:
    """Reset VmHWM (Linux ``clear_refs`` 5) so the next peak is this point's alone."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def rss_mb() -> dict[str, float]:
    out: dict[str, float] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = round(int(value.split()[0]) / 1024, 1)
    return out


# ====================================================================== the group under test


@dataclass
class Point:
    """One (protocol, size) point: its brokers, hosts and the coordinator to watch."""

    protocol: str
    n: int
    topics: dict[str, int]
    brokers: dict[int, BrokerCore]
    adapters: dict[int, LocalBroker]
    hosts: list[ConsumerHostCore]
    ctx: RunContext
    events_dir: Path
    timer_tasks: list[asyncio.Task[None]] = field(default_factory=list)
    timed_polls: dict[int, TimedPoll] = field(default_factory=dict)
    ticks: list[TickProbe] = field(default_factory=list)
    expected: int = 0  # live members expected

    @property
    def generation(self) -> str:
        return SPECS[self.protocol].generation

    @property
    def partitions(self) -> int:
        return sum(self.topics.values())

    @property
    def coordinator_broker(self) -> int:
        core = next(iter(self.brokers.values()))
        return int(core.coordinators.coordinator_for(GROUP))

    @property
    def coordinator(self) -> Any:
        return self.brokers[self.coordinator_broker].coordinators.coordinators.get(GROUP)

    def live(self) -> list[Any]:
        return [m for h in self.hosts for m in h.members.values()]

    def mark(self, gcp: GcProbe) -> Mark:
        req: Counter[str] = Counter()
        for b in self.brokers.values():
            req.update(b.coordinators.requests_by_kind)
        return Mark(
            time.monotonic(),
            proc_cpu_s(),
            machine_cpu(),
            gcp.snapshot(),
            [a.exchange_stats.snapshot() for a in self.adapters.values()],
            [(tp.calls, tp.seconds) for tp in self.timed_polls.values()],
            req,
        )

    def epoch(self) -> int | None:
        c = self.coordinator
        if c is None:
            return None
        return int(c.generation_id if self.generation == "classic" else c.group_epoch)

    def coord_summary(self) -> str:
        c = self.coordinator
        if c is None:
            return "no coordinator yet"
        if self.generation == "classic":
            return (
                f"coord {c.state.value} gen {c.generation_id} members {len(c.members)} "
                f"pending {len(c.pending_members)} pending-sync {len(c.pending_sync_members)}"
            )
        return (
            f"coord {c.state.value} epoch {c.group_epoch}/{c.assignment_epoch} "
            f"members {len(c.members)}"
        )

    def removals(self) -> int:
        """MEMBER_REMOVED events the brokers wrote so far (any reason)."""
        return sum(b.events.count_by_kind.get("member_removed", 0) for b in self.brokers.values())

    def member_states(self) -> dict[str, int]:
        return dict(Counter(str(m.machine.state.value) for m in self.live()))


def coordinator_ready(p: Point) -> bool:
    """The cheap half of :func:`settled`: the coordinator's own view."""
    c = p.coordinator
    if c is None:
        return False
    if p.generation == "classic":
        return (
            c.state.value == "Stable"
            and len(c.members) == p.expected
            and not c.pending_members
            and not c.pending_sync_members
        )
    return (
        c.state.value == "Stable"
        and c.group_epoch == c.assignment_epoch
        and len(c.members) == p.expected
    )


def settled(p: Point) -> tuple[bool, str]:
    """Whether the group is settled (see the module docstring); else why not."""
    if not coordinator_ready(p):
        return False, "coordinator not stable"
    c = p.coordinator
    members = p.live()
    if len(members) != p.expected:
        return False, f"{len(members)} live members, {p.expected} expected"
    owned_total = 0
    union: set[tuple[str, int]] = set()
    counts: list[int] = []
    classic = p.generation == "classic"
    for m in members:
        mach = m.machine
        if mach.closed:
            return False, f"{m.name} closed"
        owned = mach.owned
        if classic:
            if mach.state.value != "STABLE" or mach.rejoin_needed:
                return False, f"{m.name} {mach.state.value} rejoin={mach.rejoin_needed}"
            if mach.generation.generation_id != c.generation_id:
                return False, f"{m.name} at generation {mach.generation.generation_id}"
            if mach.member_id not in c.members:
                return False, f"{m.name} unknown to the coordinator"
        else:
            if mach.state.value != "stable" or owned != mach.target:
                return False, f"{m.name} {mach.state.value}"
            if mach.member_epoch != c.assignment_epoch:
                return False, f"{m.name} at epoch {mach.member_epoch}"
            cm = c.members.get(mach.member_id)
            if cm is None or cm.assigned != owned:
                return False, f"{m.name}: coordinator's view differs"
        if len(m.positions) != len(owned) or not owned.issuperset(m.positions):
            return False, f"{m.name} not fetching what it owns"
        owned_total += len(owned)
        union |= owned
        counts.append(len(owned))
    if owned_total != len(union):
        return False, "a partition is owned twice"
    if len(union) != p.partitions:
        return False, f"{len(union)}/{p.partitions} partitions owned"
    if counts and max(counts) - min(counts) > 1:
        return False, f"unbalanced: {min(counts)}..{max(counts)}"
    return True, f"settled: {len(members)} members, {len(union)} partitions"


async def wait_settled(p: Point, what: str, timeout_s: float) -> dict[str, Any]:
    """Poll :func:`settled` until true or ``timeout_s``; progress every ~10 s."""
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    next_progress = t0 + 10.0
    full_checks = 0
    check_s = 0.0
    why = ""
    removed0 = p.removals()
    while True:
        now = time.monotonic()
        removed = p.removals() - removed0
        if removed >= max(10, p.expected):
            log(f"  {what}: collapsing ({removed} members removed by the coordinator): giving up")
            return {
                "settled": False,
                "collapsed": True,
                "wall_s": round(now - t0, 3),
                "why": f"{removed} members removed by the coordinator",
                "states": p.member_states(),
                "coordinator": p.coord_summary(),
            }
        if coordinator_ready(p):
            t = time.perf_counter()
            ok, why = settled(p)
            dt = time.perf_counter() - t
            full_checks += 1
            check_s += dt
            if ok:
                t1 = time.monotonic()
                return {
                    "settled": True,
                    "wall_s": round(t1 - t0, 3),
                    "emulated_s": round((t1 - t0) / p.ctx.time_scale, 2),
                    "full_checks": full_checks,
                    "check_s": round(check_s, 3),
                }
            sleep = max(0.05, 3 * dt)
        else:
            why = "coordinator: " + p.coord_summary()
            sleep = 0.05
        if now >= deadline:
            log(f"  {what}: NOT settled after {timeout_s:.0f} s ({why})")
            return {
                "settled": False,
                "wall_s": round(now - t0, 3),
                "why": why,
                "states": p.member_states(),
                "coordinator": p.coord_summary(),
            }
        if now >= next_progress:
            next_progress = now + 10.0
            lag = max(h.tick_lag_max_ms for h in p.hosts)
            log(
                f"  {what}: {now - t0:6.1f} s  {p.coord_summary()}; members "
                f"{p.member_states()}; host tick lag max {lag:.0f} ms; {why}"
            )
        await asyncio.sleep(sleep)


def heartbeat_ages(p: Point) -> tuple[float, int]:
    """The oldest heartbeat the coordinator holds (ms since, from its session timers)."""
    c = p.coordinator
    if c is None:
        return 0.0, 0
    now = p.brokers[p.coordinator_broker].clock.now_ms()
    worst = 0.0
    n = 0
    if p.generation == "classic":
        for m in c.members.values():
            d = m.heartbeat_deadline
            if d is not None:
                n += 1
                worst = max(worst, m.session_timeout_ms - (d - now))
    else:
        for mid in c.members:
            d = c.session_deadline(mid)
            if d is not None:
                n += 1
                worst = max(worst, c.session_timeout_ms - (d - now))
    return worst, n


def member_stats(p: Point) -> Counter[str]:
    out: Counter[str] = Counter()
    for m in p.live():
        st = m.machine.stats
        for k in ("joins", "rebalances", "heartbeats", "commits", "commit_failures", "fenced"):
            out[k] += int(getattr(st, k, 0) or 0)
        for k, v in (getattr(st, "errors", None) or {}).items():
            out[f"error:{k}"] += v
    return out


# ====================================================================== event log analysis


def analyze_events(events_dir: Path, windows: dict[str, tuple[float, float]]) -> dict[str, Any]:
    """Per phase window (monotonic): removals, errors, generations, rebalance triggers."""
    out: dict[str, dict[str, Counter[str]]] = {
        w: defaultdict(Counter) for w in (*windows, "outside")
    }
    total = 0
    for path in sorted(events_dir.glob("*.msgpack")):
        with contextlib.suppress(Exception):
            for ev in iter_events(path):
                total += 1
                kind = ev.get("kind")
                if kind not in (
                    "member_removed",
                    "request_error",
                    "group_state_changed",
                    "rebalance_triggered",
                    "rebalance_started",
                    "consumer_stopped",
                ):
                    continue
                ts = float(ev.get("ts_mono", 0.0))  # type: ignore[arg-type]
                w = next((k for k, (a, b) in windows.items() if a <= ts <= b), "outside")
                reason = str(ev.get("reason", ""))
                detail = str(ev.get("detail", ""))
                if kind == "request_error" and "session timed out" in detail:
                    reason = "client_session_timeout"
                if kind == "group_state_changed":
                    reason = f"{ev.get('state')}"
                if kind in ("rebalance_triggered", "rebalance_started") and len(reason) > 40:
                    reason = reason.split(" ")[0] + "..."
                out[w][kind][reason] += 1
    result: dict[str, Any] = {"events_read": total}
    for w, kinds in out.items():
        result[w] = {k: dict(v) for k, v in kinds.items()}
    return result


def health(ev: dict[str, Any]) -> dict[str, int]:
    """Expiries, fencing, client time-outs in one window's event summary."""
    removed = ev.get("member_removed", {})
    errors = ev.get("request_error", {})
    return {
        "removed_not_leave": sum(v for k, v in removed.items() if k != "leave"),
        "fencing_errors": sum(v for k, v in errors.items() if k in FENCING_ERRORS),
        "client_session_timeouts": errors.get("client_session_timeout", 0),
        "request_timeouts": errors.get("REQUEST_TIMED_OUT", 0),
        "rebalance_in_progress": errors.get("REBALANCE_IN_PROGRESS", 0),
    }


# ====================================================================== one point


def build_point(args: argparse.Namespace, protocol: str, n: int, work: Path) -> Point:
    parts = n * PARTITIONS_PER_MEMBER
    t = args.topics
    topics = {f"{TOPIC_PREFIX}-{i}": parts // t + (1 if i < parts % t else 0) for i in range(t)}
    assignor, note = assignor_for(protocol, None)
    assert note is None
    events_dir = work / f"{protocol}-{n}-{time.monotonic_ns()}"
    ctx = RunContext(
        run_id=f"bench-modern-{os.getpid()}",
        protocol=protocol,
        events_dir=str(events_dir),
        time_scale=args.time_scale,
        origin_wall=time.time(),
        zk_connect="",
        zk_hosts=(),
        seed=args.seed,
        group=GROUP,
        kafka=dict(KAFKA),
        leaders={},
        partitions_per_topic=dict(topics),
        assignor=assignor,
        static_membership=False,
    )
    import random

    placement = offsets_topic_assignment(
        list(range(args.brokers)), random.Random(f"{args.seed}/offsets")
    )
    offsets_leaders = {part: replicas[0] for part, replicas in placement.items()}
    brokers = {
        b: BrokerCore(b, ctx, [], 9092 + b, offsets_leaders, dict(topics))
        for b in range(args.brokers)
    }
    adapters = {b: LocalBroker(core, args.pickle) for b, core in brokers.items()}
    hosts = [ConsumerHostCore(i, ctx, dict(adapters)) for i in range(args.hosts)]
    p = Point(protocol, n, topics, brokers, adapters, hosts, ctx, events_dir)
    p.timed_polls = {b: TimedPoll(core.coordinators) for b, core in brokers.items()}
    p.ticks = [TickProbe(h) for h in hosts]
    return p


def specs_for(p: Point, indexes: Sequence[int]) -> dict[int, list[MemberSpec]]:
    sub = {t: 1 for t in p.topics}
    by_host: dict[int, list[MemberSpec]] = defaultdict(list)
    for i in indexes:
        name = f"c-{i}"
        by_host[i % len(p.hosts)].append(
            MemberSpec(name, name, sub, index=i, bootstrap=i % len(p.brokers))
        )
    return by_host


async def start_point(p: Point) -> None:
    for h in p.hosts:
        await h.start()
    for core in p.brokers.values():
        p.timer_tasks.append(asyncio.ensure_future(core._coordinator_timers()))
    origin = time.time()
    for h in p.hosts:
        h.set_origin(origin)
    for core in p.brokers.values():
        core.set_origin(origin)


async def close_point(p: Point) -> None:
    """Stop the hosts' loops and the brokers' timers; close every event log.

    Members are not closed one by one (``ConsumerHostCore.stop`` would leave
    them one at a time, >= 10 ms each).
    """
    for h in p.hosts:
        h._stop = True
    for h in p.hosts:
        if h._task is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(h._task, 10.0)
        for t in list(h._bg):
            t.cancel()
        with contextlib.suppress(Exception):
            h.events.close()
    for t in p.timer_tasks:
        t.cancel()
    for t in p.timer_tasks:
        with contextlib.suppress(BaseException):
            await t
    for core in p.brokers.values():
        core._timer = None
        with contextlib.suppress(Exception):
            await core.stop()


class PySpy:
    """``py-spy record`` of this process over one phase (``--py-spy``), summarized."""

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


#: Components by source file; a sample is charged to its leaf-most known frame.
PROFILE_COMPONENTS: tuple[tuple[str, str], ...] = (
    ("tests/bench/", "bench (settle checks, probes)"),
    ("emulator/modern/assignors/", "assignors"),
    ("emulator/modern/classic_coordinator.py", "classic coordinator"),
    ("emulator/modern/consumer_coordinator.py", "consumer (KIP-848) coordinator"),
    ("emulator/modern/classic_member.py", "classic member machine"),
    ("emulator/modern/consumer_member.py", "consumer (KIP-848) member machine"),
    ("emulator/modern/messages.py", "messages"),
    ("emulator/broker/coordinators.py", "coordinator host (exchange/poll)"),
    ("emulator/broker/", "broker"),
    ("actors/broker.py", "broker"),
    ("actors/consumer_host.py", "host tick loop (consumer_host)"),
    ("emulator/host/core.py", "host tick loop (consumer_host)"),
    ("emulator/host/fetch_client.py", "host tick loop (consumer_host)"),
    ("emulator/host/modern_shell.py", "member shell (modern_shell)"),
    ("emulator/host/shell.py", "member shell (fetch_requests/process)"),
    ("emulator/eventlog.py", "event log (emit/pack)"),
    ("emulator/events.py", "event log (emit/pack)"),
    ("dataclasses.py", "dataclasses (replace)"),
    ("pickle", "pickle"),
    ("asyncio/", "asyncio machinery"),
)


def _component_of(frames: list[str]) -> str:
    for frame in reversed(frames):
        for pattern, name in PROFILE_COMPONENTS:
            if pattern in frame:
                return name
    return "other"


def summarize_profile(path: Path) -> dict[str, Any] | None:
    """Where the samples went: by component, top self and inclusive frames."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    total = 0
    components: Counter[str] = Counter()
    self_: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    for line in lines:
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        components[_component_of(frames)] += n
        self_[frames[-1]] += n
        for f in set(frames):
            incl[f] += n

    def pct(c: Counter[str], k: int) -> list[tuple[str, float]]:
        return [(f, round(100.0 * v / total, 1)) for f, v in c.most_common(k)] if total else []

    return {
        "file": str(path),
        "samples": total,
        "by_component_pct": dict(pct(components, 20)),
        "top_self_pct": pct(self_, 25),
        "top_inclusive_pct": pct(incl, 45),
    }


async def run_phase(
    p: Point,
    name: str,
    gcp: GcProbe,
    rec: dict[str, Any],
    windows: dict[str, tuple[float, float]],
    body: Callable[[], Any],
    profile: Path | None,
) -> Any:
    """Run one phase with its counters (and optionally py-spy)."""
    spy = PySpy(profile / f"{p.protocol}-{p.n}-{name}.txt") if profile else None
    if spy is not None and not spy.start():
        spy = None
    for h in p.hosts:
        h.tick_lag_max_ms = 0.0
    gcp.reset_max()
    before = p.mark(gcp)
    stats0 = member_stats(p)
    epoch0 = p.epoch()
    try:
        result = await body()
    finally:
        after = p.mark(gcp)
        windows[name] = (before.wall, after.wall)
        rec[name] = ph = rec.get(name, {})
        ph.update(before.since(after, gcp))
        ph["epoch_before"] = epoch0
        ph["epoch_after"] = p.epoch()
        d = member_stats(p)
        d.subtract(stats0)
        ph["member_stats"] = {k: v for k, v in sorted(d.items()) if v}
        ph["host_tick_lag_max_ms"] = round(max(h.tick_lag_max_ms for h in p.hosts), 1)
        periods = [t.window(before.wall, after.wall) for t in p.ticks]
        ph["host_tick"] = {
            "ticks": sum(x.get("ticks", 0) for x in periods),
            "period_p50_ms": max((x.get("period_p50_ms", 0) for x in periods), default=None),
            "period_p99_ms": max((x.get("period_p99_ms", 0) for x in periods), default=None),
            "period_max_ms": max((x.get("period_max_ms", 0) for x in periods), default=None),
        }
        if spy is not None:
            ph["profile"] = spy.stop()
    return result


async def run_point(
    args: argparse.Namespace,
    protocol: str,
    n: int,
    work: Path,
    gcp: GcProbe,
    rec: dict[str, Any],
    *,
    change: bool = True,
) -> None:
    gen = SPECS[protocol].generation
    hb = HB_INTERVAL_MS[gen]
    rec.update(
        protocol=protocol,
        members=n,
        partitions=n * PARTITIONS_PER_MEMBER,
        topics=args.topics,
        status="running",
        heartbeat_interval_ms=hb,
        session_timeout_ms=SESSION_MS,
        start_mode="all at once" if args.ramp_per_s <= 0 else f"ramp {args.ramp_per_s:g}/s",
        time_scale=args.time_scale,
        hosts=args.hosts,
        brokers=args.brokers,
        pickled=args.pickle,
        run=args.run_index,
    )
    gc.collect()
    rec["rss_reset"] = reset_peak_rss()
    rec["loadavg_before"] = [round(x, 2) for x in os.getloadavg()]
    profile = args.py_spy if args.py_spy is not None and n >= args.profile_min else None
    log(f"point {protocol} N={n} P={n * PARTITIONS_PER_MEMBER}: building")
    p = build_point(args, protocol, n, work)
    windows: dict[str, tuple[float, float]] = {}
    try:
        await start_point(p)
        # ---------------------------------------------------------------- start
        p.expected = n
        start_timeout = args.start_timeout or (120 + 0.15 * n)
        log(f"  phase start: adding {n} members on {len(p.hosts)} hosts")

        async def do_start() -> dict[str, Any]:
            t = time.monotonic()
            if args.ramp_per_s <= 0:
                for h, specs in specs_for(p, range(n)).items():
                    await p.hosts[h].add_consumers(specs)
            else:
                # --ramp-per-s: members join at a steady rate (not the orchestrator's burst).
                step = max(1, round(args.ramp_per_s * 0.1))
                for lo in range(0, n, step):
                    for h, specs in specs_for(p, range(lo, min(n, lo + step))).items():
                        await p.hosts[h].add_consumers(specs)
                    wait = t + (lo + step) / args.ramp_per_s - time.monotonic()
                    await asyncio.sleep(max(0.0, wait))
            added = time.monotonic() - t
            res = await wait_settled(p, "start", start_timeout)
            # Settle time counts from the first member added (a ramp included).
            res["add_consumers_s"] = round(added, 3)
            res["after_add_s"] = res["wall_s"]
            res["wall_s"] = round(added + res["wall_s"], 3)
            if res["settled"]:
                res["emulated_s"] = round(res["wall_s"] / args.time_scale, 2)
            return res

        res = await run_phase(p, "start", gcp, rec, windows, do_start, profile)
        rec["start"].update(res)
        log(
            f"  start: {'settled' if res['settled'] else 'NOT settled'} in {res['wall_s']:.2f} s "
            f"wall ({res['wall_s'] / args.time_scale:.1f} s emulated), cpu "
            f"{rec['start']['cpu_s']:.1f} s, requests {rec['start']['requests']}, "
            f"{p.coord_summary()}"
        )
        if not res["settled"]:
            rec["status"] = "start_not_settled"
            return
        # ----------------------------------------------------------------- hold
        hold_ms = args.hold_intervals * hb
        hold_wall = hold_ms / 1000 * args.time_scale
        log(
            f"  phase hold: {args.hold_intervals} heartbeat intervals = {hold_ms / 1000:.0f} s "
            f"emulated ({hold_wall:.1f} s wall)"
        )

        async def do_hold() -> dict[str, Any]:
            t_end = time.monotonic() + hold_wall
            worst = 0.0
            samples = 0
            sample_every = max(0.25, hold_wall / 40)
            next_log = time.monotonic() + 10.0
            while (now := time.monotonic()) < t_end:
                age, _ = heartbeat_ages(p)
                worst = max(worst, age)
                samples += 1
                if now >= next_log:
                    next_log = now + 10.0
                    log(
                        f"  hold: {t_end - now:5.1f} s left; oldest heartbeat {age:.0f} ms "
                        f"emulated; {p.coord_summary()}"
                    )
                await asyncio.sleep(min(sample_every, max(0.0, t_end - now)))
            ok, why = settled(p)
            return {
                "hold_emulated_s": hold_ms / 1000,
                "oldest_heartbeat_ms_max": round(worst, 0),
                "heartbeat_age_samples": samples,
                "still_settled": ok,
                "why": None if ok else why,
            }

        res = await run_phase(p, "hold", gcp, rec, windows, do_hold, profile)
        hold = rec["hold"]
        hold.update(res)
        due = n * hold["wall_s"] / args.time_scale * 1000 / hb
        hb_kind = "HeartbeatRequest" if gen == "classic" else "ConsumerGroupHeartbeatRequest"
        served = hold["requests_by_kind"].get(hb_kind, 0)
        hold["heartbeats_served"] = served
        hold["heartbeats_due"] = round(due)
        hold["heartbeat_ratio"] = round(served / due, 3) if due else None
        log(
            f"  hold: oldest heartbeat {res['oldest_heartbeat_ms_max']:.0f} ms emulated "
            f"(interval {hb}, session {SESSION_MS}); heartbeats {served}/{due:.0f} due; "
            f"tick period p99 {hold['host_tick']['period_p99_ms']} ms max "
            f"{hold['host_tick']['period_max_ms']} ms; cpu {hold['cpu_pct_of_one_core']}% "
            f"of a core; still settled {res['still_settled']}"
        )
        # --------------------------------------------------------------- change
        if change:
            p.expected = n + 1
            settle_timeout = args.settle_timeout or (120 + 0.1 * n)
            log(f"  phase change: member c-{n} joins")

            async def do_change() -> dict[str, Any]:
                for h, specs in specs_for(p, [n]).items():
                    await p.hosts[h].add_consumers(specs)
                return await wait_settled(p, "change", settle_timeout)

            res = await run_phase(p, "change", gcp, rec, windows, do_change, profile)
            ch = rec["change"]
            ch.update(res)
            log(
                f"  change: {'settled' if res['settled'] else 'NOT settled'} in "
                f"{res['wall_s']:.2f} s wall ({res['wall_s'] / args.time_scale:.1f} s emulated); "
                f"epoch {ch['epoch_before']} -> {ch['epoch_after']}; requests "
                f"{ch['requests_by_kind']}"
            )
            if not res["settled"]:
                rec["status"] = "change_not_settled"
        rec["status"] = rec["status"] if rec["status"] != "running" else "ok"
    finally:
        CLEANING[0] = True
        with contextlib.suppress(Exception):
            rec["rss_mb"] = rss_mb()
            rec["at_end"] = {
                "coordinator": p.coord_summary(),
                "member_states": p.member_states(),
                "removed_total": p.removals(),
            }
        await close_point(p)
        try:
            ev = analyze_events(p.events_dir, windows)
            rec["events"] = ev
            for w in windows:
                rec.setdefault(w, {})["health"] = health(ev.get(w, {}))
        except Exception as exc:  # analysis must not hide the measurement
            rec["events_error"] = f"{type(exc).__name__}: {exc}"
        hold = rec.get("hold")
        if hold and "health" in hold:
            h = hold["health"]
            # A heartbeat older than the session timeout means a coordinator
            # that is not starved itself would have expired the member.
            oldest = hold.get("oldest_heartbeat_ms_max")
            hold["held"] = bool(
                hold.get("still_settled")
                and hold.get("epoch_before") == hold.get("epoch_after")
                and h["removed_not_leave"] == 0
                and h["fencing_errors"] == 0
                and h["client_session_timeouts"] == 0
                and h["request_timeouts"] == 0
                and oldest is not None
                and oldest < SESSION_MS
            )
            hb = rec["heartbeat_interval_ms"]
            hold["on_time"] = bool(
                hold["held"]
                and (hold.get("heartbeat_ratio") or 0) >= 0.9
                and oldest is not None
                and oldest <= 2 * hb
            )
            log(f"  held: {hold['held']}, heartbeats on time: {hold['on_time']} ({h})")
        rec["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
        if not args.keep:
            shutil.rmtree(p.events_dir, ignore_errors=True)


# ====================================================================== reporting


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "python_impl": platform.python_implementation(),
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
    info["loadavg_at_start"] = [round(x, 2) for x in os.getloadavg()]
    return info


def largest_held(points: list[dict[str, Any]]) -> dict[str, Any]:
    """Per protocol (and time scale, when points of several are present).

    ``largest_held``: the largest N at which every sample that reached steady
    state held it; ``largest_on_time``: the same for heartbeats on time;
    ``largest_burst_start``: the largest N at which every all-at-once start
    settled. ``by_size`` counts the samples.
    """
    out: dict[str, Any] = {}
    scales = sorted({p.get("time_scale") for p in points if p.get("protocol")}, key=str)
    for proto in PROTOCOLS:
        for scale in scales:
            pts = [p for p in points if p.get("protocol") == proto and p.get("time_scale") == scale]
            if not pts:
                continue
            key = proto if len(scales) == 1 else f"{proto} @ time_scale {scale}"
            by: dict[int, Counter[str]] = defaultdict(Counter)
            for p in pts:
                c = by[p["members"]]
                c["samples"] += 1
                burst = str(p.get("start_mode", "all")).startswith("all")
                started = bool((p.get("start") or {}).get("settled"))
                c["burst_starts"] += burst
                c["burst_started"] += burst and started
                hold = p.get("hold") or {}
                if "held" in hold:
                    c["reached_hold"] += 1
                    c["held"] += bool(hold["held"])
                    c["on_time"] += bool(hold.get("on_time"))

            def best(ok: Callable[[Counter[str]], bool], by: dict[int, Counter[str]] = by) -> Any:
                return max((n for n, c in by.items() if ok(c)), default=None)

            out[key] = {
                "largest_held": best(lambda c: 0 < c["reached_hold"] == c["held"]),
                "largest_on_time": best(lambda c: 0 < c["reached_hold"] == c["on_time"]),
                "largest_burst_start": best(lambda c: 0 < c["burst_starts"] == c["burst_started"]),
                "by_size": {n: dict(c) for n, c in sorted(by.items())},
            }
    return out


def _f(v: Any, nd: int) -> str:
    if v is None or v == "":
        return "-"
    return f"{float(v):.{nd}f}"


def print_table(result: dict[str, Any]) -> None:
    cols = [
        ("protocol", 19),
        ("scale", 5),
        ("start", 7),
        ("N", 6),
        ("status", 10),
        ("start s", 8),
        ("start emu", 9),
        ("start cpu", 9),
        ("chg s", 7),
        ("chg emu", 7),
        ("chg req", 8),
        ("join", 6),
        ("sync", 6),
        ("hb", 7),
        ("fetch", 6),
        ("held", 5),
        ("hb%", 5),
        ("oldest", 7),
        ("tick99", 7),
        ("lagmax", 8),
        ("hold cpu%", 9),
        ("RSS MB", 7),
        ("load", 5),
    ]
    cfg = result["config"]
    print()
    print(
        f"Modern group scale (last run's config): time_scale={cfg['time_scale']} "
        f"(heartbeat 3 s classic / 5 s "
        f"consumer = {3000 * cfg['time_scale']:.0f}/{5000 * cfg['time_scale']:.0f} ms wall, "
        f"session 45 s = {45000 * cfg['time_scale']:.0f} ms wall); {cfg['brokers']} brokers, "
        f"{cfg['hosts']} hosts, {cfg['topics']} topic(s), {PARTITIONS_PER_MEMBER} partitions "
        f"per member; {result['machine'].get('cores')} cores, Python "
        f"{result['machine'].get('python')}, load at start "
        f"{result['machine'].get('loadavg_at_start')}"
    )
    print("  ".join(name.rjust(w) for name, w in cols))
    for p in result["points"]:
        st = p.get("start") or {}
        ch = p.get("change") or {}
        ho = p.get("hold") or {}
        req = ch.get("requests_by_kind") or {}
        hbreq = req.get("HeartbeatRequest", 0) + req.get("ConsumerGroupHeartbeatRequest", 0)
        row = [
            p.get("protocol", "?"),
            p.get("time_scale", "?"),
            ("burst" if str(p.get("start_mode", "all")).startswith("all") else "ramp")
            + ("+pkl" if p.get("pickled") else "")
            + ("?" if p.get("search") else ""),
            p.get("members"),
            str(p.get("status", "?"))[:10],
            _f(st.get("wall_s") if st.get("settled") else None, 2),
            _f(st.get("emulated_s") if st.get("settled") else None, 1),
            _f(st.get("cpu_s"), 1),
            _f(ch.get("wall_s") if ch.get("settled") else None, 2),
            _f(ch.get("emulated_s") if ch.get("settled") else None, 1),
            ch.get("requests", "-"),
            req.get("JoinGroupRequest", "-") if "classic" in str(p.get("protocol")) else "-",
            req.get("SyncGroupRequest", "-") if "classic" in str(p.get("protocol")) else "-",
            hbreq if ch else "-",
            req.get("OffsetFetchRequest", "-") if ch else "-",
            "-" if ho.get("held") is None else ("yes" if ho["held"] else "NO"),
            _f(100 * ho["heartbeat_ratio"] if ho.get("heartbeat_ratio") else None, 0),
            _f(ho.get("oldest_heartbeat_ms_max"), 0),
            _f((ho.get("host_tick") or {}).get("period_p99_ms"), 0),
            _f(ho.get("host_tick_lag_max_ms"), 0),
            _f(ho.get("cpu_pct_of_one_core"), 0),
            _f((p.get("rss_mb") or {}).get("VmHWM"), 0),
            _f((p.get("loadavg_before") or [None])[0], 0),
        ]
        print("  ".join(str(v).rjust(w) for v, (_, w) in zip(row, cols, strict=True)))
    print(
        "columns: scale = time_scale (wall s per emulated s); start = burst (all N members "
        "added at once) or ramp (--ramp-per-s; +pkl: --pickle); start s / start emu = wall / "
        "emulated seconds from the first member added to the settled group; start cpu = "
        "process CPU s of that phase; chg s / chg emu = the same for ONE member joining; "
        "chg req = coordinator requests during the change (join, sync, "
        "hb = heartbeats, fetch = OffsetFetch); held = steady state kept for the hold (no "
        "expiry, fencing, time-out or new generation); hb% = heartbeats served / due in the "
        "hold; oldest = oldest heartbeat seen by the coordinator in the hold (emulated ms); "
        "tick99 = hosts' tick period p99 (ms wall; nominal 20); lagmax = "
        "ConsumerHostCore.tick_lag_max_ms in the hold; hold cpu% = process CPU in the hold, "
        "% of one core; RSS MB = peak RSS of the point; load = 1-min load average before"
    )
    for proto, v in (result.get("largest_held") or {}).items():
        print(
            f"{proto}: largest held {v['largest_held']}, heartbeats on time up to "
            f"{v['largest_on_time']}, all-at-once start settles up to {v['largest_burst_start']}"
        )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description="Modern consumer groups (classic eager/cooperative, KIP-848): group scale."
    )
    ap.add_argument(
        "--sizes",
        type=lambda s: [int(x) for x in s.split(",") if x.strip()],
        default=None,
        help="comma-separated member counts (default 100,1000,10000)",
    )
    ap.add_argument(
        "--protocols",
        type=lambda s: [x.strip() for x in s.split(",") if x.strip()],
        default=list(PROTOCOLS),
        help=f"comma-separated, from {','.join(PROTOCOLS)}",
    )
    ap.add_argument("--quick", action="store_true", help="sizes 50,200 and a 10-interval hold")
    ap.add_argument(
        "--time-scale",
        type=float,
        default=0.1,
        help="wall seconds per emulated second (default 0.1)",
    )
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--hosts", type=int, default=2, help="ConsumerHostCores (default 2)")
    ap.add_argument("--topics", type=int, default=1, help="topics the partitions are spread over")
    ap.add_argument(
        "--hold-intervals",
        type=int,
        default=None,
        help="steady-state hold, in heartbeat intervals (default 20; --quick 10)",
    )
    ap.add_argument("--start-timeout", type=float, default=None, help="s; default 120+0.15*N")
    ap.add_argument("--settle-timeout", type=float, default=None, help="s; default 120+0.1*N")
    ap.add_argument(
        "--search",
        type=int,
        default=0,
        metavar="K",
        help="up to K extra bisection sizes per protocol that did not hold its largest size",
    )
    ap.add_argument(
        "--ramp-per-s",
        type=float,
        default=0.0,
        metavar="R",
        help="start: add members at R per wall second (default 0: all at once, as the "
        "orchestrator does)",
    )
    ap.add_argument(
        "--pickle", action="store_true", help="round-trip broker calls through pickle (Ray-like)"
    )
    ap.add_argument("--py-spy", type=Path, default=None, metavar="DIR", help="profile phases")
    ap.add_argument("--profile-min", type=int, default=10000, help="profile points with N >= this")
    ap.add_argument(
        "--max-point-s",
        type=float,
        default=900.0,
        help="wall-time bound of one point, even inside a blocking call (default 900)",
    )
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--keep", action="store_true", help="keep the event logs")
    ap.add_argument(
        "--append",
        action="store_true",
        help="add this run's points to the JSON at --out instead of replacing it",
    )
    args = ap.parse_args(argv)
    if args.sizes is None:
        args.sizes = list(QUICK_SIZES if args.quick else FULL_SIZES)
    if args.hold_intervals is None:
        args.hold_intervals = 10 if args.quick else 20
    bad = [x for x in args.protocols if x not in PROTOCOLS]
    if bad:
        ap.error(f"unknown protocol(s) {bad}; choose from {PROTOCOLS}")
    if any(n < 2 for n in args.sizes):
        ap.error("sizes must be >= 2")
    if not 0.01 <= args.time_scale <= 10:
        ap.error("--time-scale must be in [0.01, 10]")
    if args.brokers < 1 or args.hosts < 1 or args.topics < 1:
        ap.error("--brokers, --hosts and --topics must be >= 1")
    return args


def _write(path: Path, result: dict[str, Any]) -> None:
    result["largest_held"] = largest_held(result["points"])
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=1, default=str) + "\n")
    tmp.replace(path)


class PointTimeout(KeyboardInterrupt):
    """A point ran past ``--max-point-s``.

    Raised from a SIGALRM handler, so it also ends a point whose loop is
    blocked inside one long call (a broker exchange that never returns in
    time); like KeyboardInterrupt it leaves the event loop, whose shutdown
    then cancels the point's tasks (running their clean-up).
    """


async def _point_main(
    args: argparse.Namespace,
    protocol: str,
    n: int,
    work: Path,
    gcp: GcProbe,
    rec: dict[str, Any],
    change: bool,
) -> None:
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
    await run_point(args, protocol, n, work, gcp, rec, change=change)


def run_one(
    args: argparse.Namespace,
    protocol: str,
    n: int,
    work: Path,
    gcp: GcProbe,
    result: dict[str, Any],
    *,
    search: bool = False,
) -> None:
    """One point in its own event loop, bounded by ``--max-point-s`` of wall time."""
    rec: dict[str, Any] = {"search": True} if search else {}
    result["points"].append(rec)
    CLEANING[0] = False

    def alarm(_sig: int, _frame: Any) -> None:
        # Raised again every 5 s until the point's clean-up starts: an
        # exception raised where Python swallows it (a gc callback) is not lost.
        if not CLEANING[0]:
            raise PointTimeout

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, args.max_point_s, 5.0)
    try:
        asyncio.run(_point_main(args, protocol, n, work, gcp, rec, not search))
    except PointTimeout:
        rec["status"] = "timeout"
        rec["timeout_s"] = args.max_point_s
        log(f"  point timed out after {args.max_point_s:.0f} s wall ({rec.get('at_end')})")
    except (KeyboardInterrupt, asyncio.CancelledError):
        rec["status"] = "interrupted"
        raise
    except Exception as exc:
        rec["status"] = "error"
        rec["error"] = traceback.format_exc()
        log(f"  point failed: {type(exc).__name__}: {exc}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        _write(args.out, result)
        gc.collect()


def run_all(args: argparse.Namespace, work: Path, result: dict[str, Any]) -> None:
    gcp = GcProbe()
    try:
        for protocol in args.protocols:
            for n in args.sizes:
                run_one(args, protocol, n, work, gcp, result)
            # Bisection between the largest held and the smallest failed size.
            for _ in range(args.search):
                same = [p for p in result["points"] if p.get("time_scale") == args.time_scale]
                lh = largest_held(same).get(protocol, {})
                lo = lh.get("largest_held")
                failed = [
                    n
                    for n, c in (lh.get("by_size") or {}).items()
                    if c.get("held", 0) < c.get("samples", 0) and (lo is None or n > lo)
                ]
                hi = min(failed, default=None)
                if hi is None:
                    break
                lo = lo or 1
                n = round(math.sqrt(lo * hi))
                if n <= lo or n >= hi or hi / lo < 1.3:
                    break
                run_one(args, protocol, n, work, gcp, result, search=True)
    finally:
        gcp.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    previous: dict[str, Any] | None = None
    if args.append and args.out.exists():
        with contextlib.suppress(OSError, ValueError):
            previous = json.loads(args.out.read_text())
    args.run_index = len((previous or {}).get("runs", [])) if previous else 0
    work = Path(tempfile.mkdtemp(prefix="bench-modern-"))
    result: dict[str, Any] = {
        "benchmark": "modern_group",
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": [sys.executable, *sys.argv],
        "status": "running",
        "machine": machine_info(),
        "config": {
            "time_scale": args.time_scale,
            "kafka": KAFKA,
            "heartbeat_interval_wall_ms": {
                g: round(v * args.time_scale) for g, v in HB_INTERVAL_MS.items()
            },
            "session_timeout_wall_ms": round(SESSION_MS * args.time_scale),
            "brokers": args.brokers,
            "hosts": args.hosts,
            "topics": args.topics,
            "partitions_per_member": PARTITIONS_PER_MEMBER,
            "assignors": {p: assignor_for(p, None)[0] for p in args.protocols},
            "sizes": args.sizes,
            "protocols": args.protocols,
            "hold_intervals": args.hold_intervals,
            "host_tick_s": TICK_S,
            "fetching": "none (leaders={})",
            "transport": "in-process LocalBroker adapters, one loop, no Ray"
            + (", pickled both ways" if args.pickle else ", objects passed by reference"),
            "search": args.search,
            "start_mode": "all at once"
            if args.ramp_per_s <= 0
            else f"ramp {args.ramp_per_s:g} members/s wall",
        },
        "points": [],
    }
    if previous is not None:
        # One file, several invocations: each run's config is kept in "runs".
        runs = previous.get("runs") or [
            {k: previous.get(k) for k in ("started_at", "command", "config", "status", "machine")}
        ]
        result["runs"] = runs
        result["points"] = list(previous.get("points", []))
    result.setdefault("runs", [])
    this_run = {
        "started_at": result["started_at"],
        "command": result["command"],
        "config": result["config"],
        "machine": result["machine"],
    }
    result["runs"].append(this_run)
    status = "failed"
    try:
        run_all(args, work, result)
        status = "completed"
    except KeyboardInterrupt:
        status = "interrupted"
        log("interrupted: cleaning up")
    except asyncio.CancelledError:
        status = "interrupted"
        log("terminated: cleaning up")
    finally:
        result["status"] = status
        this_run["status"] = status
        result["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        result["wall_s"] = round(time.monotonic() - T0, 1)
        result["ru_maxrss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        result["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
        _write(args.out, result)
        if args.keep:
            log(f"work dir kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
        if result["points"]:
            print_table(result)
        log(f"results written to {args.out} (status {status})")
    return (
        0 if status == "completed" and all(p.get("status") == "ok" for p in result["points"]) else 1
    )


if __name__ == "__main__":
    sys.exit(main())
