"""The report writer on synthetic frames: files, self-contained HTML, valid metrics.json.

No Spark: :func:`analysis.report.write_report` takes pandas frames, so these
frames are built by hand with known double-ownership windows and gaps.
"""

from __future__ import annotations

import base64
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from analysis.report import (
    ANOMALIES,
    DURATIONS,
    FAULTS,
    HERD,
    OWNERSHIP,
    SERIES_ENDS,
    THROUGHPUT,
    double_ownership_windows,
    unowned_gaps,
    write_report,
)

PROTOCOLS = ["zookeeper", "classic-eager", "classic-cooperative", "consumer"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _ownership() -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    for proto in PROTOCOLS:
        for p in range(4):
            owner = f"c-{p % 2}"
            if proto == "classic-eager":
                # stop the world: every partition unowned from 10 s to 12 s
                rows.append(
                    dict(
                        protocol=proto,
                        topic="t",
                        partition=p,
                        member=owner,
                        t_start_ms=0.0,
                        t_end_ms=10_000.0,
                    )
                )
                rows.append(
                    dict(
                        protocol=proto,
                        topic="t",
                        partition=p,
                        member=f"c-{p % 3}",
                        t_start_ms=12_000.0,
                        t_end_ms=None,
                    )
                )
            else:
                rows.append(
                    dict(
                        protocol=proto,
                        topic="t",
                        partition=p,
                        member=owner,
                        t_start_ms=0.0,
                        t_end_ms=None,
                    )
                )
    # zookeeper: c-2 claims t:1 at 5 s while c-1 still owns it (until the end)
    rows.append(
        dict(
            protocol="zookeeper",
            topic="t",
            partition=1,
            member="c-2",
            t_start_ms=5_000.0,
            t_end_ms=8_000.0,
        )
    )
    return pd.DataFrame(rows)


def _frames(with_herd: bool = False) -> dict[str, pd.DataFrame]:
    thr = pd.DataFrame(
        [
            dict(
                protocol=proto,
                t_ms=float(t * 1000),
                produced=100,
                processed=90 + (t % 3),
                lag=10 * t,
            )
            for proto in PROTOCOLS
            for t in range(20)
        ]
    )
    dur = pd.DataFrame(
        [
            dict(protocol=proto, t_ms=10_000.0 + i, duration_ms=500.0 * (i + 1) * (k + 1))
            for k, proto in enumerate(PROTOCOLS)
            for i in range(3)
        ]
    )
    faults = pd.DataFrame(
        [dict(protocol=proto, t_ms=10_000.0, reason="join", member="c-4") for proto in PROTOCOLS]
    )
    anomalies = pd.DataFrame(
        [
            dict(
                protocol="zookeeper",
                group="g",
                kind="double_ownership",
                topic="t",
                partition=1,
                member="c-1",
                other_member="c-2",
                t_start_ms=5_000.0,
                t_end_ms=8_000.0,
                offset_start=None,
                offset_end=None,
                count=1,
                allowed=False,
                detail=None,
            ),
            dict(
                protocol="classic-eager",
                group="g",
                kind="duplicate",
                topic="t",
                partition=2,
                member="c-0",
                other_member=None,
                t_start_ms=11_000.0,
                t_end_ms=11_500.0,
                offset_start=40,
                offset_end=60,
                count=20,
                allowed=True,
                detail="uncommitted_after_revoke",
            ),
        ]
    )
    frames = {
        OWNERSHIP: _ownership(),
        THROUGHPUT: thr,
        DURATIONS: dur,
        FAULTS: faults,
        ANOMALIES: anomalies,
    }
    if with_herd:
        frames[HERD] = pd.DataFrame(
            [
                dict(
                    run=f"r{n}",
                    protocol=proto,
                    group_size=n,
                    measure=measure,
                    per_change=float(n * n if proto == "zookeeper" else n),
                )
                for n in (4, 20, 100)
                for proto, measure in (
                    ("zookeeper", "zk_ops"),
                    ("consumer", "coordinator_requests"),
                )
            ]
        )
    return frames


def _metrics() -> dict[str, dict[str, Any]]:
    return {
        proto: {
            "rebalances": 3 + i,
            "rebalance_duration_ms": {"p50": 500.0 * (i + 1), "p99": float("nan"), "max": 900.5},
            "duplicates": i * 10,
            "loss": 0,
            "zk": {"reads": 100 if proto == "zookeeper" else 0},
        }
        for i, proto in enumerate(PROTOCOLS)
    }


MANIFEST = {
    "run_id": "synthetic-1",
    "status": "completed",
    "seed": 1,
    "scenario": {
        "name": "synthetic",
        "description": "hand-made",
        "duration_s": 20.0,
        "time_scale": 0.5,
    },
    "protocols": {p: {} for p in PROTOCOLS},
}


class _Imgs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.srcs: list[str] = []
        self.external: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "img":
            self.srcs.append(a.get("src") or "")
        for key in ("src", "href"):
            v = a.get(key)
            if v and not v.startswith(("data:", "#")):
                self.external.append(v)


def test_report_files_html_and_json(tmp_path: Path) -> None:
    out = tmp_path / "report"
    paths = write_report(out, _metrics(), _frames(), MANIFEST, data={"files": 7, "events": 1234})
    assert paths.markdown.is_file() and paths.html.is_file() and paths.metrics_json.is_file()
    names = sorted(p.name for p in (out / "plots").glob("*.png"))
    assert names == ["ownership.png", "rebalance_durations.png", "throughput_lag.png"]
    assert [p.name for p in paths.plots] == [
        "ownership.png",
        "throughput_lag.png",
        "rebalance_durations.png",
    ]
    for p in paths.plots:
        assert p.read_bytes().startswith(PNG_MAGIC)
        assert p.stat().st_size > 5_000  # something was drawn

    # HTML: every plot embedded as a base64 PNG, nothing loaded from outside
    text = paths.html.read_text()
    parser = _Imgs()
    parser.feed(text)
    assert parser.external == []
    assert len(parser.srcs) == 3
    for src in parser.srcs:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]).startswith(PNG_MAGIC)
    for proto in PROTOCOLS:
        assert proto in text
    assert 'class="bad"' in text  # the not-allowed double ownership is highlighted

    # metrics.json: strict JSON (NaN became null), every series, anomaly summary
    payload = json.loads(paths.metrics_json.read_text(), parse_constant=pytest.fail)
    assert payload["series"] == PROTOCOLS
    assert payload["metrics"]["zookeeper"]["rebalance_duration_ms"]["p99"] is None
    assert payload["metrics"]["consumer"]["rebalances"] == 6
    assert payload["data"] == {"files": 7, "events": 1234}
    kinds = {(a["protocol"], a["kind"], a["allowed"]) for a in payload["anomalies"]}
    assert kinds == {("zookeeper", "double_ownership", False), ("classic-eager", "duplicate", True)}
    dup = next(a for a in payload["anomalies"] if a["kind"] == "duplicate")
    assert dup["count"] == 20 and "uncommitted_after_revoke" in dup["example"]
    timeline = {r["protocol"]: r for r in payload["timeline"]}
    assert timeline["zookeeper"]["double-ownership windows"] == 1
    assert timeline["zookeeper"]["double-ownership s"] == pytest.approx(3.0)
    assert timeline["classic-eager"]["unowned partition-s"] == pytest.approx(8.0)  # 4 x 2 s
    assert timeline["consumer"]["unowned partition-s"] == 0.0

    # report.md: the side-by-side table and links to the plots
    md = paths.markdown.read_text()
    header = next(line for line in md.splitlines() if line.startswith("| metric"))
    assert header.split("|")[2:6] == [f" {p} " for p in PROTOCOLS]
    assert re.search(r"\| rebalance_duration_ms\.p50 \| 500 \| 1,000 \| 1,500 \| 2,000 \|", md)
    for name in names:
        assert f"(plots/{name})" in md


def test_herd_plot_with_several_runs(tmp_path: Path) -> None:
    paths = write_report(tmp_path, _metrics(), _frames(with_herd=True), [MANIFEST, MANIFEST])
    assert (tmp_path / "plots" / "herd.png").is_file()
    assert "plot-herd" in paths.html.read_text()
    payload = json.loads(paths.metrics_json.read_text())
    assert len(payload["runs"]) == 2
    assert {h["group_size"] for h in payload["herd"]} == {4, 20, 100}


def test_empty_frames_still_render(tmp_path: Path) -> None:
    paths = write_report(tmp_path, {"consumer": {"rebalances": 0}}, {}, MANIFEST)
    assert len(paths.plots) == 3
    assert "No anomalies found." in paths.html.read_text()
    assert json.loads(paths.metrics_json.read_text())["anomalies"] == []


def test_windows_and_gaps() -> None:
    own = _ownership()
    w = double_ownership_windows(own, 20_000.0)
    assert w[["protocol", "partition", "t_start_ms", "t_end_ms", "members"]].values.tolist() == [
        ["zookeeper", 1, 5_000.0, 8_000.0, "c-1+c-2"]
    ]
    g = unowned_gaps(own, 0.0, 20_000.0)
    assert sorted(g["protocol"].unique()) == ["classic-eager"]
    assert set(zip(g["t_start_ms"], g["t_end_ms"], strict=True)) == {(10_000.0, 12_000.0)}
    assert len(g) == 4


def test_gaps_of_several_runs_end_at_each_runs_own_end() -> None:
    """A 150 s run beside a 180 s one: its partitions are not unowned from 150 s on."""
    own = pd.DataFrame(
        [
            dict(
                protocol="short/x",
                topic="t",
                partition=0,
                member="c-0",
                t_start_ms=0.0,
                t_end_ms=150_000.0,
            ),
            dict(
                protocol="short/x",
                topic="t",
                partition=1,
                member="c-0",
                t_start_ms=0.0,
                t_end_ms=None,
            ),
            dict(
                protocol="long/x",
                topic="t",
                partition=0,
                member="c-0",
                t_start_ms=0.0,
                t_end_ms=150_000.0,
            ),
        ]
    )
    g = unowned_gaps(own, 0.0, 180_000.0, {"short/x": 150_000.0})
    assert g[["protocol", "t_start_ms", "t_end_ms"]].values.tolist() == [
        ["long/x", 150_000.0, 180_000.0]
    ]
    assert len(unowned_gaps(own, 0.0, 180_000.0)) == 2  # without the ends


def test_several_runs_become_series_and_a_herd(tmp_path: Path) -> None:
    from analysis.compare import RunAnalysis, merge

    def run(label: str, consumers: int, zk_ops: float, requests: int) -> RunAnalysis:
        manifest = {
            **MANIFEST,
            "scenario": {**MANIFEST["scenario"], "group": {"consumers": consumers}},
        }
        metrics = {
            "zookeeper": {"zk_ops_per_change": zk_ops, "zk_watches_per_change": zk_ops / 10},
            "consumer": {"coordinator_requests": requests, "membership_changes": 4},
        }
        frames = {k: v for k, v in _frames().items() if k != ANOMALIES}
        return RunAnalysis(tmp_path / label, label, manifest, metrics, frames)

    metrics, frames = merge([run("small", 4, 40.0, 8), run("big", 40, 4000.0, 80)])
    assert sorted(metrics) == ["big/consumer", "big/zookeeper", "small/consumer", "small/zookeeper"]
    assert set(frames[OWNERSHIP]["protocol"]) == {
        f"{r}/{p}" for r in ("small", "big") for p in PROTOCOLS
    }
    herd = frames[HERD].sort_values(["protocol", "measure", "group_size"])
    rows = herd[["protocol", "measure", "group_size", "per_change"]].values.tolist()
    assert rows == [
        ["consumer", "coordinator requests", 4, 2.0],
        ["consumer", "coordinator requests", 40, 20.0],
        ["zookeeper", "ZooKeeper operations", 4, 40.0],
        ["zookeeper", "ZooKeeper operations", 40, 4000.0],
        ["zookeeper", "ZooKeeper watch notifications", 4, 4.0],
        ["zookeeper", "ZooKeeper watch notifications", 40, 400.0],
    ]
    ends = dict(zip(frames[SERIES_ENDS]["protocol"], frames[SERIES_ENDS]["end_ms"], strict=True))
    assert ends == {s: MANIFEST["scenario"]["duration_s"] * 1000.0 for s in metrics}
    paths = write_report(tmp_path / "r", metrics, frames, [MANIFEST, MANIFEST])
    assert [p.name for p in paths.plots][-1] == "herd.png"
    series = json.loads(paths.metrics_json.read_text())["series"]
    assert series == [f"small/{p}" for p in PROTOCOLS] + [f"big/{p}" for p in PROTOCOLS]


def test_timeline_actions_are_marked_once() -> None:
    from analysis.report import with_timeline_marks

    manifest = {
        "scenario": {
            "timeline": [
                {"action": "join", "at_s": 8.0, "count": 2, "member": None},
                {"action": "pause", "at_s": 16.0, "count": 1, "member": "c-1"},
            ]
        }
    }
    faults = pd.DataFrame([dict(protocol="zookeeper", t_ms=16_000.4, reason="pause", member="c-1")])
    marks = with_timeline_marks(faults, manifest, ["zookeeper", "consumer"])
    got = sorted(marks[["protocol", "t_ms", "reason"]].itertuples(index=False, name=None))
    assert got == [
        ("consumer", 8_000.0, "join x2"),
        ("consumer", 16_000.0, "pause"),
        ("zookeeper", 8_000.0, "join x2"),
        ("zookeeper", 16_000.4, "pause"),
    ]


def test_clock_skew_marks_cross_node_windows_it_cannot_vouch_for() -> None:
    import pandas as pd

    from analysis.compare import clock_skew

    manifest = {
        "scenario": {"time_scale": 0.5},
        "protocols": {
            "consumer": {
                "placement": {
                    "members": {"c-0": "host-0", "c-1": "host-1", "c-2": "host-0"},
                    "actors": {"host-0": "A", "host-1": "B", "broker-0": "C"},
                    "nodes": {
                        "A": {"offset_ms": 0.0, "bound_ms": 1.0},
                        "B": {"offset_ms": 10.0, "bound_ms": 1.0},
                        "C": {"offset_ms": 500.0, "bound_ms": 1.0},  # no consumer there
                    },
                }
            },
            "zookeeper": {},  # recorded no placement: nothing said
        },
    }

    def row(proto: str, kind: str, a: str | None, b: str | None, s: float, e: float) -> dict:
        return {
            "protocol": proto,
            "kind": kind,
            "member": a,
            "other_member": b,
            "t_start_ms": s,
            "t_end_ms": e,
        }

    anomalies = pd.DataFrame(
        [
            row("consumer", "double_ownership", "c-0", "c-1", 100.0, 120.0),  # 20 <= 24
            row("consumer", "double_ownership", "c-1", "c-0", 200.0, 230.0),  # 30 > 24
            row("consumer", "double_processing", "c-0", "c-2", 300.0, 301.0),  # one node
            row("consumer", "loss", None, None, 0.0, 0.0),
            row("zookeeper", "double_ownership", "c-0", "c-1", 100.0, 101.0),
        ]
    )
    out, summary = clock_skew(anomalies, manifest)
    # the bound: |0 - 10| + 1 + 1 = 12 wall ms, 24 emulated ms at time scale 0.5
    assert summary == {
        "consumer": {
            "nodes": 2,
            "bound_wall_ms": 12.0,
            "bound_emu_ms": 24.0,
            "cross_node_windows": 2,
            "uncertain_windows": 1,
        }
    }
    assert out["certain"].tolist() == [False, True, True, None, None]
    assert out["skew_bound_ms"].tolist() == [24.0, 24.0, 0.0, None, None]


def test_a_share_groups_overlaps_are_not_drawn_as_double_ownership() -> None:
    """Members of a share group hold one partition together: the ownership plot
    marks no double ownership in its panel, and says why."""
    from matplotlib.colors import to_rgba

    from analysis.report import DOUBLE_COLOR, plot_ownership

    own = _ownership()  # zookeeper's partition 1: c-1 and c-2 at once, 5-8 s
    faults = pd.DataFrame(columns=["protocol", "t_ms", "reason", "member"])

    def double_marks(shared: list[str]) -> int:
        fig = plot_ownership(own, faults, ["zookeeper"], 20_000.0, shared=shared)
        ax = fig.axes[0]
        red = to_rgba(DOUBLE_COLOR)
        n = sum(
            1
            for c in ax.collections
            if len(c.get_edgecolor()) and tuple(c.get_edgecolor()[0]) == red
        )
        said = "hold partitions together by design" in ax.get_title(loc="left")
        assert said == bool(shared)
        return n

    assert double_marks([]) == 1
    assert double_marks(["zookeeper"]) == 0


def test_narrow_gaps_are_one_filled_artist_and_wide_gaps_stay_hatched() -> None:
    """A gap under NARROW_MARK of the axis is drawn filled (its hatch would not
    show), all of them as one artist; a wide gap keeps its hatched box."""
    from matplotlib.colors import to_rgba

    from analysis.report import GAP_COLOR, NARROW_MARK, plot_ownership

    end_ms = 100_000.0
    narrow_ms = end_ms * NARROW_MARK / 2  # 25 ms
    rows: list[dict[str, Any]] = []
    for p in range(3):
        t = 0.0
        for k in range(40):  # 40 owners' turns, each followed by a narrow gap
            rows.append(
                dict(
                    protocol="zookeeper",
                    topic="t",
                    partition=p,
                    member=f"c-{k % 2}",
                    t_start_ms=t,
                    t_end_ms=t + 1_000.0,
                )
            )
            t += 1_000.0 + narrow_ms
        # then one wide gap (10 s) and an owner to the end
        rows.append(
            dict(
                protocol="zookeeper",
                topic="t",
                partition=p,
                member="c-0",
                t_start_ms=t + 10_000.0,
                t_end_ms=None,
            )
        )
    own = pd.DataFrame(rows)
    faults = pd.DataFrame(columns=["protocol", "t_ms", "reason", "member"])
    fig = plot_ownership(own, faults, ["zookeeper"], end_ms)
    ax = fig.axes[0]
    grey = to_rgba(GAP_COLOR)
    gap_artists = [
        c for c in ax.collections if len(c.get_edgecolor()) and tuple(c.get_edgecolor()[0]) == grey
    ]
    filled = [c for c in gap_artists if not c.get_hatch()]
    hatched = [c for c in gap_artists if c.get_hatch()]
    assert len(filled) == 1 and len(filled[0].get_paths()) == 3 * 39
    assert tuple(filled[0].get_facecolor()[0]) == grey
    # the wide gaps: one hatched row artist per partition, one box each
    assert len(hatched) == 3
    assert all(len(c.get_paths()) == 1 for c in hatched)
