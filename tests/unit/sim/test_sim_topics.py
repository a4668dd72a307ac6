"""Topics created and deleted during whole runs on the sim engine, under every protocol.

Every protocol's cluster is the ZooKeeper-mode one (:mod:`zk_registry.controller`);
what differs is ``delete.topic.enable`` (false in 0.8.2.2, true from 1.0) and the
modern brokers' fetch check against the metadata cache. The runs check the
events (``topic_created``, ``topic_deletion_requested``, ``topic_deleted``), that
nothing is served from a deleted partition once its deletion completed, that no
broker keeps a trace of it, and that auto-creation brings a topic back through a
0.8 consumer's metadata request (its ``LeaderFinderThread``).
"""

from __future__ import annotations

from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest

from actors.broker import BrokerCore
from actors.orchestrator import ProtocolResult, run_scenario
from actors.sim.run import SimEngine
from emulator.broker.replica_manager import ReplicaManager
from emulator.eventlog import read_run_events
from emulator.scenario import load_scenario
from zk_registry import topics as topics_module
from zk_registry.controller import BrokerController

PROTOCOLS = ["zookeeper", "classic-eager", "classic-cooperative", "consumer"]

SCENARIO = """
name = "sim-topics"
description = "a topic created, another deleted while produced to and consumed"
seed = 11
duration_s = 24.0
time_scale = 0.5

[cluster]
brokers = 3
zookeeper_ensemble = 1

[[topics]]
name = "events"
partitions = 4
replication_factor = 2

[[topics]]
name = "doomed"
partitions = 2
replication_factor = 2

[producer]
rate_per_s = 40.0
topics = PRODUCED

[group]
id = "topics-group"
consumers = 2
topics = ["events", "doomed"]
processing_ms_per_message = 1.0

[kafka]
"auto.offset.reset" = "smallest"
KAFKA

[[timeline]]
at_s = 5.0
action = "create_topic"
topic = "fresh"
partitions = 3
replication_factor = 2

[[timeline]]
at_s = 10.0
action = "delete_topic"
topic = "doomed"
"""

Trace = list[tuple[str, ...]]


def write(tmp_path: Path, kafka: str, produced: str = '["events", "doomed"]') -> Path:
    path = tmp_path / "sim-topics.toml"
    path.write_text(SCENARIO.replace("KAFKA", kafka).replace("PRODUCED", produced))
    return path


def traced(monkeypatch: pytest.MonkeyPatch) -> Trace:
    """Record, in the order they happen, data served from ``doomed``, markers and deletions."""
    trace: Trace = []
    serve = ReplicaManager.serve

    def spy_serve(
        self: ReplicaManager, tp: tuple[str, int], offset: int | None, reset: str, n: int
    ) -> tuple[int, int]:
        start, end = serve(self, tp, offset, reset, n)
        if tp[0] == "doomed" and end > start >= 0:
            trace.append(("served", f"{tp[0]}-{tp[1]}", str(self.broker_id)))
        return start, end

    complete = BrokerController._complete_delete_topic

    def spy_complete(self: BrokerController, topic: str, gen: int) -> Coroutine[Any, Any, None]:
        trace.append(("deleted", topic))
        return complete(self, topic, gen)

    mark = topics_module.request_topic_deletion

    async def spy_mark(zk: Any, topic: str) -> bool:
        trace.append(("marked", topic))
        return await mark(zk, topic)

    monkeypatch.setattr(topics_module, "request_topic_deletion", spy_mark)
    monkeypatch.setattr(ReplicaManager, "serve", spy_serve)
    monkeypatch.setattr(BrokerController, "_complete_delete_topic", spy_complete)
    return trace


def run(tmp_path: Path, scenario: Path, protocols: list[str]) -> tuple[list[ProtocolResult], Any]:
    engine = SimEngine()
    results = run_scenario(load_scenario(scenario), protocols, tmp_path / "run", engine=engine)
    return results, engine


def topic_events(tmp_path: Path, protocol: str) -> list[dict[str, Any]]:
    return [
        dict(e)
        for e in read_run_events(tmp_path / "run" / protocol / "events")
        if str(e["kind"]).startswith("topic_")
    ]


def brokers(engine: Any, protocol: str) -> list[BrokerCore]:
    return [
        h.instance for h in engine.systems[protocol].handles if isinstance(h.instance, BrokerCore)
    ]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_created_and_a_deleted_topic_under_every_protocol(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, protocol: str
) -> None:
    trace = traced(monkeypatch)
    # A classic member's commit before the rebalance the deletion causes retries the
    # deleted partitions until the rebalance timeout (KAFKA-16235, 3.9): an eager
    # member fetches nothing meanwhile, so the timeout is short enough to end in the run.
    scenario = write(
        tmp_path,
        '"delete.topic.enable" = true\n"auto.create.topics.enable" = false\n'
        '"max.poll.interval.ms" = 6000',
    )
    [result], engine = run(tmp_path, scenario, [protocol])
    assert result.status == "completed" and result.notes == []
    events = topic_events(tmp_path, protocol)
    summary = [
        (e["kind"], e["topic"], e.get("incarnation"), e.get("state"), e.get("reason"))
        for e in events
    ]
    assert summary == [
        ("topic_created", "fresh", 1, None, "timeline"),
        ("topic_deletion_requested", "doomed", None, "started", "marker"),
        ("topic_deleted", "doomed", 1, None, None),
    ]
    assert all(str(e["actor"]).startswith("broker-") for e in events)  # the controller's
    created, _, deleted = events
    assert created["count"] == 3 and created["replication_factor"] == 2
    assert 5_000 <= created["t_emu_ms"] < 6_000 and 10_000 <= deleted["t_emu_ms"] < 11_000
    # Data was served from the topic before its deletion and never after it.
    assert trace.index(("marked", "doomed")) < trace.index(("deleted", "doomed"))
    done = trace.index(("deleted", "doomed"))
    assert any(t[0] == "served" for t in trace[:done])
    assert [t for t in trace[done:] if t[0] == "served"] == []
    # No broker keeps a replica, a metadata entry or (modern) committed offsets of it.
    for b in brokers(engine, protocol):
        assert all(tp[0] != "doomed" for tp in b.manager.replicas), b.broker_id
        assert all(tp[0] != "doomed" for tp in b.manager.leaders), b.broker_id
        assert {("fresh", p) for p in range(3)} <= set(b.manager.leaders)
        if b.coordinators is None:
            continue
        # The coordinators' metadata image (KIP-848 assigns from it) follows.
        assert b.manager.partition_counts == {"events": 4, "fresh": 3}
        for coord in b.coordinators.coordinators.values():
            assert all(tp[0] != "doomed" for tp in coord.committed_offsets())
    # The producer stopped producing to it.
    produced_after = [
        e
        for e in read_run_events(tmp_path / "run" / protocol / "events")
        if e["kind"] == "produced"
        and e["topic"] == "doomed"
        and e["t_emu_ms"] > deleted["t_emu_ms"]
    ]
    assert produced_after == []


def test_the_0_8_default_leaves_the_marker_and_the_topic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = traced(monkeypatch)
    [result], engine = run(tmp_path, write(tmp_path, ""), ["zookeeper"])
    assert result.status == "completed"
    assert [n for n in result.notes if "delete.topic.enable is false" in n]
    events = topic_events(tmp_path, "zookeeper")
    assert [(e["kind"], e["topic"], e.get("state"), e["actor"][:6]) for e in events] == [
        ("topic_created", "fresh", None, "broker"),
        ("topic_deletion_requested", "doomed", "ignored", "orches"),
    ]
    assert ("deleted", "doomed") not in trace
    # The topic goes on being served after the request, as 0.8.2.2 did.
    marked = trace.index(("marked", "doomed"))
    assert any(t[0] == "served" for t in trace[marked:])
    assert all(
        any(tp[0] == "doomed" for tp in b.manager.leaders) for b in brokers(engine, "zookeeper")
    )


def test_a_0_8_consumer_still_fetching_a_deleted_topic_makes_it_again(
    tmp_path: Path,
) -> None:
    # The producer leaves "doomed" alone: only the consumers' metadata requests name it.
    scenario = write(tmp_path, '"delete.topic.enable" = true', produced='["events"]')
    [result], engine = run(tmp_path, scenario, ["zookeeper"])
    assert result.status == "completed"
    doomed = [e for e in topic_events(tmp_path, "zookeeper") if e["topic"] == "doomed"]
    assert [(e["kind"], e.get("incarnation"), e.get("reason"), e.get("count")) for e in doomed][
        1:
    ] == [
        ("topic_deleted", 1, None, 2),
        ("topic_created", 2, "auto", 1),  # num.partitions
    ]
    assert doomed[2]["t_emu_ms"] > doomed[1]["t_emu_ms"]
    assert sum(b.auto_created for b in brokers(engine, "zookeeper")) >= 1
