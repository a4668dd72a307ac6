"""Carrying out a scenario's timeline: one handler per planned action, in one table.

The orchestrator walks the seeded plan (:meth:`emulator.scenario.Scenario.action_plan`)
and hands each :class:`~emulator.scenario.faults.PlannedAction` to :func:`apply`, which

1. skips what does not apply to the protocol (:func:`emulator.scenario.faults.applicability`,
   and ZooKeeper member faults without the embedded ensemble), with a note
   in the manifest and an ``ACTION_APPLIED`` event in state ``skipped``;
2. records the action: ``ACTION_APPLIED`` for what the consumer hosts carry
   out (they record each member's fault when it takes effect and ends),
   ``FAULT_INJECTED`` for what the orchestrator does itself;
3. runs the action's handler from :data:`HANDLERS`.

An action the plan knows and no handler carries out is never dropped
silently: the run's notes say so. :data:`NOT_CARRIED_OUT` are the planned
actions this orchestrator does not carry out yet: skipped like what does not
apply, with a note and an ``ACTION_APPLIED`` event in state ``skipped``.

``create_topic`` and ``delete_topic`` are the admin tool's steps
(``kafka-topics.sh --create`` / ``--delete``, K@0.8.2.2 ``admin/TopicCommand.scala``);
the brokers' controller does the rest (:mod:`zk_registry.controller`). With
``delete.topic.enable`` off the tool's own note is what happens ("This will have
no impact if delete.topic.enable is not set to true"): the orchestrator logs
``topic_deletion_requested`` in state ``ignored`` and the marker stays.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar

from emulator.eventlog import EventWriter
from emulator.events import EventKind
from emulator.scenario import Scenario
from emulator.scenario.faults import PlannedAction, applicability

_T = TypeVar("_T")

MEMBER_CALL_TIMEOUT_S: Final = 120.0
"""Bound on a consumer host carrying out one member's action."""


@dataclass(frozen=True)
class Launch:
    """What starting a member needs besides its name.

    Attributes:
        origin: the run's emulated time 0 (wall seconds), for legacy consumer ids.
        crashers: members a fault cuts off ZooKeeper: they get a fault proxy.
    """

    origin: float
    crashers: frozenset[str]


class ProtocolRun(Protocol):
    """What the timeline needs of a protocol's run (``actors.orchestrator.ProtocolRun``).

    ``hosts`` are the consumer-host actor handles, ``member_host`` maps each
    member to its host's index, ``ensemble`` is the embedded ZooKeeper
    ensemble (``None`` with a user's ``--zookeeper``).
    """

    protocol: str
    scenario: Scenario
    notes: list[str]
    ensemble: Any
    hosts: list[Any]
    member_host: dict[str, int]
    dead_hosts: set[int]
    live_members: set[str]

    def join(self, names: Sequence[str], launch: Launch, at_s: float) -> None: ...

    def host_of(self, name: str) -> Any: ...

    def gather(self, calls: dict[int, Any], timeout: float) -> dict[int, Any]: ...

    def crash_host(self, index: int) -> None: ...

    def crash_broker(self, broker_id: int) -> None: ...

    def restart_broker(self, broker_id: int) -> None: ...

    def add_partitions(self, topic: str, total: int) -> None: ...

    def create_topic(self, topic: str, partitions: int, replication_factor: int) -> None: ...

    def delete_topic(self, topic: str) -> bool: ...


Handler = Callable[[ProtocolRun, PlannedAction, Launch, EventWriter], None]

NOT_CARRIED_OUT: Final[frozenset[str]] = frozenset()
"""Planned actions the scenario accepts and the cluster does not carry out yet (none)."""

HOST_RECORDED: Final = frozenset(
    {
        "join",
        "leave",
        "crash",
        "pause",
        "slow",
        "network_partition",
        "restart",
        "upgrade",
        "subscribe",
    }
)
"""Actions a consumer host carries out and records per member (the orchestrator
records the timeline action as ``ACTION_APPLIED``)."""


def record(run: ProtocolRun, action: PlannedAction, log: EventWriter) -> None:
    """The event of a timeline action carried out as given (a join of a burst)."""
    log.emit(
        EventKind.ACTION_APPLIED,
        reason=action.action,
        member=_member(action),
        detail=json.dumps(action.params(), sort_keys=True),
        group=run.scenario.group.id,
    )


def apply(run: ProtocolRun, action: PlannedAction, launch: Launch, log: EventWriter) -> None:
    """Carry out one planned action, recorded as an event; skip what does not apply."""
    member = _member(action)
    note = applicability(action, run.protocol)
    if note is None and action.action in ("zk_crash", "zk_restart") and run.ensemble is None:
        note = f"{action.action}: needs the embedded ZooKeeper ensemble (--zookeeper given)"
    if note is None and action.action in NOT_CARRIED_OUT:
        note = f"{action.describe()} skipped: not carried out by this version of the orchestrator"
    if note is not None:
        _note(run, note)
        log.emit(
            EventKind.ACTION_APPLIED,
            reason=action.action,
            member=member,
            state="skipped",
            detail=note,
        )
        return
    if run.protocol == "consumer" and action.action.startswith("zk_"):
        _note(
            run,
            "Kafka 4.0 (KIP-848 GA) runs without ZooKeeper; here the brokers still "
            "coordinate through it, so ZooKeeper faults reach their controller",
        )
    log.emit(
        EventKind.ACTION_APPLIED if action.action in HOST_RECORDED else EventKind.FAULT_INJECTED,
        reason=action.action,
        member=member,
        broker=action.broker,
        duration_ms=None if action.duration_s is None else action.duration_s * 1000.0,
        detail=json.dumps(action.params(), sort_keys=True),
        group=run.scenario.group.id,
    )
    handler = HANDLERS.get(action.action)
    if handler is None:
        _note(run, f"{action.action}: not carried out by this version of the orchestrator")
        return
    handler(run, action, launch, log)


def _member(action: PlannedAction) -> str | None:
    return action.members[0] if len(action.members) == 1 else None


def _note(run: ProtocolRun, note: str) -> None:
    if note not in run.notes:
        run.notes.append(note)


def _ms(seconds: float | None) -> float:
    return _given(seconds) * 1000.0


def _given(value: _T | None) -> _T:
    """A field the plan always sets for this action (a plan without it is a bug)."""
    if value is None:
        raise ValueError("a planned action lacks a field its kind needs")
    return value


# ------------------------------------------------------------------ handlers


def _join(run: ProtocolRun, a: PlannedAction, launch: Launch, _log: EventWriter) -> None:
    run.join(a.members, launch, a.at_s)


def _per_member(call: Callable[[Any, str, PlannedAction], Any], gone: bool) -> Handler:
    """A handler that asks each named member's host, one member at a time.

    ``gone``: the member leaves the live set (leave, crash).
    """

    def handle(run: ProtocolRun, a: PlannedAction, _launch: Launch, _log: EventWriter) -> None:
        for name in a.members:
            host = run.host_of(name)
            if host is None:
                continue
            run.gather({run.member_host[name]: call(host, name, a)}, MEMBER_CALL_TIMEOUT_S)
            if gone:
                run.live_members.discard(name)

    return handle


def _per_host(call: Callable[[Any, list[str], PlannedAction], Any]) -> Handler:
    """A handler that asks every live host once, for all its named members."""

    def handle(run: ProtocolRun, a: PlannedAction, _launch: Launch, _log: EventWriter) -> None:
        targets: dict[int, list[str]] = {}
        for name in a.members:
            h = run.member_host.get(name)
            if h is not None and h not in run.dead_hosts:
                targets.setdefault(h, []).append(name)
        run.gather(
            {h: call(run.hosts[h], names, a) for h, names in targets.items()},
            MEMBER_CALL_TIMEOUT_S,
        )

    return handle


def _delete_topic(run: ProtocolRun, a: PlannedAction, _launch: Launch, log: EventWriter) -> None:
    """``kafka-topics.sh --delete``: the marker; with ``delete.topic.enable`` off, nothing more."""
    topic = _given(a.topic)
    marked = run.delete_topic(topic)
    if not run.scenario.broker_settings(run.protocol).delete_topic_enable:
        _note(
            run,
            f"delete_topic {topic}: delete.topic.enable is false (the 0.8.2.2 default): the "
            "marker /admin/delete_topics/<topic> stays and the topic is not deleted",
        )
        log.emit(
            EventKind.TOPIC_DELETION_REQUESTED,
            topic=topic,
            state="ignored",
            reason="marker" if marked else "already_marked",
            detail="delete.topic.enable is false",
            group=run.scenario.group.id,
        )


def _broker_crash(run: ProtocolRun, a: PlannedAction, _launch: Launch, log: EventWriter) -> None:
    log.emit(EventKind.BROKER_CRASHED, broker=a.broker)
    run.crash_broker(_given(a.broker))


HANDLERS: Final[Mapping[str, Handler]] = {
    "join": _join,
    "leave": _per_member(lambda h, name, a: h.leave.remote(name), gone=True),
    "crash": _per_member(lambda h, name, a: h.crash.remote(name), gone=True),
    "pause": _per_member(lambda h, name, a: h.pause.remote(name, _ms(a.duration_s)), gone=False),
    "slow": _per_member(
        lambda h, name, a: h.slow.remote(name, _ms(a.duration_s), a.processing_ms_per_message),
        gone=False,
    ),
    "restart": _per_member(
        lambda h, name, a: h.restart.remote(name, _ms(a.downtime_s)), gone=False
    ),
    "upgrade": _per_member(
        lambda h, name, a: h.upgrade.remote(name, _ms(a.downtime_s), _given(a.to)), gone=False
    ),
    "network_partition": _per_host(
        lambda h, names, a: h.partition.remote(names, a.target, _ms(a.duration_s))
    ),
    "subscribe": _per_host(lambda h, names, a: h.subscribe.remote(names, list(a.topics))),
    "host_crash": lambda run, a, _l, _g: run.crash_host(_given(a.host)),
    "broker_crash": _broker_crash,
    "broker_restart": lambda run, a, _l, _g: run.restart_broker(_given(a.broker)),
    "zk_crash": lambda run, a, _l, _g: run.ensemble.kill_member(_given(a.zk_member)),
    # No wait: a member alone cannot serve until a quorum is back.
    "zk_restart": lambda run, a, _l, _g: run.ensemble.restart_member(
        _given(a.zk_member), wait=False
    ),
    "add_partitions": lambda run, a, _l, _g: run.add_partitions(
        _given(a.topic), _given(a.partitions)
    ),
    "create_topic": lambda run, a, _l, _g: run.create_topic(
        _given(a.topic), _given(a.partitions), _given(a.replication_factor)
    ),
    "delete_topic": _delete_topic,
}
"""Planned action -> what the orchestrator does for it."""
