"""Coordinator placement: Kafka's partitionFor."""

from __future__ import annotations

import random

from emulator.modern.placement import (
    coordinator_partition,
    kafka_abs,
    offsets_topic_assignment,
)


def test_partition_for_matches_java() -> None:
    # "my-group".hashCode() == 1069496932 in Java (computed by hand below).
    h = 0
    for ch in "my-group":
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    h = h - 2**32 if h >= 2**31 else h
    assert coordinator_partition("my-group") == abs(h) % 50
    # A hash of Integer.MIN_VALUE maps to partition 0 (Utils.abs).
    assert kafka_abs(-(2**31)) == 0
    assert coordinator_partition("polygenelubricants") == 0  # Java hash is MIN_VALUE
    assert coordinator_partition("g", 1) == 0


def test_offsets_topic_is_placed_on_live_brokers() -> None:
    a = offsets_topic_assignment([0, 1, 2], random.Random(1))
    assert len(a) == 50
    assert all(len(r) == 3 and len(set(r)) == 3 for r in a.values())
    b = offsets_topic_assignment([0, 1], random.Random(1))
    assert all(len(r) == 2 for r in b.values())
