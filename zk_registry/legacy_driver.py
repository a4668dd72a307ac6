"""Executes the legacy consumer's ZooKeeper requests exactly as Kafka 0.8.2.2 does.

:class:`emulator.legacy.consumer.LegacyConsumer` is sans-I/O: it yields the
requests of :mod:`emulator.legacy.messages`. :class:`LegacyZkDriver` performs
each one with the znode operations of ``ZookeeperConsumerConnector`` and
``ZkUtils`` (K@0.8.2.2; kafka-protocols.md A1, A5, A7) and answers with an
:class:`~emulator.legacy.messages.IoResult` that carries the value, the
error name, and the reads and writes the request took.

Per request (B brokers, C group members, T subscribed topics):

===========================  ==============================================================
request                      ZooKeeper operations (in order)
===========================  ==============================================================
RegisterConsumer             create ephemeral ``/ids/<me>`` (``createEphemeralPathExpectConflict
                             HandleZKBug``, checker always true, back-off =
                             ``zookeeper.session.timeout.ms``); the first time, also
                             ``reinitializeConsumer``'s subscriptions: exists + getChildren
                             of ``/ids``, exists of each ``/brokers/topics/<t>``
ReadCluster                  ``getCluster``: getChildren ``/brokers/ids`` + B reads (``readData``:
                             a broker vanishing in between fails the attempt)
ReadRebalanceContext         read ``/ids/<me>`` (``TopicCount.constructTopicCount``) +
                             ``getAllBrokersInCluster``: getChildren + B reads (vanished
                             brokers are skipped)
ReadAssignmentContext        ``AssignmentContext``: read ``/ids/<me>`` again, T reads of
                             ``/brokers/topics/<t>``, getChildren ``/ids`` + C reads
                             (``getConsumersPerTopic``), getChildren ``/ids``
                             (``getConsumersInGroup``)
ReleaseOwnership             one delete per partition (``deletePath``: NoNode ignored)
CommitOffsets                per offset ``updatePersistentPath``: set; on NoNode create the
                             parents and the node; on NodeExists set again
FetchOffsets                 one read per partition (``readDataMaybeNull``; NoNode -> None)
ClaimOwnership               one ephemeral create per partition, one after another in the
                             decision's order (a round trip each, as the synchronous
                             ZkClient does), every one tried; on NodeExists read the node back
                             (``createEphemeralPathExpectConflict``); each created node's
                             czxid is returned (``ClaimResult.zxids``)
WatchBrokers                 ``subscribeChildChanges(/brokers/ids)``: exists + getChildren
ReadTopics                   getChildren ``/brokers/topics`` (the wildcard bootstrap and each
                             topic event's own read)
ReinitializeWildcard         ``reinitializeConsumer`` of a ``WildcardTopicCount``: getChildren
                             ``/brokers/topics``; the ``/ids`` child subscription (exists +
                             getChildren) and one data subscription (exists) per topic that
                             ever had streams; a subscription already made is only re-read
WatchTopics                  ``ZookeeperTopicEventWatcher``: exists (+ create) of
                             ``/brokers/topics``, then its child subscription (exists +
                             getChildren); on a new session only the subscription's reads
CloseSession                 ``zkClient.close()``
===========================  ==============================================================

A wildcard (white/black-list) registration costs one more getChildren of
``/brokers/topics`` each time it is resolved (``WildcardTopicCount``, K@0.8.2.2
``consumer/TopicCount.scala`` 133-137): the own one twice per attempt
(``rebalance`` and ``AssignmentContext``), each wildcard peer's once
(``getConsumersPerTopic``, ``utils/ZkUtils.scala`` 660-668). Its registration is
``{JSONEscapeString(regex): numStreams}`` with pattern ``white_list`` or
``black_list`` (139-146). Each change of the ``/brokers/topics`` children
costs a wildcard member 3 reads: zkclient's re-arm (exists + getChildren,
``ZkClient.java`` 556-578 at zkclient 0.3, the watch's own reads here) and the
listener's own getChildren (:class:`~emulator.legacy.messages.ReadTopics`,
``ZookeeperTopicEventWatcher.scala`` 67).

Semantics kept from Kafka 0.8.2.2's ``ZkUtils``:

* ``createEphemeralPathExpectConflict``: on NodeExists read the node; equal
  data means our own create went through before a connection loss: success.
  Different data, or a node that vanished before the read, is a conflict
  (Kafka rethrows NodeExists; it does not retry the create).
* ``createEphemeralPath``/``updatePersistentPath``: a missing parent is created
  with ZkClient's ``createPersistent(parent, true)`` and the operation retried.
* Every operation runs under ZkClient's ``retryUntilConnected``: ConnectionLoss
  and SessionExpired are retried once the client is connected again (a create
  that did land before the loss then meets its own node, as above).
  ``retry_deadline_s`` bounds this (ZkClient waits forever, the default).
* Any other exception ends the request with ``IoResult(error=<class name>)``;
  nothing is raised. A claim that fails with an error keeps the owner nodes it
  already created, as Kafka does (they are in ``value.created``).

``Sleep`` is a timer, not ZooKeeper work: :meth:`LegacyZkDriver.execute` raises
``TypeError`` for it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar

from kazoo.exceptions import NodeExistsError

from emulator.legacy.messages import (
    ClaimOwnership,
    ClaimResult,
    CloseSession,
    CommitOffsets,
    FetchOffsets,
    GroupView,
    IoResult,
    ReadAssignmentContext,
    ReadCluster,
    ReadRebalanceContext,
    ReadTopics,
    RebalanceContext,
    RegisterConsumer,
    ReinitializeWildcard,
    ReleaseOwnership,
    Request,
    Sleep,
    TopicPartition,
    WatchBrokers,
    WatchTopics,
)
from zk_registry.client import (
    EphemeralConflict,
    WatchEvent,
    ZkClient,
    ZkOpCounter,
    ZkUtils,
    ZkWatch,
)
from zk_registry.layout import (
    BROKER_IDS_PATH,
    BROKER_TOPICS_PATH,
    STATIC_PATTERN,
    ConsumerRegistration,
    consumer_id_path,
    consumer_ids_path,
    decode_broker,
    decode_offset,
    decode_owner,
    encode_consumer_registration,
    encode_offset,
    encode_owner,
    json_escape_string,
    offset_path,
    owner_path,
    read_consumer_registration,
    topic_allowed,
    topic_partitions,
    topic_path,
)

__all__ = ["LegacyZkDriver", "WatchCallback"]

log = logging.getLogger(__name__)

T = TypeVar("T")
U = TypeVar("U")

WatchCallback = Callable[[str, WatchEvent], None]
"""``on_watch(source, event)``; source is ``ids``, ``topic:<t>``, ``brokers`` or
``topics`` (the ``/brokers/topics`` children, a wildcard consumer's topic event
watcher), the names :meth:`LegacyConsumer.watch_fired` takes."""


class _Failed(Exception):
    """A request failed part-way: keep the partial value with the error name."""

    def __init__(self, value: object, error: str) -> None:
        super().__init__(error)
        self.value = value
        self.error = error


class LegacyZkDriver:
    """Performs one legacy consumer's requests against ZooKeeper.

    Args:
        client: the consumer's own session (its wrapper).
        group: ``group.id``.
        consumer_id: the consumer id string (:func:`zk_registry.layout.make_consumer_id`).
        session_timeout_s: the scaled ``zookeeper.session.timeout.ms`` in seconds:
            the ZOOKEEPER-1740 back-off of the registration.
        on_watch: called for every firing of the group's watches that Kafka's
            listeners turn into a rebalance trigger (``ids`` and ``brokers``
            child changes, ``topic:<t>`` data changes; a topic's deletion is only
            logged, as ``ZKTopicPartitionChangeListener.handleDataDeleted`` does),
            in the client's dispatch context.
        auto_watch: subscribe to ``/ids`` and the subscribed topics after the
            first successful registration, as ``reinitializeConsumer`` does.
        exclude_internal_topics: ``exclude.internal.topics`` for wildcards.
        pipeline: issue the reads, deletes and offset writes of one request
            concurrently instead of one after the other as Kafka's synchronous
            ZkClient does (same operations, shorter wall time).
        zk_bug_max_retries: bound on the ZOOKEEPER-1740 back-off loop (Kafka: none).
        retry_deadline_s: bound on waiting for a reconnect inside one operation
            (``None``: forever, as ZkClient).
        sleep: the back-off sleep (injected for tests).
        wall_ms: the wall clock in epoch ms for the registration's
            ``timestamp`` (injected for tests).
    """

    def __init__(
        self,
        client: ZkClient,
        group: str,
        consumer_id: str,
        session_timeout_s: float,
        *,
        on_watch: WatchCallback | None = None,
        auto_watch: bool = True,
        exclude_internal_topics: bool = True,
        pipeline: bool = False,
        zk_bug_max_retries: int = 10,
        retry_deadline_s: float | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        wall_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.client = client
        self.wall_ms = wall_ms
        self.group = group
        self.consumer_id = consumer_id
        self.session_timeout_s = float(session_timeout_s)
        self.on_watch = on_watch
        self.auto_watch = auto_watch
        self.exclude_internal_topics = exclude_internal_topics
        self.pipeline = pipeline
        self.zk_bug_max_retries = zk_bug_max_retries
        self.retry_deadline_s = retry_deadline_s
        self.zk = ZkUtils(client, retry_deadline_s, sleep)
        self._watches: dict[str, ZkWatch] = {}
        self._group_watched = False
        # topicStreamsMap's topics (a wildcard consumer's): they keep their data
        # subscription, a deleted one's too (ZookeeperConsumerConnector.scala 889, 898-902).
        self.stream_topics: dict[str, None] = {}
        self._handlers: dict[type[Request], Callable[[Any, ZkOpCounter], Awaitable[object]]] = {
            RegisterConsumer: self._register,
            ReadCluster: self._read_cluster,
            ReadRebalanceContext: self._read_rebalance_context,
            CommitOffsets: self._commit_offsets,
            ReleaseOwnership: self._release_ownership,
            ReadAssignmentContext: self._read_assignment_context,
            FetchOffsets: self._fetch_offsets,
            ClaimOwnership: self._claim_ownership,
            WatchBrokers: self._watch_brokers,
            ReadTopics: self._read_topics,
            ReinitializeWildcard: self._reinitialize_wildcard,
            WatchTopics: self._watch_topics,
            CloseSession: self._close_session,
        }

    # ------------------------------------------------------------------ public

    async def execute(self, request: Request) -> IoResult:
        """Perform ``request``; never raises for ZooKeeper or payload failures.

        Returns:
            The request's value (see each request in :mod:`emulator.legacy.messages`),
            ``error`` = the exception class name on failure, and the reads and
            writes issued.

        Raises:
            TypeError: for :class:`Sleep` (the host's timer) or an unknown request.
        """
        if isinstance(request, Sleep):
            raise TypeError("Sleep is a timer for the host, not ZooKeeper work")
        handler = self._handlers.get(type(request))
        if handler is None:
            raise TypeError(f"no ZooKeeper work for request {type(request).__name__}")
        tally = ZkOpCounter()
        try:
            value = await handler(request, tally)
        except _Failed as failed:
            return IoResult(failed.value, failed.error, tally.reads, tally.writes)
        except Exception as exc:
            log.debug("%s failed: %r", type(request).__name__, exc)
            return IoResult(None, type(exc).__name__, tally.reads, tally.writes)
        return IoResult(value, None, tally.reads, tally.writes)

    async def install_watches(self, topics: Sequence[str]) -> IoResult:
        """``reinitializeConsumer``'s subscriptions: ``/ids`` children and each topic's data.

        Idempotent per path. Returns an :class:`IoResult` with the reads taken.
        """
        tally = ZkOpCounter()
        try:
            await self._install_watches(topics, tally)
        except Exception as exc:
            return IoResult(None, type(exc).__name__, tally.reads, tally.writes)
        return IoResult(None, None, tally.reads, tally.writes)

    def stop_watches(self) -> None:
        """Unsubscribe every watch this driver made."""
        for w in self._watches.values():
            w.stop()
        self._watches.clear()
        self._group_watched = False
        self.stream_topics.clear()

    @property
    def watched_paths(self) -> list[str]:
        """The paths this driver subscribed to."""
        return [w.path for w in self._watches.values()]

    # ------------------------------------------------------------------ requests

    async def _register(self, req: RegisterConsumer, tally: ZkOpCounter) -> None:
        """``registerConsumerInZK`` via ``createEphemeralPathExpectConflictHandleZKBug``.

        A wildcard registration's key is ``JSONEscapeString(regex)``
        (K@0.8.2.2 ``consumer/TopicCount.scala`` 139), and its subscriptions
        are :class:`ReinitializeWildcard`'s, not made here.
        """
        path = consumer_id_path(self.group, self.consumer_id)
        wildcard = req.pattern != STATIC_PATTERN
        subscription = (
            {json_escape_string(k): n for k, n in req.subscription.items()}
            if wildcard
            else req.subscription
        )
        # "timestamp" -> SystemTime.milliseconds at each registration (wall clock).
        data = encode_consumer_registration(subscription, self.wall_ms(), req.pattern)
        try:
            await self.zk.create_ephemeral_path_expect_conflict_handle_zk_bug(
                path,
                data,
                checker=lambda _stored: True,  # the consumer's checker: always "mine"
                backoff_s=self.session_timeout_s,
                max_backoffs=self.zk_bug_max_retries,
                tally=tally,
            )
        except EphemeralConflict:
            raise NodeExistsError() from None
        if self.auto_watch and not self._group_watched and not wildcard:
            # reinitializeConsumer, once: ZkClient keeps listeners across sessions.
            await self._install_watches(tuple(req.subscription), tally)

    async def _read_cluster(self, req: ReadCluster, tally: ZkOpCounter) -> list[int]:
        """``ZkUtils.getCluster``."""
        nodes = await self.zk.children_maybe(BROKER_IDS_PATH, tally)

        async def read(node: str) -> int:
            broker_id = int(node)
            data, _ = await self.zk.read(f"{BROKER_IDS_PATH}/{node}", tally)
            decode_broker(broker_id, data)
            return broker_id

        return sorted(await self._each(nodes, read))

    async def _read_rebalance_context(
        self, req: ReadRebalanceContext, tally: ZkOpCounter
    ) -> RebalanceContext:
        """``rebalance``: my topic count, then ``getAllBrokersInCluster``."""
        mine = await self._my_subscription(tally)
        brokers = await self._all_brokers(tally)
        return RebalanceContext(my_subscription=mine, brokers=tuple(brokers))

    async def _read_assignment_context(
        self, req: ReadAssignmentContext, tally: ZkOpCounter
    ) -> GroupView:
        """``AssignmentContext``: my topic count, partitions, members, members again."""
        await self._my_subscription(tally)  # myTopicThreadIds: the second read of my node

        async def partitions(topic: str) -> tuple[int, ...]:
            data = await self.zk.read_maybe(topic_path(topic), tally)
            return () if data is None else topic_partitions(data)

        parts = await self._each(req.topics, partitions)
        ids_path = consumer_ids_path(self.group)
        members = await self.zk.children_maybe(ids_path, tally)

        async def member(cid: str) -> dict[str, int]:
            data, _ = await self.zk.read(f"{ids_path}/{cid}", tally)
            reg = read_consumer_registration(data)
            return await self._resolve(reg, tally)

        subs = await self._each(members, member)
        await self.zk.children(ids_path, tally)  # getConsumersInGroup
        return GroupView(
            consumers=dict(zip(members, subs, strict=True)),
            partitions_per_topic=dict(zip(req.topics, parts, strict=True)),
        )

    async def _release_ownership(self, req: ReleaseOwnership, tally: ZkOpCounter) -> None:
        """``releasePartitionOwnership`` / the roll-back: ``deletePath`` per owner node."""

        async def delete(tp: TopicPartition) -> None:
            await self.zk.delete_path(owner_path(self.group, tp[0], tp[1]), tally)

        await self._each(req.partitions, delete)

    async def _commit_offsets(self, req: CommitOffsets, tally: ZkOpCounter) -> list[TopicPartition]:
        """``commitOffsetToZooKeeper`` per entry; the first failure ends the loop."""
        written: list[TopicPartition] = []

        async def commit(item: tuple[TopicPartition, int]) -> None:
            (topic, partition), offset = item
            path = offset_path(self.group, topic, partition)
            await self.zk.update_persistent_path(path, encode_offset(offset), tally)
            written.append((topic, partition))

        try:
            await self._each(list(req.offsets.items()), commit)
        except Exception as exc:
            raise _Failed(written, type(exc).__name__) from exc
        return written

    async def _fetch_offsets(
        self, req: FetchOffsets, tally: ZkOpCounter
    ) -> dict[TopicPartition, int | None]:
        """``fetchOffsetFromZooKeeper`` per partition."""

        async def fetch(tp: TopicPartition) -> int | None:
            data = await self.zk.read_maybe(offset_path(self.group, tp[0], tp[1]), tally)
            return None if data is None else decode_offset(data)

        values = await self._each(req.partitions, fetch)
        return dict(zip(req.partitions, values, strict=True))

    async def _claim_ownership(self, req: ClaimOwnership, tally: ZkOpCounter) -> ClaimResult:
        """``reflectPartitionOwnershipDecision``: one create after another.

        K@0.8.2.2 ``ZookeeperConsumerConnector.scala`` 769-797 maps over the
        decision with a synchronous ``createEphemeralPathExpectConflict`` per
        partition (one round trip each): a NodeExists is recorded and the next
        create still runs; any other exception propagates at once, leaving the
        nodes created so far (no roll-back).
        """
        created: list[TopicPartition] = []
        conflicts: dict[TopicPartition, str | None] = {}
        zxids: dict[TopicPartition, int] = {}
        for tp, thread in req.decision.items():
            path = owner_path(self.group, tp[0], tp[1])
            try:
                zxid = await self.zk.create_ephemeral_path_expect_conflict(
                    path, encode_owner(thread), tally
                )
            except EphemeralConflict as conflict:
                conflicts[tp] = None if conflict.stored is None else decode_owner(conflict.stored)
                continue
            except Exception as exc:
                partial = ClaimResult(created=tuple(created), conflicts=conflicts, zxids=zxids)
                raise _Failed(partial, type(exc).__name__) from exc
            created.append(tp)  # the owner node's czxid
            zxids[tp] = zxid
        return ClaimResult(created=tuple(created), conflicts=conflicts, zxids=zxids)

    async def _watch_brokers(self, req: WatchBrokers, tally: ZkOpCounter) -> None:
        """``zkClient.subscribeChildChanges(BrokerIdsPath, loadBalancerListener)``."""
        await self._subscribe("brokers", BROKER_IDS_PATH, "children", tally)

    async def _read_topics(self, req: ReadTopics, tally: ZkOpCounter) -> tuple[str, ...]:
        """``getChildren(/brokers/topics)`` (``getChildrenParentMayNotExist`` if asked)."""
        if req.parent_may_not_exist:
            return tuple(await self.zk.children_maybe(BROKER_TOPICS_PATH, tally))
        return tuple(await self.zk.children(BROKER_TOPICS_PATH, tally))

    async def _reinitialize_wildcard(
        self, req: ReinitializeWildcard, tally: ZkOpCounter
    ) -> tuple[str, ...]:
        """``reinitializeConsumer`` for a ``WildcardTopicCount`` (K@0.8.2.2 820-902).

        ``getConsumerThreadIdsPerTopic`` (a getChildren, filtered); the
        matched topics join ``topicStreamsMap`` for good; then the ``/ids``
        child subscription and a data subscription per topic of
        ``topicStreamsMap``. zkclient's listeners are sets, so a subscription
        made before is re-read, not replaced (:meth:`_resubscribe`).
        """
        children = await self.zk.children_maybe(BROKER_TOPICS_PATH, tally)
        matched = req.subscription.select(children, req.exclude_internal)
        for topic in matched:
            self.stream_topics.setdefault(topic, None)
        if self.auto_watch:
            await self._resubscribe("ids", consumer_ids_path(self.group), "children", tally)
            for topic in self.stream_topics:
                await self._resubscribe(f"topic:{topic}", topic_path(topic), "data", tally)
            self._group_watched = True
        return matched

    async def _watch_topics(self, req: WatchTopics, tally: ZkOpCounter) -> None:
        """``ZookeeperTopicEventWatcher.startWatchingTopicEvents`` or its ``handleNewSession``.

        K@0.8.2.2 ``ZookeeperTopicEventWatcher.scala`` 32-44 and 88-95. The
        subscription outlives sessions as zkclient's does (:class:`ZkWatch`
        re-arms it and fires once on a new session, zkclient's
        ``fireAllEvents``), so a re-subscription only costs its reads.
        """
        if not req.resubscribe:
            await self.zk.make_sure_persistent_path_exists(BROKER_TOPICS_PATH, tally)
        await self._resubscribe("topics", BROKER_TOPICS_PATH, "children", tally)

    async def _close_session(self, req: CloseSession, tally: ZkOpCounter) -> None:
        """``zkClient.close()``: the server deletes this session's ephemerals."""
        self.stop_watches()
        await self.client.stop_async()

    # ------------------------------------------------------------------ watches

    async def _install_watches(self, topics: Iterable[str], tally: ZkOpCounter) -> None:
        await self._subscribe("ids", consumer_ids_path(self.group), "children", tally)
        for topic in topics:
            await self._subscribe(f"topic:{topic}", topic_path(topic), "data", tally)
        self._group_watched = True

    async def _resubscribe(self, source: str, path: str, kind: str, tally: ZkOpCounter) -> None:
        """zkclient's ``subscribe*Changes`` of a listener it may hold already.

        The listener set keeps one entry (``ZkClient.java`` 105-138 at
        zkclient 0.3); ``watchForChilds`` / ``watchForData`` read again
        (exists + getChildren, or exists). The watch in place is kept: replacing
        it could drop a notification on its way.
        """
        watch = self._watches.get(source)
        if watch is None or not watch.active:
            await self._subscribe(source, path, kind, tally)
            return
        await self.zk.exists(path, tally)
        if kind == "children":
            await self.zk.children_maybe(path, tally)

    async def _subscribe(self, source: str, path: str, kind: str, tally: ZkOpCounter) -> None:
        old = self._watches.pop(source, None)
        if old is not None:
            old.stop()  # ZkClient re-subscribing: same listener, the reads happen again

        def fired(event: WatchEvent) -> None:
            if event.kind == "data" and event.data is None:
                # ZKTopicPartitionChangeListener.handleDataDeleted only logs a warning
                # ("gets deleted, which should not happen at this time"): no rebalance.
                # Kafka's WARN goes to the emulator's debug log: one per member would
                # flood the console, and the deletion is in the events.
                log.debug("Topic for path %s gets deleted", path)
                return
            if self.on_watch is not None:
                self.on_watch(source, event)

        if kind == "children":
            watch = await self.client.watch_children(path, fired, tally=tally)
        else:
            watch = await self.client.watch_data(path, fired, tally=tally)
        self._watches[source] = watch

    # ------------------------------------------------------------------ helpers

    async def _each(self, items: Sequence[T], fn: Callable[[T], Awaitable[U]]) -> list[U]:
        if self.pipeline:
            return list(await asyncio.gather(*(fn(item) for item in items)))
        return [await fn(item) for item in items]

    # ------------------------------------------------------------------ TopicCount

    async def _my_subscription(self, tally: ZkOpCounter) -> dict[str, int]:
        """``TopicCount.constructTopicCount(group, me)``: read my node; missing is an error."""
        data, _ = await self.zk.read(consumer_id_path(self.group, self.consumer_id), tally)
        return await self._resolve(read_consumer_registration(data), tally)

    async def _resolve(self, reg: ConsumerRegistration, tally: ZkOpCounter) -> dict[str, int]:
        """``getConsumerThreadIdsPerTopic``'s topics: static as is, wildcards against topics."""
        if not reg.is_wildcard:
            return dict(reg.subscription)
        raw, streams = next(iter(reg.subscription.items()))
        topics = await self.zk.children_maybe(BROKER_TOPICS_PATH, tally)
        return {
            t: streams
            for t in topics
            if topic_allowed(reg.pattern, raw, t, self.exclude_internal_topics)
        }

    async def _all_brokers(self, tally: ZkOpCounter) -> list[int]:
        """``ZkUtils.getAllBrokersInCluster``: sorted children, vanished ones skipped."""
        nodes = sorted(await self.zk.children_maybe(BROKER_IDS_PATH, tally))  # string order

        async def read(node: str) -> int | None:
            data = await self.zk.read_maybe(f"{BROKER_IDS_PATH}/{node}", tally)
            if data is None:
                return None
            return decode_broker(int(node), data).broker_id

        return [b for b in await self._each(nodes, read) if b is not None]
