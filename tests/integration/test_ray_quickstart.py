"""The bundled quickstart end to end on a real local Ray (embedded ZooKeeper).

One ``run_scenario`` of the legacy ZooKeeper consumer and the classic
cooperative protocol (the same seed and timeline, at half the bundled
file's time scale), then what each generation
must show (the checks of ``tests/quickstart_checks.py``) and what the run cost
(real only: CPU, memory, ZooKeeper operations, heartbeat gaps). All four
protocols run the same checks on the sim engine
(``tests/unit/sim/test_sim_quickstart.py``); on the real engine, classic-eager
runs in ``test_scenario_library`` and ``test_broker_failover``, KIP-848 in
``test_compare`` and ``test_experiment``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from emulator.scenario import Scenario
from tests import quickstart_checks as check
from tests.scaled import bundled_at_scale

pytestmark = [pytest.mark.ray, pytest.mark.zk, pytest.mark.slow]

PROTOCOLS = ["zookeeper", "classic-cooperative"]
TIME_SCALE = 0.25


@pytest.fixture(scope="module")
def quickstart_run(
    ray_local: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Scenario, Path]]:
    from actors.orchestrator import run_scenario

    base = tmp_path_factory.mktemp("quickstart")
    # Half the bundled file's wall time (22.5 s a protocol): the checks read
    # emulated time, which the scale does not change; the demo runs it at 0.5.
    scenario = bundled_at_scale("quickstart", TIME_SCALE, base)
    out = base / "run"
    run_scenario(scenario, PROTOCOLS, out, validate_events=True)
    yield scenario, out


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_produced_offset_is_processed(
    quickstart_run: tuple[Scenario, Path], protocol: str
) -> None:
    check.every_produced_offset_is_processed(*quickstart_run, protocol)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_controller_brings_every_partition_online_and_replication_keeps_up(
    quickstart_run: tuple[Scenario, Path], protocol: str
) -> None:
    check.controller_brings_every_partition_online(*quickstart_run, protocol)


def test_legacy_herd_expiry_and_leave(quickstart_run: tuple[Scenario, Path]) -> None:
    check.legacy_herd_expiry_and_leave(quickstart_run[1])


def test_classic_cooperative_revokes_only_what_moves(
    quickstart_run: tuple[Scenario, Path],
) -> None:
    check.classic_cooperative_revokes_only_what_moves(quickstart_run[1])


def test_classic_waits_a_session_timeout_for_a_crashed_member(
    quickstart_run: tuple[Scenario, Path],
) -> None:
    check.classic_waits_a_session_timeout_for_a_crashed_member(
        quickstart_run[1], "classic-cooperative"
    )


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_manifest_records_what_the_run_cost(
    quickstart_run: tuple[Scenario, Path], protocol: str
) -> None:
    """Each actor's CPU and peak memory; ZooKeeper ops (legacy); coordinator
    requests after every timeline action, and heartbeat gaps (modern)."""
    _, out = quickstart_run
    res = json.loads((out / "manifest.json").read_text())["protocols"][protocol]["resources"]
    hosts = {k: v for k, v in res["actors"].items() if k.startswith("host-")}
    brokers = {k: v for k, v in res["actors"].items() if k.startswith("broker-")}
    assert hosts and set(brokers) == {"broker-0", "broker-1", "broker-2"}
    for usage in [*hosts.values(), *brokers.values()]:
        assert usage["cpu_s"] > 0 and 30 < usage["peak_rss_mib"] < 4096
    if protocol == "zookeeper":
        # Every member read the group's znodes, wrote its own and got watch events.
        assert sum(h["zk_reads"] for h in hosts.values()) > 50
        assert sum(h["zk_writes"] for h in hosts.values()) > 10
        assert sum(h["zk_watch_notifications"] for h in hosts.values()) > 0
        assert res["coordinator"] == []
        return
    snaps = res["coordinator"]
    assert [s["after"] for s in snaps] == ["join", "crash", "leave", "end"]
    kind = "ConsumerGroupHeartbeatRequest" if protocol == "consumer" else "HeartbeatRequest"
    counts = [s["requests_by_kind"].get(kind, 0) for s in snaps]
    assert 0 < counts[0] < counts[1] < counts[2] < counts[3]  # cumulative, all along
    # Nobody but the crashed member missed its session: no live member's
    # heartbeats were further apart than a session timeout.
    assert 0 < snaps[-1]["heartbeat_gap_max_ms"] < 10000
    # The histogram holds every gap, cumulatively, and its top bucket the largest one.
    hist, bounds = snaps[-1]["heartbeat_gap_histogram"], snaps[-1]["heartbeat_gap_bounds_ms"]
    assert len(hist) == len(bounds) + 1
    assert [sum(s["heartbeat_gap_histogram"]) for s in snaps] == sorted(
        sum(s["heartbeat_gap_histogram"]) for s in snaps
    )
    top = max(i for i, n in enumerate(hist) if n)
    assert (bounds[top - 1] if top else 0) < snaps[-1]["heartbeat_gap_max_ms"] <= bounds[top]
