"""Real legacy consumers, a fake clock and a real ZooKeeper, driven step by step (tests only).

:class:`LegacyHarness` holds several :class:`~emulator.legacy.consumer.LegacyConsumer`
state machines on one :class:`~emulator.clock.FakeClock`. Each has a
ZooKeeper session of its own (:class:`~zk_registry.client.ZkClient`) and a
:class:`~zk_registry.legacy_driver.LegacyZkDriver` that performs its requests
against the real server, in the test's asyncio loop. So ZooKeeper work and
watch notifications are real, and emulated time is not: it moves only when
the test calls :meth:`LegacyHarness.advance` (or :meth:`LegacyHarness.converge`,
which advances only to back-off deadlines). A ``Sleep`` of the machine is a
deadline (``next_deadline()``), woken by ``poll()`` once the clock reaches it.

What the test controls:

* **Gates.** :meth:`LegacyHarness.hold` parks a consumer's requests of the given
  types instead of executing them (:meth:`wait_held` waits until one is parked,
  :meth:`release` lets them go). Holding one consumer's
  ``ReadAssignmentContext`` or ``ClaimOwnership`` decides which consumer reads
  or writes ZooKeeper first, as a slow network would.
* **Callbacks.** :meth:`LegacyHarness.pause` queues a consumer's watch
  notifications and ``handleNewSession`` instead of delivering them into the
  machine; :meth:`resume` delivers the queue in arrival order.
* **Faults.** :meth:`LegacyHarness.expire` expires a session on the *server*
  (:func:`zk_registry.faults.expire_session`).

What it records, per consumer, in one global order (:class:`Rec`): every
``Emit`` effect as its event kind, every request as ``req:<Type>`` and its
answer as ``done:<Type>``, fetcher effects, watch deliveries (``watch:<source>``),
new sessions and session states. Every wait is bounded; :meth:`LegacyHarness.close`
ends every session it opened.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kazoo.exceptions import NoNodeError  # type: ignore[import-untyped]

from emulator.clock import FakeClock
from emulator.events import EventKind
from emulator.legacy.assignors import AssignmentStrategy, assign_all
from emulator.legacy.config import LegacyConsumerConfig
from emulator.legacy.consumer import ConsumerState, LegacyConsumer
from emulator.legacy.messages import (
    Emit,
    IoResult,
    Output,
    Request,
    Sleep,
    StartFetchers,
    StopFetchers,
    TopicPartition,
)
from zk_registry import layout as L
from zk_registry.brokers import create_topic, register_broker, setup_common_paths
from zk_registry.client import WatchEvent, ZkClient, asyncio_dispatch
from zk_registry.faults import expire_session
from zk_registry.legacy_driver import LegacyZkDriver

__all__ = [
    "GROUP",
    "HarnessConsumer",
    "LegacyHarness",
    "Rec",
    "Snapshot",
    "eventually",
    "run_harness",
    "snapshot",
]

GROUP = "g"
#: Wall-clock session timeout of the harness's sessions (the test server grants 0.4-4 s).
SESSION_S = 4.0
#: The A2 timestamp of the consumer ids (``<group>_host<i>-<ms>-<hex>``).
ID_TS = 1441996002307


async def eventually(
    predicate: Callable[[], object], timeout: float = 10.0, what: str = "", interval: float = 0.01
) -> None:
    """Wait (in the loop) until ``predicate()`` is truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        await asyncio.sleep(interval)


# --------------------------------------------------------------------------- server-side view


@dataclass(frozen=True)
class Snapshot:
    """What ZooKeeper holds for one group, read by an independent session.

    Attributes:
        members: consumer id -> subscription, from the ``/ids`` znodes.
        member_sessions: consumer id -> ephemeralOwner of its ``/ids`` znode.
        partitions: topic -> its partitions, from ``/brokers/topics/<t>``.
        owners: partition -> the thread id stored in its owner znode.
        owner_sessions: partition -> ephemeralOwner of its owner znode.
    """

    members: Mapping[str, Mapping[str, int]]
    member_sessions: Mapping[str, int]
    partitions: Mapping[str, tuple[int, ...]]
    owners: Mapping[TopicPartition, str]
    owner_sessions: Mapping[TopicPartition, int]

    def expected_range(self) -> dict[TopicPartition, str]:
        """Range (A6) over the members ZooKeeper lists, as owner-znode data."""
        topics = {t for sub in self.members.values() for t in sub}
        parts = {t: ps for t, ps in self.partitions.items() if t in topics}
        whole = assign_all(AssignmentStrategy.RANGE, self.members, parts)
        return {tp: str(thread) for tp, thread in whole.items()}

    def subscribed(self) -> set[TopicPartition]:
        """Every partition of every topic some member subscribes to."""
        topics = {t for sub in self.members.values() for t in sub}
        return {(t, p) for t, ps in self.partitions.items() if t in topics for p in ps}

    def owned_by(self, consumer_id: str) -> dict[TopicPartition, str]:
        """The owner znodes whose thread id belongs to ``consumer_id``."""
        return {tp: th for tp, th in self.owners.items() if L.parse_thread_id(th)[0] == consumer_id}


async def snapshot(client: ZkClient, group: str, topics: Iterable[str]) -> Snapshot:
    """Read the group's ``/ids`` and ``/owners`` and the topics' partitions from ZooKeeper."""
    ids_path = L.consumer_ids_path(group)
    try:
        names = await client.get_children_async(ids_path)
    except NoNodeError:
        names = []
    members: dict[str, dict[str, int]] = {}
    member_sessions: dict[str, int] = {}
    for cid in names:
        try:
            data, stat = await client.get_async(f"{ids_path}/{cid}")
        except NoNodeError:
            continue
        members[cid] = dict(L.decode_consumer_registration(data).subscription)
        member_sessions[cid] = int(stat.ephemeralOwner)
    partitions: dict[str, tuple[int, ...]] = {}
    owners: dict[TopicPartition, str] = {}
    owner_sessions: dict[TopicPartition, int] = {}
    for topic in sorted(set(topics)):
        try:
            data, _ = await client.get_async(L.topic_path(topic))
            partitions[topic] = tuple(sorted(L.decode_topic_assignment(data)))
        except NoNodeError:
            partitions[topic] = ()
        try:
            children = await client.get_children_async(L.owners_topic_path(group, topic))
        except NoNodeError:
            children = []
        for child in children:
            try:
                data, stat = await client.get_async(L.owner_path(group, topic, int(child)))
            except NoNodeError:
                continue
            owners[(topic, int(child))] = L.decode_owner(data)
            owner_sessions[(topic, int(child))] = int(stat.ephemeralOwner)
    return Snapshot(members, member_sessions, partitions, owners, owner_sessions)


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Rec:
    """One line of the harness's trace.

    Attributes:
        seq: global order over all consumers.
        t: the fake clock (emulated ms) when it happened.
        member: the consumer's name.
        what: an :class:`EventKind` value for ``Emit`` effects; ``req:<Type>`` /
            ``done:<Type>`` for a request and its answer; ``StopFetchers`` /
            ``StartFetchers``; ``watch:<source>``; ``new_session``; ``state:<STATE>``.
        fields: the event's fields (for ``Emit``), else details.
        request: the request, for ``req:`` and ``done:`` lines.
        result: the answer, for ``done:`` lines.
    """

    seq: int
    t: float
    member: str
    what: str
    fields: Mapping[str, object] = field(default_factory=dict)
    request: Request | None = None
    result: IoResult | None = None


@dataclass
class HarnessConsumer:
    """One consumer of the harness: machine, session, driver and what it did."""

    name: str
    consumer_id: str
    subscription: dict[str, int]
    machine: LegacyConsumer
    client: ZkClient
    driver: LegacyZkDriver
    fetching: dict[TopicPartition, tuple[str, int | None]] = field(default_factory=dict)
    gate: set[type[Request]] = field(default_factory=set)
    held: list[Request] = field(default_factory=list)
    paused: bool = False
    # ("watch", source) or ("new_session", ""), while paused
    queued: list[tuple[str, str]] = field(default_factory=list)
    watches: list[tuple[str, WatchEvent]] = field(default_factory=list)
    sessions: list[int] = field(default_factory=list)  # session ids seen, in order
    tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def thread(self, i: int = 0) -> str:
        """The thread id ``<consumerId>-<i>``."""
        return L.thread_id(self.consumer_id, i)

    @property
    def session_id(self) -> int:
        """The current ZooKeeper session id."""
        sid = self.client.session_id
        assert sid is not None, f"{self.name} has no session"
        return int(sid)


# --------------------------------------------------------------------------- the harness


class LegacyHarness:
    """Legacy consumers on a fake clock against a real ZooKeeper; see the module docstring.

    Args:
        connect: ``host:port[,...]/chroot`` of the test's chroot.
        config: the Kafka settings of every consumer.
        group: ``group.id``.
        start_ms: the fake clock's start.
        quiet_s: how long nothing may happen before :meth:`settle` calls it settled
            (watch notifications arrive asynchronously after the write that causes them).
        request_timeout_s: bound on one driver request (a stuck request fails the test).
    """

    def __init__(
        self,
        connect: str,
        *,
        config: LegacyConsumerConfig | None = None,
        group: str = GROUP,
        start_ms: float = 0.0,
        quiet_s: float = 0.25,
        request_timeout_s: float = 15.0,
    ) -> None:
        self.connect = connect
        self.config = config or LegacyConsumerConfig()
        self.group = group
        self.clock = FakeClock(start_ms)
        self.quiet_s = quiet_s
        self.request_timeout_s = request_timeout_s
        self.consumers: dict[str, HarnessConsumer] = {}
        self.trace: list[Rec] = []
        self.errors: list[str] = []
        self.topics: set[str] = set()
        self._seq = itertools.count()
        self._inflight = 0
        self._last_activity = time.monotonic()
        self._clients: list[ZkClient] = []
        self._admin: ZkClient | None = None

    # ------------------------------------------------------------------ setup

    async def session(self) -> ZkClient:
        """A started extra session in the chroot (an intruder, an observer); closed by close()."""
        loop = asyncio.get_running_loop()
        c = ZkClient(self.connect, SESSION_S, dispatch=asyncio_dispatch(loop))
        self._clients.append(c)
        await asyncio.wait_for(c.start_async(), 20)
        return c

    async def admin(self) -> ZkClient:
        """The harness's own session: setup, brokers and server-side checks."""
        if self._admin is None:
            self._admin = await self.session()
        return self._admin

    async def setup_cluster(self, topics: Mapping[str, int], brokers: Iterable[int] = (1,)) -> None:
        """Common paths, live brokers (ephemeral, on the admin session) and topics."""
        admin = await self.admin()
        await setup_common_paths(admin)
        ids = list(brokers)
        for b in ids:
            await register_broker(
                admin, b, f"broker{b}", 9092, timestamp_ms=ID_TS, session_timeout_s=SESSION_S
            )
        for topic, n in topics.items():
            await create_topic(admin, topic, n, 1, random.Random(0), broker_ids=ids)
            self.topics.add(topic)

    async def add(
        self, name: str, subscription: Mapping[str, int] | None = None, *, index: int | None = None
    ) -> HarnessConsumer:
        """Create a consumer with a session of its own; :meth:`start` starts it.

        The consumer id is ``g_host<index>-<ID_TS>-<hex>`` (A2), so ids sort as
        the indices do (up to 10 consumers).
        """
        if name in self.consumers:
            raise ValueError(f"consumer {name} exists")
        idx = len(self.consumers) if index is None else index
        cid = L.make_consumer_id(self.group, f"host{idx}", ID_TS, f"{0x9A86B603 + idx:08x}0000abcd")
        sub = dict(subscription or {"t": 1})
        self.topics.update(sub)
        loop = asyncio.get_running_loop()
        client = ZkClient(
            self.connect,
            SESSION_S,
            dispatch=asyncio_dispatch(loop),
            on_state=lambda state, sid: self._on_state(name, state, sid),
            on_new_session=lambda: self._on_new_session(name),
        )
        self._clients.append(client)
        await asyncio.wait_for(client.start_async(), 20)
        driver = LegacyZkDriver(
            client,
            self.group,
            cid,
            SESSION_S,
            on_watch=lambda source, ev: self._on_watch(name, source, ev),
            retry_deadline_s=10.0,
            wall_ms=lambda: int(self.clock.now_ms()),  # the harness's clock is the wall
        )
        machine = LegacyConsumer(
            member=name, consumer_id=cid, group=self.group, subscription=sub, config=self.config
        )
        c = HarnessConsumer(name, cid, sub, machine, client, driver)
        if client.session_id is not None:
            c.sessions.append(int(client.session_id))
        self.consumers[name] = c
        return c

    def start(self, name: str) -> None:
        """``createMessageStreams``: the machine registers and rebalances."""
        c = self.consumers[name]
        self._apply(c, c.machine.start(self.clock.now_ms()))

    async def join(
        self, name: str, subscription: Mapping[str, int] | None = None
    ) -> HarnessConsumer:
        """:meth:`add` then :meth:`start`."""
        c = await self.add(name, subscription)
        self.start(name)
        return c

    async def join_in_turn(self, names: Iterable[str]) -> None:
        """Join ``names`` one at a time, each after the group converged on the previous ones.

        Each join waits until every earlier member got the ``/ids`` watch (the herd).
        """
        joined: list[str] = []
        for name in names:
            mark = self.mark()
            await self.join(name)
            await self.wait_watch(joined, since=mark)
            await self.converge()
            joined.append(name)

    def shutdown(self, name: str) -> None:
        """Graceful ``shutdown()``: commit, then close the session."""
        c = self.consumers[name]
        self._apply(c, c.machine.shutdown(self.clock.now_ms()))

    # ------------------------------------------------------------------ control

    def hold(self, name: str, *types: type[Request]) -> None:
        """Park ``name``'s requests of these types (any request if none given) until released."""
        self.consumers[name].gate.update(types or (Request,))

    def release(self, name: str, *types: type[Request]) -> None:
        """Open the gate for these types (all if none given) and run the parked requests."""
        c = self.consumers[name]
        if types:
            c.gate.difference_update(types)
        else:
            c.gate.clear()
        parked, c.held = c.held, []
        for req in parked:
            if self._gated(c, req):
                c.held.append(req)
            else:
                self._launch(c, req)

    async def wait_held(
        self, name: str, rtype: type[Request] = Request, timeout: float = 10.0
    ) -> Request:
        """Wait until a request of ``rtype`` of ``name`` is parked at its gate; return it."""
        c = self.consumers[name]
        await eventually(
            lambda: any(isinstance(r, rtype) for r in c.held),
            timeout,
            f"{name} to park a {rtype.__name__}",
        )
        return next(r for r in c.held if isinstance(r, rtype))

    def pause(self, name: str) -> None:
        """Queue ``name``'s watch notifications and new-session callbacks."""
        self.consumers[name].paused = True

    def resume(self, name: str) -> None:
        """Deliver what :meth:`pause` queued, in arrival order, and stop queueing."""
        c = self.consumers[name]
        c.paused = False
        queued, c.queued = c.queued, []
        for kind, source in queued:
            if kind == "watch":
                self._deliver_watch(c, source)
            else:
                self._deliver_new_session(c)

    async def wait_watch(
        self, names: Iterable[str], since: int, source: str = "ids", timeout: float = 10.0
    ) -> None:
        """Wait until each of ``names`` got a ``source`` watch since trace line ``since``."""
        wanted = list(names)
        await eventually(
            lambda: all(self.events(n, f"watch:{source}", since) for n in wanted),
            timeout,
            f"{source} watches of {wanted}",
        )

    async def advance(self, ms: float) -> None:
        """Move the fake clock, wake every consumer whose deadline passed, then settle."""
        now = self.clock.advance(ms)
        self._poll(now)
        await self.settle()

    async def advance_to(self, t_ms: float) -> None:
        """:meth:`advance` up to the emulated time ``t_ms``."""
        await self.advance(max(0.0, t_ms - self.clock.now_ms()))

    async def settle(self, timeout: float = 15.0) -> None:
        """Wait until no request runs and nothing happened for ``quiet_s`` (bounded).

        Parked requests and paused callbacks do not count: they wait for the test.
        """
        deadline = time.monotonic() + timeout
        while True:
            self._raise_errors()
            idle = self._inflight == 0
            if idle and time.monotonic() - self._last_activity >= self.quiet_s:
                return
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"harness did not settle in {timeout}s: {self._inflight} requests in flight"
                )
            await asyncio.sleep(0.01)

    async def converge(self, max_steps: int = 40) -> None:
        """Settle; while a consumer backs off, jump the clock to the earliest back-off end.

        Ends when no consumer is rebalancing or backing off (nothing parked is released).
        """
        for _ in range(max_steps):
            await self.settle()
            waiting = [
                c.machine.next_deadline()
                for c in self.consumers.values()
                if c.machine.state is ConsumerState.BACKOFF
            ]
            deadlines = [d for d in waiting if d is not None]
            if not deadlines:
                busy = [
                    c.name
                    for c in self.consumers.values()
                    if c.machine.state in (ConsumerState.REBALANCING, ConsumerState.REGISTERING)
                    and not c.held
                    and not c.paused
                ]
                if not busy:
                    return
                continue
            await self.advance_to(min(deadlines))
        raise AssertionError(f"no convergence after {max_steps} steps: {self.states()}")

    async def expire(self, name: str, timeout: float = 10.0) -> int:
        """Expire ``name``'s session on the server; return the expired session id.

        Waits (bounded) until another client sees the consumer's ``/ids`` znode
        gone, if it had one.
        """
        c = self.consumers[name]
        cid = c.client.client_id
        assert cid is not None, f"{name} is not connected"
        sid, password = cid
        path = L.consumer_id_path(self.group, c.consumer_id)
        loop = asyncio.get_running_loop()
        await asyncio.wait_for(
            loop.run_in_executor(
                None,
                lambda: expire_session(
                    self.connect, sid, password, ephemeral_path=path, timeout=timeout
                ),
            ),
            timeout + 5,
        )
        self._touch()
        return sid

    # ------------------------------------------------------------------ queries

    def events(self, name: str, what: str | EventKind | None = None, since: int = 0) -> list[Rec]:
        """``name``'s trace lines (of one kind, if given) with ``seq >= since``."""
        key = None if what is None else (what.value if isinstance(what, EventKind) else what)
        return [
            r
            for r in self.trace
            if r.member == name and r.seq >= since and (key is None or r.what == key)
        ]

    def mark(self) -> int:
        """The seq the next trace line will get (for :meth:`events` ``since``)."""
        return len(self.trace)

    def states(self) -> dict[str, str]:
        """Each consumer's machine state."""
        return {n: c.machine.state.value for n, c in self.consumers.items()}

    async def snapshot(self) -> Snapshot:
        """The group as ZooKeeper holds it now (read on the admin session)."""
        return await snapshot(await self.admin(), self.group, self.topics)

    async def assert_converged(self, live: Iterable[str] | None = None) -> Snapshot:
        """Every subscribed partition has exactly one owner znode, as range over ``/ids`` says.

        Also: ``/ids`` lists exactly the ``live`` consumers (default: every consumer
        not closed), each owner znode belongs to its thread's *current* session,
        and each live machine is STABLE with the registry and fetchers ZooKeeper shows.
        """
        if live is None:
            live = [
                n for n, c in self.consumers.items() if c.machine.state is not ConsumerState.CLOSED
            ]
        names = list(live)
        snap = await self.snapshot()
        by_id = {self.consumers[n].consumer_id: self.consumers[n] for n in names}
        assert set(snap.members) == set(by_id), (sorted(snap.members), sorted(by_id))
        assert dict(snap.owners) == snap.expected_range(), self._describe(snap)
        assert set(snap.owners) == snap.subscribed()
        for tp, thread in snap.owners.items():
            holder = by_id[L.parse_thread_id(thread)[0]]
            assert snap.owner_sessions[tp] == holder.session_id, f"{tp} held by a stale session"
        for c in by_id.values():
            assert snap.member_sessions[c.consumer_id] == c.session_id, c.name
            mine = snap.owned_by(c.consumer_id)
            assert c.machine.state is ConsumerState.STABLE, (c.name, c.machine.state)
            assert c.machine.owned == mine, (c.name, c.machine.owned, mine)
            assert {tp: th for tp, (th, _) in c.fetching.items()} == mine, c.name
        return snap

    # ------------------------------------------------------------------ teardown

    async def close(self, check: bool = True) -> None:
        """End every session (consumers first), bounded; then report harness errors (``check``)."""
        for c in self.consumers.values():
            c.paused = True  # nothing more reaches the machines
            c.driver.stop_watches()
            for t in list(c.tasks):
                t.cancel()
        for client in reversed(self._clients):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.stop_async(), 10)
        if check:
            self._raise_errors()

    # ------------------------------------------------------------------ plumbing

    def _record(self, c: HarnessConsumer, what: str, **kw: object) -> Rec:
        rec = Rec(next(self._seq), self.clock.now_ms(), c.name, what, **kw)  # type: ignore[arg-type]
        self.trace.append(rec)
        self._touch()
        return rec

    def _touch(self) -> None:
        self._last_activity = time.monotonic()

    def _raise_errors(self) -> None:
        if self.errors:
            raise AssertionError("harness errors: " + "; ".join(self.errors))

    def _gated(self, c: HarnessConsumer, req: Request) -> bool:
        return any(isinstance(req, t) for t in c.gate)

    def _apply(self, c: HarnessConsumer, outputs: list[Output]) -> None:
        for out in outputs:
            if isinstance(out, Emit):
                self._record(c, out.kind.value, fields=dict(out.fields))
            elif isinstance(out, StopFetchers):
                c.fetching = {}
                self._record(c, "StopFetchers")
            elif isinstance(out, StartFetchers):
                c.fetching = dict(out.positions)
                self._record(c, "StartFetchers", fields={"positions": dict(out.positions)})
            elif isinstance(out, Sleep):
                continue  # a deadline: woken by poll()
            elif isinstance(out, Request):
                self._record(c, f"req:{type(out).__name__}", request=out)
                if self._gated(c, out):
                    c.held.append(out)
                else:
                    self._launch(c, out)

    def _launch(self, c: HarnessConsumer, req: Request) -> None:
        self._inflight += 1
        task = asyncio.ensure_future(self._perform(c, req))
        c.tasks.add(task)
        task.add_done_callback(c.tasks.discard)

    async def _perform(self, c: HarnessConsumer, req: Request) -> None:
        try:
            try:
                result = await asyncio.wait_for(c.driver.execute(req), self.request_timeout_s)
            except TimeoutError:
                self.errors.append(
                    f"{c.name}: {type(req).__name__} took > {self.request_timeout_s}s"
                )
                return
            self._record(c, f"done:{type(req).__name__}", request=req, result=result)
            if req.rid in c.machine.outstanding:
                self._apply(c, c.machine.complete(self.clock.now_ms(), req.rid, result))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a machine or harness bug: fail the test at the next settle
            self.errors.append(f"{c.name}: {type(req).__name__}: {exc!r}")
        finally:
            self._inflight -= 1
            self._touch()

    def _poll(self, now: float) -> None:
        for c in self.consumers.values():
            deadline = c.machine.next_deadline()
            if deadline is not None and now >= deadline:
                self._apply(c, c.machine.poll(now))

    def _on_watch(self, name: str, source: str, event: WatchEvent) -> None:
        c = self.consumers.get(name)
        if c is None:
            return
        c.watches.append((source, event))
        self._touch()
        if c.paused:
            c.queued.append(("watch", source))
        else:
            self._deliver_watch(c, source)

    def _deliver_watch(self, c: HarnessConsumer, source: str) -> None:
        self._record(c, f"watch:{source}")
        self._apply(c, c.machine.watch_fired(self.clock.now_ms(), source))

    def _on_new_session(self, name: str) -> None:
        c = self.consumers.get(name)
        if c is None:
            return
        if c.client.session_id is not None:
            c.sessions.append(int(c.client.session_id))
        self._touch()
        if c.paused:
            c.queued.append(("new_session", ""))
        else:
            self._deliver_new_session(c)

    def _deliver_new_session(self, c: HarnessConsumer) -> None:
        self._record(c, "new_session")
        self._apply(c, c.machine.new_session(self.clock.now_ms()))

    def _on_state(self, name: str, state: str, session_id: str) -> None:
        c = self.consumers.get(name)
        if c is not None:
            self._record(c, f"state:{state}", fields={"session_id": session_id})

    def _describe(self, snap: Snapshot) -> str:
        return (
            f"owners={dict(sorted(snap.owners.items()))} "
            f"expected={dict(sorted(snap.expected_range().items()))} states={self.states()}"
        )


def run_harness(
    connect: str,
    scenario: Callable[[LegacyHarness], Awaitable[None]],
    *,
    timeout: float = 50.0,
    **kwargs: Any,
) -> None:
    """Run ``scenario`` on a fresh :class:`LegacyHarness` in a new loop; always close it."""

    async def main() -> None:
        h = LegacyHarness(connect, **kwargs)
        try:
            await asyncio.wait_for(scenario(h), timeout)
        except BaseException:
            await h.close(check=False)
            raise
        await h.close()

    asyncio.run(main())
