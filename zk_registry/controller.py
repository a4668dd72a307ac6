"""The Kafka 0.8.2.2 controller on ZooKeeper: election, failover and the partition state machine.

kafka-protocols.md A1 and A8. The decisions (which replica leads, which ISR)
are the pure functions of :mod:`emulator.controller`; this module does what
``KafkaController``, ``ZookeeperLeaderElector``, ``PartitionStateMachine`` and
``ReplicaStateMachine`` do around them with ZooKeeper (K@0.8.2.2
``core/src/main/scala/kafka/controller/`` and ``server/ZookeeperLeaderElector.scala``):

* **Election** (:meth:`BrokerController.start`): subscribe to ``/controller``
  data and ``elect``: if ``/controller`` exists, remember its broker id;
  otherwise create it ephemeral (``createEphemeralPathExpectConflictHandleZKBug``
  with the checker "the stored broker id is mine", back-off
  ``zookeeper.session.timeout.ms``); NodeExists means someone else won.
  When ``/controller`` is deleted every broker elects again (the active one
  first resigns). A new ZooKeeper session (after an expiry) makes the broker
  resign and elect again (``SessionExpirationListener.handleNewSession``).
  If becoming controller fails, ``resign()`` deletes ``/controller``.
* **onControllerFailover**: ``/controller_epoch`` + 1 with a write
  conditional on its zkVersion (absent: create ``1``); a failed write is
  ``ControllerMovedException``: resign. Then the listeners
  (``/admin/preferred_replica_election`` data, ``/brokers/topics`` children,
  ``/brokers/ids`` children, ``/brokers/topics/<t>`` data per topic), the
  context (live brokers, assignments, partition states), the partition state
  machine's start (partitions whose leader is not live are Offline, those
  without a state znode New; both are brought Online), a pending preferred
  election, and the auto-rebalance task.
* **BrokerChangeListener**: new brokers first (``onBrokerStartup``: they get
  the states of the partitions they replicate, and Offline/New partitions are
  brought Online), then dead ones (``onBrokerFailure``: partitions led by a
  dead broker get an ``OfflinePartitionLeaderSelector`` election, then every
  replica on a dead broker goes through ``removeReplicaFromIsr``).
* **PreferredReplicaElectionListener**: a preferred election for each listed
  partition, then ``/admin/preferred_replica_election`` is deleted.
* **TopicChangeListener / AddPartitionsListener**: new topics and new
  partitions go New -> Online (their state znodes are created); a new topic
  gets its incarnation (:func:`zk_registry.topics.assign_incarnation`) and a
  ``topic_created`` event (K@0.8.2.2 ``PartitionStateMachine.scala`` 425-456,
  ``KafkaController.onNewTopicCreation`` 469-474).
* **Topic deletion** (``TopicDeletionManager``, K@0.8.2.2
  ``controller/TopicDeletionManager.scala``), only with ``delete.topic.enable``
  (:attr:`ControllerConfig.delete_topic_enable`; false in 0.8.2.2,
  ``server/KafkaConfig.scala`` 344). Disabled, nothing listens to
  ``/admin/delete_topics`` and markers just stay (``registerListeners``,
  ``PartitionStateMachine.scala`` 76-80; every deletion query of the manager
  answers "no", 120-210). Enabled:

  - ``DeleteTopicsListener`` (``PartitionStateMachine.scala`` 463-510): markers
    of topics that do not exist are deleted; the others are queued
    (``topic_deletion_requested`` state ``started``). At failover the markers
    present are queued too (``initializeTopicDeletion``,
    ``KafkaController.scala`` 763-775), the topics with a replica on a dead
    broker ineligible.
  - The ``delete-topics-thread`` pass (``DeleteTopicsThread.doWork`` 382-431),
    run as a controller queue item whenever something may let a deletion
    progress: a topic whose replicas are all deleted is completed; one with a
    replica deletion under way waits; one with a failed replica is reset for a
    retry; an eligible one starts (``onTopicDeletion`` 299-308): an
    ``UpdateMetadata`` with leader -2 (``LeaderDuringDelete``) for its
    partitions to every live broker (``on_topic_deletion``; each broker drops
    them from its metadata cache), then ``startReplicaDeletion`` (326-344):
    replicas on dead brokers fail at once and make the topic ineligible (the
    deletion stalls until such a broker starts again:
    ``onBrokerStartup`` -> ``resumeDeletionForTopics``, ``KafkaController.scala``
    414-419; a broker dying with a replica being deleted fails it too,
    ``onBrokerFailure`` 434-461); the live ones get ``StopReplica`` with
    delete=true (``stop_replicas``; the broker drops the replica and its log),
    whose answers come back as queue items (``deleteTopicStopReplicaCallback``).
  - ``completeDeleteTopic`` (273-290): the topic's data watch goes, then
    ``deleteRecursive`` of ``/brokers/topics/<t>`` and ``/config/topics/<t>``,
    ``delete`` of the marker, and the topic leaves the context
    (``topic_deleted``).

  While a topic is queued its partitions get no elections, no ISR removals,
  no preferred or auto-rebalance moves and are left out of every
  LeaderAndIsr/UpdateMetadata batch (``triggerOnlinePartitionStateChange``,
  ``onBrokerFailure``, ``ControllerBrokerRequestBatch.addUpdateMetadataRequestForBrokers``
  send them with leader -2 instead). Simplification: the ``OfflineReplica``
  step before ``ReplicaDeletionStarted`` (a ``StopReplica`` with delete=false
  and ``removeReplicaFromIsr`` writes on the state znodes, which go with the
  topic a moment later) is folded into the one ``StopReplica`` call.
* **checkAndTriggerPartitionRebalance**: every
  ``leader.imbalance.check.interval.seconds`` (first after 5 s), a preferred
  election for each partition of a live broker whose imbalance ratio is above
  ``leader.imbalance.per.broker.percentage``; the admin znode is not touched.

**Writes and fencing.** Every state change is a conditional write on the
state znode's version: read the znode, refuse if its ``controller_epoch`` is
newer than ours ("written by another controller ... Aborting state change"),
decide, ``setData(version)``; on a version conflict read again and retry
(bounded by :attr:`ControllerConfig.state_update_retries`; Kafka loops until
it succeeds). Every write carries this controller's epoch, and none is made
once the broker has resigned (every handler checks the controller
generation it was registered under).

**Threads.** Watch callbacks can arrive on any thread; each one only posts an
item to a queue that one asyncio task works through in order, as Kafka's
``controllerLock`` and ZkClient's single event thread serialize listeners.

After each batch of state changes, ``on_leader_and_isr(changes, reason)`` is
called (the broker actor then pushes LeaderAndIsr/UpdateMetadata, as
``ControllerBrokerRequestBatch.sendRequestsToBrokers`` would). Reasons:
``controller_failover`` (every known state, as the new controller sends them
to all live brokers), ``broker_startup``, ``broker_failure``, ``preferred``,
``auto_rebalance``, ``new_partition``. It is never called with an empty map.

Not modelled: partition reassignment, controlled shutdown, the
controller-to-broker channel (the callbacks stand for it).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
)

from emulator.controller import (
    DEFAULT_REPLICA_LAG_MAX_MESSAGES,
    DEFAULT_REPLICA_LAG_TIME_MAX_MS,
    LEADER_DURING_DELETE,
    LeaderIsr,
    TopicPartition,
    new_partition_leader,
    offline_leader,
    partitions_to_rebalance,
    preferred_leader,
    remove_replica_from_isr,
)
from emulator.events import EventKind
from emulator.placement import AdminOperationError, assign_replicas_to_brokers
from zk_registry.brokers import (
    live_brokers,
    read_partition_state,
    read_topic_assignment,
)
from zk_registry.client import WatchEvent, ZkClient, ZkUtils, ZkWatch
from zk_registry.layout import (
    BROKER_IDS_PATH,
    BROKER_TOPICS_PATH,
    CONTROLLER_EPOCH_PATH,
    CONTROLLER_PATH,
    DELETE_TOPICS_PATH,
    INITIAL_CONTROLLER_EPOCH,
    PREFERRED_REPLICA_ELECTION_PATH,
    PartitionState,
    PayloadError,
    decode_controller_epoch,
    decode_controller_id,
    decode_partition_state,
    decode_preferred_replica_election,
    decode_topic_assignment,
    decode_topic_config,
    delete_topic_path,
    encode_controller,
    encode_controller_epoch,
    encode_partition_state,
    encode_preferred_replica_election,
    encode_topic_assignment,
    partition_state_path,
    topic_config_path,
    topic_path,
)
from zk_registry.topics import TopicRecord, assign_incarnation, delete_recursive

__all__ = [
    "LEADER_DURING_DELETE",
    "BrokerController",
    "ControllerConfig",
    "ControllerMovedError",
    "PreferredReplicaElectionInProgressError",
    "add_partitions",
    "decode_leader_isr",
    "encode_leader_isr",
    "leader_isr_from_state",
    "read_leader_and_isr",
    "request_preferred_election",
    "update_leader_and_isr",
]

log = logging.getLogger(__name__)

#: The topic-level override of ``unclean.leader.election.enable`` (``LogConfig``).
UNCLEAN_LEADER_ELECTION_CONFIG: Final = "unclean.leader.election.enable"

OnLeaderAndIsr = Callable[[dict[TopicPartition, LeaderIsr], str], Awaitable[None] | None]
#: ``UpdateMetadata`` with leader -2 (``LeaderDuringDelete``) for these partitions,
#: to every live broker: ``on_topic_deletion(partitions)``.
OnTopicDeletion = Callable[[list[TopicPartition]], Awaitable[None] | None]
#: ``StopReplica`` (delete=true) of these partitions to one broker; ``True`` when it
#: answered without an error: ``stop_replicas(broker, partitions)``.
StopReplicas = Callable[[int, list[TopicPartition]], Awaitable[bool]]
Emit = Callable[..., None]

# Replica deletion states (``ReplicaStateMachine``'s, for replicas of topics being
# deleted); a replica with none is Online or Offline.
_STARTED: Final = "ReplicaDeletionStarted"
_SUCCESSFUL: Final = "ReplicaDeletionSuccessful"
_INELIGIBLE: Final = "ReplicaDeletionIneligible"


class ControllerMovedError(RuntimeError):
    """Kafka's ``ControllerMovedException``: another broker bumped ``/controller_epoch``."""


class PreferredReplicaElectionInProgressError(AdminOperationError):
    """``/admin/preferred_replica_election`` already exists (the admin tool refuses)."""


@dataclass(frozen=True)
class ControllerConfig:
    """The controller's settings (Kafka 0.8.2.2 ``KafkaConfig`` names and defaults).

    Attributes:
        auto_leader_rebalance_enable: ``auto.leader.rebalance.enable`` (true).
        leader_imbalance_per_broker_percentage:
            ``leader.imbalance.per.broker.percentage`` (10).
        leader_imbalance_check_interval_s: ``leader.imbalance.check.interval.seconds``
            (300) in **wall** seconds: the caller scales it by the run's time scale.
        first_check_delay_s: the delay of the first rebalance check, in wall
            seconds: Kafka's fixed 5 s (``autoRebalanceScheduler.schedule(...,
            5, ...)``), scaled by the caller.
        unclean_leader_election_enable: ``unclean.leader.election.enable``
            (true in 0.8.2; pass false for Kafka >= 0.11). A topic's
            ``/config/topics/<t>`` override wins, as in Kafka.
        zk_session_timeout_s: ``zookeeper.session.timeout.ms`` (6000) in wall
            seconds: the ZOOKEEPER-1740 back-off of the ``/controller`` create.
        replica_lag_time_max_ms: ``replica.lag.time.max.ms`` (10000), for the
            leader broker's ISR shrink (:func:`emulator.controller.out_of_sync_replicas`);
            the controller does not use it.
        replica_lag_max_messages: ``replica.lag.max.messages`` (4000), likewise.
        state_update_retries: not a Kafka setting: bound on the read-decide-write
            rounds of one state change after version conflicts (Kafka: unbounded).
        controller_create_max_backoffs: not a Kafka setting: bound on the
            ZOOKEEPER-1740 back-offs of the ``/controller`` create (Kafka: unbounded).
        delete_topic_enable: ``delete.topic.enable`` (false in 0.8.2.2, true
            from 1.0, KIP-162): whether deletion markers are acted on.
    """

    auto_leader_rebalance_enable: bool = True
    leader_imbalance_per_broker_percentage: int = 10
    leader_imbalance_check_interval_s: float = 300.0
    first_check_delay_s: float = 5.0
    unclean_leader_election_enable: bool = True
    zk_session_timeout_s: float = 6.0
    replica_lag_time_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS
    replica_lag_max_messages: int = DEFAULT_REPLICA_LAG_MAX_MESSAGES
    state_update_retries: int = 10
    controller_create_max_backoffs: int = 10
    delete_topic_enable: bool = False


# --------------------------------------------------------------------------- payload helpers


def leader_isr_from_state(state: PartitionState) -> LeaderIsr:
    """A :class:`~zk_registry.layout.PartitionState` as the core's :class:`LeaderIsr`."""
    return LeaderIsr(state.leader, state.leader_epoch, tuple(state.isr), state.controller_epoch)


def encode_leader_isr(state: LeaderIsr) -> bytes:
    """``ZkUtils.leaderAndIsrZkData``: :func:`zk_registry.layout.encode_partition_state`.

    Example: ``{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}``.
    """
    return encode_partition_state(
        state.leader, state.leader_epoch, state.isr, state.controller_epoch
    )


def decode_leader_isr(data: bytes | str | None) -> LeaderIsr:
    """``ReplicationUtils.parseLeaderAndIsr`` (raises ``PayloadError``)."""
    return leader_isr_from_state(decode_partition_state(data))


def _isr_json(isr: Iterable[int]) -> str:
    return json.dumps([int(b) for b in isr], separators=(",", ":"))


def _parse_controller_id(data: bytes | None) -> int:
    if data is None:
        return -1
    try:
        return decode_controller_id(data)
    except PayloadError:
        return -1


# --------------------------------------------------------------------------- leader / admin helpers


async def read_leader_and_isr(
    zk: ZkClient, topic: str, partition: int
) -> tuple[LeaderIsr, int] | None:
    """``ReplicationUtils.getLeaderIsrAndEpochForPartition``: the state and its zkVersion.

    Returns:
        ``(state, zk_version)``, or ``None`` if the partition has no state znode.
    """
    st = await read_partition_state(zk, topic, partition)
    if st is None:
        return None
    return leader_isr_from_state(st), int(st.zk_version or 0)


async def update_leader_and_isr(
    zk: ZkClient, topic: str, partition: int, new: LeaderIsr, expected_version: int
) -> int | None:
    """``ReplicationUtils.updateLeaderAndIsr``: a write conditional on the znode version.

    ``conditionalUpdatePersistentPath`` with the ``checkLeaderAndIsrZkData``
    checker: on BadVersion the znode is read back, and if it already holds
    exactly ``new`` (our own write landed before a connection loss) the
    update counts as done.

    Returns:
        The new zkVersion, or ``None`` on a version conflict (or a missing znode).
    """
    path = partition_state_path(topic, partition)
    data = encode_leader_isr(new)
    try:
        stat = await zk.retry_until_connected(
            lambda: zk.set_async(path, data, version=expected_version)
        )
    except BadVersionError:
        got = await read_leader_and_isr(zk, topic, partition)
        if got is not None and got[0] == new:
            return got[1]
        return None
    except NoNodeError:
        return None
    return int(stat.version)


async def request_preferred_election(zk: ZkClient, partitions: Sequence[TopicPartition]) -> None:
    """``PreferredReplicaLeaderElectionCommand.writePreferredReplicaElectionData``.

    Creates ``/admin/preferred_replica_election`` (parents included) listing
    ``partitions``; the controller runs the elections and deletes it.

    Raises:
        PreferredReplicaElectionInProgressError: the znode already exists
            ("Preferred replica leader election currently in progress").
    """
    data = encode_preferred_replica_election([(t, int(p)) for t, p in partitions])
    try:
        await ZkUtils(zk).create_persistent_path(PREFERRED_REPLICA_ELECTION_PATH, data)
    except NodeExistsError as exc:
        listed = ",".join(f"[{t},{p}]" for t, p in partitions)
        raise PreferredReplicaElectionInProgressError(
            f"Preferred replica leader election currently in progress for {listed}. "
            "Aborting operation"
        ) from exc


async def add_partitions(
    zk: ZkClient,
    topic: str,
    new_total: int,
    broker_ids: Sequence[int] | None = None,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """``AdminUtils.addPartitions`` (K@0.8.2.2) without a manual assignment.

    Reads the topic's assignment; the replication factor is that of the
    existing partitions; the new partitions are placed by
    ``assignReplicasToBrokers(brokerList, partitionsToAdd, replicationFactor,
    existingReplicaList.head, existingPartitionCount)``, i.e. with startIndex
    and nextReplicaShift both fixed to the *broker id* at the head of the
    existing replica list (Kafka's ``existingPartitionsReplicaList.head``, a
    hash-ordered map's head; partition 0's list here), and partition ids
    from the current count. The whole assignment is written back with
    ``updatePersistentPath``; the controller's AddPartitionsListener then
    creates the new partitions' states. The topic config is left as it is.

    Args:
        broker_ids: the broker list; default ``getSortedBrokerList`` (live, ascending).
        rng: passed to the placement (not drawn from with a fixed start index).

    Returns:
        The new partitions' assignment (partition -> replicas).

    Raises:
        AdminOperationError: "The topic <t> does not exist", "The number of
            partitions for a topic can only be increased", or a placement error.
    """
    existing = await read_topic_assignment(zk, topic)
    if not existing:
        raise AdminOperationError(f"The topic {topic} does not exist")
    to_add = int(new_total) - len(existing)
    if to_add <= 0:
        raise AdminOperationError("The number of partitions for a topic can only be increased")
    head = existing[min(existing)]
    brokers = list(broker_ids) if broker_ids is not None else await live_brokers(zk)
    added = assign_replicas_to_brokers(
        brokers,
        to_add,
        len(head),
        rng if rng is not None else random.Random(0),
        fixed_start_index=head[0],
        start_partition_id=len(existing),
    )
    full = {**existing, **added}
    await ZkUtils(zk).update_persistent_path(topic_path(topic), encode_topic_assignment(full))
    log.info("Add partition list for %s is %s", topic, added)
    return added


# --------------------------------------------------------------------------- the controller


@dataclass(frozen=True)
class _Item:
    kind: str
    payload: Any = None
    generation: int | None = None  # controller listeners: dropped once resigned
    done: asyncio.Future[None] | None = None


class BrokerController:
    """One broker's controller module (``KafkaController`` + ``ZookeeperLeaderElector``).

    Args:
        zk: the broker's own session (``/controller`` lives as long as it does).
        broker_id: ``broker.id``.
        config: the settings.
        on_leader_and_isr: called as ``on_leader_and_isr(changes, reason)`` after
            each batch of state changes (see the module docstring); may be a
            coroutine function. Its errors are logged, not raised.
        emit: ``emit(kind, **fields)`` for ``CONTROLLER_ELECTED`` (broker,
            generation = controller epoch), ``CONTROLLER_RESIGNED`` (broker,
            reason), ``LEADER_CHANGED`` (topic, partition, broker = new leader or
            -1, generation = leader epoch, reason = new | offline | unclean |
            preferred | auto_rebalance, detail = the ISR as JSON),
            ``ISR_CHANGED`` (a dead follower removed: reason ``shrink``),
            ``TOPIC_CREATED`` (topic, count, replication_factor, incarnation,
            reason = timeline | auto, broker), ``TOPIC_DELETION_REQUESTED``
            (topic, state ``started``, reason = marker | failover, broker) and
            ``TOPIC_DELETED`` (topic, incarnation, count, broker).
        now_ms: the clock for the ``/controller`` payload's timestamp
            (default: wall milliseconds).
        on_topic_deletion: sends the ``UpdateMetadata`` with leader -2 of a
            topic being deleted to every live broker (may be a coroutine
            function; default: nobody to tell).
        stop_replicas: sends one broker ``StopReplica`` (delete=true) for
            some partitions and answers whether it succeeded (default: every
            replica counts as deleted at once).
    """

    def __init__(
        self,
        zk: ZkClient,
        broker_id: int,
        config: ControllerConfig,
        on_leader_and_isr: OnLeaderAndIsr,
        emit: Emit,
        *,
        now_ms: Callable[[], float] | None = None,
        on_topic_deletion: OnTopicDeletion | None = None,
        stop_replicas: StopReplicas | None = None,
    ) -> None:
        self.zk = zk
        self.broker_id = int(broker_id)
        self.config = config
        self._on_leader_and_isr = on_leader_and_isr
        self._deletion_metadata = on_topic_deletion
        self._stop_replicas = stop_replicas
        self._emit = emit
        self._now_ms = now_ms if now_ms is not None else _wall_ms
        self._utils = ZkUtils(zk)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[_Item] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._rebalance_task: asyncio.Task[None] | None = None
        self._controller_watch: ZkWatch | None = None
        self._watches: list[ZkWatch] = []
        self._topic_watches: dict[str, ZkWatch] = {}
        self._stopped = False
        self._active = False
        self._generation = 0
        self._epoch = 0
        self._epoch_zk_version = -1
        self._controller_id = -1
        self._session_seen: int | None = None
        self._controller_session: int | None = None  # the session we became controller in
        self._live: set[int] = set()
        self._assignments: dict[str, dict[int, list[int]]] = {}
        self._states: dict[TopicPartition, tuple[LeaderIsr, int]] = {}
        self._incarnations: dict[str, int] = {}  # topic -> its incarnation (emulator's)
        # TopicDeletionManager: topicsToBeDeleted, topicsIneligibleForDeletion,
        # and the replica deletion states ((topic, partition, broker) -> state).
        self._to_delete: set[str] = set()
        self._ineligible: set[str] = set()
        self._replica_deletion: dict[tuple[str, int, int], str] = {}
        self._deletion_posted = False  # deleteTopicStateChanged
        self._stop_tasks: set[asyncio.Task[None]] = set()
        self.failovers = 0  # times this broker became controller
        self.rebalance_checks = 0  # checkAndTriggerPartitionRebalance runs

    # -- public ---------------------------------------------------------------

    @property
    def is_controller(self) -> bool:
        """Whether this broker is the active controller now."""
        return self._active

    @property
    def epoch(self) -> int:
        """The controller epoch of this broker's latest controllership (0: never)."""
        return self._epoch

    @property
    def controller_id(self) -> int:
        """The controller's broker id as last seen in ``/controller`` (-1: none)."""
        return self._controller_id

    @property
    def live_brokers(self) -> frozenset[int]:
        """The live brokers as the active controller knows them (empty otherwise)."""
        return frozenset(self._live)

    @property
    def partition_states(self) -> dict[TopicPartition, LeaderIsr]:
        """The partition states as the active controller knows them (empty otherwise)."""
        return {tp: st for tp, (st, _) in self._states.items()}

    @property
    def topics_to_delete(self) -> frozenset[str]:
        """The topics queued for deletion (``topicsToBeDeleted``; empty when disabled)."""
        return frozenset(self._to_delete) if self.config.delete_topic_enable else frozenset()

    @property
    def topics_ineligible_for_deletion(self) -> frozenset[str]:
        """The queued topics whose deletion is halted (a replica's broker is down)."""
        return frozenset(self._ineligible & self._to_delete)

    @property
    def incarnations(self) -> dict[str, int]:
        """Each known topic's incarnation (the emulator's numbering)."""
        return dict(self._incarnations)

    @property
    def partition_versions(self) -> dict[TopicPartition, int]:
        """The state znodes' zkVersions as the active controller last read or wrote them."""
        return {tp: v for tp, (_, v) in self._states.items()}

    async def start(self) -> None:
        """``KafkaController.startup``: subscribe to ``/controller`` and elect once.

        Returns after the first election (and, if this broker won, its failover) ran.
        """
        self._loop = asyncio.get_running_loop()
        self._queue = asyncio.Queue()
        self._stopped = False
        self._session_seen = self.zk.session_id
        self._worker = asyncio.create_task(self._run(), name=f"controller-{self.broker_id}")
        self._controller_watch = await self.zk.watch_data(
            CONTROLLER_PATH, self._watch_callback("controller", None)
        )
        done: asyncio.Future[None] = self._loop.create_future()
        self._post("elect", done=done)
        await done

    async def stop(self) -> None:
        """``KafkaController.shutdown``: stop listeners and tasks (znodes are left alone).

        ``/controller`` goes away when the broker's session is closed.
        """
        self._stopped = True
        if self._active:
            self._resign_local("shutdown")
        if self._controller_watch is not None:
            self._controller_watch.stop()
            self._controller_watch = None
        for task in (self._rebalance_task, self._worker, *self._stop_tasks):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self._rebalance_task = None
        self._worker = None
        self._stop_tasks = set()

    def handle_new_session(self) -> None:
        """``SessionExpirationListener.handleNewSession``: resign and elect again.

        Wire it to the client's ``on_new_session`` if you like; the
        ``/controller`` watch also notices a new session on its own. Each
        session is handled once.
        """
        self._post("new_session", self.zk.session_id)

    # -- queue ----------------------------------------------------------------

    def _post(
        self,
        kind: str,
        payload: Any = None,
        generation: int | None = None,
        done: asyncio.Future[None] | None = None,
    ) -> None:
        loop, queue = self._loop, self._queue
        if loop is None or queue is None or self._stopped:
            return
        item = _Item(kind, payload, generation, done)
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            queue.put_nowait(item)
        else:
            with contextlib.suppress(RuntimeError):  # loop closed
                loop.call_soon_threadsafe(queue.put_nowait, item)

    def _watch_callback(
        self, kind: str, generation: int | None, topic: str | None = None
    ) -> Callable[[WatchEvent], None]:
        def callback(event: WatchEvent) -> None:
            if event.reason == "new_session":
                self._post("new_session", self.zk.session_id)
            self._post(kind, (topic, event), generation)

        return callback

    async def _run(self) -> None:
        assert self._queue is not None
        while True:
            item = await self._queue.get()
            try:
                if item.generation is None or self._current(item.generation):
                    await self._handle(item)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("controller %d: handling %s failed", self.broker_id, item.kind)
            finally:
                if item.done is not None and not item.done.done():
                    item.done.set_result(None)

    def _current(self, generation: int) -> bool:
        """Still the controller of ``generation``, in the session it was elected in."""
        return (
            self._active
            and not self._stopped
            and generation == self._generation
            and self.zk.session_id == self._controller_session
        )

    def _event(self, kind: EventKind, **fields: Any) -> None:
        try:
            self._emit(kind, **fields)
        except Exception:
            log.exception("controller %d: emitting %s failed", self.broker_id, kind)

    async def _handle(self, item: _Item) -> None:
        gen = item.generation if item.generation is not None else self._generation
        kind = item.kind
        if kind == "elect":
            await self._elect()
        elif kind == "controller":
            await self._on_controller_data(item.payload[1])
        elif kind == "new_session":
            await self._on_new_session(item.payload)
        elif kind == "brokers":
            await self._on_broker_change(item.payload[1].children, gen)
        elif kind == "preferred":
            await self._on_preferred_data(item.payload[1].data, gen)
        elif kind == "topics":
            await self._on_topic_change(item.payload[1].children, gen)
        elif kind == "topic":
            await self._on_topic_data(item.payload[0], item.payload[1].data, gen)
        elif kind == "rebalance":
            await self._check_and_trigger_partition_rebalance(gen)
        elif kind == "delete_topics":
            await self._on_delete_topics(item.payload[1].children, gen)
        elif kind == "deletion":
            await self._topic_deletion_pass(gen)
        elif kind == "stop_replica_done":
            self._on_stop_replica_done(*item.payload)
        else:  # pragma: no cover - programming error
            raise ValueError(f"unknown controller item {kind!r}")

    # -- election (ZookeeperLeaderElector) --------------------------------------

    async def _elect(self) -> bool:
        """``ZookeeperLeaderElector.elect``."""
        existing = await self._utils.read_maybe(CONTROLLER_PATH)
        if existing is not None:
            self._controller_id = _parse_controller_id(existing)
            return self._controller_id == self.broker_id
        payload = encode_controller(self.broker_id, int(self._now_ms()))
        try:
            await self._utils.create_ephemeral_path_expect_conflict_handle_zk_bug(
                CONTROLLER_PATH,
                payload,
                checker=lambda stored: _parse_controller_id(stored) == self.broker_id,
                backoff_s=self.config.zk_session_timeout_s,
                max_backoffs=self.config.controller_create_max_backoffs,
            )
        except NodeExistsError:
            self._controller_id = _parse_controller_id(
                await self._utils.read_maybe(CONTROLLER_PATH)
            )
            if self._controller_id == -1:
                log.warning("A leader has been elected but just resigned")
            return False
        except Exception:
            log.exception("Error while electing or becoming leader on broker %d", self.broker_id)
            await self._resign_znode()
            return False
        log.info("%d successfully elected as leader", self.broker_id)
        self._controller_id = self.broker_id
        try:
            await self._on_controller_failover()
        except Exception as exc:
            log.error("controller %d: failover failed: %r", self.broker_id, exc)
            self._resign_local(f"failover_failed:{type(exc).__name__}")
            await self._resign_znode()
            return False
        return True

    async def _resign_znode(self) -> None:
        """``ZookeeperLeaderElector.resign``: forget the leader and delete ``/controller``."""
        self._controller_id = -1
        with contextlib.suppress(Exception):
            await self._utils.delete_path(CONTROLLER_PATH)

    async def _on_controller_data(self, event: WatchEvent) -> None:
        """``LeaderChangeListener``: data changed -> record; deleted -> (resign) + elect."""
        if event.data is not None:
            self._controller_id = _parse_controller_id(event.data)
            if self._active and self._controller_id != self.broker_id:
                self._resign_local("controller_moved")
            return
        if self._active:
            self._resign_local("controller_deleted")
        await self._elect()

    async def _on_new_session(self, session_id: int | None) -> None:
        if session_id is not None and session_id == self._session_seen:
            return
        self._session_seen = session_id
        log.info("ZK expired; shut down all controller components and try to re-elect")
        if self._active:
            self._resign_local("session_expired")
        await self._elect()

    def _resign_local(self, reason: str) -> None:
        """``onControllerResignation``: drop the listeners, the task and the context."""
        was_active = self._active
        self._active = False
        self._generation += 1
        for w in self._watches:
            w.stop()
        self._watches = []
        for w in self._topic_watches.values():
            w.stop()
        self._topic_watches = {}
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
            self._rebalance_task = None
        self._live = set()
        self._assignments = {}
        self._states = {}
        self._incarnations = {}
        # TopicDeletionManager.shutdown: its state goes with the controllership.
        self._to_delete = set()
        self._ineligible = set()
        self._replica_deletion = {}
        self._deletion_posted = False
        if was_active:
            log.info("controller %d resigned: %s", self.broker_id, reason)
            self._event(EventKind.CONTROLLER_RESIGNED, broker=self.broker_id, reason=reason)

    # -- failover ---------------------------------------------------------------

    async def _increment_controller_epoch(self) -> None:
        """``KafkaController.incrementControllerEpoch``."""
        try:
            data, stat = await self._utils.read(CONTROLLER_EPOCH_PATH)
        except NoNodeError:
            await self._create_initial_epoch()
            return
        new_epoch = decode_controller_epoch(data) + 1
        try:
            new_stat = await self.zk.retry_until_connected(
                lambda: self.zk.set_async(
                    CONTROLLER_EPOCH_PATH, encode_controller_epoch(new_epoch), version=stat.version
                )
            )
        except BadVersionError as exc:
            raise ControllerMovedError(
                "Controller moved to another broker. Aborting controller startup procedure"
            ) from exc
        except NoNodeError:
            await self._create_initial_epoch()
            return
        self._epoch, self._epoch_zk_version = new_epoch, int(new_stat.version)

    async def _create_initial_epoch(self) -> None:
        try:
            await self.zk.retry_until_connected(
                lambda: self.zk.create_async(
                    CONTROLLER_EPOCH_PATH, encode_controller_epoch(INITIAL_CONTROLLER_EPOCH)
                )
            )
        except NodeExistsError as exc:
            raise ControllerMovedError(
                "Controller moved to another broker. Aborting controller startup procedure"
            ) from exc
        self._epoch, self._epoch_zk_version = INITIAL_CONTROLLER_EPOCH, 0

    async def _on_controller_failover(self) -> None:
        """``KafkaController.onControllerFailover`` (A8 steps 1-6)."""
        await self._increment_controller_epoch()
        self._controller_session = self.zk.session_id
        self._active = True
        self._generation += 1
        self.failovers += 1
        gen = self._generation
        log.info("Broker %d is controller with epoch %d", self.broker_id, self._epoch)
        self._event(EventKind.CONTROLLER_ELECTED, broker=self.broker_id, generation=self._epoch)
        # Listeners before reading the source of truth.
        self._watches.append(
            await self.zk.watch_data(
                PREFERRED_REPLICA_ELECTION_PATH, self._watch_callback("preferred", gen)
            )
        )
        self._watches.append(
            await self.zk.watch_children(BROKER_TOPICS_PATH, self._watch_callback("topics", gen))
        )
        if self.config.delete_topic_enable:  # PartitionStateMachine.registerListeners
            self._watches.append(
                await self.zk.watch_children(
                    DELETE_TOPICS_PATH, self._watch_callback("delete_topics", gen)
                )
            )
        self._watches.append(
            await self.zk.watch_children(BROKER_IDS_PATH, self._watch_callback("brokers", gen))
        )
        # initializeControllerContext
        self._live = set(await live_brokers(self.zk))
        czxids: dict[str, int] = {}
        for topic in sorted(await self._utils.children_maybe(BROKER_TOPICS_PATH)):
            czxid = await self._load_topic(topic)
            if czxid is not None:
                czxids[topic] = czxid
        for topic in sorted(self._assignments):
            await self._watch_topic(topic, gen)
        # A topic created since the last controller saw the topics is announced now.
        await self._learn_incarnations(czxids, gen, failover=True)
        if self.config.delete_topic_enable:
            await self._initialize_topic_deletion(gen)
        if not self._current(gen):
            return
        # Partition state machine start-up: Offline and New partitions -> Online.
        await self._trigger_online_partition_state_change(gen)
        if self._states and self._current(gen):
            await self._send(self.partition_states, "controller_failover", gen)
        # maybeTriggerPreferredReplicaElection
        pending = await self._utils.read_maybe(PREFERRED_REPLICA_ELECTION_PATH)
        if pending is not None and self._current(gen):
            await self._on_preferred_data(pending, gen)
        if self.config.auto_leader_rebalance_enable and self._current(gen):
            self._rebalance_task = asyncio.create_task(
                self._rebalance_loop(gen), name=f"controller-{self.broker_id}-rebalance"
            )
        # deleteTopicManager.start: the thread runs at once if topics are queued.
        if self._to_delete and self._current(gen):
            self._resume_deletion(gen)

    async def _read_assignment(self, topic: str) -> tuple[dict[int, list[int]], int] | None:
        """The topic's assignment and its znode's ``czxid``; ``None`` if the topic is gone.

        An unreadable payload gives ``{}`` (its listener waits for a good one).
        """
        try:
            data, stat = await self._utils.read(topic_path(topic))
        except NoNodeError:
            return None
        try:
            return decode_topic_assignment(data), int(stat.czxid)
        except PayloadError:
            log.exception("controller %d: bad assignment of topic %s", self.broker_id, topic)
            return {}, int(stat.czxid)

    async def _load_topic(self, topic: str) -> int | None:
        """Read a topic into the context; its znode's ``czxid`` (``None``: gone)."""
        got_assignment = await self._read_assignment(topic)
        if got_assignment is None:
            return None
        assignment, czxid = got_assignment
        self._assignments[topic] = assignment
        for p in sorted(assignment):
            got = await read_leader_and_isr(self.zk, topic, p)
            if got is not None:
                self._states[(topic, p)] = got
        return czxid

    async def _learn_incarnations(
        self, czxids: Mapping[str, int], gen: int, *, failover: bool
    ) -> None:
        """Each topic's incarnation (:func:`zk_registry.topics.assign_incarnation`).

        A number this call assigned is a creation nobody announced yet:
        ``topic_created``, except at failover for a topic no creator noted (the
        run's own topics, which are there before any controller).
        """
        topics = sorted(czxids)
        for i in range(0, len(topics), 64):
            chunk = topics[i : i + 64]
            got = await asyncio.gather(*(assign_incarnation(self.zk, t, czxids[t]) for t in chunk))
            if not self._current(gen):
                return
            for topic, (record, new) in zip(chunk, got, strict=True):
                self._incarnations[topic] = record.incarnation
                if new and (not failover or record.reason is not None):
                    self._emit_created(topic, record)

    def _emit_created(self, topic: str, record: TopicRecord) -> None:
        assignment = self._assignments.get(topic, {})
        replicas = assignment[min(assignment)] if assignment else []
        log.info("New topic %s, incarnation %d", topic, record.incarnation)
        self._event(
            EventKind.TOPIC_CREATED,
            topic=topic,
            count=len(assignment),
            replication_factor=len(replicas),
            incarnation=record.incarnation,
            reason=record.reason if record.reason in ("timeline", "auto") else "timeline",
            broker=self.broker_id,
        )

    async def _watch_topic(self, topic: str, gen: int) -> None:
        if topic in self._topic_watches or not self._current(gen):
            return
        self._topic_watches[topic] = await self.zk.watch_data(
            topic_path(topic), self._watch_callback("topic", gen, topic)
        )

    async def _send(
        self, changes: Mapping[TopicPartition, LeaderIsr], reason: str, gen: int
    ) -> None:
        """``sendRequestsToBrokers``; partitions of topics queued for deletion are left out.

        Kafka sends those with leader -2 in every UpdateMetadata
        (``addUpdateMetadataRequestForBrokers``); the brokers already dropped them
        at the deletion's own UpdateMetadata, so leaving them out changes nothing.
        """
        if self._to_delete:
            changes = {tp: st for tp, st in changes.items() if not self._queued(tp[0])}
        if not changes or not self._current(gen):
            return
        try:
            result = self._on_leader_and_isr(dict(changes), reason)
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("controller %d: on_leader_and_isr(%s) failed", self.broker_id, reason)

    # -- state changes ----------------------------------------------------------

    def _assigned(self, tp: TopicPartition) -> list[int]:
        return self._assignments.get(tp[0], {}).get(tp[1], [])

    async def _unclean_enabled(self, topic: str) -> bool:
        """``LogConfig.fromProps(config, AdminUtils.fetchTopicConfig(topic))``."""
        enabled = self.config.unclean_leader_election_enable
        data = await self._utils.read_maybe(topic_config_path(topic))
        if data is None:
            return enabled
        try:
            value = decode_topic_config(data).get(UNCLEAN_LEADER_ELECTION_CONFIG)
        except PayloadError:
            return enabled
        return enabled if value is None else value.strip().lower() == "true"

    async def _change_state(
        self,
        tp: TopicPartition,
        gen: int,
        decide: Callable[[LeaderIsr], LeaderIsr | None],
    ) -> tuple[LeaderIsr, LeaderIsr] | None:
        """Read, refuse newer controllers' states, decide, conditional write; retry conflicts.

        Returns:
            ``(old, new)`` once written, or ``None`` (no change decided, no
            state znode, fenced, or out of retries).
        """
        for _ in range(max(1, self.config.state_update_retries)):
            if not self._current(gen):
                return None
            got = await read_leader_and_isr(self.zk, *tp)
            if got is None:
                return None
            current, version = got
            if current.controller_epoch > self._epoch:
                log.error(
                    "Leader and isr path for %s written by another controller with epoch %d; "
                    "aborting state change by controller %d with epoch %d",
                    tp,
                    current.controller_epoch,
                    self.broker_id,
                    self._epoch,
                )
                return None
            self._states[tp] = got
            new = decide(current)
            if new is None or not self._current(gen):
                return None
            written = await update_leader_and_isr(self.zk, tp[0], tp[1], new, version)
            if written is not None:
                self._states[tp] = (new, written)
                return current, new
            log.info("state of %s changed under controller %d; retrying", tp, self.broker_id)
        log.warning("controller %d: gave up changing the state of %s", self.broker_id, tp)
        return None

    def _emit_leader(self, tp: TopicPartition, new: LeaderIsr, reason: str) -> None:
        self._event(
            EventKind.LEADER_CHANGED,
            topic=tp[0],
            partition=tp[1],
            broker=new.leader,
            generation=new.leader_epoch,
            reason=reason,
            detail=_isr_json(new.isr),
        )

    async def _elect_offline(self, tp: TopicPartition, gen: int) -> LeaderIsr | None:
        """``electLeaderForPartition`` with the ``OfflinePartitionLeaderSelector``."""
        assigned = self._assigned(tp)
        unclean = await self._unclean_enabled(tp[0])
        reasons: list[str] = []

        def decide(current: LeaderIsr) -> LeaderIsr | None:
            new, reason = offline_leader(assigned, current, self._live, unclean, self._epoch)
            reasons.append(reason)
            return new

        changed = await self._change_state(tp, gen, decide)
        if changed is None:
            if reasons and reasons[-1] == "no_replica_online":
                log.error(
                    "No replica for partition %s is alive (unclean election %s); live brokers "
                    "are [%s], assigned replicas are [%s]",
                    tp,
                    "enabled" if unclean else "disabled",
                    ",".join(map(str, sorted(self._live))),
                    ",".join(map(str, assigned)),
                )
            return None
        new = changed[1]
        if reasons[-1] == "unclean":
            log.warning(
                "No broker in ISR is alive for %s. Elected leader %d from live brokers. "
                "There's potential data loss.",
                tp,
                new.leader,
            )
        self._emit_leader(tp, new, reasons[-1])
        return new

    async def _remove_replica_from_isr(
        self, tp: TopicPartition, broker: int, gen: int
    ) -> LeaderIsr | None:
        """``KafkaController.removeReplicaFromIsr`` (the OfflineReplica transition)."""
        unclean = await self._unclean_enabled(tp[0])
        changed = await self._change_state(
            tp,
            gen,
            lambda cur: remove_replica_from_isr(
                cur, broker, self._epoch, unclean_leader_election_enable=unclean
            ),
        )
        if changed is None:
            return None
        old, new = changed
        if new.leader != old.leader:
            self._emit_leader(tp, new, "offline")
        else:
            self._event(
                EventKind.ISR_CHANGED,
                topic=tp[0],
                partition=tp[1],
                broker=new.leader,
                generation=new.leader_epoch,
                reason="shrink",
                detail=_isr_json(new.isr),
            )
        return new

    async def _new_partitions_online(
        self, partitions: Mapping[str, Iterable[int]], gen: int
    ) -> dict[TopicPartition, LeaderIsr]:
        """NewPartition -> OnlinePartition (``initializeLeaderAndIsrForPartition``).

        The decision is :func:`emulator.controller.new_partition_leader`; the
        state znode is created with ``createPersistentPath`` (parents
        included). A partition without a live replica stays New. NodeExists
        (another controller, or the run's set-up, wrote the state; Kafka:
        ``StateChangeFailedException``) is not an error here: the stored state
        is read back and taken as it is (no LEADER_CHANGED for it).
        """
        out: dict[TopicPartition, LeaderIsr] = {}
        for topic in sorted(partitions):
            assignment = self._assignments.get(topic, {})
            for p in sorted(partitions[topic]):
                if p not in assignment or not self._current(gen):
                    continue
                tp = (topic, p)
                new = new_partition_leader(assignment[p], self._live, self._epoch)
                if new is None:
                    log.error(
                        "encountered error during state change of partition %s from New to "
                        "Online, assigned replicas are [%s], live brokers are [%s]. No assigned "
                        "replica is alive.",
                        tp,
                        ",".join(map(str, assignment[p])),
                        ",".join(map(str, sorted(self._live))),
                    )
                    continue
                try:
                    await self._utils.create_persistent_path(
                        partition_state_path(topic, p), encode_leader_isr(new)
                    )
                except NodeExistsError:
                    got = await read_leader_and_isr(self.zk, topic, p)
                    if got is not None:
                        self._states[tp] = got
                        out[tp] = got[0]
                    continue
                self._states[tp] = (new, 0)
                out[tp] = new
                self._emit_leader(tp, new, "new")
        return out

    async def _trigger_online_partition_state_change(
        self, gen: int
    ) -> dict[TopicPartition, LeaderIsr]:
        """``triggerOnlinePartitionStateChange``: Offline (leader not live) and New -> Online.

        Partitions of topics queued for deletion are left alone.
        """
        changes: dict[TopicPartition, LeaderIsr] = {}
        new: dict[str, list[int]] = {}
        for topic in sorted(self._assignments):
            if self._queued(topic):
                continue
            for p in sorted(self._assignments[topic]):
                tp = (topic, p)
                known = self._states.get(tp)
                if known is None:
                    new.setdefault(topic, []).append(p)
                elif known[0].leader not in self._live:
                    elected = await self._elect_offline(tp, gen)
                    if elected is not None:
                        changes[tp] = elected
        changes.update(await self._new_partitions_online(new, gen))
        return changes

    # -- listeners --------------------------------------------------------------

    async def _on_broker_change(self, children: tuple[str, ...] | None, gen: int) -> None:
        """``BrokerChangeListener.handleChildChange``: startups first, then failures."""
        current = {int(c) for c in children or () if c.lstrip("-").isdigit()}
        new = sorted(current - self._live)
        dead = sorted(self._live - current)
        self._live = current
        log.info(
            "Newly added brokers: %s, deleted brokers: %s, all live brokers: %s",
            new,
            dead,
            sorted(current),
        )
        if new:
            await self._on_broker_startup(new, gen)
        if dead:
            await self._on_broker_failure(dead, gen)

    async def _on_broker_startup(self, new: Sequence[int], gen: int) -> None:
        """``onBrokerStartup``: their partitions' states, then Offline/New -> Online.

        A queued deletion with a replica on a new broker resumes
        (``resumeDeletionForTopics``, K@0.8.2.2 ``KafkaController.scala`` 412-419):
        the topic is eligible again and the deletion pass runs.
        """
        new_set = set(new)
        changes: dict[TopicPartition, LeaderIsr] = {
            tp: st for tp, (st, _) in self._states.items() if new_set & set(self._assigned(tp))
        }
        changes.update(await self._trigger_online_partition_state_change(gen))
        await self._send(changes, "broker_startup", gen)
        resume = {
            topic
            for topic in self._to_delete
            if any(new_set & set(reps) for reps in self._assignments.get(topic, {}).values())
        }
        if resume and self.config.delete_topic_enable:
            log.info(
                "Some replicas for topics scheduled for deletion %s are on the newly restarted "
                "brokers %s. Signaling restart of topic deletion for these topics",
                sorted(resume),
                list(new),
            )
            self._ineligible -= resume
            self._resume_deletion(gen)

    async def _on_broker_failure(self, dead: Sequence[int], gen: int) -> None:
        """``onBrokerFailure``: elect for partitions led by dead brokers, then shrink ISRs.

        Topics queued for deletion are left out; their replicas on the dead
        brokers fail their deletion (``failReplicaDeletion``), which halts it.
        """
        changes = await self._trigger_online_partition_state_change(gen)
        dead_set = set(dead)
        failed: list[tuple[str, int, int]] = []
        for topic in sorted(self._assignments):
            queued = self._queued(topic)
            for p in sorted(self._assignments[topic]):
                tp = (topic, p)
                if queued:
                    failed += [(topic, p, b) for b in self._assigned(tp) if b in dead_set]
                    continue
                if tp not in self._states:
                    continue
                for b in self._assigned(tp):
                    if b in dead_set:
                        removed = await self._remove_replica_from_isr(tp, b, gen)
                        if removed is not None:
                            changes[tp] = removed
        await self._send(changes, "broker_failure", gen)
        if failed:
            self._fail_replica_deletion(failed, gen)

    async def _on_preferred_data(self, data: bytes | None, gen: int) -> None:
        """``PreferredReplicaElectionListener.handleDataChange``."""
        if data is None:
            return
        try:
            listed = decode_preferred_replica_election(data)
        except PayloadError:
            log.exception("controller %d: bad preferred replica election data", self.broker_id)
            return
        await self._on_preferred_replica_election(list(dict.fromkeys(listed)), gen, auto=False)

    async def _on_preferred_replica_election(
        self, partitions: Sequence[TopicPartition], gen: int, *, auto: bool
    ) -> None:
        """``onPreferredReplicaElection`` then ``removePartitionsFromPreferredReplicaElection``."""
        reason = "auto_rebalance" if auto else "preferred"
        changes: dict[TopicPartition, LeaderIsr] = {}
        try:
            for tp in partitions:
                assigned = self._assigned(tp)
                if self._queued(tp[0]):
                    log.warning("Skipping preferred replica election for %s: being deleted", tp)
                    continue
                if not assigned:
                    log.error("Skipping preferred replica election for unknown partition %s", tp)
                    continue
                changed = await self._change_state(
                    tp, gen, functools.partial(self._select_preferred, assigned)
                )
                if changed is None:
                    known = self._states.get(tp)
                    log.warning(
                        "Partition %s failed to complete preferred replica leader election. "
                        "Leader is %s",
                        tp,
                        None if known is None else known[0].leader,
                    )
                    continue
                changes[tp] = changed[1]
                self._emit_leader(tp, changed[1], reason)
            await self._send(changes, reason, gen)
        finally:
            if not auto and self._current(gen):
                await self._utils.delete_path(PREFERRED_REPLICA_ELECTION_PATH)

    def _select_preferred(self, assigned: Sequence[int], current: LeaderIsr) -> LeaderIsr | None:
        return preferred_leader(assigned, current, self._live, self._epoch)

    async def _on_topic_change(self, children: tuple[str, ...] | None, gen: int) -> None:
        """``TopicChangeListener``: forget deleted topics, bring new ones' partitions Online.

        A new topic gets its incarnation and a ``topic_created`` event once its
        partitions went Online (``onNewTopicCreation``).
        """
        current = set(children or ())
        for topic in sorted(set(self._assignments) - current):
            self._forget_topic(topic)
        added: dict[str, list[int]] = {}
        czxids: dict[str, int] = {}
        for topic in sorted(current - set(self._assignments)):
            got = await self._read_assignment(topic)
            if got is None:
                continue
            assignment, czxids[topic] = got
            self._assignments[topic] = assignment
            added[topic] = sorted(assignment)
            await self._watch_topic(topic, gen)
        if added:
            changes = await self._new_partitions_online(added, gen)
            await self._send(changes, "new_partition", gen)
            await self._learn_incarnations(czxids, gen, failover=False)

    def _forget_topic(self, topic: str) -> None:
        """``controllerContext.removeTopic``, with the topic's data watch."""
        self._assignments.pop(topic, None)
        self._incarnations.pop(topic, None)
        for tp in [tp for tp in self._states if tp[0] == topic]:
            del self._states[tp]
        watch = self._topic_watches.pop(topic, None)
        if watch is not None:
            watch.stop()

    async def _on_topic_data(self, topic: str | None, data: bytes | None, gen: int) -> None:
        """``AddPartitionsListener.handleDataChange``: partitions not known yet go Online."""
        if topic is None or data is None or topic not in self._assignments:
            return
        try:
            assignment = decode_topic_assignment(data)
        except PayloadError:
            log.exception("controller %d: bad assignment of topic %s", self.broker_id, topic)
            return
        known = self._assignments[topic]
        added = {p: r for p, r in assignment.items() if p not in known}
        if not added:
            return
        log.info("New partitions to be added %s", {(topic, p): r for p, r in added.items()})
        known.update(added)
        changes = await self._new_partitions_online({topic: sorted(added)}, gen)
        await self._send(changes, "new_partition", gen)

    # -- topic deletion (TopicDeletionManager) -----------------------------------

    def _queued(self, topic: str) -> bool:
        """``isTopicQueuedUpForDeletion`` (always false with ``delete.topic.enable`` off)."""
        return self.config.delete_topic_enable and topic in self._to_delete

    def _replicas_of(self, topic: str) -> list[tuple[str, int, int]]:
        """``(topic, partition, broker)`` of every replica of ``topic``, in order."""
        return [
            (topic, p, b)
            for p, reps in sorted(self._assignments.get(topic, {}).items())
            for b in reps
        ]

    def _resume_deletion(self, gen: int) -> None:
        """``resumeTopicDeletionThread``: the deletion pass runs (once, however often asked)."""
        if self._deletion_posted or not self._current(gen):
            return
        self._deletion_posted = True
        self._post("deletion", None, gen)

    async def _initialize_topic_deletion(self, gen: int) -> None:
        """``initializeTopicDeletion`` (K@0.8.2.2 ``KafkaController.scala`` 763-775).

        The markers present are queued; topics with a replica on a dead broker
        are ineligible. (No reassignment or preferred election is ever left in
        progress here: those run to completion within one queue item.)
        """
        markers = set(await self._utils.children_maybe(DELETE_TOPICS_PATH))
        if not self._current(gen):
            return
        dead = {
            topic
            for topic, parts in self._assignments.items()
            if any(b not in self._live for reps in parts.values() for b in reps)
        }
        self._to_delete = set(markers)
        self._ineligible = dead & markers
        for topic in sorted(markers & set(self._assignments)):
            self._event(
                EventKind.TOPIC_DELETION_REQUESTED,
                topic=topic,
                state="started",
                reason="failover",
                broker=self.broker_id,
            )
        if markers:
            log.info(
                "List of topics to be deleted: %s; ineligible for deletion: %s",
                ",".join(sorted(markers)),
                ",".join(sorted(self._ineligible)),
            )

    async def _on_delete_topics(self, children: tuple[str, ...] | None, gen: int) -> None:
        """``DeleteTopicsListener.handleChildChange`` (``PartitionStateMachine.scala`` 463-510)."""
        if not self.config.delete_topic_enable:
            return
        markers = set(children or ())
        missing = markers - set(self._assignments)
        if missing:
            log.warning("Ignoring request to delete non-existing topics %s", ",".join(missing))
            for topic in sorted(missing):
                if not self._current(gen):
                    return
                await delete_recursive(self.zk, delete_topic_path(topic))
        queued = markers - missing
        new = queued - self._to_delete
        if not queued:
            return
        log.info("Starting topic deletion for topics %s", ",".join(sorted(queued)))
        self._to_delete |= queued
        for topic in sorted(new):
            self._event(
                EventKind.TOPIC_DELETION_REQUESTED,
                topic=topic,
                state="started",
                reason="marker",
                broker=self.broker_id,
            )
        self._resume_deletion(gen)

    async def _topic_deletion_pass(self, gen: int) -> None:
        """``DeleteTopicsThread.doWork`` (``TopicDeletionManager.scala`` 382-431)."""
        self._deletion_posted = False
        if not self.config.delete_topic_enable:
            return
        for topic in sorted(self._to_delete):
            if not self._current(gen):
                return
            replicas = self._replicas_of(topic)
            states = [self._replica_deletion.get(r) for r in replicas]
            if all(st == _SUCCESSFUL for st in states):
                await self._complete_delete_topic(topic, gen)
                log.info("Deletion of topic %s successfully completed", topic)
                continue
            if _STARTED in states:
                log.info("Deletion for replicas of topic %s in progress", topic)
            elif _INELIGIBLE in states:
                # markTopicForDeletionRetry: failed replicas back to OfflineReplica.
                for r, st in zip(replicas, states, strict=True):
                    if st == _INELIGIBLE:
                        del self._replica_deletion[r]
            if _STARTED not in states and topic not in self._ineligible:
                log.info("Deletion of topic %s (re)started", topic)
                await self._on_topic_deletion(topic, gen)
            elif topic in self._ineligible:
                log.info(
                    "Not retrying deletion of topic %s at this time since it is marked "
                    "ineligible for deletion",
                    topic,
                )

    async def _on_topic_deletion(self, topic: str, gen: int) -> None:
        """``onTopicDeletion`` then ``startReplicaDeletion`` (``TopicDeletionManager.scala``).

        UpdateMetadata with leader -2 to every live broker, then StopReplica
        (delete=true) to the live replicas not deleted yet; the dead ones fail,
        which makes the topic ineligible until their broker starts.
        """
        partitions = [(topic, p) for p in sorted(self._assignments.get(topic, {}))]
        if partitions and self._deletion_metadata is not None:
            try:
                result = self._deletion_metadata(list(partitions))
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("controller %d: on_topic_deletion(%s) failed", self.broker_id, topic)
        if not self._current(gen):
            return
        dead: list[tuple[str, int, int]] = []
        per_broker: dict[int, list[TopicPartition]] = {}
        for r in self._replicas_of(topic):
            if r[2] not in self._live:
                dead.append(r)
            elif self._replica_deletion.get(r) != _SUCCESSFUL:
                self._replica_deletion[r] = _STARTED
                per_broker.setdefault(r[2], []).append((r[0], r[1]))
        for r in dead:
            self._replica_deletion[r] = _INELIGIBLE
        if dead:
            log.info("Dead replicas %s found for topic %s", dead, topic)
            self._ineligible.add(topic)
        for broker, tps in sorted(per_broker.items()):
            task = asyncio.create_task(
                self._stop_replica(broker, tps, gen),
                name=f"controller-{self.broker_id}-stop-replica-{broker}",
            )
            self._stop_tasks.add(task)
            task.add_done_callback(self._stop_tasks.discard)

    async def _stop_replica(self, broker: int, tps: list[TopicPartition], gen: int) -> None:
        """One broker's StopReplica (delete=true); its answer comes back as a queue item."""
        ok = True
        if self._stop_replicas is not None:
            try:
                ok = bool(await self._stop_replicas(broker, list(tps)))
            except Exception:
                log.exception("controller %d: StopReplica to %d failed", self.broker_id, broker)
                ok = False
        self._post("stop_replica_done", (broker, tps, ok, gen), gen)

    def _on_stop_replica_done(
        self, broker: int, tps: list[TopicPartition], ok: bool, gen: int
    ) -> None:
        """``deleteTopicStopReplicaCallback``: the replicas are deleted, or failed."""
        replicas = [(t, p, broker) for t, p in tps if self._queued(t)]
        if not replicas:
            return
        if ok:
            for r in replicas:
                self._replica_deletion[r] = _SUCCESSFUL
            self._resume_deletion(gen)
        else:
            self._fail_replica_deletion(replicas, gen)

    def _fail_replica_deletion(self, replicas: Iterable[tuple[str, int, int]], gen: int) -> None:
        """``failReplicaDeletion``: to ReplicaDeletionIneligible, the topics halted."""
        failed = [r for r in replicas if self._queued(r[0])]
        if not failed:
            return
        for r in failed:
            self._replica_deletion[r] = _INELIGIBLE
        topics = {r[0] for r in failed}
        log.info("Halted deletion of topics %s", ",".join(sorted(topics)))
        self._ineligible |= topics
        self._resume_deletion(gen)

    async def _complete_delete_topic(self, topic: str, gen: int) -> None:
        """``completeDeleteTopic`` (``TopicDeletionManager.scala`` 273-290)."""
        count = len(self._assignments.get(topic, {}))
        incarnation = self._incarnations.get(topic)
        # The data watch goes first, so a re-created topic is seen as new.
        self._forget_topic(topic)
        self._replica_deletion = {
            r: st for r, st in self._replica_deletion.items() if r[0] != topic
        }
        self._to_delete.discard(topic)
        self._ineligible.discard(topic)
        if not self._current(gen):
            return
        await delete_recursive(self.zk, topic_path(topic))
        await delete_recursive(self.zk, topic_config_path(topic))
        await self._utils.delete_path(delete_topic_path(topic))
        if incarnation is not None:
            self._event(
                EventKind.TOPIC_DELETED,
                topic=topic,
                incarnation=incarnation,
                count=count,
                broker=self.broker_id,
            )

    # -- auto leader rebalance ---------------------------------------------------

    async def _rebalance_loop(self, gen: int) -> None:
        await asyncio.sleep(self.config.first_check_delay_s)
        while self._current(gen):
            self._post("rebalance", None, gen)
            await asyncio.sleep(self.config.leader_imbalance_check_interval_s)

    async def _check_and_trigger_partition_rebalance(self, gen: int) -> None:
        """``checkAndTriggerPartitionRebalance``: preferred elections for imbalanced brokers."""
        self.rebalance_checks += 1
        assignments = {
            (t, p): replicas
            for t, parts in self._assignments.items()
            for p, replicas in parts.items()
        }
        leaders = {tp: st.leader for tp, (st, _) in self._states.items()}
        todo = partitions_to_rebalance(
            assignments, leaders, self._live, self.config.leader_imbalance_per_broker_percentage
        )
        # The ratio counts a topic being deleted; its partitions are not moved.
        todo = [tp for tp in todo if not self._queued(tp[0])]
        if todo:
            await self._on_preferred_replica_election(todo, gen, auto=True)


def _wall_ms() -> float:
    return time.time() * 1000.0
