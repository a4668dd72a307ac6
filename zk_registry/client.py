"""A thin kazoo wrapper with the semantics of Kafka 0.8.2's ZooKeeper client (I0Itec ZkClient).

Kafka 0.8.2.2 talks to ZooKeeper through ``org.I0Itec.zkclient.ZkClient`` 0.3.
What the emulator needs from that client, and what this module provides on top
of a :class:`kazoo.client.KazooClient`:

* **Sessions.** One kazoo client per emulated consumer or broker, created for a
  connect string plus the run's chroot, with the scaled
  ``zookeeper.session.timeout.ms``. The timeout the server *negotiated* (it is
  clamped to [2, 20] x tickTime) is recorded in :attr:`ZkClient.negotiated_session_timeout_ms`.
* **State listeners** (``IZkStateListener``): kazoo's CONNECTED / SUSPENDED /
  LOST transitions reach ``on_state(state, session_id_hex)``, and a CONNECTED
  with a *new* session id after an expiry reaches ``on_new_session()`` (Kafka's
  ``handleNewSession``). Callbacks never run on kazoo's threads: they go through
  a ``dispatch`` function (for asyncio, :func:`asyncio_dispatch`, which hands off
  with ``loop.call_soon_threadsafe``).
* **Watches that behave like ZkClient subscriptions.** ``subscribeChildChanges``
  reads ``exists`` + ``getChildren`` with a watch and delivers nothing;
  each notification re-reads ``exists`` + ``getChildren`` with a new watch and
  then calls the listener with the children (``None`` if the node is gone);
  ``subscribeDataChanges`` reads ``exists`` with a watch, and each notification
  re-reads ``exists`` + ``getData``. kazoo itself drops every watch when the
  connection drops (it does not send ``SetWatches``) and its ``ChildrenWatch``
  recipe calls the function on registration, so :meth:`ZkClient.watch_children` and
  :meth:`ZkClient.watch_data` implement the semantics directly:

  - after a reconnect *in the same session* the watch is re-armed and fires
    only if the node changed meanwhile (``pzxid`` / ``mzxid``), which is what
    the Java client's ``SetWatches`` achieves;
  - after a *session expiry* the watch is re-armed on the new session and
    fires once, as ZkClient's ``fireAllEvents`` does on ``Expired``.

* **Counting.** Every read (get, getChildren, exists), write (create, set,
  delete) and delivered watch notification is counted in a :class:`ZkOpCounter`
  (and in an optional per-call ``tally``), for the A7 cost model.
* **ZkUtils.** :class:`ZkUtils` has the ``kafka.utils.ZkUtils`` write and read
  idioms on top (``createEphemeralPathExpectConflict[HandleZKBug]``,
  ``updatePersistentPath``, ``deletePath``, ``readDataMaybeNull`` ...), each
  operation under ``retryUntilConnected``.
* **Auth.** With a :class:`~zk_registry.auth.ZkAuth` (``--zk-auth``) a client
  authenticates as that digest identity on every connection and creates every
  znode with an ACL for that identity only; without one, znodes are
  ``world:anyone`` as before.
* **Cleanup.** :func:`delete_chroot` deletes a run's chroot and its emptied
  parents on an external ZooKeeper, bounded in time.
* **asyncio.** ``get_async``, ``get_children_async``, ``create_async``,
  ``set_async``, ``delete_async``, ``exists_async`` await kazoo's
  ``IAsyncResult`` through ``rawlink`` + ``loop.call_soon_threadsafe``: hundreds
  of consumers in one process can have requests in flight without a thread
  each. :meth:`ZkClient.retry_until_connected` gives ZkClient's
  ``retryUntilConnected`` (ConnectionLoss and SessionExpired are retried once
  the client is connected again), bounded by a deadline.

Threads: kazoo runs a connection thread, a completion worker and a callback
worker per client. State changes arrive on the connection thread, async
completions on the completion worker, watch events on the callback worker;
nothing here blocks any of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol, TypeVar, overload

from kazoo.client import KazooClient
from kazoo.exceptions import (
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.serialization import Connect
from kazoo.protocol.states import EventType, KazooState
from kazoo.retry import KazooRetry

from zk_registry.auth import ZkAuth, parse_zk_auth
from zk_registry.connection import kazoo_client
from zk_registry.server import ZooKeeperError, parse_connect_string

__all__ = [
    "RETRIABLE_ERRORS",
    "Dispatch",
    "EphemeralConflict",
    "RawClientFactory",
    "WatchEvent",
    "ZkAuth",
    "ZkCleanupError",
    "ZkClient",
    "ZkOpCounter",
    "ZkUtils",
    "ZkWatch",
    "ZnodeStat",
    "asyncio_dispatch",
    "delete_chroot",
    "parse_zk_auth",
    "session_id_hex",
]

log = logging.getLogger(__name__)

T = TypeVar("T")
Dispatch = Callable[[Callable[[], None]], None]
"""Runs a zero-argument callable somewhere other than kazoo's threads."""

#: Errors after which ZkClient's ``retryUntilConnected`` waits for the connection and retries.
RETRIABLE_ERRORS: Final[tuple[type[BaseException], ...]] = (ConnectionLoss, SessionExpiredError)


class ZnodeStat(Protocol):
    """The fields of a znode's ``Stat`` the registry reads (kazoo's ``ZnodeStat``).

    kazoo ships no type information; this names what the registry relies on.
    """

    @property
    def czxid(self) -> int:
        """The zxid of the create: the node's place in ZooKeeper's total order."""

    @property
    def mzxid(self) -> int:
        """The zxid of the last data change."""

    @property
    def pzxid(self) -> int:
        """The zxid of the last change to the children."""

    @property
    def version(self) -> int:
        """The data version (for conditional ``setData``)."""

    @property
    def ephemeralOwner(self) -> int:  # ZooKeeper's own name
        """The owning session id of an ephemeral node, else 0."""


class RawClientFactory(Protocol):
    """Builds a :class:`ZkClient`'s raw client: ``KazooClient`` or a stand-in for it.

    Called with ``KazooClient``'s own keyword arguments. The client it returns
    must offer the kazoo subset :class:`ZkClient` uses: ``add_listener``,
    ``start``/``stop``/``close`` (or coroutine ``start_async(timeout=)`` and
    ``stop_async()``), ``client_id``, ``connected``, ``_session_id``, and
    ``get_async``, ``get_children_async``, ``exists_async``, ``create_async``,
    ``set_async``, ``delete_async`` returning results with ``rawlink``,
    ``exception`` and ``value``.
    """

    def __call__(
        self,
        *,
        hosts: str,
        timeout: float,
        client_id: tuple[int, bytes] | None,
        connection_retry: KazooRetry,
        auth_data: list[tuple[str, str]] | None,
        default_acl: list[Any] | None,
    ) -> Any:
        """A new, unstarted raw client."""


STATE_CONNECTED: Final = "CONNECTED"
STATE_SUSPENDED: Final = "SUSPENDED"
STATE_LOST: Final = "LOST"


def session_id_hex(session_id: int | None) -> str:
    """A session id as ZooKeeper logs it (``0x1000a2b3c4d0000``); ``""`` for none."""
    return "" if session_id is None else f"0x{session_id:x}"


# --------------------------------------------------------------------------- counting


@dataclass
class ZkOpCounter:
    """Mutable, thread-safe counts of ZooKeeper operations.

    Attributes:
        reads: get, getChildren and exists requests issued.
        writes: create, set and delete requests issued.
        watch_notifications: watch notifications delivered (one per firing).
    """

    reads: int = 0
    writes: int = 0
    watch_notifications: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, reads: int = 0, writes: int = 0, watch_notifications: int = 0) -> None:
        """Add to the counts."""
        with self._lock:
            self.reads += reads
            self.writes += writes
            self.watch_notifications += watch_notifications

    def snapshot(self) -> tuple[int, int, int]:
        """``(reads, writes, watch_notifications)`` at this instant."""
        with self._lock:
            return self.reads, self.writes, self.watch_notifications


# --------------------------------------------------------------------------- dispatch

_default_executor: ThreadPoolExecutor | None = None
_default_executor_lock = threading.Lock()


def _default_dispatch(fn: Callable[[], None]) -> None:
    """One shared worker thread, so callbacks keep their order and leave kazoo's threads."""
    global _default_executor
    with _default_executor_lock:
        if _default_executor is None:
            _default_executor = ThreadPoolExecutor(1, thread_name_prefix="zk-callbacks")
        executor = _default_executor
    executor.submit(_run_logged, fn)


def _run_logged(fn: Callable[[], None]) -> None:
    try:
        fn()
    except Exception:
        log.exception("ZooKeeper callback failed")


def asyncio_dispatch(loop: asyncio.AbstractEventLoop) -> Dispatch:
    """A :data:`Dispatch` that runs callbacks in ``loop`` (``call_soon_threadsafe``).

    Callbacks arriving after the loop closed are dropped.
    """

    def dispatch(fn: Callable[[], None]) -> None:
        with contextlib.suppress(RuntimeError):  # loop closed
            loop.call_soon_threadsafe(_run_logged, fn)

    return dispatch


# --------------------------------------------------------------------------- watches


WatchKind = Literal["children", "data"]


@dataclass(frozen=True)
class WatchEvent:
    """One delivery of a watch.

    Attributes:
        path: the watched path (chroot-relative).
        kind: ``children`` or ``data``.
        reason: ``changed`` (a notification), ``reconnected`` (changed while the
            connection was down, seen on re-arming in the same session) or
            ``new_session`` (re-armed after a session expiry; always delivered).
        children: the children read after the event (``children`` watches);
            ``None`` when the node does not exist.
        data: the data read after the event (``data`` watches); ``None`` when
            the node does not exist.
    """

    path: str
    kind: WatchKind
    reason: str
    children: tuple[str, ...] | None = None
    data: bytes | None = None


_MISSING: Final = (-1, -1)


class ZkWatch:
    """A persistent child or data subscription on one path; see the module docstring.

    Made by :meth:`ZkClient.watch_children` / :meth:`ZkClient.watch_data`;
    :meth:`stop` ends it.
    """

    def __init__(
        self,
        client: ZkClient,
        path: str,
        kind: WatchKind,
        callback: Callable[[WatchEvent], None],
    ) -> None:
        self.client = client
        self.path = path
        self.kind = kind
        self._callback = callback
        self._lock = threading.Lock()
        self._round = 0
        self._active = True
        self._token: tuple[int, int] | None = None  # what we last saw: (czxid, pzxid|mzxid)
        self._pending: str | None = None  # an event whose re-read failed: deliver on re-arm
        self.fired = 0

    @property
    def active(self) -> bool:
        """False once :meth:`stop` was called."""
        return self._active

    def stop(self) -> None:
        """End the subscription; a notification already in flight is not delivered."""
        with self._lock:
            self._active = False
            self._round += 1
        self.client._forget_watch(self)

    # -- arming ---------------------------------------------------------------

    def _arm(
        self,
        mode: str,
        registered: asyncio.Future[None] | None = None,
        tally: ZkOpCounter | None = None,
    ) -> None:
        """(Re-)register with a fresh watcher.

        mode: ``subscribe`` (deliver nothing), ``changed`` (deliver),
        ``reconnected`` (deliver if the node changed or an event is pending),
        ``new_session`` (deliver).
        """
        with self._lock:
            if not self._active:
                return
            self._round += 1
            rnd = self._round
        watcher = functools.partial(self._on_event, rnd)
        c = self.client
        try:
            if self.kind == "children":
                c._count(reads=2, tally=tally)
                c.kazoo.exists_async(self.path, watch=watcher)
                final = c.kazoo.get_children_async(self.path, watch=watcher, include_data=True)
            elif mode == "subscribe":
                c._count(reads=1, tally=tally)
                final = c.kazoo.exists_async(self.path, watch=watcher)
            else:
                c._count(reads=2, tally=tally)
                c.kazoo.exists_async(self.path, watch=watcher)
                final = c.kazoo.get_async(self.path, watch=watcher)
        except Exception as exc:  # closed client and the like
            self._read_failed(mode, exc, registered)
            return
        final.rawlink(functools.partial(self._after_read, rnd, mode, registered))

    def _after_read(
        self, rnd: int, mode: str, registered: asyncio.Future[None] | None, result: Any
    ) -> None:
        exc = result.exception
        children: tuple[str, ...] | None = None
        data: bytes | None = None
        token: tuple[int, int]
        if exc is None:
            value = result.value
            if self.kind == "children":
                names, stat = value
                children = tuple(names)
                token = (stat.czxid, stat.pzxid)
            elif mode == "subscribe":
                token = _MISSING if value is None else (value.czxid, value.mzxid)
            else:
                data, stat = value
                token = (stat.czxid, stat.mzxid)
        elif isinstance(exc, NoNodeError):
            token = _MISSING  # the exists() watch waits for the node to appear
        else:
            self._read_failed(mode, exc, registered)
            return
        _resolve(registered, None)
        with self._lock:
            if rnd != self._round or not self._active:
                return
            previous = self._token
            self._token = token
            pending = self._pending
            self._pending = None
        if mode == "subscribe":
            return
        if mode == "reconnected" and pending is None and previous in (None, token):
            return  # unchanged, or the subscription itself had failed: nothing to tell
        reason = pending if (mode == "reconnected" and pending is not None) else mode
        self.fired += 1
        event = WatchEvent(self.path, self.kind, reason, children=children, data=data)
        self.client._deliver(functools.partial(self._callback, event))

    def _read_failed(
        self, mode: str, exc: BaseException, registered: asyncio.Future[None] | None
    ) -> None:
        # ConnectionLoss and the like: the state listener re-arms on the next CONNECTED.
        with self._lock:
            if mode in ("changed", "new_session") and self._pending is None:
                self._pending = mode
        log.debug("re-arming watch on %s failed: %r", self.path, exc)
        _resolve(registered, exc)

    def _on_event(self, rnd: int, event: Any) -> None:
        if event.type == EventType.NONE:
            return  # kazoo's connection-loss flush; re-armed on CONNECTED
        if self.kind == "children" and event.type == EventType.CHANGED:
            return  # data change of the parent: not a child listener's business
        with self._lock:
            if rnd != self._round or not self._active:
                return  # duplicate delivery (kazoo calls a watcher once per watch set)
        self.client._count(watch_notifications=1)
        self._arm("changed")


def _resolve(fut: asyncio.Future[None] | None, exc: BaseException | None) -> None:
    if fut is None:
        return
    loop = fut.get_loop()

    def settle() -> None:
        if fut.done():
            return
        if exc is None:
            fut.set_result(None)
        else:
            fut.set_exception(exc)

    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(settle)


# --------------------------------------------------------------------------- the client


class ZkClient:
    """One ZooKeeper session, with ZkClient 0.3 semantics on top of kazoo.

    Args:
        connect: ``host:port[,host:port...]``, optionally with a chroot suffix.
        session_timeout_s: the requested session timeout in seconds (pass the
            scaled ``zookeeper.session.timeout.ms`` / 1000).
        chroot: a chroot to append to ``connect`` (``"/run-42"``), if ``connect``
            has none; layout paths are then relative to it.
        on_state: called with (``CONNECTED``|``SUSPENDED``|``LOST``, session id
            hex) on each transition; not called for the LOST of :meth:`stop`.
        on_new_session: called when a CONNECTED brings a new session id after
            an expiry (``IZkStateListener.handleNewSession``).
        dispatch: where callbacks run; default: one shared worker thread.
        counter: the op counter to use (a fresh one by default).
        client_id: ``(session_id, password)`` to resume a session.
        connection_retry: kazoo's reconnect policy; default retries forever
            with a capped back-off of 1 s.
        auth: a digest identity: sent on every (re)connection, and every znode
            this client creates gets an ACL for that identity only. None: no
            auth, znodes are ``world:anyone`` (ZooKeeper's default).
        raw_factory: builds the raw client (:attr:`kazoo`) from
            :class:`~kazoo.client.KazooClient`'s keyword arguments (see
            :class:`RawClientFactory`); default
            :func:`zk_registry.connection.kazoo_client`, a ``KazooClient`` whose
            reply-xid mismatch drops the connection as the Java client does
            (an emulator choice; see that module). A raw
            client with coroutine methods ``start_async(timeout=)`` and
            ``stop_async()`` is started and stopped on the loop, without a
            thread; one with a ``negotiated_timeout_ms`` attribute says the
            negotiated session timeout itself.
    """

    def __init__(
        self,
        connect: str,
        session_timeout_s: float,
        *,
        chroot: str | None = None,
        on_state: Callable[[str, str], None] | None = None,
        on_new_session: Callable[[], None] | None = None,
        dispatch: Dispatch | None = None,
        counter: ZkOpCounter | None = None,
        client_id: tuple[int, bytes] | None = None,
        connection_retry: KazooRetry | None = None,
        auth: ZkAuth | None = None,
        raw_factory: RawClientFactory | None = None,
    ) -> None:
        hosts = connect
        if chroot:
            if "/" in connect:
                raise ValueError(f"connect string {connect!r} already has a chroot")
            hosts = connect + "/" + chroot.strip("/")
        self.connect_string: str = hosts
        self.session_timeout_s = float(session_timeout_s)
        self.counter = counter if counter is not None else ZkOpCounter()
        self.auth = auth
        self._negotiated_ms: int | None = None
        self.session_id: int | None = None
        self.sessions = 0  # sessions established so far
        self.expirations = 0  # new sessions after an expiry
        self._on_state = on_state
        self._on_new_session = on_new_session
        self._dispatch: Dispatch = dispatch if dispatch is not None else _default_dispatch
        self._lock = threading.Lock()
        self._watches: list[ZkWatch] = []
        self._stopping = False
        self._state = STATE_LOST
        self._waiters: list[asyncio.Future[bool]] = []
        retry = connection_retry or KazooRetry(
            max_tries=-1, delay=0.05, backoff=2, max_jitter=0.1, max_delay=1.0
        )
        factory: RawClientFactory = kazoo_client if raw_factory is None else raw_factory
        self.kazoo: Any = factory(
            hosts=hosts,
            timeout=self.session_timeout_s,
            client_id=client_id,
            connection_retry=retry,
            auth_data=None if auth is None else auth.auth_data,
            default_acl=None if auth is None else auth.acl(),
        )
        # A raw client that knows the negotiated timeout says it; kazoo's is hooked.
        self._raw_negotiates = hasattr(self.kazoo, "negotiated_timeout_ms")
        if not self._raw_negotiates:
            self._hook_negotiated_timeout()
        self.kazoo.add_listener(self._listener)

    # -- lifecycle ------------------------------------------------------------

    def start(self, timeout_s: float = 15.0) -> None:
        """Connect (blocking) and wait for the session.

        Raises:
            kazoo.handlers.threading.KazooTimeoutError: not connected in time.
        """
        self._stopping = False
        try:
            self.kazoo.start(timeout=timeout_s)
        except BaseException:
            # A client that failed to start must not keep reconnecting forever.
            with contextlib.suppress(Exception):
                self.kazoo.stop()
            with contextlib.suppress(Exception):
                self.kazoo.close()
            raise

    async def start_async(self, timeout_s: float = 15.0) -> None:
        """:meth:`start` without blocking the event loop.

        A raw client with a coroutine ``start_async`` is awaited on the loop;
        kazoo's blocking ``start`` runs in the loop's default executor.
        """
        start = getattr(self.kazoo, "start_async", None)
        if not inspect.iscoroutinefunction(start):
            await asyncio.get_running_loop().run_in_executor(None, self.start, timeout_s)
            return
        self._stopping = False
        try:
            await start(timeout=timeout_s)
        except BaseException:
            # As start(): a client that failed to start must not keep reconnecting.
            await self._stop_raw()
            raise

    def stop(self) -> None:
        """Close the session (the server deletes its ephemerals) and release resources.

        Safe to call twice; must not be called from a kazoo thread.
        """
        self._stopping = True
        with contextlib.suppress(Exception):
            self.kazoo.stop()
        with contextlib.suppress(Exception):
            self.kazoo.close()
        self._wake_waiters(False)

    async def stop_async(self) -> None:
        """:meth:`stop` without blocking the event loop.

        A raw client with a coroutine ``stop_async`` is awaited on the loop;
        kazoo's blocking ``stop`` runs in the loop's default executor.
        """
        if not inspect.iscoroutinefunction(getattr(self.kazoo, "stop_async", None)):
            await asyncio.get_running_loop().run_in_executor(None, self.stop)
            return
        self._stopping = True
        await self._stop_raw()
        self._wake_waiters(False)

    async def _stop_raw(self) -> None:
        """``stop`` and ``close`` the raw client, on the loop when it can; errors ignored."""
        with contextlib.suppress(Exception):
            stop = getattr(self.kazoo, "stop_async", None)
            if inspect.iscoroutinefunction(stop):
                await stop()
            else:
                self.kazoo.stop()
        with contextlib.suppress(Exception):
            self.kazoo.close()

    @property
    def negotiated_session_timeout_ms(self) -> int | None:
        """The session timeout the server granted (ms), once connected; else ``None``.

        Read from the raw client's ``negotiated_timeout_ms`` when it has one;
        for kazoo, recorded from the ``ConnectResponse``.
        """
        if self._raw_negotiates:
            value = self.kazoo.negotiated_timeout_ms
            return None if value is None else int(value)
        return self._negotiated_ms

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        """``(session_id, password)`` while connected (for the session-expiry fault)."""
        cid = self.kazoo.client_id
        return None if cid is None else (int(cid[0]), bytes(cid[1]))

    @property
    def session_id_hex(self) -> str:
        """The current (or last) session id as hex."""
        return session_id_hex(self.session_id)

    @property
    def state(self) -> str:
        """``CONNECTED``, ``SUSPENDED`` or ``LOST`` (also before :meth:`start`)."""
        return self._state

    @property
    def connected(self) -> bool:
        """Whether the session is connected now."""
        return bool(self.kazoo.connected)

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stopping

    async def wait_connected(self, timeout_s: float | None = None) -> bool:
        """Wait until connected; False on timeout or if the client was stopped."""
        if self.connected:
            return True
        if self._stopping:
            return False
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        with self._lock:
            self._waiters.append(fut)
        if self.connected:  # raced with the listener
            self._wake_waiters(True)
        try:
            return await asyncio.wait_for(fut, timeout_s)
        except TimeoutError:
            return False
        finally:
            with self._lock:
                if fut in self._waiters:
                    self._waiters.remove(fut)

    # -- asyncio operations -----------------------------------------------------

    async def get_async(
        self,
        path: str,
        watch: Callable[[Any], None] | None = None,
        tally: ZkOpCounter | None = None,
    ) -> tuple[bytes, ZnodeStat]:
        """``getData``: ``(data, ZnodeStat)``. Raises kazoo errors (NoNodeError ...)."""
        self._count(reads=1, tally=tally)
        result: tuple[bytes, ZnodeStat] = await self._await(
            lambda: self.kazoo.get_async(path, watch)
        )
        return result

    @overload
    async def get_children_async(
        self,
        path: str,
        watch: Callable[[Any], None] | None = None,
        include_data: Literal[False] = False,
        tally: ZkOpCounter | None = None,
    ) -> list[str]: ...

    @overload
    async def get_children_async(
        self,
        path: str,
        watch: Callable[[Any], None] | None = None,
        *,
        include_data: Literal[True],
        tally: ZkOpCounter | None = None,
    ) -> tuple[list[str], ZnodeStat]: ...

    async def get_children_async(
        self,
        path: str,
        watch: Callable[[Any], None] | None = None,
        include_data: bool = False,
        tally: ZkOpCounter | None = None,
    ) -> list[str] | tuple[list[str], ZnodeStat]:
        """``getChildren``: the names, or ``(names, ZnodeStat)`` with ``include_data``."""
        self._count(reads=1, tally=tally)
        listed: list[str] | tuple[list[str], ZnodeStat] = await self._await(
            lambda: self.kazoo.get_children_async(path, watch, include_data=include_data)
        )
        return listed

    async def exists_async(
        self,
        path: str,
        watch: Callable[[Any], None] | None = None,
        tally: ZkOpCounter | None = None,
    ) -> ZnodeStat | None:
        """``exists``: the ``ZnodeStat`` or ``None``."""
        self._count(reads=1, tally=tally)
        stat: ZnodeStat | None = await self._await(lambda: self.kazoo.exists_async(path, watch))
        return stat

    async def create_async(
        self,
        path: str,
        value: bytes | None = b"",
        *,
        ephemeral: bool = False,
        sequence: bool = False,
        tally: ZkOpCounter | None = None,
    ) -> str:
        """``create`` (no parents): the created path. Raises NodeExistsError, NoNodeError ..."""
        self._count(writes=1, tally=tally)
        created: str = await self._await(
            lambda: self.kazoo.create_async(path, value, ephemeral=ephemeral, sequence=sequence)
        )
        return created

    async def create_with_stat_async(
        self,
        path: str,
        value: bytes = b"",
        *,
        ephemeral: bool = False,
        sequence: bool = False,
        tally: ZkOpCounter | None = None,
    ) -> tuple[str, ZnodeStat]:
        """``create2`` (no parents): ``(created path, ZnodeStat)``; the stat's ``czxid``
        is the create's place in ZooKeeper's total order. Raises as :meth:`create_async`.
        """
        self._count(writes=1, tally=tally)
        created: tuple[str, ZnodeStat] = await self._await(
            lambda: self.kazoo.create_async(
                path, value, ephemeral=ephemeral, sequence=sequence, include_data=True
            )
        )
        return created

    async def set_async(
        self, path: str, value: bytes, version: int = -1, tally: ZkOpCounter | None = None
    ) -> ZnodeStat:
        """``setData``: the new ``ZnodeStat``. Raises NoNodeError, BadVersionError ..."""
        self._count(writes=1, tally=tally)
        stat: ZnodeStat = await self._await(lambda: self.kazoo.set_async(path, value, version))
        return stat

    async def delete_async(
        self, path: str, version: int = -1, tally: ZkOpCounter | None = None
    ) -> None:
        """``delete`` (not recursive). Raises NoNodeError, NotEmptyError ..."""
        self._count(writes=1, tally=tally)
        await self._await(lambda: self.kazoo.delete_async(path, version))

    async def create_persistent_recursive(
        self, path: str, tally: ZkOpCounter | None = None
    ) -> None:
        """ZkClient ``createPersistent(path, createParents = true)`` with null data.

        ZkClient's ``create(path, null, PERSISTENT)`` sends no data at all (jute
        writes a -1 length; a read gives null, the stat's ``dataLength`` 0),
        not an empty array. Tries ``create(path)``; on NoNode creates the parent
        the same way and tries again; NodeExists counts as done. Every attempt
        is one write, as on the wire.
        """
        try:
            await self.create_async(path, None, tally=tally)
        except NodeExistsError:
            return
        except NoNodeError:
            parent = path.rsplit("/", 1)[0]
            if not parent:
                raise
            await self.create_persistent_recursive(parent, tally=tally)
            await self.create_persistent_recursive(path, tally=tally)

    async def retry_until_connected(
        self, op: Callable[[], Awaitable[T]], deadline_s: float | None = None
    ) -> T:
        """ZkClient ``retryUntilConnected``: retry ``op`` after ConnectionLoss/SessionExpired.

        Waits for the connection before each retry. ``deadline_s`` (seconds from
        now on the running loop's clock; ``None`` = forever, as ZkClient) bounds
        the whole loop; when it passes, the last error is raised. A stopped
        client raises at once.

        Raises:
            Whatever ``op`` raises that is not retriable, or the last retriable
            error once the deadline passes.
        """
        loop = asyncio.get_running_loop()
        deadline = None if deadline_s is None else loop.time() + deadline_s
        while True:
            try:
                return await op()
            except RETRIABLE_ERRORS as exc:
                if isinstance(exc, ConnectionClosedError) or self._stopping:
                    raise
                remaining = None if deadline is None else deadline - loop.time()
                if remaining is not None and remaining <= 0:
                    raise
                await asyncio.sleep(0)  # ZkClient: Thread.yield() before waiting
                if not await self.wait_connected(remaining):
                    raise

    # -- watches ----------------------------------------------------------------

    async def watch_children(
        self,
        path: str,
        callback: Callable[[WatchEvent], None],
        tally: ZkOpCounter | None = None,
    ) -> ZkWatch:
        """``subscribeChildChanges``: exists + getChildren with a watch; no initial call.

        The returned watch stays armed across reconnects and session expiries
        until :meth:`ZkWatch.stop`. If the registration read fails with
        ConnectionLoss/SessionExpired the watch is still returned and arms on
        the next CONNECTED (ZkClient would block until then).

        Raises:
            ConnectionClosedError: the client was stopped.
        """
        return await self._watch(path, "children", callback, tally)

    async def watch_data(
        self,
        path: str,
        callback: Callable[[WatchEvent], None],
        tally: ZkOpCounter | None = None,
    ) -> ZkWatch:
        """``subscribeDataChanges``: exists with a watch; no initial call.

        Each notification re-reads exists + getData and delivers the data
        (``None`` once the node is deleted). Same lifetime rules as
        :meth:`watch_children`.
        """
        return await self._watch(path, "data", callback, tally)

    async def _watch(
        self,
        path: str,
        kind: WatchKind,
        callback: Callable[[WatchEvent], None],
        tally: ZkOpCounter | None,
    ) -> ZkWatch:
        w = ZkWatch(self, path, kind, callback)
        with self._lock:
            self._watches.append(w)
        registered: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        w._arm("subscribe", registered, tally)
        try:
            await registered
        except RETRIABLE_ERRORS as exc:
            if isinstance(exc, ConnectionClosedError) or self._stopping:
                w.stop()
                raise
            # Disconnected: stays registered and arms on the next CONNECTED.
            log.info("watch on %s registered while disconnected: %r", path, exc)
        except BaseException:
            w.stop()
            raise
        return w

    @property
    def watches(self) -> list[ZkWatch]:
        """The active subscriptions."""
        with self._lock:
            return list(self._watches)

    def _forget_watch(self, w: ZkWatch) -> None:
        with self._lock:
            if w in self._watches:
                self._watches.remove(w)

    # -- internals ----------------------------------------------------------------

    def _count(
        self,
        reads: int = 0,
        writes: int = 0,
        watch_notifications: int = 0,
        tally: ZkOpCounter | None = None,
    ) -> None:
        self.counter.add(reads, writes, watch_notifications)
        if tally is not None:
            tally.add(reads, writes, watch_notifications)

    def _deliver(self, fn: Callable[[], None]) -> None:
        try:
            self._dispatch(fn)
        except Exception:
            log.exception("dispatching a ZooKeeper callback failed")

    async def _await(self, issue: Callable[[], Any]) -> Any:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()

        def settle(result: Any) -> None:
            if fut.done():
                return
            exc = result.exception
            if exc is None:
                fut.set_result(result.value)
            else:
                fut.set_exception(exc)

        def on_done(result: Any) -> None:
            with contextlib.suppress(RuntimeError):  # loop closed meanwhile
                loop.call_soon_threadsafe(settle, result)

        issue().rawlink(on_done)
        return await fut

    def _hook_negotiated_timeout(self) -> None:
        """Record ``ConnectResponse.timeOut`` (kazoo keeps it in a local variable)."""
        conn = getattr(self.kazoo, "_connection", None)
        original = getattr(conn, "_invoke", None)
        if conn is None or original is None:
            return

        def _invoke(timeout: float, request: Any, xid: int | None = None) -> Any:
            result = original(timeout, request, xid)
            if isinstance(request, Connect) and isinstance(result, tuple) and result:
                with contextlib.suppress(AttributeError, TypeError):
                    self._negotiated_ms = int(result[0].time_out)
            return result

        conn._invoke = _invoke

    def _wake_waiters(self, value: bool) -> None:
        with self._lock:
            waiters, self._waiters = self._waiters, []
        for fut in waiters:
            loop = fut.get_loop()

            def settle(f: asyncio.Future[bool] = fut) -> None:
                if not f.done():
                    f.set_result(value)

            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(settle)

    def _listener(self, state: Any) -> None:
        """kazoo state listener (connection thread): must not block."""
        if state == KazooState.CONNECTED:
            sid = self.kazoo._session_id
            previous = self.session_id
            new_session = previous is not None and sid != previous
            self.session_id = sid
            self.sessions += 1
            if new_session:
                self.expirations += 1
            self._state = STATE_CONNECTED
            self._wake_waiters(True)
            if self._stopping:
                return
            if self._on_state is not None:
                self._deliver(
                    functools.partial(self._on_state, STATE_CONNECTED, session_id_hex(sid))
                )
            if new_session and self._on_new_session is not None:
                self._deliver(self._on_new_session)
            if previous is not None:
                mode = "new_session" if new_session else "reconnected"
                for w in self.watches:
                    w._arm(mode)
        elif state == KazooState.SUSPENDED:
            self._state = STATE_SUSPENDED
            if not self._stopping and self._on_state is not None:
                hx = session_id_hex(self.session_id)
                self._deliver(functools.partial(self._on_state, STATE_SUSPENDED, hx))
        elif state == KazooState.LOST:
            self._state = STATE_LOST
            if not self._stopping and self._on_state is not None:
                hx = session_id_hex(self.session_id)
                self._deliver(functools.partial(self._on_state, STATE_LOST, hx))


# --------------------------------------------------------------------------- ZkUtils


class EphemeralConflict(NodeExistsError):  # type: ignore[misc]  # kazoo is untyped: a base of Any
    """``createEphemeralPathExpectConflict`` rethrew NodeExists.

    Attributes:
        path: the node.
        stored: the data found in it, or ``None`` if it vanished before the read.
    """

    def __init__(self, path: str, stored: bytes | None) -> None:
        super().__init__(f"{path} exists with other data: {stored!r}")
        self.path = path
        self.stored = stored


class ZkUtils:
    """The ``kafka.utils.ZkUtils`` idioms of K@0.8.2.2 over a :class:`ZkClient`.

    Every primitive operation runs under :meth:`ZkClient.retry_until_connected`
    (ZkClient retries ConnectionLoss/SessionExpired until connected) and is
    counted in the client's counter and in the ``tally`` passed, if any.

    Args:
        client: the session.
        retry_deadline_s: bound on each operation's reconnect wait (``None``:
            forever, as ZkClient).
        sleep: the ZOOKEEPER-1740 back-off sleep (injected for tests).
    """

    def __init__(
        self,
        client: ZkClient,
        retry_deadline_s: float | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.client = client
        self.retry_deadline_s = retry_deadline_s
        self._sleep = sleep

    async def _retry(self, op: Callable[[], Awaitable[T]]) -> T:
        return await self.client.retry_until_connected(op, self.retry_deadline_s)

    async def read(self, path: str, tally: ZkOpCounter | None = None) -> tuple[bytes, ZnodeStat]:
        """``readData``: ``(data, stat)``; NoNodeError propagates."""
        result: tuple[bytes, ZnodeStat] = await self._retry(
            lambda: self.client.get_async(path, tally=tally)
        )
        return result

    async def read_maybe(self, path: str, tally: ZkOpCounter | None = None) -> bytes | None:
        """``readDataMaybeNull``: the data or ``None``."""
        try:
            data, _ = await self.read(path, tally)
        except NoNodeError:
            return None
        return data

    async def children(self, path: str, tally: ZkOpCounter | None = None) -> list[str]:
        """``getChildren``: NoNodeError propagates."""
        names = await self._retry(lambda: self.client.get_children_async(path, tally=tally))
        return list(names)

    async def children_maybe(self, path: str, tally: ZkOpCounter | None = None) -> list[str]:
        """``getChildrenParentMayNotExist``: ``[]`` on NoNode."""
        try:
            return await self.children(path, tally)
        except NoNodeError:
            return []

    async def exists(self, path: str, tally: ZkOpCounter | None = None) -> bool:
        """``pathExists``."""
        stat = await self._retry(lambda: self.client.exists_async(path, tally=tally))
        return stat is not None

    async def make_sure_persistent_path_exists(
        self, path: str, tally: ZkOpCounter | None = None
    ) -> None:
        """``makeSurePersistentPathExists``: exists, else ``createPersistent(path, true)``."""
        if not await self.exists(path, tally):
            await self._retry(lambda: self.client.create_persistent_recursive(path, tally=tally))

    async def create_parent_path(self, path: str, tally: ZkOpCounter | None = None) -> None:
        """``createParentPath``: ``createPersistent(parent, true)``."""
        parent = path.rsplit("/", 1)[0]
        if parent:
            await self._retry(lambda: self.client.create_persistent_recursive(parent, tally=tally))

    async def create_persistent_path(
        self, path: str, data: bytes = b"", tally: ZkOpCounter | None = None
    ) -> None:
        """``createPersistentPath``: create; on NoNode the parents, then create again.

        Raises:
            NodeExistsError: the node exists.
        """
        try:
            await self._retry(lambda: self.client.create_async(path, data, tally=tally))
        except NoNodeError:
            await self.create_parent_path(path, tally)
            await self._retry(lambda: self.client.create_async(path, data, tally=tally))

    async def create_ephemeral_path(
        self, path: str, data: bytes, tally: ZkOpCounter | None = None
    ) -> int:
        """``createEphemeralPath``: create; on NoNode the parents, then create again.

        Returns:
            the created node's ``czxid`` (the create's zxid).
        """
        try:
            _, stat = await self._retry(
                lambda: self.client.create_with_stat_async(path, data, ephemeral=True, tally=tally)
            )
        except NoNodeError:
            await self.create_parent_path(path, tally)
            _, stat = await self._retry(
                lambda: self.client.create_with_stat_async(path, data, ephemeral=True, tally=tally)
            )
        return int(stat.czxid)

    async def create_ephemeral_path_expect_conflict(
        self, path: str, data: bytes, tally: ZkOpCounter | None = None
    ) -> int:
        """``createEphemeralPathExpectConflict`` (K@0.8.2.2 ``ZkUtils.scala`` lines 235-258).

        On NodeExists the node is read back: the same data means our own
        create landed before a connection loss (success); other data, or a
        node gone before the read, rethrows.

        Returns:
            the node's ``czxid``: from the create, or from the read-back stat
            when our own create had landed before a connection loss.

        Raises:
            EphemeralConflict: (a NodeExistsError) with the stored data.
        """
        try:
            return await self.create_ephemeral_path(path, data, tally)
        except NodeExistsError:
            try:
                stored, stat = await self.read(path, tally)
            except NoNodeError:
                stored, stat = None, None
            if stored is None or stat is None or stored != data:  # no stat: no stored data
                raise EphemeralConflict(path, stored) from None
            log.info("%s exists with value %r during connection loss; this is ok", path, data)
            return int(stat.czxid)

    async def create_ephemeral_path_expect_conflict_handle_zk_bug(
        self,
        path: str,
        data: bytes,
        checker: Callable[[bytes], bool],
        backoff_s: float,
        max_backoffs: int | None = None,
        tally: ZkOpCounter | None = None,
    ) -> int:
        """``createEphemeralPathExpectConflictHandleZKBug`` (ZOOKEEPER-1740; lines 272-299).

        Loop: try :meth:`create_ephemeral_path_expect_conflict`; on a conflict
        read the node again (``readDataMaybeNull``): gone -> retry at once;
        ``checker(stored)`` true ("I wrote it in an older session") -> sleep
        ``backoff_s`` and retry; false -> rethrow.

        Args:
            max_backoffs: bound on the sleeps (Kafka: none); ``None`` = unbounded.

        Returns:
            The number of back-offs taken.

        Raises:
            EphemeralConflict: the checker said no, or ``max_backoffs`` ran out.
        """
        backoffs = 0
        while True:
            try:
                await self.create_ephemeral_path_expect_conflict(path, data, tally)
                return backoffs
            except EphemeralConflict as conflict:
                stored = await self.read_maybe(path, tally)
                if stored is None:
                    continue  # the node disappeared: retry creating it immediately
                if not checker(stored):
                    raise EphemeralConflict(path, stored) from conflict
                if max_backoffs is not None and backoffs >= max_backoffs:
                    raise EphemeralConflict(path, stored) from conflict
                backoffs += 1
                log.info(
                    "conflicted ephemeral node %s from an older session; backing off %.3fs",
                    path,
                    backoff_s,
                )
                await self._sleep(backoff_s)

    async def update_persistent_path(
        self, path: str, data: bytes, tally: ZkOpCounter | None = None
    ) -> None:
        """``updatePersistentPath``: set; NoNode -> parents + create; NodeExists -> set."""
        try:
            await self._retry(lambda: self.client.set_async(path, data, tally=tally))
        except NoNodeError:
            await self.create_parent_path(path, tally)
            try:
                await self._retry(lambda: self.client.create_async(path, data, tally=tally))
            except NodeExistsError:
                await self._retry(lambda: self.client.set_async(path, data, tally=tally))

    async def delete_path(self, path: str, tally: ZkOpCounter | None = None) -> bool:
        """``deletePath``: False when the node was already gone (NoNode is fine)."""
        try:
            await self._retry(lambda: self.client.delete_async(path, tally=tally))
        except NoNodeError:
            return False
        return True


# --------------------------------------------------------------------------- chroot cleanup

#: Deletes issued at once per round trip batch by :func:`delete_chroot`.
_DELETE_BATCH = 500


class ZkCleanupError(ZooKeeperError):
    """:func:`delete_chroot` could not delete the whole chroot (one-line message).

    Attributes:
        deleted: znodes it did delete.
        remaining: paths it saw but could not delete, with the reason.
    """

    def __init__(self, message: str, deleted: int, remaining: dict[str, str]) -> None:
        super().__init__(message)
        self.deleted = deleted
        self.remaining = remaining


class _Deadline(Exception):
    pass


def _wait_result(result: Any, deadline: float) -> Any:
    try:
        return result.get(timeout=max(0.001, deadline - time.monotonic()))
    except KazooTimeoutError:
        raise _Deadline from None


def _normalize_chroot(chroot: str, base: str) -> str:
    path = "/" + chroot.strip().strip("/")
    if not chroot.strip().startswith("/") or path == "/" or "//" in path:
        raise ValueError(f"refusing to delete chroot {chroot!r}: give an absolute path below '/'")
    if not base and (path == "/zookeeper" or path.startswith("/zookeeper/")):
        raise ValueError(f"refusing to delete {path!r}: ZooKeeper's own subtree")
    return path


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


def _delete_tree(kz: Any, root: str, deadline: float, problems: dict[str, str]) -> int:
    """One pass: list the tree breadth-first, delete it deepest level first (pipelined)."""
    levels: list[list[str]] = []
    level = [root]
    while level:
        listed = [(p, kz.get_children_async(p)) for p in level]
        present: list[str] = []
        below: list[str] = []
        for path, result in listed:
            try:
                children = _wait_result(result, deadline)
            except NoNodeError:
                continue
            except NoAuthError:
                problems[path] = "not readable with these credentials (NoAuth)"
            except KazooException as exc:
                problems[path] = f"listing failed: {type(exc).__name__}"
            else:
                below.extend(f"{path}/{child}" for child in children)
            present.append(path)
        if present:
            levels.append(present)
        level = below
    deleted = 0
    for paths in reversed(levels):
        for start in range(0, len(paths), _DELETE_BATCH):
            issued = [(p, kz.delete_async(p)) for p in paths[start : start + _DELETE_BATCH]]
            for path, result in issued:
                try:
                    _wait_result(result, deadline)
                except NoNodeError:
                    problems.pop(path, None)
                except NotEmptyError:
                    problems.setdefault(path, "not empty (a child appeared meanwhile)")
                except NoAuthError:
                    problems[path] = "no DELETE permission on its parent (NoAuth)"
                except KazooException as exc:
                    problems[path] = f"delete failed: {type(exc).__name__}"
                else:
                    deleted += 1
                    problems.pop(path, None)
    return deleted


def _prune_parents(kz: Any, root: str, deadline: float) -> int:
    """Delete the now-empty ancestors of ``root``, deepest first, never ``/``."""
    deleted = 0
    path = _parent(root)
    while path != "/":
        try:
            _wait_result(kz.delete_async(path), deadline)
        except NoNodeError:
            pass
        except KazooException:  # NotEmpty (still in use), NoAuth, ConnectionLoss: stop here
            break
        else:
            deleted += 1
        path = _parent(path)
    return deleted


def delete_chroot(
    connect: str | Sequence[str],
    chroot: str,
    timeout_s: float = 30.0,
    auth: ZkAuth | None = None,
    *,
    prune_parents: bool = True,
    attempts: int = 5,
) -> int:
    """Delete a run's chroot recursively, and then its ancestors that are left empty.

    Meant for after a run, once its clients have stopped. The tree is listed
    breadth-first and deleted deepest level first with pipelined requests. A
    node that gains a child meanwhile (an ephemeral of a session that is still
    alive, or is being re-created) fails with NotEmpty, and the pass is repeated
    up to ``attempts`` times with a short back-off. With ``prune_parents``,
    ancestors are then deleted deepest first while they are empty: for
    ``/rebalance-emu/<run_id>/<protocol>`` that removes ``/rebalance-emu/<run_id>``
    and ``/rebalance-emu`` unless another run or protocol still uses them.
    ``/`` is never deleted, nor anything outside the chroot's ancestry.

    Args:
        connect: ``host:port,...`` (a connect string, or a list of members). A
            chroot in the connect string is honoured: ``chroot`` is then relative
            to it, and pruning stops below it.
        chroot: the absolute path to delete (``/rebalance-emu/<run_id>/<protocol>``).
        timeout_s: bound on the whole call, connecting included.
        auth: the digest identity the run created its znodes with (``--zk-auth``).
        prune_parents: also delete emptied ancestors.
        attempts: passes over the tree before giving up on what keeps coming back.

    Returns:
        The number of znodes deleted (the tree and the pruned ancestors); 0 if
        there was nothing to delete.

    Raises:
        ValueError: ``chroot`` is ``/``, relative, or ZooKeeper's ``/zookeeper``.
        ZooKeeperError: no connection within ``timeout_s``.
        ZkCleanupError: something was left (NoAuth, a live session re-creating
            nodes) or ``timeout_s`` ran out; ``deleted`` and ``remaining`` say what.
    """
    text = connect if isinstance(connect, str) else ",".join(connect)
    hosts, base = parse_connect_string(text)
    root = _normalize_chroot(chroot, base)
    target = ",".join(hosts) + base
    deadline = time.monotonic() + timeout_s
    kz = KazooClient(
        hosts=target,
        timeout=min(10.0, max(2.0, timeout_s)),
        auth_data=None if auth is None else auth.auth_data,
        connection_retry=KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=0.5),
    )
    deleted = 0
    problems: dict[str, str] = {}
    try:
        try:
            kz.start(timeout=max(0.01, deadline - time.monotonic()))
        except KazooTimeoutError:
            raise ZooKeeperError(
                f"cannot connect to ZooKeeper at {target} within {timeout_s:g}s to delete {root}"
            ) from None
        except KazooException as exc:
            raise ZooKeeperError(
                f"cannot connect to ZooKeeper at {target} to delete {root}: "
                f"{type(exc).__name__}: {exc}"
            ) from None
        try:
            for attempt in range(max(1, attempts)):
                problems.clear()
                deleted += _delete_tree(kz, root, deadline, problems)
                try:
                    gone = _wait_result(kz.exists_async(root), deadline) is None
                except KazooException as exc:
                    problems.setdefault(root, f"exists failed: {type(exc).__name__}")
                    gone = False
                if gone:
                    break
                pause = min(0.1 * 2**attempt, max(0.0, deadline - time.monotonic()))
                time.sleep(pause)
            else:
                path, why = next(
                    ((p, w) for p, w in sorted(problems.items()) if not w.startswith("not empty")),
                    next(iter(sorted(problems.items())), (root, "still exists")),
                )
                raise ZkCleanupError(
                    f"could not delete {root} on {target} after {attempts} attempts: "
                    f"{len(problems)} znode(s) left, e.g. {path}: {why}",
                    deleted,
                    dict(problems),
                )
            if prune_parents:
                deleted += _prune_parents(kz, root, deadline)
        except _Deadline:
            raise ZkCleanupError(
                f"deleting {root} on {target} timed out after {timeout_s:g}s "
                f"({deleted} znode(s) deleted)",
                deleted,
                dict(problems) or {root: "timed out"},
            ) from None
        return deleted
    finally:
        with contextlib.suppress(Exception):
            kz.stop()
        with contextlib.suppress(Exception):
            kz.close()
