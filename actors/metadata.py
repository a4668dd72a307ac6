"""The client metadata cache of the producer and the consumer hosts, with its Ray calls.

The cache's rules (the leader map, when a refresh is due, which brokers it
asks in which order) are :class:`emulator.host.metadata.LeaderMap`.
:class:`LeaderCache` adds what only an actor can do: ask the brokers
(``metadata()``) in a background task, and keep the broker actor handles: a
restarted broker is a new Ray actor under the same name
(:func:`broker_actor_name`), so a handle that failed is looked up again by
name (:meth:`actors.io.ActorIO.lookup_actor`). ``refresh.leader.backoff.ms``
is scaled by the run's ``time_scale``.
Its times are the running loop's clock (the monotonic clock on a real loop):
its methods are called on the actor's loop.
"""

from __future__ import annotations

import asyncio
from typing import Any

from actors.context import RunContext
from actors.io import ActorIO, RealIO
from emulator.host.metadata import LeaderMap

TopicPartition = tuple[str, int]

#: How long one ``metadata()`` call may take before the next broker is asked
#: (emulator bound, wall seconds).
METADATA_CALL_TIMEOUT_S = 2.0
#: The least wall time between two metadata refreshes of one client, whatever
#: the time scale (emulator bound).
MIN_REFRESH_INTERVAL_S = 0.1
#: The least wall time between two name look-ups of the same broker actor
#: (emulator bound: on the real engine ``ray.get_actor`` is a GCS round trip).
HANDLE_LOOKUP_INTERVAL_S = 0.5


def broker_actor_name(run_id: str, protocol: str, broker_id: int) -> str:
    """The Ray actor name of a broker of a run (the same after a restart)."""
    return f"{run_id}-{protocol}-b{broker_id}"


class LeaderCache(LeaderMap):
    """A client's partition -> leader map, refreshed from the brokers on failure.

    Args:
        ctx: the run (its ``leaders`` seed the cache, and are consulted for
            partitions added since).
        brokers: broker id -> actor handle. The dict is shared, not copied:
            a handle looked up again after a broker restart replaces the
            entry in place, so the owner's other uses of the dict see it.
        backoff_ms: the least emulated time between two refreshes
            (``refresh.leader.backoff.ms``, 200 in 0.8.2).
        io: where a broker's handle is looked up again by name (default:
            :class:`~actors.io.RealIO`, Ray's named actors).
        auto_create_topics: a refresh names the topics asked about that the
            last answer lacked, allowing the broker to create them
            (``auto.create.topics.enable``): the 0.8 clients'
            ``ClientUtils.fetchTopicMetadata`` (the consumer's ``LeaderFinderThread``,
            the producer's ``BrokerPartitionInfo.updateInfo``), the modern
            producer and a Java consumer of named topics with
            ``allow.auto.create.topics``. A client that asks for all topics (a
            classic pattern subscription) or by topic id (KIP-848 RE2/J) passes
            false: set :attr:`auto_create_topics` so.
    """

    def __init__(
        self,
        ctx: RunContext,
        brokers: dict[int, Any],
        backoff_ms: float = 200.0,
        *,
        io: ActorIO | None = None,
        auto_create_topics: bool = False,
    ) -> None:
        # Floor (emulator bound): a small time_scale must not turn a failover into
        # a storm of metadata calls.
        super().__init__(
            ctx.leaders, ctx.leaders, max(MIN_REFRESH_INTERVAL_S, ctx.scaled_s(backoff_ms))
        )
        self.ctx = ctx
        self.io: ActorIO = io if io is not None else RealIO()
        self.brokers = brokers
        self.auto_create_topics = auto_create_topics
        self._refreshing: asyncio.Task[None] | None = None
        self._last_lookup: dict[int, float] = {}

    def handle(self, broker: int) -> Any:
        """The actor handle of ``broker``, looked up again by name after a failure.

        The look-up goes to :meth:`actors.io.ActorIO.lookup_actor` (on the real
        engine: Ray, only in a process connected to it), at most once every
        :data:`HANDLE_LOOKUP_INTERVAL_S` per broker. Returns ``None`` when the
        broker has no live actor (yet).
        """
        if self.is_dead(broker) or broker not in self.brokers:
            now = asyncio.get_running_loop().time()
            # never looked up: due at once, whatever the clock's origin (a virtual one is 0)
            if now - self._last_lookup.get(broker, float("-inf")) >= HANDLE_LOOKUP_INTERVAL_S:
                self._last_lookup[broker] = now
                h = self.io.lookup_actor(
                    broker_actor_name(self.ctx.run_id, self.ctx.protocol, broker)
                )
                if h is not None:
                    self.brokers[broker] = h
                    self.revived(broker)
        return self.brokers.get(broker)

    def maybe_refresh(self) -> None:
        """Start a background refresh if one is due and the back-off allows it."""
        if self._refreshing is not None or not self.refresh_due(asyncio.get_running_loop().time()):
            return
        self._refreshing = asyncio.ensure_future(self._refresh_task())

    async def refresh(self) -> bool:
        """Ask live brokers, one at a time, for the leader map; ``True`` if one answered.

        With :attr:`auto_create_topics`, the topics asked about that the last
        answer lacked are named (the broker may create them, K@0.8.2.2
        ``KafkaApis.getTopicMetadata`` 499-529).
        """
        wanted = self.take_wanted()
        if not self.auto_create_topics:
            wanted = []
        for b in self.begin_refresh(asyncio.get_running_loop().time(), self.brokers):
            h = self.handle(b)
            if h is None:
                continue
            try:
                ref = h.metadata.remote(wanted, True) if wanted else h.metadata.remote()
                answer = await asyncio.wait_for(_await_ref(ref), METADATA_CALL_TIMEOUT_S)
            except Exception:
                self.unanswered(b)
                continue
            self.answered(dict(answer))
            return True
        return False

    async def fetch_metadata(
        self, topics: list[str], allow_auto_create: bool
    ) -> dict[TopicPartition, int] | None:
        """One consumer's metadata request: ask live brokers, one at a time, until one answers.

        ``topics`` are named (``allow_auto_create``: the broker may create a
        missing one, ``KafkaApis.scala`` 1392); the answer is the broker's
        whole metadata cache, which also refreshes the leader map. Returns
        ``None`` when no broker answered.
        """
        for b in self.begin_refresh(asyncio.get_running_loop().time(), self.brokers):
            h = self.handle(b)
            if h is None:
                continue
            try:
                ref = (
                    h.metadata.remote(topics, True)
                    if topics and allow_auto_create
                    else h.metadata.remote()
                )
                answer = dict(await asyncio.wait_for(_await_ref(ref), METADATA_CALL_TIMEOUT_S))
            except Exception:
                self.unanswered(b)
                continue
            self.answered(answer)
            return answer
        return None

    async def _refresh_task(self) -> None:
        try:
            await self.refresh()
        finally:
            self._refreshing = None


async def _await_ref(ref: Any) -> Any:
    return await ref
