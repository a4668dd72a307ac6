#!/usr/bin/env python
"""Benchmark: a scenario's wall time on the sim engine against the real engine (issue 18 target).

What it measures: the wall and process-CPU seconds of one ``run_scenario`` of
a bundled scenario (default ``quickstart``) under every protocol (on the sim,
each protocol's CPU seconds too: what to compare on a loaded machine), on the sim
engine (``--repeat`` times, ``--parallel`` protocols at once as ``run --engine
sim`` does; the median is reported) and, with ``--real``, once
on the real engine (embedded ZooKeeper, local Ray). The sim's runs must also be
replays of each other: the per-protocol log digests of every repeat are compared
and the result says whether they agree.

The issue's target is the sim at least 50x faster than the real engine's wall
time for quickstart under all four protocols, measured in one run on this
2-core machine, with nothing else running (the numbers are wall times).

Results: a table on stdout and ``tests/bench/results/sim.json``.

Usage::

    .venv/bin/python tests/bench/bench_sim.py --real            # sim x3 and real x1
    .venv/bin/python tests/bench/bench_sim.py --scenario zombie-double-consume --repeat 5
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.bench._document import header, write  # noqa: E402

PROTOCOLS = ["zookeeper", "classic-eager", "classic-cooperative", "consumer"]


def _cpu_s() -> float:
    """This process's CPU seconds and its reaped children's (the sim's forked workers)."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        ru = resource.getrusage(who)
        total += ru.ru_utime + ru.ru_stime
    return total


def run_once(scenario_name: str, engine: str, out: Path, parallel: int) -> dict[str, Any]:
    """One run of every protocol; its wall and CPU seconds, statuses and digests.

    On the sim, ``parallel`` protocols run at once in forked workers (what
    ``rebalance-emu run --engine sim`` does by default); each world's CPU
    seconds come from the manifest (``engine.cpu_s``), the workers' included.
    """
    from actors.orchestrator import run_scenario
    from emulator.scenario import bundled_scenarios, load_scenario

    scenario = load_scenario(bundled_scenarios()[scenario_name])
    sim: Any = None
    if engine == "sim":
        from actors.sim.run import SimEngine

        sim = SimEngine(workers=parallel)
    t0, c0 = time.monotonic(), _cpu_s()
    results = run_scenario(scenario, PROTOCOLS, out, engine=sim)
    wall, cpu = time.monotonic() - t0, _cpu_s() - c0
    manifest = json.loads((out / "manifest.json").read_text())
    eng = manifest.get("engine", {})
    return {
        "engine": engine,
        "parallel": parallel if engine == "sim" else None,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "per_protocol_cpu_s": eng.get("cpu_s", {}),
        "statuses": {r.protocol: r.status for r in results},
        "per_protocol_wall_s": {r.protocol: round(r.wall_s, 2) for r in results},
        "duplicates": {r.protocol: r.summary.to_dict()["duplicates"] for r in results},
        "log_digest": eng.get("log_digest", {}),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scenario", default="quickstart")
    p.add_argument("--repeat", type=int, default=3, help="sim runs (the median is reported)")
    p.add_argument("--real", action="store_true", help="also one run on the real engine")
    p.add_argument(
        "--parallel",
        type=int,
        default=os.cpu_count() or 1,
        help="sim protocols at once (default: the CPUs, as `run --engine sim`)",
    )
    p.add_argument("--out", type=Path, default=ROOT / "tests" / "bench" / "results" / "sim.json")
    args = p.parse_args()
    started = time.time()
    doc = header("sim", started, args)
    sims: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-sim-") as tmp:
        for i in range(max(1, args.repeat)):
            r = run_once(args.scenario, "sim", Path(tmp) / f"sim-{i}", args.parallel)
            sims.append(r)
            print(
                f"sim run {i + 1}: {r['wall_s']:.2f} s wall, {r['cpu_s']:.1f} s CPU "
                f"({', '.join(f'{p} {c:.2f}' for p, c in r['per_protocol_cpu_s'].items())})"
            )
        real = run_once(args.scenario, "real", Path(tmp) / "real", 1) if args.real else None
    sim_wall = statistics.median(r["wall_s"] for r in sims)
    digests = [json.dumps(r["log_digest"], sort_keys=True) for r in sims]
    doc.update(
        scenario=args.scenario,
        protocols=PROTOCOLS,
        sim_runs=sims,
        sim_median_wall_s=sim_wall,
        sim_replays_identical=len(set(digests)) == 1,
        real_run=real,
        speedup=None if real is None else round(real["wall_s"] / sim_wall, 1),
    )
    print(f"sim median: {sim_wall:.1f} s; replays identical: {doc['sim_replays_identical']}")
    if real is not None:
        print(f"real: {real['wall_s']:.1f} s; sim is {doc['speedup']}x faster")
    doc["elapsed_s"] = round(time.time() - started, 1)
    write(args.out, doc, ROOT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
