"""The ``spark-submit`` driver of ``rebalance-emu compare`` (see deploy/spark/README.md).

::

    spark-submit --master spark://HOST:7077 --py-files rebalance_emu.zip \\
        deploy/spark/compare_job.py RUN_DIR [RUN_DIR ...] [--out DIR]

The session comes from ``spark-submit`` (its ``--master`` and ``--conf``
settings stand); this script only registers the ``rebalance-events`` data
source (through :func:`analysis.datasource.load_events`) and runs
:func:`analysis.compare.compare` with it. Progress goes to stderr and the
path of ``report.html`` to stdout, last; ``spark-submit`` merges the two into
its own stdout.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="compare_job.py")
    parser.add_argument("run_dir", nargs="+", help="run directories, readable by every executor")
    parser.add_argument("--out", help="report directory (default <first RUN_DIR>/report)")
    args = parser.parse_args(argv)

    from pyspark.sql import SparkSession

    from analysis.compare import CompareError, compare, stderr_progress

    spark = (
        SparkSession.builder.appName("rebalance-emu compare")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel(os.environ.get("SPARK_LOG_LEVEL", "WARN"))
    say = stderr_progress("compare_job")
    say(f"Spark master {spark.sparkContext.master}, {spark.sparkContext.defaultParallelism} cores")
    try:
        out = compare(
            [Path(d).resolve() for d in args.run_dir],
            out_dir=Path(args.out) if args.out else None,
            progress=say,
            spark=spark,
        )
    except CompareError as exc:
        print(f"compare_job: error: {exc}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
    print(out / "report.html")
    return 0


if __name__ == "__main__":
    sys.exit(main())
