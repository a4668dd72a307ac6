"""The KIP-848 member with a regex subscription and with deleted topics, on a fake clock.

The member alone (the test plays the coordinator, as ``ConsumerMembershipManagerTest``
does): ``SubscribedTopicRegex`` is sent when joining and when it changed, ``""``
when it is dropped (CK@4.1 ``ConsumerHeartbeatRequestManager.HeartbeatState``
281-288); INVALID_REGULAR_EXPRESSION is fatal (``AbstractHeartbeatRequestManager``
427-431); a partition's UNKNOWN_TOPIC_OR_PARTITION fails the commit
(``CommitRequestManager`` 747-810) and the commit before a revocation does not
retry it from 3.8 (KAFKA-16224, K@3.8 ``CommitRequestManager`` 329).

Then members and a broker's :class:`~emulator.broker.coordinators.CoordinatorHost`
(with the real KIP-848 coordinator and the broker's per-partition
UNKNOWN_TOPIC_OR_PARTITION) on one fake clock: a deleted topic's partitions leave
their member through an ordinary reconciliation (4.1) or stall it until its
rebalance timeout (3.7); a created topic reaches a regex member after the next
resolution (issue-19 facts C2-C5).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import pytest

from emulator.broker.coordinators import CoordinatorHost, make_coordinator_factory
from emulator.events import EventKind as K
from emulator.modern.config import Kip848ConsumerConfig
from emulator.modern.consumer_coordinator import ConsumerGroupCoordinator
from emulator.modern.consumer_member import ConsumerMember, MemberState, make_consumer_member
from emulator.modern.errors import Errors
from emulator.modern.messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    Emit,
    GroupRequest,
    OffsetCommitRequest,
    OffsetCommitResponse,
    TopicPartition,
)
from emulator.modern.messages import MemberOutput as Output
from tests.group_context import GroupTestContext
from tests.unit.test_consumer_member import F0, F1, Driver, emits, kinds, of, only

GROUP = "grp"
V41 = Kip848ConsumerConfig.from_kafka({}, kafka_version="4.1")


def pattern_driver(pattern: str = "t-.*", config: Kip848ConsumerConfig = V41) -> Driver:
    d = Driver()
    d.m = ConsumerMember(
        member="c",
        group=GROUP,
        topics=(),
        config=config,
        rng=random.Random(1),
        topic_pattern=pattern,
    )
    return d


def joined(d: Driver) -> ConsumerGroupHeartbeatRequest:
    """Join at epoch 1 with nothing assigned and answer the acknowledgement; the join."""
    join = only(d.found(), ConsumerGroupHeartbeatRequest)
    ack = only(d.hb_response(join, epoch=1, assignment=()), ConsumerGroupHeartbeatRequest)
    d.hb_response(ack, epoch=1)
    return join


# ------------------------------------------------------------------ the heartbeat


def test_a_pattern_member_joins_with_no_names_and_its_regex_then_sends_it_only_on_change() -> None:
    d = pattern_driver()
    join = joined(d)
    assert (join.subscribed_topic_names, join.subscribed_topic_regex) == ((), "t-.*")
    hb = only(d.advance(5_000), ConsumerGroupHeartbeatRequest)
    assert (hb.subscribed_topic_names, hb.subscribed_topic_regex) == (None, None)
    # An error resets the sent fields: the regex goes again.
    d.respond(ConsumerGroupHeartbeatResponse(hb.corr, error=Errors.COORDINATOR_LOAD_IN_PROGRESS))
    deadline = d.m.next_deadline()
    assert deadline is not None
    again = only(d.advance(deadline - d.now), ConsumerGroupHeartbeatRequest)
    assert again.subscribed_topic_regex == "t-.*"


def test_changing_between_names_and_a_pattern() -> None:
    d = pattern_driver()
    joined(d)
    out = d._out(d.m.subscribe(d.now, ["foo"]))
    assert emits(out, K.REBALANCE_TRIGGERED)[0].fields["detail"] == "foo"
    hb = only(d.advance(5_000), ConsumerGroupHeartbeatRequest)
    assert (hb.subscribed_topic_names, hb.subscribed_topic_regex) == (("foo",), "")
    d.hb_response(hb, epoch=1)
    out = d._out(d.m.subscribe(d.now, [], topic_pattern="x-.*"))
    assert emits(out, K.REBALANCE_TRIGGERED)[0].fields["detail"] == "pattern=x-.*"
    hb = only(d.advance(5_000), ConsumerGroupHeartbeatRequest)
    assert (hb.subscribed_topic_names, hb.subscribed_topic_regex) == ((), "x-.*")
    assert d.m.subscribe(d.now, ["ignored"], topic_pattern="x-.*") == []  # no change


def test_a_names_member_never_sends_a_regex() -> None:
    d = Driver()
    d.m = ConsumerMember(member="c", group=GROUP, topics=("foo",), config=V41, rng=random.Random(1))
    assert joined(d).subscribed_topic_regex is None
    assert only(d.advance(5_000), ConsumerGroupHeartbeatRequest).subscribed_topic_regex is None


def test_before_4_0_a_member_has_no_broker_side_regex() -> None:
    v39 = Kip848ConsumerConfig.from_kafka({}, kafka_version="3.9")
    assert not v39.broker_regex and V41.broker_regex
    with pytest.raises(ValueError, match=r"Kafka 4\.0\+"):
        ConsumerMember(
            member="c",
            group=GROUP,
            topics=(),
            config=v39,
            rng=random.Random(1),
            topic_pattern="t-.*",
        )
    with pytest.raises(ValueError, match="cannot be empty"):
        pattern_driver("")
    # The factory keeps a 3.9 member on the names the pattern selected at planning.
    old = make_consumer_member(
        name="c", group=GROUP, topics=["t-a"], props={"kafka.version": "3.9"}, topic_pattern="t-.*"
    )
    new = make_consumer_member(
        name="c", group=GROUP, topics=["t-a"], props={"kafka.version": "4.0"}, topic_pattern="t-.*"
    )
    assert (old.topics, old.topic_pattern) == (("t-a",), None)
    assert (new.topics, new.topic_pattern) == ((), "t-.*")


def test_invalid_regular_expression_is_fatal() -> None:
    d = pattern_driver("t-(?=x)")
    join = only(d.found(), ConsumerGroupHeartbeatRequest)
    out = d.respond(
        ConsumerGroupHeartbeatResponse(
            join.corr, error=Errors.INVALID_REGULAR_EXPRESSION, error_message="bad"
        )
    )
    assert d.m.state is MemberState.FATAL
    assert [e.fields["reason"] for e in emits(out, K.REQUEST_ERROR)] == [
        "INVALID_REGULAR_EXPRESSION"
    ]
    assert d.m.next_deadline() is None or d.m.poll(d.now + 60_000) == []


# ------------------------------------------------------------ commits and deletion


def revoking(**config: object) -> tuple[Driver, OffsetCommitRequest]:
    """Stable owning foo-0 and foo-1 (consumed to 20 and 50), told to keep only foo-0."""
    d = Driver(("foo",), **config)
    d.stable_with((F0, F1), {F0: 0, F1: 0})
    d.m.consumed(F0, 20)
    d.m.consumed(F1, 50)
    hb = only(d.advance(5_000), ConsumerGroupHeartbeatRequest)
    out = d.hb_response(hb, epoch=1, assignment=(F0,))
    return d, only(out, OffsetCommitRequest)


def test_a_deleted_partition_fails_the_commit_before_revocation_and_the_revocation_goes_on() -> (
    None
):
    d, commit = revoking()
    assert dict(commit.offsets) == {F0: 20, F1: 50}
    out = d.respond(
        OffsetCommitResponse(
            commit.corr,
            partition_errors={F0: Errors.NONE, F1: Errors.UNKNOWN_TOPIC_OR_PARTITION},
            accepted_ms=d.now,
        )
    )
    # foo-0 was stored; the commit failed for foo-1; no retry: revoke now.
    assert [e.fields["partition"] for e in emits(out, K.OFFSETS_COMMITTED)] == [0]
    (failed,) = emits(out, K.COMMIT_FAILED)
    assert (failed.fields["reason"], failed.fields["partitions"], failed.fields["detail"]) == (
        "UNKNOWN_TOPIC_OR_PARTITION",
        "foo:1",
        "reconcile",
    )
    assert "partitions_revoked" in kinds(out) and d.m.owned == {F0}
    assert d.m.committed == {F0: 20, F1: 0}  # foo-1: what the offset fetch had
    assert d.m.stats.commit_failures == 1


def test_every_partition_deleted_fails_the_whole_request_and_the_revocation_goes_on() -> None:
    d, commit = revoking()
    out = d.respond(
        OffsetCommitResponse(
            commit.corr,
            Errors.UNKNOWN_TOPIC_OR_PARTITION,
            partition_errors={tp: Errors.UNKNOWN_TOPIC_OR_PARTITION for tp in commit.offsets},
        )
    )
    assert "partitions_revoked" in kinds(out)


def test_before_3_8_the_commit_before_revocation_retries_a_deleted_partition() -> None:
    d, commit = revoking(rebalance_commit_unknown_topic_fatal=False)
    out = d.respond(
        OffsetCommitResponse(
            commit.corr, partition_errors={F1: Errors.UNKNOWN_TOPIC_OR_PARTITION, F0: Errors.NONE}
        )
    )
    assert "partitions_revoked" not in kinds(out) and emits(out, K.COMMIT_FAILED) == []
    deadline = d.m.next_deadline()
    assert deadline is not None and deadline <= d.now + 200
    retry = only(d.advance(deadline - d.now), OffsetCommitRequest)
    assert dict(retry.offsets) == {F1: 50}  # foo-0's offset was stored


def test_an_auto_commit_with_a_deleted_partition_is_reported_and_resent_at_the_next_interval() -> (
    None
):
    d = Driver()
    d.stable_with((F0, F1), {F0: 0, F1: 0})
    d.m.consumed(F0, 20)
    d.m.consumed(F1, 50)
    out = d.advance(5_000)
    auto = only(out, OffsetCommitRequest)
    hb = only(out, ConsumerGroupHeartbeatRequest)
    d.hb_response(hb, epoch=1)
    out = d.respond(
        OffsetCommitResponse(
            auto.corr, partition_errors={F1: Errors.UNKNOWN_TOPIC_OR_PARTITION, F0: Errors.NONE}
        )
    )
    (failed,) = emits(out, K.COMMIT_FAILED)
    assert (failed.fields["partitions"], failed.fields["detail"]) == ("foo:1", "auto")
    again = of(d.advance(5_000), OffsetCommitRequest)
    assert [dict(c.offsets) for c in again] == [{F1: 50}]


# ------------------------------------------------------- members and a broker


class World(GroupTestContext):
    """KIP-848 members and one broker's coordinators, 10 ms ticks, no latency.

    The broker checks commits against its metadata (UNKNOWN_TOPIC_OR_PARTITION
    per partition); a topic change goes to the coordinators as the replica
    manager sends it (``partitions_deleted`` then ``update_topics``). Every
    member's application is always in ``poll()`` and consumes one message per
    owned partition per tick.
    """

    TICK = 10.0

    def __init__(
        self,
        version: str,
        topics: Mapping[str, int],
        subscriptions: Mapping[str, str | tuple[str, ...]],
        max_poll_interval_ms: int = 20_000,
    ) -> None:
        super().__init__()
        self.kafka: dict[str, object] = {
            "kafka.version": version,
            "offsets.topic.num.partitions": 1,
            "max.poll.interval.ms": max_poll_interval_ms,
        }
        self.counts = dict(topics)
        factory = make_coordinator_factory("consumer", self.kafka, 0, 1, self.counts)
        self.host = CoordinatorHost(0, {0: 0}, factory, self._broker_event)
        self.metadata = {(t, p): 0 for t, n in topics.items() for p in range(n)}
        self.host.metadata = self.metadata  # the broker's cache, shared
        self.members: dict[str, ConsumerMember] = {}
        for name, sub in subscriptions.items():
            pattern = sub if isinstance(sub, str) else None
            names = list(sub) if isinstance(sub, tuple) else []
            self.members[name] = make_consumer_member(
                name=name,
                group=GROUP,
                topics=names,
                props=self.kafka,
                seed=3,
                topic_pattern=pattern,
            )
        self.positions: dict[TopicPartition, int] = {}
        self.commits_sent: list[tuple[float, OffsetCommitRequest]] = []
        for name, m in self.members.items():
            self._handle(name, m.start(self.now))

    def _broker_event(self, kind: K, **fields: object) -> None:
        self.record("broker", [Emit(kind, fields)])

    def _handle(self, name: str, outs: Sequence[Output]) -> None:
        requests = [o for o in self.record(name, outs) if isinstance(o, GroupRequest)]
        while requests:
            req = requests.pop(0)
            if isinstance(req, OffsetCommitRequest):
                self.commits_sent.append((self.now, req))
            for resp in self.host.exchange(self.now, name, [req]):
                more = self.members[name].on_response(self.now, resp)
                requests += [o for o in self.record(name, more) if isinstance(o, GroupRequest)]

    def tick(self) -> None:
        self.clock.advance(self.TICK)
        self.host.poll(self.now)
        self.record("broker", [])
        for name, m in self.members.items():
            self._handle(name, m.app_polled(self.now))
            for tp in sorted(m.owned):
                self.positions[tp] = self.positions.get(tp, 0) + 1
                m.consumed(tp, self.positions[tp])
            self._handle(name, m.poll(self.now))

    def run_to(self, t_ms: float) -> None:
        while self.now < t_ms:
            self.tick()

    def delete(self, topic: str) -> None:
        gone = sorted(tp for tp in self.metadata if tp[0] == topic)
        for tp in gone:
            del self.metadata[tp]
        self.host.partitions_deleted(self.now, gone)
        del self.counts[topic]
        for coord in self.host.coordinators.values():
            coord.update_topics(self.now, dict(self.counts))

    def create(self, topic: str, n: int) -> None:
        for p in range(n):
            self.metadata[(topic, p)] = 0
        self.counts[topic] = n
        for coord in self.host.coordinators.values():
            coord.update_topics(self.now, dict(self.counts))

    def coordinator(self) -> ConsumerGroupCoordinator:
        coord = self.host.coordinators[GROUP]
        assert isinstance(coord, ConsumerGroupCoordinator)
        return coord

    def owned(self) -> frozenset[TopicPartition]:
        return frozenset(tp for m in self.members.values() for tp in m.owned)

    def first(self, kind: K, since: float = 0.0, **match: object) -> float:
        for r in self.emitted(kind, since=since):
            if all(r.fields.get(k) == v for k, v in match.items()):
                return r.t
        raise AssertionError(f"no {kind.value} with {match} since {since}")


def parts(topic: str, n: int) -> frozenset[TopicPartition]:
    return frozenset((topic, p) for p in range(n))


@pytest.mark.parametrize("sub", ["t-.*", ("t-a", "t-b")])
def test_a_deleted_topic_leaves_its_owners_through_a_reconciliation(
    sub: str | tuple[str, ...],
) -> None:
    w = World("4.1", {"t-a": 2, "t-b": 2}, {"c-0": sub, "c-1": sub})
    w.run_to(8_000)
    assert w.owned() == parts("t-a", 2) | parts("t-b", 2)
    epoch = w.coordinator().group_epoch
    w.run_to(10_000)
    w.delete("t-b")
    w.run_to(30_000)
    assert w.owned() == parts("t-a", 2)
    coord = w.coordinator()
    assert coord.group_epoch == epoch + 1  # one rebalance: the metadata refresh
    bumped = w.first(K.GROUP_STATE_CHANGED, since=10_000, group_epoch=epoch + 1)
    assert bumped <= 10_000 + 5_000 + w.TICK  # at the next heartbeat
    revoked = [r for r in w.emitted(K.PARTITIONS_REVOKED, since=10_000)]
    # t-b's partitions, and whatever the uniform assignor moves to rebalance t-a.
    assert {"t-b:0", "t-b:1"} <= {
        tp for r in revoked for tp in str(r.fields["partitions"]).split(",")
    }
    # The commit before each revocation failed for t-b and was not retried.
    failed = w.emitted(K.COMMIT_FAILED, since=10_000)
    assert failed and all(r.fields["reason"] == "UNKNOWN_TOPIC_OR_PARTITION" for r in failed)
    assert {r.fields["detail"] for r in failed} <= {"reconcile", "auto"}
    for r in revoked:
        assert r.t - bumped < 5_000 + 50  # within the owner's next heartbeat, no stall
    assert all(m.state is MemberState.STABLE for m in w.members.values())
    assert w.emitted(K.MEMBER_REMOVED) == []
    assert not any(tp[0] == "t-b" for tp in coord.committed)  # offsets tombstoned


def test_before_3_8_a_deleted_topic_stalls_its_owner_until_the_rebalance_timeout() -> None:
    w = World("3.7", {"t-a": 2, "t-b": 2}, {"c-0": ("t-a", "t-b")}, max_poll_interval_ms=20_000)
    w.run_to(8_000)
    assert w.owned() == parts("t-a", 2) | parts("t-b", 2)
    w.run_to(10_000)
    w.delete("t-b")
    w.run_to(25_000)
    # Still retrying the commit of t-b: the revocation has not happened.
    assert parts("t-b", 2) <= w.members["c-0"].owned
    retries = [c for t, c in w.commits_sent if t > 10_000 and ("t-b", 0) in c.offsets]
    assert len(retries) > 10
    w.run_to(45_000)
    assert not any(tp[0] == "t-b" for tp in w.owned())
    # The coordinator's rebalance timeout (max.poll.interval.ms) or the commit's
    # own deadline ended it, about 20 s after the new target.
    gone = w.first(K.PARTITIONS_REVOKED, since=10_000)
    lost = [r.t for r in w.emitted(K.PARTITIONS_LOST, since=10_000)]
    assert min([gone, *lost]) >= 10_000 + 19_000


def test_a_created_topic_reaches_a_regex_group_after_the_next_resolution() -> None:
    w = World("4.1", {"t-a": 2, "other": 1}, {"c-0": "t-.*"})
    w.run_to(3_000)
    # Resolved 10 ms after the join (the executor task, at the broker's next
    # poll), but the coordinator cannot push: the member has its epoch and
    # nothing until its next heartbeat.
    assert w.owned() == frozenset() and w.members["c-0"].member_epoch == 1
    w.run_to(8_000)
    assert w.owned() == parts("t-a", 2)
    assert w.first(K.OWNERSHIP_CLAIMED, topic="t-a") == 5_000
    first = w.emitted(K.TOPIC_PATTERN_RESOLVED)
    assert [(r.fields["topics"], r.fields["broker"], r.fields["reason"]) for r in first] == [
        ("t-a", 0, "new_regex")
    ]
    w.create("t-c", 3)
    created = w.now
    w.run_to(40_000)
    assert w.owned() == parts("t-a", 2) | parts("t-c", 3)
    (second,) = w.emitted(K.TOPIC_PATTERN_RESOLVED, since=created)
    assert (second.fields["topics"], second.fields["reason"]) == ("t-a,t-c", "new_topics")
    # Not before the last resolution is 10 s old, and at a heartbeat.
    assert 10_000 < second.t <= 10_000 + 5_000 + 2 * w.TICK
    claimed = w.first(K.OWNERSHIP_CLAIMED, since=created, topic="t-c")
    assert second.t < claimed <= second.t + 5_000 + 2 * w.TICK
    bump = w.emitted(K.GROUP_STATE_CHANGED, since=created)[0]
    assert (bump.t, bump.fields["reason"], bump.fields["state"]) == (
        second.t,
        "regex_resolved",
        "Assigning",
    )
    assert w.emitted(K.PARTITIONS_REVOKED, since=created) == []
