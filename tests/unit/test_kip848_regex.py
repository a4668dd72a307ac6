"""KIP-848 regex subscriptions and topic changes on the coordinator, on a fake clock.

Issue-19 facts C2-C4, read in CK@4.0 and CK@4.1
``group-coordinator/.../GroupMetadataManager.java``: ``maybeUpdateRegularExpressions``
(CK@4.1 3131-3230) on every heartbeat, the ``<group>-regex`` executor task
(``refreshRegularExpressions`` 3249-3304, ``handleRegularExpressionsResult``
3354-3439), ``onNewMetadataImage`` (5815-5856) and the ordinary revocation of a
deleted topic's partitions (``CurrentAssignmentBuilder``). The group uses the
real uniform assignor, so the assignments are what Kafka's would be for one
member; with several, the tests look at the union.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

import pytest

from emulator.events import EventKind as K
from emulator.modern.config import REGEX_BATCH_REFRESH_MIN_INTERVAL_MS
from emulator.modern.consumer_coordinator import (
    ConsumerGroupCoordinator,
    GroupState,
    MemberState,
    make_consumer_coordinator,
)
from emulator.modern.errors import Errors
from emulator.modern.messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    Emit,
    TopicPartition,
)
from tests.group_context import GroupTestContext

GROUP = "g"
MIN = REGEX_BATCH_REFRESH_MIN_INTERVAL_MS
TOPICS = {"t-a": 2, "t-b": 1, "other": 3}


def parts(topic: str, n: int) -> frozenset[TopicPartition]:
    return frozenset((topic, p) for p in range(n))


class Group(GroupTestContext):
    """One coordinator (uniform assignor) and hand-made heartbeats."""

    def __init__(
        self,
        version: str = "4.1",
        topics: Mapping[str, int] | None = None,
        **kw: object,
    ) -> None:
        super().__init__()
        self.coord = ConsumerGroupCoordinator(
            GROUP,
            topics=dict(TOPICS if topics is None else topics),
            rng=random.Random(7),
            node_id=3,
            kafka_version=version,
            **kw,  # type: ignore[arg-type]
        )
        self.epochs: dict[str, int] = {}
        self.owned: dict[str, frozenset[TopicPartition]] = {}
        self._corr = 0

    def at(self, t_ms: float) -> None:
        """Move the mock time to ``t_ms`` without polling the coordinator."""
        self.clock.advance(t_ms - self.now)

    def send(self, member_id: str, **fields: object) -> ConsumerGroupHeartbeatResponse:
        self._corr += 1
        req = ConsumerGroupHeartbeatRequest(self._corr, GROUP, member_id=member_id, **fields)  # type: ignore[arg-type]
        out = self.coord.handle(self.now, req)
        self.record("coordinator", [o for o in out[1:] if isinstance(o, Emit)])
        resp = out[0]
        assert isinstance(resp, ConsumerGroupHeartbeatResponse)
        if resp.error is Errors.NONE:
            self.epochs[member_id] = resp.member_epoch
        return resp

    def join(
        self, member_id: str, regex: str | None = None, names: tuple[str, ...] = ()
    ) -> ConsumerGroupHeartbeatResponse:
        fields: dict[str, object] = {
            "member_epoch": 0,
            "rebalance_timeout_ms": 30_000,
            "subscribed_topic_names": names,
            "topic_partitions": (),
        }
        if regex is not None:
            fields["subscribed_topic_regex"] = regex
        resp = self.send(member_id, **fields)
        if resp.assignment is not None:
            self.owned[member_id] = frozenset(resp.assignment)
        return resp

    def beat(self, member_id: str, **fields: object) -> ConsumerGroupHeartbeatResponse:
        """A heartbeat that reports what the member owns (it revokes at once)."""
        resp = self.send(
            member_id,
            member_epoch=self.epochs[member_id],
            topic_partitions=tuple(sorted(self.owned.get(member_id, frozenset()))),
            **fields,
        )
        if resp.assignment is not None:
            self.owned[member_id] = frozenset(resp.assignment)
        return resp

    def settle(self, *members: str, rounds: int = 4) -> None:
        for _ in range(rounds):
            for m in members:
                ok(self.beat(m))

    def poll(self) -> list[Emit]:
        out = [o for o in self.coord.poll(self.now) if isinstance(o, Emit)]
        self.record("coordinator", out)
        return out

    def resolutions(self) -> list[Mapping[str, object]]:
        return [r.emit.fields for r in self.emitted(K.TOPIC_PATTERN_RESOLVED)]


def ok(resp: ConsumerGroupHeartbeatResponse) -> ConsumerGroupHeartbeatResponse:
    assert resp.error is Errors.NONE, resp.error_message
    return resp


def resolved_group(version: str = "4.1", **kw: object) -> Group:
    """m1 subscribed to ``t-.*`` at t=0, resolved, owning t-a and t-b (group epoch 2)."""
    g = Group(version, None, **kw)
    ok(g.join("m1", regex="t-.*"))
    g.poll()
    g.settle("m1")
    assert g.owned["m1"] == parts("t-a", 2) | parts("t-b", 1)
    assert g.coord.group_epoch == 2
    return g


# ----------------------------------------------------------------- resolution


def test_a_regex_member_gets_its_epoch_but_no_partitions_until_the_task_resolves_it() -> None:
    g = Group("4.1")
    resp = ok(g.join("m1", regex="t-.*"))
    # Joined at group epoch 1 with nothing: the regex is not resolved yet.
    assert (resp.member_epoch, resp.assignment) == (1, ())
    assert g.coord.resolved_regexes == {}
    assert g.coord.regex_task_due == 0.0  # the executor task, applied by the next poll
    assert g.coord.next_deadline() == 0.0
    assert g.resolutions() == []

    events = g.poll()
    assert g.coord.regex_task_due is None
    resolved = g.coord.resolved_regexes["t-.*"]
    assert resolved.topics == {"t-a", "t-b"} and resolved.timestamp_ms == 0.0
    (ev,) = [e.fields for e in events if e.kind is K.TOPIC_PATTERN_RESOLVED]
    assert (ev["pattern"], ev["topics"], ev["broker"], ev["reason"], ev["group_epoch"]) == (
        "t-.*",
        "t-a,t-b",
        3,
        "new_regex",
        2,
    )
    assert ev["detail"] == "version=0 changed=true"
    state = g.last_event(K.GROUP_STATE_CHANGED).fields
    assert (state["state"], state["reason"], state["group_epoch"]) == (
        "Assigning",
        "regex_resolved",
        2,
    )
    # The next heartbeat computes the target and hands it out.
    resp = ok(g.beat("m1"))
    assert resp.member_epoch == 2
    assert frozenset(resp.assignment or ()) == parts("t-a", 2) | parts("t-b", 1)


def test_the_result_is_applied_only_when_the_executor_delay_has_passed() -> None:
    g = Group("4.1", regex_resolution_ms=40.0)
    ok(g.join("m1", regex="t-.*"))
    assert g.coord.next_deadline() == 40.0
    g.at(39.0)
    assert g.poll() == [] and g.coord.resolved_regexes == {}
    ok(g.beat("m1"))  # still nothing: the member stays at epoch 1 with no partitions
    assert g.owned["m1"] == frozenset() and g.epochs["m1"] == 1
    g.at(40.0)
    g.poll()
    assert g.coord.resolved_regexes["t-.*"].timestamp_ms == 0.0  # when the task started
    assert g.resolutions()[0]["duration_ms"] == 40.0
    assert g.coord.group_epoch == 2


def test_a_regex_already_resolved_bumps_the_group_epoch_at_once() -> None:
    g = resolved_group()
    g.at(1000)
    resp = ok(g.join("m2", regex="t-.*"))
    assert g.coord.group_epoch == 3 and resp.member_epoch == 3
    assert g.coord.regex_task_due is None  # no new resolution: 1 s after the last one
    g.settle("m1", "m2")
    assert g.owned["m1"] | g.owned["m2"] == parts("t-a", 2) | parts("t-b", 1)
    assert g.owned["m1"] and g.owned["m2"]


def test_a_new_regex_waits_until_the_last_resolution_is_more_than_10_s_old() -> None:
    g = resolved_group()
    g.at(5000)
    resp = ok(g.join("m2", regex="oth.*"))
    assert g.coord.regex_task_due is None  # 5000 <= 0 + 10000
    assert resp.member_epoch == g.coord.group_epoch
    g.settle("m1", "m2")
    assert g.owned["m2"] == frozenset()  # unresolved: its epoch, no partitions
    g.at(MIN)
    ok(g.beat("m1"))
    assert g.coord.regex_task_due is None  # now <= last + 10000: still not
    g.at(MIN + 1)
    ok(g.beat("m2"))
    assert g.coord.regex_task_due == MIN + 1
    g.poll()
    ev = g.resolutions()[-2:]
    assert {(e["pattern"], e["topics"], e["reason"]) for e in ev} == {
        ("oth.*", "other", "unresolved"),
        ("t-.*", "t-a,t-b", "unresolved"),  # all the group's regexes, together
    }
    assert {e["detail"] for e in ev} == {"version=0 changed=true", "version=0 changed=false"}
    g.settle("m1", "m2")
    assert g.owned["m2"] == parts("other", 3)
    assert g.owned["m1"] == parts("t-a", 2) | parts("t-b", 1)


def test_one_task_at_a_time() -> None:
    g = Group("4.1", regex_resolution_ms=500.0)
    ok(g.join("m1", regex="t-.*"))
    g.at(100)
    ok(g.join("m2", regex="other"))  # executor.isScheduled: no second task
    assert g.coord.regex_task_due == 500.0
    g.at(500)
    g.poll()
    assert set(g.coord.resolved_regexes) == {"t-.*"}  # the task's regexes only
    g.at(MIN + 1)
    ok(g.beat("m1"))
    assert g.coord.regex_task_due == MIN + 1 + 500


# ----------------------------------------------------------------- topic changes


@pytest.mark.parametrize("version", ["4.0", "4.1"])
def test_a_created_matching_topic_arms_a_refresh_then_bumps_the_epoch(version: str) -> None:
    g = resolved_group(version)
    epoch = g.coord.group_epoch
    g.at(3000)
    g.coord.update_topics(g.now, {**TOPICS, "t-c": 2})
    g.at(5000)
    ok(g.beat("m1"))
    # The metadata refresh alone changes nothing (t-c is not subscribed yet), and
    # the refresh is armed but waits for the 10 s.
    assert g.coord.group_epoch == epoch and g.coord.regex_task_due is None
    g.at(12_000)
    ok(g.beat("m1"))
    assert g.coord.regex_task_due == 12_000
    g.poll()
    ev = g.resolutions()[-1]
    assert (ev["topics"], ev["reason"], ev["detail"]) == (
        "t-a,t-b,t-c",
        "new_topics",
        "version=1 changed=true",
    )
    assert g.coord.group_epoch == epoch + 1
    assert g.coord.state is GroupState.ASSIGNING
    resp = ok(g.beat("m1"))
    assert resp.member_epoch == epoch + 1
    assert g.owned["m1"] == parts("t-a", 2) | parts("t-b", 1) | parts("t-c", 2)


def test_a_created_topic_the_regex_does_not_match_costs_a_resolution_not_a_rebalance() -> None:
    g = resolved_group()
    g.coord.update_topics(g.now, {**TOPICS, "zzz": 4})
    g.at(MIN + 1)
    ok(g.beat("m1"))
    g.poll()
    ev = g.resolutions()[-1]
    assert (ev["topics"], ev["reason"], ev["detail"]) == (
        "t-a,t-b",
        "new_topics",
        "version=1 changed=false",
    )
    assert g.coord.group_epoch == 2
    # Resolved against the newest image: no further refresh without new topics.
    g.at(2 * MIN + 2)
    ok(g.beat("m1"))
    assert g.coord.regex_task_due is None


@pytest.mark.parametrize("by", ["regex", "names"])
def test_a_deleted_topic_bumps_the_epoch_at_the_next_heartbeat_and_is_revoked(by: str) -> None:
    if by == "regex":
        g = resolved_group()
    else:
        g = Group("4.1")
        ok(g.join("m1", names=("t-a", "t-b")))
        g.settle("m1")
    epoch = g.coord.group_epoch
    assert g.owned["m1"] == parts("t-a", 2) | parts("t-b", 1)
    g.at(20_000)
    g.coord.update_topics(g.now, {"t-a": 2, "other": 3})
    assert g.coord.group_epoch == epoch  # nothing until a heartbeat
    # The member still reports t-b-0: pending revocation at the same epoch.
    resp = ok(g.send("m1", member_epoch=epoch, topic_partitions=tuple(sorted(g.owned["m1"]))))
    assert g.coord.group_epoch == epoch + 1
    assert resp.member_epoch == epoch
    assert frozenset(resp.assignment or ()) == parts("t-a", 2)
    m1 = g.coord.members["m1"]
    assert m1.state is MemberState.UNREVOKED_PARTITIONS
    assert m1.pending_revocation == parts("t-b", 1)
    assert g.coord.rebalance_deadline("m1") == 20_000 + 30_000
    # It stops reporting it: the next epoch, stable.
    resp = ok(g.send("m1", member_epoch=epoch, topic_partitions=tuple(sorted(parts("t-a", 2)))))
    assert resp.member_epoch == epoch + 1
    assert g.coord.members["m1"].state is MemberState.STABLE
    assert ("t-b", 0) not in g.coord.partition_epochs
    assert g.coord.regex_task_due is None  # a deletion does not arm a resolution
    if by == "regex":
        # The resolution keeps the deleted topic until the next one.
        assert g.coord.resolved_regexes["t-.*"].topics == {"t-a", "t-b"}


def test_a_deleted_topic_leaves_the_resolution_at_the_next_refresh() -> None:
    g = resolved_group("4.1", regex_refresh_interval_ms=MIN)
    g.coord.update_topics(g.now, {"t-a": 2, "other": 3})
    g.settle("m1")
    epoch = g.coord.group_epoch
    g.at(MIN + 1)
    ok(g.beat("m1"))  # the periodic refresh (interval set to its 10 s minimum)
    g.poll()
    assert g.coord.resolved_regexes["t-.*"].topics == {"t-a"}
    ev = g.resolutions()[-1]
    assert (ev["reason"], ev["detail"]) == ("periodic", "version=1 changed=true")
    # The topics changed, so Kafka bumps although the assignment cannot change.
    assert g.coord.group_epoch == epoch + 1


# ----------------------------------------------------------------- validation


def test_an_invalid_regex_is_answered_invalid_regular_expression() -> None:
    g = resolved_group()
    before = (g.coord.group_epoch, dict(g.coord.members))
    resp = g.join("m2", regex="t-(?=x).*")
    assert resp.error is Errors.INVALID_REGULAR_EXPRESSION
    assert resp.error_message is not None and "t-(?=x).*" in (resp.error_message or "")
    assert (g.coord.group_epoch, dict(g.coord.members)) == before
    # A member changing to an invalid regex is refused too, and keeps its own.
    resp = g.beat("m1", subscribed_topic_regex="(a")
    assert resp.error is Errors.INVALID_REGULAR_EXPRESSION
    assert g.coord.members["m1"].subscribed_topic_regex == "t-.*"


@pytest.mark.parametrize(("version", "accepted"), [("4.0", False), ("4.1", True)])
def test_named_groups_need_re2j_1_8(version: str, accepted: bool) -> None:
    g = Group(version)
    resp = g.join("m1", regex="(?<kind>t)-.*")
    assert (resp.error is Errors.NONE) is accepted
    if not accepted:
        assert resp.error is Errors.INVALID_REGULAR_EXPRESSION
    else:
        g.poll()
        assert g.coord.resolved_regexes["(?<kind>t)-.*"].topics == {"t-a", "t-b"}


def test_before_4_0_there_is_no_subscribed_topic_regex() -> None:
    g = Group("3.9")
    resp = g.join("m1", regex="t-.*", names=("t-a",))
    assert resp.error is Errors.UNSUPPORTED_VERSION
    # A 3.9 join still needs names; 4.x accepts a regex alone (or an empty list).
    assert g.join("m1", names=()).error is Errors.INVALID_REQUEST
    assert Group("4.0").join("m1", names=()).error is Errors.NONE


def test_full_match_so_a_prefix_pattern_does_not_match_suffixed_names() -> None:
    g = Group("4.1", topics={"topic": 1, "topiccc": 1, "topic-1": 1})
    ok(g.join("m1", regex="^topic*"))
    g.poll()
    assert g.coord.resolved_regexes["^topic*"].topics == {"topic", "topiccc"}


def test_dot_star_matches_the_internal_topics() -> None:
    g = Group("4.1", internal_topics={"__consumer_offsets": 3})
    ok(g.join("m1", regex=".*"))
    g.poll()
    assert g.coord.resolved_regexes[".*"].topics == {"t-a", "t-b", "other", "__consumer_offsets"}
    g.settle("m1")
    assert parts("__consumer_offsets", 3) <= g.owned["m1"]
    # Through the regex, the offsets topic is part of the subscription metadata.
    assert g.coord.subscription_metadata["__consumer_offsets"] == 3


def test_the_actors_factory_adds_the_offsets_topic_and_the_release() -> None:
    coord = make_consumer_coordinator(
        GROUP,
        {"kafka.version": "4.1", "offsets.topic.num.partitions": 5},
        random.Random(1),
        2,
        {"t-a": 2},
    )
    assert coord.kafka_version == "4.1" and coord.regex_refresh_interval_ms == 600_000
    ok_resp = coord.handle(
        0,
        ConsumerGroupHeartbeatRequest(
            1,
            GROUP,
            member_id="m",
            member_epoch=0,
            rebalance_timeout_ms=1,
            subscribed_topic_names=(),
            topic_partitions=(),
            subscribed_topic_regex="__.*",
        ),
    )[0]
    assert isinstance(ok_resp, ConsumerGroupHeartbeatResponse)
    assert ok_resp.error is Errors.NONE
    coord.poll(0)
    assert coord.resolved_regexes["__.*"].topics == {"__consumer_offsets"}
    assert coord.subscription_metadata == {"__consumer_offsets": 5}
    assert make_consumer_coordinator(GROUP, {}, random.Random(1), 2, {}).kafka_version == "3.9"


# ------------------------------------------------------------ 4.0 versus 4.1


@pytest.mark.parametrize(("version", "bumps"), [("4.0", False), ("4.1", True)])
def test_dropping_a_regex_bumps_the_epoch_only_from_4_1(version: str, bumps: bool) -> None:
    g = resolved_group(version)
    g.at(1000)
    ok(g.join("m2", regex="t-.*"))
    g.settle("m1", "m2")
    epoch = g.coord.group_epoch
    mine = g.owned["m2"]
    assert mine
    resp = ok(g.beat("m2", subscribed_topic_regex=""))  # unsubscribe the pattern
    assert g.coord.members["m2"].subscribed_topic_regex is None
    assert g.coord.group_epoch == epoch + (1 if bumps else 0)
    g.settle("m1", "m2")
    if bumps:
        assert g.owned["m2"] == frozenset()
        assert g.owned["m1"] == parts("t-a", 2) | parts("t-b", 1)
    else:
        # 4.0: no bump, so no new target: m2 keeps what it had until something else moves.
        assert g.owned["m2"] == mine
    assert resp.error is Errors.NONE


@pytest.mark.parametrize(("version", "periodic"), [("4.0", False), ("4.1", True)])
def test_the_periodic_refresh_exists_from_4_1(version: str, periodic: bool) -> None:
    g = resolved_group(version)
    assert g.coord.regex_refresh_interval_ms == (600_000 if periodic else None)
    g.at(600_000)
    ok(g.beat("m1"))
    assert g.coord.regex_task_due is None  # not older than the interval yet
    g.at(600_001)
    ok(g.beat("m1"))
    if periodic:
        assert g.coord.regex_task_due == 600_001
        g.poll()
        assert g.resolutions()[-1]["reason"] == "periodic"
        assert g.coord.group_epoch == 2  # the same topics: no rebalance
    else:
        assert g.coord.regex_task_due is None


def test_the_last_member_of_a_regex_takes_its_resolution_along() -> None:
    g = resolved_group()
    ok(g.join("m2", names=("other",)))
    g.settle("m1", "m2")
    ok(g.send("m1", member_epoch=-1))
    assert g.coord.resolved_regexes == {}
    assert g.coord.subscription_metadata == {"other": 3}
    # A member switching away from the last use of its regex drops it too.
    g2 = resolved_group()
    ok(g2.beat("m1", subscribed_topic_names=("other",), subscribed_topic_regex=""))
    assert g2.coord.resolved_regexes == {}
    g2.settle("m1")
    assert g2.owned["m1"] == parts("other", 3)
