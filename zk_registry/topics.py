"""Topics coming and going in ZooKeeper: the deletion marker, and the emulator's incarnation record.

Kafka's part (K@0.8.2.2):

* :func:`request_topic_deletion`: ``AdminUtils.deleteTopic`` (``admin/AdminUtils.scala``
  158-160), what ``kafka-topics.sh --delete`` runs (``admin/TopicCommand.scala``
  136-153): a persistent, empty ``/admin/delete_topics/<t>``. The tool refuses a
  topic that does not exist and says "already marked for deletion" when the
  marker is there. Whether anything follows is the controller's
  ``delete.topic.enable`` (:mod:`zk_registry.controller`).
* :func:`delete_recursive`: ZkClient's ``deleteRecursive``, which
  ``TopicDeletionManager.completeDeleteTopic`` uses on ``/brokers/topics/<t>``
  and ``/config/topics/<t>`` (``controller/TopicDeletionManager.scala`` 273-290).

The emulator's part (not Kafka's): a topic deleted and created again under the
same name is a new *incarnation* (its offsets restart at 0). Kafka 0.8 has no
topic id (ids came with 2.8, KIP-516; the ZooKeeper-mode cluster the emulator
runs for every protocol keeps the 0.8 layout), so the emulator numbers them:
``/emulator/topics/<t>`` holds ``{"incarnation": n, "czxid": z, "reason": r}``,
where ``z`` is the ``czxid`` of the ``/brokers/topics/<t>`` znode that
incarnation ``n`` belongs to. The controller assigns numbers
(:func:`assign_incarnation`: the same ``czxid`` gives the same number, a new
one the next number, so two controllers, or one after a failover, agree);
whoever creates a topic first leaves the reason (:func:`note_creation`:
``timeline`` for a ``create_topic`` action, ``auto`` for auto-creation), which
the controller reports in its ``topic_created`` event. The record outlives the
topic, so the count goes on across deletions; no Kafka client or broker reads
``/emulator``.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError

from zk_registry.client import ZkClient, ZkOpCounter, ZkUtils
from zk_registry.layout import PayloadError, delete_topic_path, topic_path

__all__ = [
    "EMULATOR_TOPICS_PATH",
    "TopicRecord",
    "assign_incarnation",
    "decode_topic_record",
    "delete_recursive",
    "encode_topic_record",
    "note_creation",
    "read_topic_record",
    "request_topic_deletion",
    "topic_czxid",
    "topic_record_path",
]

log = logging.getLogger(__name__)

#: The emulator's own records, one per topic name (not a Kafka path).
EMULATOR_TOPICS_PATH: Final = "/emulator/topics"

#: Bound on the read-modify-write rounds of one record update (conflicts are
#: rare: a creator and the controller, or two auto-creating brokers).
RECORD_UPDATE_ROUNDS: Final = 50


@dataclass(frozen=True)
class TopicRecord:
    """The emulator's record of a topic name.

    Attributes:
        incarnation: the latest incarnation assigned (0: none yet).
        czxid: the ``czxid`` of the ``/brokers/topics/<t>`` znode it belongs to (0: none).
        reason: why the latest creation was made (``timeline`` | ``auto``), as
            its creator noted it; ``None`` when nobody did (the run's own topics).
    """

    incarnation: int = 0
    czxid: int = 0
    reason: str | None = None


def topic_record_path(topic: str) -> str:
    """``/emulator/topics/<topic>`` (the topic name checked as a path element)."""
    return f"{EMULATOR_TOPICS_PATH}/{topic_path(topic).rsplit('/', 1)[1]}"


def encode_topic_record(record: TopicRecord) -> bytes:
    """The record as compact JSON."""
    obj: dict[str, object] = {"incarnation": record.incarnation, "czxid": record.czxid}
    if record.reason is not None:
        obj["reason"] = record.reason
    return json.dumps(obj, separators=(",", ":")).encode()


def decode_topic_record(data: bytes | None) -> TopicRecord:
    """A stored record (empty data: an empty record).

    Raises:
        PayloadError: not a record.
    """
    if not data:
        return TopicRecord()
    try:
        obj = json.loads(data)
    except ValueError as exc:
        raise PayloadError(f"topic record: not JSON: {data!r}") from exc
    if not isinstance(obj, dict):
        raise PayloadError(f"topic record: not an object: {data!r}")
    inc, czxid, reason = obj.get("incarnation", 0), obj.get("czxid", 0), obj.get("reason")
    if not isinstance(inc, int) or not isinstance(czxid, int):
        raise PayloadError(f"topic record: bad numbers: {data!r}")
    if reason is not None and not isinstance(reason, str):
        raise PayloadError(f"topic record: bad reason: {data!r}")
    return TopicRecord(inc, czxid, reason)


async def read_topic_record(
    zk: ZkClient, topic: str, tally: ZkOpCounter | None = None
) -> TopicRecord | None:
    """The record of ``topic``, or ``None`` if the name never had one."""
    data = await ZkUtils(zk).read_maybe(topic_record_path(topic), tally)
    return None if data is None else decode_topic_record(data)


async def _update_record(
    zk: ZkClient,
    topic: str,
    change: Callable[[TopicRecord | None], TopicRecord],
    tally: ZkOpCounter | None,
) -> TopicRecord:
    """Read, change, write conditionally on the version; a new record is created."""
    utils = ZkUtils(zk)
    path = topic_record_path(topic)
    for _ in range(RECORD_UPDATE_ROUNDS):
        try:
            data, stat = await utils.read(path, tally)
        except NoNodeError:
            new = change(None)
            try:
                await utils.create_persistent_path(path, encode_topic_record(new), tally)
            except NodeExistsError:
                continue
            return new
        old = decode_topic_record(data)
        new = change(old)
        if new == old:
            return old
        try:
            await zk.retry_until_connected(
                functools.partial(zk.set_async, path, encode_topic_record(new), stat.version, tally)
            )
        except (BadVersionError, NoNodeError):
            continue
        return new
    raise RuntimeError(f"the record of topic {topic} kept changing under its update")


def _note_reason(reason: str, old: TopicRecord | None) -> TopicRecord:
    old = old or TopicRecord()
    return TopicRecord(old.incarnation, old.czxid, reason)


def _assign(czxid: int, old: TopicRecord | None) -> TopicRecord:
    old = old or TopicRecord()
    if old.czxid == czxid:
        return old
    return TopicRecord(old.incarnation + 1, czxid, old.reason)


async def note_creation(
    zk: ZkClient, topic: str, reason: str, tally: ZkOpCounter | None = None
) -> None:
    """A creator is about to create ``topic``: leave ``reason`` for the controller's event."""
    await _update_record(zk, topic, functools.partial(_note_reason, reason), tally)


async def assign_incarnation(
    zk: ZkClient, topic: str, czxid: int, tally: ZkOpCounter | None = None
) -> tuple[TopicRecord, bool]:
    """The incarnation of the ``/brokers/topics/<t>`` znode created at ``czxid``.

    Returns:
        ``(record, new)``: the record after the call, and whether this call
        assigned its number (``False``: an earlier call did, for this ``czxid``).
    """
    before = await read_topic_record(zk, topic, tally)
    if before is not None and before.czxid == czxid:
        return before, False
    after = await _update_record(zk, topic, functools.partial(_assign, czxid), tally)
    return after, before is None or before.czxid != after.czxid


async def topic_czxid(zk: ZkClient, topic: str, tally: ZkOpCounter | None = None) -> int | None:
    """The ``czxid`` of ``/brokers/topics/<topic>``, or ``None`` if the topic does not exist."""
    try:
        _, stat = await ZkUtils(zk).read(topic_path(topic), tally)
    except NoNodeError:
        return None
    return int(stat.czxid)


async def request_topic_deletion(
    zk: ZkClient, topic: str, tally: ZkOpCounter | None = None
) -> bool:
    """``AdminUtils.deleteTopic``: ``createPersistentPath(/admin/delete_topics/<t>)``.

    Returns:
        ``True`` if the marker was written, ``False`` if it was already there
        ("Topic <t> is already marked for deletion").
    """
    try:
        await ZkUtils(zk).create_persistent_path(delete_topic_path(topic), b"", tally)
    except NodeExistsError:
        log.info("Topic %s is already marked for deletion.", topic)
        return False
    log.info("Topic %s is marked for deletion.", topic)
    return True


async def delete_recursive(zk: ZkClient, path: str, tally: ZkOpCounter | None = None) -> bool:
    """ZkClient ``deleteRecursive``: the children first, then the node; ``False`` if it was gone.

    A child created meanwhile (NotEmpty) makes it go round again, at most
    ``RECORD_UPDATE_ROUNDS`` times. An emulator choice: zkclient 0.3's
    ``deleteRecursive`` lets NotEmpty out as a ``ZkException``, which in
    K@0.8.2.2 ``TopicDeletionManager.completeDeleteTopic`` would end the
    ``DeleteTopicsThread`` (``ShutdownableThread.run`` logs "Error due to" and
    stops). Only a write racing the deletion (an old controller's state
    update) gets there; conformance script 32 shows the race on a real
    ZooKeeper.
    """
    utils = ZkUtils(zk)
    for _ in range(RECORD_UPDATE_ROUNDS):
        for child in sorted(await utils.children_maybe(path, tally)):
            await delete_recursive(zk, f"{path}/{child}", tally)
        try:
            return await utils.delete_path(path, tally)
        except NotEmptyError:
            continue
    raise RuntimeError(f"{path} kept getting children while it was deleted")
