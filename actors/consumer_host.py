"""Consumer hosts: one Ray actor (one process) holding many emulated consumers.

A host runs an asyncio loop. Every tick it lets each consumer's state machine
see the time, advances each stream's processing, and sends the fetches of
*all* its consumers to each leader broker in one Ray call per broker. Each
legacy consumer has a ZooKeeper session of its own; ZooKeeper callbacks come in
on kazoo's threads and are handed to the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import random
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import ray

from actors.context import RunContext, process_usage
from actors.legacy_member import LegacyMember
from actors.metadata import LeaderCache
from actors.placement import Locatable
from emulator.events import EventKind
from emulator.legacy.config import LegacyConsumerConfig
from emulator.legacy.consumer import LegacyConsumer
from emulator.scenario.faults import PARTITION_TARGETS

TopicPartition = tuple[str, int]
TICK_S = 0.02
# Emulator knob (not Kafka): how many messages one fetch returns at most. Kafka
# bounds a fetch by fetch.message.max.bytes (1 MiB); at 1 KiB a message that is
# 1024 messages.
MESSAGE_BYTES = 1024


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
    """

    name: str
    consumer_id: str
    subscription: dict[str, int]
    use_proxy: bool = False
    index: int = 0
    bootstrap: int = 0
    zk_latency_ms: float = 0.0


def _restamp(consumer_id: str, now_ms: int) -> str:
    """A 0.8 consumer id ``<group>_<host>-<ms>-<hex>`` with its ``<ms>`` set to ``now_ms``.

    An id without that shape (a ``consumer.id`` config) is kept as it is.
    """
    head, sep, rest = consumer_id.rpartition("-")
    stem, sep2, ms = head.rpartition("-")
    if not (sep and sep2 and ms.isdigit() and len(rest) == 8):
        return consumer_id
    return f"{stem}-{now_ms}-{rest}"


class ConsumerHostCore(Locatable):
    """A host of emulated legacy consumers, without Ray.

    Args:
        index: host number (actor ``host-<index>``).
        ctx: the run.
        brokers: broker id -> actor handle.
    """

    def __init__(self, index: int, ctx: RunContext, brokers: dict[int, Any]) -> None:
        self.index = index
        self.ctx = ctx
        self.brokers = brokers
        # Partition leaders and broker handles (shares and refreshes self.brokers).
        self.leader_cache = LeaderCache(ctx, self.brokers)
        self.clock = ctx.clock()
        self.events = ctx.writer(f"host-{index}", self.clock)
        self.config = LegacyConsumerConfig.from_kafka(ctx.kafka)
        self.members: dict[str, Any] = {}  # LegacyMember or ModernMember
        self.gone: dict[str, str] = {}  # name -> left | crashed
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop = False
        self._fetch_inflight: set[int] = set()
        # Fetch sessions (KIP-227), one per broker: every fetch outstanding
        # has a slot; a fetch that finds no data stays parked at the broker
        # (its long poll), so a tick sends only new and withdrawn fetches.
        self._session_key = f"host-{index}"
        self._slot_seq = 0
        # slot -> (member, partition, position epoch, broker)
        self._slots: dict[int, tuple[Any, TopicPartition, int, int]] = {}
        self._member_slots: dict[int, dict[TopicPartition, int]] = {}  # id(member) -> tp -> slot
        self._fetch_adds: dict[int, list[tuple[int, str, int, int | None, str, int]]] = {}
        self._fetch_withdrawn: dict[int, list[int]] = {}
        self._outstanding: dict[int, int] = defaultdict(int)  # broker -> slots there
        self._sessions_open: set[int] = set()
        self.processed_max: dict[TopicPartition, int] = {}
        self.processed = 0
        self.max_fetch = max(
            1, int(ctx.kafka.get("fetch.message.max.bytes", 1048576)) // MESSAGE_BYTES
        )
        self.max_chunks = int(ctx.kafka.get("queued.max.message.chunks", 2))
        self.session_timeout_s = ctx.scaled_s(self.config.zookeeper_session_timeout_ms)
        # Emulator bound (ZkClient waits forever): a request waits this long for a
        # reconnect before failing, so no wait is unbounded.
        self.retry_deadline_s = max(30.0, 20 * self.session_timeout_s)
        self.tick_lag_max_ms = 0.0
        # Every legacy member's ZooKeeper requests and watch notifications, summed.
        self.zk_ops: Any = None
        if ctx.protocol == "zookeeper":
            from zk_registry.client import ZkOpCounter

            self.zk_ops = ZkOpCounter()
        self._outbox: dict[int, list[Any]] = defaultdict(list)
        self._awaiting: dict[int, tuple[int, Any]] = {}
        self._group_inflight: set[int] = set()
        self._bg: set[asyncio.Task[None]] = set()
        # Faults (see the "faults" section).
        self.specs: dict[str, MemberSpec] = {}
        self.partitions_per_topic: dict[str, int] = dict(ctx.partitions_per_topic)
        self.metadata_max_age_ms = float(str(ctx.kafka.get("metadata.max.age.ms", 300000)))
        self._metadata_due: dict[str, float] = {}
        self._restarts: dict[str, int] = defaultdict(int)
        self._faults: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._stopping = False
        if ctx.protocol != "zookeeper":
            # A modern consumer's poll() returns at most max.poll.records.
            self.max_fetch = min(self.max_fetch, int(str(ctx.kafka.get("max.poll.records", 500))))
            self.fetch_max_wait_ms = float(str(ctx.kafka.get("fetch.max.wait.ms", 500)))
        else:
            self.fetch_max_wait_ms = float(str(ctx.kafka.get("fetch.wait.max.ms", 100)))

    # ---------------------------------------------------------------- events

    def _emit(self, kind: EventKind, **fields: Any) -> None:
        fields.setdefault("group", self.ctx.group)
        self.events.emit(kind, **fields)

    # ------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Start the tick loop."""
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.ensure_future(self._run())

    async def add_consumers(self, specs: list[MemberSpec]) -> list[str]:
        """Create and start consumers; return their names."""
        from zk_registry.client import ZkClient, asyncio_dispatch
        from zk_registry.legacy_driver import LegacyZkDriver
        from zk_registry.proxy import FaultProxy

        if self.ctx.protocol == "zookeeper":
            # consumerIdString is made when the connector is constructed, with
            # System.currentTimeMillis: the wall clock of the consumer's creation.
            now_ms = int(time.time() * 1000)
            specs = [replace(s, consumer_id=_restamp(s.consumer_id, now_ms)) for s in specs]
        for spec in specs:
            self.specs[spec.name] = spec
            self.gone.pop(spec.name, None)
        if self.ctx.protocol != "zookeeper":
            return [self._add_modern(spec) for spec in specs]
        loop = asyncio.get_running_loop()

        gate = asyncio.Semaphore(16)  # emulator bound: connects in flight at once

        async def connect_one(spec: MemberSpec) -> tuple[Any, Any, list[LegacyMember]]:
            async with gate:
                return await connect_unbounded(spec)

        async def connect_unbounded(spec: MemberSpec) -> tuple[Any, Any, list[LegacyMember]]:
            proxy = None
            connect = self.ctx.zk_connect
            if spec.use_proxy or spec.zk_latency_ms > 0:
                proxy = FaultProxy(list(self.ctx.zk_hosts))
                proxy.latency_s = self.ctx.scaled_s(spec.zk_latency_ms)
                await proxy.start()
                chroot = connect[connect.index("/") :] if "/" in connect else ""
                connect = proxy.address + chroot
            box: list[LegacyMember] = []
            # Callbacks run on this loop (asyncio_dispatch), never on kazoo's threads.
            zk = ZkClient(
                connect,
                self.session_timeout_s,
                dispatch=asyncio_dispatch(loop),
                on_state=lambda st, sid, b=box: b and b[0].on_state(st, sid),
                on_new_session=lambda b=box: b and b[0].on_new_session(),
                counter=self.zk_ops,
                auth=self.ctx.zk_auth,
            )
            try:
                await zk.start_async()
            except BaseException:
                if proxy is not None:
                    await proxy.close()
                raise
            return zk, proxy, box

        # Sessions connect concurrently, then every member starts in the same
        # instant: a burst of joins reaches ZooKeeper together, as it would.
        links = await asyncio.gather(*(connect_one(s) for s in specs), return_exceptions=True)
        failed = [r for r in links if isinstance(r, BaseException)]
        if failed:
            for r in links:
                if not isinstance(r, BaseException):
                    with contextlib.suppress(Exception):
                        await r[0].stop_async()
                    if r[1] is not None:
                        await r[1].close()
            raise failed[0]
        started: list[str] = []
        for spec, link in zip(specs, links, strict=True):
            assert not isinstance(link, BaseException)
            zk, proxy, box = link
            machine = LegacyConsumer(
                member=spec.name,
                consumer_id=spec.consumer_id,
                group=self.ctx.group,
                subscription=spec.subscription,
                config=self.config,
            )
            driver = LegacyZkDriver(
                zk,
                self.ctx.group,
                spec.consumer_id,
                self.session_timeout_s,
                on_watch=lambda source, _ev, b=box: b and b[0].on_watch(source),
                retry_deadline_s=self.retry_deadline_s,
            )
            member = LegacyMember(
                spec.name, machine, zk, driver, self._emit, self.clock.now_ms, proxy
            )
            member.manual_commit = self.ctx.manual_commit
            box.append(member)
            member.on_unfetch = self._unfetch
            self.members[spec.name] = member
            negotiated = zk.negotiated_session_timeout_ms
            self._emit(
                EventKind.ZK_SESSION_STATE,
                member=spec.name,
                state="CONNECTED",
                member_id=spec.consumer_id,
                session_id=zk.session_id_hex,
                duration_ms=None if negotiated is None else negotiated / self.ctx.time_scale,
                detail=None
                if negotiated is None
                else f"negotiated session timeout {negotiated} wall ms",
            )
            member.apply(machine.start(self.clock.now_ms()))
            started.append(spec.name)
        return started

    def _add_modern(self, spec: MemberSpec) -> str:
        """Create and start a classic or KIP-848 member."""
        from actors.modern_member import ModernMember
        from actors.protocols import make_member_machine

        machine = make_member_machine(
            self.ctx.protocol,
            name=spec.name,
            group=self.ctx.group,
            topics=sorted(spec.subscription),
            kafka=dict(self.ctx.kafka),
            partitions_per_topic=dict(self.partitions_per_topic),
            assignor=self.ctx.assignor,
            static=self.ctx.static_membership,
            # A restarted member gets a fresh range, so a late answer to its
            # predecessor's request can never match one of its own.
            corr_start=(spec.index + 1) * 1_000_000_000 + self._restarts[spec.name] * 10_000_000,
            seed=self.ctx.seed,
            rebalance_listener=self.ctx.rebalance_listener,
        )
        box: list[Any] = []

        def send(broker: int, req: Any, b: list[Any] = box) -> None:
            self._outbox[broker].append(req)
            self._awaiting[req.corr] = (broker, b[0])

        member = ModernMember(
            spec.name, machine, self._emit, self.clock.now_ms, send, spec.bootstrap
        )
        member.manual_commit = self.ctx.manual_commit
        member.broker_ids = tuple(sorted(self.brokers))
        box.append(member)
        member.on_unfetch = self._unfetch
        self.members[spec.name] = member
        member.apply(machine.start(self.clock.now_ms()))
        return spec.name

    def _queued_for(self, member: Any) -> bool:
        """Whether any of ``member``'s requests still waits in the outbox."""
        mine = {corr for corr, (_b, m) in self._awaiting.items() if m is member}
        return any(r.corr in mine for reqs in self._outbox.values() for r in reqs)

    def _exchange_groups(self) -> None:
        """One group-request call per broker per tick (and for pending answers)."""
        brokers = set(self._outbox) | {b for b, _ in self._awaiting.values()}
        for broker in brokers:
            if broker in self._group_inflight:
                continue
            reqs = self._outbox.pop(broker, [])
            self._group_inflight.add(broker)
            task = asyncio.ensure_future(self._group_exchange(broker, reqs))
            self._bg.add(task)
            task.add_done_callback(self._bg.discard)

    async def _group_exchange(self, broker: int, reqs: list[Any]) -> None:
        try:
            handle = self.leader_cache.handle(broker)
            if handle is None:
                raise LookupError(f"no actor for broker {broker}")
            answers = await handle.group_exchange.remote(f"host-{self.index}", reqs)
        except Exception:
            self.leader_cache.failed(broker)
            answers = None
        finally:
            self._group_inflight.discard(broker)
        if answers is None:  # the broker is gone: every request to it is lost
            for req in reqs:
                _b, member = self._awaiting.pop(req.corr, (None, None))
                if member is not None:
                    member.on_unreachable(req)
            return
        for resp in answers:
            _b, member = self._awaiting.pop(resp.corr, (None, None))
            if member is not None and member.alive:
                member.on_response(resp)

    async def leave(self, name: str) -> bool:
        """Graceful shutdown of one consumer: commit, then leave or close its session."""
        member = self.members.get(name)
        if member is None:
            return False
        if self.ctx.protocol != "zookeeper":
            # The application finishes the batch poll() gave it, then calls close().
            await self._drain(member)
            member.close()
            deadline = time.monotonic() + 30.0
            while not member.machine.closed and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            # close() returns once LeaveGroup is on its way: let the host send it.
            while self._queued_for(member) and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            await self._retire(name, "left")
            return True
        member.sync_positions()
        member.apply(member.machine.shutdown(self.clock.now_ms()))
        deadline = time.monotonic() + 10 * max(1.0, self.session_timeout_s)
        while member.machine.state.value != "closed" and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        # shutdown() committed past each stream's message in hand; the
        # application thread finishes that message before the process ends.
        await self._drain(member)
        await self._retire(name, "left")
        return True

    async def _drain(self, member: Any) -> None:
        """Wait (bounded) until ``member``'s application has finished what it holds.

        It takes no new batch meanwhile. A paused member holds its batch until
        it wakes: the wait is bounded by the longest batch in hand plus a margin.
        """
        member.draining = True
        now = self.clock.now_ms()
        left_ms = max(
            (s.current.done_ms - now for s in member.streams.values() if s.current is not None),
            default=0.0,
        )
        deadline = time.monotonic() + self.ctx.scaled_s(max(0.0, left_ms)) + 2.0
        while member.in_hand() and member.alive and time.monotonic() < deadline:
            await asyncio.sleep(0.01)

    async def crash(self, name: str) -> bool:
        """Kill one consumer with no goodbye: its session expires on the server."""
        member = self.members.get(name)
        if member is None:
            return False
        # A frozen process processed nothing after its pause began.
        at = member.paused_at if member.paused and member.paused_at is not None else None
        member.abandon(
            self.clock.now_ms() if at is None else at,
            per_message=self.ctx.protocol == "zookeeper",
        )
        member.kill()
        self._emit(EventKind.CONSUMER_CRASHED, member=name, member_id=member.member_id or None)
        if getattr(member, "proxy", None) is not None:
            from zk_registry.proxy import ProxyMode

            member.proxy.set_mode(ProxyMode.DOWN)
        await self._retire(name, "crashed")
        return True

    async def _retire(self, name: str, how: str) -> None:
        member = self.members.pop(name, None)
        if member is None:  # retired meanwhile (a restart and a stop both leaving it)
            return
        member.alive = False
        self._unfetch_all(member)
        self.gone[name] = how
        for tp, end in member.high_water.items():
            self.processed_max[tp] = max(self.processed_max.get(tp, 0), end)
        if self.ctx.protocol != "zookeeper":
            mine = {corr for corr, (_b, m) in self._awaiting.items() if m is member}
            for corr in mine:
                del self._awaiting[corr]
            if how == "crashed":  # a dead process sends nothing more
                for broker, reqs in list(self._outbox.items()):
                    self._outbox[broker] = [r for r in reqs if r.corr not in mine]
            return
        member.driver.stop_watches()
        # After a crash the proxy is down, so closing the client sends no
        # closeSession: the server expires the session after its timeout.
        # Without a proxy a crash would look like a clean close, so the
        # orchestrator gives every member it will crash a proxy.
        with contextlib.suppress(Exception):
            await asyncio.wait_for(member.zk.stop_async(), 10.0)
        if member.proxy is not None:
            await member.proxy.close()

    async def stop(self) -> dict[str, Any]:
        """Shut every consumer down gracefully, stop the loop, close the log."""
        self._stopping = True
        for task in self._faults.values():
            task.cancel()
        self._faults.clear()
        # Every consumer shuts down at once, as the processes of a stopped
        # application would (one after the other, a group of thousands would
        # take minutes and rebalance after every leave).
        gate = asyncio.Semaphore(64)  # emulator bound: shutdowns in flight at once

        async def leave_one(name: str) -> None:
            async with gate:
                await self.leave(name)

        await asyncio.gather(*(leave_one(n) for n in list(self.members)), return_exceptions=True)
        self._stop = True
        if self._task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._task, 5.0)
        stats = await self.stats()
        self.events.close()
        return stats

    # ------------------------------------------------------------------ loop

    async def _run(self) -> None:
        next_tick = time.monotonic()
        while not self._stop:
            now = self.clock.now_ms()
            lag = (time.monotonic() - next_tick) * 1000.0
            self.tick_lag_max_ms = max(self.tick_lag_max_ms, lag)
            for member in list(self.members.values()):
                member.poll(now)
                n = member.process(now, self.ctx.processing_ms_per_message)
                self.processed += n
            if not self._stopping:  # shutting down: leave the group, fetch nothing more
                self._send_fetches()
            if self._outbox or self._awaiting:
                self._exchange_groups()
            self._housekeeping(now)
            next_tick += TICK_S
            mono = time.monotonic()
            if next_tick < mono:  # behind: skip the missed ticks, do not run them back to back
                next_tick = mono + TICK_S
            await asyncio.sleep(next_tick - mono)

    def _send_fetches(self) -> None:
        """Give every position that wants a fetch a slot; send each broker's changes.

        A broker with fetches parked always has a call outstanding (its long
        poll), so data there is answered as soon as it is committed.
        """
        reset = self.config.auto_offset_reset
        self.leader_cache.maybe_refresh()
        for member in self.members.values():
            wanted = member.fetch_requests(self.max_chunks)
            if not wanted:
                continue
            mine = self._member_slots.setdefault(id(member), {})
            for tp, offset, epoch in wanted:
                leader = self.leader_cache.leader(tp)
                if leader is None:
                    member.refetch(tp, epoch)
                    continue
                old = mine.get(tp)
                if old is not None:
                    self._withdraw(old)
                self._slot_seq += 1
                slot = self._slot_seq
                mine[tp] = slot
                self._slots[slot] = (member, tp, epoch, leader)
                self._outstanding[leader] += 1
                self._fetch_adds.setdefault(leader, []).append(
                    (slot, tp[0], tp[1], offset, reset, self.max_fetch)
                )
        for broker, n in list(self._outstanding.items()):
            if broker in self._fetch_inflight:
                continue
            if n <= 0 and broker not in self._fetch_withdrawn:
                del self._outstanding[broker]
                continue
            adds = self._fetch_adds.pop(broker, [])
            withdrawn = self._fetch_withdrawn.pop(broker, [])
            self._fetch_inflight.add(broker)
            task = asyncio.ensure_future(self._fetch(broker, adds, withdrawn))
            self._bg.add(task)  # a strong reference until it is done
            task.add_done_callback(self._bg.discard)

    def _drop_slot(self, slot: int) -> tuple[Any, TopicPartition, int, int] | None:
        entry = self._slots.pop(slot, None)
        if entry is None:
            return None
        member, tp, _epoch, broker = entry
        mine = self._member_slots.get(id(member))
        if mine is not None and mine.get(tp) == slot:
            del mine[tp]
        self._outstanding[broker] -= 1
        return entry

    def _withdraw(self, slot: int) -> None:
        """Take an outstanding fetch back (its position was stopped or replaced)."""
        entry = self._drop_slot(slot)
        if entry is not None:
            self._fetch_withdrawn.setdefault(entry[3], []).append(slot)

    def _unfetch(self, member: Any, tps: list[TopicPartition]) -> None:
        """``member`` dropped these positions while their fetches were outstanding."""
        mine = self._member_slots.get(id(member))
        if mine:
            for tp in tps:
                slot = mine.get(tp)
                if slot is not None:
                    self._withdraw(slot)

    def _unfetch_all(self, member: Any) -> None:
        """Withdraw every fetch of a member that is gone."""
        mine = self._member_slots.pop(id(member), None)
        if mine:
            for slot in list(mine.values()):
                self._withdraw(slot)

    async def _fetch(
        self,
        broker: int,
        adds: list[tuple[int, str, int, int | None, str, int]],
        withdrawn: list[int],
    ) -> None:
        new_session = broker not in self._sessions_open
        try:
            handle = self.leader_cache.handle(broker)
            if handle is None:
                raise LookupError(f"no actor for broker {broker}")
            result = await handle.fetch_session.remote(
                self._session_key, new_session, adds, withdrawn, self.fetch_max_wait_ms
            )
        except Exception:  # a dead broker: refresh the leaders, fetch again next tick
            result = None
            self.leader_cache.failed(broker)
        finally:
            self._fetch_inflight.discard(broker)
        if result is None:
            # The session is lost with every fetch in it: the positions are
            # asked again (in a new session, from another leader if need be).
            self._sessions_open.discard(broker)
            self._fetch_adds.pop(broker, None)
            self._fetch_withdrawn.pop(broker, None)
            for slot in [s for s, entry in self._slots.items() if entry[3] == broker]:
                member, tp, epoch, _b = self._slots[slot]
                self._drop_slot(slot)
                member.refetch(tp, epoch)
            return
        self._sessions_open.add(broker)
        for slot, start, end in result:
            entry = self._drop_slot(slot)
            if entry is None:
                continue  # withdrawn meanwhile
            member, tp, epoch, _b = entry
            if start < 0:
                self.leader_cache.not_leader(tp)  # NotLeaderForPartition
            if member.fetch_cut:
                member.refetch(tp, epoch)  # cut off the brokers: the answer is lost
                continue
            member.fetched(tp, start, end, epoch)

    # ----------------------------------------------------------------- faults
    #
    # Durations are in emulated ms. Each fault applied to a member is recorded
    # as FAULT_INJECTED (reason = the fault kind, detail = JSON of its
    # parameters) and, when a timed fault ends, FAULT_CLEARED; a subscription
    # change of a modern member is instantaneous and has no FAULT_CLEARED.

    def _housekeeping(self, now: float) -> None:
        """Per tick: metadata refreshes that are due, and the event log's flush.

        The log is written out at the end of every tick, before the tick's
        requests leave (they are sent once the loop yields): what a member did
        is on disk before any commit that says it did it, so a killed host
        never leaves a committed offset whose processing the log lost.
        """
        if self._metadata_due:
            for name, due in list(self._metadata_due.items()):
                member = self.members.get(name)
                if member is None:
                    del self._metadata_due[name]
                elif now >= due and not member.paused:
                    del self._metadata_due[name]
                    member.metadata_refresh(dict(self.partitions_per_topic))
        self.events.flush()

    def _fault(
        self,
        kind: str,
        member: str,
        span_ms: float | None,
        /,
        *,
        cleared: bool = False,
        **detail: Any,
    ) -> None:
        """Record a fault (``detail`` becomes the event's JSON detail)."""
        m = self.members.get(member)
        self._emit(
            EventKind.FAULT_CLEARED if cleared else EventKind.FAULT_INJECTED,
            reason=kind,
            member=member,
            member_id=(m.member_id or None) if m is not None else None,
            duration_ms=None if span_ms is None else float(span_ms),
            detail=json.dumps(detail, sort_keys=True, default=str),
        )
        self.events.flush()  # a fault is worth having on disk before what follows

    def _is_live(self, name: str, member: Any) -> bool:
        """Whether ``member`` is still the live member called ``name``."""
        return self.members.get(name) is member

    def _after(self, key: tuple[str, str], delay_ms: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the loop ``delay_ms`` emulated ms from now (replaces ``key``'s timer)."""
        old = self._faults.pop(key, None)
        if old is not None:
            old.cancel()

        async def later() -> None:
            await asyncio.sleep(self.ctx.scaled_s(delay_ms))
            if self._faults.get(key) is task:
                del self._faults[key]
            fn()

        task = asyncio.ensure_future(later())
        self._faults[key] = task

    def _hold_proxy(self, member: Any, why: str) -> bool:
        """Blackhole a legacy member's ZooKeeper traffic for ``why``; False without a proxy."""
        from zk_registry.proxy import ProxyMode

        proxy = getattr(member, "proxy", None)
        if proxy is None:
            return False
        member.proxy_holders.add(why)
        proxy.set_mode(ProxyMode.BLACKHOLE)
        return True

    def _release_proxy(self, member: Any, why: str) -> None:
        from zk_registry.proxy import ProxyMode

        proxy = getattr(member, "proxy", None)
        if proxy is None:
            return
        member.proxy_holders.discard(why)
        if not member.proxy_holders and member.alive:
            proxy.set_mode(ProxyMode.PASS)

    async def pause(self, name: str, duration_ms: float) -> bool:
        """A process pause (a long GC) of one member for ``duration_ms``.

        Everything of it stops: no poll, heartbeat or group request, no
        fetching, no processing (the batch in hand keeps its remaining time
        for after the wake). A legacy member's ZooKeeper connection goes
        through its fault proxy, set to BLACKHOLE for the pause, so the server
        expires its session for real once ``zookeeper.session.timeout.ms``
        passes without a ping (the member needs ``MemberSpec.use_proxy``);
        the ZooKeeper callbacks that arrive meanwhile are delivered in order
        after the wake. Answers to a modern member's requests are held the
        same way. On waking the member acts on what it last knew until the
        protocol tells it otherwise.

        Returns:
            False if the member is not here or already paused.
        """
        member = self.members.get(name)
        if member is None or member.paused or duration_ms <= 0:
            return False
        member.freeze(self.clock.now_ms())
        detail: dict[str, Any] = {"duration_ms": duration_ms}
        if self.ctx.protocol == "zookeeper":
            detail["zookeeper"] = (
                "blackholed"
                if self._hold_proxy(member, "pause")
                else "no fault proxy: the session stays alive"
            )
        self._fault("pause", name, duration_ms, **detail)

        def wake(m: Any = member) -> None:
            if not self._is_live(name, m):
                return  # left or crashed meanwhile
            self._release_proxy(m, "pause")
            now = self.clock.now_ms()
            paused_at = m.paused_at if m.paused_at is not None else now
            # The wake is recorded before thaw() hands over what the pause held
            # (ZooKeeper callbacks, the frozen batch's end), so that every event
            # caused by the wake comes after its mark.
            self._fault(
                "pause", name, max(0.0, now - paused_at), cleared=True, duration_ms=duration_ms
            )
            m.thaw(now)

        self._after((name, "pause"), duration_ms, wake)
        return True

    async def slow(self, name: str, duration_ms: float, processing_ms_per_message: float) -> bool:
        """Processing costs ``processing_ms_per_message`` for this member for ``duration_ms``.

        The cost applies to every batch the member starts in the window (a
        batch's end is fixed when it starts). A modern member whose batch
        outlasts ``max.poll.interval.ms`` is handled by its state machine: the
        poll timer expires and the client leaves the group (classic dynamic
        members send LeaveGroup, B5; KIP-848 members send the leave heartbeat).
        """
        member = self.members.get(name)
        if member is None or duration_ms <= 0 or processing_ms_per_message < 0:
            return False
        member.cost_override = float(processing_ms_per_message)
        self._fault(
            "slow",
            name,
            duration_ms,
            duration_ms=duration_ms,
            processing_ms_per_message=processing_ms_per_message,
        )

        def heal(m: Any = member) -> None:
            if not self._is_live(name, m):
                return
            m.cost_override = None
            self._fault("slow", name, duration_ms, cleared=True)

        self._after((name, "slow"), duration_ms, heal)
        return True

    async def partition(self, names: list[str], target: str, duration_ms: float) -> bool:
        """Cut these members off ``target`` for ``duration_ms``, then heal.

        ``zookeeper``: a legacy member's session traffic is blackholed by its
            proxy (the server expires the session if the cut outlasts
            ``zookeeper.session.timeout.ms``; kazoo reconnects after the heal
            and, after an expiry, ``handleNewSession`` runs). Modern consumers
            do not talk to ZooKeeper: not applied.
        ``coordinator``: a modern member's requests to its group coordinator
            get no answer (FindCoordinator too if it goes there); each fails
            after ``request.timeout.ms`` as the member machine expects (the
            classic member times its requests out itself, the KIP-848 member
            is told). Fetches still work. The 0.8 consumer has no
            coordinator: not applied.
        ``brokers``: group requests to every broker are lost in the same way,
            and the member fetches nothing (its fetches are not sent).

        Returns:
            True if the partition was applied to every named member.
        """
        if target not in PARTITION_TARGETS or duration_ms <= 0:
            return False
        legacy = self.ctx.protocol == "zookeeper"
        all_applied = True
        for name in names:
            member = self.members.get(name)
            if member is None:
                all_applied = False
                continue
            note = None
            if target == "zookeeper":
                if not legacy:
                    note = "a modern consumer does not talk to ZooKeeper"
                elif not self._hold_proxy(member, "partition"):
                    note = "no fault proxy: the session cannot be cut"
            elif target == "coordinator":
                if legacy:
                    note = "the 0.8 consumer has no group coordinator"
                else:
                    member.cut_coordinator = True
                    if member.known_coordinator is None:
                        member.known_coordinator = getattr(member.machine, "coordinator", None)
            else:
                member.fetch_cut = True
                if not legacy:
                    member.cut = None
            applied = note is None
            all_applied = all_applied and applied
            detail: dict[str, Any] = {"target": target, "duration_ms": duration_ms}
            if note is not None:
                detail["skipped"] = note
            elif target == "coordinator":
                detail["broker"] = member.known_coordinator
            self._fault("network_partition", name, duration_ms, **detail)
            if not applied:
                continue

            def heal(name: str = name, m: Any = member) -> None:
                if not self._is_live(name, m):
                    return
                if target == "zookeeper":
                    self._release_proxy(m, "partition")
                elif target == "coordinator":
                    m.cut_coordinator = False
                else:
                    m.fetch_cut = False
                    if not legacy:
                        m.cut = set()
                self._fault("network_partition", name, duration_ms, cleared=True, target=target)

            self._after((name, f"partition:{target}"), duration_ms, heal)
        return all_applied

    async def restart(self, name: str, downtime_ms: float) -> bool:
        """Graceful shutdown of a member, and after ``downtime_ms`` a new one of the same name.

        The shutdown is :meth:`leave`'s: a legacy consumer closes its session;
        a classic dynamic member sends LeaveGroup, a static one does not
        (2.3+); a KIP-848 member sends the leave heartbeat (epoch -1, or -2
        when static). The new member has the same name and spec (the same
        ``group.instance.id`` when static, so a static member back within the
        session timeout takes its old place without a rebalance); a legacy
        consumer gets a new consumer id, as a restarted JVM does. Returns as
        soon as the restart is under way; FAULT_CLEARED marks the new start.
        """
        spec = self.specs.get(name)
        if name not in self.members or spec is None or downtime_ms < 0:
            return False
        self._fault(
            "restart",
            name,
            downtime_ms,
            downtime_ms=downtime_ms,
            static=self.ctx.static_membership and self.ctx.protocol != "zookeeper",
        )
        self._spawn(self._restart(name, spec, downtime_ms, "restart"))
        return True

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._bg.add(task)
        task.add_done_callback(self._bg.discard)

    async def _restart(self, name: str, spec: MemberSpec, downtime_ms: float, kind: str) -> None:
        await self.leave(name)
        if downtime_ms > 0:
            await asyncio.sleep(self.ctx.scaled_s(downtime_ms))
        if self._stopping or name in self.members:
            return
        self._restarts[name] += 1
        if self.ctx.protocol == "zookeeper":
            spec = replace(spec, consumer_id=self._new_consumer_id(spec))
        await self.add_consumers([spec])
        self._fault(kind, name, downtime_ms, cleared=True, subscription=spec.subscription)

    def _new_consumer_id(self, spec: MemberSpec) -> str:
        """A restarted 0.8 consumer's id: same host, a new timestamp and UUID."""
        import socket

        from zk_registry.layout import make_consumer_id

        rest = spec.consumer_id.removeprefix(f"{self.ctx.group}_")
        parts = rest.rsplit("-", 2)
        host = parts[0] if len(parts) == 3 else socket.gethostname()
        rng = random.Random(f"{self.ctx.seed}/{spec.name}/restart/{self._restarts[spec.name]}")
        return make_consumer_id(
            self.ctx.group, host, int(time.time() * 1000), f"{rng.getrandbits(64):016x}"
        )

    async def subscribe(self, names: list[str], topics: list[str]) -> bool:
        """Change these members' subscription to ``topics``.

        Classic members rejoin with the new subscription in their JoinGroup
        metadata (``subscribe()`` with another set makes
        ``rejoinNeededOrPending`` true); KIP-848 members send the new
        ``SubscribedTopicNames`` in their next heartbeat. A 0.8
        ``ZookeeperConsumerConnector`` cannot change its topics once its
        streams are created: this is emulated as a restart with downtime 0
        and the new subscription (same streams per topic as before), i.e. a
        graceful shutdown and a new consumer.

        Returns:
            True if every named member was here.
        """
        if not topics:
            return False
        ok = True
        for name in names:
            member = self.members.get(name)
            spec = self.specs.get(name)
            if member is None or spec is None:
                ok = False
                continue
            streams = max(spec.subscription.values(), default=1)
            new = replace(spec, subscription={t: streams for t in sorted(set(topics))})
            self.specs[name] = new
            if self.ctx.protocol == "zookeeper":
                self._fault("subscribe", name, 0.0, topics=sorted(set(topics)), emulated="restart")
                self._spawn(self._restart(name, new, 0.0, "subscribe"))
            else:
                self._fault("subscribe", name, None, topics=sorted(set(topics)))
                member.subscribe(sorted(set(topics)))
        return ok

    async def update_partitions(
        self,
        topic: str,
        count: int,
        leaders: dict[TopicPartition, int] | None = None,
    ) -> None:
        """``topic`` now has ``count`` partitions.

        Modern members learn it at their next metadata refresh: every
        ``metadata.max.age.ms`` from their start (the classic leader then
        rejoins if what it assigned changed; a KIP-848 coordinator handles
        it on its side). Legacy consumers learn it through their topic watch.
        ``leaders`` (an emulator addition) gives the new partitions' leaders
        for the fetch path.
        """
        self.partitions_per_topic[topic] = max(count, self.partitions_per_topic.get(topic, 0))
        if leaders:
            self.ctx.leaders.update(leaders)
        if self.ctx.protocol == "zookeeper":
            return
        now = self.clock.now_ms()
        age = max(1.0, self.metadata_max_age_ms)
        for name, member in self.members.items():
            k = math.floor((now - member.started_ms) / age) + 1
            self._metadata_due[name] = member.started_ms + k * age

    async def sessions(self) -> dict[str, int]:
        """Each live legacy member's ZooKeeper session id."""
        out: dict[str, int] = {}
        for name, m in self.members.items():
            zk = getattr(m, "zk", None)
            sid = None if zk is None else zk.session_id
            if sid is not None:
                out[name] = int(sid)
        return out

    async def expire_session(self, name: str) -> bool:
        """Expire a consumer's session on the server, as a long network cut does."""
        from zk_registry.faults import expire_session

        member = self.members.get(name)
        if member is None:
            return False
        cid = member.zk.client_id
        if cid is None:
            return False
        sid, pwd = cid
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(
            None, lambda: expire_session(",".join(self.ctx.zk_hosts), sid, pwd)
        )
        return True

    # ------------------------------------------------------------------ stats

    async def stats(self) -> dict[str, Any]:
        """Counters for the live display and the summary."""
        rebalances = attempts = conflicts = gave_up = owned = 0
        states: dict[str, int] = defaultdict(int)
        for m in self.members.values():
            st = m.machine.stats
            rebalances += st.rebalances
            attempts += getattr(st, "attempts", 0) or getattr(st, "joins", 0)
            conflicts += getattr(st, "conflicts", 0)
            gave_up += getattr(st, "gave_up", 0)
            owned += len(m.machine.owned)
            state = m.machine.state
            states[str(getattr(state, "value", state))] += 1
        return {
            "members": len(self.members),
            "processed": self.processed,
            "rebalances": rebalances,
            "attempts": attempts,
            "conflicts": conflicts,
            "gave_up": gave_up,
            "owned": owned,
            "states": dict(states),
            "tick_lag_max_ms": self.tick_lag_max_ms,
            **(
                {}
                if self.zk_ops is None
                else dict(
                    zip(
                        ("zk_reads", "zk_writes", "zk_watch_notifications"),
                        self.zk_ops.snapshot(),
                        strict=True,
                    )
                )
            ),
            **process_usage(),
        }

    async def progress(self) -> dict[TopicPartition, int]:
        """The highest processed offset end of each partition on this host."""
        hw = dict(self.processed_max)
        for m in self.members.values():
            for tp, end in m.high_water.items():
                hw[tp] = max(hw.get(tp, 0), end)
        return hw

    async def owners(self) -> dict[str, list[TopicPartition]]:
        """Each live member's owned partitions (its in-memory topicRegistry)."""
        return {n: sorted(m.machine.owned) for n, m in self.members.items()}

    def set_origin(self, origin_wall: float) -> None:
        """Fix the run's emulated time 0 (called once every actor is up)."""
        self.clock.rebase(origin_wall)


ConsumerHostActor = ray.remote(num_cpus=0)(ConsumerHostCore)
