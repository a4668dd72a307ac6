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
