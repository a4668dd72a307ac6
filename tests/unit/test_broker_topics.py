"""A deleted topic at the broker, on a fake clock: no Ray, asyncio or ZooKeeper.

:class:`~emulator.broker.replica_manager.ReplicaManager` and
:class:`~emulator.broker.coordinators.CoordinatorHost` driven by hand through a
topic deletion as the controller carries it out (K@0.8.2.2
``TopicDeletionManager``): an ``UpdateMetadata`` with leader -2 drops the
partitions from the metadata cache (``MetadataCache.updateCache``), then
``StopReplica`` (delete=true) drops the replicas and their logs
(``ReplicaManager.stopReplica``). What each request then gets, partition by
partition: UNKNOWN_TOPIC_OR_PARTITION for the deleted ones, the others served
or stored (K@3.9 ``KafkaApis.scala`` 470-500 for OffsetCommit, 802-812 for
Fetch, 635 for Produce); the coordinators' offsets tombstoned and the KIP-848
metadata image updated (``onPartitionsDeleted``, K@3.9 ``KafkaApis.scala``
390-393).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pytest

from emulator.broker.coordinators import CoordinatorHost, make_coordinator_factory
from emulator.broker.messages import (
    NOT_LEADER,
    UNKNOWN_TOPIC_OR_PARTITION,
    AckProduce,
    FetchAnswer,
    FetchRequest,
    SessionAnswer,
    SessionFetch,
    WakeFetchSession,
)
from emulator.broker.replica_manager import BrokerConfig, ReplicaManager
from emulator.controller import LEADER_DURING_DELETE
from emulator.events import EventKind
from emulator.modern.coordinator import CoordinatorOutput, GroupCoordinator
from emulator.modern.errors import Errors
from emulator.modern.messages import (
    GroupRequest,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    TopicPartition,
)

GONE = "gone"  # the topic being deleted
KEPT = "kept"
UNKNOWN = (UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_OR_PARTITION)


def _silent(kind: EventKind, **fields: object) -> None:
    del kind, fields


def manager(
    *,
    modern: bool,
    coordinators: CoordinatorHost | None = None,
    counts: dict[str, int] | None = None,
) -> ReplicaManager:
    """Broker 0 leading ``gone``-0/1 and ``kept``-0 alone, with a produce on each."""
    tps = [(GONE, 0), (GONE, 1), (KEPT, 0)]
    rm = ReplicaManager(
        0,
        BrokerConfig(fetch_checks_metadata=modern),
        tps,
        dict.fromkeys(tps, 0),
        _silent,
        coordinators,
        counts,
    )
    rm.produce(dict.fromkeys(tps, 5))
    return rm


def delete(rm: ReplicaManager, now_ms: float = 1.0) -> list[object]:
    """The controller's UpdateMetadata for the topic being deleted (leader -2)."""
    return list(
        rm.update_metadata(
            now_ms, {(GONE, 0): LEADER_DURING_DELETE, (GONE, 1): LEADER_DURING_DELETE}, [0]
        )
    )


def fetch(rm: ReplicaManager) -> list[FetchAnswer]:
    return rm.fetch_now(
        [
            FetchRequest(GONE, 0, 0, "smallest", 100),
            FetchRequest(KEPT, 0, 0, "smallest", 100),
        ]
    )


# ------------------------------------------------------------------ metadata and fetch


def test_update_metadata_with_leader_minus_two_drops_the_partitions_from_the_cache() -> None:
    rm = manager(modern=True)
    delete(rm)
    assert rm.metadata() == {(KEPT, 0): 0}
    assert set(rm.replicas) == {(GONE, 0), (GONE, 1), (KEPT, 0)}  # the logs wait for StopReplica


def test_a_modern_broker_fails_the_deleted_partitions_of_a_fetch_and_serves_the_rest() -> None:
    rm = manager(modern=True)
    delete(rm)
    assert fetch(rm) == [
        FetchAnswer(GONE, 0, *UNKNOWN),
        FetchAnswer(KEPT, 0, 0, 5),
    ]


def test_a_0_8_broker_serves_a_deleted_partition_until_stop_replica_drops_it() -> None:
    rm = manager(modern=False)
    delete(rm)
    # 0.8.2.2's fetch path asks the replica only (readMessageSets).
    assert fetch(rm) == [FetchAnswer(GONE, 0, 0, 5), FetchAnswer(KEPT, 0, 0, 5)]
    rm.stop_replica([(GONE, 0), (GONE, 1)])
    assert set(rm.replicas) == {(KEPT, 0)} and rm.log_end_offsets() == {(KEPT, 0): 5}
    assert fetch(rm) == [FetchAnswer(GONE, 0, *UNKNOWN), FetchAnswer(KEPT, 0, 0, 5)]


def test_a_partition_not_led_here_but_in_the_cache_is_still_not_leader() -> None:
    rm = manager(modern=True)
    assert rm.serve(("other", 0), 0, "smallest", 10) == UNKNOWN
    rm.update_metadata(0.0, {("other", 0): 2}, [0, 2])
    assert rm.serve(("other", 0), 0, "smallest", 10) == (NOT_LEADER, NOT_LEADER)


@pytest.mark.parametrize("modern", [True, False])
def test_a_fetch_parked_on_a_deleted_partition_is_woken_and_answered_unknown(
    modern: bool,
) -> None:
    rm = manager(modern=modern)
    step = rm.fetch.begin(0.0, "h", True, [SessionFetch(4, GONE, 1, 5, "smallest", 100)], [], 500)
    assert step.answers == [] and step.wait_ms == 500  # nothing past offset 5: parked
    woken = delete(rm)
    # The modern broker answers at once (its fetch checks the cache); 0.8 at StopReplica.
    assert (WakeFetchSession("h") in woken) is modern
    out = rm.stop_replica([(GONE, 0), (GONE, 1)])
    assert WakeFetchSession("h") in out or modern
    assert rm.fetch.collect(step.session) == [SessionAnswer(4, *UNKNOWN)]
    assert rm.fetch.parked == {}


# ------------------------------------------------------------------ produce


def test_stop_replica_ends_the_produces_waiting_on_it_uncommitted() -> None:
    tp = (GONE, 0)
    rm = ReplicaManager(0, BrokerConfig(), [], {}, _silent)
    rm.leader_and_isr(0.0, {tp: (0, 0, (0, 1), 0, 1)}, [0, 1], {tp: [0, 1]})
    step = rm.produce({tp: 3})
    waiter = step.pending[tp].waiter  # the follower has not fetched: the HW waits
    out = rm.stop_replica([tp])
    assert AckProduce(waiter, False) in out
    assert tp not in rm.replicas and tp not in rm.assignments


def test_a_produce_to_a_deleted_partition_is_unknown_and_the_others_are_appended() -> None:
    rm = manager(modern=False)
    delete(rm)
    rm.stop_replica([(GONE, 0), (GONE, 1)])
    step = rm.produce({(GONE, 0): 2, (KEPT, 0): 2})
    assert step.answers == {(GONE, 0): UNKNOWN}
    assert (step.pending[(KEPT, 0)].start, step.pending[(KEPT, 0)].end) == (5, 7)


def test_a_broker_started_after_a_deletion_forgets_the_topic() -> None:
    counts = {GONE: 2, KEPT: 1}
    rm = manager(modern=True, counts=counts)
    rm.keep_topics({KEPT})  # what /brokers/topics holds when it starts
    assert rm.metadata() == {(KEPT, 0): 0} and set(rm.replicas) == {(KEPT, 0)}
    assert counts == {KEPT: 1}


# ------------------------------------------------------------------ group coordinators


def host_for(protocol: str, counts: dict[str, int]) -> CoordinatorHost:
    factory = make_coordinator_factory(protocol, {}, 0, 1, counts)
    return CoordinatorHost(0, {0: 0}, factory, _silent)


def commit(corr: int, offsets: Mapping[TopicPartition, int]) -> OffsetCommitRequest:
    # A commit outside group management (generation/epoch -1) to an empty group.
    return OffsetCommitRequest(corr, "g", generation_id_or_member_epoch=-1, offsets=offsets)


@pytest.mark.parametrize("protocol", ["classic-eager", "consumer"])
def test_an_offset_commit_fails_the_deleted_partitions_and_stores_the_others(
    protocol: str,
) -> None:
    counts = {GONE: 2, KEPT: 1}
    host = host_for(protocol, counts)
    rm = manager(modern=True, coordinators=host, counts=counts)
    (first,) = host.exchange(0.0, "h", [commit(1, {(GONE, 0): 3, (KEPT, 0): 3})])
    assert isinstance(first, OffsetCommitResponse) and first.error is Errors.NONE
    delete(rm)
    (resp,) = host.exchange(2.0, "h", [commit(2, {(GONE, 1): 4, (KEPT, 0): 4})])
    assert isinstance(resp, OffsetCommitResponse)
    assert resp.partition_errors == {
        (GONE, 1): Errors.UNKNOWN_TOPIC_OR_PARTITION,
        (KEPT, 0): Errors.NONE,
    }
    # Only deleted partitions: the coordinator is not asked; the error is the response's.
    (only,) = host.exchange(3.0, "h", [commit(3, {(GONE, 0): 9})])
    assert isinstance(only, OffsetCommitResponse)
    assert only.error is Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert only.partition_errors == {(GONE, 0): Errors.UNKNOWN_TOPIC_OR_PARTITION}
    # The deleted partition's offset was tombstoned; the other was stored.
    assert host.coordinators["g"].committed_offsets() == {(KEPT, 0): 4}
    (fetched,) = host.exchange(4.0, "h", [OffsetFetchRequest(5, "g", ((GONE, 0), (KEPT, 0)))])
    assert isinstance(fetched, OffsetFetchResponse)
    assert fetched.offsets == {(GONE, 0): None, (KEPT, 0): 4}  # K@3.9: no cache check here


class Images(GroupCoordinator):
    """A coordinator recording its metadata images and its tombstones."""

    def __init__(self) -> None:
        self.images: list[dict[str, int]] = []
        self.deleted: list[list[TopicPartition]] = []
        self.offsets: dict[TopicPartition, int] = {(GONE, 0): 1, (KEPT, 0): 1}

    def handle(
        self, now_ms: float, request: GroupRequest, *, client_id: str = "consumer"
    ) -> list[CoordinatorOutput]:
        return []

    def poll(self, now_ms: float) -> list[CoordinatorOutput]:
        return []

    def next_deadline(self) -> float | None:
        return None

    def committed_offsets(self) -> dict[TopicPartition, int]:
        return dict(self.offsets)

    def delete_offsets(self, now_ms: float, partitions: Iterable[TopicPartition]) -> None:
        tps = list(partitions)
        self.deleted.append(tps)
        for tp in tps:
            self.offsets.pop(tp, None)

    def update_topics(self, now_ms: float, topics: Mapping[str, int]) -> None:
        self.images.append(dict(topics))


def test_the_coordinators_lose_the_offsets_and_the_image_loses_the_topic() -> None:
    counts = {GONE: 2, KEPT: 1}
    coord = Images()
    host = CoordinatorHost(0, {0: 0}, lambda _g, _c: coord, _silent)
    rm = manager(modern=True, coordinators=host, counts=counts)
    host.exchange(0.0, "h", [GroupRequest(1, "g")])
    # A group loaded from the offsets log and not asked for yet loses them too.
    host.load_partition(0, {"idle": {(GONE, 1): 7, (KEPT, 0): 7}})
    delete(rm)
    assert coord.deleted == [[(GONE, 0), (GONE, 1)]]
    assert coord.offsets == {(KEPT, 0): 1}
    assert host.offsets_snapshot(0)["idle"] == {(KEPT, 0): 7}
    assert coord.images == [{KEPT: 1}] and counts == {KEPT: 1}  # the factory's image too
    # Created again with one partition: the image has it again (a new topic).
    rm.update_metadata(5.0, {(GONE, 0): 0}, [0])
    assert coord.images[-1] == {KEPT: 1, GONE: 1}


def test_the_classic_and_kip848_coordinators_tombstone_deleted_offsets() -> None:
    for protocol in ("classic-eager", "consumer"):
        coord = make_coordinator_factory(protocol, {}, 0, 1, {GONE: 2})(
            "g", {(GONE, 0): 3, (KEPT, 0): 3}
        )
        coord.delete_offsets(1.0, [(GONE, 0), (GONE, 1)])
        assert coord.committed_offsets() == {(KEPT, 0): 3}, protocol
