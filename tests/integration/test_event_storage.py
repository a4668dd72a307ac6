"""Event logs on shared storage: a run with ``--out file:///...`` and a real S3 (moto).

One short run on the local Ray writes its manifest and logs through
``pyarrow.fs`` to a ``file://`` URL (the ``shared`` mode: each actor appends to
a local spool file and copies it there when it closes its log); the logs are
then read back with the ``rebalance-events`` data source from the URL. The
same run directory copied to a real S3 API (moto's server on loopback) is
read back from ``s3://`` by Spark's Python workers, and an actor's log is
uploaded to S3 at close.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from emulator.scenario import parse_scenario
from zk_registry.server import find_free_ports

pytestmark = [pytest.mark.ray, pytest.mark.zk, pytest.mark.spark, pytest.mark.slow]

SCENARIO = """
name = "shared-storage"
seed = 11
duration_s = 6.0
time_scale = 0.3

[cluster]
brokers = 1
zookeeper_ensemble = 1

[[topics]]
name = "t"
partitions = 2
replication_factor = 1

[producer]
rate_per_s = 40.0
batch_size = 10

[group]
id = "shared-group"
consumers = 2
processing_ms_per_message = 1.0

[kafka]
"zookeeper.session.timeout.ms" = 6000
"auto.offset.reset" = "smallest"
"""


@pytest.fixture(scope="module")
def url_run(ray_local: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A run with ``--out file://<tmp>/run``; its spool under ``<tmp>/spool``."""
    from actors.orchestrator import run_scenario

    base = tmp_path_factory.mktemp("shared")
    old = os.environ.get("REBALANCE_EMU_SPOOL")
    os.environ["REBALANCE_EMU_SPOOL"] = str(base / "spool")
    try:
        results = run_scenario(
            parse_scenario(SCENARIO, "shared"), ["zookeeper"], f"file://{base}/run"
        )
    finally:
        if old is None:
            os.environ.pop("REBALANCE_EMU_SPOOL", None)
        else:
            os.environ["REBALANCE_EMU_SPOOL"] = old
    assert [r.status for r in results] == ["completed"]
    yield base


def test_a_url_run_writes_its_manifest_and_logs_there(url_run: Path) -> None:
    run = url_run / "run"
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    storage = manifest["event_storage"]
    assert storage["mode"] == "shared" and storage["url"] == f"file://{run}"
    logs = storage["protocols"]["zookeeper"]["logs"]
    assert set(logs) == {"orchestrator", "broker-0", "producer-0", "host-0"}
    assert {v["how"] for v in logs.values()} == {"uploaded"}
    assert storage["protocols"]["zookeeper"]["missing"] == {}
    files = sorted(p.name for p in (run / "zookeeper" / "events").iterdir())
    assert files == [f"{a}.msgpack" for a in sorted(logs)]
    for name, entry in logs.items():
        assert (run / "zookeeper" / "events" / f"{name}.msgpack").stat().st_size == entry["bytes"]
    # the embedded ZooKeeper kept its data on local disk, not in the run directory;
    # the spool is gone once every log is copied
    assert not (run / "zk").exists()
    assert not list((url_run / "spool").rglob("*.msgpack"))
    counts = manifest["protocols"]["zookeeper"]["counts"]
    assert counts["produced"] > 0 and counts["unprocessed"] == 0


def test_compare_reads_a_url_run(url_run: Path, spark: Any) -> None:
    from analysis.compare import CompareError, check_run_dir
    from analysis.datasource import load_events

    url = f"file://{url_run}/run"
    manifest = check_run_dir(url)
    loaded = load_events(spark, url)
    assert loaded.files == 4 and loaded.truncated == []
    assert loaded.manifest["run_id"] == manifest["run_id"]
    assert loaded.events.count() == loaded.records > 0
    with pytest.raises(CompareError, match=r"no such run directory"):
        check_run_dir(f"file://{url_run}/nothing")
    with pytest.raises(CompareError, match=r"^nope://x: cannot reach storage"):
        check_run_dir("nope://x")


def test_the_cli_refuses_a_url_that_holds_a_run(url_run: Path, capsys: Any) -> None:
    from emulator.cli import main

    code = main(["run", "quickstart", "--out", f"file://{url_run}/run"])
    err = capsys.readouterr().err
    assert code == 2 and "holds a run already (use --force" in err and err.endswith("\n")
    assert err.count("\n") == 1


# ------------------------------------------------------------------ S3 (moto)


@pytest.fixture(scope="module")
def s3_url() -> Iterator[str]:
    """A bucket on moto's S3 server on loopback; the URL of a fresh prefix in it."""
    server = Path(sys.executable).parent / "moto_server"
    if not server.exists():
        pytest.skip("moto[server] is not installed (dev extra)")
    port = find_free_ports(1)[0]
    proc = subprocess.Popen(
        [str(server), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30.0
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail("moto's S3 server did not start within 30 s")
                time.sleep(0.2)
        # credentials in the URL: Spark's Python workers see no test environment
        opts = f"endpoint_override=127.0.0.1:{port}&scheme=http&region=us-east-1"
        import pyarrow.fs as pafs

        fs, _ = pafs.FileSystem.from_uri(f"s3://k:s@emu?{opts}&allow_bucket_creation=true")
        fs.create_dir("emu")
        yield f"s3://k:s@emu/runs/{uuid.uuid4().hex[:8]}?{opts}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _find(m: dict[str, Any], key: str) -> Any:
    """A metric by its last dotted name (the metrics nest by topic)."""
    from analysis.report import flatten

    hits = [v for k, v in flatten(m).items() if k == key or k.endswith("." + key)]
    return hits[0] if hits else None


def test_a_run_on_s3_is_read_back_by_spark(
    url_run: Path, s3_url: str, spark: Any, tmp_path: Path
) -> None:
    from analysis.compare import check_run_dir
    from analysis.datasource import load_events
    from emulator.storage import resolve

    loc = resolve(s3_url)
    run = url_run / "run"
    for f in sorted(run.rglob("*")):
        if f.is_file():
            loc.upload(f, str(f.relative_to(run)))
    assert check_run_dir(s3_url)["status"] == "completed"
    assert loc.event_logs() == sorted(
        str(p.relative_to(run)) for p in run.glob("*/events/*.msgpack")
    )
    remote = load_events(spark, s3_url, segment_bytes=2000, columnar=True)
    assert remote.cache is None and "remote storage" in remote.cache_note  # nothing written there
    local = load_events(spark, str(run), segment_bytes=2000)
    assert remote.records == local.records and remote.segments == local.segments > 4
    cols = ["actor", "seq", "kind", "t_emu_ms"]
    assert sorted(remote.events.select(*cols).collect()) == sorted(
        local.events.select(*cols).collect()
    )
    # a secret never shows in what the plan names
    assert all(not r.source_file.startswith("s3://k:") for r in remote.events.collect())
    # the whole report from the bucket, as from the local copy
    from analysis.compare import compare

    quiet: Any = lambda _line: None  # noqa: E731
    report = compare([s3_url], tmp_path / "report", progress=quiet, spark=spark)
    payload = json.loads((report / "metrics.json").read_text())
    manifest = json.loads((run / "manifest.json").read_text())
    assert payload["runs"][0]["run_id"] == manifest["run_id"]
    assert payload["data"]["event log files"] == len(loc.event_logs())
    counts = manifest["protocols"]["zookeeper"]["counts"]
    assert _find(payload["metrics"]["zookeeper"], "produced") == counts["produced"]
    assert (report / "plots" / "ownership.png").stat().st_size > 0


def test_a_corrupt_log_on_s3_is_named_by_url_and_offset(
    url_run: Path, s3_url: str, spark: Any, tmp_path: Path
) -> None:
    from analysis.datasource import load_events
    from emulator.storage import resolve

    src = url_run / "run" / "zookeeper" / "events" / "broker-0.msgpack"
    bad = tmp_path / "broker-0.msgpack"
    data = src.read_bytes()
    bad.write_bytes(data + b"\xc1" + data)
    loc = resolve(s3_url).child("corrupt")
    loc.upload(bad, "zookeeper/events/broker-0.msgpack")
    le = load_events(spark, loc.uri)  # the stray byte is skipped and named; both copies read
    (d,) = le.damage
    assert (d.offset, d.length, d.what) == (len(data), 1, "bytes outside any block")
    assert d.describe().startswith(
        f"{loc.display('zookeeper/events/broker-0.msgpack')} at byte {len(data)}"
    )
    assert "k:s@" not in d.describe()
    assert le.plans[0].report.records % 2 == 0 and le.plans[0].report.records > 0


def test_an_actor_log_is_uploaded_to_s3_when_it_closes(s3_url: str, tmp_path: Path) -> None:
    from actors.context import RunContext
    from emulator.events import EventKind
    from emulator.storage import resolve

    events = resolve(s3_url).child("writer/zookeeper/events")
    ctx = RunContext(
        run_id="r1",
        protocol="zookeeper",
        events_dir=str(tmp_path / "unused"),
        time_scale=1.0,
        origin_wall=time.time(),
        zk_connect="127.0.0.1:1",
        zk_hosts=("127.0.0.1:1",),
        seed=1,
        group="g",
        storage_mode="shared",
        events_url=events.uri,
        spool_root=str(tmp_path / "spool"),
    )
    w = ctx.writer("host-7")
    assert w.path.is_relative_to(tmp_path / "spool")
    for i in range(3):
        w.emit(EventKind.ACTION_APPLIED, reason=f"r{i}")
    w.close()
    assert not w.path.exists()  # the spool file goes once it is copied
    assert [e["reason"] for e in events.read_events("")] == ["r0", "r1", "r2"]
    assert not (tmp_path / "unused").exists()
    shutil.rmtree(tmp_path / "spool", ignore_errors=True)
