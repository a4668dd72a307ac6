"""The legacy (0.8.2) high-level consumer's configuration, by Kafka's names.

Defaults are those of Kafka 0.8.2.2 ``consumer/ConsumerConfig.scala`` and
``utils/ZkUtils.scala`` (class ``ZKConfig``), kafka-protocols.md A3. Durations
are in Kafka's own milliseconds; the run's ``time_scale`` is applied by the
clock, never here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# Kafka 0.8.2.2 defaults (A3).
DEFAULT_ZK_SESSION_TIMEOUT_MS = 6000
DEFAULT_ZK_SYNC_TIME_MS = 2000
DEFAULT_REBALANCE_MAX_RETRIES = 4
DEFAULT_AUTO_COMMIT_INTERVAL_MS = 60 * 1000
DEFAULT_AUTO_OFFSET_RESET = "largest"
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
    """

    zookeeper_session_timeout_ms: int = DEFAULT_ZK_SESSION_TIMEOUT_MS
    zookeeper_connection_timeout_ms: int = DEFAULT_ZK_SESSION_TIMEOUT_MS
    zookeeper_sync_time_ms: int = DEFAULT_ZK_SYNC_TIME_MS
    rebalance_max_retries: int = DEFAULT_REBALANCE_MAX_RETRIES
    rebalance_backoff_ms: int = DEFAULT_ZK_SYNC_TIME_MS
    auto_commit_enable: bool = True
    auto_commit_interval_ms: int = DEFAULT_AUTO_COMMIT_INTERVAL_MS
    auto_offset_reset: str = DEFAULT_AUTO_OFFSET_RESET
    partition_assignment_strategy: str = "range"
    consumer_id: str | None = None

    @classmethod
    def from_kafka(cls, props: Mapping[str, object]) -> LegacyConsumerConfig:
        """Build the config from Kafka property names, applying Kafka's defaults.

        ``rebalance.backoff.ms`` defaults to the configured
        ``zookeeper.sync.time.ms`` and ``zookeeper.connection.timeout.ms`` to the
        configured session timeout, as ``ConsumerConfig`` does.

        Raises:
            ValueError: a value of the wrong type, naming the property.
        """
        session = _int(props, "zookeeper.session.timeout.ms", DEFAULT_ZK_SESSION_TIMEOUT_MS)
        sync = _int(props, "zookeeper.sync.time.ms", DEFAULT_ZK_SYNC_TIME_MS)
        reset = str(_get(props, "auto.offset.reset", DEFAULT_AUTO_OFFSET_RESET))
        # The newer clients' spelling is accepted too (earliest = smallest).
        reset = {"earliest": "smallest", "latest": "largest"}.get(reset, reset)
        if reset not in ("smallest", "largest"):
            raise ValueError(f"auto.offset.reset must be smallest or largest, got {reset!r}")
        cid = props.get("consumer.id")
        cfg = cls(
            zookeeper_session_timeout_ms=session,
            zookeeper_connection_timeout_ms=_int(props, "zookeeper.connection.timeout.ms", session),
            zookeeper_sync_time_ms=sync,
            rebalance_max_retries=_int(
                props, "rebalance.max.retries", DEFAULT_REBALANCE_MAX_RETRIES
            ),
            rebalance_backoff_ms=_int(props, "rebalance.backoff.ms", sync),
            auto_commit_enable=_bool(props, "auto.commit.enable", True),
            auto_commit_interval_ms=_int(
                props, "auto.commit.interval.ms", DEFAULT_AUTO_COMMIT_INTERVAL_MS
            ),
            auto_offset_reset=reset,
            partition_assignment_strategy=str(
                _get(props, "partition.assignment.strategy", "range")
            ),
            consumer_id=None if cid is None else str(cid),
        )
        if cfg.rebalance_max_retries < 1:
            raise ValueError("rebalance.max.retries must be >= 1")
        if cfg.rebalance_backoff_ms < 0 or cfg.zookeeper_session_timeout_ms <= 0:
            raise ValueError("rebalance.backoff.ms and zookeeper.session.timeout.ms must be > 0")
        return cfg
