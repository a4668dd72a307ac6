"""Broker actors: registered in ZooKeeper, holding partition logs.

A broker keeps, for each partition it leads, the log's end offset; messages
are emulated as offset ranges, so a log needs no payload. Produce and fetch
take whole batches (one Ray call per producer or consumer host per tick).
Leadership is read from the partition state znodes the controller writes
(kafka-protocols.md A8); leader moves come with the fault issue.
"""

from __future__ import annotations

from typing import Any

import ray

from actors.context import RunContext
from emulator.events import EventKind

TopicPartition = tuple[str, int]


class BrokerCore:
    """One broker, without Ray: unit-testable on its own.

    Args:
        broker_id: Kafka's ``broker.id``.
        ctx: the run.
        partitions: the partitions this broker leads.
        port: the advertised port written to ``/brokers/ids/<id>``.
    """

    def __init__(
        self,
        broker_id: int,
        ctx: RunContext,
        partitions: list[TopicPartition],
        port: int,
        offsets_leaders: dict[int, int] | None = None,
        partitions_per_topic: dict[str, int] | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.ctx = ctx
        self.port = port
        self.log_end: dict[TopicPartition, int] = {tp: 0 for tp in partitions}
        self.log_start: dict[TopicPartition, int] = {tp: 0 for tp in partitions}
        self.clock = ctx.clock()
        self.events = ctx.writer(f"broker-{broker_id}", self.clock)
        self._zk: Any = None
        self.fetch_calls = 0
        self.produce_calls = 0
        self.coordinators: Any = None
        self._timer: Any = None
        if offsets_leaders and ctx.protocol != "zookeeper":
            from actors.coordinator_host import CoordinatorHost
            from actors.protocols import make_coordinator_factory

            factory = make_coordinator_factory(
                ctx.protocol, dict(ctx.kafka), broker_id, ctx.seed, partitions_per_topic or {}
            )
            self.coordinators = CoordinatorHost(
                broker_id, offsets_leaders, factory, self._emit_group
            )

    def _emit_group(self, kind: EventKind, **fields: Any) -> None:
        fields.setdefault("group", self.ctx.group)
        self.events.emit(kind, **fields)

    async def group_exchange(self, host_key: str, requests: list[Any]) -> list[Any]:
        """A consumer host's batch of group requests; the answers ready for that host."""
        if self.coordinators is None:
            from actors.coordinator_host import error_response
            from emulator.modern.errors import Errors

            return [error_response(r, Errors.COORDINATOR_NOT_AVAILABLE) for r in requests]
        return self.coordinators.exchange(self.clock.now_ms(), host_key, requests)

    async def _coordinator_timers(self) -> None:
        import asyncio

        while True:
            if self.coordinators is not None:
                self.coordinators.poll(self.clock.now_ms())
            await asyncio.sleep(0.01)

    async def start(self) -> int:
        """Register ``/brokers/ids/<id>`` (ephemeral) and return the broker id."""
        import time

        from zk_registry.brokers import register_broker
        from zk_registry.client import ZkClient

        session_s = self.ctx.scaled_s(
            float(str(self.ctx.kafka.get("zookeeper.session.timeout.ms", 6000)))
        )
        self._zk = ZkClient(self.ctx.zk_connect, session_s)
        await self._zk.start_async()
        await register_broker(
            self._zk,
            self.broker_id,
            "127.0.0.1",
            self.port,
            timestamp_ms=int(time.time() * 1000),
            session_timeout_s=session_s,
        )
        self.events.emit(EventKind.BROKER_STARTED, broker=self.broker_id, count=len(self.log_end))
        if self.coordinators is not None:
            import asyncio

            self._timer = asyncio.ensure_future(self._coordinator_timers())
        self.events.flush()
        return self.broker_id

    def produce(self, batch: dict[TopicPartition, int]) -> dict[TopicPartition, tuple[int, int]]:
        """Append ``count`` messages to each partition; return each ``[start, end)``.

        Partitions this broker does not lead are answered with ``(-1, -1)``
        (NotLeaderForPartition).
        """
        self.produce_calls += 1
        out: dict[TopicPartition, tuple[int, int]] = {}
        for tp, n in batch.items():
            end = self.log_end.get(tp)
            if end is None or n <= 0:
                out[tp] = (-1, -1)
                continue
            self.log_end[tp] = end + n
            out[tp] = (end, end + n)
        return out

    def fetch(
        self, requests: list[tuple[str, int, int | None, str, int]]
    ) -> list[tuple[str, int, int, int]]:
        """Serve a batch of fetches: ``(topic, partition, offset, reset, max)``.

        ``offset`` ``None`` (or out of range) is resolved by ``reset``
        (``smallest`` or ``largest``, Kafka 0.8's ``auto.offset.reset``).
        Returns ``(topic, partition, start, end)`` per request; ``start == -1``
        means "not leader".
        """
        self.fetch_calls += 1
        out: list[tuple[str, int, int, int]] = []
        for topic, partition, offset, reset, max_n in requests:
            tp = (topic, partition)
            end = self.log_end.get(tp)
            if end is None:
                out.append((topic, partition, -1, -1))
                continue
            start = self.log_start[tp]
            if offset is None or offset < start or offset > end:
                offset = start if reset == "smallest" else end
            out.append((topic, partition, offset, min(end, offset + max_n)))
        return out

    def log_end_offsets(self) -> dict[TopicPartition, int]:
        """Each led partition's log end offset."""
        return dict(self.log_end)

    def stats(self) -> dict[str, Any]:
        """Counters for the live display."""
        return {
            "fetch_calls": self.fetch_calls,
            "produce_calls": self.produce_calls,
            "messages": sum(self.log_end.values()),
            "coordinator": None if self.coordinators is None else self.coordinators.stats(),
        }

    async def stop(self) -> None:
        """Close the ZooKeeper session and the event log."""
        if self.events.closed:
            return
        if self._timer is not None:
            self._timer.cancel()
        self.events.emit(EventKind.BROKER_STOPPED, broker=self.broker_id)
        if self._zk is not None:
            await self._zk.stop_async()
            self._zk = None
        self.events.close()

    def set_origin(self, origin_wall: float) -> None:
        """Fix the run's emulated time 0 (called once every actor is up)."""
        self.clock.rebase(origin_wall)


BrokerActor = ray.remote(num_cpus=0)(BrokerCore)
