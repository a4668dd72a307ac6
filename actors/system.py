"""What a run needs of the machinery its actors live on: the ``ActorSystem`` seam.

The orchestrator (:class:`actors.orchestrator.ProtocolRun`) is synchronous code
in the driver process. Everything it asks of Ray (start an actor, wait for a
call's result, kill an actor) and of the machine (sleep, read the clocks, run
an admin coroutine against ZooKeeper) goes through one :class:`ActorSystem`.
The real engine's is :class:`actors.ray_system.RaySystem` (Ray actors, the
machine's clocks); the simulation engine (issue 18) supplies one that runs
every actor on a virtual-time loop in one process. The orchestrator's logic is
the same for both.

A *handle* is what a spawned actor is called through: ``handle.method.remote(*args)``
returns a *ref*, which :meth:`ActorSystem.get` resolves. This module imports
no Ray: it only names the shape.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Protocol

from zk_registry.client import ZkClient

ActorRole = str
"""What an actor is: ``broker``, ``producer`` or ``consumer_host``."""

ROLES: tuple[ActorRole, ...] = ("broker", "producer", "consumer_host")


class ActorSystem(Protocol):
    """The actors' machinery and the driver's clocks, as one run sees them.

    Attributes:
        engine: ``real`` or ``sim``; recorded in the run context.
        ActorDied: the exception a call to an actor that is gone raises from :meth:`get`.
        GetTimeout: the exception :meth:`get` raises when its timeout passes.
    """

    engine: str
    ActorDied: type[BaseException]
    GetTimeout: type[BaseException]

    def spawn(
        self,
        role: ActorRole,
        args: Sequence[Any],
        *,
        name: str | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> Any:
        """Start an actor of ``role`` with constructor ``args``; return its handle.

        ``name``: a name it can be found by again (a restarted broker); ``options``:
        placement options (``actors.placement.actor_options``). Raises
        ``ValueError`` while a killed actor's name is not yet free.
        """
        ...

    def get(self, refs: Any, timeout: float) -> Any:
        """The result of one ref, or the list of results of a list of refs.

        Raises :attr:`ActorDied` if the actor is gone and :attr:`GetTimeout`
        after ``timeout`` seconds (of the system's clock).
        """
        ...

    def wait(self, refs: Sequence[Any], timeout: float) -> list[Any]:
        """The refs among ``refs`` that are resolved within ``timeout`` seconds."""
        ...

    def peek(self, handle: Any, method: str, timeout: float) -> Any:
        """What the driver shows of an actor (its live counters): ``method()``'s result.

        The real engine calls the actor and waits (as :meth:`get`); the sim
        reads the actor in place, between two of the simulated world's events,
        without a message: watching the simulated world does not change it.
        Raises :attr:`ActorDied` if the actor is gone.
        """
        ...

    def kill(self, handle: Any, *, no_restart: bool = True) -> None:
        """End an actor at once: no goodbye, no cleanup (``kill -9``)."""
        ...

    def sleep(self, seconds: float) -> None:
        """Let ``seconds`` of the system's time pass (the actors run meanwhile)."""
        ...

    def wall(self) -> float:
        """The wall clock, seconds since the epoch (``time.time`` on the real engine)."""
        ...

    def monotonic(self) -> float:
        """The monotonic clock, seconds (``time.monotonic`` on the real engine)."""
        ...

    def mono_source(self) -> Callable[[], float] | None:
        """The monotonic source run contexts must use (``None``: the machine's)."""
        ...

    def wall_source(self) -> Callable[[], float] | None:
        """The wall source run contexts must use (``None``: the machine's)."""
        ...

    def run(self, factory: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        """Run an admin coroutine made by ``factory`` to its end and return its result."""
        ...

    def zk_client(
        self, connect: str, timeout_s: float, *, chroot: str = "", auth: Any = None
    ) -> ZkClient:
        """A ZooKeeper client for the driver's admin steps (topics, partitions)."""
        ...

    def hostname(self) -> str:
        """The name of the machine the driver runs on (consumer ids, manifest)."""
        ...

    def measure_nodes(self, actors: Mapping[str, Any]) -> dict[str, Any]:
        """Where each actor runs and each node's clock offset (``actors.placement``)."""
        ...

    def actor_options(self, placement: Any, role: str) -> dict[str, Any]:
        """Placement options of a ``role`` actor under a scenario's ``[placement]``."""
        ...
