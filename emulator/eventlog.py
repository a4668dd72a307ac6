"""Buffered msgpack event-log writer and a tolerant reader.

A log file is a plain concatenation of msgpack maps, one per event (see
:mod:`emulator.events`). The writer buffers packed records and appends them in
whole records, on an interval, when the buffer is large, and at close, so a
crash can at worst cut the *last* record short. The reader yields every
complete record, skips and counts a truncated tail, and reports corruption by
path and byte offset instead of guessing.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Protocol

import msgpack

from emulator.events import SCHEMA_VERSION, Event, EventKind, validate_event


class _Readable(Protocol):
    def read(self, n: int = -1, /) -> bytes: ...


class CorruptEventLog(ValueError):
    """A log file holds bytes that are not a msgpack map of the schema."""

    def __init__(self, path: str, offset: int, why: str) -> None:
        super().__init__(f"corrupt event log {path} at byte {offset}: {why}")
        self.path = path
        self.offset = offset


@dataclass
class ReadStats:
    """What a read saw besides the events themselves."""

    records: int = 0
    truncated_tail_bytes: int = 0
    files: list[str] = field(default_factory=list)


class EventWriter:
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
    ) -> None:
        self.path = Path(path)
        self._on_close = on_close
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: BinaryIO | None = open(self.path, "ab")  # noqa: SIM115
        self._packer = msgpack.Packer(use_bin_type=True)
        self._buf: list[bytes] = []
        self._buf_bytes = 0
        self._seq = 0
        self._last_flush = time.monotonic()
        self._run_id = run_id
        self._node = node
        self._actor = actor
        self._protocol = protocol
        self._emu_clock = emu_clock
        self._flush_interval_s = flush_interval_s
        self._flush_bytes = flush_bytes
        self._validate = validate
        self.count_by_kind: dict[str, int] = {}

    def emit(self, kind: EventKind, **fields: object) -> None:
        """Record one event; ``None`` fields are left out.

        Args:
            kind: the event kind.
            **fields: schema fields (see :data:`emulator.events.FIELDS`).
                ``actor`` and ``t_emu_ms`` may be given to override the stamp.
        """
        if self._file is None:
            raise ValueError(f"event writer {self.path} is closed")
        ev: Event = {
            "v": SCHEMA_VERSION,
            "seq": self._seq,
            "kind": kind.value,
            "t_emu_ms": float(self._emu_clock()),
            "ts_wall": time.time(),
            "ts_mono": time.monotonic(),
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
        packed = self._packer.pack(ev)
        self._buf.append(packed)
        self._buf_bytes += len(packed)
        self.count_by_kind[kind.value] = self.count_by_kind.get(kind.value, 0) + 1
        if (
            self._buf_bytes >= self._flush_bytes
            or time.monotonic() - self._last_flush >= self._flush_interval_s
        ):
            self.flush()

    def flush(self) -> None:
        """Append the buffered records to the file as whole records."""
        if self._file is None:
            return
        if self._buf:
            self._file.write(b"".join(self._buf))
            self._file.flush()
            self._buf.clear()
            self._buf_bytes = 0
        self._last_flush = time.monotonic()

    def close(self) -> None:
        """Flush, fsync and close; later emits raise."""
        if self._file is None:
            return
        self.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        self._file = None
        if self._on_close is not None:
            hook, self._on_close = self._on_close, None
            hook(self.path)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._file is None

    @property
    def written(self) -> int:
        """Number of events emitted so far."""
        return self._seq


def iter_events(path: str | Path, stats: ReadStats | None = None) -> Iterator[Event]:
    """Yield every complete event of one log file.

    A truncated last record (a writer that died mid-write) is skipped and
    counted in ``stats.truncated_tail_bytes``.

    Raises:
        CorruptEventLog: bytes that do not decode to a map, named by byte offset.
    """
    p = str(path)
    size = os.path.getsize(p)
    with open(p, "rb") as f:
        yield from iter_event_stream(f, p, size, stats)


def iter_event_stream(
    f: _Readable, name: str, size: int, stats: ReadStats | None = None
) -> Iterator[Event]:
    """Yield every complete event of an open log of ``size`` bytes, read from its start.

    ``f`` is any binary file object (a local file, a pyarrow input file);
    ``name`` is the path or URL that errors and ``stats.files`` give.
    A truncated last record is skipped and counted as :func:`iter_events` does.

    Raises:
        CorruptEventLog: bytes that do not decode to a map, named by byte offset.
    """
    offset = 0
    # Streamed from the file: a log of any size is read in bounded memory.
    unpacker = msgpack.Unpacker(f, raw=False, strict_map_key=False, read_size=1 << 20)
    while offset < size:
        try:
            obj = unpacker.unpack()
        except msgpack.OutOfData:
            if stats is not None:
                stats.truncated_tail_bytes += size - offset
            break
        except (msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, ValueError) as exc:
            raise CorruptEventLog(name, offset, str(exc) or type(exc).__name__) from None
        if not isinstance(obj, dict) or "kind" not in obj:
            raise CorruptEventLog(
                name, offset, f"record is a {type(obj).__name__}, not an event map"
            )
        offset = unpacker.tell()
        if stats is not None:
            stats.records += 1
        yield obj
    if stats is not None:
        stats.files.append(name)


def read_run_events(events_dir: str | Path, stats: ReadStats | None = None) -> Iterator[Event]:
    """Yield the events of every ``*.msgpack`` file in a directory, file by file."""
    for path in sorted(Path(events_dir).glob("*.msgpack")):
        yield from iter_events(path, stats)
