"""Run locations (:mod:`emulator.storage`) on local paths and ``file://`` URLs."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from emulator.eventlog import EventWriter, ReadStats
from emulator.events import EventKind
from emulator.storage import StorageError, is_url, resolve


def _log(path: Path, n: int) -> None:
    w = EventWriter(
        path, run_id="r", node="n", actor=path.stem, protocol="p", emu_clock=lambda: 0.0
    )
    for i in range(n):
        w.emit(EventKind.ACTION_APPLIED, reason=f"a{i}")
    w.close()


@pytest.mark.parametrize("as_url", [False, True])
def test_a_location_writes_reads_lists_and_uploads(tmp_path: Path, as_url: bool) -> None:
    run = tmp_path / "run"
    loc = resolve(f"file://{run}" if as_url else str(run))
    assert loc.is_url is as_url and loc.local_path == run
    assert not loc.exists()
    loc.write_text("manifest.json", '{"a": 1}\n')
    assert loc.is_dir() and loc.is_file("manifest.json")
    assert loc.read_text("manifest.json") == '{"a": 1}\n'
    loc.write_text("manifest.json", "{}\n")  # replaced whole
    assert (run / "manifest.json").read_text() == "{}\n"
    assert not list(run.glob("*.tmp"))

    spool = tmp_path / "spool" / "host-0.msgpack"
    _log(spool, 5)
    assert loc.upload(spool, "zookeeper/events/host-0.msgpack") == spool.stat().st_size
    _log(run / "zookeeper" / "events" / "broker-0.msgpack", 2)
    _log(run / "classic-eager" / "events" / "orchestrator.msgpack", 1)
    (run / "zookeeper" / "events" / "notes.txt").write_text("x")
    (run / "zookeeper" / "deep").mkdir()
    _log(run / "zookeeper" / "deep" / "other.msgpack", 1)  # not in the layout
    assert loc.event_logs() == [
        "classic-eager/events/orchestrator.msgpack",
        "zookeeper/events/broker-0.msgpack",
        "zookeeper/events/host-0.msgpack",
    ]
    assert loc.event_logs(["zookeeper"]) == [
        "zookeeper/events/broker-0.msgpack",
        "zookeeper/events/host-0.msgpack",
    ]
    assert loc.list_files("nothing-here", ".msgpack") == []
    stats = ReadStats()
    events = list(loc.read_events("zookeeper/events", stats))
    assert len(events) == 7 and stats.records == 7 and len(stats.files) == 2
    assert loc.size("zookeeper/events/host-0.msgpack") == spool.stat().st_size

    child = loc.child("zookeeper/events")
    assert child.read_bytes("host-0.msgpack") == spool.read_bytes()
    if as_url:
        assert child.uri == f"file://{run}/zookeeper/events"
        assert loc.display("manifest.json") == f"file://{run}/manifest.json"
    loc.delete("zookeeper/events/host-0.msgpack")
    loc.delete("zookeeper/events/host-0.msgpack")  # missing is fine
    assert not loc.exists("zookeeper/events/host-0.msgpack")


def test_a_truncated_tail_is_skipped_and_counted_through_a_location(tmp_path: Path) -> None:
    path = tmp_path / "events" / "a.msgpack"
    _log(path, 3)
    whole = path.read_bytes()
    path.write_bytes(whole + whole[:7])  # a writer died mid-record
    stats = ReadStats()
    loc = resolve(f"file://{tmp_path}")
    assert len(list(loc.read_events("events", stats))) == 3
    assert stats.truncated_tail_bytes == 7


def test_bad_locations_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match=r"^foo://x/y: cannot reach storage: unsupported"):
        resolve("foo://x/y")
    with pytest.raises(StorageError, match="empty run location"):
        resolve("")
    loc = resolve(str(tmp_path))
    with pytest.raises(StorageError, match=r"no such file$"):
        loc.read_text("manifest.json")
    with pytest.raises(StorageError, match="no such file to upload"):
        loc.upload(tmp_path / "missing.msgpack", "x.msgpack")
    (tmp_path / "file").write_text("x")
    with pytest.raises(StorageError) as err:
        resolve(str(tmp_path / "file")).write_text("manifest.json", "{}")
    assert "\n" not in str(err.value) and str(tmp_path / "file") in str(err.value)


def test_urls_and_paths_are_told_apart() -> None:
    assert is_url("s3://b/x") and is_url("file:///tmp/x") and is_url("hdfs://nn:8020/x")
    assert not is_url("runs/x") and not is_url("/tmp/x") and not is_url(Path("/tmp/x"))
    loc = resolve("s3://bucket/runs/x?endpoint_override=127.0.0.1:9&scheme=http")
    assert loc.root == "bucket/runs/x" and loc.local_path is None
    # options are kept for children, never shown in messages
    assert loc.child_uri("p/events") == (
        "s3://bucket/runs/x/p/events?endpoint_override=127.0.0.1:9&scheme=http"
    )
    assert loc.display("manifest.json") == "s3://bucket/runs/x/manifest.json"


def test_the_stream_planner_agrees_with_the_file_planner(tmp_path: Path) -> None:
    """The planning walk over a remote stream finds the same boundaries as over a file."""
    pytest.importorskip("pyspark")
    from analysis.datasource import _plan_stream, plan_file

    path = tmp_path / "big.msgpack"
    w = EventWriter(path, run_id="r", node="n", actor="a", protocol="p", emu_clock=lambda: 0.0)
    for i in range(30_000):  # ~3 MB: records straddle the 1 MiB reads
        w.emit(EventKind.ACTION_APPLIED, reason=f"r{i}", detail="x" * (i % 50))
    w.close()
    data = path.read_bytes()
    path.write_bytes(data + data[:9])
    for seg_bytes in (0, 700_000):
        want = plan_file(path, "big", seg_bytes)
        got = _plan_stream(
            io.BytesIO(path.read_bytes()), str(path), "big", len(data) + 9, seg_bytes
        )
        assert (got.records, got.truncated_at, got.truncated_bytes) == (
            want.records,
            want.truncated_at,
            want.truncated_bytes,
        )
        assert got.segments == want.segments and got.records == 30_000
    at = plan_file(path, "p", 1_500_000).segments[0].end  # a block boundary past 1 MiB
    bad = data[:at] + b"\xc1" + data[at:]
    plan = _plan_stream(io.BytesIO(bad), "bad", "b", len(bad), 0)
    (d,) = plan.report.damage  # the stray byte is named and skipped; nothing else is lost
    assert (d.offset, d.length, d.what) == (at, 1, "bytes outside any block")
    assert plan.records == 30_000 and len(plan.segments) == 2
