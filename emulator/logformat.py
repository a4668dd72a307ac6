"""The framing of an event-log file: checksummed blocks, and a walker that survives damage.

Schema 2 (this module). A log is a sequence of blocks, one per writer flush::

    magic (4 bytes) | payload bytes (u32) | records (u32) | payload CRC32C (u32)
    | header CRC32C (u32, of the 16 bytes before it) | payload

all little-endian. A data block (:data:`BLOCK_MAGIC`) holds whole msgpack
event maps; the writer ends the file with a closing block
(:data:`CLOSE_MAGIC`, a msgpack map ``{"records", "blocks"}``) when it closes
the log, so a file whose last block is not a closing block was cut short (its
actor died, or the run was stopped). The magic's first byte, ``0xc1``, is the
one byte msgpack never uses: a framed file is never mistaken for schema 1 and
a false block start needs a matching 32-bit header checksum as well.

Schema 1 (still read): a plain concatenation of msgpack maps, no checksums.

:func:`walk` reads either from any sequential byte stream. Damage never stops
it: a block whose header or payload checksum fails is reported as
:class:`Damage` (path, byte offset, bytes and, when the header is sound, the
records lost) and the walk resumes at the next sound block header; bytes cut
off at the end of the file are a truncated tail. Schema 1 has no framing to
resume at: damage there ends the file's walk, reported as such.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Final, Protocol

import msgpack
from crc32c import crc32c

BLOCK_MAGIC: Final = b"\xc1RE2"
CLOSE_MAGIC: Final = b"\xc1RC2"
_MAGICS: Final = (BLOCK_MAGIC, CLOSE_MAGIC)
_MAGIC_PREFIX: Final = b"\xc1R"
HEADER: Final = struct.Struct("<4sIIII")
HEADER_BYTES: Final = HEADER.size  # 20
_CHECKED: Final = struct.Struct("<4sIII")  # the header bytes its own checksum covers
MAX_BLOCK_BYTES: Final = 64 * 1024 * 1024
"""The largest payload a block may declare (the writer splits larger flushes)."""

FRAMED_VERSION: Final = 2
UNFRAMED_VERSION: Final = 1
_MAP_FIRST_BYTES: Final = frozenset([*range(0x80, 0x90), 0xDE, 0xDF])
_READ_SIZE: Final = 1 << 20
_UNPACK_ERRORS: Final = (msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, ValueError)


class Readable(Protocol):
    """A binary stream read from its start (a local file, a ``pyarrow`` input file)."""

    def read(self, n: int = -1, /) -> bytes: ...


def frame(payload: bytes, records: int, *, closing: bool = False) -> bytes:
    """One block: its header followed by ``payload``."""
    if len(payload) > MAX_BLOCK_BYTES:
        raise ValueError(f"a block holds at most {MAX_BLOCK_BYTES} bytes, not {len(payload)}")
    fields = (CLOSE_MAGIC if closing else BLOCK_MAGIC, len(payload), records, crc32c(payload))
    return HEADER.pack(*fields, crc32c(_CHECKED.pack(*fields))) + payload


def closing_block(records: int, blocks: int) -> bytes:
    """The block a writer appends when it closes its log."""
    body = msgpack.packb({"records": records, "blocks": blocks}, use_bin_type=True)
    return frame(body, records, closing=True)


@dataclass(frozen=True)
class Damage:
    """Bytes of a log that could not be read as events.

    Attributes:
        path: the file (or URL).
        offset: the byte offset where the damage starts.
        length: how many bytes were skipped.
        what: what was wrong, e.g. ``payload checksum mismatch``.
        records: the events lost, when the block header that counts them is sound.
    """

    path: str
    offset: int
    length: int
    what: str
    records: int | None = None

    def describe(self) -> str:
        """One line: where, what, and what was skipped."""
        lost = f", {self.records} events" if self.records is not None else ""
        return f"{self.path} at byte {self.offset}: {self.what} ({self.length} bytes{lost} skipped)"


@dataclass
class FileReport:
    """What a walk found in one log file besides its events.

    Attributes:
        path: the file (or URL).
        size: its size in bytes.
        version: 2 framed, 1 unframed (schema 1), 0 empty.
        records: the events read.
        blocks: the sound data blocks read (schema 2).
        truncated_tail_bytes: bytes cut off at the end (a write that never finished).
        damage: unreadable regions, in file order.
        closed: schema 2: the file ends with its writer's closing block;
            ``None`` for schema 1 and empty files (nothing says).
        checksum: CRC32C of the whole file as hex (every byte was read).
    """

    path: str
    size: int = 0
    version: int = 0
    records: int = 0
    blocks: int = 0
    truncated_tail_bytes: int = 0
    damage: list[Damage] = field(default_factory=list)
    closed: bool | None = None
    checksum: str = ""


@dataclass(frozen=True)
class Block:
    """A sound data block, or a run of schema-1 records (``offset``..``end``).

    ``payload`` is the block's events (schema 2, after its header) or the
    record's bytes (schema 1) when the walk keeps them, else ``None``.
    """

    offset: int
    end: int
    records: int
    payload: bytes | None


def stream_checksum(f: Readable) -> tuple[int, str]:
    """The size and CRC32C (hex) of a stream read to its end, in bounded memory."""
    crc = 0
    size = 0
    while chunk := f.read(_READ_SIZE):
        crc = crc32c(bytes(chunk), crc)
        size += len(chunk)
    return size, f"{crc:08x}"


class _Buffered:
    """A sequential stream with a sliding window, for looking ahead and resyncing."""

    def __init__(self, f: Readable) -> None:
        self._f = f
        self._buf = bytearray()
        self._base = 0  # file offset of _buf[0]
        self._eof = False
        self.crc = 0

    def _fill(self, upto: int) -> None:
        """Read until the window covers file offset ``upto`` (exclusive), or EOF."""
        while not self._eof and self._base + len(self._buf) < upto:
            chunk = self._f.read(max(_READ_SIZE, upto - self._base - len(self._buf)))
            if not chunk:
                self._eof = True
                break
            self.crc = crc32c(chunk, self.crc)
            self._buf += chunk

    def get(self, start: int, n: int) -> bytes:
        """Up to ``n`` bytes from file offset ``start`` (fewer at EOF)."""
        self._fill(start + n)
        i = start - self._base
        return bytes(self._buf[i : i + n])

    def find_header(self, start: int, size: int) -> int | None:
        """The offset of the next sound block header at or after ``start``."""
        pos = start
        while pos < size:
            self._fill(min(size, pos + _READ_SIZE) + HEADER_BYTES)
            i = self._buf.find(_MAGIC_PREFIX, pos - self._base)
            if i < 0:
                top = self._base + len(self._buf)
                if self._eof or top >= size:
                    return None
                pos = top - 1  # the window's last byte may start the next prefix
                self.release(pos)
                continue
            cand = self._base + i
            if _sound_header(self.get(cand, HEADER_BYTES)) is not None:
                return cand
            pos = cand + 1
        return None

    def release(self, before: int) -> None:
        """Forget the window's bytes before file offset ``before``."""
        drop = before - self._base
        if drop > 0:
            del self._buf[:drop]
            self._base = before

    def drain(self) -> None:
        """Read the rest of the stream (for the whole-file checksum)."""
        self._base += len(self._buf)
        self._buf.clear()
        while not self._eof:
            chunk = self._f.read(_READ_SIZE)
            if not chunk:
                self._eof = True
                break
            self.crc = crc32c(chunk, self.crc)
            self._base += len(chunk)


def _sound_header(head: bytes) -> tuple[bytes, int, int, int] | None:
    """``(magic, payload bytes, records, payload crc)`` if ``head`` is a sound header."""
    if len(head) < HEADER_BYTES:
        return None
    magic, length, records, pcrc, hcrc = HEADER.unpack(head)
    if magic not in _MAGICS or crc32c(head[: _CHECKED.size]) != hcrc or length > MAX_BLOCK_BYTES:
        return None
    return magic, length, records, pcrc


def sniff_version(first: bytes) -> int:
    """2 for a framed log, 1 for schema 1, 0 for an empty file, from its first bytes."""
    if not first:
        return 0
    return UNFRAMED_VERSION if first[0] in _MAP_FIRST_BYTES else FRAMED_VERSION


def walk(
    f: Readable,
    name: str,
    size: int,
    report: FileReport,
    *,
    keep_payload: bool = True,
    on_v1_record: Callable[[int], None] | None = None,
) -> Iterator[Block]:
    """Walk one log of ``size`` bytes from its start, yielding its sound blocks.

    Schema 2: one :class:`Block` per sound data block (checksums verified).
    Schema 1: with ``keep_payload`` one :class:`Block` per record, else one
    for the whole run of complete records (``on_v1_record`` gets each
    record's offset).

    Everything else lands in ``report``: damage, a truncated tail, whether the
    file was closed, its version, size and whole-file checksum.

    Args:
        f: the stream, at its start.
        name: the path or URL for messages.
        size: the file's size.
        report: filled in as the walk goes.
        keep_payload: keep each block's bytes in :attr:`Block.payload`.
        on_v1_record: schema 1: called with each complete record's offset.
    """
    report.path = name
    report.size = size
    buf = _Buffered(f)
    report.version = sniff_version(buf.get(0, 1))
    if report.version == UNFRAMED_VERSION:
        yield from _walk_v1(buf, name, size, report, keep_payload, on_v1_record)
    elif report.version == FRAMED_VERSION:
        yield from _walk_v2(buf, name, size, report, keep_payload)
    buf.drain()
    report.checksum = f"{buf.crc:08x}"


def _walk_v2(
    buf: _Buffered, name: str, size: int, report: FileReport, keep_payload: bool
) -> Iterator[Block]:
    pos = 0
    closed = False  # the last thing read was a sound closing block
    while pos < size:
        closed = False
        head = buf.get(pos, HEADER_BYTES)
        sound = _sound_header(head)
        if sound is None:
            if len(head) < HEADER_BYTES and any(m.startswith(head[:4]) for m in _MAGICS):
                report.truncated_tail_bytes += size - pos  # a header cut short at the end
                break
            nxt = buf.find_header(pos + 1, size)
            end = size if nxt is None else nxt
            why = "bad block header" if head[:4] in _MAGICS else "bytes outside any block"
            report.damage.append(Damage(name, pos, end - pos, why))
            pos = end
            continue
        magic, length, records, pcrc = sound
        end = pos + HEADER_BYTES + length
        if end > size:
            report.truncated_tail_bytes += size - pos  # the writer died mid-block
            break
        payload = buf.get(pos + HEADER_BYTES, length)
        if crc32c(payload) != pcrc:
            nxt = buf.find_header(pos + HEADER_BYTES, size)
            stop = size if nxt is None else nxt
            what = "payload checksum mismatch" + (
                " (closing block)" if magic == CLOSE_MAGIC else ""
            )
            report.damage.append(
                Damage(name, pos, stop - pos, what, records if magic == BLOCK_MAGIC else None)
            )
            pos = stop
            continue
        buf.release(end)
        if magic == CLOSE_MAGIC:
            closed = True
        else:
            report.blocks += 1
            report.records += records
            yield Block(pos, end, records, payload if keep_payload else None)
        pos = end
    report.closed = closed


def _walk_v1(
    buf: _Buffered,
    name: str,
    size: int,
    report: FileReport,
    keep_payload: bool,
    on_record: Callable[[int], None] | None,
) -> Iterator[Block]:
    unpacker = msgpack.Unpacker(max_buffer_size=0)
    pos = 0
    fed = 0
    records = 0
    done = False
    while pos < size and not done:
        first = buf.get(pos, 1)
        if not first:
            break
        if first[0] not in _MAP_FIRST_BYTES:
            what = f"byte 0x{first[0]:02x} does not start an event map (schema 1: no framing)"
            report.damage.append(Damage(name, pos, size - pos, what))
            break
        while True:
            try:
                unpacker.skip()
                break
            except msgpack.OutOfData:
                chunk = buf.get(fed, _READ_SIZE)
                if not chunk:
                    report.truncated_tail_bytes += size - pos
                    done = True
                    break
                unpacker.feed(chunk)
                fed += len(chunk)
            except _UNPACK_ERRORS as exc:
                what = f"{str(exc) or type(exc).__name__} (schema 1: no framing)"
                report.damage.append(Damage(name, pos, size - pos, what))
                done = True
                break
        if done:
            break
        if on_record is not None:
            on_record(pos)
        end = unpacker.tell()
        records += 1
        if keep_payload:
            yield Block(pos, end, 1, buf.get(pos, end - pos))
        pos = end
        buf.release(pos)
    report.records = records
    if records and not keep_payload:
        yield Block(0, pos, records, None)
