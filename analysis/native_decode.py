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

The kernels are in :mod:`analysis._native_kernels`, imported only when a read
uses them. numba compiles them on their first use in a process (about 4 s) and
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
        from analysis import _native_kernels
    except ImportError as exc:  # pragma: no cover - numba is a dependency
        log.warning("numba is not importable (%s): event blocks decode in Python", exc)
        return None
    return _native_kernels.decode, _native_kernels.gather


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
