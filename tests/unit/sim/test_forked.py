"""A sim run's protocols in forked workers (``--parallel K``): failures reach the driver.

The logs of forked worlds are compared with the pinned digests of the
sequential ones in ``test_sim_runs.test_every_protocol_runs_to_the_end_and_processes_every_offset``;
these tests cover how a run in workers ends when a protocol does not.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from actors.engine import EngineParts
from actors.orchestrator import run_scenario
from actors.run_files import RunError
from actors.sim.run import SimEngine
from emulator.scenario import Scenario, parse_scenario

TINY = """
name = "sim-tiny"
description = "2 consumers for 4 seconds"
seed = 3
duration_s = 4.0
time_scale = 0.5

[cluster]
brokers = 1
zookeeper_ensemble = 1

[[topics]]
name = "events"
partitions = 2
replication_factor = 1

[producer]
rate_per_s = 20.0

[group]
id = "tiny-group"
consumers = 2
"""


def _tiny() -> Scenario:
    return parse_scenario(TINY, "sim-tiny.toml")


class _Broken(SimEngine):
    """Fails one protocol's set-up: ``how`` = "raise" (a RunError) or "exit" (the worker dies)."""

    def __init__(self, victim: str, how: str) -> None:
        super().__init__(workers=2)
        self.victim = victim
        self.how = how

    def begin_protocol(self, protocol: str) -> EngineParts:
        if protocol == self.victim:
            if self.how == "exit":
                os._exit(3)
            raise RunError(f"{protocol}: no world for it")
        return super().begin_protocol(protocol)


def test_a_protocol_that_raises_fails_the_run_with_its_error(tmp_path: Path) -> None:
    with pytest.raises(RunError, match="classic-eager: no world for it"):
        run_scenario(
            _tiny(),
            ["zookeeper", "classic-eager"],
            tmp_path,
            engine=_Broken("classic-eager", "raise"),
        )
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    assert manifest["error"] == "classic-eager: no world for it"


def test_a_worker_that_dies_without_a_word_is_a_run_error(tmp_path: Path) -> None:
    with pytest.raises(
        RunError, match=r"worker of consumer ended without an answer \(exit code 3\)"
    ):
        run_scenario(
            _tiny(), ["consumer", "classic-eager"], tmp_path, engine=_Broken("consumer", "exit")
        )
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["status"] == "failed"


def test_checked_runs_and_planted_coordinators_stay_in_this_process() -> None:
    assert SimEngine(workers=4).workers == 4
    assert SimEngine(workers=4, check=True).workers == 1
    assert SimEngine(workers=0).workers == 1


def test_ctrl_c_stops_the_workers_and_the_manifest_says_interrupted(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "run"
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "emulator.cli", "run", "quickstart", "--engine", "sim"),
            *("--protocol", "all", "--parallel", "2", "--out", str(out)),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        # both workers are simulating once their protocols' event directories exist
        while time.monotonic() < deadline and len(list(out.glob("*/events"))) < 2:
            time.sleep(0.05)
        assert len(list(out.glob("*/events"))) == 2
        workers = _children(proc.pid)
        assert len(workers) == 2
        proc.send_signal(signal.SIGINT)
        _stdout, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted" in err.strip().splitlines()[-1]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    # the two protocols under way ended interrupted, with their logs closed; none was started after
    assert sorted(manifest["protocols"]) == ["classic-eager", "zookeeper"]
    assert {e["status"] for e in manifest["protocols"].values()} == {"interrupted"}
    assert not [pid for pid in workers if Path(f"/proc/{pid}").exists()]


def _children(pid: int) -> list[int]:
    """The forked workers of ``pid``: its children with its own command line (not the reaper)."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    kids = [int(c) for c in path.read_text().split()] if path.exists() else []
    mine = Path(f"/proc/{pid}/cmdline").read_bytes()
    return [k for k in kids if Path(f"/proc/{k}/cmdline").read_bytes() == mine]


@pytest.mark.parametrize("where", ["teardown", "protocol_done"])
def test_an_interruption_as_a_protocol_ends_leaves_it_in_the_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Ctrl-C (a worker's SIGTERM) landing while a protocol's run is ending, in
    its teardown or in the engine's closing of its world, still records the
    protocol in the manifest, as interrupted; before, the entry was left out
    (seen once in CI: a forked quickstart's manifest named one protocol of two)."""
    from actors.orchestrator import ProtocolRun

    hit = [False]

    def once() -> None:
        if not hit[0]:
            hit[0] = True
            raise KeyboardInterrupt("as the run ended")

    if where == "teardown":
        teardown = ProtocolRun._teardown

        def late_teardown(self: ProtocolRun) -> None:
            once()
            teardown(self)

        monkeypatch.setattr(ProtocolRun, "_teardown", late_teardown)
    else:
        done = SimEngine.protocol_done

        def late_done(self: SimEngine, run: ProtocolRun, manifest: dict[str, object]) -> None:
            done(self, run, manifest)
            once()

        monkeypatch.setattr(SimEngine, "protocol_done", late_done)
    with pytest.raises(KeyboardInterrupt):
        run_scenario(_tiny(), ["consumer"], tmp_path, engine=SimEngine(workers=1))
    assert hit[0]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    entry = manifest["protocols"]["consumer"]
    assert entry["status"] == ("interrupted" if where == "teardown" else "completed")
