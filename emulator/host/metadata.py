"""Where each partition's leader is, as a client learns it: the metadata cache's rules.

A Kafka client keeps a metadata cache (partition -> leader) and refreshes it
from any broker when a request fails with NotLeaderForPartition or a broker
does not answer (K@0.8.2.2 ``ClientUtils.fetchTopicMetadata`` in the old
producer and ``ConsumerFetcherManager.LeaderFinderThread`` in the 0.8
consumer; ``Metadata.requestUpdate`` in the modern clients). The refresh is
rate-limited by ``refresh.leader.backoff.ms`` (200 ms, 0.8.2 consumer; the
modern clients' ``retry.backoff.ms`` is 100 ms).

:class:`LeaderMap` holds the map and decides when a refresh is due and which
brokers it asks, in which order; the actors' :class:`actors.metadata.LeaderCache`
adds the Ray calls. Time here is wall seconds from a monotonic clock the
caller passes in (the rate limit is an emulator bound on real calls).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

TopicPartition = tuple[str, int]


class LeaderMap:
    """A client's partition -> leader map and its refresh schedule.

    Args:
        leaders: the leaders it starts with.
        fallback: a map consulted (live, not copied) for partitions it does
            not know, e.g. partitions added since, whose leaders the owner
            put there.
        backoff_s: the least wall time between two refreshes.
    """

    def __init__(
        self,
        leaders: Mapping[TopicPartition, int],
        fallback: Mapping[TopicPartition, int],
        backoff_s: float,
    ) -> None:
        self.leaders: dict[TopicPartition, int] = dict(leaders)
        self._fallback = fallback
        self.backoff_s = backoff_s
        self.stale = False
        self.refreshes = 0
        # never refreshed: the first refresh is due at once, whatever the clock's origin
        # (a virtual clock starts at 0, the machine's monotonic clock far above)
        self._last_refresh = float("-inf")
        self._dead: set[int] = set()
        self._rr = 0

    # ------------------------------------------------------------------ reads

    def leader(self, tp: TopicPartition) -> int | None:
        """The leader of ``tp`` as last known; ``None`` (and a refresh is due) if unknown."""
        b = self.leaders.get(tp)
        if b is None:  # partitions added since: the owner may have put them in the fallback
            b = self._fallback.get(tp)
        if b is None or b < 0:
            self.stale = True
            return None
        return b

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

    def is_dead(self, broker: int) -> bool:
        """Whether a call to ``broker`` failed since it last answered a refresh."""
        return broker in self._dead

    # ---------------------------------------------------------------- updates

    def not_leader(self, tp: TopicPartition) -> None:
        """A broker answered NotLeaderForPartition for ``tp``: refresh soon."""
        self.stale = True

    def failed(self, broker: int) -> None:
        """A call to ``broker`` failed (dead actor): refresh soon, ask it last."""
        self._dead.add(broker)
        self.stale = True

    def unanswered(self, broker: int) -> None:
        """``broker`` did not answer a refresh: later refreshes ask it last."""
        self._dead.add(broker)

    def revived(self, broker: int) -> None:
        """``broker`` has a live actor again."""
        self._dead.discard(broker)

    def update(self, leaders: Mapping[TopicPartition, int]) -> None:
        """Take a leader map (a metadata answer)."""
        self.leaders.update(leaders)

    # ---------------------------------------------------------------- refresh

    def refresh_due(self, now_s: float) -> bool:
        """Whether a refresh should start at ``now_s`` (stale, and the back-off allows it)."""
        return self.stale and now_s - self._last_refresh >= self.backoff_s

    def begin_refresh(self, now_s: float, brokers: Iterable[int]) -> list[int]:
        """A refresh starts at ``now_s``: the brokers to ask, one at a time, in this order.

        Round robin over the brokers, so that successive refreshes start at
        different ones; the brokers whose calls failed come last.
        """
        self._last_refresh = now_s
        self.refreshes += 1
        ids = sorted(brokers)
        if not ids:
            return []
        self._rr += 1
        k = self._rr % len(ids)
        order = ids[k:] + ids[:k]
        return [b for b in order if b not in self._dead] + [b for b in order if b in self._dead]

    def answered(self, leaders: Mapping[TopicPartition, int]) -> None:
        """A broker answered the refresh with its leader map."""
        self.update(leaders)
        self.stale = False
