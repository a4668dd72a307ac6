"""The online invariant monitor: the offline checkers' rules, fed by the event writers' tap.

Design §5.2 (issue 18). The sim engine hands the monitor every event its
actors log, in emission order (:class:`emulator.eventlog.EventWriter`'s ``tap``
is the monitor, shared by every actor of a run). The monitor groups them per
protocol into *instants* (all events with one ``t_emu_ms``) and evaluates an
instant when the first event of a later one arrives (or at :meth:`Monitor.flush`
/ :meth:`Monitor.finish`), so the offline checkers' inclusive comparisons (a
commit at the instant its owner releases is the owner's) mean the same online.
An event stamped earlier than the instant being gathered (events held before
time 0 and released late, ``processed`` batches stamped at their end) joins
that instant; the checks use its own time.

The rules are in :mod:`emulator.sim.invariants`: the offline vocabulary
(``commit_by_non_owner``, ``invalid_assignment``, ``loss``,
``double_processing``, ``ordering_overlap``, and ``double_ownership``,
``unbalanced_assignment`` counted), strict safety (non-zombie double ownership,
explore only) and the engine self-checks that events can tell. A finding of an
anomaly kind the run may show (:func:`emulator.anomalies.allowed_kinds` for its
protocol and its commit mode, read from ``run_started`` as
``analysis.checkers.delivery_modes`` reads it) is counted; any other is a
:class:`Violation`.

The monitor never raises from the tap: the tap runs inside an actor's
``emit``, where an exception would be an actor's error. The engine stops the
run on the first violation (``on_violation``, or :meth:`Monitor.raise_if_violated`
from the driver), raising :class:`StopSimulation`.

Pure: no clock, no I/O; memory grows with the run's control events and
``processed`` batches (kept for the end's exact windows), plus a bounded ring of
recent events for traces.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from emulator.anomalies import ANOMALY_KINDS, allowed_kinds
from emulator.events import EventKind as K
from emulator.sim.invariants import (
    SELF_CHECK_KINDS,
    STRICT_KINDS,
    UNCHECKED_KINDS,
    Entry,
    Event,
    EventRef,
    Finding,
    ProtocolChecks,
    parse_partitions,
)

__all__ = [
    "DEFAULT_RING",
    "KNOWN_KINDS",
    "Monitor",
    "StopSimulation",
    "Violation",
]

DEFAULT_RING: Final = 4096
"""Recent events kept for traces."""
TRACE_KINDS: Final = (K.ACTION_APPLIED.value, K.FAULT_INJECTED.value, K.FAULT_CLEARED.value)
"""The timeline's actions and faults: every one goes into a trace."""
MAX_ACTIONS: Final = 10_000
"""Timeline actions and faults kept for traces."""

AllowedFn = Callable[[str, str, bool], frozenset[str]]


@dataclass(frozen=True)
class Violation(Finding):
    """An invariant the run broke: a :class:`~emulator.sim.invariants.Finding` of a protocol's run.

    ``kind`` is an anomaly kind the run's protocol may not show, a strict-safety
    kind or an engine self-check kind (:mod:`emulator.sim.invariants`); the other
    fields are the finding's, and :attr:`events` is its ``refs`` (arrival index,
    actor, ``seq``).

    Attributes:
        protocol: the run protocol (keyword-only).
    """

    protocol: str = field(kw_only=True)

    @classmethod
    def of(cls, protocol: str, f: Finding) -> Violation:
        """The violation a finding of ``protocol``'s run is."""
        return cls(**vars(f), protocol=protocol)

    @property
    def events(self) -> tuple[EventRef, ...]:
        """The events that show it (the finding's ``refs``)."""
        return self.refs

    @property
    def window(self) -> tuple[float, float]:
        """``(t_start_ms, t_end_ms)``."""
        return (self.t_start_ms, self.t_end_ms)

    @property
    def seqs(self) -> tuple[tuple[str, int], ...]:
        """The triggering events as ``(actor, seq)``: where they are in the run's logs."""
        return tuple((r.actor, r.seq) for r in self.events)

    def to_dict(self) -> dict[str, object]:
        """A JSON-able dict (``violation.json``)."""
        return {
            "kind": self.kind,
            "protocol": self.protocol,
            "group": self.group,
            "topic": self.topic,
            "partition": self.partition,
            "members": list(self.members),
            "window_ms": list(self.window),
            "events": [{"index": r.index, "actor": r.actor, "seq": r.seq} for r in self.events],
            "message": self.message,
            "offset_start": self.offset_start,
            "offset_end": self.offset_end,
            "count": self.count,
            "detail": self.detail,
        }

    def __str__(self) -> str:
        return f"{self.protocol}: {self.kind}: {self.message}"


class StopSimulation(BaseException):
    """Raised by the engine into its run on the first violation.

    A ``BaseException``, as ``KeyboardInterrupt``: it stops the run, and the
    run's ``except Exception`` clauses (a failed action noted, a lost call
    tolerated) must not swallow it.

    Attributes:
        violation: the violation that stopped the run.
    """

    def __init__(self, violation: Violation) -> None:
        super().__init__(str(violation))
        self.violation = violation


@dataclass
class _Run:
    """One protocol's run as the monitor sees it."""

    checks: ProtocolChecks
    commit_mode: str = "auto"
    allows_loss: bool = False
    t: float | None = None
    batch: list[Entry] = field(default_factory=list)
    events: int = 0
    late: int = 0
    finished: bool = False
    counted: dict[str, int] = field(default_factory=dict)


class Monitor:
    """The online invariant monitor: call it with each event (an ``EventWriter`` tap).

    Args:
        modes: per protocol, ``(commit_mode, allows_loss)`` to use instead of
            what ``run_started`` says (``analysis.checkers.delivery_modes``;
            without either: ``auto``, no loss).
        strict: check strict safety (design §5.2 family 2; ``explore`` only).
        self_checks: check what the engine guarantees (family 3, from events).
        ring_size: recent events kept for :meth:`trace`.
        on_violation: called with each new violation, in order (the engine's
            hook to stop the run); it runs inside the tap, so it should not raise.
        allowed: the allowed table (``(protocol, commit_mode, allows_loss) ->
            kinds``; default :func:`emulator.anomalies.allowed_kinds`), asked
            once per entry.
    """

    def __init__(
        self,
        *,
        modes: Mapping[str, tuple[str, bool]] | None = None,
        strict: bool = True,
        self_checks: bool = True,
        ring_size: int = DEFAULT_RING,
        on_violation: Callable[[Violation], None] | None = None,
        allowed: AllowedFn = allowed_kinds,
    ) -> None:
        self._modes = dict(modes or {})
        self._strict = strict
        self._self_checks = self_checks
        self._allowed = allowed
        self._allowed_cache: dict[tuple[str, str, bool], frozenset[str]] = {}
        self._on_violation = on_violation
        self._runs: dict[str, _Run] = {}
        self._index = 0
        self.recent: deque[Entry] = deque(maxlen=max(1, ring_size))
        """The last events seen, with their arrival index (all protocols)."""
        self.actions: deque[Entry] = deque(maxlen=MAX_ACTIONS)
        """Every timeline action and fault seen (up to :data:`MAX_ACTIONS`)."""
        self.violations: list[Violation] = []
        """Every violation so far, in the order found."""
        self.after_finish = 0
        """Events of a protocol that arrived after its :meth:`finish` (not checked)."""

    # ------------------------------------------------------------ the tap

    def __call__(self, event: Event) -> None:
        """Take one event (the ``EventWriter`` tap); never raises for a bad event."""
        index = self._index
        self._index += 1
        entry: Entry = (index, event)
        self.recent.append(entry)
        kind = event.get("kind")
        if kind in TRACE_KINDS:
            self.actions.append(entry)
        protocol = event.get("protocol")
        run = self._runs.get(protocol) if type(protocol) is str else None
        if run is None:
            run = self._run(protocol if isinstance(protocol, str) else "")
        if run.finished:
            self.after_finish += 1
            return
        run.events += 1
        if kind == K.RUN_STARTED:
            self._read_mode(run, event.get("detail"))
        t = event.get("t_emu_ms")
        if type(t) is float:  # what every writer stamps: the rest is for a bad event
            t_ms: float | None = t
        else:
            t_ms = float(t) if isinstance(t, int | float) and not isinstance(t, bool) else None
        if t_ms is None:
            t_ms = run.t if run.t is not None else 0.0
        if run.t is None or t_ms > run.t:
            self._evaluate(run)
            run.t = t_ms
        elif t_ms < run.t:
            run.late += 1
        run.batch.append(entry)

    def _run(self, protocol: str) -> _Run:
        run = self._runs.get(protocol)
        if run is None:
            box: list[_Run] = []
            checks = ProtocolChecks(
                protocol,
                lambda: self._allowed_for(box[0]),
                strict=self._strict,
                self_checks=self._self_checks,
            )
            run = _Run(checks)
            mode = self._modes.get(protocol)
            if mode is not None:
                run.commit_mode, run.allows_loss = mode
            box.append(run)
            self._runs[protocol] = run
        return run

    def _read_mode(self, run: _Run, detail: object) -> None:
        """``run_started``'s commit mode (unless given): ``delivery_modes``' reading."""
        if run.checks.protocol in self._modes or not isinstance(detail, str):
            return
        try:
            doc = json.loads(detail)
        except ValueError:
            return
        if not isinstance(doc, dict):
            return
        run.commit_mode = str(doc.get("commit_mode") or "auto")
        run.allows_loss = str(doc.get("allows_loss")).lower() == "true"

    def _allowed_for(self, run: _Run) -> frozenset[str]:
        # A table: asked at every instant and for every processed batch, built once per entry.
        key = (run.checks.protocol, run.commit_mode, run.allows_loss)
        kinds = self._allowed_cache.get(key)
        if kinds is None:
            kinds = self._allowed_cache[key] = self._allowed(*key)
        return kinds

    def _evaluate(self, run: _Run) -> None:
        """Evaluate the instant being gathered, if any."""
        if not run.batch or run.t is None:
            return
        batch, run.batch = run.batch, []
        self._judge(run, run.checks.on_batch(run.t, batch))

    def _judge(self, run: _Run, findings: Iterable[Finding]) -> None:
        allowed = self._allowed_for(run)
        for f in findings:
            if f.kind in allowed:
                run.counted[f.kind] = run.counted.get(f.kind, 0) + 1
                continue
            v = Violation.of(run.checks.protocol, f)
            self.violations.append(v)
            if self._on_violation is not None:
                self._on_violation(v)

    # --------------------------------------------------------- the driver

    def flush(self) -> None:
        """Evaluate every protocol's pending instant (call when virtual time has moved on)."""
        for protocol in sorted(self._runs):
            run = self._runs[protocol]
            if not run.finished:
                self._evaluate(run)

    def finish(self, protocol: str | None = None, *, cut_short: bool = False) -> list[Violation]:
        """End a protocol's run (every one's when ``None``): the end-of-log checks.

        Loss, the exact processing windows, double ownership and the settle
        points' partitions that joined the universe later are judged here;
        ``cut_short`` (a run stopped before its end) judges only the pending
        instant: what a run did not get to do is not its loss. Events of a
        finished protocol are not checked any more.

        Returns:
            The violations this call found.
        """
        before = len(self.violations)
        names = sorted(self._runs) if protocol is None else [protocol]
        for name in names:
            run = self._run(name)
            if run.finished:
                continue
            self._evaluate(run)
            if not cut_short:
                self._judge(run, run.checks.finish())
            run.finished = True
        return self.violations[before:]

    @property
    def first(self) -> Violation | None:
        """The first violation found, if any."""
        return self.violations[0] if self.violations else None

    def raise_if_violated(self) -> None:
        """Raise :class:`StopSimulation` with the first violation, if there is one."""
        if self.violations:
            raise StopSimulation(self.violations[0])

    # ---------------------------------------------------------- reporting

    def counted(self, protocol: str) -> dict[str, int]:
        """The allowed findings of ``protocol``'s run, per kind."""
        run = self._runs.get(protocol)
        return {} if run is None else dict(sorted(run.counted.items()))

    def unchecked(self, protocol: str) -> tuple[str, ...]:
        """Anomaly kinds ``protocol``'s run may not show that the monitor does not look for."""
        run = self._runs.get(protocol)
        if run is None:
            return ()
        allowed = self._allowed_for(run)
        return tuple(k for k in UNCHECKED_KINDS if k not in allowed)

    def stats(self) -> dict[str, object]:
        """What the monitor saw: events in all, and per protocol.

        Per protocol: events checked, instants evaluated, events stamped before
        the instant they joined (``late``), the commit mode in force, whether
        the protocol is finished.
        """
        return {
            "events": self._index,
            "after_finish": self.after_finish,
            "protocols": {
                p: {
                    "events": r.events,
                    "instants": r.checks.batches,
                    "late": r.late,
                    "commit_mode": r.commit_mode,
                    "allows_loss": r.allows_loss,
                    "finished": r.finished,
                }
                for p, r in sorted(self._runs.items())
            },
        }

    def trace(self, violation: Violation, limit: int = 200) -> list[Event]:
        """The recent events touching the violation's partition or members, and every action.

        Design §5.3: the last ``limit`` events of the ring that are about the
        violation's partition (its own ``topic``/``partition`` or a partition
        list naming it) or one of its members, plus every timeline action and
        fault of its protocol, in arrival order.
        """
        tp = (
            None
            if violation.topic is None or violation.partition is None
            else (violation.topic, violation.partition)
        )
        members = set(violation.members)

        def touches(ev: Event) -> bool:
            if ev.get("protocol", "") != violation.protocol:
                return False
            if members and (ev.get("member") in members or ev.get("member_id") in members):
                return True
            if tp is None:
                return False
            if (ev.get("topic"), ev.get("partition")) == tp:
                return True
            return tp in parse_partitions(ev.get("partitions"))

        hits = [e for e in self.recent if touches(e[1])][-max(0, limit) :]
        acts = [e for e in self.actions if e[1].get("protocol", "") == violation.protocol]
        merged = {i: ev for i, ev in (*acts, *hits)}
        return [merged[i] for i in sorted(merged)]


KNOWN_KINDS: Final = frozenset((*ANOMALY_KINDS, *STRICT_KINDS, *SELF_CHECK_KINDS))
"""Every kind a :class:`Violation` may have."""
