"""A broker's share-partitions between requests (``actors.share.ShareService``) on asyncio."""

from __future__ import annotations

import asyncio

from actors.share import ShareService
from emulator.broker.share_fetch import ShareFetchRequest
from emulator.broker.share_partition import SharePartitionConfig
from emulator.modern.errors import Errors

TP = ("t", 0)


def service(hw: dict[tuple[str, int], int], events: list[dict[str, object]]) -> ShareService:
    loop = asyncio.get_running_loop()
    return ShareService(
        0,
        SharePartitionConfig(),
        "earliest",
        high_watermark=lambda tp: hw.get(tp, 0),
        log_start=lambda tp: 0,
        leads=lambda tp: True,
        now_ms=lambda: loop.time() * 1000.0,
        wall_seconds=lambda ms: ms / 1000.0,
        emit=lambda kind, **fields: events.append({"kind": kind, **fields}),
        zk=lambda: None,
    )


def test_a_fetch_on_an_idle_partition_is_answered_at_its_max_wait() -> None:
    """Nothing else wakes the timers (no records, no locks): the parked fetch must
    (it once waited for the next produce, and a member's close behind it hung)."""

    async def go() -> float:
        svc = service({}, [])
        svc.start()
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        req = ShareFetchRequest(1, "g", "m", 0, (TP,), max_wait_ms=50.0)
        answer = await asyncio.wait_for(svc.fetch(req), 5.0)
        assert answer.error is Errors.NONE and answer.corr == 1
        assert all(not p.acquired for p in answer.partitions)
        await svc.stop()
        return loop.time() - t0

    took = asyncio.run(go())
    assert 0.04 <= took < 2.0


def test_records_arriving_answer_a_waiting_fetch_and_are_logged() -> None:
    async def go() -> list[dict[str, object]]:
        hw: dict[tuple[str, int], int] = {}
        events: list[dict[str, object]] = []
        svc = service(hw, events)
        svc.start()
        req = ShareFetchRequest(1, "g", "m", 0, (TP,), max_wait_ms=5_000.0)
        task = asyncio.ensure_future(svc.fetch(req))
        await asyncio.sleep(0.01)
        assert not task.done()
        hw[TP] = 3
        svc.notify()  # an append moved the high watermark
        answer = await asyncio.wait_for(task, 2.0)
        (part,) = answer.partitions
        assert [(a.first, a.last, a.delivery_count) for a in part.acquired] == [(0, 2, 1)]
        await svc.stop()
        return events

    events = asyncio.run(go())
    assert [(e["state"], e["offset_start"], e["offset_end"], e["member_id"]) for e in events] == [
        ("acquired", 0, 3, "m")
    ]
