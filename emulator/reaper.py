"""Nothing the CLI starts outlives it: a reaper process on a pipe.

:func:`start` spawns a small reaper (this file, run by the same Python with
``-I``, standard library only) in a session of its own and gives it the read
end of a pipe whose write end only the CLI holds. While the CLI lives, the
reaper records the CLI's descendants twice a second (pid and start time, from
``/proc``): the embedded ZooKeeper JVMs, Ray's GCS, raylet, agents and
workers, Spark's JVM. A descendant stays recorded when it is reparented (Ray's
agents are, once the raylet that started them is gone).

When the CLI exits, however it exits (SIGKILL and an OOM kill included: the
kernel closes its descriptors), the reaper reads EOF, waits
:data:`SETTLE_S` for an orderly shutdown to finish, then sends SIGTERM to
every recorded process still alive (same pid *and* start time: a recycled pid
is never touched) and to their descendants, SIGKILL to those alive
:data:`GRACE_S` later. A normal exit leaves nothing to find; a killed CLI
leaves nothing behind but what it started in the last half second.

Why not ``PR_SET_PDEATHSIG``: it fires when the *thread* that forked exits,
is lost across the double forks Ray's agents are started with, and needs a
``preexec_fn``, which is unsafe with threads. Why not an environment marker:
Ray's processes rewrite their command line and environment (setproctitle).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

SETTLE_S = 1.0
"""After EOF, time for an orderly shutdown (Ray's own) to finish before the scan."""
GRACE_S = 3.0
"""Between SIGTERM and SIGKILL."""
POLL_S = 0.5
"""How often the reaper records the CLI's descendants."""


def start() -> int | None:
    """Start the reaper for this process (once); its pid, or ``None`` if it could not start."""
    if _KEEP:
        return None  # already started by this process
    r, w = os.pipe()  # both ends close-on-exec (PEP 446): no other child inherits w
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", str(Path(__file__).resolve()), str(r), str(os.getpid())],
            pass_fds=(r,),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a terminal's Ctrl-C or hang-up is for the CLI
        )
    except OSError:
        os.close(r)
        os.close(w)
        return None
    os.close(r)
    _KEEP.append(w)  # held until this process ends
    os.register_at_fork(after_in_child=lambda: _close_in_child(w))
    return proc.pid


_KEEP: list[int] = []


def _close_in_child(fd: int) -> None:
    """A child forked without exec must not keep the reaper's pipe open."""
    with contextlib.suppress(OSError):
        os.close(fd)


def _stat(pid: int) -> tuple[int, int] | None:
    """``(parent pid, start time in clock ticks)`` of a live, non-zombie process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rpartition(b")")[2].split()
    except OSError:
        return None
    if not fields or fields[0] in (b"Z", b"X"):
        return None
    return int(fields[1]), int(fields[19])


def _table() -> dict[int, tuple[int, int]]:
    out: dict[int, tuple[int, int]] = {}
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                st = _stat(int(entry))
                if st is not None:
                    out[int(entry)] = st
    return out


def descendants(root: int, known: dict[int, int]) -> dict[int, int]:
    """``known`` (pid -> start time) plus every live descendant of ``root`` or of a known pid.

    Known pids that died, or whose pid now belongs to another process, are dropped.
    """
    table = _table()
    alive = {p: t for p, t in known.items() if p in table and table[p][1] == t}
    parents = {root, *alive}
    children: dict[int, list[int]] = {}
    for pid, (ppid, _t) in table.items():
        children.setdefault(ppid, []).append(pid)
    todo = list(parents)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in alive and child != os.getpid():
                alive[child] = table[child][1]
                todo.append(child)
    return alive


def reap(known: dict[int, int], grace_s: float = GRACE_S) -> list[int]:
    """SIGTERM the recorded processes still alive, SIGKILL those alive ``grace_s`` later."""
    found = descendants(-1, known)
    for pid in found:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    left = dict(found)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = descendants(-1, left)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return sorted(found)


def end_children(marker: bytes, grace_s: float = GRACE_S) -> list[int]:
    """End, as :func:`reap` does, this process's descendants whose command line holds ``marker``.

    For what this process started in the last moments before it exits, which
    the reaper may not have recorded yet (a JVM a Ctrl-C caught starting).
    """
    found: dict[int, int] = {}
    for pid, start in descendants(os.getpid(), {}).items():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker in f.read():
                    found[pid] = start
        except OSError:
            continue
    return reap(found, grace_s) if found else []


def _main(argv: list[str]) -> int:
    fd, owner = int(argv[1]), int(argv[2])
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    known: dict[int, int] = {}
    while True:
        known = descendants(owner, known)
        try:
            ready, _, _ = select.select([fd], [], [], POLL_S)
            if ready and not os.read(fd, 512):
                break
        except OSError:
            break
    time.sleep(SETTLE_S)
    known = descendants(-1, known)
    reap(known)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
