"""The classic Java consumer when topics come and go, on a fake clock (issue 19, part 4).

Classic members (:class:`~emulator.modern.classic_member.ClassicMember`) and a
:class:`~emulator.modern.classic_coordinator.ClassicGroupCoordinator` on the
in-test network of ``test_classic_group`` (:class:`Cluster` answers each
metadata request with the topics it holds at that moment, a round trip
later), and one member alone where the test plays the coordinator (the commit
before a rebalance). What is followed, K@3.9 ``clients/.../consumer/internals/``
unless named otherwise:

* ``ConsumerCoordinator.maybeUpdateSubscriptionMetadata`` (436-448) and
  ``updatePatternSubscription`` (281-287): a pattern subscriber matches
  (``Pattern.matcher(t).matches()``) the topics of its metadata at each new
  metadata version;
* ``rejoinNeededOrPending`` (874-896): "cached metadata has changed" (the
  leader's snapshot) and "subscription has changed" (the joined subscription);
* ``Metadata.timeToNextUpdate`` / ``requestUpdate`` (K@3.9 ``Metadata.java``
  178-216): a refresh every ``metadata.max.age.ms`` after the last answer,
  sooner when requested;
* ``onJoinPrepare`` (711-806) and ``onJoinComplete`` (341-434): which
  partitions are revoked, and the commit before a rebalance (KAFKA-16235);
* ``AbstractPartitionAssignor.assign``: a topic without metadata gets no partitions.
"""

from __future__ import annotations

import pytest

from emulator.events import EventKind as K
from emulator.modern.classic_member import ClassicMember, MemberState
from emulator.modern.config import ClassicConsumerConfig
from emulator.modern.errors import Errors
from emulator.modern.messages import (
    Assignment,
    Emit,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    GroupRequest,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupMember,
    JoinGroupRequest,
    JoinGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    RequestMetadata,
    StopFetching,
    Subscription,
    SyncGroupRequest,
    SyncGroupResponse,
    TopicPartition,
)
from emulator.scenario import parse_scenario
from tests.group_context import GroupTestContext
from tests.unit.test_classic_group import Net, Node

AGE = 10_000  # metadata.max.age.ms in most tests here
NO_COMMIT = {"enable.auto.commit": False}


class Cluster(Net):
    """:class:`Net` with topics that come and go and members subscribed by names or pattern.

    A metadata request is answered with :attr:`partitions` as they are when
    the answer is made (a round trip after the request).
    """

    def __init__(self, topics: dict[str, int], **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.partitions = dict(topics)

    def join(
        self,
        name: str,
        *,
        topics: tuple[str, ...] = (),
        pattern: str | None = None,
        **props: object,
    ) -> ClassicMember:
        props.setdefault("metadata.max.age.ms", AGE)
        cfg = ClassicConsumerConfig.from_kafka({"client.id": name, **props})
        member = ClassicMember(
            member=name,
            group="g",
            topics=topics,
            config=cfg,
            partitions_per_topic=self.partitions,
            topic_pattern=pattern,
        )
        self.nodes[name] = Node(name, member)
        self._member_out(name, member.start(self.now))
        return member

    def resolved(self, who: str | None = None, since: float = 0.0) -> list[tuple[float, str, str]]:
        """(time, member, topics) of each TOPIC_PATTERN_RESOLVED."""
        return [
            (r.t, r.who, str(r.what.fields["topics"]))  # type: ignore[union-attr]
            for r in self.events(K.TOPIC_PATTERN_RESOLVED, who, since)
        ]

    def triggers(self, since: float = 0.0) -> set[tuple[str, str]]:
        """(member, reason) of each REBALANCE_TRIGGERED since ``since``."""
        return {
            (r.who, str(r.what.fields["reason"]))  # type: ignore[union-attr]
            for r in self.events(K.REBALANCE_TRIGGERED, since=since)
        }

    def owned(self) -> dict[str, set[TopicPartition]]:
        return {n: set(node.member.owned) for n, node in self.nodes.items()}

    def all_owned(self) -> set[TopicPartition]:
        return {tp for parts in self.owned().values() for tp in parts}

    def next_refresh(self, name: str) -> float:
        """When ``name``'s cache next expires: ``lastSuccessfulRefreshMs + metadata.max.age.ms``."""
        md = self.m(name).metadata
        return md.last_success_ms + md.max_age_ms


def parts(topic: str, n: int) -> set[TopicPartition]:
    return {(topic, p) for p in range(n)}


def stable_pattern_group(*, protocol: str = "range", **props: object) -> Cluster:
    """Three pattern subscribers of ``events-.*`` on events-1 (3 partitions), with ``other``."""
    net = Cluster({"events-1": 3, "other": 2})
    for name in ("c1", "c2", "c3"):
        net.join(
            name,
            pattern="events-.*",
            **{"partition.assignment.strategy": protocol, **NO_COMMIT, **props},
        )
    net.run(10_000)
    assert net.all_owned() == parts("events-1", 3)
    return net


# ------------------------------------------------------------------ pattern subscriptions


def test_a_pattern_picks_up_a_created_matching_topic_at_the_next_refresh_and_not_before() -> None:
    """``maybeUpdateSubscriptionMetadata`` / ``updatePatternSubscription`` on the answer of
    the refresh ``Metadata.timeToNextUpdate`` schedules ``metadata.max.age.ms`` after
    the last one; the change makes ``rejoinNeededOrPending`` true ("subscription has
    changed") and the leader assigns the new topic (K@3.9 ConsumerCoordinator 281-287,
    436-448, 874-896; Metadata 178-181)."""
    net = stable_pattern_group()
    assert {t for _, _, t in net.resolved()} == {"events-1"}  # at the start, never "other"
    net.run_until(lambda: net.now >= 14_000)
    due = min(net.next_refresh(n) for n in ("c1", "c2", "c3"))
    assert due > net.now + 1_000
    mark = net.now
    net.partitions["events-2"] = 2  # kafka-topics.sh --create
    net.run(due - net.now - 1)  # up to just before the first member's refresh
    assert net.resolved(since=mark) == [] and net.triggers(mark) == set()
    assert net.all_owned() == parts("events-1", 3)
    net.run(AGE)
    first = min(t for t, _, _ in net.resolved(since=mark))
    assert due <= first <= due + 10  # its refresh: a round trip after the request
    assert {(who, topics) for _, who, topics in net.resolved(since=mark)} == {
        (n, "events-1,events-2") for n in ("c1", "c2", "c3")
    }
    assert ("c1", "subscription has changed") in net.triggers(mark) or (
        "c2",
        "subscription has changed",
    ) in net.triggers(mark)
    assert net.all_owned() == parts("events-1", 3) | parts("events-2", 2)
    assert all(n.member.state is MemberState.STABLE for n in net.nodes.values())


def test_a_pattern_ignores_a_created_topic_it_does_not_match() -> None:
    """A full match (``Pattern.matcher(topic).matches()``, SubscriptionState 329-334): the
    refresh brings ``other-events-3`` and nothing changes (no new subscription, no rebalance)."""
    net = stable_pattern_group()
    mark = net.now
    versions = {n: net.m(n).metadata.version for n in net.nodes}
    net.partitions["other-events-3"] = 2
    net.run(2 * AGE)
    assert all(net.m(n).metadata.version > versions[n] for n in net.nodes)  # refreshed
    assert net.resolved(since=mark) == [] and net.triggers(mark) == set()
    assert net.rebalances(mark) == 0
    assert all(net.m(n).topics == ("events-1",) for n in net.nodes)


@pytest.mark.parametrize("protocol", ["range", "cooperative-sticky"])
def test_a_pattern_drops_a_deleted_topic_with_a_rebalance(protocol: str) -> None:
    """A deleted topic leaves the pattern subscription at the next refresh; the rebalance
    revokes its partitions: EAGER all in ``onJoinPrepare``, COOPERATIVE only those of
    topics no longer subscribed (K@3.9 ConsumerCoordinator ``onJoinPrepare`` 775-800);
    the other topic's partitions stay where they were under cooperative-sticky."""
    net = Cluster({"events-1": 2, "events-2": 2})
    for name in ("c1", "c2"):
        net.join(
            name, pattern="events-.*", **{"partition.assignment.strategy": protocol, **NO_COMMIT}
        )
    net.run(10_000)
    assert net.all_owned() == parts("events-1", 2) | parts("events-2", 2)
    before = net.owned()
    mark = net.now
    del net.partitions["events-1"]
    net.run(AGE + 2_000)
    assert {who for _, who, t in net.resolved(since=mark) if t == "events-2"} == {"c1", "c2"}
    assert net.all_owned() == parts("events-2", 2)
    revoked = {
        r.who: str(r.what.fields["partitions"])  # type: ignore[union-attr]
        for r in net.events(K.PARTITIONS_REVOKED, since=mark)
    }
    if protocol == "range":
        assert revoked == {
            n: ",".join(f"{t}:{p}" for t, p in sorted(before[n])) for n in before
        }  # stop the world
    else:
        assert revoked == {
            n: ",".join(f"{t}:{p}" for t, p in sorted(before[n]) if t == "events-1") for n in before
        }
        for n in before:  # the kept partitions never stopped
            assert not (net.stops(n, mark) & parts("events-2", 2))
    assert all(n.member.state is MemberState.STABLE for n in net.nodes.values())


def test_a_fetch_error_brings_the_refresh_forward() -> None:
    """UNKNOWN_TOPIC_OR_PARTITION on a fetch asks for metadata (K@3.9 FetchCollector 337-339,
    FetchUtils.requestMetadataUpdate: ``Metadata.requestUpdate(false)``): the request goes
    at once (the back-off after the last one is over), not at ``metadata.max.age.ms``."""
    net = stable_pattern_group()
    mark = net.now
    assert net.next_refresh("c1") > mark + 1_000
    del net.partitions["events-1"]
    net.partitions["events-2"] = 1
    asked = len(net.metadata_requests)
    net._member_out("c1", net.m("c1").request_metadata_update(net.now))
    assert net.metadata_requests[asked:] == [(mark, "c1")]
    net.run(50)
    assert net.resolved("c1", since=mark) == [(mark + 2.0, "c1", "events-2")]
    net.run(5_000)
    assert net.all_owned() == parts("events-2", 1)


def test_dot_star_never_matches_the_offsets_topic_unless_internal_topics_are_included() -> None:
    """``ConsumerMetadata.retainTopic`` drops an internal topic unless
    ``exclude.internal.topics=false`` (K@3.9 ConsumerMetadata 93-103; ConsumerConfig 330)."""
    net = Cluster({"a": 1, "__consumer_offsets": 50})
    net.join("c1", pattern=".*", **NO_COMMIT)
    net.join("c2", pattern=".*", **{"exclude.internal.topics": False, **NO_COMMIT})
    net.run(100)
    assert net.m("c1").topics == ("a",)
    assert net.m("c2").topics == ("__consumer_offsets", "a")
    assert "__consumer_offsets" not in net.m("c1").metadata.topics


def test_a_pattern_member_asks_for_all_topics_and_a_named_one_for_its_own() -> None:
    """``ConsumerMetadata.newMetadataRequestBuilder``: ``allTopics()`` for a pattern
    (never auto-creating), else the metadata topics with ``allow.auto.create.topics``."""
    one = Alone(pattern="t.*")
    names = Alone(topics=("t", "u"), **{"allow.auto.create.topics": False})
    for h in (one, names):
        h.start()
        h.advance(AGE)
    assert one.metadata_requests()[-1] == RequestMetadata(None, False)
    assert names.metadata_requests()[-1] == RequestMetadata(("t", "u"), False)


@pytest.mark.parametrize(("version", "asks"), [("2.0", False), ("2.1", True)])
def test_a_pattern_subscriber_asks_for_fresh_metadata_before_it_rejoins(
    version: str, asks: bool
) -> None:
    """KAFKA-7126 (2.1.0): ``poll()`` requests an update before a rejoin once the back-off
    allows (``timeToAllowUpdate == 0``) and waits for it (``ensureFreshMetadata``); 2.0
    only waited for one already requested or due (K@2.0.0 ConsumerCoordinator 320-330,
    K@3.9 487-507)."""
    h = Alone(pattern="t.*", kafka_version=version, **NO_COMMIT)
    h.joined_follower(assignment=(("t", 0),))
    h.effects.clear()
    h.advance(3_000)  # the heartbeat; the last metadata answer is 3 s old
    h.answer(HeartbeatRequest, HeartbeatResponse, error=Errors.REBALANCE_IN_PROGRESS)
    assert h.has(JoinGroupRequest) is not asks
    assert h.metadata_requests() == ([RequestMetadata(None, False)] if asks else [])
    if asks:
        h.answer_metadata({"t": 3})
        assert h.has(JoinGroupRequest)


def test_the_leader_assigns_a_topic_only_others_subscribe_to_after_fresh_metadata() -> None:
    """``updateGroupSubscription`` (K@3.9 ConsumerCoordinator 550-562): the group subscribes
    to ``u``, the leader does not; it asks for metadata at once
    (``requestUpdateForNewTopics``) and assigns on that answer (``ensureFreshMetadata``)."""
    h = Alone(topics=("t",), **NO_COMMIT)
    h.start()
    h.find()
    assert h.member.metadata.topics == {"t": 3}  # its own topics only (retainTopic)
    h.answer(
        JoinGroupRequest,
        JoinGroupResponse,
        generation_id=1,
        protocol_name="range",
        leader="me-1",
        member_id="me-1",
        members=(
            JoinGroupMember("me-1", None, Subscription(("t",))),
            JoinGroupMember("o-1", None, Subscription(("u",))),
        ),
    )
    assert not h.has(SyncGroupRequest)
    assert h.metadata_requests() == [RequestMetadata(("t", "u"), True)]
    h.answer_metadata({"t": 3, "u": 2, "w": 1})
    sync = h.req(SyncGroupRequest)
    assert isinstance(sync, SyncGroupRequest)
    assert dict(sync.assignments)["o-1"] == Assignment((("u", 0), ("u", 1)))
    assert h.member.metadata.topics == {"t": 3, "u": 2}


def test_a_pattern_member_takes_an_assigned_topic_it_has_not_seen_yet() -> None:
    """``maybeUpdateJoinedSubscription`` (K@3.9 298-321): a topic the leader assigned that
    matches the pattern joins the subscription and the joined subscription: no rejoin."""
    h = Alone(pattern="t.*", **NO_COMMIT)
    h.joined_follower(assignment=(("t", 0), ("t2", 0)))
    assert h.member.topics == ("t", "t2")
    assert h.member.state is MemberState.STABLE and not h.member.rejoin_needed
    assert h.last(K.TOPIC_PATTERN_RESOLVED).fields["reason"] == "assignment"


# ------------------------------------------------------------------ subscriptions by name


@pytest.mark.parametrize("protocol", ["range", "cooperative-sticky"])
def test_a_subscribed_topic_created_later_is_assigned_after_the_leaders_refresh(
    protocol: str,
) -> None:
    """A subscribed topic without metadata gets no partitions (``AbstractPartitionAssignor``:
    "Skipping assignment for topic ... since no metadata is available"); once it exists,
    the leader's refresh makes its snapshot differ ("cached metadata has changed",
    ``rejoinNeededOrPending`` 880-884) and the next assignment gives it out. Only the
    leader watches (``onJoinComplete``: a follower's ``assignmentSnapshot`` is null)."""
    net = Cluster({"a": 2})
    for name in ("c1", "c2"):
        net.join(
            name, topics=("a", "b"), **{"partition.assignment.strategy": protocol, **NO_COMMIT}
        )
    net.run(10_000)
    assert net.all_owned() == parts("a", 2)
    leader = next(n for n in net.nodes if net.m(n).is_leader)
    mark = net.now
    net.partitions["b"] = 2
    due = net.next_refresh(leader)
    net.run(due - net.now - 1)
    assert net.triggers(mark) == set()
    net.run(AGE)
    assert (leader, "cached metadata has changed") in net.triggers(mark)
    assert {r for r in net.triggers(mark) if r[1] == "cached metadata has changed"} == {
        (leader, "cached metadata has changed")
    }
    assert net.all_owned() == parts("a", 2) | parts("b", 2)


@pytest.mark.parametrize("protocol", ["range", "cooperative-sticky"])
def test_a_deleted_subscribed_topic_is_revoked_at_the_rebalance_of_the_leaders_refresh(
    protocol: str,
) -> None:
    """By names the deleted topic stays subscribed: the leader's snapshot loses it
    ("cached metadata has changed"), the assignor gives it to nobody; EAGER revokes
    everything in ``onJoinPrepare``, COOPERATIVE keeps it through ``onJoinPrepare``
    (still subscribed) and revokes it in ``onJoinComplete`` (owned, not assigned),
    then rejoins ("need to revoke partitions and re-join", K@3.9 366-390)."""
    net = Cluster({"a": 2, "b": 2})
    for name in ("c1", "c2"):
        net.join(
            name, topics=("a", "b"), **{"partition.assignment.strategy": protocol, **NO_COMMIT}
        )
    net.run(10_000)
    leader = next(n for n in net.nodes if net.m(n).is_leader)
    mark = net.now
    del net.partitions["b"]
    net.run(AGE + 2_000)
    assert (leader, "cached metadata has changed") in net.triggers(mark)
    assert net.all_owned() == parts("a", 2)
    assert all(net.m(n).topics == ("a", "b") for n in net.nodes)  # still subscribed
    reasons = {reason for _, reason in net.triggers(mark)}
    if protocol == "cooperative-sticky":
        assert "need to revoke partitions and re-join" in reasons
        for n in net.nodes:
            assert not (net.stops(n, mark) & parts("a", 2))  # a never stopped
    else:
        assert "need to revoke partitions and re-join" not in reasons


# ------------------------------------------------------------------ metadata.max.age.ms


@pytest.mark.parametrize("age", [10_000, 30_000])
def test_metadata_max_age_ms_sets_how_late_a_created_topic_is_seen(age: int) -> None:
    """``metadata.max.age.ms`` is the gap between refreshes (``Metadata.timeToNextUpdate``):
    a topic created just after a refresh is seen one age later."""
    net = Cluster({"t-1": 2})
    net.join("c1", pattern="t-.*", **{"metadata.max.age.ms": age, **NO_COMMIT})
    net.run(5_000)
    last = net.m("c1").metadata.last_success_ms
    net.run_until(lambda: net.m("c1").metadata.last_success_ms > last, step_ms=1)
    refreshed = net.m("c1").metadata.last_success_ms
    created = net.now
    net.partitions["t-2"] = 1
    net.run(2 * age)
    seen = net.resolved("c1", since=created)[0][0]
    assert age <= seen - refreshed <= age + 10  # the request at the age, a round trip


def test_metadata_max_age_ms_is_set_in_the_scenarios_kafka_table() -> None:
    """A scenario may set ``metadata.max.age.ms`` (K@3.9 ConsumerConfig 209, 425); the
    classic client reads it, with Kafka's 300000 by default."""
    text = """
name = "age"
duration_s = 10.0
[[topics]]
name = "t"
partitions = 1
[group]
consumers = 1
[kafka]
"metadata.max.age.ms" = 10000
"""
    assert (
        parse_scenario(text, "age.toml").classic_config("classic-eager").metadata_max_age_ms
        == 10_000
    )
    default = parse_scenario(text.replace('"metadata.max.age.ms" = 10000', ""), "d.toml")
    assert default.classic_config("classic-eager").metadata_max_age_ms == 300_000


# ------------------------------------------------------------------ KAFKA-16235


class Alone(GroupTestContext):
    """One member; the test plays the coordinator and the brokers' metadata."""

    def __init__(
        self,
        *,
        topics: tuple[str, ...] = (),
        pattern: str | None = None,
        metadata: dict[str, int] | None = None,
        kafka_version: str = "3.9",
        **props: object,
    ) -> None:
        super().__init__()
        props.setdefault("metadata.max.age.ms", AGE)
        self.config = ClassicConsumerConfig.from_kafka(
            {"client.id": "me", **props}, kafka_version=kafka_version
        )
        self.member = ClassicMember(
            member="c-0",
            group="g",
            topics=topics,
            config=self.config,
            partitions_per_topic=metadata or {"t": 3},
            topic_pattern=pattern,
        )
        self.pending: list[GroupRequest] = []
        self.effects: list[object] = []
        self.with_machine("c-0", self.member, self.take)

    def take(self, outs: list[object]) -> list[object]:
        for o in self.record("c-0", outs):
            (self.pending if isinstance(o, GroupRequest) else self.effects).append(o)
        return outs

    def start(self) -> None:
        self.take(self.member.start(self.now))  # type: ignore[arg-type]

    def advance(self, ms: float) -> None:
        self.run(ms)
        self.take(self.member.poll(self.now))  # type: ignore[arg-type]

    def req(self, kind: type) -> GroupRequest:
        return next(r for r in self.pending if isinstance(r, kind))

    def has(self, kind: type) -> bool:
        return any(isinstance(r, kind) for r in self.pending)

    def answer(self, kind: type, response_type: type, **fields: object) -> GroupRequest:
        r = self.req(kind)
        self.pending.remove(r)
        self.take(self.member.on_response(self.now, response_type(r.corr, **fields)))  # type: ignore[arg-type]
        return r

    def find(self) -> None:
        self.answer(FindCoordinatorRequest, FindCoordinatorResponse, node_id=5)

    def metadata_requests(self) -> list[RequestMetadata]:
        return [e for e in self.effects if isinstance(e, RequestMetadata)]

    def answer_metadata(self, partitions: dict[str, int]) -> None:
        self.take(self.member.update_metadata(self.now, partitions))  # type: ignore[arg-type]

    def last(self, kind: K) -> Emit:
        return self.last_event(kind)

    def joined_follower(
        self, assignment: tuple[TopicPartition, ...], metadata: dict[str, int] | None = None
    ) -> None:
        self.start()
        self.find()
        if self.metadata_requests():  # a pattern subscriber's refresh before its first join
            self.answer_metadata(metadata or {"t": 3})
        self.answer(
            JoinGroupRequest,
            JoinGroupResponse,
            generation_id=1,
            protocol_name="range",
            protocol_type="consumer",
            leader="other",
            member_id="me-1",
        )
        self.answer(
            SyncGroupRequest,
            SyncGroupResponse,
            protocol_type="consumer",
            protocol_name="range",
            assignment=Assignment(assignment),
        )
        self.answer(
            OffsetFetchRequest, OffsetFetchResponse, offsets={tp: None for tp in assignment}
        )


def _stall(version: str) -> tuple[Alone, float, float]:
    """A ``[dt]`` pattern subscriber owning ``d:0`` and ``t:0``; ``d`` is deleted and its
    fetch fails; the commit before the rebalance is answered as a 3.9 broker answers it
    (UNKNOWN_TOPIC_OR_PARTITION for ``d:0``, ``t:0`` stored). Returns the harness, when the
    rebalance was triggered, and when its JoinGroup went."""
    h = Alone(
        pattern="[dt]",
        metadata={"d": 1, "t": 1},
        kafka_version=version,
        **{"max.poll.interval.ms": 60_000},
    )
    h.joined_follower(assignment=(("d", 0), ("t", 0)), metadata={"d": 1, "t": 1})
    h.member.consumed(("d", 0), 7)
    h.member.consumed(("t", 0), 9)
    h.advance(1_000)
    h.effects.clear()
    h.take(h.member.request_metadata_update(h.now))  # the fetch of d:0 failed
    assert h.metadata_requests() == [RequestMetadata(None, False)]
    h.answer_metadata({"t": 1})  # d is gone
    triggered = h.now
    assert h.last(K.REBALANCE_TRIGGERED).fields["reason"] == "subscription has changed"
    while not h.has(JoinGroupRequest) and h.now < 120_000:
        if h.member.metadata.in_flight:  # a pattern subscriber refreshes before it rejoins
            h.answer_metadata({"t": 1})
        if h.has(OffsetCommitRequest):
            h.answer(
                OffsetCommitRequest,
                OffsetCommitResponse,
                partition_errors={
                    ("d", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION,
                    ("t", 0): Errors.NONE,
                },
            )
        if h.has(HeartbeatRequest):  # the group stays Stable: the member has not rejoined
            h.answer(HeartbeatRequest, HeartbeatResponse)
        h.advance(10)
    return h, triggered, h.now


def test_kafka_16235_the_commit_before_a_rebalance_retries_a_deleted_topic_until_the_timeout() -> (
    None
):
    """KAFKA-16235 (open in 3.9): ``onJoinPrepare`` commits ``allConsumed()``; the deleted
    topic's partition fails with UNKNOWN_TOPIC_OR_PARTITION, retriable since KAFKA-6829
    (2.0), so the commit is retried until ``joinPrepareTimer`` (the rebalance timeout,
    ``max.poll.interval.ms``) runs out, and only then is the JoinGroup sent; meanwhile an
    EAGER member fetches nothing (K@3.9 ConsumerCoordinator 711-768, 1340-1349)."""
    h, triggered, joined = _stall("3.9")
    commits = [e for e in h.emits() if e.kind is K.COMMIT_FAILED]
    assert len(commits) > 100
    assert {e.fields["reason"] for e in commits} == {"UNKNOWN_TOPIC_OR_PARTITION"}
    assert 60_000 <= joined - triggered <= 60_000 + 200
    stopped = {tp for e in h.effects if isinstance(e, StopFetching) for tp in e.partitions}
    assert stopped == {("d", 0), ("t", 0)}  # pending revocation from the first attempt


def test_before_kafka_6829_the_deleted_topics_commit_failure_lets_the_rebalance_go_on() -> None:
    """Before 2.0 the handler raised a ``KafkaException`` ("Topic or Partition ... does not
    exist", K@1.1.0 ConsumerCoordinator 777-779): not retriable, so ``onJoinPrepare``
    goes on and the JoinGroup follows the first failure."""
    h, triggered, joined = _stall("1.1")
    assert [e.fields["reason"] for e in h.emits() if e.kind is K.COMMIT_FAILED] == [
        "UNKNOWN_TOPIC_OR_PARTITION"
    ]
    assert joined - triggered <= 100
