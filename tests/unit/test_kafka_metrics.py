"""Kafka's metric names from hand-built rebalance steps (analysis.kafka_metrics, no Spark)."""

from __future__ import annotations

import json

import pytest

from analysis.kafka_metrics import GroupState, Step, kafka_metrics


def test_classic_latency_join_sync_and_failures() -> None:
    steps = [
        Step("c-0", "started", 100),
        Step("c-1", "started", 120),
        Step(
            "c-0", "completed", 3100, 3000.0, json.dumps({"join_ms": [40, 2900], "sync_ms": [30]})
        ),
        Step("c-1", "completed", 3100, 2980.0, json.dumps({"join_ms": [2950], "sync_ms": [20]})),
        Step("c-0", "started", 20_000),
        Step("c-0", "completed", 21_000, 1000.0, json.dumps({"join_ms": [900], "sync_ms": [50]})),
    ]
    states = [
        GroupState(90, "Empty", 0),
        GroupState(110, "PreparingRebalance", 0),
        GroupState(3000, "CompletingRebalance", 1),
        GroupState(3090, "Stable", 1),
        GroupState(20_010, "PreparingRebalance", 1),
        GroupState(20_900, "CompletingRebalance", 2),
        GroupState(20_950, "Stable", 2),
    ]
    m = kafka_metrics(
        "classic-eager", steps, 2, states, {"c-0": 3, "c-1": 3}, t_start=0.0, t_end=36_000.0
    )
    c = m["client"]
    assert c["rebalance-total"] == 3
    assert c["rebalance-latency-avg"] == pytest.approx((3000 + 2980 + 1000) / 3)
    assert c["rebalance-latency-max"] == 3000.0
    assert c["rebalance-latency-total"] == 6980.0
    assert c["failed-rebalance-total"] == 2  # the two MEMBER_ID_REQUIRED answers
    assert c["rebalance-rate-per-hour"] == pytest.approx(3 * 100.0)  # 3 in 36 s
    assert c["join-total"] == 4 and c["join-time-max"] == 2950.0
    assert c["join-time-avg"] == pytest.approx((40 + 2900 + 2950 + 900) / 4)
    assert c["sync-time-avg"] == pytest.approx(100 / 3) and c["sync-time-max"] == 50.0
    assert c["last-rebalance-seconds-ago"] == {"min": 15.0, "max": 32.9}
    assert c["assigned-partitions"] == {"c-0": 3, "c-1": 3}
    co = m["coordinator"]
    assert co["group-completed-rebalance-count"] == 2
    assert co["NumGroups.seconds_by_state"]["Stable"] == pytest.approx(
        (20_010 - 3090 + 36_000 - 20_950) / 1000
    )


def test_kip848_counts_reconciliations_and_fatal_heartbeats_mid_reconciliation() -> None:
    steps = [
        Step("c-0", "started", 1000),
        Step("c-0", "started", 1500),  # a new target: the clock restarts, no failure
        Step("c-0", "completed", 2500),
        Step("c-1", "started", 5000),
        Step("c-1", "fatal", 5200),  # FENCED_MEMBER_EPOCH while reconciling: a failure
        Step("c-1", "fatal", 9000),  # not reconciling: not counted
        Step("c-1", "started", 9100),
        Step("c-1", "completed", 9600),
    ]
    states = [
        GroupState(900, "Assigning", 1, "join"),
        GroupState(1000, "Reconciling", 1, "heartbeat"),
        GroupState(2600, "Stable", 1, "heartbeat"),
        GroupState(4900, "Reconciling", 2, "join"),
        GroupState(8000, "Reconciling", 3, "session_timeout"),
        GroupState(9700, "Stable", 3, "heartbeat"),
    ]
    m = kafka_metrics("consumer", steps, 0, states, {"c-0": 2}, t_start=0.0, t_end=10_000.0)
    c = m["client"]
    assert c["rebalance-total"] == 2
    assert c["rebalance-latency-avg"] == pytest.approx((1000 + 500) / 2)
    assert c["failed-rebalance-total"] == 1
    assert "join-time-avg" not in c and "assigned-partitions" not in c
    co = m["coordinator"]
    assert co["consumer-group-rebalance-count"] == 1  # the join's bump; not the expiry's
    assert co["consumer-group-count.seconds_by_state"]["reconciling"] == pytest.approx(
        1.6 + 3.1 + 1.7
    )


def test_legacy_rebalance_rate_and_time_per_synced_rebalance() -> None:
    steps = [
        Step("c-0", "started", 0),
        Step("c-0", "completed", 600),
        Step("c-1", "started", 100),
        Step("c-1", "failed", 9100),  # gave up after its retries: still one sample
    ]
    m = kafka_metrics("zookeeper", steps, 0, [], {"c-0": 4}, t_start=0.0, t_end=60_000.0)
    c = m["client"]
    assert c["RebalanceRateAndTime.count"] == 2
    assert c["RebalanceRateAndTime.mean_ms"] == pytest.approx(4800.0)
    assert c["RebalanceRateAndTime.max_ms"] == 9000.0
    assert c["OwnedPartitionsCount"] == {"c-0": 4}
    assert m["coordinator"] is None
