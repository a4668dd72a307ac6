"""Fixtures of the sim engine's unit tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from emulator.sim.loop import SimEventLoop


@pytest.fixture
def loop() -> Iterator[SimEventLoop]:
    """A fresh sim loop; the test fails if any callback reported an error, and it is closed."""
    lp = SimEventLoop()
    yield lp
    errors = list(lp.errors)
    lp.close()
    assert errors == []
