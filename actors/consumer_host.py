"""Consumer hosts: one Ray actor (one process) holding many emulated consumers.

The members, their tick, the fetch sessions and the fault effects are the
core's (:class:`emulator.host.core.HostCore`, :class:`emulator.host.faults.HostFaults`).
This actor gives them what only it has: an asyncio loop that ticks every
:data:`TICK_S` wall seconds, the Ray calls to brokers (the core's transport),
timers, and each legacy consumer's ZooKeeper session (its own, so its
ephemeral nodes live and expire alone), whose callbacks kazoo hands to the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
from collections.abc import Callable, Coroutine
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any

from actors.context import RunContext, process_usage
from actors.io import ActorIO, RealIO, ZkLink
from actors.legacy_member import LegacyMember
from actors.locate import Locatable
from actors.metadata import LeaderCache
from emulator.broker.messages import SessionAnswer
from emulator.clock import ScaledClock
from emulator.events import EventKind
from emulator.host.core import HostConfig, HostCore, Member, MemberSpec, restamp
from emulator.host.faults import HostFaults
from emulator.host.fetch_client import FetchCall
from emulator.host.modern_shell import ModernShell
from emulator.host.share_fetch_client import ShareCall
from emulator.legacy.consumer import LegacyConsumer
from emulator.modern.messages import GroupRequest
from emulator.protocols import spec as protocol_spec
from emulator.scenario.faults import switched_protocol
from emulator.topic_regex import WHITELIST, FilterKind

if TYPE_CHECKING:
    from zk_registry.client import ZkClient, ZkOpCounter

TopicPartition = tuple[str, int]
TICK_S = 0.02

__all__ = ["TICK_S", "ConsumerHostCore", "TickTime"]


class TickTime:
    """The emulated time a host's members see: a tick's own instant, not when it ran.

    The host's loop ticks every :data:`TICK_S` wall seconds on a fixed grid, and
    a tick runs a little after its instant (the loop's wake-up lag, other
    callbacks, CPU). A member that sends a heartbeat at a tick schedules the
    next one from the time it is told; told the late time, the next heartbeat
    falls just after a grid instant and waits a whole tick more, so every
    interval slipped by up to a tick (about 18 ms per 3 s interval measured on
    the real engine, against 0 on the sim, whose loop wakes on the instant).
    Kafka's heartbeat thread sleeps until the deadline itself, so the slip is
    the emulator's. A tick is therefore told the emulated time of its grid
    instant; everything between ticks (answers, watches, faults) is told the
    clock's reading. The time told never goes backwards: a tick that runs after
    an answer already read a later time is told that time. (An emulator
    choice: README, fidelity.)

    Args:
        clock: the host's clock.
    """

    def __init__(self, clock: ScaledClock) -> None:
        self.clock = clock
        self.seen_ms = -math.inf

    def now_ms(self) -> float:
        """The clock's reading (for everything outside a tick)."""
        now = self.clock.now_ms()
        if now > self.seen_ms:
            self.seen_ms = now
        return now

    def at_tick(self, instant_s: float) -> float:
        """The time a tick due at ``instant_s`` (the loop's clock) is told.

        A tick that runs on its instant (the sim's loop, or a real loop within
        a microsecond) is told the clock's reading itself.
        """
        if self.clock.mono() - instant_s < 1e-6:
            return self.now_ms()
        # On a binary grid of 1/1024 ms, so that a deadline set from it (an
        # integer ms later, as Kafka's settings are) is exact and a later
        # instant an integer ms on is not read a float rounding short of it.
        grid = round(self.clock.ms_at(instant_s) * 1024.0) / 1024.0
        told = max(grid, self.seen_ms)
        self.seen_ms = told
        return told


class ConsumerHostCore(Locatable):
    """A host of emulated consumers, without Ray (:mod:`actors.remote` wraps it for Ray).

    Args:
        index: host number (actor ``host-<index>``).
        ctx: the run.
        brokers: broker id -> actor handle.
        io: its members' ZooKeeper sessions and fault links, session expiry,
            broker look-ups, wall clock, host name and event tap (default
            :class:`~actors.io.RealIO`: kazoo, a TCP proxy, Ray, the machine's).
    """

    def __init__(
        self,
        index: int,
        ctx: RunContext,
        brokers: dict[int, Any],
        *,
        io: ActorIO | None = None,
    ) -> None:
        self.index = index
        self.ctx = ctx
        self.brokers = brokers
        self.io: ActorIO = io if io is not None else RealIO()
        # Partition leaders and broker handles (shares and refreshes self.brokers).
        # A Java consumer subscribed by pattern asks for all topics (classic
        # ConsumerMetadata.newMetadataRequestBuilder) or by topic id (KIP-848
        # regex): its metadata requests never create a topic, not even those its
        # fetches ask about. By names, allow.auto.create.topics decides.
        by_pattern = ctx.topic_pattern is not None and protocol_spec(ctx.protocol).has_coordinator
        self.leader_cache = LeaderCache(
            ctx,
            self.brokers,
            io=self.io,
            auto_create_topics=ctx.settings.fetch.allow_auto_create_topics and not by_pattern,
        )
        self.clock = ctx.clock()
        self.time = TickTime(self.clock)
        self.events = ctx.writer(
            f"host-{index}", self.clock, node=self.io.hostname(), tap=self.io.tap
        )
        self.config = ctx.settings.legacy
        transport = _HostIO(self)
        self.core = HostCore(
            HostConfig.from_settings(
                ctx.protocol,
                ctx.group,
                ctx.kafka,
                ctx.settings,
                processing_ms_per_message=ctx.processing_ms_per_message,
                assignor=ctx.assignor,
                static_membership=ctx.static_membership,
                manual_commit=ctx.manual_commit,
                rebalance_listener=ctx.rebalance_listener,
                seed=ctx.seed,
                share_release=ctx.share_release,
                share_reject=ctx.share_reject,
            ),
            transport,
            self.events,
            self.time.now_ms,
            session=f"host-{index}",
            partitions_per_topic=ctx.partitions_per_topic,
        )
        self.faults = HostFaults(self.core, transport)
        self.members = self.core.members
        self.specs = self.core.specs
        self.gone = self.core.gone
        self._task: asyncio.Task[None] | None = None
        self._stop = False
        self.session_timeout_s = ctx.scaled_s(self.config.zookeeper_session_timeout_ms)
        # Emulator bound (ZkClient waits forever): a request waits this long for a
        # reconnect before failing, so no wait is unbounded.
        self.retry_deadline_s = max(30.0, 20 * self.session_timeout_s)
        self.tick_lag_max_ms = 0.0
        # Every legacy member's ZooKeeper requests and watch notifications, summed.
        self.zk_ops: ZkOpCounter | None = None
        if self.core.spec.members_use_zookeeper:
            from zk_registry.client import ZkOpCounter

            self.zk_ops = ZkOpCounter()
        self._bg: set[asyncio.Task[None]] = set()
        self._timers: dict[tuple[str, str], asyncio.Task[None]] = {}

    # ------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Start the tick loop."""
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        # The loop's clock (the monotonic clock on a real loop), so a virtual-time loop works.
        loop = asyncio.get_running_loop()
        next_tick = loop.time()
        while not self._stop:
            lag = (loop.time() - next_tick) * 1000.0
            self.tick_lag_max_ms = max(self.tick_lag_max_ms, lag)
            self.core.tick(self.time.at_tick(next_tick))
            next_tick += TICK_S
            mono = loop.time()
            if next_tick < mono:  # behind: skip the missed ticks, do not run them back to back
                next_tick = mono + TICK_S
            await asyncio.sleep(next_tick - mono)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._bg.add(task)  # a strong reference until it is done
        task.add_done_callback(self._bg.discard)

    def set_origin(self, origin_wall: float) -> None:
        """Fix the run's emulated time 0 (called once every actor is up).

        The events logged before are written now, restamped on it.
        """
        shift = self.clock.rebase(origin_wall)
        self.time.seen_ms -= shift
        self.events.release(shift)

    # ------------------------------------------------- the core's transport

    async def _fetch(self, call: FetchCall) -> None:
        try:
            handle = self.leader_cache.handle(call.broker)
            if handle is None:
                raise LookupError(f"no actor for broker {call.broker}")
            result = await handle.fetch_session.remote(
                call.session,
                call.new_session,
                call.adds,
                call.withdrawn,
                call.max_wait_ms,
            )
        except Exception:
            self.leader_cache.failed(call.broker)
            self.core.fetch_failed(call.broker)
            return
        self.core.fetch_answered(call.broker, [SessionAnswer(*a) for a in result])

    async def _group_exchange(self, broker: int, reqs: list[GroupRequest]) -> None:
        try:
            handle = self.leader_cache.handle(broker)
            if handle is None:
                raise LookupError(f"no actor for broker {broker}")
            answers = await handle.group_exchange.remote(f"host-{self.index}", reqs)
        except Exception:
            self.leader_cache.failed(broker)
            answers = None
        self.core.group_answered(broker, reqs, answers)

    async def _share_call(self, member: str, call: ShareCall) -> None:
        try:
            handle = self.leader_cache.handle(call.broker)
            if handle is None:
                raise LookupError(f"no actor for broker {call.broker}")
            response = await handle.share_fetch.remote(call.request)
        except Exception:
            self.leader_cache.failed(call.broker)
            self.core.share_failed(member, call.broker)
            return
        self.core.share_answered(member, call.broker, response)

    async def _share_disconnect(self, broker: int, group: str, member_id: str) -> None:
        handle = self.leader_cache.handle(broker)
        if handle is None:
            return
        with contextlib.suppress(Exception):
            await handle.share_disconnect.remote(group, member_id)

    async def _metadata_call(self, topics: list[str], allow_auto_create: bool) -> None:
        answer = await self.leader_cache.fetch_metadata(topics, allow_auto_create)
        self.core.metadata_answered(answer)

    # --------------------------------------------------------------- members

    async def add_consumers(self, specs: list[MemberSpec]) -> list[str]:
        """Create and start consumers; return their names."""
        if self.core.spec.members_use_zookeeper:
            # consumerIdString is made when the connector is constructed, with
            # System.currentTimeMillis: the wall clock of the consumer's creation.
            now_ms = self.io.wall_ms()
            specs = [replace(s, consumer_id=restamp(s.consumer_id, now_ms)) for s in specs]
        self.core.expect(specs)
        if self.core.spec.has_coordinator:
            return [self.core.add_modern(spec, list(self.brokers)) for spec in specs]
        return await self._add_legacy(specs)

    async def _add_legacy(self, specs: list[MemberSpec]) -> list[str]:
        """Connect each 0.8 consumer's ZooKeeper session, then start them together."""
        from zk_registry.client import asyncio_dispatch
        from zk_registry.legacy_driver import LegacyZkDriver

        loop = asyncio.get_running_loop()
        gate = asyncio.Semaphore(16)  # emulator bound: connects in flight at once

        async def connect_one(
            spec: MemberSpec,
        ) -> tuple[ZkClient, ZkLink | None, list[LegacyMember]]:
            async with gate:
                return await connect_unbounded(spec)

        async def connect_unbounded(
            spec: MemberSpec,
        ) -> tuple[ZkClient, ZkLink | None, list[LegacyMember]]:
            proxy = None
            connect = self.ctx.zk_connect
            if spec.use_proxy or spec.zk_latency_ms > 0:
                proxy = self.io.zk_link(self.ctx.zk_hosts)
                proxy.latency_s = self.ctx.scaled_s(spec.zk_latency_ms)
                await proxy.start()
                chroot = connect[connect.index("/") :] if "/" in connect else ""
                connect = proxy.address + chroot
            box: list[LegacyMember] = []

            def on_state(state: str, session_id: str) -> None:
                if box:
                    box[0].on_state(state, session_id)

            def on_new_session() -> None:
                if box:
                    box[0].on_new_session()

            # Callbacks run on this loop (asyncio_dispatch), never on kazoo's threads.
            zk = self.io.zk_client(
                connect,
                self.session_timeout_s,
                dispatch=asyncio_dispatch(loop),
                on_state=on_state,
                on_new_session=on_new_session,
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

            def on_watch(source: str, _event: object, box: list[LegacyMember] = box) -> None:
                if box:
                    box[0].on_watch(source)

            machine = LegacyConsumer(
                member=spec.name,
                consumer_id=spec.consumer_id,
                group=self.ctx.group,
                subscription=spec.legacy_subscription(),
                config=self.config,
            )
            driver = LegacyZkDriver(
                zk,
                self.ctx.group,
                spec.consumer_id,
                self.session_timeout_s,
                on_watch=on_watch,
                exclude_internal_topics=self.config.exclude_internal_topics,
                retry_deadline_s=self.retry_deadline_s,
                wall_ms=self.io.wall_ms,
            )
            member = LegacyMember(
                spec.name, machine, zk, driver, self.core.emit, self.time.now_ms, proxy
            )
            box.append(member)
            self.core.adopt(member)
            negotiated = zk.negotiated_session_timeout_ms
            self.core.emit(
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
            member.apply(machine.start(self.time.now_ms()))
            started.append(spec.name)
        return started

    async def leave(self, name: str) -> bool:
        """Graceful shutdown of one consumer: commit, then leave or close its session."""
        member = self.members.get(name)
        if member is None:
            return False
        loop = asyncio.get_running_loop()
        if isinstance(member, ModernShell):
            # The application finishes the batch poll() gave it, then calls close().
            await self._drain(member)
            member.close()
            deadline = loop.time() + 30.0
            while not member.machine.closed and loop.time() < deadline:
                await asyncio.sleep(0.01)
            # close() returns once LeaveGroup is on its way: let the host send it.
            while self.core.queued_for(member) and loop.time() < deadline:
                await asyncio.sleep(0.01)
            await self._retire(name, "left")
            return True
        member.sync_positions()
        member.apply(member.machine.shutdown(self.time.now_ms()))
        deadline = loop.time() + 10 * max(1.0, self.session_timeout_s)
        while member.machine.state.value != "closed" and loop.time() < deadline:
            await asyncio.sleep(0.01)
        # shutdown() committed past each stream's message in hand; the
        # application thread finishes that message before the process ends.
        await self._drain(member)
        await self._retire(name, "left")
        return True

    async def _drain(self, member: Member) -> None:
        """Wait (bounded) until ``member``'s application has finished what it holds.

        It takes no new batch meanwhile. A paused member holds its batch until
        it wakes: the wait is bounded by the longest batch in hand plus a margin.
        """
        member.draining = True
        now = self.time.now_ms()
        left_ms = max(
            (s.current.done_ms - now for s in member.streams.values() if s.current is not None),
            default=0.0,
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.ctx.scaled_s(max(0.0, left_ms)) + 2.0
        while member.in_hand() and member.alive and loop.time() < deadline:
            await asyncio.sleep(0.01)

    async def crash(self, name: str) -> bool:
        """Kill one consumer with no goodbye: its session expires on the server."""
        member = self.core.crash(name)
        if member is None:
            return False
        if isinstance(member, LegacyMember) and member.proxy is not None:
            from zk_registry.proxy import ProxyMode

            member.proxy.set_mode(ProxyMode.DOWN)
        await self._retire(name, "crashed")
        return True

    async def _retire(self, name: str, how: str) -> None:
        member = self.core.retire(name, how)
        if not isinstance(member, LegacyMember):
            return
        if member.driver is not None:
            member.driver.stop_watches()
        # After a crash the proxy is down, so closing the client sends no
        # closeSession: the server expires the session after its timeout.
        # Without a proxy a crash would look like a clean close, so the
        # orchestrator gives every member it will crash a proxy.
        if member.zk is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(member.zk.stop_async(), 10.0)
        if member.proxy is not None:
            await member.proxy.close()

    async def stop(self) -> dict[str, Any]:
        """Shut every consumer down gracefully, stop the loop, close the log."""
        self.core.stopping = True
        for task in self._timers.values():
            task.cancel()
        self._timers.clear()
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

    # ----------------------------------------------------------------- faults

    async def pause(self, name: str, duration_ms: float) -> bool:
        """A process pause of one member (:meth:`emulator.host.faults.HostFaults.pause`)."""
        return self.faults.pause(name, duration_ms)

    async def slow(self, name: str, duration_ms: float, processing_ms_per_message: float) -> bool:
        """Slow processing of one member (:meth:`emulator.host.faults.HostFaults.slow`)."""
        return self.faults.slow(name, duration_ms, processing_ms_per_message)

    async def partition(self, names: list[str], target: str, duration_ms: float) -> bool:
        """A network partition (:meth:`emulator.host.faults.HostFaults.partition`)."""
        return self.faults.partition(names, target, duration_ms)

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
        self.core.fault(
            "restart",
            name,
            downtime_ms,
            downtime_ms=downtime_ms,
            static=self.ctx.static_membership and self.core.spec.has_coordinator,
        )
        self._spawn(self._restart(name, spec, downtime_ms, "restart"))
        return True

    async def upgrade(self, name: str, downtime_ms: float, to: str) -> bool:
        """A :meth:`restart` whose new member speaks the group protocol ``to`` (online migration).

        ``to`` is ``consumer`` (``group.protocol=consumer``) or ``classic``: the
        run's classic protocol, or, in a ``consumer`` run, the Java client's
        default assignors (range first: eager). The new member keeps its name
        and, when static, its ``group.instance.id``; later restarts keep its
        protocol. Returns as soon as the switch is under way; FAULT_CLEARED
        (reason ``upgrade``) marks the new start.
        """
        spec = self.specs.get(name)
        if name not in self.members or spec is None or downtime_ms < 0:
            return False
        if not self.core.spec.has_coordinator:
            return False  # the plan skips it under 0.8 (faults.applicability)
        run = self.core.config.protocol
        protocol = switched_protocol(run, to)
        self.core.fault(
            "upgrade",
            name,
            downtime_ms,
            downtime_ms=downtime_ms,
            to=protocol,
            static=self.ctx.static_membership,
        )
        new = replace(spec, protocol=None if protocol == run else protocol)
        self._spawn(self._restart(name, new, downtime_ms, "upgrade"))
        return True

    async def _restart(self, name: str, spec: MemberSpec, downtime_ms: float, kind: str) -> None:
        await self.leave(name)
        if downtime_ms > 0:
            await asyncio.sleep(self.ctx.scaled_s(downtime_ms))
        if self.core.stopping or name in self.members:
            return
        self.core.restarts[name] += 1
        if self.core.spec.members_use_zookeeper:
            spec = replace(spec, consumer_id=self._new_consumer_id(spec))
        await self.add_consumers([spec])
        self.core.fault(kind, name, downtime_ms, cleared=True, subscription=spec.subscription)

    def _new_consumer_id(self, spec: MemberSpec) -> str:
        """A restarted 0.8 consumer's id: same host, a new timestamp and UUID."""
        from zk_registry.layout import make_consumer_id

        rest = spec.consumer_id.removeprefix(f"{self.ctx.group}_")
        parts = rest.rsplit("-", 2)
        host = parts[0] if len(parts) == 3 else self.io.hostname()
        rng = random.Random(f"{self.ctx.seed}/{spec.name}/restart/{self.core.restarts[spec.name]}")
        return make_consumer_id(
            self.ctx.group, host, self.io.wall_ms(), f"{rng.getrandbits(64):016x}"
        )

    async def subscribe(
        self,
        names: list[str],
        topics: list[str],
        topic_pattern: str | None = None,
        topic_filter: FilterKind = WHITELIST,
    ) -> bool:
        """Change these members' subscription (:meth:`emulator.host.faults.HostFaults.subscribe`).

        A 0.8 consumer's change is a restart with downtime 0 and the new topics
        (by filter with ``topic_pattern``: ``topics`` is what it selects now).
        """
        done = self.faults.subscribe(names, topics, topic_pattern, topic_filter)
        for spec in done.restarts:
            self._spawn(self._restart(spec.name, spec, 0.0, "subscribe"))
        return done.ok

    async def update_partitions(
        self,
        topic: str,
        count: int,
        leaders: dict[TopicPartition, int] | None = None,
    ) -> None:
        """``topic`` now has ``count`` partitions (:meth:`emulator.host.core.HostCore.grow`).

        ``leaders`` (an emulator addition) gives the new partitions' leaders
        for the fetch path.
        """
        if leaders:
            self.ctx.leaders.update(leaders)
        self.core.grow(topic, count)

    async def sessions(self) -> dict[str, int]:
        """Each live legacy member's ZooKeeper session id."""
        out: dict[str, int] = {}
        for name, m in self.members.items():
            sid = m.zk.session_id if isinstance(m, LegacyMember) and m.zk is not None else None
            if sid is not None:
                out[name] = int(sid)
        return out

    async def expire_session(self, name: str) -> bool:
        """Expire a consumer's session on the server, as a long network cut does."""
        member = self.members.get(name)
        if not isinstance(member, LegacyMember) or member.zk is None:
            return False
        cid = member.zk.client_id
        if cid is None:
            return False
        sid, pwd = cid
        await self.io.expire_session(",".join(self.ctx.zk_hosts), sid, pwd)
        return True

    # ------------------------------------------------------------------ stats

    async def stats(self) -> dict[str, Any]:
        """Counters for the live display and the summary."""
        return {
            **asdict(self.core.counters()),
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
        return self.core.progress()

    async def owners(self) -> dict[str, list[TopicPartition]]:
        """Each live member's owned partitions (its in-memory topicRegistry)."""
        return self.core.owners()


class _HostIO:
    """The core's transport and timers: the host's leader cache, Ray calls and asyncio timers."""

    def __init__(self, host: ConsumerHostCore) -> None:
        self.host = host

    def leader(self, tp: TopicPartition) -> int | None:
        """The leader of ``tp`` as the leader cache knows it."""
        return self.host.leader_cache.leader(tp)

    def not_leader(self, tp: TopicPartition) -> None:
        """A broker answered NotLeaderForPartition for ``tp``."""
        self.host.leader_cache.not_leader(tp)

    def refresh_leaders(self) -> None:
        """Start a leader refresh if one is due."""
        self.host.leader_cache.maybe_refresh()

    def send_fetch(self, call: FetchCall) -> None:
        """Make one fetch-session call."""
        self.host._spawn(self.host._fetch(call))

    def send_groups(self, broker: int, requests: list[GroupRequest]) -> None:
        """Send one batch of group requests to ``broker``."""
        self.host._spawn(self.host._group_exchange(broker, requests))

    def request_metadata(self, topics: list[str], allow_auto_create: bool) -> None:
        """Make the members' metadata call; its answer goes to the core."""
        self.host._spawn(self.host._metadata_call(topics, allow_auto_create))

    def send_share(self, member: str, call: ShareCall) -> None:
        """Make one share member's ShareFetch/ShareAcknowledge call."""
        self.host._spawn(self.host._share_call(member, call))

    def share_disconnect(self, broker: int, group: str, member_id: str) -> None:
        """Tell ``broker`` a share member's connection dropped (its process died)."""
        self.host._spawn(self.host._share_disconnect(broker, group, member_id))

    def after(self, key: tuple[str, str], delay_ms: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the loop ``delay_ms`` emulated ms from now (replaces ``key``'s timer)."""
        timers = self.host._timers
        old = timers.pop(key, None)
        if old is not None:
            old.cancel()

        async def later() -> None:
            await asyncio.sleep(self.host.ctx.scaled_s(delay_ms))
            if timers.get(key) is task:
                del timers[key]
            fn()

        task = asyncio.ensure_future(later())
        timers[key] = task
