"""The one fake-clock test context of the sans-I/O machines (coordinators and members).

Modelled on Kafka's ``GroupMetadataManagerTestContext`` (a builder over
``MockTime`` and ``MockTimer``, with helpers that send a request and check
the records): :class:`GroupTestContext` holds

* the **mock time**: a :class:`~emulator.clock.FakeClock` that moves only when
  the test says so;
* the **timer**: the machines whose ``next_deadline()`` / ``poll(now)`` it fires
  in time order (:meth:`GroupTestContext.with_machine`), and one-off callbacks
  such as a message arriving over a wire (:meth:`GroupTestContext.schedule`);
* the **records**: every output, in order, with its time and who produced it;
  events are checked against the event schema as they are recorded.

The coordinator and member tests build their own harness on it (a
coordinator alone, a member alone, a network of members and coordinators);
what differs between them is what they do with a machine's outputs.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, Self

from emulator.clock import FakeClock
from emulator.events import EventKind, validate_event
from emulator.modern.messages import Emit

MAX_STEPS = 2_000_000
"""Bound on the timer's steps in one :meth:`GroupTestContext.run` (a livelock fails the test)."""


class Timed(Protocol):
    """A machine with timers: a coordinator or a member."""

    def next_deadline(self) -> float | None: ...

    def poll(self, now: float) -> Sequence[object]: ...


@dataclass(frozen=True)
class Record:
    """One output, in order: when, the order among equal times, who, and what."""

    t: float
    seq: int
    who: str
    what: object

    @property
    def source(self) -> str:
        return self.who

    @property
    def emit(self) -> Emit:
        assert isinstance(self.what, Emit), self.what
        return self.what

    @property
    def kind(self) -> str:
        """The event kind's value (``""`` for an output that is not an event)."""
        return self.what.kind.value if isinstance(self.what, Emit) else ""

    @property
    def fields(self) -> dict[str, object]:
        return dict(self.what.fields) if isinstance(self.what, Emit) else {}


@dataclass
class _Machine:
    who: str
    machine: Timed
    on_outputs: Callable[[Sequence[object]], None]
    live: Callable[[], bool]


class GroupTestContext:
    """Mock time, a timer over machines and wires, and the records (see the module doc)."""

    def __init__(self, start_ms: float = 0.0) -> None:
        self.clock = FakeClock(start_ms)
        self.records: list[Record] = []
        self._machines: list[_Machine] = []
        self._wire: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()

    # ------------------------------------------------------------ the builder

    def with_machine(
        self,
        who: str,
        machine: Timed,
        on_outputs: Callable[[Sequence[object]], None] | None = None,
        live: Callable[[], bool] = lambda: True,
    ) -> Self:
        """Let the timer fire ``machine``'s deadlines (while ``live()``).

        ``on_outputs`` gets what its ``poll`` returns; by default the outputs
        are recorded under ``who``. Machines due at the same time are polled
        in the order they were added.
        """
        handler = on_outputs or (lambda outs: self.record(who, outs))
        self._machines.append(_Machine(who, machine, handler, live))
        return self

    # --------------------------------------------------------------- the time

    @property
    def now(self) -> float:
        return self.clock.now_ms()

    def schedule(self, at_ms: float, fn: Callable[[], None]) -> None:
        """Call ``fn`` when the mock time reaches ``at_ms`` (a message arriving, say)."""
        heapq.heappush(self._wire, (at_ms, next(self._seq), fn))

    def timed(self) -> list[tuple[Timed, Callable[[Sequence[object]], None]]]:
        """The machines the timer serves now, in order, with what takes their outputs.

        By default those added with :meth:`with_machine`, while live; a
        harness whose machines come and go overrides it.
        """
        return [(m.machine, m.on_outputs) for m in self._machines if m.live()]

    def next_time(self) -> float | None:
        """When the timer next has something to do (never before now)."""
        times = [self._wire[0][0]] if self._wire else []
        for machine, _ in self.timed():
            d = machine.next_deadline()
            if d is not None:
                times.append(d)
        return max(min(times), self.now) if times else None

    def step(self) -> None:
        """Do everything due now: deliveries first, then each due machine in order."""
        while self._wire and self._wire[0][0] <= self.now:
            _, _, fn = heapq.heappop(self._wire)
            fn()
        for machine, on_outputs in self.timed():
            d = machine.next_deadline()
            if d is not None and d <= self.now:
                on_outputs(machine.poll(self.now))

    def run(self, ms: float) -> None:
        """Let ``ms`` of mock time pass, firing everything due on the way, in time order."""
        until = self.now + ms
        for _ in range(MAX_STEPS):
            t = self.next_time()
            if t is None or t > until:
                break
            if t > self.now:
                self.clock.advance(t - self.now)
            self.step()
            if t == until and not self._due():
                break
        else:
            raise AssertionError("the timer did not settle (a livelock?)")
        if until > self.now:
            self.clock.advance(until - self.now)

    def run_until(
        self, cond: Callable[[], bool], limit_ms: float = 600_000, step_ms: float = 10
    ) -> None:
        """Run in ``step_ms`` steps until ``cond()`` holds; fail after ``limit_ms``."""
        end = self.now + limit_ms
        while not cond():
            assert self.now < end, "condition not reached in time"
            self.run(step_ms)

    def _due(self) -> bool:
        t = self.next_time()
        return t is not None and t <= self.now

    # ------------------------------------------------------------ the records

    def record(self, who: str, outputs: Iterable[object]) -> list[object]:
        """Record ``who``'s outputs (events checked against the schema); the non-events."""
        rest: list[object] = []
        for o in outputs:
            if isinstance(o, Emit):
                validate_event({**o.fields, "kind": o.kind.value})
            else:
                rest.append(o)
            self.records.append(Record(self.now, next(self._seq), who, o))
        return rest

    def note(self, who: str, what: object) -> None:
        """Record something the test itself did (a crash, say)."""
        self.records.append(Record(self.now, next(self._seq), who, what))

    def emitted(
        self, kind: EventKind | None = None, who: str | None = None, since: float = 0.0
    ) -> list[Record]:
        """The events recorded (of ``kind``, by ``who``, from ``since``), in order."""
        return [
            r
            for r in self.records
            if isinstance(r.what, Emit)
            and (kind is None or r.what.kind is kind)
            and (who is None or r.who == who)
            and r.t >= since
        ]

    def emits(self, who: str | None = None) -> list[Emit]:
        """The events recorded, as the machines emitted them."""
        return [r.emit for r in self.emitted(who=who)]

    def event_kinds(self, who: str | None = None) -> list[EventKind]:
        """The kinds of the events recorded, in order."""
        return [r.emit.kind for r in self.emitted(who=who)]

    def last_event(self, kind: EventKind, who: str | None = None) -> Emit:
        """The last event of ``kind``."""
        found = self.emitted(kind, who)
        assert found, f"no {kind.value} recorded"
        return found[-1].emit
