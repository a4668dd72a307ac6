"""The end-of-run summary, from hand-built histories."""

from __future__ import annotations

from emulator.intervals import intersection_length as intersect_len
from emulator.intervals import merge_spans as merge_ranges
from emulator.summary import summarize


def _ev(kind: str, p: int, s: int, e: int) -> dict[str, object]:
    return {"kind": kind, "topic": "t", "partition": p, "offset_start": s, "offset_end": e}


def test_ranges() -> None:
    assert merge_ranges([(5, 7), (0, 2), (2, 3), (6, 9), (4, 4)]) == [(0, 3), (5, 9)]
    assert intersect_len([(0, 10)], [(2, 4), (8, 12)]) == 4


def test_duplicates_and_unprocessed() -> None:
    evs = [
        _ev("produced", 0, 0, 100),
        _ev("produced", 1, 0, 50),
        _ev("processed", 0, 0, 60),
        _ev("processed", 0, 40, 100),  # 20 messages again: a rebalance replay
        _ev("processed", 1, 0, 30),  # 20 never processed
        {"kind": "rebalance_started"},
        {"kind": "attempt_started"},
        {"kind": "attempt_started"},
        {"kind": "claim_conflict"},
        {"kind": "rebalance_failed"},
    ]
    s = summarize(evs)
    assert (s.produced, s.processed) == (150, 150)
    assert s.duplicates == 20
    assert s.unprocessed == 20 and s.partitions_unprocessed == ["t:1"]
    assert (s.rebalances, s.attempts, s.conflicts, s.gave_up) == (1, 2, 1, 1)


def _busy(member: str, p: int, end_ms: float, took_ms: float) -> dict[str, object]:
    return {
        "kind": "processed",
        "topic": "t",
        "partition": p,
        "offset_start": 0,
        "offset_end": 1,
        "member": member,
        "t_emu_ms": end_ms,
        "duration_ms": took_ms,
    }


def test_double_processing_windows() -> None:
    from emulator.intervals import overlap_windows as double_processing_windows

    assert double_processing_windows([(0, 10, "a"), (5, 20, "b"), (15, 30, "a")]) == [
        (5.0, 10.0, ["a", "b"]),
        (15.0, 20.0, ["a", "b"]),
    ]
    # One member's back-to-back batches, and touching intervals, are not overlaps.
    assert double_processing_windows([(0, 10, "a"), (10, 20, "b"), (5, 8, "a")]) == []
    # Three members: one window while any two are busy.
    assert double_processing_windows([(0, 10, "a"), (2, 4, "b"), (3, 12, "c")]) == [
        (2.0, 10.0, ["a", "b", "c"])
    ]


def test_summary_reports_double_processing() -> None:
    evs = [
        _busy("c-0", 0, 1000, 1000),
        _busy("c-1", 0, 1500, 800),  # 700..1500 overlaps c-0's 0..1000 for 300 ms
        _busy("c-1", 1, 1000, 1000),
        _busy("c-2", 1, 3000, 1000),  # after c-1's batch: no overlap
    ]
    s = summarize(evs)
    assert s.double_processing == 1
    assert s.double_processing_ms == 300.0 and s.double_processing_max_ms == 300.0
    assert s.double_processing_partitions == ["t:0"]


def _at(kind: str, t: float, s: int, e: int, topic: str = "t") -> dict[str, object]:
    return {**_ev(kind, 0, s, e), "topic": topic, "t_emu_ms": t}


def test_a_topic_created_again_is_a_new_incarnation_and_a_deleted_ones_records_are_apart() -> None:
    """t is deleted at 50 s with offsets 60-100 unread and created again at 60 s.

    Offsets 0-40 of incarnation 2 are other records than 0-40 of incarnation 1:
    no duplicate; what incarnation 1 left unread went with it (not unprocessed);
    incarnation 2's unread offsets are unprocessed, labelled with the incarnation.
    """
    evs = [
        _at("produced", 10_000, 0, 100),
        _at("processed", 20_000, 0, 60),
        {"kind": "topic_deleted", "topic": "t", "incarnation": 1, "t_emu_ms": 50_000},
        {"kind": "topic_created", "topic": "t", "incarnation": 2, "t_emu_ms": 60_000},
        _at("produced", 61_000, 0, 50),
        _at("processed", 62_000, 0, 40),
        _at("produced", 61_000, 0, 10, topic="u"),
        _at("processed", 62_000, 0, 10, topic="u"),
    ]
    s = summarize(evs)
    assert s.duplicates == 0
    assert s.deleted_unprocessed == 40
    assert s.unprocessed == 10 and s.partitions_unprocessed == ["t#2:0"]
    # Without the topic events the same offsets read as repeats and unread records.
    plain = summarize([e for e in evs if not str(e["kind"]).startswith("topic_")])
    assert plain.duplicates == 40 and plain.unprocessed == 40
