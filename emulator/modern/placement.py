"""Where a group's coordinator lives (classic and KIP-848 alike).

A group belongs to one partition of the internal ``__consumer_offsets``
topic: ``Utils.abs(groupId.hashCode) % offsets.topic.num.partitions``
(K@3.9 ``GroupMetadataManager.partitionFor``; ``Utils.abs`` maps
``Integer.MIN_VALUE`` to 0). The leader of that partition hosts the group's
coordinator, and the group's committed offsets are records of that partition.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from emulator.javahash import java_string_hashcode
from emulator.kafka_keys import default_int
from emulator.placement import assign_replicas_to_brokers

OFFSETS_TOPIC = "__consumer_offsets"
DEFAULT_OFFSETS_TOPIC_NUM_PARTITIONS = default_int("offsets.topic.num.partitions")
DEFAULT_OFFSETS_TOPIC_REPLICATION_FACTOR = default_int("offsets.topic.replication.factor")
INT_MIN = -(2**31)


def kafka_abs(n: int) -> int:
    """``org.apache.kafka.common.utils.Utils.abs``: |n|, and 0 for Integer.MIN_VALUE."""
    return 0 if n == INT_MIN else abs(n)


def coordinator_partition(
    group_id: str, num_partitions: int = DEFAULT_OFFSETS_TOPIC_NUM_PARTITIONS
) -> int:
    """The ``__consumer_offsets`` partition that owns ``group_id``."""
    if num_partitions < 1:
        raise ValueError("offsets.topic.num.partitions must be >= 1")
    return kafka_abs(java_string_hashcode(group_id)) % num_partitions


def offsets_topic_assignment(
    broker_ids: Sequence[int],
    rng: random.Random,
    num_partitions: int = DEFAULT_OFFSETS_TOPIC_NUM_PARTITIONS,
    replication_factor: int = DEFAULT_OFFSETS_TOPIC_REPLICATION_FACTOR,
) -> dict[int, list[int]]:
    """Replica placement of ``__consumer_offsets``, created like any topic.

    The replication factor is capped at the number of brokers (an emulator
    choice: Kafka refuses to create the topic until enough brokers exist).
    """
    rf = max(1, min(replication_factor, len(broker_ids)))
    return assign_replicas_to_brokers(broker_ids, num_partitions, rf, rng)
