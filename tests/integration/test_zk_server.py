"""The embedded ZooKeeper against the real installed server: lifecycle, ensemble
faults, real session expiry, and the ``zk`` CLI."""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient, KazooState  # type: ignore[import-untyped]
from kazoo.retry import KazooRetry  # type: ignore[import-untyped]

from tests.zk_fixtures import ZK_TEST_TICK_TIME_MS, close_client, make_client, wait_for
from zk_registry.faults import SessionExpiryError, expire_session, session_on_server
from zk_registry.server import (
    ZooKeeperEnsemble,
    ZooKeeperNotFoundError,
    ZooKeeperServer,
    ZooKeeperStartError,
    four_letter_word,
    negotiated_session_timeout_ms,
    pid_alive,
    tick_time_for,
    zookeeper_classpath,
)
from zk_registry.zk_cli import add_zk_subparser, load_state, stop_zk

pytestmark = pytest.mark.zk


# ------------------------------------------------------------------ tick_time_for (pure)


def _check_tick(session_ms: int, scale: float) -> None:
    tick = tick_time_for(session_ms, scale)
    scaled = round(session_ms * scale)
    assert tick >= 1
    assert 2 * tick <= scaled <= 20 * tick, (session_ms, scale, tick)
    assert negotiated_session_timeout_ms(scaled, tick) == scaled


@pytest.mark.parametrize(
    ("session_ms", "scale", "expected"),
    [
        (6000, 1.0, 2000),  # Kafka 0.8 zookeeper.session.timeout.ms, unscaled: ZooKeeper's default
        (6000, 0.1, 200),
        (30000, 1.0, 2000),
        (60000, 1.0, 3000),  # 20 x tick must still reach the session timeout
        (10, 1.0, 3),
        (2, 1.0, 1),
        (5, 1.0, 1),
    ],
)
def test_tick_time_for_examples(session_ms: int, scale: float, expected: int) -> None:
    assert tick_time_for(session_ms, scale) == expected
    _check_tick(session_ms, scale)


def test_tick_time_for_bounds_sweep() -> None:
    rng = random.Random(20240611)
    for _ in range(5000):
        session_ms = rng.randint(1, 600_000)
        scale = 10 ** rng.uniform(-4, 1)
        if round(session_ms * scale) < 2:
            with pytest.raises(ValueError):
                tick_time_for(session_ms, scale)
        else:
            _check_tick(session_ms, scale)
    for scaled in range(2, 5000):
        _check_tick(scaled, 1.0)


@pytest.mark.parametrize(
    ("session_ms", "scale"),
    [(0, 1.0), (-5, 1.0), (100, 0.0), (100, -1.0), (1, 1.0), (100, 0.01), (100, float("nan"))],
)
def test_tick_time_for_rejects(session_ms: int, scale: float) -> None:
    with pytest.raises(ValueError):
        tick_time_for(session_ms, scale)


def test_classpath_overrides(tmp_path: Path) -> None:
    assert zookeeper_classpath({"ZOOKEEPER_CLASSPATH": "/x/a.jar:/x/b.jar"}) == "/x/a.jar:/x/b.jar"
    (tmp_path / "lib").mkdir()
    for name in ("zookeeper-3.8.4.jar", "lib/zookeeper-jute-3.8.4.jar", "lib/netty.jar"):
        (tmp_path / name).touch()
    jars = zookeeper_classpath({"ZOOKEEPER_HOME": str(tmp_path)}).split(os.pathsep)
    assert sorted(Path(j).name for j in jars) == [
        "netty.jar",
        "zookeeper-3.8.4.jar",
        "zookeeper-jute-3.8.4.jar",
    ]
    with pytest.raises(ZooKeeperNotFoundError):
        zookeeper_classpath({"ZOOKEEPER_HOME": str(tmp_path / "lib" / "nothing")})
    default = zookeeper_classpath({}).split(os.pathsep)
    assert default[0] == "/usr/share/java/zookeeper.jar"
    assert all(Path(j).is_file() for j in default)


# ------------------------------------------------------------------ standalone


def test_standalone_start_ruok_stop(tmp_path: Path) -> None:
    server = ZooKeeperServer(tmp_path / "zk", tick_time_ms=100)
    with server:
        assert server.ruok()
        assert four_letter_word("127.0.0.1", server.port, "ruok") == "imok"
        assert server.connect_string == f"127.0.0.1:{server.port}"
        [status] = server.member_status()
        assert status.mode == "standalone" and status.serving and status.running
        pid = server.pids[0]
        assert pid is not None and pid_alive(pid)
        record = server.describe()
        assert record["tick_time_ms"] == 100
        assert (record["min_session_timeout_ms"], record["max_session_timeout_ms"]) == (200, 2000)
        cfg = server.config_path(0).read_text()
        for line in (
            "maxClientCnxns=0",
            "admin.enableServer=false",
            "clientPortAddress=127.0.0.1",
            "serverCnxnFactory=org.apache.zookeeper.server.NIOServerCnxnFactory",
        ):
            assert line in cfg.splitlines()
        assert server.log_path(0).stat().st_size > 0  # log4j writes the file, not the console
        for word in ("mntr", "conf", "cons", "wchs", "dump", "stat"):
            assert "not in the whitelist" not in server.four_letter_word(0, word)
    assert not server.running and server.pids == [None]
    assert not pid_alive(pid)
    assert not server.ruok()


def test_start_failure_is_clear_and_leaves_nothing(tmp_path: Path) -> None:
    broken = ZooKeeperEnsemble(1, tmp_path / "broken", classpath=str(tmp_path / "missing.jar"))
    with pytest.raises(ZooKeeperStartError, match="exited with code") as info:
        broken.start(timeout=20)
    assert "QuorumPeerMain" in str(info.value)  # the JVM's own complaint, from the log tail
    assert not broken.running

    slow = ZooKeeperEnsemble(1, tmp_path / "slow")
    with pytest.raises(ZooKeeperStartError, match="not serving in time"):
        slow.start(timeout=0.01)
    assert not slow.running and slow.pids == [None]


def test_session_server_fixture_chroot_and_negotiated_timeout(
    zk_server: ZooKeeperServer, zk_connect: str, zk_client: KazooClient
) -> None:
    assert zk_connect.startswith(zk_server.connect_string + "/test-")
    zk_client.create("/a", b"1")
    assert zk_client.get("/a")[0] == b"1"
    chroot = "/" + zk_connect.partition("/")[2]
    root = make_client(zk_server.connect_string)
    try:
        assert root.exists(chroot + "/a") is not None
    finally:
        close_client(root)

    short = KazooClient(hosts=zk_connect, timeout=1.0)
    long = KazooClient(hosts=zk_connect, timeout=60.0)
    try:
        short.start(timeout=10)
        long.start(timeout=10)
        timeouts = zk_server.session_timeouts()
        assert timeouts[short.client_id[0]] == 1000
        assert timeouts[long.client_id[0]] == 20 * ZK_TEST_TICK_TIME_MS  # clamped to the max
        assert negotiated_session_timeout_ms(60_000, ZK_TEST_TICK_TIME_MS) == 4000
    finally:
        close_client(short)
        close_client(long)


# ------------------------------------------------------------------ ensemble


def _modes(ensemble: ZooKeeperEnsemble) -> list[str | None]:
    return [s.mode for s in ensemble.member_status()]


def test_ensemble_has_exactly_one_leader(zk_ensemble: ZooKeeperEnsemble) -> None:
    modes = _modes(zk_ensemble)
    assert sorted(m or "" for m in modes) == ["follower", "follower", "leader"]
    assert zk_ensemble.leader_index() == modes.index("leader")
    assert len(zk_ensemble.connect_string.split(",")) == 3


def test_kill_leader_writes_continue_and_restart_rejoins_as_follower(
    zk_ensemble: ZooKeeperEnsemble, zk_ensemble_connect: str
) -> None:
    retry = KazooRetry(max_tries=-1, delay=0.05, max_delay=0.5, deadline=20.0)
    client = make_client(zk_ensemble_connect)
    try:
        client.create("/k", b"before")
        victim = zk_ensemble.leader_index()
        assert victim is not None
        zk_ensemble.kill_member(victim)
        assert not zk_ensemble.member_alive(victim)
        assert zk_ensemble.pids[victim] is None

        retry(client.set, "/k", b"after")  # the two survivors elect a leader and take the write
        assert client.get("/k")[0] == b"after"
        modes = _modes(zk_ensemble)
        assert modes[victim] is None
        assert sorted(m or "" for i, m in enumerate(modes) if i != victim) == ["follower", "leader"]

        zk_ensemble.restart_member(victim, timeout=30)
        assert _modes(zk_ensemble)[victim] == "follower"
        assert _modes(zk_ensemble).count("leader") == 1

        host = zk_ensemble.hosts[victim]
        direct = make_client(host + "/" + zk_ensemble_connect.partition("/")[2])  # same chroot
        try:
            direct.sync("/k")
            assert direct.get("/k")[0] == b"after"  # it caught up with the quorum
        finally:
            close_client(direct)
    finally:
        close_client(client)


# ------------------------------------------------------------------ real session expiry


def test_expire_session_removes_ephemeral_and_victim_sees_lost(
    zk_connect: str, zk_client: KazooClient
) -> None:
    victim = make_client(zk_connect)
    states: list[str] = []
    victim.add_listener(states.append)
    try:
        victim.create("/member", b"x", ephemeral=True)
        session_id, password = victim.client_id
        assert zk_client.exists("/member").ephemeralOwner == session_id

        elapsed = expire_session(
            zk_connect, session_id, password, ephemeral_path="/member", timeout=10.0
        )
        assert elapsed < 5.0
        assert zk_client.exists("/member") is None  # gone on the server, seen by another client
        assert session_on_server(zk_connect, session_id) is False

        wait_for(lambda: KazooState.LOST in states, timeout=10.0, what="victim sees LOST")
        wait_for(lambda: victim.connected and victim.client_id is not None, timeout=10.0)
        assert victim.client_id[0] != session_id  # a new session, the old one is dead
    finally:
        close_client(victim)


def test_expire_session_on_ensemble_confirmed_by_dump(
    zk_ensemble: ZooKeeperEnsemble, zk_ensemble_connect: str
) -> None:
    victim = make_client(zk_ensemble_connect)
    try:
        victim.create("/e", ephemeral=True)
        session_id, password = victim.client_id
        wait_for(
            lambda: session_on_server(zk_ensemble.connect_string, session_id) is True, timeout=5.0
        )
        expire_session(zk_ensemble.connect_string, session_id, password, timeout=10.0)
        assert session_on_server(zk_ensemble.connect_string, session_id) is False
        observer = make_client(zk_ensemble_connect)
        try:
            wait_for(lambda: observer.exists("/e") is None, timeout=5.0, what="ephemeral gone")
        finally:
            close_client(observer)
    finally:
        close_client(victim)


def test_expire_session_with_wrong_password_is_not_confirmed(
    zk_connect: str, zk_client: KazooClient
) -> None:
    victim = make_client(zk_connect)
    try:
        victim.create("/still-here", ephemeral=True)
        session_id, _ = victim.client_id
        with pytest.raises(SessionExpiryError):
            expire_session(
                zk_connect, session_id, b"\0" * 16, ephemeral_path="/still-here", timeout=1.0
            )
        assert zk_client.exists("/still-here") is not None
    finally:
        close_client(victim)


# ------------------------------------------------------------------ the zk CLI


def _run_handler(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="rebalance-emu")
    add_zk_subparser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    result: int = args.func(args)
    return result


def test_cli_handler_start_status_stop(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "zk"
    base = ["zk", "--dir", str(run_dir)]
    try:
        assert _run_handler([*base[:1], "start", *base[1:], "--tick-time", "200"]) == 0
        connect = capsys.readouterr().out.strip()
        state = load_state(run_dir)
        assert connect == state["connect_string"] and connect.startswith("127.0.0.1:")
        assert state["tick_time_ms"] == 200 and state["size"] == 1

        assert _run_handler(["zk", "status", "--dir", str(run_dir)]) == 0
        assert "standalone" in capsys.readouterr().out

        assert _run_handler(["zk", "start", "--dir", str(run_dir)]) == 1  # already running
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "already running" in err

        assert _run_handler(["zk", "stop", "--dir", str(run_dir)]) == 0
        capsys.readouterr()
        assert not any(pid_alive(m["pid"]) for m in state["members"])

        assert _run_handler(["zk", "status", "--dir", str(run_dir)]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "not running" in err and "Traceback" not in err
    finally:
        if (run_dir / "zk-state.json").exists():
            stop_zk(run_dir)


def test_cli_detached_ensemble_outlives_the_command(tmp_path: Path) -> None:
    run_dir = tmp_path / "zk3"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}

    def cli(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "zk_registry.zk_cli", "zk", *argv, "--dir", str(run_dir)],
            capture_output=True,
            text=True,
            timeout=90,
            env=env,
            check=False,
        )

    try:
        started = cli("start", "--ensemble", "3", "--tick-time", "200")
        assert started.returncode == 0, started.stderr
        connect = started.stdout.strip()
        assert len(connect.split(",")) == 3
        state = json.loads((run_dir / "zk-state.json").read_text())
        pids = [m["pid"] for m in state["members"]]
        assert all(pid_alive(p) for p in pids)  # the CLI process is gone, the members are not
        assert state["bound_to_parent"] is False  # no watchdog: nothing kills them on CLI exit

        status = cli("status")
        assert status.returncode == 0, status.stderr
        modes = [line.split()[5] for line in status.stdout.splitlines()]
        assert sorted(modes) == ["follower", "follower", "leader"]

        client = make_client(connect)
        try:
            client.create("/x", b"ok")
        finally:
            close_client(client)

        stopped = cli("stop")
        assert stopped.returncode == 0, stopped.stderr
        wait_for(lambda: not any(pid_alive(p) for p in pids), timeout=10.0, what="members gone")
        assert not (run_dir / "zk-state.json").exists()

        missing = cli("status")
        assert missing.returncode == 1
        assert len(missing.stderr.splitlines()) == 1 and "Traceback" not in missing.stderr
    finally:
        if (run_dir / "zk-state.json").exists():
            stop_zk(run_dir)


def test_cli_start_failure_is_one_line(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "ZOOKEEPER_CLASSPATH": str(tmp_path / "missing.jar"),
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
    }
    started = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "zk_registry.zk_cli",
            "zk",
            "start",
            "--dir",
            str(tmp_path / "zk"),
            "--timeout",
            "20",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert proc.returncode == 1
    assert len(proc.stderr.splitlines()) == 1 and "exited with code" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert time.monotonic() - started < 30
