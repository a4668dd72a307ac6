"""The protocols a run can compare, and how each one's members and coordinators are built.

``--protocol`` names (the CLI) map to Kafka's generations:

========================  =====================================================
``zookeeper``             the 0.8.2 consumer, range assignor (A)
``classic-eager``         ``group.protocol=classic``, range (EAGER) (B)
``classic-cooperative``   ``group.protocol=classic``, cooperative-sticky (B7)
``consumer``              ``group.protocol=consumer`` (KIP-848), uniform (C)
========================  =====================================================

A scenario's ``[group].assignor`` overrides the assignor of the protocols it
applies to, and ``[group].static_membership`` gives every member of the
classic and consumer protocols a ``group.instance.id``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

CLIENT_ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky")
SERVER_ASSIGNORS = ("uniform", "range")


@dataclass(frozen=True)
class ProtocolSpec:
    """What one protocol name means.

    Attributes:
        name: the CLI name.
        generation: the scenario's config generation (``zookeeper``, ``classic``, ``consumer``).
        assignor: the default assignor.
    """

    name: str
    generation: str
    assignor: str


SPECS = {
    "zookeeper": ProtocolSpec("zookeeper", "zookeeper", "range"),
    "classic-eager": ProtocolSpec("classic-eager", "classic", "range"),
    "classic-cooperative": ProtocolSpec("classic-cooperative", "classic", "cooperative-sticky"),
    "consumer": ProtocolSpec("consumer", "consumer", "uniform"),
}


def assignor_for(protocol: str, override: str | None) -> tuple[str, str | None]:
    """The assignor a protocol runs with, and a note when the override does not apply."""
    spec = SPECS[protocol]
    if override is None:
        return spec.assignor, None
    if spec.generation == "zookeeper":
        if override in ("range", "roundrobin"):
            return override, None
        return spec.assignor, f"assignor {override!r} does not exist in the 0.8 consumer"
    if spec.generation == "classic":
        if override not in CLIENT_ASSIGNORS:
            return spec.assignor, f"assignor {override!r} is not a client-side assignor"
        if protocol == "classic-cooperative" and override != "cooperative-sticky":
            return spec.assignor, "classic-cooperative keeps cooperative-sticky"
        if protocol == "classic-eager" and override == "cooperative-sticky":
            return spec.assignor, "classic-eager cannot run a cooperative assignor"
        return override, None
    if override not in SERVER_ASSIGNORS:
        return spec.assignor, f"assignor {override!r} is not a server-side assignor"
    return override, None


def _modern_props(kafka: dict[str, object]) -> dict[str, object]:
    props = dict(kafka)
    reset = props.get("auto.offset.reset")
    if reset in ("smallest", "largest"):
        props["auto.offset.reset"] = {"smallest": "earliest", "largest": "latest"}[str(reset)]
    return props


def make_member_machine(
    protocol: str,
    *,
    name: str,
    group: str,
    topics: list[str],
    kafka: dict[str, object],
    partitions_per_topic: dict[str, int],
    assignor: str,
    static: bool,
    corr_start: int,
    seed: int | None = None,
    rebalance_listener: str = "none",
) -> Any:
    """A modern member state machine for ``protocol``."""
    props = _modern_props(kafka)
    if static:
        props["group.instance.id"] = f"{group}-{name}"
    props.setdefault("client.id", name)
    if SPECS[protocol].generation == "classic":
        from emulator.modern.classic_member import ClassicMember
        from emulator.modern.config import ClassicConsumerConfig

        props["partition.assignment.strategy"] = assignor
        cfg = ClassicConsumerConfig.from_kafka(props)
        return ClassicMember(
            member=name,
            group=group,
            topics=topics,
            config=cfg,
            partitions_per_topic=partitions_per_topic,
            corr_start=corr_start,
            rebalance_listener=rebalance_listener,
        )
    from emulator.modern.consumer_member import make_consumer_member

    return make_consumer_member(
        name=name,
        group=group,
        topics=topics,
        props=props,
        server_assignor=assignor,
        corr_start=corr_start,
        seed=seed,
        rebalance_listener=rebalance_listener,
    )


def make_coordinator_factory(
    protocol: str,
    kafka: dict[str, object],
    broker_id: int,
    seed: int,
    partitions_per_topic: dict[str, int],
) -> Any:
    """A factory ``group_id -> coordinator`` for the brokers of a ``protocol`` run."""
    props = _modern_props(kafka)
    if SPECS[protocol].generation == "classic":
        from emulator.modern.classic_coordinator import ClassicGroupCoordinator
        from emulator.modern.config import GroupCoordinatorConfig

        cfg = GroupCoordinatorConfig.from_kafka(props)

        def classic(group_id: str, committed: dict[Any, int] | None = None) -> Any:
            rng = random.Random(f"{seed}/{broker_id}/{group_id}")
            return ClassicGroupCoordinator(
                group_id, cfg, rng, broker=broker_id, committed=committed
            )

        return classic
    from emulator.modern.consumer_coordinator import make_consumer_coordinator

    def kip848(group_id: str, committed: dict[Any, int] | None = None) -> Any:
        rng = random.Random(f"{seed}/{broker_id}/{group_id}")
        coord = make_consumer_coordinator(group_id, props, rng, broker_id, partitions_per_topic)
        coord.committed.update(committed or {})
        return coord

    return kip848
