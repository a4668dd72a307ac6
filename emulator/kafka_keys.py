"""The Kafka key registry: every Kafka config the emulator reads, typed, with its defaults.

The one place that knows, for each Kafka config by its Kafka name, its type,
its range, and Kafka's default per generation and per Kafka release: the
legacy consumer and 0.8.2 broker keys of kafka-protocols.md A3, and the classic
and KIP-848 keys of B6 and C6. A scenario's ``[kafka]`` table is checked
against the keys it may set (:data:`KAFKA_CONFIG_KEYS`); the config classes
(:class:`emulator.legacy.config.LegacyConsumerConfig`,
:class:`emulator.modern.config.ClassicConsumerConfig`,
:class:`emulator.modern.config.Kip848ConsumerConfig`,
:class:`emulator.modern.config.GroupCoordinatorConfig`) take their defaults
from here, and :class:`KafkaSettings` gives every value a generation reads,
resolved and typed.

A default can depend on the generation (``auto.commit.interval.ms`` is 60000 in
the 0.8 consumer, 5000 in the Java consumer), on the Kafka release of the
broker-coordinated generations (``session.timeout.ms`` is 10000 up to 2.8,
45000 from 3.0, KIP-735; :class:`VersionRule`) and on other keys, as in Kafka:
``rebalance.backoff.ms`` defaults to the *configured* ``zookeeper.sync.time.ms``
(K@0.8.2.2 ``consumer/ConsumerConfig.scala``). The 0.8 consumer is always
0.8.2.2: the release (``kafka_version``) selects the defaults of the classic
and KIP-848 generations only. :data:`KAFKA_ORDER_RULES` are the rules between
keys Kafka enforces at start-up.

This module is a leaf of the core (it imports only :mod:`emulator.protocols`),
so the config classes and the scenario can both read it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from emulator.protocols import GENERATIONS, Generation

__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "INT32_MAX",
    "KAFKA_CONFIG_KEYS",
    "KAFKA_KEYS",
    "KAFKA_ORDER_RULES",
    "MIN_KAFKA_VERSION",
    "ConfigKind",
    "DefaultFn",
    "KafkaKeySpec",
    "KafkaSettings",
    "KafkaValue",
    "VersionRule",
    "as_bool",
    "as_int",
    "as_str",
    "default_bool",
    "default_int",
    "default_list",
    "default_str",
    "default_value",
    "effective_value",
    "kafka_int_limit",
    "kafka_version_at_least",
    "parse_kafka_version",
    "split_list",
]

KafkaValue = int | float | str | bool
"""A Kafka config value as TOML gives it."""

INT32_MAX: Final = 2**31 - 1
"""Kafka's ``int`` type (a Java int): the largest value an ``int`` config takes."""

# --------------------------------------------------------------------------- Kafka releases

DEFAULT_KAFKA_VERSION: Final = "3.9"
"""The release whose defaults apply when no ``kafka_version`` is given."""

MIN_KAFKA_VERSION: Final = (0, 10, 1)
"""The first release with ``max.poll.interval.ms`` (KIP-62)."""


def parse_kafka_version(version: str) -> tuple[int, ...]:
    """Parse ``"3.9"``, ``"2.8.2"`` or ``"0.10.1.0"`` into a comparable tuple.

    Raises:
        ValueError: not a dotted version, or older than 0.10.1.0.
    """
    if not re.fullmatch(r"\d+(\.\d+){1,3}", version.strip()):
        raise ValueError(f"kafka_version must look like 3.9 or 2.8.2, got {version!r}")
    parts = tuple(int(p) for p in version.strip().split("."))
    # "3.0" means 3.0.0: pad before comparing.
    padded = (*parts, 0, 0, 0)[:4]
    if padded < (*MIN_KAFKA_VERSION, 0):
        raise ValueError(
            f"kafka_version {version} predates 0.10.1.0 (no max.poll.interval.ms); "
            "the classic protocol is emulated from 0.10.1.0 on"
        )
    return padded


def _at_least(version: tuple[int, ...], release: tuple[int, ...]) -> bool:
    return version >= (*release, 0, 0, 0)[:4]


def kafka_version_at_least(version: object, release: tuple[int, ...]) -> bool:
    """Whether ``version`` (a ``kafka_version`` string; ``None``: the default 3.9) is
    ``release`` or later.

    Raises:
        ValueError: a malformed version.
    """
    text = DEFAULT_KAFKA_VERSION if version is None else str(version)
    return _at_least(parse_kafka_version(text), release)


# --------------------------------------------------------------------------- key specs

ConfigKind = Literal["int", "bool", "str", "list"]
DefaultFn = Callable[[Callable[[str], KafkaValue]], KafkaValue]

_MODERN: Final[tuple[Generation, ...]] = ("classic", "consumer", "share")


@dataclass(frozen=True)
class VersionRule:
    """A default that holds only in some Kafka releases, for some generations.

    Attributes:
        value: the default in those releases.
        before: the rule holds in releases older than this one (``None``: no upper end).
        since: the rule holds from this release on (``None``: no lower end).
        generations: the generations it holds for (the broker-coordinated ones
            by default; the 0.8 consumer is always 0.8.2.2).
    """

    value: KafkaValue
    before: tuple[int, ...] | None = None
    since: tuple[int, ...] | None = None
    generations: tuple[Generation, ...] = _MODERN

    def holds(self, generation: str, version: tuple[int, ...]) -> bool:
        """Whether the rule gives the default of ``generation`` at release ``version``."""
        if generation not in self.generations:
            return False
        if self.before is not None and _at_least(version, self.before):
            return False
        return self.since is None or _at_least(version, self.since)


@dataclass(frozen=True)
class KafkaKeySpec:
    """One Kafka config the emulator reads.

    Attributes:
        name: the Kafka name.
        kind: ``int``, ``bool``, ``str``, or ``list`` (a comma-separated
            string, Kafka's LIST type as written in a properties file).
        default: Kafka's default; a callable receives a lookup of the other
            *effective* values, for defaults defined by another key.
        protocol_defaults: a different default for some generations.
        versions: defaults of some Kafka releases (the first rule that holds
            wins over ``protocol_defaults`` and ``default``).
        minimum: smallest allowed int.
        maximum: largest allowed int.
        choices: allowed values of a ``str``, or of each item of a ``list``.
        used_by: which side and generation reads it.
        source: where the default was read.
        settable: whether a scenario's ``[kafka]`` may set it; the others the
            emulator reads at Kafka's default only (an emulator choice: they do
            not shape a rebalance).
        since: the first release (``kafka_version``) with the key; a scenario
            that sets it for an older release is refused (``None``: every release).
    """

    name: str
    kind: ConfigKind
    default: KafkaValue | DefaultFn
    protocol_defaults: Mapping[str, KafkaValue] = field(default_factory=dict)
    versions: tuple[VersionRule, ...] = ()
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] | None = None
    used_by: str = ""
    source: str = ""
    settable: bool = True
    since: tuple[int, ...] | None = None


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
_TOPICS = "broker (0.8.2 and modern)"

_CLASSIC_ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky")
_SHARE = "share consumer (KIP-932)"
_SHARE_GC = "group coordinator and share-partitions, share groups (KIP-932)"
_SRC_SHARE = "notes/share-client-facts.md §3 (K@4.2 GC/modern/share/ShareGroupConfig.java, "
_SRC_SHARE_GC = "notes/share-client-facts.md §3 (K@4.2 GC/GroupCoordinatorConfig.java "

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
        versions=(VersionRule("range", before=(3, 0), generations=("classic",)),),
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
        "unclean.leader.election.enable",
        "bool",
        True,
        # Kafka 0.11 (KIP-106) turned it off; the emulator's modern brokers keep that
        # default at every kafka_version (emulator choice: 0.10.x still had true).
        protocol_defaults={"classic": False, "consumer": False, "share": False},
        used_by=_BROKER,
        source=_SRC_KC082 + "; K@0.11+ KafkaConfig.scala (false, KIP-106)",
    ),
    KafkaKeySpec(
        "replica.lag.time.max.ms", "int", 10000, minimum=1, used_by=_BROKER, source=_SRC_KC082
    ),
    KafkaKeySpec(
        "replica.lag.max.messages", "int", 4000, minimum=0, used_by=_BROKER, source=_SRC_KC082
    ),
    KafkaKeySpec(
        "replica.fetch.wait.max.ms",
        "int",
        500,
        # Kafka takes 0 (its follower then polls without a pause); the emulator
        # wants a long poll (emulator choice).
        minimum=1,
        used_by=_BROKER,
        source=_SRC_KC082 + "; K@3.7 KafkaConfig.scala (500)",
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
    # ---- topics coming and going (issue 19; notes/issue19-facts.md A1-A3, B2-B3)
    KafkaKeySpec(
        "auto.create.topics.enable",
        "bool",
        True,
        used_by=_TOPICS + ": a metadata request for a missing topic creates it",
        source="K@0.8.2.2 server/KafkaConfig.scala 214; K@3.9 ServerLogConfigs.java 160",
    ),
    KafkaKeySpec(
        "delete.topic.enable",
        "bool",
        True,
        protocol_defaults={"zookeeper": False},
        # KIP-162 turned it on in 1.0.0; the classic generation's releases before that had false.
        versions=(VersionRule(False, before=(1, 0)),),
        used_by=_TOPICS + ": false leaves /admin/delete_topics/<t> as a marker, nothing deleted",
        source="K@0.8.2.2 server/KafkaConfig.scala 344 (false); K@1.0.0 KafkaConfig.scala 185 "
        "(true, KIP-162); K@3.9 ServerConfigs.java 81",
    ),
    KafkaKeySpec(
        "num.partitions",
        "int",
        1,
        minimum=1,
        used_by=_TOPICS + ": the partitions of an auto-created topic",
        source="K@0.8.2.2 server/KafkaConfig.scala 133 (getIntInRange 1..); "
        "K@3.9 ServerLogConfigs.java 33",
    ),
    KafkaKeySpec(
        "default.replication.factor",
        "int",
        1,
        minimum=1,
        used_by=_TOPICS + ": the replication factor of an auto-created topic",
        source="K@0.8.2.2 server/KafkaConfig.scala 230; K@3.9 ReplicationConfigs.java 44",
    ),
    KafkaKeySpec(
        "exclude.internal.topics",
        "bool",
        True,
        used_by=_LEGACY + " and " + _CLASSIC + ": a pattern never matches __consumer_offsets",
        source="K@0.8.2.2 consumer/ConsumerConfig.scala 51, 179; K@3.9 ConsumerConfig.java 333",
    ),
    KafkaKeySpec(
        "allow.auto.create.topics",
        "bool",
        True,
        used_by=_CLASSIC + " and KIP-848 client: its metadata requests may create a "
        "subscribed topic (with the broker's auto.create.topics.enable)",
        source="K@3.9 ConsumerConfig.java 378 (KIP-361, 2.3.0; before it, always allowed)",
        since=(2, 3),
    ),
    KafkaKeySpec(
        "group.consumer.regex.refresh.interval.ms",
        "int",
        600000,
        minimum=10000,
        used_by=_KIP848 + ": the periodic re-resolution of subscribed regexes (4.1+)",
        source="CK@4.1 GroupCoordinatorConfig.java 213-216, 330 (an internal config, "
        "atLeast(10 * 1000); KAFKA-18961)",
        since=(4, 1),
    ),
    # ---- classic client, K@3.9 (B6)
    KafkaKeySpec(
        "session.timeout.ms",
        "int",
        45000,
        versions=(VersionRule(10000, before=(3, 0)),),
        minimum=1,
        used_by=_CLASSIC,
        source=_SRC_CC39 + " (45000 since 3.0, KIP-735; 10000 before)",
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
        "metadata.max.age.ms",
        "int",
        300000,
        minimum=0,
        used_by=_CLASSIC + ": the periodic metadata refresh, where a pattern subscription "
        "meets created and deleted topics and the leader sees a changed partition count",
        source=_SRC_CC39 + " 209, 425; K@3.9 Metadata.java timeToNextUpdate",
    ),
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
        # The KIP-848 client (3.7+) always has 30000.
        versions=(VersionRule(305000, before=(2, 0), generations=("classic",)),),
        minimum=1,  # Kafka accepts 0; the emulated clients need a positive timeout
        used_by=_CLASSIC + " and KIP-848 client",
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
        versions=(VersionRule(300000, before=(2, 3)),),
        minimum=0,
        used_by=_CLASSIC_GC,
        source=_SRC_GC39 + " (1800000 since 2.3, 300000 before)",
    ),
    KafkaKeySpec(
        "group.initial.rebalance.delay.ms",
        "int",
        3000,
        versions=(VersionRule(0, before=(0, 11)),),
        minimum=0,
        used_by=_CLASSIC_GC,
        source=_SRC_GC39 + " (since 0.11; before it, no delay: 0)",
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
        versions=(VersionRule(1000, since=(4, 3)),),
        minimum=0,
        used_by=_KIP848,
        source="K@4.3 GroupCoordinatorConfig.java: new in 4.3 with default 1000, which "
        "kafka_version >= 4.3 applies; 0 = the assignor runs on every heartbeat that sees "
        "a new group epoch (4.0-4.2)",
    ),
    KafkaKeySpec(
        "group.consumer.migration.policy",
        "str",
        "disabled",
        versions=(VersionRule("bidirectional", since=(4, 0)),),
        choices=("disabled", "upgrade", "downgrade", "bidirectional"),
        used_by="broker (classic and KIP-848 groups): online migration between them",
        source="K@3.8.0 GroupCoordinatorConfig.java 106 (DISABLED; 3.9 the same, as an internal "
        "config); K@trunk e1deeb4b914 (2024-09-26) made BIDIRECTIONAL the default from 4.0",
        since=(3, 8),
    ),
    KafkaKeySpec("group.coordinator.threads", "int", 1, minimum=1, used_by=_KIP848, source=_SRC_C6),
    KafkaKeySpec(
        "group.coordinator.append.linger.ms", "int", 10, minimum=0, used_by=_KIP848, source=_SRC_C6
    ),
    # ---- read at Kafka's default only: a scenario cannot set these
    KafkaKeySpec(
        "retry.backoff.ms",
        "int",
        100,
        minimum=0,
        used_by=_CLASSIC + " and KIP-848 client (fixed; Kafka 3.7+ grows it up to "
        "retry.backoff.max.ms)",
        source=_SRC_CC39,
        settable=False,
    ),
    KafkaKeySpec(
        "retry.backoff.max.ms",
        "int",
        1000,
        minimum=1,
        used_by="KIP-848 client",
        source=_SRC_CC39,
        settable=False,
    ),
    KafkaKeySpec(
        "default.api.timeout.ms",
        "int",
        60000,
        minimum=0,
        used_by=_CLASSIC,
        source=_SRC_CC39,
        settable=False,
    ),
    KafkaKeySpec(
        "close.timeout.ms",
        "int",
        30000,
        minimum=0,
        used_by=_CLASSIC + " (not a Kafka config: KafkaConsumer.close()'s default timeout)",
        source="K@3.9 KafkaConsumer.java DEFAULT_CLOSE_TIMEOUT_MS",
        settable=False,
    ),
    KafkaKeySpec(
        "new.member.join.timeout.ms",
        "int",
        300000,
        minimum=1,
        used_by=_CLASSIC_GC + " (not a Kafka config: a constant)",
        source="K@3.9 GroupCoordinator NewMemberJoinTimeoutMs; kafka-protocols.md B2",
        settable=False,
    ),
    KafkaKeySpec(
        "replica.fetch.max.bytes",
        "int",
        1048576,
        minimum=1,
        used_by=_BROKER,
        source=_SRC_KC082,
        settable=False,
    ),
    # ---- share groups, K@4.0-4.2 (KIP-932; kafka-protocols.md F)
    KafkaKeySpec(
        "group.share.record.lock.duration.ms",
        "int",
        30000,
        minimum=1000,
        maximum=3600000,
        used_by=_SHARE_GC + ": how long an acquired record is locked to its member",
        source=_SRC_SHARE + "51)",
        since=(4, 0),
    ),
    KafkaKeySpec(
        "group.share.delivery.count.limit",
        "int",
        5,
        minimum=2,
        maximum=10,
        used_by=_SHARE_GC + ": deliveries before a record is archived",
        source=_SRC_SHARE + "47)",
        since=(4, 0),
    ),
    KafkaKeySpec(
        "group.share.partition.max.record.locks",
        "int",
        2000,
        versions=(VersionRule(200, before=(4, 1)),),
        minimum=100,
        maximum=10000,
        used_by=_SHARE_GC + ": records in flight per share-partition",
        source=_SRC_SHARE + "43; 200 at K@4.0 47)",
        since=(4, 0),
    ),
    KafkaKeySpec(
        "group.share.session.timeout.ms",
        "int",
        45000,
        minimum=1,
        used_by=_SHARE_GC,
        source=_SRC_SHARE_GC + "225)",
        since=(4, 0),
    ),
    KafkaKeySpec(
        "group.share.min.session.timeout.ms",
        "int",
        45000,
        minimum=1,
        used_by=_SHARE_GC,
        source=_SRC_SHARE_GC + "221-229)",
        since=(4, 0),
    ),
    KafkaKeySpec(
        "group.share.max.session.timeout.ms",
        "int",
        60000,
        minimum=1,
        used_by=_SHARE_GC,
        source=_SRC_SHARE_GC + "221-229)",
        since=(4, 0),
    ),
    KafkaKeySpec(
        "group.share.heartbeat.interval.ms",
        "int",
        5000,
        minimum=1,
        used_by=_SHARE_GC + ": the interval each ShareGroupHeartbeat answer gives",
        source=_SRC_SHARE_GC + "237)",
        since=(4, 0),
    ),
    KafkaKeySpec(
        "group.share.min.heartbeat.interval.ms",
        "int",
        5000,
        minimum=1,
        used_by=_SHARE_GC,
        source=_SRC_SHARE_GC + "233-241)",
        since=(4, 0),
    ),
    KafkaKeySpec(
        "group.share.max.heartbeat.interval.ms",
        "int",
        15000,
        minimum=1,
        used_by=_SHARE_GC,
        source=_SRC_SHARE_GC + "233-241)",
        since=(4, 0),
    ),
    KafkaKeySpec(
        "group.share.max.size",
        "int",
        200,
        minimum=1,
        maximum=1000,
        used_by=_SHARE_GC + ": GROUP_MAX_SIZE_REACHED beyond it",
        source=_SRC_SHARE_GC + "221)",
        since=(4, 0),
    ),
    KafkaKeySpec(
        "share.auto.offset.reset",
        "str",
        "latest",
        choices=("latest", "earliest"),
        used_by=_SHARE_GC + " (a group config): where a new share-partition starts",
        source="notes/share-client-facts.md §3 (K@4.2 GC/GroupConfig.java 55-62; "
        "by_duration is not emulated)",
        since=(4, 0),
    ),
    KafkaKeySpec(
        "share.acknowledgement.mode",
        "str",
        "implicit",
        choices=("implicit", "explicit"),
        used_by=_SHARE + ": implicit accepts what poll() returned at the next poll()",
        source="notes/share-client-facts.md §2.4 (K@4.1 C/ConsumerConfig.java 389-416; "
        "4.0 has no such config)",
        since=(4, 1),
    ),
    KafkaKeySpec(
        "offsets.topic.num.partitions",
        "int",
        50,
        minimum=1,
        used_by=_BROKER + " and group coordinators",
        source="K@0.8.2.2 server/OffsetManager.scala OffsetManagerConfig; "
        "K@3.9 GroupCoordinatorConfig.java (50)",
        settable=False,
    ),
)

KAFKA_KEYS: Final[Mapping[str, KafkaKeySpec]] = {spec.name: spec for spec in _SPECS}
"""Every Kafka config the emulator reads, by Kafka name."""

KAFKA_CONFIG_KEYS: Final[Mapping[str, KafkaKeySpec]] = {
    spec.name: spec for spec in _SPECS if spec.settable
}
"""Every Kafka config a scenario may set, by Kafka name."""

KAFKA_ORDER_RULES: Final = (
    ("heartbeat.interval.ms", "<", "session.timeout.ms", "clients Heartbeat.java"),
    (
        "group.share.min.session.timeout.ms",
        "<=",
        "group.share.session.timeout.ms",
        "GroupCoordinatorConfig.java",
    ),
    (
        "group.share.session.timeout.ms",
        "<=",
        "group.share.max.session.timeout.ms",
        "GroupCoordinatorConfig.java",
    ),
    (
        "group.share.min.heartbeat.interval.ms",
        "<=",
        "group.share.heartbeat.interval.ms",
        "GroupCoordinatorConfig.java",
    ),
    (
        "group.share.heartbeat.interval.ms",
        "<=",
        "group.share.max.heartbeat.interval.ms",
        "GroupCoordinatorConfig.java",
    ),
    (
        "group.share.heartbeat.interval.ms",
        "<",
        "group.share.session.timeout.ms",
        "GroupCoordinatorConfig.java",
    ),
    (
        "replica.fetch.wait.max.ms",
        "<=",
        "replica.lag.time.max.ms",
        "KafkaConfig.scala: a follower idle for its whole fetch wait must stay in the ISR",
    ),
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


def default_value(
    name: str,
    generation: str = "zookeeper",
    kafka_version: str = DEFAULT_KAFKA_VERSION,
    lookup: Callable[[str], KafkaValue] | None = None,
) -> KafkaValue:
    """Kafka's default of config ``name`` for a generation at a Kafka release.

    Args:
        name: a key of :data:`KAFKA_KEYS`.
        generation: one of :data:`emulator.protocols.GENERATIONS`.
        kafka_version: the release of the broker-coordinated generations.
        lookup: the effective value of another key, for defaults defined by
            another key (``rebalance.backoff.ms``); default: that key's default.

    Raises:
        KeyError: unknown config name.
        ValueError: unknown generation, or a malformed release.
    """
    spec = KAFKA_KEYS.get(name)
    if spec is None:
        raise KeyError(f"unknown Kafka config {name!r}")
    if generation not in GENERATIONS:
        raise ValueError(f"unknown protocol {generation!r}; expected one of {GENERATIONS}")
    if spec.versions:
        version = parse_kafka_version(kafka_version)
        for rule in spec.versions:
            if rule.holds(generation, version):
                return rule.value
    if generation in spec.protocol_defaults:
        return spec.protocol_defaults[generation]
    if callable(spec.default):
        if lookup is None:
            return spec.default(lambda other: default_value(other, generation, kafka_version))
        return spec.default(lookup)
    return spec.default


def effective_value(
    name: str,
    explicit: Mapping[str, KafkaValue],
    protocol: str,
    kafka_version: str = DEFAULT_KAFKA_VERSION,
) -> KafkaValue:
    """The value of Kafka config ``name`` for a generation: set, or Kafka's default.

    Args:
        name: a key of :data:`KAFKA_KEYS`.
        explicit: the values set (a scenario's ``[kafka]`` table).
        protocol: a generation (:data:`emulator.protocols.GENERATIONS`).
        kafka_version: the release of the broker-coordinated generations.

    Raises:
        KeyError: unknown config name.
        ValueError: unknown generation.
    """
    if name in explicit:
        if name not in KAFKA_KEYS:
            raise KeyError(f"unknown Kafka config {name!r}")
        if protocol not in GENERATIONS:
            raise ValueError(f"unknown protocol {protocol!r}; expected one of {GENERATIONS}")
        return explicit[name]
    return default_value(
        name,
        protocol,
        kafka_version,
        lambda other: effective_value(other, explicit, protocol, kafka_version),
    )


def _typed_error(name: str, kind: str) -> TypeError:
    return TypeError(f"Kafka config {name!r} is not {kind}")


def as_int(name: str, value: KafkaValue) -> int:
    """``value`` of an ``int`` key, typed.

    Raises:
        TypeError: not an integer.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise _typed_error(name, "an integer")
    return value


def as_bool(name: str, value: KafkaValue) -> bool:
    """``value`` of a ``bool`` key, typed.

    Raises:
        TypeError: not a boolean.
    """
    if not isinstance(value, bool):
        raise _typed_error(name, "a boolean")
    return value


def as_str(name: str, value: KafkaValue) -> str:
    """``value`` of a ``str`` or ``list`` key, typed.

    Raises:
        TypeError: not a string.
    """
    if not isinstance(value, str):
        raise _typed_error(name, "a string")
    return value


def split_list(value: str) -> tuple[str, ...]:
    """A ``list`` value split on commas, as Kafka parses its LIST type."""
    return tuple(item.strip() for item in value.split(","))


def default_int(
    name: str,
    generation: str = "zookeeper",
    kafka_version: str = DEFAULT_KAFKA_VERSION,
    lookup: Callable[[str], KafkaValue] | None = None,
) -> int:
    """:func:`default_value` of an ``int`` key.

    Raises:
        KeyError: unknown config name.
        TypeError: not an integer config.
    """
    return as_int(name, default_value(name, generation, kafka_version, lookup))


def default_bool(
    name: str, generation: str = "zookeeper", kafka_version: str = DEFAULT_KAFKA_VERSION
) -> bool:
    """:func:`default_value` of a ``bool`` key.

    Raises:
        KeyError: unknown config name.
        TypeError: not a boolean config.
    """
    return as_bool(name, default_value(name, generation, kafka_version))


def default_str(
    name: str, generation: str = "zookeeper", kafka_version: str = DEFAULT_KAFKA_VERSION
) -> str:
    """:func:`default_value` of a ``str`` (or ``list``, unsplit) key.

    Raises:
        KeyError: unknown config name.
        TypeError: not a string config.
    """
    return as_str(name, default_value(name, generation, kafka_version))


def default_list(
    name: str, generation: str = "zookeeper", kafka_version: str = DEFAULT_KAFKA_VERSION
) -> tuple[str, ...]:
    """:func:`default_value` of a ``list`` key, split on commas.

    Raises:
        KeyError: unknown config name.
        TypeError: not a string config.
    """
    return split_list(default_str(name, generation, kafka_version))


@dataclass(frozen=True)
class KafkaSettings:
    """Every Kafka config one generation reads, resolved once and typed.

    The values set (a scenario's ``[kafka]``) win; every other key has Kafka's
    default for the generation and release (:func:`default_value`). Actors
    read their settings here by Kafka name, with no default of their own.

    Attributes:
        generation: one of :data:`emulator.protocols.GENERATIONS`.
        kafka_version: the release of the broker-coordinated generations.
        explicit: the values set.
    """

    generation: str
    kafka_version: str = DEFAULT_KAFKA_VERSION
    explicit: Mapping[str, KafkaValue] = field(default_factory=dict)

    def value(self, name: str) -> KafkaValue:
        """The effective value of ``name``.

        Raises:
            KeyError: unknown config name.
        """
        return effective_value(name, self.explicit, self.generation, self.kafka_version)

    def get_int(self, name: str) -> int:
        """The effective value of an ``int`` key.

        Raises:
            KeyError: unknown config name.
            TypeError: not an integer config.
        """
        return as_int(name, self.value(name))

    def get_bool(self, name: str) -> bool:
        """The effective value of a ``bool`` key.

        Raises:
            KeyError: unknown config name.
            TypeError: not a boolean config.
        """
        return as_bool(name, self.value(name))

    def get_str(self, name: str) -> str:
        """The effective value of a ``str`` (or ``list``, unsplit) key.

        Raises:
            KeyError: unknown config name.
            TypeError: not a string config.
        """
        return as_str(name, self.value(name))

    def get_list(self, name: str) -> tuple[str, ...]:
        """The effective value of a ``list`` key, split on commas as Kafka parses its LIST type.

        Raises:
            KeyError: unknown config name.
            TypeError: not a string config.
        """
        return split_list(self.get_str(name))

    def all(self, names: Mapping[str, KafkaKeySpec] | None = None) -> dict[str, KafkaValue]:
        """Every key of ``names`` (default: :data:`KAFKA_CONFIG_KEYS`) with its effective value."""
        return {name: self.value(name) for name in (KAFKA_CONFIG_KEYS if names is None else names)}
