"""``rebalance-emu submit``: a run as a Ray job, the project carried by its runtime_env.

``ray job submit`` uploads the project's source tree as the job's ``working_dir``;
the job's driver (``python -m emulator.cli run ... --ray-address auto``) runs on
the head with that directory as its current directory, and every actor the run
starts imports ``emulator``, ``actors`` and ``zk_registry`` from the same upload.
The cluster's Python must already have the dependencies (Ray's image plus
``deploy/docker/Dockerfile``, or ``./deploy/local.sh setup`` on each machine);
``pip=True`` has Ray install the run's own dependencies into a virtualenv on
every node instead.

No Ray here: the command is built as a list of arguments for Ray's own CLI.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

EXCLUDES: tuple[str, ...] = (
    ".git",
    ".venv",
    "runs",
    "tests/bench/results",
    "**/__pycache__",
    "*.egg-info",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
)
"""What the upload leaves out (gitignore syntax, relative to the working directory)."""

RUN_REQUIREMENTS: tuple[str, ...] = ("kazoo", "msgpack", "rich")
"""The distributions a run imports besides Ray (the analysis needs the others)."""


class SubmitError(ValueError):
    """Bad input to ``submit``: one line naming the problem."""


def project_root() -> Path:
    """The source tree this module was imported from (an editable install or a checkout)."""
    return Path(__file__).resolve().parent.parent


def check_working_dir(path: Path) -> Path:
    """The absolute working directory, or :class:`SubmitError` if it is not the project."""
    root = path.resolve()
    missing = [name for name in ("emulator", "actors", "zk_registry") if not (root / name).is_dir()]
    if missing:
        raise SubmitError(
            f"working directory {root} is not the project's source tree (no "
            f"{', '.join(missing)}); run from a checkout or pass --working-dir"
        )
    return root


def run_requirements(root: Path) -> list[str]:
    """The run's requirements as ``pyproject.toml`` pins them (Ray left out: the cluster's)."""
    try:
        deps: list[str] = tomllib.loads((root / "pyproject.toml").read_text())["project"][
            "dependencies"
        ]
    except (OSError, KeyError, tomllib.TOMLDecodeError) as exc:
        raise SubmitError(
            f"cannot read the dependencies of {root / 'pyproject.toml'}: {exc}"
        ) from None
    out = []
    for dep in deps:
        m = re.match(r"[A-Za-z0-9_.-]+", dep)
        if m and m.group(0).lower() in RUN_REQUIREMENTS:
            out.append(dep)
    return out


def runtime_env(root: Path, *, pip: bool = False) -> dict[str, Any]:
    """The job's runtime_env: the source tree as ``working_dir``, optionally ``pip``."""
    env: dict[str, Any] = {
        "working_dir": str(root),
        "excludes": list(EXCLUDES),
        # the driver's prints reach `ray job logs` as they happen
        "env_vars": {"PYTHONUNBUFFERED": "1"},
    }
    if pip:
        env["pip"] = run_requirements(root)
    return env


def scenario_argument(scenario: str, root: Path, bundled: Sequence[str]) -> str:
    """The scenario as the job on the head will find it.

    A file inside the working directory becomes its path relative to it (the
    job's current directory is the uploaded copy); a bundled name stays a name.
    """
    path = Path(scenario)
    if path.is_file():
        try:
            return path.resolve().relative_to(root).as_posix()
        except ValueError:
            raise SubmitError(
                f"scenario {scenario} is outside the working directory {root}, which is "
                f"all the job carries; copy it there or name a bundled scenario"
            ) from None
    if scenario in bundled:
        return scenario
    raise SubmitError(f"scenario {scenario}: no such file, and no bundled scenario of that name")


def entrypoint(
    scenario: str,
    protocols: Sequence[str],
    out: str,
    *,
    zookeeper: str | None = None,
    force: bool = False,
    shared_storage: bool = False,
) -> list[str]:
    """The job's command: ``rebalance-emu run`` joining the job's own cluster.

    ``out`` must be a URL (``s3://...``) or an absolute path on the head: a
    relative one would land in the job's temporary copy of the project.
    """
    if not (re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", out) or Path(out).is_absolute()):
        raise SubmitError(
            f"--out {out} must be an absolute path on the cluster or a URL: "
            f"the job runs in a temporary copy of the project"
        )
    cmd = ["python", "-m", "emulator.cli", "run", scenario]
    cmd += ["--protocol", ",".join(protocols), "--ray-address", "auto", "--out", out]
    if zookeeper:
        cmd += ["--zookeeper", zookeeper]
    if shared_storage:
        cmd.append("--shared-storage")
    if force:
        cmd.append("--force")
    return cmd


def submit_command(
    env: dict[str, Any],
    job: Sequence[str],
    *,
    address: str | None = None,
    submission_id: str | None = None,
    no_wait: bool = False,
) -> list[str]:
    """``ray job submit`` with this runtime_env and entrypoint, through this Python's Ray."""
    cmd = [sys.executable, "-m", "ray.scripts.scripts", "job", "submit"]
    if address:
        cmd += ["--address", address]
    if submission_id:
        cmd += ["--submission-id", submission_id]
    if no_wait:
        cmd.append("--no-wait")
    cmd += ["--runtime-env-json", json.dumps(env, sort_keys=True), "--", *job]
    return cmd


def display(cmd: Sequence[str]) -> str:
    """The command as a user would type it (``ray job submit ...``)."""
    shown = list(cmd)
    if shown[1:3] == ["-m", "ray.scripts.scripts"]:
        shown = ["ray", *shown[3:]]
    return shlex.join(shown)
