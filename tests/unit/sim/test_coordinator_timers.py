"""The broker runs its coordinators' timers at their deadlines, on the sim loop's virtual clock.

Kafka's coordinators fire their timers from a 1 ms timing wheel; the broker
shell (:meth:`actors.broker.BrokerCore._coordinator_timers`, both engines'
code) sleeps until the earliest deadline of any coordinator it hosts, or until
the coordinators say their timers changed (a request, a partition loaded or
unloaded: :attr:`emulator.broker.coordinators.CoordinatorHost.on_change`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from actors.broker import BrokerCore
from emulator.broker.coordinators import CoordinatorHost
from emulator.clock import ScaledClock
from emulator.sim.loop import SimEventLoop

TIME_SCALE = 0.5


class _Coordinators:
    """What the timer task sees of a CoordinatorHost: deadlines, a poll, a change hook."""

    def __init__(self, clock: ScaledClock) -> None:
        self.clock = clock
        self.deadlines: list[float] = []
        self.polls: list[tuple[float, list[float]]] = []  # (now, the deadlines it ran)
        self.on_change: Callable[[], None] | None = None

    def next_deadline(self) -> float | None:
        return min(self.deadlines, default=None)

    def poll(self, now_ms: float) -> None:
        due = [d for d in self.deadlines if d <= now_ms]
        self.deadlines = [d for d in self.deadlines if d > now_ms]
        self.polls.append((now_ms, due))

    def change(self, *deadlines: float) -> None:
        self.deadlines.extend(deadlines)
        assert self.on_change is not None
        self.on_change()


def _timers(loop: SimEventLoop) -> tuple[_Coordinators, ScaledClock, asyncio.Task[None]]:
    clock = ScaledClock(TIME_SCALE, 0.0, mono=loop.time, wall=loop.time)
    coords = _Coordinators(clock)
    shell: Any = SimpleNamespace(coordinators=coords, clock=clock)
    task = loop.create_task(BrokerCore._coordinator_timers(shell))
    return coords, clock, task


def test_timers_fire_at_their_deadlines_and_a_change_is_seen_at_once() -> None:
    loop = SimEventLoop()
    coords, clock, task = _timers(loop)
    try:
        loop.run_until(0.1)
        assert coords.on_change is not None and coords.polls == []  # nothing due: it waits
        coords.deadlines = [3000.0, 1234.5]
        coords.on_change()
        loop.run_until(1.0)  # 2,000 emulated ms
        assert coords.polls == [(pytest.approx(1234.5), [1234.5])]
        # A request brings an earlier deadline than the one the task sleeps for.
        loop.call_at(1.1, coords.change, 2500.0)
        loop.run_until(2.0)
        assert [(round(t, 6), due) for t, due in coords.polls[1:]] == [
            (2500.0, [2500.0]),
            (3000.0, [3000.0]),
        ]
        # No deadline left: no poll however long nothing happens.
        loop.run_until(60.0)
        assert len(coords.polls) == 3
        assert clock.now_ms() == pytest.approx(120_000.0)
    finally:
        task.cancel()
        loop.run_until(60.0)
        loop.close()


def test_the_coordinator_host_tells_of_every_change_and_its_earliest_deadline() -> None:
    made: dict[str, Any] = {}

    class _Coord:
        def __init__(self, deadline: float) -> None:
            self.deadline = deadline

        def next_deadline(self) -> float | None:
            return self.deadline

        def unload(self, now_ms: float) -> list[Any]:
            return []

    host = CoordinatorHost(0, {0: 0, 1: 0}, lambda g, c: made.setdefault(g, _Coord(9.0)), print)
    changes: list[str] = []
    host.on_change = lambda: changes.append("changed")
    assert host.next_deadline() is None
    host.coordinators = {"a": _Coord(50.0), "b": _Coord(20.0), "c": _Coord(None)}  # type: ignore[dict-item, arg-type]
    assert host.next_deadline() == 20.0
    host.coordinators = {}
    host.load_partition(1, {})
    host.unload_partition(1, 0.0)
    host.partitions_deleted(0.0, [])
    assert changes == ["changed"] * 3
    assert host.exchange(0.0, "host-0", []) == []
    assert changes == ["changed"] * 4
