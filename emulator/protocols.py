"""The protocols a run can compare: the one table every package reads.

A *run protocol* is what ``--protocol`` names and what a run directory, an
event log and a report are keyed by. Each maps onto one of Kafka's
generations (its ``group.protocol``, the scenario's config generation):

========================  =============  ==================================  ===================
run protocol              generation     members and coordinator             default assignor
========================  =============  ==================================  ===================
``zookeeper``             ``zookeeper``  0.8.2 high-level consumer, no       ``range`` (A)
                                         coordinator: ZooKeeper holds it all
``classic-eager``         ``classic``    JoinGroup/SyncGroup, EAGER          ``range`` (B)
``classic-cooperative``   ``classic``    JoinGroup/SyncGroup, COOPERATIVE    ``cooperative-sticky``
                                                                             (B7)
``consumer``              ``consumer``   KIP-848 heartbeat protocol,         ``uniform`` (C)
                                         server-side assignor
``share``                 ``share``      KIP-932 share group: ShareGroup-    ``simple`` (F)
                                         Heartbeat, records acquired under
                                         locks, several members a partition
========================  =============  ==================================  ===================

``all`` on the command line is the four consumer-group protocols
(:data:`GROUP_PROTOCOLS`); a share group is a work queue, not a consumer
group, and runs when it is named (Kafka 4.0+).

A scenario's ``[group].assignor`` overrides the assignor where it applies
(:func:`assignor_for`); which faults mean something under a protocol follows
from :attr:`ProtocolSpec.members_use_zookeeper` and
:attr:`ProtocolSpec.has_coordinator` (see :func:`emulator.scenario.faults.applicability`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

__all__ = [
    "CLIENT_ASSIGNORS",
    "GENERATIONS",
    "GROUP_PROTOCOLS",
    "LEGACY_ASSIGNORS",
    "LEGACY_PROTOCOL",
    "MODERN_PROTOCOLS",
    "RUN_PROTOCOLS",
    "SERVER_ASSIGNORS",
    "SPECS",
    "Generation",
    "ProtocolSpec",
    "assignor_for",
    "spec",
]

Generation = Literal["zookeeper", "classic", "consumer", "share"]
"""A scenario's config generation: the 0.8 consumer, ``group.protocol``, or the share consumer."""

GENERATIONS: Final[tuple[Generation, ...]] = ("zookeeper", "classic", "consumer", "share")

LEGACY_ASSIGNORS: Final = ("range", "roundrobin")
"""The 0.8 consumer's ``partition.assignment.strategy`` values (A2)."""

CLIENT_ASSIGNORS: Final = ("range", "roundrobin", "sticky", "cooperative-sticky")
"""The classic protocol's client-side ``partition.assignment.strategy`` names (B)."""

SERVER_ASSIGNORS: Final = ("uniform", "range")
"""KIP-848's server-side ``group.remote.assignor`` names (C)."""

SHARE_ASSIGNORS: Final = ("simple",)
"""KIP-932's share-group assignor (``group.share.assignors``: ``simple``)."""


@dataclass(frozen=True)
class ProtocolSpec:
    """What one run protocol is.

    Attributes:
        name: the run protocol (``--protocol``).
        generation: its config generation (which ``[kafka]`` keys apply).
        assignor: the default assignor.
        rebalance: how members give partitions up: ``"legacy"`` (release all,
            claim in ZooKeeper), ``"eager"`` (revoke all before JoinGroup),
            ``"cooperative"`` (revoke only what moves, over two rounds),
            ``"incremental"`` (KIP-848: per-member reconciliation) or
            ``"share"`` (KIP-932: no revocation, partitions shared).
        title: how a report names it.
    """

    name: str
    generation: Generation
    assignor: str
    rebalance: Literal["legacy", "eager", "cooperative", "incremental", "share"]
    title: str

    @property
    def members_use_zookeeper(self) -> bool:
        """Whether the group's members hold ZooKeeper sessions (only the 0.8 consumer)."""
        return self.generation == "zookeeper"

    @property
    def has_coordinator(self) -> bool:
        """Whether a broker-side group coordinator runs the group."""
        return self.generation != "zookeeper"


SPECS: Final[Mapping[str, ProtocolSpec]] = {
    s.name: s
    for s in (
        ProtocolSpec("zookeeper", "zookeeper", "range", "legacy", "0.8 ZooKeeper consumer"),
        ProtocolSpec("classic-eager", "classic", "range", "eager", "classic, eager (range)"),
        ProtocolSpec(
            "classic-cooperative",
            "classic",
            "cooperative-sticky",
            "cooperative",
            "classic, cooperative-sticky",
        ),
        ProtocolSpec("consumer", "consumer", "uniform", "incremental", "KIP-848 consumer protocol"),
        ProtocolSpec("share", "share", "simple", "share", "KIP-932 share group"),
    )
}
"""Run protocol -> its spec, in the order reports show them (oldest generation first)."""

RUN_PROTOCOLS: Final[tuple[str, ...]] = tuple(SPECS)
"""Every run protocol, oldest generation first."""

GROUP_PROTOCOLS: Final[tuple[str, ...]] = tuple(
    n for n, s in SPECS.items() if s.generation != "share"
)
"""The consumer-group protocols (what ``all`` names): every run protocol but ``share``."""

LEGACY_PROTOCOL: Final = "zookeeper"
"""The 0.8 consumer: group state in ZooKeeper, no group coordinator."""

MODERN_PROTOCOLS: Final[tuple[str, ...]] = tuple(n for n, s in SPECS.items() if s.has_coordinator)
"""The run protocols with a broker-side group coordinator and no ZooKeeper client."""


def spec(protocol: str) -> ProtocolSpec:
    """The spec of a run protocol.

    Raises:
        ValueError: not a run protocol (one line naming the known ones).
    """
    try:
        return SPECS[protocol]
    except KeyError:
        raise ValueError(
            f"unknown protocol {protocol!r}; expected one of {', '.join(RUN_PROTOCOLS)}"
        ) from None


def assignor_for(protocol: str, override: str | None) -> tuple[str, str | None]:
    """The assignor ``protocol`` runs with, given a scenario's ``[group].assignor``.

    Args:
        protocol: a run protocol.
        override: the scenario's assignor, or ``None`` for the protocol's default.

    Returns:
        The assignor, and ``None`` or a one-line note for the manifest when the
        override does not apply to this protocol (the default is kept then).
    """
    s = spec(protocol)
    if override is None:
        return s.assignor, None
    if s.generation == "zookeeper":
        if override in LEGACY_ASSIGNORS:
            return override, None
        return s.assignor, f"assignor {override!r} does not exist in the 0.8 consumer"
    if s.generation == "classic":
        if override not in CLIENT_ASSIGNORS:
            return s.assignor, f"assignor {override!r} is not a client-side assignor"
        if s.rebalance == "cooperative" and override != "cooperative-sticky":
            return s.assignor, f"{protocol} keeps cooperative-sticky"
        if s.rebalance == "eager" and override == "cooperative-sticky":
            return s.assignor, f"{protocol} cannot run a cooperative assignor"
        return override, None
    if s.generation == "share":
        if override in SHARE_ASSIGNORS:
            return override, None
        return s.assignor, f"assignor {override!r} is not a share-group assignor"
    if override not in SERVER_ASSIGNORS:
        return s.assignor, f"assignor {override!r} is not a server-side assignor"
    return override, None
