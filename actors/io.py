"""What an actor shell asks of the world outside its loop: the ``ActorIO`` seam.

The shells (:class:`actors.broker.BrokerCore`, :class:`actors.consumer_host.ConsumerHostCore`,
:class:`actors.producer.ProducerCore` and their :class:`actors.metadata.LeaderCache`)
do their timing on the running asyncio loop and call other actors through the
handles they are given. What is left, they ask of one :class:`ActorIO`:

* ZooKeeper sessions (:meth:`ActorIO.zk_client`), the fault proxy a legacy
  member's session may go through (:meth:`ActorIO.zk_link`), and the expiry of
  a session on the server (:meth:`ActorIO.expire_session`);
* a broker actor found again by name after a restart (:meth:`ActorIO.lookup_actor`);
* the wall clock for the values written into ZooKeeper and into consumer ids
  (:meth:`ActorIO.wall_ms`), and the machine's name (:meth:`ActorIO.hostname`);
* a tap on every event the shell logs (:attr:`ActorIO.tap`) and the group
  coordinators a broker hosts (:attr:`ActorIO.coordinator_factory`).

:class:`RealIO` is what the real engine does (kazoo, a TCP fault proxy, Ray's
actor names, the machine's clock and name); each shell makes one when it is
given none, so Ray starts the actors exactly as before. The simulation engine
(issue 18) passes its own, which runs the same shells on its virtual clock,
simulated ZooKeeper and simulated network. This module imports no Ray and no
kazoo: the real ones are reached only when called.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from emulator.broker.coordinators import CoordinatorFactory
    from emulator.events import Event
    from zk_registry.client import ZkClient
    from zk_registry.proxy import ProxyMode


class ZkLink(Protocol):
    """A legacy member's way to ZooKeeper that faults can cut.

    On the real engine a :class:`zk_registry.proxy.FaultProxy` (a TCP proxy).

    Attributes:
        latency_s: one-way delay added in both directions, wall seconds.
    """

    latency_s: float

    @property
    def address(self) -> str:
        """The ``host:port`` the member's client connects to (valid after :meth:`start`)."""
        ...

    async def start(self) -> int:
        """Start accepting the client's connections; return the port."""
        ...

    async def close(self) -> None:
        """Stop accepting and drop every connection."""
        ...

    def set_mode(self, mode: ProxyMode) -> None:
        """``PASS``, ``BLACKHOLE`` (bytes dropped) or ``DOWN`` (connections reset)."""
        ...


class MakeCoordinatorFactory(Protocol):
    """Makes a broker's coordinator factory: the signature of
    :func:`emulator.broker.coordinators.make_coordinator_factory`."""

    def __call__(
        self,
        protocol: str,
        kafka: dict[str, object],
        broker_id: int,
        seed: int,
        partitions_per_topic: dict[str, int],
        *,
        mixed_protocols: bool = False,
    ) -> CoordinatorFactory:
        """The factory ``(group_id, committed) -> coordinator`` of ``broker_id``.

        ``partitions_per_topic`` is the broker's metadata image, shared (not
        copied): coordinators made later see grown topics.
        """
        ...


class ActorIO(Protocol):
    """The world outside an actor shell's loop: ZooKeeper, actor names, wall clock, host.

    Attributes:
        tap: called with every event the shell's log writes
            (:class:`emulator.eventlog.EventWriter`'s ``tap``); ``None``: no tap.
        coordinator_factory: makes the group coordinators a broker hosts in
            place of :func:`emulator.broker.coordinators.make_coordinator_factory`;
            ``None``: that one.
    """

    tap: Callable[[Event], None] | None
    coordinator_factory: MakeCoordinatorFactory | None

    def zk_client(self, connect: str, session_timeout_s: float, **options: Any) -> ZkClient:
        """A new (not yet started) ZooKeeper client.

        Args:
            connect: the connect string, with the run's chroot.
            session_timeout_s: the requested session timeout, wall seconds.
            options: :class:`zk_registry.client.ZkClient`'s keyword arguments
                (``dispatch``, ``on_state``, ``on_new_session``, ``counter``, ``auth``).
        """
        ...

    def zk_link(self, upstream: Sequence[str]) -> ZkLink:
        """A new fault link (not started) to the ensemble members ``upstream`` (``host:port``)."""
        ...

    async def expire_session(self, connect: str, session_id: int, password: bytes) -> None:
        """Expire the session ``(session_id, password)`` on the ensemble ``connect``.

        Returns once the server has dropped it, as a long network cut would.
        """
        ...

    def lookup_actor(self, name: str) -> Any | None:
        """The handle of the live actor called ``name``; ``None`` if there is none."""
        ...

    def wall_ms(self) -> int:
        """The wall clock in epoch ms (Java's ``System.currentTimeMillis``)."""
        ...

    def hostname(self) -> str:
        """The name of the machine the actor runs on (event logs, consumer ids)."""
        ...


class RealIO:
    """The real engine's :class:`ActorIO`: kazoo, a TCP fault proxy, Ray, the machine."""

    def __init__(self) -> None:
        self.tap: Callable[[Event], None] | None = None
        self.coordinator_factory: MakeCoordinatorFactory | None = None

    def zk_client(self, connect: str, session_timeout_s: float, **options: Any) -> ZkClient:
        """A kazoo-backed :class:`~zk_registry.client.ZkClient` with ZkClient's own defaults."""
        from zk_registry.client import ZkClient

        return ZkClient(connect, session_timeout_s, **options)

    def zk_link(self, upstream: Sequence[str]) -> ZkLink:
        """A :class:`~zk_registry.proxy.FaultProxy` on 127.0.0.1."""
        from zk_registry.proxy import FaultProxy

        return FaultProxy(list(upstream))

    async def expire_session(self, connect: str, session_id: int, password: bytes) -> None:
        """:func:`zk_registry.faults.expire_session` in the loop's default executor (a thread)."""
        from zk_registry.faults import expire_session

        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, lambda: expire_session(connect, session_id, password))

    def lookup_actor(self, name: str) -> Any | None:
        """``ray.get_actor(name)`` in a process connected to Ray; ``None`` otherwise or on error.

        Ray's own module if this process has loaded it: a process that never
        imported Ray is not connected to it, so there is nothing to look up
        (and no reason to load Ray for that).
        """
        ray = sys.modules.get("ray")
        if ray is None or not ray.is_initialized():
            return None
        with contextlib.suppress(Exception):
            return ray.get_actor(name)
        return None

    def wall_ms(self) -> int:
        """``time.time()`` in whole ms."""
        return int(time.time() * 1000)

    def hostname(self) -> str:
        """``socket.gethostname()``."""
        return socket.gethostname()
