"""``SimEventLoop``: virtual time, asyncio semantics, actor contexts, quiescence."""

from __future__ import annotations

import asyncio
import gc
import itertools
import random
import time
import weakref

import pytest

from emulator.sim.loop import (
    _UNSUPPORTED,
    ActorContext,
    SimCallbackErrors,
    SimEventLoop,
    SimQuiescent,
    SimUnsupported,
    current_actor,
)

# ------------------------------------------------------------------ time


def test_time_starts_at_zero_and_jumps_to_the_next_timer(loop: SimEventLoop) -> None:
    seen: list[tuple[str, int]] = []
    loop.call_later(2.5, lambda: seen.append(("b", loop.now_ns)))
    loop.call_later(0.001, lambda: seen.append(("a", loop.now_ns)))
    assert loop.time() == 0.0 and loop.now_ns == 0
    loop.run_until(10)
    assert seen == [("a", 1_000_000), ("b", 2_500_000_000)]
    assert loop.now_ns == 10_000_000_000 and loop.time() == 10.0


def test_delays_are_exact_integer_nanoseconds(loop: SimEventLoop) -> None:
    when: list[int] = []

    def tick(n: int) -> None:
        when.append(loop.now_ns)
        if n:
            loop.call_later(0.1, tick, n - 1)

    loop.call_soon(tick, 1000)
    loop.run_until(1000)
    # 1000 steps of 0.1 s without float drift.
    assert when[-1] == 100_000_000_000
    assert all(b - a == 100_000_000 for a, b in itertools.pairwise(when))


def test_time_never_goes_backwards(loop: SimEventLoop) -> None:
    seen: list[int] = []
    loop.run_until(5)
    loop.call_at(1.0, lambda: seen.append(loop.now_ns))  # in the past: runs now
    loop.call_later(-3, lambda: seen.append(loop.now_ns))
    loop.run_until(2)  # earlier than now: runs what is ready, time stays
    assert seen == [5_000_000_000, 5_000_000_000]
    assert loop.now_ns == 5_000_000_000


def test_an_hour_of_virtual_sleep_takes_no_wall_time(loop: SimEventLoop) -> None:
    async def sleeper() -> float:
        await asyncio.sleep(3600)
        return loop.time()

    wall = time.perf_counter()
    assert loop.run_until_complete(sleeper()) == 3600.0
    assert time.perf_counter() - wall < 0.5


def test_run_until_runs_everything_due_including_chains(loop: SimEventLoop) -> None:
    seen: list[str] = []
    loop.call_at(3.0, lambda: loop.call_soon(lambda: seen.append("chained at 3")))
    loop.call_at(3.0, lambda: seen.append("timer at 3"))
    loop.call_at(3.000000001, lambda: seen.append("after 3"))
    loop.run_until(3)
    assert seen == ["timer at 3", "chained at 3"]
    assert loop.now_ns == 3_000_000_000 and loop.next_timer_ns() == 3_000_000_001
    loop.run_for(1)
    assert seen[-1] == "after 3" and loop.time() == 4.0


# --------------------------------------------------------- asyncio semantics


def test_sleep_and_wait_for_use_virtual_time(loop: SimEventLoop) -> None:
    async def main() -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        await asyncio.sleep(1.5)
        out.append(("slept", loop.time()))
        try:
            await asyncio.wait_for(asyncio.sleep(10), timeout=5)
        except TimeoutError:
            out.append(("timed out", loop.time()))
        value = await asyncio.wait_for(asyncio.sleep(2, result="v"), timeout=5)
        out.append((value, loop.time()))
        try:
            async with asyncio.timeout(0.25):
                await asyncio.sleep(1)
        except TimeoutError:
            out.append(("timeout()", loop.time()))
        return out

    assert loop.run_until_complete(main()) == [
        ("slept", 1.5),
        ("timed out", 6.5),
        ("v", 8.5),
        ("timeout()", 8.75),
    ]
    # wait_for's and timeout()'s timers were cancelled: nothing left to run.
    assert loop.next_timer_ns() is None


def test_run_with_timeout_is_virtual(loop: SimEventLoop) -> None:
    with pytest.raises(TimeoutError):
        loop.run_with_timeout(loop.create_future(), 30)
    assert loop.time() == 30.0
    assert loop.run_with_timeout(asyncio.sleep(1, result=7), 30) == 7
    assert loop.time() == 31.0


def test_queue_event_semaphore(loop: SimEventLoop) -> None:
    log: list[tuple[str, float]] = []

    async def producer(q: asyncio.Queue[int]) -> None:
        for i in range(3):
            await asyncio.sleep(1)
            await q.put(i)

    async def consumer(q: asyncio.Queue[int]) -> None:
        for _ in range(3):
            item = await q.get()
            log.append((f"got {item}", loop.time()))

    async def waiter(ev: asyncio.Event, name: str) -> None:
        await ev.wait()
        log.append((f"{name} woke", loop.time()))

    async def worker(sem: asyncio.Semaphore, name: str) -> None:
        async with sem:
            await asyncio.sleep(1)
            log.append((f"{name} done", loop.time()))

    async def main() -> None:
        q: asyncio.Queue[int] = asyncio.Queue(maxsize=1)
        await asyncio.gather(producer(q), consumer(q))
        ev = asyncio.Event()
        waiters = [asyncio.create_task(waiter(ev, n)) for n in ("w1", "w2")]
        await asyncio.sleep(0.5)
        ev.set()
        await asyncio.gather(*waiters)
        sem = asyncio.Semaphore(2)
        await asyncio.gather(*(worker(sem, f"k{i}") for i in range(5)))

    loop.run_until_complete(main())
    assert log == [
        ("got 0", 1.0),
        ("got 1", 2.0),
        ("got 2", 3.0),
        ("w1 woke", 3.5),
        ("w2 woke", 3.5),
        ("k0 done", 4.5),
        ("k1 done", 4.5),
        ("k2 done", 5.5),
        ("k3 done", 5.5),
        ("k4 done", 6.5),
    ]


def test_gather_shield_and_cancel(loop: SimEventLoop) -> None:
    log: list[tuple[str, float]] = []

    async def fails() -> None:
        await asyncio.sleep(1)
        raise ValueError("boom")

    async def inner() -> str:
        await asyncio.sleep(3)
        log.append(("inner finished", loop.time()))
        return "inner"

    async def cancellable() -> None:
        try:
            await asyncio.sleep(100)
        except asyncio.CancelledError:
            log.append(("cancelled", loop.time()))
            raise
        finally:
            log.append(("finally", loop.time()))

    async def main() -> None:
        res = await asyncio.gather(asyncio.sleep(2, "a"), fails(), return_exceptions=True)
        assert res[0] == "a" and isinstance(res[1], ValueError)
        with pytest.raises(ValueError):
            await asyncio.gather(fails(), asyncio.sleep(5))
        shielded = asyncio.ensure_future(inner())
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.shield(shielded), 1)
        assert await shielded == "inner"
        task = asyncio.create_task(cancellable())
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    loop.run_until_complete(main())
    assert log == [("inner finished", 6.0), ("cancelled", 6.5), ("finally", 6.5)]
    # gather(fails, sleep 5) raised at 3, but its sleep(5) runs on to 7.
    assert loop.next_timer_ns() == 7_000_000_000
    loop.run_until(7)
    assert loop.next_timer_ns() is None


def test_call_soon_threadsafe_needs_no_wakeup(loop: SimEventLoop) -> None:
    seen: list[int] = []
    loop.call_soon_threadsafe(seen.append, 1)
    loop.run_until(0)
    assert seen == [1]


# ------------------------------------------------------------------- ties


def test_timers_due_together_run_in_scheduling_order(loop: SimEventLoop) -> None:
    seen: list[int] = []
    rng = random.Random(7)
    for i in range(200):
        # Same instant, reached by different routes: call_at and call_later.
        if rng.randrange(2):
            loop.call_at(1.0, seen.append, i)
        else:
            loop.call_later(1.0, seen.append, i)
    loop.call_at(0.5, lambda: loop.call_at(1.0, seen.append, 200))
    loop.run_until(2)
    assert seen == list(range(201))


def test_a_tie_breaker_reorders_equal_times_only() -> None:
    keys = random.Random(3)
    lp = SimEventLoop(tie_breaker=lambda: keys.randrange(1 << 32))
    try:
        seen: list[int] = []
        for i in range(50):
            lp.call_at(1.0, seen.append, i)
        lp.call_at(0.5, seen.append, -1)
        lp.call_at(1.5, seen.append, 99)
        lp.run_until(2)
        assert seen[0] == -1 and seen[-1] == 99
        assert sorted(seen[1:-1]) == list(range(50)) and seen[1:-1] != list(range(50))
    finally:
        lp.close()


def test_timer_lateness_delays_only_an_actors_asyncio_timers() -> None:
    """An actor's call_later/call_at/sleep fire late by the drawn amount; the
    driver's timers and the engine's call_at_ns timers stay exact."""
    draws = iter([7, 11, 13, 17])
    lp = SimEventLoop(timer_lateness=lambda: next(draws))
    a = ActorContext("a")
    fired: dict[str, int] = {}

    def mark(tag: str) -> None:
        fired[tag] = lp.now_ns

    async def body() -> None:
        lp.call_later(1, mark, "actor call_later")  # 1 s + 7 ns
        lp.call_at(2.0, mark, "actor call_at")  # 2 s + 11 ns
        lp.call_at_ns(3_000_000_000, mark, "actor call_at_ns")  # the engine's API: exact
        await asyncio.sleep(4)  # 4 s + 13 ns
        mark("actor sleep")

    try:
        lp.call_later(1, mark, "driver call_later")
        lp.run_until_complete(lp.spawn_in(a, body()))
        assert fired == {
            "driver call_later": 1_000_000_000,
            "actor call_later": 1_000_000_007,
            "actor call_at": 2_000_000_011,
            "actor call_at_ns": 3_000_000_000,
            "actor sleep": 4_000_000_013,
        }
        assert next(draws) == 17  # one draw per actor timer, none for the others
    finally:
        lp.close()


# -------------------------------------------------------- cancelled timers


def test_cancelled_timers_do_not_leak_or_move_time(loop: SimEventLoop) -> None:
    handles = [loop.call_later(1000 + i, lambda: None) for i in range(10_000)]
    keep = loop.call_later(5000.5, lambda: None)
    for h in handles:
        h.cancel()
    assert loop.next_timer_ns() == 5_000_500_000_000  # purged, not jumped to
    assert loop.pending_timers() < 100
    keep.cancel()
    with pytest.raises(SimQuiescent):
        loop.run_forever()
    assert loop.pending_timers() == 0 and loop.now_ns == 0


def test_wait_for_that_completes_leaves_no_timer(loop: SimEventLoop) -> None:
    sizes: list[int] = []

    async def main() -> None:
        for _ in range(500):
            await asyncio.wait_for(asyncio.sleep(0.001), timeout=3600)
            sizes.append(loop.pending_timers())

    loop.run_until_complete(main())
    # Each round leaves a cancelled 1-hour timeout behind; the heap is compacted.
    assert max(sizes) < 250
    assert loop.next_timer_ns() is None


# ------------------------------------------------------------- quiescence


def test_quiescence_is_raised_instead_of_hanging(loop: SimEventLoop) -> None:
    async def stuck() -> None:
        await asyncio.sleep(2)
        await asyncio.Event().wait()

    with pytest.raises(SimQuiescent):
        loop.run_until_complete(stuck())
    assert loop.time() == 2.0
    # The loop is still usable afterwards.
    assert loop.run_until_complete(asyncio.sleep(1, result="ok")) == "ok"
    with pytest.raises(SimQuiescent):
        loop.run_forever()


def test_run_until_does_not_raise_quiescence(loop: SimEventLoop) -> None:
    loop.run_until(42)
    assert loop.time() == 42.0


# -------------------------------------------------------------- refusals


@pytest.mark.parametrize("name", _UNSUPPORTED)
def test_real_io_apis_are_refused(loop: SimEventLoop, name: str) -> None:
    with pytest.raises(SimUnsupported):
        getattr(loop, name)(None, None)


def test_run_in_executor_is_refused_inside_a_coroutine(loop: SimEventLoop) -> None:
    async def main() -> None:
        await asyncio.get_running_loop().run_in_executor(None, print)

    with pytest.raises(SimUnsupported):
        loop.run_until_complete(main())
    with pytest.raises(SimUnsupported):
        loop.run_until_complete(asyncio.to_thread(print))


# ------------------------------------------------------------ error records


def test_callback_exceptions_are_recorded() -> None:
    lp = SimEventLoop()
    try:
        a = ActorContext("a")

        def boom() -> None:
            raise KeyError("x")

        lp.call_later(1, boom)
        lp.call_soon_in(a, boom)
        lp.run_until(2)
        assert [(e.time_ns, e.actor, type(e.exception)) for e in lp.errors] == [
            (0, "a", KeyError),
            (1_000_000_000, None, KeyError),
        ]
        with pytest.raises(SimCallbackErrors, match="2 error"):
            lp.raise_errors()
    finally:
        lp.close()


def test_an_unretrieved_task_exception_is_recorded() -> None:
    lp = SimEventLoop()
    try:

        async def fails() -> None:
            raise RuntimeError("lost")

        lp.create_task(fails())
        lp.run_until(1)
        gc.collect()
        assert [type(e.exception) for e in lp.errors] == [RuntimeError]
        assert "never retrieved" in lp.errors[0].message
    finally:
        lp.close()


# ---------------------------------------------------------------- actors


def test_the_actor_context_follows_tasks_timers_and_callbacks(loop: SimEventLoop) -> None:
    a = ActorContext("a")
    seen: list[tuple[str, str | None]] = []

    def who(tag: str) -> None:
        actor = current_actor.get()
        seen.append((tag, None if actor is None else actor.name))

    async def child() -> None:
        who("child task")

    async def body() -> None:
        who("task")
        loop.call_later(1, who, "call_later")
        fut = loop.create_future()
        fut.add_done_callback(lambda _: who("future callback"))
        loop.call_soon(fut.set_result, None)
        await asyncio.create_task(child())
        await asyncio.sleep(2)

    who("driver")
    loop.run_until_complete(loop.spawn_in(a, body()))
    assert seen == [
        ("driver", None),
        ("task", "a"),
        ("child task", "a"),
        ("future callback", "a"),
        ("call_later", "a"),
    ]


def test_a_killed_actor_runs_nothing_more_and_no_finally(loop: SimEventLoop) -> None:
    a, b = ActorContext("a"), ActorContext("b")
    log: list[str] = []
    fut_from_b: asyncio.Future[str] = loop.create_future()

    async def victim() -> None:
        loop.call_later(5, log.append, "a timer")
        fut_from_b.add_done_callback(lambda _: log.append("a future callback"))
        try:
            while True:
                await asyncio.sleep(1)
                log.append(f"a tick {loop.time():.0f}")
        finally:
            log.append("a finally")

    async def child_of_victim() -> None:
        try:
            await fut_from_b
            log.append("a child resumed")
        finally:
            log.append("a child finally")

    async def survivor() -> None:
        for _ in range(6):
            await asyncio.sleep(1)
            log.append(f"b tick {loop.time():.0f}")
        fut_from_b.set_result("x")

    # Only weak references here: the loop alone must keep a dead actor's tasks
    # from being collected (collecting a coroutine closes it, running its finally).
    ta = weakref.ref(loop.spawn_in(a, victim()))
    tc = weakref.ref(loop.spawn_in(a, child_of_victim()))
    tb = loop.spawn_in(b, survivor())
    loop.run_until(2.5)
    assert log == ["a tick 1", "b tick 1", "a tick 2", "b tick 2"]
    loop.kill(a)
    assert loop.pending_timers() == 1  # only b's sleep: a's timers are gone at once
    loop.run_until(10)
    gc.collect()
    assert log[4:] == ["b tick 3", "b tick 4", "b tick 5", "b tick 6"]
    victim_task, child_task = ta(), tc()
    assert victim_task is not None and child_task is not None
    assert tb.done() and not victim_task.done() and not child_task.done()
    assert victim_task.cancel() is True  # a cancel is accepted but never delivered
    del victim_task, child_task
    loop.run_until(11)
    gc.collect()
    assert log[4:] == ["b tick 3", "b tick 4", "b tick 5", "b tick 6"]


def test_a_dead_actor_gets_no_new_work(loop: SimEventLoop) -> None:
    a = ActorContext("a")
    ran: list[str] = []

    async def never() -> None:
        ran.append("started")

    loop.kill(a)
    task = loop.spawn_in(a, never())
    h1 = loop.call_soon_in(a, ran.append, "soon")
    h2 = loop.call_later(1, ran.append, "later", context=a.new_context())
    assert h1.cancelled() and h2.cancelled()
    assert loop.pending_timers() == 0
    loop.run_until(5)
    gc.collect()
    assert ran == [] and not task.done()


def test_stalled_callbacks_wait_and_keep_their_order(loop: SimEventLoop) -> None:
    a, b = ActorContext("a"), ActorContext("b")
    log: list[tuple[str, float]] = []

    def note(tag: str) -> None:
        log.append((tag, loop.time()))

    for t in (1.0, 2.0, 3.0, 4.0):
        loop.call_at(t, note, f"a@{t:g}", context=a.new_context())
        loop.call_at(t, note, f"b@{t:g}", context=b.new_context())
    loop.call_at(1.5, lambda: loop.call_soon_in(a, note, "a soon@1.5"))
    loop.call_at(0.5, loop.stall, a, 2.5)  # a stalled during [0.5, 3.0)
    loop.run_until(5)
    assert log == [
        ("b@1", 1.0),
        ("b@2", 2.0),
        ("b@3", 3.0),  # scheduled before the stall's end (FIFO among equal times)
        ("a@1", 3.0),  # a's, in the order they came due
        ("a soon@1.5", 3.0),
        ("a@2", 3.0),
        ("a@3", 3.0),
        ("a@4", 4.0),
        ("b@4", 4.0),
    ]


def test_a_stall_extended_while_stalled_holds_until_the_end(loop: SimEventLoop) -> None:
    a = ActorContext("a")
    log: list[float] = []

    async def ticker() -> None:
        while True:
            await asyncio.sleep(1)
            log.append(loop.time())

    loop.spawn_in(a, ticker())
    loop.call_at(0.5, loop.stall, a, 1.0)  # until 1.5
    loop.call_at(1.0, loop.stall, a, 2.0)  # until 3.0
    loop.call_at(1.2, loop.stall, a, 0.1)  # shorter: ignored
    loop.run_until(5.2)
    # The tick due at 1 waits until 3; the task then sleeps 1 s from 3.
    assert log == [3.0, 4.0, 5.0]


def test_killing_a_stalled_actor_drops_its_deferred_callbacks(loop: SimEventLoop) -> None:
    a = ActorContext("a")
    log: list[str] = []
    loop.call_at(1, log.append, "a", context=a.new_context())
    loop.stall(a, 2)
    loop.call_at(1.5, loop.kill, a)
    loop.run_until(5)
    assert log == []


def test_close_ends_pending_actor_tasks_quietly() -> None:
    lp = SimEventLoop()
    a, b = ActorContext("a"), ActorContext("b")
    log: list[str] = []

    async def body(tag: str) -> None:
        try:
            await lp.create_future()
        finally:
            log.append(tag)
            lp.call_soon(log.append, f"{tag} scheduled from finally")

    lp.spawn_in(a, body("a"))
    lp.spawn_in(b, body("b"))
    lp.run_until(1)
    lp.kill(a)
    lp.run_until(2)
    gc.collect()
    assert log == []
    lp.close()
    gc.collect()
    # Closed once, at close, in start order; what they scheduled never runs.
    assert log == ["a", "b"]
    assert lp.errors == []


def test_finished_actor_tasks_are_not_kept(loop: SimEventLoop) -> None:
    a = ActorContext("a")

    async def short() -> None:
        await asyncio.sleep(0.001)

    first = weakref.ref(loop.spawn_in(a, short()))
    for _ in range(1000):
        loop.spawn_in(a, short())
    loop.run_until(1)
    # Later spawns prune the finished ones (once the table doubled: amortised).
    for _ in range(2100):
        loop.spawn_in(a, short())
    loop.run_until(2)
    gc.collect()
    assert first() is None
