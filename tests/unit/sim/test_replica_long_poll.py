"""The replica fetch as Kafka's long poll, on the sim loop's virtual clock (both engines' code).

The broker shells (:class:`actors.broker.BrokerCore`, the real engine's class)
run on a :class:`~emulator.sim.loop.SimEventLoop` without ZooKeeper: a leader
parks a follower's fetch that finds nothing new and answers it in the same
virtual instant as an append or a leader move, or after
``replica.fetch.wait.max.ms`` (scaled); a follower's fetcher sends its next
fetch as soon as it applied an answer, so an ``acks=all`` produce is committed
one round trip after the append, and an idle follower fetches every
``replica.fetch.wait.max.ms`` and stays in the ISR.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest

from actors.broker import BrokerCore
from actors.context import RunContext
from actors.metadata import LeaderCache
from actors.orchestrator import run_scenario
from actors.sim.run import SimEngine
from emulator.broker.messages import NOT_LEADER, ProduceAnswer, ReplicaFetchAnswer
from emulator.eventlog import iter_events
from emulator.events import EventKind
from emulator.scenario import parse_scenario
from emulator.sim.clocks import VirtualClocks
from emulator.sim.loop import SimEventLoop

T = "t"
TP = (T, 0)
TIME_SCALE = 0.5
WAIT_S = 0.5 * TIME_SCALE  # replica.fetch.wait.max.ms = 500, scaled
LATENCY_S = 0.001  # one way, each call and each answer


def context(loop: SimEventLoop, tmp_path: Path, name: str, **kafka: object) -> RunContext:
    clocks = VirtualClocks(loop)
    return RunContext(
        run_id=f"long-poll-{name}",
        protocol="zookeeper",
        events_dir=str(tmp_path / name),
        time_scale=TIME_SCALE,
        origin_wall=clocks.wall(),
        zk_connect="",
        zk_hosts=(),
        seed=1,
        group="g",
        kafka=dict(kafka),
        leaders={TP: 0},
        engine="sim",
        mono=clocks.mono,
        wall=clocks.wall,
    )


def leader_of_tp(loop: SimEventLoop, tmp_path: Path, **kafka: object) -> BrokerCore:
    """Broker 0 leading ``TP``, replicated on brokers 0 and 1 (both in the ISR)."""
    b = BrokerCore(0, context(loop, tmp_path, "b0", **kafka), [TP], 9092)
    b.leader_and_isr({TP: (0, 1, (0, 1), 0, 1)}, [0, 1], {TP: [0, 1]})
    return b


class _Call:
    def __init__(self, target: Any, method: str) -> None:
        self._target = target
        self._method = method

    def remote(self, *args: Any) -> asyncio.Task[Any]:
        async def travel() -> Any:
            await asyncio.sleep(LATENCY_S)
            result = await getattr(self._target, self._method)(*args)
            await asyncio.sleep(LATENCY_S)
            return result

        return asyncio.ensure_future(travel())


class Peer:
    """A broker's handle with :data:`LATENCY_S` each way (``handle.method.remote(...)``)."""

    def __init__(self, target: BrokerCore) -> None:
        self._target = target

    def __getattr__(self, method: str) -> _Call:
        return _Call(self._target, method)


def arrivals_s(leader: BrokerCore) -> list[float]:
    """When the fetches parked at ``leader`` arrived, virtual seconds."""
    return [
        (w.wait_until_ms - 500.0) / 1000.0 * TIME_SCALE
        for w in leader.manager.replica_waits.waits.values()
    ]


def run(loop: SimEventLoop, coro: Coroutine[Any, Any, None]) -> None:
    loop.run_until_complete(loop.create_task(coro))


def test_a_parked_fetch_is_answered_in_the_instant_of_an_append(
    loop: SimEventLoop, tmp_path: Path
) -> None:
    async def go() -> None:
        b = leader_of_tp(loop, tmp_path)
        call = asyncio.ensure_future(b.replica_fetch(1, {TP: 0}))
        await asyncio.sleep(0.2)
        assert not call.done() and len(b.manager.replica_waits.waits) == 1
        produce = asyncio.ensure_future(b.produce({TP: 3}))
        assert await call == {TP: ReplicaFetchAnswer(3, 0, 0, None)}
        assert loop.time() == 0.2  # the append's instant
        # The follower's next fetch reports its LEO: the HW covers the batch, acked now.
        again = asyncio.ensure_future(b.replica_fetch(1, {TP: 3}))
        assert await produce == {TP: ProduceAnswer(0, 3)}
        assert loop.time() == 0.2
        # That fetch finds nothing new: it is held for replica.fetch.wait.max.ms (scaled).
        assert await again == {TP: ReplicaFetchAnswer(3, 3, 0, None)}
        assert loop.time() == pytest.approx(0.2 + WAIT_S, abs=1e-9)
        assert b.manager.replica_waits.waits == {} and b._replica_wakes == {}
        await b.stop()

    run(loop, go())


def test_a_parked_fetch_is_answered_not_leader_when_the_leader_moves(
    loop: SimEventLoop, tmp_path: Path
) -> None:
    async def go() -> None:
        b = leader_of_tp(loop, tmp_path)
        call = asyncio.ensure_future(b.replica_fetch(1, {TP: 0}))
        await asyncio.sleep(0.1)
        b.leader_and_isr({TP: (1, 2, (1,), 0, 2)}, [0, 1], {TP: [0, 1]})
        got = await call
        assert got[TP].new_leo == NOT_LEADER and loop.time() == 0.1
        await b.stop()

    run(loop, go())


def test_a_stopping_leader_answers_its_parked_fetches(loop: SimEventLoop, tmp_path: Path) -> None:
    async def go() -> None:
        b = leader_of_tp(loop, tmp_path)
        call = asyncio.ensure_future(b.replica_fetch(1, {TP: 0}))
        await asyncio.sleep(0.05)
        await b.stop()
        assert await call == {TP: ReplicaFetchAnswer(0, 0, 0, None)}
        assert loop.time() == 0.05 and b.manager.replica_waits.waits == {}

    run(loop, go())


def test_a_follower_fetches_again_at_once_so_acks_all_takes_one_round_trip(
    loop: SimEventLoop, tmp_path: Path
) -> None:
    # replica.lag.time.max.ms just above the fetch wait: an idle follower that
    # fetched any less often than every long poll would fall out of the ISR.
    lag = {"replica.lag.time.max.ms": 520}

    async def go() -> None:
        leader = leader_of_tp(loop, tmp_path, **lag)
        follower = BrokerCore(1, context(loop, tmp_path, "b1", **lag), [], 9093)
        follower.peers = LeaderCache(follower.ctx, {0: Peer(leader)})
        fetching = asyncio.ensure_future(follower._replica_fetch_loop())
        await asyncio.sleep(1.0)
        assert leader.replica_fetch_calls == 0  # it follows nothing yet
        follower.leader_and_isr({TP: (0, 1, (0, 1), 0, 1)}, [0, 1], {TP: [0, 1]})
        await asyncio.sleep(3 * LATENCY_S)
        # Its first fetch left at once (no tick) and, with nothing to copy, is parked.
        assert leader.replica_fetch_calls == 1
        assert arrivals_s(leader) == [pytest.approx(1.0 + LATENCY_S)]

        await asyncio.sleep(2.0 - loop.time())
        t0 = loop.time()
        assert await leader.produce({TP: 5}) == {TP: ProduceAnswer(0, 5)}
        # The parked fetch carries the batch out, the next one reports it: one round trip.
        assert loop.time() - t0 == pytest.approx(2 * LATENCY_S, abs=1e-9)
        assert follower.manager.replicas[TP].leo == 5

        # An idle minute: a fetch per long poll, and the follower stays in sync.
        calls = leader.replica_fetch_calls
        rep = leader.manager.replicas[TP]
        for _ in range(600):
            await asyncio.sleep(0.1)
            now = leader.clock.now_ms()
            assert now - rep.follower_update_ms[1] <= 500 + 4 * LATENCY_S / TIME_SCALE * 1000
            assert leader.manager.begin_shrink(TP, rep, now) is None
        per_fetch_s = WAIT_S + 2 * LATENCY_S
        assert leader.replica_fetch_calls - calls == pytest.approx(60 / per_fetch_s, abs=2)
        assert follower.manager.replicas[TP].hw == 5  # the HW came with a later answer

        fetching.cancel()
        fetchers = list(follower._fetchers.values())
        await follower.stop()
        await asyncio.gather(*fetchers, return_exceptions=True)
        assert follower._fetchers == {} and all(t.cancelled() for t in fetchers)
        await leader.stop()

    run(loop, go())


def test_a_new_leader_is_fetched_from_at_once_and_an_old_fetcher_ends(
    loop: SimEventLoop, tmp_path: Path
) -> None:
    async def go() -> None:
        old = leader_of_tp(loop, tmp_path)
        new = BrokerCore(2, context(loop, tmp_path, "b2"), [], 9094)
        follower = BrokerCore(1, context(loop, tmp_path, "b1"), [], 9093)
        follower.peers = LeaderCache(follower.ctx, {0: Peer(old), 2: Peer(new)})
        fetching = asyncio.ensure_future(follower._replica_fetch_loop())
        follower.leader_and_isr({TP: (0, 1, (0, 1), 0, 1)}, [0, 1, 2], {TP: [0, 1, 2]})
        await asyncio.sleep(0.1)
        assert set(follower._fetchers) == {0}
        # The controller moves TP to broker 2: broker 2 leads, then the follower hears it.
        new.leader_and_isr({TP: (2, 1, (2, 1), 0, 2)}, [0, 1, 2], {TP: [0, 1, 2]})
        follower.leader_and_isr({TP: (2, 1, (2, 1), 0, 2)}, [0, 1, 2], {TP: [0, 1, 2]})
        await asyncio.sleep(3 * LATENCY_S)
        assert new.replica_fetch_calls == 1
        assert arrivals_s(new) == [pytest.approx(0.1 + LATENCY_S)]
        assert set(follower._fetchers) == {0, 2}  # broker 0's fetch is still parked there
        # The fetch still parked at broker 0 runs out; then its fetcher has nothing left.
        await asyncio.sleep(WAIT_S)
        assert [b for b, t in follower._fetchers.items() if not t.done()] == [2]
        assert old.manager.replica_waits.waits == {}
        fetching.cancel()
        for b in (follower, old, new):
            await b.stop()

    run(loop, go())


# ---------------------------------------------------------------- a whole sim run

RUN = """
name = "long-poll"
description = "a busy and an idle replicated topic on three brokers, one consumer"
seed = 5
duration_s = 60.0
time_scale = 0.5

[cluster]
brokers = 3
zookeeper_ensemble = 1

[[topics]]
name = "busy"
partitions = 3
replication_factor = 3

[[topics]]
name = "idle"
partitions = 3
replication_factor = 3

[producer]
rate_per_s = 20.0
topics = ["busy"]

[group]
id = "g"
consumers = 1
topics = ["busy"]

[kafka]
"replica.lag.time.max.ms" = 1000
"""


def test_a_sim_run_commits_in_a_round_trip_and_keeps_idle_followers_in_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    latencies: list[float] = []
    produce = BrokerCore.produce

    async def timed(self: BrokerCore, batch: dict[tuple[str, int], int]) -> Any:
        t0 = asyncio.get_running_loop().time()
        answer = await produce(self, batch)
        latencies.append(asyncio.get_running_loop().time() - t0)
        return answer

    monkeypatch.setattr(BrokerCore, "produce", timed)
    scenario = parse_scenario(RUN, "long-poll.toml")
    results = run_scenario(scenario, ["zookeeper"], tmp_path / "run", engine=SimEngine(seed=5))
    assert [r.status for r in results] == ["completed"]
    assert results[0].summary.produced > 500
    # acks=all: the followers' parked fetches carry a batch out at once and their next
    # fetches move the HW, about one Ray round trip (~1 ms): not a 250 ms long poll,
    # nor the 25-50 ms of the 25 ms polling it replaced.
    latencies.sort()
    assert len(latencies) > 100
    assert latencies[len(latencies) // 2] < 0.005
    assert latencies[int(len(latencies) * 0.99)] < 0.02
    # No ISR ever shrank, idle topic included, with replica.lag.time.max.ms at 1000.
    events = tmp_path / "run" / "zookeeper" / "events"
    shrinks = [
        e
        for path in sorted(events.glob("broker-*.msgpack"))
        for e in iter_events(path)
        if e["kind"] == EventKind.ISR_CHANGED.value and e.get("reason") == "shrink"
    ]
    assert shrinks == []
