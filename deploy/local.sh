#!/usr/bin/env bash
# Set up this machine for the emulator, then run it.
#
#   ./deploy/local.sh demo   install what is missing, then run `rebalance-emu demo`
#                            (embedded ZooKeeper, local Ray, local Spark)
#   ./deploy/local.sh test   install what is missing, then run the test suite
#   ./deploy/local.sh setup  install only
#   ./deploy/local.sh run ARGS...   install, then `rebalance-emu ARGS...`
#
# What it installs when missing: Debian's zookeeper, a Java runtime and chromium
# (headless, the tests open the report in it) with apt-get, as root or through
# sudo; a virtualenv in .venv at the repository root with this project and
# its dev extra; and the Spark driver's class archive in it (analysis/spark_archive.py).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"

# The interpreter of a new .venv: $PYTHON if set; else the distribution's
# /usr/bin/python3 when it is 3.11 or newer (Debian builds it with PGO and
# LTO: the sim engine runs ~10% faster on it than on a default pyenv build,
# whose libpython is shared and not profile-optimized); else python3 on PATH.
# An existing .venv keeps the interpreter it was made with.
pick_python() {
    if [ -n "${PYTHON:-}" ]; then echo "$PYTHON"; return; fi
    if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
        echo /usr/bin/python3; return
    fi
    echo python3
}
PY="$(pick_python)"

log() { printf 'local.sh: %s\n' "$*" >&2; }
die() { printf 'local.sh: error: %s\n' "$*" >&2; exit 1; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"
    elif command -v sudo >/dev/null 2>&1; then sudo "$@"
    else die "need root (or sudo) to run: $*"; fi
}

install_debian_packages() {
    local missing=()
    [ -f /usr/share/java/zookeeper.jar ] || [ -n "${ZOOKEEPER_HOME:-}" ] || missing+=(zookeeper)
    command -v java >/dev/null 2>&1 || missing+=(default-jre-headless)
    "$PY" -c 'import venv, ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
    # Headless Chromium: the tests open the comparison report's HTML in it.
    command -v chromium >/dev/null 2>&1 || missing+=(chromium)
    if [ ${#missing[@]} -gt 0 ]; then
        command -v apt-get >/dev/null 2>&1 || die "missing ${missing[*]} and no apt-get; install them by hand"
        log "installing Debian packages: ${missing[*]}"
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
}

install_venv() {
    local stamp="$VENV/.installed"
    if [ ! -x "$VENV/bin/python" ]; then
        log "creating $VENV"
        "$PY" -m venv "$VENV"
    fi
    # Reinstall when pyproject.toml changed since the last install.
    if [ ! -f "$stamp" ] || [ "$ROOT/pyproject.toml" -nt "$stamp" ]; then
        log "installing the project and its dependencies into $VENV (first time: a few minutes)"
        "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
        "$VENV/bin/python" -m pip install -q -e "$ROOT[dev]"
        touch "$stamp"
    fi
}

# Spark's driver JVM maps a class archive built once for this JVM and pyspark
# (analysis/spark_archive.py): every compare's JVM then starts ~3 s sooner.
# Not having one changes no result, so a failure is a note, not an error.
install_spark_archive() {
    local out
    if out="$("$VENV/bin/python" -m analysis.spark_archive 2>&1)"; then
        printf '%s\n' "$out" | grep '^spark-archive: built' >&2 || true
    else
        log "no Spark class archive (Spark starts without it): $(printf '%s\n' "$out" | tail -1)"
    fi
}

# The compiled event-block decode of large reads (analysis/native_decode.py):
# numba compiles it once into its cache (~5 s) here rather than in the first
# large compare. A failure is a note: those reads compile it, or decode in Python.
install_native_decode() {
    local out
    if ! out="$("$VENV/bin/python" -m analysis.native_decode 2>&1)"; then
        log "native decode not compiled: $(printf '%s\n' "$out" | tail -1)"
    fi
}

setup() {
    install_debian_packages
    install_venv
    install_spark_archive
    install_native_decode
    export RAY_USAGE_STATS_ENABLED=0 RAY_AUTH_MODE=disabled
    export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"
    export PATH="$VENV/bin:$PATH"
}

cmd="${1:-}"
[ $# -gt 0 ] && shift
case "$cmd" in
    setup) setup ;;
    demo)
        setup
        cd "$ROOT"
        exec "$VENV/bin/rebalance-emu" demo "$@" ;;
    run)
        setup
        cd "$ROOT"
        exec "$VENV/bin/rebalance-emu" "$@" ;;
    test)
        setup
        cd "$ROOT"
        set +e
        "$VENV/bin/python" -m pytest "$@"
        rc=$?
        set -e
        # pytest exits 5 when it collected no tests: that is a failure of the suite here.
        if [ "$rc" -eq 5 ]; then die "pytest collected no tests"; fi
        exit "$rc" ;;
    *)
        echo "usage: $0 demo|test|setup|run [ARGS...]" >&2
        exit 2 ;;
esac
