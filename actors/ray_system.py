"""The real engine's :class:`~actors.system.ActorSystem`: Ray actors and the machine's clocks."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

import ray

from actors.placement import actor_options as placement_options
from actors.placement import measure_nodes as placement_measure_nodes
from zk_registry.client import ZkClient


def _actor_classes() -> dict[str, Any]:
    from actors.remote import BrokerActor, ConsumerHostActor, ProducerActor

    return {"broker": BrokerActor, "producer": ProducerActor, "consumer_host": ConsumerHostActor}


class RaySystem:
    """Actors are Ray actors; time is the machine's (what every run did before the seam)."""

    engine = "real"
    ActorDied: type[BaseException] = ray.exceptions.RayActorError
    GetTimeout: type[BaseException] = ray.exceptions.GetTimeoutError

    def __init__(self) -> None:
        self._classes = _actor_classes()

    def spawn(
        self,
        role: str,
        args: Sequence[Any],
        *,
        name: str | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> Any:
        """A Ray actor of ``role`` (``ValueError`` while a killed actor's name is taken)."""
        opts = dict(options or {})
        if name is not None:
            opts["name"] = name
        return self._classes[role].options(**opts).remote(*args)

    def get(self, refs: Any, timeout: float) -> Any:
        """``ray.get`` with a timeout."""
        return ray.get(refs, timeout=timeout)

    def peek(self, handle: Any, method: str, timeout: float) -> Any:
        """A call of ``method`` on the actor, waited for (``ray.get``)."""
        return ray.get(getattr(handle, method).remote(), timeout=timeout)

    def wait(self, refs: Sequence[Any], timeout: float) -> list[Any]:
        """The refs ready within ``timeout`` (``ray.wait`` for all of them)."""
        if not refs:
            return []
        ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=max(0.0, timeout))
        return list(ready)

    def kill(self, handle: Any, *, no_restart: bool = True) -> None:
        """``ray.kill``."""
        ray.kill(handle, no_restart=no_restart)

    def sleep(self, seconds: float) -> None:
        """``time.sleep``."""
        time.sleep(seconds)

    def wall(self) -> float:
        """``time.time``."""
        return time.time()

    def monotonic(self) -> float:
        """``time.monotonic``."""
        return time.monotonic()

    def mono_source(self) -> Callable[[], float] | None:
        """``None``: every actor reads its own machine's clock."""
        return None

    def wall_source(self) -> Callable[[], float] | None:
        """``None``: every actor reads its own machine's clock."""
        return None

    def run(self, factory: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        """``asyncio.run`` of the coroutine, on a fresh loop in this thread."""
        return asyncio.run(factory())

    def zk_client(
        self, connect: str, timeout_s: float, *, chroot: str = "", auth: Any = None
    ) -> ZkClient:
        """A kazoo-backed :class:`ZkClient`."""
        return ZkClient(connect, timeout_s, chroot=chroot, auth=auth)

    def hostname(self) -> str:
        """``socket.gethostname()``."""
        return socket.gethostname()

    def measure_nodes(self, actors: Mapping[str, Any]) -> dict[str, Any]:
        """:func:`actors.placement.measure_nodes`."""
        return placement_measure_nodes(actors)

    def actor_options(self, placement: Any, role: str) -> dict[str, Any]:
        """:func:`actors.placement.actor_options`."""
        return placement_options(placement, role)
