"""The Kafka 0.8.2 high-level consumer's partition assignors, range and roundrobin.

Every member of a legacy group runs the same deterministic function on its own
view of ZooKeeper and claims only its own share (kafka-protocols.md A5, A6).
This module is that function, pure: no I/O, no clock, and the output depends
only on the *content* of the inputs, never on their iteration order.

Source: K@0.8.2.2 ``core/src/main/scala/kafka/consumer/PartitionAssignor.scala``
(``RangeAssignor``, ``RoundRobinAssignor``, ``PartitionAssignor.createInstance``,
``AssignmentContext``), ``TopicCount.scala`` (``ConsumerThreadId``) and
``utils/ZkUtils.scala`` (``getConsumersPerTopic``, ``getPartitionsForTopics``).

The inputs mirror ``AssignmentContext``:

* ``consumers`` is what the member read from ``/consumers/<g>/ids/*``:
  consumer id -> ``{topic: numStreams}``. ``ZkUtils.getConsumersPerTopic``
  expands it into ``consumersForTopic``: for each topic, the thread ids
  ``<consumerId>-<i>`` (``i`` in ``0 until numStreams``) of every subscriber,
  sorted with ``ConsumerThreadId.compare`` = string comparison of ``toString``,
  so ``c-10`` sorts before ``c-2``.
* ``partitions_per_topic`` is what it read from ``/brokers/topics/<t>``; the
  partition ids are sorted numerically (``getPartitionsForTopics``). A topic
  missing from it has no partitions, as when the znode is absent
  (``getPartitionAssignmentForTopics`` yields an empty map).

Like Kafka's 0.8.2 ``PartitionAssignor.assign``, :func:`range_assign` and
:func:`roundrobin_assign` return only the partitions owned by the calling
consumer's threads. :func:`assign_all` gives the whole group's map, which is
the union over members when all of them share one view.

Where the emulation has to choose (Kafka leaves it unspecified or fails with a
JVM exception), the choice is documented on the function concerned.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import total_ordering

from emulator.javahash import java_string_hashcode, java_string_sort_key

__all__ = [
    "AssignmentStrategy",
    "ThreadId",
    "TopicPartition",
    "assign",
    "assign_all",
    "consumers_for_topic",
    "range_assign",
    "roundrobin_assign",
    "strategy_from_config",
    "topic_partition_hashcode",
]

TopicPartition = tuple[str, int]
"""``(topic, partition)``, Kafka's ``TopicAndPartition``."""

Subscriptions = Mapping[str, Mapping[str, int]]
"""Consumer id -> ``{topic: numStreams}``, the ``subscription`` of each ids znode."""

PartitionsPerTopic = Mapping[str, Sequence[int]]
"""Topic -> its partition ids, in any order."""


class AssignmentStrategy(StrEnum):
    """Values of the legacy ``partition.assignment.strategy`` config."""

    RANGE = "range"
    ROUNDROBIN = "roundrobin"


def strategy_from_config(value: str) -> AssignmentStrategy:
    """Map a ``partition.assignment.strategy`` value to an assignor.

    Mirrors ``PartitionAssignor.createInstance`` (K@0.8.2.2): exactly
    ``"roundrobin"`` (case-sensitive) selects round-robin and *any* other value,
    including typos and ``""``, silently selects range.

    Args:
        value: the configured string.

    Returns:
        The strategy Kafka 0.8.2.2 would run.
    """
    if value == "roundrobin":
        return AssignmentStrategy.ROUNDROBIN
    return AssignmentStrategy.RANGE


@total_ordering
@dataclass(frozen=True)
class ThreadId:
    """Kafka's ``ConsumerThreadId(consumer, threadId)`` (K@0.8.2.2 ``TopicCount.scala``).

    ``str()`` is ``"<consumer_id>-<index>"``, the string stored in
    ``/consumers/<g>/owners/<t>/<p>`` (kafka-protocols.md A1). Ordering is
    ``ConsumerThreadId.compare``: Java string comparison of that string, so
    ``ThreadId("c", 10) < ThreadId("c", 2)``. Equality is field equality, as
    for the Scala case class; distinct ids never share a string because the
    index is the text after the last ``-``.
    """

    consumer_id: str
    index: int

    def __str__(self) -> str:
        return f"{self.consumer_id}-{self.index}"

    def sort_key(self) -> bytes:
        """The key that sorts thread ids as Kafka does (Java ``String.compareTo``)."""
        return java_string_sort_key(str(self))

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, ThreadId):
            return NotImplemented
        return self.sort_key() < other.sort_key()


def topic_partition_hashcode(topic: str, partition: int) -> int:
    """``TopicAndPartition(topic, partition).toString.hashCode``.

    ``toString`` is ``"[%s,%d]".format(topic, partition)`` (K@0.8.2.2
    ``common/TopicAndPartition.scala``); the hash is Java's ``String.hashCode``.

    Args:
        topic: the topic name.
        partition: the partition id.

    Returns:
        The signed 32-bit hash that round-robin sorts on.
    """
    return java_string_hashcode(f"[{topic},{partition}]")


def _validate(consumers: Subscriptions) -> None:
    for consumer_id, subscription in consumers.items():
        for topic, streams in subscription.items():
            if isinstance(streams, bool) or not isinstance(streams, int) or streams < 1:
                raise ValueError(
                    f"consumer {consumer_id!r} subscribes to topic {topic!r} with "
                    f"{streams!r} streams; numStreams must be an integer >= 1"
                )


def consumers_for_topic(consumers: Subscriptions) -> dict[str, list[ThreadId]]:
    """``ZkUtils.getConsumersPerTopic``: topic -> every subscriber's threads, sorted.

    Args:
        consumers: consumer id -> ``{topic: numStreams}``.

    Returns:
        For every topic with at least one subscriber, its thread ids sorted by
        string (``ConsumerThreadId.compare``); topics in sorted order.

    Raises:
        ValueError: a stream count is not an integer >= 1.
    """
    _validate(consumers)
    per_topic: dict[str, list[ThreadId]] = {}
    for consumer_id, subscription in consumers.items():
        for topic, streams in subscription.items():
            per_topic.setdefault(topic, []).extend(ThreadId(consumer_id, i) for i in range(streams))
    return {
        topic: sorted(per_topic[topic], key=ThreadId.sort_key)
        for topic in sorted(per_topic, key=java_string_sort_key)
    }


def _sorted_partitions(partitions_per_topic: PartitionsPerTopic, topic: str) -> list[int]:
    return sorted(set(partitions_per_topic.get(topic, ())))


def _range_for_topic(n_threads: int, partitions: Sequence[int], position: int) -> list[int]:
    """The partitions of one topic that ``RangeAssignor`` gives the thread at ``position``."""
    per_thread, with_extra = divmod(len(partitions), n_threads)
    start = per_thread * position + min(position, with_extra)
    count = per_thread + (1 if position < with_extra else 0)
    # count <= 0: Kafka warns "No broker partitions consumed by consumer thread".
    return list(partitions[start : start + count])


def _require_known(my_consumer_id: str, consumers: Subscriptions) -> None:
    if my_consumer_id not in consumers:
        # Kafka: TopicCount.constructTopicCount reads the member's own ids znode
        # and fails with ZkNoNodeException when it is absent.
        raise ValueError(f"consumer {my_consumer_id!r} is not among the group's consumers")


def range_assign(
    my_consumer_id: str,
    consumers: Subscriptions,
    partitions_per_topic: PartitionsPerTopic,
) -> dict[TopicPartition, ThreadId]:
    """``RangeAssignor.assign`` for one consumer (K@0.8.2.2 ``PartitionAssignor.scala``).

    Topics are independent. For each topic ``t`` the consumer subscribes to,
    with ``T`` sorted threads of all subscribers and ``P`` numerically sorted
    partitions, the thread at position ``k`` gets ``n + (1 if k < r else 0)``
    partitions starting at ``n*k + min(k, r)``, where ``n, r = divmod(P, T)``.
    So the first ``r`` threads of *every* topic get one extra partition.

    Args:
        my_consumer_id: the consumer running the assignment.
        consumers: consumer id -> ``{topic: numStreams}`` for the whole group.
        partitions_per_topic: topic -> partition ids.

    Returns:
        ``(topic, partition) -> thread`` for this consumer's threads only,
        in ``(topic, partition)`` order.

    Raises:
        ValueError: ``my_consumer_id`` is not in ``consumers``, or a stream
            count is not an integer >= 1.
    """
    _require_known(my_consumer_id, consumers)
    per_topic = consumers_for_topic(consumers)
    result: dict[TopicPartition, ThreadId] = {}
    for topic in sorted(consumers[my_consumer_id], key=java_string_sort_key):
        threads = per_topic[topic]
        partitions = _sorted_partitions(partitions_per_topic, topic)
        for position, thread in enumerate(threads):
            if thread.consumer_id != my_consumer_id:
                continue
            for partition in _range_for_topic(len(threads), partitions, position):
                result[(topic, partition)] = thread
    return dict(sorted(result.items()))


def _require_identical_thread_sets(per_topic: Mapping[str, Sequence[ThreadId]]) -> None:
    """The ``require`` at the top of 0.8.2.2 ``RoundRobinAssignor.assign``.

    Kafka compares the *set of thread ids* of every topic with that of the
    first topic. That holds exactly when every consumer subscribes to the same
    topics with one stream count for all its topics; different consumers may
    use different stream counts, and a single-topic group always passes.
    """
    topics = list(per_topic)
    head_topic = topics[0]
    head = set(per_topic[head_topic])
    for topic in topics[1:]:
        threads = set(per_topic[topic])
        if threads != head:
            raise ValueError(
                "requirement failed: Round-robin assignment is allowed only if all consumers "
                "in the group subscribe to the same topics, AND if the stream counts across "
                "topics are identical for a given consumer instance. Topic "
                f"{topic} has the following available consumer streams: "
                f"{sorted(map(str, threads))}; topic {head_topic} has: "
                f"{sorted(map(str, head))}"
            )


def _roundrobin_group(
    consumers: Subscriptions, partitions_per_topic: PartitionsPerTopic
) -> dict[TopicPartition, ThreadId]:
    per_topic = consumers_for_topic(consumers)
    if not per_topic:
        # Kafka calls consumersForTopic.head and dies with NoSuchElementException;
        # with nobody subscribed there is nothing to assign.
        return {}
    _require_identical_thread_sets(per_topic)
    threads = next(iter(per_topic.values()))  # already sorted; all topics share it
    # Pre-order: topics by name, then partitions numerically. Kafka's sortWith
    # is stable, so this only decides the order of hashCode ties *across*
    # topics, which Kafka leaves to scala.mutable.HashMap iteration order.
    topic_partitions = [
        (topic, partition)
        for topic in per_topic
        for partition in _sorted_partitions(partitions_per_topic, topic)
    ]
    topic_partitions.sort(key=lambda tp: topic_partition_hashcode(*tp))
    return dict(zip(topic_partitions, itertools.cycle(threads), strict=False))


def roundrobin_assign(
    my_consumer_id: str,
    consumers: Subscriptions,
    partitions_per_topic: PartitionsPerTopic,
) -> dict[TopicPartition, ThreadId]:
    """``RoundRobinAssignor.assign`` for one consumer (K@0.8.2.2 ``PartitionAssignor.scala``).

    First the ``require``: every topic must have the same set of thread ids,
    i.e. all consumers subscribe to the same topics and each consumer uses one
    stream count across its topics (the Scaladoc's conditions (a) and (b)).
    Then all topic-partitions are sorted by ``"[topic,partition]".hashCode``
    ascending, and the sorted thread ids are dealt to them circularly:
    partition ``j`` of that order goes to thread ``j mod T``.

    Tie order: Scala's ``sortWith`` is stable, so equal hashes keep the
    pre-sort order. Kafka builds that order from a ``HashMap`` of topics (each
    topic's partitions ascending); the emulator pre-sorts topics by name, which
    matches Kafka for ties within one topic and fixes a deterministic order for
    the (rare) ties across topics.

    Args:
        my_consumer_id: the consumer running the assignment.
        consumers: consumer id -> ``{topic: numStreams}`` for the whole group.
        partitions_per_topic: topic -> partition ids.

    Returns:
        ``(topic, partition) -> thread`` for this consumer's threads only,
        in ``(topic, partition)`` order. Empty if the consumer subscribes to
        nothing.

    Raises:
        ValueError: the ``require`` fails (Kafka: ``IllegalArgumentException``),
            ``my_consumer_id`` is not in ``consumers``, or a stream count is
            not an integer >= 1.
    """
    _require_known(my_consumer_id, consumers)
    group = _roundrobin_group(consumers, partitions_per_topic)
    return dict(sorted((tp, t) for tp, t in group.items() if t.consumer_id == my_consumer_id))


def assign(
    strategy: AssignmentStrategy,
    my_consumer_id: str,
    consumers: Subscriptions,
    partitions_per_topic: PartitionsPerTopic,
) -> dict[TopicPartition, ThreadId]:
    """Run the assignor ``strategy`` for one consumer.

    Args:
        strategy: from :func:`strategy_from_config`.
        my_consumer_id: the consumer running the assignment.
        consumers: consumer id -> ``{topic: numStreams}``.
        partitions_per_topic: topic -> partition ids.

    Returns:
        This consumer's share, as :func:`range_assign` or :func:`roundrobin_assign`.

    Raises:
        ValueError: as the chosen assignor.
    """
    if strategy == AssignmentStrategy.ROUNDROBIN:
        return roundrobin_assign(my_consumer_id, consumers, partitions_per_topic)
    return range_assign(my_consumer_id, consumers, partitions_per_topic)


def assign_all(
    strategy: AssignmentStrategy,
    consumers: Subscriptions,
    partitions_per_topic: PartitionsPerTopic,
) -> dict[TopicPartition, ThreadId]:
    """The whole group's assignment when every member shares one ZooKeeper view.

    Equal to the union of :func:`assign` over all consumers (tests check this);
    computed in one pass. For analysis and tests: real members only ever
    compute their own share, possibly from different views (kafka-protocols.md A7).

    Args:
        strategy: from :func:`strategy_from_config`.
        consumers: consumer id -> ``{topic: numStreams}``.
        partitions_per_topic: topic -> partition ids.

    Returns:
        ``(topic, partition) -> thread`` for every assigned partition, in
        ``(topic, partition)`` order.

    Raises:
        ValueError: as the chosen assignor.
    """
    if strategy == AssignmentStrategy.ROUNDROBIN:
        return dict(sorted(_roundrobin_group(consumers, partitions_per_topic).items()))
    result: dict[TopicPartition, ThreadId] = {}
    for topic, threads in consumers_for_topic(consumers).items():
        partitions = _sorted_partitions(partitions_per_topic, topic)
        for position, thread in enumerate(threads):
            for partition in _range_for_topic(len(threads), partitions, position):
                result[(topic, partition)] = thread
    return dict(sorted(result.items()))
