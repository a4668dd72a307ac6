"""The 0.8 consumer subscribed by filter, driven step by step (sans-I/O, fake clock).

``createMessageStreamsByFilter`` (K@0.8.2.2 ``ZookeeperConsumerConnector.scala``
156-162, 908-976; ``ZookeeperTopicEventWatcher.scala``; issue-19 facts A4):
the start sequence, ``handleTopicEvent`` with its direct ``syncedRebalance``,
the watcher's lock and one waiting event, the new session, blacklists and
``exclude.internal.topics``. A small scripted ZooKeeper (:class:`Script`)
answers each request from a topic table; it holds requests when a test wants
to look at the machine mid-step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pytest

from emulator.events import EventKind
from emulator.legacy.config import LegacyConsumerConfig
from emulator.legacy.consumer import ConsumerState, LegacyConsumer
from emulator.legacy.messages import (
    ClaimOwnership,
    ClaimResult,
    CloseSession,
    CommitOffsets,
    Emit,
    FetchOffsets,
    GroupView,
    IoResult,
    Output,
    ReadAssignmentContext,
    ReadCluster,
    ReadRebalanceContext,
    ReadTopics,
    RebalanceContext,
    RegisterConsumer,
    ReinitializeWildcard,
    ReleaseOwnership,
    Request,
    Sleep,
    WatchBrokers,
    WatchTopics,
)
from emulator.legacy.wildcard import (
    BLACK_LIST_PATTERN,
    WHITE_LIST_PATTERN,
    WildcardSubscription,
    topic_event,
)
from emulator.topic_regex import BLACKLIST, WHITELIST, FilterKind, TopicFilter

CID = "g_h-1-0000000a"


def wild(raw: str, kind: FilterKind = WHITELIST, streams: int = 1) -> WildcardSubscription:
    """A subscription by filter."""
    return WildcardSubscription(TopicFilter(raw, kind), streams)


class Script:
    """A scripted ZooKeeper for one consumer: answers requests from :attr:`topics`.

    Args:
        consumer: the machine.
        topics: topic -> partition count (the children of ``/brokers/topics``).
    """

    def __init__(self, consumer: LegacyConsumer, topics: Mapping[str, int]) -> None:
        self.c = consumer
        self.topics = dict(topics)
        self.now = 0.0
        self.pending: list[Request] = []
        self.requests: list[Request] = []
        self.events: list[Emit] = []
        self.hold: Callable[[Request], bool] = lambda r: False
        self.registered: RegisterConsumer | None = None

    def feed(self, outs: list[Output]) -> None:
        for o in outs:
            if isinstance(o, Emit):
                self.events.append(o)
            elif isinstance(o, Sleep):
                continue
            elif isinstance(o, Request):
                self.requests.append(o)
                self.pending.append(o)

    def _mine(self) -> dict[str, int]:
        w = self.c.wildcard
        if w is None:
            return dict(self.c.subscription)
        return {t: w.streams for t in w.select(self.topics, self.c.config.exclude_internal_topics)}

    def value(self, req: Request) -> object:
        if isinstance(req, ReadTopics):
            return tuple(self.topics)
        if isinstance(req, RegisterConsumer):
            self.registered = req
            return None
        if isinstance(req, ReinitializeWildcard):
            return req.subscription.select(self.topics, req.exclude_internal)
        if isinstance(req, ReadCluster):
            return [1]
        if isinstance(req, ReadRebalanceContext):
            return RebalanceContext(self._mine(), (1,))
        if isinstance(req, ReadAssignmentContext):
            parts = {t: tuple(range(self.topics[t])) for t in req.topics if t in self.topics}
            return GroupView({CID: self._mine()}, parts)
        if isinstance(req, FetchOffsets):
            return dict.fromkeys(req.partitions)
        if isinstance(req, ClaimOwnership):
            return ClaimResult(tuple(req.decision), {})
        if isinstance(req, CommitOffsets):
            return list(req.offsets)
        if isinstance(req, ReleaseOwnership | WatchTopics | WatchBrokers | CloseSession):
            return None
        raise AssertionError(f"unexpected {req!r}")

    def step(self) -> bool:
        """Answer the first request not held; False when none is left to answer."""
        for i, req in enumerate(self.pending):
            if not self.hold(req):
                del self.pending[i]
                self.feed(self.c.complete(self.now, req.rid, IoResult(self.value(req))))
                return True
        return False

    def run(self) -> None:
        """Answer requests (and let back-offs pass) until nothing more can move.

        Time moves only to a deadline within 10 s (a back-off), never to the
        auto-committer's next run (60 s).
        """
        for _ in range(10_000):
            if self.step():
                continue
            deadline = self.c.next_deadline()
            if deadline is None or self.pending or deadline > self.now + 10_000:
                return
            self.now = max(self.now, deadline)
            self.feed(self.c.poll(self.now))
        raise AssertionError("the script did not settle")

    def fire(self, source: str = "topics") -> None:
        self.feed(self.c.watch_fired(self.now, source))

    def kinds(self, kind: EventKind) -> list[Emit]:
        return [e for e in self.events if e.kind is kind]

    def request_types(self) -> list[str]:
        return [type(r).__name__ for r in self.requests]

    def mark(self) -> int:
        """A position in the request and event logs (see :meth:`since`)."""
        self._mark = (len(self.requests), len(self.events))
        return self._mark[0]

    def since(self) -> tuple[list[str], list[Emit]]:
        """Request type names and events after the last :meth:`mark`."""
        r, e = self._mark
        return [type(x).__name__ for x in self.requests[r:]], self.events[e:]


def started(
    sub: WildcardSubscription | dict[str, int],
    topics: Mapping[str, int],
    **props: object,
) -> Script:
    """A consumer started against ``topics`` and settled."""
    c = LegacyConsumer(
        member="c-0",
        consumer_id=CID,
        group="g",
        subscription=sub,
        config=LegacyConsumerConfig.from_kafka(props),
    )
    s = Script(c, topics)
    s.feed(c.start(0.0))
    s.run()
    return s


def started_rebalances(s: Script) -> list[str]:
    return [str(e.fields["reason"]) for e in s.kinds(EventKind.REBALANCE_STARTED)]


# --------------------------------------------------------------------------- the pure parts


def test_wildcard_registration_is_the_regex_with_its_streams_and_pattern() -> None:
    w = wild(' "a, b.*" ', streams=3)
    assert w.topic_count_map() == {"a|b.*": 3}  # TopicFilter's rewrite, TopicCount.scala 139
    assert w.pattern == WHITE_LIST_PATTERN
    assert wild("x", BLACKLIST).pattern == BLACK_LIST_PATTERN
    with pytest.raises(ValueError):
        wild("x", streams=0)


def test_topic_event_finds_added_and_deleted_topics_of_the_filter_only() -> None:
    w = wild("ev-.*")
    change = topic_event(("ev-1", "ev-2"), ["other", "ev-2", "ev-3"], w, True)
    assert change.topics == ("ev-2", "ev-3")
    assert (change.added, change.deleted) == (("ev-3",), ("ev-1",))
    assert change.changed
    assert change.describe() == "added=ev-3 deleted=ev-1"
    same = topic_event(("ev-2",), ["ev-2", "unrelated"], w, True)
    assert not same.changed and same.describe() == "unchanged"


def test_blacklist_allows_what_it_does_not_match_and_internal_topics_follow_the_key() -> None:
    b = wild("internal-.*", BLACKLIST)
    names = ["a", "internal-x", "__consumer_offsets", "b"]
    assert b.select(names, True) == ("a", "b")
    assert b.select(names, False) == ("a", "__consumer_offsets", "b")
    assert wild(".*").select(names, True) == ("a", "internal-x", "b")


def test_exclude_internal_topics_is_read_from_the_kafka_keys() -> None:
    assert LegacyConsumerConfig().exclude_internal_topics is True
    assert (
        LegacyConsumerConfig.from_kafka(
            {"exclude.internal.topics": "false"}
        ).exclude_internal_topics
        is False
    )
    with pytest.raises(ValueError, match=r"exclude\.internal\.topics"):
        LegacyConsumerConfig.from_kafka({"exclude.internal.topics": "maybe"})


# --------------------------------------------------------------------------- the start


def test_start_bootstraps_registers_reinitializes_rebalances_then_creates_the_watcher() -> None:
    s = started(wild("ev-.*", streams=2), {"ev-1": 2, "other": 3, "ev-2": 1})
    kinds = s.request_types()
    # WildcardStreamsHandler (908-945): bootstrap read, register, reinitializeConsumer,
    # syncedRebalance; then ZookeeperTopicEventWatcher (32-44) and its bootstrap call.
    assert kinds[:4] == ["ReadTopics", "RegisterConsumer", "ReinitializeWildcard", "ReadCluster"]
    assert kinds[-2:] == ["WatchTopics", "ReadTopics"]
    assert kinds.index("ClaimOwnership") < kinds.index("WatchTopics")
    first, last = s.requests[0], s.requests[-1]
    assert isinstance(first, ReadTopics) and first.parent_may_not_exist
    assert isinstance(last, ReadTopics) and not last.parent_may_not_exist
    reg = s.registered
    assert reg is not None
    assert (dict(reg.subscription), reg.pattern) == ({"ev-.*": 2}, WHITE_LIST_PATTERN)
    # Only the matching topics are assigned, two threads each.
    assert sorted(s.c.owned) == [("ev-1", 0), ("ev-1", 1), ("ev-2", 0)]
    assert set(s.c.owned.values()) <= {f"{CID}-0", f"{CID}-1"}
    assert s.c.wildcard_topics == ("ev-1", "ev-2")
    assert list(s.c.stream_topics) == ["ev-1", "ev-2"]
    resolved = s.kinds(EventKind.TOPIC_PATTERN_RESOLVED)
    assert [(e.fields["reason"], e.fields["topics"]) for e in resolved] == [
        ("start", "ev-1,ev-2"),
        ("topic_event", "ev-1,ev-2"),  # the watcher's bootstrap call: nothing new
    ]
    assert resolved[0].fields["pattern"] == "ev-.*"
    assert started_rebalances(s) == ["start"]
    assert s.c.state is ConsumerState.STABLE


def test_a_topic_created_during_the_start_is_found_by_the_watchers_bootstrap_call() -> None:
    c = LegacyConsumer(
        member="c-0",
        consumer_id=CID,
        group="g",
        subscription=wild("ev-.*"),
        config=LegacyConsumerConfig(),
    )
    s = Script(c, {"ev-1": 1})
    s.hold = lambda r: isinstance(r, WatchTopics)
    s.feed(c.start(0.0))
    s.run()
    s.topics["ev-9"] = 2  # created after the start's rebalance, before the watcher read
    s.hold = lambda r: False
    s.run()
    assert started_rebalances(s) == ["start", "topic_event"]
    assert sorted(c.owned) == [("ev-1", 0), ("ev-9", 0), ("ev-9", 1)]


def test_a_start_that_gives_up_never_creates_the_topic_watcher() -> None:
    c = LegacyConsumer(
        member="c-0",
        consumer_id=CID,
        group="g",
        subscription=wild("ev-.*"),
        config=LegacyConsumerConfig(rebalance_max_retries=2, rebalance_backoff_ms=10),
    )
    s = Script(c, {"ev-1": 1})
    orig = s.value

    def broken(req: Request) -> object:
        if isinstance(req, ClaimOwnership):
            return ClaimResult((), {("ev-1", 0): "someone-else-0"})
        return orig(req)

    s.value = broken  # type: ignore[method-assign]
    s.feed(c.start(0.0))
    s.run()
    assert c.state is ConsumerState.GAVE_UP
    assert "WatchTopics" not in s.request_types()  # syncedRebalance threw before line 945
    s.mark()
    s.topics["ev-2"] = 1
    s.fire()
    assert s.since() == ([], [])  # nobody listens to /brokers/topics


# --------------------------------------------------------------------------- topic events


def test_a_non_matching_topic_costs_one_read_and_no_rebalance() -> None:
    s = started(wild("ev-.*"), {"ev-1": 2})
    s.mark()
    s.topics["unrelated"] = 4
    s.fire()
    s.run()
    requests, events = s.since()
    assert requests == ["ReadTopics"]
    assert [e.kind for e in events] == [EventKind.TOPIC_PATTERN_RESOLVED]
    assert events[0].fields["detail"] == "whitelist unchanged"


def test_a_matching_topic_triggers_a_direct_rebalance_that_takes_its_partitions() -> None:
    s = started(wild("ev-.*"), {"ev-1": 1})
    s.mark()
    s.topics["ev-2"] = 3
    s.fire()
    s.run()
    requests, events = s.since()
    assert requests[:3] == ["ReadTopics", "ReinitializeWildcard", "ReadCluster"]
    triggered = [e for e in events if e.kind is EventKind.REBALANCE_TRIGGERED]
    assert [(e.fields["reason"], e.fields["detail"]) for e in triggered] == [
        ("topic_event", "added=ev-2")
    ]
    assert started_rebalances(s) == ["start", "topic_event"]
    assert sorted(s.c.owned) == [("ev-1", 0), ("ev-2", 0), ("ev-2", 1), ("ev-2", 2)]
    assert list(s.c.stream_topics) == ["ev-1", "ev-2"]


def test_a_deleted_topic_is_released_and_dropped_but_keeps_its_streams() -> None:
    s = started(wild("ev-.*"), {"ev-1": 1, "ev-2": 2})
    s.c.consumed(("ev-2", 1), 17)  # consumed since the last commit
    s.mark()
    del s.topics["ev-2"]
    s.fire()
    s.run()
    _, events = s.since()
    resolved = [e for e in events if e.kind is EventKind.TOPIC_PATTERN_RESOLVED]
    assert resolved[0].fields["detail"] == "whitelist deleted=ev-2"
    # closeFetchers commits the deleted topic's offsets before the release (A6).
    commits = [e for e in events if e.kind is EventKind.OFFSETS_COMMITTED]
    assert [
        (e.fields["topic"], e.fields["partition"], e.fields["offset_end"]) for e in commits
    ] == [("ev-2", 1, 17)]
    released = sorted(
        (e.fields["topic"], e.fields["partition"])
        for e in events
        if e.kind is EventKind.OWNERSHIP_RELEASED
    )
    assert released == [("ev-1", 0), ("ev-2", 0), ("ev-2", 1)]
    assert sorted(s.c.owned) == [("ev-1", 0)]
    assert s.c.wildcard_topics == ("ev-1",)
    # topicStreamsMap only grows: the deleted topic keeps its streams (TODO at 957-961).
    assert list(s.c.stream_topics) == ["ev-1", "ev-2"]


def test_blacklist_consumer_rebalances_only_for_topics_it_does_not_match() -> None:
    s = started(wild("internal-.*", BLACKLIST), {"a": 1, "internal-1": 1})
    assert sorted(s.c.owned) == [("a", 0)]
    s.topics["internal-2"] = 1
    s.fire()
    s.run()
    assert started_rebalances(s) == ["start"]
    s.topics["b"] = 1
    s.fire()
    s.run()
    assert started_rebalances(s) == ["start", "topic_event"]
    assert sorted(s.c.owned) == [("a", 0), ("b", 0)]


def test_the_offsets_topic_counts_for_a_blacklist_only_when_internal_topics_are_not_excluded() -> (
    None
):
    kept = started(wild("x", BLACKLIST), {"a": 1}, **{"exclude.internal.topics": "false"})
    kept.topics["__consumer_offsets"] = 2
    kept.fire()
    kept.run()
    assert started_rebalances(kept) == ["start", "topic_event"]
    assert ("__consumer_offsets", 1) in kept.c.owned
    excluded = started(wild("x", BLACKLIST), {"a": 1})
    excluded.topics["__consumer_offsets"] = 2
    excluded.fire()
    excluded.run()
    assert started_rebalances(excluded) == ["start"]


def test_topic_events_are_not_coalesced_with_the_executors_and_run_one_after_another() -> None:
    s = started(wild("ev-.*"), {"ev-1": 1})
    s.hold = lambda r: isinstance(r, ReadCluster)
    s.fire("ids")  # the executor takes it: its rebalance holds the lock
    s.run()
    s.fire("ids")
    s.fire("ids")  # coalesced into one more executor rebalance
    s.topics["ev-2"] = 1
    s.fire()  # the watcher: its own read, its own rebalance, queued for the lock
    s.run()
    s.hold = lambda r: False
    s.run()
    assert started_rebalances(s) == ["start", "ids", "topic_event", "ids"]
    assert sorted(s.c.owned) == [("ev-1", 0), ("ev-2", 0)]


def test_events_during_a_topic_rebalance_wait_and_at_most_one_is_kept() -> None:
    s = started(wild("ev-.*"), {"ev-1": 1})
    s.hold = lambda r: isinstance(r, ClaimOwnership)
    s.topics["ev-2"] = 1
    s.fire()
    s.run()  # the first event's rebalance waits for its claim
    s.mark()
    for n in (3, 4, 5):
        s.topics[f"ev-{n}"] = 1
        s.fire()  # the watcher's lock is held: nothing is read yet
    assert s.since()[0] == []
    s.hold = lambda r: False
    s.run()
    requests, _ = s.since()
    # One more handleChildChange (zkclient's one armed watch), which sees all three.
    assert requests.count("ReadTopics") == 1
    assert started_rebalances(s) == ["start", "topic_event", "topic_event"]
    assert len(s.c.owned) == 5


def test_a_static_consumer_ignores_the_topics_source() -> None:
    s = started({"t": 1}, {"t": 2})
    assert "WatchTopics" not in s.request_types()
    s.mark()
    s.fire()
    assert s.since() == ([], [])


# --------------------------------------------------------------------------- sessions


def test_a_new_session_registers_the_filter_again_then_resubscribes_the_watcher() -> None:
    s = started(wild("ev-.*", BLACKLIST), {"a": 1})
    s.mark()
    s.feed(s.c.new_session(s.now))
    s.run()
    requests, _ = s.since()
    assert requests[0] == "RegisterConsumer"
    reg = s.registered
    assert reg is not None and reg.pattern == BLACK_LIST_PATTERN
    # handleNewSession's syncedRebalance first, then the watcher's re-subscription.
    assert requests[-1] == "WatchTopics"
    last = s.requests[-1]
    assert isinstance(last, WatchTopics) and last.resubscribe
    assert requests.index("ClaimOwnership") < requests.index("WatchTopics")
    # zkclient's fireAllEvents then delivers a topics event: only the read.
    s.mark()
    s.fire()
    s.run()
    assert s.since()[0] == ["ReadTopics"]


def test_a_new_session_waits_for_the_topic_event_that_holds_the_event_thread() -> None:
    s = started(wild("ev-.*"), {"ev-1": 1})
    s.hold = lambda r: isinstance(r, ClaimOwnership)
    s.topics["ev-2"] = 1
    s.fire()
    s.run()
    s.mark()
    s.feed(s.c.new_session(s.now))
    requests, events = s.since()
    assert requests == [] and events == []  # handleNewSession is queued behind the event
    s.hold = lambda r: False
    s.run()
    _, events = s.since()
    order = [
        (e.kind, e.fields.get("reason"))
        for e in events
        if e.kind in (EventKind.REBALANCE_COMPLETED, EventKind.REBALANCE_TRIGGERED)
    ]
    # The topic event's rebalance ends first; only then handleNewSession runs.
    assert order == [
        (EventKind.REBALANCE_COMPLETED, None),
        (EventKind.REBALANCE_TRIGGERED, "new_session"),
        (EventKind.REBALANCE_COMPLETED, None),
    ]
    assert started_rebalances(s) == ["start", "topic_event", "new_session"]
