"""The size bounds of a scenario: what one run can hold, each with its reason.

One run is an embedded ZooKeeper and Ray actors for the brokers, the producer
and the consumer hosts. Validation (:mod:`emulator.scenario.parse`) checks each
bound before it builds anything proportional to the size (member names, the
plan); the two bounds of the plan itself, :data:`~emulator.scenario.plan.MAX_TIMELINE_ENTRIES`
and :data:`~emulator.scenario.plan.MAX_PLANNED_STEPS`, live with the planner.
These are emulator limits, not Kafka's (Kafka's own limit on an ``int`` config,
a Java int, is :data:`emulator.kafka_keys.INT32_MAX`).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "MAX_BATCH_SIZE",
    "MAX_BROKERS",
    "MAX_CONSUMER_HOSTS",
    "MAX_CONSUMER_THREADS",
    "MAX_DESCRIPTION_CHARS",
    "MAX_DURATION_S",
    "MAX_MEMBERS",
    "MAX_MEMBERS_PER_HOST",
    "MAX_PARTITIONS_PER_TOPIC",
    "MAX_PARTITIONS_TOTAL",
    "MAX_PROCESSING_MS_PER_MESSAGE",
    "MAX_RATE_PER_S",
    "MAX_REPLICAS_PER_TOPIC",
    "MAX_REPLICAS_TOTAL",
    "MAX_STREAMS_PER_CONSUMER",
    "MAX_TIME_SCALE",
    "MAX_TOPICS",
    "MAX_TOPIC_PATTERN_CHARS",
    "MIN_TIME_SCALE",
    "ZK_MIN_SESSION_TIMEOUT_MS",
]

MAX_TIME_SCALE: Final = 10.0
"""Largest ``time_scale``: a run at most ten times slower than Kafka's own time."""

MIN_TIME_SCALE: Final = 0.01
"""Smallest ``time_scale``: a Kafka millisecond is then 10 µs of wall time, the finest an event
loop's timers keep (the benchmarks' ``--time-scale`` range is the same [0.01, 10])."""
MAX_DURATION_S: Final = 7 * 24 * 3600.0
"""Longest run: 7 emulated days (70 wall days at ``MAX_TIME_SCALE``); bounds every duration."""
MAX_DESCRIPTION_CHARS: Final = 10_000
"""Longest ``description``: it goes into every run's manifest and ``rebalance-emu list``."""
MAX_BROKERS: Final = 1_000
"""Most brokers: each is a Ray actor (a process) with a ZooKeeper session."""
MAX_TOPICS: Final = 1_000
"""Most topics: a legacy member's registration znode lists every subscribed topic (names of up
to 249 characters) and must fit ZooKeeper's 1 MB ``jute.maxbuffer``."""
MAX_TOPIC_PATTERN_CHARS: Final = 10_000
"""Longest subscription pattern: a 0.8 wildcard member's registration znode holds it, and every
run's manifest."""
MAX_PARTITIONS_PER_TOPIC: Final = 50_000
"""Most partitions of one topic: ``/brokers/topics/<t>`` holds the topic's whole replica
assignment in one znode, under ZooKeeper's 1 MB ``jute.maxbuffer`` (with
:data:`MAX_REPLICAS_PER_TOPIC`: at most about 0.9 MB)."""
MAX_REPLICAS_PER_TOPIC: Final = 100_000
"""Most replicas (partitions x replication_factor) of one topic: the same znode."""
MAX_PARTITIONS_TOTAL: Final = 200_000
"""Most partitions over all topics: the controller writes two znodes per partition into the
embedded ZooKeeper (256 MiB heap); ZooKeeper-based Kafka is rated for about 200,000."""
MAX_REPLICAS_TOTAL: Final = 600_000
"""Most replicas over all topics (200,000 partitions x 3): each is a log a broker actor keeps."""
MAX_RATE_PER_S: Final = 10_000_000.0
"""Highest ``[producer].rate_per_s``: the producer actor partitions every message in Python
(about a microsecond each), so a larger rate only stalls its tick."""
MAX_BATCH_SIZE: Final = 100_000
"""Largest ``[producer].batch_size``: 100 MiB of the emulator's 1 KiB messages in one produce
call, a hundred times Kafka's default ``message.max.bytes``."""
MAX_MEMBERS: Final = 100_000
"""Most consumers over a run (``[group].consumers`` plus every join): each has a name, a
state machine and a place in every assignment."""
MAX_MEMBERS_PER_HOST: Final = 10_000
"""Most consumers on one host actor: they share its event loop (2,000 per host measured at
about 250 MiB and a 1-3 s loop lag, tests/bench/results/scale.json)."""
MAX_CONSUMER_HOSTS: Final = 2_000
"""Most consumer hosts: each is a Ray actor process (about 130 MiB measured); 2,000 hosts of
the default 50 consumers hold :data:`MAX_MEMBERS`."""
MAX_STREAMS_PER_CONSUMER: Final = 1_000
"""Most ``[group].streams_per_consumer``: each stream is a queue and a thread id of the member."""
MAX_CONSUMER_THREADS: Final = 200_000
"""Most consumer threads (members x streams_per_consumer): a legacy rebalance lists them all,
and more than :data:`MAX_PARTITIONS_TOTAL` would only idle."""
MAX_PROCESSING_MS_PER_MESSAGE: Final = 86_400_000.0
"""Slowest processing: a day per message, longer than any Kafka timeout the scenario allows."""
ZK_MIN_SESSION_TIMEOUT_MS: Final = 2
"""The least session timeout ZooKeeper grants: 2 ticks of at least 1 ms
(``zk_registry.server.tick_time_for``); the run requests the *scaled* timeout."""
