"""ZooKeeper hygiene against the real installed server: the embedded ensemble dies
with its owner, a user-given ZooKeeper is probed within a bound, a run's chroot
is deleted afterwards, and ``--zk-auth`` digest ACLs keep other clients out."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient  # type: ignore[import-untyped]
from kazoo.exceptions import NoAuthError  # type: ignore[import-untyped]

from tests.zk_fixtures import close_client, make_client, wait_for
from zk_registry.auth import ZkAuth, parse_zk_auth
from zk_registry.client import ZkCleanupError, ZkClient, delete_chroot
from zk_registry.server import (
    OWNER_ARG,
    ZooKeeperError,
    ZooKeeperServer,
    find_free_ports,
    parse_connect_string,
    pid_alive,
    probe_zookeeper,
)

pytestmark = pytest.mark.zk

REPO = Path(__file__).resolve().parents[2]


def _port_accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


# --------------------------------------------------------------------------- parent death

_CHILD = """
import sys, time
from zk_registry.server import ZooKeeperEnsemble
zk = ZooKeeperEnsemble(1, sys.argv[1], tick_time_ms=200)
zk.start(timeout=60)
print(zk.pids[0], zk.client_ports[0], zk.watchdog_pid, flush=True)
time.sleep(120)
"""


def test_embedded_zookeeper_dies_when_its_owner_is_sigkilled(tmp_path: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(tmp_path / "zk")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    jvm = watchdog = None
    try:
        assert child.stdout is not None
        ready: list[str] = []
        reader = threading.Thread(target=lambda: ready.append(child.stdout.readline()))  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout=90)
        assert ready and ready[0].strip(), f"child did not start ZooKeeper: {child.poll()}"
        jvm, port, watchdog = (int(x) for x in ready[0].split())
        assert pid_alive(jvm) and pid_alive(watchdog) and _port_accepts(port)
        cmdline = Path(f"/proc/{jvm}/cmdline").read_bytes()
        assert OWNER_ARG.encode() in cmdline  # the JVM is the child's own child, tagged

        child.send_signal(signal.SIGKILL)  # no atexit, no finally: only the watchdog can act
        child.wait(timeout=10)
        killed_at = time.monotonic()
        wait_for(lambda: not pid_alive(jvm), timeout=30.0, what="the orphaned JVM to exit")
        gone_after = time.monotonic() - killed_at
        assert gone_after < 10.0, gone_after  # typically ~0.3 s (SIGTERM, 1 s grace to SIGKILL)
        # a JVM that is exiting may show as a zombie a moment before its sockets close
        wait_for(lambda: not _port_accepts(port), timeout=10.0, what="the client port to close")
        wait_for(lambda: not pid_alive(watchdog), timeout=10.0, what="the watchdog to exit")
        log = (tmp_path / "zk" / "watchdog.log").read_text()
        assert "owner gone" in log and str(jvm) in log
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
        for pid in (jvm, watchdog):  # never leave a JVM behind if the assertion failed
            if pid is not None and pid_alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_stop_and_member_faults_keep_working_with_the_watchdog(tmp_path: Path) -> None:
    server = ZooKeeperServer(tmp_path / "zk", tick_time_ms=200)
    assert server.bound_to_parent and server.describe()["bound_to_parent"] is True
    with server:
        watchdog = server.watchdog_pid
        assert watchdog is not None and pid_alive(watchdog)
        jvm = server.pids[0]
        assert jvm is not None
        server.kill_member(0)  # a real SIGKILL of the JVM, reaped
        assert not pid_alive(jvm) and server.pids == [None]
        assert server.watchdog_pid == watchdog  # the watchdog is not involved in faults
        server.restart_member(0, timeout=60)
        assert server.ruok() and server.pids[0] not in (None, jvm)
        assert server.watchdog_pid == watchdog
    assert server.watchdog_pid is None and not pid_alive(watchdog)  # stop() reaps it
    assert "owner gone" not in (tmp_path / "zk" / "watchdog.log").read_text()


def test_detached_ensembles_are_not_bound() -> None:
    with pytest.raises(ValueError, match="detached"):
        ZooKeeperServer("/nonexistent", detached=True, bound_to_parent=True)
    assert not ZooKeeperServer("/nonexistent", detached=True).bound_to_parent


# --------------------------------------------------------------------------- probe


def test_parse_connect_string() -> None:
    assert parse_connect_string("a:1,b:2/x/y") == (["a:1", "b:2"], "/x/y")
    assert parse_connect_string(" a , [::1]:3/ ") == (["a:2181", "[::1]:3"], "")
    assert parse_connect_string("a:1/x/") == (["a:1"], "/x")
    for bad in ("", "/x", "a:notaport", "a:0", "a:1//x", "a:1/x/../y"):
        with pytest.raises(ValueError):
            parse_connect_string(bad)


def test_probe_accepts_a_real_zookeeper_and_leaves_no_session(
    zk_server: ZooKeeperServer,
) -> None:
    before = set(zk_server.session_timeouts())
    started = time.monotonic()
    assert probe_zookeeper(zk_server.hosts, timeout_s=10.0) == zk_server.hosts[0]
    assert time.monotonic() - started < 2.0
    wait_for(  # the probe closed its session (the server may list it for an instant)
        lambda: set(zk_server.session_timeouts()) <= before,
        timeout=3.0,
        what="the probe's session to be closed",
    )
    # a dead member before a live one, and a connect string with a chroot
    [dead] = find_free_ports(1)
    connect = f"127.0.0.1:{dead},{zk_server.connect_string}/some/chroot"
    assert probe_zookeeper(connect, timeout_s=10.0) == zk_server.hosts[0]


def test_probe_fails_fast_on_a_closed_port() -> None:
    [port] = find_free_ports(1)
    started = time.monotonic()
    with pytest.raises(ZooKeeperError) as info:
        probe_zookeeper([f"127.0.0.1:{port}"], timeout_s=10.0)
    assert time.monotonic() - started < 2.0
    message = str(info.value)
    assert "\n" not in message and "no member answered on" in message
    assert f"127.0.0.1:{port}" in message


@contextlib.contextmanager
def _listener(handle: Callable[[socket.socket], None]) -> Iterator[int]:
    """A TCP server on 127.0.0.1 that runs ``handle`` on each accepted connection."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.1)
    stop = threading.Event()
    conns: list[socket.socket] = []

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conns.append(conn)
            handle(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(timeout=5)
        server.close()
        for conn in conns:
            conn.close()


def _silent(conn: socket.socket) -> None:
    pass  # accept and never answer


def _garbage(conn: socket.socket) -> None:
    with contextlib.suppress(OSError):
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        conn.close()


def _hang_up(conn: socket.socket) -> None:
    conn.close()


@pytest.mark.parametrize(
    ("handler", "expected", "max_s"),
    [
        (_silent, "no answer to a ZooKeeper handshake within 2s", 3.5),
        (_garbage, "answered something else than a ZooKeeper handshake", 1.5),
        (_hang_up, "closed the connection without a ZooKeeper handshake", 1.5),
    ],
    ids=["silent", "garbage", "hang-up"],
)
def test_probe_fails_within_the_timeout_on_a_non_zookeeper_listener(
    handler: Callable[[socket.socket], None], expected: str, max_s: float
) -> None:
    with _listener(handler) as port:
        started = time.monotonic()
        with pytest.raises(ZooKeeperError) as info:
            probe_zookeeper(f"127.0.0.1:{port}", timeout_s=2.0)
        elapsed = time.monotonic() - started
    message = str(info.value)
    assert "\n" not in message, message
    assert "not a serving ZooKeeper server" in message and expected in message, message
    assert elapsed < max_s, elapsed


# --------------------------------------------------------------------------- chroot cleanup


def _base(zk_connect: str) -> str:
    return "/" + zk_connect.partition("/")[2]


def test_delete_chroot_deletes_the_tree_and_emptied_parents(
    zk_server: ZooKeeperServer, zk_connect: str, zk_client: KazooClient
) -> None:
    run = "/rebalance-emu/run-1"
    for path in (
        f"{run}/zookeeper/consumers/g/ids",
        f"{run}/zookeeper/consumers/g/owners/t/0",
        f"{run}/zookeeper/brokers/topics/t/partitions/0/state",
        f"{run}/consumer/brokers/ids",
    ):
        zk_client.ensure_path(path)
    live = make_client(zk_connect)  # a session still alive: its ephemeral is deleted too
    try:
        live.create(f"{run}/zookeeper/consumers/g/ids/c1", b"x", ephemeral=True)
        # the sibling protocol keeps the run's node: only the tree goes
        deleted = delete_chroot(zk_connect, f"{run}/zookeeper", timeout_s=30.0)
        assert deleted == 14  # zookeeper + 7 (consumers/..., the ephemeral) + 6 (brokers/...)
        assert zk_client.exists(f"{run}/zookeeper") is None
        assert zk_client.get_children(run) == ["consumer"]

        # the last protocol: the run and /rebalance-emu go, the connect chroot stays
        assert delete_chroot(zk_connect, f"{run}/consumer", timeout_s=30.0) == 5
        assert zk_client.get_children("/") == []
    finally:
        close_client(live)
    root = make_client(zk_server.connect_string)
    try:
        assert root.exists(_base(zk_connect)) is not None  # never above the connect chroot
    finally:
        close_client(root)
    assert delete_chroot(zk_connect, f"{run}/zookeeper", timeout_s=10.0) == 0  # idempotent


def test_delete_chroot_without_a_connect_chroot_prunes_up_to_root(
    zk_server: ZooKeeperServer,
) -> None:
    top = f"/hyg-{uuid.uuid4().hex}"
    admin = make_client(zk_server.connect_string)
    try:
        admin.ensure_path(f"{top}/run/proto/a")
        assert delete_chroot(zk_server.hosts, f"{top}/run/proto", timeout_s=30.0) == 4
        assert admin.exists(top) is None
        assert admin.exists("/zookeeper") is not None
    finally:
        with contextlib.suppress(Exception):
            admin.delete(top, recursive=True)
        close_client(admin)


def test_delete_chroot_refuses_root_and_is_bounded(zk_server: ZooKeeperServer) -> None:
    for bad in ("/", "", "relative/path", "/zookeeper", "/zookeeper/quota"):
        with pytest.raises(ValueError):
            delete_chroot(zk_server.connect_string, bad, timeout_s=5.0)
    [port] = find_free_ports(1)
    started = time.monotonic()
    with pytest.raises(ZooKeeperError, match="cannot connect"):
        delete_chroot(f"127.0.0.1:{port}", "/rebalance-emu/x/y", timeout_s=1.5)
    assert time.monotonic() - started < 5.0


# --------------------------------------------------------------------------- digest auth


def test_parse_zk_auth() -> None:
    auth = parse_zk_auth("alice:s3cret:with:colons")
    assert auth == ZkAuth("alice", "s3cret:with:colons")
    assert auth.auth_data == [("digest", "alice:s3cret:with:colons")]
    assert "s3cret" not in repr(auth) and str(auth) == "digest:alice"
    assert pickle.loads(pickle.dumps(auth)) == auth
    [acl] = auth.acl()
    assert acl.id.scheme == "digest" and acl.id.id == auth.digest_id and acl.perms == 31
    for bad in ("alice", ":pw", "alice:", "", " alice:pw"):
        with pytest.raises(ValueError, match="user:password") as info:
            parse_zk_auth(bad)
        assert "\n" not in str(info.value)


def test_digest_acl_keeps_unauthenticated_clients_out(zk_connect: str) -> None:
    auth = parse_zk_auth("emu:run-secret")
    run = "/rebalance-emu/run-2/zookeeper"

    async def create() -> None:
        client = ZkClient(zk_connect, 4.0, auth=auth)
        await client.start_async()
        try:
            await client.create_persistent_recursive(run + "/consumers")
            await client.create_async(run + "/consumers/c1", b"v", ephemeral=True)
            await client.create_async(run + "/offsets", b"42")
            assert (await client.get_async(run + "/offsets"))[0] == b"42"  # it reads its own
            await client.set_async(run + "/offsets", b"43")
            # ...and with a chroot argument the same
            inner = ZkClient(zk_connect.partition("/")[0], 4.0, chroot=_base(zk_connect), auth=auth)
            await inner.start_async()
            try:
                assert (await inner.get_async(run + "/offsets"))[0] == b"43"
            finally:
                await inner.stop_async()
        finally:
            await client.stop_async()

    asyncio.run(create())
    owner = KazooClient(hosts=zk_connect, timeout=4.0, auth_data=auth.auth_data)
    owner.start(timeout=15)
    try:
        for path in ("/rebalance-emu", "/rebalance-emu/run-2", run, run + "/offsets"):
            acls, _ = owner.get_acls(path)
            assert [(a.id.scheme, a.id.id) for a in acls] == [("digest", auth.digest_id)], path
    finally:
        close_client(owner)
    stranger = make_client(zk_connect)
    try:
        # exists is not ACL-checked: the session-expiry fault's checker needs no auth
        assert stranger.exists(run + "/offsets") is not None
        with pytest.raises(NoAuthError):
            stranger.get(run + "/offsets")
        with pytest.raises(NoAuthError):
            stranger.set(run + "/offsets", b"evil")
        with pytest.raises(NoAuthError):
            stranger.get_children(run)
        with pytest.raises(NoAuthError):
            stranger.create(run + "/intruder", b"")
        with pytest.raises(NoAuthError):
            stranger.delete(run + "/offsets")

        # cleanup without the credentials cannot list the tree: one clear line
        with pytest.raises(ZkCleanupError) as info:
            delete_chroot(zk_connect, run, timeout_s=10.0, attempts=2)
        assert "NoAuth" in str(info.value) and "\n" not in str(info.value)
        assert info.value.deleted == 0

        # zookeeper, consumers, offsets (the ephemeral went with its session) + 2 parents
        assert delete_chroot(zk_connect, run, timeout_s=30.0, auth=auth) == 5
        assert stranger.get_children("/") == []
    finally:
        close_client(stranger)
