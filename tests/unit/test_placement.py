"""Replica placement = Kafka 0.8.2.2 ``AdminUtils.assignReplicasToBrokers``.

The expected assignments are written by hand from the Scala source and its
comment table, and from assignments seen in real clusters' ``/brokers/topics``
znodes (the start index and shift that explain them are worked out in each
test).
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from emulator.placement import AdminOperationError, assign_replicas_to_brokers, replica_index


class _Draws(random.Random):
    """A Random whose ``randrange`` returns scripted values (and records the bounds)."""

    def __init__(self, values: list[int]) -> None:
        super().__init__(0)
        self.values = list(values)
        self.bounds: list[int] = []

    def randrange(self, *args: int, **kwargs: int) -> int:  # type: ignore[override]
        self.bounds.append(args[0])
        return self.values.pop(0)


def test_scala_comment_table() -> None:
    # The table in AdminUtils' comment: 5 brokers, 10 partitions, 3 replicas,
    # startIndex 0 and nextReplicaShift 0 (which fixed_start_index=0 gives).
    #   broker-0  broker-1  broker-2  broker-3  broker-4
    #   p0        p1        p2        p3        p4       (1st replica)
    #   p5        p6        p7        p8        p9       (1st replica)
    #   p4        p0        p1        p2        p3       (2nd replica)
    #   p8        p9        p5        p6        p7       (2nd replica)
    #   p3        p4        p0        p1        p2       (3nd replica)
    #   p7        p8        p9        p5        p6       (3nd replica)
    expected = {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }
    got = assign_replicas_to_brokers([0, 1, 2, 3, 4], 10, 3, random.Random(1), fixed_start_index=0)
    assert got == expected
    assert list(got) == list(range(10))


def test_real_cluster_four_partitions() -> None:
    # A cluster's /brokers/topics/topic-create:
    #   {"version":1,"partitions":{"2":[1,2],"1":[0,1],"3":[2,1],"0":[2,0]}}
    # brokers [0,1,2], RF 2: p0 leads on broker 2 -> startIndex 2; p0's follower 0 means
    # (2 + 1 + shift % 2) % 3 == 0 -> shift even; p3 bumps the shift: follower
    # (2 + 1 + (shift+1) % 2) % 3 == 1. fixed_start_index=2 gives startIndex 2, shift 2.
    got = assign_replicas_to_brokers([0, 1, 2], 4, 2, random.Random(1), fixed_start_index=2)
    assert got == {0: [2, 0], 1: [0, 1], 2: [1, 2], 3: [2, 1]}


def test_broker_list_order_is_used_as_given() -> None:
    # {"2":[1002,1001,1004],"1":[1004,1002,1001],"0":[1001,1004,1002]} is explained by the
    # broker list [1001, 1004, 1002] with startIndex 0 and shift 0.
    got = assign_replicas_to_brokers(
        [1001, 1004, 1002], 3, 3, random.Random(1), fixed_start_index=0
    )
    assert got == {0: [1001, 1004, 1002], 1: [1004, 1002, 1001], 2: [1002, 1001, 1004]}


def test_draw_order_start_index_then_shift() -> None:
    # 3 brokers, one partition, RF 2. startIndex 1, shift 0 -> [1, 2];
    # if the draws were swapped (startIndex 0, shift 1) it would be [0, 2].
    rng = _Draws([1, 0])
    assert assign_replicas_to_brokers([0, 1, 2], 1, 2, rng) == {0: [1, 2]}
    assert rng.bounds == [3, 3]  # nextInt(brokerList.size) twice
    rng = _Draws([0, 1])
    assert assign_replicas_to_brokers([0, 1, 2], 1, 2, rng) == {0: [0, 2]}


def test_fixed_start_index_draws_nothing() -> None:
    rng = _Draws([])
    assign_replicas_to_brokers([0, 1, 2], 6, 3, rng, fixed_start_index=1)
    assert rng.bounds == []


def test_add_partitions_continues_ids_and_shift() -> None:
    # addPartitions: fixedStartIndex = head of partition 0's replicas (1), startPartitionId =
    # existing count (3). p3: 3 % 3 == 0 -> shift 1 -> 2; first (3+1)%3 = 1;
    # follower 1 + (2+0)%2 = 1 -> broker 2. p4: first (4+1)%3 = 2; follower (2+1)%3 = 0.
    got = assign_replicas_to_brokers(
        [0, 1, 2], 2, 2, random.Random(1), fixed_start_index=1, start_partition_id=3
    )
    assert got == {3: [1, 2], 4: [2, 0]}


def test_replica_index_formula() -> None:
    # shift = 1 + (secondReplicaShift + replicaIndex) % (nBrokers - 1)
    assert replica_index(0, 0, 0, 5) == 1
    assert replica_index(0, 1, 1, 5) == 3
    assert replica_index(4, 3, 0, 5) == (4 + 1 + 3) % 5
    assert replica_index(2, 7, 2, 3) == (2 + 1 + (7 + 2) % 2) % 3


def test_single_broker_rf_one() -> None:
    assert assign_replicas_to_brokers([7], 3, 1, random.Random(3)) == {0: [7], 1: [7], 2: [7]}


@pytest.mark.parametrize(
    ("brokers", "partitions", "rf", "message"),
    [
        ([0, 1, 2], 0, 1, "number of partitions must be larger than 0"),
        ([0, 1, 2], 3, 0, "replication factor must be larger than 0"),
        ([0, 1, 2], 3, 4, "replication factor: 4 larger than available brokers: 3"),
        ([], 1, 1, "replication factor: 1 larger than available brokers: 0"),
    ],
)
def test_errors(brokers: list[int], partitions: int, rf: int, message: str) -> None:
    with pytest.raises(AdminOperationError, match=message):
        assign_replicas_to_brokers(brokers, partitions, rf, random.Random(0))


def test_seeded_rng_is_deterministic() -> None:
    a = assign_replicas_to_brokers(list(range(6)), 24, 3, random.Random(42))
    b = assign_replicas_to_brokers(list(range(6)), 24, 3, random.Random(42))
    assert a == b
    draws = random.Random(42)
    start, shift = draws.randrange(6), draws.randrange(6)
    assert a[0][0] == start
    assert a[0][1] == replica_index(start, shift, 0, 6)


def test_properties_over_many_sizes() -> None:
    rng = random.Random(20150902)
    for n_brokers in range(1, 9):
        brokers = sorted(rng.sample(range(100), n_brokers))
        for rf in range(1, n_brokers + 1):
            for n_partitions in (1, n_brokers, 2 * n_brokers + 1, 37):
                got = assign_replicas_to_brokers(brokers, n_partitions, rf, rng)
                assert sorted(got) == list(range(n_partitions))
                for replicas in got.values():
                    assert len(replicas) == rf
                    assert len(set(replicas)) == rf  # never two replicas on one broker
                    assert set(replicas) <= set(brokers)
                # first replicas (preferred leaders) round-robin: balanced within one
                leaders = Counter(r[0] for r in got.values())
                counts = [leaders.get(b, 0) for b in brokers]
                assert max(counts) - min(counts) <= 1
                # every replica slot round-robin too
                load = Counter(b for r in got.values() for b in r)
                slots = [load.get(b, 0) for b in brokers]
                assert max(slots) - min(slots) <= rf
