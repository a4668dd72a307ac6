"""0.8 consumers subscribed by filter on the simulated ZooKeeper (the real driver and shell).

Each member is what a consumer host builds (``actors/consumer_host.py``
``_add_legacy``): its own :class:`~zk_registry.client.ZkClient` session (here
over :class:`~zk_registry.sim.client.SimKazooClient`), a
:class:`~zk_registry.legacy_driver.LegacyZkDriver`, the
:class:`~emulator.legacy.consumer.LegacyConsumer` machine and the
:class:`~actors.legacy_member.LegacyMember` shell, all on one
:class:`~emulator.sim.loop.SimEventLoop`. Topics come and go by writing and
removing ``/brokers/topics/<t>`` from an admin session, as the admin path and
the 0.8 controller's ``completeDeleteTopic`` do (issue-19 facts A1, A2).

What is checked (issue-19 facts A4-A6): the bootstrap and the assignment over
matching topics only; a matching creation makes *every* member rebalance once,
each on its own ``/brokers/topics`` watch, with no ``/ids`` change (the herd),
and the group ends owning the new partitions; a creation the filter does not
allow costs each member three reads and nothing else; a matching deletion
rebalances and drops the topic (its offsets znodes stay); a blacklist; a
static consumer whose topic is deleted does not rebalance and keeps its
owner znodes; a new session re-registers the filter and re-subscribes.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from actors.legacy_member import LegacyMember
from actors.orchestrator import run_scenario
from actors.sim.run import SimEngine
from emulator.eventlog import read_run_events
from emulator.events import EventKind, validate_event
from emulator.legacy.config import LegacyConsumerConfig
from emulator.legacy.consumer import LegacyConsumer
from emulator.legacy.wildcard import WildcardSubscription
from emulator.scenario import load_scenario
from emulator.topic_regex import BLACKLIST, WHITELIST, FilterKind, TopicFilter
from tests.unit.sim.zkworld import World
from zk_registry.brokers import create_topic, register_broker, setup_common_paths
from zk_registry.client import ZkClient, ZkUtils, asyncio_dispatch
from zk_registry.layout import (
    consumer_id_path,
    consumer_ids_path,
    offset_path,
    topic_config_path,
    topic_path,
)
from zk_registry.legacy_driver import LegacyZkDriver
from zk_registry.sim.tree import DataTree

GROUP = "g"
SESSION_S = 6.0


@dataclass
class Node:
    """One emulated 0.8 consumer and what it recorded."""

    name: str
    zk: ZkClient
    member: LegacyMember
    events: list[tuple[float, str, dict[str, object]]] = field(default_factory=list)

    @property
    def machine(self) -> LegacyConsumer:
        return self.member.machine

    def of(self, kind: EventKind) -> list[dict[str, object]]:
        return [f for _, k, f in self.events if k == kind.value]

    def rebalances(self) -> list[str]:
        return [str(f["reason"]) for f in self.of(EventKind.REBALANCE_STARTED)]


class Group:
    """An admin session, brokers, topics and a group of 0.8 consumers on the sim."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.loop = world.loop
        self.nodes: list[Node] = []
        admin = world.session("admin", SESSION_S)
        self.admin = admin.zk
        self.rng = random.Random(5)

        async def setup() -> None:
            await setup_common_paths(self.admin)
            for b in (1, 2):
                await register_broker(
                    self.admin, b, f"b{b}", 9092, timestamp_ms=0, session_timeout_s=SESSION_S
                )

        world.run(setup())
        self._ticker = self.loop.create_task(self._tick())

    async def _tick(self) -> None:
        # The host's loop: wake sleepers (rebalance back-offs) at their deadlines.
        while True:
            now = self.loop.time() * 1000.0
            for n in self.nodes:
                n.member.poll(now)
            await asyncio.sleep(0.005)

    def now_ms(self) -> float:
        return self.loop.time() * 1000.0

    def create(self, topic: str, partitions: int) -> None:
        """``AdminUtils.createTopic``: ``/config/topics/<t>`` then ``/brokers/topics/<t>``."""
        self.world.run(create_topic(self.admin, topic, partitions, 1, self.rng, broker_ids=[1, 2]))

    def delete(self, topic: str) -> None:
        """``completeDeleteTopic``'s ``deleteRecursive`` of the topic's znodes."""

        async def go() -> None:
            utils = ZkUtils(self.admin)
            for path in (topic_path(topic), topic_config_path(topic)):
                await utils.delete_path(path)

        self.world.run(go())

    def add(
        self, name: str, subscription: dict[str, int] | WildcardSubscription, **props: object
    ) -> Node:
        """Connect a consumer's own session and start it, as ``_add_legacy`` does."""
        config = LegacyConsumerConfig.from_kafka(props)
        box: list[Node] = []

        def on_new_session() -> None:
            if box:
                box[0].member.on_new_session()

        zk = ZkClient(
            self.world.ens.connect_string,
            SESSION_S,
            raw_factory=self.world.ens.raw_factory(name),
            dispatch=asyncio_dispatch(self.loop),
            on_new_session=on_new_session,
        )
        self.world.run(zk.start_async())
        cid = f"{GROUP}_{name}-1000-{len(self.nodes):08x}"

        def on_watch(source: str, _event: object) -> None:
            if box:
                box[0].member.on_watch(source)

        driver = LegacyZkDriver(
            zk,
            GROUP,
            cid,
            SESSION_S,
            on_watch=on_watch,
            exclude_internal_topics=config.exclude_internal_topics,
            wall_ms=lambda: int(self.now_ms()),
        )
        machine = LegacyConsumer(
            member=name, consumer_id=cid, group=GROUP, subscription=subscription, config=config
        )
        events: list[tuple[float, str, dict[str, object]]] = []

        def emit(kind: EventKind, /, **fields: object) -> None:
            record = {"kind": kind.value, **{k: v for k, v in fields.items() if v is not None}}
            validate_event(record)  # what the host's event writer would be handed
            events.append((self.now_ms(), kind.value, fields))

        member = LegacyMember(name, machine, zk, driver, emit, self.now_ms)
        node = Node(name, zk, member, events)
        box.append(node)
        self.nodes.append(node)

        async def start() -> None:
            member.apply(machine.start(self.now_ms()))

        self.world.run(start())
        return node

    def settle(self, within_s: float = 60.0) -> None:
        """Run until every consumer is stable and nothing is in flight for 1 s."""

        def quiet() -> bool:
            return all(
                n.machine.state.value in ("stable", "gave_up") and not n.machine.outstanding
                for n in self.nodes
            )

        self.world.run_until(quiet, within_s, step_s=0.01)
        self.world.run_for(1.0)
        self.world.run_until(quiet, within_s, step_s=0.01)

    def owners(self) -> dict[tuple[str, int], str]:
        """The owner znodes as ``(topic, partition) -> thread id``."""
        tree = self.world.ens.tree
        base = f"/consumers/{GROUP}/owners"
        out: dict[tuple[str, int], str] = {}
        if not tree.exists(base):
            return out
        for topic in tree.get_children(base):
            for p in tree.get_children(f"{base}/{topic}"):
                out[(topic, int(p))] = data_of(tree, f"{base}/{topic}/{p}").decode()
        return out

    def owned(self) -> dict[tuple[str, int], str]:
        """What the machines hold, checked to be disjoint."""
        out: dict[tuple[str, int], str] = {}
        for n in self.nodes:
            for tp, thread in n.machine.owned.items():
                assert tp not in out, f"{tp} owned twice"
                out[tp] = thread
        return out

    def reads(self) -> list[int]:
        return [n.zk.counter.snapshot()[0] for n in self.nodes]

    def poke(self, node: Node, source: str) -> None:
        """Deliver a watch to one member (on the loop, as its ZkClient would)."""

        async def go() -> None:
            node.member.on_watch(source)

        self.world.run(go())

    def close(self) -> None:
        self._ticker.cancel()
        self.world.run_for(0.01)
        for n in self.nodes:
            n.member.kill()
            self.world.run(n.zk.stop_async())
        self.world.close()


@pytest.fixture
def group() -> Iterator[Group]:
    g = Group(World(seed=3, size=1, tick_ms=200))
    yield g
    g.close()


def wild(raw: str, kind: FilterKind = WHITELIST, streams: int = 1) -> WildcardSubscription:
    return WildcardSubscription(TopicFilter(raw, kind), streams)


def data_of(tree: DataTree, path: str) -> bytes:
    """A znode's data on the simulated server (it must have some)."""
    data, _ = tree.get_data(path)
    assert data is not None, path
    return data


def ids_watches(node: Node) -> int:
    return sum(1 for f in node.of(EventKind.WATCH_FIRED) if f["reason"] == "ids")


def partitions(topics: dict[str, int]) -> set[tuple[str, int]]:
    return {(t, p) for t, n in topics.items() for p in range(n)}


def test_the_registration_is_the_escaped_regex_with_its_pattern(group: Group) -> None:
    group.create("ev-x", 1)
    node = group.add("c-0", wild("ev-.*", streams=2))
    group.settle()
    data = data_of(group.world.ens.tree, consumer_id_path(GROUP, node.machine.consumer_id))
    raw = data.decode()
    assert raw.startswith('{"version":1,"subscription":{"ev-.*":2},"pattern":"white_list"')
    assert json.loads(raw)["pattern"] == "white_list"
    slash = group.add("c-1", wild("a/b|ev-.*"))
    group.settle()
    data = data_of(group.world.ens.tree, consumer_id_path(GROUP, slash.machine.consumer_id))
    assert b'"a\\/b|ev-.*"' in data  # Utils.JSONEscapeString escapes "/"


def test_bootstrap_assigns_only_the_matching_topics(group: Group) -> None:
    for t, count in (("ev-1", 3), ("other", 4), ("ev-2", 2)):
        group.create(t, count)
    nodes = [group.add(f"c-{i}", wild("ev-.*")) for i in range(3)]
    group.settle()
    assert set(group.owned()) == partitions({"ev-1": 3, "ev-2": 2})
    assert group.owners() == group.owned()
    for n in nodes:
        assert n.machine.wildcard_topics in (("ev-1", "ev-2"), ("ev-2", "ev-1"))
        resolved = n.of(EventKind.TOPIC_PATTERN_RESOLVED)
        assert resolved and resolved[0]["topics"] == "ev-1,ev-2"
    # Only the topic watchers' bootstrap calls ran: no topic_event rebalance.
    assert all("topic_event" not in n.rebalances() for n in nodes)


def test_a_matching_topic_makes_every_member_rebalance_once_on_its_own_watch(group: Group) -> None:
    group.create("ev-1", 4)
    nodes = [group.add(f"c-{i}", wild("ev-.*")) for i in range(4)]
    group.settle()
    before = {n.name: len(n.rebalances()) for n in nodes}
    ids_before = {n.name: ids_watches(n) for n in nodes}
    marks = {n.name: len(n.events) for n in nodes}
    group.create("ev-2", 6)
    group.settle()
    for n in nodes:
        new = n.rebalances()[before[n.name] :]
        # One syncedRebalance each, started by its own /brokers/topics watch.
        assert new == ["topic_event"], (n.name, new)
        assert ids_watches(n) == ids_before[n.name]  # no /ids change
        triggered = [f for f in n.of(EventKind.REBALANCE_TRIGGERED) if f["reason"] == "topic_event"]
        assert [f["detail"] for f in triggered] == ["added=ev-2"]
    # The herd's claim races: every attempt that met a NodeExists backed off,
    # and each member's one syncedRebalance ended in a success.
    herd = [(k, f) for n in nodes for _, k, f in n.events[marks[n.name] :]]
    attempts = [k for k, _ in herd].count(EventKind.ATTEMPT_STARTED.value)
    failed = [f for k, f in herd if k == EventKind.ATTEMPT_FINISHED.value and f["reason"] != "ok"]
    backoffs = [k for k, _ in herd].count(EventKind.REBALANCE_BACKOFF.value)
    assert attempts == len(nodes) + len(failed)
    assert backoffs == len(failed)
    assert [k for k, _ in herd].count(EventKind.REBALANCE_COMPLETED.value) == len(nodes)
    assert set(group.owned()) == partitions({"ev-1": 4, "ev-2": 6})
    assert group.owners() == group.owned()
    counts = sorted(sum(1 for tp in n.machine.owned) for n in nodes)
    assert counts[-1] - counts[0] <= 2  # range per topic: 4 -> 1 each, 6 -> 2/2/1/1


def test_a_non_matching_topic_costs_each_member_three_reads_and_nothing_else(
    group: Group,
) -> None:
    group.create("ev-1", 2)
    nodes = [group.add(f"c-{i}", wild("ev-.*")) for i in range(3)]
    group.settle()
    reads = group.reads()
    rebalances = [len(n.rebalances()) for n in nodes]
    owners = group.owners()
    group.create("logs", 5)
    group.settle()
    # zkclient's re-arm (exists + getChildren) and the listener's own getChildren.
    assert [after - b for after, b in zip(group.reads(), reads, strict=True)] == [3, 3, 3]
    assert [len(n.rebalances()) for n in nodes] == rebalances
    for n in nodes:
        assert n.of(EventKind.TOPIC_PATTERN_RESOLVED)[-1]["detail"] == "whitelist unchanged"
    assert group.owners() == owners


def test_a_matching_topic_deleted_is_dropped_and_its_offsets_stay(group: Group) -> None:
    group.create("ev-1", 2)
    group.create("ev-2", 2)
    nodes = [group.add(f"c-{i}", wild("ev-.*")) for i in range(2)]
    group.settle()
    holder = next(n for n in nodes if ("ev-2", 0) in n.machine.owned)
    holder.machine.consumed(("ev-2", 0), 42)  # its iterator handed out up to 42
    group.delete("ev-2")
    group.settle()
    for n in nodes:
        assert n.rebalances()[-1] == "topic_event"
        assert n.machine.wildcard_topics == ("ev-1",)
        assert "ev-2" in n.machine.stream_topics  # topicStreamsMap keeps it
        assert n.member.driver is not None
        assert topic_path("ev-2") in n.member.driver.watched_paths  # its data watch stays
    assert set(group.owned()) == partitions({"ev-1": 2})
    assert group.owners() == group.owned()  # the deleted topic's owner znodes were released
    tree = group.world.ens.tree
    # closeFetchers committed the deleted partition before the release; nothing deletes it.
    assert data_of(tree, offset_path(GROUP, "ev-2", 0)) == b"42"


def test_blacklist_members_rebalance_for_topics_the_regex_does_not_match(group: Group) -> None:
    group.create("a", 2)
    group.create("skip-1", 2)
    nodes = [group.add(f"c-{i}", wild("skip-.*", BLACKLIST)) for i in range(2)]
    group.settle()
    assert set(group.owned()) == partitions({"a": 2})
    count = [len(n.rebalances()) for n in nodes]
    group.create("skip-2", 1)
    group.settle()
    assert [len(n.rebalances()) for n in nodes] == count
    group.create("b", 1)
    group.settle()
    assert [n.rebalances()[-1] for n in nodes] == ["topic_event", "topic_event"]
    assert [len(n.rebalances()) for n in nodes] == [c + 1 for c in count]
    assert set(group.owned()) == partitions({"a": 2, "b": 1})


def test_a_static_consumers_topic_deleted_is_only_logged(group: Group) -> None:
    group.create("t", 2)
    group.create("u", 1)
    nodes = [group.add(f"c-{i}", {"t": 1, "u": 1}) for i in range(2)]
    group.settle()
    owners = group.owners()
    assert set(owners) == partitions({"t": 2, "u": 1})
    rebalances = [len(n.rebalances()) for n in nodes]
    group.delete("t")
    group.settle()
    # ZKTopicPartitionChangeListener.handleDataDeleted only warns: no rebalance.
    assert [len(n.rebalances()) for n in nodes] == rebalances
    assert group.owners() == owners  # the owner znodes of the deleted topic stay
    first, second = nodes
    assert ("t", 1) in second.machine.owned  # range: t:0 and u:0 to c-0, t:1 to c-1
    # The next rebalance for any reason releases them (here c-1's alone): the
    # deleted topic gets no partition (a missing znode is an empty map).
    group.poke(second, "ids")
    group.settle()
    assert second.rebalances()[-1] == "ids"
    assert second.machine.owned == {}
    thread = f"{first.machine.consumer_id}-0"
    assert group.owners() == {("t", 0): thread, ("u", 0): thread}  # c-0's linger


def test_a_new_session_registers_the_filter_again_and_resubscribes(group: Group) -> None:
    group.create("ev-1", 2)
    node = group.add("c-0", wild("ev-.*"))
    group.settle()
    cid = node.zk.client_id
    assert cid is not None
    before = len(node.rebalances())
    resolved = len(node.of(EventKind.TOPIC_PATTERN_RESOLVED))
    assert group.world.ens.expire_session(*cid)
    group.world.run_until(lambda: node.zk.session_id != cid[0], 30.0)
    group.settle()
    # handleNewSession's own syncedRebalance, then zkclient's fireAllEvents and
    # the new registration: the /ids and topic data listeners through the
    # executor, and the topic watcher's listener, which only reads (no topic
    # changed: no rebalance of its own).
    new = node.rebalances()[before:]
    assert new[0] == "new_session"
    assert "topic_event" not in new and all(r.startswith("ids") for r in new[1:])
    assert len(node.of(EventKind.TOPIC_PATTERN_RESOLVED)) == resolved + 1
    data = data_of(group.world.ens.tree, consumer_id_path(GROUP, node.machine.consumer_id))
    assert b'"pattern":"white_list"' in data
    thread = f"{node.machine.consumer_id}-0"
    assert group.owners() == {("ev-1", 0): thread, ("ev-1", 1): thread}
    # The watch outlived the session: a new matching topic still reaches it.
    group.create("ev-2", 1)
    group.settle()
    assert node.rebalances()[-1] == "topic_event"
    assert ("ev-2", 0) in node.machine.owned
    assert len(group.world.ens.tree.get_children(consumer_ids_path(GROUP))) == 1


PATTERN_RUN = """
name = "sim-pattern"
description = "3 consumers by pattern over two topics, one matching"
seed = 7
duration_s = 20.0
time_scale = 0.5

[cluster]
brokers = 3
zookeeper_ensemble = 1

[[topics]]
name = "events"
partitions = 4
replication_factor = 2

[[topics]]
name = "logs"
partitions = 3
replication_factor = 2

[producer]
rate_per_s = 50.0
topics = ["events"]

[group]
id = "pg"
consumers = 3
topic_pattern = "ev.*"
processing_ms_per_message = 2.0

[kafka]
"zookeeper.session.timeout.ms" = 6000
"auto.offset.reset" = "smallest"
"""


def test_a_whole_sim_run_with_a_topic_pattern_subscribes_by_filter(tmp_path: Path) -> None:
    path = tmp_path / "pattern.toml"
    path.write_text(PATTERN_RUN)
    (result,) = run_scenario(
        load_scenario(path), ["zookeeper"], tmp_path / "run", engine=SimEngine()
    )
    assert result.status == "completed" and not result.notes
    summary = result.summary
    assert summary.produced > 500 and summary.unprocessed == 0
    events = list(read_run_events(tmp_path / "run" / "zookeeper" / "events"))
    resolved = [e for e in events if e["kind"] == EventKind.TOPIC_PATTERN_RESOLVED.value]
    assert {(e["member"], e["reason"], e["topics"]) for e in resolved} == {
        (f"c-{i}", reason, "events") for i in range(3) for reason in ("start", "topic_event")
    }
    claimed = {e["topic"] for e in events if e["kind"] == EventKind.OWNERSHIP_CLAIMED.value}
    assert claimed == {"events"}  # "logs" exists, the filter does not allow it
