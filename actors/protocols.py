"""How each modern protocol's coordinators are built.

What the protocols are is :mod:`emulator.protocols`; their member machines are
built by :func:`emulator.modern.machine.make_member_machine`.
"""

from __future__ import annotations

import random
from typing import Any

from emulator.modern.config import modern_properties
from emulator.protocols import spec


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
