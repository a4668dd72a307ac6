"""``rebalance-emu compare``: run directories in, the comparison report out.

For each run directory: load its event logs with the ``rebalance-events``
data source (:func:`analysis.datasource.load_events`), run the checkers
(:func:`analysis.checkers.run_checkers`), compute the metrics and the plot
frames (:mod:`analysis.metrics`), then write one report
(:func:`analysis.report.write_report`) for all of them. With one run the
report's series are its protocols; with several, ``<run>/<protocol>``, plus
the herd plot (coordination cost per membership change against group size).

Spark is ``local[*]`` unless ``spark_master`` names a cluster; the Spark jobs
only collect small frames (ownership intervals, time buckets, anomalies) to
the driver.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analysis import report as rpt
from analysis.evidence import Evidence, assess
from emulator.storage import Location, StorageError, is_url, resolve

if TYPE_CHECKING:  # Spark and pandas load only when a command runs (the CLI starts fast)
    import pandas as pd
    from pyspark.sql import SparkSession

Progress = Callable[[str], None]

ROWS_PER_PARTITION = 500_000
"""Events per partition of the cached event table (at least one partition per core)."""


MEMORY_CACHE_MAX_EVENTS = 5_000_000
"""Runs up to this many events are cached in memory for the checkers, larger ones on disk."""


class CompareError(ValueError):
    """A run directory that cannot be compared (one-line message)."""


def stderr_progress(prefix: str = "compare") -> Progress:
    """A progress callback printing ``<prefix>: [  12.3 s] message`` lines to stderr."""
    t0 = time.monotonic()

    def say(message: str) -> None:
        print(f"{prefix}: [{time.monotonic() - t0:6.1f} s] {message}", file=sys.stderr, flush=True)

    return say


def start_spark(spark_master: str | None, say: Progress) -> SparkSession:
    """The SparkSession for a report (``local[*]`` unless a master is named).

    On one machine the shuffles are small: one partition per core, not 8.
    """
    from analysis.spark import get_spark

    say(f"starting Spark ({spark_master or 'local[*]'})")
    spark = get_spark(spark_master)
    if (spark.sparkContext.master or "").startswith("local"):
        cores = spark.sparkContext.defaultParallelism
        spark.conf.set("spark.sql.shuffle.partitions", str(max(1, cores)))
    return spark


@contextlib.contextmanager
def ticking(
    say: Progress, step: str, spark: SparkSession | None = None, every_s: float = 15.0
) -> Iterator[None]:
    """While the body runs, say ``step ... (N s, J Spark jobs so far)`` every ``every_s``."""
    stop = threading.Event()
    t0 = time.monotonic()

    def jobs() -> str:
        if spark is None:
            return ""
        try:
            n = len(spark.sparkContext.statusTracker().getJobIdsForGroup(None))
        except Exception:  # the tracker is best effort
            return ""
        return f", {n} Spark jobs so far"

    def loop() -> None:
        while not stop.wait(every_s):
            say(f"{step} ... ({time.monotonic() - t0:.0f} s{jobs()})")

    thread = threading.Thread(target=loop, name="compare-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=1.0)


@dataclass
class RunAnalysis:
    """What :func:`analyze_run` computed for one run directory.

    Attributes:
        run_dir: the run directory.
        label: the run's name in the report (its directory name, made unique).
        manifest: the run's ``manifest.json``.
        metrics: per protocol, from :func:`analysis.metrics.compute_metrics`.
        frames: pandas plot frames by :mod:`analysis.report` key.
        data: what was read: files, events, truncated files.
        evidence: per protocol, whether its logs are all there and sound
            (:mod:`analysis.evidence`).
    """

    run_dir: Path | str
    label: str
    manifest: dict[str, Any]
    metrics: dict[str, dict[str, Any]]
    frames: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    evidence: dict[str, Evidence] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """Every protocol's evidence is complete."""
        return all(e.complete for e in self.evidence.values())


def _run_location(run_dir: Path | str) -> Location:
    try:
        return resolve(run_dir)
    except StorageError as exc:
        raise CompareError(str(exc)) from None


def check_run_dir(run_dir: Path | str) -> dict[str, Any]:
    """The run's manifest; :class:`CompareError` when ``run_dir`` is not a run directory.

    ``run_dir`` is a local path or a URL (``s3://...``, see :mod:`emulator.storage`).
    """
    loc = _run_location(run_dir)
    shown = loc.display() if loc.is_url else str(run_dir)
    mshown = loc.display("manifest.json") if loc.is_url else str(Path(run_dir) / "manifest.json")
    try:
        if not loc.is_dir():
            raise CompareError(f"{shown}: no such run directory")
        if not loc.is_file("manifest.json"):
            raise CompareError(f"{shown}: not a run directory (no manifest.json)")
        try:
            manifest = json.loads(loc.read_text("manifest.json"))
        except (OSError, ValueError) as exc:
            raise CompareError(
                f"{mshown}: unreadable manifest ({str(exc).splitlines()[0]})"
            ) from None
        if not isinstance(manifest, dict):
            raise CompareError(f"{mshown}: the manifest is not a JSON object")
        if not loc.event_logs():
            raise CompareError(f"{shown}: no event logs (<protocol>/events/*.msgpack)")
    except StorageError as exc:
        raise CompareError(str(exc)) from None
    return manifest


def _as_run_dir(d: Path | str) -> Path | str:
    """A URL stays a string (``Path`` would fold its ``//``); anything else is a Path."""
    return d if isinstance(d, str) and is_url(d) else Path(d)


def _base_name(d: Path | str) -> str:
    if isinstance(d, str):
        return _run_location(d).root.rstrip("/").rsplit("/", 1)[-1] or "run"
    return d.resolve().name or "run"


def analyze_run(
    spark: SparkSession,
    run_dir: Path | str,
    *,
    label: str | None = None,
    progress: Progress | None = None,
    bucket_ms: int = 1000,
    cache: bool = True,
) -> RunAnalysis:
    """Load one run directory and compute its anomalies, metrics and plot frames.

    Args:
        spark: the SparkSession (:func:`analysis.spark.get_spark`).
        run_dir: the run directory.
        label: the run's name (default: the directory's name).
        progress: called with a line per step.
        bucket_ms: the throughput/lag time bucket in emulated ms.
        cache: read the events through the run's columnar cache
            (:mod:`analysis.columnar`), when it is local and writable.

    Raises:
        CompareError: not a run directory, or an unreadable event log.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from analysis.checkers import SharedFrames, run_checkers
    from analysis.datasource import event_log_error, load_events
    from analysis.metrics import (
        compute_metrics,
        fault_marks,
        ownership_intervals,
        rebalance_durations,
        request_snapshots,
        throughput_lag,
    )
    from analysis.spark import evaluation_settings, sql_settings

    say = progress or (lambda _m: None)
    # PySpark 4.3 warns on every toPandas that it "does not yet fully support
    # pandas >= 3"; the frames here are plain numbers and strings.
    warnings.filterwarnings(
        "ignore", message="PySpark does not yet fully support pandas", category=FutureWarning
    )
    run_dir = _as_run_dir(run_dir)
    manifest = check_run_dir(run_dir)
    name = label or _base_name(run_dir)
    say(f"{name}: loading event logs from {run_dir}")
    try:
        with ticking(say, f"{name}: loading event logs", spark):
            loaded = load_events(spark, str(run_dir), columnar=cache, progress=say)
            if loaded.cache is not None:
                say(f"{name}: {loaded.cache.describe()}")
            elif loaded.cache_note:
                say(f"{name}: {loaded.cache_note}")
            # One input partition per file is right for the scan, but every
            # checker stage then runs a task per file over the cached table:
            # keep about one partition per core, more only for large runs.
            parts = max(
                spark.sparkContext.defaultParallelism,
                math.ceil(loaded.records / ROWS_PER_PARTITION),
            )
            # Cached in memory, a large run's events hold the storage memory that
            # the checkers' aggregations need (AGGREGATE_OUT_OF_MEMORY at 30 M
            # events with a 4 GB driver); on local disk they leave it free.
            level = (
                StorageLevel.MEMORY_AND_DISK
                if loaded.records <= MEMORY_CACHE_MAX_EVENTS
                else StorageLevel.DISK_ONLY
            )
            if loaded.cache is not None:
                # Parquet underneath: each pass scans only the columns it needs;
                # persisting the table too was no faster at 1 M events
                # (bench_analysis: 39.3 s against 38.3 s)
                events = loaded.events
            else:
                # read here, where a damaged record is reported as such (a small
                # input interpreted, as the checkers will evaluate it)
                events = loaded.events.coalesce(parts).persist(level)
                with sql_settings(spark, evaluation_settings(loaded.records)):
                    events.count()
    except Exception as exc:  # EventLogError, or a corrupt record met in a Spark task
        err = event_log_error(exc)
        if err is None:
            raise
        raise CompareError(str(err).splitlines()[0]) from None
    # The checkers' shuffles (sweeps over the processed batches, offset
    # segments) must not put millions of rows in one task: a hash aggregate
    # feeding a window's sort then runs out of execution memory
    # (AGGREGATE_OUT_OF_MEMORY at 30 M events with 2 partitions). A small run's
    # expressions are evaluated interpreted (analysis.spark.evaluation_settings).
    settings = {"spark.sql.shuffle.partitions": str(parts), **evaluation_settings(loaded.records)}
    with sql_settings(spark, settings):
        # The frames the checkers, metrics and plots share, built once; their
        # per-protocol summary names the protocols and counts the events.
        shared = SharedFrames(events, persist=True)
        try:
            summary = shared.summary.select("protocol", "events").collect()
            protocols = sorted(r[0] for r in summary if r[0] is not None)
            n_events = sum(int(r[1]) for r in summary)
            evidence = assess(manifest, [(p.rel, p.report) for p in loaded.plans])
            evidence = {p: e for p, e in evidence.items() if p in protocols or not e.complete}
            for e in evidence.values():
                for problem in e.problems:
                    say(f"{name}: {e.protocol}: incomplete evidence: {problem}")
            undetermined = sorted(p for p, e in evidence.items() if not e.complete)
            truncated = [f"{p} ({b} bytes)" for p, b in loaded.truncated]
            say(
                f"{name}: {n_events:,} events from {loaded.files} files; protocols "
                f"{', '.join(protocols) or 'none'}"
                + (f"; truncated tails skipped: {', '.join(truncated)}" if truncated else "")
            )
            say(f"{name}: running the checkers")
            with ticking(say, f"{name}: running the checkers", spark):
                anomalies = run_checkers(events, shared)
                if undetermined:  # no verdict on evidence that is not all there
                    anomalies = anomalies.withColumn(
                        "allowed",
                        F.when(F.col("protocol").isin(*undetermined), F.lit(None)).otherwise(
                            F.col("allowed")
                        ),
                    )
                anomalies = anomalies.persist(StorageLevel.MEMORY_AND_DISK)
                n_anom = anomalies.count()
            say(f"{name}: {n_anom} anomaly rows; computing metrics")
            with ticking(say, f"{name}: computing metrics", spark):
                # one pass for the lag: the episodes read it, the throughput plot draws it
                lag: pd.DataFrame = throughput_lag(events, bucket_ms=bucket_ms).toPandas()
                metrics = compute_metrics(
                    events,
                    anomalies,
                    shared=shared,
                    requests=request_snapshots(manifest),
                    lag_rows=lag.to_dict(orient="records"),
                    bucket_ms=bucket_ms,
                )
            say(f"{name}: collecting plot frames")
            with ticking(say, f"{name}: collecting plot frames", spark):
                frames = {
                    rpt.OWNERSHIP: ownership_intervals(events, shared).toPandas(),
                    rpt.THROUGHPUT: lag,
                    rpt.DURATIONS: rebalance_durations(events, shared=shared).toPandas(),
                    rpt.FAULTS: rpt.with_timeline_marks(
                        fault_marks(events).toPandas(), manifest, protocols
                    ),
                    rpt.ANOMALIES: anomalies.toPandas(),
                }
            anomalies.unpersist()
            frames[rpt.ANOMALIES], skew = clock_skew(frames[rpt.ANOMALIES], manifest)
            for proto, info in skew.items():
                if proto in metrics:
                    metrics[proto]["clock_skew"] = info
            for proto, e in evidence.items():
                if proto in metrics:
                    metrics[proto]["evidence"] = e.to_dict()
                    metrics[proto]["anomalies_undetermined"] = (
                        sum(metrics[proto]["anomalies"].values()) if not e.complete else 0
                    )
        finally:
            shared.release()
            events.unpersist()
    data = {
        "event log files": loaded.files,
        "events": n_events,
        "truncated files": len(loaded.truncated),
        "truncated bytes skipped": sum(b for _, b in loaded.truncated),
        "damaged regions skipped": len(loaded.damage),
        "evidence": ", ".join(f"{p} {e.verdict}" for p, e in sorted(evidence.items())),
        "events read": (
            loaded.cache.describe()
            if loaded.cache is not None
            else loaded.cache_note or "through the rebalance-events data source"
        ),
    }
    return RunAnalysis(run_dir, name, manifest, metrics, frames, data, evidence)


def clock_skew(
    anomalies: pd.DataFrame, manifest: Mapping[str, Any]
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Which double-ownership / double-processing windows hold whatever the clocks did.

    Events carry each node's own wall clock turned into emulated time, so a
    window between two members on different nodes could be an artefact of
    clock skew if it is shorter than the skew bound between their nodes (the
    measured offsets and their uncertainties in the manifest's
    ``protocols.<p>.placement``, divided by the time scale). Members on one
    node share one clock: their windows are certain.

    Returns:
        the anomalies with ``skew_bound_ms`` (emulated ms) and ``certain`` for
        those two kinds (None where the run recorded no placement), and per
        protocol ``{nodes, bound_wall_ms, bound_emu_ms, cross_node_windows,
        uncertain_windows}``.
    """
    import pandas as pd

    from emulator.anomalies import DOUBLE_OWNERSHIP, DOUBLE_PROCESSING
    from emulator.clock import skew_bound_ms

    an = anomalies.copy()
    an["skew_bound_ms"] = pd.Series([None] * len(an), dtype="object", index=an.index)
    an["certain"] = pd.Series([None] * len(an), dtype="object", index=an.index)
    summary: dict[str, dict[str, Any]] = {}
    scale = float((manifest.get("scenario") or {}).get("time_scale") or 1.0)
    for proto, entry in (manifest.get("protocols") or {}).items():
        placement = (entry or {}).get("placement") or {}
        nodes = placement.get("nodes") or {}
        actors = placement.get("actors") or {}
        members = placement.get("members") or {}
        if not nodes or not members:
            continue  # a run from before placement was recorded: nothing to say
        host_nodes = {actors[h] for h in members.values() if h in actors}
        bound_wall = skew_bound_ms(nodes, host_nodes)
        cross = uncertain = 0
        cross_kinds = an["kind"].isin([DOUBLE_OWNERSHIP, DOUBLE_PROCESSING])
        rows = an.index[(an["protocol"] == proto) & cross_kinds]
        for i in rows:
            a = actors.get(members.get(str(an.at[i, "member"]), ""))
            b = actors.get(members.get(str(an.at[i, "other_member"]), ""))
            if a is None or b is None:
                continue
            bound = skew_bound_ms(nodes, [a, b]) / scale  # 0 on one node: one clock
            length = float(an.at[i, "t_end_ms"]) - float(an.at[i, "t_start_ms"])
            an.at[i, "skew_bound_ms"] = round(bound, 3)
            an.at[i, "certain"] = bool(length > bound)
            if a != b:
                cross += 1
                uncertain += int(length <= bound)
        summary[proto] = {
            "nodes": len(host_nodes),
            "bound_wall_ms": round(bound_wall, 3),
            "bound_emu_ms": round(bound_wall / scale, 3),
            "cross_node_windows": cross,
            "uncertain_windows": uncertain,
        }
    return an, summary


def group_size(manifest: Mapping[str, Any]) -> int | None:
    """The run's initial group size from its manifest's scenario (``[group].consumers``)."""
    try:
        return int(manifest["scenario"]["group"]["consumers"])
    except (KeyError, TypeError, ValueError):
        return None


def herd_rows(
    label: str, size: int | None, metrics: Mapping[str, Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Herd-plot rows for one run: per protocol, its cost per membership change.

    The 0.8 consumer: ZooKeeper operations (reads + writes) and watch
    notifications per change (``zk_ops_per_change``, ``zk_watches_per_change``);
    the others: coordinator requests per change (``coordinator_requests`` /
    ``membership_changes``).
    """
    rows: list[dict[str, Any]] = []
    if size is None:
        return rows

    def add(proto: str, measure: str, value: Any) -> None:
        if isinstance(value, int | float) and not isinstance(value, bool):
            rows.append(
                {
                    "run": label,
                    "protocol": proto,
                    "group_size": size,
                    "measure": measure,
                    "per_change": float(value),
                }
            )

    for proto, m in metrics.items():
        if proto == "zookeeper":
            add(proto, "ZooKeeper operations", m.get("zk_ops_per_change"))
            add(proto, "ZooKeeper watch notifications", m.get("zk_watches_per_change"))
        else:
            changes = m.get("membership_changes") or 0
            requests = m.get("coordinator_requests")
            if changes and isinstance(requests, int | float):
                add(proto, "coordinator requests", requests / changes)
    return rows


def merge(analyses: Sequence[RunAnalysis]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Metrics and frames of several runs as one report's series.

    One run: the series are its protocols. Several: ``<label>/<protocol>``,
    and a herd frame when the runs' group sizes differ.
    """
    import pandas as pd

    if len(analyses) == 1:
        a = analyses[0]
        return dict(a.metrics), dict(a.frames)
    metrics: dict[str, Any] = {}
    parts: dict[str, list[Any]] = {}
    herd: list[dict[str, Any]] = []
    for a in analyses:
        for proto, m in a.metrics.items():
            metrics[f"{a.label}/{proto}"] = m
        for key, df in a.frames.items():
            df = rpt.frame({key: df}, key)
            df["protocol"] = [f"{a.label}/{p}" for p in df["protocol"]]
            parts.setdefault(key, []).append(df)
        herd.extend(herd_rows(a.label, group_size(a.manifest), a.metrics))
    frames: dict[str, Any] = {
        k: pd.concat([d for d in v if not d.empty] or v[:1], ignore_index=True)
        for k, v in parts.items()
    }
    ends = [
        {"protocol": f"{a.label}/{proto}", "end_ms": _scenario_ms(a.manifest)}
        for a in analyses
        if isinstance(a.manifest.get("scenario"), Mapping)
        and a.manifest["scenario"].get("duration_s") is not None
        for proto in a.metrics
    ]
    if ends:
        frames[rpt.SERIES_ENDS] = pd.DataFrame(ends)
    sizes = {r["group_size"] for r in herd}
    if len(sizes) > 1:
        frames[rpt.HERD] = pd.DataFrame(herd)
    return metrics, frames


def _scenario_ms(manifest: Mapping[str, Any]) -> float:
    return float(manifest["scenario"]["duration_s"]) * 1000.0


def _labels(run_dirs: Sequence[Path | str]) -> list[str]:
    labels: list[str] = []
    for d in run_dirs:
        base = _base_name(d)
        name, i = base, 2
        while name in labels:
            name, i = f"{base}-{i}", i + 1
        labels.append(name)
    return labels


@dataclass
class CompareOutcome:
    """What :func:`compare_runs` wrote and found.

    Attributes:
        report_dir: the report directory.
        evidence: per run label, per protocol, its evidence.
    """

    report_dir: Path
    evidence: dict[str, dict[str, Evidence]]

    @property
    def incomplete(self) -> list[str]:
        """``label/protocol`` (``protocol`` for one run) of every incomplete series."""
        one = len(self.evidence) == 1
        return [
            p if one else f"{label}/{p}"
            for label, ev in self.evidence.items()
            for p, e in sorted(ev.items())
            if not e.complete
        ]


def compare(
    run_dirs: Sequence[Path | str],
    out_dir: Path | None = None,
    spark_master: str | None = None,
    progress: Progress | None = None,
    *,
    spark: SparkSession | None = None,
    cache: bool = True,
) -> Path:
    """Analyse run directories and write the comparison report (see :func:`compare_runs`)."""
    return compare_runs(
        run_dirs, out_dir, spark_master, progress, spark=spark, cache=cache
    ).report_dir


def compare_runs(
    run_dirs: Sequence[Path | str],
    out_dir: Path | None = None,
    spark_master: str | None = None,
    progress: Progress | None = None,
    *,
    spark: SparkSession | None = None,
    cache: bool = True,
) -> CompareOutcome:
    """Analyse run directories and write the comparison report.

    Args:
        run_dirs: one or more run directories (``manifest.json`` and
            ``<protocol>/events/*.msgpack``), local paths or URLs.
        out_dir: the report directory; default ``<first run>/report``
            (``reports/<name>`` here when the first run is at a URL).
        spark_master: a Spark master URL; ``None``: ``local[*]``.
        progress: called with one line per step; ``None`` prints them to stderr.
        spark: an existing SparkSession to use instead (then ``spark_master``
            is ignored); a session this function starts is left running for
            the caller's process (``getOrCreate``).
        cache: read each local run through its columnar cache
            (:mod:`analysis.columnar`, written on the first compare).

    Returns:
        The report directory (``report.md``, ``report.html``, ``metrics.json``,
        ``plots/``) and each protocol's evidence (:mod:`analysis.evidence`).

    Raises:
        CompareError: a missing or unreadable run directory or event log.
    """
    say = progress if progress is not None else stderr_progress()
    dirs = [_as_run_dir(d) for d in run_dirs]
    if not dirs:
        raise CompareError("no run directory given")
    for d in dirs:
        check_run_dir(d)
    if out_dir is not None:
        out = Path(out_dir)
    else:
        first = dirs[0]
        out = first / "report" if isinstance(first, Path) else Path("reports") / _base_name(first)
    if spark is None:
        spark = start_spark(spark_master, say)
    analyses = [
        analyze_run(spark, d, label=label, progress=say, cache=cache)
        for d, label in zip(dirs, _labels(dirs), strict=True)
    ]
    metrics, frames = merge(analyses)
    say(f"writing the report to {out}")
    data: dict[str, Any] = {}
    for a in analyses:
        for k, v in a.data.items():
            key = f"{a.label}: {k}" if len(analyses) > 1 else k
            data[key] = v
    paths = rpt.write_report(out, metrics, frames, [a.manifest for a in analyses], data=data)
    say(f"report written: {paths.html}")
    return CompareOutcome(out, {a.label: a.evidence for a in analyses})
