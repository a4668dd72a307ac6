"""The Kafka key registry: every Kafka config a scenario may set, typed, with its defaults.

A scenario's ``[kafka]`` table names configs by their Kafka names. Each is
typed and checked against :data:`KAFKA_CONFIG_KEYS`: the legacy consumer and
0.8.2 broker keys of kafka-protocols.md A3, and the classic and KIP-848 keys
of B6 and C6. :func:`effective_value` falls back to Kafka's default, which can
depend on the generation (``protocol``) and on other keys, as in Kafka:
``rebalance.backoff.ms`` defaults to the *configured* ``zookeeper.sync.time.ms``
(K@0.8.2.2 ``consumer/ConsumerConfig.scala``). :data:`KAFKA_ORDER_RULES` are the
rules between keys Kafka enforces at start-up.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from emulator.protocols import GENERATIONS

__all__ = [
    "INT32_MAX",
    "KAFKA_CONFIG_KEYS",
    "KAFKA_ORDER_RULES",
    "ConfigKind",
    "DefaultFn",
    "KafkaKeySpec",
    "KafkaValue",
    "effective_value",
    "kafka_int_limit",
]

KafkaValue = int | float | str | bool
"""A Kafka config value as TOML gives it."""

INT32_MAX: Final = 2**31 - 1
"""Kafka's ``int`` type (a Java int): the largest value an ``int`` config takes."""


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

KAFKA_ORDER_RULES: Final = (
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
"""Rules between keys Kafka enforces at start-up: (left, op, right, where Kafka checks it)."""


def kafka_int_limit(spec: KafkaKeySpec) -> tuple[int, str]:
    """The largest value of an ``int`` Kafka config a run takes, and why.

    Kafka's own type, a Java int, times included (``max.poll.interval.ms = 2147483647``
    is a common way to say "never"; a timeout longer than the run just never fires). A
    smaller ``spec.maximum`` is checked before this.
    """
    del spec  # every int key, times included: users set max.poll.interval.ms = 2147483647
    return INT32_MAX, "Kafka's int type"


def effective_value(name: str, explicit: Mapping[str, KafkaValue], protocol: str) -> KafkaValue:
    """The value of Kafka config ``name`` for a generation: set, or Kafka's default.

    Args:
        name: a key of :data:`KAFKA_CONFIG_KEYS`.
        explicit: the values set (a scenario's ``[kafka]`` table).
        protocol: a generation (:data:`emulator.protocols.GENERATIONS`).

    Raises:
        KeyError: unknown config name.
        ValueError: unknown generation.
    """
    spec = KAFKA_CONFIG_KEYS.get(name)
    if spec is None:
        raise KeyError(f"unknown Kafka config {name!r}")
    if protocol not in GENERATIONS:
        raise ValueError(f"unknown protocol {protocol!r}; expected one of {GENERATIONS}")
    if name in explicit:
        return explicit[name]
    if protocol in spec.protocol_defaults:
        return spec.protocol_defaults[protocol]
    if callable(spec.default):
        return spec.default(lambda other: effective_value(other, explicit, protocol))
    return spec.default
