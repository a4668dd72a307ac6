"""Event blocks decoded straight into Arrow columns by compiled code (numba).

The data source's Python path (:func:`analysis.datasource.read_segment`)
decodes each block with msgspec into one typed struct per event, transposes
the structs into a list per column and lets pyarrow build the columns from
those lists: about three quarters of its time goes to the Python objects, not
to msgpack (measured in ``tests/bench/bench_analysis.py``). This module parses
the same bytes with a kernel that numba compiles to machine code and writes
each value into its column's NumPy buffer (numbers, a validity byte, and each
string's place in the input); a second kernel copies the strings into each
column's Arrow data buffer. The buffers become Arrow arrays without a copy.

It accepts only what the Python path turns into the same rows: a record is a
msgpack map whose keys are event field names (each at most once) and whose
values are nil or of the field's type (an integer for ``long``; a float or an
integer for ``double``; a string for ``string``; a boolean for ``boolean``),
``kind`` present and a string, the records filling the buffer exactly, the
strings valid UTF-8. Anything else makes :func:`decode_records` return
``None``, and the caller decodes those blocks the Python way, which either
reads them the same or names the fault. ``tests/unit/test_native_decode.py``
holds the two paths to the same rows.

numba compiles the kernels on their first use in a process (about 4 s) and
keeps the machine code in its cache (``__pycache__`` beside this file when it
is writable, else numba's user-wide cache); a later process loads it in about
0.3 s, plus 0.4 s to import numba. ``python -m analysis.native_decode``
compiles them ahead (``deploy/local.sh setup`` does). The environment variable
``REBALANCE_EMU_NATIVE_DECODE`` set to ``off`` turns this path off, ``on``
uses it for any size (by default only for reads of at least
:data:`NATIVE_MIN_BYTES`, where it pays for the import).
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import time
from typing import Any, Final

import numpy as np
import pyarrow as pa

from analysis.schema import arrow_schema
from emulator.events import FIELDS

__all__ = [
    "ENV",
    "NATIVE_MIN_BYTES",
    "available",
    "decode_records",
    "wanted",
]

log = logging.getLogger(__name__)

ENV: Final = "REBALANCE_EMU_NATIVE_DECODE"
"""``off``: never; ``on``: always; unset or ``auto``: reads of :data:`NATIVE_MIN_BYTES` or more."""

NATIVE_MIN_BYTES: Final = 64 * 1024 * 1024
"""Below this many bytes of logs a read keeps the Python decode. The compiled
path costs each process that uses it ~0.7 s once (numba's import, 0.4 s, and
loading the cached kernels, 0.3 s); it decodes a MB of logs ~19 ms faster
(measured on ``bench_analysis.py``'s logs: 1.10 M against 190 k events per
CPU second, ~4,400 events a MB), so it repays that after ~37 MB in one
process: a read of this size on two workers about breaks even, and gains
from there."""

_LONG, _DOUBLE, _STRING, _BOOL = 0, 1, 2, 3
_CODES: Final = {"long": _LONG, "double": _DOUBLE, "string": _STRING, "boolean": _BOOL}
_ARROW: Final = {_LONG: pa.int64(), _DOUBLE: pa.float64(), _STRING: pa.string(), _BOOL: pa.bool_()}
_MAX_BUFFER: Final = (1 << 31) - 1  # Arrow's string offsets are 32-bit


def wanted(total_bytes: int) -> bool:
    """Whether a read of ``total_bytes`` of logs should use the compiled decode."""
    mode = os.environ.get(ENV, "auto").strip().lower()
    if mode == "off":
        return False
    if mode == "on":
        return True
    return total_bytes >= NATIVE_MIN_BYTES


class _Layout:
    """The event fields as the kernels see them: each field's type code, its
    slot among the fields of that type, and its name's bytes for the key match."""

    def __init__(self) -> None:
        names = [f.name for f in FIELDS]
        self.names = names
        self.types = np.array([_CODES[f.type] for f in FIELDS], np.int64)
        self.slots = np.zeros(len(names), np.int64)
        self.counts = [0, 0, 0, 0]
        for i, code in enumerate(self.types):
            self.slots[i] = self.counts[code]
            self.counts[code] += 1
        width = max(len(n.encode()) for n in names)
        self.keys = np.zeros((len(names), width), np.uint8)
        # first[length, first byte] -> a field with that key length and first
        # byte; chain[field] -> the next such field (-1: none).
        self.first = np.full((width + 1, 256), -1, np.int64)
        self.chain = np.full(len(names), -1, np.int64)
        for i in range(len(names) - 1, -1, -1):
            raw = names[i].encode()
            self.keys[i, : len(raw)] = np.frombuffer(raw, np.uint8)
            self.chain[i] = self.first[len(raw), raw[0]]
            self.first[len(raw), raw[0]] = i
        self.kind = names.index("kind")
        self.schema = arrow_schema()


@functools.cache
def _layout() -> _Layout:
    return _Layout()


@functools.cache
def _kernels() -> tuple[Any, Any] | None:
    """The compiled ``(decode, gather)`` kernels, or ``None`` when numba is missing."""
    try:
        import numba
    except ImportError as exc:  # pragma: no cover - numba is a dependency
        log.warning("numba is not importable (%s): event blocks decode in Python", exc)
        return None
    return _compiled(numba, _decode_kernel), _compiled(numba, _gather_kernel)


def _compiled(numba: Any, kernel: Any) -> Any:
    """``kernel`` compiled by numba on its first call, its machine code cached
    when numba finds a place for it (beside the source, the user-wide cache, a
    zip's cache); else compiled in each process that uses it."""
    try:
        return numba.njit(cache=True, nogil=True)(kernel)
    except RuntimeError as exc:  # "cannot cache function ...: no locator available"
        log.info("numba cannot cache %s (%s): compiled in each process", kernel.__name__, exc)
        return numba.njit(nogil=True)(kernel)


def available() -> bool:
    """Whether the compiled kernels can be used in this process (compiles them)."""
    return _kernels() is not None


def decode_records(payload: bytes, records: int, source_file: str) -> pa.RecordBatch | None:
    """``records`` msgpack event maps, back to back in ``payload``, as one batch
    of the event schema (``source_file`` in its last column); ``None`` when
    anything in them is not exactly what the Python decode reads the same way
    (see the module's docstring), or numba is missing."""
    kernels = _kernels()
    if kernels is None or len(payload) > _MAX_BUFFER:
        return None
    decode, gather = kernels
    lay = _layout()
    n = records
    buf = np.frombuffer(payload, np.uint8)
    ints = np.empty((lay.counts[_LONG], n), np.int64)
    dbls = np.empty((lay.counts[_DOUBLE], n), np.float64)
    bools = np.empty((max(1, lay.counts[_BOOL]), n), np.uint8)
    starts = np.empty((lay.counts[_STRING], n), np.int64)
    lens = np.empty((lay.counts[_STRING], n), np.int64)
    valid = np.zeros((len(lay.names), n), np.uint8)
    failed = decode(
        buf, n, lay.keys, lay.first, lay.chain, lay.types, lay.slots, lay.kind,
        ints, dbls, bools, starts, lens, valid,
    )  # fmt: skip
    if failed != -1:
        return None
    present = valid == 1
    string_fields = np.flatnonzero(lay.types == _STRING)
    offsets = np.empty((len(string_fields), n + 1), np.int32)
    data = gather(buf, starts, lens, present[string_fields], offsets)
    arrays: list[pa.Array] = []
    for f in range(len(lay.names)):
        mask = present[f]
        nulls = n - int(np.count_nonzero(mask))
        bitmap = None if nulls == 0 else pa.py_buffer(np.packbits(mask, bitorder="little"))
        code, slot = int(lay.types[f]), int(lay.slots[f])
        if code == _LONG:
            buffers = [bitmap, pa.py_buffer(ints[slot])]
        elif code == _DOUBLE:
            buffers = [bitmap, pa.py_buffer(dbls[slot])]
        elif code == _BOOL:
            buffers = [bitmap, pa.py_buffer(np.packbits(bools[slot], bitorder="little"))]
        else:
            begin = int(offsets[slot, 0])
            column = offsets[slot] - begin
            end = begin + int(column[-1])
            buffers = [bitmap, pa.py_buffer(column), pa.py_buffer(data[begin:end])]
        arrays.append(pa.Array.from_buffers(_ARROW[code], n, buffers, null_count=nulls))
    arrays.append(pa.repeat(source_file, n))
    batch = pa.RecordBatch.from_arrays(arrays, schema=lay.schema)
    try:
        batch.validate(full=True)  # the strings' UTF-8
    except pa.ArrowInvalid:
        return None
    return batch


# --------------------------------------------------------------------- kernels
# Plain Python that numba compiles (``_kernels``); they also run uncompiled,
# slowly, which the tests use to cover them line by line.


def _decode_kernel(
    buf: Any,
    n: int,
    keys: Any,
    first: Any,
    chain: Any,
    types: Any,
    slots: Any,
    kind: int,
    ints: Any,
    dbls: Any,
    bools: Any,
    starts: Any,
    lens: Any,
    valid: Any,
) -> int:
    """Parse ``n`` msgpack maps from ``buf`` into the column buffers.

    ``valid[f, i]``: 0 absent, 1 a value, 2 nil. Returns -1 when all ``n``
    records were read and filled ``buf`` exactly, else the index of the record
    it refused (``n``: bytes left over).
    """
    size = buf.shape[0]
    scratch = np.empty(8, np.uint8)
    as_f64 = scratch.view(np.float64)
    as_f32 = scratch[:4].view(np.float32)
    pos = np.int64(0)
    for i in range(n):
        if pos >= size:
            return i
        b = buf[pos]
        if 0x80 <= b <= 0x8F:  # fixmap
            entries = np.int64(b & 0x0F)
            pos += 1
        elif b == 0xDE:  # map 16
            if pos + 3 > size:
                return i
            entries = (np.int64(buf[pos + 1]) << 8) | np.int64(buf[pos + 2])
            pos += 3
        elif b == 0xDF:  # map 32
            if pos + 5 > size:
                return i
            entries = np.int64(0)
            for k in range(4):
                entries = (entries << 8) | np.int64(buf[pos + 1 + k])
            pos += 5
        else:
            return i
        for _ in range(entries):
            if pos >= size:
                return i
            b = buf[pos]
            if 0xA0 <= b <= 0xBF:  # fixstr key
                klen = np.int64(b & 0x1F)
                pos += 1
            elif b == 0xD9:  # str 8 key
                if pos + 2 > size:
                    return i
                klen = np.int64(buf[pos + 1])
                pos += 2
            else:
                return i  # no event field name is longer, or not a string
            if klen == 0 or klen >= first.shape[0] or pos + klen > size:
                return i
            f = first[klen, buf[pos]]
            while f >= 0:
                same = True
                for k in range(1, klen):
                    if keys[f, k] != buf[pos + k]:
                        same = False
                        break
                if same:
                    break
                f = chain[f]
            if f < 0:
                return i  # not an event field
            pos += klen
            if valid[f, i] != 0 or pos >= size:
                return i  # the key twice, or no value
            t = buf[pos]
            if t == 0xC0:  # nil
                valid[f, i] = 2
                pos += 1
                continue
            code = types[f]
            slot = slots[f]
            if code == 2:  # string
                if 0xA0 <= t <= 0xBF:
                    slen = np.int64(t & 0x1F)
                    pos += 1
                elif t == 0xD9:
                    if pos + 2 > size:
                        return i
                    slen = np.int64(buf[pos + 1])
                    pos += 2
                elif t == 0xDA:
                    if pos + 3 > size:
                        return i
                    slen = (np.int64(buf[pos + 1]) << 8) | np.int64(buf[pos + 2])
                    pos += 3
                elif t == 0xDB:
                    if pos + 5 > size:
                        return i
                    slen = np.int64(0)
                    for k in range(4):
                        slen = (slen << 8) | np.int64(buf[pos + 1 + k])
                    pos += 5
                else:
                    return i
                if pos + slen > size:
                    return i
                starts[slot, i] = pos
                lens[slot, i] = slen
                pos += slen
            elif code == 3:  # boolean
                if t == 0xC2:
                    bools[slot, i] = 0
                elif t == 0xC3:
                    bools[slot, i] = 1
                else:
                    return i
                pos += 1
            else:  # long or double
                is_int = True
                value = np.int64(0)
                real = 0.0
                if t <= 0x7F:  # positive fixint
                    value = np.int64(t)
                    pos += 1
                elif t >= 0xE0:  # negative fixint
                    value = np.int64(t) - 256
                    pos += 1
                elif t == 0xCC or t == 0xD0:  # uint 8, int 8
                    if pos + 2 > size:
                        return i
                    value = np.int64(buf[pos + 1])
                    if t == 0xD0 and value >= 128:
                        value -= 256
                    pos += 2
                elif t == 0xCD or t == 0xD1:  # uint 16, int 16
                    if pos + 3 > size:
                        return i
                    value = (np.int64(buf[pos + 1]) << 8) | np.int64(buf[pos + 2])
                    if t == 0xD1 and value >= 32768:
                        value -= 65536
                    pos += 3
                elif t == 0xCE or t == 0xD2:  # uint 32, int 32
                    if pos + 5 > size:
                        return i
                    for k in range(4):
                        value = (value << 8) | np.int64(buf[pos + 1 + k])
                    if t == 0xD2 and value >= 2147483648:
                        value -= 4294967296
                    pos += 5
                elif t == 0xCF or t == 0xD3:  # uint 64, int 64
                    if pos + 9 > size:
                        return i
                    if t == 0xCF and buf[pos + 1] >= 0x80:
                        return i  # above a long: the Python path names it
                    for k in range(8):
                        value = (value << 8) | np.int64(buf[pos + 1 + k])
                    pos += 9
                elif t == 0xCB:  # float 64, big-endian
                    if pos + 9 > size:
                        return i
                    for k in range(8):
                        scratch[7 - k] = buf[pos + 1 + k]
                    real = as_f64[0]
                    is_int = False
                    pos += 9
                elif t == 0xCA:  # float 32
                    if pos + 5 > size:
                        return i
                    for k in range(4):
                        scratch[3 - k] = buf[pos + 1 + k]
                    real = np.float64(as_f32[0])
                    is_int = False
                    pos += 5
                else:
                    return i
                if code == 0:
                    if not is_int:
                        return i
                    ints[slot, i] = value
                else:
                    dbls[slot, i] = np.float64(value) if is_int else real
            valid[f, i] = 1
        if valid[kind, i] != 1:
            return i
    if pos != size:
        return n
    return -1


def _gather_kernel(buf: Any, starts: Any, lens: Any, present: Any, offsets: Any) -> Any:
    """Copy each string column's values out of ``buf`` into one data buffer,
    column after column, and write each column's offsets into that buffer
    (``offsets[s, 0]`` is where column ``s`` begins)."""
    columns, n = starts.shape[0], starts.shape[1]
    total = 0
    for s in range(columns):
        for i in range(n):
            if present[s, i]:
                total += lens[s, i]
    data = np.empty(total, np.uint8)
    p = 0
    for s in range(columns):
        for i in range(n):
            offsets[s, i] = p
            if present[s, i]:
                st = starts[s, i]
                for k in range(lens[s, i]):
                    data[p + k] = buf[st + k]
                p += lens[s, i]
        offsets[s, n] = p
    return data


def main() -> int:
    """``python -m analysis.native_decode``: compile the kernels into numba's cache."""
    started = time.monotonic()
    if not available():
        print("native-decode: numba is not importable; event blocks decode in Python")
        return 1
    # One record of every value form compiles the kernels for the types they take.
    import msgpack

    record = msgpack.packb({"kind": "x", "seq": 1, "t_emu_ms": 1.5}, use_bin_type=True)
    if decode_records(record, 1, "warm-up") is None:
        print("native-decode: the compiled kernels refused a well-formed event", file=sys.stderr)
        return 1
    print(f"native-decode: kernels compiled and cached in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
