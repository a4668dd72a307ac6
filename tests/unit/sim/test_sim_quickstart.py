"""The bundled quickstart under all four protocols on the sim engine: what each
generation must show (``tests/quickstart_checks.py``, the checks the real
engine's quickstart test applies to its run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.orchestrator import run_scenario
from actors.sim.run import SimEngine
from emulator.scenario import Scenario, bundled_scenarios, load_scenario
from tests import quickstart_checks as check

Run = tuple[Scenario, Path]


@pytest.fixture(scope="module")
def quickstart_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    scenario = load_scenario(bundled_scenarios()["quickstart"])
    out = tmp_path_factory.mktemp("quickstart") / "run"
    results = run_scenario(scenario, check.PROTOCOLS, out, validate_events=True, engine=SimEngine())
    assert [r.status for r in results] == ["completed"] * len(check.PROTOCOLS)
    return scenario, out


@pytest.mark.parametrize("protocol", check.PROTOCOLS)
def test_every_produced_offset_is_processed(quickstart_run: Run, protocol: str) -> None:
    check.every_produced_offset_is_processed(*quickstart_run, protocol)


@pytest.mark.parametrize("protocol", check.PROTOCOLS)
def test_the_controller_brings_every_partition_online_and_replication_keeps_up(
    quickstart_run: Run, protocol: str
) -> None:
    check.controller_brings_every_partition_online(*quickstart_run, protocol)


def test_legacy_herd_expiry_and_leave(quickstart_run: Run) -> None:
    check.legacy_herd_expiry_and_leave(quickstart_run[1])


def test_classic_eager_revokes_everything_on_join(quickstart_run: Run) -> None:
    check.classic_eager_revokes_everything_on_join(quickstart_run[1])


def test_classic_cooperative_revokes_only_what_moves(quickstart_run: Run) -> None:
    check.classic_cooperative_revokes_only_what_moves(quickstart_run[1])


@pytest.mark.parametrize("protocol", ["classic-eager", "classic-cooperative"])
def test_classic_waits_a_session_timeout_for_a_crashed_member(
    quickstart_run: Run, protocol: str
) -> None:
    check.classic_waits_a_session_timeout_for_a_crashed_member(quickstart_run[1], protocol)


def test_kip848_moves_partitions_without_stopping_the_others(quickstart_run: Run) -> None:
    check.kip848_moves_partitions_without_stopping_the_others(quickstart_run[1])
