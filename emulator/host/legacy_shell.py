"""One emulated 0.8 consumer inside a consumer host: its machine's effects and fetch state.

The :class:`~emulator.legacy.consumer.LegacyConsumer` state machine decides;
this shell carries out what it returns: events, stopping and starting the
fetchers, and its ZooKeeper requests, which it hands to an injected
``perform`` (the actor's ZooKeeper driver runs them and brings each result back
through :meth:`LegacyShell.complete`). The ZooKeeper callbacks (watches, state
changes, a new session) come in through :meth:`~LegacyShell.on_watch`,
:meth:`~LegacyShell.on_state` and :meth:`~LegacyShell.on_new_session`, and are
held, in order, while the process is paused.

Its session may run through a fault proxy (:class:`SessionLink`): a pause or a
network partition cuts it while any of them holds it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from emulator.events import EventKind
from emulator.host.shell import EmitFn, MemberShell
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


class SessionLink(Protocol):
    """The fault proxy a legacy member's ZooKeeper session goes through."""

    def blackhole(self, on: bool) -> None:
        """Drop every byte of the session (``on``) or let it pass again."""
        ...


class LegacyShell(MemberShell):
    """The shell around one 0.8 consumer, without its ZooKeeper I/O.

    Args:
        name: scenario name (``c-0``).
        machine: the state machine.
        emit: writes an event (kind, fields).
        now_ms: the emulated clock.
        perform: runs one ZooKeeper request; its result comes back through
            :meth:`complete`.
        link: the fault proxy its session goes through, if any.
    """

    def __init__(
        self,
        name: str,
        machine: LegacyConsumer,
        emit: EmitFn,
        now_ms: Callable[[], float],
        perform: Callable[[Request], None],
        link: SessionLink | None = None,
    ) -> None:
        super().__init__(name, emit, now_ms)
        self.machine = machine
        self.member_id = machine.consumer_id
        self._perform = perform
        self.link = link
        # The application's commit pattern (``[group].manual_commit``), an emulator knob.
        self.manual_commit = "none"
        # ZooKeeper callbacks that arrived during a process pause, in order.
        self._held: list[Callable[[], None]] = []
        # The faults that hold its session cut (pause, partition).
        self.proxy_holders: set[str] = set()

    # ------------------------------------------------------------ machine I/O

    def apply(self, outputs: Sequence[Output]) -> None:
        """Carry out the machine's requests and effects."""
        self.touch()
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
                self._perform(out)

    def complete(self, req: Request, result: IoResult) -> None:
        """The result of a request :meth:`apply` handed to ``perform``.

        The actor waits out a pause before it calls this: a paused JVM sees
        no result.
        """
        if not self.alive or req.rid not in self.machine.outstanding:
            return  # abandoned (shutdown) or superseded: nobody waits for it
        self.touch()
        self.sync_positions()
        self.apply(self.machine.complete(self._now_ms(), req.rid, result))

    def sync_positions(self) -> None:
        """Tell the machine where each stream's iterator is now (before any call into it).

        ``ConsumerIterator.next()`` moves the consumed offset per message as
        it is handed out; the host's loop processes whole batches, so the
        per-message position is computed from the time (:meth:`handed_out`)
        whenever the machine may commit.
        """
        for tp, off in self.handed_out(self._now_ms()):
            self.machine.consumed(tp, off)

    def poll(self, now_ms: float) -> None:
        """Let the machine see the time if it has a deadline (not while paused)."""
        if self.paused:
            return
        deadline = self.machine.next_deadline()
        if deadline is not None and now_ms >= deadline:
            self.sync_positions()
            self.apply(self.machine.poll(now_ms))

    def next_visit(self, now_ms: float) -> float | None:
        """When the host must visit this member again: its machine's deadline or a batch's end."""
        if self.paused:
            return None
        best = self.machine.next_deadline()  # poll() reads it even after a crash
        if self.alive:
            batch = self._streams_due(now_ms)
            if batch is not None and (best is None or batch < best):
                best = batch
        return best

    def on_watch(self, source: str) -> None:
        """A ZooKeeper watch fired (delivered on the host's loop; held while paused)."""
        self.touch()
        if self.paused:
            self._held.append(lambda: self.on_watch(source))
            return
        if self.alive:
            self._emit(EventKind.WATCH_FIRED, member=self.name, reason=source, zk_watches=1)
            self.sync_positions()
            self.apply(self.machine.watch_fired(self._now_ms(), source))

    def on_state(self, state: str, session_id: str) -> None:
        """A session state change: recorded only (``handleStateChanged`` is a no-op)."""
        self.touch()
        if self.paused:
            self._held.append(lambda: self.on_state(state, session_id))
            return
        if self.alive:
            self._emit(
                EventKind.ZK_SESSION_STATE, member=self.name, state=state, session_id=session_id
            )

    def on_new_session(self) -> None:
        """``handleNewSession`` after a real expiry (held while paused)."""
        self.touch()
        if self.paused:
            self._held.append(self.on_new_session)
            return
        if self.alive:
            self._emit(EventKind.ZK_SESSION_EXPIRED, member=self.name)
            self.sync_positions()
            self.apply(self.machine.new_session(self._now_ms()))

    def thaw(self, now_ms: float) -> float:
        """End a pause, then hand over, in order, the ZooKeeper callbacks it held.

        A paused JVM runs no zkclient event thread: the watch events, state
        changes and the new session that came in meanwhile are seen after
        the wake, one after the other, by a consumer that until then acts on
        what it last knew (its fetchers keep running).
        """
        frozen = super().thaw(now_ms)
        held, self._held = self._held, []
        for i, fn in enumerate(held):
            if self.paused:  # paused again by a callback: keep the rest, in order
                self._held = held[i:] + self._held
                break
            fn()
        return frozen

    # ------------------------------------------------------------ session cut

    def hold_session(self, why: str) -> bool:
        """Cut its ZooKeeper session for ``why`` (a fault); False without a proxy."""
        if self.link is None:
            return False
        self.proxy_holders.add(why)
        self.link.blackhole(True)
        return True

    def release_session(self, why: str) -> None:
        """``why`` no longer cuts the session; it passes again once nothing does."""
        if self.link is None:
            return
        self.proxy_holders.discard(why)
        if not self.proxy_holders and self.alive:
            self.link.blackhole(False)

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
        self.apply(self.machine.app_commit(self._now_ms()))

    def app_blocked(self) -> bool:
        """The application waits while its ``commitOffsets()`` is in flight."""
        return self.machine.app_committing
