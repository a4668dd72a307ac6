"""Where the emulator keeps share-partition state across leaders: one znode per share-partition.

Kafka's share coordinator (KIP-932) persists each share-partition's state (its
start offset and the state and delivery count of the records in flight) in
the ``__share_group_state`` topic; the partition's leader writes it with
``WriteShareGroupState`` after every acknowledgement, release and lock expiry,
and a new leader reads it back (``ReadShareGroupState``) before it serves the
partition. *Emulator choice*: the state lives in a ZooKeeper znode of the
run's chroot, ``/emulator/share/<group>/<topic>/<partition>``, written by the
leader after the changes of each instant (the latest state, one write at a time
per partition) and read by a new leader before its first fetch. What a report
shows depends on what survives a leader change (the last written state, as in
Kafka) and not on how it is stored.

The data is JSON: ``{"start": <SPSO>, "records": [[offset, state id, delivery
count], ...]}`` (``RecordState`` ids).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from emulator.broker.share_partition import PersistedState, RecordState
from zk_registry.client import ZkUtils

__all__ = [
    "SHARE_STATE_ROOT",
    "decode_share_state",
    "encode_share_state",
    "read_share_states",
    "share_state_path",
    "write_share_state",
]

SHARE_STATE_ROOT = "/emulator/share"
"""The emulator's share-partition states (not a Kafka path)."""


def share_state_path(group: str, topic: str, partition: int) -> str:
    """The znode of one share-partition's state."""
    return f"{SHARE_STATE_ROOT}/{group}/{topic}/{partition}"


def encode_share_state(state: PersistedState) -> bytes:
    """The znode data of a state."""
    records = [[o, int(st), n] for o, (st, n) in sorted(state.records.items())]
    return json.dumps({"start": state.start_offset, "records": records}).encode()


def decode_share_state(data: bytes) -> PersistedState:
    """A state from its znode data.

    Raises:
        ValueError: not the JSON :func:`encode_share_state` writes.
    """
    doc = json.loads(data.decode())
    if not isinstance(doc, dict) or not isinstance(doc.get("start"), int):
        raise ValueError("a share state needs an integer 'start'")
    records: dict[int, tuple[RecordState, int]] = {}
    for item in doc.get("records", []):
        offset, state, count = item
        records[int(offset)] = (RecordState(int(state)), int(count))
    return PersistedState(int(doc["start"]), records)


async def write_share_state(
    zk: ZkUtils, group: str, topic: str, partition: int, state: PersistedState
) -> None:
    """Write one share-partition's state (created with its parents the first time)."""
    await zk.update_persistent_path(
        share_state_path(group, topic, partition), encode_share_state(state)
    )


async def read_share_states(
    zk: ZkUtils, topic: str, partition: int
) -> Mapping[str, PersistedState]:
    """Every share group's written state of ``topic``/``partition``, by group."""
    out: dict[str, PersistedState] = {}
    for group in sorted(await zk.children_maybe(SHARE_STATE_ROOT)):
        data = await zk.read_maybe(share_state_path(group, topic, partition))
        if data is not None:
            out[group] = decode_share_state(data)
    return out
