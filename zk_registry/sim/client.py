"""``SimKazooClient``: kazoo 2.11.0's ``KazooClient``, the part ``ZkClient`` uses, on the sim loop.

``zk_registry.client.ZkClient(raw_factory=...)`` builds one of these instead of a
``KazooClient`` (issue-18 design §1.4, §3.1-§3.2); ``ZkClient``, ``ZkWatch`` and
``ZkUtils`` then run unchanged on a :class:`~emulator.sim.loop.SimEventLoop`
against a :class:`~zk_registry.sim.server.SimEnsemble`. No threads: kazoo's
connection thread is a task on the loop, its two callback workers are the
loop's ready queue, and every ``random`` draw comes from a named stream.

What is reproduced, read from kazoo 2.11.0 (``client.py``, ``protocol/connection.py``,
``handlers/utils.py``, ``retry.py``, ``hosts.py``, ``protocol/paths.py``):

* **States** (``_session_callback``): a dropped connection gives
  ``KeeperState.CONNECTING``: pending *and queued* requests fail with
  ``ConnectionLoss`` (``_notify_pending``), listeners get ``SUSPENDED``, then
  every client-side watcher is called once with ``WatchedEvent(NONE, state,
  None)`` and forgotten (``_reset_watchers``; kazoo never sends ``SetWatches``).
  A Connect answered with ``time_out <= 0`` is ``EXPIRED_SESSION``: listeners get
  ``LOST``, requests fail with ``SessionExpiredError``, the session id and
  watchers are reset (``_reset``); the connect loop goes on to the next host
  with session id 0, and the ``CONNECTING`` in between is skipped, so the
  sequence is ``SUSPENDED, LOST, CONNECTED`` (a new session id). State
  listeners run synchronously in the connection's flow.
* **Requests** (``_call``): refused at once in ``CLOSED``
  (``ConnectionClosedError``) and ``EXPIRED_SESSION`` (``SessionExpiredError``);
  otherwise queued and sent in order once connected.
* **Replies** (``_read_response``): the reply's xid must be the oldest
  pending one. Otherwise (or with nothing pending) that request fails with
  ``ConnectionLoss`` and the connection is dropped (``SUSPENDED``, the rest
  ``ConnectionLoss``, a reconnect in the same session): the project's
  ``zk_registry.connection.JavaXidConnectionHandler``, the Java client's answer,
  which the real engine's clients use (kazoo's own ``RuntimeError`` would end
  its thread; conformance script 29). ``exists`` + NoNode gives ``None``; an error
  reply gives a fresh instance of the error class. A watcher is registered
  client-side when a *successful* reply (or ``exists`` + NoNode) is read, after
  the result is set: ``GetChildren``/``GetChildren2`` in the child watchers,
  the others in the data watchers. (Not after an error reply: the registration
  sits in the success branch, ``connection.py`` 418-450.)
* **Watch events** (``_read_watch_event``): ``CREATED``/``CHANGED`` pop the
  path's data watchers, ``DELETED`` data and child watchers, ``CHILD`` child
  watchers; the path is unchrooted; nothing is dispatched once stopped.
* **Callbacks**: ``rawlink`` callbacks go to kazoo's completion queue, watch
  callbacks to its callback queue, two threads; here both are
  ``loop.call_soon`` in the order the connection produced them (the baseline
  of design §5.1: wire order). Once the client is stopped (its handler
  stopped) completions run synchronously and watch callbacks are dropped. An
  exception in a callback is logged and counted (:attr:`SimKazooClient.callback_errors`),
  as kazoo's workers log it. ``create_async`` resolves through a second
  completion (kazoo's ``create_completion`` wraps the inner result).
* **Timing** (``_connect``, ``_connect_attempt``): the Connect waits
  ``timeout / len(hosts)`` for its answer; once connected ``read_timeout =
  negotiated * 2/3``; idle, a ping goes out when ``last_send + read_timeout/2 -
  jitter`` passes, ``jitter = randint(1, 40) / 100`` s from ``zk/<name>/ping``
  (waiting at least ``jitter``); a wait that ends with a ping outstanding drops
  the connection; requests count as pings. (kazoo draws a new jitter at every
  wake-up of its select loop; here one per idle wait, re-armed lazily after
  activity.)
* **Reconnect** (``_connect_loop``, ``KazooRetry``): the resolvable hosts,
  shuffled with ``zk/<name>/hosts`` (``randomize_hosts``), tried in turn; after
  a full round ``ForceRetryError`` and the connection retry policy's back-off
  (``delay x backoff^n`` capped, times a jitter in ``[1 - max_jitter, 1 +
  max_jitter]`` drawn from ``zk/<name>/retry``, slept in 0.1 s steps that stop
  when the client is stopped).
* **Stop** (``stop``, ``_safe_close``): a ``Close`` is queued (sent at once if
  connected; the server closes the session and then the connection, and the
  reply ends the routine with ``CLOSED``); the handler stops; ``stop_async``
  waits up to ``max(10, timeout)`` s for the routine to end.
* **Chroot** (``_prefix_root``, ``unchroot``): request paths are normalized and
  prefixed, created paths, multi results and event paths unchrooted; the
  blocking ``start`` checks that the chroot exists (a warning otherwise), so
  :meth:`SimKazooClient.start_async` does too.

Differences from kazoo, all deliberate: a reply out of order drops the
connection (above; what the real engine's ``ZkClient`` does too, an emulator
choice restoring the Java client); state listeners and watchers are kept
in insertion order (kazoo's ``set`` s iterate in hash order); ``start``/``get``
cannot block a single-threaded loop (:class:`SimWouldBlock`); ACLs, auth,
SASL, read-only mode and ``makepath`` are refused (not modelled).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import random
import warnings
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Self

from kazoo.exceptions import (
    AuthFailedError,
    ConnectionClosedError,
    ConnectionDropped,
    ConnectionLoss,
    NoNodeError,
    OperationTimeoutError,
    SessionExpiredError,
    WriterNotClosedException,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import EventType, KazooState, KeeperState, WatchedEvent

from emulator.sim.loop import ActorContext, current_actor
from zk_registry.sim.wire import (
    CHECK,
    CLOSE,
    CREATE,
    CREATE2,
    DELETE,
    EXISTS,
    GET_CHILDREN,
    GET_CHILDREN2,
    GET_DATA,
    MULTI,
    PING,
    PING_XID,
    SET_DATA,
    Channel,
    ConnectRequest,
    ConnectResponse,
    Notification,
    Op,
    Reply,
    Request,
    packet_size,
)

if TYPE_CHECKING:
    from zk_registry.sim.server import SimEnsemble

__all__ = [
    "SimAsyncResult",
    "SimKazooClient",
    "SimTransactionRequest",
    "SimWouldBlock",
    "normpath",
    "parse_hosts",
    "prefix_root",
]

log = logging.getLogger(__name__)

_CLOSED_STATES = (KeeperState.EXPIRED_SESSION, KeeperState.AUTH_FAILED, KeeperState.CLOSED)
_NS = 1_000_000_000
_MS = 1_000_000
_XID_WRAP = 2147483647
_RETRY_STEP_NS = 100 * _MS  # KazooRetry sleeps in 0.1 s steps when it can be interrupted


class _Sentinel:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


_NONE = _Sentinel("_NONE")
_STOP = _Sentinel("STOP_CONNECTING")
_CLOSE_RESPONSE = _Sentinel("CLOSE_RESPONSE")
_TIMEOUT = _Sentinel("TIMEOUT")

_PING_OP = Op(PING)
_CLOSE_OP = Op(CLOSE)


class SimWouldBlock(RuntimeError):
    """A blocking kazoo call on the single-threaded sim loop (it could never return)."""


class _ForceRetry(Exception):
    """kazoo's ``ForceRetryError``: go round the hosts again after a back-off."""


class _RetryFailed(Exception):
    """kazoo's ``RetryFailedError``: the connection retry policy gave up."""


# --------------------------------------------------------------------------- paths


def normpath(path: str, trailing: bool = False) -> str:
    """kazoo's ``normpath``: drop empty names, refuse ``.``/``..``, keep a leading ``/``.

    Raises:
        ValueError: a relative name.
    """
    names = [name for name in path.split("/") if name]
    if "." in names or ".." in names:
        raise ValueError("relative paths not allowed")
    new = "/".join(names)
    if trailing and path.endswith("/"):
        new += "/"
    if path.startswith("/") and new != "/":
        return "/" + new
    return new


def _join(a: str, b: str) -> str:
    if b.startswith("/"):
        return b
    if a == "" or a.endswith("/"):
        return a + b
    return a + "/" + b


def prefix_root(root: str, path: str, trailing: bool = False) -> str:
    """kazoo's ``_prefix_root``: ``path`` under the chroot ``root``, normalized."""
    return normpath(_join(normpath(_join("/", root)), path.lstrip("/")), trailing=trailing)


def parse_hosts(hosts: str) -> tuple[list[tuple[str, int]], str]:
    """kazoo's ``collect_hosts`` + ``set_hosts``: ``([(host, port), ...], chroot)``.

    Host names are lower-cased (``urlsplit`` does); the port defaults to 2181;
    the chroot is normalized (``""`` for none).

    Raises:
        ValueError: an empty host name.
    """
    host_ports, _, rest = hosts.partition("/")
    out: list[tuple[str, int]] = []
    for entry in host_ports.split(","):
        host, sep, port = entry.strip().rpartition(":")
        if not sep:
            host, port = entry.strip(), ""
        host = host.strip().lower()
        if not host:
            raise ValueError("bad hostname")
        out.append((host, int(port) if port else 2181))
    return out, normpath("/" + rest) if rest else ""


# --------------------------------------------------------------------------- results


class _Handler:
    """kazoo's ``SequentialThreadingHandler``, reduced to its two queues on the loop."""

    __slots__ = ("errors", "loop", "running")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.running = False
        self.errors = 0

    def completion(self, fn: Callable[[Any], object], arg: Any) -> None:
        """A ``rawlink`` callback: queued while running, else called now."""
        if self.running:
            self.loop.call_soon(self._run, fn, arg)
        else:
            self._run(fn, arg)

    def callback(self, fn: Callable[[Any], object], arg: Any) -> None:
        """A watch callback: queued while running, else lost (no worker reads the queue)."""
        if self.running:
            self.loop.call_soon(self._run, fn, arg)

    def _run(self, fn: Callable[[Any], object], arg: Any) -> None:
        try:
            fn(arg)
        except Exception:
            self.errors += 1
            log.exception("Exception in worker queue thread")


class SimAsyncResult:
    """kazoo's ``AsyncResult``: a value or an exception, set once, with ``rawlink`` callbacks."""

    __slots__ = ("_callbacks", "_exception", "_handler", "value")

    def __init__(self, handler: _Handler) -> None:
        self._handler = handler
        self._exception: BaseException | _Sentinel | None = _NONE
        self._callbacks: list[Callable[[SimAsyncResult], object]] = []
        self.value: Any = None

    def ready(self) -> bool:
        """Whether it holds a value or an exception."""
        return self._exception is not _NONE

    def successful(self) -> bool:
        """Whether it holds a value."""
        return self._exception is None

    @property
    def exception(self) -> BaseException | None:
        """The exception it holds (None when it holds a value or nothing yet)."""
        exc = self._exception
        return None if isinstance(exc, _Sentinel) else exc

    def set(self, value: Any = None) -> None:
        """Store the value and run the callbacks."""
        self.value = value
        self._exception = None
        self._do_callbacks()

    def set_exception(self, exception: BaseException) -> None:
        """Store the exception and run the callbacks."""
        self._exception = exception
        self._do_callbacks()

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        """The value, or raise the exception.

        Raises:
            KazooTimeoutError: not ready and ``block`` is false or a timeout was
                given (the loop cannot advance while this waits).
            SimWouldBlock: not ready, blocking forever.
        """
        exc = self._exception
        if not isinstance(exc, _Sentinel):
            if exc is None:
                return self.value
            raise exc
        if block and timeout is None:
            raise SimWouldBlock("AsyncResult.get() would block the sim loop forever")
        raise KazooTimeoutError()

    def get_nowait(self) -> Any:
        """``get(block=False)``."""
        return self.get(block=False)

    def wait(self, timeout: float | None = None) -> bool:
        """Whether it is ready (never waits)."""
        del timeout
        return self.ready()

    def rawlink(self, callback: Callable[[SimAsyncResult], object]) -> None:
        """Call ``callback(self)`` when set (now, if it is; as kazoo, every callback again)."""
        if callback not in self._callbacks:
            self._callbacks.append(callback)
        if self.ready():
            self._do_callbacks()

    def unlink(self, callback: Callable[[SimAsyncResult], object]) -> None:
        """Forget a callback not yet called."""
        if not self.ready() and callback in self._callbacks:
            self._callbacks.remove(callback)

    def _do_callbacks(self) -> None:
        for callback in self._callbacks:
            self._handler.completion(callback, self)


def _resolve(fut: asyncio.Future[Any], value: Any) -> None:
    if not fut.done():
        fut.set_result(value)


def _fresh(error: Any) -> Any:
    """An error result as kazoo builds it from the code: a fresh instance, no message."""
    return type(error)() if isinstance(error, BaseException) else error


# --------------------------------------------------------------------------- retry


class _Retry:
    """kazoo's ``KazooRetry`` for the connection routine (integer, stream-drawn jitter)."""

    def __init__(self, client: SimKazooClient, policy: dict[str, Any]) -> None:
        self._client = client
        self.max_tries: int | None = policy["max_tries"]
        self.delay_ns = round(float(policy["delay"]) * _NS)
        self.backoff = policy["backoff"]
        self.max_jitter = max(min(float(policy["max_jitter"]), 1.0), 0.0)
        self.max_delay_ns = round(float(policy["max_delay"]) * _NS)
        deadline = policy["deadline"]
        self.deadline_ns = None if deadline is None else round(float(deadline) * _NS)
        self.retry_exceptions: tuple[type[BaseException], ...] = (
            ConnectionLoss,
            OperationTimeoutError,
            _ForceRetry,
        )
        if policy["ignore_expire"]:
            self.retry_exceptions += (SessionExpiredError,)
        self._attempts = 0
        self._cur_delay_ns = self.delay_ns
        self._stop_ns: int | None = None

    def reset(self) -> None:
        """Reset the attempts and the delay."""
        self._attempts = 0
        self._cur_delay_ns = self.delay_ns
        self._stop_ns = None

    async def __call__(self, func: Callable[[_Retry], Any]) -> Any:
        client = self._client
        loop = client.loop
        self.reset()
        while True:
            try:
                if self.deadline_ns is not None and self._stop_ns is None:
                    self._stop_ns = loop.now_ns + self.deadline_ns
                return await func(self)
            except ConnectionClosedError:
                raise
            except self.retry_exceptions:
                self._attempts += 1
                if self._attempts == self.max_tries:
                    raise _RetryFailed("Too many retry attempts") from None
                lo = round((1.0 - self.max_jitter) * _MS)
                hi = round((1.0 + self.max_jitter) * _MS)
                sleep_ns = self._cur_delay_ns * client._retry_rng.randint(lo, hi) // _MS
                if self._stop_ns is not None and loop.now_ns + sleep_ns >= self._stop_ns:
                    raise _RetryFailed("Exceeded retry deadline") from None
                remain = sleep_ns
                while remain > 0:
                    await client._sleep_ns(min(_RETRY_STEP_NS, remain))
                    remain -= _RETRY_STEP_NS
                    if client._stopped:
                        raise _RetryFailed("interrupted") from None
                self._cur_delay_ns = min(round(sleep_ns * self.backoff), self.max_delay_ns)


_RETRY_DEFAULTS: dict[str, Any] = {
    "max_tries": 1,
    "delay": 0.1,
    "backoff": 2,
    "max_jitter": 0.4,
    "max_delay": 60.0,
    "deadline": None,
    "ignore_expire": True,
}
"""``KazooRetry()``'s defaults."""


def _retry_policy(connection_retry: Any) -> dict[str, Any]:
    """The settings of a ``KazooRetry`` (read by attribute), a dict of its arguments, or None."""
    if connection_retry is None:
        # KazooClient without one: its compat defaults (no cap on tries, 1 hour max delay).
        return {**_RETRY_DEFAULTS, "max_tries": None, "delay": 0.1, "max_delay": 3600.0}
    if isinstance(connection_retry, dict):
        policy = {**_RETRY_DEFAULTS, **connection_retry}
        unknown = set(policy) - set(_RETRY_DEFAULTS)
        if unknown:
            raise TypeError(f"unexpected retry settings: {sorted(unknown)}")
        return policy
    policy = {key: getattr(connection_retry, key, _RETRY_DEFAULTS[key]) for key in _RETRY_DEFAULTS}
    exceptions = getattr(connection_retry, "retry_exceptions", None)
    if exceptions is not None:
        policy["ignore_expire"] = SessionExpiredError in tuple(exceptions)
    return policy


# --------------------------------------------------------------------------- the client


class SimKazooClient:
    """A kazoo client on the sim loop, connected to a :class:`SimEnsemble`.

    Takes ``KazooClient``'s keyword arguments as ``ZkClient`` passes them, plus
    the ensemble and a name (its streams are ``zk/<name>/{ping,hosts,retry,link}``).
    Use :meth:`SimEnsemble.raw_factory` to build them for ``ZkClient``.

    The client belongs to the actor it is created under (``current_actor``):
    its routine, timers and deliveries run in that actor's context, so killing
    the actor stops it without a ``Close`` (call
    :meth:`SimEnsemble.abort_clients_of` so the server sees its connection go).

    Raises:
        ValueError: auth data, a default ACL or read-only mode (not modelled).
    """

    def __init__(
        self,
        ensemble: SimEnsemble,
        hosts: str = "127.0.0.1:2181",
        timeout: float = 10.0,
        client_id: tuple[int, bytes] | None = None,
        connection_retry: Any = None,
        auth_data: Iterable[tuple[str, str]] | None = None,
        default_acl: Any = None,
        randomize_hosts: bool = True,
        read_only: bool | None = None,
        *,
        name: str | None = None,
    ) -> None:
        if auth_data:
            raise ValueError("the simulated ZooKeeper does not model auth (auth_data given)")
        if default_acl:
            raise ValueError("the simulated ZooKeeper does not model ACLs (default_acl given)")
        if read_only:
            raise ValueError("the simulated ZooKeeper does not model read-only mode")
        self.ensemble = ensemble
        self.loop = ensemble.loop
        self.name = name if name is not None else ensemble.client_name("client")
        self.owner: ActorContext | None = current_actor.get()
        streams = ensemble.streams
        self._ping_rng = streams.stream(f"zk/{self.name}/ping")
        self._hosts_rng = streams.stream(f"zk/{self.name}/hosts")
        self._retry_rng = streams.stream(f"zk/{self.name}/retry")
        self.link_rng: random.Random = streams.stream(f"zk/{self.name}/link")
        self.hosts, self.chroot = parse_hosts(hosts)
        self._root = normpath(_join("/", self.chroot))
        self._addresses = [f"{h}:{p}" for h, p in self.hosts]
        self.randomize_hosts = randomize_hosts
        self._session_timeout = int(timeout * 1000)
        self._retry_policy = _retry_policy(connection_retry)
        self._handler = _Handler(self.loop)
        self._state: str = KeeperState.CLOSED
        self.state: str = KazooState.LOST
        self.state_listeners: dict[Callable[[str], Any], None] = {}
        self._child_watchers: dict[str, dict[Callable[[WatchedEvent], Any], None]] = {}
        self._data_watchers: dict[str, dict[Callable[[WatchedEvent], Any], None]] = {}
        self._queue: deque[tuple[Op, SimAsyncResult | None, Any]] = deque()
        self._pending: deque[tuple[Op, SimAsyncResult | None, int, Any]] = deque()
        self._session_id: int | None = None
        self._session_passwd = b"\x00" * 16
        if client_id:
            self._session_id = int(client_id[0])
            self._session_passwd = bytes(client_id[1])
        self.last_zxid = 0
        self.negotiated_timeout_ms: int | None = None
        """The ``time_out`` of the last Connect answer (what ``ZkClient``'s kazoo hook records)."""
        self.connection_error: BaseException | None = None
        """What ended the connection routine abnormally (kazoo's thread would have died)."""
        self._live = False
        self._stopped = True
        self._closed = False
        self._connection_stopped = True
        self._live_waiters: list[asyncio.Future[bool]] = []
        self._stop_waiters: list[asyncio.Future[bool]] = []
        self._routine: asyncio.Task[None] | None = None
        # The connection in use.
        self._channel: Channel | None = None
        self._connect_waiter: asyncio.Future[Any] | None = None
        self._serve_done: asyncio.Future[Any] | None = None
        self._sending = False
        self._xid = 0
        self._rt_ns = 0  # read_timeout
        self._ping_outstanding = False
        self._last_send_ns = 0
        self._last_activity_ns = 0
        self._dirty = False
        self._deadline_ns = 0
        self._jitter_ns = 0
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0

    # -- kazoo's public surface -------------------------------------------------

    @property
    def client_state(self) -> str:
        """The last ``KeeperState``."""
        return self._state

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        """``(session_id, password)`` while connected, else None."""
        if self._live:
            assert self._session_id is not None
            return (self._session_id, self._session_passwd)
        return None

    @property
    def connected(self) -> bool:
        """Whether the connection is established."""
        return self._live

    @property
    def callback_errors(self) -> int:
        """Exceptions raised by completion or watch callbacks (logged, as kazoo's workers do)."""
        return self._handler.errors

    def add_listener(self, listener: Callable[[str], Any]) -> None:
        """Call ``listener(KazooState)`` on each state change (synchronously; must not block)."""
        if not callable(listener):
            raise TypeError("listener must be callable")
        self.state_listeners[listener] = None

    def remove_listener(self, listener: Callable[[str], Any]) -> None:
        """Forget a listener."""
        self.state_listeners.pop(listener, None)

    def _prefix(self, path: str, trailing: bool = False) -> str:
        """:func:`prefix_root` under this client's chroot (a clean absolute path directly)."""
        if (
            len(path) > 1
            and path[0] == "/"
            and path[-1] != "/"
            and "//" not in path
            and "/." not in path
        ):
            return path if self._root == "/" else self._root + path
        return prefix_root(self.chroot, path, trailing)

    def unchroot(self, path: str) -> str:
        """Strip the chroot from a server path."""
        chroot = self.chroot
        if not chroot:
            return path
        if chroot == path:
            return "/"
        if path.startswith(chroot):
            return path[len(chroot) :]
        return path

    def start(self, timeout: float = 15) -> None:
        """kazoo's blocking ``start``: impossible on the loop's own thread.

        Raises:
            SimWouldBlock: always; await :meth:`start_async`.
        """
        raise SimWouldBlock("SimKazooClient.start() would block the sim loop: await start_async()")

    async def start_async(self, timeout: float = 15) -> None:
        """kazoo's ``start(timeout)``: connect and wait until connected (virtual time).

        Raises:
            KazooTimeoutError: not connected within ``timeout`` (the client is
                then stopped and closed).
            WriterNotClosedException: a previous routine did not stop.
        """
        if self._live:
            return
        await self._safe_close()
        self._stopped = False
        self._closed = False
        self._handler.running = True
        self._connection_stopped = False
        context = contextvars.Context() if self.owner is None else self.owner.new_context()
        self._routine = self.loop.create_task(
            self._zk_loop(), name=f"zk-{self.name}", context=context
        )
        if not await self._wait(self._live_waiters, lambda: self._live, round(timeout * _NS)):
            await self.stop_async()
            self.close()
            raise KazooTimeoutError("Connection time-out")
        if self.chroot:
            result = self.exists_async("/")
            fut: asyncio.Future[Any] = self.loop.create_future()
            result.rawlink(lambda r: _resolve(fut, r))
            await fut
            if not result.get():
                warnings.warn(
                    "No chroot path exists, the chroot path should be created before normal use.",
                    stacklevel=2,
                )

    def stop(self) -> None:
        """Begin kazoo's ``stop``: queue a ``Close`` and stop the handler (no waiting)."""
        if self._stopped:
            return
        self._stopped = True
        self._queue.append((_CLOSE_OP, None, None))
        self._flush()
        self._handler.running = False

    async def stop_async(self) -> None:
        """kazoo's ``stop``: close the session and wait for the routine to end.

        Raises:
            WriterNotClosedException: it did not end within ``max(10, timeout)`` s.
        """
        if self._stopped:
            return
        self.stop()
        await self._safe_close()

    def close(self) -> None:
        """Release the connection (after a stop).

        Raises:
            RuntimeError: the routine still runs (kazoo: "Cannot close connection
                until it is stopped").
        """
        if not self._connection_stopped:
            raise RuntimeError("Cannot close connection until it is stopped")
        self._closed = True

    # -- operations ---------------------------------------------------------------

    def exists_async(
        self, path: str, watch: Callable[[WatchedEvent], Any] | None = None
    ) -> SimAsyncResult:
        """``exists``: a ``ZnodeStat`` or None."""
        return self._read(EXISTS, path, watch)

    def get_async(
        self, path: str, watch: Callable[[WatchedEvent], Any] | None = None
    ) -> SimAsyncResult:
        """``getData``: ``(data, ZnodeStat)``."""
        return self._read(GET_DATA, path, watch)

    def get_children_async(
        self,
        path: str,
        watch: Callable[[WatchedEvent], Any] | None = None,
        include_data: bool = False,
    ) -> SimAsyncResult:
        """``getChildren``: the names, or ``(names, ZnodeStat)`` with ``include_data``."""
        if not isinstance(include_data, bool):
            raise TypeError("Invalid type for 'include_data' (bool expected)")
        return self._read(GET_CHILDREN2 if include_data else GET_CHILDREN, path, watch)

    def create_async(
        self,
        path: str,
        value: bytes | None = b"",
        acl: Any = None,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
        include_data: bool = False,
    ) -> SimAsyncResult:
        """``create``: the created path, or ``(path, ZnodeStat)`` with ``include_data``.

        Raises:
            TypeError: as kazoo, for arguments of the wrong type.
            NotImplementedError: ``acl`` or ``makepath`` (not modelled).
        """
        if not isinstance(path, str):
            raise TypeError("Invalid type for 'path' (string expected)")
        if value is not None and not isinstance(value, bytes):
            raise TypeError("Invalid type for 'value' (must be a byte string)")
        for label, flag in (
            ("ephemeral", ephemeral),
            ("sequence", sequence),
            ("makepath", makepath),
            ("include_data", include_data),
        ):
            if not isinstance(flag, bool):
                raise TypeError(f"Invalid type for '{label}' (bool expected)")
        if acl:
            raise NotImplementedError("ACLs are not modelled by the simulated ZooKeeper")
        if makepath:
            raise NotImplementedError("makepath is not modelled (ZkClient never uses it)")
        flags = (1 if ephemeral else 0) | (2 if sequence else 0)
        op = Op(
            CREATE2 if include_data else CREATE,
            self._prefix(path, sequence),
            data=value,
            flags=flags,
        )
        op.size = packet_size(op)
        outer = SimAsyncResult(self._handler)
        inner = SimAsyncResult(self._handler)
        if not self._call(op, inner):
            outer.set_exception(inner.exception or ConnectionLoss())
            return outer

        def create_completion(result: SimAsyncResult) -> None:
            try:
                got = result.get()
                value = (self.unchroot(got[0]), got[1]) if include_data else self.unchroot(got)
            except Exception as exc:
                outer.set_exception(exc)
            else:
                outer.set(value)

        inner.rawlink(create_completion)
        return outer

    def set_async(self, path: str, value: bytes | None, version: int = -1) -> SimAsyncResult:
        """``setData``: the new ``ZnodeStat``."""
        if not isinstance(path, str):
            raise TypeError("Invalid type for 'path' (string expected)")
        if value is not None and not isinstance(value, bytes):
            raise TypeError("Invalid type for 'value' (must be a byte string)")
        if not isinstance(version, int):
            raise TypeError("Invalid type for 'version' (int expected)")
        op = Op(SET_DATA, self._prefix(path), data=value, version=version)
        op.size = packet_size(op)
        result = SimAsyncResult(self._handler)
        self._call(op, result)
        return result

    def delete_async(self, path: str, version: int = -1) -> SimAsyncResult:
        """``delete``: ``True``."""
        if not isinstance(path, str):
            raise TypeError("Invalid type for 'path' (string expected)")
        if not isinstance(version, int):
            raise TypeError("Invalid type for 'version' (int expected)")
        result = SimAsyncResult(self._handler)
        self._call(Op(DELETE, self._prefix(path), version=version), result)
        return result

    def transaction(self) -> SimTransactionRequest:
        """A multi builder (kazoo's ``TransactionRequest``)."""
        return SimTransactionRequest(self)

    def _read(
        self, code: int, path: str, watch: Callable[[WatchedEvent], Any] | None
    ) -> SimAsyncResult:
        if not isinstance(path, str):
            raise TypeError("Invalid type for 'path' (string expected)")
        if watch and not callable(watch):
            raise TypeError("Invalid type for 'watch' (must be a callable)")
        result = SimAsyncResult(self._handler)
        op = Op(code, self._prefix(path), watch=bool(watch))
        self._call(op, result, watch if watch else None)
        return result

    def _call(self, op: Op, result: SimAsyncResult, watcher: Any = None) -> bool:
        """kazoo's ``_call``: refuse in a closed state, else queue (and send if connected)."""
        state = self._state
        if state == KeeperState.AUTH_FAILED:
            result.set_exception(AuthFailedError())
            return False
        if state == KeeperState.CLOSED:
            result.set_exception(ConnectionClosedError("Connection has been closed"))
            return False
        if state == KeeperState.EXPIRED_SESSION:
            result.set_exception(SessionExpiredError())
            return False
        self._queue.append((op, result, watcher))
        if self._closed:
            result.set_exception(ConnectionClosedError("Connection has been closed"))
        self._flush()
        return True

    # -- states -------------------------------------------------------------------

    def _make_state_change(self, state: str) -> None:
        if self.state == state:
            return
        self.state = state
        for listener in list(self.state_listeners):
            try:
                if listener(state) is True:
                    self.remove_listener(listener)
            except Exception:
                log.exception("Error in connection state listener")

    def _session_callback(self, state: str) -> None:
        if state == self._state:
            return
        closed_state = self._state in _CLOSED_STATES
        self._state = state
        if closed_state and state == KeeperState.CONNECTING:
            return  # "Skipping state change"
        if state in (KeeperState.CONNECTED, KeeperState.CONNECTED_RO):
            self._live = True
            self._wake(self._live_waiters, True)
            self._make_state_change(KazooState.CONNECTED)
        elif state in _CLOSED_STATES:
            self._live = False
            self._make_state_change(KazooState.LOST)
            self._notify_pending(state)
            self._reset()
        else:
            self._live = False
            self._notify_pending(state)
            self._make_state_change(KazooState.SUSPENDED)
            self._reset_watchers()

    def _notify_pending(self, state: str) -> None:
        exc: BaseException
        if state == KeeperState.AUTH_FAILED:
            exc = AuthFailedError()
        elif state == KeeperState.EXPIRED_SESSION:
            exc = SessionExpiredError()
        else:
            exc = ConnectionLoss()
        while self._pending:
            _, result, _, _ = self._pending.popleft()
            if result is not None:
                result.set_exception(exc)
        while self._queue:
            _, queued, _ = self._queue.popleft()
            if queued is not None:
                queued.set_exception(exc)

    def _reset(self) -> None:
        self._queue = deque()
        self._pending = deque()
        self._reset_watchers()
        self._session_id = None
        self._session_passwd = b"\x00" * 16
        self.last_zxid = 0

    def _reset_watchers(self) -> None:
        watchers = [w for ws in self._child_watchers.values() for w in ws]
        watchers += [w for ws in self._data_watchers.values() for w in ws]
        self._child_watchers = {}
        self._data_watchers = {}
        event = WatchedEvent(EventType.NONE, self._state, None)
        for watch in watchers:
            self._handler.callback(watch, event)

    # -- the connection routine (kazoo's connection thread) ---------------------

    async def _zk_loop(self) -> None:
        retry = _Retry(self, self._retry_policy)
        try:
            try:
                while not self._stopped:
                    if await retry(self._connect_loop) is _STOP:
                        break
            except _RetryFailed:
                log.warning(
                    "%s: Failed connecting to Zookeeper within the connection retry policy.",
                    self.name,
                )
            finally:
                self._connection_stopped = True
                self._session_callback(KeeperState.CLOSED)
                self._wake(self._stop_waiters, True)
        except Exception as exc:  # kazoo's thread would die here; keep it for inspection
            self.connection_error = exc

    async def _connect_loop(self, retry: _Retry) -> Any:
        addresses = [a for a in self._addresses if self.ensemble.resolves(a)]
        if self.randomize_hosts:
            self._hosts_rng.shuffle(addresses)
        if not addresses:
            raise _ForceRetry("No host resolved. Reconnecting")
        status: Any = None
        for address in addresses:
            if self._stopped:
                status = _STOP
                break
            status = await self._connect_attempt(address, retry)
            if status is _STOP:
                break
        if status is _STOP:
            return _STOP
        raise _ForceRetry("Reconnecting")

    async def _connect_attempt(self, address: str, retry: _Retry) -> Any:
        if self._state != KeeperState.CONNECTING:
            self._session_callback(KeeperState.CONNECTING)
        channel: Channel | None = None
        try:
            self._xid = 0
            channel = self.ensemble.open_channel(address, self)
            await self._connect(channel)
            retry.reset()
            await self._serve(channel)
            self._session_callback(KeeperState.CLOSED)
            return _STOP
        except (ConnectionDropped, KazooTimeoutError) as exc:
            log.debug("%s: connection to %s ended: %r", self.name, address, exc)
            if self._state != KeeperState.CONNECTING:
                self._session_callback(KeeperState.CONNECTING)
        except SessionExpiredError:
            retry.reset()
            log.debug("%s: session has expired", self.name)
            self._session_callback(KeeperState.EXPIRED_SESSION)
        except Exception:
            log.exception("Unhandled exception in connection loop")
            raise
        finally:
            if channel is not None:
                if self._channel is channel:
                    self._channel = None
                channel.close_by_client()
        return None

    async def _connect(self, channel: Channel) -> None:
        """Send Connect and read the answer (kazoo's ``_connect``)."""
        self._channel = channel
        fut: asyncio.Future[Any] = self.loop.create_future()
        self._connect_waiter = fut
        channel.to_server(
            ConnectRequest(
                self.last_zxid, self._session_timeout, self._session_id or 0, self._session_passwd
            )
        )
        timer = self.loop.call_later_ns(
            self._session_timeout * _MS // len(self.hosts), _resolve, fut, _TIMEOUT
        )
        try:
            answer = await fut
        finally:
            timer.cancel()
            self._connect_waiter = None
        if answer is _TIMEOUT:
            raise KazooTimeoutError("socket time-out during read")
        if isinstance(answer, BaseException):
            raise answer
        assert isinstance(answer, ConnectResponse)
        self.negotiated_timeout_ms = answer.time_out
        if answer.time_out <= 0:
            raise SessionExpiredError("Session has expired")
        self._session_id = answer.session_id
        self._session_passwd = answer.password
        self._rt_ns = answer.time_out * 2 * _MS // 3
        self._session_callback(KeeperState.CONNECTED)

    async def _serve(self, channel: Channel) -> None:
        """The connected select loop: ends with the Close reply, or raises ConnectionDropped."""
        fut: asyncio.Future[Any] = self.loop.create_future()
        self._serve_done = fut
        now = self.loop.now_ns
        self._ping_outstanding = False
        self._last_send_ns = now
        self._last_activity_ns = now
        self._sending = True
        self._arm(now)
        self._flush()
        try:
            outcome = await fut
        finally:
            self._serve_done = None
            self._sending = False
            self._cancel_timer()
        if isinstance(outcome, BaseException):
            raise outcome

    def _end_serve(self, outcome: Any) -> None:
        fut = self._serve_done
        if fut is None or fut.done():
            return
        self._sending = False
        self._cancel_timer()
        fut.set_result(outcome)

    # -- ping timing ----------------------------------------------------------------

    def _arm(self, start_ns: int) -> None:
        """Begin an idle wait (a select) at ``start_ns`` with a fresh jitter."""
        jitter = self._ping_rng.randint(1, 40) * 10 * _MS
        self._jitter_ns = jitter
        self._deadline_ns = self._last_send_ns + self._rt_ns // 2 - jitter
        self._dirty = False
        self._schedule(max(self._deadline_ns, start_ns + jitter))

    def _schedule(self, at_ns: int) -> None:
        if self._timer is not None:
            if self._timer_at == at_ns:
                return
            self._timer.cancel()
        self._timer_at = at_ns
        self._timer = self.loop.call_at_ns(at_ns, self._on_timer)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _on_timer(self) -> None:
        self._timer = None
        if self._serve_done is None or self._serve_done.done():
            return
        now = self.loop.now_ns
        if self._dirty:
            # The select woke meanwhile: kazoo began a new wait at the last activity.
            self._arm(self._last_activity_ns)
            if self._timer_at > now:
                return
            self._cancel_timer()
        if self._ping_outstanding:
            self._end_serve(ConnectionDropped("outstanding heartbeat ping not received"))
            return
        if now >= self._deadline_ns:
            self._send_ping()
        self._arm(now)

    def _send_ping(self) -> None:
        channel = self._channel
        if channel is None:
            return
        self._ping_outstanding = True
        channel.to_server(Request(PING_XID, _PING_OP))
        self._sent(self.loop.now_ns)

    def _sent(self, now: int) -> None:
        """Something went out: the ping deadline moves (same jitter until the next wait)."""
        self._last_send_ns = now
        self._deadline_ns = now + self._rt_ns // 2 - self._jitter_ns

    # -- sending and receiving ----------------------------------------------------------

    def _flush(self) -> None:
        """Send what is queued (the connection thread's ``_send_request``), once connected."""
        if not self._sending:
            return
        channel = self._channel
        assert channel is not None
        queue = self._queue
        pending = self._pending
        if not queue:
            return
        while queue:
            op, result, watcher = queue.popleft()
            xid = self._xid % _XID_WRAP + 1
            self._xid = xid
            pending.append((op, result, xid, watcher))
            channel.to_server(Request(xid, op))
        now = self.loop.now_ns  # requests act as pings
        self._sent(now)
        self._last_activity_ns = now
        self._dirty = True

    def _on_packet(self, channel: Channel, message: Any) -> None:
        """A packet from the server (run by the channel's down link, in the owner's context)."""
        if channel is not self._channel:
            return
        kind = type(message)
        if kind is ConnectResponse:
            waiter = self._connect_waiter
            if waiter is not None:
                _resolve(waiter, message)
            return
        serve = self._serve_done
        if serve is None or serve.done():
            return
        now = self.loop.now_ns
        self._dirty = True
        self._last_activity_ns = now
        if kind is Reply:
            if message.xid == PING_XID:
                self._ping_outstanding = False
            elif self._read_response(message):
                return
        elif kind is Notification:
            self._read_watch_event(message)
        if now >= self._deadline_ns and not serve.done():
            self._send_ping()
            self._arm(now)  # kazoo's next select starts now

    def _on_eof(self, channel: Channel) -> None:
        """The server (or the proxy) closed the connection."""
        if channel is not self._channel:
            return
        waiter = self._connect_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(ConnectionDropped("socket connection broken"))
            return
        self._end_serve(ConnectionDropped("socket connection broken"))

    def _read_response(self, reply: Reply) -> bool:
        """kazoo's ``_read_response`` as ``JavaXidConnectionHandler`` has it; True: it ended.

        A reply that is not for the oldest pending request (or with nothing
        pending) fails that request with ``ConnectionLoss`` and drops the
        connection, its zxid not taken (``zk_registry.connection``).
        """
        if not self._pending:
            self._end_serve(ConnectionDropped(f"nothing pending, but got xid {reply.xid!r}"))
            return True
        op, result, xid, watcher = self._pending.popleft()
        if reply.xid != xid:
            if result is not None:
                result.set_exception(ConnectionLoss())
            self._end_serve(
                ConnectionDropped(f"xids do not match, expected {xid!r} received {reply.xid!r}")
            )
            return True
        if reply.zxid > 0:
            self.last_zxid = reply.zxid
        err = reply.err
        exists_error = err is NoNodeError and op.code == EXISTS
        if err is not None and not exists_error:
            if result is not None:
                result.set_exception(err())
        elif result is not None:
            if exists_error:
                result.set(None)
            elif op.code == MULTI:
                result.set(
                    [self.unchroot(r) if isinstance(r, str) else _fresh(r) for r in reply.value]
                )
            else:
                result.set(reply.value)
            if watcher is not None and not self._stopped:
                table = (
                    self._child_watchers
                    if op.code in (GET_CHILDREN, GET_CHILDREN2)
                    else self._data_watchers
                )
                watchers = table.get(op.path)
                if watchers is None:
                    table[op.path] = {watcher: None}
                else:
                    watchers[watcher] = None
        if op.code == CLOSE:
            self._end_serve(_CLOSE_RESPONSE)
            return True
        return False

    def _read_watch_event(self, note: Notification) -> None:
        path = note.path
        kind = note.type
        if kind == EventType.CREATED or kind == EventType.CHANGED:
            watchers = list(self._data_watchers.pop(path, ()))
        elif kind == EventType.DELETED:
            watchers = list(self._data_watchers.pop(path, ()))
            watchers += list(self._child_watchers.pop(path, ()))
        elif kind == EventType.CHILD:
            watchers = list(self._child_watchers.pop(path, ()))
        else:
            return
        event = WatchedEvent(kind, self._state, self.unchroot(path))
        if self._stopped:
            return
        for watch in watchers:
            self._handler.callback(watch, event)

    # -- waiting ---------------------------------------------------------------------

    async def _sleep_ns(self, delay_ns: int) -> None:
        fut: asyncio.Future[None] = self.loop.create_future()
        self.loop.call_later_ns(delay_ns, _resolve, fut, None)
        await fut

    async def _wait(
        self, waiters: list[asyncio.Future[bool]], ready: Callable[[], bool], timeout_ns: int
    ) -> bool:
        if ready():
            return True
        fut: asyncio.Future[bool] = self.loop.create_future()
        waiters.append(fut)
        timer = self.loop.call_later_ns(timeout_ns, _resolve, fut, False)
        try:
            await fut
        finally:
            timer.cancel()
            if fut in waiters:
                waiters.remove(fut)
        return ready()

    @staticmethod
    def _wake(waiters: list[asyncio.Future[bool]], value: bool) -> None:
        for fut in list(waiters):
            _resolve(fut, value)

    async def _safe_close(self) -> None:
        """Stop the handler; wait for the routine to end (kazoo's ``_safe_close``)."""
        self._handler.running = False
        if self._connection_stopped:
            return
        timeout_s = max(10, self._session_timeout // 1000)
        if not await self._wait(
            self._stop_waiters, lambda: self._connection_stopped, timeout_s * _NS
        ):
            raise WriterNotClosedException(
                "Writer still open from prior connection and wouldn't close "
                f"after {timeout_s} seconds"
            )

    def __repr__(self) -> str:
        return f"SimKazooClient({self.name}, {self._state}, session={self._session_id!r})"


class SimTransactionRequest:
    """kazoo's ``TransactionRequest``: ops committed as one multi (all or nothing)."""

    def __init__(self, client: SimKazooClient) -> None:
        self.client = client
        self.operations: list[Op] = []
        self.committed = False

    def create(
        self,
        path: str,
        value: bytes = b"",
        acl: Any = None,
        ephemeral: bool = False,
        sequence: bool = False,
    ) -> None:
        """Add a create (no ``makepath``)."""
        if not isinstance(path, str):
            raise TypeError("Invalid type for 'path' (string expected)")
        if not isinstance(value, bytes):
            raise TypeError("Invalid type for 'value' (must be a byte string)")
        if not isinstance(ephemeral, bool):
            raise TypeError("Invalid type for 'ephemeral' (bool expected)")
        if not isinstance(sequence, bool):
            raise TypeError("Invalid type for 'sequence' (bool expected)")
        if acl:
            raise NotImplementedError("ACLs are not modelled by the simulated ZooKeeper")
        flags = (1 if ephemeral else 0) | (2 if sequence else 0)
        self._add(Op(CREATE, self.client._prefix(path), data=value, flags=flags))

    def delete(self, path: str, version: int = -1) -> None:
        """Add a delete."""
        self._check_path_version(path, version)
        self._add(Op(DELETE, self.client._prefix(path), version=version))

    def set_data(self, path: str, value: bytes, version: int = -1) -> None:
        """Add a setData."""
        if not isinstance(value, bytes):
            raise TypeError("Invalid type for 'value' (must be a byte string)")
        self._check_path_version(path, version)
        op = Op(SET_DATA, self.client._prefix(path), data=value, version=version)
        self._add(op)

    def check(self, path: str, version: int) -> None:
        """Add a version check."""
        self._check_path_version(path, version)
        self._add(Op(CHECK, self.client._prefix(path), version=version))

    def commit_async(self) -> SimAsyncResult:
        """Send the multi; the result is the per-op result list.

        Raises:
            ValueError: already committed.
        """
        self._check_tx_state()
        self.committed = True
        op = Op(MULTI, ops=tuple(self.operations))
        op.size = packet_size(op)
        result = SimAsyncResult(self.client._handler)
        self.client._call(op, result)
        return result

    def commit(self) -> Any:
        """``commit_async().get()`` (raises :class:`SimWouldBlock` on the sim loop)."""
        return self.commit_async().get()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if not exc_type:
            self.commit()

    @staticmethod
    def _check_path_version(path: object, version: object) -> None:
        if not isinstance(path, str):
            raise TypeError("Invalid type for 'path' (string expected)")
        if not isinstance(version, int):
            raise TypeError("Invalid type for 'version' (int expected)")

    def _check_tx_state(self) -> None:
        if self.committed:
            raise ValueError("Transaction already committed")

    def _add(self, op: Op) -> None:
        self._check_tx_state()
        self.operations.append(op)
