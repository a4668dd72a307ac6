"""A KIP-848 group subscribed by regex while topics come and go, a whole run on the sim engine.

Kafka 4.1, ``group.protocol=consumer``, ``[group].topic_pattern = "t-.*"``: the
members send ``SubscribedTopicRegex`` and the coordinator resolves it in its
executor (issue-19 facts C2); a created matching topic is picked up at the first
heartbeat more than 10 s after the last resolution, then assigned at the next
one; a deleted topic leaves the subscription metadata at the next heartbeat and
its partitions are revoked (C3-C5). The run checks the coordinator's events, the
members' revocations and the final ownership. Auto-creation is off: with it, the
producer's metadata requests bring ``t-b`` back (one partition, part 2's
cluster) and the group, whose resolution still names ``t-b``, is assigned it again.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from actors.orchestrator import run_scenario
from actors.sim.run import SimEngine
from emulator.eventlog import read_run_events
from emulator.scenario import load_scenario

SCENARIO = """
name = "sim-kip848-regex"
description = "a regex group: t-c created at 8 s, t-b deleted at 30 s"
seed = 5
duration_s = 50.0
time_scale = 0.5
kafka_version = "4.1"

[cluster]
brokers = 2
zookeeper_ensemble = 1

[[topics]]
name = "t-a"
partitions = 2
replication_factor = 2

[[topics]]
name = "t-b"
partitions = 2
replication_factor = 2

[[topics]]
name = "other"
partitions = 2
replication_factor = 2

[producer]
rate_per_s = 20.0
topics = ["t-a", "t-b"]

[group]
id = "regex-group"
consumers = 2
topic_pattern = "t-.*"
processing_ms_per_message = 1.0

[kafka]
"auto.offset.reset" = "smallest"
"delete.topic.enable" = true
"auto.create.topics.enable" = false

[[timeline]]
at_s = 8.0
action = "create_topic"
topic = "t-c"
partitions = 2
replication_factor = 2

[[timeline]]
at_s = 30.0
action = "delete_topic"
topic = "t-b"
"""


def test_a_regex_group_picks_up_a_created_topic_and_drops_a_deleted_one(tmp_path: Path) -> None:
    path = tmp_path / "sim-kip848-regex.toml"
    path.write_text(SCENARIO)
    [result] = run_scenario(load_scenario(path), ["consumer"], tmp_path / "run", engine=SimEngine())
    assert result.status == "completed", result.notes
    events: list[dict[str, Any]] = [
        dict(e) for e in read_run_events(tmp_path / "run" / "consumer" / "events")
    ]

    def at(kind: str, **match: object) -> list[dict[str, Any]]:
        return [
            e for e in events if e["kind"] == kind and all(e.get(k) == v for k, v in match.items())
        ]

    (created,) = at("topic_created", topic="t-c")
    (deleted,) = at("topic_deleted", topic="t-b")

    # The coordinator resolved the regex: first on the members' joins, then for t-c.
    resolved = at("topic_pattern_resolved", pattern="t-.*")
    assert all(str(e["actor"]).startswith("broker-") and e["broker"] >= 0 for e in resolved)
    assert resolved[0]["topics"] == "t-a,t-b" and resolved[0]["reason"] == "new_regex"
    with_c = [e for e in resolved if "t-c" in e["topics"]]
    assert with_c, resolved
    first_c = with_c[0]
    assert first_c["reason"] == "new_topics" and first_c["topics"] == "t-a,t-b,t-c"
    # Not within 10 s of the previous resolution; after the topic existed.
    before = [e for e in resolved if e["t_emu_ms"] < first_c["t_emu_ms"]]
    assert first_c["t_emu_ms"] > before[-1]["t_emu_ms"] + 10_000
    assert first_c["t_emu_ms"] > created["t_emu_ms"]
    # The resolution bumped the group epoch (reason regex_resolved).
    bumps = at("group_state_changed", reason="regex_resolved")
    assert any(e["t_emu_ms"] == first_c["t_emu_ms"] for e in bumps)

    # t-c's partitions were claimed after that resolution; t-b's released after its deletion.
    claims_c = at("ownership_claimed", topic="t-c")
    assert claims_c and min(e["t_emu_ms"] for e in claims_c) > first_c["t_emu_ms"]
    released_b = [
        e for e in at("ownership_released", topic="t-b") if e["t_emu_ms"] >= deleted["t_emu_ms"]
    ]
    assert {e["partition"] for e in released_b} == {0, 1}
    assert all(e["reason"] == "revoked" for e in released_b)  # a reconciliation, no fencing
    assert [e["reason"] for e in at("member_removed")] == ["leave", "leave"]  # at the end
    # The commit before the revocation failed for t-b and was not retried for long.
    for e in released_b:
        assert e["t_emu_ms"] - deleted["t_emu_ms"] < 10_000

    # Ownership at 45 s (before the members close): every partition of t-a and t-c
    # exactly once, nothing else.
    holders: dict[tuple[str, int], set[str]] = defaultdict(set)
    for e in sorted(events, key=lambda e: float(e["t_emu_ms"])):
        if e["t_emu_ms"] > 45_000:
            break
        tp = (str(e.get("topic")), int(e.get("partition") or 0))
        if e["kind"] == "ownership_claimed":
            holders[tp].add(str(e["member"]))
        elif e["kind"] == "ownership_released":
            holders[tp].discard(str(e["member"]))
    final = {tp: h for tp, h in holders.items() if h}
    assert set(final) == {("t-a", 0), ("t-a", 1), ("t-c", 0), ("t-c", 1)}
    assert all(len(h) == 1 for h in final.values())
    # "other" never matched.
    assert at("ownership_claimed", topic="other") == []
