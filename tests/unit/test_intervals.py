"""emulator.intervals: union, intersection, gaps and overlaps, edge cases first."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from emulator.intervals import (
    gaps,
    intersection,
    intersection_length,
    merge_spans,
    overlap_length,
    overlap_windows,
    overlaps,
    pairwise_overlaps,
    total_length,
    union,
)

spans = st.lists(
    st.tuples(st.integers(0, 60), st.integers(0, 60)).map(lambda p: (min(p), max(p))),
    max_size=12,
)


def points(ss: list[tuple[int, int]]) -> set[int]:
    """The integer points ``[s, e)`` covers: the brute-force reference."""
    return {t for s, e in ss for t in range(s, e)}


def test_touching_spans_join_and_do_not_overlap() -> None:
    assert union([(2, 3), (0, 2)]) == [(0, 3)]
    assert merge_spans([(2, 3), (0, 2)]) == [(0, 3)]
    assert not overlaps(0, 2, 2, 3)
    assert overlap_length(0.0, 2.0, 2.0, 3.0) == 0.0
    assert overlap_length(0.0, 2.0, 5.0, 9.0) == 0.0
    assert overlap_length(0.0, 10.0, 2.0, 4.0) == 2.0
    assert overlaps(0, 2, 1, 3)
    assert intersection([(0, 2)], [(2, 4)]) == []


def test_empty_spans_are_kept_by_union_and_dropped_by_merge() -> None:
    assert union([(5, 5), (0, 2)]) == [(0, 2), (5, 5)]
    assert merge_spans([(5, 5), (0, 2)]) == [(0, 2)]
    # Touching another span, an empty one disappears into it either way.
    assert union([(2, 2), (0, 2)]) == [(0, 2)]
    assert merge_spans([(5, 7), (0, 2), (2, 3), (6, 9), (4, 4)]) == [(0, 3), (5, 9)]


def test_gaps_with_an_empty_span_and_a_closed_open_interval() -> None:
    # The report closes an open ownership interval at the run's end first.
    end = 100.0
    assert gaps([(10.0, 20.0), (50.0, end)], 0.0, end) == [(0.0, 10.0), (20.0, 50.0)]
    # An empty span inside a gap splits it (as the report has always drawn it).
    assert gaps([(10.0, 20.0), (30.0, 30.0)], 0.0, 40.0) == [
        (0.0, 10.0),
        (20.0, 30.0),
        (30.0, 40.0),
    ]
    assert gaps([], 0.0, 5.0) == [(0.0, 5.0)]
    assert gaps([(0.0, 5.0)], 0.0, 5.0) == []


def test_intersection_and_lengths() -> None:
    assert intersection_length([(0, 10)], [(2, 4), (8, 12)]) == 4
    assert intersection([(0.0, 10.0)], [(2.0, 4.0), (8.0, 12.0)]) == [(2.0, 4.0), (8.0, 10.0)]
    assert intersection([(0, 5), (7, 9)], [(0, 5), (7, 9)]) == [(0, 5), (7, 9)]
    assert total_length([]) == 0
    assert total_length([(0, 3), (5, 9)]) == 7


def test_overlap_windows() -> None:
    assert overlap_windows([(0, 10, "a"), (5, 20, "b"), (15, 30, "a")]) == [
        (5, 10, ["a", "b"]),
        (15, 20, ["a", "b"]),
    ]
    # Touching intervals, one holder's own overlaps and empty intervals are not windows.
    assert overlap_windows([(0, 10, "a"), (10, 20, "b"), (5, 8, "a"), (3, 3, "c")]) == []
    assert overlap_windows([(0, 10, "a"), (2, 4, "b"), (3, 12, "c")]) == [(2, 10, ["a", "b", "c"])]


def test_pairwise_overlaps_one_row_per_pair() -> None:
    ivs = [(3.0, 12.0, "c"), (0.0, 10.0, "a"), (2.0, 4.0, "b"), (10.0, 11.0, "d")]
    assert pairwise_overlaps(ivs) == [
        (2.0, 4.0, "a", "b"),
        (3.0, 10.0, "a", "c"),
        (3.0, 4.0, "b", "c"),
        (10.0, 11.0, "c", "d"),
    ]
    # The same holder twice, touching and empty intervals: no pair.
    assert pairwise_overlaps([(0.0, 5.0, "a"), (1.0, 2.0, "a"), (5.0, 6.0, "b")]) == []
    assert pairwise_overlaps([(1.0, 1.0, "a"), (0.0, 2.0, "b")]) == []


@settings(max_examples=300, derandomize=True)
@given(spans, spans)
def test_against_brute_force(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> None:
    ma, mb = merge_spans(a), merge_spans(b)
    assert points(ma) == points(a)
    assert all(s < e for s, e in ma)
    assert all(x[1] < y[0] for x, y in itertools.pairwise(ma))  # disjoint, not touching
    assert total_length(ma) == len(points(a))
    assert intersection_length(ma, mb) == len(points(a) & points(b))
    assert points(intersection(ma, mb)) == points(a) & points(b)
    free = gaps([(float(s), float(e)) for s, e in a], 0.0, 60.0)
    assert points([(int(s), int(e)) for s, e in free]) == set(range(60)) - points(a)


@settings(max_examples=300, derandomize=True)
@given(spans, spans)
def test_windows_against_brute_force(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> None:
    held = [(s, e, "a") for s, e in a] + [(s, e, "b") for s, e in b]
    both = points(a) & points(b)
    assert points([(int(s), int(e)) for s, e, _ in overlap_windows(held)]) == both
    assert points([(int(s), int(e)) for s, e, _, _ in pairwise_overlaps(held)]) == both
