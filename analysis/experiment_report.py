"""Writing the experiment report: ``report.md``, ``report.html``, ``metrics.json``, ``plots/``.

Works on the JSON-able rows of :mod:`analysis.experiment` (no Spark). Plots:
per scenario, grid point and episode, each headline metric's values over the
seeds per protocol (a box with every seed's value as a dot); for a sweep (a
grid of one numeric key) each metric against the swept setting per protocol,
the median as a line and its 95% bootstrap interval as a band.
"""

from __future__ import annotations

import base64
import html
import json
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.episodes import EPISODE_METRICS, FORMATION
from analysis.report import (
    PROTOCOL_ORDER,
    fmt,
    html_table,
    jsonable,
    md_table,
    png_bytes,
    subplots,
)

HEADLINE_METRICS = (
    "time_to_stable_ms",
    "partition_unavailable_s",
    "idle_member_s",
    "duplicates",
    "partitions_revoked",
    "peak_lag",
)
"""The metrics plotted per episode kind (every metric is in the tables and metrics.json)."""

RUN_LABEL = "whole run"
RUN_METRICS: tuple[tuple[str, str], ...] = (
    ("duplicates", "messages processed again, whole run"),
    ("loss", "messages never processed, whole run"),
    ("anomalies_not_allowed", "anomalies the protocol does not allow"),
)


DOC = dict(EPISODE_METRICS)
SIGNIFICANCE = 0.05


def _proto_key(p: str) -> tuple[int, str]:
    return (PROTOCOL_ORDER.index(p) if p in PROTOCOL_ORDER else 99, p)


def _episode_key(label: str) -> tuple[int, str]:
    if label == FORMATION:
        return (2, label)
    if label == RUN_LABEL:
        return (3, label)
    return (0 if "+" not in label else 1, label)


def _scale(metric: str) -> tuple[float, str]:
    """Plot and table unit: ms metrics shown in seconds."""
    if metric.endswith("_ms"):
        return 1000.0, metric.removesuffix("_ms") + " (s)"
    return 1.0, metric


NONE_MEANS = {
    "time_to_stable_ms": "not settled",
    "time_to_detect_ms": "not detected",
    "lag_recovery_ms": "lag not back",
}
"""What a missing value of a metric means (others: the metric does not apply)."""


def cell_text(row: Mapping[str, Any]) -> str:
    """``median [ci] · p95 · min-max · n`` of one summary row (ms metrics in seconds)."""
    missing = int(row.get("not_applicable") or 0)
    why = NONE_MEANS.get(str(row["metric"]), "n/a")
    if not row.get("n"):
        return f"- (n=0{f', {missing} {why}' if missing else ''})"
    div, _ = _scale(str(row["metric"]))

    def f(key: str) -> str:
        v = row.get(key)
        return fmt(None if v is None else float(v) / div)

    extra = f", {missing} {why}" if missing else ""
    return (
        f"{f('median')} [{f('ci_low')}, {f('ci_high')}] · p95 {f('p95')} · "
        f"{f('min')}-{f('max')} · n={row['n']}{extra}"
    )


def _panels(rows: Sequence[Mapping[str, Any]]) -> tuple[Any, list[Any], list[str]]:
    """A 2 x 3 figure: one panel per headline metric present in ``rows`` (others hidden)."""
    metrics = [m for m in HEADLINE_METRICS if any(r["metric"] == m for r in rows)]
    fig, grid = subplots(2, 3, figsize=(10, 6.4))
    axes = list(grid.flat)
    for extra in axes[len(metrics) :]:
        extra.set_visible(False)
    for ax in axes:
        ax.ticklabel_format(axis="y", useOffset=False, style="plain")
    return fig, axes, metrics


def _plot_strips(rows: Sequence[Mapping[str, Any]], title: str) -> Any:
    """One panel per headline metric: a box per protocol and every seed's value as a dot."""
    fig, axes, metrics = _panels(rows)
    rng = random.Random(0)  # jitter only
    for ax, metric in zip(axes, metrics, strict=False):
        div, unit = _scale(metric)
        sub = sorted(
            (r for r in rows if r["metric"] == metric), key=lambda r: _proto_key(r["protocol"])
        )
        data = [[v / div for v in r["values"] if v is not None] for r in sub]
        labels = [r["protocol"] for r in sub]
        if any(data):
            ax.boxplot([d or [float("nan")] for d in data], showfliers=False)
            for i, d in enumerate(data, 1):
                ax.scatter([i + rng.uniform(-0.12, 0.12) for _ in d], d, s=10, alpha=0.7)
        ax.set_xticks(range(1, len(labels) + 1))
        ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=7)
        ax.set_title(unit, fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def _plot_sweep(
    rows: Sequence[Mapping[str, Any]], key: str, values: Sequence[Any], title: str
) -> Any:
    """Each headline metric against the swept setting: median line, CI band, per protocol."""
    fig, axes, metrics = _panels(rows)
    for ax, metric in zip(axes, metrics, strict=False):
        div, unit = _scale(metric)
        for proto in sorted({r["protocol"] for r in rows}, key=_proto_key):
            xs, med, lo, hi = [], [], [], []
            for v in values:
                label = f"{key}={v}"
                hit = [
                    r
                    for r in rows
                    if r["metric"] == metric and r["protocol"] == proto and r["point"] == label
                ]
                if hit and hit[0].get("median") is not None:
                    xs.append(float(v))
                    med.append(hit[0]["median"] / div)
                    lo.append(hit[0]["ci_low"] / div)
                    hi.append(hit[0]["ci_high"] / div)
            if xs:
                line = ax.plot(xs, med, marker="o", ms=3, label=proto)[0]
                ax.fill_between(xs, lo, hi, alpha=0.2, color=line.get_color())
        ax.set_xlabel(key, fontsize=7)
        ax.set_title(unit, fontsize=8)
        ax.tick_params(labelsize=7)
    axes[0].legend(fontsize=6)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def _md(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return md_table(pd.DataFrame(list(rows), columns=list(header)), index=False).split("\n")


def _html(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    return html_table(pd.DataFrame(list(rows), columns=list(header)), index=False)


def write_experiment_report(
    out: Path,
    record: Mapping[str, Any],
    trials: Sequence[tuple[Mapping[str, Any], Path]],
    summaries: Sequence[Mapping[str, Any]],
    tests: Sequence[Mapping[str, Any]],
    excluded: Sequence[Mapping[str, Any]],
) -> None:
    """Write the report files into ``out`` (see the module docstring)."""
    plan = record["plan"]
    out.mkdir(parents=True, exist_ok=True)
    plots_dir = out / "plots"
    plots_dir.mkdir(exist_ok=True)
    for old in plots_dir.glob("*.png"):
        old.unlink()
    protocols = sorted(
        {str(s["protocol"]) for s in summaries} or set(plan["protocols"]), key=_proto_key
    )
    states: dict[str, int] = {}
    for t, _d in trials:
        states[str(t.get("_state"))] = states.get(str(t.get("_state")), 0) + 1
    walls = [float(t["_wall_s"]) for t, _ in trials if t.get("_wall_s") is not None]
    info = [
        f"experiment: {plan['name']} ({plan.get('source')})",
        f"scenarios: {', '.join(plan['scenarios'])}; protocols: {', '.join(plan['protocols'])}",
        "seeds: " + "; ".join(f"{k}: {', '.join(map(str, v))}" for k, v in plan["seeds"].items()),
        "grid: " + ("; ".join(f"{k} = {v}" for k, v in plan["grid"]) or "none (defaults)"),
        f"trials: {len(trials)} ("
        + ", ".join(f"{n} {s}" for s, n in sorted(states.items()))
        + f"); in the statistics: {len(trials) - len(excluded)}",
        f"trial wall time: {sum(walls) / 60:.1f} min in total"
        + (f", {sum(walls) / len(walls):.0f} s per trial" if walls else ""),
    ]
    if plan.get("description"):
        info.insert(1, str(plan["description"]).strip())
    plots: list[tuple[str, str, Path]] = []
    sections: list[tuple[str, list[str], list[list[str]], str]] = []  # title, header, rows, note
    by_group: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for s in summaries:
        by_group.setdefault((str(s["scenario"]), str(s["point"])), []).append(s)
    n_plot = 0
    for (sc, point), rows in sorted(by_group.items()):
        labels = sorted({str(r["episode"]) for r in rows}, key=_episode_key)
        for label in labels:
            sub = [r for r in rows if r["episode"] == label]
            metrics = [k for k, _ in EPISODE_METRICS if any(r["metric"] == k for r in sub)]
            metrics += [
                k
                for k, _doc in RUN_METRICS
                if k not in metrics and any(r["metric"] == k for r in sub)
            ]
            table: list[list[str]] = []
            for k in metrics:
                hits = [r for r in sub if r["metric"] == k]
                if all(not r.get("n") and not r.get("not_settled") for r in hits):
                    continue  # does not apply to this change under any protocol
                line = [_scale(k)[1]]
                for p in protocols:
                    hit = [r for r in sub if r["metric"] == k and r["protocol"] == p]
                    line.append(cell_text(hit[0]) if hit else "")
                table.append(line)
            sections.append((f"{sc} · {point} · {label}", ["metric", *protocols], table, ""))
            if label != RUN_LABEL:
                n_plot += 1
                name = f"episode_{n_plot:02d}"
                fig = _plot_strips(sub, f"{sc} · {point} · {label}")
                (plots_dir / f"{name}.png").write_bytes(png_bytes(fig))
                plots.append(
                    (
                        name,
                        f"{sc} · {point} · {label}: every seed's value, per protocol",
                        plots_dir / f"{name}.png",
                    )
                )
    grid = plan.get("grid") or []
    if (
        len(grid) == 1
        and all(isinstance(v, int | float) and not isinstance(v, bool) for v in grid[0][1])
        and len(grid[0][1]) > 1
    ):
        key, values = grid[0][0], grid[0][1]
        for sc in plan["scenarios"]:
            rows = [s for s in summaries if s["scenario"] == sc]
            for label in sorted({str(r["episode"]) for r in rows} - {RUN_LABEL}, key=_episode_key):
                n_plot += 1
                name = f"sweep_{n_plot:02d}"
                fig = _plot_sweep(
                    [r for r in rows if r["episode"] == label],
                    key,
                    values,
                    f"{sc} · {label} against {key}",
                )
                (plots_dir / f"{name}.png").write_bytes(png_bytes(fig))
                plots.append(
                    (
                        name,
                        f"{sc} · {label}: median and 95% interval against {key}",
                        plots_dir / f"{name}.png",
                    )
                )
    test_rows = [
        [
            f"{t['scenario']} · {t['point']} · {t['episode']}",
            _scale(str(t["metric"]))[1],
            f"{t['a']} vs {t['b']}",
            f"{float(t['p_value']):.3g}",
            f"{float(t['effect']):.2f}",
            "yes" if float(t["p_value"]) < SIGNIFICANCE else "no",
        ]
        for t in tests
        if t["metric"] in HEADLINE_METRICS
    ]
    test_header = [
        "episode",
        "metric",
        "protocols",
        "p (Mann-Whitney)",
        "P(a > b)",
        f"differ (p < {SIGNIFICANCE})",
    ]
    excl_rows = [
        [str(x["trial"]), str(x["protocol"]), str(x["point"]), str(x["seed"]), str(x["why"])]
        for x in excluded
    ]
    payload = {
        "title": f"Experiment {plan['name']}",
        "plan": plan,
        "trials": [
            {k: v for k, v in t.items() if not k.startswith("_")}
            | {"state": t.get("_state"), "wall_s": t.get("_wall_s")}
            for t, _ in trials
        ],
        "excluded": list(excluded),
        "summaries": list(summaries),
        "tests": list(tests),
        "definitions": {k: v for k, v in EPISODE_METRICS},
        "plots": [f"plots/{p.name}" for _, _, p in plots],
    }
    (out / "metrics.json").write_text(
        json.dumps(jsonable(payload), indent=1, allow_nan=False) + "\n"
    )
    note = (
        "Each cell: median [bootstrap 95% CI of the median] · p95 · min-max · n seeds "
        "(ms metrics in seconds). Only completed trials with complete evidence count; "
        "values that do not apply (a crash never detected, an episode that never settled) "
        "are left out and counted. Episodes: analysis/episodes.py."
    )
    md = [f"# Experiment {plan['name']}", ""] + [f"- {x}" for x in info] + [""]
    md += ["## Trials left out of the statistics", ""]
    md += (
        _md(["trial", "protocol", "point", "seed", "why"], excl_rows)
        if excl_rows
        else ["None: every trial completed with complete evidence."]
    ) + [""]
    md += ["## What each change cost, over the seeds", "", note, ""]
    for title, header, cells, _n in sections:
        md += [f"### {title}", "", *_md(header, cells), ""]
    md += [
        "## Do the protocols differ beyond the noise?",
        "",
        "Two-sided Mann-Whitney rank tests over the seeds (analysis/stats.py); P(a > b) "
        "is the chance a seed of a gives a higher value than a seed of b.",
        "",
    ]
    md += [*_md(test_header, test_rows), ""]
    for name, caption, path in plots:
        md += [f"### {name}", "", f"![{name}](plots/{path.name})", "", caption, ""]
    (out / "report.md").write_text("\n".join(md))
    css = (
        "body{font-family:sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse;"
        "font-size:12px;margin:0.5em 0 1.5em}th,td{border:1px solid #ccc;padding:3px 7px}"
        "thead th{background:#f0f0f0}figure img{max-width:100%}figcaption{font-size:12px}"
    )
    title = html.escape(f"Experiment {plan['name']}")
    h = [
        "<!DOCTYPE html>",
        f'<html lang="en"><head><meta charset="utf-8"><title>{title}</title>',
        f"<style>{css}</style></head><body><h1>{title}</h1><ul>",
    ]
    h += [f"<li>{html.escape(x)}</li>" for x in info] + ["</ul>"]
    h.append("<h2>Trials left out of the statistics</h2>")
    h.append(
        _html(["trial", "protocol", "point", "seed", "why"], excl_rows)
        if excl_rows
        else "<p>None: every trial completed with complete evidence.</p>"
    )
    h.append(f"<h2>What each change cost, over the seeds</h2><p>{html.escape(note)}</p>")
    for title, header, cells, _n in sections:
        h.append(f"<h3>{html.escape(title)}</h3>" + _html(header, cells))
    h.append("<h2>Do the protocols differ beyond the noise?</h2>" + _html(test_header, test_rows))
    for name, caption, path in plots:
        b64 = base64.b64encode(path.read_bytes()).decode("ascii")
        h.append(
            f'<figure id="plot-{name}"><img alt="{name}" '
            f'src="data:image/png;base64,{b64}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>"
        )
    h.append("</body></html>")
    (out / "report.html").write_text("\n".join(h))
