"""ZooKeeper's session-timeout arithmetic, pure: shared by the embedded server and the sim.

``tick_time_for`` picks the tickTime the emulator gives an ensemble for a run's
scaled session timeout; ``negotiated_session_timeout_ms`` is the clamp a server
applies to a client's requested timeout. No I/O: the simulated ZooKeeper
(``zk_registry/sim``) imports this, never ``zk_registry.server``.
"""

from __future__ import annotations

import math

__all__ = ["PREFERRED_MAX_TICK_MS", "negotiated_session_timeout_ms", "tick_time_for"]

PREFERRED_MAX_TICK_MS = 2000
"""tick_time_for never picks a tick above this unless the bounds force it."""


def tick_time_for(session_timeout_ms: int, time_scale: float) -> int:
    """Choose a ZooKeeper tickTime for a scaled session timeout.

    The timeout a client will request is ``round(session_timeout_ms * time_scale)``.
    The result ``tick`` satisfies ``2 * tick <= scaled <= 20 * tick`` (so the server
    grants the requested timeout unchanged), is at least 1 ms, is about a third
    of the scaled timeout (so the server notices an expiry promptly), and is not
    above 2000 ms (ZooKeeper's default) unless the upper bound requires it.

    Args:
        session_timeout_ms: the unscaled timeout, e.g. Kafka's ``zookeeper.session.timeout.ms``.
        time_scale: the run's time scale (0.1 runs ten times faster).

    Returns:
        tickTime in milliseconds.

    Raises:
        ValueError: if an input is not positive or the scaled timeout is below 2 ms.
    """
    if session_timeout_ms <= 0:
        raise ValueError(f"session_timeout_ms must be positive, got {session_timeout_ms}")
    if not (time_scale > 0 and math.isfinite(time_scale)):
        raise ValueError(f"time_scale must be a positive finite number, got {time_scale}")
    scaled = round(session_timeout_ms * time_scale)
    if scaled < 2:
        raise ValueError(
            f"scaled session timeout {session_timeout_ms} ms x {time_scale} = {scaled} ms "
            "is below ZooKeeper's minimum of 2 ms (2 x a 1 ms tickTime)"
        )
    lower = -(-scaled // 20)  # ceil(scaled / 20): 20 * tick >= scaled
    preferred = min(scaled // 3, PREFERRED_MAX_TICK_MS)
    return max(1, lower, preferred)


def negotiated_session_timeout_ms(
    requested_ms: int,
    tick_time_ms: int,
    min_session_timeout_ms: int | None = None,
    max_session_timeout_ms: int | None = None,
) -> int:
    """The session timeout a server with this tickTime grants for ``requested_ms``.

    ZooKeeper clamps the request into ``[min, max]``, by default ``[2, 20] x tickTime``.
    """
    low = 2 * tick_time_ms if min_session_timeout_ms is None else min_session_timeout_ms
    high = 20 * tick_time_ms if max_session_timeout_ms is None else max_session_timeout_ms
    return max(low, min(high, requested_ms))
