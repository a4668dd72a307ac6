"""Running a snippet of Python in a fresh interpreter under a given ``PYTHONHASHSEED``.

The replay tests compare what the same code prints under different hash seeds:
set and dict orders of strings change with the seed, so anything they leak into
a schedule or a log shows up as a difference.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def output_under_hash_seed(code: str, hash_seed: str, timeout: float = 300.0) -> str:
    """The standard output of ``python -c code`` run from the repository under ``hash_seed``."""
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout
