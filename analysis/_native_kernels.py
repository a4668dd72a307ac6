"""The compiled kernels of :mod:`analysis.native_decode` (imported only when a
read uses them: numba's import costs ~0.4 s).

Each is compiled on its first call and its machine code cached where numba
finds a place for it (beside this file, its user-wide cache, a zip's cache);
where it finds none, compiled in each process that uses it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

log = logging.getLogger(__name__)


def _jit(kernel: Callable[..., Any]) -> Any:
    """``kernel`` compiled by numba, cached when numba can cache it."""
    try:
        return numba.njit(cache=True, nogil=True)(kernel)
    except RuntimeError as exc:  # "cannot cache function ...: no locator available"
        log.info("numba cannot cache %s (%s): compiled in each process", kernel.__name__, exc)
        return numba.njit(nogil=True)(kernel)


@numba.njit(inline="always")
def _be(buf: Any, at: Any, width: Any) -> Any:
    """The ``width``-byte big-endian unsigned integer at ``buf[at]`` as an int64
    (8 bytes wrap to two's complement)."""
    value = np.int64(0)
    for k in range(width):
        value = (value << 8) | np.int64(buf[at + k])
    return value


@_jit
def decode(
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
        elif b == 0xDE or b == 0xDF:  # map 16, map 32
            width = 2 if b == 0xDE else 4
            if pos + 1 + width > size:
                return i
            entries = _be(buf, pos + 1, width)
            pos += 1 + width
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
                elif 0xD9 <= t <= 0xDB:  # str 8, 16, 32
                    width = 1 << (t - 0xD9)
                    if pos + 1 + width > size:
                        return i
                    slen = _be(buf, pos + 1, width)
                    pos += 1 + width
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
                elif 0xCC <= t <= 0xCF or 0xD0 <= t <= 0xD3:  # uint 8-64, int 8-64
                    signed = t >= 0xD0
                    width = 1 << (t - (0xD0 if signed else 0xCC))
                    if pos + 1 + width > size:
                        return i
                    if width == 8 and not signed and buf[pos + 1] >= 0x80:
                        return i  # above a long: the Python path names it
                    value = _be(buf, pos + 1, width)  # 8 bytes wrap to two's complement
                    if signed and width < 8 and value >= np.int64(1) << (8 * width - 1):
                        value -= np.int64(1) << (8 * width)
                    pos += 1 + width
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


@_jit
def gather(buf: Any, starts: Any, lens: Any, present: Any, offsets: Any) -> Any:
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
