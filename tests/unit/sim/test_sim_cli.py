"""``rebalance-emu run --engine sim``: the CLI's way onto the sim engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from emulator.cli import main
from tests.unit.sim.test_sim_runs import SCENARIO


def test_run_on_the_sim_engine_with_a_seed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.toml"
    path.write_text(SCENARIO)
    out = tmp_path / "run"
    code = main(["run", str(path), "--engine", "sim", "--seed", "11", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["engine"]["name"] == "sim" and manifest["engine"]["seed"] == 11
    assert manifest["seed"] == 11 and manifest["protocols"]["zookeeper"]["status"] == "completed"
    assert "on the sim engine" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--engine", "sim", "--zookeeper", "127.0.0.1:2181"], "--zookeeper do not apply"),
        (["--engine", "sim", "--ray-address", "auto"], "--ray-address do not apply"),
        (["--engine", "sim", "--out", "s3://bucket/run"], "a local run directory"),
        (["--seed", "3"], "use it with --engine sim"),
        (["--parallel", "2"], "use it with --engine sim"),
        (["--engine", "sim", "--parallel", "0"], "--parallel must be at least 1"),
    ],
)
def test_what_the_sim_engine_refuses_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], says: str
) -> None:
    args = ["run", "quickstart", *extra]
    if "--out" not in extra:
        args += ["--out", str(tmp_path / "run")]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0]
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["run", "quickstart", "--profile", "explore"], "use it with --engine sim"),
        (["run", "quickstart", "--engine", "sim", "--profile", "wild"], "not a profile name"),
        (["explore", "quickstart", "--seeds", "0"], "--seeds must be at least 1"),
        (["explore", "quickstart", "--parallel", "0"], "--parallel must be at least 1"),
        (["explore", "quickstart", "--first-seed", "-1"], "--first-seed must not be negative"),
        (["explore", "quickstart", "--protocol", "kafka"], "kafka"),
        (["explore", "no-such-scenario"], "no-such-scenario"),
        (["explore", "quickstart", "--profile", "wild"], "not a profile name"),
    ],
)
def test_explore_and_profile_refuse_bad_input_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    assert main([*args, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err
    assert not (tmp_path / "out").exists()


def test_explore_clean_seeds_and_a_checked_replay_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``explore`` over three clean seeds exits 0; ``run --profile`` checks and says so."""
    path = tmp_path / "s.toml"
    path.write_text(SCENARIO)
    out = tmp_path / "x"
    args = ["explore", str(path), "--seeds", "2", "--first-seed", "5", "--protocol", "consumer"]
    assert main([*args, "--out", str(out)]) == 0, capsys.readouterr().err
    err = capsys.readouterr().err
    assert "consumer: 2 seeds, no violation" in err and "seeds 5..6, profile explore" in err
    summary = json.loads((out / "explore.json").read_text())
    assert summary["seeds"] == [5, 6] and summary["profile"]["name"] == "explore"
    assert summary["protocols"]["consumer"] == {
        "seeds_checked": 2,
        "violation": None,
        "failed_runs": [],
    }
    run = tmp_path / "run"
    replay = ["run", str(path), "--engine", "sim", "--protocol", "consumer", "--seed", "5"]
    code = main([*replay, "--profile", "explore", "--out", str(run)])
    assert code == 0
    assert "consumer: online checks: no violation" in capsys.readouterr().err
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["engine"]["checks"]["consumer"]["violation_count"] == 0
    assert manifest["engine"]["profile"]["name"] == "explore"
