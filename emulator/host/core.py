"""The consumer host's core: many emulated consumers, one tick loop, no I/O.

A consumer host holds many members (:class:`~emulator.host.legacy_shell.LegacyShell`
or :class:`~emulator.host.modern_shell.ModernShell`). Every tick
(:meth:`HostCore.tick`) it lets each member's state machine see the time and
advances each stream's processing, then sends the fetches of *all* its members
through one fetch session per broker
(:class:`~emulator.host.fetch_client.FetchSessionClient`) and the modern
members' group requests in one batch per broker, and finally does its
housekeeping (metadata refreshes that are due, the event log's flush).

The due-index (R9 of the issue-18 design). A tick visits only the members
with something due, in the order of :attr:`HostCore.members` (the order in
which a visit of every member would have reached them, so the events and
requests come out the same): those whose time has come (a heap of each
member's next deadline, lost request or batch end, from
:meth:`~emulator.host.shell.MemberShell.next_visit` after its last visit)
and those touched since (a dirty set: answers, fetches, watches, ZooKeeper
results, faults, crashes and leaves all call
:meth:`~emulator.host.shell.MemberShell.touch` before they change a member).
A visit of any other member would do nothing, except for a modern member
whose application sits idle in ``poll()``: that call is replayed before its
machine next hears anything (:meth:`~emulator.host.modern_shell.ModernShell.catch_up`).
The fetch wants are collected from the members visited or touched since the
last collection (no other member's can have changed).

Metadata: a classic member asks for it when its own ``Metadata`` says so
(:class:`~emulator.modern.messages.RequestMetadata`); the host serves the
members that asked with one metadata call to a broker at a time (the members
that ask while it is in flight wait for the next), and hands each the answer
(its whole metadata cache; a paused member gets it at its wake). The answer is
also the host's own view of the cluster (:attr:`HostCore.partitions_per_topic`),
which a member created later starts with. Emulator choices (not Kafka): one call
serves several members (each consumer asks on its own in Kafka), and a member
cut off every broker is not asked for until the cut heals (Kafka's request
would time out and be retried).

Everything outside is injected: the emulated clock (``now_ms``), the event
writer (:class:`EventSink`) and the transport (:class:`HostTransport`: the
leader cache and the calls to brokers). The Ray actor
(:mod:`actors.consumer_host`) runs the loop, makes the calls and hands the
answers back (:meth:`HostCore.fetch_answered`, :meth:`HostCore.fetch_failed`,
:meth:`HostCore.group_answered`); a unit test does the same with a fake clock.
"""

from __future__ import annotations

import heapq
import json
import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from emulator.broker.messages import SessionAnswer
from emulator.events import EventKind
from emulator.host.fetch_client import FetchCall, FetchSessionClient, Leaders
from emulator.host.legacy_shell import LegacyShell
from emulator.host.modern_shell import ModernShell
from emulator.host.share_fetch_client import ShareCall, ShareFetchClient
from emulator.host.share_shell import ShareShell
from emulator.host.shell import EmitFn, MemberShell, TopicPartition
from emulator.legacy.wildcard import WildcardSubscription
from emulator.modern.errors import Errors
from emulator.modern.machine import MemberMachine, make_member_machine
from emulator.modern.messages import GroupRequest, GroupResponse, RequestMetadata
from emulator.protocols import ProtocolSpec, spec
from emulator.protocols import spec as spec_of
from emulator.settings import RunSettings
from emulator.topic_regex import WHITELIST, FilterKind, TopicFilter

#: Emulator knob (not Kafka): how many messages one fetch returns at most. Kafka
#: bounds a fetch by fetch.message.max.bytes (1 MiB); at 1 KiB a message that is
#: 1024 messages.
MESSAGE_BYTES = 1024

Member = LegacyShell | ModernShell
"""A member of a host: a 0.8 consumer or a modern (classic or KIP-848) one."""


@dataclass(frozen=True)
class MemberSpec:
    """A consumer to create on a host.

    Attributes:
        name: scenario name (``c-3``).
        consumer_id: the A2 consumer id.
        subscription: ``{topic: numStreams}``.
        use_proxy: route its ZooKeeper session through a fault proxy (needed
            to crash it alone, or to cut it off ZooKeeper).
        index: its number (``c-<index>``).
        bootstrap: the broker a modern member asks first.
        zk_latency_ms: one-way delay to ZooKeeper, emulated ms (through its
            proxy; an emulator knob, ``[group].zk_latency_ms``).
        topic_pattern: a subscription by pattern (``[group].topic_pattern``):
            then ``subscription`` holds the topics it selected when the run
            was planned, and a 0.8 consumer subscribes by filter
            (``createMessageStreamsByFilter``) with ``topic_filter``.
        topic_filter: the 0.8 filter kind, ``whitelist`` or ``blacklist``.
        pattern_streams: ``numStreams`` of a subscription by pattern (it has
            no topic to read it from when the pattern selects none).
        protocol: the group protocol this member speaks when an ``upgrade``
            switched it from the run's (``consumer``, or a classic run protocol);
            ``None``: the run's.
    """

    name: str
    consumer_id: str
    subscription: dict[str, int]
    use_proxy: bool = False
    index: int = 0
    bootstrap: int = 0
    zk_latency_ms: float = 0.0
    topic_pattern: str | None = None
    topic_filter: FilterKind = WHITELIST
    pattern_streams: int = 1
    protocol: str | None = None

    def legacy_subscription(self) -> dict[str, int] | WildcardSubscription:
        """What a 0.8 consumer subscribes with.

        ``createMessageStreams(topicCountMap)`` by names, or
        ``createMessageStreamsByFilter(Whitelist|Blacklist(pattern), numStreams)``
        by pattern (:class:`~emulator.legacy.wildcard.WildcardSubscription`).
        """
        if self.topic_pattern is None:
            return dict(self.subscription)
        return WildcardSubscription(
            TopicFilter(self.topic_pattern, self.topic_filter), self.pattern_streams
        )


def restamp(consumer_id: str, now_ms: int) -> str:
    """A 0.8 consumer id ``<group>_<host>-<ms>-<hex>`` with its ``<ms>`` set to ``now_ms``.

    An id without that shape (a ``consumer.id`` config) is kept as it is.
    """
    head, sep, rest = consumer_id.rpartition("-")
    stem, sep2, ms = head.rpartition("-")
    if not (sep and sep2 and ms.isdigit() and len(rest) == 8):
        return consumer_id
    return f"{stem}-{now_ms}-{rest}"


@dataclass(frozen=True)
class HostConfig:
    """What a consumer host needs to know of its run, resolved once.

    Attributes:
        protocol: the run protocol.
        group: the consumer group id.
        kafka: the scenario's Kafka settings (the member machines read them).
        processing_ms_per_message: the application's processing cost.
        max_fetch: the most messages one fetch answer holds
            (``fetch.message.max.bytes`` / :data:`MESSAGE_BYTES`, and at most
            ``max.poll.records`` for a modern consumer).
        max_chunks: ``queued.max.message.chunks``: chunks a stream may queue.
        fetch_max_wait_ms: the long poll (``fetch.max.wait.ms``; 0.8:
            ``fetch.wait.max.ms``).
        auto_offset_reset: the reset policy sent with every fetch.
        assignor: the group's assignor.
        static_membership: members have a ``group.instance.id``.
        manual_commit: the application's commit pattern (emulator knob).
        rebalance_listener: the application's rebalance listener (emulator knob).
        seed: the scenario's seed.
        share_release: a share consumer's application releases this share of its
            records (explicit acknowledgement; emulator knob).
        share_reject: ... and rejects this share.
    """

    protocol: str
    group: str
    kafka: Mapping[str, object]
    processing_ms_per_message: float = 1.0
    max_fetch: int = 1024
    max_chunks: int = 2
    fetch_max_wait_ms: float = 100.0
    auto_offset_reset: str = "largest"
    assignor: str = "range"
    static_membership: bool = False
    manual_commit: str = "none"
    rebalance_listener: str = "none"
    seed: int = 0
    share_release: float = 0.0
    share_reject: float = 0.0

    @property
    def spec(self) -> ProtocolSpec:
        """The run protocol's spec."""
        return spec(self.protocol)

    @classmethod
    def from_settings(
        cls,
        protocol: str,
        group: str,
        kafka: Mapping[str, object],
        settings: RunSettings,
        *,
        processing_ms_per_message: float = 1.0,
        assignor: str = "range",
        static_membership: bool = False,
        manual_commit: str = "none",
        rebalance_listener: str = "none",
        seed: int = 0,
        share_release: float = 0.0,
        share_reject: float = 0.0,
    ) -> HostConfig:
        """The host's settings for ``protocol`` from the run's resolved settings.

        ``kafka`` is the scenario's table as the member machines read it.
        """
        fetch = settings.fetch
        max_fetch = max(1, fetch.fetch_max_bytes // MESSAGE_BYTES)
        if fetch.max_poll_records is not None:
            # A modern consumer's poll() returns at most max.poll.records.
            max_fetch = min(max_fetch, fetch.max_poll_records)
        return cls(
            protocol=protocol,
            group=group,
            kafka=kafka,
            processing_ms_per_message=processing_ms_per_message,
            max_fetch=max_fetch,
            max_chunks=fetch.queued_max_message_chunks,
            fetch_max_wait_ms=float(fetch.fetch_wait_max_ms),
            auto_offset_reset=settings.legacy.auto_offset_reset,
            assignor=assignor,
            static_membership=static_membership,
            manual_commit=manual_commit,
            rebalance_listener=rebalance_listener,
            seed=seed,
            share_release=share_release,
            share_reject=share_reject,
        )


class EventSink(Protocol):
    """The host's event writer."""

    def emit(self, kind: EventKind, **fields: object) -> None:
        """Write one event."""
        ...

    def flush(self) -> None:
        """Write out what is buffered."""
        ...


class HostTransport(Leaders, Protocol):
    """How the host reaches brokers: the leader cache and the two batched calls.

    The calls are fire-and-forget here; their answers come back through
    :meth:`HostCore.fetch_answered` / :meth:`HostCore.fetch_failed` and
    :meth:`HostCore.group_answered`.
    """

    def refresh_leaders(self) -> None:
        """Start a leader refresh if one is due (rate-limited by the cache)."""
        ...

    def send_fetch(self, call: FetchCall) -> None:
        """Make one fetch-session call."""
        ...

    def send_groups(self, broker: int, requests: list[GroupRequest]) -> None:
        """Send a batch of group requests to ``broker`` (may be empty: collect answers)."""
        ...

    def request_metadata(self, topics: list[str], allow_auto_create: bool) -> None:
        """Make one metadata call (``topics``: named, and created if missing when
        ``allow_auto_create``); answer it with :meth:`HostCore.metadata_answered`."""
        ...

    def send_share(self, member: str, call: ShareCall) -> None:
        """Make one share member's ShareFetch or ShareAcknowledge call; answer it with
        :meth:`HostCore.share_answered` or :meth:`HostCore.share_failed`."""
        ...

    def share_disconnect(self, broker: int, group: str, member_id: str) -> None:
        """A share member's connection to ``broker`` dropped (its process died)."""
        ...


@dataclass(frozen=True)
class HostCounters:
    """The host's running counters, summed over its live members."""

    members: int
    processed: int
    rebalances: int
    attempts: int
    conflicts: int
    gave_up: int
    owned: int
    states: dict[str, int]


class HostCore:
    """The members of one consumer host and their tick, without Ray or asyncio.

    Args:
        config: the run's settings for this host.
        transport: the leader cache and the broker calls.
        events: the host's event writer.
        now_ms: the emulated clock.
        session: the host's fetch-session key (``host-<index>``).
        partitions_per_topic: the topics' partition counts at the start.
    """

    def __init__(
        self,
        config: HostConfig,
        transport: HostTransport,
        events: EventSink,
        now_ms: Callable[[], float],
        *,
        session: str,
        partitions_per_topic: Mapping[str, int],
    ) -> None:
        self.config = config
        self.spec = config.spec
        self.transport = transport
        self.events = events
        self.now_ms = now_ms
        self.members: dict[str, Member] = {}
        self.specs: dict[str, MemberSpec] = {}
        self.gone: dict[str, str] = {}  # name -> left | crashed
        self.restarts: dict[str, int] = defaultdict(int)
        self.partitions_per_topic: dict[str, int] = dict(partitions_per_topic)
        self.processed = 0
        self.processed_max: dict[TopicPartition, int] = {}
        # Shutting down: members leave the group, nothing more is fetched.
        self.stopping = False
        self.fetches = FetchSessionClient(
            session,
            config.max_fetch,
            config.max_chunks,
            config.fetch_max_wait_ms,
            config.auto_offset_reset,
        )
        self._outbox: dict[int, list[GroupRequest]] = defaultdict(list)
        self._awaiting: dict[int, tuple[int, ModernShell]] = {}
        self._group_inflight: set[int] = set()
        # The due-index. Each member's number in the order of self.members (a
        # name re-added after it left goes last, as in the dict).
        self._order: dict[str, int] = {}
        self._by_order: dict[int, Member] = {}
        self._next_order = 0
        self._wakes: list[tuple[float, int]] = []  # (when, order): a heap, stale entries skipped
        self._wake_of: dict[int, float] = {}  # order -> its one valid entry in self._wakes
        self._dirty: set[int] = set()  # to visit at the next tick
        self._fetch_dirty: set[int] = set()  # may want a fetch: visited or touched since
        self._visiting: Member | None = None
        self._tick_heap: list[int] = []  # the current tick's visits still to make
        self._cursor = -1  # the order of the member being visited (-1: not in a tick's visits)
        # The last tick whose visits are done (an idle member's catch-up replays
        # it), and the tick whose visits are under way.
        self._visited_ms = -math.inf
        self._tick_ms = -math.inf
        # Metadata requests: the members that asked and wait for the next call
        # (in the order they asked), the members of the call in flight, and the
        # answers kept for members paused when they came.
        self._md_waiting: dict[str, RequestMetadata] = {}
        self._md_call: list[tuple[str, ModernShell]] | None = None
        self._md_held: dict[str, tuple[ModernShell, dict[str, int]]] = {}
        self.metadata_calls = 0
        # Share consumers (KIP-932): their own fetch path, asked every tick.
        self._share: dict[str, ShareShell] = {}

    # ---------------------------------------------------------------- events

    def emit(self, kind: EventKind, /, **fields: object) -> None:
        """Write an event of this host's group."""
        fields.setdefault("group", self.config.group)
        self.events.emit(kind, **fields)

    def fault(
        self,
        kind: str,
        member: str,
        span_ms: float | None,
        /,
        *,
        cleared: bool = False,
        **detail: object,
    ) -> None:
        """Record a fault on ``member`` (``detail`` becomes the event's JSON detail).

        Each fault applied to a member is FAULT_INJECTED (reason = the fault
        kind) and, when a timed fault ends, FAULT_CLEARED; it is flushed at
        once, so it is on disk before what follows.
        """
        m = self.members.get(member)
        self.emit(
            EventKind.FAULT_CLEARED if cleared else EventKind.FAULT_INJECTED,
            reason=kind,
            member=member,
            member_id=(m.member_id or None) if m is not None else None,
            duration_ms=None if span_ms is None else float(span_ms),
            detail=json.dumps(detail, sort_keys=True, default=str),
        )
        self.events.flush()

    # --------------------------------------------------------------- members

    def expect(self, specs: Sequence[MemberSpec]) -> None:
        """These members are about to be created (again): remember their specs."""
        for s in specs:
            self.specs[s.name] = s
            self.gone.pop(s.name, None)

    def add_modern(self, spec: MemberSpec, broker_ids: Sequence[int]) -> str:
        """Create and start a classic or KIP-848 member.

        Args:
            spec: the member.
            broker_ids: the brokers (its bootstrap list, in order).
        """
        protocol, assignor = self.member_protocol(spec)
        corr_start = (spec.index + 1) * 1_000_000_000 + self.restarts[spec.name] * 10_000_000
        if spec_of(protocol).generation == "share":
            return self._add_share(spec, protocol, corr_start, broker_ids)
        machine = make_member_machine(
            protocol,
            name=spec.name,
            group=self.config.group,
            topics=sorted(spec.subscription),
            kafka=dict(self.config.kafka),
            partitions_per_topic=dict(self.partitions_per_topic),
            assignor=assignor,
            static=self.config.static_membership,
            # A restarted member gets a fresh range, so a late answer to its
            # predecessor's request can never match one of its own.
            corr_start=corr_start,
            seed=self.config.seed,
            rebalance_listener=self.config.rebalance_listener,
            topic_pattern=spec.topic_pattern,
        )
        return self.attach_modern(spec, machine, broker_ids)

    def _add_share(
        self, spec: MemberSpec, protocol: str, corr_start: int, broker_ids: Sequence[int]
    ) -> str:
        """Create and start a share consumer (KIP-932): its membership and its fetch path."""
        import random

        from emulator.kafka_keys import kafka_version_at_least
        from emulator.modern.machine import make_share_member

        version = str(self.config.kafka.get("kafka.version") or "4.2")
        machine = make_share_member(
            spec.name,
            self.config.group,
            sorted(spec.subscription),
            dict(self.config.kafka),
            corr_start,
            self.config.seed,
        )
        later = kafka_version_at_least(version, (4, 1))
        client = ShareFetchClient(
            self.config.group,
            machine.member_id,
            max_records=machine.config.max_poll_records,
            max_wait_ms=float(machine.config.fetch_max_wait_ms),
            acks_on_new_session_fail=later,
        )
        box: list[ModernShell] = []

        def send(broker: int, req: GroupRequest, b: list[ModernShell] = box) -> None:
            self._outbox[broker].append(req)
            self._awaiting[req.corr] = (broker, b[0])

        member = ShareShell(
            spec.name,
            machine,
            self.emit,
            self.now_ms,
            send,
            spec.bootstrap,
            client,
            random.Random(f"{self.config.seed}/share-app/{spec.name}/{corr_start}"),
            release=self.config.share_release,
            reject=self.config.share_reject,
            disconnect_releases=later,
        )
        member.broker_ids = tuple(sorted(broker_ids))
        box.append(member)
        member.on_disconnect = self._share_disconnected
        self._share[spec.name] = member
        self._enter(member)
        member.apply(machine.start(self.now_ms()))
        return spec.name

    def _share_disconnected(self, member: ShareShell, brokers: list[int]) -> None:
        for b in brokers:
            self.transport.share_disconnect(b, self.config.group, member.member_id)

    def send_share(self) -> None:
        """Each share member's ShareFetch/ShareAcknowledge calls that are due (every tick)."""
        if not self._share:
            return
        leader = self.transport.leader
        for name in list(self._share):
            member = self._share[name]
            if not member.alive:
                continue
            corr = member.share.next_corr
            for call in member.share_calls(leader, corr):
                self.transport.send_share(name, call)

    def share_answered(self, member: str, broker: int, response: object) -> None:
        """A share member's call was answered; NOT_LEADER_OR_FOLLOWER asks for fresh
        metadata (the share consumer's ``metadata.requestUpdate``), as a fetch's does."""
        m = self._share.get(member)
        if m is None:
            return
        if getattr(response, "error", None) is Errors.NOT_LEADER_OR_FOLLOWER:
            for tp in sorted(m.client.assigned):
                if self.transport.leader(tp) == broker:
                    self.transport.not_leader(tp)
        m.share_answered(broker, response)

    def share_failed(self, member: str, broker: int) -> None:
        """A share member's call failed (the broker is gone or cut off)."""
        m = self._share.get(member)
        if m is not None:
            m.share_failed(broker)

    def member_protocol(self, spec: MemberSpec) -> tuple[str, str | None]:
        """The run protocol ``spec``'s member speaks and its assignor.

        A member an ``upgrade`` switched to the other generation has no assignor
        of the run's: a ``consumer`` member lets the coordinator choose
        (``group.consumer.assignors``' first, no ``group.remote.assignor``), a
        classic one takes the Java client's default ``partition.assignment.strategy``
        (range first, then cooperative-sticky: eager, K@3.9 ``ConsumerConfig``).
        """
        run = self.config.protocol
        protocol = spec.protocol or run
        if spec_of(protocol).generation == spec_of(run).generation:
            return protocol, self.config.assignor
        if spec_of(protocol).generation == "consumer":
            return protocol, None
        return protocol, "range"

    def attach_modern(
        self, spec: MemberSpec, machine: MemberMachine, broker_ids: Sequence[int]
    ) -> str:
        """Take a modern member machine into the host as ``spec`` and start it.

        Its requests queue in the host's outbox, one batch per broker per tick.
        """
        box: list[ModernShell] = []

        def send(broker: int, req: GroupRequest, b: list[ModernShell] = box) -> None:
            self._outbox[broker].append(req)
            self._awaiting[req.corr] = (broker, b[0])

        emit: EmitFn = self.emit
        if spec.protocol is not None:
            speaks = spec_of(spec.protocol).generation

            def emit(kind: EventKind, /, **fields: object) -> None:
                self.emit(kind, member_protocol=speaks, **fields)

        member = ModernShell(spec.name, machine, emit, self.now_ms, send, spec.bootstrap)
        member.manual_commit = self.config.manual_commit
        member.broker_ids = tuple(sorted(broker_ids))
        box.append(member)
        member.on_unfetch = self.fetches.unfetch
        member.on_metadata = self._metadata_wanted
        self._enter(member)
        member.apply(machine.start(self.now_ms()))
        return spec.name

    def adopt(self, member: LegacyShell) -> None:
        """Take a legacy member the actor built (with its ZooKeeper session) into the host."""
        member.manual_commit = self.config.manual_commit
        member.on_unfetch = self.fetches.unfetch
        self._enter(member)

    def _enter(self, member: Member) -> None:
        """Put ``member`` in :attr:`members` and the due-index; it is visited at the next tick."""
        name = member.name
        old = self.members.get(name)
        if old is not None:  # replaced in place: it keeps its place in the dict
            old.on_touch = None
            order = self._order[name]
        else:
            order = self._next_order
            self._next_order += 1
            self._order[name] = order
        self.members[name] = member
        self._by_order[order] = member
        member.on_touch = self._touch
        self._dirty.add(order)
        self._fetch_dirty.add(order)

    def _touch(self, member: MemberShell) -> None:
        """``member`` is about to change outside its visit: visit it at the next tick.

        An idle modern member first catches up on the ``app_idle`` of the last
        tick it was not visited at, so its machine is as a visit at every tick
        would have left it before it hears what comes now.
        """
        if member is self._visiting:
            return  # its visit reads what it needs at its end
        order = self._order.get(member.name)
        if order is None or self._by_order.get(order) is not member:
            return  # not (or no longer) a member of this host
        if isinstance(member, ModernShell) and member.idle_at is not None:
            # (During a tick's visits, one already passed had its turn in this tick.)
            passed = 0 <= order < self._cursor
            member.catch_up(self._tick_ms if passed else self._visited_ms)
            member.idle_at = None
        self._fetch_dirty.add(order)
        if order > self._cursor >= 0:
            heapq.heappush(self._tick_heap, order)  # not yet reached in this tick's visits
        else:
            self._dirty.add(order)

    def is_live(self, name: str, member: MemberShell) -> bool:
        """Whether ``member`` is still the live member called ``name``."""
        return self.members.get(name) is member

    def queued_for(self, member: ModernShell) -> bool:
        """Whether any of ``member``'s requests still waits in the outbox."""
        mine = {corr for corr, (_b, m) in self._awaiting.items() if m is member}
        return any(r.corr in mine for reqs in self._outbox.values() for r in reqs)

    def crash(self, name: str) -> Member | None:
        """Kill one member with no goodbye; return it (``None``: not here).

        What its application had in hand is recorded as processed (up to the
        crash, or to the start of a pause it was frozen in) and abandoned.
        The caller cuts its connections and then calls :meth:`retire`.
        """
        member = self.members.get(name)
        if member is None:
            return None
        # A frozen process processed nothing after its pause began.
        at = member.paused_at if member.paused and member.paused_at is not None else None
        member.abandon(
            self.now_ms() if at is None else at,
            # the 0.8 ConsumerIterator hands out one message at a time
            per_message=isinstance(member, LegacyShell),
        )
        member.kill()
        self.emit(EventKind.CONSUMER_CRASHED, member=name, member_id=member.member_id or None)
        return member

    def retire(self, name: str, how: str) -> Member | None:
        """``name`` is gone (``how``: ``left`` or ``crashed``); return it, ``None`` if it was.

        Its fetches are withdrawn, its progress kept; a modern member's
        requests nobody will answer are forgotten (and a crashed one's unsent
        ones dropped: a dead process sends nothing more).
        """
        member = self.members.pop(name, None)
        if member is None:  # retired meanwhile (a restart and a stop both leaving it)
            return None
        self._share.pop(name, None)
        order = self._order.pop(name)
        del self._by_order[order]
        self._wake_of.pop(order, None)
        self._dirty.discard(order)
        self._fetch_dirty.discard(order)
        member.on_touch = None
        self._md_waiting.pop(name, None)
        self._md_held.pop(name, None)
        member.alive = False
        self.fetches.unfetch_all(member)
        self.gone[name] = how
        for tp, end in member.high_water.items():
            self.processed_max[tp] = max(self.processed_max.get(tp, 0), end)
        if isinstance(member, ModernShell):
            mine = {corr for corr, (_b, m) in self._awaiting.items() if m is member}
            for corr in mine:
                del self._awaiting[corr]
            if how == "crashed":
                for broker, reqs in list(self._outbox.items()):
                    self._outbox[broker] = [r for r in reqs if r.corr not in mine]
        return member

    def grow(self, topic: str, count: int) -> None:
        """``topic`` now has ``count`` partitions (a new topic: it exists with them).

        The host's view, which members created later start with. A modern
        member already running learns it from its own metadata requests (a
        classic member every ``metadata.max.age.ms`` and when Kafka forces
        one; a KIP-848 coordinator on its side); legacy consumers learn it
        through their topic watch.
        """
        self.partitions_per_topic[topic] = max(count, self.partitions_per_topic.get(topic, 0))

    # ------------------------------------------------------------- metadata

    def _metadata_wanted(self, member: ModernShell, request: RequestMetadata) -> None:
        """``member`` asks for metadata: it waits for the next call (its answer must
        be newer than its request)."""
        if self.members.get(member.name) is member:
            self._md_waiting[member.name] = request

    def _metadata_calls(self) -> None:
        """Hand held answers to the members awake again; start a call if members wait.

        A paused member or one cut off every broker waits (it sends nothing).
        The call names every topic a member that named topics asked for, and
        may create them if one of those allowed it (every answer is the
        broker's whole metadata cache, which serves a pattern subscriber's
        request for all topics too).
        """
        for name, (member, counts) in list(self._md_held.items()):
            if self.members.get(name) is not member:
                del self._md_held[name]
            elif not member.paused:
                del self._md_held[name]
                member.metadata_refresh(counts)
        if self._md_call is not None or not self._md_waiting:
            return
        call: list[tuple[str, ModernShell]] = []
        named: set[str] = set()
        create = False
        for name, request in list(self._md_waiting.items()):
            asker = self.members.get(name)
            if not isinstance(asker, ModernShell):
                del self._md_waiting[name]
                continue
            if asker.paused or asker.cut is None:
                continue
            del self._md_waiting[name]
            call.append((name, asker))
            if request.topics is not None:
                named.update(request.topics)
                create = create or request.allow_auto_create
        if not call:
            return
        self._md_call = call
        self.metadata_calls += 1
        self.transport.request_metadata(sorted(named), create and bool(named))

    def metadata_answered(self, leaders: Mapping[TopicPartition, int] | None) -> None:
        """The answer to the metadata call (partition -> leader); ``None``: no broker answered.

        Each member of the call gets the partition counts (a paused one at its
        wake) or hears that it failed; the counts are the host's view from now on.
        """
        call, self._md_call = self._md_call or [], None
        if leaders is None:
            for name, member in call:
                if self.members.get(name) is member:
                    member.metadata_failed()
            return
        counts: dict[str, int] = {}
        for t, p in leaders:
            counts[t] = max(counts.get(t, 0), p + 1)
        self.partitions_per_topic = dict(sorted(counts.items()))
        for name, member in call:
            if self.members.get(name) is not member:
                continue
            if member.paused:
                self._md_held[name] = (member, dict(self.partitions_per_topic))
            else:
                member.metadata_refresh(dict(self.partitions_per_topic))

    # ------------------------------------------------------------------ tick

    def tick(self, now_ms: float) -> None:
        """One pass of the host's loop at ``now_ms``.

        Every member with something due sees the time and processes, in the
        members' order; then (unless the host is shutting down) each broker
        gets its fetch-session call, the group requests go out, and the
        housekeeping runs.
        """
        due = self._dirty
        self._dirty = set()
        wakes, wake_of = self._wakes, self._wake_of
        while wakes and wakes[0][0] <= now_ms:
            when, order = heapq.heappop(wakes)
            if wake_of.get(order) == when:
                del wake_of[order]
                due.add(order)
        heap = self._tick_heap = list(due)
        heapq.heapify(heap)
        self._tick_ms = now_ms
        last = -1
        cost = self.config.processing_ms_per_message
        while heap:
            order = heapq.heappop(heap)
            member = self._by_order.get(order)
            if order == last or member is None:
                continue
            self._cursor = last = order
            self._visit(order, member, now_ms, cost)
        self._cursor = -1
        self._visited_ms = now_ms
        if not self.stopping:  # shutting down: leave the group, fetch nothing more
            self.send_fetches()
        self.send_share()  # (closing share sessions included)
        if self._outbox or self._awaiting:
            self.exchange_groups()
        self.housekeeping(now_ms)

    def _visit(self, order: int, member: Member, now_ms: float, cost_ms: float) -> None:
        """One member's turn in the tick; then when its next turn is."""
        if isinstance(member, ModernShell) and member.idle_at is not None:
            member.catch_up(self._visited_ms)  # the ticks it was not visited at
            member.idle_at = None
        self._visiting = member
        try:
            member.poll(now_ms)
            self.processed += member.process(now_ms, cost_ms)
        finally:
            self._visiting = None
        self._fetch_dirty.add(order)
        when = member.next_visit(now_ms)
        if when is None:
            self._wake_of.pop(order, None)
        elif when <= now_ms:
            self._wake_of.pop(order, None)
            self._dirty.add(order)
        elif self._wake_of.get(order) != when:
            self._wake_of[order] = when
            heapq.heappush(self._wakes, (when, order))

    def send_fetches(self) -> None:
        """Give every position that wants a fetch a slot; send each broker's changes.

        Only members visited or touched since the last call can want a new
        fetch; they are asked in the members' order (the order of the slots).
        """
        self.transport.refresh_leaders()
        asked = sorted(self._fetch_dirty)
        self._fetch_dirty = set()
        members = [m for m in (self._by_order.get(o) for o in asked) if m is not None]
        for call in self.fetches.calls(members, self.transport):
            self.transport.send_fetch(call)

    def fetch_answered(self, broker: int, answers: Sequence[SessionAnswer]) -> None:
        """``broker`` answered the host's fetch-session call."""
        self.fetches.answered(broker, answers, self.transport)

    def fetch_failed(self, broker: int) -> None:
        """The fetch-session call to ``broker`` failed (the broker is gone)."""
        self.fetches.failed(broker)

    def exchange_groups(self) -> None:
        """One group-request call per broker per tick (and for pending answers)."""
        brokers = set(self._outbox) | {b for b, _ in self._awaiting.values()}
        for broker in brokers:
            if broker in self._group_inflight:
                continue
            reqs = self._outbox.pop(broker, [])
            self._group_inflight.add(broker)
            self.transport.send_groups(broker, reqs)

    def group_answered(
        self,
        broker: int,
        requests: Sequence[GroupRequest],
        answers: Sequence[GroupResponse] | None,
    ) -> None:
        """The answers of ``broker`` to a group call; ``None``: the call failed.

        A failed call loses every request in it: each member hears that its
        broker is unreachable.
        """
        self._group_inflight.discard(broker)
        if answers is None:
            for req in requests:
                _b, member = self._awaiting.pop(req.corr, (None, None))
                if member is not None:
                    member.on_unreachable(req)
            return
        for resp in answers:
            _b, member = self._awaiting.pop(resp.corr, (None, None))
            if member is not None and member.alive:
                member.on_response(resp)

    def housekeeping(self, now_ms: float) -> None:
        """Per tick: the metadata call for the members that asked, and the event log's flush.

        The log is written out at the end of every tick, before the tick's
        requests leave (they are sent once the loop yields): what a member did
        is on disk before any commit that says it did it, so a killed host
        never leaves a committed offset whose processing the log lost.
        """
        if self._md_waiting or self._md_held:
            self._metadata_calls()
        self.events.flush()

    # ------------------------------------------------------------------ stats

    def counters(self) -> HostCounters:
        """Counters for the live display and the summary."""
        rebalances = attempts = conflicts = gave_up = owned = 0
        states: dict[str, int] = defaultdict(int)
        for m in self.members.values():
            if isinstance(m, LegacyShell):
                st = m.machine.stats
                rebalances += st.rebalances
                attempts += st.attempts
                conflicts += st.conflicts
                gave_up += st.gave_up
            else:
                rebalances += m.machine.stats.rebalances
                attempts += m.machine.stats.joins
            owned += len(m.machine.owned)
            states[str(m.machine.state.value)] += 1
        return HostCounters(
            len(self.members),
            self.processed,
            rebalances,
            attempts,
            conflicts,
            gave_up,
            owned,
            dict(states),
        )

    def progress(self) -> dict[TopicPartition, int]:
        """The highest processed offset end of each partition on this host."""
        hw = dict(self.processed_max)
        for m in self.members.values():
            for tp, end in m.high_water.items():
                hw[tp] = max(hw.get(tp, 0), end)
        return hw

    def owners(self) -> dict[str, list[TopicPartition]]:
        """Each live member's owned partitions (its in-memory topicRegistry)."""
        return {n: sorted(m.machine.owned) for n, m in self.members.items()}
