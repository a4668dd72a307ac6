"""The Spark SQL settings an analysis runs under (analysis.spark), on the real session."""

from __future__ import annotations

from pathlib import Path

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


def test_the_session_s_jvm_maps_the_class_archive_setup_built(
    spark: SparkSession, tmp_path: Path
) -> None:
    """``./deploy/local.sh setup`` built this JVM's class archive (analysis.spark_archive);
    get_spark started the session's driver JVM with it, and a JVM on that driver's
    class path maps it whole (``-Xshare:on`` fails on a damaged or foreign archive)."""
    from analysis.spark_archive import archive_path, identity, usable, verify

    ident = identity()
    assert ident is not None, "no java with a libjvm.so"
    archive = archive_path(ident)
    assert usable(archive), f"no archive {archive}: run ./deploy/local.sh setup"
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    args = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert f"-XX:SharedArchiveFile={archive}" in args
    class_path = str(jvm.System.getProperty("java.class.path"))
    assert verify(ident.java, archive, class_path)
    # another class path (not Spark's jars) is refused, and so is a cut-short copy
    assert not verify(ident.java, archive, str(ident.jars.parent / "conf"))
    cut = tmp_path / archive.name
    with archive.open("rb") as f:
        cut.write_bytes(f.read(archive.stat().st_size // 10))
    assert not verify(ident.java, cut, class_path)
