"""Scale benchmark: what one join and one crash cost each generation as the group grows.

Every point is a real run of the product (``rebalance-emu run`` in a
subprocess: embedded ZooKeeper, local Ray, brokers and consumer hosts as
actors), on a scenario generated for the point:

* N consumers in one group on 10·N partitions (3 brokers), in topics of at
  most 10,000 partitions;
* members spread over at most ``--hosts`` consumer-host actors;
* a trickle of produced messages (``--rate``), so members fetch and commit;
* at ``t_join`` one consumer joins, at ``t_crash`` the median member crashes
  (no goodbye: the protocol only learns of it through the session timeout).

From the run's event log and manifest, per point:

* ``join.settle_s`` / ``crash.settle_s``: emulated seconds from the action to
  the last assignment event it caused (legacy: ``rebalance_completed``,
  ``ownership_claimed``; modern: ``partitions_assigned/revoked/lost``,
  ``target_assignment``, ``group_state_changed``), before the next action;
  ``crash.detect_s``: to the first reaction (a watch firing, a member removed);
* ZooKeeper reads, writes and watch notifications of the members (legacy),
  per change from the attempts' ``zk_*`` fields, and for the whole run from the
  hosts' counters;
* coordinator requests by kind (modern), per change from the orchestrator's
  snapshots (``manifest.protocols.<p>.resources.coordinator``);
* CPU seconds and peak RSS of every host actor and broker actor;
* on time: legacy = no ZooKeeper session of a live member suspended or
  expired; modern = no member but the crashed one removed, with the largest
  heartbeat gap the coordinators saw.

Writes ``tests/bench/results/scale.json`` (after every point, so an
interrupted sweep keeps what it measured) and ``scale.png`` (log-log, with the
fitted growth exponent of each curve). Run from the repository root::

    .venv/bin/python tests/bench/bench_scale.py                      # the full sweep
    .venv/bin/python tests/bench/bench_scale.py --quick              # 10 and 50 members
    .venv/bin/python tests/bench/bench_scale.py --protocols consumer --sizes 1000,10000 --append
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from emulator.eventlog import read_run_events  # noqa: E402
from emulator.events import EventKind  # noqa: E402

RESULTS = ROOT / "tests" / "bench" / "results"
LEGACY_SIZES = (10, 50, 100, 200, 500)
MODERN_SIZES = (10, 100, 1000, 3000, 10000)
DEFAULT_PROTOCOLS = ("zookeeper", "classic-eager", "classic-cooperative", "consumer")

#: Emulated seconds allowed for N members to start and settle before the join,
#: and for one change to settle (measured on this machine, with headroom).
START_S = {
    "zookeeper": lambda n: 15.0 + 0.12 * n,
    "classic-eager": lambda n: 15.0 + 0.006 * n,
    "classic-cooperative": lambda n: 15.0 + 0.006 * n,
    "consumer": lambda n: 15.0 + 0.005 * n,
}
CHANGE_S = {
    "zookeeper": lambda n: 20.0 + 0.15 * n,
    "classic-eager": lambda n: 15.0 + 0.004 * n,
    "classic-cooperative": lambda n: 20.0 + 0.006 * n,
    "consumer": lambda n: 20.0 + 0.004 * n,
}
#: The session timeout each protocol detects the crash with (Kafka's defaults).
SESSION_S = {
    "zookeeper": 6.0,  # zookeeper.session.timeout.ms
    "classic-eager": 45.0,  # session.timeout.ms (3.0+)
    "classic-cooperative": 45.0,
    "consumer": 45.0,  # group.consumer.session.timeout.ms
}
MAX_PARTITIONS_PER_TOPIC = 10_000
HEARTBEAT_S = {"classic-eager": 3.0, "classic-cooperative": 3.0, "consumer": 5.0}

LEGACY_SETTLE = {EventKind.REBALANCE_COMPLETED.value, EventKind.OWNERSHIP_CLAIMED.value}
MODERN_SETTLE = {
    EventKind.PARTITIONS_ASSIGNED.value,
    EventKind.PARTITIONS_REVOKED.value,
    EventKind.PARTITIONS_LOST.value,
    EventKind.TARGET_ASSIGNMENT.value,
    EventKind.GROUP_STATE_CHANGED.value,
}
DETECT = {EventKind.WATCH_FIRED.value, EventKind.MEMBER_REMOVED.value}


def scenario_toml(
    protocol: str, n: int, hosts: int, rate: float, time_scale: float, kafka_version: str
) -> str:
    """The generated scenario of one point."""
    t_join = round(START_S[protocol](n), 1)
    t_crash = round(t_join + CHANGE_S[protocol](n), 1)
    duration = round(t_crash + SESSION_S[protocol] + CHANGE_S[protocol](n), 1)
    per_host = max(1, math.ceil(n / hosts))
    # At most 10,000 partitions per topic: the 0.8 topic znode holds the whole
    # assignment, and one of 100,000 partitions outgrows ZooKeeper's 1 MB
    # jute.maxbuffer.
    n_topics = math.ceil(10 * n / MAX_PARTITIONS_PER_TOPIC)
    sizes = [10 * n // n_topics + (1 if i < 10 * n % n_topics else 0) for i in range(n_topics)]
    topics = "\n".join(
        f'[[topics]]\nname = "scale-{i}"\npartitions = {size}\nreplication_factor = 1\n'
        for i, size in enumerate(sizes)
    )
    return f"""# generated by tests/bench/bench_scale.py
name = "scale-{protocol}-{n}"
description = "{n} consumers, {10 * n} partitions: a join at {t_join} s, a crash at {t_crash} s"
seed = 7
duration_s = {duration}
time_scale = {time_scale}
kafka_version = "{kafka_version}"

[cluster]
brokers = 3
zookeeper_ensemble = 1

{topics}
[producer]
rate_per_s = {rate}
partitioner = "round-robin"
batch_size = 50

[group]
id = "scale"
consumers = {n}
processing_ms_per_message = 1.0
consumers_per_host = {per_host}

[kafka]
"auto.offset.reset" = "smallest"

[[timeline]]
at_s = {t_join}
action = "join"

[[timeline]]
at_s = {t_crash}
action = "crash"
member = "c-{n // 2}"
"""


def _window(events: list[dict[str, Any]], t0: float, t1: float) -> Iterable[dict[str, Any]]:
    return (e for e in events if t0 <= float(e["t_emu_ms"]) < t1)


def analyse(run_dir: Path, protocol: str, n: int) -> dict[str, Any]:
    """The point's numbers, from its manifest and event log."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    pm = manifest.get("protocols", {}).get(protocol, {})
    events = sorted(
        read_run_events(run_dir / protocol / "events"), key=lambda e: float(e["t_emu_ms"])
    )
    actions = [
        e
        for e in events
        if e["kind"] == EventKind.ACTION_APPLIED.value and e.get("reason") in ("join", "crash")
    ]
    t_join = next((float(e["t_emu_ms"]) for e in actions if e["reason"] == "join"), math.nan)
    t_crash = next((float(e["t_emu_ms"]) for e in actions if e["reason"] == "crash"), math.nan)
    # The timeline ends when the producer stops; the members' leaves at the end
    # of the run are not part of the crash's rebalance.
    t_end = next(
        (
            float(e["t_emu_ms"])
            for e in events
            if e["kind"] == EventKind.ACTION_APPLIED.value and e.get("reason") == "producer_stopped"
        ),
        max((float(e["t_emu_ms"]) for e in events), default=math.nan),
    )
    legacy = protocol == "zookeeper"
    settle_kinds = LEGACY_SETTLE if legacy else MODERN_SETTLE
    crashed = f"c-{n // 2}"

    def change(t0: float, t1: float) -> dict[str, Any]:
        win = list(_window(events, t0, t1))
        settle = [float(e["t_emu_ms"]) for e in win if e["kind"] in settle_kinds]
        detect = [float(e["t_emu_ms"]) for e in win if e["kind"] in DETECT]
        out: dict[str, Any] = {
            "settle_s": round((max(settle) - t0) / 1000.0, 3) if settle else None,
            "detect_s": round((min(detect) - t0) / 1000.0, 3) if detect else None,
            "assignment_events": len(settle),
        }
        if legacy:
            att = [e for e in win if e["kind"] == EventKind.ATTEMPT_FINISHED.value]
            out.update(
                zk_reads=sum(int(e.get("zk_reads", 0)) for e in att),
                zk_writes=sum(int(e.get("zk_writes", 0)) for e in att),
                zk_watch_notifications=sum(
                    1 for e in win if e["kind"] == EventKind.WATCH_FIRED.value
                ),
                attempts=len(att),
                conflicts=sum(1 for e in win if e["kind"] == EventKind.CLAIM_CONFLICT.value),
                gave_up=sum(1 for e in win if e["kind"] == EventKind.REBALANCE_FAILED.value),
            )
        else:
            states = [e for e in win if e["kind"] == EventKind.GROUP_STATE_CHANGED.value]
            out["final_state"] = states[-1].get("state") if states else None
            out["generations"] = len({e.get("group_epoch", e.get("generation")) for e in states})
        return out

    join = change(t_join, t_crash)
    crash = change(t_crash, t_end)
    # Requests between snapshots: the snapshot after the join .. after the crash, etc.
    snaps = pm.get("resources", {}).get("coordinator", [])
    if not legacy and snaps:
        by_after = {s["after"]: s for s in snaps}

        def diff(a: str | None, b: str) -> dict[str, int]:
            hi = by_after.get(b, {}).get("requests_by_kind", {})
            lo = by_after.get(a, {}).get("requests_by_kind", {}) if a else {}
            return {
                k: int(v) - int(lo.get(k, 0)) for k, v in hi.items() if int(v) - int(lo.get(k, 0))
            }

        join["coordinator_requests"] = diff("join", "crash")
        crash["coordinator_requests"] = diff("crash", "end")
        join["coordinator_requests_total"] = sum(join["coordinator_requests"].values())
        crash["coordinator_requests_total"] = sum(crash["coordinator_requests"].values())
    # Settled before the join at all?
    before = [float(e["t_emu_ms"]) for e in _window(events, 0, t_join) if e["kind"] in settle_kinds]
    actors = pm.get("resources", {}).get("actors", {})
    hosts = {k: v for k, v in actors.items() if k.startswith("host-")}
    brokers = {k: v for k, v in actors.items() if k.startswith("broker-")}
    point: dict[str, Any] = {
        "protocol": protocol,
        "members": n,
        "partitions": 10 * n,
        "status": pm.get("status", manifest.get("status")),
        "wall_s": pm.get("wall_s"),
        "time_scale": manifest.get("scenario", {}).get("time_scale"),
        "start_settle_s": round(max(before) / 1000.0, 3) if before else None,
        "join_at_s": round(t_join / 1000.0, 3),
        "crash_at_s": round(t_crash / 1000.0, 3),
        "join": join,
        "crash": crash,
        "hosts": {
            k: {
                "members": sum(
                    1 for h in pm.get("placement", {}).get("members", {}).values() if h == k
                ),
                "cpu_s": v.get("cpu_s"),
                "peak_rss_mib": v.get("peak_rss_mib"),
                "tick_lag_max_ms": round(float(v.get("tick_lag_max_ms", 0.0)), 1),
            }
            for k, v in sorted(hosts.items())
        },
        "brokers": {
            k: {"cpu_s": v.get("cpu_s"), "peak_rss_mib": v.get("peak_rss_mib")}
            for k, v in sorted(brokers.items())
        },
        "host_cpu_s_max": max((float(v.get("cpu_s", 0)) for v in hosts.values()), default=None),
        "host_peak_rss_mib_max": max(
            (float(v.get("peak_rss_mib", 0)) for v in hosts.values()), default=None
        ),
        "broker_cpu_s_max": max((float(v.get("cpu_s", 0)) for v in brokers.values()), default=None),
    }
    if legacy:
        point["zk_total"] = {
            k: sum(int(v.get(k, 0)) for v in hosts.values())
            for k in ("zk_reads", "zk_writes", "zk_watch_notifications")
        }
        suspended = [
            e
            for e in events
            if e["kind"] == EventKind.ZK_SESSION_STATE.value
            and e.get("state") in ("SUSPENDED", "LOST")
            and e.get("member") != crashed
        ]
        expired = [
            e
            for e in events
            if e["kind"] == EventKind.ZK_SESSION_EXPIRED.value and e.get("member") != crashed
        ]
        point["on_time"] = {
            "ok": not suspended and not expired,
            "sessions_suspended": len(suspended),
            "sessions_expired": len(expired),
        }
    else:
        removed = [
            e
            for e in events
            if e["kind"] == EventKind.MEMBER_REMOVED.value and e.get("reason") != "leave"
        ]
        crashed_ids = {
            e.get("member_id") for e in events if e.get("member") == crashed and e.get("member_id")
        }
        unexpected = [e for e in removed if e.get("member_id") not in crashed_ids]
        gap = max((float(s.get("heartbeat_gap_max_ms", 0)) for s in snaps), default=0.0)
        point["on_time"] = {
            "ok": not unexpected,
            "members_removed_unexpectedly": len(unexpected),
            "heartbeat_gap_max_s": round(gap / 1000.0, 3),
            "heartbeat_interval_s": HEARTBEAT_S.get(protocol),
            "session_timeout_s": SESSION_S[protocol],
            **gap_distribution(snaps[-1] if snaps else {}, HEARTBEAT_S[protocol]),
        }
    point["events"] = len(events)
    return point


def gap_distribution(snap: dict[str, Any], interval_s: float) -> dict[str, Any]:
    """Heartbeat punctuality from a coordinator snapshot's gap histogram (whole run).

    ``heartbeat_gap_p99_s`` / ``p999_s`` are the upper bounds of the buckets
    holding the 99th and 99.9th percentiles; ``heartbeats_late`` counts gaps
    longer than 1.5 heartbeat intervals (a bucket bound for 3 s and 5 s).
    """
    hist = [int(n) for n in snap.get("heartbeat_gap_histogram") or []]
    bounds = [float(b) for b in snap.get("heartbeat_gap_bounds_ms") or []]
    total = sum(hist)
    if not total or len(hist) != len(bounds) + 1:
        return {}

    def quantile(q: float) -> float | None:
        seen = 0
        for i, n in enumerate(hist):
            seen += n
            if seen >= q * total:
                return bounds[i] / 1000.0 if i < len(bounds) else None  # None: above the last
        return None

    late_ms = 1.5 * interval_s * 1000.0
    late = sum(n for i, n in enumerate(hist) if i >= len(bounds) or bounds[i] > late_ms)
    return {
        "heartbeat_gaps": total,
        "heartbeat_gap_p99_s": quantile(0.99),
        "heartbeat_gap_p999_s": quantile(0.999),
        "heartbeats_late": late,
        "heartbeats_late_fraction": round(late / total, 6),
    }


def run_point(protocol: str, n: int, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """Run one point in a subprocess, bounded in time; analyse what it wrote."""
    ts = args.legacy_time_scale if protocol == "zookeeper" else args.time_scale
    text = scenario_toml(protocol, n, args.hosts, args.rate, ts, args.kafka_version)
    run_dir = workdir / f"{protocol}-{n}"
    shutil.rmtree(run_dir, ignore_errors=True)
    scen = workdir / f"{protocol}-{n}.toml"
    scen.write_text(text)
    budget = args.point_timeout
    cmd = [
        sys.executable,
        "-m",
        "emulator.cli",
        "run",
        str(scen),
        "--protocol",
        protocol,
        "--out",
        str(run_dir),
    ]
    print(f"[{time.strftime('%H:%M:%S')}] {protocol} N={n}: {' '.join(cmd[2:])}", flush=True)
    t0 = time.monotonic()
    load0 = os.getloadavg()
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    tail: list[str] = []
    timed_out = False
    try:
        assert proc.stdout is not None
        deadline = t0 + budget
        for line in proc.stdout:
            tail = [*tail, line.rstrip()][-20:]
            if args.verbose:
                print("   ", line.rstrip(), flush=True)
            if time.monotonic() > deadline:
                timed_out = True
                break
        if timed_out:
            os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=120)
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        raise
    wall = time.monotonic() - t0
    point: dict[str, Any] = {
        "protocol": protocol,
        "members": n,
        "partitions": 10 * n,
        "wall_s": round(wall, 1),
    }
    try:
        point.update(analyse(run_dir, protocol, n))
        point["wall_s"] = round(wall, 1)
        point["time_scale"] = ts
        point["kafka_version"] = args.kafka_version
    except Exception as exc:  # the run wrote nothing usable: say why
        point["status"] = "error"
        point["error"] = f"{type(exc).__name__}: {exc}"
    point["exit_code"] = proc.returncode
    if timed_out:
        point["status"] = "timeout"
    if point.get("status") != "completed":
        point["output_tail"] = tail
    point["loadavg_before"] = [round(x, 2) for x in load0]
    point["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    if not args.keep_runs:
        shutil.rmtree(run_dir, ignore_errors=True)
    return point


def fit_exponent(xs: list[float], ys: list[float]) -> float | None:
    """Least-squares slope of log y on log x: y ~ x^k."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys, strict=True) if x > 0 and y and y > 0]
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    if sxx == 0:
        return None
    return round(sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx, 2)


GROWTH_METRICS = {
    "join_settle_s": lambda p: p["join"]["settle_s"],
    "crash_settle_after_detect_s": lambda p: (
        p["crash"]["settle_s"] - p["crash"]["detect_s"]
        if p["crash"].get("settle_s") is not None and p["crash"].get("detect_s") is not None
        else None
    ),
    "join_zk_ops": lambda p: (
        p["join"]["zk_reads"] + p["join"]["zk_writes"] if "zk_reads" in p["join"] else None
    ),
    "join_coordinator_requests": lambda p: p["join"].get("coordinator_requests_total"),
    "host_cpu_s_max": lambda p: p.get("host_cpu_s_max"),
    "host_peak_rss_mib_max": lambda p: p.get("host_peak_rss_mib_max"),
    # Modern only: the longest silence of a live member, in heartbeat intervals
    # (1.0 = every heartbeat on time; the session expires at 15 for classic, 9 for KIP-848).
    "heartbeat_gap_intervals": lambda p: (
        p["on_time"]["heartbeat_gap_max_s"] / p["on_time"]["heartbeat_interval_s"]
        if p.get("on_time", {}).get("heartbeat_interval_s")
        else None
    ),
}


def growth(points: list[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """Per protocol, the fitted exponent k of each metric ~ N^k over the completed points."""
    out: dict[str, dict[str, float | None]] = {}
    by_proto: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in points:
        if p.get("status") == "completed":
            by_proto[p["protocol"]].append(p)
    for proto, pts in by_proto.items():
        pts.sort(key=lambda p: p["members"])
        out[proto] = {}
        for name, get in GROWTH_METRICS.items():
            xs, ys = [], []
            for p in pts:
                try:
                    y = get(p)
                except (KeyError, TypeError):
                    y = None
                if y is not None:
                    xs.append(float(p["members"]))
                    ys.append(float(y))
            k = fit_exponent(xs, ys)
            if k is not None:
                out[proto][name] = k
    return out


def plot(points: list[dict[str, Any]], path: Path) -> None:
    """Six log-log panels: join settle, crash settle, per-change ZK ops / requests, the
    busiest host's CPU and peak RSS, and the modern protocols' longest heartbeat gap."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fits = growth(points)
    panels = [
        ("join: settle (emulated s)", "join_settle_s"),
        ("crash: settle after detection (emulated s)", "crash_settle_after_detect_s"),
        ("join: ZooKeeper ops / coordinator requests", None),
        ("busiest host actor: CPU s over the run", "host_cpu_s_max"),
        ("busiest host actor: peak RSS (MiB)", "host_peak_rss_mib_max"),
        ("modern: longest heartbeat gap (heartbeat intervals)", "heartbeat_gap_intervals"),
    ]
    fig, axes = plt.subplots(3, 2, figsize=(12, 13))
    protos = sorted({p["protocol"] for p in points})
    for ax, (title, metric) in zip(axes.flat, panels, strict=True):
        for proto in protos:
            pts = sorted(
                (p for p in points if p["protocol"] == proto and p.get("status") == "completed"),
                key=lambda p: p["members"],
            )
            m = metric or ("join_zk_ops" if proto == "zookeeper" else "join_coordinator_requests")
            xy = []
            for p in pts:
                try:
                    y = GROWTH_METRICS[m](p)
                except (KeyError, TypeError):
                    y = None
                if y is not None and y > 0:
                    xy.append((p["members"], y))
            if not xy:
                continue
            k = fits.get(proto, {}).get(m)
            label = f"{proto}" + (f"  ~N^{k}" if k is not None else "")
            ax.plot([x for x, _ in xy], [y for _, y in xy], marker="o", label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("group size N (partitions = 10 N)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("How each generation's cost grows with the group (bench_scale.py)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def table(points: list[dict[str, Any]]) -> str:
    """The README table."""
    head = (
        "| protocol | N | status | start settled (s) | join settle (s) | crash detect / settle (s) "
        "| join ZK ops or requests | host CPU s (max) | host peak RSS MiB (max) "
        "| heartbeat gap p99 / max (s), late | on time |"
    )
    rows = [head, "|" + "---|" * 11]
    for p in sorted(points, key=lambda p: (p["protocol"], p["members"])):
        j, c = p.get("join", {}), p.get("crash", {})
        ops = (
            f"{j.get('zk_reads', 0)} r + {j.get('zk_writes', 0)} w"
            if p["protocol"] == "zookeeper"
            else str(j.get("coordinator_requests_total", ""))
        )
        ot = p.get("on_time", {})
        rows.append(
            f"| {p['protocol']} | {p['members']} | {p.get('status')} | {p.get('start_settle_s')} "
            f"| {j.get('settle_s')} | {c.get('detect_s')} / {c.get('settle_s')} | {ops} "
            f"| {p.get('host_cpu_s_max')} | {p.get('host_peak_rss_mib_max')} "
            f"| {ot.get('heartbeat_gap_p99_s', '-')} / {ot.get('heartbeat_gap_max_s', '-')}, "
            f"{ot.get('heartbeats_late', '-')} | {ot.get('ok')} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--protocols", default=",".join(DEFAULT_PROTOCOLS))
    ap.add_argument("--sizes", help="sizes for every protocol (overrides the defaults)")
    ap.add_argument("--legacy-sizes", default=",".join(map(str, LEGACY_SIZES)))
    ap.add_argument("--modern-sizes", default=",".join(map(str, MODERN_SIZES)))
    ap.add_argument("--quick", action="store_true", help="10 and 50 members only")
    ap.add_argument("--hosts", type=int, default=4, help="consumer-host actors at most (4)")
    ap.add_argument("--rate", type=float, default=200.0, help="produced messages per s (200)")
    ap.add_argument("--time-scale", type=float, default=1.0, help="modern protocols (1.0)")
    ap.add_argument(
        "--legacy-time-scale",
        type=float,
        default=2.0,
        help="legacy (2.0: 12 s wall ZooKeeper sessions, as in large-group.toml)",
    )
    ap.add_argument(
        "--kafka-version",
        default="4.3",
        help="the modern protocols' Kafka release (4.3: KIP-848 assignment batching, "
        "group.consumer.assignment.interval.ms = 1000; 4.2 runs the assignor on every join)",
    )
    ap.add_argument("--point-timeout", type=float, default=1800.0, help="wall s per point")
    ap.add_argument("--out", type=Path, default=RESULTS / "scale.json")
    ap.add_argument("--plot", type=Path, default=None, help="default: --out with .png")
    ap.add_argument("--append", action="store_true", help="add to --out's points")
    ap.add_argument("--keep-runs", type=Path, default=None, help="keep run directories here")
    ap.add_argument("--verbose", action="store_true", help="echo each run's output")
    args = ap.parse_args(argv)
    protocols = [p.strip() for p in args.protocols.split(",") if p.strip()]
    for p in protocols:
        if p not in START_S:
            ap.error(f"unknown protocol {p!r}")

    def sizes(spec: str) -> list[int]:
        return [int(s) for s in spec.split(",") if s.strip()]

    plot_path = args.plot or args.out.with_suffix(".png")
    doc: dict[str, Any] = {"points": [], "runs": []}
    if args.append and args.out.exists():
        doc = json.loads(args.out.read_text())
    doc["runs"].append(
        {"argv": sys.argv[1:], "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    )
    doc["machine"] = {
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    workdir = args.keep_runs or Path(tempfile.mkdtemp(prefix="bench-scale-"))
    workdir.mkdir(parents=True, exist_ok=True)
    failed = 0
    try:
        for proto in protocols:
            if args.quick:
                ns = [10, 50]
            elif args.sizes:
                ns = sizes(args.sizes)
            else:
                ns = sizes(args.legacy_sizes if proto == "zookeeper" else args.modern_sizes)
            for n in ns:
                point = run_point(proto, n, args, workdir)
                doc["points"] = [
                    p for p in doc["points"] if (p["protocol"], p["members"]) != (proto, n)
                ] + [point]
                doc["growth"] = growth(doc["points"])
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
                plot(doc["points"], plot_path)
                j, c = point.get("join", {}), point.get("crash", {})
                print(
                    f"    -> {point.get('status')} wall {point.get('wall_s')} s; start settled "
                    f"{point.get('start_settle_s')} s; join settle {j.get('settle_s')} s; crash "
                    f"detect {c.get('detect_s')} s settle {c.get('settle_s')} s; host CPU max "
                    f"{point.get('host_cpu_s_max')} s, RSS max {point.get('host_peak_rss_mib_max')}"
                    f" MiB; on time {point.get('on_time', {})}",
                    flush=True,
                )
                if point.get("status") != "completed":
                    failed += 1
    finally:
        if args.keep_runs is None:
            shutil.rmtree(workdir, ignore_errors=True)
    print(table(doc["points"]))
    print("growth exponents (metric ~ N^k):", json.dumps(doc.get("growth", {}), indent=1))
    print(f"wrote {args.out} and {plot_path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
