"""Every conformance script on the embedded real ZooKeeper equals its recording.

With ``--record-zk-conformance`` the run rewrites ``expected/NN-name.json``
instead (and prints the measured timings). Same ``zk`` marker as the rest of
``tests/integration``'s ZooKeeper tests, so CI runs it with them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conformance.backends import RealBackend
from tests.conformance.runner import (
    compare,
    expected_path,
    load_expected,
    parse_script,
    run_script,
    script_paths,
    write_expected,
)

pytestmark = pytest.mark.zk

SCRIPTS = script_paths()


@pytest.mark.parametrize("path", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_script_on_real_zookeeper(
    path: Path, zk_conformance_backend: RealBackend, record_zk_conformance: bool
) -> None:
    script = parse_script(path)
    result = run_script(script, zk_conformance_backend)
    for index, what, ms in result.timings:
        print(f"{script.stem} step {index}: {what}: {ms} ms")
    if record_zk_conformance:
        previous = load_expected(script)
        write_expected(script, result.trace)
        if previous is not None and compare(previous, result.trace):
            print(f"{script.stem}: recording CHANGED")
        return
    expected = load_expected(script)
    assert expected is not None, (
        f"no recording {expected_path(script).name}: run with --record-zk-conformance"
    )
    diff = compare(expected, result.trace)
    assert not diff, "\n".join(diff[:200])
