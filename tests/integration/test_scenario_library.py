"""Bundled fault scenarios end to end.

``zombie-double-consume`` under ``zookeeper`` and ``classic-eager`` must show
what the issue promises: after its pause, the zombie processes a partition
while the member that took it over processes it too, and the run's summary
says so. It is a protocol path, not Ray's or ZooKeeper's, so it runs on the
sim engine, where it is deterministic and takes seconds (the real engine's
run took two minutes of the suite); ``broker-failure`` runs on real
ZooKeeper and a real local Ray, at half its bundled time scale. The whole
library under every protocol is run by ``tests/bench/run_library.py`` (too
long for the suite).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from emulator.eventlog import ReadStats, read_run_events
from emulator.events import validate_event
from emulator.intervals import overlap_windows as double_processing_windows
from emulator.scenario import Scenario, bundled_scenarios, load_scenario
from tests.scaled import bundled_at_scale

ZOMBIE_PROTOCOLS = ["zookeeper", "classic-eager"]
BROKER_FAILURE_SCALE = 0.25
Event = dict[str, Any]


@pytest.fixture(scope="module")
def zombie_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Scenario, Path]]:
    from actors.orchestrator import run_scenario
    from actors.sim.run import SimEngine

    scenario = load_scenario(bundled_scenarios()["zombie-double-consume"])
    out = tmp_path_factory.mktemp("zombie") / "run"
    run_scenario(scenario, ZOMBIE_PROTOCOLS, out, validate_events=True, engine=SimEngine())
    yield scenario, out


def _events(out: Path, protocol: str) -> list[Event]:
    stats = ReadStats()
    events = list(read_run_events(out / protocol / "events", stats))
    for ev in events:
        validate_event(ev)
    return sorted(events, key=lambda e: float(e["t_emu_ms"]))


@pytest.mark.parametrize("protocol", ZOMBIE_PROTOCOLS)
def test_zombie_processes_a_partition_its_new_owner_processes(
    zombie_run: tuple[Scenario, Path], protocol: str
) -> None:
    scenario, out = zombie_run
    manifest = json.loads((out / "manifest.json").read_text())
    entry = manifest["protocols"][protocol]
    assert entry["status"] == "completed"
    events = _events(out, protocol)
    pause = scenario.action_plan()[0]
    assert pause.action == "pause" and pause.members == ("c-1",)
    injected = [e for e in events if e["kind"] == "fault_injected" and e["reason"] == "pause"]
    cleared = [e for e in events if e["kind"] == "fault_cleared" and e["reason"] == "pause"]
    assert injected and cleared
    wake_ms = float(cleared[0]["t_emu_ms"])
    assert wake_ms >= (pause.at_s + pause.duration_s) * 1000.0 - 1000.0
    # The overlap, from the raw PROCESSED events: c-1 and someone else busy on
    # one partition at the same time, after c-1 woke up.
    busy: dict[tuple[str, int], list[tuple[float, float, str]]] = {}
    for e in events:
        if e["kind"] == "processed":
            end = float(e["t_emu_ms"])
            busy.setdefault((str(e["topic"]), int(e["partition"])), []).append(
                (end - float(e["duration_ms"]), end, str(e["member"]))
            )
    # When c-1 froze: the host's fault event, a few ms after the planned time (a
    # batch started in between is still the one it held when it froze).
    pause_ms = float(injected[0]["t_emu_ms"])
    # c-1 acts on what it last knew: the batch it held when it froze is
    # finished after the wake-up ...
    finished_late = [
        e
        for e in events
        if e["kind"] == "processed"
        and e["member"] == "c-1"
        and float(e["t_emu_ms"]) >= wake_ms
        and float(e["t_emu_ms"]) - float(e["duration_ms"]) < pause_ms
    ]
    assert finished_late, "c-1 did not finish its frozen batch after waking"
    # ... while the member that took the partition over during the pause was
    # processing the same partition: both had it in hand at once.
    zombie_windows = [
        (tp, w)
        for tp, intervals in busy.items()
        for w in double_processing_windows(intervals)
        if "c-1" in w[2] and w[1] > pause_ms
    ]
    assert zombie_windows, "no overlapping processing by the zombie c-1 and the new owner"
    # ... and the run's summary reports it: two members on one partition at
    # once (the same records, or the zombie's old ones beside the new owner's
    # newer ones: an ordering overlap), and the records done twice.
    counts = entry["counts"]
    assert counts["double_processing"] + counts["ordering_overlap"] >= 1
    assert counts["double_processing_ms"] + counts["ordering_overlap_ms"] > 0
    assert counts["duplicates"] > 0
    assert counts["unprocessed"] == 0, counts["partitions_unprocessed"]


@pytest.fixture(scope="module")
def broker_failure_run(
    ray_local: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Scenario, Path]]:
    from actors.orchestrator import run_scenario

    base = tmp_path_factory.mktemp("broker-failure")
    # Half the bundled file's wall time (15 s instead of 30): the checks read
    # emulated time, which the scale does not change.
    scenario = bundled_at_scale("broker-failure", BROKER_FAILURE_SCALE, base)
    out = base / "run"
    run_scenario(scenario, ["zookeeper"], out, validate_events=True)
    yield scenario, out


@pytest.mark.ray
@pytest.mark.zk
@pytest.mark.slow
def test_broker_failure_fails_leaders_over_and_the_auto_rebalance_restores_them(
    broker_failure_run: tuple[Scenario, Path],
) -> None:
    scenario, out = broker_failure_run
    manifest = json.loads((out / "manifest.json").read_text())
    entry = manifest["protocols"]["zookeeper"]
    assert entry["status"] == "completed"
    crash, restart = scenario.action_plan()
    assert (crash.action, restart.action) == ("broker_crash", "broker_restart")
    dead = crash.broker
    events = _events(out, "zookeeper")
    changes = [e for e in events if e["kind"] == "leader_changed"]
    offline = {(e["topic"], e["partition"]) for e in changes if e["reason"] == "offline"}
    # Every partition the dead broker led (its preferred ones: all leaders start
    # preferred) moved to another broker, within a session timeout and a bit.
    assert offline and all(
        e["broker"] != dead
        and crash.at_s * 1000 < float(e["t_emu_ms"]) < crash.at_s * 1000 + 15_000
        for e in changes
        if e["reason"] == "offline"
    )
    # After the restart the automatic rebalance (imbalance 100 % > 10 %) gives
    # each of them back to its preferred broker; nothing moves it away again.
    back = {
        (e["topic"], e["partition"])
        for e in changes
        if e["reason"] == "auto_rebalance" and e["broker"] == dead
    }
    assert offline <= back
    last: dict[tuple[str, int], int] = {}
    for e in changes:
        last[(e["topic"], e["partition"])] = int(e["broker"])
    assert all(last[tp] == dead for tp in offline)
    assert all(
        float(e["t_emu_ms"]) > restart.at_s * 1000
        for e in changes
        if e["reason"] == "auto_rebalance"
    )
    # The ISR shrank when the broker died and grew back when it caught up. Which
    # broker is the controller is a race. When the dead broker was not, the
    # controller's onBrokerFailure takes it out of every ISR it followed in
    # (removeReplicaFromIsr: "shrink"). When it was, the new controller's
    # onControllerFailover elects the leaders it led but does not run
    # onBrokerFailure for it (K@0.8.2.2 KafkaController): only the leaders'
    # isr-expiration check, every replica.lag.time.max.ms, may shrink the other
    # ISRs before the restart, or may not. Either way, the partitions it led
    # left it out (offline, above) and took it back once it caught up.
    controller = [e for e in events if e["kind"] == "controller_elected"]
    before = [e for e in controller if float(e["t_emu_ms"]) < crash.at_s * 1000]
    isr = {e["reason"] for e in events if e["kind"] == "isr_changed"}
    assert "expand" in isr
    if before and int(before[-1]["broker"]) != dead:
        assert "shrink" in isr
    # ... and the data path went on: nothing acknowledged was lost or left unprocessed.
    counts = entry["counts"]
    assert counts["produced"] > 0.8 * scenario.producer.rate_per_s * scenario.duration_s
    assert counts["unprocessed"] == 0, counts["partitions_unprocessed"]
