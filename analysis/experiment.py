"""The experiment report: every trial analysed, then each metric summarised over seeds.

``rebalance-emu compare EXPERIMENT_DIR`` (and the end of ``rebalance-emu
experiment``). Per trial, the same checkers and metrics as a single run
(:mod:`analysis.checkers`, :mod:`analysis.metrics`), computed in batches:
the trials' events share one table as series ``<protocol>@<trial id>``, so
a batch of small trials costs one pass of Spark jobs, not one per trial.
Each trial's result is kept in its directory (``analysis.json``): a second
``compare`` analyses only what is new.

What enters the statistics (``analysis.stats``): completed trials whose
evidence is complete (:mod:`analysis.evidence`). A failed, degraded or
interrupted trial, or one with damaged or missing logs, is listed and
counted in the report, never mixed in. Per scenario, grid point, protocol
and episode (an episode kind, numbered when a trial has several of one kind:
``join``, ``join #2``; formation apart; overlapping changes as their own
kind ``crash+join``), each metric of :data:`analysis.episodes.EPISODE_METRICS`
over the seeds: median, p95, min, max, a bootstrap 95% CI of the median, and
between every two protocols a Mann-Whitney rank test. A value that does not
apply (a crash never detected, an episode that never settled) is left out of
that metric's sample and counted (``not settled``).
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analysis.compare import Progress, start_spark, stderr_progress
from analysis.episodes import EPISODE_METRICS
from analysis.experiment_report import RUN_LABEL, RUN_METRICS, write_experiment_report
from analysis.report import jsonable
from analysis.stats import mann_whitney, summarize

if TYPE_CHECKING:  # Spark loads only when a command runs
    from pyspark.sql import SparkSession

EXPERIMENT_FILE = "experiment.json"
ANALYSIS_FILE = "analysis.json"
ANALYSIS_VERSION = 4
"""Bumped when what a trial's ``analysis.json`` holds, or how it is computed, changes (older
ones are recomputed). 3: a member told to stop is closing, not idle; a release in the
instant of a stop counts as revoked; a member between its completed rebalance and its
claims is claiming, not idle (:mod:`analysis.timelines`). 4: topics created and deleted
during a run (:mod:`analysis.topics`: incarnation keys, ownership cut at a deletion,
records deleted with their topic not loss, a ``topics`` metric), and per episode
``rebalances``, ``members_disturbed``, ``topic_discovery_ms``, ``topic_release_ms``;
trials without topic events get the same numbers plus the new episode counts."""

MAX_BATCH_EVENTS = 3_000_000
"""Trials are analysed together up to about this many events per Spark pass."""


class ExperimentReportError(ValueError):
    """An experiment directory that cannot be reported on (one line)."""


def is_experiment_dir(path: Path | str) -> bool:
    """Whether ``path`` is an experiment directory (has ``experiment.json``)."""
    return (Path(path) / EXPERIMENT_FILE).is_file()


def read_record(exp_dir: Path) -> dict[str, Any]:
    """The experiment's ``experiment.json``."""
    try:
        rec = json.loads((exp_dir / EXPERIMENT_FILE).read_text())
    except (OSError, ValueError) as exc:
        raise ExperimentReportError(f"{exp_dir / EXPERIMENT_FILE}: unreadable ({exc})") from None
    if not isinstance(rec, dict) or not isinstance(rec.get("plan"), dict):
        raise ExperimentReportError(f"{exp_dir / EXPERIMENT_FILE}: not an experiment record")
    return rec


def _trial_dirs(exp_dir: Path, plan: Mapping[str, Any]) -> list[tuple[dict[str, Any], Path]]:
    return [(t, exp_dir / "trials" / str(t["id"])) for t in plan.get("trials") or []]


def _cached(d: Path, fingerprint: str) -> dict[str, Any] | None:
    try:
        data = json.loads((d / ANALYSIS_FILE).read_text())
    except (OSError, ValueError):
        return None
    if (
        not isinstance(data, dict)
        or data.get("version") != ANALYSIS_VERSION
        or data.get("fingerprint") != fingerprint
    ):
        return None
    return data


def analyze_trials(
    spark: SparkSession, exp_dir: Path, trials: Sequence[tuple[dict[str, Any], Path]], say: Progress
) -> dict[str, dict[str, Any]]:
    """Each completed trial's metrics and evidence, from cache or computed in batches.

    Returns:
        trial id -> ``{"metrics": ..., "evidence": ..., "events": n}``.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from analysis.checkers import SharedFrames, run_checkers
    from analysis.datasource import RUN_COLUMN, plan_runs, read_runs
    from analysis.evidence import assess
    from analysis.metrics import compute_metrics, request_snapshots
    from analysis.spark import evaluation_settings, release_spark_memory, sql_settings
    from emulator.anomalies import SERIES_SEP

    out: dict[str, dict[str, Any]] = {}
    todo: list[tuple[dict[str, Any], Path, Any, dict[str, Any]]] = []
    for t, d in trials:
        cached = _cached(d, str(t.get("fingerprint")))
        if cached is not None:
            out[str(t["id"])] = cached
            continue
        try:
            manifest = json.loads((d / "manifest.json").read_text())
        except (OSError, ValueError):
            continue
        (loaded,) = plan_runs([d]).values()  # read below, a batch of trials at once
        todo.append((t, d, loaded, manifest))
    if not todo:
        return out
    say(f"analysing {len(todo)} trials ({len(out)} from earlier analyses)")
    batches: list[list[tuple[dict[str, Any], Path, Any, dict[str, Any]]]] = [[]]
    size = 0
    for item in todo:
        if batches[-1] and size + item[2].records > MAX_BATCH_EVENTS:
            batches.append([])
            size = 0
        batches[-1].append(item)
        size += item[2].records
    for bi, batch in enumerate(batches, 1):
        t0 = time.monotonic()
        requests: dict[str, list[tuple[float, int]]] = {}
        evidence: dict[str, dict[str, Any]] = {}
        tids: dict[str, str] = {}  # trial directory name -> trial id
        for t, d, loaded, manifest in batch:
            tid = str(t["id"])
            tids[d.name] = tid
            for p, snaps in request_snapshots(manifest).items():
                requests[f"{p}{SERIES_SEP}{tid}"] = snaps
            ev = assess(manifest, [(p.rel, p.report) for p in loaded.plans])
            evidence[tid] = {p: e.to_dict() for p, e in ev.items()}
        # The batch's trials in one read, each trial's protocols their own series.
        dirs = [d for _t, d, _l, _m in batch]
        table = read_runs(
            spark, dirs, {d.name: item[2] for d, item in zip(dirs, batch, strict=True)}
        )
        trial = F.col(RUN_COLUMN)
        if any(name != tid for name, tid in tids.items()):
            trial = F.create_map(*[F.lit(x) for kv in tids.items() for x in kv])[trial]
        events = table.withColumn(
            "protocol", F.concat(F.col("protocol"), F.lit(SERIES_SEP), trial)
        ).drop(RUN_COLUMN)
        n = sum(item[2].records for item in batch)
        parts = max(spark.sparkContext.defaultParallelism, math.ceil(n / 500_000))
        events = events.coalesce(parts).persist(StorageLevel.MEMORY_AND_DISK)
        shared = SharedFrames(events, persist=True)
        try:
            # a batch of small trials is read and analysed interpreted (evaluation_settings)
            with sql_settings(spark, evaluation_settings(n)):
                events.count()
                anomalies = run_checkers(events, shared).persist(StorageLevel.MEMORY_AND_DISK)
                metrics = compute_metrics(events, anomalies, shared=shared, requests=requests)
                anomalies.unpersist()
        finally:
            shared.release()
            events.unpersist()
            # The checkpointed frames of this batch are freed only when the JVM
            # collects them: without this, batch after batch filled the driver's heap
            # (a 1 GiB heap ran out in the 4th batch of 100-member trials).
            shared = anomalies = None  # type: ignore[assignment]
            release_spark_memory(spark)
        for t, d, loaded, _manifest in batch:
            tid = str(t["id"])
            proto = str(t["protocol"])
            m = metrics.get(f"{proto}{SERIES_SEP}{tid}", {})
            ev = evidence.get(tid, {}).get(proto) or {"verdict": "missing", "problems": ["no logs"]}
            data = {
                "version": ANALYSIS_VERSION,
                "fingerprint": t.get("fingerprint"),
                "trial": tid,
                "events": loaded.records,
                "evidence": ev,
                "metrics": m,
            }
            (d / ANALYSIS_FILE).write_text(json.dumps(jsonable(data), indent=1) + "\n")
            out[tid] = data
        say(
            f"batch {bi}/{len(batches)}: {len(batch)} trials, {n:,} events in "
            f"{time.monotonic() - t0:.0f} s"
        )
    return out


# ----------------------------------------------------------------- statistics


def episode_labels(episodes: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each episode's label within its trial: its kind, numbered from the second of a kind."""
    seen: dict[str, int] = {}
    out: list[str] = []
    for e in episodes:
        k = str(e.get("kind"))
        seen[k] = seen.get(k, 0) + 1
        out.append(k if seen[k] == 1 else f"{k} #{seen[k]}")
    return out


@dataclass
class Cell:
    """One metric of one episode label under one protocol at one point: the values over seeds."""

    values: list[float | None] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)
    unsettled: int = 0


def collect(
    plan: Mapping[str, Any], analyses: Mapping[str, Mapping[str, Any]]
) -> tuple[dict[tuple[str, str, str, str, str], Cell], list[dict[str, Any]]]:
    """Values per ``(scenario, point, protocol, episode label, metric)``, and the excluded trials.

    A trial enters only when completed with complete evidence.
    """
    cells: dict[tuple[str, str, str, str, str], Cell] = {}
    excluded: list[dict[str, Any]] = []
    for t in plan.get("trials") or []:
        tid = str(t["id"])
        a = analyses.get(tid)
        state = t.get("_state")
        why = None
        if state != "completed":
            why = f"trial {state or 'not run'}"
        elif a is None:
            why = "no analysis (no manifest or logs)"
        elif (a.get("evidence") or {}).get("verdict") != "complete":
            problems = (a.get("evidence") or {}).get("problems") or []
            why = "incomplete evidence: " + "; ".join(str(p) for p in problems[:3])
        if why is not None:
            excluded.append(
                {
                    "trial": tid,
                    "protocol": t["protocol"],
                    "point": t["point_label"],
                    "seed": t["seed"],
                    "why": why,
                }
            )
            continue
        assert a is not None
        m = a.get("metrics") or {}
        base = (str(t["scenario"]), str(t["point_label"]), str(t["protocol"]))
        eps = m.get("episodes") or []
        for label, e in zip(episode_labels(eps), eps, strict=True):
            for key, _doc in EPISODE_METRICS:
                cell = cells.setdefault((*base, label, key), Cell())
                v = e.get(key)
                cell.values.append(None if v is None else float(v))
                cell.seeds.append(int(t["seed"]))
                if key == "time_to_stable_ms" and v is None:
                    cell.unsettled += 1
        for key, _doc in RUN_METRICS:
            cell = cells.setdefault((*base, RUN_LABEL, key), Cell())
            v = m.get(key)
            cell.values.append(None if v is None else float(v))
            cell.seeds.append(int(t["seed"]))
    return cells, excluded


def statistics(
    cells: Mapping[tuple[str, str, str, str, str], Cell], protocols: Sequence[str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Summaries per cell, and rank tests between every two protocols per metric.

    Returns:
        ``(summaries, tests)``, JSON-able rows.
    """
    summaries: list[dict[str, Any]] = []
    for (sc, point, proto, label, key), cell in sorted(cells.items()):
        s = summarize(cell.values)
        summaries.append(
            {
                "scenario": sc,
                "point": point,
                "protocol": proto,
                "episode": label,
                "metric": key,
                **s.to_dict(),
                "trials": len(cell.values),
                "not_applicable": sum(1 for v in cell.values if v is None),
                "not_settled": cell.unsettled,
                "values": cell.values,
                "seeds": cell.seeds,
            }
        )
    tests: list[dict[str, Any]] = []
    keys = sorted({(sc, pt, lab, k) for sc, pt, _p, lab, k in cells})
    for sc, pt, lab, k in keys:
        present = [p for p in protocols if (sc, pt, p, lab, k) in cells]
        for i, a in enumerate(present):
            for b in present[i + 1 :]:
                va = [v for v in cells[(sc, pt, a, lab, k)].values if v is not None]
                vb = [v for v in cells[(sc, pt, b, lab, k)].values if v is not None]
                if not va or not vb:
                    continue
                r = mann_whitney(va, vb)
                tests.append(
                    {
                        "scenario": sc,
                        "point": pt,
                        "episode": lab,
                        "metric": k,
                        "a": a,
                        "b": b,
                        **r.to_dict(),
                    }
                )
    return summaries, tests


# ----------------------------------------------------------------- report


@dataclass
class ExperimentReport:
    """What :func:`compare_experiment` wrote."""

    report_dir: Path
    trials: int
    used: int
    excluded: list[dict[str, Any]]

    @property
    def incomplete(self) -> list[str]:
        """Trial ids left out of the statistics."""
        return [str(x["trial"]) for x in self.excluded]


def compare_experiment(
    exp_dir: Path | str,
    out_dir: Path | None = None,
    spark_master: str | None = None,
    progress: Progress | None = None,
    *,
    spark: SparkSession | None = None,
) -> ExperimentReport:
    """Analyse every completed trial and write the experiment report.

    Raises:
        ExperimentReportError: not an experiment directory.
    """
    say = progress or stderr_progress()
    exp = Path(exp_dir)
    rec = read_record(exp)
    plan = rec["plan"]
    states = rec.get("states") or {}
    trials = _trial_dirs(exp, plan)
    for t, d in trials:
        # the trial's own record wins over the experiment's (a crash between the two writes)
        tj: dict[str, Any] = {}
        with contextlib.suppress(OSError, ValueError):
            tj = json.loads((d / "trial.json").read_text())
        manifest_status = None
        with contextlib.suppress(OSError, ValueError):
            manifest_status = json.loads((d / "manifest.json").read_text()).get("status")
        t["_state"] = (
            manifest_status
            if manifest_status in ("completed", "degraded", "failed")
            else (tj.get("status") or states.get(t["id"]) or "not run")
        )
        t["_wall_s"] = tj.get("wall_s")
    done = [(t, d) for t, d in trials if t["_state"] == "completed"]
    analyses: dict[str, dict[str, Any]] = {}
    if done:
        if spark is None:
            spark = start_spark(spark_master, say)
        analyses = analyze_trials(spark, exp, done, say)
    cells, excluded = collect(plan, analyses)
    summaries, tests = statistics(cells, list(plan.get("protocols") or []))
    out = Path(out_dir) if out_dir is not None else exp / "report"
    say(f"writing the experiment report to {out}")
    write_experiment_report(out, rec, trials, summaries, tests, excluded)
    used = len({t["id"] for t, _ in trials}) - len(excluded)
    say(f"report written: {out / 'report.html'}")
    return ExperimentReport(out, len(trials), used, excluded)
