"""Owners on different nodes are ordered by the protocol, not by skewed wall clocks.

Hand-built histories in which member ``c-0`` runs on ``node-b``, whose clock
runs 80 ms ahead of ``node-a`` (``c-1``): every time written for ``c-0`` is its
true time + 80. The claims carry the protocol's order (legacy: the owner
znodes' czxids; modern: generations / member epochs), so a window that only
the skew makes look like double ownership is not reported (a protocol-order
inversion is, instead), while a zombie that keeps a partition after the newer
owner's claim still is.
"""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession

from analysis.checkers import run_checkers
from analysis.history import H, frame
from analysis.ownership import ownership_intervals_all, protocol_order_inversions
from emulator.anomalies import DOUBLE_OWNERSHIP

pytestmark = [pytest.mark.spark]

SKEW = 80.0  # node-b's clock is this far ahead of node-a's
MODERN = ("classic-eager", "classic-cooperative", "consumer")


def legacy(group: str, zxids: bool = True) -> H:
    """Three partitions of topic ``t`` handed between ``c-0`` (node-b) and ``c-1`` (node-a).

    t:0: c-0 releases at true 100 (stamped 180), c-1 claims at 120: the clocks
         show an overlap [120, 180] that ZooKeeper rules out (c-0's znode was
         deleted before c-1's create succeeded).
    t:1: c-0 claims at true 10 (stamped 90) and releases at 20 (100); c-1
         claims at 30: c-1's claim is stamped before c-0's, which came first.
    t:2: c-0 claims at true 10 (90); its session expires; c-1 claims at 300;
         c-0 learns of the expiry (handleNewSession) at true 400 (stamped 480):
         a real zombie window, by c-0's own clock until 480.
    """

    def z(n: int) -> int | None:
        return n if zxids else None

    h = H(protocol="zookeeper", group=group).run(0, 1000).on("c-0", "node-b").on("c-1", "node-a")
    h.assign("c-0", ["t:0"], at=10 + SKEW, zxid=z(0x100))
    h.revoke("c-0", ["t:0"], at=100 + SKEW)
    h.assign("c-1", ["t:0"], at=120, zxid=z(0x105))
    h.assign("c-0", ["t:1"], at=10 + SKEW, zxid=z(0x101))
    h.revoke("c-0", ["t:1"], at=20 + SKEW)
    h.assign("c-1", ["t:1"], at=30, zxid=z(0x102))
    h.assign("c-0", ["t:2"], at=10 + SKEW, zxid=z(0x103))
    h.assign("c-1", ["t:2"], at=300, zxid=z(0x200))
    return h.expire("c-0", at=400 + SKEW)


def modern(protocol: str, group: str) -> H:
    """The same three partitions under a modern protocol, ordered by generation.

    t:0: c-0 (generation 1) revokes at true 100 (stamped 180); c-1 gets it in
         generation 2 at 120. t:1: c-0's generation-1 claim stamped 90, its
         revoke 100; c-1's generation-2 claim at 30. t:2: c-1 (generation 1)
         is expelled, c-0 gets it in generation 2 at true 200 (stamped 280) and
         c-1 learns it lost it at 350: a real zombie window [280, 350].
    """
    h = H(protocol=protocol, group=group).run(0, 1000).on("c-0", "node-b").on("c-1", "node-a")
    h.assign("c-0", ["t:0"], at=10 + SKEW, generation=1)
    h.revoke("c-0", ["t:0"], at=100 + SKEW)
    h.assign("c-1", ["t:0"], at=120, generation=2)
    h.assign("c-0", ["t:1"], at=10 + SKEW, generation=1)
    h.revoke("c-0", ["t:1"], at=20 + SKEW)
    h.assign("c-1", ["t:1"], at=30, generation=2)
    h.assign("c-1", ["t:2"], at=10, generation=1)
    h.assign("c-0", ["t:2"], at=200 + SKEW, generation=2)
    return h.lose("c-1", ["t:2"], at=350)


@pytest.fixture(scope="module")
def frames(spark: SparkSession) -> dict[str, list[dict[str, Any]]]:
    """Every history through the checkers and the inversion finder at once."""
    hs = [legacy("zxid"), legacy("no-zxid", zxids=False)]
    hs += [modern(p, "gen") for p in MODERN]
    df = frame(spark, hs)
    return {
        "anomalies": [r.asDict() for r in run_checkers(df).collect()],
        "inversions": [
            r.asDict() for r in protocol_order_inversions(ownership_intervals_all(df)).collect()
        ],
    }


def _owned(rows: list[dict[str, Any]], protocol: str, group: str) -> list[tuple[Any, ...]]:
    return sorted(
        (r["partition"], r["member"], r["other_member"], r["t_start_ms"], r["t_end_ms"])
        for r in rows
        if r["protocol"] == protocol and r["group"] == group and r["kind"] == DOUBLE_OWNERSHIP
    )


def _inv(rows: list[dict[str, Any]], protocol: str, group: str) -> list[tuple[Any, ...]]:
    return sorted(
        (r["partition"], r["what"], r["member"], r["node"], r["other_member"], r["inversion_ms"])
        for r in rows
        if r["protocol"] == protocol and r["group"] == group
    )


def test_events_carry_node_zxid_and_generation() -> None:
    evs = legacy("g").events()
    claims = [e for e in evs if e["kind"] == "ownership_claimed"]
    assert [(e["node"], e["zxid"]) for e in claims][:2] == [("node-b", 0x100), ("node-a", 0x105)]
    evs = modern("consumer", "g").events()
    assert {e["generation"] for e in evs if e["kind"] == "ownership_claimed"} == {1, 2}


def test_legacy_zxids_order_owners_across_nodes(frames: dict[str, list[dict[str, Any]]]) -> None:
    # Only the zombie window of t:2 is double ownership: c-0's own clock says
    # it held t:2 until 480, after c-1's claim at 300.
    assert _owned(frames["anomalies"], "zookeeper", "zxid") == [(2, "c-1", "c-0", 300.0, 480.0)]
    assert _inv(frames["inversions"], "zookeeper", "zxid") == [
        (0, "release", "c-0", "node-b", "c-1", SKEW - 20),  # released 180, c-1 claimed 120
        (1, "claim", "c-1", "node-a", "c-0", 60.0),  # claimed 30, c-0's earlier claim 90
        (1, "release", "c-0", "node-b", "c-1", 10.0),  # released 100, c-1's claim placed at 90
    ]


def test_legacy_claims_without_zxid_fall_back_to_time(
    frames: dict[str, list[dict[str, Any]]],
) -> None:
    """An old log (no zxid): the clocks order the claims, so the skew shows as overlap."""
    assert _owned(frames["anomalies"], "zookeeper", "no-zxid") == [
        (0, "c-1", "c-0", 120.0, 180.0),
        (1, "c-0", "c-1", 90.0, 100.0),
        (2, "c-1", "c-0", 300.0, 480.0),
    ]
    assert _inv(frames["inversions"], "zookeeper", "no-zxid") == []


@pytest.mark.parametrize("protocol", MODERN)
def test_modern_generations_order_owners_across_nodes(
    frames: dict[str, list[dict[str, Any]]], protocol: str
) -> None:
    # c-1, expelled from generation 1, still holds t:2 by its own clock until
    # 350, after c-0's generation-2 claim at 280: a real zombie window.
    assert _owned(frames["anomalies"], protocol, "gen") == [(2, "c-0", "c-1", 280.0, 350.0)]
    assert _inv(frames["inversions"], protocol, "gen") == [
        (0, "release", "c-0", "node-b", "c-1", SKEW - 20),
        (1, "claim", "c-1", "node-a", "c-0", 60.0),
        (1, "release", "c-0", "node-b", "c-1", 10.0),
    ]
    others = {r["kind"] for r in frames["anomalies"] if r["group"] == "gen"} - {DOUBLE_OWNERSHIP}
    assert others == set()


def test_metrics_count_the_inversions(spark: SparkSession) -> None:
    from analysis.metrics import compute_metrics

    m = compute_metrics(legacy("zxid").df(spark))["zookeeper"]
    assert m["protocol_order_inversions"] == {
        "count": 3,
        "claims": 1,
        "releases": 2,
        "largest_ms": 60.0,
    }
    assert m["double_ownership"] == {"count": 1, "total_ms": 180.0, "longest_ms": 180.0}
