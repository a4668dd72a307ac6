#!/usr/bin/env python
"""The engines' agreement: a real and a sim experiment of one scenario, metric by metric.

Input: two experiment directories of the same scenario and protocols, one run
on the real engine (``rebalance-emu experiment SPEC``) and one on the sim
(``rebalance-emu experiment SPEC --engine sim --parallel 1``), each analysed by
``rebalance-emu compare DIR`` (each trial's metrics kept in its
``analysis.json``; ``--analyse`` runs that compare here first, with a local
Spark). The rules are :mod:`analysis.agreement`'s (issue 18 design §6.3).

Output: the counts and every disagreement on stdout; ``agreement.json`` (every
row), ``agreement.md`` (the table per protocol) and ``agreement.png`` (per
headline metric and protocol: the sim's [p5, p95] and median per episode, the
real trials' values and median) under ``--out`` (default
``tests/bench/results/``).

Usage::

    .venv/bin/python tests/bench/agreement.py --real runs/headline-small \\
        --sim runs/headline-small-sim [--analyse] [--out DIR]

One side may be several experiment directories of the same scenario (e.g. the
0.8 consumer run at time scale 2.0 apart from the modern protocols at 1.0, as
``agreement-large`` was)::

    .venv/bin/python tests/bench/agreement.py --real runs/large-modern runs/large-legacy \\
        --sim runs/headline-sim/large --name agreement-large
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from analysis.agreement import (  # noqa: E402
    AGREE,
    DISAGREE,
    NOT_APPLICABLE,
    Agreement,
    compare_sides,
    load_side,
    metric_label,
    side_text,
    summary_table,
    to_markdown,
)
from analysis.experiment_report import RUN_LABEL  # noqa: E402
from tests.bench._document import header, write  # noqa: E402

PLOTTED = (
    "time_to_stable_ms",
    "time_to_detect_ms",
    "partition_unavailable_s",
    "duplicates",
    "partitions_moved",
    "generation_bumps",
)
"""The metrics of the plot's rows (every metric is in the JSON and the table)."""

GLANCE_EPISODE_METRICS = (
    "occurs",
    "settles",
    "time_to_detect_ms",
    "time_to_stable_ms",
    "partition_unavailable_s",
    "partitions_revoked",
    "partitions_moved",
    "duplicates",
    "commit_failures",
    "zk_ops",
)
GLANCE_RUN_METRICS = ("not_allowed", "duplicates", "zk_ops_per_change", "wall_s", "cpu_s")
"""The rows of the table at a glance (the README's)."""


def glance(ag: Agreement) -> str:
    """The compact table: per episode x metric, a cell per protocol, then whole-run rows."""
    protocols = list(dict.fromkeys(r.protocol for r in ag.rows))
    episodes = [
        e for e in dict.fromkeys(r.episode for r in ag.rows) if e != RUN_LABEL and "+" not in e
    ]
    kinds = sorted(
        {r.metric for r in ag.rows if r.metric.startswith("anomaly:")},
    )
    head = summary_table(ag, episodes, GLANCE_EPISODE_METRICS, protocols, skip_zero=True)
    tail = summary_table(ag, [RUN_LABEL], [*kinds, *GLANCE_RUN_METRICS], protocols, skip_zero=True)
    return head + "\n" + "\n".join(tail.split("\n")[2:])


def analyse(exp_dir: Path, spark_master: str | None) -> None:
    """``rebalance-emu compare EXP_DIR``: every completed trial's ``analysis.json``."""
    from analysis.compare import stderr_progress
    from analysis.experiment import compare_experiment

    compare_experiment(exp_dir, None, spark_master, stderr_progress())


def plot(ag: Agreement, path: Path) -> None:
    """Rows: the plotted metrics; columns: the protocols; x: the episodes."""
    from analysis.report import png_bytes, subplots

    protocols = list(dict.fromkeys(r.protocol for r in ag.rows))
    fig, grid = subplots(
        len(PLOTTED), len(protocols), figsize=(3.4 * len(protocols), 2.3 * len(PLOTTED))
    )
    for i, metric in enumerate(PLOTTED):
        div = 1000.0 if metric.endswith("_ms") else 1.0
        for j, proto in enumerate(protocols):
            ax = grid[i][j]
            rows = [
                r
                for r in ag.rows
                if r.protocol == proto
                and r.metric == metric
                and r.episode != RUN_LABEL
                and r.verdict != NOT_APPLICABLE
            ]
            for x, r in enumerate(rows):
                bad = r.verdict == DISAGREE
                if r.sim["n"]:
                    ax.vlines(x - 0.12, r.sim["p5"] / div, r.sim["p95"] / div, color="tab:blue")
                    ax.plot(x - 0.12, r.sim["median"] / div, "_", color="tab:blue", ms=10)
                if r.real["n"]:
                    ys = [v / div for v in r.real["values"]]
                    ax.scatter([x + 0.12] * len(ys), ys, s=6, alpha=0.6, color="tab:orange")
                    ax.plot(
                        x + 0.12,
                        r.real["median"] / div,
                        "D",
                        ms=4,
                        color="tab:red" if bad else "tab:green",
                    )
            ax.set_xlim(-0.6, max(len(rows), 1) - 0.4)
            ax.set_xticks(range(len(rows)))
            ax.set_xticklabels([r.episode for r in rows], rotation=40, ha="right", fontsize=6)
            ax.tick_params(axis="y", labelsize=6)
            if i == 0:
                ax.set_title(proto, fontsize=8)
            if j == 0:
                ax.set_ylabel(metric_label(metric), fontsize=7)
    fig.suptitle(
        "sim: [p5, p95] and median (blue); real: trials (orange), median (green: agrees, "
        "red: does not)",
        fontsize=8,
    )
    fig.tight_layout()
    path.write_bytes(png_bytes(fig, dpi=80))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--real",
        type=Path,
        nargs="+",
        required=True,
        help="the real engine's experiment dir (several: one side of separate experiments)",
    )
    p.add_argument(
        "--sim", type=Path, nargs="+", required=True, help="the sim engine's experiment dir(s)"
    )
    p.add_argument("--out", type=Path, default=ROOT / "tests" / "bench" / "results")
    p.add_argument("--name", default="agreement", help="file stem of the outputs")
    p.add_argument(
        "--analyse", action="store_true", help="run the experiment compare on both first"
    )
    p.add_argument("--spark-master", help="for --analyse (default: local)")
    p.add_argument("--note", default="", help="where the two sides come from (kept in the JSON)")
    p.add_argument(
        "--seeds",
        metavar="FIRST:LAST",
        help="only the trials of these seeds, on both sides (default: every analysed trial)",
    )
    args = p.parse_args()
    seeds: range | None = None
    if args.seeds:
        first, _, last = args.seeds.partition(":")
        seeds = range(int(first), int(last or first) + 1)
    started = time.time()
    if args.analyse:
        for d in [*args.real, *args.sim]:
            analyse(d, args.spark_master)
    ag = compare_sides(load_side(args.real, "real", seeds), load_side(args.sim, "sim", seeds))
    c = ag.counts()
    print(
        f"{len(ag.real.trials)} real trials, {len(ag.sim.trials)} sim trials; "
        f"{c[AGREE]} rows agree, {c[DISAGREE]} disagree, {c[NOT_APPLICABLE]} n/a"
    )
    for r in ag.disagreements():
        print(
            f"  {r.protocol:<20} {r.episode:<22} {metric_label(r.metric):<28} "
            f"real {side_text(r, 'real'):<32} sim {side_text(r, 'sim'):<36} {r.why}"
        )
    doc: dict[str, Any] = {
        **header("agreement", started, args),
        "note": args.note,
        **ag.to_dict(),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    write(args.out / f"{args.name}.json", doc, ROOT)
    at_a_glance = glance(ag)
    print("\n" + at_a_glance)
    md = to_markdown(ag).replace(
        "\n## ",
        "\n## At a glance\n\nPer cell: real median · sim median [p5, p95], ok or **NO** "
        "(no~: within 20% of the sim median); exact rows: real hits/n · sim hits/n. Rows "
        "that are 0 on both sides for every protocol are left out.\n\n" + at_a_glance + "\n\n## ",
        1,
    )
    (args.out / f"{args.name}.md").write_text(md)
    plot(ag, args.out / f"{args.name}.png")
    print(f"wrote {args.out / f'{args.name}.md'} and {args.out / f'{args.name}.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
