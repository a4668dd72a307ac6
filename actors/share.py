"""A broker's share-partitions (KIP-932): ShareFetch served, locks timed, state persisted.

The broker shell's part of share groups around the sans-I/O core
(:class:`emulator.broker.share_fetch.ShareFetchBroker`, Kafka's
``SharePartitionManager`` with ``DelayedShareFetch``):

* **ShareFetch / ShareAcknowledge** (:meth:`ShareService.fetch`): applied at
  once; a fetch that acquired nothing waits (its MaxWaitMs) until records
  arrive, come back (a release, a lock expiry) or the wait runs out.
* **Timers**: one task sleeps until the earliest lock expiry or waiting fetch's
  end, or until something may let a waiting fetch acquire (an append, an
  acknowledgement, a leader change): Kafka's acquisition-lock timer task and
  the delayed share fetch's purgatory.
* **Events**: every record transition is logged as ``share_records``, in runs of
  contiguous offsets with the same member, state, cause and delivery count;
  an acquisition of a record delivered before names, in ``detail``, what made
  it available again (a release, a lock expiry, a session close, a failover).
* **Persistence across leaders** (:mod:`zk_registry.share_state`, an emulator
  choice for the share coordinator's ``__share_group_state``): the state of each
  share-partition that changed is written after the instant's changes; a broker
  that becomes a partition's leader reads the states back before it serves a
  fetch for it (one waiting on it waits for the read); one that stops leading
  drops its share-partitions.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable
from typing import Any

from actors.long_poll import long_poll
from emulator.broker.share_fetch import ShareFetchBroker, ShareFetchRequest, ShareFetchResponse
from emulator.broker.share_partition import (
    DELIVERY_LIMIT,
    RecordState,
    SharePartitionConfig,
    Transition,
)
from emulator.events import EventKind
from emulator.modern.errors import Errors

__all__ = ["ShareService", "share_record_events"]

TopicPartition = tuple[str, int]
MIN_TIMER_S = 1e-6

_STATE_NAMES = {
    RecordState.AVAILABLE: "available",
    RecordState.ACQUIRED: "acquired",
    RecordState.ACKNOWLEDGED: "acknowledged",
    RecordState.ARCHIVED: "archived",
}


def share_record_events(
    transitions: Iterable[tuple[str, TopicPartition, Transition]],
) -> list[dict[str, object]]:
    """``share_records`` event fields for transitions: runs of contiguous offsets alike.

    A run: one group and partition, consecutive offsets, the same member, new
    state, reason, delivery count and redelivery cause.
    """
    out: list[dict[str, object]] = []
    last_key: tuple[object, ...] | None = None
    for group, tp, t in transitions:
        reason = t.archived_by if t.archived_by == DELIVERY_LIMIT else t.cause
        state = _STATE_NAMES[t.new]
        key = (group, tp, t.member, state, reason, t.delivery_count, t.redelivery_of)
        if last_key == key and out and out[-1]["offset_end"] == t.offset:
            out[-1]["offset_end"] = t.offset + 1
            continue
        last_key = key
        fields: dict[str, object] = {
            "group": group,
            "topic": tp[0],
            "partition": tp[1],
            "offset_start": t.offset,
            "offset_end": t.offset + 1,
            "member_id": t.member,
            "state": state,
            "reason": reason,
            "count": t.delivery_count,
        }
        if t.redelivery_of is not None:
            fields["detail"] = t.redelivery_of
        out.append(fields)
    return out


class ShareService:
    """The share-partitions this broker leads, and their requests.

    Args:
        broker_id: the broker.
        config: the share-partitions' settings (:meth:`SharePartitionConfig.for_version`).
        auto_offset_reset: ``share.auto.offset.reset``.
        high_watermark: a partition's high watermark on this broker (its leader).
        log_start: a partition's log start offset.
        leads: whether this broker leads a partition now.
        now_ms: the emulated clock.
        wall_seconds: an emulated duration in wall seconds (the timers' sleeps).
        emit: writes an event.
        zk: the broker's ZooKeeper utilities (the states' store), or ``None``
            while it has none.
    """

    def __init__(
        self,
        broker_id: int,
        config: SharePartitionConfig,
        auto_offset_reset: str,
        high_watermark: Callable[[TopicPartition], int],
        log_start: Callable[[TopicPartition], int],
        leads: Callable[[TopicPartition], bool],
        now_ms: Callable[[], float],
        wall_seconds: Callable[[float], float],
        emit: Callable[..., None],
        zk: Callable[[], Any],
    ) -> None:
        self.broker_id = broker_id
        self.core = ShareFetchBroker(config, high_watermark, log_start, auto_offset_reset)
        self._leads = leads
        self._now = now_ms
        self._wall = wall_seconds
        self._emit = emit
        self._zk = zk
        self._waiting: dict[tuple[str, str, int], asyncio.Future[ShareFetchResponse]] = {}
        self._loading: dict[TopicPartition, asyncio.Event] = {}
        self._dirty: set[tuple[str, TopicPartition]] = set()
        self._wake: asyncio.Event | None = None
        self._writes: asyncio.Event | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.fetches = 0

    def start(self) -> None:
        """Start the timer and the state writer."""
        self._wake = asyncio.Event()
        self._writes = asyncio.Event()
        self._tasks = [
            asyncio.ensure_future(self._timers()),
            asyncio.ensure_future(self._writer()),
        ]

    async def stop(self) -> None:
        """Answer what waits (empty), stop the tasks, write what is left (bounded)."""
        for fut in self._waiting.values():
            if not fut.done():
                fut.set_result(ShareFetchResponse(0, "", Errors.NONE))
        self._waiting.clear()
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(BaseException):
                await t
        self._tasks = []
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._write_dirty(), 5.0)

    # ----------------------------------------------------------------- requests

    async def fetch(self, request: ShareFetchRequest) -> ShareFetchResponse:
        """A ShareFetch (or, without partitions, a ShareAcknowledge): its answer.

        A partition this broker does not lead fails the request with
        NOT_LEADER_OR_FOLLOWER (Kafka answers it per partition; the emulated
        client starts a new session and asks its leaders again either way).
        """
        self.fetches += 1
        tps = set(request.partitions) | set(request.acks)
        if any(not self._leads(tp) for tp in tps):
            return ShareFetchResponse(request.corr, request.member, Errors.NOT_LEADER_OR_FOLLOWER)
        for tp in sorted(tps):  # a new leader reads the state back first
            loading = self._loading.get(tp)
            if loading is not None:
                await loading.wait()
        got = self.core.fetch(self._now(), request)
        self._changed()
        if got is not None:
            return got
        fut: asyncio.Future[ShareFetchResponse] = asyncio.get_running_loop().create_future()
        self._waiting[(request.group, request.member, request.corr)] = fut
        if self._wake is not None:
            self._wake.set()  # the timers see its MaxWaitMs deadline (nothing else may wake them)
        return await fut

    def disconnect(self, group: str, member_id: str) -> None:
        """The member's connection dropped: its share session closes (records released)."""
        self.core.close_member(self._now(), group, member_id)
        self._changed()

    def notify(self) -> None:
        """Records may have arrived (an append moved a high watermark): wake the timers."""
        if self._wake is not None:
            self._wake.set()

    # ------------------------------------------------------------- leadership

    def led(self, tps: Iterable[TopicPartition]) -> None:
        """This broker now leads ``tps``: read their persisted states before serving them."""
        for tp in tps:
            if tp not in self._loading:
                self._loading[tp] = asyncio.Event()
                self._tasks.append(asyncio.ensure_future(self._load(tp)))

    def followed(self, tps: Iterable[TopicPartition]) -> None:
        """This broker no longer leads ``tps``: their share-partitions go (written first)."""
        for tp in tps:
            self.core.drop(tp)
        self.notify()

    async def _load(self, tp: TopicPartition) -> None:
        from zk_registry.client import ZkUtils
        from zk_registry.share_state import read_share_states

        event = self._loading[tp]
        try:
            zk = self._zk()
            if zk is not None:
                for group, state in (await read_share_states(ZkUtils(zk), tp[0], tp[1])).items():
                    self.core.load(group, tp, state)
        except Exception as exc:  # unreadable: the partition starts from its reset policy
            self._state_error("ReadShareGroupState", tp, exc)
        finally:
            event.set()
            self._loading.pop(tp, None)

    def _state_error(self, request: str, tp: TopicPartition, exc: Exception) -> None:
        """A share-partition state the share coordinator's store could not read or write."""
        self._emit(
            EventKind.REQUEST_ERROR,
            reason="COORDINATOR_NOT_AVAILABLE",
            topic=tp[0],
            partition=tp[1],
            broker=self.broker_id,
            detail=f"{request}: {type(exc).__name__}",
        )

    # ----------------------------------------------------------------- timers

    async def _timers(self) -> None:
        wake = self._wake
        assert wake is not None
        while True:
            wake.clear()
            now = self._now()
            for resp in self.core.poll(now):
                fut = self._waiting.pop(_key(resp, self._waiting), None)
                if fut is not None and not fut.done():
                    fut.set_result(resp)
            self._changed()
            deadline = self.core.next_deadline()
            if deadline is None:
                await wake.wait()
                continue
            await long_poll(wake, max(MIN_TIMER_S, self._wall(deadline - self._now())))

    def _changed(self) -> None:
        """Log the transitions since the last look; their share-partitions are to be written."""
        transitions = self.core.drain_transitions()
        if not transitions:
            return
        for fields in share_record_events(transitions):
            self._emit(EventKind.SHARE_RECORDS, broker=self.broker_id, **fields)
        self._dirty.update((g, tp) for g, tp, _t in transitions)
        if self._writes is not None:
            self._writes.set()
        if self._wake is not None:
            self._wake.set()  # records may have come back for a waiting fetch

    async def _writer(self) -> None:
        writes = self._writes
        assert writes is not None
        while True:
            await writes.wait()
            writes.clear()
            await self._write_dirty()

    async def _write_dirty(self) -> None:
        from zk_registry.client import ZkUtils
        from zk_registry.share_state import write_share_state

        zk = self._zk()
        if zk is None:
            return
        while self._dirty:
            group, tp = min(self._dirty)
            self._dirty.discard((group, tp))
            sp = self.core.partitions.get((group, tp))
            if sp is None:
                continue
            try:
                await write_share_state(ZkUtils(zk), group, tp[0], tp[1], sp.persisted())
            except Exception as exc:
                self._state_error("WriteShareGroupState", tp, exc)


def _key(
    resp: ShareFetchResponse,
    waiting: dict[tuple[str, str, int], asyncio.Future[ShareFetchResponse]],
) -> tuple[str, str, int]:
    for key in waiting:
        if key[1] == resp.member and key[2] == resp.corr:
            return key
    return ("", resp.member, resp.corr)
