"""ShareFetch and ShareAcknowledge on one broker (KIP-932): share sessions, the
share-partitions it leads, and the long poll.

Pure and sans-I/O, beside :mod:`emulator.broker.fetch`. Follows Kafka's
``SharePartitionManager`` (``fetchMessages``, ``acknowledge``,
``releaseSession``), ``ShareSessionCache`` and ``DelayedShareFetch``, as read
into ``notes/share-facts.md`` section 4:

* **Share sessions** are keyed by (group, member). ShareSessionEpoch 0 opens one
  (acknowledgements on it are INVALID_REQUEST), -1 closes it, anything else
  must be the next epoch (INVALID_SHARE_SESSION_EPOCH); a non-zero epoch for
  no session is SHARE_SESSION_NOT_FOUND. Closing releases every record the
  member holds on the partitions of its session (``releaseAcquiredRecords``).
* **A fetch** first applies the acknowledgements it carries, then acquires up
  to ``max_records`` from each partition it names, up to the partition's high
  watermark. Nothing acquired and ``max_wait_ms`` > 0: the fetch waits
  (``DelayedShareFetch``) until records arrive or come back (a release, a lock
  expiry), or the wait runs out; then it is answered (empty on a timeout).
* **Share-partitions** are made at the first fetch of a (group, partition),
  their start offset by ``share.auto.offset.reset`` (``latest``: the high
  watermark then; ``earliest``: the log start), or from the state the share
  coordinator holds (:meth:`ShareFetchBroker.load`).

Emulator choices: one fetch may acquire from several partitions, each up to
``max_records`` (Kafka spreads MaxRecords over the partitions it reads); the
waiting fetch is woken by any change of its partitions' records, not by
``fetch.min.bytes``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from emulator.broker.share_partition import (
    AckBatch,
    Acquired,
    PersistedState,
    SharePartition,
    SharePartitionConfig,
    Transition,
)
from emulator.modern.errors import Errors

__all__ = [
    "CLOSE_EPOCH",
    "OPEN_EPOCH",
    "ShareFetchBroker",
    "ShareFetchRequest",
    "ShareFetchResponse",
    "SharePartitionData",
]

TopicPartition = tuple[str, int]
OPEN_EPOCH = 0
CLOSE_EPOCH = -1


@dataclass(frozen=True)
class ShareFetchRequest:
    """One ShareFetch (or, with no partitions to read, a ShareAcknowledge)."""

    corr: int
    group: str
    member: str
    session_epoch: int
    partitions: tuple[TopicPartition, ...] = ()
    acks: Mapping[TopicPartition, tuple[AckBatch, ...]] = field(default_factory=dict)
    max_records: int = 500
    max_wait_ms: float = 500.0


@dataclass(frozen=True)
class SharePartitionData:
    """One partition of the answer: what was acquired, and the acknowledgements' error."""

    tp: TopicPartition
    acquired: tuple[Acquired, ...] = ()
    ack_error: Errors | None = None


@dataclass(frozen=True)
class ShareFetchResponse:
    corr: int
    member: str
    error: Errors = Errors.NONE
    partitions: tuple[SharePartitionData, ...] = ()


@dataclass
class _Waiting:
    request: ShareFetchRequest
    deadline: float
    acks: dict[TopicPartition, Errors | None]


class ShareFetchBroker:
    """The share-fetch side of one broker.

    Args:
        config: the share-partitions' settings.
        high_watermark: the offset a consumer may read to, per partition.
        log_start: the log start offset, per partition.
        auto_offset_reset: ``share.auto.offset.reset`` (``latest`` or ``earliest``).
    """

    def __init__(
        self,
        config: SharePartitionConfig,
        high_watermark: Callable[[TopicPartition], int],
        log_start: Callable[[TopicPartition], int],
        auto_offset_reset: str = "latest",
    ) -> None:
        if auto_offset_reset not in ("latest", "earliest"):
            raise ValueError(
                f"share.auto.offset.reset must be latest or earliest, got {auto_offset_reset!r}"
            )
        self.config = config
        self._hw = high_watermark
        self._log_start = log_start
        self.auto_offset_reset = auto_offset_reset
        self.partitions: dict[tuple[str, TopicPartition], SharePartition] = {}
        self._sessions: dict[tuple[str, str], tuple[int, set[TopicPartition]]] = {}
        self._waiting: list[_Waiting] = []
        self.transitions: list[tuple[str, TopicPartition, Transition]] = []
        """Every record transition since the last :meth:`drain_transitions` (for events),
        with its share group and partition."""

    # ------------------------------------------------------------------ requests

    def fetch(self, now_ms: float, req: ShareFetchRequest) -> ShareFetchResponse | None:
        """Handle a ShareFetch; ``None``: it waits (see :meth:`poll`)."""
        key = (req.group, req.member)
        session = self._sessions.get(key)
        if req.session_epoch == OPEN_EPOCH:
            if req.acks:
                return ShareFetchResponse(req.corr, req.member, Errors.INVALID_REQUEST)
            if session is not None:
                self._close(now_ms, req.group, req.member)
            self._sessions[key] = (1, set(req.partitions))
        elif req.session_epoch == CLOSE_EPOCH:
            if session is None:
                return ShareFetchResponse(req.corr, req.member, Errors.SHARE_SESSION_NOT_FOUND)
            acks = self._acknowledge(now_ms, req)
            self._close(now_ms, req.group, req.member)
            return ShareFetchResponse(req.corr, req.member, partitions=_ack_data(acks))
        else:
            if session is None:
                return ShareFetchResponse(req.corr, req.member, Errors.SHARE_SESSION_NOT_FOUND)
            epoch, tps = session
            if req.session_epoch != epoch:
                return ShareFetchResponse(req.corr, req.member, Errors.INVALID_SHARE_SESSION_EPOCH)
            self._sessions[key] = (epoch + 1, tps | set(req.partitions))
        acks = self._acknowledge(now_ms, req)
        got = self._acquire(now_ms, req)
        if any(got.values()) or req.max_wait_ms <= 0 or not req.partitions:
            return self._answer(req, acks, got)
        self._waiting.append(_Waiting(req, now_ms + req.max_wait_ms, acks))
        return None

    def poll(self, now_ms: float) -> list[ShareFetchResponse]:
        """Expire the locks due, then answer the waiting fetches that can acquire now or
        whose wait ran out."""
        self.expire(now_ms)
        out: list[ShareFetchResponse] = []
        still: list[_Waiting] = []
        for w in self._waiting:
            got = self._acquire(now_ms, w.request)
            if any(got.values()) or w.deadline <= now_ms:
                out.append(self._answer(w.request, w.acks, got))
            else:
                still.append(w)
        self._waiting = still
        return out

    def next_deadline(self) -> float | None:
        """The next lock expiry or waiting fetch's timeout."""
        ds = [w.deadline for w in self._waiting]
        ds += [d for sp in self.partitions.values() if (d := sp.next_deadline()) is not None]
        return min(ds) if ds else None

    def expire(self, now_ms: float) -> None:
        """Lock expiries due at ``now_ms`` (their records go back, or are archived)."""
        for (group, tp), sp in self.partitions.items():
            self.transitions += [(group, tp, t) for t in sp.expire(now_ms)]

    def close_member(self, now_ms: float, group: str, member: str) -> None:
        """The member's connection closed: its share session goes, as on epoch -1."""
        if (group, member) in self._sessions:
            self._close(now_ms, group, member)

    # ------------------------------------------------------------------ state

    def load(self, group: str, tp: TopicPartition, state: PersistedState) -> None:
        """This broker became the partition's leader: its share-partition from the state
        the share coordinator holds (``maybeInitialize``)."""
        self.partitions[(group, tp)] = SharePartition.from_persisted(self.config, state)

    def persisted(self) -> dict[tuple[str, TopicPartition], PersistedState]:
        """What each share-partition has written to the share coordinator."""
        return {k: sp.persisted() for k, sp in self.partitions.items()}

    def drain_transitions(self) -> list[tuple[str, TopicPartition, Transition]]:
        """The transitions since the last call, with their group and partition."""
        out, self.transitions = self.transitions, []
        return out

    def drop(self, tp: TopicPartition) -> None:
        """This broker no longer leads ``tp``: its share-partitions go (a new leader loads
        the persisted state); fetches waiting on it are answered by :meth:`poll` empty."""
        for key in [k for k in self.partitions if k[1] == tp]:
            del self.partitions[key]
        for w in self._waiting:
            if tp in w.request.partitions:
                w.deadline = 0.0

    # ------------------------------------------------------------------ helpers

    def _partition(self, group: str, tp: TopicPartition) -> SharePartition:
        sp = self.partitions.get((group, tp))
        if sp is None:
            start = self._hw(tp) if self.auto_offset_reset == "latest" else self._log_start(tp)
            sp = SharePartition(self.config, start)
            self.partitions[(group, tp)] = sp
        return sp

    def _acknowledge(
        self, now_ms: float, req: ShareFetchRequest
    ) -> dict[TopicPartition, Errors | None]:
        out: dict[TopicPartition, Errors | None] = {}
        for tp, batches in sorted(req.acks.items()):
            sp = self.partitions.get((req.group, tp))
            if sp is None:
                out[tp] = Errors.INVALID_RECORD_STATE
                continue
            err, ts = sp.acknowledge(req.member, batches, now_ms)
            self.transitions += [(req.group, tp, t) for t in ts]
            out[tp] = err
        return out

    def _acquire(
        self, now_ms: float, req: ShareFetchRequest
    ) -> dict[TopicPartition, list[Acquired]]:
        got: dict[TopicPartition, list[Acquired]] = {}
        for tp in req.partitions:
            sp = self._partition(req.group, tp)
            acquired, ts = sp.acquire(req.member, now_ms, self._hw(tp), req.max_records)
            self.transitions += [(req.group, tp, t) for t in ts]
            got[tp] = acquired
        return got

    def _answer(
        self,
        req: ShareFetchRequest,
        acks: Mapping[TopicPartition, Errors | None],
        got: Mapping[TopicPartition, Sequence[Acquired]],
    ) -> ShareFetchResponse:
        tps = sorted(set(got) | set(acks))
        return ShareFetchResponse(
            req.corr,
            req.member,
            partitions=tuple(
                SharePartitionData(tp, tuple(got.get(tp, ())), acks.get(tp)) for tp in tps
            ),
        )

    def _close(self, now_ms: float, group: str, member: str) -> None:
        _epoch, tps = self._sessions.pop((group, member))
        for tp in sorted(tps):
            sp = self.partitions.get((group, tp))
            if sp is not None:
                self.transitions += [(group, tp, t) for t in sp.release_member(member, now_ms)]
        self._waiting = [
            w
            for w in self._waiting
            if not (w.request.group == group and w.request.member == member)
        ]


def _ack_data(acks: Mapping[TopicPartition, Errors | None]) -> tuple[SharePartitionData, ...]:
    return tuple(SharePartitionData(tp, (), err) for tp, err in sorted(acks.items()))
