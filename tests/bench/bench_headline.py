"""The headline benchmark: what one join, one crash, one clean leave and a rolling restart cost.

Every generation (0.8 ZooKeeper consumer, classic eager, classic cooperative,
KIP-848) on the same workload and changes, with Kafka's defaults, at a small
group (5 members, >= 20 seeds) and a larger one (100 members, >= 10 seeds);
plus sweeps of ``session.timeout.ms`` and of KIP-1263's
``group.consumer.assignment.interval.ms`` (0, 1000, 5000; Kafka 4.3), >= 5
seeds a point. Each part is an experiment (``rebalance-emu experiment``): the
script writes the scenario and experiment files under ``--out/specs``, runs
each (resumable: run the script again to continue), then gathers every
report's statistics into ``tests/bench/results/headline.json`` and copies the
plots to ``tests/bench/results/headline/``.

One scenario per size holds all four changes, spaced so that each settles
before the next under Kafka's defaults (a crash is noticed only when its
45 s session expires)::

    formation; join at 30 s; crash of a random member at 60 s;
    clean leave of a random member at 140 s; rolling restart of every
    member from 170 s (one every 10 s at 5 members, every 2 s at 100)

    python tests/bench/bench_headline.py                    # everything (hours)
    python tests/bench/bench_headline.py --parts small --seeds-small 3   # a quick look

``--engine`` names the engine the trials run on: ``real`` (Ray actors, a real
ZooKeeper, scaled real time; the headline's numbers) or ``sim`` (the same code on
a virtual clock and a simulated ZooKeeper, one process per trial; see the
README's "Two engines" for what it does and does not show yet).
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench._document import header, write

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "tests" / "bench" / "results"
ENGINES = ("real", "sim")
HEADLINE_METRICS = (
    "time_to_stable_ms",
    "time_to_detect_ms",
    "partition_unavailable_s",
    "idle_member_s",
    "partitions_revoked",
    "revoked_without_need",
    "duplicates",
    "peak_lag",
    "lag_recovery_ms",
)


def scenario_toml(
    name: str,
    members: int,
    time_scale: float,
    kafka_version: str,
    extra_kafka: dict[str, Any] | None = None,
) -> str:
    """The one scenario of a group size: formation, join, crash, leave, rolling restart."""
    extra = "".join(f'"{k}" = {json.dumps(v)}\n' for k, v in (extra_kafka or {}).items())
    restart_interval = 10.0 if members <= 10 else 2.0
    restart_end = 170.0 + restart_interval * (members + 1)
    duration = restart_end + 60.0
    hosts = 4 if members > 10 else 1  # as bench_scale: 4-5 consumer-host actors
    per_host = -(-(members + 1) // hosts)
    return f"""# Written by tests/bench/bench_headline.py: the headline benchmark's scenario.
name = "{name}"
description = "{members} members: a join, a crash, a clean leave, a rolling restart"
seed = 1000
duration_s = {duration}
time_scale = {time_scale}
kafka_version = "{kafka_version}"

[cluster]
brokers = 3
zookeeper_ensemble = 1

[[topics]]
name = "events"
partitions = {4 * members}
replication_factor = 2

[producer]
rate_per_s = 200.0
topics = ["events"]
partitioner = "round-robin"

[group]
id = "headline-group"
consumers = {members}
topics = ["events"]
processing_ms_per_message = 2.0
consumers_per_host = {per_host}

[kafka]
"auto.offset.reset" = "smallest"
{extra}
[[timeline]]
at_s = 30.0
action = "join"

[[timeline]]
at_s = 60.0
action = "crash"
member = "random"

[[timeline]]
at_s = 140.0
action = "leave"
member = "random"

[[timeline]]
at_s = 170.0
action = "restart"
members = "all"
interval_s = {restart_interval}
"""


def experiment_toml(
    name: str, scenario: str, protocols: list[str], seeds: int, grid: dict[str, list[Any]]
) -> str:
    lines = [
        f'name = "{name}"',
        f'scenarios = ["{scenario}"]',
        "protocols = [" + ", ".join(f'"{p}"' for p in protocols) + "]",
        f"seeds = {seeds}",
        "cpus_per_trial = 2",
    ]
    if grid:
        lines.append("[grid.kafka]")
        lines += [f'"{k}" = {json.dumps(v)}' for k, v in grid.items()]
    return "\n".join(lines) + "\n"


def parts(args: argparse.Namespace) -> dict[str, tuple[str, str]]:
    """Part name -> (scenario file text, experiment file text)."""
    every = ["zookeeper", "classic-eager", "classic-cooperative", "consumer"]
    out: dict[str, tuple[str, str]] = {}
    small = scenario_toml("headline-5", 5, args.time_scale_small, "3.9")
    large = scenario_toml("headline-100", 100, args.time_scale_large, "3.9")
    kip1263 = scenario_toml("headline-5-kafka-4.3", 5, args.time_scale_small, "4.3")
    out["small"] = (
        small,
        experiment_toml("headline-small", "small.toml", every, args.seeds_small, {}),
    )
    out["large"] = (
        large,
        experiment_toml("headline-large", "large.toml", every, args.seeds_large, {}),
    )
    out["session"] = (
        small,
        experiment_toml(
            "headline-session-timeout",
            "session.toml",
            ["classic-eager", "classic-cooperative"],
            args.sweep_seeds,
            {"session.timeout.ms": [10000, 30000, 45000]},
        ),
    )
    # KIP-848's session timeout is the broker's, bounded below by its minimum (45 s by default).
    kip848 = scenario_toml(
        "headline-5-kip848-session",
        5,
        args.time_scale_small,
        "3.9",
        {"group.consumer.min.session.timeout.ms": 10000},
    )
    out["session-kip848"] = (
        kip848,
        experiment_toml(
            "headline-kip848-session-timeout",
            "session-kip848.toml",
            ["consumer"],
            args.sweep_seeds,
            {"group.consumer.session.timeout.ms": [10000, 30000, 45000]},
        ),
    )
    out["assignment"] = (
        kip1263,
        experiment_toml(
            "headline-assignment-interval",
            "assignment.toml",
            ["consumer"],
            args.sweep_seeds,
            {"group.consumer.assignment.interval.ms": [0, 1000, 5000]},
        ),
    )
    return out


def experiment_scenario_file(exp: str) -> str:
    """The scenario file an experiment's text names (its ``scenarios = ["..."]``)."""
    for line in exp.splitlines():
        if line.startswith("scenarios"):
            return line.split('"')[1]
    raise ValueError("an experiment without scenarios")


def trial_times(part_dir: Path) -> dict[str, float | int]:
    """The trials' own times, summed over every ``trial.json`` of a part.

    ``wall_s`` above is this invocation's; a part resumed over several sessions
    ran its trials across all of them, and these sums count each trial once.
    """
    wall = cpu = 0.0
    n = 0
    for f in sorted((part_dir / "trials").glob("*/trial.json")):
        t = json.loads(f.read_text())
        if t.get("status") == "completed":
            wall += float(t.get("wall_s") or 0.0)
            cpu += float(t.get("cpu_s") or 0.0)
            n += 1
    return {"trials_completed": n, "trial_wall_s": round(wall, 1), "trial_cpu_s": round(cpu, 1)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--engine", choices=ENGINES, default="real")
    p.add_argument("--parts", default="small,large,session,session-kip848,assignment")
    p.add_argument("--seeds-small", type=int, default=20)
    p.add_argument("--seeds-large", type=int, default=10)
    p.add_argument("--sweep-seeds", type=int, default=5)
    p.add_argument("--time-scale-small", type=float, default=0.5)
    p.add_argument("--time-scale-large", type=float, default=1.0)
    p.add_argument("--out", type=Path, help="default runs/headline (runs/headline-sim on sim)")
    p.add_argument("--parallel", type=int)
    p.add_argument("--ray-address")
    args = p.parse_args()
    # A shell starts a background job with SIGINT ignored; Ctrl-C or kill -INT
    # must still stop the whole benchmark, not just the part running.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    started = time.time()
    chosen = [x for x in args.parts.split(",") if x]
    specs = parts(args)
    unknown = [x for x in chosen if x not in specs]
    if unknown:
        p.error(f"unknown parts {unknown}; choose from {', '.join(specs)}")
    # The real engine's results are the headline; another engine's go beside them.
    stem = "headline" if args.engine == "real" else f"headline-{args.engine}"
    args.out = args.out or ROOT / "runs" / stem
    spec_dir = args.out / "specs"
    spec_dir.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = header("headline", started, args)
    doc["engine"] = args.engine
    # Parts not chosen keep their earlier results: one part can be run or resumed alone.
    earlier = RESULTS / f"{stem}.json"
    kept = json.loads(earlier.read_text()).get("parts", {}) if earlier.is_file() else {}
    doc["parts"] = {k: v for k, v in kept.items() if k not in chosen and k in specs}
    for part in chosen:
        shutil.rmtree(RESULTS / stem / part, ignore_errors=True)
    for part in chosen:
        scen, exp = specs[part]
        scenario_file = experiment_scenario_file(exp)
        (spec_dir / scenario_file).write_text(scen)
        (spec_dir / f"{part}-experiment.toml").write_text(exp)
        cmd = [
            sys.executable,
            "-m",
            "emulator.cli",
            "experiment",
            str(spec_dir / f"{part}-experiment.toml"),
            "--out",
            str(args.out / part),
        ]
        if args.engine != "real":
            cmd += ["--engine", args.engine]
        if args.parallel:
            cmd += ["--parallel", str(args.parallel)]
        if args.ray_address:
            cmd += ["--ray-address", args.ray_address]
        print(f"== {part}: {' '.join(cmd[2:])}", flush=True)
        t0 = time.monotonic()
        code = subprocess.run(cmd, cwd=ROOT, check=False).returncode
        if code in (130, 143):  # the part was interrupted: stop here, resumable
            print(f"{part}: interrupted; run the script again to resume", file=sys.stderr)
            sys.exit(code)
        wall = time.monotonic() - t0
        report = args.out / part / "report" / "metrics.json"
        if not report.is_file():
            print(f"{part}: no report (exit {code})", file=sys.stderr)
            doc["parts"][part] = {"exit": code, "wall_s": round(wall, 1)}
            continue
        m = json.loads(report.read_text())
        rows = [
            {
                k: r[k]
                for k in (
                    "scenario",
                    "point",
                    "protocol",
                    "episode",
                    "metric",
                    "n",
                    "median",
                    "p95",
                    "min",
                    "max",
                    "ci_low",
                    "ci_high",
                    "not_settled",
                )
            }
            for r in m["summaries"]
            if r["metric"] in HEADLINE_METRICS
        ]
        doc["parts"][part] = {
            "exit": code,
            "wall_s": round(wall, 1),
            **trial_times(args.out / part),
            "scenario": scen,
            "experiment": exp,
            "trials": len(m["trials"]),
            "excluded": m["excluded"],
            "summaries": rows,
            "tests": [t for t in m["tests"] if t["metric"] in HEADLINE_METRICS],
        }
        dest = RESULTS / stem / part
        dest.mkdir(parents=True, exist_ok=True)
        for png in (args.out / part / "report" / "plots").glob("*.png"):
            shutil.copy(png, dest / png.name)
        shutil.copy(args.out / part / "report" / "report.md", dest / "report.md")
        print(f"{part}: {len(m['trials'])} trials, exit {code}, {wall / 60:.1f} min")
    doc["elapsed_s"] = round(time.time() - started, 1)
    write(RESULTS / f"{stem}.json", doc, ROOT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
