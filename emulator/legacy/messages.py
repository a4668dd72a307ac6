"""Requests, effects and results exchanged by the legacy consumer and its driver.

The legacy consumer (:mod:`emulator.legacy.consumer`) is sans-I/O: it returns
*requests* that the driver must perform against ZooKeeper and answer with an
:class:`IoResult`, and *effects* that the driver applies locally and does not
answer. Every request names the ZooKeeper work that Kafka 0.8.2.2's
``ZookeeperConsumerConnector`` does at that step, so a driver can reproduce the
exact znode operations (kafka-protocols.md A1, A5 and the per-attempt
operation count of A7).

Topic-partitions are ``(topic, partition)`` tuples throughout.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from emulator.events import EventKind
from emulator.legacy.wildcard import STATIC_PATTERN, WildcardSubscription

TopicPartition = tuple[str, int]


# --------------------------------------------------------------------------- requests


@dataclass(frozen=True)
class Request:
    """Base of every request; ``rid`` pairs it with its result."""

    rid: int


@dataclass(frozen=True)
class RegisterConsumer(Request):
    """Create ``/consumers/<g>/ids/<consumerId>`` (ephemeral) with the A1 payload.

    Kafka: ``registerConsumerInZK`` through ``createEphemeralPathExpectConflictHandleZKBug``
    with a back-off of ``zookeeper.session.timeout.ms`` while a node of an older
    session is still there. The payload's ``timestamp`` is the wall clock
    (``SystemTime.milliseconds``) when the driver writes it, which the
    machine does not know. Result value: ``None``.

    A wildcard consumer registers its ``WildcardTopicCount``
    (K@0.8.2.2 ``consumer/TopicCount.scala`` 139-146): ``subscription`` is
    ``{regex: numStreams}`` with the regex as is (the driver JSON-escapes it,
    ``Utils.JSONEscapeString``) and ``pattern`` is ``white_list`` or
    ``black_list``; a static one ``{topic: numStreams}`` with ``static``.
    """

    subscription: Mapping[str, int]
    pattern: str = STATIC_PATTERN


@dataclass(frozen=True)
class ReadCluster(Request):
    """``getCluster``: getChildren ``/brokers/ids`` and read each broker.

    Result value: ``list[int]`` of live broker ids.
    """


@dataclass(frozen=True)
class ReadRebalanceContext(Request):
    """Read my own ``/ids`` node (my topic count) and ``getAllBrokersInCluster``.

    Result value: :class:`RebalanceContext`. A missing own node is an error result.
    """


@dataclass(frozen=True)
class CommitOffsets(Request):
    """``commitOffsets``: write ``/consumers/<g>/offsets/<t>/<p>`` for each entry.

    Kafka writes only offsets that changed since the last checkpoint; the
    consumer has already filtered them. Failures are logged, not raised.
    Result value: ``list[TopicPartition]`` of offsets written.
    """

    offsets: Mapping[TopicPartition, int]


@dataclass(frozen=True)
class ReleaseOwnership(Request):
    """Delete ``/consumers/<g>/owners/<t>/<p>`` for each partition.

    Used by ``releasePartitionOwnership`` (step 2c) and by the roll-back of a
    failed claim (step 2f). Result value: ``None``.
    """

    partitions: tuple[TopicPartition, ...]
    rollback: bool = False


@dataclass(frozen=True)
class ReadAssignmentContext(Request):
    """``AssignmentContext``: the group's members and the subscribed topics' partitions.

    Reads ``/brokers/topics/<t>`` for each of ``topics`` and every
    ``/consumers/<g>/ids`` child with its data. Result value: :class:`GroupView`.
    """

    topics: tuple[str, ...]


@dataclass(frozen=True)
class FetchOffsets(Request):
    """Read ``/consumers/<g>/offsets/<t>/<p>`` for each partition.

    Result value: ``dict[TopicPartition, int | None]`` (``None``: no committed offset).
    """

    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class ClaimOwnership(Request):
    """``reflectPartitionOwnershipDecision``: create every owner node (ephemeral).

    Every create is tried, even after a NodeExists. Result value: :class:`ClaimResult`.
    """

    decision: Mapping[TopicPartition, str]  # partition -> thread id string


@dataclass(frozen=True)
class WatchBrokers(Request):
    """Subscribe to child changes of ``/brokers/ids`` (only when a rebalance saw no broker)."""


@dataclass(frozen=True)
class ReadTopics(Request):
    """``getChildren(/brokers/topics)``: the topics a wildcard consumer matches against.

    Two places in K@0.8.2.2 read it so: ``WildcardStreamsHandler``'s bootstrap
    of ``wildcardTopics`` (``ZookeeperConsumerConnector.scala`` 930-932, with
    ``getChildrenParentMayNotExist``: a missing path is no topics,
    ``utils/ZkUtils.scala`` 465-474; ``parent_may_not_exist``) and
    ``ZkTopicEventListener.handleChildChange``, which ignores the children
    zkclient hands it and reads them again (``ZookeeperTopicEventWatcher.scala``
    67). Result value: ``tuple[str, ...]`` in the server's order.
    """

    parent_may_not_exist: bool = False


@dataclass(frozen=True)
class ReinitializeWildcard(Request):
    """``reinitializeConsumer``'s ZooKeeper work for a ``WildcardTopicCount``.

    K@0.8.2.2 ``ZookeeperConsumerConnector.scala`` 820-902, in order:
    ``topicCount.getConsumerThreadIdsPerTopic`` reads ``/brokers/topics`` again
    and filters it (``TopicCount.scala`` 133-137); every topic it gives gets
    streams in ``topicStreamsMap``, which only grows (``+=``, 889); then
    ``subscribeChildChanges(/consumers/<g>/ids)`` (896) and
    ``subscribeDataChanges(/brokers/topics/<t>)`` for every topic of
    ``topicStreamsMap`` (898-902), a deleted topic's too. zkclient keeps one
    listener per path in a set (``ZkClient.java`` 105-138 at zkclient 0.3),
    so subscribing again only re-reads: ``exists`` + ``getChildren`` for the
    child watch, ``exists`` per data watch. Result value: ``tuple[str, ...]``,
    the topics matched now.
    """

    subscription: WildcardSubscription
    exclude_internal: bool = True


@dataclass(frozen=True)
class WatchTopics(Request):
    """The ``ZookeeperTopicEventWatcher``'s subscription to ``/brokers/topics`` children.

    At creation (``ZookeeperTopicEventWatcher.scala`` 32-44):
    ``makeSurePersistentPathExists(/brokers/topics)`` (``exists``, a create if
    missing) then ``subscribeChildChanges`` (``exists`` + ``getChildren``,
    ``ZkClient.watchForChilds``). On a new session (``resubscribe``, its
    ``ZkSessionExpireListener.handleNewSession``, 88-95) only the
    ``subscribeChildChanges`` again. Each later change of the children reaches
    the consumer as a watch with source ``topics``. Result value: ``None``.
    """

    resubscribe: bool = False


@dataclass(frozen=True)
class CloseSession(Request):
    """Close the ZooKeeper session (graceful shutdown); the server deletes the ephemerals."""


@dataclass(frozen=True)
class Sleep(Request):
    """A timer: answer it (with value ``None``) once emulated time reaches ``until_ms``.

    The driver need not answer it: :meth:`LegacyConsumer.poll` wakes the
    consumer when ``next_deadline()`` passes.
    """

    until_ms: float


# --------------------------------------------------------------------------- effects


@dataclass(frozen=True)
class Effect:
    """Base of every effect; effects are applied locally and never answered."""


@dataclass(frozen=True)
class StopFetchers(Effect):
    """Stop fetching and drop queued, unprocessed batches (``closeFetchers``)."""


@dataclass(frozen=True)
class StartFetchers(Effect):
    """Fetch these partitions from these offsets (``updateFetcher``).

    ``positions`` maps a partition to ``(thread id, offset)``; offset ``None``
    means "no committed offset": the driver applies ``auto.offset.reset``.
    """

    positions: Mapping[TopicPartition, tuple[str, int | None]]


@dataclass(frozen=True)
class Emit(Effect):
    """Record an event (see :mod:`emulator.events`)."""

    kind: EventKind
    fields: Mapping[str, object] = field(default_factory=dict)


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class IoResult:
    """The driver's answer to a request.

    Attributes:
        value: the request's result value (see each request).
        error: the name of the exception the request raised (``NoNodeError``,
            ``ConnectionLoss`` ...), or ``None``.
        reads: ZooKeeper reads the request took (get, getChildren, exists).
        writes: ZooKeeper writes it took (create, set, delete).
    """

    value: object = None
    error: str | None = None
    reads: int = 0
    writes: int = 0


@dataclass(frozen=True)
class RebalanceContext:
    """What ``rebalance`` reads first: my threads per topic and the live brokers."""

    my_subscription: Mapping[str, int]
    brokers: tuple[int, ...]


@dataclass(frozen=True)
class GroupView:
    """A consumer's own view of its group, read fresh from ZooKeeper.

    Attributes:
        consumers: consumer id -> its subscription ``{topic: numStreams}``.
        partitions_per_topic: topic -> partition numbers (any order).
    """

    consumers: Mapping[str, Mapping[str, int]]
    partitions_per_topic: Mapping[str, tuple[int, ...]]


@dataclass(frozen=True)
class ClaimResult:
    """The outcome of a claim: what was created and where NodeExists was met.

    Attributes:
        created: partitions whose owner node this attempt created.
        conflicts: partitions that were already owned, mapped to the holder's
            thread id as read back (``None`` when it vanished before the read).
        zxids: the czxid of each created owner node (ZooKeeper's total order
            of the claims; for our own node met after a connection loss, the
            czxid read back). A driver that does not know it leaves it out.
    """

    created: tuple[TopicPartition, ...]
    conflicts: Mapping[TopicPartition, str | None]
    zxids: Mapping[TopicPartition, int] = field(default_factory=dict)


Output = Request | Effect
