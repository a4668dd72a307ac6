"""Reading ``[[timeline]]``: each entry checked alone, with the keys its action takes.

Each action takes its own keys (any other key is an error, with a word on what
it takes); durations are emulated seconds of at most ``MAX_DURATION_S``, and
counts at most ``MAX_MEMBERS`` over the run. The entries are checked through
time afterwards, when the planner (:mod:`emulator.scenario.plan`) expands them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from emulator.scenario import plan
from emulator.scenario.errors import int_requirement, show, tighter
from emulator.scenario.faults import PARTITION_TARGETS, UPGRADE_TARGETS
from emulator.scenario.limits import (
    MAX_DURATION_S,
    MAX_MEMBERS,
    MAX_PARTITIONS_PER_TOPIC,
    MAX_PROCESSING_MS_PER_MESSAGE,
    MAX_REPLICAS_PER_TOPIC,
)
from emulator.scenario.model import TIMELINE_ACTIONS, ClusterSpec, TimelineEvent, TopicSpec
from emulator.scenario.reader import TableReader, in_array

__all__ = ["TIMELINE_KEYS", "TimelineReader", "replicas_note"]

_ZNODE_NOTE: Final = (
    "the topic's znode /brokers/topics/<t> holds its whole assignment, within "
    "ZooKeeper's 1 MB jute.maxbuffer"
)


def replicas_note(rf: int) -> str:
    """Why a topic of replication factor ``rf`` holds at most so many partitions."""
    return (
        f"at most {MAX_REPLICAS_PER_TOPIC} replicas, partitions x replication_factor ({rf}), "
        "in the topic's znode /brokers/topics/<t>"
    )


TIMELINE_KEYS: Final[Mapping[str, tuple[str, ...]]] = {
    "join": ("count", "interval_s"),
    "leave": ("member", "count", "interval_s"),
    "crash": ("member", "count", "interval_s"),
    "restart": ("member", "members", "interval_s", "downtime_s"),
    "upgrade": ("member", "members", "to", "interval_s", "downtime_s"),
    "pause": ("member", "duration_s"),
    "slow": ("member", "duration_s", "processing_ms_per_message"),
    "network_partition": ("member", "members", "target", "duration_s"),
    "host_crash": ("host",),
    "broker_crash": ("broker", "restart_after_s"),
    "broker_restart": ("broker",),
    "zk_crash": ("zk_member", "restart_after_s"),
    "zk_restart": ("zk_member",),
    "zk_quorum_loss": ("duration_s",),
    "add_partitions": ("topic", "partitions"),
    "create_topic": ("topic", "partitions", "replication_factor"),
    "delete_topic": ("topic",),
    "subscribe": ("members", "topics", "topic_pattern", "topic_filter"),
}
"""The keys each timeline action takes, besides ``at_s`` and ``action``."""
_ALL_TIMELINE_KEYS: Final = (
    "at_s",
    "action",
    *dict.fromkeys(k for keys in TIMELINE_KEYS.values() for k in keys),
)


class TimelineReader(TableReader):
    """Reads a scenario's ``[[timeline]]`` entries into :class:`TimelineEvent` values."""

    def timeline(
        self,
        doc: Mapping[str, object],
        duration_s: float,
        cluster: ClusterSpec,
        topics: Sequence[TopicSpec],
        consumers: int,
    ) -> tuple[TimelineEvent, ...]:
        raw = doc.get("timeline", [])
        if not isinstance(raw, list) or not all(isinstance(e, dict) for e in raw):
            self.must("timeline", "an array of tables ([[timeline]])", raw)
        if len(raw) > plan.MAX_TIMELINE_ENTRIES:
            self.fail(
                "timeline",
                f"timeline: {len(raw)} [[timeline]] entries, more than {plan.MAX_TIMELINE_ENTRIES} "
                "(the orchestrator schedules, and the manifest lists, every one)",
            )
        # Names a create_topic makes are known too (the planner checks each exists when
        # named); their replication factor is the planner's to check, as it may change.
        created = {
            e["topic"]: None
            for e in raw
            if e.get("action") == "create_topic" and isinstance(e.get("topic"), str)
        }
        replication: dict[str, int | None] = {t.name: t.replication_factor for t in topics}
        replication.update(created)
        topic_names = list(replication)
        members = consumers
        events: list[TimelineEvent] = []
        for i, table in enumerate(raw):
            event = self.timeline_event(table, i, duration_s, cluster, topic_names, replication)
            if event.action == "join":
                # Before the planner names every member: the total stays bounded.
                if members + event.count > MAX_MEMBERS:
                    self.must(
                        f"timeline[{i}].count",
                        int_requirement(
                            None,
                            MAX_MEMBERS - members,
                            f"at most {MAX_MEMBERS} members over the run; [group].consumers "
                            f"and the joins before it make {members}",
                        ),
                        event.count,
                    )
                members += event.count
            events.append(event)
        events.sort(key=lambda e: e.at_s)  # stable: ties keep file order
        return tuple(events)

    def timeline_event(
        self,
        table: Mapping[str, object],
        i: int,
        duration_s: float,
        cluster: ClusterSpec,
        topic_names: Sequence[str],
        replication: Mapping[str, int | None],
    ) -> TimelineEvent:
        """One entry; ``replication``: each topic's replication factor (and its name set),
        ``None`` for a name a ``create_topic`` makes."""
        where = f"timeline[{i}]"
        self.check_keys(table, _ALL_TIMELINE_KEYS, in_array(where))
        at_s = self.number(
            table,
            "at_s",
            f"{where}.at_s",
            None,
            f"a number between 0 and duration_s ({duration_s})",
            lambda x: 0 <= x <= duration_s,
        )
        action = self.choice(table, "action", f"{where}.action", None, TIMELINE_ACTIONS)
        allowed = TIMELINE_KEYS[action]
        for key in table:
            if key in ("at_s", "action") or key in allowed:
                continue
            if action == "join" and key == "member":
                self.fail(
                    f"{where}.member",
                    f"{where}.member: not allowed for a join (new members are named "
                    "c-<n> in creation order)",
                )
            takes = ", ".join(allowed)
            self.fail(
                f"{where}.{key}", f"{where}.{key}: not allowed for a {action} (it takes {takes})"
            )

        def positive(key: str) -> float | None:
            if key not in table:
                return None
            return required_positive(key)

        def required_positive(key: str) -> float:
            return self.number(
                table,
                key,
                f"{where}.{key}",
                None,
                "a number > 0",
                lambda x: x > 0,
                MAX_DURATION_S,
                "7 emulated days, the longest run",
            )

        def index(key: str, size: int, note: str) -> int:
            return self.integer(table, key, f"{where}.{key}", None, 0, size - 1, note)

        # The fields gathered first and the event built once (``replace`` per field
        # costs more than the rest of the entry's checks).
        fields: dict[str, Any] = {}
        if action == "join":
            fields["count"] = self.integer(
                table,
                "count",
                f"{where}.count",
                1,
                1,
                limit=MAX_MEMBERS,
                limit_note="the most members a run holds",
            )
            fields["interval_s"] = positive("interval_s")
        elif action in ("leave", "crash"):
            fields.update(self.departure(table, action, where, positive("interval_s")))
        elif action in ("restart", "upgrade", "network_partition", "subscribe"):
            fields.update(self.who(table, action, where, many=True))
        elif action in ("pause", "slow"):
            fields.update(self.who(table, action, where, many=False))
        if action == "upgrade":
            fields["to"] = self.choice(table, "to", f"{where}.to", None, UPGRADE_TARGETS)
        if action in ("restart", "upgrade"):
            fields["interval_s"] = positive("interval_s")
            fields["downtime_s"] = self.number(
                table,
                "downtime_s",
                f"{where}.downtime_s",
                0.0,
                "a number >= 0",
                lambda x: x >= 0,
                MAX_DURATION_S,
                "7 emulated days, the longest run",
            )
        if action in ("pause", "slow", "network_partition", "zk_quorum_loss"):
            fields["duration_s"] = required_positive("duration_s")
        if action == "slow":
            fields["processing_ms_per_message"] = self.number(
                table,
                "processing_ms_per_message",
                f"{where}.processing_ms_per_message",
                None,
                "a number > 0",
                lambda x: x > 0,
                MAX_PROCESSING_MS_PER_MESSAGE,
                "a day per message",
            )
        elif action == "network_partition":
            fields["target"] = self.choice(
                table, "target", f"{where}.target", None, PARTITION_TARGETS
            )
        elif action == "host_crash":
            fields["host"] = self.integer(table, "host", f"{where}.host", None, 0)
        elif action in ("broker_crash", "broker_restart"):
            fields["broker"] = index("broker", cluster.brokers, "[cluster].brokers minus one")
            fields["restart_after_s"] = positive("restart_after_s")
        elif action in ("zk_crash", "zk_restart"):
            fields["zk_member"] = index(
                "zk_member", cluster.zookeeper_ensemble, "[cluster].zookeeper_ensemble minus one"
            )
            fields["restart_after_s"] = positive("restart_after_s")
        elif action == "add_partitions":
            topic = self.choice(table, "topic", f"{where}.topic", None, topic_names, replication)
            rf = replication[topic]
            limits = [(MAX_PARTITIONS_PER_TOPIC, _ZNODE_NOTE)]
            if rf is not None:  # else the planner checks, with the rf the topic has then
                limits.append((MAX_REPLICAS_PER_TOPIC // rf, replicas_note(rf)))
            limit, note = tighter(*limits)
            fields["topic"] = topic
            fields["partitions"] = self.integer(
                table, "partitions", f"{where}.partitions", None, 1, limit=limit, limit_note=note
            )
        elif action == "create_topic":
            fields["topic"] = self.topic_name(table, "topic", f"{where}.topic")
            partitions = self.integer(
                table,
                "partitions",
                f"{where}.partitions",
                None,
                1,
                limit=MAX_PARTITIONS_PER_TOPIC,
                limit_note=_ZNODE_NOTE,
            )
            fields["partitions"] = partitions
            fields["replication_factor"] = self.integer(
                table,
                "replication_factor",
                f"{where}.replication_factor",
                1,
                1,
                cluster.brokers,
                "[cluster].brokers",
                limit=MAX_REPLICAS_PER_TOPIC // partitions,
                limit_note=f"at most {MAX_REPLICAS_PER_TOPIC} replicas, partitions x "
                "replication_factor, in the topic's znode /brokers/topics/<t>",
            )
        elif action == "delete_topic":
            fields["topic"] = self.choice(
                table, "topic", f"{where}.topic", None, topic_names, replication
            )
        elif action == "subscribe":
            if "topics" in table and "topic_pattern" in table:
                self.fail(
                    f"{where}.topic_pattern",
                    f"{where}.topic_pattern: not allowed together with {where}.topics (a "
                    "subscription is by names or by a pattern)",
                )
            if "topic_pattern" in table:
                fields["topic_pattern"] = self.topic_pattern(
                    table, "topic_pattern", f"{where}.topic_pattern"
                )
            elif "topics" not in table:
                self.fail(f"{where}.topics", f"{where}.topics (or topic_pattern) is required")
            else:
                fields["topics"] = self.topic_list(
                    table, "topics", f"{where}.topics", topic_names, lookup=replication
                )
            fields["topic_filter"] = self.topic_filter(
                table, "topic_filter", f"{where}.topic_filter", f"{where}.topic_pattern"
            )
        return TimelineEvent(at_s=at_s, action=action, index=i, **fields)

    def departure(
        self,
        table: Mapping[str, object],
        action: str,
        where: str,
        interval_s: float | None,
    ) -> dict[str, Any]:
        """A leave or crash: one ``member``, or a scale-in burst of ``count`` (its fields)."""
        if "member" in table and "count" in table:
            self.fail(
                f"{where}.count",
                f"{where}.count: not allowed together with {where}.member (a {action} "
                "names one member, or a count of the newest)",
            )
        if "count" in table:
            count = self.integer(
                table,
                "count",
                f"{where}.count",
                None,
                1,
                limit=MAX_MEMBERS,
                limit_note="the most members a run holds",
            )
            return {"count": count, "interval_s": interval_s}
        if interval_s is not None:
            self.fail(
                f"{where}.interval_s",
                f"{where}.interval_s: only allowed with {where}.count (a scale-in burst)",
            )
        if "member" not in table:
            self.fail(
                f"{where}.member",
                f'{where}.member is required (a name like "c-3" or "random"), or a count',
            )
        return {"member": self.member(table, f"{where}.member")}

    def who(
        self, table: Mapping[str, object], action: str, where: str, *, many: bool
    ) -> dict[str, Any]:
        """The ``member`` (or, when ``many``, ``members``) an action acts on (its field)."""
        if "member" in table and "members" in table:
            self.fail(
                f"{where}.members",
                f"{where}.members: not allowed together with {where}.member",
            )
        if "member" in table:
            return {"member": self.member(table, f"{where}.member")}
        if not many or (action != "subscribe" and "members" not in table):
            key = f"{where}.member"
            extra = " (or members)" if many else ""
            self.fail(key, f'{key}{extra} is required (a name like "c-3" or "random")')
        value = table.get("members", "all")
        requirement = '"all" or a non-empty array of member names like "c-3"'
        if value == "all":
            return {"members": "all"}
        if isinstance(value, list) and len(value) > MAX_MEMBERS:
            self.fail(
                f"{where}.members",
                f"{where}.members: {len(value)} names, more than the {MAX_MEMBERS} members a "
                "run holds",
            )
        if (
            not isinstance(value, list)
            or not value
            or not all(isinstance(v, str) and plan.MEMBER_RE.fullmatch(v) for v in value)
        ):
            self.must(f"{where}.members", requirement, value)
        names: list[str] = [str(v) for v in value]
        seen: set[str] = set()
        for n, name in enumerate(names):
            if name in seen:
                self.fail(
                    f"{where}.members[{n}]",
                    f"{where}.members[{n}]: member {show(name)} is listed twice",
                )
            seen.add(name)
        return {"members": tuple(names)}

    def member(self, table: Mapping[str, object], shown: str) -> str:
        return self.string(table, "member", shown, None)
