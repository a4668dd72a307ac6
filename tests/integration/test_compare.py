"""``compare`` end to end: a small real run (Ray, embedded ZooKeeper), the real Spark,
the notebook executed with nbclient, and report.html opened in headless Chromium.

One tiny scenario (a join and a clean leave on 2-3 consumers, 14 emulated
seconds at time_scale 0.3) is run once under the legacy ZooKeeper consumer and
KIP-848, then analysed with the session's shared SparkSession.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from emulator.scenario import load_scenario

# a Ray run, a Spark analysis and a second SparkSession in the notebook's kernel: minutes
# on a loaded 2-core machine, so more than the suite's 300 s default
pytestmark = [
    pytest.mark.ray,
    pytest.mark.zk,
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.timeout(900),
]

PROTOCOLS = ["zookeeper", "consumer"]
ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "analysis" / "notebooks" / "compare_generations.ipynb"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

TINY = """
name = "tiny-compare"
description = "2 consumers on 4 partitions: one joins (4 s), one leaves (9 s)"
seed = 3
duration_s = 14.0
time_scale = 0.3

[cluster]
brokers = 1
zookeeper_ensemble = 1

[[topics]]
name = "t"
partitions = 4
replication_factor = 1

[producer]
rate_per_s = 40.0
topics = ["t"]
partitioner = "round-robin"
batch_size = 10

[group]
id = "tiny-group"
consumers = 2
topics = ["t"]
processing_ms_per_message = 2.0

[kafka]
"zookeeper.session.timeout.ms" = 6000
"session.timeout.ms" = 10000
"group.consumer.min.session.timeout.ms" = 6000
"group.consumer.session.timeout.ms" = 10000
"auto.offset.reset" = "smallest"

[[timeline]]
at_s = 4.0
action = "join"
count = 1

[[timeline]]
at_s = 9.0
action = "leave"
member = "c-0"
"""


@pytest.fixture(scope="module")
def small_run(ray_local: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from actors.orchestrator import run_scenario

    base = tmp_path_factory.mktemp("compare")
    path = base / "tiny.toml"
    path.write_text(TINY)
    out = base / "run"
    results = run_scenario(load_scenario(path), PROTOCOLS, out)
    assert [r.status for r in results] == ["completed"] * len(PROTOCOLS)
    return out


@pytest.fixture(scope="module")
def report_dir(small_run: Path, spark: Any) -> Path:
    from analysis.compare import compare

    lines: list[str] = []
    out = compare([small_run], spark=spark, progress=lines.append)
    assert out == small_run / "report"
    # progress all the way: loading, checkers, metrics, frames, writing
    text = "\n".join(lines)
    for step in (
        "loading event logs",
        "running the checkers",
        "computing metrics",
        "collecting plot frames",
        "writing the report",
        "report written",
    ):
        assert step in text, text
    return out


def test_compare_writes_the_report(small_run: Path, report_dir: Path) -> None:
    manifest = json.loads((small_run / "manifest.json").read_text())
    for name in ("report.md", "report.html", "metrics.json"):
        assert (report_dir / name).is_file()
    plots = sorted(p.name for p in (report_dir / "plots").glob("*.png"))
    assert plots == ["ownership.png", "rebalance_durations.png", "throughput_lag.png"]
    payload = json.loads((report_dir / "metrics.json").read_text())
    assert payload["series"] == PROTOCOLS
    assert payload["runs"][0]["run_id"] == manifest["run_id"]
    files = len(list(small_run.glob("*/events/*.msgpack")))
    assert payload["data"]["event log files"] == files
    assert payload["data"]["truncated files"] == 0
    for proto in PROTOCOLS:
        m = payload["metrics"][proto]
        counts = manifest["protocols"][proto]["counts"]
        # Spark's counts agree with the run's own pure-Python summary
        assert _find(m, "produced") == counts["produced"]
        assert _find(m, "processed") == counts["processed"]
        assert _find(m, "loss") in (0, None)
        # one machine, one clock: every consumer host on one node, nothing uncertain
        assert m["clock_skew"]["nodes"] == 1 and m["clock_skew"]["uncertain_windows"] == 0
    # every partition was owned in both protocols
    timeline = {r["protocol"]: r for r in payload["timeline"]}
    assert set(timeline) == set(PROTOCOLS)
    md = (report_dir / "report.md").read_text()
    assert "| metric | zookeeper | consumer |" in md


def _find(m: dict[str, Any], key: str) -> Any:
    """A metric by its last dotted name (the metrics nest by topic: counts, zk ...)."""
    from analysis.report import flatten

    flat = flatten(m)
    hits = [v for k, v in flat.items() if k == key or k.endswith("." + key)]
    return hits[0] if hits else None


def test_report_renders_in_chromium(report_dir: Path, tmp_path: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "chromium is missing: ./deploy/local.sh setup installs it"
    html = (report_dir / "report.html").read_text()
    # a copy with a script that records, after load, which embedded images decoded
    probe = tmp_path / "probe.html"
    probe.write_text(
        html.replace(
            "</body>",
            "<script>window.addEventListener('load', () => {"
            "const imgs = [...document.querySelectorAll('img.plot')];"
            "const pre = document.createElement('pre'); pre.id = 'render-check';"
            "pre.textContent = JSON.stringify(imgs.map(i => [i.alt, i.naturalWidth,"
            " i.naturalHeight, i.getBoundingClientRect().width]));"
            "document.body.appendChild(pre);});</script></body>",
        )
    )
    args = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    env = {**os.environ, "HOME": str(tmp_path)}
    dom = subprocess.run(
        [*args, "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()],
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
        check=True,
    ).stdout
    m = re.search(r'<pre id="render-check">(.*?)</pre>', dom)
    assert m, dom[-2000:]
    rendered = json.loads(m.group(1).replace("&quot;", '"'))
    assert [r[0] for r in rendered] == ["ownership", "throughput_lag", "rebalance_durations"]
    for alt, w, h, shown_w in rendered:
        assert w > 300 and h > 200 and shown_w > 300, (alt, w, h, shown_w)

    # the page itself, as a screenshot: the ownership plot's owner colours are on it
    shot = tmp_path / "shot.png"
    subprocess.run(
        [
            *args,
            "--window-size=1300,4000",
            f"--screenshot={shot}",
            (report_dir / "report.html").as_uri(),
        ],
        capture_output=True,
        timeout=90,
        env=env,
        check=True,
    )
    from PIL import Image

    img = Image.open(shot).convert("RGB")
    assert img.size == (1300, 4000)
    colours = img.getcolors(maxcolors=1 << 20) or []
    blue = sum(
        n
        for n, (r, g, b) in colours
        if abs(r - 31) < 12 and abs(g - 119) < 12 and abs(b - 180) < 12
    )
    orange = sum(
        n
        for n, (r, g, b) in colours
        if abs(r - 255) < 12 and abs(g - 127) < 12 and abs(b - 14) < 12
    )
    assert blue > 2000 and orange > 2000, (blue, orange)  # c-0 and c-1's ownership bars


def test_notebook_executes(small_run: Path, tmp_path: Path) -> None:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(NOTEBOOK, as_version=4)
    os.environ["RUN_DIR"] = str(small_run)
    os.environ["REPORT_DIR"] = str(tmp_path / "nb-report")
    os.environ["SPARK_MASTER"] = "local[2]"
    try:
        NotebookClient(
            nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
        ).execute()
    finally:
        for k in ("RUN_DIR", "REPORT_DIR", "SPARK_MASTER"):
            os.environ.pop(k, None)
    images = [
        base64.b64decode(o["data"]["image/png"])
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if "image/png" in o.get("data", {})
    ]
    assert len(images) >= 3 and all(i.startswith(PNG_MAGIC) for i in images)
    assert (tmp_path / "nb-report" / "report.html").is_file()
    payload = json.loads((tmp_path / "nb-report" / "metrics.json").read_text())
    assert payload["series"] == PROTOCOLS


def test_compare_names_a_corrupt_log(small_run: Path, spark: Any, tmp_path: Path) -> None:
    from analysis.compare import CompareError, compare

    run = tmp_path / "run"
    shutil.copytree(small_run, run, ignore=shutil.ignore_patterns("report", "zk"))
    bad = run / "consumer" / "events" / "zz-bad.msgpack"
    bad.write_bytes(b"\xc1\xc1\xc1")
    with pytest.raises(CompareError, match=r"zz-bad\.msgpack at byte 0") as info:
        compare([run], spark=spark, progress=lambda _m: None)
    assert "\n" not in str(info.value)
    assert not (run / "report").exists()


def test_compare_cli_errors_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from emulator.cli import main

    assert main(["compare", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"rebalance-emu: error: {tmp_path / 'missing'}: no such run directory"]
    assert main(["compare", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no manifest.json" in err[0]
