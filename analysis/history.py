"""A shorthand for hand-built event histories, as Jepsen's Kafka tests write them.

Checker and metric tests describe a run in a few chained calls instead of
hundreds of event dicts::

    h = (
        H(protocol="classic-eager")
        .produce("t", 0, 0, 100, at=0)
        .start("c-0", at=0)
        .assign("c-0", ["t:0"], at=10)
        .process("c-0", "t", 0, 0, 50, start=10, end=20)
        .commit("c-0", "t", 0, 50, at=21)
        .revoke("c-0", ["t:0"], at=30)
        .crash("c-1", at=40)
    )
    h.events()  # every event valid under emulator.events.validate_event
    h.df(spark)  # a DataFrame with analysis.schema.spark_schema()

Each call writes the events the real emitter writes for that step of the given
protocol: a legacy (``zookeeper``) assignment is one ``ownership_claimed`` per
partition, a modern one is ``partitions_assigned`` followed by one
``ownership_claimed`` per partition, exactly as the members do.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from emulator.events import SCHEMA_VERSION, Event, EventKind, validate_event
from emulator.protocols import LEGACY_PROTOCOL, RUN_PROTOCOLS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

LEGACY = LEGACY_PROTOCOL
PROTOCOLS = RUN_PROTOCOLS


def _parts(partitions: Iterable[str]) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for p in partitions:
        topic, _, num = p.rpartition(":")
        out.append((topic, int(num)))
    return sorted(out)


def _fmt(parts: Sequence[tuple[str, int]]) -> str:
    return ",".join(f"{t}:{p}" for t, p in parts)


class H:
    """A hand-built history of one protocol's run (one group).

    Args:
        protocol: ``zookeeper``, ``classic-eager``, ``classic-cooperative`` or ``consumer``.
        group: the consumer group id.
        run_id: the run id stamped on every event.
    """

    def __init__(
        self, protocol: str = "classic-eager", group: str = "g", run_id: str = "h"
    ) -> None:
        if protocol not in PROTOCOLS:
            raise ValueError(f"unknown protocol {protocol!r}")
        self.protocol = protocol
        self.group = group
        self.run_id = run_id
        self._events: list[Event] = []
        self._seq: dict[str, int] = {}
        self._nodes: dict[str, str] = {}

    @property
    def legacy(self) -> bool:
        """Whether this is the ZooKeeper-coordinated (0.8) consumer."""
        return self.protocol == LEGACY

    # ------------------------------------------------------------- plumbing

    def on(self, member: str, node: str) -> H:
        """Place ``member`` on ``node``: its events carry that node and actor ``host-<node>``.

        Times given for its events are read on that node's clock, so a test of
        clock skew writes them as the skewed clock shows them. Members not
        placed are on ``node-0`` (actor ``host-0``).
        """
        self._nodes[member] = node
        return self

    def event(
        self,
        kind: EventKind | str,
        at: float,
        actor: str = "host-0",
        node: str = "node-0",
        **fields: Any,
    ) -> H:
        """Append one event of ``kind`` at emulated time ``at`` (any extra fields)."""
        seq = self._seq.get(actor, 0)
        self._seq[actor] = seq + 1
        ev: Event = {
            "v": SCHEMA_VERSION,
            "seq": seq,
            "kind": str(EventKind(kind).value),
            "t_emu_ms": float(at),
            "ts_wall": 1_700_000_000.0 + float(at) / 1000.0,
            "ts_mono": float(at) / 1000.0,
            "run_id": self.run_id,
            "protocol": self.protocol,
            "node": node,
            "actor": actor,
        }
        ev.update({k: v for k, v in fields.items() if v is not None})
        validate_event(ev)
        self._events.append(ev)
        return self

    def _m(self, kind: EventKind, member: str, at: float, **fields: Any) -> H:
        fields.setdefault("member_id", f"{member}-id")
        node = self._nodes.get(member)
        actor = "host-0" if node is None else f"host-{node}"
        return self.event(
            kind, at, actor, node or "node-0", group=self.group, member=member, **fields
        )

    def events(self) -> list[Event]:
        """Every event so far, in the order written."""
        return [dict(e) for e in self._events]

    def df(self, spark: SparkSession) -> DataFrame:
        """The history as a DataFrame with :func:`analysis.schema.spark_schema`."""
        return frame(spark, [self])

    def rows(self, protocol: str | None = None) -> list[tuple[Any, ...]]:
        """The events as rows in :func:`analysis.schema.column_names` order.

        ``protocol``: the series to stamp instead of the history's protocol (an
        experiment's trials are ``<protocol>@<name>`` series).
        """
        from analysis.schema import column_names

        cols = column_names()
        out = [tuple(e.get(c) for c in cols) for e in self._events]
        if protocol is not None:
            at = cols.index("protocol")
            out = [(*r[:at], protocol, *r[at + 1 :]) for r in out]
        return out

    # --------------------------------------------------------------- the run

    def run(
        self,
        start: float,
        end: float,
        *,
        commit_mode: str | None = None,
        allows_loss: bool | None = None,
        guarantee: str | None = None,
    ) -> H:
        """``run_started`` at ``start`` and ``run_finished`` at ``end`` (the orchestrator).

        ``commit_mode``, ``allows_loss`` and ``guarantee`` go into ``run_started``'s
        detail as the orchestrator writes them (:mod:`emulator.delivery`).
        """
        info = {
            k: v
            for k, v in (
                ("commit_mode", commit_mode),
                ("allows_loss", allows_loss),
                ("guarantee", guarantee),
            )
            if v is not None
        }
        detail = json.dumps(info) if info else None
        self.event(EventKind.RUN_STARTED, start, "orchestrator", detail=detail)
        return self.event(EventKind.RUN_FINISHED, end, "orchestrator")

    def produce(self, topic: str, partition: int, start: int, end: int, at: float) -> H:
        """The producer appended offsets ``[start, end)`` to ``topic:partition``."""
        return self.event(
            EventKind.PRODUCED,
            at,
            "producer-0",
            topic=topic,
            partition=partition,
            offset_start=start,
            offset_end=end,
            broker=0,
        )

    def action(
        self,
        kind: str,
        at: float,
        members: Sequence[str] = (),
        index: int = 0,
        duration_s: float | None = None,
        skipped: bool = False,
    ) -> H:
        """The orchestrator's ``action_applied`` for timeline entry ``index``, as it writes it.

        ``skipped``: the action had no meaning for the protocol (``state = skipped``).
        """
        params: dict[str, Any] = {"at_s": at / 1000.0, "event_index": index}
        if members:
            params["members"] = list(members)
        if duration_s is not None:
            params["duration_s"] = duration_s
        return self.event(
            EventKind.ACTION_APPLIED,
            at,
            "orchestrator",
            reason=kind,
            member=members[0] if len(members) == 1 else None,
            state="skipped" if skipped else None,
            detail=json.dumps(params, sort_keys=True),
            group=self.group,
        )

    def topic_action(
        self,
        kind: str,
        topic: str,
        at: float,
        index: int = 0,
        partitions: int | None = None,
        replication_factor: int | None = None,
    ) -> H:
        """A ``create_topic`` / ``delete_topic`` timeline action, as the orchestrator writes it.

        The orchestrator carries these out itself, so it records them as
        ``fault_injected`` (``actors.timeline.apply``), its ``detail`` the
        action's parameters with the topic.
        """
        params: dict[str, Any] = {"at_s": at / 1000.0, "event_index": index, "topic": topic}
        if partitions is not None:
            params["partitions"] = partitions
        if replication_factor is not None:
            params["replication_factor"] = replication_factor
        return self.event(
            EventKind.FAULT_INJECTED,
            at,
            "orchestrator",
            reason=kind,
            detail=json.dumps(params, sort_keys=True),
            group=self.group,
        )

    def topic_created(
        self,
        topic: str,
        at: float,
        incarnation: int = 1,
        partitions: int = 1,
        reason: str = "timeline",
    ) -> H:
        """The controller's ``topic_created`` of ``topic``'s ``incarnation``."""
        return self.event(
            EventKind.TOPIC_CREATED,
            at,
            "broker-0",
            topic=topic,
            count=partitions,
            replication_factor=1,
            incarnation=incarnation,
            reason=reason,
            broker=0,
        )

    def topic_deleted(self, topic: str, at: float, incarnation: int = 1) -> H:
        """The controller's ``topic_deleted`` (``completeDeleteTopic``) of ``incarnation``."""
        return self.event(
            EventKind.TOPIC_DELETED, at, "broker-0", topic=topic, incarnation=incarnation, broker=0
        )

    def fault(self, kind: str, member: str | None, at: float, until: float | None = None) -> H:
        """``fault_injected`` (and ``fault_cleared`` at ``until``) for ``member``."""
        dur = None if until is None else float(until - at)
        self.event(
            EventKind.FAULT_INJECTED,
            at,
            "host-0",
            group=self.group,
            reason=kind,
            member=member,
            duration_ms=dur,
            detail="{}",
        )
        if until is not None:
            self.event(
                EventKind.FAULT_CLEARED,
                until,
                "host-0",
                group=self.group,
                reason=kind,
                member=member,
                duration_ms=dur,
                detail="{}",
            )
        return self

    # ------------------------------------------------------------ lifecycle

    def start(self, member: str, at: float) -> H:
        """``consumer_started``."""
        return self._m(EventKind.CONSUMER_STARTED, member, at)

    def stop(self, member: str, at: float) -> H:
        """``consumer_stopped`` (graceful)."""
        return self._m(EventKind.CONSUMER_STOPPED, member, at)

    def crash(self, member: str, at: float) -> H:
        """``consumer_crashed`` (killed without goodbye)."""
        return self._m(EventKind.CONSUMER_CRASHED, member, at)

    def expire(self, member: str, at: float) -> H:
        """``zk_session_expired``: a legacy consumer's new session replaced an expired one."""
        return self._m(EventKind.ZK_SESSION_EXPIRED, member, at)

    def watch(self, member: str, at: float, reason: str = "ids") -> H:
        """``watch_fired`` (one notification)."""
        return self._m(EventKind.WATCH_FIRED, member, at, reason=reason, zk_watches=1)

    # ------------------------------------------------------------ rebalances

    def trigger(self, member: str, at: float, reason: str = "ids_changed") -> H:
        """``rebalance_triggered`` on the member's side."""
        return self._m(EventKind.REBALANCE_TRIGGERED, member, at, reason=reason)

    def rebalance(
        self,
        member: str,
        at: float,
        end: float,
        partitions: Iterable[str] = (),
        *,
        failed: bool = False,
        attempts: int = 1,
        zk_reads: int = 0,
        zk_writes: int = 0,
    ) -> H:
        """One member-side rebalance from ``at`` to ``end`` that ends owning ``partitions``.

        Legacy: ``rebalance_started``, ``attempts`` attempts (``attempt_started`` /
        ``attempt_finished`` with the ZooKeeper operation counts split over them,
        a ``rebalance_backoff`` after each failed one), then ``rebalance_completed``
        or, with ``failed``, ``rebalance_failed``. Modern: ``rebalance_started``
        then ``rebalance_completed`` (``failed`` is not used). Ownership events are
        separate (:meth:`assign`, :meth:`revoke`).
        """
        parts = _parts(partitions)
        self._m(EventKind.REBALANCE_STARTED, member, at, reason="test")
        if self.legacy:
            step = (end - at) / max(1, attempts)
            for i in range(attempts):
                t0 = at + i * step
                ok = (i == attempts - 1) and not failed
                self._m(EventKind.ATTEMPT_STARTED, member, t0, attempt=i)
                self._m(
                    EventKind.ATTEMPT_FINISHED,
                    member,
                    t0 + step / 2,
                    attempt=i,
                    reason="ok" if ok else "conflict",
                    zk_reads=zk_reads // attempts,
                    zk_writes=zk_writes // attempts,
                )
                if not ok:
                    self._m(EventKind.REBALANCE_BACKOFF, member, t0 + step / 2, attempt=i)
            if failed:
                return self._m(EventKind.REBALANCE_FAILED, member, end, reason="gave up", count=0)
        return self._m(
            EventKind.REBALANCE_COMPLETED,
            member,
            end,
            count=len(parts),
            partitions=_fmt(parts),
        )

    def conflict(self, member: str, topic: str, partition: int, at: float) -> H:
        """``claim_conflict`` (legacy NodeExists)."""
        return self._m(EventKind.CLAIM_CONFLICT, member, at, topic=topic, partition=partition)

    def group_state(self, state: str, at: float, reason: str = "test") -> H:
        """The coordinator's ``group_state_changed`` (modern protocols)."""
        return self.event(
            EventKind.GROUP_STATE_CHANGED,
            at,
            "broker-0",
            group=self.group,
            state=state,
            reason=reason,
        )

    def coordinator_rebalance(self, at: float, end: float) -> H:
        """The coordinator's ``rebalance_started`` / ``rebalance_completed`` (classic)."""
        self.event(EventKind.REBALANCE_STARTED, at, "broker-0", group=self.group, reason="test")
        return self.event(EventKind.REBALANCE_COMPLETED, end, "broker-0", group=self.group)

    def member_joined(self, member: str, at: float) -> H:
        """The coordinator's ``member_joined``."""
        return self.event(
            EventKind.MEMBER_JOINED, at, "broker-0", group=self.group, member_id=f"{member}-id"
        )

    def member_removed(self, member: str, at: float, reason: str = "leave") -> H:
        """The coordinator's ``member_removed``."""
        return self.event(
            EventKind.MEMBER_REMOVED,
            at,
            "broker-0",
            group=self.group,
            member_id=f"{member}-id",
            reason=reason,
        )

    def request_error(self, member: str, at: float, reason: str = "REBALANCE_IN_PROGRESS") -> H:
        """A member's ``request_error``."""
        return self._m(EventKind.REQUEST_ERROR, member, at, reason=reason, detail="heartbeat")

    # ------------------------------------------------------------- ownership

    def assign(
        self,
        member: str,
        partitions: Iterable[str],
        at: float,
        *,
        zxid: int | None = None,
        generation: int | None = None,
    ) -> H:
        """The member takes ``partitions`` (``['t:0', 't:1']``).

        Args:
            zxid: legacy: the czxid of the first (sorted) partition's owner znode;
                the next partitions get ``zxid + 1``, ``zxid + 2`` ... as
                one attempt's creates do. ``None``: no zxid (an old log).
            generation: modern: the generation (classic) or member epoch
                (KIP-848) the assignment came with, on ``partitions_assigned``
                and each ``ownership_claimed``.
        """
        parts = _parts(partitions)
        if not self.legacy:
            self._m(
                EventKind.PARTITIONS_ASSIGNED,
                member,
                at,
                count=len(parts),
                partitions=_fmt(parts),
                generation=generation,
            )
        for i, (t, p) in enumerate(parts):
            self._m(
                EventKind.OWNERSHIP_CLAIMED,
                member,
                at,
                topic=t,
                partition=p,
                zxid=None if zxid is None else zxid + i,
                generation=generation,
            )
        return self

    def _drop(self, kind: EventKind, member: str, partitions: Iterable[str], at: float) -> H:
        parts = _parts(partitions)
        reason = "lost" if kind == EventKind.PARTITIONS_LOST else "revoked"
        if not self.legacy:
            self._m(kind, member, at, count=len(parts), partitions=_fmt(parts))
        else:
            reason = "release"
        for t, p in parts:
            self._m(EventKind.OWNERSHIP_RELEASED, member, at, topic=t, partition=p, reason=reason)
        return self

    def revoke(self, member: str, partitions: Iterable[str], at: float) -> H:
        """The member gives up ``partitions`` (legacy: releases the owner znodes)."""
        return self._drop(EventKind.PARTITIONS_REVOKED, member, partitions, at)

    def lose(self, member: str, partitions: Iterable[str], at: float) -> H:
        """``partitions_lost`` (modern; legacy: a plain release)."""
        return self._drop(EventKind.PARTITIONS_LOST, member, partitions, at)

    # -------------------------------------------------------------- data path

    def process(
        self,
        member: str,
        topic: str,
        partition: int,
        first: int,
        last: int,
        *,
        start: float,
        end: float,
    ) -> H:
        """The member processed offsets ``[first, last)`` from ``start`` to ``end`` (ms).

        ``processed`` carries the batch's end as ``t_emu_ms`` and
        ``duration_ms = end - start``, as the member shell writes it.
        """
        return self._m(
            EventKind.PROCESSED,
            member,
            end,
            topic=topic,
            partition=partition,
            offset_start=first,
            offset_end=last,
            thread_id="poll-loop",
            duration_ms=float(end - start),
        )

    def share(
        self,
        member: str,
        topic: str,
        partition: int,
        first: int,
        last: int,
        state: str,
        reason: str,
        at: float,
        *,
        count: int = 1,
        redelivery_of: str | None = None,
        broker: int = 0,
    ) -> H:
        """The share-partition leader (``broker``) moved ``[first, last)`` to ``state``
        for ``reason``: one ``share_records`` event as :mod:`actors.share` writes it
        (``member_id`` the member's id; ``detail`` what had made an acquired record
        available again)."""
        return self.event(
            EventKind.SHARE_RECORDS,
            at,
            f"broker-{broker}",
            "node-0",
            group=self.group,
            broker=broker,
            topic=topic,
            partition=partition,
            offset_start=first,
            offset_end=last,
            member_id=f"{member}-id",
            state=state,
            reason=reason,
            count=count,
            detail=redelivery_of,
        )

    def abandon(
        self, member: str, topic: str, partition: int, first: int, last: int, at: float
    ) -> H:
        """``records_abandoned``: ``[first, last)`` was handed out and never processed (a crash)."""
        return self._m(
            EventKind.RECORDS_ABANDONED,
            member,
            at,
            topic=topic,
            partition=partition,
            offset_start=first,
            offset_end=last,
            reason="crash",
        )

    def commit(
        self,
        member: str,
        topic: str,
        partition: int,
        offset: int,
        at: float,
        age_ms: float | None = None,
    ) -> H:
        """``offsets_committed`` of ``offset`` (the next offset to consume).

        ``age_ms``: the coordinator stored it that long before ``at`` (the
        event's ``duration_ms``: a modern member learns of its commit late).
        """
        return self._m(
            EventKind.OFFSETS_COMMITTED,
            member,
            at,
            topic=topic,
            partition=partition,
            offset_end=offset,
            reason="auto",
            duration_ms=None if age_ms is None else float(age_ms),
        )


def frame(spark: SparkSession, histories: Iterable[H | tuple[H, str]]) -> DataFrame:
    """Several histories as one DataFrame (``(history, series)``: under that series).

    One ``createDataFrame`` for all of them: a union of one frame per history
    multiplies the partitions every stage of the checkers goes through.
    """
    from analysis.schema import spark_schema

    rows: list[tuple[Any, ...]] = []
    for item in histories:
        h, series = item if isinstance(item, tuple) else (item, None)
        rows += h.rows(series)
    return spark.createDataFrame(rows, spark_schema())
