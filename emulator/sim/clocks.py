"""The virtual clock sources of the sim (design §1.2, §4.4 item 3).

The real engine stamps events and builds its :class:`~emulator.clock.ScaledClock`
from ``time.monotonic`` and ``time.time``. The sim hands the same consumers two
callables read from the loop's virtual time instead:

* ``mono()`` = ``loop.time()``: virtual seconds since the loop started (the
  loop's clock stands for ``time.monotonic()``);
* ``wall()`` = ``SIM_EPOCH + loop.time()``: a virtual wall clock that starts at
  2026-01-01T00:00:00Z, so every stamp of a run is a function of the run.

They are meant for ``ScaledClock(..., mono=clocks.mono, wall=clocks.wall)`` and
``EventWriter(..., wall_clock=clocks.wall, mono_clock=clocks.mono)``.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["SIM_EPOCH", "SIM_EPOCH_MS", "LoopTime", "VirtualClocks"]

SIM_EPOCH = 1767225600.0
"""The virtual wall time at loop time 0: 2026-01-01T00:00:00Z, in Unix seconds."""

SIM_EPOCH_MS = 1_767_225_600_000
""":data:`SIM_EPOCH` in integer milliseconds."""


class LoopTime(Protocol):
    """What the clocks read: a loop with virtual time (``SimEventLoop``)."""

    def time(self) -> float:
        """Virtual seconds."""
        ...

    @property
    def now_ns(self) -> int:
        """Virtual integer nanoseconds."""
        ...


class VirtualClocks:
    """Monotonic and wall clock sources on a loop's virtual time.

    Args:
        loop: the sim loop whose time they read.
    """

    def __init__(self, loop: LoopTime) -> None:
        self._loop = loop

    def mono(self) -> float:
        """Virtual monotonic seconds: ``loop.time()``."""
        return self._loop.time()

    def wall(self) -> float:
        """Virtual wall seconds since the Unix epoch: ``SIM_EPOCH + loop.time()``."""
        return SIM_EPOCH + self._loop.time()

    def wall_ms(self) -> int:
        """Virtual wall time in integer milliseconds (ZooKeeper timestamps, ids)."""
        return SIM_EPOCH_MS + self._loop.now_ns // 1_000_000
