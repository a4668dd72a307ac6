"""The rebalance-events data source on logs written by the real EventWriter, with real Spark."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgpack
import pytest

from analysis import native_decode
from analysis.datasource import (
    TRUNCATED_KIND,
    EventLogError,
    Segment,
    event_log_error,
    load_events,
    load_runs,
    plan_file,
    read_segment,
)
from analysis.schema import SOURCE_FILE, arrow_schema, column_names, spark_schema
from emulator.eventlog import CorruptEventLog, EventWriter, iter_events
from emulator.events import FIELDS, EventKind
from emulator.logformat import frame

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MANIFEST = {"run_id": "ds-test", "status": "completed", "protocols": {"zookeeper": {}}}


def _writer(path: Path, actor: str, protocol: str) -> EventWriter:
    clock = iter(range(1_000_000))
    return EventWriter(
        path,
        run_id="ds-test",
        node="n0",
        actor=actor,
        protocol=protocol,
        emu_clock=lambda: float(next(clock)),
        validate=True,
        flush_bytes=600,  # many small blocks: segments can be cut between them
    )


def _host_log(path: Path, protocol: str, member: str, batches: int) -> dict[str, int]:
    w = _writer(path, "host-0", protocol)
    w.emit(EventKind.CONSUMER_STARTED, group="g", member=member)
    w.emit(EventKind.OWNERSHIP_CLAIMED, group="g", member=member, topic="t", partition=1)
    for i in range(batches):
        w.emit(
            EventKind.PROCESSED,
            group="g",
            member=member,
            topic="t",
            partition=1,
            offset_start=10 * i,
            offset_end=10 * i + 10,
            duration_ms=2.5,
        )
    w.emit(
        EventKind.OFFSETS_COMMITTED,
        group="g",
        member=member,
        topic="t",
        partition=1,
        offset_end=10 * batches,
    )
    w.emit(EventKind.ATTEMPT_FINISHED, attempt=0, reason="ok", zk_reads=20, zk_writes=5)
    w.close()
    return dict(w.count_by_kind)


def _producer_log(path: Path, protocol: str, n: int) -> dict[str, int]:
    w = _writer(path, "producer-0", protocol)
    for i in range(n):
        w.emit(EventKind.PRODUCED, topic="t", partition=i % 3, offset_start=i, offset_end=i + 1)
    w.close()
    return dict(w.count_by_kind)


def _record(**fields: Any) -> bytes:
    base: dict[str, Any] = {"v": 1, "seq": 99, "kind": "produced", "t_emu_ms": 1.0}
    base.update(fields)
    packed: bytes = msgpack.packb(base, use_bin_type=True)
    return packed


TRUNC_BYTES = 37  # a block header and 17 bytes of its record


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Counter[str]]]:
    """A run with two protocols; the zookeeper producer's log ends in a cut record."""
    root = tmp_path_factory.mktemp("run")
    (root / "manifest.json").write_text(json.dumps(MANIFEST))
    counts: dict[str, Counter[str]] = {"zookeeper": Counter(), "consumer": Counter()}
    counts["zookeeper"].update(
        _host_log(root / "zookeeper/events/host-0.msgpack", "zookeeper", "c-0", 40)
    )
    prod = root / "zookeeper/events/producer-0.msgpack"
    counts["zookeeper"].update(_producer_log(prod, "zookeeper", 250))
    with open(prod, "ab") as f:  # a writer that died mid-block
        block = frame(_record(topic="t", partition=0, offset_start=0, offset_end=1), 1)
        f.write(block[:TRUNC_BYTES])
    counts["consumer"].update(
        _host_log(root / "consumer/events/host-0.msgpack", "consumer", "c-1", 7)
    )
    return root, counts


def _kind_counts(df: Any) -> dict[tuple[str, str], int]:
    return {
        (r["protocol"], r["kind"]): r["count"]
        for r in df.groupBy("protocol", "kind").count().collect()
    }


# --------------------------------------------------------------------------- schema


def test_schemas_follow_the_event_fields() -> None:
    names = [f.name for f in FIELDS] + [SOURCE_FILE]
    assert column_names() == names
    arrow = {"long": "int64", "double": "double", "string": "string", "boolean": "bool"}
    sparkt = {"long": "bigint", "double": "double", "string": "string", "boolean": "boolean"}
    a = arrow_schema()
    s = spark_schema()
    assert a.names == names and s.names == names
    for f in FIELDS:
        assert str(a.field(f.name).type) == arrow[f.type]
        assert s[f.name].dataType.simpleString() == sparkt[f.type]
    assert str(a.field(SOURCE_FILE).type) == "string"


# --------------------------------------------------------------------------- planning, no Spark


def test_plan_cuts_at_record_boundaries_and_finds_the_tail(
    run_dir: tuple[Path, dict[str, Counter[str]]],
) -> None:
    root, _ = run_dir
    prod = root / "zookeeper/events/producer-0.msgpack"
    size = prod.stat().st_size
    whole = plan_file(prod, "p", 0)
    assert whole.records == 250
    assert whole.truncated_bytes == TRUNC_BYTES
    assert whole.truncated_at == size - TRUNC_BYTES
    assert whole.report.closed is False and whole.report.damage == []
    assert len(whole.segments) == 1 and whole.segments[0].tail_at == size - TRUNC_BYTES
    assert whole.segments[0].end < size - TRUNC_BYTES  # the closing block lies between
    cut = plan_file(prod, "p", 1000)
    assert len(cut.segments) > 5
    assert sum(s.records for s in cut.segments) == 250
    assert [s.start for s in cut.segments[1:]] == [s.end for s in cut.segments[:-1]]
    assert all(s.framed for s in cut.segments)
    assert [s.truncated for s in cut.segments] == [0] * (len(cut.segments) - 1) + [TRUNC_BYTES]
    # every segment decodes on its own to exactly its records, in order
    seqs: list[int] = []
    for s in cut.segments:
        batches = list(read_segment(s, batch_rows=7))
        assert all(b.schema.equals(arrow_schema()) for b in batches)
        assert [b.num_rows for b in batches[:-1]] == [7] * (len(batches) - 1)
        seqs.extend(v for b in batches for v in b.column("seq").to_pylist())
    assert seqs == list(range(250))


# --------------------------------------------------------------------------- Spark


@pytest.mark.spark
def test_load_events_exact_counts(
    spark: SparkSession, run_dir: tuple[Path, dict[str, Counter[str]]]
) -> None:
    root, counts = run_dir
    le = load_events(spark, root)
    assert le.files == 3
    assert le.manifest == MANIFEST
    assert le.truncated == [("zookeeper/events/producer-0.msgpack", TRUNC_BYTES)]
    expected = {(p, k): n for p, c in counts.items() for k, n in c.items()}
    assert sum(expected.values()) == 44 + 250 + 11
    assert le.records == 305
    assert le.events.schema == spark_schema()
    assert le.events.count() == 305
    assert _kind_counts(le.events) == expected
    files = {r[SOURCE_FILE]: r["count"] for r in le.events.groupBy(SOURCE_FILE).count().collect()}
    assert files == {
        "zookeeper/events/host-0.msgpack": 44,
        "zookeeper/events/producer-0.msgpack": 250,
        "consumer/events/host-0.msgpack": 11,
    }


@pytest.mark.spark
@pytest.mark.parametrize("native", ["off", "on"])
def test_rows_equal_the_reference_reader_with_small_segments(
    spark: SparkSession,
    run_dir: tuple[Path, dict[str, Counter[str]]],
    monkeypatch: pytest.MonkeyPatch,
    native: str,
) -> None:
    """``on``: Spark's Python workers decode with the compiled kernels."""
    monkeypatch.setenv(native_decode.ENV, native)
    root, _ = run_dir
    le = load_events(spark, root, segment_bytes=2000, batch_rows=5)
    assert le.segments > 10
    assert le.events.rdd.getNumPartitions() == le.segments
    got = {(r[SOURCE_FILE], r["seq"]): r.asDict() for r in le.events.collect()}
    want: dict[tuple[str, int], dict[str, Any]] = {}
    for path in sorted(root.rglob("*.msgpack")):
        rel = str(path.relative_to(root))
        for ev in iter_events(path):
            row: dict[str, Any] = {name: ev.get(name) for name in column_names()}
            row[SOURCE_FILE] = rel
            want[(rel, int(ev["seq"]))] = row  # type: ignore[call-overload]
    assert len(got) == 305
    assert got == want


@pytest.mark.spark
def test_the_columnar_cache_reads_the_same_rows(
    spark: SparkSession, run_dir: tuple[Path, dict[str, Counter[str]]], tmp_path: Path
) -> None:
    root = tmp_path / "run"
    shutil.copytree(run_dir[0], root)
    plain = load_events(spark, root)
    lines: list[str] = []
    cached = load_events(spark, root, columnar=True, progress=lines.append)
    assert cached.cache is not None and (cached.cache.decoded, cached.cache.reused) == (3, 0)
    assert lines == ["columnar cache: decoding 3 of 3 log files (0 MB) with 1 process"]
    assert (cached.records, cached.truncated) == (plain.records, plain.truncated)
    assert cached.events.schema == spark_schema()
    assert cached.events.count() == 305
    assert plain.events.exceptAll(cached.events).count() == 0
    assert cached.events.exceptAll(plain.events).count() == 0
    again = load_events(spark, root, columnar=True)
    assert again.cache is not None and (again.cache.decoded, again.cache.reused) == (0, 3)
    one = load_events(spark, root, protocols=["consumer"], columnar=True)
    assert one.events.count() == 11 and one.cache is not None and one.cache.files == 1


@pytest.mark.spark
@pytest.mark.parametrize("columnar", [False, True])
def test_many_runs_read_as_one_table(
    spark: SparkSession,
    run_dir: tuple[Path, dict[str, Counter[str]]],
    tmp_path: Path,
    columnar: bool,
) -> None:
    dirs = [tmp_path / "r1", tmp_path / "r2"]
    for d in dirs:
        shutil.copytree(run_dir[0], d)
    (dirs[1] / "consumer").rename(tmp_path / "gone")  # r2: the zookeeper logs only
    table, runs = load_runs(spark, dirs, columnar=columnar)
    assert list(runs) == ["r1", "r2"]
    assert (runs["r1"].records, runs["r2"].records) == (305, 294)
    assert all((r.cache is not None) == columnar for r in runs.values())
    counts = {
        (r["run"], r["protocol"]): r["count"]
        for r in table.groupBy("run", "protocol").count().collect()
    }
    assert counts == {("r1", "zookeeper"): 294, ("r1", "consumer"): 11, ("r2", "zookeeper"): 294}
    one = load_events(spark, dirs[0]).events
    assert runs["r1"].events.schema == spark_schema()
    assert runs["r1"].events.exceptAll(one).count() == 0 == one.exceptAll(runs["r1"].events).count()
    with pytest.raises(EventLogError, match="two run directories are named 'r1'"):
        load_runs(spark, [dirs[0], tmp_path / "x" / "r1"])


@pytest.mark.spark
def test_protocol_filter(
    spark: SparkSession, run_dir: tuple[Path, dict[str, Counter[str]]]
) -> None:
    root, counts = run_dir
    le = load_events(spark, root, protocols=["consumer"])
    assert le.files == 1 and le.truncated == []
    assert _kind_counts(le.events) == {("consumer", k): n for k, n in counts["consumer"].items()}


@pytest.mark.spark
def test_plain_read_marks_the_truncated_tail(
    spark: SparkSession, run_dir: tuple[Path, dict[str, Counter[str]]]
) -> None:
    root, _ = run_dir
    df = spark.read.format("rebalance-events").load(str(root))
    assert df.count() == 306
    marks = df.filter(df.kind == TRUNCATED_KIND).collect()
    size = (root / "zookeeper/events/producer-0.msgpack").stat().st_size
    assert len(marks) == 1
    assert marks[0][SOURCE_FILE] == "zookeeper/events/producer-0.msgpack"
    assert marks[0]["count"] == TRUNC_BYTES
    assert marks[0]["offset_start"] == size - TRUNC_BYTES
    skipped = spark.read.format("rebalance-events").option("truncated", "skip").load(str(root))
    assert skipped.count() == 305
    strict = spark.read.format("rebalance-events").option("truncated", "error").load(str(root))
    with pytest.raises(Exception, match="truncated last record") as info:
        strict.count()
    err = event_log_error(info.value)
    assert err is not None and err.offset == size - TRUNC_BYTES
    assert err.path.endswith("zookeeper/events/producer-0.msgpack")


def _corrupt_run(root: Path, bad: bytes) -> tuple[Path, int]:
    """A run whose host log has ``bad`` spliced in after 5 good records."""
    (root / "manifest.json").write_text(json.dumps(MANIFEST))
    path = root / "zookeeper/events/host-0.msgpack"
    _host_log(path, "zookeeper", "c-0", 3)  # 7 records
    records = list(iter_events(path))
    good = b"".join(msgpack.packb(r, use_bin_type=True) for r in records[:5])
    rest = b"".join(msgpack.packb(r, use_bin_type=True) for r in records[5:])
    path.write_bytes(good + bad + rest)
    _producer_log(root / "zookeeper/events/producer-0.msgpack", "zookeeper", 4)
    return path, len(good)


@pytest.mark.spark
@pytest.mark.parametrize(
    ("bad", "why"),
    [(b"\xc1\x00\x00", "does not start an event map"), (msgpack.packb(7), "does not start")],
)
def test_schema_1_damage_is_listed_with_path_and_offset(
    spark: SparkSession, tmp_path: Path, bad: bytes, why: str
) -> None:
    path, offset = _corrupt_run(tmp_path, bad)
    with pytest.raises(CorruptEventLog) as ref:
        list(iter_events(path))
    assert ref.value.offset == offset  # the reference reader agrees on the offset
    le = load_events(spark, tmp_path)  # schema 1 cannot resume: the rest of the file is damage
    (d,) = le.damage
    assert (d.path, d.offset) == (str(path), offset) and why in d.what
    assert d.length == path.stat().st_size - offset
    assert le.events.count() == 5 + 4
    with pytest.raises(Exception, match="corrupt event log"):  # a plain read does not skip it
        spark.read.format("rebalance-events").load(str(tmp_path)).count()


@pytest.mark.spark
def test_a_flipped_bit_loses_one_block_and_is_named(spark: SparkSession, tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text(json.dumps(MANIFEST))
    path = tmp_path / "zookeeper/events/producer-0.msgpack"
    _producer_log(path, "zookeeper", 250)
    plan = plan_file(path, "p", 0)
    blocks = plan.report.blocks
    assert blocks > 3
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))
    le = load_events(spark, tmp_path)
    (d,) = le.damage
    assert d.path == str(path) and d.offset < len(data) // 2 < d.offset + d.length
    assert d.records is not None and 0 < d.records < 250
    assert le.records == 250 - d.records == le.events.count()
    assert len(le.plans[0].segments) == 2  # read around the damaged block


@pytest.mark.spark
@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (_record(bogus=1), "unknown event field 'bogus'"),
        (_record(partition="x"), "field 'partition' is not int64"),
        (_record(offset_end=2**64 - 1), "field 'offset_end' is not int64"),
    ],
)
def test_corrupt_record_fails_the_job_with_path_and_offset(
    spark: SparkSession, tmp_path: Path, bad: bytes, why: str
) -> None:
    path, offset = _corrupt_run(tmp_path, bad)
    le = load_events(spark, tmp_path)  # framing is fine: planning passes
    assert le.records == 8 + 4
    with pytest.raises(Exception, match="corrupt event log") as info:
        le.events.count()
    err = event_log_error(info.value)
    assert err is not None
    assert (err.path, err.offset) == (str(path), offset)
    assert why in str(err)


@pytest.mark.spark
def test_missing_and_empty_run_dirs(spark: SparkSession, tmp_path: Path) -> None:
    with pytest.raises(EventLogError, match="no such run directory"):
        load_events(spark, tmp_path / "nope")
    with pytest.raises(EventLogError, match=r"no event logs \(\*\.msgpack\)"):
        load_events(spark, tmp_path)
    (tmp_path / "zookeeper/events").mkdir(parents=True)
    with pytest.raises(EventLogError, match="no event logs for protocol 'consumer'"):
        load_events(spark, tmp_path, protocols=["consumer"])


def test_empty_file_and_tail_only_file(tmp_path: Path) -> None:
    empty = tmp_path / "a.msgpack"
    empty.write_bytes(b"")
    p = plan_file(empty, "a.msgpack")
    assert (p.records, p.segments, p.truncated_bytes) == (0, [], 0)
    tail = tmp_path / "b.msgpack"
    tail.write_bytes(_record()[:5])
    q = plan_file(tail, "b.msgpack")
    assert q.records == 0
    assert q.segments == [Segment(str(tail), "b.msgpack", 0, 0, 0, truncated=5)]
    assert list(read_segment(q.segments[0])) == []
