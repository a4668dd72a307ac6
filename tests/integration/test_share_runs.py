"""Share groups (KIP-932) between Ray actors: a real local Ray and a real ZooKeeper.

The sim runs (``tests/unit/sim/test_sim_share.py``) carry the share-partition
assertions; this run checks that the same road works between actors: share
consumers on consumer hosts fetch from the share-partition leaders on the brokers,
acknowledge, and a crashed member's connections release its records (4.1+), with
the share-partitions' state written to ZooKeeper for a new leader to read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from emulator.eventlog import ReadStats, read_run_events
from emulator.events import Event, validate_event
from emulator.scenario import parse_scenario

REAL = """
name = "share-real"
seed = 11
duration_s = 12.0
# 6 s of wall time: the checks read emulated time
time_scale = 0.5
kafka_version = "4.2"

[cluster]
brokers = 2
zookeeper_ensemble = 1

[[topics]]
name = "jobs"
partitions = 2
replication_factor = 2

[producer]
rate_per_s = 60.0

[group]
consumers = 3
processing_ms_per_message = 60.0
share_release = 0.05
share_reject = 0.05

[kafka]
"share.auto.offset.reset" = "earliest"
"share.acknowledgement.mode" = "explicit"
"max.poll.records" = 4

[[timeline]]
at_s = 6.0
action = "crash"
member = "c-1"
"""


@pytest.fixture(scope="module")
def real_run(ray_local: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    from actors.orchestrator import run_scenario

    out = tmp_path_factory.mktemp("share-real") / "run"
    run_scenario(parse_scenario(REAL, "share-real.toml"), ["share"], out, validate_events=True)
    yield out


@pytest.mark.ray
@pytest.mark.zk
@pytest.mark.slow
def test_share_consumers_between_ray_actors(real_run: Path) -> None:
    manifest = json.loads((real_run / "manifest.json").read_text())
    entry = manifest["protocols"]["share"]
    assert entry["status"] == "completed"
    stats = ReadStats()
    events: list[Event] = list(read_run_events(real_run / "share" / "events", stats))
    assert stats.truncated_tail_bytes == 0
    for ev in events:
        validate_event(ev)
    counts = entry["counts"]
    assert counts["produced"] > 300
    # Every record ended acknowledged or archived (rejected): none lost, none left.
    assert counts["share_acknowledged"] + counts["share_archived"] == counts["produced"]
    assert counts["unprocessed"] == 0
    records = [e for e in events if e["kind"] == "share_records"]
    # The leaders are the brokers; the members' ids are the hosts' share consumers'.
    assert {str(e["actor"]) for e in records} <= {"broker-0", "broker-1"}
    reasons = {(str(e["state"]), str(e["reason"])) for e in records}
    assert {("available", "release"), ("archived", "reject"), ("acknowledged", "accept")} <= reasons
    # Several members read one partition (ceil(3/2) members each).
    readers: dict[int, set[str]] = {}
    for e in events:
        if e["kind"] == "processed":
            readers.setdefault(int(e["partition"]), set()).add(str(e["member"]))  # type: ignore[call-overload]
    assert any(len(m) > 1 for m in readers.values())
    # The crash dropped c-1's connections: what it held went back at once.
    crashed = min(float(e["t_emu_ms"]) for e in events if e["kind"] == "consumer_crashed")  # type: ignore[arg-type]
    closes = [
        e
        for e in records
        if e["reason"] == "session_close" and crashed <= float(e["t_emu_ms"]) < 12_000.0  # type: ignore[arg-type]
    ]
    assert closes and min(float(e["t_emu_ms"]) for e in closes) < crashed + 2_000.0  # type: ignore[arg-type]
