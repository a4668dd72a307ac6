"""``rebalance-emu submit``: the ``ray job submit`` command it builds (no Ray here;
``tests/integration/test_ray_job_submit.py`` submits one to a real head)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from emulator import submit
from emulator.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_the_runtime_env_carries_the_source_tree() -> None:
    env = submit.runtime_env(ROOT)
    assert env["working_dir"] == str(ROOT) and "pip" not in env
    assert {".git", ".venv", "runs", "tests/bench/results"} <= set(env["excludes"])
    pip = submit.runtime_env(ROOT, pip=True)["pip"]
    assert {d.split(">")[0].split("=")[0] for d in pip} == set(submit.RUN_REQUIREMENTS)


def test_dry_run_prints_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["submit", "quickstart", "--protocol", "all", "--out", "/shared/runs/q",
         "--address", "http://head:8265", "--dry-run"]
    )  # fmt: skip
    assert code == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("ray job submit --address http://head:8265 --runtime-env-json ")
    head, _, job = line.partition(" -- ")
    env = json.loads(head.split("--runtime-env-json ", 1)[1].strip("'"))
    assert env["working_dir"] == str(ROOT)
    assert job == (
        "python -m emulator.cli run quickstart --protocol "
        "zookeeper,classic-eager,classic-cooperative,consumer --ray-address auto "
        "--out /shared/runs/q"
    )


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["quickstart", "--out", "runs/q"], "--out runs/q"),
        (["/etc/hostname", "--out", "/x"], "outside the working directory"),
        (["no-such", "--out", "/x"], "no-such"),
    ],
)
def test_bad_input_is_one_line(
    args: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["submit", *args, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert named in err and len(err.strip().splitlines()) == 1
