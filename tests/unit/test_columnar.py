"""The columnar read path without Spark: msgspec's block decoding against the
record-by-record reader, and the Parquet cache's reuse and invalidation."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgpack
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analysis import columnar, native_decode
from analysis.columnar import CACHE_DIRNAME, CACHE_MANIFEST, cache_dir_for, refresh
from analysis.datasource import FilePlan, Segment, find_logs, plan_files, read_segment
from analysis.schema import SOURCE_FILE, column_names
from emulator.eventlog import CorruptEventLog, EventWriter
from emulator.events import FIELDS, EventKind
from emulator.logformat import frame

_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "long": st.integers(-(2**63), 2**63 - 1),
    "double": st.floats(allow_nan=False) | st.integers(-(2**53), 2**53),
    "string": st.text(max_size=8),
    "boolean": st.booleans(),
}
_EVENT: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {"kind": st.text(min_size=1, max_size=8)},
    optional={f.name: st.none() | _VALUES[f.type] for f in FIELDS if f.name != "kind"},
)


def _pack(ev: Any) -> bytes:
    packed: bytes = msgpack.packb(ev, use_bin_type=True)
    return packed


def _framed_log(path: Path, blocks: list[list[Any]]) -> Segment:
    """A log of just these blocks (each a list of records), as one segment."""
    data = b"".join(frame(b"".join(_pack(r) for r in recs), len(recs)) for recs in blocks)
    path.write_bytes(data)
    n = sum(len(b) for b in blocks)
    return Segment(str(path), path.name, 0, len(data), n, framed=True)


def _rows(seg: Segment, batch_rows: int = 16384) -> list[dict[str, Any]]:
    return [r for b in read_segment(seg, batch_rows) for r in b.to_pylist()]


def _expected(events: list[dict[str, Any]], rel: str) -> list[dict[str, Any]]:
    out = []
    for ev in events:
        row = {n: ev.get(n) for n in column_names()}
        row[SOURCE_FILE] = rel
        for f in FIELDS:  # an int in a double column reads as a float
            if f.type == "double" and row[f.name] is not None:
                row[f.name] = float(row[f.name])
        out.append(row)
    return out


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(blocks=st.lists(st.lists(_EVENT, max_size=6), min_size=1, max_size=4))
def test_block_decoding_reads_exactly_what_the_records_hold(
    tmp_path: Path, blocks: list[list[dict[str, Any]]]
) -> None:
    seg = _framed_log(tmp_path / "a.msgpack", blocks)
    flat = [ev for b in blocks for ev in b]
    assert _rows(seg, batch_rows=4) == _expected(flat, "a.msgpack")


def test_a_record_msgspec_refuses_but_the_reader_takes_is_read_the_same(tmp_path: Path) -> None:
    """``kind`` present but nil: not an event msgspec's struct takes; the
    record-by-record reader takes it (a null kind), so the rows are the same."""
    events: list[dict[str, Any]] = [{"kind": "produced", "seq": 0}, {"kind": None, "seq": 1}]
    seg = _framed_log(tmp_path / "a.msgpack", [events])
    assert [r["kind"] for r in _rows(seg)] == ["produced", None]


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        ({"kind": "produced", "bogus": 1}, "unknown event field 'bogus'"),
        ({"kind": "produced", "partition": "x"}, "field 'partition' is not int64"),
        ({"kind": "produced", "offset_end": 2**64 - 1}, "field 'offset_end' is not int64"),
        ({"seq": 3}, "record is a dict, not an event map"),
        (7, "record is a int, not an event map"),
    ],
)
def test_a_bad_record_in_a_block_is_named_with_the_blocks_offset(
    tmp_path: Path, bad: Any, why: str
) -> None:
    good = [{"kind": "produced", "seq": i} for i in range(3)]
    first = len(frame(b"".join(_pack(r) for r in good), 3))
    seg = _framed_log(tmp_path / "a.msgpack", [good, [good[0], bad, good[1]]])
    with pytest.raises(CorruptEventLog) as info:
        _rows(seg)
    assert info.value.offset == first
    assert why in str(info.value)


# --------------------------------------------------------------------------- the cache


def _log(path: Path, protocol: str, n: int) -> None:
    clock = iter(range(1_000_000))
    w = EventWriter(
        path,
        run_id="columnar",
        node="n0",
        actor=path.stem,
        protocol=protocol,
        emu_clock=lambda: float(next(clock)),
        flush_bytes=600,
    )
    for i in range(n):
        w.emit(EventKind.PRODUCED, topic="t", partition=i % 3, offset_start=i, offset_end=i + 1)
    w.close()


@pytest.fixture
def run(tmp_path: Path) -> Path:
    _log(tmp_path / "zookeeper/events/producer-0.msgpack", "zookeeper", 300)
    _log(tmp_path / "zookeeper/events/host-0.msgpack", "zookeeper", 40)
    _log(tmp_path / "consumer/events/producer-0.msgpack", "consumer", 120)
    return tmp_path


def _plans(root: Path, protocols: list[str] | None = None) -> list[FilePlan]:
    return plan_files(root, find_logs(root, protocols))


def _cached_rows(paths: list[Path]) -> list[dict[str, Any]]:
    return [r for p in paths for r in pq.read_table(p).to_pylist()]


def _read_rows(plans: list[FilePlan]) -> list[dict[str, Any]]:
    return [r for p in plans for s in p.segments for r in _rows(s)]


def test_the_cache_holds_the_planned_rows_and_is_reused(run: Path) -> None:
    plans = _plans(run)
    cache = run / CACHE_DIRNAME
    paths, report = refresh(cache, run, plans)
    assert (report.files, report.decoded, report.reused, report.decoded_records) == (3, 3, 0, 460)
    assert paths == [cache / p.rel.replace(".msgpack", ".parquet") for p in plans]
    assert _cached_rows(paths) == _read_rows(plans)
    assert all(pq.read_schema(p).equals(pa.schema(pq.read_schema(paths[0]))) for p in paths)
    again, report = refresh(cache, run, _plans(run))
    assert (again, report.decoded, report.reused) == (paths, 0, 3)
    assert "all 3 files unchanged" in report.describe()


def test_a_grown_log_is_decoded_again_and_only_it(run: Path) -> None:
    cache = run / CACHE_DIRNAME
    refresh(cache, run, _plans(run))
    _log(run / "consumer/events/producer-0.msgpack", "consumer", 121)  # a writer appends
    plans = _plans(run)
    paths, report = refresh(cache, run, plans)
    assert (report.decoded, report.reused, report.decoded_records) == (1, 2, 120 + 121)
    assert _cached_rows(paths) == _read_rows(plans)


def test_a_flipped_bit_in_a_log_invalidates_its_copy(run: Path) -> None:
    cache = run / CACHE_DIRNAME
    refresh(cache, run, _plans(run))
    log = run / "zookeeper/events/producer-0.msgpack"
    data = bytearray(log.read_bytes())
    data[len(data) // 2] ^= 0x10
    log.write_bytes(bytes(data))
    plans = _plans(run)
    (damaged,) = [p for p in plans if p.report.damage]
    paths, report = refresh(cache, run, plans)
    assert report.decoded == 1 and report.decoded_records == damaged.records < 300
    assert _cached_rows(paths) == _read_rows(plans)  # read around the damaged block


def test_a_damaged_or_missing_parquet_file_is_rebuilt(run: Path) -> None:
    cache = run / CACHE_DIRNAME
    paths, _ = refresh(cache, run, _plans(run))
    paths[0].write_bytes(paths[0].read_bytes()[:-30])  # footer cut off
    paths[1].unlink()
    again, report = refresh(cache, run, _plans(run))
    assert (report.decoded, report.reused) == (2, 1)
    assert _cached_rows(again) == _read_rows(_plans(run))


def test_a_cache_of_another_format_is_rebuilt_whole(
    run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = run / CACHE_DIRNAME
    refresh(cache, run, _plans(run))
    monkeypatch.setattr(columnar, "CACHE_FORMAT", columnar.CACHE_FORMAT + 1)
    _, report = refresh(cache, run, _plans(run))
    assert report.decoded == 3
    doc = json.loads((cache / CACHE_MANIFEST).read_text())
    assert doc["fingerprint"]["format"] == columnar.CACHE_FORMAT


def test_other_protocols_entries_stay_and_gone_logs_leave(run: Path) -> None:
    cache = run / CACHE_DIRNAME
    refresh(cache, run, _plans(run))
    _, report = refresh(cache, run, _plans(run, ["consumer"]))
    assert (report.files, report.decoded) == (1, 0)
    kept = {e["rel"] for e in json.loads((cache / CACHE_MANIFEST).read_text())["files"]}
    assert len(kept) == 3  # the zookeeper logs' entries were not planned, not dropped
    (run / "zookeeper/events/host-0.msgpack").unlink()
    refresh(cache, run, _plans(run))
    kept = {e["rel"] for e in json.loads((cache / CACHE_MANIFEST).read_text())["files"]}
    assert "zookeeper/events/host-0.msgpack" not in kept and len(kept) == 2
    assert not (cache / "zookeeper/events/host-0.parquet").exists()


@pytest.mark.parametrize("workers", [1, 2])
def test_a_log_with_a_bad_record_is_named_and_not_cached(
    run: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    monkeypatch.setattr(columnar, "POOL_MIN_BYTES", 0)
    bad = run / "consumer/events/host-0.msgpack"
    good = [{"kind": "produced", "seq": i} for i in range(3)]
    _framed_log(bad, [good, [{"kind": "produced", "bogus": 1}]])
    cache = run / CACHE_DIRNAME
    with pytest.raises(CorruptEventLog, match="unknown event field 'bogus'") as info:
        refresh(cache, run, _plans(run), workers=workers)
    assert info.value.path == str(bad)
    assert not (cache / "consumer/events/host-0.parquet").exists()
    assert not list(cache.rglob(".*.tmp"))


@pytest.mark.parametrize("native", ["off", "on"])
def test_decoding_in_a_pool_of_processes_writes_the_same(
    run: Path, monkeypatch: pytest.MonkeyPatch, native: str
) -> None:
    """``on``: the processes decode with the compiled kernels (analysis.native_decode)."""
    monkeypatch.setattr(columnar, "POOL_MIN_BYTES", 0)
    monkeypatch.setenv(native_decode.ENV, native)
    plans = _plans(run)
    paths, report = refresh(run / CACHE_DIRNAME, run, plans, workers=2)
    assert report.workers == 2
    assert _cached_rows(paths) == _read_rows(plans)


def test_a_script_without_a_main_guard_runs_once(run: Path, tmp_path: Path) -> None:
    """The decoding processes import only analysis.columnar: a caller's script
    is not run again in them (as a multiprocessing spawn would)."""
    script = tmp_path / "unguarded.py"
    script.write_text(
        "from pathlib import Path\n"
        "from analysis import columnar\n"
        "from analysis.datasource import find_logs, plan_files\n"
        f"root = Path({str(run)!r})\n"
        "columnar.POOL_MIN_BYTES = 0\n"
        "plans = plan_files(root, find_logs(root))\n"
        "_, report = columnar.refresh(root / 'c', root, plans, workers=2)\n"
        "print('ran', report.workers)\n"
    )
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines() == ["ran 2"]


def test_a_directory_that_cannot_be_written_has_no_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cache_dir_for(tmp_path) == (tmp_path / CACHE_DIRNAME, "")
    monkeypatch.setattr(columnar.os, "access", lambda *_a: False)
    cache, why = cache_dir_for(tmp_path)
    assert cache is None and why == f"{tmp_path} is not writable"
    assert cache_dir_for(tmp_path / "nope")[1].endswith("is not a directory")


def test_control_events_are_in_row_groups_of_their_own(tmp_path: Path) -> None:
    """A decoded log holds its data events (produced, processed) first and the
    others after them in row groups of their own: a scan for control kinds skips
    the data row groups by their statistics. The rows are the log's, all of them."""
    data_kinds = set(columnar.DATA_KINDS)
    events = [
        {
            "kind": EventKind.PROCESSED.value if i % 7 else EventKind.REBALANCE_STARTED.value,
            "seq": i,
            "offset_start": i,
            "offset_end": i + 1,
        }
        for i in range(3000)
    ]
    seg = _framed_log(tmp_path / "c.msgpack", [events[:1000], events[1000:]])
    out = tmp_path / "c.parquet"
    assert columnar.decode_to_parquet([seg], str(out)) == 3000
    f = pq.ParquetFile(out)
    groups = [
        set(f.read_row_group(i, columns=["kind"]).column(0).to_pylist())
        for i in range(f.num_row_groups)
    ]
    is_data = [g <= data_kinds for g in groups]
    assert is_data.count(False) >= 1 and is_data.count(True) >= 1
    assert is_data == sorted(is_data, reverse=True)  # the data row groups first
    assert all(g <= data_kinds or not g & data_kinds for g in groups)  # none mixed
    rows = sorted(f.read(columns=["seq", "kind"]).to_pylist(), key=lambda r: r["seq"])
    assert rows == [{"seq": e["seq"], "kind": e["kind"]} for e in events]
