"""What the bundled quickstart must show under each protocol, on either engine.

The checks read a finished run directory (``run_scenario`` of the quickstart:
a join at 10 s, c-1's crash at 25 s, c-2's clean leave at 40 s, on 12
partitions). ``tests/integration/test_ray_quickstart.py`` applies them to a
real run (Ray, embedded ZooKeeper), ``tests/unit/sim/test_sim_quickstart.py``
to a sim run of all four protocols.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from emulator.eventlog import ReadStats, read_run_events
from emulator.events import validate_event
from emulator.scenario import Scenario

PROTOCOLS = ["zookeeper", "classic-eager", "classic-cooperative", "consumer"]
Event = dict[str, Any]


def events(out: Path, protocol: str) -> list[Event]:
    """The protocol's events, each valid, in emulated-time order (an intact log)."""
    stats = ReadStats()
    evs = list(read_run_events(out / protocol / "events", stats))
    assert stats.truncated_tail_bytes == 0
    for ev in evs:
        validate_event(ev)
    evs.sort(key=lambda e: float(e["t_emu_ms"]))
    return evs


def _t(e: Event) -> float:
    return float(e["t_emu_ms"]) / 1000.0


def _times(evs: list[Event], kind: str, **match: object) -> list[float]:
    return [
        _t(e) for e in evs if e["kind"] == kind and all(e.get(k) == v for k, v in match.items())
    ]


def _parts(e: Event) -> set[str]:
    return set(filter(None, str(e.get("partitions") or "").split(",")))


def _revoked_between(evs: list[Event], lo: float, hi: float) -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for e in evs:
        if e["kind"] == "partitions_revoked" and lo <= _t(e) < hi:
            out[str(e["member"])] |= _parts(e)
    return out


def every_produced_offset_is_processed(scenario: Scenario, out: Path, protocol: str) -> None:
    """The run completed, every produced offset was processed, every actor logged,
    and the timeline ran on time in emulated time."""
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    entry = manifest["protocols"][protocol]
    assert entry["status"] == "completed"
    counts = entry["counts"]
    assert counts["produced"] > 0.8 * scenario.producer.rate_per_s * scenario.duration_s
    assert counts["unprocessed"] == 0, counts["partitions_unprocessed"]
    assert counts["processed"] >= counts["produced"]
    evs = events(out, protocol)
    assert {"broker-0", "broker-1", "broker-2", "producer-0", "host-0", "orchestrator"} <= {
        e["actor"] for e in evs
    }
    [join] = _times(evs, "action_applied", reason="join")
    [crash] = _times(evs, "action_applied", reason="crash")
    assert 10.0 <= join < 11.5 and 25.0 <= crash < 26.5


def controller_brings_every_partition_online(scenario: Scenario, out: Path, protocol: str) -> None:
    """The elected controller writes each partition's first state (New -> Online)
    once the brokers have registered; with no broker fault, every follower keeps
    up, so no ISR ever shrinks (it did for the partitions led by the broker that
    hosted a KIP-848 group, whose replica fetches all failed)."""
    evs = events(out, protocol)
    [elected] = [e for e in evs if e["kind"] == "controller_elected"]
    new = [e for e in evs if e["kind"] == "leader_changed" and e["reason"] == "new"]
    topic = scenario.topics[0]
    assert {e["partition"] for e in new if e["topic"] == topic.name} == set(range(topic.partitions))
    assert {e["actor"] for e in new} == {elected["actor"]}
    assert all(int(e["seq"]) > int(elected["seq"]) for e in new)
    assert [e for e in evs if e["kind"] == "isr_changed" and e["reason"] == "shrink"] == []


def legacy_herd_expiry_and_leave(out: Path) -> None:
    """The 0.8 consumer: the join makes every member rebalance, the crash is seen
    when the ZooKeeper session expires, the leave at once; one owner per partition
    at the end."""
    evs = events(out, "zookeeper")
    # The join at 10 s makes every member rebalance (the herd), before the
    # next timeline action (a loaded machine may deliver the watches late).
    rebalancers = {
        e["member"] for e in evs if e["kind"] == "rebalance_started" and 10.0 <= _t(e) < 25.0
    }
    assert rebalancers == {"c-0", "c-1", "c-2", "c-3", "c-4"}
    # The crash of c-1 at 25 s is noticed only when its ZooKeeper session
    # expires on the server (zookeeper.session.timeout.ms = 6 s).
    [crash] = _times(evs, "consumer_crashed", member="c-1")
    after = [t for t in _times(evs, "rebalance_started", reason="ids") if t > crash]
    assert after and crash + 4.0 <= min(after) <= crash + 20.0
    # c-2's graceful leave at 40 s closes its session at once.
    [leave] = _times(evs, "action_applied", reason="leave")
    [stopped] = _times(evs, "consumer_stopped", member="c-2")
    assert leave <= stopped < leave + 6.0
    rebalances = _times(evs, "rebalance_started", reason="ids")
    assert any(leave <= t < stopped + 6.0 for t in rebalances)
    # At the end the three survivors own all 12 partitions, one owner each.
    last: dict[str, set[str]] = {}
    for e in evs:
        if e["kind"] == "rebalance_completed":
            last[str(e["member"])] = _parts(e)
    final: dict[str, list[str]] = defaultdict(list)
    for member in ("c-0", "c-3", "c-4"):
        for tp in last[member]:
            final[tp].append(member)
    assert len(final) == 12 and all(len(o) == 1 for o in final.values())


def classic_eager_revokes_everything_on_join(out: Path) -> None:
    """Stop the world: every old member gives up all of its partitions."""
    revoked = _revoked_between(events(out, "classic-eager"), 10.0, 20.0)
    assert set(revoked) == {"c-0", "c-1", "c-2", "c-3"}
    assert len(set().union(*revoked.values())) == 12


def classic_cooperative_revokes_only_what_moves(out: Path) -> None:
    """12 partitions over 5 members: the newcomer gets 2 or 3, taken from others,
    in a later generation than the revocation."""
    evs = events(out, "classic-cooperative")
    revoked = _revoked_between(evs, 10.0, 20.0)
    moved = set().union(*revoked.values()) if revoked else set()
    assert 1 <= len(moved) <= 3
    assigned_c4 = set()
    for e in evs:
        if e["kind"] == "partitions_assigned" and e.get("member") == "c-4" and 10 <= _t(e) < 20:
            assigned_c4 |= _parts(e)
    assert moved <= assigned_c4


def classic_waits_a_session_timeout_for_a_crashed_member(out: Path, protocol: str) -> None:
    """session.timeout.ms is 45 s from Kafka 3.0: the crash at 25 s is seen at ~70 s."""
    removed = [
        _t(e)
        for e in events(out, protocol)
        if e["kind"] == "member_removed" and e.get("reason") == "session_timeout"
    ]
    assert removed and 25.0 + 40.0 <= removed[0] <= 25.0 + 60.0, protocol


def kip848_moves_partitions_without_stopping_the_others(out: Path) -> None:
    """KIP-848: the join moves 1-3 partitions, and no partition ever has two owners."""
    evs = events(out, "consumer")
    revoked = _revoked_between(evs, 10.0, 20.0)
    moved = set().union(*revoked.values()) if revoked else set()
    assert 1 <= len(moved) <= 3
    # Never two owners at once: replay ownership events in time order.
    owner: dict[str, str] = {}
    crashed: set[str] = set()
    for e in evs:
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
