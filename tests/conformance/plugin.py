"""pytest plugin of the conformance suite: ``--record-zk-conformance`` and the real backend.

Registered in ``tests/conftest.py`` (``pytest_plugins``), so the option exists
whatever the test paths given on the command line.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conformance.backends import RealBackend

RECORD_OPTION = "--record-zk-conformance"


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--record-zk-conformance``."""
    parser.addoption(
        RECORD_OPTION,
        action="store_true",
        default=False,
        help="rewrite tests/conformance/expected/ from the real ZooKeeper instead of comparing",
    )


@pytest.fixture(scope="session")
def zk_conformance_backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealBackend]:
    """The embedded real ZooKeeper(s) of the conformance suite, for the whole session."""
    backend = RealBackend(tmp_path_factory.mktemp("zk-conformance"))
    try:
        yield backend
    finally:
        backend.close()


@pytest.fixture
def record_zk_conformance(request: pytest.FixtureRequest) -> bool:
    """Whether this run records ``expected/`` instead of comparing with it."""
    return bool(request.config.getoption(RECORD_OPTION))
