"""The Kafka key registry as the one source of defaults, and the scenario's typed configs.

Every config class takes its defaults from :mod:`emulator.kafka_keys`, per
generation and per Kafka release; a scenario resolves each generation's
settings once (:meth:`Scenario.kafka_settings`) and builds the typed configs
the actors use from them.
"""

from __future__ import annotations

import dataclasses

import pytest

from emulator.kafka_keys import (
    KAFKA_CONFIG_KEYS,
    KAFKA_KEYS,
    KafkaSettings,
    default_int,
    default_list,
    default_value,
    effective_value,
)
from emulator.legacy.config import LegacyConsumerConfig
from emulator.modern.config import (
    REGEX_BATCH_REFRESH_MIN_INTERVAL_MS,
    ClassicConsumerConfig,
    GroupCoordinatorConfig,
    Kip848ConsumerConfig,
    modern_properties,
)
from emulator.protocols import GENERATIONS, RUN_PROTOCOLS
from emulator.scenario import (
    BrokerSettings,
    FetchSettings,
    ScenarioError,
    parse_scenario,
)

TOPIC = '[[topics]]\nname = "t"\npartitions = 4\n'
RELEASES = ("0.10.1", "0.11", "1.1", "2.0", "2.2", "2.3", "2.8", "3.0", "3.9", "4.0", "4.3")


def _field(name: str) -> str:
    return name.replace(".", "_")


# --------------------------------------------------------------------------- the registry


@pytest.mark.parametrize(
    ("name", "generation", "version", "expected"),
    [
        ("session.timeout.ms", "classic", "2.8", 10000),
        ("session.timeout.ms", "classic", "3.0", 45000),
        ("session.timeout.ms", "zookeeper", "2.8", 45000),  # the 0.8 consumer ignores releases
        ("request.timeout.ms", "classic", "1.1", 305000),
        ("request.timeout.ms", "classic", "2.0", 30000),
        ("request.timeout.ms", "consumer", "1.1", 30000),  # the KIP-848 client: always 30000
        ("group.max.session.timeout.ms", "classic", "2.2", 300000),
        ("group.max.session.timeout.ms", "classic", "2.3", 1800000),
        ("group.initial.rebalance.delay.ms", "classic", "0.10.1", 0),
        ("group.initial.rebalance.delay.ms", "consumer", "0.11", 3000),
        ("group.consumer.assignment.interval.ms", "consumer", "4.2", 0),
        ("group.consumer.assignment.interval.ms", "consumer", "4.3", 1000),
        ("partition.assignment.strategy", "classic", "2.8", "range"),
        ("partition.assignment.strategy", "classic", "3.0", "range,cooperative-sticky"),
        ("partition.assignment.strategy", "zookeeper", "3.9", "range"),
        ("unclean.leader.election.enable", "zookeeper", "3.9", True),
        ("unclean.leader.election.enable", "classic", "3.9", False),
        ("auto.commit.interval.ms", "zookeeper", "3.9", 60000),
        ("auto.commit.interval.ms", "consumer", "3.9", 5000),
    ],
)
def test_defaults_follow_generation_and_release(
    name: str, generation: str, version: str, expected: object
) -> None:
    assert default_value(name, generation, version) == expected


def test_defaults_defined_by_another_key() -> None:
    assert default_int("rebalance.backoff.ms") == 2000
    assert (
        effective_value("rebalance.backoff.ms", {"zookeeper.sync.time.ms": 700}, "zookeeper") == 700
    )
    assert default_int("zookeeper.connection.timeout.ms", lookup=lambda _: 900) == 900


def test_keys_a_scenario_cannot_set() -> None:
    fixed = set(KAFKA_KEYS) - set(KAFKA_CONFIG_KEYS)
    assert "retry.backoff.ms" in fixed and "metadata.max.age.ms" not in fixed
    assert all(not KAFKA_KEYS[name].settable for name in fixed)
    with pytest.raises(ScenarioError, match="unknown Kafka config"):
        parse_scenario(TOPIC + '[kafka]\n"retry.backoff.ms" = 50\n', "t.toml")


def test_settings_are_typed_and_refuse_unknown_names() -> None:
    settings = KafkaSettings("classic", "2.8", {"heartbeat.interval.ms": 1000})
    assert settings.get_int("heartbeat.interval.ms") == 1000
    assert settings.get_int("session.timeout.ms") == 10000
    assert settings.get_bool("enable.auto.commit") is True
    assert settings.get_list("partition.assignment.strategy") == ("range",)
    assert settings.all() == {name: settings.value(name) for name in KAFKA_CONFIG_KEYS}
    with pytest.raises(KeyError):
        settings.value("no.such.key")
    with pytest.raises(TypeError, match="is not an integer"):
        settings.get_int("enable.auto.commit")
    with pytest.raises(ValueError, match="protocol"):
        KafkaSettings("kraft").value("session.timeout.ms")


# --------------------------------------------------------------------------- the config classes


@pytest.mark.parametrize("version", RELEASES)
def test_config_classes_take_the_registrys_defaults(version: str) -> None:
    classic = ClassicConsumerConfig.for_version(version)
    for name in (
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "max.poll.interval.ms",
        "auto.commit.interval.ms",
        "retry.backoff.ms",
        "default.api.timeout.ms",
        "request.timeout.ms",
        "close.timeout.ms",
    ):
        assert getattr(classic, _field(name)) == default_int(name, "classic", version), name
    assert classic.partition_assignment_strategy == default_list(
        "partition.assignment.strategy", "classic", version
    )
    coordinator = GroupCoordinatorConfig.for_version(version)
    for f in dataclasses.fields(coordinator):
        name = f.name.replace("_", ".")
        if name in KAFKA_KEYS and KAFKA_KEYS[name].kind == "int":
            assert getattr(coordinator, f.name) == default_int(name, "consumer", version), name
    kip848 = Kip848ConsumerConfig.from_kafka({}, kafka_version=version)
    for name in ("max.poll.interval.ms", "auto.commit.interval.ms", "request.timeout.ms"):
        assert getattr(kip848, _field(name)) == default_int(name, "consumer", version), name


def test_field_defaults_are_the_default_releases() -> None:
    assert ClassicConsumerConfig() == ClassicConsumerConfig.for_version()
    assert GroupCoordinatorConfig() == GroupCoordinatorConfig.for_version()
    assert Kip848ConsumerConfig() == Kip848ConsumerConfig.from_kafka({})
    legacy = LegacyConsumerConfig()
    assert legacy == LegacyConsumerConfig.from_kafka({})
    for name in ("zookeeper.session.timeout.ms", "rebalance.max.retries", "rebalance.backoff.ms"):
        assert getattr(legacy, _field(name)) == default_int(name), name


# --------------------------------------------------------------------------- the scenario's configs


def test_scenario_configs_are_what_the_protocols_build() -> None:
    sc = parse_scenario(
        'kafka_version = "2.8"\n' + TOPIC + '[group]\nstatic_membership = true\nid = "g"\n'
        '[kafka]\n"zookeeper.sync.time.ms" = 300\n"session.timeout.ms" = 20000\n',
        "t.toml",
    )
    legacy = sc.legacy_config()
    assert legacy == LegacyConsumerConfig.from_kafka(
        {**sc.effective_kafka_config("zookeeper"), "partition.assignment.strategy": "range"}
    )
    assert legacy.rebalance_backoff_ms == 300
    classic = sc.classic_config("classic-eager", "c-1")
    assert classic == ClassicConsumerConfig.from_kafka(
        {
            **modern_properties(sc.kafka),
            "client.id": "c-1",
            "group.instance.id": "g-c-1",
            "partition.assignment.strategy": "range",
        },
        kafka_version="2.8",
    )
    assert classic.session_timeout_ms == 20000
    assert classic.request_timeout_ms == 30000
    kip848 = sc.kip848_config("consumer", "c-2")
    assert kip848.group_remote_assignor == "uniform"
    assert kip848.group_instance_id == "g-c-2"
    assert sc.client_config("zookeeper") == legacy
    assert sc.client_config("classic-eager", "c-1") == classic
    assert sc.coordinator_config() == GroupCoordinatorConfig.from_kafka({}, kafka_version="2.8")


def test_scenario_kafka_config_follows_its_release() -> None:
    old = parse_scenario('kafka_version = "2.8"\n' + TOPIC, "t.toml")
    assert old.kafka_int("session.timeout.ms", "classic") == 10000
    assert old.kafka_int("session.timeout.ms", "zookeeper") == 45000
    new = parse_scenario('kafka_version = "4.3"\n' + TOPIC, "t.toml")
    assert new.kafka_int("group.consumer.assignment.interval.ms", "consumer") == 1000
    assert new.coordinator_config().group_consumer_assignment_interval_ms == 1000


@pytest.mark.parametrize("protocol", RUN_PROTOCOLS + GENERATIONS)
def test_broker_and_fetch_settings(protocol: str) -> None:
    sc = parse_scenario(TOPIC + '[kafka]\n"replica.lag.time.max.ms" = 2500\n', "t.toml")
    broker = sc.broker_settings(protocol)
    assert broker == BrokerSettings(
        replica_fetch_max_bytes=1048576,
        replica_lag_time_max_ms=2500,
        replica_lag_max_messages=4000,
        replica_fetch_wait_max_ms=500,
        zookeeper_session_timeout_ms=6000,
        auto_leader_rebalance_enable=True,
        leader_imbalance_per_broker_percentage=10,
        leader_imbalance_check_interval_seconds=300,
        unclean_leader_election_enable=protocol == "zookeeper",
        offsets_topic_num_partitions=50,
        offsets_topic_replication_factor=3,
        auto_create_topics_enable=True,
        delete_topic_enable=protocol != "zookeeper",  # 0.8.2.2: false; 1.0+: true
        num_partitions=1,
        default_replication_factor=1,
    )
    legacy = protocol == "zookeeper"
    assert sc.fetch_settings(protocol) == FetchSettings(
        fetch_max_bytes=1048576,
        queued_max_message_chunks=2,
        fetch_wait_max_ms=100 if legacy else 500,
        max_poll_records=None if legacy else 500,
    )
    with pytest.raises(ValueError):
        sc.broker_settings("kraft")


# --------------------------------------------------------------------------- topics (issue 19)


@pytest.mark.parametrize(
    ("name", "generation", "version", "expected"),
    [
        ("delete.topic.enable", "zookeeper", "3.9", False),  # 0.8.2.2 KafkaConfig.scala 344
        ("delete.topic.enable", "classic", "0.11", False),
        ("delete.topic.enable", "classic", "1.0", True),  # KIP-162
        ("delete.topic.enable", "consumer", "3.9", True),
        ("auto.create.topics.enable", "zookeeper", "3.9", True),
        ("auto.create.topics.enable", "consumer", "4.1", True),
        ("num.partitions", "zookeeper", "3.9", 1),
        ("num.partitions", "classic", "3.9", 1),
        ("default.replication.factor", "classic", "3.9", 1),
        ("exclude.internal.topics", "zookeeper", "3.9", True),
        ("exclude.internal.topics", "classic", "3.9", True),
        ("allow.auto.create.topics", "classic", "3.9", True),
        ("metadata.max.age.ms", "classic", "3.9", 300000),
        ("group.consumer.regex.refresh.interval.ms", "consumer", "4.1", 600000),
    ],
)
def test_topic_defaults(name: str, generation: str, version: str, expected: object) -> None:
    assert default_value(name, generation, version) == expected


def test_a_key_newer_than_the_release_is_refused() -> None:
    key = "group.consumer.regex.refresh.interval.ms"
    with pytest.raises(ScenarioError) as info:
        parse_scenario('kafka_version = "4.0"\n' + TOPIC + f'[kafka]\n"{key}" = 60000\n', "t.toml")
    assert str(info.value) == (
        f'scenario t.toml: [kafka]."{key}": new in Kafka 4.1, and kafka_version is 4.0 '
        "(that release has no such config)"
    )
    assert info.value.key == f'[kafka]."{key}"'
    sc = parse_scenario('kafka_version = "4.1"\n' + TOPIC + f'[kafka]\n"{key}" = 60000\n', "t")
    assert sc.kafka_int(key, "consumer") == 60000
    assert sc.coordinator_config().regex_refresh_interval_ms == 60000
    with pytest.raises(ScenarioError, match=r"new in Kafka 2\.3, and kafka_version is 2\.2"):
        parse_scenario(
            'kafka_version = "2.2"\n' + TOPIC + '[kafka]\n"allow.auto.create.topics" = false\n', "t"
        )
    sc = parse_scenario(
        'kafka_version = "2.3"\n' + TOPIC + '[kafka]\n"allow.auto.create.topics" = false\n', "t"
    )
    assert sc.kafka_bool("allow.auto.create.topics", "classic") is False


@pytest.mark.parametrize(
    ("text", "key", "fragment"),
    [
        (
            'kafka_version = "4.1"\n[kafka]\n"group.consumer.regex.refresh.interval.ms" = 9999\n',
            '[kafka]."group.consumer.regex.refresh.interval.ms"',
            "must be an integer >= 10000, got 9999",
        ),
        ('[kafka]\n"num.partitions" = 0\n', '[kafka]."num.partitions"', ">= 1, got 0"),
        (
            '[kafka]\n"default.replication.factor" = 0\n',
            '[kafka]."default.replication.factor"',
            ">= 1, got 0",
        ),
        ('[kafka]\n"delete.topic.enable" = "yes"\n', '[kafka]."delete.topic.enable"', "true or"),
    ],
)
def test_topic_key_errors(text: str, key: str, fragment: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(TOPIC + text if text.startswith("[") else text + TOPIC, "t.toml")
    assert info.value.key == key and fragment in str(info.value)


def test_delete_topic_enable_per_generation_of_a_scenario() -> None:
    sc = parse_scenario(TOPIC, "t.toml")
    assert sc.kafka_bool("delete.topic.enable", "zookeeper") is False
    assert sc.kafka_bool("delete.topic.enable", "classic") is True
    assert sc.broker_settings("zookeeper").delete_topic_enable is False
    assert sc.broker_settings("consumer").delete_topic_enable is True
    on = parse_scenario(TOPIC + '[kafka]\n"delete.topic.enable" = true\n', "t.toml")
    assert on.broker_settings("zookeeper").delete_topic_enable is True


def test_regex_refresh_of_the_coordinator() -> None:
    assert REGEX_BATCH_REFRESH_MIN_INTERVAL_MS == 10000
    assert GroupCoordinatorConfig.for_version("4.0").regex_refresh_interval_ms is None
    assert GroupCoordinatorConfig.for_version("4.1").regex_refresh_interval_ms == 600000
    assert GroupCoordinatorConfig().regex_refresh_interval_ms is None  # 3.9: no broker regex
    key = "group.consumer.regex.refresh.interval.ms"
    # 4.0 has no such config: ignored, as Kafka ignores an unknown one
    assert GroupCoordinatorConfig.from_kafka({key: 20000}, kafka_version="4.0") == (
        GroupCoordinatorConfig.for_version("4.0")
    )
    cfg = GroupCoordinatorConfig.from_kafka({key: 20000}, kafka_version="4.2")
    assert cfg.regex_refresh_interval_ms == 20000
    with pytest.raises(ValueError, match="at least 10000"):
        GroupCoordinatorConfig.from_kafka({key: 5000}, kafka_version="4.1")
