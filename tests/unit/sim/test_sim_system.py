"""The sim engine's actor system: calls, copies, death, start-up, the driver's waits."""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

import pytest

from actors.sim.system import (
    START_DELAY_NS,
    SimActorDied,
    SimActorSystem,
    SimGetTimeout,
    SimHandle,
)
from actors.system import ActorSystem
from emulator.broker.messages import OffsetsSnapshot, ReplicaFetchAnswer
from emulator.sim.loop import SimEventLoop, current_actor
from emulator.sim.network import Network
from emulator.sim.rng import Streams


class Echo:
    """A toy actor: sync and async methods, state, calls to a peer."""

    def __init__(self, tag: str, log: list[str]) -> None:
        self.tag = tag
        self.log = log
        self.items: list[int] = []
        actor = current_actor.get()
        self.log.append(f"{tag} built in {actor.name if actor else None}")

    def add(self, items: list[int]) -> int:
        items.append(-1)  # the caller's list must not see this
        self.items.extend(items)
        return len(self.items)

    def fail(self) -> None:
        raise KeyError("no such thing")

    async def slow(self, seconds: float) -> str:
        try:
            await asyncio.sleep(seconds)
            self.log.append(f"{self.tag} slept {seconds}")
            return f"{self.tag} done"
        finally:
            self.log.append(f"{self.tag} finally")

    async def ask(self, peer: Any, n: int) -> int:
        return int(await peer.add.remote([n]))

    def keep(self, value: object) -> object:
        return value

    def whoami(self) -> str | None:
        actor = current_actor.get()
        return actor.name if actor else None


def make(seed: int = 1, copy: bool = True) -> tuple[SimActorSystem, list[str]]:
    loop = SimEventLoop()
    streams = Streams(seed)
    log: list[str] = []
    system = SimActorSystem(
        loop,
        streams,
        Network(loop, streams),
        {"echo": lambda tag: Echo(tag, log)},
        copy_messages=copy,
    )
    return system, log


def test_it_is_an_actor_system() -> None:
    system, _ = make()
    as_protocol: ActorSystem = system
    assert as_protocol.engine == "sim"
    assert system.hostname() == "sim"
    assert system.actor_options(None, "brokers") == {}


def test_a_call_runs_in_the_actor_and_takes_virtual_time() -> None:
    system, log = make()
    h = system.spawn("echo", ("a",))
    assert system.get(h.whoami.remote(), 5) == "echo-0"
    assert log == ["a built in echo-0"]
    # built after the start delay, answered two link latencies later
    lo, hi = START_DELAY_NS
    assert lo / 1e9 < system.monotonic() < hi / 1e9 + 0.002
    t0 = system.monotonic()
    assert system.get(h.slow.remote(30.0), 60) == "a done"
    assert 30.0 < system.monotonic() - t0 < 30.002


def test_arguments_and_results_are_copied_but_handles_pass_through() -> None:
    system, _ = make()
    a = system.spawn("echo", ("a",))
    b = system.spawn("echo", ("b",))
    mine = [1, 2]
    assert system.get(a.add.remote(mine), 5) == 3
    assert mine == [1, 2]
    assert system.get(a.ask.remote(b, 7), 5) == 2  # b got [7, -1]
    assert isinstance(b, SimHandle)


def test_an_offsets_snapshot_is_immutable_and_passes_as_itself() -> None:
    """A leader's ``__consumer_offsets`` snapshot needs no copy; what holds it is copied."""
    system, _ = make()
    a = system.spawn("echo", ("a",))
    snap = OffsetsSnapshot({"g": {("t", 0): 7}})
    answer = {("__consumer_offsets", 3): ReplicaFetchAnswer(1, 1, 0, snap)}
    got = system.get(a.keep.remote(answer), 5)
    assert got == answer and got is not answer
    assert got[("__consumer_offsets", 3)].offsets is snap
    # Equal to the plain offsets it holds; across processes (Ray) it pickles to an equal copy.
    assert snap == {"g": {("t", 0): 7}} and len(snap) == 1 and list(snap) == ["g"]
    again = pickle.loads(pickle.dumps(snap))
    assert again == snap and again is not snap and isinstance(again, OffsetsSnapshot)
    assert not hasattr(snap, "__setitem__")  # a Mapping: read-only


def test_without_copies_the_same_objects_are_shared() -> None:
    system, _ = make(copy=False)
    a = system.spawn("echo", ("a",))
    mine = [1]
    system.get(a.add.remote(mine), 5)
    assert mine == [1, -1]


def test_an_exception_in_the_actor_reaches_the_caller() -> None:
    system, _ = make()
    a = system.spawn("echo", ("a",))
    with pytest.raises(KeyError, match="no such thing"):
        system.get(a.fail.remote(), 5)


def test_a_get_timeout_is_virtual_and_leaves_the_call_running() -> None:
    system, log = make()
    a = system.spawn("echo", ("a",))
    ref = a.slow.remote(100.0)
    with pytest.raises(SimGetTimeout):
        system.get(ref, 10.0)
    assert 10.0 <= system.monotonic() < 10.001
    assert system.get(ref, 200.0) == "a done"
    assert "a slept 100.0" in log


def test_wait_returns_what_is_done_in_time() -> None:
    system, _ = make()
    a = system.spawn("echo", ("a",))
    fast, slow = a.slow.remote(1.0), a.slow.remote(50.0)
    assert system.wait([fast, slow], 5.0) == [fast]
    assert system.wait([fast, slow], 100.0) == [fast, slow]


def test_killing_an_actor_fails_its_calls_runs_none_of_its_code_and_frees_its_name() -> None:
    system, log = make()
    a = system.spawn("echo", ("a",), name="broker-x")
    assert system.lookup("broker-x") is a
    ref = a.slow.remote(10.0)
    system.sleep(5.0)
    system.kill(a)
    with pytest.raises(SimActorDied):
        system.get(ref, 1)
    with pytest.raises(SimActorDied):
        system.get(a.whoami.remote(), 1)
    system.sleep(20.0)
    assert "a slept 10.0" not in log and "a finally" not in log  # no finally, as ray.kill
    assert system.lookup("broker-x") is None
    b = system.spawn("echo", ("b",), name="broker-x")
    assert system.lookup("broker-x") is b
    with pytest.raises(ValueError, match="alive"):
        system.spawn("echo", ("c",), name="broker-x")


def test_calls_made_before_the_actor_is_built_are_held_in_order() -> None:
    system, _ = make()
    a = system.spawn("echo", ("a",))
    refs = [a.add.remote([i]) for i in range(5)]
    assert system.get(refs, 5) == [2, 4, 6, 8, 10]
    inst = a.instance
    assert inst is not None and inst.items == [0, -1, 1, -1, 2, -1, 3, -1, 4, -1]


def test_killing_an_actor_during_its_start_fails_the_held_calls() -> None:
    system, log = make()
    a = system.spawn("echo", ("a",))
    ref = a.whoami.remote()
    system.kill(a)
    with pytest.raises(SimActorDied):
        system.get(ref, 5)
    system.sleep(2.0)
    assert log == []  # never built


def trace(seed: int) -> list[tuple[int, Any]]:
    system, _ = make(seed)
    hs = [system.spawn("echo", (f"e{i}",)) for i in range(4)]
    out: list[tuple[int, Any]] = []
    refs = [h.ask.remote(hs[(i + 1) % 4], i) for i, h in enumerate(hs) for _ in range(3)]
    for r in refs:
        out.append((system.loop.now_ns, system.get(r, 5)))
    return out


def test_the_same_seed_gives_the_same_schedule_and_another_does_not() -> None:
    assert trace(3) == trace(3)
    assert trace(3) != trace(4)


def test_a_sleep_never_falls_short_of_its_deadline() -> None:
    system, _ = make()
    t0 = system.loop.now_ns
    system.sleep(1e-13)  # rounds to 0 ns: it must still move time on
    assert system.loop.now_ns == t0 + 1
    deadline = system.monotonic() + 0.3
    system.sleep(deadline - system.monotonic())
    assert system.monotonic() >= deadline
