"""One emulated legacy consumer inside a consumer host: machine, session, fetch state.

The :class:`~emulator.legacy.consumer.LegacyConsumer` state machine decides;
this shell does its I/O: a ZooKeeper session of its own (so its ephemeral
nodes live and expire alone), the driver that performs its requests, and the
per-stream queues that the host's fetch and processing loop fills and drains.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from emulator.events import EventKind
from emulator.legacy.consumer import LegacyConsumer
from emulator.legacy.messages import (
    Emit,
    IoResult,
    Output,
    Request,
    Sleep,
    StartFetchers,
    StopFetchers,
    TopicPartition,
)


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


@dataclass
class FetchPos:
    """Where the fetcher is for one partition."""

    thread_id: str
    offset: int | None
    inflight: bool = False


class LegacyMember:
    """The I/O shell around one legacy consumer.

    Args:
        name: scenario name (``c-0``).
        machine: the state machine.
        zk: a :class:`zk_registry.client.ZkClient` for this consumer alone.
        driver: a :class:`zk_registry.legacy_driver.LegacyZkDriver` on ``zk``.
        emit: writes an event (kind, fields).
        now: the emulated clock.
        proxy: the fault proxy its session goes through, if any.
    """

    def __init__(
        self,
        name: str,
        machine: LegacyConsumer,
        zk: Any,
        driver: Any,
        emit: Callable[..., None],
        now: Callable[[], float],
        proxy: Any = None,
    ) -> None:
        self.name = name
        self.machine = machine
        self.zk = zk
        self.driver = driver
        self.proxy = proxy
        self._emit = emit
        self._now = now
        self.streams: dict[str, Stream] = {}
        self.positions: dict[TopicPartition, FetchPos] = {}
        self.fetch_epoch = 0
        self.alive = True
        self.paused = False
        self.processed = 0
        self.high_water: dict[TopicPartition, int] = {}
        self.tasks: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------ machine I/O

    def apply(self, outputs: list[Output]) -> None:
        """Carry out the machine's requests and effects."""
        for out in outputs:
            if not self.alive:
                return
            if isinstance(out, Emit):
                self._emit(out.kind, **dict(out.fields))
            elif isinstance(out, StopFetchers):
                self.stop_fetchers()
            elif isinstance(out, StartFetchers):
                self.start_fetchers(out)
            elif isinstance(out, Sleep):
                continue  # woken by poll() at next_deadline()
            elif isinstance(out, Request):
                task = asyncio.ensure_future(self._perform(out))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)

    async def _perform(self, req: Request) -> None:
        try:
            result: IoResult = await self.driver.execute(req)
        except Exception as exc:  # the driver turns ZooKeeper errors into results
            result = IoResult(error=type(exc).__name__)
        while self.paused and self.alive:
            await asyncio.sleep(0.01)
        if not self.alive or req.rid not in self.machine.outstanding:
            return  # abandoned (shutdown) or superseded: nobody waits for it
        self.apply(self.machine.complete(self._now(), req.rid, result))

    def poll(self, now: float) -> None:
        """Let the machine see the time if it has a deadline."""
        deadline = self.machine.next_deadline()
        if deadline is not None and now >= deadline:
            self.apply(self.machine.poll(now))

    def on_watch(self, source: str) -> None:
        """A ZooKeeper watch fired (delivered on the host's loop)."""
        if self.alive and not self.paused:
            self._emit(EventKind.WATCH_FIRED, member=self.name, reason=source, zk_watches=1)
            self.apply(self.machine.watch_fired(self._now(), source))

    def on_state(self, state: str, session_id: str) -> None:
        """A session state change: recorded only (``handleStateChanged`` is a no-op)."""
        if self.alive:
            self._emit(
                EventKind.ZK_SESSION_STATE, member=self.name, state=state, session_id=session_id
            )

    def on_new_session(self) -> None:
        """``handleNewSession`` after a real expiry."""
        if self.alive:
            self._emit(EventKind.ZK_SESSION_EXPIRED, member=self.name)
            self.apply(self.machine.new_session(self._now()))

    # ------------------------------------------------------------- fetch path

    def stop_fetchers(self) -> None:
        """``closeFetchers``: drop queued chunks; the message in hand finishes.

        Kafka clears the queues and the iterator's current chunk; only the
        message the application holds completes. The in-progress batch is cut
        after that message.
        """
        self.fetch_epoch += 1
        self.positions.clear()
        now = self._now()
        for s in self.streams.values():
            s.queue.clear()
            cur = s.current
            if cur is not None:
                n = cur.chunk.end - cur.chunk.start
                per = (cur.done_ms - cur.started_ms) / n if n else 0.0
                done = n if per <= 0 else min(n, int((now - cur.started_ms) // per) + 1)
                cur.chunk.end = cur.chunk.start + done
                cur.done_ms = cur.started_ms + done * per

    def start_fetchers(self, eff: StartFetchers) -> None:
        """``updateFetcher``: fetch the new partitions from their offsets."""
        self.fetch_epoch += 1
        self.positions = {tp: FetchPos(thread, off) for tp, (thread, off) in eff.positions.items()}
        for thread in {t for t, _ in eff.positions.values()}:
            self.streams.setdefault(thread, Stream(thread))

    def fetch_requests(self, max_chunks: int) -> list[tuple[TopicPartition, int | None]]:
        """Partitions that want a fetch now (their stream's queue has room)."""
        if not self.alive or self.paused:
            return []
        out: list[tuple[TopicPartition, int | None]] = []
        for tp, pos in self.positions.items():
            if pos.inflight:
                continue
            stream = self.streams.get(pos.thread_id)
            if stream is None or len(stream.queue) >= max_chunks:
                continue
            pos.inflight = True
            out.append((tp, pos.offset))
        return out

    def fetched(self, tp: TopicPartition, start: int, end: int, epoch: int) -> None:
        """A fetch answer: queue a chunk, advance the position."""
        pos = self.positions.get(tp)
        if not self.alive or epoch != self.fetch_epoch or pos is None:
            return
        pos.inflight = False
        if start < 0:
            return
        pos.offset = end
        if end > start:
            # Not logged: PROCESSED carries what was done with it, and a fetch
            # event per tick would dominate the log of a large group.
            self.streams[pos.thread_id].queue.append(Chunk(tp, start, end, epoch))

    def process(self, now: float, cost_ms: float) -> int:
        """Advance every stream's application loop to ``now``; return messages done."""
        if not self.alive or self.paused:
            return 0
        done = 0
        for s in self.streams.values():
            free_at = now
            while True:
                cur = s.current
                if cur is not None:
                    if now < cur.done_ms:
                        break
                    c = cur.chunk
                    if c.end > c.start:
                        self._emit(
                            EventKind.PROCESSED,
                            member=self.name,
                            topic=c.tp[0],
                            partition=c.tp[1],
                            offset_start=c.start,
                            offset_end=c.end,
                            thread_id=s.thread_id,
                            t_emu_ms=cur.done_ms,
                            member_id=self.machine.consumer_id,
                        )
                        self.machine.consumed(c.tp, c.end)
                        done += c.end - c.start
                        if c.end > self.high_water.get(c.tp, 0):
                            self.high_water[c.tp] = c.end
                    free_at = cur.done_ms
                    s.current = None
                if not s.queue:
                    break
                chunk = s.queue.popleft()
                start_ms = free_at
                s.current = InProgress(
                    chunk, start_ms, start_ms + (chunk.end - chunk.start) * cost_ms
                )
        self.processed += done
        return done

    # ------------------------------------------------------------- lifecycle

    def kill(self) -> None:
        """Stop everything this member does, at once (a crash)."""
        self.alive = False
        for t in list(self.tasks):
            t.cancel()
        with contextlib.suppress(Exception):
            self.positions.clear()
