"""The scenario model: :class:`Scenario` and its parts, as validated and with defaults applied.

A :class:`Scenario` holds one workload and fault schedule, run once per
protocol: the cluster, the topics, the producer load, the consumer group, the
``[kafka]`` configs as written, the ``[placement]`` of the Ray actors and the
timeline as written (:class:`TimelineEvent`). Build one with
:func:`emulator.scenario.parse_scenario` or :func:`emulator.scenario.load_scenario`;
the plan it expands to is :mod:`emulator.scenario.plan`'s.

Members live on consumer hosts by creation order: the ``i``-th member on host
``i % n_hosts``, ``n_hosts = ceil(members / consumers_per_host)``
(:meth:`Scenario.host_of`). Consumer ids built from member names compare as
strings, so ``c-10`` sorts before ``c-2`` in the legacy assignors (A2), as a
real group's ids would.
"""

from __future__ import annotations

import functools
import math
import random
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from emulator.kafka_keys import KafkaSettings, KafkaValue
from emulator.legacy.config import LegacyConsumerConfig
from emulator.modern.config import (
    ClassicConsumerConfig,
    GroupCoordinatorConfig,
    Kip848ConsumerConfig,
    modern_properties,
)
from emulator.protocols import GENERATIONS, assignor_for, spec
from emulator.scenario.faults import ACTIONS, PlannedAction
from emulator.scenario.plan import MEMBER_RE, MembershipChange, creation_index, expand, member_name
from emulator.settings import BrokerSettings, FetchSettings
from emulator.topic_regex import FilterKind

__all__ = [
    "AUTO_COMMIT_KEYS",
    "PLACEMENT_ROLES",
    "TIMELINE_ACTIONS",
    "ClientConfig",
    "ClusterSpec",
    "GroupSpec",
    "PlacementSpec",
    "ProducerSpec",
    "Scenario",
    "TimelineEvent",
    "TopicSpec",
]

ClientConfig = LegacyConsumerConfig | ClassicConsumerConfig | Kip848ConsumerConfig
"""A member's client settings: the 0.8.2 consumer's, the classic client's or the KIP-848 one's."""

TIMELINE_ACTIONS: Final = (
    *ACTIONS[: ACTIONS.index("zk_restart") + 1],
    "zk_quorum_loss",  # expands to zk_crash and zk_restart actions
    *ACTIONS[ACTIONS.index("zk_restart") + 1 :],
)
"""What ``[[timeline]]`` entries may do (the planned actions: :mod:`emulator.scenario.faults`)."""


@dataclass(frozen=True)
class ClusterSpec:
    """``[cluster]``: brokers and the embedded ZooKeeper ensemble."""

    brokers: int = 3
    zookeeper_ensemble: int = 1


@dataclass(frozen=True)
class TopicSpec:
    """One ``[[topics]]`` entry."""

    name: str
    partitions: int
    replication_factor: int = 1


@dataclass(frozen=True)
class ProducerSpec:
    """``[producer]``: the load, in messages per *emulated* second."""

    rate_per_s: float
    topics: tuple[str, ...]
    partitioner: str = "round-robin"
    batch_size: int = 50
    explicit_partition: int | None = None


@dataclass(frozen=True)
class GroupSpec:
    """``[group]``: the consumer group under test.

    A group subscribes by names (``topics``) or by a pattern (``topic_pattern``,
    and for the 0.8 consumer a ``topic_filter``): then ``topics`` holds what the
    pattern selects among the ``[[topics]]`` at the start, as a Java client
    reads it (a full match, internal topics left out; for a ``blacklist``, the
    topics it does not match). Each generation reads the pattern its own way as
    topics come and go (:mod:`emulator.topic_regex`).

    A group that starts mixed (``mixed = {to, members}``, online migration):
    ``mixed_members`` of the first members start speaking ``mixed_to``
    (``consumer`` or ``classic``) instead of the run's protocol, as if an
    upgrade had stopped halfway before the run began.

    A share group's application (``share`` runs, KIP-932) acknowledges each
    record explicitly and releases ``share_release`` and rejects
    ``share_reject`` of them (drawn per record; emulator knobs naming what an
    application does with a record it cannot handle now, or ever).
    """

    id: str
    consumers: int
    topics: tuple[str, ...]
    streams_per_consumer: int = 1
    processing_ms_per_message: float = 1.0
    consumers_per_host: int = 50
    static_membership: bool = False
    assignor: str | None = None
    zk_latency_ms: float = 0.0
    manual_commit: str = "none"
    rebalance_listener: str = "none"
    topic_pattern: str | None = None
    topic_filter: FilterKind = "whitelist"
    mixed_to: str | None = None
    mixed_members: tuple[str, ...] = ()
    share_release: float = 0.0
    share_reject: float = 0.0

    def zk_latency_of(self, member: str, seed: int) -> float:
        """One legacy member's one-way network delay to ZooKeeper, in emulated ms.

        An emulator knob (Kafka has none: it is where the machines are): every
        consumer draws its delay uniformly from ``[0, zk_latency_ms]`` with the
        scenario's seed, so consumers see watch events, and finish their reads,
        at different moments, as consumers on different machines do.
        """
        if self.zk_latency_ms <= 0:
            return 0.0
        return random.Random(f"{seed}/zk-latency/{member}").uniform(0.0, self.zk_latency_ms)


AUTO_COMMIT_KEYS: Final = ("auto.commit.enable", "enable.auto.commit")
"""The auto-commit switch of the 0.8 consumer and of the Java consumer."""

PLACEMENT_ROLES: Final = ("brokers", "producer", "consumer_hosts")
"""The kinds of Ray actor a ``[placement]`` table places."""


@dataclass(frozen=True)
class PlacementSpec:
    """``[placement]``: which Ray nodes run which actors (an emulator knob; Kafka has none).

    Each role is ``"default"`` (Ray's scheduler decides), ``"spread"`` (Ray's
    SPREAD strategy: across the nodes), ``"resource:NAME"`` (only nodes started
    with the custom resource ``NAME``, as the configs in ``deploy/`` start
    broker and consumer nodes with ``emu_broker`` and ``emu_consumer``) or
    ``"node:IP"`` (the node with that address; Ray gives every node the
    resource ``node:<ip>``).
    """

    brokers: str = "default"
    producer: str = "default"
    consumer_hosts: str = "default"

    def of(self, role: str) -> str:
        """The placement of ``role`` (one of :data:`PLACEMENT_ROLES`)."""
        if role not in PLACEMENT_ROLES:
            raise KeyError(role)
        value: str = getattr(self, role)
        return value

    def resource(self, role: str) -> str | None:
        """The Ray resource ``role``'s actors need, if any (``node:IP`` is one too)."""
        value = self.of(role)
        if value.startswith("resource:"):
            return value[len("resource:") :]
        if value.startswith("node:"):
            return value
        return None


@dataclass(frozen=True)
class TimelineEvent:
    """One ``[[timeline]]`` entry, as written (defaults applied, choices not yet made).

    Attributes:
        at_s: emulated seconds from the start of the run.
        action: one of :data:`TIMELINE_ACTIONS`.
        count: members joining (``join``) or going in a scale-in burst
            (``leave``/``crash`` without ``member``); 1 otherwise.
        member: the member named (``"c-N"`` or ``"random"``), if any.
        index: position in the file, as in error messages (``timeline[index]``).
        members: ``"all"`` or the names listed (``restart``, ``upgrade``,
            ``network_partition``, ``subscribe``); ``None`` when not given.
        interval_s: the spacing of a burst or rolling restart; ``None``: all at once.
        downtime_s: a restart's (or upgrade's) time between shutdown and start.
        duration_s: how long a pause, slow-down, partition or quorum loss lasts.
        target: a network partition's target.
        host: the consumer host of a ``host_crash``.
        broker: the broker of a ``broker_crash`` or ``broker_restart``.
        zk_member: the ensemble member of a ``zk_crash`` or ``zk_restart``.
        restart_after_s: a crashed broker's or ZooKeeper member's time down.
        topic: the topic of ``add_partitions``, ``create_topic`` or ``delete_topic``.
        partitions: its new partition count (``add_partitions``), or the
            created topic's (``create_topic``).
        replication_factor: the created topic's (``create_topic``).
        topics: a ``subscribe``'s new subscription by names.
        topic_pattern: a ``subscribe``'s new subscription by pattern.
        topic_filter: that pattern's 0.8 filter kind (``whitelist`` or ``blacklist``).
        processing_ms_per_message: a ``slow`` member's processing cost.
        to: the group protocol an ``upgrade`` switches its members to
            (``consumer`` or ``classic``).
    """

    at_s: float
    action: str
    count: int = 1
    member: str | None = None
    index: int = 0
    members: tuple[str, ...] | Literal["all"] | None = None
    interval_s: float | None = None
    downtime_s: float = 0.0
    duration_s: float | None = None
    target: str | None = None
    host: int | None = None
    broker: int | None = None
    zk_member: int | None = None
    restart_after_s: float | None = None
    topic: str | None = None
    partitions: int | None = None
    topics: tuple[str, ...] = ()
    processing_ms_per_message: float | None = None
    replication_factor: int | None = None
    topic_pattern: str | None = None
    topic_filter: FilterKind | None = None
    to: str | None = None

    def to_dict(self) -> dict[str, object]:
        """A JSON-able dict: the keys of the first format always, the others when set."""
        out: dict[str, object] = {
            "at_s": self.at_s,
            "action": self.action,
            "count": self.count,
            "member": self.member,
            "index": self.index,
        }
        if self.members is not None:
            out["members"] = self.members if self.members == "all" else list(self.members)
        extra: dict[str, object | None] = {
            "interval_s": self.interval_s,
            "downtime_s": self.downtime_s if self.action in ("restart", "upgrade") else None,
            "to": self.to,
            "duration_s": self.duration_s,
            "target": self.target,
            "host": self.host,
            "broker": self.broker,
            "zk_member": self.zk_member,
            "restart_after_s": self.restart_after_s,
            "topic": self.topic,
            "partitions": self.partitions,
            "topics": list(self.topics) if self.topics else None,
            "processing_ms_per_message": self.processing_ms_per_message,
            "replication_factor": self.replication_factor,
            "topic_pattern": self.topic_pattern,
            "topic_filter": self.topic_filter,
        }
        out.update({k: v for k, v in extra.items() if v is not None})
        return out


@dataclass(frozen=True)
class Scenario:
    """A validated scenario; build it with :func:`parse_scenario` or :func:`load_scenario`.

    Attributes:
        name: the scenario's name.
        description: free text.
        seed: the run's seed.
        duration_s: emulated seconds the run lasts.
        time_scale: wall seconds per emulated second.
        cluster: ``[cluster]``.
        topics: ``[[topics]]`` in file order.
        producer: ``[producer]``.
        group: ``[group]``.
        kafka: the ``[kafka]`` values *as written* (treat as read-only); use
            :meth:`kafka_config` for effective values.
        timeline: ``[[timeline]]`` sorted by time, ties in file order.
        source: where it was read from.
        kafka_version: the Kafka release whose defaults the classic and
            KIP-848 generations use (``session.timeout.ms`` is 10 s up to 2.8,
            45 s from 3.0; B6); default ``3.9``.
    """

    name: str
    description: str
    seed: int
    duration_s: float
    time_scale: float
    cluster: ClusterSpec
    topics: tuple[TopicSpec, ...]
    producer: ProducerSpec
    group: GroupSpec
    kafka: dict[str, KafkaValue] = field(default_factory=dict, hash=False)
    timeline: tuple[TimelineEvent, ...] = ()
    source: str = "<string>"
    kafka_version: str = "3.9"
    placement: PlacementSpec = field(default_factory=PlacementSpec)

    # ---- topics and membership

    def topic(self, name: str) -> TopicSpec:
        """The topic called ``name``.

        Raises:
            KeyError: no such topic.
        """
        for topic in self.topics:
            if topic.name == name:
                return topic
        raise KeyError(name)

    def subscription(self) -> dict[str, int]:
        """Every member's subscription, topic -> numStreams (the A1 ids payload)."""
        return {t: self.group.streams_per_consumer for t in self.group.topics}

    def initial_members(self) -> tuple[str, ...]:
        """The members present at time 0, before any timeline event."""
        return tuple(member_name(i) for i in range(self.group.consumers))

    def membership_plan(self) -> tuple[MembershipChange, ...]:
        """Every arrival and departure, one per member, in the order the run applies them."""
        return expand(self).changes

    def action_plan(self) -> tuple[PlannedAction, ...]:
        """Every timeline action expanded and seeded, in the order the run applies them.

        Sorted by ``at_s``, ties in file order (then in the order an entry
        expands: a burst's steps, a rolling restart's members). Membership
        actions are there too (one ``join``/``leave``/``crash``/``restart``
        per member); a ``zk_quorum_loss`` is its ``zk_crash`` and ``zk_restart``
        actions, ``restart_after_s`` a ``broker_restart`` or ``zk_restart``.
        The same scenario (and seed) always gives the same plan.
        """
        return expand(self).actions

    def all_members(self) -> tuple[str, ...]:
        """Every member that ever exists during the run, in creation order."""
        return tuple(member_name(i) for i in range(self.member_total))

    @functools.cached_property
    def member_total(self) -> int:
        """How many members ever exist during the run (``len(all_members())``).

        O(timeline) once, then cached: :meth:`host_of` reads it for every member.
        """
        return self.group.consumers + sum(e.count for e in self.timeline if e.action == "join")

    @property
    def host_count(self) -> int:
        """Consumer hosts of the run: ``ceil(len(all_members()) / consumers_per_host)``."""
        return max(1, math.ceil(self.member_total / self.group.consumers_per_host))

    def host_of(self, member: str) -> int:
        """The consumer host of ``member``: its creation index modulo :attr:`host_count`.

        Raises:
            KeyError: no such member in this scenario.
        """
        match = MEMBER_RE.fullmatch(member)
        if match is None or int(match.group(1)) >= self.member_total:
            raise KeyError(member)
        return int(match.group(1)) % self.host_count

    def member_names_at(self, at_s: float) -> tuple[str, ...]:
        """Members present after every change with ``change.at_s <= at_s``, by creation order."""
        alive = dict.fromkeys(self.initial_members())
        for change in self.membership_plan():
            if change.at_s > at_s:
                break
            if change.action == "join":
                alive[change.member] = None
            else:
                del alive[change.member]
        return tuple(sorted(alive, key=creation_index))

    # ---- time

    @property
    def wall_duration_s(self) -> float:
        """How long the run takes in wall seconds."""
        return self.duration_s * self.time_scale

    def wall_s(self, emulated_s: float) -> float:
        """Wall seconds for ``emulated_s`` emulated seconds (every duration scales together)."""
        return emulated_s * self.time_scale

    # ---- Kafka configs

    def kafka_settings(self, protocol: str = "zookeeper") -> KafkaSettings:
        """Every Kafka config a generation reads, resolved from ``[kafka]`` and typed.

        Args:
            protocol: one of :data:`emulator.protocols.GENERATIONS`.
        """
        return KafkaSettings(protocol, self.kafka_version, self.kafka)

    def kafka_config(self, name: str, protocol: str = "zookeeper") -> KafkaValue:
        """The effective value of Kafka config ``name`` for a generation.

        The ``[kafka]`` value if set; otherwise Kafka's default for
        ``protocol`` (and, for the classic and KIP-848 generations, for
        :attr:`kafka_version`), which may be derived from other effective values
        (``rebalance.backoff.ms`` follows ``zookeeper.sync.time.ms``,
        ``zookeeper.connection.timeout.ms`` follows
        ``zookeeper.session.timeout.ms``, ``dual.commit.enabled`` is
        ``offsets.storage == "kafka"``).

        Args:
            name: a key of :data:`emulator.kafka_keys.KAFKA_KEYS`.
            protocol: one of :data:`emulator.protocols.GENERATIONS`; matters only for keys whose
                default differs between generations.

        Returns:
            The value, typed as the key's kind (``list`` values are strings).

        Raises:
            KeyError: unknown config name.
            ValueError: unknown protocol.
        """
        return self.kafka_settings(protocol).value(name)

    def kafka_int(self, name: str, protocol: str = "zookeeper") -> int:
        """:meth:`kafka_config` for an ``int`` key.

        Raises:
            KeyError: unknown config name.
            TypeError: the key is not an integer config.
        """
        return self.kafka_settings(protocol).get_int(name)

    def kafka_bool(self, name: str, protocol: str = "zookeeper") -> bool:
        """:meth:`kafka_config` for a ``bool`` key.

        Raises:
            KeyError: unknown config name.
            TypeError: the key is not a boolean config.
        """
        return self.kafka_settings(protocol).get_bool(name)

    def kafka_str(self, name: str, protocol: str = "zookeeper") -> str:
        """:meth:`kafka_config` for a ``str`` or ``list`` key.

        Raises:
            KeyError: unknown config name.
            TypeError: the key is not a string config.
        """
        return self.kafka_settings(protocol).get_str(name)

    def kafka_list(self, name: str, protocol: str = "zookeeper") -> tuple[str, ...]:
        """A ``list`` key split on commas, as Kafka parses its LIST type."""
        return self.kafka_settings(protocol).get_list(name)

    def effective_kafka_config(self, protocol: str = "zookeeper") -> dict[str, KafkaValue]:
        """Every Kafka config a scenario may set, with its effective value for ``protocol``."""
        return self.kafka_settings(protocol).all()

    # ---- typed configs, per generation

    def legacy_config(self, protocol: str = "zookeeper") -> LegacyConsumerConfig:
        """The 0.8.2 consumer's settings for a run of ``protocol`` (a run protocol).

        ``partition.assignment.strategy`` is the assignor the run protocol runs
        with (:func:`emulator.protocols.assignor_for`, ``[group].assignor`` where it applies).

        Raises:
            ValueError: not a run protocol.
        """
        props: dict[str, object] = dict(self.kafka)
        props["partition.assignment.strategy"] = assignor_for(protocol, self.group.assignor)[0]
        return LegacyConsumerConfig.from_kafka(props)

    def classic_config(self, protocol: str, member: str | None = None) -> ClassicConsumerConfig:
        """A classic client's settings for a run of ``protocol``, at :attr:`kafka_version`.

        ``partition.assignment.strategy`` is the run protocol's assignor; with
        ``member``, ``client.id`` is its name and, under
        ``[group].static_membership``, ``group.instance.id`` is ``<group>-<member>``.

        Raises:
            ValueError: not a run protocol, or a value the release refuses
                (``group.instance.id`` before 2.3.0, ...).
        """
        props = self._member_props(member)
        props["partition.assignment.strategy"] = assignor_for(protocol, self.group.assignor)[0]
        return ClassicConsumerConfig.from_kafka(props, kafka_version=self.kafka_version)

    def kip848_config(
        self, protocol: str = "consumer", member: str | None = None
    ) -> Kip848ConsumerConfig:
        """A KIP-848 client's settings for a run of ``protocol``, at :attr:`kafka_version`.

        ``group.remote.assignor`` is the run protocol's server-side assignor;
        ``group.instance.id`` as in :meth:`classic_config`.

        Raises:
            ValueError: not a run protocol.
        """
        props = self._member_props(member)
        props["group.remote.assignor"] = assignor_for(protocol, self.group.assignor)[0]
        return Kip848ConsumerConfig.from_kafka(props, kafka_version=self.kafka_version)

    def client_config(self, protocol: str, member: str | None = None) -> ClientConfig:
        """The client settings of a run protocol's members: :meth:`legacy_config`,
        :meth:`classic_config` or :meth:`kip848_config` by its generation.

        Raises:
            ValueError: not a run protocol, or a value the release refuses.
        """
        generation = spec(protocol).generation
        if generation == "zookeeper":
            return self.legacy_config(protocol)
        if generation == "classic":
            return self.classic_config(protocol, member)
        return self.kip848_config(protocol, member)

    def coordinator_config(self) -> GroupCoordinatorConfig:
        """The brokers' group-coordinator settings (classic, KIP-848) at :attr:`kafka_version`."""
        return GroupCoordinatorConfig.from_kafka(
            modern_properties(self.kafka), kafka_version=self.kafka_version
        )

    def broker_settings(self, protocol: str) -> BrokerSettings:
        """The brokers' settings for a run of ``protocol`` (a run protocol or a generation).

        Raises:
            ValueError: neither a run protocol nor a generation.
        """
        return BrokerSettings.from_settings(self.kafka_settings(_generation(protocol)))

    def fetch_settings(self, protocol: str) -> FetchSettings:
        """The consumers' fetch path for a run of ``protocol`` (a run protocol or a generation).

        Raises:
            ValueError: neither a run protocol nor a generation.
        """
        return FetchSettings.from_settings(self.kafka_settings(_generation(protocol)))

    def _member_props(self, member: str | None) -> dict[str, object]:
        """``[kafka]`` as a modern client reads it, with ``member``'s identity."""
        props = modern_properties(self.kafka)
        if member is not None:
            props["client.id"] = member
            if self.group.static_membership:
                props["group.instance.id"] = f"{self.group.id}-{member}"
        return props

    # ---- serialisation

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict of the scenario with defaults applied (for the run manifest).

        ``kafka`` holds only the values set in the file; ``kafka_effective``
        holds every known config's effective value per protocol.
        """
        return {
            "name": self.name,
            "description": self.description,
            "source": self.source,
            "seed": self.seed,
            "duration_s": self.duration_s,
            "time_scale": self.time_scale,
            "kafka_version": self.kafka_version,
            "cluster": {
                "brokers": self.cluster.brokers,
                "zookeeper_ensemble": self.cluster.zookeeper_ensemble,
            },
            "topics": [
                {
                    "name": t.name,
                    "partitions": t.partitions,
                    "replication_factor": t.replication_factor,
                }
                for t in self.topics
            ],
            "producer": {
                "rate_per_s": self.producer.rate_per_s,
                "topics": list(self.producer.topics),
                "partitioner": self.producer.partitioner,
                "batch_size": self.producer.batch_size,
                "explicit_partition": self.producer.explicit_partition,
            },
            "group": {
                "id": self.group.id,
                "consumers": self.group.consumers,
                "topics": list(self.group.topics),
                "streams_per_consumer": self.group.streams_per_consumer,
                "processing_ms_per_message": self.group.processing_ms_per_message,
                "consumers_per_host": self.group.consumers_per_host,
                "static_membership": self.group.static_membership,
                "assignor": self.group.assignor,
                "zk_latency_ms": self.group.zk_latency_ms,
                "manual_commit": self.group.manual_commit,
                "rebalance_listener": self.group.rebalance_listener,
                **(
                    {}
                    if self.group.topic_pattern is None
                    else {
                        "topic_pattern": self.group.topic_pattern,
                        "topic_filter": self.group.topic_filter,
                    }
                ),
                **(
                    {}
                    if self.group.mixed_to is None
                    else {
                        "mixed": {
                            "to": self.group.mixed_to,
                            "members": list(self.group.mixed_members),
                        }
                    }
                ),
                **(
                    {}
                    if not (self.group.share_release or self.group.share_reject)
                    else {
                        "share_release": self.group.share_release,
                        "share_reject": self.group.share_reject,
                    }
                ),
            },
            "kafka": dict(sorted(self.kafka.items())),
            "placement": {r: self.placement.of(r) for r in PLACEMENT_ROLES},
            "kafka_effective": {p: self.effective_kafka_config(p) for p in GENERATIONS},
            "timeline": [e.to_dict() for e in self.timeline],
            "membership_plan": [
                {"at_s": c.at_s, "action": c.action, "member": c.member}
                for c in self.membership_plan()
            ],
            "action_plan": [{"action": a.action, **a.params()} for a in self.action_plan()],
            "host_count": self.host_count,
        }


def _generation(protocol: str) -> str:
    """The generation of a run protocol; a generation is its own.

    Raises:
        ValueError: neither.
    """
    return protocol if protocol in GENERATIONS else spec(protocol).generation
