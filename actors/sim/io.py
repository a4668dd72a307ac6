"""``SimIO``: the :class:`~actors.io.ActorIO` of the simulation engine.

The shells ask it what they asked kazoo, the TCP fault proxy, Ray's actor names
and the machine (design §1.2-§1.6):

* ZooKeeper clients are the project's own :class:`~zk_registry.client.ZkClient`
  over a :class:`zk_registry.sim.client.SimKazooClient` of the run's
  :class:`~zk_registry.sim.server.SimEnsemble`, with callbacks dispatched on the
  sim loop (no threads); each client is named after the actor that made it,
  which names its random streams;
* a legacy member's fault proxy is a :class:`zk_registry.sim.link.SimZkLink`;
* a session expiry is the ensemble's own (``SimEnsemble.expire_session``);
* an actor found by name is the :class:`~actors.sim.system.SimActorSystem`'s;
* the wall clock is virtual (``SIM_EPOCH`` + the loop's time) and the host is ``sim``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from actors.io import MakeCoordinatorFactory, ZkLink
from actors.sim.system import HOSTNAME, SimActorSystem
from emulator.sim.clocks import VirtualClocks
from emulator.sim.loop import current_actor
from zk_registry.client import ZkClient, asyncio_dispatch
from zk_registry.sim.link import SimZkLink
from zk_registry.sim.server import SimEnsemble

if TYPE_CHECKING:
    from emulator.events import Event


class SimIO:
    """Every simulated actor's way out: the simulated ZooKeeper, names, virtual clocks.

    Args:
        ensemble: the run's simulated ZooKeeper.
        system: the run's actor system (look-ups by name).
        tap: called with every event any shell logs (the online monitor), or ``None``.
        coordinator_factory: replaces the brokers' group coordinators (a test's
            planted bug), or ``None``.
    """

    def __init__(
        self,
        ensemble: SimEnsemble,
        system: SimActorSystem,
        *,
        tap: Callable[[Event], None] | None = None,
        coordinator_factory: MakeCoordinatorFactory | None = None,
    ) -> None:
        self.ensemble = ensemble
        self.system = system
        self.clocks = VirtualClocks(system.loop)
        self.tap = tap
        self.coordinator_factory = coordinator_factory

    def zk_client(self, connect: str, session_timeout_s: float, **options: Any) -> ZkClient:
        """A :class:`ZkClient` on the simulated ensemble, named after the calling actor."""
        actor = current_actor.get()
        prefix = actor.name if actor is not None else "driver"
        options.setdefault("dispatch", asyncio_dispatch(self.system.loop))
        return ZkClient(
            connect,
            session_timeout_s,
            raw_factory=self.ensemble.raw_factory(prefix),
            **options,
        )

    def zk_link(self, upstream: Sequence[str]) -> ZkLink:
        """A :class:`SimZkLink` to the ensemble's members."""
        return SimZkLink(self.ensemble, list(upstream))

    async def expire_session(self, connect: str, session_id: int, password: bytes) -> None:
        """The ensemble expires the session at once (what the intruder-client trick does)."""
        del connect
        self.ensemble.expire_session(session_id, password)

    def lookup_actor(self, name: str) -> Any | None:
        """The live simulated actor called ``name``."""
        return self.system.lookup(name)

    def wall_ms(self) -> int:
        """Virtual wall time in epoch ms."""
        return self.clocks.wall_ms()

    def hostname(self) -> str:
        """``sim``."""
        return HOSTNAME
