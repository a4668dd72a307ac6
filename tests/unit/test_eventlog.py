"""The msgpack event log: schema checks, buffered writing, tolerant reading."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest

from emulator.clock import FakeClock
from emulator.eventlog import CorruptEventLog, EventWriter, ReadStats, iter_events
from emulator.events import FIELDS, SCHEMA_VERSION, EventError, EventKind, validate_event


def _writer(path: Path, clock: FakeClock, **kw: object) -> EventWriter:
    return EventWriter(path, run_id="r1", node="n1", actor="a1", protocol="zookeeper",
                       emu_clock=clock.now_ms, validate=True, **kw)  # type: ignore[arg-type]


def test_round_trip_stamps_envelope(tmp_path: Path) -> None:
    clock = FakeClock()
    w = _writer(tmp_path / "a.msgpack", clock)
    w.emit(EventKind.PRODUCED, topic="t", partition=3, offset_start=0, offset_end=10)
    clock.advance(250)
    w.emit(EventKind.PROCESSED, topic="t", partition=3, offset_start=0, offset_end=10,
           member="c-0", member_id=None)
    w.close()
    evs = list(iter_events(tmp_path / "a.msgpack"))
    assert [e["kind"] for e in evs] == ["produced", "processed"]
    assert [e["seq"] for e in evs] == [0, 1]
    assert evs[1]["t_emu_ms"] == 250.0
    assert evs[0]["v"] == SCHEMA_VERSION and evs[0]["protocol"] == "zookeeper"
    assert "member_id" not in evs[1]  # None fields are left out


def test_validation_names_the_field(tmp_path: Path) -> None:
    w = _writer(tmp_path / "a.msgpack", FakeClock())
    with pytest.raises(EventError, match="'offset_end'"):
        w.emit(EventKind.PRODUCED, topic="t", partition=0, offset_start=0)
    with pytest.raises(EventError, match="'partition' must be long"):
        w.emit(EventKind.PRODUCED, topic="t", partition="0", offset_start=0, offset_end=1)
    with pytest.raises(EventError, match="unknown event field 'colour'"):
        validate_event({"kind": "produced", "colour": "red"})


def test_buffered_until_flush(tmp_path: Path) -> None:
    path = tmp_path / "a.msgpack"
    w = _writer(path, FakeClock(), flush_interval_s=3600.0)
    w.emit(EventKind.RUN_STARTED)
    assert path.stat().st_size == 0
    w.flush()
    assert path.stat().st_size > 0
    w.close()
    with pytest.raises(ValueError, match="closed"):
        w.emit(EventKind.RUN_FINISHED)


def test_truncated_tail_is_skipped_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "a.msgpack"
    w = _writer(path, FakeClock())
    for i in range(5):
        w.emit(EventKind.PRODUCED, topic="t", partition=0, offset_start=i, offset_end=i + 1)
    w.close()
    data = path.read_bytes()
    path.write_bytes(data[:-7])  # a writer that died mid-record
    stats = ReadStats()
    evs = list(iter_events(path, stats))
    assert len(evs) == 4 and stats.records == 4
    assert 0 < stats.truncated_tail_bytes < len(data) // 5 + 1


def test_corrupt_record_reported_with_offset(tmp_path: Path) -> None:
    path = tmp_path / "a.msgpack"
    good = msgpack.packb({"kind": "run_started", "v": 1})
    path.write_bytes(good + msgpack.packb([1, 2, 3]) + good)
    with pytest.raises(CorruptEventLog) as info:
        list(iter_events(path))
    assert info.value.offset == len(good)
    assert f"at byte {len(good)}" in str(info.value)


def test_every_field_has_a_spark_type() -> None:
    assert {f.type for f in FIELDS} <= {"string", "long", "double", "boolean"}
    assert len({f.name for f in FIELDS}) == len(FIELDS)
