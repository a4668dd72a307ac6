"""Whole runs on the sim engine: every protocol, the same classes as the real engine, replay."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

import pytest

from actors.broker import BrokerCore
from actors.consumer_host import ConsumerHostCore
from actors.orchestrator import run_scenario
from actors.producer import ProducerCore
from actors.sim.run import SIM_GC_THRESHOLD0, SIM_GC_THRESHOLD2, SimEngine
from emulator.broker.coordinators import CoordinatorHost
from emulator.broker.replica_manager import ReplicaManager
from emulator.host.core import HostCore
from emulator.scenario import Scenario, load_scenario
from tests.unit.sim.hashseed import output_under_hash_seed

PROTOCOLS = ["zookeeper", "classic-eager", "classic-cooperative", "consumer"]

SCENARIO = """
name = "sim-small"
description = "3 consumers on 6 partitions: a join, a crash, a leave"
seed = 7
duration_s = 30.0
time_scale = 0.5

[cluster]
brokers = 3
zookeeper_ensemble = 1

[[topics]]
name = "events"
partitions = 6
replication_factor = 2

[producer]
rate_per_s = 50.0
topics = ["events"]

[group]
id = "small-group"
consumers = 3
topics = ["events"]
processing_ms_per_message = 2.0

[kafka]
"zookeeper.session.timeout.ms" = 6000
"auto.offset.reset" = "smallest"

[[timeline]]
at_s = 5.0
action = "join"

[[timeline]]
at_s = 10.0
action = "crash"
member = "c-1"

[[timeline]]
at_s = 18.0
action = "leave"
member = "c-2"
"""


def scenario(tmp_path: Path) -> Scenario:
    path = tmp_path / "sim-small.toml"
    path.write_text(SCENARIO)
    return load_scenario(path)


def test_every_protocol_runs_to_the_end_and_processes_every_offset(tmp_path: Path) -> None:
    # Two worlds at once, in forked workers: the logs are those of the
    # protocols run one after the other (the pinned digests).
    from tests.unit.sim.test_due_index_equivalence import EXPECTED

    engine = SimEngine(workers=2)
    seen: list[str] = []
    results = run_scenario(
        scenario(tmp_path),
        PROTOCOLS,
        tmp_path / "run",
        engine=engine,
        status=lambda st: seen.append(str(st["protocol"])),
    )
    assert [r.protocol for r in results] == PROTOCOLS
    assert [r.status for r in results] == ["completed"] * 4
    assert set(seen) == set(PROTOCOLS)  # every worker's live status reached the driver
    for r in results:
        counts = r.summary.to_dict()
        assert counts["produced"] > 500, r.protocol
        assert counts["unprocessed"] == 0, r.protocol
        assert counts["processed"] >= counts["produced"], r.protocol
        assert counts["rebalances"] >= 3, r.protocol  # formation, join, crash, leave
        assert not r.notes, (r.protocol, r.notes)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    assert manifest["engine"]["name"] == "sim" and manifest["engine"]["seed"] == 7
    assert sorted(manifest["protocols"]) == sorted(PROTOCOLS)
    assert sorted(manifest["engine"]["log_digest"]) == sorted(PROTOCOLS)
    for protocol in PROTOCOLS:
        pinned = EXPECTED.get(("sim-small", protocol))
        assert pinned is None or manifest["engine"]["log_digest"][protocol] == pinned, protocol
        counts = results[PROTOCOLS.index(protocol)].summary.to_dict()
        assert manifest["protocols"][protocol]["counts"] == counts
        assert protocol in manifest["event_storage"]["protocols"]
    assert manifest["run_id"].startswith("sim-sim-small-s7-")
    assert (tmp_path / "run" / "sim-engine.log").is_file()  # kazoo's log lines, off the terminal
    legacy = results[0].summary.to_dict()
    assert legacy["attempts"] >= legacy["rebalances"] > 0  # the 0.8 consumer's own rebalances
    # The crashed host's member and the clean leave: what the real engine's logs hold.
    events = tmp_path / "run" / "zookeeper" / "events"
    assert sorted(p.name for p in events.glob("*.msgpack"))[:3] == [
        "broker-0.msgpack",
        "broker-1.msgpack",
        "broker-2.msgpack",
    ]


def test_the_sim_runs_the_real_engines_classes(tmp_path: Path) -> None:
    engine = SimEngine()
    before = gc.get_threshold()
    during: list[tuple[int, int, int]] = []
    done = engine.protocol_done

    def spy(run: Any, manifest: dict[str, Any]) -> None:
        during.append(gc.get_threshold())
        done(run, manifest)

    engine.protocol_done = spy  # type: ignore[method-assign]
    run_scenario(scenario(tmp_path), ["classic-eager"], tmp_path / "run", engine=engine)
    # The world ran with rarer collections; the process has its own thresholds back.
    assert during == [
        (max(before[0], SIM_GC_THRESHOLD0), before[1], max(before[2], SIM_GC_THRESHOLD2))
    ]
    assert gc.get_threshold() == before
    shells = [h.instance for h in engine.systems["classic-eager"].handles]
    kinds = {type(s) for s in shells}
    assert kinds == {BrokerCore, ProducerCore, ConsumerHostCore}
    brokers = [s for s in shells if isinstance(s, BrokerCore)]
    assert all(isinstance(b.manager, ReplicaManager) for b in brokers)
    assert any(isinstance(b.coordinators, CoordinatorHost) for b in brokers)
    hosts = [s for s in shells if isinstance(s, ConsumerHostCore)]
    assert all(isinstance(h.core, HostCore) for h in hosts)


def _digest_in_subprocess(tmp_path: Path, seed: int, hash_seed: str) -> str:
    path = tmp_path / "sim-small.toml"
    path.write_text(SCENARIO)
    out = tmp_path / f"run-{seed}-{hash_seed}"
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from actors.orchestrator import run_scenario\n"
        "from actors.sim.run import SimEngine\n"
        "from emulator.scenario import load_scenario\n"
        f"run_scenario(load_scenario(Path({str(path)!r})), ['zookeeper'], Path({str(out)!r}),\n"
        f"             engine=SimEngine(seed={seed}))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('ray', 'pyspark')))\n"
    )
    stdout = output_under_hash_seed(code, hash_seed)
    assert stdout.strip().splitlines()[-1] == "[]"  # neither Ray nor Spark was loaded
    manifest = json.loads((out / "manifest.json").read_text())
    return str(manifest["engine"]["log_digest"]["zookeeper"])


@pytest.mark.parametrize("seed", [7])
def test_the_same_seed_replays_byte_for_byte_and_another_does_not(
    tmp_path: Path, seed: int
) -> None:
    first = _digest_in_subprocess(tmp_path, seed, "0")
    assert _digest_in_subprocess(tmp_path, seed, "12345") == first
    assert _digest_in_subprocess(tmp_path, seed + 1, "0") != first
