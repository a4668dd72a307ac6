"""The group coordinators one broker hosts, the mailboxes of their answers, and their factory.

A broker leads some partitions of ``__consumer_offsets``; every group that
maps to one of them (:func:`emulator.modern.placement.coordinator_partition`)
is coordinated here. Consumer hosts send their members' requests in one
batch per tick (:meth:`CoordinatorHost.exchange`) and get back every answer
that is ready for them, including JoinGroup and SyncGroup answers that the
coordinator parked until the group moved on. Timers (session expiry, join and
sync deadlines, rebalance timeouts) run from the broker's own loop through
:meth:`CoordinatorHost.poll`.

Coordinator failover: the broker keeps the leader map of ``__consumer_offsets``
current (:meth:`CoordinatorHost.set_leaders`), so FindCoordinator names the
partition's current leader (COORDINATOR_NOT_AVAILABLE while it has none).
When the broker becomes leader of an offsets partition it loads the committed
offsets of that partition's groups from its replica
(:meth:`CoordinatorHost.load_partition`; followers get them with each replica
fetch, :meth:`CoordinatorHost.offsets_snapshot`); when it stops leading one it
unloads those groups (:meth:`CoordinatorHost.unload_partition`: parked joins
and syncs, and every later request, get NOT_COORDINATOR).

The coordinators are :class:`~emulator.modern.coordinator.GroupCoordinator`
state machines, made per group by :func:`make_coordinator_factory` (the
classic or the KIP-848 one, by the run's protocol). This is a plain class of
the core, driven by the broker actor's clock (:mod:`actors.broker`).

Deviations from Kafka: only the committed offsets move to the new
coordinator. Kafka also loads the group metadata (members, generation,
assignment) from the log; here the new coordinator starts the group empty, so
the members' next heartbeat gets UNKNOWN_MEMBER_ID and they rejoin (a KIP-848
member rejoins with epoch 0). A commit the coordinator accepts is appended to
its ``__consumer_offsets`` partition as one message (:meth:`CoordinatorHost.take_commits`,
appended by the broker), which wakes the followers' parked replica fetches;
it reaches them one round trip later. But it is answered at once (Kafka
writes it with ``offsets.commit.required.acks`` = -1 and answers once the ISR
has it), so a commit made within that round trip before the leader dies can
be lost: the group re-processes from the previous commit.
"""

from __future__ import annotations

import bisect
import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from emulator.broker.messages import EMPTY_OFFSETS_SNAPSHOT, GroupOffsets, OffsetsSnapshot
from emulator.events import EventKind
from emulator.modern.config import modern_properties
from emulator.modern.coordinator import CoordinatorOutput, GroupCoordinator
from emulator.modern.errors import Errors
from emulator.modern.messages import (
    ConsumerGroupHeartbeatRequest,
    Emit,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    GroupRequest,
    GroupResponse,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetCommitResponse,
    ShareGroupHeartbeatRequest,
    SyncGroupRequest,
    TopicPartition,
)
from emulator.modern.placement import coordinator_partition
from emulator.protocols import spec

if TYPE_CHECKING:
    from emulator.modern.mixed_group import MixedGroupCoordinator

#: Makes the coordinator of a new group: ``factory(group_id, committed)``, the
#: committed offsets it starts from (None: none).
CoordinatorFactory = Callable[[str, "dict[TopicPartition, int] | None"], GroupCoordinator]


class EmitEvent(Protocol):
    """Writes an event to the broker's log (:meth:`emulator.eventlog.EventWriter.emit`)."""

    def __call__(self, kind: EventKind, **fields: object) -> None:
        """Record one event."""
        ...


#: Upper bounds (emulated ms) of the heartbeat-gap histogram's buckets: every
#: 500 ms up to 10 s (the heartbeat intervals are 3 s classic, 5 s KIP-848),
#: then coarser up to the 45 s session timeout; one more bucket above the last.
#: An emulator measurement, not a Kafka metric.
HEARTBEAT_GAP_BOUNDS_MS: tuple[int, ...] = (
    *range(500, 10_001, 500),
    12_000,
    15_000,
    20_000,
    30_000,
    45_000,
)


class CoordinatorHost:
    """Coordinators of the groups whose offsets partition this broker leads.

    Args:
        broker_id: this broker.
        offsets_leaders: ``__consumer_offsets`` partition -> leader broker id.
        factory: makes the coordinator state machine of a new group
            (:func:`make_coordinator_factory`).
        emit: writes an event to this broker's log.
    """

    def __init__(
        self,
        broker_id: int,
        offsets_leaders: dict[int, int],
        factory: CoordinatorFactory,
        emit: EmitEvent,
    ) -> None:
        self.broker_id = broker_id
        self.offsets_leaders = dict(offsets_leaders)
        self.num_partitions = len(offsets_leaders)
        self.factory = factory
        self._emit = emit
        self.coordinators: dict[str, GroupCoordinator] = {}
        self._partition_of: dict[str, int] = {}
        self._route: dict[int, str] = {}
        self._mailbox: dict[str, list[GroupResponse]] = defaultdict(list)
        self.requests = 0
        self.requests_by_kind: dict[str, int] = defaultdict(int)
        # Heartbeat timeliness as the coordinator sees it: the gap between two
        # contacts that keep a member's session alive (emulated ms). As in
        # Kafka's classic GroupCoordinator, a member waiting in JoinGroup is
        # kept alive (its consumer stops heartbeating while it rejoins) and the
        # JoinGroup answer restarts its session timer.
        self._last_heartbeat: dict[str, float] = {}
        self._joining: dict[int, str] = {}  # corr of a pending JoinGroup -> member id
        self._now_ms = 0.0
        self.heartbeat_gap_max_ms = 0.0
        self.heartbeat_gap_sum_ms = 0.0
        self.heartbeat_gap_counts = [0] * (len(HEARTBEAT_GAP_BOUNDS_MS) + 1)
        # Offsets partition -> group -> committed offsets, loaded on becoming its
        # leader and not yet handed to a coordinator.
        self._loaded: dict[int, GroupOffsets] = {}
        #: Offsets partition -> the commits accepted since :meth:`take_commits`.
        self.commits: dict[int, int] = {}
        #: The broker's metadata cache (partition -> leader), set by its
        #: replica manager: an OffsetCommit for a partition missing from it is
        #: answered UNKNOWN_TOPIC_OR_PARTITION. ``None``: no check.
        self.metadata: Mapping[TopicPartition, int] | None = None
        #: Called whenever the coordinators' timers may have changed (a request,
        #: a partition loaded, unloaded or deleted): the broker's timer task
        #: then looks again at :meth:`next_deadline`. ``None``: nobody listens.
        self.on_change: Callable[[], None] | None = None

    def changed(self) -> None:
        """Tell :attr:`on_change` that the timers may have changed."""
        if self.on_change is not None:
            self.on_change()

    def partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition of ``group_id`` (cached per group)."""
        part = self._partition_of.get(group_id)
        if part is None:
            part = self._partition_of[group_id] = coordinator_partition(
                group_id, self.num_partitions
            )
        return part

    def coordinator_for(self, group_id: str) -> int:
        """The broker that coordinates ``group_id``; -1 while its partition has no leader."""
        return self.offsets_leaders.get(self.partition_for(group_id), -1)

    # ------------------------------------------------------------ failover

    def set_leaders(self, offsets_leaders: dict[int, int]) -> None:
        """The current leaders of the ``__consumer_offsets`` partitions (changed entries)."""
        self.offsets_leaders.update(offsets_leaders)

    def load_partition(
        self, partition: int, groups: Mapping[str, Mapping[TopicPartition, int]]
    ) -> None:
        """This broker now leads ``partition``: its groups start from these committed offsets.

        Args:
            partition: the ``__consumer_offsets`` partition.
            groups: group id -> committed offsets, as this broker's replica has them.
        """
        self.offsets_leaders[partition] = self.broker_id
        self._loaded[partition] = {g: dict(o) for g, o in groups.items()}
        for g in list(self.coordinators):  # coordinators left from an earlier term
            if self.partition_for(g) == partition and g in self._loaded[partition]:
                del self.coordinators[g]
        self.changed()

    def unload_partition(self, partition: int, now_ms: float) -> None:
        """This broker no longer leads ``partition``: drop its groups' coordinators."""
        self._loaded.pop(partition, None)
        for g in list(self.coordinators):
            if self.partition_for(g) != partition:
                continue
            self._dispatch(self.coordinators.pop(g).unload(now_ms))
        self.changed()

    def partitions_deleted(self, now_ms: float, partitions: Sequence[TopicPartition]) -> None:
        """``groupCoordinator.onPartitionsDeleted``: every group here loses their offsets.

        K@3.9 ``KafkaApis.handleUpdateMetadataRequest`` (390-393) calls it with
        the partitions an UpdateMetadata removed from the metadata cache; the
        offsets are tombstoned in every group the broker coordinates
        (:meth:`emulator.modern.coordinator.GroupCoordinator.delete_offsets`),
        including groups loaded and not yet asked for.
        """
        self._now_ms = now_ms
        for coord in self.coordinators.values():
            coord.delete_offsets(now_ms, partitions)
        for groups in self._loaded.values():
            for offsets in groups.values():
                for tp in partitions:
                    offsets.pop(tp, None)
        self.changed()

    def partitions_with_groups(self) -> set[int]:
        """The ``__consumer_offsets`` partitions whose :meth:`offsets_snapshot` is not empty.

        Those with a loaded group or a coordinator's group: a replica fetch asks
        for the others' (empty) snapshots without calling :meth:`offsets_snapshot`.
        """
        out = {p for p, groups in self._loaded.items() if groups}
        for g in self.coordinators:
            out.add(self.partition_for(g))
        return out

    def offsets_snapshot(self, partition: int) -> OffsetsSnapshot:
        """The committed offsets of the groups of ``partition`` (what its log holds).

        Asked for each of the partitions in every answer to a follower's fetch;
        most hold no group, and get the one empty snapshot.
        """
        loaded = self._loaded.get(partition)
        out = {g: dict(o) for g, o in loaded.items()} if loaded else {}
        for g, coord in self.coordinators.items():
            if self.partition_for(g) == partition:
                out[g] = dict(coord.committed_offsets())
        return OffsetsSnapshot(out) if out else EMPTY_OFFSETS_SNAPSHOT

    def _create(self, group_id: str) -> GroupCoordinator:
        loaded = self._loaded.get(self.partition_for(group_id), {})
        committed = loaded.pop(group_id, None)
        coord = self.factory(group_id, committed or None)
        self.coordinators[group_id] = coord
        return coord

    def exchange(
        self, now_ms: float, host_key: str, requests: Iterable[GroupRequest]
    ) -> list[GroupResponse]:
        """Handle a host's batch of requests; return every answer ready for that host."""
        self._now_ms = now_ms
        for req in requests:
            self.requests += 1
            self.requests_by_kind[type(req).__name__] += 1
            self._route[req.corr] = host_key
            if isinstance(
                req,
                HeartbeatRequest
                | ConsumerGroupHeartbeatRequest
                | ShareGroupHeartbeatRequest
                | SyncGroupRequest,
            ):
                self._heartbeat_seen(now_ms, req)
            elif isinstance(req, JoinGroupRequest) and req.member_id:
                self._heartbeat_seen(now_ms, req)
                self._joining[req.corr] = req.member_id
            elif isinstance(req, LeaveGroupRequest):
                for mid, _ in req.members:
                    self._last_heartbeat.pop(mid, None)
            if isinstance(req, FindCoordinatorRequest):
                node = self.coordinator_for(req.group_id)
                if node < 0:
                    self._deliver(
                        FindCoordinatorResponse(req.corr, Errors.COORDINATOR_NOT_AVAILABLE)
                    )
                else:
                    self._deliver(FindCoordinatorResponse(req.corr, node_id=node))
                continue
            if self.coordinator_for(req.group_id) != self.broker_id:
                self._deliver(error_response(req, Errors.NOT_COORDINATOR))
                continue
            coord = self.coordinators.get(req.group_id)
            if coord is None:
                coord = self._create(req.group_id)
            if isinstance(req, OffsetCommitRequest):
                self._offset_commit(now_ms, coord, req, self.metadata)
                continue
            if isinstance(req, JoinGroupRequest) and req.client_id:
                # The request header's client.id: new member ids are "<client.id>-<uuid>".
                self._dispatch(coord.handle(now_ms, req, client_id=req.client_id))
            else:
                self._dispatch(coord.handle(now_ms, req))
        self.changed()
        return self._mailbox.pop(host_key, [])

    def take_commits(self) -> dict[int, int]:
        """The commits accepted since the last call, per ``__consumer_offsets`` partition.

        Each is one message the broker appends to that partition's log (Kafka
        appends the commit's record: K@3.7 ``GroupMetadataManager.storeOffsets``,
        the KIP-848 coordinator's ``OffsetMetadataManager.commitOffset``).
        """
        commits, self.commits = self.commits, {}
        return commits

    def _offset_commit(
        self,
        now_ms: float,
        coord: GroupCoordinator,
        req: OffsetCommitRequest,
        metadata: Mapping[TopicPartition, int] | None,
    ) -> None:
        """``KafkaApis.handleOffsetCommitRequest``: unknown partitions fail, the rest are stored.

        K@3.9 ``KafkaApis.scala`` 470-500: a partition missing from the metadata
        cache gets UNKNOWN_TOPIC_OR_PARTITION in the response, and the others
        go to the coordinator (none left: the coordinator is not asked). The
        0.8.2.2 broker did the same for its ZooKeeper-stored commits
        (``KafkaApis.ensureTopicExists``, 88 and 109-112). ``metadata`` ``None``:
        no check. An accepted commit is counted for :meth:`take_commits`.
        """
        missing = Errors.UNKNOWN_TOPIC_OR_PARTITION
        unknown = (
            {} if metadata is None else {tp: missing for tp in req.offsets if tp not in metadata}
        )
        if unknown and len(unknown) == len(req.offsets):
            self._deliver(OffsetCommitResponse(req.corr, missing, partition_errors=unknown))
            return
        known = {tp: o for tp, o in req.offsets.items() if tp not in unknown}
        outputs = coord.handle(now_ms, replace(req, offsets=known) if unknown else req)
        if any(isinstance(o, OffsetCommitResponse) and o.accepted_ms is not None for o in outputs):
            p = self.partition_for(req.group_id)
            self.commits[p] = self.commits.get(p, 0) + 1
        if unknown:
            outputs = [
                replace(o, partition_errors={**o.partition_errors, **unknown})
                if isinstance(o, OffsetCommitResponse) and o.corr == req.corr
                else o
                for o in outputs
            ]
        self._dispatch(outputs)

    def _heartbeat_seen(
        self,
        now_ms: float,
        req: HeartbeatRequest
        | ConsumerGroupHeartbeatRequest
        | ShareGroupHeartbeatRequest
        | SyncGroupRequest
        | JoinGroupRequest,
    ) -> None:
        mid = req.member_id
        if not mid:
            return  # a KIP-848 join: no member id yet
        if (
            isinstance(req, ConsumerGroupHeartbeatRequest | ShareGroupHeartbeatRequest)
            and req.member_epoch < 0
        ):
            self._last_heartbeat.pop(mid, None)  # leaving
            return
        last = self._last_heartbeat.get(mid)
        self._last_heartbeat[mid] = now_ms
        if last is not None:
            gap = now_ms - last
            self.heartbeat_gap_sum_ms += gap
            self.heartbeat_gap_max_ms = max(self.heartbeat_gap_max_ms, gap)
            self.heartbeat_gap_counts[bisect.bisect_left(HEARTBEAT_GAP_BOUNDS_MS, gap)] += 1

    def next_deadline(self) -> float | None:
        """The earliest timer of any coordinator here (emulated ms), or ``None``."""
        earliest: float | None = None
        for coord in self.coordinators.values():
            deadline = coord.next_deadline()
            if deadline is not None and (earliest is None or deadline < earliest):
                earliest = deadline
        return earliest

    def poll(self, now_ms: float) -> None:
        """Run the timers of every coordinator that has one due."""
        self._now_ms = now_ms
        for coord in list(self.coordinators.values()):
            deadline = coord.next_deadline()
            if deadline is not None and now_ms >= deadline:
                self._dispatch(coord.poll(now_ms))

    def _dispatch(self, outputs: Iterable[CoordinatorOutput]) -> None:
        for out in outputs:
            if isinstance(out, Emit):
                fields = dict(out.fields)
                fields.setdefault("broker", self.broker_id)
                self._emit(out.kind, **fields)
            elif isinstance(out, GroupResponse):
                self._deliver(out)

    def _deliver(self, resp: GroupResponse) -> None:
        joined = self._joining.pop(resp.corr, None)
        if joined is not None and joined in self._last_heartbeat:
            self._last_heartbeat[joined] = self._now_ms  # the session timer restarts
        host = self._route.pop(resp.corr, None)
        if host is not None:  # a host that is gone gets nothing
            self._mailbox[host].append(resp)

    def stats(self) -> dict[str, object]:
        """Requests served, by kind, the groups coordinated here, and the heartbeat gaps:
        their count, largest, mean, and histogram (``heartbeat_gap_histogram``: the
        count of gaps at most each bound of :data:`HEARTBEAT_GAP_BOUNDS_MS` and above
        the previous one, then the count above the last bound)."""
        gaps = sum(self.heartbeat_gap_counts)
        return {
            "requests": self.requests,
            "by_kind": dict(self.requests_by_kind),
            "groups": sorted(self.coordinators),
            "heartbeat_gaps": gaps,
            "heartbeat_gap_max_ms": round(self.heartbeat_gap_max_ms, 1),
            "heartbeat_gap_mean_ms": (round(self.heartbeat_gap_sum_ms / gaps, 1) if gaps else None),
            "heartbeat_gap_histogram": list(self.heartbeat_gap_counts),
        }


def error_response(req: GroupRequest, error: Errors) -> GroupResponse:
    """An error answer of the right response type for ``req``."""
    from emulator.modern import messages as m

    kinds: dict[type, type] = {
        m.JoinGroupRequest: m.JoinGroupResponse,
        m.SyncGroupRequest: m.SyncGroupResponse,
        m.HeartbeatRequest: m.HeartbeatResponse,
        m.LeaveGroupRequest: m.LeaveGroupResponse,
        m.OffsetCommitRequest: m.OffsetCommitResponse,
        m.OffsetFetchRequest: m.OffsetFetchResponse,
        m.ConsumerGroupHeartbeatRequest: m.ConsumerGroupHeartbeatResponse,
    }
    cls = kinds.get(type(req), GroupResponse)
    resp: GroupResponse = cls(req.corr, error)
    return resp


def make_coordinator_factory(
    protocol: str,
    kafka: dict[str, object],
    broker_id: int,
    seed: int,
    partitions_per_topic: dict[str, int],
    *,
    mixed_protocols: bool = False,
) -> CoordinatorFactory:
    """The factory ``(group_id, committed) -> coordinator`` for the brokers of a ``protocol`` run.

    Args:
        protocol: a modern protocol (:mod:`emulator.protocols`).
        kafka: the run's Kafka configs by name.
        broker_id: the hosting broker.
        seed: the run's seed; each group's coordinator draws from its own
            generator, seeded by the seed, the broker and the group.
        partitions_per_topic: the metadata image of KIP-848 coordinators,
            shared (not copied): new groups see grown topics.
        mixed_protocols: the run's members may speak the other protocol too
            (an ``upgrade`` action): every group is a
            :class:`~emulator.modern.migration.MigratingGroupCoordinator`, which
            starts as the run protocol's kind and converts as Kafka 3.8+ does.
            Without it a group only ever hears its own protocol, and the plain
            coordinator of that protocol serves it (the same answers: a group
            converts only when the other protocol's request arrives).
    """
    props = modern_properties(kafka)
    if spec(protocol).generation == "share":
        return _share_factory(props, broker_id, seed, partitions_per_topic)
    if mixed_protocols:
        return _migrating_factory(protocol, props, broker_id, seed, partitions_per_topic)
    if spec(protocol).generation == "classic":
        from emulator.modern.classic_coordinator import ClassicGroupCoordinator
        from emulator.modern.config import GroupCoordinatorConfig

        cfg = GroupCoordinatorConfig.from_kafka(props)

        def classic(group_id: str, committed: dict[TopicPartition, int] | None) -> GroupCoordinator:
            rng = random.Random(f"{seed}/{broker_id}/{group_id}")
            return ClassicGroupCoordinator(
                group_id, cfg, rng, broker=broker_id, committed=committed
            )

        return classic
    from emulator.modern.consumer_coordinator import make_consumer_coordinator

    def kip848(group_id: str, committed: dict[TopicPartition, int] | None) -> GroupCoordinator:
        rng = random.Random(f"{seed}/{broker_id}/{group_id}")
        coord = make_consumer_coordinator(group_id, props, rng, broker_id, partitions_per_topic)
        coord.committed.update(committed or {})
        return coord

    return kip848


def _share_factory(
    props: Mapping[str, object],
    broker_id: int,
    seed: int,
    partitions_per_topic: Mapping[str, int],
) -> CoordinatorFactory:
    """Share groups' coordinators (KIP-932), with the broker's ``group.share.*`` settings."""
    from emulator.kafka_keys import DEFAULT_KAFKA_VERSION, KafkaSettings
    from emulator.modern.share_group import ShareGroupCoordinator

    version = str(props.get("kafka.version") or DEFAULT_KAFKA_VERSION)
    explicit = {k: v for k, v in props.items() if isinstance(v, int | float | str | bool)}
    kafka = KafkaSettings("share", version, explicit)

    def share(group_id: str, committed: dict[TopicPartition, int] | None) -> GroupCoordinator:
        del committed  # a share group commits no offsets
        return ShareGroupCoordinator(
            group_id,
            topics=partitions_per_topic,
            rng=random.Random(f"{seed}/{broker_id}/{group_id}"),
            session_timeout_ms=kafka.get_int("group.share.session.timeout.ms"),
            heartbeat_interval_ms=kafka.get_int("group.share.heartbeat.interval.ms"),
            max_size=kafka.get_int("group.share.max.size"),
        )

    return share


def _migrating_factory(
    protocol: str,
    props: Mapping[str, object],
    broker_id: int,
    seed: int,
    partitions_per_topic: Mapping[str, int],
) -> CoordinatorFactory:
    """Groups that start as ``protocol``'s kind and may convert (online migration)."""
    from emulator.modern.classic_coordinator import ClassicGroupCoordinator
    from emulator.modern.config import GroupCoordinatorConfig
    from emulator.modern.migration import MigratingGroupCoordinator, MigrationPolicy
    from emulator.modern.mixed_group import make_mixed_coordinator

    cfg = GroupCoordinatorConfig.from_kafka(props)

    def make(group_id: str, committed: dict[TopicPartition, int] | None) -> GroupCoordinator:
        # One generator per group, shared by the kinds it turns into.
        rng = random.Random(f"{seed}/{broker_id}/{group_id}")

        def new_classic(offsets: Mapping[TopicPartition, int] | None) -> ClassicGroupCoordinator:
            return ClassicGroupCoordinator(group_id, cfg, rng, broker=broker_id, committed=offsets)

        def new_consumer(offsets: Mapping[TopicPartition, int] | None) -> MixedGroupCoordinator:
            coord = make_mixed_coordinator(group_id, props, rng, broker_id, partitions_per_topic)
            coord.committed.update(offsets or {})
            return coord

        return MigratingGroupCoordinator(
            group_id,
            new_classic=new_classic,
            new_consumer=new_consumer,
            initial=spec(protocol).generation,
            policy=MigrationPolicy(cfg.group_consumer_migration_policy),
            kafka_version=cfg.kafka_version,
            classic_max_size=cfg.group_max_size,
            consumer_max_size=cfg.group_consumer_max_size,
            committed=committed,
        )

    return make
