"""A pytest plugin with one local SparkSession shared by the whole test session.

SparkSession start costs ~8 s on this machine, so every Spark test uses the
session-scoped ``spark`` fixture (``local[2]``, UI off, 2 shuffle partitions,
driver bound to 127.0.0.1, the ``rebalance-events`` data source registered).
Its expressions are evaluated interpreted (:data:`analysis.spark.INTERPRETED`):
the tests' histories are small, and that is how ``compare`` and experiments
analyse small inputs; ``tests/integration/test_metrics.py`` checks that the
compiled evaluation (large inputs) gives the same metrics and anomalies.
Mark Spark tests ``@pytest.mark.spark``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One ``local[2]`` SparkSession for the test session; stopped at the end."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from analysis.spark import INTERPRETED, get_spark

    session = get_spark("local[2]", app_name="rebalance-emu-tests", log_level="ERROR")
    session.conf.set("spark.sql.shuffle.partitions", "2")
    for key, value in INTERPRETED.items():
        session.conf.set(key, value)
    try:
        yield session
    finally:
        session.stop()
