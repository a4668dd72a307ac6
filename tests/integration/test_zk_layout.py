"""Znode paths and payloads byte for byte, as Kafka 0.8.2.2 writes them.

Every expected value below is a literal written by hand from the Scala source
(``ZkUtils.scala``, ``ZookeeperConsumerConnector.scala``, ``TopicCount.scala``,
``AdminUtils.scala``, ``ZookeeperLeaderElector.scala`` at 0.8.2.2) or copied
from znodes and log lines of real clusters, never computed by the encoder under
test. Where a Scala HashMap decides the key order, the comment says which map.

The ``zk``-marked tests write through the registry into a per-test chroot and
read the raw bytes back with a plain kazoo client rooted at the same chroot.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest
from kazoo.client import KazooClient  # type: ignore[import-untyped]

from zk_registry import layout as L
from zk_registry.brokers import create_partition_states, create_topic, register_broker
from zk_registry.client import ZkClient

T = TypeVar("T")

CID = "g1_host-1441996002307-9a86b603"


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


# --------------------------------------------------------------------------- paths


def test_consumer_paths() -> None:
    assert L.consumer_group_path("g1") == "/consumers/g1"
    assert L.consumer_ids_path("g1") == "/consumers/g1/ids"
    assert L.consumer_id_path("g1", CID) == "/consumers/g1/ids/g1_host-1441996002307-9a86b603"
    assert L.consumer_owners_path("g1") == "/consumers/g1/owners"
    assert L.owners_topic_path("g1", "t") == "/consumers/g1/owners/t"
    assert L.owner_path("g1", "t", 3) == "/consumers/g1/owners/t/3"
    assert L.offsets_topic_path("g1", "t") == "/consumers/g1/offsets/t"
    assert L.offset_path("g1", "t", 3) == "/consumers/g1/offsets/t/3"


def test_broker_and_topic_paths() -> None:
    assert L.broker_ids_path() == "/brokers/ids"
    assert L.broker_path(7) == "/brokers/ids/7"
    assert L.brokers_topics_path() == "/brokers/topics"
    assert L.topic_path("clicks") == "/brokers/topics/clicks"
    assert L.topic_partitions_path("clicks") == "/brokers/topics/clicks/partitions"
    assert L.topic_partition_path("clicks", 4) == "/brokers/topics/clicks/partitions/4"
    assert L.partition_state_path("clicks", 4) == "/brokers/topics/clicks/partitions/4/state"


def test_controller_admin_and_config_paths() -> None:
    assert L.controller_path() == "/controller"
    assert L.controller_epoch_path() == "/controller_epoch"
    assert L.preferred_replica_election_path() == "/admin/preferred_replica_election"
    assert L.reassign_partitions_path() == "/admin/reassign_partitions"
    assert L.delete_topics_path() == "/admin/delete_topics"
    assert L.delete_topic_path("t") == "/admin/delete_topics/t"
    assert L.topic_config_path("t") == "/config/topics/t"
    assert L.config_changes_path() == "/config/changes"
    assert L.config_change_prefix_path() == "/config/changes/config_change_"
    # ZkUtils.setupCommonPaths
    assert L.COMMON_PERSISTENT_PATHS == (
        "/consumers",
        "/brokers/ids",
        "/brokers/topics",
        "/config/changes",
        "/config/topics",
        "/admin/delete_topics",
    )


def test_paths_reject_slashes() -> None:
    with pytest.raises(ValueError):
        L.consumer_ids_path("a/b")
    with pytest.raises(ValueError):
        L.topic_path("")


# --------------------------------------------------------------------------- ids


def test_consumer_id_format() -> None:
    # "%s-%d-%s".format(hostname, currentTimeMillis, msb.toHexString.substring(0, 8))
    assert L.make_consumer_id("g1", "host", 1441996002307, "9a86b603deadbeef") == CID
    # Long.toHexString drops leading zeros: 0x0a1b2c3d4e5f4abc -> "a1b2c3d4e5f4abc"
    assert L.make_consumer_id("g", "h", 1, "0a1b2c3d4e5f4abc") == "g_h-1-a1b2c3d4"
    # consumer.id set: group + "_" + consumer.id
    assert L.make_consumer_id("g1", "host", 5, "9a86b603deadbeef", "c-7") == "g1_c-7"
    with pytest.raises(ValueError):
        L.make_consumer_id("g", "h", 1, "0000000000abcdef")  # toHexString has 6 digits


def test_thread_ids() -> None:
    assert L.thread_id(CID, 0) == "g1_host-1441996002307-9a86b603-0"
    assert L.thread_id(CID, 10) == "g1_host-1441996002307-9a86b603-10"
    assert L.parse_thread_id("g1_host-1441996002307-9a86b603-10") == (CID, 10)


# --------------------------------------------------------------------------- payloads


def test_consumer_registration_payload() -> None:
    # Map("version" -> 1, "subscription" -> ..., "pattern" -> ..., "timestamp" -> ...): Map4
    assert L.encode_consumer_registration({"t1": 2}, 1441996002307) == (
        b'{"version":1,"subscription":{"t1":2},"pattern":"static","timestamp":"1441996002307"}'
    )
    # up to 4 topics: the subscription map keeps insertion order (Map2)
    assert L.encode_consumer_registration({"b": 1, "a": 3}, 7) == (
        b'{"version":1,"subscription":{"b":1,"a":3},"pattern":"static","timestamp":"7"}'
    )
    # 5 topics: a HashTrieMap, ordered by improve(String.hashCode) 5 bits at a time
    sub = {"orders": 1, "payments": 2, "clicks": 1, "views": 3, "logs": 1}
    assert L.encode_consumer_registration(sub, 5) == (
        b'{"version":1,"subscription":{"payments":2,"clicks":1,"views":3,"orders":1,"logs":1},'
        b'"pattern":"static","timestamp":"5"}'
    )
    assert L.encode_consumer_registration({"x.*": 1}, 9, L.WHITE_LIST_PATTERN) == (
        b'{"version":1,"subscription":{"x.*":1},"pattern":"white_list","timestamp":"9"}'
    )


def test_broker_payload() -> None:
    # 5 keys: a HashTrieMap; real 0.8.2 znodes read {"jmx_port":-1,"timestamp":...,"host":...,
    # "version":1,"port":9092}
    assert L.encode_broker("b1", 9092, -1, 1441996002307) == (
        b'{"jmx_port":-1,"timestamp":"1441996002307","host":"b1","version":1,"port":9092}'
    )
    assert L.encode_broker("10.0.0.7", 9093, 9999, 1) == (
        b'{"jmx_port":9999,"timestamp":"1","host":"10.0.0.7","version":1,"port":9093}'
    )


def test_partition_state_payload() -> None:
    # leaderAndIsrZkData: 5 keys, HashTrieMap order
    assert L.encode_partition_state(1, 0, [1, 2], 1) == (
        b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}'
    )
    assert L.encode_partition_state(2, 5, [2], 6) == (
        b'{"controller_epoch":6,"leader":2,"version":1,"leader_epoch":5,"isr":[2]}'
    )


def test_topic_assignment_payload() -> None:
    # mutable.HashMap -> toMap (Map1..Map4 keep the hash-table order) -> toString keys.
    # "INFO Topic creation {"version":1,"partitions":{"2":[0],"1":[0],"0":[0]}}" (0.8.2, 2015)
    assert L.encode_topic_assignment({0: [0], 1: [0], 2: [0]}) == (
        b'{"version":1,"partitions":{"2":[0],"1":[0],"0":[0]}}'
    )
    assert L.encode_topic_assignment({0: [0], 1: [0]}) == (
        b'{"version":1,"partitions":{"1":[0],"0":[0]}}'
    )
    assert L.encode_topic_assignment({0: [3]}) == b'{"version":1,"partitions":{"0":[3]}}'
    # a real 3-broker cluster: {"2":[1,2],"1":[0,1],"3":[2,1],"0":[2,0]}
    assert L.encode_topic_assignment({0: [2, 0], 1: [0, 1], 2: [1, 2], 3: [2, 1]}) == (
        b'{"version":1,"partitions":{"2":[1,2],"1":[0,1],"3":[2,1],"0":[2,0]}}'
    )
    # >= 5 partitions: HashTrieMap of the partition strings (real znodes)
    six = {0: [77, 78, 79], 1: [78, 79, 75], 2: [79, 75, 76], 3: [75, 76, 77], 4: [76, 77, 78]}
    six[5] = [77, 79, 75]
    assert L.encode_topic_assignment(six) == (
        b'{"version":1,"partitions":{"4":[76,77,78],"5":[77,79,75],"1":[78,79,75],'
        b'"0":[77,78,79],"2":[79,75,76],"3":[75,76,77]}}'
    )
    ten = {p: [0] for p in range(10)}
    assert L.encode_topic_assignment(ten) == (
        b'{"version":1,"partitions":{"8":[0],"4":[0],"9":[0],"5":[0],"6":[0],"1":[0],"0":[0],'
        b'"2":[0],"7":[0],"3":[0]}}'
    )


def test_controller_payloads() -> None:
    # Map("version" -> 1, "brokerid" -> id, "timestamp" -> ts): Map3
    assert L.encode_controller(1, 1441996002307) == (
        b'{"version":1,"brokerid":1,"timestamp":"1441996002307"}'
    )
    assert L.encode_controller_epoch(1) == b"1"
    assert L.INITIAL_CONTROLLER_EPOCH == 1


def test_admin_and_config_payloads() -> None:
    assert L.encode_preferred_replica_election([("t", 0), ("t", 1)]) == (
        b'{"version":1,"partitions":[{"topic":"t","partition":0},{"topic":"t","partition":1}]}'
    )
    assert L.encode_reassign_partitions({("t", 0): [1, 2]}) == (
        b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}'
    )
    assert L.encode_topic_config() == b'{"version":1,"config":{}}'
    # java.util.Properties (Hashtable) order; a real /config/topics znode read
    # {"version":1,"config":{"segment.bytes":"104857600","compression.type":"producer",
    #  "cleanup.policy":"compact"}}
    cfg = {
        "cleanup.policy": "compact",
        "compression.type": "producer",
        "segment.bytes": "104857600",
    }
    assert L.encode_topic_config(cfg) == (
        b'{"version":1,"config":{"segment.bytes":"104857600","compression.type":"producer",'
        b'"cleanup.policy":"compact"}}'
    )
    assert L.encode_config_change("t") == b'"t"'  # Json.encode(topic)


def test_owner_and_offset_payloads() -> None:
    assert L.encode_owner(L.thread_id(CID, 0)) == b"g1_host-1441996002307-9a86b603-0"
    assert L.encode_offset(42) == b"42"
    assert L.encode_offset(0) == b"0"


def test_json_encode_does_not_escape() -> None:
    # Json.encode: "\"" + s + "\"" (the Scala doc: does not handle special characters)
    assert L.kafka_json_encode({"k": 'a"b'}) == '{"k":"a"b"}'
    assert L.kafka_json_encode([1, None, True, "x"]) == '[1,null,true,"x"]'


# --------------------------------------------------------------------------- decoders


def test_decoders_accept_kafka_formats() -> None:
    reg = L.decode_consumer_registration(
        b'{"version":1,"subscription":{"t1":2},"pattern":"static","timestamp":"1441996002307"}'
    )
    assert reg == L.ConsumerRegistration(1, {"t1": 2}, "static", 1441996002307)
    assert not reg.is_wildcard
    wild = L.decode_consumer_registration(
        b'{"version":1,"subscription":{"foo.*":3},"pattern":"white_list","timestamp":"1"}'
    )
    assert wild.is_wildcard and wild.subscription == {"foo.*": 3}

    broker = L.decode_broker(
        3, b'{"jmx_port":-1,"timestamp":"1441996002307","host":"b1","version":1,"port":9092}'
    )
    assert broker == L.BrokerInfo(3, "b1", 9092, -1, 1, 1441996002307)
    # a later broker (v2, with endpoints) is still readable
    v2 = L.decode_broker(
        0,
        b'{"jmx_port":-1,"timestamp":"1459199184439","endpoints":["PLAINTEXT://Rlyeh:9092"],'
        b'"host":"Rlyeh","version":2,"port":9092}',
    )
    assert (v2.host, v2.port, v2.version) == ("Rlyeh", 9092, 2)

    state = L.decode_partition_state(
        b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}', 3
    )
    assert state == L.PartitionState(1, 0, (1, 2), 1, 1, 3)

    assert L.decode_topic_assignment(
        b'{"version":1,"partitions":{"2":[1,2],"1":[0,1],"3":[2,1],"0":[2,0]}}'
    ) == {0: [2, 0], 1: [0, 1], 2: [1, 2], 3: [2, 1]}
    assert L.decode_topic_assignment(b'{"version":1}') == {}

    # KafkaController.parseControllerId: JSON, else the old bare integer
    assert L.decode_controller_id(b'{"version":1,"brokerid":2,"timestamp":"1441996002307"}') == 2
    assert L.decode_controller_id(b"3") == 3
    assert L.decode_controller(b"3") == L.ControllerInfo(3)
    assert L.decode_controller_epoch(b"12") == 12
    assert L.decode_offset(b"42") == 42
    assert L.decode_owner(b"g1_host-1441996002307-9a86b603-0") == CID + "-0"
    assert L.decode_preferred_replica_election(
        b'{"version":1,"partitions":[{"topic":"t","partition":0}]}'
    ) == [("t", 0)]
    assert L.decode_reassign_partitions(
        b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}'
    ) == {("t", 0): [1, 2]}
    assert L.decode_topic_config(b'{"version":1,"config":{"a":"1"}}') == {"a": "1"}


@pytest.mark.parametrize(
    ("decoder", "data"),
    [
        (L.decode_consumer_registration, b'{"version":1,"subscription":{"t":1}}'),
        (L.decode_consumer_registration, b"nope"),
        (lambda d: L.decode_broker(1, d), b'{"version":1,"host":"h"}'),
        (lambda d: L.decode_broker(1, d), None),
        (L.decode_partition_state, b'{"leader":1}'),
        (L.decode_controller, b"broker-1"),
        (L.decode_offset, b"forty-two"),
    ],
)
def test_decoders_reject_garbage(decoder: Any, data: bytes | None) -> None:
    with pytest.raises(L.PayloadError):
        decoder(data)


def test_topic_filters() -> None:
    assert L.topic_allowed("white_list", "foo.*", "foobar")
    assert not L.topic_allowed("white_list", "foo.*", "barfoo")  # String.matches: full match
    assert L.topic_allowed("white_list", "a, b", "b")  # commas become |, spaces dropped
    assert not L.topic_allowed("white_list", ".*", "__consumer_offsets")
    assert L.topic_allowed("black_list", "foo.*", "bar")
    assert not L.topic_allowed("black_list", "foo.*", "foo1")


# --------------------------------------------------------------------------- on a real ZooKeeper


@pytest.mark.zk
def test_registry_writes_these_bytes_under_the_chroot(zk_connect: str) -> None:
    raw = KazooClient(hosts=zk_connect, timeout=4.0)  # a plain client on the same chroot
    raw.start(timeout=15)

    async def scenario() -> None:
        client = ZkClient(zk_connect, 4.0)
        await client.start_async()
        try:
            await register_broker(
                client, 1, "b1", 9092, timestamp_ms=1441996002307, session_timeout_s=4.0
            )
            await register_broker(
                client, 2, "b2", 9092, timestamp_ms=1441996002308, session_timeout_s=4.0
            )
            # fixed draws: startIndex 0, shift 0 -> {0: [1, 2], 1: [2, 1], 2: [1, 2]}
            assignment = await create_topic(client, "t", 3, 2, _Fixed([0, 0]), broker_ids=[1, 2])
            assert assignment == {0: [1, 2], 1: [2, 1], 2: [1, 2]}
            await create_partition_states(client, "t", assignment, [2], 1)

            data, stat = raw.get("/brokers/ids/1")
            assert data == (
                b'{"jmx_port":-1,"timestamp":"1441996002307","host":"b1","version":1,"port":9092}'
            )
            assert stat.ephemeralOwner == client.session_id
            assert raw.get("/config/topics/t")[0] == b'{"version":1,"config":{}}'
            data, stat = raw.get("/brokers/topics/t")
            assert data == b'{"version":1,"partitions":{"2":[1,2],"1":[2,1],"0":[1,2]}}'
            assert stat.ephemeralOwner == 0
            assert sorted(raw.get_children("/brokers/topics/t/partitions")) == ["0", "1", "2"]
            # only broker 2 is live: leader = first live replica, ISR = live replicas
            assert raw.get("/brokers/topics/t/partitions/0/state")[0] == (
                b'{"controller_epoch":1,"leader":2,"version":1,"leader_epoch":0,"isr":[2]}'
            )
        finally:
            await client.stop_async()

    try:
        run(scenario())
        assert raw.get_children("/brokers/ids") == []  # session closed: ephemerals gone
        assert raw.exists("/brokers/topics/t") is not None  # persistent
    finally:
        raw.stop()
        raw.close()


class _Fixed(random.Random):
    def __init__(self, values: list[int]) -> None:
        super().__init__(0)
        self.values = list(values)

    def randrange(self, *args: int, **kwargs: int) -> int:  # type: ignore[override]
        return self.values.pop(0)
