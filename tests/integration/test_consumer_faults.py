"""Consumer-side faults carried out by the consumer host, on a real ZooKeeper and a real Ray.

:class:`~actors.consumer_host.ConsumerHostCore` runs in-process (so the test
can look at its members) with a real ZooKeeper server for the legacy
consumers' sessions, and fetches and group requests going to a Ray actor.
That actor, :class:`StandInBroker`, holds the real group coordinators
(:class:`~emulator.broker.coordinators.CoordinatorHost` with the protocol's
coordinator state machines) and a log with an endless backlog, so every member
always has a batch to process; the broker actor's replication and controller
are not what these tests are about. One test kills a real
``ConsumerHostActor`` with ``ray.kill``.

Checked: sessions on the server (4lw ``dump`` through
:func:`zk_registry.faults.session_on_server`), the members' state machines,
and the event log (PROCESSED intervals are ``[t_emu_ms - duration_ms, t_emu_ms]``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import ray

from actors.consumer_host import ConsumerHostCore
from actors.context import RunContext
from emulator.events import Event, EventKind
from emulator.host.core import MemberSpec
from tests.integration.test_legacy_host import (
    GROUP,
    PARTITIONS,
    TOPIC,
    Cluster,
    member_specs,
    read_events,
    wait_converged,
)
from zk_registry.faults import session_on_server
from zk_registry.server import ZooKeeperEnsemble

pytestmark = [pytest.mark.zk, pytest.mark.ray]

ALL = {(TOPIC, p) for p in range(PARTITIONS)}
LEGACY_KAFKA: dict[str, object] = {"fetch.message.max.bytes": 100 * 1024}  # 100 messages a batch
CLASSIC_KAFKA: dict[str, object] = {
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 1000,
    "max.poll.records": 100,
    "group.initial.rebalance.delay.ms": 0,
}


# --------------------------------------------------------------------------- set-up


@ray.remote(num_cpus=0)
class StandInBroker:
    """The group coordinators of a run on one broker, and an endless log to fetch from."""

    def __init__(self, ctx: RunContext, broker_id: int = 0) -> None:
        from emulator.broker.coordinators import CoordinatorHost, make_coordinator_factory

        self.clock = ctx.clock()
        self.events = ctx.writer(f"broker-{broker_id}", self.clock)
        self.coordinators: Any = None
        if ctx.protocol != "zookeeper":
            factory = make_coordinator_factory(
                ctx.protocol, dict(ctx.kafka), broker_id, ctx.seed, dict(ctx.partitions_per_topic)
            )
            self.coordinators = CoordinatorHost(broker_id, {0: broker_id}, factory, self._emit)
        self._timer: asyncio.Task[None] | None = None
        self.broker_id = broker_id
        self.leaders = dict(ctx.leaders)

    def _emit(self, kind: EventKind, **fields: Any) -> None:
        self.events.emit(kind, **fields)

    async def start(self) -> None:
        self._timer = asyncio.ensure_future(self._tick())

    async def _tick(self) -> None:
        while True:
            if self.coordinators is not None:
                self.coordinators.poll(self.clock.now_ms())
            await asyncio.sleep(0.01)

    def metadata(
        self, topics: list[str] | None = None, allow_auto_create: bool = False
    ) -> dict[tuple[str, int], int]:
        """``TopicMetadataRequest`` (as the broker actor's): every partition, led by this broker."""
        return dict.fromkeys(self.leaders, self.broker_id)

    def fetch(
        self, requests: list[tuple[str, int, int | None, str, int]]
    ) -> list[tuple[str, int, int, int]]:
        out = []
        for t, p, offset, _reset, max_n in requests:
            start = 0 if offset is None else offset
            out.append((t, p, start, start + max_n))
        return out

    def fetch_session(
        self,
        session: str,
        new_session: bool,
        adds: list[tuple[int, str, int, int | None, str, int]],
        withdrawn: list[int],
        max_wait_ms: float,
    ) -> list[tuple[int, int, int]]:
        # The log never ends: every fetch is answered at once, in full.
        out = []
        for slot, _t, _p, offset, _reset, max_n in adds:
            start = 0 if offset is None else offset
            out.append((slot, start, start + max_n))
        return out

    async def group_exchange(self, host_key: str, requests: list[Any]) -> list[Any]:
        return list(self.coordinators.exchange(self.clock.now_ms(), host_key, requests))

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self.events.close()


def context(
    events_dir: Path,
    protocol: str,
    scale: float,
    kafka: dict[str, object],
    *,
    zk_connect: str = "127.0.0.1:1",
    zk_hosts: tuple[str, ...] = (),
    cost: float = 10.0,
    static: bool = False,
    topics: dict[str, int] | None = None,
) -> RunContext:
    topics = topics or {TOPIC: PARTITIONS}
    return RunContext(
        run_id=f"test-{uuid.uuid4().hex[:8]}",
        protocol=protocol,
        events_dir=str(events_dir),
        time_scale=scale,
        origin_wall=time.time(),
        zk_connect=zk_connect,
        zk_hosts=zk_hosts,
        seed=11,
        group=GROUP,
        kafka=dict(kafka),
        leaders={(t, p): 0 for t, n in topics.items() for p in range(n)},
        processing_ms_per_message=cost,
        validate_events=True,
        partitions_per_topic=dict(topics),
        assignor="uniform" if protocol == "consumer" else "range",
        static_membership=static,
    )


def modern_specs(names: list[str], topics: tuple[str, ...] = (TOPIC,)) -> list[MemberSpec]:
    return [
        MemberSpec(n, n, {t: 1 for t in topics}, index=i, bootstrap=0) for i, n in enumerate(names)
    ]


def run(scenario: Callable[[], Awaitable[None]], timeout: float = 60.0) -> None:
    async def main() -> None:
        await asyncio.wait_for(scenario(), timeout)

    asyncio.run(main())


async def until(pred: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


def owned(host: ConsumerHostCore, name: str) -> set[tuple[str, int]]:
    m = host.members.get(name)
    return set() if m is None else set(m.machine.owned)


def stable_split(host: ConsumerHostCore, names: list[str], parts: set[Any] = ALL) -> bool:
    """Every member is in the group, STABLE, with a share; the shares split ``parts``."""
    seen: list[tuple[str, int]] = []
    for n in names:
        m = host.members.get(n)
        if m is None or str(m.machine.state.value).upper() != "STABLE" or not m.machine.owned:
            return False
        seen.extend(m.machine.owned)
    return len(seen) == len(set(seen)) and set(seen) == parts


def of(events: list[Event], kind: EventKind, member: str | None = None) -> list[Event]:
    return [
        e
        for e in events
        if e["kind"] == kind.value and (member is None or e.get("member") == member)
    ]


def t_of(e: Event) -> float:
    return float(e["t_emu_ms"])  # type: ignore[arg-type]


def batches(events: list[Event], member: str) -> list[tuple[tuple[str, int], float, float]]:
    """``(partition, start, end)`` of every batch the member processed."""
    out = []
    for e in of(events, EventKind.PROCESSED, member):
        end = t_of(e)
        out.append(((str(e["topic"]), int(e["partition"])), end - float(e["duration_ms"]), end))  # type: ignore[arg-type]
    return out


def overlaps_after(
    events: list[Event], victim: str, other: str, since: float
) -> list[tuple[tuple[str, int], float, float]]:
    """The victim's batches ending after ``since`` that overlap one of ``other``'s."""
    theirs = batches(events, other)
    return [
        (tp, s, e)
        for tp, s, e in batches(events, victim)
        if e >= since and any(tp == tp2 and s < e2 and s2 < e for tp2, s2, e2 in theirs)
    ]


def faults(events: list[Event], kind: str, member: str) -> tuple[list[Event], list[Event]]:
    inj = [e for e in of(events, EventKind.FAULT_INJECTED, member) if e["reason"] == kind]
    clr = [e for e in of(events, EventKind.FAULT_CLEARED, member) if e["reason"] == kind]
    return inj, clr


class Harness:
    """A host (in-process), the stand-in broker (Ray) and, for legacy runs, the ZK cluster."""

    def __init__(self, ctx: RunContext, zk_parent: str | None = None) -> None:
        self.ctx = ctx
        self.cluster = None if zk_parent is None else Cluster(zk_parent)
        self.broker: Any = None
        self.host: ConsumerHostCore | None = None

    async def __aenter__(self) -> ConsumerHostCore:
        if self.cluster is not None:
            await self.cluster.start()
        self.broker = StandInBroker.remote(self.ctx)
        await self.broker.start.remote()
        self.host = ConsumerHostCore(0, self.ctx, brokers={0: self.broker})
        await self.host.start()
        return self.host

    async def __aexit__(self, *exc: object) -> None:
        if self.host is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.host.stop(), 30)
        if self.broker is not None:
            with contextlib.suppress(Exception):
                await self.broker.stop.remote()
            ray.kill(self.broker)
        if self.cluster is not None:
            await self.cluster.stop()


# --------------------------------------------------------------------------- legacy


def test_legacy_pause_past_the_session_timeout(
    ray_local: None, zk_connect: str, zk_server: ZooKeeperEnsemble, tmp_path: Path
) -> None:
    """The server expires the paused consumer's session and the other takes its partitions;
    after the wake it still processes one of them (overlap), then handleNewSession rejoins it."""
    scale = 0.1  # session timeout 6 s emulated = 0.6 s wall
    events_dir = tmp_path / "events"
    ctx = context(
        events_dir,
        "zookeeper",
        scale,
        LEGACY_KAFKA,
        zk_connect=zk_connect + "/emu",
        zk_hosts=tuple(zk_server.hosts),
    )
    names = ["c-0", "c-1"]
    specs = [MemberSpec(s.name, s.consumer_id, {TOPIC: 4}, True) for s in member_specs(names)]
    hosts = ",".join(zk_server.hosts)
    marks: dict[str, float] = {}

    async def scenario() -> None:
        h = Harness(ctx, zk_connect)
        async with h as host:
            assert h.cluster is not None
            await host.add_consumers(specs)
            await wait_converged(host, h.cluster, names)
            victim = host.members["c-0"]
            sid = victim.zk.session_id
            before = set(victim.machine.owned)
            assert len(before) == 4
            assert session_on_server(hosts, sid) is True
            await asyncio.sleep(0.3)  # some batches in hand
            marks["pause"] = host.clock.now_ms()
            assert await host.pause("c-0", 15000.0)  # 1.5 s wall
            assert victim.paused
            await until(
                lambda: session_on_server(hosts, sid) is False, 1.3, "the server to expire it"
            )
            await until(lambda: owned(host, "c-1") == ALL, 1.3, "c-1 to take every partition")
            assert victim.paused, "the takeover happened during the pause"
            assert set(victim.machine.owned) == before  # it still believes what it knew
            await until(lambda: not victim.paused, 3.0, "the wake")
            marks["wake"] = host.clock.now_ms()
            await until(lambda: victim.zk.session_id != sid, 10.0, "a new session")
            await wait_converged(host, h.cluster, names)

    run(scenario)
    events = read_events(events_dir)
    inj, clr = faults(events, "pause", "c-0")
    assert len(inj) == 1 and len(clr) == 1
    marks["pause"], marks["wake"] = t_of(inj[0]), t_of(clr[0])  # as the host saw them
    assert inj[0]["duration_ms"] == 15000.0
    assert 14000.0 <= float(clr[0]["duration_ms"]) <= 17000.0  # type: ignore[arg-type]
    # The expiry reached the consumer only after the wake, then handleNewSession.
    expired = of(events, EventKind.ZK_SESSION_EXPIRED, "c-0")
    assert expired and t_of(expired[0]) >= marks["wake"]
    new_session = [
        e for e in of(events, EventKind.REBALANCE_TRIGGERED, "c-0") if e["reason"] == "new_session"
    ]
    assert new_session and t_of(new_session[0]) >= marks["wake"]
    # Nothing processed by the paused member during the pause.
    assert not [b for b in batches(events, "c-0") if marks["pause"] < b[2] < marks["wake"]]
    # c-1 claimed the victim's partitions during the pause.
    claimed = {
        (e["topic"], e["partition"])
        for e in of(events, EventKind.OWNERSHIP_CLAIMED, "c-1")
        if marks["pause"] < t_of(e) < marks["wake"]
    }
    assert len(claimed) >= 4
    # After the wake the victim processed a partition c-1 was processing at the same time.
    assert overlaps_after(events, "c-0", "c-1", marks["wake"])


def test_zookeeper_partition_expires_the_session_and_heals(
    ray_local: None, zk_connect: str, zk_server: ZooKeeperEnsemble, tmp_path: Path
) -> None:
    scale = 0.1
    events_dir = tmp_path / "events"
    ctx = context(
        events_dir,
        "zookeeper",
        scale,
        LEGACY_KAFKA,
        zk_connect=zk_connect + "/emu",
        zk_hosts=tuple(zk_server.hosts),
    )
    names = ["c-0", "c-1"]
    specs = member_specs(names, frozenset({"c-0"}))
    hosts = ",".join(zk_server.hosts)

    async def scenario() -> None:
        h = Harness(ctx, zk_connect)
        async with h as host:
            assert h.cluster is not None
            await host.add_consumers(specs)
            await wait_converged(host, h.cluster, names)
            cut = host.members["c-0"]
            sid = cut.zk.session_id
            assert await host.partition(["c-0"], "zookeeper", 15000.0)
            await until(lambda: session_on_server(hosts, sid) is False, 1.3, "expiry")
            await until(lambda: owned(host, "c-1") == ALL, 1.3, "c-1 to take every partition")
            # Not paused: the member keeps processing meanwhile.
            n0 = cut.processed
            await asyncio.sleep(0.2)
            assert cut.processed > n0
            await until(lambda: cut.zk.session_id != sid, 10.0, "a new session after the heal")
            await wait_converged(host, h.cluster, names)

    run(scenario)
    events = read_events(events_dir)
    inj, clr = faults(events, "network_partition", "c-0")
    assert len(inj) == 1 and len(clr) == 1
    assert '"target": "zookeeper"' in str(inj[0]["detail"])
    assert t_of(clr[0]) - t_of(inj[0]) >= 14000.0
    states = [e["state"] for e in of(events, EventKind.ZK_SESSION_STATE, "c-0")]
    assert "SUSPENDED" in states and "LOST" in states
    assert len(of(events, EventKind.ZK_SESSION_EXPIRED, "c-0")) == 1
    assert of(events, EventKind.ZK_SESSION_EXPIRED, "c-1") == []


def test_killed_host_sessions_expire_on_the_server(
    ray_local: None, zk_connect: str, zk_server: ZooKeeperEnsemble, tmp_path: Path
) -> None:
    """ray.kill: no closeSession, the server expires the sessions; the log keeps its last events."""
    from actors.remote import ConsumerHostActor

    scale = 0.2  # session timeout 1.2 s wall
    events_dir = tmp_path / "events"
    ctx = context(
        events_dir,
        "zookeeper",
        scale,
        {},
        zk_connect=zk_connect + "/emu",
        zk_hosts=tuple(zk_server.hosts),
    )
    ctx = dataclasses.replace(ctx, leaders={})  # coordination only
    names = ["c-0", "c-1"]
    hosts = ",".join(zk_server.hosts)
    session_s = ctx.scaled_s(6000)

    async def scenario() -> None:
        cluster = Cluster(zk_connect)
        await cluster.start()
        actor = ConsumerHostActor.remote(0, ctx, {})
        try:
            await actor.start.remote()
            await actor.add_consumers.remote(member_specs(names))
            sids: dict[str, int] = {}

            async def both_own() -> bool:
                owners = await actor.owners.remote()
                return sum(len(v) for v in owners.values()) == PARTITIONS and all(owners.values())

            deadline = time.monotonic() + 20
            while not await both_own():
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            sids = await actor.sessions.remote()
            assert set(sids) == set(names)
            # An event right before the kill: it must be on disk afterwards.
            assert await actor.slow.remote("c-0", 100000.0, 20.0)
            await asyncio.sleep(0.6)
            killed = time.monotonic()
            ray.kill(actor, no_restart=True)
            await asyncio.sleep(0.2)
            # Not closed: the server still has them right after the kill ...
            assert all(session_on_server(hosts, s) is True for s in sids.values())
            # ... and expires them after the session timeout.
            while any(session_on_server(hosts, s) is not False for s in sids.values()):
                assert time.monotonic() - killed < session_s + 5.0, "sessions never expired"
                await asyncio.sleep(0.05)
            assert time.monotonic() - killed >= 0.5 * session_s
            snap = await cluster.snapshot()
            assert not snap.members and not snap.owners
        finally:
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)
            await cluster.stop()

    run(scenario)
    events = read_events(events_dir)
    inj, _ = faults(events, "slow", "c-0")
    assert len(inj) == 1
    assert of(events, EventKind.CONSUMER_STOPPED) == []


# --------------------------------------------------------------------------- modern


def test_classic_pause_past_the_session_timeout(ray_local: None, tmp_path: Path) -> None:
    """The coordinator expires the paused member; after the wake it still processes a
    partition the other member now owns, its requests fail on the old membership, it rejoins."""
    scale = 0.1
    events_dir = tmp_path / "events"
    ctx = context(events_dir, "classic-eager", scale, CLASSIC_KAFKA)
    names = ["c-0", "c-1"]
    marks: dict[str, float] = {}

    async def scenario() -> None:
        async with Harness(ctx) as host:
            await host.add_consumers(modern_specs(names))
            await until(lambda: stable_split(host, names), 20, "the first assignment")
            victim = host.members["c-0"]
            before = owned(host, "c-0")
            old_member_id = victim.member_id
            await asyncio.sleep(0.3)
            marks["pause"] = host.clock.now_ms()
            assert await host.pause("c-0", 15000.0)
            await until(lambda: owned(host, "c-1") == ALL, 1.4, "c-1 to take every partition")
            assert victim.paused and owned(host, "c-0") == before
            await until(lambda: not victim.paused, 3.0, "the wake")
            marks["wake"] = host.clock.now_ms()
            await until(lambda: stable_split(host, names), 20, "c-0 back in the group")
            assert victim.member_id != old_member_id

    run(scenario)
    events = read_events(events_dir)
    inj, clr = faults(events, "pause", "c-0")
    assert len(inj) == 1 and len(clr) == 1
    marks["pause"], marks["wake"] = t_of(inj[0]), t_of(clr[0])  # as the host saw them
    # Its first answers after the wake say it is no longer a member.
    errors = {
        str(e["reason"])
        for e in of(events, EventKind.REQUEST_ERROR, "c-0")
        if t_of(e) >= marks["wake"]
    }
    assert errors & {"UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION", "COORDINATOR_NOT_AVAILABLE"}
    lost = [e for e in of(events, EventKind.PARTITIONS_LOST, "c-0") if t_of(e) >= marks["wake"]]
    assert lost
    assert overlaps_after(events, "c-0", "c-1", marks["wake"])
    assert not [b for b in batches(events, "c-0") if marks["pause"] < b[2] < marks["wake"]]


def test_slow_processing_past_max_poll_interval_makes_a_classic_member_leave(
    ray_local: None, tmp_path: Path
) -> None:
    scale = 0.1
    events_dir = tmp_path / "events"
    kafka = {**CLASSIC_KAFKA, "max.poll.interval.ms": 5000}
    ctx = context(events_dir, "classic-eager", scale, kafka)
    names = ["c-0", "c-1"]
    marks: dict[str, float] = {}

    async def scenario() -> None:
        async with Harness(ctx) as host:
            await host.add_consumers(modern_specs(names))
            await until(lambda: stable_split(host, names), 20, "the first assignment")
            marks["slow"] = host.clock.now_ms()
            # 100 messages at 100 ms: a 10 s batch, twice max.poll.interval.ms.
            assert await host.slow("c-0", 8000.0, 100.0)
            await until(lambda: owned(host, "c-1") == ALL, 2.5, "c-1 to take every partition")
            await until(lambda: stable_split(host, names), 20, "c-0 back after its batch")

    run(scenario)
    events = read_events(events_dir)
    timeout = [
        e
        for e in of(events, EventKind.REBALANCE_TRIGGERED, "c-0")
        if e["reason"] == "poll_timeout" and t_of(e) >= marks["slow"]
    ]
    assert len(timeout) == 1
    assert float(timeout[0]["duration_ms"]) >= 5000.0  # type: ignore[arg-type]
    inj, clr = faults(events, "slow", "c-0")
    assert len(inj) == 1 and len(clr) == 1
    slow_batches = [b for b in batches(events, "c-0") if b[2] - b[1] > 5000.0]
    assert slow_batches  # the batch that outlived the poll interval was finished


def test_coordinator_partition_of_a_kip848_member(ray_local: None, tmp_path: Path) -> None:
    """Heartbeats get no answer; after request.timeout.ms the member rediscovers the
    coordinator (cut too); the coordinator expires it; after the heal it is fenced and rejoins.
    Fetching goes on meanwhile."""
    scale = 0.05  # group.consumer.session.timeout.ms 45 s = 2.25 s wall
    events_dir = tmp_path / "events"
    kafka = {"request.timeout.ms": 10000, "max.poll.records": 100}
    ctx = context(events_dir, "consumer", scale, kafka)
    names = ["c-0", "c-1"]
    marks: dict[str, float] = {}

    async def scenario() -> None:
        async with Harness(ctx) as host:
            await host.add_consumers(modern_specs(names))
            await until(lambda: stable_split(host, names), 20, "the first assignment")
            cut = host.members["c-0"]
            marks["cut"] = host.clock.now_ms()
            assert await host.partition(["c-0"], "coordinator", 60000.0)  # 3 s wall
            await until(lambda: owned(host, "c-1") == ALL, 2.9, "the coordinator to expire c-0")
            assert cut.cut_coordinator
            n0 = cut.processed
            await asyncio.sleep(0.2)  # 4 batches of 1 s emulated
            assert cut.processed > n0  # fetches still work: it goes on with what it had
            await until(lambda: not cut.cut_coordinator, 3.0, "the heal")
            marks["heal"] = host.clock.now_ms()
            await until(lambda: stable_split(host, names), 20, "c-0 back in the group")

    run(scenario)
    events = read_events(events_dir)
    timed_out = [
        e
        for e in of(events, EventKind.REQUEST_ERROR, "c-0")
        if e["reason"] == "REQUEST_TIMED_OUT" and marks["cut"] <= t_of(e) < marks["heal"]
    ]
    assert {e["detail"] for e in timed_out} >= {"ConsumerGroupHeartbeat"}
    assert min(t_of(e) for e in timed_out) - marks["cut"] >= 10000.0 - 100
    fenced = [
        e
        for e in of(events, EventKind.REQUEST_ERROR, "c-0")
        if e["reason"] in ("UNKNOWN_MEMBER_ID", "FENCED_MEMBER_EPOCH") and t_of(e) >= marks["heal"]
    ]
    assert fenced
    inj, clr = faults(events, "network_partition", "c-0")
    assert len(inj) == 1 and len(clr) == 1


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
def test_classic_restart(ray_local: None, tmp_path: Path, static: bool) -> None:
    """A dynamic member's restart costs two rebalances; a static one back within the
    session timeout none: it gets its partitions back without the other noticing."""
    scale = 0.1
    events_dir = tmp_path / "events"
    ctx = context(events_dir, "classic-eager", scale, CLASSIC_KAFKA, static=static)
    names = ["c-0", "c-1"]
    marks: dict[str, float] = {}

    async def scenario() -> None:
        async with Harness(ctx) as host:
            await host.add_consumers(modern_specs(names))
            await until(lambda: stable_split(host, names), 20, "the first assignment")
            before = owned(host, "c-0")
            old = host.members["c-0"]
            marks["restart"] = host.clock.now_ms()
            t0 = time.monotonic()
            assert await host.restart("c-0", 2000.0)  # 0.2 s wall, inside the 6 s session
            assert time.monotonic() - t0 < 0.15  # does not wait for the downtime
            await until(lambda: host.members.get("c-0") not in (None, old), 10, "the new c-0")
            await until(lambda: stable_split(host, names), 20, "c-0 back in the group")
            if static:
                assert owned(host, "c-0") == before
            await asyncio.sleep(0.3)
            marks["end"] = host.clock.now_ms()

    run(scenario)
    events = read_events(events_dir)
    inj, clr = faults(events, "restart", "c-0")
    assert len(inj) == 1 and len(clr) == 1
    assert t_of(clr[0]) - t_of(inj[0]) >= 2000.0
    c1_rebalances = [
        e
        for e in of(events, EventKind.REBALANCE_STARTED, "c-1")
        if marks["restart"] <= t_of(e) <= marks["end"]
    ]
    stops = [e for e in of(events, EventKind.CONSUMER_STOPPED, "c-0") if t_of(e) <= marks["end"]]
    assert len(stops) == 1 and t_of(stops[0]) < t_of(clr[0])
    assert len(of(events, EventKind.CONSUMER_STARTED, "c-0")) == 2
    if static:
        assert c1_rebalances == []
    else:
        assert c1_rebalances


@pytest.mark.parametrize("protocol", ["classic-eager", "consumer"])
def test_subscription_change_of_a_modern_member(
    ray_local: None, tmp_path: Path, protocol: str
) -> None:
    scale = 0.05
    events_dir = tmp_path / "events"
    topics = {TOPIC: PARTITIONS, "u": 4}
    ctx = context(events_dir, protocol, scale, CLASSIC_KAFKA, topics=topics)
    names = ["c-0", "c-1"]

    async def scenario() -> None:
        async with Harness(ctx) as host:
            await host.add_consumers(modern_specs(names))
            await until(lambda: stable_split(host, names), 20, "the first assignment")
            assert await host.subscribe(["c-0"], [TOPIC, "u"])
            both = ALL | {("u", p) for p in range(4)}
            await until(lambda: stable_split(host, names, both), 20, "u assigned")
            assert {("u", p) for p in range(4)} <= owned(host, "c-0")
            assert host.specs["c-0"].subscription == {TOPIC: 1, "u": 1}
            victim = host.members["c-0"]
            await until(
                lambda: any(tp[0] == "u" for tp in victim.high_water), 5, "c-0 to process u"
            )

    run(scenario)
    events = read_events(events_dir)
    inj, _ = faults(events, "subscribe", "c-0")
    assert len(inj) == 1 and "u" in str(inj[0]["detail"])
    assert {str(e["topic"]) for e in of(events, EventKind.PROCESSED, "c-0")} == {TOPIC, "u"}


def test_legacy_subscription_change_is_a_restart(
    ray_local: None, zk_connect: str, zk_server: ZooKeeperEnsemble, tmp_path: Path
) -> None:
    """The 0.8 consumer cannot change its topics: a new consumer (new id) with the new ones."""
    import random

    from zk_registry.brokers import create_partition_states, create_topic

    scale = 0.1
    events_dir = tmp_path / "events"
    topics = {TOPIC: PARTITIONS, "u": 2}
    ctx = context(
        events_dir,
        "zookeeper",
        scale,
        LEGACY_KAFKA,
        zk_connect=zk_connect + "/emu",
        zk_hosts=tuple(zk_server.hosts),
        topics=topics,
    )
    names = ["c-0", "c-1"]

    async def scenario() -> None:
        h = Harness(ctx, zk_connect)
        async with h as host:
            assert h.cluster is not None
            admin = h.cluster.admin
            assignment = await create_topic(admin, "u", 2, 2, random.Random(3), broker_ids=[0, 1])
            await create_partition_states(admin, "u", assignment, [0, 1], controller_epoch=1)
            await host.add_consumers(member_specs(names))
            await wait_converged(host, h.cluster, names)
            old_id = host.members["c-0"].member_id
            assert await host.subscribe(["c-0"], [TOPIC, "u"])
            await until(
                lambda: (
                    host.members.get("c-0") is not None
                    and host.members["c-0"].member_id != old_id
                    and {("u", 0), ("u", 1)} <= set(host.members["c-0"].machine.owned)
                    and len(host.members["c-1"].machine.owned) == PARTITIONS // 2
                ),
                20,
                "the new c-0 to own u and its share of t",
            )
            assert host.members["c-0"].machine.subscription == {TOPIC: 1, "u": 1}

    run(scenario)
    events = read_events(events_dir)
    inj, clr = faults(events, "subscribe", "c-0")
    assert len(inj) == 1 and len(clr) == 1
    assert '"emulated": "restart"' in str(inj[0]["detail"])
    assert len(of(events, EventKind.CONSUMER_STARTED, "c-0")) == 2
