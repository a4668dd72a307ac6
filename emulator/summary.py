"""A run's end-of-run summary, computed from its event log.

This is the quick look printed when ``rebalance-emu run`` ends, and the
``counts`` of the manifest; the full analysis (invariants, metrics, plots) is
the PySpark ``compare`` report. Offsets are handled as half-open ranges, so a
summary of millions of messages costs no more than its batches.

A topic deleted and created again under its name is a new *incarnation*
(``topic_created``'s ``incarnation``) whose offsets start at 0 again, so
records are keyed by (topic, incarnation, partition): offset 5 of two
incarnations are two records, not a duplicate. ``produced`` and ``processed``
events carry no incarnation; an event belongs to the latest incarnation of its
topic created at or before it (topics that exist from the start are
incarnation 1). An analysis rule, not Kafka's: a batch of an old incarnation
processed after the topic was created again would be counted in the new one.
Records of an incarnation that was deleted and never processed are counted in
``deleted_unprocessed``, not in ``unprocessed``: they went with their topic.
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
        unprocessed: produced messages never processed (those of a deleted
            topic apart: ``deleted_unprocessed``).
        deleted_unprocessed: produced messages of a topic (incarnation) that
            was deleted before they were processed.
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
    deleted_unprocessed: int = 0
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
    # (topic, partition) -> (t, is_produced, range, processed batch's busy span or None)
    records: dict[TopicPartition, list[tuple[float, bool, Range, Holder | None]]] = defaultdict(
        list
    )
    created: dict[str, dict[int, float]] = defaultdict(dict)  # topic -> incarnation -> first t
    deleted: set[tuple[str, int]] = set()
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
        elif kind in (EventKind.TOPIC_CREATED, EventKind.TOPIC_DELETED):
            inc = ev.get("incarnation")
            if isinstance(inc, int) and ev.get("topic") is not None:
                topic = str(ev["topic"])
                if kind == EventKind.TOPIC_DELETED:
                    deleted.add((topic, inc))
                else:
                    t = _float(ev.get("t_emu_ms"))
                    created[topic][inc] = min(t, created[topic].get(inc, t))
        elif kind in (EventKind.PRODUCED, EventKind.PROCESSED):
            tp = (str(ev["topic"]), _int(ev["partition"]))
            rng = (_int(ev["offset_start"]), _int(ev["offset_end"]))
            t = _float(ev.get("t_emu_ms"))
            busy: Holder | None = None
            if kind == EventKind.PRODUCED:
                s.produced += rng[1] - rng[0]
            else:
                s.processed += rng[1] - rng[0]
                took = ev.get("duration_ms")
                if isinstance(took, int | float) and took > 0:
                    who = str(ev.get("member_id") or ev.get("member") or "?")
                    busy = (t - float(took), t, who)
            records[tp].append((t, kind == EventKind.PRODUCED, rng, busy))
    produced: dict[tuple[str, int, int], list[Range]] = defaultdict(list)
    processed: dict[tuple[str, int, int], list[Range]] = defaultdict(list)
    holders: dict[tuple[str, int, int], list[Holder]] = defaultdict(list)
    spans: dict[tuple[str, int, int], list[tuple[float, float, str, int, int]]] = defaultdict(list)
    for (topic, partition), recs in records.items():
        # The incarnations of the topic by creation time: each record to the latest before it.
        born = sorted((t, inc) for inc, t in created.get(topic, {}).items())
        for t, is_produced, rng, busy in recs:
            inc = 1
            for t_born, i in born:
                if t_born <= t:
                    inc = i
            key = (topic, inc, partition)
            if is_produced:
                produced[key].append(rng)
            else:
                processed[key].append(rng)
                if busy is not None:
                    holders[key].append(busy)
                    spans[key].append((*busy, *rng))
    unique_processed = 0
    for key in sorted(set(produced) | set(processed)):
        prod = merge_spans(produced.get(key, []))
        proc = merge_spans(processed.get(key, []))
        unique_processed += total_length(proc)
        missing = total_length(prod) - intersection_length(prod, proc)
        if missing > 0:
            if (key[0], key[1]) in deleted:
                s.deleted_unprocessed += missing
                continue
            s.unprocessed += missing
            s.partitions_unprocessed.append(_label(key))
    s.duplicates = s.processed - unique_processed
    for key in sorted(holders):
        same: list[float] = []
        for w0, w1, _members in overlap_windows(holders[key]):
            if _shares_records(spans[key], w0, w1):
                same.append(w1 - w0)
            else:
                s.ordering_overlap += 1
                s.ordering_overlap_ms += w1 - w0
        if same:
            s.double_processing += len(same)
            s.double_processing_ms += sum(same)
            s.double_processing_max_ms = max(s.double_processing_max_ms, *same)
            s.double_processing_partitions.append(_label(key))
    return s


def _label(key: tuple[str, int, int]) -> str:
    """``topic:partition``, with ``#incarnation`` for a topic created again (2 and on)."""
    topic, inc, partition = key
    return f"{topic}:{partition}" if inc == 1 else f"{topic}#{inc}:{partition}"


def _float(v: object) -> float:
    return float(v) if isinstance(v, int | float) else 0.0


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
