"""A class-data-sharing archive for the Spark driver's JVM: a cold ``compare`` starts faster.

Every ``compare``, experiment report and notebook starts a new JVM for its
SparkSession, and a cold JVM first loads and verifies some 15,000 classes
(Spark, Catalyst, Hadoop, Parquet) from ~250 jars. HotSpot's dynamic
class-data sharing (JDK 13+, ``-XX:ArchiveClassesAtExit``) writes the classes a
JVM loaded into an archive at its exit; a later JVM given the archive
(``-XX:SharedArchiveFile``) maps them instead. Measured on this 2-core machine
(``compare`` of a 66 k-event sim quickstart, columnar cache present, cold JVM,
2026-12-07): Spark's session up in 4.4-4.6 s instead of 6.8-7.9 s, the whole
``compare`` 39-41 s instead of 45-46 s. A short training session gave the
same gain as one that had run a whole ``compare``; :func:`build` takes ~35 s
(15 s of it the JVM writing the 188 MB archive at its exit), once.

The archive belongs to one JVM build and one set of Spark jars: its name is a
digest of the ``java`` that Spark's launcher runs (``$JAVA_HOME/bin/java``,
else ``java`` on ``PATH``), that JVM's ``libjvm.so`` (size and modification
time) and pyspark's version and jars directory. A JVM that finds the archive
does not match (another build, other jars) ignores it and loads its classes as
usual. A *truncated* archive, though, crashes the JVM at start, so
:func:`build` writes it under a temporary name, has a separate ``java
-Xshare:on -version`` on Spark's class path map it, and only then renames it
into place with a sidecar that records its size; :func:`java_options` offers
an archive only when its size is the one recorded. ``REBALANCE_EMU_SPARK_ARCHIVE=off`` turns it off.

It lives under the installation's prefix (``<venv>/share/rebalance-emu/spark-cds``):
removing the virtualenv removes it. ``./deploy/local.sh setup`` builds it
(``python -m analysis.spark_archive``). This changes how fast the JVM starts,
nothing it computes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

#: Set to ``off`` (or ``0``, ``false``, ``no``) to start Spark's JVM without the archive.
ENV_SWITCH = "REBALANCE_EMU_SPARK_ARCHIVE"
#: Bound on the training JVM's exit (it writes the archive then: a few seconds here).
EXIT_TIMEOUT_S = 180.0
#: Bound on the verifying ``java -version``.
VERIFY_TIMEOUT_S = 60.0
#: The JVM's own CDS messages (e.g. "Skipping ...: Signed JAR" while dumping, or an
#: archive that does not match this JVM) are not the user's business.
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def default_dir() -> Path:
    """Where the archive lives: ``<sys.prefix>/share/rebalance-emu/spark-cds``."""
    return Path(sys.prefix) / "share" / "rebalance-emu" / "spark-cds"


def enabled() -> bool:
    """False when :data:`ENV_SWITCH` says ``off``/``0``/``false``/``no``."""
    return os.environ.get(ENV_SWITCH, "").strip().lower() not in ("off", "0", "false", "no")


def java_binary() -> Path | None:
    """The ``java`` Spark's launcher (``bin/spark-class``) runs, resolved; ``None`` if none."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found or not Path(found).is_file():
        return None
    return Path(found).resolve()


@dataclass(frozen=True)
class Identity:
    """What an archive belongs to: a JVM build and pyspark's jars."""

    java: Path
    libjvm: str
    pyspark: str
    jars: Path

    @property
    def digest(self) -> str:
        text = f"{self.java}\n{self.libjvm}\n{self.pyspark}\n{self.jars}"
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def identity() -> Identity | None:
    """This machine's :class:`Identity`; ``None`` without a ``java`` or its ``libjvm.so``."""
    import pyspark

    java = java_binary()
    if java is None:
        return None
    libjvm = java.parent.parent / "lib" / "server" / "libjvm.so"
    if not libjvm.is_file():
        return None
    st = libjvm.stat()
    jars = (Path(pyspark.__file__).parent / "jars").resolve()
    build = f"{libjvm.resolve()}:{st.st_size}:{st.st_mtime_ns}"
    return Identity(java, build, pyspark.__version__, jars)


def archive_path(ident: Identity, directory: Path | None = None) -> Path:
    """The archive of ``ident`` in ``directory`` (:func:`default_dir`)."""
    return (directory or default_dir()) / f"spark-driver-{ident.digest}.jsa"


def _sidecar(archive: Path) -> Path:
    return archive.with_suffix(".json")


def usable(archive: Path) -> bool:
    """The archive is there, whole: its size is the one its sidecar recorded at build."""
    try:
        recorded = json.loads(_sidecar(archive).read_text())["size"]
        return isinstance(recorded, int) and archive.stat().st_size == recorded
    except (OSError, ValueError, KeyError, TypeError):
        return False


def java_options(directory: Path | None = None) -> str | None:
    """The driver JVM's options that map this machine's archive, or ``None``: switched
    off, no ``java``, or no whole archive built for this JVM and these jars."""
    if not enabled():
        return None
    ident = identity()
    if ident is None:
        return None
    archive = archive_path(ident, directory)
    if not usable(archive):
        return None
    return f"-XX:SharedArchiveFile={archive} {_QUIET}"


def _train(dump: Path, work: Path) -> str:
    """A short Spark session that loads what an analysis loads (SQL planning, shuffles,
    windows, joins, checkpoints, Parquet, a Python UDF's worker), then exits its JVM, which
    writes the loaded classes to ``dump``; that JVM's class path."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from analysis.spark import session_builder

    spark = (
        session_builder("local[1]", "rebalance-emu-spark-archive")
        .config("spark.driver.defaultJavaOptions", f"-XX:ArchiveClassesAtExit={dump} {_QUIET}")
        .getOrCreate()
    )
    gateway = spark.sparkContext._gateway
    proc = getattr(gateway, "proc", None)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    class_path = str(jvm.System.getProperty("java.class.path"))
    try:
        spark.sparkContext.setLogLevel("ERROR")
        df = spark.range(4000).select(
            (F.col("id") % 7).alias("p"), F.col("id").alias("o"), (F.col("id") * 3).alias("t")
        )
        w = Window.partitionBy("p").orderBy("t")
        ranked = df.withColumn("prev", F.lag("t").over(w)).withColumn("r", F.row_number().over(w))
        agg = ranked.groupBy("p").agg(F.max("r").alias("n"), F.min("prev").alias("first"))
        joined = ranked.join(F.broadcast(agg), "p").localCheckpoint()
        joined.where(F.col("r") == F.col("n")).collect()
        parquet = str(work / "t.parquet")
        joined.write.parquet(parquet)
        back = spark.read.parquet(parquet)
        back.groupBy("p").count().union(agg.select("p", "n")).distinct().collect()
        back.select(F.udf(lambda v: v + 1, "long")("o")).limit(5).collect()
    finally:
        spark.stop()
        if gateway is not None:
            gateway.shutdown()
    if proc is not None:
        # the JVM writes the archive on its way out: wait for it (bounded)
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
    return class_path


def verify(java: Path, archive: Path, class_path: str) -> bool:
    """A separate JVM on Spark's class path must map the archive (``-Xshare:on``: a
    damaged archive, or one of other jars or another JVM, fails it) and start."""
    try:
        # a damaged archive crashes that JVM: its hs_err file goes to a directory removed here
        with tempfile.TemporaryDirectory(prefix="rebalance-emu-cds-check-") as cwd:
            done = subprocess.run(
                [
                    str(java),
                    f"-XX:SharedArchiveFile={archive}",
                    "-Xshare:on",
                    *_QUIET.split(),
                    "-cp",
                    class_path,
                    "-version",
                ],
                cwd=cwd,
                capture_output=True,
                timeout=VERIFY_TIMEOUT_S,
                check=False,
            )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def build(directory: Path | None = None, *, force: bool = False) -> Path | None:
    """Build this machine's archive in ``directory`` (:func:`default_dir`) unless a whole
    one is there; the archive, or ``None`` when this JVM cannot make one (no ``java``,
    no ``libjvm.so``, or it wrote no archive that a JVM on Spark's class path maps)."""
    ident = identity()
    if ident is None:
        return None
    target = archive_path(ident, directory)
    if usable(target) and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rebalance-emu-cds-") as tmp:
        dump = target.parent / f".{target.name}.{os.getpid()}.tmp"
        try:
            class_path = _train(dump, Path(tmp))
            if not dump.is_file() or not verify(ident.java, dump, class_path):
                return None
            size = dump.stat().st_size
            os.replace(dump, target)
            _sidecar(target).write_text(
                json.dumps(
                    {
                        "size": size,
                        "java": str(ident.java),
                        "libjvm": ident.libjvm,
                        "pyspark": ident.pyspark,
                        "jars": str(ident.jars),
                    },
                    indent=1,
                )
            )
        finally:
            dump.unlink(missing_ok=True)
    for old in target.parent.glob("spark-driver-*.jsa"):  # other JVMs' or jars' archives
        if old != target:
            old.unlink(missing_ok=True)
            _sidecar(old).unlink(missing_ok=True)
    return target


def main(argv: list[str] | None = None) -> int:
    """``python -m analysis.spark_archive [--dir DIR] [--force]``: build the archive."""
    ap = argparse.ArgumentParser(
        prog="python -m analysis.spark_archive",
        description="Build the Spark driver JVM's class-data-sharing archive (faster cold starts).",
    )
    ap.add_argument("--dir", type=Path, default=None, help=f"where (default {default_dir()})")
    ap.add_argument("--force", action="store_true", help="build again even if one is there")
    args = ap.parse_args(argv)
    ident = identity()
    if ident is None:
        print("spark-archive: no java with a libjvm.so found; nothing built", file=sys.stderr)
        return 1
    target = archive_path(ident, args.dir)
    if usable(target) and not args.force:
        print(f"spark-archive: {target} is there", file=sys.stderr)
        return 0
    print("spark-archive: building the Spark driver's class archive (~35 s, once)", file=sys.stderr)
    start = time.monotonic()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    built = build(args.dir, force=args.force)
    if built is None:
        print("spark-archive: this JVM wrote no usable archive; nothing built", file=sys.stderr)
        return 1
    mb = built.stat().st_size / 1e6
    took = time.monotonic() - start
    print(f"spark-archive: built {built} ({mb:.0f} MB) in {took:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
