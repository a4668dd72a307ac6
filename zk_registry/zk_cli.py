"""``rebalance-emu zk start|stop|status``: a local ZooKeeper that outlives the CLI.

``start`` launches a detached standalone server or loopback ensemble (its
processes survive the CLI exiting), records pids, ports and the connect string
in ``DIR/zk-state.json`` and prints the connect string. ``status`` prints each
member's mode from ``srvr``; ``stop`` stops the members and removes the state
file (data and logs stay in ``DIR``). Errors are one line on stderr with a
non-zero exit code.

The top-level CLI mounts this with :func:`add_zk_subparser`; it also runs on
its own as ``python -m zk_registry.zk_cli zk start --ensemble 3``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from zk_registry.server import (
    DEFAULT_STARTUP_TIMEOUT_S,
    DEFAULT_STOP_TIMEOUT_S,
    DEFAULT_TICK_TIME_MS,
    MEMBER_MARKER,
    MemberStatus,
    ZooKeeperEnsemble,
    ZooKeeperError,
    member_status_from_srvr,
    pid_alive,
    terminate_pid,
)

__all__ = [
    "DEFAULT_DIR",
    "STATE_FILE",
    "STATE_VERSION",
    "ZkCliError",
    "add_zk_subparser",
    "format_status",
    "load_state",
    "main",
    "run_zk_command",
    "start_zk",
    "state_path",
    "stop_zk",
    "zk_status",
]

DEFAULT_DIR = Path("runs") / "zk"
STATE_FILE = "zk-state.json"
STATE_VERSION = 1


class ZkCliError(Exception):
    """A user-facing error of the ``zk`` command (printed as one line)."""


def state_path(directory: str | os.PathLike[str]) -> Path:
    return Path(directory) / STATE_FILE


def load_state(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """The recorded ``zk-state.json`` of ``directory``.

    Raises:
        ZkCliError: if there is none or it is unreadable.
    """
    path = state_path(directory)
    try:
        state = json.loads(path.read_text())
    except FileNotFoundError:
        raise ZkCliError(f"ZooKeeper is not running: no {path}") from None
    except (OSError, ValueError) as exc:
        raise ZkCliError(f"cannot read {path}: {exc}") from None
    if not isinstance(state, dict) or not isinstance(state.get("members"), list):
        raise ZkCliError(f"{path} is not a zk state file")
    return state


def _member_alive(member: dict[str, Any]) -> bool:
    pid = member.get("pid")
    if not isinstance(pid, int) or not pid_alive(pid):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return True
    return f"{MEMBER_MARKER}{member['dir']}" in cmdline


def start_zk(
    directory: str | os.PathLike[str] = DEFAULT_DIR,
    ensemble: int = 1,
    tick_time_ms: int = DEFAULT_TICK_TIME_MS,
    timeout: float = DEFAULT_STARTUP_TIMEOUT_S,
) -> dict[str, Any]:
    """Start a detached ensemble in ``directory`` and record it; return the state.

    Raises:
        ZkCliError: if one recorded in ``directory`` is still running.
        ZooKeeperError: if it does not come up within ``timeout``.
    """
    directory = Path(directory)
    if state_path(directory).exists():
        try:
            old = load_state(directory)
        except ZkCliError:
            old = {"members": []}
        if any(_member_alive(m) for m in old["members"]):
            raise ZkCliError(
                f"ZooKeeper already running in {directory} at {old.get('connect_string')}"
                " (zk stop first)"
            )
    # Detached and not bound_to_parent: the members must outlive this command.
    zk = ZooKeeperEnsemble(ensemble, directory, tick_time_ms, detached=True, bound_to_parent=False)
    zk.start(timeout=timeout)
    state = {
        "version": STATE_VERSION,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        **zk.describe(),
    }
    tmp = state_path(directory).with_suffix(".json.tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    tmp.replace(state_path(directory))
    return state


def zk_status(directory: str | os.PathLike[str] = DEFAULT_DIR) -> list[MemberStatus]:
    """``srvr`` of every recorded member.

    Raises:
        ZkCliError: if nothing is recorded or no member process is alive.
    """
    state = load_state(directory)
    members: list[dict[str, Any]] = state["members"]
    alive = [_member_alive(m) for m in members]
    if not any(alive):
        raise ZkCliError(f"ZooKeeper is not running (no live member of {state_path(directory)})")
    out = []
    for m, up in zip(members, alive, strict=True):
        if up:
            out.append(
                member_status_from_srvr(int(m["index"]), int(m["client_port"]), int(m["pid"]), True)
            )
        else:
            out.append(
                MemberStatus(
                    int(m["index"]),
                    int(m["myid"]),
                    int(m["client_port"]),
                    None,
                    False,
                    None,
                    None,
                    None,
                    error="not running",
                )
            )
    return out


def stop_zk(
    directory: str | os.PathLike[str] = DEFAULT_DIR, timeout: float = DEFAULT_STOP_TIMEOUT_S
) -> int:
    """Stop every recorded member (SIGTERM, SIGKILL after ``timeout``); remove the state file.

    Returns:
        How many member processes were stopped.

    Raises:
        ZkCliError: if nothing is recorded.
    """
    state = load_state(directory)
    stopped = 0
    for m in state["members"]:
        pid = m.get("pid")
        if isinstance(pid, int) and terminate_pid(
            pid, timeout=timeout, must_contain=f"{MEMBER_MARKER}{m['dir']}"
        ):
            stopped += 1
    state_path(directory).unlink(missing_ok=True)
    return stopped


def format_status(statuses: Sequence[MemberStatus]) -> str:
    """One line per member: ``member 1 127.0.0.1:PORT pid N leader zxid=0x.. connections=N``."""
    lines = []
    for s in statuses:
        head = f"member {s.myid} {s.address}"
        if s.mode is None:
            lines.append(f"{head} down ({s.error or 'no answer'})")
        else:
            zxid = "?" if s.zxid is None else f"0x{s.zxid:x}"
            conns = "?" if s.connections is None else str(s.connections)
            lines.append(f"{head} pid {s.pid} {s.mode} zxid={zxid} connections={conns}")
    return "\n".join(lines)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1: {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {value}")
    return value


def add_zk_subparser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """Add the ``zk`` subcommand; it sets ``func`` to :func:`run_zk_command`.

    Its options land in ``args.zk_action``, ``args.zk_dir``, ``args.zk_ensemble``,
    ``args.zk_tick_time_ms`` and ``args.zk_timeout``.
    """
    parser = subparsers.add_parser(
        "zk",
        help="start, stop or inspect a local ZooKeeper (standalone or ensemble)",
        description="Manage a local ZooKeeper on 127.0.0.1 that outlives this command.",
    )
    parser.add_argument(
        "zk_action",
        choices=("start", "stop", "status"),
        metavar="{start,stop,status}",
        help="start: launch and print the connect string; status: member modes; "
        "stop: stop the members",
    )
    parser.add_argument(
        "--ensemble",
        dest="zk_ensemble",
        type=_positive_int,
        default=1,
        metavar="N",
        help="number of members (1 = standalone, default; 3 or 5 for a quorum)",
    )
    parser.add_argument(
        "--dir",
        dest="zk_dir",
        type=Path,
        default=DEFAULT_DIR,
        metavar="DIR",
        help=f"data, logs and {STATE_FILE} (default: ./{DEFAULT_DIR})",
    )
    parser.add_argument(
        "--tick-time",
        dest="zk_tick_time_ms",
        type=_positive_int,
        default=DEFAULT_TICK_TIME_MS,
        metavar="MS",
        help=f"ZooKeeper tickTime in ms (default {DEFAULT_TICK_TIME_MS}); "
        "sessions get [2, 20] x tickTime",
    )
    parser.add_argument(
        "--timeout",
        dest="zk_timeout",
        type=_positive_float,
        default=None,
        metavar="SECONDS",
        help="bound on start (default 60) or stop (default 10)",
    )
    parser.set_defaults(func=run_zk_command)
    return parser


def run_zk_command(args: argparse.Namespace) -> int:
    """Handler of ``zk``: 0 on success, 1 on any error (one line on stderr)."""
    action: str = args.zk_action
    directory = Path(args.zk_dir)
    timeout: float | None = getattr(args, "zk_timeout", None)
    try:
        if action == "start":
            state = start_zk(
                directory,
                ensemble=int(getattr(args, "zk_ensemble", 1)),
                tick_time_ms=int(getattr(args, "zk_tick_time_ms", DEFAULT_TICK_TIME_MS)),
                timeout=DEFAULT_STARTUP_TIMEOUT_S if timeout is None else timeout,
            )
            print(state["connect_string"], flush=True)
            return 0
        if action == "status":
            statuses = zk_status(directory)
            print(format_status(statuses), flush=True)
            return 0 if all(s.serving for s in statuses) else 1
        if action == "stop":
            stopped = stop_zk(
                directory, timeout=DEFAULT_STOP_TIMEOUT_S if timeout is None else timeout
            )
            print(f"stopped {stopped} ZooKeeper member(s) in {directory}", flush=True)
            return 0
        return _error(f"unknown zk action {action!r}")
    except ZooKeeperError as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return _error(f"{first} (logs under {directory})")
    except (ZkCliError, OSError, ValueError) as exc:
        return _error(str(exc) or type(exc).__name__)
    except KeyboardInterrupt:
        return _error("interrupted", code=130)


def _error(message: str, code: int = 1) -> int:
    print(f"rebalance-emu zk: error: {message}", file=sys.stderr, flush=True)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m zk_registry.zk_cli zk start|stop|status ...``."""
    parser = argparse.ArgumentParser(prog="rebalance-emu")
    subparsers = parser.add_subparsers(dest="command", required=True)
    add_zk_subparser(subparsers)
    args = parser.parse_args(argv)
    handler = args.func
    result: int = handler(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
