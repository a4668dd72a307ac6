"""The controller's pure decisions (emulator/controller.py), one hand-built case per branch."""

from __future__ import annotations

import pytest

from emulator.controller import (
    NO_LEADER,
    LeaderIsr,
    caught_up_for_expand,
    imbalance,
    new_partition_leader,
    offline_leader,
    out_of_sync_replicas,
    partitions_to_rebalance,
    preferred_leader,
    remove_replica_from_isr,
)

# --------------------------------------------------------------------------- New -> Online


def test_new_partition_leader_is_first_live_replica_and_isr_all_live_in_assignment_order() -> None:
    st = new_partition_leader([3, 1, 2], live={1, 2}, controller_epoch=4)
    assert st == LeaderIsr(leader=1, leader_epoch=0, isr=(1, 2), controller_epoch=4)


def test_new_partition_all_live() -> None:
    assert new_partition_leader([2, 0, 1], [0, 1, 2], 1) == LeaderIsr(2, 0, (2, 0, 1), 1)


def test_new_partition_without_live_replica_stays_new() -> None:
    assert new_partition_leader([1, 2], live={0, 3}, controller_epoch=1) is None


# --------------------------------------------------------------------------- offline election


def test_offline_picks_first_live_isr_member_in_assignment_order() -> None:
    # Assignment order 3, 2, 1; ISR stored as (1, 2, 3); 3 is dead.
    cur = LeaderIsr(3, 7, (1, 2, 3), 1)
    new, reason = offline_leader([3, 2, 1], cur, live={1, 2}, unclean=False, controller_epoch=2)
    assert reason == "offline"
    # Leader by assignment order (2, not the ISR's first, 1); ISR = live ISR in stored order.
    assert new == LeaderIsr(2, 8, (1, 2), 2)


def test_offline_ignores_live_replicas_outside_isr_when_isr_alive() -> None:
    cur = LeaderIsr(1, 0, (1, 3), 1)
    new, reason = offline_leader([1, 2, 3], cur, live={2, 3}, unclean=True, controller_epoch=1)
    assert (new, reason) == (LeaderIsr(3, 1, (3,), 1), "offline")


def test_offline_unclean_enabled_elects_first_live_assigned_with_isr_of_one() -> None:
    cur = LeaderIsr(1, 5, (1,), 1)
    new, reason = offline_leader([1, 3, 2], cur, live={2, 3}, unclean=True, controller_epoch=3)
    assert reason == "unclean"
    assert new == LeaderIsr(3, 6, (3,), 3)


def test_offline_unclean_disabled_with_dead_isr_stays_offline() -> None:
    cur = LeaderIsr(1, 5, (1,), 1)
    new, reason = offline_leader([1, 2, 3], cur, live={2, 3}, unclean=False, controller_epoch=3)
    assert (new, reason) == (None, "no_replica_online")


def test_offline_no_replica_online_even_with_unclean() -> None:
    cur = LeaderIsr(1, 0, (1, 2), 1)
    new, reason = offline_leader([1, 2], cur, live={5}, unclean=True, controller_epoch=1)
    assert (new, reason) == (None, "no_replica_online")


def test_offline_with_empty_isr_and_leader_minus_one() -> None:
    # After removeReplicaFromIsr emptied the ISR (unclean enabled), a returning replica leads.
    cur = LeaderIsr(NO_LEADER, 3, (), 1)
    new, reason = offline_leader([1, 2], cur, live={1}, unclean=True, controller_epoch=1)
    assert (new, reason) == (LeaderIsr(1, 4, (1,), 1), "unclean")
    new, reason = offline_leader([1, 2], cur, live={1}, unclean=False, controller_epoch=1)
    assert (new, reason) == (None, "no_replica_online")


# --------------------------------------------------------------------------- preferred


def test_preferred_moves_leadership_to_head_keeping_isr() -> None:
    cur = LeaderIsr(2, 4, (2, 1), 1)
    assert preferred_leader([1, 2], cur, live={1, 2}, controller_epoch=2) == LeaderIsr(
        1, 5, (2, 1), 2
    )


def test_preferred_already_leader_is_not_needed() -> None:
    assert preferred_leader([1, 2], LeaderIsr(1, 0, (1, 2), 1), {1, 2}, 1) is None


def test_preferred_not_in_isr_fails() -> None:
    assert preferred_leader([1, 2], LeaderIsr(2, 3, (2,), 1), {1, 2}, 1) is None


def test_preferred_dead_fails() -> None:
    assert preferred_leader([1, 2], LeaderIsr(2, 3, (2, 1), 1), {2}, 1) is None


def test_preferred_empty_assignment() -> None:
    assert preferred_leader([], LeaderIsr(2, 3, (2, 1), 1), {2}, 1) is None


# --------------------------------------------------------------------------- ISR removal


def test_remove_dead_follower_from_isr() -> None:
    cur = LeaderIsr(1, 2, (1, 2, 3), 1)
    assert remove_replica_from_isr(cur, 2, controller_epoch=5) == LeaderIsr(1, 3, (1, 3), 5)


def test_remove_dead_leader_sets_no_leader() -> None:
    cur = LeaderIsr(1, 2, (1, 2), 1)
    assert remove_replica_from_isr(cur, 1, controller_epoch=1) == LeaderIsr(-1, 3, (2,), 1)


def test_remove_replica_not_in_isr_writes_nothing() -> None:
    assert remove_replica_from_isr(LeaderIsr(1, 2, (1,), 1), 3, 1) is None


def test_remove_last_isr_member() -> None:
    cur = LeaderIsr(1, 2, (1,), 1)
    # unclean enabled: the ISR becomes empty.
    assert remove_replica_from_isr(cur, 1, 1) == LeaderIsr(NO_LEADER, 3, (), 1)
    # unclean disabled (KAFKA-1028): the last ISR member is retained, the leader still goes.
    assert remove_replica_from_isr(cur, 1, 1, unclean_leader_election_enable=False) == LeaderIsr(
        NO_LEADER, 3, (1,), 1
    )


def test_remove_last_isr_member_that_is_not_the_leader() -> None:
    cur = LeaderIsr(NO_LEADER, 4, (2,), 1)
    assert remove_replica_from_isr(cur, 2, 1, unclean_leader_election_enable=False) == LeaderIsr(
        NO_LEADER, 5, (2,), 1
    )


# --------------------------------------------------------------------------- auto rebalance


def _ten_partitions_preferring_1(
    not_led: int,
) -> tuple[dict[tuple[str, int], list[int]], dict[tuple[str, int], int]]:
    assignments = {("t", p): [1, 2] for p in range(10)}
    leaders = {("t", p): (2 if p < not_led else 1) for p in range(10)}
    return assignments, leaders


def test_imbalance_ratio_per_preferred_broker() -> None:
    assignments = {("t", 0): [1, 2], ("t", 1): [1, 2], ("t", 2): [2, 1], ("u", 0): [2, 1]}
    leaders = {("t", 0): 2, ("t", 1): 1, ("t", 2): 2, ("u", 0): 1}
    assert imbalance(assignments, leaders) == {1: 0.5, 2: 0.5}
    assert imbalance(assignments, leaders, live={2}) == {2: 0.5}


def test_imbalance_partition_without_state_counts_only_in_denominator() -> None:
    assignments = {("t", 0): [1], ("t", 1): [1], ("t", 2): [1], ("t", 3): [1]}
    leaders = {("t", 0): 2, ("t", 1): NO_LEADER, ("t", 2): 1}  # ("t", 3) has no state
    assert imbalance(assignments, leaders) == {1: 0.5}


def test_rebalance_exactly_at_threshold_does_nothing() -> None:
    assignments, leaders = _ten_partitions_preferring_1(not_led=1)
    assert imbalance(assignments, leaders, {1, 2}) == {1: 0.1}
    assert partitions_to_rebalance(assignments, leaders, {1, 2}, percentage=10) == []


def test_rebalance_above_threshold_moves_every_non_preferred_partition() -> None:
    assignments, leaders = _ten_partitions_preferring_1(not_led=2)
    assert partitions_to_rebalance(assignments, leaders, {1, 2}, percentage=10) == [
        ("t", 0),
        ("t", 1),
    ]
    # A higher threshold: 20% is not > 20%.
    assert partitions_to_rebalance(assignments, leaders, {1, 2}, percentage=20) == []


def test_rebalance_thirty_percent_at_thirty_is_not_above() -> None:
    assignments, leaders = _ten_partitions_preferring_1(not_led=3)
    assert partitions_to_rebalance(assignments, leaders, {1, 2}, percentage=30) == []
    assert len(partitions_to_rebalance(assignments, leaders, {1, 2}, percentage=29)) == 3


def test_rebalance_skips_dead_preferred_broker() -> None:
    assignments = {("t", 0): [1, 2], ("t", 1): [2, 1]}
    leaders = {("t", 0): 2, ("t", 1): 1}
    # Both brokers are 100% imbalanced; only the live one's partitions are returned.
    assert partitions_to_rebalance(assignments, leaders, live={2}, percentage=10) == [("t", 1)]
    assert partitions_to_rebalance(assignments, leaders, live={1, 2}, percentage=10) == [
        ("t", 0),
        ("t", 1),
    ]


def test_rebalance_per_broker_not_global() -> None:
    # Broker 1: 1 of 2 not led (50%); broker 2: 0 of 8 (0%). Global 1/10 = 10% would not fire.
    assignments = {("t", p): ([1, 2] if p < 2 else [2, 1]) for p in range(10)}
    leaders = {("t", p): 2 for p in range(10)}
    leaders[("t", 1)] = 1
    assert partitions_to_rebalance(assignments, leaders, {1, 2}, 10) == [("t", 0)]


# --------------------------------------------------------------------------- ISR shrink/expand


def test_out_of_sync_stuck_and_slow() -> None:
    isr = {1, 2, 3, 4}
    last = {2: 0.0, 3: 9_000.0, 4: 9_500.0}
    leo = {2: 4990, 3: 4990, 4: 999}
    # now 10_001: 2 has not fetched for 10_001 ms > 10_000 (stuck); 3 fetched 1_001 ms ago
    # and lags 10 messages (in sync); 4 lags 5000 - 999 = 4001 > 4000 messages (slow).
    out = out_of_sync_replicas(1, isr, last, leo, leader_leo=5000, now_ms=10_001)
    assert out == {2, 4}


def test_out_of_sync_boundaries_are_strict() -> None:
    # Exactly lag_time_max_ms since the last fetch and exactly lag_max_messages behind: in sync.
    out = out_of_sync_replicas(1, [1, 2], {2: 0.0}, {2: 1000}, leader_leo=5000, now_ms=10_000)
    assert out == set()
    out = out_of_sync_replicas(1, [1, 2], {2: 0.0}, {2: 999}, leader_leo=5000, now_ms=10_000)
    assert out == {2}
    out = out_of_sync_replicas(1, [1, 2], {2: 0.0}, {2: 1000}, leader_leo=5000, now_ms=10_001)
    assert out == {2}


def test_out_of_sync_never_the_leader_and_unknowns_are_in_sync() -> None:
    # The leader itself never counts; missing timestamps = now; unknown LEO (-1) is never slow.
    out = out_of_sync_replicas(1, [1, 2, 3], {1: -1e9}, {3: -1}, leader_leo=10**6, now_ms=50_000)
    assert out == set()


def test_out_of_sync_custom_limits() -> None:
    out = out_of_sync_replicas(
        1, [1, 2], {2: 0.0}, {2: 90}, 100, now_ms=50, lag_time_max_ms=40, lag_max_messages=5
    )
    assert out == {2}


@pytest.mark.parametrize(
    ("replica", "leo", "hw", "assigned", "isr", "expected"),
    [
        (2, 10, 10, [1, 2], [1], True),  # LEO reached the HW
        (2, 11, 10, [1, 2], [1], True),
        (2, 9, 10, [1, 2], [1], False),  # behind the HW
        (2, 10, 10, [1, 2], [1, 2], False),  # already in the ISR
        (3, 10, 10, [1, 2], [1], False),  # not an assigned replica (KAFKA-1097)
    ],
)
def test_caught_up_for_expand(
    replica: int, leo: int, hw: int, assigned: list[int], isr: list[int], expected: bool
) -> None:
    assert caught_up_for_expand(replica, leo, hw, assigned, isr) is expected
