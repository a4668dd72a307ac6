"""The bundled quickstart under every protocol, end to end on a real local Ray.

One ``run_scenario`` with ``--protocol all`` (embedded ZooKeeper, the same
seed and timeline for all four), then what each generation must show.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from emulator.eventlog import ReadStats, read_run_events
from emulator.events import validate_event
from emulator.scenario import Scenario, bundled_scenarios, load_scenario

pytestmark = [pytest.mark.ray, pytest.mark.zk, pytest.mark.slow]

PROTOCOLS = ["zookeeper", "classic-eager", "classic-cooperative", "consumer"]
Event = dict[str, Any]


@pytest.fixture(scope="module")
def quickstart_run(
    ray_local: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Scenario, Path]]:
    from actors.orchestrator import run_scenario

    scenario = load_scenario(bundled_scenarios()["quickstart"])
    out = tmp_path_factory.mktemp("quickstart") / "run"
    run_scenario(scenario, PROTOCOLS, out, validate_events=True)
    yield scenario, out


def _events(out: Path, protocol: str) -> list[Event]:
    stats = ReadStats()
    events = list(read_run_events(out / protocol / "events", stats))
    assert stats.truncated_tail_bytes == 0
    for ev in events:
        validate_event(ev)
    events.sort(key=lambda e: float(e["t_emu_ms"]))
    return events


def _t(e: Event) -> float:
    return float(e["t_emu_ms"]) / 1000.0


def _times(events: list[Event], kind: str, **match: object) -> list[float]:
    return [
        _t(e) for e in events
        if e["kind"] == kind and all(e.get(k) == v for k, v in match.items())
    ]


def _parts(e: Event) -> set[str]:
    return set(filter(None, str(e.get("partitions") or "").split(",")))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_produced_offset_is_processed(
    quickstart_run: tuple[Scenario, Path], protocol: str
) -> None:
    scenario, out = quickstart_run
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    entry = manifest["protocols"][protocol]
    assert entry["status"] == "completed"
    counts = entry["counts"]
    assert counts["produced"] > 0.8 * scenario.producer.rate_per_s * scenario.duration_s
    assert counts["unprocessed"] == 0, counts["partitions_unprocessed"]
    assert counts["processed"] >= counts["produced"]
    events = _events(out, protocol)
    assert {"broker-0", "broker-1", "broker-2", "producer-0", "host-0", "orchestrator"} <= {
        e["actor"] for e in events
    }
    # The timeline ran on time in emulated time, the same for every protocol.
    [join] = _times(events, "action_applied", reason="join")
    [crash] = _times(events, "action_applied", reason="crash")
    assert 10.0 <= join < 11.5 and 25.0 <= crash < 26.5


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_controller_brings_every_partition_online_and_replication_keeps_up(
    quickstart_run: tuple[Scenario, Path], protocol: str
) -> None:
    """The elected controller writes each partition's first state (New -> Online)
    once the brokers have registered; with no broker fault, every follower keeps
    up, so no ISR ever shrinks (it did for the partitions led by the broker that
    hosted a KIP-848 group, whose replica fetches all failed)."""
    scenario, out = quickstart_run
    events = _events(out, protocol)
    [elected] = [e for e in events if e["kind"] == "controller_elected"]
    new = [e for e in events if e["kind"] == "leader_changed" and e["reason"] == "new"]
    topic = scenario.topics[0]
    assert {e["partition"] for e in new if e["topic"] == topic.name} == set(
        range(topic.partitions)
    )
    assert {e["actor"] for e in new} == {elected["actor"]}
    assert all(int(e["seq"]) > int(elected["seq"]) for e in new)
    assert [e for e in events if e["kind"] == "isr_changed" and e["reason"] == "shrink"] == []


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_manifest_records_what_the_run_cost(
    quickstart_run: tuple[Scenario, Path], protocol: str
) -> None:
    """Each actor's CPU and peak memory; ZooKeeper ops (legacy); coordinator
    requests after every timeline action, and heartbeat gaps (modern)."""
    _, out = quickstart_run
    res = json.loads((out / "manifest.json").read_text())["protocols"][protocol]["resources"]
    hosts = {k: v for k, v in res["actors"].items() if k.startswith("host-")}
    brokers = {k: v for k, v in res["actors"].items() if k.startswith("broker-")}
    assert hosts and set(brokers) == {"broker-0", "broker-1", "broker-2"}
    for usage in [*hosts.values(), *brokers.values()]:
        assert usage["cpu_s"] > 0 and 30 < usage["peak_rss_mib"] < 4096
    if protocol == "zookeeper":
        # Every member read the group's znodes, wrote its own and got watch events.
        assert sum(h["zk_reads"] for h in hosts.values()) > 50
        assert sum(h["zk_writes"] for h in hosts.values()) > 10
        assert sum(h["zk_watch_notifications"] for h in hosts.values()) > 0
        assert res["coordinator"] == []
        return
    snaps = res["coordinator"]
    assert [s["after"] for s in snaps] == ["join", "crash", "leave", "end"]
    kind = "ConsumerGroupHeartbeatRequest" if protocol == "consumer" else "HeartbeatRequest"
    counts = [s["requests_by_kind"].get(kind, 0) for s in snaps]
    assert 0 < counts[0] < counts[1] < counts[2] < counts[3]  # cumulative, all along
    # Nobody but the crashed member missed its session: no live member's
    # heartbeats were further apart than a session timeout.
    assert 0 < snaps[-1]["heartbeat_gap_max_ms"] < 10000
    # The histogram holds every gap, cumulatively, and its top bucket the largest one.
    hist, bounds = snaps[-1]["heartbeat_gap_histogram"], snaps[-1]["heartbeat_gap_bounds_ms"]
    assert len(hist) == len(bounds) + 1
    assert [sum(s["heartbeat_gap_histogram"]) for s in snaps] == sorted(
        sum(s["heartbeat_gap_histogram"]) for s in snaps
    )
    top = max(i for i, n in enumerate(hist) if n)
    assert (bounds[top - 1] if top else 0) < snaps[-1]["heartbeat_gap_max_ms"] <= bounds[top]


def test_legacy_herd_expiry_and_leave(quickstart_run: tuple[Scenario, Path]) -> None:
    _, out = quickstart_run
    events = _events(out, "zookeeper")
    # The join at 10 s makes every member rebalance (the herd), before the
    # next timeline action (a loaded machine may deliver the watches late).
    rebalancers = {
        e["member"] for e in events if e["kind"] == "rebalance_started" and 10.0 <= _t(e) < 25.0
    }
    assert rebalancers == {"c-0", "c-1", "c-2", "c-3", "c-4"}
    # The crash of c-1 at 25 s is noticed only when its ZooKeeper session
    # expires on the server (zookeeper.session.timeout.ms = 6 s).
    [crash] = _times(events, "consumer_crashed", member="c-1")
    after = [t for t in _times(events, "rebalance_started", reason="ids") if t > crash]
    assert after and crash + 4.0 <= min(after) <= crash + 20.0
    # c-2's graceful leave at 40 s closes its session at once.
    [leave] = _times(events, "action_applied", reason="leave")
    [stopped] = _times(events, "consumer_stopped", member="c-2")
    assert leave <= stopped < leave + 6.0
    rebalances = _times(events, "rebalance_started", reason="ids")
    assert any(leave <= t < stopped + 6.0 for t in rebalances)
    # At the end the three survivors own all 12 partitions, one owner each.
    last: dict[str, set[str]] = {}
    for e in events:
        if e["kind"] == "rebalance_completed":
            last[str(e["member"])] = _parts(e)
    final: dict[str, list[str]] = defaultdict(list)
    for member in ("c-0", "c-3", "c-4"):
        for tp in last[member]:
            final[tp].append(member)
    assert len(final) == 12 and all(len(o) == 1 for o in final.values())


def _revoked_between(events: list[Event], lo: float, hi: float) -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for e in events:
        if e["kind"] == "partitions_revoked" and lo <= _t(e) < hi:
            out[str(e["member"])] |= _parts(e)
    return out


def test_classic_eager_revokes_everything_on_join(quickstart_run: tuple[Scenario, Path]) -> None:
    _, out = quickstart_run
    events = _events(out, "classic-eager")
    revoked = _revoked_between(events, 10.0, 20.0)
    # Stop the world: every old member gives up all of its partitions.
    assert set(revoked) == {"c-0", "c-1", "c-2", "c-3"}
    assert len(set().union(*revoked.values())) == 12


def test_classic_cooperative_revokes_only_what_moves(
    quickstart_run: tuple[Scenario, Path],
) -> None:
    _, out = quickstart_run
    events = _events(out, "classic-cooperative")
    revoked = _revoked_between(events, 10.0, 20.0)
    moved = set().union(*revoked.values()) if revoked else set()
    # 12 partitions over 5 members: the newcomer gets 2, taken from others.
    assert 1 <= len(moved) <= 3
    # What moved went to c-4, in a later generation than the revocation.
    assigned_c4 = set()
    for e in events:
        if e["kind"] == "partitions_assigned" and e.get("member") == "c-4" and 10 <= _t(e) < 20:
            assigned_c4 |= _parts(e)
    assert moved <= assigned_c4


def test_classic_waits_a_session_timeout_for_a_crashed_member(
    quickstart_run: tuple[Scenario, Path],
) -> None:
    _, out = quickstart_run
    for protocol in ("classic-eager", "classic-cooperative"):
        events = _events(out, protocol)
        removed = [
            _t(e) for e in events
            if e["kind"] == "member_removed" and e.get("reason") == "session_timeout"
        ]
        # session.timeout.ms is 45 s from Kafka 3.0: the crash at 25 s is seen ~70 s.
        assert removed and 25.0 + 40.0 <= removed[0] <= 25.0 + 60.0, protocol


def test_kip848_moves_partitions_without_stopping_the_others(
    quickstart_run: tuple[Scenario, Path],
) -> None:
    _, out = quickstart_run
    events = _events(out, "consumer")
    revoked = _revoked_between(events, 10.0, 20.0)
    moved = set().union(*revoked.values()) if revoked else set()
    assert 1 <= len(moved) <= 3
    # Never two owners at once: replay ownership events in time order.
    owner: dict[str, str] = {}
    crashed: set[str] = set()
    for e in events:
        tp = f"{e.get('topic')}:{e.get('partition')}"
        if e["kind"] == "ownership_claimed":
            assert tp not in owner, (tp, owner.get(tp), e.get("member"), _t(e))
            owner[tp] = str(e["member"])
        elif e["kind"] == "ownership_released" and owner.get(tp) == e.get("member"):
            del owner[tp]
        elif e["kind"] == "consumer_crashed":
            crashed.add(str(e["member"]))
        elif e["kind"] == "member_removed":
            # The coordinator fenced someone: a crashed member's partitions are free.
            for k in [k for k, v in owner.items() if v in crashed]:
                del owner[k]
