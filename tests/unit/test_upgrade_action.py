"""The ``upgrade`` action (online migration, issue 20) up to the consumer host.

The scenario format (``to``, the version gate, the plan), and the host core
starting a member that speaks the other group protocol: its machine, assignor
and the ``member_protocol`` of its events.
"""

from __future__ import annotations

import pytest

from emulator.events import EventKind
from emulator.host.core import MemberSpec
from emulator.modern.classic_member import ClassicMember
from emulator.modern.config import MIGRATION_SINCE
from emulator.modern.consumer_member import ConsumerMember
from emulator.scenario import Scenario, ScenarioError, bundled_scenarios, load_scenario
from emulator.scenario import parse_scenario as _parse
from emulator.scenario.faults import applicability
from tests.unit.test_host_core import Host

BASE = '[[topics]]\nname = "t"\npartitions = 4\n[group]\nconsumers = 3\n'


def parse(timeline: str, version: str = "4.0") -> Scenario:
    return _parse(
        f'kafka_version = "{version}"\n{BASE}[[timeline]]\nat_s = 1\n{timeline}', "t.toml"
    )


def error_of(timeline: str, version: str = "4.0") -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        parse(timeline, version)
    return info.value


class TestScenario:
    def test_a_rolling_upgrade_is_one_restart_per_member_with_its_target(self) -> None:
        sc = parse(
            'action = "upgrade"\nmembers = ["c-0", "c-2"]\nto = "consumer"\n'
            "interval_s = 2\ndowntime_s = 1\n"
        )
        plan = [(a.at_s, a.action, a.members, a.to, a.downtime_s) for a in sc.action_plan()]
        assert plan == [
            (1.0, "upgrade", ("c-0",), "consumer", 1.0),
            (3.0, "upgrade", ("c-2",), "consumer", 1.0),
        ]
        # The action's parameters, as the orchestrator records them, carry the target.
        assert sc.action_plan()[0].params()["to"] == "consumer"

    def test_to_is_required_and_checked(self) -> None:
        missing = error_of('action = "upgrade"\nmembers = "all"\n')
        assert missing.key == "timeline[0].to" and "required" in str(missing)
        wrong = error_of('action = "upgrade"\nmembers = "all"\nto = "kip848"\n')
        assert wrong.key == "timeline[0].to"
        assert '"consumer", "classic"' in str(wrong) and "\n" not in str(wrong)

    def test_kafka_versions_before_migration_refuse_the_action_in_one_line(self) -> None:
        before = f"{MIGRATION_SINCE[0]}.{MIGRATION_SINCE[1] - 1}"
        err = error_of('action = "upgrade"\nmember = "c-1"\nto = "consumer"\n', before)
        assert err.key == "timeline[0].action"
        assert "needs kafka_version 3.8 or later" in str(err) and "\n" not in str(err)
        assert parse('action = "upgrade"\nmember = "c-1"\nto = "consumer"\n', "3.8")

    def test_an_upgraded_member_must_be_alive(self) -> None:
        err = error_of('action = "upgrade"\nmember = "c-7"\nto = "consumer"\n')
        assert "c-7" in str(err)

    def test_the_zookeeper_consumer_skips_it(self) -> None:
        (a,) = parse('action = "upgrade"\nmember = "c-1"\nto = "consumer"\n').action_plan()
        assert applicability(a, "zookeeper") is not None
        assert applicability(a, "classic-eager") is None

    @pytest.mark.parametrize(
        ("name", "upgrades", "static"),
        [
            ("upgrade-rolling", 10, False),
            ("upgrade-rolling-static", 10, True),
            ("downgrade-rollback", 10, False),
        ],
    )
    def test_bundled_migration_scenarios(self, name: str, upgrades: int, static: bool) -> None:
        sc = load_scenario(bundled_scenarios()[name])
        ups = [a for a in sc.action_plan() if a.action == "upgrade"]
        assert len(ups) == upgrades
        assert sc.group.static_membership is static
        if name == "downgrade-rollback":
            # Half the group goes over and the same half comes back.
            there = [a.members[0] for a in ups if a.to == "consumer"]
            back = [a.members[0] for a in ups if a.to == "classic"]
            assert there == back == [f"c-{i}" for i in range(5)]
            assert max(a.at_s for a in ups if a.to == "consumer") < min(
                a.at_s for a in ups if a.to == "classic"
            )
        else:
            assert {a.to for a in ups} == {"consumer"}
        if static:
            downtime = max(a.downtime_s for a in ups)
            assert downtime * 1000 < sc.kafka_int("session.timeout.ms", "classic")


def group(mixed: str, version: str = "4.0", consumers: int = 3) -> Scenario:
    return _parse(
        f'kafka_version = "{version}"\n[[topics]]\nname = "t"\npartitions = 4\n'
        f"[group]\nconsumers = {consumers}\nmixed = {mixed}\n",
        "t.toml",
    )


def group_error(mixed: str, version: str = "4.0") -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        group(mixed, version)
    return info.value


class TestMixedStart:
    def test_a_count_takes_the_first_members(self) -> None:
        sc = group('{ to = "consumer", members = 2 }')
        assert (sc.group.mixed_to, sc.group.mixed_members) == ("consumer", ("c-0", "c-1"))
        assert sc.to_dict()["group"]["mixed"] == {"to": "consumer", "members": ["c-0", "c-1"]}

    def test_names_are_taken_as_given(self) -> None:
        sc = group('{ to = "classic", members = ["c-2", "c-0"] }')
        assert sc.group.mixed_members == ("c-2", "c-0")

    def test_a_group_without_it_has_no_mixed_entry(self) -> None:
        # Old scenarios keep their run ids: the key appears only when set.
        assert "mixed" not in parse('action = "leave"\nmember = "c-1"\n').to_dict()["group"]

    @pytest.mark.parametrize(
        ("mixed", "key", "says"),
        [
            ('"consumer"', "[group].mixed", "a table"),
            ('{ to = "consumer", members = 4 }', "[group].mixed.members", "from 1 to"),
            ('{ to = "consumer", members = 0 }', "[group].mixed.members", "from 1 to"),
            ('{ to = "consumer", members = ["c-9"] }', "[group].mixed.members", '"c-9"'),
            ('{ to = "consumer", members = ["c-1", "c-1"] }', "[group].mixed.members", "distinct"),
            ('{ members = 1 }', "[group].mixed.to", "required"),
            ('{ to = "consumer", members = 1, at = 3 }', "[group].mixed.at", "at"),
        ],
    )
    def test_bad_values_name_the_key_in_one_line(self, mixed: str, key: str, says: str) -> None:
        err = group_error(mixed)
        assert err.key == key and says in str(err) and "\n" not in str(err)

    def test_versions_before_migration_refuse_it(self) -> None:
        err = group_error('{ to = "consumer", members = 1 }', "3.7")
        assert err.key == "[group].mixed" and "3.8 or later" in str(err)


class TestHostCore:
    def test_a_consumer_member_in_a_classic_run(self) -> None:
        host = Host("classic-eager")
        spec = MemberSpec("c-0", "c-0", {"t": 1}, protocol="consumer")
        assert host.core.member_protocol(spec) == ("consumer", None)
        host.core.expect([spec])
        host.core.add_modern(spec, [0, 1, 2])
        member = host.core.members["c-0"]
        assert isinstance(getattr(member, "machine", None), ConsumerMember)
        started = host.events.of(EventKind.CONSUMER_STARTED)
        assert started and started[-1]["member_protocol"] == "consumer"

    def test_a_classic_member_in_a_consumer_run_uses_the_default_assignors(self) -> None:
        host = Host("consumer")
        spec = MemberSpec("c-0", "c-0", {"t": 1}, protocol="classic-eager")
        assert host.core.member_protocol(spec) == ("classic-eager", "range")
        host.core.expect([spec])
        host.core.add_modern(spec, [0, 1, 2])
        member = host.core.members["c-0"]
        assert isinstance(getattr(member, "machine", None), ClassicMember)
        assert host.events.of(EventKind.CONSUMER_STARTED)[-1]["member_protocol"] == "classic"

    def test_a_member_of_the_run_protocol_has_no_member_protocol_field(self) -> None:
        host = Host("classic-eager")
        spec = MemberSpec("c-0", "c-0", {"t": 1})
        assert host.core.member_protocol(spec) == ("classic-eager", host.core.config.assignor)
        host.core.expect([spec])
        host.core.add_modern(spec, [0, 1, 2])
        assert "member_protocol" not in host.events.of(EventKind.CONSUMER_STARTED)[-1]
