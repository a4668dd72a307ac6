"""What a broker receives and answers, and what its core asks of its shell.

The request and answer formats cross Ray between the broker and its callers
(producers, consumer hosts, other brokers, the controller). They are named
tuples: typed and named on both sides, and still equal to and unpacked like
the plain tuples that callers build.

The outputs (:data:`BrokerOutput`) are what the
:class:`~emulator.broker.replica_manager.ReplicaManager` returns for the
shell to carry out, in order: end a produce's wait for acknowledgements, wake
a fetch session's long poll or a follower's parked replica fetch, start an ISR
expansion (a ZooKeeper write).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from emulator.controller import LeaderIsr

if TYPE_CHECKING:
    from emulator.broker.log import Replica

TopicPartition = tuple[str, int]
#: Group id -> the group's committed offsets: what one ``__consumer_offsets``
#: partition holds.
GroupOffsets = dict[str, dict[TopicPartition, int]]


class OffsetsSnapshot(Mapping[str, Mapping[TopicPartition, int]]):
    """What one ``__consumer_offsets`` partition holds at one moment: group -> offsets.

    Immutable: built once, from offsets no one else holds, and never changed
    (its groups' offsets are handed out read-only). A leader's replica fetch
    answer carries one to the follower, with every answer; because nothing
    can change it, the sim engine passes it by reference instead of copying it
    (``actors.sim.system``), as Ray's copy would give an equal value. Pickled
    (Ray), it is rebuilt from its groups. Equal to any mapping with the same
    content, e.g. the plain dict of dicts it was built from.

    Args:
        groups: group id -> committed offsets; the snapshot takes them as they
            are (the caller gives up these dicts), see :meth:`of` to copy.
    """

    __slots__ = ("_groups",)

    def __init__(self, groups: dict[str, dict[TopicPartition, int]]) -> None:
        self._groups = groups

    @classmethod
    def of(cls, groups: Mapping[str, Mapping[TopicPartition, int]]) -> OffsetsSnapshot:
        """A snapshot of copies of ``groups``' offsets."""
        return cls({g: dict(o) for g, o in groups.items()})

    def __getitem__(self, group: str) -> Mapping[TopicPartition, int]:
        return self._groups[group]

    def __iter__(self) -> Iterator[str]:
        return iter(self._groups)

    def __len__(self) -> int:
        return len(self._groups)

    def __reduce__(self) -> tuple[Any, tuple[dict[str, dict[TopicPartition, int]]]]:
        return (OffsetsSnapshot, (self._groups,))

    def __repr__(self) -> str:
        return f"OffsetsSnapshot({self._groups!r})"


EMPTY_OFFSETS_SNAPSHOT = OffsetsSnapshot({})
"""The snapshot of a ``__consumer_offsets`` partition that holds no group (shared: immutable)."""


#: Answer codes in place of a start offset.
NOT_LEADER = -1  # NotLeaderForPartition (a replica that does not lead)
TIMED_OUT = -2  # RequestTimedOut: the HW did not cover the batch in time
#: UnknownTopicOrPartition: the partition is not in this broker's metadata cache
#: (a deleted topic's, or one the broker has not heard of yet).
UNKNOWN_TOPIC_OR_PARTITION = -3


# ------------------------------------------------------------- produce


class ProduceAnswer(NamedTuple):
    """One partition's produce answer: the batch's offsets ``[start, end)``.

    ``(NOT_LEADER, NOT_LEADER)``: not the leader; ``(TIMED_OUT, TIMED_OUT)``:
    the HW did not cover the batch in time (the messages stay in the log);
    ``(UNKNOWN_TOPIC_OR_PARTITION, ...)``: no such partition (a deleted topic).
    """

    start: int
    end: int


NOT_LEADER_ANSWER = ProduceAnswer(NOT_LEADER, NOT_LEADER)
TIMED_OUT_ANSWER = ProduceAnswer(TIMED_OUT, TIMED_OUT)
UNKNOWN_TOPIC_ANSWER = ProduceAnswer(UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_OR_PARTITION)


@dataclass(frozen=True)
class PendingProduce:
    """A batch appended to the log, waiting for the HW to cover ``end``.

    Attributes:
        start, end: the batch's offsets.
        waiter: the id of its wait; an :class:`AckProduce` with this id ends it.
    """

    start: int
    end: int
    waiter: int


# --------------------------------------------------------------- fetch


class FetchRequest(NamedTuple):
    """A consumer fetch: ``offset`` None or out of range is resolved by ``reset``."""

    topic: str
    partition: int
    offset: int | None
    reset: str
    max_messages: int


class FetchAnswer(NamedTuple):
    """A consumer fetch's answer ``[start, end)``; ``start`` < 0: an error code.

    :data:`NOT_LEADER` (not the leader) or :data:`UNKNOWN_TOPIC_OR_PARTITION`.
    """

    topic: str
    partition: int
    start: int
    end: int


class SessionFetch(NamedTuple):
    """A fetch added to a fetch session, under the host's slot number."""

    slot: int
    topic: str
    partition: int
    offset: int | None
    reset: str
    max_messages: int


class SessionAnswer(NamedTuple):
    """A fetch session's answer to the fetch in ``slot``."""

    slot: int
    start: int
    end: int


# --------------------------------------------------------- replication


class ReplicaFetchAnswer(NamedTuple):
    """The leader's answer to a follower's fetch of one partition.

    Attributes:
        new_leo: the follower's new LEO (below its own: truncate);
            :data:`NOT_LEADER`: not the leader.
        hw: the leader's HW (capped at ``new_leo``).
        log_start: the leader's log start.
        offsets: for ``__consumer_offsets``, the committed offsets of the
            partition's groups (an :class:`OffsetsSnapshot` from the leader);
            otherwise None.
    """

    new_leo: int
    hw: int
    log_start: int
    offsets: Mapping[str, Mapping[TopicPartition, int]] | None


class LeaderAndIsrState(NamedTuple):
    """A partition's state as a ``LeaderAndIsrRequest`` carries it.

    Attributes:
        leader, leader_epoch, isr, controller_epoch: the state znode's content.
        zk_version: the znode's version; -1 when unknown (a controller's
            state), then the leader reads it before its first ISR write.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int = 0
    zk_version: int = -1

    @classmethod
    def of(cls, state: LeaderIsr | Sequence[object]) -> LeaderAndIsrState:
        """From a controller's :class:`~emulator.controller.LeaderIsr` or a tuple in field order.

        A tuple may leave out the last two fields; a zkVersion of None is -1.
        """
        if isinstance(state, LeaderIsr):
            return cls(
                state.leader,
                state.leader_epoch,
                tuple(state.isr),
                int(state.controller_epoch or 0),
            )
        isr = state[2]
        assert isinstance(isr, Sequence)
        version = state[4] if len(state) > 4 else None
        return cls(
            _int(state[0]),
            _int(state[1]),
            tuple(_int(r) for r in isr),
            _int(state[3]) if len(state) > 3 else 0,
            -1 if version is None else _int(version),
        )


def _int(value: object) -> int:
    assert isinstance(value, int | str | float), value
    return int(value)


# ------------------------------------------------------------- outputs


@dataclass(frozen=True)
class AckProduce:
    """End a produce's wait: ``committed`` (the HW covers it) or not (not leader any more)."""

    waiter: int
    committed: bool


@dataclass(frozen=True)
class WakeFetchSession:
    """Data (or a leader change) for a fetch parked in ``session``: end its long poll."""

    session: str


@dataclass(frozen=True)
class WakeReplicaFetch:
    """A follower's parked replica fetch can be answered (data, or a leader change): end its wait.

    ``key`` is its :attr:`~emulator.broker.fetch.ReplicaWait.key`.
    """

    key: int


@dataclass(frozen=True)
class ExpandIsr:
    """A follower caught up with the HW: start adding it to the ISR (a ZooKeeper write).

    The shell starts the write in a task of its own, as Kafka's leader does it
    from the follower's fetch; :meth:`ReplicaManager.begin_expand` re-checks
    the condition when the task runs.
    """

    tp: TopicPartition
    replica: Replica
    follower: int


BrokerOutput = AckProduce | WakeFetchSession | WakeReplicaFetch | ExpandIsr
