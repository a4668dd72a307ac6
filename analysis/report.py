"""The comparison report: plots, ``report.md``, a self-contained ``report.html``, ``metrics.json``.

Everything here works on small pandas frames (the plot frames of
:mod:`analysis.metrics`, already collected with ``toPandas``) and on the
JSON-able metrics dict of :func:`analysis.metrics.compute_metrics`; no Spark
job runs here. Plots are drawn on matplotlib's Agg canvas: figures are made
without pyplot, so nothing here touches the process's matplotlib backend (a
notebook keeps its inline backend) or keeps figures alive.

Frames (keys of the ``frames`` mapping; a missing or empty frame gives a plot
that says there is nothing to show, never an error):

* ``ownership``: protocol, topic, partition, member, t_start_ms, t_end_ms
  (``t_end_ms`` null: still owned at the end of the run);
* ``throughput``: protocol, t_ms, produced, processed, lag (per time bucket);
* ``durations``: protocol, t_ms, duration_ms (one row per rebalance);
* ``faults``: protocol, t_ms, reason, member;
* ``anomalies``: the checker rows (:data:`analysis.checkers.ANOMALY_SCHEMA`);
* ``herd``: run, protocol, group_size, measure, per_change (several runs only:
  ZooKeeper operations or coordinator requests per membership change).

The ``protocol`` column names a series: the protocol for one run, or
``<run>/<protocol>`` when several runs are compared (see :mod:`analysis.compare`).
"""

from __future__ import annotations

import base64
import contextlib
import html
import json
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import matplotlib
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from emulator import intervals
from emulator.protocols import RUN_PROTOCOLS, SPECS

OWNERSHIP: Final = "ownership"
THROUGHPUT: Final = "throughput"
DURATIONS: Final = "durations"
FAULTS: Final = "faults"
ANOMALIES: Final = "anomalies"
HERD: Final = "herd"
SERIES_ENDS: Final = "series_ends"
"""Frame key: ``protocol, end_ms``, each series' own scenario end (several runs)."""

FRAME_COLUMNS: Final[Mapping[str, tuple[str, ...]]] = {
    OWNERSHIP: ("protocol", "topic", "partition", "member", "t_start_ms", "t_end_ms"),
    THROUGHPUT: ("protocol", "t_ms", "produced", "processed", "lag"),
    DURATIONS: ("protocol", "t_ms", "duration_ms"),
    FAULTS: ("protocol", "t_ms", "reason", "member"),
    SERIES_ENDS: ("protocol", "end_ms"),
    ANOMALIES: (
        "protocol",
        "group",
        "kind",
        "topic",
        "partition",
        "member",
        "other_member",
        "t_start_ms",
        "t_end_ms",
        "offset_start",
        "offset_end",
        "count",
        "allowed",
        "detail",
    ),
    HERD: ("run", "protocol", "group_size", "measure", "per_change"),
}

PROTOCOL_ORDER: Final = RUN_PROTOCOLS
PROTOCOL_TITLES: Final[Mapping[str, str]] = {name: s.title for name, s in SPECS.items()}
DOUBLE_COLOR: Final = "#d62728"
GAP_COLOR: Final = "#7f7f7f"
FAULT_COLOR: Final = "#9467bd"
MAX_TIMELINE_ROWS: Final = 120  # partitions drawn per protocol; the rest are summarised


@dataclass
class ReportPaths:
    """What :func:`write_report` wrote.

    Attributes:
        dir: the report directory.
        markdown: ``report.md`` (plots linked as ``plots/*.png``).
        html: ``report.html``, self-contained (plots embedded as base64 PNG).
        metrics_json: ``metrics.json``.
        plots: every ``plots/*.png``, in report order.
    """

    dir: Path
    markdown: Path
    html: Path
    metrics_json: Path
    plots: list[Path] = field(default_factory=list)


# --------------------------------------------------------------------------- frames


def frame(frames: Mapping[str, Any], key: str) -> pd.DataFrame:
    """The frame ``key`` as pandas, with at least its declared columns (empty when absent).

    A Spark DataFrame is collected with ``toPandas``.
    """
    df = frames.get(key)
    if df is None:
        df = pd.DataFrame()
    elif not isinstance(df, pd.DataFrame):
        df = df.toPandas()
    df = df.copy()
    for col in FRAME_COLUMNS.get(key, ()):
        if col not in df.columns:
            df[col] = pd.Series(dtype="object")
    return df


def series_order(names: Sequence[str]) -> list[str]:
    """Series in report order: runs as first seen, then by protocol generation, then by name."""
    unique = list(dict.fromkeys(str(n) for n in names))
    runs = list(dict.fromkeys(n.rpartition("/")[0] for n in unique))

    def key(name: str) -> tuple[int, int, str]:
        run, _, proto = name.rpartition("/")
        idx = PROTOCOL_ORDER.index(proto) if proto in PROTOCOL_ORDER else len(PROTOCOL_ORDER)
        return (runs.index(run), idx, name)

    return sorted(unique, key=key)


def _title(series: str) -> str:
    run, _, proto = series.rpartition("/")
    name = PROTOCOL_TITLES.get(proto, proto)
    return f"{run}: {proto} ({name})" if run else f"{proto} ({name})"


def double_ownership_windows(own: pd.DataFrame, end_ms: float) -> pd.DataFrame:
    """Windows where two different members owned one partition at once.

    Args:
        own: ownership intervals (one protocol or several).
        end_ms: the end of the run, for intervals still open.

    Returns:
        protocol, topic, partition, t_start_ms, t_end_ms, members (``a+b``).
    """
    rows: list[dict[str, Any]] = []
    if own.empty:
        return pd.DataFrame(columns=["protocol", "topic", "partition", "t_start_ms", "t_end_ms"])
    df = own.assign(t_end_ms=own["t_end_ms"].fillna(end_ms))
    for (proto, topic, part), g in df.groupby(["protocol", "topic", "partition"], sort=False):
        ivs = [(float(r.t_start_ms), float(r.t_end_ms), str(r.member)) for r in g.itertuples()]
        for s, e, m1, m2 in intervals.pairwise_overlaps(ivs):
            rows.append(
                {
                    "protocol": proto,
                    "topic": topic,
                    "partition": int(part),
                    "t_start_ms": s,
                    "t_end_ms": e,
                    "members": f"{m1}+{m2}",
                }
            )
    return pd.DataFrame(
        rows,
        columns=["protocol", "topic", "partition", "t_start_ms", "t_end_ms", "members"],
    )


def unowned_gaps(
    own: pd.DataFrame,
    start_ms: float,
    end_ms: float,
    ends: Mapping[str, float] | None = None,
) -> pd.DataFrame:
    """Windows in ``[start_ms, end_ms)`` where a partition had no owner.

    Only partitions that appear in ``own`` are considered (a partition nobody
    ever owned is reported whole by the checkers, not here). ``ends``: per
    series, its own run's end instead of ``end_ms`` (a report of several runs
    of different lengths).

    Returns:
        protocol, topic, partition, t_start_ms, t_end_ms.
    """
    rows: list[dict[str, Any]] = []
    cols = ["protocol", "topic", "partition", "t_start_ms", "t_end_ms"]
    if own.empty:
        return pd.DataFrame(columns=cols)
    ends = ends or {}
    for (proto, topic, part), g in own.groupby(["protocol", "topic", "partition"], sort=False):
        end = ends.get(str(proto), end_ms)
        spans = [
            (float(s), float(e) if pd.notna(e) else end)
            for s, e in zip(g["t_start_ms"], g["t_end_ms"], strict=True)
        ]
        for s, e in intervals.gaps(spans, start_ms, end):
            rows.append(dict(zip(cols, (proto, topic, int(part), s, e), strict=True)))
    return pd.DataFrame(rows, columns=cols)


def run_span_ms(frames: Mapping[str, Any], manifests: Sequence[Mapping[str, Any]]) -> float:
    """The end of the plotted time axis: the longest scenario or the latest event seen."""
    end = 0.0
    for m in manifests:
        with contextlib.suppress(KeyError, TypeError, ValueError):
            end = max(end, float(m["scenario"]["duration_s"]) * 1000.0)
    own = frame(frames, OWNERSHIP)
    for col in ("t_start_ms", "t_end_ms"):
        if not own.empty and own[col].notna().any():
            end = max(end, float(own[col].max()))
    thr = frame(frames, THROUGHPUT)
    if not thr.empty and thr["t_ms"].notna().any():
        end = max(end, float(thr["t_ms"].max()))
    return end or 1000.0


def series_ends_ms(frames: Mapping[str, Any]) -> dict[str, float]:
    """Per series, its run's scenario end (:data:`SERIES_ENDS`, set when a report
    holds several runs)."""
    df = frame(frames, SERIES_ENDS)
    if df.empty:
        return {}
    return {str(p): float(e) for p, e in zip(df["protocol"], df["end_ms"], strict=True)}


def scenario_end_ms(manifests: Sequence[Mapping[str, Any]]) -> float | None:
    """The longest scenario's ``duration_s`` in ms (``None`` when no manifest says)."""
    ends: list[float] = []
    for m in manifests:
        with contextlib.suppress(KeyError, TypeError, ValueError):
            ends.append(float(m["scenario"]["duration_s"]) * 1000.0)
    return max(ends) if ends else None


def with_timeline_marks(
    faults: pd.DataFrame, manifest: Mapping[str, Any], protocols: Sequence[str]
) -> pd.DataFrame:
    """``faults`` plus a mark per scenario timeline action (join, leave ...) for each protocol.

    An action already marked by an event (the same member within a second,
    e.g. a pause's ``fault_injected``) is not added again.
    """
    df = frame({FAULTS: faults}, FAULTS)
    rows: list[dict[str, Any]] = []
    timeline = (manifest.get("scenario") or {}).get("timeline") or []
    for proto in protocols:
        have = df[df["protocol"] == proto]
        for a in timeline:
            try:
                t_ms = float(a["at_s"]) * 1000.0
            except (KeyError, TypeError, ValueError):
                continue
            member = a.get("member")
            near = have[(have["t_ms"].astype(float) - t_ms).abs() < 1000.0]
            if member is not None and (near["member"] == member).any():
                continue
            if member is None and (near["reason"] == a.get("action")).any():
                continue
            count = int(a.get("count") or 1)
            reason = str(a.get("action")) + (f" x{count}" if count > 1 else "")
            rows.append({"protocol": proto, "t_ms": t_ms, "reason": reason, "member": member})
    if not rows:
        return df
    extra = pd.DataFrame(rows, columns=list(FRAME_COLUMNS[FAULTS]))
    return pd.concat([d for d in (df, extra) if not d.empty], ignore_index=True)


# --------------------------------------------------------------------------- plots


def subplots(nrows: int = 1, ncols: int = 1, **kw: Any) -> tuple[Figure, Any]:
    """``pyplot.subplots`` without pyplot: a Figure on an Agg canvas."""
    fig = Figure(figsize=kw.pop("figsize", None))
    FigureCanvasAgg(fig)
    return fig, fig.subplots(nrows, ncols, **kw)


def png_bytes(fig: Figure, dpi: int = 90) -> bytes:
    """The figure as PNG bytes."""
    import io

    buf = io.BytesIO()
    fig.savefig(buf, dpi=dpi, format="png")
    return buf.getvalue()


def _member_colors(members: Sequence[str]) -> dict[str, Any]:
    """A colour per member, never the red of double ownership or the grey of gaps."""
    tab10 = matplotlib.colormaps["tab10"]
    tab20 = matplotlib.colormaps["tab20"]
    strong = [tab10(i) for i in (0, 1, 2, 4, 5, 6, 8, 9)]  # no red (3), no grey (7)
    light = [tab20(i) for i in (1, 3, 5, 9, 11, 13, 17, 19)]
    palette = strong + light
    ordered = sorted(dict.fromkeys(members), key=_natural)
    return {m: palette[i % len(palette)] for i, m in enumerate(ordered)}


def _natural(s: str) -> tuple[Any, ...]:
    import re

    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", str(s)))


def _empty(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#555")
    ax.set_xticks([])
    ax.set_yticks([])


NARROW_MARK: Final = 1 / 2000
"""The ownership plot's marks (no owner, two owners) narrower than this part of
the time axis (under half a pixel of the report's figure) are drawn filled, not hatched."""


def _box(t0: float, t1: float, y: float, half: float) -> list[tuple[float, float]]:
    """The corners of a bar from ``t0`` to ``t1`` on row ``y`` (``half`` its half height)."""
    return [(t0, y - half), (t0, y + half), (t1, y + half), (t1, y - half)]


def plot_ownership(
    own: pd.DataFrame,
    faults: pd.DataFrame,
    series: Sequence[str],
    end_ms: float,
    gap_end_ms: float | None = None,
    gap_ends: Mapping[str, float] | None = None,
    shared: Collection[str] = (),
) -> Figure:
    """Partition-ownership timeline, one panel per series.

    Each partition is a row; bars are coloured by owner; red cross-hatched
    bars mark double ownership, grey hatched bars unowned gaps (from time 0 to
    ``gap_end_ms``, default ``end_ms``: the scenario's end, so the shutdown
    after it is not a gap; ``gap_ends``: per series, its own run's end), dashed
    purple lines faults and membership changes. ``shared``: series whose
    members hold partitions together by design (share groups): their overlaps
    are not double ownership and are not marked; the panel says so.
    """
    n = max(1, len(series))
    rows_per = [
        min(MAX_TIMELINE_ROWS, own[own["protocol"] == s].groupby(["topic", "partition"]).ngroups)
        for s in series
    ] or [1]
    heights = [max(1.8, 0.16 * r + 1.2) for r in rows_per]
    fig, axes = subplots(
        n,
        1,
        figsize=(12, sum(heights) + 0.8),
        squeeze=False,
        gridspec_kw={"height_ratios": heights},
    )
    colors = _member_colors([str(m) for m in own["member"].dropna()])
    end_s = end_ms / 1000.0
    doubles = double_ownership_windows(own, end_ms)
    gaps = unowned_gaps(own, 0.0, gap_end_ms if gap_end_ms is not None else end_ms, gap_ends)
    for ax, s in zip(axes[:, 0], series or ["(none)"], strict=False):
        sub = own[own["protocol"] == s]
        ax.set_title(_title(s), loc="left", fontsize=10, pad=24)
        if sub.empty:
            _empty(ax, "no ownership events")
            continue
        keys = sorted(
            {(str(t), int(p)) for t, p in zip(sub["topic"], sub["partition"], strict=True)},
            key=lambda k: (k[0], k[1]),
        )
        shown = keys[:MAX_TIMELINE_ROWS]
        ypos = {k: i for i, k in enumerate(shown)}
        # One artist per owner, not per interval or per (row, owner): a long run
        # has tens of thousands of intervals, and every artist costs its drawing
        # (1,152 per-row artists: 9.9 s for a 3 M-event report; one per owner: 8.4 s).
        bars: dict[str, list[list[tuple[float, float]]]] = {}
        for topic, part, member, start, stop in zip(
            sub["topic"],
            sub["partition"],
            sub["member"],
            sub["t_start_ms"],
            sub["t_end_ms"],
            strict=True,
        ):
            y = ypos.get((str(topic), int(part)))
            if y is None:
                continue
            t0 = float(start) / 1000.0
            t1 = t0 + max((float(stop) if pd.notna(stop) else end_ms) / 1000.0 - t0, 0.01)
            bars.setdefault(str(member), []).append(_box(t0, t1, y, 0.4))
        for member, rects in bars.items():
            ax.add_collection(
                PolyCollection(rects, facecolors=colors.get(member, "#1f77b4"), linewidths=0),
                autolim=False,  # the limits are set below
            )
        marks_of = [(gaps, GAP_COLOR, "///")]
        if s in shared:
            ax.set_title(
                f"{_title(s)}: members hold partitions together by design",
                loc="left",
                fontsize=10,
                pad=24,
            )
        else:
            marks_of.append((doubles, DOUBLE_COLOR, "xxxx"))
        # A mark narrower than NARROW_MARK of the axis is drawn filled, all of a
        # kind as one artist: its hatch would not show, and hatching each of
        # thousands of boxes is most of a long run's drawing time.
        narrow_s = end_s * NARROW_MARK
        for frame_, color, hatch in marks_of:
            marked: dict[int, list[tuple[float, float]]] = {}
            thin: list[list[tuple[float, float]]] = []
            f = frame_[frame_["protocol"] == s]
            for topic, part, start, stop in zip(
                f["topic"], f["partition"], f["t_start_ms"], f["t_end_ms"], strict=True
            ):
                y = ypos.get((str(topic), int(part)))
                if y is None:
                    continue
                t0 = float(start) / 1000.0
                width = max(float(stop) / 1000.0 - t0, 0.02)
                if width < narrow_s:
                    t1 = t0 + width
                    thin.append(_box(t0, t1, y, 0.45))
                else:
                    marked.setdefault(y, []).append((t0, width))
            linewidth = 1.2 if color == DOUBLE_COLOR else 0.6
            for y, xr in marked.items():
                ax.broken_barh(
                    xr,
                    (y - 0.45, 0.9),
                    facecolors="none",
                    edgecolors=color,
                    hatch=hatch,
                    linewidth=linewidth,
                )
            if thin:
                ax.add_collection(
                    PolyCollection(thin, facecolors=color, edgecolors=color, linewidths=linewidth),
                    autolim=False,
                )
        marks = faults[faults["protocol"] == s].sort_values("t_ms")
        for i, r in enumerate(marks.itertuples()):
            t = float(r.t_ms) / 1000.0
            ax.axvline(t, color=FAULT_COLOR, linestyle="--", linewidth=1.0)
            label = str(r.reason) + (f" {r.member}" if pd.notna(r.member) and r.member else "")
            ax.text(
                t,
                1.0 + 0.07 * (i % 3),
                " " + label,
                color=FAULT_COLOR,
                fontsize=7,
                va="bottom",
                transform=ax.get_xaxis_transform(),
                clip_on=False,
            )
        ax.set_yticks(range(len(shown)))
        ax.set_yticklabels([f"{t}:{p}" for t, p in shown], fontsize=6)
        ax.set_ylim(-0.7, len(shown) + 0.6)
        ax.set_xlim(0, end_s)
        if len(keys) > len(shown):
            ax.text(
                1.0,
                1.01,
                f"first {len(shown)} of {len(keys)} partitions",
                transform=ax.transAxes,
                ha="right",
                fontsize=7,
            )
    axes[-1, 0].set_xlabel("emulated time (s)")
    handles = [Patch(facecolor=c, label=m) for m, c in list(colors.items())[:20]]
    handles += [
        Patch(facecolor="none", edgecolor=DOUBLE_COLOR, hatch="xxxx", label="double ownership"),
        Patch(facecolor="none", edgecolor=GAP_COLOR, hatch="///", label="no owner"),
        Patch(facecolor="none", edgecolor=FAULT_COLOR, linestyle="--", label="fault / change"),
    ]
    fig.legend(handles=handles, loc="upper right", fontsize=7, ncol=min(8, len(handles)))
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    return fig


def plot_throughput(thr: pd.DataFrame, faults: pd.DataFrame, series: Sequence[str]) -> Figure:
    """Processed messages per bucket (produced dashed) and lag over time, one line per series."""
    fig, (ax1, ax2) = subplots(2, 1, figsize=(12, 6.5), sharex=True)
    if thr.empty:
        _empty(ax1, "no throughput data")
        _empty(ax2, "no lag data")
        return fig
    cmap = matplotlib.colormaps["tab10"]
    for i, s in enumerate(series):
        sub = thr[thr["protocol"] == s].sort_values("t_ms")
        if sub.empty:
            continue
        t = sub["t_ms"].astype(float) / 1000.0
        color = cmap(i % 10)
        ax1.plot(t, sub["processed"].astype(float), color=color, label=f"{s} processed")
        ax1.plot(t, sub["produced"].astype(float), color=color, linestyle=":", alpha=0.6)
        ax2.plot(t, sub["lag"].astype(float), color=color, label=s)
        for r in faults[faults["protocol"] == s].itertuples():
            ax2.axvline(float(r.t_ms) / 1000.0, color=color, linestyle="--", alpha=0.3)
    ax1.set_ylabel("messages per bucket\n(dotted: produced)")
    ax1.set_title("throughput", loc="left", fontsize=10)
    ax1.legend(fontsize=7, ncol=2)
    ax2.set_ylabel("lag (messages)")
    ax2.set_title("consumer lag (produced - processed)", loc="left", fontsize=10)
    ax2.set_xlabel("emulated time (s)")
    ax2.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig


def plot_durations(dur: pd.DataFrame, series: Sequence[str]) -> Figure:
    """Rebalance durations (trigger to settled): a box per series with every rebalance as a dot."""
    fig, ax = subplots(figsize=(12, 4.2))
    data = [
        dur[dur["protocol"] == s]["duration_ms"].dropna().astype(float) / 1000.0 for s in series
    ]
    if not any(len(d) for d in data):
        _empty(ax, "no rebalances")
        return fig
    positions = list(range(1, len(series) + 1))
    ax.boxplot(
        [d.to_numpy() if len(d) else [math.nan] for d in data],
        positions=positions,
        widths=0.5,
        showfliers=False,
    )
    for pos, d in zip(positions, data, strict=True):
        if len(d):
            jitter = [(((i * 7919) % 100) / 100.0 - 0.5) * 0.3 for i in range(len(d))]
            ax.scatter([pos + j for j in jitter], d, s=12, alpha=0.7, color="#1f77b4")
    ax.set_xticks(positions)
    ax.set_xticklabels([f"{s}\nn={len(d)}" for s, d in zip(series, data, strict=True)], fontsize=8)
    ax.set_ylabel("rebalance duration (s)")
    ax.set_title("rebalance durations (trigger to settled)", loc="left", fontsize=10)
    fig.tight_layout()
    return fig


def plot_herd(herd: pd.DataFrame) -> Figure:
    """Cost per membership change against group size, one line per protocol and measure."""
    fig, ax = subplots(figsize=(10, 4.5))
    if herd.empty:
        _empty(ax, "herd cost needs several runs")
        return fig
    herd = herd.dropna(subset=["group_size", "per_change"])
    for (proto, measure), g in herd.groupby(["protocol", "measure"], sort=True):
        g = g.sort_values("group_size")
        ax.plot(
            g["group_size"].astype(float),
            g["per_change"].astype(float),
            marker="o",
            label=f"{proto}: {measure}",
        )
    ax.set_xlabel("group size (consumers)")
    ax.set_ylabel("operations per membership change")
    ax.set_title("the herd: coordination cost per membership change", loc="left", fontsize=10)
    if len(herd) and float(herd["per_change"].astype(float).max()) > 0:
        ax.set_yscale("symlog")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- tables


def flatten(d: Mapping[str, Any], prefix: str = "", max_keys: int | None = None) -> dict[str, Any]:
    """Nested dicts to dotted keys (``{"a": {"b": 1}}`` -> ``{"a.b": 1}``); lists stay.

    A nested dict with more than ``max_keys`` entries (per-member values of a
    large group) becomes one ``"<n> entries"`` cell instead.
    """
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            if max_keys is not None and len(v) > max_keys:
                out[key] = f"{len(v)} entries (metrics.json)"
            else:
                out.update(flatten(v, key + ".", max_keys))
        else:
            out[key] = v
    return out


def fmt(v: Any) -> str:
    """A table cell."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if math.isnan(v):
            return "-"
        if v == int(v) and abs(v) < 1e15:
            return f"{int(v):,}"
        return f"{v:.3g}" if abs(v) < 1 else f"{v:,.1f}"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, list | tuple):
        s = ", ".join(str(x) for x in v[:6])
        return s + (" ..." if len(v) > 6 else "")
    return str(v)


EPISODES_NOTE: Final = (
    "Each timeline change opens an episode that lasts until the group is settled again "
    "(no member rebalancing, the coordinator's group Stable, every partition owned once); "
    "group formation is its own episode. Costs count from the change to the next one, so "
    "they include the aftermath (records redelivered, lag recovering). Changes still "
    "unsettled when the next came are one episode (crash+join). A topic change's episode "
    "says when a member first owned the created topic's partitions and when the last let "
    "go of the deleted topic's (a topic deleted and created again is a new incarnation, "
    "t#2). Definitions: analysis/episodes.py, analysis/topics.py."
)
WHOLE_RUN_NOTE: Final = (
    "Whole-run totals, group formation included: compare changes by the table above."
)

TABLED_APART: Final = (
    "delivery_guarantee",
    "episodes",
    "kafka_metrics",
    "migration",
    "share",
    "work_queue",
)
"""Metrics with a section of their own, not rows of the side-by-side table."""

EPISODE_COLUMNS: Final[tuple[tuple[str, str, float], ...]] = (
    ("at s", "start_ms", 1000.0),
    ("stable after s", "time_to_stable_ms", 1000.0),
    ("detected after s", "time_to_detect_ms", 1000.0),
    ("revoked", "partitions_revoked", 1.0),
    ("moved", "partitions_moved", 1.0),
    ("revoked w/o need", "revoked_without_need", 1.0),
    ("unowned partition-s", "partition_unavailable_s", 1.0),
    ("idle member-s", "idle_member_s", 1.0),
    ("duplicates", "duplicates", 1.0),
    ("loss", "loss", 1.0),
    ("double-proc s", "double_processing_s", 1.0),
    ("order-ovl s", "ordering_overlap_s", 1.0),
    ("peak lag", "peak_lag", 1.0),
    ("lag back after s", "lag_recovery_ms", 1000.0),
    ("failed commits", "commit_failures", 1.0),
    ("generation bumps", "generation_bumps", 1.0),
    ("ZK ops", "zk_ops", 1.0),
    ("coordinator requests", "coordinator_requests", 1.0),
    ("rebalances", "rebalances", 1.0),
    ("members disturbed", "members_disturbed", 1.0),
    ("topic owned after s", "topic_discovery_ms", 1000.0),
    ("topic let go after s", "topic_release_ms", 1000.0),
)
"""The per-episode table's columns: heading, episode key, divisor (ms to s)."""

SHARE_EPISODE_COLUMNS: Final[tuple[tuple[str, str, float], ...]] = (
    ("share redelivered", "share_redeliveries", 1.0),
    ("share archived", "share_archived", 1.0),
    ("share locks expired", "share_lock_expiries", 1.0),
    ("share acked per s", "share_acknowledged_per_s", 1.0),
    ("share ack latency mean s", "share_ack_latency_mean_ms", 1000.0),
    ("share ack latency max s", "share_ack_latency_max_ms", 1000.0),
)
"""More columns when a series is a share group's (``-`` for the others)."""


def episodes_table(metrics: Mapping[str, Mapping[str, Any]], series: Sequence[str]) -> pd.DataFrame:
    """One row per episode (formation first) per series: what each change cost.

    ``stable after s`` is ``not settled`` for an episode still disturbed at the
    next change's merge or the end (``cut short`` when the run was), and the
    kind of an episode that merged overlapping changes reads ``crash+join``.
    """
    rows: list[dict[str, Any]] = []
    columns = EPISODE_COLUMNS
    if any((metrics.get(s) or {}).get("share") for s in series):
        columns = (*EPISODE_COLUMNS, *SHARE_EPISODE_COLUMNS)
    for s in series:
        for e in (metrics.get(s) or {}).get("episodes") or []:
            row: dict[str, Any] = {"protocol": s, "change": e["kind"]}
            if e.get("topic"):
                row["change"] += f" {e['topic']}"
            if e.get("members"):
                shown = ", ".join(e["members"][:3]) + (" ..." if len(e["members"]) > 3 else "")
                row["change"] += f" ({shown})"
            for head, key, div in columns:
                v = e.get(key)
                row[head] = fmt(v / div if isinstance(v, int | float) and div != 1.0 else v)
            if e.get("time_to_stable_ms") is None:
                row["stable after s"] = "cut short" if e.get("cut_short") else "not settled"
            rows.append(row)
    cols = ["protocol", "change", *[h for h, _, _ in columns]]
    return pd.DataFrame(rows, columns=cols, dtype="object")


MIGRATION_NOTE: Final = (
    "An online migration (upgrade actions; group_converted events). mixed s: how long live "
    "members spoke both protocols; rebalances while mixed: the group's rebalances (trigger "
    "to settled) that began then, of which at a conversion: under way at a group_converted "
    "instant; member rebalances: rebalance_started of classic members (JoinGroup rounds) "
    "and consumer members (reconciliations) while mixed; duplicates: offsets processed "
    "again, first seen while mixed; two owners: double-ownership windows begun while mixed "
    "(across protocols: owners speaking different protocols). Per member: shutdown, new "
    "start, first partition owned after it, and the time out of work between. "
    "Definitions: analysis/migration.py."
)


def _secs(v: Any) -> Any:
    return v / 1000.0 if isinstance(v, int | float) else v


def migration_table(
    metrics: Mapping[str, Mapping[str, Any]], series: Sequence[str]
) -> pd.DataFrame:
    """One row per series that migrated: the mixed window and what it cost."""
    rows: list[dict[str, Any]] = []
    for s in series:
        mig = (metrics.get(s) or {}).get("migration")
        if not mig:
            continue
        conv = "; ".join(
            f"{c.get('direction')} at {fmt(_secs(c.get('t_ms')))} s "
            f"({c.get('reason')}, {c.get('state')}, {c.get('members')} members)"
            for c in mig.get("conversions") or []
        )
        by = mig.get("member_rebalances_mixed") or {}
        rows.append(
            {
                "protocol": s,
                "conversions": conv or "none",
                "mixed s": fmt(_secs(mig.get("mixed_ms"))),
                "mixed from-to s": (
                    f"{fmt(_secs(mig['mixed_from_ms']))}-{fmt(_secs(mig['mixed_to_ms']))}"
                    if mig.get("mixed_from_ms") is not None
                    else "-"
                ),
                "members switched": fmt(mig.get("switched")),
                "out of work max s": fmt(_secs((mig.get("out_of_work_ms") or {}).get("max"))),
                "rebalances while mixed": fmt(mig.get("group_rebalances_mixed")),
                "at a conversion": fmt(mig.get("conversion_rebalances")),
                "member rebalances (classic/consumer)": (
                    f"{by.get('classic', 0)}/{by.get('consumer', 0)}"
                ),
                "duplicates while mixed": fmt(mig.get("duplicates_mixed")),
                "two owners while mixed": fmt(mig.get("double_ownership_mixed")),
                "across protocols": fmt(mig.get("double_ownership_cross_protocol")),
            }
        )
    return pd.DataFrame(rows, dtype="object")


def migration_members_table(
    metrics: Mapping[str, Mapping[str, Any]], series: Sequence[str]
) -> pd.DataFrame:
    """One row per member switch: when it stopped, started again, and owned again."""
    rows: list[dict[str, Any]] = []
    for s in series:
        mig = (metrics.get(s) or {}).get("migration") or {}
        for member, sws in (mig.get("switches") or {}).items():
            for sw in sws:
                rows.append(
                    {
                        "protocol": s,
                        "member": member,
                        "to": sw.get("to") or "-",
                        "stopped s": fmt(_secs(sw.get("stopped_ms"))),
                        "started s": fmt(_secs(sw.get("started_ms"))),
                        "first partition s": fmt(_secs(sw.get("first_claim_ms"))),
                        "out of work s": fmt(_secs(sw.get("out_of_work_ms"))),
                    }
                )
    return pd.DataFrame(rows, dtype="object")


def plot_migration(
    metrics: Mapping[str, Mapping[str, Any]], series: Sequence[str], end_ms: float
) -> Figure:
    """Per series that migrated, one row per switched member: the protocol it spoke over
    time, its downtime, its first partition after the switch; conversions as lines and
    the mixed window shaded."""
    shown = [s for s in series if (metrics.get(s) or {}).get("migration")]
    rows = [len(metrics[s]["migration"].get("switches") or {}) for s in shown] or [1]
    fig, axes = subplots(
        len(rows), 1, figsize=(10, sum(1.4 + 0.3 * n for n in rows)), squeeze=False
    )
    axs = list(axes.flat)
    colors = {"classic": "#4c72b0", "consumer": "#dd8452"}
    for ax, s in zip(axs, shown, strict=False):
        mig = metrics[s]["migration"]
        base = s.split("@", 1)[0]
        run_gen = SPECS[base].generation if base in SPECS else "classic"
        switches = mig.get("switches") or {}
        names = list(switches)
        if mig.get("mixed_from_ms") is not None:
            ax.axvspan(
                mig["mixed_from_ms"] / 1000.0,
                mig["mixed_to_ms"] / 1000.0,
                color="#eeeeee",
                zorder=0,
            )
        for i, member in enumerate(names):
            t0 = 0.0
            gen = run_gen
            for sw in switches[member]:
                stop = float(sw["stopped_ms"]) / 1000.0
                ax.broken_barh([(t0, stop - t0)], (i - 0.35, 0.7), color=colors.get(gen, "grey"))
                start = sw.get("started_ms")
                if start is None:
                    t0 = end_ms / 1000.0
                    break
                t0 = float(start) / 1000.0
                to = str(sw.get("to") or "")
                gen = SPECS[to].generation if to in SPECS else gen
                if sw.get("first_claim_ms") is not None:
                    ax.plot([sw["first_claim_ms"] / 1000.0], [i], "k|", markersize=10)
            if t0 < end_ms / 1000.0:
                ax.broken_barh(
                    [(t0, end_ms / 1000.0 - t0)], (i - 0.35, 0.7), color=colors.get(gen, "grey")
                )
        for c in mig.get("conversions") or []:
            ax.axvline(float(c["t_ms"]) / 1000.0, color="red", linestyle="--", linewidth=1)
        ax.set_yticks(range(len(names)))
        ax.set_yticklabels(names, fontsize=7)
        ax.set_xlim(0, end_ms / 1000.0)
        ax.set_title(_title(s), fontsize=9)
        ax.set_xlabel("emulated s")
        ax.legend(
            handles=[Patch(color=c, label=g) for g, c in colors.items()]
            + [
                Patch(color="#eeeeee", label="mixed"),
                Patch(facecolor="white", edgecolor="red", linestyle="--", label="conversion"),
            ],
            fontsize=7,
            loc="upper right",
        )
    if not shown:
        _empty(axs[0], "no migration")
    fig.tight_layout()
    return fig


WORK_QUEUE_NOTE: Final = (
    "Every series as a work queue, beside a share group (KIP-932). The first rows count "
    "alike for consumer and share groups, from the produced and processed events: records "
    "processed at least once, processings after a record's first (a consumer group's "
    "duplicates, a share group's redeliveries that reached the application), records never "
    "processed by the end, and the time from a record's produce to the end of its first "
    "processing. The share rows are the share-partition leader's record states: each "
    "acquisition is a delivery; a redelivery's cause is what made the record available "
    "again (the application's release, its lock running out, its member's share session "
    "closing on a leave or crash, a new leader), and how many of them a crashed member had "
    "held; archived records were rejected or reached "
    "group.share.delivery.count.limit; fates: every produced record's last state, adding up "
    "to the records produced. Several members on one partition, records processed out of "
    "order and, after a lock ran out, twice at once are what a share group allows; a record "
    "acquired while another member held it (double acquisitions) never is. "
    "Definitions: analysis/share.py."
)

_SHARE_CAUSES: Final = ("release", "lock_expiry", "session_close", "failover")


def _ms_s(d: Mapping[str, Any] | None, key: str) -> Any:
    v = (d or {}).get(key)
    return fmt(v / 1000.0) if isinstance(v, int | float) else "-"


def work_queue_table(
    metrics: Mapping[str, Mapping[str, Any]], series: Sequence[str]
) -> pd.DataFrame:
    """Side by side, every series as a work queue (empty without a share series):
    one row per measure, ``-`` where it does not apply."""
    shown = [s for s in series if (metrics.get(s) or {}).get("work_queue")]
    if not any((metrics.get(s) or {}).get("share") for s in shown):
        return pd.DataFrame()
    rows: dict[str, dict[str, Any]] = {}

    def put(name: str, s: str, v: Any) -> None:
        rows.setdefault(name, {})[s] = v

    for s in shown:
        m = metrics[s]
        wq = m["work_queue"]
        lat = wq.get("latency_ms") or {}
        put("records produced", s, fmt(wq.get("records")))
        put("processed at least once", s, fmt(wq.get("processed_records")))
        put("processed again", s, fmt(wq.get("processed_again")))
        put("never processed by the end", s, fmt(wq.get("never_processed")))
        put(
            "produce to first processed p50 / p99 / max s",
            s,
            " / ".join(_ms_s(lat, k) for k in ("p50", "p99", "max")),
        )
        put("processed per s (first time)", s, fmt(wq.get("processed_per_s")))
        sh = m.get("share")
        if not sh:
            put("consumer group: duplicates by cause", s, _causes(m.get("duplicates_by_cause")))
            continue
        put("consumer group: duplicates by cause", s, "-")
        fates = sh.get("fates") or {}
        ack = sh.get("ack_latency_ms") or {}
        by = sh.get("redeliveries_by_cause") or {}
        put("share: deliveries (acquisitions)", s, fmt(sh.get("deliveries")))
        put("share: redeliveries", s, fmt(sh.get("redeliveries")))
        for cause in _SHARE_CAUSES:
            put(f"share: redelivered after {cause.replace('_', ' ')}", s, fmt(by.get(cause, 0)))
        put(
            "share: of which the holder had crashed",
            s,
            fmt(sh.get("redeliveries_after_crash", 0)),
        )
        put("share: acknowledged", s, fmt(sh.get("acknowledged")))
        put(
            "share: archived (by cause)",
            s,
            f"{fmt(sh.get('archived'))}"
            + (f" ({_causes(sh.get('archived_by_cause'))})" if sh.get("archived") else ""),
        )
        put("share: released", s, fmt(sh.get("released")))
        put("share: locks expired", s, fmt(sh.get("lock_expiries")))
        put(
            "share: fates acknowledged / archived / in flight / never delivered",
            s,
            " / ".join(
                fmt(fates.get(k, 0))
                for k in ("acknowledged", "archived", "in_flight", "never_delivered")
            ),
        )
        put(
            "share: produce to acknowledged p50 / p99 / max s",
            s,
            " / ".join(_ms_s(ack, k) for k in ("p50", "p99", "max")),
        )
        put("share: acknowledged per s", s, fmt(sh.get("acknowledged_per_s")))
        put(
            "share: double acquisitions (never allowed)",
            s,
            fmt((m.get("anomalies") or {}).get("double_acquisition", 0)),
        )
    table = pd.DataFrame(
        {s: [rows[k].get(s, "-") for k in rows] for s in shown}, index=list(rows), dtype="object"
    )
    table.index.name = "work queue"
    return table


def _causes(by: Mapping[str, Any] | None) -> str:
    items = [(k, v) for k, v in (by or {}).items() if v]
    return ", ".join(f"{k.replace('_', ' ')} {fmt(v)}" for k, v in items) if items else "0"


def plot_work_queue(
    metrics: Mapping[str, Mapping[str, Any]], faults: pd.DataFrame, series: Sequence[str]
) -> Figure:
    """Produce-to-processed latency per second of processing, one line per series (max
    dotted), and a share group's redeliveries per second by cause and its archived records."""
    shown = [s for s in series if (metrics.get(s) or {}).get("work_queue")]
    shares = [s for s in shown if (metrics.get(s) or {}).get("share")]
    fig, axes = subplots(
        1 + len(shares), 1, figsize=(12, 3.6 + 2.6 * len(shares)), sharex=True, squeeze=False
    )
    axs = list(axes.flat)
    cmap = matplotlib.colormaps["tab10"]
    ax = axs[0]
    for i, s in enumerate(shown):
        rows = metrics[s]["work_queue"].get("by_second") or []
        if not rows:
            continue
        color = cmap(i % 10)
        t = [r[0] for r in rows]
        ax.plot(t, [r[2] / 1000.0 for r in rows], color=color, label=f"{s} p50")
        ax.plot(t, [r[3] / 1000.0 for r in rows], color=color, linestyle=":", alpha=0.7)
        for r in faults[faults["protocol"] == s].itertuples():
            ax.axvline(float(r.t_ms) / 1000.0, color=color, linestyle="--", alpha=0.3)
    ax.set_ylabel("produce to processed (s)\n(dotted: max)")
    ax.set_title("record latency by second of first processing", loc="left", fontsize=10)
    if shown:
        ax.legend(fontsize=7, ncol=2)
    else:
        _empty(ax, "no processed records")
    colors = {
        "redelivered:release": "#4c72b0",
        "redelivered:lock_expiry": "#c44e52",
        "redelivered:session_close": "#dd8452",
        "redelivered:failover": "#8172b2",
        "archived": "#555555",
    }
    for ax, s in zip(axs[1:], shares, strict=True):
        per: dict[str, dict[int, int]] = {}
        for sec, what, n in metrics[s]["share"].get("by_second") or []:
            per.setdefault(str(what), {})[int(sec)] = int(n)
        bottom: dict[int, int] = {}
        for what, shade in colors.items():
            got = per.get(what) or {}
            if not got:
                continue
            xs = sorted(got)
            ax.bar(
                xs,
                [got[x] for x in xs],
                bottom=[bottom.get(x, 0) for x in xs],
                width=0.9,
                color=shade,
                label=what.replace("redelivered:", "redelivered after ").replace("_", " "),
            )
            for x in xs:
                bottom[x] = bottom.get(x, 0) + got[x]
        expired = per.get("lock_expired") or {}
        if expired:
            xs = sorted(expired)
            ax.plot(xs, [expired[x] for x in xs], "kx", label="locks expired")
        for r in faults[faults["protocol"] == s].itertuples():
            ax.axvline(float(r.t_ms) / 1000.0, color="black", linestyle="--", alpha=0.3)
        ax.set_ylabel("records per s")
        ax.set_title(f"{_title(s)}: redeliveries by cause, archived", loc="left", fontsize=10)
        if per:
            ax.legend(fontsize=7, ncol=3)
        else:
            _empty(ax, "no redeliveries or archived records")
    axs[-1].set_xlabel("emulated time (s)")
    fig.tight_layout()
    return fig


KAFKA_NOTE: Final = (
    "Kafka's own metric names, as its sensors would have accumulated them over the whole "
    "timeline, pooled over the group's members (Kafka keeps them per client, -avg/-max over "
    "2 x 30 s windows); coordinator gauges as seconds the group spent in each state. "
    "Sources: analysis/kafka_metrics.py."
)


def kafka_table(metrics: Mapping[str, Mapping[str, Any]], series: Sequence[str]) -> pd.DataFrame:
    """Kafka's metric names side by side: ``client.<name>`` and ``coordinator.<name>`` rows."""
    flat: dict[str, dict[str, Any]] = {}
    for s in series:
        named = (metrics.get(s) or {}).get("kafka_metrics") or {}
        flat[s] = {}
        for side in ("client", "coordinator"):
            if isinstance(named.get(side), Mapping):
                flat[s].update(flatten(named[side], f"{side}.", max_keys=12))
    return _side_by_side(flat, series, "Kafka metric")


def _side_by_side(
    flat: Mapping[str, Mapping[str, Any]], series: Sequence[str], name: str
) -> pd.DataFrame:
    """One row per key (in first-seen order), one column per series, cells formatted."""
    keys: list[str] = []
    for s in series:
        keys.extend(k for k in flat[s] if k not in keys)
    table = pd.DataFrame(
        {s: [fmt(flat[s].get(k)) for k in keys] for s in series}, index=keys, dtype="object"
    )
    table.index.name = name
    return table


def metrics_table(metrics: Mapping[str, Mapping[str, Any]], series: Sequence[str]) -> pd.DataFrame:
    """Metrics side by side: one row per (flattened) metric, one column per series."""
    flat = {
        s: {
            k: v
            for k, v in flatten(metrics.get(s, {}), max_keys=12).items()
            if k.split(".")[0] not in TABLED_APART  # sections of their own
        }
        for s in series
    }
    return _side_by_side(flat, series, "metric")


def anomaly_summary(anom: pd.DataFrame, series: Sequence[str]) -> pd.DataFrame:
    """Anomalies per series and kind: rows found, their total count, allowed or not.

    ``allowed`` is empty (``None``) where the evidence is incomplete
    (:mod:`analysis.evidence`): no verdict is given on logs that are not all there.
    """
    cols = ["protocol", "kind", "allowed", "rows", "count", "first_s", "example"]
    if anom.empty:
        return pd.DataFrame(columns=cols)
    out: list[dict[str, Any]] = []
    verdict = anom["allowed"].map(lambda v: "undetermined" if v is None or pd.isna(v) else bool(v))
    for (proto, kind, allowed), g in anom.groupby(
        ["protocol", "kind", verdict.astype(str)], sort=False
    ):
        g = g.sort_values("t_start_ms")
        first = g.iloc[0]
        where = (
            f"{first['topic']}:{int(first['partition'])}"
            if pd.notna(first["topic"]) and pd.notna(first["partition"])
            else ""
        )
        who = "/".join(str(x) for x in (first["member"], first["other_member"]) if pd.notna(x))
        detail = str(first["detail"]) if pd.notna(first["detail"]) else ""
        ex = " ".join(x for x in (where, who, detail) if x)
        cnt = pd.to_numeric(g["count"], errors="coerce").fillna(1).sum()
        t0 = first["t_start_ms"]
        out.append(
            {
                "protocol": proto,
                "kind": kind,
                "allowed": None if allowed == "undetermined" else allowed == "True",
                "rows": len(g),
                "count": int(cnt),
                "first_s": round(float(t0) / 1000.0, 3) if pd.notna(t0) else None,
                "example": ex.strip(),
            }
        )
    order = {s: i for i, s in enumerate(series)}
    df = pd.DataFrame(out, columns=cols)
    df["_o"] = df["protocol"].map(lambda p: order.get(p, len(order)))
    df["_a"] = df["allowed"].map(lambda v: 2 if v is None else int(bool(v)))
    out_df = df.sort_values(["_o", "_a", "kind"]).drop(columns=["_o", "_a"])
    return out_df.reset_index(drop=True)


def md_table(df: pd.DataFrame, index: bool = True) -> str:
    """``df`` as a Markdown table (the run and experiment reports' tables)."""
    cols = ([df.index.name or ""] if index else []) + [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for idx, row in df.iterrows():
        cells = ([str(idx)] if index else []) + [fmt(v).replace("|", "\\|") for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _numeric(v: Any) -> bool:
    if isinstance(v, str):
        return bool(v) and v.replace(",", "").replace(".", "", 1).lstrip("-").isdigit()
    return isinstance(v, int | float) and not isinstance(v, bool)


def html_table(df: pd.DataFrame, index: bool = True, css: str = "") -> str:
    """``df`` as an HTML table of class ``css`` (rows of disallowed anomalies marked ``bad``)."""
    head = ([df.index.name or ""] if index else []) + [str(c) for c in df.columns]
    out = [f'<table class="{css}"><thead><tr>']
    out += [f"<th>{html.escape(h)}</th>" for h in head]
    out.append("</tr></thead><tbody>")
    for idx, row in df.iterrows():
        cls = ""
        if "allowed" in df.columns and row["allowed"] is not None and not bool(row["allowed"]):
            cls = ' class="bad"'
        out.append(f"<tr{cls}>")
        if index:
            out.append(f"<th>{html.escape(str(idx))}</th>")
        out += [
            f'<td class="{"num" if _numeric(v) else "txt"}">{html.escape(fmt(v))}</td>' for v in row
        ]
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


# --------------------------------------------------------------------------- writing


def jsonable(v: Any) -> Any:
    """``v`` with numpy scalars as Python numbers and NaN/inf as ``None`` (strict JSON)."""
    if isinstance(v, Mapping):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple | set | frozenset):
        return [jsonable(x) for x in v]
    if hasattr(v, "item") and callable(v.item):
        v = v.item()
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    if isinstance(v, str | int | float | bool) or v is None:
        return v
    return str(v)


def _save(fig: Figure, path: Path) -> None:
    path.write_bytes(png_bytes(fig))


def evidence_lines(incomplete: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The report's evidence section: a verdict line, then one ``- `` line per problem."""
    if not incomplete:
        return [
            "Complete: every log the manifest lists was read whole, with matching sizes "
            "and checksums, and every run ended normally."
        ]
    lines = [
        f"INCOMPLETE EVIDENCE for {', '.join(incomplete)}: the numbers below are what the "
        f"readable logs show; their anomalies are listed without a verdict (allowed is empty)."
    ]
    for s, ev in incomplete.items():
        lines += [f"- {s}: {p}" for p in ev.get("problems") or []]
    return lines


def _manifest_lines(manifests: Sequence[Mapping[str, Any]]) -> list[str]:
    lines: list[str] = []
    for m in manifests:
        sc = m.get("scenario") or {}
        lines.append(
            f"run {m.get('run_id', '?')}: scenario {sc.get('name', '?')} "
            f"({sc.get('description', '')}), seed {m.get('seed', sc.get('seed', '?'))}, "
            f"{sc.get('duration_s', '?')} emulated s at time scale {sc.get('time_scale', '?')}, "
            f"status {m.get('status', '?')}, protocols {', '.join(m.get('protocols') or {})}"
        )
    return lines


def write_report(
    out_dir: Path,
    metrics: Mapping[str, Mapping[str, Any]],
    frames: Mapping[str, Any],
    manifests: Mapping[str, Any] | Sequence[Mapping[str, Any]],
    *,
    data: Mapping[str, Any] | None = None,
    title: str = "Consumer-group generations compared",
) -> ReportPaths:
    """Write the comparison report into ``out_dir``.

    Args:
        out_dir: the report directory (created; existing report files are replaced).
        metrics: per series (protocol, or ``run/protocol``), as from
            :func:`analysis.metrics.compute_metrics`.
        frames: plot frames by key (:data:`OWNERSHIP`, :data:`THROUGHPUT`,
            :data:`DURATIONS`, :data:`FAULTS`, :data:`ANOMALIES`, :data:`HERD`);
            pandas or Spark DataFrames.
        manifests: the run manifest, or one per run.
        data: what was read (files, events, truncated files ...), shown in the
            report and stored in ``metrics.json``.
        title: the report's heading.

    Returns:
        The paths written.
    """
    out_dir = Path(out_dir)
    plots_dir = out_dir / "plots"
    plots_dir.mkdir(parents=True, exist_ok=True)
    for old in plots_dir.glob("*.png"):
        old.unlink()
    mans: list[Mapping[str, Any]] = (
        [manifests] if isinstance(manifests, Mapping) else list(manifests)
    )
    own = frame(frames, OWNERSHIP)
    thr = frame(frames, THROUGHPUT)
    dur = frame(frames, DURATIONS)
    flt = frame(frames, FAULTS)
    anom = frame(frames, ANOMALIES)
    herd = frame(frames, HERD)
    series = series_order([*metrics.keys(), *own["protocol"].dropna(), *thr["protocol"].dropna()])
    end_ms = run_span_ms(frames, mans)
    gap_end = scenario_end_ms(mans) or end_ms
    gap_ends = series_ends_ms(frames)

    plots: list[tuple[str, str, Path]] = []  # (id, caption, path)

    def add(name: str, caption: str, fig: Figure) -> None:
        path = plots_dir / f"{name}.png"
        _save(fig, path)
        plots.append((name, caption, path))

    add(
        "ownership",
        "Partition ownership over time: one row per partition, coloured by owner; "
        "red hatched = two owners at once (not marked for a share group, whose members "
        "hold partitions together by design), grey hatched = no owner, dashed = faults "
        "and membership changes.",
        plot_ownership(
            own,
            flt,
            series,
            end_ms,
            gap_end,
            gap_ends,
            shared=[x for x in series if (metrics.get(x) or {}).get("share")],
        ),
    )
    add(
        "throughput_lag",
        "Messages processed (solid) and produced (dotted) per time bucket, and the "
        "consumer lag, per protocol.",
        plot_throughput(thr, flt, series),
    )
    add(
        "rebalance_durations",
        "Rebalance durations from trigger to settled, per protocol.",
        plot_durations(dur, series),
    )
    if not herd.empty:
        add(
            "herd",
            "Coordination cost per membership change against group size "
            "(ZooKeeper operations for the 0.8 consumer, coordinator requests for the others).",
            plot_herd(herd),
        )

    migration = migration_table(metrics, series)
    if not migration.empty:
        add(
            "migration",
            "Each switched member's group protocol over time (classic blue, consumer orange; "
            "gaps: its downtime; ticks: its first partition after the switch), the group's "
            "conversions (red dashed) and the window in which it was mixed (grey).",
            plot_migration(metrics, series, end_ms),
        )
    switches = migration_members_table(metrics, series)
    work_queue = work_queue_table(metrics, series)
    if not work_queue.empty:
        add(
            "work_queue",
            "Work queue: each series' time from a record's produce to the end of its first "
            "processing, by second of that processing (solid: median, dotted: max; dashed: "
            "faults), and per share group the records redelivered each second by what made "
            "them available again, the records archived (bars) and the locks that ran out (x).",
            plot_work_queue(metrics, flt, series),
        )

    table = metrics_table(metrics, series)
    episodes = episodes_table(metrics, series)
    kafka = kafka_table(metrics, series)
    summary = anomaly_summary(anom, series)
    windows = double_ownership_windows(own, end_ms)
    gaps = unowned_gaps(own, 0.0, gap_end, gap_ends)
    timeline = pd.DataFrame(
        {
            "double-ownership windows": [int((windows["protocol"] == s).sum()) for s in series],
            "double-ownership s": [
                float(
                    (
                        windows[windows["protocol"] == s]["t_end_ms"]
                        - windows[windows["protocol"] == s]["t_start_ms"]
                    ).sum()
                )
                / 1000.0
                for s in series
            ],
            "unowned partition-s": [
                float(
                    (
                        gaps[gaps["protocol"] == s]["t_end_ms"]
                        - gaps[gaps["protocol"] == s]["t_start_ms"]
                    ).sum()
                )
                / 1000.0
                for s in series
            ],
        },
        index=pd.Index(series, name="protocol"),
    )
    info = _manifest_lines(mans)
    data_lines = [f"{k}: {fmt(v)}" for k, v in (data or {}).items()]
    incomplete = {
        s: metrics[s]["evidence"]
        for s in series
        if s in metrics and (metrics[s].get("evidence") or {}).get("problems")
    }

    # metrics.json
    mpath = out_dir / "metrics.json"
    payload = {
        "title": title,
        "series": series,
        "metrics": {s: metrics.get(s, {}) for s in series},
        "anomalies": summary.to_dict(orient="records"),
        "timeline": timeline.reset_index().to_dict(orient="records"),
        "runs": [
            {
                "run_id": m.get("run_id"),
                "scenario": (m.get("scenario") or {}).get("name"),
                "seed": m.get("seed"),
                "status": m.get("status"),
                "protocols": list(m.get("protocols") or {}),
            }
            for m in mans
        ],
        "data": dict(data or {}),
        "plots": [f"plots/{p.name}" for _, _, p in plots],
    }
    if not herd.empty:
        payload["herd"] = herd.to_dict(orient="records")
    mpath.write_text(json.dumps(jsonable(payload), indent=2, allow_nan=False) + "\n")

    # report.md
    md: list[str] = [f"# {title}", ""]
    md += [f"- {line}" for line in info] + [f"- {line}" for line in data_lines] + [""]
    md += ["## Evidence", "", *evidence_lines(incomplete), ""]
    md += ["## What each change cost", "", EPISODES_NOTE, "", md_table(episodes, index=False), ""]
    if not migration.empty:
        md += ["## Online migration", "", MIGRATION_NOTE, "", md_table(migration, index=False), ""]
        md += [md_table(switches, index=False), ""]
    if not work_queue.empty:
        md += ["## Work queue: consumer group or share group", "", WORK_QUEUE_NOTE, ""]
        md += [md_table(work_queue), ""]
    md += ["## Metrics", "", WHOLE_RUN_NOTE, "", md_table(table), ""]
    if not kafka.empty:
        md += ["## Kafka's metric names", "", KAFKA_NOTE, "", md_table(kafka), ""]
    guarantees = [
        (s, str(metrics[s].get("commit_mode", "")), str(metrics[s]["delivery_guarantee"]))
        for s in series
        if s in metrics and metrics[s].get("delivery_guarantee")
    ]
    if guarantees:
        md += ["## Delivery guarantees", ""]
        md += [f"- **{s}** (`{mode}`): {text}" for s, mode, text in guarantees] + [""]
    md += ["## Anomalies", ""]
    if summary.empty:
        md += ["No anomalies found.", ""]
    else:
        md += [
            "`allowed` says whether the protocol's guarantees permit the anomaly "
            "(see `emulator.anomalies.ALLOWED`). Times are each node's own clock: "
            "a double ownership or double processing between members on different "
            "nodes is certain only when longer than the clock-skew bound between "
            "them (metrics `clock_skew.bound_emu_ms`, from the offsets measured at "
            "the start of the run; `clock_skew.uncertain_windows` counts those that "
            "are not). Owners of a partition on different nodes are put in the "
            "protocol's order first (ZooKeeper czxids, generations, member epochs): "
            "where the clocks contradict it, that is counted in "
            "`protocol_order_inversions`, not reported as double ownership.",
            "",
            md_table(summary, index=False),
            "",
        ]
    md += ["## Ownership", "", md_table(timeline), ""]
    for name, caption, path in plots:
        md += [f"## {name.replace('_', ' ')}", "", f"![{name}](plots/{path.name})", "", caption, ""]
    md_path = out_dir / "report.md"
    md_path.write_text("\n".join(md))

    # report.html
    css = (
        "body{font-family:sans-serif;margin:1.5em;color:#222}"
        "table{border-collapse:collapse;font-size:12px;margin:0.5em 0 1.5em}"
        "th,td{border:1px solid #ccc;padding:3px 7px;text-align:left}td.num{text-align:right}"
        "th:first-child{text-align:left}thead th{background:#f0f0f0}"
        "tr.bad td{background:#fde0e0}figure{margin:1em 0}"
        "p.incomplete{background:#fff3cd;border:1px solid #e0b000;padding:6px;font-weight:bold}"
        "figure img{max-width:100%;border:1px solid #ddd}"
        "figcaption{font-size:12px;color:#555}"
    )
    h: list[str] = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{css}</style></head><body>",
        f"<h1>{html.escape(title)}</h1><ul>",
    ]
    h += [f"<li>{html.escape(line)}</li>" for line in info + data_lines]
    h.append('</ul><h2>Evidence</h2><div id="evidence">')
    ev_lines = evidence_lines(incomplete)
    cls = ' class="incomplete"' if incomplete else ""
    h.append(f"<p{cls}>{html.escape(ev_lines[0])}</p>")
    if len(ev_lines) > 1:
        items = "".join(f"<li>{html.escape(x[2:])}</li>" for x in ev_lines[1:])
        h.append(f"<ul>{items}</ul>")
    h.append("</div><h2>What each change cost</h2>")
    h.append(f"<p>{html.escape(EPISODES_NOTE)}</p>")
    h.append(html_table(episodes, index=False, css="episodes"))
    if not migration.empty:
        h.append(f"<h2>Online migration</h2><p>{html.escape(MIGRATION_NOTE)}</p>")
        h.append(html_table(migration, index=False, css="migration"))
        h.append(html_table(switches, index=False, css="switches"))
    if not work_queue.empty:
        h.append(
            "<h2>Work queue: consumer group or share group</h2>"
            f"<p>{html.escape(WORK_QUEUE_NOTE)}</p>"
        )
        h.append(html_table(work_queue, css="work-queue"))
    h.append(f"<h2>Metrics</h2><p>{html.escape(WHOLE_RUN_NOTE)}</p>")
    h.append(html_table(table, css="metrics"))
    if not kafka.empty:
        h.append(f"<h2>Kafka's metric names</h2><p>{html.escape(KAFKA_NOTE)}</p>")
        h.append(html_table(kafka, css="kafka"))
    if guarantees:
        h.append('<h2>Delivery guarantees</h2><ul id="delivery">')
        h += [
            f"<li><b>{html.escape(s)}</b> (<code>{html.escape(mode)}</code>): "
            f"{html.escape(text)}</li>"
            for s, mode, text in guarantees
        ]
        h.append("</ul>")
    h.append("<h2>Anomalies</h2>")
    if summary.empty:
        h.append("<p>No anomalies found.</p>")
    else:
        h.append(
            "<p>Rows in red are anomalies the protocol does not allow "
            "(<code>emulator.anomalies.ALLOWED</code>); an empty <code>allowed</code> "
            "means no verdict: that protocol's evidence is incomplete.</p>"
        )
        h.append(html_table(summary, index=False, css="anomalies"))
    h.append("<h2>Ownership</h2>")
    h.append(html_table(timeline, css="timeline"))
    for name, caption, path in plots:
        b64 = base64.b64encode(path.read_bytes()).decode("ascii")
        h.append(
            f'<h2>{html.escape(name.replace("_", " "))}</h2><figure id="plot-{name}">'
            f'<img class="plot" alt="{html.escape(name)}" src="data:image/png;base64,{b64}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>"
        )
    h.append("</body></html>")
    html_path = out_dir / "report.html"
    html_path.write_text("\n".join(h))
    return ReportPaths(out_dir, md_path, html_path, mpath, [p for _, _, p in plots])
