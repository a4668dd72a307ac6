"""Metrics and plot frames on hand-built histories, every protocol; share groups' metrics."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from analysis.checkers import SharedFrames, run_checkers
from analysis.history import PROTOCOLS, H, frame
from analysis.metrics import (
    compute_metrics,
    fault_marks,
    ownership_intervals,
    rebalance_durations,
    throughput_lag,
)
from analysis.report import episodes_table, work_queue_table
from analysis.share import check_double_acquisition, share_series
from analysis.spark import sql_settings
from emulator.events import EventKind

pytestmark = [pytest.mark.spark]


def history(protocol: str) -> H:
    """Two members; c-1 joins at 100 (a 20 ms eager-style rebalance), c-1 is paused
    and crashes; a zombie overlap on t:1 of 50 ms."""
    h = H(protocol=protocol).run(0, 1000)
    h.produce("t", 0, 0, 100, at=10).produce("t", 1, 0, 100, at=1500 / 2)
    h.start("c-0", at=0).rebalance("c-0", 0, 10, ["t:0", "t:1"], zk_reads=6, zk_writes=2)
    h.assign("c-0", ["t:0", "t:1"], at=10)
    h.process("c-0", "t", 0, 0, 60, start=10, end=40).commit("c-0", "t", 0, 60, at=41)
    h.start("c-1", at=100).watch("c-0", at=100)
    h.trigger("c-0", at=100).revoke("c-0", ["t:0", "t:1"], at=100)
    h.rebalance("c-0", 100, 120, ["t:0"], zk_reads=6, zk_writes=2)
    h.rebalance("c-1", 100, 120, ["t:1"], attempts=2, zk_reads=8, zk_writes=4)
    h.assign("c-0", ["t:0"], at=120).assign("c-1", ["t:1"], at=120)
    h.process("c-0", "t", 0, 60, 100, start=120, end=200)
    h.fault("pause", "c-1", at=300, until=400)
    h.assign("c-0", ["t:1"], at=350)  # c-0 takes t:1 while c-1 still holds it
    h.process("c-1", "t", 1, 0, 50, start=750, end=800)
    h.process("c-0", "t", 1, 0, 100, start=760, end=900)
    h.crash("c-1", at=950)
    return h


SHARE, CONSUMER = "share@wq", "consumer@wq"
"""A share group and a consumer group on the same records, for the share metrics."""

EPISODES = "@episodes"
"""The episode histories ride along as series ``<protocol>@episodes``, as trials do."""


@pytest.fixture(scope="module")
def frames(spark: SparkSession) -> dict[str, Any]:

    hs: list[H | tuple[H, str]] = [history(p) for p in PROTOCOLS]
    hs += [(join_and_crash(p), p + EPISODES) for p in PROTOCOLS]
    hs += [(share_history(), SHARE), (consumer_history(), CONSUMER)]
    df = frame(spark, hs)
    # The plot frames reuse the intermediate frames compute_metrics materialized.
    shared = SharedFrames(df)
    compiled_before = _compiled(spark)
    anomalies = run_checkers(df, shared).persist()
    rows = _rows(anomalies)
    metrics = compute_metrics(df, anomalies, shared=shared)
    compiled = _compiled(spark) - compiled_before  # over the same work as the compiled test's
    anomalies.unpersist()
    return {
        "df": df,
        "compiled": compiled,
        "anomalies": rows,
        "metrics": metrics,
        "own": [r.asDict() for r in ownership_intervals(df, shared).collect()],
        "tl": [r.asDict() for r in throughput_lag(df, bucket_ms=500).collect()],
        "rd": [r.asDict() for r in rebalance_durations(df, shared=shared).collect()],
        "fm": [r.asDict() for r in fault_marks(df).collect()],
    }


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_metrics(frames: dict[str, Any], protocol: str) -> None:
    m = frames["metrics"][protocol]
    legacy = protocol == "zookeeper"
    assert m["produced"] == 200 and m["processed"] == 250
    assert m["duplicates"] == 50 and m["loss"] == 0
    assert sum(m["duplicates_by_cause"].values()) == 50 and m["loss_by_cause"] == {}
    assert m["rebalances"] == 3
    assert m["attempts"] == (4 if legacy else 0)
    assert m["retries"] == (1 if legacy else 0) and m["gave_up"] == 0
    assert m["zk_reads"] == (20 if legacy else 0) and m["zk_writes"] == (8 if legacy else 0)
    assert m["zk_watches"] == 1 and m["membership_changes"] == 3
    assert m["zk_ops_per_change"] == pytest.approx((28 if legacy else 0) / 3)
    # Group rebalances: the first join (0-10) and c-1's join (100-120).
    assert m["group_rebalances"] == 2
    assert m["rebalance_ms"]["max"] == 20.0 and m["rebalance_ms"]["p50"] == 15.0
    # No owner for t:0, t:1 from 0 to 10 and from 100 to 120 while c-0 lives (two
    # partitions, 30 ms each); t:1 after c-1's crash is still c-0's.
    assert m["stop_the_world_partition_s"] == pytest.approx(0.060)
    # c-0 owned nothing in both rebalances (10 + 20 ms); c-1 from its start at 100
    # to its assignment at 120.
    assert m["pause_ms"] == {"c-0": 30.0, "c-1": 20.0}
    assert m["pause_ms_total"] == 50.0 and m["pause_ms_max"] == 30.0
    assert m["double_ownership"] == {"count": 1, "total_ms": 600.0, "longest_ms": 600.0}
    assert m["double_processing"] == {"count": 1, "total_ms": 40.0, "longest_ms": 40.0}
    assert m["anomalies"]["duplicate"] == 1 and m["anomalies"]["loss"] == 0
    assert m["events"] == len(history(protocol).events())


def test_plot_frames(frames: dict[str, Any]) -> None:
    for p in PROTOCOLS:
        own = sorted(
            (r["member"], r["partition"], r["t_start_ms"], r["t_end_ms"])
            for r in frames["own"]
            if r["protocol"] == p
        )
        assert own == [
            ("c-0", 0, 10.0, 100.0),
            ("c-0", 0, 120.0, 1000.0),
            ("c-0", 1, 10.0, 100.0),
            ("c-0", 1, 350.0, 1000.0),
            ("c-1", 1, 120.0, 950.0),
        ]
        tl = sorted(
            (r["t_ms"], r["produced"], r["processed"], r["lag"])
            for r in frames["tl"]
            if r["protocol"] == p
        )
        # Processing counted each time: 250 processed for 200 produced; lag never < 0.
        assert tl == [(0.0, 100, 100, 0), (500.0, 100, 150, 0)]
        rd = sorted((r["t_ms"], r["duration_ms"]) for r in frames["rd"] if r["protocol"] == p)
        assert rd == [(0.0, 10.0), (100.0, 20.0)]
        fm = sorted(
            (r["t_ms"], r["reason"], r["member"]) for r in frames["fm"] if r["protocol"] == p
        )
        assert fm == [
            (300.0, "pause", "c-1"),
            (400.0, "pause cleared", "c-1"),
            (950.0, "consumer_crashed", "c-1"),
        ]


def join_and_crash(protocol: str) -> H:
    """c-0 forms the group, c-1 joins at 1 s (an eager-style move of t:1), c-1 crashes at
    3 s and c-0 takes t:1 back at 4 s; a skipped action opens no episode."""
    h = H(protocol=protocol).run(0, 6000)
    h.produce("t", 0, 0, 10, at=10).produce("t", 1, 0, 10, at=10)
    h.start("c-0", at=0).rebalance("c-0", 0, 100, ["t:0", "t:1"])
    h.assign("c-0", ["t:0", "t:1"], at=100)
    h.action("join", 1000, ["c-1"], index=0).start("c-1", at=1000)
    h.trigger("c-0", at=1000).revoke("c-0", ["t:0", "t:1"], at=1000)
    h.rebalance("c-0", 1000, 1200, ["t:0"]).rebalance("c-1", 1000, 1200, ["t:1"])
    h.assign("c-0", ["t:0"], at=1200).assign("c-1", ["t:1"], at=1200)
    h.action("network_partition", 2000, ["c-0"], index=1, skipped=True)
    h.action("crash", 3000, ["c-1"], index=2).crash("c-1", at=3000)
    h.trigger("c-0", at=3800).rebalance("c-0", 3800, 4000, ["t:0", "t:1"])
    h.assign("c-0", ["t:1"], at=4000)
    h.process("c-0", "t", 0, 0, 10, start=100, end=200)
    h.process("c-0", "t", 1, 0, 10, start=4000, end=4100)
    return h


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_episodes_from_events(frames: dict[str, Any], protocol: str) -> None:
    """The Spark side feeds the episode logic the run's changes, timeline and ownership."""
    eps = frames["metrics"][protocol + EPISODES]["episodes"]
    assert [e["kind"] for e in eps] == ["formation", "join", "crash"]
    form, join, crash = eps
    assert form["time_to_stable_ms"] == pytest.approx(100.0)
    assert join["time_to_stable_ms"] == pytest.approx(200.0)
    assert join["partitions_revoked"] == 2
    assert join["partitions_moved"] == 1 and join["revoked_without_need"] == 1
    assert join["partition_unavailable_s"] == pytest.approx(0.4)  # 2 partitions x 200 ms
    assert crash["time_to_stable_ms"] == pytest.approx(1000.0)
    assert crash["time_to_detect_ms"] == pytest.approx(800.0)  # c-0 told to rebalance
    assert crash["partitions_moved"] == 1 and crash["partitions_revoked"] == 0
    assert crash["partition_unavailable_s"] == pytest.approx(1.0)
    assert crash["window_end_ms"] == pytest.approx(6000.0)
    named = frames["metrics"][protocol + EPISODES]["kafka_metrics"]
    assert ("RebalanceRateAndTime.count" in named["client"]) == (protocol == "zookeeper")


# ------------------------------------------------------------- share groups


def share_history() -> H:
    """Two share members on t:0; on t:1 a double acquisition; on t:2 one that a
    leader change makes legitimate (the new leader starts from the persisted state);
    on t:3 a member crashes holding records, released when its session closes."""
    h = H(protocol="share").run(0, 200)
    h.produce("t", 0, 0, 10, at=0).produce("t", 1, 0, 2, at=0).produce("t", 2, 0, 1, at=0)
    h.start("c-0", at=0).start("c-1", at=0)
    h.assign("c-0", ["t:0", "t:1", "t:2"], at=5).assign("c-1", ["t:0", "t:1", "t:2"], at=5)
    # t:0: c-0 takes 0-4, c-1 5-9.
    h.share("c-0", "t", 0, 0, 5, "acquired", "acquire", at=10)
    h.share("c-1", "t", 0, 5, 10, "acquired", "acquire", at=10)
    h.process("c-0", "t", 0, 0, 5, start=10, end=50)
    h.share("c-0", "t", 0, 0, 4, "acknowledged", "accept", at=50)
    h.share("c-0", "t", 0, 4, 5, "available", "release", at=50)
    # c-1 is slow: its locks run out, c-0 takes 4-9 again while c-1 still works.
    h.share("c-1", "t", 0, 5, 10, "available", "lock_expiry", at=60)
    h.share("c-0", "t", 0, 4, 5, "acquired", "acquire", at=70, count=2, redelivery_of="release")
    h.share(
        "c-0", "t", 0, 5, 10, "acquired", "acquire", at=70, count=2, redelivery_of="lock_expiry"
    )
    h.process("c-1", "t", 0, 5, 10, start=10, end=100)
    h.process("c-0", "t", 0, 4, 10, start=70, end=120)
    h.share("c-0", "t", 0, 4, 9, "acknowledged", "accept", at=120)
    h.share("c-0", "t", 0, 9, 10, "archived", "reject", at=120)
    h.produce("t", 0, 10, 12, at=130)  # never fetched
    # t:1: acquired by c-1 while c-0 still holds it.
    h.share("c-0", "t", 1, 0, 2, "acquired", "acquire", at=10)
    h.share("c-1", "t", 1, 0, 2, "acquired", "acquire", at=20)
    # t:2: the same, but a new leader in between.
    h.share("c-0", "t", 2, 0, 1, "acquired", "acquire", at=10)
    h.event(
        EventKind.LEADER_CHANGED,
        15,
        "broker-1",
        topic="t",
        partition=2,
        broker=1,
        generation=2,
        reason="failover",
    )
    h.share("c-1", "t", 2, 0, 1, "acquired", "acquire", at=20, broker=1)
    # t:3: c-2 crashes holding 0-1; its dropped connection closes its share session.
    h.produce("t", 3, 0, 2, at=0).start("c-2", at=0).assign("c-2", ["t:3"], at=5)
    h.share("c-2", "t", 3, 0, 2, "acquired", "acquire", at=10)
    h.crash("c-2", at=20)
    h.share("c-2", "t", 3, 0, 2, "available", "session_close", at=20, count=0)
    h.share("c-0", "t", 3, 0, 2, "acquired", "acquire", at=30, redelivery_of="session_close")
    return h


def consumer_history() -> H:
    """A consumer group on the same records: one member, one duplicate."""
    h = H(protocol="consumer").run(0, 200)
    h.produce("t", 0, 0, 10, at=0)
    h.start("c-0", at=0).assign("c-0", ["t:0"], at=5)
    h.process("c-0", "t", 0, 0, 10, start=5, end=105)
    h.process("c-0", "t", 0, 9, 10, start=105, end=115)
    return h


def test_a_record_acquired_while_held_is_a_double_acquisition(frames: dict[str, Any]) -> None:
    rows = [r.asDict() for r in check_double_acquisition(frames["df"]).collect()]
    rows = [r for r in rows if r["protocol"] == SHARE]
    assert [(r["partition"], r["offset_start"]) for r in rows] == [(1, 0), (1, 1)]
    assert {(r["member"], r["other_member"], r["allowed"]) for r in rows} == {
        ("c-1-id", "c-0-id", False)
    }
    assert frames["metrics"][SHARE]["anomalies"]["double_acquisition"] == 2
    assert frames["metrics"][SHARE]["anomalies_not_allowed"] >= 2


def test_an_acquisition_after_a_lock_expiry_or_release_is_not_one(spark: SparkSession) -> None:
    h = H(protocol="share").run(0, 100)
    h.produce("t", 0, 0, 2, at=0)
    h.share("c-0", "t", 0, 0, 2, "acquired", "acquire", at=1)
    h.share("c-0", "t", 0, 0, 2, "available", "lock_expiry", at=2)
    h.share("c-1", "t", 0, 0, 2, "acquired", "acquire", at=2, count=2, redelivery_of="x")
    assert check_double_acquisition(h.df(spark)).count() == 0


def test_record_fates_add_up_and_redeliveries_have_causes(frames: dict[str, Any]) -> None:
    m = frames["metrics"][SHARE]["share"]
    assert m["deliveries"] == 16 + 4 + 2 + 4
    assert m["redeliveries"] == 8
    assert m["redeliveries_by_cause"] == {"release": 1, "lock_expiry": 5, "session_close": 2}
    assert m["redeliveries_after_crash"] == 2  # c-2's, not c-1's (alive when its locks ran out)
    assert (m["acknowledged"], m["archived"], m["archived_by_cause"]) == (9, 1, {"reject": 1})
    assert (m["lock_expiries"], m["released"]) == (5, 1 + 2)  # c-0's release, c-2's close
    assert m["produced"] == 17
    assert m["fates"] == {"acknowledged": 9, "archived": 1, "in_flight": 5, "never_delivered": 2}
    assert sum(m["fates"].values()) == m["produced"]
    assert m["ack_latency_ms"] == {"count": 9, "p50": 120.0, "p99": 120.0, "max": 120.0}
    assert "share" not in frames["metrics"][CONSUMER]


def test_the_work_queue_counts_both_groups_alike(frames: dict[str, Any]) -> None:
    share, consumer = (frames["metrics"][p]["work_queue"] for p in (SHARE, CONSUMER))
    assert (share["records"], share["processed_records"], share["never_processed"]) == (17, 10, 7)
    assert share["processed_again"] == 6  # 4 by c-0 twice, 5-9 by c-1 and c-0
    assert share["latency_ms"]["max"] == 100.0  # offsets 5-9: produced at 0, c-1 done at 100
    assert (consumer["records"], consumer["processed_again"]) == (10, 1)
    assert consumer["latency_ms"] == {"count": 10, "p50": 105.0, "p99": 105.0, "max": 105.0}
    table = work_queue_table(frames["metrics"], [CONSUMER, SHARE])
    assert table.loc["share: redelivered after lock expiry", SHARE] == "5"
    assert table.loc["share: redelivered after lock expiry", CONSUMER] == "-"
    assert table.loc["processed again", CONSUMER] == "1"


def test_episodes_count_the_share_records_in_their_window(frames: dict[str, Any]) -> None:
    (formation,) = frames["metrics"][SHARE]["episodes"]
    assert formation["share_redeliveries"] == 8
    assert formation["share_redeliveries_by_cause"] == {
        "lock_expiry": 5,
        "release": 1,
        "session_close": 2,
    }
    assert (formation["share_acknowledged"], formation["share_archived"]) == (9, 1)
    assert formation["share_lock_expiries"] == 5
    assert formation["share_ack_latency_max_ms"] == 120.0
    assert formation["share_ack_latency_mean_ms"] == pytest.approx((4 * 50 + 5 * 120) / 9)
    (cformation,) = frames["metrics"][CONSUMER]["episodes"]
    assert cformation["share_redeliveries"] is None
    table = episodes_table(frames["metrics"], [CONSUMER, SHARE])
    assert list(table[table["protocol"] == SHARE]["share redelivered"]) == ["8"]


def test_only_share_series_are_share_groups(frames: dict[str, Any]) -> None:
    """Reports without a share series get no work-queue section (and the checkers and
    metrics compute nothing of it: both go by :func:`share_series`)."""
    assert share_series(["consumer", "share@t1", "zookeeper", "share"]) == ["share", "share@t1"]
    assert work_queue_table({CONSUMER: frames["metrics"][CONSUMER]}, [CONSUMER]).empty


def _window_plan_over_batches(sh: SharedFrames) -> str:
    """The physical plan of a window over ``sh.batches`` by partition, above its table."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from analysis.frames import TP

    w = Window.partitionBy(*TP).orderBy("t0")
    df = sh.batches.withColumn("_prev", F.lag("t1").over(w))
    plan: str = df._jdf.queryExecution().executedPlan().toString()
    return plan.split("InMemoryRelation")[0].split("Scan ExistingRDD")[0]


def _compiled(spark: SparkSession) -> int:
    """How many classes Spark's code generator has compiled in this JVM so far."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    metrics = jvm.org.apache.spark.metrics.source.CodegenMetrics
    return int(metrics.METRIC_COMPILATION_TIME().getCount())


def _rows(df: DataFrame) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in df.collect()), key=repr)


def test_persisted_shared_frames_compiled_keep_their_partitioning_and_give_the_same_results(
    spark: SparkSession, frames: dict[str, Any]
) -> None:
    """``SharedFrames(persist=True)`` (what compare and experiments use) with Spark's
    compiled evaluation (what they use above ``INTERPRETED_MAX_EVENTS``): the same
    anomalies and metrics as the checkpointed frames evaluated interpreted (the
    session's setting, what small inputs get); a window by partition over the
    processed batches reads them without a shuffle (a checkpoint needs one);
    ``release`` frees them."""
    df = frames["df"]
    assert spark.conf.get("spark.sql.codegen.factoryMode") == "NO_CODEGEN"
    assert "Exchange" in _window_plan_over_batches(SharedFrames(df))
    sh = SharedFrames(df, persist=True)
    compiled_before = _compiled(spark)
    compiled = {
        "spark.sql.codegen.wholeStage": "true",
        "spark.sql.codegen.factoryMode": "CODEGEN_ONLY",
    }
    try:
        with sql_settings(spark, compiled):
            anomalies = run_checkers(df, sh).persist()
            assert _rows(anomalies) == frames["anomalies"]
            assert compute_metrics(df, anomalies, shared=sh) == frames["metrics"]
            compiled_now = _compiled(spark)
            anomalies.unpersist()
        # Spark generated and compiled Java for every plan here; interpreted, only for
        # a few of its own helpers (cached tables' column accessors)
        assert compiled_now - compiled_before > 10 * max(frames["compiled"], 1)
        batches = sh.batches
        assert batches.storageLevel.useMemory
        assert "Exchange" not in _window_plan_over_batches(sh)
    finally:
        sh.release()
    assert not batches.storageLevel.useMemory and not batches.storageLevel.useDisk
