"""The JSON result document the benchmarks share: what ran, where, and when."""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any


def header(benchmark: str, started: float, args: argparse.Namespace) -> dict[str, Any]:
    """The fields every result document starts with (``started``: ``time.time()``)."""
    return {
        "benchmark": benchmark,
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "elapsed_s": round(time.time() - started, 1),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_average_start": os.getloadavg()[0],
        "args": {k: _plain(v) for k, v in vars(args).items()},
    }


def _plain(value: object) -> object:
    """An argument as JSON holds it: paths (alone or in a list) as strings."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def write(path: Path, document: dict[str, Any], root: Path) -> None:
    """Write ``document`` to ``path`` and say where (relative to ``root`` when inside it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n")
    print(f"\nwrote {path.relative_to(root) if path.is_relative_to(root) else path}")
