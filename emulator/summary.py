"""A run's end-of-run summary, computed from its event log.

This is the quick look printed when ``rebalance-emu run`` ends, and the
``counts`` of the manifest; the full analysis (invariants, metrics, plots) is
the PySpark ``compare`` report. Offsets are handled as half-open ranges, so a
summary of millions of messages costs no more than its batches.

A topic deleted and created again under its name is a new *incarnation*
whose offsets start at 0 again, so records are keyed by (topic, incarnation,
partition), the incarnation read as the analysis reads it
(:mod:`emulator.topic_incarnations`): offset 5 of two incarnations are two
records, not a duplicate. As in the analysis, what a deleted incarnation left
unread after its last processed offset went with it (``deleted_unprocessed``);
a gap before that offset is ``unprocessed``.
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
from emulator.topic_incarnations import Incarnation, incarnation_at, spans_by_topic, topic_key

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
        unprocessed: produced messages never processed (a deleted topic's
            unread tail apart: ``deleted_unprocessed``).
        deleted_unprocessed: produced messages of a deleted topic (incarnation)
            after its last processed offset: they went with it.
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
        share_acquired: share groups (KIP-932): records acquired by a member,
            counting each delivery.
        share_redelivered: deliveries of a record delivered before (acquired
            again after a release, a lock expiry, a session's close or a failover).
        share_acknowledged: records accepted (``acknowledged``).
        share_archived: records archived: rejected by the application or
            delivered ``group.share.delivery.count.limit`` times.
        share_lock_expired: records whose acquisition lock ran out.
        share_released: records the application released, or its share
            session's close (a leave, a crash's dropped connections) released.
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
    share_acquired: int = 0
    share_redelivered: int = 0
    share_acknowledged: int = 0
    share_archived: int = 0
    share_lock_expired: int = 0
    share_released: int = 0

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
    lifecycle: list[Mapping[str, object]] = []  # topic_created / topic_deleted
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
            lifecycle.append(ev)
        elif kind == EventKind.SHARE_RECORDS:
            _share(s, ev)
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
    batches: dict[tuple[str, int, int], list[tuple[float, float, str, int, int]]] = defaultdict(
        list
    )
    spans = spans_by_topic(lifecycle)
    for (topic, partition), recs in records.items():
        mine = spans.get(topic, [])
        for t, is_produced, rng, busy in recs:
            inc = incarnation_at(mine, t)
            key = (topic, inc, partition)
            if is_produced:
                produced[key].append(rng)
            else:
                processed[key].append(rng)
                if busy is not None:
                    holders[key].append(busy)
                    batches[key].append((*busy, *rng))
    unique_processed = 0
    for key in sorted(set(produced) | set(processed)):
        prod = merge_spans(produced.get(key, []))
        proc = merge_spans(processed.get(key, []))
        unique_processed += total_length(proc)
        missing = total_length(prod) - intersection_length(prod, proc)
        if missing > 0:
            gone = _deleted(spans.get(key[0], []), key[1])
            if gone and proc:  # the unread tail after the last processed offset went with it
                tail = intersection_length(prod, [(proc[-1][1], prod[-1][1])])
                s.deleted_unprocessed += tail
                missing -= tail
            elif gone:
                s.deleted_unprocessed += missing
                missing = 0
            if missing <= 0:
                continue
            s.unprocessed += missing
            s.partitions_unprocessed.append(_label(key))
    s.duplicates = s.processed - unique_processed
    for key in sorted(holders):
        same: list[float] = []
        for w0, w1, _members in overlap_windows(holders[key]):
            if _shares_records(batches[key], w0, w1):
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


def _share(s: RunSummary, ev: Mapping[str, object]) -> None:
    """One ``share_records`` event into the share counters."""
    n = _int(ev.get("offset_end")) - _int(ev.get("offset_start"))
    state, reason = ev.get("state"), ev.get("reason")
    if state == "acquired":
        s.share_acquired += n
        if ev.get("detail"):  # what had made it available again: a redelivery
            s.share_redelivered += n
    elif state == "acknowledged":
        s.share_acknowledged += n
    elif state == "archived":
        s.share_archived += n
    if reason == "lock_expiry":
        s.share_lock_expired += n
    elif reason in ("release", "session_close") and state in ("available", "archived"):
        s.share_released += n


def _label(key: tuple[str, int, int]) -> str:
    """``topic:partition`` by the incarnation's key (``t#2:0`` for a topic created again)."""
    topic, inc, partition = key
    return f"{topic_key(topic, inc)}:{partition}"


def _deleted(spans: list[Incarnation], incarnation: int) -> bool:
    return any(s.incarnation == incarnation and s.deleted is not None for s in spans)


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
