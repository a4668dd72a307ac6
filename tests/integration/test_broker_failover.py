"""The broker data path under broker failures, on a real ZooKeeper and a real local Ray.

* Replication: followers copy the leader's log, the high watermark is the least
  LEO over the ISR, consumers read only up to it, and a produce is answered
  once the HW covers it (acks=all).
* ISR maintenance (A8): a dead follower leaves the ISR after
  ``replica.lag.time.max.ms`` (a conditional write of the state znode), and a
  restarted one catches up and rejoins it.
* Failover (with the controller): a killed broker's leaderships move to
  in-sync replicas and no acknowledged message is lost; for a modern protocol
  the group coordinator moves with its ``__consumer_offsets`` partition and
  the committed offsets survive.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.context import RunContext
from actors.metadata import broker_actor_name
from emulator.eventlog import read_run_events
from tests.zk_fixtures import wait_for

pytestmark = [pytest.mark.ray, pytest.mark.zk]

TIME_SCALE = 0.1  # replica.lag.time.max.ms 10 s -> 1 s wall; session 6 s -> 0.6 s


def _ctx(zk_connect: str, events: Path, protocol: str = "zookeeper") -> RunContext:
    return RunContext(
        run_id=f"bf-{uuid.uuid4().hex[:8]}",
        protocol=protocol,
        events_dir=str(events),
        time_scale=TIME_SCALE,
        origin_wall=time.time(),
        zk_connect=zk_connect,
        zk_hosts=(zk_connect.split("/")[0],),
        seed=7,
        group="g",
        kafka={"zookeeper.session.timeout.ms": 6000},
        validate_events=True,
    )


def _create(zk_connect: str, topic: str, assignment: dict[int, list[int]]) -> None:
    from zk_registry.brokers import create_partition_states, setup_common_paths
    from zk_registry.client import ZkClient, ZkUtils
    from zk_registry.layout import encode_topic_assignment, topic_path

    async def go() -> None:
        zk = ZkClient(zk_connect, 10.0)
        await zk.start_async()
        try:
            await setup_common_paths(zk)
            await ZkUtils(zk).create_persistent_path(
                topic_path(topic), encode_topic_assignment(assignment)
            )
            await create_partition_states(zk, topic, assignment, [0, 1, 2], controller_epoch=1)
        finally:
            await zk.stop_async()

    asyncio.run(go())


def _zk_state(zk_connect: str, topic: str, partition: int) -> Any:
    from zk_registry.brokers import read_partition_state
    from zk_registry.client import ZkClient

    async def go() -> Any:
        zk = ZkClient(zk_connect, 10.0)
        await zk.start_async()
        try:
            return await read_partition_state(zk, topic, partition)
        finally:
            await zk.stop_async()

    return asyncio.run(go())


def _start_broker(ctx: RunContext, b: int) -> Any:
    import ray

    from actors.remote import BrokerActor

    name = broker_actor_name(ctx.run_id, ctx.protocol, b)
    deadline = time.monotonic() + 30
    while True:
        try:
            h = BrokerActor.options(name=name).remote(b, ctx, [], 9092 + b)
            break
        except ValueError:
            assert time.monotonic() < deadline, "the killed broker's name was never released"
            time.sleep(0.1)
    ray.get(h.set_origin.remote(ctx.origin_wall), timeout=30)
    # No controller: these tests exercise the leaders' own ISR maintenance and a
    # LeaderAndIsr made by hand; the whole runs below have the controller.
    ray.get(h.start.remote(False), timeout=60)
    return h


def _kill(h: Any) -> None:
    """``ray.kill`` and wait, bounded, until the actor is gone.

    ``ray.kill`` returns before the actor's process ends: a fetch already under
    way could still reach the leader, and the test would see a follower that was
    meant to be dead acknowledge a batch.
    """
    import ray

    ray.kill(h)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            ray.get(h.replica_state.remote(), timeout=5)
        except ray.exceptions.RayActorError:
            return
        except ray.exceptions.GetTimeoutError:
            pass
        time.sleep(0.05)
    raise AssertionError("the killed broker actor never went away")


@pytest.fixture
def cluster(
    ray_local: None, zk_connect: str, tmp_path: Path
) -> Iterator[tuple[RunContext, dict[int, Any]]]:
    import ray

    ctx = _ctx(zk_connect, tmp_path / "events")
    _create(zk_connect, "t", {0: [0, 1, 2], 1: [1, 2, 0]})
    brokers = {b: _start_broker(ctx, b) for b in range(3)}
    yield ctx, brokers
    for h in brokers.values():
        with contextlib.suppress(Exception):
            ray.get(h.stop.remote(), timeout=30)
        ray.kill(h)


def test_replication_hw_isr_shrink_and_rejoin(
    cluster: tuple[RunContext, dict[int, Any]], zk_connect: str
) -> None:
    import ray

    ctx, brokers = cluster
    tp = ("t", 0)
    # Broker 0 leads t-0 (the first live replica); 1 and 2 follow.
    assert ray.get(brokers[0].metadata.remote(), timeout=10)[tp] == 0

    # acks=all: the answer comes once both followers have the batch.
    assert ray.get(brokers[0].produce.remote({tp: 10}), timeout=30) == {tp: (0, 10)}
    for b in (1, 2):
        st = ray.get(brokers[b].replica_state.remote(), timeout=10)[tp]
        assert st["leader"] == 0 and st["leo"] >= 10, st
    assert ray.get(brokers[0].replica_state.remote(), timeout=10)[tp]["hw"] == 10
    # Consumers read only from the leader, only up to the HW.
    assert ray.get(brokers[1].fetch.remote([("t", 0, 0, "smallest", 100)]), timeout=10) == [
        ("t", 0, -1, -1)
    ]
    assert ray.get(brokers[0].fetch.remote([("t", 0, 0, "smallest", 100)]), timeout=10) == [
        ("t", 0, 0, 10)
    ]
    # Produce to a follower: NotLeaderForPartition.
    assert ray.get(brokers[1].produce.remote({tp: 5}), timeout=10) == {tp: (-1, -1)}

    # A follower dies: the next produce waits until the leader drops it from the
    # ISR (replica.lag.time.max.ms = 1 s wall here), then it is answered.
    _kill(brokers.pop(2))
    t0 = time.monotonic()
    answers = []
    while time.monotonic() - t0 < 10.0:
        # A produce times out (RequestTimedOut after 10 s emulated, with the
        # messages left in the log) until the ISR shrinks; then it is answered.
        answers.append(ray.get(brokers[0].produce.remote({tp: 5}), timeout=30)[tp])
        if answers[-1][0] >= 0:
            break
    assert answers[-1][0] >= 10 and answers[-1][1] - answers[-1][0] == 5, answers
    assert all(a == (-2, -2) for a in answers[:-1]), answers
    acked_end = answers[-1][1]
    state = _zk_state(zk_connect, "t", 0)
    assert state.leader == 0 and 2 not in state.isr and set(state.isr) == {0, 1}
    assert state.leader_epoch == 0  # the leader's ISR writes keep the epoch

    # The restarted broker comes back empty, catches up and rejoins the ISR.
    brokers[2] = _start_broker(ctx, 2)
    ray.get(brokers[0].produce.remote({tp: 3000}), timeout=30)
    wait_for(
        lambda: 2 in _zk_state(zk_connect, "t", 0).isr, timeout=20, what="broker 2 back in the ISR"
    )
    st2 = ray.get(brokers[2].replica_state.remote(), timeout=10)[tp]
    lead = ray.get(brokers[0].replica_state.remote(), timeout=10)[tp]
    assert st2["leo"] >= lead["hw"] - 1024  # within one fetch of the leader
    assert lead["isr"] == [0, 1, 2]
    # ... and produces again need it: the HW covers every acknowledged batch.
    end = ray.get(brokers[0].produce.remote({tp: 1}), timeout=30)[tp][1]
    assert end == acked_end + 3001
    ray.get(brokers[0].stop.remote(), timeout=30)
    events = list(read_run_events(Path(ctx.events_dir)))
    isr = [
        (e["reason"], e["detail"])
        for e in events
        if e["kind"] == "isr_changed" and (e["topic"], e["partition"]) == tp
    ]
    # Both are the leader's own conditional writes of the state znode.
    assert ("shrink", "[0,1]") in isr, isr
    assert ("expand", "[0,1,2]") in isr, isr


def test_leader_failover_keeps_acknowledged_messages(
    cluster: tuple[RunContext, dict[int, Any]],
) -> None:
    """A leader move (here pushed by hand): the new leader from the ISR has every acked message."""
    import ray

    from emulator.controller import LeaderIsr, offline_leader

    _, brokers = cluster
    tp = ("t", 0)
    acked = [ray.get(brokers[0].produce.remote({tp: 100}), timeout=30)[tp] for _ in range(5)]
    assert acked[-1] == (400, 500)
    _kill(brokers.pop(0))
    new, reason = offline_leader([0, 1, 2], LeaderIsr(0, 0, (0, 1, 2), 1), [1, 2], False, 1)
    assert reason == "offline" and new is not None and new.leader == 1
    # Broker 1 plays the controller: LeaderAndIsr to the replicas, metadata to all.
    ray.get(brokers[1].on_leader_and_isr.remote({tp: new}, "offline"), timeout=10)
    wait_for(
        lambda: ray.get(brokers[2].metadata.remote(), timeout=10)[tp] == 1,
        timeout=10,
        what="broker 2 told the new leader",
    )
    st = ray.get(brokers[1].replica_state.remote(), timeout=10)[tp]
    assert st["leader"] == 1 and st["leo"] >= 500
    # The new leader's HW reaches every acknowledged offset once broker 2 fetches.
    wait_for(
        lambda: (
            ray.get(brokers[1].fetch.remote([("t", 0, 0, "smallest", 1000)]), timeout=10)[0][3]
            >= 500
        ),
        timeout=10,
        what="the new leader serves every acked message",
    )
    assert ray.get(brokers[1].produce.remote({tp: 10}), timeout=30)[tp] == (500, 510)
    assert ray.get(brokers[2].produce.remote({tp: 10}), timeout=30)[tp] == (-1, -1)


# ---------------------------------------------------------------- whole runs

SCENARIO = """
name = "broker-failover"
seed = {seed}
duration_s = {duration}
time_scale = {scale}

[cluster]
brokers = 3
zookeeper_ensemble = 1

[[topics]]
name = "events"
partitions = 6
replication_factor = 3

[producer]
rate_per_s = 200.0
topics = ["events"]
partitioner = "round-robin"
batch_size = 50

[group]
id = "{group}"
consumers = 2
topics = ["events"]
streams_per_consumer = 1
processing_ms_per_message = 1.0

[kafka]
"auto.offset.reset" = "smallest"

[[timeline]]
at_s = {crash_at}
action = "broker_crash"
broker = {broker}
{restart}
"""

Event = dict[str, Any]


def _run(
    zk_connect: str, out: Path, protocol: str, **fmt: Any
) -> tuple[dict[str, Any], list[Event]]:
    import json

    from actors.orchestrator import run_scenario
    from emulator.scenario import parse_scenario

    scenario = parse_scenario(SCENARIO.format(**fmt), "broker-failover.toml")
    run_scenario(scenario, [protocol], out, zookeeper=zk_connect, validate_events=True)
    manifest = json.loads((out / "manifest.json").read_text())
    events = sorted(read_run_events(out / protocol / "events"), key=lambda e: float(e["t_emu_ms"]))
    return manifest, events


def _acked_disjoint(events: list[Event]) -> None:
    """No offset is acknowledged twice: an acked message lost in a failover would be."""
    by_tp: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for e in events:
        if e["kind"] == "produced":
            by_tp.setdefault((e["topic"], e["partition"]), []).append(
                (e["offset_start"], e["offset_end"])
            )
    assert by_tp
    for tp, ranges in by_tp.items():
        ranges.sort()
        for (s0, e0), (s1, _e1) in itertools.pairwise(ranges):
            assert s1 >= e0, f"{tp}: acknowledged offsets [{s1}, ...) overlap [{s0}, {e0})"


def test_broker_crash_moves_leaders_and_loses_no_acked_message(
    ray_local: None, zk_connect: str, tmp_path: Path
) -> None:
    crash_at, restart_after = 8.0, 8.0
    manifest, events = _run(
        zk_connect,
        tmp_path / "run",
        "zookeeper",
        seed=11,
        duration=30.0,
        scale=0.15,
        group="failover-group",
        crash_at=crash_at,
        broker=1,
        restart=f"restart_after_s = {restart_after}",
    )
    entry = manifest["protocols"]["zookeeper"]
    assert entry["status"] == "completed", entry
    counts = entry["counts"]
    assert counts["produced"] > 0.5 * 200 * 30
    assert counts["unprocessed"] == 0, counts["partitions_unprocessed"]
    _acked_disjoint(events)
    crash_ms = crash_at * 1000
    led_by_1 = {
        (e["topic"], e["partition"])
        for e in events
        if e["kind"] == "produced" and e["broker"] == 1 and e["t_emu_ms"] < crash_ms
    }
    assert led_by_1, "broker 1 led no partition of the topic"
    moved = {
        (e["topic"], e["partition"]): e
        for e in events
        if e["kind"] == "leader_changed"
        and e["t_emu_ms"] > crash_ms
        and e["reason"] in ("offline", "unclean")
        and e["topic"] == "events"
    }
    assert led_by_1 <= set(moved), (led_by_1, sorted(moved))
    for tp in led_by_1:
        assert moved[tp]["broker"] != 1 and moved[tp]["reason"] == "offline"
        # the producer went on with the new leader, the consumers read from it
        assert any(
            e["kind"] == "produced"
            and (e["topic"], e["partition"]) == tp
            and e["broker"] == moved[tp]["broker"]
            and e["t_emu_ms"] > moved[tp]["t_emu_ms"]
            for e in events
        )
        assert any(
            e["kind"] == "processed"
            and (e["topic"], e["partition"]) == tp
            and e["t_emu_ms"] > moved[tp]["t_emu_ms"]
            for e in events
        )
    # The restarted broker caught up and rejoined the ISRs.
    back = [
        e
        for e in events
        if e["kind"] == "isr_changed"
        and e["reason"] == "expand"
        and e["t_emu_ms"] > (crash_at + restart_after) * 1000
        and 1 in json.loads(e["detail"])
    ]
    assert back, "broker 1 never rejoined an ISR"


def _coordinator_broker(group: str, seed: int) -> int:
    import random

    from emulator.modern.placement import coordinator_partition, offsets_topic_assignment

    placement = offsets_topic_assignment([0, 1, 2], random.Random(f"{seed}/offsets"))
    return placement[coordinator_partition(group)][0]


def test_coordinator_moves_with_its_offsets_partition(
    ray_local: None, zk_connect: str, tmp_path: Path
) -> None:
    seed = 5
    # Members bootstrap on brokers 0 and 1: take a group coordinated on broker 2.
    group = next(
        g for g in (f"failover-{i}" for i in range(200)) if _coordinator_broker(g, seed) == 2
    )
    # The first auto-commit (auto.commit.interval.ms 5 s) comes at about 13 s.
    crash_at = 20.0
    manifest, events = _run(
        zk_connect,
        tmp_path / "run",
        "classic-eager",
        seed=seed,
        duration=45.0,
        scale=0.15,
        group=group,
        crash_at=crash_at,
        broker=2,
        restart="",
    )
    entry = manifest["protocols"]["classic-eager"]
    assert entry["status"] == "completed", entry
    assert entry["counts"]["unprocessed"] == 0, entry["counts"]["partitions_unprocessed"]
    _acked_disjoint(events)
    crash_ms = crash_at * 1000
    started = [e for e in events if e["kind"] == "coordinator_started" and e["t_emu_ms"] > crash_ms]
    assert started and all(e["broker"] != 2 for e in started)
    # Committed offsets survive: after the move, fetching starts from them.
    committed: dict[tuple[str, int], int] = {}
    for e in events:
        if e["kind"] == "offsets_committed" and e["t_emu_ms"] < crash_ms - 1000:
            tp = (e["topic"], e["partition"])
            committed[tp] = max(committed.get(tp, 0), int(e["offset_end"]))
    assert committed, "nothing committed before the crash"
    after = [e for e in events if e["kind"] == "fetching_started" and e["t_emu_ms"] > crash_ms]
    assert after, "no member started fetching after the coordinator moved"
    for e in after:
        tp = (e["topic"], e["partition"])
        if tp in committed:
            assert int(e["offset_start"]) >= committed[tp], (tp, e, committed[tp])


def _zk_get(zk_connect: str, path: str) -> bytes | None:
    from zk_registry.client import ZkClient, ZkUtils

    async def go() -> bytes | None:
        zk = ZkClient(zk_connect, 10.0)
        await zk.start_async()
        try:
            return await ZkUtils(zk).read_maybe(path)
        finally:
            await zk.stop_async()

    return asyncio.run(go())


def test_killing_the_controller_broker_elects_exactly_one_new_controller(
    ray_local: None, zk_connect: str, tmp_path: Path
) -> None:
    """Controller failover with broker actors: one new controller, epoch bumped, leaders moved."""
    import ray

    # A 3 s (wall) ZooKeeper session: long enough that no live broker's session
    # lapses on a loaded machine, which would add an election of its own.
    ctx = dataclasses.replace(
        _ctx(zk_connect, tmp_path / "events"), kafka={"zookeeper.session.timeout.ms": 30000}
    )
    _create(zk_connect, "t", {0: [0, 1, 2], 1: [1, 2, 0], 2: [2, 0, 1]})
    brokers = {b: _start_broker(ctx, b) for b in range(3)}
    try:
        ray.get([h.start_controller.remote() for h in brokers.values()], timeout=60)
        raw = _zk_get(zk_connect, "/controller")
        assert raw is not None
        first = json.loads(raw)["brokerid"]
        assert _zk_get(zk_connect, "/controller_epoch") == b"1"
        led = [p for p in range(3) if _zk_state(zk_connect, "t", p).leader == first]
        assert led, "the controller's broker leads nothing: the test proves less"

        time.sleep(0.6)  # its event log is flushed every 0.25 s: let the election reach it
        ray.kill(brokers.pop(first))  # no clean close: its session expires on the server

        def new_controller() -> bool:
            raw = _zk_get(zk_connect, "/controller")
            return raw is not None and json.loads(raw)["brokerid"] != first

        wait_for(new_controller, timeout=60, what="a new controller")
        second = json.loads(_zk_get(zk_connect, "/controller") or b"{}")["brokerid"]
        assert second in brokers
        wait_for(
            lambda: _zk_get(zk_connect, "/controller_epoch") == b"2",
            timeout=10,
            what="controller epoch 2",
        )
        # Every leadership of the dead broker moved to a live in-sync replica.
        for p in led:
            wait_for(
                lambda p=p: _zk_state(zk_connect, "t", p).leader in brokers,
                timeout=20,
                what=f"t-{p} led by a live broker",
            )
            st = _zk_state(zk_connect, "t", p)
            assert st.leader_epoch == 1 and first not in st.isr
            assert st.controller_epoch == 2
    finally:
        # Stopping the new controller closes its session: a broker stopped after it
        # may elect itself meanwhile (epoch 3). That is the teardown, not the failover.
        teardown = time.time()
        for h in brokers.values():
            with contextlib.suppress(Exception):
                ray.get(h.stop.remote(), timeout=30)
            ray.kill(h)
    events = list(read_run_events(Path(ctx.events_dir)))
    # Ordered by the controller epoch, which is what orders them in ZooKeeper:
    # the logs of different brokers interleave by wall clock only.
    elected = sorted(
        (
            (e["broker"], e["generation"])
            for e in events
            if e["kind"] == "controller_elected" and e["ts_wall"] < teardown
        ),
        key=lambda be: be[1],
    )
    # Exactly one controller per epoch: the first, then exactly one successor.
    assert elected == [(first, 1), (second, 2)], elected
