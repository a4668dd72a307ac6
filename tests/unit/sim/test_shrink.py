"""Shrinking a violating schedule (``explore --shrink``): the freedoms a finding needs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import actors.sim.shrink as shrink_module
from actors.orchestrator import run_scenario
from actors.sim.explore import SeedOutcome, explore, replay_command
from actors.sim.run import SimEngine
from actors.sim.shrink import STEPS, without_tail
from emulator.scenario import Scenario
from emulator.sim.profile import BASELINE, EXPLORE, Profile, load_profile, profile_to_toml
from emulator.sim.rng import PPM, QuantileTable
from tests.unit.sim.test_explore import _planted_factory, _planted_module, zombie_small


def test_a_profile_written_to_a_file_reads_back_equal(tmp_path: Path) -> None:
    for p in (EXPLORE, BASELINE, Profile("odd", ray_fifo=False, zk_latency=EXPLORE.zk_latency)):
        f = tmp_path / f"{p.name}.toml"
        f.write_text(profile_to_toml(p))
        assert load_profile(str(f)) == p
    assert QuantileTable([(0, 1), (PPM, 2)]) == QuantileTable([(0, 1), (PPM, 2)])
    assert QuantileTable([(0, 1), (PPM, 2)]) != QuantileTable([(0, 1), (PPM, 3)])


def test_a_tail_is_cut_at_its_body_and_every_step_makes_the_profile_smaller() -> None:
    table = QuantileTable([(0, 5), (990_000, 20), (PPM, 200)])
    cut = without_tail(table)
    assert cut is not None and cut.points == ((0, 5), (PPM, 20))
    assert without_tail(cut) is None and without_tail(None) is None
    current, taken = EXPLORE, []
    for name, step in STEPS:
        smaller = step(current)
        if smaller is not None:
            assert smaller != current
            current, taken = smaller, [*taken, name]
    assert current.is_baseline  # every freedom can be taken away, whole ones first
    assert taken == [name for name, _ in STEPS[:6]]
    tails = {name: step(EXPLORE) for name, step in STEPS[6:]}
    assert tails["the stalls' long tail"] is None  # a uniform stall length has no tail
    ray = tails["the actor calls' slow tail"]
    assert ray is not None and ray.ray_latency == QuantileTable([(0, 200_000), (PPM, 20_000_000)])
    assert ray.zk_latency == EXPLORE.zk_latency and ray.ties


def test_shrink_keeps_what_the_planted_bug_needs_and_its_profile_replays_it(
    tmp_path: Path,
) -> None:
    sc = zombie_small(tmp_path)
    factory = _planted_factory(_planted_module(tmp_path))
    out = tmp_path / "explore"
    lines: list[str] = []
    found = explore(
        sc,
        ["classic-eager"],
        list(range(1, 51)),
        EXPLORE,
        out,
        shrink=True,
        coordinator_factory=factory,
        say=lines.append,
    )
    o = found.found["classic-eager"]
    r = found.shrunk["classic-eager"]
    assert o.violation is not None and r.outcome.violation is not None, lines
    assert r.outcome.violation["kind"] == o.violation["kind"] == "commit_by_non_owner"
    attempted = [s.removed for s in r.steps]
    assert sorted(r.removed + r.needed) == sorted(attempted) and attempted
    assert all(s.still_violates == (s.removed in r.removed) for s in r.steps)
    # the files: the smaller profile, the attempts, the kept run
    small = load_profile(str(out / "shrunk-classic-eager.toml"))
    assert small == r.profile and small.name == "explore-shrunk"
    doc = json.loads((out / "shrink-classic-eager.json").read_text())
    assert doc["needed"] == r.needed and doc["removed"] == r.removed
    assert doc["replay"] == replay_command(
        sc.source, "classic-eager", o.seed, str(out / "shrunk-classic-eager.toml")
    )
    assert (out / f"classic-eager-s{o.seed}-shrunk" / "manifest.json").exists()
    # the replay from the file: the same violation, the same logs
    engine = SimEngine(o.seed, profile=small, check=True, coordinator_factory=factory)
    results = run_scenario(sc, ["classic-eager"], tmp_path / "replay", engine=engine)
    assert results[0].status == "stopped"
    manifest = json.loads((tmp_path / "replay" / "manifest.json").read_text())
    assert manifest["engine"]["log_digest"]["classic-eager"] == r.outcome.digest
    assert manifest["engine"]["checks"]["classic-eager"]["violations"][0] == r.outcome.violation
    assert any("shrinking seed" in line for line in lines)


def test_shrink_keeps_exactly_the_freedoms_a_violation_needs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A stand-in run that violates only with stalls and actor-call latency both present."""
    runs: list[Profile] = []

    def fake_run_seed(
        scenario: Scenario, protocol: str, seed: int, profile: Profile, **_: Any
    ) -> SeedOutcome:
        runs.append(profile)
        bad = profile.stall_every is not None and profile.ray_latency is not None
        return SeedOutcome(
            protocol,
            seed,
            "stopped" if bad else "completed",
            violation={"kind": "double_ownership"} if bad else None,
            digest=f"d{len(runs)}",
        )

    monkeypatch.setattr(shrink_module, "run_seed", fake_run_seed)
    sc = zombie_small(tmp_path)
    found = SeedOutcome("consumer", 9, "stopped", violation={"kind": "double_ownership"})
    r = shrink_module.shrink(sc, "consumer", found, EXPLORE)
    assert r.needed == ["actor stalls", "actor-call latency"]
    assert r.removed == [
        "drawn ties",
        "late timers",
        "quorum-write latency",
        "ZooKeeper link latency",
        "the actor calls' slow tail",  # the stalls have no tail; ZooKeeper's latency is gone
    ]
    p = r.profile
    assert p.stall_every == EXPLORE.stall_every and p.stall_for == EXPLORE.stall_for
    assert p.ray_latency == QuantileTable([(0, 200_000), (PPM, 20_000_000)])
    assert (p.ties, p.timer_late, p.zk_latency, p.zk_commit_latency) == (False, None, None, None)
    assert p.name == "explore-shrunk" and runs[-1] == p  # the last run is the shrunk profile's
    assert r.outcome.violation == {"kind": "double_ownership"}
    other = SeedOutcome("consumer", 9, "stopped", violation={"kind": "loss"})
    assert shrink_module.shrink(sc, "consumer", other, EXPLORE).removed == []  # another kind
    with pytest.raises(ValueError, match="no violation"):
        shrink_module.shrink(sc, "consumer", SeedOutcome("consumer", 9, "completed"), EXPLORE)
