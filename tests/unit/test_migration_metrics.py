"""What an online migration cost (:mod:`analysis.migration`), from hand-made rows,
and which anomalies a converted group may show (:mod:`emulator.anomalies`)."""

from __future__ import annotations

import pytest

from analysis.migration import MigrationInput, member_spans, mixed_spans, summarize
from emulator.anomalies import (
    INVALID_ASSIGNMENT,
    allowed_kinds,
    allowed_kinds_converted,
    converted_protocol,
)

STARTED, STOPPED, CRASHED = "consumer_started", "consumer_stopped", "consumer_crashed"
INJ, CLR = "fault_injected", "fault_cleared"


def rolling(n: int = 3, end: float = 100_000.0) -> MigrationInput:
    """``n`` classic members; from 10 s one every 10 s switches to consumer, 2 s down."""
    inp = MigrationInput("classic-eager", end)
    for i in range(n):
        inp.life.append((0.0, STARTED, f"c-{i}", None))
    for i in range(n):
        t = 10_000.0 * (i + 1)
        inp.switches += [(t, INJ, f"c-{i}", "consumer"), (t + 2_000, CLR, f"c-{i}", None)]
        inp.life += [(t + 40, STOPPED, f"c-{i}", None), (t + 2_000, STARTED, f"c-{i}", "consumer")]
        inp.claims[f"c-{i}"] = [0.0, t + 2_500]
    inp.conversions.append({"t_ms": 12_100.0, "direction": "upgrade", "reason": "r"})
    return inp


class TestMixedWindow:
    def test_member_spans_take_the_run_protocol_when_none_is_given(self) -> None:
        spans = member_spans(rolling(1))
        assert spans == {"c-0": [(0.0, 10_040.0, "classic"), (12_000.0, 100_000.0, "consumer")]}

    def test_mixed_from_the_first_new_member_to_the_last_old_ones_stop(self) -> None:
        inp = rolling(3)
        assert mixed_spans(member_spans(inp)) == [(12_000.0, 30_040.0)]
        m = summarize(inp)
        assert (m["mixed_from_ms"], m["mixed_to_ms"]) == (12_000.0, 30_040.0)
        assert m["mixed_ms"] == pytest.approx(18_040.0)

    def test_a_single_member_group_is_never_mixed(self) -> None:
        m = summarize(rolling(1))
        assert m["mixed_ms"] == 0.0 and m["mixed_from_ms"] is None
        assert m["group_rebalances_mixed"] == 0 and m["duplicates_mixed"] == 0

    def test_a_crash_ends_an_incarnation(self) -> None:
        inp = MigrationInput("consumer", 50.0)
        inp.life += [(0.0, STARTED, "a", None), (0.0, STARTED, "b", "classic")]
        inp.life += [(20.0, CRASHED, "b", "classic")]
        assert mixed_spans(member_spans(inp)) == [(0.0, 20.0)]


class TestSwitches:
    def test_out_of_work_runs_from_the_shutdown_to_the_first_partition_after_it(self) -> None:
        m = summarize(rolling(2))
        sw = m["switches"]["c-1"][0]
        assert sw == {
            "to": "consumer",
            "stopped_ms": 20_000.0,
            "started_ms": 22_000.0,
            "first_claim_ms": 22_500.0,
            "out_of_work_ms": 2_500.0,
        }
        assert m["switched"] == 2
        assert m["out_of_work_ms"] == {"max": 2_500.0, "total": 5_000.0}

    def test_a_member_that_never_owns_again_has_no_out_of_work_time(self) -> None:
        inp = rolling(2)
        inp.claims["c-1"] = [0.0]
        sw = summarize(inp)["switches"]["c-1"][0]
        assert sw["first_claim_ms"] is None and sw["out_of_work_ms"] is None

    def test_switches_back_are_listed_in_order(self) -> None:
        inp = rolling(1)
        inp.switches += [(50_000.0, INJ, "c-0", "classic-eager"), (52_000.0, CLR, "c-0", None)]
        inp.claims["c-0"].append(53_000.0)
        tos = [s["to"] for s in summarize(inp)["switches"]["c-0"]]
        assert tos == ["consumer", "classic-eager"]


class TestCosts:
    def test_rebalances_while_mixed_and_at_a_conversion(self) -> None:
        inp = rolling(3)
        inp.unsettled = [(5_000.0, 6_000.0), (12_050.0, 13_000.0), (22_000.0, 22_600.0)]
        inp.member_rebalances = [(12_500.0, "c-1"), (12_600.0, "c-0"), (40_000.0, "c-2")]
        m = summarize(inp)
        assert m["group_rebalances_mixed"] == 2  # the one at 5 s was before
        assert m["conversion_rebalances"] == 1  # 12.05-13 s holds the conversion at 12.1 s
        # c-1 still spoke classic at 12.5 s; c-0 had switched; 40 s is after the window.
        assert m["member_rebalances_mixed"] == {"classic": 1, "consumer": 1}

    def test_duplicates_and_double_ownership_across_protocols(self) -> None:
        inp = rolling(3)
        inp.anomalies = [
            ("duplicate", 13_000.0, 7, "c-0", "c-1"),
            ("duplicate", 5_000.0, 100, "c-0", "c-1"),  # before the window
            ("double_ownership", 23_000.0, 2, "c-1", "c-2"),  # consumer c-1, classic c-2
            ("double_ownership", 24_000.0, 2, "c-1", "c-0"),  # both consumer
        ]
        m = summarize(inp)
        assert m["duplicates_mixed"] == 7
        assert m["double_ownership_mixed"] == 2
        assert m["double_ownership_cross_protocol"] == 1


class TestAllowed:
    def test_a_converted_classic_group_may_show_what_a_consumer_group_may(self) -> None:
        assert INVALID_ASSIGNMENT not in allowed_kinds("classic-eager")
        assert INVALID_ASSIGNMENT in allowed_kinds_converted("classic-eager")
        assert allowed_kinds("classic-eager") <= allowed_kinds_converted("classic-eager")

    def test_the_other_protocol(self) -> None:
        assert converted_protocol("classic-cooperative") == "consumer"
        assert converted_protocol("consumer@t3") == "classic-eager"
        assert allowed_kinds_converted("consumer") == allowed_kinds("consumer") | allowed_kinds(
            "classic-eager"
        )
