"""The compiled block decode (analysis.native_decode) against the Python one.

Every case is read twice by :func:`analysis.datasource.read_segment`, with and
without ``native``: the rows must be equal, or both reads must fail with the
same message. The cases the compiled decode refuses are also checked to be
refused by it (so they really took the Python path).
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import msgpack
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analysis import native_decode
from analysis.datasource import plan_file, read_segment
from emulator.eventlog import CorruptEventLog, EventWriter
from emulator.events import FIELDS, EventKind
from emulator.logformat import frame

pytestmark = pytest.mark.skipif(not native_decode.available(), reason="numba is not importable")

TYPES = {f.name: f.type for f in FIELDS}


def _pack(record: Any, *, single_float: bool = False) -> bytes:
    packed: bytes = msgpack.packb(record, use_bin_type=True, use_single_float=single_float)
    return packed


def _event(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"v": 5, "seq": 1, "kind": "produced", "t_emu_ms": 1.0}
    base.update(fields)
    return base


def _log(path: Path, blocks: list[tuple[bytes, int]]) -> Path:
    path.write_bytes(b"".join(frame(payload, n) for payload, n in blocks))
    return path


def _read(path: Path, native: bool, batch_rows: int = 16384) -> pa.Table | str:
    """The file's rows, or the error message."""
    seg = plan_file(path, "host-0.msgpack", 0).segments[0]
    try:
        batches = list(read_segment(seg, batch_rows, native=native))
    except CorruptEventLog as exc:
        return f"CorruptEventLog: {exc}"
    return pa.Table.from_batches(batches)


def _same_both_ways(path: Path, batch_rows: int = 16384) -> pa.Table | str:
    python, compiled = _read(path, False, batch_rows), _read(path, True, batch_rows)
    if isinstance(python, str) or isinstance(compiled, str):
        assert compiled == python
        return python
    assert compiled.schema == python.schema
    assert compiled.to_pylist() == python.to_pylist()
    return python


def test_a_written_log_reads_the_same_and_the_compiled_decode_took_it(tmp_path: Path) -> None:
    path = tmp_path / "host-0.msgpack"
    clock = iter(range(1_000_000))
    w = EventWriter(
        path,
        run_id="r",
        node="n",
        actor="host-0",
        protocol="consumer",
        emu_clock=lambda: float(next(clock)),
        validate=True,
        flush_bytes=700,
    )
    for i in range(300):
        w.emit(EventKind.PROCESSED, group="g", member=f"c-{i % 7}", topic="t", partition=i % 5,
               offset_start=i, offset_end=i + 3, duration_ms=0.25 * i)  # fmt: skip
        if i % 50 == 0:
            w.emit(EventKind.OWNERSHIP_CLAIMED, group="g", member="c-ü", topic="tøpic",
                   partition=i % 5, generation=-(2**40), zxid=2**62)  # fmt: skip
    w.close()
    table = _same_both_ways(path, batch_rows=64)
    assert not isinstance(table, str) and table.num_rows == 306
    payload = b"".join(_pack(_event(seq=i)) for i in range(3))
    assert native_decode.decode_records(payload, 3, "x") is not None


# Every msgpack form a value can take, each in a field that takes it.
FORMS: list[tuple[str, Any, dict[str, Any]]] = [
    ("positive fixint", 7, {}),
    ("negative fixint", -5, {}),
    ("uint 8", 200, {}),
    ("int 8", -100, {}),
    ("uint 16", 60_000, {}),
    ("int 16", -30_000, {}),
    ("uint 32", 4_000_000_000, {}),
    ("int 32", -2_000_000_000, {}),
    ("uint 64", 2**63 - 1, {}),
    ("int 64", -(2**63), {}),
]


@pytest.mark.parametrize(("form", "value"), [(f, v) for f, v, _ in FORMS])
def test_every_integer_form_reads_the_same_in_long_and_double_fields(
    tmp_path: Path, form: str, value: int
) -> None:
    payload = _pack(_event(offset_start=value, duration_ms=value))
    table = _same_both_ways(_log(tmp_path / "host-0.msgpack", [(payload, 1)]))
    assert not isinstance(table, str), form
    assert table.column("offset_start").to_pylist() == [value]
    assert table.column("duration_ms").to_pylist() == [float(value)]


@pytest.mark.parametrize("single", [False, True])
def test_floats_of_both_widths_read_the_same(tmp_path: Path, single: bool) -> None:
    event = _event(t_emu_ms=1.1, duration_ms=-1.5 * 2**30, ts_wall=1.8e9)
    payload = _pack(event, single_float=single)
    table = _same_both_ways(_log(tmp_path / "host-0.msgpack", [(payload, 1)]))
    assert not isinstance(table, str)
    assert table.column("duration_ms").to_pylist() == [-1.5 * 2**30]  # exact in 32 bits too


@pytest.mark.parametrize("length", [0, 31, 32, 255, 256, 70_000])
def test_strings_of_every_length_form_read_the_same(tmp_path: Path, length: int) -> None:
    payload = _pack(_event(detail="é" * (length // 2) + "x" * (length % 2), member=None))
    table = _same_both_ways(_log(tmp_path / "host-0.msgpack", [(payload, 1)]))
    assert not isinstance(table, str)
    assert table.column("member").to_pylist() == [None]


def test_a_map_of_more_than_fifteen_fields_reads_the_same(tmp_path: Path) -> None:
    record = {f.name: _value_of(f.type, i) for i, f in enumerate(FIELDS)}
    record["kind"] = "processed"
    assert len(record) > 15  # a map 16 header
    payload = _pack(record)
    assert native_decode.decode_records(payload, 1, "x") is not None
    _same_both_ways(_log(tmp_path / "host-0.msgpack", [(payload, 1)]))


def _value_of(kind: str, i: int) -> Any:
    return {"long": i, "double": i + 0.5, "string": f"s{i}", "boolean": i % 2 == 0}[kind]


def _str16_key(key: str, value: Any) -> bytes:
    raw = key.encode()
    return b"\xda" + struct.pack(">H", len(raw)) + raw + _pack(value)


# Records the compiled decode must refuse; the Python decode either reads the
# same rows or names the fault, and both paths must agree.
REFUSED: dict[str, tuple[bytes, int]] = {
    "unknown field": (_pack(_event(colour="red")), 1),
    "string in a long field": (_pack(_event(partition="3")), 1),
    "float in a long field": (_pack(_event(partition=3.5)), 1),
    "bool in a long field": (_pack(_event(partition=True)), 1),
    "int in a string field": (_pack(_event(member=3)), 1),
    "no kind": (_pack({"v": 5, "seq": 1}), 1),
    "nil kind": (_pack(_event(kind=None)), 1),
    "a list, not a map": (_pack([1, 2, 3]), 1),
    "above a long": (_pack(_event(offset_start=2**64 - 1)), 1),
    "bytes, not a string": (_pack(_event(member=b"\xff\xfe")), 1),
    "invalid UTF-8": (b"\x82\xa4kind\xa1x\xa6member\xa2\xc3\x28", 1),
    "a key written as str 16": (b"\x81" + _str16_key("kind", "x"), 1),
    "the key twice": (b"\x82\xa4kind\xa1x\xa4kind\xa1y", 1),
    "fewer records than the header says": (_pack(_event()), 2),
    "cut in the middle": (_pack(_event(member="abcdef"))[:-3], 1),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_what_the_compiled_decode_refuses_reads_as_the_python_decode_reads_it(
    tmp_path: Path, case: str
) -> None:
    bad, n = REFUSED[case]
    assert native_decode.decode_records(bad, n, "x") is None
    good = _pack(_event(seq=1)) + _pack(_event(seq=2))
    # a sound block on each side, so a refusal must not lose or misplace them
    _same_both_ways(_log(tmp_path / "host-0.msgpack", [(good, 2), (bad, n), (good, 2)]))


def test_trailing_bytes_after_the_records_are_refused() -> None:
    assert native_decode.decode_records(_pack(_event()) + b"\xc0", 1, "x") is None


def test_the_source_file_column_and_nulls_of_absent_fields() -> None:
    batch = native_decode.decode_records(_pack(_event(member="c-1")), 1, "p/host-0.msgpack")
    assert batch is not None
    row = batch.to_pylist()[0]
    assert row["source_file"] == "p/host-0.msgpack"
    assert row["member"] == "c-1" and row["topic"] is None and row["partition"] is None


def test_the_wanted_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(native_decode.ENV, raising=False)
    assert not native_decode.wanted(native_decode.NATIVE_MIN_BYTES - 1)
    assert native_decode.wanted(native_decode.NATIVE_MIN_BYTES)
    monkeypatch.setenv(native_decode.ENV, "off")
    assert not native_decode.wanted(10**12)
    monkeypatch.setenv(native_decode.ENV, "on")
    assert native_decode.wanted(0)


_VALUES = {
    "long": st.integers(min_value=-(2**63), max_value=2**63 - 1),
    "double": st.one_of(
        # width 32: each one packs as a float 32 too (``single``)
        st.floats(allow_nan=False, width=32),
        st.integers(min_value=-(2**53), max_value=2**53),
    ),
    "string": st.text(max_size=40),
    "boolean": st.booleans(),
}
_ANY = st.one_of(
    st.none(), st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(width=32), st.text(max_size=5), st.booleans(), st.binary(max_size=3),
)  # fmt: skip


@st.composite
def _records(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.sets(st.sampled_from(sorted(TYPES)), max_size=20))
    record: dict[str, Any] = {}
    for name in sorted(names):
        wrong = draw(st.integers(0, 19)) == 0  # now and then any value at all
        record[name] = draw(_ANY if wrong else st.one_of(st.none(), _VALUES[TYPES[name]]))
    if draw(st.integers(0, 9)) > 0:
        record["kind"] = draw(st.sampled_from(["processed", "produced"]))
    return record


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    blocks=st.lists(st.lists(_records(), min_size=1, max_size=4), min_size=1, max_size=4),
    single=st.booleans(),
    batch_rows=st.integers(1, 6),
)
def test_random_events_read_the_same_both_ways(
    tmp_path: Path, blocks: list[list[dict[str, Any]]], single: bool, batch_rows: int
) -> None:
    framed = [
        (b"".join(_pack(r, single_float=single) for r in records), len(records))
        for records in blocks
    ]
    _same_both_ways(_log(tmp_path / "host-0.msgpack", framed), batch_rows)


def test_kernels_that_numba_cannot_cache_are_compiled_uncached(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No cache locator (a read-only install, say) must not break a read."""
    import numba

    from analysis import _native_kernels

    real = numba.njit
    asked: list[bool] = []

    def njit(**options: Any) -> Any:
        asked.append(bool(options.get("cache")))
        if options.get("cache"):
            raise RuntimeError("cannot cache function 'decode': no locator available")
        return real(**options)

    def kernel(x: int) -> int:
        return x + 1

    monkeypatch.setattr(numba, "njit", njit)
    compiled = _native_kernels._jit(kernel)
    assert asked == [True, False]
    assert compiled.py_func is kernel and compiled(41) == 42
