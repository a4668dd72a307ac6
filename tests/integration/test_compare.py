"""``compare`` end to end: a small real run (Ray, embedded ZooKeeper), the real Spark,
the notebook executed with nbclient, and report.html opened in headless Chromium.

One tiny scenario (a join and a clean leave on 2-3 consumers, 14 emulated
seconds at time_scale 0.3) is run once under the legacy ZooKeeper consumer and
KIP-848. The report is made on a real standalone Spark cluster (a master and a
worker, two JVMs on 127.0.0.1) by ``deploy/spark/submit-compare.sh``, with
executors whose Python lacks this project; the error paths use the session's
shared local SparkSession.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from emulator.scenario import load_scenario
from zk_registry.server import find_free_ports

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


def _spark_class(spark_home: Path, log: Path, *args: str) -> subprocess.Popen[bytes]:
    """A standalone master or worker JVM, in its own process group, bound to loopback."""
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1"}
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(spark_home / "bin" / "spark-class"), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A standalone Spark master and one worker (1 core, 1 GB), two JVMs on 127.0.0.1:
    the master's URL and the worker's work directory (one ``app-*`` per application)."""
    import pyspark

    base = tmp_path_factory.mktemp("spark-cluster")
    spark_home = Path(pyspark.__file__).parent
    port, ui, worker_ui = find_free_ports(3)
    master_url = f"spark://127.0.0.1:{port}"
    work = base / "worker"
    procs = [
        _spark_class(
            spark_home,
            base / "master.log",
            "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui),
        )
    ]  # fmt: skip
    try:
        procs.append(
            _spark_class(
                spark_home,
                base / "worker.log",
                "org.apache.spark.deploy.worker.Worker",
                master_url,
                "--host", "127.0.0.1", "--webui-port", str(worker_ui),
                "--cores", "1", "--memory", "1g", "--work-dir", str(work),
            )
        )  # fmt: skip
        # the master's JSON page lists the worker once it registered (bounded wait)
        deadline = time.monotonic() + 90
        alive = 0
        while time.monotonic() < deadline and not alive:
            with (
                contextlib.suppress(OSError, ValueError),
                urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as r,
            ):
                alive = int(json.loads(r.read()).get("aliveworkers", 0))
            if not alive:
                assert all(p.poll() is None for p in procs), (base / "master.log").read_text()
                time.sleep(0.5)
        assert alive == 1, (base / "worker.log").read_text()[-3000:]
        yield master_url, work
    finally:
        _stop(procs)


@pytest.fixture(scope="module")
def python_without_the_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This venv's Python with its packages (msgpack, pyarrow, pyspark) but not this
    project: ``-S`` skips the .pth files, the editable install among them. The Spark
    executors run it, so the project reaches them only as the driver ships it."""
    base = tmp_path_factory.mktemp("python")
    py = base / "python-no-project"
    site = sysconfig.get_paths()["purelib"]
    py.write_text(
        "#!/bin/sh\n"
        f'PYTHONPATH="{site}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" -S "$@"\n'
    )
    py.chmod(0o755)
    probe = subprocess.run(
        [str(py), "-c", "import msgpack, pyarrow, pyspark; import analysis"],
        cwd=base,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "No module named 'analysis'" in probe.stderr, probe.stderr
    return py


def _apps(work: Path) -> list[str]:
    return sorted(d.name for d in work.iterdir() if d.name.startswith("app-"))


@pytest.fixture(scope="module")
def report_dir(
    small_run: Path, spark_cluster: tuple[str, Path], python_without_the_project: Path
) -> Path:
    """``deploy/spark/submit-compare.sh`` on the standalone cluster: the executor's
    Python has msgpack and pyarrow but not this project, which reaches it only
    through ``--py-files``."""
    master_url, work = spark_cluster
    before = _apps(work)
    proc = subprocess.run(
        [
            str(ROOT / "deploy" / "spark" / "submit-compare.sh"),
            "--master", master_url, str(small_run),
            "--", "--executor-memory", "512m",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={
            **os.environ,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SHUFFLE_PARTITIONS": "2",
            "PYSPARK_PYTHON": str(python_without_the_project),
            "PYSPARK_DRIVER_PYTHON": sys.executable,
        },
    )  # fmt: skip
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    out = small_run / "report"
    # spark-submit passes the Python driver's stderr (progress) on to its stdout;
    # the report's path comes last
    lines = proc.stdout.strip().splitlines()
    assert lines[-1] == str(out / "report.html")
    assert re.search(rf"compare_job: \[ *[0-9.]+ s\] Spark master {master_url}\b", proc.stdout)
    # progress all the way: loading, checkers, metrics, frames, writing
    for step in (
        "loading event logs",
        "running the checkers",
        "computing metrics",
        "collecting plot frames",
        "writing the report",
        "report written",
    ):
        assert step in proc.stdout, proc.stdout
    # the executor ran on the worker: one more application directory there
    assert len(_apps(work)) == len(before) + 1
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
    # the driver decoded the logs into the run's columnar cache; the executors scanned it
    assert payload["data"]["events read"].startswith(
        f"columnar cache {small_run / 'columnar-cache'}: "
    )
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


def _blocks(path: Path) -> list[Any]:
    from emulator.logformat import FileReport, walk

    with open(path, "rb") as f:
        return list(walk(f, str(path), path.stat().st_size, FileReport(str(path))))


def _copy(small_run: Path, tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(small_run, run, ignore=shutil.ignore_patterns("report", "zk"))
    return run


def _damage(run: Path, case: str) -> list[str]:
    """Damage ``run``'s consumer logs as ``case`` says; the exact problems expected."""
    from analysis.evidence import affects

    ev = run / "consumer" / "events"
    host, prod = ev / "host-0.msgpack", ev / "producer-0.msgpack"
    data = host.read_bytes()
    size = len(data)
    blocks = _blocks(host)
    b = blocks[len(blocks) // 2]
    listed = json.loads((run / "manifest.json").read_text())["event_storage"]["protocols"][
        "consumer"
    ]["logs"]
    if case == "truncated":
        cut = b.offset + 30
        host.write_bytes(data[:cut])
        return [
            f"log host-0 is {cut:,} bytes, the manifest lists {size:,}: changed after the run",
            f"log host-0 is cut short: its last {cut - b.offset:,} bytes are an unfinished write",
        ]
    if case in ("bit_flip", "length_byte"):
        from emulator.logformat import HEADER_BYTES

        bad = bytearray(data)
        at = b.offset + HEADER_BYTES + 11 if case == "bit_flip" else b.offset + 5
        bad[at] ^= 0x01 if case == "bit_flip" else 0x7F
        host.write_bytes(bytes(bad))
        from crc32c import crc32c

        what = (
            f"payload checksum mismatch ({b.end - b.offset:,} bytes, {b.records:,} events skipped)"
            if case == "bit_flip"
            else f"bad block header ({b.end - b.offset:,} bytes skipped)"
        )
        return [
            f"log host-0 changed after the run (CRC32C {crc32c(bytes(bad)):08x}, "
            f"the manifest lists {listed['host-0']['crc32c']})",
            f"log host-0 is damaged at byte {b.offset:,}: {what}: {affects('host-0')}",
        ]
    if case == "garbage":
        host.write_bytes(data + b"\x00\x01junk" * 10)
        return [
            f"log host-0 is {size + 60:,} bytes, the manifest lists {size:,}: "
            "changed after the run",
            f"log host-0 is damaged at byte {size:,}: bytes outside any block "
            f"(60 bytes skipped): {affects('host-0')}",
        ]
    if case == "deleted":
        n = prod.stat().st_size
        prod.unlink()
        return [
            f"log producer-0 is missing (the manifest lists {n:,} bytes): {affects('producer')}"
        ]
    if case == "empty":
        host.write_bytes(b"")
        return [
            f"log host-0 is 0 bytes, the manifest lists {size:,}: changed after the run",
            f"log host-0 is empty: {affects('host-0')}",
        ]
    if case == "unlisted":
        shutil.copy(prod, ev / "zz-extra.msgpack")
        return ["log zz-extra is not listed in the manifest"]
    if case == "interrupted":
        m = json.loads((run / "manifest.json").read_text())
        m["status"] = "interrupted"
        m["protocols"]["consumer"]["status"] = "interrupted"
        (run / "manifest.json").write_text(json.dumps(m))
        return ["the run was interrupted: its logs stop where it was stopped"]
    if case == "never_finished":
        m = json.loads((run / "manifest.json").read_text())
        m["status"] = "running"
        del m["protocols"]["consumer"]
        (run / "manifest.json").write_text(json.dumps(m))
        return ["the run never finished (its manifest still says running: the CLI was killed)"]
    raise AssertionError(case)


DAMAGE_CASES = (
    "truncated",
    "bit_flip",
    "length_byte",
    "garbage",
    "deleted",
    "empty",
    "unlisted",
    "interrupted",
    "never_finished",
)


def test_a_fresh_run_has_complete_evidence(small_run: Path) -> None:
    """Every log of a real run is closed, listed with its size and checksum, and whole."""
    from analysis.evidence import assess_run_dir

    ev = assess_run_dir(small_run)
    assert sorted(ev) == sorted(PROTOCOLS)
    assert {p: e.problems for p, e in ev.items()} == {p: [] for p in PROTOCOLS}
    m = json.loads((small_run / "manifest.json").read_text())
    for p in PROTOCOLS:
        logs = m["event_storage"]["protocols"][p]["logs"]
        assert {"orchestrator", "producer-0", "broker-0", "host-0"} <= set(logs)
        assert all(len(v["crc32c"]) == 8 and v["bytes"] > 0 for v in logs.values())


@pytest.mark.parametrize("case", DAMAGE_CASES)
def test_damaged_run_directories_get_exact_verdicts(
    small_run: Path, tmp_path: Path, case: str
) -> None:
    from analysis.evidence import INCOMPLETE, assess_run_dir

    run = _copy(small_run, tmp_path)
    want = _damage(run, case)
    ev = assess_run_dir(run)
    assert ev["consumer"].verdict == INCOMPLETE
    assert ev["consumer"].problems == want
    others = [p for p in PROTOCOLS if p != "consumer"]
    assert all(ev[p].complete for p in others)  # damage to one protocol's logs stays there


def test_compare_of_damaged_logs_gives_no_verdict_and_exits_3(
    small_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from emulator.cli import main

    run = _copy(small_run, tmp_path)
    want = _damage(run, "bit_flip")
    assert main(["compare", str(run), "--out", str(tmp_path / "rep")]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        "rebalance-emu: error: incomplete evidence for consumer (the report says what is "
        "missing; --allow-incomplete accepts it)"
    )
    payload = json.loads((tmp_path / "rep" / "metrics.json").read_text())
    consumer = payload["metrics"]["consumer"]
    assert consumer["evidence"]["verdict"] == "incomplete evidence"
    assert consumer["evidence"]["problems"] == want
    assert consumer["anomalies_not_allowed"] == 0
    assert all(a["allowed"] is None for a in payload["anomalies"] if a["protocol"] == "consumer")
    assert payload["metrics"]["zookeeper"]["evidence"]["verdict"] == "complete"
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "INCOMPLETE EVIDENCE for consumer" in md and want[1] in md
    assert 'class="incomplete"' in (tmp_path / "rep" / "report.html").read_text()


def test_allow_incomplete_exits_0_with_a_warning(
    small_run: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The exit code follows the evidence (the comparison itself is the test above's)."""
    import analysis.compare as cmp
    from analysis.evidence import assess_run_dir
    from emulator.cli import main

    run = _copy(small_run, tmp_path)
    _damage(run, "deleted")

    caches: list[bool] = []

    def evidence_only(run_dirs: Any, out_dir: Any, *_a: Any, **k: Any) -> Any:
        caches.append(k["cache"])
        return cmp.CompareOutcome(Path(out_dir), {"run": assess_run_dir(run_dirs[0])})

    monkeypatch.setattr(cmp, "compare_runs", evidence_only)
    assert main(["compare", str(run), "--out", str(tmp_path / "r"), "--allow-incomplete"]) == 0
    assert "warning: incomplete evidence for consumer" in capsys.readouterr().err
    assert main(["compare", str(run), "--out", str(tmp_path / "r"), "--no-cache"]) == 3
    assert main(["compare", str(small_run), "--out", str(tmp_path / "r")]) == 0
    assert caches == [True, False, True]


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


def test_get_spark_ships_the_project_to_a_cluster(
    small_run: Path, spark_cluster: tuple[str, Path], python_without_the_project: Path
) -> None:
    """``rebalance-emu compare --spark-master URL`` builds its session with get_spark,
    which ships the project to the executors (addPyFile): they read every event
    although their Python lacks the project."""
    from emulator.eventlog import read_run_events

    master_url, work = spark_cluster
    before = _apps(work)
    expected = sum(len(list(read_run_events(small_run / p / "events"))) for p in PROTOCOLS)
    probe = (
        "import sys; from analysis.spark import get_spark; "
        "from analysis.datasource import load_events; "
        "s = get_spark(sys.argv[1]); "
        "print('rows', load_events(s, sys.argv[2]).events.count()); s.stop()"
    )
    counted = subprocess.run(
        [sys.executable, "-c", probe, master_url, str(small_run)],
        cwd=python_without_the_project.parent,
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **os.environ,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": str(python_without_the_project),
        },
    )
    assert counted.returncode == 0, counted.stderr[-4000:]
    assert f"rows {expected}" in counted.stdout.splitlines()
    assert len(_apps(work)) == len(before) + 1
