"""The actor shells' ``ActorIO`` seam (issue 18 R3, R8): what they ask of the world goes through it.

The shells run in-process on asyncio with a fake io: ZooKeeper clients are real
:class:`~zk_registry.client.ZkClient` objects over the in-memory raw client of
``test_zkclient_raw`` (each client its own tree, answering on the next turn of
the loop), the fault link is a recorder, actor look-ups go to a dict, and the
wall clock and host name are fixed values. No Ray, no ZooKeeper server, no
thread. :class:`~actors.io.RealIO` is checked to be what the shells did before.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import threading
import time
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

import zk_registry.client as zk_client_module
from actors.broker import BrokerCore
from actors.consumer_host import ConsumerHostCore
from actors.context import RunContext
from actors.io import MakeCoordinatorFactory, RealIO
from actors.legacy_member import LegacyMember
from actors.metadata import HANDLE_LOOKUP_INTERVAL_S, LeaderCache, broker_actor_name
from actors.producer import ProducerCore
from emulator.broker.coordinators import CoordinatorFactory, make_coordinator_factory
from emulator.eventlog import iter_events
from emulator.events import Event, EventKind
from emulator.host.core import MemberSpec
from emulator.modern.coordinator import GroupCoordinator
from emulator.modern.messages import HeartbeatRequest
from tests.unit.loop_time import ManualTimeLoop, run_on
from tests.unit.test_zkclient_raw import StubRaw
from zk_registry.client import ZkClient, asyncio_dispatch
from zk_registry.layout import make_consumer_id
from zk_registry.proxy import FaultProxy, ProxyMode

WALL_MS = 1_700_000_000_123  # the fake io's wall clock (far from the machine's)
HOST = "sim-host"
ZK_HOSTS = ("zk-a:2181", "zk-b:2181")
TopicPartition = tuple[str, int]


class FakeLink:
    """A fault link that records what the shell does with it."""

    def __init__(self, upstream: Sequence[str]) -> None:
        self.upstream = list(upstream)
        self.latency_s = -1.0
        self.started = False
        self.closed = False
        self.modes: list[ProxyMode] = []

    @property
    def address(self) -> str:
        return "link.sim:7"

    async def start(self) -> int:
        self.started = True
        return 7

    async def close(self) -> None:
        self.closed = True

    def set_mode(self, mode: ProxyMode) -> None:
        self.modes.append(mode)


class FakeIO:
    """An :class:`ActorIO` that records every call and answers from memory."""

    def __init__(self) -> None:
        self.tapped: list[Event] = []
        self.tap: Callable[[Event], None] | None = self.tapped.append
        self.coordinator_factory: MakeCoordinatorFactory | None = None
        self.clients: list[tuple[str, float, dict[str, Any], ZkClient]] = []
        self.links: list[FakeLink] = []
        self.expired: list[tuple[str, int, bytes]] = []
        self.actors: dict[str, Any] = {}
        self.lookups: list[str] = []

    def zk_client(self, connect: str, session_timeout_s: float, **options: Any) -> ZkClient:
        seen = dict(options)
        # As a one-loop engine does: callbacks on the running loop, no thread.
        options.setdefault("dispatch", asyncio_dispatch(asyncio.get_running_loop()))
        client = ZkClient(connect, session_timeout_s, raw_factory=StubRaw, **options)
        self.clients.append((connect, session_timeout_s, seen, client))
        return client

    def zk_link(self, upstream: Sequence[str]) -> FakeLink:
        self.links.append(FakeLink(upstream))
        return self.links[-1]

    async def expire_session(self, connect: str, session_id: int, password: bytes) -> None:
        self.expired.append((connect, session_id, password))

    def lookup_actor(self, name: str) -> Any | None:
        self.lookups.append(name)
        return self.actors.get(name)

    def wall_ms(self) -> int:
        return WALL_MS

    def hostname(self) -> str:
        return HOST


def _ctx(tmp_path: Path, protocol: str = "zookeeper", **kw: Any) -> RunContext:
    base: dict[str, Any] = {
        "run_id": "r1",
        "protocol": protocol,
        "events_dir": str(tmp_path / "events"),
        "time_scale": 1.0,
        "origin_wall": time.time(),
        "zk_connect": ",".join(ZK_HOSTS) + "/runs/r1",
        "zk_hosts": ZK_HOSTS,
        "seed": 7,
        "group": "g",
        "validate_events": True,
    }
    base.update(kw)
    return RunContext(**base)


def _nodes(tmp_path: Path, actor: str) -> list[tuple[object, object]]:
    return [(e["kind"], e["node"]) for e in iter_events(tmp_path / "events" / f"{actor}.msgpack")]


async def _until(cond: Callable[[], bool], limit: int = 500) -> None:
    """Let the loop run until ``cond()`` holds (bounded by turns, not time)."""
    for _ in range(limit):
        if cond():
            return
        await asyncio.sleep(0)
    raise AssertionError("the loop settled without it")


class _Method:
    """``handle.method.remote(*args)`` answering at once with ``fn(*args)``."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.calls: list[tuple[Any, ...]] = []

    def remote(self, *args: Any) -> asyncio.Future[Any]:
        self.calls.append(args)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        fut.set_result(self.fn(*args))
        return fut


# ------------------------------------------------------------------ RealIO


def test_the_shells_default_to_the_real_io(tmp_path: Path) -> None:
    b = BrokerCore(0, _ctx(tmp_path), [("t", 0)], 9092)
    assert isinstance(b.io, RealIO) and b.peers.io is b.io
    assert b.io.tap is None and b.io.coordinator_factory is None
    p = ProducerCore(0, _ctx(tmp_path), {"t": 1}, 1.0, "round-robin", 10, None, {})
    assert isinstance(p.io, RealIO) and p.leader_cache.io is p.io
    # The writers stamp this machine's name, as before the seam.
    b.events.emit(EventKind.BROKER_STOPPED, broker=0)
    b.events.close()
    assert _nodes(tmp_path, "broker-0") == [(EventKind.BROKER_STOPPED.value, socket.gethostname())]


def test_the_real_io_is_the_machines_clock_and_name() -> None:
    io = RealIO()
    before = int(time.time() * 1000)
    got = io.wall_ms()
    assert before <= got <= int(time.time() * 1000) and isinstance(got, int)
    assert io.hostname() == socket.gethostname()


def test_the_real_io_looks_actors_up_only_in_a_process_connected_to_ray(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    io = RealIO()
    monkeypatch.delitem(sys.modules, "ray", raising=False)
    assert io.lookup_actor("r1-zookeeper-b0") is None  # Ray never loaded: nothing to ask

    asked: list[str] = []
    fake_ray = types.ModuleType("ray")
    state = {"up": False, "fail": False}

    def get_actor(name: str) -> str:
        asked.append(name)
        if state["fail"]:
            raise ValueError(f"Failed to look up actor with name '{name}'")
        return f"handle:{name}"

    fake_ray.is_initialized = lambda: state["up"]  # type: ignore[attr-defined]
    fake_ray.get_actor = get_actor  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ray", fake_ray)
    assert io.lookup_actor("a") is None and asked == []  # loaded but not connected
    state["up"] = True
    assert io.lookup_actor("a") == "handle:a"
    state["fail"] = True
    assert io.lookup_actor("b") is None  # no such actor (yet): None, not an error
    assert asked == ["a", "b"]


def test_the_real_io_builds_todays_zookeeper_client_and_proxy() -> None:
    io = RealIO()
    zk = io.zk_client("127.0.0.1:1/chroot", 6.0)
    # Not started: nothing connects. No dispatch given: ZkClient's own worker thread.
    assert zk._dispatch is zk_client_module._default_dispatch
    assert zk.connect_string == "127.0.0.1:1/chroot" and zk.session_timeout_s == 6.0
    link = io.zk_link(ZK_HOSTS)
    assert isinstance(link, FaultProxy)
    assert link.mode is ProxyMode.PASS and link.latency_s == 0.0
    assert link._upstream == [("zk-a", 2181), ("zk-b", 2181)]


def test_the_real_io_expires_a_session_off_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    import zk_registry.faults

    calls: list[tuple[str, int, bytes, bool]] = []

    def expire_session(connect: str, sid: int, pwd: bytes) -> float:
        calls.append((connect, sid, pwd, threading.current_thread() is threading.main_thread()))
        return 0.0

    monkeypatch.setattr(zk_registry.faults, "expire_session", expire_session)
    asyncio.run(RealIO().expire_session("zk-a:2181,zk-b:2181", 0x42, b"pw"))
    assert calls == [("zk-a:2181,zk-b:2181", 0x42, b"pw", False)]  # in an executor thread


# ------------------------------------------------------------- LeaderCache


def test_the_leader_cache_looks_a_broker_up_through_the_io(tmp_path: Path) -> None:
    io = FakeIO()
    ctx = _ctx(tmp_path)
    loop = ManualTimeLoop(now=5_000.0)
    name = broker_actor_name("r1", "zookeeper", 0)

    async def go() -> None:
        brokers: dict[int, Any] = {}
        cache = LeaderCache(ctx, brokers, io=io)
        assert cache.handle(0) is None and io.lookups == [name]  # not up yet
        assert cache.handle(0) is None and io.lookups == [name]  # too soon to ask again
        loop.now += HANDLE_LOOKUP_INTERVAL_S
        io.actors[name] = "broker-0 handle"
        assert cache.handle(0) == "broker-0 handle" and io.lookups == [name, name]
        assert brokers == {0: "broker-0 handle"}  # the shared dict holds it now
        assert cache.handle(0) == "broker-0 handle" and len(io.lookups) == 2  # known: no ask

    run_on(loop, go())


def test_the_producer_finds_its_broker_and_logs_through_the_io(tmp_path: Path) -> None:
    io = FakeIO()
    broker = types.SimpleNamespace(
        produce=_Method(lambda batch: {tp: (10, 10 + n) for tp, n in batch.items()})
    )
    io.actors[broker_actor_name("r1", "zookeeper", 0)] = broker

    async def go() -> ProducerCore:
        p = ProducerCore(0, _ctx(tmp_path), {"t": 1}, 1.0, "round-robin", 10, None, {}, io=io)
        assert p.leader_cache.io is io
        await p._send(0, {("t", 0): 3})  # no handle for broker 0 yet: looked up by name
        p.events.close()
        return p

    p = asyncio.run(go())
    assert broker.produce.calls == [({("t", 0): 3},)] and p.produced == 3
    assert _nodes(tmp_path, "producer-0") == [(EventKind.PRODUCED.value, HOST)]
    assert [(e["kind"], e["node"], e["offset_start"]) for e in io.tapped] == [
        (EventKind.PRODUCED.value, HOST, 10)
    ]


# ------------------------------------------------------------------ broker


def test_the_broker_registers_and_elects_on_the_ios_zookeeper_and_wall_clock(
    tmp_path: Path,
) -> None:
    io = FakeIO()
    ctx = _ctx(tmp_path)

    async def go() -> StubRaw:
        b = BrokerCore(0, ctx, [], 9092, io=io)
        await b.start()  # registration, state read, controller election
        raw: StubRaw = b._zk.kazoo  # type: ignore[union-attr]
        await _until(lambda: "/controller" in raw.nodes)
        await b.stop()
        return raw

    raw = asyncio.run(go())
    [(connect, session_s, options, _client)] = io.clients
    assert connect == ctx.zk_connect and session_s == ctx.scaled_s(6000.0)
    assert options == {"auth": None}  # no dispatch asked for: the io chooses
    registration = json.loads(raw.nodes["/brokers/ids/0"][0] or b"")
    assert registration["timestamp"] == str(WALL_MS)
    controller = json.loads(raw.nodes["/controller"][0] or b"")
    assert controller == {"version": 1, "brokerid": 0, "timestamp": str(WALL_MS)}
    kinds = _nodes(tmp_path, "broker-0")
    assert (EventKind.BROKER_STARTED.value, HOST) in kinds and kinds[-1] == (
        EventKind.BROKER_STOPPED.value,
        HOST,
    )
    assert {str(n) for _, n in kinds} == {HOST}
    assert [(e["kind"], e["node"]) for e in io.tapped] == kinds  # the tap saw what was written


def test_the_broker_makes_its_coordinators_with_the_ios_factory(tmp_path: Path) -> None:
    io = FakeIO()
    asked: list[tuple[str, int, int, dict[str, int]]] = []
    made: list[tuple[str, GroupCoordinator]] = []

    def patched(
        protocol: str,
        kafka: dict[str, object],
        broker_id: int,
        seed: int,
        partitions_per_topic: dict[str, int],
        *,
        mixed_protocols: bool = False,
    ) -> CoordinatorFactory:
        asked.append((protocol, broker_id, seed, partitions_per_topic))
        real = make_coordinator_factory(protocol, kafka, broker_id, seed, partitions_per_topic)

        def factory(group_id: str, committed: dict[TopicPartition, int] | None) -> GroupCoordinator:
            made.append((group_id, real(group_id, committed)))
            return made[-1][1]

        return factory

    io.coordinator_factory = patched
    ctx = _ctx(tmp_path, "classic-eager", partitions_per_topic={"t": 2})

    async def go() -> BrokerCore:
        b = BrokerCore(3, ctx, [], 9092, offsets_leaders={0: 3}, io=io)
        answers = await b.group_exchange(
            "host-0", [HeartbeatRequest(corr=1, group_id="g", generation_id=1, member_id="m")]
        )
        assert [a.corr for a in answers] == [1]
        return b

    b = asyncio.run(go())
    assert asked == [("classic-eager", 3, 7, {"t": 2})]
    assert b.coordinators is not None
    assert [g for g, _ in made] == ["g"] and b.coordinators.coordinators["g"] is made[0][1]
    # The metadata image is the broker's own, shared: grown topics reach the factory.
    assert asked[0][3] is b.manager.partition_counts


# ---------------------------------------------------------------- consumer host


def _spec(use_proxy: bool) -> MemberSpec:
    return MemberSpec(
        "c-0",
        make_consumer_id("g", "driver-host", 1, "89abcdef01234567"),
        {"t": 1},
        use_proxy=use_proxy,
    )


def test_a_legacy_member_runs_on_the_ios_link_client_and_wall_clock(tmp_path: Path) -> None:
    io = FakeIO()
    ctx = _ctx(tmp_path)

    async def go() -> ConsumerHostCore:
        host = ConsumerHostCore(0, ctx, {}, io=io)
        assert host.leader_cache.io is io
        assert await host.add_consumers([_spec(use_proxy=True)]) == ["c-0"]
        member = host.members["c-0"]
        assert isinstance(member, LegacyMember)
        # The consumer id is restamped on the io's wall clock when it is created.
        assert host.specs["c-0"].consumer_id == f"g_driver-host-{WALL_MS}-89abcdef"
        raw: StubRaw = member.zk.kazoo  # type: ignore[union-attr]
        path = f"/consumers/g/ids/g_driver-host-{WALL_MS}-89abcdef"
        await _until(lambda: path in raw.nodes)
        registration = json.loads(raw.nodes[path][0] or b"")
        assert registration["timestamp"] == str(WALL_MS)  # the driver's wall_ms is the io's
        # A session expiry goes to the io, with the member's session.
        assert await host.expire_session("c-0")
        assert io.expired == [(",".join(ZK_HOSTS), 0x100, b"secret")]
        # A crash cuts the link (DOWN), then closes the client and the link.
        assert await host.crash("c-0")
        host.events.close()
        return host

    asyncio.run(go())
    [link] = io.links
    assert link.upstream == list(ZK_HOSTS) and link.latency_s == 0.0
    assert link.started and link.modes == [ProxyMode.DOWN] and link.closed
    [(connect, session_s, options, client)] = io.clients
    # Through the link, keeping the run's chroot; callbacks on the host's loop.
    assert connect == "link.sim:7/runs/r1" and session_s == ctx.scaled_s(6000.0)
    assert {"dispatch", "on_state", "on_new_session", "counter", "auth"} <= set(options)
    assert client.kazoo.closed
    logged = _nodes(tmp_path, "host-0")
    assert logged and {str(n) for _, n in logged} == {HOST}
    assert (EventKind.ZK_SESSION_STATE.value, HOST) in logged


def test_a_member_without_a_fault_knob_gets_no_link(tmp_path: Path) -> None:
    io = FakeIO()

    async def go() -> None:
        host = ConsumerHostCore(0, _ctx(tmp_path), {}, io=io)
        await host.add_consumers([_spec(use_proxy=False)])
        assert await host.crash("c-0")

    asyncio.run(go())
    assert io.links == [] and io.clients[0][0] == ",".join(ZK_HOSTS) + "/runs/r1"


def test_a_restarted_consumer_id_takes_the_ios_clock_and_host(tmp_path: Path) -> None:
    host = ConsumerHostCore(0, _ctx(tmp_path), {}, io=FakeIO())
    # An id of Kafka's shape keeps its host; only the time and the UUID are new.
    got = host._new_consumer_id(_spec(use_proxy=False))
    assert got.startswith(f"g_driver-host-{WALL_MS}-") and not got.endswith("-89abcdef")
    # An id without a host part (a consumer.id config) takes the io's host name.
    custom = MemberSpec("c-1", "g_custom", {"t": 1})
    assert host._new_consumer_id(custom).startswith(f"g_{HOST}-{WALL_MS}-")
