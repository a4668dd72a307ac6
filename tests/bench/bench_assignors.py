#!/usr/bin/env python
"""Benchmark: milliseconds per assignment of the modern assignors, on Kafka's JMH grid.

What it measures: one call of an assignor's ``assign`` on a homogeneous group
(every member subscribes to every topic), for

* the server-side (KIP-848) ``uniform`` and ``range`` assignors
  (:mod:`emulator.modern.assignors.uniform`, ``server_range``), and
* the client-side (classic) ``range``, ``sticky`` and ``cooperative-sticky``
  assignors run by the group leader,

over the grid of Kafka's JMH assignor benchmarks (``jmh-benchmarks/.../assignor/``):
members 100 / 1,000 / 10,000 x partitions per member 5 / 10 / 50 x topics
10 / 100 / 1,000, i.e. ``members * ppm`` partitions split evenly over the
topics (``(members * ppm) // topics`` each; points with fewer partitions than
topics are skipped and reported). Two modes, as in Kafka's benchmarks:

* ``full``: nobody owns anything yet (first assignment);
* ``incremental``: the group has settled on the ``full`` result and one new
  member joins (current/owned assignments carried over; for the sticky
  assignors the settled members report generation 1).

Input construction is not timed; the inputs are then frozen out of the
garbage collector's generations (``gc.freeze``), as the long-lived state of a
leader or coordinator would be, while the collector stays on for the
assignor's own allocations. Each point gets one warm-up call, then calls
until ``--budget`` seconds are spent (at least ``--min-reps``, at most
``--max-reps``); a point whose warm-up alone exceeds the budget is reported
from that single call and marked ``capped``. The median wall-clock and
process CPU time are reported, because this 2-core machine is shared (CPU
time is the steadier number under load). Kafka's published Java figure is
shown where one exists: ``uniform``, homogeneous, full, 10,000 members x 10
partitions each x 1,000 topics: 4.3 ms per assignment (apache/kafka PR 17133).

Results: a table on stdout and ``tests/bench/results/assignors.json``.

Usage::

    .venv/bin/python tests/bench/bench_assignors.py          # whole grid (long; background it)
    .venv/bin/python tests/bench/bench_assignors.py --quick  # small grid + Kafka's point
    .venv/bin/python tests/bench/bench_assignors.py --assignors uniform --members 10000 \\
        --ppm 10 --topics 1000 --modes full
    .venv/bin/python tests/bench/bench_assignors.py --profile uniform:full:10000:10:1000
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import platform
import pstats
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from emulator.modern.assignors import (  # noqa: E402
    CooperativeStickyAssignor,
    GroupSpec,
    MemberSpec,
    MemberSubscription,
    RangeAssignor,
    ServerRangeAssignor,
    StickyAssignor,
    UniformAssignor,
)
from emulator.modern.messages import TopicPartition  # noqa: E402
from tests.bench import _document  # noqa: E402

RESULTS = ROOT / "tests" / "bench" / "results" / "assignors.json"

GRID_MEMBERS = (100, 1_000, 10_000)
GRID_PPM = (5, 10, 50)
GRID_TOPICS = (10, 100, 1_000)
QUICK_MEMBERS = (100, 1_000)
QUICK_PPM = (10,)
QUICK_TOPICS = (10, 100)
KAFKA_POINT = (10_000, 10, 1_000)

ASSIGNORS = ("uniform", "server-range", "client-range", "sticky", "cooperative-sticky")
MODES = ("full", "incremental")

# (assignor, mode, members, ppm, topics) -> Kafka's published ms per assignment.
KAFKA_MS: dict[tuple[str, str, int, int, int], tuple[float, str]] = {
    ("uniform", "full", 10_000, 10, 1_000): (4.3, "apache/kafka PR 17133"),
}


@dataclass
class Point:
    """One benchmark result row."""

    assignor: str
    mode: str
    members: int
    ppm: int
    topics: int
    partitions: int
    wall_ms_median: float | None = None
    wall_ms_min: float | None = None
    cpu_ms_median: float | None = None
    reps: int = 0
    capped: bool = False
    skipped: str | None = None
    kafka_ms: float | None = None
    kafka_source: str | None = None
    check: str | None = None


# --------------------------------------------------------------------------- inputs


def topic_counts(members: int, ppm: int, topics: int) -> dict[str, int]:
    per_topic = (members * ppm) // topics
    return {f"topic-{i}": per_topic for i in range(topics)}


def member_ids(n: int) -> list[str]:
    # Classic member ids look like "<client.id>-<uuid>"; a fixed pattern keeps runs comparable.
    return [f"consumer-{i}-{(i * 2654435761) % 2**32:08x}" for i in range(n)]


def server_call(
    name: str, mode: str, members: int, counts: dict[str, int]
) -> tuple[Callable[[], Any], Callable[[Any], str]]:
    assignor = UniformAssignor() if name == "uniform" else ServerRangeAssignor()
    topics = frozenset(counts)
    ids = member_ids(members)
    spec = GroupSpec({m: MemberSpec(topics) for m in ids})
    if mode == "incremental":
        settled = assignor.assign(spec, counts)
        new_id = f"joiner-{members}"
        spec = GroupSpec(
            {
                **{m: MemberSpec(topics, assignment=settled[m]) for m in ids},
                new_id: MemberSpec(topics),
            }
        )

    def check(result: Any) -> str:
        sizes = [len(v) for v in result.values()]
        total = sum(sizes)
        return f"members={len(sizes)} partitions={total} sizes={min(sizes)}..{max(sizes)}"

    return (lambda: assignor.assign(spec, counts)), check


def client_call(
    name: str, mode: str, members: int, counts: dict[str, int]
) -> tuple[Callable[[], Any], Callable[[Any], str]]:
    assignor: RangeAssignor | StickyAssignor | CooperativeStickyAssignor
    if name == "client-range":
        assignor = RangeAssignor()
    elif name == "sticky":
        assignor = StickyAssignor()
    else:
        assignor = CooperativeStickyAssignor()
    topics = tuple(counts)
    ids = member_ids(members)
    subs = {m: MemberSubscription(m, topics=topics) for m in ids}
    if mode == "incremental":
        settled: dict[str, tuple[TopicPartition, ...]] = assignor.assign(counts, subs)
        new_id = f"joiner-{members}"
        subs = {
            m: MemberSubscription(m, topics=topics, owned_partitions=settled[m], generation_id=1)
            for m in ids
        }
        subs[new_id] = MemberSubscription(new_id, topics=topics)

    def check(result: Any) -> str:
        sizes = [len(v) for v in result.values()]
        return f"members={len(sizes)} partitions={sum(sizes)} sizes={min(sizes)}..{max(sizes)}"

    return (lambda: assignor.assign(counts, subs)), check


def make_call(
    name: str, mode: str, members: int, counts: dict[str, int]
) -> tuple[Callable[[], Any], Callable[[Any], str]]:
    if name in ("uniform", "server-range"):
        return server_call(name, mode, members, counts)
    return client_call(name, mode, members, counts)


# --------------------------------------------------------------------------- timing


def time_once(call: Callable[[], Any]) -> tuple[float, float, Any]:
    gc.collect()
    w0, c0 = time.perf_counter(), time.process_time()
    result = call()
    w1, c1 = time.perf_counter(), time.process_time()
    return (w1 - w0) * 1000.0, (c1 - c0) * 1000.0, result


def run_point(
    name: str,
    mode: str,
    members: int,
    ppm: int,
    topics: int,
    budget: float,
    min_reps: int,
    max_reps: int,
    max_partitions: int | None,
) -> Point:
    counts = topic_counts(members, ppm, topics)
    partitions = sum(counts.values())
    point = Point(name, mode, members, ppm, topics, partitions)
    kafka = KAFKA_MS.get((name, mode, members, ppm, topics))
    if kafka:
        point.kafka_ms, point.kafka_source = kafka
    if members * ppm < topics:
        point.skipped = "fewer partitions than topics (0 per topic)"
        return point
    if max_partitions is not None and partitions > max_partitions:
        point.skipped = f"over --max-partitions {max_partitions}"
        return point
    call, check = make_call(name, mode, members, counts)
    # The inputs are long-lived state in a real leader or coordinator: move them
    # out of the collector's generations so that full collections triggered by
    # the assignor's own allocations do not rescan them on every call.
    gc.collect()
    gc.freeze()
    try:
        return _measure(point, call, check, budget, min_reps, max_reps)
    finally:
        del call
        gc.unfreeze()
        gc.collect()


def _measure(
    point: Point,
    call: Callable[[], Any],
    check: Callable[[Any], str],
    budget: float,
    min_reps: int,
    max_reps: int,
) -> Point:
    wall, cpu, result = time_once(call)  # warm-up, also the capped measurement
    point.check = check(result)
    del result
    walls, cpus = [wall], [cpu]
    if wall / 1000.0 > budget:
        point.capped = True
    else:
        walls, cpus = [], []
        deadline = time.perf_counter() + budget
        while len(walls) < max_reps and (len(walls) < min_reps or time.perf_counter() < deadline):
            wall, cpu, result = time_once(call)
            del result
            walls.append(wall)
            cpus.append(cpu)
    point.reps = len(walls)
    point.wall_ms_median = statistics.median(walls)
    point.wall_ms_min = min(walls)
    point.cpu_ms_median = statistics.median(cpus)
    return point


def profile_point(spec: str, top: int) -> None:
    name, mode, members, ppm, topics = spec.split(":")
    counts = topic_counts(int(members), int(ppm), int(topics))
    call, _ = make_call(name, mode, int(members), counts)
    profiler = cProfile.Profile()
    profiler.enable()
    call()
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    print(out.getvalue())


# --------------------------------------------------------------------------- output


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def print_row(p: Point) -> None:
    if p.skipped:
        print(
            f"{p.assignor:<19}{p.mode:<12}{p.members:>7}{p.ppm:>5}{p.topics:>7}{p.partitions:>9}"
            f"   skipped: {p.skipped}",
            flush=True,
        )
        return
    kafka = f"{p.kafka_ms:.1f}" if p.kafka_ms is not None else ""
    ratio = (  # CPU time: the steadier number on a shared machine
        f"x{p.cpu_ms_median / p.kafka_ms:,.0f}"
        if p.kafka_ms is not None and p.cpu_ms_median is not None
        else ""
    )
    note = "capped: 1 call" if p.capped else ""
    print(
        f"{p.assignor:<19}{p.mode:<12}{p.members:>7}{p.ppm:>5}{p.topics:>7}{p.partitions:>9}"
        f"{fmt(p.wall_ms_median):>11}{fmt(p.cpu_ms_median):>11}{p.reps:>5}"
        f"{kafka:>9}{ratio:>9}  {note}",
        flush=True,
    )


HEADER = (
    f"{'assignor':<19}{'mode':<12}{'members':>7}{'ppm':>5}{'topics':>7}{'parts':>9}"
    f"{'wall ms':>11}{'cpu ms':>11}{'reps':>5}{'kafka ms':>9}{'cpu/java':>9}"
)


def grid(args: argparse.Namespace) -> list[tuple[int, int, int]]:
    if args.quick:
        points = [(m, p, t) for m in QUICK_MEMBERS for p in QUICK_PPM for t in QUICK_TOPICS]
        points.append(KAFKA_POINT)
        return points
    return [(m, p, t) for m in args.members for p in args.ppm for t in args.topics]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small grid plus Kafka's point")
    parser.add_argument("--assignors", nargs="+", default=list(ASSIGNORS), choices=ASSIGNORS)
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--members", nargs="+", type=int, default=list(GRID_MEMBERS))
    parser.add_argument("--ppm", nargs="+", type=int, default=list(GRID_PPM))
    parser.add_argument("--topics", nargs="+", type=int, default=list(GRID_TOPICS))
    parser.add_argument("--budget", type=float, default=3.0, help="seconds of reps per point")
    parser.add_argument("--min-reps", type=int, default=3)
    parser.add_argument("--max-reps", type=int, default=30)
    parser.add_argument("--max-partitions", type=int, default=None, help="skip larger points")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--profile", metavar="ASSIGNOR:MODE:MEMBERS:PPM:TOPICS")
    parser.add_argument("--profile-top", type=int, default=25)
    args = parser.parse_args(argv)

    if args.profile:
        profile_point(args.profile, args.profile_top)
        return 0

    started = time.time()
    print(
        f"python {platform.python_version()} on {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; "
        f"budget {args.budget:.1f} s per point",
        flush=True,
    )
    print(HEADER, flush=True)
    points: list[Point] = []
    for members, ppm, topics in grid(args):
        for name in args.assignors:
            for mode in args.modes:
                point = run_point(
                    name,
                    mode,
                    members,
                    ppm,
                    topics,
                    args.budget,
                    args.min_reps,
                    args.max_reps,
                    args.max_partitions,
                )
                points.append(point)
                print_row(point)
    skipped = [p for p in points if p.skipped]
    capped = [p for p in points if p.capped]
    if skipped:
        print(f"\n{len(skipped)} point(s) skipped (see 'skipped:' rows).")
    if capped:
        print(f"{len(capped)} point(s) capped at one call (warm-up over the budget).")
    for p in points:
        if p.kafka_ms is not None and p.wall_ms_median is not None:
            print(
                f"Kafka reference: {p.assignor} {p.mode} {p.members}x{p.ppm}x{p.topics}: "
                f"Java {p.kafka_ms} ms ({p.kafka_source}) vs Python {p.wall_ms_median:.1f} ms "
                f"wall / {p.cpu_ms_median:.1f} ms CPU"
            )
    document: dict[str, Any] = {
        **_document.header("assignors", started, args),
        "subscription": "homogeneous (every member subscribes to every topic)",
        "kafka_reference": {
            "uniform/full/10000x10x1000": "4.3 ms per assignment, apache/kafka PR 17133"
        },
        "points": [asdict(p) for p in points],
    }
    _document.write(args.out, document, ROOT)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
