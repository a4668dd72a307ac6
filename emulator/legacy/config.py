"""The legacy (0.8.2) high-level consumer's configuration, by Kafka's names.

Defaults are those of Kafka 0.8.2.2 ``consumer/ConsumerConfig.scala`` and
``utils/ZkUtils.scala`` (class ``ZKConfig``), kafka-protocols.md A3, as the
Kafka key registry (:mod:`emulator.kafka_keys`) holds them. Durations
are in Kafka's own milliseconds; the run's ``time_scale`` is applied by the
clock, never here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from emulator.kafka_keys import KafkaValue, default_bool, default_int, default_str

_GENERATION: Final = "zookeeper"
"""The generation whose defaults the 0.8.2 consumer takes (always 0.8.2.2)."""
# ZookeeperConsumerConnector's watcher executor wakes at least this often.
WATCHER_EXECUTOR_WAKE_MS = 1000


def _get(props: Mapping[str, object], name: str, default: object) -> object:
    value = props.get(name)
    return default if value is None else value


def _int(props: Mapping[str, object], name: str, default: int) -> int:
    value = _get(props, name, default)
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None


def _bool(props: Mapping[str, object], name: str, default: bool) -> bool:
    value = _get(props, name, default)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ValueError(f"{name} must be true or false, got {value!r}")


@dataclass(frozen=True)
class LegacyConsumerConfig:
    """Kafka 0.8.2.2 consumer settings that shape a rebalance.

    Attributes:
        zookeeper_session_timeout_ms: ``zookeeper.session.timeout.ms`` (6000).
        zookeeper_connection_timeout_ms: ``zookeeper.connection.timeout.ms``
            (defaults to the session timeout).
        zookeeper_sync_time_ms: ``zookeeper.sync.time.ms`` (2000).
        rebalance_max_retries: ``rebalance.max.retries`` (4): the number of
            attempts of one ``syncedRebalance``.
        rebalance_backoff_ms: ``rebalance.backoff.ms`` (defaults to
            ``zookeeper.sync.time.ms``): the sleep after *each* failed attempt.
        auto_commit_enable: ``auto.commit.enable`` (true).
        auto_commit_interval_ms: ``auto.commit.interval.ms`` (60000).
        auto_offset_reset: ``auto.offset.reset`` (``largest``): where a
            partition with no committed offset starts.
        partition_assignment_strategy: ``partition.assignment.strategy``
            (``range``; any value but ``roundrobin`` means range).
        consumer_id: ``consumer.id`` (unset: generated, A2).
        exclude_internal_topics: ``exclude.internal.topics`` (true): a filter
            never allows ``__consumer_offsets`` (K@0.8.2.2
            ``consumer/ConsumerConfig.scala`` 51, 179; ``TopicFilter.scala``).
    """

    zookeeper_session_timeout_ms: int = default_int("zookeeper.session.timeout.ms")
    zookeeper_connection_timeout_ms: int = default_int("zookeeper.connection.timeout.ms")
    zookeeper_sync_time_ms: int = default_int("zookeeper.sync.time.ms")
    rebalance_max_retries: int = default_int("rebalance.max.retries")
    rebalance_backoff_ms: int = default_int("rebalance.backoff.ms")
    auto_commit_enable: bool = default_bool("auto.commit.enable")
    auto_commit_interval_ms: int = default_int("auto.commit.interval.ms")
    auto_offset_reset: str = default_str("auto.offset.reset")
    partition_assignment_strategy: str = default_str("partition.assignment.strategy")
    consumer_id: str | None = None
    exclude_internal_topics: bool = default_bool("exclude.internal.topics")

    @classmethod
    def from_kafka(cls, props: Mapping[str, object]) -> LegacyConsumerConfig:
        """Build the config from Kafka property names, applying Kafka's defaults.

        ``rebalance.backoff.ms`` defaults to the configured
        ``zookeeper.sync.time.ms`` and ``zookeeper.connection.timeout.ms`` to the
        configured session timeout, as ``ConsumerConfig`` does.

        Raises:
            ValueError: a value of the wrong type, naming the property.
        """
        session = _int(
            props, "zookeeper.session.timeout.ms", default_int("zookeeper.session.timeout.ms")
        )
        sync = _int(props, "zookeeper.sync.time.ms", default_int("zookeeper.sync.time.ms"))
        # The keys whose default is another key's value read the configured one.
        configured: dict[str, KafkaValue] = {
            "zookeeper.session.timeout.ms": session,
            "zookeeper.sync.time.ms": sync,
        }

        def default(name: str) -> int:
            return default_int(name, _GENERATION, lookup=configured.__getitem__)

        reset = str(_get(props, "auto.offset.reset", default_str("auto.offset.reset")))
        # The newer clients' spelling is accepted too (earliest = smallest).
        reset = {"earliest": "smallest", "latest": "largest"}.get(reset, reset)
        if reset not in ("smallest", "largest"):
            raise ValueError(f"auto.offset.reset must be smallest or largest, got {reset!r}")
        cid = props.get("consumer.id")
        cfg = cls(
            zookeeper_session_timeout_ms=session,
            zookeeper_connection_timeout_ms=_int(
                props,
                "zookeeper.connection.timeout.ms",
                default("zookeeper.connection.timeout.ms"),
            ),
            zookeeper_sync_time_ms=sync,
            rebalance_max_retries=_int(
                props, "rebalance.max.retries", default("rebalance.max.retries")
            ),
            rebalance_backoff_ms=_int(
                props, "rebalance.backoff.ms", default("rebalance.backoff.ms")
            ),
            auto_commit_enable=_bool(
                props, "auto.commit.enable", default_bool("auto.commit.enable")
            ),
            auto_commit_interval_ms=_int(
                props, "auto.commit.interval.ms", default("auto.commit.interval.ms")
            ),
            auto_offset_reset=reset,
            partition_assignment_strategy=str(
                _get(
                    props,
                    "partition.assignment.strategy",
                    default_str("partition.assignment.strategy"),
                )
            ),
            consumer_id=None if cid is None else str(cid),
            exclude_internal_topics=_bool(
                props, "exclude.internal.topics", default_bool("exclude.internal.topics")
            ),
        )
        if cfg.rebalance_max_retries < 1:
            raise ValueError("rebalance.max.retries must be >= 1")
        if cfg.rebalance_backoff_ms < 0 or cfg.zookeeper_session_timeout_ms <= 0:
            raise ValueError("rebalance.backoff.ms and zookeeper.session.timeout.ms must be > 0")
        return cfg
