"""Kill an embedded ZooKeeper's JVMs when the process that started them dies.

Run by :class:`zk_registry.server.ZooKeeperEnsemble` (``bound_to_parent=True``)
as ``python -I _watchdog.py FD TOKEN GRACE_S``; it imports nothing but the
standard library. ``FD`` is the read end of a pipe whose write end only the
ensemble's process holds. The watchdog blocks reading it:

* EOF — the owner closed the pipe, or died (SIGKILL, OOM kill, crash: the
  kernel closes its descriptors) — then every live process whose command line
  has the JVM argument ``-Dzk_registry.owner=TOKEN`` (and ZooKeeper's main
  class) gets SIGTERM, SIGKILL after ``GRACE_S``; the scan is repeated once
  after a short pause to catch a member whose ``exec`` was still in flight.
* ``q`` before EOF — an orderly :meth:`~ZooKeeperEnsemble.stop`: the members are
  already reaped, so one scan (which normally finds nothing) and exit.

The token is unique to one ensemble object, so the scan never touches another
ensemble's members, a recycled pid or the watchdog itself (its own argv has the
bare token, not the JVM argument). SIGINT and SIGHUP are ignored (a terminal's
Ctrl-C or hang-up is for the owner to handle); SIGTERM means "clean up now".
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

OWNER_ARG = "-Dzk_registry.owner="
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
_KILL_WAIT_S = 5.0
_RESCAN_PAUSE_S = 0.3
_POLL_S = 0.02


class _Terminated(Exception):
    pass


def _on_sigterm(signum: int, frame: object) -> None:
    raise _Terminated


def _log(message: str) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    print(f"{stamp} zk watchdog {os.getpid()}: {message}", flush=True)


def owned_pids(token: str) -> list[int]:
    """Live processes whose argv has ``OWNER_ARG + token`` and ZooKeeper's main class."""
    flag = (OWNER_ARG + token).encode()
    main = MAIN_CLASS.encode()
    me = os.getpid()
    out = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if flag in argv and main in argv:
            out.append(int(entry))
    return out


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rpartition(b")")[2].split()[:1]
    except OSError:
        return True
    return state in ([b"Z"], [b"X"])


def _wait_gone(pids: list[int], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    left = [p for p in pids if not _gone(p)]
    while left and time.monotonic() < deadline:
        time.sleep(_POLL_S)
        left = [p for p in left if not _gone(p)]
    return left


def _signal(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def kill_owned(token: str, grace_s: float) -> int:
    """SIGTERM the token's members, SIGKILL those alive after ``grace_s``; how many were found."""
    pids = owned_pids(token)
    if not pids:
        return 0
    _log(f"SIGTERM {pids}")
    _signal(pids, signal.SIGTERM)
    left = _wait_gone(pids, grace_s)
    if left:
        _log(f"SIGKILL {left} (alive {grace_s}s after SIGTERM)")
        _signal(left, signal.SIGKILL)
        left = _wait_gone(left, _KILL_WAIT_S)
        if left:
            _log(f"still alive after SIGKILL: {left}")
    return len(pids)


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print("usage: _watchdog.py FD TOKEN GRACE_S", file=sys.stderr)
        return 2
    fd, token, grace_s = int(argv[1]), argv[2], float(argv[3])
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_sigterm)
    orderly = False
    try:
        while True:
            data = os.read(fd, 512)
            if not data:
                break
            orderly = orderly or b"q" in data
    except _Terminated:
        _log("SIGTERM: stopping the members")
    except OSError as exc:
        _log(f"reading the pipe failed ({exc}): stopping the members")
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # finish the cleanup
    if not orderly:
        _log("owner gone: stopping the members")
    found = kill_owned(token, grace_s)
    if not orderly:
        time.sleep(_RESCAN_PAUSE_S)  # a member forked but not yet exec'd when the owner died
        found += kill_owned(token, grace_s)
        _log(f"done ({found} member process(es) stopped)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
