"""The run's Kafka settings, resolved once for the brokers and the consumer hosts."""

from __future__ import annotations

import pytest

from emulator.broker.replica_manager import MESSAGE_BYTES, BrokerConfig
from emulator.host.core import HostConfig
from emulator.protocols import RUN_PROTOCOLS, spec
from emulator.scenario import parse_scenario
from emulator.settings import RunSettings

SCENARIO = """
name = "s"
duration_s = 10
[[topics]]
name = "t"
partitions = 4
[group]
consumers = 2
topics = ["t"]
"""


def _kafka(protocol: str, extra: str = "") -> tuple[dict[str, object], RunSettings]:
    """The table the orchestrator hands the actors for ``protocol``, and its settings."""
    sc = parse_scenario(SCENARIO + ("[kafka]\n" + extra if extra else ""))
    generation = spec(protocol).generation
    if generation == "zookeeper":
        kafka: dict[str, object] = dict(sc.effective_kafka_config(generation))
    else:
        kafka = dict(sc.kafka)
        kafka["kafka.version"] = sc.kafka_version
    return kafka, RunSettings.resolve(protocol, kafka)


@pytest.mark.parametrize("protocol", RUN_PROTOCOLS)
def test_the_brokers_settings_are_the_scenarios(protocol: str) -> None:
    sc = parse_scenario(SCENARIO)
    _, settings = _kafka(protocol)
    assert settings.broker == sc.broker_settings(protocol)
    assert settings.fetch == sc.fetch_settings(protocol)
    # unclean leader election: on in 0.8.2, off for the modern brokers (KIP-106)
    assert settings.broker.unclean_leader_election_enable is (protocol == "zookeeper")


def test_a_value_set_in_the_scenario_wins() -> None:
    _, settings = _kafka("classic-eager", '"replica.lag.time.max.ms" = 2500\n')
    assert settings.broker.replica_lag_time_max_ms == 2500
    assert BrokerConfig.from_settings(settings.broker).lag_time_max_ms == 2500.0


def test_the_hosts_fetch_path_by_generation() -> None:
    legacy_kafka, legacy = _kafka("zookeeper")
    modern_kafka, modern = _kafka("consumer", '"max.poll.records" = 100\n')
    old = HostConfig.from_settings("zookeeper", "g", legacy_kafka, legacy)
    new = HostConfig.from_settings("consumer", "g", modern_kafka, modern)
    # the 0.8 consumer waits fetch.wait.max.ms (100), the Java consumer fetch.max.wait.ms (500)
    assert (old.fetch_max_wait_ms, new.fetch_max_wait_ms) == (100.0, 500.0)
    # a fetch holds fetch.message.max.bytes of messages, and at most max.poll.records (modern)
    assert old.max_fetch == 1048576 // MESSAGE_BYTES
    assert new.max_fetch == 100
    assert old.max_chunks == 2


def test_the_offset_reset_policy_travels_in_the_08_spelling() -> None:
    kafka, settings = _kafka("classic-cooperative", '"auto.offset.reset" = "smallest"\n')
    assert settings.legacy.auto_offset_reset == "smallest"
    host = HostConfig.from_settings("classic-cooperative", "g", kafka, settings)
    assert host.auto_offset_reset == "smallest"
