"""ZkClient over a raw client that is not kazoo's (``raw_factory``, design R4).

The stub below implements exactly the kazoo subset ``ZkClient`` uses (design
§3.1): the constructor's keyword arguments, ``add_listener``, coroutine
``start_async``/``stop_async``, ``close``, ``client_id``, ``connected``,
``_session_id``, ``negotiated_timeout_ms``, and the six ``*_async`` operations
returning results with ``rawlink``/``exception``/``value``. Operations apply at
once and answer on the next turn of the loop, as a reply from a server would.
The loops these tests run on refuse their executor, so a thread is never used.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import EventType, KazooState, KeeperState, WatchedEvent
from kazoo.retry import KazooRetry

from tests.unit.loop_time import ManualTimeLoop, run_on
from zk_registry.client import WatchEvent, ZkAuth, ZkClient

T = TypeVar("T")


class NoExecutor(ThreadPoolExecutor):
    """A default executor that refuses work: a test fails if anything runs in a thread."""

    def submit(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        raise AssertionError("an executor was used")


def run(coro: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop | None = None) -> T:
    """Run ``coro`` on a fresh loop (or ``loop``) whose default executor refuses work."""
    loop = loop or asyncio.new_event_loop()
    loop.set_default_executor(NoExecutor())
    return run_on(loop, coro)


def inline(fn: Callable[[], None]) -> None:
    """A dispatch that runs callbacks at once (the stub calls listeners on the loop)."""
    fn()


@dataclass(frozen=True)
class Stat:
    """The ``ZnodeStat`` fields ZkClient reads."""

    czxid: int
    mzxid: int
    pzxid: int
    version: int
    ephemeralOwner: int  # ZooKeeper's name


class Result:
    """kazoo's ``IAsyncResult`` subset: ``rawlink``, ``exception``, ``value``."""

    def __init__(self) -> None:
        self.value: Any = None
        self.exception: BaseException | None = None
        self._done = False
        self._callbacks: list[Callable[[Result], None]] = []

    def finish(self, value: Any, exception: BaseException | None) -> None:
        self.value, self.exception, self._done = value, exception, True
        for cb in self._callbacks:
            cb(self)

    def rawlink(self, callback: Callable[[Result], None]) -> None:
        if self._done:
            callback(self)
        else:
            self._callbacks.append(callback)


class StubRaw:
    """An in-memory raw client with the kazoo subset ZkClient uses."""

    def __init__(
        self,
        *,
        hosts: str,
        timeout: float,
        client_id: tuple[int, bytes] | None,
        connection_retry: KazooRetry,
        auth_data: list[tuple[str, str]] | None,
        default_acl: list[Any] | None,
    ) -> None:
        self.kwargs: dict[str, Any] = {
            "hosts": hosts,
            "timeout": timeout,
            "client_id": client_id,
            "connection_retry": connection_retry,
            "auth_data": auth_data,
            "default_acl": default_acl,
        }
        self.listeners: list[Callable[[Any], None]] = []
        self.connected = False
        self._session_id: int | None = None
        self.negotiated_timeout_ms: int | None = None
        self.calls: list[tuple[Any, ...]] = []
        self.closed = False
        self.fail_start: BaseException | None = None
        self._next_session = 0x100
        self._zxid = 0
        self.nodes: dict[str, tuple[bytes | None, Stat]] = {"/": (b"", Stat(0, 0, 0, 0, 0))}
        self.watchers: dict[tuple[str, str], list[Callable[[WatchedEvent], None]]] = {}

    # -- session --------------------------------------------------------------

    def add_listener(self, fn: Callable[[Any], None]) -> None:
        self.listeners.append(fn)

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        return None if self._session_id is None else (self._session_id, b"secret")

    def _state(self, state: str) -> None:
        for fn in list(self.listeners):
            fn(state)

    def _new_session(self) -> None:
        self._session_id = self._next_session
        self._next_session += 1
        self.connected = True
        self.negotiated_timeout_ms = 4_000
        self._state(KazooState.CONNECTED)

    async def start_async(self, timeout: float) -> None:
        self.calls.append(("start_async", timeout))
        await asyncio.sleep(0)  # the connect takes a turn of the loop
        if self.fail_start is not None:
            raise self.fail_start
        self._new_session()

    async def stop_async(self) -> None:
        self.calls.append(("stop_async",))
        await asyncio.sleep(0)
        self.connected = False
        self._state(KazooState.LOST)

    def close(self) -> None:
        self.calls.append(("close",))
        self.closed = True

    def drop(self) -> None:
        """The connection drops; the session lives on."""
        self.connected = False
        self._state(KazooState.SUSPENDED)

    def reconnect(self) -> None:
        """The connection is back, in the same session."""
        self.connected = True
        self._state(KazooState.CONNECTED)

    def expire(self) -> None:
        """The session expired; the client connects again in a new one."""
        self._state(KazooState.LOST)
        self._new_session()

    def trigger(self, kind: EventType, path: str) -> None:
        """A server notification: pops the watchers as kazoo does and calls them."""
        keys = {
            EventType.CHILD: ["child"],
            EventType.DELETED: ["data", "child"],
        }.get(kind, ["data"])
        event = WatchedEvent(kind, KeeperState.CONNECTED, path)
        loop = asyncio.get_running_loop()
        for key in keys:
            for fn in self.watchers.pop((key, path), []):
                loop.call_soon(fn, event)

    # -- operations -----------------------------------------------------------

    def _reply(self, op: tuple[Any, ...], fn: Callable[[], Any]) -> Result:
        self.calls.append(op)
        result = Result()
        value: Any = None
        exc: BaseException | None = None
        try:
            value = fn()
        except KazooException as e:
            exc = e
        asyncio.get_running_loop().call_soon(result.finish, value, exc)
        return result

    def _watch(self, key: str, path: str, watch: Callable[[WatchedEvent], None] | None) -> None:
        if watch is not None:
            fns = self.watchers.setdefault((key, path), [])
            if watch not in fns:
                fns.append(watch)

    def _children(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        names = (p[len(prefix) :] for p in self.nodes if p.startswith(prefix))
        return sorted(n for n in names if "/" not in n)

    def _parent(self, path: str) -> str:
        return path.rsplit("/", 1)[0] or "/"

    def _bump_parent(self, path: str, zxid: int) -> None:
        parent = self._parent(path)
        data, st = self.nodes[parent]
        self.nodes[parent] = (data, Stat(st.czxid, st.mzxid, zxid, st.version, st.ephemeralOwner))

    def get_async(self, path: str, watch: Callable[[WatchedEvent], None] | None = None) -> Result:
        def op() -> tuple[bytes | None, Stat]:
            self._watch("data", path, watch)
            if path not in self.nodes:
                raise NoNodeError()
            return self.nodes[path]

        return self._reply(("get", path, watch is not None), op)

    def get_children_async(
        self,
        path: str,
        watch: Callable[[WatchedEvent], None] | None = None,
        include_data: bool = False,
    ) -> Result:
        def op() -> list[str] | tuple[list[str], Stat]:
            self._watch("child", path, watch)
            if path not in self.nodes:
                raise NoNodeError()
            names = self._children(path)
            return (names, self.nodes[path][1]) if include_data else names

        return self._reply(("children", path, watch is not None, include_data), op)

    def exists_async(
        self, path: str, watch: Callable[[WatchedEvent], None] | None = None
    ) -> Result:
        def op() -> Stat | None:
            self._watch("data", path, watch)
            node = self.nodes.get(path)
            return None if node is None else node[1]

        return self._reply(("exists", path, watch is not None), op)

    def create_async(
        self,
        path: str,
        value: bytes | None = b"",
        ephemeral: bool = False,
        sequence: bool = False,
        include_data: bool = False,
    ) -> Result:
        def op() -> str | tuple[str, Stat]:
            if path in self.nodes:
                raise NodeExistsError()
            if self._parent(path) not in self.nodes:
                raise NoNodeError()
            self._zxid += 1
            owner = (self._session_id or 0) if ephemeral else 0
            stat = Stat(self._zxid, self._zxid, self._zxid, 0, owner)
            self.nodes[path] = (value, stat)
            self._bump_parent(path, self._zxid)
            return (path, stat) if include_data else path

        return self._reply(("create", path, value, ephemeral, sequence, include_data), op)

    def set_async(self, path: str, value: bytes, version: int = -1) -> Result:
        def op() -> Stat:
            if path not in self.nodes:
                raise NoNodeError()
            st = self.nodes[path][1]
            if version not in (-1, st.version):
                raise BadVersionError()
            self._zxid += 1
            new = Stat(st.czxid, self._zxid, st.pzxid, st.version + 1, st.ephemeralOwner)
            self.nodes[path] = (value, new)
            return new

        return self._reply(("set", path, value, version), op)

    def delete_async(self, path: str, version: int = -1) -> Result:
        def op() -> bool:
            if path not in self.nodes:
                raise NoNodeError()
            if version not in (-1, self.nodes[path][1].version):
                raise BadVersionError()
            if self._children(path):
                raise NotEmptyError()
            self._zxid += 1
            del self.nodes[path]
            self._bump_parent(path, self._zxid)
            return True

        return self._reply(("delete", path, version), op)


def _client(**kw: Any) -> ZkClient:
    kw.setdefault("raw_factory", StubRaw)
    kw.setdefault("dispatch", inline)
    return ZkClient("h1:2181", 6.0, **kw)


async def _turns(until: Callable[[], bool], limit: int = 50) -> None:
    """Let the loop run until ``until()`` holds (bounded)."""
    for _ in range(limit):
        if until():
            return
        await asyncio.sleep(0)
    raise AssertionError("the loop settled without it")


# ----------------------------------------------------------------------- tests


def test_the_factory_gets_kazoos_constructor_arguments() -> None:
    made: list[StubRaw] = []

    def factory(**kw: Any) -> StubRaw:
        made.append(StubRaw(**kw))
        return made[-1]

    auth = ZkAuth("u", "p")
    zk = ZkClient(
        "h1:2181,h2:2181",
        6.0,
        chroot="/run-1",
        client_id=(5, b"pw"),
        auth=auth,
        raw_factory=factory,
    )
    (raw,) = made
    assert zk.kazoo is raw
    kw = raw.kwargs
    assert kw["hosts"] == "h1:2181,h2:2181/run-1" and kw["timeout"] == 6.0
    assert kw["client_id"] == (5, b"pw")
    assert isinstance(kw["connection_retry"], KazooRetry)
    assert kw["auth_data"] == [("digest", "u:p")] and kw["default_acl"] == auth.acl()
    assert raw.listeners == [zk._listener]


def test_without_a_factory_the_raw_client_is_kazoos_with_the_timeout_hook() -> None:
    zk = ZkClient("127.0.0.1:1", 1.0)  # never started: no connection is attempted
    assert isinstance(zk.kazoo, KazooClient)
    hooked = zk.kazoo._connection._invoke
    assert hooked.__qualname__.startswith("ZkClient._hook_negotiated_timeout")
    assert zk.negotiated_session_timeout_ms is None


def test_start_and_stop_are_awaited_on_the_loop() -> None:
    states: list[tuple[str, str]] = []

    async def go() -> None:
        zk = _client(on_state=lambda s, sid: states.append((s, sid)))
        raw = zk.kazoo
        assert zk.negotiated_session_timeout_ms is None and zk.client_id is None
        await zk.start_async(3.0)
        assert raw.calls == [("start_async", 3.0)]
        assert zk.state == "CONNECTED" and zk.connected
        assert zk.session_id == 0x100 and zk.client_id == (0x100, b"secret")
        assert zk.negotiated_session_timeout_ms == 4_000  # read from the raw client
        raw.negotiated_timeout_ms = 6_000
        assert zk.negotiated_session_timeout_ms == 6_000
        assert states == [("CONNECTED", "0x100")]
        await zk.stop_async()
        assert raw.calls[1:] == [("stop_async",), ("close",)]
        assert zk.stopped and zk.state == "LOST" and not zk.connected
        assert states == [("CONNECTED", "0x100")]  # the LOST of stop is not reported
        assert await zk.wait_connected() is False

    run(go())


def test_a_raw_client_without_coroutines_is_started_in_the_executor() -> None:
    class BlockingRaw(StubRaw):
        """Like kazoo: a blocking start/stop, and a start_async that is no coroutine."""

        def start_async(self) -> None:  # type: ignore[override]
            raise AssertionError("ZkClient must call start(), in a thread")

        def stop_async(self) -> None:  # type: ignore[override]
            raise AssertionError("ZkClient must call stop(), in a thread")

        def start(self, timeout: float) -> None:
            self.calls.append(("start", timeout))
            self._new_session()

        def stop(self) -> None:
            self.calls.append(("stop",))
            self.connected = False

    async def go() -> ZkClient:
        zk = _client(raw_factory=BlockingRaw)
        await zk.start_async(2.0)
        await zk.stop_async()
        return zk

    # The executor path is the one taken: the refusing executor makes it fail ...
    with pytest.raises(AssertionError, match="an executor was used"):
        run(go())
    # ... and on an ordinary loop it runs start and stop in a thread.
    zk = asyncio.run(go())
    assert zk.kazoo.calls == [("start", 2.0), ("stop",), ("close",)]


def test_a_failed_start_stops_and_closes_the_raw_client() -> None:
    def factory(**kw: Any) -> StubRaw:
        raw = StubRaw(**kw)
        raw.fail_start = KazooTimeoutError("Connection time-out")
        return raw

    async def go() -> StubRaw:
        zk = _client(raw_factory=factory)
        with pytest.raises(KazooTimeoutError):
            await zk.start_async()
        assert not zk.stopped  # as start(): a later start may try again
        raw: StubRaw = zk.kazoo
        return raw

    raw = run(go())
    assert raw.calls == [("start_async", 15.0), ("stop_async",), ("close",)]
    assert raw.closed


def test_operations_go_through_the_raw_client() -> None:
    async def go() -> None:
        zk = _client()
        raw: StubRaw = zk.kazoo
        await zk.start_async()
        assert await zk.create_async("/a", b"x") == "/a"
        path, stat = await zk.create_with_stat_async("/a/b", b"y", ephemeral=True)
        assert path == "/a/b" and stat.czxid == 2 and stat.ephemeralOwner == 0x100
        data, stat = await zk.get_async("/a")
        assert data == b"x" and stat.version == 0
        assert await zk.get_children_async("/a") == ["b"]
        names, parent = await zk.get_children_async("/a", include_data=True)
        assert names == ["b"] and parent.pzxid == 2
        assert await zk.exists_async("/nope") is None
        assert (await zk.set_async("/a", b"z", version=0)).version == 1
        with pytest.raises(BadVersionError):
            await zk.set_async("/a", b"w", version=0)
        with pytest.raises(NotEmptyError):
            await zk.delete_async("/a")
        await zk.delete_async("/a/b")
        await zk.delete_async("/a", version=1)
        with pytest.raises(NoNodeError):
            await zk.get_async("/a")
        await zk.create_persistent_recursive("/p/q")
        assert raw.nodes["/p"][0] is None and raw.nodes["/p/q"][0] is None  # null data
        assert raw.calls[1:] == [
            ("create", "/a", b"x", False, False, False),
            ("create", "/a/b", b"y", True, False, True),
            ("get", "/a", False),
            ("children", "/a", False, False),
            ("children", "/a", False, True),
            ("exists", "/nope", False),
            ("set", "/a", b"z", 0),
            ("set", "/a", b"w", 0),
            ("delete", "/a", -1),
            ("delete", "/a/b", -1),
            ("delete", "/a", 1),
            ("get", "/a", False),
            ("create", "/p/q", None, False, False, False),
            ("create", "/p", None, False, False, False),
            ("create", "/p/q", None, False, False, False),
        ]
        assert zk.counter.snapshot() == (5, 10, 0)

    run(go())


def test_listener_states_reach_on_state_and_on_new_session() -> None:
    states: list[tuple[str, str]] = []
    new_sessions: list[int | None] = []

    async def go() -> None:
        zk = _client(
            on_state=lambda s, sid: states.append((s, sid)),
            on_new_session=lambda: new_sessions.append(zk.session_id),
        )
        raw: StubRaw = zk.kazoo
        await zk.start_async()
        raw.drop()
        assert zk.state == "SUSPENDED" and not zk.connected
        waiter = asyncio.ensure_future(zk.wait_connected())
        await asyncio.sleep(0)
        assert not waiter.done()
        raw.reconnect()  # same session: no new-session callback
        assert await waiter is True
        assert new_sessions == [] and zk.sessions == 2 and zk.expirations == 0
        raw.drop()
        raw.expire()
        assert states == [
            ("CONNECTED", "0x100"),
            ("SUSPENDED", "0x100"),
            ("CONNECTED", "0x100"),
            ("SUSPENDED", "0x100"),
            ("LOST", "0x100"),
            ("CONNECTED", "0x101"),
        ]
        assert new_sessions == [0x101] and zk.sessions == 3 and zk.expirations == 1

    run(go())


def test_a_child_watch_re_reads_through_the_raw_client() -> None:
    async def go() -> None:
        zk = _client()
        raw: StubRaw = zk.kazoo
        await zk.start_async()
        await zk.create_async("/a")
        await zk.create_async("/a/b")
        events: list[WatchEvent] = []
        watch = await zk.watch_children("/a", events.append)
        assert raw.calls[-2:] == [("exists", "/a", True), ("children", "/a", True, True)]
        assert events == []  # subscribing delivers nothing
        await zk.create_async("/a/c")
        raw.trigger(EventType.CHILD, "/a")
        await _turns(lambda: bool(events))
        assert events == [WatchEvent("/a", "children", "changed", children=("b", "c"))]
        assert zk.counter.snapshot()[2] == 1
        watch.stop()

    run(go())


def test_retry_until_connected_has_its_deadline_on_the_loops_clock() -> None:
    # The loop's clock moves only when the operation moves it: a deadline read from
    # time.monotonic() would let this loop spin for 5 real seconds instead.
    loop = ManualTimeLoop(now=100.0)
    attempts: list[float] = []

    async def go() -> None:
        zk = _client()
        raw: StubRaw = zk.kazoo
        await zk.start_async()

        async def lost() -> None:
            attempts.append(loop.now)
            loop.now += 1.0
            raise ConnectionLoss()

        with pytest.raises(ConnectionLoss):
            await zk.retry_until_connected(lost, deadline_s=5.0)
        assert attempts == [100.0, 101.0, 102.0, 103.0, 104.0]

        async def flaky() -> str:
            if len(attempts) == 5:
                attempts.append(loop.now)
                raw.drop()
                asyncio.get_running_loop().call_soon(raw.reconnect)
                raise ConnectionLoss()
            return "ok"

        op: Callable[[], Awaitable[str]] = flaky
        assert await zk.retry_until_connected(op, deadline_s=5.0) == "ok"
        assert zk.state == "CONNECTED"

    run(go(), loop)
