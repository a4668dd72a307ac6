"""``rebalance-emu experiment`` end to end on a real local Ray and Spark.

Two protocols x three seeds of a one-join scenario, two trials at a time: the
first invocation is interrupted (SIGINT) once two trials completed; the same command resumes it,
runs only what is left, and writes the report, whose statistics are checked
against values computed here by hand from the trials' own metrics.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.spark, pytest.mark.slow]

DATA = Path(__file__).resolve().parents[1] / "data"

# The exact null distribution of Mann-Whitney's U for 3 against 3 values: of the
# C(6, 3) = 20 equally likely rank arrangements, how many give U = 0 .. 9.
U_COUNTS_3_3 = [1, 1, 2, 3, 3, 3, 3, 2, 1, 1]


def _env() -> dict[str, str]:
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", SPARK_LOCAL_IP="127.0.0.1")
    env.pop("RAY_AUTH_MODE", None)
    return env


def _start(tmp_path: Path, out: Path, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable,
        "-m",
        "emulator.cli",
        "experiment",
        str(tmp_path / "experiment_tiny_exp.toml"),
        "--out",
        str(out),
        *extra,
    ]
    with log.open("wb") as f:
        return subprocess.Popen(cmd, cwd=tmp_path, env=_env(), stdout=f, stderr=f)


def _completed(out: Path) -> list[str]:
    done = []
    for tj in sorted((out / "trials").glob("*/trial.json")):
        if json.loads(tj.read_text()).get("status") == "completed":
            done.append(tj.parent.name)
    return done


def _hand_p(a: list[float], b: list[float]) -> tuple[float, float]:
    """U of ``a`` (pairs a > b) and its exact two-sided p for 3 vs 3 values without ties."""
    u = sum(1.0 for x in a for y in b if x > y)
    total = sum(U_COUNTS_3_3)
    le = sum(U_COUNTS_3_3[: int(u) + 1]) / total
    ge = sum(U_COUNTS_3_3[int(u) :]) / total
    return u, min(1.0, 2 * min(le, ge))


def test_an_experiment_resumes_after_an_interrupt_and_reports_the_right_statistics(
    tmp_path: Path,
) -> None:
    for name in ("experiment_tiny.toml", "experiment_tiny_exp.toml"):
        shutil.copy(DATA / name, tmp_path / name)
    out = tmp_path / "exp"
    first = _start(tmp_path, out, tmp_path / "first.log", "--no-report")
    deadline = time.monotonic() + 240
    while len(_completed(out)) < 2 and time.monotonic() < deadline:
        assert first.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
        time.sleep(0.5)
    assert len(_completed(out)) >= 2, "two trials did not complete within the bound"
    kept = {t: (out / "trials" / t / "manifest.json").read_text() for t in _completed(out)}
    first.send_signal(signal.SIGINT)
    assert first.wait(timeout=60) == 130
    log1 = (tmp_path / "first.log").read_text()
    assert "run the same command to resume" in log1
    record = json.loads((out / "experiment.json").read_text())
    assert record["status"] == "interrupted"
    assert len(_completed(out)) < 6  # the interrupt came before the end

    second = _start(tmp_path, out, tmp_path / "second.log")
    assert second.wait(timeout=600) == 0, (tmp_path / "second.log").read_text()[-3000:]
    log2 = (tmp_path / "second.log").read_text()
    # trials may complete between the count and the interrupt (two run at a time)
    assert any(f"{n} of 6 trials already done" in log2 for n in range(len(kept), len(kept) + 3))
    for tid, manifest in kept.items():  # completed trials were not run again
        assert (out / "trials" / tid / "manifest.json").read_text() == manifest
        command = json.loads(manifest)["command"]  # the experiment's, not the Ray worker's
        assert "experiment" in command and command[-1] == f"(trial {tid})"
    assert sorted(_completed(out)) == sorted(p.name for p in (out / "trials").iterdir())
    assert len(_completed(out)) == 6
    assert (out / "report" / "report.html").is_file()
    metrics = json.loads((out / "report" / "metrics.json").read_text())
    assert metrics["excluded"] == []

    # By hand, from each trial's own metrics (its analysis.json).
    values: dict[str, list[float]] = {"classic-eager": [], "consumer": []}
    for d in sorted((out / "trials").iterdir()):
        a = json.loads((d / "analysis.json").read_text())
        assert a["evidence"]["verdict"] == "complete"
        proto = json.loads((d / "trial.json").read_text())["protocol"]
        (join,) = [e for e in a["metrics"]["episodes"] if e["kind"] == "join"]
        assert join["time_to_stable_ms"] is not None
        values[proto].append(float(join["time_to_stable_ms"]))
    rows: dict[str, dict[str, Any]] = {
        r["protocol"]: r
        for r in metrics["summaries"]
        if r["episode"] == "join" and r["metric"] == "time_to_stable_ms"
    }
    for proto, vals in values.items():
        r = rows[proto]
        assert len(vals) == 3 and r["n"] == 3
        assert r["median"] == pytest.approx(sorted(vals)[1])
        assert r["min"] == pytest.approx(min(vals)) and r["max"] == pytest.approx(max(vals))
        _lo, mid, hi = sorted(vals)
        assert r["p95"] == pytest.approx(mid + 0.9 * (hi - mid))  # h = 2 x 0.95
        assert min(vals) <= r["ci_low"] <= r["median"] <= r["ci_high"] <= max(vals)
    (test,) = [
        t for t in metrics["tests"] if t["episode"] == "join" and t["metric"] == "time_to_stable_ms"
    ]
    a, b = values[test["a"]], values[test["b"]]
    if len(set(a + b)) == 6:  # no ties: the exact test
        u, p = _hand_p(a, b)
        assert test["method"] == "exact"
        assert test["u"] == u and test["p_value"] == pytest.approx(p)
    md = (out / "report" / "report.md").read_text()
    assert "tiny · defaults · join" in md and "Do the protocols differ" in md
    assert list((out / "report" / "plots").glob("episode_*.png"))


def test_an_experiment_on_the_sim_engine_runs_its_trials_as_ray_tasks(tmp_path: Path) -> None:
    for name in ("experiment_tiny.toml", "experiment_tiny_exp.toml"):
        shutil.copy(DATA / name, tmp_path / name)
    out = tmp_path / "exp-sim"
    first = _start(tmp_path, out, tmp_path / "sim.log", "--engine", "sim", "--no-report")
    assert first.wait(timeout=300) == 0, (tmp_path / "sim.log").read_text()[-3000:]
    assert "on the sim engine" in (tmp_path / "sim.log").read_text()
    assert len(_completed(out)) == 6
    for d in (out / "trials").iterdir():
        manifest = json.loads((d / "manifest.json").read_text())
        assert manifest["engine"]["name"] == "sim" and manifest["status"] == "completed"
        assert json.loads((d / "trial.json").read_text())["engine"] == "sim"
    # The same command finds everything done; the real engine refuses to resume it.
    again = _start(tmp_path, out, tmp_path / "again.log", "--engine", "sim", "--no-report")
    assert again.wait(timeout=120) == 0
    assert "6 of 6 trials already done" in (tmp_path / "again.log").read_text()
    real = _start(tmp_path, out, tmp_path / "real.log", "--no-report")
    assert real.wait(timeout=120) != 0
    assert "ran with other settings" in (tmp_path / "real.log").read_text()
