"""A run's end-of-run summary, computed from its event log.

This is the quick look printed when ``rebalance-emu run`` ends, and the
``counts`` of the manifest; the full analysis (invariants, metrics, plots) is
the PySpark ``compare`` report. Offsets are handled as half-open ranges, so a
summary of millions of messages costs no more than its batches.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field

from emulator.events import EventKind
from emulator.intervals import (
    Holder,
    intersection_length,
    merge_spans,
    overlap_windows,
    overlaps,
    total_length,
)

TopicPartition = tuple[str, int]
Range = tuple[int, int]


@dataclass
class RunSummary:
    """What one protocol's run did, in numbers.

    Attributes:
        rebalances: ``syncedRebalance`` runs over all consumers.
        attempts: rebalance attempts (a failed attempt is retried).
        conflicts: NodeExists met while claiming partitions.
        gave_up: rebalances abandoned after ``rebalance.max.retries``.
        produced: messages appended to the logs.
        processed: messages processed, counting each time.
        duplicates: messages processed more than once (extra times).
        unprocessed: produced messages never processed.
        events: events read.
        partitions_unprocessed: partitions with any unprocessed message.
        double_processing: windows in which two or more members processed
            the same partition at the same time (by the PROCESSED batches'
            ``[t_emu_ms - duration_ms, t_emu_ms]`` intervals), two of them
            the same records: the zombie.
        double_processing_ms: their total length, in emulated ms.
        double_processing_max_ms: the longest one.
        double_processing_partitions: the partitions that had one.
        ordering_overlap: such windows in which the members processed
            different records (per-partition order broken, no duplicate).
        ordering_overlap_ms: their total length, in emulated ms.
    """

    rebalances: int = 0
    attempts: int = 0
    conflicts: int = 0
    gave_up: int = 0
    produced: int = 0
    processed: int = 0
    duplicates: int = 0
    unprocessed: int = 0
    events: int = 0
    partitions_unprocessed: list[str] = field(default_factory=list)
    double_processing: int = 0
    double_processing_ms: float = 0.0
    double_processing_max_ms: float = 0.0
    double_processing_partitions: list[str] = field(default_factory=list)
    ordering_overlap: int = 0
    ordering_overlap_ms: float = 0.0

    def to_dict(self) -> dict[str, object]:
        """The summary as a JSON-able dict."""
        return asdict(self)


def summarize(events: Iterable[Mapping[str, object]]) -> RunSummary:
    """Compute a :class:`RunSummary` from a run's events (any order)."""
    s = RunSummary()
    produced: dict[TopicPartition, list[Range]] = defaultdict(list)
    processed: dict[TopicPartition, list[Range]] = defaultdict(list)
    busy: dict[TopicPartition, list[Holder]] = defaultdict(list)
    spans: dict[TopicPartition, list[tuple[float, float, str, int, int]]] = defaultdict(list)
    for ev in events:
        s.events += 1
        kind = ev.get("kind")
        if kind == EventKind.REBALANCE_STARTED:
            s.rebalances += 1
        elif kind == EventKind.ATTEMPT_STARTED:
            s.attempts += 1
        elif kind == EventKind.CLAIM_CONFLICT:
            s.conflicts += 1
        elif kind == EventKind.REBALANCE_FAILED:
            s.gave_up += 1
        elif kind in (EventKind.PRODUCED, EventKind.PROCESSED):
            tp = (str(ev["topic"]), _int(ev["partition"]))
            rng = (_int(ev["offset_start"]), _int(ev["offset_end"]))
            if kind == EventKind.PRODUCED:
                produced[tp].append(rng)
                s.produced += rng[1] - rng[0]
            else:
                processed[tp].append(rng)
                s.processed += rng[1] - rng[0]
                end = ev.get("t_emu_ms")
                took = ev.get("duration_ms")
                if isinstance(end, int | float) and isinstance(took, int | float) and took > 0:
                    who = str(ev.get("member_id") or ev.get("member") or "?")
                    busy[tp].append((float(end) - float(took), float(end), who))
                    spans[tp].append((float(end) - float(took), float(end), who, *rng))
    unique_processed = 0
    for tp in sorted(set(produced) | set(processed)):
        prod = merge_spans(produced.get(tp, []))
        proc = merge_spans(processed.get(tp, []))
        unique_processed += total_length(proc)
        missing = total_length(prod) - intersection_length(prod, proc)
        if missing > 0:
            s.unprocessed += missing
            s.partitions_unprocessed.append(f"{tp[0]}:{tp[1]}")
    s.duplicates = s.processed - unique_processed
    for tp in sorted(busy):
        same: list[float] = []
        for w0, w1, _members in overlap_windows(busy[tp]):
            if _shares_records(spans[tp], w0, w1):
                same.append(w1 - w0)
            else:
                s.ordering_overlap += 1
                s.ordering_overlap_ms += w1 - w0
        if same:
            s.double_processing += len(same)
            s.double_processing_ms += sum(same)
            s.double_processing_max_ms = max(s.double_processing_max_ms, *same)
            s.double_processing_partitions.append(f"{tp[0]}:{tp[1]}")
    return s


def _shares_records(spans: list[tuple[float, float, str, int, int]], w0: float, w1: float) -> bool:
    """Whether two members' batches busy in ``[w0, w1]`` processed a common offset."""
    inside = [b for b in spans if overlaps(b[0], b[1], w0, w1)]
    for i, a in enumerate(inside):
        for b in inside[i + 1 :]:
            if a[2] != b[2] and overlaps(a[3], a[4], b[3], b[4]):
                return True
    return False


def _int(v: object) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"expected an integer, got {v!r}")
    return v
