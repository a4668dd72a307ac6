#!/usr/bin/env python
"""Benchmark: ``explore`` throughput, seeds per minute per scenario and protocol (issue 18 target).

What it measures: for each scenario (default ``claim-race`` and
``zombie-double-consume``) and protocol, ``--seeds`` seeds of ``explore``
(profile ``explore``, the online checks armed, a run stopping at its first
violation), ``--parallel`` at a time (1: in this process; more: forked
workers, or Ray tasks with ``--ray-address``, as ``explore`` runs them).
Per cell: wall and CPU seconds (this process's and its forked workers'; with
Ray, the workers' CPU is not counted) and CPU seconds per seed (what to
compare on a loaded machine), seeds per minute, violations found (their seeds
and kinds), failed runs, and the wall time 1,000 seeds would take at that rate.

The issue's target: at least 1,000 seeds of each of the two scenarios per
protocol, each in under 10 minutes on this 2-core machine, nothing else
running.

Results: a table on stdout and ``tests/bench/results/explore.json``.

Usage::

    .venv/bin/python tests/bench/bench_explore.py --seeds 20
    .venv/bin/python tests/bench/bench_explore.py --seeds 1000 --parallel 2
    .venv/bin/python tests/bench/bench_explore.py --seeds 100 --parallel 2 --ray-address local
"""

from __future__ import annotations

import argparse
import resource
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
SCENARIOS = ["claim-race", "zombie-double-consume"]


def _cpu_s() -> float:
    """This process's CPU seconds and its reaped children's (the forked workers')."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        ru = resource.getrusage(who)
        total += ru.ru_utime + ru.ru_stime
    return total


def cell(
    scenario_name: str,
    protocol: str,
    seeds: int,
    parallel: int,
    out: Path,
    ray_address: str | None = None,
) -> dict[str, Any]:
    """One scenario x protocol: ``seeds`` seeds explored; its costs and findings."""
    from actors.sim.explore import explore
    from emulator.scenario import bundled_scenarios, load_scenario
    from emulator.sim.profile import EXPLORE

    scenario = load_scenario(bundled_scenarios()[scenario_name])
    t0, c0 = time.monotonic(), _cpu_s()
    r = explore(
        scenario,
        [protocol],
        list(range(1, seeds + 1)),
        EXPLORE,
        out,
        parallel=parallel,
        ray_address=ray_address,
        keep_going=True,
        say=lambda m: print(f"  {m}", flush=True),
        progress_every_s=60.0,
    )
    wall, cpu = time.monotonic() - t0, _cpu_s() - c0
    outcomes = r.outcomes.get(protocol, [])
    found = [o for o in outcomes if o.violation is not None]
    return {
        "scenario": scenario_name,
        "protocol": protocol,
        "seeds": len(outcomes),
        "wall_s": round(wall, 1),
        "parallel": parallel,
        "ray_address": ray_address,
        "cpu_s": round(cpu, 1),
        # in process or forked workers (not Ray's): the CPU a seed costs, whatever
        # else the machine is doing (the wall time is not, on a loaded machine)
        "cpu_s_per_seed": round(cpu / max(1, len(outcomes)), 3) if ray_address is None else None,
        "seeds_per_min": round(60.0 * len(outcomes) / wall, 1) if wall > 0 else None,
        "wall_s_per_1000_seeds": round(1000.0 * wall / max(1, len(outcomes)), 0),
        "virtual_s_per_seed": round(sum(o.virtual_s for o in outcomes) / max(1, len(outcomes)), 1),
        "violations": [{"seed": o.seed, "kind": (o.violation or {}).get("kind")} for o in found],
        "failed_runs": [{"seed": o.seed, "error": o.error} for o in r.failed.get(protocol, [])],
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=20, help="seeds per scenario and protocol")
    p.add_argument(
        "--parallel", type=int, default=1, help="seeds at once (above 1: forked workers)"
    )
    p.add_argument("--ray-address", help="run the batches as Ray tasks (local, auto, host:port)")
    p.add_argument("--scenario", action="append", help=f"default {', '.join(SCENARIOS)}")
    p.add_argument("--protocol", action="append", help="default all four")
    p.add_argument(
        "--out", type=Path, default=ROOT / "tests" / "bench" / "results" / "explore.json"
    )
    args = p.parse_args()
    started = time.time()
    doc = header("explore", started, args)
    cells: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-explore-") as tmp:
        for sc in args.scenario or SCENARIOS:
            for proto in args.protocol or PROTOCOLS:
                print(f"{sc} / {proto}: {args.seeds} seeds, {args.parallel} at a time", flush=True)
                c = cell(
                    sc,
                    proto,
                    args.seeds,
                    args.parallel,
                    Path(tmp) / f"{sc}-{proto}",
                    args.ray_address,
                )
                cells.append(c)
                print(
                    f"  {c['wall_s']:.0f} s wall ({c['seeds_per_min']} seeds/min; "
                    f"1,000 seeds ~{c['wall_s_per_1000_seeds'] / 60:.0f} min), "
                    f"{len(c['violations'])} violations, {len(c['failed_runs'])} failed",
                    flush=True,
                )
    doc.update(cells=cells, elapsed_s=round(time.time() - started, 1))
    print(
        f"\n{'scenario':<24}{'protocol':<22}{'seeds':>6}{'s/seed':>8}{'cpu s/seed':>12}"
        f"{'1000 seeds':>12}"
    )
    for c in cells:
        per = c["wall_s"] / max(1, c["seeds"])
        cpu = c["cpu_s_per_seed"]
        print(
            f"{c['scenario']:<24}{c['protocol']:<22}{c['seeds']:>6}{per:>8.2f}"
            f"{'-' if cpu is None else f'{cpu:.2f}':>12}"
            f"{c['wall_s_per_1000_seeds'] / 60:>10.0f} m"
        )
    doc["elapsed_s"] = round(time.time() - started, 1)
    write(args.out, doc, ROOT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
