"""The actors' one cancel-safe wait: until an event is set or a timeout runs out."""

from __future__ import annotations

import asyncio

__all__ = ["long_poll"]


async def long_poll(wake: asyncio.Event, timeout_s: float) -> None:
    """A long poll's wait: until ``wake`` is set or ``timeout_s`` (wall) runs out.

    The timeout sets ``wake`` itself: one timer and the event's own future,
    where ``asyncio.wait_for`` would add a task and its cancellation (a long
    poll per follower per leader, and per consumer host per broker). Nor does
    it lose a cancellation: Python 3.11's ``wait_for`` returns normally when the
    event is set in the instant the waiting task is cancelled (bpo-42130, fixed in 3.12), and a
    loop around it then never ends.
    """
    if wake.is_set():
        return
    timer = asyncio.get_running_loop().call_later(timeout_s, wake.set)
    try:
        await wake.wait()
    finally:
        timer.cancel()
