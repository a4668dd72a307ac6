"""Shrinking a violating schedule: which of the profile's freedoms the violation needs.

Design §5.4 (issue 18, "optionally shrinks the schedule"). A seed found by
``explore`` violates an invariant under a profile that loosens several things
at once (latencies and their tails, drawn ties, actor stalls, late timers). The
schedule itself is the seed's draws and cannot be edited event by event without
losing exact replay; what can be taken away is a freedom. :func:`shrink` runs
the same seed again with one freedom of the profile removed at a time, in a
fixed order (:data:`STEPS`), and keeps each removal after which the run still
stops at a violation of the same kind. What is left is a smaller profile that
still reproduces the finding (``--profile`` takes it as a file, so the replay
command stays one line) and the list of freedoms the violation needed: "it
needs a stalled actor and a slow link, not drawn ties" is often the diagnosis.

This is an emulator choice, not anything Kafka has: a greedy pass in one fixed
order (removing a freedom changes the whole schedule, so another order may
keep a different set; the result is *a* smaller profile, not the smallest),
and "the same violation" means the same invariant kind, not the same
partition or members.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from actors.io import MakeCoordinatorFactory
from actors.sim.explore import SeedOutcome, run_seed
from emulator.scenario import Scenario
from emulator.sim.profile import Profile
from emulator.sim.rng import PPM, QuantileTable

__all__ = ["STEPS", "ShrinkResult", "ShrinkStep", "shrink", "without_tail"]


def without_tail(table: QuantileTable | None) -> QuantileTable | None:
    """The table without its last segment (the rare slow tail): its body stretched to 100%.

    ``None`` when the table has no tail to remove (two points or fewer, or none).
    """
    if table is None or len(table.points) <= 2:
        return None
    body = list(table.points[:-1])
    body[-1] = (PPM, body[-1][1])
    return QuantileTable(body)


def _stall_tail(p: Profile) -> Profile | None:
    table = without_tail(p.stall_for)
    return None if table is None else dataclasses.replace(p, stall_for=table)


def _zk_tail(p: Profile) -> Profile | None:
    table = without_tail(p.zk_latency)
    return None if table is None else dataclasses.replace(p, zk_latency=table)


def _ray_tail(p: Profile) -> Profile | None:
    table = without_tail(p.ray_latency)
    return None if table is None else dataclasses.replace(p, ray_latency=table)


def _off(**changes: Any) -> Callable[[Profile], Profile | None]:
    def step(p: Profile) -> Profile | None:
        q = dataclasses.replace(p, **changes)
        return None if q == p else q

    return step


STEPS: Final[tuple[tuple[str, Callable[[Profile], Profile | None]], ...]] = (
    ("drawn ties", _off(ties=False)),
    ("late timers", _off(timer_late=None)),
    ("actor stalls", _off(stall_every=None, stall_for=None)),
    ("quorum-write latency", _off(zk_commit_latency=None)),
    ("ZooKeeper link latency", _off(zk_latency=None)),
    ("actor-call latency", _off(ray_latency=None)),
    ("the stalls' long tail", _stall_tail),
    ("the ZooKeeper links' slow tail", _zk_tail),
    ("the actor calls' slow tail", _ray_tail),
)
"""The freedoms taken away, in order: each ``(what, profile -> profile without it)``
(``None``: the profile does not have it). Whole freedoms first (back to the
baseline's setting), then the rare tails of what is left."""


@dataclass(frozen=True)
class ShrinkStep:
    """One attempt: the seed run again without one freedom.

    Attributes:
        removed: what was taken away (a :data:`STEPS` name).
        still_violates: the run stopped at a violation of the same kind, so the
            removal is kept.
        violation_kind: the kind the run stopped at, or ``None`` (it did not).
        digest: the run's log digest.
    """

    removed: str
    still_violates: bool
    violation_kind: str | None
    digest: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-able."""
        return dataclasses.asdict(self)


@dataclass
class ShrinkResult:
    """What :func:`shrink` found.

    Attributes:
        profile: the smaller profile that still gives the violation.
        outcome: the seed's run under it.
        steps: every attempt, in order.
    """

    profile: Profile
    outcome: SeedOutcome
    steps: list[ShrinkStep] = field(default_factory=list)

    @property
    def needed(self) -> list[str]:
        """The freedoms that could not be taken away (the violation went with them)."""
        return [s.removed for s in self.steps if not s.still_violates]

    @property
    def removed(self) -> list[str]:
        """The freedoms taken away."""
        return [s.removed for s in self.steps if s.still_violates]


def shrink(
    scenario: Scenario,
    protocol: str,
    found: SeedOutcome,
    profile: Profile,
    *,
    coordinator_factory: MakeCoordinatorFactory | None = None,
    keep: Path | None = None,
    say: Callable[[str], None] | None = None,
) -> ShrinkResult:
    """Take freedoms away from ``profile`` while ``found``'s seed still violates the same way.

    Args:
        found: the violating seed's outcome (under ``profile``).
        coordinator_factory: as the exploration used (a planted coordinator).
        keep: where the shrunk run's directory goes (``None``: not kept).
        say: one line per attempt.

    Raises:
        ValueError: ``found`` has no violation.
    """
    if found.violation is None:
        raise ValueError(f"seed {found.seed} has no violation to shrink")
    kind = found.violation.get("kind")
    current = profile
    steps: list[ShrinkStep] = []
    for name, take_away in STEPS:
        candidate = take_away(current)
        if candidate is None:
            continue
        o = run_seed(
            scenario, protocol, found.seed, candidate, coordinator_factory=coordinator_factory
        )
        got = None if o.violation is None else o.violation.get("kind")
        step = ShrinkStep(name, got == kind, got, o.digest)
        steps.append(step)
        if say is not None:
            verdict = "still violates: removed" if step.still_violates else "needed"
            say(f"{protocol} seed {found.seed} without {name}: {got or 'no violation'} ({verdict})")
        if step.still_violates:
            current = candidate
    # The same schedule once more under the shrunk profile's own name (a run's id,
    # so its log digest, carries the name), as its replay from the file runs it.
    shrunk = dataclasses.replace(current, name=f"{profile.name}-shrunk")
    final = run_seed(
        scenario, protocol, found.seed, shrunk, coordinator_factory=coordinator_factory,
        keep=keep,
    )  # fmt: skip
    return ShrinkResult(shrunk, final, steps)
