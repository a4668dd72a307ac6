"""The command line as a user meets it: bad input gets one line and a non-zero exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled")
    return subprocess.run(
        [sys.executable, "-m", "emulator.cli", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
    )


def _one_line_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if "error" in ln.lower()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("rebalance-emu: error:")
    assert proc.stderr.rstrip().endswith(lines[0])
    assert "Traceback" not in proc.stderr
    for n in needles:
        assert n in lines[0]


def test_bad_flag(tmp_path: Path) -> None:
    proc = _cli("run", "quickstart", "--protocoll", "zookeeper", cwd=tmp_path)
    _one_line_error(proc, "--protocoll")
    assert proc.returncode == 2


def test_unknown_protocol(tmp_path: Path) -> None:
    _one_line_error(_cli("run", "quickstart", "--protocol", "paxos", cwd=tmp_path), "paxos")


def test_malformed_scenario_names_the_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    text = (ROOT / "emulator/scenarios/quickstart.toml").read_text()
    bad.write_text(text.replace("consumers = 4", 'consumers = "four"'))
    _one_line_error(_cli("run", str(bad), cwd=tmp_path), "[group].consumers")
    broken = tmp_path / "broken.toml"
    broken.write_text("name = \n")
    _one_line_error(_cli("run", str(broken), cwd=tmp_path), "broken.toml")


def test_missing_scenario(tmp_path: Path) -> None:
    _one_line_error(_cli("run", "no-such.toml", cwd=tmp_path), "no-such.toml")


def test_unreachable_zookeeper_keeps_the_manifest(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = _cli("run", "quickstart", "--zookeeper", "127.0.0.1:1", "--out", str(out),
                cwd=tmp_path)
    _one_line_error(proc, "unreachable", "127.0.0.1:1")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    assert "unreachable" in manifest["error"]
    assert manifest["scenario"]["name"] == "quickstart"


def test_refuses_to_overwrite_a_run(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "keep.txt").write_text("precious")
    _one_line_error(_cli("run", "quickstart", "--out", str(out), cwd=tmp_path), "not empty")
    assert (out / "keep.txt").read_text() == "precious"


@pytest.mark.zk
def test_zk_cli_start_status_stop(tmp_path: Path) -> None:
    d = str(tmp_path / "zk")
    start = _cli("zk", "start", "--dir", d, cwd=tmp_path)
    try:
        assert start.returncode == 0, start.stderr
        assert "127.0.0.1:" in start.stdout
        status = _cli("zk", "status", "--dir", d, cwd=tmp_path)
        assert status.returncode == 0 and "standalone" in status.stdout
    finally:
        stop = _cli("zk", "stop", "--dir", d, cwd=tmp_path)
    assert stop.returncode == 0
    after = _cli("zk", "status", "--dir", d, cwd=tmp_path)
    assert after.returncode != 0


def test_out_naming_a_file_is_one_line(tmp_path: Path) -> None:
    out = tmp_path / "a-file"
    out.write_text("precious")
    proc = _cli("run", "quickstart", "--out", str(out), cwd=tmp_path)
    _one_line_error(proc, "is a file, not a directory")
    assert proc.returncode == 2 and out.read_text() == "precious"


def test_a_bad_zk_auth_is_one_line_without_the_password(tmp_path: Path) -> None:
    proc = _cli("run", "quickstart", "--zk-auth", ":hunter2", cwd=tmp_path)
    _one_line_error(proc, "--zk-auth must be user:password")
    assert "hunter2" not in proc.stderr


def test_live_status_shows_claim_columns_for_the_0_8_consumer_only(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from emulator.cli import _LiveStatus

    st = {"duration_s": 10, "emu_s": 5, "members": 2, "attempts": 3, "conflicts": 1}
    for protocol in ("zookeeper", "classic-eager"):
        _LiveStatus()({**st, "protocol": protocol})
    lines = capsys.readouterr().err.strip().splitlines()
    assert "attempts 3  conflicts 1" in lines[0]
    assert "attempts" not in lines[1] and "conflicts" not in lines[1]


@pytest.mark.parametrize(
    ("env", "want"),
    [({}, "token 0"), ({"RAY_ADDRESS": "10.0.0.1:6379"}, "None None")],
)
def test_a_local_ray_gets_loopback_and_a_token_a_cluster_keeps_its_own(
    env: dict[str, str], want: str
) -> None:
    code = (
        "import os\n"
        "from emulator.cli import prepare_local_ray\n"
        "prepare_local_ray(joining=False)\n"
        "e = os.environ\n"
        "print(e.get('RAY_AUTH_MODE'), e.get('RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER'))"
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    proc = subprocess.run(
        [sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True,
        timeout=60, cwd=ROOT,
    )
    assert proc.stdout.strip() == want, proc.stderr
