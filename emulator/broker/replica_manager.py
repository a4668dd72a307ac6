"""One broker's partitions and their rules, without I/O (Kafka's ``ReplicaManager``).

Replication follows Kafka 0.8.2.2 (kafka-protocols.md A8;
``cluster/Partition.scala``, ``server/ReplicaManager.scala``,
``server/ReplicaFetcherThread.scala``):

* Every broker holds a replica of each partition assigned to it. A follower
  fetches from each leader it follows (:meth:`ReplicaManager.replica_fetch_for`,
  answered by the leader's :meth:`ReplicaManager.replica_fetch`), copying at
  most ``replica.fetch.max.bytes`` (1048576) / :data:`MESSAGE_BYTES` = 1024
  messages per partition per fetch. The fetch is a long poll: a leader with
  nothing new for the follower parks it until a partition of it is appended
  to or changes leader, or ``replica.fetch.wait.max.ms`` (500) runs out
  (:class:`~emulator.broker.fetch.ReplicaFetchPurgatory`). An answer below
  the follower's LEO (``OffsetOutOfRange``) truncates the follower to the
  leader's LEO (``ReplicaFetcherThread.handleOffsetOutOfRange``).
* The leader records each follower's LEO (the fetch offset) and when it was
  last updated; HW = the least LEO over the ISR; consumer fetches are served
  only up to the HW (:mod:`emulator.broker.log`).
* Every ``replica.lag.time.max.ms`` the leader removes the out-of-sync
  followers from the ISR; a follower whose LEO reaches the HW is added back
  (:mod:`emulator.broker.isr`).
* Produce is answered once the HW covers the batch (``acks=all``).
* Leader moves come from the controller as :meth:`ReplicaManager.leader_and_isr`
  (``LeaderAndIsrRequest``) and :meth:`ReplicaManager.update_metadata`
  (``UpdateMetadataRequest``); a broker that becomes leader of a
  ``__consumer_offsets`` partition loads its groups' coordinators
  (:mod:`emulator.broker.coordinators`).
* Topic deletion: an ``UpdateMetadata`` with leader -2 (``LeaderDuringDelete``)
  drops the partitions from the metadata cache (:attr:`ReplicaManager.leaders`;
  K@0.8.2.2 ``server/MetadataCache.scala`` 113-134, K@3.9
  ``ZkMetadataCache.scala`` 556-596); the hosted group coordinators then lose
  those partitions' offsets and the KIP-848 ones their metadata image
  (``groupCoordinator.onPartitionsDeleted``, K@3.9 ``KafkaApis.scala`` 390-393).
  ``StopReplica`` with delete=true drops the replica and its log
  (:meth:`ReplicaManager.stop_replica`; K@0.8.2.2 ``server/ReplicaManager.scala``
  141-166). A produce to a partition missing from the metadata cache, and a
  fetch of one this broker has no replica of, is answered
  UNKNOWN_TOPIC_OR_PARTITION; with :attr:`BrokerConfig.fetch_checks_metadata`
  (the modern brokers, K@3.9 ``KafkaApis.scala`` 802-812) every fetch of a
  partition missing from the cache is, even while the replica is still there
  (0.8.2.2 serves it until StopReplica: its fetch path asks only the replica).

The manager never reads a clock (every call that needs the time takes
``now_ms``, emulated ms) and does no I/O: what the shell must do comes back as
outputs (:data:`~emulator.broker.messages.BrokerOutput`) and ISR writes
(:class:`~emulator.broker.isr.IsrWrite`).

Emulator choices (not Kafka): a broker keeps its logs in memory, so a
restarted broker comes back with empty replicas (a replaced disk) and catches
up from the leaders; a partition with no other replica loses its data.
"""

from __future__ import annotations

import json
from collections.abc import Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from emulator.broker import isr as isr_rules
from emulator.broker.coordinators import CoordinatorHost, EmitEvent
from emulator.broker.fetch import FetchSessions, ReplicaFetchPurgatory, ReplicaWait
from emulator.broker.isr import IsrWrite, WriteResult
from emulator.broker.log import Replica, serve
from emulator.broker.messages import (
    EMPTY_OFFSETS_SNAPSHOT,
    NOT_LEADER,
    NOT_LEADER_ANSWER,
    UNKNOWN_TOPIC_ANSWER,
    UNKNOWN_TOPIC_OR_PARTITION,
    BrokerOutput,
    ExpandIsr,
    FetchAnswer,
    FetchRequest,
    LeaderAndIsrState,
    PendingProduce,
    ProduceAnswer,
    ReplicaFetchAnswer,
    TopicPartition,
)
from emulator.controller import (
    DEFAULT_REPLICA_LAG_MAX_MESSAGES,
    DEFAULT_REPLICA_LAG_TIME_MAX_MS,
    LEADER_DURING_DELETE,
    LeaderIsr,
    caught_up_for_expand,
)
from emulator.events import EventKind
from emulator.modern.messages import GroupRequest, GroupResponse
from emulator.modern.placement import OFFSETS_TOPIC
from emulator.settings import BrokerSettings

_answer = tuple.__new__
"""Builds a named tuple from its fields' tuple (``_make``'s way, without its Python frames)."""

_Sent = tuple[Replica, int, ReplicaFetchAnswer]
"""An answer sent to a follower for one partition, and the leader replica and epoch it came from."""

_NOT_LEADER_REPLICA_ANSWER = ReplicaFetchAnswer(NOT_LEADER, NOT_LEADER, NOT_LEADER, None)
"""A replica fetch's answer for a partition this broker does not lead (immutable: shared)."""

#: Bytes of one emulated message (emulator knob), so a fetch of
#: ``replica.fetch.max.bytes`` = 1048576 copies 1024 messages.
MESSAGE_BYTES = 1024

RoleChange = Literal["lead", "follow"]


@dataclass(frozen=True)
class BrokerConfig:
    """The broker settings its replication rules use.

    Attributes:
        max_fetch_messages: messages per partition per replica fetch
            (``replica.fetch.max.bytes`` / :data:`MESSAGE_BYTES`, at least 1).
        lag_time_max_ms: ``replica.lag.time.max.ms``, emulated ms.
        lag_max_messages: ``replica.lag.max.messages``.
        fetch_checks_metadata: a consumer fetch of a partition missing from the
            metadata cache is UNKNOWN_TOPIC_OR_PARTITION even while the replica
            is there (the modern brokers; 0.8.2.2 asks only the replica).
    """

    max_fetch_messages: int = 1048576 // MESSAGE_BYTES
    lag_time_max_ms: float = float(DEFAULT_REPLICA_LAG_TIME_MAX_MS)
    lag_max_messages: int = DEFAULT_REPLICA_LAG_MAX_MESSAGES
    fetch_checks_metadata: bool = False

    @classmethod
    def from_settings(
        cls, broker: BrokerSettings, *, fetch_checks_metadata: bool = False
    ) -> BrokerConfig:
        """From the run's resolved broker settings."""
        return cls(
            max_fetch_messages=max(1, broker.replica_fetch_max_bytes // MESSAGE_BYTES),
            lag_time_max_ms=float(broker.replica_lag_time_max_ms),
            lag_max_messages=broker.replica_lag_max_messages,
            fetch_checks_metadata=fetch_checks_metadata,
        )


@dataclass(frozen=True)
class ProduceStep:
    """A produce appended: the answers now, and the batches waiting for the HW.

    Attributes:
        answers: the partitions answered at once (not the leader).
        pending: the partitions appended, each waiting for an
            :class:`~emulator.broker.messages.AckProduce` of its waiter.
        outputs: what the append caused (a batch the HW covers at once is
            acknowledged here).
    """

    answers: dict[TopicPartition, ProduceAnswer]
    pending: dict[TopicPartition, PendingProduce]
    outputs: list[BrokerOutput]


@dataclass(frozen=True)
class ReplicaFetchResult:
    """The leader's answers to a follower's fetch, and what the fetch caused.

    Attributes:
        answers: partition -> its answer (empty when the fetch is parked).
        outputs: what the fetch caused (acks, wake-ups, an ISR expansion).
        wait: the parked fetch, when nothing could be answered at once: wait
            for its :class:`~emulator.broker.messages.WakeReplicaFetch` or its
            timeout, then :meth:`ReplicaManager.replica_fetch_collect`.
    """

    answers: dict[TopicPartition, ReplicaFetchAnswer]
    outputs: list[BrokerOutput]
    wait: ReplicaWait | None = None


@dataclass(frozen=True)
class LeaderAndIsrResult:
    """A ``LeaderAndIsrRequest`` applied: the role changes, and what they caused."""

    changes: dict[TopicPartition, RoleChange]
    outputs: list[BrokerOutput]


@dataclass(frozen=True)
class PushPlan:
    """The requests a controller sends for a batch of state changes.

    Attributes:
        leader_and_isr: broker -> the states it replicates (live brokers
            only, by broker id).
        leaders: the new leader of each changed partition (``UpdateMetadata``
            for every live broker).
        assigned: the replica assignment of each changed partition.
    """

    leader_and_isr: dict[int, dict[TopicPartition, LeaderAndIsrState]]
    leaders: dict[TopicPartition, int]
    assigned: dict[TopicPartition, list[int]]


class ReplicaManager:
    """One broker's replicas, fetch sessions and hosted group coordinators.

    Args:
        broker_id: Kafka's ``broker.id``.
        config: the replication settings.
        partitions: the partitions this broker leads alone before it reads
            the cluster's state (without ZooKeeper these stay its only replicas).
        leaders: the run's leader map to start from.
        emit: writes an event to this broker's log.
        coordinators: the group coordinators it hosts (None: a ``zookeeper`` run).
        partition_counts: the metadata image of the coordinators (topic ->
            partition count), shared with their factory: grown topics update it.
    """

    def __init__(
        self,
        broker_id: int,
        config: BrokerConfig,
        partitions: Iterable[TopicPartition],
        leaders: Mapping[TopicPartition, int],
        emit: EmitEvent,
        coordinators: CoordinatorHost | None = None,
        partition_counts: dict[str, int] | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        self._emit = emit
        self.coordinators = coordinators
        self.replicas: dict[TopicPartition, Replica] = {
            tp: Replica(replicas=(broker_id,), leader=broker_id, leader_epoch=0, isr=(broker_id,))
            for tp in partitions
        }
        self.leaders: dict[TopicPartition, int] = dict(leaders)  # the metadata cache
        if coordinators is not None:
            coordinators.metadata = self.leaders
        self.live_brokers: list[int] = []
        self.assignments: dict[TopicPartition, tuple[int, ...]] = {}
        self.partition_counts = partition_counts if partition_counts is not None else {}
        #: ``__consumer_offsets`` partition -> its groups' offsets, as this
        #: broker's replica holds them (the leader's snapshot of each replica fetch).
        self.offsets_replica: dict[int, Mapping[str, Mapping[TopicPartition, int]]] = {}
        self.fetch = FetchSessions(self.serve)
        #: The followers' fetches parked here (the fetch purgatory's replica side).
        self.replica_waits = ReplicaFetchPurgatory()
        self._next_waiter = 0
        # The replicas this broker follows, by leader: rebuilt only when a
        # replica is added, dropped or changes leader (not on every fetch,
        # which would walk every partition this broker replicates each time).
        self._followers: dict[int, list[tuple[TopicPartition, Replica]]] = {}
        self._followers_dirty = True
        #: Per follower, per partition: the answer last sent to it, with the
        #: replica and leader epoch it came from (:meth:`_replica_answers`).
        self._answered: dict[int, dict[TopicPartition, _Sent]] = {}

    # ------------------------------------------------------------ produce

    def produce(self, batch: Mapping[TopicPartition, int]) -> ProduceStep:
        """Append ``count`` messages to each partition this broker leads.

        Each appended batch waits for the HW to cover it (``acks=all``). A
        partition this broker does not lead is answered NOT_LEADER, or
        UNKNOWN_TOPIC_OR_PARTITION when its metadata cache does not have it
        (K@0.8.2.2 ``ReplicaManager.appendToLocalLog``; K@3.9 ``KafkaApis.scala`` 635).
        """
        answers: dict[TopicPartition, ProduceAnswer] = {}
        pending: dict[TopicPartition, PendingProduce] = {}
        out: list[BrokerOutput] = []
        for tp, n in batch.items():
            rep = self.replicas.get(tp)
            if rep is None or rep.leader != self.broker_id or n <= 0:
                answers[tp] = NOT_LEADER_ANSWER if tp in self.leaders else UNKNOWN_TOPIC_ANSWER
                continue
            self._next_waiter += 1
            start, end = rep.append(n, self._next_waiter)
            pending[tp] = PendingProduce(start, end, self._next_waiter)
            if tp in self.replica_waits.parked:  # the followers' parked fetches have data
                out += self.replica_waits.wake(tp)
            self._advance_hw(tp, rep, out)
        return ProduceStep(answers, pending, out)

    def drop_waiter(self, tp: TopicPartition, waiter: int) -> None:
        """A produce stopped waiting for the HW (it timed out)."""
        rep = self.replicas.get(tp)
        if rep is not None:
            rep.drop_waiter(waiter)

    def fail_waiters(self) -> list[BrokerOutput]:
        """Every waiting produce ends uncommitted (the broker stops)."""
        out: list[BrokerOutput] = []
        for rep in self.replicas.values():
            out += rep.fail_waiters()
        return out

    def _advance_hw(self, tp: TopicPartition, rep: Replica, out: list[BrokerOutput]) -> None:
        grew, acks = rep.advance_hw(self.broker_id)
        if grew and tp in self.fetch.parked:
            out += self.fetch.wake(tp)
        out += acks

    # -------------------------------------------------------------- fetch

    def serve(
        self, tp: TopicPartition, offset: int | None, reset: str, max_messages: int
    ) -> tuple[int, int]:
        """One partition's consumer fetch answer ``(start, end)``; see :meth:`Replica.serve`.

        UNKNOWN_TOPIC_OR_PARTITION for a partition missing from the metadata
        cache that this broker has no replica of (or, with
        :attr:`BrokerConfig.fetch_checks_metadata`, whatever its replica).
        """
        rep = self.replicas.get(tp)
        if (rep is None or self.config.fetch_checks_metadata) and tp not in self.leaders:
            return UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_OR_PARTITION
        return serve(rep, self.broker_id, offset, reset, max_messages)

    def fetch_now(self, requests: Iterable[FetchRequest]) -> list[FetchAnswer]:
        """A batch of consumer fetches, answered at once (no session, no wait)."""
        out: list[FetchAnswer] = []
        for topic, partition, offset, reset, max_n in requests:
            start, end = self.serve((topic, partition), offset, reset, max_n)
            out.append(FetchAnswer(topic, partition, start, end))
        return out

    def log_end_offsets(self) -> dict[TopicPartition, int]:
        """The HW of each partition this broker leads (what consumers can reach)."""
        return {
            tp: r.hw
            for tp, r in self.replicas.items()
            if r.leader == self.broker_id and tp[0] != OFFSETS_TOPIC
        }

    # ------------------------------------------------------------- groups

    def group_exchange(
        self, now_ms: float, host_key: str, requests: Iterable[GroupRequest]
    ) -> tuple[list[GroupResponse], list[BrokerOutput]]:
        """A consumer host's batch of group requests to the coordinators hosted here.

        Returns the answers ready for that host (see
        :meth:`CoordinatorHost.exchange`), and what the commits accepted
        caused: each is appended to its ``__consumer_offsets`` partition as one
        message, which wakes the followers' fetches parked on it.

        Raises:
            RuntimeError: this broker hosts no coordinators (a ``zookeeper`` run).
        """
        coordinators = self.coordinators
        if coordinators is None:
            raise RuntimeError("this broker hosts no group coordinators")
        answers = coordinators.exchange(now_ms, host_key, requests)
        out: list[BrokerOutput] = []
        if coordinators.commits:
            for p, n in coordinators.take_commits().items():
                tp = (OFFSETS_TOPIC, p)
                rep = self.replicas.get(tp)
                if rep is None or rep.leader != self.broker_id:
                    continue
                rep.append(n)  # no produce waits on it: the commit was answered already
                if tp in self.replica_waits.parked:
                    out += self.replica_waits.wake(tp)
                self._advance_hw(tp, rep, out)
        return answers, out

    # -------------------------------------------------------- replication

    def replica_fetch(
        self,
        now_ms: float,
        follower: int,
        fetches: Mapping[TopicPartition, int],
        max_wait_ms: float = 0.0,
    ) -> ReplicaFetchResult:
        """A follower's fetch of the partitions this broker leads (a replica ``FetchRequest``).

        The leader records the follower's LEO (its fetch offset) and when it
        fetched, moves the HW, and starts an ISR expansion if the follower
        caught up (K@0.8.2.2 ``KafkaApis.handleFetchRequest``
        ``recordFollowerLogEndOffsets``; K@3.7 ``Partition.updateFollowerFetchState``):
        all of it when the fetch *arrives*, never again when a parked fetch is
        answered. Then it answers at once if some partition has data beyond
        the follower's offset or an error (not the leader, or the follower is
        ahead: it truncates), or if ``max_wait_ms`` is 0; otherwise the fetch
        is parked (``DelayedFetch``) and the result carries its
        :class:`~emulator.broker.fetch.ReplicaWait`: the shell waits for a
        :class:`~emulator.broker.messages.WakeReplicaFetch` of it or
        ``max_wait_ms``, then calls :meth:`replica_fetch_collect`.

        An answer leaves out the partitions whose answer would leave the
        follower's replica as it is: the same answer as the last one sent to
        this follower for that partition, from the same replica and leader
        epoch, to a fetch from the offset that answer gave it (Kafka's
        incremental fetch sessions leave out unchanged partitions too, KIP-227;
        the follower's state, and so the run, is the same as with every
        partition answered, while the answers a run copies and applies shrink
        to the partitions that moved).

        Args:
            now_ms: the emulated time.
            follower: the follower's broker id.
            fetches: partition -> the follower's LEO (its fetch offset).
            max_wait_ms: ``replica.fetch.wait.max.ms``: how long the answer may
                wait for data (0: answer at once).
        """
        out: list[BrokerOutput] = []
        sent: list[tuple[TopicPartition, _Sent]] = []
        answers, answerable = self._replica_answers(follower, fetches, now_ms, out, sent)
        if answerable or max_wait_ms <= 0 or not fetches:
            self._answered[follower].update(sent)
            return ReplicaFetchResult(answers, out)
        wait = self.replica_waits.park(now_ms, follower, fetches, max_wait_ms)
        return ReplicaFetchResult({}, out, wait)

    def replica_fetch_collect(self, wait: ReplicaWait) -> dict[TopicPartition, ReplicaFetchAnswer]:
        """The answer to a parked replica fetch, woken or timed out: what the log holds now.

        Every partition of the fetch is answered as at its arrival (data from
        the fetch offset up to the LEO, the HW, or not the leader), without
        recording the follower again (K@3.7 ``readFromLog(readFromPurgatory =
        true)``; K@0.8.2.2 ``DelayedFetch.respond``).
        """
        self.replica_waits.done(wait)
        sent: list[tuple[TopicPartition, _Sent]] = []
        answers, _ = self._replica_answers(wait.follower, wait.fetches, None, [], sent)
        self._answered[wait.follower].update(sent)
        return answers

    def _replica_answers(
        self,
        follower: int,
        fetches: Mapping[TopicPartition, int],
        record_ms: float | None,
        out: list[BrokerOutput],
        sent: list[tuple[TopicPartition, _Sent]],
    ) -> tuple[dict[TopicPartition, ReplicaFetchAnswer], bool]:
        """Each partition's answer, and whether one of them has data or an error.

        ``record_ms`` not None: the fetch arrives now (record the follower's
        LEO and time, move the HW, maybe expand the ISR, into ``out``).
        Partitions whose answer would change nothing at the follower are left
        out (see :meth:`replica_fetch`); the answers made go into ``sent``,
        for the caller to remember once they are sent (a parked fetch's are not).
        """
        answers: dict[TopicPartition, ReplicaFetchAnswer] = {}
        answerable = False
        answered = self._answered.get(follower)
        if answered is None:
            answered = self._answered[follower] = {}
        # Every fetch of a follower goes over each partition the follower
        # replicates from here, most of them idle: the loop body is kept to
        # what each partition needs (the same rules, read once).
        replicas = self.replicas
        me = self.broker_id
        max_n = self.config.max_fetch_messages
        parked = self.fetch.parked
        coordinators = self.coordinators
        with_groups = set() if coordinators is None else coordinators.partitions_with_groups()
        for tp, offset in fetches.items():
            rep = replicas.get(tp)
            if rep is None or rep.leader != me or follower not in rep.replicas:
                answers[tp] = _NOT_LEADER_REPLICA_ANSWER
                answerable = True
                continue
            leo = rep.leo
            if offset > leo:  # OffsetOutOfRange: the follower truncates
                answers[tp] = ReplicaFetchAnswer(leo, rep.hw, rep.log_start, None)
                answerable = True
                continue
            if leo > offset:
                answerable = True
            hw = rep.hw
            if record_ms is not None:
                rep.follower_leo[follower] = offset
                rep.follower_update_ms[follower] = record_ms
                if offset >= leo:
                    rep.follower_caught_up_ms[follower] = record_ms
                if hw != leo or rep.waiters:  # else advance_hw can change nothing: HW <= LEO
                    grew, acks = rep.advance_hw(me)  # _advance_hw, inlined
                    if grew and tp in parked:
                        out += self.fetch.wake(tp)
                    if acks:
                        out += acks
                    hw = rep.hw
                if follower not in rep.isr and caught_up_for_expand(
                    follower, offset, hw, rep.replicas, rep.isr
                ):
                    out.append(ExpandIsr(tp, rep, follower))
            payload = None
            if coordinators is not None and tp[0] == OFFSETS_TOPIC:
                payload = (
                    coordinators.offsets_snapshot(tp[1])
                    if tp[1] in with_groups
                    else EMPTY_OFFSETS_SNAPSHOT
                )
            end = offset + max_n
            new_leo = leo if leo < end else end
            if hw > new_leo:
                hw = new_leo
            last = answered.get(tp)
            if last is not None and last[0] is rep and last[1] == rep.leader_epoch:
                a = last[2]
                # The follower holds this answer already (it fetches from its
                # new_leo): the same one again would change nothing there.
                if (
                    offset == new_leo == a[0]
                    and a[1] == hw
                    and a[2] == rep.log_start
                    and a[3] is payload
                ):
                    continue
            answer = _answer(ReplicaFetchAnswer, (new_leo, hw, rep.log_start, payload))
            answers[tp] = answer
            sent.append((tp, (rep, rep.leader_epoch, answer)))
        return answers, answerable

    def _follower_index(self) -> dict[int, list[tuple[TopicPartition, Replica]]]:
        """Leader -> the replicas this broker follows from it (rebuilt after a change only)."""
        if self._followers_dirty:
            self._followers_dirty = False
            followers: dict[int, list[tuple[TopicPartition, Replica]]] = {}
            for tp, rep in self.replicas.items():
                if rep.leader >= 0 and rep.leader != self.broker_id:
                    followers.setdefault(rep.leader, []).append((tp, rep))
            self._followers = followers
        return self._followers

    def followed_leaders(self) -> list[int]:
        """The leaders this broker fetches from as a follower (one fetcher each)."""
        return list(self._follower_index())

    def replica_fetch_for(self, leader: int) -> dict[TopicPartition, int]:
        """This broker's next fetch from ``leader``: partition -> own LEO (empty: none to fetch)."""
        return {tp: rep.leo for tp, rep in self._follower_index().get(leader, ())}

    def replica_fetches(self, busy: Container[int]) -> dict[int, dict[TopicPartition, int]]:
        """This broker's fetches as a follower: leader -> partition -> own LEO.

        Args:
            busy: leaders with a fetch still under way (left out).
        """
        return {
            leader: {tp: rep.leo for tp, rep in reps}
            for leader, reps in self._follower_index().items()
            if leader not in busy
        }

    def apply_replica_answer(
        self, leader: int, answer: Mapping[TopicPartition, ReplicaFetchAnswer]
    ) -> bool:
        """The leader's answer to this follower's fetch: take its LEO, log start and HW.

        Returns whether a partition this broker still follows from ``leader``
        was answered with an error (not the leader): the fetcher backs off
        before its next fetch, as Kafka's does from 0.9 on
        (``replica.fetch.backoff.ms``; KAFKA-1461). An answer for a partition
        that moved meanwhile is ignored, as ``AbstractFetcherThread`` ignores
        one for a partition no longer in its map.
        """
        errors = False
        for tp, (new_leo, hw, log_start, payload) in answer.items():
            rep = self.replicas.get(tp)
            if rep is None or rep.leader != leader:
                continue
            if new_leo < 0:
                errors = True
                continue
            rep.leo = new_leo
            rep.log_start = log_start
            rep.hw = hw if hw < new_leo else new_leo
            if payload is not None:
                self.offsets_replica[tp[1]] = payload
        return errors

    # ---------------------------------------------------------------- ISR

    def shrink_candidates(self) -> Iterator[tuple[TopicPartition, Replica]]:
        """The replicas an ``isr-expiration`` pass checks, in :attr:`replicas` order.

        Those this broker leads with followers in the ISR: for any other,
        :meth:`begin_shrink` has nothing to shrink. Each replica is judged when
        the pass reaches it (the pass may wait on an ISR write between two),
        over the replicas there were when it began: the pass goes through the
        same replicas as one over all of them, without a call for each of the
        others (a broker leads ~330,000 partitions of a 1,000,000-partition run).
        """
        me = self.broker_id
        for tp, rep in list(self.replicas.items()):
            if rep.leader == me and len(rep.isr) > 1:
                yield tp, rep

    def begin_shrink(self, tp: TopicPartition, rep: Replica, now_ms: float) -> IsrWrite | None:
        """The ``isr-expiration`` check of one replica: an ISR shrink to write, if due."""
        if rep.leader != self.broker_id or len(rep.isr) <= 1:
            return None
        return isr_rules.plan_shrink(
            tp,
            rep,
            self.broker_id,
            now_ms,
            self.config.lag_time_max_ms,
            self.config.lag_max_messages,
        )

    def begin_expand(self, expand: ExpandIsr) -> IsrWrite | None:
        """An ISR expansion to write, if still wanted when its task runs."""
        return isr_rules.plan_expand(expand.tp, expand.replica, expand.follower)

    def isr_version_read(self, write: IsrWrite, got: tuple[LeaderIsr, int] | None) -> bool:
        """The state znode read for an unknown zkVersion; whether the write goes ahead."""
        return isr_rules.apply_version(write, self.broker_id, got)

    def isr_written(self, write: IsrWrite, version: int | None) -> WriteResult:
        """The conditional write's result (the new zkVersion, None: failed).

        A write that took is recorded in the event log (ISR_CHANGED).
        """
        result = isr_rules.apply_result(write, self.broker_id, version)
        if result is WriteResult.WRITTEN:
            self._emit(
                EventKind.ISR_CHANGED,
                topic=write.tp[0],
                partition=write.tp[1],
                broker=self.broker_id,
                reason=write.reason,
                generation=write.replica.leader_epoch,
                detail=json.dumps(list(write.new_isr), separators=(",", ":")),
            )
        return result

    def isr_reread(self, write: IsrWrite, got: tuple[LeaderIsr, int] | None) -> None:
        """After a version conflict: the state znode as re-read."""
        isr_rules.apply_reread(write, self.broker_id, got)

    def end_isr_write(self, write: IsrWrite, written: bool) -> list[BrokerOutput]:
        """The write is over; a shrink that took forgets the dropped followers' LEOs."""
        rep = write.replica
        rep.isr_write_pending = False
        out: list[BrokerOutput] = []
        if written and write.reason == "shrink":
            for r in write.removed:
                rep.follower_leo.pop(r, None)
            self._advance_hw(write.tp, rep, out)
        return out

    # --------------------------------------------- leader and ISR moves

    def load_topic(
        self,
        now_ms: float,
        topic: str,
        partitions: Sequence[tuple[int, Sequence[int], LeaderAndIsrState | None]],
    ) -> list[BrokerOutput]:
        """A topic as read from ZooKeeper at start: ``(partition, replicas, state)`` each.

        This broker keeps a replica of the partitions assigned to it and
        takes each one's state; it drops the others.
        """
        out: list[BrokerOutput] = []
        for p, reps, st in partitions:
            tp = (topic, p)
            self.assignments[tp] = tuple(reps)
            if st is not None:
                self.leaders[tp] = st.leader
            if self.broker_id not in reps:
                self.replicas.pop(tp, None)
                self._followers_dirty = True
                out += self.fetch.wake(tp)
                out += self.replica_waits.wake(tp)
                continue
            rep = self.replicas.get(tp)
            if rep is None:
                rep = self.replicas[tp] = Replica(replicas=tuple(reps))
                self._followers_dirty = True
            rep.replicas = tuple(reps)
            if st is not None:
                self._apply_state(tp, rep, st, now_ms, out)
        return out

    def keep_topics(self, topics: Container[str]) -> None:
        """The cluster's topics as read at start: forget every other one.

        A broker (re)started after a topic was deleted must not take it from
        the run's starting leader map; ``__consumer_offsets`` is always kept.
        The metadata image of the coordinators (:attr:`partition_counts`) is
        made to match the metadata cache.
        """
        for tp in [tp for tp in self.leaders if tp[0] not in topics and tp[0] != OFFSETS_TOPIC]:
            del self.leaders[tp]
        for tp in [tp for tp in self.replicas if tp[0] not in topics and tp[0] != OFFSETS_TOPIC]:
            del self.replicas[tp]
            self._followers_dirty = True
        for tp in [tp for tp in self.assignments if tp[0] not in topics]:
            del self.assignments[tp]
        counts: dict[str, int] = {}
        for t, p in (*self.leaders, *self.assignments):
            if t != OFFSETS_TOPIC:
                counts[t] = max(counts.get(t, 0), p + 1)
        self.partition_counts.clear()
        self.partition_counts.update(counts)

    def _apply_state(
        self,
        tp: TopicPartition,
        rep: Replica,
        state: LeaderAndIsrState,
        now_ms: float,
        out: list[BrokerOutput],
    ) -> RoleChange | None:
        """Become leader or follower of ``tp``; return ``"lead"``/``"follow"`` on a change."""
        leader, epoch, isr, cepoch, version = state
        if epoch < rep.leader_epoch:
            return None  # a stale request (Kafka: "stale leader epoch")
        was_leader = rep.leader == self.broker_id
        rep.isr = tuple(isr)
        rep.zk_version = version
        rep.controller_epoch = cepoch
        changed = leader != rep.leader or epoch != rep.leader_epoch
        if leader != rep.leader:
            self._followers_dirty = True
            if tp in self.fetch.parked:
                out += self.fetch.wake(tp)  # a fetch parked here now gets NotLeader
            if tp in self.replica_waits.parked:
                # A follower's parked fetch too, at once (K@3.7 ReplicaManager.makeFollowers:
                # completeDelayedFetchOrProduceRequests; 0.8.2.2 answered it at maxWait).
                out += self.replica_waits.wake(tp)
        rep.leader_epoch = epoch
        rep.leader = leader
        if leader == self.broker_id:
            if changed and not was_leader:
                # makeLeader: the HW stays the replica's own; follower LEOs are unknown.
                rep.follower_leo = {}
                rep.follower_update_ms = {r: now_ms for r in rep.replicas if r != leader}
                rep.follower_caught_up_ms = {}
                self._advance_hw(tp, rep, out)
                return "lead"
            self._advance_hw(tp, rep, out)
            return None
        if was_leader:
            out += rep.fail_waiters()
            rep.follower_leo = {}
            return "follow"
        return None

    def leader_and_isr(
        self,
        now_ms: float,
        states: Mapping[TopicPartition, LeaderIsr | Sequence[object]],
        live_brokers: Iterable[int],
        replicas: Mapping[TopicPartition, Sequence[int]] | None = None,
    ) -> LeaderAndIsrResult:
        """``LeaderAndIsrRequest``: lead or follow each partition this broker replicates.

        Args:
            now_ms: the emulated time.
            states: partition -> its state (see :meth:`LeaderAndIsrState.of`).
            live_brokers: the live broker ids.
            replicas: the assignment of partitions this broker may not know
                yet (new topics or partitions).

        A new leader starts from its own LEO and HW; a follower fetches from
        the new leader and truncates to the leader's LEO if it is ahead. A
        state with an older leader epoch than the replica's is ignored. The
        groups of ``__consumer_offsets`` partitions that moved are loaded or
        unloaded.
        """
        self.live_brokers = sorted(live_brokers)
        changes: dict[TopicPartition, RoleChange] = {}
        out: list[BrokerOutput] = []
        for tp, raw in states.items():
            st = LeaderAndIsrState.of(raw)
            reps = tuple((replicas or {}).get(tp, ())) or self.assignments.get(tp, ())
            if reps:
                self.assignments[tp] = tuple(reps)
            self.leaders[tp] = st.leader
            rep = self.replicas.get(tp)
            if rep is None:
                if self.broker_id not in reps and self.broker_id != st.leader:
                    continue
                rep = self.replicas[tp] = Replica(replicas=tuple(reps) or (self.broker_id,))
                self._followers_dirty = True
            elif reps:
                rep.replicas = tuple(reps)
            change = self._apply_state(tp, rep, st, now_ms, out)
            if change is not None:
                changes[tp] = change
        self._coordinator_moves(now_ms, changes)
        return LeaderAndIsrResult(changes, out)

    def _offsets_leaders(self) -> dict[int, int]:
        return {p: b for (t, p), b in self.leaders.items() if t == OFFSETS_TOPIC}

    def _coordinator_moves(
        self, now_ms: float, changes: Mapping[TopicPartition, RoleChange]
    ) -> None:
        """Load or drop the groups of ``__consumer_offsets`` partitions that moved."""
        if self.coordinators is None:
            return
        self.coordinators.set_leaders(self._offsets_leaders())
        for (topic, p), change in sorted(changes.items()):
            if topic != OFFSETS_TOPIC:
                continue
            if change == "lead":
                groups = self.offsets_replica.get(p, {})
                self.coordinators.load_partition(p, groups)
                self._emit(
                    EventKind.COORDINATOR_STARTED,
                    broker=self.broker_id,
                    partition=p,
                    count=len(groups),
                    reason="leader_elected",
                )
            else:
                self.offsets_replica[p] = self.coordinators.offsets_snapshot(p)
                self.coordinators.unload_partition(p, now_ms)

    def update_metadata(
        self, now_ms: float, leaders: Mapping[TopicPartition, int], live_brokers: Iterable[int]
    ) -> list[BrokerOutput]:
        """``UpdateMetadataRequest``: changed leader map entries and the live brokers.

        A partition with leader -2 (``LeaderDuringDelete``) leaves the metadata
        cache (``MetadataCache.updateCache``); those deleted go to the hosted
        group coordinators (``onPartitionsDeleted``: their offsets are
        tombstoned, K@3.9 ``GroupCoordinator.scala`` 1153-1157, CK@4.1
        ``OffsetMetadataManager.onPartitionsDeleted`` 1063-1099) and, with the
        new and grown topics, to the KIP-848 coordinators' metadata image
        (:meth:`_maybe_update_topics`). With :attr:`BrokerConfig.fetch_checks_metadata`
        the fetches parked on a deleted partition are woken (answered
        UNKNOWN_TOPIC_OR_PARTITION).

        Returns:
            What the shell must do (wake-ups).
        """
        deleted: list[TopicPartition] = []
        for tp, leader in leaders.items():
            if leader == LEADER_DURING_DELETE:
                if self.leaders.pop(tp, None) is not None:
                    deleted.append(tp)
            else:
                self.leaders[tp] = leader
        self.live_brokers = sorted(live_brokers)
        out: list[BrokerOutput] = []
        if deleted and self.config.fetch_checks_metadata:
            for tp in deleted:
                out += self.fetch.wake(tp)
        if self.coordinators is not None:
            self.coordinators.set_leaders(self._offsets_leaders())
            if deleted:
                self.coordinators.partitions_deleted(now_ms, deleted)
            self._maybe_update_topics(now_ms, self.coordinators, deleted)
        return out

    def _maybe_update_topics(
        self, now_ms: float, coordinators: CoordinatorHost, deleted: Sequence[TopicPartition]
    ) -> None:
        """The metadata image changed (a topic grew, appeared or went): tell the coordinators.

        :attr:`partition_counts` (shared with the coordinator factory) is
        updated in place. A KIP-848 coordinator refreshes its subscription
        metadata on its next heartbeat (``onNewMetadataImage``, CK@4.1
        ``GroupMetadataManager.java`` 5815-5856); a classic coordinator does
        not use partition counts (its group leader notices on a metadata refresh).
        This is the hook a coordinator's reaction to created and deleted topics
        starts from (:meth:`emulator.modern.coordinator.GroupCoordinator.update_topics`).
        """
        counts: dict[str, int] = {}
        for t, p in self.leaders:
            if t != OFFSETS_TOPIC:
                counts[t] = max(counts.get(t, 0), p + 1)
        grown = {t: n for t, n in counts.items() if n > self.partition_counts.get(t, 0)}
        gone = {t for t, _ in deleted if t not in counts and t in self.partition_counts}
        if not grown and not gone:
            return
        self.partition_counts.update(grown)
        for t in gone:
            del self.partition_counts[t]
        for coord in coordinators.coordinators.values():
            coord.update_topics(now_ms, dict(self.partition_counts))
        coordinators.changed()

    def stop_replica(self, tps: Iterable[TopicPartition]) -> list[BrokerOutput]:
        """``StopReplicaRequest`` with delete=true: drop the replicas of ``tps`` and their logs.

        K@0.8.2.2 ``ReplicaManager.stopReplica`` (141-166): the follower stops
        fetching, the partition and its log go. Produces waiting
        on a dropped replica end uncommitted and fetches parked on it are
        woken (answered UNKNOWN_TOPIC_OR_PARTITION once the metadata cache
        dropped the partition, NOT_LEADER before).

        Returns:
            What the shell must do (produce acknowledgements, wake-ups).
        """
        out: list[BrokerOutput] = []
        for tp in tps:
            rep = self.replicas.pop(tp, None)
            self.assignments.pop(tp, None)
            if rep is None:
                continue
            self._followers_dirty = True
            out += rep.fail_waiters()
            out += self.fetch.wake(tp)
        return out

    def metadata(self) -> dict[TopicPartition, int]:
        """``TopicMetadataRequest``: partition -> leader broker id (-1: none)."""
        return dict(self.leaders)

    def replica_state(self) -> dict[TopicPartition, dict[str, object]]:
        """Each replica's role and log (tests and the live display)."""
        return {
            tp: {
                "leader": r.leader,
                "leader_epoch": r.leader_epoch,
                "isr": list(r.isr),
                "leo": r.leo,
                "hw": r.hw,
                "replicas": list(r.replicas),
            }
            for tp, r in self.replicas.items()
        }

    def led(self) -> list[Replica]:
        """The replicas this broker leads."""
        return [r for r in self.replicas.values() if r.leader == self.broker_id]

    # ------------------------------------------------------ controller side

    def knows_assignment(self, tp: TopicPartition) -> bool:
        """Whether the replica assignment of ``tp`` is known here."""
        return tp in self.assignments

    def record_assignment(self, topic: str, assignment: Mapping[int, Sequence[int]]) -> None:
        """A topic's replica assignment as read from ZooKeeper."""
        for p, reps in assignment.items():
            self.assignments[(topic, p)] = tuple(reps)

    def push_plan(
        self, changes: Mapping[TopicPartition, LeaderIsr | Sequence[object]], live: Container[int]
    ) -> PushPlan:
        """What the controller sends for ``changes`` (``ControllerBrokerRequestBatch``).

        ``LeaderAndIsrRequest`` goes to the live assigned replicas and the
        leader of each changed partition, ``UpdateMetadataRequest`` to every
        live broker.
        """
        per_broker: dict[int, dict[TopicPartition, LeaderAndIsrState]] = {}
        leaders: dict[TopicPartition, int] = {}
        for tp, raw in changes.items():
            st = LeaderAndIsrState.of(raw)
            leaders[tp] = st.leader
            for b in set(self.assignments.get(tp, ())) | {st.leader}:
                if b in live:
                    per_broker.setdefault(b, {})[tp] = st
        assigned = {tp: list(self.assignments.get(tp, ())) for tp in changes}
        return PushPlan(dict(sorted(per_broker.items())), leaders, assigned)
