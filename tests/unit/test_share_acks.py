"""The share consumer's acknowledgement modes (KafkaShareConsumer's
``share.acknowledgement.mode``) as batches for the next ShareFetch."""

from __future__ import annotations

import pytest

from emulator.broker.share_partition import AckBatch, AckType
from emulator.modern.share_acks import AckTracker

TP, TQ = ("t", 0), ("t", 1)


class TestImplicit:
    def test_the_next_poll_accepts_what_the_previous_one_returned(self) -> None:
        a = AckTracker()
        a.delivered(TP, range(0, 5))
        assert a.take() == {}  # nothing until the next poll
        a.on_poll()
        assert a.take() == {TP: (AckBatch(0, 4, AckType.ACCEPT),)}
        assert a.take() == {}

    def test_what_the_application_said_itself_is_kept(self) -> None:
        a = AckTracker()
        a.delivered(TP, range(0, 5))
        a.acknowledge(TP, 2, AckType.RELEASE)
        a.acknowledge(TP, 3, AckType.REJECT)
        a.on_poll()
        assert a.take([TP]) == {
            TP: (
                AckBatch(0, 1, AckType.ACCEPT),
                AckBatch(2, 2, AckType.RELEASE),
                AckBatch(3, 3, AckType.REJECT),
                AckBatch(4, 4, AckType.ACCEPT),
            )
        }

    def test_take_is_per_leader(self) -> None:
        a = AckTracker()
        a.delivered(TP, [0])
        a.delivered(TQ, [7])
        a.commit()
        assert a.take([TQ]) == {TQ: (AckBatch(7, 7, AckType.ACCEPT),)}
        assert list(a.pending()) == [TP]


class TestExplicit:
    def test_poll_with_records_unacknowledged_fails(self) -> None:
        a = AckTracker(implicit=False)
        a.delivered(TP, [0, 1])
        a.acknowledge(TP, 0, AckType.ACCEPT)
        with pytest.raises(ValueError, match="not acknowledged before poll"):
            a.on_poll()

    def test_only_delivered_records_and_application_types(self) -> None:
        a = AckTracker(implicit=False)
        a.delivered(TP, [0])
        with pytest.raises(ValueError, match="not delivered"):
            a.acknowledge(TP, 1, AckType.ACCEPT)
        with pytest.raises(ValueError, match=r"RENEW|4"):
            a.acknowledge(TP, 0, AckType.RENEW)


class TestClose:
    def test_close_sends_what_was_said_and_leaves_the_rest_to_the_release(self) -> None:
        a = AckTracker()
        a.delivered(TP, range(0, 4))
        a.acknowledge(TP, 1, AckType.ACCEPT)
        assert a.unacknowledged() == {TP: [0, 2, 3]}
        assert a.close() == {TP: (AckBatch(1, 1, AckType.ACCEPT),)}
        assert a.unacknowledged() == {} and a.take() == {}
