"""How each modern protocol's members and coordinators are built.

What the protocols are is :mod:`emulator.protocols`. ``[group].static_membership``
gives every member of the classic and consumer protocols a ``group.instance.id``.
"""

from __future__ import annotations

import random
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


def make_coordinator_factory(
    protocol: str,
    kafka: dict[str, object],
    broker_id: int,
    seed: int,
    partitions_per_topic: dict[str, int],
) -> Any:
    """A factory ``group_id -> coordinator`` for the brokers of a ``protocol`` run."""
    props = modern_properties(kafka)
    if spec(protocol).generation == "classic":
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
