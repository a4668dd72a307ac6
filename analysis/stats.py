"""Summaries of a metric measured over many seeds, and a rank test comparing two protocols.

Pure standard library (no numpy, no scipy); every definition is stated here so
that each number in a report can be checked by hand.

Definitions:

* **Percentile** (:func:`percentile`): linear interpolation between closest
  ranks, numpy's default ``"linear"`` method (= Excel ``PERCENTILE.INC``,
  Hyndman & Fan type 7). With ``x`` the values sorted ascending, ``n`` their
  count and ``q`` in ``[0, 1]``: ``h = (n - 1) * q``, ``i = floor(h)``, and the
  percentile is ``x[i] + (h - i) * (x[i + 1] - x[i])`` (``x[n - 1]`` when
  ``i = n - 1``). The median is ``percentile(x, 0.5)``, the p95
  ``percentile(x, 0.95)``.
* **Bootstrap CI** (:func:`bootstrap_ci`): the percentile bootstrap. Draw
  ``resamples`` samples of size ``n`` with replacement from the values (with
  ``random.Random(seed)``, so the interval is a deterministic function of the
  values and the seed), compute the statistic on each, and return the
  ``(1 - level) / 2`` and ``1 - (1 - level) / 2`` percentiles (as above) of
  those statistics. A single value ``v`` gives ``(v, v)``.
* **Summary** (:func:`summarize`): ``None`` values are dropped first (a metric
  that does not apply to a trial, e.g. the detection time of a crash that was
  never detected); ``n`` counts the remaining values. ``median``, ``p95``,
  ``min``, ``max``, ``mean`` (arithmetic) of the remaining values, and
  ``ci_low``/``ci_high`` the 95% bootstrap CI of the median. With no values
  left every field but ``n = 0`` is ``None``.
* **Mann-Whitney U** (:func:`mann_whitney`): the two-sided Wilcoxon rank-sum
  test of samples ``a`` and ``b``. ``U`` is the statistic of ``a``: the number
  of pairs ``(x, y)``, ``x`` in ``a`` and ``y`` in ``b``, with ``x > y``, a tie
  counting ``0.5`` (equivalently ``R_a - n_a (n_a + 1) / 2`` with ``R_a`` the
  sum of the mid-ranks of ``a`` in the pooled sample). The effect size is the
  common-language effect size (probability of superiority)
  ``U / (n_a n_b)``: the chance that a random value of ``a`` exceeds a random
  value of ``b``, ties counting half. The p-value is

  - ``"exact"`` when the pooled sample has no ties, ``min(n_a, n_b) <= 10``
    and ``n_a n_b <= 400``: from the exact null distribution of ``U`` (the
    frequencies of ``U`` over all ``C(n_a + n_b, n_a)`` equally likely
    arrangements of the ranks), ``p = min(1, 2 min(P(U <= u), P(U >= u)))``;
  - ``"normal"`` otherwise: the normal approximation with tie and continuity
    corrections, ``mu = n_a n_b / 2``,
    ``sigma^2 = n_a n_b / 12 * ((N + 1) - sum(t^3 - t) / (N (N - 1)))`` with
    ``N = n_a + n_b`` and ``t`` the sizes of the groups of tied values,
    ``z = max(0, |U - mu| - 0.5) / sigma`` and ``p = 2 (1 - Phi(z))``
    (computed as ``erfc(z / sqrt(2))``, the same quantity without the
    cancellation in the far tail); ``p = 1`` when ``sigma = 0`` (all values
    equal).

NaN values are rejected (``ValueError``) rather than sorted silently into
meaningless positions.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from statistics import median

__all__ = [
    "RankTest",
    "Summary",
    "bootstrap_ci",
    "mann_whitney",
    "percentile",
    "summarize",
]

EXACT_MAX_MIN_SIZE = 10
"""The exact test is used only when the smaller sample has at most this many values."""

EXACT_MAX_PRODUCT = 400
"""The exact test is used only when ``n_a * n_b`` is at most this."""


@dataclass(frozen=True)
class Summary:
    """The distribution of one metric over trials (seeds).

    Attributes:
        n: Number of values (after dropping ``None``).
        median: The 0.5 percentile, or ``None`` when ``n == 0``.
        p95: The 0.95 percentile, or ``None`` when ``n == 0``.
        min: The smallest value, or ``None`` when ``n == 0``.
        max: The largest value, or ``None`` when ``n == 0``.
        mean: The arithmetic mean, or ``None`` when ``n == 0``.
        ci_low: Lower end of the bootstrap 95% CI of the median, or ``None``.
        ci_high: Upper end of the bootstrap 95% CI of the median, or ``None``.
    """

    n: int
    median: float | None
    p95: float | None
    min: float | None
    max: float | None
    mean: float | None
    ci_low: float | None
    ci_high: float | None

    def to_dict(self) -> dict[str, float | int | None]:
        """The fields as a plain dict (e.g. for JSON).

        Returns:
            A mapping from each field name to its value.
        """
        return asdict(self)


@dataclass(frozen=True)
class RankTest:
    """The result of a two-sided Mann-Whitney U test of sample ``a`` against ``b``.

    Attributes:
        n_a: Size of sample ``a``.
        n_b: Size of sample ``b``.
        u: The U statistic of ``a``: pairs with ``a > b``, ties counting 0.5.
        p_value: The two-sided p-value.
        method: ``"exact"`` or ``"normal"``.
        effect: Probability of superiority ``u / (n_a * n_b)``.
    """

    n_a: int
    n_b: int
    u: float
    p_value: float
    method: str
    effect: float

    def to_dict(self) -> dict[str, float | int | str]:
        """The fields as a plain dict (e.g. for JSON).

        Returns:
            A mapping from each field name to its value.
        """
        return asdict(self)


def _check_no_nan(values: Sequence[float]) -> None:
    """Reject NaN, which has no place in an ordering.

    Args:
        values: The values to check.

    Raises:
        ValueError: If any value is NaN.
    """
    if any(math.isnan(v) for v in values):
        raise ValueError("values contain NaN")


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` percentile by linear interpolation between closest ranks.

    numpy's default ``"linear"`` method (= Excel ``PERCENTILE.INC``): with ``x``
    sorted, ``h = (n - 1) * q``, the result is
    ``x[floor(h)] + (h - floor(h)) * (x[floor(h) + 1] - x[floor(h)])``.

    Args:
        values: The sample (any order; not modified).
        q: The quantile, in ``[0, 1]`` (0.5 is the median).

    Returns:
        The interpolated percentile.

    Raises:
        ValueError: If ``values`` is empty or contains NaN, or ``q`` is outside ``[0, 1]``.
    """
    if not values:
        raise ValueError("percentile of an empty sample")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be in [0, 1], got {q!r}")
    _check_no_nan(values)
    x = sorted(values)
    h = (len(x) - 1) * q
    i = math.floor(h)
    if i >= len(x) - 1:
        return float(x[-1])
    return float(x[i] + (h - i) * (x[i + 1] - x[i]))


def bootstrap_ci(
    values: Sequence[float],
    stat: Callable[[Sequence[float]], float] = median,
    *,
    level: float = 0.95,
    resamples: int = 10_000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile-bootstrap confidence interval of a statistic.

    Draws ``resamples`` samples of ``len(values)`` values with replacement using
    ``random.Random(seed)`` (so the result is deterministic), computes ``stat``
    on each, and returns the ``(1 - level) / 2`` and ``1 - (1 - level) / 2``
    percentiles (by :func:`percentile`) of those statistics.

    Args:
        values: The sample.
        stat: The statistic; the median by default.
        level: The confidence level, in ``(0, 1)``.
        resamples: The number of bootstrap resamples (at least 1).
        seed: Seed of the resampling generator.

    Returns:
        ``(low, high)``; ``(v, v)`` for a single value ``v``.

    Raises:
        ValueError: If ``values`` is empty or contains NaN, ``level`` is not in
            ``(0, 1)``, or ``resamples < 1``.
    """
    if not values:
        raise ValueError("bootstrap_ci of an empty sample")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples!r}")
    _check_no_nan(values)
    if len(values) == 1:
        v = float(values[0])
        return v, v
    pool = list(values)
    stats = _bootstrap_medians(pool, resamples, seed) if stat is median else None
    if stats is None:
        rng = random.Random(seed)
        stats = [stat(rng.choices(pool, k=len(pool))) for _ in range(resamples)]
    alpha = (1.0 - level) / 2.0
    return percentile(stats, alpha), percentile(stats, 1.0 - alpha)


#: Draws per block of :func:`_bootstrap_medians` (16 MB of doubles).
_DRAWS_PER_BLOCK = 2_000_000


def _bootstrap_medians(pool: list[float], resamples: int, seed: int) -> list[float] | None:
    """``[median(rng.choices(pool, k=len(pool))) for _ in range(resamples)]`` with
    ``rng = random.Random(seed)``, the same values computed with numpy.

    ``choices`` draws ``pool[floor(rng.random() * k)]``, and numpy's legacy
    ``RandomState([seed])`` is the same Mersenne Twister seeded the same way
    (``init_by_array`` of the seed's one 32-bit word) with the same 53-bit
    ``random()``, so the draws are identical; the median of each resample is
    ``statistics.median``'s (the middle value, or the two middle ones' sum
    halved). ``None`` for a seed outside ``[0, 2**32)`` or a value that is not a
    float (the caller then draws in Python). 146 intervals of 50 values took
    ~5 s in Python, most of an experiment report's statistics.
    """
    import numpy as np

    if not 0 <= seed < 2**32 or not all(type(v) is float for v in pool):
        return None
    k = len(pool)
    values = np.asarray(pool, dtype=np.float64)
    state = np.random.RandomState([seed])
    rows = max(1, _DRAWS_PER_BLOCK // k)
    out: list[float] = []
    while len(out) < resamples:
        n = min(rows, resamples - len(out))
        draws = np.floor(state.random_sample(n * k) * k).astype(np.int64)
        x = np.sort(values[draws].reshape(n, k), axis=1)
        with np.errstate(over="ignore"):  # two huge values sum to inf, as in Python
            mid = x[:, k // 2] if k % 2 else (x[:, k // 2 - 1] + x[:, k // 2]) / 2
        out.extend(mid.tolist())
    return out


def summarize(values: Sequence[float | None], *, resamples: int = 10_000, seed: int = 0) -> Summary:
    """Summarise one metric over trials.

    Args:
        values: One value per trial; ``None`` where the metric does not apply
            (dropped, not counted in ``n``).
        resamples: Bootstrap resamples for the CI of the median.
        seed: Seed of the bootstrap.

    Returns:
        The :class:`Summary`; with no values left, ``n = 0`` and every other
        field ``None``.

    Raises:
        ValueError: If a value is NaN.
    """
    kept = [float(v) for v in values if v is not None]
    if not kept:
        return Summary(0, None, None, None, None, None, None, None)
    _check_no_nan(kept)
    low, high = bootstrap_ci(kept, median, resamples=resamples, seed=seed)
    return Summary(
        n=len(kept),
        median=percentile(kept, 0.5),
        p95=percentile(kept, 0.95),
        min=min(kept),
        max=max(kept),
        mean=statistics.fmean(kept),
        ci_low=low,
        ci_high=high,
    )


def _midranks(pooled: Sequence[float]) -> tuple[list[float], list[int]]:
    """Mid-ranks (1-based, ties averaged) of a sample, and the sizes of its tie groups.

    Args:
        pooled: The values.

    Returns:
        ``(ranks, ties)``: ``ranks[i]`` is the mid-rank of ``pooled[i]``;
        ``ties`` lists the size of every group of equal values larger than 1.
    """
    order = sorted(range(len(pooled)), key=lambda i: pooled[i])
    ranks = [0.0] * len(pooled)
    ties: list[int] = []
    start = 0
    while start < len(order):
        end = start + 1
        while end < len(order) and pooled[order[end]] == pooled[order[start]]:
            end += 1
        # Positions start..end-1 (0-based) hold equal values: ranks start+1..end.
        rank = (start + 1 + end) / 2.0
        for j in range(start, end):
            ranks[order[j]] = rank
        if end - start > 1:
            ties.append(end - start)
        start = end
    return ranks, ties


def _u_frequencies(m: int, n: int) -> list[int]:
    """The exact null distribution of U for samples of sizes ``m`` and ``n`` without ties.

    ``f(m, n, u)``, the number of arrangements of ``m`` a's and ``n`` b's in
    which the a's beat ``u`` pairs, satisfies
    ``f(m, n, u) = f(m - 1, n, u - n) + f(m, n - 1, u)`` (the largest value is
    an a, beating all ``n`` b's, or a b, beating nothing), with
    ``f(m, 0, 0) = f(0, n, 0) = 1``.

    Args:
        m: Size of sample ``a``.
        n: Size of sample ``b``.

    Returns:
        ``freq`` of length ``m * n + 1``: ``freq[u]`` arrangements have U = u;
        they sum to ``C(m + n, m)``.
    """
    # prev[i] = f(i, j - 1, .), built up column by column over j.
    prev: list[list[int]] = [[1] for _ in range(m + 1)]
    for j in range(1, n + 1):
        cur: list[list[int]] = [[1]]
        for i in range(1, m + 1):
            freq = [0] * (i * j + 1)
            for u, c in enumerate(cur[i - 1]):  # the largest is an a: +j
                freq[u + j] += c
            for u, c in enumerate(prev[i]):  # the largest is a b: +0
                freq[u] += c
            cur.append(freq)
        prev = cur
    return prev[m]


def mann_whitney(a: Sequence[float], b: Sequence[float]) -> RankTest:
    """Two-sided Mann-Whitney U test (Wilcoxon rank-sum) of ``a`` against ``b``.

    Exact null distribution when the pooled sample has no ties,
    ``min(n_a, n_b) <= 10`` and ``n_a * n_b <= 400``; otherwise the normal
    approximation with tie and continuity (0.5) corrections. See the module
    docstring for the formulas.

    Args:
        a: The first sample (U is its statistic).
        b: The second sample.

    Returns:
        The :class:`RankTest`.

    Raises:
        ValueError: If either sample is empty or contains NaN.
    """
    if not a or not b:
        raise ValueError("mann_whitney needs two non-empty samples")
    _check_no_nan(a)
    _check_no_nan(b)
    n_a, n_b = len(a), len(b)
    big_n = n_a + n_b
    ranks, ties = _midranks([*a, *b])
    u = sum(ranks[:n_a]) - n_a * (n_a + 1) / 2.0
    effect = u / (n_a * n_b)

    if not ties and min(n_a, n_b) <= EXACT_MAX_MIN_SIZE and n_a * n_b <= EXACT_MAX_PRODUCT:
        freq = _u_frequencies(n_a, n_b)
        k = round(u)  # integral: no ties
        total = math.comb(big_n, n_a)
        at_most = sum(freq[: k + 1])
        at_least = sum(freq[k:])
        p = min(1.0, 2 * min(at_most, at_least) / total)
        return RankTest(n_a, n_b, u, p, "exact", effect)

    tie_sum = sum(t**3 - t for t in ties)
    # sigma^2 = n_a n_b / 12 * ((N+1) - tie_sum / (N (N-1))), with an exact
    # integer numerator so that "all values equal" gives exactly 0.
    numerator = (big_n + 1) * big_n * (big_n - 1) - tie_sum
    if numerator <= 0:
        return RankTest(n_a, n_b, u, 1.0, "normal", effect)
    sigma = math.sqrt(n_a * n_b * numerator / (12.0 * big_n * (big_n - 1)))
    mu = n_a * n_b / 2.0
    z = max(0.0, abs(u - mu) - 0.5) / sigma
    p = min(1.0, math.erfc(z / math.sqrt(2.0)))
    return RankTest(n_a, n_b, u, p, "normal", effect)
