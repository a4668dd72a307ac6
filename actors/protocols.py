"""How each modern protocol's members are built.

The coordinators are built by :func:`emulator.broker.coordinators.make_coordinator_factory`.

What the protocols are is :mod:`emulator.protocols`. ``[group].static_membership``
gives every member of the classic and consumer protocols a ``group.instance.id``.
"""

from __future__ import annotations

from typing import Any

from emulator.modern.config import modern_properties
from emulator.protocols import spec


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
    props = modern_properties(kafka)
    if static:
        props["group.instance.id"] = f"{group}-{name}"
    props.setdefault("client.id", name)
    if spec(protocol).generation == "classic":
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
