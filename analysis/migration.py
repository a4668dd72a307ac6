"""What an online migration cost: the mixed window, each member's switch, the conversions.

A run whose timeline has an ``upgrade`` (each member restarted into the other
group protocol), whose group starts mixed (``[group].mixed``) or whose group
converted (``group_converted``) gets a
``migration`` entry in its metrics (:func:`migration_metrics`):

* ``conversions``: each ``group_converted`` event: ``t_ms``, ``direction``
  (``upgrade``: classic to consumer; ``downgrade``), ``reason``, ``state``
  (``online`` or ``offline``: an empty group replaced), ``generation`` (the
  group's generation or epoch at the conversion) and ``members`` converted.
* ``mixed_ms``: how long the group had live members of both protocols (each
  member's protocol is the ``member_protocol`` of its ``consumer_started``;
  absent: the run's); ``mixed_from_ms`` / ``mixed_to_ms``: the first and last
  instant of it (``None`` if never mixed).
* ``switches``: per member, each switch: ``to`` (the protocol it restarted
  into), ``stopped_ms`` (the ``upgrade`` fault: its shutdown began),
  ``started_ms`` (its new member started), ``first_claim_ms`` (the first
  partition it owned after that; ``None``: none by the end) and
  ``out_of_work_ms`` (shutdown to first claim; ``None`` without a claim).
  ``switched``: members that switched; ``out_of_work_ms``: ``max`` and
  ``total`` over the switches with a claim.
* ``group_rebalances_mixed``: the group's rebalances (trigger to settled, as
  ``group_rebalances``) that began while it was mixed;
  ``conversion_rebalances``: those under way at a conversion's instant (the
  rebalance the conversion was part of, or prepared: a downgrade's).
* ``member_rebalances_mixed``: ``rebalance_started`` events of members while
  the group was mixed, by the protocol the member spoke (``classic``: its
  JoinGroup rounds; ``consumer``: its reconciliations).
* ``duplicates_mixed``: offsets processed again (``duplicate`` rows) first
  seen while the group was mixed; ``double_ownership_mixed``: double-ownership
  windows that began while mixed; ``double_ownership_cross_protocol``: those
  whose owners spoke different protocols.

The Spark side only collects the few rows these need (membership, switches,
conversions, claims of switched members, the group's unsettled spans and the
anomaly rows); the rest is plain Python (:func:`summarize`).
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from emulator.anomalies import DOUBLE_OWNERSHIP, DUPLICATE, base_protocol
from emulator.events import EventKind as K
from emulator.protocols import spec

__all__ = ["MigrationInput", "migration_metrics", "migration_series", "mixed_spans", "summarize"]

_LIFE: Final = (K.CONSUMER_STARTED.value, K.CONSUMER_STOPPED.value, K.CONSUMER_CRASHED.value)
_SWITCH: Final = "upgrade"  # the reason of an upgrade's fault_injected / fault_cleared


@dataclass
class MigrationInput:
    """The rows of one series :func:`summarize` reads (times in emulated ms).

    Attributes:
        protocol: the run protocol (or series).
        end_ms: the run's last event.
        life: ``(t, kind, member, member_protocol)`` of ``consumer_started`` /
            ``consumer_stopped`` / ``consumer_crashed``.
        switches: ``(t, kind, member, to)`` of the upgrade faults
            (``fault_injected``: ``to`` from its detail; ``fault_cleared``).
        conversions: the ``group_converted`` rows as dicts.
        claims: per member, the start times of its ownership intervals, sorted.
        unsettled: the group's unsettled spans ``(s, e)``.
        member_rebalances: ``(t, member)`` of members' ``rebalance_started``.
        anomalies: ``(kind, t_start, count, member, other_member)`` rows of
            ``duplicate`` and ``double_ownership``.
    """

    protocol: str
    end_ms: float
    life: list[tuple[float, str, str, str | None]] = field(default_factory=list)
    switches: list[tuple[float, str, str, str | None]] = field(default_factory=list)
    conversions: list[dict[str, Any]] = field(default_factory=list)
    claims: dict[str, list[float]] = field(default_factory=dict)
    unsettled: list[tuple[float, float]] = field(default_factory=list)
    member_rebalances: list[tuple[float, str]] = field(default_factory=list)
    anomalies: list[tuple[str, float, int, str | None, str | None]] = field(default_factory=list)


def _generation(protocol: str) -> str:
    return spec(base_protocol(protocol)).generation


def member_spans(inp: MigrationInput) -> dict[str, list[tuple[float, float, str]]]:
    """Per member, its incarnations ``(start, end, generation)`` (``end``: the run's end
    if it never stopped)."""
    run = _generation(inp.protocol)
    out: dict[str, list[tuple[float, float, str]]] = {}
    open_: dict[str, tuple[float, str]] = {}
    for t, kind, member, proto in sorted(inp.life, key=lambda r: (r[0], r[1] != _LIFE[0])):
        if kind == K.CONSUMER_STARTED.value:
            if member in open_:  # a start without a stop: the old one ends here
                s, g = open_.pop(member)
                out.setdefault(member, []).append((s, t, g))
            open_[member] = (t, proto or run)
        elif member in open_:
            s, g = open_.pop(member)
            out.setdefault(member, []).append((s, t, g))
    for member, (s, g) in open_.items():
        out.setdefault(member, []).append((s, max(s, inp.end_ms), g))
    return out


def mixed_spans(
    spans: Mapping[str, Sequence[tuple[float, float, str]]],
) -> list[tuple[float, float]]:
    """The spans during which live members spoke two different protocols."""
    edges: list[tuple[float, int, str]] = []
    for incs in spans.values():
        for s, e, g in incs:
            if e > s:
                edges.append((s, 1, g))
                edges.append((e, -1, g))
    edges.sort(key=lambda x: (x[0], x[1]))  # ends before starts at one instant
    live: dict[str, int] = {}
    out: list[tuple[float, float]] = []
    start: float | None = None
    for t, d, g in edges:
        live[g] = live.get(g, 0) + d
        mixed = sum(1 for n in live.values() if n > 0) > 1
        if mixed and start is None:
            start = t
        elif not mixed and start is not None:
            if t > start:
                out.append((start, t))
            start = None
    return out


def _within(t: float, spans: Sequence[tuple[float, float]]) -> bool:
    return any(s <= t < e for s, e in spans)


def _generation_at(spans: Sequence[tuple[float, float, str]], t: float) -> str | None:
    for s, e, g in spans:
        if s <= t <= e:
            return g
    return None


def summarize(inp: MigrationInput) -> dict[str, Any]:
    """The ``migration`` metrics of one series (see the module docstring)."""
    spans = member_spans(inp)
    mixed = mixed_spans(spans)
    switches: dict[str, list[dict[str, Any]]] = {}
    pending: dict[str, dict[str, Any]] = {}
    for t, kind, member, to in sorted(inp.switches, key=lambda r: r[0]):
        if kind == K.FAULT_INJECTED.value:
            sw: dict[str, Any] = {
                "to": to,
                "stopped_ms": t,
                "started_ms": None,
                "first_claim_ms": None,
                "out_of_work_ms": None,
            }
            switches.setdefault(member, []).append(sw)
            pending[member] = sw
        elif member in pending:
            sw = pending.pop(member)
            sw["started_ms"] = t
            claims = inp.claims.get(member, [])
            i = bisect_left(claims, t)
            if i < len(claims):
                sw["first_claim_ms"] = claims[i]
                sw["out_of_work_ms"] = claims[i] - sw["stopped_ms"]
    works = [
        float(sw["out_of_work_ms"])
        for sws in switches.values()
        for sw in sws
        if sw["out_of_work_ms"] is not None
    ]
    conv_ts = [float(c["t_ms"]) for c in inp.conversions]
    by_proto: dict[str, int] = {}
    for t, member in inp.member_rebalances:
        if _within(t, mixed):
            g = _generation_at(spans.get(member, []), t) or "unknown"
            by_proto[g] = by_proto.get(g, 0) + 1
    dup = 0
    dbl = 0
    cross = 0
    for kind, t, count, who, other in inp.anomalies:
        if not _within(t, mixed):
            continue
        if kind == DUPLICATE:
            dup += count
        elif kind == DOUBLE_OWNERSHIP:
            dbl += 1
            a = _generation_at(spans.get(who or "", []), t)
            b = _generation_at(spans.get(other or "", []), t)
            if a is not None and b is not None and a != b:
                cross += 1
    return {
        "conversions": sorted(inp.conversions, key=lambda c: float(c["t_ms"])),
        "mixed_ms": float(sum(e - s for s, e in mixed)),
        "mixed_from_ms": mixed[0][0] if mixed else None,
        "mixed_to_ms": mixed[-1][1] if mixed else None,
        "switched": len(switches),
        "switches": dict(sorted(switches.items(), key=lambda kv: _natural(kv[0]))),
        "out_of_work_ms": {
            "max": max(works) if works else 0.0,
            "total": float(sum(works)),
        },
        "group_rebalances_mixed": sum(1 for s, _e in inp.unsettled if _within(s, mixed)),
        "conversion_rebalances": sum(
            1 for s, e in inp.unsettled if any(s <= t <= e for t in conv_ts)
        ),
        "member_rebalances_mixed": dict(sorted(by_proto.items())),
        "duplicates_mixed": dup,
        "double_ownership_mixed": dbl,
        "double_ownership_cross_protocol": cross,
    }


def _natural(s: str) -> tuple[Any, ...]:
    head, _, tail = s.rpartition("-")
    return (head, int(tail)) if tail.isdigit() else (s, -1)


def _to(detail: object) -> str | None:
    try:
        d = json.loads(str(detail)) if detail else {}
    except ValueError:
        return None
    to = d.get("to") if isinstance(d, dict) else None
    return str(to) if to is not None else None


def migration_series(control: DataFrame, conversions: Mapping[str, float]) -> list[str]:
    """The protocols (series) :func:`migration_metrics` covers: those whose group
    converted or held a member of the other protocol (``conversions``,
    :func:`analysis.checkers.first_conversions`) and those with an ``upgrade``
    fault (``control``: the checkers' control frame, which holds ``fault_injected``)."""
    upgrades = (
        control.where((F.col("kind") == K.FAULT_INJECTED.value) & (F.col("reason") == _SWITCH))
        .select("protocol")
        .distinct()
        .collect()
    )
    found = {str(r["protocol"]) for r in upgrades if r["protocol"] is not None}
    return sorted(found | set(conversions))


def migration_metrics(
    events: DataFrame,
    series: Sequence[str],
    intervals: DataFrame,
    unsettled: DataFrame,
    anomalies: DataFrame,
) -> dict[str, dict[str, Any]]:
    """Per protocol of ``series`` (:func:`migration_series`): :func:`summarize` of it.

    Args:
        events: the event table.
        series: the protocols whose run switched members' protocols, started
            mixed or converted its group.
        intervals: the ownership intervals (``protocol, member, s``).
        unsettled: the group's unsettled spans (``protocol, s, e``).
        anomalies: the checkers' rows.
    """
    if not series:
        return {}
    kind = F.col("kind")
    reason = F.col("reason")
    mine = F.col("protocol").isin(*series)
    ev = events.where(mine)
    has_mp = "member_protocol" in events.columns
    has_dir = "direction" in events.columns
    inputs = {s: MigrationInput(s, 0.0) for s in series}
    for r in ev.groupBy("protocol").agg(F.max("t_emu_ms").alias("t")).collect():
        inputs[str(r["protocol"])].end_ms = float(r["t"] or 0.0)
    rows = ev.where(
        kind.isin(*_LIFE, K.GROUP_CONVERTED.value, K.REBALANCE_STARTED.value)
        | (kind.isin(K.FAULT_INJECTED.value, K.FAULT_CLEARED.value) & (reason == _SWITCH))
    ).select(
        "protocol",
        "kind",
        "t_emu_ms",
        "member",
        (F.col("member_protocol") if has_mp else F.lit(None).cast("string")).alias("mp"),
        (F.col("direction") if has_dir else F.lit(None).cast("string")).alias("direction"),
        "reason",
        "state",
        "generation",
        "count",
        "detail",
    )
    switched: dict[str, set[str]] = {s: set() for s in series}
    for r in rows.collect():
        inp = inputs[str(r["protocol"])]
        k = str(r["kind"])
        t = float(r["t_emu_ms"])
        member = r["member"]
        if k in _LIFE and member is not None:
            inp.life.append((t, k, str(member), r["mp"]))
        elif k == K.GROUP_CONVERTED.value:
            inp.conversions.append(
                {
                    "t_ms": t,
                    "direction": r["direction"],
                    "reason": r["reason"],
                    "state": r["state"],
                    "generation": r["generation"],
                    "members": r["count"],
                }
            )
        elif k == K.REBALANCE_STARTED.value:
            if member is not None:
                inp.member_rebalances.append((t, str(member)))
        elif member is not None:
            inp.switches.append((t, k, str(member), _to(r["detail"])))
            switched[inp.protocol].add(str(member))
    if any(switched.values()):
        cond = F.lit(False)
        for s in series:
            if switched[s]:
                cond = cond | (
                    (F.col("protocol") == s) & F.col("member").isin(*sorted(switched[s]))
                )
        for r in intervals.where(cond).select("protocol", "member", "s").collect():
            inputs[str(r["protocol"])].claims.setdefault(str(r["member"]), []).append(float(r["s"]))
        for inp in inputs.values():
            for ts in inp.claims.values():
                ts.sort()
    for r in unsettled.where(mine).select("protocol", "s", "e").collect():
        inputs[str(r["protocol"])].unsettled.append((float(r["s"]), float(r["e"])))
    for r in (
        anomalies.where(mine & F.col("kind").isin(DUPLICATE, DOUBLE_OWNERSHIP))
        .select("protocol", "kind", "t_start_ms", "count", "member", "other_member")
        .collect()
    ):
        inputs[str(r["protocol"])].anomalies.append(
            (
                str(r["kind"]),
                float(r["t_start_ms"]),
                int(r["count"] or 0),
                r["member"],
                r["other_member"],
            )
        )
    return {s: summarize(inp) for s, inp in inputs.items()}
