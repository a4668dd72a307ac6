"""The scenario format: parsing, defaults, Kafka configs, membership plans, and errors.

Every validation error must be ONE line, start with ``scenario <source>:``,
name the offending key (also in ``ScenarioError.key``) and say what was wrong.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from emulator.kafka_keys import kafka_version_at_least
from emulator.protocols import GENERATIONS as PROTOCOLS
from emulator.scenario import (
    KAFKA_CONFIG_KEYS,
    MembershipChange,
    Scenario,
    ScenarioError,
    bundled_scenarios,
    load_scenario,
    member_name,
    parse_scenario,
)

SOURCE = "test.toml"
TOPIC = '[[topics]]\nname = "t"\npartitions = 4\n'
TL = TOPIC + "[[timeline]]\nat_s = 1\n"


def parse(text: str) -> Scenario:
    return parse_scenario(text, SOURCE)


def error_of(text: str) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        parse(text)
    return info.value


# --------------------------------------------------------------------------- bundled


class TestQuickstart:
    def test_is_bundled_and_parses(self) -> None:
        bundled = bundled_scenarios()
        assert "quickstart" in bundled
        assert bundled["quickstart"].is_file()
        scenario = load_scenario(bundled["quickstart"])
        assert scenario.name == "quickstart"
        assert scenario.source == "quickstart.toml"
        assert scenario.cluster.brokers == 3
        assert [(t.name, t.partitions) for t in scenario.topics] == [("events", 12)]
        assert scenario.group.consumers == 4
        assert scenario.group.topics == ("events",)

    def test_one_join_one_crash_one_leave(self) -> None:
        scenario = load_scenario(bundled_scenarios()["quickstart"])
        plan = scenario.membership_plan()
        assert [c.action for c in plan] == ["join", "crash", "leave"]
        assert plan[0].member == "c-4"
        assert scenario.member_names_at(0.0) == ("c-0", "c-1", "c-2", "c-3")
        assert scenario.member_names_at(scenario.duration_s) == ("c-0", "c-3", "c-4")
        # well under two minutes of wall time, with room to settle after the last change
        assert scenario.wall_duration_s <= 60
        assert plan[-1].at_s <= scenario.duration_s - 30

    def test_every_bundled_scenario_parses(self) -> None:
        for name, path in bundled_scenarios().items():
            assert load_scenario(path).name == name


LIBRARY = (
    "quickstart",
    "zombie-double-consume",
    "claim-race",
    "scale-out",
    "rolling-restart",
    "rolling-restart-static",
    "broker-failure",
    "zk-member-loss",
    "zk-quorum-loss",
    "large-group",
    "topic-churn",
)


class TestLibrary:
    """The bundled scenario library: each parses, plans, stays short, and tells its story."""

    def load(self, name: str) -> Scenario:
        return load_scenario(bundled_scenarios()[name])

    @pytest.mark.parametrize("name", LIBRARY)
    def test_parses_and_plans(self, name: str) -> None:
        path = bundled_scenarios()[name]
        text = path.read_text(encoding="utf-8")
        assert text.startswith("# "), "each scenario opens with a comment saying what it shows"
        scenario = load_scenario(path)
        plan = scenario.action_plan()
        assert plan, name
        assert all(0 <= a.at_s <= scenario.duration_s for a in plan)
        assert [a.at_s for a in plan] == sorted(a.at_s for a in plan)
        assert scenario.kafka_str("auto.offset.reset") == "smallest"
        assert scenario.wall_duration_s <= 60, "well under a minute of wall time per protocol"
        json.dumps(scenario.to_dict())

    def test_zombie_pause_outlasts_every_session(self) -> None:
        sc = self.load("zombie-double-consume")
        pause = next(a for a in sc.action_plan() if a.action == "pause")
        assert pause.duration_s is not None
        pause_ms = pause.duration_s * 1000
        assert pause_ms > sc.kafka_int("zookeeper.session.timeout.ms")
        assert pause_ms > sc.kafka_int("session.timeout.ms", "classic")
        assert pause_ms > sc.kafka_int("group.consumer.session.timeout.ms", "consumer")
        # a fetched batch takes seconds, so the wake-up lands mid-batch
        assert sc.group.processing_ms_per_message >= 50

    def test_claim_race_joins_together(self) -> None:
        sc = self.load("claim-race")
        joins = [a for a in sc.action_plan() if a.action == "join"]
        assert len({a.at_s for a in joins}) < len(joins)  # several at the same moment
        assert "rebalance.max.retries" in sc.kafka and "rebalance.backoff.ms" in sc.kafka

    def test_scale_out_joins_one_by_one(self) -> None:
        sc = self.load("scale-out")
        times = [a.at_s for a in sc.action_plan() if a.action == "join"]
        assert len(times) >= 3 and len(set(times)) == len(times)

    def test_rolling_restarts(self) -> None:
        plain = self.load("rolling-restart")
        static = self.load("rolling-restart-static")
        assert not plain.group.static_membership and static.group.static_membership
        for sc in (plain, static):
            restarts = [a for a in sc.action_plan() if a.action == "restart"]
            assert [a.members[0] for a in restarts] == list(sc.initial_members())
            assert len({a.at_s for a in restarts}) == len(restarts)
        downtime = max(a.downtime_s for a in static.action_plan() if a.action == "restart")
        assert downtime * 1000 < static.kafka_int("session.timeout.ms", "classic")
        assert downtime * 1000 < static.kafka_int("group.consumer.session.timeout.ms", "consumer")

    def test_broker_failure_leaves_time_for_the_leader_rebalance(self) -> None:
        sc = self.load("broker-failure")
        assert all(t.replication_factor >= 2 for t in sc.topics)
        restart = next(a for a in sc.action_plan() if a.action == "broker_restart")
        interval = sc.kafka_int("leader.imbalance.check.interval.seconds")
        assert sc.kafka_bool("auto.leader.rebalance.enable")
        assert sc.duration_s - restart.at_s >= 2 * interval

    def test_zookeeper_scenarios(self) -> None:
        member = self.load("zk-member-loss")
        assert member.cluster.zookeeper_ensemble == 3
        zk = [(a.at_s, a.action) for a in member.action_plan() if a.action.startswith("zk_")]
        assert zk == [(15.0, "zk_crash"), (30.0, "zk_restart")]
        quorum = self.load("zk-quorum-loss")
        assert quorum.cluster.zookeeper_ensemble == 3
        crashes = [a for a in quorum.action_plan() if a.action == "zk_crash"]
        restarts = [a for a in quorum.action_plan() if a.action == "zk_restart"]
        assert len(crashes) == len(restarts) == 2

    def test_large_group(self) -> None:
        sc = self.load("large-group")
        assert sc.group.consumers >= 200
        assert sum(t.partitions for t in sc.topics) >= 2000
        assert sc.group.consumers_per_host <= 100
        assert [a.action for a in sc.action_plan()] == ["join", "crash"]


# --------------------------------------------------------------------------- defaults


class TestDefaults:
    def test_minimal_scenario(self) -> None:
        scenario = parse_scenario(TOPIC, "tiny.toml")
        assert scenario.name == "tiny"
        assert scenario.description == ""
        assert scenario.seed == 0
        assert scenario.duration_s == 60.0
        assert scenario.time_scale == 1.0
        assert (scenario.cluster.brokers, scenario.cluster.zookeeper_ensemble) == (3, 1)
        assert scenario.topics[0].replication_factor == 1
        producer = scenario.producer
        assert producer.rate_per_s == 100.0
        assert producer.topics == ("t",)
        assert producer.partitioner == "round-robin"
        assert producer.batch_size == 50
        assert producer.explicit_partition is None
        group = scenario.group
        assert group.id == "tiny-group"
        assert group.consumers == 1
        assert group.topics == ("t",)
        assert group.streams_per_consumer == 1
        assert group.processing_ms_per_message == 1.0
        assert group.consumers_per_host == 50
        assert scenario.kafka == {}
        assert scenario.timeline == ()
        assert scenario.membership_plan() == ()

    def test_name_defaults_to_scenario_for_odd_sources(self) -> None:
        assert parse_scenario(TOPIC).name == "scenario"
        assert parse_scenario(TOPIC).source == "<string>"

    def test_integers_accepted_for_floats(self) -> None:
        scenario = parse("duration_s = 30\ntime_scale = 1\n" + TOPIC)
        assert scenario.duration_s == 30.0 and isinstance(scenario.duration_s, float)

    def test_topics_default_to_file_order(self) -> None:
        text = '[[topics]]\nname = "b"\npartitions = 1\n[[topics]]\nname = "a"\npartitions = 2\n'
        scenario = parse(text)
        assert scenario.group.topics == ("b", "a")
        assert scenario.producer.topics == ("b", "a")
        assert scenario.topic("a").partitions == 2
        with pytest.raises(KeyError):
            scenario.topic("c")

    def test_subscription(self) -> None:
        text = TOPIC + '[[topics]]\nname = "u"\npartitions = 1\n[group]\nstreams_per_consumer = 3\n'
        assert parse(text).subscription() == {"t": 3, "u": 3}

    def test_explicit_partitioner(self) -> None:
        scenario = parse(TOPIC + '[producer]\npartitioner = "explicit"\nexplicit_partition = 3\n')
        assert scenario.producer.explicit_partition == 3

    def test_wall_time(self) -> None:
        scenario = parse("duration_s = 80.0\ntime_scale = 0.25\n" + TOPIC)
        assert scenario.wall_duration_s == 20.0
        assert scenario.wall_s(6.0) == 1.5
        slow = parse("duration_s = 20.0\ntime_scale = 2\n" + TOPIC)
        assert slow.wall_duration_s == 40.0  # > 1: slower than Kafka's own time


# --------------------------------------------------------------------------- Kafka configs


class TestKafkaConfig:
    def test_a3_defaults(self) -> None:
        scenario = parse(TOPIC)
        expected = {
            "rebalance.max.retries": 4,
            "rebalance.backoff.ms": 2000,
            "zookeeper.session.timeout.ms": 6000,
            "zookeeper.connection.timeout.ms": 6000,
            "zookeeper.sync.time.ms": 2000,
            "auto.commit.enable": True,
            "auto.commit.interval.ms": 60000,
            "consumer.timeout.ms": -1,
            "partition.assignment.strategy": "range",
            "queued.max.message.chunks": 2,
            "fetch.message.max.bytes": 1048576,
            "refresh.leader.backoff.ms": 200,
            "offsets.storage": "zookeeper",
            "dual.commit.enabled": False,
            "offsets.commit.max.retries": 5,
            "auto.leader.rebalance.enable": True,
            "leader.imbalance.per.broker.percentage": 10,
            "leader.imbalance.check.interval.seconds": 300,
            "unclean.leader.election.enable": True,
            "replica.lag.time.max.ms": 10000,
            "replica.lag.max.messages": 4000,
            "replica.fetch.wait.max.ms": 500,
            "controller.socket.timeout.ms": 30000,
            "controlled.shutdown.enable": True,
            "controlled.shutdown.max.retries": 3,
            "controlled.shutdown.retry.backoff.ms": 5000,
        }
        for name, value in expected.items():
            assert scenario.kafka_config(name) == value, name
            assert type(scenario.kafka_config(name)) is type(value), name

    def test_b6_c6_defaults(self) -> None:
        scenario = parse(TOPIC)
        assert scenario.kafka_int("session.timeout.ms", "classic") == 45000
        assert scenario.kafka_int("heartbeat.interval.ms", "classic") == 3000
        assert scenario.kafka_int("max.poll.interval.ms", "classic") == 300000
        assert scenario.kafka_int("max.poll.records", "classic") == 500
        assert scenario.kafka_int("group.min.session.timeout.ms") == 6000
        assert scenario.kafka_int("group.max.session.timeout.ms") == 1800000
        assert scenario.kafka_int("group.initial.rebalance.delay.ms") == 3000
        assert scenario.kafka_int("group.max.size") == 2**31 - 1
        assert scenario.kafka_list("group.consumer.assignors", "consumer") == ("uniform", "range")
        assert scenario.kafka_int("group.consumer.session.timeout.ms", "consumer") == 45000
        assert scenario.kafka_int("group.consumer.heartbeat.interval.ms", "consumer") == 5000

    def test_protocol_dependent_defaults(self) -> None:
        scenario = parse(TOPIC)
        assert scenario.kafka_str("partition.assignment.strategy", "zookeeper") == "range"
        assert scenario.kafka_list("partition.assignment.strategy", "classic") == (
            "range",
            "cooperative-sticky",
        )
        assert scenario.kafka_int("auto.commit.interval.ms", "zookeeper") == 60000
        assert scenario.kafka_int("auto.commit.interval.ms", "classic") == 5000

    def test_explicit_value_wins_for_every_protocol(self) -> None:
        scenario = parse(TOPIC + '[kafka]\n"partition.assignment.strategy" = "roundrobin"\n')
        for protocol in PROTOCOLS:
            assert scenario.kafka_config("partition.assignment.strategy", protocol) == "roundrobin"
        assert scenario.kafka == {"partition.assignment.strategy": "roundrobin"}

    def test_backoff_follows_configured_sync_time(self) -> None:
        scenario = parse(TOPIC + '[kafka]\n"zookeeper.sync.time.ms" = 500\n')
        assert scenario.kafka_int("rebalance.backoff.ms") == 500
        both = '[kafka]\n"zookeeper.sync.time.ms" = 500\n"rebalance.backoff.ms" = 750\n'
        assert parse(TOPIC + both).kafka_int("rebalance.backoff.ms") == 750

    def test_connection_timeout_follows_session_timeout(self) -> None:
        scenario = parse(TOPIC + '[kafka]\n"zookeeper.session.timeout.ms" = 9000\n')
        assert scenario.kafka_int("zookeeper.connection.timeout.ms") == 9000

    def test_dual_commit_follows_offsets_storage(self) -> None:
        scenario = parse(TOPIC + '[kafka]\n"offsets.storage" = "kafka"\n')
        assert scenario.kafka_bool("dual.commit.enabled") is True

    @pytest.mark.parametrize("version", ["3.9", "4.1"])
    def test_every_key_accepts_its_default(self, version: str) -> None:
        head = f'kafka_version = "{version}"\n' + TOPIC
        defaults = parse(head).effective_kafka_config()
        assert set(defaults) == set(KAFKA_CONFIG_KEYS)
        # a key newer than the release is refused (its own test), at its default too
        newer = {
            k
            for k, spec in KAFKA_CONFIG_KEYS.items()
            if spec.since and not kafka_version_at_least(version, spec.since)
        }
        share = {k for k in KAFKA_CONFIG_KEYS if k.startswith("group.share.")} | {
            "share.auto.offset.reset",
            "share.acknowledgement.mode",
        }
        assert newer == (
            set() if version == "4.1" else {"group.consumer.regex.refresh.interval.ms"} | share
        )
        lines = [
            f"{json.dumps(k)} = {json.dumps(v)}" for k, v in defaults.items() if k not in newer
        ]
        scenario = parse(head + "[kafka]\n" + "\n".join(lines) + "\n")
        assert scenario.effective_kafka_config() == defaults

    def test_accessor_errors(self) -> None:
        scenario = parse(TOPIC)
        with pytest.raises(KeyError):
            scenario.kafka_config("no.such.key")
        with pytest.raises(ValueError, match="protocol"):
            scenario.kafka_config("session.timeout.ms", "kraft")
        with pytest.raises(TypeError):
            scenario.kafka_int("auto.commit.enable")
        with pytest.raises(TypeError):
            scenario.kafka_bool("rebalance.max.retries")
        with pytest.raises(TypeError):
            scenario.kafka_str("rebalance.max.retries")

    def test_every_spec_is_documented(self) -> None:
        for spec in KAFKA_CONFIG_KEYS.values():
            assert spec.source and spec.used_by, spec.name


# --------------------------------------------------------------------------- membership


class TestMembership:
    TEXT = (
        "duration_s = 100.0\n"
        + TOPIC
        + "[group]\nconsumers = 2\n"
        + '[[timeline]]\nat_s = 30.0\naction = "leave"\nmember = "c-4"\n'
        + '[[timeline]]\nat_s = 10.0\naction = "join"\ncount = 3\n'
        + '[[timeline]]\nat_s = 10.0\naction = "crash"\nmember = "c-0"\n'
        + '[[timeline]]\nat_s = 20.0\naction = "join"\n'
    )

    def test_sorted_by_time_ties_in_file_order(self) -> None:
        scenario = parse(self.TEXT)
        assert [(e.at_s, e.action, e.index) for e in scenario.timeline] == [
            (10.0, "join", 1),
            (10.0, "crash", 2),
            (20.0, "join", 3),
            (30.0, "leave", 0),
        ]

    def test_plan_names_joins_in_creation_order(self) -> None:
        scenario = parse(self.TEXT)
        assert scenario.initial_members() == ("c-0", "c-1")
        assert scenario.membership_plan() == (
            MembershipChange(10.0, "join", "c-2", 1),
            MembershipChange(10.0, "join", "c-3", 1),
            MembershipChange(10.0, "join", "c-4", 1),
            MembershipChange(10.0, "crash", "c-0", 2),
            MembershipChange(20.0, "join", "c-5", 3),
            MembershipChange(30.0, "leave", "c-4", 0),
        )
        assert scenario.all_members() == tuple(member_name(i) for i in range(6))

    def test_member_names_at(self) -> None:
        scenario = parse(self.TEXT)
        assert scenario.member_names_at(0.0) == ("c-0", "c-1")
        assert scenario.member_names_at(9.999) == ("c-0", "c-1")
        assert scenario.member_names_at(10.0) == ("c-1", "c-2", "c-3", "c-4")
        assert scenario.member_names_at(25.0) == ("c-1", "c-2", "c-3", "c-4", "c-5")
        assert scenario.member_names_at(30.0) == ("c-1", "c-2", "c-3", "c-5")

    def test_group_may_empty_and_events_at_bounds(self) -> None:
        text = (
            "duration_s = 5.0\n"
            + TOPIC
            + '[[timeline]]\nat_s = 0\naction = "leave"\nmember = "c-0"\n'
            + '[[timeline]]\nat_s = 5\naction = "join"\n'
        )
        scenario = parse(text)
        assert scenario.member_names_at(0.0) == ()
        assert scenario.member_names_at(5.0) == ("c-1",)


# --------------------------------------------------------------------------- serialisation


class TestSerialisation:
    def test_to_dict_is_json_and_complete(self) -> None:
        scenario = load_scenario(bundled_scenarios()["quickstart"])
        data = json.loads(json.dumps(scenario.to_dict()))
        assert data["name"] == "quickstart"
        assert data["group"]["consumers"] == 4
        assert data["kafka"]["rebalance.max.retries"] == 4
        assert set(data["kafka_effective"]) == set(PROTOCOLS)
        assert data["kafka_effective"]["classic"]["session.timeout.ms"] == 45000
        assert [c["member"] for c in data["membership_plan"]] == ["c-4", "c-1", "c-2"]
        assert data["timeline"][1] == {
            "at_s": 25.0,
            "action": "crash",
            "count": 1,
            "member": "c-1",
            "index": 1,
        }
        assert data["action_plan"][1] == {
            "action": "crash",
            "at_s": 25.0,
            "event_index": 1,
            "members": ["c-1"],
        }
        assert data["host_count"] == 1

    def test_to_dict_timeline_holds_the_fault_keys(self) -> None:
        text = (
            TOPIC
            + '[[timeline]]\nat_s = 1\naction = "restart"\nmembers = "all"\n'
            + "interval_s = 2\n"
            + '[[timeline]]\nat_s = 5\naction = "network_partition"\nmembers = ["c-0"]\n'
            + 'target = "brokers"\nduration_s = 3\n'
        )
        data = json.loads(json.dumps(parse(text).to_dict()))
        assert data["timeline"][0]["members"] == "all"
        assert data["timeline"][0]["interval_s"] == 2.0
        assert data["timeline"][0]["downtime_s"] == 0.0
        assert data["timeline"][1]["members"] == ["c-0"]
        assert data["timeline"][1]["target"] == "brokers"
        assert "broker" not in data["timeline"][1]
        assert [a["action"] for a in data["action_plan"]] == ["restart", "network_partition"]

    def test_hashable_picklable_and_equal(self) -> None:
        path = bundled_scenarios()["quickstart"]
        one, two = load_scenario(path), load_scenario(path)
        assert one == two and hash(one) == hash(two)
        assert pickle.loads(pickle.dumps(one)) == one


# --------------------------------------------------------------------------- errors

ERROR_CASES: list[tuple[str, str, str]] = [
    # (scenario text, key named, text the message must contain)
    ("x = [", "<toml>", "invalid TOML"),
    ("seeed = 1\n" + TOPIC, "seeed", "unknown key; did you mean seed?"),
    ("[grup]\n" + TOPIC, "[grup]", "unknown section; did you mean [group]?"),
    (TOPIC + "[[topcs]]\nname = 'x'\n", "[[topcs]]", "did you mean [[topics]]?"),
    ('name = "has space"\n' + TOPIC, "name", "must be a name of letters, digits"),
    (f'name = "{"n" * 101}"\n' + TOPIC, "name", "at most 100"),
    ("name = 3\n" + TOPIC, "name", "got 3"),
    ("description = 3\n" + TOPIC, "description", "must be a string, got 3"),
    ("seed = -1\n" + TOPIC, "seed", "must be an integer between 0 and"),
    ("seed = 1.5\n" + TOPIC, "seed", "got 1.5"),
    ("seed = true\n" + TOPIC, "seed", "got true"),
    ("duration_s = 0\n" + TOPIC, "duration_s", "must be a number > 0, got 0"),
    ('duration_s = "60"\n' + TOPIC, "duration_s", 'got "60"'),
    ("duration_s = nan\n" + TOPIC, "duration_s", "got nan"),
    ("duration_s = inf\n" + TOPIC, "duration_s", "got inf"),
    ("time_scale = 0\n" + TOPIC, "time_scale", "0 < time_scale <= 10"),
    ("time_scale = 10.5\n" + TOPIC, "time_scale", "got 10.5"),
    ("cluster = 3\n" + TOPIC, "[cluster]", "[cluster] must be a table, got 3"),
    (TOPIC + "[cluster]\nbrokers = 0\n", "[cluster].brokers", "integer >= 1, got 0"),
    (TOPIC + "[cluster]\nzookeeper_ensemble = 2\n", "[cluster].zookeeper_ensemble", "1, 3 or 5"),
    (TOPIC + "[cluster]\nbrokes = 3\n", "[cluster].brokes", "did you mean [cluster].brokers?"),
    ("seed = 1\n", "topics", "topics is required"),
    ("topics = 3\n", "topics", "non-empty array of tables"),
    ("topics = []\n", "topics", "got an array"),
    ("[[topics]]\npartitions = 1\n", "topics[0].name", "topics[0].name is required"),
    ('[[topics]]\nname = "a/b"\npartitions = 1\n', "topics[0].name", "Kafka topic name"),
    ('[[topics]]\nname = ".."\npartitions = 1\n', "topics[0].name", "other than"),
    (f'[[topics]]\nname = "{"t" * 250}"\npartitions = 1\n', "topics[0].name", "at most 249"),
    (TOPIC + TOPIC, "topics[1].name", 'topic "t" is defined twice (also topics[0])'),
    ('[[topics]]\nname = "t"\n', "topics[0].partitions", "topics[0].partitions is required"),
    ('[[topics]]\nname = "t"\npartitions = 0\n', "topics[0].partitions", ">= 1, got 0"),
    (
        TOPIC + "replication_factor = 4\n",
        "topics[0].replication_factor",
        "between 1 and 3 ([cluster].brokers), got 4",
    ),
    (TOPIC + "partition = 4\n", "topics[0].partition", "did you mean topics[0].partitions?"),
    (TOPIC + "[producer]\nrate_per_s = -1\n", "[producer].rate_per_s", ">= 0, got -1"),
    (TOPIC + "[producer]\ntopics = []\n", "[producer].topics", "non-empty array of topic"),
    (TOPIC + '[producer]\ntopics = ["u"]\n', "[producer].topics[0]", 'no topic "u" is defined'),
    (TOPIC + '[producer]\ntopics = ["t", "t"]\n', "[producer].topics[1]", "listed twice"),
    (
        TOPIC + '[producer]\npartitioner = "roundrobin"\n',
        "[producer].partitioner",
        'did you mean "round-robin"?',
    ),
    (TOPIC + "[producer]\nbatch_size = 0\n", "[producer].batch_size", ">= 1, got 0"),
    (
        TOPIC + "[producer]\nexplicit_partition = 1\n",
        "[producer].explicit_partition",
        'only allowed with [producer].partitioner = "explicit"',
    ),
    (
        TOPIC + '[producer]\npartitioner = "explicit"\n',
        "[producer].explicit_partition",
        "is required",
    ),
    (
        TOPIC + '[producer]\npartitioner = "explicit"\nexplicit_partition = 4\n',
        "[producer].explicit_partition",
        'between 0 and 3 (partitions of "t" minus one), got 4',
    ),
    (TOPIC + "[producer]\nrate = 1\n", "[producer].rate", "did you mean [producer].rate_per_s?"),
    (TOPIC + '[group]\nid = "a/b"\n', "[group].id", "group id"),
    (TOPIC + '[group]\nconsumers = "four"\n', "[group].consumers", ""),
    (TOPIC + "[group]\nconsumers = 0\n", "[group].consumers", "integer >= 1, got 0"),
    (TOPIC + '[group]\ntopics = ["x"]\n', "[group].topics[0]", 'no topic "x" is defined'),
    (
        TOPIC + "[group]\nstreams_per_consumer = 0\n",
        "[group].streams_per_consumer",
        ">= 1, got 0",
    ),
    (
        TOPIC + "[group]\nprocessing_ms_per_message = -1.0\n",
        "[group].processing_ms_per_message",
        ">= 0, got -1.0",
    ),
    (TOPIC + "[group]\nconsumers_per_host = 0\n", "[group].consumers_per_host", ">= 1"),
    (TOPIC + "[group]\nconsumer = 2\n", "[group].consumer", "did you mean [group].consumers?"),
    ("kafka = 3\n" + TOPIC, "[kafka]", "must be a table"),
    (
        TOPIC + '[kafka]\n"rebalance.max.retry" = 3\n',
        '[kafka]."rebalance.max.retry"',
        'unknown Kafka config; did you mean "rebalance.max.retries"?',
    ),
    (TOPIC + '[kafka]\n"group.protocol" = "consumer"\n', '[kafka]."group.protocol"', "unknown"),
    (
        TOPIC + '[kafka]\n"rebalance.max.retries" = "4"\n',
        '[kafka]."rebalance.max.retries"',
        'must be an integer >= 1, got "4"',
    ),
    (
        TOPIC + '[kafka]\n"rebalance.backoff.ms" = true\n',
        '[kafka]."rebalance.backoff.ms"',
        "got true",
    ),
    (
        TOPIC + '[kafka]\n"zookeeper.session.timeout.ms" = 0\n',
        '[kafka]."zookeeper.session.timeout.ms"',
        ">= 1, got 0",
    ),
    (
        TOPIC + '[kafka]\n"leader.imbalance.per.broker.percentage" = 101\n',
        '[kafka]."leader.imbalance.per.broker.percentage"',
        "between 0 and 100, got 101",
    ),
    (
        TOPIC + '[kafka]\n"auto.commit.enable" = 1\n',
        '[kafka]."auto.commit.enable"',
        "must be true or false, got 1",
    ),
    (
        TOPIC + '[kafka]\n"offsets.storage" = "hdfs"\n',
        '[kafka]."offsets.storage"',
        'one of "zookeeper", "kafka"',
    ),
    (
        TOPIC + '[kafka]\n"partition.assignment.strategy" = "range,fair"\n',
        '[kafka]."partition.assignment.strategy"',
        "comma-separated list of",
    ),
    (
        TOPIC + '[kafka]\n"partition.assignment.strategy" = ["range"]\n',
        '[kafka]."partition.assignment.strategy"',
        "got an array",
    ),
    (
        TOPIC + '[kafka]\n"heartbeat.interval.ms" = 45000\n',
        '[kafka]."heartbeat.interval.ms"',
        "heartbeat.interval.ms (45000) < session.timeout.ms (45000)",
    ),
    (
        TOPIC + '[kafka]\n"replica.lag.time.max.ms" = 400\n',
        '[kafka]."replica.lag.time.max.ms"',
        "replica.fetch.wait.max.ms (500) <= replica.lag.time.max.ms (400)",
    ),
    (
        TOPIC + '[kafka]\n"replica.fetch.wait.max.ms" = 0\n',
        '[kafka]."replica.fetch.wait.max.ms"',
        ">= 1, got 0",
    ),
    (
        TOPIC + '[kafka]\n"group.consumer.session.timeout.ms" = 30000\n',
        '[kafka]."group.consumer.session.timeout.ms"',
        "group.consumer.min.session.timeout.ms (45000) <= group.consumer.session.timeout.ms",
    ),
    ("timeline = 3\n" + TOPIC, "timeline", "array of tables"),
    (TOPIC + '[[timeline]]\naction = "join"\n', "timeline[0].at_s", "is required"),
    (
        "duration_s = 20.0\n" + TOPIC + '[[timeline]]\nat_s = 21\naction = "join"\n',
        "timeline[0].at_s",
        "between 0 and duration_s (20.0), got 21",
    ),
    (TOPIC + '[[timeline]]\nat_s = -1\naction = "join"\n', "timeline[0].at_s", "got -1"),
    (TOPIC + "[[timeline]]\nat_s = 1\n", "timeline[0].action", "is required"),
    (
        TOPIC + '[[timeline]]\nat_s = 1\naction = "kill"\n',
        "timeline[0].action",
        'one of "join", "leave", "crash", "restart", ',
    ),
    (
        TOPIC + '[[timeline]]\nat_s = 1\naction = "join"\nmember = "c-1"\n',
        "timeline[0].member",
        "not allowed for a join",
    ),
    (
        TOPIC + '[[timeline]]\nat_s = 1\naction = "join"\ncount = 0\n',
        "timeline[0].count",
        ">= 1, got 0",
    ),
    (
        TOPIC + '[[timeline]]\nat_s = 1\naction = "leave"\ncount = 1\nmember = "c-0"\n',
        "timeline[0].count",
        "not allowed together with timeline[0].member",
    ),
    (TOPIC + '[[timeline]]\nat_s = 1\naction = "crash"\n', "timeline[0].member", "is required"),
    (
        TOPIC + '[[timeline]]\nat_s = 1\naction = "crash"\nmember = 0\n',
        "timeline[0].member",
        "must be a string, got 0",
    ),
    (
        TOPIC + '[[timeline]]\nat_s = 1\naction = "leave"\nmember = "consumer-1"\n',
        "timeline[0].member",
        "members are named c-0, c-1",
    ),
    (
        TOPIC
        + '[[timeline]]\nat_s = 1\naction = "crash"\nmember = "c-0"\n'
        + '[[timeline]]\nat_s = 2\naction = "leave"\nmember = "c-0"\n',
        "timeline[1].member",
        'no member "c-0" exists at 2.0 s (it crashed at 1.0 s)',
    ),
    (
        TOPIC
        + '[[timeline]]\nat_s = 9\naction = "join"\ncount = 2\n'
        + '[[timeline]]\nat_s = 5\naction = "leave"\nmember = "c-2"\n',
        "timeline[1].member",
        'no member "c-2" exists at 5.0 s (it joins at 9.0 s)',
    ),
    (TOPIC + '[[timeline]]\nat_s = 1\naction = "join"\ntime = 2\n', "timeline[0].time", "unknown"),
    # ---- the fault vocabulary
    (TL + 'action = "join"\nduration_s = 2\n', "timeline[0].duration_s", "not allowed for a join"),
    (TL + 'action = "join"\ninterval_s = 0\n', "timeline[0].interval_s", "> 0, got 0"),
    (
        TL + 'action = "pause"\nmember = "c-0"\nduraton_s = 2\n',
        "timeline[0].duraton_s",
        "unknown key; did you mean timeline[0].duration_s?",
    ),
    (
        TL + 'action = "leave"\nmember = "c-0"\ninterval_s = 2\n',
        "timeline[0].interval_s",
        "only allowed with timeline[0].count",
    ),
    (TL + 'action = "crash"\ncount = 0\n', "timeline[0].count", ">= 1, got 0"),
    (TL + 'action = "crash"\n', "timeline[0].member", "is required"),
    (TL + 'action = "restart"\n', "timeline[0].member", "(or members) is required"),
    (
        TL + 'action = "restart"\nmember = "c-0"\nmembers = "all"\n',
        "timeline[0].members",
        "not allowed together with timeline[0].member",
    ),
    (
        TL + 'action = "restart"\nmembers = "some"\n',
        "timeline[0].members",
        'must be "all" or a non-empty array of member names',
    ),
    (TL + 'action = "restart"\nmembers = []\n', "timeline[0].members", "got an array"),
    (TL + 'action = "restart"\nmembers = ["c-0", 1]\n', "timeline[0].members", "got an array"),
    (
        TL + 'action = "restart"\nmembers = ["c-0", "c-0"]\n',
        "timeline[0].members[1]",
        'member "c-0" is listed twice',
    ),
    (
        TL + 'action = "restart"\nmember = "c-0"\ndowntime_s = -1\n',
        "timeline[0].downtime_s",
        ">= 0, got -1",
    ),
    (
        TL + 'action = "restart"\nmembers = ["c-0", "c-3"]\n',
        "timeline[0].members",
        'no member "c-3" exists at 1.0 s',
    ),
    (TL + 'action = "pause"\nmember = "c-0"\n', "timeline[0].duration_s", "is required"),
    (
        TL + 'action = "pause"\nmember = "c-0"\nduration_s = 0\n',
        "timeline[0].duration_s",
        "must be a number > 0, got 0",
    ),
    (
        TL + 'action = "pause"\nmember = "c-0"\nduration_s = "5"\n',
        "timeline[0].duration_s",
        'got "5"',
    ),
    (
        TL + 'action = "pause"\nmembers = ["c-0"]\nduration_s = 5\n',
        "timeline[0].members",
        "not allowed for a pause",
    ),
    (
        TL + 'action = "pause"\nmember = "c-7"\nduration_s = 5\n',
        "timeline[0].member",
        'no member "c-7" exists at 1.0 s',
    ),
    (
        TL + 'action = "slow"\nmember = "c-0"\nduration_s = 5\n',
        "timeline[0].processing_ms_per_message",
        "is required",
    ),
    (
        TL + 'action = "network_partition"\nmember = "c-0"\nduration_s = 5\n',
        "timeline[0].target",
        "is required",
    ),
    (
        TL + 'action = "network_partition"\nmember = "c-0"\nduration_s = 5\ntarget = "zk"\n',
        "timeline[0].target",
        'one of "zookeeper", "coordinator", "brokers", got "zk"',
    ),
    (TL + 'action = "host_crash"\n', "timeline[0].host", "is required"),
    (TL + 'action = "host_crash"\nhost = -1\n', "timeline[0].host", ">= 0, got -1"),
    (TL + 'action = "host_crash"\nhost = 1\n', "timeline[0].host", "between 0 and 0"),
    (
        TL + 'action = "broker_crash"\nbroker = 3\n',
        "timeline[0].broker",
        "between 0 and 2 ([cluster].brokers minus one), got 3",
    ),
    (TL + 'action = "broker_crash"\nbroker = "b1"\n', "timeline[0].broker", 'got "b1"'),
    (
        TL + 'action = "broker_crash"\nbroker = 0\nrestart_after_s = 0\n',
        "timeline[0].restart_after_s",
        "> 0, got 0",
    ),
    (
        TL + 'action = "broker_restart"\nbroker = 0\nrestart_after_s = 5\n',
        "timeline[0].restart_after_s",
        "not allowed for a broker_restart",
    ),
    (
        TL + 'action = "zk_crash"\nzk_member = 1\n',
        "timeline[0].zk_member",
        "between 0 and 0 ([cluster].zookeeper_ensemble minus one), got 1",
    ),
    (TL + 'action = "zk_restart"\n', "timeline[0].zk_member", "is required"),
    (TL + 'action = "zk_quorum_loss"\n', "timeline[0].duration_s", "is required"),
    (
        TL + 'action = "add_partitions"\ntopic = "x"\npartitions = 8\n',
        "timeline[0].topic",
        'one of "t", got "x"',
    ),
    (
        TL + 'action = "add_partitions"\ntopic = "t"\npartitions = 4\n',
        "timeline[0].partitions",
        'must be larger than the 4 partitions "t" has at 1.0 s, got 4',
    ),
    (TL + 'action = "add_partitions"\ntopic = "t"\n', "timeline[0].partitions", "is required"),
    (TL + 'action = "subscribe"\n', "timeline[0].topics", "is required"),
    (
        'kafka_version = "4.2"\n' + TOPIC + "[group]\nshare_release = 0.1\n",
        "[group].share_release",
        '"share.acknowledgement.mode" = "explicit"',
    ),
    (
        TOPIC + "[group]\nshare_release = 0.6\nshare_reject = 0.5\n",
        "[group].share_release",
        "at most 1",
    ),
    (TL + 'action = "subscribe"\ntopics = ["x"]\n', "timeline[0].topics[0]", 'no topic "x"'),
    (
        TL + 'action = "subscribe"\ntopics = ["t"]\nmembers = ["c-1"]\n',
        "timeline[0].members",
        'no member "c-1" exists at 1.0 s',
    ),
]


@pytest.mark.parametrize(("text", "key", "fragment"), ERROR_CASES)
def test_validation_error(text: str, key: str, fragment: str) -> None:
    err = error_of(text)
    message = str(err)
    assert "\n" not in message and "\r" not in message
    assert message.startswith(f"scenario {SOURCE}: ")
    assert err.key == key
    assert err.source == SOURCE
    if key != "<toml>":
        assert key in message
    assert fragment in message
    assert isinstance(err, ValueError)


def test_error_message_examples_from_the_brief() -> None:
    assert str(error_of(TOPIC + '[group]\nconsumers = "four"\n')) == (
        'scenario test.toml: [group].consumers must be an integer >= 1, got "four"'
    )
    text = TOPIC + "".join(
        f'[[timeline]]\nat_s = {t}\naction = "{a}"\n{m}\n'
        for t, a, m in [
            (2.0, "join", ""),
            (5.0, "leave", 'member = "c-0"'),
            (12.0, "crash", 'member = "c-9"'),
        ]
    )
    assert str(error_of(text)) == (
        'scenario test.toml: timeline[2].member: no member "c-9" exists at 12.0 s'
    )


def test_long_and_multiline_values_stay_on_one_line() -> None:
    err = error_of('name = """a\nb"""\n' + TOPIC)
    assert "\n" not in str(err) and "\\n" in str(err)
    err = error_of(f'name = "{"x" * 500}!"\n' + TOPIC)
    assert "\n" not in str(err) and len(str(err)) < 250 and "..." in str(err)


def test_load_scenario_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario(tmp_path / "absent.toml")
    assert info.value.source == "absent.toml"
    assert "\n" not in str(info.value) and "cannot read" in str(info.value)


def test_load_scenario_reads_file(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(TOPIC, encoding="utf-8")
    scenario = load_scenario(str(path))
    assert (scenario.name, scenario.source) == ("mine", "mine.toml")


def test_zk_latency_is_drawn_per_member_with_the_seed() -> None:
    from emulator.scenario import parse_scenario

    base = """
name = "lat"
seed = 5
duration_s = 10.0
[[topics]]
name = "t"
partitions = 2
[producer]
rate_per_s = 1.0
[group]
consumers = 3
"""
    sc = parse_scenario(base + "zk_latency_ms = 200.0\n", "lat.toml")
    lat = [sc.group.zk_latency_of(f"c-{i}", sc.seed) for i in range(3)]
    assert all(0.0 <= x <= 200.0 for x in lat) and len(set(lat)) == 3
    assert lat == [sc.group.zk_latency_of(f"c-{i}", sc.seed) for i in range(3)]
    assert sc.to_dict()["group"]["zk_latency_ms"] == 200.0
    assert parse_scenario(base, "lat.toml").group.zk_latency_of("c-0", 5) == 0.0
    with pytest.raises(ScenarioError, match=r"\[group\]\.zk_latency_ms"):
        parse_scenario(base + "zk_latency_ms = -1\n", "lat.toml")


def test_share_shares_parse_with_explicit_acknowledgements_or_in_4_0() -> None:
    """4.1+ needs explicit mode for the application to release or reject; 4.0 has no
    such config (its consumer turns explicit on the first acknowledge())."""
    text = TOPIC + "[group]\nshare_release = 0.1\nshare_reject = 0.05\n"
    sc = parse('kafka_version = "4.0"\n' + text)
    assert (sc.group.share_release, sc.group.share_reject) == (0.1, 0.05)
    explicit = '[kafka]\n"share.acknowledgement.mode" = "explicit"\n'
    assert parse('kafka_version = "4.1"\n' + text + explicit).group.share_release == 0.1
