"""The msgpack event log: schema checks, buffered writing, tolerant reading."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest

from emulator.clock import FakeClock
from emulator.eventlog import (
    CorruptEventLog,
    EventLog,
    EventWriter,
    MemoryEventWriter,
    ReadStats,
    file_checksum,
    iter_events,
)
from emulator.events import FIELDS, SCHEMA_VERSION, EventError, EventKind, validate_event
from emulator.logformat import HEADER_BYTES


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


def _three_blocks(path: Path) -> list[int]:
    """A closed log of three flushed blocks of 4 events; the blocks' byte offsets."""
    w = _writer(path, FakeClock(), flush_interval_s=3600.0)
    starts = []
    for b in range(3):
        starts.append(path.stat().st_size)
        for i in range(4):
            n = b * 4 + i
            w.emit(EventKind.PRODUCED, topic="t", partition=0, offset_start=n, offset_end=n + 1)
        w.flush()
    w.close()
    return starts


def _read(path: Path) -> tuple[list[int], ReadStats]:
    stats = ReadStats()
    evs = list(iter_events(path, stats))
    return [int(e["offset_start"]) for e in evs], stats


def test_closed_log_reads_whole_and_says_closed(tmp_path: Path) -> None:
    path = tmp_path / "a.msgpack"
    _three_blocks(path)
    got, stats = _read(path)
    assert got == list(range(12))
    (rep,) = stats.reports
    assert rep.version == 2 and rep.closed is True and rep.blocks == 3
    assert not stats.damage and stats.truncated_tail_bytes == 0
    assert file_checksum(path) == (path.stat().st_size, rep.checksum)


def test_truncated_tail_is_skipped_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "a.msgpack"
    starts = _three_blocks(path)
    data = path.read_bytes()
    path.write_bytes(data[: starts[2] + 30])  # the writer died inside its third block
    got, stats = _read(path)
    assert got == list(range(8))
    assert stats.truncated_tail_bytes == 30 and not stats.damage
    assert stats.reports[0].closed is False


def test_a_log_without_its_closing_block_is_not_closed(tmp_path: Path) -> None:
    path = tmp_path / "a.msgpack"
    _three_blocks(path)
    data = path.read_bytes()
    path.write_bytes(data[: -HEADER_BYTES - 5])  # the closing block cut
    got, stats = _read(path)
    assert got == list(range(12)) and stats.reports[0].closed is False


def test_an_abandoned_log_keeps_its_flushed_blocks_and_is_not_closed(tmp_path: Path) -> None:
    path = tmp_path / "a.msgpack"
    w = _writer(path, FakeClock(), flush_interval_s=3600.0)
    for n in range(4):
        w.emit(EventKind.PRODUCED, topic="t", partition=0, offset_start=n, offset_end=n + 1)
    w.flush()
    w.emit(EventKind.PRODUCED, topic="t", partition=0, offset_start=4, offset_end=5)
    w.abandon()  # killed: the unflushed event is lost, no closing block
    w.close()  # a finally that runs later writes nothing
    assert w.closed
    with pytest.raises(ValueError, match="closed"):
        w.emit(EventKind.RUN_FINISHED)
    got, stats = _read(path)
    assert got == [0, 1, 2, 3] and stats.reports[0].closed is False and not stats.damage


def test_bit_flip_skips_one_block_and_names_it(tmp_path: Path) -> None:
    path = tmp_path / "a.msgpack"
    starts = _three_blocks(path)
    data = bytearray(path.read_bytes())
    data[starts[1] + HEADER_BYTES + 17] ^= 0x04  # one bit inside the second block's events
    path.write_bytes(bytes(data))
    got, stats = _read(path)
    assert got == [0, 1, 2, 3, 8, 9, 10, 11]
    (d,) = stats.damage
    assert (d.offset, d.length, d.records) == (starts[1], starts[2] - starts[1], 4)
    assert "payload checksum mismatch" in d.describe() and str(path) in d.describe()
    with pytest.raises(CorruptEventLog, match=f"at byte {starts[1]}: payload checksum"):
        list(iter_events(path))  # without stats, damage is never skipped unseen


def test_corrupt_length_byte_loses_one_block_not_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "a.msgpack"
    starts = _three_blocks(path)
    data = bytearray(path.read_bytes())
    data[starts[1] + 5] ^= 0xFF  # the second block's payload length
    path.write_bytes(bytes(data))
    got, stats = _read(path)
    assert got == [0, 1, 2, 3, 8, 9, 10, 11]
    (d,) = stats.damage
    assert d.what == "bad block header" and d.offset == starts[1] and d.records is None
    assert stats.reports[0].closed is True  # the closing block is still sound


def test_appended_garbage_is_damage_not_a_truncated_tail(tmp_path: Path) -> None:
    path = tmp_path / "a.msgpack"
    _three_blocks(path)
    size = path.stat().st_size
    with open(path, "ab") as f:
        f.write(b"\x00garbage" * 100)
    got, stats = _read(path)
    assert got == list(range(12)) and stats.truncated_tail_bytes == 0
    (d,) = stats.damage
    assert (d.offset, d.length, d.what) == (size, 800, "bytes outside any block")


def test_empty_file_has_no_version(tmp_path: Path) -> None:
    path = tmp_path / "a.msgpack"
    path.write_bytes(b"")
    got, stats = _read(path)
    assert got == [] and stats.reports[0].version == 0 and stats.reports[0].closed is None


def test_schema_1_logs_are_still_read(tmp_path: Path) -> None:
    path = tmp_path / "a.msgpack"
    recs = [{"kind": "produced", "v": 1, "offset_start": i} for i in range(3)]
    data = b"".join(msgpack.packb(r) for r in recs)
    path.write_bytes(data[:-2])
    got, stats = _read(path)
    assert got == [0, 1] and stats.reports[0].version == 1 and stats.reports[0].closed is None
    assert stats.truncated_tail_bytes == len(msgpack.packb(recs[2])) - 2


def test_corrupt_record_reported_with_offset(tmp_path: Path) -> None:
    path = tmp_path / "a.msgpack"
    good = msgpack.packb({"kind": "run_started", "v": 1})
    path.write_bytes(good + msgpack.packb([1, 2, 3]) + good)
    with pytest.raises(CorruptEventLog) as info:
        list(iter_events(path))
    assert info.value.offset == len(good)
    assert f"at byte {len(good)}" in str(info.value)
    stats = ReadStats()  # schema 1 has no framing to resume at: the rest is damage
    assert len(list(iter_events(path, stats))) == 1 and stats.damage[0].offset == len(good)


def test_every_field_has_a_spark_type() -> None:
    assert {f.type for f in FIELDS} <= {"string", "long", "double", "boolean"}
    assert len({f.name for f in FIELDS}) == len(FIELDS)


def test_a_held_log_writes_nothing_until_time_0_is_fixed_then_restamps(tmp_path: Path) -> None:
    """Start-up events are restamped on the run's final time 0 (negative: before it)."""
    path = tmp_path / "a.msgpack"
    clock = FakeClock(18_000.0)  # 18 s on the provisional origin
    w = _writer(path, clock, hold=True, flush_interval_s=0.0)
    w.emit(EventKind.BROKER_STARTED, broker=2)
    clock.advance(500)
    w.emit(EventKind.BROKER_STARTED, broker=3)
    w.flush()
    assert path.stat().st_size == 0  # nothing written while held, even on a flush
    w.release(19_000.0)  # time 0 is 19 s after the provisional one
    w.emit(EventKind.RUN_STARTED, t_emu_ms=0.0)
    w.close()
    evs = list(iter_events(path))
    assert [(e["seq"], e["t_emu_ms"]) for e in evs] == [(0, -1000.0), (1, -500.0), (2, 0.0)]


def test_closing_a_held_log_writes_its_events_as_stamped(tmp_path: Path) -> None:
    path = tmp_path / "a.msgpack"
    w = _writer(path, FakeClock(700.0), hold=True)
    w.emit(EventKind.RUN_STARTED)
    w.close()
    assert [e["t_emu_ms"] for e in iter_events(path)] == [700.0]


def test_rebasing_a_scaled_clock_says_how_far_time_0_moved() -> None:
    import time

    from emulator.clock import ScaledClock

    origin = time.time()
    clock = ScaledClock(0.5, origin)
    before = clock.now_ms()
    shift = clock.rebase(origin + 2.0)  # 2 wall s later = 4 emulated s at time_scale 0.5
    assert shift == pytest.approx(4000.0, abs=5.0)
    assert clock.now_ms() == pytest.approx(before - shift, abs=50.0)


# ---------------------------------------------------------- injected clock sources


class _Sources:
    """A monotonic and a wall clock that move only when told to (seconds)."""

    def __init__(self) -> None:
        self.mono_t = 50.0
        self.wall_t = 1_000.0

    def mono(self) -> float:
        return self.mono_t

    def wall(self) -> float:
        return self.wall_t


def test_stamps_come_from_the_injected_sources(tmp_path: Path) -> None:
    s = _Sources()
    path = tmp_path / "a.msgpack"
    w = _writer(path, FakeClock(), wall_clock=s.wall, mono_clock=s.mono)
    w.emit(EventKind.RUN_STARTED)
    s.mono_t, s.wall_t = 50.5, 2_000.0
    w.emit(EventKind.RUN_FINISHED)
    w.close()
    assert [(e["ts_wall"], e["ts_mono"]) for e in iter_events(path)] == [
        (1_000.0, 50.0),
        (2_000.0, 50.5),
    ]


def test_the_flush_interval_runs_on_the_mono_source(tmp_path: Path) -> None:
    s = _Sources()
    path = tmp_path / "a.msgpack"
    w = _writer(path, FakeClock(), flush_interval_s=1.0, wall_clock=s.wall, mono_clock=s.mono)
    w.emit(EventKind.RUN_STARTED)
    s.wall_t += 3_600.0  # the wall clock does not count
    s.mono_t += 0.9
    w.emit(EventKind.RUN_STARTED)
    assert path.stat().st_size == 0  # 0.9 s since the writer opened: still buffered
    s.mono_t += 0.1
    w.emit(EventKind.RUN_STARTED)
    assert len(list(iter_events(path))) == 3  # 1 s: the three went out in one flush
    s.mono_t += 0.5
    w.emit(EventKind.RUN_STARTED)
    assert len(list(iter_events(path))) == 3  # the interval restarted at that flush
    w.close()


def test_the_tap_sees_every_event_in_log_order(tmp_path: Path) -> None:
    path = tmp_path / "a.msgpack"
    clock = FakeClock(700.0)
    seen: list[dict[str, object]] = []
    w = _writer(path, clock, hold=True, tap=seen.append)
    w.emit(EventKind.RUN_STARTED)
    w.emit(EventKind.PRODUCED, topic="t", partition=0, offset_start=0, offset_end=1)
    assert seen == []  # held before time 0: not in the log yet
    w.release(500.0)
    assert [(e["seq"], e["t_emu_ms"]) for e in seen] == [(0, 200.0), (1, 200.0)]
    clock.advance(100)
    w.emit(EventKind.RUN_FINISHED)
    w.close()
    assert seen == list(iter_events(path))  # exactly what the file holds, in its order
    w2 = _writer(tmp_path / "b.msgpack", clock, tap=seen.append)
    with pytest.raises(EventError):
        w2.emit(EventKind.PRODUCED, topic="t")  # invalid: never reaches the tap
    w2.close()
    assert len(seen) == 3


# ------------------------------------------------------------------ MemoryEventWriter


def _memory(clock: FakeClock, **kw: object) -> MemoryEventWriter:
    return MemoryEventWriter(
        run_id="r1",
        node="n1",
        actor="a1",
        protocol="zookeeper",
        emu_clock=clock.now_ms,
        validate=True,
        **kw,  # type: ignore[arg-type]
    )


def _drive(log: EventLog, clock: FakeClock) -> None:
    """The calls an actor makes on its log: held start-up, release, emits, flush, close."""
    log.emit(EventKind.RUN_STARTED)
    clock.advance(40)
    log.release(25.0)
    log.emit(EventKind.PRODUCED, topic="t", partition=0, offset_start=0, offset_end=5)
    log.flush()
    clock.advance(10)
    log.emit(
        EventKind.PROCESSED, topic="t", partition=0, offset_start=0, offset_end=5, member="c-0"
    )
    log.close()


def test_the_memory_log_keeps_what_the_file_log_writes(tmp_path: Path) -> None:
    s = _Sources()
    path = tmp_path / "a.msgpack"
    c1, c2 = FakeClock(), FakeClock()
    file_log = _writer(path, c1, hold=True, wall_clock=s.wall, mono_clock=s.mono)
    _drive(file_log, c1)
    tapped: list[dict[str, object]] = []
    mem = _memory(c2, hold=True, wall_clock=s.wall, mono_clock=s.mono, tap=tapped.append)
    _drive(mem, c2)
    assert mem.events == list(iter_events(path)) == tapped
    assert [e["t_emu_ms"] for e in mem.events] == [-25.0, 40.0, 50.0]
    assert mem.written == file_log.written == 3
    counts = {"run_started": 1, "produced": 1, "processed": 1}
    assert mem.count_by_kind == file_log.count_by_kind == counts
    assert mem.closed and mem.dropped == 0
    with pytest.raises(ValueError, match="memory:a1 is closed"):
        mem.emit(EventKind.RUN_FINISHED)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.msgpack"]  # no file of its own


def test_the_memory_log_is_a_ring_of_the_latest_events() -> None:
    clock = FakeClock()
    mem = _memory(clock, capacity=3)
    for n in range(5):
        clock.advance(1)
        mem.emit(EventKind.PRODUCED, topic="t", partition=0, offset_start=n, offset_end=n + 1)
    assert [e["seq"] for e in mem.events] == [2, 3, 4]
    assert [e["t_emu_ms"] for e in mem.events] == [3.0, 4.0, 5.0]
    assert mem.written == 5 and mem.dropped == 2 and mem.count_by_kind == {"produced": 5}
    with pytest.raises(EventError, match="'offset_end'"):
        mem.emit(EventKind.PRODUCED, topic="t", partition=0, offset_start=0)
    assert mem.written == 5
    with pytest.raises(ValueError, match="capacity must be > 0"):
        _memory(clock, capacity=0)
