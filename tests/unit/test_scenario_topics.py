"""Topics that come and go in a scenario: create_topic, delete_topic and pattern subscriptions.

The reader checks each entry alone (names, counts, keys); the planner checks them
through time (a topic created must not exist then, one deleted, grown or
subscribed to must; replicas need as many live brokers). Every error is one line
naming its key.
"""

from __future__ import annotations

import json

import pytest

from emulator.scenario import Scenario, ScenarioError, parse_scenario
from emulator.scenario.limits import MAX_REPLICAS_PER_TOPIC, MAX_TOPIC_PATTERN_CHARS

SOURCE = "topics.toml"
TOPICS = (
    '[[topics]]\nname = "events-1"\npartitions = 4\n'
    '[[topics]]\nname = "audit"\npartitions = 2\nreplication_factor = 2\n'
)


def parse(text: str) -> Scenario:
    return parse_scenario(text, SOURCE)


def entry(at: float, action: str, **keys: object) -> str:
    lines = "".join(f"{k} = {json.dumps(v)}\n" for k, v in keys.items())
    return f'[[timeline]]\nat_s = {at}\naction = "{action}"\n{lines}'


def rejected(text: str, key: str, fragment: str) -> str:
    with pytest.raises(ScenarioError) as info:
        parse(text)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"scenario {SOURCE}: ")
    assert info.value.key == key, message
    assert key in message and fragment in message, message
    return message


# --------------------------------------------------------------------------- create and delete


def test_a_topic_created_deleted_and_created_again() -> None:
    sc = parse(
        TOPICS
        + entry(5, "create_topic", topic="events-2", partitions=3, replication_factor=2)
        + entry(10, "delete_topic", topic="events-2")
        + entry(15, "create_topic", topic="events-2", partitions=1)
        + entry(20, "add_partitions", topic="events-2", partitions=6)
    )
    plan = sc.action_plan()
    assert [(a.action, a.topic, a.partitions, a.replication_factor) for a in plan] == [
        ("create_topic", "events-2", 3, 2),
        ("delete_topic", "events-2", None, None),
        ("create_topic", "events-2", 1, 1),  # replication_factor defaults to 1
        ("add_partitions", "events-2", 6, None),
    ]
    assert plan[0].params() == {
        "at_s": 5.0,
        "event_index": 0,
        "topic": "events-2",
        "partitions": 3,
        "replication_factor": 2,
    }
    assert plan[1].params() == {"at_s": 10.0, "event_index": 1, "topic": "events-2"}
    timeline = sc.to_dict()["timeline"]
    assert timeline[0]["replication_factor"] == 2 and "replication_factor" not in timeline[1]


def test_a_declared_topic_deleted_and_its_name_reused() -> None:
    sc = parse(
        TOPICS
        + entry(5, "delete_topic", topic="audit")
        + entry(6, "create_topic", topic="audit", partitions=5, replication_factor=3)
    )
    assert [a.action for a in sc.action_plan()] == ["delete_topic", "create_topic"]
    assert sc.topic("audit").partitions == 2  # [[topics]] is the start, as written


def test_a_created_topics_replicas_are_bounded_by_its_own_replication_factor() -> None:
    # declared with rf 2, re-created with rf 3: 33,333 partitions hold the 100,000 replicas
    head = TOPICS + entry(5, "delete_topic", topic="audit")
    head += entry(6, "create_topic", topic="audit", partitions=1, replication_factor=3)
    assert parse(head + entry(7, "add_partitions", topic="audit", partitions=33_333))
    rejected(
        head + entry(7, "add_partitions", topic="audit", partitions=33_334),
        "timeline[2].partitions",
        f"must be an integer <= 33333 (at most {MAX_REPLICAS_PER_TOPIC} replicas, partitions x "
        "replication_factor (3)",
    )


@pytest.mark.parametrize(
    ("keys", "key", "fragment"),
    [
        ({"partitions": 1}, "timeline[0].topic", "timeline[0].topic is required"),
        ({"topic": "a b", "partitions": 1}, "timeline[0].topic", "a Kafka topic name"),
        ({"topic": "..", "partitions": 1}, "timeline[0].topic", "other than '.' or '..'"),
        ({"topic": "x" * 250, "partitions": 1}, "timeline[0].topic", "(at most 249)"),
        ({"topic": 7, "partitions": 1}, "timeline[0].topic", "got 7"),
        (
            {"topic": "__consumer_offsets", "partitions": 1},
            "timeline[0].topic",
            "other than the brokers' internal offsets topic",
        ),
        ({"topic": "n"}, "timeline[0].partitions", "timeline[0].partitions is required"),
        ({"topic": "n", "partitions": 0}, "timeline[0].partitions", ">= 1, got 0"),
        (
            {"topic": "n", "partitions": 1, "replication_factor": 0},
            "timeline[0].replication_factor",
            "between 1 and 3 ([cluster].brokers), got 0",
        ),
        (
            {"topic": "n", "partitions": 1, "replication_factor": 4},
            "timeline[0].replication_factor",
            "between 1 and 3 ([cluster].brokers), got 4",
        ),
        (
            {"topic": "n", "partitions": 50_000, "replication_factor": 3},
            "timeline[0].replication_factor",
            f"must be an integer <= 2 (at most {MAX_REPLICAS_PER_TOPIC} replicas",
        ),
        (
            {"topic": "events-1", "partitions": 1},
            "timeline[0].topic",
            'topic "events-1" already exists at 1.0 s (declared in [[topics]]; Kafka refuses: '
            "TopicExistsException)",
        ),
        (
            {"topic": "n", "partitions": 1, "member": "c-0"},
            "timeline[0].member",
            "not allowed for a create_topic (it takes topic, partitions, replication_factor)",
        ),
    ],
)
def test_create_topic_errors(keys: dict[str, object], key: str, fragment: str) -> None:
    rejected(TOPICS + entry(1, "create_topic", **keys), key, fragment)


def test_creating_a_name_twice() -> None:
    twice = entry(1, "create_topic", topic="n", partitions=1)
    rejected(
        TOPICS + twice + twice.replace("at_s = 1", "at_s = 2"),
        "timeline[1].topic",
        'topic "n" already exists at 2.0 s (created by timeline[0] at 1.0 s;',
    )


def test_replicas_need_as_many_live_brokers() -> None:
    crash = entry(1, "broker_crash", broker=1)
    create = entry(2, "create_topic", topic="n", partitions=1, replication_factor=3)
    rejected(
        TOPICS + crash + create,
        "timeline[1].replication_factor",
        "3 replicas, but only 2 brokers are up at 2.0 s (broker 1 crashed at 1.0 s); Kafka "
        'refuses: "replication factor: 3 larger than available brokers: 2"',
    )
    # once it is back, the same creation goes through
    back = entry(1, "broker_crash", broker=1, restart_after_s=0.5)
    assert parse(TOPICS + back + create).action_plan()[-1].action == "create_topic"


@pytest.mark.parametrize(
    ("text", "key", "fragment"),
    [
        (entry(1, "delete_topic"), "timeline[0].topic", "is required"),
        (
            entry(1, "delete_topic", topic="nope"),
            "timeline[0].topic",
            'must be one of "events-1", "audit", got "nope"',
        ),
        (
            entry(1, "delete_topic", topic="audit") + entry(2, "delete_topic", topic="audit"),
            "timeline[1].topic",
            'no topic "audit" exists at 2.0 s (deleted by timeline[0] at 1.0 s)',
        ),
        (
            entry(1, "delete_topic", topic="n") + entry(5, "create_topic", topic="n", partitions=1),
            "timeline[0].topic",
            'no topic "n" exists at 1.0 s (it is created by timeline[1] at 5.0 s)',
        ),
        (
            entry(1, "delete_topic", topic="audit", partitions=2),
            "timeline[0].partitions",
            "not allowed for a delete_topic (it takes topic)",
        ),
        (
            entry(1, "delete_topic", topic="audit") + entry(2, "add_partitions", topic="audit"),
            "timeline[1].partitions",
            "is required",
        ),
        (
            entry(1, "delete_topic", topic="audit")
            + entry(2, "add_partitions", topic="audit", partitions=9),
            "timeline[1].topic",
            'no topic "audit" exists at 2.0 s (deleted by timeline[0] at 1.0 s)',
        ),
        (
            entry(1, "add_partitions", topic="n", partitions=9)
            + entry(2, "create_topic", topic="n", partitions=1),
            "timeline[0].topic",
            'no topic "n" exists at 1.0 s (it is created by timeline[1] at 2.0 s)',
        ),
        (
            entry(1, "delete_topic", topic="audit")
            + entry(2, "subscribe", topics=["events-1", "audit"]),
            "timeline[1].topics",
            'no topic "audit" exists at 2.0 s (deleted by timeline[0] at 1.0 s)',
        ),
    ],
)
def test_topics_through_time(text: str, key: str, fragment: str) -> None:
    rejected(TOPICS + text, key, fragment)


def test_an_explicit_subscription_may_name_a_created_topic() -> None:
    sc = parse(
        TOPICS
        + entry(1, "create_topic", topic="n", partitions=2)
        + entry(2, "subscribe", topics=["n"])
    )
    assert sc.action_plan()[-1].topics == ("n",)


def test_internal_topic_cannot_be_declared() -> None:
    rejected(
        '[[topics]]\nname = "__consumer_offsets"\npartitions = 1\n',
        "topics[0].name",
        "other than the brokers' internal offsets topic",
    )


# --------------------------------------------------------------------------- [group].topic_pattern


def test_group_pattern_selects_the_declared_topics_it_matches() -> None:
    sc = parse(TOPICS + '[group]\ntopic_pattern = "events-.*"\n')
    assert sc.group.topic_pattern == "events-.*" and sc.group.topic_filter == "whitelist"
    assert sc.group.topics == ("events-1",)
    assert sc.subscription() == {"events-1": 1}
    group = sc.to_dict()["group"]
    assert (group["topic_pattern"], group["topic_filter"]) == ("events-.*", "whitelist")
    assert "topic_pattern" not in parse(TOPICS).to_dict()["group"]  # older manifests unchanged


def test_group_pattern_full_match_and_blacklist() -> None:
    assert parse(TOPICS + '[group]\ntopic_pattern = "^event*"\n').group.topics == ()
    sc = parse(TOPICS + '[group]\ntopic_pattern = "events-.*"\ntopic_filter = "blacklist"\n')
    assert (sc.group.topics, sc.group.topic_filter) == (("audit",), "blacklist")
    # nothing matches yet: a pattern group may start with no topic
    assert parse(TOPICS + '[group]\ntopic_pattern = "later-.*"\n').group.topics == ()


@pytest.mark.parametrize(
    ("group", "key", "fragment"),
    [
        (
            'topics = ["audit"]\ntopic_pattern = "a.*"\n',
            "[group].topic_pattern",
            "not allowed together with [group].topics",
        ),
        (
            'topic_filter = "blacklist"\n',
            "[group].topic_filter",
            "only allowed with [group].topic_pattern (a 0.8 filter kind)",
        ),
        (
            'topic_pattern = "a.*"\ntopic_filter = "greylist"\n',
            "[group].topic_filter",
            'must be one of "whitelist", "blacklist", got "greylist"',
        ),
        ('topic_pattern = ""\n', "[group].topic_pattern", "a non-empty regex string"),
        ("topic_pattern = 5\n", "[group].topic_pattern", "got 5"),
        (
            f'topic_pattern = "{"a" * (MAX_TOPIC_PATTERN_CHARS + 1)}"\n',
            "[group].topic_pattern",
            f"at most {MAX_TOPIC_PATTERN_CHARS} characters",
        ),
        (
            'topic_pattern = "a{,2}"\n',
            "[group].topic_pattern",
            "[group].topic_pattern \"a{,2}\": '{' at position 1 does not open a {n}, {n,} or "
            "{n,m} quantifier: Java rejects it",
        ),
        (
            'topic_pattern = "\\\\p{L}+"\n',
            "[group].topic_pattern",
            "Java's Unicode classes have no Python re equivalent",
        ),
        (
            # fine as written (a class holding a space); the 0.8 rewrite drops the space
            'topic_pattern = "a[ ]"\n',
            "[group].topic_pattern",
            'as the 0.8 consumer\'s TopicFilter rewrites it ("a[]"):',
        ),
        ('topic_patern = "a"\n', "[group].topic_patern", "did you mean [group].topic_pattern?"),
    ],
)
def test_group_pattern_errors(group: str, key: str, fragment: str) -> None:
    rejected(TOPICS + "[group]\n" + group, key, fragment)


# --------------------------------------------------------------------------- subscribe by pattern


def test_subscribe_by_pattern_resolves_against_the_topics_of_that_moment() -> None:
    sc = parse(
        TOPICS
        + entry(1, "subscribe", topic_pattern="events-.*")
        + entry(2, "create_topic", topic="events-2", partitions=1)
        + entry(3, "subscribe", topic_pattern="events-.*", members=["c-0"])
        + entry(4, "delete_topic", topic="events-1")
        + entry(5, "subscribe", topic_pattern="events-.*", topic_filter="blacklist")
    )
    subs = [a for a in sc.action_plan() if a.action == "subscribe"]
    assert [(a.topics, a.topic_pattern, a.topic_filter) for a in subs] == [
        (("events-1",), "events-.*", "whitelist"),
        (("events-1", "events-2"), "events-.*", "whitelist"),
        (("audit",), "events-.*", "blacklist"),
    ]
    assert subs[1].members == ("c-0",)
    assert subs[0].params()["topic_pattern"] == "events-.*"
    none = parse(TOPICS + entry(1, "subscribe", topic_pattern="x.*")).action_plan()[0]
    assert none.topics == () and none.params()["topics"] == []  # matched nothing: said so
    written = sc.to_dict()["timeline"][0]
    assert (written["topic_pattern"], written["topic_filter"]) == ("events-.*", "whitelist")


@pytest.mark.parametrize(
    ("keys", "key", "fragment"),
    [
        ({}, "timeline[0].topics", "timeline[0].topics (or topic_pattern) is required"),
        (
            {"topics": ["audit"], "topic_pattern": "a.*"},
            "timeline[0].topic_pattern",
            "not allowed together with timeline[0].topics",
        ),
        (
            {"topics": ["audit"], "topic_filter": "whitelist"},
            "timeline[0].topic_filter",
            "only allowed with timeline[0].topic_pattern",
        ),
        ({"topic_pattern": "(?=a"}, "timeline[0].topic_pattern", "missing ), unterminated"),
        ({"topic_pattern": "a(?i)b"}, "timeline[0].topic_pattern", "embedded flags after"),
        (
            {"topic_pattern": "a.*", "topic_filter": "both"},
            "timeline[0].topic_filter",
            'must be one of "whitelist", "blacklist", got "both"',
        ),
    ],
)
def test_subscribe_errors(keys: dict[str, object], key: str, fragment: str) -> None:
    rejected(TOPICS + entry(1, "subscribe", **keys), key, fragment)
