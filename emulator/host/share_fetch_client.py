"""One share consumer's ShareFetch and ShareAcknowledge traffic (KIP-932 client side), sans-I/O.

Kafka's ``ShareConsumeRequestManager`` and ``ShareSessionHandler``, as read at the
4.0, 4.1 and 4.2 release commits into ``notes/share-client-facts.md`` §2 (``CI/`` is
``clients/.../consumer/internals/``):

* **One request at a time per broker** (``nodesWithPendingRequests``): a
  ShareFetch *or* a ShareAcknowledge, whichever is due.
* **Acknowledgements first** (``processAcknowledgements``, 348-401): a
  ShareAcknowledge built in a round (the application's ``commitSync``,
  ``commitAsync``, a ``poll()`` that found records buffered, ``close()``) keeps
  every ShareFetch out of that round. Otherwise they ride on the next
  ShareFetch to the partition's leader (``poll()`` with an empty buffer).
* **When to fetch** (``fetchMoreRecords``, 312-320, 859-861): a ``poll()`` that
  finds the buffer empty asks for records; a response with acquired records
  stops the asking until the next such ``poll()``. Until then an answer
  without records is followed at once by the next long poll (``fetch.max.wait.ms``).
  A ShareFetch goes to every leader of the member's partitions.
* **Share sessions** (``ShareSessionHandler`` 116-339): epoch 0 opens one, each
  answer moves it on by one, -1 closes it. SHARE_SESSION_NOT_FOUND,
  INVALID_SHARE_SESSION_EPOCH and a failed call start over at 0.
  Acknowledgements cannot ride on epoch 0: they fail here, locally, with
  INVALID_SHARE_SESSION_EPOCH (4.1+; 4.0 sent them and the broker refused the
  fetch with INVALID_REQUEST), and a ShareAcknowledge cannot open a session
  (SHARE_SESSION_NOT_FOUND). A failed acknowledgement is never retried here:
  its records come back when their locks expire.
* **Acknowledgements go to the broker the records came from**; a partition
  whose leader moved since fails its acknowledgements with
  NOT_LEADER_OR_FOLLOWER (752-765).
* **Close** (``acknowledgeOnClose`` 662-743): to every broker with a session, a
  ShareAcknowledge with epoch -1 carrying what is pending; the broker releases
  what the member still holds.

Emulator choices: the partitions of a ShareFetch are the member's whole
assignment at that leader each time (Kafka's incremental session sends only
the changes; the broker's session holds the same set); a failed call and an
answer lost in a network partition look the same (the host's call fails).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from emulator.broker.share_fetch import (
    CLOSE_EPOCH,
    OPEN_EPOCH,
    ShareFetchRequest,
    ShareFetchResponse,
)
from emulator.broker.share_partition import AckBatch, Acquired
from emulator.modern.errors import Errors

__all__ = ["AckOutcome", "ShareCall", "ShareFetchClient"]

TopicPartition = tuple[str, int]

_SESSION_ERRORS = frozenset({Errors.SHARE_SESSION_NOT_FOUND, Errors.INVALID_SHARE_SESSION_EPOCH})
_MAX_EPOCH = 2**31 - 1


@dataclass(frozen=True)
class ShareCall:
    """One request to one broker (a ShareFetch; without partitions, a ShareAcknowledge)."""

    broker: int
    request: ShareFetchRequest


@dataclass(frozen=True)
class AckOutcome:
    """What became of acknowledgements: sent and answered, or failed before or after."""

    tp: TopicPartition
    batches: tuple[AckBatch, ...]
    error: Errors | None


@dataclass
class _Session:
    epoch: int = OPEN_EPOCH
    inflight: int | None = None  # the corr of the request in flight
    carried: dict[TopicPartition, tuple[AckBatch, ...]] = field(default_factory=dict)
    closing: bool = False
    close_sent: bool = False  # the request in flight is the closing one (epoch -1)


class ShareFetchClient:
    """The share sessions and requests of one member.

    Args:
        group: ``group.id``.
        member_id: the member's id (what the broker keys its session by).
        max_records: ``max.poll.records``: ShareFetch's MaxRecords.
        max_wait_ms: ``fetch.max.wait.ms``: ShareFetch's MaxWaitMs.
        acks_on_new_session_fail: 4.1+: acknowledgements due on an epoch-0
            ShareFetch fail locally (4.0 sends them: the broker refuses).
    """

    def __init__(
        self,
        group: str,
        member_id: str,
        *,
        max_records: int = 500,
        max_wait_ms: float = 500.0,
        acks_on_new_session_fail: bool = True,
    ) -> None:
        self.group = group
        self.member_id = member_id
        self.max_records = max_records
        self.max_wait_ms = max_wait_ms
        self.acks_on_new_session_fail = acks_on_new_session_fail
        self.assigned: tuple[TopicPartition, ...] = ()
        self.fetch_more = False
        self.closing = False
        self.sessions: dict[int, _Session] = {}
        # acknowledgements waiting to go: per partition, with the broker the records came from
        self._acks: dict[TopicPartition, list[AckBatch]] = {}
        self._ack_broker: dict[TopicPartition, int] = {}
        self._separate = False  # a ShareAcknowledge is due (not a piggyback)
        self.outcomes: list[AckOutcome] = []
        """Acknowledgement results since the last :meth:`take_outcomes`."""

    # ----------------------------------------------------------------- inputs

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """The member's partitions from now on (``ShareAssignment``)."""
        self.assigned = tuple(sorted(set(partitions)))

    def want_records(self) -> None:
        """``poll()`` found the buffer empty: ask for records (``fetchMoreRecords``)."""
        self.fetch_more = True

    def acknowledge(
        self,
        acks: Mapping[TopicPartition, Sequence[AckBatch]],
        fetched_from: Mapping[TopicPartition, int],
        *,
        separate: bool,
    ) -> None:
        """Acknowledgements to send.

        Args:
            acks: per partition, the batches.
            fetched_from: the broker each partition's records came from.
            separate: send them in a ShareAcknowledge (``commitSync``, a
                ``poll()`` with records buffered, ``close``) rather than on the
                next ShareFetch.
        """
        for tp, batches in acks.items():
            if not batches:
                continue
            broker = fetched_from.get(tp)
            if broker is None:
                self.outcomes.append(AckOutcome(tp, tuple(batches), Errors.NOT_LEADER_OR_FOLLOWER))
                continue
            if tp in self._ack_broker and self._ack_broker[tp] != broker:
                # records of one partition from two leaders: the older ones cannot go any more
                old = tuple(self._acks.pop(tp, ()))
                self.outcomes.append(AckOutcome(tp, old, Errors.NOT_LEADER_OR_FOLLOWER))
            self._acks.setdefault(tp, []).extend(batches)
            self._ack_broker[tp] = broker
        if separate:
            self._separate = True

    def close(self) -> None:
        """``close()``: from now on each broker with a session gets its closing ShareAcknowledge."""
        self.closing = True
        self.fetch_more = False
        for s in self.sessions.values():
            if s.epoch != OPEN_EPOCH:
                s.closing = True

    # ----------------------------------------------------------------- output

    def calls(
        self, leader_of: Callable[[TopicPartition], int | None], next_corr: Callable[[], int]
    ) -> list[ShareCall]:
        """The requests to send now (at most one per broker with none in flight).

        Args:
            leader_of: each partition's leader as the member's metadata has it.
            next_corr: correlation ids.
        """
        out: list[ShareCall] = []
        by_broker: dict[int, list[TopicPartition]] = {}
        if not self.closing:
            for tp in self.assigned:
                leader = leader_of(tp)
                if leader is not None:
                    by_broker.setdefault(leader, []).append(tp)
        acks_by_broker: dict[int, dict[TopicPartition, tuple[AckBatch, ...]]] = {}
        for tp in sorted(self._acks):
            broker = self._ack_broker[tp]
            if leader_of(tp) != broker and not self.closing:
                self.outcomes.append(
                    AckOutcome(tp, tuple(self._acks.pop(tp)), Errors.NOT_LEADER_OR_FOLLOWER)
                )
                self._ack_broker.pop(tp)
                continue
            acks_by_broker.setdefault(broker, {})[tp] = tuple(self._acks[tp])
        acking = False
        # Acknowledgements first: a ShareAcknowledge keeps this round's fetches out.
        for broker in sorted(acks_by_broker):
            s = self.sessions.setdefault(broker, _Session())
            if s.inflight is not None:
                continue
            if not (
                self._separate or self.closing or broker not in by_broker or not self.fetch_more
            ):
                continue  # they ride on this broker's next ShareFetch
            acks = acks_by_broker.pop(broker)
            self._take(acks)
            if s.epoch == OPEN_EPOCH:  # a ShareAcknowledge cannot open a session
                self._fail(acks, Errors.SHARE_SESSION_NOT_FOUND)
                continue
            epoch = CLOSE_EPOCH if s.closing else s.epoch
            out.append(self._send(broker, s, epoch, (), acks, next_corr()))
            acking = True
        if self.closing:
            for broker in sorted(self.sessions):
                s = self.sessions[broker]
                if s.closing and s.inflight is None and s.epoch != OPEN_EPOCH:
                    out.append(self._send(broker, s, CLOSE_EPOCH, (), {}, next_corr()))
            return out
        self._separate = False
        if acking or not self.fetch_more:
            return out
        for broker in sorted(by_broker):
            s = self.sessions.setdefault(broker, _Session())
            if s.inflight is not None:
                continue
            acks = acks_by_broker.pop(broker, {})
            if acks:
                self._take(acks)
                if s.epoch == OPEN_EPOCH and self.acks_on_new_session_fail:
                    self._fail(acks, Errors.INVALID_SHARE_SESSION_EPOCH)
                    acks = {}
            out.append(self._send(broker, s, s.epoch, tuple(by_broker[broker]), acks, next_corr()))
        return out

    def answered(
        self, broker: int, response: ShareFetchResponse
    ) -> list[tuple[TopicPartition, Acquired]]:
        """The broker's answer: the records acquired (to buffer), in order."""
        s = self.sessions.get(broker)
        if s is None or s.inflight != response.corr:
            return []
        s.inflight = None
        carried, s.carried = s.carried, {}
        if response.error is not Errors.NONE:
            self._fail(carried, response.error)
            s.epoch = OPEN_EPOCH  # session errors and the rest: start over
            if s.closing:
                self.sessions.pop(broker, None)
            return []
        ack_errors = {p.tp: p.ack_error for p in response.partitions}
        for tp, batches in carried.items():
            self.outcomes.append(AckOutcome(tp, batches, ack_errors.get(tp)))
        if s.close_sent:
            self.sessions.pop(broker, None)  # the session is closed at the broker
            return []
        s.epoch = 1 if s.epoch >= _MAX_EPOCH else s.epoch + 1
        if self.closing:
            # A fetch in flight when close() began (or the one that opened the
            # session): the session is open at the broker and must be closed too; the
            # records it acquired are not handed out, the closing request releases them.
            s.closing = True
            return []
        got: list[tuple[TopicPartition, Acquired]] = []
        for p in response.partitions:
            for a in p.acquired:
                got.append((p.tp, a))
        if got:
            self.fetch_more = False
        return got

    def failed(self, broker: int) -> None:
        """The call to ``broker`` failed (no answer, the broker is gone): a new session."""
        s = self.sessions.get(broker)
        if s is None:
            return
        s.inflight = None
        carried, s.carried = s.carried, {}
        self._fail(carried, Errors.NETWORK_EXCEPTION)
        s.epoch = OPEN_EPOCH
        if s.closing:
            self.sessions.pop(broker, None)

    def take_outcomes(self) -> list[AckOutcome]:
        """Acknowledgement results since the last call."""
        out, self.outcomes = self.outcomes, []
        return out

    @property
    def busy(self) -> bool:
        """A request is in flight to some broker."""
        return any(s.inflight is not None for s in self.sessions.values())

    @property
    def closed(self) -> bool:
        """Closing, and every session's closing request has been answered."""
        return self.closing and not any(
            s.epoch != OPEN_EPOCH or s.inflight is not None for s in self.sessions.values()
        )

    @property
    def pending_acks(self) -> bool:
        """Acknowledgements are waiting to go."""
        return bool(self._acks)

    # ------------------------------------------------------------------ helpers

    def _send(
        self,
        broker: int,
        s: _Session,
        epoch: int,
        partitions: tuple[TopicPartition, ...],
        acks: Mapping[TopicPartition, tuple[AckBatch, ...]],
        corr: int,
    ) -> ShareCall:
        s.inflight = corr
        s.carried = dict(acks)
        s.close_sent = epoch == CLOSE_EPOCH
        return ShareCall(
            broker,
            ShareFetchRequest(
                corr,
                self.group,
                self.member_id,
                epoch,
                partitions,
                dict(acks),
                max_records=self.max_records,
                max_wait_ms=self.max_wait_ms if partitions else 0.0,
            ),
        )

    def _take(self, acks: Mapping[TopicPartition, tuple[AckBatch, ...]]) -> None:
        for tp in acks:
            self._acks.pop(tp, None)
            self._ack_broker.pop(tp, None)

    def _fail(self, acks: Mapping[TopicPartition, tuple[AckBatch, ...]], error: Errors) -> None:
        for tp, batches in acks.items():
            self.outcomes.append(AckOutcome(tp, batches, error))
