"""A small world for model tests of the simulated ZooKeeper: loop, streams, ensemble, clients.

The clients are the project's own :class:`zk_registry.client.ZkClient` over
:class:`zk_registry.sim.client.SimKazooClient` (``raw_factory``), dispatching
their callbacks on the sim loop (``asyncio_dispatch``), as the sim engine will
build them. Every state change, new session and watch delivery is recorded
with its virtual time, so tests can assert orders and bounds.

These are *model* tests: what they assert is what ZooKeeper's and kazoo's
documentation and sources say; the recorded real-server conformance suite
(design §3.8) comes later and is the arbiter.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from emulator.sim.loop import ActorContext, SimEventLoop
from emulator.sim.rng import Streams
from zk_registry.client import WatchEvent, ZkClient, ZkUtils, asyncio_dispatch
from zk_registry.proxy import ProxyMode
from zk_registry.sim.client import SimKazooClient
from zk_registry.sim.link import SimZkLink
from zk_registry.sim.server import SimEnsemble

T = TypeVar("T")


@dataclass
class Session:
    """One ZkClient with its recorders."""

    name: str
    zk: ZkClient
    world: World
    link: SimZkLink | None = None
    states: list[tuple[float, str, str]] = field(default_factory=list)
    new_sessions: list[float] = field(default_factory=list)
    deliveries: list[tuple[float, WatchEvent]] = field(default_factory=list)

    @property
    def raw(self) -> SimKazooClient:
        """The simulated kazoo client."""
        raw: SimKazooClient = self.zk.kazoo
        return raw

    @property
    def utils(self) -> ZkUtils:
        """ZkUtils over this session."""
        return ZkUtils(self.zk)

    def state_names(self) -> list[str]:
        """The recorded states, in order."""
        return [s for _, s, _ in self.states]

    def deliver(self, event: WatchEvent) -> None:
        """A ZkWatch callback that records the delivery."""
        self.deliveries.append((self.world.loop.time(), event))

    def mode(self, mode: ProxyMode) -> None:
        """Set the session's link mode."""
        assert self.link is not None
        self.link.set_mode(mode)


class World:
    """Loop, streams and ensemble; clients made on demand.

    Args:
        seed: the run seed.
        size: ensemble members.
        tick_ms: tickTime.
        ensemble: more keyword arguments of :class:`SimEnsemble`.
    """

    def __init__(self, seed: int = 1, size: int = 1, tick_ms: int = 200, **ensemble: Any) -> None:
        self.loop = SimEventLoop()
        self.streams = Streams(seed)
        self.ens = SimEnsemble(self.loop, self.streams, size, tick_ms, **ensemble).start()
        self.sessions: list[Session] = []
        self.log: list[tuple[int, str, str]] = []

    def session(
        self,
        name: str,
        timeout_s: float = 2.0,
        *,
        link: bool = False,
        chroot: str | None = None,
        owner: ActorContext | None = None,
        start: bool = True,
        connect: str | None = None,
    ) -> Session:
        """A started ZkClient named ``name`` (through its own SimZkLink with ``link``).

        ``connect`` replaces the ensemble's connect string (e.g. one member).
        """

        async def make() -> Session:
            proxy: SimZkLink | None = None
            target = self.ens.connect_string if connect is None else connect
            if link:
                proxy = SimZkLink(self.ens, self.ens.hosts)
                await proxy.start()
                target = proxy.address
            s: Session | None = None

            def on_state(state: str, hx: str) -> None:
                assert s is not None
                s.states.append((self.loop.time(), state, hx))
                self.log.append((self.loop.now_ns, name, f"state {state} {hx}"))

            def on_new() -> None:
                assert s is not None
                s.new_sessions.append(self.loop.time())
                self.log.append((self.loop.now_ns, name, "new session"))

            zk = ZkClient(
                target,
                timeout_s,
                chroot=chroot,
                raw_factory=self.ens.raw_factory(name),
                dispatch=asyncio_dispatch(self.loop),
                on_state=on_state,
                on_new_session=on_new,
            )
            s = Session(name, zk, self, proxy)
            if start:
                await zk.start_async()
            return s

        if owner is None:
            session = self.run(make())
        else:
            task = self.loop.spawn_in(owner, make())
            session = self.loop.run_until_complete(task)
        self.sessions.append(session)
        return session

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` to completion on the loop."""
        return self.loop.run_until_complete(coro)

    def run_for(self, seconds: float) -> None:
        """Let ``seconds`` of virtual time pass."""
        self.loop.run_for(seconds)

    def run_until(self, cond: Callable[[], bool], within_s: float, step_s: float = 0.001) -> float:
        """Run until ``cond()``; returns the virtual time it took.

        Raises:
            AssertionError: not within ``within_s``.
        """
        start = self.loop.time()
        while not cond():
            if self.loop.time() - start > within_s:
                raise AssertionError(f"condition not met within {within_s} s")
            self.loop.run_for(step_s)
        return self.loop.time() - start

    def close(self) -> None:
        """Stop every client that still runs, close the loop, fail on loop errors."""
        for s in self.sessions:
            owner = s.raw.owner
            if not s.zk.stopped and (owner is None or not owner.dead):
                self.run(s.zk.stop_async())
        errors = list(self.loop.errors)
        callback_errors = {s.name: s.raw.callback_errors for s in self.sessions}
        self.loop.close()
        assert errors == []
        assert all(n == 0 for n in callback_errors.values()), callback_errors


async def gather_results(*aws: Coroutine[Any, Any, Any]) -> list[Any]:
    """``gather(..., return_exceptions=True)`` as a list."""
    return list(await asyncio.gather(*aws, return_exceptions=True))
