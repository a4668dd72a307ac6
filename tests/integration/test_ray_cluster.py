"""Runs on a Ray cluster of several nodes on this machine (``ray.cluster_utils.Cluster``).

A head (the driver), a broker node (``emu_broker``) and two consumer nodes
(``emu_consumer``, room for one consumer host each). A scenario's
``[placement]`` puts the brokers and the producer on the broker node and the
consumer hosts on the consumer nodes; the manifest records which node ran
each actor and each node's measured clock offset. The run directory is local
to the driver (no shared storage): actors on the other nodes spool their logs
on their node and the driver ships them into the run directory at the end
(``event_storage`` mode ``shipped``). Then a consumer node is removed in the
middle of a run: the run goes on without it and records the loss (a note, a
``host_lost`` fault, a ``consumer_crashed`` per member, its log listed as
missing), and the surviving member takes over every partition.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from emulator.eventlog import iter_events, read_run_events
from emulator.scenario import parse_scenario
from emulator.summary import summarize

pytestmark = [pytest.mark.ray, pytest.mark.zk, pytest.mark.slow, pytest.mark.timeout(600)]

SCENARIO = """
name = "{name}"
seed = 5
duration_s = {duration}
time_scale = 0.5

[cluster]
brokers = 2
zookeeper_ensemble = 1

[[topics]]
name = "t"
partitions = 4
replication_factor = 1

[producer]
rate_per_s = 40.0
batch_size = 10

[group]
id = "cluster-group"
consumers = 2
consumers_per_host = 1
processing_ms_per_message = 2.0

[kafka]
"zookeeper.session.timeout.ms" = 6000
"session.timeout.ms" = 6000
"group.consumer.min.session.timeout.ms" = 6000
"group.consumer.session.timeout.ms" = 6000
"auto.offset.reset" = "smallest"

[placement]
brokers = "resource:emu_broker"
producer = "resource:emu_broker"
consumer_hosts = "resource:emu_consumer"
"""


def _run(tmp_path: Path, name: str, duration: float, protocol: str) -> tuple[Any, Path]:
    """One run into ``tmp_path/run``, the nodes' spool under ``tmp_path/spool``."""
    from actors.orchestrator import run_scenario

    sc = parse_scenario(SCENARIO.format(name=name, duration=duration), name)
    out = tmp_path / "run"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("REBALANCE_EMU_SPOOL", str(tmp_path / "spool"))
        results = run_scenario(sc, [protocol], out)
    return results[0], out


def test_brokers_and_consumer_hosts_run_on_their_nodes(ray_cluster: Any, tmp_path: Path) -> None:
    t0 = time.monotonic()
    result, out = _run(tmp_path, "placed", 12.0, "zookeeper")
    assert result.status == "completed"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["ray"]["nodes"] == 4
    placed = manifest["protocols"]["zookeeper"]["placement"]
    actors = placed["actors"]
    broker_node = ray_cluster.broker.node_id
    consumer_nodes = {ray_cluster.consumer_a.node_id, ray_cluster.consumer_b.node_id}
    assert {actors["broker-0"], actors["broker-1"], actors["producer-0"]} == {broker_node}
    # one host per consumer node: each node has room for exactly one
    assert {actors["host-0"], actors["host-1"]} == consumer_nodes
    nodes = placed["nodes"]
    assert set(nodes) == {broker_node, *consumer_nodes}
    for n in nodes.values():
        # one machine: the clocks agree to within the measurement's own bound
        assert n["bound_ms"] >= 0.0 and abs(n["offset_ms"]) <= n["bound_ms"] + 5.0
    assert sorted(nodes[broker_node]["actors"]) == ["broker-0", "broker-1", "producer-0"]
    counts = manifest["protocols"]["zookeeper"]["counts"]
    assert counts["produced"] > 0 and counts["unprocessed"] == 0
    assert manifest["protocols"]["zookeeper"]["lost_hosts"] == []

    # no shared storage: the logs of the actors on other nodes were shipped to the driver
    storage = manifest["event_storage"]
    assert storage["mode"] == "shipped" and storage["url"] == str(out)
    head = ray_cluster.cluster.head_node.node_id
    assert storage["driver_node"] == head
    logs = storage["protocols"]["zookeeper"]["logs"]
    assert storage["protocols"]["zookeeper"]["missing"] == {}
    assert logs["orchestrator"]["how"] == "direct"
    remote = ["broker-0", "broker-1", "producer-0", "host-0", "host-1"]
    for actor in remote:
        assert logs[actor]["how"] == "shipped" and logs[actor]["node"] == actors[actor], actor
    events_dir = out / "zookeeper" / "events"
    assert sorted(p.stem for p in events_dir.glob("*.msgpack")) == sorted(
        ["orchestrator", *remote]
    )
    for actor in remote:
        assert (events_dir / f"{actor}.msgpack").stat().st_size == logs[actor]["bytes"] > 0
    assert not list(events_dir.glob("*.part"))
    # each node's spool is deleted once shipped
    assert not (tmp_path / "spool" / manifest["run_id"]).exists()
    by_actor = {e["actor"] for e in read_run_events(events_dir)}
    assert set(remote) <= by_actor
    print(f"placement + shipping run: {time.monotonic() - t0:.1f} s")


def test_a_lost_node_is_recorded_and_the_run_goes_on(ray_cluster: Any, tmp_path: Path) -> None:
    """Runs last in this module: it removes a node of the shared cluster."""
    events_dir = tmp_path / "run" / "consumer" / "events"
    spool = tmp_path / "spool"
    removed = threading.Event()

    def remove_when_running() -> None:
        deadline = time.monotonic() + 120.0
        while time.monotonic() < deadline:
            # the hosts are on other nodes: their logs are in those nodes' spool
            logs = {p.name for p in spool.glob("*/consumer/*/host-*.msgpack")}
            if {"host-0.msgpack", "host-1.msgpack"} <= logs:
                break
            time.sleep(0.2)
        else:
            return
        time.sleep(5.0)  # both members own partitions and process by now
        ray_cluster.cluster.remove_node(ray_cluster.consumer_a, allow_graceful=False)
        removed.set()

    remover = threading.Thread(target=remove_when_running, daemon=True)
    remover.start()
    result, out = _run(tmp_path, "node-lost", 30.0, "consumer")
    remover.join(timeout=30)
    assert removed.is_set(), "the consumer node was never removed"
    assert result.status == "degraded"  # a host lost without the timeline asking

    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "degraded"
    proto = manifest["protocols"]["consumer"]
    lost_node = ray_cluster.consumer_a.node_id
    lost = [i for i in (0, 1) if proto["placement"]["actors"][f"host-{i}"] == lost_node]
    assert proto["lost_hosts"] == lost and len(lost) == 1
    host = lost[0]
    gone, survivor = f"c-{host}", f"c-{1 - host}"
    assert any(n.startswith(f"consumer host {host} was lost") for n in proto["notes"])
    # the lost node's log could not be shipped: the manifest says so; the others were
    storage = manifest["event_storage"]["protocols"]["consumer"]
    assert set(storage["missing"]) == {f"host-{host}"}
    assert storage["missing"][f"host-{host}"]["node"] == lost_node
    assert "left the Ray cluster" in storage["missing"][f"host-{host}"]["reason"]
    assert storage["logs"][f"host-{1 - host}"]["how"] == "shipped"
    assert not (events_dir / f"host-{host}.msgpack").exists()
    from analysis.evidence import assess_run_dir

    problems = assess_run_dir(out)["consumer"].problems
    assert problems[0].startswith(f"consumer host {host} was lost without the timeline asking")
    assert problems[1].startswith(f"log host-{host} never reached the run directory (its node")

    events = sorted(read_run_events(events_dir), key=lambda e: float(e["t_emu_ms"]))
    orch = [e for e in events if e["actor"] == "orchestrator"]
    lost_ev = [e for e in orch if e["kind"] == "fault_injected" and e.get("reason") == "host_lost"]
    assert len(lost_ev) == 1 and json.loads(str(lost_ev[0]["detail"]))["host"] == host
    crashed = [e["member"] for e in orch if e["kind"] == "consumer_crashed"]
    assert crashed == [gone]
    t_lost = float(lost_ev[0]["t_emu_ms"])
    # the coordinator expels the lost member, and the survivor ends up owning everything
    removed_ids = [
        e for e in events if e["kind"] == "member_removed" and float(e["t_emu_ms"]) > t_lost - 5000
    ]
    assert removed_ids, "the coordinator never expelled the lost member"
    owned: set[str] = set()  # the survivor's partitions at the scenario's end (before shutdown)
    for e in events:
        if e.get("member") != survivor or float(e["t_emu_ms"]) > 30_000:
            continue
        parts = {p for p in str(e.get("partitions") or "").split(",") if p}
        if e["kind"] == "partitions_assigned":
            owned |= parts
        elif e["kind"] in ("partitions_revoked", "partitions_lost"):
            owned -= parts
    assert owned == {"t:0", "t:1", "t:2", "t:3"}
    # What the lost host processed is in its log, which stayed on its node (here
    # this machine's disk, under that node's spool): with it, nothing is left over.
    spooled = list(spool.glob(f"{manifest['run_id']}/consumer/{lost_node}/host-{host}.msgpack"))
    assert len(spooled) == 1
    whole = summarize([*events, *iter_events(spooled[0])])
    assert whole.unprocessed == 0 and whole.produced == proto["counts"]["produced"]
