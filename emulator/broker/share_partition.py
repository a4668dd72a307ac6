"""A share-partition on its leader (KIP-932): in-flight records, acquisition locks,
delivery counts, acknowledgements, and the state the share coordinator keeps.

Pure and sans-I/O: every call takes the emulated time; the broker shell runs
the lock timers (:meth:`SharePartition.next_deadline`, :meth:`SharePartition.expire`)
and sends :meth:`SharePartition.persisted` to the share coordinator. It follows
Kafka's ``core/src/main/java/kafka/server/share/SharePartition.java`` (trunk of
2024-10-25 and the later 4.x copies, as read into ``notes/share-facts.md``):

* **Records** are AVAILABLE, ACQUIRED, ACKNOWLEDGED or ARCHIVED
  (``RecordState``); the only transitions are AVAILABLE to ACQUIRED and
  ACQUIRED to AVAILABLE, ACKNOWLEDGED or ARCHIVED (``RecordState.validateTransition``).
  ACKNOWLEDGED and ARCHIVED are final.
* **Acquire** (``acquire``): a ShareFetch acquires AVAILABLE records for one
  member, each with a lock of ``group.share.record.lock.duration.ms`` (30 s)
  from that instant (``scheduleAcquisitionLockTimeout``) and its delivery count
  raised by one (``DeliveryCountOps.INCREASE``). Redeliveries first: the fetch
  starts at the lowest AVAILABLE offset (``nextFetchOffset``). New records past
  the share-partition end offset (SPEO) are taken while the in-flight span
  ``SPEO - SPSO + 1`` stays within ``group.share.partition.max.record.locks``
  (``lastOffsetAndMaxRecordsToAcquire``), counting acknowledged offsets not yet
  passed by the start offset (SPSO): one stuck record at SPSO caps progress.
  A record on its last attempt (count = limit - 1, limit > 2) is delivered
  alone (KAFKA-17541's throttling of such records).
* **Acknowledge** (``acknowledge``): ACCEPT to ACKNOWLEDGED, RELEASE to
  AVAILABLE, REJECT and GAP to ARCHIVED, RENEW (from 4.2, KIP-1222) a fresh
  lock. Every offset must be ACQUIRED by the acknowledging member, else the
  whole call fails with INVALID_RECORD_STATE and nothing changes
  (``rollbackOrProcessStateUpdates``); an offset past SPEO is INVALID_REQUEST;
  one below SPSO is skipped. A late acknowledgement after the lock expired
  therefore never counts.
* **Back to AVAILABLE** (a RELEASE, a lock expiry, a session close): a record
  whose delivery count reached ``group.share.delivery.count.limit`` (5) is
  ARCHIVED instead (``InFlightState.tryUpdateState``). A session close
  (``releaseAcquiredRecords``) lowers the count from 4.1 (KAFKA-17541: fetched,
  not delivered) and then never archives; in 4.0 it keeps the count.
* **SPSO** moves over contiguous final records (``maybeUpdateCachedStateAndOffsets``).
* **Persistence**: every acknowledgement, release and lock expiry is one
  ``writeShareGroupState`` of the changed records and the SPSO; acquisition is
  never written. A new leader (:meth:`SharePartition.from_persisted`) starts
  from the written state: records that were ACQUIRED come back with their last
  written state and count, or as new records (count 0) if never written
  (``maybeInitialize``).

Emulator choices (Kafka does not have them): records are acquired one by one
up to ``max_records``, as in ``share.acquire.mode = record_limit``, not whole log
batches; writes to the share coordinator take effect at once here (the shell
models their latency); a redelivery after a leader change is attributed to the
failover; each transition is reported with its cause, which Kafka only counts
in part (``AcquisitionLockTimeoutPerSec``, ``RecordAcknowledgementsPerSec``).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from emulator.kafka_keys import kafka_version_at_least
from emulator.modern.errors import Errors

__all__ = [
    "AckBatch",
    "AckType",
    "Acquired",
    "PersistedState",
    "RecordState",
    "SharePartition",
    "SharePartitionConfig",
    "Transition",
]

SHARE_GROUPS_SINCE: Final = (4, 0)
"""Share groups' first release (early access in 4.0, preview 4.1, production 4.2)."""

RENEW_SINCE: Final = (4, 2)
"""KIP-1222: the RENEW acknowledgement."""

RELEASE_DECREMENTS_SINCE: Final = (4, 1)
"""KAFKA-17541 (1/2): a session close's release lowers the delivery count."""

MAX_RECORD_LOCKS_2000_SINCE: Final = (4, 1)
"""``group.share.partition.max.record.locks``: 200 in 4.0's ShareGroupConfig, 2000 in
the later copies read [inferred release: the first after 4.0]."""

# The causes a transition reports (emulator vocabulary; see the module doc).
ACQUIRE: Final = "acquire"
ACCEPT: Final = "accept"
RELEASE: Final = "release"
REJECT: Final = "reject"
GAP: Final = "gap"
RENEW: Final = "renew"
LOCK_EXPIRY: Final = "lock_expiry"
SESSION_CLOSE: Final = "session_close"
FAILOVER: Final = "failover"
DELIVERY_LIMIT: Final = "delivery_limit"


class RecordState(enum.IntEnum):
    """``RecordState`` and its ids."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4

    @property
    def final(self) -> bool:
        return self in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class AckType(enum.IntEnum):
    """``AcknowledgeType`` ids as ShareFetch/ShareAcknowledge carry them."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


@dataclass(frozen=True)
class SharePartitionConfig:
    """The settings one share-partition runs by.

    Attributes:
        lock_duration_ms: ``group.share.record.lock.duration.ms`` (30000) or the
            group's ``share.record.lock.duration.ms``.
        delivery_count_limit: ``group.share.delivery.count.limit`` (5, 2..10).
        max_record_locks: ``group.share.partition.max.record.locks``.
        renew: RENEW acknowledgements are accepted (4.2+).
        release_decrements: a session close lowers the delivery count (4.1+).
    """

    lock_duration_ms: float = 30_000.0
    delivery_count_limit: int = 5
    max_record_locks: int = 2000
    renew: bool = True
    release_decrements: bool = True

    @classmethod
    def for_version(
        cls, kafka_version: str, settings: Mapping[str, object] | None = None
    ) -> SharePartitionConfig:
        """The defaults of ``kafka_version``, overridden by the broker keys in ``settings``.

        Raises:
            ValueError: a version before share groups, or a setting out of Kafka's range.
        """
        if not kafka_version_at_least(kafka_version, SHARE_GROUPS_SINCE):
            raise ValueError(f"share groups need Kafka 4.0 or later, got {kafka_version}")
        s = settings or {}
        later = kafka_version_at_least(kafka_version, MAX_RECORD_LOCKS_2000_SINCE)
        cfg = cls(
            lock_duration_ms=float(_num(s, "group.share.record.lock.duration.ms", 30_000)),
            delivery_count_limit=int(_num(s, "group.share.delivery.count.limit", 5)),
            max_record_locks=int(
                _num(s, "group.share.partition.max.record.locks", 2000 if later else 200)
            ),
            renew=kafka_version_at_least(kafka_version, RENEW_SINCE),
            release_decrements=later,
        )
        if not 2 <= cfg.delivery_count_limit <= 10:
            raise ValueError(
                "group.share.delivery.count.limit must be from 2 to 10, "
                f"got {cfg.delivery_count_limit}"
            )
        if not 1000 <= cfg.lock_duration_ms <= 3_600_000:
            raise ValueError(
                "group.share.record.lock.duration.ms must be from 1000 to 3600000, "
                f"got {cfg.lock_duration_ms:g}"
            )
        if not 100 <= cfg.max_record_locks <= 10_000:
            raise ValueError(
                "group.share.partition.max.record.locks must be from 100 to 10000, "
                f"got {cfg.max_record_locks}"
            )
        return cfg


def _num(settings: Mapping[str, object], key: str, default: float) -> float:
    value = settings.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"{key} must be a number, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class Acquired:
    """``AcquiredRecords``: offsets ``first..last`` handed to a member, each delivered
    for the ``delivery_count``-th time."""

    first: int
    last: int
    delivery_count: int


@dataclass(frozen=True)
class AckBatch:
    """One ``AcknowledgementBatch``: ``first..last`` all acknowledged as ``ack``."""

    first: int
    last: int
    ack: AckType


@dataclass(frozen=True)
class Transition:
    """One record's change of state, with why (for the event log and the checkers).

    ``cause``: :data:`ACQUIRE`, :data:`ACCEPT`, :data:`RELEASE`, :data:`REJECT`,
    :data:`GAP`, :data:`RENEW`, :data:`LOCK_EXPIRY` or :data:`SESSION_CLOSE`;
    ``archived_by``: :data:`DELIVERY_LIMIT` when a return to AVAILABLE became
    ARCHIVED because the count reached the limit. ``redelivery_of``: for an
    acquisition of a record delivered before, what last made it AVAILABLE (its
    count may be 1 again: a session close lowers it from 4.1).
    """

    offset: int
    member: str
    old: RecordState
    new: RecordState
    delivery_count: int
    cause: str
    archived_by: str | None = None
    redelivery_of: str | None = None


@dataclass
class _Record:
    state: RecordState
    count: int
    member: str | None = None
    deadline: float | None = None
    why_available: str | None = None


@dataclass(frozen=True)
class PersistedState:
    """What the share coordinator holds (``ShareSnapshot`` merged with its ``ShareUpdate``s):
    the SPSO and, per written offset, its state and delivery count."""

    start_offset: int
    records: Mapping[int, tuple[RecordState, int]] = field(default_factory=dict)


class SharePartition:
    """One share-partition of one share group on the partition's leader.

    Args:
        config: its settings.
        start_offset: the initial SPSO (``share.auto.offset.reset``: latest by
            default, the log end when the partition is first loaded).
    """

    def __init__(self, config: SharePartitionConfig, start_offset: int) -> None:
        self.config = config
        self.spso = start_offset
        self.speo = start_offset - 1  # the last offset acquired into the cache
        self._records: dict[int, _Record] = {}
        self._written: dict[int, tuple[RecordState, int]] = {}
        self._written_spso = start_offset

    # ---------------------------------------------------------------- reading

    def state_of(self, offset: int) -> RecordState | None:
        """The record's state in the cache (``None``: not in flight)."""
        r = self._records.get(offset)
        return r.state if r is not None else None

    def delivery_count(self, offset: int) -> int:
        r = self._records.get(offset)
        return r.count if r is not None else 0

    def owner(self, offset: int) -> str | None:
        r = self._records.get(offset)
        return r.member if r is not None and r.state is RecordState.ACQUIRED else None

    def in_flight(self) -> int:
        """``InFlightMessageCount``: records in the cache not yet final."""
        return sum(1 for r in self._records.values() if not r.state.final)

    def next_deadline(self) -> float | None:
        """The earliest acquisition lock's expiry."""
        ds = [r.deadline for r in self._records.values() if r.deadline is not None]
        return min(ds) if ds else None

    def persisted(self) -> PersistedState:
        """What the share coordinator holds after the last write."""
        return PersistedState(self._written_spso, dict(self._written))

    # ---------------------------------------------------------------- acquire

    def acquire(
        self, member: str, now_ms: float, log_end_offset: int, max_records: int
    ) -> tuple[list[Acquired], list[Transition]]:
        """A ShareFetch's acquisition for ``member``: up to ``max_records`` records below
        ``log_end_offset`` (the high watermark a consumer may read to)."""
        out: list[Transition] = []
        limit = self.config.delivery_count_limit
        offset = self._next_fetch_offset()
        while offset < log_end_offset and len(out) < max_records:
            r = self._records.get(offset)
            if r is None:
                if offset > self.speo and offset - self.spso + 1 > self.config.max_record_locks:
                    break  # the in-flight span is full
                r = _Record(RecordState.AVAILABLE, 0)
                self._records[offset] = r
            if r.state is not RecordState.AVAILABLE:
                offset += 1
                continue
            last_attempt = limit > 2 and r.count == limit - 1
            if last_attempt and out:
                break  # delivered alone, in a fetch of its own
            why = r.why_available  # set only by a return to AVAILABLE
            r.state = RecordState.ACQUIRED
            r.count += 1
            r.member = member
            r.deadline = now_ms + self.config.lock_duration_ms
            r.why_available = None
            self.speo = max(self.speo, offset)
            out.append(
                Transition(
                    offset,
                    member,
                    RecordState.AVAILABLE,
                    RecordState.ACQUIRED,
                    r.count,
                    ACQUIRE,
                    redelivery_of=why,
                )
            )
            offset += 1
            if last_attempt:
                break
        return _ranges(out), out

    def _next_fetch_offset(self) -> int:
        """``nextFetchOffset``: the lowest AVAILABLE offset in flight, else past SPEO."""
        avail = [o for o, r in self._records.items() if r.state is RecordState.AVAILABLE]
        return min(avail) if avail else max(self.speo + 1, self.spso)

    # ------------------------------------------------------------ acknowledge

    def acknowledge(
        self, member: str, batches: Sequence[AckBatch], now_ms: float
    ) -> tuple[Errors | None, list[Transition]]:
        """A ShareAcknowledge (or the acknowledgements on a ShareFetch) of ``member``.

        Returns the error of the whole call (``None``: applied) and the transitions.
        """
        todo: list[tuple[int, AckType]] = []
        for b in batches:
            if b.last < b.first:
                return Errors.INVALID_REQUEST, []
            if b.ack is AckType.RENEW and not self.config.renew:
                return Errors.INVALID_REQUEST, []
            for offset in range(b.first, b.last + 1):
                if offset < self.spso:
                    continue  # already past the start offset: skipped
                if offset > self.speo:
                    return Errors.INVALID_REQUEST, []
                r = self._records.get(offset)
                if r is None or r.state is not RecordState.ACQUIRED or r.member != member:
                    return Errors.INVALID_RECORD_STATE, []
                todo.append((offset, b.ack))
        out: list[Transition] = []
        for offset, ack in todo:
            r = self._records[offset]
            if ack is AckType.RENEW:
                r.deadline = now_ms + self.config.lock_duration_ms
                out.append(Transition(offset, member, r.state, r.state, r.count, RENEW))
            elif ack is AckType.ACCEPT:
                out.append(self._finish(offset, member, RecordState.ACKNOWLEDGED, ACCEPT))
            elif ack is AckType.RELEASE:
                out.append(self._back(offset, member, RELEASE, decrement=False))
            else:
                cause = REJECT if ack is AckType.REJECT else GAP
                out.append(self._finish(offset, member, RecordState.ARCHIVED, cause))
        if any(t.cause != RENEW for t in out):
            self._write(out)
        return None, out

    # ------------------------------------------------------- locks and sessions

    def expire(self, now_ms: float) -> list[Transition]:
        """Every acquisition lock due by ``now_ms`` runs out
        (``releaseAcquisitionLockOnTimeout``): its record goes back, or is archived."""
        due = sorted(
            o for o, r in self._records.items() if r.deadline is not None and r.deadline <= now_ms
        )
        out = []
        for o in due:
            r = self._records[o]
            assert r.member is not None
            out.append(self._back(o, r.member, LOCK_EXPIRY, decrement=False))
        if out:
            self._write(out)
        return out

    def release_member(self, member: str, now_ms: float) -> list[Transition]:
        """A share session closed (``releaseAcquiredRecords``): every record ``member``
        holds goes back; from 4.1 its delivery count is lowered first."""
        del now_ms
        held = sorted(
            o
            for o, r in self._records.items()
            if r.state is RecordState.ACQUIRED and r.member == member
        )
        out = [
            self._back(o, member, SESSION_CLOSE, decrement=self.config.release_decrements)
            for o in held
        ]
        if out:
            self._write(out)
        return out

    # ---------------------------------------------------------------- leader change

    @classmethod
    def from_persisted(cls, config: SharePartitionConfig, state: PersistedState) -> SharePartition:
        """The new leader's share-partition (``maybeInitialize``): the written records with
        their state and count and no owner; offsets never written are new records."""
        sp = cls(config, state.start_offset)
        for offset, (st, count) in sorted(state.records.items()):
            if offset < state.start_offset:
                continue
            sp._records[offset] = _Record(
                st, count, why_available=FAILOVER if st is RecordState.AVAILABLE else None
            )
            sp.speo = max(sp.speo, offset)
        sp._written = {o: v for o, v in state.records.items() if o >= state.start_offset}
        sp._advance()
        sp._written_spso = sp.spso
        return sp

    # ---------------------------------------------------------------- helpers

    def _back(self, offset: int, member: str, cause: str, *, decrement: bool) -> Transition:
        """ACQUIRED to AVAILABLE, or to ARCHIVED when the count reached the limit
        (``tryUpdateState``; never for a decrement)."""
        r = self._records[offset]
        old = r.state
        r.member = None
        r.deadline = None
        if decrement:
            r.count = max(0, r.count - 1)
        elif r.count >= self.config.delivery_count_limit:
            r.state = RecordState.ARCHIVED
            return Transition(
                offset, member, old, r.state, r.count, cause, archived_by=DELIVERY_LIMIT
            )
        r.state = RecordState.AVAILABLE
        r.why_available = cause
        return Transition(offset, member, old, r.state, r.count, cause)

    def _finish(self, offset: int, member: str, state: RecordState, cause: str) -> Transition:
        r = self._records[offset]
        old = r.state
        r.state = state
        r.member = None
        r.deadline = None
        return Transition(offset, member, old, state, r.count, cause)

    def _write(self, changed: Iterable[Transition]) -> None:
        """One ``writeShareGroupState``: the changed records and the new SPSO."""
        for t in changed:
            r = self._records.get(t.offset)
            if r is not None:
                self._written[t.offset] = (r.state, r.count)
        self._advance()
        self._written_spso = self.spso
        for o in [o for o in self._written if o < self.spso]:
            del self._written[o]

    def _advance(self) -> None:
        """SPSO over contiguous final records; final records behind it leave the cache."""
        while True:
            r = self._records.get(self.spso)
            if r is None or not r.state.final:
                break
            del self._records[self.spso]
            self.spso += 1
        if self.speo < self.spso - 1:
            self.speo = self.spso - 1


def _ranges(ts: Sequence[Transition]) -> list[Acquired]:
    """Consecutive acquisitions of one delivery count as ``AcquiredRecords`` ranges."""
    out: list[Acquired] = []
    for t in ts:
        if out and out[-1].last + 1 == t.offset and out[-1].delivery_count == t.delivery_count:
            out[-1] = Acquired(out[-1].first, t.offset, t.delivery_count)
        else:
            out.append(Acquired(t.offset, t.offset, t.delivery_count))
    return out
