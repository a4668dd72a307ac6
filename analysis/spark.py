"""Building the SparkSession the analysis runs in."""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import threading
import zipfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

#: The packages a Spark executor needs to read event logs: the data source
#: (``analysis``) and the event schema it derives its columns from (``emulator``).
SHIPPED_PACKAGES = ("emulator", "analysis")
_ROOT = Path(__file__).resolve().parents[1]


def write_project_zip(path: str | Path) -> Path:
    """Zip the packages that executors import (``emulator``, ``analysis``) for ``--py-files``.

    Args:
        path: the zip file to write.

    Returns:
        The path written: the packages' ``.py`` sources, bundled scenarios and
        ``py.typed`` markers, relative to the repository root, without caches.
    """
    out = Path(path)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for pkg in SHIPPED_PACKAGES:
            for f in sorted((_ROOT / pkg).rglob("*")):
                if (
                    f.is_file()
                    and "__pycache__" not in f.parts
                    and f.suffix in (".py", ".toml", ".typed")
                ):
                    z.write(f, f.relative_to(_ROOT).as_posix())
    return out


def session_builder(url: str, app_name: str) -> SparkSession.Builder:
    """The builder of :func:`get_spark`'s session (its settings, before ``getOrCreate``).

    Sets ``SPARK_LOCAL_IP=127.0.0.1`` when unset and, for a local master, the
    Python workers' interpreter (``PYSPARK_PYTHON``/``PYSPARK_DRIVER_PYTHON``,
    when unset) to this one.
    """
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if url.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    return (
        SparkSession.builder.master(url)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.sql.session.timeZone", "UTC")
        # A filter on the ~20 control kinds goes to Parquet as an IN list (above
        # 10 values Spark would send a min-max range, which skips no row group).
        .config("spark.sql.parquet.pushdown.inFilterThreshold", "64")
    )


@contextmanager
def _stop_signals_deferred() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP wait for the block's end, then reach their handlers.

    Around the SparkSession's start: a signal that lands while the JVM builds its
    SparkContext makes the Python side drop the gateway mid-call, the constructor
    fails and the JVM prints its stack traces (``Uncaught exception in thread``)
    on the stderr it shares with the CLI. Held until the session is up (a few
    seconds), the signal then unwinds through a session that stops cleanly. A
    second signal while one is held is not held (a start that hangs can still
    be interrupted). Only in the main thread (the only one that gets signals).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    sigs = [getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n)]
    kept = {sig: signal.getsignal(sig) for sig in sigs}
    held: list[int] = []

    def deliver(signum: int, frame: Any) -> None:
        handler = kept[signal.Signals(signum)]
        if callable(handler):
            handler(signum, frame)
        elif handler == signal.SIG_DFL:
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)

    def hold(signum: int, frame: Any) -> None:
        if held:
            held.clear()  # this one is delivered instead, once
            for sig, handler in kept.items():
                signal.signal(sig, handler)
            deliver(signum, frame)
            return
        held.append(signum)

    for sig in sigs:
        signal.signal(sig, hold)
    try:
        yield
    finally:
        for sig, handler in kept.items():
            signal.signal(sig, handler)
        if held:
            deliver(held[0], None)


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
    see the same packages (pyarrow, msgpack, msgspec, this project). For any other master
    the executors get this project's ``emulator`` and ``analysis`` packages as a
    zip (``addPyFile``, what ``--py-files`` does), so they need only Python with
    ``msgpack``, ``msgspec`` and ``pyarrow`` (``PYSPARK_PYTHON`` names it). Registers the
    ``rebalance-events`` data source (:mod:`analysis.datasource`). A driver JVM
    it starts maps the class archive of :mod:`analysis.spark_archive` when one
    was built for this JVM and pyspark (a faster start; the same results).
    In the main thread, a stop signal while the session starts is held until
    it is up (:func:`_stop_signals_deferred`).
    """
    from analysis.datasource import RebalanceEventsDataSource
    from analysis.spark_archive import java_options

    url = master or "local[*]"
    builder = session_builder(url, app_name)
    archive = java_options()
    if archive is not None:
        # A new driver JVM maps the classes of analysis.spark_archive (a faster start);
        # "default" options come before any spark.driver.extraJavaOptions of the user's.
        builder = builder.config("spark.driver.defaultJavaOptions", archive)
    with _stop_signals_deferred():
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    if not url.startswith("local"):
        shipped = Path(tempfile.mkdtemp(prefix="rebalance-emu-pyfiles-")) / "rebalance_emu.zip"
        spark.sparkContext.addPyFile(str(write_project_zip(shipped)))
    spark.dataSource.register(RebalanceEventsDataSource)
    return spark


#: Up to this many events an analysis evaluates Spark SQL expressions interpreted
#: (:data:`INTERPRETED`) instead of generating and compiling Java for each plan.
#: Measured on this 2-core machine (``compare`` of generated runs, the columnar
#: cache there, 2026-12-07): a small analysis compiled ~800 generated classes
#: with Janino, 8-10 s of a 15 s run of the checkers and most of a cold JVM's
#: start; interpreted, ``compare`` took 16 s instead of 20 s at 20 k events, 22
#: instead of 25 s at 200 k, 32 instead of 36 s at 1 M, but 122 instead of 78 s
#: at 10 M, where the compiled loops pay for themselves.
INTERPRETED_MAX_EVENTS = 1_000_000

#: Spark SQL settings that evaluate expressions and operators interpreted: no
#: whole-stage code generation, and the expression factories' interpreted
#: implementations (Spark's ``spark.sql.codegen.factoryMode``, which its own
#: tests use to run the interpreted paths; the results are the same).
INTERPRETED: Mapping[str, str] = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}


def evaluation_settings(events: int) -> Mapping[str, str]:
    """The Spark SQL settings for analysing ``events`` events: :data:`INTERPRETED`
    up to :data:`INTERPRETED_MAX_EVENTS`, else none (Spark's compiled default)."""
    return INTERPRETED if events <= INTERPRETED_MAX_EVENTS else {}


@contextmanager
def sql_settings(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """Runtime SQL ``settings`` on ``spark`` for the block, the previous values after it
    (a setting that was not set is unset again)."""
    before = {k: spark.conf.get(k, None) for k in settings}
    try:
        for k, v in settings.items():
            spark.conf.set(k, v)
        yield
    finally:
        for k, old in before.items():
            if old is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, old)


def release_spark_memory(spark: SparkSession) -> None:
    """Let the driver free what nothing refers to any more (checkpointed frames above all).

    A ``localCheckpoint`` keeps its blocks until Spark's ``ContextCleaner`` sees
    the RDD collected, which needs the Python proxies gone (py4j then drops the
    JVM's reference) and a JVM garbage collection; Spark's own periodic one runs
    every 30 minutes. Called between an experiment's analysis batches.
    """
    import gc

    gc.collect()
    jvm = spark.sparkContext._jvm
    if jvm is not None:
        jvm.System.gc()
