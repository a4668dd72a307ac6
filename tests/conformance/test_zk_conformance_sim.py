"""Every conformance script on the simulated ZooKeeper equals the real server's recording.

The sim half of the suite (issue-18 design §3.8): each script of
``tests/conformance/scripts`` runs on :class:`SimBackend` (``SimEnsemble``,
``SimKazooClient`` under ``ZkClient``, ``SimZkLink``, on a virtual-time
``SimEventLoop``) and its normalized trace must equal ``expected/NN-name.json``,
which was recorded from ZooKeeper 3.8.0 through kazoo 2.11.0. The runner checks
every ``within_ms``/``min_ms`` bound while running (in virtual time here) and
records ``check = "order"`` results in the trace, so both are part of the
comparison. A plain unit test: no Java, well under a second per seed.

Several seeds, because the sim's draws (link latencies, kazoo's ping jitter and
reconnect back-off, elections, start-ups) move events: a script whose trace
depends on them is caught here, not in a later engine run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conformance.backends import SimBackend
from tests.conformance.runner import (
    ConformanceError,
    compare,
    expected_path,
    load_expected,
    parse_script,
    run_script,
    script_paths,
)

SCRIPTS = script_paths()
SEEDS = (1, 2, 3, 4, 5, 6, 7, 8)


@pytest.mark.parametrize("path", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_script_on_the_sim_equals_the_recording(path: Path) -> None:
    script = parse_script(path)
    expected = load_expected(script)
    assert expected is not None, f"no recording {expected_path(script).name}"
    for seed in SEEDS:
        result = run_script(script, SimBackend(seed))
        diff = compare(expected, result.trace)
        assert not diff, f"seed {seed}:\n" + "\n".join(diff[:200])


def test_the_same_seed_gives_the_same_run_and_timings() -> None:
    script = parse_script(next(p for p in SCRIPTS if p.stem.startswith("24-")))
    first = run_script(script, SimBackend(11))
    second = run_script(script, SimBackend(11))
    assert first.trace == second.trace
    assert first.timings == second.timings
    other = run_script(script, SimBackend(12))
    assert other.trace == first.trace
    assert other.timings != first.timings  # the draws moved the events, not the trace


def test_bounds_are_checked_in_virtual_time(tmp_path: Path) -> None:
    # A blackhole is noticed only after kazoo's ping goes unanswered: with a 4 s
    # session that is hundreds of virtual ms, so a 50 ms bound must fail, and the
    # virtual clock (not the machine's) is what measured it.
    body = """name = "tight"
relies_on = "the sim backend's bounds"
steps = [
  { open = "A", link = true, timeout_ms = 4000 },
  { link_mode = "blackhole", s = "A" },
  { wait = "state", s = "A", state = "SUSPENDED", within_ms = 50 },
]
"""
    path = tmp_path / "01-tight.toml"
    path.write_text(body)
    backend = SimBackend(1)
    with pytest.raises(ConformanceError, match="SUSPENDED"):
        run_script(parse_script(path), backend)
    assert backend.virtual_s >= 0.05

    path.write_text(body.replace("within_ms = 50", "within_ms = 3000"))
    result = run_script(parse_script(path), backend)
    (_, what, ms) = result.timings[-1]
    assert what == "state:A:SUSPENDED"
    assert 50 < ms <= 3000
