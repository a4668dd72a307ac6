"""Producer actors: messages at a configured rate, partitioned as configured.

Each tick the producer works out how many messages are due at
``rate_per_s`` (emulated seconds), partitions them, and sends one produce
call per leader broker. Partitioners: ``round-robin`` (cycle the
partitions), ``key-hash`` (Kafka 0.8 ``DefaultPartitioner``:
``abs(key.hashCode) % numPartitions`` over seeded keys) and ``explicit``
(one partition).

Every produce is ``acks=all`` (the broker answers once the high watermark
covers the batch, :meth:`actors.broker.BrokerCore.produce`); PRODUCED is
written only for acknowledged batches.

A topic that is deleted (gone from the metadata, or answered
UNKNOWN_TOPIC_OR_PARTITION) is not produced to: the messages due for it, and
those waiting for it, are dropped and counted (a Java producer's ``send``
fails once ``max.block.ms`` passes without the topic in its metadata; the 0.8
producer gives up after ``message.send.max.retries``), with a
``request_error`` UNKNOWN_TOPIC_OR_PARTITION when it goes and one with the
count when it comes back (or the producer stops). Its metadata requests name
the topic (both producers allow auto-creation), so with the brokers'
``auto.create.topics.enable`` the topic comes back with ``num.partitions``
partitions, whose count the producer takes from the metadata. The producer
produces to the ``[producer].topics`` only: a topic created later is not
added. Leaders come from a
:class:`~actors.metadata.LeaderCache`: a batch answered NotLeader or
RequestTimedOut, or sent to a broker that does not answer, goes back to the
backlog and is sent again (the messages are counts, so a retry is the same
count once more) to the leader the refreshed metadata names. Emulator
choice: retries are unbounded (the 0.8 producer gives up after
``message.send.max.retries`` = 3 and drops the batch); an unacknowledged
batch may still have reached the log, as in Kafka (at-least-once).
"""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from typing import Any

from actors.context import RunContext
from actors.io import ActorIO, RealIO
from actors.locate import Locatable
from actors.metadata import LeaderCache
from emulator.broker.messages import UNKNOWN_TOPIC_OR_PARTITION
from emulator.events import EventKind
from emulator.javahash import java_string_hashcode

TopicPartition = tuple[str, int]
TICK_S = 0.05


class ProducerCore(Locatable):
    """One producer, without Ray (:data:`actors.remote.ProducerActor` wraps it).

    Args:
        index: producer number (actor name ``producer-<index>``).
        ctx: the run.
        topics: topic -> partition count.
        rate_per_s: messages per emulated second, over all topics.
        partitioner: ``round-robin`` | ``key-hash`` | ``explicit``.
        batch_size: the most messages one partition gets per produce call; the
            rest waits for the next tick, as a full producer batch does.
        explicit_partition: the partition for ``explicit``.
        brokers: broker id -> actor handle.
        key_space: how many distinct keys ``key-hash`` draws from (emulator knob).
        io: broker look-ups, host name and event tap (default
            :class:`~actors.io.RealIO`: Ray, the machine's).
    """

    def __init__(
        self,
        index: int,
        ctx: RunContext,
        topics: dict[str, int],
        rate_per_s: float,
        partitioner: str,
        batch_size: int,
        explicit_partition: int | None,
        brokers: dict[int, Any],
        key_space: int = 1000,
        *,
        io: ActorIO | None = None,
    ) -> None:
        self.ctx = ctx
        self.io: ActorIO = io if io is not None else RealIO()
        self.topics = topics
        self.rate_per_s = rate_per_s
        self.partitioner = partitioner
        self.batch_size = max(1, batch_size)
        self.explicit_partition = explicit_partition or 0
        self.brokers = brokers
        self.rng = random.Random(ctx.seed * 7919 + index)
        self.key_space = key_space
        self.clock = ctx.clock()
        self.events = ctx.writer(
            f"producer-{index}", self.clock, node=self.io.hostname(), tap=self.io.tap
        )
        self._rr: dict[str, int] = defaultdict(int)
        self._backlog: dict[TopicPartition, int] = defaultdict(int)
        self._topic_cycle = 0
        self._owed = 0.0
        self._last_ms: float | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop = False
        self.produced = 0
        self.failed = 0
        self.retried = 0
        self.dropped = 0  # messages for a deleted topic, never sent
        self._gone: dict[str, int] = {}  # deleted topic -> messages dropped since it went
        self.leader_cache = LeaderCache(ctx, self.brokers, io=self.io, auto_create_topics=True)
        self._inflight: set[int] = set()
        self._sends: set[asyncio.Task[None]] = set()

    def _partition_for(self, topic: str) -> int:
        n = self.topics[topic]
        if self.partitioner == "explicit":
            return self.explicit_partition % n
        if self.partitioner == "key-hash":
            key = f"key-{self.rng.randrange(self.key_space)}"
            return abs(java_string_hashcode(key)) % n
        p = self._rr[topic] % n
        self._rr[topic] += 1
        return p

    def _due(self, now_ms: float) -> int:
        if self._last_ms is None:
            self._last_ms = now_ms
            return 0
        self._owed += (now_ms - self._last_ms) / 1000.0 * self.rate_per_s
        self._last_ms = now_ms
        n = int(self._owed)
        self._owed -= n
        return n

    async def tick(self) -> int:
        """Queue what is due now and send a batch to each leader with none in flight.

        Returns the number of messages sent (answered later, in the background).
        """
        n = self._due(self.clock.now_ms())
        names = sorted(self.topics)
        self._follow_deletions(names)
        gone = self._gone
        for _ in range(n):
            topic = names[self._topic_cycle % len(names)]
            self._topic_cycle += 1
            if topic in gone:
                gone[topic] += 1
                self.dropped += 1
                continue
            self._backlog[(topic, self._partition_for(topic))] += 1
        for topic in gone:
            self.leader_cache.leader((topic, 0))  # unknown: the refresh asks for it by name
        self.leader_cache.maybe_refresh()
        if not self._backlog:
            return 0
        by_broker: dict[int, dict[TopicPartition, int]] = defaultdict(dict)
        for tp, count in list(self._backlog.items()):
            leader = self.leader_cache.leader(tp)
            if leader is None or leader in self._inflight:
                continue
            take = min(count, self.batch_size)
            by_broker[leader][tp] = take
            if take == count:
                del self._backlog[tp]
            else:
                self._backlog[tp] = count - take
        sent = 0
        for b, batch in by_broker.items():
            self._inflight.add(b)
            sent += sum(batch.values())
            task = asyncio.ensure_future(self._send(b, batch))
            self._sends.add(task)
            task.add_done_callback(self._sends.discard)
        return sent

    def _follow_deletions(self, names: list[str]) -> None:
        """Topics that left the metadata (deleted) or came back (created again)."""
        cache = self.leader_cache
        for topic in names:
            if topic in cache.absent:
                if topic not in self._gone:
                    self._topic_gone(topic, "not in the metadata")
            elif topic in self._gone:
                count = cache.topic_partitions(topic)
                if count is not None:
                    self._topic_back(topic, count)

    def _topic_gone(self, topic: str, why: str) -> None:
        """Stop producing to ``topic``: what waits for it is dropped."""
        waiting = [tp for tp in self._backlog if tp[0] == topic]
        dropped = sum(self._backlog.pop(tp) for tp in waiting)
        self._gone[topic] = dropped
        self.dropped += dropped
        self.events.emit(
            EventKind.REQUEST_ERROR,
            reason="UNKNOWN_TOPIC_OR_PARTITION",
            topic=topic,
            count=dropped,
            detail=f"produce: {topic} {why}: its messages are dropped until it is back",
        )

    def _topic_back(self, topic: str, partitions: int) -> None:
        """``topic`` is in the metadata again (created again): produce to its partitions."""
        dropped = self._gone.pop(topic)
        self.topics[topic] = partitions
        self._rr[topic] = 0
        self._dropped_event(topic, dropped, "it is back")

    def _dropped_event(self, topic: str, dropped: int, when: str) -> None:
        self.events.emit(
            EventKind.REQUEST_ERROR,
            reason="UNKNOWN_TOPIC_OR_PARTITION",
            topic=topic,
            count=dropped,
            detail=f"produce: {dropped} messages for {topic} dropped while it was gone ({when})",
        )

    def _requeue(self, batch: dict[TopicPartition, int]) -> None:
        for tp, n in batch.items():
            self._backlog[tp] += n
            self.failed += n
            self.retried += n

    async def _send(self, b: int, batch: dict[TopicPartition, int]) -> None:
        """One produce call; acknowledged batches are PRODUCED, the rest are queued again."""
        try:
            handle = self.leader_cache.handle(b)
            if handle is None:
                self.leader_cache.failed(b)
                self._requeue(batch)
                return
            try:
                result = await handle.produce.remote(batch)
            except Exception as exc:  # a dead broker: the batch goes to the new leader
                self.leader_cache.failed(b)
                self._requeue(batch)
                self.events.emit(
                    EventKind.REQUEST_ERROR,
                    reason="NETWORK_EXCEPTION",
                    broker=b,
                    detail=f"produce: {type(exc).__name__}",
                )
                return
            for (topic, partition), (start, end) in result.items():
                tp = (topic, partition)
                if start == UNKNOWN_TOPIC_OR_PARTITION:
                    self.leader_cache.not_leader(tp)
                    n = batch[tp]
                    self.dropped += n
                    self.events.emit(
                        EventKind.REQUEST_ERROR,
                        reason="UNKNOWN_TOPIC_OR_PARTITION",
                        topic=topic,
                        partition=partition,
                        broker=b,
                        count=n,
                        detail="produce: the batch is dropped",
                    )
                    continue
                if start < 0:
                    self.leader_cache.not_leader(tp)
                    self._requeue({tp: batch[tp]})
                    continue
                self.events.emit(
                    EventKind.PRODUCED,
                    topic=topic,
                    partition=partition,
                    offset_start=start,
                    offset_end=end,
                    broker=b,
                )
                self.produced += end - start
        finally:
            self._inflight.discard(b)

    def update_partitions(self, topic: str, total: int) -> None:
        """The topic grew to ``total`` partitions (its new leaders come from metadata)."""
        if topic in self.topics:
            self.topics[topic] = total

    async def _loop(self) -> None:
        while not self._stop:
            await self.tick()
            await asyncio.sleep(TICK_S)

    async def start(self) -> None:
        """Start producing in the background."""
        self._last_ms = self.clock.now_ms()
        self._task = asyncio.ensure_future(self._loop())

    async def stop(self) -> dict[str, int]:
        """Stop producing, flush the log; return the counts."""
        self._stop = True
        if self._task is not None:
            await asyncio.wait_for(self._task, 10.0)
            self._task = None
        if self._sends:  # let the batches in flight be answered (acks, bounded)
            await asyncio.wait(list(self._sends), timeout=30.0)
        for topic, dropped in sorted(self._gone.items()):
            if not self.events.closed:
                self._dropped_event(topic, dropped, "the producer stopped")
        if not self.events.closed:
            self.events.close()
        return {"produced": self.produced, "failed": self.failed, "dropped": self.dropped}

    async def stats(self) -> dict[str, int]:
        """Counts for the live display."""
        return {"produced": self.produced, "failed": self.failed, "dropped": self.dropped}

    def set_origin(self, origin_wall: float) -> None:
        """Fix the run's emulated time 0 (called once every actor is up).

        The events logged before are written now, restamped on it.
        """
        self.events.release(self.clock.rebase(origin_wall))
