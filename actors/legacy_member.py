"""One emulated legacy consumer inside a consumer host: machine, session, fetch state.

The :class:`~emulator.legacy.consumer.LegacyConsumer` state machine decides;
this shell does its I/O: a ZooKeeper session of its own (so its ephemeral
nodes live and expire alone), the driver that performs its requests, and the
per-stream queues that the host's fetch and processing loop fills and drains.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from actors.member_shell import MemberShell
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


class LegacyMember(MemberShell):
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
        super().__init__(name, emit, now)
        self.machine = machine
        self.member_id = machine.consumer_id
        self.zk = zk
        self.driver = driver
        self.proxy = proxy
        # The application's commit pattern (``[group].manual_commit``), an emulator knob.
        self.manual_commit = "none"
        # ZooKeeper callbacks that arrived during a process pause, in order.
        self._held: list[Callable[[], None]] = []
        # The faults that hold its proxy in BLACKHOLE (pause, partition).
        self.proxy_holders: set[str] = set()

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
                self.start_fetchers(dict(out.positions))
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
        self.sync_positions()
        self.apply(self.machine.complete(self._now(), req.rid, result))

    def sync_positions(self) -> None:
        """Tell the machine where each stream's iterator is now (before any call into it).

        ``ConsumerIterator.next()`` moves the consumed offset per message as
        it is handed out; the host's loop processes whole batches, so the
        per-message position is computed from the time (:meth:`handed_out`)
        whenever the machine may commit.
        """
        for tp, off in self.handed_out(self._now()):
            self.machine.consumed(tp, off)

    def poll(self, now: float) -> None:
        """Let the machine see the time if it has a deadline (not while paused)."""
        if self.paused:
            return
        deadline = self.machine.next_deadline()
        if deadline is not None and now >= deadline:
            self.sync_positions()
            self.apply(self.machine.poll(now))

    def on_watch(self, source: str) -> None:
        """A ZooKeeper watch fired (delivered on the host's loop; held while paused)."""
        if self.paused:
            self._held.append(lambda: self.on_watch(source))
            return
        if self.alive:
            self._emit(EventKind.WATCH_FIRED, member=self.name, reason=source, zk_watches=1)
            self.sync_positions()
            self.apply(self.machine.watch_fired(self._now(), source))

    def on_state(self, state: str, session_id: str) -> None:
        """A session state change: recorded only (``handleStateChanged`` is a no-op)."""
        if self.paused:
            self._held.append(lambda: self.on_state(state, session_id))
            return
        if self.alive:
            self._emit(
                EventKind.ZK_SESSION_STATE, member=self.name, state=state, session_id=session_id
            )

    def on_new_session(self) -> None:
        """``handleNewSession`` after a real expiry (held while paused)."""
        if self.paused:
            self._held.append(self.on_new_session)
            return
        if self.alive:
            self._emit(EventKind.ZK_SESSION_EXPIRED, member=self.name)
            self.sync_positions()
            self.apply(self.machine.new_session(self._now()))

    def thaw(self, now: float) -> float:
        """End a pause, then hand over, in order, the ZooKeeper callbacks it held.

        A paused JVM runs no zkclient event thread: the watch events, state
        changes and the new session that came in meanwhile are seen after
        the wake, one after the other, by a consumer that until then acts on
        what it last knew (its fetchers keep running).
        """
        frozen = super().thaw(now)
        held, self._held = self._held, []
        for i, fn in enumerate(held):
            if self.paused:  # paused again by a callback: keep the rest, in order
                self._held = held[i:] + self._held
                break
            fn()
        return frozen

    # ------------------------------------------------------------ fetch hooks

    def on_batch_done(self, tp: TopicPartition, end: int) -> None:
        """Progress for ``commitOffsets``; the application's own commit, if it makes one.

        With ``[group].manual_commit`` (auto-commit off) the application calls
        ``commitOffsets()`` after each batch and waits for it (ZooKeeper writes
        are synchronous in 0.8; ``async`` is the same here).
        """
        self.machine.consumed(tp, end)
        if self.manual_commit == "none":
            return
        self.sync_positions()
        self.apply(self.machine.app_commit(self._now()))

    def app_blocked(self) -> bool:
        """The application waits while its ``commitOffsets()`` is in flight."""
        return self.machine.app_committing
