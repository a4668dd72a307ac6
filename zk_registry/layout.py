"""Kafka 0.8.2.2's znode layout and JSON payloads, byte for byte (kafka-protocols.md A1, A2).

Paths are the constants and builders of ``kafka.utils.ZkUtils``, ``ZKGroupDirs``
and ``ZKGroupTopicDirs`` (K@0.8.2.2 ``core/src/main/scala/kafka/utils/ZkUtils.scala``).
Every path here is *chroot-relative*: a run gives its kazoo client a connect
string with a chroot (``"127.0.0.1:2181/run-42"``) and uses these paths as is,
exactly as a Kafka cluster configured with ``zookeeper.connect=host:port/chroot``
does.

Payloads are produced the way Kafka 0.8.2.2 produces them, with
``kafka.utils.Json.encode`` (K@0.8.2.2 ``core/src/main/scala/kafka/utils/Json.scala``):

* compact: ``"{" + k:v joined by "," + "}"``, no spaces;
* strings are written as ``"\\"" + s + "\\""`` with **no escaping** (the
  docstring says it "does not properly handle non-ascii characters"); we keep
  that, so a quote in a group id gives the same broken JSON Kafka would write;
* numbers with ``toString``;
* keys in the **iteration order of the Scala Map** that was passed in.

That last point decides the bytes. ``Map(k1 -> v1, ...)`` (``scala.collection.Map``
in files that ``import scala.collection._``) builds an *immutable* map through a
builder: with up to 4 entries it is a ``Map1``..``Map4``, which iterates in
insertion order; with 5 or more it is a ``HashTrieMap`` (Scala 2.10/2.11
``immutable.HashMap``), which iterates in the order of the improved hash's 5-bit
groups, lowest bits first (:func:`scala_immutable_map_order`). Kafka 0.8.2.2 was
built with Scala 2.10.4 by default; 2.11 has the same hashing. What that gives:

========================================  ==========================================================
payload                                   key order actually written by 0.8.2.2
========================================  ==========================================================
``/consumers/<g>/ids/<id>`` (4 keys)      ``version, subscription, pattern, timestamp`` (Map4)
``/brokers/ids/<id>`` (5 keys)            ``jmx_port, timestamp, host, version, port`` (HashTrieMap)
``.../partitions/<p>/state`` (5 keys)     ``controller_epoch, leader, version, leader_epoch, isr``
``/brokers/topics/<t>``                   ``version, partitions``; partitions: see below
``/controller`` (3 keys)                  ``version, brokerid, timestamp``
``/admin/preferred_replica_election``     ``version, partitions``; each ``topic, partition``
``/admin/reassign_partitions``            ``version, partitions``; each ``topic, partition,
                                          replicas``
``/config/topics/<t>``                    ``version, config``; config in ``Properties`` order
========================================  ==========================================================

The broker and partition-state orders are the ones seen in real 0.8.x
clusters (``{"jmx_port":-1,"timestamp":"...","host":"...","version":1,"port":9092}``,
``{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}``).

The topic assignment map goes through three collections
(K@0.8.2.2 ``admin/AdminUtils.scala``): ``assignReplicasToBrokers`` fills a
``mutable.HashMap[Int, List[Int]]`` with partitions ``0..n-1`` and returns
``ret.toMap``; ``writeTopicPartitionAssignment`` maps it with
``e._1.toString -> e._2``. For n <= 4 the result keeps the mutable hash table's
iteration order (``"2","1","0"`` for 3 partitions, ``"2","1","3","0"`` for 4,
as in the 2015 log line ``Topic creation {"version":1,"partitions":{"2":[0],"1":[0],"0":[0]}}``);
for n >= 5 it is the ``HashTrieMap`` order of the partition *strings*
(``"4","5","1","0","2","3"`` for 6). :func:`encode_topic_assignment` reproduces both.

Ids (A2): consumer id ``<group>_<hostname>-<ms>-<first 8 hex chars of
UUID.getMostSignificantBits.toHexString>`` (or ``<group>_<consumer.id>``), thread
id ``<consumerId>-<i>``. Offsets are decimal strings.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TypeVar

from emulator.javahash import java_string_hashcode
from emulator.topic_regex import BLACKLIST, INTERNAL_TOPICS, WHITELIST, TopicFilter

__all__ = [
    "ADMIN_PATH",
    "BLACK_LIST_PATTERN",
    "BROKERS_PATH",
    "BROKER_IDS_PATH",
    "BROKER_TOPICS_PATH",
    "COMMON_PERSISTENT_PATHS",
    "CONFIG_CHANGE_PREFIX",
    "CONFIG_PATH",
    "CONSUMERS_PATH",
    "CONTROLLER_EPOCH_PATH",
    "CONTROLLER_PATH",
    "DELETE_TOPICS_PATH",
    "INITIAL_CONTROLLER_EPOCH",
    "INTERNAL_TOPICS",
    "PREFERRED_REPLICA_ELECTION_PATH",
    "REASSIGN_PARTITIONS_PATH",
    "STATIC_PATTERN",
    "TOPIC_CONFIG_CHANGES_PATH",
    "TOPIC_CONFIG_PATH",
    "WHITE_LIST_PATTERN",
    "BrokerInfo",
    "ConsumerRegistration",
    "ControllerInfo",
    "PartitionState",
    "PayloadError",
    "broker_ids_path",
    "broker_path",
    "brokers_topics_path",
    "config_change_prefix_path",
    "config_changes_path",
    "consumer_group_path",
    "consumer_id_path",
    "consumer_ids_path",
    "consumer_owners_path",
    "controller_epoch_path",
    "controller_path",
    "decode_broker",
    "decode_consumer_registration",
    "decode_controller",
    "decode_controller_epoch",
    "decode_controller_id",
    "decode_offset",
    "decode_owner",
    "decode_partition_state",
    "decode_preferred_replica_election",
    "decode_reassign_partitions",
    "decode_topic_assignment",
    "decode_topic_config",
    "delete_topic_path",
    "delete_topics_path",
    "encode_broker",
    "encode_config_change",
    "encode_consumer_registration",
    "encode_controller",
    "encode_controller_epoch",
    "encode_offset",
    "encode_owner",
    "encode_partition_state",
    "encode_preferred_replica_election",
    "encode_reassign_partitions",
    "encode_topic_assignment",
    "encode_topic_config",
    "java_hashtable_order",
    "json_escape_string",
    "kafka_json_encode",
    "make_consumer_id",
    "offset_path",
    "offsets_topic_path",
    "owner_path",
    "owners_topic_path",
    "parse_thread_id",
    "partition_state_path",
    "preferred_replica_election_path",
    "read_consumer_registration",
    "reassign_partitions_path",
    "scala_immutable_map_order",
    "scala_mutable_hashmap_order",
    "thread_id",
    "topic_allowed",
    "topic_config_path",
    "topic_partition_path",
    "topic_partitions",
    "topic_partitions_path",
    "topic_path",
]

# --------------------------------------------------------------------------- path constants
# K@0.8.2.2 ZkUtils object (lines 39-48).

CONSUMERS_PATH: Final = "/consumers"
BROKERS_PATH: Final = "/brokers"
BROKER_IDS_PATH: Final = "/brokers/ids"
BROKER_TOPICS_PATH: Final = "/brokers/topics"
CONFIG_PATH: Final = "/config"
TOPIC_CONFIG_PATH: Final = "/config/topics"
TOPIC_CONFIG_CHANGES_PATH: Final = "/config/changes"
CONTROLLER_PATH: Final = "/controller"
CONTROLLER_EPOCH_PATH: Final = "/controller_epoch"
ADMIN_PATH: Final = "/admin"
REASSIGN_PARTITIONS_PATH: Final = "/admin/reassign_partitions"
DELETE_TOPICS_PATH: Final = "/admin/delete_topics"
PREFERRED_REPLICA_ELECTION_PATH: Final = "/admin/preferred_replica_election"
#: ``AdminUtils.TopicConfigChangeZnodePrefix``: sequential children of /config/changes.
CONFIG_CHANGE_PREFIX: Final = "config_change_"
#: ``ZkUtils.setupCommonPaths``: persistent paths a broker makes sure exist at start-up.
COMMON_PERSISTENT_PATHS: Final[tuple[str, ...]] = (
    CONSUMERS_PATH,
    BROKER_IDS_PATH,
    BROKER_TOPICS_PATH,
    TOPIC_CONFIG_CHANGES_PATH,
    TOPIC_CONFIG_PATH,
    DELETE_TOPICS_PATH,
)
#: ``KafkaController.InitialControllerEpoch``.
INITIAL_CONTROLLER_EPOCH: Final = 1

# TopicCount.scala: the ``pattern`` values of a consumer registration.
STATIC_PATTERN: Final = "static"
WHITE_LIST_PATTERN: Final = "white_list"
BLACK_LIST_PATTERN: Final = "black_list"
#: ``Topic.InternalTopics`` in 0.8.2 (``OffsetManager.OffsetsTopicName``): the one of
#: :mod:`emulator.topic_regex`, imported above.


def _check_segment(name: str, what: str) -> str:
    if not name or "/" in name:
        raise ValueError(f"invalid {what} {name!r} for a znode path segment")
    return name


# --------------------------------------------------------------------------- consumer paths


def consumer_group_path(group: str) -> str:
    """``ZKGroupDirs.consumerGroupDir``: ``/consumers/<group>``."""
    return f"{CONSUMERS_PATH}/{_check_segment(group, 'group')}"


def consumer_ids_path(group: str) -> str:
    """``ZKGroupDirs.consumerRegistryDir``: ``/consumers/<group>/ids``."""
    return f"{consumer_group_path(group)}/ids"


def consumer_id_path(group: str, consumer_id: str) -> str:
    """A member's ephemeral registration: ``/consumers/<group>/ids/<consumerId>``."""
    return f"{consumer_ids_path(group)}/{_check_segment(consumer_id, 'consumer id')}"


def consumer_owners_path(group: str) -> str:
    """``/consumers/<group>/owners``."""
    return f"{consumer_group_path(group)}/owners"


def owners_topic_path(group: str, topic: str) -> str:
    """``ZKGroupTopicDirs.consumerOwnerDir``: ``/consumers/<group>/owners/<topic>``."""
    return f"{consumer_owners_path(group)}/{_check_segment(topic, 'topic')}"


def owner_path(group: str, topic: str, partition: int) -> str:
    """``ZkUtils.getConsumerPartitionOwnerPath``: ``/consumers/<g>/owners/<t>/<p>`` (ephemeral)."""
    return f"{owners_topic_path(group, topic)}/{int(partition)}"


def offsets_topic_path(group: str, topic: str) -> str:
    """``ZKGroupTopicDirs.consumerOffsetDir``: ``/consumers/<group>/offsets/<topic>``."""
    return f"{consumer_group_path(group)}/offsets/{_check_segment(topic, 'topic')}"


def offset_path(group: str, topic: str, partition: int) -> str:
    """``/consumers/<g>/offsets/<t>/<p>`` (persistent), as ``commitOffsetToZooKeeper`` writes it."""
    return f"{offsets_topic_path(group, topic)}/{int(partition)}"


# --------------------------------------------------------------------------- broker-side paths


def broker_ids_path() -> str:
    """``ZkUtils.BrokerIdsPath``: ``/brokers/ids``."""
    return BROKER_IDS_PATH


def broker_path(broker_id: int) -> str:
    """A broker's ephemeral registration: ``/brokers/ids/<id>``."""
    return f"{BROKER_IDS_PATH}/{int(broker_id)}"


def brokers_topics_path() -> str:
    """``ZkUtils.BrokerTopicsPath``: ``/brokers/topics``."""
    return BROKER_TOPICS_PATH


def topic_path(topic: str) -> str:
    """``ZkUtils.getTopicPath``: ``/brokers/topics/<topic>`` (the replica assignment)."""
    return f"{BROKER_TOPICS_PATH}/{_check_segment(topic, 'topic')}"


def topic_partitions_path(topic: str) -> str:
    """``ZkUtils.getTopicPartitionsPath``: ``/brokers/topics/<topic>/partitions``."""
    return f"{topic_path(topic)}/partitions"


def topic_partition_path(topic: str, partition: int) -> str:
    """``ZkUtils.getTopicPartitionPath``: ``/brokers/topics/<t>/partitions/<p>``."""
    return f"{topic_partitions_path(topic)}/{int(partition)}"


def partition_state_path(topic: str, partition: int) -> str:
    """``ZkUtils.getTopicPartitionLeaderAndIsrPath``: ``.../partitions/<p>/state``."""
    return f"{topic_partition_path(topic, partition)}/state"


def controller_path() -> str:
    """``ZkUtils.ControllerPath``: ``/controller`` (ephemeral)."""
    return CONTROLLER_PATH


def controller_epoch_path() -> str:
    """``ZkUtils.ControllerEpochPath``: ``/controller_epoch``."""
    return CONTROLLER_EPOCH_PATH


def preferred_replica_election_path() -> str:
    """``ZkUtils.PreferredReplicaLeaderElectionPath``: ``/admin/preferred_replica_election``."""
    return PREFERRED_REPLICA_ELECTION_PATH


def reassign_partitions_path() -> str:
    """``ZkUtils.ReassignPartitionsPath``: ``/admin/reassign_partitions``."""
    return REASSIGN_PARTITIONS_PATH


def delete_topics_path() -> str:
    """``ZkUtils.DeleteTopicsPath``: ``/admin/delete_topics``."""
    return DELETE_TOPICS_PATH


def delete_topic_path(topic: str) -> str:
    """``ZkUtils.getDeleteTopicPath``: ``/admin/delete_topics/<topic>`` (empty data)."""
    return f"{DELETE_TOPICS_PATH}/{_check_segment(topic, 'topic')}"


def topic_config_path(topic: str) -> str:
    """``ZkUtils.getTopicConfigPath``: ``/config/topics/<topic>``."""
    return f"{TOPIC_CONFIG_PATH}/{_check_segment(topic, 'topic')}"


def config_changes_path() -> str:
    """``ZkUtils.TopicConfigChangesPath``: ``/config/changes``."""
    return TOPIC_CONFIG_CHANGES_PATH


def config_change_prefix_path() -> str:
    """The sequential-create prefix ``/config/changes/config_change_`` (ZK appends 10 digits)."""
    return f"{TOPIC_CONFIG_CHANGES_PATH}/{CONFIG_CHANGE_PREFIX}"


# --------------------------------------------------------------------------- identifiers


def make_consumer_id(
    group: str,
    hostname: str,
    now_ms: int,
    uuid_msb_hex: str,
    consumer_id_config: str | None = None,
) -> str:
    """``ZookeeperConsumerConnector.consumerIdString`` (K@0.8.2.2 lines 111-123; A2).

    Kafka: ``group + "_" + consumerUuid`` where consumerUuid is the ``consumer.id``
    config if set, else ``"%s-%d-%s".format(hostname, currentTimeMillis,
    uuid.getMostSignificantBits.toHexString.substring(0, 8))``.
    ``Long.toHexString`` prints the 64-bit value unsigned *without leading zeros*,
    so an msb below ``0x1000_0000_0000_0000`` shifts which digits are kept; this
    function does the same.

    Args:
        group: ``group.id``.
        hostname: ``InetAddress.getLocalHost.getHostName``.
        now_ms: the injected wall clock, in ms.
        uuid_msb_hex: the UUID's most significant 64 bits as hex (leading zeros
            allowed, e.g. ``uuid.UUID(...).hex[:16]``); injected for determinism.
        consumer_id_config: the ``consumer.id`` config, if set.

    Returns:
        The consumer id string.

    Raises:
        ValueError: if ``uuid_msb_hex`` is not hex of at most 64 bits, or its
            unsigned hex form has fewer than 8 digits (Java's ``substring`` throws).
    """
    if consumer_id_config is not None:
        return f"{group}_{consumer_id_config}"
    msb = int(uuid_msb_hex, 16)
    if not 0 <= msb < 1 << 64:
        raise ValueError(f"uuid msb {uuid_msb_hex!r} is not a 64-bit value")
    hex_digits = format(msb, "x")
    if len(hex_digits) < 8:
        raise ValueError(f"Long.toHexString({uuid_msb_hex}) has fewer than 8 digits")
    return f"{group}_{hostname}-{int(now_ms)}-{hex_digits[:8]}"


def thread_id(consumer_id: str, index: int) -> str:
    """``ConsumerThreadId.toString``: ``"<consumerId>-<i>"``."""
    return f"{consumer_id}-{int(index)}"


def parse_thread_id(value: str) -> tuple[str, int]:
    """Split ``"<consumerId>-<i>"`` into ``(consumerId, i)``.

    Raises:
        ValueError: if there is no ``-<digits>`` suffix.
    """
    head, sep, tail = value.rpartition("-")
    if not sep or not tail.isdigit():
        raise ValueError(f"not a consumer thread id: {value!r}")
    return head, int(tail)


# --------------------------------------------------------------------------- Scala/Java orders

_M32 = 0xFFFFFFFF
K = TypeVar("K", str, int)


def _i32(x: int) -> int:
    x &= _M32
    return x - (1 << 32) if x & 0x80000000 else x


def _scala_hash(key: str | int) -> int:
    """``key.##``: ``String.hashCode`` for strings, the value itself for an ``Int``."""
    if isinstance(key, str):
        return java_string_hashcode(key)
    if not -(1 << 31) <= key < (1 << 31):
        raise ValueError(f"{key} is not a Scala Int")
    return key


def _improve_immutable(hcode: int) -> int:
    """``immutable.HashMap.improve`` (Scala 2.10/2.11), as an unsigned 32-bit value."""
    h = _i32(hcode)
    h = _i32(h + _i32(~_i32(h << 9)))
    h = _i32(h ^ ((h & _M32) >> 14))
    h = _i32(h + _i32(h << 4))
    h = _i32(h ^ ((h & _M32) >> 10))
    return h & _M32


def scala_immutable_map_order(keys: Sequence[K]) -> list[K]:
    """Iteration order of a Scala 2.10 immutable ``Map`` built by adding ``keys`` in order.

    Up to 4 distinct keys (``Map1``..``Map4``): insertion order. From 5 on, a
    ``HashTrieMap``: ordered by the 5-bit groups of ``improve(key.##)``, lowest
    group first (the trie's level-0 index, then level 1, ...). Full 32-bit hash
    collisions (a ``HashMapCollision1``) are kept in insertion order, which
    Kafka's payloads never need.

    Args:
        keys: distinct ``str`` or ``int`` keys, in insertion order.

    Returns:
        The keys in the order ``foreach`` visits them.
    """
    if len(set(keys)) != len(keys):
        raise ValueError("keys must be distinct")
    if len(keys) <= 4:
        return list(keys)

    def trie_key(key: K) -> tuple[int, ...]:
        h = _improve_immutable(_scala_hash(key))
        return tuple((h >> (5 * level)) & 31 for level in range(7))

    return sorted(keys, key=trie_key)


def _byteswap32(v: int) -> int:
    """``scala.util.hashing.byteswap32``."""
    hc = _i32(v * 0x9E3775CD)
    hc = int.from_bytes((hc & _M32).to_bytes(4, "big"), "little")
    return _i32(hc * 0x9E3775CD)


def scala_mutable_hashmap_order(keys: Sequence[K]) -> list[K]:
    """Iteration order of a fresh Scala 2.10 ``mutable.HashMap`` after putting ``keys``.

    ``HashTable``: 16 buckets while at most 12 entries (load factor 0.75),
    bucket ``index = (rotateRight(byteswap32(key.##), 4) >>> 28) & 15``, new
    entries pushed at the head of their bucket, iteration from the last bucket
    down to bucket 0. Only tables that never resized are modelled.

    Args:
        keys: distinct keys, in ``put`` order (at most 12).

    Returns:
        The keys in ``foreach`` order.

    Raises:
        ValueError: with more than 12 keys (the table would have resized).
    """
    if len(set(keys)) != len(keys):
        raise ValueError("keys must be distinct")
    if len(keys) > 12:
        raise ValueError("only un-resized mutable.HashMaps (<= 12 entries) are modelled")
    size = 16
    seed = (size - 1).bit_count()  # tableSizeSeed
    buckets: list[list[K]] = [[] for _ in range(size)]
    for key in keys:
        i = _byteswap32(_scala_hash(key)) & _M32
        rotated = ((i >> seed) | (i << (32 - seed))) & _M32
        index = (rotated >> (32 - (size - 1).bit_count())) & (size - 1)
        buckets[index].insert(0, key)
    out: list[K] = []
    for bucket in reversed(buckets):
        out.extend(bucket)
    return out


def java_hashtable_order(keys: Sequence[str]) -> list[str]:
    """Iteration order of a ``java.util.Properties`` (a Java 8 ``Hashtable``) after ``put``s.

    11 buckets, threshold ``(int)(capacity * 0.75)``, rehash to ``2n+1`` when
    ``count >= threshold`` before an insert, bucket ``(hashCode & 0x7FFFFFFF) % n``,
    entries pushed at the head, iteration from the last bucket down (``Enumerator``).

    Args:
        keys: distinct property names, in ``setProperty`` order.

    Returns:
        The names in ``entrySet().iterator()`` order.
    """
    if len(set(keys)) != len(keys):
        raise ValueError("keys must be distinct")
    capacity = 11
    threshold = int(capacity * 0.75)
    table: list[list[str]] = [[] for _ in range(capacity)]
    for count, key in enumerate(keys):
        if count >= threshold:
            new_capacity = capacity * 2 + 1
            new_table: list[list[str]] = [[] for _ in range(new_capacity)]
            for old in reversed(table):
                for k in old:  # chain order, each pushed at the head of its new bucket
                    new_table[(java_string_hashcode(k) & 0x7FFFFFFF) % new_capacity].insert(0, k)
            table, capacity = new_table, new_capacity
            threshold = int(capacity * 0.75)
        table[(java_string_hashcode(key) & 0x7FFFFFFF) % capacity].insert(0, key)
    out: list[str] = []
    for bucket in reversed(table):
        out.extend(bucket)
    return out


# --------------------------------------------------------------------------- Json.encode


def kafka_json_encode(obj: object) -> str:
    """``kafka.utils.Json.encode`` of K@0.8.2.2, on Python values.

    ``None`` -> ``null``; ``bool`` -> ``true``/``false``; ``str`` -> the string in
    double quotes, **unescaped**; ``int`` -> decimal; a ``Mapping`` -> ``{k:v,...}``
    in its iteration order (pass an ordered dict built with the Scala order); a
    ``list``/``tuple`` -> ``[...]``. No whitespace anywhere.

    Raises:
        TypeError: for any other type (Kafka throws IllegalArgumentException).
    """
    if obj is None:
        return "null"
    if isinstance(obj, bool):
        return "true" if obj else "false"
    if isinstance(obj, str):
        return '"' + obj + '"'
    if isinstance(obj, int):
        return str(obj)
    if isinstance(obj, Mapping):
        items = (f"{kafka_json_encode(k)}:{kafka_json_encode(v)}" for k, v in obj.items())
        return "{" + ",".join(items) + "}"
    if isinstance(obj, list | tuple):
        return "[" + ",".join(kafka_json_encode(v) for v in obj) + "]"
    raise TypeError(f"Json.encode: unsupported type {type(obj).__name__}")


_JSON_ESCAPES: Final = {
    '"': '\\"',
    "\\": "\\\\",
    "/": "\\/",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


def json_escape_string(text: str) -> str:
    r"""``kafka.utils.Utils.JSONEscapeString`` (K@0.8.2.2 ``utils/Utils.scala`` 547-568).

    ``"``, ``\``, ``/`` and the controls backspace, form feed, newline,
    carriage return and tab get a backslash escape (``\"``, ``\\``, ``\/``,
    ``\b``, ``\f``, ``\n``, ``\r``, ``\t``); the other C0 controls, DEL and
    the C1 controls (U+0000-U+001F, U+007F-U+009F) become ``\uXXXX``
    (lower-case hex); everything else is kept. :func:`kafka_json_encode` does
    not escape, so a ``WildcardTopicCount`` escapes its regex itself before it
    becomes the registration's key (``consumer/TopicCount.scala`` 139).
    """
    out: list[str] = []
    for c in text:
        escaped = _JSON_ESCAPES.get(c)
        if escaped is not None:
            out.append(escaped)
        elif c <= "\x1f" or "\x7f" <= c <= "\x9f":
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    return "".join(out)


def _scala_map(pairs: Sequence[tuple[str, object]]) -> dict[str, object]:
    """An ordered dict in the iteration order of ``Map(pairs: _*)``."""
    values = dict(pairs)
    return {k: values[k] for k in scala_immutable_map_order([k for k, _ in pairs])}


def _to_bytes(text: str) -> bytes:
    return text.encode("utf-8")  # ZKStringSerializer: getBytes("UTF-8")


# --------------------------------------------------------------------------- decoding helpers


class PayloadError(ValueError):
    """A znode's data is not in any format Kafka 0.8.2.2 writes or accepts."""


def _text(data: bytes | str | None, what: str) -> str:
    if data is None:
        raise PayloadError(f"{what}: no data")
    if isinstance(data, bytes):
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PayloadError(f"{what}: not UTF-8") from exc
    return data


def _json_object(data: bytes | str | None, what: str) -> dict[str, object]:
    text = _text(data, what)
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise PayloadError(f"{what}: not JSON: {text!r}") from exc
    if not isinstance(value, dict):
        raise PayloadError(f"{what}: not a JSON object: {text!r}")
    return value


def _int_field(obj: Mapping[str, object], key: str, what: str) -> int:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise PayloadError(f"{what}: field {key!r} must be an integer, got {value!r}")
    return value


def _str_field(obj: Mapping[str, object], key: str, what: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise PayloadError(f"{what}: field {key!r} must be a string, got {value!r}")
    return value


def _int_list(value: object, what: str) -> list[int]:
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise PayloadError(f"{what}: expected a list of integers, got {value!r}")
    return list(value)


def _timestamp(obj: Mapping[str, object], what: str) -> int | None:
    value = obj.get("timestamp")
    if value is None:
        return None
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise PayloadError(f"{what}: bad timestamp {value!r}")


# --------------------------------------------------------------------------- consumer registration


@dataclass(frozen=True)
class ConsumerRegistration:
    """The data of ``/consumers/<g>/ids/<consumerId>`` (``TopicCount``).

    Attributes:
        version: always 1 in 0.8.2.
        subscription: ``{topic: numStreams}`` for ``static``; for wildcards one
            entry ``{escaped regex: numStreams}``.
        pattern: ``static``, ``white_list`` or ``black_list``.
        timestamp_ms: registration time (a string in the JSON), if present.
    """

    version: int
    subscription: dict[str, int]
    pattern: str
    timestamp_ms: int | None

    @property
    def is_wildcard(self) -> bool:
        """``TopicCount.constructTopicCount``: a non-empty white/black-list subscription."""
        return bool(self.subscription) and self.pattern in (WHITE_LIST_PATTERN, BLACK_LIST_PATTERN)


def encode_consumer_registration(
    subscription: Mapping[str, int], timestamp_ms: int, pattern: str = STATIC_PATTERN
) -> bytes:
    """``registerConsumerInZK``'s payload (K@0.8.2.2 ``ZookeeperConsumerConnector.scala``).

    ``Json.encode(Map("version" -> 1, "subscription" -> topicCount.getTopicCountMap,
    "pattern" -> topicCount.pattern, "timestamp" -> timestamp))``: 4 keys, so a
    ``Map4`` in that order. The subscription map is written in the order of a
    Scala immutable Map built from ``subscription``'s insertion order (as
    ``Map.empty ++ javaMap`` does in the Java API): as given up to 4 topics,
    ``HashTrieMap`` order beyond.

    Example:
    ``{"version":1,"subscription":{"t1":2},"pattern":"static","timestamp":"1441996002307"}``.
    """
    sub = {t: int(subscription[t]) for t in scala_immutable_map_order(list(subscription))}
    payload = {
        "version": 1,
        "subscription": sub,
        "pattern": pattern,
        "timestamp": str(int(timestamp_ms)),
    }
    return _to_bytes(kafka_json_encode(payload))


def decode_consumer_registration(data: bytes | str | None) -> ConsumerRegistration:
    """Parse a consumer registration as ``TopicCount.constructTopicCount`` does.

    ``pattern`` and ``subscription`` are required (Kafka throws "error
    constructing TopicCount" otherwise); ``version`` and ``timestamp`` are not.

    Raises:
        PayloadError: if the data is not such a registration.
    """
    what = "consumer registration"
    obj = _json_object(data, what)
    pattern = _str_field(obj, "pattern", what)
    sub = obj.get("subscription")
    if not isinstance(sub, dict) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in sub.values()
    ):
        raise PayloadError(f"{what}: bad subscription {sub!r}")
    version = obj.get("version", 1)
    return ConsumerRegistration(
        version=version if isinstance(version, int) else 1,
        subscription={str(k): int(v) for k, v in sub.items()},
        pattern=pattern,
        timestamp_ms=_timestamp(obj, what),
    )


def read_consumer_registration(data: bytes | str | None) -> ConsumerRegistration:
    """:func:`decode_consumer_registration`, remembered per payload (the result is shared).

    In a 0.8 group every member re-reads every member's registration at each
    rebalance (A7's herd: N² reads of N payloads), so the same bytes are parsed
    again and again. The result is frozen except its ``subscription`` dict,
    which a caller must treat as read-only (copy it to change it).

    Raises:
        PayloadError: as :func:`decode_consumer_registration` (not remembered).
    """
    if isinstance(data, bytes):
        return _registration_of(data)
    return decode_consumer_registration(data)


@functools.lru_cache(maxsize=8192)
def _registration_of(data: bytes) -> ConsumerRegistration:
    return decode_consumer_registration(data)


def topic_allowed(pattern: str, raw_regex: str, topic: str, exclude_internal: bool = True) -> bool:
    """``Whitelist``/``Blacklist.isTopicAllowed`` for a wildcard registration.

    Args:
        pattern: ``white_list`` or ``black_list``.
        raw_regex: the subscription key (Kafka stores the JSON-escaped regex;
            the JSON parser has already un-escaped it).
        topic: a child of ``/brokers/topics``.
        exclude_internal: ``exclude.internal.topics`` (default true).

    Returns:
        Whether the topic is part of the subscription: the 0.8 ``TopicFilter``
        of :mod:`emulator.topic_regex` (its rewrite of the string, Java's full
        match read through Python's ``re``).

    Raises:
        emulator.topic_regex.TopicRegexError: a regex Java rejects, or one the
            emulator cannot read faithfully.
        ValueError: ``pattern`` is not a wildcard pattern.
    """
    return _topic_filter(pattern, raw_regex).allowed(topic, exclude_internal)


@functools.lru_cache(maxsize=1024)
def _topic_filter(pattern: str, raw_regex: str) -> TopicFilter:
    """A registration's filter (cached: each member re-reads every peer's at each rebalance)."""
    if pattern == WHITE_LIST_PATTERN:
        return TopicFilter(raw_regex, WHITELIST)
    if pattern == BLACK_LIST_PATTERN:
        return TopicFilter(raw_regex, BLACKLIST)
    raise ValueError(f"not a wildcard pattern: {pattern!r}")


# --------------------------------------------------------------------------- owners and offsets


def encode_owner(thread: str) -> bytes:
    """An owner node's data: the thread id string itself (``consumerThreadId.toString``)."""
    return _to_bytes(thread)


def decode_owner(data: bytes | str | None) -> str:
    """An owner node's data as the holder's thread id string."""
    return _text(data, "owner")


def encode_offset(offset: int) -> bytes:
    """``offset.toString``: a decimal string, e.g. ``b"42"``."""
    return _to_bytes(str(int(offset)))


def decode_offset(data: bytes | str | None) -> int:
    """``offsetStr.toLong``.

    Raises:
        PayloadError: if the data is not a decimal long.
    """
    text = _text(data, "offset").strip()
    try:
        return int(text, 10)
    except ValueError as exc:
        raise PayloadError(f"offset: not a number: {text!r}") from exc


# --------------------------------------------------------------------------- brokers


@dataclass(frozen=True)
class BrokerInfo:
    """The data of ``/brokers/ids/<id>``.

    Attributes:
        broker_id: from the path (the payload does not carry it).
        host, port: what ``Broker.createBroker`` reads.
        jmx_port: ``-1`` when JMX is off.
        version: 1 in 0.8.2.
        timestamp_ms: registration time, if present.
    """

    broker_id: int
    host: str
    port: int
    jmx_port: int = -1
    version: int = 1
    timestamp_ms: int | None = None


def encode_broker(host: str, port: int, jmx_port: int, timestamp_ms: int) -> bytes:
    """``ZkUtils.registerBrokerInZk``'s payload (K@0.8.2.2).

    ``Json.encode(Map("version" -> 1, "host" -> host, "port" -> port,
    "jmx_port" -> jmxPort, "timestamp" -> timestamp))``: 5 keys, a
    ``HashTrieMap``, which iterates ``jmx_port, timestamp, host, version, port``.

    Example: ``{"jmx_port":-1,"timestamp":"1441996002307","host":"b1","version":1,"port":9092}``.
    """
    return _to_bytes(
        kafka_json_encode(
            _scala_map(
                [
                    ("version", 1),
                    ("host", host),
                    ("port", int(port)),
                    ("jmx_port", int(jmx_port)),
                    ("timestamp", str(int(timestamp_ms))),
                ]
            )
        )
    )


def decode_broker(broker_id: int, data: bytes | str | None) -> BrokerInfo:
    """``Broker.createBroker(id, brokerInfoString)``: needs ``host`` and ``port``.

    Raises:
        PayloadError: null data (BrokerNotAvailableException) or a payload
            without host/port (KafkaException "Failed to parse the broker info").
    """
    what = f"broker {broker_id}"
    obj = _json_object(data, what)
    jmx = obj.get("jmx_port", -1)
    version = obj.get("version", 1)
    return BrokerInfo(
        broker_id=int(broker_id),
        host=_str_field(obj, "host", what),
        port=_int_field(obj, "port", what),
        jmx_port=jmx if isinstance(jmx, int) and not isinstance(jmx, bool) else -1,
        version=version if isinstance(version, int) else 1,
        timestamp_ms=_timestamp(obj, what),
    )


# --------------------------------------------------------------------------- topics


def encode_topic_assignment(assignment: Mapping[int, Sequence[int]]) -> bytes:
    """``/brokers/topics/<t>`` as ``AdminUtils.createTopic`` writes it (K@0.8.2.2).

    ``ZkUtils.replicaAssignmentZkData(replicaAssignment.map(e => (e._1.toString -> e._2)))``
    = ``Json.encode(Map("version" -> 1, "partitions" -> map))``. The partition
    order is that of ``assignReplicasToBrokers``' ``mutable.HashMap`` (filled in
    ``assignment``'s order) through ``toMap`` and the ``toString`` map: see the
    module docstring. Each replica list keeps its order (head = preferred).

    Example (3 partitions): ``{"version":1,"partitions":{"2":[0],"1":[0],"0":[0]}}``.
    """
    ids = [int(p) for p in assignment]
    if len(ids) <= 4:
        # Map1..Map4 all the way: the mutable table's iteration order survives.
        order = [str(p) for p in scala_mutable_hashmap_order(ids)]
    else:
        order = scala_immutable_map_order([str(p) for p in ids])
    partitions = {p: [int(r) for r in assignment[int(p)]] for p in order}
    return _to_bytes(kafka_json_encode({"version": 1, "partitions": partitions}))


def decode_topic_assignment(data: bytes | str | None) -> dict[int, list[int]]:
    """``ZkUtils.getPartitionAssignmentForTopics`` for one topic: partition -> replicas.

    A payload without ``partitions`` gives an empty map, as in Kafka.

    Returns:
        Partition -> replica list, sorted by partition number.

    Raises:
        PayloadError: on malformed JSON or non-numeric partition keys.
    """
    what = "topic assignment"
    obj = _json_object(data, what)
    parts = obj.get("partitions")
    if parts is None:
        return {}
    if not isinstance(parts, dict):
        raise PayloadError(f"{what}: partitions must be an object, got {parts!r}")
    out: dict[int, list[int]] = {}
    for key, replicas in parts.items():
        try:
            p = int(key)
        except ValueError as exc:
            raise PayloadError(f"{what}: partition key {key!r} is not a number") from exc
        out[p] = _int_list(replicas, what)
    return dict(sorted(out.items()))


def topic_partitions(data: bytes | str | None) -> tuple[int, ...]:
    """The partition numbers of a topic assignment payload, ascending.

    ``tuple(decode_topic_assignment(data))``, remembered per payload: a 0.8
    consumer reads each topic's assignment at every rebalance attempt, and one
    of 10,000 partitions takes milliseconds to parse.

    Raises:
        PayloadError: as :func:`decode_topic_assignment` (not remembered).
    """
    if isinstance(data, bytes):
        return _partitions_of(data)
    return tuple(decode_topic_assignment(data))


@functools.lru_cache(maxsize=256)
def _partitions_of(data: bytes) -> tuple[int, ...]:
    return tuple(decode_topic_assignment(data))


def encode_topic_config(config: Mapping[str, str] | None = None) -> bytes:
    """``/config/topics/<t>``: ``AdminUtils.writeTopicConfig`` (K@0.8.2.2).

    ``Json.encode(Map("version" -> 1, "config" -> configMap))`` where configMap
    wraps the ``java.util.Properties``; its entries come in ``Hashtable``
    order (:func:`java_hashtable_order`, Java 8). No overrides: ``{"version":1,"config":{}}``.
    """
    cfg = dict(config or {})
    ordered = {k: str(cfg[k]) for k in java_hashtable_order(list(cfg))}
    return _to_bytes(kafka_json_encode({"version": 1, "config": ordered}))


def decode_topic_config(data: bytes | str | None) -> dict[str, str]:
    """``AdminUtils.fetchTopicConfig``: the overrides (empty data: none).

    Raises:
        PayloadError: if ``version`` is not 1 or ``config`` is not a string map.
    """
    if data is None or data in (b"", ""):
        return {}
    obj = _json_object(data, "topic config")
    if obj.get("version") != 1:
        raise PayloadError(f"topic config: version must be 1, got {obj.get('version')!r}")
    cfg = obj.get("config")
    if not isinstance(cfg, dict) or not all(isinstance(v, str) for v in cfg.values()):
        raise PayloadError(f"topic config: invalid config {cfg!r}")
    return {str(k): v for k, v in cfg.items()}


def encode_config_change(topic: str) -> bytes:
    """``/config/changes/config_change_N``: ``Json.encode(topic)``, i.e. the quoted topic."""
    return _to_bytes(kafka_json_encode(topic))


# --------------------------------------------------------------------------- partition state


@dataclass(frozen=True)
class PartitionState:
    """``LeaderIsrAndControllerEpoch`` as stored in ``.../partitions/<p>/state``.

    Attributes:
        leader: the leader broker id (-1 when none).
        leader_epoch: incremented on each leader change.
        isr: in-sync replicas, in stored order.
        controller_epoch: the epoch of the controller that wrote it.
        version: 1.
        zk_version: the znode's data version when read (for conditional updates),
            ``None`` when not read from ZooKeeper.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    version: int = 1
    zk_version: int | None = None


def encode_partition_state(
    leader: int, leader_epoch: int, isr: Sequence[int], controller_epoch: int
) -> bytes:
    """``ZkUtils.leaderAndIsrZkData`` (K@0.8.2.2).

    ``Json.encode(Map("version" -> 1, "leader" -> leader, "leader_epoch" -> epoch,
    "controller_epoch" -> controllerEpoch, "isr" -> isr))``: 5 keys, a
    ``HashTrieMap``: ``controller_epoch, leader, version, leader_epoch, isr``.

    Example: ``{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}``.
    """
    return _to_bytes(
        kafka_json_encode(
            _scala_map(
                [
                    ("version", 1),
                    ("leader", int(leader)),
                    ("leader_epoch", int(leader_epoch)),
                    ("controller_epoch", int(controller_epoch)),
                    ("isr", [int(b) for b in isr]),
                ]
            )
        )
    )


def decode_partition_state(
    data: bytes | str | None, zk_version: int | None = None
) -> PartitionState:
    """``ReplicationUtils.parseLeaderAndIsr``: leader, leader_epoch, isr, controller_epoch.

    Raises:
        PayloadError: if a field is missing or mistyped.
    """
    what = "partition state"
    obj = _json_object(data, what)
    version = obj.get("version", 1)
    return PartitionState(
        leader=_int_field(obj, "leader", what),
        leader_epoch=_int_field(obj, "leader_epoch", what),
        isr=tuple(_int_list(obj.get("isr"), what)),
        controller_epoch=_int_field(obj, "controller_epoch", what),
        version=version if isinstance(version, int) else 1,
        zk_version=zk_version,
    )


# --------------------------------------------------------------------------- controller


@dataclass(frozen=True)
class ControllerInfo:
    """The data of ``/controller``.

    ``version`` and ``timestamp_ms`` are None for the old bare-integer format.
    """

    broker_id: int
    version: int | None = None
    timestamp_ms: int | None = None


def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    """``ZookeeperLeaderElector.elect``'s payload (K@0.8.2.2).

    ``Json.encode(Map("version" -> 1, "brokerid" -> brokerId, "timestamp" -> timestamp))``
    (a ``Map3``): ``{"version":1,"brokerid":1,"timestamp":"1441996002307"}``.
    """
    payload = {"version": 1, "brokerid": int(broker_id), "timestamp": str(int(timestamp_ms))}
    return _to_bytes(kafka_json_encode(payload))


def decode_controller(data: bytes | str | None) -> ControllerInfo:
    """``KafkaController.parseControllerId``, keeping the other fields.

    JSON with ``brokerid``; failing that, the old format: the bare broker id
    (``controllerInfoString.toInt``).

    Raises:
        PayloadError: "neither the new or the old format".
    """
    text = _text(data, "controller")
    try:
        obj = json.loads(text)
    except ValueError:
        obj = None
    if isinstance(obj, dict) and isinstance(obj.get("brokerid"), int):
        version = obj.get("version")
        return ControllerInfo(
            broker_id=int(obj["brokerid"]),
            version=version if isinstance(version, int) else None,
            timestamp_ms=_timestamp(obj, "controller"),
        )
    stripped = text.strip()
    if stripped.lstrip("-").isdigit():
        return ControllerInfo(broker_id=int(stripped))
    raise PayloadError(f"controller: neither the new nor the old format: {text!r}")


def decode_controller_id(data: bytes | str | None) -> int:
    """``KafkaController.parseControllerId``: the controller's broker id."""
    return decode_controller(data).broker_id


def encode_controller_epoch(epoch: int) -> bytes:
    """``/controller_epoch``: ``epoch.toString`` (the first controller writes ``b"1"``)."""
    return _to_bytes(str(int(epoch)))


def decode_controller_epoch(data: bytes | str | None) -> int:
    """``/controller_epoch`` as an int.

    Raises:
        PayloadError: if it is not an integer string.
    """
    text = _text(data, "controller epoch").strip()
    try:
        return int(text, 10)
    except ValueError as exc:
        raise PayloadError(f"controller epoch: not a number: {text!r}") from exc


# --------------------------------------------------------------------------- admin


def encode_preferred_replica_election(partitions: Sequence[tuple[str, int]]) -> bytes:
    """``PreferredReplicaLeaderElectionCommand.writePreferredReplicaElectionData``.

    ``Json.encode(Map("version" -> 1, "partitions" -> set.map(tp => Map("topic" -> t,
    "partition" -> p))))``. Kafka's list order is that of a Scala ``Set`` of maps
    (insertion order up to 4 elements, then a hash order of the maps' hashes
    that is not modelled here): the given order is written.

    Example: ``{"version":1,"partitions":[{"topic":"t","partition":0}]}``.
    """
    items = [{"topic": t, "partition": int(p)} for t, p in partitions]
    return _to_bytes(kafka_json_encode({"version": 1, "partitions": items}))


def decode_preferred_replica_election(data: bytes | str | None) -> list[tuple[str, int]]:
    """``PreferredReplicaLeaderElectionCommand.parsePreferredReplicaElectionData``.

    Raises:
        PayloadError: if ``partitions`` is missing or malformed (Kafka throws
            "Preferred replica election data is empty").
    """
    what = "preferred replica election"
    obj = _json_object(data, what)
    parts = obj.get("partitions")
    if not isinstance(parts, list):
        raise PayloadError(f"{what}: data is empty")
    out: list[tuple[str, int]] = []
    for item in parts:
        if not isinstance(item, dict):
            raise PayloadError(f"{what}: bad entry {item!r}")
        out.append((_str_field(item, "topic", what), _int_field(item, "partition", what)))
    return out


def encode_reassign_partitions(reassignment: Mapping[tuple[str, int], Sequence[int]]) -> bytes:
    """``ZkUtils.getPartitionReassignmentZkData`` (K@0.8.2.2).

    ``Json.encode(Map("version" -> 1, "partitions" -> m.map(e => Map("topic" -> t,
    "partition" -> p, "replicas" -> replicas))))``; entries in the given order.
    """
    items = [
        {"topic": t, "partition": int(p), "replicas": [int(r) for r in replicas]}
        for (t, p), replicas in reassignment.items()
    ]
    return _to_bytes(kafka_json_encode({"version": 1, "partitions": items}))


def decode_reassign_partitions(data: bytes | str | None) -> dict[tuple[str, int], list[int]]:
    """``ZkUtils.parsePartitionReassignmentData``: (topic, partition) -> new replicas."""
    what = "partition reassignment"
    obj = _json_object(data, what)
    parts = obj.get("partitions")
    if parts is None:
        return {}
    if not isinstance(parts, list):
        raise PayloadError(f"{what}: partitions must be a list")
    out: dict[tuple[str, int], list[int]] = {}
    for item in parts:
        if not isinstance(item, dict):
            raise PayloadError(f"{what}: bad entry {item!r}")
        key = (_str_field(item, "topic", what), _int_field(item, "partition", what))
        out[key] = _int_list(item.get("replicas"), what)
    return out
