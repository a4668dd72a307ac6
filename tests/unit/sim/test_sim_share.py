"""Share groups (KIP-932) in whole sim runs: record fates, lock expiry, a crash's release."""

from __future__ import annotations

import dataclasses
import itertools
from collections import defaultdict
from pathlib import Path

import pytest

from actors.orchestrator import run_scenario
from actors.run_files import RunError
from actors.sim.run import SimEngine
from emulator.eventlog import read_run_events
from emulator.events import Event
from emulator.scenario import Scenario, load_scenario

CRASH_S = 10.0
DURATION_S = 30.0


def scenario(tmp_path: Path, version: str, extra: str = "") -> Scenario:
    """Four share consumers on two partitions, busy (80 ms a record): releases and
    rejects, a crash, and a consumer slow enough (1 s a record, 5 a poll) to outlive
    its 2 s locks."""
    # The key is new in 4.1 (4.0's consumer is explicit once the application acknowledges).
    mode = "" if version == "4.0" else '"share.acknowledgement.mode" = "explicit"\n'
    text = f"""
name = "share-small"
description = "4 share consumers on 2 partitions"
seed = 3
duration_s = {DURATION_S}
time_scale = 0.5
kafka_version = "{version}"

[cluster]
brokers = 3
zookeeper_ensemble = 1

[[topics]]
name = "jobs"
partitions = 2
replication_factor = 2

[producer]
rate_per_s = 40.0

[group]
id = "workers"
consumers = 4
processing_ms_per_message = 80.0
share_release = 0.05
share_reject = 0.02

[kafka]
"share.auto.offset.reset" = "earliest"
{mode}"group.share.record.lock.duration.ms" = 2000
"max.poll.records" = 5

[[timeline]]
at_s = {CRASH_S}
action = "crash"
member = "c-1"

[[timeline]]
at_s = 15.0
action = "slow"
member = "c-2"
duration_s = 6.0
processing_ms_per_message = 1000.0
{extra}"""
    path = tmp_path / f"share-{version}.toml"
    path.write_text(text)
    return load_scenario(path)


def run(tmp_path: Path, version: str, extra: str = "") -> tuple[list[Event], dict[str, int]]:
    out = tmp_path / f"run-{version}"
    (result,) = run_scenario(scenario(tmp_path, version, extra), ["share"], out, engine=SimEngine())
    assert result.status == "completed" and not result.notes
    counts = result.summary.to_dict()
    return list(read_run_events(out / "share" / "events")), {
        k: int(v) for k, v in counts.items() if isinstance(v, int)
    }


def histories(events: list[Event]) -> dict[tuple[int, int], list[Event]]:
    """Each record's transitions, in the leader's order."""
    out: dict[tuple[int, int], list[Event]] = defaultdict(list)
    for ev in sorted(
        (e for e in events if e["kind"] == "share_records"),
        key=lambda e: (float(e["t_emu_ms"]), str(e["actor"]), int(e["seq"])),  # type: ignore[arg-type]
    ):
        for o in range(int(ev["offset_start"]), int(ev["offset_end"])):  # type: ignore[call-overload]
            out[(int(ev["partition"]), o)].append(ev)  # type: ignore[call-overload]
    return out


@pytest.mark.parametrize("version", ["4.0", "4.2"])
def test_every_record_has_a_fate_and_no_record_is_held_twice(tmp_path: Path, version: str) -> None:
    events, counts = run(tmp_path, version)
    hist = histories(events)
    produced = {
        (int(e["partition"]), o)  # type: ignore[call-overload]
        for e in events
        if e["kind"] == "produced"
        for o in range(int(e["offset_start"]), int(e["offset_end"]))  # type: ignore[call-overload]
    }
    assert len(produced) == counts["produced"] > 1000
    # Every produced record was delivered; its last state is final or in flight.
    assert produced <= set(hist)
    finals = defaultdict(int)
    for rec in hist.values():
        finals[str(rec[-1]["state"])] += 1
        states = [str(e["state"]) for e in rec]
        # An acquisition always follows a state that let it go (no double acquisition),
        # and nothing happens to a record after it is acknowledged or archived.
        for prev, nxt in itertools.pairwise(states):
            assert prev not in ("acknowledged", "archived"), rec
            assert not (prev == "acquired" and nxt == "acquired"), rec
    assert finals["acknowledged"] + finals["archived"] + finals["acquired"] + finals[
        "available"
    ] == len(hist)
    assert finals["acknowledged"] == counts["share_acknowledged"]
    assert finals["archived"] == counts["share_archived"]
    assert finals["acknowledged"] + finals["archived"] >= 0.95 * len(produced)
    # The application's releases and rejects, and the slow consumer's expired locks.
    reasons = defaultdict(int)
    for e in events:
        if e["kind"] == "share_records":
            reasons[(str(e["state"]), str(e["reason"]))] += 1
    assert reasons[("available", "release")] > 0 and reasons[("archived", "reject")] > 0
    assert counts["share_lock_expired"] > 0
    again = [e for e in events if e["kind"] == "share_records" and e.get("detail")]
    assert {str(e["detail"]) for e in again} >= {"release", "lock_expiry"}
    # Every member still alive closes promptly at the end: its fetch parked on an idle
    # partition is answered at MaxWaitMs, and the closing ShareAcknowledge follows.
    finished = max(float(e["t_emu_ms"]) for e in events if e["kind"] == "run_finished")  # type: ignore[arg-type]
    stopped = {
        str(e["member"]): float(e["t_emu_ms"])  # type: ignore[arg-type]
        for e in events
        if e["kind"] == "consumer_stopped"
    }
    assert sorted(stopped) == ["c-0", "c-2", "c-3"]
    assert max(stopped.values()) < finished + 3_000.0
    assert counts["share_redelivered"] == sum(
        int(e["offset_end"]) - int(e["offset_start"])  # type: ignore[call-overload]
        for e in again
    )


def test_a_crash_releases_its_records_at_once_from_4_1(tmp_path: Path) -> None:
    """From 4.1 the broker closes a dropped connection's share session: the crashed
    member's records are available again at once (count lowered), not after its locks."""
    crash_ms, end_ms = CRASH_S * 1000.0, DURATION_S * 1000.0

    def closes(version: str) -> list[Event]:
        events, _ = run(tmp_path, version)
        return [
            e
            for e in events
            if e["kind"] == "share_records"
            and e["reason"] == "session_close"
            and crash_ms <= float(e["t_emu_ms"]) < end_ms  # type: ignore[arg-type]
        ]

    later = closes("4.2")
    assert later and min(float(e["t_emu_ms"]) for e in later) < crash_ms + 1000.0  # type: ignore[arg-type]
    assert closes("4.0") == []


def test_versions_before_4_0_refuse_share_groups(tmp_path: Path) -> None:
    """The run refuses before it starts anything (a scenario file of 3.9 could not
    even name the share keys: the parser refuses those)."""
    old = dataclasses.replace(scenario(tmp_path, "4.2"), kafka_version="3.9")
    with pytest.raises(RunError, match=r"share groups \(KIP-932\) need kafka_version 4\.0"):
        run_scenario(old, ["share"], tmp_path / "run", engine=SimEngine())
    assert not (tmp_path / "run" / "share").exists()


BROKER_CRASH = """
[[timeline]]
at_s = 12.0
action = "broker_crash"
broker = {broker}
restart_after_s = 8.0
"""


def test_the_share_state_survives_a_leader_change(tmp_path: Path) -> None:
    """The old leader wrote each share-partition's state (ZooKeeper here, the share
    coordinator in Kafka); the new leader reads it back: nothing acknowledged or
    archived is delivered again, and every record still ends with a fate."""
    events, counts = run(tmp_path, "4.2", BROKER_CRASH.format(broker=0))
    moved = {
        int(e["partition"])  # type: ignore[call-overload]
        for e in events
        if e["kind"] == "leader_changed" and e["topic"] == "jobs" and e["reason"] == "offline"
    }
    assert moved  # broker 0 led a partition of jobs
    hist = histories(events)
    for p in moved:
        leaders = {str(e["actor"]) for (q, _o), rec in hist.items() if q == p for e in rec}
        assert len(leaders) >= 2, (p, leaders)  # records changed state under both leaders
    for rec in hist.values():
        states = [str(e["state"]) for e in rec]
        for prev in states[:-1]:
            assert prev not in ("acknowledged", "archived"), rec
    finals = defaultdict(int)
    for rec in hist.values():
        finals[str(rec[-1]["state"])] += 1
    assert finals["acknowledged"] + finals["archived"] >= 0.95 * counts["produced"]
