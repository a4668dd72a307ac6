"""The Kafka settings of a run's brokers and consumer hosts that no protocol config holds.

The protocol state machines take their settings as config classes
(:class:`emulator.legacy.config.LegacyConsumerConfig`,
:class:`emulator.modern.config.ClassicConsumerConfig`,
:class:`emulator.modern.config.Kip848ConsumerConfig`,
:class:`emulator.modern.config.GroupCoordinatorConfig`). The rest of what a
run reads by Kafka name, the 0.8.2 broker's log, ISR and controller settings
and a consumer's fetch path, is typed here, resolved once from a generation's
:class:`~emulator.kafka_keys.KafkaSettings` (values set in ``[kafka]``, or the
Kafka key registry's defaults), so no actor holds a default of its own.
Durations stay in Kafka's units; the run's ``time_scale`` is applied by the
caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from emulator.kafka_keys import DEFAULT_KAFKA_VERSION, KafkaSettings, KafkaValue
from emulator.legacy.config import LegacyConsumerConfig
from emulator.protocols import spec

__all__ = ["BrokerSettings", "FetchSettings", "RunSettings"]


@dataclass(frozen=True)
class BrokerSettings:
    """A broker's settings by Kafka name (K@0.8.2.2 ``KafkaConfig``; kafka-protocols.md A3, A8).

    Attributes:
        replica_fetch_max_bytes: ``replica.fetch.max.bytes`` (1048576): a
            follower's fetch size.
        replica_lag_time_max_ms: ``replica.lag.time.max.ms`` (10000): ISR shrink.
        replica_lag_max_messages: ``replica.lag.max.messages`` (4000): ISR shrink.
        replica_fetch_wait_max_ms: ``replica.fetch.wait.max.ms`` (500): how long
            a leader holds a follower's fetch that finds nothing new (the long poll).
        zookeeper_session_timeout_ms: ``zookeeper.session.timeout.ms`` (6000).
        auto_leader_rebalance_enable: ``auto.leader.rebalance.enable`` (true).
        leader_imbalance_per_broker_percentage:
            ``leader.imbalance.per.broker.percentage`` (10).
        leader_imbalance_check_interval_seconds:
            ``leader.imbalance.check.interval.seconds`` (300).
        unclean_leader_election_enable: ``unclean.leader.election.enable``
            (true in 0.8.2; false for the brokers of the modern generations, KIP-106).
        offsets_topic_num_partitions: ``offsets.topic.num.partitions`` (50).
        offsets_topic_replication_factor: ``offsets.topic.replication.factor``
            (3; the run caps it at the live brokers).
        auto_create_topics_enable: ``auto.create.topics.enable`` (true): a
            metadata request for a missing topic creates it.
        delete_topic_enable: ``delete.topic.enable`` (false in 0.8.2, true
            from 1.0, KIP-162): false leaves a deletion marker and deletes nothing.
        num_partitions: ``num.partitions`` (1): an auto-created topic's partitions.
        default_replication_factor: ``default.replication.factor`` (1): an
            auto-created topic's replication factor.
    """

    replica_fetch_max_bytes: int
    replica_lag_time_max_ms: int
    replica_lag_max_messages: int
    replica_fetch_wait_max_ms: int
    zookeeper_session_timeout_ms: int
    auto_leader_rebalance_enable: bool
    leader_imbalance_per_broker_percentage: int
    leader_imbalance_check_interval_seconds: int
    unclean_leader_election_enable: bool
    offsets_topic_num_partitions: int
    offsets_topic_replication_factor: int
    auto_create_topics_enable: bool
    delete_topic_enable: bool
    num_partitions: int
    default_replication_factor: int

    @classmethod
    def from_settings(cls, kafka: KafkaSettings) -> BrokerSettings:
        """The brokers' settings of ``kafka``'s generation.

        Raises:
            TypeError: a value of the wrong type (the scenario's parser rules it out).
        """
        return cls(
            replica_fetch_max_bytes=kafka.get_int("replica.fetch.max.bytes"),
            replica_lag_time_max_ms=kafka.get_int("replica.lag.time.max.ms"),
            replica_lag_max_messages=kafka.get_int("replica.lag.max.messages"),
            replica_fetch_wait_max_ms=kafka.get_int("replica.fetch.wait.max.ms"),
            zookeeper_session_timeout_ms=kafka.get_int("zookeeper.session.timeout.ms"),
            auto_leader_rebalance_enable=kafka.get_bool("auto.leader.rebalance.enable"),
            leader_imbalance_per_broker_percentage=kafka.get_int(
                "leader.imbalance.per.broker.percentage"
            ),
            leader_imbalance_check_interval_seconds=kafka.get_int(
                "leader.imbalance.check.interval.seconds"
            ),
            unclean_leader_election_enable=kafka.get_bool("unclean.leader.election.enable"),
            offsets_topic_num_partitions=kafka.get_int("offsets.topic.num.partitions"),
            offsets_topic_replication_factor=kafka.get_int("offsets.topic.replication.factor"),
            auto_create_topics_enable=kafka.get_bool("auto.create.topics.enable"),
            delete_topic_enable=kafka.get_bool("delete.topic.enable"),
            num_partitions=kafka.get_int("num.partitions"),
            default_replication_factor=kafka.get_int("default.replication.factor"),
        )


@dataclass(frozen=True)
class FetchSettings:
    """A consumer's fetch path by Kafka name, as its consumer host runs it.

    Attributes:
        fetch_max_bytes: the most bytes one fetch of a partition returns:
            ``fetch.message.max.bytes`` (1048576; the 0.8 consumer's name, which
            the emulator's hosts read for every generation).
        queued_max_message_chunks: ``queued.max.message.chunks`` (2): the 0.8
            consumer's chunks queued per stream.
        fetch_wait_max_ms: how long a broker holds a fetch that finds no data:
            ``fetch.wait.max.ms`` (100) for the 0.8 consumer, ``fetch.max.wait.ms``
            (500) for the Java consumer.
        max_poll_records: ``max.poll.records`` (500): what one ``poll()`` of the
            Java consumer returns at most; ``None`` for the 0.8 consumer, which has none.
        allow_auto_create_topics: whether a metadata request for a topic the
            client names may create it (with the broker's
            ``auto.create.topics.enable``): always for the 0.8 consumer,
            ``allow.auto.create.topics`` (true, KIP-361) for the Java one.
    """

    fetch_max_bytes: int
    queued_max_message_chunks: int
    fetch_wait_max_ms: int
    max_poll_records: int | None
    allow_auto_create_topics: bool = True

    @classmethod
    def from_settings(cls, kafka: KafkaSettings) -> FetchSettings:
        """The fetch path of ``kafka``'s generation.

        Raises:
            TypeError: a value of the wrong type (the scenario's parser rules it out).
        """
        legacy = kafka.generation == "zookeeper"
        return cls(
            fetch_max_bytes=kafka.get_int("fetch.message.max.bytes"),
            queued_max_message_chunks=kafka.get_int("queued.max.message.chunks"),
            fetch_wait_max_ms=kafka.get_int("fetch.wait.max.ms" if legacy else "fetch.max.wait.ms"),
            max_poll_records=None if legacy else kafka.get_int("max.poll.records"),
            allow_auto_create_topics=legacy or kafka.get_bool("allow.auto.create.topics"),
        )


@dataclass(frozen=True)
class RunSettings:
    """What a protocol's run reads by Kafka name outside its state machines, typed, resolved once.

    The brokers and consumer hosts take their settings from here; the state
    machines build their own config classes from the same ``[kafka]`` table
    (their ``from_kafka``), which read the same registry of defaults.

    Attributes:
        broker: the brokers' log, ISR and controller settings.
        fetch: the consumers' fetch path.
        legacy: the 0.8 consumer's settings (its ZooKeeper session; the
            ``auto.offset.reset`` policy every fetch carries, in 0.8 spelling).
    """

    broker: BrokerSettings
    fetch: FetchSettings
    legacy: LegacyConsumerConfig

    @classmethod
    def resolve(cls, protocol: str, kafka: Mapping[str, object]) -> RunSettings:
        """The settings of a run of ``protocol`` whose ``[kafka]`` table is ``kafka``.

        ``kafka`` is what the orchestrator hands the actors: for the modern
        generations the values set plus ``kafka.version``; for the 0.8 consumer
        every effective value.

        Raises:
            ValueError: not a run protocol.
            TypeError: a value of the wrong type (the scenario's parser rules it out).
        """
        generation = spec(protocol).generation
        version = kafka.get("kafka.version")
        explicit: dict[str, KafkaValue] = {
            k: v for k, v in kafka.items() if isinstance(v, int | float | str | bool)
        }
        settings = KafkaSettings(
            generation, DEFAULT_KAFKA_VERSION if version is None else str(version), explicit
        )
        return cls(
            broker=BrokerSettings.from_settings(settings),
            fetch=FetchSettings.from_settings(settings),
            legacy=LegacyConsumerConfig.from_kafka(kafka),
        )
