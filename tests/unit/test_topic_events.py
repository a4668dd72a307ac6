"""The topic lifecycle's event kinds (schema 3): their fields, their values, old logs still read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from analysis.schema import arrow_schema, column_names
from emulator.clock import FakeClock
from emulator.eventlog import EventWriter, iter_events
from emulator.events import (
    FIELD_TYPES,
    SCHEMA_VERSION,
    EventError,
    EventKind,
    format_topics,
    validate_event,
)

CREATED: dict[str, Any] = {
    "kind": "topic_created",
    "topic": "events-3",
    "count": 4,
    "replication_factor": 2,
    "incarnation": 1,
    "reason": "timeline",
}


def test_schema_3_adds_the_topic_fields() -> None:
    assert SCHEMA_VERSION >= 3
    assert FIELD_TYPES["incarnation"] == "long"
    assert FIELD_TYPES["replication_factor"] == "long"
    assert FIELD_TYPES["pattern"] == "string"
    assert FIELD_TYPES["topics"] == "string"
    assert EventKind("topic_created") is EventKind.TOPIC_CREATED
    assert EventKind("topic_deletion_requested") is EventKind.TOPIC_DELETION_REQUESTED
    assert EventKind("topic_deleted") is EventKind.TOPIC_DELETED
    assert EventKind("topic_pattern_resolved") is EventKind.TOPIC_PATTERN_RESOLVED


def test_topic_created() -> None:
    validate_event(CREATED)
    validate_event({**CREATED, "reason": "auto", "count": 1, "replication_factor": 1})
    for missing in ("topic", "count", "replication_factor", "incarnation", "reason"):
        with pytest.raises(EventError, match=f"'topic_created' needs field '{missing}'"):
            validate_event({k: v for k, v in CREATED.items() if k != missing})
    with pytest.raises(EventError, match="field 'reason' must be one of \\('timeline', 'auto'\\)"):
        validate_event({**CREATED, "reason": "admin"})
    with pytest.raises(EventError, match="'incarnation' must be long"):
        validate_event({**CREATED, "incarnation": "1"})


def test_topic_deletion_requested() -> None:
    base = {"kind": "topic_deletion_requested", "topic": "t"}
    validate_event({**base, "state": "started"})
    validate_event({**base, "state": "ignored"})
    with pytest.raises(EventError, match="needs field 'state'"):
        validate_event(base)
    with pytest.raises(EventError, match="field 'state' must be one of"):
        validate_event({**base, "state": "done"})


def test_topic_deleted() -> None:
    validate_event({"kind": "topic_deleted", "topic": "t", "incarnation": 2})
    with pytest.raises(EventError, match="needs field 'incarnation'"):
        validate_event({"kind": "topic_deleted", "topic": "t"})


def test_topic_pattern_resolved_by_a_member_or_a_coordinator() -> None:
    base = {"kind": "topic_pattern_resolved", "pattern": "events-.*", "topics": "events-1"}
    validate_event({**base, "member": "c-0"})
    validate_event({**base, "broker": 1, "group": "g", "group_epoch": 7})
    validate_event({**base, "member": "c-1", "topics": ""})  # it matched nothing
    with pytest.raises(EventError, match="needs field 'member' or 'broker'"):
        validate_event(base)
    with pytest.raises(EventError, match="needs field 'topics'"):
        validate_event({"kind": "topic_pattern_resolved", "pattern": "x", "member": "c-0"})


def test_format_topics() -> None:
    assert format_topics(["b", "a", "b"]) == "a,b"
    assert format_topics([]) == ""


def test_the_writer_checks_and_round_trips_them(tmp_path: Path) -> None:
    clock = FakeClock()
    path = tmp_path / "a.msgpack"
    w = EventWriter(
        path,
        run_id="r",
        node="n",
        actor="orchestrator",
        protocol="zookeeper",
        emu_clock=clock.now_ms,
        validate=True,
    )
    w.emit(EventKind.TOPIC_CREATED, **{k: v for k, v in CREATED.items() if k != "kind"})
    w.emit(EventKind.TOPIC_DELETION_REQUESTED, topic="events-3", state="ignored")
    with pytest.raises(EventError):
        w.emit(EventKind.TOPIC_DELETED, topic="events-3")
    w.close()
    got = [(e["kind"], e["v"]) for e in iter_events(path)]
    assert got == [("topic_created", SCHEMA_VERSION), ("topic_deletion_requested", SCHEMA_VERSION)]


def test_an_older_record_still_fits_the_table() -> None:
    """Versions only add: a schema-2 record validates and its new columns are null."""
    old = {
        "v": 2,
        "seq": 0,
        "kind": "produced",
        "t_emu_ms": 1.0,
        "topic": "t",
        "partition": 0,
        "offset_start": 0,
        "offset_end": 5,
    }
    validate_event(old)
    row = {name: [old.get(name)] for name in column_names()}
    batch = pa.RecordBatch.from_pydict(row, schema=arrow_schema())
    assert batch.column("incarnation").null_count == 1
    assert batch.column("topics").null_count == 1
    assert batch.column("v").to_pylist() == [2]
