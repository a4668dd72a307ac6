"""analysis.spark holds the stop signals while a SparkSession starts (no JVM here)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator

import pytest

from analysis.spark import _stop_signals_deferred


class Stop(Exception):
    pass


@pytest.fixture
def seen() -> Iterator[list[int]]:
    got: list[int] = []

    def handler(signum: int, _frame: object) -> None:
        got.append(signum)
        raise Stop(signum)

    kept = signal.signal(signal.SIGINT, handler)
    try:
        yield got
    finally:
        signal.signal(signal.SIGINT, kept)


def test_a_signal_in_the_block_reaches_the_handler_after_it(seen: list[int]) -> None:
    steps: list[str] = []
    with pytest.raises(Stop), _stop_signals_deferred():
        signal.raise_signal(signal.SIGINT)
        steps.append("the block went on")  # not cut short
    assert steps == ["the block went on"] and seen == [signal.SIGINT]
    assert signal.getsignal(signal.SIGINT) is not None  # restored: the fixture's handler
    with pytest.raises(Stop):
        signal.raise_signal(signal.SIGINT)
    assert seen == [signal.SIGINT, signal.SIGINT]


def test_a_second_signal_is_not_held(seen: list[int]) -> None:
    steps: list[str] = []
    with pytest.raises(Stop), _stop_signals_deferred():
        signal.raise_signal(signal.SIGINT)
        steps.append("held")
        signal.raise_signal(signal.SIGINT)
        steps.append("not reached")
    assert steps == ["held"] and seen == [signal.SIGINT]


def test_no_signal_no_call_and_other_threads_are_left_alone(seen: list[int]) -> None:
    with _stop_signals_deferred():
        pass
    assert seen == []
    handlers: list[object] = []

    def other() -> None:
        with _stop_signals_deferred():
            handlers.append(signal.getsignal(signal.SIGINT))

    t = threading.Thread(target=other)
    t.start()
    t.join(timeout=10)
    assert handlers == [signal.getsignal(signal.SIGINT)]
