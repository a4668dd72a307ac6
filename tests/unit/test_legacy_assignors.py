"""Kafka 0.8.2.2 range and roundrobin assignors (kafka-protocols.md A2, A6).

Hand-computed examples first, then seeded property sweeps: every partition of
a subscribed topic assigned exactly once, balanced within one, the per-consumer
functions agree with the group-wide one, and the output does not depend on the
iteration order of the inputs.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from emulator.javahash import java_string_hashcode, java_string_sort_key
from emulator.legacy.assignors import (
    AssignmentStrategy,
    ThreadId,
    assign,
    assign_all,
    consumers_for_topic,
    range_assign,
    roundrobin_assign,
    strategy_from_config,
    topic_partition_hashcode,
)

RANGE = AssignmentStrategy.RANGE
RR = AssignmentStrategy.ROUNDROBIN


def reference_java_hash(s: str) -> int:
    """Java's hashCode by its closed form, independent of the implementation's loop."""
    units = s.encode("utf-16-be", errors="surrogatepass")
    codes = [int.from_bytes(units[i : i + 2], "big") for i in range(0, len(units), 2)]
    n = len(codes)
    total = sum(c * 31 ** (n - 1 - i) for i, c in enumerate(codes))
    return int((total + 2**31) % 2**32 - 2**31)


def owners(assignment: dict[tuple[str, int], ThreadId]) -> dict[tuple[str, int], str]:
    return {tp: str(t) for tp, t in assignment.items()}


# --------------------------------------------------------------------------- javahash


class TestJavaHash:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("", 0),
            ("a", 97),
            ("hello", 99162322),
            ("Aa", 2112),
            ("BB", 2112),
            ("polygenelubricants", -(2**31)),  # the well-known Integer.MIN_VALUE string
            # "[t,0]" = 91*31^4 + 116*31^3 + 44*31^2 + 48*31 + 93
            ("[t,0]", 91 * 923521 + 116 * 29791 + 44 * 961 + 48 * 31 + 93),
            ("[t,0]", 87540032),
            # "[t,10]" overflows: 2713740651 - 2^32
            ("[t,10]", -1581226645),
            # U+1F600 is the surrogate pair D83D DE00 in UTF-16
            ("\U0001f600", 0xD83D * 31 + 0xDE00),
        ],
    )
    def test_known_values(self, text: str, expected: int) -> None:
        assert java_string_hashcode(text) == expected

    def test_matches_closed_form_on_random_strings(self) -> None:
        rng = random.Random(20150902)
        alphabet = "abcXYZ019-_.,[]é€\U0001f600"
        for _ in range(500):
            s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
            h = java_string_hashcode(s)
            assert h == reference_java_hash(s)
            assert -(2**31) <= h < 2**31

    def test_sort_key_is_utf16_order(self) -> None:
        # U+FF61 (one BMP unit) sorts after U+1F600 (surrogates D83D...) in Java,
        # the reverse of Python's code point order.
        bmp, astral = "\uff61", "\U0001f600"
        assert bmp < astral
        assert sorted([bmp, astral], key=java_string_sort_key) == [astral, bmp]
        assert sorted(["c-2", "c-10", "c-1"], key=java_string_sort_key) == ["c-1", "c-10", "c-2"]


# --------------------------------------------------------------------------- thread ids


class TestThreadId:
    def test_str_and_order(self) -> None:
        assert str(ThreadId("g_host-1-9a86b603", 3)) == "g_host-1-9a86b603-3"
        assert ThreadId("c", 10) < ThreadId("c", 2)
        assert sorted([ThreadId("c", i) for i in range(12)]) == [
            ThreadId("c", i) for i in (0, 1, 10, 11, 2, 3, 4, 5, 6, 7, 8, 9)
        ]
        assert ThreadId("c-10", 0) < ThreadId("c-2", 0)
        assert ThreadId("a", 1) == ThreadId("a", 1)
        assert len({ThreadId("a", 1), ThreadId("a", 1)}) == 1

    def test_consumers_for_topic(self) -> None:
        per_topic = consumers_for_topic({"c-2": {"t": 1, "u": 2}, "c-10": {"t": 2}})
        assert list(per_topic) == ["t", "u"]
        assert [str(t) for t in per_topic["t"]] == ["c-10-0", "c-10-1", "c-2-0"]
        assert [str(t) for t in per_topic["u"]] == ["c-2-0", "c-2-1"]

    def test_strategy_from_config(self) -> None:
        assert strategy_from_config("roundrobin") is RR
        for other in ("range", "", "RoundRobin", "round-robin", "fair", "cooperative-sticky"):
            assert strategy_from_config(other) is RANGE


# --------------------------------------------------------------------------- range by hand


class TestRangeByHand:
    def test_scaladoc_example(self) -> None:
        # RangeAssignor Scaladoc: C1, C2 with two streams each, p0..p4.
        consumers = {"C1": {"t": 2}, "C2": {"t": 2}}
        parts = {"t": [4, 3, 2, 1, 0]}
        assert owners(assign_all(RANGE, consumers, parts)) == {
            ("t", 0): "C1-0",
            ("t", 1): "C1-0",
            ("t", 2): "C1-1",
            ("t", 3): "C2-0",
            ("t", 4): "C2-1",
        }
        assert owners(range_assign("C2", consumers, parts)) == {
            ("t", 3): "C2-0",
            ("t", 4): "C2-1",
        }

    def test_thread_ten_sorts_before_two(self) -> None:
        # 11 threads c-0..c-10 order as c-0, c-1, c-10, c-2..c-9; 12 partitions:
        # n=1, r=1, so c-0 takes p0,p1 and c-10 (position 2) takes p3.
        result = owners(range_assign("c", {"c": {"t": 11}}, {"t": range(12)}))
        order = ["c-0", "c-0", "c-1", "c-10", "c-2", "c-3", "c-4", "c-5", "c-6", "c-7"]
        order += ["c-8", "c-9"]
        assert result == {("t", p): owner for p, owner in enumerate(order)}

    def test_consumer_ids_compare_as_strings(self) -> None:
        consumers = {"g_c-2": {"t": 1}, "g_c-10": {"t": 1}}
        assert owners(assign_all(RANGE, consumers, {"t": range(3)})) == {
            ("t", 0): "g_c-10-0",
            ("t", 1): "g_c-10-0",
            ("t", 2): "g_c-2-0",
        }

    def test_topics_independent_and_extra_goes_first_every_topic(self) -> None:
        consumers = {"a": {"x": 1, "y": 1}, "b": {"x": 1, "y": 1}}
        result = owners(assign_all(RANGE, consumers, {"x": range(3), "y": range(3)}))
        assert Counter(result.values()) == {"a-0": 4, "b-0": 2}

    def test_more_threads_than_partitions(self) -> None:
        consumers = {"a": {"t": 2}, "b": {"t": 2}}
        assert owners(assign_all(RANGE, consumers, {"t": [0, 1]})) == {
            ("t", 0): "a-0",
            ("t", 1): "a-1",
        }
        assert range_assign("b", consumers, {"t": [0, 1]}) == {}

    def test_partition_ids_sorted_numerically_and_sparse(self) -> None:
        consumers = {"a": {"t": 1}, "b": {"t": 1}}
        result = owners(assign_all(RANGE, consumers, {"t": [10, 2, 9, 1]}))
        assert result == {("t", 1): "a-0", ("t", 2): "a-0", ("t", 9): "b-0", ("t", 10): "b-0"}

    def test_heterogeneous_subscriptions(self) -> None:
        consumers = {"a": {"x": 1}, "b": {"x": 1, "y": 2}}
        result = owners(assign_all(RANGE, consumers, {"x": range(2), "y": range(3)}))
        assert result == {
            ("x", 0): "a-0",
            ("x", 1): "b-0",
            ("y", 0): "b-0",
            ("y", 1): "b-0",
            ("y", 2): "b-1",
        }

    def test_missing_topic_has_no_partitions(self) -> None:
        assert range_assign("a", {"a": {"gone": 1}}, {}) == {}


# --------------------------------------------------------------------------- roundrobin by hand


class TestRoundRobinByHand:
    def test_hash_order_of_one_topic(self) -> None:
        # Single-digit partitions hash to 87540032 + p; "[t,10]" and "[t,11]"
        # overflow to negative values, so they come first.
        hashes = {p: reference_java_hash(f"[t,{p}]") for p in range(12)}
        assert hashes[0] == 87540032 and hashes[10] == -1581226645
        assert hashes[11] == hashes[10] + 31
        expected_order = sorted(range(12), key=lambda p: hashes[p])
        assert expected_order == [10, 11, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
        for p in range(12):
            assert topic_partition_hashcode("t", p) == hashes[p]

        consumers = {"b": {"t": 1}, "a": {"t": 1}}
        result = owners(assign_all(RR, consumers, {"t": range(12)}))
        dealt = {p: ("a-0", "b-0")[i % 2] for i, p in enumerate(expected_order)}
        assert result == {("t", p): owner for p, owner in dealt.items()}
        assert [p for (_, p), o in sorted(result.items()) if o == "a-0"] == [0, 2, 4, 6, 8, 10]

    def test_threads_dealt_in_string_order(self) -> None:
        consumers = {"c": {"t": 11}}
        result = owners(assign_all(RR, consumers, {"t": range(11)}))
        threads = [f"c-{i}" for i in (0, 1, 10, 2, 3, 4, 5, 6, 7, 8, 9)]
        order = sorted(range(11), key=lambda p: reference_java_hash(f"[t,{p}]"))
        assert result == {("t", p): threads[i] for i, p in enumerate(order)}

    def test_two_topics_interleaved_by_hash(self) -> None:
        consumers = {"a": {"x": 1, "y": 1}, "b": {"x": 1, "y": 1}, "c": {"x": 1, "y": 1}}
        parts = {"x": range(4), "y": range(3)}
        tps = [(t, p) for t in parts for p in parts[t]]
        tps.sort(key=lambda tp: reference_java_hash(f"[{tp[0]},{tp[1]}]"))
        expected = {tp: ("a-0", "b-0", "c-0")[i % 3] for i, tp in enumerate(tps)}
        assert owners(assign_all(RR, consumers, parts)) == expected
        mine = owners(roundrobin_assign("b", consumers, parts))
        assert mine == {tp: o for tp, o in expected.items() if o == "b-0"}

    def test_hash_ties_across_topics_ordered_by_topic_name(self) -> None:
        # "Aa" and "BB" collide, so "[Aa,0]" and "[BB,0]" have equal hashes.
        assert topic_partition_hashcode("Aa", 0) == topic_partition_hashcode("BB", 0)
        consumers = {"a": {"BB": 1, "Aa": 1}, "b": {"Aa": 1, "BB": 1}}
        result = owners(assign_all(RR, consumers, {"BB": [0], "Aa": [0]}))
        assert result == {("Aa", 0): "a-0", ("BB", 0): "b-0"}

    def test_require_rejects_different_topics(self) -> None:
        consumers = {"a": {"x": 1, "y": 1}, "b": {"x": 1}}
        with pytest.raises(ValueError, match="Round-robin assignment is allowed only if"):
            roundrobin_assign("a", consumers, {"x": range(2), "y": range(2)})
        with pytest.raises(ValueError, match="requirement failed"):
            assign_all(RR, consumers, {"x": range(2), "y": range(2)})

    def test_require_rejects_stream_counts_differing_across_topics(self) -> None:
        consumers = {"a": {"x": 2, "y": 1}, "b": {"x": 2, "y": 1}}
        with pytest.raises(ValueError) as err:
            assign(RR, "a", consumers, {"x": range(2), "y": range(2)})
        assert "\n" not in str(err.value)

    def test_require_allows_different_stream_counts_between_consumers(self) -> None:
        # Kafka compares thread-id sets across topics only: a with 2 streams and
        # b with 1 on the same topics passes.
        consumers = {"a": {"x": 2, "y": 2}, "b": {"x": 1, "y": 1}}
        result = assign_all(RR, consumers, {"x": range(6), "y": range(3)})
        assert Counter(str(t) for t in result.values()) == {"a-0": 3, "a-1": 3, "b-0": 3}

    def test_consumer_without_subscription_gets_nothing(self) -> None:
        consumers: dict[str, dict[str, int]] = {"idle": {}, "a": {"t": 1}}
        assert roundrobin_assign("idle", consumers, {"t": range(3)}) == {}
        assert range_assign("idle", consumers, {"t": range(3)}) == {}
        assert roundrobin_assign("idle", {"idle": {}}, {"t": range(3)}) == {}


class TestInputErrors:
    @pytest.mark.parametrize("strategy", [RANGE, RR])
    def test_unknown_consumer(self, strategy: AssignmentStrategy) -> None:
        with pytest.raises(ValueError, match="not among"):
            assign(strategy, "z", {"a": {"t": 1}}, {"t": [0]})

    @pytest.mark.parametrize("streams", [0, -1, True])
    def test_bad_stream_count(self, streams: int) -> None:
        with pytest.raises(ValueError, match="numStreams"):
            range_assign("a", {"a": {"t": streams}}, {"t": [0]})


# --------------------------------------------------------------------------- property sweeps


def random_group(
    rng: random.Random, *, identical: bool
) -> tuple[dict[str, dict[str, int]], dict[str, list[int]]]:
    """A random group of 1..50 consumers, 1..8 streams, 1..4 topics of 1..200 partitions.

    ``identical``: every consumer subscribes to all topics with one stream count
    (which may differ between consumers), as round-robin requires.
    """
    topics = [f"topic-{i}" for i in range(rng.randint(1, 4))]
    parts = {t: rng.sample(range(400), rng.randint(1, 200)) for t in topics}
    prefix = rng.choice(["c", "g_host-1441996002307-9a86b603-", "x"])
    consumers: dict[str, dict[str, int]] = {}
    for i in range(rng.randint(1, 50)):
        cid = f"{prefix}{i}"
        if identical:
            streams = rng.randint(1, 8)
            consumers[cid] = {t: streams for t in topics}
        else:
            chosen = rng.sample(topics, rng.randint(1, len(topics)))
            consumers[cid] = {t: rng.randint(1, 8) for t in chosen}
    return consumers, parts


def shuffled(
    rng: random.Random, consumers: dict[str, dict[str, int]], parts: dict[str, list[int]]
) -> tuple[dict[str, dict[str, int]], dict[str, list[int]]]:
    cids = list(consumers)
    rng.shuffle(cids)
    new_consumers = {}
    for cid in cids:
        topics = list(consumers[cid])
        rng.shuffle(topics)
        new_consumers[cid] = {t: consumers[cid][t] for t in topics}
    topic_order = list(parts)
    rng.shuffle(topic_order)
    new_parts = {t: rng.sample(parts[t], len(parts[t])) for t in topic_order}
    return new_consumers, new_parts


def check_exactly_once(
    consumers: dict[str, dict[str, int]],
    parts: dict[str, list[int]],
    result: dict[tuple[str, int], ThreadId],
) -> None:
    subscribed = {t for sub in consumers.values() for t in sub}
    expected = {(t, p) for t in subscribed for p in parts.get(t, [])}
    assert set(result) == expected
    for (topic, _), thread in result.items():
        assert consumers[thread.consumer_id].get(topic, 0) > thread.index >= 0


SWEEP_SEEDS = range(150)


@pytest.mark.parametrize("seed", SWEEP_SEEDS)
def test_range_properties(seed: int) -> None:
    rng = random.Random(seed)
    consumers, parts = random_group(rng, identical=rng.random() < 0.3)
    result = assign_all(RANGE, consumers, parts)
    check_exactly_once(consumers, parts, result)

    # Balanced within one per topic, over the threads subscribed to that topic.
    for topic, threads in consumers_for_topic(consumers).items():
        counts = Counter(t for (tp, t) in result.items() if tp[0] == topic)
        sizes = [counts.get(thread, 0) for thread in threads]
        assert max(sizes) - min(sizes) <= 1
        # and the sorted threads hold contiguous, non-increasing ranges
        assert sizes == sorted(sizes, reverse=True)

    # The union of every member's own computation is the group map.
    union: dict[tuple[str, int], ThreadId] = {}
    for cid in consumers:
        mine = range_assign(cid, consumers, parts)
        assert all(t.consumer_id == cid for t in mine.values())
        assert not set(mine) & set(union)
        union.update(mine)
    assert union == result

    # Independent of input iteration order.
    for _ in range(3):
        c2, p2 = shuffled(rng, consumers, parts)
        assert assign_all(RANGE, c2, p2) == result
        some = rng.choice(list(consumers))
        assert range_assign(some, c2, p2) == range_assign(some, consumers, parts)


@pytest.mark.parametrize("seed", SWEEP_SEEDS)
def test_roundrobin_properties(seed: int) -> None:
    rng = random.Random(10_000 + seed)
    consumers, parts = random_group(rng, identical=True)
    result = assign_all(RR, consumers, parts)
    check_exactly_once(consumers, parts, result)

    # Balanced within one overall, over every thread of the group.
    threads = next(iter(consumers_for_topic(consumers).values()))
    counts = Counter(result.values())
    sizes = [counts.get(thread, 0) for thread in threads]
    assert max(sizes) - min(sizes) <= 1

    union: dict[tuple[str, int], ThreadId] = {}
    for cid in consumers:
        mine = roundrobin_assign(cid, consumers, parts)
        assert all(t.consumer_id == cid for t in mine.values())
        assert not set(mine) & set(union)
        union.update(mine)
    assert union == result

    for _ in range(3):
        c2, p2 = shuffled(rng, consumers, parts)
        assert assign_all(RR, c2, p2) == result
        some = rng.choice(list(consumers))
        assert roundrobin_assign(some, c2, p2) == roundrobin_assign(some, consumers, parts)


@pytest.mark.parametrize("seed", range(40))
def test_roundrobin_rejects_every_non_identical_group(seed: int) -> None:
    rng = random.Random(20_000 + seed)
    consumers, parts = random_group(rng, identical=True)
    if len(parts) < 2:
        parts["extra"] = [0, 1]
        for sub in consumers.values():
            sub["extra"] = next(iter(sub.values()))
    if len(consumers) == 1:  # a lone consumer dropping a topic still passes the check
        consumers["other"] = dict(next(iter(consumers.values())))
    # Break the requirement for one consumer: drop a topic or change one count.
    victim = rng.choice(list(consumers))
    topic = rng.choice(list(consumers[victim]))
    if rng.random() < 0.5:
        del consumers[victim][topic]
    else:
        consumers[victim][topic] += 1
    with pytest.raises(ValueError, match="Round-robin"):
        assign_all(RR, consumers, parts)
