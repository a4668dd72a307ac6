"""``Streams``: named independent substreams, integer-only draws, quantile tables."""

from __future__ import annotations

import hashlib
import random

import pytest

from emulator.sim.rng import PPM, QuantileTable, Streams, chance, stream_seed, uniform_ns
from tests.unit.sim.hashseed import output_under_hash_seed


class IntegerOnly(random.Random):
    """A Random that fails on any float draw (``random()`` underlies them all).

    ``getrandbits`` is overridden too (unchanged): a subclass that overrides
    only ``random`` makes CPython's ``randrange`` fall back to float draws.
    """

    def getrandbits(self, k: int) -> int:
        return super().getrandbits(k)

    def random(self) -> float:
        raise AssertionError("a float draw")

    def gauss(self, mu: float = 0.0, sigma: float = 1.0) -> float:
        raise AssertionError("a libm draw")


def test_a_stream_is_seeded_from_sha256_of_seed_and_name() -> None:
    expected = int.from_bytes(hashlib.sha256(b"42/net/a->b").digest()[:8], "big")
    assert stream_seed(42, "net/a->b") == expected == 0x473EFD95CAD70E0B
    rng = Streams(42).stream("net/a->b")
    assert [rng.randrange(1000) for _ in range(5)] == [994, 665, 730, 238, 410]
    assert rng.getrandbits(64) == 17749250094830097609


def test_the_draws_do_not_depend_on_the_hash_seed() -> None:
    code = (
        "from emulator.sim.rng import Streams\n"
        "s = Streams('seed')\n"
        "print([s.stream(n).randrange(10**9) for n in ('a', 'b', 'c')])\n"
    )
    outs = {output_under_hash_seed(code, h, 60) for h in ("1", "2")}
    assert len(outs) == 1


def test_streams_are_cached_and_listed() -> None:
    s = Streams(7)
    assert s.stream("x") is s.stream("x")
    s.stream("b/1")
    assert s.names() == ["b/1", "x"]


def test_streams_are_independent_of_each_other_and_of_creation_order() -> None:
    lone = Streams(5)
    alone = [lone.stream("a").randrange(1 << 30) for _ in range(100)]

    busy = Streams(5)
    busy.stream("z")  # created first
    mixed: list[int] = []
    for i in range(100):
        busy.stream("b").getrandbits(32)
        if i % 3 == 0:
            busy.stream("z").randrange(7)
        mixed.append(busy.stream("a").randrange(1 << 30))
    assert mixed == alone
    # Different names and different seeds give different streams.
    assert Streams(5).stream("b").randrange(1 << 30) != alone[0]
    assert Streams(6).stream("a").randrange(1 << 30) != alone[0]


def test_uniform_ns_is_an_inclusive_integer_range() -> None:
    rng = IntegerOnly(1)
    draws = [uniform_ns(rng, 3, 6) for _ in range(2000)]
    assert set(draws) == {3, 4, 5, 6}
    assert all(type(d) is int for d in draws)
    assert uniform_ns(rng, 9, 9) == 9
    with pytest.raises(ValueError):
        uniform_ns(rng, 2, 1)


@pytest.mark.parametrize(("lo", "hi"), [(0, 0), (3, 6), (300_000, 700_000), (0, 2**40 + 7)])
def test_uniform_ns_draws_what_randrange_draws(lo: int, hi: int) -> None:
    """The inlined draw gives the same numbers from the same state (replays depend on it)."""
    mine, theirs = random.Random(11), random.Random(11)
    assert [uniform_ns(mine, lo, hi) for _ in range(3000)] == [
        theirs.randrange(lo, hi + 1) for _ in range(3000)
    ]
    assert mine.getstate() == theirs.getstate()


def test_a_quantile_table_draws_at_what_randrange_draws() -> None:
    """Its inlined ``randrange(PPM)`` gives the same quantiles from the same state."""
    table = QuantileTable([(0, 200_000), (990_000, 20_000_000), (PPM, 200_000_000)])
    mine, theirs = random.Random(5), random.Random(5)
    assert [table(mine) for _ in range(3000)] == [
        table.at(theirs.randrange(PPM)) for _ in range(3000)
    ]
    assert mine.getstate() == theirs.getstate()


def test_chance_is_in_parts_per_million() -> None:
    rng = IntegerOnly(2)
    hits = sum(chance(rng, 250_000) for _ in range(20_000))
    assert 4_500 < hits < 5_500
    assert not any(chance(rng, 0) for _ in range(1000))
    assert all(chance(rng, PPM) for _ in range(1000))


def test_a_quantile_table_interpolates_with_integers() -> None:
    table = QuantileTable([(0, 200_000), (990_000, 20_000_000), (PPM, 200_000_000)])
    assert table.at(0) == 200_000
    assert table.at(495_000) == 200_000 + (19_800_000 * 495_000) // 990_000
    assert table.at(990_000) == 20_000_000
    assert table.at(995_000) == 110_000_000
    assert table.at(PPM - 1) == 200_000_000 - 18_000
    rng = IntegerOnly(3)
    draws = [table(rng) for _ in range(20_000)]
    assert all(type(d) is int and 200_000 <= d <= 200_000_000 for d in draws)
    tail = sum(d > 20_000_000 for d in draws)
    assert 120 < tail < 290  # ~1% of the mass is in the tail


@pytest.mark.parametrize(
    "points",
    [
        [(0, 1)],
        [(1, 1), (PPM, 2)],
        [(0, 1), (PPM - 1, 2)],
        [(0, 5), (PPM, 4)],
        [(0, 1), (500, 2), (500, 3), (PPM, 4)],
    ],
)
def test_a_malformed_quantile_table_is_refused(points: list[tuple[int, int]]) -> None:
    with pytest.raises(ValueError):
        QuantileTable(points)


def test_helpers_never_draw_floats() -> None:
    rng = IntegerOnly(4)
    table = QuantileTable([(0, 50_000), (PPM, 250_000)])
    for _ in range(500):
        uniform_ns(rng, 0, 10**9)
        chance(rng, 10)
        table.draw(rng)
    with pytest.raises(AssertionError):
        rng.uniform(0, 1)  # the guard itself works
