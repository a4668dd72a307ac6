"""Schedule profiles: how far a simulated run's schedule may stray from the baseline.

Design §5.1 (issue 18). The protocols are specified for an asynchronous system:
any message and any process step may be late, timers are never early, TCP
links keep order. Exploration draws schedules inside those freedoms, bounded so
that a scenario keeps its meaning (every bound stays well below the session,
heartbeat and poll timeouts of the library's scenarios). The *scenario* is
never perturbed: its timeline and its seeded plan are the same for every
schedule; each explored seed is another schedule of the same story.

A :class:`Profile` says, for one run:

* ``ray_latency``: the one-way latency of an actor call or its answer (the
  simulated Ray links); ``None`` keeps the engine's baseline
  (:data:`emulator.sim.network.RAY_LINK_LATENCY`);
* ``ray_fifo``: whether those links keep send order. Ray delivers one caller's
  calls to an actor in submission order, so the profiles keep it; a profile
  file may drop it to explore async actors' freedom (design §1.3), knowing that
  a finding there may be one Ray would not allow;
* ``zk_latency``: the one-way latency of a ZooKeeper connection (always FIFO:
  TCP), ``None`` for the baseline;
* ``zk_commit_latency``: a write's quorum round trip in a replicated ensemble,
  ``None`` for the baseline;
* ``ties``: callbacks due at one instant run in a drawn order instead of the
  order they were scheduled in (a FIFO link still delivers in order);
* ``stall_every`` / ``stall_for``: now and then one actor, drawn, is busy and
  runs nothing for a drawn time (a stalled process: its callbacks wait, in
  order). The stall is capped at a tenth of the run's smallest session timeout
  (:func:`stall_cap_ns`);
* ``timer_late``: how late each timer an actor's code sets fires (a sleep, a
  request or session timeout, a heartbeat or poll interval), drawn per timer;
  ``None``: on time. Timers are never early; the scenario's timeline (the
  driver's timers) and the engine's own timers (message delivery, the
  simulated ZooKeeper) stay exact (:class:`emulator.sim.loop.SimEventLoop`).

Latencies are integer quantile tables (:class:`emulator.sim.rng.QuantileTable`)
in nanoseconds, drawn from the run's named streams, so a profile and a seed
replay a schedule exactly.

Profiles: ``baseline`` (the sim engine's defaults: a run under it is the run
without a profile, byte for byte) and ``explore`` (the design's default
exploration bounds); a TOML file can define another (:func:`load_profile`).
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from emulator.sim.rng import PPM, QuantileTable

__all__ = [
    "BASELINE",
    "EXPLORE",
    "PROFILES",
    "Profile",
    "ProfileError",
    "load_profile",
    "profile_from_dict",
    "profile_to_toml",
    "stall_cap_ns",
]

MS: Final = 1_000_000
"""Nanoseconds per millisecond."""


class ProfileError(ValueError):
    """A profile name or file that cannot be used (one line)."""


@dataclass(frozen=True)
class Profile:
    """How a simulated run's schedule is drawn (see the module docstring).

    Attributes:
        name: what ``--profile`` took (a name, or the file's stem).
        ray_latency: one-way actor-call latency, or ``None`` (baseline).
        ray_fifo: actor-call links keep send order.
        zk_latency: one-way ZooKeeper connection latency, or ``None`` (baseline).
        zk_commit_latency: a replicated write's quorum round trip, or ``None``.
        ties: equal-time callbacks run in a drawn order.
        stall_every: the time between two actor stalls, or ``None`` (no stalls).
        stall_for: how long one stall lasts (capped by :func:`stall_cap_ns`).
        timer_late: how late an actor's timer fires, or ``None`` (on time).
    """

    name: str
    ray_latency: QuantileTable | None = None
    ray_fifo: bool = True
    zk_latency: QuantileTable | None = None
    zk_commit_latency: QuantileTable | None = None
    ties: bool = False
    stall_every: QuantileTable | None = None
    stall_for: QuantileTable | None = None
    timer_late: QuantileTable | None = None

    @property
    def is_baseline(self) -> bool:
        """Whether a run under this profile is the engine's baseline run."""
        return self == Profile(self.name)

    def to_dict(self) -> dict[str, Any]:
        """What the manifest and ``violation.json`` record: every setting, tables as points."""

        def table(t: QuantileTable | None) -> list[list[int]] | None:
            return None if t is None else [list(p) for p in t.points]

        return {
            "name": self.name,
            "ray_latency_ns": table(self.ray_latency),
            "ray_fifo": self.ray_fifo,
            "zk_latency_ns": table(self.zk_latency),
            "zk_commit_latency_ns": table(self.zk_commit_latency),
            "ties": self.ties,
            "stall_every_ns": table(self.stall_every),
            "stall_for_ns": table(self.stall_for),
            "timer_late_ns": table(self.timer_late),
        }


BASELINE: Final = Profile("baseline")
"""The sim engine's defaults (design §4.3): a run under it is the run without a profile."""

EXPLORE: Final = Profile(
    "explore",
    # [0.2, 20] ms, 1% of calls 20-200 ms
    ray_latency=QuantileTable([(0, 200_000), (990_000, 20 * MS), (PPM, 200 * MS)]),
    # [0.05, 10] ms, 1% 10-100 ms; always in order (TCP)
    zk_latency=QuantileTable([(0, 50_000), (990_000, 10 * MS), (PPM, 100 * MS)]),
    # up to ten times the baseline [0.2, 1] ms
    zk_commit_latency=QuantileTable([(0, 200_000), (PPM, 10 * MS)]),
    ties=True,
    # about one stall every 2-10 s of the run, of 10-300 ms
    stall_every=QuantileTable([(0, 2_000 * MS), (PPM, 10_000 * MS)]),
    stall_for=QuantileTable([(0, 10 * MS), (PPM, 300 * MS)]),
    # timers up to 1 ms late, 1% of them 1-20 ms
    timer_late=QuantileTable([(0, 0), (990_000, 1 * MS), (PPM, 20 * MS)]),
)
"""The default exploration bounds (design §5.1's table)."""

PROFILES: Final[Mapping[str, Profile]] = {p.name: p for p in (BASELINE, EXPLORE)}
"""The named profiles ``--profile`` takes."""

_TABLE_KEYS: Final = (
    "ray_latency_ms",
    "zk_latency_ms",
    "zk_commit_latency_ms",
    "stall_every_ms",
    "stall_for_ms",
    "timer_late_ms",
)
_BOOL_KEYS: Final = ("ray_fifo", "ties")


def stall_cap_ns(session_timeouts_ms: list[float]) -> int:
    """The longest stall a run allows: a tenth of its smallest session timeout (ns).

    ``session_timeouts_ms`` are the run's session timeouts as the protocols use
    them (already scaled by the scenario's time scale).
    """
    smallest = min((t for t in session_timeouts_ms if t > 0), default=10_000.0)
    return int(smallest * MS) // 10


def _table(key: str, value: object) -> QuantileTable:
    """A latency table from a file: ``[lo, hi]`` ms (uniform) or ``[[ppm, ms], ...]``."""
    if (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
    ):
        lo, hi = (float(v) for v in value)
        points = [(0, round(lo * MS)), (PPM, round(hi * MS))]
    elif isinstance(value, list) and all(isinstance(p, list) and len(p) == 2 for p in value):
        points = [(int(p), round(float(ms) * MS)) for p, ms in value]
    else:
        raise ProfileError(
            f"{key} must be [lo_ms, hi_ms] or a list of [cumulative_ppm, ms] points, got {value!r}"
        )
    if any(v < 0 for _, v in points):
        raise ProfileError(f"{key} must not be negative, got {value!r}")
    try:
        return QuantileTable(points)
    except ValueError as exc:
        raise ProfileError(f"{key}: {exc}") from None


def profile_from_dict(name: str, doc: Mapping[str, object]) -> Profile:
    """A profile from a file's table: unknown keys are refused, absent ones are baseline.

    Raises:
        ProfileError: an unknown key or a bad value.
    """
    unknown = sorted(set(doc) - {*_TABLE_KEYS, *_BOOL_KEYS, "name"})
    if unknown:
        raise ProfileError(
            f"unknown profile key(s) {', '.join(unknown)}; known: "
            f"{', '.join((*_TABLE_KEYS, *_BOOL_KEYS))}"
        )
    tables = {k: _table(k, doc[k]) for k in _TABLE_KEYS if k in doc}
    flags: dict[str, bool] = {}
    for k in _BOOL_KEYS:
        if k in doc:
            v = doc[k]
            if not isinstance(v, bool):
                raise ProfileError(f"{k} must be true or false, got {v!r}")
            flags[k] = v
    if ("stall_every_ms" in tables) != ("stall_for_ms" in tables):
        raise ProfileError("stall_every_ms and stall_for_ms go together")
    return Profile(
        str(doc.get("name") or name),
        ray_latency=tables.get("ray_latency_ms"),
        ray_fifo=flags.get("ray_fifo", True),
        zk_latency=tables.get("zk_latency_ms"),
        zk_commit_latency=tables.get("zk_commit_latency_ms"),
        ties=flags.get("ties", False),
        stall_every=tables.get("stall_every_ms"),
        stall_for=tables.get("stall_for_ms"),
        timer_late=tables.get("timer_late_ms"),
    )


def profile_to_toml(profile: Profile) -> str:
    """The profile as a file :func:`load_profile` reads back equal (tables as ppm points)."""
    lines = [f"name = {json.dumps(profile.name)}"]
    for key, table in (
        ("ray_latency_ms", profile.ray_latency),
        ("zk_latency_ms", profile.zk_latency),
        ("zk_commit_latency_ms", profile.zk_commit_latency),
        ("stall_every_ms", profile.stall_every),
        ("stall_for_ms", profile.stall_for),
        ("timer_late_ms", profile.timer_late),
    ):
        if table is not None:
            points = ", ".join(f"[{ppm}, {ns / MS!r}]" for ppm, ns in table.points)
            lines.append(f"{key} = [{points}]")
    lines.append(f"ties = {str(profile.ties).lower()}")
    lines.append(f"ray_fifo = {str(profile.ray_fifo).lower()}")
    return "\n".join(lines) + "\n"


def load_profile(spec: str) -> Profile:
    """The profile ``--profile`` names: ``baseline``, ``explore`` or a TOML file's path.

    Raises:
        ProfileError: neither a known name nor a readable, valid profile file.
    """
    named = PROFILES.get(spec)
    if named is not None:
        return named
    path = Path(spec)
    if not path.is_file():
        raise ProfileError(
            f"--profile {spec}: not a profile name ({', '.join(PROFILES)}) nor a file"
        )
    try:
        doc = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ProfileError(f"--profile {spec}: {exc}") from None
    return profile_from_dict(path.stem, doc)
