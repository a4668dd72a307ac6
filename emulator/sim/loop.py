"""``SimEventLoop``: an asyncio event loop on virtual, integer-nanosecond time.

The sim engine runs every actor of a scenario on one loop (design §0, §4.1). The
loop is an :class:`asyncio.BaseEventLoop` subclass, so ``asyncio.sleep``,
``wait_for``, ``timeout``, ``Queue``, ``Event``, ``Semaphore``, ``gather``,
``shield`` and ``Task.cancel`` work on it unchanged; only the parts that touch
the machine are replaced:

* **Time** is ``now_ns``, an ``int`` that starts at 0 and never goes backwards;
  :meth:`SimEventLoop.time` returns it in seconds. Nothing here reads the
  machine's clock.
* **Timers** live on the loop's own heap keyed ``(when_ns, order_key, seq)``:
  ``seq`` is a counter taken when the timer is scheduled and ``order_key`` is 0
  unless a ``tie_breaker`` is given, so timers due at one instant run in the
  order they were scheduled (FIFO); exploration passes a ``tie_breaker`` that
  draws the key. The ready queue stays asyncio's FIFO deque. Exploration may
  also pass ``timer_lateness``: each timer an *actor's* code sets through
  asyncio's API (``call_later``/``call_at``: ``sleep``, ``wait_for``,
  ``timeout``) fires that many nanoseconds late, drawn when it is set (timers
  are never early, and a busy JVM or Python process fires them late); the
  engine's own timers (``call_at_ns``/``call_later_ns``: message delivery, the
  simulated ZooKeeper) stay exact, so a link's order is never disturbed.
* **One step** (:meth:`SimEventLoop._run_once`, CPython 3.11's private hook,
  pinned by ``tests/unit/sim/test_cpython_pin.py``) runs the callbacks that are
  ready; when none is, time jumps to the earliest timer. Nothing ready and no
  timer is *quiescence*: a real loop would block forever, this one raises
  :class:`SimQuiescent` out of ``run_until_complete``/``run_forever``.
* **No selector, no threads**: ``_write_to_self`` and ``_process_events`` do
  nothing; executors, sockets, pipes, subprocesses and signal handlers raise
  :class:`SimUnsupported`, so a forgotten real-I/O path fails loudly.

**Actor contexts** (design §1.5). :data:`current_actor` is a context variable
holding the :class:`ActorContext` an actor's code runs under. A task started
with :meth:`SimEventLoop.spawn_in` carries it, and asyncio copies the context
into every task, ``call_soon``, ``call_later`` and future callback created
under it, so every scheduled handle knows its owner (``handle._context``). The
loop looks at the owner when a handle is scheduled and again when it is about
to run:

* a **dead** actor's callbacks (:meth:`SimEventLoop.kill`) are dropped without
  running, as ``ray.kill`` ends a process: no ``finally`` block of the actor
  runs while the simulation runs, and asyncio does not report its tasks as
  "Task was destroyed but it is pending".
* a **stalled** actor's callbacks (:meth:`SimEventLoop.stall`, a busy process
  in exploration, design §5.1) are deferred to the stall's end and then run
  first, in the order they would have run.

The loop keeps every actor task referenced until it is done. Python closes a
coroutine that is garbage-collected, running its ``finally`` blocks whenever
the collector happens to find it: a task blocked on a future nobody else holds
would otherwise run its cleanup at a moment that depends on memory, not on the
schedule (and a dead actor's would run at all). :meth:`SimEventLoop.close` ends
the simulated world: it closes every actor task still pending, a killed
actor's included, so their cleanup code runs then, once, and whatever it
schedules is discarded. The engine must therefore keep a killed actor's
outputs from being written after its death (its event writer is abandoned at
kill time).

An exception that escapes a callback, and asyncio's other reports (a task
exception never retrieved, ...), are recorded in :attr:`SimEventLoop.errors`
by the loop's default exception handler instead of being logged; the driver
checks them (:meth:`SimEventLoop.raise_errors`) and tests fail on them.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import heapq
from asyncio import format_helpers
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Generator
from dataclasses import dataclass, field
from typing import Any, NoReturn, TypeVar, TypeVarTuple, Unpack

__all__ = [
    "NS_PER_S",
    "ActorContext",
    "LoopError",
    "SimCallbackErrors",
    "SimEventLoop",
    "SimQuiescent",
    "SimUnsupported",
    "current_actor",
    "ns_of",
]

_T = TypeVar("_T")
_Ts = TypeVarTuple("_Ts")

NS_PER_S = 1_000_000_000
"""Nanoseconds per second."""

_COMPACT_MIN_TIMERS = 100
"""Rebuild the timer heap when it holds more than this many entries and ..."""
_COMPACT_MIN_FRACTION = 0.5
"""... more than this fraction of them are cancelled (asyncio's own thresholds)."""


def ns_of(seconds: float) -> int:
    """``seconds`` as integer nanoseconds, rounded to the nearest one."""
    return round(seconds * NS_PER_S)


class SimQuiescent(RuntimeError):
    """Nothing is ready and no timer is pending: the simulation can make no progress.

    A real event loop would wait forever here. The loop's time is left where it
    was, so a driver that can add work (a timeline action, a new actor) may catch
    this and run the loop again.
    """


class SimUnsupported(RuntimeError):
    """A loop API that would touch the machine (threads, sockets, pipes, signals)."""


@dataclass(eq=False)
class ActorContext:
    """The identity of one simulated actor: what :data:`current_actor` holds.

    Attributes:
        name: the actor's name (unique within a run; used in diagnostics only).
        dead: set by :meth:`SimEventLoop.kill`; the loop runs none of its callbacks.
        stalled_until_ns: while the loop's time is before this, the actor's
            callbacks are deferred (:meth:`SimEventLoop.stall`).
    """

    name: str
    dead: bool = False
    stalled_until_ns: int = 0
    _deferred: deque[asyncio.Handle] = field(default_factory=deque, init=False, repr=False)
    _template: contextvars.Context = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._template = contextvars.Context()
        self._template.run(current_actor.set, self)

    def new_context(self) -> contextvars.Context:
        """A fresh :class:`contextvars.Context` in which :data:`current_actor` is this actor.

        Each task or delivered callback gets its own, as asyncio gives each task
        its own copy: context variables set by one never leak into another. (A
        copy of one made once: the same content as a new context with the
        variable set, for a fraction of the cost; every message makes one.)
        """
        return self._template.copy()


current_actor: contextvars.ContextVar[ActorContext | None] = contextvars.ContextVar(
    "current_actor", default=None
)
"""The actor whose code is running (``None`` for the driver and the loop's own callbacks)."""


@dataclass(frozen=True)
class LoopError:
    """One report that reached the loop's exception handler.

    Attributes:
        time_ns: the loop's virtual time when it was reported.
        message: asyncio's message ("Exception in callback ...", "Task exception
            was never retrieved", ...).
        exception: the exception, when there is one.
        actor: the name of the actor whose callback or task it came from, if known.
    """

    time_ns: int
    message: str
    exception: BaseException | None
    actor: str | None


class SimCallbackErrors(AssertionError):
    """Raised by :meth:`SimEventLoop.raise_errors` when reports were recorded."""

    def __init__(self, errors: list[LoopError]) -> None:
        lines = [f"t={e.time_ns}ns actor={e.actor}: {e.message}: {e.exception!r}" for e in errors]
        super().__init__(f"{len(errors)} error(s) in loop callbacks:\n" + "\n".join(lines))
        self.errors = errors


def _owner(handle: asyncio.Handle) -> ActorContext | None:
    owner: ActorContext | None = handle._context.get(current_actor)  # type: ignore[attr-defined]
    return owner


_CoroutineLike = Generator[Any, None, _T] | Coroutine[Any, Any, _T]
_TimerEntry = tuple[int, int, int, asyncio.TimerHandle]


class SimEventLoop(asyncio.BaseEventLoop):
    """An asyncio loop on virtual integer-nanosecond time, with actor contexts.

    Args:
        tie_breaker: draws the ``order_key`` of each new timer (exploration);
            ``None`` gives 0 to every timer, so timers due at one instant run
            in the order they were scheduled.
        timer_lateness: draws how late (ns, >= 0) an actor's asyncio timer
            fires (exploration); ``None``: on time.
    """

    # Declared here because typeshed does not declare BaseEventLoop's private state.
    _ready: deque[asyncio.Handle]
    _stopping: bool

    def __init__(
        self,
        *,
        tie_breaker: Callable[[], int] | None = None,
        timer_lateness: Callable[[], int] | None = None,
    ) -> None:
        super().__init__()
        self._timer_lateness = timer_lateness
        self._now_ns = 0
        self._timers: list[_TimerEntry] = []
        self._timer_seq = 0
        self._timers_cancelled = 0
        self._tie_breaker = tie_breaker
        self._limit_ns: int | None = None
        # Every task started under an actor, with its owner, held until it is
        # done (insertion-ordered; done ones are pruned now and then).
        self._tasks: dict[asyncio.Task[Any], ActorContext] = {}
        self._tasks_kept = 0
        self.errors: list[LoopError] = []
        """Every report that reached the default exception handler, in order."""
        self.set_exception_handler(_record_error)

    @property
    def draws_ties(self) -> bool:
        """Whether timers due at one instant run in a drawn order (a ``tie_breaker``)."""
        return self._tie_breaker is not None

    # ------------------------------------------------------------------ time

    def time(self) -> float:
        """The virtual time in seconds (``now_ns / 1e9``)."""
        return self._now_ns / NS_PER_S

    @property
    def now_ns(self) -> int:
        """The virtual time in integer nanoseconds."""
        return self._now_ns

    # ------------------------------------------------------------ scheduling

    def call_soon(
        self,
        callback: Callable[[Unpack[_Ts]], object],
        *args: *_Ts,
        context: contextvars.Context | None = None,
    ) -> asyncio.Handle:
        """As asyncio's (``BaseEventLoop.call_soon``, pinned by test_cpython_pin), one call less.

        Every task step and future callback comes through here.
        """
        if self._closed:  # type: ignore[attr-defined]  # _check_closed(), inlined
            raise RuntimeError("Event loop is closed")
        if self._debug:  # type: ignore[attr-defined]
            return super().call_soon(callback, *args, context=context)
        # _call_soon's quick path, inlined
        if context is None:
            context = contextvars.copy_context()
        handle = _new_handle(asyncio.Handle)
        handle._context = context  # type: ignore[attr-defined]
        handle._loop = self  # type: ignore[attr-defined]
        handle._callback = callback  # type: ignore[attr-defined]
        handle._args = args
        handle._cancelled = False
        handle._repr = None  # type: ignore[attr-defined]
        handle._source_traceback = None  # type: ignore[attr-defined]
        owner = context.get(current_actor)
        if owner is not None and owner.dead:
            handle.cancel()
        else:
            self._ready.append(handle)
        return handle

    def _call_soon(
        self,
        callback: Callable[..., object],
        args: tuple[Any, ...],
        context: contextvars.Context | None,
    ) -> asyncio.Handle:
        # The one funnel of call_soon, call_soon_threadsafe, task steps and
        # future callbacks (CPython 3.11).
        if self._debug:  # type: ignore[attr-defined]
            handle = asyncio.Handle(callback, args, self, context)
        else:  # Handle.__init__, inlined (pinned by test_cpython_pin)
            if context is None:
                context = contextvars.copy_context()
            handle = _new_handle(asyncio.Handle)
            handle._context = context  # type: ignore[attr-defined]
            handle._loop = self  # type: ignore[attr-defined]
            handle._callback = callback  # type: ignore[attr-defined]
            handle._args = args
            handle._cancelled = False
            handle._repr = None  # type: ignore[attr-defined]
            handle._source_traceback = None  # type: ignore[attr-defined]
        owner = handle._context.get(current_actor)  # type: ignore[attr-defined]  # _owner, inlined
        if owner is not None and owner.dead:
            handle.cancel()
        else:
            self._ready.append(handle)
        return handle

    def call_later(
        self,
        delay: float,
        callback: Callable[[Unpack[_Ts]], object],
        *args: *_Ts,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        """As asyncio's; the due time is ``now_ns + round(delay * 1e9)``, exactly."""
        if delay is None:
            raise TypeError("delay must not be None")
        return self._call_at_ns(
            self._late(self._now_ns + round(delay * NS_PER_S), context), callback, args, context
        )

    def call_at(
        self,
        when: float,
        callback: Callable[[Unpack[_Ts]], object],
        *args: *_Ts,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        """As asyncio's; ``when`` (loop seconds) is rounded to the nanosecond."""
        if when is None:
            raise TypeError("when cannot be None")
        return self._call_at_ns(self._late(ns_of(when), context), callback, args, context)

    def _late(self, when_ns: int, context: contextvars.Context | None) -> int:
        """``when_ns`` plus a drawn lateness, for a future timer set by an actor's code."""
        lateness = self._timer_lateness
        if lateness is None or when_ns <= self._now_ns:
            return when_ns
        owner = current_actor.get(None) if context is None else context.get(current_actor)
        return when_ns if owner is None else when_ns + lateness()

    def call_at_ns(
        self,
        when_ns: int,
        callback: Callable[[Unpack[_Ts]], object],
        *args: *_Ts,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        """Schedule ``callback(*args)`` at virtual time ``when_ns`` (clamped to now)."""
        return self._call_at_ns(when_ns, callback, args, context)

    def call_later_ns(
        self,
        delay_ns: int,
        callback: Callable[[Unpack[_Ts]], object],
        *args: *_Ts,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        """Schedule ``callback(*args)`` ``delay_ns`` nanoseconds from now."""
        return self._call_at_ns(self._now_ns + delay_ns, callback, args, context)

    def _call_at_ns(
        self,
        when_ns: int,
        callback: Callable[..., object],
        args: tuple[Any, ...],
        context: contextvars.Context | None,
    ) -> asyncio.TimerHandle:
        if self._closed:  # type: ignore[attr-defined]  # is_closed(), inlined
            raise RuntimeError("Event loop is closed")
        when_ns = int(when_ns)
        if when_ns < self._now_ns:
            when_ns = self._now_ns
        if self._debug:  # type: ignore[attr-defined]
            timer = asyncio.TimerHandle(when_ns / NS_PER_S, callback, args, self, context)
        else:  # TimerHandle.__init__, inlined (pinned by test_cpython_pin)
            if context is None:
                context = contextvars.copy_context()
            timer = _new_handle(asyncio.TimerHandle)
            timer._context = context  # type: ignore[attr-defined]
            timer._loop = self  # type: ignore[attr-defined]
            timer._callback = callback  # type: ignore[attr-defined]
            timer._args = args
            timer._cancelled = False
            timer._repr = None  # type: ignore[attr-defined]
            timer._source_traceback = None  # type: ignore[attr-defined]
            timer._when = when_ns / NS_PER_S  # type: ignore[attr-defined]
            timer._scheduled = False  # type: ignore[attr-defined]
        owner = timer._context.get(current_actor)  # type: ignore[attr-defined]  # _owner, inlined
        if owner is not None and owner.dead:
            timer.cancel()  # never scheduled: nothing to count
            return timer
        key = 0 if self._tie_breaker is None else self._tie_breaker()
        self._timer_seq += 1
        heapq.heappush(self._timers, (when_ns, key, self._timer_seq, timer))
        timer._scheduled = True  # type: ignore[attr-defined]
        return timer

    def _timer_handle_cancelled(self, handle: asyncio.TimerHandle) -> None:
        # Called by TimerHandle.cancel(); the entry stays on the heap until it
        # reaches the top or the heap is compacted.
        if handle._scheduled:  # type: ignore[attr-defined]
            self._timers_cancelled += 1

    def pending_timers(self) -> int:
        """How many timer entries the heap holds (cancelled ones not yet purged included)."""
        return len(self._timers)

    def next_timer_ns(self) -> int | None:
        """The due time of the earliest live timer, or ``None`` when there is none."""
        self._purge_cancelled()
        return self._timers[0][0] if self._timers else None

    def _purge_cancelled(self) -> None:
        timers = self._timers
        size = len(timers)
        if size > _COMPACT_MIN_TIMERS and self._timers_cancelled > _COMPACT_MIN_FRACTION * size:
            keep: list[_TimerEntry] = []
            for entry in timers:
                if entry[3]._cancelled:
                    entry[3]._scheduled = False  # type: ignore[attr-defined]
                else:
                    keep.append(entry)
            heapq.heapify(keep)
            self._timers = keep
            self._timers_cancelled = 0
            return
        while timers and timers[0][3]._cancelled:
            timer = heapq.heappop(timers)[3]
            timer._scheduled = False  # type: ignore[attr-defined]
            self._timers_cancelled -= 1

    # ------------------------------------------------------------------ step

    def _run_once(self) -> None:
        """Iterations until the loop is asked to stop: run what is ready, else jump in time.

        Overrides CPython 3.11's private ``BaseEventLoop._run_once`` (no selector
        to poll). ``run_forever`` calls it until ``_stopping`` is set; it goes on
        itself while it is not (the same iterations, one call). Raises
        :class:`SimQuiescent` when nothing is ready, nothing is scheduled and the
        loop was not asked to stop.
        """
        ready = self._ready
        while True:  # run_forever's loop, without a call per iteration
            timers = self._timers
            cancelled = self._timers_cancelled
            if cancelled and (  # else _purge_cancelled has nothing to do (the common case)
                (timers and timers[0][3]._cancelled)
                or (
                    len(timers) > _COMPACT_MIN_TIMERS
                    and cancelled > _COMPACT_MIN_FRACTION * len(timers)
                )
            ):
                self._purge_cancelled()
                timers = self._timers
            if not ready and not self._stopping:
                limit = self._limit_ns
                if limit is not None and limit < self._now_ns:
                    limit = self._now_ns  # time never goes back: what is due now still runs
                if not timers or (limit is not None and timers[0][0] > limit):
                    if limit is None:
                        raise SimQuiescent(
                            f"nothing ready and no timer pending at t={self._now_ns} ns"
                        )
                    self._now_ns = limit
                    self._stopping = True
                    return
                self._now_ns = max(self._now_ns, timers[0][0])
            now = self._now_ns
            while timers and timers[0][0] <= now:
                timer = heapq.heappop(timers)[3]
                timer._scheduled = False  # type: ignore[attr-defined]
                if timer._cancelled:
                    self._timers_cancelled -= 1
                else:
                    ready.append(timer)
            # Run what is ready now, not what these callbacks add (asyncio's batch).
            for _ in range(len(ready)):
                if not ready:
                    break
                handle = ready.popleft()
                if handle._cancelled:
                    continue
                context = handle._context  # type: ignore[attr-defined]
                owner = context.get(current_actor)  # _owner, inlined
                if owner is not None:
                    if owner.dead:
                        continue  # dropped: the process is gone
                    if owner._deferred or owner.stalled_until_ns > now:
                        owner._deferred.append(handle)
                        continue
                try:  # Handle._run, inlined (pinned by test_cpython_pin)
                    context.run(handle._callback, *handle._args)  # type: ignore[attr-defined]
                except (SystemExit, KeyboardInterrupt):
                    raise
                except BaseException as exc:
                    _report_callback_error(self, handle, exc)
            if self._stopping:
                return

    # --------------------------------------------------------------- actors

    def spawn_in(
        self, actor: ActorContext, coro: _CoroutineLike[_T], *, name: str | None = None
    ) -> asyncio.Task[_T]:
        """Start ``coro`` as a task of ``actor`` (:data:`current_actor` set to it).

        Everything the task schedules (its steps, its timers, the callbacks of
        the futures it creates) belongs to ``actor``.
        """
        return self.create_task(coro, name=name, context=actor.new_context())

    def call_soon_in(
        self, actor: ActorContext, callback: Callable[[Unpack[_Ts]], object], *args: *_Ts
    ) -> asyncio.Handle:
        """``call_soon`` in a fresh context of ``actor``."""
        return self.call_soon(callback, *args, context=actor.new_context())

    def create_task(
        self,
        coro: _CoroutineLike[_T],
        *,
        name: object = None,
        context: contextvars.Context | None = None,
    ) -> asyncio.Task[_T]:
        """As asyncio's; an actor's task is held by the loop until it is done.

        A task created for an actor that is already dead never starts: its
        coroutine is closed before its first step (so no code of it runs).
        """
        owner = current_actor.get() if context is None else context.get(current_actor)
        if self._task_factory is None and not self._debug:  # type: ignore[attr-defined]
            # BaseEventLoop.create_task, inlined (pinned by test_cpython_pin)
            if self._closed:  # type: ignore[attr-defined]
                raise RuntimeError("Event loop is closed")
            task: asyncio.Task[_T] = asyncio.Task(coro, loop=self, name=name, context=context)  # type: ignore[arg-type]
        else:
            task = super().create_task(coro, name=name, context=context)
        if owner is not None:
            if owner.dead:
                task._log_destroy_pending = False  # type: ignore[attr-defined]
                coro.close()
            else:
                self._tasks[task] = owner
                if len(self._tasks) > 2 * self._tasks_kept + 64:
                    self._tasks = {t: o for t, o in self._tasks.items() if not t.done()}
                    self._tasks_kept = len(self._tasks)
        return task

    def kill(self, actor: ActorContext) -> None:
        """Kill ``actor`` as ``ray.kill`` ends a process.

        From now on none of its callbacks runs (tasks, timers, future callbacks,
        deliveries), whether already scheduled or scheduled later; its pending
        tasks stay pending, with no ``finally`` run and no "destroyed but
        pending" report, until :meth:`close`. Its timers leave the heap at once.
        """
        if actor.dead:
            return
        actor.dead = True
        actor._deferred.clear()
        for task, owner in self._tasks.items():
            if owner is actor and not task.done():
                task._log_destroy_pending = False  # type: ignore[attr-defined]
        keep: list[_TimerEntry] = []
        for entry in self._timers:
            timer = entry[3]
            if _owner(timer) is actor:
                timer._scheduled = False  # type: ignore[attr-defined]
            else:
                keep.append(entry)
        heapq.heapify(keep)
        self._timers = keep
        self._timers_cancelled = sum(1 for e in keep if e[3]._cancelled)

    def stall(self, actor: ActorContext, duration_s: float) -> None:
        """Stall ``actor`` for ``duration_s`` virtual seconds from now."""
        self.stall_until_ns(actor, self._now_ns + ns_of(duration_s))

    def stall_until_ns(self, actor: ActorContext, until_ns: int) -> None:
        """Defer ``actor``'s callbacks until virtual time ``until_ns``.

        Callbacks that come due meanwhile wait, in order, and run at the stall's
        end before any later callback of the actor. A stall never shortens an
        earlier one.
        """
        if actor.dead or until_ns <= actor.stalled_until_ns:
            return
        actor.stalled_until_ns = until_ns
        self._call_at_ns(until_ns, self._release, (actor,), contextvars.Context())

    def _release(self, actor: ActorContext) -> None:
        if actor.dead or actor.stalled_until_ns > self._now_ns:
            return  # killed, or stalled again for longer: a later release comes
        if actor._deferred:
            # Front of the ready queue: they were due before anything queued now.
            self._ready.extendleft(reversed(actor._deferred))
            actor._deferred.clear()

    # ---------------------------------------------------------------- drive

    def run_until_ns(self, t_ns: int) -> None:
        """Run every callback due at or before ``t_ns``, then set the time to ``t_ns``.

        Callbacks made ready at ``t_ns`` by others run too; timers after
        ``t_ns`` stay pending. Time never goes backwards: an earlier ``t_ns``
        only runs what is ready now.
        """
        self._limit_ns = t_ns
        try:
            self.run_forever()
        finally:
            self._limit_ns = None

    def run_until(self, t_s: float) -> None:
        """:meth:`run_until_ns` with the time in seconds."""
        self.run_until_ns(ns_of(t_s))

    def run_for(self, duration_s: float) -> None:
        """Run for ``duration_s`` virtual seconds from now."""
        self.run_until_ns(self._now_ns + ns_of(duration_s))

    def run_with_timeout(self, aw: Awaitable[_T], timeout_s: float) -> _T:
        """``run_until_complete(wait_for(aw, timeout_s))``: the timeout is virtual.

        Raises:
            TimeoutError: ``aw`` did not finish within ``timeout_s`` virtual seconds.
            SimQuiescent: cannot happen while the timeout is pending.
        """
        return self.run_until_complete(asyncio.wait_for(aw, timeout_s))

    def close(self) -> None:
        """End the simulated world and close the loop.

        Every actor task still pending (a killed actor's included) is abandoned:
        its coroutine is closed here, so whatever ``finally`` code it has runs
        now, once, at a known point, instead of whenever the garbage collector
        finds it; anything that code schedules is discarded with the loop's
        queues, and what it raises is ignored. No "Task was destroyed but it is
        pending" is reported for them. Tasks started outside any actor keep
        asyncio's usual reporting.
        """
        if self.is_running():
            raise RuntimeError("Cannot close a running event loop")
        if self.is_closed():
            return
        for task in [t for t in self._tasks if not t.done()]:
            task._log_destroy_pending = False  # type: ignore[attr-defined]
            # A dead world's cleanup: there is no one to report its errors to.
            with contextlib.suppress(Exception):
                task.get_coro().close()
        super().close()
        self._timers.clear()
        self._tasks.clear()

    # ----------------------------------------------------------- reporting

    def raise_errors(self) -> None:
        """Raise :class:`SimCallbackErrors` when any report was recorded."""
        if self.errors:
            raise SimCallbackErrors(list(self.errors))

    def _is_dead_report(self, context: dict[str, Any]) -> bool:
        handle = context.get("handle")
        if isinstance(handle, asyncio.Handle):
            owner = _owner(handle)
            if owner is not None and owner.dead:
                return True
        task = context.get("task") or context.get("future")
        if isinstance(task, asyncio.Task):
            owner = self._tasks.get(task)
            return owner is not None and owner.dead
        return False

    def _actor_of_report(self, context: dict[str, Any]) -> str | None:
        handle = context.get("handle")
        if isinstance(handle, asyncio.Handle):
            owner = _owner(handle)
            return None if owner is None else owner.name
        task = context.get("task") or context.get("future")
        if isinstance(task, asyncio.Task):
            owner = self._tasks.get(task)
            return None if owner is None else owner.name
        return None

    # ------------------------------------------------------- no real I/O

    def _write_to_self(self) -> None:
        """No self-pipe: there is no other thread to wake the loop."""

    def _process_events(self, event_list: list[Any]) -> None:
        """No selector: there are no I/O events."""


_new_handle = object.__new__
"""Makes a handle without running its ``__init__`` (the loop sets its slots itself)."""


def _report_callback_error(loop: SimEventLoop, handle: asyncio.Handle, exc: BaseException) -> None:
    """What ``Handle._run`` does when its callback raised: the loop's exception handler."""
    cb = format_helpers._format_callback_source(
        handle._callback,  # type: ignore[attr-defined]
        handle._args,
    )
    context: dict[str, Any] = {
        "message": f"Exception in callback {cb}",
        "exception": exc,
        "handle": handle,
    }
    if handle._source_traceback:  # type: ignore[attr-defined]
        context["source_traceback"] = handle._source_traceback  # type: ignore[attr-defined]
    loop.call_exception_handler(context)


def _record_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The default exception handler of :class:`SimEventLoop`: record, never log."""
    assert isinstance(loop, SimEventLoop)
    if loop._is_dead_report(context):
        return
    exc = context.get("exception")
    loop.errors.append(
        LoopError(
            time_ns=loop.now_ns,
            message=str(context.get("message", "")),
            exception=exc if isinstance(exc, BaseException) else None,
            actor=loop._actor_of_report(context),
        )
    )


_UNSUPPORTED = (
    "run_in_executor",
    "set_default_executor",
    "getaddrinfo",
    "getnameinfo",
    "create_connection",
    "create_server",
    "create_unix_connection",
    "create_unix_server",
    "create_datagram_endpoint",
    "connect_accepted_socket",
    "connect_read_pipe",
    "connect_write_pipe",
    "subprocess_exec",
    "subprocess_shell",
    "sendfile",
    "start_tls",
    "sock_recv",
    "sock_recv_into",
    "sock_recvfrom",
    "sock_recvfrom_into",
    "sock_sendall",
    "sock_sendto",
    "sock_connect",
    "sock_accept",
    "sock_sendfile",
    "add_reader",
    "remove_reader",
    "add_writer",
    "remove_writer",
    "add_signal_handler",
    "remove_signal_handler",
)
"""Loop APIs that need threads, sockets, pipes or signals: refused on the sim loop."""


def _refuse(name: str) -> Callable[..., NoReturn]:
    def refused(self: SimEventLoop, *args: Any, **kwargs: Any) -> NoReturn:
        raise SimUnsupported(
            f"SimEventLoop.{name}: the sim loop has no threads, sockets, pipes or signals"
        )

    refused.__name__ = name
    refused.__qualname__ = f"SimEventLoop.{name}"
    refused.__doc__ = f"Refused: raises :class:`SimUnsupported` ({name} needs real I/O)."
    return refused


for _name in _UNSUPPORTED:
    setattr(SimEventLoop, _name, _refuse(_name))
del _name
