"""One seed, named independent random streams, integer-only draws (design §4.2).

Every component of a simulated run draws from its own stream, named after what
it is for (``net/<src>-><dst>``, ``zk/<client>/ping``, ``actor/<name>/phase``,
``explore/ties``, ...). A stream's seed is the first 8 bytes of
``sha256(f"{seed}/{name}")``, so streams are independent of each other and of
the order in which they are first asked for: adding or removing one
component's draws never shifts another's.

**Draws must be integer-only.** Use ``randrange``, ``randint``,
``getrandbits``, ``choice``, ``shuffle`` and ``sample`` (all built on
``getrandbits`` through integer arithmetic), and the helpers below. Never use
``gauss``, ``normalvariate``, ``lognormvariate``, ``expovariate``,
``vonmisesvariate``, ``gammavariate``, ``betavariate``, ``paretovariate`` or
``weibullvariate``: they go through libm (``log``, ``exp``, ``cos``, ``sqrt``),
which is not guaranteed bit-identical across platforms and C libraries, while
the Mersenne Twister's integer output is. Latency shapes are therefore integer
quantile tables (:class:`QuantileTable`), not parametric distributions.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import random
from collections.abc import Sequence

__all__ = ["PPM", "QuantileTable", "Streams", "chance", "stream_seed", "uniform_ns"]

PPM = 1_000_000
"""Parts per million: the probability unit of :class:`QuantileTable` and :func:`chance`."""
_PPM_BITS = PPM.bit_length()  # the bits randrange(PPM) draws at a time


def stream_seed(seed: int | str, name: str) -> int:
    """The integer seed of stream ``name`` under run seed ``seed``.

    ``int.from_bytes(sha256(f"{seed}/{name}").digest()[:8], "big")``: the same
    on every platform and independent of ``PYTHONHASHSEED``.
    """
    digest = hashlib.sha256(f"{seed}/{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


class Streams:
    """Named, independent :class:`random.Random` streams derived from one seed.

    Args:
        seed: the run seed (the scenario's ``seed``, or ``--seed``).
    """

    def __init__(self, seed: int | str) -> None:
        self.seed = seed
        self._streams: dict[str, random.Random] = {}

    def stream(self, name: str) -> random.Random:
        """The stream called ``name``, created on first use and cached afterwards."""
        rng = self._streams.get(name)
        if rng is None:
            rng = random.Random(stream_seed(self.seed, name))
            self._streams[name] = rng
        return rng

    def names(self) -> list[str]:
        """The names of the streams handed out so far, sorted."""
        return sorted(self._streams)


def uniform_ns(rng: random.Random, lo_ns: int, hi_ns: int) -> int:
    """An integer uniformly drawn from ``[lo_ns, hi_ns]`` (both ends included).

    The draw of ``rng.randrange(lo_ns, hi_ns + 1)``, the same number from the
    same state (CPython's ``_randbelow_with_getrandbits``: the fewest bits that
    hold the width, redrawn while too large), without ``randrange``'s argument
    checks: every message of a simulation draws one. ``test_rng`` holds it to
    ``randrange``.
    """
    width = hi_ns - lo_ns + 1
    if width <= 0:
        raise ValueError(f"empty range [{lo_ns}, {hi_ns}]")
    getrandbits = rng.getrandbits
    k = width.bit_length()
    r = getrandbits(k)
    while r >= width:
        r = getrandbits(k)
    return lo_ns + r


def chance(rng: random.Random, ppm: int) -> bool:
    """``True`` with probability ``ppm / 1,000,000``."""
    return rng.randrange(PPM) < ppm


class QuantileTable:
    """An integer latency shape given by quantiles, drawn with integer arithmetic.

    ``points`` are ``(cumulative_ppm, value)`` pairs, both integers, strictly
    increasing in ``cumulative_ppm`` from 0 to :data:`PPM` and non-decreasing
    in ``value``. A draw takes ``u`` uniform in ``[0, PPM)`` and interpolates
    linearly (floor division) between the two points around it. Example:
    ``[(0, 50_000), (PPM, 250_000)]`` is uniform in [50, 250] µs;
    ``[(0, 200_000), (990_000, 20_000_000), (PPM, 200_000_000)]``
    puts 1% of the mass between 20 and 200 ms.

    Raises:
        ValueError: the points do not describe a distribution as above.
    """

    def __init__(self, points: Sequence[tuple[int, int]]) -> None:
        pts = [(int(p), int(v)) for p, v in points]
        if len(pts) < 2 or pts[0][0] != 0 or pts[-1][0] != PPM:
            raise ValueError("quantile table must run from 0 to PPM")
        for (p0, v0), (p1, v1) in itertools.pairwise(pts):
            if p1 <= p0 or v1 < v0:
                raise ValueError(f"quantile table not increasing at {(p0, v0)} -> {(p1, v1)}")
        self.points = tuple(pts)
        self._ppms = [p for p, _ in pts]

    def draw(self, rng: random.Random) -> int:
        """One draw, an integer in ``[first value, last value]``.

        ``u`` is ``rng.randrange(PPM)``'s draw (:func:`uniform_ns`'s way, the
        same number from the same state); every message of an explored run
        draws one.
        """
        getrandbits = rng.getrandbits
        u = getrandbits(_PPM_BITS)
        while u >= PPM:
            u = getrandbits(_PPM_BITS)
        return self.at(u)

    def at(self, u: int) -> int:
        """The value at quantile ``u`` (in ppm, ``0 <= u < PPM``)."""
        i = bisect.bisect_right(self._ppms, u) - 1
        (p0, v0), (p1, v1) = self.points[i], self.points[i + 1]
        return v0 + (v1 - v0) * (u - p0) // (p1 - p0)

    __call__ = draw
    """Same as :meth:`draw`, so a table is a latency model."""

    def __eq__(self, other: object) -> bool:
        """Tables with the same points are the same distribution (a profile read from
        a file equals the one it was written from)."""
        return isinstance(other, QuantileTable) and self.points == other.points

    def __hash__(self) -> int:
        return hash(self.points)

    def __repr__(self) -> str:
        return f"QuantileTable({list(self.points)!r})"
