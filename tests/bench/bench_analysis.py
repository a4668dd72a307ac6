#!/usr/bin/env python
"""Benchmark: loading and analysing 1, 10 and 30 million events with Spark.

What it measures, per size (millions of events):

1. **generate**: a synthetic run directory in the real log format: the record
   layout of :class:`emulator.eventlog.EventWriter` (same key order, envelope,
   ``seq`` per file, ``None`` fields left out, checksummed blocks of 256 KiB
   and a closing block), packed with ``msgpack`` directly
   (EventWriter's per-event bookkeeping would dominate at 30 M). Four
   protocols, each with an orchestrator, 3 brokers, 1 producer and 4 consumer
   hosts (8 members on 32 partitions); data batches of 10 offsets produced and
   then processed by the partition's owner; a rebalance every 50 batches per
   partition (legacy: trigger/attempt/release/claim/commit/complete; modern:
   revoked/assigned with partition lists and commits). Not timed in the ratio.
2. **plan**: :func:`analysis.datasource.load_events`' driver walk
   (schema 2: block headers and CRC32C checksums: boundaries, counts, tails, damage).
3. **data source scan**: the loaded DataFrame written to Spark's ``noop`` sink,
   which materialises every column of every row (``count()`` would too, since a
   Python data source cannot prune, but ``noop`` is the same for Parquet).
4. **Parquet**: the same rows written to Parquet (not in the ratio), then the
   Parquet files scanned into the ``noop`` sink. **ratio** = data source scan
   time / Parquet scan time.
5. **where the time goes** inside one data-source task, outside Spark on one
   core, for one 64 MiB segment: record-by-record msgpack decoding alone, and
   with the column lists built (the path ``read_segment`` takes only for a
   block msgspec refuses), then ``read_segment`` itself (msgspec's block
   decoding, columns and Arrow arrays), and ``read_segment`` with the
   compiled decode (:mod:`analysis.native_decode`; the scans above use it
   when the run's logs reach its size threshold); the rest of the Spark scan
   time is Arrow transfer to the JVM and task overhead.
5b. **columnar**: :func:`analysis.datasource.load_events` with ``columnar``:
   the first read decodes every log into the run's columnar cache (decoding
   processes of its own) and scans it; the second finds it unchanged and scans it. Each
   with its ratio to the Parquet scan.
6. **compare**: :func:`analysis.compare.compare` on the run (checkers,
   metrics, plot frames, report), timed per step from its progress lines,
   when ``analysis.compare`` and everything it needs import; otherwise the
   checkers (``analysis.checkers.run_checkers``) and metrics
   (``analysis.metrics.compute_metrics``) that exist; otherwise nothing
   (the JSON says which).

Per compare mode (``--compare-modes``): ``nocache`` (through the data
source), ``cold`` (the columnar cache deleted first: its decoding is in the
total), ``warm`` (the cache there).

7. **experiment** (``--experiment N``, default 200, before the sizes): an
   experiment of N small sim trials (run once with ``rebalance-emu experiment
   --engine sim`` and kept in ``--dir``) compared from nothing: every trial's
   ``analysis.json`` removed first.

Spark runs ``local[2]`` (this machine has 2 cores) with ``--driver-memory``.

Results: a table on stdout and ``tests/bench/results/analysis.json`` (written
after each size).

Usage::

    .venv/bin/python tests/bench/bench_analysis.py                 # 1, 10, 30 M
    .venv/bin/python tests/bench/bench_analysis.py --sizes 1       # quick
    .venv/bin/python tests/bench/bench_analysis.py --sizes 1,10 --no-compare
    .venv/bin/python tests/bench/bench_analysis.py --sizes 30 --compare-only --append
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import platform
import re
import shutil
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import msgpack

from emulator.events import SCHEMA_VERSION
from emulator.logformat import closing_block, frame

FLUSH_BYTES = 256 * 1024  # EventWriter's default flush size: one block each
PROTOCOLS = ("zookeeper", "classic-eager", "classic-cooperative", "consumer")
TOPIC = "events"
PARTITIONS = 32
MEMBERS = 8
HOSTS = 4
BATCH = 10  # offsets per produced/processed batch
EPOCH_BATCHES = 50  # batches per partition between rebalances
GROUP = "bench-group"
RUN_ID = "bench-analysis"


class _Files:
    """Per-file buffered writers with their own ``seq`` (as one EventWriter per actor)."""

    def __init__(self, events_dir: Path, protocol: str) -> None:
        self.dir = events_dir
        self.protocol = protocol
        self.packer = msgpack.Packer(use_bin_type=True)
        self.bufs: dict[str, list[bytes]] = {}
        self.seqs: dict[str, int] = {}
        self.sizes: dict[str, int] = {}
        self.blocks: dict[str, int] = {}
        self.total = 0
        events_dir.mkdir(parents=True, exist_ok=True)

    def emit(self, actor: str, kind: str, t: float, **fields: object) -> None:
        seq = self.seqs.get(actor, 0)
        self.seqs[actor] = seq + 1
        ev: dict[str, object] = {
            "v": SCHEMA_VERSION,
            "seq": seq,
            "kind": kind,
            "t_emu_ms": t,
            "ts_wall": 1.8e9 + t / 1000.0,
            "ts_mono": 1000.0 + t / 1000.0,
            "run_id": RUN_ID,
            "node": "bench-node",
            "actor": actor,
            "protocol": self.protocol,
        }
        ev.update(fields)
        rec = self.packer.pack(ev)
        buf = self.bufs.setdefault(actor, [])
        buf.append(rec)
        self.sizes[actor] = self.sizes.get(actor, 0) + len(rec)
        self.total += 1
        if self.sizes[actor] >= FLUSH_BYTES:
            self.flush(actor)

    def flush(self, actor: str, closing: bool = False) -> None:
        """One checksummed block, as EventWriter.flush writes it (and its closing block)."""
        buf = self.bufs.get(actor, [])
        out = frame(b"".join(buf), len(buf)) if buf else b""
        if buf:
            self.blocks[actor] = self.blocks.get(actor, 0) + 1
        if closing:
            out += closing_block(self.seqs.get(actor, 0), self.blocks.get(actor, 0))
        with open(self.dir / f"{actor}.msgpack", "ab") as f:
            f.write(out)
        self.bufs[actor] = []
        self.sizes[actor] = 0

    def close(self) -> None:
        for actor in list(self.bufs):
            self.flush(actor, closing=True)


def _owners(epoch: int) -> dict[int, int]:
    """Partition -> member index in an epoch (the assignment rotates every rebalance)."""
    return {p: (p + epoch) % MEMBERS for p in range(PARTITIONS)}


def _host(m: int) -> str:
    return f"host-{m % HOSTS}"


def _pstr(parts: list[int]) -> str:
    return ",".join(f"{TOPIC}:{p}" for p in sorted(parts))


def generate_protocol(out: str, protocol: str, n_events: int) -> int:
    """Write one protocol's logs of about ``n_events`` events; returns the exact count."""
    fs = _Files(Path(out) / protocol / "events", protocol)
    legacy = protocol == "zookeeper"
    t = 0.0
    fs.emit("orchestrator", "run_started", t, detail='{"scenario": "bench"}')
    for b in range(3):
        fs.emit(f"broker-{b}", "broker_started", t, broker=b, count=PARTITIONS)
    for m in range(MEMBERS):
        fs.emit(_host(m), "consumer_started", t, group=GROUP, member=f"c-{m}")
    next_off = [0] * PARTITIONS
    committed = [0] * PARTITIONS
    epoch = 0
    prev: dict[int, int] = {}
    while fs.total < n_events:
        owners = _owners(epoch)
        t += 5.0
        # the rebalance
        for m in range(MEMBERS):
            member = f"c-{m}"
            mine_old = [p for p, o in prev.items() if o == m]
            mine_new = [p for p, o in owners.items() if o == m]
            h = _host(m)
            common: dict[str, object] = {"group": GROUP, "member": member}
            if legacy:
                fs.emit(h, "rebalance_triggered", t, reason="ids_changed", **common)
                fs.emit(h, "rebalance_started", t, count=1, **common)
                fs.emit(h, "attempt_started", t, attempt=0, **common)
                for p in mine_old:
                    fs.emit(
                        h,
                        "offsets_committed",
                        t,
                        topic=TOPIC,
                        partition=p,
                        offset_end=committed[p],
                        **common,
                    )
                    fs.emit(
                        h,
                        "ownership_released",
                        t + 1,
                        topic=TOPIC,
                        partition=p,
                        reason="release",
                        **common,
                    )
                for p in mine_new:
                    fs.emit(
                        h,
                        "ownership_claimed",
                        t + 2,
                        topic=TOPIC,
                        partition=p,
                        thread_id=f"{member}-0",
                        attempt=0,
                        **common,
                    )
                fs.emit(
                    h,
                    "attempt_finished",
                    t + 2,
                    attempt=0,
                    reason="ok",
                    zk_reads=20,
                    zk_writes=5,
                    **common,
                )
                fs.emit(
                    h,
                    "rebalance_completed",
                    t + 3,
                    attempt=0,
                    count=len(mine_new),
                    partitions=_pstr(mine_new),
                    **common,
                )
            else:
                if mine_old:
                    for p in mine_old:
                        fs.emit(
                            h,
                            "offsets_committed",
                            t,
                            topic=TOPIC,
                            partition=p,
                            offset_end=committed[p],
                            **common,
                        )
                    fs.emit(
                        h,
                        "partitions_revoked",
                        t + 1,
                        partitions=_pstr(mine_old),
                        generation=epoch,
                        count=len(mine_old),
                        **common,
                    )
                fs.emit(
                    h,
                    "partitions_assigned",
                    t + 2,
                    partitions=_pstr(mine_new),
                    generation=epoch + 1,
                    count=len(mine_new),
                    **common,
                )
        t += 5.0
        # the data path: produce, then the owner processes
        for _ in range(EPOCH_BATCHES):
            t += 1.0
            for p in range(PARTITIONS):
                o = next_off[p]
                fs.emit(
                    "producer-0",
                    "produced",
                    t,
                    topic=TOPIC,
                    partition=p,
                    offset_start=o,
                    offset_end=o + BATCH,
                    broker=p % 3,
                )
                m = owners[p]
                fs.emit(
                    _host(m),
                    "processed",
                    t + 0.5,
                    group=GROUP,
                    member=f"c-{m}",
                    topic=TOPIC,
                    partition=p,
                    offset_start=o,
                    offset_end=o + BATCH,
                    thread_id=f"c-{m}-0",
                    duration_ms=0.5,
                )
                next_off[p] = o + BATCH
                committed[p] = o + BATCH
            if fs.total >= n_events:
                break
        prev = owners
        epoch += 1
    fs.emit("orchestrator", "run_finished", t + 10)
    for b in range(3):
        fs.emit(f"broker-{b}", "broker_stopped", t + 10, broker=b)
    fs.close()
    return fs.total


def generate(out: Path, n_events: int, workers: int = 2) -> int:
    """A run directory of about ``n_events`` events over the four protocols."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    per = n_events // len(PROTOCOLS)
    with ProcessPoolExecutor(workers) as pool:
        counts = list(pool.map(generate_protocol, [str(out)] * 4, PROTOCOLS, [per] * 4))
    manifest = {
        "run_id": RUN_ID,
        "status": "completed",
        "scenario": {"name": "bench", "group": {"consumers": MEMBERS, "id": GROUP}},
        "protocols": {p: {"status": "completed", "events_dir": f"{p}/events"} for p in PROTOCOLS},
        "event_log_layout": "<protocol>/events/*.msgpack",
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return sum(counts)


def _du(path: Path, pattern: str) -> int:
    return sum(f.stat().st_size for f in path.rglob(pattern) if f.is_file())


def where_time_goes(run: Path) -> dict[str, Any]:
    """One 64 MiB segment decoded on one core outside Spark, step by step."""
    from analysis.datasource import (
        DEFAULT_SEGMENT_BYTES,
        _segment_records,
        plan_file,
        read_segment,
    )
    from analysis.schema import column_names

    biggest = max(run.rglob("*.msgpack"), key=lambda f: f.stat().st_size)
    plan = plan_file(biggest, biggest.name, DEFAULT_SEGMENT_BYTES)
    seg = plan.segments[0]
    names = column_names()[:-1]

    def unpack_only() -> None:  # blocks read, checksums verified, records decoded
        with open(seg.path, "rb") as f:
            f.seek(seg.start)
            for _ in _segment_records(seg, f):
                pass

    def to_lists() -> None:
        with open(seg.path, "rb") as f:
            f.seek(seg.start)
            records = _segment_records(seg, f)
            left = seg.records
            while left:
                n = min(16384, left)
                cols: dict[str, list[Any]] = {k: [None] * n for k in names}
                for i in range(n):
                    for k, v in next(records)[1].items():
                        cols[k][i] = v
                left -= n

    def full() -> None:
        for _ in read_segment(seg):
            pass

    def native() -> None:  # the compiled decode (analysis.native_decode)
        for _ in read_segment(seg, native=True):
            pass

    out: dict[str, Any] = {
        "file": biggest.name,
        "segment_records": seg.records,
        "segment_bytes": seg.end - seg.start,
    }
    steps = (
        ("unpack", unpack_only),
        ("unpack+columns", to_lists),
        ("read_segment", full),
        ("read_segment_native", native),
    )
    for name, fn in steps:
        fn()  # warm the page cache and the interpreter
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        out[f"{name}_s"] = round(dt, 3)
        out[f"{name}_cpu_s"] = round(cpu, 3)
        out[f"{name}_rows_per_cpu_s"] = round(seg.records / cpu)
    return out


def _spark(driver_memory: str) -> Any:
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    (
        SparkSession.builder.master("local[2]")
        .config("spark.driver.memory", driver_memory)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.parquet.compression.codec", "snappy")
        .getOrCreate()
    )
    from analysis.spark import get_spark

    return get_spark("local[2]", app_name="bench-analysis")


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    r = fn()
    return r, time.perf_counter() - t0


def run_compare(spark: Any, run: Path, out: Path, cache: bool = True) -> dict[str, Any]:
    """compare() on the run, per-step times from its progress lines; or what exists."""
    try:
        compare_mod = importlib.import_module("analysis.compare")
        importlib.import_module("analysis.metrics")
        importlib.import_module("analysis.checkers")
        importlib.import_module("analysis.report")
    except ImportError as exc:
        return _run_parts(spark, run, f"analysis.compare unavailable ({exc})")
    steps: list[tuple[float, str]] = []
    t0 = time.perf_counter()

    def progress(line: str) -> None:
        steps.append((time.perf_counter() - t0, line))
        print(f"  [{time.perf_counter() - t0:8.1f}s] {line}", flush=True)

    try:
        compare_mod.compare([run], out_dir=out, progress=progress, spark=spark, cache=cache)
    except Exception as exc:  # report what broke; the scan numbers still stand
        return {
            "what": "analysis.compare.compare",
            "error": f"{type(exc).__name__}: {exc}"[:500],
            "steps": _steps(steps, time.perf_counter() - t0),
        }
    total = time.perf_counter() - t0
    return {
        "what": "analysis.compare.compare",
        "total_s": round(total, 2),
        "steps": _steps(steps, total),
    }


_HEARTBEAT = re.compile(r" \.\.\. \(\d+ s\b")


def _steps(steps: list[tuple[float, str]], total: float) -> list[dict[str, Any]]:
    """Progress lines as steps with durations; compare's heartbeat lines are not steps."""
    steps = [(t, line) for t, line in steps if not _HEARTBEAT.search(line)]
    out = []
    for i, (t, line) in enumerate(steps):
        end = steps[i + 1][0] if i + 1 < len(steps) else total
        out.append({"step": line[:160], "start_s": round(t, 2), "duration_s": round(end - t, 2)})
    return out


def _run_parts(spark: Any, run: Path, why: str) -> dict[str, Any]:
    from analysis.datasource import load_events

    res: dict[str, Any] = {"what": "parts", "why": why}
    events = load_events(spark, run).events.cache()
    _, res["load_and_cache_s"] = _timed(events.count)
    try:
        checkers = importlib.import_module("analysis.checkers")
        _, res["run_checkers_s"] = _timed(lambda: checkers.run_checkers(events).count())
    except ImportError as exc:
        res["run_checkers"] = f"unavailable ({exc})"
    try:
        metrics = importlib.import_module("analysis.metrics")
        _, res["compute_metrics_s"] = _timed(lambda: metrics.compute_metrics(events))
    except ImportError as exc:
        res["compute_metrics"] = f"unavailable ({exc})"
    events.unpersist()
    return res


COMPARE_MODES = ("nocache", "cold", "warm")
"""``nocache``: through the data source; ``cold``: the columnar cache written
first (its decoding inside the total); ``warm``: the cache already there."""


def bench_size(
    spark: Any,
    millions: float,
    root: Path,
    do_compare: bool,
    compare_only: bool = False,
    compare_modes: tuple[str, ...] = COMPARE_MODES,
) -> dict[str, Any]:
    from analysis.datasource import load_events

    n = int(millions * 1_000_000)
    run = root / f"run-{millions:g}M"
    print(f"== {millions:g} M events: generating {run}", flush=True)
    written, gen_s = _timed(lambda: generate(run, n))
    r: dict[str, Any] = {
        "millions": millions,
        "events": written,
        "generate_s": round(gen_s, 1),
        "msgpack_bytes": _du(run, "*.msgpack"),
    }
    r["files"] = len(list(run.rglob("*.msgpack")))
    if compare_only:
        r["loadavg_before_compare"] = [round(x, 1) for x in os.getloadavg()]
        for mode in compare_modes:
            r[f"compare_{mode}"] = compare_mode(spark, run, root, millions, written, mode)
        r["compare"] = r[f"compare_{compare_modes[-1]}"]
        return r
    r["loadavg_before_scan"] = [round(x, 1) for x in os.getloadavg()]
    print(f"  {written:,} events, {r['msgpack_bytes'] / 1e9:.2f} GB in {gen_s:.1f}s", flush=True)

    loaded, load_s = _timed(lambda: load_events(spark, run))
    r.update(
        plan_s=round(loaded.plan_s, 2),
        load_events_s=round(load_s, 2),
        segments=loaded.segments,
        planned_records=loaded.records,
    )
    _, scan_s = _timed(lambda: loaded.events.write.format("noop").mode("overwrite").save())
    r["ds_scan_s"] = round(scan_s, 2)
    r["ds_load_scan_s"] = round(load_s + scan_s, 2)
    r["ds_rows_per_s"] = round(written / (load_s + scan_s))
    print(
        f"  data source: plan {loaded.plan_s:.1f}s, scan {scan_s:.1f}s, "
        f"{r['ds_rows_per_s']:,} rows/s",
        flush=True,
    )
    count, _ = _timed(lambda: loaded.events.count())
    r["ds_count_ok"] = count == written

    pq = root / f"parquet-{millions:g}M"
    shutil.rmtree(pq, ignore_errors=True)
    _, write_s = _timed(lambda: loaded.events.write.parquet(str(pq)))
    r["parquet_write_s"] = round(write_s, 2)
    r["parquet_bytes"] = _du(pq, "*.parquet")
    _, pq_s = _timed(
        lambda: spark.read.parquet(str(pq)).write.format("noop").mode("overwrite").save()
    )
    r["parquet_scan_s"] = round(pq_s, 2)
    r["loadavg_after_scans"] = [round(x, 1) for x in os.getloadavg()]
    r["parquet_rows_per_s"] = round(written / pq_s)
    r["ratio_ds_over_parquet"] = round((load_s + scan_s) / pq_s, 2)
    print(
        f"  parquet: scan {pq_s:.1f}s, {r['parquet_rows_per_s']:,} rows/s; "
        f"ratio {r['ratio_ds_over_parquet']}x",
        flush=True,
    )
    shutil.rmtree(pq, ignore_errors=True)

    r.update(columnar_reads(spark, run, written, pq_s))

    gc.collect()
    r["one_core_segment"] = where_time_goes(run)
    print(f"  one core, one segment: {r['one_core_segment']}", flush=True)
    if do_compare:
        for mode in compare_modes:
            r[f"compare_{mode}"] = compare_mode(spark, run, root, millions, written, mode)
        if compare_modes:
            r["compare"] = r[f"compare_{compare_modes[-1]}"]
    return r


def compare_mode(
    spark: Any, run: Path, root: Path, millions: float, written: int, mode: str
) -> dict[str, Any]:
    from analysis.columnar import CACHE_DIRNAME

    if mode == "cold":
        shutil.rmtree(run / CACHE_DIRNAME, ignore_errors=True)
    print(f"  compare ({mode}):", flush=True)
    res = run_compare(spark, run, root / f"report-{millions:g}M", cache=mode != "nocache")
    if "total_s" in res:
        res["rows_per_s"] = round(written / res["total_s"])
    print(f"  compare ({mode}): {json.dumps(res)[:600]}", flush=True)
    return res


def columnar_reads(spark: Any, run: Path, written: int, pq_s: float) -> dict[str, Any]:
    """The columnar cache: written and scanned (first read), then scanned again."""
    from analysis.columnar import CACHE_DIRNAME
    from analysis.datasource import load_events

    shutil.rmtree(run / CACHE_DIRNAME, ignore_errors=True)
    out: dict[str, Any] = {}
    for when in ("first", "again"):
        loaded, load_s = _timed(lambda: load_events(spark, run, columnar=True))
        events = loaded.events
        _, scan_s = _timed(lambda: events.write.format("noop").mode("overwrite").save())  # noqa: B023
        cache = loaded.cache
        assert cache is not None, loaded.cache_note
        out[f"columnar_{when}"] = {
            "plan_s": round(loaded.plan_s, 2),
            "decode_s": cache.decode_s,
            "decoded_files": cache.decoded,
            "workers": cache.workers,
            "load_s": round(load_s, 2),
            "scan_s": round(scan_s, 2),
            "read_s": round(load_s + scan_s, 2),
            "rows_per_s": round(written / (load_s + scan_s)),
            "ratio_over_parquet": round((load_s + scan_s) / pq_s, 2),
        }
        print(f"  columnar ({when}): {out[f'columnar_{when}']}", flush=True)
    out["columnar_bytes"] = _du(run / CACHE_DIRNAME, "*.parquet")
    out["columnar_count_ok"] = load_events(spark, run, columnar=True).events.count() == written
    return out


EXPERIMENT_TOML = """# bench_analysis: small trials (4 protocols x {seeds} seeds of a one-join run)
name = "bench-exp-{trials}"
scenarios = ["{scenario}"]
protocols = ["zookeeper", "classic-eager", "classic-cooperative", "consumer"]
seeds = {seeds}
cpus_per_trial = 1
"""


def experiment_dir(root: Path, trials: int) -> Path:
    """An experiment of ``trials`` small sim trials (``tests/data/experiment_tiny.toml``),
    run once with ``rebalance-emu experiment --engine sim`` and kept for later runs."""
    import subprocess

    exp = root / f"exp-{trials}"
    seeds = max(1, trials // 4)
    if exp.is_dir() and len(list(exp.glob("trials/*/manifest.json"))) == 4 * seeds:
        return exp
    scenario = Path(__file__).resolve().parents[1] / "data" / "experiment_tiny.toml"
    toml = root / f"exp-{trials}.toml"
    toml.write_text(EXPERIMENT_TOML.format(seeds=seeds, trials=trials, scenario=scenario))
    print(f"== experiment: running {4 * seeds} sim trials into {exp}", flush=True)
    cmd = [sys.executable, "-c", "import sys; from emulator.cli import main; sys.exit(main())"]
    args = ["experiment", str(toml), "--engine", "sim", "--parallel", "1", "--no-report"]
    subprocess.run(
        [*cmd, *args, "--out", str(exp)],
        check=True,
        timeout=3600,
    )
    return exp


def bench_experiment(spark: Any, root: Path, trials: int) -> dict[str, Any]:
    """``compare`` of an experiment of small trials, from nothing (no trial's
    ``analysis.json`` and no columnar cache kept)."""
    from analysis.experiment import compare_experiment

    exp = experiment_dir(root, trials)
    for f in exp.glob("trials/*/analysis.json"):
        f.unlink()
    for d in exp.glob("trials/*/columnar-cache"):
        shutil.rmtree(d)
    n_trials = len(list(exp.glob("trials/*/manifest.json")))
    msgpack_bytes = _du(exp / "trials", "*.msgpack")
    steps: list[tuple[float, str]] = []
    t0 = time.perf_counter()

    def progress(line: str) -> None:
        steps.append((time.perf_counter() - t0, line))
        print(f"  [{time.perf_counter() - t0:8.1f}s] {line}", flush=True)

    rep = compare_experiment(exp, root / f"exp-{trials}-report", progress=progress, spark=spark)
    total = time.perf_counter() - t0
    res = {
        "trials": n_trials,
        "analysed": rep.trials,
        "msgpack_bytes": msgpack_bytes,
        "total_s": round(total, 2),
        "steps": _steps(steps, total),
    }
    print(f"  experiment of {n_trials} trials: {total:.1f} s", flush=True)
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--sizes", default="1,10,30", help="millions of events, comma separated")
    ap.add_argument("--dir", default="/tmp/rebalance-bench-analysis", help="scratch directory")
    ap.add_argument("--out", default="tests/bench/results/analysis.json")
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--no-compare", action="store_true")
    ap.add_argument(
        "--compare-max", type=float, default=30.0, help="run compare only up to this many millions"
    )
    ap.add_argument("--keep", action="store_true", help="keep the generated runs")
    ap.add_argument(
        "--compare-only",
        action="store_true",
        help="only compare (no scans); the result replaces the size's compare in --out",
    )
    ap.add_argument(
        "--append", action="store_true", help="add to the results already in --out (by size)"
    )
    ap.add_argument(
        "--compare-modes",
        default=",".join(COMPARE_MODES),
        help="compare through the data source (nocache), with the columnar cache written "
        "first (cold) and with it there (warm); comma separated, in this order",
    )
    ap.add_argument(
        "--experiment",
        type=int,
        default=200,
        metavar="N",
        help="also compare an experiment of N small sim trials (0: not)",
    )
    args = ap.parse_args(argv)
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    spark, start_s = _timed(lambda: _spark(args.driver_memory))
    doc: dict[str, Any] = {
        "benchmark": "analysis",
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": platform.python_version(),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "spark": {
            "master": "local[2]",
            "version": spark.version,
            "driver_memory": args.driver_memory,
            "session_start_s": round(start_s, 1),
        },
        "results": [],
    }
    out = Path(args.out)
    if args.append and out.is_file():
        doc["results"] = json.loads(out.read_text()).get("results", [])
    if args.experiment:
        doc["experiment"] = bench_experiment(spark, root, args.experiment)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, indent=2) + "\n")
    for s in [x for x in args.sizes.split(",") if x]:
        do_compare = not args.no_compare and float(s) <= args.compare_max
        modes = tuple(m for m in args.compare_modes.split(",") if m)
        if bad := [m for m in modes if m not in COMPARE_MODES]:
            ap.error(f"unknown compare mode {bad[0]!r} (one of {', '.join(COMPARE_MODES)})")
        res = bench_size(spark, float(s), root, do_compare, args.compare_only, modes)
        if args.compare_only:  # keep the scan numbers already recorded for this size
            old: dict[str, Any] = next(
                (r for r in doc["results"] if r["millions"] == res["millions"]), {}
            )
            res = {**old, **res}
        doc["results"] = [r for r in doc["results"] if r["millions"] != res["millions"]] + [res]
        doc["results"].sort(key=lambda r: r["millions"])
        doc["elapsed_s"] = round(time.time() - t0, 1)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, indent=2) + "\n")
        if not args.keep:
            shutil.rmtree(root / f"run-{float(s):g}M", ignore_errors=True)
    print(
        f"{'M':>5} {'events':>12} {'ds read s':>9} {'pq scan s':>9} {'ds/pq':>6} "
        f"{'col 1st s':>9} {'1st/pq':>6} {'col again':>9} {'again/pq':>8} "
        f"{'cmp nocache':>11} {'cmp cold':>8} {'cmp warm':>8}"
    )
    for r in doc["results"]:

        def cell(key: str, field: str, r: dict[str, Any] = r) -> str:
            return str(r.get(key, {}).get(field, "-"))

        print(
            f"{r['millions']:>5g} {r['events']:>12,} {r.get('ds_load_scan_s', '-'):>9} "
            f"{r.get('parquet_scan_s', '-'):>9} {r.get('ratio_ds_over_parquet', '-'):>6} "
            f"{cell('columnar_first', 'read_s'):>9} "
            f"{cell('columnar_first', 'ratio_over_parquet'):>6} "
            f"{cell('columnar_again', 'read_s'):>9} "
            f"{cell('columnar_again', 'ratio_over_parquet'):>8} "
            f"{cell('compare_nocache', 'total_s'):>11} {cell('compare_cold', 'total_s'):>8} "
            f"{cell('compare_warm', 'total_s'):>8}"
        )
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
