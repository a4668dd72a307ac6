"""Reliability and security as a user meets them, on the real CLI, Ray and ZooKeeper.

* SIGKILL of the CLI mid-run leaves no process behind (ZooKeeper, Ray, Spark);
* SIGTERM and SIGINT stop a run within seconds: manifest ``interrupted``, every
  log readable, exit 128 + the signal; a second Ctrl-C leaves a valid manifest;
* a local run listens on the loopback only and Ray wants the run's token;
* waits are bounded: an unreachable or silent ``--ray-address``, a port that
  is not ZooKeeper;
* an external ZooKeeper keeps nothing of a run unless ``--keep-zk-data``, and
  ``--zk-auth`` closes the run's znodes to anyone else.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]

LONG = """
name = "long-tiny"
description = "a small legacy group that runs long enough to be stopped"
seed = 3
duration_s = 120.0
time_scale = 1.0

[cluster]
brokers = 1

[[topics]]
name = "t"
partitions = 4
replication_factor = 1

[producer]
rate_per_s = 40.0
topics = ["t"]

[group]
id = "long-group"
consumers = 2
topics = ["t"]
processing_ms_per_message = 2.0

[kafka]
"zookeeper.session.timeout.ms" = 6000
"auto.offset.reset" = "smallest"
"""


def _env() -> dict[str, str]:
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", SPARK_LOCAL_IP="127.0.0.1")
    env.pop("RAY_AUTH_MODE", None)  # a local run chooses its own (a token)
    return env


def _start(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], Path]:
    scenario = tmp_path / "long.toml"
    scenario.write_text(LONG)
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "emulator.cli", "run", str(scenario), "--out", str(out), *args],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, out


def _wait_running(proc: subprocess.Popen[str], out: Path, timeout: float = 120.0) -> None:
    """Until the consumer host has flushed events (every actor is up), bounded."""
    deadline = time.monotonic() + timeout
    log = out / "zookeeper" / "events" / "host-0.msgpack"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the run ended early: {proc.communicate()[1][-2000:]}")
        if log.is_file() and log.stat().st_size > 0:
            time.sleep(2.0)
            return
        time.sleep(0.25)
    proc.kill()
    raise AssertionError("the run did not start within the bound")


def _tree(pid: int) -> dict[int, float]:
    """The process and its descendants: pid -> create time."""
    root = psutil.Process(pid)
    out = {}
    for p in [root, *root.children(recursive=True)]:
        try:
            out[p.pid] = p.create_time()
        except psutil.NoSuchProcess:
            continue
    return out


def _alive(procs: dict[int, float]) -> list[str]:
    left = []
    for pid, created in procs.items():
        try:
            p = psutil.Process(pid)
            if p.create_time() == created and p.status() != psutil.STATUS_ZOMBIE:
                left.append(f"{pid} {p.name()}")
        except psutil.NoSuchProcess:
            continue
    return left


def _finish(proc: subprocess.Popen[str], timeout: float = 60.0) -> tuple[int, float, str]:
    t0 = time.monotonic()
    try:
        _out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("the CLI did not exit within the bound") from None
    return proc.returncode, time.monotonic() - t0, err


def _listeners(pids: set[int]) -> list[tuple[str, int, int]]:
    """``(address, port, pid)`` of every listening TCP socket of these processes."""
    return [
        (c.laddr.ip, c.laddr.port, c.pid)
        for c in psutil.net_connections(kind="tcp")
        if c.status == psutil.CONN_LISTEN and c.pid in pids
    ]


@pytest.mark.slow
def test_sigterm_stops_within_seconds_on_loopback_only(tmp_path: Path) -> None:
    proc, out = _start(tmp_path)
    _wait_running(proc, out)
    tree = _tree(proc.pid)
    names = " ".join(psutil.Process(p).name() for p in tree if psutil.pid_exists(p))
    assert "java" in names and "raylet" in names and "gcs_server" in names
    listening = _listeners(set(tree))
    assert listening, "a run listens somewhere (ZooKeeper, Ray)"
    beyond = [x for x in listening if x[0] not in ("127.0.0.1", "::1", "::ffff:127.0.0.1")]
    assert beyond == []
    token_file = Path.home() / ".ray" / "auth_token"
    assert not token_file.exists() or (
        token_file.stat().st_mtime < psutil.Process(proc.pid).create_time()
    ), "the run's token is never written to disk"
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)  # a second signal while it stops: it only hurries
    code, took, err = _finish(proc)
    assert code == 128 + signal.SIGTERM, err
    assert took < 30.0  # bounded; measured ~3 s (README, Reliability)
    assert "Traceback" not in err and "SIGTERM: stopping the run" in err
    assert "SIGINT again: still stopping" in err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    entry = manifest["protocols"]["zookeeper"]  # the second signal cut nothing short
    assert entry["status"] == "interrupted" and entry["counts"]["produced"] > 0
    from analysis.evidence import assess_run_dir

    ev = assess_run_dir(out)["zookeeper"]
    assert ev.problems == ["the run was interrupted: its logs stop where it was stopped"]
    time.sleep(5.0)
    assert _alive(tree) == []


@pytest.mark.slow
def test_sigkill_of_the_cli_leaves_no_process_behind(tmp_path: Path) -> None:
    proc, out = _start(tmp_path)
    _wait_running(proc, out)
    tree = _tree(proc.pid)
    del tree[proc.pid]
    zk_ports = [p for a, p, pid in _listeners(set(tree)) if "java" in psutil.Process(pid).name()]
    assert zk_ports
    proc.kill()
    proc.wait(timeout=10)
    deadline = time.monotonic() + 30.0
    while _alive(tree) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _alive(tree) == []
    for port in zk_ports:
        with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1.0):
            pass
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "running"  # says it never finished (compare: incomplete)


def _listener(answer: bytes) -> Iterator[int]:
    """A loopback port that accepts connections and answers ``answer`` (b"": never a word)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
                held.append(conn)
                if answer:
                    conn.sendall(answer)
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        yield int(srv.getsockname()[1])
    finally:
        stop.set()
        t.join(timeout=2)
        for c in held:
            c.close()
        srv.close()


@pytest.fixture
def chatty_port() -> Iterator[int]:
    """A loopback port that answers every connection with bytes of another protocol."""
    yield from _listener(b"SSH-2.0-OpenSSH_9.2\r\n" + bytes(64))


def test_a_silent_ray_address_fails_within_the_probe_bound() -> None:
    from actors.ray_session import probe_ray
    from actors.run_files import RunError

    for port in _listener(b""):
        t0 = time.monotonic()
        with pytest.raises(RunError, match=f"127.0.0.1:{port} did not answer within 1 s"):
            probe_ray(f"127.0.0.1:{port}", timeout_s=1.0)
        assert time.monotonic() - t0 < 5.0


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "emulator.cli", *args],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=180,
    )


def _one_line(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert proc.returncode == 1, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("rebalance-emu: error:")]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("where", ["closed", "not-ray"])
def test_a_wrong_ray_address_fails_within_the_bound(
    tmp_path: Path, chatty_port: int, where: str
) -> None:
    port = 1 if where == "closed" else chatty_port
    out = tmp_path / "run"
    t0 = time.monotonic()
    proc = _cli(
        tmp_path, "run", "quickstart", "--ray-address", f"127.0.0.1:{port}", "--out", str(out)
    )
    took = time.monotonic() - t0
    _one_line(proc, f"127.0.0.1:{port}", "unreachable" if where == "closed" else "not a Ray head")
    assert took < 60.0  # checked before anything starts, not Ray's minutes of retries
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "127.0.0.1" in manifest["error"]


def test_a_port_that_is_not_zookeeper_fails_in_one_line(tmp_path: Path, chatty_port: int) -> None:
    proc = _cli(
        tmp_path,
        "run",
        "quickstart",
        "--zookeeper",
        f"127.0.0.1:{chatty_port}",
        "--out",
        str(tmp_path / "run"),
    )
    _one_line(proc, f"127.0.0.1:{chatty_port}", "not a serving ZooKeeper")


# ------------------------------------------------------------- external ZooKeeper


TINY_LEGACY = LONG.replace("duration_s = 120.0", "duration_s = 6.0").replace(
    'name = "long-tiny"', 'name = "zk-hygiene"'
)


def test_an_external_zookeeper_keeps_nothing_and_zk_auth_closes_the_znodes(
    ray_local: None, zk_connect: str, tmp_path: Path
) -> None:
    from kazoo.exceptions import NoAuthError

    from actors.orchestrator import run_scenario
    from emulator.scenario import parse_scenario
    from tests.zk_fixtures import close_client, make_client
    from zk_registry.auth import ZkAuth
    from zk_registry.client import delete_chroot

    scenario = parse_scenario(TINY_LEGACY, "zk-hygiene.toml")
    auth = ZkAuth("emu", "s3cret:pw")
    run_scenario(
        scenario,
        ["zookeeper"],
        tmp_path / "kept",
        zookeeper=zk_connect,
        zk_auth=auth,
        keep_zk_data=True,
    )
    manifest = json.loads((tmp_path / "kept" / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    assert manifest["zookeeper"]["auth"] == "digest:emu"
    assert "s3cret" not in json.dumps(manifest)
    kept = manifest["zookeeper"]["chroots"]["zookeeper"]
    assert kept["kept"] is True
    base = zk_connect[zk_connect.index("/") :]
    assert kept["path"].startswith(f"{base}/rebalance-emu/")
    hosts = zk_connect[: zk_connect.index("/")]
    stranger = make_client(hosts)
    owner = make_client(hosts)
    owner.add_auth("digest", "emu:s3cret:pw")
    try:
        ids = f"{kept['path']}/consumers/long-group/ids"
        with pytest.raises(NoAuthError):
            stranger.get_children(f"{kept['path']}/brokers/topics")
        assert owner.get_children(f"{kept['path']}/brokers/topics") == ["t"]
        assert owner.exists(ids) is not None
    finally:
        close_client(stranger)
        close_client(owner)
    assert delete_chroot(hosts, kept["path"], auth=auth) > 10

    run_scenario(scenario, ["zookeeper"], tmp_path / "clean", zookeeper=zk_connect)
    manifest = json.loads((tmp_path / "clean" / "manifest.json").read_text())
    assert manifest["zookeeper"]["chroots"]["zookeeper"]["deleted_znodes"] > 10
    admin = make_client(hosts)
    try:
        assert admin.get_children(base) == []  # the run's chroot and its parents are gone
    finally:
        close_client(admin)


def test_an_unexpected_error_is_one_line_and_a_traceback_file(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from emulator import cli

    def boom(_args: Any) -> int:
        raise RuntimeError("something nobody expected\nsecond line")

    monkeypatch.setattr(cli, "cmd_scenarios", boom)
    assert cli.main(["scenarios"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("rebalance-emu: error: RuntimeError: something nobody expected")
    path = err[0].split("(traceback in ")[1].rstrip(")")
    assert "second line" in Path(path).read_text() and "Traceback" in Path(path).read_text()


def _tiny_run_dir(root: Path) -> Path:
    """A small but complete run directory (one closed log), enough for Spark to start on."""
    from emulator.eventlog import EventWriter
    from emulator.events import EventKind

    run = root / "run"
    w = EventWriter(
        run / "zookeeper" / "events" / "producer-0.msgpack",
        run_id="r",
        node="n",
        actor="producer-0",
        protocol="zookeeper",
        emu_clock=lambda: 0.0,
    )
    for i in range(200):
        w.emit(EventKind.PRODUCED, topic="t", partition=i % 2, offset_start=i, offset_end=i + 1)
    w.close()
    (run / "manifest.json").write_text(
        json.dumps({"run_id": "r", "status": "completed", "protocols": {"zookeeper": {}}})
    )
    return run


def _compare_until_its_jvm(
    tmp_path: Path, poll_s: float
) -> tuple[subprocess.Popen[str], dict[int, float]]:
    """``compare`` of a tiny run started, once its Spark JVM shows (bounded): the CLI, the JVM."""
    run = _tiny_run_dir(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "emulator.cli", "compare", str(run), "--out", str(tmp_path / "r")],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 90.0
    jvm: dict[int, float] = {}
    while time.monotonic() < deadline and not jvm and proc.poll() is None:
        time.sleep(poll_s)
        with contextlib.suppress(psutil.NoSuchProcess):
            jvm = {
                p: t
                for p, t in _tree(proc.pid).items()
                if psutil.pid_exists(p) and psutil.Process(p).name() == "java"
            }
    assert jvm, "Spark's JVM never started"
    return proc, jvm


@pytest.mark.spark
def test_ctrl_c_in_compare_is_one_line_and_stops_spark_on_loopback(tmp_path: Path) -> None:
    proc, jvm = _compare_until_its_jvm(tmp_path, poll_s=0.5)
    # Into the comparison: the JVM opens its ports some seconds after it starts
    # (more on a loaded machine); wait for them, bounded.
    spark_listening: list[tuple[str, int, int]] = []
    ports_by = time.monotonic() + 60.0
    while not spark_listening and time.monotonic() < ports_by and proc.poll() is None:
        time.sleep(0.5)
        spark_listening = _listeners(set(_tree(proc.pid)))
    assert spark_listening  # the py4j gateway, the block manager ...
    loopback = ("127.0.0.1", "::1", "::ffff:127.0.0.1")  # Java binds v4-mapped sockets
    assert [x for x in spark_listening if x[0] not in loopback] == []
    proc.send_signal(signal.SIGINT)
    code, _took, err = _finish(proc)
    assert code in (130, 0), err  # 0: it finished before the signal landed
    assert "Traceback" not in err and "py4j" not in err.lower()
    if code == 130:
        assert err.strip().splitlines()[-1] == "rebalance-emu: error: interrupted"
    deadline = time.monotonic() + 30.0
    while _alive(jvm) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _alive(jvm) == []


@pytest.mark.spark
def test_ctrl_c_while_spark_s_jvm_starts_leaves_no_jvm_and_says_one_line_last(
    tmp_path: Path,
) -> None:
    """A Ctrl-C the moment the JVM appears: pyspark has not got its gateway yet.

    The JVM is ended by its command line before the one line is said; left to
    itself it outlived the CLI (holding the CLI's stderr) and printed after it.
    """
    proc, jvm = _compare_until_its_jvm(tmp_path, poll_s=0.05)
    proc.send_signal(signal.SIGINT)
    code, _took, err = _finish(proc, timeout=45.0)
    assert code == 130, err
    assert err.strip().splitlines()[-1] == "rebalance-emu: error: interrupted", err
    assert _alive(jvm) == []
