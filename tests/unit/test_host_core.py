"""The consumer host's core on a fake clock, without Ray: scheduling, fetch sessions, faults.

:class:`emulator.host.core.HostCore` is driven here the way the actor drives
it (``tick(now_ms)``, then the answers of the calls it asked for), with a
fake transport that records every call, a fake event sink, fake timers and
member machines that do only what a test tells them (:class:`StubMachine`).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from emulator.broker.messages import SessionAnswer, SessionFetch
from emulator.clock import FakeClock
from emulator.events import EventKind
from emulator.host.core import HostConfig, HostCore, MemberSpec
from emulator.host.faults import HostFaults
from emulator.host.fetch_client import FetchCall
from emulator.host.legacy_shell import LegacyShell
from emulator.host.metadata import LeaderMap
from emulator.host.modern_shell import ModernShell
from emulator.legacy.config import LegacyConsumerConfig
from emulator.legacy.consumer import LegacyConsumer
from emulator.legacy.messages import Request
from emulator.modern.messages import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    GroupRequest,
    GroupResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    MemberOutput,
    RequestMetadata,
    StartFetching,
    StopFetching,
    TopicPartition,
)

GROUP = "g"
TP: TopicPartition = ("t", 0)
LEADER = 1
RESET = "latest"


# ---------------------------------------------------------------- fakes


class _State(enum.StrEnum):
    STABLE = "stable"


@dataclass
class _Stats:
    rebalances: int = 0
    joins: int = 0


@dataclass(frozen=True)
class _Config:
    request_timeout_ms: int = 30000


class StubMachine:
    """A member machine that returns what the test queued and records every call.

    ``queue(method, outputs)`` makes the next call of ``method`` return ``outputs``;
    ``deadline`` is what :meth:`next_deadline` says.
    """

    def __init__(self, request_timeout_ms: int = 30000) -> None:
        self.member_id = "m-1"
        self.coordinator: int | None = None
        self.owned: frozenset[TopicPartition] = frozenset()
        self.state = _State.STABLE
        self.stats = _Stats()
        self.config = _Config(request_timeout_ms)
        self.closed = False
        self.app_committing = False
        self.deadline: float | None = None
        self.calls: list[tuple[str, tuple[object, ...]]] = []
        self._queued: dict[str, list[list[MemberOutput]]] = {}

    def queue(self, method: str, outputs: list[MemberOutput]) -> None:
        self._queued.setdefault(method, []).append(outputs)

    def _call(self, method: str, *args: object) -> list[MemberOutput]:
        self.calls.append((method, args))
        q = self._queued.get(method)
        return q.pop(0) if q else []

    def called(self, method: str) -> list[tuple[object, ...]]:
        return [args for m, args in self.calls if m == method]

    def start(self, now_ms: float) -> list[MemberOutput]:
        return self._call("start", now_ms)

    def on_response(self, now_ms: float, response: GroupResponse) -> list[MemberOutput]:
        return self._call("on_response", now_ms, response)

    def request_failed(self, now_ms: float, corr: int) -> list[MemberOutput]:
        return self._call("request_failed", now_ms, corr)

    def poll(self, now_ms: float) -> list[MemberOutput]:
        self.deadline = None
        return self._call("poll", now_ms)

    def next_deadline(self) -> float | None:
        return self.deadline

    def app_polled(self, now_ms: float) -> list[MemberOutput]:
        return self._call("app_polled", now_ms)

    def app_idle(self, now_ms: float) -> list[MemberOutput] | None:
        self.calls.append(("app_idle", (now_ms,)))
        return None

    def app_processing(self, now_ms: float) -> list[MemberOutput]:
        return self._call("app_processing", now_ms)

    def consumed(self, tp: TopicPartition, next_offset: int) -> None:
        self.calls.append(("consumed", (tp, next_offset)))

    def app_commit(self, now_ms: float, *, sync: bool) -> list[MemberOutput]:
        return self._call("app_commit", now_ms, sync)

    def subscribe(
        self, now_ms: float, topics: object, topic_pattern: str | None = None
    ) -> list[MemberOutput]:
        if topic_pattern is None:
            return self._call("subscribe", now_ms, topics)
        return self._call("subscribe", now_ms, topics, topic_pattern)

    def update_metadata(self, now_ms: float, partitions_per_topic: object) -> list[MemberOutput]:
        return self._call("update_metadata", now_ms, partitions_per_topic)

    def metadata_failed(self, now_ms: float) -> list[MemberOutput]:
        return self._call("metadata_failed", now_ms)

    def request_metadata_update(self, now_ms: float) -> list[MemberOutput]:
        return self._call("request_metadata_update", now_ms)

    def close(self, now_ms: float) -> list[MemberOutput]:
        return self._call("close", now_ms)


class FakeTransport:
    """Records the host's broker calls; leaders from a dict."""

    def __init__(self, leaders: dict[TopicPartition, int]) -> None:
        self.leaders = leaders
        self.fetch_calls: list[FetchCall] = []
        self.group_calls: list[tuple[int, list[GroupRequest]]] = []
        self.not_leaders: list[TopicPartition] = []
        self.refreshes = 0
        self.metadata_calls: list[tuple[list[str], bool]] = []

    def leader(self, tp: TopicPartition) -> int | None:
        return self.leaders.get(tp)

    def not_leader(self, tp: TopicPartition) -> None:
        self.not_leaders.append(tp)

    def refresh_leaders(self) -> None:
        self.refreshes += 1

    def send_fetch(self, call: FetchCall) -> None:
        self.fetch_calls.append(call)

    def send_groups(self, broker: int, requests: list[GroupRequest]) -> None:
        self.group_calls.append((broker, list(requests)))

    def request_metadata(self, topics: list[str], allow_auto_create: bool) -> None:
        self.metadata_calls.append((list(topics), allow_auto_create))


@dataclass
class FakeEvents:
    events: list[tuple[EventKind, dict[str, object]]] = field(default_factory=list)
    flushes: int = 0

    def emit(self, kind: EventKind, **fields: object) -> None:
        self.events.append((kind, fields))

    def flush(self) -> None:
        self.flushes += 1

    def of(self, kind: EventKind) -> list[dict[str, object]]:
        return [f for k, f in self.events if k is kind]


class FakeTimers:
    """Timers the test fires by hand (the actor's run on asyncio)."""

    def __init__(self) -> None:
        self.pending: dict[tuple[str, str], tuple[float, Callable[[], None]]] = {}

    def after(self, key: tuple[str, str], delay_ms: float, fn: Callable[[], None]) -> None:
        self.pending[key] = (delay_ms, fn)

    def fire(self, key: tuple[str, str]) -> None:
        _delay, fn = self.pending.pop(key)
        fn()


class Host:
    """A host core with fakes all round, on a fake clock."""

    def __init__(self, protocol: str = "classic-eager", cost_ms: float = 1.0) -> None:
        self.clock = FakeClock()
        self.transport = FakeTransport({TP: LEADER})
        self.events = FakeEvents()
        self.timers = FakeTimers()
        config = HostConfig(
            protocol=protocol,
            group=GROUP,
            kafka={},
            processing_ms_per_message=cost_ms,
            max_fetch=100,
            max_chunks=2,
            fetch_max_wait_ms=500.0,
            auto_offset_reset=RESET,
        )
        self.core = HostCore(
            config,
            self.transport,
            self.events,
            self.clock.now_ms,
            session="host-0",
            partitions_per_topic={"t": 1},
        )
        self.faults = HostFaults(self.core, self.timers)

    def add(
        self, machine: StubMachine, name: str = "c-0", bootstrap: int = 0, index: int = 0
    ) -> ModernShell:
        spec = MemberSpec(name, name, {"t": 1}, index=index, bootstrap=bootstrap)
        self.core.expect([spec])
        self.core.attach_modern(spec, machine, [0, 1, 2])
        member = self.core.members[name]
        assert isinstance(member, ModernShell)
        return member

    def at(self, t: float) -> None:
        """Move the clock to ``t`` and run one tick there."""
        self.clock.advance(t - self.clock.now_ms())
        self.core.tick(t)


def fetching(offset: int = 5) -> StubMachine:
    """A machine that starts fetching ``TP`` from ``offset``."""
    m = StubMachine()
    m.queue("start", [StartFetching({TP: offset})])
    return m


def processed(events: FakeEvents) -> list[tuple[int, int, object]]:
    return [
        (int(str(f["offset_start"])), int(str(f["offset_end"])), f["duration_ms"])
        for f in events.of(EventKind.PROCESSED)
    ]


# ---------------------------------------------------------- scheduling


def test_a_member_is_polled_only_once_its_deadline_is_reached() -> None:
    h = Host()
    m = StubMachine()
    m.deadline = 100.0
    h.add(m)
    h.at(50.0)
    assert m.called("poll") == []
    h.at(100.0)
    assert m.called("poll") == [(100.0,)]
    h.at(150.0)  # the stub has no deadline after a poll
    assert m.called("poll") == [(100.0,)]


def test_the_idle_application_is_in_poll_at_every_tick_and_the_log_flushes_every_tick() -> None:
    # The due-index visits an idle member only when something is due; the
    # app_idle of the last tick it skipped is replayed before its machine hears
    # anything else, which leaves the machine as a visit at every tick would.
    h = Host()
    m = StubMachine()
    m.queue("start", [FindCoordinatorRequest(11, GROUP)])
    h.add(m)
    for t in (20.0, 40.0, 60.0):
        h.at(t)
    assert h.events.flushes == 3
    assert [a for meth, a in m.calls if meth == "app_idle"] == [(20.0,)]
    ((broker, reqs),) = h.transport.group_calls
    h.clock.advance(5.0)
    h.core.group_answered(broker, reqs, [FindCoordinatorResponse(11, node_id=2)])
    h.at(80.0)
    assert m.calls[1:] == [
        ("app_idle", (20.0,)),
        ("app_idle", (60.0,)),
        ("on_response", (65.0, FindCoordinatorResponse(11, node_id=2))),
        ("app_idle", (80.0,)),
    ]


def test_group_requests_go_in_one_call_per_broker_with_one_call_in_flight() -> None:
    h = Host()
    a, b, c = StubMachine(), StubMachine(), StubMachine()
    a.queue("start", [FindCoordinatorRequest(11, GROUP)])
    b.queue("start", [FindCoordinatorRequest(21, GROUP)])
    c.queue("start", [FindCoordinatorRequest(31, GROUP)])
    h.add(a, "c-0", bootstrap=0, index=0)
    h.add(b, "c-1", bootstrap=0, index=1)
    h.add(c, "c-2", bootstrap=1, index=2)
    assert h.transport.group_calls == []  # nothing leaves before the tick
    h.at(20.0)
    calls = dict(h.transport.group_calls)
    assert sorted(calls) == [0, 1]
    assert [r.corr for r in calls[0]] == [11, 21]
    assert [r.corr for r in calls[1]] == [31]
    # Answers pending: no second call to a broker while one is in flight.
    h.at(40.0)
    assert len(h.transport.group_calls) == 2
    h.core.group_answered(
        0,
        calls[0],
        [FindCoordinatorResponse(11, node_id=2), FindCoordinatorResponse(21, node_id=2)],
    )
    assert [args[1] for args in a.called("on_response")] == [FindCoordinatorResponse(11, node_id=2)]
    member = h.core.members["c-0"]
    assert isinstance(member, ModernShell)
    assert member.coordinator == 2
    # Still waiting for broker 1: the next tick collects its answers (an empty batch).
    h.at(60.0)
    assert h.transport.group_calls[2:] == []
    h.core.group_answered(1, calls[1], [])
    h.at(80.0)
    assert h.transport.group_calls[2:] == [(1, [])]


def test_a_failed_group_call_fails_the_request_and_moves_the_bootstrap() -> None:
    h = Host()
    m = StubMachine()
    m.queue("start", [FindCoordinatorRequest(11, GROUP)])
    member = h.add(m, bootstrap=0)
    h.at(20.0)
    ((broker, reqs),) = h.transport.group_calls
    h.clock.advance(5.0)
    h.core.group_answered(broker, reqs, None)
    assert m.called("request_failed") == [(25.0, 11)]
    assert member.bootstrap == 1


def test_a_metadata_request_is_one_call_and_its_answer_reaches_the_member() -> None:
    h = Host()
    m = StubMachine()
    m.queue("start", [RequestMetadata(("t",), True)])
    h.add(m)
    h.core.grow("u", 2)  # a created topic: the host's view, not a call
    assert h.transport.metadata_calls == []
    h.at(0.0)
    assert h.transport.metadata_calls == [(["t"], True)]
    h.core.metadata_answered({("t", 0): 1, ("t", 1): 2, ("u", 0): 1})
    assert m.called("update_metadata") == [(0.0, {"t": 2, "u": 1})]
    assert h.core.partitions_per_topic == {"t": 2, "u": 1}  # what a later member starts with
    m.queue("poll", [RequestMetadata(None)])  # a pattern subscriber: all topics
    m.deadline = 100.0
    h.at(100.0)
    assert h.transport.metadata_calls[-1] == ([], False)
    h.core.metadata_answered(None)  # no broker answered
    assert m.called("metadata_failed") == [(100.0,)]


def test_members_asking_during_a_call_wait_for_the_next_and_a_paused_one_at_its_wake() -> None:
    machines = {name: StubMachine() for name in ("c-0", "c-1", "c-2")}
    h = Host()
    for i, (name, m) in enumerate(machines.items()):
        m.queue("start", [RequestMetadata((name,), False)] if name != "c-2" else [])
        h.add(m, name, index=i)
    machines["c-2"].queue("poll", [RequestMetadata(("c-2",), True)])
    machines["c-2"].deadline = 10.0
    h.at(0.0)
    assert h.transport.metadata_calls == [(["c-0", "c-1"], False)]  # one call for both
    assert h.faults.pause("c-1", 400.0)
    h.at(10.0)
    assert len(h.transport.metadata_calls) == 1  # one call at a time: c-2 waits
    h.core.metadata_answered({("t", 0): 1})
    assert machines["c-0"].called("update_metadata") == [(10.0, {"t": 1})]
    assert machines["c-1"].called("update_metadata") == []  # paused: held
    h.at(20.0)
    assert h.transport.metadata_calls[-1] == (["c-2"], True)  # the next call
    h.clock.advance(390.0)
    h.timers.fire(("c-1", "pause"))
    h.at(410.0)
    assert machines["c-1"].called("update_metadata") == [(410.0, {"t": 1})]


# ------------------------------------------------------------- due-index


def _visits(h: Host, log: list[tuple[str, float]], *names: str) -> None:
    """Record every visit of the host's tick to these members (all: none named) in ``log``."""
    for member in h.core.members.values():
        if names and member.name not in names:
            continue
        inner = member.poll

        def poll(
            now_ms: float, name: str = member.name, inner: Callable[[float], None] = inner
        ) -> None:
            log.append((name, now_ms))
            inner(now_ms)

        member.poll = poll  # type: ignore[method-assign]


def test_a_tick_visits_only_the_members_with_something_due() -> None:
    h = Host()
    a, b = StubMachine(), StubMachine()
    a.deadline = 100.0
    h.add(a, "c-0", index=0)
    h.add(b, "c-1", index=1)
    log: list[tuple[str, float]] = []
    _visits(h, log)
    for t in range(20, 220, 20):
        h.at(float(t))
    # Both at their first tick; c-0 at its deadline, and at the next tick to
    # read its next deadline (its machine was called); c-1 never again.
    assert log == [("c-0", 20.0), ("c-1", 20.0), ("c-0", 100.0), ("c-0", 120.0)]
    assert a.called("poll") == [(100.0,)]
    assert h.events.flushes == 10
    # An answer to c-1 gets it visited at the next tick, not before.
    h.clock.advance(5.0)
    h.core.group_answered(0, [], [])
    member = h.core.members["c-1"]
    assert isinstance(member, ModernShell)
    member.on_response(HeartbeatResponse(7))
    assert log[4:] == []
    h.at(220.0)
    assert log[4:] == [("c-1", 220.0)]


def test_members_due_at_one_tick_are_visited_in_the_members_order() -> None:
    h = Host()
    machines = {name: StubMachine() for name in ("c-0", "c-1", "c-2")}
    for i, (name, m) in enumerate(machines.items()):
        h.add(m, name, index=i)
    h.at(20.0)
    log: list[tuple[str, float]] = []
    _visits(h, log)
    machines["c-2"].deadline = 100.0  # read at its next visit: touch it
    machines["c-0"].deadline = 100.0
    for name in ("c-2", "c-1", "c-0"):  # touched in the reverse order
        member = h.core.members[name]
        assert isinstance(member, ModernShell)
        member.on_response(HeartbeatResponse(7))
    h.at(40.0)
    assert [n for n, _ in log] == ["c-0", "c-1", "c-2"]
    # A member that left and came back goes last, as in the members' dict.
    h.core.retire("c-0", "left")
    h.add(StubMachine(), "c-0", index=0)
    _visits(h, log, "c-0")
    for name in ("c-1", "c-0", "c-2"):
        member = h.core.members[name]
        assert isinstance(member, ModernShell)
        member.on_response(HeartbeatResponse(8))
    del log[:]
    h.at(60.0)
    assert [n for n, _ in log] == ["c-1", "c-2", "c-0"]
    assert list(h.core.members) == ["c-1", "c-2", "c-0"]


def test_a_batch_in_hand_is_visited_at_its_end_and_not_before() -> None:
    h = Host(cost_ms=10.0)
    h.add(fetching(0))
    h.at(20.0)
    log: list[tuple[str, float]] = []
    _visits(h, log)
    h.core.fetch_answered(LEADER, [SessionAnswer(1, 0, 10)])
    for t in range(40, 200, 20):
        h.at(float(t))
    # 40: the batch is taken (it runs to 140), 60: the deadline is read again
    # (the machine heard of the batch), 140: it ends.
    assert log == [("c-0", 40.0), ("c-0", 60.0), ("c-0", 140.0), ("c-0", 160.0)]
    assert processed(h.events) == [(0, 10, 100.0)]


# ---------------------------------------------------- fetch-session client


def test_the_first_fetch_opens_a_session_at_the_leader() -> None:
    h = Host()
    h.add(fetching(5))
    h.at(20.0)
    assert h.transport.fetch_calls == [
        FetchCall(LEADER, "host-0", True, [SessionFetch(1, "t", 0, 5, RESET, 100)], [], 500.0)
    ]
    h.at(40.0)  # parked at the broker (its long poll): nothing more to send
    assert len(h.transport.fetch_calls) == 1


def test_an_answer_is_queued_processed_and_the_position_fetched_again() -> None:
    h = Host()
    m = fetching(5)
    h.add(m)
    h.at(20.0)
    h.core.fetch_answered(LEADER, [SessionAnswer(1, 5, 15)])
    h.at(40.0)  # poll() hands the batch out: 10 messages at 1 ms each
    assert ("consumed", (TP, 15)) in m.calls
    assert h.transport.fetch_calls[1] == FetchCall(
        LEADER, "host-0", False, [SessionFetch(2, "t", 0, 15, RESET, 100)], [], 500.0
    )
    h.at(49.0)
    assert processed(h.events) == []
    h.at(50.0)
    assert processed(h.events) == [(5, 15, 10.0)]
    assert h.core.progress() == {TP: 15}


def test_a_stopped_partition_is_withdrawn_and_its_late_answer_dropped() -> None:
    h = Host()
    m = fetching(5)
    m.deadline = 30.0
    m.queue("poll", [StopFetching((TP,))])
    h.add(m)
    h.at(20.0)  # slot 1 outstanding at the leader
    h.at(30.0)  # the call is still in flight: the withdrawal waits for it
    assert len(h.transport.fetch_calls) == 1
    h.core.fetch_answered(LEADER, [SessionAnswer(1, 5, 15)])
    h.at(40.0)
    assert h.transport.fetch_calls[1] == FetchCall(LEADER, "host-0", False, [], [1], 500.0)
    h.core.fetch_answered(LEADER, [])
    h.at(100.0)
    assert processed(h.events) == []
    assert len(h.transport.fetch_calls) == 2


def test_not_leader_asks_for_metadata_and_fetches_the_same_offset_again() -> None:
    h = Host()
    h.add(fetching(5))
    h.at(20.0)
    h.core.fetch_answered(LEADER, [SessionAnswer(1, -1, -1)])
    assert h.transport.not_leaders == [TP]
    h.transport.leaders[TP] = 2  # the refresh found the new leader
    h.at(40.0)
    assert h.transport.fetch_calls[1] == FetchCall(
        2, "host-0", True, [SessionFetch(2, "t", 0, 5, RESET, 100)], [], 500.0
    )


def test_a_fetch_error_or_an_unknown_leader_tells_the_member_its_metadata_may_be_stale() -> None:
    """K@3.9 ``FetchCollector.handleInitializeErrors`` (NOT_LEADER_OR_FOLLOWER,
    UNKNOWN_TOPIC_OR_PARTITION) and ``AbstractFetch.prepareFetchRequests`` (no leader):
    ``Metadata.requestUpdate``; a stale answer (a stopped position) does not."""
    h = Host()
    m = fetching(5)
    h.add(m)
    h.at(20.0)
    m.queue("request_metadata_update", [RequestMetadata(("t",), True)])
    h.core.fetch_answered(LEADER, [SessionAnswer(1, -3, -3)])  # UNKNOWN_TOPIC_OR_PARTITION
    assert m.called("request_metadata_update") == [(20.0,)]
    h.transport.leaders.clear()  # the leader map lost it: no known leader
    h.at(40.0)
    assert h.transport.metadata_calls == [(["t"], True)]  # the machine's request went
    assert m.called("request_metadata_update") == [(20.0,), (40.0,)]  # and no leader
    assert h.transport.fetch_calls[1:] == []
    member = h.core.members["c-0"]
    member.fetched(TP, -1, -1, epoch=99)  # an answer for an old position
    assert len(m.called("request_metadata_update")) == 2


def test_a_failed_call_loses_the_session_and_refetches_in_a_new_one() -> None:
    h = Host()
    h.add(fetching(5))
    h.at(20.0)
    h.core.fetch_failed(LEADER)
    h.at(40.0)
    assert h.transport.fetch_calls[1] == FetchCall(
        LEADER, "host-0", True, [SessionFetch(2, "t", 0, 5, RESET, 100)], [], 500.0
    )


def test_a_partition_without_a_known_leader_is_not_fetched() -> None:
    h = Host()
    h.transport.leaders.clear()
    h.add(fetching(5))
    h.at(20.0)
    h.at(40.0)
    assert h.transport.fetch_calls == []
    assert h.transport.refreshes == 2  # a refresh is asked for every tick
    h.transport.leaders[TP] = LEADER
    h.at(60.0)
    assert [c.adds for c in h.transport.fetch_calls] == [[SessionFetch(1, "t", 0, 5, RESET, 100)]]


def test_a_retired_member_withdraws_its_fetches() -> None:
    h = Host()
    h.add(fetching(5))
    h.at(20.0)
    h.core.fetch_answered(LEADER, [])  # (no data yet: slot 1 stays parked)
    assert h.core.retire("c-0", "left") is not None
    assert h.core.gone == {"c-0": "left"}
    h.at(40.0)
    assert h.transport.fetch_calls[1] == FetchCall(LEADER, "host-0", False, [], [1], 500.0)


# ------------------------------------------------------------------ faults


def _fault_events(h: Host, kind: EventKind) -> list[dict[str, object]]:
    return [{**f, "detail": json.loads(str(f["detail"]))} for f in h.events.of(kind)]


def test_a_pause_stops_heartbeats_and_fetches_until_the_wake() -> None:
    h = Host()
    m = fetching(5)
    m.queue("start", [])
    member = h.add(m)
    m.deadline = 100.0  # the next heartbeat
    assert h.faults.pause("c-0", 500.0)
    assert not h.faults.pause("c-0", 500.0)  # already paused
    assert _fault_events(h, EventKind.FAULT_INJECTED)[0]["detail"] == {"duration_ms": 500.0}
    for t in (20.0, 100.0, 300.0, 499.0):
        h.at(t)
    assert m.called("poll") == []
    assert h.transport.fetch_calls == []
    # An answer that arrives meanwhile is held until the wake.
    h.core.group_answered(0, [], [HeartbeatResponse(7)])
    member.pending.add(7)
    h.clock.advance(1.0)
    h.timers.fire(("c-0", "pause"))
    cleared = _fault_events(h, EventKind.FAULT_CLEARED)
    assert [(c["reason"], c["duration_ms"]) for c in cleared] == [("pause", 500.0)]
    h.at(500.0)
    assert m.called("poll") == [(500.0,)]
    assert len(h.transport.fetch_calls) == 1


def test_a_pause_holds_answers_and_hands_them_over_after_the_wake() -> None:
    h = Host()
    m = StubMachine()
    m.queue("start", [FindCoordinatorRequest(11, GROUP)])
    h.add(m)
    h.at(20.0)
    ((broker, reqs),) = h.transport.group_calls
    h.faults.pause("c-0", 100.0)
    h.core.group_answered(broker, reqs, [FindCoordinatorResponse(11, node_id=2)])
    assert m.called("on_response") == []
    h.clock.advance(100.0)
    h.timers.fire(("c-0", "pause"))
    assert m.called("on_response") == [(120.0, FindCoordinatorResponse(11, node_id=2))]


def test_a_cut_to_the_coordinator_fails_requests_after_request_timeout() -> None:
    h = Host()
    m = StubMachine(request_timeout_ms=1000)
    m.queue("start", [FindCoordinatorRequest(11, GROUP)])
    member = h.add(m)
    h.at(20.0)
    ((broker, reqs),) = h.transport.group_calls
    h.core.group_answered(broker, reqs, [FindCoordinatorResponse(11, node_id=2)])
    m.coordinator = 2
    assert h.faults.partition(["c-0"], "coordinator", 5000.0)
    injected = _fault_events(h, EventKind.FAULT_INJECTED)[-1]
    assert injected["detail"] == {"target": "coordinator", "duration_ms": 5000.0, "broker": 2}
    m.deadline = 100.0
    m.queue("poll", [HeartbeatRequest(12, GROUP)])
    h.at(100.0)
    h.at(120.0)
    assert [b for b, _ in h.transport.group_calls] == [0]  # the heartbeat never left
    h.at(1099.0)
    assert m.called("request_failed") == []
    m.deadline = 1200.0  # (a stub's deadline is read after its next call)
    m.queue("poll", [HeartbeatRequest(13, GROUP)])
    h.at(1100.0)
    assert m.called("request_failed") == [(1100.0, 12)]
    h.timers.fire(("c-0", "partition:coordinator"))
    assert not member.cut_coordinator
    h.at(1200.0)
    assert h.transport.group_calls[-1] == (2, [HeartbeatRequest(13, GROUP)])
    cleared = _fault_events(h, EventKind.FAULT_CLEARED)[-1]
    assert cleared["detail"] == {"target": "coordinator"}


def test_a_cut_from_the_brokers_stops_fetching_until_healed() -> None:
    h = Host()
    h.add(fetching(5))
    assert h.faults.partition(["c-0"], "brokers", 1000.0)
    h.at(20.0)
    assert h.transport.fetch_calls == []
    h.timers.fire(("c-0", "partition:brokers"))
    h.at(40.0)
    assert len(h.transport.fetch_calls) == 1


def test_slow_changes_the_processing_cost_and_heal_restores_it() -> None:
    h = Host(cost_ms=1.0)
    h.add(fetching(0))
    assert h.faults.slow("c-0", 1000.0, 5.0)
    h.at(20.0)
    h.core.fetch_answered(LEADER, [SessionAnswer(1, 0, 10)])
    h.at(40.0)  # 10 messages at 5 ms: done at 90
    h.at(89.0)
    assert processed(h.events) == []
    h.at(90.0)
    assert processed(h.events) == [(0, 10, 50.0)]
    h.timers.fire(("c-0", "slow"))
    assert [f["reason"] for f in h.events.of(EventKind.FAULT_CLEARED)] == ["slow"]
    h.core.fetch_answered(LEADER, [SessionAnswer(2, 10, 20)])
    h.at(100.0)
    h.at(110.0)  # back to 1 ms a message
    assert processed(h.events)[1:] == [(10, 20, 10.0)]


def test_a_fault_on_a_member_that_left_is_not_healed_on_its_successor() -> None:
    h = Host()
    h.add(StubMachine())
    h.faults.slow("c-0", 1000.0, 5.0)
    h.core.retire("c-0", "left")
    successor = h.add(StubMachine())
    h.timers.fire(("c-0", "slow"))
    assert h.events.of(EventKind.FAULT_CLEARED) == []
    assert successor.cost_override is None


@pytest.mark.parametrize(
    ("protocol", "target", "note"),
    [
        ("classic-eager", "zookeeper", "a modern consumer does not talk to ZooKeeper"),
        ("consumer", "zookeeper", "a modern consumer does not talk to ZooKeeper"),
        ("zookeeper", "coordinator", "the 0.8 consumer has no group coordinator"),
    ],
)
def test_a_partition_that_does_not_apply_is_recorded_as_skipped(
    protocol: str, target: str, note: str
) -> None:
    h = Host(protocol)
    if protocol == "zookeeper":
        _legacy(h)
    else:
        h.add(StubMachine())
    assert not h.faults.partition(["c-0"], target, 1000.0)
    (ev,) = _fault_events(h, EventKind.FAULT_INJECTED)
    assert ev["detail"] == {"target": target, "duration_ms": 1000.0, "skipped": note}
    assert h.timers.pending == {}


class FakeLink:
    def __init__(self) -> None:
        self.modes: list[bool] = []

    def blackhole(self, on: bool) -> None:
        self.modes.append(on)


def _legacy(h: Host, link: FakeLink | None = None) -> tuple[LegacyShell, list[Request]]:
    performed: list[Request] = []
    machine = LegacyConsumer(
        member="c-0",
        consumer_id="g_h-1-9a86b603",
        group=GROUP,
        subscription={"t": 1},
        config=LegacyConsumerConfig(),
    )
    shell = LegacyShell("c-0", machine, h.core.emit, h.clock.now_ms, performed.append, link)
    h.core.adopt(shell)
    shell.apply(machine.start(h.clock.now_ms()))
    return shell, performed


def test_a_legacy_pause_cuts_the_session_and_the_wake_restores_it() -> None:
    h = Host("zookeeper")
    link = FakeLink()
    shell, performed = _legacy(h, link)
    assert performed  # start() registers in ZooKeeper through ``perform``
    assert h.faults.pause("c-0", 500.0)
    assert link.modes == [True]
    assert _fault_events(h, EventKind.FAULT_INJECTED)[0]["detail"] == {
        "duration_ms": 500.0,
        "zookeeper": "blackholed",
    }
    # A partition from ZooKeeper also holds the session: the wake must not restore it.
    assert h.faults.partition(["c-0"], "zookeeper", 1000.0)
    h.clock.advance(500.0)
    h.timers.fire(("c-0", "pause"))
    assert link.modes == [True, True]
    assert not shell.paused
    h.timers.fire(("c-0", "partition:zookeeper"))
    assert link.modes == [True, True, False]


def test_a_subscription_change_restarts_a_legacy_consumer_and_tells_a_modern_one() -> None:
    legacy = Host("zookeeper")
    _legacy(legacy)
    legacy.core.expect([MemberSpec("c-0", "g_h-1-9a86b603", {"t": 2})])
    done = legacy.faults.subscribe(["c-0", "c-9"], ["u", "t"])
    assert not done.ok  # c-9 is not here
    assert done.restarts == [MemberSpec("c-0", "g_h-1-9a86b603", {"t": 2, "u": 2})]
    modern = Host()
    m = StubMachine()
    modern.add(m)
    done = modern.faults.subscribe(["c-0"], ["u", "t"])
    assert done.ok and done.restarts == []
    assert m.called("subscribe") == [(0.0, ["t", "u"])]
    modern.faults.subscribe(["c-0"], ["t"], "t.*")  # a classic member takes the pattern
    assert m.called("subscribe")[-1] == (0.0, ["t"], "t.*")


def test_a_crash_abandons_the_batch_in_hand_and_retires_the_member() -> None:
    h = Host(cost_ms=2.0)
    h.add(fetching(0))
    h.at(20.0)
    h.core.fetch_answered(LEADER, [SessionAnswer(1, 0, 10)])
    h.at(40.0)  # the batch runs 40..60
    h.clock.advance(5.0)  # 45: two messages done
    crashed = h.core.crash("c-0")
    assert crashed is not None and not crashed.alive
    assert processed(h.events) == [(0, 2, 4.0)]
    (abandoned,) = h.events.of(EventKind.RECORDS_ABANDONED)
    assert (abandoned["offset_start"], abandoned["offset_end"]) == (2, 10)
    assert h.events.of(EventKind.CONSUMER_CRASHED)[0]["member"] == "c-0"


# ------------------------------------------------------------ leader map


def test_an_unknown_leader_makes_the_map_stale_and_the_fallback_is_read_live() -> None:
    fallback: dict[TopicPartition, int] = {}
    lm = LeaderMap({TP: 1, ("t", 1): -1}, fallback, backoff_s=0.2)
    assert lm.leader(TP) == 1 and not lm.stale
    assert lm.leader(("t", 1)) is None and lm.stale  # -1: no leader
    fallback[("t", 2)] = 3  # a partition added since, its leader put there by the owner
    assert lm.by_leader([TP, ("t", 2), ("t", 1)]) == ({1: [TP], 3: [("t", 2)]}, [("t", 1)])


def test_refreshes_are_rate_limited_and_ask_failed_brokers_last() -> None:
    lm = LeaderMap({}, {}, backoff_s=0.2)
    assert not lm.refresh_due(10.0)  # nothing stale
    lm.failed(1)
    assert lm.refresh_due(10.0)
    assert lm.begin_refresh(10.0, [2, 1, 0]) == [2, 0, 1]  # round robin from 1; 1 is dead
    assert not lm.refresh_due(10.1)
    assert lm.refresh_due(10.25)
    lm.answered({TP: 2})
    assert not lm.stale and lm.leader(TP) == 2 and lm.refreshes == 1
    lm.revived(1)
    assert lm.begin_refresh(11.0, [0, 1, 2]) == [2, 0, 1]


def test_the_first_refresh_is_due_at_once_on_a_clock_that_starts_at_zero() -> None:
    lm = LeaderMap({}, {}, backoff_s=0.2)
    lm.failed(1)
    assert lm.refresh_due(0.0)  # a virtual clock: no back-off before any refresh


# --------------------------------------------------------- real machines


@pytest.mark.parametrize("protocol", ["classic-eager", "classic-cooperative", "consumer"])
def test_a_real_member_looks_its_coordinator_up_at_its_bootstrap_broker(protocol: str) -> None:
    h = Host(protocol)
    spec = MemberSpec("c-3", "c-3", {"t": 1}, index=3, bootstrap=2)
    h.core.expect([spec])
    h.core.add_modern(spec, [2, 0, 1])
    member = h.core.members["c-3"]
    assert isinstance(member, ModernShell)
    assert member.broker_ids == (0, 1, 2)
    h.at(20.0)
    ((broker, reqs),) = h.transport.group_calls
    assert broker == 2
    assert [type(r) for r in reqs] == [FindCoordinatorRequest]
    # Correlation ids start in the member's own range (index 3, first start).
    assert reqs[0].corr > 4_000_000_000
    h.core.group_answered(2, reqs, [FindCoordinatorResponse(reqs[0].corr, node_id=1)])
    assert member.coordinator == 1
    h.at(40.0)
    assert h.transport.group_calls[-1][0] == 1  # the join (or heartbeat) goes to it
