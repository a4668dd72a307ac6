"""Buffered msgpack event-log writer and a reader that names damage instead of guessing.

A log file is a sequence of checksummed blocks of msgpack event maps (schema
2, see :mod:`emulator.logformat`; schema-1 files, plain concatenations of
maps, are still read). The writer buffers packed records and appends one
block per flush (on an interval, when the buffer is large, and at close), and
a closing block when it closes the log, so a crash can at worst cut the *last*
block short and a log that was not closed says so. The reader yields every
event of every sound block; a truncated tail is counted, a corrupt block is
reported by path and byte offset and skipped, never a reason to drop the rest.
:class:`MemoryEventWriter` stamps events the same way and keeps them in memory.
Both read time only through the clock sources they are given (the machine's
by default).
"""

from __future__ import annotations

import os
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Protocol

import msgpack

from emulator.events import SCHEMA_VERSION, Event, EventKind, validate_event
from emulator.logformat import (
    MAX_BLOCK_BYTES,
    Damage,
    FileReport,
    Readable,
    closing_block,
    frame,
    stream_checksum,
    walk,
)


class CorruptEventLog(ValueError):
    """A log file holds bytes that are not a msgpack map of the schema."""

    def __init__(self, path: str, offset: int, why: str) -> None:
        super().__init__(f"corrupt event log {path} at byte {offset}: {why}")
        self.path = path
        self.offset = offset
        self.why = why


@dataclass
class ReadStats:
    """What a read saw besides the events themselves.

    Attributes:
        records: events read.
        truncated_tail_bytes: bytes cut off the ends of files.
        files: the files read, in order.
        damage: the unreadable regions (corrupt blocks, stray bytes).
        reports: per file, what its walk found (:class:`~emulator.logformat.FileReport`).
    """

    records: int = 0
    truncated_tail_bytes: int = 0
    files: list[str] = field(default_factory=list)
    damage: list[Damage] = field(default_factory=list)
    reports: list[FileReport] = field(default_factory=list)

    def add(self, report: FileReport) -> None:
        """Count one walked file."""
        self.records += report.records
        self.truncated_tail_bytes += report.truncated_tail_bytes
        self.files.append(report.path)
        self.damage.extend(report.damage)
        self.reports.append(report)


class EventLog(Protocol):
    """What actors call on an event log: :class:`EventWriter` and :class:`MemoryEventWriter`."""

    count_by_kind: dict[str, int]

    def emit(self, kind: EventKind, **fields: object) -> None:
        """Record one event."""
        ...

    def release(self, shift_ms: float = 0.0) -> None:
        """Write the events held before time 0, restamped by ``shift_ms``."""
        ...

    def flush(self) -> None:
        """Write out what is buffered."""
        ...

    def close(self) -> None:
        """Release, flush and close; later emits raise."""
        ...

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        ...

    @property
    def written(self) -> int:
        """Number of events emitted so far."""
        ...


class _Stamping(ABC):
    """The envelope every log shares: stamps, schema check, counts, hold and release.

    Subclasses store the stamped events (:meth:`_store`) and say when they are
    closed; see :class:`EventWriter` for the arguments.
    """

    def __init__(
        self,
        *,
        run_id: str,
        node: str,
        actor: str,
        protocol: str | None,
        emu_clock: Callable[[], float],
        validate: bool,
        hold: bool,
        wall_clock: Callable[[], float],
        mono_clock: Callable[[], float],
        tap: Callable[[Event], None] | None,
    ) -> None:
        self._wall_clock = wall_clock
        self._mono_clock = mono_clock
        self._tap = tap
        # Events emitted before the run's time 0 is fixed wait here, unwritten,
        # so that release() can restamp them on the final origin.
        self._held: list[Event] | None = [] if hold else None
        self._seq = 0
        self._run_id = run_id
        self._node = node
        self._actor = actor
        self._protocol = protocol
        self._emu_clock = emu_clock
        self._validate = validate
        self.count_by_kind: dict[str, int] = {}

    @property
    @abstractmethod
    def closed(self) -> bool:
        """True once :meth:`close` ran."""

    @abstractmethod
    def _name(self) -> str:
        """How errors name this log."""

    @abstractmethod
    def _store(self, ev: Event) -> None:
        """Keep one stamped event (called in log order, after the tap)."""

    def emit(self, kind: EventKind, **fields: object) -> None:
        """Record one event; ``None`` fields are left out.

        Args:
            kind: the event kind.
            **fields: schema fields (see :data:`emulator.events.FIELDS`).
                ``actor`` and ``t_emu_ms`` may be given to override the stamp.

        Raises:
            ValueError: the log is closed.
        """
        if self.closed:
            raise ValueError(f"event writer {self._name()} is closed")
        value: str = kind._value_  # kind.value without the enum property's call
        ev: Event = {
            "v": SCHEMA_VERSION,
            "seq": self._seq,
            "kind": value,
            "t_emu_ms": float(self._emu_clock()),
            "ts_wall": self._wall_clock(),
            "ts_mono": self._mono_clock(),
            "run_id": self._run_id,
            "node": self._node,
            "actor": self._actor,
        }
        if self._protocol is not None:
            ev["protocol"] = self._protocol
        for k, v in fields.items():
            if v is not None:
                ev[k] = v
        if self._validate:
            validate_event(ev)
        self._seq += 1
        self.count_by_kind[value] = self.count_by_kind.get(value, 0) + 1
        if self._held is not None:
            self._held.append(ev)
            return
        self._append(ev)

    def _append(self, ev: Event) -> None:
        if self._tap is not None:
            self._tap(ev)
        self._store(ev)

    def release(self, shift_ms: float = 0.0) -> None:
        """Write the events held since the start, restamped on the run's fixed time 0.

        Args:
            shift_ms: what :meth:`emulator.clock.ScaledClock.rebase` returned:
                every held ``t_emu_ms`` moves back by it (start-up before time 0
                shows as negative times).
        """
        held, self._held = self._held, None
        for ev in held or ():
            t = ev["t_emu_ms"]
            assert isinstance(t, int | float)
            ev["t_emu_ms"] = float(t) - shift_ms
            self._append(ev)

    @property
    def written(self) -> int:
        """Number of events emitted so far."""
        return self._seq


class EventWriter(_Stamping):
    """Append events to one msgpack file, buffered.

    Args:
        path: the file to append to (parents are created).
        run_id, node, actor, protocol: stamped on every event.
        emu_clock: returns the emulated time in ms since the run started.
        flush_interval_s: wall seconds between flushes while events arrive.
        flush_bytes: flush when the buffer reaches this size.
        validate: check every event against the schema (tests turn it on).
        on_close: called with the file's path once it is closed (e.g. to copy
            it to shared storage); what it raises, :meth:`close` raises.
        hold: keep events unwritten until :meth:`release` (the run's time 0 is
            not fixed yet); :meth:`close` releases them as they are.
        wall_clock: the source of ``ts_wall`` (seconds since the epoch).
        mono_clock: the source of ``ts_mono`` and of the flush interval (seconds).
        tap: called with every event map as it goes into the log, validated
            and just before it is packed, so it sees exactly what the file gets,
            in order: at :meth:`emit`, or for events held before time 0 at
            :meth:`release`, restamped (the sim engine's online monitor). The
            map is the one that gets written: a tap must not change it.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        run_id: str,
        node: str,
        actor: str,
        protocol: str | None,
        emu_clock: Callable[[], float],
        flush_interval_s: float = 0.5,
        flush_bytes: int = 256 * 1024,
        validate: bool = False,
        on_close: Callable[[Path], None] | None = None,
        hold: bool = False,
        wall_clock: Callable[[], float] = time.time,
        mono_clock: Callable[[], float] = time.monotonic,
        tap: Callable[[Event], None] | None = None,
    ) -> None:
        super().__init__(
            run_id=run_id,
            node=node,
            actor=actor,
            protocol=protocol,
            emu_clock=emu_clock,
            validate=validate,
            hold=hold,
            wall_clock=wall_clock,
            mono_clock=mono_clock,
            tap=tap,
        )
        self.path = Path(path)
        self._on_close = on_close
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: BinaryIO | None = open(self.path, "ab")  # noqa: SIM115
        self._packer = msgpack.Packer(use_bin_type=True)
        self._buf: list[bytes] = []
        self._buf_bytes = 0
        self._records = 0  # events in the blocks written so far
        self._blocks = 0
        self._last_flush = mono_clock()
        self._flush_interval_s = flush_interval_s
        self._flush_bytes = flush_bytes

    def _name(self) -> str:
        return str(self.path)

    def _store(self, ev: Event) -> None:
        packed = self._packer.pack(ev)
        self._buf.append(packed)
        self._buf_bytes += len(packed)
        if (
            self._buf_bytes >= self._flush_bytes
            or self._mono_clock() - self._last_flush >= self._flush_interval_s
        ):
            self.flush()

    def flush(self) -> None:
        """Append the buffered records to the file as checksummed blocks (one write)."""
        if self._file is None:
            return
        if self._buf:
            blocks: list[bytes] = []
            start = 0
            size = 0
            for i, rec in enumerate(self._buf):
                if size and size + len(rec) > MAX_BLOCK_BYTES:
                    blocks.append(frame(b"".join(self._buf[start:i]), i - start))
                    start, size = i, 0
                size += len(rec)
            blocks.append(frame(b"".join(self._buf[start:]), len(self._buf) - start))
            self._file.write(b"".join(blocks))
            self._file.flush()
            self._records += len(self._buf)
            self._blocks += len(blocks)
            self._buf.clear()
            self._buf_bytes = 0
        self._last_flush = self._mono_clock()

    def close(self) -> None:
        """Flush, append the closing block, fsync and close; later emits raise."""
        if self._file is None:
            return
        self.release()
        self.flush()
        self._file.write(closing_block(self._records, self._blocks))
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        self._file = None
        if self._on_close is not None:
            hook, self._on_close = self._on_close, None
            hook(self.path)

    def abandon(self) -> None:
        """What a killed process leaves: the buffer is lost, no closing block is written.

        The file keeps the blocks flushed so far, and the log reads as not
        closed, as after ``kill -9``. Later emits raise, as after :meth:`close`.
        The sim engine calls it when it kills an actor.
        """
        if self._file is None:
            return
        self._buf.clear()
        self._buf_bytes = 0
        self._file.close()
        self._file = None
        self._on_close = None

    @property
    def closed(self) -> bool:
        """True once :meth:`close` or :meth:`abandon` ran."""
        return self._file is None


class MemoryEventWriter(_Stamping):
    """An event log kept in memory: no file, no packing, no ``fsync``.

    The same stamps, schema check, counts and hold/release as
    :class:`EventWriter` (whose arguments it shares, less the file's), for runs
    that only watch their events as they happen (the sim engine's ``explore``).
    It keeps the last ``capacity`` events (a ring buffer, for traces) and the
    counts of all of them.

    Args:
        capacity: how many of the latest events :attr:`events` keeps (> 0).
    """

    def __init__(
        self,
        *,
        run_id: str,
        node: str,
        actor: str,
        protocol: str | None,
        emu_clock: Callable[[], float],
        validate: bool = False,
        hold: bool = False,
        wall_clock: Callable[[], float] = time.time,
        mono_clock: Callable[[], float] = time.monotonic,
        tap: Callable[[Event], None] | None = None,
        capacity: int = 10_000,
    ) -> None:
        if capacity <= 0:
            raise ValueError(f"capacity must be > 0, got {capacity}")
        super().__init__(
            run_id=run_id,
            node=node,
            actor=actor,
            protocol=protocol,
            emu_clock=emu_clock,
            validate=validate,
            hold=hold,
            wall_clock=wall_clock,
            mono_clock=mono_clock,
            tap=tap,
        )
        self._ring: deque[Event] = deque(maxlen=capacity)
        self._stored = 0
        self._closed = False

    def _name(self) -> str:
        return f"memory:{self._actor}"

    def _store(self, ev: Event) -> None:
        self._ring.append(ev)
        self._stored += 1

    @property
    def events(self) -> list[Event]:
        """The latest events in the log (at most ``capacity``), oldest first."""
        return list(self._ring)

    @property
    def dropped(self) -> int:
        """Events in the log that the ring buffer no longer holds."""
        return self._stored - len(self._ring)

    def flush(self) -> None:
        """Nothing to write out: every event is in :attr:`events` as it is logged."""

    def close(self) -> None:
        """Log the held events as they are (as :meth:`EventWriter.close`); later emits raise."""
        if self._closed:
            return
        self.release()
        self._closed = True

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._closed


def iter_events(path: str | Path, stats: ReadStats | None = None) -> Iterator[Event]:
    """Yield every event of one log file's sound blocks.

    With ``stats``, damage and a truncated tail are recorded there and the
    read goes on; without, damage raises (nothing is skipped unseen) and a
    truncated tail is skipped.

    Raises:
        CorruptEventLog: without ``stats``, the first damage, named by byte offset.
    """
    p = str(path)
    size = os.path.getsize(p)
    with open(p, "rb") as f:
        yield from iter_event_stream(f, p, size, stats)


def iter_event_stream(
    f: Readable, name: str, size: int, stats: ReadStats | None = None
) -> Iterator[Event]:
    """Yield every event of an open log of ``size`` bytes, read from its start.

    ``f`` is any binary file object (a local file, a pyarrow input file);
    ``name`` is the path or URL that errors and ``stats.files`` give. Damage
    and truncation are handled as :func:`iter_events` does.

    Raises:
        CorruptEventLog: without ``stats``, the first damage, named by byte offset.
    """
    report = FileReport(name)
    for block in walk(f, name, size, report):
        assert block.payload is not None
        got = 0
        unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=0)
        unpacker.feed(block.payload)
        try:
            for obj in unpacker:
                if not isinstance(obj, dict) or "kind" not in obj:
                    raise ValueError(f"record is a {type(obj).__name__}, not an event map")
                got += 1
                yield obj
        except (msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, ValueError) as exc:
            report.damage.append(
                Damage(
                    name,
                    block.offset,
                    block.end - block.offset,
                    f"undecodable records in a sound block: {exc}",
                    block.records - got,
                )
            )
            report.records -= block.records - got
        if stats is None and report.damage:
            break
    if stats is not None:
        stats.add(report)
    elif report.damage:
        d = report.damage[0]
        raise CorruptEventLog(name, d.offset, d.what)


def read_run_events(events_dir: str | Path, stats: ReadStats | None = None) -> Iterator[Event]:
    """Yield the events of every ``*.msgpack`` file in a directory, file by file."""
    for path in sorted(Path(events_dir).glob("*.msgpack")):
        yield from iter_events(path, stats)


def file_checksum(path: str | Path) -> tuple[int, str]:
    """A file's size and CRC32C (hex), read in bounded memory."""
    with open(path, "rb") as f:
        return stream_checksum(f)
