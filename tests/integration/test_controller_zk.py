"""The 0.8.2.2 controller (zk_registry/controller.py) on a real ZooKeeper.

Each test gets a fresh chroot on the session's standalone server (tickTime
200 ms). Every "broker" has its own ZkClient, registers ``/brokers/ids/<id>``
and runs a :class:`BrokerController`; a broker dies by closing its session
(or by a server-side session expiry). States are checked in ZooKeeper, not
only in the controllers' caches.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from emulator.controller import LeaderIsr
from emulator.events import EventKind
from emulator.placement import AdminOperationError, assign_replicas_to_brokers
from zk_registry import layout as L
from zk_registry.brokers import create_partition_states, create_topic, register_broker
from zk_registry.client import ZkClient, ZkUtils, asyncio_dispatch
from zk_registry.controller import (
    BrokerController,
    ControllerConfig,
    PreferredReplicaElectionInProgressError,
    add_partitions,
    encode_leader_isr,
    read_leader_and_isr,
    request_preferred_election,
    update_leader_and_isr,
)
from zk_registry.faults import expire_session

pytestmark = pytest.mark.zk

SESSION_S = 2.0
TS = 1441996002307
QUIET = ControllerConfig(auto_leader_rebalance_enable=False, zk_session_timeout_s=SESSION_S)

TP = tuple[str, int]


@dataclass
class Node:
    broker_id: int
    client: ZkClient
    controller: BrokerController | None = None
    calls: list[tuple[dict[TP, LeaderIsr], str]] = field(default_factory=list)
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    @property
    def ctl(self) -> BrokerController:
        assert self.controller is not None
        return self.controller

    def reasons(self) -> list[str]:
        return [r for _, r in self.calls]

    def kinds(self, kind: EventKind) -> list[dict[str, Any]]:
        return [f for k, f in self.events if k == kind]


class Cluster:
    """Brokers (session + registration + controller) and an admin client in one chroot."""

    def __init__(self, connect: str) -> None:
        self.connect = connect
        self.clients: list[ZkClient] = []
        self.nodes: dict[int, Node] = {}
        self.admin: ZkClient | None = None

    async def client(self) -> ZkClient:
        c = ZkClient(self.connect, SESSION_S, dispatch=asyncio_dispatch(asyncio.get_running_loop()))
        await c.start_async()
        self.clients.append(c)
        return c

    async def adm(self) -> ZkClient:
        if self.admin is None:
            self.admin = await self.client()
            await ZkUtils(self.admin).make_sure_persistent_path_exists(L.BROKER_IDS_PATH)
            await ZkUtils(self.admin).make_sure_persistent_path_exists(L.BROKER_TOPICS_PATH)
        return self.admin

    async def broker(
        self,
        broker_id: int,
        *,
        controller: bool = True,
        config: ControllerConfig = QUIET,
        now_ms: Callable[[], float] | None = None,
    ) -> Node:
        await self.adm()
        c = await self.client()
        await register_broker(
            c, broker_id, f"broker{broker_id}", 9092, timestamp_ms=TS, session_timeout_s=SESSION_S
        )
        node = Node(broker_id, c)
        self.nodes[broker_id] = node
        if controller:
            await self.start_controller(node, config, now_ms=now_ms)
        return node

    async def start_controller(
        self,
        node: Node,
        config: ControllerConfig = QUIET,
        now_ms: Callable[[], float] | None = None,
    ) -> None:
        async def on_leader_and_isr(changes: dict[TP, LeaderIsr], reason: str) -> None:
            node.calls.append((changes, reason))

        def emit(kind: EventKind, **fields: Any) -> None:
            node.events.append((str(kind), fields))

        node.controller = BrokerController(
            node.client, node.broker_id, config, on_leader_and_isr, emit, now_ms=now_ms
        )
        await node.controller.start()

    async def kill(self, node: Node) -> None:
        """The broker dies: its controller stops and its session closes (ephemerals go)."""
        if node.controller is not None:
            await node.controller.stop()
        await node.client.stop_async()

    def active(self) -> list[Node]:
        return [
            n
            for n in self.nodes.values()
            if n.controller is not None and n.controller.is_controller and not n.client.stopped
        ]

    async def state(self, topic: str, partition: int) -> LeaderIsr | None:
        got = await read_leader_and_isr(await self.adm(), topic, partition)
        return None if got is None else got[0]

    async def topic(
        self,
        name: str,
        assignment: Mapping[int, list[int]],
        states: Mapping[int, LeaderIsr] | None = None,
        config: Mapping[str, str] | None = None,
    ) -> None:
        """Write ``/brokers/topics/<t>`` and the given states in one multi-op.

        Atomic, so a running controller never sees the topic without them
        (it would create the states itself first).
        """
        admin = await self.adm()
        zk = ZkUtils(admin)
        if config is not None:
            data = L.encode_topic_config(config)
            await zk.update_persistent_path(L.topic_config_path(name), data)

        def write() -> None:
            tx = admin.kazoo.transaction()
            tx.create(L.topic_path(name), L.encode_topic_assignment(assignment))
            if states:
                tx.create(L.topic_partitions_path(name))
                for p, st in states.items():
                    tx.create(L.topic_partition_path(name, p))
                    tx.create(L.partition_state_path(name, p), encode_leader_isr(st))
            results = tx.commit()
            assert not any(isinstance(r, Exception) for r in results), results

        await asyncio.to_thread(write)

    async def close(self) -> None:
        for n in self.nodes.values():
            if n.controller is not None:
                await n.controller.stop()
        for c in reversed(self.clients):
            await c.stop_async()


def run(connect: str, scenario: Callable[[Cluster], Awaitable[None]], timeout: float = 45) -> None:
    async def main() -> None:
        cluster = Cluster(connect)
        try:
            await asyncio.wait_for(scenario(cluster), timeout=timeout)
        finally:
            await cluster.close()

    asyncio.run(main())


async def until(predicate: Callable[[], object], timeout: float = 10.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        await asyncio.sleep(0.02)


async def until_state(
    cluster: Cluster,
    tp: TP,
    predicate: Callable[[LeaderIsr], bool],
    timeout: float = 10.0,
) -> LeaderIsr:
    deadline = time.monotonic() + timeout
    while True:
        st = await cluster.state(*tp)
        if st is not None and predicate(st):
            return st
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for the state of {tp}; last {st}")
        await asyncio.sleep(0.03)


async def controller_epoch_znode(cluster: Cluster) -> int:
    data, _ = await (await cluster.adm()).get_async(L.CONTROLLER_EPOCH_PATH)
    return L.decode_controller_epoch(data)


# --------------------------------------------------------------------------- election


def test_one_controller_and_epoch_bumps_on_each_failover(zk_connect: str) -> None:
    async def scenario(c: Cluster) -> None:
        n1 = await c.broker(1, now_ms=lambda: TS)
        n2 = await c.broker(2)
        n3 = await c.broker(3)
        assert [n.broker_id for n in c.active()] == [1]
        assert (n1.ctl.epoch, await controller_epoch_znode(c)) == (1, 1)
        data, stat = await (await c.adm()).get_async(L.CONTROLLER_PATH)
        assert data == b'{"version":1,"brokerid":1,"timestamp":"1441996002307"}'
        assert stat.ephemeralOwner == n1.client.session_id
        assert n1.kinds(EventKind.CONTROLLER_ELECTED) == [{"broker": 1, "generation": 1}]
        await until(lambda: n2.ctl.controller_id == 1 and n3.ctl.controller_id == 1)

        # A real server-side expiry of the controller's session.
        sid, pwd = n1.client.client_id or (0, b"")
        await asyncio.to_thread(
            expire_session, c.connect, sid, pwd, ephemeral_path=L.CONTROLLER_PATH
        )
        await until(lambda: len(c.active()) == 1 and c.active()[0] is not n1, what="new ctl")
        second = c.active()[0]
        assert second.broker_id in (2, 3)
        assert second.ctl.epoch == 2
        assert await controller_epoch_znode(c) == 2
        # The expired broker resigned on its new session and follows the new controller.
        await until(lambda: n1.ctl.controller_id == second.broker_id, what="n1 sees the new one")
        assert not n1.ctl.is_controller
        assert n1.kinds(EventKind.CONTROLLER_RESIGNED) == [
            {"broker": 1, "reason": "session_expired"}
        ]
        assert n1.client.expirations == 1
        await asyncio.sleep(0.3)
        assert len(c.active()) == 1

        # The second controller's broker dies (session closed): epoch 3, exactly one again.
        await c.kill(second)
        await until(lambda: len(c.active()) == 1 and c.active()[0] is not second, what="third")
        third = c.active()[0]
        assert third.ctl.epoch == 3 and await controller_epoch_znode(c) == 3
        assert third.kinds(EventKind.CONTROLLER_ELECTED)[-1] == {
            "broker": third.broker_id,
            "generation": 3,
        }
        others = [n for n in (n1, n2, n3) if n is not second and n is not third]
        await until(lambda: all(n.ctl.controller_id == third.broker_id for n in others))
        await asyncio.sleep(0.3)
        assert [n.broker_id for n in c.active()] == [third.broker_id]

    run(zk_connect, scenario)


def test_failed_epoch_write_resigns(zk_connect: str) -> None:
    """A conditional /controller_epoch write that fails means another controller: resign."""

    async def scenario(c: Cluster) -> None:
        n1 = await c.broker(1)
        assert n1.ctl.is_controller and n1.ctl.epoch == 1
        ctl = n1.ctl
        # Another controller bumps the epoch between our read and our conditional write.
        original = ctl._utils.read
        raced: list[bool] = []

        async def racing_read(path: str, tally: Any = None) -> Any:
            data, stat = await original(path, tally)
            if path == L.CONTROLLER_EPOCH_PATH and not raced:
                raced.append(True)
                await (await c.adm()).set_async(path, b"7")
            return data, stat

        ctl._utils.read = racing_read  # type: ignore[method-assign]
        await (await c.adm()).delete_async(L.CONTROLLER_PATH)  # everyone re-elects
        # ControllerMovedException -> resign() deletes /controller -> elect again -> epoch 8.
        await until(lambda: ctl.is_controller and ctl.epoch == 8, what="re-elected")
        assert raced == [True]
        assert await controller_epoch_znode(c) == 8
        assert [f["generation"] for f in n1.kinds(EventKind.CONTROLLER_ELECTED)] == [1, 8]
        assert n1.kinds(EventKind.CONTROLLER_RESIGNED) == [
            {"broker": 1, "reason": "controller_deleted"}
        ]
        assert ctl.failovers == 2

    run(zk_connect, scenario)


# --------------------------------------------------------------------------- broker failure


def test_dead_broker_loses_every_leadership_to_an_in_sync_replica(zk_connect: str) -> None:
    async def scenario(c: Cluster) -> None:
        assignment = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}
        await c.adm()
        for b in (1, 2, 3):
            await c.broker(b, controller=False)
        await c.topic("t", assignment)
        await create_partition_states(await c.adm(), "t", assignment, [1, 2, 3], 1)
        for b in (1, 2, 3):
            await c.start_controller(c.nodes[b])
        n1, n3 = c.nodes[1], c.nodes[3]
        assert n1.ctl.is_controller and n1.ctl.epoch == 1
        assert n1.calls[0][1] == "controller_failover" and len(n1.calls[0][0]) == 3

        await c.kill(c.nodes[2])  # leads t-1, follows t-0 and t-2
        p1 = await until_state(c, ("t", 1), lambda s: s.leader != 2)
        # First live ISR member in assignment order; ISR = live ISR members; epoch + 1.
        assert p1 == LeaderIsr(leader=3, leader_epoch=1, isr=(3, 1), controller_epoch=1)
        p0 = await until_state(c, ("t", 0), lambda s: 2 not in s.isr)
        p2 = await until_state(c, ("t", 2), lambda s: 2 not in s.isr)
        assert p0 == LeaderIsr(1, 1, (1, 3), 1)  # dead follower removed, leader kept
        assert p2 == LeaderIsr(3, 1, (3, 1), 1)
        await until(lambda: "broker_failure" in n1.reasons())
        changes = dict(n1.calls[n1.reasons().index("broker_failure")][0])
        assert changes == {("t", 0): p0, ("t", 1): p1, ("t", 2): p2}
        led = n1.kinds(EventKind.LEADER_CHANGED)
        assert led == [
            {
                "topic": "t",
                "partition": 1,
                "broker": 3,
                "generation": 1,
                "reason": "offline",
                "detail": "[3,1]",
            }
        ]
        assert sorted(f["partition"] for f in n1.kinds(EventKind.ISR_CHANGED)) == [0, 2]

        # The controller's own broker dies: broker 3 takes over (epoch 2) and re-elects t-0.
        await c.kill(n1)
        await until(lambda: n3.ctl.is_controller, what="broker 3 controller")
        assert n3.ctl.epoch == 2
        p0 = await until_state(c, ("t", 0), lambda s: s.leader != 1)
        assert p0 == LeaderIsr(3, 2, (3,), 2)
        # t-1 and t-2 keep their live leader 3 (the dead follower 1 stays in the ISR until
        # the leader shrinks it: the failover does not remove dead followers).
        assert await c.state("t", 1) == p1
        assert await c.state("t", 2) == p2
        await until(lambda: "controller_failover" in n3.reasons())
        sent = n3.calls[n3.reasons().index("controller_failover")][0]
        assert sent[("t", 0)] == p0 and sent[("t", 1)] == p1

    run(zk_connect, scenario)


@pytest.mark.parametrize("mode", ["unclean_on", "unclean_off", "topic_override_on"])
def test_unclean_election_with_no_live_isr(zk_connect: str, mode: str) -> None:
    async def scenario(c: Cluster) -> None:
        config = ControllerConfig(
            auto_leader_rebalance_enable=False,
            unclean_leader_election_enable=mode == "unclean_on",
            zk_session_timeout_s=SESSION_S,
        )
        topic_cfg = {"unclean.leader.election.enable": "true"} if mode.startswith("topic") else None
        ctl = await c.broker(3, config=config)
        n1 = await c.broker(1, controller=False)
        await c.broker(2, controller=False)
        # Broker 2 is assigned but out of the ISR.
        await c.topic("u", {0: [1, 2]}, {0: LeaderIsr(1, 4, (1,), 1)}, config=topic_cfg)
        # The controller learns of the topic through its TopicChangeListener.
        await until(lambda: ("u", 0) in ctl.ctl.partition_states, what="topic seen")

        await c.kill(n1)
        if mode != "unclean_off":
            st = await until_state(c, ("u", 0), lambda s: s.leader != 1)
            assert st == LeaderIsr(2, 5, (2,), 1)  # potential data loss
            assert ctl.kinds(EventKind.LEADER_CHANGED)[-1]["reason"] == "unclean"
            return
        # NoReplicaOnlineException: no leader; removeReplicaFromIsr keeps the last ISR member.
        st = await until_state(c, ("u", 0), lambda s: s.leader != 1)
        assert st == LeaderIsr(-1, 5, (1,), 1)
        assert [f["reason"] for f in ctl.kinds(EventKind.LEADER_CHANGED)] == ["offline"]
        assert ctl.kinds(EventKind.LEADER_CHANGED)[0]["broker"] == -1
        await asyncio.sleep(0.2)
        assert await c.state("u", 0) == st  # stays offline
        # The ISR member comes back: it leads again (clean).
        await c.broker(1, controller=False)
        st = await until_state(c, ("u", 0), lambda s: s.leader == 1)
        assert st == LeaderIsr(1, 6, (1,), 1)
        await until(lambda: "broker_startup" in ctl.reasons())
        assert ctl.calls[-1] == ({("u", 0): st}, "broker_startup")

    run(zk_connect, scenario)


def test_state_written_by_a_newer_controller_is_not_touched(zk_connect: str) -> None:
    async def scenario(c: Cluster) -> None:
        ctl = await c.broker(1)
        n2 = await c.broker(2, controller=False)
        # controller_epoch 5 > ours (1): "written by another controller", abort.
        await c.topic("f", {0: [2, 1]}, {0: LeaderIsr(2, 3, (2, 1), 5)})
        await until(lambda: ("f", 0) in ctl.ctl.partition_states)
        await c.kill(n2)
        await until(lambda: ctl.ctl.live_brokers == frozenset({1}))
        await asyncio.sleep(0.2)
        assert await c.state("f", 0) == LeaderIsr(2, 3, (2, 1), 5)
        assert ctl.kinds(EventKind.LEADER_CHANGED) == []

    run(zk_connect, scenario)


# --------------------------------------------------------------------------- preferred


def test_preferred_replica_election_through_the_admin_znode(zk_connect: str) -> None:
    async def scenario(c: Cluster) -> None:
        n1 = await c.broker(1)
        n2 = await c.broker(2)
        await c.broker(3, controller=False)
        await c.topic(
            "p",
            {0: [1, 2], 1: [2, 1], 2: [1, 2], 3: [2, 3]},
            {
                0: LeaderIsr(2, 3, (2, 1), 1),  # preferred 1 in ISR: moves
                1: LeaderIsr(2, 0, (2, 1), 1),  # already preferred: nothing to do
                2: LeaderIsr(2, 1, (2,), 1),  # preferred not in ISR: fails
                3: LeaderIsr(3, 0, (3, 2), 1),  # (not listed in the first request)
            },
        )
        await until(lambda: len(n1.ctl.partition_states) == 4)
        admin = await c.adm()
        await request_preferred_election(admin, [("p", 0), ("p", 1), ("p", 2)])
        await until_state(c, ("p", 0), lambda s: s.leader == 1)
        await until(
            lambda: admin.kazoo.exists(L.PREFERRED_REPLICA_ELECTION_PATH) is None,
            what="znode deleted",
        )
        assert await c.state("p", 0) == LeaderIsr(1, 4, (2, 1), 1)  # ISR unchanged, epoch + 1
        assert await c.state("p", 1) == LeaderIsr(2, 0, (2, 1), 1)
        assert await c.state("p", 2) == LeaderIsr(2, 1, (2,), 1)
        assert n1.calls[-1] == ({("p", 0): LeaderIsr(1, 4, (2, 1), 1)}, "preferred")
        assert [f["reason"] for f in n1.kinds(EventKind.LEADER_CHANGED)] == ["preferred"]

        # While a request is pending (no controller), the tool refuses a second one; the
        # next controller runs the pending one at failover and deletes the znode.
        await c.kill(n1)
        await until(lambda: n2.ctl.is_controller)
        # Broker 1 is dead: the failover elects 2 for p-0 (is_controller turns true first).
        st = await until_state(c, ("p", 0), lambda s: s.leader == 2)
        assert st == LeaderIsr(2, 5, (2,), 2)
        await n2.ctl.stop()
        await request_preferred_election(admin, [("p", 3)])
        with pytest.raises(PreferredReplicaElectionInProgressError):
            await request_preferred_election(admin, [("p", 0)])
        await admin.delete_async(L.CONTROLLER_PATH)
        n2.controller = None
        await c.start_controller(n2)
        assert n2.ctl.is_controller and n2.ctl.epoch == 3
        assert admin.kazoo.exists(L.PREFERRED_REPLICA_ELECTION_PATH) is None
        assert await c.state("p", 3) == LeaderIsr(2, 1, (3, 2), 3)
        assert n2.calls[-1] == ({("p", 3): LeaderIsr(2, 1, (3, 2), 3)}, "preferred")

    run(zk_connect, scenario)


@pytest.mark.parametrize("not_led", [1, 2])
def test_auto_leader_rebalance(zk_connect: str, not_led: int) -> None:
    """10 partitions prefer broker 1: 1 not led = 10% (not > 10%), 2 = 20% (> 10%)."""

    async def scenario(c: Cluster) -> None:
        config = ControllerConfig(
            auto_leader_rebalance_enable=True,
            leader_imbalance_per_broker_percentage=10,
            leader_imbalance_check_interval_s=0.15,
            first_check_delay_s=0.05,
            zk_session_timeout_s=SESSION_S,
        )
        await c.broker(2, controller=False)
        states = {p: LeaderIsr(2 if p < not_led else 1, 0, (1, 2), 1) for p in range(10)}
        await c.topic("r", {p: [1, 2] for p in range(10)}, states)
        n1 = await c.broker(1, config=config)
        assert n1.ctl.is_controller
        if not_led == 1:
            await until(lambda: n1.ctl.rebalance_checks >= 4, what="four checks")
            assert await c.state("r", 0) == states[0]
            assert "auto_rebalance" not in n1.reasons()
            return
        for p in range(not_led):
            st = await until_state(c, ("r", p), lambda s: s.leader == 1)
            assert st == LeaderIsr(1, 1, (1, 2), 1)
        assert await c.state("r", 5) == states[5]
        await until(lambda: "auto_rebalance" in n1.reasons())
        assert set(n1.calls[-1][0]) == {("r", 0), ("r", 1)}
        # Auto-rebalance elections do not go through the admin znode.
        assert (await c.adm()).kazoo.exists(L.PREFERRED_REPLICA_ELECTION_PATH) is None
        checks = n1.ctl.rebalance_checks
        await until(lambda: n1.ctl.rebalance_checks >= checks + 2)
        assert [f["reason"] for f in n1.kinds(EventKind.LEADER_CHANGED)] == ["auto_rebalance"] * 2

    run(zk_connect, scenario)


# --------------------------------------------------------------------------- topics


def test_new_topic_and_add_partitions_get_states(zk_connect: str) -> None:
    async def scenario(c: Cluster) -> None:
        n0 = await c.broker(0)
        await c.broker(1, controller=False)
        await c.broker(2, controller=False)
        admin = await c.adm()
        first = await create_topic(admin, "a", 2, 2, random.Random(3), broker_ids=[0, 1, 2])
        for p, replicas in first.items():
            st = await until_state(c, ("a", p), lambda s: True)
            assert st == LeaderIsr(replicas[0], 0, tuple(replicas), 1)
        await until(lambda: "new_partition" in n0.reasons())
        assert set(n0.calls[-1][0]) == {("a", 0), ("a", 1)}

        added = await add_partitions(admin, "a", 5, None, random.Random(9))
        expected = assign_replicas_to_brokers(
            [0, 1, 2], 3, 2, random.Random(0), fixed_start_index=first[0][0], start_partition_id=2
        )
        assert added == expected and sorted(added) == [2, 3, 4]
        data, _ = await admin.get_async(L.topic_path("a"))
        assert L.decode_topic_assignment(data) == {**first, **added}
        for p, replicas in added.items():
            st = await until_state(c, ("a", p), lambda s: True)
            assert st == LeaderIsr(replicas[0], 0, tuple(replicas), 1)
        await until(lambda: set(n0.calls[-1][0]) == {("a", 2), ("a", 3), ("a", 4)})
        assert n0.calls[-1][1] == "new_partition"
        # The existing partitions were not rewritten.
        assert await c.state("a", 0) == LeaderIsr(first[0][0], 0, tuple(first[0]), 1)

        with pytest.raises(AdminOperationError, match="can only be increased"):
            await add_partitions(admin, "a", 5)
        with pytest.raises(AdminOperationError, match="does not exist"):
            await add_partitions(admin, "nope", 3)

    run(zk_connect, scenario)


def test_leader_and_isr_helpers_write_conditionally(zk_connect: str) -> None:
    async def scenario(c: Cluster) -> None:
        admin = await c.adm()
        await c.topic("h", {0: [1, 2]}, {0: LeaderIsr(1, 0, (1, 2), 1)})
        data, _ = await admin.get_async(L.partition_state_path("h", 0))
        assert data == b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}'
        assert await read_leader_and_isr(admin, "h", 0) == (LeaderIsr(1, 0, (1, 2), 1), 0)
        shrunk = LeaderIsr(1, 0, (1,), 1)
        assert await update_leader_and_isr(admin, "h", 0, shrunk, 0) == 1
        assert await update_leader_and_isr(admin, "h", 0, LeaderIsr(1, 0, (1, 2), 1), 0) is None
        # A retry of a write that already landed counts as done (checkLeaderAndIsrZkData).
        assert await update_leader_and_isr(admin, "h", 0, shrunk, 0) == 1
        assert await read_leader_and_isr(admin, "h", 0) == (shrunk, 1)
        assert await read_leader_and_isr(admin, "h", 9) is None
        assert await update_leader_and_isr(admin, "h", 9, shrunk, 0) is None

    run(zk_connect, scenario)
