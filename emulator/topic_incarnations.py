"""Which incarnation of a topic an instant belongs to: the rule, without Spark.

A topic deleted and created again under its name is a new *incarnation*
(``topic_created``'s and ``topic_deleted``'s ``incarnation``) whose offsets
start at 0 again. Produced, processed and ownership events carry no
incarnation, so an event belongs to the incarnation whose span holds its time:
from its ``topic_created`` (the run's own topics: from the start) to the next
incarnation's. Its key is the name for the first incarnation and ``t#n`` for
the n-th. The run summary (:mod:`emulator.summary`) and the analysis
(:mod:`analysis.topics`) both read incarnations through this module.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from emulator.events import EventKind

INCARNATION_SEP: Final = "#"
"""Between a topic's name and its incarnation in the key (``t#2``); not a legal topic character."""


def topic_key(name: str, incarnation: int) -> str:
    """The key of a topic's incarnation: ``t`` for the first, ``t#n`` for the n-th (n >= 2)."""
    return name if incarnation <= 1 else f"{name}{INCARNATION_SEP}{incarnation}"


@dataclass(frozen=True)
class Incarnation:
    """One incarnation of a topic name in one protocol's run.

    Attributes:
        protocol: the run protocol (or series) whose events these are.
        topic: the topic's name.
        incarnation: its number, from 1.
        start: the name is this incarnation's from here (its ``topic_created``;
            ``None``: from the start).
        end: until here (the next incarnation's ``topic_created``; ``None``: the end).
        created: its ``topic_created`` (``None``: it existed from the start).
        deleted: its ``topic_deleted`` (``None``: not deleted).
    """

    protocol: str
    topic: str
    incarnation: int
    start: float | None
    end: float | None
    created: float | None
    deleted: float | None

    @property
    def key(self) -> str:
        """:func:`topic_key` of this incarnation."""
        return topic_key(self.topic, self.incarnation)


def incarnation_spans(
    protocol: str, topic: str, created: dict[int, float], deleted: dict[int, float]
) -> list[Incarnation]:
    """One topic name's incarnations in time order (see the module doc's rules)."""
    order = sorted(created.items(), key=lambda kv: (kv[1], kv[0]))
    # Before the first creation: the incarnation before it (the run's own topics: 1).
    first = max(1, order[0][0] - 1) if order else min(deleted, default=1)
    bounds: list[tuple[int, float | None]] = [(first, None), *order]
    out: list[Incarnation] = []
    for i, (inc, start) in enumerate(bounds):
        end = bounds[i + 1][1] if i + 1 < len(bounds) else None
        if out and out[-1].incarnation == inc:  # the first creation of the first incarnation
            prev = out.pop()
            start = prev.start
        out.append(Incarnation(protocol, topic, inc, start, end, created.get(inc), None))
    spans = []
    for s in out:
        d = deleted.get(s.incarnation)
        if d is not None and s.start is not None:
            d = max(d, s.start)
        if d is not None and s.end is not None:
            d = min(d, s.end)  # stamped after the next creation: clocks out of step
        spans.append(Incarnation(s.protocol, s.topic, s.incarnation, s.start, s.end, s.created, d))
    return spans


def incarnation_at(spans: Iterable[Incarnation], t: float) -> int:
    """The incarnation whose span holds ``t`` (one topic's spans; 1 when there are none)."""
    for s in spans:
        if (s.start is None or t >= s.start) and (s.end is None or t < s.end):
            return s.incarnation
    return 1


def incarnations_from_rows(
    rows: Iterable[tuple[str, str, str, int, float]],
) -> list[Incarnation]:
    """Every (protocol, topic)'s incarnations from lifecycle rows.

    A row is ``(protocol, topic, kind, incarnation, t)``, ``kind`` being
    ``topic_created`` or ``topic_deleted``; the earliest row of each counts.
    """
    created: dict[tuple[str, str], dict[int, float]] = {}
    deleted: dict[tuple[str, str], dict[int, float]] = {}
    for proto, topic, kind, inc, t in rows:
        into = created if kind == EventKind.TOPIC_CREATED.value else deleted
        per = into.setdefault((proto, topic), {})
        per[inc] = min(t, per.get(inc, t))
    return [
        s
        for key in sorted(set(created) | set(deleted))
        for s in incarnation_spans(*key, created.get(key, {}), deleted.get(key, {}))
    ]


def spans_by_topic(
    events: Iterable[Mapping[str, object]],
) -> dict[str, list[Incarnation]]:
    """Each topic's incarnations from a run's ``topic_created`` / ``topic_deleted`` events."""
    rows = []
    for ev in events:
        kind, topic, inc, t = (
            ev.get("kind"),
            ev.get("topic"),
            ev.get("incarnation"),
            ev.get("t_emu_ms"),
        )
        if kind not in (EventKind.TOPIC_CREATED, EventKind.TOPIC_DELETED):
            continue
        if topic is None or not isinstance(inc, int) or not isinstance(t, int | float):
            continue
        created = kind == EventKind.TOPIC_CREATED
        what = (EventKind.TOPIC_CREATED if created else EventKind.TOPIC_DELETED).value
        rows.append(("", str(topic), what, inc, float(t)))
    out: dict[str, list[Incarnation]] = {}
    for s in incarnations_from_rows(rows):
        out.setdefault(s.topic, []).append(s)
    return out
