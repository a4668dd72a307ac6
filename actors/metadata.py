"""Where each partition's leader is, as a client learns it: the metadata cache.

A Kafka client keeps a metadata cache (partition -> leader) and refreshes it
from any broker when a request fails with NotLeaderForPartition or a broker
does not answer (K@0.8.2.2 ``ClientUtils.fetchTopicMetadata`` in the old
producer and ``ConsumerFetcherManager.LeaderFinderThread`` in the 0.8
consumer; ``Metadata.requestUpdate`` in the modern clients). The refresh is
rate-limited by ``refresh.leader.backoff.ms`` (200 ms, 0.8.2 consumer; the
modern clients' ``retry.backoff.ms`` is 100 ms) scaled by the run's
``time_scale``.

:class:`LeaderCache` is that cache for the producer and the consumer hosts.
It also keeps the broker actor handles: a restarted broker is a new Ray actor
under the same name (:func:`broker_actor_name`), so a handle that failed is
looked up again by name.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable
from typing import Any

from actors.context import RunContext

TopicPartition = tuple[str, int]

#: How long one ``metadata()`` call may take before the next broker is asked
#: (emulator bound, wall seconds).
METADATA_CALL_TIMEOUT_S = 2.0
#: The least wall time between two metadata refreshes of one client, whatever
#: the time scale (emulator bound).
MIN_REFRESH_INTERVAL_S = 0.1
#: The least wall time between two name look-ups of the same broker actor
#: (emulator bound: ``ray.get_actor`` is a GCS round trip).
HANDLE_LOOKUP_INTERVAL_S = 0.5


def broker_actor_name(run_id: str, protocol: str, broker_id: int) -> str:
    """The Ray actor name of a broker of a run (the same after a restart)."""
    return f"{run_id}-{protocol}-b{broker_id}"


class LeaderCache:
    """A client's partition -> leader map, refreshed from the brokers on failure.

    Args:
        ctx: the run (its ``leaders`` seed the cache).
        brokers: broker id -> actor handle. The dict is shared, not copied:
            a handle looked up again after a broker restart replaces the
            entry in place, so the owner's other uses of the dict see it.
        backoff_ms: the least emulated time between two refreshes
            (``refresh.leader.backoff.ms``, 200 in 0.8.2).
    """

    def __init__(self, ctx: RunContext, brokers: dict[int, Any], backoff_ms: float = 200.0) -> None:
        self.ctx = ctx
        self.brokers = brokers
        self.leaders: dict[TopicPartition, int] = dict(ctx.leaders)
        # Floor (emulator bound): a small time_scale must not turn a failover into
        # a storm of metadata calls.
        self.backoff_s = max(MIN_REFRESH_INTERVAL_S, ctx.scaled_s(backoff_ms))
        self.stale = False
        self.refreshes = 0
        self._last_refresh = 0.0
        self._refreshing: asyncio.Task[None] | None = None
        self._dead_handles: set[int] = set()
        self._last_lookup: dict[int, float] = {}
        self._rr = 0

    # ------------------------------------------------------------------ reads

    def leader(self, tp: TopicPartition) -> int | None:
        """The leader of ``tp`` as last known; ``None`` (and a refresh is due) if unknown."""
        b = self.leaders.get(tp)
        if b is None:  # partitions added since: the owner may have put them in ctx.leaders
            b = self.ctx.leaders.get(tp)
        if b is None or b < 0:
            self.stale = True
            return None
        return b

    def handle(self, broker: int) -> Any:
        """The actor handle of ``broker``, looked up again by name after a failure.

        Returns ``None`` when the broker has no live actor (yet).
        """
        if broker in self._dead_handles or broker not in self.brokers:
            now = time.monotonic()
            if now - self._last_lookup.get(broker, 0.0) >= HANDLE_LOOKUP_INTERVAL_S:
                self._last_lookup[broker] = now
                import ray

                h = None
                if ray.is_initialized():
                    with contextlib.suppress(Exception):
                        h = ray.get_actor(
                            broker_actor_name(self.ctx.run_id, self.ctx.protocol, broker)
                        )
                if h is not None:
                    self.brokers[broker] = h
                    self._dead_handles.discard(broker)
        return self.brokers.get(broker)

    # ---------------------------------------------------------------- updates

    def not_leader(self, tp: TopicPartition) -> None:
        """A broker answered NotLeaderForPartition for ``tp``: refresh soon."""
        self.stale = True

    def failed(self, broker: int) -> None:
        """A call to ``broker`` failed (dead actor): forget its handle and refresh soon."""
        self._dead_handles.add(broker)
        self.stale = True

    def update(self, leaders: dict[TopicPartition, int]) -> None:
        """Take a leader map (a metadata answer)."""
        self.leaders.update(leaders)

    def maybe_refresh(self) -> None:
        """Start a background refresh if one is due and the back-off allows it."""
        if not self.stale or self._refreshing is not None:
            return
        if time.monotonic() - self._last_refresh < self.backoff_s:
            return
        self._refreshing = asyncio.ensure_future(self._refresh_task())

    async def refresh(self) -> bool:
        """Ask live brokers, one at a time, for the leader map; ``True`` if one answered."""
        self._last_refresh = time.monotonic()
        self.refreshes += 1
        ids = sorted(self.brokers)
        if not ids:
            return False
        self._rr += 1
        order = ids[self._rr % len(ids) :] + ids[: self._rr % len(ids)]
        alive = [b for b in order if b not in self._dead_handles]
        for b in [*alive, *(b for b in order if b in self._dead_handles)]:
            h = self.handle(b)
            if h is None:
                continue
            try:
                answer = await asyncio.wait_for(
                    _await_ref(h.metadata.remote()), METADATA_CALL_TIMEOUT_S
                )
            except Exception:
                self._dead_handles.add(b)
                continue
            self.update(dict(answer))
            self.stale = False
            return True
        return False

    async def _refresh_task(self) -> None:
        try:
            await self.refresh()
        finally:
            self._refreshing = None

    def by_leader(
        self, tps: Iterable[TopicPartition]
    ) -> tuple[dict[int, list[TopicPartition]], list[TopicPartition]]:
        """Group partitions by known leader; the second list has no known leader."""
        out: dict[int, list[TopicPartition]] = {}
        unknown: list[TopicPartition] = []
        for tp in tps:
            b = self.leader(tp)
            if b is None:
                unknown.append(tp)
            else:
                out.setdefault(b, []).append(tp)
        return out, unknown


async def _await_ref(ref: Any) -> Any:
    return await ref
