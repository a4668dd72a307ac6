"""The legacy driver against a real ZooKeeper: each request, its znodes and its op counts.

Each test gets a fresh chroot (``zk_connect``) on the session's standalone
server (tickTime 200 ms, so a 4 s session timeout is granted as asked).
Expected payloads are literals; expected op counts are the A7 formulas
(kafka-protocols.md) written out for the sizes each test sets up.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from emulator.legacy.messages import (
    ClaimOwnership,
    ClaimResult,
    CloseSession,
    CommitOffsets,
    FetchOffsets,
    GroupView,
    ReadAssignmentContext,
    ReadCluster,
    ReadRebalanceContext,
    RebalanceContext,
    RegisterConsumer,
    ReleaseOwnership,
    Sleep,
    WatchBrokers,
)
from zk_registry import layout as L
from zk_registry.brokers import create_topic, register_broker
from zk_registry.client import WatchEvent, ZkClient, asyncio_dispatch
from zk_registry.faults import expire_session
from zk_registry.legacy_driver import LegacyZkDriver
from zk_registry.proxy import FaultProxy, ProxyMode

pytestmark = pytest.mark.zk

GROUP = "g"
SESSION_S = 4.0
TS = 1441996002307


@dataclass
class Member:
    client: ZkClient
    driver: LegacyZkDriver
    cid: str
    watch_events: list[tuple[str, WatchEvent]] = field(default_factory=list)
    new_sessions: list[float] = field(default_factory=list)

    def thread(self, i: int = 0) -> str:
        return L.thread_id(self.cid, i)


class Harness:
    """Clients, members, brokers and topics inside one test's chroot; closes them all."""

    def __init__(self, connect: str) -> None:
        self.connect = connect
        self.clients: list[ZkClient] = []
        self._rid = 0

    def rid(self) -> int:
        self._rid += 1
        return self._rid

    async def client(self, **kwargs: Any) -> ZkClient:
        loop = asyncio.get_running_loop()
        c = ZkClient(self.connect, SESSION_S, dispatch=asyncio_dispatch(loop), **kwargs)
        await c.start_async()
        self.clients.append(c)
        return c

    async def member(
        self,
        index: int,
        subscription: Mapping[str, int] | None = None,
        *,
        register: bool = True,
        **driver_kwargs: Any,
    ) -> Member:
        cid = L.make_consumer_id(
            GROUP, f"host{index}", TS + index, f"{0x9A86B603 + index:08x}0000abcd"
        )
        new_sessions: list[float] = []
        client = await self.client(on_new_session=lambda: new_sessions.append(time.monotonic()))
        member = Member(client, None, cid, new_sessions=new_sessions)  # type: ignore[arg-type]
        member.driver = LegacyZkDriver(
            client,
            GROUP,
            cid,
            SESSION_S,
            on_watch=lambda source, ev: member.watch_events.append((source, ev)),
            **{"wall_ms": lambda: TS + index, **driver_kwargs},
        )
        if register:
            res = await member.driver.execute(
                RegisterConsumer(self.rid(), dict(subscription or {"t": 1}))
            )
            assert res.error is None, res
        return member

    async def brokers(self, ids: list[int]) -> ZkClient:
        c = await self.client()
        for b in ids:
            await register_broker(
                c, b, f"broker{b}", 9092, timestamp_ms=TS, session_timeout_s=SESSION_S
            )
        return c

    async def topic(self, name: str, partitions: int, brokers: list[int]) -> dict[int, list[int]]:
        c = self.clients[0] if self.clients else await self.client()
        return await create_topic(c, name, partitions, 1, random.Random(0), broker_ids=brokers)

    async def close(self) -> None:
        for c in reversed(self.clients):
            await c.stop_async()


def run(connect: str, scenario: Callable[[Harness], Awaitable[None]]) -> None:
    async def main() -> None:
        h = Harness(connect)
        try:
            await asyncio.wait_for(scenario(h), timeout=45)
        finally:
            await h.close()

    asyncio.run(main())


async def until(predicate: Callable[[], object], timeout: float = 10.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        await asyncio.sleep(0.02)


# --------------------------------------------------------------------------- registration


def test_register_then_read_back(zk_connect: str) -> None:
    async def scenario(h: Harness) -> None:
        m = await h.member(0, register=False)
        res = await m.driver.execute(RegisterConsumer(h.rid(), {"t": 2}))
        assert res.error is None and res.value is None
        # Fresh chroot: create (NoNode), createPersistent /consumers/g/ids (NoNode),
        # /consumers/g (NoNode), /consumers, /consumers/g, /consumers/g/ids, create again = 7
        # writes; then reinitializeConsumer's subscriptions: exists + getChildren of /ids and
        # exists of /brokers/topics/t = 3 reads.
        assert (res.reads, res.writes) == (3, 7)
        data, stat = await m.client.get_async(L.consumer_id_path(GROUP, m.cid))
        assert data == (
            b'{"version":1,"subscription":{"t":2},"pattern":"static","timestamp":"1441996002307"}'
        )
        assert stat.ephemeralOwner == m.client.session_id
        assert sorted(m.driver.watched_paths) == ["/brokers/topics/t", "/consumers/g/ids"]
        # ZkClient.createPersistent(path, true) left the containers with null data.
        for container in ("/consumers", "/consumers/g", "/consumers/g/ids"):
            data, stat = await m.client.get_async(container)
            assert data is None and stat.dataLength == 0, container

        res = await m.driver.execute(ReadRebalanceContext(h.rid()))
        assert res.error is None
        assert res.value == RebalanceContext(my_subscription={"t": 2}, brokers=())
        assert (res.reads, res.writes) == (2, 0)  # my node + getChildren (no /brokers/ids)

    run(zk_connect, scenario)


def test_register_backs_off_while_a_stale_node_exists(zk_connect: str) -> None:
    """ZOOKEEPER-1740 handling: wait a session timeout while another session's node is there."""

    async def scenario(h: Harness) -> None:
        stale = await h.client()
        sleeps: list[float] = []

        async def fake_sleep(seconds: float) -> None:
            sleeps.append(seconds)
            await stale.stop_async()  # the old session finally expires: its node goes

        m = await h.member(0, register=False, sleep=fake_sleep)
        path = L.consumer_id_path(GROUP, m.cid)
        await stale.create_persistent_recursive(L.consumer_ids_path(GROUP))
        await stale.create_async(path, b"registration of an older session", ephemeral=True)
        res = await m.driver.execute(RegisterConsumer(h.rid(), {"t": 1}))
        assert res.error is None, res
        assert sleeps == [SESSION_S]  # back-off = zookeeper.session.timeout.ms
        data, stat = await m.client.get_async(path)
        assert data.startswith(b'{"version":1,"subscription":{"t":1}')
        assert stat.ephemeralOwner == m.client.session_id
        # create (NodeExists) + read back + readDataMaybeNull, sleep, create = 2 writes;
        # 2 reads, plus the 3 subscription reads.
        assert (res.reads, res.writes) == (2 + 3, 2)

    run(zk_connect, scenario)


def test_register_gives_up_after_bounded_backoffs(zk_connect: str) -> None:
    async def scenario(h: Harness) -> None:
        other = await h.client()
        sleeps: list[float] = []

        async def fake_sleep(seconds: float) -> None:
            sleeps.append(seconds)

        m = await h.member(0, register=False, sleep=fake_sleep, zk_bug_max_retries=2)
        await other.create_persistent_recursive(L.consumer_ids_path(GROUP))
        await other.create_async(L.consumer_id_path(GROUP, m.cid), b"not mine", ephemeral=True)
        res = await m.driver.execute(RegisterConsumer(h.rid(), {"t": 1}))
        assert res.error == "NodeExistsError"
        assert sleeps == [SESSION_S, SESSION_S]
        assert (res.reads, res.writes) == (6, 3)

    run(zk_connect, scenario)


def test_register_over_our_own_identical_node_is_success(zk_connect: str) -> None:
    """The create landed before a connection loss: NodeExists with equal data is success."""

    async def scenario(h: Harness) -> None:
        m = await h.member(0, register=False, auto_watch=False)
        path = L.consumer_id_path(GROUP, m.cid)
        data = L.encode_consumer_registration({"t": 1}, TS)
        await m.client.create_persistent_recursive(L.consumer_ids_path(GROUP))
        await m.client.create_async(path, data, ephemeral=True)
        res = await m.driver.execute(RegisterConsumer(h.rid(), {"t": 1}))
        assert res.error is None
        assert (res.reads, res.writes) == (1, 1)

    run(zk_connect, scenario)


# --------------------------------------------------------------------------- claims


def test_claim_conflict_reports_the_holder_and_rollback_deletes(zk_connect: str) -> None:
    async def scenario(h: Harness) -> None:
        a = await h.member(0)
        b = await h.member(1)
        await a.client.create_persistent_recursive(L.owners_topic_path(GROUP, "t"))

        res = await a.driver.execute(
            ClaimOwnership(h.rid(), {("t", 0): a.thread(0), ("t", 1): a.thread(0)})
        )
        assert res.error is None
        assert isinstance(res.value, ClaimResult)
        assert (res.value.created, res.value.conflicts) == ((("t", 0), ("t", 1)), {})
        for p in (0, 1):  # each created node's czxid: ZooKeeper's order of the claims
            _, stat = await a.client.get_async(L.owner_path(GROUP, "t", p))
            assert res.value.zxids[("t", p)] == stat.czxid
        assert (res.reads, res.writes) == (0, 2)

        res = await b.driver.execute(
            ClaimOwnership(h.rid(), {("t", 1): b.thread(0), ("t", 2): b.thread(0)})
        )
        assert res.error is None
        claim = res.value
        assert isinstance(claim, ClaimResult)
        assert claim.created == (("t", 2),)  # every create is tried
        assert claim.conflicts == {("t", 1): a.thread(0)}
        assert (res.reads, res.writes) == (1, 2)  # 2 creates + 1 read-back on NodeExists
        owner, stat = await b.client.get_async(L.owner_path(GROUP, "t", 2))
        assert owner == b.thread(0).encode()
        assert stat.ephemeralOwner == b.client.session_id

        res = await b.driver.execute(ReleaseOwnership(h.rid(), claim.created, rollback=True))
        assert res.error is None and (res.reads, res.writes) == (0, 1)
        assert await b.client.exists_async(L.owner_path(GROUP, "t", 2)) is None
        assert (await a.client.get_async(L.owner_path(GROUP, "t", 1)))[0] == a.thread(0).encode()

    run(zk_connect, scenario)


def test_claim_over_a_prior_identical_node_is_success(zk_connect: str) -> None:
    async def scenario(h: Harness) -> None:
        a = await h.member(0)
        path = L.owner_path(GROUP, "t", 0)
        await a.client.create_persistent_recursive(L.owners_topic_path(GROUP, "t"))
        await a.client.create_async(path, a.thread(0).encode(), ephemeral=True)  # "before the loss"
        res = await a.driver.execute(ClaimOwnership(h.rid(), {("t", 0): a.thread(0)}))
        assert res.error is None
        _, stat = await a.client.get_async(path)
        assert res.value == ClaimResult(
            created=(("t", 0),), conflicts={}, zxids={("t", 0): stat.czxid}
        )
        assert (res.reads, res.writes) == (1, 1)

    run(zk_connect, scenario)


def test_claim_creates_missing_parents(zk_connect: str) -> None:
    async def scenario(h: Harness) -> None:
        a = await h.member(0)
        res = await a.driver.execute(ClaimOwnership(h.rid(), {("t", 0): a.thread(0)}))
        _, stat = await a.client.get_async(L.owner_path(GROUP, "t", 0))
        assert res.error is None
        assert res.value == ClaimResult((("t", 0),), {}, {("t", 0): stat.czxid})
        # create (NoNode); createPersistent owners/t (NoNode), owners, owners/t; create
        assert (res.reads, res.writes) == (0, 5)

    run(zk_connect, scenario)


class _VanishingClient(ZkClient):
    """Deletes an owner node right before the driver reads it back (a holder that left)."""

    victim: ZkClient

    async def get_async(self, path: str, watch: Any = None, tally: Any = None) -> Any:
        if "/owners/" in path:
            await self.victim.stop_async()  # the holder's session ends: its node vanishes
        return await super().get_async(path, watch, tally)


def test_claim_conflict_with_a_holder_that_vanished(zk_connect: str) -> None:
    async def scenario(h: Harness) -> None:
        holder = await h.client()
        await holder.create_persistent_recursive(L.owners_topic_path(GROUP, "t"))
        await holder.create_async(L.owner_path(GROUP, "t", 0), b"someone-0", ephemeral=True)
        c = _VanishingClient(zk_connect, SESSION_S)
        c.victim = holder
        await c.start_async()
        h.clients.append(c)
        driver = LegacyZkDriver(c, GROUP, "g_me", SESSION_S)
        res = await driver.execute(ClaimOwnership(h.rid(), {("t", 0): "g_me-0"}))
        # Kafka does not retry the create: the read found nothing, so it is a conflict.
        assert res.value == ClaimResult(created=(), conflicts={("t", 0): None})
        assert (res.reads, res.writes) == (1, 1)

    run(zk_connect, scenario)


def test_release_ignores_missing_nodes(zk_connect: str) -> None:
    async def scenario(h: Harness) -> None:
        a = await h.member(0)
        res = await a.driver.execute(ReleaseOwnership(h.rid(), (("t", 0), ("t", 1))))
        assert res.error is None and (res.reads, res.writes) == (0, 2)

    run(zk_connect, scenario)


# --------------------------------------------------------------------------- offsets


def test_offsets_round_trip(zk_connect: str) -> None:
    async def scenario(h: Harness) -> None:
        a = await h.member(0)
        tps = (("t", 0), ("t", 1))
        res = await a.driver.execute(FetchOffsets(h.rid(), tps))
        assert res.value == {("t", 0): None, ("t", 1): None}
        assert (res.reads, res.writes) == (2, 0)

        res = await a.driver.execute(CommitOffsets(h.rid(), {("t", 0): 42, ("t", 1): 7}))
        assert res.error is None and res.value == [("t", 0), ("t", 1)]
        # (t,0): set (NoNode), createPersistent offsets/t (NoNode), offsets, offsets/t, create;
        # (t,1): set (NoNode), createPersistent offsets/t (exists), create.
        assert (res.reads, res.writes) == (0, 5 + 3)
        assert (await a.client.get_async(L.offset_path(GROUP, "t", 0)))[0] == b"42"

        res = await a.driver.execute(CommitOffsets(h.rid(), {("t", 0): 43}))
        assert res.value == [("t", 0)] and (res.reads, res.writes) == (0, 1)

        res = await a.driver.execute(FetchOffsets(h.rid(), tps))
        assert res.value == {("t", 0): 43, ("t", 1): 7}

    run(zk_connect, scenario)


# --------------------------------------------------------------------------- A7 op counts


@pytest.mark.parametrize("pipeline", [False, True])
def test_op_counts_match_a7(zk_connect: str, pipeline: bool) -> None:
    n_brokers, n_consumers = 3, 4
    topics = ("t1", "t2")

    async def scenario(h: Harness) -> None:
        await h.brokers([1, 2, 3])
        assert await h.topic("t1", 4, [1, 2, 3]) and await h.topic("t2", 6, [1, 2, 3])
        members = [
            await h.member(i, {"t1": 1, "t2": 2}, pipeline=pipeline) for i in range(n_consumers)
        ]
        me = members[0]

        res = await me.driver.execute(ReadCluster(h.rid()))
        assert res.error is None and res.value == [1, 2, 3]
        assert (res.reads, res.writes) == (1 + n_brokers, 0)

        res = await me.driver.execute(ReadRebalanceContext(h.rid()))
        assert res.value == RebalanceContext({"t1": 1, "t2": 2}, (1, 2, 3))
        assert (res.reads, res.writes) == (1 + 1 + n_brokers, 0)

        res = await me.driver.execute(ReadAssignmentContext(h.rid(), topics))
        view = res.value
        assert isinstance(view, GroupView)
        assert set(view.consumers) == {m.cid for m in members}
        assert all(sub == {"t1": 1, "t2": 2} for sub in view.consumers.values())
        assert dict(view.partitions_per_topic) == {"t1": (0, 1, 2, 3), "t2": (0, 1, 2, 3, 4, 5)}
        # my node again + T topics + getChildren /ids + C members + getChildren /ids
        assert (res.reads, res.writes) == (1 + len(topics) + 1 + n_consumers + 1, 0)

        mine = (("t1", 0), ("t2", 0), ("t2", 1))
        res = await me.driver.execute(FetchOffsets(h.rid(), mine))
        assert (res.reads, res.writes) == (len(mine), 0)
        await me.client.create_persistent_recursive(L.owners_topic_path(GROUP, "t1"))
        await me.client.create_persistent_recursive(L.owners_topic_path(GROUP, "t2"))
        res = await me.driver.execute(ClaimOwnership(h.rid(), dict.fromkeys(mine, me.thread(0))))
        assert (res.reads, res.writes) == (0, len(mine))
        res = await me.driver.execute(ReleaseOwnership(h.rid(), mine))
        assert (res.reads, res.writes) == (0, len(mine))

    run(zk_connect, scenario)


def test_wildcard_member_is_resolved_against_topics(zk_connect: str) -> None:
    async def scenario(h: Harness) -> None:
        await h.brokers([1])
        await h.topic("t1", 2, [1])
        await h.topic("t2", 1, [1])
        await h.topic("other", 1, [1])
        me = await h.member(0, {"t1": 1})
        wild = await h.client()
        await wild.create_async(
            L.consumer_id_path(GROUP, "g_wild"),
            L.encode_consumer_registration({"t.*": 2}, TS, L.WHITE_LIST_PATTERN),
            ephemeral=True,
        )
        res = await me.driver.execute(ReadAssignmentContext(h.rid(), ("t1",)))
        view = res.value
        assert isinstance(view, GroupView)
        assert view.consumers["g_wild"] == {"t1": 2, "t2": 2}
        assert view.consumers[me.cid] == {"t1": 1}
        # + 1 getChildren /brokers/topics for the wildcard member
        assert res.reads == 1 + 1 + 1 + 2 + 1 + 1

    run(zk_connect, scenario)


# --------------------------------------------------------------------------- errors


def test_errors_are_results_not_exceptions(zk_connect: str) -> None:
    async def scenario(h: Harness) -> None:
        m = await h.member(0, register=False)
        res = await m.driver.execute(ReadRebalanceContext(h.rid()))
        assert res.error == "NoNodeError" and (res.reads, res.writes) == (1, 0)
        res = await m.driver.execute(ReadAssignmentContext(h.rid(), ("t",)))
        assert res.error == "NoNodeError"
        with pytest.raises(TypeError):
            await m.driver.execute(Sleep(h.rid(), until_ms=5.0))

    run(zk_connect, scenario)


def test_close_session_removes_ephemerals(zk_connect: str) -> None:
    async def scenario(h: Harness) -> None:
        observer = await h.client()
        a = await h.member(0)
        await a.driver.execute(ClaimOwnership(h.rid(), {("t", 0): a.thread(0)}))
        res = await a.driver.execute(CloseSession(h.rid()))
        assert res.error is None and (res.reads, res.writes) == (0, 0)
        assert await observer.get_children_async(L.consumer_ids_path(GROUP)) == []
        assert await observer.get_children_async(L.owners_topic_path(GROUP, "t")) == []
        res = await a.driver.execute(ReadRebalanceContext(h.rid()))
        assert res.error == "ConnectionClosedError"

    run(zk_connect, scenario)


# --------------------------------------------------------------------------- watches


def test_ids_watch_fires_on_change_and_after_real_session_expiry(zk_connect: str) -> None:
    async def scenario(h: Harness) -> None:
        a = await h.member(0)
        assert a.watch_events == []  # subscribing delivers nothing
        b = await h.member(1)
        await until(lambda: [s for s, _ in a.watch_events] == ["ids"], what="ids watch")
        source, event = a.watch_events[0]
        assert event.reason == "changed"
        assert sorted(event.children or ()) == sorted([a.cid, b.cid])
        assert a.client.counter.watch_notifications == 1

        # Expire a's session on the server (a second client takes it over and closes it).
        old_sid = a.client.session_id
        sid, password = a.client.client_id or (0, b"")
        await asyncio.get_running_loop().run_in_executor(
            None,
            lambda: expire_session(
                zk_connect, sid, password, ephemeral_path=L.consumer_id_path(GROUP, a.cid)
            ),
        )
        await until(lambda: a.new_sessions, what="handleNewSession")
        assert a.client.session_id != old_sid and a.client.expirations == 1
        await until(lambda: len(a.watch_events) == 2, what="watch after expiry")
        source, event = a.watch_events[1]
        assert (source, event.reason) == ("ids", "new_session")
        assert event.children == (b.cid,)  # a's own node went with its session

        # handleNewSession re-registers; the watch keeps working on the new session.
        res = await a.driver.execute(RegisterConsumer(h.rid(), {"t": 1}))
        assert res.error is None and res.reads == 0  # no second subscription
        await until(lambda: len(a.watch_events) == 3, what="watch on the new session")
        assert sorted(a.watch_events[2][1].children or ()) == sorted([a.cid, b.cid])
        await b.driver.execute(CloseSession(h.rid()))
        await until(lambda: len(a.watch_events) == 4, what="watch after b leaves")
        assert a.watch_events[3][1].children == (a.cid,)

    run(zk_connect, scenario)


def test_topic_watch_and_watch_brokers(zk_connect: str) -> None:
    async def scenario(h: Harness) -> None:
        brokers = await h.brokers([1])
        await h.topic("t", 2, [1])
        a = await h.member(0, {"t": 1})
        res = await a.driver.execute(WatchBrokers(h.rid()))
        assert res.error is None and (res.reads, res.writes) == (2, 0)
        await register_broker(
            brokers, 2, "broker2", 9092, timestamp_ms=TS, session_timeout_s=SESSION_S
        )
        await until(lambda: any(s == "brokers" for s, _ in a.watch_events), what="brokers")
        # partition count change: the topic znode is rewritten (AdminUtils.addPartitions)
        await brokers.set_async(
            L.topic_path("t"), L.encode_topic_assignment({0: [1], 1: [1], 2: [2]})
        )
        await until(lambda: any(s == "topic:t" for s, _ in a.watch_events), what="topic watch")
        ev = next(e for s, e in a.watch_events if s == "topic:t")
        assert ev.data is not None and L.decode_topic_assignment(ev.data) == {
            0: [1],
            1: [1],
            2: [2],
        }

    run(zk_connect, scenario)


def test_watch_survives_a_reconnect_in_the_same_session(zk_connect: str) -> None:
    """Connection drops (no expiry): the watch is re-armed and reports what changed meanwhile."""
    upstream, _, chroot = zk_connect.partition("/")

    async def scenario(h: Harness) -> None:
        proxy = FaultProxy([upstream])
        await proxy.start()
        try:
            observer = await h.client()
            states: list[str] = []
            through_proxy = Harness(f"{proxy.address}/{chroot}")
            a = await through_proxy.member(0)
            h.clients.extend(through_proxy.clients)
            a.client._on_state = lambda state, _sid: states.append(state)
            sid = a.client.session_id

            proxy.set_mode(ProxyMode.DOWN)  # RST: kazoo sees the connection drop
            await until(lambda: "SUSPENDED" in states, what="SUSPENDED")
            await observer.create_async(L.consumer_id_path(GROUP, "g_other"), b"{}", ephemeral=True)
            # an operation issued while disconnected completes after the reconnect
            commit = asyncio.ensure_future(a.driver.execute(CommitOffsets(h.rid(), {("t", 0): 5})))
            await asyncio.sleep(0.2)
            proxy.set_mode(ProxyMode.PASS)
            await until(lambda: states[-1:] == ["CONNECTED"], what="reconnect")
            assert a.client.session_id == sid and a.new_sessions == []
            await until(lambda: a.watch_events, what="watch after reconnect")
            source, event = a.watch_events[0]
            assert (source, event.reason) == ("ids", "reconnected")
            assert sorted(event.children or ()) == sorted([a.cid, "g_other"])
            res = await asyncio.wait_for(commit, 10)
            assert res.error is None and res.value == [("t", 0)]

            # a reconnect with nothing changed delivers nothing; the watch stays armed
            states.clear()
            proxy.set_mode(ProxyMode.DOWN)
            await until(lambda: "SUSPENDED" in states, what="SUSPENDED again")
            proxy.set_mode(ProxyMode.PASS)
            await until(lambda: states[-1:] == ["CONNECTED"], what="reconnect again")
            await asyncio.sleep(0.3)
            assert len(a.watch_events) == 1
            await observer.delete_async(L.consumer_id_path(GROUP, "g_other"))
            await until(lambda: len(a.watch_events) == 2, what="watch still armed")
            assert a.watch_events[1][1].reason == "changed"
            assert a.watch_events[1][1].children == (a.cid,)
        finally:
            await proxy.close()

    run(zk_connect, scenario)


def test_a_proxy_with_latency_delays_every_round_trip_and_keeps_the_session(
    zk_connect: str,
) -> None:
    """``[group].zk_latency_ms``: a far-away client sees each answer two delays later."""
    upstream, _, chroot = zk_connect.partition("/")

    async def scenario(h: Harness) -> None:
        proxy = FaultProxy([upstream])
        await proxy.start()
        try:
            through = Harness(f"{proxy.address}/{chroot}")
            a = await through.member(0)
            h.clients.extend(through.clients)
            observer = await h.client()
            path = L.consumer_id_path(GROUP, a.cid)

            async def timed_read() -> float:
                t0 = asyncio.get_running_loop().time()
                data, _stat = await a.client.get_async(path)
                assert data
                return asyncio.get_running_loop().time() - t0

            fast = min([await timed_read() for _ in range(3)])
            proxy.latency_s = 0.15
            slow = [await timed_read() for _ in range(3)]
            assert fast < 0.1 and all(0.3 <= s < 1.5 for s in slow), (fast, slow)
            # A watch event is delayed too: the far client hears of a change late.
            sid = a.client.session_id
            await observer.create_async(L.consumer_id_path(GROUP, "g_other"), b"{}", ephemeral=True)
            await until(lambda: a.watch_events, what="watch through the slow link")
            proxy.latency_s = 0.0
            assert (await timed_read()) < 0.3
            assert a.client.session_id == sid  # the delay never cost the session
        finally:
            await proxy.close()

    run(zk_connect, scenario)
