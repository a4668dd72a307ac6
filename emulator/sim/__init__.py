"""The sim engine's core: virtual time, seeded streams, a simulated network.

``--engine sim`` runs the same actor shells and cores as the real engine, all
in one process on one asyncio loop whose clock is virtual: a timer that is due
in an hour fires at once when nothing else is pending, and a seed replays a run
byte for byte (design: issue 18, §0 and §4). This package holds the pure parts
of that engine; it imports no ray, kazoo or pyspark, never reads the machine's
clock and never draws from the global random generator.

Modules:

* :mod:`emulator.sim.loop`: :class:`~emulator.sim.loop.SimEventLoop`, an
  ``asyncio`` loop on integer-nanosecond virtual time with FIFO ties,
  quiescence detection, no executors, and actor contexts (``current_actor``)
  that can be killed (callbacks dropped, no ``finally``) or stalled (callbacks
  deferred in order).
* :mod:`emulator.sim.clocks`: ``SIM_EPOCH`` and the virtual monotonic and wall
  sources for ``ScaledClock`` and ``EventWriter``.
* :mod:`emulator.sim.rng`: ``Streams(seed)``, named independent substreams, and
  integer-only draws (uniform, quantile tables).
* :mod:`emulator.sim.network`: ``Link`` (drawn latency, FIFO clamp,
  PASS/BLACKHOLE/DOWN) and ``Network`` (links by ``(src, dst)``).
* :mod:`emulator.sim.monitor`: ``Monitor``, the online invariant monitor fed by
  the event writers' tap (per-instant batches, ``Violation`` records, a ring of
  recent events for traces, ``StopSimulation``); its rules, the offline
  checkers' re-expressed over a stream, are in :mod:`emulator.sim.invariants`.

The simulated ZooKeeper lives in ``zk_registry/sim`` and the engine that
composes actors, ZooKeeper and this loop in ``actors/sim``.
"""

from __future__ import annotations

import functools
import hashlib
from importlib import metadata
from pathlib import Path

__all__ = ["DISTRIBUTION", "ENGINE_NAME", "SOURCE_PACKAGES", "engine_version", "source_digest"]

ENGINE_NAME = "sim"
"""The engine's name, as ``--engine`` takes it and the manifest records it."""

DISTRIBUTION = "kafka-rebalance-emulator"
"""The distribution whose version prefixes :func:`engine_version`."""

SOURCE_PACKAGES = ("emulator", "zk_registry", "actors")
"""The packages whose sources a replay depends on (design §4.4 item 7)."""

_ROOT = Path(__file__).resolve().parents[2]
"""The directory that holds the packages (the repository root, or site-packages)."""


def source_digest(root: Path = _ROOT) -> str:
    """sha256 over the Python sources of :data:`SOURCE_PACKAGES` under ``root``.

    Files are taken in sorted order of their path relative to ``root`` (POSIX
    separators); each contributes its path, a NUL, its byte length, a NUL and
    its bytes, so moving code between files changes the digest too. A package
    missing under ``root`` contributes nothing.

    Returns:
        The hex digest.
    """
    h = hashlib.sha256()
    files = sorted(
        (path.relative_to(root).as_posix(), path)
        for package in SOURCE_PACKAGES
        if (root / package).is_dir()
        for path in (root / package).rglob("*.py")
    )
    for rel, path in files:
        data = path.read_bytes()
        h.update(rel.encode())
        h.update(b"\0%d\0" % len(data))
        h.update(data)
    return h.hexdigest()


@functools.cache
def engine_version() -> str:
    """``<package version>+<first 16 hex of source_digest()>``, computed once per process.

    Recorded in a sim run's manifest: a replay under another engine version
    may diverge and is warned about.
    """
    try:
        version = metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        version = "0+unknown"
    return f"{version}+{source_digest()[:16]}"
