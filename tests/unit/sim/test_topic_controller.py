"""The controller's topic creation and deletion (zk_registry/controller.py) on the sim ZooKeeper.

Each test builds a cluster of "brokers" (a ZkClient each, ``/brokers/ids/<id>``
and a :class:`BrokerController` whose broker calls are recorded) on the
simulated ensemble, in virtual time. They follow K@0.8.2.2: the admin path
(``AdminUtils.createTopic``, ``AdminUtils.deleteTopic``), ``TopicChangeListener``,
``DeleteTopicsListener`` (registered only with ``delete.topic.enable``),
``TopicDeletionManager`` (UpdateMetadata leader -2, StopReplica, the stall while
a replica's broker is down and the resume at its startup,
``completeDeleteTopic``), and ``initializeTopicDeletion`` at a failover.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from emulator.controller import LeaderIsr
from emulator.events import EventKind
from tests.unit.sim.zkworld import Session, World
from zk_registry import layout as L
from zk_registry.brokers import create_topic, register_broker, setup_common_paths
from zk_registry.controller import BrokerController, ControllerConfig
from zk_registry.topics import read_topic_record, request_topic_deletion

SESSION_S = 2.0
TP = tuple[str, int]


def config(delete: bool) -> ControllerConfig:
    return ControllerConfig(
        auto_leader_rebalance_enable=False,
        zk_session_timeout_s=SESSION_S,
        delete_topic_enable=delete,
    )


@dataclass
class Broker:
    """One broker's session, registration and controller, with what it was asked to do."""

    broker_id: int
    session: Session
    controller: BrokerController | None = None
    pushes: list[tuple[dict[TP, LeaderIsr], str]] = field(default_factory=list)
    deleting: list[list[TP]] = field(default_factory=list)
    stops: list[tuple[int, list[TP]]] = field(default_factory=list)
    events: list[tuple[EventKind, dict[str, Any]]] = field(default_factory=list)
    stop_ok: bool = True

    @property
    def ctl(self) -> BrokerController:
        assert self.controller is not None
        return self.controller

    def of(self, kind: EventKind) -> list[dict[str, Any]]:
        return [f for k, f in self.events if k == kind]


class Cluster:
    """Brokers and an admin session on one simulated ensemble."""

    def __init__(self) -> None:
        self.world = World(seed=3)
        self.admin = self.world.session("admin", SESSION_S)
        self.world.run(setup_common_paths(self.admin.zk))
        self.brokers: dict[int, Broker] = {}
        self.incarnation = 0

    def broker(self, broker_id: int, *, delete: bool, controller: bool = True) -> Broker:
        session = self.world.session(f"broker-{broker_id}-{self.incarnation}", SESSION_S)
        self.incarnation += 1
        self.world.run(
            register_broker(
                session.zk,
                broker_id,
                f"b{broker_id}",
                9092,
                timestamp_ms=1,
                session_timeout_s=SESSION_S,
            )
        )
        b = Broker(broker_id, session)
        self.brokers[broker_id] = b
        if controller:
            self.start_controller(b, delete)
        return b

    def start_controller(self, b: Broker, delete: bool) -> None:
        def on_leader_and_isr(changes: dict[TP, LeaderIsr], reason: str) -> None:
            b.pushes.append((changes, reason))

        def on_topic_deletion(partitions: list[TP]) -> None:
            b.deleting.append(partitions)

        async def stop_replicas(broker: int, partitions: list[TP]) -> bool:
            b.stops.append((broker, partitions))
            return b.stop_ok

        def emit(kind: EventKind, **fields: Any) -> None:
            b.events.append((kind, fields))

        b.controller = BrokerController(
            b.session.zk,
            b.broker_id,
            config(delete),
            on_leader_and_isr,
            emit,
            now_ms=lambda: 1.0,
            on_topic_deletion=on_topic_deletion,
            stop_replicas=stop_replicas,
        )
        self.world.run(b.controller.start())

    def kill(self, b: Broker) -> None:
        """The broker dies: its controller stops, its session closes (its id znode goes)."""
        if b.controller is not None:
            self.world.run(b.controller.stop())
        self.world.run(b.session.zk.stop_async())

    def create(self, topic: str, assignment_rf: int, partitions: int, reason: str | None) -> None:
        self.world.run(
            create_topic(
                self.admin.zk,
                topic,
                partitions,
                assignment_rf,
                random.Random(0),
                broker_ids=sorted(self.brokers),
                reason=reason,
            )
        )

    def exists(self, path: str) -> bool:
        return self.world.run(self.admin.utils.exists(path))

    def settle(self, seconds: float = 1.0) -> None:
        self.world.run_for(seconds)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    c = Cluster()
    yield c
    for b in c.brokers.values():
        if b.controller is not None and not b.session.zk.stopped:
            c.world.run(b.controller.stop())
    c.world.close()


def three(cluster: Cluster, *, delete: bool) -> Broker:
    """Brokers 0, 1, 2 (0 is the controller) and the run's own topic ``t`` (rf 3)."""
    first = cluster.broker(0, delete=delete, controller=False)
    cluster.broker(1, delete=delete, controller=False)
    cluster.broker(2, delete=delete, controller=False)
    cluster.create("t", 3, 2, None)
    cluster.start_controller(first, delete)
    for b in (1, 2):
        cluster.start_controller(cluster.brokers[b], delete)
    assert first.ctl.is_controller
    return first


# --------------------------------------------------------------------------- creation


def test_a_created_topic_goes_online_and_is_announced_with_its_incarnation(
    cluster: Cluster,
) -> None:
    ctl = three(cluster, delete=False)
    assert ctl.of(EventKind.TOPIC_CREATED) == []  # the run's own topics: no event
    assert ctl.ctl.incarnations == {"t": 1}
    cluster.create("fresh", 2, 3, "timeline")
    cluster.settle()
    assert ctl.of(EventKind.TOPIC_CREATED) == [
        {
            "topic": "fresh",
            "count": 3,
            "replication_factor": 2,
            "incarnation": 1,
            "reason": "timeline",
            "broker": 0,
        }
    ]
    # New -> Online: the states are written and pushed (LeaderAndIsr + UpdateMetadata).
    changes, reason = ctl.pushes[-1]
    assert reason == "new_partition" and sorted(changes) == [
        ("fresh", 0),
        ("fresh", 1),
        ("fresh", 2),
    ]
    assert all(cluster.exists(L.partition_state_path("fresh", p)) for p in range(3))


# --------------------------------------------------------------------------- deletion disabled


def test_with_delete_topic_enable_off_the_marker_stays_and_nothing_happens(
    cluster: Cluster,
) -> None:
    ctl = three(cluster, delete=False)
    assert cluster.world.run(request_topic_deletion(cluster.admin.zk, "t"))
    assert not cluster.world.run(request_topic_deletion(cluster.admin.zk, "t"))  # already marked
    cluster.settle(5.0)
    assert cluster.exists(L.topic_path("t")) and cluster.exists(L.delete_topic_path("t"))
    assert ctl.deleting == [] and ctl.stops == []
    assert ctl.of(EventKind.TOPIC_DELETION_REQUESTED) == []
    assert ctl.ctl.topics_to_delete == frozenset()


# --------------------------------------------------------------------------- deletion enabled


def test_a_deletion_updates_metadata_stops_every_replica_and_removes_the_znodes(
    cluster: Cluster,
) -> None:
    ctl = three(cluster, delete=True)
    cluster.world.run(request_topic_deletion(cluster.admin.zk, "t"))
    cluster.settle()
    assert ctl.of(EventKind.TOPIC_DELETION_REQUESTED) == [
        {"topic": "t", "state": "started", "reason": "marker", "broker": 0}
    ]
    # onTopicDeletion: UpdateMetadata (leader -2) for every partition, then
    # StopReplica (delete=true) to each replica's broker.
    assert ctl.deleting == [[("t", 0), ("t", 1)]]
    assert sorted(b for b, _ in ctl.stops) == [0, 1, 2]
    assert all(tps == [("t", 0), ("t", 1)] for _, tps in ctl.stops)
    # completeDeleteTopic: the znodes go, the context forgets the topic.
    for path in (L.topic_path("t"), L.topic_config_path("t"), L.delete_topic_path("t")):
        assert not cluster.exists(path), path
    assert ctl.of(EventKind.TOPIC_DELETED) == [
        {"topic": "t", "incarnation": 1, "count": 2, "broker": 0}
    ]
    assert ctl.ctl.topics_to_delete == frozenset() and "t" not in ctl.ctl.incarnations
    assert all(tp[0] != "t" for tp in ctl.ctl.partition_states)
    # Created again: a new incarnation, its own topic_created.
    cluster.create("t", 1, 1, "auto")
    cluster.settle()
    assert [
        (e["incarnation"], e["reason"], e["count"]) for e in ctl.of(EventKind.TOPIC_CREATED)
    ] == [(2, "auto", 1)]
    record = cluster.world.run(read_topic_record(cluster.admin.zk, "t"))
    assert record is not None and record.incarnation == 2


def test_a_marker_for_a_topic_that_does_not_exist_is_removed(cluster: Cluster) -> None:
    ctl = three(cluster, delete=True)
    cluster.world.run(request_topic_deletion(cluster.admin.zk, "nope"))
    cluster.settle()
    assert not cluster.exists(L.delete_topic_path("nope"))
    assert ctl.of(EventKind.TOPIC_DELETION_REQUESTED) == [] and ctl.deleting == []


def test_a_deletion_stalls_while_a_replicas_broker_is_down_and_resumes_at_its_start(
    cluster: Cluster,
) -> None:
    ctl = three(cluster, delete=True)
    cluster.kill(cluster.brokers[2])
    cluster.settle()
    assert ctl.ctl.live_brokers == frozenset({0, 1})
    before = len(ctl.pushes)
    cluster.world.run(request_topic_deletion(cluster.admin.zk, "t"))
    cluster.settle(5.0)
    # The live replicas were stopped; the dead one failed, so the topic waits.
    assert sorted(b for b, _ in ctl.stops) == [0, 1]
    assert ctl.ctl.topics_ineligible_for_deletion == frozenset({"t"})
    assert cluster.exists(L.topic_path("t")) and ctl.of(EventKind.TOPIC_DELETED) == []
    # Broker 2 starts again: onBrokerStartup resumes the deletion.
    cluster.broker(2, delete=True, controller=False)
    cluster.settle()
    # Its startup push (LeaderAndIsr/UpdateMetadata) leaves the topic being deleted
    # out: t is the only topic, so there is none.
    assert ctl.pushes[before:] == []
    assert sorted(b for b, _ in ctl.stops) == [0, 1, 2]
    assert len(ctl.deleting) == 2  # the UpdateMetadata (leader -2) is sent again
    assert not cluster.exists(L.topic_path("t"))
    assert [e["topic"] for e in ctl.of(EventKind.TOPIC_DELETED)] == ["t"]


def test_a_failed_stop_replica_halts_the_deletion_until_that_broker_starts(
    cluster: Cluster,
) -> None:
    ctl = three(cluster, delete=True)
    ctl.stop_ok = False
    cluster.world.run(request_topic_deletion(cluster.admin.zk, "t"))
    cluster.settle(5.0)
    assert ctl.ctl.topics_ineligible_for_deletion == frozenset({"t"})
    assert len(ctl.stops) == 3 and cluster.exists(L.topic_path("t"))
    ctl.stop_ok = True
    cluster.kill(cluster.brokers[1])
    cluster.settle()
    cluster.broker(1, delete=True, controller=False)
    cluster.settle()
    assert not cluster.exists(L.topic_path("t"))
    assert [e["topic"] for e in ctl.of(EventKind.TOPIC_DELETED)] == ["t"]


def test_a_new_controller_with_deletion_on_carries_out_the_markers_left(cluster: Cluster) -> None:
    ctl = three(cluster, delete=False)
    cluster.world.run(request_topic_deletion(cluster.admin.zk, "t"))
    cluster.settle()
    assert cluster.exists(L.topic_path("t"))  # ignored: delete.topic.enable is off
    # The operator turns it on and restarts the brokers (initializeTopicDeletion).
    for b in list(cluster.brokers.values()):
        cluster.kill(b)
    cluster.settle()
    second = cluster.broker(1, delete=True, controller=False)
    cluster.broker(0, delete=True, controller=False)
    cluster.broker(2, delete=True, controller=False)
    cluster.start_controller(second, delete=True)
    cluster.settle()
    assert second.ctl.is_controller
    assert second.of(EventKind.TOPIC_DELETION_REQUESTED) == [
        {"topic": "t", "state": "started", "reason": "failover", "broker": 1}
    ]
    assert not cluster.exists(L.topic_path("t")) and not cluster.exists(L.delete_topic_path("t"))
    assert second.of(EventKind.TOPIC_DELETED) == [
        {"topic": "t", "incarnation": 1, "count": 2, "broker": 1}
    ]
    assert ctl.of(EventKind.TOPIC_DELETED) == []
