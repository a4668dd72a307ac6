"""The bundled quickstart, end to end on a real local Ray and an embedded ZooKeeper."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from emulator.eventlog import ReadStats, read_run_events
from emulator.events import validate_event
from emulator.scenario import bundled_scenarios, load_scenario

pytestmark = [pytest.mark.ray, pytest.mark.zk, pytest.mark.slow]


def test_quickstart_end_to_end(ray_local: None, tmp_path: Path) -> None:
    from actors.orchestrator import run_scenario

    scenario = load_scenario(bundled_scenarios()["quickstart"])
    out = tmp_path / "q"
    [result] = run_scenario(scenario, ["zookeeper"], out, validate_events=True)

    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "completed" and result.status == "completed"
    counts = manifest["protocols"]["zookeeper"]["counts"]
    assert counts["produced"] > 0.8 * scenario.producer.rate_per_s * scenario.duration_s
    assert counts["unprocessed"] == 0, counts["partitions_unprocessed"]
    assert counts["processed"] >= counts["produced"]
    assert manifest["zookeeper"]["embedded"] is True

    stats = ReadStats()
    events = list(read_run_events(out / "zookeeper" / "events", stats))
    assert stats.truncated_tail_bytes == 0
    for ev in events:
        validate_event(ev)
    actors = {ev["actor"] for ev in events}
    assert {"broker-0", "broker-1", "broker-2", "producer-0", "host-0",
            "orchestrator"} <= actors
    events.sort(key=lambda e: float(e["t_emu_ms"]))  # type: ignore[arg-type]

    def times(kind: str, **match: object) -> list[float]:
        return [float(e["t_emu_ms"]) / 1000 for e in events  # type: ignore[arg-type]
                if e["kind"] == kind and all(e.get(k) == v for k, v in match.items())]

    # The join at 10 s makes every member rebalance (the herd).
    rebalancers = {e["member"] for e in events if e["kind"] == "rebalance_started"
                   and 10.0 <= float(e["t_emu_ms"]) / 1000 < 12.0}  # type: ignore[arg-type]
    assert rebalancers == {"c-0", "c-1", "c-2", "c-3", "c-4"}
    # The crash of c-1 at 25 s is noticed only when its session expires on the
    # server (6 s of zookeeper.session.timeout.ms), not before.
    [crash] = times("consumer_crashed", member="c-1")
    after = [t for t in times("rebalance_started", reason="ids") if t > crash]
    assert after and 25.0 + 4.0 <= min(after) <= 25.0 + 12.0
    # c-2's graceful leave at 40 s closes its session at once: the others
    # rebalance right away, long before a session timeout could have passed.
    [leave] = times("action_applied", reason="leave")
    [stopped] = times("consumer_stopped", member="c-2")
    assert leave <= stopped < leave + 3.0
    assert any(leave <= t < stopped + 3.0 for t in times("rebalance_started", reason="ids"))

    # At the end the three survivors own all 12 partitions, one owner each.
    last: dict[str, str] = {}
    for e in events:
        if e["kind"] == "rebalance_completed":
            last[str(e["member"])] = str(e.get("partitions") or "")
    final = defaultdict(list)
    for member in ("c-0", "c-3", "c-4"):
        for tp in filter(None, last[member].split(",")):
            final[tp].append(member)
    assert len(final) == 12
    assert all(len(owners) == 1 for owners in final.values())
