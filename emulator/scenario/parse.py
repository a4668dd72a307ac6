"""Reading a scenario: TOML to a validated :class:`~emulator.scenario.model.Scenario`.

Validation fails on the first error with a :class:`~emulator.scenario.errors.ScenarioError`
of one line that names the key, for example ``scenario quickstart.toml:
[group].consumers must be an integer >= 1, got "four"``. Unknown keys are
errors, with a did-you-mean when a known key is close. ``timeline[i]`` and
``topics[i]`` count from 0 in file order. Each timeline action takes its own
keys (any other key is an error); every size is checked against its bound
(:mod:`emulator.scenario.limits`) before anything proportional to it is built,
and the timeline is expanded once (:mod:`emulator.scenario.plan`) to check it
through time (the entries are read by :mod:`emulator.scenario.timeline`, the
typed reads are :mod:`emulator.scenario.reader`'s). ``[kafka]`` values are
checked against the key registry (:mod:`emulator.kafka_keys`): their type,
range and the rules between keys.
"""

from __future__ import annotations

import json
import math
import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Final

from emulator.delivery import MANUAL_COMMIT_MODES, REBALANCE_LISTENERS
from emulator.kafka_keys import (
    INT32_MAX,
    KAFKA_CONFIG_KEYS,
    KAFKA_ORDER_RULES,
    KafkaKeySpec,
    KafkaValue,
    effective_value,
    kafka_int_limit,
    kafka_version_at_least,
    parse_kafka_version,
)
from emulator.modern.config import MIGRATION_SINCE
from emulator.scenario import plan
from emulator.scenario.errors import ScenarioError, did_you_mean, int_requirement, show, tighter
from emulator.scenario.faults import UPGRADE_TARGETS
from emulator.scenario.limits import (
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
    ZK_MIN_SESSION_TIMEOUT_MS,
)
from emulator.scenario.model import (
    AUTO_COMMIT_KEYS,
    PLACEMENT_ROLES,
    ClusterSpec,
    GroupSpec,
    PlacementSpec,
    ProducerSpec,
    Scenario,
    TopicSpec,
)
from emulator.scenario.reader import TableReader, in_array, in_section
from emulator.scenario.timeline import TimelineReader
from emulator.topic_regex import WHITELIST, select_topics

__all__ = [
    "ASSIGNOR_NAMES",
    "PARTITIONERS",
    "ZOOKEEPER_ENSEMBLE_SIZES",
    "bundled_scenarios",
    "load_scenario",
    "parse_scenario",
    "scenario_from_document",
]

ASSIGNOR_NAMES: Final = (
    "range",
    "roundrobin",
    "sticky",
    "cooperative-sticky",
    "uniform",
)
"""Assignors ``[group].assignor`` may name: client-side (classic) and server-side (KIP-848)."""
PARTITIONERS: Final = ("round-robin", "key-hash", "explicit")
"""How ``[producer].partitioner`` spreads messages over partitions."""
ZOOKEEPER_ENSEMBLE_SIZES: Final = (1, 3, 5)
"""How many members the embedded ZooKeeper ensemble may have."""

_NAME_RE: Final = re.compile(r"[A-Za-z0-9._-]+")
_PLACEMENT_RE: Final = re.compile(
    r"default|spread|resource:[A-Za-z0-9_.\-]{1,100}|node:[0-9A-Za-z.:\-]{1,100}"
)


class _Parser(TableReader):
    """Reads one TOML document into a :class:`Scenario`, failing on the first error."""

    def parse(self, doc: dict[str, object]) -> Scenario:
        for key, value in doc.items():
            if key not in _TOP_KEYS:
                kind = "key"
                if isinstance(value, dict):
                    kind, key = "section", f"[{key}]"
                elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
                    kind, key = "array of tables", f"[[{key}]]"
                candidates = [_render_top(k) for k in _TOP_KEYS]
                hint = did_you_mean(key, candidates, lambda k: k)
                self.fail(key, f"{key}: unknown {kind}{hint}")
        name = self.string(
            doc,
            "name",
            "name",
            _default_name(self.source),
            _NAME_RE,
            100,
            "a name of letters, digits, '.', '_' or '-' (at most 100)",
        )
        description = self.string(doc, "description", "description", "")
        if len(description) > MAX_DESCRIPTION_CHARS:
            self.must(
                "description",
                f"a string of at most {MAX_DESCRIPTION_CHARS} characters (it goes into every "
                f"run's manifest; this one has {len(description)})",
                description,
            )
        seed = self.integer(doc, "seed", "seed", 0, 0, 2**63 - 1)
        duration_s = self.number(
            doc,
            "duration_s",
            "duration_s",
            60.0,
            "a number > 0",
            lambda x: x > 0,
            MAX_DURATION_S,
            "7 emulated days, the longest run",
        )
        time_scale = self.number(
            doc,
            "time_scale",
            "time_scale",
            1.0,
            f"a number with 0 < time_scale <= {MAX_TIME_SCALE:g}",
            lambda x: 0 < x <= MAX_TIME_SCALE,
        )
        if time_scale < MIN_TIME_SCALE:
            self.must(
                "time_scale",
                f"a number >= {MIN_TIME_SCALE:g} (a Kafka millisecond is then 10 µs of wall "
                "time, the finest an event loop's timers keep)",
                time_scale,
            )
        kafka_version = self.string(
            doc,
            "kafka_version",
            "kafka_version",
            "3.9",
            requirement='a Kafka release like "3.9" or "2.8.2"',
        )
        try:
            parse_kafka_version(kafka_version)
        except ValueError as exc:
            self.fail("kafka_version", f"kafka_version: {exc}")
        cluster = self.cluster(self.table(doc, "cluster"))
        topics = self.topics(doc, cluster)
        topic_names = [t.name for t in topics]
        producer = self.producer(self.table(doc, "producer"), topics)
        group = self.group(self.table(doc, "group"), topic_names, name)
        kafka = self.kafka(self.table(doc, "kafka"), time_scale, kafka_version)
        if group.manual_commit != "none":
            for key in AUTO_COMMIT_KEYS:
                if kafka.get(key) is True:
                    self.fail(
                        "[group].manual_commit",
                        f"[group].manual_commit = {json.dumps(group.manual_commit)} needs "
                        f"auto-commit off, but [kafka].{json.dumps(key)} = true",
                    )
                kafka[key] = False  # the application commits: auto-commit off everywhere
        if (
            (group.share_release or group.share_reject)
            and kafka_version_at_least(kafka_version, (4, 1))
            and kafka.get("share.acknowledgement.mode", "implicit") == "implicit"
        ):
            # 4.1+: acknowledge() in implicit mode throws IllegalStateException (4.0
            # infers explicit mode from the application's first acknowledge()).
            self.fail(
                "[group].share_release",
                "[group].share_release / share_reject need the share consumer to acknowledge "
                'records itself: set [kafka]."share.acknowledgement.mode" = "explicit" '
                f"(Kafka {kafka_version}'s implicit mode has the application acknowledge nothing)",
            )
        placement = self.placement(self.table(doc, "placement"))
        timeline = TimelineReader(self.source).timeline(
            doc, duration_s, cluster, topics, group.consumers
        )
        self.member_bounds(
            group, group.consumers + sum(e.count for e in timeline if e.action == "join")
        )
        gated = [("[group].mixed", "a group of both protocols")] if group.mixed_to else []
        gated += [
            (f"timeline[{e.index}].action", "an upgrade") for e in timeline if e.action == "upgrade"
        ]
        if gated and not kafka_version_at_least(kafka_version, MIGRATION_SINCE):
            key, what = gated[0]
            first = ".".join(str(x) for x in MIGRATION_SINCE)
            self.fail(
                key,
                f"{key}: {what} (online migration between the classic and consumer "
                f"protocols) needs kafka_version {first} or later, got {kafka_version}",
            )
        scenario = Scenario(
            name=name,
            description=description,
            seed=seed,
            duration_s=duration_s,
            time_scale=time_scale,
            cluster=cluster,
            topics=topics,
            producer=producer,
            group=group,
            kafka=kafka,
            timeline=timeline,
            source=self.source,
            kafka_version=kafka_version,
            placement=placement,
        )
        try:
            plan.expand(scenario)
        except plan.TimelineError as err:
            self.fail(err.key, str(err))
        return scenario

    def member_bounds(self, group: GroupSpec, members: int) -> None:
        """The bounds that depend on every member of the run (joins included)."""
        fewest_per_host = -(-members // MAX_CONSUMER_HOSTS)
        if group.consumers_per_host < fewest_per_host:
            self.must(
                "[group].consumers_per_host",
                f"an integer >= {fewest_per_host} for the run's {members} members (at most "
                f"{MAX_CONSUMER_HOSTS} consumer hosts, each a Ray actor process)",
                group.consumers_per_host,
            )
        if members * group.streams_per_consumer > MAX_CONSUMER_THREADS:
            self.must(
                "[group].streams_per_consumer",
                int_requirement(
                    None,
                    MAX_CONSUMER_THREADS // members,
                    f"at most {MAX_CONSUMER_THREADS} consumer threads, members x "
                    f"streams_per_consumer, for the run's {members} members",
                ),
                group.streams_per_consumer,
            )

    def placement(self, table: dict[str, object]) -> PlacementSpec:
        self.check_keys(table, PLACEMENT_ROLES, in_section("placement"))
        values = {
            role: self.string(
                table,
                role,
                f"[placement].{role}",
                "default",
                pattern=_PLACEMENT_RE,
                requirement='"default", "spread", "resource:NAME" or "node:IP"',
            )
            for role in PLACEMENT_ROLES
        }
        return PlacementSpec(**values)

    def cluster(self, table: dict[str, object]) -> ClusterSpec:
        self.check_keys(table, ("brokers", "zookeeper_ensemble"), in_section("cluster"))
        brokers = self.integer(
            table,
            "brokers",
            "[cluster].brokers",
            3,
            1,
            limit=MAX_BROKERS,
            limit_note="each broker is a Ray actor process",
        )
        ensemble = self.integer(table, "zookeeper_ensemble", "[cluster].zookeeper_ensemble", 1)
        if ensemble not in ZOOKEEPER_ENSEMBLE_SIZES:
            self.must("[cluster].zookeeper_ensemble", "1, 3 or 5", ensemble)
        return ClusterSpec(brokers=brokers, zookeeper_ensemble=ensemble)

    def topics(self, doc: Mapping[str, object], cluster: ClusterSpec) -> tuple[TopicSpec, ...]:
        if "topics" not in doc:
            self.fail("topics", "topics is required: add at least one [[topics]] table")
        raw = doc["topics"]
        if not isinstance(raw, list) or not raw or not all(isinstance(t, dict) for t in raw):
            self.must("topics", "a non-empty array of tables ([[topics]])", raw)
        if len(raw) > MAX_TOPICS:
            self.fail(
                "topics",
                f"topics: {len(raw)} [[topics]] tables, more than {MAX_TOPICS} (a legacy "
                "member's registration znode lists every topic it subscribes to and must fit "
                "ZooKeeper's 1 MB jute.maxbuffer)",
            )
        specs: list[TopicSpec] = []
        first_seen: dict[str, int] = {}
        partition_total = replica_total = 0
        for i, table in enumerate(raw):
            where = f"topics[{i}]"
            self.check_keys(table, ("name", "partitions", "replication_factor"), in_array(where))
            name = self.topic_name(table, "name", f"{where}.name")
            if name in first_seen:
                self.fail(
                    f"{where}.name",
                    f"{where}.name: topic {show(name)} is defined twice "
                    f"(also topics[{first_seen[name]}])",
                )
            first_seen[name] = i
            limit, note = tighter(
                (
                    MAX_PARTITIONS_PER_TOPIC,
                    "the topic's znode /brokers/topics/<t> holds its whole assignment, "
                    "within ZooKeeper's 1 MB jute.maxbuffer",
                ),
                (
                    MAX_PARTITIONS_TOTAL - partition_total,
                    f"at most {MAX_PARTITIONS_TOTAL} partitions over all topics, for the "
                    "controller's znodes in the embedded ZooKeeper; the topics before have "
                    f"{partition_total}",
                ),
            )
            partitions = self.integer(
                table, "partitions", f"{where}.partitions", None, 1, limit=limit, limit_note=note
            )
            limit, note = tighter(
                (
                    MAX_REPLICAS_PER_TOPIC // partitions,
                    f"at most {MAX_REPLICAS_PER_TOPIC} replicas, partitions x "
                    "replication_factor, in the topic's znode /brokers/topics/<t>",
                ),
                (
                    (MAX_REPLICAS_TOTAL - replica_total) // partitions,
                    f"at most {MAX_REPLICAS_TOTAL} replicas over all topics, each a log a "
                    f"broker keeps; the topics before have {replica_total}",
                ),
            )
            rf = self.integer(
                table,
                "replication_factor",
                f"{where}.replication_factor",
                1,
                1,
                cluster.brokers,
                "[cluster].brokers",
                limit=limit,
                limit_note=note,
            )
            partition_total += partitions
            replica_total += partitions * rf
            specs.append(TopicSpec(name=name, partitions=partitions, replication_factor=rf))
        return tuple(specs)

    def producer(self, table: dict[str, object], topics: Sequence[TopicSpec]) -> ProducerSpec:
        self.check_keys(
            table,
            ("rate_per_s", "topics", "partitioner", "batch_size", "explicit_partition"),
            in_section("producer"),
        )
        rate = self.number(
            table,
            "rate_per_s",
            "[producer].rate_per_s",
            100.0,
            "a number >= 0",
            lambda x: x >= 0,
            MAX_RATE_PER_S,
            "the producer actor partitions every message in Python, about a microsecond each",
        )
        names = self.topic_list(table, "topics", "[producer].topics", [t.name for t in topics])
        partitioner = self.choice(
            table, "partitioner", "[producer].partitioner", "round-robin", PARTITIONERS
        )
        batch = self.integer(
            table,
            "batch_size",
            "[producer].batch_size",
            50,
            1,
            limit=MAX_BATCH_SIZE,
            limit_note="100 MiB of 1 KiB messages in one produce call, 100 x Kafka's "
            "message.max.bytes",
        )
        explicit: int | None = None
        if partitioner == "explicit":
            fewest = min((t for t in topics if t.name in names), key=lambda t: t.partitions)
            explicit = self.integer(
                table,
                "explicit_partition",
                "[producer].explicit_partition",
                None,
                0,
                fewest.partitions - 1,
                f"partitions of {show(fewest.name)} minus one",
            )
        elif "explicit_partition" in table:
            self.fail(
                "[producer].explicit_partition",
                "[producer].explicit_partition: only allowed with [producer].partitioner = "
                f'"explicit", not {show(partitioner)}',
            )
        return ProducerSpec(
            rate_per_s=rate,
            topics=names,
            partitioner=partitioner,
            batch_size=batch,
            explicit_partition=explicit,
        )

    def group(
        self, table: dict[str, object], topic_names: Sequence[str], scenario_name: str
    ) -> GroupSpec:
        self.check_keys(
            table,
            (
                "id",
                "consumers",
                "topics",
                "streams_per_consumer",
                "processing_ms_per_message",
                "consumers_per_host",
                "static_membership",
                "assignor",
                "zk_latency_ms",
                "manual_commit",
                "rebalance_listener",
                "topic_pattern",
                "topic_filter",
                "mixed",
                "share_release",
                "share_reject",
            ),
            in_section("group"),
        )
        pattern: str | None = None
        if "topic_pattern" in table:
            if "topics" in table:
                self.fail(
                    "[group].topic_pattern",
                    "[group].topic_pattern: not allowed together with [group].topics (a group "
                    "subscribes by names or by a pattern)",
                )
            pattern = self.topic_pattern(table, "topic_pattern", "[group].topic_pattern")
        kind = self.topic_filter(
            table, "topic_filter", "[group].topic_filter", "[group].topic_pattern"
        )
        topics = (
            self.topic_list(table, "topics", "[group].topics", topic_names)
            if pattern is None
            else select_topics(topic_names, pattern, WHITELIST if kind is None else kind)
        )
        manual = self.choice(
            table, "manual_commit", "[group].manual_commit", "none", MANUAL_COMMIT_MODES
        )
        listener = self.choice(
            table, "rebalance_listener", "[group].rebalance_listener", "none", REBALANCE_LISTENERS
        )
        static = table.get("static_membership", False)
        if not isinstance(static, bool):
            self.must("[group].static_membership", "true or false", static)
        assignor: str | None = None
        if "assignor" in table:
            assignor = self.choice(table, "assignor", "[group].assignor", None, ASSIGNOR_NAMES)
        group_id = self.string(
            table,
            "id",
            "[group].id",
            f"{scenario_name}-group"[:249],
            _NAME_RE,
            249,
            "a group id of letters, digits, '.', '_' or '-' (at most 249)",
        )
        return GroupSpec(
            id=group_id,
            consumers=self.integer(
                table,
                "consumers",
                "[group].consumers",
                1,
                1,
                limit=MAX_MEMBERS,
                limit_note="the most members a run holds, joins included",
            ),
            topics=topics,
            streams_per_consumer=self.integer(
                table,
                "streams_per_consumer",
                "[group].streams_per_consumer",
                1,
                1,
                limit=MAX_STREAMS_PER_CONSUMER,
                limit_note="each stream is a queue and a thread id of the member",
            ),
            processing_ms_per_message=self.number(
                table,
                "processing_ms_per_message",
                "[group].processing_ms_per_message",
                1.0,
                "a number >= 0",
                lambda x: x >= 0,
                MAX_PROCESSING_MS_PER_MESSAGE,
                "a day per message",
            ),
            consumers_per_host=self.integer(
                table,
                "consumers_per_host",
                "[group].consumers_per_host",
                50,
                1,
                limit=MAX_MEMBERS_PER_HOST,
                limit_note="the members of a host share one actor's event loop",
            ),
            static_membership=static,
            assignor=assignor,
            zk_latency_ms=self.number(
                table,
                "zk_latency_ms",
                "[group].zk_latency_ms",
                0.0,
                "a number of milliseconds between 0 and 10000",
                lambda x: 0 <= x <= 10000,
            ),
            manual_commit=manual,
            rebalance_listener=listener,
            topic_pattern=pattern,
            topic_filter=WHITELIST if kind is None else kind,
            **self.mixed(table),
            **self.share_app(table),
        )

    def share_app(self, table: Mapping[str, object]) -> dict[str, Any]:
        """``[group].share_release`` and ``share_reject``: shares of records, 0 to 1 together."""
        out: dict[str, Any] = {}
        for key in ("share_release", "share_reject"):
            if key in table:
                out[key] = self.number(
                    table,
                    key,
                    f"[group].{key}",
                    0.0,
                    "a share of records between 0 and 1",
                    lambda x: 0 <= x <= 1,
                )
        if out.get("share_release", 0.0) + out.get("share_reject", 0.0) > 1:
            self.fail(
                "[group].share_release",
                "[group].share_release + share_reject: at most 1 (shares of the same records)",
            )
        return out

    def mixed(self, table: Mapping[str, object]) -> dict[str, Any]:
        """``[group].mixed = {to, members}``: ``members`` (a count of the first
        members, or their names) start on the protocol ``to``."""
        if "mixed" not in table:
            return {}
        where = "[group].mixed"
        mixed = table["mixed"]
        if not isinstance(mixed, dict):
            self.must(where, 'a table such as {to = "consumer", members = 3}', mixed)
        self.check_keys(mixed, ("to", "members"), lambda k: f"{where}.{k}")
        to = self.choice(mixed, "to", f"{where}.to", None, UPGRADE_TARGETS)
        consumers = table.get("consumers", 1)
        n = consumers if isinstance(consumers, int) and not isinstance(consumers, bool) else 1
        members = mixed.get("members")
        names: tuple[str, ...]
        if isinstance(members, int) and not isinstance(members, bool) and 1 <= members <= n:
            names = tuple(plan.member_name(i) for i in range(members))
        elif (
            isinstance(members, list)
            and members
            and all(isinstance(m, str) for m in members)
            and len(set(members)) == len(members)
        ):
            known = {plan.member_name(i) for i in range(n)}
            unknown = [m for m in members if m not in known]
            if unknown:
                self.fail(
                    f"{where}.members",
                    f"{where}.members: {show(unknown[0])} is not one of the group's "
                    f"first members (c-0 .. c-{n - 1})",
                )
            names = tuple(members)
        else:
            self.must(
                f"{where}.members",
                f"a count from 1 to [group].consumers ({n}) or a list of distinct member names",
                members,
            )
        return {"mixed_to": to, "mixed_members": names}

    def kafka(
        self, table: dict[str, object], time_scale: float, kafka_version: str
    ) -> dict[str, KafkaValue]:
        values: dict[str, KafkaValue] = {}
        for name, value in table.items():
            shown = f"[kafka].{json.dumps(name)}"
            spec = KAFKA_CONFIG_KEYS.get(name)
            if spec is None:
                hint = did_you_mean(name, KAFKA_CONFIG_KEYS, lambda k: f'"{k}"')
                self.fail(shown, f"{shown}: unknown Kafka config{hint}")
            values[name] = self.kafka_value(spec, shown, value)
            if spec.since is not None and not kafka_version_at_least(kafka_version, spec.since):
                release = ".".join(str(p) for p in spec.since)
                self.fail(
                    shown,
                    f"{shown}: new in Kafka {release}, and kafka_version is {kafka_version} "
                    f"(that release has no such config)",
                )
        for left, op, right, where in KAFKA_ORDER_RULES:
            if left not in values and right not in values:
                continue
            lv = effective_value(left, values, "zookeeper")
            rv = effective_value(right, values, "zookeeper")
            assert isinstance(lv, int) and isinstance(rv, int)
            if not (lv < rv if op == "<" else lv <= rv):
                key = left if left in values else right
                shown = f"[kafka].{json.dumps(key)}"
                self.fail(
                    shown,
                    f"{shown}: Kafka requires {left} ({lv}) {op} {right} ({rv}) ({where})",
                )
        self.zookeeper_session(values, time_scale)
        return values

    def zookeeper_session(self, values: Mapping[str, KafkaValue], time_scale: float) -> None:
        """``zookeeper.session.timeout.ms`` x ``time_scale`` must be a timeout ZooKeeper grants.

        The run requests ``round(value * time_scale)`` ms of the embedded ensemble, whose
        tickTime is at least 1 ms, and ZooKeeper grants at least 2 ticks
        (``zk_registry.server.tick_time_for``).
        """
        name = "zookeeper.session.timeout.ms"
        value = effective_value(name, values, "zookeeper")
        assert isinstance(value, int)
        if round(value * time_scale) > INT32_MAX:
            self.must(
                f"[kafka].{json.dumps(name)}",
                f"an integer <= {int(INT32_MAX / time_scale)} at time_scale {time_scale:g} "
                f"(ZooKeeper's session timeout is a Java int of ms)",
                value,
            )
        if round(value * time_scale) >= ZK_MIN_SESSION_TIMEOUT_MS:
            return
        # round() reaches the minimum from minimum - 0.5: start below that, step up.
        least = max(1, math.floor((ZK_MIN_SESSION_TIMEOUT_MS - 0.5) / time_scale) - 1)
        while round(least * time_scale) < ZK_MIN_SESSION_TIMEOUT_MS:
            least += 1
        self.must(
            f"[kafka].{json.dumps(name)}",
            f"an integer >= {least} at time_scale {time_scale:g} (the run asks ZooKeeper for a "
            f"session of round(value x time_scale) ms, and ZooKeeper grants at least "
            f"{ZK_MIN_SESSION_TIMEOUT_MS} ticks of at least 1 ms)",
            value,
        )

    def kafka_value(self, spec: KafkaKeySpec, shown: str, value: object) -> KafkaValue:
        if spec.kind == "int":
            limit, note = kafka_int_limit(spec)
            return self.integer(
                {"v": value},
                "v",
                shown,
                None,
                spec.minimum,
                spec.maximum,
                limit=limit,
                limit_note=note,
            )
        if spec.kind == "bool":
            if not isinstance(value, bool):
                self.must(shown, "true or false", value)
            return value
        requirement = "a string"
        if spec.choices is not None:
            choices = ", ".join(json.dumps(c) for c in spec.choices)
            requirement = (
                f"one of {choices}"
                if spec.kind == "str"
                else f"a comma-separated list of {choices}"
            )
        if not isinstance(value, str):
            self.must(shown, requirement, value)
        items = [i.strip() for i in value.split(",")] if spec.kind == "list" else [value]
        if spec.choices is not None and not all(i in spec.choices for i in items):
            self.must(shown, requirement, value)
        return value


_TOP_KEYS: Final = (
    "name",
    "description",
    "seed",
    "duration_s",
    "time_scale",
    "kafka_version",
    "cluster",
    "topics",
    "producer",
    "group",
    "kafka",
    "placement",
    "timeline",
)
_SECTIONS: Final = ("cluster", "producer", "group", "kafka", "placement")
_ARRAYS: Final = ("topics", "timeline")


def _render_top(key: str) -> str:
    if key in _SECTIONS:
        return f"[{key}]"
    if key in _ARRAYS:
        return f"[[{key}]]"
    return key


def _default_name(source: str) -> str:
    stem = Path(source).stem
    return stem if _NAME_RE.fullmatch(stem) and len(stem) <= 100 else "scenario"


def parse_scenario(text: str, source_name: str = "<string>") -> Scenario:
    """Parse and validate a scenario from TOML text.

    Args:
        text: the TOML document.
        source_name: how error messages and the manifest name the source;
            also gives the default ``name`` (its stem).

    Returns:
        The validated scenario with every default applied.

    Raises:
        ScenarioError: invalid TOML or an invalid scenario (one line naming the key).
    """
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ScenarioError(source_name, "<toml>", f"invalid TOML: {err}") from None
    return _Parser(source_name).parse(doc)


def scenario_from_document(doc: Mapping[str, object], source_name: str = "<document>") -> Scenario:
    """Validate a scenario from an already decoded TOML document (a dict of tables).

    An experiment applies its grid's values to a scenario's document and
    validates each trial's copy here, so a bad value fails as a file would.

    Raises:
        ScenarioError: an invalid scenario (one line naming the key).
    """
    return _Parser(source_name).parse(dict(doc))


def load_scenario(path: str | os.PathLike[str]) -> Scenario:
    """Read, parse and validate a scenario file.

    Args:
        path: the ``.toml`` file.

    Returns:
        The validated scenario; its ``source`` is the file's name.

    Raises:
        ScenarioError: the file cannot be read or is invalid.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ScenarioError(file.name, "<file>", f"cannot read {str(file)!r}: {err}") from None
    return parse_scenario(text, file.name)


def bundled_scenarios() -> dict[str, Path]:
    """The scenarios shipped in ``emulator/scenarios/``, by file stem, sorted.

    Returns:
        Name -> path of each bundled ``*.toml`` (found with :mod:`importlib.resources`).
    """
    root = resources.files("emulator").joinpath("scenarios")
    found: dict[str, Path] = {}
    if not root.is_dir():
        return found
    for entry in root.iterdir():
        if entry.name.endswith(".toml") and entry.is_file():
            # A plain (or editable) install gives real paths; the package is not zip-safe.
            found[entry.name.removesuffix(".toml")] = (
                entry if isinstance(entry, Path) else Path(str(entry))
            )
    return dict(sorted(found.items()))
