"""The Spark checkers on hand-built histories: every anomaly, allowed and not, every protocol."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from pyspark.sql import SparkSession

from analysis.checkers import ANOMALY_SCHEMA, run_checkers
from analysis.history import PROTOCOLS, H, frame
from emulator.anomalies import (
    ALLOWED,
    ANOMALY_KINDS,
    COMMIT_BY_NON_OWNER,
    DOUBLE_ACQUISITION,
    DOUBLE_OWNERSHIP,
    DOUBLE_PROCESSING,
    DUPLICATE,
    INVALID_ASSIGNMENT,
    LOSS,
    ORDERING_OVERLAP,
    STRANDED_PARTITION,
    UNBALANCED_ASSIGNMENT,
    allowed_kinds,
)
from emulator.events import validate_event
from emulator.summary import summarize

pytestmark = [pytest.mark.spark]

MODERN = [p for p in PROTOCOLS if p != "zookeeper"]


def every_anomaly(protocol: str) -> H:
    """One history with each anomaly once (or twice), on its own partition.

    t:0 (c-0): a gap never processed (loss) and a same-member repeat (other).
    t:1: c-0 processes past its last commit, is revoked; c-1 repeats (uncommitted).
    t:2: c-2 claims while c-1 still holds it (double ownership until c-1 loses it),
         both process [0, 30) at once (double processing, zombie duplicate), then
         c-1 commits (commit by non-owner).
    t:3: c-2 revokes it and nobody takes it while c-3 idles (stranded until c-3 crashes).
    Settle points at 360 (c-3 joins with nothing: unbalanced) and 510 (t:1 given to two,
    t:3 to none: invalid, and unbalanced).
    """
    h = H(protocol=protocol, group="g").run(0, 1000)
    h.produce("t", 0, 0, 100, at=5).produce("t", 1, 0, 60, at=5).produce("t", 2, 0, 30, at=5)
    for m in ("c-0", "c-1", "c-2"):
        h.start(m, at=0)
    h.rebalance("c-0", 1, 10, ["t:0", "t:1"]).rebalance("c-1", 1, 10, ["t:2"])
    h.rebalance("c-2", 1, 10, ["t:3"])
    h.assign("c-0", ["t:0", "t:1"], at=10).assign("c-1", ["t:2"], at=10)
    h.assign("c-2", ["t:3"], at=10)
    # t:0
    h.process("c-0", "t", 0, 0, 50, start=10, end=20).process(
        "c-0", "t", 0, 50, 90, start=20, end=30
    )
    h.process("c-0", "t", 0, 40, 50, start=40, end=45)
    # t:1
    h.process("c-0", "t", 1, 0, 40, start=10, end=20).commit("c-0", "t", 1, 20, at=25)
    h.trigger("c-0", at=100).trigger("c-1", at=100)
    h.revoke("c-0", ["t:1"], at=100)
    h.rebalance("c-0", 100, 110, ["t:0"]).rebalance("c-1", 100, 110, ["t:1", "t:2"])
    h.assign("c-1", ["t:1"], at=110)
    h.process("c-1", "t", 1, 20, 60, start=120, end=130)
    # t:2
    h.process("c-1", "t", 2, 0, 30, start=150, end=250)
    h.assign("c-2", ["t:2"], at=200)
    h.process("c-2", "t", 2, 0, 30, start=210, end=260)
    h.commit("c-1", "t", 2, 30, at=270)
    h.lose("c-1", ["t:2"], at=300)
    # c-3 joins with nothing; t:3 is let go
    h.start("c-3", at=350).rebalance("c-3", 350, 360, [])
    h.revoke("c-2", ["t:3"], at=400)
    h.rebalance("c-0", 500, 510, ["t:0", "t:1"]).rebalance("c-2", 500, 510, [])
    h.crash("c-3", at=900)
    return h


def answered_late() -> H:
    """The answer to c-1's commit reaches it after c-0 took the partition (a pause).

    ``duration_ms`` of ``offsets_committed`` says how long before the event the
    coordinator stored the commit: stored while c-1 owned t:0, it is c-1's;
    the same commit stored after c-0's claim is a non-owner's (explore found
    the first case flagged, zombie-double-consume, classic-eager, seed 23).
    """
    h = H(protocol="classic-eager", group="g").run(0, 1000)  # the rule is the same for all
    h.produce("t", 0, 0, 100, at=5)
    for m in ("c-0", "c-1"):
        h.start(m, at=0)
    h.rebalance("c-1", 1, 10, ["t:0"]).assign("c-1", ["t:0"], at=10)
    h.lose("c-1", ["t:0"], at=30)
    h.rebalance("c-0", 30, 40, ["t:0"]).assign("c-0", ["t:0"], at=40)
    h.commit("c-1", "t", 0, 20, at=100, age_ms=80)  # stored at 20
    h.commit("c-1", "t", 0, 30, at=100, age_ms=55)  # stored at 45
    return h


def test_a_commit_answered_after_a_rebalance_is_judged_when_it_was_stored(
    results: dict[str, list[dict[str, Any]]],
) -> None:
    rows = [r for r in results["classic-eager@answered"] if r["kind"] == COMMIT_BY_NON_OWNER]
    assert [(r["member"], r["t_start_ms"], r["offset_end"]) for r in rows] == [("c-1", 45.0, 30)]


def expected(protocol: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [
        dict(
            kind=DOUBLE_OWNERSHIP,
            partition=2,
            member="c-2",
            other_member="c-1",
            t_start_ms=200.0,
            t_end_ms=300.0,
            count=2,
            detail="members=c-1,c-2",
        ),
        dict(
            kind=DOUBLE_PROCESSING,
            partition=2,
            member="c-2",
            other_member="c-1",
            t_start_ms=210.0,
            t_end_ms=250.0,
            offset_start=0,
            offset_end=30,
            count=2,
            detail="members=c-1,c-2",
        ),
        dict(
            kind=LOSS,
            partition=0,
            offset_start=90,
            offset_end=100,
            count=10,
            detail="unprocessed_at_end",
        ),
        dict(
            kind=DUPLICATE,
            partition=0,
            member="c-0",
            other_member="c-0",
            t_start_ms=40.0,
            t_end_ms=45.0,
            offset_start=40,
            offset_end=50,
            count=10,
            detail="other",
        ),
        dict(
            kind=DUPLICATE,
            partition=1,
            member="c-1",
            other_member="c-0",
            t_start_ms=120.0,
            t_end_ms=130.0,
            offset_start=20,
            offset_end=40,
            count=20,
            detail="uncommitted_after_revoke",
        ),
        dict(
            kind=DUPLICATE,
            partition=2,
            member="c-2",
            other_member="c-1",
            t_start_ms=210.0,
            t_end_ms=260.0,
            offset_start=0,
            offset_end=30,
            count=30,
            detail="zombie",
        ),
        dict(
            kind=COMMIT_BY_NON_OWNER,
            partition=2,
            member="c-1",
            other_member="c-2",
            t_start_ms=270.0,
            t_end_ms=270.0,
            offset_end=30,
            count=1,
        ),
        dict(kind=STRANDED_PARTITION, partition=3, t_start_ms=400.0, t_end_ms=500.0),
        dict(kind=STRANDED_PARTITION, partition=3, t_start_ms=510.0, t_end_ms=900.0),
        dict(
            kind=UNBALANCED_ASSIGNMENT,
            topic=None,
            t_start_ms=360.0,
            t_end_ms=360.0,
            count=4,
            detail="min=0 max=2",
        ),
        dict(
            kind=UNBALANCED_ASSIGNMENT,
            topic=None,
            t_start_ms=510.0,
            t_end_ms=510.0,
            count=4,
            detail="min=0 max=2",
        ),
        dict(
            kind=INVALID_ASSIGNMENT,
            partition=1,
            t_start_ms=510.0,
            t_end_ms=510.0,
            count=2,
            detail="assigned to c-0,c-1",
        ),
        dict(
            kind=INVALID_ASSIGNMENT,
            partition=3,
            t_start_ms=510.0,
            t_end_ms=510.0,
            count=0,
            detail="unassigned",
        ),
    ]
    return full_rows(rows, protocol, "g", "t")


def full_rows(
    rows: list[dict[str, Any]], protocol: str, group: str, topic: str
) -> list[dict[str, Any]]:
    """Expected anomaly rows with every column, ``allowed`` as the auto-commit mode has it."""
    out = []
    for r in rows:
        full: dict[str, Any] = {f.name: None for f in ANOMALY_SCHEMA.fields}
        full.update(protocol=protocol, group=group, topic=topic)
        full.update(r)
        full["allowed"] = r["kind"] in allowed_kinds(protocol)
        out.append(full)
    return out


def delivery(protocol: str) -> H:
    """Group ``delivery`` on topic ``v``: what commit timing does at a revocation and a crash.

    v:0: c-0 is revoked while its batch [50, 60) is in hand and finishes it
         after c-2 took over from 60 (an ordering overlap, no duplicate).
    v:1: c-0's client committed 35 with [20, 35) handed out, then c-0 crashed:
         c-2 starts at 35 and [20, 35) is lost (committed before processed).
    v:2: c-1 processed [0, 10) without committing and crashed; c-2 processes it
         again (redelivered after a crash).
    v:3: c-2's own partition; [1, 5) is produced after its last batch (the run
         ends first).
    """
    h = H(protocol=protocol, group="delivery")
    for p, n in ((0, 100), (1, 40), (2, 10), (3, 1)):
        h.produce("v", p, 0, n, at=1)
    h.start("c-0", at=0).start("c-1", at=0).start("c-2", at=0)
    h.assign("c-0", ["v:0", "v:1"], at=5).assign("c-1", ["v:2"], at=5)
    h.assign("c-2", ["v:3"], at=5).process("c-2", "v", 3, 0, 1, start=5, end=6)
    # v:0
    h.process("c-0", "v", 0, 0, 50, start=5, end=15).commit("c-0", "v", 0, 60, at=19)
    h.revoke("c-0", ["v:0"], at=20).process("c-0", "v", 0, 50, 60, start=18, end=30)
    h.assign("c-2", ["v:0"], at=22).process("c-2", "v", 0, 60, 100, start=25, end=35)
    # v:1
    h.process("c-0", "v", 1, 0, 20, start=5, end=15).commit("c-0", "v", 1, 35, at=26)
    h.abandon("c-0", "v", 1, 20, 35, at=40).crash("c-0", at=40)
    h.assign("c-2", ["v:1"], at=50).process("c-2", "v", 1, 35, 40, start=50, end=55)
    # v:2
    h.process("c-1", "v", 2, 0, 10, start=5, end=15).crash("c-1", at=20)
    h.assign("c-2", ["v:2"], at=30).process("c-2", "v", 2, 0, 10, start=35, end=45)
    # v:3
    return h.produce("v", 3, 1, 5, at=900)


def expected_delivery(protocol: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [
        dict(
            kind=ORDERING_OVERLAP,
            partition=0,
            member="c-2",
            other_member="c-0",
            t_start_ms=25.0,
            t_end_ms=30.0,
            offset_start=50,
            offset_end=100,
            count=2,
            detail="members=c-0,c-2",
        ),
        dict(
            kind=LOSS,
            partition=1,
            offset_start=20,
            offset_end=35,
            count=15,
            detail="committed_before_processed",
        ),
        dict(
            kind=LOSS,
            partition=3,
            offset_start=1,
            offset_end=5,
            count=4,
            detail="unprocessed_at_end",
        ),
        dict(
            kind=DUPLICATE,
            partition=2,
            member="c-2",
            other_member="c-1",
            t_start_ms=35.0,
            t_end_ms=45.0,
            offset_start=0,
            offset_end=10,
            count=10,
            detail="redelivered_after_crash",
        ),
    ]
    return full_rows(rows, protocol, "delivery", "v")


def clean(protocol: str) -> H:
    """Group ``clean`` on topic ``u``: a clean hand-over (commit, revoke, leave, assign)."""
    h = H(protocol=protocol, group="clean").produce("u", 0, 0, 100, at=1)
    h.produce("u", 1, 0, 10, at=1).start("c-0", at=0).start("c-1", at=0)
    h.rebalance("c-0", 1, 5, ["u:0"]).rebalance("c-1", 1, 5, ["u:1"])
    h.assign("c-0", ["u:0"], at=5).assign("c-1", ["u:1"], at=5)
    h.process("c-0", "u", 0, 0, 50, start=5, end=15).commit("c-0", "u", 0, 50, at=16)
    h.process("c-1", "u", 1, 0, 10, start=5, end=15)
    h.trigger("c-1", at=20).revoke("c-0", ["u:0"], at=20).stop("c-0", at=21)
    h.rebalance("c-1", 20, 30, ["u:0", "u:1"]).assign("c-1", ["u:0"], at=30)
    h.process("c-1", "u", 0, 50, 100, start=30, end=40).commit("c-1", "u", 0, 100, at=41)
    return h


def zombie(protocol: str) -> H:
    """Group ``zombie`` on topic ``z`` (modern): c-1 stops dead, the coordinator
    expels it, c-0 is given both partitions while c-1 still believes it owns z:1,
    until it wakes and loses it. Double ownership, but a valid assignment: the
    coordinator assigned without the expelled member."""
    h = H(protocol=protocol, group="zombie").produce("z", 0, 0, 10, at=1)
    h.produce("z", 1, 0, 10, at=1).start("c-0", at=0).start("c-1", at=0)
    h.group_state("PreparingRebalance", at=1)
    h.rebalance("c-0", 1, 5, ["z:0"]).rebalance("c-1", 1, 5, ["z:1"])
    h.assign("c-0", ["z:0"], at=5).assign("c-1", ["z:1"], at=5).group_state("Stable", at=5)
    h.process("c-0", "z", 0, 0, 10, start=5, end=15).process("c-1", "z", 1, 0, 5, start=5, end=15)
    h.member_removed("c-1", at=50, reason="session_timeout").group_state("PreparingRebalance", 50)
    h.rebalance("c-0", 50, 60, ["z:0", "z:1"]).assign("c-0", ["z:1"], at=60)
    h.group_state("Stable", at=60).process("c-0", "z", 1, 5, 10, start=60, end=70)
    return h.lose("c-1", ["z:1"], at=80)


def _key(r: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(r[f.name]) for f in ANOMALY_SCHEMA.fields)


@pytest.fixture(scope="module")
def results(spark: SparkSession) -> dict[str, list[dict[str, Any]]]:
    """Every protocol's history through the checkers at once (one Spark job)."""
    hs: list[H | tuple[H, str]] = [every_anomaly(p) for p in PROTOCOLS]
    hs += [clean(p) for p in PROTOCOLS]
    hs += [zombie(p) for p in MODERN]
    hs += [delivery(p) for p in PROTOCOLS]
    # Histories of single tests, each a series of its own (<protocol>@<name>).
    hs += [(answered_late(), "classic-eager@answered")]
    hs += [
        (loss_history(p, v), f"{p}@loss")
        for p, v in (("consumer", "3.9"), ("classic-eager", "3.9"))
    ]
    an = run_checkers(frame(spark, hs))
    assert [(f.name, f.dataType) for f in an.schema.fields] == [
        (f.name, f.dataType) for f in ANOMALY_SCHEMA.fields
    ]
    out: dict[str, list[dict[str, Any]]] = {}
    for r in an.collect():
        out.setdefault(r["protocol"], []).append(r.asDict())
    return {p: out.get(p, []) for p in {*PROTOCOLS, *out}}


def test_history_events_are_valid() -> None:
    for p in PROTOCOLS:
        evs = every_anomaly(p).events()
        for ev in evs:
            validate_event(ev)
        kinds = {e["kind"] for e in evs}
        if p == "zookeeper":
            assert "partitions_assigned" not in kinds and "attempt_started" in kinds
        else:
            assert "partitions_assigned" in kinds and "partitions_lost" in kinds


# double_acquisition is a share group's own (its records' locks): tested on the share
# histories of tests/integration/test_metrics.py; here it must never show.
CONSUMER_GROUP_KINDS = [k for k in ANOMALY_KINDS if k != DOUBLE_ACQUISITION]


def test_no_double_acquisition_without_share_records(
    results: dict[str, list[dict[str, Any]]],
) -> None:
    assert [r for rows in results.values() for r in rows if r["kind"] == DOUBLE_ACQUISITION] == []


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("kind", CONSUMER_GROUP_KINDS)
def test_anomaly_rows_exact(
    results: dict[str, list[dict[str, Any]]], protocol: str, kind: str
) -> None:
    rows = [r for r in results[protocol] if r["group"] in ("g", "delivery")]
    got = sorted((r for r in rows if r["kind"] == kind), key=_key)
    want = sorted(
        (r for r in expected(protocol) + expected_delivery(protocol) if r["kind"] == kind),
        key=_key,
    )
    assert got == want
    assert got, "every anomaly kind shows in every protocol's history"
    assert all(r["allowed"] is (kind in allowed_kinds(protocol)) for r in got)


@pytest.mark.parametrize("protocol", MODERN)
def test_an_expelled_member_is_out_of_the_assignment(
    results: dict[str, list[dict[str, Any]]], protocol: str
) -> None:
    rows = [r for r in results[protocol] if r["group"] == "zombie"]
    got = [(r["kind"], r["partition"], r["t_start_ms"], r["t_end_ms"]) for r in rows]
    assert got == [(DOUBLE_OWNERSHIP, 1, 60.0, 80.0)]


def test_allowed_lists_are_explicit() -> None:
    assert set(ALLOWED) == set(PROTOCOLS)
    for kinds in ALLOWED.values():
        assert kinds <= set(ANOMALY_KINDS)
        assert LOSS not in kinds
    # Only the unfenced ZooKeeper commits may come from a non-owner; only the eager
    # protocol's single leader-computed assignment is always valid.
    assert [p for p in PROTOCOLS if COMMIT_BY_NON_OWNER in ALLOWED[p]] == ["zookeeper"]
    assert [p for p in PROTOCOLS if INVALID_ASSIGNMENT not in ALLOWED[p]] == ["classic-eager"]


def test_clean_history_has_no_anomaly(results: dict[str, list[dict[str, Any]]]) -> None:
    """Two members hand a partition over cleanly: nothing reported for group ``clean``."""
    for p in PROTOCOLS:
        assert [r for r in results[p] if r["group"] == "clean" or r["topic"] == "u"] == []


def test_summary_agrees_on_hand_history(results: dict[str, list[dict[str, Any]]]) -> None:
    for p in PROTOCOLS:
        s = summarize(every_anomaly(p).events())
        rows = [r for r in results[p] if r["topic"] == "t"]
        assert sum(r["count"] for r in rows if r["kind"] == DUPLICATE) == s.duplicates == 60
        assert sum(r["count"] for r in rows if r["kind"] == LOSS) == s.unprocessed == 10
        dp = [r for r in rows if r["kind"] == DOUBLE_PROCESSING]
        assert len(dp) == s.double_processing == 1
        assert sum(r["t_end_ms"] - r["t_start_ms"] for r in dp) == s.double_processing_ms


def loss_history(protocol: str, version: str) -> H:
    """The same crash loss; how it is judged depends on the commit mode (``run_started``)."""
    from emulator.delivery import DeliveryMode

    mode = DeliveryMode(protocol, kafka_version=version)
    h = H(protocol=protocol, group="loss").run(
        0, 100, commit_mode=mode.key, allows_loss=mode.allows_loss, guarantee=mode.guarantee
    )
    h.produce("w", 0, 0, 20, at=1).start("c-0", at=0).assign("c-0", ["w:0"], at=2)
    h.process("c-0", "w", 0, 0, 5, start=2, end=7).commit("c-0", "w", 0, 20, at=8)
    return h.abandon("c-0", "w", 0, 5, 20, at=9).crash("c-0", at=9)


def test_loss_is_allowed_only_where_the_commit_mode_commits_before_processing(
    results: dict[str, list[dict[str, Any]]],
) -> None:
    """The same crash loss, judged by the run's commit mode (``run_started``)."""
    got = {
        (r["protocol"], r["kind"], r["detail"], r["allowed"])
        for p in ("consumer@loss", "classic-eager@loss")
        for r in results[p]
    }
    assert got == {
        ("consumer@loss", LOSS, "committed_before_processed", True),
        ("classic-eager@loss", LOSS, "committed_before_processed", False),
    }


# --------------------------------------------------- a member on its way out


def _two_members(h: H) -> H:
    """c-0 owns t:0, t:1 and c-1 owns t:2, t:3 from 10 in a settled group."""
    for p in range(4):
        h.produce("t", p, 0, 10, at=1)
    h.start("c-0", at=0).start("c-1", at=0)
    h.rebalance("c-0", 1, 10, ["t:0", "t:1"]).rebalance("c-1", 1, 10, ["t:2", "t:3"])
    h.assign("c-0", ["t:0", "t:1"], at=10).assign("c-1", ["t:2", "t:3"], at=10)
    if not h.legacy:
        h.group_state("Stable", at=10)
    return h


def _regroup(h: H, at: float) -> H:
    """The coordinator (or the legacy watch) learns of the change; c-0 takes everything."""
    if not h.legacy:
        h.member_removed("c-1", at=at).group_state("PreparingRebalance", at=at)
    h.trigger("c-0", at=at + 100).rebalance("c-0", at + 100, at + 110, [f"t:{p}" for p in range(4)])
    h.assign("c-0", ["t:2", "t:3"], at=at + 110)
    return h if h.legacy else h.group_state("Stable", at=at + 110)


def leave_history(protocol: str, group: str, *, told: bool) -> H:
    """c-1 leaves cleanly as a real member does (classic-eager, seed 1003, scaled).

    The orchestrator's ``leave`` at 100 (``told``; without it nothing says c-1
    is on its way out); c-1 gives t:2, t:3 up at 147.216 and stops 56 us
    later, at 147.272; the coordinator learns of it at 184.6 (``LeaveGroup``).
    """
    h = _two_members(H(protocol=protocol, group=group).run(0, 1000))
    if told:
        h.action("leave", at=100, members=["c-1"], index=0)
    h.revoke("c-1", ["t:2", "t:3"], at=147.216).stop("c-1", at=147.272)
    return _regroup(h, 184.6)


def restart_history(protocol: str, group: str) -> H:
    """c-1 is restarted: released at 147.2, stopped at 147.27, started again at 170.

    The new incarnation is given nothing (c-0 takes t:2, t:3 at 294.6): an idle
    member from 294.6, closing no more.
    """
    h = _two_members(H(protocol=protocol, group=group).run(0, 1000))
    h.action("restart", at=100, members=["c-1"], index=0).fault("restart", "c-1", at=106)
    h.revoke("c-1", ["t:2", "t:3"], at=147.2).stop("c-1", at=147.27).start("c-1", at=170)
    h.rebalance("c-1", 184.6, 294.6, [])
    return _regroup(h, 184.6)


def idle_history(protocol: str, group: str) -> H:
    """A genuine stranded partition: c-1 was given nothing and lives on, idle.

    c-0 gives i:0 up at 100 with nothing telling anyone to stop, while the
    group is settled; c-1 triggers a rebalance at 130.
    """
    h = H(protocol=protocol, group=group).run(0, 1000)
    h.produce("i", 0, 0, 10, at=1).start("c-0", at=0).start("c-1", at=0)
    h.rebalance("c-0", 1, 10, ["i:0"]).rebalance("c-1", 1, 10, [])
    h.assign("c-0", ["i:0"], at=10)
    if not h.legacy:
        h.group_state("Stable", at=10)
    h.revoke("c-0", ["i:0"], at=100)
    return h.trigger("c-1", at=130)


Stories = tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]


@pytest.fixture(scope="module")
def stories(spark: SparkSession) -> Stories:
    """Every protocol's closing and claim histories through the checkers (one Spark job).

    Closing groups: ``leave`` (c-1 told to leave), ``unasked`` (the same
    release with no leave action), ``restart``, ``idle``. Claim groups (below,
    :func:`claim_history`): ``claimed`` (c-1 claims t:2, t:3 30 us after its
    completion), ``unclaimed`` (it never claims them), ``nothing`` (its
    completion gives it nothing while t:3 has no owner). Returns the anomaly
    rows by protocol and the member timeline's rows.
    """
    from analysis.checkers import SharedFrames
    from analysis.timelines import member_timeline

    hs = []
    for p in PROTOCOLS:
        hs += [
            leave_history(p, "leave", told=True),
            leave_history(p, "unasked", told=False),
            restart_history(p, "restart"),
            idle_history(p, "idle"),
            claim_history(p, "claimed", ["t:2", "t:3"], claims=True),
            claim_history(p, "unclaimed", ["t:2", "t:3"], claims=False),
            claim_history(p, "nothing", [], claims=False, first=["t:0", "t:1", "t:2"]),
        ]
    df = frame(spark, hs)
    sh = SharedFrames(df)
    rows = [r.asDict() for r in run_checkers(df, sh).collect()]
    timeline = [r.asDict() for r in member_timeline(sh.control, sh.intervals).collect()]
    return {p: [r for r in rows if r["protocol"] == p] for p in PROTOCOLS}, timeline


def _c1_at(stories: Stories, protocol: str, group: str, t: float) -> dict[str, Any]:
    """c-1's member-timeline row holding at ``t`` (its last row at or before ``t``)."""
    rows = sorted(
        (
            r
            for r in stories[1]
            if r["protocol"] == protocol and r["group"] == group and r["member"] == "c-1"
        ),
        key=lambda r: (r["t"], r["ord"]),
    )
    return [r for r in rows if r["t"] <= t][-1]


def _stranded(rows: list[dict[str, Any]], group: str) -> list[tuple[int, float, float]]:
    return sorted(
        (r["partition"], r["t_start_ms"], r["t_end_ms"])
        for r in rows
        if r["group"] == group and r["kind"] == STRANDED_PARTITION
    )


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_member_told_to_leave_is_not_idle_between_its_release_and_its_stop(
    stories: Stories, protocol: str
) -> None:
    """The leave window is no stranded partition; without the leave action it would be."""
    rows = stories[0][protocol]
    assert _stranded(rows, "leave") == []
    assert _stranded(rows, "unasked") == [(2, 147.216, 147.272), (3, 147.216, 147.272)]
    assert _stranded(rows, "restart") == []


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_live_idle_member_nobody_stops_still_strands_a_partition(
    stories: Stories, protocol: str
) -> None:
    assert _stranded(stories[0][protocol], "idle") == [(0, 100.0, 130.0)]


def test_closing_lasts_from_the_stop_order_to_the_stop_and_a_restart_ends_it(
    stories: Stories,
) -> None:
    """c-1's member timeline: closing from the action, idle again once restarted."""
    for p in PROTOCOLS:

        def at(group: str, t: float, p: str = p) -> dict[str, Any]:
            return _c1_at(stories, p, group, t)

        for g in ("leave", "restart"):
            assert at(g, 99)["closing"] == 0
            assert at(g, 100)["closing"] == 1 and at(g, 100)["owned"] == 2
            mid = at(g, 147.25)
            assert (mid["alive"], mid["owned"], mid["closing"], mid["idle"]) == (1, 0, 1, 0)
        # The run's end (run_finished at 1000) tells every member to stop.
        assert at("leave", 1000)["closing"] == 1 and at("leave", 1000)["alive"] == 0
        restarted = at("restart", 300)
        assert (restarted["alive"], restarted["owned"], restarted["closing"]) == (1, 0, 0)
        assert restarted["idle"] == 1
        unasked = at("unasked", 147.25)
        assert (unasked["closing"], unasked["idle"]) == (0, 1)


# ------------------------------------------- a release in the instant of the stop


def same_instant_history(protocol: str, *, lost: bool) -> H:
    """c-1 leaves as the simulator writes it: release and stop in one instant (120).

    ``lost``: the partitions are lost instead of revoked (not a revocation).
    """
    h = _two_members(H(protocol=protocol, group="g").run(0, 1000))
    h.action("leave", at=100, members=["c-1"], index=0)
    if lost:
        h.lose("c-1", ["t:2", "t:3"], at=120)
    else:
        h.revoke("c-1", ["t:2", "t:3"], at=120)
    h.stop("c-1", at=120)
    return _regroup(h, 150)


def test_a_release_in_the_instant_of_the_stop_counts_as_revoked(spark: SparkSession) -> None:
    """The explicit release wins over the member-wide stop; a loss still does not count."""
    from analysis.checkers import SharedFrames
    from analysis.episodes import episodes
    from analysis.metrics import episode_histories

    protos = ("zookeeper", "classic-cooperative", "consumer")
    hs = [same_instant_history(p, lost=False) for p in protos]
    # A loss, on a modern protocol (the legacy H.lose() is a plain release).
    hs += [same_instant_history("classic-eager", lost=True)]
    df = frame(spark, hs)
    sh = SharedFrames(df)
    ends = {
        (r["protocol"], r["partition"]): (r["e"], r["rel"])
        for r in sh.intervals.where("member = 'c-1'").collect()
    }
    for p in protos:
        assert ends[(p, 2)] == ends[(p, 3)] == (120.0, True)
    assert ends[("classic-eager", 2)] == ends[("classic-eager", 3)] == (120.0, False)
    hist = episode_histories(df, sh, run_checkers(df, sh))
    revoked = {
        p: [(e.kind, e.partitions_revoked) for e in episodes(h) if e.kind == "leave"]
        for p, h in hist.items()
    }
    assert revoked == {
        "zookeeper": [("leave", 2)],
        "classic-cooperative": [("leave", 2)],
        "consumer": [("leave", 2)],
        "classic-eager": [("leave", 0)],
    }


# ------------------------------------- a rebalance completed, its claims to follow


def claim_history(
    protocol: str,
    group: str,
    last: Sequence[str],
    *,
    claims: bool,
    first: Sequence[str] = ("t:0", "t:1"),
) -> H:
    """An eager rebalance at 200 whose last member logs its claims after its completion.

    c-0 and c-1 own t:0..t:3 from 10 and give everything up at 200.1; the
    coordinator (if any) is Stable again at 299.9; c-0 completes with ``first``
    at 300 and claims it at 300.03; c-1 completes last, at 300.12, with
    ``last``, and (``claims``) claims them at 300.15, as a real classic member
    does (``rebalance_completed`` at the SyncGroup response,
    ``onPartitionsAssigned`` after). Without ``claims`` it never does. c-1
    starts another rebalance at 400.
    """
    h = _two_members(H(protocol=protocol, group=group).run(0, 1000))
    if not h.legacy:
        h.group_state("PreparingRebalance", at=200)
    h.rebalance("c-0", 200, 300, first).rebalance("c-1", 200, 300.12, last)
    h.revoke("c-0", ["t:0", "t:1"], at=200.1).revoke("c-1", ["t:2", "t:3"], at=200.1)
    if not h.legacy:
        h.group_state("Stable", at=299.9)
    h.assign("c-0", first, at=300.03)
    if claims and last:
        h.assign("c-1", last, at=300.15)
    return h.trigger("c-1", at=400)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_member_between_its_completed_rebalance_and_its_claims_strands_nothing(
    stories: Stories, protocol: str
) -> None:
    """The 30 us before the claims are no stranded partition (they were before).

    The cost of the definition: a member that never claims what it was given
    strands nothing either until its next rebalance.
    """
    rows = stories[0][protocol]
    assert _stranded(rows, "claimed") == []
    assert _stranded(rows, "unclaimed") == []


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_member_given_nothing_beside_an_unowned_partition_still_strands_it(
    stories: Stories, protocol: str
) -> None:
    """c-1's completion lists no partition while t:3 has no owner: stranded until 400."""
    assert _stranded(stories[0][protocol], "nothing") == [(3, 300.12, 400.0)]


def test_claiming_lasts_from_the_completion_to_the_claims_or_the_next_rebalance(
    stories: Stories,
) -> None:
    """c-1's member timeline: ``(alive, owned, reb, claiming, idle)`` over time."""
    for p in PROTOCOLS:

        def at(group: str, t: float, p: str = p) -> tuple[int, ...]:
            r = _c1_at(stories, p, group, t)
            return (r["alive"], r["owned"], r["reb"], r["claiming"], r["idle"])

        for g in ("claimed", "unclaimed", "nothing"):
            # Its first assignment claimed in the instant of its completion.
            assert at(g, 10) == (1, 2, 0, 0, 0), (p, g)
            # Revoked, mid-rebalance: idle (an eager pause).
            assert at(g, 250) == (1, 0, 1, 0, 1), (p, g)
        assert at("claimed", 300.13) == (1, 0, 0, 1, 0), p
        assert at("claimed", 300.15) == (1, 2, 0, 0, 0), p
        assert at("unclaimed", 399) == (1, 0, 0, 1, 0), p
        # The next rebalance ends it: idle again (and mid-rebalance).
        assert at("unclaimed", 400) == (1, 0, 1, 0, 1), p
        assert at("nothing", 300.13) == (1, 0, 0, 0, 1), p


def test_busy_windows_are_the_pure_sweeps_windows(spark: SparkSession) -> None:
    """:func:`analysis.frames.busy_windows` (its pre-filter and its sweep) against
    :func:`emulator.intervals.overlap_windows`, on 400 random timelines in one job:
    touching, nested, same-holder and overlapping intervals, and timelines where
    no two intervals overlap (which the pre-filter drops)."""
    import random

    from analysis.frames import busy_windows
    from emulator.intervals import overlap_windows

    rng = random.Random(7)
    rows: list[tuple[int, str, float, float]] = []
    want: dict[int, list[tuple[float, float]]] = {}
    for k in range(400):
        ivs: list[tuple[float, float, str]] = []
        if k % 4 == 0:  # back to back, one holder after another: no window
            t = 0.0
            for _ in range(rng.randint(1, 6)):
                d = float(rng.randint(1, 5))
                ivs.append((t, t + d, rng.choice("abc")))
                t += d
        else:
            for _ in range(rng.randint(1, 7)):
                s = float(rng.randint(0, 20))
                ivs.append((s, s + rng.randint(1, 8), rng.choice("abc")))
        rows.extend((k, who, s, e) for s, e, who in ivs)
        want[k] = [(s, e) for s, e, _who in overlap_windows(ivs)]
    df = spark.createDataFrame(rows, "k long, who string, s double, e double")
    got: dict[int, list[tuple[float, float]]] = {k: [] for k in want}
    for r in busy_windows(df, ["k"]).collect():
        got[r["k"]].append((r["w_start"], r["w_end"]))
    assert {k: sorted(v) for k, v in got.items()} == want
    assert sum(map(len, want.values())) > 100  # the draw has windows to find
    assert all(not want[k] for k in range(0, 400, 4))


def test_offset_coverage_counts_every_offset_and_cuts_what_was_processed_twice(
    spark: SparkSession,
) -> None:
    """:func:`analysis.checkers.offset_coverage` (runs of batches swept, then the
    offsets processed twice or more cut at the processed batches' boundaries)
    against counting each offset in Python, on 300 random partitions: gaps,
    replays from an earlier offset, skips. Every offset has its counts; no two
    segments overlap; each segment processed twice or more lies whole inside, or
    wholly outside, every processed batch (what check_duplicates matches on);
    neighbours processed less than twice differ."""
    import random
    from itertools import pairwise

    from analysis.checkers import offset_coverage

    rng = random.Random(11)
    rows: list[tuple[str, str, int, int, int]] = []
    want: dict[int, dict[int, tuple[int, int]]] = {}
    processed: dict[int, list[tuple[int, int]]] = {}
    for part in range(300):
        counts: dict[int, list[int]] = {}
        o = 0
        for _ in range(rng.randint(1, 12)):  # produced: back to back, sometimes a gap
            o += rng.choice([0, 0, 0, rng.randint(1, 9)])
            n = rng.randint(1, 30)
            rows.append(("produced", "zookeeper", "t", part, o, o + n))
            for x in range(o, o + n):
                counts.setdefault(x, [0, 0])[0] += 1
            o += n
        top, o, done = o, 0, []
        while o < top and len(done) < 15:  # processed: on, sometimes back or ahead
            n = rng.randint(1, 25)
            done.append((o, o + n))
            rows.append(("processed", "zookeeper", "t", part, o, o + n))
            for x in range(o, o + n):
                counts.setdefault(x, [0, 0])[1] += 1
            o += n + rng.choice([0, 0, 0, -rng.randint(1, 20), rng.randint(1, 5)])
            o = max(o, 0)
        want[part] = {x: (c[0], c[1]) for x, c in counts.items()}
        processed[part] = done
    events = spark.createDataFrame(
        rows,
        "kind string, protocol string, topic string, partition long, "
        "offset_start long, offset_end long",
    )
    batches = events.where("kind = 'processed'").select(
        "protocol",
        "topic",
        "partition",
        events["offset_start"].alias("os"),
        events["offset_end"].alias("oe"),
    )
    got: dict[int, list[tuple[int, int, int, int]]] = {p: [] for p in want}
    for r in offset_coverage(events, batches).collect():
        got[r["partition"]].append((r["s"], r["e"], r["prod"], r["proc"]))
    cut = 0
    for part, segs in got.items():
        segs.sort()
        assert all(a[1] <= b[0] for a, b in pairwise(segs)), part
        seen = {x: (p, q) for s, e, p, q in segs for x in range(s, e) if (p, q) != (0, 0)}
        assert seen == want[part], part
        for s, e, _p, q in segs:
            if q >= 2:
                cut += 1
                for os_, oe in processed[part]:
                    assert (os_ <= s and e <= oe) or oe <= s or e <= os_, (part, s, e)
        for a, b in pairwise(segs):
            if a[1] == b[0] and a[3] < 2 and b[3] < 2:
                assert a[2:] != b[2:], (part, a, b)
    assert cut > 100  # the draw has offsets processed twice to cut
