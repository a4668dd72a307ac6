"""The broker side of the ZooKeeper registry as Kafka 0.8.2.2 writes it (A1, A8).

What a legacy consumer reads about the cluster comes from here:

* :func:`register_broker`: ``/brokers/ids/<id>`` (ephemeral), through
  ``ZkUtils.registerBrokerInZk``: ``createEphemeralPathExpectConflictHandleZKBug``
  whose checker compares host and port (same endpoint: "I wrote it in an older
  session", back off ``zookeeper.session.timeout.ms`` and retry; other
  endpoint: "A broker is already registered on the path").
* :func:`create_topic`: ``AdminUtils.createTopic``: ``getSortedBrokerList``,
  :func:`emulator.placement.assign_replicas_to_brokers`, the
  ``/config/topics/<t>`` overrides, then ``/brokers/topics/<t>`` (persistent,
  created with parents).
* :func:`create_partition_states`: the controller's New -> Online transition
  (``PartitionStateMachine.initializeLeaderAndIsrForPartition``): leader = the
  first *live* replica in assignment order, ISR = the live assigned replicas,
  leader epoch 0, the given controller epoch; a partition with no live replica
  stays New (Kafka: ``StateChangeFailedException``).

All writes are idempotent in the way the emulator needs: several actors may
race to create the same topic or state znode; NodeExists means someone else did
it and the stored value is read back and returned.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence

from kazoo.exceptions import NodeExistsError, NoNodeError

from emulator.placement import assign_replicas_to_brokers
from zk_registry.client import EphemeralConflict, ZkClient, ZkOpCounter, ZkUtils
from zk_registry.layout import (
    BROKER_IDS_PATH,
    COMMON_PERSISTENT_PATHS,
    BrokerInfo,
    PartitionState,
    PayloadError,
    broker_path,
    decode_broker,
    decode_partition_state,
    decode_topic_assignment,
    encode_broker,
    encode_partition_state,
    encode_topic_assignment,
    encode_topic_config,
    partition_state_path,
    topic_config_path,
    topic_path,
)
from zk_registry.topics import note_creation

__all__ = [
    "BrokerAlreadyRegisteredError",
    "create_partition_states",
    "create_topic",
    "live_brokers",
    "read_broker",
    "read_partition_state",
    "read_topic_assignment",
    "register_broker",
    "setup_common_paths",
]

log = logging.getLogger(__name__)


class BrokerAlreadyRegisteredError(RuntimeError):
    """Kafka's "A broker is already registered on the path /brokers/ids/<id>"."""


async def setup_common_paths(client: ZkClient, tally: ZkOpCounter | None = None) -> None:
    """``ZkUtils.setupCommonPaths``: make sure the persistent top-level paths exist."""
    zk = ZkUtils(client)
    for path in COMMON_PERSISTENT_PATHS:
        await zk.make_sure_persistent_path_exists(path, tally)


async def register_broker(
    client: ZkClient,
    broker_id: int,
    host: str,
    port: int,
    *,
    timestamp_ms: int,
    session_timeout_s: float,
    jmx_port: int = -1,
    max_backoffs: int | None = 10,
    tally: ZkOpCounter | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    """``ZkUtils.registerBrokerInZk`` (K@0.8.2.2): the ephemeral ``/brokers/ids/<id>``.

    Args:
        client: the broker's own session (the node lives as long as it does).
        broker_id, host, port, jmx_port: the A1 payload fields.
        timestamp_ms: the registration time written in the payload.
        session_timeout_s: the scaled ``zookeeper.session.timeout.ms``: the
            ZOOKEEPER-1740 back-off.
        max_backoffs: bound on the back-offs (Kafka: none).
        tally: also count the operations here.
        sleep: the back-off sleep (injected for tests).

    Raises:
        BrokerAlreadyRegisteredError: another endpoint holds the id, or the
            back-offs ran out.
    """
    zk = ZkUtils(client, sleep=sleep)
    path = broker_path(broker_id)

    def same_endpoint(stored: bytes) -> bool:
        try:
            info = decode_broker(broker_id, stored)
        except PayloadError:
            return False
        return (info.host, info.port) == (host, int(port))

    try:
        await zk.create_ephemeral_path_expect_conflict_handle_zk_bug(
            path,
            encode_broker(host, port, jmx_port, timestamp_ms),
            checker=same_endpoint,
            backoff_s=session_timeout_s,
            max_backoffs=max_backoffs,
            tally=tally,
        )
    except EphemeralConflict as exc:
        raise BrokerAlreadyRegisteredError(
            f"A broker is already registered on the path {path}. This probably indicates that "
            "you either have configured a brokerid that is already in use, or else you have "
            "shutdown this broker and restarted it faster than the zookeeper timeout so it "
            "appears to be re-registering."
        ) from exc
    log.info("Registered broker %d at path %s with address %s:%d.", broker_id, path, host, port)


async def live_brokers(client: ZkClient, tally: ZkOpCounter | None = None) -> list[int]:
    """``ZkUtils.getSortedBrokerList`` (ascending ids); ``[]`` if ``/brokers/ids`` is missing."""
    names = await ZkUtils(client).children_maybe(BROKER_IDS_PATH, tally)
    return sorted(int(n) for n in names)


async def read_broker(
    client: ZkClient, broker_id: int, tally: ZkOpCounter | None = None
) -> BrokerInfo | None:
    """``ZkUtils.getBrokerInfo``: the registration, or ``None`` if the broker is not live."""
    data = await ZkUtils(client).read_maybe(broker_path(broker_id), tally)
    return None if data is None else decode_broker(broker_id, data)


async def read_topic_assignment(
    client: ZkClient, topic: str, tally: ZkOpCounter | None = None
) -> dict[int, list[int]] | None:
    """``/brokers/topics/<t>`` as partition -> replicas, or ``None`` if the topic does not exist."""
    data = await ZkUtils(client).read_maybe(topic_path(topic), tally)
    return None if data is None else decode_topic_assignment(data)


async def read_partition_state(
    client: ZkClient, topic: str, partition: int, tally: ZkOpCounter | None = None
) -> PartitionState | None:
    """``ReplicationUtils.getLeaderIsrAndEpochForPartition``, with the znode version.

    Returns:
        The state (``zk_version`` = the znode's data version, for conditional
        updates), or ``None`` if the partition has no state znode yet.
    """
    try:
        data, stat = await ZkUtils(client).read(partition_state_path(topic, partition), tally)
    except NoNodeError:
        return None
    return decode_partition_state(data, zk_version=stat.version)


async def create_topic(
    client: ZkClient,
    topic: str,
    n_partitions: int,
    replication_factor: int,
    rng: random.Random,
    *,
    config: Mapping[str, str] | None = None,
    broker_ids: Sequence[int] | None = None,
    tally: ZkOpCounter | None = None,
    reason: str | None = None,
) -> dict[int, list[int]]:
    """``AdminUtils.createTopic`` (K@0.8.2.2), idempotent.

    Steps: ``getSortedBrokerList`` (unless ``broker_ids`` is given), the
    replica assignment (``rng`` draws startIndex and nextReplicaShift), the
    ``exists`` check on ``/brokers/topics/<t>``, ``writeTopicConfig``
    (``updatePersistentPath /config/topics/<t>``), and ``createPersistentPath``
    of the assignment.

    Args:
        reason: why the topic is created (``timeline``, ``auto``), left for the
            controller's ``topic_created`` event once the topic is known not to
            exist (:func:`zk_registry.topics.note_creation`, the emulator's
            record); ``None`` for the run's own topics.

    Returns:
        The topic's assignment: the one written, or the one already stored if
        the topic existed (Kafka would throw TopicExistsException).

    Raises:
        emulator.placement.AdminOperationError: too few brokers and the like.
    """
    zk = ZkUtils(client)
    existing = await read_topic_assignment(client, topic, tally)
    if existing is not None:
        return existing
    brokers = list(broker_ids) if broker_ids is not None else await live_brokers(client, tally)
    assignment = assign_replicas_to_brokers(brokers, n_partitions, replication_factor, rng)
    if reason is not None:
        await note_creation(client, topic, reason, tally)
    await zk.update_persistent_path(topic_config_path(topic), encode_topic_config(config), tally)
    try:
        await zk.create_persistent_path(
            topic_path(topic), encode_topic_assignment(assignment), tally
        )
    except NodeExistsError:
        stored = await read_topic_assignment(client, topic, tally)
        if stored is not None:
            return stored
        raise
    log.info("Topic creation %s: %s", topic, assignment)
    return assignment


async def create_partition_states(
    client: ZkClient,
    topic: str,
    assignment: Mapping[int, Sequence[int]],
    live: Sequence[int],
    controller_epoch: int,
    tally: ZkOpCounter | None = None,
    concurrency: int = 1,
) -> dict[int, PartitionState]:
    """The controller's New -> Online for each partition: write ``.../partitions/<p>/state``.

    ``initializeLeaderAndIsrForPartition`` (K@0.8.2.2 ``PartitionStateMachine.scala``):
    leader = the first live replica in assignment order, ISR = all live
    assigned replicas (in assignment order), leader_epoch 0, zkVersion 0;
    ``createPersistentPath`` (parents included). NodeExists means another
    controller did it: the stored state is read and returned instead.

    Args:
        assignment: partition -> replicas (head = preferred).
        live: the live broker ids.
        controller_epoch: the writing controller's epoch.

        concurrency: partitions written at once. The controller writes them
            one after the other (1, the default); the emulator's own set-up of
            a run's topics passes more, which changes nothing but the time a
            topic of 10,000s of partitions takes to create.

    Returns:
        Partition -> its state, for every partition that has a live replica
        (the others stay New and are left out).
    """
    live_set = set(live)
    states: dict[int, PartitionState] = {}
    order = sorted(assignment)
    step = max(1, concurrency)
    for i in range(0, len(order), step):
        chunk = order[i : i + step]
        await asyncio.gather(
            *(
                _init_partition(
                    client, topic, p, assignment[p], live_set, controller_epoch, tally, states
                )
                for p in chunk
            )
        )
    return {p: states[p] for p in order if p in states}


async def _init_partition(
    client: ZkClient,
    topic: str,
    partition: int,
    assigned: Sequence[int],
    live_set: set[int],
    controller_epoch: int,
    tally: ZkOpCounter | None,
    states: dict[int, PartitionState],
) -> None:
    """One partition of :func:`create_partition_states` (writes ``states[partition]``)."""
    zk = ZkUtils(client)
    replicas = [int(r) for r in assigned]
    isr = [r for r in replicas if r in live_set]
    if not isr:
        log.error(
            "encountered error during state change of partition [%s,%d] from New to Online:"
            " no assigned replica is alive; assigned replicas are [%s]",
            topic,
            partition,
            ",".join(map(str, replicas)),
        )
        return
    data = encode_partition_state(isr[0], 0, isr, controller_epoch)
    try:
        await zk.create_persistent_path(partition_state_path(topic, partition), data, tally)
    except NodeExistsError:
        stored = await read_partition_state(client, topic, partition, tally)
        if stored is None:
            raise
        states[partition] = stored
        return
    states[partition] = PartitionState(
        leader=isr[0],
        leader_epoch=0,
        isr=tuple(isr),
        controller_epoch=controller_epoch,
        zk_version=0,
    )
