"""The checkers and metrics on hand-built histories of topics created and deleted (analysis.topics).

Each history is its own series (``<protocol>@<name>``, as an experiment's trials
are), every protocol, all through one :class:`SharedFrames` at once:

* ``recreate``: topic ``t`` is deleted and created again; both incarnations
  have offsets [0, 10), each processed once: no duplicate, no loss (before the
  incarnation keys, [0, 10) was a duplicate).
* ``gone``: topic ``d`` is deleted with [60, 100) never processed and a gap
  [30, 40) skipped before it; its owner commits after the deletion.
* ``holder``: topic ``z`` is deleted; c-0 never lets go of z:0 and finishes a
  batch after the deletion, c-1 releases z:1 and idles, c-2 claims z:0 after
  the deletion.
* ``discovery``: topic ``n`` is created at 1 s and claimed at 1.6 s, deleted at
  3 s and let go at 3.2 s (the per-episode topic metrics).
"""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from analysis.checkers import SharedFrames, run_checkers, topic_observations
from analysis.history import H, frame
from analysis.metrics import compute_metrics, ownership_intervals
from analysis.topics import (
    COMMITS_DELETED_PARTITION,
    DELETED_WITH_TOPIC,
    OWNS_DELETED_PARTITION,
    PROCESSES_DELETED_PARTITION,
    Incarnations,
)
from emulator.anomalies import COMMIT_BY_NON_OWNER, LOSS

pytestmark = [pytest.mark.spark]

PROTOCOLS = ("zookeeper", "classic-eager", "consumer")
"""The three kinds of ownership events and allowed tables (0.8 znodes, the classic
callbacks, KIP-848's); classic-cooperative logs as classic-eager does. Three, not
all four, to keep the suite's Spark time down."""


def recreate(protocol: str) -> H:
    """``t`` deleted at 110 (c-0 let go at 105, as a KIP-848 member told by the
    metadata before the deletion completes) and created again at 210; c-0 takes the new
    incarnation at 220 after a rebalance; both hold offsets [0, 10)."""
    h = H(protocol=protocol, group="recreate").run(0, 1000)
    h.produce("t", 0, 0, 10, at=5).start("c-0", at=0)
    h.rebalance("c-0", 1, 10, ["t:0"]).assign("c-0", ["t:0"], at=10)
    h.process("c-0", "t", 0, 0, 10, start=10, end=20).commit("c-0", "t", 0, 10, at=21)
    h.topic_action("delete_topic", "t", at=100, index=0)
    h.trigger("c-0", at=104).revoke("c-0", ["t:0"], at=105).topic_deleted("t", at=110)
    h.topic_action("create_topic", "t", at=200, index=1, partitions=1)
    h.topic_created("t", at=210, incarnation=2).rebalance("c-0", 210, 220, ["t:0"])
    h.assign("c-0", ["t:0"], at=220).produce("t", 0, 0, 10, at=230)
    h.process("c-0", "t", 0, 0, 10, start=240, end=250).commit("c-0", "t", 0, 10, at=251)
    return h


def gone(protocol: str) -> H:
    """``d`` deleted at 110 with [60, 100) unprocessed; [30, 40) skipped before it."""
    h = H(protocol=protocol, group="gone").run(0, 1000)
    h.produce("d", 0, 0, 100, at=5).start("c-0", at=0)
    h.rebalance("c-0", 1, 10, ["d:0"]).assign("c-0", ["d:0"], at=10)
    h.process("c-0", "d", 0, 0, 30, start=10, end=20)
    h.process("c-0", "d", 0, 40, 60, start=30, end=40)
    h.topic_action("delete_topic", "d", at=100, index=0).topic_deleted("d", at=110)
    h.commit("c-0", "d", 0, 60, at=130)  # stored after the deletion
    return h.trigger("c-0", at=145).revoke("c-0", ["d:0"], at=150)


def holder(protocol: str) -> H:
    """``z`` deleted at 100: c-0 never releases z:0 (a batch in hand until 105), c-1
    releases z:1 at 120 and idles, c-2 claims z:0 at 300 and releases it at 400."""
    h = H(protocol=protocol, group="holder").run(0, 1000)
    h.produce("z", 0, 0, 60, at=5).produce("z", 1, 0, 10, at=5)
    for m in ("c-0", "c-1", "c-2"):
        h.start(m, at=0)
    h.rebalance("c-0", 1, 10, ["z:0"]).rebalance("c-1", 1, 10, ["z:1"])
    h.rebalance("c-2", 1, 10, [])
    h.assign("c-0", ["z:0"], at=10).assign("c-1", ["z:1"], at=10)
    h.process("c-0", "z", 0, 0, 50, start=10, end=20)
    h.process("c-1", "z", 1, 0, 10, start=10, end=20)
    h.topic_action("delete_topic", "z", at=90, index=0).topic_deleted("z", at=100)
    h.process("c-0", "z", 0, 50, 60, start=95, end=105)
    h.revoke("c-1", ["z:1"], at=120)
    return h.assign("c-2", ["z:0"], at=300).revoke("c-2", ["z:0"], at=400)


def discovery(protocol: str) -> H:
    """c-0 owns e:0; ``n`` is created at 1010 and claimed at 1600 after a rebalance from
    1500, deleted at 3010 and revoked at 3200 after a rebalance from 3100."""
    h = H(protocol=protocol, group="discovery").run(0, 6000)
    h.produce("e", 0, 0, 10, at=5).start("c-0", at=0)
    h.rebalance("c-0", 0, 10, ["e:0"]).assign("c-0", ["e:0"], at=10)
    h.process("c-0", "e", 0, 0, 10, start=10, end=20)
    h.topic_action("create_topic", "n", at=1000, index=0, partitions=1)
    h.topic_created("n", at=1010).produce("n", 0, 0, 5, at=1020)
    h.trigger("c-0", at=1500).rebalance("c-0", 1500, 1600, ["e:0", "n:0"])
    h.assign("c-0", ["n:0"], at=1600).process("c-0", "n", 0, 0, 5, start=1600, end=1700)
    h.topic_action("delete_topic", "n", at=3000, index=1).topic_deleted("n", at=3010)
    h.trigger("c-0", at=3100).revoke("c-0", ["n:0"], at=3100)
    return h.rebalance("c-0", 3100, 3200, ["e:0"])


HISTORIES = {"recreate": recreate, "gone": gone, "holder": holder, "discovery": discovery}


def series(protocol: str, name: str) -> str:
    return f"{protocol}@{name}"


@pytest.fixture(scope="module")
def results(spark: SparkSession) -> dict[str, Any]:
    """Every history of every protocol through the checkers, observations and metrics."""
    df = frame(
        spark, [(build(p), series(p, name)) for name, build in HISTORIES.items() for p in PROTOCOLS]
    )
    sh = SharedFrames(df)
    anomalies = run_checkers(df, sh).persist()
    out = {
        "anomalies": [r.asDict() for r in anomalies.collect()],
        "observations": [r.asDict() for r in topic_observations(sh).collect()],
        "own": [r.asDict() for r in ownership_intervals(df, sh).collect()],
        "metrics": compute_metrics(df, anomalies, shared=sh),
    }
    anomalies.unpersist()
    return out


def rows(results: dict[str, Any], what: str, protocol: str, name: str) -> list[dict[str, Any]]:
    return [r for r in results[what] if r["protocol"] == series(protocol, name)]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_re_created_topic_s_offsets_are_new_records(
    results: dict[str, Any], protocol: str
) -> None:
    """Offsets [0, 10) of both incarnations, each processed once: nothing to report."""
    assert rows(results, "anomalies", protocol, "recreate") == []
    assert rows(results, "observations", protocol, "recreate") == []
    own = sorted(
        (r["topic"], r["member"], r["t_start_ms"], r["t_end_ms"])
        for r in rows(results, "own", protocol, "recreate")
    )
    assert own == [("t", "c-0", 10.0, 105.0), ("t#2", "c-0", 220.0, 1000.0)]
    m = results["metrics"][series(protocol, "recreate")]
    assert m["duplicates"] == 0 and m["loss"] == 0 and m["processed"] == 20
    assert m["topics"]["created"] == 1 and m["topics"]["deleted"] == 1


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_records_of_a_deleted_topic_went_with_it(results: dict[str, Any], protocol: str) -> None:
    an = rows(results, "anomalies", protocol, "gone")
    loss = [(r["offset_start"], r["offset_end"], r["detail"]) for r in an if r["kind"] == LOSS]
    assert loss == [(30, 40, "skipped")]  # the gap before the last processed offset stays loss
    assert [r for r in an if r["kind"] == COMMIT_BY_NON_OWNER] == []
    obs = {r["kind"]: r for r in rows(results, "observations", protocol, "gone")}
    went = obs[DELETED_WITH_TOPIC]
    assert (went["topic"], went["offset_start"], went["offset_end"], went["count"]) == (
        "d",
        60,
        100,
        40,
    )
    assert went["t_start_ms"] == 110.0 and went["group"] == "gone"
    committed = obs[COMMITS_DELETED_PARTITION]
    assert (committed["member"], committed["offset_end"], committed["t_start_ms"]) == (
        "c-0",
        60,
        130.0,
    )
    held = obs[OWNS_DELETED_PARTITION]
    assert (held["t_start_ms"], held["t_end_ms"], held["detail"]) == (110.0, 150.0, "released")
    m = results["metrics"][series(protocol, "gone")]
    assert m["loss"] == 10 and m["loss_by_cause"] == {"skipped": 10}
    assert m["topics"][DELETED_WITH_TOPIC] == 40
    assert m["topics"][COMMITS_DELETED_PARTITION] == 1


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_owner_that_never_let_go_of_a_deleted_partition(
    results: dict[str, Any], protocol: str
) -> None:
    """Ownership ends at the deletion: no double ownership with the late claimer, no
    stranded z:1 beside the idle c-1; the holds are observations."""
    assert rows(results, "anomalies", protocol, "holder") == []
    own = sorted(
        (r["member"], r["partition"], r["t_start_ms"], r["t_end_ms"])
        for r in rows(results, "own", protocol, "holder")
    )
    assert own == [("c-0", 0, 10.0, 100.0), ("c-1", 1, 10.0, 100.0)]
    obs = sorted(
        (r["kind"], r["member"], r["partition"], r["t_start_ms"], r["t_end_ms"], r["detail"])
        for r in rows(results, "observations", protocol, "holder")
    )
    assert obs == [
        (OWNS_DELETED_PARTITION, "c-0", 0, 100.0, 1000.0, "held_to_end"),
        (OWNS_DELETED_PARTITION, "c-1", 1, 100.0, 120.0, "released"),
        (OWNS_DELETED_PARTITION, "c-2", 0, 300.0, 400.0, "released"),
        (PROCESSES_DELETED_PARTITION, "c-0", 0, 95.0, 105.0, "in_hand_at_deletion"),
    ]
    held = results["metrics"][series(protocol, "holder")]["topics"][OWNS_DELETED_PARTITION]
    assert held == {
        "count": 3,
        "total_ms": 900.0 + 20.0 + 100.0,
        "longest_ms": 900.0,
        "carried_over": 0,
        "held_to_end": 1,
    }


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_topic_changes_are_episodes_with_their_delays(
    results: dict[str, Any], protocol: str
) -> None:
    m = results["metrics"][series(protocol, "discovery")]
    form, created, deleted = m["episodes"]
    assert form["kind"] == "formation"
    # n:0 did not exist before 1010: not unowned in formation (e:0 was, for 10 ms)
    assert form["partition_unavailable_s"] == pytest.approx(0.010)
    assert created["kind"] == "create_topic" and created["topic"] == "n"
    assert created["topic_discovery_ms"] == pytest.approx(590.0)
    assert created["time_to_stable_ms"] == pytest.approx(600.0)
    assert created["partition_unavailable_s"] == pytest.approx(0.590)
    assert created["rebalances"] == 1 and created["members_disturbed"] == 1
    assert deleted["kind"] == "delete_topic" and deleted["topic"] == "n"
    assert deleted["topic_release_ms"] == pytest.approx(90.0)
    assert deleted["time_to_stable_ms"] == pytest.approx(200.0)
    assert deleted["rebalances"] == 1 and deleted["members_disturbed"] == 1
    assert deleted["partition_unavailable_s"] == 0.0
    # every anomaly of the run is in no partition of n after its deletion
    an = rows(results, "anomalies", protocol, "discovery")
    assert [r for r in an if r["topic"] == "n" and r["t_start_ms"] >= 3010.0] == []


def test_a_run_without_topic_events_keeps_its_events(spark: SparkSession) -> None:
    """No lifecycle event: the keyed events are the given table itself (the same plans)."""
    df = recreate("consumer").df(spark)
    plain = df.where(~F.col("kind").startswith("topic_"))
    inc = Incarnations.of(plain)
    assert not inc and inc.keyed(plain) is plain
    sh = SharedFrames(plain)
    assert sh.events is plain and sh.lifetimes is None and sh.holds is None
    assert topic_observations(sh).count() == 0
    keyed = Incarnations.of(df).keyed(df)
    topics = sorted(
        {(r["kind"], r["topic"], r["partitions"]) for r in keyed.collect() if r["topic"]}
        | {(r["kind"], None, r["partitions"]) for r in keyed.collect() if r["partitions"]}
    )
    assert ("produced", "t#2", None) in topics and ("produced", "t", None) in topics
    assert ("topic_deleted", "t", None) in topics and ("topic_created", "t#2", None) in topics
    assert ("partitions_assigned", None, "t#2:0") in topics
