#!/usr/bin/env python
"""Benchmark: issue 18's scale targets on the sim engine, one join and one crash.

What it measures: one ``run_scenario`` on the sim engine
(:class:`actors.sim.run.SimEngine`) of a scenario this script generates, in
the style of ``tests/bench/bench_scale.py``: ``--members`` consumers in one
group on ``--partitions`` partitions (topics of at most 10,000 partitions:
the 0.8 topic znode holds the whole assignment), 3 brokers, a trickle of
produced messages; at ``t_join`` one consumer joins, at ``t_crash`` the
median member crashes (no goodbye: only its session timeout tells the group).
Kafka's defaults otherwise, at ``time_scale`` 1.0 (the sim's time is virtual:
a slow machine makes the run longer, never late).

The issue's targets (design §6, step 14), each under 10 minutes of wall time:

* ``--protocol consumer --members 100000 --partitions 1000000`` (KIP-848,
  Kafka 4.3: the assignor runs at most once per second);
* ``--protocol zookeeper --members 2000`` (the 0.8 consumer's herd, on 10
  partitions per member).

Per run: wall seconds, process CPU seconds, peak RSS, virtual seconds, the
events written; per change (the join, the crash) the emulated seconds until
the last assignment event it caused (``settle_s``), until the first reaction
(``detect_s``), and whether the group *settled*: at the end of the change's
window every partition is owned by exactly one live member, the owners are the
live members, and (modern) the shares are balanced within one. On time:
the coordinators' heartbeat gaps (modern: the largest gap between two
contacts of a live member, against ``group.consumer.heartbeat.interval.ms`` /
``heartbeat.interval.ms``), and (legacy) the largest silence of a live
member's ZooKeeper session at the server (between two requests or pings,
against its negotiated timeout) with the sessions expired; the hosts' tick
lag. A sim run is a function of the scenario and seed, so the log digest is
printed and recorded too.

The full sizes exceed what a scenario *file* may hold
(``emulator/scenario/limits.py``: 200,000 partitions and 100,000 members in
all, bounds of the real engine's embedded ZooKeeper and Ray actors); the
script parses its generated TOML with those two bounds (and the replica
total) lifted for this process only.

A watchdog thread prints progress (virtual seconds, RSS, CPU) every
``--progress-s`` wall seconds and interrupts the run when its RSS passes
``--max-rss-gib``.

Results: a table on stdout and ``tests/bench/results/sim_scale.json``
(``--append`` adds the run to the file's ``runs``).

Usage::

    .venv/bin/python tests/bench/bench_sim_scale.py --members 1000 --partitions 10000
    .venv/bin/python tests/bench/bench_sim_scale.py --protocol zookeeper --members 200
    .venv/bin/python tests/bench/bench_sim_scale.py --members 100000 --partitions 1000000 --append
    .venv/bin/python tests/bench/bench_sim_scale.py --protocol zookeeper --members 2000 --append
"""

from __future__ import annotations

import _thread
import argparse
import contextlib
import gc
import json
import math
import os
import resource
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from emulator.scenario.limits import MAX_MEMBERS_PER_HOST  # noqa: E402
from tests.bench._document import header, write  # noqa: E402

RESULTS = ROOT / "tests" / "bench" / "results"
MAX_PARTITIONS_PER_TOPIC = 10_000
#: The session timeout each protocol detects the crash with (Kafka's defaults).
SESSION_S = {
    "zookeeper": 6.0,  # zookeeper.session.timeout.ms
    "classic-eager": 45.0,  # session.timeout.ms (3.0+)
    "classic-cooperative": 45.0,
    "consumer": 45.0,  # group.consumer.session.timeout.ms
}
HEARTBEAT_S = {"classic-eager": 3.0, "classic-cooperative": 3.0, "consumer": 5.0}


# ------------------------------------------------------------------ scenario


# The ZooKeeper-mode controller brings a new topic's partitions online one ZooKeeper
# write after another: about 4 ms of emulated time per partition on the sim's
# loopback latency (20,000 partitions took ~80 s); 5 ms leaves a margin. The legacy
# group's start herd only begins to settle once they are all there.
ZK_CONTROLLER_S_PER_PARTITION = 0.005


def timeline_s(protocol: str, members: int, partitions: int) -> tuple[float, float, float]:
    """Default ``(t_join, t_crash, duration)`` in emulated seconds for a group size.

    The start and each change get room to settle (measured on the sim: a
    KIP-848 group settles within two heartbeat intervals of a change; the
    legacy herd's rounds grow with the group, and its start waits for the
    ZooKeeper-mode controller to bring ``partitions`` online first).
    """
    if protocol == "zookeeper":
        start = 20.0 + 0.03 * members + ZK_CONTROLLER_S_PER_PARTITION * partitions
        change = 20.0 + 0.03 * members
    else:
        start = 20.0 + 0.0001 * members
        change = 20.0 + 0.0001 * members
    t_join = round(start, 1)
    t_crash = round(t_join + change, 1)
    return t_join, t_crash, round(t_crash + SESSION_S[protocol] + change, 1)


def scenario_toml(args: argparse.Namespace) -> str:
    """The generated scenario of one run (the style of ``emulator/scenarios/*.toml``)."""
    n, p = args.members, args.partitions
    n_topics = math.ceil(p / MAX_PARTITIONS_PER_TOPIC)
    sizes = [p // n_topics + (1 if i < p % n_topics else 0) for i in range(n_topics)]
    topics = "\n".join(
        f'[[topics]]\nname = "scale-{i}"\npartitions = {size}\nreplication_factor = 1\n'
        for i, size in enumerate(sizes)
    )
    # 10 hosts, or as many as keep each within a host's bound (the joiner counted).
    hosts = args.hosts or max(10, math.ceil((n + 1) / MAX_MEMBERS_PER_HOST))
    per_host = max(1, math.ceil((n + 1) / hosts))
    version = f'kafka_version = "{args.kafka_version}"\n' if args.kafka_version else ""
    return f"""# generated by tests/bench/bench_sim_scale.py
name = "sim-scale-{args.protocol}-{n}"
description = "{n} consumers, {p} partitions: one joins at {args.join_at} s, one crashes at \
{args.crash_at} s"
seed = {args.seed}
duration_s = {args.duration}
time_scale = 1.0
{version}
[cluster]
brokers = 3
zookeeper_ensemble = 1

{topics}
[producer]
rate_per_s = {args.rate}
partitioner = "round-robin"
batch_size = 50

[group]
id = "sim-scale"
consumers = {n}
processing_ms_per_message = 1.0
consumers_per_host = {per_host}

[kafka]
"auto.offset.reset" = "smallest"

[[timeline]]
at_s = {args.join_at}
action = "join"

[[timeline]]
at_s = {args.crash_at}
action = "crash"
member = "c-{n // 2}"
"""


@contextlib.contextmanager
def lifted_limits() -> Iterator[None]:
    """Lift the scenario-file bounds the full targets exceed, for this process only.

    ``MAX_PARTITIONS_TOTAL`` (200,000), ``MAX_REPLICAS_TOTAL`` (600,000) and
    ``MAX_MEMBERS`` (100,000, joins included) bound the real engine (the
    embedded ZooKeeper's heap, Ray actors); the sim holds its ZooKeeper and
    actors in this process.
    """
    from emulator.scenario import parse, timeline

    # Each module that checks a bound holds its own name of it.
    names = ("MAX_PARTITIONS_TOTAL", "MAX_REPLICAS_TOTAL", "MAX_MEMBERS")
    saved = [(m, k, getattr(m, k)) for m in (parse, timeline) for k in names if hasattr(m, k)]
    try:
        for m, k, _v in saved:
            setattr(m, k, 10**9)
        yield
    finally:
        for m, k, v in saved:
            setattr(m, k, v)


@contextlib.contextmanager
def waits_of_at_least(seconds: float) -> Iterator[None]:
    """Every bounded wait of the orchestrator on the sim's actors lasts at least ``seconds``.

    The orchestrator gives the brokers' controllers 120 (virtual) seconds to
    start (``ProtocolRun._run``). Kafka 0.8.2's controller writes the state
    znode of each new partition one after the other (``onControllerFailover``:
    a read, then ``createPersistentPath`` with its parents), about 4 ms of
    virtual time per partition on the sim's ZooKeeper: beyond ~25,000
    partitions it needs longer. A bound only matters when it is reached, so
    a run that finishes within it is the same run (the same log digest).
    """
    from actors.sim.system import SimActorSystem

    get = SimActorSystem.get

    def patient(self: SimActorSystem, refs: Any, timeout: float) -> Any:
        return get(self, refs, max(timeout, seconds))

    SimActorSystem.get = patient  # type: ignore[method-assign]
    try:
        yield
    finally:
        SimActorSystem.get = get  # type: ignore[method-assign]


# ------------------------------------------------------------------ watching


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Watchdog(threading.Thread):
    """Prints progress every ``every_s`` wall seconds; interrupts the run past ``max_rss``."""

    def __init__(self, engine: Any, protocol: str, every_s: float, max_rss: int) -> None:
        super().__init__(daemon=True, name="bench-watchdog")
        self.engine, self.protocol = engine, protocol
        self.every_s, self.max_rss = every_s, max_rss
        self.stop = threading.Event()
        self.peak_rss = 0
        self.tripped = False
        self.t0 = time.monotonic()
        self.cpu0 = _cpu_s()

    def virtual_s(self) -> float | None:
        """The protocol world's virtual seconds so far (``None`` before it exists)."""
        system = self.engine.systems.get(self.protocol)
        return None if system is None else system.loop.time()

    def run(self) -> None:
        last = time.monotonic()
        while not self.stop.wait(1.0):
            rss = _rss_bytes()
            self.peak_rss = max(self.peak_rss, rss)
            if rss > self.max_rss and not self.tripped:
                self.tripped = True
                print(f"\nRSS {rss / 2**30:.1f} GiB > limit: interrupting the run", flush=True)
                _thread.interrupt_main()
            now = time.monotonic()
            if now - last >= self.every_s:
                last = now
                v = self.virtual_s()
                print(
                    f"  [{now - self.t0:7.0f} s wall, {_cpu_s() - self.cpu0:7.0f} s CPU] "
                    f"virtual {'-' if v is None else f'{v:8.1f}'} s, RSS {rss / 2**30:5.2f} GiB",
                    flush=True,
                )


class GcTimer:
    """Time spent in the cyclic garbage collector, per generation (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.seconds = [0.0, 0.0, 0.0]
        self.collections = [0, 0, 0]
        self._t0 = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._t0 = time.process_time()
        else:
            g = info["generation"]
            self.seconds[g] += time.process_time() - self._t0
            self.collections[g] += 1

    def report(self) -> dict[str, Any]:
        """CPU seconds and collections per generation."""
        return {
            "cpu_s": round(sum(self.seconds), 2),
            "cpu_s_by_generation": [round(x, 2) for x in self.seconds],
            "collections_by_generation": list(self.collections),
        }


class SessionGaps:
    """Per ZooKeeper session, the longest silence the (simulated) server saw.

    Wraps :meth:`zk_registry.sim.server.SimEnsemble._touch` (called on every
    request and ping of a session, ZooKeeper's ``touchSession``) to keep each
    session's last touch and its longest gap; instrumentation only.
    """

    def __init__(self) -> None:
        self.last: dict[int, int] = {}
        self.max_gap: dict[int, int] = {}
        self.timeout: dict[int, int] = {}

    def install(self) -> None:
        """Wrap ``_touch`` (for the rest of the process)."""
        from zk_registry.sim import server

        touch = server.SimEnsemble._touch
        gaps = self

        def counted(ens: Any, s: Any, timeout_ms: int) -> bool:
            now = ens.loop.now_ns
            last = gaps.last.get(s.id)
            if last is not None:
                gap = now - last
                if gap > gaps.max_gap.get(s.id, 0):
                    gaps.max_gap[s.id] = gap
            gaps.last[s.id] = now
            gaps.timeout[s.id] = timeout_ms
            return touch(ens, s, timeout_ms)

        server.SimEnsemble._touch = counted  # type: ignore[method-assign,assignment]


# ------------------------------------------------------------------ analysis

#: What gives and takes a member's partitions, per generation (legacy: the owner znodes).
ASSIGN = {"legacy": {"ownership_claimed"}, "modern": {"partitions_assigned"}}
UNASSIGN = {
    "legacy": {"ownership_released"},
    "modern": {"partitions_revoked", "partitions_lost"},
}
MODERN_SETTLE = {
    "partitions_assigned",
    "partitions_revoked",
    "partitions_lost",
    "target_assignment",
    "group_state_changed",
}
LEGACY_SETTLE = {"rebalance_completed", "ownership_claimed"}
DETECT = {"watch_fired", "member_removed"}
GONE = {"consumer_crashed", "consumer_stopped"}


def analyse(run_dir: Path, protocol: str, n: int, all_partitions: int) -> dict[str, Any]:
    """Settle times and the ownership at the end of each window, from the event logs."""
    from emulator.eventlog import read_run_events
    from emulator.sim.invariants import parse_partitions

    legacy = protocol == "zookeeper"
    settle_kinds = LEGACY_SETTLE if legacy else MODERN_SETTLE
    gen = "legacy" if legacy else "modern"
    assign, unassign = ASSIGN[gen], UNASSIGN[gen]
    counts: dict[str, int] = {}
    removed: list[tuple[float, str]] = []
    changes: list[tuple[float, int, str, str, tuple[tuple[str, int], ...]]] = []
    actions: dict[str, float] = {}
    t_end = 0.0
    order = 0
    for e in read_run_events(run_dir / protocol / "events"):
        kind = str(e["kind"])
        counts[kind] = counts.get(kind, 0) + 1
        t = float(e["t_emu_ms"])  # type: ignore[arg-type]
        order += 1
        if kind == "member_removed":
            removed.append((float(e["t_emu_ms"]), str(e.get("reason"))))  # type: ignore[arg-type]
        if kind == "action_applied":
            reason = str(e.get("reason"))
            if reason in ("join", "crash", "producer_stopped") and reason not in actions:
                actions[reason] = t
            continue
        if kind in settle_kinds or kind in DETECT or kind in GONE or kind in assign | unassign:
            member = str(e.get("member") or "")
            if kind in ("ownership_claimed", "ownership_released"):
                tps: tuple[tuple[str, int], ...] = ((str(e["topic"]), int(e["partition"])),)  # type: ignore[call-overload]
            elif kind in assign | unassign:
                tps = tuple(parse_partitions(e.get("partitions")))
            else:
                tps = ()
            changes.append((t, order, kind, member, tps))
        t_end = max(t_end, t)
    changes.sort()
    t_join = actions.get("join", math.nan)
    t_crash = actions.get("crash", math.nan)
    t_stop = actions.get("producer_stopped", t_end)
    crashed = f"c-{n // 2}"

    owner: dict[tuple[str, int], set[str]] = {}
    gone: set[str] = set()
    members_seen: set[str] = set()
    i = 0

    def advance(until: float) -> None:
        nonlocal i
        while i < len(changes) and changes[i][0] < until:
            _, _, kind, member, tps = changes[i]
            i += 1
            if member:
                members_seen.add(member)
            if kind in GONE:
                gone.add(member)
            elif kind in assign:
                for tp in tps:
                    owner.setdefault(tp, set()).add(member)
            elif kind in unassign:
                for tp in tps:
                    s = owner.get(tp)
                    if s is not None:
                        s.discard(member)

    def state(live: set[str]) -> dict[str, Any]:
        per: dict[str, int] = dict.fromkeys(live, 0)
        doubly = by_dead = owned = 0
        for holders in owner.values():
            alive = [m for m in holders if m in live]
            if len(holders) > len(alive):
                by_dead += 1
            if not alive:
                continue
            owned += 1
            if len(alive) > 1:
                doubly += 1
            for m in alive:
                per[m] = per.get(m, 0) + 1
        unowned = all_partitions - owned
        shares = list(per.values())
        spread = (max(shares) - min(shares)) if shares else None
        # a crashed member never says it lost its partitions: its holdings are not counted
        ok = unowned == 0 and doubly == 0
        if not legacy:  # the uniform / range shares of one topic set: balanced within one
            ok = ok and spread is not None and spread <= 1
        return {
            "settled": ok,
            "unowned": unowned,
            "owned_twice": doubly,
            "held_by_gone": by_dead,
            "owners": sum(1 for s in shares if s),
            "live_members": len(live),
            "share_min": min(shares) if shares else None,
            "share_max": max(shares) if shares else None,
        }

    def window(t0: float, t1: float) -> dict[str, Any]:
        win = [c for c in changes if t0 <= c[0] < t1]
        settle = [c[0] for c in win if c[2] in settle_kinds]
        detect = [c[0] for c in win if c[2] in DETECT]
        advance(t1)
        live = {m for m in members_seen if m not in gone}
        return {
            "at_s": round(t0 / 1000.0, 3),
            "settle_s": round((max(settle) - t0) / 1000.0, 3) if settle else None,
            "detect_s": round((min(detect) - t0) / 1000.0, 3) if detect else None,
            "assignment_events": len(settle),
            **state(live),
        }

    start = window(0.0, t_join)
    join = window(t_join, t_crash)
    crash = window(t_crash, t_stop)
    return {
        "events": sum(counts.values()),
        "events_by_kind": dict(sorted(counts.items())),
        "start": start,
        "join": join,
        "crash": crash,
        "crashed_member": crashed,
        # before the producer stops (the members' leaves at the end are not counted)
        "members_removed_by_reason": {
            r: sum(1 for t, why in removed if why == r and t < t_stop)
            for r in sorted({why for t, why in removed if t < t_stop})
        },
    }


# ------------------------------------------------------------------ the run


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """One run of the generated scenario on the sim engine, and its numbers."""
    from actors.orchestrator import run_scenario
    from actors.sim.run import SimEngine
    from emulator.scenario import parse_scenario

    text = scenario_toml(args)
    with lifted_limits():
        scenario = parse_scenario(text, f"sim-scale-{args.protocol}-{args.members}.toml")
    gaps = SessionGaps()
    if args.protocol == "zookeeper":
        gaps.install()
    engine = SimEngine(seed=args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="bench-sim-scale-", dir=args.workdir))
    run_dir = tmp / "run"
    watchdog = Watchdog(engine, args.protocol, args.progress_s, int(args.max_rss_gib * 2**30))
    point: dict[str, Any] = {
        "protocol": args.protocol,
        "members": args.members,
        "partitions": args.partitions,
        "topics": math.ceil(args.partitions / MAX_PARTITIONS_PER_TOPIC),
        "hosts": scenario.host_count,
        "kafka_version": scenario.kafka_version,
        "timeline_s": {"join": args.join_at, "crash": args.crash_at, "end": args.duration},
    }
    gc_timer = GcTimer()
    gc.callbacks.append(gc_timer)
    watchdog.start()
    c0, w0 = _cpu_s(), time.monotonic()
    floor = args.start_timeout_s
    if floor is None:
        floor = 120.0 + 0.006 * (args.partitions + 50)
    point["orchestrator_wait_floor_s"] = floor
    try:
        with waits_of_at_least(floor):
            (result,) = run_scenario(scenario, [args.protocol], run_dir, engine=engine)
        point["status"] = result.status
        point["notes"] = list(result.notes)
    except KeyboardInterrupt:
        point["status"] = "rss_limit" if watchdog.tripped else "interrupted"
    except Exception as exc:  # the run failed: say how, keep the figures so far
        point["status"] = "error"
        point["error"] = f"{type(exc).__name__}: {exc}"[:1000]
    finally:
        point["wall_s"] = round(time.monotonic() - w0, 1)
        point["cpu_s"] = round(_cpu_s() - c0, 1)
        gc.callbacks.remove(gc_timer)
        point["gc"] = gc_timer.report()
        watchdog.stop.set()
        watchdog.join()
        point["peak_rss_gib"] = round(
            max(watchdog.peak_rss, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
            / 2**30,
            2,
        )
        point["virtual_s"] = watchdog.virtual_s()
    if point["status"] in ("rss_limit", "interrupted", "error"):
        shutil.rmtree(tmp, ignore_errors=True)
        return point
    manifest = json.loads((run_dir / "manifest.json").read_text())
    pm = manifest.get("protocols", {}).get(args.protocol, {})
    point["log_digest"] = manifest["engine"]["log_digest"][args.protocol]
    point["virtual_s"] = manifest["engine"].get("virtual_s", {}).get(args.protocol)
    a0 = time.monotonic()
    point.update(analyse(run_dir, args.protocol, args.members, args.partitions))
    point["analysis_wall_s"] = round(time.monotonic() - a0, 1)
    actors = pm.get("resources", {}).get("actors", {})
    lags = [
        float(v.get("tick_lag_max_ms", 0.0)) for k, v in actors.items() if k.startswith("host-")
    ]
    on_time: dict[str, Any] = {"host_tick_lag_max_ms": round(max(lags), 3) if lags else None}
    crashed = point["crashed_member"]
    removed = point["members_removed_by_reason"]
    if args.protocol == "zookeeper":
        live_gaps = [
            (gaps.max_gap[sid] / 1e6, gaps.timeout[sid])
            for sid in gaps.max_gap
            if sid in gaps.timeout
        ]
        worst = max(live_gaps, default=(0.0, 0))
        on_time.update(
            zk_sessions=len(gaps.timeout),
            zk_session_silence_max_ms=round(worst[0], 3),
            zk_session_silence_max_fraction=round(
                max((g / t for g, t in live_gaps), default=0.0), 4
            ),
            zk_sessions_expired=point["events_by_kind"].get("zk_session_expired", 0),
        )
    else:
        snaps = pm.get("resources", {}).get("coordinator", [])
        last = snaps[-1] if snaps else {}
        hist = [int(x) for x in last.get("heartbeat_gap_histogram") or []]
        bounds = [float(b) for b in last.get("heartbeat_gap_bounds_ms") or []]
        interval_ms = 1000.0 * HEARTBEAT_S[args.protocol]
        late = sum(
            c for i, c in enumerate(hist) if i >= len(bounds) or bounds[i] > interval_ms + 500
        )
        on_time.update(
            heartbeat_interval_s=HEARTBEAT_S[args.protocol],
            heartbeat_gaps=sum(hist),
            heartbeat_gap_max_s=round(float(last.get("heartbeat_gap_max_ms", 0.0)) / 1000.0, 3),
            heartbeat_gaps_over_interval_plus_500ms=late,
            members_removed=removed,
        )
    del crashed
    point["on_time"] = on_time
    if args.keep_run:
        dest = Path(args.keep_run)
        shutil.rmtree(dest, ignore_errors=True)
        shutil.move(str(run_dir), dest)
        point["run_dir"] = str(dest)
    shutil.rmtree(tmp, ignore_errors=True)
    return point


def print_point(p: dict[str, Any]) -> None:
    """One run's summary lines."""
    print(
        f"\n{p['protocol']} {p['members']:,} members x {p['partitions']:,} partitions "
        f"({p['hosts']} hosts): {p['status']}"
    )
    print(
        f"  wall {p['wall_s']} s, CPU {p['cpu_s']} s (GC {p['gc']['cpu_s']} s), "
        f"peak RSS {p['peak_rss_gib']} GiB, "
        f"virtual {p.get('virtual_s')} s, events {p.get('events', '-'):,}"
        if "events" in p
        else f"  wall {p['wall_s']} s, CPU {p['cpu_s']} s, peak RSS {p['peak_rss_gib']} GiB"
    )
    for name in ("start", "join", "crash"):
        w = p.get(name)
        if w:
            print(
                f"  {name:5}: settled {w['settled']}, settle {w['settle_s']} s, "
                f"detect {w['detect_s']} s, unowned {w['unowned']}, owned twice "
                f"{w['owned_twice']}, owners {w['owners']}/{w['live_members']}, "
                f"shares {w['share_min']}-{w['share_max']}"
            )
    if "on_time" in p:
        print(f"  on time: {json.dumps(p['on_time'])}")
    if "gc" in p:
        print(f"  gc: {json.dumps(p['gc'])}")
    if "log_digest" in p:
        print(f"  log digest {p['log_digest']}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--protocol", default="consumer")
    ap.add_argument("--members", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=None, help="default: 10 per member")
    ap.add_argument(
        "--hosts", type=int, default=None, help="consumer hosts (10, more above 10,000 a host)"
    )
    ap.add_argument("--rate", type=float, default=200.0, help="produced messages per s (200)")
    ap.add_argument("--kafka-version", default=None, help="default: 4.3 for the modern protocols")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--join-at", type=float, default=None, help="emulated s (default: by size)")
    ap.add_argument("--crash-at", type=float, default=None)
    ap.add_argument("--duration", type=float, default=None)
    ap.add_argument(
        "--start-timeout-s",
        type=float,
        default=None,
        help="least virtual s the orchestrator waits for an actor call (default: "
        "120 + 6 ms per partition, for the controller's start-up)",
    )
    ap.add_argument("--max-rss-gib", type=float, default=14.0)
    ap.add_argument("--progress-s", type=float, default=30.0, help="wall s between progress lines")
    ap.add_argument("--workdir", default=None, help="where the run directory goes (a temp dir)")
    ap.add_argument("--keep-run", default=None, help="move the run directory here")
    ap.add_argument("--out", type=Path, default=RESULTS / "sim_scale.json")
    ap.add_argument("--append", action="store_true", help="add to --out's runs")
    ap.add_argument("--no-write", action="store_true", help="print only")
    args = ap.parse_args()
    if args.partitions is None:
        args.partitions = 10 * args.members
    if args.kafka_version is None and args.protocol != "zookeeper":
        args.kafka_version = "4.3"
    t_join, t_crash, end = timeline_s(args.protocol, args.members, args.partitions)
    args.join_at = t_join if args.join_at is None else args.join_at
    args.crash_at = t_crash if args.crash_at is None else args.crash_at
    args.duration = end if args.duration is None else args.duration
    started = time.time()
    point = measure(args)
    print_point(point)
    if args.no_write:
        return 0 if point.get("status") == "completed" else 1
    doc = header("sim_scale", started, args)
    runs: list[dict[str, Any]] = []
    if args.append and args.out.exists():
        runs = list(json.loads(args.out.read_text()).get("runs", []))
    runs.append({"args": doc.pop("args"), "scenario_toml": scenario_toml(args), **point})
    doc["runs"] = runs
    write(args.out, doc, ROOT)
    return 0 if point.get("status") == "completed" else 1


if __name__ == "__main__":
    sys.exit(main())
