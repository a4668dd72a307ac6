"""Experiment files, their trials, and the statistics over trials (no Ray, no Spark)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from analysis.experiment import collect, episode_labels, statistics
from emulator.experiment import (
    ExperimentError,
    bundled_experiments,
    eta_seconds,
    load_experiment,
    trial_state,
)

SCENARIO = """
name = "small"
seed = 7
duration_s = 20.0
time_scale = 0.5

[[topics]]
name = "t"
partitions = 4

[group]
consumers = 2

[[timeline]]
at_s = 10.0
action = "join"
"""


def write(tmp_path: Path, text: str, name: str = "exp.toml") -> Path:
    (tmp_path / "small.toml").write_text(SCENARIO)
    p = tmp_path / name
    p.write_text(text)
    return p


def test_trials_are_the_product_of_scenarios_points_seeds_and_protocols(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        """
        scenarios = ["small.toml"]
        protocols = ["classic-eager", "consumer"]
        seeds = 2
        [grid]
        "group.consumers" = [2, 3]
        [grid.kafka]
        session.timeout.ms = [10000, 45000]
        """,
    )
    exp = load_experiment(p)
    assert len(exp.trials) == 2 * 2 * 2 * 2
    assert exp.seeds == {"small": (7, 8)}  # from the scenario's own seed
    assert exp.grid == (("group.consumers", (2, 3)), ("kafka.session.timeout.ms", (10000, 45000)))
    t = exp.trials[-1]
    assert t.id == "small.group.consumers=3+kafka.session.timeout.ms=45000.consumer.s8"
    assert t.document["group"]["consumers"] == 3
    assert t.document["kafka"]["session.timeout.ms"] == 45000
    assert t.document["seed"] == 8
    sc = t.scenario_object()
    assert sc.group.consumers == 3 and sc.seed == 8
    assert len({x.id for x in exp.trials}) == len(exp.trials)
    assert len({x.fingerprint() for x in exp.trials}) == len(exp.trials)


def test_overrides_of_seeds_and_protocols(tmp_path: Path) -> None:
    p = write(tmp_path, 'scenarios = ["small.toml"]\nseeds = [3, 9]\n')
    exp = load_experiment(p)
    assert exp.protocols == ("zookeeper", "classic-eager", "classic-cooperative", "consumer")
    assert [t.seed for t in exp.trials[:4]] == [3, 3, 3, 3]
    exp = load_experiment(p, seeds=5, protocols=["consumer"])
    assert [t.seed for t in exp.trials] == [7, 8, 9, 10, 11]
    assert {t.protocol for t in exp.trials} == {"consumer"}


def test_a_sim_trial_is_another_trial_and_a_real_ones_fingerprint_is_unchanged(
    tmp_path: Path,
) -> None:
    import hashlib
    import json

    exp = load_experiment(write(tmp_path, 'scenarios = ["small.toml"]\nseeds = [3]\n'))
    real = exp.trials[0]
    blob = json.dumps(
        {"document": real.document, "protocol": real.protocol}, sort_keys=True, default=str
    )
    assert real.fingerprint() == hashlib.sha256(blob.encode()).hexdigest()[:16]  # as before
    sim = exp.on_engine("sim")
    assert sim.engine == "sim" and sim.cpus_per_trial == 1.0
    assert [t.id for t in sim.trials] == [t.id for t in exp.trials]
    assert all(t.engine == "sim" for t in sim.trials)
    assert sim.trials[0].fingerprint() != real.fingerprint()  # a resume cannot mix engines
    assert sim.to_dict()["engine"] == "sim" and exp.on_engine("real") is exp
    with pytest.raises(ExperimentError, match="unknown engine 'warp'"):
        exp.on_engine("warp")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('scenarios = ["nope"]', "neither a bundled scenario"),
        ('scenarios = ["small.toml"]\nsurprise = 1', "unknown key 'surprise'"),
        ('scenarios = ["small.toml"]\nprotocols = ["kraft"]', "unknown protocol 'kraft'"),
        ('scenarios = ["small.toml"]\nseeds = 0', "seeds must be between 1"),
        ('scenarios = ["small.toml"]\nseeds = [1, 1]', "lists a seed twice"),
        ('scenarios = ["small.toml"]\n[grid]\n"group.consumers" = []', "non-empty list"),
        ('scenarios = ["small.toml"]\n[grid]\n"topics.partitions" = [1]', "not a scenario key"),
        ('scenarios = ["small.toml"]\n[grid]\n"group.consumers" = [0]', "group].consumers"),
        ('scenarios = ["small.toml"]\n[grid.kafka]\n"session.timeout.ms" = ["x"]', "at kafka"),
        ('scenarios = ["small.toml"]\ncpus_per_trial = 0', "cpus_per_trial"),
        ("scenarios = [", "invalid TOML"),
    ],
)
def test_bad_experiments_fail_with_one_line_naming_the_problem(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(ExperimentError) as err:
        load_experiment(write(tmp_path, text))
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_the_bundled_sweep_expands() -> None:
    exp = load_experiment(bundled_experiments()["generations-sweep"])
    assert len(exp.trials) == 2 * 4 * 3
    assert {t.point_label for t in exp.trials} == {"group.consumers=4", "group.consumers=8"}


def test_trial_state_and_eta() -> None:
    assert trial_state(None, None) == "pending"
    assert trial_state({"status": "running"}, {"status": "running"}) == "pending"
    assert trial_state({"status": "interrupted"}, {"status": "interrupted"}) == "pending"
    assert trial_state({"status": "completed"}, {"status": "completed"}) == "completed"
    assert trial_state({"status": "failed"}, None) == "failed"
    assert trial_state(None, {"status": "degraded"}) == "degraded"
    # A run that failed or lost a host while the experiment cancelled it is run
    # again; one that completed before the cancel reached it is kept.
    assert trial_state({"status": "interrupted"}, {"status": "failed"}) == "pending"
    assert trial_state({"status": "interrupted"}, {"status": "degraded"}) == "pending"
    assert trial_state({"status": "running"}, {"status": "failed"}) == "pending"
    assert trial_state({"status": "interrupted"}, {"status": "completed"}) == "completed"
    assert trial_state({"status": "failed"}, {"status": "failed"}) == "failed"
    assert trial_state({"status": "degraded"}, {"status": "degraded"}) == "degraded"
    assert eta_seconds([], 3, 1, 1) is None
    assert eta_seconds([10.0, 20.0], 4, 2, 2) == pytest.approx(45.0)


def test_episode_labels_number_repeated_kinds() -> None:
    eps = [{"kind": k} for k in ("formation", "join", "crash", "join", "join")]
    assert episode_labels(eps) == ["formation", "join", "crash", "join #2", "join #3"]


def _trial(tid: str, proto: str, seed: int, state: str = "completed") -> dict[str, Any]:
    return {
        "id": tid,
        "scenario": "s",
        "protocol": proto,
        "seed": seed,
        "point_label": "defaults",
        "_state": state,
    }


def _analysis(stable: list[float | None], dup: int, verdict: str = "complete") -> dict[str, Any]:
    eps = [{"kind": "formation", "time_to_stable_ms": 100.0}]
    eps += [{"kind": "join", "time_to_stable_ms": s, "duplicates": dup} for s in stable]
    return {
        "evidence": {"verdict": verdict, "problems": [] if verdict == "complete" else ["damaged"]},
        "metrics": {"episodes": eps, "duplicates": dup, "loss": 0, "anomalies_not_allowed": 0},
    }


def test_statistics_over_seeds_leave_out_failed_and_incomplete_trials() -> None:
    trials = [
        _trial("a1", "classic-eager", 1),
        _trial("a2", "classic-eager", 2),
        _trial("a3", "classic-eager", 3),
        _trial("a4", "classic-eager", 4, state="failed"),
        _trial("b1", "consumer", 1),
        _trial("b2", "consumer", 2),
        _trial("b3", "consumer", 3),
        _trial("b4", "consumer", 4),
    ]
    analyses = {
        "a1": _analysis([2000.0], 0),
        "a2": _analysis([2400.0], 1),
        "a3": _analysis([2200.0], 0),
        "b1": _analysis([5000.0], 0),
        "b2": _analysis([5200.0], 0),
        "b3": _analysis([None], 0),  # never settled
        "b4": _analysis([5100.0], 0, verdict="incomplete"),
    }
    cells, excluded = collect({"trials": trials}, analyses)
    assert {x["trial"] for x in excluded} == {"a4", "b4"}
    assert "failed" in next(x["why"] for x in excluded if x["trial"] == "a4")
    assert "incomplete evidence" in next(x["why"] for x in excluded if x["trial"] == "b4")
    summaries, tests = statistics(cells, ["classic-eager", "consumer"])
    row = {(r["protocol"], r["episode"], r["metric"]): r for r in summaries}
    eager = row[("classic-eager", "join", "time_to_stable_ms")]
    assert eager["n"] == 3 and eager["median"] == 2200.0
    assert eager["min"] == 2000.0 and eager["max"] == 2400.0
    assert eager["p95"] == pytest.approx(2200 + 0.9 * 200)  # h = 2 * 0.95 = 1.9
    assert eager["ci_low"] >= 2000.0 and eager["ci_high"] <= 2400.0
    kip = row[("consumer", "join", "time_to_stable_ms")]
    assert kip["n"] == 2 and kip["not_settled"] == 1 and kip["median"] == 5100.0
    (t,) = [x for x in tests if x["episode"] == "join" and x["metric"] == "time_to_stable_ms"]
    # every eager seed below every KIP-848 one: U = 0 of 3 x 2; exact p = 2 / C(5, 2) = 0.2
    assert t["u"] == 0 and t["p_value"] == pytest.approx(0.2) and t["method"] == "exact"
    whole = row[("classic-eager", "whole run", "duplicates")]
    assert whole["values"] == [0.0, 1.0, 0.0]


def test_the_cli_refuses_another_experiments_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from emulator.cli import main

    p = write(tmp_path, 'name = "mine"\nscenarios = ["small.toml"]\n')
    out = tmp_path / "out"
    out.mkdir()
    (out / "experiment.json").write_text('{"plan": {"name": "theirs"}}')
    assert main(["experiment", str(p), "--out", str(out)]) == 2
    assert "holds experiment 'theirs', not 'mine'" in capsys.readouterr().err
    (out / "experiment.json").unlink()
    (out / "stray.txt").write_text("x")
    assert main(["experiment", str(p), "--out", str(out)]) == 2
    assert "holds no experiment" in capsys.readouterr().err
    assert main(["experiment", str(tmp_path / "nope.toml")]) == 2
    assert "not a bundled experiment" in capsys.readouterr().err
    assert main(["experiment", str(p), "--seeds", "0"]) == 2
    assert "--seeds must be at least 1" in capsys.readouterr().err
