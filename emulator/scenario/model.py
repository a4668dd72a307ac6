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

from emulator.protocols import GENERATIONS
from emulator.scenario.faults import ACTIONS, PlannedAction
from emulator.scenario.keys import KAFKA_CONFIG_KEYS, KafkaValue, effective_value
from emulator.scenario.plan import MEMBER_RE, MembershipChange, creation_index, expand, member_name

__all__ = [
    "AUTO_COMMIT_KEYS",
    "PLACEMENT_ROLES",
    "TIMELINE_ACTIONS",
    "ClusterSpec",
    "GroupSpec",
    "PlacementSpec",
    "ProducerSpec",
    "Scenario",
    "TimelineEvent",
    "TopicSpec",
]

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
    """``[group]``: the consumer group under test."""

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
        members: ``"all"`` or the names listed (``restart``,
            ``network_partition``, ``subscribe``); ``None`` when not given.
        interval_s: the spacing of a burst or rolling restart; ``None``: all at once.
        downtime_s: a restart's time between shutdown and start.
        duration_s: how long a pause, slow-down, partition or quorum loss lasts.
        target: a network partition's target.
        host: the consumer host of a ``host_crash``.
        broker: the broker of a ``broker_crash`` or ``broker_restart``.
        zk_member: the ensemble member of a ``zk_crash`` or ``zk_restart``.
        restart_after_s: a crashed broker's or ZooKeeper member's time down.
        topic: the topic of ``add_partitions``.
        partitions: its new partition count.
        topics: a ``subscribe``'s new subscription.
        processing_ms_per_message: a ``slow`` member's processing cost.
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
            "downtime_s": self.downtime_s if self.action == "restart" else None,
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
        for spec in self.topics:
            if spec.name == name:
                return spec
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

    def kafka_config(self, name: str, protocol: str = "zookeeper") -> KafkaValue:
        """The effective value of Kafka config ``name`` for a generation.

        The ``[kafka]`` value if set; otherwise Kafka's default for
        ``protocol``, which may be derived from other effective values
        (``rebalance.backoff.ms`` follows ``zookeeper.sync.time.ms``,
        ``zookeeper.connection.timeout.ms`` follows
        ``zookeeper.session.timeout.ms``, ``dual.commit.enabled`` is
        ``offsets.storage == "kafka"``).

        Args:
            name: a key of :data:`KAFKA_CONFIG_KEYS`.
            protocol: one of :data:`emulator.protocols.GENERATIONS`; matters only for keys whose
                default differs between generations.

        Returns:
            The value, typed as the key's kind (``list`` values are strings).

        Raises:
            KeyError: unknown config name.
            ValueError: unknown protocol.
        """
        return effective_value(name, self.kafka, protocol)

    def kafka_int(self, name: str, protocol: str = "zookeeper") -> int:
        """:meth:`kafka_config` for an ``int`` key.

        Raises:
            KeyError: unknown config name.
            TypeError: the key is not an integer config.
        """
        value = self.kafka_config(name, protocol)
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"Kafka config {name!r} is not an integer")
        return value

    def kafka_bool(self, name: str, protocol: str = "zookeeper") -> bool:
        """:meth:`kafka_config` for a ``bool`` key.

        Raises:
            KeyError: unknown config name.
            TypeError: the key is not a boolean config.
        """
        value = self.kafka_config(name, protocol)
        if not isinstance(value, bool):
            raise TypeError(f"Kafka config {name!r} is not a boolean")
        return value

    def kafka_str(self, name: str, protocol: str = "zookeeper") -> str:
        """:meth:`kafka_config` for a ``str`` or ``list`` key.

        Raises:
            KeyError: unknown config name.
            TypeError: the key is not a string config.
        """
        value = self.kafka_config(name, protocol)
        if not isinstance(value, str):
            raise TypeError(f"Kafka config {name!r} is not a string")
        return value

    def kafka_list(self, name: str, protocol: str = "zookeeper") -> tuple[str, ...]:
        """A ``list`` key split on commas, as Kafka parses its LIST type."""
        return tuple(item.strip() for item in self.kafka_str(name, protocol).split(","))

    def effective_kafka_config(self, protocol: str = "zookeeper") -> dict[str, KafkaValue]:
        """Every known Kafka config with its effective value for ``protocol``."""
        return {name: self.kafka_config(name, protocol) for name in KAFKA_CONFIG_KEYS}

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
