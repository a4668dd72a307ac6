"""Fetch sessions and the long poll (KIP-227's incremental fetch; ``DelayedFetch``).

Each consumer host keeps one fetch session per broker. A fetch that finds no
data stays *parked* in the session, as the broker holds a fetch request until
``fetch.min.bytes`` (1) is there or ``fetch.max.wait.ms`` runs out; the
host's next request carries only what changed (new fetches, withdrawn ones),
not every partition again. Data or a leader change on a partition makes its
parked fetches *ready*, and wakes the long poll of their sessions.

The long poll's wait itself is the shell's (it awaits a wake-up or the
timeout); :meth:`FetchSessions.next_deadline` and :meth:`FetchSessions.expired`
say when a waiting poll runs out, for a driver on a virtual clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from emulator.broker.messages import (
    SessionAnswer,
    SessionFetch,
    TopicPartition,
    WakeFetchSession,
)

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
            self.parked.setdefault(tp, {})[(session, slot)] = None
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
        waiting = self.parked.get(tp)
        if waiting is not None:
            waiting.pop((session, slot), None)
            if not waiting:
                del self.parked[tp]

    def _close(self, sess: FetchSession) -> None:
        for slot, entry in sess.parked.items():
            self._unpark(entry.tp, sess.key, slot)
        sess.parked.clear()
        sess.ready.clear()
        sess.closed = True
