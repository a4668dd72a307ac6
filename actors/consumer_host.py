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
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import ray

from actors.context import RunContext
from actors.legacy_member import LegacyMember
from emulator.events import EventKind
from emulator.legacy.config import LegacyConsumerConfig
from emulator.legacy.consumer import LegacyConsumer

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
    """

    name: str
    consumer_id: str
    subscription: dict[str, int]
    use_proxy: bool = False
    index: int = 0
    bootstrap: int = 0


class ConsumerHostCore:
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
        self.clock = ctx.clock()
        self.events = ctx.writer(f"host-{index}", self.clock)
        self.config = LegacyConsumerConfig.from_kafka(ctx.kafka)
        self.members: dict[str, LegacyMember] = {}
        self.gone: dict[str, str] = {}  # name -> left | crashed
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop = False
        self._fetch_inflight: set[int] = set()
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
        self._outbox: dict[int, list[Any]] = defaultdict(list)
        self._awaiting: dict[int, tuple[int, Any]] = {}
        self._group_inflight: set[int] = set()
        self._bg: set[asyncio.Task[None]] = set()
        if ctx.protocol != "zookeeper":
            # A modern consumer's poll() returns at most max.poll.records.
            self.max_fetch = min(self.max_fetch, int(str(ctx.kafka.get("max.poll.records", 500))))

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

        if self.ctx.protocol != "zookeeper":
            return [self._add_modern(spec) for spec in specs]
        loop = asyncio.get_running_loop()
        started: list[str] = []
        for spec in specs:
            proxy = None
            connect = self.ctx.zk_connect
            if spec.use_proxy:
                proxy = FaultProxy(list(self.ctx.zk_hosts))
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
            )
            await zk.start_async()
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
            box.append(member)
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
            partitions_per_topic=dict(self.ctx.partitions_per_topic),
            assignor=self.ctx.assignor,
            static=self.ctx.static_membership,
            corr_start=(spec.index + 1) * 1_000_000_000,
        )
        box: list[Any] = []

        def send(broker: int, req: Any, b: list[Any] = box) -> None:
            self._outbox[broker].append(req)
            self._awaiting[req.corr] = (broker, b[0])

        member = ModernMember(
            spec.name, machine, self._emit, self.clock.now_ms, send, spec.bootstrap
        )
        box.append(member)
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
            answers = await self.brokers[broker].group_exchange.remote(f"host-{self.index}", reqs)
        except Exception:
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
            member.close()
            deadline = time.monotonic() + 30.0
            while not member.machine.closed and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            # close() returns once LeaveGroup is on its way: let the host send it.
            while self._queued_for(member) and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            await self._retire(name, "left")
            return True
        member.apply(member.machine.shutdown(self.clock.now_ms()))
        deadline = time.monotonic() + 10 * max(1.0, self.session_timeout_s)
        while member.machine.state.value != "closed" and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await self._retire(name, "left")
        return True

    async def crash(self, name: str) -> bool:
        """Kill one consumer with no goodbye: its session expires on the server."""
        member = self.members.get(name)
        if member is None:
            return False
        member.kill()
        self._emit(EventKind.CONSUMER_CRASHED, member=name, member_id=member.member_id or None)
        if getattr(member, "proxy", None) is not None:
            from zk_registry.proxy import ProxyMode

            member.proxy.set_mode(ProxyMode.DOWN)
        await self._retire(name, "crashed")
        return True

    async def _retire(self, name: str, how: str) -> None:
        member = self.members.pop(name)
        member.alive = False
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
        for name in list(self.members):
            await self.leave(name)
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
            self._send_fetches()
            if self._outbox or self._awaiting:
                self._exchange_groups()
            next_tick += TICK_S
            mono = time.monotonic()
            if next_tick < mono:  # behind: skip the missed ticks, do not run them back to back
                next_tick = mono + TICK_S
            await asyncio.sleep(next_tick - mono)

    def _send_fetches(self) -> None:
        by_broker: dict[int, list[tuple[str, int, int | None, str, int]]] = defaultdict(list)
        owners: dict[int, list[tuple[LegacyMember, TopicPartition, int]]] = defaultdict(list)
        reset = self.config.auto_offset_reset
        for member in self.members.values():
            for tp, offset, epoch in member.fetch_requests(self.max_chunks):
                leader = self.ctx.leaders.get(tp)
                if leader is None or leader in self._fetch_inflight:
                    pos = member.positions.get(tp)
                    if pos is not None:
                        pos.inflight = False
                    continue
                by_broker[leader].append((tp[0], tp[1], offset, reset, self.max_fetch))
                owners[leader].append((member, tp, epoch))
        for broker, reqs in by_broker.items():
            self._fetch_inflight.add(broker)
            task = asyncio.ensure_future(self._fetch(broker, reqs, owners[broker]))
            self._bg.add(task)  # a strong reference until it is done
            task.add_done_callback(self._bg.discard)

    async def _fetch(
        self,
        broker: int,
        reqs: list[tuple[str, int, int | None, str, int]],
        owners: list[tuple[LegacyMember, TopicPartition, int]],
    ) -> None:
        try:
            result = await self.brokers[broker].fetch.remote(reqs)
        except Exception:
            result = [(t, p, -1, -1) for t, p, *_ in reqs]
        finally:
            self._fetch_inflight.discard(broker)
        for (member, tp, epoch), (_t, _p, start, end) in zip(owners, result, strict=True):
            member.fetched(tp, start, end, epoch)

    # ----------------------------------------------------------------- faults

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
