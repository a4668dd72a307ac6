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
        #: Topics the last answer lacked that were known before (deleted ones):
        #: the fallback is not read for them.
        self.absent: set[str] = set()
        # Topics asked about while the last answer lacked them: the next
        # refresh names them (a metadata request by topic, which may create them).
        self._wanted: set[str] = set()
        # The partition count of each topic of the last answer (None: no answer yet).
        self._present: dict[str, int] | None = None
        self._fallback_topics = {t for t, _ in fallback}

    # ------------------------------------------------------------------ reads

    def leader(self, tp: TopicPartition) -> int | None:
        """The leader of ``tp`` as last known; ``None`` (and a refresh is due) if unknown.

        A partition of a topic the last answer lacked is also remembered as
        *wanted*: the next refresh asks for its topic by name (:meth:`take_wanted`).
        """
        b = self.leaders.get(tp)
        if b is None and tp[0] not in self.absent:
            # partitions added since: the owner may have put them in the fallback
            b = self._fallback.get(tp)
        if b is None or b < 0:
            self.stale = True
            if self._present is None or tp[0] not in self._present:
                self._wanted.add(tp[0])
            return None
        return b

    def topic_partitions(self, topic: str) -> int | None:
        """How many partitions ``topic`` has as last answered; ``None``: not in the answer.

        Before any answer, the fallback's count (the run's starting metadata).
        """
        if self._present is not None:
            return self._present.get(topic)
        count = max((p + 1 for t, p in self._fallback if t == topic), default=0)
        return count or None

    def take_wanted(self) -> list[str]:
        """The topics to name in the next metadata request (sorted); forgotten once taken."""
        wanted, self._wanted = sorted(self._wanted), set()
        return wanted

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
        """A broker answered the refresh with its leader map (its whole metadata cache).

        The answer replaces the map: a partition it lacks is unknown again (a
        deleted topic's, or a topic re-created with fewer partitions). A topic
        known before (here or in the fallback) that it lacks is
        :attr:`absent` until an answer has it again.
        """
        before = set(self._present) if self._present is not None else {t for t, _ in self.leaders}
        present: dict[str, int] = {}
        for t, p in leaders:
            if p >= present.get(t, 0):
                present[t] = p + 1
        self.absent = (self.absent | before | self._fallback_topics) - present.keys()
        self._present = present
        self.leaders = dict(leaders)
        self.stale = False
