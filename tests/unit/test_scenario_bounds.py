"""Every size a scenario sets is bounded by what a run can hold, and checked before it is used.

For each bound: the value just over it is rejected with one line naming the key
and the bound (and why), and the bound itself is accepted where that is cheap.
Kafka configs are checked against what the run itself needs: the runtime config
builders accept every value validation lets through, and the scaled ZooKeeper
session timeout is one ZooKeeper grants (``zk_registry.server.tick_time_for``).
"""

from __future__ import annotations

import json
import random

import pytest

from emulator.legacy.config import LegacyConsumerConfig
from emulator.modern.config import (
    ClassicConsumerConfig,
    GroupCoordinatorConfig,
    Kip848ConsumerConfig,
)
from emulator.scenario import (
    INT32_MAX,
    KAFKA_CONFIG_KEYS,
    MAX_BATCH_SIZE,
    MAX_BROKERS,
    MAX_CONSUMER_HOSTS,
    MAX_CONSUMER_THREADS,
    MAX_DESCRIPTION_CHARS,
    MAX_DURATION_S,
    MAX_MEMBERS,
    MAX_MEMBERS_PER_HOST,
    MAX_PARTITIONS_PER_TOPIC,
    MAX_PARTITIONS_TOTAL,
    MAX_PROCESSING_MS_PER_MESSAGE,
    MAX_RATE_PER_S,
    MAX_REPLICAS_PER_TOPIC,
    MAX_REPLICAS_TOTAL,
    MAX_STREAMS_PER_CONSUMER,
    MAX_TIME_SCALE,
    MAX_TOPICS,
    MIN_TIME_SCALE,
    Scenario,
    ScenarioError,
    parse_scenario,
)
from emulator.scenario import plan as scenario_module
from zk_registry.layout import encode_topic_assignment
from zk_registry.server import negotiated_session_timeout_ms, tick_time_for

SOURCE = "bounds.toml"
TOPIC = '[[topics]]\nname = "t"\npartitions = 4\n'
LONG = f"duration_s = {MAX_DURATION_S}\n"


def parse(text: str) -> Scenario:
    return parse_scenario(text, SOURCE)


def rejected(text: str, key: str, *fragments: str) -> str:
    """The one-line message of ``text``'s error, checked to name ``key`` and each fragment."""
    with pytest.raises(ScenarioError) as info:
        parse(text)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"scenario {SOURCE}: ")
    assert info.value.key == key
    assert key in message
    for fragment in fragments:
        assert fragment in message, message
    return message


def topics(*sizes: int, rf: int = 1) -> str:
    return "".join(
        f'[[topics]]\nname = "t{i}"\npartitions = {n}\nreplication_factor = {rf}\n'
        for i, n in enumerate(sizes)
    )


def entry(at_s: float, action: str, **keys: object) -> str:
    lines = [f"at_s = {at_s}", f"action = {json.dumps(action)}"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in keys.items()]
    return "[[timeline]]\n" + "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- the tester's cases


def test_a_billion_consumers_fail_at_once_without_allocating() -> None:
    # Before: a MemoryError after gigabytes of member names. Now one line, first.
    rejected(
        TOPIC + "[group]\nconsumers = 1_000_000_000\n",
        "[group].consumers",
        f"<= {MAX_MEMBERS} (",
        "got 1000000000",
    )


def test_a_billion_joining_fail_at_once() -> None:
    rejected(
        TOPIC + entry(1, "join", count=1_000_000_000),
        "timeline[0].count",
        f"<= {MAX_MEMBERS} (",
    )


@pytest.mark.parametrize(
    ("text", "key", "bound"),
    [
        ('[[topics]]\nname = "t"\npartitions = 1000000000\n', "topics[0].partitions", 50000),
        (TOPIC + "[cluster]\nbrokers = 1000000\n", "[cluster].brokers", 1000),
        (TOPIC + "[producer]\nrate_per_s = 1e12\n", "[producer].rate_per_s", 10000000),
    ],
)
def test_the_reported_sizes_are_rejected(text: str, key: str, bound: int) -> None:
    rejected(text, key, f"<= {bound} (")


# --------------------------------------------------------------------------- cluster and topics


def test_brokers() -> None:
    assert parse(TOPIC + f"[cluster]\nbrokers = {MAX_BROKERS}\n").cluster.brokers == MAX_BROKERS
    rejected(
        TOPIC + f"[cluster]\nbrokers = {MAX_BROKERS + 1}\n",
        "[cluster].brokers",
        f"must be an integer <= {MAX_BROKERS} (each broker is a Ray actor",
    )


def test_zookeeper_ensemble_is_one_three_or_five() -> None:
    assert parse(TOPIC + "[cluster]\nzookeeper_ensemble = 5\n").cluster.zookeeper_ensemble == 5
    rejected(
        TOPIC + "[cluster]\nzookeeper_ensemble = 7\n", "[cluster].zookeeper_ensemble", "1, 3 or 5"
    )


def test_topic_count() -> None:
    assert len(parse(topics(*[1] * MAX_TOPICS)).topics) == MAX_TOPICS
    rejected(
        topics(*[1] * (MAX_TOPICS + 1)),
        "topics",
        f"{MAX_TOPICS + 1} [[topics]] tables, more than {MAX_TOPICS}",
        "jute.maxbuffer",
    )


def test_partitions_per_topic() -> None:
    assert parse(topics(MAX_PARTITIONS_PER_TOPIC)).topics[0].partitions == MAX_PARTITIONS_PER_TOPIC
    rejected(
        topics(MAX_PARTITIONS_PER_TOPIC + 1),
        "topics[0].partitions",
        f"must be an integer <= {MAX_PARTITIONS_PER_TOPIC} (",
        "/brokers/topics/<t>",
    )


def test_partitions_over_all_topics() -> None:
    full = [MAX_PARTITIONS_PER_TOPIC] * (MAX_PARTITIONS_TOTAL // MAX_PARTITIONS_PER_TOPIC)
    assert sum(t.partitions for t in parse(topics(*full)).topics) == MAX_PARTITIONS_TOTAL
    rejected(
        topics(*full[:-1], MAX_PARTITIONS_PER_TOPIC - 10, 11),
        f"topics[{len(full)}].partitions",
        f"must be an integer <= 10 (at most {MAX_PARTITIONS_TOTAL} partitions over all topics",
        f"the topics before have {MAX_PARTITIONS_TOTAL - 10}",
        "got 11",
    )


def test_replicas_per_topic() -> None:
    most = MAX_REPLICAS_PER_TOPIC // MAX_PARTITIONS_PER_TOPIC
    text = "[cluster]\nbrokers = 5\n" + topics(MAX_PARTITIONS_PER_TOPIC, rf=most)
    assert parse(text).topics[0].replication_factor == most
    rejected(
        "[cluster]\nbrokers = 5\n" + topics(MAX_PARTITIONS_PER_TOPIC, rf=most + 1),
        "topics[0].replication_factor",
        f"must be an integer <= {most} (at most {MAX_REPLICAS_PER_TOPIC} replicas",
    )


def test_replicas_over_all_topics() -> None:
    # 33,333 partitions x 3 = 99,999 replicas a topic, under both per-topic bounds.
    six = [33_333] * 6
    left = MAX_REPLICAS_TOTAL - 6 * 99_999  # 6 replicas: 2 partitions at rf 3
    ok = "[cluster]\nbrokers = 4\n" + topics(*six, 2, rf=3)
    assert sum(t.partitions * t.replication_factor for t in parse(ok).topics) == (
        MAX_REPLICAS_TOTAL
    )
    over = "[cluster]\nbrokers = 4\n" + topics(*six, rf=3) + topics(2, rf=4).replace("t0", "x")
    rejected(
        over,
        "topics[6].replication_factor",
        f"must be an integer <= {left // 2} (at most {MAX_REPLICAS_TOTAL} replicas over all",
    )


def test_the_largest_topic_znode_fits_jute_maxbuffer() -> None:
    # The worst case the bounds allow: the most partitions, the most replicas each, and
    # three-digit broker ids; ZooKeeper's jute.maxbuffer is 0xfffff bytes.
    rf = MAX_REPLICAS_PER_TOPIC // MAX_PARTITIONS_PER_TOPIC
    assignment = {p: [900 + r for r in range(rf)] for p in range(MAX_PARTITIONS_PER_TOPIC)}
    assert len(encode_topic_assignment(assignment)) < 0xFFFFF - 4096
    # and a legacy registration listing the most topics with the longest names
    subscription = {f"{i:04d}" + "t" * 245: 1 for i in range(MAX_TOPICS)}
    assert len(json.dumps({"subscription": subscription})) < 0xFFFFF - 4096


# --------------------------------------------------------------------------- producer and group


def test_rate() -> None:
    ok = parse(TOPIC + f"[producer]\nrate_per_s = {MAX_RATE_PER_S}\n")
    assert ok.producer.rate_per_s == MAX_RATE_PER_S
    rejected(
        TOPIC + f"[producer]\nrate_per_s = {MAX_RATE_PER_S + 1}\n",
        "[producer].rate_per_s",
        f"must be a number <= {int(MAX_RATE_PER_S)} (the producer actor",
    )


def test_batch_size() -> None:
    ok = parse(TOPIC + f"[producer]\nbatch_size = {MAX_BATCH_SIZE}\n")
    assert ok.producer.batch_size == MAX_BATCH_SIZE
    rejected(
        TOPIC + f"[producer]\nbatch_size = {MAX_BATCH_SIZE + 1}\n",
        "[producer].batch_size",
        f"must be an integer <= {MAX_BATCH_SIZE} (",
    )


def test_initial_members() -> None:
    assert parse(TOPIC + f"[group]\nconsumers = {MAX_MEMBERS}\n").member_total == MAX_MEMBERS
    rejected(
        TOPIC + f"[group]\nconsumers = {MAX_MEMBERS + 1}\n",
        "[group].consumers",
        f"must be an integer <= {MAX_MEMBERS} (the most members a run holds",
    )


def test_members_over_the_timeline() -> None:
    head = TOPIC + f"[group]\nconsumers = {MAX_MEMBERS - 3}\n"
    ok = parse(head + entry(1, "join", count=2) + entry(2, "join"))
    assert ok.member_total == MAX_MEMBERS
    rejected(
        head + entry(1, "join", count=2) + entry(2, "join", count=2),
        "timeline[1].count",
        f"must be an integer <= 1 (at most {MAX_MEMBERS} members over the run; "
        f"[group].consumers and the joins before it make {MAX_MEMBERS - 1}), got 2",
    )


@pytest.mark.parametrize("action", ["leave", "crash"])
def test_burst_counts(action: str) -> None:
    rejected(
        TOPIC + entry(1, action, count=MAX_MEMBERS + 1),
        "timeline[0].count",
        f"must be an integer <= {MAX_MEMBERS} (",
    )


def test_members_per_host() -> None:
    text = TOPIC + f"[group]\nconsumers_per_host = {MAX_MEMBERS_PER_HOST}\n"
    assert parse(text).group.consumers_per_host == MAX_MEMBERS_PER_HOST
    rejected(
        TOPIC + f"[group]\nconsumers_per_host = {MAX_MEMBERS_PER_HOST + 1}\n",
        "[group].consumers_per_host",
        f"must be an integer <= {MAX_MEMBERS_PER_HOST} (the members of a host share",
    )


def test_consumer_hosts() -> None:
    group = f"[group]\nconsumers = {MAX_CONSUMER_HOSTS}\nconsumers_per_host = 1\n"
    assert parse(TOPIC + group).host_count == MAX_CONSUMER_HOSTS
    # one join more needs one host more
    rejected(
        TOPIC + group + entry(1, "join"),
        "[group].consumers_per_host",
        f"must be an integer >= 2 for the run's {MAX_CONSUMER_HOSTS + 1} members "
        f"(at most {MAX_CONSUMER_HOSTS} consumer hosts",
        "got 1",
    )


def test_streams_per_consumer() -> None:
    text = TOPIC + f"[group]\nstreams_per_consumer = {MAX_STREAMS_PER_CONSUMER}\n"
    assert parse(text).group.streams_per_consumer == MAX_STREAMS_PER_CONSUMER
    rejected(
        TOPIC + f"[group]\nstreams_per_consumer = {MAX_STREAMS_PER_CONSUMER + 1}\n",
        "[group].streams_per_consumer",
        f"must be an integer <= {MAX_STREAMS_PER_CONSUMER} (",
    )


def test_consumer_threads() -> None:
    members = MAX_CONSUMER_THREADS // MAX_STREAMS_PER_CONSUMER
    group = f"[group]\nconsumers = {members}\nstreams_per_consumer = {MAX_STREAMS_PER_CONSUMER}\n"
    assert parse(TOPIC + group).group.consumers == members
    rejected(
        TOPIC + group + entry(1, "join"),
        "[group].streams_per_consumer",
        f"must be an integer <= {MAX_CONSUMER_THREADS // (members + 1)} "
        f"(at most {MAX_CONSUMER_THREADS} consumer threads",
    )


def test_processing_ms_per_message() -> None:
    top = MAX_PROCESSING_MS_PER_MESSAGE
    text = TOPIC + f"[group]\nprocessing_ms_per_message = {top}\n"
    assert parse(text).group.processing_ms_per_message == top
    rejected(
        TOPIC + f"[group]\nprocessing_ms_per_message = {top + 1}\n",
        "[group].processing_ms_per_message",
        f"must be a number <= {int(top)} (a day per message)",
    )
    slow = entry(1, "slow", member="c-0", duration_s=1, processing_ms_per_message=top)
    assert parse(TOPIC + slow).timeline[0].processing_ms_per_message == top
    rejected(
        TOPIC + slow.replace(f"= {top}", f"= {top + 1}"),
        "timeline[0].processing_ms_per_message",
        f"must be a number <= {int(top)} (",
    )


def test_description() -> None:
    assert parse(f'description = "{"d" * MAX_DESCRIPTION_CHARS}"\n' + TOPIC).description
    rejected(
        f'description = "{"d" * (MAX_DESCRIPTION_CHARS + 1)}"\n' + TOPIC,
        "description",
        f"at most {MAX_DESCRIPTION_CHARS} characters",
    )


# --------------------------------------------------------------------------- time


def test_duration() -> None:
    assert parse(LONG + TOPIC).duration_s == MAX_DURATION_S
    rejected(
        f"duration_s = {MAX_DURATION_S + 0.5}\n" + TOPIC,
        "duration_s",
        f"must be a number <= {int(MAX_DURATION_S)} (7 emulated days",
    )


def test_time_scale() -> None:
    assert parse(f"time_scale = {MIN_TIME_SCALE}\n" + TOPIC).time_scale == MIN_TIME_SCALE
    assert parse(f"time_scale = {MAX_TIME_SCALE}\n" + TOPIC).time_scale == MAX_TIME_SCALE
    rejected(
        "time_scale = 0.0099\n" + TOPIC,
        "time_scale",
        f"must be a number >= {MIN_TIME_SCALE:g} (",
        "got 0.0099",
    )
    rejected("time_scale = 1e-300\n" + TOPIC, "time_scale", f">= {MIN_TIME_SCALE:g}")


@pytest.mark.parametrize(
    ("action", "keys", "key"),
    [
        ("join", {"count": 2, "interval_s": 1}, "interval_s"),
        ("crash", {"count": 1, "interval_s": 1}, "interval_s"),
        ("restart", {"member": "c-0", "interval_s": 1}, "interval_s"),
        ("restart", {"member": "c-0", "downtime_s": 1}, "downtime_s"),
        ("pause", {"member": "c-0", "duration_s": 1}, "duration_s"),
        ("slow", {"member": "c-0", "duration_s": 1, "processing_ms_per_message": 2}, "duration_s"),
        (
            "network_partition",
            {"member": "c-0", "target": "brokers", "duration_s": 1},
            "duration_s",
        ),
        ("zk_quorum_loss", {"duration_s": 1}, "duration_s"),
        ("broker_crash", {"broker": 0, "restart_after_s": 1}, "restart_after_s"),
        ("zk_crash", {"zk_member": 0, "restart_after_s": 1}, "restart_after_s"),
    ],
)
def test_timeline_durations(action: str, keys: dict[str, object], key: str) -> None:
    # The bound itself is accepted at parse time (the plan then checks the end of the run);
    # beyond it, no arithmetic on it is tried at all (1e300 used to reach the planner).
    text = LONG + TOPIC + "[group]\nconsumers = 2\n"
    parse(text + entry(0, action, **keys))
    for value in (MAX_DURATION_S + 1, 1e300):
        rejected(
            text + entry(0, action, **{**keys, key: value}),
            f"timeline[0].{key}",
            f"must be a number <= {int(MAX_DURATION_S)} (7 emulated days, the longest run)",
        )


def test_at_s_stays_within_the_run() -> None:
    assert parse(LONG + TOPIC + entry(MAX_DURATION_S, "join")).timeline[0].at_s == MAX_DURATION_S
    rejected(
        LONG + TOPIC + entry(MAX_DURATION_S + 1, "join"),
        "timeline[0].at_s",
        f"between 0 and duration_s ({MAX_DURATION_S})",
    )


# --------------------------------------------------------------------------- the timeline


def test_timeline_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    # The real cap (100,000) takes a second of TOML decoding; the benchmark covers it.
    monkeypatch.setattr(scenario_module, "MAX_TIMELINE_ENTRIES", 3)
    assert len(parse(TOPIC + entry(1, "join") * 3).timeline) == 3
    rejected(
        TOPIC + entry(1, "join") * 4,
        "timeline",
        "timeline: 4 [[timeline]] entries, more than 3 (the orchestrator schedules",
    )


def test_planned_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scenario_module, "MAX_PLANNED_STEPS", 10)
    head = LONG + TOPIC + "[group]\nconsumers = 5\n"
    # a burst: one step for the entry, one per member
    assert len(parse(head + entry(1, "join", count=9)).action_plan()) == 9
    rejected(
        head + entry(1, "join", count=10),
        "timeline[0].count",
        "expands to more than 10 planned steps",
    )
    # a restart of all five: the entry, five restarts, five returns
    rejected(
        head + entry(1, "restart", members="all"),
        "timeline[0].members",
        "expands to more than 10 planned steps",
    )
    # a fault on all five counts each member it names: 3 entries, then 4 more per fault
    partition = entry(1, "network_partition", members="all", target="brokers", duration_s=1)
    plan = parse(head + partition * 2).action_plan()
    assert [a.members for a in plan] == [tuple(f"c-{i}" for i in range(5))] * 2
    rejected(head + partition * 3, "timeline[1].members", "more than 10 planned steps")


def test_members_list() -> None:
    names = [f"c-{i}" for i in range(MAX_MEMBERS + 1)]
    rejected(
        TOPIC + entry(1, "restart", members=names),
        "timeline[0].members",
        f"{MAX_MEMBERS + 1} names, more than the {MAX_MEMBERS} members a run holds",
    )


def test_add_partitions() -> None:
    head = "[cluster]\nbrokers = 3\n"
    grow = entry(1, "add_partitions", topic="t0", partitions=MAX_PARTITIONS_PER_TOPIC)
    assert parse(head + topics(4) + grow).action_plan()[0].partitions == MAX_PARTITIONS_PER_TOPIC
    rejected(
        head + topics(4) + grow.replace(f"{MAX_PARTITIONS_PER_TOPIC}", "50001"),
        "timeline[0].partitions",
        f"must be an integer <= {MAX_PARTITIONS_PER_TOPIC} (",
    )
    # replication factor 3: 33,333 partitions hold the topic's 100,000 replicas at most
    rejected(
        head + topics(4, rf=3) + grow,
        "timeline[0].partitions",
        f"must be an integer <= 33333 (at most {MAX_REPLICAS_PER_TOPIC} replicas",
    )


def test_add_partitions_over_all_topics_through_time() -> None:
    # 190,000 partitions at the start: growing t3 by 10,000 fills the run; t4 cannot grow.
    full = topics(*[MAX_PARTITIONS_PER_TOPIC] * 3, 30_000, 10_000)
    grow = entry(1, "add_partitions", topic="t3", partitions=40_000)
    assert parse(full + grow).action_plan()[0].partitions == 40_000
    again = entry(2, "add_partitions", topic="t4", partitions=10_001)
    rejected(
        full + grow + again,
        "timeline[1].partitions",
        f"must be an integer <= 10000 (at most {MAX_PARTITIONS_TOTAL} partitions over all "
        f"topics; the others have {MAX_PARTITIONS_TOTAL - 10_000} at 2.0 s), got 10001",
    )


def test_a_long_list_of_choices_is_cut_short() -> None:
    message = rejected(
        topics(*[1] * 200) + entry(1, "add_partitions", topic="x", partitions=2),
        "timeline[0].topic",
        '"t19", ... (200 in all), got "x"',
    )
    assert len(message) < 400


# --------------------------------------------------------------------------- Kafka configs


def _int_limit(name: str) -> int:
    spec = KAFKA_CONFIG_KEYS[name]
    return INT32_MAX if spec.maximum is None else min(spec.maximum, INT32_MAX)


INT_KEYS = sorted(name for name, spec in KAFKA_CONFIG_KEYS.items() if spec.kind == "int")


@pytest.mark.parametrize("name", INT_KEYS)
def test_every_int_config_is_bounded(name: str) -> None:
    limit = _int_limit(name)
    key = f"[kafka].{json.dumps(name)}"
    message = rejected(TOPIC + f"[kafka]\n{json.dumps(name)} = {limit + 1}\n", key)
    assert f" {limit} (" in message or f" {limit}, got" in message
    assert message.endswith(f"got {limit + 1}")


def test_time_configs_take_kafkas_int_never() -> None:
    # max.poll.interval.ms = Integer.MAX_VALUE is how many deployments say "never".
    parse(TOPIC + '[kafka]\n"max.poll.interval.ms" = 2147483647\n')
    rejected(
        TOPIC + '[kafka]\n"max.poll.interval.ms" = 2147483648\n',
        '[kafka]."max.poll.interval.ms"',
        "must be an integer <= 2147483647 (Kafka's int type",
    )
    parse(TOPIC + f'[kafka]\n"replica.lag.max.messages" = {INT32_MAX}\n')


def test_a_scaled_zookeeper_session_stays_a_java_int() -> None:
    rejected(
        "time_scale = 10.0\n" + TOPIC + '[kafka]\n"zookeeper.session.timeout.ms" = 2147483647\n',
        '[kafka]."zookeeper.session.timeout.ms"',
        "must be an integer <= 214748364 at time_scale 10 (",
    )


def test_zookeeper_session_timeout_of_one_ms() -> None:
    # Before: accepted, then a traceback from tick_time_for when the run started.
    rejected(
        TOPIC + '[kafka]\n"zookeeper.session.timeout.ms" = 1\n',
        '[kafka]."zookeeper.session.timeout.ms"',
        "must be an integer >= 2 at time_scale 1 (",
        "ZooKeeper grants at least 2 ticks",
        "got 1",
    )


def test_zookeeper_session_timeout_is_scaled() -> None:
    assert parse("time_scale = 0.5\n" + TOPIC + '[kafka]\n"zookeeper.session.timeout.ms" = 3\n')
    rejected(
        "time_scale = 0.5\n" + TOPIC + '[kafka]\n"zookeeper.session.timeout.ms" = 2\n',
        '[kafka]."zookeeper.session.timeout.ms"',
        "must be an integer >= 3 at time_scale 0.5 (",
    )
    rejected(
        "time_scale = 0.01\n" + TOPIC + '[kafka]\n"zookeeper.session.timeout.ms" = 100\n',
        '[kafka]."zookeeper.session.timeout.ms"',
        "must be an integer >= 150 at time_scale 0.01 (",
    )


@pytest.mark.parametrize("time_scale", [MIN_TIME_SCALE, 0.03, 0.25, 0.5, 1.0, 3.0, MAX_TIME_SCALE])
def test_zookeeper_session_timeouts_accepted_are_the_ones_zookeeper_grants(
    time_scale: float,
) -> None:
    head = f"time_scale = {time_scale}\n" + TOPIC + "[kafka]\n"
    for value in [*range(1, 40), 149, 150, 151, 199, 200, 201, 6000, 86_400_000]:
        try:
            parse(head + f'"zookeeper.session.timeout.ms" = {value}\n')
        except ScenarioError as err:
            with pytest.raises(ValueError):
                tick_time_for(value, time_scale)
            # the least value the message names is the least ZooKeeper grants
            least = int(str(err).split("must be an integer >= ")[1].split()[0])
            tick_time_for(least, time_scale)
            with pytest.raises(ValueError):
                tick_time_for(least - 1, time_scale)
            continue
        tick = tick_time_for(value, time_scale)
        requested = round(value * time_scale)
        assert negotiated_session_timeout_ms(requested, tick) == requested
        assert 20 * tick <= INT32_MAX  # ZooKeeper's maxSessionTimeout is a Java int


@pytest.mark.parametrize("name", INT_KEYS)
@pytest.mark.parametrize("end", ["minimum", "limit"])
def test_the_run_takes_every_int_config_validation_accepts(name: str, end: str) -> None:
    spec = KAFKA_CONFIG_KEYS[name]
    value = (spec.minimum if spec.minimum is not None else 0) if end == "minimum" else None
    if value is None:
        value = _int_limit(name)
    # a key newer than the default release is set at its own release
    head = "" if spec.since is None else f'kafka_version = "{".".join(map(str, spec.since))}"\n'
    try:
        sc = parse(head + TOPIC + f"[kafka]\n{json.dumps(name)} = {value}\n")
    except ScenarioError as err:  # only a rule between keys may refuse a bound alone
        assert "Kafka requires" in str(err) or "zookeeper.session" in str(err), str(err)
        return
    props = dict(sc.kafka)
    LegacyConsumerConfig.from_kafka(props)
    ClassicConsumerConfig.from_kafka(props, kafka_version=sc.kafka_version)
    GroupCoordinatorConfig.from_kafka(props, kafka_version=sc.kafka_version)
    Kip848ConsumerConfig.from_kafka(props)


@pytest.mark.parametrize(
    ("name", "value", "fragment"),
    [
        ("rebalance.max.retries", 0, "must be an integer >= 1, got 0"),
        ("request.timeout.ms", 0, "must be an integer >= 1, got 0"),
    ],
)
def test_minimums_the_run_needs(name: str, value: int, fragment: str) -> None:
    rejected(
        TOPIC + f"[kafka]\n{json.dumps(name)} = {value}\n", f"[kafka].{json.dumps(name)}", fragment
    )


def test_classic_group_session_bounds_are_ordered() -> None:
    rejected(
        TOPIC + '[kafka]\n"group.min.session.timeout.ms" = 9000\n'
        '"group.max.session.timeout.ms" = 8000\n',
        '[kafka]."group.min.session.timeout.ms"',
        "group.min.session.timeout.ms (9000) <= group.max.session.timeout.ms (8000)",
    )


# --------------------------------------------------------------------------- the planner's live set


def test_live_members_match_a_sorted_list() -> None:
    """The order-statistics set the planner picks members from, against the sorted list."""
    rng = random.Random(7)
    for capacity in (0, 1, 2, 7, 64, 130):
        initial = rng.randint(0, capacity)
        live = scenario_module._LiveMembers(capacity, initial)
        model = list(range(initial))
        for _ in range(4 * capacity + 5):
            if capacity and rng.random() < 0.5:
                index = rng.randrange(capacity)
                if index in model:
                    live.remove(index)
                    model.remove(index)
                else:
                    live.add(index)
                    model.append(index)
                    model.sort()
            names = [f"c-{i}" for i in model]
            assert len(live) == len(model)
            assert list(live.names()) == names
            assert [live[k] for k in range(len(model))] == names
            if model:
                assert live[-1] == names[-1]
                seed = rng.random()
                assert random.Random(seed).choice(live) == random.Random(seed).choice(names)
            hosts = rng.randint(1, 5)
            host = rng.randrange(hosts)
            assert list(live.names_on(host, hosts)) == [
                f"c-{i}" for i in model if i % hosts == host
            ]
            for index in range(capacity):
                assert (index in live) == (index in model)
