"""A classic group subscribed by pattern while topics come and go, a whole run on the sim engine.

Kafka 3.9's classic client (issue 19 part 4): three ``subscribe(Pattern)``
members match ``events-.*`` on their own metadata. ``events-2`` is created at
12 s and seen at the first metadata refresh after it (``metadata.max.age.ms``
= 10 s after the last one), which rebalances the group; ``events-1`` is deleted
at 35 s: the fetch errors bring a refresh at once for the members that own its
partitions (the others see it at their next periodic refresh), the subscription drops it,
and the commit before the rebalance fails for its partitions and is retried
until the rebalance timeout (``max.poll.interval.ms`` = 15 s here, KAFKA-16235)
before the rebalance revokes them (EAGER: everything; COOPERATIVE: only
``events-1``'s). Auto-creation is off: with it the producer's metadata
requests would bring ``events-1`` back.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from actors.orchestrator import run_scenario
from actors.sim.run import SimEngine
from emulator.eventlog import read_run_events
from emulator.scenario import load_scenario

SCENARIO = """
name = "sim-classic-topics"
description = "a classic pattern group: events-2 created at 12 s, events-1 deleted at 35 s"
seed = 19
duration_s = 65.0
time_scale = 0.5

[cluster]
brokers = 2
zookeeper_ensemble = 1

[[topics]]
name = "events-1"
partitions = 2
replication_factor = 2

[[topics]]
name = "other"
partitions = 2
replication_factor = 2

[producer]
rate_per_s = 20.0
topics = ["events-1", "other"]

[group]
id = "pattern-group"
consumers = 3
topic_pattern = "events-.*"
processing_ms_per_message = 1.0

[kafka]
"auto.offset.reset" = "smallest"
"metadata.max.age.ms" = 10000
"max.poll.interval.ms" = 15000
"auto.create.topics.enable" = false

[[timeline]]
at_s = 12.0
action = "create_topic"
topic = "events-2"
partitions = 2
replication_factor = 2

[[timeline]]
at_s = 35.0
action = "delete_topic"
topic = "events-1"
"""


@pytest.mark.parametrize("protocol", ["classic-eager", "classic-cooperative"])
def test_a_classic_pattern_group_picks_up_a_created_topic_and_drops_a_deleted_one(
    tmp_path: Path, protocol: str
) -> None:
    path = tmp_path / "sim-classic-topics.toml"
    path.write_text(SCENARIO)
    [result] = run_scenario(load_scenario(path), [protocol], tmp_path / "run", engine=SimEngine())
    assert result.status == "completed", result.notes
    events: list[dict[str, Any]] = sorted(
        (dict(e) for e in read_run_events(tmp_path / "run" / protocol / "events")),
        key=lambda e: float(e["t_emu_ms"]),
    )

    def at(kind: str, **match: object) -> list[dict[str, Any]]:
        return [
            e for e in events if e["kind"] == kind and all(e.get(k) == v for k, v in match.items())
        ]

    (created,) = at("topic_created", topic="events-2")
    (marked,) = at("topic_deletion_requested", topic="events-1")
    members = {"c-0", "c-1", "c-2"}

    def holders_at(t_ms: float) -> dict[tuple[str, int], set[str]]:
        held: dict[tuple[str, int], set[str]] = defaultdict(set)
        for e in events:
            if e["t_emu_ms"] > t_ms:
                break
            tp = (str(e.get("topic")), int(e.get("partition") or 0))
            if e["kind"] == "ownership_claimed":
                held[tp].add(str(e["member"]))
            elif e["kind"] == "ownership_released":
                held[tp].discard(str(e["member"]))
        return {tp: h for tp, h in held.items() if h}

    # who owned a partition of events-1 when it was deleted
    fetching_1 = {
        m for tp, h in holders_at(marked["t_emu_ms"]).items() if tp[0] == "events-1" for m in h
    }
    assert fetching_1 and fetching_1 != members  # 2 partitions, 3 members

    # Each member matched on its own metadata: events-1 at the start, then with
    # events-2 after the topic existed and within one metadata.max.age.ms, then
    # events-2 alone after the deletion: at once for the members whose fetches of
    # events-1 failed (that refresh is forced), else at the next periodic refresh.
    # Never "other".
    resolved = at("topic_pattern_resolved", pattern="events-.*")
    assert {e["member"] for e in resolved} == members
    gone_at: dict[str, float] = {}
    for name in members:
        mine = [(e["t_emu_ms"], e["topics"]) for e in resolved if e["member"] == name]
        assert [topics for _, topics in mine] == ["events-1", "events-1,events-2", "events-2"]
        assert created["t_emu_ms"] < mine[1][0] < created["t_emu_ms"] + 10_500
        gone_at[name] = mine[2][0]
        limit = 1_000 if name in fetching_1 else 10_500
        assert marked["t_emu_ms"] < gone_at[name] < marked["t_emu_ms"] + limit
    triggers = {e["reason"] for e in at("rebalance_triggered") if "member" in e}
    assert "subscription has changed" in triggers

    # events-2 was assigned by the rebalance the pickup caused.
    claims_2 = at("ownership_claimed", topic="events-2")
    first_pickup = min(e["t_emu_ms"] for e in resolved if "events-2" in e["topics"])
    assert {e["partition"] for e in claims_2} == {0, 1}
    assert min(e["t_emu_ms"] for e in claims_2) > first_pickup

    # KAFKA-16235: the commit before the rebalance failed for events-1 until the
    # rebalance timeout; then events-1's partitions were revoked.
    failed = [e for e in at("commit_failed") if e["t_emu_ms"] > marked["t_emu_ms"]]
    assert failed and {e["reason"] for e in failed} == {"UNKNOWN_TOPIC_OR_PARTITION"}
    assert {e["member"] for e in failed} == fetching_1
    released_1 = [
        e
        for e in at("ownership_released", topic="events-1")
        if marked["t_emu_ms"] <= e["t_emu_ms"] < 60_000
    ]
    assert {e["partition"] for e in released_1} == {0, 1}
    for e in released_1:
        assert e["reason"] == "revoked"
        assert 15_000 <= e["t_emu_ms"] - gone_at[e["member"]] < 16_000
    kept = [
        e
        for e in at("ownership_released", topic="events-2")
        if marked["t_emu_ms"] <= e["t_emu_ms"] < 60_000
    ]
    assert (kept == []) is (protocol == "classic-cooperative")  # eager stops the world

    # Ownership at 60 s (before the members close): events-2's partitions once each.
    final = holders_at(60_000)
    assert set(final) == {("events-2", 0), ("events-2", 1)}
    assert all(len(h) == 1 for h in final.values())
    assert at("ownership_claimed", topic="other") == []
