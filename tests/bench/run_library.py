#!/usr/bin/env python
"""Run every bundled scenario under every protocol (``--protocol all``); print and save the table.

This is the acceptance run of the scenario library: each scenario is run
once with :func:`actors.orchestrator.run_scenario` on an embedded ZooKeeper
and a local Ray, under every protocol; a fault that has no meaning for a
protocol is skipped with a note (shown here and in each run's manifest).

Usage::

    .venv/bin/python tests/bench/run_library.py [--only NAME ...] [--out DIR]
        [--json tests/bench/results/library.json]

Writes one run directory per scenario under ``--out`` and a JSON summary:
per scenario and protocol the status, wall seconds, the summary counts
(rebalances, duplicates, unprocessed, double processing, ordering overlap
...), the notes, and, from ``rebalance-emu compare`` on the run (Spark, the
checkers), the commit mode, duplicates by cause and loss by cause
(``--no-compare`` skips that).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from emulator.protocols import RUN_PROTOCOLS
from emulator.scenario import bundled_scenarios, load_scenario

COLS = (
    "rebalances",
    "attempts",
    "conflicts",
    "gave_up",
    "produced",
    "duplicates",
    "unprocessed",
    "double_processing",
    "ordering_overlap",
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="scenario names (default: every bundled one)")
    ap.add_argument("--protocol", nargs="*", default=list(RUN_PROTOCOLS))
    ap.add_argument("--out", default="runs/library")
    ap.add_argument("--json", default="tests/bench/results/library.json")
    ap.add_argument("--no-compare", action="store_true", help="skip the Spark checkers")
    args = ap.parse_args(argv)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    from actors.orchestrator import run_scenario

    names = args.only or sorted(bundled_scenarios())
    results: dict[str, Any] = {}
    failed = 0
    for name in names:
        scenario = load_scenario(bundled_scenarios()[name])
        out = Path(args.out) / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
        t0 = time.monotonic()
        print(f"== {name}: {scenario.description}", flush=True)
        try:
            runs = run_scenario(scenario, list(args.protocol), out)
        except Exception as exc:  # recorded, and the next scenario still runs
            failed += 1
            results[name] = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
            print(f"   FAILED: {results[name]['error']}", flush=True)
            continue
        entry: dict[str, Any] = {"run_dir": str(out), "wall_s": round(time.monotonic() - t0, 1)}
        for r in runs:
            counts = r.summary.to_dict()
            entry[r.protocol] = {
                "status": r.status,
                "wall_s": round(r.wall_s, 1),
                **{c: counts[c] for c in COLS},
                "double_processing_max_ms": counts["double_processing_max_ms"],
                "notes": r.notes,
            }
            failed += r.status != "completed"
            cells = " ".join(f"{c}={counts[c]}" for c in COLS)
            print(f"   {r.protocol:<20} {r.status:<10} {r.wall_s:6.1f} s  {cells}", flush=True)
            for note in r.notes:
                print(f"      note: {note}", flush=True)
        results[name] = entry
    if not args.no_compare:
        _causes(results)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print(f"wrote {args.json}")
    return 1 if failed else 0


def _causes(results: dict[str, Any]) -> None:
    """Run the checkers on every run directory: duplicates and loss by cause, per protocol."""
    from analysis.compare import compare

    for name, entry in results.items():
        run_dir = entry.get("run_dir")
        if not run_dir:
            continue
        print(f"== compare {name}", flush=True)
        try:
            report = compare([run_dir], Path(run_dir) / "report")
        except Exception as exc:  # recorded; the table says the causes are missing
            entry["compare_error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
            print(f"   compare FAILED: {entry['compare_error']}", flush=True)
            continue
        metrics = json.loads((report / "metrics.json").read_text())["metrics"]
        for proto, m in metrics.items():
            if proto in entry:
                entry[proto]["commit_mode"] = m.get("commit_mode")
                entry[proto]["duplicates_by_cause"] = m.get("duplicates_by_cause", {})
                entry[proto]["loss_by_cause"] = m.get("loss_by_cause", {})
                print(
                    f"   {proto:<20} dup {m.get('duplicates_by_cause')} "
                    f"loss {m.get('loss_by_cause')}",
                    flush=True,
                )


if __name__ == "__main__":
    raise SystemExit(main())
