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


def test_a_hold_past_the_idiom_s_last_request_fails_the_run(tmp_path: Path) -> None:
    # delete_recursive of a leaf is two requests (getChildren, delete): a hold before a
    # third never comes, and the runner says so instead of waiting for a release.
    body = """name = "hold"
relies_on = "the runner's hold_at"
steps = [
  { open = "A" },
  { op = "create", s = "A", path = "/t", data = "" },
  { utils = "delete_recursive", s = "A", path = "/t", requests = true, hold_at = HOLD, id = "d" },
  { release = "d" },
  { wait = "op", id = "d", within_ms = 1000 },
]
"""
    path = tmp_path / "01-hold.toml"
    path.write_text(body.replace("HOLD", "3"))
    with pytest.raises(ConformanceError, match="done after 2 requests, before hold_at"):
        run_script(parse_script(path), SimBackend(1))
    path.write_text(body.replace("HOLD", "2"))
    steps = run_script(parse_script(path), SimBackend(1)).trace["steps"]
    assert steps[2]["requests"] == [
        {"op": "children", "path": "/t", "result": []},
        {"op": "delete", "path": "/t", "result": True},
    ]
    assert steps[3] == {"release": "d"}


#: What the real server took, in ms: ``(script, step) -> (min, max)`` over six real runs
#: of the suite (ZooKeeper 3.8.0 on loopback, kazoo 2.11.0, FaultProxy; the 2-core
#: machine with a benchmark running), as the runner measures them. Only waits that
#: timers drive (kazoo's pings and back-off, expiry buckets, elections, start-ups):
#: their ranges are what the sim's constants were calibrated to. Left out: waits of a
#: few ms (thread hand-overs and load dominate them) and the waits after an ``expire``
#: step (the real intruder client takes 5-35 ms to take the session over and close
#: it; the sim's ``expire_session`` acts at once).
REAL_MS: dict[tuple[str, int], tuple[float, float]] = {
    ("15-zkwatch-reconnect-unchanged", 15): (699.2, 911.5),  # CONNECTED after DOWN 0.5 s
    ("16-zkwatch-reconnect-changed", 17): (323.8, 410.3),  # CONNECTED after DOWN 0.3 s
    ("17-session-expiry-blackhole", 11): (338.3, 691.3),  # SUSPENDED after the blackhole
    ("17-session-expiry-blackhole", 12): (984.1, 1360.3),  # the expiry (B's watch)
    ("17-session-expiry-blackhole", 17): (1685.1, 2058.0),  # LOST after healing
    ("19-ops-during-disconnect", 27): (40.9, 55.2),  # the new session after LOST
    ("22-close-vs-crash", 18): (986.5, 1243.9),  # a crashed session's expiry
    ("24-ensemble-member-loss", 15): (1175.9, 2050.4),  # a restarted follower serves
    ("24-ensemble-member-loss", 20): (739.3, 828.2),  # back after the leader's loss
    ("24-ensemble-member-loss", 26): (1081.7, 2546.6),  # the old leader serves again
    ("25-quorum-loss", 13): (1471.8, 2537.8),  # back after the quorum is restored
    ("25-quorum-loss", 18): (863.3, 3392.6),  # the last member serves again
}


def test_timer_driven_waits_take_what_the_real_server_took() -> None:
    by_stem = {p.stem: p for p in SCRIPTS}
    for stem in sorted({stem for stem, _ in REAL_MS}):
        script = parse_script(by_stem[stem])
        measured: dict[int, list[float]] = {}
        for seed in range(1, 21):
            for index, _, ms in run_script(script, SimBackend(seed)).timings:
                measured.setdefault(index, []).append(ms)
        for (s, index), (lo, hi) in REAL_MS.items():
            if s != stem:
                continue
            values = sorted(measured[index])
            median = values[len(values) // 2]
            assert lo <= median <= hi, f"{stem} step {index}: sim median {median} ms"
            # The sim spreads like the real server, not tighter than a tenth of its range.
            assert values[-1] - values[0] >= (hi - lo) / 10, f"{stem} step {index}: {values}"
