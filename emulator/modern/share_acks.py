"""The share consumer's acknowledgements (KIP-932 client side), sans-I/O.

``KafkaShareConsumer`` (``share.acknowledgement.mode``, notes/share-facts.md
section 4):

* **implicit** (the default): the next ``poll()`` accepts every record the
  previous ``poll()`` returned that the application did not acknowledge
  itself, and the acknowledgements go with the next ShareFetch to each
  partition's leader (or a ShareAcknowledge); ``commitSync``/``commitAsync``
  send them at once.
* **explicit**: the application acknowledges each record (ACCEPT, RELEASE,
  REJECT); a ``poll()`` with records still unacknowledged fails
  (IllegalStateException). Here that is refused with a ``ValueError``.
* ``close()`` sends what is pending; the records not acknowledged are released
  by closing the share sessions (the broker's ``releaseAcquiredRecords``).

:class:`AckTracker` keeps, per partition, the records the application got and
what it said of them, and turns them into ``AcknowledgementBatches``
(contiguous offsets of one type). Emulator choice: an application's share of
RELEASEs and REJECTs is a knob of the scenario (the application is the
emulator's), applied here record by record.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from emulator.broker.share_partition import AckBatch, AckType

__all__ = ["AckTracker"]

TopicPartition = tuple[str, int]


@dataclass
class AckTracker:
    """One share consumer's acknowledgement state.

    Args:
        implicit: ``share.acknowledgement.mode = implicit``.
    """

    implicit: bool = True
    _delivered: dict[TopicPartition, dict[int, AckType | None]] = field(default_factory=dict)
    _pending: dict[TopicPartition, dict[int, AckType]] = field(default_factory=dict)

    def delivered(self, tp: TopicPartition, offsets: Iterable[int]) -> None:
        """``poll()`` returned these records of ``tp`` to the application."""
        got = self._delivered.setdefault(tp, {})
        for o in offsets:
            got[o] = None

    def acknowledge(self, tp: TopicPartition, offset: int, ack: AckType) -> None:
        """``acknowledge(record, type)`` by the application.

        Raises:
            ValueError: the record was not delivered by the last ``poll()``, or
                ``ack`` is not ACCEPT, RELEASE or REJECT.
        """
        if ack not in (AckType.ACCEPT, AckType.RELEASE, AckType.REJECT):
            raise ValueError(f"an application acknowledges ACCEPT, RELEASE or REJECT, not {ack}")
        got = self._delivered.get(tp)
        if got is None or offset not in got:
            raise ValueError(f"record {tp[0]}-{tp[1]}@{offset} was not delivered by the last poll")
        got[offset] = ack

    def on_poll(self) -> None:
        """The application calls ``poll()`` again: implicit mode accepts what it did not
        acknowledge; explicit mode requires every record acknowledged."""
        for tp, got in self._delivered.items():
            for o, ack in got.items():
                if ack is None:
                    if not self.implicit:
                        raise ValueError(
                            f"record {tp[0]}-{tp[1]}@{o} was not acknowledged before poll() "
                            "(share.acknowledgement.mode = explicit)"
                        )
                    ack = AckType.ACCEPT
                self._pending.setdefault(tp, {})[o] = ack
        self._delivered.clear()

    def commit(self) -> None:
        """``commitSync``/``commitAsync``: the acknowledgements so far become pending now
        (implicit: the delivered records are accepted)."""
        self.on_poll()

    def take(
        self, tps: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, tuple[AckBatch, ...]]:
        """The pending acknowledgements (of ``tps``, default all) as batches, removed
        from the tracker: what the next ShareFetch or ShareAcknowledge carries."""
        keys = sorted(self._pending) if tps is None else sorted(set(tps) & set(self._pending))
        out: dict[TopicPartition, tuple[AckBatch, ...]] = {}
        for tp in keys:
            out[tp] = _batches(self._pending.pop(tp))
        return out

    def pending(self) -> Mapping[TopicPartition, Mapping[int, AckType]]:
        return self._pending

    def unacknowledged(self) -> dict[TopicPartition, list[int]]:
        """Delivered records nobody acknowledged yet (a ``close()`` leaves them to the
        session's release)."""
        return {
            tp: sorted(o for o, a in got.items() if a is None)
            for tp, got in self._delivered.items()
            if any(a is None for a in got.values())
        }

    def close(self) -> dict[TopicPartition, tuple[AckBatch, ...]]:
        """``close()``: what was acknowledged is sent; records not acknowledged are left
        to the share sessions' release, in both modes."""
        for tp, got in self._delivered.items():
            for o, ack in got.items():
                if ack is not None:
                    self._pending.setdefault(tp, {})[o] = ack
        self._delivered.clear()
        return self.take()


def _batches(acks: Mapping[int, AckType]) -> tuple[AckBatch, ...]:
    """Contiguous offsets of one type as one batch."""
    out: list[AckBatch] = []
    for o in sorted(acks):
        t = acks[o]
        if out and out[-1].last + 1 == o and out[-1].ack is t:
            out[-1] = AckBatch(out[-1].first, o, t)
        else:
            out.append(AckBatch(o, o, t))
    return tuple(out)
