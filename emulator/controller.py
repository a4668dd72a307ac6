"""The Kafka 0.8.2.2 controller's decisions, without I/O (kafka-protocols.md A8).

Each function is one decision the controller (or, for the ISR, the leader
broker) takes on data it has already read; :mod:`zk_registry.controller` does
the reads, the conditional writes and the watches around them.

=================================  ==========================================================
function                           Kafka 0.8.2.2 (``core/src/main/scala/kafka/...``)
=================================  ==========================================================
:func:`new_partition_leader`       ``PartitionStateMachine.initializeLeaderAndIsrForPartition``
                                   (NewPartition -> OnlinePartition)
:func:`offline_leader`             ``OfflinePartitionLeaderSelector.selectLeader``
:func:`preferred_leader`           ``PreferredReplicaPartitionLeaderSelector.selectLeader``
:func:`remove_replica_from_isr`    ``KafkaController.removeReplicaFromIsr`` (the
                                   ``OfflineReplica`` transition of a dead replica)
:func:`imbalance`,                 ``KafkaController.checkAndTriggerPartitionRebalance``
:func:`partitions_to_rebalance`
:func:`out_of_sync_replicas`       ``cluster/Partition.getOutOfSyncReplicas`` (``maybeShrinkIsr``)
:func:`caught_up_for_expand`       ``cluster/Partition.maybeExpandIsr``'s condition
=================================  ==========================================================

Replica lists are in *assignment order* (the head is the preferred replica);
ISRs keep the order they are stored in. The leader epoch is incremented by
every leader or ISR change the controller writes; ``controller_epoch`` is the
epoch of the controller writing it.

The znode payloads (``.../partitions/<p>/state``, ``/controller``,
``/admin/preferred_replica_election``) are encoded byte for byte by
:mod:`zk_registry.layout` (``encode_partition_state`` and friends), which has
the Scala map orders; :mod:`zk_registry.controller` converts :class:`LeaderIsr`
to and from them. The core stays free of that package (architecture.md).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

__all__ = [
    "DEFAULT_REPLICA_LAG_MAX_MESSAGES",
    "DEFAULT_REPLICA_LAG_TIME_MAX_MS",
    "LEADER_DURING_DELETE",
    "NO_LEADER",
    "LeaderIsr",
    "OfflineReason",
    "TopicPartition",
    "caught_up_for_expand",
    "imbalance",
    "new_partition_leader",
    "offline_leader",
    "out_of_sync_replicas",
    "partitions_to_rebalance",
    "preferred_leader",
    "remove_replica_from_isr",
]

TopicPartition = tuple[str, int]

#: ``LeaderAndIsr.NoLeader``: the leader field of a partition without a leader.
NO_LEADER: Final = -1
#: ``LeaderAndIsr.LeaderDuringDelete``: the leader an UpdateMetadata gives the
#: partitions of a topic being deleted; a broker drops them from its metadata
#: cache (K@0.8.2.2 ``api/LeaderAndIsrRequest.scala`` 36, ``server/MetadataCache.scala``
#: 113-134; K@3.9 ``ZkMetadataCache.scala`` 556-596).
LEADER_DURING_DELETE: Final = -2
#: ``replica.lag.time.max.ms`` default in 0.8.2.2 (``KafkaConfig``).
DEFAULT_REPLICA_LAG_TIME_MAX_MS: Final = 10000
#: ``replica.lag.max.messages`` default in 0.8.2.2 (``KafkaConfig``).
DEFAULT_REPLICA_LAG_MAX_MESSAGES: Final = 4000

OfflineReason = Literal["offline", "unclean", "no_replica_online"]


@dataclass(frozen=True)
class LeaderIsr:
    """``LeaderIsrAndControllerEpoch``: the content of a partition's state znode.

    Attributes:
        leader: the leader broker id, :data:`NO_LEADER` (-1) for none.
        leader_epoch: incremented on every change the controller writes.
        isr: the in-sync replicas, in stored order.
        controller_epoch: the epoch of the controller (or leader) that wrote it.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int


def new_partition_leader(
    assigned: Sequence[int], live: Collection[int], controller_epoch: int
) -> LeaderIsr | None:
    """NewPartition -> OnlinePartition (``initializeLeaderAndIsrForPartition``).

    Leader = the first *live* replica in assignment order; ISR = every live
    assigned replica, in assignment order; leader epoch 0.

    Returns:
        The initial state, or ``None`` when no assigned replica is live (Kafka:
        ``StateChangeFailedException``, the partition stays New).
    """
    live_set = set(live)
    isr = tuple(r for r in assigned if r in live_set)
    if not isr:
        return None
    return LeaderIsr(isr[0], 0, isr, controller_epoch)


def offline_leader(
    assigned: Sequence[int],
    current: LeaderIsr,
    live: Collection[int],
    unclean: bool,
    controller_epoch: int,
) -> tuple[LeaderIsr | None, OfflineReason]:
    """``OfflinePartitionLeaderSelector.selectLeader`` (OfflinePartition -> OnlinePartition).

    * Some ISR member is live: leader = the first replica in *assignment* order
      that is live and in the ISR; ISR = the live ISR members (stored order).
      Reason ``offline``.
    * No live ISR member and ``unclean`` (``unclean.leader.election.enable``):
      leader = the first live assigned replica, ISR = [leader] ("There's
      potential data loss"). Reason ``unclean``.
    * Otherwise (no live ISR member and unclean election disabled, or no
      live assigned replica at all): ``NoReplicaOnlineException``: ``None``,
      reason ``no_replica_online``; the partition stays offline.

    The new leader epoch is ``current.leader_epoch + 1``.
    """
    live_set = set(live)
    live_assigned = [r for r in assigned if r in live_set]
    live_isr = tuple(r for r in current.isr if r in live_set)
    epoch = current.leader_epoch + 1
    if live_isr:
        in_isr = [r for r in live_assigned if r in live_isr]
        if not in_isr:  # ISR members outside the assignment: Kafka's `head` of an empty list
            return None, "no_replica_online"
        return LeaderIsr(in_isr[0], epoch, live_isr, controller_epoch), "offline"
    if not unclean or not live_assigned:
        return None, "no_replica_online"
    leader = live_assigned[0]
    return LeaderIsr(leader, epoch, (leader,), controller_epoch), "unclean"


def preferred_leader(
    assigned: Sequence[int], current: LeaderIsr, live: Collection[int], controller_epoch: int
) -> LeaderIsr | None:
    """``PreferredReplicaPartitionLeaderSelector.selectLeader``.

    The preferred replica is the head of the assignment. If it already leads
    (``LeaderElectionNotNeededException``) or is not both live and in the ISR
    (``StateChangeFailedException``), ``None``. Otherwise it becomes leader
    with the ISR unchanged and the leader epoch + 1.
    """
    if not assigned:
        return None
    preferred = assigned[0]
    if current.leader == preferred:
        return None
    if preferred not in set(live) or preferred not in current.isr:
        return None
    return LeaderIsr(preferred, current.leader_epoch + 1, current.isr, controller_epoch)


def remove_replica_from_isr(
    current: LeaderIsr,
    broker: int,
    controller_epoch: int,
    *,
    unclean_leader_election_enable: bool = True,
) -> LeaderIsr | None:
    """``KafkaController.removeReplicaFromIsr`` (K@0.8.2.2), for a dead replica.

    The OfflineReplica transition of ``ReplicaStateMachine`` calls it for every
    replica on a dead broker. If ``broker`` is in the ISR it is removed; if it
    was the leader, the leader becomes :data:`NO_LEADER` (-1); the leader epoch
    is incremented. One 0.8.2 rule (KAFKA-1028): when ``broker`` is the *last*
    ISR member and ``unclean.leader.election.enable`` is false for the topic,
    the ISR is kept as it is ("Retaining last ISR ... since unclean leader
    election is disabled") so that replica can lead again when it returns;
    the leader still becomes -1 and the epoch still grows.

    Returns:
        The new state, or ``None`` if ``broker`` is not in the ISR (Kafka
        writes nothing: "Cannot remove replica ... since it is not in the ISR").
    """
    if broker not in current.isr:
        return None
    leader = NO_LEADER if broker == current.leader else current.leader
    isr = tuple(b for b in current.isr if b != broker)
    if not isr and not unclean_leader_election_enable:
        isr = current.isr
    return LeaderIsr(leader, current.leader_epoch + 1, isr, controller_epoch)


def _by_preferred(
    assignments: Mapping[TopicPartition, Sequence[int]],
) -> dict[int, list[TopicPartition]]:
    groups: dict[int, list[TopicPartition]] = {}
    for tp in sorted(assignments):
        replicas = assignments[tp]
        if replicas:
            groups.setdefault(replicas[0], []).append(tp)
    return groups


def _not_led(
    tps: Sequence[TopicPartition], leaders: Mapping[TopicPartition, int], broker: int
) -> list[TopicPartition]:
    # Only partitions with leadership info count (``partitionLeadershipInfo.contains``).
    return [tp for tp in tps if tp in leaders and leaders[tp] != broker]


def imbalance(
    assignments: Mapping[TopicPartition, Sequence[int]],
    leaders: Mapping[TopicPartition, int],
    live: Collection[int] | None = None,
) -> dict[int, float]:
    """The per-broker leader imbalance ratio of ``checkAndTriggerPartitionRebalance``.

    Partitions are grouped by preferred broker (the head of the assignment);
    for broker b the ratio is (#partitions preferring b that have a leader
    recorded and whose leader is not b) / (#partitions preferring b), as a
    double. Partitions absent from ``leaders`` (no state yet) count only in
    the denominator, as in Kafka.

    Args:
        assignments: partition -> assigned replicas.
        leaders: partition -> current leader (-1 for none).
        live: if given, only these preferred brokers are reported (the
            rebalance skips dead ones); ``None`` reports every preferred broker.

    Returns:
        Preferred broker -> ratio in [0, 1].
    """
    live_set = None if live is None else set(live)
    out: dict[int, float] = {}
    for broker, tps in sorted(_by_preferred(assignments).items()):
        if live_set is not None and broker not in live_set:
            continue
        out[broker] = len(_not_led(tps, leaders, broker)) / len(tps)
    return out


def partitions_to_rebalance(
    assignments: Mapping[TopicPartition, Sequence[int]],
    leaders: Mapping[TopicPartition, int],
    live: Collection[int],
    percentage: int,
) -> list[TopicPartition]:
    """The partitions ``checkAndTriggerPartitionRebalance`` runs a preferred election for.

    For each preferred broker b whose ratio (:func:`imbalance`) is strictly
    greater than ``leader.imbalance.per.broker.percentage`` / 100 (compared as
    doubles, as Kafka does) and that is live: every partition preferring b
    whose recorded leader is not b. Kafka then runs one preferred election per
    partition, which may still fail (preferred replica not in the ISR).

    Returns:
        The partitions, sorted.
    """
    threshold = percentage / 100
    live_set = set(live)
    out: list[TopicPartition] = []
    for broker, tps in _by_preferred(assignments).items():
        not_led = _not_led(tps, leaders, broker)
        if broker in live_set and len(not_led) / len(tps) > threshold:
            out.extend(not_led)
    return sorted(out)


def out_of_sync_replicas(
    leader: int,
    isr: Collection[int],
    last_caught_up_ms: Mapping[int, float],
    leo: Mapping[int, int],
    leader_leo: int,
    now_ms: float,
    lag_time_max_ms: float = DEFAULT_REPLICA_LAG_TIME_MAX_MS,
    lag_max_messages: int = DEFAULT_REPLICA_LAG_MAX_MESSAGES,
) -> set[int]:
    """``Partition.getOutOfSyncReplicas`` (K@0.8.2.2), run by the leader's ``maybeShrinkIsr``.

    Candidates are the ISR members other than the leader. A candidate is

    * *stuck* if ``now_ms - last_caught_up_ms[r] > lag_time_max_ms``
      (``logEndOffsetUpdateTimeMs``: the time of its last fetch that set its
      LEO; ``replica.lag.time.max.ms``, default 10000), or
    * *slow* if its LEO is known (>= 0) and ``leader_leo - leo[r] >
      lag_max_messages`` (``replica.lag.max.messages``, default 4000).

    A replica missing from ``last_caught_up_ms`` counts as updated now (Kafka
    stamps a new ``Replica`` with the creation time); one missing from ``leo``
    has an unknown LEO (-1) and is never slow.

    Returns:
        The out-of-sync replica ids (the leader shrinks the ISR by them).
    """
    out: set[int] = set()
    for r in isr:
        if r == leader:
            continue
        stuck = now_ms - last_caught_up_ms.get(r, now_ms) > lag_time_max_ms
        r_leo = leo.get(r, -1)
        slow = r_leo >= 0 and leader_leo - r_leo > lag_max_messages
        if stuck or slow:
            out.add(r)
    return out


def caught_up_for_expand(
    replica: int,
    replica_leo: int,
    leader_hw: int,
    assigned: Collection[int],
    isr: Collection[int],
) -> bool:
    """``Partition.maybeExpandIsr``'s condition (K@0.8.2.2), checked on each follower fetch.

    The follower joins the ISR when it is not in it, it is an assigned replica
    (KAFKA-1097) and its LEO has reached the leader's high watermark
    (``logEndOffset.offsetDiff(leaderHW) >= 0``).
    """
    return replica not in isr and replica in assigned and replica_leo >= leader_hw
