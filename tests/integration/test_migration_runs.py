"""Online migration end to end (issue 20): the bundled scenarios on the sim engine,
their analysis on a real local Spark, and a short rolling upgrade on a real local
Ray with a real ZooKeeper.

The sim runs take seconds and are deterministic, so they carry the protocol
assertions: when the group converts and why, what the members speak at the end,
that static members keep their partitions across the switch. The real run checks
that the same road works between Ray actors: the brokers host a group that
converts, and each member comes back speaking the other protocol.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from emulator.eventlog import ReadStats, read_run_events
from emulator.events import validate_event
from emulator.scenario import Scenario, bundled_scenarios, load_scenario, parse_scenario

Event = dict[str, Any]
SCENARIOS = ("upgrade-rolling", "upgrade-rolling-static", "downgrade-rollback")
PROTOCOL = "classic-eager"  # the protocol each starts on


@pytest.fixture(scope="module")
def sim_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Scenario, Path]]:
    from actors.orchestrator import run_scenario
    from actors.sim.run import SimEngine

    out: dict[str, tuple[Scenario, Path]] = {}
    for name in SCENARIOS:
        scenario = load_scenario(bundled_scenarios()[name])
        run = tmp_path_factory.mktemp(name) / "run"
        run_scenario(scenario, [PROTOCOL], run, validate_events=True, engine=SimEngine())
        out[name] = (scenario, run)
    return out


def _events(out: Path, protocol: str = PROTOCOL) -> list[Event]:
    stats = ReadStats()
    events = list(read_run_events(out / protocol / "events", stats))
    assert stats.truncated_tail_bytes == 0
    for ev in events:
        validate_event(ev)
    return sorted(events, key=lambda e: float(e["t_emu_ms"]))


def _last_protocols(events: list[Event]) -> dict[str, str]:
    """Each member's protocol at its last start (the run's when not given)."""
    out: dict[str, str] = {}
    for e in events:
        if e["kind"] == "consumer_started":
            out[str(e["member"])] = str(e.get("member_protocol") or "classic")
    return out


def _conversions(events: list[Event]) -> list[tuple[str, str, str]]:
    return [
        (str(e["direction"]), str(e["reason"]), str(e["state"]))
        for e in events
        if e["kind"] == "group_converted"
    ]


def _completed(out: Path) -> dict[str, Any]:
    manifest = json.loads((out / "manifest.json").read_text())
    entry: dict[str, Any] = manifest["protocols"][PROTOCOL]
    assert entry["status"] == "completed"
    return entry


def test_rolling_upgrade_converts_once_and_ends_all_consumer(
    sim_runs: dict[str, tuple[Scenario, Path]],
) -> None:
    scenario, out = sim_runs["upgrade-rolling"]
    entry = _completed(out)
    events = _events(out)
    first = min(a.at_s for a in scenario.action_plan() if a.action == "upgrade")
    conv = [e for e in events if e["kind"] == "group_converted"]
    # GroupMetadataManager converts on the first consumer-protocol heartbeat:
    # one online upgrade, right after the first member came back (2 s down).
    assert _conversions(events) == [("upgrade", "consumer_member_joined", "online")]
    assert first * 1000 < float(conv[0]["t_emu_ms"]) < (first + 5) * 1000
    assert set(_last_protocols(events).values()) == {"consumer"}
    assert entry["counts"]["unprocessed"] == 0, entry["counts"]["partitions_unprocessed"]


def test_static_members_take_their_classic_selves_place(
    sim_runs: dict[str, tuple[Scenario, Path]],
) -> None:
    _scenario, out = sim_runs["upgrade-rolling-static"]
    _completed(out)
    events = _events(out)
    assert _conversions(events) == [("upgrade", "consumer_member_joined", "online")]
    conv_ms = float(next(e for e in events if e["kind"] == "group_converted")["t_emu_ms"])
    # From 4.0 (KAFKA-17228) each switching static member replaces its classic
    # self at once (replaceMember), the converting one included ...
    replaced = [
        e for e in events if e["kind"] == "member_removed" and e["reason"] == "static_replace"
    ]
    assert len(replaced) == 10
    # ... so the classic members rejoin once, for the epoch the converting
    # heartbeat bumps (its subscription metadata is the group's first), and not
    # for any later switch.
    rejoins = [
        float(e["t_emu_ms"])
        for e in events
        if e["kind"] == "rebalance_started" and not e.get("member_protocol") and e.get("member")
    ]
    late = [t for t in rejoins if t > conv_ms + 5_000]
    assert rejoins and not late
    assert set(_last_protocols(events).values()) == {"consumer"}


def test_rollback_downgrades_when_the_last_consumer_member_leaves(
    sim_runs: dict[str, tuple[Scenario, Path]],
) -> None:
    scenario, out = sim_runs["downgrade-rollback"]
    _completed(out)
    events = _events(out)
    assert _conversions(events) == [
        ("upgrade", "consumer_member_joined", "online"),
        ("downgrade", "leave", "online"),
    ]
    last_back = max(
        a.at_s for a in scenario.action_plan() if a.action == "upgrade" and a.to == "classic"
    )
    down = [e for e in events if e["kind"] == "group_converted"][-1]
    assert last_back * 1000 <= float(down["t_emu_ms"]) < (last_back + 1) * 1000
    assert set(_last_protocols(events).values()) == {"classic"}
    # The downgrade prepares a rebalance of the classic group at once.
    prepared = [
        e
        for e in events
        if e["kind"] == "rebalance_started"
        and not e.get("member")
        and float(e["t_emu_ms"]) >= float(down["t_emu_ms"])
    ]
    assert prepared and "Downgrade" in str(prepared[0]["reason"])


MIXED = """
name = "mixed-start"
seed = 7
duration_s = 60.0
kafka_version = "4.0"

[[topics]]
name = "orders"
partitions = 12

[producer]
rate_per_s = 100.0

[group]
consumers = 6
mixed = { to = "consumer", members = 3 }

[kafka]
"auto.offset.reset" = "smallest"

[[timeline]]
at_s = 20.0
action = "upgrade"
members = ["c-3", "c-4", "c-5"]
to = "consumer"
interval_s = 8.0
downtime_s = 1.0
"""


def test_a_group_that_starts_mixed(tmp_path: Path) -> None:
    from actors.orchestrator import run_scenario
    from actors.sim.run import SimEngine

    scenario = parse_scenario(MIXED, "mixed-start.toml")
    run_scenario(scenario, [PROTOCOL], tmp_path, validate_events=True, engine=SimEngine())
    entry = _completed(tmp_path)
    events = _events(tmp_path)
    first: dict[str, str] = {}
    for e in events:
        if e["kind"] == "consumer_started":
            first.setdefault(str(e["member"]), str(e.get("member_protocol") or "classic"))
    assert first == {f"c-{i}": "consumer" if i < 3 else "classic" for i in range(6)}
    # Every member owned partitions in the mixed group, whatever it spoke.
    owners = {str(e["member"]) for e in events if e["kind"] == "partitions_assigned"}
    assert owners == set(first)
    assert set(_last_protocols(events).values()) == {"consumer"}
    assert entry["counts"]["unprocessed"] == 0, entry["counts"]["partitions_unprocessed"]


@pytest.mark.spark
def test_the_analysis_measures_the_mixed_window_and_judges_by_both_protocols(
    spark: SparkSession, sim_runs: dict[str, tuple[Scenario, Path]]
) -> None:
    from pyspark.sql import functions as F

    from analysis.checkers import ANOMALY_SCHEMA, SharedFrames, first_conversions, mark_allowed
    from analysis.datasource import load_events
    from analysis.metrics import rebalance_durations
    from analysis.migration import migration_metrics, migration_series

    _scenario, out = sim_runs["downgrade-rollback"]
    events = load_events(spark, out).events
    sh = SharedFrames(events)
    # compute_metrics passes its own unsettled spans and the checkers' rows; the
    # same spans from the public rebalance durations, and no anomaly rows, keep
    # this test to the few stages the migration metrics need.
    unsettled = rebalance_durations(events, shared=sh).select(
        "protocol", F.col("t_ms").alias("s"), (F.col("t_ms") + F.col("duration_ms")).alias("e")
    )
    none = spark.createDataFrame([], ANOMALY_SCHEMA)
    series = migration_series(sh.control, sh.conversions)
    mig = migration_metrics(events, series, sh.intervals, unsettled, none)[PROTOCOL]
    assert [c["direction"] for c in mig["conversions"]] == ["upgrade", "downgrade"]
    up, down = (float(c["t_ms"]) for c in mig["conversions"])
    # Mixed from the first consumer member's start to the last one's stop,
    # which is what triggered the downgrade.
    assert mig["mixed_from_ms"] <= up < mig["mixed_from_ms"] + 1_000
    assert down - 1_000 < mig["mixed_to_ms"] <= down
    assert mig["switched"] == 5 and all(len(s) == 2 for s in mig["switches"].values())
    assert all(
        s["out_of_work_ms"] is not None and s["out_of_work_ms"] >= 2_000
        for sws in mig["switches"].values()
        for s in sws
    )
    assert mig["conversion_rebalances"] >= 1
    # An eager classic group may show consumer-group anomalies only once it held a
    # consumer member: the same invalid assignment is judged both ways.
    conversions = first_conversions(events)
    assert conversions == sh.conversions  # the control frame holds what it needs
    assert mig["mixed_from_ms"] <= conversions[PROTOCOL] <= up
    rows = spark.createDataFrame(
        [
            (PROTOCOL, "invalid_assignment", conversions[PROTOCOL] - 1.0),
            (PROTOCOL, "invalid_assignment", conversions[PROTOCOL]),
        ],
        "protocol string, kind string, t_start_ms double",
    )
    judged = mark_allowed(rows, {}, conversions).orderBy("t_start_ms").collect()
    assert [r["allowed"] for r in judged] == [False, True]


REAL = """
name = "upgrade-small"
seed = 5
duration_s = 18.0
kafka_version = "4.0"

[cluster]
brokers = 1
zookeeper_ensemble = 1

[[topics]]
name = "orders"
partitions = 6
replication_factor = 1

[producer]
rate_per_s = 60.0

[group]
consumers = 3

[kafka]
"auto.offset.reset" = "smallest"

[[timeline]]
at_s = 7.0
action = "upgrade"
members = "all"
to = "consumer"
interval_s = 2.5
downtime_s = 0.5
"""


@pytest.fixture(scope="module")
def real_run(ray_local: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    from actors.orchestrator import run_scenario

    # The switches start after the group formed: a consumer member that finds the
    # classic group in its first rebalance (no protocol chosen yet) is refused
    # with UNKNOWN_SERVER_ERROR, fatal to it (the README's emulator choices).
    scenario = parse_scenario(REAL, "upgrade-small.toml")
    out = tmp_path_factory.mktemp("upgrade-real") / "run"
    run_scenario(scenario, [PROTOCOL], out, validate_events=True)
    yield out


@pytest.mark.ray
@pytest.mark.zk
@pytest.mark.slow
def test_a_rolling_upgrade_between_ray_actors(real_run: Path) -> None:
    entry = _completed(real_run)
    events = _events(real_run)
    assert _conversions(events) == [("upgrade", "consumer_member_joined", "online")]
    assert set(_last_protocols(events).values()) == {"consumer"}
    # Each member owned partitions again after its switch.
    back = {
        str(e["member"])
        for e in events
        if e["kind"] == "partitions_assigned" and e.get("member_protocol") == "consumer"
    }
    assert back == {"c-0", "c-1", "c-2"}
    assert entry["counts"]["produced"] > 0
