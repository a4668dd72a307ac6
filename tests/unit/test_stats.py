"""analysis.stats: percentiles, bootstrap CIs, summaries and the Mann-Whitney U test.

Expected values are worked out by hand (in the comments), taken from standard
references (the Wikipedia percentile example, the Mann-Whitney critical-value
table), or recomputed inside the test independently of the module: brute-force
enumeration of every rank arrangement for the exact test, pair counting for U,
and :class:`statistics.NormalDist` for the normal approximation.
"""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction
from statistics import NormalDist, fmean, median

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import analysis.stats as stats_module
from analysis.stats import (
    RankTest,
    Summary,
    _bootstrap_medians,
    _u_frequencies,
    bootstrap_ci,
    mann_whitney,
    percentile,
    summarize,
)

# --- percentile -----------------------------------------------------------------------------


def test_percentile_median_of_even_count_interpolates() -> None:
    # h = 3 * 0.5 = 1.5 -> x[1] + 0.5 * (x[2] - x[1]) = 2 + 0.5 = 2.5
    assert percentile([1, 2, 3, 4], 0.5) == 2.5
    assert percentile([4, 1, 3, 2], 0.5) == 2.5  # order does not matter


def test_percentile_p95_of_one_to_ten() -> None:
    # h = 9 * 0.95 = 8.55 -> x[8] + 0.55 * (x[9] - x[8]) = 9 + 0.55 (float: 9.549999999999999,
    # the same as numpy.percentile).
    assert percentile(list(range(1, 11)), 0.95) == pytest.approx(9.55, abs=1e-12)


@pytest.mark.parametrize(
    ("q", "expected"),
    # Wikipedia, "Percentile", the C = 1 variant (numpy linear / Excel PERCENTILE.INC)
    # on the list 15, 20, 35, 40, 50.
    [(0.05, 16.0), (0.30, 23.0), (0.40, 29.0), (0.95, 48.0), (0.0, 15.0), (1.0, 50.0)],
)
def test_percentile_reference_example(q: float, expected: float) -> None:
    assert percentile([15, 20, 35, 40, 50], q) == pytest.approx(expected, abs=1e-12)


def test_percentile_endpoints_and_unsorted_input() -> None:
    values = [3.5, -1.0, 10.0, 7.0, 2.25]
    assert percentile(values, 0.0) == -1.0
    assert percentile(values, 1.0) == 10.0
    # sorted: -1, 2.25, 3.5, 7, 10; q = 0.9: h = 3.6 -> 7 + 0.6 * 3 = 8.8
    assert percentile(values, 0.9) == pytest.approx(8.8, abs=1e-12)
    assert values == [3.5, -1.0, 10.0, 7.0, 2.25]  # input not modified


@pytest.mark.parametrize("q", [0.0, 0.3, 0.5, 0.95, 1.0])
def test_percentile_of_one_value(q: float) -> None:
    assert percentile([42.0], q) == 42.0


def test_percentile_returns_float() -> None:
    result = percentile([1, 3], 0.5)
    assert result == 2.0
    assert isinstance(result, float)


@pytest.mark.parametrize("q", [1.5, -0.1, math.nan])
def test_percentile_rejects_q_outside_unit_interval(q: float) -> None:
    with pytest.raises(ValueError):
        percentile([1.0, 2.0], q)


def test_percentile_rejects_empty_and_nan() -> None:
    with pytest.raises(ValueError):
        percentile([], 0.5)
    with pytest.raises(ValueError):
        percentile([1.0, math.nan, 2.0], 0.5)


# --- bootstrap_ci ---------------------------------------------------------------------------


def test_bootstrap_ci_of_constant_sample_is_the_constant() -> None:
    assert bootstrap_ci([7.0] * 12) == (7.0, 7.0)
    assert bootstrap_ci([7.0] * 12, fmean, resamples=50) == (7.0, 7.0)


def test_bootstrap_ci_of_one_value() -> None:
    assert bootstrap_ci([3.25]) == (3.25, 3.25)


def test_bootstrap_ci_two_points() -> None:
    # Resample means of [0, 1] are 0, 0.5, 1 with probabilities 1/4, 1/2, 1/4: with
    # thousands of resamples the 2.5% and 97.5% percentiles are exactly 0 and 1.
    assert bootstrap_ci([0.0, 1.0], fmean, resamples=4000, seed=3) == (0.0, 1.0)
    # A 40% interval sits inside the middle half, all of which is 0.5.
    assert bootstrap_ci([0.0, 1.0], fmean, level=0.4, resamples=4000, seed=3) == (0.5, 0.5)


def test_bootstrap_ci_of_median_is_narrower_than_the_range() -> None:
    values = [float(v) for v in range(1, 102)]  # median 51; its bootstrap sd is about 5
    low, high = bootstrap_ci(values, resamples=2000, seed=1)
    assert 30.0 < low < 51.0 < high < 72.0


def test_bootstrap_ci_is_deterministic_for_a_seed() -> None:
    values = [1.0, 5.0, 2.0, 9.0, 4.0, 4.5, 8.0, 3.0]
    first = bootstrap_ci(values, resamples=500, seed=11)
    assert bootstrap_ci(values, resamples=500, seed=11) == first
    assert first[0] <= first[1]
    others = {bootstrap_ci(values, resamples=500, seed=s) for s in range(5)}
    assert len(others) > 1  # the seed matters


def _python_medians(values: list[float], resamples: int, seed: int) -> list[float]:
    """The bootstrap's medians as the documented algorithm draws them, in Python."""
    rng = random.Random(seed)
    return [median(rng.choices(values, k=len(values))) for _ in range(resamples)]


@settings(max_examples=150, deadline=None)
@given(
    values=st.lists(
        st.floats(allow_nan=False, allow_infinity=False, width=64), min_size=2, max_size=40
    ),
    resamples=st.integers(1, 300),
    seed=st.integers(0, 2**32 - 1),
)
def test_bootstrap_medians_in_numpy_are_the_python_draws_exactly(
    values: list[float], resamples: int, seed: int
) -> None:
    assert _bootstrap_medians(values, resamples, seed) == _python_medians(values, resamples, seed)


def test_bootstrap_medians_across_blocks_and_outside_the_fast_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    values = [float(v) for v in (5, 1, 4, 1, 5, 9, 2, 6)]
    monkeypatch.setattr(stats_module, "_DRAWS_PER_BLOCK", 24)  # 3 resamples a block
    assert _bootstrap_medians(values, 10, 7) == _python_medians(values, 10, 7)
    # a seed numpy's one-word seeding cannot take, or ints: drawn in Python, same result
    assert _bootstrap_medians(values, 5, 2**32) is None
    assert _bootstrap_medians([1, 2, 3], 5, 0) is None  # type: ignore[list-item]
    big = bootstrap_ci(values, resamples=50, seed=2**40)
    rng_meds = _python_medians(values, 50, 2**40)
    assert big == (percentile(rng_meds, 0.025), percentile(rng_meds, 0.975))
    assert bootstrap_ci([1, 2, 3, 7], resamples=50, seed=3) == bootstrap_ci(
        [1.0, 2.0, 3.0, 7.0], resamples=50, seed=3
    )


@pytest.mark.parametrize("level", [0.0, 1.0, 1.5, -0.5])
def test_bootstrap_ci_rejects_bad_level(level: float) -> None:
    with pytest.raises(ValueError):
        bootstrap_ci([1.0, 2.0, 3.0], level=level)


def test_bootstrap_ci_rejects_no_resamples() -> None:
    with pytest.raises(ValueError):
        bootstrap_ci([1.0, 2.0, 3.0], resamples=0)


def test_bootstrap_ci_rejects_empty() -> None:
    with pytest.raises(ValueError):
        bootstrap_ci([])


# --- summarize ------------------------------------------------------------------------------


def test_summarize_drops_none() -> None:
    s = summarize([None, 4, 1, None, 3, 2], resamples=1000)
    assert s.n == 4
    assert s.median == 2.5
    # h = 3 * 0.95 = 2.85 -> 3 + 0.85 * (4 - 3) = 3.85
    assert s.p95 == pytest.approx(3.85, abs=1e-12)
    assert (s.min, s.max, s.mean) == (1.0, 4.0, 2.5)
    assert s.ci_low is not None
    assert s.ci_high is not None
    assert 1.0 <= s.ci_low <= 2.5 <= s.ci_high <= 4.0


def test_summarize_ci_is_the_bootstrap_ci_of_the_median() -> None:
    values = [12.0, 15.5, 9.0, 30.0, 14.0, 11.0, 13.5, 16.0, 10.0, 22.0]
    s = summarize([*values, None], resamples=800, seed=4)
    assert (s.ci_low, s.ci_high) == bootstrap_ci(values, resamples=800, seed=4)
    assert s.median == 13.75  # sorted: ... 13.5, 14.0 ... (positions 4 and 5)
    assert s.mean == pytest.approx(15.3)
    assert s.ci_low is not None
    assert s.ci_high is not None
    assert 9.0 <= s.ci_low <= 13.75 <= s.ci_high <= 30.0


@pytest.mark.parametrize("values", [[], [None], [None, None, None]])
def test_summarize_empty(values: list[float | None]) -> None:
    s = summarize(values)
    assert s == Summary(0, None, None, None, None, None, None, None)
    assert s.to_dict() == {
        "n": 0,
        "median": None,
        "p95": None,
        "min": None,
        "max": None,
        "mean": None,
        "ci_low": None,
        "ci_high": None,
    }


def test_summarize_one_value() -> None:
    s = summarize([None, 5.0])
    assert s == Summary(1, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0)


def test_summarize_is_deterministic_for_a_seed() -> None:
    values = [3.0, 1.0, 4.0, 1.5, 5.0, 9.0, 2.0, 6.0, 5.5, 3.5]
    assert summarize(values, resamples=300, seed=2) == summarize(values, resamples=300, seed=2)
    summaries = [summarize(values, resamples=300, seed=s) for s in range(6)]
    assert len({(x.ci_low, x.ci_high) for x in summaries}) > 1
    # Only the CI depends on the seed.
    assert len({(x.n, x.median, x.p95, x.min, x.max, x.mean) for x in summaries}) == 1


def test_summary_to_dict() -> None:
    s = summarize([1.0, 2.0, 3.0], resamples=200)
    d = s.to_dict()
    assert list(d) == ["n", "median", "p95", "min", "max", "mean", "ci_low", "ci_high"]
    assert d["n"] == 3
    assert d["median"] == 2.0
    assert d["p95"] == pytest.approx(2.9)  # h = 1.9 -> 2 + 0.9
    assert d["ci_low"] == s.ci_low


def test_summarize_rejects_nan() -> None:
    with pytest.raises(ValueError):
        summarize([1.0, math.nan])


# --- mann_whitney: exact --------------------------------------------------------------------


def brute_force_p(a: list[float], b: list[float]) -> Fraction:
    """Two-sided exact p by enumerating every split of the pooled ranks (no ties)."""
    pooled = sorted([*a, *b])
    rank = {v: i + 1 for i, v in enumerate(pooled)}
    n_a, n_b = len(a), len(b)
    u_obs = sum(rank[v] for v in a) - n_a * (n_a + 1) // 2
    us = [
        sum(c) - n_a * (n_a + 1) // 2 for c in itertools.combinations(range(1, n_a + n_b + 1), n_a)
    ]
    total = len(us)
    le = Fraction(sum(u <= u_obs for u in us), total)
    ge = Fraction(sum(u >= u_obs for u in us), total)
    return min(Fraction(1), 2 * min(le, ge))


def pair_count_u(a: list[float], b: list[float]) -> float:
    """U of a by its definition: pairs with a > b, ties counting 0.5."""
    return sum(1.0 if x > y else 0.5 if x == y else 0.0 for x in a for y in b)


def test_exact_three_against_three() -> None:
    # C(6, 3) = 20 arrangements; only one has U = 0 -> p = 2 * 1/20 = 0.1.
    r = mann_whitney([1, 2, 3], [4, 5, 6])
    assert r == RankTest(n_a=3, n_b=3, u=0.0, p_value=0.1, method="exact", effect=0.0)


def test_exact_five_against_five_fully_separated() -> None:
    # C(10, 5) = 252 arrangements, one with U = 0.
    r = mann_whitney([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])
    assert r.method == "exact"
    assert r.u == 0.0
    assert r.p_value == 2 / 252


@pytest.mark.parametrize(
    ("a", "b", "u", "p"),
    [
        # U counts for n = 5, 5 are partitions of u into at most 5 parts <= 5:
        # f(0..3) = 1, 1, 2, 3. U = 2: P(U <= 2) = 4/252 -> p = 8/252 = 0.0317, and
        # U = 3: 7/252 -> p = 14/252 = 0.0556: the table's two-sided 5% critical value
        # for n1 = n2 = 5 is U = 2.
        ([1, 2, 3, 6, 4.5], [4, 7, 8, 9, 10], 2.0, 8 / 252),
        ([1, 2, 3, 5, 7], [4, 6, 8, 9, 10], 3.0, 14 / 252),
    ],
)
def test_exact_table_values(a: list[float], b: list[float], u: float, p: float) -> None:
    r = mann_whitney(a, b)
    assert (r.method, r.u, r.p_value) == ("exact", u, p)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ([1.1, 3.3, 5.5, 7.2], [2.0, 4.0, 6.0, 8.0, 9.0]),
        ([0.5, 0.7, 2.5, 9.0, 11.0, 12.0], [1.0, 3.0, 4.0]),
        ([10.0, 2.0], [1.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]),
        ([5.0, 1.0, 9.0, 2.0, 8.0, 7.5, 3.5], [4.0, 6.0, 0.0, 10.0, 11.0, 2.5, 3.0]),
    ],
)
def test_exact_matches_brute_force_enumeration(a: list[float], b: list[float]) -> None:
    r = mann_whitney(a, b)
    assert r.method == "exact"
    assert r.u == pair_count_u(a, b)
    assert r.p_value == float(brute_force_p(a, b))


@pytest.mark.parametrize(("m", "n"), [(1, 1), (2, 3), (3, 2), (4, 4), (5, 3), (1, 6)])
def test_u_frequencies_match_enumeration(m: int, n: int) -> None:
    counts = [0] * (m * n + 1)
    for c in itertools.combinations(range(1, m + n + 1), m):
        counts[sum(c) - m * (m + 1) // 2] += 1
    assert _u_frequencies(m, n) == counts
    assert sum(counts) == math.comb(m + n, m)


def test_exact_is_symmetric_under_swapping() -> None:
    a = [1.0, 2.0, 3.0, 5.0, 7.0]
    b = [4.0, 6.0, 8.0, 9.0, 10.0, 11.5]
    ab, ba = mann_whitney(a, b), mann_whitney(b, a)
    assert ba.u == len(a) * len(b) - ab.u
    assert ba.p_value == ab.p_value
    assert ba.effect == pytest.approx(1.0 - ab.effect)
    assert mann_whitney([4, 5, 6], [1, 2, 3]).u == 9.0
    assert mann_whitney([4, 5, 6], [1, 2, 3]).p_value == 0.1


def test_exact_centre_gives_p_one() -> None:
    # U = 2 = mu; P(U <= 2) = 4/6 (U over the 6 splits: 0, 1, 2, 2, 3, 4) -> p capped at 1.
    assert mann_whitney([1, 4], [2, 3]).p_value == 1.0
    assert mann_whitney([1], [2]) == RankTest(1, 1, 0.0, 1.0, "exact", 0.0)


# --- mann_whitney: which method -------------------------------------------------------------


@pytest.mark.parametrize(
    ("n_a", "n_b", "method"),
    [
        (10, 40, "exact"),  # min 10, product 400
        (40, 10, "exact"),
        (1, 400, "exact"),
        (10, 41, "normal"),  # product 410 > 400
        (1, 401, "normal"),
        (11, 11, "normal"),  # min 11 > 10
    ],
)
def test_method_choice_without_ties(n_a: int, n_b: int, method: str) -> None:
    a = [2.0 * i for i in range(n_a)]  # even numbers
    b = [2.0 * i + 1.0 for i in range(n_b)]  # odd numbers: no ties at all
    assert mann_whitney(a, b).method == method


def test_any_tie_forces_normal() -> None:
    assert mann_whitney([1, 2, 3], [3, 4, 5]).method == "normal"  # tie across samples
    assert mann_whitney([1, 1, 3], [4, 5, 6]).method == "normal"  # tie within a sample


# --- mann_whitney: normal -------------------------------------------------------------------


def normal_p(u: float, n_a: int, n_b: int, ties: list[int]) -> float:
    """The normal-approximation p, written out with statistics.NormalDist."""
    big_n = n_a + n_b
    var = n_a * n_b / 12 * ((big_n + 1) - sum(t**3 - t for t in ties) / (big_n * (big_n - 1)))
    z = max(0.0, abs(u - n_a * n_b / 2) - 0.5) / math.sqrt(var)
    return 2 * (1 - NormalDist().cdf(z))


def test_normal_identical_samples_give_p_one() -> None:
    r = mann_whitney([1, 2, 3], [1, 2, 3])
    assert r.method == "normal"
    assert r.u == 4.5  # = mu: three ties (0.5 each) plus three wins
    assert r.p_value == 1.0
    assert r.effect == 0.5


def test_normal_all_values_equal_gives_p_one() -> None:
    r = mann_whitney([5.0, 5.0, 5.0], [5.0, 5.0])
    assert r == RankTest(3, 2, 3.0, 1.0, "normal", 0.5)


def test_normal_fully_separated_thirty_against_thirty() -> None:
    a = [float(i) for i in range(30)]
    b = [float(i) for i in range(100, 130)]
    r = mann_whitney(a, b)
    assert r.method == "normal"
    assert r.u == 0.0
    assert r.effect == 0.0
    assert r.p_value < 1e-6
    # sigma^2 = 900 / 12 * 61 = 4575, z = 449.5 / sqrt(4575) = 6.6456, p = 3.02e-11
    assert r.p_value == pytest.approx(3.0199e-11, rel=1e-3)
    assert r.p_value == pytest.approx(normal_p(0.0, 30, 30, []), rel=1e-4)


def test_normal_shift_without_ties() -> None:
    a = [float(i) for i in range(1, 21)]
    b = [i + 0.5 for i in range(1, 21)]
    r = mann_whitney(a, b)
    assert r.method == "normal"  # min(n) = 20 > 10
    # a_i > b_j = j + 0.5 iff j <= i - 1: sum_{i=1}^{20} (i - 1) = 190
    assert r.u == 190.0
    assert r.u == pair_count_u(a, b)
    # sigma^2 = 400 / 12 * 41 = 1366.67, z = 9.5 / 36.968 = 0.25698, p = 0.7972
    assert r.p_value == pytest.approx(normal_p(190.0, 20, 20, []), rel=1e-9)
    assert r.p_value == pytest.approx(0.7972, abs=1e-4)


def test_normal_shift_with_ties() -> None:
    a = [float(i) for i in range(1, 21)]
    b = [float(i + 5) for i in range(1, 21)]  # 6..25: values 6..20 tied in pairs
    r = mann_whitney(a, b)
    assert r.method == "normal"
    # wins: a_i > j + 5 for i = 7..20 -> 1 + 2 + ... + 14 = 105; ties: 15 -> 7.5
    assert r.u == 112.5
    assert r.u == pair_count_u(a, b)
    assert r.effect == 112.5 / 400
    # 15 tie groups of 2: sum(t^3 - t) = 15 * 6 = 90; sigma^2 = 400/12 * (41 - 90/1560)
    # = 1364.74, z = (87.5 - 0.5) / 36.943 = 2.3550, p = 0.01852
    assert r.p_value == pytest.approx(normal_p(112.5, 20, 20, [2] * 15), rel=1e-9)
    assert r.p_value == pytest.approx(0.018522, abs=1e-6)


def test_normal_is_symmetric_under_swapping() -> None:
    a = [1.0, 2.0, 2.0, 3.0, 5.0, 8.0, 8.0, 13.0]
    b = [2.0, 3.0, 4.0, 8.0, 9.0, 10.0, 13.0, 14.0, 15.0]
    ab, ba = mann_whitney(a, b), mann_whitney(b, a)
    assert ab.method == ba.method == "normal"
    assert ab.u == pair_count_u(a, b)
    assert ba.u == len(a) * len(b) - ab.u
    assert ba.p_value == pytest.approx(ab.p_value, rel=1e-12)
    # tie groups: 2 (x3), 3 (x2), 8 (x3), 13 (x2)
    assert ab.p_value == pytest.approx(normal_p(ab.u, 8, 9, [3, 2, 3, 2]), rel=1e-9)


def test_effect_is_u_over_pairs() -> None:
    cases: list[tuple[list[float], list[float]]] = [
        ([1, 2, 3, 5, 7], [4, 6, 8, 9, 10, 11]),
        ([1, 1, 2, 4], [1, 3, 3]),
        ([9.0, 8.0], [1.0, 2.0, 3.0]),
    ]
    for a, b in cases:
        r = mann_whitney(a, b)
        assert r.u == pair_count_u(a, b)
        assert r.effect == r.u / (len(a) * len(b))
    assert mann_whitney([9.0, 8.0], [1.0, 2.0, 3.0]).effect == 1.0


def test_rank_test_to_dict() -> None:
    d = mann_whitney([1, 2, 3], [4, 5, 6]).to_dict()
    assert d == {
        "n_a": 3,
        "n_b": 3,
        "u": 0.0,
        "p_value": 0.1,
        "method": "exact",
        "effect": 0.0,
    }


def test_mann_whitney_rejects_empty_and_nan() -> None:
    with pytest.raises(ValueError):
        mann_whitney([], [1.0])
    with pytest.raises(ValueError):
        mann_whitney([1.0], [])
    with pytest.raises(ValueError):
        mann_whitney([1.0, math.nan], [2.0])
