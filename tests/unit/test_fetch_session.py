"""The broker's fetch sessions: parked fetches, the long poll, withdrawals, leader moves.

The broker core runs in-process on asyncio (no Ray, no ZooKeeper): a broker
given its partitions leads them alone, so a produce commits at once.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from actors.broker import BrokerCore
from actors.context import RunContext
from emulator.broker.messages import NOT_LEADER

T = "t"
WAIT_MS = 300.0  # fetch.max.wait.ms of these tests (time scale 1: wall ms)
Add = tuple[int, str, int, int | None, str, int]


def broker(tmp_path: Path) -> BrokerCore:
    ctx = RunContext(
        run_id="fetch-session",
        protocol="zookeeper",
        events_dir=str(tmp_path / "events"),
        time_scale=1.0,
        origin_wall=time.time(),
        zk_connect="",
        zk_hosts=(),
        seed=1,
        group="g",
        leaders={(T, 0): 0, (T, 1): 0},
    )
    return BrokerCore(0, ctx, [(T, 0), (T, 1)], 9092)


def add(slot: int, partition: int, offset: int | None) -> Add:
    return (slot, T, partition, offset, "smallest", 100)


def test_data_is_answered_at_once_and_an_empty_fetch_parks_until_data(tmp_path: Path) -> None:
    async def go() -> None:
        b = broker(tmp_path)
        await b.produce({(T, 0): 5})
        t0 = time.monotonic()
        got = await b.fetch_session("h", True, [add(1, 0, 0), add(2, 1, 0)], [], WAIT_MS)
        assert got == [(1, 0, 5)]  # partition 1 has nothing: parked, not answered
        assert time.monotonic() - t0 < WAIT_MS / 1000 / 2  # data there: no wait
        assert set(b.fetch_sessions["h"].parked) == {2}

        # Nothing arrives: the long poll ends empty after fetch.max.wait.ms.
        t0 = time.monotonic()
        assert await b.fetch_session("h", False, [], [], WAIT_MS) == []
        assert time.monotonic() - t0 >= WAIT_MS / 1000 * 0.9

        # Data arrives while the call waits: answered then, not at the wait's end.
        call = asyncio.ensure_future(b.fetch_session("h", False, [], [], 10_000.0))
        await asyncio.sleep(0.05)
        assert not call.done()
        t0 = time.monotonic()
        await b.produce({(T, 1): 3})
        assert await asyncio.wait_for(call, 2.0) == [(2, 0, 3)]
        assert time.monotonic() - t0 < 1.0
        assert not b.fetch_sessions["h"].parked and not b._parked

    asyncio.run(go())


def test_a_withdrawn_fetch_is_never_answered(tmp_path: Path) -> None:
    async def go() -> None:
        b = broker(tmp_path)
        assert await b.fetch_session("h", True, [add(1, 0, 0), add(2, 1, 0)], [], 0.0) == []
        assert await b.fetch_session("h", False, [], [1], 0.0) == []
        await b.produce({(T, 0): 4, (T, 1): 4})
        assert await b.fetch_session("h", False, [], [], WAIT_MS) == [(2, 0, 4)]

    asyncio.run(go())


def test_a_parked_fetch_gets_not_leader_when_the_partition_moves(tmp_path: Path) -> None:
    async def go() -> None:
        b = broker(tmp_path)
        await b.produce({(T, 0): 2})
        assert await b.fetch_session("h", True, [add(7, 0, 2)], [], 0.0) == []
        call = asyncio.ensure_future(b.fetch_session("h", False, [], [], 10_000.0))
        await asyncio.sleep(0.05)
        # The controller makes broker 1 the leader (epoch 1): this one follows.
        b.leader_and_isr({(T, 0): (1, 1, (1,), 0, 1)}, [0, 1], {(T, 0): [1, 0]})
        assert await asyncio.wait_for(call, 2.0) == [(7, NOT_LEADER, NOT_LEADER)]

    asyncio.run(go())


def test_a_new_session_drops_what_the_old_one_parked(tmp_path: Path) -> None:
    async def go() -> None:
        b = broker(tmp_path)
        assert await b.fetch_session("h", True, [add(1, 0, 0)], [], 0.0) == []
        # The host lost its session (a failed call) and starts again with slot 2.
        assert await b.fetch_session("h", True, [add(2, 0, 0)], [], 0.0) == []
        assert set(b.fetch_sessions["h"].parked) == {2}
        assert b._parked == {(T, 0): {("h", 2): None}}
        # Sessions are the host's own: another host's fetch of the partition is apart.
        assert await b.fetch_session("other", True, [add(2, 0, 0)], [], 0.0) == []
        await b.produce({(T, 0): 1})
        assert await b.fetch_session("h", False, [], [], WAIT_MS) == [(2, 0, 1)]
        assert await b.fetch_session("other", False, [], [], WAIT_MS) == [(2, 0, 1)]

    asyncio.run(go())
