#!/usr/bin/env bash
# Run `rebalance-emu compare` on a Spark cluster with spark-submit.
#
#   deploy/spark/submit-compare.sh [--master URL] RUN_DIR [RUN_DIR ...] [--out DIR] [-- SPARK_SUBMIT_ARGS...]
#
# --master defaults to $SPARK_MASTER, else local[*]. The project's packages
# (emulator, analysis) are zipped and shipped with --py-files; every executor
# needs Python 3.11+ with msgpack, msgspec and pyarrow (PYSPARK_PYTHON names it), and
# must see the run directories at the same path (a shared file system).
# spark-submit is $SPARK_HOME/bin/spark-submit when SPARK_HOME is set, else
# the one pip installed into .venv with pyspark. spark.sql.shuffle.partitions
# is $SHUFFLE_PARTITIONS (default 8, as analysis.spark.get_spark; Spark's own
# default of 200 makes every small shuffle slow); a --conf after -- overrides it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
MASTER="${SPARK_MASTER:-local[*]}"
JOB_ARGS=()
EXTRA=()
while [ $# -gt 0 ]; do
    case "$1" in
        --master) MASTER="$2"; shift 2 ;;
        --master=*) MASTER="${1#--master=}"; shift ;;
        --) shift; EXTRA=("$@"); break ;;
        *) JOB_ARGS+=("$1"); shift ;;
    esac
done
[ ${#JOB_ARGS[@]} -gt 0 ] || { echo "usage: $0 [--master URL] RUN_DIR [RUN_DIR ...] [--out DIR] [-- SPARK_SUBMIT_ARGS...]" >&2; exit 2; }

if [ -n "${SPARK_HOME:-}" ]; then SUBMIT="$SPARK_HOME/bin/spark-submit"
elif [ -x "$ROOT/.venv/bin/spark-submit" ]; then SUBMIT="$ROOT/.venv/bin/spark-submit"
else SUBMIT="$(command -v spark-submit || true)"; fi
[ -n "$SUBMIT" ] || { echo "submit-compare.sh: no spark-submit (set SPARK_HOME or run ./deploy/local.sh setup)" >&2; exit 1; }

PY="${PYSPARK_PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PY" ] || PY="$(command -v python3)"
export PYSPARK_PYTHON="$PY" PYSPARK_DRIVER_PYTHON="${PYSPARK_DRIVER_PYTHON:-$PY}"
export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
# The zip is written by the driver's Python (it has pyspark); the executors' may not.
# The same call prints the driver JVM's options that map the class archive
# analysis.spark_archive built for this JVM and pyspark's jars (empty: none).
OPTS="$(cd "$ROOT" && "$PYSPARK_DRIVER_PYTHON" -c 'import sys
from analysis.spark import write_project_zip
from analysis.spark_archive import java_options
write_project_zip(sys.argv[1])
print(java_options() or "")' "$WORK/rebalance_emu.zip")"

# Only pyspark's own spark-submit runs the JVM and jars the archive was built for.
ARCHIVE=()
if [ "$SUBMIT" = "$ROOT/.venv/bin/spark-submit" ] && [ -n "$OPTS" ]; then
    ARCHIVE=(--conf "spark.driver.defaultJavaOptions=$OPTS")
fi

"$SUBMIT" --master "$MASTER" \
    ${ARCHIVE[@]+"${ARCHIVE[@]}"} \
    --conf spark.ui.enabled=false \
    --conf spark.ui.showConsoleProgress=false \
    --conf spark.sql.session.timeZone=UTC \
    --conf "spark.sql.shuffle.partitions=${SHUFFLE_PARTITIONS:-8}" \
    --py-files "$WORK/rebalance_emu.zip" \
    ${EXTRA[@]+"${EXTRA[@]}"} \
    "$ROOT/deploy/spark/compare_job.py" "${JOB_ARGS[@]}"
