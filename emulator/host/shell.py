"""The fetch-and-process half of every emulated consumer, whatever its protocol.

A member shell holds a consumer's streams (one per legacy consumer thread, one
for a modern consumer's poll loop), where each partition is fetched from, and
the batch the application is processing. The consumer host's loop asks every
shell what to fetch (:class:`FetchWant`), hands it the answers, and lets its
application loop advance; the protocol-specific subclass decides when fetching
starts and stops, and hears when a batch is done. Time is the emulated clock
the host injects (``now_ms``); a shell does no I/O.

The host's tick visits a shell only when it has something due (R9 of the
issue-18 design): after each visit the shell says when it next needs one
(:meth:`MemberShell.next_visit`), and anything from outside the tick that is
about to change it (an answer, a fetch, a fault) first calls
:meth:`MemberShell.touch`, so the host visits it at the next tick.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from emulator.events import EventKind

TopicPartition = tuple[str, int]


class EmitFn(Protocol):
    """Writes one event: its kind and its fields (the host's event writer)."""

    def __call__(self, kind: EventKind, /, **fields: object) -> None: ...


@dataclass
class Chunk:
    """A fetched batch ``[start, end)`` of one partition, queued for a stream."""

    tp: TopicPartition
    start: int
    end: int
    epoch: int


@dataclass
class InProgress:
    """The batch a stream's application loop is processing."""

    chunk: Chunk
    started_ms: float
    done_ms: float


@dataclass
class Stream:
    """One consumer thread (``KafkaStream``): a bounded queue and the app loop."""

    thread_id: str
    queue: deque[Chunk] = field(default_factory=deque)
    current: InProgress | None = None


@dataclass(frozen=True)
class FetchWant:
    """A partition whose stream has room for another chunk: fetch it.

    Attributes:
        tp: the partition.
        offset: where to fetch from (``None``: the reset policy decides).
        epoch: the position's epoch; the answer carries it back, so an answer
            for a position stopped or restarted meanwhile is dropped.
    """

    tp: TopicPartition
    offset: int | None
    epoch: int


@dataclass
class FetchPos:
    """Where the fetcher is for one partition."""

    thread_id: str
    offset: int | None
    inflight: bool = False
    epoch: int = 0  # which start of fetching this position belongs to


class MemberShell:
    """Streams, fetch positions and processing of one emulated consumer.

    Args:
        name: scenario name (``c-0``).
        emit: writes an event (kind, fields).
        now_ms: the emulated clock.
    """

    member_id: str = ""

    def __init__(self, name: str, emit: EmitFn, now_ms: Callable[[], float]) -> None:
        self.name = name
        self._emit = emit
        self._now_ms = now_ms
        self.streams: dict[str, Stream] = {}
        self.positions: dict[TopicPartition, FetchPos] = {}
        self.fetch_epoch = 0
        self.alive = True
        self.paused = False
        self.paused_at: float | None = None
        # No batch starts before this time (the end of the last pause): the
        # loop back-fills batches when it runs late, never across a pause.
        self.not_before = 0.0
        # The host's due-index: told (before the change) of anything from
        # outside the host's tick that changes this member. None: not in a host.
        self.on_touch: Callable[[MemberShell], None] | None = None
        # Faults (the consumer host sets them): a processing cost per message
        # that overrides the run's (``slow``), and fetches that cannot reach
        # any broker (a network partition from the brokers: :attr:`fetch_cut`).
        self.cost_override: float | None = None
        self._fetch_cut = False
        # Closing (:attr:`draining`): the application takes no new batch.
        self._draining = False
        self.processed = 0
        self.high_water: dict[TopicPartition, int] = {}
        # Positions with no fetch outstanding, in the order they became so:
        # the host's loop asks only these each tick, not every position.
        self._ready: dict[TopicPartition, None] = {}
        # Told (by stop_fetchers) of positions dropped while a fetch of theirs
        # was outstanding, so the host can withdraw it from the broker.
        self.on_unfetch: Callable[[MemberShell, list[TopicPartition]], None] | None = None

    # ------------------------------------------------------------ due-index

    def touch(self) -> None:
        """Something from outside the host's tick is about to change this member.

        The host visits it at its next tick (and brings what its idle
        application did at the ticks it skipped up to date first).
        """
        if self.on_touch is not None:
            self.on_touch(self)

    def next_visit(self, now_ms: float) -> float | None:
        """After the host's visit at ``now_ms``: when its tick must visit this member again.

        The earliest time at which :meth:`poll` or :meth:`process` would do
        anything (a batch in hand ends, a deadline); ``now_ms`` or earlier: at
        the next tick; ``None``: not until something touches it. Subclasses add
        their deadlines.
        """
        if not self.alive or self.paused:
            return None
        return self._streams_due(now_ms)

    def _streams_due(self, now_ms: float) -> float | None:
        """When :meth:`process` next has a batch to finish or to start."""
        best: float | None = None
        for s in self.streams.values():
            cur = s.current
            if cur is not None:
                if best is None or cur.done_ms < best:
                    best = cur.done_ms
            elif s.queue and not self._draining:
                return now_ms  # a batch waits (for a commitSync): look again at the next tick
        return best

    @property
    def draining(self) -> bool:
        """Closing: the application takes no new batch (it finishes the one it holds)."""
        return self._draining

    @draining.setter
    def draining(self, on: bool) -> None:
        self.touch()
        self._draining = on

    @property
    def fetch_cut(self) -> bool:
        """A network partition from the brokers: no fetch of it is sent or answered."""
        return self._fetch_cut

    @fetch_cut.setter
    def fetch_cut(self, on: bool) -> None:
        self.touch()
        self._fetch_cut = on

    # --------------------------------------------------------- protocol hooks

    def on_batch_done(self, tp: TopicPartition, end: int) -> None:
        """A batch of ``tp`` up to ``end`` was processed (the protocol hears of it)."""

    def on_poll(self) -> None:
        """The application calls ``poll()`` for its next batch (before one is handed out).

        A modern client runs its rebalance work there first; what that work
        stops fetching leaves the queues, so it is never handed out.
        """

    def on_batch_start(self, tp: TopicPartition, start: int, end: int) -> None:
        """The application took the batch ``[start, end)`` of ``tp`` (poll() returned it)."""

    def app_blocked(self) -> bool:
        """Whether the application waits on its client (a ``commitSync`` in flight)."""
        return False

    def in_hand(self) -> bool:
        """Whether the application still processes a batch."""
        return any(s.current is not None for s in self.streams.values())

    # ------------------------------------------------------- hand-out positions

    @staticmethod
    def _progress(cur: InProgress, now_ms: float) -> tuple[int, int, float]:
        """The batch in hand at ``now_ms``: ``(done, handed, per)``.

        ``done`` messages are fully processed; a per-message iterator has
        handed out ``handed`` = ``done`` plus the one in progress (at most the
        batch); ``per`` is the cost of one message.
        """
        n = cur.chunk.end - cur.chunk.start
        per = (cur.done_ms - cur.started_ms) / n if n else 0.0
        if per <= 0:
            return n, n, per
        done = max(0, min(n, int((now_ms - cur.started_ms) // per)))
        return done, min(n, done + 1), per

    def handed_out(self, now_ms: float) -> list[tuple[TopicPartition, int]]:
        """Per batch in hand, the position of a per-message iterator at ``now_ms``.

        Kafka 0.8's ``ConsumerIterator.next()`` moves a partition's consumed
        offset to ``offset + 1`` as it hands a message to the application,
        before the application processes it: the position is the message
        being processed plus one (nothing while the batch has not started).
        """
        out: list[tuple[TopicPartition, int]] = []
        for s in self.streams.values():
            cur = s.current
            if cur is None or now_ms < cur.started_ms:
                continue
            _done, handed, _per = self._progress(cur, now_ms)
            out.append((cur.chunk.tp, cur.chunk.start + handed))
        return out

    def abandon(self, now_ms: float, *, per_message: bool) -> None:
        """A crash: record what each batch in hand had processed and what it dropped.

        The messages fully processed by ``now_ms`` are a ``processed`` event (their
        effects happened); the rest of what the application had been handed
        (the message in progress for a per-message iterator, else the whole
        batch that ``poll()`` returned) is ``records_abandoned``: handed out,
        never processed. Whether that is a loss depends on whether the client
        had committed it (the checkers decide).
        """
        self.touch()
        for s in self.streams.values():
            cur = s.current
            if cur is None or now_ms < cur.started_ms:
                continue
            c = cur.chunk
            done, handed, per = self._progress(cur, now_ms)
            if not per_message:  # poll() handed out the whole batch
                handed = c.end - c.start
            if done > 0:
                self._batch_event(
                    EventKind.PROCESSED,
                    s.thread_id,
                    c.tp,
                    c.start,
                    c.start + done,
                    t_emu_ms=cur.started_ms + done * per,
                    duration_ms=done * per,
                    reason="crash",
                )
            if handed > done:
                self._batch_event(
                    EventKind.RECORDS_ABANDONED,
                    s.thread_id,
                    c.tp,
                    c.start + done,
                    c.start + handed,
                    reason="crash",
                )
            s.current = None

    def _batch_event(
        self,
        kind: EventKind,
        thread_id: str,
        tp: TopicPartition,
        start: int,
        end: int,
        **fields: object,
    ) -> None:
        """An event about the offsets ``[start, end)`` of ``tp`` in one of this member's streams."""
        self._emit(
            kind,
            member=self.name,
            topic=tp[0],
            partition=tp[1],
            offset_start=start,
            offset_end=end,
            thread_id=thread_id,
            member_id=self.member_id or None,
            **fields,
        )

    def on_idle(self) -> None:
        """The application loop has nothing in hand (modern consumers call poll())."""

    # ------------------------------------------------------------- fetch path

    def stop_fetchers(
        self, partitions: Iterable[TopicPartition] | None = None, *, cut: bool = True
    ) -> None:
        """Stop fetching ``partitions`` (all when ``None``) and drop their queued chunks.

        With ``cut`` (the legacy consumer's ``closeFetchers``, which clears the
        iterator's current chunk too) the batch in hand is cut after the
        message being processed; without it (a modern consumer revokes inside
        ``poll()``, between batches) the batch in hand completes.
        """
        self.fetch_epoch += 1
        stop = set(self.positions) if partitions is None else set(partitions)
        outstanding: list[TopicPartition] = []
        for tp in stop:
            pos = self.positions.pop(tp, None)
            self._ready.pop(tp, None)
            if pos is not None and pos.inflight:
                outstanding.append(tp)
        if outstanding and self.on_unfetch is not None:
            self.on_unfetch(self, outstanding)
        now = self._now_ms()
        for s in self.streams.values():
            kept = [c for c in s.queue if c.tp not in stop]
            s.queue.clear()
            s.queue.extend(kept)
            cur = s.current
            if cut and cur is not None and cur.chunk.tp in stop:
                # The iterator's current chunk is cleared: the message in hand
                # is the last one the application gets.
                _done, handed, per = self._progress(cur, now)
                cur.chunk.end = cur.chunk.start + handed
                cur.done_ms = cur.started_ms + handed * per

    def start_fetchers(self, positions: dict[TopicPartition, tuple[str, int | None]]) -> None:
        """Fetch these partitions, each for a stream, from an offset (``None``: reset policy)."""
        self.fetch_epoch += 1
        outstanding: list[TopicPartition] = []
        for tp, (thread, off) in positions.items():
            old = self.positions.get(tp)
            if old is not None and old.inflight:
                outstanding.append(tp)
            self.positions[tp] = FetchPos(thread, off, epoch=self.fetch_epoch)
            self._ready[tp] = None
            self.streams.setdefault(thread, Stream(thread))
        if outstanding and self.on_unfetch is not None:
            self.on_unfetch(self, outstanding)

    def fetch_requests(self, max_chunks: int) -> list[FetchWant]:
        """Partitions that want a fetch now (their stream's queue has room)."""
        if not self.alive or self.paused or self._fetch_cut or not self._ready:
            return []
        out: list[FetchWant] = []
        for tp in list(self._ready):
            pos = self.positions.get(tp)
            if pos is None or pos.inflight:
                del self._ready[tp]
                continue
            stream = self.streams.get(pos.thread_id)
            if stream is None or len(stream.queue) >= max_chunks:
                continue
            pos.inflight = True
            del self._ready[tp]
            out.append(FetchWant(tp, pos.offset, pos.epoch))
        return out

    def refetch(self, tp: TopicPartition, epoch: int) -> None:
        """The fetch of ``tp`` (at ``epoch``) came to nothing: ask again later."""
        self.touch()
        pos = self.positions.get(tp)
        if pos is not None and pos.epoch == epoch:
            pos.inflight = False
            self._ready[tp] = None

    def fetched(self, tp: TopicPartition, start: int, end: int, epoch: int) -> None:
        """A fetch answer: queue a chunk, advance the position."""
        self.touch()
        pos = self.positions.get(tp)
        if not self.alive or pos is None or epoch != pos.epoch:
            return  # stopped or restarted since: the answer is stale
        pos.inflight = False
        self._ready[tp] = None
        if start < 0:
            return
        pos.offset = end
        if end > start:
            # Not logged: PROCESSED carries what was done with it, and a fetch
            # event per tick would dominate the log of a large group.
            self.streams[pos.thread_id].queue.append(Chunk(tp, start, end, epoch))

    def process(self, now_ms: float, cost_ms: float) -> int:
        """Advance every stream's application loop to ``now_ms``; return messages done."""
        if not self.alive or self.paused:
            return 0
        if self.cost_override is not None:
            cost_ms = self.cost_override
        if not self.streams:
            # A member with nothing assigned still sits in poll().
            self.on_idle()
            return 0
        done = 0
        for s in self.streams.values():
            free_at = now_ms
            while True:
                cur = s.current
                if cur is not None:
                    if now_ms < cur.done_ms:
                        break
                    c = cur.chunk
                    if c.end > c.start:
                        self._batch_event(
                            EventKind.PROCESSED,
                            s.thread_id,
                            c.tp,
                            c.start,
                            c.end,
                            t_emu_ms=cur.done_ms,
                            duration_ms=cur.done_ms - cur.started_ms,
                        )
                        self.on_batch_done(c.tp, c.end)
                        done += c.end - c.start
                        if c.end > self.high_water.get(c.tp, 0):
                            self.high_water[c.tp] = c.end
                    free_at = cur.done_ms
                    s.current = None
                if self._draining or self.app_blocked():
                    break  # closing, or the application waits on its client (commitSync)
                if not s.queue:
                    if s.current is None:
                        self.on_idle()
                    break
                self.on_poll()
                if not s.queue or not self.alive:
                    break  # poll() revoked what was queued: nothing to hand out
                chunk = s.queue.popleft()
                start_ms = max(free_at, self.not_before)
                self.on_batch_start(chunk.tp, chunk.start, chunk.end)
                s.current = InProgress(
                    chunk, start_ms, start_ms + (chunk.end - chunk.start) * cost_ms
                )
        self.processed += done
        return done

    # ---------------------------------------------------------------- pause

    def freeze(self, now_ms: float) -> None:
        """A process pause begins: nothing in this member advances until :meth:`thaw`.

        The host's loop stops polling, fetching and processing for it (every
        path checks :attr:`paused`); the batch in hand keeps its remaining time.
        """
        if self.paused:
            return
        self.touch()
        self.paused = True
        self.paused_at = now_ms

    def thaw(self, now_ms: float) -> float:
        """The pause ends: the batch in hand resumes; return the pause's length (ms).

        Each stream's batch in progress ends as much later as the pause lasted,
        so its ``duration_ms`` includes the pause, as a wall-clock measurement
        of that batch would.
        """
        if not self.paused:
            return 0.0
        self.touch()
        paused_at = self.paused_at if self.paused_at is not None else now_ms
        frozen = max(0.0, now_ms - paused_at)
        for s in self.streams.values():
            # A batch that was done before the pause (the loop had not yet seen
            # it, ticks are discrete) keeps its end; one in progress is shifted.
            if s.current is not None and s.current.done_ms > paused_at:
                s.current.done_ms += frozen
        self.paused = False
        self.paused_at = None
        self.not_before = now_ms
        return frozen

    # ------------------------------------------------------------- lifecycle

    def kill(self) -> None:
        """Stop everything this member does, at once (a crash)."""
        self.touch()
        self.alive = False
        self.positions.clear()
        self._ready.clear()
