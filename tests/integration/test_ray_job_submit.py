"""``rebalance-emu submit``: a run as a Ray job on a real ``ray start`` head.

A head with the dashboard (the Jobs API) on loopback, in a private temp dir;
``rebalance-emu submit`` from a copy of the project uploads that copy as the
job's ``working_dir`` and the job runs ``rebalance-emu run ... --ray-address
auto`` on the head. The copy's ``actors/__init__.py`` records where it was
imported from, so the test sees that the driver *and* the actors imported the
uploaded copy (not the checkout the venv has installed). The head's processes
are killed at the end by their temp dir (``ray stop`` would stop every Ray on
the machine).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

from zk_registry.server import find_free_ports

pytestmark = [pytest.mark.ray, pytest.mark.zk, pytest.mark.slow, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

SCENARIO = """
name = "job"
seed = 5
duration_s = 6.0
time_scale = 0.5

[cluster]
brokers = 1
zookeeper_ensemble = 1

[[topics]]
name = "t"
partitions = 2
replication_factor = 1

[producer]
rate_per_s = 20.0

[group]
id = "job-group"
consumers = 1
processing_ms_per_message = 1.0

[kafka]
"zookeeper.session.timeout.ms" = 6000
"session.timeout.ms" = 6000
"group.consumer.min.session.timeout.ms" = 6000
"group.consumer.session.timeout.ms" = 6000
"auto.offset.reset" = "smallest"
"""

IMPORT_PROBE = """
import os as _os

with open({log!r}, "a") as _f:  # test_ray_job_submit: who imported this copy, from where
    _f.write(f"{{_os.getpid()}} {{__file__}}\\n")
"""


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


def _kill_tree(mark: str) -> None:
    """Stop every process whose command line names ``mark``, and their children."""
    import psutil

    me = os.getpid()
    procs: dict[int, Any] = {}
    for p in psutil.process_iter(["cmdline"]):
        if p.pid != me and any(mark in a for a in (p.info["cmdline"] or [])):
            procs[p.pid] = p
    for p in list(procs.values()):
        with suppress(psutil.Error):
            procs.update((c.pid, c) for c in p.children(recursive=True))
    for p in procs.values():
        with suppress(psutil.Error):
            p.terminate()
    _gone, alive = psutil.wait_procs(list(procs.values()), timeout=3)
    for p in alive:
        with suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(alive, timeout=5)


@contextmanager
def _ray_head(tmp: Path, env: dict[str, str]) -> Iterator[str]:
    """``ray start --head`` with the dashboard on loopback; yields the Jobs API URL."""
    gcs, dash, agent, client = find_free_ports(4)
    cmd = [
        str(BIN / "ray"), "start", "--head", "--node-ip-address", "127.0.0.1",
        "--port", str(gcs), "--num-cpus", "2", "--disable-usage-stats",
        "--include-dashboard", "true", "--dashboard-host", "127.0.0.1",
        "--dashboard-port", str(dash),
        # not the defaults (52365, 10001): another Ray on this machine may hold them
        "--dashboard-agent-listen-port", str(agent),
        "--ray-client-server-port", str(client),
        "--temp-dir", str(tmp / "ray"),
    ]  # fmt: skip
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=90)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        url = f"http://127.0.0.1:{dash}"
        deadline = time.monotonic() + 60.0
        while True:  # the Jobs API answers once the dashboard has loaded its modules
            try:
                if isinstance(_get(f"{url}/api/jobs/"), list):
                    break
            except (OSError, ValueError):
                pass
            assert time.monotonic() < deadline, "the dashboard's Jobs API did not answer"
            time.sleep(0.5)
        yield url
    finally:
        _kill_tree(str(tmp))


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A short temp dir: Ray's unix sockets live under it (paths are limited to 107 bytes)."""
    tmp = Path(tempfile.mkdtemp(prefix="rjs-", dir="/tmp"))
    (tmp / "ray").mkdir()
    yield tmp
    shutil.rmtree(tmp, ignore_errors=True)


def test_a_run_submitted_as_a_ray_job_carries_the_project(short_tmp: Path) -> None:
    tmp = short_tmp
    proj = tmp / "proj"
    proj.mkdir()
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for pkg in ("emulator", "actors", "zk_registry"):
        shutil.copytree(ROOT / pkg, proj / pkg, ignore=skip)
    shutil.copy(ROOT / "pyproject.toml", proj)
    imports = tmp / "imports.log"
    with (proj / "actors" / "__init__.py").open("a") as f:
        f.write(IMPORT_PROBE.format(log=str(imports)))
    (proj / "job.toml").write_text(SCENARIO)
    out = tmp / "out"

    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_ADDRESS")}
    env.update(
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",  # the job's `python` is this venv's
        RAY_TMPDIR=str(tmp),
        RAY_AUTH_MODE="disabled",
        RAY_USAGE_STATS_ENABLED="0",
    )
    job_id = f"emu-test-{os.getpid()}-{int(time.time())}"
    with _ray_head(tmp, env) as url:
        submit = [
            sys.executable, "-m", "emulator.cli", "submit", "job.toml",
            "--protocol", "consumer", "--address", url, "--out", str(out),
            "--submission-id", job_id,
        ]  # fmt: skip
        proc = subprocess.run(
            submit,
            cwd=proj,  # `python -m` imports the copy, so the copy is what is uploaded
            env=env,
            capture_output=True,
            text=True,
            timeout=150,
        )
        logs = proc.stdout + proc.stderr
        assert proc.returncode == 0, logs[-4000:]
        info = _get(f"{url}/api/jobs/{job_id}")
        assert info["status"] == "SUCCEEDED", info
        assert info["runtime_env"]["working_dir"].startswith("gcs://_ray_pkg_"), info
        job_logs = _get(f"{url}/api/jobs/{job_id}/logs")["logs"]  # what `ray job logs` shows
    # the job's own output, tailed by `ray job submit`, and kept by the Jobs API
    assert f"run directory: {out}" in logs
    assert f"run directory: {out}" in job_logs and "completed" in job_logs

    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "completed", manifest.get("error")
    assert manifest["ray"]["address"] == "auto"
    entry = manifest["protocols"]["consumer"]
    assert entry["status"] == "completed"
    assert entry["counts"]["produced"] > 0 and entry["counts"]["unprocessed"] == 0
    logs_written = {p.name for p in (out / "consumer" / "events").glob("*.msgpack")}
    assert {"broker-0.msgpack", "producer-0.msgpack", "host-0.msgpack"} <= logs_written
    assert {"orchestrator.msgpack"} <= logs_written

    # the driver and the actors imported the uploaded copy, unpacked on the head
    uploaded = str(tmp / "ray") + "/"
    driver = Path(manifest["command"][0])
    assert str(driver).startswith(uploaded) and "working_dir_files" in driver.parts, driver
    seen = [line.split(" ", 1) for line in imports.read_text().splitlines()]
    assert {path.startswith(uploaded) and "/working_dir_files/" in path for _, path in seen} == {
        True
    }, seen
    assert len({pid for pid, _ in seen}) >= 4, seen  # the driver, a broker, producer, host
