"""``[placement]``: parsing, the Ray options it becomes, the up-front check, skew bounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.placement import (
    ACTOR_UNITS,
    RESOURCE_SLIVER,
    PlacementError,
    actor_options,
    check_placement,
)
from emulator.clock import skew_bound_ms
from emulator.scenario import PlacementSpec, ScenarioError, parse_scenario

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = (ROOT / "emulator" / "scenarios" / "quickstart.toml").read_text()


def _with(placement: str) -> str:
    return QUICKSTART + "\n[placement]\n" + placement + "\n"


def test_default_is_rays_own_choice() -> None:
    sc = parse_scenario(QUICKSTART)
    assert sc.placement == PlacementSpec()
    assert sc.to_dict()["placement"] == {
        "brokers": "default",
        "producer": "default",
        "consumer_hosts": "default",
    }
    for role in ("brokers", "producer", "consumer_hosts"):
        assert actor_options(sc.placement, role) == {}


def test_each_form_becomes_ray_options() -> None:
    sc = parse_scenario(
        _with(
            'brokers = "resource:emu_broker"\nproducer = "node:10.0.0.5"\n'
            'consumer_hosts = "spread"'
        )
    )
    assert actor_options(sc.placement, "brokers") == {"resources": {"emu_broker": ACTOR_UNITS}}
    assert actor_options(sc.placement, "producer") == {
        "resources": {"node:10.0.0.5": RESOURCE_SLIVER}
    }
    assert actor_options(sc.placement, "consumer_hosts") == {"scheduling_strategy": "SPREAD"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            'brokers = "pack"',
            '[placement].brokers must be "default", "spread", "resource:NAME" or "node:IP", '
            'got "pack"',
        ),
        ('consumer_hosts = "resource:"', '[placement].consumer_hosts must be "default"'),
        ("producer = 1", '[placement].producer must be "default"'),
        ('hosts = "spread"', "[placement].hosts: unknown key"),
    ],
)
def test_bad_placements_are_one_line_errors(text: str, message: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(_with(text))
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_a_missing_or_short_resource_fails_up_front() -> None:
    spec = PlacementSpec(
        brokers="resource:emu_broker",
        producer="resource:emu_broker",
        consumer_hosts="resource:emu_consumer",
    )
    run = {"brokers": 3, "producer": 1, "consumer_hosts": 4}
    check_placement(spec, run, {"CPU": 4.0, "emu_broker": 4.0, "emu_consumer": 8.0})
    with pytest.raises(PlacementError) as info:
        check_placement(spec, run, {"CPU": 4.0, "emu_broker": 4.0, "node:10.0.0.1": 1.0})
    assert str(info.value) == (
        "[placement].consumer_hosts = 'resource:emu_consumer': no node of the Ray cluster "
        "has the resource 'emu_consumer' (custom resources and nodes: emu_broker, "
        "node:10.0.0.1)"
    )
    with pytest.raises(PlacementError) as info:
        check_placement(spec, run, {"emu_broker": 3.0, "emu_consumer": 8.0})
    assert str(info.value) == (
        "[placement].brokers = 'resource:emu_broker': the run needs 4 of 'emu_broker' "
        "(3 brokers + 1 producer, one each) and the cluster has 3; start nodes with more "
        "(ray start --resources '{\"emu_broker\": 8}')"
    )
    # node pins take a sliver of the node's own resource: any number fit
    pinned = PlacementSpec(consumer_hosts="node:10.0.0.1")
    check_placement(pinned, run, {"node:10.0.0.1": 1.0})


def test_skew_bound_between_nodes() -> None:
    nodes = {
        "a": {"offset_ms": 0.0, "bound_ms": 0.5},
        "b": {"offset_ms": 12.0, "bound_ms": 1.0},
        "c": {"offset_ms": -3.0, "bound_ms": 0.25},
    }
    assert skew_bound_ms(nodes, ["a"]) == 0.0
    assert skew_bound_ms(nodes, ["a", "b"]) == 13.5
    assert skew_bound_ms(nodes, ["a", "b", "c"]) == 16.25  # b against c
    assert skew_bound_ms(nodes, ["a", "zz"]) == float("inf")
