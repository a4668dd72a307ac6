"""The embedded ZooKeeper: a managed standalone server or loopback ensemble.

This module starts the ZooKeeper that is installed on the machine (Debian's
``zookeeper`` package, or jars named by ``ZOOKEEPER_HOME`` /
``ZOOKEEPER_CLASSPATH``) as child JVM processes of ``QuorumPeerMain``, all
bound to 127.0.0.1 on free ports, with their data, configuration and logs
under one base directory (normally the run directory)::

    base_dir/
      member-1/zoo.cfg  log4j.properties  logback.xml  zookeeper.log  zookeeper.out  data/myid
      member-2/...

A size-1 ensemble is a standalone server (no ``server.N`` lines); larger
ensembles get ``server.N=127.0.0.1:PEER:ELECTION`` lines and a ``myid`` per
member. Members are addressed by a 0-based index in this API; ZooKeeper's
``myid`` is ``index + 1``.

Time: ZooKeeper negotiates every session timeout into
``[2 * tickTime, 20 * tickTime]``. :func:`tick_time_for` picks a tickTime for a
scaled Kafka session timeout so that it lies inside those bounds, and
:meth:`ZooKeeperEnsemble.describe` records the tickTime and the bounds.

Safety: every wait is bounded, shutdown is SIGTERM then SIGKILL after a
bound, and an ``atexit`` hook kills the members of every ensemble that was not
stopped (unless it was started ``detached``, as the ``zk start`` CLI does).
``atexit`` does not run when the owning process is SIGKILLed or OOM-killed, so
an ensemble that is ``bound_to_parent`` (the default unless ``detached``) also
has a watchdog process that kills its members when the owner dies; see
:class:`ZooKeeperEnsemble`.

:func:`probe_zookeeper` checks, within a bound, that a user-given connect string
names a ZooKeeper server (a real session handshake, closed again at once).

Nothing here imports kazoo; the four-letter words and the handshake are spoken
over a plain socket.
"""

from __future__ import annotations

import atexit
import contextlib
import math
import os
import re
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

from zk_registry import _watchdog
from zk_registry.timeouts import (  # re-exported: the embedded server's helpers
    negotiated_session_timeout_ms,
    tick_time_for,
)

__all__ = [
    "DEFAULT_TICK_TIME_MS",
    "FOUR_LETTER_WORDS",
    "HOST",
    "MAIN_CLASS",
    "MEMBER_MARKER",
    "OWNER_ARG",
    "MemberPorts",
    "MemberStatus",
    "ZooKeeperEnsemble",
    "ZooKeeperError",
    "ZooKeeperNotFoundError",
    "ZooKeeperServer",
    "ZooKeeperStartError",
    "find_free_ports",
    "four_letter_word",
    "java_executable",
    "member_status_from_srvr",
    "negotiated_session_timeout_ms",
    "parse_connect_string",
    "parse_cons_timeouts",
    "parse_srvr",
    "pid_alive",
    "probe_zookeeper",
    "split_host_port",
    "terminate_pid",
    "tick_time_for",
    "zookeeper_classpath",
]

HOST = "127.0.0.1"
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
DEFAULT_JARS: tuple[str, ...] = (
    "/usr/share/java/zookeeper.jar",
    "/usr/share/java/slf4j-log4j12.jar",
    "/usr/share/java/log4j-1.2.jar",
)
FOUR_LETTER_WORDS: tuple[str, ...] = (
    "ruok",
    "mntr",
    "srvr",
    "stat",
    "conf",
    "cons",
    "wchs",
    "dump",
)
SERVING_MODES = frozenset({"leader", "follower", "standalone"})
DEFAULT_TICK_TIME_MS = 2000
DEFAULT_HEAP = "256m"
DEFAULT_STARTUP_TIMEOUT_S = 60.0
DEFAULT_STOP_TIMEOUT_S = 10.0
_KILL_WAIT_S = 5.0
_POLL_S = 0.05
_PORT_RETRIES = 3
#: JVM argument that tags a member process with its directory (for safe kill by pid).
MEMBER_MARKER = "-Dzk_registry.member="
#: JVM argument that tags a member with its ensemble object's token (for the watchdog).
OWNER_ARG = _watchdog.OWNER_ARG
#: After the owner dies, the watchdog waits this long after SIGTERM before SIGKILL.
WATCHDOG_GRACE_S = 1.0
_WATCHDOG_SCRIPT = Path(_watchdog.__file__).resolve()
#: Default client port when a connect-string member has none (as kazoo and Java).
DEFAULT_CLIENT_PORT = 2181


class ZooKeeperError(RuntimeError):
    """Any failure of the managed ZooKeeper."""


class ZooKeeperNotFoundError(ZooKeeperError):
    """Java or the ZooKeeper jars are not installed where we look."""


class ZooKeeperStartError(ZooKeeperError):
    """A member did not come up (or back) within its bound; carries the log tail."""


# --------------------------------------------------------------------------- pure helpers

# tick_time_for and negotiated_session_timeout_ms live in zk_registry.timeouts (pure, shared
# with the simulated ZooKeeper) and are imported above.


def zookeeper_classpath(env: Mapping[str, str] | None = None) -> str:
    """The Java classpath for the installed ZooKeeper.

    Order: ``ZOOKEEPER_CLASSPATH`` verbatim if set; else every ``*.jar`` in
    ``ZOOKEEPER_HOME`` and ``ZOOKEEPER_HOME/lib``; else the Debian jars in
    ``/usr/share/java`` (``zookeeper.jar``, whose manifest brings the rest, plus
    the slf4j-log4j12 binding and log4j 1.2 when present).

    Raises:
        ZooKeeperNotFoundError: if no ZooKeeper jar can be found.
    """
    environ = os.environ if env is None else env
    explicit = environ.get("ZOOKEEPER_CLASSPATH", "").strip()
    if explicit:
        return explicit
    home = environ.get("ZOOKEEPER_HOME", "").strip()
    if home:
        root = Path(home)
        jars = sorted(str(p) for d in (root, root / "lib") for p in d.glob("*.jar"))
        if not any("zookeeper" in Path(j).name for j in jars):
            raise ZooKeeperNotFoundError(
                f"ZOOKEEPER_HOME={home} has no zookeeper*.jar (or lib/*.jar)"
            )
        return os.pathsep.join(jars)
    if not Path(DEFAULT_JARS[0]).is_file():
        raise ZooKeeperNotFoundError(
            f"{DEFAULT_JARS[0]} not found: install ZooKeeper (apt-get install zookeeper) "
            "or set ZOOKEEPER_HOME / ZOOKEEPER_CLASSPATH"
        )
    return os.pathsep.join(j for j in DEFAULT_JARS if Path(j).is_file())


def java_executable(env: Mapping[str, str] | None = None) -> str:
    """``$JAVA_HOME/bin/java`` if set, else ``java`` on PATH.

    Raises:
        ZooKeeperNotFoundError: if no java executable is found.
    """
    environ = os.environ if env is None else env
    java_home = environ.get("JAVA_HOME", "").strip()
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("java")
    if found is None:
        raise ZooKeeperNotFoundError("java not found on PATH (and JAVA_HOME is not set)")
    return found


def find_free_ports(count: int, host: str = HOST) -> list[int]:
    """``count`` distinct TCP ports that are free on ``host`` right now.

    All sockets are held open until every port is chosen, so the ports differ;
    another process may still take one before ZooKeeper binds it (start retries).
    """
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def four_letter_word(host: str, port: int, word: str, timeout: float = 2.0) -> str:
    """Send a four-letter word (``ruok``, ``srvr``, ``mntr``, ``cons``, ``dump``...) and
    return the server's whole answer.

    Raises:
        ValueError: if ``word`` is not four letters.
        OSError: if the server cannot be reached or does not answer within ``timeout``.
    """
    if len(word) != 4 or not word.isalpha():
        raise ValueError(f"not a four-letter word: {word!r}")
    deadline = time.monotonic() + timeout
    chunks: list[bytes] = []
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(word.encode("ascii"))
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{word} on {host}:{port}: no complete answer in {timeout}s")
            sock.settimeout(remaining)
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")


def parse_srvr(text: str) -> dict[str, str]:
    """``Key: value`` lines of a ``srvr``/``stat`` answer as a dict (``Mode``, ``Zxid``...)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key and not key.startswith(" "):
            out.setdefault(key.strip(), value.strip())
    return out


_CONS_SESSION = re.compile(r"sid=0x([0-9a-fA-F]+)\b.*?\bto=(\d+)")


def parse_cons_timeouts(text: str) -> dict[int, int]:
    """Negotiated session timeouts (ms) by session id, from a ``cons`` answer.

    Connections that have no session yet (``sid`` absent or 0) are left out.
    """
    out: dict[int, int] = {}
    for match in _CONS_SESSION.finditer(text):
        sid = int(match.group(1), 16)
        if sid:
            out[sid] = int(match.group(2))
    return out


# --------------------------------------------------------------------------- probing


def parse_connect_string(connect: str) -> tuple[list[str], str]:
    """Split ``host:port[,host:port...][/chroot]`` into members and chroot.

    Each member is returned as ``host:port`` (port :data:`DEFAULT_CLIENT_PORT`
    if omitted; IPv6 as ``[addr]:port``); the chroot is ``""`` or an absolute
    path without a trailing slash.

    Raises:
        ValueError: with one line naming what is wrong.
    """
    text = connect.strip()
    hosts_part, slash, chroot = text.partition("/")
    chroot = (slash + chroot).rstrip("/") if slash else ""
    if chroot and ("//" in chroot or any(c in (".", "..") for c in chroot.split("/")[1:])):
        raise ValueError(f"ZooKeeper connect string {connect!r}: invalid chroot {chroot!r}")
    hosts: list[str] = []
    for raw in hosts_part.split(","):
        entry = raw.strip()
        if not entry:
            continue
        host, port = split_host_port(entry, connect)
        hosts.append(f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
    if not hosts:
        raise ValueError(f"ZooKeeper connect string {connect!r} has no host:port")
    return hosts, chroot


def split_host_port(entry: str, connect: str) -> tuple[str, int]:
    """``(host, port)`` of one connect-string member (``[v6]`` unbracketed, port 2181 if none).

    Raises:
        ValueError: naming ``connect`` and the bad member.
    """
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
        if rest and not rest.startswith(":"):
            raise ValueError(f"ZooKeeper connect string {connect!r}: bad member {entry!r}")
    elif entry.count(":") == 1:
        host, _, port_text = entry.partition(":")
    elif ":" in entry:
        host, port_text = entry, ""  # a bare IPv6 address
    else:
        host, port_text = entry, ""
    if not host:
        raise ValueError(f"ZooKeeper connect string {connect!r}: member {entry!r} has no host")
    try:
        port = int(port_text) if port_text else DEFAULT_CLIENT_PORT
    except ValueError:
        raise ValueError(
            f"ZooKeeper connect string {connect!r}: member {entry!r} has a bad port"
        ) from None
    if not 0 < port < 65536:
        raise ValueError(f"ZooKeeper connect string {connect!r}: port {port} out of range")
    return host, port


#: The ConnectRequest timeout the probe asks for (the server clamps it); short,
#: so that a session left behind by a lost closeSession expires soon.
_PROBE_SESSION_TIMEOUT_MS = 4000
_CLOSE_SESSION_OP = -11


class _NotZooKeeper(Exception):
    """The member accepted TCP but did not complete a ZooKeeper handshake."""


def _recv_exact(sock: socket.socket, n: int, deadline: float) -> bytes:
    buf = b""
    while len(buf) < n:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        sock.settimeout(remaining)
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionAbortedError(buf)
        buf += chunk
    return buf


def _handshake(host: str, port: int, deadline: float) -> int:
    """One ZooKeeper session handshake, then closeSession. Returns the negotiated timeout.

    Raises:
        OSError: the member could not be reached (refused, unroutable, DNS).
        _NotZooKeeper: it accepted TCP but did not answer as ZooKeeper does.
    """
    timeout = max(0.01, deadline - time.monotonic())
    sock = socket.create_connection((host, port), timeout=timeout)
    with sock:
        # ConnectRequest: protocolVersion, lastZxidSeen, timeOut, sessionId, passwd, readOnly.
        body = struct.pack(">iqiqi", 0, 0, _PROBE_SESSION_TIMEOUT_MS, 0, 16) + bytes(16) + b"\0"
        try:
            sock.settimeout(timeout)
            sock.sendall(struct.pack(">i", len(body)) + body)
            head = _recv_exact(sock, 4, deadline)
        except TimeoutError:
            raise _NotZooKeeper("no answer to a ZooKeeper handshake") from None
        except ConnectionError:  # EOF (ConnectionAbortedError from _recv_exact), reset, EPIPE
            raise _NotZooKeeper(
                "closed the connection without a ZooKeeper handshake "
                "(not ZooKeeper, or a member that is not serving)"
            ) from None
        except OSError as exc:
            raise _NotZooKeeper(f"connection failed during the handshake: {exc}") from None
        (length,) = struct.unpack(">i", head)
        # ConnectResponse: protocolVersion, timeOut, sessionId, passwd (16 bytes), [readOnly].
        if not 36 <= length <= 64:
            raise _NotZooKeeper(f"answered something else than a ZooKeeper handshake ({head!r}...)")
        try:
            resp = _recv_exact(sock, length, deadline)
        except (TimeoutError, OSError):
            raise _NotZooKeeper("incomplete ZooKeeper handshake answer") from None
        version, negotiated, session_id, pw_len = struct.unpack(">iiqi", resp[:20])
        if version != 0 or pw_len != 16 or negotiated <= 0 or session_id == 0:
            raise _NotZooKeeper(
                f"answered something else than a ZooKeeper session (version {version}, "
                f"timeout {negotiated}, session 0x{session_id & 0xFFFFFFFFFFFFFFFF:x})"
            )
        # closeSession, so the probe leaves no session behind; best effort, bounded.
        with contextlib.suppress(OSError):
            close_deadline = min(deadline, time.monotonic() + 2.0)
            sock.settimeout(max(0.01, close_deadline - time.monotonic()))
            sock.sendall(struct.pack(">iii", 8, 1, _CLOSE_SESSION_OP))
            _recv_exact(sock, 20, close_deadline)  # length + ReplyHeader(xid, zxid, err)
            _recv_exact(sock, 1, close_deadline)  # until the server hangs up (EOF raises)
        return int(negotiated)


def probe_zookeeper(hosts: Sequence[str] | str, timeout_s: float = 10.0) -> str:
    """Confirm within ``timeout_s`` that at least one member is a serving ZooKeeper.

    Each member is probed in parallel with a real session handshake (a
    ``ConnectRequest``, answered with a ``ConnectResponse`` only by a serving
    ZooKeeper), and the session is closed again at once. This needs no
    four-letter word (servers may not whitelist them) and no kazoo. A member
    that accepts TCP but never answers, answers something else, or closes the
    connection counts as "not ZooKeeper".

    Args:
        hosts: ``["host:port", ...]``, or a connect string (a chroot is ignored).
        timeout_s: bound on the whole probe.

    Returns:
        The first member that answered, as ``host:port``.

    Raises:
        ZooKeeperError: one line naming the problem: no member answered, or
            those that answered are not (serving) ZooKeeper servers.
        ValueError: a malformed member (bad port ...).
    """
    if isinstance(hosts, str):
        members, _ = parse_connect_string(hosts)
    else:
        members = parse_connect_string(",".join(hosts))[0] if hosts else []
    if not members:
        raise ValueError("no ZooKeeper host:port given")
    deadline = time.monotonic() + timeout_s
    # The probes give up a little earlier, so that their verdict is in by the deadline.
    probe_deadline = deadline - min(0.2, timeout_s * 0.05)
    lock = threading.Lock()
    done = threading.Condition(lock)
    results: dict[str, tuple[str, str]] = {}  # member -> (ok|unreachable|not_zk, detail)

    def probe(member: str) -> None:
        host, port = split_host_port(member, member)
        try:
            negotiated = _handshake(host, port, probe_deadline)
            result = ("ok", f"session timeout {negotiated} ms")
        except _NotZooKeeper as exc:
            result = ("not_zk", str(exc))
        except TimeoutError:
            result = ("unreachable", "connect timed out")
        except OSError as exc:
            result = ("unreachable", exc.strerror or type(exc).__name__)
        except Exception as exc:  # never let a probe thread die silently
            result = ("unreachable", f"{type(exc).__name__}: {exc}")
        with done:
            results[member] = result
            done.notify_all()

    for member in members:
        threading.Thread(target=probe, args=(member,), name="zk-probe", daemon=True).start()
    with done:
        while True:
            for member in members:  # in the given order: the first good one wins
                if results.get(member, ("",))[0] == "ok":
                    return member
            if len(results) == len(members):
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            done.wait(remaining)
        snapshot = dict(results)
    label = ",".join(members)
    not_zk = [(m, snapshot[m][1]) for m in members if snapshot.get(m, ("",))[0] == "not_zk"]
    unreachable = [m for m in members if snapshot.get(m, ("",))[0] != "not_zk"]
    if not_zk:
        parts = [
            f"{m} is not a serving ZooKeeper server ({why}"
            + (f" within {timeout_s:g}s)" if why.startswith("no answer") else ")")
            for m, why in not_zk
        ]
        if unreachable:
            parts.append(f"no member answered on {', '.join(unreachable)}")
        raise ZooKeeperError(f"ZooKeeper at {label}: " + "; ".join(parts))
    reasons = ", ".join(f"{m}: {snapshot.get(m, ('', 'no answer in time'))[1]}" for m in members)
    raise ZooKeeperError(
        f"ZooKeeper at {label} is unreachable (no member answered on {', '.join(members)}; "
        f"{reasons}; waited up to {timeout_s:g}s)"
    )


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a live (non-zombie) process; reaps it if it is our dead child."""
    with contextlib.suppress(ChildProcessError, OSError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no procfs: trust kill(0)
    state = stat.rpartition(")")[2].split()[:1]
    return state != ["Z"] and state != ["X"]


def _pid_cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def terminate_pid(
    pid: int, timeout: float = DEFAULT_STOP_TIMEOUT_S, must_contain: str | None = None
) -> bool:
    """SIGTERM ``pid``, then SIGKILL if it is still alive after ``timeout`` seconds.

    Used for members started by another process (the ``zk start`` CLI). If
    ``must_contain`` is given, the process is only signalled when its command line
    contains that string (guards against a recycled pid).

    Returns:
        True if a process was signalled, False if it was already gone (or not ours).

    Raises:
        ZooKeeperError: if the process survives SIGKILL for the kill bound.
    """
    if not pid_alive(pid):
        return False
    if must_contain is not None:
        cmdline = _pid_cmdline(pid)
        if cmdline is not None and not any(must_contain in part for part in cmdline):
            return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if _wait_pid_gone(pid, timeout):
        return True
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    if not _wait_pid_gone(pid, _KILL_WAIT_S):
        raise ZooKeeperError(f"pid {pid} still alive {_KILL_WAIT_S}s after SIGKILL")
    return True


def _wait_pid_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while pid_alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_S)
    return True


def _tail(path: Path, lines: int) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            data = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


# --------------------------------------------------------------------------- value types


@dataclass(frozen=True)
class MemberPorts:
    """The loopback ports of one member (peer/election are unused when standalone)."""

    client: int
    peer: int
    election: int


@dataclass(frozen=True)
class MemberStatus:
    """One member as seen by ``srvr`` (``mode`` is None when it does not serve)."""

    index: int
    myid: int
    client_port: int
    pid: int | None
    running: bool
    mode: str | None
    zxid: int | None
    connections: int | None
    error: str | None = None

    @property
    def serving(self) -> bool:
        return self.mode in SERVING_MODES

    @property
    def address(self) -> str:
        return f"{HOST}:{self.client_port}"


def member_status_from_srvr(
    index: int, client_port: int, pid: int | None, running: bool, timeout: float = 2.0
) -> MemberStatus:
    """Ask one member ``srvr`` and wrap the answer (never raises for a dead member)."""
    try:
        text = four_letter_word(HOST, client_port, "srvr", timeout=timeout)
    except OSError as exc:
        return MemberStatus(
            index,
            index + 1,
            client_port,
            pid,
            running,
            None,
            None,
            None,
            error=f"{type(exc).__name__}: {exc}",
        )
    fields = parse_srvr(text)
    mode = fields.get("Mode")
    zxid: int | None = None
    connections: int | None = None
    with contextlib.suppress(KeyError, ValueError):
        zxid = int(fields["Zxid"], 16)
    with contextlib.suppress(KeyError, ValueError):
        connections = int(fields["Connections"])
    error = None if mode else (text.strip().splitlines() or ["empty srvr answer"])[0]
    return MemberStatus(index, index + 1, client_port, pid, running, mode, zxid, connections, error)


# --------------------------------------------------------------------------- the ensemble


class _Member:
    def __init__(self, index: int, ports: MemberPorts, directory: Path) -> None:
        self.index = index
        self.myid = index + 1
        self.ports = ports
        self.dir = directory
        self.proc: subprocess.Popen[bytes] | None = None
        self.out: IO[bytes] | None = None

    @property
    def config_path(self) -> Path:
        return self.dir / "zoo.cfg"

    @property
    def log_path(self) -> Path:
        return self.dir / "zookeeper.log"

    @property
    def out_path(self) -> Path:
        return self.dir / "zookeeper.out"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


#: Write ends of every live watchdog pipe: closed in children forked without exec.
_WATCHDOG_FDS: set[int] = set()


def _close_watchdog_fds_in_child() -> None:
    for fd in list(_WATCHDOG_FDS):
        with contextlib.suppress(OSError):
            os.close(fd)
    _WATCHDOG_FDS.clear()


os.register_at_fork(after_in_child=_close_watchdog_fds_in_child)


class _Watchdog:
    """The parent side of :mod:`zk_registry._watchdog`: the process and the pipe's write end."""

    def __init__(self, token: str, log_path: Path, grace_s: float) -> None:
        self.token = token
        self.log_path = log_path
        self.grace_s = grace_s
        self.proc: subprocess.Popen[bytes] | None = None
        self._fd: int | None = None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None and self._fd is not None

    def start(self) -> None:
        if not sys.executable:
            raise ZooKeeperError(
                "cannot start the ZooKeeper watchdog: sys.executable is unknown "
                "(pass bound_to_parent=False)"
            )
        read_fd, write_fd = os.pipe()  # both non-inheritable (close-on-exec)
        try:
            with self.log_path.open("ab") as log:
                self.proc = subprocess.Popen(
                    [
                        sys.executable,
                        "-I",
                        str(_WATCHDOG_SCRIPT),
                        str(read_fd),
                        self.token,
                        repr(self.grace_s),
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    pass_fds=(read_fd,),  # only the read end; close_fds drops the rest
                    close_fds=True,
                )
        except BaseException:
            os.close(write_fd)
            raise
        finally:
            os.close(read_fd)
        self._fd = write_fd
        _WATCHDOG_FDS.add(write_fd)

    def close(self, orderly: bool, timeout: float = _KILL_WAIT_S) -> None:
        """Close the pipe (``orderly``: tell it the members are already stopped) and reap it
        (SIGKILL if it has not exited within ``timeout``)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            _WATCHDOG_FDS.discard(fd)
            if orderly:
                with contextlib.suppress(OSError):
                    os.write(fd, b"q")
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    self.proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=_KILL_WAIT_S)


class ZooKeeperEnsemble:
    """A standalone ZooKeeper (``size=1``) or an ``size``-member loopback ensemble.

    Example::

        with ZooKeeperEnsemble(3, run_dir / "zk", tick_time_ms=200) as zk:
            client = KazooClient(hosts=zk.connect_string)
            zk.kill_member(0)
            zk.restart_member(0)

    Args:
        size: number of members (1 is standalone; 3 or 5 for a fault-tolerant quorum).
        base_dir: directory for member data, configs and logs (created).
        tick_time_ms: ZooKeeper tickTime; see :func:`tick_time_for`.
        ports: fixed ports per member; free ports are picked (and re-picked if
            one is taken during start) when None.
        heap: JVM ``-Xmx``.
        jvm_args: extra JVM arguments.
        extra_config: extra ``zoo.cfg`` lines, which override the defaults.
        classpath: defaults to :func:`zookeeper_classpath`.
        java: defaults to :func:`java_executable`.
        fsync: fsync the transaction log (off by default: the emulator needs no durability).
        detached: start members in their own session and leave them out of the
            ``atexit`` kill, so they outlive this process (for the ``zk start`` CLI).
        clean: wipe the members' directories on :meth:`start` (never on restarts).
        startup_timeout: default bound for :meth:`start` and :meth:`restart_member`.
        bound_to_parent: kill the members when this process dies, however it
            dies (default: ``not detached``; True with ``detached`` is an error).

    Dying with the parent: ``atexit`` covers a normal exit and exceptions, not
    SIGKILL or the OOM killer. With ``bound_to_parent`` the first member start
    also starts a watchdog, ``python -I zk_registry/_watchdog.py``, which blocks
    reading a pipe whose write end only this process holds (the pipe is
    close-on-exec, every child is started with ``close_fds``, and children
    forked without exec close it through ``os.register_at_fork``). When this
    process dies the kernel closes the write end, the read returns EOF, and
    the watchdog SIGTERMs every process whose argv carries this ensemble's
    ``-Dzk_registry.owner=<token>`` (SIGKILL after :data:`WATCHDOG_GRACE_S`),
    i.e. within about a second. The JVMs themselves stay direct children of
    this process, so :attr:`pids`, :meth:`kill_member` (a real SIGKILL of the
    JVM), :meth:`stop_member` and :meth:`restart_member` are unchanged, and a
    killed member needs nothing from the watchdog. ``prctl(PR_SET_PDEATHSIG)``
    is deliberately not used: it fires when the *thread* that forked the JVM
    exits (restarts run on executor threads), only reaches the process that
    was exec'd (not a JVM behind a forking wrapper), and needs a
    ``preexec_fn``, which is unsafe with threads. :meth:`stop` tells the
    watchdog to exit and reaps it.
    """

    def __init__(
        self,
        size: int,
        base_dir: str | os.PathLike[str],
        tick_time_ms: int = DEFAULT_TICK_TIME_MS,
        *,
        ports: Sequence[MemberPorts] | None = None,
        heap: str = DEFAULT_HEAP,
        jvm_args: Sequence[str] = (),
        extra_config: Mapping[str, str | int] | None = None,
        classpath: str | None = None,
        java: str | None = None,
        fsync: bool = False,
        detached: bool = False,
        clean: bool = True,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT_S,
        bound_to_parent: bool | None = None,
    ) -> None:
        if bound_to_parent is None:
            bound_to_parent = not detached
        if detached and bound_to_parent:
            raise ValueError("a detached ensemble cannot be bound_to_parent")
        if size < 1:
            raise ValueError(f"ensemble size must be >= 1, got {size}")
        if tick_time_ms < 1:
            raise ValueError(f"tick_time_ms must be >= 1, got {tick_time_ms}")
        if ports is not None and len(ports) != size:
            raise ValueError(f"{len(ports)} port sets given for {size} members")
        self._size = size
        self._base_dir = Path(base_dir).resolve()
        self._tick_time_ms = tick_time_ms
        self._fixed_ports = ports is not None
        self._heap = heap
        self._jvm_args = tuple(jvm_args)
        self._extra_config = dict(extra_config or {})
        self._classpath = classpath
        self._java = java
        self._fsync = fsync
        self._detached = detached
        self._clean = clean
        self._startup_timeout = startup_timeout
        self._bound_to_parent = bound_to_parent
        self._token = f"{os.getpid()}.{secrets.token_hex(8)}"
        self._watchdog: _Watchdog | None = None
        self._lock = threading.RLock()
        self._members = [
            _Member(i, p, self._base_dir / f"member-{i + 1}")
            for i, p in enumerate(ports if ports is not None else self._pick_ports())
        ]

    # ------------------------------------------------------------------ properties

    @property
    def size(self) -> int:
        return self._size

    @property
    def standalone(self) -> bool:
        return self._size == 1

    @property
    def base_dir(self) -> Path:
        return self._base_dir

    @property
    def tick_time_ms(self) -> int:
        return self._tick_time_ms

    @property
    def min_session_timeout_ms(self) -> int:
        return int(self._config_defaults()["minSessionTimeout"])

    @property
    def max_session_timeout_ms(self) -> int:
        return int(self._config_defaults()["maxSessionTimeout"])

    @property
    def hosts(self) -> list[str]:
        """``["127.0.0.1:p1", ...]`` in member order."""
        return [f"{HOST}:{m.ports.client}" for m in self._members]

    @property
    def connect_string(self) -> str:
        """``"127.0.0.1:p1,127.0.0.1:p2,..."`` (append ``/chroot`` yourself)."""
        return ",".join(self.hosts)

    @property
    def client_ports(self) -> list[int]:
        return [m.ports.client for m in self._members]

    @property
    def member_ports(self) -> list[MemberPorts]:
        return [m.ports for m in self._members]

    @property
    def pids(self) -> list[int | None]:
        """Pid per member, None for a member that is not running."""
        with self._lock:
            return [m.proc.pid if m.proc is not None and m.alive() else None for m in self._members]

    @property
    def bound_to_parent(self) -> bool:
        """Whether a watchdog kills the members when this process dies."""
        return self._bound_to_parent

    @property
    def watchdog_pid(self) -> int | None:
        """Pid of the watchdog while it runs (None if not bound or nothing started)."""
        with self._lock:
            w = self._watchdog
            return w.proc.pid if w is not None and w.proc is not None and w.alive() else None

    @property
    def running(self) -> bool:
        """Whether any member process is alive."""
        with self._lock:
            return any(m.alive() for m in self._members)

    def member_alive(self, index: int) -> bool:
        with self._lock:
            return self._member(index).alive()

    def log_path(self, index: int) -> Path:
        return self._member(index).log_path

    def config_path(self, index: int) -> Path:
        return self._member(index).config_path

    def log_tail(self, index: int, lines: int = 40) -> str:
        """The last lines of a member's log and of its JVM stdout/stderr."""
        m = self._member(index)
        parts = []
        for path in (m.log_path, m.out_path):
            text = _tail(path, lines)
            if text.strip():
                parts.append(f"--- {path} ---\n{text}")
        return "\n".join(parts) or f"(no log output in {m.dir})"

    def describe(self) -> dict[str, Any]:
        """A JSON-able record of the ensemble, for a run manifest or a state file."""
        return {
            "size": self._size,
            "mode": "standalone" if self.standalone else "ensemble",
            "connect_string": self.connect_string,
            "tick_time_ms": self._tick_time_ms,
            "min_session_timeout_ms": self.min_session_timeout_ms,
            "max_session_timeout_ms": self.max_session_timeout_ms,
            "fsync": self._fsync,
            "bound_to_parent": self._bound_to_parent,
            "base_dir": str(self._base_dir),
            "members": [
                {
                    "index": m.index,
                    "myid": m.myid,
                    "client_port": m.ports.client,
                    "peer_port": m.ports.peer,
                    "election_port": m.ports.election,
                    "pid": pid,
                    "dir": str(m.dir),
                    "config": str(m.config_path),
                    "log": str(m.log_path),
                }
                for m, pid in zip(self._members, self.pids, strict=True)
            ],
        }

    # ------------------------------------------------------------------ lifecycle

    def start(self, timeout: float | None = None) -> Self:
        """Start every member and wait until all serve (bounded).

        Raises:
            ZooKeeperNotFoundError: if java or the jars are missing.
            ZooKeeperStartError: if a member exits or does not serve within ``timeout``.
        """
        bound = self._startup_timeout if timeout is None else timeout
        deadline = time.monotonic() + bound
        with self._lock:
            if self.running:
                raise ZooKeeperError("ensemble already running; stop() it first")
            classpath = self._classpath or zookeeper_classpath()
            java = self._java or java_executable()
            attempt = 0
            while True:
                attempt += 1
                self._prepare_dirs(clean=self._clean)
                _register(self)
                try:
                    for m in self._members:
                        self._spawn(m, java, classpath)
                    self._wait_serving(list(range(self._size)), deadline)
                    return self
                except ZooKeeperStartError:
                    bind_error = any(
                        "Address already in use" in self.log_tail(m.index, 200)
                        for m in self._members
                    )
                    self._kill_all()
                    if (
                        bind_error
                        and not self._fixed_ports
                        and attempt < _PORT_RETRIES
                        and time.monotonic() < deadline
                    ):
                        self._repick_ports()
                        continue
                    raise
                except BaseException:
                    self._kill_all()
                    raise

    def stop(self, timeout: float = DEFAULT_STOP_TIMEOUT_S) -> None:
        """SIGTERM every member, SIGKILL those still alive after ``timeout``; reap all."""
        with self._lock:
            live = [m for m in self._members if m.alive()]
            for m in live:
                assert m.proc is not None
                with contextlib.suppress(ProcessLookupError):
                    m.proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + timeout
            try:
                for m in live:
                    self._reap(m, max(0.0, deadline - time.monotonic()))
            finally:
                for m in self._members:
                    self._close_out(m)
                self._close_watchdog()
                _unregister(self)

    def kill_member(self, index: int) -> None:
        """SIGKILL one member (a crash) and reap it."""
        with self._lock:
            m = self._member(index)
            if m.alive():
                assert m.proc is not None
                with contextlib.suppress(ProcessLookupError):
                    m.proc.kill()
                self._reap(m, 0.0)
            self._close_out(m)

    def stop_member(self, index: int, timeout: float = DEFAULT_STOP_TIMEOUT_S) -> None:
        """Stop one member gracefully (SIGTERM, SIGKILL after ``timeout``)."""
        with self._lock:
            m = self._member(index)
            if m.alive():
                assert m.proc is not None
                with contextlib.suppress(ProcessLookupError):
                    m.proc.send_signal(signal.SIGTERM)
                self._reap(m, timeout)
            self._close_out(m)

    def restart_member(self, index: int, timeout: float | None = None, wait: bool = True) -> None:
        """(Re)start one member on its old ports and data; stop it first if running.

        With ``wait`` (the default) returns once it serves again (follower or
        leader; standalone for size 1).

        Raises:
            ZooKeeperStartError: if it does not serve within ``timeout``.
        """
        bound = self._startup_timeout if timeout is None else timeout
        with self._lock:
            m = self._member(index)
            self.stop_member(index)
            _register(self)
            self._spawn(
                m, self._java or java_executable(), self._classpath or zookeeper_classpath()
            )
        if wait:  # outside the lock: member_status() from other threads stays responsive
            self._wait_serving([index], time.monotonic() + bound)

    def wait_ready(
        self, timeout: float | None = None, members: Sequence[int] | None = None
    ) -> None:
        """Wait until the given (default: all) members serve.

        Raises:
            ZooKeeperStartError: on timeout or if a member process exits.
        """
        bound = self._startup_timeout if timeout is None else timeout
        indices = (
            list(range(self._size)) if members is None else [self._member(i).index for i in members]
        )
        self._wait_serving(indices, time.monotonic() + bound)

    def member_status(self, timeout: float = 2.0) -> list[MemberStatus]:
        """``srvr`` of every member: mode, zxid, connections (mode None if not serving)."""
        out = []
        for m in self._members:
            with self._lock:
                alive = m.alive()
                pid = m.proc.pid if alive and m.proc is not None else None
            if not alive:
                out.append(
                    MemberStatus(
                        m.index,
                        m.myid,
                        m.ports.client,
                        None,
                        False,
                        None,
                        None,
                        None,
                        error="not running",
                    )
                )
                continue
            out.append(member_status_from_srvr(m.index, m.ports.client, pid, True, timeout=timeout))
        return out

    def leader_index(self, timeout: float = 2.0) -> int | None:
        """Index of the member in Mode leader (or standalone), None if there is none."""
        for status in self.member_status(timeout=timeout):
            if status.mode in ("leader", "standalone"):
                return status.index
        return None

    def session_timeouts(self, timeout: float = 2.0) -> dict[int, int]:
        """Negotiated timeout (ms) of every session connected to any member, from ``cons``.

        This is the server's record of what it granted, for the run manifest.
        """
        out: dict[int, int] = {}
        for m in self._members:
            if not self.member_alive(m.index):
                continue
            with contextlib.suppress(OSError):
                out.update(
                    parse_cons_timeouts(four_letter_word(HOST, m.ports.client, "cons", timeout))
                )
        return out

    def four_letter_word(self, index: int, word: str, timeout: float = 2.0) -> str:
        """Send a four-letter word to one member."""
        return four_letter_word(HOST, self._member(index).ports.client, word, timeout)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(size={self._size}, connect_string={self.connect_string!r}, "
            f"tick_time_ms={self._tick_time_ms}, running={self.running})"
        )

    # ------------------------------------------------------------------ internals

    def _member(self, index: int) -> _Member:
        if not 0 <= index < self._size:
            raise IndexError(f"member index {index} out of range for an ensemble of {self._size}")
        return self._members[index]

    def _pick_ports(self) -> list[MemberPorts]:
        flat = find_free_ports(3 * self._size)
        return [MemberPorts(*flat[3 * i : 3 * i + 3]) for i in range(self._size)]

    def _repick_ports(self) -> None:
        for m, p in zip(self._members, self._pick_ports(), strict=True):
            m.ports = p

    def _config_defaults(self) -> dict[str, str]:
        tick = self._tick_time_ms
        cfg = {
            "tickTime": str(tick),
            # Enough ticks for ~20 s / ~10 s whatever the tick, as ZooKeeper's sample config.
            "initLimit": str(max(10, math.ceil(20_000 / tick))),
            "syncLimit": str(max(5, math.ceil(10_000 / tick))),
            "minSessionTimeout": str(2 * tick),
            "maxSessionTimeout": str(20 * tick),
            "maxClientCnxns": "0",
            "4lw.commands.whitelist": ",".join(FOUR_LETTER_WORDS),
            "admin.enableServer": "false",
            "serverCnxnFactory": "org.apache.zookeeper.server.NIOServerCnxnFactory",
            "standaloneEnabled": "true",
            "reconfigEnabled": "false",
            "autopurge.snapRetainCount": "3",
            "autopurge.purgeInterval": "1",
        }
        cfg.update({k: str(v) for k, v in self._extra_config.items()})
        return cfg

    def _config_text(self, m: _Member) -> str:
        cfg = self._config_defaults()
        cfg["dataDir"] = str(m.dir / "data")
        cfg["clientPort"] = str(m.ports.client)
        cfg["clientPortAddress"] = HOST
        lines = [f"{k}={v}" for k, v in cfg.items()]
        if not self.standalone:
            lines += [
                f"server.{o.myid}={HOST}:{o.ports.peer}:{o.ports.election}" for o in self._members
            ]
        return "\n".join(lines) + "\n"

    def _prepare_dirs(self, clean: bool) -> None:
        self._base_dir.mkdir(parents=True, exist_ok=True)
        for m in self._members:
            if clean and m.dir.exists():
                shutil.rmtree(m.dir)
            (m.dir / "data").mkdir(parents=True, exist_ok=True)
            self._write_member_files(m)

    def _write_member_files(self, m: _Member) -> None:
        m.config_path.write_text(self._config_text(m))
        if not self.standalone:
            (m.dir / "data" / "myid").write_text(f"{m.myid}\n")
        (m.dir / "log4j.properties").write_text(
            _LOG4J_TEMPLATE.format(log=m.log_path, pattern=_LOG_PATTERN)
        )
        (m.dir / "logback.xml").write_text(
            _LOGBACK_TEMPLATE.format(log=m.log_path, pattern=_LOG_PATTERN)
        )

    def _spawn(self, m: _Member, java: str, classpath: str) -> None:
        (m.dir / "data").mkdir(parents=True, exist_ok=True)
        self._write_member_files(m)  # ports may have been re-picked
        cmd = [
            java,
            f"-Xmx{self._heap}",
            "-Djava.net.preferIPv4Stack=true",
            "-Djava.awt.headless=true",
            f"-Dlog4j.configuration=file:{m.dir / 'log4j.properties'}",
            f"-Dlogback.configurationFile={m.dir / 'logback.xml'}",
            f"-Dzookeeper.log.dir={m.dir}",
            "-Dzookeeper.jmx.log4j.disable=true",
            f"-Dzookeeper.forceSync={'yes' if self._fsync else 'no'}",
            f"{MEMBER_MARKER}{m.dir}",
            *self._jvm_args,
            "-cp",
            classpath,
            MAIN_CLASS,
            str(m.config_path),
        ]
        if self._bound_to_parent:
            self._ensure_watchdog()
            cmd.insert(1, f"{OWNER_ARG}{self._token}")
        self._close_out(m)
        m.out = m.out_path.open("ab")
        m.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=m.out,
            stderr=subprocess.STDOUT,
            cwd=m.dir,
            close_fds=True,
            start_new_session=self._detached,
        )

    def _wait_serving(self, indices: list[int], deadline: float) -> None:
        wanted = {"standalone"} if self.standalone else {"leader", "follower"}
        pending = set(indices)
        last: dict[int, str] = {}
        while pending:
            for i in sorted(pending):
                m = self._members[i]
                if m.proc is None or m.proc.poll() is not None:
                    code = None if m.proc is None else m.proc.returncode
                    raise ZooKeeperStartError(
                        f"ZooKeeper member {m.myid} ({HOST}:{m.ports.client}) exited "
                        f"with code {code} while starting\n{self.log_tail(i)}"
                    )
                probe_timeout = min(1.0, max(0.1, deadline - time.monotonic()))
                mode = self._probe_mode(m, probe_timeout, last)
                if mode in wanted:
                    pending.discard(i)
            if not pending:
                return
            if time.monotonic() >= deadline:
                i = min(pending)
                port = self._members[i].ports.client
                raise ZooKeeperStartError(
                    f"ZooKeeper member(s) {sorted(j + 1 for j in pending)} not serving in time "
                    f"(member {i + 1} on {HOST}:{port}: {last.get(i, '?')})\n{self.log_tail(i)}"
                )
            time.sleep(_POLL_S)

    @staticmethod
    def _probe_mode(m: _Member, timeout: float, last: dict[int, str]) -> str | None:
        """``ruok`` then ``srvr``'s Mode; records why not in ``last``."""
        try:
            if four_letter_word(HOST, m.ports.client, "ruok", timeout).strip() != "imok":
                last[m.index] = "ruok: no imok"
                return None
            srvr = four_letter_word(HOST, m.ports.client, "srvr", timeout)
        except OSError as exc:
            last[m.index] = f"{type(exc).__name__}: {exc}"
            return None
        mode = parse_srvr(srvr).get("Mode")
        last[m.index] = f"mode {mode}" if mode else (srvr.strip() or "empty srvr answer")
        return mode

    def _reap(self, m: _Member, timeout: float) -> None:
        if m.proc is None:
            return
        try:
            m.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                m.proc.kill()
            try:
                m.proc.wait(timeout=_KILL_WAIT_S)
            except subprocess.TimeoutExpired as exc:
                raise ZooKeeperError(
                    f"member {m.myid} (pid {m.proc.pid}) survived SIGKILL"
                ) from exc

    def _close_out(self, m: _Member) -> None:
        if m.out is not None:
            m.out.close()
            m.out = None

    def _ensure_watchdog(self) -> None:
        if self._watchdog is not None and self._watchdog.alive():
            return
        if self._watchdog is not None:  # it died (killed by someone): reap it, replace it
            self._watchdog.close(orderly=False)
        self._base_dir.mkdir(parents=True, exist_ok=True)
        watchdog = _Watchdog(self._token, self._base_dir / "watchdog.log", WATCHDOG_GRACE_S)
        watchdog.start()
        self._watchdog = watchdog

    def _close_watchdog(self) -> None:
        """Stop the watchdog; it also stops any member that survived (none normally)."""
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is not None:
            watchdog.close(orderly=True, timeout=WATCHDOG_GRACE_S + 2 * _KILL_WAIT_S)

    def _kill_all(self) -> None:
        for m in self._members:
            if m.alive():
                assert m.proc is not None
                with contextlib.suppress(ProcessLookupError):
                    m.proc.kill()
            with contextlib.suppress(ZooKeeperError):
                self._reap(m, _KILL_WAIT_S)
            self._close_out(m)
        self._close_watchdog()
        _unregister(self)

    def _atexit_kill(self) -> None:
        for m in self._members:
            if m.alive():
                assert m.proc is not None
                with contextlib.suppress(ProcessLookupError):
                    m.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 2.0
        for m in self._members:
            with contextlib.suppress(Exception):
                self._reap(m, max(0.0, deadline - time.monotonic()))
            self._close_out(m)
        # The watchdog is left alone: when this process exits it reads EOF and
        # stops any member that survived the SIGTERM above.


class ZooKeeperServer(ZooKeeperEnsemble):
    """A standalone server: ``ZooKeeperEnsemble`` of size 1 with a ``port``.

    For options not offered here use ``ZooKeeperEnsemble(1, ...)``.
    """

    def __init__(
        self,
        base_dir: str | os.PathLike[str],
        tick_time_ms: int = DEFAULT_TICK_TIME_MS,
        *,
        port: int | None = None,
        fsync: bool = False,
        detached: bool = False,
        clean: bool = True,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT_S,
        bound_to_parent: bool | None = None,
    ) -> None:
        ports = None if port is None else [MemberPorts(port, 0, 0)]
        super().__init__(
            1,
            base_dir,
            tick_time_ms,
            ports=ports,
            fsync=fsync,
            detached=detached,
            clean=clean,
            startup_timeout=startup_timeout,
            bound_to_parent=bound_to_parent,
        )

    @property
    def port(self) -> int:
        return self.client_ports[0]

    def ruok(self, timeout: float = 2.0) -> bool:
        """Whether the server answers ``imok``."""
        try:
            return self.four_letter_word(0, "ruok", timeout).strip() == "imok"
        except OSError:
            return False


# --------------------------------------------------------------------------- atexit net

_LIVE: set[ZooKeeperEnsemble] = set()
_LIVE_LOCK = threading.Lock()


def _register(ensemble: ZooKeeperEnsemble) -> None:
    if ensemble._detached:
        return
    with _LIVE_LOCK:
        _LIVE.add(ensemble)


def _unregister(ensemble: ZooKeeperEnsemble) -> None:
    with _LIVE_LOCK:
        _LIVE.discard(ensemble)


@atexit.register
def _kill_leftovers() -> None:
    with _LIVE_LOCK:
        leftovers = list(_LIVE)
        _LIVE.clear()
    for ensemble in leftovers:
        with contextlib.suppress(Exception):
            ensemble._atexit_kill()


_LOG_PATTERN = "%d{ISO8601} [myid:%X{myid}] - %-5p [%t:%C{1}@%L] - %m%n"

_LOG4J_TEMPLATE = """\
log4j.rootLogger=INFO, FILE
log4j.appender.FILE=org.apache.log4j.RollingFileAppender
log4j.appender.FILE.File={log}
log4j.appender.FILE.MaxFileSize=20MB
log4j.appender.FILE.MaxBackupIndex=2
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern={pattern}
"""

_LOGBACK_TEMPLATE = """\
<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>{log}</file>
    <encoder><pattern>{pattern}</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
"""
