"""``explore --parallel``: seeds as Ray tasks (a real local Ray) run as they run here."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.sim.explore import ExploreResult, explore
from emulator.sim.profile import EXPLORE
from tests.unit.sim.test_sim_runs import scenario

pytestmark = pytest.mark.ray


def test_seeds_on_ray_replay_the_in_process_runs(ray_local: None, tmp_path: Path) -> None:
    """Each seed's log digest is the same in a Ray worker (another process, another
    hash seed) as here: a schedule is a function of the scenario, the seed and
    the profile, not of where it runs."""
    sc = scenario(tmp_path)
    seeds = [3, 4, 5]
    here = explore(sc, ["consumer"], seeds, EXPLORE, tmp_path / "here")
    there = explore(
        sc, ["consumer"], seeds, EXPLORE, tmp_path / "ray", parallel=2, ray_address="local"
    )

    def runs(r: ExploreResult) -> list[tuple[int, str, str]]:
        return [(o.seed, o.status, o.digest) for o in r.outcomes["consumer"]]

    assert runs(there) == runs(here)
    assert [s for s, _st, _d in runs(here)] == seeds
    assert all(st == "completed" and len(d) == 64 for _s, st, d in runs(here))
    assert there.found == {} and there.checked == {"consumer": 3}
