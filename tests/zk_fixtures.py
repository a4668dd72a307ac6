"""pytest fixtures for a real ZooKeeper: one standalone server per test session,
a fresh chroot per test, and a 3-member ensemble for fault tests.

Loaded by ``tests/conftest.py`` through ``pytest_plugins``. Fixtures:

* ``zk_server`` (session): a started :class:`ZooKeeperServer`, tickTime
  :data:`ZK_TEST_TICK_TIME_MS` (sessions negotiate into [0.4 s, 4 s]).
* ``zk_connect`` (function): ``"127.0.0.1:PORT/test-<uuid>"``, a chroot that
  exists on ``zk_server`` and is deleted after the test.
* ``zk_client`` (function): a started ``KazooClient`` on ``zk_connect``.
* ``zk_ensemble_session`` (session): a started 3-member :class:`ZooKeeperEnsemble`.
* ``zk_ensemble`` (function): the same ensemble, with every member restarted
  if an earlier test killed it and all serving before the test begins.
* ``zk_ensemble_connect`` (function): a fresh chroot on the ensemble.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient  # type: ignore[import-untyped]

from zk_registry.server import ZooKeeperEnsemble, ZooKeeperServer

#: tickTime of the test servers: sessions of 0.4-4 s, expiry noticed within 0.2 s.
ZK_TEST_TICK_TIME_MS = 200
#: Session timeout of the clients made by these fixtures, in seconds.
ZK_TEST_SESSION_TIMEOUT_S = 4.0
ZK_ENSEMBLE_SIZE = 3
_START_TIMEOUT_S = 60.0


def wait_for(
    predicate: Callable[[], object], timeout: float = 10.0, interval: float = 0.02, what: str = ""
) -> None:
    """Poll ``predicate`` until it is truthy; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(interval)


def make_client(connect_string: str, timeout: float = ZK_TEST_SESSION_TIMEOUT_S) -> KazooClient:
    """A started kazoo client; the caller stops and closes it (see :func:`close_client`)."""
    client = KazooClient(hosts=connect_string, timeout=timeout)
    client.start(timeout=15.0)
    return client


def close_client(client: KazooClient) -> None:
    with contextlib.suppress(Exception):
        client.stop()
    with contextlib.suppress(Exception):
        client.close()


@contextlib.contextmanager
def _chroot(hosts: str) -> Iterator[str]:
    chroot = f"/test-{uuid.uuid4().hex}"
    admin = make_client(hosts)
    try:
        admin.create(chroot)
        yield hosts + chroot
    finally:
        with contextlib.suppress(Exception):
            admin.delete(chroot, recursive=True)
        close_client(admin)


@pytest.fixture(scope="session")
def zk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One standalone ZooKeeper for the whole test session."""
    server = ZooKeeperServer(
        tmp_path_factory.mktemp("zk-standalone"),
        tick_time_ms=ZK_TEST_TICK_TIME_MS,
        startup_timeout=_START_TIMEOUT_S,
    )
    with server:
        yield server


@pytest.fixture
def zk_connect(zk_server: ZooKeeperServer) -> Iterator[str]:
    """``"127.0.0.1:PORT/test-<uuid>"``: a fresh chroot on ``zk_server``."""
    with _chroot(zk_server.connect_string) as connect:
        yield connect


@pytest.fixture
def zk_client(zk_connect: str) -> Iterator[KazooClient]:
    """A started kazoo client rooted at ``zk_connect``."""
    client = make_client(zk_connect)
    try:
        yield client
    finally:
        close_client(client)


@pytest.fixture(scope="session")
def zk_ensemble_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperEnsemble]:
    """A 3-member loopback ensemble shared by the session (started on first use)."""
    ensemble = ZooKeeperEnsemble(
        ZK_ENSEMBLE_SIZE,
        tmp_path_factory.mktemp("zk-ensemble"),
        tick_time_ms=ZK_TEST_TICK_TIME_MS,
        startup_timeout=_START_TIMEOUT_S,
    )
    with ensemble:
        yield ensemble


@pytest.fixture
def zk_ensemble(zk_ensemble_session: ZooKeeperEnsemble) -> ZooKeeperEnsemble:
    """The shared ensemble with every member running and serving (restarts killed ones)."""
    for index in range(zk_ensemble_session.size):
        if not zk_ensemble_session.member_alive(index):
            zk_ensemble_session.restart_member(index, wait=False)
    zk_ensemble_session.wait_ready(timeout=_START_TIMEOUT_S)
    return zk_ensemble_session


@pytest.fixture
def zk_ensemble_connect(zk_ensemble: ZooKeeperEnsemble) -> Iterator[str]:
    """A fresh chroot on the healthy ensemble: ``"h1:p1,h2:p2,h3:p3/test-<uuid>"``."""
    with _chroot(zk_ensemble.connect_string) as connect:
        yield connect
