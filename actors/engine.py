"""What an engine sets up for a run, besides the protocols' actors: the ``RunEngine`` seam.

:func:`actors.orchestrator.run_scenario` writes the manifest and runs each
protocol with :class:`actors.orchestrator.ProtocolRun`; everything that differs
between engines is asked of one :class:`RunEngine`: the run's id, the
ZooKeeper ensemble, where event logs go, the :class:`~actors.system.ActorSystem`
the actors live on, the clean-up after each protocol and at the end. The real
engine's is :class:`actors.real_engine.RealEngine` (an embedded or a user's
ZooKeeper, local Ray or a cluster); the simulation engine's is
``actors.sim.run.SimEngine``. This module imports neither.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from actors.run_files import EventStorage
from actors.system import ActorSystem
from emulator.scenario import Scenario
from emulator.storage import Location

if TYPE_CHECKING:
    from actors.orchestrator import ProtocolRun
    from emulator.events import Event


@dataclass
class EngineParts:
    """What the protocols of a run share.

    Attributes:
        zk_hosts: the ZooKeeper members' ``host:port``.
        zk_base: the chroot of a user's ZooKeeper connect string ("" otherwise).
        ensemble: the embedded ensemble (for the ZooKeeper faults), or ``None``.
        storage: where the actors' event logs go.
        system: what the actors run on.
        zk_auth: the ``--zk-auth`` of the run (:class:`zk_registry.auth.ZkAuth`), or ``None``.
        tap: sees every event the orchestrator logs (the sim's online monitor), or ``None``.
        summarize_logs: read the protocol's logs back at its end for its result's
            summary (the manifest's ``counts``); ``False`` leaves it empty
            (``explore``'s seeds, whose runs are deleted unless kept).
    """

    zk_hosts: list[str]
    zk_base: str
    ensemble: Any
    storage: EventStorage
    system: ActorSystem
    zk_auth: Any = None
    tap: Callable[[Event], None] | None = None
    summarize_logs: bool = True


class RunEngine(Protocol):
    """The engine-specific parts of a run (see the module docstring)."""

    name: str

    def run_id(self, scenario: Scenario) -> str:
        """The run's id."""
        ...

    def start(
        self,
        scenario: Scenario,
        loc: Location,
        out_path: Path,
        manifest: dict[str, Any],
        save: Callable[[], None],
    ) -> None:
        """Start what the protocols share; record it in ``manifest``.

        ``save`` writes the manifest: called once a part is up, so an
        interrupted start-up still says what was started. Raises ``RunError``
        (one line) when the run cannot be set up.
        """
        ...

    def begin_protocol(self, protocol: str) -> EngineParts:
        """What one protocol's run uses: what :meth:`start` started, or a fresh world.

        The sim gives each protocol its own loop, streams and ensemble, so that a
        protocol's run does not depend on which others ran before it.
        """
        ...

    def protocol_done(self, run: ProtocolRun, manifest: dict[str, Any]) -> None:
        """Clean up after one protocol's run (recorded in ``manifest``)."""
        ...

    def close(self) -> None:
        """Stop what :meth:`start` started (bounded; never raises)."""
        ...
