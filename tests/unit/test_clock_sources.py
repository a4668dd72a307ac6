"""Injected clock sources: ScaledClock, RunContext and the leader cache on the loop's clock.

The real engine reads the machine's clocks through these seams; the sim engine
will hand in virtual ones. Fake sources here move only when the test says.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import pickle
import time
from pathlib import Path
from typing import Any

import pytest

from actors.context import RunContext
from actors.io import RealIO
from actors.metadata import LeaderCache
from emulator.clock import ScaledClock
from emulator.eventlog import iter_events
from emulator.events import EventKind
from tests.unit.loop_time import ManualTimeLoop, run_on


class Sources:
    """A monotonic and a wall clock that move only when told to (seconds)."""

    def __init__(self, mono: float = 50.0, wall: float = 1_000.0) -> None:
        self.mono_t = mono
        self.wall_t = wall

    def mono(self) -> float:
        return self.mono_t

    def wall(self) -> float:
        return self.wall_t

    def advance(self, s: float) -> None:
        self.mono_t += s
        self.wall_t += s


# ------------------------------------------------------------------ ScaledClock


def test_now_ms_reads_only_the_injected_sources() -> None:
    s = Sources(mono=50.0, wall=1_000.0)
    # The run started 2 wall s ago; at time_scale 0.5 that is 4 emulated s.
    clock = ScaledClock(0.5, 998.0, mono=s.mono, wall=s.wall)
    assert clock.now_ms() == 4_000.0
    s.advance(1.5)
    assert clock.now_ms() == 7_000.0
    # Anchored once: a wall-clock step (NTP) does not move emulated time.
    s.wall_t += 3_600.0
    assert clock.now_ms() == 7_000.0
    assert clock.mono == s.mono and clock.wall == s.wall


def test_rebase_shift_is_computed_on_the_sources() -> None:
    s = Sources(mono=50.0, wall=1_000.0)
    clock = ScaledClock(0.5, 1_000.0, mono=s.mono, wall=s.wall)
    s.advance(3.0)
    before = clock.now_ms()
    assert before == 6_000.0
    # Time 0 moves to 2 wall s from now: 5 wall s after the old one = 10 emulated s.
    shift = clock.rebase(1_005.0)
    assert shift == 10_000.0
    assert clock.origin_wall == 1_005.0
    assert clock.now_ms() == before - shift == -4_000.0
    s.advance(2.0)
    assert clock.now_ms() == 0.0


def test_wall_at_is_on_the_monotonic_source() -> None:
    s = Sources(mono=50.0, wall=1_000.0)
    clock = ScaledClock(0.25, 999.0, mono=s.mono, wall=s.wall)
    assert clock.wall_at(0.0) == 49.0
    assert clock.wall_at(4_000.0) == 50.0  # 4 emulated s = 1 wall s at time_scale 0.25
    assert clock.wall_at(clock.now_ms()) == s.mono_t


def test_default_sources_are_the_machines() -> None:
    clock = ScaledClock(1.0, time.time())
    assert clock.mono is time.monotonic and clock.wall is time.time
    assert clock.now_ms() == pytest.approx(0.0, abs=1_000.0)


# ------------------------------------------------------------------- RunContext


def _ctx(tmp_path: Path, **kw: Any) -> RunContext:
    base: dict[str, Any] = {
        "run_id": "r1",
        "protocol": "zookeeper",
        "events_dir": str(tmp_path / "events"),
        "time_scale": 0.5,
        "origin_wall": 998.0,
        "zk_connect": "",
        "zk_hosts": (),
        "seed": 1,
        "group": "g",
    }
    base.update(kw)
    return RunContext(**base)


def test_the_context_is_real_and_on_the_machines_clocks_by_default(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    assert ctx.engine == "real" and ctx.mono is None and ctx.wall is None
    clock = ctx.clock()
    assert clock.mono is time.monotonic and clock.wall is time.time


def test_the_context_clock_uses_its_sources(tmp_path: Path) -> None:
    s = Sources(mono=50.0, wall=1_000.0)
    ctx = _ctx(tmp_path, engine="sim", mono=s.mono, wall=s.wall)
    clock = ctx.clock()
    assert clock.now_ms() == 4_000.0
    s.advance(0.5)
    assert clock.now_ms() == 5_000.0
    # replace() (how contexts are derived) keeps them.
    again = dataclasses.replace(ctx, leaders={("t", 0): 0})
    assert again.mono == s.mono and again.clock().now_ms() == 5_000.0


def test_a_pickled_context_leaves_its_sources_behind(tmp_path: Path) -> None:
    # Lambdas cannot be pickled: the round trip only works if they are left out.
    ctx = _ctx(tmp_path, engine="sim", mono=lambda: 1.0, wall=lambda: 2.0)
    back = pickle.loads(pickle.dumps(ctx))
    assert back.mono is None and back.wall is None
    assert back.engine == "sim" and back == ctx
    assert ctx.mono is not None  # the original keeps them
    # A sim context without its sources refuses rather than read the machine's clock.
    with pytest.raises(ValueError, match="'sim' run context needs its mono and wall sources"):
        back.clock()
    real = pickle.loads(pickle.dumps(_ctx(tmp_path, mono=lambda: 1.0, wall=lambda: 2.0)))
    assert real.clock().mono is time.monotonic


def test_the_writer_stamps_from_the_context_sources(tmp_path: Path) -> None:
    s = Sources(mono=50.0, wall=1_000.0)
    ctx = _ctx(tmp_path, engine="sim", mono=s.mono, wall=s.wall)
    w = ctx.writer("host-0")
    w.emit(EventKind.RUN_STARTED)
    s.advance(0.25)
    w.emit(EventKind.RUN_FINISHED)
    w.close()
    evs = list(iter_events(tmp_path / "events" / "host-0.msgpack"))
    assert [(e["t_emu_ms"], e["ts_wall"], e["ts_mono"]) for e in evs] == [
        (4_000.0, 1_000.0, 50.0),
        (4_500.0, 1_000.25, 50.25),
    ]


# ----------------------------------------------------- LeaderCache on loop time


class _Broker:
    """A broker actor handle whose ``metadata.remote()`` answers at once."""

    def __init__(self, leaders: dict[tuple[str, int], int]) -> None:
        self.leaders = leaders
        self.calls = 0
        self.metadata = self

    def remote(self) -> asyncio.Future[dict[tuple[str, int], int]]:
        self.calls += 1
        fut: asyncio.Future[dict[tuple[str, int], int]] = asyncio.get_running_loop().create_future()
        fut.set_result(dict(self.leaders))
        return fut


class _NoActors(RealIO):
    """Ray's named actors as a process not connected to Ray sees them: none. (The
    suite's own local Ray, which the integration tests leave running in this
    process, is not asked: a look-up there waited 60 s once for its GCS.)"""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    def lookup_actor(self, name: str) -> Any | None:
        self.asked.append(name)
        return None


def test_the_leader_cache_backs_off_on_the_loops_clock(tmp_path: Path) -> None:
    # time_scale 1: refresh.leader.backoff.ms 200 = 0.2 s of the loop's clock.
    ctx = _ctx(tmp_path, time_scale=1.0)
    broker = _Broker({("t", 0): 0})
    loop = ManualTimeLoop(now=5_000.0)
    io = _NoActors()

    async def settle(cache: LeaderCache) -> None:
        while cache._refreshing is not None:
            await asyncio.sleep(0)

    async def go() -> None:
        cache = LeaderCache(ctx, {0: broker}, io=io)
        assert cache.leader(("t", 0)) is None  # unknown: a refresh is due
        cache.maybe_refresh()
        await settle(cache)
        assert broker.calls == 1 and cache.leader(("t", 0)) == 0
        cache.not_leader(("t", 0))
        cache.maybe_refresh()  # the same instant of the loop: backing off
        await settle(cache)
        assert broker.calls == 1
        loop.now += 0.15  # only the loop's clock moves; still inside the back-off
        cache.maybe_refresh()
        await settle(cache)
        assert broker.calls == 1
        loop.now += 0.1
        cache.maybe_refresh()
        await settle(cache)
        assert broker.calls == 2
        # A failed broker is looked up again (no actor found), stamped on loop time.
        cache.failed(0)
        assert cache.handle(0) is broker
        assert cache._last_lookup[0] == loop.now
        assert len(io.asked) == 1

    run_on(loop, go())


# ------------------------------------------------------------------ TickTime


def test_a_late_tick_is_told_its_grid_instant_so_heartbeats_do_not_drift() -> None:
    from actors.consumer_host import TickTime

    s = Sources(mono=50.0, wall=1_000.0)
    clock = ScaledClock(0.5, 1_000.0, mono=s.mono, wall=s.wall)
    told = TickTime(clock)
    # The tick due at mono 50.02 runs 3 ms late: told 40 emulated ms, not 46.
    s.advance(0.023)
    assert told.at_tick(50.02) == pytest.approx(40.0)
    # A member scheduling a 3 s heartbeat from each tick it is told fires on
    # the grid: 75 wall ticks of 20 ms later it is due again, however late the
    # ticks run (each runs 1-9 ms after its instant).
    due = told.at_tick(50.02) + 3_000.0
    fired = []
    for k in range(2, 2 + 75 * 4):
        instant = 50.0 + k * 0.02
        s.mono_t = instant + 0.001 * (1 + k % 9)
        now = told.at_tick(instant)
        if now >= due:  # the host core's own test of a deadline
            fired.append(now)
            due = now + 3_000.0
    gaps = [b - a for a, b in itertools.pairwise(fired)]
    assert len(fired) == 4 and gaps == [3_000.0] * 3


def test_tick_time_is_the_reading_on_time_and_never_goes_back() -> None:
    from actors.consumer_host import TickTime

    s = Sources(mono=50.0, wall=1_000.0)
    clock = ScaledClock(1.0, 1_000.0, mono=s.mono, wall=s.wall)
    told = TickTime(clock)
    # On its instant (the sim's loop): the clock's reading itself.
    s.mono_t = 50.02
    assert told.at_tick(50.02) == clock.now_ms()
    # An answer read at 45 ms, then the tick due at 40 ms runs: told 45, not 40.
    s.mono_t = 50.045
    assert told.now_ms() == pytest.approx(45.0)
    s.mono_t = 50.046
    assert told.at_tick(50.04) == pytest.approx(45.0)
    # After a rebase the earlier readings are shifted with the clock.
    shift = clock.rebase(1_000.5)
    told.seen_ms -= shift
    s.mono_t = 50.061
    assert told.at_tick(50.06) == pytest.approx(clock.ms_at(50.06))
