"""emulator.anomalies: the allowed table and its commit-mode adjustments, without Spark."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from emulator.anomalies import (
    ALLOWED,
    ANOMALY_KINDS,
    COMMIT_BY_NON_OWNER,
    DOUBLE_PROCESSING,
    LOSS,
    ORDERING_OVERLAP,
    allowed_kinds,
    base_protocol,
)
from emulator.protocols import RUN_PROTOCOLS


def test_every_run_protocol_has_an_allowed_set_of_known_kinds() -> None:
    assert list(ALLOWED) == list(RUN_PROTOCOLS)
    for kinds in ALLOWED.values():
        assert kinds <= set(ANOMALY_KINDS)
        assert LOSS not in kinds and ORDERING_OVERLAP not in kinds  # added per commit mode


def test_series_names_read_as_their_protocol() -> None:
    assert base_protocol("classic-eager@t1") == "classic-eager"
    assert base_protocol("consumer") == "consumer"
    assert allowed_kinds("zookeeper@t7") == allowed_kinds("zookeeper")


def test_commit_mode_adjustments() -> None:
    for proto in RUN_PROTOCOLS:
        kinds = allowed_kinds(proto)
        assert ALLOWED[proto] <= kinds
        assert (ORDERING_OVERLAP in kinds) is (
            DOUBLE_PROCESSING in ALLOWED[proto] or proto in ("zookeeper", "consumer")
        )
        assert LOSS not in kinds
        assert LOSS in allowed_kinds(proto, "auto", allows_loss=True)
    # A KIP-848 reconciliation that waits for the application's listener.
    assert ORDERING_OVERLAP in allowed_kinds("consumer", "listener")  # via double processing
    assert COMMIT_BY_NON_OWNER in allowed_kinds("zookeeper")
    assert all(COMMIT_BY_NON_OWNER not in allowed_kinds(p) for p in RUN_PROTOCOLS[1:])
    assert allowed_kinds("no-such-protocol") == frozenset()


def test_the_vocabulary_loads_no_spark() -> None:
    # The report, the evidence and the experiment analysis read it without Spark.
    code = "import sys, emulator.anomalies; sys.exit('pyspark' in sys.modules)"
    root = Path(__file__).resolve().parents[2]
    assert subprocess.run([sys.executable, "-c", code], cwd=root, check=False).returncode == 0
