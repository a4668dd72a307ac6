"""Fetch sessions, replica fetches and the long poll (``DelayedFetch`` in the fetch purgatory).

Consumer fetches (KIP-227's incremental fetch): each consumer host keeps one
fetch session per broker. A fetch that finds no data stays *parked* in the
session, as the broker holds a fetch request until ``fetch.min.bytes`` (1) is
there or ``fetch.max.wait.ms`` runs out; the host's next request carries only
what changed (new fetches, withdrawn ones), not every partition again. Data or
a leader change on a partition makes its parked fetches *ready*, and wakes the
long poll of their sessions.

Replica fetches (:class:`ReplicaFetchPurgatory`): a follower's fetcher sends
its fetch with ``maxWait = replica.fetch.wait.max.ms`` (500) and ``minBytes =
replica.fetch.min.bytes`` (1) (K@0.8.2.2 ``server/ReplicaFetcherThread.scala``,
``AbstractFetcherThread.scala``; K@3.7 ``RemoteLeaderEndPoint.scala``
``maxWait``/``minBytes``). The leader answers at once when some partition has
data beyond the follower's offset, or an error (``ReplicaManager.fetchMessages``:
``bytesReadable >= minBytes || errorReadingData``); otherwise it parks the
fetch, keyed by its partitions, until one of them is appended to or changes
leader, or ``maxWait`` runs out. A follower's fetch reads up to the LEO (not
the HW), so an HW move alone does not complete it (K@0.8.2.2
``DelayedFetch.isSatisfied``: ``endOffset = logEndOffset`` for a follower;
K@3.7 ``DelayedFetch.tryComplete``, ``FetchIsolation.LOG_END``).

The long poll's wait itself is the shell's (it awaits a wake-up or the
timeout); :meth:`FetchSessions.next_deadline`, :meth:`FetchSessions.expired`
and their :class:`ReplicaFetchPurgatory` namesakes say when a waiting poll runs
out, for a driver on a virtual clock.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple, TypeVar

from emulator.broker.messages import (
    SessionAnswer,
    SessionFetch,
    TopicPartition,
    WakeFetchSession,
    WakeReplicaFetch,
)

_K = TypeVar("_K", bound=Hashable)

#: Serves one partition's fetch: ``(tp, offset, reset, max) -> (start, end)``;
#: ``start < 0``: not the leader.
Serve = Callable[[TopicPartition, int | None, str, int], tuple[int, int]]


class ParkedFetch(NamedTuple):
    """A fetch waiting for data; ``offset`` is resolved (never None, never out of range)."""

    tp: TopicPartition
    offset: int
    reset: str
    max_messages: int


@dataclass(eq=False)
class FetchSession:
    """One consumer host's fetch session on this broker.

    Attributes:
        key: the host's session key.
        parked: slot -> its parked fetch.
        ready: the parked slots that may have an answer (data, or no longer
            the leader).
        wait_until_ms: while a long poll waits, when it runs out (emulated ms).
        closed: the session was dropped (the host opened a new one).
    """

    key: str
    parked: dict[int, ParkedFetch] = field(default_factory=dict)
    ready: set[int] = field(default_factory=set)
    wait_until_ms: float | None = None
    closed: bool = False


@dataclass(frozen=True)
class FetchStep:
    """The first half of a session fetch: the answers at once, and whether to wait.

    Attributes:
        session: the session (pass it to :meth:`FetchSessions.collect`).
        answers: the fetches answered at once (data, or not the leader).
        wait_ms: wait this long (emulated ms) for a wake-up before
            collecting; None: collect now.
        replaced: the session that ``new_session`` closed, whose waiting
            poll (if any) must end now.
    """

    session: FetchSession
    answers: list[SessionAnswer]
    wait_ms: float | None
    replaced: FetchSession | None


class FetchSessions:
    """The fetch sessions of one broker, and the index of parked fetches by partition.

    Args:
        serve: answers one partition's fetch from this broker's replicas.
    """

    def __init__(self, serve: Serve) -> None:
        self._serve = serve
        self.sessions: dict[str, FetchSession] = {}
        # Partition -> the (session, slot) of the fetches parked on it.
        self.parked: dict[TopicPartition, dict[tuple[str, int], None]] = {}

    def begin(
        self,
        now_ms: float,
        session: str,
        new_session: bool,
        adds: Iterable[SessionFetch],
        withdrawn: Iterable[int],
        max_wait_ms: float,
    ) -> FetchStep:
        """A host's incremental fetch: withdraw, add, answer what has data, park the rest.

        Args:
            now_ms: the emulated time.
            session: the host's session key; ``new_session`` drops what the
                session held before (the host lost track of it).
            adds: new fetches.
            withdrawn: slots whose fetch the host no longer wants.
            max_wait_ms: ``fetch.max.wait.ms`` (``fetch.wait.max.ms`` in 0.8):
                how long the answer may wait for data when there is none.

        Returns:
            The answers at once, and whether the call waits: only when nothing
            was answered, nothing is ready and something is parked.
        """
        sess = self.sessions.get(session)
        replaced = None
        if sess is None or new_session:
            if sess is not None:
                self._close(sess)
                replaced = sess
            sess = self.sessions[session] = FetchSession(session)
        for slot in withdrawn:
            sess.ready.discard(slot)
            entry = sess.parked.pop(slot, None)
            if entry is not None:
                self._unpark(entry.tp, session, slot)
        out: list[SessionAnswer] = []
        for slot, topic, partition, offset, reset, max_n in adds:
            tp = (topic, partition)
            start, end = self._serve(tp, offset, reset, max_n)
            if start < 0 or end > start:
                out.append(SessionAnswer(slot, start, end))
                continue
            sess.parked[slot] = ParkedFetch(tp, start, reset, max_n)
            _watch(self.parked, tp, (session, slot))
        wait = not out and not sess.ready and bool(sess.parked) and max_wait_ms > 0
        sess.wait_until_ms = now_ms + max_wait_ms if wait else None
        return FetchStep(sess, out, max_wait_ms if wait else None, replaced)

    def collect(self, sess: FetchSession) -> list[SessionAnswer]:
        """The second half: answer the ready fetches that now have something.

        A ready fetch that still finds nothing stays parked.
        """
        sess.wait_until_ms = None
        out: list[SessionAnswer] = []
        if sess.ready:
            ready, sess.ready = sess.ready, set()
            for slot in ready:
                entry = sess.parked.get(slot)
                if entry is None:
                    continue
                start, end = self._serve(entry.tp, entry.offset, entry.reset, entry.max_messages)
                if start >= 0 and end == start:
                    continue  # woken but still nothing there: stays parked
                del sess.parked[slot]
                self._unpark(entry.tp, sess.key, slot)
                out.append(SessionAnswer(slot, start, end))
        return out

    def wake(self, tp: TopicPartition) -> list[WakeFetchSession]:
        """Data (or a leadership change) on ``tp``: its parked fetches may be answered."""
        waiting = self.parked.get(tp)
        if not waiting:
            return []
        woken: dict[str, None] = {}
        for session, slot in waiting:
            sess = self.sessions.get(session)
            if sess is not None:
                sess.ready.add(slot)
                woken[session] = None
        return [WakeFetchSession(s) for s in woken]

    def next_deadline(self) -> float | None:
        """When the first waiting long poll runs out (emulated ms), if any waits."""
        return min(
            (s.wait_until_ms for s in self.sessions.values() if s.wait_until_ms is not None),
            default=None,
        )

    def expired(self, now_ms: float) -> list[WakeFetchSession]:
        """The waiting long polls that ran out by ``now_ms`` (``fetch.max.wait.ms``)."""
        return [
            WakeFetchSession(s.key)
            for s in self.sessions.values()
            if s.wait_until_ms is not None and s.wait_until_ms <= now_ms
        ]

    def _unpark(self, tp: TopicPartition, session: str, slot: int) -> None:
        _unwatch(self.parked, tp, (session, slot))

    def _close(self, sess: FetchSession) -> None:
        for slot, entry in sess.parked.items():
            self._unpark(entry.tp, sess.key, slot)
        sess.parked.clear()
        sess.ready.clear()
        sess.closed = True


# ------------------------------------------------------------ the purgatory's index


def _watch(index: dict[TopicPartition, dict[_K, None]], tp: TopicPartition, key: _K) -> None:
    """Park ``key`` on ``tp`` in a partition -> parked keys index (insertion order kept)."""
    index.setdefault(tp, {})[key] = None


def _unwatch(index: dict[TopicPartition, dict[_K, None]], tp: TopicPartition, key: _K) -> None:
    """Unpark ``key`` from ``tp``; a partition with nothing parked leaves the index."""
    waiting = index.get(tp)
    if waiting is not None:
        waiting.pop(key, None)
        if not waiting:
            del index[tp]


# ------------------------------------------------------------------ replica fetches


@dataclass(eq=False)
class ReplicaWait:
    """A follower's replica fetch parked at the leader (a ``DelayedFetch`` from a follower).

    Attributes:
        key: its id on this broker (what :class:`~emulator.broker.messages.WakeReplicaFetch`
            names).
        follower: the follower's broker id.
        fetches: partition -> the follower's fetch offset (its LEO when it sent the fetch).
        wait_until_ms: when ``replica.fetch.wait.max.ms`` runs out (emulated ms).
        ready: something it fetches was appended to or changed leader: answer it now.
    """

    key: int
    follower: int
    fetches: Mapping[TopicPartition, int]
    wait_until_ms: float
    ready: bool = False


class ReplicaFetchPurgatory:
    """The followers' fetches parked on one leader, indexed by partition.

    Each parked fetch is its own entry (as each ``DelayedFetch`` in Kafka's
    purgatory): a follower whose call timed out and who fetches again has two,
    each answered on its own.
    """

    def __init__(self) -> None:
        self.waits: dict[int, ReplicaWait] = {}
        #: Partition -> the keys of the fetches parked on it.
        self.parked: dict[TopicPartition, dict[int, None]] = {}
        self._next_key = 0

    def park(
        self,
        now_ms: float,
        follower: int,
        fetches: Mapping[TopicPartition, int],
        max_wait_ms: float,
    ) -> ReplicaWait:
        """Hold a follower's fetch that found nothing until data, a leader change or the timeout."""
        self._next_key += 1
        wait = ReplicaWait(self._next_key, follower, fetches, now_ms + max_wait_ms)
        self.waits[wait.key] = wait
        parked = self.parked
        key = wait.key
        for tp in fetches:
            _watch(parked, tp, key)
        return wait

    def wake(self, tp: TopicPartition) -> list[WakeReplicaFetch]:
        """``tp`` was appended to or changed leader: its parked fetches can be answered.

        Each woken fetch leaves the index (it is answered once, with what there
        is when its shell collects it).
        """
        waiting = self.parked.get(tp)
        if not waiting:
            return []
        out: list[WakeReplicaFetch] = []
        for key in list(waiting):
            wait = self.waits.get(key)
            if wait is None or wait.ready:
                continue
            wait.ready = True
            self._unindex(wait)
            out.append(WakeReplicaFetch(key))
        return out

    def done(self, wait: ReplicaWait) -> None:
        """The shell answers ``wait`` (woken, timed out, or the broker stops): forget it."""
        if self.waits.pop(wait.key, None) is not None and not wait.ready:
            self._unindex(wait)

    def next_deadline(self) -> float | None:
        """When the first parked fetch runs out (emulated ms), if any is parked."""
        return min((w.wait_until_ms for w in self.waits.values() if not w.ready), default=None)

    def expired(self, now_ms: float) -> list[WakeReplicaFetch]:
        """The parked fetches whose ``replica.fetch.wait.max.ms`` ran out by ``now_ms``."""
        return [
            WakeReplicaFetch(w.key)
            for w in self.waits.values()
            if not w.ready and w.wait_until_ms <= now_ms
        ]

    def _unindex(self, wait: ReplicaWait) -> None:
        parked = self.parked
        key = wait.key
        for tp in wait.fetches:
            _unwatch(parked, tp, key)
