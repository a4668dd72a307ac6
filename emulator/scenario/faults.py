"""The fault vocabulary of a scenario timeline: planned actions and where they apply.

A scenario's ``[[timeline]]`` (see :mod:`emulator.scenario`) is expanded by
:meth:`emulator.scenario.Scenario.action_plan` into :class:`PlannedAction`
values: one per thing the orchestrator does at one moment, with every choice
already made (``member = "random"``, the newest members of a scale-in, the
ZooKeeper members of a quorum loss), seeded by the scenario's seed so the same
scenario gives the same plan for every protocol.

Planned actions (:data:`ACTIONS`):

* ``join``: one new member (``members`` = its name).
* ``leave`` / ``crash``: one member goes, cleanly or without a goodbye.
* ``restart``: one member shuts down gracefully and starts again with the same
  name after ``downtime_s`` (so the same ``group.instance.id`` under static
  membership). A rolling restart is one ``restart`` per member.
* ``upgrade``: a ``restart`` whose new member speaks another group protocol,
  ``to`` (``consumer``, or ``classic``: the run's classic protocol, else Kafka's
  default classic assignors): the rolling switch of ``group.protocol`` of an
  online migration (KIP-848, Kafka 3.8+).
* ``pause``: a process pause (a long GC) of one member for ``duration_s``:
  nothing runs, no heartbeat, no ZooKeeper ping; it resumes where it was.
* ``slow``: one member takes ``processing_ms_per_message`` per message for
  ``duration_s`` (a long batch can exceed ``max.poll.interval.ms``).
* ``network_partition``: ``members`` lose their connections to ``target``
  (``zookeeper``, ``coordinator`` or ``brokers``) for ``duration_s``.
* ``host_crash``: consumer host ``host`` dies with every member on it
  (``members`` lists those alive there then).
* ``broker_crash`` / ``broker_restart``: broker ``broker``.
* ``zk_crash`` / ``zk_restart``: ZooKeeper ensemble member ``zk_member``
  (a timeline ``zk_quorum_loss`` expands to these).
* ``add_partitions``: ``topic`` grows to ``partitions`` partitions in total.
* ``create_topic``: ``topic`` is created with ``partitions`` partitions of
  ``replication_factor`` replicas (the admin path: ``AdminUtils.createTopic``).
* ``delete_topic``: ``topic`` is marked for deletion (``/admin/delete_topics/<t>``;
  what follows depends on ``delete.topic.enable``).
* ``subscribe``: ``members`` change their subscription to ``topics``, or to
  ``topic_pattern`` (with the 0.8 ``topic_filter``); ``topics`` then holds what the
  pattern matches among the topics that exist at that moment.

:data:`MEMBERSHIP_ACTIONS` (``join``, ``leave``, ``crash``) are the ordinary
membership changes of the first scenario format, recorded as
``ACTION_APPLIED``; every other action is a fault (:data:`FAULT_ACTIONS`),
recorded as ``FAULT_INJECTED`` with :meth:`PlannedAction.params` as its
detail. :data:`TIMED_ACTIONS` end by themselves after ``duration_s``
(``FAULT_CLEARED``). A ``restart`` counts as a fault: it is an operator's
action on a live member, not a change of the group's size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from emulator.protocols import spec

__all__ = [
    "ACTIONS",
    "FAULT_ACTIONS",
    "MEMBERSHIP_ACTIONS",
    "PARTITION_TARGETS",
    "TIMED_ACTIONS",
    "UPGRADE_TARGETS",
    "PlannedAction",
    "applicability",
    "switched_protocol",
]

MEMBERSHIP_ACTIONS: Final = ("join", "leave", "crash")
"""Changes of the group's membership (``ACTION_APPLIED`` events)."""

FAULT_ACTIONS: Final = (
    "restart",
    "upgrade",
    "pause",
    "slow",
    "network_partition",
    "host_crash",
    "broker_crash",
    "broker_restart",
    "zk_crash",
    "zk_restart",
    "add_partitions",
    "create_topic",
    "delete_topic",
    "subscribe",
)
"""Every other planned action (``FAULT_INJECTED`` events)."""

ACTIONS: Final = MEMBERSHIP_ACTIONS + FAULT_ACTIONS
"""Every action a plan may hold (a timeline's ``zk_quorum_loss`` is expanded away)."""

TIMED_ACTIONS: Final = ("pause", "slow", "network_partition")
"""Faults that end by themselves ``duration_s`` after they start (``FAULT_CLEARED``)."""

PARTITION_TARGETS: Final = ("zookeeper", "coordinator", "brokers")
"""What a ``network_partition`` cuts its members off from."""

UPGRADE_TARGETS: Final = ("consumer", "classic")
"""The group protocols an ``upgrade`` switches a member to (``group.protocol``)."""


def switched_protocol(run_protocol: str, to: str) -> str:
    """The run protocol a member switched ``to`` (:data:`UPGRADE_TARGETS`) speaks.

    ``consumer`` is KIP-848's protocol. ``classic`` is the run's protocol in a
    classic run; in a ``consumer`` run, a member switched back to
    ``group.protocol=classic`` with the Java client's default
    ``partition.assignment.strategy`` (range first: eager), ``classic-eager``.
    """
    if to == "consumer":
        return "consumer"
    return run_protocol if spec(run_protocol).generation == "classic" else "classic-eager"


@dataclass(frozen=True)
class PlannedAction:
    """One action of a scenario's expanded, seeded plan.

    Attributes:
        at_s: emulated seconds from the start of the run.
        action: one of :data:`ACTIONS`.
        members: the members it acts on (one for join, leave, crash,
            restart, pause and slow; those alive on the host for host_crash).
        broker: broker id (broker_crash, broker_restart).
        zk_member: 0-based ZooKeeper ensemble member (zk_crash, zk_restart).
        host: consumer-host index (host_crash).
        duration_s: how long a timed fault lasts (pause, slow, network_partition).
        target: what a network_partition cuts off (:data:`PARTITION_TARGETS`).
        topic: the topic that grows (add_partitions), is created (create_topic)
            or deleted (delete_topic).
        partitions: its new partition count (add_partitions, create_topic).
        replication_factor: the created topic's (create_topic).
        topics: the new subscription (subscribe): the names given, or what
            ``topic_pattern`` matches among the topics that exist at ``at_s``.
        topic_pattern: a subscription by pattern (subscribe), as written.
        topic_filter: its 0.8 filter kind, ``whitelist`` or ``blacklist`` (subscribe).
        processing_ms_per_message: the slowed processing cost (slow).
        downtime_s: emulated seconds between the shutdown and the start (restart,
            upgrade).
        event_index: the ``[[timeline]]`` entry it comes from (file order, from 0).
        to: the group protocol the member speaks after an upgrade (:data:`UPGRADE_TARGETS`).
    """

    at_s: float
    action: str
    members: tuple[str, ...] = ()
    broker: int | None = None
    zk_member: int | None = None
    host: int | None = None
    duration_s: float | None = None
    target: str | None = None
    topic: str | None = None
    partitions: int | None = None
    topics: tuple[str, ...] = ()
    processing_ms_per_message: float | None = None
    downtime_s: float = 0.0
    event_index: int = 0
    replication_factor: int | None = None
    topic_pattern: str | None = None
    topic_filter: str | None = None
    to: str | None = None

    def params(self) -> dict[str, object]:
        """The action's parameters as a JSON-able dict, for an event's detail.

        Holds ``at_s`` (the planned time), ``event_index`` and every field
        that is set; ``action`` itself is left out (it is the event's reason).
        ``downtime_s`` is there for a restart, or when not 0.
        """
        out: dict[str, object] = {"at_s": self.at_s, "event_index": self.event_index}
        if self.members:
            out["members"] = list(self.members)
        optional: dict[str, object | None] = {
            "broker": self.broker,
            "zk_member": self.zk_member,
            "host": self.host,
            "duration_s": self.duration_s,
            "target": self.target,
            "topic": self.topic,
            "partitions": self.partitions,
            "processing_ms_per_message": self.processing_ms_per_message,
            "replication_factor": self.replication_factor,
            "topic_pattern": self.topic_pattern,
            "topic_filter": self.topic_filter,
            "to": self.to,
        }
        out.update({k: v for k, v in optional.items() if v is not None})
        if self.topics or self.topic_pattern is not None:
            out["topics"] = list(self.topics)  # a pattern's match may be empty
        if self.action in ("restart", "upgrade") or self.downtime_s != 0.0:
            out["downtime_s"] = self.downtime_s
        return out

    def describe(self) -> str:
        """A short one-line name of the action for notes: ``pause of c-3 at 20.0 s``."""
        what = self.action
        if self.action == "network_partition" and self.target is not None:
            what = f"network_partition to {self.target}"
        who = ""
        if self.members:
            shown = ", ".join(self.members[:3]) + (", ..." if len(self.members) > 3 else "")
            who = f" of {shown}"
        return f"{what}{who} at {self.at_s} s (timeline[{self.event_index}])"


def applicability(action: PlannedAction, protocol: str) -> str | None:
    """Whether ``action`` means anything under ``protocol``.

    Brokers and their controller use ZooKeeper in every generation emulated
    here, so ZooKeeper and broker faults apply everywhere. Only two cases do
    not apply: cutting consumers off ZooKeeper under a modern protocol (its
    consumers never talk to ZooKeeper), and cutting them off the group
    coordinator under the 0.8 consumer (it has none).

    Args:
        action: a planned action.
        protocol: a run protocol (:data:`emulator.protocols.RUN_PROTOCOLS`).

    Returns:
        ``None`` when it applies; otherwise the one-line note for the
        manifest saying why it is skipped.

    Raises:
        ValueError: unknown protocol.
    """
    s = spec(protocol)
    if action.action == "upgrade" and not s.has_coordinator:
        return (
            f"{action.describe()} skipped: the 0.8 consumer has no group protocol to switch "
            "(online migration is between the classic and consumer protocols)"
        )
    if action.action == "upgrade" and s.generation == "share":
        return (
            f"{action.describe()} skipped: a share group has no group protocol to switch "
            "(online migration is between the classic and consumer protocols)"
        )
    if action.action != "network_partition":
        return None
    if action.target == "zookeeper" and not s.members_use_zookeeper:
        return (
            f"{action.describe()} skipped: {protocol} consumers never talk to ZooKeeper "
            "(only the brokers do)"
        )
    if action.target == "coordinator" and not s.has_coordinator:
        return (
            f"{action.describe()} skipped: the 0.8 consumer has no group coordinator "
            "(its group lives in ZooKeeper)"
        )
    return None
