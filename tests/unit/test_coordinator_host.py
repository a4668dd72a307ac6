"""The coordinator host's heartbeat-gap accounting (a plain class, no Ray)."""

from __future__ import annotations

from typing import Any

from emulator.broker.coordinators import HEARTBEAT_GAP_BOUNDS_MS, CoordinatorHost
from emulator.modern.messages import (
    ConsumerGroupHeartbeatRequest,
    HeartbeatRequest,
    LeaveGroupRequest,
)


class _Silent:
    """A coordinator that answers nothing: only the host's bookkeeping is under test."""

    def handle(self, now_ms: float, req: Any) -> list[Any]:
        return []

    def poll(self, now_ms: float) -> list[Any]:
        return []

    def next_deadline(self) -> float | None:
        return None


def _host() -> CoordinatorHost:
    return CoordinatorHost(0, {0: 0}, lambda *_a: _Silent(), lambda *_a, **_k: None)


def _bucket(gap_ms: float) -> int:
    return next(
        (i for i, b in enumerate(HEARTBEAT_GAP_BOUNDS_MS) if gap_ms <= b),
        len(HEARTBEAT_GAP_BOUNDS_MS),
    )


def test_gaps_land_in_their_buckets() -> None:
    host = _host()
    corr = iter(range(1000))
    for t in (0.0, 3000.0, 7600.0, 60_000.0):
        host.exchange(t, "h", [HeartbeatRequest(next(corr), "g", 1, "m-1")])
    # a second member, on time; its first contact is no gap
    for t in (1000.0, 6000.0, 11_001.0):
        host.exchange(t, "h", [ConsumerGroupHeartbeatRequest(next(corr), "g", "m-2", 3)])
    stats = host.stats()
    hist = stats["heartbeat_gap_histogram"]
    assert len(hist) == len(HEARTBEAT_GAP_BOUNDS_MS) + 1
    assert sum(hist) == stats["heartbeat_gaps"] == 5
    expected = [0] * len(hist)
    for gap in (3000.0, 4600.0, 52_400.0, 5000.0, 5001.0):
        expected[_bucket(gap)] += 1
    assert hist == expected
    assert hist[-1] == 1  # 52.4 s: above the last bound (45 s)
    assert stats["heartbeat_gap_max_ms"] == 52_400.0


def test_a_leave_ends_the_series() -> None:
    host = _host()
    host.exchange(0.0, "h", [HeartbeatRequest(1, "g", 1, "m-1")])
    host.exchange(1.0, "h", [LeaveGroupRequest(2, "g", (("m-1", None),))])
    host.exchange(90_000.0, "h", [HeartbeatRequest(3, "g", 1, "m-1")])
    assert sum(host.stats()["heartbeat_gap_histogram"]) == 0


def test_offsets_snapshot_reads_either_protocols_coordinator() -> None:
    """A follower's replica fetch of ``__consumer_offsets`` copies this snapshot.

    It once called the KIP-848 coordinator's offsets as a method and its
    property as a dict, so every replica fetch from the broker hosting a
    ``consumer`` group failed: the followers never caught up and the ISRs
    shrank to the leader alone.
    """
    from emulator.broker.coordinators import make_coordinator_factory
    from emulator.modern.messages import OffsetCommitRequest

    for protocol in ("classic-eager", "consumer"):
        factory = make_coordinator_factory(protocol, {}, 0, 1, {"t": 2})
        host = CoordinatorHost(0, dict.fromkeys(range(50), 0), factory, lambda *_a, **_k: None)
        # A simple (non-member) commit: generation/epoch -1, no member id.
        host.exchange(
            0.0,
            "h",
            [
                OffsetCommitRequest(
                    1, "g", generation_id_or_member_epoch=-1, member_id="", offsets={("t", 0): 7}
                )
            ],
        )
        part = host.partition_for("g")
        assert host.offsets_snapshot(part) == {"g": {("t", 0): 7}}, protocol


def test_the_partitions_with_groups_are_those_with_a_snapshot() -> None:
    """A replica fetch skips :meth:`offsets_snapshot` for the others: it must be empty there."""
    from emulator.broker.coordinators import make_coordinator_factory
    from emulator.broker.messages import EMPTY_OFFSETS_SNAPSHOT
    from emulator.modern.messages import OffsetCommitRequest

    factory = make_coordinator_factory("classic-eager", {}, 0, 1, {"t": 2})
    host = CoordinatorHost(0, dict.fromkeys(range(50), 0), factory, lambda *_a, **_k: None)

    def agree() -> set[int]:
        with_groups = host.partitions_with_groups()
        for p in range(50):
            snap = host.offsets_snapshot(p)
            assert (p in with_groups) == bool(snap), p
            if not snap:
                assert snap is EMPTY_OFFSETS_SNAPSHOT
        return with_groups

    assert agree() == set()
    host.exchange(
        0.0,
        "h",
        [
            OffsetCommitRequest(
                1, "g", generation_id_or_member_epoch=-1, member_id="", offsets={("t", 0): 7}
            )
        ],
    )
    assert agree() == {host.partition_for("g")}
    other = next(p for p in range(50) if p != host.partition_for("g"))
    host.load_partition(other, {"loaded-group": {("t", 1): 3}})
    host.load_partition((other + 1) % 50, {})  # led, but no group in it
    assert agree() == {host.partition_for("g"), other}
