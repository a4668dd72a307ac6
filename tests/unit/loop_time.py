"""An asyncio loop whose clock is a number the test sets, for code that must read ``loop.time()``.

It stands in for the sim engine's virtual-time loop in tests of the clock seams:
code that reads the loop's clock sees the test's time, code that reads
``time.monotonic()`` does not. Its timers never come due by themselves (the
clock only moves when the test moves it), so what runs on it must finish
through ready callbacks (``sleep(0)``, futures resolved with ``call_soon``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class ManualTimeLoop(asyncio.SelectorEventLoop):
    """A selector loop whose :meth:`time` returns :attr:`now` (seconds)."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now
        super().__init__()

    def time(self) -> float:
        """The test's clock."""
        return self.now


def run_on(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion on ``loop``, then close the loop."""
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()
