"""Episode logic on hand-built histories (analysis.episodes, no Spark).

Each history is written the way the group timeline, ownership intervals and
marks of a real run look, small enough to check every number by hand.
"""

from __future__ import annotations

import pytest

from analysis.episodes import (
    FORMATION,
    AnomalyRow,
    Change,
    History,
    Hold,
    Mark,
    Owned,
    Segment,
    Span,
    TopicLife,
    disturbed_spans,
    episodes,
)
from emulator.intervals import merge_spans


def seg(s: float, e: float, live: int = 2, idle: int = 0, reb: int = 0, busy: int = 0) -> Segment:
    return Segment(s, e, live, idle, reb, busy)


def two_members(t_end: float = 60_000.0) -> History:
    """c-0 and c-1 form a group over 0..1000 and own t:0..t:3 (two each) from 1000."""
    h = History(protocol="classic-eager", t_start=0.0, t_end=t_end)
    h.segments = [seg(0, 1000, reb=2, idle=2), seg(1000, t_end)]
    return h


def test_merge_spans_joins_touching_and_overlapping() -> None:
    assert merge_spans([(5, 6), (0, 2), (2, 3), (2.5, 4), (7, 7)]) == [(0, 4), (5, 6)]


def test_formation_is_its_own_episode() -> None:
    h = two_members()
    h.owned = [Owned(f"t:{p}", f"c-{p % 2}", 1000, 60_000) for p in range(4)]
    h.gaps = [Span(f"t:{p}", 0, 1000) for p in range(4)]
    (ep,) = episodes(h)
    assert ep.kind == FORMATION
    assert ep.stable_ms == 1000 and ep.time_to_stable_ms == 1000
    assert ep.partitions_moved == 0 and ep.partitions_revoked == 0
    # four partitions unowned for 1 s while members lived; two members idle 1 s
    assert ep.partition_unavailable_s == pytest.approx(4.0)
    assert ep.idle_member_s == pytest.approx(2.0)
    assert ep.coordinator_requests is None and ep.generation_bumps == 0


def test_eager_join_revokes_everything_and_returns_most_to_the_same_owner() -> None:
    h = two_members()
    h.changes = [Change(10_000, "join", ("c-2",), index=0)]
    # c-2 starts at 10 s; eager: both revoke everything at 11 s, all reassigned at 12 s
    h.segments = [
        seg(0, 1000, reb=2, idle=2),
        seg(1000, 10_000),
        seg(10_000, 11_000, live=3, idle=1, reb=1),
        seg(11_000, 12_000, live=3, idle=3, reb=3, busy=1),
        seg(12_000, 60_000, live=3, idle=0),
    ]
    h.owned = [
        Owned("t:0", "c-0", 1000, 11_000, released=True),
        Owned("t:2", "c-0", 1000, 11_000, released=True),
        Owned("t:1", "c-1", 1000, 11_000, released=True),
        Owned("t:3", "c-1", 1000, 11_000, released=True),
        Owned("t:0", "c-0", 12_000, 60_000),
        Owned("t:1", "c-0", 12_000, 60_000),  # moved c-1 -> c-0
        Owned("t:2", "c-1", 12_000, 60_000),  # moved c-0 -> c-1
        Owned("t:3", "c-2", 12_000, 60_000),  # moved c-1 -> c-2
    ]
    h.gaps = [Span(f"t:{p}", 11_000, 12_000) for p in range(4)]
    h.marks = [Mark(10_500, "generation", 1), Mark(12_000, "generation", 2)]
    form, join = episodes(h)
    assert form.kind == FORMATION and form.stable_ms == 1000
    assert join.kind == "join" and join.members == ["c-2"]
    assert join.time_to_stable_ms == 2000
    assert join.partitions_revoked == 4
    assert join.partitions_moved == 3
    assert join.revoked_without_need == 1  # t:0 went back to c-0
    assert join.partition_unavailable_s == pytest.approx(4.0)
    # idle while disturbed: 1 member for 1 s, then 3 members for 1 s
    assert join.idle_member_s == pytest.approx(4.0)
    assert join.generation_bumps == 2
    assert join.time_to_detect_ms is None  # a join is not detected, it announces itself


def test_overlapping_changes_merge_into_one_episode() -> None:
    h = two_members()
    h.changes = [
        Change(10_000, "crash", ("c-1",), index=0),
        Change(12_000, "join", ("c-2",), index=1),
        Change(40_000, "leave", ("c-0",), index=2),
    ]
    # c-1's partitions unowned from the crash until 15 s: still disturbed at 12 s
    h.gaps = [Span("t:1", 10_000, 15_000), Span("t:3", 10_000, 15_000)]
    h.segments = [
        seg(0, 1000, reb=2, idle=2),
        seg(1000, 10_000),
        seg(10_000, 12_000, live=1),
        seg(12_000, 15_000, live=2, idle=1, reb=1),
        seg(15_000, 40_000, live=2),
        seg(40_000, 41_000, live=1, reb=1),
        seg(41_000, 60_000, live=1),
    ]
    h.marks = [Mark(14_000, "member_removed"), Mark(14_100, "rebalance", member="c-0")]
    eps = episodes(h)
    assert [e.kind for e in eps] == [FORMATION, "crash+join", "leave"]
    both = eps[1]
    assert both.overlapped and both.actions == ["crash", "join"]
    assert both.members == ["c-1", "c-2"]
    assert both.start_ms == 10_000 and both.stable_ms == 15_000
    assert both.window_end_ms == 40_000
    assert both.time_to_detect_ms == 4000  # the coordinator removed c-1 at 14 s
    assert both.partition_unavailable_s == pytest.approx(10.0)
    assert not eps[2].overlapped and eps[2].time_to_stable_ms == 1000


def test_a_change_during_formation_merges_with_formation() -> None:
    h = History(protocol="consumer", t_start=0.0, t_end=30_000.0)
    h.changes = [Change(2000, "join", ("c-2",), index=0)]
    h.segments = [seg(0, 2000, reb=2, idle=2), seg(2000, 5000, live=3, reb=3), seg(5000, 30_000, 3)]
    eps = episodes(h)
    assert [e.kind for e in eps] == ["formation+join"]
    assert eps[0].overlapped and eps[0].stable_ms == 5000


def test_a_change_that_never_settles_before_the_end() -> None:
    h = two_members(t_end=30_000.0)
    h.changes = [Change(20_000, "crash", ("c-1",), index=0)]
    h.segments = [seg(0, 1000, reb=2, idle=2), seg(1000, 20_000), seg(20_000, 30_000, live=1)]
    h.gaps = [Span("t:1", 20_000, 30_000)]  # nobody took t:1 before the end
    form, crash = episodes(h)
    assert form.settled
    assert not crash.settled and crash.stable_ms is None and crash.time_to_stable_ms is None
    assert crash.time_to_detect_ms is None  # nobody reacted either
    assert crash.partition_unavailable_s == pytest.approx(10.0)
    assert crash.to_dict()["settled"] is False


def test_a_short_pause_is_stable_when_it_clears_and_never_detected() -> None:
    h = two_members()
    h.changes = [Change(10_000, "pause", ("c-1",), index=0, cleared_ms=15_000)]
    _, pause = episodes(h)
    assert pause.time_to_detect_ms is None
    assert pause.stable_ms == 15_000 and pause.time_to_stable_ms == 5000


def test_a_long_pause_is_detected_by_the_others_and_ends_after_the_zombie_wakes() -> None:
    h = History(protocol="zookeeper", t_start=0.0, t_end=60_000.0)
    h.changes = [Change(10_000, "pause", ("c-1",), index=0, cleared_ms=30_000)]
    h.segments = [
        seg(0, 1000, reb=2, idle=2),
        seg(1000, 16_000),
        seg(16_000, 17_000, reb=1),  # c-0 rebalances once c-1's session expired
        seg(17_000, 30_000),
        seg(30_000, 31_000, reb=2),  # the zombie wakes and both rebalance
        seg(31_000, 60_000),
    ]
    h.doubled = [Span("t:1", 17_000, 30_000)]  # c-0 took t:1, the zombie still holds it
    h.marks = [
        Mark(16_000, "rebalance", member="c-0"),
        Mark(16_500, "zk_ops", 40),
        Mark(30_200, "zk_ops", 60),
        Mark(30_000, "rebalance", member="c-1"),
    ]
    _, pause = episodes(h)
    assert pause.time_to_detect_ms == 6000
    assert pause.stable_ms == 31_000
    assert pause.zk_ops == 100 and pause.generation_bumps is None
    assert pause.coordinator_requests is None


def test_rolling_restart_actions_of_one_timeline_entry_are_one_change() -> None:
    h = two_members()
    h.changes = [
        Change(10_000, "restart", ("c-0",), index=3),
        Change(12_000, "restart", ("c-1",), index=3),
        Change(40_000, "restart", ("c-0",), index=4),
    ]
    h.segments = [
        seg(0, 1000, reb=2, idle=2),
        seg(1000, 10_000),
        seg(10_000, 11_000, reb=1),
        seg(11_000, 12_000),
        seg(12_000, 13_500, reb=1),
        seg(13_500, 60_000),
    ]
    eps = episodes(h)
    assert [e.kind for e in eps] == [FORMATION, "restart", "restart"]
    assert eps[1].members == ["c-0", "c-1"] and not eps[1].overlapped
    assert eps[1].stable_ms == 13_500 and eps[1].time_to_stable_ms == 3500


def test_anomalies_are_counted_in_the_window_they_start_in() -> None:
    h = two_members()
    h.changes = [Change(10_000, "crash", ("c-1",), index=0), Change(40_000, "join", ("c-2",))]
    h.anomalies = [
        AnomalyRow("duplicate", "redelivered_after_crash", 20_000, 20_500, 120),
        AnomalyRow("duplicate", "uncommitted_after_revoke", 41_000, 41_100, 7),
        AnomalyRow("duplicate", "redelivered_after_crash", 22_000, 22_100, 5),
        AnomalyRow("loss", "unprocessed_at_end", 59_000, 59_000, 3),
        AnomalyRow("double_processing", None, 39_000, 41_000, 0),
        AnomalyRow("ordering_overlap", None, 39_500, 40_500, 0),
        AnomalyRow("double_ownership", None, 5000, 6000, 0),
    ]
    _, crash, join = episodes(h)
    assert crash.duplicates == 125
    assert crash.duplicates_by_cause == {"redelivered_after_crash": 125}
    assert crash.double_processing_s == pytest.approx(1.0)  # clipped at 40 s
    assert crash.ordering_overlap_s == pytest.approx(0.5)
    assert join.duplicates == 7 and join.loss == 3
    assert join.loss_by_cause == {"unprocessed_at_end": 3}


def test_lag_peak_and_recovery() -> None:
    h = two_members()
    h.changes = [Change(10_000, "crash", ("c-1",), index=0)]
    # 10 messages behind before the crash; up to 210; back to 20 (within 10% of the rise) at 16 s
    h.lag = [
        (t * 1000.0, v)
        for t, v in enumerate(
            [0, 10, 10, 10, 10, 10, 10, 10, 10, 10, 60, 110, 210, 150, 90, 40, 20, 10, 10, 10]
        )
    ]
    _, crash = episodes(h)
    assert crash.peak_lag == 210
    assert crash.lag_recovery_ms == 7000  # the bucket 16..17 s
    h.lag = [(t * 1000.0, v) for t, v in enumerate([10] * 10 + [60, 110, 210, 150])]
    _, crash = episodes(h)
    assert crash.lag_recovery_ms is None  # still behind when the window closed


def test_coordinator_requests_between_snapshots() -> None:
    h = two_members()
    h.protocol = "classic-cooperative"
    h.changes = [Change(10_000, "join", ("c-2",)), Change(30_000, "leave", ("c-0",))]
    # snapshots after each change, and at the end of the timeline
    h.requests = [(10_050, 400), (30_020, 950), (59_000, 1400)]
    form, join, leave = episodes(h)
    assert form.coordinator_requests == 400
    assert join.coordinator_requests == 550
    assert leave.coordinator_requests == 450


def test_commit_failures_in_the_window() -> None:
    h = two_members()
    h.changes = [Change(10_000, "pause", ("c-1",), cleared_ms=20_000)]
    h.marks = [Mark(20_100, "commit_failed", 2), Mark(5000, "commit_failed")]
    form, pause = episodes(h)
    assert form.commit_failures == 1 and pause.commit_failures == 2


def test_a_cut_short_run_leaves_its_last_episode_unsettled() -> None:
    h = two_members()
    h.changes = [Change(10_000, "join", ("c-2",))]
    h.complete = False
    form, join = episodes(h)
    assert form.settled and join.cut_short and not join.settled


def test_disturbed_ignores_unowned_partitions_without_live_members() -> None:
    h = History(protocol="classic-eager", t_start=0.0, t_end=10_000.0)
    h.segments = [seg(0, 5000, live=1), seg(5000, 10_000, live=0)]
    h.gaps = [Span("t:0", 4000, 10_000)]
    assert disturbed_spans(h) == [(4000, 5000)]


def test_lag_noise_within_one_bucket_of_production_is_no_rise() -> None:
    h = two_members()
    h.changes = [Change(10_000, "join", ("c-2",), index=0)]
    h.produced_per_bucket = 120.0  # 120 messages a second
    # a steady group's lag wobbles with its batches: 20..34 is not a rise
    h.lag = [(t * 1000.0, v) for t, v in enumerate([20, 25, 20, 30, 22] * 2 + [34, 28, 20, 31])]
    _, join = episodes(h)
    assert join.peak_lag == 34 and join.lag_recovery_ms == 0.0
    # a real rise must come back to within one bucket's production of the lag before
    h.lag = [(t * 1000.0, v) for t, v in enumerate([20] * 10 + [500, 300, 150, 90])]
    _, join = episodes(h)
    assert join.lag_recovery_ms == 4000.0  # 90 <= 20 + max(48, 120), bucket 13..14 s


def topic_run() -> History:
    """c-0 and c-1 own t:0..t:3; ``fresh`` is created at 10.05 s and c-1 claims it at
    14 s after a rebalance; ``gone`` (their own topic, held by c-0 and c-1) is deleted at
    30.04 s, c-0 lets go of gone:0 at 30.5 s and c-1 of gone:1 at 31.2 s."""
    h = two_members()
    h.changes = [
        Change(10_000, "create_topic", index=0, topic="fresh"),
        Change(30_000, "delete_topic", index=1, topic="gone"),
    ]
    h.topics = [
        TopicLife("fresh", "fresh", 10_050, None),
        TopicLife("gone", "gone", None, 30_040),
    ]
    h.owned = [Owned("fresh:0", "c-1", 14_000, 60_000)]
    h.owned += [Owned(f"gone:{p}", f"c-{p}", 1000, 30_040) for p in range(2)]
    h.holds = [
        Hold("gone:0", "c-0", 30_040, 30_500, "released"),
        Hold("gone:1", "c-1", 30_040, 31_200, "released"),
    ]
    h.gaps = [Span("fresh:0", 10_050, 14_000)]
    h.segments = [
        seg(0, 1000, reb=2, idle=2),
        seg(1000, 13_000),
        seg(13_000, 14_000, reb=1),
        seg(14_000, 30_400),
        seg(30_400, 31_200, reb=2),
        seg(31_200, 60_000),
    ]
    h.marks = [
        Mark(12_900, "rebalance", member="c-1"),
        Mark(13_000, "rebalance_started", member="c-1"),
        Mark(30_400, "rebalance_started", member="c-0"),
        Mark(30_400, "rebalance_started", member="c-1"),
        Mark(31_000, "rebalance_started", member="c-1"),
    ]
    return h


def test_a_created_topic_s_discovery_delay() -> None:
    """From the topic's ``topic_created`` (not the action) to the first claim of it."""
    _, created, deleted = episodes(topic_run())
    assert created.kind == "create_topic" and created.topic == "fresh"
    assert created.topic_discovery_ms == pytest.approx(3950.0)
    assert created.topic_release_ms is None
    # unowned from its creation until the claim: the group is disturbed until then
    assert created.time_to_stable_ms == pytest.approx(4000.0)
    assert created.partition_unavailable_s == pytest.approx(3.95)
    assert created.rebalances == 1 and created.members_disturbed == 1
    assert deleted.topic_discovery_ms is None


def test_a_deleted_topic_is_let_go_when_the_last_hold_ends() -> None:
    _, _, deleted = episodes(topic_run())
    assert deleted.topic == "gone"
    assert deleted.topic_release_ms == pytest.approx(1160.0)  # c-1 at 31.2 s
    assert deleted.time_to_stable_ms == pytest.approx(1200.0)
    assert deleted.rebalances == 3 and deleted.members_disturbed == 2
    # ownership ended at the deletion: no partition unowned after it
    assert deleted.partition_unavailable_s == 0.0


def test_topic_metrics_are_none_when_nothing_happened() -> None:
    h = topic_run()
    h.owned = [o for o in h.owned if not o.partition.startswith("fresh")]
    h.holds = [h.holds[0], Hold("gone:1", "c-1", 30_040, 60_000, "held_to_end")]
    _, created, deleted = episodes(h)
    assert created.topic_discovery_ms is None  # nobody ever owned it
    assert deleted.topic_release_ms is None  # c-1 held gone:1 to the end
    h.holds = []
    assert episodes(h)[2].topic_release_ms == 0.0  # nobody held it at the deletion
    h.topics = [TopicLife("gone", "gone", None, None)]  # delete.topic.enable false
    assert episodes(h)[2].topic_release_ms is None


def test_a_re_created_topic_s_discovery_counts_from_its_own_creation() -> None:
    """The second create of a name is measured on its incarnation (t#2), not the first."""
    h = two_members()
    h.changes = [
        Change(10_000, "delete_topic", index=0, topic="t"),
        Change(20_000, "create_topic", index=1, topic="t"),
    ]
    h.topics = [TopicLife("t", "t", None, 10_030), TopicLife("t#2", "t", 20_040, None)]
    h.owned = [Owned("t:0", "c-0", 1000, 10_030), Owned("t#2:0", "c-1", 21_000, 60_000)]
    _, _, created = episodes(h)
    assert created.topic == "t" and created.topic_discovery_ms == pytest.approx(960.0)


def _owner_by_scan(owned: list[Owned], t: float) -> str | None:
    """The definition: the latest claim holding ``t``; of equal starts, the first listed."""
    best: Owned | None = None
    for o in owned:
        if o.s <= t < o.e and (best is None or o.s > best.s):
            best = o
    return None if best is None else best.member


def test_owners_answer_as_a_scan_of_the_claims_does() -> None:
    """``Owners.at`` (a sweep, then binary searches) against the scan it replaced, on
    random claims with shared starts and ends, empty and reversed ones, open ends,
    asked at every boundary, just around it and between."""
    import random

    from analysis.episodes import Owners

    rng = random.Random(11)
    for _ in range(300):
        by_partition: dict[str, list[Owned]] = {}
        for p in ("t:0", "t:1", "t:2"):
            claims = []
            for _ in range(rng.randint(0, 12)):
                s = float(rng.randint(0, 20))
                e = rng.choice([s + rng.randint(0, 8), s - 1, float("inf")])
                claims.append(Owned(p, f"c-{rng.randint(0, 4)}", s, e))
            by_partition[p] = claims
        owners = Owners(by_partition)
        times = [x / 2 for x in range(-2, 60)] + [1e9, float("inf")]
        for p, claims in by_partition.items():
            for t in times:
                assert owners.at(p, t) == _owner_by_scan(claims, t), (p, t, claims)
        assert owners.at("t:9", 1.0) is None
