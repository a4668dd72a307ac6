"""The conformance runner: parse a script, drive a :class:`Backend`, normalize, compare.

A script (``scripts/NN-name.toml``, format in ``README.md``) is a list of steps
run in order against one ZooKeeper (real or simulated), each session through
the project's own :class:`zk_registry.client.ZkClient` with
:func:`~zk_registry.client.asyncio_dispatch`, so what is recorded is what the
rest of the code sees. Raw one-shot watches go to ``ZkClient``'s ``watch=``
argument (kazoo's own watcher registration), ``multi`` to the raw client's
``transaction()``.

The raw trace holds session ids and zxids wrapped (:class:`Sid`, :class:`Zxid`);
:func:`normalize` turns them into names and ranks (issue-18 design §3.8):

* session ids -> ``S1``, ``S2`` ... in order of first appearance in the trace
  (steps first, then the per-session state channels);
* zxids (``czxid``, ``mzxid``, ``pzxid`` and zxids returned by idioms) -> dense
  ranks 1, 2, ... over every zxid in the trace (order kept, gaps and epochs gone);
* ``ctime``/``mtime`` are never recorded; ``ephemeralOwner`` is the session's name
  (``0`` for a persistent node);
* the script's chroot, where a root client sees it, -> ``{chroot}``;
* versions, ``cversion``, ``aversion``, ``dataLength``, ``numChildren``, the
  order of children and data bytes stay exact.

Timing is never part of the trace: ``within_ms``/``min_ms`` bounds on waits are
checked while running (a miss raises :class:`ConformanceError`), and the measured
values come back in :attr:`RunResult.timings` for calibration. Order *across*
channels (a watch event before an op's answer, a state before a watch) is
recorded only where a script asks for it (``check = "order"``) or at a
``barrier`` (counts of what each channel has received by then).
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import functools
import itertools
import json
import re
import tomllib
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar, cast

from kazoo.exceptions import KazooException

from zk_registry.client import (
    EphemeralConflict,
    RawClientFactory,
    WatchEvent,
    ZkClient,
    ZkOpCounter,
    ZkUtils,
    asyncio_dispatch,
)
from zk_registry.proxy import ProxyMode
from zk_registry.topics import delete_recursive

if TYPE_CHECKING:
    from actors.io import ZkLink

__all__ = [
    "CONFORMANCE_DIR",
    "EXPECTED_DIR",
    "SCRIPTS_DIR",
    "Backend",
    "ConformanceError",
    "RunResult",
    "Script",
    "ScriptError",
    "Sid",
    "Step",
    "Zxid",
    "compare",
    "expected_path",
    "load_expected",
    "normalize",
    "parse_script",
    "run_script",
    "script_paths",
    "write_expected",
]

T = TypeVar("T")

CONFORMANCE_DIR: Final = Path(__file__).resolve().parent
SCRIPTS_DIR: Final = CONFORMANCE_DIR / "scripts"
EXPECTED_DIR: Final = CONFORMANCE_DIR / "expected"

#: Parent of every script's chroot; the chroot is ``/conformance/<name>[-n]``.
CHROOT_PARENT: Final = "/conformance"
#: What a root client's view of the chroot is normalized to.
CHROOT_TOKEN: Final = "{chroot}"
#: Bound on one operation, one idiom, one open or close (backend time).
OP_TIMEOUT_S: Final = 30.0
#: Bound on a barrier's round trip per session.
BARRIER_ROUND_TRIP_S: Final = 10.0
#: Poll interval of waits (backend time).
POLL_S: Final = 0.01
#: The ZooKeeper-1740 idiom's checker and retry bound in scripts.
UTILS_RETRY_DEADLINE_S: Final = 20.0
#: Data longer than this is recorded by length only.
DATA_INLINE_MAX: Final = 256


class ScriptError(ValueError):
    """A script is malformed (one line: file, step, what)."""


class ConformanceError(AssertionError):
    """A script could not be run to its end: a bound missed, an op never answered..."""


# --------------------------------------------------------------------------- trace values


@dataclass(frozen=True, order=True)
class Sid:
    """A session id in a raw trace (normalized to ``S<n>``)."""

    value: int


@dataclass(frozen=True, order=True)
class Zxid:
    """A zxid in a raw trace (normalized to its dense rank)."""

    value: int


# --------------------------------------------------------------------------- scripts

_STEP_KEYS: Final[dict[str, frozenset[str]]] = {
    "open": frozenset({"open", "timeout_ms", "link", "chroot"}),
    "close": frozenset({"close"}),
    "op": frozenset(
        {
            "op",
            "s",
            "path",
            "data",
            "null",
            "size",
            "ephemeral",
            "sequence",
            "version",
            "watch",
            "stat",
            "id",
            "nowait",
            "ops",
        }
    ),
    "utils": frozenset(
        {
            "utils",
            "s",
            "path",
            "data",
            "null",
            "id",
            "nowait",
            "backoff_ms",
            "max_backoffs",
            "checker_prefix",
            "requests",
            "hold_at",
        }
    ),
    "release": frozenset({"release"}),
    "subscribe": frozenset({"subscribe", "s", "kind", "path"}),
    "unsubscribe": frozenset({"unsubscribe"}),
    "link_mode": frozenset({"link_mode", "s"}),
    "expire": frozenset({"expire"}),
    "kill_member": frozenset({"kill_member"}),
    "restart_member": frozenset({"restart_member"}),
    "wait": frozenset(
        {"wait", "s", "state", "name", "id", "within_ms", "min_ms", "since", "serving"}
    ),
    "sleep_ms": frozenset({"sleep_ms"}),
    "barrier": frozenset({"barrier"}),
    "mark": frozenset({"mark"}),
    "check": frozenset({"check", "seq"}),
    "zxid_gap": frozenset({"zxid_gap"}),
}
_OPS: Final = frozenset(
    {"create", "create2", "get", "children", "exists", "set", "delete", "multi"}
)
_MULTI_OPS: Final[dict[str, frozenset[str]]] = {
    "create": frozenset({"create", "data", "null", "ephemeral"}),
    "delete": frozenset({"delete", "version"}),
    "set": frozenset({"set", "data", "version"}),
    "check": frozenset({"check", "version"}),
}
_UTILS: Final = frozenset(
    {
        "create_persistent_recursive",
        "make_sure_persistent_path_exists",
        "create_persistent_path",
        "create_ephemeral_path",
        "create_ephemeral_path_expect_conflict",
        "create_ephemeral_path_expect_conflict_handle_zk_bug",
        "update_persistent_path",
        "delete_path",
        "read",
        "read_maybe",
        "children",
        "children_maybe",
        "exists",
        "delete_recursive",
    }
)
_WAITS: Final = frozenset({"state", "watch", "delivery", "new_session", "op", "roles"})
_STATES: Final = frozenset({"CONNECTED", "SUSPENDED", "LOST"})
_LINK_MODES: Final = {m.value: m for m in ProxyMode}
_REF: Final = re.compile(
    r"^(?:(?P<kind>watch|delivery|op|new_session):(?P<name>[\w.-]+)"
    r"|state:(?P<s>[\w.-]+):(?P<state>CONNECTED|SUSPENDED|LOST))(?:#(?P<n>[1-9]\d*))?$"
)


@dataclass(frozen=True)
class Step:
    """One step of a script.

    Attributes:
        index: 1-based position in ``steps``.
        kind: the step's kind (the key that names it: ``open``, ``op``, ``wait`` ...).
        args: the step's table as written.
    """

    index: int
    kind: str
    args: Mapping[str, Any]

    def get(self, key: str, default: Any = None) -> Any:
        """``args[key]`` or ``default``."""
        return self.args.get(key, default)


@dataclass(frozen=True)
class Script:
    """A parsed conformance script.

    Attributes:
        path: the file.
        name: the script's name (the file's stem without its ``NN-`` prefix).
        ensemble: ensemble size (1: standalone; 3: a loopback ensemble).
        tick_ms: ZooKeeper's tickTime for the run.
        relies_on: what in the code relies on the behaviour (a sentence).
        steps: the steps in order.
    """

    path: Path
    name: str
    ensemble: int
    tick_ms: int
    relies_on: str
    steps: tuple[Step, ...]

    @property
    def stem(self) -> str:
        """``NN-name``: the file's stem, also the expected file's."""
        return self.path.stem


def script_paths(directory: Path = SCRIPTS_DIR) -> list[Path]:
    """Every ``NN-name.toml`` in ``directory``, in name order."""
    return sorted(p for p in directory.glob("*.toml") if re.match(r"^\d\d-", p.name))


def _fail(path: Path, where: str, what: str) -> ScriptError:
    return ScriptError(f"{path.name}: {where}: {what}")


def parse_script(path: Path) -> Script:
    """Read and validate a script.

    Raises:
        ScriptError: with a one-line message naming the file and the step.
    """
    try:
        doc = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ScriptError(f"{path.name}: {exc}") from None
    unknown = set(doc) - {"name", "ensemble", "tick_ms", "relies_on", "steps"}
    if unknown:
        raise _fail(path, "top level", f"unknown key(s) {sorted(unknown)}")
    stem_name = re.sub(r"^\d\d-", "", path.stem)
    name = doc.get("name")
    if name != stem_name:
        raise _fail(path, "name", f"must be {stem_name!r} (the file name), got {name!r}")
    ensemble = doc.get("ensemble", 1)
    if ensemble not in (1, 3):
        raise _fail(path, "ensemble", f"must be 1 or 3, got {ensemble!r}")
    tick_ms = doc.get("tick_ms", 200)
    if not isinstance(tick_ms, int) or not 50 <= tick_ms <= 2000:
        raise _fail(path, "tick_ms", f"must be an integer in [50, 2000], got {tick_ms!r}")
    relies_on = doc.get("relies_on")
    if not isinstance(relies_on, str) or not relies_on.strip():
        raise _fail(path, "relies_on", "say what in the code relies on this behaviour")
    raw_steps = doc.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps:
        raise _fail(path, "steps", "a non-empty array of tables is required")
    steps = tuple(_parse_step(path, i, raw) for i, raw in enumerate(raw_steps, 1))
    _check_names(path, steps)
    return Script(path, name, ensemble, tick_ms, relies_on.strip(), steps)


def _parse_step(path: Path, index: int, raw: Any) -> Step:
    where = f"step {index}"
    if not isinstance(raw, dict):
        raise _fail(path, where, "must be a table")
    kinds = [k for k in _STEP_KEYS if k in raw]
    if len(kinds) != 1:
        raise _fail(path, where, f"must have exactly one of {sorted(_STEP_KEYS)}, got {kinds}")
    kind = kinds[0]
    unknown = set(raw) - _STEP_KEYS[kind]
    if unknown:
        raise _fail(path, where, f"unknown key(s) {sorted(unknown)} for a {kind} step")
    step = Step(index, kind, dict(raw))
    need: dict[str, tuple[str, ...]] = {
        "op": ("s",),
        "utils": ("s", "path"),
        "subscribe": ("s", "kind", "path"),
        "link_mode": ("s",),
    }
    for key in need.get(kind, ()):
        if key not in raw:
            raise _fail(path, where, f"a {kind} step needs {key!r}")
    if kind == "op":
        op = raw["op"]
        if op not in _OPS:
            raise _fail(path, where, f"unknown op {op!r} (one of {sorted(_OPS)})")
        if op == "multi":
            ops = raw.get("ops")
            if not isinstance(ops, list) or not ops:
                raise _fail(path, where, "multi needs a non-empty 'ops' array")
            for sub in ops:
                names = [k for k in _MULTI_OPS if isinstance(sub, dict) and k in sub]
                if len(names) != 1 or set(sub) - _MULTI_OPS[names[0]]:
                    raise _fail(path, where, f"bad multi op {sub!r}")
        elif "path" not in raw:
            raise _fail(path, where, f"op {op} needs 'path'")
        if "watch" in raw and op not in ("get", "children", "exists"):
            raise _fail(path, where, f"op {op} takes no watch")
        if raw.get("nowait") and "id" not in raw:
            raise _fail(path, where, "a nowait op needs an 'id' to await it by")
    elif kind == "utils":
        if raw["utils"] not in _UTILS:
            raise _fail(path, where, f"unknown idiom {raw['utils']!r} (one of {sorted(_UTILS)})")
        if raw.get("nowait") and "id" not in raw:
            raise _fail(path, where, "a nowait idiom needs an 'id' to await it by")
        if "hold_at" in raw:
            hold = raw["hold_at"]
            if not isinstance(hold, int) or isinstance(hold, bool) or hold < 1:
                raise _fail(path, where, f"hold_at must be a positive integer, got {hold!r}")
            if "id" not in raw:
                raise _fail(path, where, "an idiom with hold_at needs an 'id' to release it by")
    elif kind == "open":
        timeout = raw.get("timeout_ms", 4000)
        if not isinstance(timeout, int) or timeout <= 0:
            raise _fail(path, where, f"timeout_ms must be a positive integer, got {timeout!r}")
    elif kind == "subscribe":
        if raw["kind"] not in ("children", "data"):
            raise _fail(path, where, f"subscribe kind: children or data, not {raw['kind']!r}")
    elif kind == "link_mode":
        if raw["link_mode"] not in _LINK_MODES:
            raise _fail(path, where, f"link_mode must be one of {sorted(_LINK_MODES)}")
    elif kind == "wait":
        _parse_wait(path, where, raw)
    elif kind == "check":
        if raw["check"] != "order":
            raise _fail(path, where, "only check = 'order' exists")
        seq = raw.get("seq")
        if not isinstance(seq, list) or len(seq) < 2:
            raise _fail(path, where, "check order needs 'seq' of at least two references")
        for ref in seq:
            if not isinstance(ref, str) or not _REF.match(ref):
                raise _fail(path, where, f"bad reference {ref!r}")
    elif kind == "zxid_gap":
        ids = raw["zxid_gap"]
        if not (isinstance(ids, list) and len(ids) == 2 and all(isinstance(i, str) for i in ids)):
            raise _fail(path, where, "zxid_gap takes two op ids")
    elif kind in ("sleep_ms",):
        if not isinstance(raw["sleep_ms"], int) or raw["sleep_ms"] < 0:
            raise _fail(path, where, "sleep_ms must be a non-negative integer")
    elif kind in ("kill_member", "restart_member"):
        target = raw[kind]
        ok = (
            isinstance(target, int)
            or target in ("leader", "killed")
            or (isinstance(target, str) and target.startswith("of:"))
        )
        if not ok:
            raise _fail(path, where, f"{kind} takes an index, 'leader', 'killed' or 'of:<s>'")
    return step


def _parse_wait(path: Path, where: str, raw: Mapping[str, Any]) -> None:
    what = raw["wait"]
    if what not in _WAITS:
        raise _fail(path, where, f"unknown wait {what!r} (one of {sorted(_WAITS)})")
    if "within_ms" not in raw:
        raise _fail(path, where, "a wait needs within_ms")
    need = {
        "state": ("s", "state"),
        "watch": ("name",),
        "delivery": ("name",),
        "new_session": ("s",),
        "op": ("id",),
        "roles": ("serving",),
    }[what]
    for key in need:
        if key not in raw:
            raise _fail(path, where, f"wait {what} needs {key!r}")
    if what == "state" and raw["state"] not in _STATES:
        raise _fail(path, where, f"state must be one of {sorted(_STATES)}")


def _check_names(path: Path, steps: Sequence[Step]) -> None:
    """Sessions are opened before use; ids and marks are unique and defined before use."""
    sessions: set[str] = set()
    ids: set[str] = set()
    marks: set[str] = set()
    held: set[str] = set()
    for step in steps:
        where = f"step {step.index}"
        s = step.get("s")
        if s is not None and s not in sessions:
            raise _fail(path, where, f"session {s!r} is not open")
        if step.kind == "open":
            if step.args["open"] in sessions:
                raise _fail(path, where, f"session {step.args['open']!r} opened twice")
            sessions.add(step.args["open"])
        for key in ("close", "expire"):
            if step.kind == key and step.args[key] not in sessions:
                raise _fail(path, where, f"session {step.args[key]!r} is not open")
        op_id = step.get("id") if step.kind in ("op", "utils") else None
        if op_id is not None:
            if op_id in ids:
                raise _fail(path, where, f"id {op_id!r} used twice")
            ids.add(op_id)
        if step.kind == "utils" and "hold_at" in step.args:
            held.add(step.args["id"])
        if step.kind == "release":
            if step.args["release"] not in held:
                raise _fail(path, where, f"no held idiom with id {step.args['release']!r}")
            held.discard(step.args["release"])
        if step.kind == "wait" and step.args["wait"] == "op" and step.args["id"] not in ids:
            raise _fail(path, where, f"no op with id {step.args['id']!r} before this wait")
        if step.kind == "zxid_gap":
            for i in step.args["zxid_gap"]:
                if i not in ids:
                    raise _fail(path, where, f"no op with id {i!r} before this step")
        if step.kind == "mark":
            marks.add(step.args["mark"])
        since = step.get("since") if step.kind == "wait" else None
        if since is not None and since not in marks:
            raise _fail(path, where, f"no mark {since!r} before this wait")
    if held:
        raise _fail(path, "steps", f"held idiom(s) {sorted(held)} never released")


# --------------------------------------------------------------------------- backends


class Backend(Protocol):
    """What the runner needs of a ZooKeeper (real or simulated) and of its clock.

    Every coroutine runs inside :meth:`run`, on the backend's own loop; the
    runner reads time only as ``asyncio.get_running_loop().time()``, so a
    virtual-time loop gives virtual timings.
    """

    name: str

    def run(self, main: Callable[[], Awaitable[T]]) -> T:
        """Run ``main()`` to completion on the backend's loop and return its result."""
        ...

    async def begin(self, script: Script) -> None:
        """Make the ensemble the script asks for (size, tickTime) ready and serving."""
        ...

    async def end(self) -> None:
        """After a script: leave the ensemble reusable (restart killed members ...)."""
        ...

    def hosts(self, link: ZkLink | None) -> str:
        """The connect string (no chroot) of the ensemble, or of ``link``."""
        ...

    def raw_factory(self) -> RawClientFactory | None:
        """The raw client factory to give :class:`ZkClient` (``None``: kazoo)."""
        ...

    async def open_link(self) -> ZkLink:
        """A started fault link (``FaultProxy`` / ``SimZkLink``) to every member."""
        ...

    async def expire(self, session_id: int, password: bytes) -> None:
        """Expire the session on the server now, as an intruder client does."""
        ...

    async def kill_member(self, index: int) -> None:
        """Crash one ensemble member (SIGKILL)."""
        ...

    async def restart_member(self, index: int) -> None:
        """Start a killed member again (on its data); return once it runs (not serves)."""
        ...

    async def roles(self) -> list[str | None]:
        """Per member: ``leader``, ``follower``, ``standalone`` or ``None`` (not serving)."""
        ...

    async def member_of(self, session_id: int) -> int | None:
        """The member a session is connected to now, if any."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Let ``seconds`` of backend time pass."""
        ...

    async def drive_until(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        """Run until ``predicate()`` holds (True) or ``timeout_s`` passed (False)."""
        ...

    async def settle(self) -> None:
        """Let what is in flight arrive: the end of a barrier (replies already awaited)."""
        ...


# --------------------------------------------------------------------------- running


@dataclass
class RunResult:
    """A script's outcome.

    Attributes:
        trace: the normalized trace (what ``expected/NN-name.json`` holds).
        timings: ``(step index, what, ms)`` measured by waits, for calibration.
    """

    trace: dict[str, Any]
    timings: list[tuple[int, str, float]]


@dataclass
class _Session:
    name: str
    client: ZkClient
    link: ZkLink | None
    chroot: bool
    states: list[dict[str, Any]] = field(default_factory=list)
    closed: bool = False
    #: ``(session id, password)`` as of the last CONNECTED (kazoo hides it while down).
    client_id: tuple[int, bytes] | None = None


@dataclass
class _Channel:
    """Arrivals on one channel: the trace entries and their (seq, time) stamps."""

    entries: list[Any] = field(default_factory=list)
    stamps: list[tuple[int, float]] = field(default_factory=list)
    cursor: int = 0


class _Tap:
    """A :class:`ZkClient` as an idiom sees it, with its requests logged and one held.

    Every request method an idiom reaches (through :class:`ZkUtils` or
    :meth:`ZkClient.create_persistent_recursive`, which is re-bound to the tap
    so that its own creates pass through it) appends ``{op, path, result|error}``
    to :attr:`log` once answered. With ``hold_at = n`` the ``n``-th request is
    not sent until :attr:`release` is set; :attr:`held` is set when it waits.
    Everything else goes to the client. A script uses it to show what an idiom
    does on the wire, and to put another session's writes between two of its
    requests at a chosen point (a deterministic race).
    """

    def __init__(self, client: ZkClient, hold_at: int | None) -> None:
        self._client = client
        self._hold_at = hold_at
        self._sent = 0
        self.log: list[dict[str, Any]] = []
        self.held = asyncio.Event()
        self.release = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def _request(
        self, op: str, path: str, call: Callable[[], Awaitable[Any]], show: Callable[[Any], Any]
    ) -> Any:
        self._sent += 1
        if self._sent == self._hold_at:
            self.held.set()
            await self.release.wait()
        entry: dict[str, Any] = {"op": op, "path": path}
        self.log.append(entry)
        try:
            value = await call()
        except KazooException as exc:
            entry["error"] = type(exc).__name__
            raise
        entry["result"] = show(value)
        return value

    async def get_async(self, path: str, watch: Any = None, tally: Any = None) -> Any:
        return await self._request(
            "get",
            path,
            lambda: self._client.get_async(path, watch, tally=tally),
            lambda v: _data(v[0]),
        )

    async def get_children_async(
        self, path: str, watch: Any = None, include_data: bool = False, tally: Any = None
    ) -> Any:
        if include_data:
            return await self._request(
                "children",
                path,
                lambda: self._client.get_children_async(
                    path, watch, include_data=True, tally=tally
                ),
                lambda v: list(v[0]),
            )
        return await self._request(
            "children",
            path,
            lambda: self._client.get_children_async(path, watch, tally=tally),
            list,
        )

    async def exists_async(self, path: str, watch: Any = None, tally: Any = None) -> Any:
        return await self._request(
            "exists",
            path,
            lambda: self._client.exists_async(path, watch, tally=tally),
            lambda v: v is not None,
        )

    async def create_async(self, path: str, value: Any = b"", **kwargs: Any) -> Any:
        return await self._request(
            "create", path, lambda: self._client.create_async(path, value, **kwargs), str
        )

    async def create_with_stat_async(self, path: str, value: Any = b"", **kwargs: Any) -> Any:
        return await self._request(
            "create2",
            path,
            lambda: self._client.create_with_stat_async(path, value, **kwargs),
            lambda v: str(v[0]),
        )

    async def set_async(self, path: str, value: bytes, version: int = -1, tally: Any = None) -> Any:
        return await self._request(
            "set",
            path,
            lambda: self._client.set_async(path, value, version, tally=tally),
            lambda _: True,
        )

    async def delete_async(self, path: str, version: int = -1, tally: Any = None) -> Any:
        return await self._request(
            "delete",
            path,
            lambda: self._client.delete_async(path, version, tally=tally),
            lambda _: True,
        )

    async def create_persistent_recursive(self, path: str, tally: Any = None) -> None:
        await ZkClient.create_persistent_recursive(cast(ZkClient, self), path, tally=tally)


def run_script(script: Script, backend: Backend) -> RunResult:
    """Run ``script`` on ``backend`` and return its normalized trace and timings.

    Raises:
        ConformanceError: a bound was missed or an op never answered.
    """
    return backend.run(lambda: _Run(script, backend).execute())


class _Run:
    def __init__(self, script: Script, backend: Backend) -> None:
        self.script = script
        self.backend = backend
        self.sessions: dict[str, _Session] = {}
        self.channels: dict[str, _Channel] = {}
        self.watchers: dict[str, Callable[[Any], None]] = {}
        self.watch_owner: dict[str, str] = {}
        self.subs: dict[str, Any] = {}
        self.ops: dict[str, asyncio.Task[None]] = {}
        self.holds: dict[str, _Tap] = {}
        self.op_records: dict[str, dict[str, Any]] = {}
        self.steps: list[dict[str, Any]] = []
        self.marks: dict[str, float] = {}
        self.timings: list[tuple[int, str, float]] = []
        self.killed: list[int] = []
        self.seq = 0
        self.chroot = ""
        self.admin: ZkClient | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.frozen = False
        self.barriers = 0

    # -- helpers --------------------------------------------------------------

    def _now(self) -> float:
        assert self.loop is not None
        return self.loop.time()

    def _channel(self, key: str) -> _Channel:
        return self.channels.setdefault(key, _Channel())

    def _arrive(self, key: str, entry: Any) -> None:
        if self.frozen:
            return
        self.seq += 1
        ch = self._channel(key)
        ch.entries.append(entry)
        ch.stamps.append((self.seq, self._now()))

    def _err(self, step: Step, what: str) -> ConformanceError:
        return ConformanceError(f"{self.script.path.name}: step {step.index} ({step.kind}): {what}")

    def _session(self, name: str) -> _Session:
        return self.sessions[name]

    def _client(self, step: Step) -> ZkClient:
        s = self._session(step.args["s"])
        if s.closed:
            raise self._err(step, f"session {s.name} is closed")
        return s.client

    def _path(self, step: Step, path: str) -> str:
        """Scripts write ``{chroot}`` where a root client names the chroot."""
        return path.replace(CHROOT_TOKEN, self.chroot)

    async def _bounded(self, step: Step, aw: Awaitable[T], what: str) -> T:
        try:
            return await asyncio.wait_for(aw, OP_TIMEOUT_S)
        except TimeoutError:
            raise self._err(step, f"{what} not done within {OP_TIMEOUT_S:g} s") from None

    # -- the run ----------------------------------------------------------------

    async def execute(self) -> RunResult:
        self.loop = asyncio.get_running_loop()
        await self.backend.begin(self.script)
        try:
            await self._make_chroot()
            for step in self.script.steps:
                await self._step(step)
            await self._final()
            raw = self._raw_trace()
        finally:
            self.frozen = True
            await self._teardown()
            await self.backend.end()
        return RunResult(normalize(raw, self.chroot), self.timings)

    def _new_client(
        self, connect: str, timeout_s: float, chroot: str | None, name: str | None
    ) -> ZkClient:
        assert self.loop is not None
        on_state = None if name is None else functools.partial(self._on_state, name)
        on_new = None if name is None else functools.partial(self._on_new_session, name)
        return ZkClient(
            connect,
            timeout_s,
            chroot=chroot,
            on_state=on_state,
            on_new_session=on_new,
            dispatch=asyncio_dispatch(self.loop),
            raw_factory=self.backend.raw_factory(),
        )

    async def _make_chroot(self) -> None:
        """A fresh ``/conformance/<name>[-n]`` (persistent, data ``b""``) by an admin session."""
        admin = self._new_client(self.backend.hosts(None), 10.0, None, None)
        await asyncio.wait_for(admin.start_async(timeout_s=20.0), OP_TIMEOUT_S)
        self.admin = admin
        await admin.create_persistent_recursive(CHROOT_PARENT)
        base = f"{CHROOT_PARENT}/{self.script.name}"
        for n in range(1, 1000):
            candidate = base if n == 1 else f"{base}-{n}"
            try:
                await admin.create_async(candidate, b"")
            except KazooException as exc:
                if type(exc).__name__ == "NodeExistsError":
                    continue
                raise
            self.chroot = candidate
            return
        raise ConformanceError(f"no free chroot under {base}")

    async def _final(self) -> None:
        """Every op answered; what is in flight arrives (nothing is recorded)."""
        for op_id, task in list(self.ops.items()):
            try:
                await asyncio.wait_for(asyncio.shield(task), OP_TIMEOUT_S)
            except TimeoutError:
                raise ConformanceError(
                    f"{self.script.path.name}: op {op_id!r} never answered"
                ) from None
        await self.backend.settle()

    async def _teardown(self) -> None:
        for sub in self.subs.values():
            with contextlib.suppress(Exception):
                sub.stop()
        for s in self.sessions.values():
            if s.link is not None:
                with contextlib.suppress(Exception):
                    s.link.set_mode(ProxyMode.PASS)
        for s in self.sessions.values():
            if not s.closed:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(s.client.stop_async(), OP_TIMEOUT_S)
                s.closed = True
            if s.link is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(s.link.close(), OP_TIMEOUT_S)
        for task in self.ops.values():
            task.cancel()
        for index in self.killed:
            with contextlib.suppress(Exception):
                await self.backend.restart_member(index)
        if self.admin is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.admin.stop_async(), OP_TIMEOUT_S)

    def _raw_trace(self) -> dict[str, Any]:
        def entries(prefix: str) -> dict[str, list[Any]]:
            out = {}
            for key in sorted(self.channels):
                if key.startswith(prefix):
                    out[key[len(prefix) :]] = list(self.channels[key].entries)
            return out

        return {
            "script": self.script.stem,
            "steps": self.steps,
            "states": {name: list(s.states) for name, s in self.sessions.items()},
            "watches": entries("watch:"),
            "deliveries": entries("delivery:"),
        }

    # -- recorders (on the loop) ------------------------------------------------

    def _on_state(self, name: str, state: str, session_hex: str) -> None:
        sid = int(session_hex, 16) if session_hex else 0
        entry = {"state": state, "session": Sid(sid)}
        session = self.sessions[name]
        if state == "CONNECTED":
            session.client_id = session.client.client_id or session.client_id
        if not self.frozen:
            session.states.append(entry)
        self._arrive(f"state:{name}:{state}", entry)

    def _on_new_session(self, name: str) -> None:
        entry = {"new_session": True}
        if not self.frozen:
            self.sessions[name].states.append(entry)
        self._arrive(f"new_session:{name}", entry)

    def _watcher(self, name: str, session: str) -> Callable[[Any], None]:
        """One callable per watch name (kazoo keeps watchers in sets of callables)."""
        owner = self.watch_owner.setdefault(name, session)
        if owner != session:
            raise ConformanceError(f"watch {name!r} belongs to session {owner}, not {session}")
        if name not in self.watchers:
            loop = self.loop
            assert loop is not None

            def watcher(event: Any) -> None:  # kazoo's callback thread (real) or the loop
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(self._on_watch, name, event)

            self.watchers[name] = watcher
            self._channel(f"watch:{name}")
        return self.watchers[name]

    def _on_watch(self, name: str, event: Any) -> None:
        entry: dict[str, Any] = {"type": str(event.type), "path": event.path}
        if str(event.type) == "NONE":
            entry["state"] = str(event.state)
        self._arrive(f"watch:{name}", entry)

    def _on_delivery(self, name: str, event: WatchEvent) -> None:
        entry: dict[str, Any] = {"reason": event.reason}
        if event.kind == "children":
            entry["children"] = None if event.children is None else list(event.children)
        else:
            entry["data"] = _data(event.data)
        self._arrive(f"delivery:{name}", entry)

    # -- steps ------------------------------------------------------------------

    async def _step(self, step: Step) -> None:
        handler = getattr(self, f"_do_{step.kind}")
        await handler(step)

    async def _do_open(self, step: Step) -> None:
        name = step.args["open"]
        link = await self.backend.open_link() if step.get("link", False) else None
        use_chroot = bool(step.get("chroot", True))
        timeout_s = step.get("timeout_ms", 4000) / 1000
        client = self._new_client(
            self.backend.hosts(link), timeout_s, self.chroot if use_chroot else None, name
        )
        session = _Session(name, client, link, use_chroot)
        self.sessions[name] = session
        await self._bounded(step, client.start_async(timeout_s=OP_TIMEOUT_S), f"open {name}")
        ch = self._channel(f"state:{name}:CONNECTED")
        if not await self.backend.drive_until(lambda: len(ch.entries) >= 1, OP_TIMEOUT_S):
            raise self._err(step, f"{name}: no CONNECTED after start")
        ch.cursor = 1
        self.steps.append(
            {
                "open": name,
                "session": Sid(client.session_id or 0),
                "negotiated_ms": client.negotiated_session_timeout_ms,
            }
        )

    async def _do_close(self, step: Step) -> None:
        s = self._session(step.args["close"])
        await self._bounded(step, s.client.stop_async(), f"close {s.name}")
        s.closed = True
        self.steps.append({"close": s.name})

    def _value(self, args: Mapping[str, Any]) -> bytes | None:
        if args.get("null", False):
            return None
        if "size" in args:
            return b"x" * int(args["size"])
        return str(args.get("data", "")).encode()

    async def _do_op(self, step: Step) -> None:
        client = self._client(step)
        op: str = step.args["op"]
        record: dict[str, Any] = {"s": step.args["s"], "op": op}
        if "path" in step.args:
            record["path"] = step.args["path"]
        for key in ("watch", "version", "ephemeral", "sequence", "stat", "null", "size"):
            if key in step.args:
                record[key] = step.args[key]
        if op in ("create", "create2", "set") and "data" in step.args:
            record["data"] = step.args["data"]
        if op == "multi":
            record["ops"] = step.args["ops"]
        self.steps.append(record)
        coro = self._run_op(step, client, record)
        if step.get("nowait", False):
            self._spawn(step, coro)
        else:
            await self._bounded(step, coro, f"op {op}")
            self._stamp_op(step)

    def _spawn(self, step: Step, coro: Awaitable[None]) -> None:
        op_id: str = step.args["id"]

        async def run() -> None:
            await coro
            self._stamp_op(step)

        self.ops[op_id] = asyncio.ensure_future(run())

    def _stamp_op(self, step: Step) -> None:
        op_id = step.get("id")
        if op_id is not None:
            self._arrive(f"op:{op_id}", True)

    async def _run_op(self, step: Step, client: ZkClient, record: dict[str, Any]) -> None:
        args = step.args
        op: str = args["op"]
        path = self._path(step, args.get("path", ""))
        watch = None
        if "watch" in args:
            watch = self._watcher(args["watch"], args["s"])
        result: Any
        try:
            if op == "create":
                result = await client.create_async(
                    path,
                    self._value(args),
                    ephemeral=bool(args.get("ephemeral", False)),
                    sequence=bool(args.get("sequence", False)),
                )
            elif op == "create2":
                created, stat = await client.create_with_stat_async(
                    path,
                    self._value(args),  # type: ignore[arg-type]  # None is null data
                    ephemeral=bool(args.get("ephemeral", False)),
                    sequence=bool(args.get("sequence", False)),
                )
                result = {"path": created, "stat": _stat(stat)}
            elif op == "get":
                data, stat = await client.get_async(path, watch)
                result = {"data": _data(data), "stat": _stat(stat)}
            elif op == "children":
                if args.get("stat", False):
                    names, stat = await client.get_children_async(path, watch, include_data=True)
                    result = {"children": list(names), "stat": _stat(stat)}
                else:
                    result = {"children": list(await client.get_children_async(path, watch))}
            elif op == "exists":
                found = await client.exists_async(path, watch)
                result = None if found is None else _stat(found)
            elif op == "set":
                stat = await client.set_async(
                    path, self._value(args) or b"", int(args.get("version", -1))
                )
                result = _stat(stat)
            elif op == "delete":
                await client.delete_async(path, int(args.get("version", -1)))
                result = True
            else:
                result = await self._multi(step, client)
        except KazooException as exc:
            record["error"] = type(exc).__name__
            self._keep(step, record)
            return
        record["result"] = result
        self._keep(step, record)

    def _keep(self, step: Step, record: dict[str, Any]) -> None:
        op_id = step.get("id")
        if op_id is not None:
            self.op_records[op_id] = record

    async def _multi(self, step: Step, client: ZkClient) -> list[Any]:
        tx = client.kazoo.transaction()
        for sub in step.args["ops"]:
            if "create" in sub:
                value = self._value(sub)
                tx.create(
                    self._path(step, sub["create"]),
                    b"" if value is None else value,
                    ephemeral=bool(sub.get("ephemeral", False)),
                )
            elif "delete" in sub:
                tx.delete(self._path(step, sub["delete"]), int(sub.get("version", -1)))
            elif "set" in sub:
                tx.set_data(
                    self._path(step, sub["set"]),
                    self._value(sub) or b"",
                    int(sub.get("version", -1)),
                )
            else:
                tx.check(self._path(step, sub["check"]), int(sub["version"]))
        results = await _await_raw(tx.commit_async())
        out: list[Any] = []
        for r in results:
            if isinstance(r, BaseException):
                out.append({"error": type(r).__name__})
            elif isinstance(r, str):
                out.append({"path": r})
            elif r is True:
                out.append(True)
            else:
                out.append(_stat(r))
        return out

    async def _do_utils(self, step: Step) -> None:
        client = self._client(step)
        record: dict[str, Any] = {"s": step.args["s"], "utils": step.args["utils"]}
        record["path"] = step.args["path"]
        if "data" in step.args or "null" in step.args:
            record["data"] = None if step.get("null", False) else step.args.get("data", "")
        self.steps.append(record)
        tap: _Tap | None = None
        if step.get("requests", False) or "hold_at" in step.args:
            tap = _Tap(client, step.get("hold_at"))
            client = cast(ZkClient, tap)
        coro = self._run_utils(step, client, record, tap)
        if "hold_at" in step.args:
            assert tap is not None
            await self._run_until_held(step, coro, tap)
        elif step.get("nowait", False):
            self._spawn(step, coro)
        else:
            await self._bounded(step, coro, f"utils {step.args['utils']}")
            self._stamp_op(step)

    async def _run_until_held(self, step: Step, coro: Awaitable[None], tap: _Tap) -> None:
        """Start the idiom and return once it waits to send its ``hold_at``-th request."""
        self._spawn(step, coro)
        self.holds[step.args["id"]] = tap
        task = self.ops[step.args["id"]]
        held = asyncio.ensure_future(tap.held.wait())
        try:
            await self._bounded(
                step, asyncio.wait({task, held}, return_when=asyncio.FIRST_COMPLETED), "hold"
            )
        finally:
            held.cancel()
        if not tap.held.is_set():
            raise self._err(step, f"done after {len(tap.log)} requests, before hold_at")

    async def _do_release(self, step: Step) -> None:
        op_id: str = step.args["release"]
        self.holds.pop(op_id).release.set()
        self.steps.append({"release": op_id})

    async def _run_utils(
        self, step: Step, client: ZkClient, record: dict[str, Any], tap: _Tap | None
    ) -> None:
        try:
            await self._run_idiom(step, client, record)
        finally:
            if tap is not None and step.get("requests", False):
                record["requests"] = tap.log

    async def _run_idiom(self, step: Step, client: ZkClient, record: dict[str, Any]) -> None:
        args = step.args
        name: str = args["utils"]
        path = self._path(step, args["path"])
        value = self._value(args)
        zk = ZkUtils(client, retry_deadline_s=UTILS_RETRY_DEADLINE_S)
        tally = ZkOpCounter()
        result: Any = None
        try:
            if name == "create_persistent_recursive":
                await client.create_persistent_recursive(path, tally=tally)
            elif name == "make_sure_persistent_path_exists":
                await zk.make_sure_persistent_path_exists(path, tally)
            elif name == "create_persistent_path":
                await zk.create_persistent_path(path, value or b"", tally)
            elif name == "create_ephemeral_path":
                result = Zxid(await zk.create_ephemeral_path(path, value or b"", tally))
            elif name == "create_ephemeral_path_expect_conflict":
                czxid = await zk.create_ephemeral_path_expect_conflict(path, value or b"", tally)
                result = Zxid(czxid)
            elif name == "create_ephemeral_path_expect_conflict_handle_zk_bug":
                prefix = str(args.get("checker_prefix", "")).encode()
                backoffs = await zk.create_ephemeral_path_expect_conflict_handle_zk_bug(
                    path,
                    value or b"",
                    checker=lambda stored: stored.startswith(prefix),
                    backoff_s=int(args.get("backoff_ms", 200)) / 1000,
                    max_backoffs=args.get("max_backoffs"),
                    tally=tally,
                )
                result = {"backed_off": backoffs > 0}
            elif name == "update_persistent_path":
                await zk.update_persistent_path(path, value or b"", tally)
            elif name == "delete_path":
                result = await zk.delete_path(path, tally)
            elif name == "read":
                data, stat = await zk.read(path, tally)
                result = {"data": _data(data), "stat": _stat(stat)}
            elif name == "read_maybe":
                result = _data(await zk.read_maybe(path, tally))
            elif name == "children":
                result = await zk.children(path, tally)
            elif name == "children_maybe":
                result = await zk.children_maybe(path, tally)
            elif name == "delete_recursive":
                result = await delete_recursive(client, path, tally)
            else:
                result = await zk.exists(path, tally)
        except EphemeralConflict as exc:
            record["error"] = "EphemeralConflict"
            record["stored"] = _data(exc.stored)
        except KazooException as exc:
            record["error"] = type(exc).__name__
        else:
            record["result"] = result
        if name != "create_ephemeral_path_expect_conflict_handle_zk_bug":
            reads, writes, _ = tally.snapshot()
            record["reads"] = reads
            record["writes"] = writes
        self._keep(step, record)

    async def _do_subscribe(self, step: Step) -> None:
        client = self._client(step)
        name: str = step.args["subscribe"]
        path = self._path(step, step.args["path"])
        self._channel(f"delivery:{name}")
        callback = functools.partial(self._on_delivery, name)
        record: dict[str, Any] = {
            "s": step.args["s"],
            "subscribe": name,
            "kind": step.args["kind"],
            "path": step.args["path"],
        }
        self.steps.append(record)
        try:
            if step.args["kind"] == "children":
                w = await self._bounded(step, client.watch_children(path, callback), "subscribe")
            else:
                w = await self._bounded(step, client.watch_data(path, callback), "subscribe")
        except KazooException as exc:
            record["error"] = type(exc).__name__
            return
        self.subs[name] = w

    async def _do_unsubscribe(self, step: Step) -> None:
        name = step.args["unsubscribe"]
        self.subs.pop(name).stop()
        self.steps.append({"unsubscribe": name})

    async def _do_link_mode(self, step: Step) -> None:
        s = self._session(step.args["s"])
        if s.link is None:
            raise self._err(step, f"session {s.name} was opened without a link")
        s.link.set_mode(_LINK_MODES[step.args["link_mode"]])
        self.steps.append({"link_mode": step.args["link_mode"], "s": s.name})

    async def _do_expire(self, step: Step) -> None:
        s = self._session(step.args["expire"])
        cid = s.client.client_id or s.client_id
        if cid is None or not cid[0]:
            raise self._err(step, f"session {s.name} has no session to expire")
        await self._bounded(step, self.backend.expire(cid[0], cid[1]), f"expire {s.name}")
        self.steps.append({"expire": s.name, "session": Sid(cid[0])})

    async def _member(self, step: Step, target: Any) -> int:
        if isinstance(target, int):
            return target
        if target == "leader":
            roles = await self.backend.roles()
            leaders = [i for i, r in enumerate(roles) if r in ("leader", "standalone")]
            if len(leaders) != 1:
                raise self._err(step, f"no single leader: {roles}")
            return leaders[0]
        s = self._session(str(target)[3:])
        sid = s.client.session_id
        member = None if sid is None else await self.backend.member_of(sid)
        if member is None:
            raise self._err(step, f"session {s.name} is on no member")
        return member

    async def _do_kill_member(self, step: Step) -> None:
        index = await self._member(step, step.args["kill_member"])
        await self._bounded(step, self.backend.kill_member(index), f"kill member {index}")
        self.killed.append(index)
        self.steps.append({"kill_member": index, "target": step.args["kill_member"]})

    async def _do_restart_member(self, step: Step) -> None:
        target = step.args["restart_member"]
        indices = list(self.killed) if target == "killed" else [await self._member(step, target)]
        for index in indices:
            await self._bounded(step, self.backend.restart_member(index), f"restart {index}")
            if index in self.killed:
                self.killed.remove(index)
        self.steps.append({"restart_member": indices})

    async def _do_sleep_ms(self, step: Step) -> None:
        await self.backend.sleep(step.args["sleep_ms"] / 1000)

    async def _do_mark(self, step: Step) -> None:
        self.marks[step.args["mark"]] = self._now()

    async def _do_barrier(self, step: Step) -> None:
        for op_id, task in list(self.ops.items()):
            if not task.done():
                await self._bounded(step, asyncio.shield(task), f"op {op_id}")
        for s in self.sessions.values():
            if s.closed or not s.client.connected:
                continue
            with contextlib.suppress(KazooException, TimeoutError):
                await asyncio.wait_for(
                    _await_raw(s.client.kazoo.exists_async("/")), BARRIER_ROUND_TRIP_S
                )
        await self.backend.settle()
        self.barriers += 1
        seen = {key: len(ch.entries) for key, ch in sorted(self.channels.items()) if ch.entries}
        seen = {k: v for k, v in seen.items() if not k.startswith("op:")}
        self.steps.append({"barrier": self.barriers, "seen": seen})

    async def _do_zxid_gap(self, step: Step) -> None:
        first, second = step.args["zxid_gap"]
        a = _primary_zxid(self.op_records.get(first))
        b = _primary_zxid(self.op_records.get(second))
        if a is None or b is None:
            raise self._err(step, f"ops {first!r}/{second!r} carry no zxid")
        self.steps.append({"zxid_gap": [first, second], "raw_difference": b - a})

    async def _do_check(self, step: Step) -> None:
        seq: list[str] = step.args["seq"]
        stamps: list[int | None] = [self._stamp_of(ref) for ref in seq]
        known = [s for s in stamps if s is not None]
        ok = len(known) == len(stamps) and all(a < b for a, b in itertools.pairwise(known))
        record: dict[str, Any] = {"check": "order", "seq": seq, "ok": ok}
        missing = [ref for ref, s in zip(seq, stamps, strict=True) if s is None]
        if missing:
            record["missing"] = missing
        self.steps.append(record)

    def _stamp_of(self, ref: str) -> int | None:
        m = _REF.match(ref)
        assert m is not None
        n = int(m["n"] or 1)
        key = f"state:{m['s']}:{m['state']}" if m["state"] else f"{m['kind']}:{m['name']}"
        ch = self.channels.get(key)
        if ch is None or len(ch.stamps) < n:
            return None
        return ch.stamps[n - 1][0]

    # -- waits --------------------------------------------------------------------

    async def _do_wait(self, step: Step) -> None:
        what: str = step.args["wait"]
        start = self._now()
        ref = self.marks[step.args["since"]] if "since" in step.args else start
        within_s = step.args["within_ms"] / 1000
        if what == "roles":
            await self._wait_roles(step, start, within_s)
            return
        key, record = self._wait_key(step)
        ch = self._channel(key)
        index = ch.cursor
        deadline_s = max(0.0, ref + within_s - self._now())
        arrived = await self.backend.drive_until(lambda: len(ch.entries) > index, deadline_s)
        if not arrived:
            raise self._err(step, f"nothing on {key} within {step.args['within_ms']} ms")
        ch.cursor = index + 1
        at = ch.stamps[index][1]
        elapsed_ms = (at - ref) * 1000
        label = key + (f" since {step.args['since']}" if "since" in step.args else "")
        self.timings.append((step.index, label, round(elapsed_ms, 1)))
        if elapsed_ms > step.args["within_ms"]:
            raise self._err(step, f"{key} after {elapsed_ms:.0f} ms > {step.args['within_ms']}")
        if "min_ms" in step.args and elapsed_ms < step.args["min_ms"]:
            raise self._err(step, f"{key} after {elapsed_ms:.0f} ms < min {step.args['min_ms']}")
        record["event"] = ch.entries[index]
        self.steps.append(record)

    def _wait_key(self, step: Step) -> tuple[str, dict[str, Any]]:
        what: str = step.args["wait"]
        if what == "state":
            s, state = step.args["s"], step.args["state"]
            return f"state:{s}:{state}", {"wait": "state", "s": s, "state": state}
        if what == "new_session":
            s = step.args["s"]
            return f"new_session:{s}", {"wait": "new_session", "s": s}
        if what == "op":
            op_id = step.args["id"]
            return f"op:{op_id}", {"wait": "op", "id": op_id}
        name = step.args["name"]
        if what == "watch" and name not in self.watchers:
            raise self._err(step, f"no watch named {name!r} was set")
        if what == "delivery" and f"delivery:{name}" not in self.channels:
            raise self._err(step, f"no subscription named {name!r}")
        return f"{what}:{name}", {"wait": what, "name": name}

    async def _wait_roles(self, step: Step, start: float, within_s: float) -> None:
        serving = int(step.args["serving"])
        roles: list[str | None] = []
        deadline = start + within_s
        while True:
            roles = await self.backend.roles()
            leaders = sum(r in ("leader", "standalone") for r in roles)
            if leaders == 1 and sum(r is not None for r in roles) == serving:
                break
            if self._now() >= deadline:
                raise self._err(step, f"roles {roles} not {serving} serving with one leader")
            await self.backend.sleep(0.05)
        self.timings.append((step.index, "roles", round((self._now() - start) * 1000, 1)))
        self.steps.append({"wait": "roles", "roles": roles})


# --------------------------------------------------------------------------- values


def _data(data: bytes | None) -> Any:
    if data is None:
        return None
    if len(data) > DATA_INLINE_MAX:
        return {"length": len(data)}
    try:
        return data.decode()
    except UnicodeDecodeError:
        return {"hex": data.hex()}


def _stat(stat: Any) -> dict[str, Any]:
    owner = int(stat.ephemeralOwner)
    return {
        "czxid": Zxid(int(stat.czxid)),
        "mzxid": Zxid(int(stat.mzxid)),
        "pzxid": Zxid(int(stat.pzxid)),
        "version": int(stat.version),
        "cversion": int(stat.cversion),
        "aversion": int(stat.aversion),
        "ephemeralOwner": Sid(owner) if owner else 0,
        "dataLength": int(stat.dataLength),
        "numChildren": int(stat.numChildren),
    }


def _primary_zxid(record: Mapping[str, Any] | None) -> int | None:
    """The zxid an op wrote: a create's czxid, a set's mzxid, an idiom's returned zxid."""
    if record is None or "result" not in record:
        return None
    result = record["result"]
    if isinstance(result, Zxid):
        return result.value
    if isinstance(result, dict):
        stat = result.get("stat", result)
        if isinstance(stat, dict) and isinstance(stat.get("mzxid"), Zxid):
            z: Zxid = stat["mzxid"]
            return z.value
    return None


async def _await_raw(result: Any) -> Any:
    """Await a raw client's async result (``rawlink`` from any thread)."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[Any] = loop.create_future()

    def settle(res: Any) -> None:
        if fut.done():
            return
        exc = res.exception
        if exc is None:
            fut.set_result(res.value)
        else:
            fut.set_exception(exc)

    def on_done(res: Any) -> None:
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, res)

    result.rawlink(on_done)
    return await fut


# --------------------------------------------------------------------------- normalizing


def _walk(value: Any) -> Iterator[Any]:
    yield value
    if isinstance(value, dict):
        for v in value.values():
            yield from _walk(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _walk(v)


def normalize(raw: Mapping[str, Any], chroot: str) -> dict[str, Any]:
    """The comparable form of a raw trace (rules in the module docstring)."""
    sessions: dict[int, str] = {}
    zxids: set[int] = set()
    for v in _walk(dict(raw)):
        if isinstance(v, Sid) and v.value and v.value not in sessions:
            sessions[v.value] = f"S{len(sessions) + 1}"
        elif isinstance(v, Zxid):
            zxids.add(v.value)
    rank = {z: i for i, z in enumerate(sorted(zxids), 1)}

    def conv(v: Any) -> Any:
        if isinstance(v, Sid):
            return sessions.get(v.value, 0)
        if isinstance(v, Zxid):
            return rank[v.value]
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [conv(x) for x in v]
        if isinstance(v, str) and chroot and (v == chroot or v.startswith(chroot + "/")):
            return CHROOT_TOKEN + v[len(chroot) :]
        return v

    out: dict[str, Any] = conv(dict(raw))
    return out


# --------------------------------------------------------------------------- expected files


def expected_path(script: Script, directory: Path = EXPECTED_DIR) -> Path:
    """``expected/NN-name.json`` for ``script``."""
    return directory / f"{script.stem}.json"


def _dumps(trace: Mapping[str, Any]) -> str:
    return json.dumps(trace, indent=1, sort_keys=False) + "\n"


def write_expected(
    script: Script, trace: Mapping[str, Any], directory: Path = EXPECTED_DIR
) -> Path:
    """Write the recorded trace; return the file."""
    directory.mkdir(parents=True, exist_ok=True)
    path = expected_path(script, directory)
    path.write_text(_dumps(trace))
    return path


def load_expected(script: Script, directory: Path = EXPECTED_DIR) -> dict[str, Any] | None:
    """The recorded trace, or ``None`` when there is none yet."""
    path = expected_path(script, directory)
    if not path.exists():
        return None
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def compare(expected: Mapping[str, Any], actual: Mapping[str, Any]) -> list[str]:
    """``[]`` when equal, else a unified diff of the two traces (pretty JSON)."""
    if dict(expected) == dict(actual):
        return []
    a = _dumps(expected).splitlines()
    b = _dumps(actual).splitlines()
    return list(difflib.unified_diff(a, b, "expected", "actual", lineterm="", n=4))
