"""Injected time for the core.

The core never reads a clock itself (style.md item 3): state machines are
handed ``now`` in emulated milliseconds. :class:`ScaledClock` is what the
actors use (wall time divided by the run's ``time_scale``); :class:`FakeClock`
is what the unit tests use. This module is the core's one door to the
machine's clock: whatever else in the core needs real time (the CLI's
progress lines and wall times) asks :func:`monotonic_s`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol


class Clock(Protocol):
    """Emulated time in milliseconds since the run started."""

    def now_ms(self) -> float:
        """The current emulated time in ms."""
        ...


def monotonic_s() -> float:
    """Seconds on the machine's monotonic clock (for wall times, never protocol time)."""
    return time.monotonic()


class FakeClock:
    """A clock that moves only when told to (Kafka's ``MockTime``)."""

    def __init__(self, start_ms: float = 0.0) -> None:
        self._now = start_ms

    def now_ms(self) -> float:
        """The current fake time in ms."""
        return self._now

    def advance(self, ms: float) -> float:
        """Move time forward by ``ms`` and return the new time."""
        if ms < 0:
            raise ValueError("time does not go backwards")
        self._now += ms
        return self._now


class ScaledClock:
    """Emulated time from the monotonic clock, stretched by ``1 / time_scale``.

    Args:
        time_scale: wall seconds per emulated second, in (0, 1]. A run with
            ``time_scale = 0.1`` runs Kafka's 6 s session timeout in 0.6 s.
        origin_wall: the wall time (``wall``) at which the run started; every
            process of a run uses the same origin, so emulated times agree
            across processes up to clock skew.
        mono: the monotonic source, in seconds (``time.monotonic`` by default;
            the sim engine passes its loop's virtual time).
        wall: the wall-clock source, in seconds since the epoch (``time.time``
            by default; the sim engine passes its virtual wall clock).

    Every reading goes through ``mono`` and ``wall``; the clock reads nothing else.
    """

    def __init__(
        self,
        time_scale: float,
        origin_wall: float,
        *,
        mono: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        if not 0 < time_scale <= 1000:
            raise ValueError(f"time_scale must be > 0, got {time_scale}")
        self.time_scale = time_scale
        self.origin_wall = origin_wall
        self._mono = mono
        self._wall = wall
        # Anchor the monotonic clock to the wall origin once, so later readings
        # do not jump with NTP.
        self._mono_origin = mono() - (wall() - origin_wall)

    @property
    def mono(self) -> Callable[[], float]:
        """The monotonic source this clock reads (seconds)."""
        return self._mono

    @property
    def wall(self) -> Callable[[], float]:
        """The wall-clock source this clock reads (seconds since the epoch)."""
        return self._wall

    def rebase(self, origin_wall: float) -> float:
        """Move emulated time 0 to ``origin_wall`` (a reading of the wall source), in place.

        The orchestrator starts every actor first and then fixes the run's
        origin, so that slow actor start-up never eats into the timeline.

        Returns:
            How many emulated ms later the new time 0 is: a reading ``t``
            taken before is ``t - shift`` on the new origin.
        """
        before = self._mono_origin
        self.origin_wall = origin_wall
        self._mono_origin = self._mono() - (self._wall() - origin_wall)
        return (self._mono_origin - before) * 1000.0 / self.time_scale

    def now_ms(self) -> float:
        """Emulated ms since the run's origin."""
        return (self._mono() - self._mono_origin) * 1000.0 / self.time_scale

    def wall_seconds(self, emulated_ms: float) -> float:
        """How many wall seconds an emulated duration takes."""
        return emulated_ms / 1000.0 * self.time_scale

    def ms_at(self, mono_s: float) -> float:
        """The emulated ms the clock reads at ``mono_s`` (a reading of the ``mono`` source)."""
        return (mono_s - self._mono_origin) * 1000.0 / self.time_scale

    def wall_at(self, emulated_ms: float) -> float:
        """The monotonic time (of the ``mono`` source) at which the clock reads ``emulated_ms``."""
        return self._mono_origin + emulated_ms / 1000.0 * self.time_scale


def skew_bound_ms(nodes: Mapping[str, Mapping[str, Any]], ids: Iterable[str]) -> float:
    """The largest possible wall-clock disagreement between the given nodes, in ms.

    ``nodes``: node id -> ``{"offset_ms", "bound_ms"}``, each node's measured
    wall-clock offset from the driver and its uncertainty (the manifest's
    ``protocols.<p>.placement.nodes``, from ``actors.placement.measure_nodes``).

    For two nodes it is ``|offset_a - offset_b| + bound_a + bound_b``; a node
    not measured makes the bound infinite.
    """
    known: list[tuple[float, float]] = []
    for nid in set(ids):
        n = nodes.get(nid)
        if n is None:
            return float("inf")
        known.append((float(n["offset_ms"]), float(n["bound_ms"])))
    if len(known) < 2:
        return 0.0
    return max(
        abs(a - b) + ea + eb for i, (a, ea) in enumerate(known) for (b, eb) in known[i + 1 :]
    )
