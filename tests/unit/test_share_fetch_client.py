"""A share consumer's ShareFetch/ShareAcknowledge traffic (``emulator.host.share_fetch_client``).

Held to ``ShareConsumeRequestManager`` and ``ShareSessionHandler`` as read into
``notes/share-client-facts.md`` §2, against the broker core
(:class:`emulator.broker.share_fetch.ShareFetchBroker`) where an answer is needed.
"""

from __future__ import annotations

import itertools

from emulator.broker.share_fetch import ShareFetchBroker, ShareFetchResponse
from emulator.broker.share_partition import AckBatch, AckType, SharePartitionConfig
from emulator.host.share_fetch_client import AckOutcome, ShareFetchClient
from emulator.modern.errors import Errors

TP0, TP1 = ("t", 0), ("t", 1)
LEADERS = {TP0: 1, TP1: 2}


def client() -> ShareFetchClient:
    c = ShareFetchClient("g", "m", max_records=10, max_wait_ms=500.0)
    c.assign([TP0, TP1])
    return c


def broker(hw: int = 5) -> ShareFetchBroker:
    return ShareFetchBroker(SharePartitionConfig(), lambda tp: hw, lambda tp: 0, "earliest")


corr = itertools.count(1).__next__


def test_nothing_is_fetched_before_the_application_asks() -> None:
    c = client()
    assert c.calls(LEADERS.get, corr) == []
    c.want_records()
    calls = c.calls(LEADERS.get, corr)
    assert [(x.broker, x.request.partitions, x.request.session_epoch) for x in calls] == [
        (1, (TP0,), 0),
        (2, (TP1,), 0),
    ]
    assert all(x.request.max_wait_ms == 500.0 and x.request.max_records == 10 for x in calls)
    assert c.calls(LEADERS.get, corr) == []  # one in flight per broker


def test_an_answer_with_records_stops_the_asking_one_without_fetches_again_at_once() -> None:
    c = client()
    c.want_records()
    b = broker()
    calls = c.calls(LEADERS.get, corr)
    first = b.fetch(0.0, calls[0].request)
    assert first is not None
    got = c.answered(1, first)
    assert [(tp, a.first, a.last, a.delivery_count) for tp, a in got] == [(TP0, 0, 4, 1)]
    assert not c.fetch_more
    # broker 2's empty answer: the session moves on, no new fetch (records came from broker 1)
    assert c.answered(2, ShareFetchResponse(calls[1].request.corr, "m")) == []
    assert c.sessions[2].epoch == 1 and c.calls(LEADERS.get, corr) == []
    # ... but without any records the long poll goes again as soon as it is answered
    c2 = client()
    c2.want_records()
    (x0, _x1) = c2.calls(LEADERS.get, corr)
    c2.answered(1, ShareFetchResponse(x0.request.corr, "m"))
    (again,) = c2.calls(LEADERS.get, corr)
    assert again.broker == 1 and again.request.session_epoch == 1


def test_acknowledgements_ride_on_the_next_fetch_or_go_alone_and_block_fetching() -> None:
    c = client()
    c.want_records()
    (x0, x1) = c.calls(LEADERS.get, corr)
    c.answered(1, ShareFetchResponse(x0.request.corr, "m"))
    c.answered(2, ShareFetchResponse(x1.request.corr, "m"))
    accept = (AckBatch(0, 4, AckType.ACCEPT),)
    # poll() with an empty buffer: they ride on the ShareFetch to their broker
    c.acknowledge({TP0: accept}, {TP0: 1}, separate=False)
    c.want_records()
    calls = c.calls(LEADERS.get, corr)
    assert [(x.broker, dict(x.request.acks)) for x in calls] == [(1, {TP0: accept}), (2, {})]
    for x in calls:
        c.answered(x.broker, ShareFetchResponse(x.request.corr, "m"))
    assert c.take_outcomes() == [AckOutcome(TP0, accept, None)]
    # commitSync or a poll() with records buffered: a ShareAcknowledge, and no fetch this round
    c.acknowledge({TP1: accept}, {TP1: 2}, separate=True)
    (ack,) = c.calls(LEADERS.get, corr)
    assert (
        ack.broker == 2 and ack.request.partitions == () and dict(ack.request.acks) == {TP1: accept}
    )
    assert ack.request.max_wait_ms == 0.0


def test_acknowledgements_never_open_a_session() -> None:
    c = client()
    accept = (AckBatch(0, 0, AckType.ACCEPT),)
    c.acknowledge({TP0: accept}, {TP0: 1}, separate=True)
    assert c.calls(LEADERS.get, corr) == []
    assert c.take_outcomes() == [AckOutcome(TP0, accept, Errors.SHARE_SESSION_NOT_FOUND)]
    # on a new session's fetch (epoch 0) they fail locally (4.1+)
    c.acknowledge({TP0: accept}, {TP0: 1}, separate=False)
    c.want_records()
    calls = c.calls(LEADERS.get, corr)
    assert all(not x.request.acks for x in calls)
    assert c.take_outcomes() == [AckOutcome(TP0, accept, Errors.INVALID_SHARE_SESSION_EPOCH)]


def test_session_errors_and_failed_calls_start_a_new_session() -> None:
    c = client()
    c.want_records()
    (x0, _x1) = c.calls(LEADERS.get, corr)
    c.answered(1, ShareFetchResponse(x0.request.corr, "m"))
    assert c.sessions[1].epoch == 1
    (y0,) = c.calls(LEADERS.get, corr)
    c.answered(1, ShareFetchResponse(y0.request.corr, "m", Errors.INVALID_SHARE_SESSION_EPOCH))
    assert c.sessions[1].epoch == 0
    c.failed(2)
    assert c.sessions[2].epoch == 0 and c.sessions[2].inflight is None


def test_acknowledgements_for_a_partition_whose_leader_moved_fail() -> None:
    c = client()
    c.want_records()
    for x in c.calls(LEADERS.get, corr):
        c.answered(x.broker, ShareFetchResponse(x.request.corr, "m"))
    accept = (AckBatch(3, 3, AckType.ACCEPT),)
    c.acknowledge({TP0: accept}, {TP0: 1}, separate=True)
    moved = {TP0: 3, TP1: 2}
    calls = c.calls(moved.get, corr)  # no answer had records: the fetches go on
    assert all(not x.request.acks for x in calls)
    assert [(x.broker, x.request.partitions) for x in calls] == [(2, (TP1,)), (3, (TP0,))]
    assert c.take_outcomes() == [AckOutcome(TP0, accept, Errors.NOT_LEADER_OR_FOLLOWER)]


def test_close_sends_a_closing_acknowledge_to_every_broker_with_a_session() -> None:
    c = client()
    c.want_records()
    b1 = broker()
    x0, x1 = c.calls(LEADERS.get, corr)
    got = c.answered(1, b1.fetch(0.0, x0.request))  # type: ignore[arg-type]
    c.answered(2, ShareFetchResponse(x1.request.corr, "m"))
    assert got
    c.acknowledge({TP0: (AckBatch(0, 1, AckType.ACCEPT),)}, {TP0: 1}, separate=True)
    c.close()
    calls = c.calls(LEADERS.get, corr)
    assert sorted((x.broker, x.request.session_epoch) for x in calls) == [(1, -1), (2, -1)]
    by = {x.broker: x for x in calls}
    assert dict(by[1].request.acks) == {TP0: (AckBatch(0, 1, AckType.ACCEPT),)}
    answer = b1.fetch(1.0, by[1].request)
    assert answer is not None and answer.error is Errors.NONE
    c.answered(1, answer)
    c.answered(2, ShareFetchResponse(by[2].request.corr, "m"))
    assert c.closed
    # the broker released what the member held and did not accept: offsets 2..4
    sp = b1.partitions[("g", TP0)]
    assert [sp.owner(o) for o in range(5)] == [None] * 5


def test_a_fetch_in_flight_at_close_is_followed_by_the_closing_request() -> None:
    """The session its answer leaves open at the broker is closed too, and what it
    acquired is not handed out: the closing request releases it (it had hung the
    member's leave, and its records waited for their locks)."""
    c = client()
    c.want_records()
    b1 = broker()
    x0, x1 = c.calls(LEADERS.get, corr)  # both open a session (epoch 0)
    c.close()
    assert c.calls(LEADERS.get, corr) == []  # one in flight per broker
    late = b1.fetch(0.0, x0.request)
    assert late is not None and late.partitions[0].acquired  # acquired 0..4
    assert c.answered(1, late) == []
    c.answered(2, ShareFetchResponse(x1.request.corr, "m"))
    assert not c.closed
    calls = c.calls(LEADERS.get, corr)
    assert sorted((x.broker, x.request.session_epoch, x.request.partitions) for x in calls) == [
        (1, -1, ()),
        (2, -1, ()),
    ]
    by = {x.broker: x for x in calls}
    c.answered(1, b1.fetch(1.0, by[1].request))  # type: ignore[arg-type]
    c.answered(2, ShareFetchResponse(by[2].request.corr, "m"))
    assert c.closed and c.calls(LEADERS.get, corr) == []
    sp = b1.partitions[("g", TP0)]
    assert [sp.owner(o) for o in range(5)] == [None] * 5
