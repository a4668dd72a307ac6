"""The seeded action plan: a scenario's timeline expanded in time order, every choice made.

:meth:`emulator.scenario.Scenario.action_plan` gives the expanded, seeded plan
the orchestrator runs (:class:`emulator.scenario.faults.PlannedAction`), and
:meth:`~emulator.scenario.Scenario.membership_plan` every arrival and departure
(:class:`MembershipChange`); ``random`` choices use
``random.Random(f"{seed}/timeline/{index}")``, so the same scenario and seed
give the same plan for every protocol.

Members are named ``c-0``, ``c-1``, ... in creation order (:func:`member_name`):
the initial ``[group].consumers`` first, then each join in time order continues
the numbering. A name is never given to another member; a restarted member
keeps its own.

The timeline is checked through time: a member named must be alive then (not
left, crashed, on a crashed host, or down in a restart), a broker or ZooKeeper
member crashed must be up and one restarted down, a topic created must not
exist then and one deleted, grown or subscribed to must; an inconsistent timeline
raises :class:`TimelineError`, which the parser turns into a one-line
:class:`~emulator.scenario.errors.ScenarioError`.

Topics: the plan is the same for every protocol, so a ``delete_topic`` is taken
as effective from its ``at_s`` on (a later ``create_topic`` may bring the name
back as a new topic), although a 0.8.2.2 cluster with ``delete.topic.enable``
false (its default) only leaves the marker: that generation's run records the
deletion as ignored, and a re-creation there finds the topic still in place.
A subscription by pattern is resolved here against the topics that exist at
its ``at_s`` (:func:`emulator.topic_regex.select_topics`, a Java client's full
match), into the planned action's ``topics``.
"""

from __future__ import annotations

import functools
import heapq
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, NoReturn

from emulator.scenario.errors import int_requirement, show, tighter
from emulator.scenario.faults import PlannedAction
from emulator.scenario.limits import (
    MAX_PARTITIONS_TOTAL,
    MAX_REPLICAS_PER_TOPIC,
    MAX_REPLICAS_TOTAL,
    MAX_TOPICS,
)
from emulator.topic_regex import WHITELIST, select_topics

if TYPE_CHECKING:
    from emulator.scenario.model import Scenario, TimelineEvent

__all__ = [
    "MAX_PLANNED_STEPS",
    "MAX_TIMELINE_ENTRIES",
    "MEMBER_RE",
    "Expansion",
    "MembershipChange",
    "TimelineError",
    "creation_index",
    "expand",
    "member_name",
]

MAX_TIMELINE_ENTRIES: Final = 100_000
"""Most ``[[timeline]]`` entries in a file."""
MAX_PLANNED_STEPS: Final = 1_000_000
"""Most steps the timeline expands to (one per entry, per member of a burst or rolling restart,
per return or restart, and per member an action names): the orchestrator schedules, and the
manifest lists, every one."""

MEMBER_RE: Final = re.compile(r"c-(0|[1-9][0-9]*)")
"""A member name: ``c-N`` with ``N`` its creation index, no leading zeros."""


def member_name(index: int) -> str:
    """The name of the ``index``-th member created (``c-0``, ``c-1``, ...)."""
    return f"c-{index}"


@dataclass(frozen=True)
class MembershipChange:
    """One member's arrival (``join``) or departure (``leave``, ``crash``).

    Expanded from the timeline: a host crash is a ``crash`` of each member on
    the host, a restart a ``leave`` and, ``downtime_s`` later, a ``join`` of
    the same name.
    """

    at_s: float
    action: str
    member: str
    event_index: int


def creation_index(member: str) -> int:
    """The creation index of a member name ``c-N`` (names are checked before)."""
    return int(member.removeprefix("c-"))


def _t(value: float) -> float:
    """A planned time, rounded so that ``at_s + k * interval_s`` prints cleanly."""
    return round(value, 9)


def _step_at(at_s: float, k: int, interval_s: float | None) -> float:
    """The time of step ``k`` of a burst or rolling restart starting at ``at_s``."""
    return _t(_t(at_s) + k * (interval_s or 0.0))


class TimelineError(Exception):
    """An invalid timeline; ``key`` as in :class:`~emulator.scenario.errors.ScenarioError`,
    the message names it."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True)
class Expansion:
    """A scenario's plan: its actions and its membership changes, each in the order run."""

    actions: tuple[PlannedAction, ...]
    changes: tuple[MembershipChange, ...]


def expand(scenario: Scenario) -> Expansion:
    """The scenario's plan, computed once per scenario.

    Raises:
        TimelineError: the timeline is inconsistent (the parser checks every
            scenario it builds, so only a hand-built one can raise).
    """
    return _expansion(scenario)


@functools.lru_cache(maxsize=64)
def _expansion(scenario: Scenario) -> Expansion:
    """The scenario's plan (cached: a scenario is immutable and hashable)."""
    return _Planner(scenario).run()


Step = Callable[[float], None]


class _LiveMembers:
    """The live members by creation index: add, remove and the k-th live one in O(log n).

    A Fenwick tree over the creation indices ``0 .. capacity - 1`` counts the live
    ones, so a seeded random choice or the newest member costs O(log n) instead of
    sorting the live set at every step, and a byte per index lists them in
    creation order at C speed (``bytearray.find``). ``len`` and ``[k]`` make it a
    sequence in creation order, so ``random.Random.choice`` picks from it exactly
    as from the sorted list of names (``seq[randbelow(len(seq))]``).
    """

    def __init__(self, capacity: int, initial: int) -> None:
        self._size = capacity
        self._flags = bytearray(capacity)
        self._flags[:initial] = b"\x01" * initial
        tree = [0] * (capacity + 1)
        tree[1 : initial + 1] = [1] * initial
        for i in range(1, capacity + 1):  # the O(n) Fenwick build
            parent = i + (i & -i)
            if parent <= capacity:
                tree[parent] += tree[i]
        self._tree = tree
        self._count = initial
        self._top = 1 << (capacity.bit_length() - 1) if capacity else 0

    def __len__(self) -> int:
        return self._count

    def __contains__(self, index: int) -> bool:
        return 0 <= index < self._size and self._flags[index] == 1

    def add(self, index: int) -> None:
        if not self._flags[index]:
            self._flags[index] = 1
            self._count += 1
            self._update(index, 1)

    def remove(self, index: int) -> None:
        if self._flags[index]:
            self._flags[index] = 0
            self._count -= 1
            self._update(index, -1)

    def _update(self, index: int, delta: int) -> None:
        i, tree, size = index + 1, self._tree, self._size
        while i <= size:
            tree[i] += delta
            i += i & -i

    def __getitem__(self, k: int) -> str:
        """The name of the ``k``-th live member in creation order (negative: from the newest)."""
        if k < 0:
            k += self._count
        if not 0 <= k < self._count:
            raise IndexError(k)
        pos, rank, step, tree, size = 0, k + 1, self._top, self._tree, self._size
        while step:
            nxt = pos + step
            if nxt <= size and tree[nxt] < rank:
                pos = nxt
                rank -= tree[nxt]
            step >>= 1
        return member_name(pos)  # tree position pos + 1 is creation index pos

    def names(self) -> Iterator[str]:
        """Every live member's name, in creation order."""
        flags = self._flags
        index = flags.find(1)
        while index >= 0:
            yield member_name(index)
            index = flags.find(1, index + 1)

    def names_on(self, host: int, hosts: int) -> Iterator[str]:
        """The live members on consumer ``host`` (creation index ``host`` modulo ``hosts``)."""
        flags = self._flags
        for index in range(host, self._size, hosts):
            if flags[index]:
                yield member_name(index)


class _Planner:
    """Expands the timeline in time order, making every seeded choice and checking it.

    A discrete-event walk: each entry is a step at ``(at_s, index)``; a step may
    schedule later steps of the same entry (a burst's next member, a restart's
    return, a crashed broker's restart). Steps run in ``(time, file index,
    order scheduled)`` order, each against the state left by the ones before.

    Raises (from :meth:`run`):
        TimelineError: the timeline is inconsistent (a dead member named, a
            broker crashed twice, an action ending after ``duration_s``, ...).
    """

    def __init__(self, scenario: Scenario) -> None:
        self.sc = scenario
        self.alive: set[str] = set(scenario.initial_members())
        # The same members, by creation index, for the k-th in creation order.
        self.live_set = _LiveMembers(scenario.member_total, scenario.group.consumers)
        self.created: set[str] = set(self.alive)
        self.gone: dict[str, str] = {}  # name -> why it is absent ("it left at 3.0 s")
        self.dead_hosts: dict[int, float] = {}
        self.brokers_down: dict[int, float] = {}
        self.zk_down: dict[int, float] = {}
        # The topics that exist, in order: [[topics]] in file order, then each created one.
        self.partitions = {t.name: t.partitions for t in scenario.topics}
        self.replication = {t.name: t.replication_factor for t in scenario.topics}
        self.topic_origin = {t.name: "declared in [[topics]]" for t in scenario.topics}
        self.topic_gone: dict[str, str] = {}  # name -> why it does not exist now
        self.partition_total = sum(self.partitions.values())
        self.replica_total = sum(t.partitions * t.replication_factor for t in scenario.topics)
        self.host_count = scenario.host_count
        self.actions: list[PlannedAction] = []
        self.changes: list[MembershipChange] = []
        self.queue: list[tuple[float, int, int, Step]] = []
        self.seq = 0
        self.steps = 0  # toward MAX_PLANNED_STEPS: steps scheduled, members named
        self.handlers: dict[str, Callable[[TimelineEvent, float], None]] = {
            "join": self.join,
            "leave": self.depart,
            "crash": self.depart,
            "restart": self.restart,
            "upgrade": self.restart,
            "pause": self.timed_member_fault,
            "slow": self.timed_member_fault,
            "network_partition": self.network_partition,
            "host_crash": self.host_crash,
            "broker_crash": self.node_crash,
            "broker_restart": self.node_restart,
            "zk_crash": self.node_crash,
            "zk_restart": self.node_restart,
            "zk_quorum_loss": self.quorum_loss,
            "add_partitions": self.add_partitions,
            "create_topic": self.create_topic,
            "delete_topic": self.delete_topic,
            "subscribe": self.subscribe,
        }
        # Joins are the only steps that create members, and their times are
        # fixed by the file: name every future member up front, for messages.
        joins = sorted(
            (_step_at(e.at_s, k, e.interval_s), e.index, k)
            for e in scenario.timeline
            if e.action == "join"
            for k in range(e.count)
        )
        first = scenario.group.consumers
        self.join_names = {
            (index, k): member_name(first + n) for n, (_, index, k) in enumerate(joins)
        }
        self.join_times = {member_name(first + n): at for n, (at, _, _) in enumerate(joins)}

    # ---- driving

    def run(self) -> Expansion:
        for event in self.sc.timeline:
            self.schedule(event, event.at_s, self.handler(event))
        while self.queue:
            at, _, _, step = heapq.heappop(self.queue)
            step(at)
        return Expansion(tuple(self.actions), tuple(self.changes))

    def schedule(self, event: TimelineEvent, at: float, step: Step) -> None:
        self.seq += 1
        self.count_steps(event, 1)
        heapq.heappush(self.queue, (_t(at), event.index, self.seq, step))

    def handler(self, event: TimelineEvent) -> Step:
        handle = self.handlers[event.action]
        return lambda at: handle(event, at)

    def count_steps(self, event: TimelineEvent, n: int) -> None:
        """Add ``n`` steps of ``event`` to the plan's size; fail past :data:`MAX_PLANNED_STEPS`."""
        self.steps += n
        if self.steps > MAX_PLANNED_STEPS:
            if event.members is not None:
                name = "members"
            elif event.action in ("join", "leave", "crash") and event.member is None:
                name = "count"
            else:
                name = "action"
            self.fail(
                event,
                name,
                f"the timeline expands to more than {MAX_PLANNED_STEPS} planned steps (one per "
                "entry, per member of a burst or rolling restart and per member an action "
                "names), the most a run's orchestrator schedules",
            )

    # ---- helpers

    def key(self, event: TimelineEvent, name: str) -> str:
        return f"timeline[{event.index}].{name}"

    def fail(self, event: TimelineEvent, name: str, message: str) -> NoReturn:
        key = self.key(event, name)
        raise TimelineError(key, f"{key}: {message}")

    def plan(self, event: TimelineEvent, at: float, action: str, **fields: Any) -> None:
        members = fields.get("members")
        if members is not None and len(members) > 1:
            self.count_steps(event, len(members) - 1)
        self.actions.append(PlannedAction(_t(at), action, event_index=event.index, **fields))

    def change(self, event: TimelineEvent, at: float, action: str, member: str) -> None:
        self.changes.append(MembershipChange(_t(at), action, member, event.index))

    def rng(self, event: TimelineEvent) -> random.Random:
        return random.Random(f"{self.sc.seed}/timeline/{event.index}")

    def within_run(self, event: TimelineEvent, at: float, name: str, what: str) -> None:
        if _t(at) > self.sc.duration_s:
            self.fail(
                event,
                name,
                f"{what} would be at {_t(at)} s, after duration_s ({self.sc.duration_s})",
            )

    def absent(self, member: str, at: float) -> str:
        """Why ``member`` is not alive at ``at``: gone, joining later, or never there."""
        base = f"no member {show(member)} exists at {_t(at)} s"
        if member in self.gone:
            return f"{base} ({self.gone[member]})"
        if MEMBER_RE.fullmatch(member) is None:
            return f"{base} (members are named c-0, c-1, ... in creation order)"
        if member in self.join_times and member not in self.created:
            return f"{base} (it joins at {self.join_times[member]} s)"
        return base

    def require_alive(self, event: TimelineEvent, name: str, member: str, at: float) -> None:
        if member not in self.alive:
            self.fail(event, name, self.absent(member, at))

    def one_member(self, event: TimelineEvent, at: float) -> str:
        """The ``member`` of ``event`` at ``at``: a live name, or a seeded random choice."""
        assert event.member is not None
        if event.member == "random":
            if not self.live_set:
                self.fail(event, "member", f"no member is alive at {_t(at)} s to choose at random")
            return self.rng(event).choice(self.live_set)
        self.require_alive(event, "member", event.member, at)
        return event.member

    def some_members(self, event: TimelineEvent, at: float) -> tuple[str, ...]:
        """``member`` or ``members`` of ``event`` at ``at``, alive, in creation order."""
        if event.member is not None:
            return (self.one_member(event, at),)
        if event.members is None or event.members == "all":
            live = tuple(self.live_set.names())
            if not live:
                self.fail(event, "members", f"no member is alive at {_t(at)} s")
            return live
        for member in event.members:
            self.require_alive(event, "members", member, at)
        return tuple(sorted(event.members, key=creation_index))

    def check_host(self, event: TimelineEvent, name: str, member: str, at: float) -> None:
        host = creation_index(member) % self.host_count  # Scenario.host_of, in O(1)
        if host in self.dead_hosts:
            self.fail(
                event,
                name,
                f"{member} would start at {_t(at)} s on consumer host {host}, which crashed "
                f"at {self.dead_hosts[host]} s (members go to hosts by creation order)",
            )

    def arrive(self, event: TimelineEvent, at: float, member: str) -> None:
        self.alive.add(member)
        self.live_set.add(creation_index(member))
        self.created.add(member)
        self.gone.pop(member, None)
        self.change(event, at, "join", member)

    def go(self, event: TimelineEvent, at: float, action: str, member: str, why: str) -> None:
        self.alive.remove(member)
        self.live_set.remove(creation_index(member))
        self.gone[member] = why
        self.change(event, at, action, member)

    # ---- membership

    def join(self, event: TimelineEvent, at: float) -> None:
        for k in range(event.count):
            step_at = _step_at(at, k, event.interval_s)
            self.within_run(event, step_at, "interval_s", f"join {k + 1} of {event.count}")
            self.schedule(event, step_at, functools.partial(self.join_one, event, k))

    def join_one(self, event: TimelineEvent, k: int, at: float) -> None:
        member = self.join_names[(event.index, k)]
        self.check_host(event, "at_s", member, at)
        self.arrive(event, at, member)
        self.plan(event, at, "join", members=(member,))

    def depart(self, event: TimelineEvent, at: float) -> None:
        if event.member is not None:
            self.depart_one(event, self.one_member(event, at), at)
            return
        for k in range(event.count):
            step_at = _step_at(at, k, event.interval_s)
            what = f"{event.action} {k + 1} of {event.count}"
            self.within_run(event, step_at, "interval_s", what)
            self.schedule(event, step_at, functools.partial(self.depart_newest, event, k))

    def depart_newest(self, event: TimelineEvent, k: int, at: float) -> None:
        if not self.live_set:
            self.fail(
                event,
                "count",
                f"no member is left at {_t(at)} s for {event.action} {k + 1} of {event.count}",
            )
        self.depart_one(event, self.live_set[-1], at)

    def depart_one(self, event: TimelineEvent, member: str, at: float) -> None:
        verb = "left" if event.action == "leave" else "crashed"
        self.go(event, at, event.action, member, f"it {verb} at {_t(at)} s")
        self.plan(event, at, event.action, members=(member,))

    def restart(self, event: TimelineEvent, at: float) -> None:
        members = self.some_members(event, at)
        for k, member in enumerate(members):
            step_at = _step_at(at, k, event.interval_s)
            self.within_run(event, step_at, "interval_s", f"the restart of {member}")
            back = step_at + event.downtime_s
            self.within_run(event, back, "downtime_s", f"the return of {member}")
            self.schedule(event, step_at, functools.partial(self.restart_one, event, member))

    def restart_one(self, event: TimelineEvent, member: str, at: float) -> None:
        self.require_alive(event, "member" if event.member else "members", member, at)
        back = _t(at + event.downtime_s)
        self.go(event, at, "leave", member, f"it is restarting, down from {_t(at)} to {back} s")
        self.plan(
            event,
            at,
            event.action,
            members=(member,),
            downtime_s=event.downtime_s,
            to=event.to,
        )
        self.schedule(event, back, functools.partial(self.restart_back, event, member))

    def restart_back(self, event: TimelineEvent, member: str, at: float) -> None:
        self.check_host(event, "downtime_s", member, at)
        self.arrive(event, at, member)

    # ---- member faults

    def fault_end(self, event: TimelineEvent, at: float) -> float:
        assert event.duration_s is not None
        end = at + event.duration_s
        self.within_run(event, end, "duration_s", f"the end of the {event.action}")
        return end

    def timed_member_fault(self, event: TimelineEvent, at: float) -> None:
        member = self.one_member(event, at)
        self.fault_end(event, at)
        self.plan(
            event,
            at,
            event.action,
            members=(member,),
            duration_s=event.duration_s,
            processing_ms_per_message=event.processing_ms_per_message,
        )

    def network_partition(self, event: TimelineEvent, at: float) -> None:
        members = self.some_members(event, at)
        self.fault_end(event, at)
        self.plan(
            event,
            at,
            "network_partition",
            members=members,
            target=event.target,
            duration_s=event.duration_s,
        )

    def host_crash(self, event: TimelineEvent, at: float) -> None:
        host = event.host
        assert host is not None
        if host >= self.host_count:
            key = self.key(event, "host")
            raise TimelineError(
                key,
                f"{key} must be an integer between 0 and {self.host_count - 1} (consumer "
                f"hosts minus one: ceil(members / [group].consumers_per_host)), got {host}",
            )
        if host in self.dead_hosts:
            self.fail(
                event,
                "host",
                f"consumer host {host} is already down at {_t(at)} s "
                f"(it crashed at {self.dead_hosts[host]} s)",
            )
        self.dead_hosts[host] = _t(at)
        victims = tuple(self.live_set.names_on(host, self.host_count))
        for member in victims:
            why = f"it crashed with consumer host {host} at {_t(at)} s"
            self.go(event, at, "crash", member, why)
        self.plan(event, at, "host_crash", host=host, members=victims)

    # ---- brokers and ZooKeeper

    def node(self, event: TimelineEvent) -> tuple[str, str, int, dict[int, float]]:
        """(key name, display name, id, down-table) of a broker or ZooKeeper action."""
        if event.action.startswith("broker"):
            assert event.broker is not None
            return "broker", "broker", event.broker, self.brokers_down
        assert event.zk_member is not None
        return "zk_member", "ZooKeeper member", event.zk_member, self.zk_down

    def node_crash(self, event: TimelineEvent, at: float) -> None:
        name, shown, ident, down = self.node(event)
        if ident in down:
            self.fail(
                event,
                name,
                f"{shown} {ident} is already down at {_t(at)} s (it crashed at {down[ident]} s)",
            )
        down[ident] = _t(at)
        self.plan(event, at, event.action, **{name: ident})
        if event.restart_after_s is not None:
            back = at + event.restart_after_s
            self.within_run(event, back, "restart_after_s", f"the restart of {shown} {ident}")
            self.schedule(event, back, functools.partial(self.node_back, event, "restart_after_s"))

    def node_restart(self, event: TimelineEvent, at: float) -> None:
        self.node_back(event, self.node(event)[0], at)

    def node_back(self, event: TimelineEvent, key_name: str, at: float) -> None:
        name, shown, ident, down = self.node(event)
        if ident not in down:
            self.fail(event, key_name, f"{shown} {ident} is not down at {_t(at)} s")
        del down[ident]
        action = "broker_restart" if name == "broker" else "zk_restart"
        self.plan(event, at, action, **{name: ident})

    def quorum_loss(self, event: TimelineEvent, at: float) -> None:
        size = self.sc.cluster.zookeeper_ensemble
        majority = size // 2 + 1
        live = [m for m in range(size) if m not in self.zk_down]
        if len(live) < majority:
            self.fail(
                event,
                "action",
                f"only {len(live)} of {size} ZooKeeper members are up at {_t(at)} s, "
                f"fewer than the majority ({majority}) a quorum loss crashes",
            )
        chosen = sorted(self.rng(event).sample(live, majority))
        end = self.fault_end(event, at)
        for zk in chosen:
            self.zk_down[zk] = _t(at)
            self.plan(event, at, "zk_crash", zk_member=zk)
        self.schedule(event, end, functools.partial(self.quorum_back, event, tuple(chosen)))

    def quorum_back(self, event: TimelineEvent, chosen: tuple[int, ...], at: float) -> None:
        for zk in chosen:
            if zk not in self.zk_down:
                self.fail(event, "duration_s", f"ZooKeeper member {zk} is not down at {_t(at)} s")
            del self.zk_down[zk]
            self.plan(event, at, "zk_restart", zk_member=zk)

    # ---- topics

    def require_topic(self, event: TimelineEvent, name: str, topic: str, at: float) -> None:
        """``topic`` exists at ``at``; else a message saying why not."""
        if topic in self.partitions:
            return
        why = self.topic_gone.get(topic)
        if why is None:
            created = [
                e
                for e in self.sc.timeline
                if e.action == "create_topic" and e.topic == topic and e.at_s > at
            ]
            if created:
                why = f"it is created by timeline[{created[0].index}] at {created[0].at_s} s"
        suffix = f" ({why})" if why else ""
        self.fail(event, name, f"no topic {show(topic)} exists at {_t(at)} s{suffix}")

    def total_limits(self, at: float, others: int, other_replicas: int, rf: int) -> tuple[int, str]:
        """The most partitions a topic of replication factor ``rf`` may have at ``at``, and why."""
        return tighter(
            (
                MAX_PARTITIONS_TOTAL - others,
                f"at most {MAX_PARTITIONS_TOTAL} partitions over all topics; the others "
                f"have {others} at {_t(at)} s",
            ),
            (
                (MAX_REPLICAS_TOTAL - other_replicas) // rf,
                f"at most {MAX_REPLICAS_TOTAL} replicas over all topics, at replication "
                f"factor {rf}; the others have {other_replicas} at {_t(at)} s",
            ),
            (
                MAX_REPLICAS_PER_TOPIC // rf,
                f"at most {MAX_REPLICAS_PER_TOPIC} replicas, partitions x replication_factor "
                f"({rf}), in the topic's znode /brokers/topics/<t>",
            ),
        )

    def add_partitions(self, event: TimelineEvent, at: float) -> None:
        assert event.topic is not None and event.partitions is not None
        self.require_topic(event, "topic", event.topic, at)
        current = self.partitions[event.topic]
        key = self.key(event, "partitions")
        if event.partitions <= current:
            raise TimelineError(
                key,
                f"{key} must be larger than the {current} partitions {show(event.topic)} "
                f"has at {_t(at)} s, got {event.partitions}",
            )
        rf = self.replication[event.topic]
        others = self.partition_total - current
        other_replicas = self.replica_total - current * rf
        limit, note = self.total_limits(at, others, other_replicas, rf)
        if event.partitions > limit:
            requirement = int_requirement(None, limit, note)
            raise TimelineError(key, f"{key} must be {requirement}, got {event.partitions}")
        self.partition_total = others + event.partitions
        self.replica_total = other_replicas + event.partitions * rf
        self.partitions[event.topic] = event.partitions
        self.plan(event, at, "add_partitions", topic=event.topic, partitions=event.partitions)

    def create_topic(self, event: TimelineEvent, at: float) -> None:
        """``AdminUtils.createTopic``: a new name, and replicas on as many live brokers."""
        topic, partitions, rf = event.topic, event.partitions, event.replication_factor
        assert topic is not None and partitions is not None and rf is not None
        if topic in self.partitions:
            self.fail(
                event,
                "topic",
                f"topic {show(topic)} already exists at {_t(at)} s ({self.topic_origin[topic]}; "
                "Kafka refuses: TopicExistsException)",
            )
        if len(self.partitions) >= MAX_TOPICS:
            self.fail(
                event,
                "topic",
                f"{len(self.partitions)} topics exist at {_t(at)} s, the most a run holds "
                f"(MAX_TOPICS = {MAX_TOPICS}: a legacy member's registration znode lists "
                "every subscribed topic)",
            )
        up = self.sc.cluster.brokers - len(self.brokers_down)
        if rf > up:
            down = ", ".join(
                f"broker {b} crashed at {t} s" for b, t in sorted(self.brokers_down.items())
            )
            self.fail(
                event,
                "replication_factor",
                f"{rf} replicas, but only {up} brokers are up at {_t(at)} s ({down}); Kafka "
                f'refuses: "replication factor: {rf} larger than available brokers: {up}"',
            )
        limit, note = self.total_limits(at, self.partition_total, self.replica_total, rf)
        if partitions > limit:
            key = self.key(event, "partitions")
            requirement = int_requirement(None, limit, note)
            raise TimelineError(key, f"{key} must be {requirement}, got {partitions}")
        self.partitions[topic] = partitions
        self.replication[topic] = rf
        self.partition_total += partitions
        self.replica_total += partitions * rf
        self.topic_origin[topic] = f"created by timeline[{event.index}] at {_t(at)} s"
        self.topic_gone.pop(topic, None)
        self.plan(
            event, at, "create_topic", topic=topic, partitions=partitions, replication_factor=rf
        )

    def delete_topic(self, event: TimelineEvent, at: float) -> None:
        """A deletion marker for an existing topic (taken as effective: see the module doc)."""
        topic = event.topic
        assert topic is not None
        self.require_topic(event, "topic", topic, at)
        partitions = self.partitions.pop(topic)
        rf = self.replication.pop(topic)
        self.partition_total -= partitions
        self.replica_total -= partitions * rf
        del self.topic_origin[topic]
        self.topic_gone[topic] = f"deleted by timeline[{event.index}] at {_t(at)} s"
        self.plan(event, at, "delete_topic", topic=topic)

    def subscribe(self, event: TimelineEvent, at: float) -> None:
        members = self.some_members(event, at)
        if event.topic_pattern is None:
            for topic in event.topics:
                self.require_topic(event, "topics", topic, at)
            self.plan(event, at, "subscribe", members=members, topics=event.topics)
            return
        kind = event.topic_filter or WHITELIST
        self.plan(
            event,
            at,
            "subscribe",
            members=members,
            topics=select_topics(self.partitions, event.topic_pattern, kind),
            topic_pattern=event.topic_pattern,
            topic_filter=kind,
        )
