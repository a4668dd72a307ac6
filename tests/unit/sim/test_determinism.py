"""A random workload on the sim loop replays exactly from its seed (design §4.4).

Many actors sleep for drawn times, pass messages over links into queues, reply
from child tasks, and suffer a kill, a stall, a link going down and a
blackhole; the trace of everything that happened is the same on every run of a
seed (also under another ``PYTHONHASHSEED``) and differs between seeds.
"""

from __future__ import annotations

import asyncio
import hashlib

from emulator.sim.loop import ActorContext, SimEventLoop
from emulator.sim.network import LinkMode, LinkRefused, Network
from emulator.sim.rng import Streams, chance, uniform_ns
from tests.unit.sim.hashseed import output_under_hash_seed

ACTORS = 8
ROUNDS = 25

Trace = list[tuple[object, ...]]


def run_workload(seed: int) -> Trace:
    """Run the workload for ``seed`` and return its trace."""
    loop = SimEventLoop()
    streams = Streams(seed)
    net = Network(loop, streams)
    actors = [ActorContext(f"a{i}") for i in range(ACTORS)]
    inbox = {a.name: asyncio.Queue[tuple[str, int]]() for a in actors}
    trace: Trace = []
    replies: list[asyncio.Task[None]] = []

    def on_error(src: str, dst: str, err: LinkRefused) -> None:
        trace.append((loop.now_ns, "refused", src, dst))

    def deliver(dst: ActorContext, src: str, payload: int) -> None:
        inbox[dst.name].put_nowait((src, payload))

    def send(src: ActorContext, dst: ActorContext, payload: int) -> None:
        net.send(
            src,
            dst,
            deliver,
            dst,
            src.name,
            payload,
            on_error=lambda err: on_error(src.name, dst.name, err),
        )

    async def reply(me: ActorContext, to: ActorContext, payload: int) -> None:
        rng = streams.stream(f"actor/{me.name}/reply")
        await asyncio.sleep(uniform_ns(rng, 0, 5_000_000) / 1e9)
        send(me, to, -payload)

    async def receiver(me: ActorContext) -> None:
        rng = streams.stream(f"actor/{me.name}/recv")
        while True:
            src, payload = await inbox[me.name].get()
            trace.append((loop.now_ns, "recv", me.name, src, payload))
            if payload > 0 and chance(rng, 400_000):
                replies.append(asyncio.create_task(reply(me, actors[int(src[1:])], payload)))

    async def sender(me: ActorContext) -> None:
        rng = streams.stream(f"actor/{me.name}/send")
        for i in range(ROUNDS):
            await asyncio.sleep(uniform_ns(rng, 0, 40_000_000) / 1e9)
            dst = actors[rng.randrange(ACTORS)]
            payload = rng.getrandbits(20) + 1
            trace.append((loop.now_ns, "send", me.name, dst.name, i, payload))
            send(me, dst, payload)

    for a in actors:
        loop.spawn_in(a, receiver(a))
        loop.spawn_in(a, sender(a))
    loop.call_at(0.2, loop.kill, actors[3])
    loop.call_at(0.1, loop.stall, actors[5], 0.03)
    loop.call_at(0.15, lambda: net.link(actors[0], actors[1]).set_mode(LinkMode.DOWN))
    loop.call_at(0.35, lambda: net.link(actors[0], actors[1]).set_mode(LinkMode.PASS))
    loop.call_at(0.05, lambda: net.link(actors[2], actors[4]).set_mode(LinkMode.BLACKHOLE))
    try:
        loop.run_until(2.0)
        loop.raise_errors()
        trace.append(("end", loop.now_ns, [(lk.src, lk.sent, lk.delivered) for lk in net.links()]))
    finally:
        loop.close()
    return trace


def trace_digest(seed: int) -> str:
    """sha256 of the trace's repr."""
    return hashlib.sha256(repr(run_workload(seed)).encode()).hexdigest()


def test_the_same_seed_gives_the_same_trace() -> None:
    first, second = run_workload(11), run_workload(11)
    kinds = {e[1] for e in first if isinstance(e[0], int)}
    assert kinds == {"send", "recv", "refused"}
    assert sum(1 for e in first if e[1] == "recv") > 100
    assert first == second


def test_another_seed_gives_another_trace() -> None:
    assert run_workload(11) != run_workload(12)


def test_the_trace_does_not_depend_on_the_hash_seed() -> None:
    code = "from tests.unit.sim.test_determinism import trace_digest; print(trace_digest(11))"
    digests = {output_under_hash_seed(code, h, 120).strip() for h in ("0", "12345")}
    assert digests == {trace_digest(11)}


def test_the_killed_actor_stops_and_the_stalled_one_catches_up() -> None:
    times: dict[str, set[int]] = {}
    for event in run_workload(11):
        t, actor = event[0], event[2]
        if isinstance(t, int) and isinstance(actor, str):
            times.setdefault(actor, set()).add(t)
    assert times["a3"] and max(times["a3"]) < 200_000_000
    assert not any(100_000_000 < t < 130_000_000 for t in times["a5"])
    assert 130_000_000 in times["a5"]
