"""The timeline's dispatch table (actors/timeline.py) on a fake run: no Ray, no ZooKeeper."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from actors import timeline
from actors.timeline import HANDLERS, NOT_CARRIED_OUT, Launch
from emulator.eventlog import EventWriter, iter_events
from emulator.scenario.faults import ACTIONS, PlannedAction


class _Method:
    """``host.leave`` as Ray has it: ``.remote(*args)`` returns the call (recorded)."""

    def __init__(self, host: _Host, name: str) -> None:
        self.host, self.name = host, name

    def remote(self, *args: Any) -> tuple[str, int, tuple[Any, ...]]:
        call = (self.name, self.host.index, args)
        self.host.calls.append(call)
        return call


class _Host:
    def __init__(self, index: int) -> None:
        self.index = index
        self.calls: list[tuple[str, int, tuple[Any, ...]]] = []

    def __getattr__(self, name: str) -> _Method:
        return _Method(self, name)


class _Ensemble:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int, bool]] = []

    def kill_member(self, i: int) -> None:
        self.calls.append(("kill", i, True))

    def restart_member(self, i: int, wait: bool = True) -> None:
        self.calls.append(("restart", i, wait))


class _Run:
    """A protocol run with two hosts: c-0 and c-1 on host 0, c-2 on host 1."""

    def __init__(self, protocol: str = "classic-eager") -> None:
        self.protocol = protocol
        self.scenario: Any = SimpleNamespace(group=SimpleNamespace(id="g"))
        self.notes: list[str] = []
        self.ensemble: Any = _Ensemble()
        self.hosts: list[Any] = [_Host(0), _Host(1)]
        self.member_host = {"c-0": 0, "c-1": 0, "c-2": 1}
        self.dead_hosts: set[int] = set()
        self.live_members = {"c-0", "c-1", "c-2"}
        self.did: list[tuple[Any, ...]] = []
        self.gathered: list[dict[int, Any]] = []

    def join(self, names: Sequence[str], launch: Launch, at_s: float) -> None:
        self.did.append(("join", tuple(names), launch, at_s))

    def host_of(self, name: str) -> Any:
        h = self.member_host.get(name)
        return None if h is None or h in self.dead_hosts else self.hosts[h]

    def gather(self, calls: dict[int, Any], timeout: float) -> dict[int, Any]:
        self.gathered.append(calls)
        return calls

    def crash_host(self, index: int) -> None:
        self.did.append(("crash_host", index))

    def crash_broker(self, broker_id: int) -> None:
        self.did.append(("crash_broker", broker_id))

    def restart_broker(self, broker_id: int) -> None:
        self.did.append(("restart_broker", broker_id))

    def add_partitions(self, topic: str, total: int) -> None:
        self.did.append(("add_partitions", topic, total))

    def create_topic(self, topic: str, partitions: int, replication_factor: int) -> None:
        self.did.append(("create_topic", topic, partitions, replication_factor))

    def delete_topic(self, topic: str) -> bool:
        self.did.append(("delete_topic", topic))
        return len([d for d in self.did if d == ("delete_topic", topic)]) == 1


@pytest.fixture
def log(tmp_path: Path) -> Iterator[EventWriter]:
    w = EventWriter(
        tmp_path / "orchestrator.msgpack",
        run_id="r",
        node="n",
        actor="orchestrator",
        protocol="classic-eager",
        emu_clock=lambda: 0.0,
        validate=True,
    )
    yield w
    w.close()  # a second close is a no-op


def _events(w: EventWriter) -> list[dict[str, Any]]:
    w.close()
    return [dict(e) for e in iter_events(w.path)]


LAUNCH = Launch(origin=100.0, crashers=frozenset({"c-1"}))


def test_every_planned_action_has_a_handler() -> None:
    assert set(HANDLERS) | NOT_CARRIED_OUT == set(ACTIONS)
    assert not set(HANDLERS) & NOT_CARRIED_OUT


def test_an_action_not_carried_out_yet_is_skipped_with_a_note(
    log: EventWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    action = "create_topic"
    monkeypatch.setattr(timeline, "NOT_CARRIED_OUT", frozenset({action}))
    run = _Run()
    planned = PlannedAction(4.0, action, topic="t2", partitions=3, replication_factor=1)
    timeline.apply(run, planned, LAUNCH, log)
    assert run.did == [] and run.notes == [
        f"{action} at 4.0 s (timeline[0]) skipped: not carried out by this version of the "
        "orchestrator"
    ]
    events = _events(log)
    assert [(e["kind"], e["reason"], e["state"]) for e in events] == [
        ("action_applied", action, "skipped")
    ]


def test_member_actions_go_to_the_members_host_one_at_a_time(log: EventWriter) -> None:
    run = _Run()
    timeline.apply(run, PlannedAction(5.0, "pause", ("c-2",), duration_s=3.0), LAUNCH, log)
    timeline.apply(
        run,
        PlannedAction(6.0, "slow", ("c-0",), duration_s=2.0, processing_ms_per_message=50.0),
        LAUNCH,
        log,
    )
    timeline.apply(run, PlannedAction(7.0, "restart", ("c-1",), downtime_s=1.5), LAUNCH, log)
    timeline.apply(run, PlannedAction(8.0, "crash", ("c-2",)), LAUNCH, log)
    assert run.hosts[1].calls == [("pause", 1, ("c-2", 3000.0)), ("crash", 1, ("c-2",))]
    assert run.hosts[0].calls == [
        ("slow", 0, ("c-0", 2000.0, 50.0)),
        ("restart", 0, ("c-1", 1500.0)),
    ]
    assert run.live_members == {"c-0", "c-1"}  # a crash leaves the live set, a pause does not
    kinds = [(e["kind"], e["reason"], e.get("member")) for e in _events(log)]
    assert kinds == [
        ("action_applied", "pause", "c-2"),
        ("action_applied", "slow", "c-0"),
        ("action_applied", "restart", "c-1"),
        ("action_applied", "crash", "c-2"),
    ]


def test_partitions_go_to_each_live_host_once_with_all_its_members(log: EventWriter) -> None:
    run = _Run()
    run.dead_hosts.add(1)
    action = PlannedAction(
        5.0, "network_partition", ("c-0", "c-1", "c-2"), duration_s=4.0, target="brokers"
    )
    timeline.apply(run, action, LAUNCH, log)
    assert run.hosts[0].calls == [("partition", 0, (["c-0", "c-1"], "brokers", 4000.0))]
    assert run.hosts[1].calls == []


def test_orchestrator_actions_are_faults_it_records(log: EventWriter) -> None:
    run = _Run()
    timeline.apply(run, PlannedAction(1.0, "broker_crash", broker=2), LAUNCH, log)
    timeline.apply(run, PlannedAction(2.0, "zk_restart", zk_member=1), LAUNCH, log)
    timeline.apply(run, PlannedAction(3.0, "add_partitions", topic="t", partitions=12), LAUNCH, log)
    timeline.apply(run, PlannedAction(4.0, "join", ("c-3",)), LAUNCH, log)
    assert run.did == [
        ("crash_broker", 2),
        ("add_partitions", "t", 12),
        ("join", ("c-3",), LAUNCH, 4.0),
    ]
    assert run.ensemble.calls == [("restart", 1, False)]  # no wait for a lone member
    kinds = [(e["kind"], e.get("reason")) for e in _events(log)]
    assert kinds == [
        ("fault_injected", "broker_crash"),
        ("broker_crashed", None),
        ("fault_injected", "zk_restart"),
        ("fault_injected", "add_partitions"),
        ("action_applied", "join"),
    ]


def test_what_does_not_apply_is_skipped_with_a_note(log: EventWriter) -> None:
    run = _Run("classic-cooperative")
    run.ensemble = None
    cut = PlannedAction(5.0, "network_partition", ("c-0",), duration_s=4.0, target="zookeeper")
    timeline.apply(run, cut, LAUNCH, log)
    timeline.apply(run, PlannedAction(6.0, "zk_crash", zk_member=0), LAUNCH, log)
    assert run.hosts[0].calls == [] and run.did == []
    assert len(run.notes) == 2
    assert "never talk to ZooKeeper" in run.notes[0]
    assert "needs the embedded ZooKeeper ensemble" in run.notes[1]
    events = _events(log)
    assert [(e["kind"], e.get("state")) for e in events] == [
        ("action_applied", "skipped"),
        ("action_applied", "skipped"),
    ]
    assert events[0]["detail"] == run.notes[0]


def test_a_member_whose_host_is_gone_is_passed_over(log: EventWriter) -> None:
    run = _Run()
    run.dead_hosts.add(0)
    timeline.apply(run, PlannedAction(5.0, "leave", ("c-1",)), LAUNCH, log)
    assert run.hosts[0].calls == [] and run.gathered == []
    assert "c-1" in run.live_members


def test_a_burst_join_is_recorded_as_given(log: EventWriter) -> None:
    run = _Run()
    timeline.record(run, PlannedAction(9.0, "join", ("c-4",)), log)
    (event,) = _events(log)
    assert (event["kind"], event["reason"], event["member"], event["group"]) == (
        "action_applied",
        "join",
        "c-4",
        "g",
    )


def _scenario(delete_topic_enable: bool) -> Any:
    settings = SimpleNamespace(delete_topic_enable=delete_topic_enable)
    return SimpleNamespace(group=SimpleNamespace(id="g"), broker_settings=lambda _p: settings)


def test_create_topic_goes_to_the_run_as_the_admin_tool_would(log: EventWriter) -> None:
    run = _Run()
    planned = PlannedAction(4.0, "create_topic", topic="t2", partitions=3, replication_factor=2)
    timeline.apply(run, planned, LAUNCH, log)
    assert run.did == [("create_topic", "t2", 3, 2)] and run.notes == []
    events = _events(log)
    assert [(e["kind"], e["reason"]) for e in events] == [("fault_injected", "create_topic")]


def test_delete_topic_with_deletion_enabled_leaves_the_rest_to_the_controller(
    log: EventWriter,
) -> None:
    run = _Run()
    run.scenario = _scenario(True)
    timeline.apply(run, PlannedAction(6.0, "delete_topic", topic="t2"), LAUNCH, log)
    assert run.did == [("delete_topic", "t2")] and run.notes == []
    assert [e["kind"] for e in _events(log)] == ["fault_injected"]


def test_delete_topic_with_deletion_disabled_is_logged_as_ignored(log: EventWriter) -> None:
    run = _Run("zookeeper")
    run.scenario = _scenario(False)
    for at in (6.0, 7.0):
        timeline.apply(run, PlannedAction(at, "delete_topic", topic="t2"), LAUNCH, log)
    assert run.did == [("delete_topic", "t2"), ("delete_topic", "t2")]
    assert len(run.notes) == 1 and "delete.topic.enable is false" in run.notes[0]
    ignored = [
        (e["topic"], e["state"], e["reason"])
        for e in _events(log)
        if e["kind"] == "topic_deletion_requested"
    ]
    assert ignored == [("t2", "ignored", "marker"), ("t2", "ignored", "already_marked")]
