"""Interval arithmetic over spans of time or offsets: union, intersection, gaps, overlaps.

One implementation for every part of the project that reasons about spans:
the end-of-run summary (:mod:`emulator.summary`, offsets as half-open
ranges and processing intervals), the episode logic of the analysis
(``analysis.episodes``: disturbed spans) and the report's ownership plots
(``analysis.report``: double ownership and unowned gaps). The Spark checkers
sweep the same intervals with window functions over DataFrames (they never
collect the events); :func:`overlap_windows` is the reference their
``analysis.frames.busy_windows`` reproduces.

A span is ``(start, end)``, read as ``[start, end)``. The edge cases are part
of the contract, because the numbers computed from them are the evidence of a
run:

* touching spans (``end == start``) join in a union and do not overlap;
* an empty span (``start == end``) is dropped by :func:`merge_spans` but kept
  by :func:`union` (where it still splits a gap in :func:`gaps`: the report
  has always drawn it so);
* an open interval has no end here: callers close it first (the run's end);
* two members at once are one row per maximal window in
  :func:`overlap_windows` (the summary's and the checkers' double processing,
  the checkers' double ownership) but one row per pair in
  :func:`pairwise_overlaps` (the report's double-ownership bars).

Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import TypeVar

N = TypeVar("N", int, float)
"""A position: an offset (``int``) or a time in ms (``float``)."""

Holder = tuple[float, float, str]
"""Someone holding something over a span: ``(start, end, who)``."""


def union(spans: Iterable[tuple[N, N]]) -> list[tuple[N, N]]:
    """The union of spans as sorted, disjoint spans, every span taken as given.

    Touching and overlapping spans join. An empty span that touches no other
    stays in the result as its own ``(t, t)``: callers that want only
    positive lengths use :func:`merge_spans`.

    Args:
        spans: ``(start, end)`` pairs, any order.

    Returns:
        The union, sorted by start.
    """
    out: list[tuple[N, N]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def merge_spans(spans: Iterable[tuple[N, N]]) -> list[tuple[N, N]]:
    """The union of the non-empty spans: sorted, disjoint, each of positive length.

    Args:
        spans: ``(start, end)`` pairs, any order; those with ``end <= start``
            are dropped.

    Returns:
        The union, sorted by start (touching spans joined).
    """
    return union(s for s in spans if s[1] > s[0])


def total_length(spans: Iterable[tuple[N, N]]) -> N:
    """The total length of disjoint spans (e.g. from :func:`merge_spans`).

    Returns:
        ``sum(end - start)``, ``0`` for no spans.
    """
    return sum((e - s for s, e in spans), 0)


def intersection(a: Sequence[tuple[N, N]], b: Sequence[tuple[N, N]]) -> list[tuple[N, N]]:
    """The intersection of two sorted, disjoint span lists, as positive-length spans.

    Args:
        a: sorted disjoint spans (e.g. from :func:`merge_spans`).
        b: likewise.

    Returns:
        The spans covered by both, sorted.
    """
    out: list[tuple[N, N]] = []
    i = j = 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if e > s:
            out.append((s, e))
        if a[i][1] <= b[j][1]:
            i += 1
        else:
            j += 1
    return out


def intersection_length(a: Sequence[tuple[N, N]], b: Sequence[tuple[N, N]]) -> N:
    """The length of :func:`intersection` of two sorted, disjoint span lists."""
    return total_length(intersection(a, b))


def overlaps(a_start: float, a_end: float, b_start: float, b_end: float) -> bool:
    """Whether ``[a_start, a_end)`` and ``[b_start, b_end)`` share a point (touching: no)."""
    return a_start < b_end and b_start < a_end


def overlap_length(a_start: float, a_end: float, b_start: float, b_end: float) -> float:
    """How long ``[a_start, a_end)`` and ``[b_start, b_end)`` overlap (``0.0`` if not).

    E.g. the part of an anomaly's span inside an episode's window.
    """
    return max(0.0, min(a_end, b_end) - max(a_start, b_start))


def gaps(
    spans: Iterable[tuple[float, float]], start: float, end: float
) -> list[tuple[float, float]]:
    """The stretches of ``[start, end)`` that no span covers.

    The spans are joined with :func:`union` (an empty span inside a gap splits
    it in two). A span that starts after ``end`` still closes the gap before
    it: the caller passes the spans of the window it asks about.

    Args:
        spans: ``(start, end)`` pairs, any order (open ones closed by the caller).
        start: the window's start.
        end: the window's end.

    Returns:
        ``(gap_start, gap_end)`` pairs in time order.
    """
    out: list[tuple[float, float]] = []
    cursor = start
    for s, e in union(spans):
        if s > cursor:
            out.append((cursor, s))
        cursor = max(cursor, e)
    if cursor < end:
        out.append((cursor, end))
    return out


def overlap_windows(intervals: Iterable[Holder]) -> list[tuple[float, float, list[str]]]:
    """Maximal windows in which two or more distinct holders hold at once.

    A sweep over the intervals' ends: at one instant ends come before starts,
    so touching intervals do not overlap, and one holder's own overlapping or
    back-to-back intervals count once. Empty intervals are ignored.

    Args:
        intervals: ``(start, end, who)``, any order (e.g. every processing
            interval of one partition).

    Returns:
        ``(start, end, holders)`` for each maximal window of positive length
        with at least two distinct holders, in time order; ``holders`` are
        every holder seen in the window, sorted.
    """
    points: list[tuple[float, int, str]] = []
    for start, end, who in intervals:
        if end > start:
            points.append((start, 1, who))
            points.append((end, -1, who))
    points.sort(key=lambda p: (p[0], p[1]))  # ends before starts at the same instant
    active: dict[str, int] = defaultdict(int)
    out: list[tuple[float, float, list[str]]] = []
    opened: float | None = None
    seen: set[str] = set()
    for t, delta, who in points:
        active[who] += delta
        if active[who] == 0:
            del active[who]
        if len(active) >= 2:
            seen.update(active)
            if opened is None:
                opened = t
        elif opened is not None:
            if t > opened:
                out.append((opened, t, sorted(seen)))
            opened = None
            seen = set()
    return out


def pairwise_overlaps(intervals: Iterable[Holder]) -> list[tuple[float, float, str, str]]:
    """Every pair of intervals of two different holders that overlap, and where.

    Unlike :func:`overlap_windows` (one row per maximal window), one row per
    overlapping pair: three holders at once give three rows.

    Args:
        intervals: ``(start, end, who)``, any order.

    Returns:
        ``(start, end, earlier, later)`` per pair, ``earlier`` the holder whose
        interval sorts first (by start, end, holder), in that order of the
        earlier interval, then of the later one.
    """
    ivs = sorted(intervals)
    out: list[tuple[float, float, str, str]] = []
    for i, (_s1, e1, m1) in enumerate(ivs):
        for s2, e2, m2 in ivs[i + 1 :]:
            if s2 >= e1:
                break
            if m1 != m2 and min(e1, e2) > s2:
                out.append((s2, min(e1, e2), m1, m2))
    return out
