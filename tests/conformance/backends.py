"""Backends of the conformance runner (:class:`tests.conformance.runner.Backend`).

:class:`RealBackend` is the embedded real ZooKeeper: a standalone
:class:`~zk_registry.server.ZooKeeperServer` or a loopback
:class:`~zk_registry.server.ZooKeeperEnsemble` per (size, tickTime), started on
first use and kept for the test session; kazoo clients (``raw_factory`` None);
:class:`~zk_registry.proxy.FaultProxy` links; server-side expiry through
:func:`zk_registry.faults.expire_session` (the intruder client); roles and the
member a session is on from the four-letter words ``srvr`` and ``cons``. It runs
each script on a fresh ``asyncio`` loop in real time.

The simulated backend (``SimBackend``: ``SimEnsemble`` + ``SimKazooClient`` +
``SimZkLink`` on a ``SimEventLoop``) implements the same Protocol; its
:meth:`~tests.conformance.runner.Backend.run` drives the sim loop, and its waits
run that loop instead of sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypeVar

from tests.conformance.runner import Script
from zk_registry.client import RawClientFactory
from zk_registry.faults import expire_session
from zk_registry.proxy import FaultProxy
from zk_registry.server import (
    HOST,
    ZooKeeperEnsemble,
    four_letter_word,
    parse_cons_timeouts,
)

if TYPE_CHECKING:
    from actors.io import ZkLink

__all__ = ["RealBackend"]

T = TypeVar("T")

#: How long a barrier lets in-flight callbacks arrive after every round trip.
SETTLE_S: Final = 0.25
#: Bound on starting an ensemble (generous: the suite may run on a busy machine).
STARTUP_TIMEOUT_S: Final = 180.0
#: Bound on the intruder's expiry of a session.
EXPIRE_TIMEOUT_S: Final = 20.0
_POLL_S: Final = 0.01


class RealBackend:
    """The embedded real ZooKeeper (see the module docstring).

    Args:
        base_dir: where the ensembles keep their data, configs and logs.
        startup_timeout: bound on starting (or restarting) members.
    """

    name = "real"

    def __init__(self, base_dir: Path, startup_timeout: float = STARTUP_TIMEOUT_S) -> None:
        self._base_dir = base_dir
        self._startup_timeout = startup_timeout
        self._ensembles: dict[tuple[int, int], ZooKeeperEnsemble] = {}
        self._current: ZooKeeperEnsemble | None = None

    @property
    def ensemble(self) -> ZooKeeperEnsemble:
        """The ensemble of the script being run."""
        if self._current is None:
            raise RuntimeError("no script is running")
        return self._current

    def run(self, main: Callable[[], Awaitable[T]]) -> T:
        """A fresh asyncio loop per script."""

        async def go() -> T:
            return await main()

        return asyncio.run(go())

    async def begin(self, script: Script) -> None:
        """Start (once) the ensemble of this size and tickTime; all members serving."""
        key = (script.ensemble, script.tick_ms)
        ensemble = self._ensembles.get(key)
        if ensemble is None:
            ensemble = ZooKeeperEnsemble(
                script.ensemble,
                self._base_dir / f"zk-{script.ensemble}x{script.tick_ms}ms",
                tick_time_ms=script.tick_ms,
                startup_timeout=self._startup_timeout,
            )
            await asyncio.to_thread(ensemble.start)
            self._ensembles[key] = ensemble
        else:
            for index in range(ensemble.size):
                if not ensemble.member_alive(index):
                    await asyncio.to_thread(ensemble.restart_member, index, None, False)
            await asyncio.to_thread(ensemble.wait_ready)
        if ensemble.size > 1:
            await asyncio.to_thread(self._highest_member_leads, ensemble)
        self._current = ensemble

    def _highest_member_leads(self, ensemble: ZooKeeperEnsemble) -> None:
        """Start every ensemble script from one state: the highest-index member leads.

        FastLeaderElection picks, among the live members with the highest zxid, the
        highest server id; in a quiet ensemble all zxids are equal, so killing a
        lower leader and restarting it hands the lead to the highest member.
        """
        top = ensemble.size - 1
        for _ in range(3):
            leader = ensemble.leader_index()
            if leader == top:
                return
            if leader is not None:
                ensemble.kill_member(leader)
                ensemble.wait_ready(members=[i for i in range(ensemble.size) if i != leader])
                ensemble.restart_member(leader, wait=False)
            ensemble.wait_ready()
        raise RuntimeError(f"member {top} does not lead: {ensemble.member_status()}")

    async def end(self) -> None:
        """Wait until every member serves again (the runner restarted killed ones)."""
        ensemble = self.ensemble
        if ensemble.size > 1:
            await asyncio.to_thread(ensemble.wait_ready)
        self._current = None

    def close(self) -> None:
        """Stop every ensemble started."""
        for ensemble in self._ensembles.values():
            with contextlib.suppress(Exception):
                ensemble.stop()
        self._ensembles.clear()

    def hosts(self, link: ZkLink | None) -> str:
        """The link's address, or every member's."""
        return link.address if link is not None else self.ensemble.connect_string

    def raw_factory(self) -> RawClientFactory | None:
        """kazoo's own ``KazooClient``."""
        return None

    async def open_link(self) -> ZkLink:
        """A started :class:`FaultProxy` to the members, in member order."""
        proxy = FaultProxy(self.ensemble.hosts)
        await proxy.start()
        return proxy

    async def expire(self, session_id: int, password: bytes) -> None:
        """:func:`expire_session` (intruder client; confirmed by ``dump``) in a thread."""
        connect = self.ensemble.connect_string
        await asyncio.to_thread(
            expire_session, connect, session_id, password, timeout=EXPIRE_TIMEOUT_S
        )

    async def kill_member(self, index: int) -> None:
        """SIGKILL the member's JVM."""
        await asyncio.to_thread(self.ensemble.kill_member, index)

    async def restart_member(self, index: int) -> None:
        """Start the member again without waiting for it to serve."""
        await asyncio.to_thread(self.ensemble.restart_member, index, None, False)

    async def roles(self) -> list[str | None]:
        """``srvr``'s Mode per member (``None`` when not serving)."""
        statuses = await asyncio.to_thread(self.ensemble.member_status, 1.0)
        return [s.mode if s.serving else None for s in statuses]

    async def member_of(self, session_id: int) -> int | None:
        """The member whose ``cons`` lists the session."""
        ensemble = self.ensemble

        def find() -> int | None:
            for index, port in enumerate(ensemble.client_ports):
                if not ensemble.member_alive(index):
                    continue
                try:
                    text = four_letter_word(HOST, port, "cons", timeout=1.0)
                except OSError:
                    continue
                if session_id in parse_cons_timeouts(text):
                    return index
            return None

        return await asyncio.to_thread(find)

    async def sleep(self, seconds: float) -> None:
        """Real time passes."""
        await asyncio.sleep(seconds)

    async def drive_until(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        """Poll ``predicate`` every 10 ms of real time."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not predicate():
            if loop.time() >= deadline:
                return predicate()
            await asyncio.sleep(_POLL_S)
        return True

    async def settle(self) -> None:
        """kazoo's callback and completion threads hand over (:data:`SETTLE_S`)."""
        await asyncio.sleep(SETTLE_S)
