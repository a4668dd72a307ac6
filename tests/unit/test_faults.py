"""The fault vocabulary: timeline expansion into a seeded plan, and where faults apply.

Pure core: scenarios are parsed from text, plans compared exactly.
"""

from __future__ import annotations

import json

import pytest

from emulator.protocols import LEGACY_PROTOCOL, MODERN_PROTOCOLS, RUN_PROTOCOLS
from emulator.scenario import (
    TIMELINE_ACTIONS,
    MembershipChange,
    Scenario,
    ScenarioError,
    parse_scenario,
)
from emulator.scenario.faults import (
    ACTIONS,
    FAULT_ACTIONS,
    MEMBERSHIP_ACTIONS,
    PARTITION_TARGETS,
    TIMED_ACTIONS,
    PlannedAction,
    applicability,
)

HEAD = (
    "duration_s = 100.0\nseed = 7\n"
    "[cluster]\nbrokers = 3\nzookeeper_ensemble = 5\n"
    '[[topics]]\nname = "t"\npartitions = 4\n'
    '[[topics]]\nname = "u"\npartitions = 2\n'
    "[group]\nconsumers = 4\nconsumers_per_host = 2\n"
)


def entry(at_s: float, action: str, **keys: object) -> str:
    lines = [f"[[timeline]]\nat_s = {at_s}\naction = {json.dumps(action)}"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in keys.items()]
    return "\n".join(lines) + "\n"


def scenario(*entries: str, head: str = HEAD) -> Scenario:
    return parse_scenario(head + "".join(entries), "f.toml")


def plan(*entries: str, head: str = HEAD) -> list[tuple[float, str, tuple[str, ...]]]:
    return [(a.at_s, a.action, a.members) for a in scenario(*entries, head=head).action_plan()]


def error(*entries: str, head: str = HEAD) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        scenario(*entries, head=head)
    assert "\n" not in str(info.value)
    assert str(info.value).startswith("scenario f.toml: ")
    assert info.value.key in str(info.value)
    return info.value


# --------------------------------------------------------------------------- vocabulary


class TestVocabulary:
    def test_actions_partition_into_membership_and_faults(self) -> None:
        assert set(MEMBERSHIP_ACTIONS) == {"join", "leave", "crash"}
        assert set(MEMBERSHIP_ACTIONS).isdisjoint(FAULT_ACTIONS)
        assert ACTIONS == MEMBERSHIP_ACTIONS + FAULT_ACTIONS
        assert set(TIMED_ACTIONS) <= set(FAULT_ACTIONS)

    def test_timeline_vocabulary_expands_into_planned_actions(self) -> None:
        # zk_quorum_loss is the only timeline action that is not itself planned.
        assert set(TIMELINE_ACTIONS) - set(ACTIONS) == {"zk_quorum_loss"}
        assert set(ACTIONS) - set(TIMELINE_ACTIONS) == set()

    def test_protocol_lists_match_the_run_protocols(self) -> None:
        assert {LEGACY_PROTOCOL, *MODERN_PROTOCOLS} == set(RUN_PROTOCOLS)

    def test_params_only_set_fields_and_json(self) -> None:
        action = PlannedAction(12.5, "pause", members=("c-1",), duration_s=20.0, event_index=3)
        assert action.params() == {
            "at_s": 12.5,
            "event_index": 3,
            "members": ["c-1"],
            "duration_s": 20.0,
        }
        broker = PlannedAction(1.0, "broker_crash", broker=0)
        assert broker.params() == {"at_s": 1.0, "event_index": 0, "broker": 0}
        restart = PlannedAction(2.0, "restart", members=("c-0",))
        assert restart.params()["downtime_s"] == 0.0
        sub = PlannedAction(3.0, "subscribe", members=("c-0",), topics=("t", "u"))
        assert json.loads(json.dumps(sub.params()))["topics"] == ["t", "u"]


# --------------------------------------------------------------------------- applicability


class TestApplicability:
    @pytest.mark.parametrize("protocol", RUN_PROTOCOLS)
    def test_zookeeper_partition_only_for_the_legacy_consumer(self, protocol: str) -> None:
        action = PlannedAction(5.0, "network_partition", ("c-1",), target="zookeeper")
        note = applicability(action, protocol)
        if protocol == "zookeeper":
            assert note is None
        else:
            assert note is not None and "\n" not in note
            assert "never talk to ZooKeeper" in note and protocol in note
            assert "network_partition to zookeeper" in note and "c-1" in note

    @pytest.mark.parametrize("protocol", RUN_PROTOCOLS)
    def test_coordinator_partition_only_for_modern_protocols(self, protocol: str) -> None:
        action = PlannedAction(5.0, "network_partition", ("c-1",), target="coordinator")
        note = applicability(action, protocol)
        if protocol in ("classic-eager", "classic-cooperative", "consumer", "share"):
            assert note is None
        else:
            assert note is not None and "no group coordinator" in note and "\n" not in note

    @pytest.mark.parametrize("protocol", RUN_PROTOCOLS)
    def test_an_upgrade_applies_where_there_is_a_group_protocol(self, protocol: str) -> None:
        note = applicability(PlannedAction(1.0, "upgrade", ("c-0",), to="consumer"), protocol)
        if protocol in ("zookeeper", "share"):
            assert note is not None and "no group protocol to switch" in note
        else:
            assert note is None

    @pytest.mark.parametrize("protocol", RUN_PROTOCOLS)
    def test_everything_else_applies_everywhere(self, protocol: str) -> None:
        others = [PlannedAction(1.0, "network_partition", ("c-0",), target="brokers")]
        others += [
            PlannedAction(1.0, a) for a in ACTIONS if a not in ("network_partition", "upgrade")
        ]
        for action in others:
            assert applicability(action, protocol) is None, action.action

    def test_targets(self) -> None:
        assert PARTITION_TARGETS == ("zookeeper", "coordinator", "brokers")

    def test_unknown_protocol(self) -> None:
        with pytest.raises(ValueError, match="unknown protocol"):
            applicability(PlannedAction(1.0, "join"), "classic")


# --------------------------------------------------------------------------- expansion


class TestMembershipExpansion:
    def test_join_burst_spreads_the_joins(self) -> None:
        assert plan(entry(5, "join", count=3, interval_s=2.5)) == [
            (5.0, "join", ("c-4",)),
            (7.5, "join", ("c-5",)),
            (10.0, "join", ("c-6",)),
        ]

    def test_joins_are_named_in_time_order_across_entries(self) -> None:
        got = plan(entry(0, "join", count=2, interval_s=10), entry(5, "join"))
        assert got == [(0.0, "join", ("c-4",)), (5.0, "join", ("c-5",)), (10.0, "join", ("c-6",))]

    def test_scale_in_takes_the_newest_live_members(self) -> None:
        got = plan(
            entry(1, "join", count=2),
            entry(2, "crash", member="c-5"),
            entry(10, "leave", count=3, interval_s=1),
        )
        assert got[3:] == [
            (10.0, "leave", ("c-4",)),
            (11.0, "leave", ("c-3",)),
            (12.0, "leave", ("c-2",)),
        ]

    def test_scale_in_all_at_once(self) -> None:
        sc = scenario(entry(10, "crash", count=2))
        assert [(a.at_s, a.members) for a in sc.action_plan()] == [
            (10.0, ("c-3",)),
            (10.0, ("c-2",)),
        ]
        assert sc.member_names_at(10.0) == ("c-0", "c-1")

    def test_random_member_is_seeded_and_alive(self) -> None:
        picks = {
            scenario(
                entry(5, "crash", member="random"), head=HEAD.replace("seed = 7", f"seed = {s}")
            )
            .action_plan()[0]
            .members[0]
            for s in range(40)
        }
        assert picks <= {"c-0", "c-1", "c-2", "c-3"} and len(picks) > 1
        one = scenario(entry(5, "crash", member="random")).action_plan()
        two = scenario(entry(5, "crash", member="random")).action_plan()
        assert one == two

    def test_random_never_picks_a_dead_member(self) -> None:
        for seed in range(30):
            head = HEAD.replace("seed = 7", f"seed = {seed}")
            sc = scenario(
                entry(1, "crash", member="c-0"),
                entry(2, "crash", member="c-1"),
                entry(3, "leave", member="random"),
                head=head,
            )
            assert sc.action_plan()[2].members[0] in ("c-2", "c-3")

    def test_rolling_restart_in_creation_order(self) -> None:
        sc = scenario(
            entry(1, "join"),
            entry(20, "restart", members=["c-4", "c-0", "c-2"], interval_s=5, downtime_s=2),
        )
        restarts = [a for a in sc.action_plan() if a.action == "restart"]
        assert [(a.at_s, a.members, a.downtime_s) for a in restarts] == [
            (20.0, ("c-0",), 2.0),
            (25.0, ("c-2",), 2.0),
            (30.0, ("c-4",), 2.0),
        ]
        assert sc.member_names_at(21.0) == ("c-1", "c-2", "c-3", "c-4")
        assert sc.member_names_at(22.0) == ("c-0", "c-1", "c-2", "c-3", "c-4")
        # the name is kept: no new member, and the membership plan shows leave + join
        assert sc.all_members() == ("c-0", "c-1", "c-2", "c-3", "c-4")
        assert MembershipChange(20.0, "leave", "c-0", 1) in sc.membership_plan()
        assert MembershipChange(22.0, "join", "c-0", 1) in sc.membership_plan()

    def test_restart_all_at_once_without_interval(self) -> None:
        got = plan(entry(10, "restart", members="all"))
        assert got == [(10.0, "restart", (f"c-{i}",)) for i in range(4)]

    def test_restart_single_member(self) -> None:
        assert plan(entry(10, "restart", member="c-3")) == [(10.0, "restart", ("c-3",))]

    def test_host_crash_kills_every_member_on_the_host(self) -> None:
        # 6 members, 2 per host -> 3 hosts: c-0, c-3 on 0; c-1, c-4 on 1; c-2, c-5 on 2
        sc = scenario(entry(1, "join", count=2), entry(10, "host_crash", host=1))
        assert sc.host_count == 3
        assert [sc.host_of(m) for m in sc.all_members()] == [0, 1, 2, 0, 1, 2]
        crash = sc.action_plan()[-1]
        assert (crash.action, crash.host, crash.members) == ("host_crash", 1, ("c-1", "c-4"))
        assert sc.member_names_at(10.0) == ("c-0", "c-2", "c-3", "c-5")
        changes = [c for c in sc.membership_plan() if c.at_s == 10.0]
        assert [(c.action, c.member) for c in changes] == [("crash", "c-1"), ("crash", "c-4")]

    def test_host_of_and_host_count(self) -> None:
        sc = scenario()
        assert sc.host_count == 2
        assert [sc.host_of(f"c-{i}") for i in range(4)] == [0, 1, 0, 1]
        with pytest.raises(KeyError):
            sc.host_of("c-4")
        with pytest.raises(KeyError):
            sc.host_of("x")

    def test_ties_in_file_order_and_expansion_order(self) -> None:
        sc = scenario(
            entry(10, "pause", member="c-1", duration_s=5),
            entry(0, "join", count=2, interval_s=10),
            entry(10, "broker_crash", broker=0),
        )
        assert [(a.at_s, a.action, a.event_index) for a in sc.action_plan()] == [
            (0.0, "join", 1),
            (10.0, "pause", 0),
            (10.0, "join", 1),
            (10.0, "broker_crash", 2),
        ]


class TestFaultExpansion:
    def test_member_faults(self) -> None:
        sc = scenario(
            entry(5, "pause", member="c-1", duration_s=20),
            entry(6, "slow", member="c-2", duration_s=10, processing_ms_per_message=400),
            entry(7, "network_partition", members=["c-3", "c-0"], target="brokers", duration_s=3),
            entry(8, "network_partition", member="random", target="coordinator", duration_s=3),
        )
        pause, slow, part, part2 = sc.action_plan()
        assert (pause.members, pause.duration_s) == (("c-1",), 20.0)
        assert (slow.duration_s, slow.processing_ms_per_message) == (10.0, 400.0)
        assert (part.members, part.target, part.duration_s) == (("c-0", "c-3"), "brokers", 3.0)
        assert len(part2.members) == 1 and part2.target == "coordinator"
        # faults do not change membership
        assert sc.membership_plan() == ()

    def test_partition_of_all_members(self) -> None:
        sc = scenario(
            entry(1, "crash", member="c-2"),
            entry(7, "network_partition", members="all", target="zookeeper", duration_s=3),
        )
        assert sc.action_plan()[1].members == ("c-0", "c-1", "c-3")

    def test_broker_restart_after(self) -> None:
        got = [
            (a.at_s, a.action, a.broker)
            for a in scenario(
                entry(10, "broker_crash", broker=1, restart_after_s=15),
                entry(30, "broker_crash", broker=1),
                entry(40, "broker_restart", broker=1),
            ).action_plan()
        ]
        assert got == [
            (10.0, "broker_crash", 1),
            (25.0, "broker_restart", 1),
            (30.0, "broker_crash", 1),
            (40.0, "broker_restart", 1),
        ]

    def test_zk_restart_after(self) -> None:
        got = [
            (a.at_s, a.action, a.zk_member)
            for a in scenario(
                entry(10, "zk_crash", zk_member=4, restart_after_s=5),
                entry(20, "zk_crash", zk_member=0),
                entry(30, "zk_restart", zk_member=0),
            ).action_plan()
        ]
        assert got == [
            (10.0, "zk_crash", 4),
            (15.0, "zk_restart", 4),
            (20.0, "zk_crash", 0),
            (30.0, "zk_restart", 0),
        ]

    def test_quorum_loss_crashes_a_seeded_majority(self) -> None:
        sc = scenario(entry(10, "zk_quorum_loss", duration_s=15))
        actions = sc.action_plan()
        crashed = [a.zk_member for a in actions if a.action == "zk_crash"]
        restarted = [a.zk_member for a in actions if a.action == "zk_restart"]
        assert len(crashed) == 3 and len(set(crashed)) == 3  # 5 // 2 + 1
        assert crashed == restarted == sorted(crashed)
        assert {a.at_s for a in actions if a.action == "zk_crash"} == {10.0}
        assert {a.at_s for a in actions if a.action == "zk_restart"} == {25.0}
        assert {a.event_index for a in actions} == {0}
        assert scenario(entry(10, "zk_quorum_loss", duration_s=15)).action_plan() == actions
        choices = {
            tuple(
                a.zk_member
                for a in scenario(
                    entry(10, "zk_quorum_loss", duration_s=15),
                    head=HEAD.replace("seed = 7", f"seed = {s}"),
                ).action_plan()
                if a.action == "zk_crash"
            )
            for s in range(30)
        }
        assert len(choices) > 1

    def test_quorum_loss_chooses_among_live_members(self) -> None:
        for seed in range(20):
            sc = scenario(
                entry(5, "zk_crash", zk_member=2),
                entry(10, "zk_quorum_loss", duration_s=5),
                head=HEAD.replace("seed = 7", f"seed = {seed}"),
            )
            crashed = [a.zk_member for a in sc.action_plan()[1:] if a.action == "zk_crash"]
            assert len(crashed) == 3 and 2 not in crashed

    def test_quorum_loss_of_a_single_member_ensemble(self) -> None:
        head = HEAD.replace("zookeeper_ensemble = 5", "zookeeper_ensemble = 1")
        got = [
            (a.at_s, a.action, a.zk_member)
            for a in scenario(entry(10, "zk_quorum_loss", duration_s=5), head=head).action_plan()
        ]
        assert got == [(10.0, "zk_crash", 0), (15.0, "zk_restart", 0)]

    def test_add_partitions_grows_step_by_step(self) -> None:
        sc = scenario(
            entry(10, "add_partitions", topic="t", partitions=6),
            entry(20, "add_partitions", topic="t", partitions=9),
        )
        assert [(a.topic, a.partitions) for a in sc.action_plan()] == [("t", 6), ("t", 9)]

    def test_subscribe_defaults_to_all_live_members(self) -> None:
        sc = scenario(entry(1, "leave", member="c-0"), entry(10, "subscribe", topics=["u"]))
        sub = sc.action_plan()[1]
        assert (sub.members, sub.topics) == (("c-1", "c-2", "c-3"), ("u",))
        sc = scenario(entry(10, "subscribe", members=["c-2"], topics=["t", "u"]))
        assert sc.action_plan()[0].members == ("c-2",)

    def test_plan_is_deterministic(self) -> None:
        entries = (
            entry(5, "crash", member="random"),
            entry(10, "zk_quorum_loss", duration_s=5),
            entry(20, "restart", members="all", interval_s=1),
        )
        assert scenario(*entries).action_plan() == scenario(*entries).action_plan()


# --------------------------------------------------------------------------- errors through time


class TestTimelineErrors:
    def test_member_crashed_with_its_host(self) -> None:
        err = error(entry(10, "host_crash", host=1), entry(20, "pause", member="c-3", duration_s=1))
        assert err.key == "timeline[1].member"
        assert (
            'no member "c-3" exists at 20.0 s (it crashed with consumer host 1 at 10.0 s)'
            in str(err)
        )

    def test_member_down_in_a_restart(self) -> None:
        err = error(
            entry(10, "restart", member="c-1", downtime_s=5),
            entry(12, "crash", member="c-1"),
        )
        assert err.key == "timeline[1].member"
        assert "restarting, down from 10.0 to 15.0 s" in str(err)
        # after the restart it is alive again
        scenario(entry(10, "restart", member="c-1", downtime_s=5), entry(15, "crash", member="c-1"))

    def test_rolling_restart_names_a_member_gone_before_its_turn(self) -> None:
        err = error(
            entry(10, "restart", members=["c-0", "c-3"], interval_s=10),
            entry(15, "crash", member="c-3"),
        )
        assert err.key == "timeline[0].members"
        assert 'no member "c-3" exists at 20.0 s (it crashed at 15.0 s)' in str(err)

    def test_scale_in_runs_out_of_members(self) -> None:
        err = error(entry(10, "leave", count=5))
        assert err.key == "timeline[0].count"
        assert "no member is left at 10.0 s for leave 5 of 5" in str(err)

    def test_random_with_no_member_alive(self) -> None:
        err = error(entry(1, "leave", count=4), entry(2, "crash", member="random"))
        assert err.key == "timeline[1].member" and "to choose at random" in str(err)

    def test_join_on_a_crashed_host(self) -> None:
        # 5 members, 2 per host -> 3 hosts: the new c-4 goes to host 4 % 3 = 1
        err = error(entry(10, "host_crash", host=1), entry(20, "join"))
        assert err.key == "timeline[1].at_s"
        assert "c-4 would start at 20.0 s on consumer host 1, which crashed at 10.0 s" in str(err)
        scenario(entry(10, "host_crash", host=0), entry(20, "join"))

    def test_host_index_out_of_range(self) -> None:
        err = error(entry(10, "host_crash", host=2))
        assert err.key == "timeline[0].host"
        assert "between 0 and 1 (consumer hosts minus one" in str(err) and "got 2" in str(err)

    def test_host_crashed_twice(self) -> None:
        err = error(entry(10, "host_crash", host=0), entry(11, "host_crash", host=0))
        assert err.key == "timeline[1].host" and "already down" in str(err)

    def test_broker_crashed_twice_and_restart_of_a_live_broker(self) -> None:
        err = error(entry(10, "broker_crash", broker=0), entry(11, "broker_crash", broker=0))
        assert err.key == "timeline[1].broker"
        assert "broker 0 is already down at 11.0 s (it crashed at 10.0 s)" in str(err)
        err = error(entry(10, "broker_restart", broker=2))
        assert err.key == "timeline[0].broker" and "broker 2 is not down at 10.0 s" in str(err)
        err = error(
            entry(10, "broker_crash", broker=0, restart_after_s=10),
            entry(15, "broker_restart", broker=0),
        )
        assert err.key == "timeline[0].restart_after_s" and "not down at 20.0 s" in str(err)

    def test_zk_member_crashed_twice_and_restart_of_a_live_member(self) -> None:
        err = error(entry(10, "zk_crash", zk_member=1), entry(11, "zk_crash", zk_member=1))
        assert err.key == "timeline[1].zk_member" and "ZooKeeper member 1 is already down" in str(
            err
        )
        err = error(entry(10, "zk_restart", zk_member=1))
        assert err.key == "timeline[0].zk_member" and "not down" in str(err)

    def test_quorum_loss_needs_a_live_majority(self) -> None:
        err = error(
            entry(1, "zk_crash", zk_member=0),
            entry(1, "zk_crash", zk_member=1),
            entry(1, "zk_crash", zk_member=2),
            entry(10, "zk_quorum_loss", duration_s=5),
        )
        assert err.key == "timeline[3].action" and "only 2 of 5" in str(err)

    def test_partitions_must_grow(self) -> None:
        err = error(
            entry(10, "add_partitions", topic="t", partitions=6),
            entry(20, "add_partitions", topic="t", partitions=6),
        )
        assert err.key == "timeline[1].partitions"
        assert 'larger than the 6 partitions "t" has at 20.0 s, got 6' in str(err)
        err = error(entry(10, "add_partitions", topic="u", partitions=2))
        assert err.key == "timeline[0].partitions"

    @pytest.mark.parametrize(
        ("entries", "key", "fragment"),
        [
            (
                [entry(90, "join", count=3, interval_s=10)],
                "timeline[0].interval_s",
                "join 3 of 3 would be at 110.0 s, after duration_s (100.0)",
            ),
            (
                [entry(95, "leave", count=2, interval_s=10)],
                "timeline[0].interval_s",
                "leave 2 of 2 would be at 105.0 s",
            ),
            (
                [entry(90, "restart", members="all", interval_s=5)],
                "timeline[0].interval_s",
                "the restart of c-3 would be at 105.0 s",
            ),
            (
                [entry(95, "restart", member="c-0", downtime_s=10)],
                "timeline[0].downtime_s",
                "the return of c-0 would be at 105.0 s",
            ),
            (
                [entry(90, "pause", member="c-0", duration_s=20)],
                "timeline[0].duration_s",
                "the end of the pause would be at 110.0 s",
            ),
            (
                [entry(90, "broker_crash", broker=0, restart_after_s=20)],
                "timeline[0].restart_after_s",
                "the restart of broker 0 would be at 110.0 s",
            ),
            (
                [entry(90, "zk_quorum_loss", duration_s=20)],
                "timeline[0].duration_s",
                "the end of the zk_quorum_loss",
            ),
        ],
    )
    def test_everything_ends_within_the_run(
        self, entries: list[str], key: str, fragment: str
    ) -> None:
        err = error(*entries)
        assert err.key == key
        assert fragment in str(err)
