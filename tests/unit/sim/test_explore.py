"""``explore``: schedule profiles, the online checks stopping a run, the planted-bug hunt.

The acceptance test of issue 18's exploration: a copy of the classic group
coordinator with its commit validation removed (a zombie's commit is then
accepted) is installed on the brokers; ``explore`` must find the violation,
and the replay of the seed it reports must give the same violation and the
same event logs, byte for byte. The unpatched coordinator passes the same seeds.
"""

from __future__ import annotations

import importlib.util
import json
import multiprocessing
import random
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import emulator.modern.classic_coordinator as classic_module
from actors.orchestrator import run_scenario
from actors.sim.explore import (
    SeedOutcome,
    explore,
    format_trace,
    replay_command,
    run_batches,
    run_seed,
)
from actors.sim.run import SimEngine
from emulator.broker.coordinators import (
    CoordinatorFactory,
    GroupCoordinator,
    make_coordinator_factory,
    modern_properties,
)
from emulator.modern.config import GroupCoordinatorConfig
from emulator.scenario import Scenario, load_scenario
from emulator.sim.monitor import KNOWN_KINDS
from emulator.sim.profile import (
    BASELINE,
    EXPLORE,
    Profile,
    ProfileError,
    load_profile,
    stall_cap_ns,
)
from emulator.sim.rng import PPM, QuantileTable
from tests.unit.sim.test_sim_runs import scenario as small_scenario

# ------------------------------------------------------------------ profiles


def test_named_profiles_and_the_baseline() -> None:
    assert load_profile("baseline") is BASELINE
    assert load_profile("explore") is EXPLORE
    assert BASELINE.is_baseline
    assert Profile("anything").is_baseline
    assert not EXPLORE.is_baseline
    assert not Profile("x", ties=True).is_baseline
    doc = EXPLORE.to_dict()
    assert doc["ties"] is True and doc["ray_fifo"] is True
    assert doc["ray_latency_ns"][-1] == [PPM, 200_000_000]
    assert doc["timer_late_ns"] == [[0, 0], [990_000, 1_000_000], [PPM, 20_000_000]]
    assert BASELINE.to_dict()["timer_late_ns"] is None
    assert not Profile("x", timer_late=QuantileTable([(0, 0), (PPM, 1)])).is_baseline


def test_a_profile_file_is_read_and_checked(tmp_path: Path) -> None:
    f = tmp_path / "wide.toml"
    f.write_text(
        "ray_latency_ms = [1, 5]\n"
        "zk_latency_ms = [[0, 0.1], [990000, 2], [1000000, 50]]\n"
        "ties = true\n"
        "stall_every_ms = [1000, 2000]\n"
        "stall_for_ms = [5, 10]\n"
        "timer_late_ms = [0, 2]\n"
    )
    p = load_profile(str(f))
    assert p.name == "wide"
    assert p.ties and p.ray_fifo
    assert p.ray_latency is not None and p.ray_latency.points == ((0, 1_000_000), (PPM, 5_000_000))
    assert p.zk_latency is not None and p.zk_latency.at(995_000) == 26_000_000
    assert p.timer_late is not None and p.timer_late.points == ((0, 0), (PPM, 2_000_000))
    for text, why in [
        ("ray_latency = [1, 5]\n", "unknown profile key"),
        ("ties = 1\n", "ties must be true or false"),
        ("ray_latency_ms = [5, 1]\n", "not increasing"),
        ("ray_latency_ms = [-1, 1]\n", "must not be negative"),
        ("stall_every_ms = [1, 2]\n", "go together"),
        ("ray_latency_ms = 'fast'\n", "must be [lo_ms, hi_ms]"),
        ("ties = \n", "--profile"),
    ]:
        f.write_text(text)
        with pytest.raises(ProfileError, match=why.replace("[", r"\[")):
            load_profile(str(f))
    with pytest.raises(ProfileError, match="not a profile name"):
        load_profile(str(tmp_path / "missing.toml"))


def test_the_stall_cap_is_a_tenth_of_the_smallest_session_timeout() -> None:
    assert stall_cap_ns([6000.0, 45000.0, 3000.0]) == 300_000_000
    assert stall_cap_ns([0.0, 10000.0]) == 1_000_000_000


def _digest(tmp: Path, sc: Scenario, protocol: str, engine: SimEngine) -> tuple[str, str]:
    results = run_scenario(sc, [protocol], tmp, engine=engine)
    manifest = json.loads((tmp / "manifest.json").read_text())
    return results[0].status, manifest["engine"]["log_digest"][protocol]


def test_a_profile_draws_another_schedule_and_replays_it_exactly(tmp_path: Path) -> None:
    sc = small_scenario(tmp_path)
    base = _digest(tmp_path / "a", sc, "consumer", SimEngine(seed=3))
    checked = _digest(tmp_path / "b", sc, "consumer", SimEngine(seed=3, check=True))
    wide = _digest(tmp_path / "c", sc, "consumer", SimEngine(seed=3, profile=EXPLORE, check=True))
    again = _digest(tmp_path / "d", sc, "consumer", SimEngine(seed=3, profile=EXPLORE, check=True))
    other = _digest(tmp_path / "e", sc, "consumer", SimEngine(seed=4, profile=EXPLORE, check=True))
    assert base == checked  # the monitor only reads
    assert wide == again
    assert wide[1] != base[1] and other[1] != wide[1]
    assert {base[0], wide[0], other[0]} == {"completed"}
    manifest = json.loads((tmp_path / "c" / "manifest.json").read_text())
    checks = manifest["engine"]["checks"]["consumer"]
    assert checks["violation_count"] == 0 and checks["violations"] == []
    assert manifest["engine"]["profile"]["name"] == "explore"
    assert "-explore-" in manifest["run_id"]


def test_ties_and_stalls_change_the_order_of_things_but_never_a_fifo_links(
    tmp_path: Path,
) -> None:
    """A profile with only drawn ties and stalls still runs every protocol to a clean end."""
    sc = small_scenario(tmp_path)
    p = Profile(
        "ties",
        ties=True,
        stall_every=QuantileTable([(0, 500_000_000), (PPM, 1_000_000_000)]),
        stall_for=QuantileTable([(0, 50_000_000), (PPM, 200_000_000)]),
    )
    for protocol in ("zookeeper", "classic-cooperative"):
        o = run_seed(sc, protocol, 11, p)
        assert (o.status, o.violation, o.error) == ("completed", None, ""), o
        assert o.digest


# --------------------------------------------------------- the planted bug


def _planted_module(tmp_path: Path) -> ModuleType:
    """A copy of the classic coordinator that stores any member's commit, of any generation."""
    source = Path(classic_module.__file__).read_text()
    head = '''    def _validate_commit(self, req: OffsetCommitRequest) -> Errors | None:
        """``validateOffsetCommit`` (B5)."""
'''
    beat = "            self._schedule_heartbeat(self._members[req.member_id])\n"
    assert source.count(head) == 1 and source.count(beat) == 1
    planted = source.replace(
        head, head + "        return None  # PLANTED: no member, no generation check\n"
    )
    # ... and an unknown member's commit is stored (not a KeyError)
    planted = planted.replace(beat, "            if req.member_id in self._members:\n    " + beat)
    path = tmp_path / "planted_classic_coordinator.py"
    path.write_text(planted)
    spec = importlib.util.spec_from_file_location("planted_classic_coordinator", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _planted_factory(module: ModuleType) -> Any:
    def make(
        protocol: str,
        kafka: dict[str, object],
        broker_id: int,
        seed: int,
        partitions_per_topic: dict[str, int],
        *,
        mixed_protocols: bool = False,
    ) -> CoordinatorFactory:
        if not protocol.startswith("classic"):
            return make_coordinator_factory(protocol, kafka, broker_id, seed, partitions_per_topic)
        cfg = GroupCoordinatorConfig.from_kafka(modern_properties(kafka))

        def classic(group_id: str, committed: Any) -> GroupCoordinator:
            rng = random.Random(f"{seed}/{broker_id}/{group_id}")
            coord: GroupCoordinator = module.ClassicGroupCoordinator(
                group_id, cfg, rng, broker=broker_id, committed=committed
            )
            return coord

        return classic

    return make


ZOMBIE_SMALL = """
name = "zombie-small"
description = "c-1 pauses past its session; it wakes with a batch done and commits at once"
seed = 7
duration_s = 30.0
time_scale = 0.5

[cluster]
brokers = 1
zookeeper_ensemble = 1

[[topics]]
name = "payments"
partitions = 4
replication_factor = 1

[producer]
rate_per_s = 20.0
partitioner = "round-robin"
batch_size = 10

[group]
id = "zombie-group"
consumers = 2
processing_ms_per_message = 5.0

[kafka]
"zookeeper.session.timeout.ms" = 6000
"session.timeout.ms" = 6000
"group.consumer.min.session.timeout.ms" = 6000
"group.consumer.session.timeout.ms" = 6000
"max.poll.records" = 2
"fetch.message.max.bytes" = 2048
"auto.commit.interval.ms" = 2000
"auto.offset.reset" = "smallest"

[[timeline]]
at_s = 8.0
action = "pause"
member = "c-1"
duration_s = 12.0
"""


def zombie_small(tmp_path: Path) -> Scenario:
    path = tmp_path / "zombie-small.toml"
    path.write_text(ZOMBIE_SMALL)
    return load_scenario(path)


def test_explore_finds_a_planted_coordinator_bug_and_its_replay_reproduces_it(
    tmp_path: Path,
) -> None:
    """The planted coordinator stores the zombie's commit; the shipped one refuses it.

    c-1 wakes from a pause longer than its session, its batch done, and its
    auto-commit races its heartbeat (which would tell it it was expelled). A
    commit that wins is refused by Kafka's coordinator (UNKNOWN_MEMBER_ID) and
    stored by the planted one while c-0 owns the partition.
    """
    sc = zombie_small(tmp_path)
    factory = _planted_factory(_planted_module(tmp_path))
    lines: list[str] = []
    found = explore(
        sc,
        ["classic-eager"],
        list(range(1, 51)),
        EXPLORE,
        tmp_path / "explore",
        coordinator_factory=factory,
        say=lines.append,
    )
    o = found.found.get("classic-eager")
    assert o is not None, lines
    v = o.violation
    assert v is not None
    assert v["kind"] == "commit_by_non_owner" and v["kind"] in KNOWN_KINDS
    assert v["members"] == ["c-0", "c-1"] and "c-1 committed payments:" in v["message"]
    assert o.status == "stopped"
    assert found.checked["classic-eager"] == o.seed  # it stopped there
    # what the violation left: its JSON with the replay command, the logs, a trace
    doc = json.loads((tmp_path / "explore" / "violation-classic-eager.json").read_text())
    assert doc["seed"] == o.seed and doc["violation"] == v
    assert doc["replay"] == replay_command(sc.source, "classic-eager", o.seed, "explore")
    assert (tmp_path / "explore" / f"classic-eager-s{o.seed}" / "manifest.json").exists()
    summary = json.loads((tmp_path / "explore" / "explore.json").read_text())
    assert summary["protocols"]["classic-eager"]["violation"]["seed"] == o.seed
    kinds = [ev.get("kind") for ev in o.trace]
    assert "offsets_committed" in kinds and "fault_injected" in kinds
    assert format_trace(o.trace, 5)[0].split()[:3] == ["t_emu_ms", "actor", "kind"]

    # the replay: the same seed and profile give the same violation and the same logs
    engine = SimEngine(o.seed, profile=EXPLORE, check=True, coordinator_factory=factory)
    results = run_scenario(sc, ["classic-eager"], tmp_path / "replay", engine=engine)
    assert results[0].status == "stopped"
    manifest = json.loads((tmp_path / "replay" / "manifest.json").read_text())
    assert manifest["engine"]["log_digest"]["classic-eager"] == o.digest
    # the kept run's summary (explore sums up only the runs it keeps) is the replay's
    kept = json.loads(
        (tmp_path / "explore" / f"classic-eager-s{o.seed}" / "manifest.json").read_text()
    )
    counts = manifest["protocols"]["classic-eager"]["counts"]
    assert counts["events"] > 0 and counts["processed"] > 0
    assert kept["protocols"]["classic-eager"]["counts"] == counts
    checks = manifest["engine"]["checks"]["classic-eager"]
    assert checks["violations"][0] == v
    assert manifest["status"] == "stopped"

    # the coordinator as shipped passes the same seeds and more
    clean = explore(sc, ["classic-eager"], list(range(1, o.seed + 20)), EXPLORE, tmp_path / "c")
    assert clean.found == {} and clean.checked["classic-eager"] == o.seed + 19
    assert clean.failed["classic-eager"] == []


# ------------------------------------------------- batches, any parallelism


class FakeBatches:
    """Runs batches on demand, finishing the latest submitted first (the worst order)."""

    def __init__(self, bad: set[int], keep_going: bool) -> None:
        self.bad = bad
        self.keep_going = keep_going
        self.submitted: list[list[int]] = []
        self.cancelled: list[int] = []
        self.live: dict[int, list[int]] = {}

    def submit(self, seeds: list[int]) -> Any:
        h = len(self.submitted)
        self.submitted.append(seeds)
        self.live[h] = seeds
        return h

    def ready(self, handles: list[Any], timeout_s: float) -> list[Any]:
        return [max(handles)]

    def result(self, handle: Any) -> list[SeedOutcome]:
        out = []
        for s in self.live.pop(handle):
            bad = s in self.bad
            out.append(
                SeedOutcome(
                    "consumer",
                    s,
                    "stopped" if bad else "completed",
                    violation={"kind": "loss"} if bad else None,
                )
            )
            if bad and not self.keep_going:
                break
        return out

    def cancel(self, handle: Any) -> None:
        self.cancelled.append(self.submitted[handle][0])
        self.live.pop(handle)


@pytest.mark.parametrize("parallel", [1, 2, 3, 8])
def test_the_smallest_violating_seed_does_not_depend_on_the_parallelism(parallel: int) -> None:
    runner = FakeBatches({45, 27, 61}, keep_going=False)
    outcomes = run_batches(runner, list(range(1, 101)), parallel, False, batch_size=10)
    bad = [o.seed for o in outcomes if o.violation is not None]
    assert min(bad) == 27
    seeds = [o.seed for o in outcomes]
    assert seeds == sorted(seeds) and set(range(1, 28)) <= set(seeds)
    # nothing after 27's batch is run to its end, and no batch before it is cut
    assert all(first > 27 for first in runner.cancelled)
    assert not any(o.seed in range(28, 31) for o in outcomes)  # its batch stopped at 27


def test_keep_going_runs_every_seed() -> None:
    runner = FakeBatches({45, 27, 61}, keep_going=True)
    outcomes = run_batches(runner, list(range(1, 101)), 3, True, batch_size=10)
    assert [o.seed for o in outcomes] == list(range(1, 101))
    assert [o.seed for o in outcomes if o.violation] == [27, 45, 61] and runner.cancelled == []


def test_seeds_in_forked_workers_replay_the_in_process_runs(tmp_path: Path) -> None:
    """``parallel`` > 1 without Ray: batches in worker processes forked from this one
    give each seed the same run as here (the same log digest), in seed order."""
    sc = small_scenario(tmp_path)
    seeds = [3, 4, 5]
    here = explore(sc, ["consumer"], seeds, EXPLORE, tmp_path / "here")
    forked = explore(sc, ["consumer"], seeds, EXPLORE, tmp_path / "forked", parallel=2)

    def runs(r: Any) -> list[tuple[int, str, str]]:
        return [(o.seed, o.status, o.digest) for o in r.outcomes["consumer"]]

    assert runs(forked) == runs(here)
    assert [s for s, st, d in runs(forked)] == seeds
    assert all(st == "completed" and len(d) == 64 for _s, st, d in runs(forked))
    assert forked.found == {} and forked.checked == {"consumer": 3}
    assert multiprocessing.active_children() == []  # the workers are gone
