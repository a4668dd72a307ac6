"""The Spark SQL settings an analysis runs under (analysis.spark), on the real session."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from analysis.spark import (
    INTERPRETED,
    INTERPRETED_MAX_EVENTS,
    evaluation_settings,
    sql_settings,
)

pytestmark = [pytest.mark.spark]

UNSET = "spark.sql.adaptive.advisoryPartitionSizeInBytes"


def test_small_inputs_are_evaluated_interpreted_large_ones_compiled() -> None:
    assert evaluation_settings(0) == INTERPRETED
    assert evaluation_settings(INTERPRETED_MAX_EVENTS) == INTERPRETED
    assert evaluation_settings(INTERPRETED_MAX_EVENTS + 1) == {}
    assert INTERPRETED["spark.sql.codegen.factoryMode"] == "NO_CODEGEN"


def test_sql_settings_hold_for_the_block_and_restore_what_was_there(
    spark: SparkSession,
) -> None:
    before = spark.conf.get("spark.sql.shuffle.partitions")
    assert spark.conf.get(UNSET, None) is None
    settings = {"spark.sql.shuffle.partitions": "7", UNSET: "1m"}
    with pytest.raises(RuntimeError, match="inside"), sql_settings(spark, settings):
        assert spark.conf.get("spark.sql.shuffle.partitions") == "7"
        assert spark.conf.get(UNSET) == "1m"
        raise RuntimeError("inside")
    assert spark.conf.get("spark.sql.shuffle.partitions") == before
    assert spark.conf.get(UNSET, None) is None
