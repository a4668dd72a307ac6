"""A run's directory and its manifest: what every run and experiment writes, however it runs.

:func:`write_manifest` writes ``manifest.json`` atomically, :class:`EventStorage`
says where the event logs go, and the small functions here fill the
manifest's fields (the versions, the command line without secrets, the
overall status, a new run id).
"""

from __future__ import annotations

import contextlib
import json
import platform
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emulator.events import SCHEMA_VERSION
from emulator.scenario import Scenario
from emulator.storage import Location, StorageError


class RunError(RuntimeError):
    """A run could not be set up or carried out; ``str()`` is one line."""


@dataclass(frozen=True)
class EventStorage:
    """Where a run's event logs go (see :mod:`actors.spool`).

    Attributes:
        mode: ``local``, ``shared`` or ``shipped``.
        location: the run directory (local path or URL).
        spool_root: the node-local spool root (``""``: each node's default).
        driver_node: the driver's Ray node id.
    """

    mode: str
    location: Location
    spool_root: str = ""
    driver_node: str = ""

    def events_url(self, protocol: str) -> str:
        """``shared`` on a URL: the URL of a protocol's events directory."""
        if self.mode == "shared" and self.location.is_url:
            return self.location.child_uri(f"{protocol}/events")
        return ""


def versions() -> dict[str, str]:
    """The versions of Python, the event schema, the libraries and this package."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "event_schema": str(SCHEMA_VERSION)}
    # The installed distributions' versions, read without importing them (Ray and
    # Spark take seconds to import; the sim engine loads neither).
    for dist in ("ray", "kazoo", "msgpack", "pyspark", "pyarrow", "kafka-rebalance-emulator"):
        with contextlib.suppress(PackageNotFoundError):
            out[dist] = version(dist)
    return out


def write_manifest(path: Path | Location, manifest: dict[str, Any]) -> None:
    """Write the manifest atomically (a crash leaves the old one, never half of one).

    ``path`` is the manifest file, or a run :class:`~emulator.storage.Location`
    (``manifest.json`` is written there, on any storage).
    """
    text = json.dumps(manifest, indent=2, sort_keys=True, default=str) + "\n"
    if isinstance(path, Location):
        try:
            path.write_text("manifest.json", text)
        except StorageError as exc:
            raise RunError(str(exc)) from None
        return
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def redacted_argv(argv: list[str]) -> list[str]:
    """The command line with a ``--zk-auth`` password replaced by ``***``."""
    out: list[str] = []
    hide = False
    for a in argv:
        if hide:
            out.append(a.split(":", 1)[0] + ":***")
            hide = False
        elif a == "--zk-auth":
            out.append(a)
            hide = True
        elif a.startswith("--zk-auth="):
            out.append("--zk-auth=" + a.split("=", 1)[1].split(":", 1)[0] + ":***")
        else:
            out.append(a)
    return out


def overall_status(statuses: list[str]) -> str:
    """The run's status from its protocols': the worst of them.

    ``failed`` > ``stopped`` (the sim's online checks stopped it at a
    violation) > ``interrupted`` > ``degraded`` (a host or broker lost
    unasked) > ``completed``.
    """
    for worst in ("failed", "stopped", "interrupted", "degraded"):
        if worst in statuses:
            return worst
    return "completed"


def new_run_id(scenario: Scenario) -> str:
    """A run id: scenario name, UTC time, and a short random suffix."""
    return (
        f"{scenario.name}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{uuid.uuid4().hex[:6]}"
    )
