"""Replica placement at topic creation: Kafka 0.8.2.2's ``AdminUtils.assignReplicasToBrokers``.

kafka-protocols.md A8, "Replica placement at topic creation"; K@0.8.2.2
``core/src/main/scala/kafka/admin/AdminUtils.scala``. The two goals stated
there: spread the replicas evenly among brokers, and for the partitions led by
one broker spread their other replicas over the other brokers. So:

1. The first replica of partition p is ``brokers[(p + startIndex) mod n]``:
   round-robin from a random start.
2. The j-th further replica is ``brokers[(first + 1 + (shift + j) mod (n-1)) mod n]``
   (``replicaIndex``), where ``shift`` (``nextReplicaShift``) starts random and
   grows by one each time the partition id reaches a non-zero multiple of n.

Example from the Scala comment, 5 brokers, 10 partitions, startIndex 0, shift 0::

    broker-0  broker-1  broker-2  broker-3  broker-4
    p0        p1        p2        p3        p4       (1st replica)
    p5        p6        p7        p8        p9       (1st replica)
    p4        p0        p1        p2        p3       (2nd replica)
    p8        p9        p5        p6        p7       (2nd replica)
    p3        p4        p0        p1        p2       (3rd replica)
    p7        p8        p9        p5        p6       (3rd replica)

Randomness: Kafka draws ``startIndex`` then ``nextReplicaShift`` from one
``java.util.Random`` with ``nextInt(n)`` each; here they are drawn, in that
order, from the injected ``random.Random`` with ``randrange(n)``. Given the same
two draws the result is the same as Kafka's. ``brokers`` is used in the given
order; ``AdminUtils.createTopic`` passes ``ZkUtils.getSortedBrokerList``
(ascending ids).

Pure: no I/O, no clock, no global random state.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

__all__ = ["AdminOperationError", "assign_replicas_to_brokers", "replica_index"]


class AdminOperationError(ValueError):
    """Kafka's ``AdminOperationException``: the request cannot be placed."""


def replica_index(
    first_replica_index: int, second_replica_shift: int, replica: int, n_brokers: int
) -> int:
    """``AdminUtils.replicaIndex``: the broker index of a partition's (replica+2)-th replica.

    Args:
        first_replica_index: index of the partition's first replica in the broker list.
        second_replica_shift: the current ``nextReplicaShift``.
        replica: 0 for the second replica, 1 for the third, ...
        n_brokers: size of the broker list (> 1).

    Returns:
        ``(first + 1 + (shift + replica) mod (n - 1)) mod n``.
    """
    shift = 1 + (second_replica_shift + replica) % (n_brokers - 1)
    return (first_replica_index + shift) % n_brokers


def assign_replicas_to_brokers(
    broker_ids: Sequence[int],
    n_partitions: int,
    replication_factor: int,
    rng: random.Random,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
) -> dict[int, list[int]]:
    """Kafka 0.8.2.2 ``AdminUtils.assignReplicasToBrokers``.

    Args:
        broker_ids: the broker list, in the order Kafka would index it.
        n_partitions: number of partitions to place (> 0).
        replication_factor: replicas per partition (1 .. len(broker_ids)).
        rng: source of ``startIndex`` and ``nextReplicaShift`` when not fixed
            (drawn only when ``fixed_start_index < 0``).
        fixed_start_index: if >= 0, used as both ``startIndex`` and the initial
            ``nextReplicaShift`` (``addPartitions`` passes the head of partition
            0's replica list here).
        start_partition_id: if >= 0, the first partition id (``addPartitions``
            passes the current partition count); else 0.

    Returns:
        Partition id -> replica list (head = preferred replica), in partition
        order (Kafka returns an unordered Scala Map; see
        :func:`zk_registry.layout.encode_topic_assignment` for its JSON order).

    Raises:
        AdminOperationError: ``n_partitions <= 0``, ``replication_factor <= 0``,
            or ``replication_factor > len(broker_ids)`` (Kafka's messages).
    """
    if n_partitions <= 0:
        raise AdminOperationError("number of partitions must be larger than 0")
    if replication_factor <= 0:
        raise AdminOperationError("replication factor must be larger than 0")
    n = len(broker_ids)
    if replication_factor > n:
        raise AdminOperationError(
            f"replication factor: {replication_factor} larger than available brokers: {n}"
        )
    brokers = list(broker_ids)
    start_index = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    current_partition_id = start_partition_id if start_partition_id >= 0 else 0
    next_replica_shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    ret: dict[int, list[int]] = {}
    for _ in range(n_partitions):
        if current_partition_id > 0 and current_partition_id % n == 0:
            next_replica_shift += 1
        first_replica_index = (current_partition_id + start_index) % n
        replicas = [brokers[first_replica_index]]
        for j in range(replication_factor - 1):
            replicas.append(brokers[replica_index(first_replica_index, next_replica_shift, j, n)])
        ret[current_partition_id] = replicas
        current_partition_id += 1
    return ret
