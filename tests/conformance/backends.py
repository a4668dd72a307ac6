"""Backends of the conformance runner (:class:`tests.conformance.runner.Backend`).

:class:`RealBackend` is the embedded real ZooKeeper: a standalone
:class:`~zk_registry.server.ZooKeeperServer` or a loopback
:class:`~zk_registry.server.ZooKeeperEnsemble` per (size, tickTime), started on
first use and kept for the test session; kazoo clients (``raw_factory`` None);
:class:`~zk_registry.proxy.FaultProxy` links; server-side expiry through
:func:`zk_registry.faults.expire_session` (the intruder client); roles and the
member a session is on from the four-letter words ``srvr`` and ``cons``. It runs
each script on a fresh ``asyncio`` loop in real time.

:class:`SimBackend` is the simulated ZooKeeper (issue-18 design §3.8): a fresh
:class:`~zk_registry.sim.server.SimEnsemble` per script on a fresh
:class:`~emulator.sim.loop.SimEventLoop` (virtual time, so every ``within_ms``
bound of a script is virtual), clients over
:class:`~zk_registry.sim.client.SimKazooClient`
(``raw_factory=ensemble.raw_factory(...)``), :class:`~zk_registry.sim.link.SimZkLink`
links, and the ensemble's own ``expire_session``, ``kill_member`` and
``restart_member``. Its waits run the loop instead of sleeping; the same seed
gives the same run.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

from emulator.sim.loop import SimEventLoop
from emulator.sim.rng import Streams
from tests.conformance.runner import ConformanceError, Script
from zk_registry.client import RawClientFactory
from zk_registry.faults import expire_session
from zk_registry.proxy import FaultProxy
from zk_registry.server import (
    HOST,
    ZooKeeperEnsemble,
    four_letter_word,
    parse_cons_timeouts,
)
from zk_registry.sim.client import SimKazooClient
from zk_registry.sim.link import SimZkLink
from zk_registry.sim.server import SimEnsemble

if TYPE_CHECKING:
    from actors.io import ZkLink

__all__ = ["RealBackend", "SimBackend"]

T = TypeVar("T")

#: How long a barrier lets in-flight callbacks arrive after every round trip.
SETTLE_S: Final = 0.25
#: Bound on starting an ensemble (generous: the suite may run on a busy machine).
STARTUP_TIMEOUT_S: Final = 180.0
#: Bound on the intruder's expiry of a session.
EXPIRE_TIMEOUT_S: Final = 20.0
_POLL_S: Final = 0.01


class _LoopTime:
    """Waiting on the running loop's clock: real time on the real backend, virtual on the sim's."""

    async def sleep(self, seconds: float) -> None:
        """Time passes (the loop's)."""
        await asyncio.sleep(seconds)

    async def drive_until(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        """Check ``predicate`` every 10 ms of the loop's time, up to ``timeout_s``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not predicate():
            if loop.time() >= deadline:
                return predicate()
            await asyncio.sleep(_POLL_S)
        return True

    async def settle(self) -> None:
        """What is in flight arrives (:data:`SETTLE_S`): on the real backend, kazoo's callback
        and completion threads hand over; on the sim, the same span of virtual time."""
        await asyncio.sleep(SETTLE_S)


class RealBackend(_LoopTime):
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


class SimBackend(_LoopTime):
    """The simulated ZooKeeper on a virtual-time loop (see the module docstring).

    Each script runs on its own loop with its own ensemble (size and tickTime as
    the script asks; every member serving and the highest-index one leading, as
    :meth:`SimEnsemble.start` makes it), so scripts never share state; the
    streams are seeded with ``seed`` and the script's name.

    Args:
        seed: the run seed (every draw of the ensemble, clients and links).
    """

    name = "sim"

    def __init__(self, seed: int = 1) -> None:
        self.seed = seed
        self._loop: SimEventLoop | None = None
        self._ensemble: SimEnsemble | None = None
        self._raw_clients: list[SimKazooClient] = []
        self.virtual_s = 0.0
        """The virtual duration of the last :meth:`run`."""

    @property
    def loop(self) -> SimEventLoop:
        """The loop of the script being run."""
        if self._loop is None:
            raise RuntimeError("no script is running")
        return self._loop

    @property
    def ensemble(self) -> SimEnsemble:
        """The ensemble of the script being run."""
        if self._ensemble is None:
            raise RuntimeError("no script is running")
        return self._ensemble

    def run(self, main: Callable[[], Awaitable[T]]) -> T:
        """A fresh :class:`SimEventLoop`, run until ``main()`` completes.

        Raises:
            ConformanceError: a callback raised: on the loop (the loop's errors) or
                in a client's completion or watch callbacks (kazoo's workers would
                only log it).
        """
        loop = SimEventLoop()
        self._loop = loop
        self._raw_clients = []
        try:
            result = loop.run_until_complete(main())
            errors = list(loop.errors)
            callback_errors = {c.name: c.callback_errors for c in self._raw_clients}
        finally:
            self.virtual_s = loop.time()
            self._loop = None
            self._ensemble = None
            loop.close()
        if errors:
            first = errors[0]
            raise ConformanceError(
                f"{len(errors)} error(s) in callbacks on the sim loop; the first: "
                f"{first.message}: {first.exception!r}"
            )
        failed = {name: n for name, n in callback_errors.items() if n}
        if failed:
            raise ConformanceError(f"exceptions in client callbacks (logged): {failed}")
        return result

    async def begin(self, script: Script) -> None:
        """A started ensemble of the script's size and tickTime, streams seeded per script."""
        streams = Streams(f"{self.seed}/{script.stem}")
        self._ensemble = SimEnsemble(
            self.loop, streams, script.ensemble, script.tick_ms, name="sim-zk"
        ).start()

    async def end(self) -> None:
        """Nothing to restore: the next script gets a fresh ensemble."""

    def hosts(self, link: ZkLink | None) -> str:
        """The link's address, or every member's."""
        return link.address if link is not None else self.ensemble.connect_string

    def raw_factory(self) -> RawClientFactory | None:
        """:class:`SimKazooClient` s on the ensemble, named ``conf-<n>`` (kept for checks)."""
        make = self.ensemble.raw_factory("conf")

        def factory(**kwargs: Any) -> SimKazooClient:
            client = make(**kwargs)
            self._raw_clients.append(client)
            return client

        return factory

    async def open_link(self) -> ZkLink:
        """A started :class:`SimZkLink` to the members, in member order."""
        ensemble = self.ensemble
        link = SimZkLink(ensemble, ensemble.hosts)
        await link.start()
        return link

    async def expire(self, session_id: int, password: bytes) -> None:
        """:meth:`SimEnsemble.expire_session` (at once)."""
        self.ensemble.expire_session(session_id, password)

    async def kill_member(self, index: int) -> None:
        """The member's process dies: its connections reset at once."""
        self.ensemble.kill_member(index)

    async def restart_member(self, index: int) -> None:
        """Start the member again (it serves after its drawn start-up)."""
        self.ensemble.restart_member(index, wait=False)

    async def roles(self) -> list[str | None]:
        """The members' modes (``None`` when not serving)."""
        return [s.mode for s in self.ensemble.member_status()]

    async def member_of(self, session_id: int) -> int | None:
        """The member holding a live connection of the session."""
        return self.ensemble.member_of_session(session_id)
