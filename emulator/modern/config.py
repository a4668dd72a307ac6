"""Configuration of the broker-coordinated protocols, by Kafka's names, per Kafka version.

Client settings are those of ``clients/.../consumer/ConsumerConfig.java`` and
broker settings those of ``core/.../KafkaConfig.scala`` /
``GroupCoordinatorConfig.java`` at each release (kafka-protocols.md B6, C6).
A ``kafka_version`` selector picks the defaults of that release; a property
given explicitly always wins. Every default, and how it follows the release,
is the Kafka key registry's (:mod:`emulator.kafka_keys`); the classes here
type and check the values. Durations are Kafka's own milliseconds; the
run's ``time_scale`` is applied by the clock, never here.

What ``kafka_version`` changes (B6):

* ``session.timeout.ms``: 10000 from 0.10.1.0 up to 2.8.x, 45000 from 3.0.0
  (KIP-735).
* ``partition.assignment.strategy``: ``[range]`` up to 2.8.x,
  ``[range, cooperative-sticky]`` from 3.0.0 (KAFKA-13023).
* ``group.max.session.timeout.ms``: 300000 up to 2.2.x, 1800000 from 2.3.0.
* ``request.timeout.ms``: 305000 up to 1.1.x, 30000 from 2.0.0 (KIP-266).
* Features that do not exist before a release are refused:
  ``group.instance.id`` before 2.3.0 (KIP-345), the cooperative-sticky
  assignor before 2.4.0 (KIP-429), and any version before 0.10.1.0 (no
  ``max.poll.interval.ms``, so no separate rebalance timeout).

Emulator choices (not Kafka): only the defaults follow the version; the
protocol state machines always behave as Kafka 3.9's (JoinGroup v9 with
KIP-394 member ids, KIP-345 static membership, KIP-814 ``skipAssignment``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from emulator.kafka_keys import (
    DEFAULT_KAFKA_VERSION,
    default_bool,
    default_int,
    default_list,
    default_str,
    kafka_version_at_least,
    parse_kafka_version,
)

# Assignor names as ConsumerPartitionAssignor.name() returns them, keyed by
# the class names partition.assignment.strategy accepts.
_ASSIGNOR_CLASSES: Final[Mapping[str, str]] = {
    "RangeAssignor": "range",
    "RoundRobinAssignor": "roundrobin",
    "StickyAssignor": "sticky",
    "CooperativeStickyAssignor": "cooperative-sticky",
}
_ASSIGNOR_NAMES: Final = frozenset(_ASSIGNOR_CLASSES.values())

_CLASSIC: Final = "classic"
"""The generation whose client defaults :class:`ClassicConsumerConfig` takes."""
_CONSUMER: Final = "consumer"
"""The generation whose client defaults :class:`Kip848ConsumerConfig` takes."""


KIP848_COMMIT_ON_POLL_SINCE: Final = (4, 0)
"""KAFKA-18641: the KIP-848 client's interval auto-commit and, with auto-commit on,
the start of a reconciliation run in the application's ``poll()`` from this release."""

UNIFORM_STABLE_QUOTA_SINCE: Final = (4, 0, 1)
"""KAFKA-18688 (apache/kafka#19677): the uniform assignor's extra-slot rule, first
released in 4.0.1 (the 4.0 backport) and 4.1.0."""

KIP848_REGEX_SINCE: Final = (4, 0)
"""The first release whose brokers resolve a KIP-848 ``SubscribedTopicRegex``
(ConsumerGroupHeartbeat v1, CK@4.0 ``ConsumerGroupHeartbeatRequest.json``; KAFKA-17593
part 8, 24dd11d693). 3.9 has v0 only: a 3.9 client matches a pattern itself and
sends ``SubscribedTopicNames``."""

RE2J_NAMED_GROUPS_SINCE: Final = (4, 1)
"""The first release on RE2/J 1.8, which reads ``(?<name>...)``; 4.0 ships RE2/J 1.7
(``gradle/dependencies.gradle`` of CK@4.0 and CK@4.1)."""

REGEX_BATCH_REFRESH_MIN_INTERVAL_MS: Final = 10_000
"""The least time between two resolutions of a group's regexes: the coordinator
starts one only when ``now > lastRefresh + 10000`` (CK@4.1 ``GroupMetadataManager``
``REGEX_BATCH_REFRESH_MIN_INTERVAL_MS`` 409; CK@4.0 ``REGEX_BATCH_REFRESH_INTERVAL_MS``
336). A constant, not a config."""

REGEX_PERIODIC_REFRESH_SINCE: Final = (4, 1)
"""KAFKA-18961 (61442394c3): the time-based refresh of resolved regexes every
``group.consumer.regex.refresh.interval.ms``; 4.0 refreshes only for an unresolved
regex or a new topic."""

REGEX_REMOVAL_BUMPS_SINCE: Final = (4, 1)
"""A member that drops its regex (``SubscribedTopicRegex`` ``""``) bumps the group epoch
at once from 4.1 (CK@4.1 ``GroupMetadataManager.maybeUpdateRegularExpressions`` 3172-3174);
4.0 has no such branch (CK@4.0 2400-2425), so the change waits for some other bump."""

KIP848_REBALANCE_COMMIT_UNKNOWN_TOPIC_FATAL_SINCE: Final = (3, 8)
"""KAFKA-16224 (apache/kafka#15581): the KIP-848 client's auto-commit before a
revocation no longer retries UNKNOWN_TOPIC_OR_PARTITION (a deleted topic), so the
revocation goes on at once (K@3.8 ``CommitRequestManager`` 329; CK@4.1 321-360).
3.7 retried it until the rebalance timeout ran out."""


def assignor_name(value: str) -> str:
    """Map a ``partition.assignment.strategy`` entry to the assignor's ``name()``.

    Accepts the name itself (``range``), the simple class name
    (``RangeAssignor``) or the fully qualified one
    (``org.apache.kafka.clients.consumer.RangeAssignor``).

    Raises:
        ValueError: an assignor Kafka does not ship.
    """
    v = value.strip()
    if v in _ASSIGNOR_NAMES:
        return v
    simple = v.rsplit(".", 1)[-1]
    if simple in _ASSIGNOR_CLASSES:
        return _ASSIGNOR_CLASSES[simple]
    raise ValueError(
        f"partition.assignment.strategy: unknown assignor {value!r} "
        f"(known: {', '.join(sorted(_ASSIGNOR_NAMES))})"
    )


# ----------------------------------------------------------------- property helpers


def modern_properties(kafka: Mapping[str, object]) -> dict[str, object]:
    """A scenario's ``[kafka]`` table as a modern client reads it.

    A scenario may use the 0.8 spelling of ``auto.offset.reset``
    (``smallest``/``largest``) for every generation; the modern clients call
    those ``earliest``/``latest``.
    """
    props = dict(kafka)
    reset = props.get("auto.offset.reset")
    if reset in ("smallest", "largest"):
        props["auto.offset.reset"] = {"smallest": "earliest", "largest": "latest"}[str(reset)]
    return props


def _get(props: Mapping[str, object], name: str) -> object | None:
    return props.get(name)


def _int(props: Mapping[str, object], name: str, default: int) -> int:
    value = _get(props, name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None


def _bool(props: Mapping[str, object], name: str, default: bool) -> bool:
    value = _get(props, name)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ValueError(f"{name} must be true or false, got {value!r}")


def _list(props: Mapping[str, object], name: str, default: Sequence[str]) -> tuple[str, ...]:
    value = _get(props, name)
    if value is None:
        return tuple(default)
    if isinstance(value, str):
        items = [s for s in (p.strip() for p in value.split(",")) if s]
    elif isinstance(value, list | tuple):
        items = [str(p).strip() for p in value]
    else:
        raise ValueError(f"{name} must be a list or a comma-separated string, got {value!r}")
    if not items:
        raise ValueError(f"{name} must not be empty")
    return tuple(items)


def _positive(name: str, value: int) -> None:
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value}")


# ------------------------------------------------------------------------ client


@dataclass(frozen=True)
class ClassicConsumerConfig:
    """A consumer's settings for the classic group protocol (``group.protocol=classic``).

    Attributes:
        kafka_version: the release whose defaults were applied.
        client_id: ``client.id``; the coordinator prefixes member ids with it.
            Kafka's default is ``consumer-<group.id>-<n>``; here ``consumer``
            unless given (the host passes one per member).
        session_timeout_ms: ``session.timeout.ms`` (B6: 10000 up to 2.8.x,
            45000 from 3.0.0).
        heartbeat_interval_ms: ``heartbeat.interval.ms`` (3000).
        max_poll_interval_ms: ``max.poll.interval.ms`` (300000); also the
            rebalance timeout sent in JoinGroup (``GroupRebalanceConfig``).
        partition_assignment_strategy: ``partition.assignment.strategy`` as
            assignor names in preference order (``[range]`` up to 2.8.x,
            ``[range, cooperative-sticky]`` from 3.0.0).
        group_instance_id: ``group.instance.id`` (static membership, 2.3.0+).
        enable_auto_commit: ``enable.auto.commit`` (true).
        auto_commit_interval_ms: ``auto.commit.interval.ms`` (5000).
        retry_backoff_ms: ``retry.backoff.ms`` (100): the pause after a
            retriable coordinator error, a failed heartbeat or a failed lookup.
            Kafka 3.7+ grows it exponentially up to ``retry.backoff.max.ms``;
            the emulator keeps the fixed 100 ms (not Kafka's 3.7+ behaviour).
        default_api_timeout_ms: ``default.api.timeout.ms`` (60000).
        request_timeout_ms: ``request.timeout.ms`` (305000 from 0.10.1.0 to
            1.1.x, "higher than max.poll.interval.ms"; 30000 from 2.0.0,
            KIP-266). A JoinGroup waits at least the rebalance timeout + 5 s.
        close_timeout_ms: how long ``close()`` waits for its last commit.
            Kafka lacks this as a setting: it is ``KafkaConsumer.close()``'s
            default of 30000 (``DEFAULT_CLOSE_TIMEOUT_MS``).
        auto_offset_reset: ``auto.offset.reset`` (``latest``); the host applies it.
        metadata_max_age_ms: ``metadata.max.age.ms`` (300000): the longest a
            metadata answer is used before the next request (``Metadata.timeToNextUpdate``).
        allow_auto_create_topics: ``allow.auto.create.topics`` (true, KIP-361,
            2.3.0; before it a metadata request by names always allowed it):
            whether a metadata request naming a missing topic may create it.
        exclude_internal_topics: ``exclude.internal.topics`` (true): a pattern
            subscription never matches ``__consumer_offsets``
            (``ConsumerMetadata.retainTopic``).
    """

    kafka_version: str = DEFAULT_KAFKA_VERSION
    client_id: str = "consumer"
    session_timeout_ms: int = default_int("session.timeout.ms", _CLASSIC)
    heartbeat_interval_ms: int = default_int("heartbeat.interval.ms", _CLASSIC)
    max_poll_interval_ms: int = default_int("max.poll.interval.ms", _CLASSIC)
    partition_assignment_strategy: tuple[str, ...] = default_list(
        "partition.assignment.strategy", _CLASSIC
    )
    group_instance_id: str | None = None
    enable_auto_commit: bool = default_bool("enable.auto.commit", _CLASSIC)
    auto_commit_interval_ms: int = default_int("auto.commit.interval.ms", _CLASSIC)
    retry_backoff_ms: int = default_int("retry.backoff.ms", _CLASSIC)
    default_api_timeout_ms: int = default_int("default.api.timeout.ms", _CLASSIC)
    request_timeout_ms: int = default_int("request.timeout.ms", _CLASSIC)
    close_timeout_ms: int = default_int("close.timeout.ms", _CLASSIC)
    auto_offset_reset: str = default_str("auto.offset.reset", _CLASSIC)
    metadata_max_age_ms: int = default_int("metadata.max.age.ms", _CLASSIC)
    allow_auto_create_topics: bool = default_bool("allow.auto.create.topics", _CLASSIC)
    exclude_internal_topics: bool = default_bool("exclude.internal.topics", _CLASSIC)

    @property
    def rebalance_timeout_ms(self) -> int:
        """The JoinGroup rebalance timeout: ``max.poll.interval.ms`` (``GroupRebalanceConfig``)."""
        return self.max_poll_interval_ms

    @property
    def is_static(self) -> bool:
        """Whether ``group.instance.id`` is set (KIP-345)."""
        return self.group_instance_id is not None

    @classmethod
    def for_version(cls, kafka_version: str = DEFAULT_KAFKA_VERSION) -> ClassicConsumerConfig:
        """All defaults of one Kafka release."""
        return cls.from_kafka({}, kafka_version=kafka_version)

    @classmethod
    def from_kafka(
        cls,
        props: Mapping[str, object],
        *,
        kafka_version: str | None = None,
    ) -> ClassicConsumerConfig:
        """Build the config from Kafka property names, with the defaults of a release.

        Args:
            props: Kafka properties (``session.timeout.ms`` ...); a
                ``kafka.version`` entry selects the release when the keyword
                is not given.
            kafka_version: the release whose defaults apply (default 3.9).

        Raises:
            ValueError: a value of the wrong type or range, an unknown
                assignor, or a feature the release lacks; the message names
                the property.
        """
        version = kafka_version or str(props.get("kafka.version") or DEFAULT_KAFKA_VERSION)
        parse_kafka_version(version)

        def default(name: str) -> int:
            return default_int(name, _CLASSIC, version)

        strategy = tuple(
            assignor_name(a)
            for a in _list(
                props,
                "partition.assignment.strategy",
                default_list("partition.assignment.strategy", _CLASSIC, version),
            )
        )
        instance = props.get("group.instance.id")
        reset = str(props.get("auto.offset.reset") or default_str("auto.offset.reset", _CLASSIC))
        if reset not in ("earliest", "latest", "none"):
            raise ValueError(f"auto.offset.reset must be earliest, latest or none, got {reset!r}")
        cfg = cls(
            kafka_version=version,
            client_id=str(props.get("client.id") or "consumer"),
            session_timeout_ms=_int(props, "session.timeout.ms", default("session.timeout.ms")),
            heartbeat_interval_ms=_int(
                props, "heartbeat.interval.ms", default("heartbeat.interval.ms")
            ),
            max_poll_interval_ms=_int(
                props, "max.poll.interval.ms", default("max.poll.interval.ms")
            ),
            partition_assignment_strategy=strategy,
            group_instance_id=None if instance is None else str(instance),
            enable_auto_commit=_bool(
                props, "enable.auto.commit", default_bool("enable.auto.commit", _CLASSIC, version)
            ),
            auto_commit_interval_ms=_int(
                props, "auto.commit.interval.ms", default("auto.commit.interval.ms")
            ),
            retry_backoff_ms=_int(props, "retry.backoff.ms", default("retry.backoff.ms")),
            default_api_timeout_ms=_int(
                props, "default.api.timeout.ms", default("default.api.timeout.ms")
            ),
            request_timeout_ms=_int(props, "request.timeout.ms", default("request.timeout.ms")),
            close_timeout_ms=_int(props, "close.timeout.ms", default("close.timeout.ms")),
            auto_offset_reset=reset,
            metadata_max_age_ms=_int(props, "metadata.max.age.ms", default("metadata.max.age.ms")),
            allow_auto_create_topics=_bool(
                props,
                "allow.auto.create.topics",
                default_bool("allow.auto.create.topics", _CLASSIC, version),
            ),
            exclude_internal_topics=_bool(
                props,
                "exclude.internal.topics",
                default_bool("exclude.internal.topics", _CLASSIC, version),
            ),
        )
        for name, value in (
            ("session.timeout.ms", cfg.session_timeout_ms),
            ("heartbeat.interval.ms", cfg.heartbeat_interval_ms),
            ("max.poll.interval.ms", cfg.max_poll_interval_ms),
            ("auto.commit.interval.ms", cfg.auto_commit_interval_ms),
            ("request.timeout.ms", cfg.request_timeout_ms),
        ):
            _positive(name, value)
        if cfg.retry_backoff_ms < 0 or cfg.close_timeout_ms < 0:
            raise ValueError("retry.backoff.ms and close.timeout.ms must be >= 0")
        if cfg.metadata_max_age_ms < 0:
            raise ValueError("metadata.max.age.ms must be >= 0")
        # GroupRebalanceConfig / ConsumerConfig: heartbeat.interval.ms < session.timeout.ms.
        if cfg.heartbeat_interval_ms >= cfg.session_timeout_ms:
            raise ValueError("heartbeat.interval.ms must be lower than session.timeout.ms")
        if cfg.group_instance_id is not None and not kafka_version_at_least(version, (2, 3)):
            raise ValueError(f"group.instance.id needs Kafka 2.3.0 or later, not {version}")
        if cfg.group_instance_id == "":
            raise ValueError("group.instance.id must not be empty")
        if "cooperative-sticky" in strategy and not kafka_version_at_least(version, (2, 4)):
            raise ValueError(
                f"the cooperative-sticky assignor needs Kafka 2.4.0 or later, not {version}"
            )
        if len(set(strategy)) != len(strategy):
            raise ValueError("partition.assignment.strategy lists an assignor twice")
        return cfg


@dataclass(frozen=True)
class Kip848ConsumerConfig:
    """A consumer's settings for ``group.protocol=consumer``, by Kafka's names.

    ``session.timeout.ms``, ``heartbeat.interval.ms`` and
    ``partition.assignment.strategy`` do not apply to this protocol (C1): the
    broker owns the session and heartbeat settings.

    Attributes:
        group_instance_id: ``group.instance.id`` (static membership).
        max_poll_interval_ms: ``max.poll.interval.ms`` (300000); also the
            RebalanceTimeoutMs the member sends.
        enable_auto_commit: ``enable.auto.commit`` (true).
        auto_commit_interval_ms: ``auto.commit.interval.ms`` (5000).
        group_remote_assignor: ``group.remote.assignor`` (null: the broker's default).
        client_rack: ``client.rack`` (null).
        retry_backoff_ms: ``retry.backoff.ms`` (100).
        retry_backoff_max_ms: ``retry.backoff.max.ms`` (1000).
        request_timeout_ms: ``request.timeout.ms`` (30000): how long a request
            waits for its answer before the client gives up on the connection.
        commit_on_poll: the client is Kafka 4.0 or later (``kafka.version``),
            where KAFKA-18641 moved the interval auto-commit and, with
            auto-commit on, the start of a reconciliation to the
            application's ``poll()`` (``ApplicationEventProcessor`` on the
            ``PollEvent``, before ``poll()`` moves any position). Before 4.0 the
            background thread auto-committed ``allConsumed()`` whenever the
            interval ran out, records handed out but not processed included.
        broker_regex: the client is Kafka 4.0 or later (:data:`KIP848_REGEX_SINCE`):
            ``subscribe(SubscriptionPattern)`` sends the pattern as
            ``SubscribedTopicRegex`` (ConsumerGroupHeartbeat v1) for the
            coordinator to resolve. Before, there is no such field.
        rebalance_commit_unknown_topic_fatal: the client is 3.8 or later
            (:data:`KIP848_REBALANCE_COMMIT_UNKNOWN_TOPIC_FATAL_SINCE`): the commit
            before a revocation gives up on UNKNOWN_TOPIC_OR_PARTITION instead of
            retrying it until the rebalance timeout.
    """

    group_instance_id: str | None = None
    max_poll_interval_ms: int = default_int("max.poll.interval.ms", _CONSUMER)
    enable_auto_commit: bool = default_bool("enable.auto.commit", _CONSUMER)
    auto_commit_interval_ms: int = default_int("auto.commit.interval.ms", _CONSUMER)
    group_remote_assignor: str | None = None
    client_rack: str | None = None
    retry_backoff_ms: int = default_int("retry.backoff.ms", _CONSUMER)
    retry_backoff_max_ms: int = default_int("retry.backoff.max.ms", _CONSUMER)
    request_timeout_ms: int = default_int("request.timeout.ms", _CONSUMER)
    commit_on_poll: bool = False
    broker_regex: bool = False
    rebalance_commit_unknown_topic_fatal: bool = True

    @classmethod
    def from_kafka(
        cls, props: Mapping[str, object], *, kafka_version: str | None = None
    ) -> Kip848ConsumerConfig:
        """Build the config from Kafka property names, with Kafka's defaults.

        Args:
            props: Kafka properties; a ``kafka.version`` entry selects the
                release when the keyword is not given.
            kafka_version: the client's release (default 3.9).

        Raises:
            ValueError: a value of the wrong type or range, naming the property.
        """
        version = kafka_version or str(props.get("kafka.version") or DEFAULT_KAFKA_VERSION)

        def default(name: str) -> int:
            return default_int(name, _CONSUMER, version)

        def get_int(name: str, default: int) -> int:
            value = props.get(name)
            if value is None:
                return default
            if isinstance(value, bool) or not isinstance(value, int | float | str):
                raise ValueError(f"{name} must be an integer, got {value!r}")
            try:
                number = int(value)
            except ValueError:
                raise ValueError(f"{name} must be an integer, got {value!r}") from None
            if number <= 0:
                raise ValueError(f"{name} must be > 0, got {number}")
            return number

        def get_str(name: str) -> str | None:
            value = props.get(name)
            if value is None:
                return None
            text = str(value).strip()
            if not text:
                raise ValueError(f"{name} must not be empty")
            return text

        auto = props.get("enable.auto.commit", default_bool("enable.auto.commit", _CONSUMER))
        if isinstance(auto, str) and auto.lower() in ("true", "false"):
            auto = auto.lower() == "true"
        if not isinstance(auto, bool):
            raise ValueError(f"enable.auto.commit must be true or false, got {auto!r}")
        cfg = cls(
            group_instance_id=get_str("group.instance.id"),
            max_poll_interval_ms=get_int("max.poll.interval.ms", default("max.poll.interval.ms")),
            enable_auto_commit=auto,
            auto_commit_interval_ms=get_int(
                "auto.commit.interval.ms", default("auto.commit.interval.ms")
            ),
            group_remote_assignor=get_str("group.remote.assignor"),
            client_rack=get_str("client.rack"),
            retry_backoff_ms=get_int("retry.backoff.ms", default("retry.backoff.ms")),
            retry_backoff_max_ms=get_int("retry.backoff.max.ms", default("retry.backoff.max.ms")),
            request_timeout_ms=get_int("request.timeout.ms", default("request.timeout.ms")),
            commit_on_poll=kafka_version_at_least(version, KIP848_COMMIT_ON_POLL_SINCE),
            broker_regex=kafka_version_at_least(version, KIP848_REGEX_SINCE),
            rebalance_commit_unknown_topic_fatal=kafka_version_at_least(
                version, KIP848_REBALANCE_COMMIT_UNKNOWN_TOPIC_FATAL_SINCE
            ),
        )
        if cfg.retry_backoff_max_ms < cfg.retry_backoff_ms:
            raise ValueError("retry.backoff.max.ms must be >= retry.backoff.ms")
        return cfg


# ------------------------------------------------------------------------ broker


MIGRATION_SINCE: Final = (3, 8)
"""The first release with online migration between classic and consumer groups
(KAFKA-16294 and the paths after it; ``group.consumer.migration.policy``)."""

MIGRATION_POLICIES: Final = ("disabled", "upgrade", "downgrade", "bidirectional")
"""``ConsumerGroupMigrationPolicy`` values (parsed case-insensitively, as Kafka does)."""


@dataclass(frozen=True)
class GroupCoordinatorConfig:
    """The broker's group-coordinator settings, classic and KIP-848 (B6, C6).

    Attributes:
        kafka_version: the release whose defaults were applied.
        group_min_session_timeout_ms: ``group.min.session.timeout.ms`` (6000).
        group_max_session_timeout_ms: ``group.max.session.timeout.ms``
            (300000 up to 2.2.x, 1800000 from 2.3.0).
        group_initial_rebalance_delay_ms: ``group.initial.rebalance.delay.ms``
            (3000, since 0.11.0; 0 before, when the setting did not exist).
        group_max_size: ``group.max.size`` (``Integer.MAX_VALUE``, since 2.2).
        group_consumer_session_timeout_ms: ``group.consumer.session.timeout.ms``
            (45000; KIP-848, bounds [45000, 60000] by default).
        group_consumer_min_session_timeout_ms: ``group.consumer.min.session.timeout.ms`` (45000).
        group_consumer_max_session_timeout_ms: ``group.consumer.max.session.timeout.ms`` (60000).
        group_consumer_heartbeat_interval_ms: ``group.consumer.heartbeat.interval.ms``
            (5000; bounds [5000, 15000] by default).
        group_consumer_min_heartbeat_interval_ms:
            ``group.consumer.min.heartbeat.interval.ms`` (5000).
        group_consumer_max_heartbeat_interval_ms:
            ``group.consumer.max.heartbeat.interval.ms`` (15000).
        group_consumer_assignors: ``group.consumer.assignors`` as names
            (``["uniform", "range"]``; the first is the default).
        group_consumer_max_size: ``group.consumer.max.size`` (``Integer.MAX_VALUE``).
        group_consumer_migration_policy: ``group.consumer.migration.policy`` (3.8+:
            ``disabled`` in 3.8-3.9, ``bidirectional`` from 4.0; ``disabled`` before 3.8,
            which has no migration).
        group_consumer_assignment_interval_ms:
            ``group.consumer.assignment.interval.ms``: the target assignment
            is computed at most once per interval (1000 from Kafka 4.3, which
            introduced it; 0 before, when every heartbeat that saw a new group
            epoch ran the assignor).
        new_member_join_timeout_ms: how long a brand-new member's JoinGroup
            may wait. Kafka lacks this as a setting: it is the constant
            ``GroupCoordinator.NewMemberJoinTimeoutMs`` = 300000 (B2).
        regex_refresh_interval_ms: how often a KIP-848 group's resolved regexes
            are resolved again with no other reason:
            ``group.consumer.regex.refresh.interval.ms`` (600000) from 4.1
            (:data:`REGEX_PERIODIC_REFRESH_SINCE`); ``None`` before, when only an
            unresolved regex or a new topic starts a resolution. Either way, two
            resolutions are at least :data:`REGEX_BATCH_REFRESH_MIN_INTERVAL_MS` apart.
    """

    kafka_version: str = DEFAULT_KAFKA_VERSION
    group_min_session_timeout_ms: int = default_int("group.min.session.timeout.ms", _CLASSIC)
    group_max_session_timeout_ms: int = default_int("group.max.session.timeout.ms", _CLASSIC)
    group_initial_rebalance_delay_ms: int = default_int(
        "group.initial.rebalance.delay.ms", _CLASSIC
    )
    group_max_size: int = default_int("group.max.size", _CLASSIC)
    group_consumer_session_timeout_ms: int = default_int(
        "group.consumer.session.timeout.ms", _CONSUMER
    )
    group_consumer_min_session_timeout_ms: int = default_int(
        "group.consumer.min.session.timeout.ms", _CONSUMER
    )
    group_consumer_max_session_timeout_ms: int = default_int(
        "group.consumer.max.session.timeout.ms", _CONSUMER
    )
    group_consumer_heartbeat_interval_ms: int = default_int(
        "group.consumer.heartbeat.interval.ms", _CONSUMER
    )
    group_consumer_min_heartbeat_interval_ms: int = default_int(
        "group.consumer.min.heartbeat.interval.ms", _CONSUMER
    )
    group_consumer_max_heartbeat_interval_ms: int = default_int(
        "group.consumer.max.heartbeat.interval.ms", _CONSUMER
    )
    group_consumer_assignors: tuple[str, ...] = default_list("group.consumer.assignors", _CONSUMER)
    group_consumer_max_size: int = default_int("group.consumer.max.size", _CONSUMER)
    group_consumer_migration_policy: str = default_str("group.consumer.migration.policy", _CONSUMER)
    group_consumer_assignment_interval_ms: int = default_int(
        "group.consumer.assignment.interval.ms", _CONSUMER
    )
    new_member_join_timeout_ms: int = default_int("new.member.join.timeout.ms", _CLASSIC)
    regex_refresh_interval_ms: int | None = (
        default_int("group.consumer.regex.refresh.interval.ms", _CONSUMER)
        if kafka_version_at_least(DEFAULT_KAFKA_VERSION, REGEX_PERIODIC_REFRESH_SINCE)
        else None
    )

    @classmethod
    def for_version(cls, kafka_version: str = DEFAULT_KAFKA_VERSION) -> GroupCoordinatorConfig:
        """All defaults of one Kafka release."""
        return cls.from_kafka({}, kafka_version=kafka_version)

    @classmethod
    def from_kafka(
        cls,
        props: Mapping[str, object],
        *,
        kafka_version: str | None = None,
    ) -> GroupCoordinatorConfig:
        """Build the config from Kafka broker property names, with a release's defaults.

        Args:
            props: broker properties (``group.min.session.timeout.ms`` ...);
                a ``kafka.version`` entry selects the release when the keyword
                is not given. Unknown names are ignored, as Kafka warns and ignores them.
            kafka_version: the release whose defaults apply (default 3.9).

        Raises:
            ValueError: a value of the wrong type or range, naming the property.
        """
        version = kafka_version or str(props.get("kafka.version") or DEFAULT_KAFKA_VERSION)
        parse_kafka_version(version)

        def setting(name: str) -> int:
            # The broker's settings are the same for both generations it coordinates.
            return _int(props, name, default_int(name, _CLASSIC, version))

        cfg = cls(
            kafka_version=version,
            group_min_session_timeout_ms=setting("group.min.session.timeout.ms"),
            group_max_session_timeout_ms=setting("group.max.session.timeout.ms"),
            group_initial_rebalance_delay_ms=setting("group.initial.rebalance.delay.ms"),
            group_max_size=setting("group.max.size"),
            group_consumer_session_timeout_ms=setting("group.consumer.session.timeout.ms"),
            group_consumer_min_session_timeout_ms=setting("group.consumer.min.session.timeout.ms"),
            group_consumer_max_session_timeout_ms=setting("group.consumer.max.session.timeout.ms"),
            group_consumer_heartbeat_interval_ms=setting("group.consumer.heartbeat.interval.ms"),
            group_consumer_min_heartbeat_interval_ms=setting(
                "group.consumer.min.heartbeat.interval.ms"
            ),
            group_consumer_max_heartbeat_interval_ms=setting(
                "group.consumer.max.heartbeat.interval.ms"
            ),
            group_consumer_assignors=_list(
                props,
                "group.consumer.assignors",
                default_list("group.consumer.assignors", _CONSUMER, version),
            ),
            group_consumer_max_size=setting("group.consumer.max.size"),
            group_consumer_migration_policy=str(
                props.get("group.consumer.migration.policy")
                or default_str("group.consumer.migration.policy", _CONSUMER, version)
            ).lower(),
            group_consumer_assignment_interval_ms=setting("group.consumer.assignment.interval.ms"),
            new_member_join_timeout_ms=setting("new.member.join.timeout.ms"),
            # Before 4.1 the key does not exist: Kafka ignores it, as any unknown config.
            regex_refresh_interval_ms=(
                setting("group.consumer.regex.refresh.interval.ms")
                if kafka_version_at_least(version, REGEX_PERIODIC_REFRESH_SINCE)
                else None
            ),
        )
        if (
            cfg.regex_refresh_interval_ms is not None
            and cfg.regex_refresh_interval_ms < REGEX_BATCH_REFRESH_MIN_INTERVAL_MS
        ):
            raise ValueError(
                "group.consumer.regex.refresh.interval.ms must be at least "
                f"{REGEX_BATCH_REFRESH_MIN_INTERVAL_MS} (atLeast(10 * 1000))"
            )
        if cfg.group_consumer_migration_policy not in MIGRATION_POLICIES:
            raise ValueError(
                "group.consumer.migration.policy must be one of " + ", ".join(MIGRATION_POLICIES)
            )
        if cfg.group_min_session_timeout_ms > cfg.group_max_session_timeout_ms:
            raise ValueError(
                "group.min.session.timeout.ms must not exceed group.max.session.timeout.ms"
            )
        if cfg.group_initial_rebalance_delay_ms < 0:
            raise ValueError("group.initial.rebalance.delay.ms must be >= 0")
        if cfg.group_consumer_assignment_interval_ms < 0:
            raise ValueError("group.consumer.assignment.interval.ms must be >= 0")
        for name, value in (
            ("group.max.size", cfg.group_max_size),
            ("group.consumer.max.size", cfg.group_consumer_max_size),
            ("new.member.join.timeout.ms", cfg.new_member_join_timeout_ms),
        ):
            _positive(name, value)
        if not (
            cfg.group_consumer_min_session_timeout_ms
            <= cfg.group_consumer_session_timeout_ms
            <= cfg.group_consumer_max_session_timeout_ms
        ):
            raise ValueError("group.consumer.session.timeout.ms must lie within its min and max")
        if not (
            cfg.group_consumer_min_heartbeat_interval_ms
            <= cfg.group_consumer_heartbeat_interval_ms
            <= cfg.group_consumer_max_heartbeat_interval_ms
        ):
            raise ValueError("group.consumer.heartbeat.interval.ms must lie within its min and max")
        if cfg.group_consumer_heartbeat_interval_ms >= cfg.group_consumer_session_timeout_ms:
            raise ValueError(
                "group.consumer.heartbeat.interval.ms must be lower than "
                "group.consumer.session.timeout.ms"
            )
        return cfg
