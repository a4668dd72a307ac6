"""Configuration of the broker-coordinated protocols, by Kafka's names, per Kafka version.

Client settings are those of ``clients/.../consumer/ConsumerConfig.java`` and
broker settings those of ``core/.../KafkaConfig.scala`` /
``GroupCoordinatorConfig.java`` at each release (kafka-protocols.md B6, C6).
A ``kafka_version`` selector picks the defaults of that release; a property
given explicitly always wins. Durations are Kafka's own milliseconds; the
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

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

DEFAULT_KAFKA_VERSION: Final = "3.9"
"""The release whose defaults apply when no ``kafka_version`` is given."""

MIN_KAFKA_VERSION: Final = (0, 10, 1)
"""The first release with ``max.poll.interval.ms`` (KIP-62)."""

INT_MAX: Final = 2**31 - 1
"""Java's ``Integer.MAX_VALUE``, Kafka's "no limit"."""

# Assignor names as ConsumerPartitionAssignor.name() returns them, keyed by
# the class names partition.assignment.strategy accepts.
_ASSIGNOR_CLASSES: Final[Mapping[str, str]] = {
    "RangeAssignor": "range",
    "RoundRobinAssignor": "roundrobin",
    "StickyAssignor": "sticky",
    "CooperativeStickyAssignor": "cooperative-sticky",
}
_ASSIGNOR_NAMES: Final = frozenset(_ASSIGNOR_CLASSES.values())


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


def _at_least(version: tuple[int, ...], *release: int) -> bool:
    return version >= (*release, 0, 0, 0)[:4]


KIP848_COMMIT_ON_POLL_SINCE: Final = (4, 0)
"""KAFKA-18641: the KIP-848 client's interval auto-commit and, with auto-commit on,
the start of a reconciliation run in the application's ``poll()`` from this release."""

UNIFORM_STABLE_QUOTA_SINCE: Final = (4, 0, 1)
"""KAFKA-18688 (apache/kafka#19677): the uniform assignor's extra-slot rule, first
released in 4.0.1 (the 4.0 backport) and 4.1.0."""


def kafka_version_at_least(version: object, release: tuple[int, ...]) -> bool:
    """Whether ``version`` (a ``kafka_version`` string; ``None``: the default 3.9) is
    ``release`` or later.

    Raises:
        ValueError: a malformed version.
    """
    text = DEFAULT_KAFKA_VERSION if version is None else str(version)
    return _at_least(parse_kafka_version(text), *release)


def default_session_timeout_ms(kafka_version: str = DEFAULT_KAFKA_VERSION) -> int:
    """``session.timeout.ms``'s default: 10000 up to 2.8.x, 45000 from 3.0.0 (B6)."""
    return 45000 if _at_least(parse_kafka_version(kafka_version), 3, 0) else 10000


def default_assignment_strategy(kafka_version: str = DEFAULT_KAFKA_VERSION) -> tuple[str, ...]:
    """``partition.assignment.strategy``'s default as assignor names (B6)."""
    if _at_least(parse_kafka_version(kafka_version), 3, 0):
        return ("range", "cooperative-sticky")
    return ("range",)


def default_group_max_session_timeout_ms(kafka_version: str = DEFAULT_KAFKA_VERSION) -> int:
    """``group.max.session.timeout.ms``'s default: 300000 up to 2.2.x, 1800000 from 2.3.0."""
    return 1800000 if _at_least(parse_kafka_version(kafka_version), 2, 3) else 300000


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
    """

    kafka_version: str = DEFAULT_KAFKA_VERSION
    client_id: str = "consumer"
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 3000
    max_poll_interval_ms: int = 300000
    partition_assignment_strategy: tuple[str, ...] = ("range", "cooperative-sticky")
    group_instance_id: str | None = None
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5000
    retry_backoff_ms: int = 100
    default_api_timeout_ms: int = 60000
    request_timeout_ms: int = 30000
    close_timeout_ms: int = 30000
    auto_offset_reset: str = "latest"

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
        parsed = parse_kafka_version(version)
        strategy = tuple(
            assignor_name(a)
            for a in _list(
                props, "partition.assignment.strategy", default_assignment_strategy(version)
            )
        )
        instance = props.get("group.instance.id")
        reset = str(props.get("auto.offset.reset") or "latest")
        if reset not in ("earliest", "latest", "none"):
            raise ValueError(f"auto.offset.reset must be earliest, latest or none, got {reset!r}")
        cfg = cls(
            kafka_version=version,
            client_id=str(props.get("client.id") or "consumer"),
            session_timeout_ms=_int(
                props, "session.timeout.ms", default_session_timeout_ms(version)
            ),
            heartbeat_interval_ms=_int(props, "heartbeat.interval.ms", 3000),
            max_poll_interval_ms=_int(props, "max.poll.interval.ms", 300000),
            partition_assignment_strategy=strategy,
            group_instance_id=None if instance is None else str(instance),
            enable_auto_commit=_bool(props, "enable.auto.commit", True),
            auto_commit_interval_ms=_int(props, "auto.commit.interval.ms", 5000),
            retry_backoff_ms=_int(props, "retry.backoff.ms", 100),
            default_api_timeout_ms=_int(props, "default.api.timeout.ms", 60000),
            request_timeout_ms=_int(
                props, "request.timeout.ms", 30000 if _at_least(parsed, 2, 0) else 305000
            ),
            close_timeout_ms=_int(props, "close.timeout.ms", 30000),
            auto_offset_reset=reset,
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
        # GroupRebalanceConfig / ConsumerConfig: heartbeat.interval.ms < session.timeout.ms.
        if cfg.heartbeat_interval_ms >= cfg.session_timeout_ms:
            raise ValueError("heartbeat.interval.ms must be lower than session.timeout.ms")
        if cfg.group_instance_id is not None and not _at_least(parsed, 2, 3):
            raise ValueError(f"group.instance.id needs Kafka 2.3.0 or later, not {version}")
        if cfg.group_instance_id == "":
            raise ValueError("group.instance.id must not be empty")
        if "cooperative-sticky" in strategy and not _at_least(parsed, 2, 4):
            raise ValueError(
                f"the cooperative-sticky assignor needs Kafka 2.4.0 or later, not {version}"
            )
        if len(set(strategy)) != len(strategy):
            raise ValueError("partition.assignment.strategy lists an assignor twice")
        return cfg


# ------------------------------------------------------------------------ broker


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
        group_consumer_assignment_interval_ms:
            ``group.consumer.assignment.interval.ms``: the target assignment
            is computed at most once per interval (1000 from Kafka 4.3, which
            introduced it; 0 before, when every heartbeat that saw a new group
            epoch ran the assignor).
        new_member_join_timeout_ms: how long a brand-new member's JoinGroup
            may wait. Kafka lacks this as a setting: it is the constant
            ``GroupCoordinator.NewMemberJoinTimeoutMs`` = 300000 (B2).
    """

    kafka_version: str = DEFAULT_KAFKA_VERSION
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_initial_rebalance_delay_ms: int = 3000
    group_max_size: int = INT_MAX
    group_consumer_session_timeout_ms: int = 45000
    group_consumer_min_session_timeout_ms: int = 45000
    group_consumer_max_session_timeout_ms: int = 60000
    group_consumer_heartbeat_interval_ms: int = 5000
    group_consumer_min_heartbeat_interval_ms: int = 5000
    group_consumer_max_heartbeat_interval_ms: int = 15000
    group_consumer_assignors: tuple[str, ...] = ("uniform", "range")
    group_consumer_max_size: int = INT_MAX
    group_consumer_assignment_interval_ms: int = 0
    new_member_join_timeout_ms: int = 300000

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
        parsed = parse_kafka_version(version)
        delay_default = 3000 if _at_least(parsed, 0, 11) else 0
        cfg = cls(
            kafka_version=version,
            group_min_session_timeout_ms=_int(props, "group.min.session.timeout.ms", 6000),
            group_max_session_timeout_ms=_int(
                props, "group.max.session.timeout.ms", default_group_max_session_timeout_ms(version)
            ),
            group_initial_rebalance_delay_ms=_int(
                props, "group.initial.rebalance.delay.ms", delay_default
            ),
            group_max_size=_int(props, "group.max.size", INT_MAX),
            group_consumer_session_timeout_ms=_int(
                props, "group.consumer.session.timeout.ms", 45000
            ),
            group_consumer_min_session_timeout_ms=_int(
                props, "group.consumer.min.session.timeout.ms", 45000
            ),
            group_consumer_max_session_timeout_ms=_int(
                props, "group.consumer.max.session.timeout.ms", 60000
            ),
            group_consumer_heartbeat_interval_ms=_int(
                props, "group.consumer.heartbeat.interval.ms", 5000
            ),
            group_consumer_min_heartbeat_interval_ms=_int(
                props, "group.consumer.min.heartbeat.interval.ms", 5000
            ),
            group_consumer_max_heartbeat_interval_ms=_int(
                props, "group.consumer.max.heartbeat.interval.ms", 15000
            ),
            group_consumer_assignors=_list(props, "group.consumer.assignors", ("uniform", "range")),
            group_consumer_max_size=_int(props, "group.consumer.max.size", INT_MAX),
            group_consumer_assignment_interval_ms=_int(
                props,
                "group.consumer.assignment.interval.ms",
                1000 if _at_least(parsed, 4, 3) else 0,
            ),
            new_member_join_timeout_ms=_int(props, "new.member.join.timeout.ms", 300000),
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
