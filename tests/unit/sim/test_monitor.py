"""The online invariant monitor: each rule fires on a violating stream, not on the allowed one.

The streams are built by hand, event by event, as the actors' ``EventWriter``s
stamp them (``seq`` per actor, ``t_emu_ms``, ``protocol``); every rule is shown
firing where the allowed table (:func:`emulator.anomalies.allowed_kinds`) does not
allow it and silent on the clean or allowed variant.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from emulator.anomalies import (
    COMMIT_BY_NON_OWNER,
    DOUBLE_OWNERSHIP,
    DOUBLE_PROCESSING,
    INVALID_ASSIGNMENT,
    LOSS,
    LOSS_AT_END,
    LOSS_COMMITTED_BEFORE_PROCESSED,
    LOSS_SKIPPED,
    ORDERING_OVERLAP,
    UNBALANCED_ASSIGNMENT,
)
from emulator.clock import ScaledClock
from emulator.eventlog import EventWriter
from emulator.events import SCHEMA_VERSION, Event, EventKind, validate_event
from emulator.sim.invariants import (
    CONTROLLER_EPOCH_CONFLICT,
    LEADER_EPOCH_CONFLICT,
    NON_ZOMBIE_DOUBLE_OWNERSHIP,
    PRODUCED_OVERLAP,
    EventRef,
    parse_partitions,
)
from emulator.sim.monitor import Monitor, StopSimulation, Violation
from emulator.summary import summarize

K = EventKind
GROUP = "g"
TOPIC = "t"


class Stream:
    """Events as the writers stamp them, fed to a monitor as they are made."""

    def __init__(self, monitor: Monitor, protocol: str) -> None:
        self.monitor = monitor
        self.protocol = protocol
        self.seqs: dict[str, int] = {}
        self.events: list[dict[str, object]] = []

    def emit(self, t: float, kind: EventKind, actor: str = "host-0", **fields: object) -> None:
        seq = self.seqs.get(actor, 0)
        self.seqs[actor] = seq + 1
        ev: dict[str, object] = {
            "v": SCHEMA_VERSION,
            "seq": seq,
            "kind": kind.value,
            "t_emu_ms": float(t),
            "ts_wall": 0.0,
            "ts_mono": 0.0,
            "run_id": "r",
            "node": "sim",
            "actor": actor,
            "protocol": self.protocol,
        }
        ev.update({k: v for k, v in fields.items() if v is not None})
        validate_event(ev)
        self.events.append(ev)
        self.monitor(ev)

    # -- the members' and coordinator's events, as the emulator writes them

    def started(self, t: float, member: str) -> None:
        self.emit(t, K.CONSUMER_STARTED, member=member, group=GROUP)

    def run_started(self, t: float, commit_mode: str = "auto", allows_loss: bool = False) -> None:
        detail = json.dumps({"commit_mode": commit_mode, "allows_loss": allows_loss})
        self.emit(t, K.RUN_STARTED, actor="orchestrator", detail=detail)

    def assigned(
        self, t: float, member: str, parts: list[int], gen: int = 1, mid: str | None = None
    ) -> None:
        """A modern member's ``partitions_assigned`` and per-partition claims."""
        listed = ",".join(f"{TOPIC}:{p}" for p in parts)
        self.emit(
            t,
            K.PARTITIONS_ASSIGNED,
            member=member,
            member_id=mid,
            group=GROUP,
            generation=gen,
            partitions=listed,
            count=len(parts),
        )
        for p in parts:
            self.emit(
                t,
                K.OWNERSHIP_CLAIMED,
                member=member,
                member_id=mid,
                group=GROUP,
                generation=gen,
                topic=TOPIC,
                partition=p,
            )

    def revoked(self, t: float, member: str, parts: list[int], lost: bool = False) -> None:
        listed = ",".join(f"{TOPIC}:{p}" for p in parts)
        kind = K.PARTITIONS_LOST if lost else K.PARTITIONS_REVOKED
        self.emit(t, kind, member=member, group=GROUP, partitions=listed, count=len(parts))
        for p in parts:
            self.emit(
                t,
                K.OWNERSHIP_RELEASED,
                member=member,
                group=GROUP,
                topic=TOPIC,
                partition=p,
                reason="lost" if lost else "revoked",
            )

    def commit(
        self, t: float, member: str, p: int, offset: int = 10, age: float | None = None
    ) -> None:
        self.emit(
            t,
            K.OFFSETS_COMMITTED,
            member=member,
            group=GROUP,
            topic=TOPIC,
            partition=p,
            offset_end=offset,
            duration_ms=age,
        )

    def completed(self, t: float, member: str, parts: list[int], mid: str | None = None) -> None:
        listed = ",".join(f"{TOPIC}:{p}" for p in parts)
        self.emit(
            t,
            K.REBALANCE_COMPLETED,
            member=member,
            member_id=mid,
            group=GROUP,
            partitions=listed,
            count=len(parts),
        )

    def state(self, t: float, state: str) -> None:
        self.emit(t, K.GROUP_STATE_CHANGED, actor="broker-0", group=GROUP, state=state)

    def produced(self, t: float, p: int, start: int, end: int) -> None:
        self.emit(
            t,
            K.PRODUCED,
            actor="producer-0",
            topic=TOPIC,
            partition=p,
            offset_start=start,
            offset_end=end,
        )

    def processed(
        self, t: float, member: str, p: int, start: int, end: int, took: float = 1.0
    ) -> None:
        self.emit(
            t,
            K.PROCESSED,
            member=member,
            group=GROUP,
            topic=TOPIC,
            partition=p,
            offset_start=start,
            offset_end=end,
            duration_ms=took,
        )


def stream(protocol: str, **kwargs: object) -> Stream:
    return Stream(Monitor(**kwargs), protocol)  # type: ignore[arg-type]


def kinds(vs: list[Violation]) -> list[str]:
    return [v.kind for v in vs]


def none_allowed(protocol: str, mode: str, loss: bool) -> frozenset[str]:
    """An allowed table that allows nothing (to see checks the real table always allows)."""
    return frozenset()


# ------------------------------------------------------------ commit_by_non_owner


@pytest.mark.parametrize("protocol", ["classic-eager", "classic-cooperative", "consumer"])
def test_a_commit_by_a_non_owner_fires_under_the_modern_protocols(protocol: str) -> None:
    s = stream(protocol)
    s.assigned(10, "c-0", [0])
    s.commit(20, "c-0", 0)  # the owner: fine
    s.commit(20, "c-1", 0)  # not the owner
    s.monitor.finish()
    [v] = s.monitor.violations
    assert v.kind == COMMIT_BY_NON_OWNER
    assert (v.protocol, v.group, v.topic, v.partition) == (protocol, GROUP, TOPIC, 0)
    assert v.members == ("c-0", "c-1") and v.window == (20.0, 20.0)
    assert v.detail == "owner=c-0" and v.offset_end == 10
    # the triggering event: c-1's commit, the host's fifth event
    assert v.seqs == (("host-0", 3),)
    assert "c-1 committed t:0" in v.message and "c-0 owned it" in v.message


def test_a_commit_is_judged_at_the_instant_the_coordinator_stored_it() -> None:
    """A commit answered after a pause: stored while its member owned the partition.

    Found by ``explore`` (zombie-double-consume, classic-eager, seed 23): c-1's
    auto-commit was stored just before its pause and the answer reached it 35 s
    later, after c-0 had taken the partition. The event's ``duration_ms`` says
    how long before the event the coordinator stored it.
    """
    s = stream("classic-eager")
    s.assigned(10, "c-1", [0])
    s.revoked(30, "c-1", [0], lost=True)
    s.assigned(40, "c-0", [0])
    s.commit(100, "c-1", 0, age=80)  # stored at 20: c-1's
    s.commit(100, "c-1", 0, age=55)  # stored at 45: c-0's by then
    s.monitor.finish()
    [v] = s.monitor.violations
    assert v.kind == COMMIT_BY_NON_OWNER and v.window == (45.0, 45.0)
    assert v.members == ("c-0", "c-1") and "at 45.0 ms while c-0 owned it" in v.message


def test_a_commit_by_a_non_owner_is_allowed_under_zookeeper() -> None:
    s = stream("zookeeper")
    s.emit(10, K.OWNERSHIP_CLAIMED, member="c-0", group=GROUP, topic=TOPIC, partition=0, zxid=5)
    s.commit(20, "c-1", 0)
    s.monitor.finish()
    assert s.monitor.violations == []
    assert s.monitor.counted("zookeeper")[COMMIT_BY_NON_OWNER] == 1


def test_a_commit_of_a_partition_nobody_ever_claimed_fires() -> None:
    s = stream("classic-eager")
    s.commit(20, "c-1", 3)
    s.monitor.finish()
    [v] = s.monitor.violations
    assert v.kind == COMMIT_BY_NON_OWNER and "no member owned it" in v.message


def test_ownership_bounds_are_inclusive_and_an_instant_is_judged_whole() -> None:
    s = stream("classic-eager")
    # the commit arrives before the claim of the same instant: judged together
    s.commit(10, "c-0", 0)
    s.assigned(10, "c-0", [0])
    s.revoked(30, "c-0", [0])
    s.commit(30, "c-0", 0)  # at its release: still the owner
    s.commit(31, "c-0", 0)  # after: not
    s.monitor.finish()
    [v] = s.monitor.violations
    assert v.kind == COMMIT_BY_NON_OWNER and v.window == (31.0, 31.0)
    assert v.detail is None  # no owner then


def test_a_zombies_ownership_is_cut_at_the_next_claim() -> None:
    s = stream("consumer")
    s.assigned(10, "c-0", [0], gen=1, mid="m0")
    s.emit(20, K.MEMBER_REMOVED, actor="broker-0", group=GROUP, member_id="m0")
    s.assigned(30, "c-1", [0], gen=2, mid="m1")  # c-0 never released (a zombie)
    s.commit(30, "c-0", 0)  # at the next claim: still c-0's (inclusive)
    s.commit(31, "c-0", 0)  # after it: the zombie's commit
    s.commit(31, "c-1", 0)
    s.monitor.finish()
    assert [(v.kind, v.window, v.members) for v in s.monitor.violations] == [
        (COMMIT_BY_NON_OWNER, (31.0, 31.0), ("c-0", "c-1"))
    ]


def test_the_current_owner_follows_the_protocols_order_not_the_clock() -> None:
    # effective_intervals orders claims by generation: c-0's stale claim (generation 1,
    # stamped after c-1's generation-2 claim) is cut at c-1's claim, so never current.
    s = stream("classic-eager")
    s.assigned(10, "c-1", [0], gen=2)
    s.assigned(20, "c-0", [0], gen=1)
    s.commit(25, "c-1", 0)
    s.commit(25, "c-0", 0)
    s.monitor.finish()
    vs = [v for v in s.monitor.violations if v.kind == COMMIT_BY_NON_OWNER]
    assert [v.members for v in vs] == [("c-0", "c-1")]
    assert "c-0 committed" in vs[0].message


def test_a_crash_ends_every_ownership_of_the_member() -> None:
    s = stream("classic-eager")
    s.assigned(10, "c-0", [0, 1])
    s.emit(20, K.CONSUMER_CRASHED, actor="orchestrator", member="c-0", group=GROUP)
    s.commit(20, "c-0", 1)  # at the crash instant: inclusive
    s.commit(21, "c-0", 0)
    s.monitor.finish()
    assert [(v.partition, v.window) for v in s.monitor.violations] == [(0, (21.0, 21.0))]


# ------------------------------------------------------------- invalid_assignment


def settled_group(s: Stream, parts_c0: list[int], parts_c1: list[int], t: float = 100) -> None:
    """Two members rebalance and the coordinator goes Stable at ``t``."""
    s.started(1, "c-0")
    s.started(1, "c-1")
    s.state(2, "PreparingRebalance")
    s.produced(3, 0, 0, 10)
    s.produced(3, 1, 0, 10)
    s.completed(t - 1, "c-0", parts_c0, mid="m0")
    s.assigned(t - 1, "c-0", parts_c0, mid="m0")
    s.completed(t - 1, "c-1", parts_c1, mid="m1")
    s.assigned(t - 1, "c-1", parts_c1, mid="m1")
    s.state(t, "Stable")


def drain(s: Stream, t: float = 500) -> None:
    """Every produced offset processed (so that the end finds no loss)."""
    for p in (0, 1):
        s.processed(t, "c-0", p, 0, 10)


def test_an_invalid_assignment_at_a_settle_point_fires_for_classic_eager() -> None:
    s = stream("classic-eager")
    settled_group(s, [0], [])  # t:1 is produced and given to nobody
    s.emit(101, K.ACTION_APPLIED, actor="orchestrator", reason="join")  # closes the instant
    vs = list(s.monitor.violations)
    assert [(v.kind, v.partition, v.count, v.detail) for v in vs] == [
        (INVALID_ASSIGNMENT, 1, 0, "unassigned")
    ]
    assert vs[0].window == (100.0, 100.0) and vs[0].group == GROUP
    # the triggering events: the members' latest completed assignments
    assert {r.actor for r in vs[0].events} == {"host-0"}
    drain(s)
    s.monitor.finish()
    assert len(s.monitor.violations) == 1


def test_an_invalid_assignment_is_allowed_for_classic_cooperative() -> None:
    s = stream("classic-cooperative")
    settled_group(s, [0], [])
    drain(s)
    s.monitor.finish()
    assert s.monitor.violations == []
    assert s.monitor.counted("classic-cooperative")[INVALID_ASSIGNMENT] == 1


def test_a_valid_assignment_is_silent_and_a_double_one_fires() -> None:
    ok = stream("classic-eager")
    settled_group(ok, [0], [1])
    drain(ok)
    ok.monitor.finish()
    assert ok.monitor.violations == []
    both = stream("classic-eager", strict=False)
    settled_group(both, [0, 1], [1])
    drain(both)
    both.monitor.finish()
    [v] = both.monitor.violations
    assert (v.partition, v.count, v.members, v.detail) == (
        1,
        2,
        ("c-0", "c-1"),
        "assigned to c-0,c-1",
    )


def test_no_settle_point_while_a_member_is_mid_rebalance() -> None:
    s = stream("classic-eager")
    s.started(1, "c-0")
    s.started(1, "c-1")
    s.state(2, "PreparingRebalance")
    s.produced(3, 0, 0, 10)
    s.produced(3, 1, 0, 10)
    s.completed(99, "c-0", [0], mid="m0")
    s.assigned(99, "c-0", [0], mid="m0")
    s.state(100, "Stable")  # c-1 has not completed: still mid-rebalance
    drain(s)
    s.monitor.finish()
    assert s.monitor.violations == []


def test_a_removed_member_s_assignment_no_longer_counts() -> None:
    # c-1 is expelled (member_removed of its id); the group settles with c-0 alone,
    # holding t:0 only: t:1 is unassigned, whatever c-1 still believes.
    s = stream("classic-eager")
    settled_group(s, [0], [1])
    s.state(200, "PreparingRebalance")
    s.emit(210, K.MEMBER_REMOVED, actor="broker-0", group=GROUP, member_id="m1")
    s.emit(211, K.REBALANCE_TRIGGERED, member="c-0", group=GROUP)
    s.completed(220, "c-0", [0], mid="m0")
    s.state(230, "Stable")
    drain(s)
    s.monitor.finish()
    assert [(v.kind, v.partition, v.window) for v in s.monitor.violations] == [
        (INVALID_ASSIGNMENT, 1, (230.0, 230.0))
    ]


def test_a_partition_that_joins_the_universe_later_is_judged_at_the_end() -> None:
    # Offline the universe is the whole log's: t:2 is produced only after the
    # settle point, yet it was a partition the group should have owned then.
    s = stream("classic-eager")
    settled_group(s, [0], [1])
    s.produced(150, 2, 0, 5)
    drain(s)
    s.processed(500, "c-0", 2, 0, 5)
    s.monitor.flush()
    assert s.monitor.violations == []
    found = s.monitor.finish()
    assert [(v.kind, v.partition, v.window) for v in found] == [
        (INVALID_ASSIGNMENT, 2, (100.0, 100.0))
    ]


def test_unbalanced_assignments_are_counted_not_violations() -> None:
    s = stream("classic-eager")
    s.started(1, "c-0")
    s.started(1, "c-1")
    for p in range(3):
        s.produced(3, p, 0, 10 if p < 2 else 1)
    s.completed(99, "c-0", [0, 1, 2], mid="m0")
    s.assigned(99, "c-0", [0, 1, 2], mid="m0")
    s.completed(99, "c-1", [], mid="m1")
    s.state(100, "Stable")
    s.processed(500, "c-0", 2, 0, 1)
    drain(s)
    s.monitor.finish()
    assert s.monitor.counted("classic-eager").get(UNBALANCED_ASSIGNMENT) == 1
    assert INVALID_ASSIGNMENT not in kinds(s.monitor.violations)


# -------------------------------------------------------------------------- loss


def lossy(s: Stream) -> None:
    s.produced(1, 0, 0, 100)
    s.processed(10, "c-0", 0, 0, 60)


@pytest.mark.parametrize("protocol", ["zookeeper", "classic-eager", "consumer"])
def test_loss_at_the_end_fires_with_at_least_once_settings(protocol: str) -> None:
    s = stream(protocol)
    s.run_started(-5, "auto", False)
    lossy(s)
    assert s.monitor.violations == []  # loss needs the whole log
    [v] = s.monitor.finish()
    assert (v.kind, v.offset_start, v.offset_end, v.count, v.detail) == (
        LOSS,
        60,
        100,
        40,
        LOSS_AT_END,
    )
    assert v.group == GROUP  # the run's group: nobody claimed t:0


def test_a_run_cut_short_is_not_judged_on_what_it_did_not_get_to_do() -> None:
    """A run the engine stopped at a violation: no loss, only the pending instant's checks."""
    s = stream("consumer")
    s.run_started(-5, "auto", False)
    lossy(s)
    s.commit(200, "c-9", 0)  # pending when the run is cut: still judged
    assert [v.kind for v in s.monitor.finish(cut_short=True)] == [COMMIT_BY_NON_OWNER]


def test_loss_is_allowed_with_at_most_once_settings() -> None:
    s = stream("classic-eager")
    s.run_started(-5, "commit-before-process", True)
    lossy(s)
    assert s.monitor.finish() == []
    assert s.monitor.counted("classic-eager")[LOSS] == 1


def test_the_modes_given_to_the_monitor_win_over_run_started() -> None:
    s = stream("classic-eager", modes={"classic-eager": ("commit-before-process", True)})
    s.run_started(-5, "auto", False)
    lossy(s)
    assert s.monitor.finish() == []


def test_loss_says_why() -> None:
    s = stream("consumer")
    s.produced(1, 0, 0, 100)
    s.processed(10, "c-0", 0, 0, 20)
    s.processed(11, "c-0", 0, 30, 50)  # 20..30 skipped
    s.emit(
        12,
        K.RECORDS_ABANDONED,
        member="c-0",
        group=GROUP,
        topic=TOPIC,
        partition=0,
        offset_start=50,
        offset_end=60,
        reason="crash",
    )
    s.processed(13, "c-1", 0, 60, 90)  # 50..60 abandoned; 90..100 at the end
    got = s.monitor.finish()
    assert [(v.offset_start, v.offset_end, v.detail) for v in got] == [
        (20, 30, LOSS_SKIPPED),
        (50, 60, LOSS_COMMITTED_BEFORE_PROCESSED),
        (90, 100, LOSS_AT_END),
    ]
    assert got[1].seqs == (("host-0", 2),)  # the abandoned records


# ----------------------------------------------------- double processing / ordering


def test_double_processing_fires_early_where_not_allowed_and_is_counted_where_allowed() -> None:
    strict = stream("classic-eager", allowed=none_allowed)
    strict.processed(10, "c-0", 0, 0, 10, took=10)  # [0, 10]
    strict.processed(15, "c-1", 0, 5, 15, took=10)  # [5, 15], offsets 5..10 again
    strict.emit(16, K.ACTION_APPLIED, actor="orchestrator", reason="leave")
    [v] = strict.monitor.violations  # before the end: the pair makes it certain
    assert (v.kind, v.members, v.window) == (DOUBLE_PROCESSING, ("c-0", "c-1"), (5.0, 10.0))
    assert [r.seq for r in v.events] == [0, 1]
    strict.monitor.finish()
    assert kinds(strict.monitor.violations) == [DOUBLE_PROCESSING]  # not repeated

    allowed = stream("classic-eager")
    allowed.processed(10, "c-0", 0, 0, 10, took=10)
    allowed.processed(15, "c-1", 0, 5, 15, took=10)
    allowed.monitor.finish()
    assert allowed.monitor.violations == []
    assert allowed.monitor.counted("classic-eager")[DOUBLE_PROCESSING] == 1


def test_an_ordering_overlap_is_found_at_the_end() -> None:
    s = stream("consumer", allowed=none_allowed)
    s.processed(10, "c-0", 0, 0, 10, took=10)
    s.processed(15, "c-1", 0, 10, 20, took=10)  # different records, at once
    s.processed(30, "c-1", 0, 20, 30, took=5)  # alone: no window
    s.monitor.flush()
    assert s.monitor.violations == []
    [v] = s.monitor.finish()
    assert (v.kind, v.window, v.members, v.detail) == (
        ORDERING_OVERLAP,
        (5.0, 10.0),
        ("c-0", "c-1"),
        "members=c-0,c-1",
    )


def test_processing_windows_agree_with_the_run_summary() -> None:
    """Seeded random streams: the monitor's windows and loss equal emulator.summary's."""
    rng = random.Random(1807)
    for _ in range(40):
        s = stream("classic-eager", allowed=none_allowed)
        end = 0
        for p in range(2):
            s.produced(0, p, 0, 200)
        t = 1.0
        for _i in range(rng.randint(3, 25)):
            p = rng.randrange(2)
            who = rng.choice(["c-0", "c-1", "c-2"])
            start = rng.randrange(0, 60)
            end = start + rng.randint(0, 10)
            t += rng.choice([0.0, 0.5, 1.0, 3.0])
            s.processed(t, who, p, start, end, took=rng.choice([0.0, 1.0, 2.5, 6.0]))
        s.monitor.finish()
        summary = summarize(s.events)
        found = kinds(s.monitor.violations)
        assert found.count(DOUBLE_PROCESSING) == summary.double_processing
        assert found.count(ORDERING_OVERLAP) == summary.ordering_overlap
        lost = sum(v.count or 0 for v in s.monitor.violations if v.kind == LOSS)
        assert lost == summary.unprocessed


# ------------------------------------------------------------- double ownership


def test_a_zombies_double_ownership_is_counted_not_a_violation() -> None:
    s = stream("classic-eager")
    s.assigned(10, "c-0", [0], gen=1, mid="m0")
    s.emit(20, K.MEMBER_REMOVED, actor="broker-0", group=GROUP, member_id="m0")
    s.assigned(30, "c-1", [0], gen=2, mid="m1")  # c-0 is a zombie until 40
    s.revoked(40, "c-0", [0], lost=True)
    s.monitor.finish()
    assert s.monitor.violations == []
    assert s.monitor.counted("classic-eager")[DOUBLE_OWNERSHIP] == 1


def test_double_ownership_fires_where_the_table_does_not_allow_it() -> None:
    s = stream("classic-eager", allowed=none_allowed, strict=False)
    s.assigned(10, "c-0", [0])
    s.assigned(30, "c-1", [0], gen=2)
    s.revoked(40, "c-0", [0], lost=True)
    [v] = s.monitor.finish()
    assert (v.kind, v.window, v.members, v.count) == (
        DOUBLE_OWNERSHIP,
        (30.0, 40.0),
        ("c-0", "c-1"),
        2,
    )


# ---------------------------------------------------------------- strict safety


def two_owners(s: Stream, removed: bool) -> None:
    s.assigned(10, "c-0", [0], gen=1, mid="m0")
    if removed:
        s.emit(20, K.MEMBER_REMOVED, actor="broker-0", group=GROUP, member_id="m0")
    s.assigned(30, "c-1", [0], gen=2, mid="m1")


@pytest.mark.parametrize("protocol", ["classic-eager", "classic-cooperative", "consumer"])
def test_two_owners_in_good_standing_are_a_strict_violation(protocol: str) -> None:
    s = stream(protocol)
    two_owners(s, removed=False)
    s.emit(31, K.ACTION_APPLIED, actor="orchestrator", reason="join")
    [v] = s.monitor.violations
    assert (v.kind, v.partition, v.members, v.window) == (
        NON_ZOMBIE_DOUBLE_OWNERSHIP,
        0,
        ("c-0", "c-1"),
        (30.0, 30.0),
    )
    assert [r.index for r in v.events] == [0, 2]  # c-0's claim, then c-1's (the lists)


def test_a_removed_owner_is_a_zombie_not_a_strict_violation() -> None:
    s = stream("consumer")
    two_owners(s, removed=True)
    s.monitor.finish()
    assert NON_ZOMBIE_DOUBLE_OWNERSHIP not in kinds(s.monitor.violations)


def test_strict_safety_is_not_checked_for_the_legacy_consumer_or_when_off() -> None:
    legacy = stream("zookeeper")
    for t, m, z in ((10, "c-0", 5), (30, "c-1", 9)):
        legacy.emit(t, K.OWNERSHIP_CLAIMED, member=m, group=GROUP, topic=TOPIC, partition=0, zxid=z)
    legacy.monitor.finish()
    assert legacy.monitor.violations == []
    off = stream("consumer", strict=False)
    two_owners(off, removed=False)
    off.monitor.finish()
    assert off.monitor.violations == []


# ----------------------------------------------------------------- self-checks


def test_produced_ranges_never_overlap_unless_an_unclean_election_reused_offsets() -> None:
    s = stream("consumer")
    s.produced(1, 0, 0, 10)
    s.produced(2, 0, 10, 20)  # touching: fine
    s.produced(3, 0, 15, 25)
    s.monitor.flush()
    [v] = s.monitor.violations
    assert (v.kind, v.offset_start, v.offset_end) == (PRODUCED_OVERLAP, 15, 25)
    assert "[0, 20)" in v.message
    unclean = stream("consumer")
    unclean.produced(1, 0, 0, 10)
    unclean.emit(
        2,
        K.LEADER_CHANGED,
        actor="broker-1",
        topic=TOPIC,
        partition=0,
        broker=2,
        generation=3,
        reason="unclean",
    )
    unclean.produced(3, 0, 5, 15)
    unclean.monitor.flush()
    assert unclean.monitor.violations == []
    off = stream("consumer", self_checks=False)
    off.produced(1, 0, 0, 10)
    off.produced(3, 0, 5, 15)
    off.monitor.flush()
    assert off.monitor.violations == []


def test_one_leader_per_leader_epoch_and_one_controller_per_controller_epoch() -> None:
    s = stream("zookeeper")

    def leader(t: float, broker: int, epoch: int) -> None:
        s.emit(
            t,
            K.LEADER_CHANGED,
            actor="broker-0",
            topic=TOPIC,
            partition=0,
            broker=broker,
            generation=epoch,
            reason="new",
        )

    leader(1, 1, 0)
    leader(2, 1, 0)  # the same again: fine
    leader(3, 2, 1)
    leader(4, 0, 1)
    s.emit(5, K.CONTROLLER_ELECTED, actor="broker-0", broker=0, generation=1)
    s.emit(6, K.CONTROLLER_ELECTED, actor="broker-1", broker=1, generation=2)
    s.emit(7, K.CONTROLLER_ELECTED, actor="broker-2", broker=2, generation=2)
    s.monitor.finish()
    assert [(v.kind, v.detail) for v in s.monitor.violations] == [
        (LEADER_EPOCH_CONFLICT, "brokers=2,0"),
        (CONTROLLER_EPOCH_CONFLICT, "brokers=1,2"),
    ]
    assert s.monitor.violations[1].seqs == (("broker-1", 0), ("broker-2", 0))


# --------------------------------------------------------------- the monitor


def test_an_instant_is_evaluated_when_a_later_one_begins_or_on_flush() -> None:
    seen: list[Violation] = []
    s = stream("classic-eager", on_violation=seen.append)
    s.commit(20, "c-1", 0)
    s.emit(20, K.ACTION_APPLIED, actor="orchestrator", reason="join")
    assert seen == []  # the instant is still open
    s.emit(21, K.ACTION_APPLIED, actor="orchestrator", reason="join")
    assert kinds(seen) == [COMMIT_BY_NON_OWNER]
    s.commit(22, "c-1", 0)
    s.monitor.flush()
    assert len(seen) == 2 and s.monitor.violations == seen
    with pytest.raises(StopSimulation) as stop:
        s.monitor.raise_if_violated()
    assert stop.value.violation is seen[0]
    assert "commit_by_non_owner" in str(stop.value)


def test_each_protocol_is_its_own_run_with_its_own_time() -> None:
    m = Monitor()
    a, b = Stream(m, "classic-eager"), Stream(m, "zookeeper")
    a.assigned(50, "c-0", [0])
    b.commit(10, "c-1", 0)  # earlier time, another protocol: not late
    a.commit(60, "c-1", 0)
    m.finish("classic-eager")
    assert [(v.protocol, v.kind) for v in m.violations] == [("classic-eager", COMMIT_BY_NON_OWNER)]
    a.commit(70, "c-1", 0)  # after its finish: ignored
    assert m.after_finish == 1
    m.finish()
    assert [v.protocol for v in m.violations] == ["classic-eager"]
    assert m.counted("zookeeper") == {COMMIT_BY_NON_OWNER: 1}
    stats = m.stats()
    assert isinstance(stats["protocols"], dict) and stats["protocols"]["zookeeper"]["late"] == 0


def test_events_stamped_before_their_instant_join_it_and_are_counted() -> None:
    s = stream("classic-eager")
    s.assigned(10, "c-0", [0])
    s.processed(8, "c-0", 0, 0, 5, took=2)  # stamped at its batch's end, emitted later
    s.monitor.finish()
    assert s.monitor.stats()["protocols"]["classic-eager"]["late"] == 1  # type: ignore[index]
    assert s.monitor.violations == []


def test_the_run_started_detail_sets_the_commit_mode() -> None:
    s = stream("consumer")
    s.run_started(-1, "listener-commit", False)
    stats = s.monitor.stats()["protocols"]
    assert stats["consumer"]["commit_mode"] == "listener-commit"  # type: ignore[index]


def test_the_ring_is_bounded_and_a_trace_shows_the_partition_the_members_and_the_actions() -> None:
    s = stream("classic-eager", ring_size=8)
    s.emit(1, K.FAULT_INJECTED, actor="host-0", member="c-9", reason="pause")
    for i in range(20):
        s.processed(2 + i, "c-2", 5, i, i + 1)  # another partition, another member
    s.assigned(30, "c-0", [0])
    s.commit(31, "c-1", 0)
    s.monitor.finish()
    assert len(s.monitor.recent) == 8
    [v] = s.monitor.violations
    trace = s.monitor.trace(v)
    got = [(e["kind"], e.get("member")) for e in trace]
    assert got[0] == ("fault_injected", "c-9")  # older than the ring, kept
    assert ("offsets_committed", "c-1") in got
    assert ("partitions_assigned", "c-0") in got
    assert all(e.get("partition") != 5 for e in trace)
    assert len(s.monitor.trace(v, limit=1)) == 2  # the action and the last hit


def test_a_violation_is_json_able() -> None:
    v = Violation(
        COMMIT_BY_NON_OWNER,
        GROUP,
        TOPIC,
        0,
        ("c-1",),
        1.0,
        1.0,
        (EventRef(3, "host-0", 7),),
        "c-1 committed",
        protocol="consumer",
    )
    doc = json.loads(json.dumps(v.to_dict()))
    assert doc["events"] == [{"index": 3, "actor": "host-0", "seq": 7}]
    assert doc["window_ms"] == [1.0, 1.0] and v.seqs == (("host-0", 7),)


def test_unchecked_kinds_are_reported_where_they_are_not_allowed() -> None:
    s = stream("classic-eager")
    s.commit(1, "c-0", 0)
    assert s.monitor.unchecked("classic-eager") == ()
    t = stream("made-up-protocol")
    t.commit(1, "c-0", 0)
    assert t.monitor.unchecked("made-up-protocol") == ("duplicate", "stranded_partition")


def test_partition_lists_parse_as_the_offline_reader_does() -> None:
    assert parse_partitions("a:1,b:c:2,,x,y:z") == [("a", 1), ("b:c", 2)]
    assert parse_partitions(None) == []


def test_bad_events_do_not_raise_from_the_tap() -> None:
    m = Monitor()
    bad: list[Callable[[], None]] = [
        lambda: m({"kind": "offsets_committed", "protocol": "consumer"}),
        lambda: m({"kind": "processed", "protocol": "consumer", "t_emu_ms": "x"}),
        lambda: m({"kind": "partitions_assigned", "member": "c", "partitions": "??"}),
    ]
    for call in bad:
        call()
    m.finish()
    assert m.stats()["events"] == 3


# ------------------------------------------------- a whole run on the sim engine


def test_a_sim_run_of_the_zombie_story_is_clean_and_agrees_with_its_logs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``zombie-double-consume`` on the sim engine with the monitor as every writer's tap.

    The engine has no monitor hook yet, so the test hands the monitor to every
    event writer the run makes (``RunContext.writer``'s ``tap``). The story's
    zombie (c-1, expelled while paused) is allowed everywhere: no violation,
    not even of strict safety (c-1 was removed before its partitions moved on);
    the monitor saw every event the logs hold, and its processing windows are
    the run summary's.
    """
    from actors.context import RunContext
    from actors.orchestrator import run_scenario
    from actors.sim.run import SimEngine
    from emulator.eventlog import ReadStats, read_run_events
    from emulator.scenario import bundled_scenarios, load_scenario

    monitor = Monitor()
    writer = RunContext.writer

    def tapped(
        self: RunContext,
        actor: str,
        clock: ScaledClock | None = None,
        *,
        node: str | None = None,
        tap: Callable[[Event], None] | None = None,
    ) -> EventWriter:
        assert tap is None  # nothing else taps the writers of a sim run today
        return writer(self, actor, clock, node=node, tap=monitor)

    monkeypatch.setattr(RunContext, "writer", tapped)
    protocols = ["zookeeper", "classic-eager"]
    scenario = load_scenario(bundled_scenarios()["zombie-double-consume"])
    out = tmp_path / "run"
    run_scenario(scenario, protocols, out, engine=SimEngine())
    monitor.finish()
    assert monitor.violations == []
    manifest = json.loads((out / "manifest.json").read_text())
    stats = monitor.stats()["protocols"]
    assert isinstance(stats, dict)
    for protocol in protocols:
        logged = sum(1 for _ in read_run_events(out / protocol / "events", ReadStats()))
        assert stats[protocol]["events"] == logged
        counted = monitor.counted(protocol)
        counts = manifest["protocols"][protocol]["counts"]
        assert counted.get(DOUBLE_PROCESSING, 0) == counts["double_processing"]
        assert counted.get(ORDERING_OVERLAP, 0) == counts["ordering_overlap"]
        assert counts["double_processing"] + counts["ordering_overlap"] >= 1
        assert counted.get(DOUBLE_OWNERSHIP, 0) >= 1  # the zombie and the new owner
        assert LOSS not in counted and counts["unprocessed"] == 0
    # the legacy zombie's offset commits land (plain ZooKeeper writes): allowed there
    assert monitor.counted("zookeeper").get(COMMIT_BY_NON_OWNER, 0) >= 1
    assert monitor.counted("classic-eager").get(COMMIT_BY_NON_OWNER, 0) == 0
