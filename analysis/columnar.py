"""The columnar cache: a run's decoded events as Parquet, scanned natively by Spark.

The msgpack logs stay the record; this is a copy that is faster to read. The
first load of a local run decodes each log file into one Parquet file under
``<run>/columnar-cache/`` (laid out like the logs, ``<protocol>/events/<log>.parquet``,
so each protocol is a directory of its own) and records in
``columnar-cache/cache.json`` what each one was decoded from: the log's size,
the planned records and its CRC32C (the whole-file checksum the planning walk
computes anyway, reading every byte; see :func:`analysis.datasource.plan_file`).
Every later load plans the logs again, keeps each Parquet file whose log is
unchanged and whose footer holds the planned row count, and decodes the
others again; a log that changed, grew or was damaged since is therefore
never read from a stale copy, and a damaged Parquet file is rebuilt.

Decoding is :func:`analysis.datasource.read_segment` on exactly the planned
segments, so the rows are the ones :func:`analysis.datasource.load_events`
reads: truncated tails and damaged regions are skipped (and reported by the
plan) the same way. Within a file the data events (produced, processed) come
first and the others after them, in row groups of their own, so that Spark
skips the data row groups, by their statistics, in a scan for control kinds.
It runs outside Spark, in processes of its own (one per
core, ``python -m analysis.columnar``), and writes with pyarrow; Spark then
reads Parquet with its own scanner instead of moving every row from a Python
worker to the JVM.

A run on remote storage, or whose directory cannot be written, is read
through the data source as before (:func:`cache_dir_for` says why).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from analysis import native_decode
from analysis.datasource import FilePlan, Segment, read_segment
from analysis.schema import column_types
from emulator.eventlog import CorruptEventLog
from emulator.events import EventKind

CACHE_DIRNAME: Final = "columnar-cache"
"""The cache's directory inside a run directory."""

CACHE_MANIFEST: Final = "cache.json"
"""The cache's own manifest: what each Parquet file was decoded from."""

CACHE_FORMAT: Final = 2
"""Bumped when decoding changes what a file holds: every older cache is rebuilt
(2: the control events in row groups of their own)."""

DATA_KINDS: Final = (EventKind.PRODUCED.value, EventKind.PROCESSED.value)
"""The kinds of nearly every event of a large run (the data plane)."""

ROW_GROUP_ROWS: Final = 131_072
"""Rows per Parquet row group: Spark splits a file's scan at row groups."""

POOL_MIN_BYTES: Final = 16 * 1024 * 1024
"""Below this many bytes of logs to decode, decoding stays in this process
(starting processes costs more than it saves)."""


@dataclass(frozen=True)
class CacheEntry:
    """One cached log: where its Parquet file is and what it was decoded from."""

    rel: str
    parquet: str
    size: int
    checksum: str
    records: int


@dataclass
class CacheReport:
    """What a load did with the cache.

    Attributes:
        directory: the cache directory.
        files: log files in the run.
        decoded: log files decoded now (new, changed, or their Parquet file
            missing or damaged).
        reused: log files read from the cache as they were.
        decoded_records: events decoded now.
        decode_s: seconds spent decoding and writing Parquet.
        workers: processes that decoded (1: this one).
    """

    directory: str
    files: int
    decoded: int
    reused: int
    decoded_records: int
    decode_s: float
    workers: int

    def describe(self) -> str:
        """One line for progress output and reports."""
        if not self.decoded:
            return f"columnar cache {self.directory}: all {self.files} files unchanged, reused"
        return (
            f"columnar cache {self.directory}: {self.decoded} of {self.files} files "
            f"({self.decoded_records:,} events) decoded in {self.decode_s:.1f} s "
            f"with {self.workers} process{'es' if self.workers > 1 else ''}, "
            f"{self.reused} reused"
        )


def _fingerprint() -> dict[str, Any]:
    """What a cache must have been written with to be read: format and columns."""
    return {"format": CACHE_FORMAT, "columns": [[n, t] for n, t in column_types().items()]}


def cache_dir_for(run_root: Path) -> tuple[Path | None, str]:
    """The cache directory of a local run directory, or ``None`` and why not."""
    if not run_root.is_dir():
        return None, f"{run_root} is not a directory"
    cache = run_root / CACHE_DIRNAME
    probe = cache if cache.is_dir() else run_root
    if not os.access(probe, os.W_OK | os.X_OK):
        return None, f"{probe} is not writable"
    return cache, ""


def _parquet_name(rel: str) -> str:
    stem = rel[: -len(".msgpack")] if rel.endswith(".msgpack") else rel
    return f"{stem}.parquet"


def _read_manifest(cache: Path) -> dict[str, CacheEntry]:
    """The cache's entries, or none when its manifest is missing, unreadable or
    written by another format or schema."""
    try:
        doc = json.loads((cache / CACHE_MANIFEST).read_text())
        if doc.get("fingerprint") != _fingerprint():
            return {}
        return {e["rel"]: CacheEntry(**e) for e in doc["files"]}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def _write_manifest(cache: Path, entries: Sequence[CacheEntry]) -> None:
    doc = {
        "fingerprint": _fingerprint(),
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "files": [asdict(e) for e in sorted(entries, key=lambda e: e.rel)],
    }
    tmp = cache / f".{CACHE_MANIFEST}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(doc, indent=1))
    os.replace(tmp, cache / CACHE_MANIFEST)


def _still_valid(cache: Path, entry: CacheEntry | None, plan: FilePlan) -> bool:
    """The entry was decoded from this very log, and its Parquet file is whole."""
    if entry is None or (entry.size, entry.checksum, entry.records) != (
        plan.size,
        plan.report.checksum,
        plan.records,
    ):
        return False
    try:
        return int(pq.read_metadata(cache / entry.parquet).num_rows) == plan.records
    except (OSError, pa.ArrowException):
        return False


def decode_to_parquet(segments: Sequence[Segment], dest: str, *, native: bool = False) -> int:
    """Decode a log's planned segments into one Parquet file at ``dest``; the rows written.

    The file appears whole or not at all (written beside it, then renamed).
    ``native``: the compiled decode (:mod:`analysis.native_decode`) first.

    Raises:
        CorruptEventLog: the log no longer matches its plan, or holds a bad record.
    """
    from analysis.schema import arrow_schema

    out = Path(dest)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    rows = 0
    data_kinds = pa.array(DATA_KINDS, pa.string())
    try:
        with pq.ParquetWriter(tmp, arrow_schema(), compression="snappy") as writer:
            # The data events in row groups as they come, the others (a few per
            # rebalance) gathered into row groups of their own at the end: a scan
            # for control kinds then skips every data row group by its statistics.
            control: list[pa.RecordBatch] = []
            for seg in segments:
                for batch in read_segment(seg, batch_rows=ROW_GROUP_ROWS, native=native):
                    rows += batch.num_rows
                    is_data = pc.fill_null(
                        pc.is_in(batch.column("kind"), value_set=data_kinds), False
                    )
                    data = batch.filter(is_data)
                    if data.num_rows:
                        writer.write_batch(data, row_group_size=ROW_GROUP_ROWS)
                    rest = batch.filter(pc.invert(is_data))
                    if rest.num_rows:
                        control.append(rest)
            if control:
                writer.write_table(
                    pa.Table.from_batches(control, schema=arrow_schema()),
                    row_group_size=ROW_GROUP_ROWS,
                )
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return rows


WORKER_TIMEOUT_S: Final = 3600.0
"""The longest a decoding process may take (a bound, never reached by a sound run)."""


def _decode_in_workers(
    jobs: Sequence[tuple[Sequence[Segment], str]], n_workers: int, cache: Path, native: bool
) -> list[int]:
    """:func:`decode_to_parquet` of every job, spread over ``n_workers`` processes
    (``python -m analysis.columnar``); the rows of each job, in order.

    Each process is started with its share of the jobs, the largest first to
    the least loaded; it imports only this module, never the caller's main
    module (a ``multiprocessing`` spawn would run an unguarded script again),
    and it holds no copy of the caller's threads (a fork would: Spark's gateway).
    All of them are ended if this returns early.

    Raises:
        CorruptEventLog: what a process's decoding raised.
        OSError: a process that failed otherwise (its last output line).
    """
    shares: list[list[int]] = [[] for _ in range(n_workers)]
    load = [0] * n_workers
    for i, (segments, _dest) in enumerate(jobs):  # jobs come largest first
        w = load.index(min(load))
        shares[w].append(i)
        load[w] += sum(s.end - s.start for s in segments) or 1
    root = str(Path(__file__).resolve().parents[1])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
    }
    procs: list[tuple[list[int], subprocess.Popen[str]]] = []
    with tempfile.TemporaryDirectory(prefix=".decode-", dir=cache) as tmp:
        try:
            for w, share in enumerate(shares):
                if not share:
                    continue
                spec = Path(tmp) / f"jobs-{w}.json"
                spec.write_text(
                    json.dumps(
                        [
                            {
                                "segments": [asdict(s) for s in jobs[i][0]],
                                "dest": jobs[i][1],
                                "native": native,
                            }
                            for i in share
                        ]
                    )
                )
                proc = subprocess.Popen(
                    [sys.executable, "-m", "analysis.columnar", str(spec)],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    env=env,
                )
                procs.append((share, proc))
            rows = [0] * len(jobs)
            deadline = time.monotonic() + WORKER_TIMEOUT_S
            for share, proc in procs:
                out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
                try:
                    result = json.loads(out.strip().splitlines()[-1])
                except (ValueError, IndexError):
                    last = (err.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
                    raise OSError(f"a decoding process failed: {last}") from None
                if "error" in result:
                    e = result["error"]
                    raise CorruptEventLog(e["path"], e["offset"], e["what"])
                for i, n in zip(share, result["rows"], strict=True):
                    rows[i] = int(n)
            return rows
        finally:
            for _share, proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(timeout=10)


def _worker_main(argv: Sequence[str]) -> int:
    """``python -m analysis.columnar JOBS.json``: decode the jobs, print one JSON
    line: ``{"rows": [...]}`` or ``{"error": {"path", "offset", "what"}}``."""
    (spec,) = argv
    rows: list[int] = []
    try:
        for job in json.loads(Path(spec).read_text()):
            segments = [Segment(**s) for s in job["segments"]]
            rows.append(decode_to_parquet(segments, job["dest"], native=bool(job["native"])))
    except CorruptEventLog as exc:
        print(json.dumps({"error": {"path": exc.path, "offset": exc.offset, "what": exc.why}}))
        return 0
    print(json.dumps({"rows": rows}))
    return 0


def refresh(
    cache: Path,
    root: Path,
    plans: Sequence[FilePlan],
    say: Callable[[str], None] | None = None,
    workers: int | None = None,
) -> tuple[list[Path], CacheReport]:
    """Bring the cache up to date with the planned logs (``rel`` relative to
    ``root``); the Parquet files to read (one per log, in plan order) and what
    was done. Entries of logs not planned now (another protocol) are kept;
    those of logs gone from ``root`` are dropped.

    Raises:
        CorruptEventLog: a log changed between its planning and its decoding,
            or holds a bad record (nothing of it is cached).
        OSError: the cache cannot be written.
    """
    t0 = time.perf_counter()
    cache.mkdir(parents=True, exist_ok=True)
    old = _read_manifest(cache)
    entries: dict[str, CacheEntry] = {}
    stale: list[FilePlan] = []
    for plan in plans:
        entry = old.get(plan.rel)
        if _still_valid(cache, entry, plan):
            assert entry is not None
            entries[plan.rel] = entry
        else:
            stale.append(plan)
    todo_bytes = sum(p.size for p in stale)
    n_workers = 1
    if stale:
        cpus = os.cpu_count() or 1
        n_workers = min(workers or cpus, len(stale)) if todo_bytes >= POOL_MIN_BYTES else 1
        if say is not None:
            say(
                f"columnar cache: decoding {len(stale)} of {len(plans)} log files "
                f"({todo_bytes / 1e6:,.0f} MB) with {n_workers} process"
                f"{'es' if n_workers > 1 else ''}"
            )
        jobs = [
            (plan, str(cache / _parquet_name(plan.rel)))
            for plan in sorted(stale, key=lambda p: -p.size)  # the longest first
        ]
        native = native_decode.wanted(sum(p.size for p in stale))
        if n_workers > 1:
            rows = _decode_in_workers([(p.segments, d) for p, d in jobs], n_workers, cache, native)
        else:
            rows = [decode_to_parquet(p.segments, d, native=native) for p, d in jobs]
        for (plan, dest), n in zip(jobs, rows, strict=True):
            if n != plan.records:
                raise CorruptEventLog(
                    plan.path, 0, f"decoded {n} events, {plan.records} when it was planned"
                )
            entries[plan.rel] = CacheEntry(
                rel=plan.rel,
                parquet=str(Path(dest).relative_to(cache)),
                size=plan.size,
                checksum=plan.report.checksum,
                records=plan.records,
            )
    gone = False
    for rel, entry in old.items():
        if rel in entries:
            continue
        if (root / rel).is_file():  # not planned this time: kept as it was
            entries[rel] = entry
        else:  # the log is gone from the run
            (cache / entry.parquet).unlink(missing_ok=True)
            gone = True
    if stale or gone:
        _write_manifest(cache, list(entries.values()))
    report = CacheReport(
        directory=str(cache),
        files=len(plans),
        decoded=len(stale),
        reused=len(plans) - len(stale),
        decoded_records=sum(p.records for p in stale),
        decode_s=round(time.perf_counter() - t0, 2),
        workers=n_workers,
    )
    return [cache / entries[p.rel].parquet for p in plans], report


if __name__ == "__main__":
    sys.exit(_worker_main(sys.argv[1:]))
