"""A PySpark Python Data Source for the emulator's msgpack event logs.

``spark.read.format("rebalance-events").load(path)`` reads every ``*.msgpack``
log under ``path`` (a run directory, an events directory or one file; a local
path or a URL pyarrow understands, ``s3://`` ``gs://`` ``hdfs://``, see
:mod:`emulator.storage`) into the event table of
:func:`analysis.schema.spark_schema`: one column per field of
:data:`emulator.events.FIELDS` plus ``source_file``.

Planning. Each file is walked once on the planning side by
:func:`emulator.logformat.walk`: every block checksum is verified (schema 2),
no event is decoded. That finds the block (schema 1: record) boundaries, the
record count, a truncated tail, damage and whether the writer closed the log.
A file becomes one input partition per run of sound blocks, more when a run
is larger than ``segmentBytes`` (cut at block boundaries). :func:`load_events`
does the walk in the driver, so truncated tails, damage and unclosed logs are
known before any Spark job, and hands the plan to the data source in the
``plan`` option.

Reading. Each partition decodes exactly its planned blocks and yields Arrow
record batches of ``batchRows`` rows matching :func:`analysis.schema.arrow_schema`.
A log on remote storage carries its URL in the plan (``Segment.uri``) and is
opened through ``pyarrow.fs`` in the Spark Python worker that reads it.

Nothing is dropped silently:

* a truncated tail (a writer that died mid-write) is skipped; it is counted by
  :func:`load_events` (``LoadedEvents.truncated``), and a plain
  ``spark.read`` emits one marker row for it instead (kind
  :data:`TRUNCATED_KIND`, ``count`` = bytes skipped, ``offset_start`` = the
  byte offset where the tail starts, ``source_file``) unless the
  ``truncated`` option says ``skip`` or ``error``;
* a corrupt block (checksum mismatch), a bad block header or bytes outside any
  block are skipped and listed by :func:`load_events` (``LoadedEvents.damage``,
  path and byte offset each); a plain ``spark.read`` raises
  :class:`emulator.eventlog.CorruptEventLog` for them unless the ``damaged``
  option says ``skip``;
* a record that is not an event map, has a key that is not an event field, or
  a value of the wrong type raises :class:`~emulator.eventlog.CorruptEventLog`
  naming the path and the byte offset (of its block, schema 2).

Data source options (none are Kafka settings; they are this reader's knobs):
``segmentBytes`` (default 64 MiB, ``0`` = one partition per file),
``batchRows`` (default 16384), ``truncated`` (``marker`` | ``skip`` | ``error``),
``damaged`` (``error`` | ``skip``),
``protocols`` (comma list: only ``<run>/<protocol>/events``), ``plan`` (JSON
from :func:`plan_files`, set by :func:`load_events`), ``native`` (``auto`` |
``on`` | ``off``: the compiled decode of :mod:`analysis.native_decode`; ``auto``
uses it for segments of :data:`analysis.native_decode.NATIVE_MIN_BYTES` or
more, and :func:`load_events` chooses by the whole plan's size).
"""

from __future__ import annotations

import functools
import json
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgpack
import msgspec
import pyarrow as pa
from crc32c import crc32c
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from analysis import native_decode
from analysis.schema import SOURCE_FILE, arrow_schema, column_names, spark_schema
from emulator.eventlog import CorruptEventLog
from emulator.events import FIELDS
from emulator.logformat import (
    FRAMED_VERSION,
    HEADER,
    HEADER_BYTES,
    Block,
    Damage,
    FileReport,
    walk,
)
from emulator.storage import Location, StorageError, is_url, resolve

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from analysis.columnar import CacheReport

FORMAT: Final = "rebalance-events"
"""The data source's format name for ``spark.read.format``."""

TRUNCATED_KIND: Final = "_truncated"
"""``kind`` of the marker row a plain read emits for a skipped truncated tail."""

DEFAULT_SEGMENT_BYTES: Final = 64 * 1024 * 1024
DEFAULT_BATCH_ROWS: Final = 16384
_READ_SIZE: Final = 1 << 20
_UNPACK_ERRORS: Final = (msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, ValueError)


class EventLogError(ValueError):
    """A run directory that cannot be loaded: missing, empty, or a corrupt log file.

    The message is one line. ``path`` is the offending file or directory and
    ``offset`` the byte offset of the bad record (``None`` when not about a record).
    """

    def __init__(self, message: str, path: str, offset: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.offset = offset


@dataclass(frozen=True)
class Segment:
    """One input partition: a run of whole records of one file.

    Attributes:
        path: the file (absolute; for a remote file its URL without options,
            the name errors give).
        rel: the ``source_file`` value (path relative to the loaded directory).
        start: byte offset of the first record.
        end: byte offset just past the last record.
        records: number of records in ``[start, end)``.
        truncated: bytes of a truncated tail right after ``end`` (last segment
            of a file only, else 0).
        uri: a remote file's full URL (with its options), opened through
            ``pyarrow.fs``; ``""`` for a local file.
        framed: the file is schema 2 (checksummed blocks; ``start``/``end``
            are block boundaries), else schema 1 (plain records).
        tail_at: with ``truncated``, the byte offset where the tail starts.
    """

    path: str
    rel: str
    start: int
    end: int
    records: int
    truncated: int = 0
    uri: str = ""
    framed: bool = False
    tail_at: int = 0


class SegmentPartition(InputPartition):
    """The Spark input partition wrapping one :class:`Segment`."""

    def __init__(self, segment: Segment) -> None:
        super().__init__(asdict(segment))
        self.segment = segment


@dataclass
class FilePlan:
    """What the planning walk found in one file.

    ``report`` holds the walk's findings: version, damage (corrupt blocks,
    stray bytes), whether the writer closed the log, the whole-file checksum.
    """

    path: str
    rel: str
    size: int
    records: int
    segments: list[Segment] = field(default_factory=list)
    truncated_at: int | None = None
    truncated_bytes: int = 0
    report: FileReport = field(default_factory=lambda: FileReport(""))


def _open_uri(uri: str) -> Any:
    """A remote file, opened for random access through ``pyarrow.fs``."""
    loc = resolve(uri)
    return loc.open_input("")


def plan_file(
    path: str | Path, rel: str, segment_bytes: int = DEFAULT_SEGMENT_BYTES, uri: str = ""
) -> FilePlan:
    """Walk one log file without decoding its events (see :func:`emulator.logformat.walk`).

    Every checksum is verified here; corrupt blocks and stray bytes go to the
    plan's ``report.damage`` and are left out of the segments, so a damaged
    file is read around its damage, never dropped from there on.

    Args:
        path: the file (with ``uri``: its name for messages).
        rel: its ``source_file`` name.
        segment_bytes: cut into segments of about this many bytes at block
            (schema 1: record) boundaries; ``0`` keeps each sound run whole.
        uri: a remote file's URL: it is read as a stream through ``pyarrow.fs``.

    Raises:
        StorageError: a remote file that cannot be read.
    """
    p = str(path)
    if uri:
        with _open_uri(uri) as f:
            return _plan_stream(f, p, rel, int(f.size()), segment_bytes, uri)
    with open(p, "rb") as f:
        return _plan_stream(f, p, rel, os.fstat(f.fileno()).st_size, segment_bytes)


def _plan_stream(
    f: Any, p: str, rel: str, size: int, segment_bytes: int, uri: str = ""
) -> FilePlan:
    """:func:`plan_file` over a stream read once from its start."""
    plan = FilePlan(path=p, rel=rel, size=size, records=0)
    limit = segment_bytes if segment_bytes > 0 else size + 1
    starts: list[int] = []  # schema 1: every record's offset
    blocks = list(walk(f, p, size, plan.report, keep_payload=False, on_v1_record=starts.append))
    rep = plan.report
    framed = rep.version == FRAMED_VERSION
    if not framed and blocks:  # schema 1: cut the run of records at record boundaries
        (run,) = blocks
        cuts = [*starts, run.end]
        blocks = []
        first = 0
        for i in range(1, len(cuts)):
            if cuts[i] - cuts[first] >= limit or i == len(cuts) - 1:
                blocks.append(Block(cuts[first], cuts[i], i - first, None))
                first = i
    seg: list[Block] = []

    def cut() -> None:
        if seg:
            plan.segments.append(
                Segment(
                    p,
                    rel,
                    seg[0].offset,
                    seg[-1].end,
                    sum(b.records for b in seg),
                    uri=uri,
                    framed=framed,
                )
            )
            seg.clear()

    for b in blocks:
        if seg and (b.offset != seg[-1].end or b.end - seg[0].offset > limit):
            cut()
        seg.append(b)
    cut()
    plan.records = rep.records
    if rep.truncated_tail_bytes:
        plan.truncated_bytes = rep.truncated_tail_bytes
        plan.truncated_at = size - rep.truncated_tail_bytes
        if not plan.segments:
            plan.segments.append(Segment(p, rel, 0, 0, 0, uri=uri, framed=framed))
        last = plan.segments[-1]
        plan.segments[-1] = replace(last, truncated=plan.truncated_bytes, tail_at=plan.truncated_at)
    return plan


def _remote_root(root: str | Path) -> Location | None:
    """The location of a URL that is not on this machine's filesystem, else None."""
    if not (isinstance(root, str) and is_url(root)):
        return None
    try:
        loc = resolve(root)
    except StorageError as exc:
        raise EventLogError(str(exc), root) from None
    return None if loc.local_path is not None else loc


def _local_root(root: str | Path) -> Path:
    """A local path, or the path of a ``file://`` URL."""
    if isinstance(root, str) and is_url(root):
        try:
            local = resolve(root).local_path
        except StorageError as exc:
            raise EventLogError(str(exc), root) from None
        if local is not None:
            return local
    return Path(root)


def plan_remote(
    loc: Location,
    protocols: Sequence[str] | None = None,
    segment_bytes: int = DEFAULT_SEGMENT_BYTES,
) -> list[FilePlan]:
    """Find and plan the logs of a run directory on remote storage (see :func:`find_logs`).

    Raises:
        EventLogError: unreachable storage, a requested protocol without logs,
            or a corrupt log.
    """
    try:
        if protocols:
            rels: list[str] = []
            for proto in protocols:
                found = loc.list_files(f"{proto}/events", ".msgpack")
                if not found:
                    raise EventLogError(
                        f"no event logs for protocol {proto!r} in {loc.display()}",
                        loc.display(f"{proto}/events"),
                    )
                rels.extend(found)
        else:
            rels = loc.event_logs() or loc.list_files("", ".msgpack", recursive=True)
        return [
            plan_file(loc.display(rel), rel, segment_bytes, uri=loc.child_uri(rel)) for rel in rels
        ]
    except StorageError as exc:
        raise EventLogError(str(exc), loc.display()) from None
    except CorruptEventLog as exc:
        raise EventLogError(str(exc), exc.path, exc.offset) from None


def find_logs(root: str | Path, protocols: Sequence[str] | None = None) -> list[Path]:
    """The log files under ``root``, sorted.

    ``root`` may be a file; a run directory (``<protocol>/events/*.msgpack``);
    or any directory (every ``*.msgpack`` below it). With ``protocols`` only
    ``<root>/<protocol>/events/*.msgpack`` of those protocols.

    Raises:
        EventLogError: ``root`` does not exist, or a requested protocol has no
            events directory.
    """
    r = _local_root(root)
    if r.is_file():
        return [r]
    if not r.is_dir():
        raise EventLogError(f"no such run directory: {r}", str(r))
    if protocols:
        out: list[Path] = []
        for proto in protocols:
            d = r / proto / "events"
            if not d.is_dir():
                raise EventLogError(f"no event logs for protocol {proto!r} in {r}", str(d))
            out.extend(sorted(d.glob("*.msgpack")))
        return out
    layout = sorted(r.glob("*/events/*.msgpack"))
    return layout if layout else sorted(r.rglob("*.msgpack"))


def plan_files(
    root: str | Path, files: Sequence[Path], segment_bytes: int = DEFAULT_SEGMENT_BYTES
) -> list[FilePlan]:
    """Plan every file (see :func:`plan_file`); ``source_file`` is relative to ``root``."""
    base = Path(root)
    base = base.parent if base.is_file() else base
    plans = []
    for f in files:
        try:
            rel = str(f.relative_to(base))
        except ValueError:
            rel = str(f)
        plans.append(plan_file(f, rel, segment_bytes))
    return plans


def _plan_from_json(text: str) -> list[Segment]:
    return [Segment(**d) for d in json.loads(text)]


class RebalanceEventsDataSource(DataSource):
    """``spark.read.format("rebalance-events")``: the emulator's event logs (see module doc)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        return spark_schema()

    def reader(self, schema: StructType) -> DataSourceReader:
        return RebalanceEventsReader(dict(self.options))


class RebalanceEventsReader(DataSourceReader):
    """Plans segments and decodes them into Arrow batches."""

    def __init__(self, options: dict[str, str]) -> None:
        opts = {k.lower(): v for k, v in options.items()}
        self.path = opts.get("path", "")
        self.segment_bytes = int(opts.get("segmentbytes", DEFAULT_SEGMENT_BYTES))
        self.batch_rows = max(1, int(opts.get("batchrows", DEFAULT_BATCH_ROWS)))
        self.truncated = opts.get("truncated", "marker")
        if self.truncated not in ("marker", "skip", "error"):
            raise ValueError(f"truncated option must be marker|skip|error, not {self.truncated!r}")
        self.damaged = opts.get("damaged", "error")
        if self.damaged not in ("skip", "error"):
            raise ValueError(f"damaged option must be skip|error, not {self.damaged!r}")
        self.native = opts.get("native", "auto")
        if self.native not in ("auto", "on", "off"):
            raise ValueError(f"native option must be auto|on|off, not {self.native!r}")
        protos = opts.get("protocols", "")
        self.protocols = [p for p in protos.split(",") if p] or None
        self.plan = opts.get("plan")

    def partitions(self) -> Sequence[InputPartition]:
        if self.plan is not None:
            segments = _plan_from_json(self.plan)
        else:
            if not self.path:
                raise EventLogError("rebalance-events needs a path to load", "")
            remote = _remote_root(self.path)
            if remote is not None:
                plans = plan_remote(remote, self.protocols, self.segment_bytes)
            else:
                root = _local_root(self.path)
                plans = plan_files(root, find_logs(root, self.protocols), self.segment_bytes)
            segments = [s for p in plans for s in p.segments]
            if self.damaged == "error":
                for p in plans:
                    for d in p.report.damage:
                        raise CorruptEventLog(d.path, d.offset, d.what)
        if self.truncated == "error":
            for s in segments:
                if s.truncated:
                    raise CorruptEventLog(
                        s.path, s.tail_at or s.end, f"truncated last record ({s.truncated} bytes)"
                    )
        return [SegmentPartition(s) for s in segments]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        seg = partition.segment if isinstance(partition, SegmentPartition) else None
        if seg is None:
            seg = Segment(**partition.value)
        native = (
            native_decode.wanted(seg.end - seg.start)
            if self.native == "auto"
            else self.native == "on"
        )
        yield from read_segment(seg, self.batch_rows, native=native)
        if seg.truncated and self.truncated == "marker":
            yield _marker_batch(seg)


def _marker_batch(seg: Segment) -> pa.RecordBatch:
    cols: dict[str, list[Any]] = {name: [None] for name in column_names()}
    cols["kind"] = [TRUNCATED_KIND]
    cols["count"] = [seg.truncated]
    cols["offset_start"] = [seg.tail_at or seg.end]
    cols["detail"] = [f"truncated last record of {seg.path}: {seg.truncated} bytes skipped"]
    cols[SOURCE_FILE] = [seg.rel]
    return pa.RecordBatch.from_pydict(cols, schema=arrow_schema())


def _segment_blocks(seg: Segment, f: Any) -> Iterator[tuple[int, int, bytes]]:
    """``(byte offset, records, payload)`` for each block of a schema-2 segment.

    Checksums are verified again: a file changed since it was planned is
    named, not misread.
    """
    pos = seg.start
    while pos < seg.end:
        head = f.read(HEADER_BYTES)
        if len(head) < HEADER_BYTES:
            raise CorruptEventLog(seg.path, pos, "file is shorter than when it was planned")
        _magic, length, records, pcrc, _hcrc = HEADER.unpack(head)
        payload = f.read(length)
        if len(payload) < length or crc32c(payload) != pcrc:
            raise CorruptEventLog(seg.path, pos, "block changed since it was planned")
        yield pos, records, payload
        pos += HEADER_BYTES + length


def _block_records(seg: Segment, pos: int, records: int, payload: bytes) -> Iterator[Any]:
    """The decoded records of one schema-2 block (``pos``: its offset, for errors)."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=0)
    unpacker.feed(payload)
    n = 0
    try:
        for obj in unpacker:
            n += 1
            yield obj
    except _UNPACK_ERRORS as exc:
        raise CorruptEventLog(seg.path, pos, str(exc) or type(exc).__name__) from None
    if n != records:
        raise CorruptEventLog(seg.path, pos, f"block holds {n} events, header says {records}")


def _segment_records(seg: Segment, f: Any) -> Iterator[tuple[int, Any]]:
    """``(byte offset, decoded record)`` for each record of a segment, from ``f`` at its start.

    Schema 2: the block's offset for each of its records.
    """
    if seg.framed:
        for pos, records, payload in _segment_blocks(seg, f):
            for obj in _block_records(seg, pos, records, payload):
                yield pos, obj
        return
    unpacker = msgpack.Unpacker(f, raw=False, strict_map_key=False, read_size=_READ_SIZE)
    for _ in range(seg.records):
        pos = seg.start + unpacker.tell()
        try:
            obj = unpacker.unpack()
        except msgpack.OutOfData:
            raise CorruptEventLog(
                seg.path, pos, "file is shorter than when it was planned"
            ) from None
        except _UNPACK_ERRORS as exc:
            raise CorruptEventLog(seg.path, pos, str(exc) or type(exc).__name__) from None
        yield pos, obj
    end = seg.start + unpacker.tell()
    if end != seg.end:
        raise CorruptEventLog(seg.path, end, f"records end at byte {end}, planned {seg.end}")


_PY_TYPES: Final[dict[str, type]] = {"long": int, "double": float, "string": str, "boolean": bool}


@functools.cache
def _block_decoder() -> tuple[msgspec.msgpack.Decoder[list[Any]], list[int]]:
    """A typed msgspec decoder of a block as one array of event structs, and
    each event column's position in the struct's field order.

    The struct takes only what the plain decoder would turn into the same row:
    known fields, values of their column's type (``kind`` required), so any
    record it refuses is decoded again the plain way, which names the problem.
    """
    fields: list[Any] = [
        (f.name, _PY_TYPES[f.type])
        if f.name == "kind"
        else (f.name, _PY_TYPES[f.type] | None, None)
        for f in FIELDS
    ]
    struct = msgspec.defstruct("EventRecord", fields, kw_only=True, forbid_unknown_fields=True)
    order = list(struct.__struct_fields__)
    decoder = msgspec.msgpack.Decoder(list[struct])  # type: ignore[valid-type]
    return decoder, [order.index(n) for n in column_names()[:-1]]


def _fast_block_columns(records: int, payload: bytes) -> list[Sequence[Any]] | None:
    """One block's event columns decoded by msgspec, or ``None`` when it refuses
    anything (then :func:`_block_records` decodes the block and names the fault)."""
    decoder, positions = _block_decoder()
    try:
        # The block is ``records`` maps back to back: with an array32 header in
        # front, it decodes as one array in one call.
        events = decoder.decode(b"\xdd" + records.to_bytes(4, "big") + payload)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if len(events) != records:
        return None
    if not events:
        return [() for _ in positions]
    by_field = list(zip(*map(msgspec.structs.astuple, events), strict=True))
    return [by_field[i] for i in positions]


def read_segment(
    seg: Segment, batch_rows: int = DEFAULT_BATCH_ROWS, *, native: bool = False
) -> Iterator[pa.RecordBatch]:
    """Decode one segment's records into Arrow batches of the event schema
    (``batch_rows`` rows each, the last one fewer).

    Schema-2 blocks are decoded by msgspec straight into typed structs and
    transposed into columns; a block it refuses is decoded record by record,
    which finds and names the fault. With ``native``, whole blocks of about
    ``batch_rows`` records together are first given to the compiled decode
    (:mod:`analysis.native_decode`), and each such batch holds whole blocks (at
    least ``batch_rows`` rows, the last fewer); what it refuses is decoded as
    above, so the rows and the errors are the same.

    Raises:
        CorruptEventLog: a record that is not an event map, has a key that is
            not an event field or a value of the wrong type, or a file that no
            longer matches its plan; named by path and byte offset.
    """
    native = native and native_decode.available()  # without numba: the Python decode
    schema = arrow_schema()
    names = column_names()
    event_names = names[:-1]
    types = [schema.field(n).type for n in event_names]
    try:
        opened = _open_uri(seg.uri) if seg.uri else open(seg.path, "rb")  # noqa: SIM115
    except StorageError as exc:
        raise CorruptEventLog(seg.path, seg.start, f"cannot open: {exc}") from None
    pending: list[list[Any]] = [[] for _ in event_names]
    offsets: list[int] = []  # each pending row's byte offset (its block's, schema 2)
    done = 0

    def batch(n: int) -> pa.RecordBatch:
        arrays = []
        for name, typ, col in zip(event_names, types, pending, strict=True):
            values = col[:n]
            try:
                arrays.append(pa.array(values, type=typ))
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
                i = _first_bad(values, typ)
                raise CorruptEventLog(
                    seg.path, offsets[i], f"field {name!r} is not {typ}: {values[i]!r}"
                ) from None
            del col[:n]
        del offsets[:n]
        arrays.append(pa.array([seg.rel] * n, type=pa.string()))
        return pa.RecordBatch.from_arrays(arrays, schema=schema)

    def add(pos: int, obj: Any) -> None:
        if type(obj) is not dict or "kind" not in obj:
            raise CorruptEventLog(
                seg.path, pos, f"record is a {type(obj).__name__}, not an event map"
            )
        row = len(offsets)
        offsets.append(pos)
        for col in pending:
            col.append(None)
        try:
            for k, v in obj.items():
                pending[index[k]][row] = v
        except (KeyError, TypeError):
            bad = sorted(str(k) for k in obj if k not in index)
            raise CorruptEventLog(seg.path, pos, f"unknown event field {bad[0]!r}") from None

    def add_block(pos: int, records: int, payload: bytes) -> None:
        cols = _fast_block_columns(records, payload)
        if cols is None:
            for obj in _block_records(seg, pos, records, payload):
                add(pos, obj)
        else:
            for col, values in zip(pending, cols, strict=True):
                col.extend(values)
            offsets.extend([pos] * records)

    index = {n: i for i, n in enumerate(event_names)}
    with opened as f:
        f.seek(seg.start)
        if seg.framed and native:
            group: list[tuple[int, int, bytes]] = []
            grouped = 0
            blocks = _segment_blocks(seg, f)
            while True:
                block = next(blocks, None)
                if block is not None:
                    group.append(block)
                    grouped += block[1]
                    if grouped < batch_rows:
                        continue
                if not group:
                    break
                decoded = native_decode.decode_records(
                    b"".join(g[2] for g in group), grouped, seg.rel
                )
                if decoded is not None:
                    done += grouped
                    yield decoded
                else:  # the Python decode: the same rows, or the fault named
                    for g in group:
                        add_block(*g)
                    while offsets:
                        rows = min(batch_rows, len(offsets))
                        done += rows
                        yield batch(rows)
                group, grouped = [], 0
                if block is None:
                    break
        elif seg.framed:
            for pos, records, payload in _segment_blocks(seg, f):
                add_block(pos, records, payload)
                while len(offsets) >= batch_rows:
                    done += batch_rows
                    yield batch(batch_rows)
        else:
            for pos, obj in _segment_records(seg, f):
                add(pos, obj)
                if len(offsets) >= batch_rows:
                    done += batch_rows
                    yield batch(batch_rows)
    if offsets:
        done += len(offsets)
        yield batch(len(offsets))
    if done != seg.records:
        raise CorruptEventLog(
            seg.path, seg.end, f"segment holds {done} events, {seg.records} when it was planned"
        )


def _first_bad(values: list[Any], typ: pa.DataType) -> int:
    for i, v in enumerate(values):
        try:
            pa.array([v], type=typ)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
            return i
    return 0


@dataclass
class LoadedEvents:
    """A run's events as a DataFrame, with what loading found.

    Attributes:
        events: the event table (:func:`analysis.schema.spark_schema`).
        manifest: the run's ``manifest.json`` (empty when there is none).
        plan_s: seconds the driver spent walking the files.
        plans: every file's plan, with what its walk found (``plan.report``:
            damage, closed or not, checksum).
        cache: what the columnar cache did (:mod:`analysis.columnar`), when
            the events were read from it; else ``None``.
        cache_note: why the columnar cache was not used, when it was asked
            for and could not be (remote storage, a directory not writable).
    """

    events: DataFrame
    manifest: dict[str, Any]
    plan_s: float = 0.0
    plans: list[FilePlan] = field(default_factory=list)
    cache: CacheReport | None = None
    cache_note: str = ""

    @property
    def files(self) -> int:
        """Number of log files read."""
        return len(self.plans)

    @property
    def truncated(self) -> list[tuple[str, int]]:
        """``(source_file, bytes skipped)`` for every file whose last record was cut short."""
        return [(p.rel, p.truncated_bytes) for p in self.plans if p.truncated_bytes]

    @property
    def records(self) -> int:
        """Number of complete records planned (= ``events.count()``)."""
        return sum(p.records for p in self.plans)

    @property
    def segments(self) -> int:
        """Number of input partitions (of the data source)."""
        return sum(len(p.segments) for p in self.plans)

    @property
    def damage(self) -> list[Damage]:
        """Every unreadable region of every file (skipped; the rest was read)."""
        return [d for p in self.plans for d in p.report.damage]


def load_events(
    spark: SparkSession,
    run_dir: str | Path,
    protocols: Sequence[str] | None = None,
    *,
    segment_bytes: int = DEFAULT_SEGMENT_BYTES,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    columnar: bool = False,
    progress: Callable[[str], None] | None = None,
) -> LoadedEvents:
    """Load a run directory's event logs through the ``rebalance-events`` data
    source, or with ``columnar`` through the run's columnar cache.

    The driver walks every file first (see :func:`plan_file`): truncated tails
    are counted here and framing corruption raises before any Spark job.
    With ``columnar``, the logs of a local, writable run directory are decoded
    into Parquet once and read back by Spark's own scanner (see
    :mod:`analysis.columnar`; the rows are the same); elsewhere
    ``LoadedEvents.cache_note`` says why the data source read them instead.

    Args:
        spark: a session from :func:`analysis.spark.get_spark` (the source is
            registered here if it is not yet).
        run_dir: the run directory (``manifest.json``, ``<protocol>/events/``),
            or any directory holding ``*.msgpack`` logs; a local path or a URL
            (``s3://``, ``gs://``, ``hdfs://``, ``file://``).
        protocols: only these protocols' logs (``<run>/<protocol>/events``).
        segment_bytes: split files larger than this (``0``: one partition per file).
        batch_rows: rows per Arrow batch.
        columnar: read through the columnar cache where there can be one.
        progress: called with a line when the cache decodes logs.

    Raises:
        EventLogError: no such directory, no logs, a requested protocol without
            logs, a corrupt log (message names path and byte offset), or a
            columnar cache that cannot be written.
    """
    remote = _remote_root(run_dir)
    if remote is not None:
        loaded = _load_remote(spark, remote, protocols, segment_bytes, batch_rows)
        if columnar:
            loaded.cache_note = "run on remote storage: read through the data source"
        return loaded
    root = _local_root(run_dir)
    plans, manifest, plan_s = _plan_local(root, protocols, segment_bytes)
    if not columnar:
        return _loaded(spark, str(root), plans, manifest, plan_s, batch_rows)
    base = root if root.is_dir() else root.parent
    cached = _from_cache(spark, base, plans, progress)
    if isinstance(cached, str):
        loaded = _loaded(spark, str(root), plans, manifest, plan_s, batch_rows)
        loaded.cache_note = f"no columnar cache ({cached}): read through the data source"
        return loaded
    events, report = cached
    loaded = _loaded(spark, str(root), plans, manifest, plan_s, batch_rows, events)
    loaded.cache = report
    return loaded


def _plan_local(
    root: Path, protocols: Sequence[str] | None, segment_bytes: int
) -> tuple[list[FilePlan], dict[str, Any], float]:
    """A local run's plans, its manifest (empty when there is none) and the
    planning's seconds.

    Raises:
        EventLogError: no such directory, no logs, a requested protocol
            without logs, an unreadable manifest or a corrupt log.
    """
    files = find_logs(root, protocols)
    if not files:
        raise EventLogError(f"no event logs (*.msgpack) under {root}", str(root))
    manifest: dict[str, Any] = {}
    mpath = root / "manifest.json"
    if mpath.is_file():
        try:
            manifest = json.loads(mpath.read_text())
        except ValueError as exc:
            raise EventLogError(f"unreadable manifest {mpath}: {exc}", str(mpath)) from None
    t0 = time.perf_counter()
    try:
        plans = plan_files(root, files, segment_bytes)
    except CorruptEventLog as exc:
        raise EventLogError(str(exc), exc.path, exc.offset) from None
    return plans, manifest, time.perf_counter() - t0


def _from_cache(
    spark: SparkSession,
    base: Path,
    plans: Sequence[FilePlan],
    progress: Callable[[str], None] | None,
) -> tuple[DataFrame, CacheReport] | str:
    """The planned logs read through ``base``'s columnar cache, or why there is none.

    Raises:
        EventLogError: a log that changed since it was planned or holds a bad
            record, or a cache that cannot be written.
    """
    from analysis.columnar import cache_dir_for, refresh

    cache, why = cache_dir_for(base)
    if cache is None:
        return why
    try:
        paths, report = refresh(cache, base, plans, progress)
    except CorruptEventLog as exc:
        raise EventLogError(str(exc), exc.path, exc.offset) from None
    except OSError as exc:
        raise EventLogError(f"cannot write the columnar cache {cache}: {exc}", str(cache)) from None
    return spark.read.schema(spark_schema()).parquet(*map(str, paths)), report


RUN_COLUMN: Final = "run"
"""The column :func:`load_runs` adds: the run directory's name."""


def load_runs(
    spark: SparkSession,
    run_dirs: Sequence[Path],
    *,
    columnar: bool = False,
    progress: Callable[[str], None] | None = None,
) -> tuple[DataFrame, dict[str, LoadedEvents]]:
    """Many local run directories as one event table, with their name as
    :data:`RUN_COLUMN`; and each run's own :class:`LoadedEvents` (its
    ``events`` the table's rows of that run). See :func:`plan_runs` and
    :func:`read_runs`.

    Raises:
        EventLogError: two runs with one name, or what :func:`load_events` raises.
    """
    runs = plan_runs(run_dirs)
    return read_runs(spark, run_dirs, runs, columnar=columnar, progress=progress), runs


def plan_runs(run_dirs: Sequence[Path]) -> dict[str, LoadedEvents]:
    """Each local run directory planned (by its name), nothing read yet: its
    ``events`` are set by :func:`read_runs`.

    Raises:
        EventLogError: two runs with one name, or what :func:`load_events` raises.
    """
    names = [Path(d).name for d in run_dirs]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise EventLogError(f"two run directories are named {dup!r}", dup)
    runs: dict[str, LoadedEvents] = {}
    for d, name in zip(run_dirs, names, strict=True):
        plans, manifest, plan_s = _plan_local(Path(d), None, DEFAULT_SEGMENT_BYTES)
        runs[name] = LoadedEvents(
            events=None,  # type: ignore[arg-type]  # set by read_runs
            manifest=manifest,
            plan_s=plan_s,
            plans=plans,
        )
    return runs


def read_runs(
    spark: SparkSession,
    run_dirs: Sequence[Path],
    runs: Mapping[str, LoadedEvents],
    *,
    columnar: bool = False,
    progress: Callable[[str], None] | None = None,
) -> DataFrame:
    """The planned runs (:func:`plan_runs`) as one event table with :data:`RUN_COLUMN`.

    Through the data source, the runs' segments are one plan: one read, not
    one per run. With ``columnar``, each run's cache is brought up to date and
    their Parquet files are read together (a run whose directory cannot hold
    a cache sends them all through the data source, and every run's
    ``cache_note`` says why).

    Raises:
        EventLogError: a log that changed since it was planned, or a cache
            that cannot be written.
    """
    from pyspark.sql import functions as F

    names = [Path(d).name for d in run_dirs]
    table: DataFrame | None = None
    if columnar:
        parts: list[DataFrame] = []
        for d, name in zip(run_dirs, names, strict=True):
            cached = _from_cache(spark, Path(d), runs[name].plans, progress)
            if isinstance(cached, str):
                for r in runs.values():
                    r.cache = None
                    r.cache_note = (
                        f"no columnar cache for {name} ({cached}): all runs read "
                        "through the data source"
                    )
                break
            parts.append(cached[0].withColumn(RUN_COLUMN, F.lit(name)))
            runs[name].cache = cached[1]
        else:
            table = parts[0]
            for part in parts[1:]:
                table = table.unionByName(part)
    if table is None:
        # one plan: each segment's source_file is "<run>/<file>", cut apart below
        segments = [
            replace(s, rel=f"{name}/{s.rel}")
            for name in names
            for p in runs[name].plans
            for s in p.segments
        ]
        table = (
            _reader(spark, segments, DEFAULT_BATCH_ROWS)
            .load(str(Path(run_dirs[0]).parent))
            .withColumn(RUN_COLUMN, F.substring_index(F.col(SOURCE_FILE), "/", 1))
            .withColumn(SOURCE_FILE, F.expr(f"substring({SOURCE_FILE}, length({RUN_COLUMN}) + 2)"))
        )
    for name in names:
        runs[name].events = table.where(F.col(RUN_COLUMN) == name).drop(RUN_COLUMN)
    return table


def _load_remote(
    spark: SparkSession,
    loc: Location,
    protocols: Sequence[str] | None,
    segment_bytes: int,
    batch_rows: int,
) -> LoadedEvents:
    """:func:`load_events` of a run directory on remote storage."""
    t0 = time.perf_counter()
    plans = plan_remote(loc, protocols, segment_bytes)
    plan_s = time.perf_counter() - t0
    if not plans:
        raise EventLogError(f"no event logs (*.msgpack) under {loc.display()}", loc.display())
    manifest: dict[str, Any] = {}
    try:
        if loc.is_file("manifest.json"):
            manifest = json.loads(loc.read_text("manifest.json"))
    except StorageError as exc:
        raise EventLogError(str(exc), loc.display("manifest.json")) from None
    except ValueError as exc:
        where = loc.display("manifest.json")
        raise EventLogError(f"unreadable manifest {where}: {exc}", where) from None
    return _loaded(spark, loc.display(), plans, manifest, plan_s, batch_rows)


def _loaded(
    spark: SparkSession,
    root: str,
    plans: Sequence[FilePlan],
    manifest: dict[str, Any],
    plan_s: float,
    batch_rows: int,
    events: DataFrame | None = None,
) -> LoadedEvents:
    """The loaded run: ``events`` when they were read another way, else the
    data source's read of the plans."""
    df = (
        events
        if events is not None
        else _reader(spark, [s for p in plans for s in p.segments], batch_rows).load(root)
    )
    return LoadedEvents(events=df, manifest=manifest, plan_s=plan_s, plans=list(plans))


def _reader(spark: SparkSession, segments: Sequence[Segment], batch_rows: int) -> Any:
    """The data source's reader of planned segments: tails and damage skipped
    (the plans list them), the event schema given, the compiled decode chosen
    for their total size (:func:`analysis.native_decode.wanted`)."""
    plan = json.dumps([asdict(s) for s in segments])
    total_bytes = sum(s.end - s.start for s in segments)
    _ensure_registered(spark)
    return (
        spark.read.format(FORMAT)
        .schema(spark_schema())
        .option("plan", plan)
        .option("truncated", "skip")
        .option("damaged", "skip")
        .option("batchRows", str(batch_rows))
        .option("native", "on" if native_decode.wanted(total_bytes) else "off")
    )


def _ensure_registered(spark: SparkSession) -> None:
    spark.dataSource.register(RebalanceEventsDataSource)


_CORRUPT_RE: Final = re.compile(r"corrupt event log (\S+) at byte (\d+): ([^\n]*)")


def event_log_error(exc: BaseException) -> EventLogError | None:
    """The :class:`EventLogError` inside an exception from a Spark job, if there is one.

    A corrupt record met inside a Spark task reaches the driver as a Spark
    exception whose text holds the Python traceback; this pulls the one-line
    ``corrupt event log <path> at byte <offset>: <why>`` back out.
    """
    if isinstance(exc, EventLogError):
        return exc
    if isinstance(exc, CorruptEventLog):
        return EventLogError(str(exc), exc.path, exc.offset)
    m = _CORRUPT_RE.search(str(exc))
    if m is None:
        return None
    return EventLogError(m.group(0), m.group(1), int(m.group(2)))
