"""Agreement between the engines: the real engine's per-episode metrics beside the sim's.

Input: two experiment directories of the same scenario and protocols, one run
on the real engine and one on the sim (``rebalance-emu experiment ...
--engine sim``), each analysed by ``rebalance-emu compare EXP_DIR`` (which
keeps every trial's metrics in its ``analysis.json``,
:mod:`analysis.experiment`). Only completed trials whose evidence is complete
enter, as in the experiment report.

Output: one :class:`Row` per protocol x episode label x metric, with the real
side's n, median and [min, max], the sim side's n, median and [p5, p95], and a
verdict by one of three rules (issue 18 design §6.3):

* **exact** (must match exactly)

  - ``occurs``: the episode label happens in all, some or none of a side's
    trials (labels as the experiment report numbers them: ``restart #2``,
    overlapping changes merged as ``restart+restart``); agree when both
    sides are in the same one of those three classes;
  - ``settles``: of the trials with the episode, it settled again in all,
    some or none; agree when the class is the same;
  - ``anomaly:<kind>`` (whole run): the kind was found in at least one trial
    of the side; agree when both sides say the same (the row also gives
    whether the protocol allows the kind, :func:`emulator.anomalies.allowed_kinds`);
  - ``not_allowed`` (whole run): at least one trial showed an anomaly its
    protocol does not allow; agree when both sides say the same.

* **range**: every numeric episode metric (:data:`analysis.episodes.EPISODE_METRICS`)
  and the whole-run counts of :data:`RANGE_RUN_METRICS`. ``None`` values (a
  crash not detected, an episode that did not settle) are left out. Agree when
  the real median lies inside the sim's [p5, p95]; where that range is
  degenerate (p5 = p95) when it lies within :data:`DEGENERATE_TOLERANCE` (20%)
  of the sim median (so a sim that is always 0 needs a real median of 0).
  Neither side with a value: ``n/a``; only one side with values: disagree.
  A row where every value on both sides is 0 agrees and is flagged
  ``zero`` (it says the engines agree that nothing happened). Each range row
  also says whether the real median is within 20% of the sim median
  (``close``): a row that disagrees but is close has its centre right and its
  spread too narrow (the sim's runs vary less than the real engine's).

* **reported** (never judged): wall and CPU seconds per trial, events logged.

Percentiles are :func:`analysis.stats.percentile` (linear interpolation,
numpy's default). Pure except :func:`load_side`, which reads the directories.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import median
from typing import Any, Final

from analysis.episodes import EPISODE_METRICS
from analysis.experiment import ANALYSIS_FILE, episode_labels
from analysis.experiment_report import RUN_LABEL
from analysis.report import PROTOCOL_ORDER
from analysis.stats import percentile
from emulator.anomalies import ANOMALY_KINDS, allowed_kinds

AGREE: Final = "agree"
DISAGREE: Final = "disagree"
NOT_APPLICABLE: Final = "n/a"
REPORTED: Final = "reported"

EXACT: Final = "exact"
RANGE: Final = "range"
REPORT_ONLY: Final = "reported"

DEGENERATE_TOLERANCE: Final = 0.2
"""Where the sim's [p5, p95] is one value: the real median may differ from it by this fraction."""

RANGE_RUN_METRICS: Final = (
    ("duplicates", "messages processed again, whole run"),
    ("loss", "messages never processed, whole run"),
    ("rebalances", "rebalances of all members, whole run"),
    ("attempts", "legacy rebalance attempts"),
    ("conflicts", "legacy ownership conflicts"),
    ("gave_up", "legacy members that gave up"),
    ("zk_reads", "ZooKeeper reads of rebalance attempts"),
    ("zk_writes", "ZooKeeper writes of rebalance attempts"),
    ("zk_ops_per_change", "ZooKeeper reads and writes per membership change"),
    ("commit_failures", "failed commits, whole run"),
    ("coordinator_requests", "requests the coordinators answered, whole run"),
)
"""Whole-run counts judged by the range rule (from each trial's metrics)."""

REPORTED_METRICS: Final = (
    ("wall_s", "wall seconds of the trial"),
    ("cpu_s", "CPU seconds: real, the actors' sum; sim, the trial's own (trial.json)"),
    ("events", "events logged"),
)
"""Whole-run figures shown side by side and never judged."""

DOC: Final[Mapping[str, str]] = {
    **dict(EPISODE_METRICS),
    **dict(RANGE_RUN_METRICS),
    **dict(REPORTED_METRICS),
    "occurs": "the episode happens (all / some / none of the trials)",
    "settles": "the episode settles again (all / some / none of its trials)",
    "not_allowed": "an anomaly the protocol does not allow (in any trial)",
}
"""What each metric of a row means."""


class AgreementError(ValueError):
    """Two experiment directories that cannot be compared (one line)."""


# ----------------------------------------------------------------- inputs


@dataclass(frozen=True)
class TrialView:
    """What one analysed trial contributes.

    Attributes:
        trial: the trial id.
        protocol: the run protocol.
        seed: the scenario seed.
        metrics: the trial's metrics (``analysis.json``'s ``metrics``: whole-run
            keys and ``episodes``).
        wall_s: the trial's wall seconds (``trial.json``).
        cpu_s: CPU seconds (:func:`cpu_seconds`).
        events: events logged.
    """

    trial: str
    protocol: str
    seed: int
    metrics: Mapping[str, Any]
    wall_s: float | None = None
    cpu_s: float | None = None
    events: int | None = None


@dataclass(frozen=True)
class Side:
    """One engine's trials of the scenario.

    Attributes:
        engine: ``real`` or ``sim``.
        source: the experiment directory.
        trials: the trials that enter.
        excluded: ``(trial id, why)`` of the trials left out.
        scenario: the scenario's settings, seed and drawn plans left out (for the
            same-spec check).
        plans: ``(protocol, seed)`` -> the scenario's drawn action plan.
        time_scales: protocol -> the time scales its trials ran at (sorted).
    """

    engine: str
    source: str
    trials: tuple[TrialView, ...]
    excluded: tuple[tuple[str, str], ...] = ()
    scenario: Mapping[str, Any] = field(default_factory=dict)
    plans: Mapping[tuple[str, int], Any] = field(default_factory=dict)
    time_scales: Mapping[str, tuple[float, ...]] = field(default_factory=dict)

    def protocols(self) -> list[str]:
        """The protocols with at least one trial, in first-seen order."""
        return list(dict.fromkeys(t.protocol for t in self.trials))

    def seeds(self, protocol: str) -> list[int]:
        """The seeds of ``protocol``'s trials, sorted."""
        return sorted(t.seed for t in self.trials if t.protocol == protocol)


def cpu_seconds(
    manifest: Mapping[str, Any], protocol: str, trial: Mapping[str, Any] | None = None
) -> float | None:
    """A trial's CPU seconds.

    The real engine's actors are processes, each reporting its own CPU time in
    the manifest: their sum. The sim's actors share one process and report that
    process's total since it started (which spans earlier trials when the
    process ran several): a sim trial's CPU is the ``cpu_s`` its trial body
    measured around the run (``trial.json``, :func:`actors.experiment.run_trial`),
    None when it was not recorded.
    """
    if (manifest.get("engine") or {}).get("name") == "sim":
        v = (trial or {}).get("cpu_s")
        return None if v is None else float(v)
    resources = ((manifest.get("protocols") or {}).get(protocol) or {}).get("resources") or {}
    actors = resources.get("actors") or {}
    cpus = [float(a["cpu_s"]) for a in actors.values() if a.get("cpu_s") is not None]
    return sum(cpus) if cpus else None


SCENARIO_DRAWN: Final = ("seed", "action_plan", "membership_plan")
"""Scenario keys that follow from the seed (left out of the same-spec check)."""

SCENARIO_PACING: Final = ("time_scale",)
"""Scenario keys that only pace the real engine's wall clock (left out of the same-spec
check, kept per protocol in :attr:`Side.time_scales`).

Every time a metric reports is emulated time, and the sim engine runs on a virtual
clock whatever the scale; on the real engine a larger scale only gives the actors
more wall time per emulated second (a 100-member 0.8 group needs 2.0 on 2 cores,
as ``bench_scale`` runs it). A disagreement that a scale causes is a finding of
the comparison, which is why the scales are shown beside it.
"""


def trial_view(
    trial: Mapping[str, Any],
    analysis: Mapping[str, Any] | None,
    manifest: Mapping[str, Any] | None,
) -> TrialView | str:
    """One trial's view, or why it is left out.

    Args:
        trial: its ``trial.json``.
        analysis: its ``analysis.json`` (None: missing or unreadable).
        manifest: its ``manifest.json``.
    """
    status = (manifest or {}).get("status") or trial.get("status")
    if status != "completed":
        return f"trial {status or 'not run'}"
    if analysis is None:
        return "not analysed (run rebalance-emu compare on the experiment directory)"
    if analysis.get("fingerprint") != trial.get("fingerprint"):
        return "its analysis.json is of another run of the trial"
    evidence = analysis.get("evidence") or {}
    if evidence.get("verdict") != "complete":
        problems = "; ".join(str(p) for p in (evidence.get("problems") or [])[:3])
        return f"incomplete evidence: {problems}"
    protocol = str(trial["protocol"])
    wall = trial.get("wall_s")
    events = analysis.get("events")
    return TrialView(
        trial=str(trial["id"]),
        protocol=protocol,
        seed=int(trial["seed"]),
        metrics=analysis.get("metrics") or {},
        wall_s=None if wall is None else float(wall),
        cpu_s=cpu_seconds(manifest or {}, protocol, trial),
        events=None if events is None else int(events),
    )


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def load_side(
    exp_dir: Path | str | Sequence[Path | str],
    engine: str,
    seeds: Collection[int] | None = None,
) -> Side:
    """Read the analysed trials of one or more experiment directories (``trials/*/trial.json``).

    Several directories make one side when its protocols ran as separate
    experiments of the same scenario (at different time scales, say: see
    :data:`SCENARIO_PACING`).

    Args:
        exp_dir: the experiment directory, or several.
        engine: the engine its trials must have run on.
        seeds: only the trials of these seeds (others are not read); None: all.

    Raises:
        AgreementError: no trials, a trial ran on another engine, the trials ran
            different scenarios, or two directories hold a trial of the same
            protocol and seed.
    """
    roots = [Path(exp_dir)] if isinstance(exp_dir, str | Path) else [Path(d) for d in exp_dir]
    where = ", ".join(str(r) for r in roots)
    trials: list[TrialView] = []
    excluded: list[tuple[str, str]] = []
    scenarios: dict[str, dict[str, Any]] = {}
    plans: dict[tuple[str, int], Any] = {}
    scales: dict[str, set[float]] = {}
    paths = [tj for root in roots for tj in sorted((root / "trials").glob("*/trial.json"))]
    for tj_path in paths:
        tj = _read(tj_path)
        if tj is None or (seeds is not None and tj.get("seed") not in seeds):
            continue
        d = tj_path.parent
        manifest = _read(d / "manifest.json")
        ran_on = str((manifest or {}).get("engine", {}).get("name") or tj.get("engine") or "real")
        if manifest is not None and ran_on != engine:
            raise AgreementError(f"{d}: ran on the {ran_on} engine, not {engine}")
        view = trial_view(tj, _read(d / ANALYSIS_FILE), manifest)
        if isinstance(view, str):
            excluded.append((str(tj.get("id", d.name)), view))
            continue
        if (view.protocol, view.seed) in plans:
            raise AgreementError(f"{where}: two trials of {view.protocol} seed {view.seed}")
        trials.append(view)
        sc = dict((manifest or {}).get("scenario") or {})
        plans[(view.protocol, view.seed)] = sc.get("action_plan")
        for k in SCENARIO_DRAWN:
            sc.pop(k, None)
        for k in SCENARIO_PACING:
            pace = sc.pop(k, None)
            if isinstance(pace, int | float):
                scales.setdefault(view.protocol, set()).add(float(pace))
        scenarios[json.dumps(sc, sort_keys=True)] = sc
    if not trials:
        raise AgreementError(f"{where}: no completed, analysed trials")
    if len(scenarios) > 1:
        raise AgreementError(f"{where}: trials of {len(scenarios)} different scenarios")
    (scenario,) = scenarios.values()
    return Side(
        engine,
        where,
        tuple(trials),
        tuple(excluded),
        scenario,
        plans,
        {p: tuple(sorted(v)) for p, v in scales.items()},
    )


# ----------------------------------------------------------------- verdicts


def episodes_by_label(metrics: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """A trial's episodes by label."""
    eps = list(metrics.get("episodes") or [])
    return dict(zip(episode_labels(eps), eps, strict=True))


def share_class(hits: int, n: int) -> str:
    """``all``, ``some`` or ``none`` of ``n`` (``none`` when n is 0)."""
    if n == 0 or hits == 0:
        return "none"
    return "all" if hits == n else "some"


def judge_share(real: tuple[int, int], sim: tuple[int, int]) -> tuple[str, str]:
    """The exact rule for a yes/no outcome over trials: the same all/some/none class.

    Args:
        real: (trials where it holds, trials) on the real engine.
        sim: the same on the sim.
    """
    if real[1] == 0 or sim[1] == 0:
        return NOT_APPLICABLE, "no trials on one side"
    a, b = share_class(*real), share_class(*sim)
    if a == b:
        return AGREE, f"{a} on both"
    return DISAGREE, f"real {a} ({real[0]}/{real[1]}), sim {b} ({sim[0]}/{sim[1]})"


def judge_presence(real: bool, sim: bool) -> tuple[str, str]:
    """The exact rule for "seen in at least one trial": both sides the same."""
    if real == sim:
        return AGREE, "seen on both" if real else "seen on neither"
    return DISAGREE, "real only" if real else "sim only"


def judge_range(real: Sequence[float], sim: Sequence[float]) -> tuple[str, str]:
    """The range rule: the real median inside the sim's [p5, p95] (or 20% of a degenerate one).

    Args:
        real: the real engine's values (None already left out).
        sim: the sim's values.
    """
    if not real and not sim:
        return NOT_APPLICABLE, "no values on either side"
    if not real or not sim:
        return DISAGREE, "values on the real side only" if real else "values on the sim side only"
    med = median(real)
    lo, hi, mid = percentile(sim, 0.05), percentile(sim, 0.95), median(sim)
    if lo < hi:
        if lo <= med <= hi:
            return AGREE, "real median inside the sim's [p5, p95]"
        where = "below" if med < lo else "above"
        return DISAGREE, f"real median {where} the sim's [p5, p95]"
    if abs(med - mid) <= DEGENERATE_TOLERANCE * abs(mid):
        return AGREE, f"sim range one value; real median within {DEGENERATE_TOLERANCE:.0%}"
    return DISAGREE, f"sim range one value; real median beyond {DEGENERATE_TOLERANCE:.0%}"


# ----------------------------------------------------------------- rows


@dataclass(frozen=True)
class Row:
    """One protocol x episode x metric: both sides and the verdict.

    Attributes:
        protocol: the run protocol.
        episode: the episode label, or :data:`RUN_LABEL`.
        metric: the metric (:data:`DOC`), ``occurs``, ``settles``, ``anomaly:<kind>``
            or ``not_allowed``.
        rule: :data:`EXACT`, :data:`RANGE` or :data:`REPORT_ONLY`.
        verdict: :data:`AGREE`, :data:`DISAGREE`, :data:`NOT_APPLICABLE` or
            :data:`REPORTED`.
        why: the verdict in words.
        real: the real side: ``n``, ``median``, ``min``, ``max`` (numeric rows) or
            ``hits``, ``n`` (exact rows), ``values`` (numeric rows).
        sim: the sim side: ``n``, ``median``, ``p5``, ``p95``, ``min``, ``max``,
            or ``hits``, ``n``; ``values``.
        zero: every value on both sides is 0.
        allowed: for ``anomaly:<kind>``, whether the protocol allows the kind.
        close: for range rows with values on both sides, whether the real median
            is within :data:`DEGENERATE_TOLERANCE` of the sim median.
    """

    protocol: str
    episode: str
    metric: str
    rule: str
    verdict: str
    why: str
    real: Mapping[str, Any]
    sim: Mapping[str, Any]
    zero: bool = False
    allowed: bool | None = None
    close: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able."""
        return asdict(self)


def _numbers(values: Iterable[Any]) -> list[float]:
    return [float(v) for v in values if v is not None]


def real_summary(values: Sequence[float | None]) -> dict[str, Any]:
    """The real side of a numeric row: n, median, [min, max] and the values."""
    xs = _numbers(values)
    if not xs:
        return {"n": 0, "median": None, "min": None, "max": None, "values": list(values)}
    return {"n": len(xs), "median": median(xs), "min": min(xs), "max": max(xs), "values": xs}


def sim_summary(values: Sequence[float | None]) -> dict[str, Any]:
    """The sim side of a numeric row: n, median, [p5, p95], [min, max] and the values."""
    xs = _numbers(values)
    if not xs:
        return {
            "n": 0,
            "median": None,
            "p5": None,
            "p95": None,
            "min": None,
            "max": None,
            "values": list(values),
        }
    return {
        "n": len(xs),
        "median": median(xs),
        "p5": percentile(xs, 0.05),
        "p95": percentile(xs, 0.95),
        "min": min(xs),
        "max": max(xs),
        "values": xs,
    }


def range_row(
    protocol: str,
    episode: str,
    metric: str,
    real: Sequence[float | None],
    sim: Sequence[float | None],
) -> Row:
    """A row judged by the range rule."""
    r, s = real_summary(real), sim_summary(sim)
    verdict, why = judge_range(r["values"] if r["n"] else [], s["values"] if s["n"] else [])
    both = bool(r["n"] and s["n"])
    zero = both and all(v == 0 for v in [*r["values"], *s["values"]])
    close = (
        abs(r["median"] - s["median"]) <= DEGENERATE_TOLERANCE * abs(s["median"]) if both else None
    )
    return Row(protocol, episode, metric, RANGE, verdict, why, r, s, zero=zero, close=close)


def share_row(
    protocol: str, episode: str, metric: str, real: Sequence[bool], sim: Sequence[bool]
) -> Row:
    """A yes/no outcome per trial, judged by :func:`judge_share`."""
    rh, sh = sum(1 for x in real if x), sum(1 for x in sim if x)
    verdict, why = judge_share((rh, len(real)), (sh, len(sim)))
    return Row(
        protocol,
        episode,
        metric,
        EXACT,
        verdict,
        why,
        {"hits": rh, "n": len(real)},
        {"hits": sh, "n": len(sim)},
    )


def presence_row(
    protocol: str,
    metric: str,
    real: Sequence[bool],
    sim: Sequence[bool],
    allowed: bool | None = None,
) -> Row:
    """A whole-run "seen in at least one trial" row, judged by :func:`judge_presence`."""
    rh, sh = sum(1 for x in real if x), sum(1 for x in sim if x)
    verdict, why = judge_presence(rh > 0, sh > 0)
    return Row(
        protocol,
        RUN_LABEL,
        metric,
        EXACT,
        verdict,
        why,
        {"hits": rh, "n": len(real)},
        {"hits": sh, "n": len(sim)},
        allowed=allowed,
    )


def reported_row(
    protocol: str, metric: str, real: Sequence[float | None], sim: Sequence[float | None]
) -> Row:
    """A whole-run figure shown, not judged."""
    return Row(
        protocol,
        RUN_LABEL,
        metric,
        REPORT_ONLY,
        REPORTED,
        "reported, not judged",
        real_summary(real),
        sim_summary(sim),
    )


def _anomaly_present(metrics: Mapping[str, Any], kind: str) -> bool:
    return int((metrics.get("anomalies") or {}).get(kind) or 0) > 0


def _allowed(protocol: str, trials: Sequence[TrialView]) -> frozenset[str]:
    """The kinds the protocol allows under the trials' commit mode (their first trial's)."""
    m = trials[0].metrics if trials else {}
    return allowed_kinds(
        protocol, str(m.get("commit_mode") or "auto"), bool(m.get("loss_possible") or False)
    )


def _label_order(labels: Iterable[str], firsts: Mapping[str, float]) -> list[str]:
    """Episode labels by when they start (median over trials), formation first."""
    return sorted(set(labels), key=lambda lab: (firsts.get(lab, float("inf")), lab))


def protocol_rows(protocol: str, real: Sequence[TrialView], sim: Sequence[TrialView]) -> list[Row]:
    """Every row of one protocol."""
    rows: list[Row] = []
    r_eps = [episodes_by_label(t.metrics) for t in real]
    s_eps = [episodes_by_label(t.metrics) for t in sim]
    starts: dict[str, list[float]] = {}
    for eps in [*r_eps, *s_eps]:
        for lab, e in eps.items():
            if e.get("start_ms") is not None:
                starts.setdefault(lab, []).append(float(e["start_ms"]))
    firsts = {lab: median(v) for lab, v in starts.items()}
    for lab in _label_order([k for eps in [*r_eps, *s_eps] for k in eps], firsts):
        rows.append(
            share_row(protocol, lab, "occurs", [lab in e for e in r_eps], [lab in e for e in s_eps])
        )
        r_have = [e[lab] for e in r_eps if lab in e]
        s_have = [e[lab] for e in s_eps if lab in e]
        rows.append(
            share_row(
                protocol,
                lab,
                "settles",
                [_settled(e) for e in r_have],
                [_settled(e) for e in s_have],
            )
        )
        for key, _doc in EPISODE_METRICS:
            rows.append(
                range_row(
                    protocol,
                    lab,
                    key,
                    [e.get(key) for e in r_have],
                    [e.get(key) for e in s_have],
                )
            )
    allowed = _allowed(protocol, [*real, *sim])
    for kind in ANOMALY_KINDS:
        r_seen = [_anomaly_present(t.metrics, kind) for t in real]
        s_seen = [_anomaly_present(t.metrics, kind) for t in sim]
        if any(r_seen) or any(s_seen):
            rows.append(
                presence_row(protocol, f"anomaly:{kind}", r_seen, s_seen, allowed=kind in allowed)
            )
    rows.append(
        presence_row(
            protocol,
            "not_allowed",
            [int(t.metrics.get("anomalies_not_allowed") or 0) > 0 for t in real],
            [int(t.metrics.get("anomalies_not_allowed") or 0) > 0 for t in sim],
        )
    )
    for key, _doc in RANGE_RUN_METRICS:
        rows.append(
            range_row(
                protocol,
                RUN_LABEL,
                key,
                [t.metrics.get(key) for t in real],
                [t.metrics.get(key) for t in sim],
            )
        )
    getters: dict[str, Callable[[TrialView], float | None]] = {
        "wall_s": lambda t: t.wall_s,
        "cpu_s": lambda t: t.cpu_s,
        "events": lambda t: None if t.events is None else float(t.events),
    }
    for key, _doc in REPORTED_METRICS:
        get = getters[key]
        rows.append(reported_row(protocol, key, [get(t) for t in real], [get(t) for t in sim]))
    return rows


def _settled(e: Mapping[str, Any]) -> bool:
    if "settled" in e:
        return bool(e["settled"])
    return e.get("time_to_stable_ms") is not None


# ----------------------------------------------------------------- the whole


@dataclass
class Agreement:
    """Every row, with what went in."""

    rows: list[Row]
    real: Side
    sim: Side
    plan_mismatches: list[str] = field(default_factory=list)
    settings_listed_once: list[str] = field(default_factory=list)

    def counts(self, rule: str | None = None) -> dict[str, int]:
        """Rows per verdict (of one rule, or all judged rules)."""
        out: dict[str, int] = {AGREE: 0, DISAGREE: 0, NOT_APPLICABLE: 0}
        for r in self.rows:
            if r.rule == REPORT_ONLY or (rule is not None and r.rule != rule):
                continue
            out[r.verdict] = out.get(r.verdict, 0) + 1
        return out

    def disagreements(self) -> list[Row]:
        """The rows that disagree."""
        return [r for r in self.rows if r.verdict == DISAGREE]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: inputs, counts, and every row."""

        def side(s: Side) -> dict[str, Any]:
            return {
                "engine": s.engine,
                "source": s.source,
                "trials": len(s.trials),
                "protocols": {p: s.seeds(p) for p in s.protocols()},
                "time_scales": {p: list(v) for p, v in s.time_scales.items()},
                "excluded": [list(x) for x in s.excluded],
            }

        return {
            "kind": "rebalance-emu engine agreement",
            "rules": {
                "exact": "occurs/settles: the same all/some/none class over trials; "
                "anomaly kinds and not-allowed: seen in some trial on both sides or on neither",
                "range": "real median inside the sim's [p5, p95]; degenerate range: within "
                f"{DEGENERATE_TOLERANCE:.0%} of the sim median",
                "reported": "shown, not judged",
            },
            "real": side(self.real),
            "sim": side(self.sim),
            "scenario": self.real.scenario,
            "plan_mismatches": self.plan_mismatches,
            "settings_listed_by_one_side": self.settings_listed_once,
            "counts": {
                "all": self.counts(),
                EXACT: self.counts(EXACT),
                RANGE: self.counts(RANGE),
                "range_zero_on_both": sum(
                    1 for r in self.rows if r.rule == RANGE and r.zero and r.verdict == AGREE
                ),
                "range_disagree_but_close": sum(
                    1 for r in self.rows if r.rule == RANGE and r.verdict == DISAGREE and r.close
                ),
            },
            "rows": [r.to_dict() for r in self.rows],
        }


def compare_sides(real: Side, sim: Side) -> Agreement:
    """The agreement table of two sides of one scenario.

    Raises:
        AgreementError: the sides ran different scenarios, or share no protocol.
    """
    listed_once, ra, sa = _settings_listed_by_one_side(real.scenario, sim.scenario)
    if ra != sa:
        diff = sorted(k for k in set(ra) | set(sa) if ra.get(k) != sa.get(k))
        raise AgreementError(f"the two sides ran different scenarios (they differ in {diff})")
    protocols = sorted(
        (p for p in real.protocols() if p in sim.protocols()),
        key=lambda p: (PROTOCOL_ORDER.index(p) if p in PROTOCOL_ORDER else len(PROTOCOL_ORDER), p),
    )
    if not protocols:
        raise AgreementError("the two sides share no protocol")
    mismatches = [
        f"{p} seed {seed}: the drawn action plans differ"
        for (p, seed), plan in sorted(real.plans.items())
        if (p, seed) in sim.plans and sim.plans[(p, seed)] != plan
    ]
    rows: list[Row] = []
    for p in protocols:
        rows += protocol_rows(
            p,
            [t for t in real.trials if t.protocol == p],
            [t for t in sim.trials if t.protocol == p],
        )
    return Agreement(rows, real, sim, mismatches, listed_once)


def _settings_listed_by_one_side(
    a: Mapping[str, Any], b: Mapping[str, Any]
) -> tuple[list[str], dict[str, Any], dict[str, Any]]:
    """Effective Kafka settings only one side's manifest lists, and both scenarios without them.

    A later emulator lists a setting it made settable (at its Kafka default)
    that an earlier one did not list; such a key says nothing about the run.
    Every setting both list must still agree, as must everything else.
    """
    ca, cb = copy.deepcopy(dict(a)), copy.deepcopy(dict(b))
    out: list[str] = []
    ea, eb = ca.get("kafka_effective"), cb.get("kafka_effective")
    if not isinstance(ea, dict) or not isinstance(eb, dict):
        return out, ca, cb
    for proto in sorted(set(ea) & set(eb)):
        ka, kb = ea[proto], eb[proto]
        if not isinstance(ka, dict) or not isinstance(kb, dict):
            continue
        for key in sorted(set(ka) ^ set(kb)):
            side = "real" if key in ka else "sim"
            value = ka.get(key, kb.get(key))
            out.append(f"{proto} {key} = {value} (only the {side} side lists it)")
            ka.pop(key, None)
            kb.pop(key, None)
    return out, ca, cb


# ----------------------------------------------------------------- text


def _scale(metric: str) -> float:
    """ms metrics are shown in seconds."""
    return 1000.0 if metric.endswith("_ms") else 1.0


def num(v: float | None, div: float = 1.0) -> str:
    """A number for a table: 3 significant digits, thousands separated, ``-`` for None."""
    if v is None:
        return "-"
    x = v / div
    if x == int(x) and abs(x) < 1e15:
        return f"{int(x):,}"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def side_text(row: Row, side: str) -> str:
    """One side of a row as a table cell."""
    d = row.real if side == "real" else row.sim
    if row.rule == EXACT:
        return f"{d['hits']}/{d['n']}"
    if not d["n"]:
        return "- (n=0)"
    div = _scale(row.metric)
    lo, hi = ("min", "max") if side == "real" else ("p5", "p95")
    if d[lo] == d[hi]:
        return f"{num(d['median'], div)} (n={d['n']})"
    return f"{num(d['median'], div)} [{num(d[lo], div)}, {num(d[hi], div)}] (n={d['n']})"


def metric_label(metric: str) -> str:
    """The metric's name in tables (ms metrics say seconds)."""
    return metric.removesuffix("_ms") + " (s)" if metric.endswith("_ms") else metric


MARK: Final[Mapping[str, str]] = {AGREE: "yes", DISAGREE: "**NO**", NOT_APPLICABLE: "n/a"}


def _scale_text(side: Side, protocol: str) -> str:
    """The time scales a side's trials of ``protocol`` ran at (``-`` if none was recorded)."""
    return ", ".join(f"{x:g}" for x in side.time_scales.get(protocol, ())) or "-"


def to_markdown(ag: Agreement, *, include_zero: bool = False) -> str:
    """The full table, per protocol, with the inputs and the counts first."""
    c, ce, cr = ag.counts(), ag.counts(EXACT), ag.counts(RANGE)
    zero = sum(1 for r in ag.rows if r.rule == RANGE and r.zero and r.verdict == AGREE)
    close = sum(1 for r in ag.rows if r.rule == RANGE and r.verdict == DISAGREE and r.close)
    lines = [
        "# Agreement of the engines",
        "",
        f"Real: `{ag.real.source}` ({len(ag.real.trials)} trials); "
        f"sim: `{ag.sim.source}` ({len(ag.sim.trials)} trials).",
        "",
        "| protocol | real seeds | sim seeds | real time scale | sim time scale |",
        "|---|---|---|---|---|",
    ]
    for p in dict.fromkeys(r.protocol for r in ag.rows):
        lines.append(
            f"| {p} | {_seed_text(ag.real.seeds(p))} | {_seed_text(ag.sim.seeds(p))} "
            f"| {_scale_text(ag.real, p)} | {_scale_text(ag.sim, p)} |"
        )
    lines += [
        "",
        f"Judged rows: **{c[AGREE]} agree, {c[DISAGREE]} disagree**, {c[NOT_APPLICABLE]} n/a "
        f"(exact rule: {ce[AGREE]} agree, {ce[DISAGREE]} disagree; range rule: {cr[AGREE]} "
        f"agree, of which {zero} are 0 on both sides, {cr[DISAGREE]} disagree, of which "
        f"{close} have the real median within {DEGENERATE_TOLERANCE:.0%} of the sim's).",
        "",
        "Real: median [min, max]; sim: median [p5, p95]; exact rows: trials where it "
        f"holds / trials; ~: the real median within {DEGENERATE_TOLERANCE:.0%} of the sim "
        "median. Times in seconds.",
    ]
    if ag.plan_mismatches:
        lines += ["", "Drawn plans that differ: " + "; ".join(ag.plan_mismatches)]
    if ag.settings_listed_once:
        lines += [
            "",
            "Settings one side's manifest lists and the other's does not (at their "
            "defaults; left out of the comparison): " + "; ".join(ag.settings_listed_once),
        ]
    if ag.real.excluded or ag.sim.excluded:
        lines += ["", "Left out:"]
        for s in (ag.real, ag.sim):
            lines += [f"- {s.engine} {tid}: {why}" for tid, why in s.excluded]
    for p in dict.fromkeys(r.protocol for r in ag.rows):
        lines += [
            "",
            f"## {p}",
            "",
            "| episode | metric | rule | real | sim | agree | why |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in ag.rows:
            if r.protocol != p or r.verdict == NOT_APPLICABLE:
                continue
            if r.zero and not include_zero:
                continue
            metric = metric_label(r.metric)
            if r.allowed is not None:
                metric += " (allowed)" if r.allowed else " (not allowed)"
            mark = MARK.get(r.verdict, r.verdict)
            if r.verdict == DISAGREE and r.close:
                mark += " ~"
            lines.append(
                f"| {r.episode} | {metric} | {r.rule} | {side_text(r, 'real')} | "
                f"{side_text(r, 'sim')} | {mark} | {r.why} |"
            )
    hidden = "" if include_zero else f" and the {zero} rows that are 0 on both sides"
    lines += ["", f"Rows not shown: those n/a on both sides{hidden}.", ""]
    return "\n".join(lines)


def _seed_text(seeds: Sequence[int]) -> str:
    if not seeds:
        return "-"
    if seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{seeds[0]}..{seeds[-1]} ({len(seeds)})"
    return f"{', '.join(str(s) for s in seeds)} ({len(seeds)})"


def summary_table(
    ag: Agreement,
    episodes: Sequence[str],
    metrics: Sequence[str],
    protocols: Sequence[str],
    *,
    skip_zero: bool = False,
) -> str:
    """A compact markdown table: per episode x metric, per protocol ``real · sim [p5, p95] ok``.

    Exact rows show ``real hits/n · sim hits/n``; ``no~``: disagrees, but the real
    median is within 20% of the sim's. Rows n/a for every protocol are left out,
    and with ``skip_zero`` those that are 0 on both sides (or n/a) for every protocol.
    """
    by = {(r.protocol, r.episode, r.metric): r for r in ag.rows}
    head = "| episode | metric | " + " | ".join(protocols) + " |"
    lines = [head, "|---|---|" + "---|" * len(protocols)]
    for ep in episodes:
        for m in metrics:
            cells = []
            found = [by.get((p, ep, m)) for p in protocols]
            shown = [r for r in found if r is not None and r.verdict != NOT_APPLICABLE]
            if not shown or (skip_zero and all(r.zero for r in shown)):
                continue
            for r in found:
                if r is None or r.verdict == NOT_APPLICABLE:
                    cells.append("-")
                    continue
                mark = "ok" if r.verdict == AGREE else "**NO**"
                if r.verdict == DISAGREE and r.close:
                    mark = "no~"
                if r.rule == REPORT_ONLY:
                    mark = ""
                if r.rule == EXACT:
                    cells.append(
                        f"{r.real['hits']}/{r.real['n']} · {r.sim['hits']}/{r.sim['n']} {mark}"
                    )
                    continue
                div = _scale(m)
                s = r.sim
                sim = (
                    f"{num(s['median'], div)} [{num(s['p5'], div)}, {num(s['p95'], div)}]"
                    if s["n"]
                    else "-"
                )
                cells.append(f"{num(r.real['median'], div)} · {sim} {mark}".rstrip())
            lines.append(f"| {ep} | {metric_label(m)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
