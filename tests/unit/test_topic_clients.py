"""Clients and the broker's metadata when topics come and go: no Ray, no ZooKeeper server.

* :class:`~emulator.host.metadata.LeaderMap`: an answer replaces the map; a topic
  it lacks is *absent* (the starting map is not read for it), and a topic asked
  about while missing is named in the next request.
* :class:`~actors.metadata.LeaderCache`: that request is ``metadata(topics, True)``
  only for a client that may auto-create (the 0.8 clients'
  ``ClientUtils.fetchTopicMetadata``, the producers, ``allow.auto.create.topics``).
* :class:`~actors.broker.BrokerCore.metadata`: such a request for a topic missing
  from the metadata cache creates it with ``num.partitions`` and
  ``default.replication.factor`` (K@0.8.2.2 ``KafkaApis.getTopicMetadata``
  499-529), leaving the reason ``auto`` for the controller's event.
* :class:`~actors.producer.ProducerCore`: messages for a deleted topic are
  dropped and logged, never sent; a re-created topic's partition count comes
  from the metadata.
"""

from __future__ import annotations

import asyncio
import json
import types
from pathlib import Path
from typing import Any

from actors.broker import BrokerCore
from actors.metadata import LeaderCache
from actors.producer import ProducerCore
from emulator.broker.messages import UNKNOWN_TOPIC_OR_PARTITION, ProduceAnswer
from emulator.eventlog import iter_events
from emulator.events import EventKind
from emulator.host.metadata import LeaderMap
from tests.unit.loop_time import ManualTimeLoop, run_on
from tests.unit.test_actor_io import FakeIO, _ctx, _Method, _until

TP = tuple[str, int]


# --------------------------------------------------------------------------- LeaderMap


def test_an_answer_replaces_the_map_and_a_topic_it_lacks_is_absent() -> None:
    start = {("a", 0): 0, ("a", 1): 1, ("b", 0): 2}
    lm = LeaderMap(start, start, backoff_s=0.2)
    assert lm.topic_partitions("a") == 2 and lm.absent == set()
    lm.answered({("a", 0): 0, ("a", 1): 1})  # "b" was deleted
    assert lm.absent == {"b"} and lm.topic_partitions("b") is None
    assert lm.leader(("b", 0)) is None and lm.stale  # the starting map is not read for it
    assert lm.take_wanted() == ["b"] and lm.take_wanted() == []  # named once
    lm.answered({("a", 0): 0, ("a", 1): 1, ("b", 0): 1})  # created again, one partition
    assert lm.absent == set() and lm.topic_partitions("b") == 1 and lm.leader(("b", 0)) == 1


def test_a_topic_re_created_with_fewer_partitions_loses_the_old_ones() -> None:
    lm = LeaderMap({}, {}, backoff_s=0.2)
    lm.answered({("t", 0): 0, ("t", 1): 1, ("t", 2): 2})
    lm.answered({("t", 0): 2})
    assert lm.leader(("t", 2)) is None and lm.topic_partitions("t") == 1
    assert lm.take_wanted() == []  # the topic exists: only the partition is unknown


def test_a_partition_without_a_leader_of_a_topic_that_exists_is_not_wanted() -> None:
    lm = LeaderMap({}, {}, backoff_s=0.2)
    assert lm.leader(("new", 0)) is None  # nothing answered yet: asked for by name
    lm.answered({("t", 0): -1})
    assert lm.leader(("t", 0)) is None
    assert lm.take_wanted() == ["new"]


# --------------------------------------------------------------------------- LeaderCache


class _MetadataBroker:
    """A broker handle whose ``metadata.remote(*args)`` records the arguments."""

    def __init__(self, leaders: dict[TP, int]) -> None:
        self.leaders = leaders
        self.calls: list[tuple[Any, ...]] = []
        self.metadata = self

    def remote(self, *args: Any) -> asyncio.Future[dict[TP, int]]:
        self.calls.append(args)
        fut: asyncio.Future[dict[TP, int]] = asyncio.get_running_loop().create_future()
        fut.set_result(dict(self.leaders))
        return fut


def test_the_leader_cache_names_missing_topics_only_when_it_may_create_them(
    tmp_path: Path,
) -> None:
    def calls(auto: bool) -> list[tuple[Any, ...]]:
        loop = ManualTimeLoop(now=100.0)

        async def go() -> list[tuple[Any, ...]]:
            broker = _MetadataBroker({("t", 0): 0})
            cache = LeaderCache(_ctx(tmp_path), {0: broker}, auto_create_topics=auto)
            await cache.refresh()  # the first answer: "gone" is not in it
            assert cache.leader(("gone", 0)) is None
            loop.now += 1.0
            await cache.refresh()
            return broker.calls

        return run_on(loop, go())

    assert calls(True) == [(), (["gone"], True)]
    assert calls(False) == [(), ()]


# --------------------------------------------------------------------------- broker


def test_a_metadata_request_naming_a_missing_topic_creates_it(tmp_path: Path) -> None:
    io = FakeIO()
    ctx = _ctx(tmp_path, kafka={"num.partitions": 2})

    async def go() -> tuple[dict[str, tuple[bytes | None, Any]], dict[TP, int]]:
        b = BrokerCore(0, ctx, [], 9092, io=io)
        await b.start(with_controller=False)
        raw = b._zk.kazoo  # type: ignore[union-attr]
        answer = await b.metadata(["made"], allow_auto_create=True)
        await b.metadata(["other"])  # not allowed by the client: nothing
        await b.stop()
        return raw.nodes, answer

    nodes, answer = asyncio.run(go())
    assignment = json.loads(nodes["/brokers/topics/made"][0] or b"")
    assert sorted(assignment["partitions"]) == ["0", "1"]  # num.partitions
    assert all(len(r) == 1 for r in assignment["partitions"].values())  # default rf 1
    record = json.loads(nodes["/emulator/topics/made"][0] or b"")
    assert record["reason"] == "auto"
    assert "/brokers/topics/other" not in nodes
    assert all(t != "made" for t, _ in answer)  # LEADER_NOT_AVAILABLE until the controller acts


def test_a_broker_with_auto_create_off_creates_nothing(tmp_path: Path) -> None:
    io = FakeIO()
    ctx = _ctx(tmp_path, kafka={"auto.create.topics.enable": False})

    async def go() -> dict[str, tuple[bytes | None, Any]]:
        b = BrokerCore(0, ctx, [], 9092, io=io)
        await b.start(with_controller=False)
        raw = b._zk.kazoo  # type: ignore[union-attr]
        await b.metadata(["made"], allow_auto_create=True)
        await b.stop()
        nodes: dict[str, tuple[bytes | None, Any]] = raw.nodes
        return nodes

    assert "/brokers/topics/made" not in asyncio.run(go())


# --------------------------------------------------------------------------- producer


def test_the_producer_drops_a_deleted_topics_messages_and_follows_its_re_creation(
    tmp_path: Path,
) -> None:
    loop = ManualTimeLoop(now=100.0)
    leaders: dict[TP, int] = {("keep", 0): 0, ("gone", 0): 0, ("gone", 1): 0}
    produced: list[dict[TP, int]] = []

    def produce(batch: dict[TP, int]) -> dict[TP, ProduceAnswer]:
        produced.append(dict(batch))
        return {
            tp: ProduceAnswer(0, n)
            if tp in leaders
            else ProduceAnswer(UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_OR_PARTITION)
            for tp, n in batch.items()
        }

    broker = types.SimpleNamespace(produce=_Method(produce), metadata=_Method(lambda *a: leaders))
    ctx = _ctx(tmp_path, leaders=dict(leaders))

    async def go() -> ProducerCore:
        p = ProducerCore(0, ctx, {"keep": 1, "gone": 2}, 1.0, "round-robin", 10, None, {0: broker})
        # A batch for the deleted topic is answered UNKNOWN_TOPIC_OR_PARTITION: dropped.
        del leaders[("gone", 0)], leaders[("gone", 1)]
        await p._send(0, {("gone", 0): 3, ("keep", 0): 2})
        assert p.dropped == 3 and p.produced == 2 and p._backlog == {}
        # The refreshed metadata lacks it: what is due for it is dropped, not queued.
        await p.leader_cache.refresh()
        p._backlog[("gone", 1)] += 4  # waiting from before
        p._owed = 10.0
        p._last_ms = p.clock.now_ms()
        await p.tick()
        assert "gone" in p._gone and all(tp[0] != "gone" for tp in p._backlog)
        assert p.dropped == 3 + 4 + 5  # the backlog, then half of the ten due
        # The next refresh names it (producers may auto-create); it comes back with 1 partition.
        leaders[("gone", 0)] = 0
        loop.now += 1.0
        await p.leader_cache.refresh()
        p._owed = 4.0
        p._last_ms = p.clock.now_ms()
        await p.tick()
        await _until(lambda: not p._sends)
        assert "gone" not in p._gone and p.topics["gone"] == 1
        await p.stop()
        return p

    p = run_on(loop, go())
    assert broker.metadata.calls[-1] == (["gone"], True)
    assert produced[-1] == {("gone", 0): 2, ("keep", 0): 2}
    errors = [
        (e["topic"], e["count"], str(e["detail"]).split(":")[0])
        for e in iter_events(tmp_path / "events" / "producer-0.msgpack")
        if e["kind"] == EventKind.REQUEST_ERROR.value
    ]
    assert errors == [("gone", 3, "produce"), ("gone", 4, "produce"), ("gone", 9, "produce")]
    assert p.dropped == 12 and p.produced == 2 + 5 + 2 + 2  # keep, keep (half of 10), both
