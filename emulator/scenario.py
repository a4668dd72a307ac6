"""The scenario file: one workload and fault schedule, run once per protocol.

A scenario is a TOML file (read with stdlib :mod:`tomllib`) describing the
cluster, the topics, the producer load, the consumer group, Kafka configs by
their Kafka names, and a timeline of membership changes. The same scenario,
seed and timeline drive every generation under comparison, so differences
come from the protocol (architecture.md, "Data flow of one run").

Format, with every default::

    name = "quickstart"          # default: the file's stem; [A-Za-z0-9._-], <= 100 chars
    description = ""
    seed = 0                     # integer >= 0; seeds every random.Random of the run
    duration_s = 60.0            # emulated (Kafka) seconds the run lasts, 0 < x <= 7 days
    time_scale = 1.0             # wall seconds per emulated second, 0.01 <= x <= 10; an emulator
                                 # knob: < 1 runs faster than Kafka, > 1 slower (a group
                                 # too large to keep Kafka's timing on a small machine)
    kafka_version = "3.9"        # Kafka release for the classic/KIP-848 defaults (B6), >= 0.10.1

    [cluster]
    brokers = 3                  # 1 .. 1000
    zookeeper_ensemble = 1       # 1, 3 or 5 members in the embedded ensemble

    [[topics]]                   # at least one, at most 1000
    name = "events"              # required; Kafka's legal characters [a-zA-Z0-9._-], <= 249
    partitions = 12              # required, 1 .. 50000 (200000 over all topics)
    replication_factor = 1       # 1 .. [cluster].brokers; partitions x replication_factor
                                 # <= 100000 (600000 over all topics)

    [producer]
    rate_per_s = 100.0           # messages per emulated second in total, 0 .. 1e7
    topics = [...]               # default: every topic, in file order
    partitioner = "round-robin"  # "round-robin" | "key-hash" | "explicit"
    batch_size = 50              # max messages per produce batch, 1 .. 100000
    explicit_partition = 0       # only (and then required) with partitioner = "explicit"

    [group]
    id = "<name>-group"          # [A-Za-z0-9._-], <= 249 (it is a ZooKeeper path element)
    consumers = 1                # initial members, 1 .. 100000 (joins included)
    topics = [...]               # default: every topic, in file order
    streams_per_consumer = 1     # the legacy numStreams, 1 .. 1000 (x members <= 200000)
    processing_ms_per_message = 1.0   # 0 .. 86400000 (a day)
    consumers_per_host = 50      # emulated consumers per host actor, 1 .. 10000, and at
                                 # most 2000 hosts: ceil(members / consumers_per_host)
    static_membership = false    # classic/consumer: group.instance.id = "<group>-<member>"
    zk_latency_ms = 0.0          # legacy: each member's one-way ZooKeeper delay, drawn from
                                 # [0, zk_latency_ms] with the seed (an emulator knob)
    assignor = "..."             # override the protocol's assignor (client or server side)
    manual_commit = "none"       # "none" | "sync" | "async": with auto-commit off, the
                                 # application commits after each processed batch (a knob)
    rebalance_listener = "none"  # "none" | "commit-on-revoke": onPartitionsRevoked commits
                                 # (classic and consumer; the 0.8 consumer has no listener)

    [kafka]                      # any key of KAFKA_CONFIG_KEYS, with its Kafka type
    "rebalance.max.retries" = 4

    [placement]                  # where the Ray actors go on a cluster (an emulator knob)
    brokers = "default"          # "default" (Ray's own choice) | "spread" (one per node
    producer = "default"         # as far as they go) | "resource:NAME" (nodes that have
    consumer_hosts = "default"   # the Ray custom resource NAME, e.g. emu_consumer) |
                                 # "node:IP" (the node with that address)

    [[timeline]]                 # any order in the file; run in time order (ties: file order);
                                 # at most 100000 entries, 1000000 planned steps
    at_s = 10.0                  # required, 0 <= at_s <= duration_s
    action = "join"              # required, one of TIMELINE_ACTIONS (below)

Each action takes its own keys (any other key is an error); durations are
emulated seconds, and everything an action sets in motion (the last join of a
burst, a restart's return, a fault's end) must happen by ``duration_s``:

* ``join``: ``count`` = 1 new members; ``interval_s``: one every
  ``interval_s`` instead of all at once (a scale-out burst).
* ``leave``, ``crash``: ``member`` = ``"c-N"`` or ``"random"`` (a live member,
  chosen with the seed); or ``count`` (+ ``interval_s``), a scale-in burst
  whose every step takes the newest live member. A crash says no goodbye:
  the group notices through session expiry.
* ``restart``: ``member`` or ``members`` (``"all"`` or ``["c-1", ...]``),
  restarted in creation order, one every ``interval_s`` (a rolling restart;
  default all at once), ``downtime_s`` = 0 between the graceful shutdown and
  the start. The member keeps its name (and its ``group.instance.id`` under
  static membership).
* ``pause``: ``member``, ``duration_s``: a process pause (a long GC); the
  member resumes where it stopped, a zombie if the group expired it meanwhile.
* ``slow``: ``member``, ``duration_s``, ``processing_ms_per_message``.
* ``network_partition``: ``member`` or ``members``, ``target`` =
  ``"zookeeper"`` | ``"coordinator"`` | ``"brokers"``, ``duration_s``.
* ``host_crash``: ``host``: a consumer host dies with every member on it.
* ``broker_crash``: ``broker``; ``restart_after_s`` adds a ``broker_restart``.
* ``broker_restart``: ``broker`` (one that is down).
* ``zk_crash``: ``zk_member`` (0-based, < ``[cluster].zookeeper_ensemble``);
  ``restart_after_s`` adds a ``zk_restart``.
* ``zk_restart``: ``zk_member`` (one that is down).
* ``zk_quorum_loss``: ``duration_s``: a majority (n // 2 + 1) of the live
  ensemble members, chosen with the seed, crash at ``at_s`` and restart
  ``duration_s`` later.
* ``add_partitions``: ``topic``, ``partitions``: the new total, larger than
  the topic's count at that time.
* ``subscribe``: ``topics`` (declared topics), ``members`` = ``"all"`` live
  members: a subscription change. Members created later subscribe to
  ``[group].topics``.

Members are named ``c-0``, ``c-1``, ... in creation order: the initial
``[group].consumers`` first, then each join in time order continues the
numbering. A name is never given to another member; a restarted member
keeps its own. Consumer ids built from them compare as strings, so ``c-10``
sorts before ``c-2`` in the legacy assignors (A2), as a real group's ids
would. Members live on consumer hosts by creation order: the ``i``-th member
on host ``i % n_hosts``, ``n_hosts = ceil(members / consumers_per_host)``
(:meth:`Scenario.host_of`); a member cannot start on a host crashed earlier.

The timeline is checked through time: a member named must be alive then (not
left, crashed, on a crashed host, or down in a restart), a broker or
ZooKeeper member crashed must be up and one restarted down.
:meth:`Scenario.action_plan` gives the expanded, seeded plan the orchestrator
runs (:class:`emulator.faults.PlannedAction`); ``random`` choices use
``random.Random(f"{seed}/timeline/{index}")``.

Every size is bounded by what one run can hold (the ``MAX_*`` constants, each with its
reason), and checked before anything proportional to it is built; a count in a
timeline entry is at most :data:`MAX_MEMBERS`, a duration at most :data:`MAX_DURATION_S`.
An ``int`` Kafka config is at most a Java int, and ``zookeeper.session.timeout.ms`` x
``time_scale`` must be a session timeout ZooKeeper grants (>= 2 ms, a Java int).

Validation raises :class:`ScenarioError` with one line that names the key,
for example ``scenario quickstart.toml: [group].consumers must be an integer
>= 1, got "four"``. Unknown keys are errors, with a did-you-mean when a known
key is close. ``timeline[i]`` and ``topics[i]`` count from 0 in file order.

Kafka configs are typed and checked against :data:`KAFKA_CONFIG_KEYS`: the
legacy consumer and 0.8.2 broker keys of kafka-protocols.md A3, and the
classic and KIP-848 keys of B6 and C6. :meth:`Scenario.kafka_config` falls back
to Kafka's default, which can depend on the generation (``protocol``) and on
other keys, as in Kafka: ``rebalance.backoff.ms`` defaults to the *configured*
``zookeeper.sync.time.ms`` (K@0.8.2.2 ``consumer/ConsumerConfig.scala``).
"""

from __future__ import annotations

import difflib
import functools
import heapq
import json
import math
import os
import random
import re
import tomllib
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Final, Literal, NoReturn

from emulator.delivery import MANUAL_COMMIT_MODES, REBALANCE_LISTENERS
from emulator.faults import ACTIONS, PARTITION_TARGETS, PlannedAction
from emulator.modern.config import parse_kafka_version
from emulator.protocols import GENERATIONS, RUN_PROTOCOLS

__all__ = [
    "KAFKA_CONFIG_KEYS",
    "PROTOCOLS",
    "RUN_PROTOCOLS",
    "TIMELINE_ACTIONS",
    "ClusterSpec",
    "GroupSpec",
    "KafkaKeySpec",
    "KafkaValue",
    "MembershipChange",
    "ProducerSpec",
    "Scenario",
    "ScenarioError",
    "TimelineEvent",
    "TopicSpec",
    "bundled_scenarios",
    "load_scenario",
    "member_name",
    "parse_scenario",
    "scenario_from_document",
]

KafkaValue = int | float | str | bool
"""A Kafka config value as TOML gives it."""

PROTOCOLS: Final = GENERATIONS
"""The generations, by Kafka's ``group.protocol`` naming (``zookeeper`` is the 0.8 consumer)."""

TIMELINE_ACTIONS: Final = (
    *ACTIONS[: ACTIONS.index("zk_restart") + 1],
    "zk_quorum_loss",  # expands to zk_crash and zk_restart actions
    *ACTIONS[ACTIONS.index("zk_restart") + 1 :],
)
"""What ``[[timeline]]`` entries may do (:mod:`emulator.faults` has the planned actions)."""

# The keys each timeline action takes, besides at_s and action.
_TIMELINE_KEYS: Final[Mapping[str, tuple[str, ...]]] = {
    "join": ("count", "interval_s"),
    "leave": ("member", "count", "interval_s"),
    "crash": ("member", "count", "interval_s"),
    "restart": ("member", "members", "interval_s", "downtime_s"),
    "pause": ("member", "duration_s"),
    "slow": ("member", "duration_s", "processing_ms_per_message"),
    "network_partition": ("member", "members", "target", "duration_s"),
    "host_crash": ("host",),
    "broker_crash": ("broker", "restart_after_s"),
    "broker_restart": ("broker",),
    "zk_crash": ("zk_member", "restart_after_s"),
    "zk_restart": ("zk_member",),
    "zk_quorum_loss": ("duration_s",),
    "add_partitions": ("topic", "partitions"),
    "subscribe": ("members", "topics"),
}
_ALL_TIMELINE_KEYS: Final = (
    "at_s",
    "action",
    *dict.fromkeys(k for keys in _TIMELINE_KEYS.values() for k in keys),
)
ASSIGNOR_NAMES: Final = (
    "range",
    "roundrobin",
    "sticky",
    "cooperative-sticky",
    "uniform",
)
"""Assignors ``[group].assignor`` may name: client-side (classic) and server-side (KIP-848)."""
PARTITIONERS: Final = ("round-robin", "key-hash", "explicit")
ZOOKEEPER_ENSEMBLE_SIZES: Final = (1, 3, 5)
INT32_MAX: Final = 2**31 - 1
MAX_TIME_SCALE: Final = 10.0
"""Largest ``time_scale``: a run at most ten times slower than Kafka's own time."""

# ---- size bounds: what one run (an embedded ZooKeeper and Ray actors for the
# brokers, the producer and the consumer hosts) can hold. Validation checks each
# before it builds anything proportional to the size (member names, the plan).
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
MAX_TIMELINE_ENTRIES: Final = 100_000
"""Most ``[[timeline]]`` entries in a file."""
MAX_PLANNED_STEPS: Final = 1_000_000
"""Most steps the timeline expands to (one per entry, per member of a burst or rolling restart,
per return or restart, and per member an action names): the orchestrator schedules, and the
manifest lists, every one."""
ZK_MIN_SESSION_TIMEOUT_MS: Final = 2
"""The least session timeout ZooKeeper grants: 2 ticks of at least 1 ms
(``zk_registry.server.tick_time_for``); the run requests the *scaled* timeout."""

_NAME_RE = re.compile(r"[A-Za-z0-9._-]+")
_MEMBER_RE = re.compile(r"c-(0|[1-9][0-9]*)")


def member_name(index: int) -> str:
    """The name of the ``index``-th member created (``c-0``, ``c-1``, ...)."""
    return f"c-{index}"


# --------------------------------------------------------------------------- errors


class ScenarioError(ValueError):
    """An invalid scenario. ``str()`` is one line naming the offending key.

    Attributes:
        source: the file (or source name) the scenario came from.
        key: the offending key as written in messages, e.g. ``[group].consumers``.
    """

    def __init__(self, source: str, key: str, message: str) -> None:
        line = f"scenario {source}: {message}".replace("\r", " ").replace("\n", " ")
        super().__init__(line)
        self.source = source
        self.key = key


def _show(value: object) -> str:
    """A one-line rendering of a TOML value for error messages."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        text = value if len(value) <= 60 else value[:57] + "..."
        return json.dumps(text, ensure_ascii=False)
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return f"a {type(value).__name__}"


def _hint(word: str, candidates: Iterable[str], render: Callable[[str], str]) -> str:
    """A did-you-mean suffix: the closest candidate, or one that extends ``word``."""
    pool = list(candidates)
    close = difflib.get_close_matches(word, pool, n=1, cutoff=0.6)
    if not close and len(word) >= 3:
        close = [c for c in pool if c.startswith(word) or word.startswith(c)][:1]
    return f"; did you mean {render(close[0])}?" if close else ""


# --------------------------------------------------------------------------- Kafka configs

ConfigKind = Literal["int", "bool", "str", "list"]
DefaultFn = Callable[[Callable[[str], KafkaValue]], KafkaValue]


@dataclass(frozen=True)
class KafkaKeySpec:
    """One Kafka config the scenario may set.

    Attributes:
        name: the Kafka name.
        kind: ``int``, ``bool``, ``str``, or ``list`` (a comma-separated
            string, Kafka's LIST type as written in a properties file).
        default: Kafka's default; a callable receives a lookup of the other
            *effective* values, for defaults defined by another key.
        protocol_defaults: a different default for some generations.
        minimum: smallest allowed int.
        maximum: largest allowed int.
        choices: allowed values of a ``str``, or of each item of a ``list``.
        used_by: which side and generation reads it.
        source: where the default was read.
    """

    name: str
    kind: ConfigKind
    default: KafkaValue | DefaultFn
    protocol_defaults: Mapping[str, KafkaValue] = field(default_factory=dict)
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] | None = None
    used_by: str = ""
    source: str = ""


def _same_as(other: str) -> DefaultFn:
    def default(lookup: Callable[[str], KafkaValue]) -> KafkaValue:
        return lookup(other)

    return default


def _dual_commit_default(lookup: Callable[[str], KafkaValue]) -> KafkaValue:
    return lookup("offsets.storage") == "kafka"


_LEGACY = "legacy consumer (0.8.2)"
_BROKER = "broker (0.8.2)"
_CLASSIC = "classic client"
_CLASSIC_GC = "group coordinator, classic groups"
_KIP848 = "group coordinator, KIP-848 groups"
_SRC_CC082 = "K@0.8.2.2 consumer/ConsumerConfig.scala; kafka-protocols.md A3"
_SRC_ZK082 = "K@0.8.2.2 utils/ZkUtils.scala ZKConfig; kafka-protocols.md A3"
_SRC_KC082 = "K@0.8.2.2 server/KafkaConfig.scala; kafka-protocols.md A3"
_SRC_CC39 = "K@3.9 clients/.../consumer/ConsumerConfig.java; kafka-protocols.md B6"
_SRC_GC39 = "K@3.9 GroupCoordinatorConfig.java; kafka-protocols.md B6"
_SRC_C6 = "K@trunk GroupCoordinatorConfig.java; kafka-protocols.md C6"

_CLASSIC_ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky")

_SPECS: tuple[KafkaKeySpec, ...] = (
    # ---- legacy consumer, K@0.8.2.2 (A3)
    # minimum 1: the 0.8 consumer fails at start after 0 attempts (its config check raises).
    KafkaKeySpec("rebalance.max.retries", "int", 4, minimum=1, used_by=_LEGACY, source=_SRC_CC082),
    KafkaKeySpec(
        "rebalance.backoff.ms",
        "int",
        _same_as("zookeeper.sync.time.ms"),
        minimum=0,
        used_by=_LEGACY,
        source=_SRC_CC082 + " (default: zookeeper.sync.time.ms)",
    ),
    KafkaKeySpec(
        "zookeeper.session.timeout.ms",
        "int",
        6000,
        minimum=1,
        used_by=_LEGACY + " and " + _BROKER,
        source=_SRC_ZK082,
    ),
    KafkaKeySpec(
        "zookeeper.connection.timeout.ms",
        "int",
        _same_as("zookeeper.session.timeout.ms"),
        minimum=1,
        used_by=_LEGACY + " and " + _BROKER,
        source=_SRC_ZK082 + " (default: zookeeper.session.timeout.ms)",
    ),
    KafkaKeySpec(
        "zookeeper.sync.time.ms",
        "int",
        2000,
        minimum=0,
        used_by=_LEGACY + " and " + _BROKER,
        source=_SRC_ZK082,
    ),
    KafkaKeySpec("auto.commit.enable", "bool", True, used_by=_LEGACY, source=_SRC_CC082),
    KafkaKeySpec(
        "auto.commit.interval.ms",
        "int",
        60000,
        # The classic client shares the name with a 5 s default (ConsumerConfig.java).
        protocol_defaults={"classic": 5000, "consumer": 5000},
        minimum=1,
        used_by=_LEGACY + " and " + _CLASSIC,
        source=_SRC_CC082 + "; K@3.9 ConsumerConfig.java for classic/consumer (5000)",
    ),
    KafkaKeySpec("consumer.timeout.ms", "int", -1, minimum=-1, used_by=_LEGACY, source=_SRC_CC082),
    KafkaKeySpec(
        "auto.offset.reset",
        "str",
        "largest",
        # The legacy consumer spells it smallest/largest, the newer clients
        # earliest/latest; either spelling is accepted and each generation reads
        # it in its own (emulator choice: one key for both generations).
        protocol_defaults={"classic": "latest", "consumer": "latest"},
        choices=("smallest", "largest", "earliest", "latest"),
        used_by=_LEGACY + " and " + _CLASSIC,
        source=_SRC_CC082 + "; K@3.9 ConsumerConfig.java (latest)",
    ),
    KafkaKeySpec(
        "partition.assignment.strategy",
        "list",
        "range",
        protocol_defaults={"classic": "range,cooperative-sticky"},
        choices=_CLASSIC_ASSIGNORS,
        used_by=_LEGACY + " and " + _CLASSIC,
        source=_SRC_CC082 + " (legacy: anything but roundrobin is range); "
        "K@3.0+ ConsumerConfig.java (classic: [range, cooperative-sticky]; B6)",
    ),
    KafkaKeySpec(
        "offsets.storage",
        "str",
        "zookeeper",
        choices=("zookeeper", "kafka"),
        used_by=_LEGACY,
        source=_SRC_CC082,
    ),
    KafkaKeySpec(
        "dual.commit.enabled",
        "bool",
        _dual_commit_default,
        used_by=_LEGACY,
        source=_SRC_CC082 + " (default: offsets.storage == kafka)",
    ),
    KafkaKeySpec(
        "queued.max.message.chunks", "int", 2, minimum=1, used_by=_LEGACY, source=_SRC_CC082
    ),
    KafkaKeySpec(
        "fetch.message.max.bytes", "int", 1048576, minimum=1, used_by=_LEGACY, source=_SRC_CC082
    ),
    KafkaKeySpec(
        "refresh.leader.backoff.ms", "int", 200, minimum=0, used_by=_LEGACY, source=_SRC_CC082
    ),
    # How long a broker holds a fetch that finds no data (fetch.min.bytes = 1).
    KafkaKeySpec("fetch.wait.max.ms", "int", 100, minimum=0, used_by=_LEGACY, source=_SRC_CC082),
    KafkaKeySpec(
        "offsets.commit.max.retries", "int", 5, minimum=0, used_by=_LEGACY, source=_SRC_CC082
    ),
    # ---- broker, K@0.8.2.2 (A3, A8)
    KafkaKeySpec("auto.leader.rebalance.enable", "bool", True, used_by=_BROKER, source=_SRC_KC082),
    KafkaKeySpec(
        "leader.imbalance.per.broker.percentage",
        "int",
        10,
        minimum=0,
        maximum=100,
        used_by=_BROKER,
        source=_SRC_KC082,
    ),
    KafkaKeySpec(
        "leader.imbalance.check.interval.seconds",
        "int",
        300,
        minimum=1,
        used_by=_BROKER,
        source=_SRC_KC082,
    ),
    KafkaKeySpec(
        "unclean.leader.election.enable", "bool", True, used_by=_BROKER, source=_SRC_KC082
    ),
    KafkaKeySpec(
        "replica.lag.time.max.ms", "int", 10000, minimum=1, used_by=_BROKER, source=_SRC_KC082
    ),
    KafkaKeySpec(
        "replica.lag.max.messages", "int", 4000, minimum=0, used_by=_BROKER, source=_SRC_KC082
    ),
    KafkaKeySpec(
        "controller.socket.timeout.ms", "int", 30000, minimum=1, used_by=_BROKER, source=_SRC_KC082
    ),
    KafkaKeySpec("controlled.shutdown.enable", "bool", True, used_by=_BROKER, source=_SRC_KC082),
    KafkaKeySpec(
        "controlled.shutdown.max.retries", "int", 3, minimum=0, used_by=_BROKER, source=_SRC_KC082
    ),
    KafkaKeySpec(
        "controlled.shutdown.retry.backoff.ms",
        "int",
        5000,
        minimum=0,
        used_by=_BROKER,
        source=_SRC_KC082,
    ),
    KafkaKeySpec(
        "offsets.topic.replication.factor",
        "int",
        3,
        minimum=1,
        maximum=32767,
        used_by=_BROKER + " and " + _CLASSIC_GC + " (capped at the live brokers)",
        source="K@0.8.2.2 server/OffsetManager.scala OffsetManagerConfig (a Short, 3); "
        "K@3.9 GroupCoordinatorConfig.java (3)",
    ),
    # ---- classic client, K@3.9 (B6)
    KafkaKeySpec(
        "session.timeout.ms",
        "int",
        45000,
        minimum=1,
        used_by=_CLASSIC,
        source=_SRC_CC39 + " (45000 since 3.0, KIP-735)",
    ),
    KafkaKeySpec(
        "heartbeat.interval.ms", "int", 3000, minimum=1, used_by=_CLASSIC, source=_SRC_CC39
    ),
    KafkaKeySpec(
        "max.poll.interval.ms",
        "int",
        300000,
        minimum=1,
        used_by=_CLASSIC + " and KIP-848 client (rebalance timeout)",
        source=_SRC_CC39,
    ),
    KafkaKeySpec("max.poll.records", "int", 500, minimum=1, used_by=_CLASSIC, source=_SRC_CC39),
    KafkaKeySpec(
        "fetch.max.wait.ms",
        "int",
        500,
        minimum=0,
        used_by=_CLASSIC + " and KIP-848 client",
        source=_SRC_CC39,
    ),
    KafkaKeySpec(
        "request.timeout.ms",
        "int",
        30000,
        minimum=1,  # Kafka accepts 0; the emulated clients need a positive timeout
        used_by=_CLASSIC,
        source="K@3.9 ConsumerConfig.java (30000 since 2.0, KAFKA-7050; B6 quotes 305000 "
        "for 0.10.1.0)",
    ),
    KafkaKeySpec(
        "enable.auto.commit",
        "bool",
        True,
        used_by=_CLASSIC + " and KIP-848 client",
        source="K@3.9 ConsumerConfig.java",
    ),
    # ---- group coordinator, classic groups, K@3.9 (B6)
    KafkaKeySpec(
        "group.min.session.timeout.ms",
        "int",
        6000,
        minimum=0,
        used_by=_CLASSIC_GC,
        source=_SRC_GC39,
    ),
    KafkaKeySpec(
        "group.max.session.timeout.ms",
        "int",
        1800000,
        minimum=0,
        used_by=_CLASSIC_GC,
        source=_SRC_GC39 + " (1800000 since 2.3)",
    ),
    KafkaKeySpec(
        "group.initial.rebalance.delay.ms",
        "int",
        3000,
        minimum=0,
        used_by=_CLASSIC_GC,
        source=_SRC_GC39,
    ),
    KafkaKeySpec(
        "group.max.size", "int", INT32_MAX, minimum=1, used_by=_CLASSIC_GC, source=_SRC_GC39
    ),
    # ---- group coordinator, KIP-848 groups, K@trunk (C6)
    KafkaKeySpec(
        "group.consumer.assignors",
        "list",
        "uniform,range",
        choices=("uniform", "range"),
        used_by=_KIP848,
        source=_SRC_C6 + " (class names in Kafka; short names here)",
    ),
    KafkaKeySpec(
        "group.consumer.session.timeout.ms",
        "int",
        45000,
        minimum=1,
        used_by=_KIP848,
        source=_SRC_C6,
    ),
    KafkaKeySpec(
        "group.consumer.min.session.timeout.ms",
        "int",
        45000,
        minimum=1,
        used_by=_KIP848,
        source=_SRC_C6,
    ),
    KafkaKeySpec(
        "group.consumer.max.session.timeout.ms",
        "int",
        60000,
        minimum=1,
        used_by=_KIP848,
        source=_SRC_C6,
    ),
    KafkaKeySpec(
        "group.consumer.heartbeat.interval.ms",
        "int",
        5000,
        minimum=1,
        used_by=_KIP848,
        source=_SRC_C6,
    ),
    KafkaKeySpec(
        "group.consumer.min.heartbeat.interval.ms",
        "int",
        5000,
        minimum=1,
        used_by=_KIP848,
        source=_SRC_C6,
    ),
    KafkaKeySpec(
        "group.consumer.max.heartbeat.interval.ms",
        "int",
        15000,
        minimum=1,
        used_by=_KIP848,
        source=_SRC_C6,
    ),
    KafkaKeySpec(
        "group.consumer.max.size", "int", INT32_MAX, minimum=1, used_by=_KIP848, source=_SRC_C6
    ),
    KafkaKeySpec(
        "group.consumer.assignment.interval.ms",
        "int",
        0,
        minimum=0,
        used_by=_KIP848,
        source="K@4.3 GroupCoordinatorConfig.java: new in 4.3 with default 1000, which "
        "kafka_version >= 4.3 applies; 0 = the assignor runs on every heartbeat that sees "
        "a new group epoch (4.0-4.2)",
    ),
    KafkaKeySpec("group.coordinator.threads", "int", 1, minimum=1, used_by=_KIP848, source=_SRC_C6),
    KafkaKeySpec(
        "group.coordinator.append.linger.ms", "int", 10, minimum=0, used_by=_KIP848, source=_SRC_C6
    ),
)

KAFKA_CONFIG_KEYS: Final[Mapping[str, KafkaKeySpec]] = {spec.name: spec for spec in _SPECS}
"""Every Kafka config a scenario may set, by Kafka name."""

# Cross-key rules Kafka enforces at start-up: (left, op, right, where Kafka checks it).
_KAFKA_ORDER_RULES: Final = (
    ("heartbeat.interval.ms", "<", "session.timeout.ms", "clients Heartbeat.java"),
    (
        "group.min.session.timeout.ms",
        "<=",
        "group.max.session.timeout.ms",
        "GroupCoordinator's JoinGroup check: outside [min, max] every join fails",
    ),
    (
        "group.consumer.min.session.timeout.ms",
        "<=",
        "group.consumer.max.session.timeout.ms",
        "GroupCoordinatorConfig.java",
    ),
    (
        "group.consumer.min.session.timeout.ms",
        "<=",
        "group.consumer.session.timeout.ms",
        "GroupCoordinatorConfig.java",
    ),
    (
        "group.consumer.session.timeout.ms",
        "<=",
        "group.consumer.max.session.timeout.ms",
        "GroupCoordinatorConfig.java",
    ),
    (
        "group.consumer.min.heartbeat.interval.ms",
        "<=",
        "group.consumer.max.heartbeat.interval.ms",
        "GroupCoordinatorConfig.java",
    ),
    (
        "group.consumer.min.heartbeat.interval.ms",
        "<=",
        "group.consumer.heartbeat.interval.ms",
        "GroupCoordinatorConfig.java",
    ),
    (
        "group.consumer.heartbeat.interval.ms",
        "<=",
        "group.consumer.max.heartbeat.interval.ms",
        "GroupCoordinatorConfig.java",
    ),
    (
        "group.consumer.heartbeat.interval.ms",
        "<",
        "group.consumer.session.timeout.ms",
        "GroupCoordinatorConfig.java",
    ),
)


def _kafka_int_limit(spec: KafkaKeySpec) -> tuple[int, str]:
    """The largest value of an ``int`` Kafka config a run takes, and why.

    Kafka's own type, a Java int, times included (``max.poll.interval.ms = 2147483647``
    is a common way to say "never"; a timeout longer than the run just never fires). A
    smaller ``spec.maximum`` is checked before this.
    """
    del spec  # every int key, times included: users set max.poll.interval.ms = 2147483647
    return INT32_MAX, "Kafka's int type"


def _kafka_value(name: str, explicit: Mapping[str, KafkaValue], protocol: str) -> KafkaValue:
    spec = KAFKA_CONFIG_KEYS.get(name)
    if spec is None:
        raise KeyError(f"unknown Kafka config {name!r}")
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; expected one of {PROTOCOLS}")
    if name in explicit:
        return explicit[name]
    if protocol in spec.protocol_defaults:
        return spec.protocol_defaults[protocol]
    if callable(spec.default):
        return spec.default(lambda other: _kafka_value(other, explicit, protocol))
    return spec.default


# --------------------------------------------------------------------------- model


@dataclass(frozen=True)
class ClusterSpec:
    """``[cluster]``: brokers and the embedded ZooKeeper ensemble."""

    brokers: int = 3
    zookeeper_ensemble: int = 1


@dataclass(frozen=True)
class TopicSpec:
    """One ``[[topics]]`` entry."""

    name: str
    partitions: int
    replication_factor: int = 1


@dataclass(frozen=True)
class ProducerSpec:
    """``[producer]``: the load, in messages per *emulated* second."""

    rate_per_s: float
    topics: tuple[str, ...]
    partitioner: str = "round-robin"
    batch_size: int = 50
    explicit_partition: int | None = None


@dataclass(frozen=True)
class GroupSpec:
    """``[group]``: the consumer group under test."""

    id: str
    consumers: int
    topics: tuple[str, ...]
    streams_per_consumer: int = 1
    processing_ms_per_message: float = 1.0
    consumers_per_host: int = 50
    static_membership: bool = False
    assignor: str | None = None
    zk_latency_ms: float = 0.0
    manual_commit: str = "none"
    rebalance_listener: str = "none"

    def zk_latency_of(self, member: str, seed: int) -> float:
        """One legacy member's one-way network delay to ZooKeeper, in emulated ms.

        An emulator knob (Kafka has none: it is where the machines are): every
        consumer draws its delay uniformly from ``[0, zk_latency_ms]`` with the
        scenario's seed, so consumers see watch events, and finish their reads,
        at different moments, as consumers on different machines do.
        """
        if self.zk_latency_ms <= 0:
            return 0.0
        return random.Random(f"{seed}/zk-latency/{member}").uniform(0.0, self.zk_latency_ms)


AUTO_COMMIT_KEYS: Final = ("auto.commit.enable", "enable.auto.commit")
"""The auto-commit switch of the 0.8 consumer and of the Java consumer."""

PLACEMENT_ROLES: Final = ("brokers", "producer", "consumer_hosts")
"""The kinds of Ray actor a ``[placement]`` table places."""

_PLACEMENT_RE: Final = re.compile(
    r"default|spread|resource:[A-Za-z0-9_.\-]{1,100}|node:[0-9A-Za-z.:\-]{1,100}"
)


@dataclass(frozen=True)
class PlacementSpec:
    """``[placement]``: which Ray nodes run which actors (an emulator knob; Kafka has none).

    Each role is ``"default"`` (Ray's scheduler decides), ``"spread"`` (Ray's
    SPREAD strategy: across the nodes), ``"resource:NAME"`` (only nodes started
    with the custom resource ``NAME``, as the configs in ``deploy/`` start
    broker and consumer nodes with ``emu_broker`` and ``emu_consumer``) or
    ``"node:IP"`` (the node with that address; Ray gives every node the
    resource ``node:<ip>``).
    """

    brokers: str = "default"
    producer: str = "default"
    consumer_hosts: str = "default"

    def of(self, role: str) -> str:
        """The placement of ``role`` (one of :data:`PLACEMENT_ROLES`)."""
        if role not in PLACEMENT_ROLES:
            raise KeyError(role)
        value: str = getattr(self, role)
        return value

    def resource(self, role: str) -> str | None:
        """The Ray resource ``role``'s actors need, if any (``node:IP`` is one too)."""
        value = self.of(role)
        if value.startswith("resource:"):
            return value[len("resource:") :]
        if value.startswith("node:"):
            return value
        return None


@dataclass(frozen=True)
class TimelineEvent:
    """One ``[[timeline]]`` entry, as written (defaults applied, choices not yet made).

    Attributes:
        at_s: emulated seconds from the start of the run.
        action: one of :data:`TIMELINE_ACTIONS`.
        count: members joining (``join``) or going in a scale-in burst
            (``leave``/``crash`` without ``member``); 1 otherwise.
        member: the member named (``"c-N"`` or ``"random"``), if any.
        index: position in the file, as in error messages (``timeline[index]``).
        members: ``"all"`` or the names listed (``restart``,
            ``network_partition``, ``subscribe``); ``None`` when not given.
        interval_s: the spacing of a burst or rolling restart; ``None``: all at once.
        downtime_s: a restart's time between shutdown and start.
        duration_s: how long a pause, slow-down, partition or quorum loss lasts.
        target: a network partition's target.
        host: the consumer host of a ``host_crash``.
        broker: the broker of a ``broker_crash`` or ``broker_restart``.
        zk_member: the ensemble member of a ``zk_crash`` or ``zk_restart``.
        restart_after_s: a crashed broker's or ZooKeeper member's time down.
        topic: the topic of ``add_partitions``.
        partitions: its new partition count.
        topics: a ``subscribe``'s new subscription.
        processing_ms_per_message: a ``slow`` member's processing cost.
    """

    at_s: float
    action: str
    count: int = 1
    member: str | None = None
    index: int = 0
    members: tuple[str, ...] | Literal["all"] | None = None
    interval_s: float | None = None
    downtime_s: float = 0.0
    duration_s: float | None = None
    target: str | None = None
    host: int | None = None
    broker: int | None = None
    zk_member: int | None = None
    restart_after_s: float | None = None
    topic: str | None = None
    partitions: int | None = None
    topics: tuple[str, ...] = ()
    processing_ms_per_message: float | None = None

    def to_dict(self) -> dict[str, object]:
        """A JSON-able dict: the keys of the first format always, the others when set."""
        out: dict[str, object] = {
            "at_s": self.at_s,
            "action": self.action,
            "count": self.count,
            "member": self.member,
            "index": self.index,
        }
        if self.members is not None:
            out["members"] = self.members if self.members == "all" else list(self.members)
        extra: dict[str, object | None] = {
            "interval_s": self.interval_s,
            "downtime_s": self.downtime_s if self.action == "restart" else None,
            "duration_s": self.duration_s,
            "target": self.target,
            "host": self.host,
            "broker": self.broker,
            "zk_member": self.zk_member,
            "restart_after_s": self.restart_after_s,
            "topic": self.topic,
            "partitions": self.partitions,
            "topics": list(self.topics) if self.topics else None,
            "processing_ms_per_message": self.processing_ms_per_message,
        }
        out.update({k: v for k, v in extra.items() if v is not None})
        return out


@dataclass(frozen=True)
class MembershipChange:
    """One member's arrival (``join``) or departure (``leave``, ``crash``).

    Expanded from the timeline: a host crash is a ``crash`` of each member on
    the host, a restart a ``leave`` and, ``downtime_s`` later, a ``join`` of
    the same name.
    """

    at_s: float
    action: str
    member: str
    event_index: int


@dataclass(frozen=True)
class Scenario:
    """A validated scenario; build it with :func:`parse_scenario` or :func:`load_scenario`.

    Attributes:
        name: the scenario's name.
        description: free text.
        seed: the run's seed.
        duration_s: emulated seconds the run lasts.
        time_scale: wall seconds per emulated second.
        cluster: ``[cluster]``.
        topics: ``[[topics]]`` in file order.
        producer: ``[producer]``.
        group: ``[group]``.
        kafka: the ``[kafka]`` values *as written* (treat as read-only); use
            :meth:`kafka_config` for effective values.
        timeline: ``[[timeline]]`` sorted by time, ties in file order.
        source: where it was read from.
        kafka_version: the Kafka release whose defaults the classic and
            KIP-848 generations use (``session.timeout.ms`` is 10 s up to 2.8,
            45 s from 3.0; B6); default ``3.9``.
    """

    name: str
    description: str
    seed: int
    duration_s: float
    time_scale: float
    cluster: ClusterSpec
    topics: tuple[TopicSpec, ...]
    producer: ProducerSpec
    group: GroupSpec
    kafka: dict[str, KafkaValue] = field(default_factory=dict, hash=False)
    timeline: tuple[TimelineEvent, ...] = ()
    source: str = "<string>"
    kafka_version: str = "3.9"
    placement: PlacementSpec = field(default_factory=PlacementSpec)

    # ---- topics and membership

    def topic(self, name: str) -> TopicSpec:
        """The topic called ``name``.

        Raises:
            KeyError: no such topic.
        """
        for spec in self.topics:
            if spec.name == name:
                return spec
        raise KeyError(name)

    def subscription(self) -> dict[str, int]:
        """Every member's subscription, topic -> numStreams (the A1 ids payload)."""
        return {t: self.group.streams_per_consumer for t in self.group.topics}

    def initial_members(self) -> tuple[str, ...]:
        """The members present at time 0, before any timeline event."""
        return tuple(member_name(i) for i in range(self.group.consumers))

    def membership_plan(self) -> tuple[MembershipChange, ...]:
        """Every arrival and departure, one per member, in the order the run applies them."""
        return _expansion(self).changes

    def action_plan(self) -> tuple[PlannedAction, ...]:
        """Every timeline action expanded and seeded, in the order the run applies them.

        Sorted by ``at_s``, ties in file order (then in the order an entry
        expands: a burst's steps, a rolling restart's members). Membership
        actions are there too (one ``join``/``leave``/``crash``/``restart``
        per member); a ``zk_quorum_loss`` is its ``zk_crash`` and ``zk_restart``
        actions, ``restart_after_s`` a ``broker_restart`` or ``zk_restart``.
        The same scenario (and seed) always gives the same plan.
        """
        return _expansion(self).actions

    def all_members(self) -> tuple[str, ...]:
        """Every member that ever exists during the run, in creation order."""
        return tuple(member_name(i) for i in range(self.member_total))

    @functools.cached_property
    def member_total(self) -> int:
        """How many members ever exist during the run (``len(all_members())``).

        O(timeline) once, then cached: :meth:`host_of` reads it for every member.
        """
        return self.group.consumers + sum(e.count for e in self.timeline if e.action == "join")

    @property
    def host_count(self) -> int:
        """Consumer hosts of the run: ``ceil(len(all_members()) / consumers_per_host)``."""
        return max(1, math.ceil(self.member_total / self.group.consumers_per_host))

    def host_of(self, member: str) -> int:
        """The consumer host of ``member``: its creation index modulo :attr:`host_count`.

        Raises:
            KeyError: no such member in this scenario.
        """
        match = _MEMBER_RE.fullmatch(member)
        if match is None or int(match.group(1)) >= self.member_total:
            raise KeyError(member)
        return int(match.group(1)) % self.host_count

    def member_names_at(self, at_s: float) -> tuple[str, ...]:
        """Members present after every change with ``change.at_s <= at_s``, by creation order."""
        alive = dict.fromkeys(self.initial_members())
        for change in self.membership_plan():
            if change.at_s > at_s:
                break
            if change.action == "join":
                alive[change.member] = None
            else:
                del alive[change.member]
        return tuple(sorted(alive, key=_creation_index))

    # ---- time

    @property
    def wall_duration_s(self) -> float:
        """How long the run takes in wall seconds."""
        return self.duration_s * self.time_scale

    def wall_s(self, emulated_s: float) -> float:
        """Wall seconds for ``emulated_s`` emulated seconds (every duration scales together)."""
        return emulated_s * self.time_scale

    # ---- Kafka configs

    def kafka_config(self, name: str, protocol: str = "zookeeper") -> KafkaValue:
        """The effective value of Kafka config ``name`` for a generation.

        The ``[kafka]`` value if set; otherwise Kafka's default for
        ``protocol``, which may be derived from other effective values
        (``rebalance.backoff.ms`` follows ``zookeeper.sync.time.ms``,
        ``zookeeper.connection.timeout.ms`` follows
        ``zookeeper.session.timeout.ms``, ``dual.commit.enabled`` is
        ``offsets.storage == "kafka"``).

        Args:
            name: a key of :data:`KAFKA_CONFIG_KEYS`.
            protocol: one of :data:`PROTOCOLS`; matters only for keys whose
                default differs between generations.

        Returns:
            The value, typed as the key's kind (``list`` values are strings).

        Raises:
            KeyError: unknown config name.
            ValueError: unknown protocol.
        """
        return _kafka_value(name, self.kafka, protocol)

    def kafka_int(self, name: str, protocol: str = "zookeeper") -> int:
        """:meth:`kafka_config` for an ``int`` key.

        Raises:
            KeyError: unknown config name.
            TypeError: the key is not an integer config.
        """
        value = self.kafka_config(name, protocol)
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"Kafka config {name!r} is not an integer")
        return value

    def kafka_bool(self, name: str, protocol: str = "zookeeper") -> bool:
        """:meth:`kafka_config` for a ``bool`` key.

        Raises:
            KeyError: unknown config name.
            TypeError: the key is not a boolean config.
        """
        value = self.kafka_config(name, protocol)
        if not isinstance(value, bool):
            raise TypeError(f"Kafka config {name!r} is not a boolean")
        return value

    def kafka_str(self, name: str, protocol: str = "zookeeper") -> str:
        """:meth:`kafka_config` for a ``str`` or ``list`` key.

        Raises:
            KeyError: unknown config name.
            TypeError: the key is not a string config.
        """
        value = self.kafka_config(name, protocol)
        if not isinstance(value, str):
            raise TypeError(f"Kafka config {name!r} is not a string")
        return value

    def kafka_list(self, name: str, protocol: str = "zookeeper") -> tuple[str, ...]:
        """A ``list`` key split on commas, as Kafka parses its LIST type."""
        return tuple(item.strip() for item in self.kafka_str(name, protocol).split(","))

    def effective_kafka_config(self, protocol: str = "zookeeper") -> dict[str, KafkaValue]:
        """Every known Kafka config with its effective value for ``protocol``."""
        return {name: self.kafka_config(name, protocol) for name in KAFKA_CONFIG_KEYS}

    # ---- serialisation

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict of the scenario with defaults applied (for the run manifest).

        ``kafka`` holds only the values set in the file; ``kafka_effective``
        holds every known config's effective value per protocol.
        """
        return {
            "name": self.name,
            "description": self.description,
            "source": self.source,
            "seed": self.seed,
            "duration_s": self.duration_s,
            "time_scale": self.time_scale,
            "kafka_version": self.kafka_version,
            "cluster": {
                "brokers": self.cluster.brokers,
                "zookeeper_ensemble": self.cluster.zookeeper_ensemble,
            },
            "topics": [
                {
                    "name": t.name,
                    "partitions": t.partitions,
                    "replication_factor": t.replication_factor,
                }
                for t in self.topics
            ],
            "producer": {
                "rate_per_s": self.producer.rate_per_s,
                "topics": list(self.producer.topics),
                "partitioner": self.producer.partitioner,
                "batch_size": self.producer.batch_size,
                "explicit_partition": self.producer.explicit_partition,
            },
            "group": {
                "id": self.group.id,
                "consumers": self.group.consumers,
                "topics": list(self.group.topics),
                "streams_per_consumer": self.group.streams_per_consumer,
                "processing_ms_per_message": self.group.processing_ms_per_message,
                "consumers_per_host": self.group.consumers_per_host,
                "static_membership": self.group.static_membership,
                "assignor": self.group.assignor,
                "zk_latency_ms": self.group.zk_latency_ms,
                "manual_commit": self.group.manual_commit,
                "rebalance_listener": self.group.rebalance_listener,
            },
            "kafka": dict(sorted(self.kafka.items())),
            "placement": {r: self.placement.of(r) for r in PLACEMENT_ROLES},
            "kafka_effective": {p: self.effective_kafka_config(p) for p in PROTOCOLS},
            "timeline": [e.to_dict() for e in self.timeline],
            "membership_plan": [
                {"at_s": c.at_s, "action": c.action, "member": c.member}
                for c in self.membership_plan()
            ],
            "action_plan": [{"action": a.action, **a.params()} for a in self.action_plan()],
            "host_count": self.host_count,
        }


# --------------------------------------------------------------------------- expansion


def _creation_index(member: str) -> int:
    """The creation index of a member name ``c-N`` (names are checked before)."""
    return int(member.removeprefix("c-"))


def _t(value: float) -> float:
    """A planned time, rounded so that ``at_s + k * interval_s`` prints cleanly."""
    return round(value, 9)


def _step_at(at_s: float, k: int, interval_s: float | None) -> float:
    """The time of step ``k`` of a burst or rolling restart starting at ``at_s``."""
    return _t(_t(at_s) + k * (interval_s or 0.0))


class _TimelineError(Exception):
    """An invalid timeline; ``key`` as in :class:`ScenarioError`, message names it."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True)
class _Expansion:
    actions: tuple[PlannedAction, ...]
    changes: tuple[MembershipChange, ...]


@functools.lru_cache(maxsize=64)
def _expansion(scenario: Scenario) -> _Expansion:
    """The scenario's plan (cached: a scenario is immutable and hashable)."""
    return _Planner(scenario).run()


Step = Callable[[float], None]


class _LiveMembers:
    """The live members by creation index: add, remove and the k-th live one in O(log n).

    A Fenwick tree over the creation indices ``0 .. capacity - 1`` counts the live
    ones, so a seeded random choice or the newest member costs O(log n) instead of
    sorting the live set at every step, and a byte per index lists them in
    creation order at C speed (``bytearray.find``). ``len`` and ``[k]`` make it a
    sequence in creation order, so ``random.Random.choice`` picks from it exactly
    as from the sorted list of names (``seq[randbelow(len(seq))]``).
    """

    def __init__(self, capacity: int, initial: int) -> None:
        self._size = capacity
        self._flags = bytearray(capacity)
        self._flags[:initial] = b"\x01" * initial
        tree = [0] * (capacity + 1)
        tree[1 : initial + 1] = [1] * initial
        for i in range(1, capacity + 1):  # the O(n) Fenwick build
            parent = i + (i & -i)
            if parent <= capacity:
                tree[parent] += tree[i]
        self._tree = tree
        self._count = initial
        self._top = 1 << (capacity.bit_length() - 1) if capacity else 0

    def __len__(self) -> int:
        return self._count

    def __contains__(self, index: int) -> bool:
        return 0 <= index < self._size and self._flags[index] == 1

    def add(self, index: int) -> None:
        if not self._flags[index]:
            self._flags[index] = 1
            self._count += 1
            self._update(index, 1)

    def remove(self, index: int) -> None:
        if self._flags[index]:
            self._flags[index] = 0
            self._count -= 1
            self._update(index, -1)

    def _update(self, index: int, delta: int) -> None:
        i, tree, size = index + 1, self._tree, self._size
        while i <= size:
            tree[i] += delta
            i += i & -i

    def __getitem__(self, k: int) -> str:
        """The name of the ``k``-th live member in creation order (negative: from the newest)."""
        if k < 0:
            k += self._count
        if not 0 <= k < self._count:
            raise IndexError(k)
        pos, rank, step, tree, size = 0, k + 1, self._top, self._tree, self._size
        while step:
            nxt = pos + step
            if nxt <= size and tree[nxt] < rank:
                pos = nxt
                rank -= tree[nxt]
            step >>= 1
        return member_name(pos)  # tree position pos + 1 is creation index pos

    def names(self) -> Iterator[str]:
        """Every live member's name, in creation order."""
        flags = self._flags
        index = flags.find(1)
        while index >= 0:
            yield member_name(index)
            index = flags.find(1, index + 1)

    def names_on(self, host: int, hosts: int) -> Iterator[str]:
        """The live members on consumer ``host`` (creation index ``host`` modulo ``hosts``)."""
        flags = self._flags
        for index in range(host, self._size, hosts):
            if flags[index]:
                yield member_name(index)


class _Planner:
    """Expands the timeline in time order, making every seeded choice and checking it.

    A discrete-event walk: each entry is a step at ``(at_s, index)``; a step may
    schedule later steps of the same entry (a burst's next member, a restart's
    return, a crashed broker's restart). Steps run in ``(time, file index,
    order scheduled)`` order, each against the state left by the ones before.

    Raises (from :meth:`run`):
        _TimelineError: the timeline is inconsistent (a dead member named, a
            broker crashed twice, an action ending after ``duration_s``, ...).
    """

    def __init__(self, scenario: Scenario) -> None:
        self.sc = scenario
        self.alive: set[str] = set(scenario.initial_members())
        # The same members, by creation index, for the k-th in creation order.
        self.live_set = _LiveMembers(scenario.member_total, scenario.group.consumers)
        self.created: set[str] = set(self.alive)
        self.gone: dict[str, str] = {}  # name -> why it is absent ("it left at 3.0 s")
        self.dead_hosts: dict[int, float] = {}
        self.brokers_down: dict[int, float] = {}
        self.zk_down: dict[int, float] = {}
        self.partitions = {t.name: t.partitions for t in scenario.topics}
        self.replication = {t.name: t.replication_factor for t in scenario.topics}
        self.partition_total = sum(self.partitions.values())
        self.replica_total = sum(t.partitions * t.replication_factor for t in scenario.topics)
        self.host_count = scenario.host_count
        self.actions: list[PlannedAction] = []
        self.changes: list[MembershipChange] = []
        self.queue: list[tuple[float, int, int, Step]] = []
        self.seq = 0
        self.steps = 0  # toward MAX_PLANNED_STEPS: steps scheduled, members named
        self.handlers: dict[str, Callable[[TimelineEvent, float], None]] = {
            "join": self.join,
            "leave": self.depart,
            "crash": self.depart,
            "restart": self.restart,
            "pause": self.timed_member_fault,
            "slow": self.timed_member_fault,
            "network_partition": self.network_partition,
            "host_crash": self.host_crash,
            "broker_crash": self.node_crash,
            "broker_restart": self.node_restart,
            "zk_crash": self.node_crash,
            "zk_restart": self.node_restart,
            "zk_quorum_loss": self.quorum_loss,
            "add_partitions": self.add_partitions,
            "subscribe": self.subscribe,
        }
        # Joins are the only steps that create members, and their times are
        # fixed by the file: name every future member up front, for messages.
        joins = sorted(
            (_step_at(e.at_s, k, e.interval_s), e.index, k)
            for e in scenario.timeline
            if e.action == "join"
            for k in range(e.count)
        )
        first = scenario.group.consumers
        self.join_names = {
            (index, k): member_name(first + n) for n, (_, index, k) in enumerate(joins)
        }
        self.join_times = {member_name(first + n): at for n, (at, _, _) in enumerate(joins)}

    # ---- driving

    def run(self) -> _Expansion:
        for event in self.sc.timeline:
            self.schedule(event, event.at_s, self.handler(event))
        while self.queue:
            at, _, _, step = heapq.heappop(self.queue)
            step(at)
        return _Expansion(tuple(self.actions), tuple(self.changes))

    def schedule(self, event: TimelineEvent, at: float, step: Step) -> None:
        self.seq += 1
        self.count_steps(event, 1)
        heapq.heappush(self.queue, (_t(at), event.index, self.seq, step))

    def handler(self, event: TimelineEvent) -> Step:
        handle = self.handlers[event.action]
        return lambda at: handle(event, at)

    def count_steps(self, event: TimelineEvent, n: int) -> None:
        """Add ``n`` steps of ``event`` to the plan's size; fail past :data:`MAX_PLANNED_STEPS`."""
        self.steps += n
        if self.steps > MAX_PLANNED_STEPS:
            if event.members is not None:
                name = "members"
            elif event.action in ("join", "leave", "crash") and event.member is None:
                name = "count"
            else:
                name = "action"
            self.fail(
                event,
                name,
                f"the timeline expands to more than {MAX_PLANNED_STEPS} planned steps (one per "
                "entry, per member of a burst or rolling restart and per member an action "
                "names), the most a run's orchestrator schedules",
            )

    # ---- helpers

    def key(self, event: TimelineEvent, name: str) -> str:
        return f"timeline[{event.index}].{name}"

    def fail(self, event: TimelineEvent, name: str, message: str) -> NoReturn:
        key = self.key(event, name)
        raise _TimelineError(key, f"{key}: {message}")

    def plan(self, event: TimelineEvent, at: float, action: str, **fields: Any) -> None:
        members = fields.get("members")
        if members is not None and len(members) > 1:
            self.count_steps(event, len(members) - 1)
        self.actions.append(PlannedAction(_t(at), action, event_index=event.index, **fields))

    def change(self, event: TimelineEvent, at: float, action: str, member: str) -> None:
        self.changes.append(MembershipChange(_t(at), action, member, event.index))

    def rng(self, event: TimelineEvent) -> random.Random:
        return random.Random(f"{self.sc.seed}/timeline/{event.index}")

    def within_run(self, event: TimelineEvent, at: float, name: str, what: str) -> None:
        if _t(at) > self.sc.duration_s:
            self.fail(
                event,
                name,
                f"{what} would be at {_t(at)} s, after duration_s ({self.sc.duration_s})",
            )

    def absent(self, member: str, at: float) -> str:
        """Why ``member`` is not alive at ``at``: gone, joining later, or never there."""
        base = f"no member {_show(member)} exists at {_t(at)} s"
        if member in self.gone:
            return f"{base} ({self.gone[member]})"
        if _MEMBER_RE.fullmatch(member) is None:
            return f"{base} (members are named c-0, c-1, ... in creation order)"
        if member in self.join_times and member not in self.created:
            return f"{base} (it joins at {self.join_times[member]} s)"
        return base

    def require_alive(self, event: TimelineEvent, name: str, member: str, at: float) -> None:
        if member not in self.alive:
            self.fail(event, name, self.absent(member, at))

    def one_member(self, event: TimelineEvent, at: float) -> str:
        """The ``member`` of ``event`` at ``at``: a live name, or a seeded random choice."""
        assert event.member is not None
        if event.member == "random":
            if not self.live_set:
                self.fail(event, "member", f"no member is alive at {_t(at)} s to choose at random")
            return self.rng(event).choice(self.live_set)
        self.require_alive(event, "member", event.member, at)
        return event.member

    def some_members(self, event: TimelineEvent, at: float) -> tuple[str, ...]:
        """``member`` or ``members`` of ``event`` at ``at``, alive, in creation order."""
        if event.member is not None:
            return (self.one_member(event, at),)
        if event.members is None or event.members == "all":
            live = tuple(self.live_set.names())
            if not live:
                self.fail(event, "members", f"no member is alive at {_t(at)} s")
            return live
        for member in event.members:
            self.require_alive(event, "members", member, at)
        return tuple(sorted(event.members, key=_creation_index))

    def check_host(self, event: TimelineEvent, name: str, member: str, at: float) -> None:
        host = _creation_index(member) % self.host_count  # Scenario.host_of, in O(1)
        if host in self.dead_hosts:
            self.fail(
                event,
                name,
                f"{member} would start at {_t(at)} s on consumer host {host}, which crashed "
                f"at {self.dead_hosts[host]} s (members go to hosts by creation order)",
            )

    def arrive(self, event: TimelineEvent, at: float, member: str) -> None:
        self.alive.add(member)
        self.live_set.add(_creation_index(member))
        self.created.add(member)
        self.gone.pop(member, None)
        self.change(event, at, "join", member)

    def go(self, event: TimelineEvent, at: float, action: str, member: str, why: str) -> None:
        self.alive.remove(member)
        self.live_set.remove(_creation_index(member))
        self.gone[member] = why
        self.change(event, at, action, member)

    # ---- membership

    def join(self, event: TimelineEvent, at: float) -> None:
        for k in range(event.count):
            step_at = _step_at(at, k, event.interval_s)
            self.within_run(event, step_at, "interval_s", f"join {k + 1} of {event.count}")
            self.schedule(event, step_at, functools.partial(self.join_one, event, k))

    def join_one(self, event: TimelineEvent, k: int, at: float) -> None:
        member = self.join_names[(event.index, k)]
        self.check_host(event, "at_s", member, at)
        self.arrive(event, at, member)
        self.plan(event, at, "join", members=(member,))

    def depart(self, event: TimelineEvent, at: float) -> None:
        if event.member is not None:
            self.depart_one(event, self.one_member(event, at), at)
            return
        for k in range(event.count):
            step_at = _step_at(at, k, event.interval_s)
            what = f"{event.action} {k + 1} of {event.count}"
            self.within_run(event, step_at, "interval_s", what)
            self.schedule(event, step_at, functools.partial(self.depart_newest, event, k))

    def depart_newest(self, event: TimelineEvent, k: int, at: float) -> None:
        if not self.live_set:
            self.fail(
                event,
                "count",
                f"no member is left at {_t(at)} s for {event.action} {k + 1} of {event.count}",
            )
        self.depart_one(event, self.live_set[-1], at)

    def depart_one(self, event: TimelineEvent, member: str, at: float) -> None:
        verb = "left" if event.action == "leave" else "crashed"
        self.go(event, at, event.action, member, f"it {verb} at {_t(at)} s")
        self.plan(event, at, event.action, members=(member,))

    def restart(self, event: TimelineEvent, at: float) -> None:
        members = self.some_members(event, at)
        for k, member in enumerate(members):
            step_at = _step_at(at, k, event.interval_s)
            self.within_run(event, step_at, "interval_s", f"the restart of {member}")
            back = step_at + event.downtime_s
            self.within_run(event, back, "downtime_s", f"the return of {member}")
            self.schedule(event, step_at, functools.partial(self.restart_one, event, member))

    def restart_one(self, event: TimelineEvent, member: str, at: float) -> None:
        self.require_alive(event, "member" if event.member else "members", member, at)
        back = _t(at + event.downtime_s)
        self.go(event, at, "leave", member, f"it is restarting, down from {_t(at)} to {back} s")
        self.plan(event, at, "restart", members=(member,), downtime_s=event.downtime_s)
        self.schedule(event, back, functools.partial(self.restart_back, event, member))

    def restart_back(self, event: TimelineEvent, member: str, at: float) -> None:
        self.check_host(event, "downtime_s", member, at)
        self.arrive(event, at, member)

    # ---- member faults

    def fault_end(self, event: TimelineEvent, at: float) -> float:
        assert event.duration_s is not None
        end = at + event.duration_s
        self.within_run(event, end, "duration_s", f"the end of the {event.action}")
        return end

    def timed_member_fault(self, event: TimelineEvent, at: float) -> None:
        member = self.one_member(event, at)
        self.fault_end(event, at)
        self.plan(
            event,
            at,
            event.action,
            members=(member,),
            duration_s=event.duration_s,
            processing_ms_per_message=event.processing_ms_per_message,
        )

    def network_partition(self, event: TimelineEvent, at: float) -> None:
        members = self.some_members(event, at)
        self.fault_end(event, at)
        self.plan(
            event,
            at,
            "network_partition",
            members=members,
            target=event.target,
            duration_s=event.duration_s,
        )

    def host_crash(self, event: TimelineEvent, at: float) -> None:
        host = event.host
        assert host is not None
        if host >= self.host_count:
            key = self.key(event, "host")
            raise _TimelineError(
                key,
                f"{key} must be an integer between 0 and {self.host_count - 1} (consumer "
                f"hosts minus one: ceil(members / [group].consumers_per_host)), got {host}",
            )
        if host in self.dead_hosts:
            self.fail(
                event,
                "host",
                f"consumer host {host} is already down at {_t(at)} s "
                f"(it crashed at {self.dead_hosts[host]} s)",
            )
        self.dead_hosts[host] = _t(at)
        victims = tuple(self.live_set.names_on(host, self.host_count))
        for member in victims:
            why = f"it crashed with consumer host {host} at {_t(at)} s"
            self.go(event, at, "crash", member, why)
        self.plan(event, at, "host_crash", host=host, members=victims)

    # ---- brokers and ZooKeeper

    def node(self, event: TimelineEvent) -> tuple[str, str, int, dict[int, float]]:
        """(key name, display name, id, down-table) of a broker or ZooKeeper action."""
        if event.action.startswith("broker"):
            assert event.broker is not None
            return "broker", "broker", event.broker, self.brokers_down
        assert event.zk_member is not None
        return "zk_member", "ZooKeeper member", event.zk_member, self.zk_down

    def node_crash(self, event: TimelineEvent, at: float) -> None:
        name, shown, ident, down = self.node(event)
        if ident in down:
            self.fail(
                event,
                name,
                f"{shown} {ident} is already down at {_t(at)} s (it crashed at {down[ident]} s)",
            )
        down[ident] = _t(at)
        self.plan(event, at, event.action, **{name: ident})
        if event.restart_after_s is not None:
            back = at + event.restart_after_s
            self.within_run(event, back, "restart_after_s", f"the restart of {shown} {ident}")
            self.schedule(event, back, functools.partial(self.node_back, event, "restart_after_s"))

    def node_restart(self, event: TimelineEvent, at: float) -> None:
        self.node_back(event, self.node(event)[0], at)

    def node_back(self, event: TimelineEvent, key_name: str, at: float) -> None:
        name, shown, ident, down = self.node(event)
        if ident not in down:
            self.fail(event, key_name, f"{shown} {ident} is not down at {_t(at)} s")
        del down[ident]
        action = "broker_restart" if name == "broker" else "zk_restart"
        self.plan(event, at, action, **{name: ident})

    def quorum_loss(self, event: TimelineEvent, at: float) -> None:
        size = self.sc.cluster.zookeeper_ensemble
        majority = size // 2 + 1
        live = [m for m in range(size) if m not in self.zk_down]
        if len(live) < majority:
            self.fail(
                event,
                "action",
                f"only {len(live)} of {size} ZooKeeper members are up at {_t(at)} s, "
                f"fewer than the majority ({majority}) a quorum loss crashes",
            )
        chosen = sorted(self.rng(event).sample(live, majority))
        end = self.fault_end(event, at)
        for zk in chosen:
            self.zk_down[zk] = _t(at)
            self.plan(event, at, "zk_crash", zk_member=zk)
        self.schedule(event, end, functools.partial(self.quorum_back, event, tuple(chosen)))

    def quorum_back(self, event: TimelineEvent, chosen: tuple[int, ...], at: float) -> None:
        for zk in chosen:
            if zk not in self.zk_down:
                self.fail(event, "duration_s", f"ZooKeeper member {zk} is not down at {_t(at)} s")
            del self.zk_down[zk]
            self.plan(event, at, "zk_restart", zk_member=zk)

    # ---- topics

    def add_partitions(self, event: TimelineEvent, at: float) -> None:
        assert event.topic is not None and event.partitions is not None
        current = self.partitions[event.topic]
        key = self.key(event, "partitions")
        if event.partitions <= current:
            raise _TimelineError(
                key,
                f"{key} must be larger than the {current} partitions {_show(event.topic)} "
                f"has at {_t(at)} s, got {event.partitions}",
            )
        rf = self.replication[event.topic]
        others = self.partition_total - current
        other_replicas = self.replica_total - current * rf
        limit, note = _tighter(
            (
                MAX_PARTITIONS_TOTAL - others,
                f"at most {MAX_PARTITIONS_TOTAL} partitions over all topics; the others "
                f"have {others} at {_t(at)} s",
            ),
            (
                (MAX_REPLICAS_TOTAL - other_replicas) // rf,
                f"at most {MAX_REPLICAS_TOTAL} replicas over all topics, at replication "
                f"factor {rf}; the others have {other_replicas} at {_t(at)} s",
            ),
        )
        if event.partitions > limit:
            requirement = _int_requirement(None, limit, note)
            raise _TimelineError(key, f"{key} must be {requirement}, got {event.partitions}")
        self.partition_total = others + event.partitions
        self.replica_total = other_replicas + event.partitions * rf
        self.partitions[event.topic] = event.partitions
        self.plan(event, at, "add_partitions", topic=event.topic, partitions=event.partitions)

    def subscribe(self, event: TimelineEvent, at: float) -> None:
        members = self.some_members(event, at)
        self.plan(event, at, "subscribe", members=members, topics=event.topics)


# --------------------------------------------------------------------------- parsing


class _Parser:
    """Reads one TOML document into a :class:`Scenario`, failing on the first error."""

    def __init__(self, source: str) -> None:
        self.source = source

    # ---- failures

    def fail(self, key: str, message: str) -> NoReturn:
        raise ScenarioError(self.source, key, message)

    def must(self, key: str, requirement: str, got: object) -> NoReturn:
        self.fail(key, f"{key} must be {requirement}, got {_show(got)}")

    def check_keys(
        self, table: Mapping[str, object], allowed: Sequence[str], render: Callable[[str], str]
    ) -> None:
        for key in table:
            if key not in allowed:
                hint = _hint(key, allowed, render)
                self.fail(render(key), f"{render(key)}: unknown key{hint}")

    # ---- typed getters

    def table(self, doc: Mapping[str, object], key: str) -> dict[str, object]:
        value = doc.get(key, {})
        if not isinstance(value, dict):
            self.must(f"[{key}]", "a table", value)
        return value

    def integer(
        self,
        table: Mapping[str, object],
        key: str,
        shown: str,
        default: int | None,
        minimum: int | None = None,
        maximum: int | None = None,
        bound_note: str = "",
        limit: int | None = None,
        limit_note: str = "",
    ) -> int:
        """An integer in ``[minimum, maximum]``, then at most ``limit`` (a size bound, its reason
        in ``limit_note``: "must be an integer <= 1000 (why), got 5000")."""
        if key not in table:
            if default is None:
                self.fail(shown, f"{shown} is required")
            return default
        value = table[key]
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or (minimum is not None and value < minimum)
            or (maximum is not None and value > maximum)
        ):
            self.must(shown, _int_requirement(minimum, maximum, bound_note), value)
        if limit is not None and value > limit:
            self.must(shown, _int_requirement(None, limit, limit_note), value)
        return value

    def number(
        self,
        table: Mapping[str, object],
        key: str,
        shown: str,
        default: float | None,
        requirement: str,
        accept: Callable[[float], bool],
        limit: float | None = None,
        limit_note: str = "",
    ) -> float:
        """A finite number ``accept`` takes, then at most ``limit`` (as in :meth:`integer`)."""
        if key not in table:
            if default is None:
                self.fail(shown, f"{shown} is required")
            return default
        value = table[key]
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or not accept(float(value))
        ):
            self.must(shown, requirement, value)
        if limit is not None and value > limit:
            self.must(shown, f"a number <= {_number(limit)} ({limit_note})", value)
        return float(value)

    def string(
        self,
        table: Mapping[str, object],
        key: str,
        shown: str,
        default: str | None,
        pattern: re.Pattern[str] | None = None,
        max_len: int | None = None,
        requirement: str = "a string",
    ) -> str:
        if key not in table:
            if default is None:
                self.fail(shown, f"{shown} is required")
            return default
        value = table[key]
        if (
            not isinstance(value, str)
            or (pattern is not None and pattern.fullmatch(value) is None)
            or (max_len is not None and len(value) > max_len)
        ):
            self.must(shown, requirement, value)
        return value

    def choice(
        self,
        table: Mapping[str, object],
        key: str,
        shown: str,
        default: str | None,
        choices: Sequence[str],
        lookup: Container[str] | None = None,
    ) -> str:
        """One of ``choices`` (``lookup``: the same names, for an O(1) ``in``)."""
        fast = table.get(key)
        if isinstance(fast, str) and fast in (choices if lookup is None else lookup):
            return fast  # the common case, without building the message
        requirement = "one of " + _one_of(choices)
        value = self.string(table, key, shown, default, requirement=requirement)
        if value not in choices:
            hint = _hint(value, choices, json.dumps)
            self.fail(shown, f"{shown} must be {requirement}, got {_show(value)}{hint}")
        return value

    def topic_list(
        self,
        table: Mapping[str, object],
        key: str,
        shown: str,
        known: Sequence[str],
        lookup: Container[str] | None = None,
    ) -> tuple[str, ...]:
        """Declared topics, each once (``lookup``: ``known`` as a set, for an O(1) ``in``)."""
        if key not in table:
            return tuple(known)
        value = table[key]
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            self.must(shown, "a non-empty array of topic names", value)
        names = frozenset(known) if lookup is None else lookup
        seen: set[str] = set()
        for i, name in enumerate(value):
            if name not in names:
                hint = _hint(name, known, json.dumps)
                self.fail(f"{shown}[{i}]", f"{shown}[{i}]: no topic {_show(name)} is defined{hint}")
            if name in seen:
                self.fail(f"{shown}[{i}]", f"{shown}[{i}]: topic {_show(name)} is listed twice")
            seen.add(name)
        return tuple(value)

    # ---- sections

    def parse(self, doc: dict[str, object]) -> Scenario:
        for key, value in doc.items():
            if key not in _TOP_KEYS:
                kind = "key"
                if isinstance(value, dict):
                    kind, key = "section", f"[{key}]"
                elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
                    kind, key = "array of tables", f"[[{key}]]"
                candidates = [_render_top(k) for k in _TOP_KEYS]
                hint = _hint(key, candidates, lambda k: k)
                self.fail(key, f"{key}: unknown {kind}{hint}")
        name = self.string(
            doc,
            "name",
            "name",
            _default_name(self.source),
            _NAME_RE,
            100,
            "a name of letters, digits, '.', '_' or '-' (at most 100)",
        )
        description = self.string(doc, "description", "description", "")
        if len(description) > MAX_DESCRIPTION_CHARS:
            self.must(
                "description",
                f"a string of at most {MAX_DESCRIPTION_CHARS} characters (it goes into every "
                f"run's manifest; this one has {len(description)})",
                description,
            )
        seed = self.integer(doc, "seed", "seed", 0, 0, 2**63 - 1)
        duration_s = self.number(
            doc,
            "duration_s",
            "duration_s",
            60.0,
            "a number > 0",
            lambda x: x > 0,
            MAX_DURATION_S,
            "7 emulated days, the longest run",
        )
        time_scale = self.number(
            doc,
            "time_scale",
            "time_scale",
            1.0,
            f"a number with 0 < time_scale <= {MAX_TIME_SCALE:g}",
            lambda x: 0 < x <= MAX_TIME_SCALE,
        )
        if time_scale < MIN_TIME_SCALE:
            self.must(
                "time_scale",
                f"a number >= {MIN_TIME_SCALE:g} (a Kafka millisecond is then 10 µs of wall "
                "time, the finest an event loop's timers keep)",
                time_scale,
            )
        kafka_version = self.string(
            doc,
            "kafka_version",
            "kafka_version",
            "3.9",
            requirement='a Kafka release like "3.9" or "2.8.2"',
        )
        try:
            parse_kafka_version(kafka_version)
        except ValueError as exc:
            self.fail("kafka_version", f"kafka_version: {exc}")
        cluster = self.cluster(self.table(doc, "cluster"))
        topics = self.topics(doc, cluster)
        topic_names = [t.name for t in topics]
        producer = self.producer(self.table(doc, "producer"), topics)
        group = self.group(self.table(doc, "group"), topic_names, name)
        kafka = self.kafka(self.table(doc, "kafka"), time_scale)
        if group.manual_commit != "none":
            for key in AUTO_COMMIT_KEYS:
                if kafka.get(key) is True:
                    self.fail(
                        "[group].manual_commit",
                        f"[group].manual_commit = {json.dumps(group.manual_commit)} needs "
                        f"auto-commit off, but [kafka].{json.dumps(key)} = true",
                    )
                kafka[key] = False  # the application commits: auto-commit off everywhere
        placement = self.placement(self.table(doc, "placement"))
        timeline = self.timeline(doc, duration_s, cluster, topics, group.consumers)
        self.member_bounds(
            group, group.consumers + sum(e.count for e in timeline if e.action == "join")
        )
        scenario = Scenario(
            name=name,
            description=description,
            seed=seed,
            duration_s=duration_s,
            time_scale=time_scale,
            cluster=cluster,
            topics=topics,
            producer=producer,
            group=group,
            kafka=kafka,
            timeline=timeline,
            source=self.source,
            kafka_version=kafka_version,
            placement=placement,
        )
        try:
            _expansion(scenario)
        except _TimelineError as err:
            self.fail(err.key, str(err))
        return scenario

    def member_bounds(self, group: GroupSpec, members: int) -> None:
        """The bounds that depend on every member of the run (joins included)."""
        fewest_per_host = -(-members // MAX_CONSUMER_HOSTS)
        if group.consumers_per_host < fewest_per_host:
            self.must(
                "[group].consumers_per_host",
                f"an integer >= {fewest_per_host} for the run's {members} members (at most "
                f"{MAX_CONSUMER_HOSTS} consumer hosts, each a Ray actor process)",
                group.consumers_per_host,
            )
        if members * group.streams_per_consumer > MAX_CONSUMER_THREADS:
            self.must(
                "[group].streams_per_consumer",
                _int_requirement(
                    None,
                    MAX_CONSUMER_THREADS // members,
                    f"at most {MAX_CONSUMER_THREADS} consumer threads, members x "
                    f"streams_per_consumer, for the run's {members} members",
                ),
                group.streams_per_consumer,
            )

    def placement(self, table: dict[str, object]) -> PlacementSpec:
        self.check_keys(table, PLACEMENT_ROLES, _in_section("placement"))
        values = {
            role: self.string(
                table,
                role,
                f"[placement].{role}",
                "default",
                pattern=_PLACEMENT_RE,
                requirement='"default", "spread", "resource:NAME" or "node:IP"',
            )
            for role in PLACEMENT_ROLES
        }
        return PlacementSpec(**values)

    def cluster(self, table: dict[str, object]) -> ClusterSpec:
        self.check_keys(table, ("brokers", "zookeeper_ensemble"), _in_section("cluster"))
        brokers = self.integer(
            table,
            "brokers",
            "[cluster].brokers",
            3,
            1,
            limit=MAX_BROKERS,
            limit_note="each broker is a Ray actor process",
        )
        ensemble = self.integer(table, "zookeeper_ensemble", "[cluster].zookeeper_ensemble", 1)
        if ensemble not in ZOOKEEPER_ENSEMBLE_SIZES:
            self.must("[cluster].zookeeper_ensemble", "1, 3 or 5", ensemble)
        return ClusterSpec(brokers=brokers, zookeeper_ensemble=ensemble)

    def topics(self, doc: Mapping[str, object], cluster: ClusterSpec) -> tuple[TopicSpec, ...]:
        if "topics" not in doc:
            self.fail("topics", "topics is required: add at least one [[topics]] table")
        raw = doc["topics"]
        if not isinstance(raw, list) or not raw or not all(isinstance(t, dict) for t in raw):
            self.must("topics", "a non-empty array of tables ([[topics]])", raw)
        if len(raw) > MAX_TOPICS:
            self.fail(
                "topics",
                f"topics: {len(raw)} [[topics]] tables, more than {MAX_TOPICS} (a legacy "
                "member's registration znode lists every topic it subscribes to and must fit "
                "ZooKeeper's 1 MB jute.maxbuffer)",
            )
        specs: list[TopicSpec] = []
        first_seen: dict[str, int] = {}
        partition_total = replica_total = 0
        for i, table in enumerate(raw):
            where = f"topics[{i}]"
            self.check_keys(table, ("name", "partitions", "replication_factor"), _in_array(where))
            name = self.string(
                table,
                "name",
                f"{where}.name",
                None,
                _NAME_RE,
                249,
                "a Kafka topic name: letters, digits, '.', '_' or '-' (at most 249)",
            )
            if name in (".", ".."):
                self.must(f"{where}.name", "a Kafka topic name other than '.' or '..'", name)
            if name in first_seen:
                self.fail(
                    f"{where}.name",
                    f"{where}.name: topic {_show(name)} is defined twice "
                    f"(also topics[{first_seen[name]}])",
                )
            first_seen[name] = i
            limit, note = _tighter(
                (
                    MAX_PARTITIONS_PER_TOPIC,
                    "the topic's znode /brokers/topics/<t> holds its whole assignment, "
                    "within ZooKeeper's 1 MB jute.maxbuffer",
                ),
                (
                    MAX_PARTITIONS_TOTAL - partition_total,
                    f"at most {MAX_PARTITIONS_TOTAL} partitions over all topics, for the "
                    "controller's znodes in the embedded ZooKeeper; the topics before have "
                    f"{partition_total}",
                ),
            )
            partitions = self.integer(
                table, "partitions", f"{where}.partitions", None, 1, limit=limit, limit_note=note
            )
            limit, note = _tighter(
                (
                    MAX_REPLICAS_PER_TOPIC // partitions,
                    f"at most {MAX_REPLICAS_PER_TOPIC} replicas, partitions x "
                    "replication_factor, in the topic's znode /brokers/topics/<t>",
                ),
                (
                    (MAX_REPLICAS_TOTAL - replica_total) // partitions,
                    f"at most {MAX_REPLICAS_TOTAL} replicas over all topics, each a log a "
                    f"broker keeps; the topics before have {replica_total}",
                ),
            )
            rf = self.integer(
                table,
                "replication_factor",
                f"{where}.replication_factor",
                1,
                1,
                cluster.brokers,
                "[cluster].brokers",
                limit=limit,
                limit_note=note,
            )
            partition_total += partitions
            replica_total += partitions * rf
            specs.append(TopicSpec(name=name, partitions=partitions, replication_factor=rf))
        return tuple(specs)

    def producer(self, table: dict[str, object], topics: Sequence[TopicSpec]) -> ProducerSpec:
        self.check_keys(
            table,
            ("rate_per_s", "topics", "partitioner", "batch_size", "explicit_partition"),
            _in_section("producer"),
        )
        rate = self.number(
            table,
            "rate_per_s",
            "[producer].rate_per_s",
            100.0,
            "a number >= 0",
            lambda x: x >= 0,
            MAX_RATE_PER_S,
            "the producer actor partitions every message in Python, about a microsecond each",
        )
        names = self.topic_list(table, "topics", "[producer].topics", [t.name for t in topics])
        partitioner = self.choice(
            table, "partitioner", "[producer].partitioner", "round-robin", PARTITIONERS
        )
        batch = self.integer(
            table,
            "batch_size",
            "[producer].batch_size",
            50,
            1,
            limit=MAX_BATCH_SIZE,
            limit_note="100 MiB of 1 KiB messages in one produce call, 100 x Kafka's "
            "message.max.bytes",
        )
        explicit: int | None = None
        if partitioner == "explicit":
            fewest = min((t for t in topics if t.name in names), key=lambda t: t.partitions)
            explicit = self.integer(
                table,
                "explicit_partition",
                "[producer].explicit_partition",
                None,
                0,
                fewest.partitions - 1,
                f"partitions of {_show(fewest.name)} minus one",
            )
        elif "explicit_partition" in table:
            self.fail(
                "[producer].explicit_partition",
                "[producer].explicit_partition: only allowed with [producer].partitioner = "
                f'"explicit", not {_show(partitioner)}',
            )
        return ProducerSpec(
            rate_per_s=rate,
            topics=names,
            partitioner=partitioner,
            batch_size=batch,
            explicit_partition=explicit,
        )

    def group(
        self, table: dict[str, object], topic_names: Sequence[str], scenario_name: str
    ) -> GroupSpec:
        self.check_keys(
            table,
            (
                "id",
                "consumers",
                "topics",
                "streams_per_consumer",
                "processing_ms_per_message",
                "consumers_per_host",
                "static_membership",
                "assignor",
                "zk_latency_ms",
                "manual_commit",
                "rebalance_listener",
            ),
            _in_section("group"),
        )
        manual = self.choice(
            table, "manual_commit", "[group].manual_commit", "none", MANUAL_COMMIT_MODES
        )
        listener = self.choice(
            table, "rebalance_listener", "[group].rebalance_listener", "none", REBALANCE_LISTENERS
        )
        static = table.get("static_membership", False)
        if not isinstance(static, bool):
            self.must("[group].static_membership", "true or false", static)
        assignor: str | None = None
        if "assignor" in table:
            assignor = self.choice(table, "assignor", "[group].assignor", None, ASSIGNOR_NAMES)
        group_id = self.string(
            table,
            "id",
            "[group].id",
            f"{scenario_name}-group"[:249],
            _NAME_RE,
            249,
            "a group id of letters, digits, '.', '_' or '-' (at most 249)",
        )
        return GroupSpec(
            id=group_id,
            consumers=self.integer(
                table,
                "consumers",
                "[group].consumers",
                1,
                1,
                limit=MAX_MEMBERS,
                limit_note="the most members a run holds, joins included",
            ),
            topics=self.topic_list(table, "topics", "[group].topics", topic_names),
            streams_per_consumer=self.integer(
                table,
                "streams_per_consumer",
                "[group].streams_per_consumer",
                1,
                1,
                limit=MAX_STREAMS_PER_CONSUMER,
                limit_note="each stream is a queue and a thread id of the member",
            ),
            processing_ms_per_message=self.number(
                table,
                "processing_ms_per_message",
                "[group].processing_ms_per_message",
                1.0,
                "a number >= 0",
                lambda x: x >= 0,
                MAX_PROCESSING_MS_PER_MESSAGE,
                "a day per message",
            ),
            consumers_per_host=self.integer(
                table,
                "consumers_per_host",
                "[group].consumers_per_host",
                50,
                1,
                limit=MAX_MEMBERS_PER_HOST,
                limit_note="the members of a host share one actor's event loop",
            ),
            static_membership=static,
            assignor=assignor,
            zk_latency_ms=self.number(
                table,
                "zk_latency_ms",
                "[group].zk_latency_ms",
                0.0,
                "a number of milliseconds between 0 and 10000",
                lambda x: 0 <= x <= 10000,
            ),
            manual_commit=manual,
            rebalance_listener=listener,
        )

    def kafka(self, table: dict[str, object], time_scale: float) -> dict[str, KafkaValue]:
        values: dict[str, KafkaValue] = {}
        for name, value in table.items():
            shown = f"[kafka].{json.dumps(name)}"
            spec = KAFKA_CONFIG_KEYS.get(name)
            if spec is None:
                hint = _hint(name, KAFKA_CONFIG_KEYS, lambda k: f'"{k}"')
                self.fail(shown, f"{shown}: unknown Kafka config{hint}")
            values[name] = self.kafka_value(spec, shown, value)
        for left, op, right, where in _KAFKA_ORDER_RULES:
            if left not in values and right not in values:
                continue
            lv = _kafka_value(left, values, "zookeeper")
            rv = _kafka_value(right, values, "zookeeper")
            assert isinstance(lv, int) and isinstance(rv, int)
            if not (lv < rv if op == "<" else lv <= rv):
                key = left if left in values else right
                shown = f"[kafka].{json.dumps(key)}"
                self.fail(
                    shown,
                    f"{shown}: Kafka requires {left} ({lv}) {op} {right} ({rv}) ({where})",
                )
        self.zookeeper_session(values, time_scale)
        return values

    def zookeeper_session(self, values: Mapping[str, KafkaValue], time_scale: float) -> None:
        """``zookeeper.session.timeout.ms`` x ``time_scale`` must be a timeout ZooKeeper grants.

        The run requests ``round(value * time_scale)`` ms of the embedded ensemble, whose
        tickTime is at least 1 ms, and ZooKeeper grants at least 2 ticks
        (``zk_registry.server.tick_time_for``).
        """
        name = "zookeeper.session.timeout.ms"
        value = _kafka_value(name, values, "zookeeper")
        assert isinstance(value, int)
        if round(value * time_scale) > INT32_MAX:
            self.must(
                f"[kafka].{json.dumps(name)}",
                f"an integer <= {int(INT32_MAX / time_scale)} at time_scale {time_scale:g} "
                f"(ZooKeeper's session timeout is a Java int of ms)",
                value,
            )
        if round(value * time_scale) >= ZK_MIN_SESSION_TIMEOUT_MS:
            return
        # round() reaches the minimum from minimum - 0.5: start below that, step up.
        least = max(1, math.floor((ZK_MIN_SESSION_TIMEOUT_MS - 0.5) / time_scale) - 1)
        while round(least * time_scale) < ZK_MIN_SESSION_TIMEOUT_MS:
            least += 1
        self.must(
            f"[kafka].{json.dumps(name)}",
            f"an integer >= {least} at time_scale {time_scale:g} (the run asks ZooKeeper for a "
            f"session of round(value x time_scale) ms, and ZooKeeper grants at least "
            f"{ZK_MIN_SESSION_TIMEOUT_MS} ticks of at least 1 ms)",
            value,
        )

    def kafka_value(self, spec: KafkaKeySpec, shown: str, value: object) -> KafkaValue:
        if spec.kind == "int":
            limit, note = _kafka_int_limit(spec)
            return self.integer(
                {"v": value},
                "v",
                shown,
                None,
                spec.minimum,
                spec.maximum,
                limit=limit,
                limit_note=note,
            )
        if spec.kind == "bool":
            if not isinstance(value, bool):
                self.must(shown, "true or false", value)
            return value
        requirement = "a string"
        if spec.choices is not None:
            choices = ", ".join(json.dumps(c) for c in spec.choices)
            requirement = (
                f"one of {choices}"
                if spec.kind == "str"
                else f"a comma-separated list of {choices}"
            )
        if not isinstance(value, str):
            self.must(shown, requirement, value)
        items = [i.strip() for i in value.split(",")] if spec.kind == "list" else [value]
        if spec.choices is not None and not all(i in spec.choices for i in items):
            self.must(shown, requirement, value)
        return value

    def timeline(
        self,
        doc: Mapping[str, object],
        duration_s: float,
        cluster: ClusterSpec,
        topics: Sequence[TopicSpec],
        consumers: int,
    ) -> tuple[TimelineEvent, ...]:
        raw = doc.get("timeline", [])
        if not isinstance(raw, list) or not all(isinstance(e, dict) for e in raw):
            self.must("timeline", "an array of tables ([[timeline]])", raw)
        if len(raw) > MAX_TIMELINE_ENTRIES:
            self.fail(
                "timeline",
                f"timeline: {len(raw)} [[timeline]] entries, more than {MAX_TIMELINE_ENTRIES} "
                "(the orchestrator schedules, and the manifest lists, every one)",
            )
        topic_names = [t.name for t in topics]
        replication = {t.name: t.replication_factor for t in topics}
        members = consumers
        events: list[TimelineEvent] = []
        for i, table in enumerate(raw):
            event = self.timeline_event(table, i, duration_s, cluster, topic_names, replication)
            if event.action == "join":
                # Before the planner names every member: the total stays bounded.
                if members + event.count > MAX_MEMBERS:
                    self.must(
                        f"timeline[{i}].count",
                        _int_requirement(
                            None,
                            MAX_MEMBERS - members,
                            f"at most {MAX_MEMBERS} members over the run; [group].consumers "
                            f"and the joins before it make {members}",
                        ),
                        event.count,
                    )
                members += event.count
            events.append(event)
        events.sort(key=lambda e: e.at_s)  # stable: ties keep file order
        return tuple(events)

    def timeline_event(
        self,
        table: Mapping[str, object],
        i: int,
        duration_s: float,
        cluster: ClusterSpec,
        topic_names: Sequence[str],
        replication: Mapping[str, int],
    ) -> TimelineEvent:
        """One entry; ``replication``: each topic's replication factor (and its name set)."""
        where = f"timeline[{i}]"
        self.check_keys(table, _ALL_TIMELINE_KEYS, _in_array(where))
        at_s = self.number(
            table,
            "at_s",
            f"{where}.at_s",
            None,
            f"a number between 0 and duration_s ({duration_s})",
            lambda x: 0 <= x <= duration_s,
        )
        action = self.choice(table, "action", f"{where}.action", None, TIMELINE_ACTIONS)
        allowed = _TIMELINE_KEYS[action]
        for key in table:
            if key in ("at_s", "action") or key in allowed:
                continue
            if action == "join" and key == "member":
                self.fail(
                    f"{where}.member",
                    f"{where}.member: not allowed for a join (new members are named "
                    "c-<n> in creation order)",
                )
            takes = ", ".join(allowed)
            self.fail(
                f"{where}.{key}", f"{where}.{key}: not allowed for a {action} (it takes {takes})"
            )

        def positive(key: str) -> float | None:
            if key not in table:
                return None
            return required_positive(key)

        def required_positive(key: str) -> float:
            return self.number(
                table,
                key,
                f"{where}.{key}",
                None,
                "a number > 0",
                lambda x: x > 0,
                MAX_DURATION_S,
                "7 emulated days, the longest run",
            )

        def index(key: str, size: int, note: str) -> int:
            return self.integer(table, key, f"{where}.{key}", None, 0, size - 1, note)

        # The fields gathered first and the event built once (``replace`` per field
        # costs more than the rest of the entry's checks).
        fields: dict[str, Any] = {}
        if action == "join":
            fields["count"] = self.integer(
                table,
                "count",
                f"{where}.count",
                1,
                1,
                limit=MAX_MEMBERS,
                limit_note="the most members a run holds",
            )
            fields["interval_s"] = positive("interval_s")
        elif action in ("leave", "crash"):
            fields.update(self.departure(table, action, where, positive("interval_s")))
        elif action in ("restart", "network_partition", "subscribe"):
            fields.update(self.who(table, action, where, many=True))
        elif action in ("pause", "slow"):
            fields.update(self.who(table, action, where, many=False))
        if action == "restart":
            fields["interval_s"] = positive("interval_s")
            fields["downtime_s"] = self.number(
                table,
                "downtime_s",
                f"{where}.downtime_s",
                0.0,
                "a number >= 0",
                lambda x: x >= 0,
                MAX_DURATION_S,
                "7 emulated days, the longest run",
            )
        if action in ("pause", "slow", "network_partition", "zk_quorum_loss"):
            fields["duration_s"] = required_positive("duration_s")
        if action == "slow":
            fields["processing_ms_per_message"] = self.number(
                table,
                "processing_ms_per_message",
                f"{where}.processing_ms_per_message",
                None,
                "a number > 0",
                lambda x: x > 0,
                MAX_PROCESSING_MS_PER_MESSAGE,
                "a day per message",
            )
        elif action == "network_partition":
            fields["target"] = self.choice(
                table, "target", f"{where}.target", None, PARTITION_TARGETS
            )
        elif action == "host_crash":
            fields["host"] = self.integer(table, "host", f"{where}.host", None, 0)
        elif action in ("broker_crash", "broker_restart"):
            fields["broker"] = index("broker", cluster.brokers, "[cluster].brokers minus one")
            fields["restart_after_s"] = positive("restart_after_s")
        elif action in ("zk_crash", "zk_restart"):
            fields["zk_member"] = index(
                "zk_member", cluster.zookeeper_ensemble, "[cluster].zookeeper_ensemble minus one"
            )
            fields["restart_after_s"] = positive("restart_after_s")
        elif action == "add_partitions":
            topic = self.choice(table, "topic", f"{where}.topic", None, topic_names, replication)
            rf = replication[topic]
            limit, note = _tighter(
                (
                    MAX_PARTITIONS_PER_TOPIC,
                    "the topic's znode /brokers/topics/<t> holds its whole assignment, within "
                    "ZooKeeper's 1 MB jute.maxbuffer",
                ),
                (
                    MAX_REPLICAS_PER_TOPIC // rf,
                    f"at most {MAX_REPLICAS_PER_TOPIC} replicas, partitions x "
                    f"replication_factor ({rf}), in the topic's znode /brokers/topics/<t>",
                ),
            )
            fields["topic"] = topic
            fields["partitions"] = self.integer(
                table, "partitions", f"{where}.partitions", None, 1, limit=limit, limit_note=note
            )
        elif action == "subscribe":
            if "topics" not in table:
                self.fail(f"{where}.topics", f"{where}.topics is required")
            fields["topics"] = self.topic_list(
                table, "topics", f"{where}.topics", topic_names, lookup=replication
            )
        return TimelineEvent(at_s=at_s, action=action, index=i, **fields)

    def departure(
        self,
        table: Mapping[str, object],
        action: str,
        where: str,
        interval_s: float | None,
    ) -> dict[str, Any]:
        """A leave or crash: one ``member``, or a scale-in burst of ``count`` (its fields)."""
        if "member" in table and "count" in table:
            self.fail(
                f"{where}.count",
                f"{where}.count: not allowed together with {where}.member (a {action} "
                "names one member, or a count of the newest)",
            )
        if "count" in table:
            count = self.integer(
                table,
                "count",
                f"{where}.count",
                None,
                1,
                limit=MAX_MEMBERS,
                limit_note="the most members a run holds",
            )
            return {"count": count, "interval_s": interval_s}
        if interval_s is not None:
            self.fail(
                f"{where}.interval_s",
                f"{where}.interval_s: only allowed with {where}.count (a scale-in burst)",
            )
        if "member" not in table:
            self.fail(
                f"{where}.member",
                f'{where}.member is required (a name like "c-3" or "random"), or a count',
            )
        return {"member": self.member(table, f"{where}.member")}

    def who(
        self, table: Mapping[str, object], action: str, where: str, *, many: bool
    ) -> dict[str, Any]:
        """The ``member`` (or, when ``many``, ``members``) an action acts on (its field)."""
        if "member" in table and "members" in table:
            self.fail(
                f"{where}.members",
                f"{where}.members: not allowed together with {where}.member",
            )
        if "member" in table:
            return {"member": self.member(table, f"{where}.member")}
        if not many or (action != "subscribe" and "members" not in table):
            key = f"{where}.member"
            extra = " (or members)" if many else ""
            self.fail(key, f'{key}{extra} is required (a name like "c-3" or "random")')
        value = table.get("members", "all")
        requirement = '"all" or a non-empty array of member names like "c-3"'
        if value == "all":
            return {"members": "all"}
        if isinstance(value, list) and len(value) > MAX_MEMBERS:
            self.fail(
                f"{where}.members",
                f"{where}.members: {len(value)} names, more than the {MAX_MEMBERS} members a "
                "run holds",
            )
        if (
            not isinstance(value, list)
            or not value
            or not all(isinstance(v, str) and _MEMBER_RE.fullmatch(v) for v in value)
        ):
            self.must(f"{where}.members", requirement, value)
        names: list[str] = [str(v) for v in value]
        seen: set[str] = set()
        for n, name in enumerate(names):
            if name in seen:
                self.fail(
                    f"{where}.members[{n}]",
                    f"{where}.members[{n}]: member {_show(name)} is listed twice",
                )
            seen.add(name)
        return {"members": tuple(names)}

    def member(self, table: Mapping[str, object], shown: str) -> str:
        return self.string(table, "member", shown, None)


_TOP_KEYS: Final = (
    "name",
    "description",
    "seed",
    "duration_s",
    "time_scale",
    "kafka_version",
    "cluster",
    "topics",
    "producer",
    "group",
    "kafka",
    "placement",
    "timeline",
)
_SECTIONS: Final = ("cluster", "producer", "group", "kafka", "placement")
_ARRAYS: Final = ("topics", "timeline")


def _render_top(key: str) -> str:
    if key in _SECTIONS:
        return f"[{key}]"
    if key in _ARRAYS:
        return f"[[{key}]]"
    return key


def _in_section(section: str) -> Callable[[str], str]:
    return lambda key: f"[{section}].{key}"


def _in_array(where: str) -> Callable[[str], str]:
    return lambda key: f"{where}.{key}"


def _tighter(*limits: tuple[int, str]) -> tuple[int, str]:
    """The smallest of several size limits, with its reason."""
    return min(limits, key=lambda pair: pair[0])


def _number(value: float) -> str:
    """A bound as messages show it: ``604800``, ``10000000``, ``0.01``."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _one_of(choices: Sequence[str], shown: int = 20) -> str:
    """``"a", "b", "c"``: the first ``shown`` choices, then how many there are in all."""
    listed = ", ".join(json.dumps(c) for c in choices[:shown])
    return listed if len(choices) <= shown else f"{listed}, ... ({len(choices)} in all)"


def _int_requirement(minimum: int | None, maximum: int | None, bound_note: str) -> str:
    note = f" ({bound_note})" if bound_note else ""
    if minimum is not None and maximum is not None:
        return f"an integer between {minimum} and {maximum}{note}"
    if minimum is not None:
        return f"an integer >= {minimum}{note}"
    if maximum is not None:
        return f"an integer <= {maximum}{note}"
    return "an integer"


def _default_name(source: str) -> str:
    stem = Path(source).stem
    return stem if _NAME_RE.fullmatch(stem) and len(stem) <= 100 else "scenario"


def parse_scenario(text: str, source_name: str = "<string>") -> Scenario:
    """Parse and validate a scenario from TOML text.

    Args:
        text: the TOML document.
        source_name: how error messages and the manifest name the source;
            also gives the default ``name`` (its stem).

    Returns:
        The validated scenario with every default applied.

    Raises:
        ScenarioError: invalid TOML or an invalid scenario (one line naming the key).
    """
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ScenarioError(source_name, "<toml>", f"invalid TOML: {err}") from None
    return _Parser(source_name).parse(doc)


def scenario_from_document(doc: Mapping[str, object], source_name: str = "<document>") -> Scenario:
    """Validate a scenario from an already decoded TOML document (a dict of tables).

    An experiment applies its grid's values to a scenario's document and
    validates each trial's copy here, so a bad value fails as a file would.

    Raises:
        ScenarioError: an invalid scenario (one line naming the key).
    """
    return _Parser(source_name).parse(dict(doc))


def load_scenario(path: str | os.PathLike[str]) -> Scenario:
    """Read, parse and validate a scenario file.

    Args:
        path: the ``.toml`` file.

    Returns:
        The validated scenario; its ``source`` is the file's name.

    Raises:
        ScenarioError: the file cannot be read or is invalid.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ScenarioError(file.name, "<file>", f"cannot read {str(file)!r}: {err}") from None
    return parse_scenario(text, file.name)


def bundled_scenarios() -> dict[str, Path]:
    """The scenarios shipped in ``emulator/scenarios/``, by file stem, sorted.

    Returns:
        Name -> path of each bundled ``*.toml`` (found with :mod:`importlib.resources`).
    """
    root = resources.files("emulator").joinpath("scenarios")
    found: dict[str, Path] = {}
    if not root.is_dir():
        return found
    for entry in root.iterdir():
        if entry.name.endswith(".toml") and entry.is_file():
            # A plain (or editable) install gives real paths; the package is not zip-safe.
            found[entry.name.removesuffix(".toml")] = (
                entry if isinstance(entry, Path) else Path(str(entry))
            )
    return dict(sorted(found.items()))
