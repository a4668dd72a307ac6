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
    duration_s = 60.0            # emulated (Kafka) seconds the run lasts, > 0
    time_scale = 1.0             # wall seconds per emulated second, 0 < x <= 1
    kafka_version = "3.9"        # Kafka release for the classic/KIP-848 defaults (B6), >= 0.10.1

    [cluster]
    brokers = 3                  # >= 1
    zookeeper_ensemble = 1       # 1, 3 or 5 members in the embedded ensemble

    [[topics]]                   # at least one
    name = "events"              # required; Kafka's legal characters [a-zA-Z0-9._-], <= 249
    partitions = 12              # required, >= 1
    replication_factor = 1       # 1 .. [cluster].brokers

    [producer]
    rate_per_s = 100.0           # messages per emulated second in total, >= 0
    topics = [...]               # default: every topic, in file order
    partitioner = "round-robin"  # "round-robin" | "key-hash" | "explicit"
    batch_size = 50              # max messages per produce batch, >= 1
    explicit_partition = 0       # only (and then required) with partitioner = "explicit"

    [group]
    id = "<name>-group"          # [A-Za-z0-9._-], <= 249 (it is a ZooKeeper path element)
    consumers = 1                # initial members, >= 1
    topics = [...]               # default: every topic, in file order
    streams_per_consumer = 1     # the legacy numStreams, >= 1
    processing_ms_per_message = 1.0   # >= 0
    consumers_per_host = 50      # emulated consumers per host actor, >= 1
    static_membership = false    # classic/consumer: group.instance.id = "<group>-<member>"
    assignor = "..."             # override the protocol's assignor (client or server side)

    [kafka]                      # any key of KAFKA_CONFIG_KEYS, with its Kafka type
    "rebalance.max.retries" = 4

    [[timeline]]                 # any order in the file; run in time order (ties: file order)
    at_s = 10.0                  # required, 0 <= at_s <= duration_s
    action = "join"              # required: "join" | "leave" | "crash"
    count = 1                    # join only: how many new members, >= 1
    member = "c-2"               # leave and crash only, required there

Members are named ``c-0``, ``c-1``, ... in creation order: the initial
``[group].consumers`` first, then each join in time order continues the
numbering. Names are never reused. Consumer ids built from them compare as
strings, so ``c-10`` sorts before ``c-2`` in the legacy assignors (A2), as a
real group's ids would.

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
import json
import math
import os
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Final, Literal, NoReturn

from emulator.modern.config import parse_kafka_version

__all__ = [
    "KAFKA_CONFIG_KEYS",
    "PROTOCOLS",
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
]

KafkaValue = int | float | str | bool
"""A Kafka config value as TOML gives it."""

PROTOCOLS: Final = ("zookeeper", "classic", "consumer")
"""The generations, by Kafka's ``group.protocol`` naming (``zookeeper`` is the 0.8 consumer)."""

RUN_PROTOCOLS: Final = ("zookeeper", "classic-eager", "classic-cooperative", "consumer")
"""What ``--protocol`` accepts: a generation and, for classic, its rebalance flavour."""

ACTIONS: Final = ("join", "leave", "crash")
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
    KafkaKeySpec("rebalance.max.retries", "int", 4, minimum=0, used_by=_LEGACY, source=_SRC_CC082),
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
        "request.timeout.ms",
        "int",
        30000,
        minimum=0,
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


@dataclass(frozen=True)
class TimelineEvent:
    """One ``[[timeline]]`` entry.

    Attributes:
        at_s: emulated seconds from the start of the run.
        action: ``join``, ``leave`` (clean shutdown) or ``crash`` (no goodbye;
            noticed only through session expiry).
        count: members joining (``join``); 1 otherwise.
        member: the member leaving or crashing; ``None`` for ``join``.
        index: position in the file, as in error messages (``timeline[index]``).
    """

    at_s: float
    action: str
    count: int = 1
    member: str | None = None
    index: int = 0


@dataclass(frozen=True)
class MembershipChange:
    """One member's arrival or departure, expanded from the timeline."""

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
        """Every timeline change, one per member, in the order the run applies them."""
        return _plan_membership(self.group.consumers, self.timeline)

    def all_members(self) -> tuple[str, ...]:
        """Every member that ever exists during the run, in creation order."""
        joined = [c.member for c in self.membership_plan() if c.action == "join"]
        return self.initial_members() + tuple(joined)

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
        return tuple(alive)

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
            },
            "kafka": dict(sorted(self.kafka.items())),
            "kafka_effective": {p: self.effective_kafka_config(p) for p in PROTOCOLS},
            "timeline": [
                {
                    "at_s": e.at_s,
                    "action": e.action,
                    "count": e.count,
                    "member": e.member,
                    "index": e.index,
                }
                for e in self.timeline
            ],
            "membership_plan": [
                {"at_s": c.at_s, "action": c.action, "member": c.member}
                for c in self.membership_plan()
            ],
        }


class _MembershipError(Exception):
    def __init__(self, event: TimelineEvent, message: str) -> None:
        super().__init__(message)
        self.event = event


def _plan_membership(
    initial: int, timeline: Sequence[TimelineEvent]
) -> tuple[MembershipChange, ...]:
    """Expand the (time-sorted) timeline into per-member changes.

    Raises:
        _MembershipError: a leave or crash names a member absent at that time.
    """
    alive = {member_name(i) for i in range(initial)}
    gone: dict[str, tuple[str, float]] = {}
    next_index = initial
    changes: list[MembershipChange] = []
    for position, event in enumerate(timeline):
        if event.action == "join":
            for _ in range(event.count):
                name = member_name(next_index)
                next_index += 1
                alive.add(name)
                changes.append(MembershipChange(event.at_s, "join", name, event.index))
            continue
        assert event.member is not None
        if event.member not in alive:
            later = timeline[position + 1 :]
            raise _MembershipError(event, _absent_reason(event, gone, later, next_index))
        alive.remove(event.member)
        gone[event.member] = (event.action, event.at_s)
        changes.append(MembershipChange(event.at_s, event.action, event.member, event.index))
    return tuple(changes)


def _absent_reason(
    event: TimelineEvent,
    gone: Mapping[str, tuple[str, float]],
    later: Sequence[TimelineEvent],
    next_index: int,
) -> str:
    """Why ``event.member`` is absent: already gone, joins later, or never exists."""
    member = event.member or ""
    base = f"no member {_show(member)} exists at {event.at_s} s"
    if member in gone:
        action, at_s = gone[member]
        return f"{base} (it {'left' if action == 'leave' else 'crashed'} at {at_s} s)"
    match = _MEMBER_RE.fullmatch(member)
    if match is None:
        return f"{base} (members are named c-0, c-1, ... in creation order)"
    wanted = int(match.group(1))
    for other in later:
        if other.action == "join":
            if next_index <= wanted < next_index + other.count:
                return f"{base} (it joins at {other.at_s} s)"
            next_index += other.count
    return base


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
    ) -> int:
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
        return value

    def number(
        self,
        table: Mapping[str, object],
        key: str,
        shown: str,
        default: float | None,
        requirement: str,
        accept: Callable[[float], bool],
    ) -> float:
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
    ) -> str:
        requirement = "one of " + ", ".join(json.dumps(c) for c in choices)
        value = self.string(table, key, shown, default, requirement=requirement)
        if value not in choices:
            hint = _hint(value, choices, json.dumps)
            self.fail(shown, f"{shown} must be {requirement}, got {_show(value)}{hint}")
        return value

    def topic_list(
        self, table: Mapping[str, object], key: str, shown: str, known: Sequence[str]
    ) -> tuple[str, ...]:
        if key not in table:
            return tuple(known)
        value = table[key]
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            self.must(shown, "a non-empty array of topic names", value)
        seen: set[str] = set()
        for i, name in enumerate(value):
            if name not in known:
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
        seed = self.integer(doc, "seed", "seed", 0, 0, 2**63 - 1)
        duration_s = self.number(
            doc, "duration_s", "duration_s", 60.0, "a number > 0", lambda x: x > 0
        )
        time_scale = self.number(
            doc,
            "time_scale",
            "time_scale",
            1.0,
            "a number with 0 < time_scale <= 1",
            lambda x: 0 < x <= 1,
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
        kafka = self.kafka(self.table(doc, "kafka"))
        timeline = self.timeline(doc, duration_s, group.consumers)
        return Scenario(
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
        )

    def cluster(self, table: dict[str, object]) -> ClusterSpec:
        self.check_keys(table, ("brokers", "zookeeper_ensemble"), _in_section("cluster"))
        brokers = self.integer(table, "brokers", "[cluster].brokers", 3, 1)
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
        specs: list[TopicSpec] = []
        first_seen: dict[str, int] = {}
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
            partitions = self.integer(table, "partitions", f"{where}.partitions", None, 1)
            rf = self.integer(
                table,
                "replication_factor",
                f"{where}.replication_factor",
                1,
                1,
                cluster.brokers,
                "[cluster].brokers",
            )
            specs.append(TopicSpec(name=name, partitions=partitions, replication_factor=rf))
        return tuple(specs)

    def producer(self, table: dict[str, object], topics: Sequence[TopicSpec]) -> ProducerSpec:
        self.check_keys(
            table,
            ("rate_per_s", "topics", "partitioner", "batch_size", "explicit_partition"),
            _in_section("producer"),
        )
        rate = self.number(
            table, "rate_per_s", "[producer].rate_per_s", 100.0, "a number >= 0", lambda x: x >= 0
        )
        names = self.topic_list(table, "topics", "[producer].topics", [t.name for t in topics])
        partitioner = self.choice(
            table, "partitioner", "[producer].partitioner", "round-robin", PARTITIONERS
        )
        batch = self.integer(table, "batch_size", "[producer].batch_size", 50, 1)
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
            ),
            _in_section("group"),
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
            consumers=self.integer(table, "consumers", "[group].consumers", 1, 1),
            topics=self.topic_list(table, "topics", "[group].topics", topic_names),
            streams_per_consumer=self.integer(
                table, "streams_per_consumer", "[group].streams_per_consumer", 1, 1
            ),
            processing_ms_per_message=self.number(
                table,
                "processing_ms_per_message",
                "[group].processing_ms_per_message",
                1.0,
                "a number >= 0",
                lambda x: x >= 0,
            ),
            consumers_per_host=self.integer(
                table, "consumers_per_host", "[group].consumers_per_host", 50, 1
            ),
            static_membership=static,
            assignor=assignor,
        )

    def kafka(self, table: dict[str, object]) -> dict[str, KafkaValue]:
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
        return values

    def kafka_value(self, spec: KafkaKeySpec, shown: str, value: object) -> KafkaValue:
        if spec.kind == "int":
            return self.integer({"v": value}, "v", shown, None, spec.minimum, spec.maximum)
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
        self, doc: Mapping[str, object], duration_s: float, initial: int
    ) -> tuple[TimelineEvent, ...]:
        raw = doc.get("timeline", [])
        if not isinstance(raw, list) or not all(isinstance(e, dict) for e in raw):
            self.must("timeline", "an array of tables ([[timeline]])", raw)
        events: list[TimelineEvent] = []
        for i, table in enumerate(raw):
            where = f"timeline[{i}]"
            self.check_keys(table, ("at_s", "action", "count", "member"), _in_array(where))
            at_s = self.number(
                table,
                "at_s",
                f"{where}.at_s",
                None,
                f"a number between 0 and duration_s ({duration_s})",
                lambda x: 0 <= x <= duration_s,
            )
            action = self.choice(table, "action", f"{where}.action", None, ACTIONS)
            if action == "join":
                if "member" in table:
                    self.fail(
                        f"{where}.member",
                        f"{where}.member: not allowed for a join (new members are named "
                        "c-<n> in creation order)",
                    )
                count = self.integer(table, "count", f"{where}.count", 1, 1)
                events.append(TimelineEvent(at_s, action, count, None, i))
            else:
                if "count" in table:
                    self.fail(
                        f"{where}.count",
                        f"{where}.count: only allowed for a join, not a {action}",
                    )
                member = self.string(table, "member", f"{where}.member", None)
                events.append(TimelineEvent(at_s, action, 1, member, i))
        events.sort(key=lambda e: e.at_s)  # stable: ties keep file order
        try:
            _plan_membership(initial, events)
        except _MembershipError as err:
            key = f"timeline[{err.event.index}].member"
            self.fail(key, f"{key}: {err}")
        return tuple(events)


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
    "timeline",
)
_SECTIONS: Final = ("cluster", "producer", "group", "kafka")
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


def _int_requirement(minimum: int | None, maximum: int | None, bound_note: str) -> str:
    note = f" ({bound_note})" if bound_note else ""
    if minimum is not None and maximum is not None:
        return f"an integer between {minimum} and {maximum}{note}"
    if minimum is not None:
        return f"an integer >= {minimum}"
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
