"""analysis/agreement.py: every verdict rule, on hand-built metric dicts (no Spark)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from analysis.agreement import (
    AGREE,
    DISAGREE,
    EXACT,
    NOT_APPLICABLE,
    RANGE,
    REPORT_ONLY,
    REPORTED,
    AgreementError,
    Row,
    Side,
    TrialView,
    compare_sides,
    cpu_seconds,
    judge_presence,
    judge_range,
    judge_share,
    load_side,
    side_text,
    summary_table,
    to_markdown,
    trial_view,
)

# ----------------------------------------------------------------- the rules


def test_range_rule_real_median_inside_the_sims_p5_p95() -> None:
    sim = [float(v) for v in range(1, 101)]  # p5 = 5.95, p95 = 95.05
    assert judge_range([50.0], sim)[0] == AGREE
    assert judge_range([5.95, 5.95, 200.0], sim)[0] == AGREE  # the median, not the mean
    assert judge_range([6.0], sim)[0] == AGREE
    verdict, why = judge_range([5.0, 5.5, 99.0], sim)  # median 5.5 < p5
    assert verdict == DISAGREE and "below" in why
    verdict, why = judge_range([96.0], sim)
    assert verdict == DISAGREE and "above" in why


def test_range_rule_degenerate_sim_range_takes_twenty_percent_of_its_median() -> None:
    sim = [10.0] * 19 + [30.0]  # p95 = 10 + 0.05 x 20 = 11: not degenerate
    assert judge_range([10.5], sim)[0] == AGREE
    assert judge_range([11.5], sim)[0] == DISAGREE  # within 20% of 10, but a real range
    flat = [10.0] * 20
    assert judge_range([12.0], flat)[0] == AGREE
    assert judge_range([8.0], flat)[0] == AGREE
    verdict, why = judge_range([12.5], flat)
    assert verdict == DISAGREE and "beyond 20%" in why
    assert judge_range([7.9], flat)[0] == DISAGREE
    # a sim that is always 0 needs a real median of 0
    assert judge_range([0.0, 0.0, 3.0], [0.0] * 50)[0] == AGREE
    assert judge_range([0.0, 3.0, 3.0], [0.0] * 50)[0] == DISAGREE


def test_range_rule_missing_values() -> None:
    assert judge_range([], [])[0] == NOT_APPLICABLE
    verdict, why = judge_range([1.0], [])
    assert verdict == DISAGREE and why == "values on the real side only"
    verdict, why = judge_range([], [1.0])
    assert verdict == DISAGREE and why == "values on the sim side only"


def test_exact_rule_for_outcomes_over_trials_is_the_all_some_none_class() -> None:
    assert judge_share((20, 20), (50, 50))[0] == AGREE
    assert judge_share((0, 20), (0, 50))[0] == AGREE
    assert judge_share((3, 20), (40, 50))[0] == AGREE  # some and some
    verdict, why = judge_share((20, 20), (49, 50))
    assert verdict == DISAGREE and why == "real all (20/20), sim some (49/50)"
    assert judge_share((0, 20), (1, 50))[0] == DISAGREE
    assert judge_share((0, 0), (5, 50))[0] == NOT_APPLICABLE


def test_exact_rule_for_kinds_is_seen_on_both_or_neither() -> None:
    assert judge_presence(True, True) == (AGREE, "seen on both")
    assert judge_presence(False, False) == (AGREE, "seen on neither")
    assert judge_presence(True, False) == (DISAGREE, "real only")
    assert judge_presence(False, True) == (DISAGREE, "sim only")


# ----------------------------------------------------------------- whole tables


def episode(kind: str, start_ms: float, stable_ms: float | None, **kw: Any) -> dict[str, Any]:
    """One episode of a trial's metrics, with zeros for what the test does not set."""
    e: dict[str, Any] = {
        "kind": kind,
        "start_ms": start_ms,
        "time_to_stable_ms": stable_ms,
        "settled": stable_ms is not None,
        "time_to_detect_ms": None,
        "duplicates": 0,
        "partition_unavailable_s": 0.0,
    }
    e.update(kw)
    return e


def trial(
    protocol: str,
    seed: int,
    episodes: list[dict[str, Any]],
    anomalies: dict[str, int] | None = None,
    not_allowed: int = 0,
    **run: Any,
) -> TrialView:
    metrics: dict[str, Any] = {
        "episodes": episodes,
        "anomalies": anomalies or {},
        "anomalies_not_allowed": not_allowed,
        "commit_mode": "auto",
        "loss_possible": False,
        "duplicates": 0,
    }
    metrics.update(run)
    return TrialView(f"{protocol}.s{seed}", protocol, seed, metrics, 10.0, 5.0, 1000)


SCENARIO = {"name": "x", "duration_s": 60.0}


def side(engine: str, trials: list[TrialView]) -> Side:
    return Side(engine, f"/tmp/{engine}", tuple(trials), (), dict(SCENARIO), {})


def rows_by(rows: list[Row]) -> dict[tuple[str, str, str], Row]:
    return {(r.protocol, r.episode, r.metric): r for r in rows}


def test_a_table_over_hand_built_trials_applies_each_rule() -> None:
    real = [
        trial(
            "classic-eager",
            s,
            [
                episode("formation", 0, 3000.0),
                episode("join", 30_000, 2000.0 + 100 * i, duplicates=0),
                episode("crash", 60_000, 47_000.0, time_to_detect_ms=45_000.0 + i),
            ],
            anomalies={"duplicate": 3, "stranded_partition": 1},
            duplicates=30 + i,
        )
        for i, s in enumerate((1, 2, 3))
    ]
    sim = [
        trial(
            "classic-eager",
            s,
            [
                episode("formation", 0, 3100.0),
                episode("join", 30_000, 1000.0 + 100 * i),  # 1.0 .. 1.9 s: real 2.1 above
                # the crash did not settle in one sim trial
                episode("crash", 60_000, None if i == 0 else 46_000.0, time_to_detect_ms=45_000.0),
            ]
            + ([episode("join+crash", 61_000, 1.0)] if i == 1 else []),
            anomalies={"duplicate": 2, "double_ownership": 1 if i == 4 else 0},
            not_allowed=0,
            duplicates=20 + 2 * i,
        )
        for i, s in enumerate(range(1, 11))
    ]
    ag = compare_sides(side("real", real), side("sim", sim))
    by = rows_by(ag.rows)
    p = "classic-eager"
    assert by[(p, "formation", "time_to_stable_ms")].verdict == AGREE  # degenerate: 3.0 vs 3.1
    join = by[(p, "join", "time_to_stable_ms")]
    assert join.rule == RANGE and join.verdict == DISAGREE and "above" in join.why
    assert join.close is False  # 2.1 against 1.45: 45% off
    assert join.real["n"] == 3 and join.real["median"] == 2100.0
    assert join.real["min"] == 2000.0 and join.real["max"] == 2200.0
    assert join.sim["n"] == 10 and join.sim["median"] == 1450.0
    assert join.sim["p5"] == pytest.approx(1045.0) and join.sim["p95"] == pytest.approx(1855.0)
    detect = by[(p, "crash", "time_to_detect_ms")]  # real 45.001 s vs a flat 45 s: within 20%
    assert detect.verdict == AGREE and "one value" in detect.why and detect.close
    settles = by[(p, "crash", "settles")]
    assert settles.rule == EXACT and settles.verdict == DISAGREE
    assert settles.real == {"hits": 3, "n": 3} and settles.sim == {"hits": 9, "n": 10}
    assert by[(p, "join", "settles")].verdict == AGREE
    assert by[(p, "join", "occurs")].verdict == AGREE
    occurs = by[(p, "join+crash", "occurs")]  # happens in no real trial, one sim trial
    assert occurs.verdict == DISAGREE and occurs.sim == {"hits": 1, "n": 10}
    # the merged episode exists on one side only: its numbers are one-sided
    one_sided = by[(p, "join+crash", "time_to_stable_ms")]
    assert one_sided.verdict == DISAGREE and one_sided.why == "values on the sim side only"
    assert by[(p, "join", "time_to_detect_ms")].verdict == NOT_APPLICABLE
    dup = by[(p, "join", "duplicates")]
    assert dup.verdict == AGREE and dup.zero
    # anomaly kinds: only those seen on some side have rows; allowed per the protocol
    assert by[(p, "whole run", "anomaly:duplicate")].verdict == AGREE
    stranded = by[(p, "whole run", "anomaly:stranded_partition")]
    assert stranded.verdict == DISAGREE and stranded.why == "real only" and stranded.allowed
    assert stranded.close is None
    double = by[(p, "whole run", "anomaly:double_ownership")]
    assert double.verdict == DISAGREE and double.sim == {"hits": 1, "n": 10} and double.allowed
    assert (p, "whole run", "anomaly:loss") not in by
    assert by[(p, "whole run", "not_allowed")].verdict == AGREE
    run_dup = by[(p, "whole run", "duplicates")]  # real 31 vs sim [20.9, 37.1]
    assert run_dup.verdict == AGREE and not run_dup.zero
    wall = by[(p, "whole run", "wall_s")]
    assert wall.rule == REPORT_ONLY and wall.verdict == REPORTED
    # episode order follows the start times, formation first
    labels = list(dict.fromkeys(r.episode for r in ag.rows))
    assert labels == ["formation", "join", "crash", "join+crash", "whole run"]
    # counts leave the reported rows out
    counts = ag.counts()
    judged = [r for r in ag.rows if r.rule != REPORT_ONLY]
    assert sum(counts.values()) == len(judged)
    assert (
        counts[DISAGREE]
        == len(ag.disagreements())
        == sum(1 for r in judged if r.verdict == DISAGREE)
    )
    data = json.loads(json.dumps(ag.to_dict()))
    assert data["real"]["protocols"] == {p: [1, 2, 3]}
    assert data["sim"]["protocols"] == {p: list(range(1, 11))}
    assert data["counts"]["all"] == counts
    md = to_markdown(ag)
    assert (
        "| crash | settles | exact | 3/3 | 9/10 | **NO** | real all (3/3), sim some (9/10) |" in md
    )
    assert "| join | time_to_stable (s) | range | 2.1 [2, 2.2] (n=3) | 1.45 [1.04, 1.85]" in md
    assert "| join | duplicates |" not in md  # 0 on both sides: counted, not shown
    assert "anomaly:stranded_partition (allowed)" in md
    table = summary_table(ag, ["join"], ["time_to_stable_ms", "settles"], [p])
    assert "| join | time_to_stable (s) | 2.1 · 1.45 [1.04, 1.85] **NO** |" in table
    assert "| join | settles | 3/3 · 10/10 ok |" in table
    assert "time_to_detect" not in summary_table(ag, ["join"], ["time_to_detect_ms"], [p])
    zero = summary_table(ag, ["join"], ["duplicates"], [p])
    assert "| join | duplicates | 0 · 0 [0, 0] ok |" in zero
    assert "duplicates" not in summary_table(ag, ["join"], ["duplicates"], [p], skip_zero=True)
    assert "| crash | time_to_stable (s) | 47 · 46 [46, 46] ok |" in summary_table(
        ag, ["crash"], ["time_to_stable_ms"], [p]
    )


def test_a_narrow_sim_range_missed_by_little_disagrees_but_is_close() -> None:
    real = [trial("consumer", s, [episode("join", 0, 5170.0)]) for s in (1, 2, 3)]
    sim = [trial("consumer", s, [episode("join", 0, 5160.0 + s)]) for s in range(1, 11)]
    ag = compare_sides(side("real", real), side("sim", sim))
    row = rows_by(ag.rows)[("consumer", "join", "time_to_stable_ms")]
    assert row.verdict == DISAGREE and row.close  # 5.170 above [5.16145, 5.16955]: 0.1% off
    assert ag.to_dict()["counts"]["range_disagree_but_close"] == 1
    assert "| **NO** ~ |" in to_markdown(ag)
    assert "no~" in summary_table(ag, ["join"], ["time_to_stable_ms"], ["consumer"])


def test_side_text_shows_one_value_when_the_range_is_flat() -> None:
    ag = compare_sides(
        side("real", [trial("consumer", 1, [episode("join", 0, 5000.0)])]),
        side("sim", [trial("consumer", 1, [episode("join", 0, 5000.0)])]),
    )
    row = rows_by(ag.rows)[("consumer", "join", "time_to_stable_ms")]
    assert side_text(row, "real") == "5 (n=1)" and side_text(row, "sim") == "5 (n=1)"


def test_sides_of_different_scenarios_or_protocols_are_refused() -> None:
    a = side("real", [trial("consumer", 1, [])])
    b = Side("sim", "/tmp/sim", a.trials, (), {"name": "y"}, {})
    with pytest.raises(AgreementError, match="different scenarios"):
        compare_sides(a, b)
    c = side("sim", [trial("zookeeper", 1, [])])
    with pytest.raises(AgreementError, match="share no protocol"):
        compare_sides(a, c)


def test_a_setting_only_one_side_lists_is_noted_and_a_differing_one_refused() -> None:
    """A later emulator lists metadata.max.age.ms at its default: noted, not a mismatch."""
    t = trial("consumer", 1, [])
    old = {**SCENARIO, "kafka_effective": {"classic": {"session.timeout.ms": 45000}}}
    new = {
        **SCENARIO,
        "kafka_effective": {
            "classic": {"session.timeout.ms": 45000, "metadata.max.age.ms": 300000}
        },
    }
    ag = compare_sides(Side("real", "r", (t,), (), old, {}), Side("sim", "s", (t,), (), new, {}))
    assert ag.settings_listed_once == [
        "classic metadata.max.age.ms = 300000 (only the sim side lists it)"
    ]
    assert new["kafka_effective"]["classic"]["metadata.max.age.ms"] == 300000  # not mutated
    other = {**SCENARIO, "kafka_effective": {"classic": {"session.timeout.ms": 10000}}}
    with pytest.raises(AgreementError, match="kafka_effective"):
        compare_sides(Side("real", "r", (t,), (), old, {}), Side("sim", "s", (t,), (), other, {}))


def test_drawn_plans_of_a_shared_seed_are_checked() -> None:
    t = trial("consumer", 7, [])
    a = Side("real", "r", (t,), (), dict(SCENARIO), {("consumer", 7): [{"members": ["c-1"]}]})
    b = Side("sim", "s", (t,), (), dict(SCENARIO), {("consumer", 7): [{"members": ["c-2"]}]})
    assert compare_sides(a, b).plan_mismatches == ["consumer seed 7: the drawn action plans differ"]
    assert compare_sides(a, a).plan_mismatches == []


# ----------------------------------------------------------------- reading


def test_trial_view_leaves_out_what_the_experiment_report_leaves_out() -> None:
    tj = {"id": "t", "protocol": "consumer", "seed": 3, "fingerprint": "f", "wall_s": 12.5}
    good = {"fingerprint": "f", "evidence": {"verdict": "complete"}, "metrics": {}, "events": 9}
    manifest = {"status": "completed"}
    view = trial_view(tj, good, manifest)
    assert isinstance(view, TrialView) and view.seed == 3 and view.wall_s == 12.5
    assert view.events == 9
    assert trial_view(tj, good, {"status": "degraded"}) == "trial degraded"
    assert "not analysed" in str(trial_view(tj, None, manifest))
    assert "another run" in str(trial_view(tj, {**good, "fingerprint": "g"}, manifest))
    bad = {**good, "evidence": {"verdict": "incomplete", "problems": ["log cut"]}}
    assert trial_view(tj, bad, manifest) == "incomplete evidence: log cut"


def test_cpu_is_the_actors_sum_on_the_real_engine_and_the_trials_own_on_the_sim() -> None:
    actors = {"broker-0": {"cpu_s": 3.0}, "host-0": {"cpu_s": 2.0}, "x": {"cpu_s": None}}
    m: dict[str, Any] = {"protocols": {"consumer": {"resources": {"actors": actors}}}}
    assert cpu_seconds(m, "consumer") == 5.0
    assert cpu_seconds(m, "zookeeper") is None
    sim = {**m, "engine": {"name": "sim"}}  # the actors' figure is the process's total
    assert cpu_seconds(sim, "consumer", {"cpu_s": 1.25}) == 1.25
    assert cpu_seconds(sim, "consumer", {}) is None


def _write_trial(
    root: Path,
    tid: str,
    engine: str,
    seed: int,
    analysed: bool = True,
    protocol: str = "consumer",
    **scenario: Any,
) -> None:
    d = root / "trials" / tid
    d.mkdir(parents=True)
    (d / "trial.json").write_text(
        json.dumps({"id": tid, "protocol": protocol, "seed": seed, "fingerprint": tid, "wall_s": 1})
    )
    manifest: dict[str, Any] = {
        "status": "completed",
        "scenario": {**SCENARIO, "seed": seed, "action_plan": [seed], **scenario},
    }
    if engine == "sim":
        manifest["engine"] = {"name": "sim"}
    (d / "manifest.json").write_text(json.dumps(manifest))
    if analysed:
        analysis = {
            "fingerprint": tid,
            "evidence": {"verdict": "complete"},
            "metrics": {"episodes": [episode("join", 0, 1000.0)]},
        }
        (d / "analysis.json").write_text(json.dumps(analysis))


def test_load_side_reads_analysed_trials_and_checks_the_engine(tmp_path: Path) -> None:
    _write_trial(tmp_path / "real", "a", "real", 1)
    _write_trial(tmp_path / "real", "b", "real", 2, analysed=False)
    _write_trial(tmp_path / "real", "c", "real", 3)
    s = load_side(tmp_path / "real", "real")
    assert [t.trial for t in s.trials] == ["a", "c"]
    assert s.excluded[0][0] == "b" and "not analysed" in s.excluded[0][1]
    assert s.scenario == SCENARIO and s.plans == {("consumer", 1): [1], ("consumer", 3): [3]}
    only = load_side(tmp_path / "real", "real", seeds=range(2, 5))  # seed 1 is not read
    assert [t.trial for t in only.trials] == ["c"] and [x[0] for x in only.excluded] == ["b"]
    with pytest.raises(AgreementError, match="no completed, analysed trials"):
        load_side(tmp_path / "real", "real", seeds=[9])
    with pytest.raises(AgreementError, match="ran on the real engine, not sim"):
        load_side(tmp_path / "real", "sim")
    with pytest.raises(AgreementError, match="no completed, analysed trials"):
        load_side(tmp_path / "empty", "real")


def test_one_side_of_several_directories_keeps_each_protocols_time_scale(tmp_path: Path) -> None:
    _write_trial(tmp_path / "modern", "m1", "real", 1, time_scale=1.0)
    _write_trial(tmp_path / "legacy", "z1", "real", 1, protocol="zookeeper", time_scale=2.0)
    s = load_side([tmp_path / "modern", tmp_path / "legacy"], "real")
    assert sorted((t.protocol, t.seed) for t in s.trials) == [("consumer", 1), ("zookeeper", 1)]
    assert s.scenario == SCENARIO  # the pace is not part of the scenario's identity
    assert s.time_scales == {"consumer": (1.0,), "zookeeper": (2.0,)}
    assert str(tmp_path / "legacy") in s.source and str(tmp_path / "modern") in s.source
    # Any other difference is still a different scenario.
    _write_trial(tmp_path / "other", "z2", "real", 2, protocol="zookeeper", duration_s=61.0)
    with pytest.raises(AgreementError, match="2 different scenarios"):
        load_side([tmp_path / "modern", tmp_path / "other"], "real")
    # The same protocol and seed twice would count one trial twice.
    _write_trial(tmp_path / "again", "m1b", "real", 1, time_scale=0.5)
    with pytest.raises(AgreementError, match="two trials of consumer seed 1"):
        load_side([tmp_path / "modern", tmp_path / "again"], "real")
    text = to_markdown(compare_sides(s, s))
    assert "| zookeeper | 1..1 (1) | 1..1 (1) | 2 | 2 |" in text
    assert "| consumer | 1..1 (1) | 1..1 (1) | 1 | 1 |" in text
