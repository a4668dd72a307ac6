"""The end-of-run summary, from hand-built histories."""

from __future__ import annotations

from emulator.summary import intersect_len, merge_ranges, summarize


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
