"""``experiment --engine sim --parallel 1``: the trials run in this process, without Ray.

The in-process path shares the bookkeeping of the Ray path (``trial.json``
states, ``experiment.json``, progress lines, resuming, interrupts); these
tests run it with Ray made unimportable, so any use of Ray fails them.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

import actors.experiment as runner
from emulator.experiment import Experiment, load_experiment

SCENARIO = """
name = "wee"
seed = 5
duration_s = 12.0
time_scale = 0.5

[cluster]
brokers = 1
zookeeper_ensemble = 1

[[topics]]
name = "t"
partitions = 4
replication_factor = 1

[producer]
rate_per_s = 40.0

[group]
id = "wee-group"
consumers = 2
processing_ms_per_message = 5.0

[kafka]
"auto.offset.reset" = "smallest"

[[timeline]]
at_s = 6.0
action = "join"
"""

EXPERIMENT = """
name = "wee-exp"
scenarios = ["wee.toml"]
protocols = ["zookeeper", "classic-eager"]
seeds = 2
cpus_per_trial = 2
"""


@pytest.fixture(autouse=True)
def no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    """``import ray`` fails (a None entry in sys.modules raises ImportError)."""
    monkeypatch.setitem(sys.modules, "ray", None)
    monkeypatch.delitem(sys.modules, "actors.remote", raising=False)


def _experiment(tmp_path: Path) -> tuple[Path, Experiment]:
    (tmp_path / "wee.toml").write_text(SCENARIO)
    path = tmp_path / "wee-exp.toml"
    path.write_text(EXPERIMENT)
    return path, load_experiment(path).on_engine("sim")


def _trial_json(out: Path, tid: str) -> dict[str, Any]:
    data = json.loads((out / "trials" / tid / "trial.json").read_text())
    assert isinstance(data, dict)
    return data


def test_sim_trials_run_in_process_interrupted_then_resumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _path, exp = _experiment(tmp_path)
    assert runner.runs_in_process(exp, 1)
    assert not runner.runs_in_process(exp, 2) and not runner.runs_in_process(exp, None)
    assert not runner.runs_in_process(exp.on_engine("real"), 1)
    ids = [t.id for t in exp.trials]
    assert ids == [
        "wee.defaults.zookeeper.s5",
        "wee.defaults.classic-eager.s5",
        "wee.defaults.zookeeper.s6",
        "wee.defaults.classic-eager.s6",
    ]
    out = tmp_path / "exp"
    real_body = runner.run_trial
    calls: list[str] = []

    def interrupted_third(*args: Any) -> dict[str, Any]:
        calls.append(args[3])
        if len(calls) == 3:  # the run started, then Ctrl-C; the cancel failed the run
            Path(args[3], "manifest.json").write_text('{"status": "failed"}')
            raise KeyboardInterrupt
        return real_body(*args)

    monkeypatch.setattr(runner, "run_trial", interrupted_third)
    lines: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        runner.run_experiment(exp, out, parallel=1, say=lines.append, progress_every_s=0.05)
    assert [Path(c).name for c in calls] == ids[:3]
    assert [_trial_json(out, t)["status"] for t in ids[:3]] == [
        "completed",
        "completed",
        "interrupted",
    ]
    assert not (out / "trials" / ids[3]).exists()
    record = json.loads((out / "experiment.json").read_text())
    assert record["status"] == "interrupted"
    assert record["states"][ids[2]] == "interrupted" and record["states"][ids[3]] == "pending"
    assert lines[0] == f"wee-exp: 4 trials to run, 1 at a time in this process -> {out}"
    assert re.fullmatch(
        rf"{re.escape(ids[0])}: completed in \d+ s; 1/4 trials done, 0 running, 3 left; "
        r"~[\d.]+ min left",
        next(x for x in lines if x.startswith(ids[0])),
    )
    # the timer's status lines while a trial runs, as while Ray tasks run
    assert any(re.fullmatch(r"\d/4 trials done, 1 running, \d left.*", x) for x in lines)
    for tid in ids[:2]:
        tj = _trial_json(out, tid)
        assert tj["engine"] == "sim" and tj["wall_s"] > 0 and tj["notes"] == []
        assert 0 < tj["cpu_s"] < 60  # this trial's CPU, not the process's since it started
        manifest = json.loads((out / "trials" / tid / "manifest.json").read_text())
        assert manifest["engine"]["name"] == "sim" and manifest["status"] == "completed"
        assert manifest["command"][-1] == f"(trial {tid})"
    kept = {t: (out / "trials" / t / "manifest.json").read_bytes() for t in ids[:2]}

    monkeypatch.setattr(runner, "run_trial", real_body)
    lines.clear()
    outcome = runner.run_experiment(exp, out, parallel=1, say=lines.append)
    assert outcome.in_process and outcome.skipped == 2 and outcome.ran == 2
    assert outcome.states == dict.fromkeys(ids, "completed")
    assert lines[0] == "2 of 4 trials already done; running 2"
    for tid, data in kept.items():  # completed trials were not run again
        assert (out / "trials" / tid / "manifest.json").read_bytes() == data
    assert json.loads((out / "experiment.json").read_text())["status"] == "finished"
    for tid in ids[2:]:
        assert _trial_json(out, tid)["status"] == "completed"
    # a sim run is a function of scenario, seed and engine: the two seeds differ
    digests = {
        json.dumps(json.loads((out / "trials" / t / "manifest.json").read_text())["engine"])
        for t in ids
    }
    assert len(digests) == 4
    assert sys.modules.get("ray") is None


def _fake_body(fail: set[str]) -> Any:
    """A trial body that writes a completed manifest, or raises for the trials in ``fail``."""

    def body(
        document: dict[str, Any],
        source: str,
        protocol: str,
        out_dir: str,
        command: list[str] | None = None,
        engine: str = "real",
    ) -> dict[str, Any]:
        assert engine == "sim"
        if Path(out_dir).name in fail:
            raise RuntimeError("boom")
        Path(out_dir, "manifest.json").write_text('{"status": "completed"}')
        return {"status": "completed", "notes": [], "wall_s": 0.0}

    return body


def test_an_exception_in_a_trial_fails_it_and_retry_failed_runs_it_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _path, exp = _experiment(tmp_path)
    out = tmp_path / "exp"
    bad = exp.trials[1].id
    monkeypatch.setattr(runner, "run_trial", _fake_body({bad}))
    lines: list[str] = []
    outcome = runner.run_experiment(exp, out, parallel=1, say=lines.append)
    assert outcome.count("completed") == 3 and outcome.states[bad] == "failed"
    tj = _trial_json(out, bad)
    assert tj["status"] == "failed" and tj["error"] == "RuntimeError: boom"
    assert any(x.startswith(f"{bad}: failed in 0 s: RuntimeError: boom;") for x in lines)
    assert any("(1 failed or degraded)" in x for x in lines)

    again = runner.run_experiment(exp, out, parallel=1, say=lines.append)
    assert again.ran == 0 and again.states[bad] == "failed"  # kept as recorded
    monkeypatch.setattr(runner, "run_trial", _fake_body(set()))
    retried = runner.run_experiment(exp, out, parallel=1, retry_failed=True, say=lines.append)
    assert retried.ran == 1 and retried.count("completed") == 4


def test_the_cli_runs_sim_trials_in_process_and_refuses_a_ray_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from emulator.cli import main

    path, exp = _experiment(tmp_path)
    monkeypatch.setattr(runner, "run_trial", _fake_body(set()))
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    out = tmp_path / "exp"
    args = ["experiment", str(path), "--engine", "sim", "--parallel", "1", "--out", str(out)]
    assert main([*args, "--ray-address", "127.0.0.1:6379"]) == 2
    assert "runs the trials in this process: drop --ray-address" in capsys.readouterr().err
    assert main([*args, "--no-report"]) == 0
    err = capsys.readouterr().err
    assert "on the sim engine in this process ->" in err
    assert "4 of 4 trials completed; 4 run now" in err
    assert "RAY_AUTH_TOKEN" not in os.environ  # no local Ray was prepared
    assert all(_trial_json(out, t.id)["status"] == "completed" for t in exp.trials)
