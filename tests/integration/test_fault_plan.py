"""Cluster faults from a scenario's timeline, carried out by the orchestrator.

One short scenario with a ZooKeeper ensemble member lost and restarted, a
topic grown, and a whole consumer host killed, run under the legacy and the
KIP-848 protocols on real ZooKeeper and a real local Ray: each fault is
recorded, takes effect, and the group still processes everything produced.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from emulator.eventlog import read_run_events
from emulator.scenario import Scenario, parse_scenario

pytestmark = [pytest.mark.ray, pytest.mark.zk, pytest.mark.slow]

PROTOCOLS = ["zookeeper", "consumer"]

SCENARIO = """
name = "fault-plan"
seed = 3
duration_s = 40.0
time_scale = 0.25

[cluster]
brokers = 2
zookeeper_ensemble = 3

[[topics]]
name = "t"
partitions = 4
replication_factor = 2

[producer]
rate_per_s = 40.0
topics = ["t"]

[group]
id = "g"
consumers = 4
consumers_per_host = 2
processing_ms_per_message = 1.0

[kafka]
"auto.offset.reset" = "smallest"
"group.consumer.min.session.timeout.ms" = 6000
"group.consumer.session.timeout.ms" = 10000

[[timeline]]
at_s = 5.0
action = "zk_crash"
zk_member = 0
restart_after_s = 5.0

[[timeline]]
at_s = 12.0
action = "add_partitions"
topic = "t"
partitions = 6

[[timeline]]
at_s = 18.0
action = "host_crash"
host = 1
"""


@pytest.fixture(scope="module")
def fault_run(
    ray_local: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Scenario, Path]]:
    from actors.orchestrator import run_scenario

    scenario = parse_scenario(SCENARIO, "fault-plan.toml")
    out = tmp_path_factory.mktemp("faults") / "run"
    run_scenario(scenario, PROTOCOLS, out, validate_events=True)
    yield scenario, out


def _events(out: Path, protocol: str) -> list[dict[str, Any]]:
    return sorted(read_run_events(out / protocol / "events"), key=lambda e: float(e["t_emu_ms"]))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_cluster_faults_are_recorded_and_take_effect(
    fault_run: tuple[Scenario, Path], protocol: str
) -> None:
    _scenario, out = fault_run
    manifest = json.loads((out / "manifest.json").read_text())
    entry = manifest["protocols"][protocol]
    assert entry["status"] == "completed", entry
    events = _events(out, protocol)
    faults = [
        (e["reason"], round(float(e["t_emu_ms"]) / 1000.0))
        for e in events
        if e["kind"] == "fault_injected" and e["actor"] == "orchestrator"
    ]
    assert [f for f, _ in faults] == ["zk_crash", "zk_restart", "add_partitions", "host_crash"]
    assert [t for _, t in faults] == [5, 10, 12, 18]
    # The topic grew: the new partitions are produced to and processed.
    processed = {(e["topic"], e["partition"]) for e in events if e["kind"] == "processed"}
    assert {("t", 4), ("t", 5)} <= processed
    # The killed host's members (c-1, c-3) processed nothing after the kill,
    # and what they owned was taken over: nothing produced is left unprocessed.
    late = {
        e["member"]
        for e in events
        if e["kind"] == "processed" and float(e["t_emu_ms"]) > 18_500
    }
    assert late and late <= {"c-0", "c-2"}
    # ... and they are recorded as crashed there and then, for the checkers
    crashed = [
        (e["member"], round(float(e["t_emu_ms"]) / 1000.0))
        for e in events
        if e["kind"] == "consumer_crashed" and e["actor"] == "orchestrator"
    ]
    assert sorted(crashed) == [("c-1", 18), ("c-3", 18)]
    counts = entry["counts"]
    assert counts["produced"] > 0
    assert counts["unprocessed"] == 0, counts["partitions_unprocessed"]
    # The ensemble lost one member of three: it kept its quorum, and the run
    # put the member back.
    assert manifest["zookeeper"]["members"] == 3


def test_the_legacy_sessions_of_the_killed_host_expired_on_the_server(
    fault_run: tuple[Scenario, Path],
) -> None:
    _scenario, out = fault_run
    events = _events(out, "zookeeper")
    # The survivors rebalanced because the dead members' /ids znodes went away
    # when the server expired their sessions (after zookeeper.session.timeout.ms).
    after = [
        e
        for e in events
        if e["kind"] == "rebalance_triggered"
        and e["member"] in ("c-0", "c-2")
        and float(e["t_emu_ms"]) > 18_000
    ]
    assert after, "no rebalance after the host crash"
    first = min(float(e["t_emu_ms"]) for e in after)
    assert 18_000 + 3_000 <= first <= 18_000 + 6_000 + 4_000, first
