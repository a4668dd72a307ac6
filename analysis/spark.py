"""Building the SparkSession the analysis runs in."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession


def get_spark(
    master: str | None = None,
    app_name: str = "rebalance-emu",
    log_level: str = "ERROR",
) -> SparkSession:
    """Get (or create) a SparkSession with the event-log data source registered.

    Args:
        master: Spark master URL; ``None`` means ``local[*]``.
        app_name: the application name.
        log_level: the SparkContext log level (``ERROR``, ``WARN``, ``INFO`` ...).

    Sets ``SPARK_LOCAL_IP=127.0.0.1`` when unset (the driver binds to loopback),
    turns the UI off, uses 8 shuffle partitions, and for a local master runs the
    Python workers with this interpreter (``PYSPARK_PYTHON``, when unset) so they
    see the same packages (pyarrow, msgpack, this project). Registers the
    ``rebalance-events`` data source (:mod:`analysis.datasource`).
    """
    from analysis.datasource import RebalanceEventsDataSource

    url = master or "local[*]"
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if url.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master(url)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel(log_level)
    spark.dataSource.register(RebalanceEventsDataSource)
    return spark
