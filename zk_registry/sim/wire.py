"""The wire between a simulated kazoo client and a simulated ZooKeeper member.

One :class:`Channel` is one TCP connection: a client (:class:`ClientEnd`, the
``SimKazooClient``) on one side, a member of the ``SimEnsemble``
(:class:`ServerEnd`) on the other, optionally through a ``SimZkLink`` (the
fault proxy's stand-in). Each direction is an :class:`emulator.sim.network.Link`
(drawn one-way latency, FIFO, PASS/BLACKHOLE), so a connection keeps TCP's
order: responses and watch notifications reach the client in the order the
server sent them (design §3.4).

A connection ends by a close of one side (FIN or RST, the difference does not
matter to kazoo or ZooKeeper): the other side learns it after one one-way
latency and after everything sent before it (FIFO), *whatever the link's mode*:
a blackholing proxy drops bytes but still closes the other socket when one
side closes (``zk_registry/proxy.py`` ``_pipe``: EOF on one side aborts both
writers). A proxy going ``DOWN`` resets both sides at once and loses what is in
flight (:meth:`Channel.reset`).

The messages are small value objects, not bytes; :func:`packet_size` gives the
jute length kazoo would write for a request, which the server checks against
``jute.maxbuffer`` (a longer packet makes the server close the connection:
``NIOServerCnxn.readLength``, ZK@3.8.0).
"""

from __future__ import annotations

import contextvars
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from kazoo.exceptions import ZookeeperError

from emulator.sim.loop import ActorContext, SimEventLoop
from emulator.sim.network import LatencyModel, Link, LinkMode, UniformLatency

__all__ = [
    "CHECK",
    "CLOSE",
    "CREATE",
    "CREATE2",
    "DELETE",
    "EXISTS",
    "GET_CHILDREN",
    "GET_CHILDREN2",
    "GET_DATA",
    "MAX_BUFFER",
    "MULTI",
    "PING",
    "PING_XID",
    "SET_DATA",
    "WATCH_XID",
    "WRITE_CODES",
    "ZK_LINK_LATENCY",
    "Channel",
    "ChannelLatency",
    "ClientEnd",
    "ConnectRequest",
    "ConnectResponse",
    "Endpoint",
    "Notification",
    "Op",
    "Proxy",
    "Reply",
    "Request",
    "ServerEnd",
    "packet_size",
]

# Request types, as kazoo's protocol/serialization.py numbers them (ZooDefs.OpCode).
CREATE = 1
DELETE = 2
EXISTS = 3
GET_DATA = 4
SET_DATA = 5
GET_CHILDREN = 8
PING = 11
GET_CHILDREN2 = 12
CHECK = 13
MULTI = 14
CREATE2 = 15
CLOSE = -11

WRITE_CODES = frozenset({CREATE, CREATE2, DELETE, SET_DATA, MULTI, CLOSE})
"""Requests that are txns (go through the leader's commit); the rest are reads."""

PING_XID = -2
"""The xid of pings and their replies."""
WATCH_XID = -1
"""The xid of a watch notification."""

MAX_BUFFER = 0xFFFFF
"""``jute.maxbuffer``'s default (1 MiB - 1): the longest packet a server reads."""

ZK_LINK_LATENCY = UniformLatency(200_000, 800_000)
"""Baseline one-way latency client <-> member: [0.2, 0.8] ms, a round trip of 0.4-1.6 ms.

It stands for everything between a ``ZkClient`` call and the server and back as
the real engine sees it: kazoo's connection and completion threads, the hand-over
to the asyncio loop, the JVM's request pipeline, loopback TCP. The design's guess
was [0.05, 0.25] ms (a loopback hop). Measured: kazoo's synchronous calls run at
~1-3k ops/s from one process (0.3-1 ms a round trip, environment notes); in the
conformance suite's real runs a ``ZkWatch`` re-arm (exists + getChildren after
a watch event) took 0.4-10 ms, median ~1.6 ms, on the 2-core machine with a
benchmark running (the sim gave 0.1-0.6 ms).
"""

_OPEN_ACL_LEN = 4 + 4 + (4 + len("world")) + (4 + len("anyone"))
"""Jute length of ``OPEN_ACL_UNSAFE``: count, perms, scheme, id."""


@dataclass(slots=True)
class Op:
    """One request's content (kazoo's request namedtuples, flattened).

    Attributes:
        code: the request type (:data:`CREATE`, ...).
        path: the server path (the chroot already prefixed).
        watch: the watch flag of a read (the callable stays with the client).
        data: the data of a create or setData (``None`` for null data).
        version: the expected version of a delete, setData or check.
        flags: create flags: 1 ephemeral, 2 sequential.
        ops: a multi's operations.
        size: the jute packet length (xid, type and body), for ``jute.maxbuffer``.
    """

    code: int
    path: str = ""
    watch: bool = False
    data: bytes | None = None
    version: int = -1
    flags: int = 0
    ops: tuple[Op, ...] = ()
    size: int = 0


def _string_len(text: str) -> int:
    return 4 + len(text.encode()) if text else 4


def _buffer_len(data: bytes | None) -> int:
    return 4 + (0 if data is None else len(data))


def _body_len(op: Op) -> int:
    code = op.code
    if code in (CREATE, CREATE2):
        return _string_len(op.path) + _buffer_len(op.data) + _OPEN_ACL_LEN + 4
    if code == SET_DATA:
        return _string_len(op.path) + _buffer_len(op.data) + 4
    if code in (DELETE, CHECK):
        return _string_len(op.path) + 4
    if code == MULTI:
        return sum(9 + _body_len(o) for o in op.ops) + 9
    if code in (PING, CLOSE):
        return 0
    return _string_len(op.path) + 1  # reads: path and the watch flag


def packet_size(op: Op) -> int:
    """The length kazoo writes before a request: xid, type and the serialized body."""
    return 8 + _body_len(op)


@dataclass(frozen=True, slots=True)
class ConnectRequest:
    """kazoo's ``Connect``: the first packet of a connection."""

    last_zxid: int
    timeout_ms: int
    session_id: int
    password: bytes


@dataclass(frozen=True, slots=True)
class ConnectResponse:
    """The server's answer; ``time_out <= 0`` means the session is expired (or unknown)."""

    time_out: int
    session_id: int
    password: bytes


@dataclass(frozen=True, slots=True)
class Request:
    """A request with its xid (:data:`PING_XID` for a ping)."""

    xid: int
    op: Op


@dataclass(frozen=True, slots=True)
class Reply:
    """A reply: the request's xid, the header zxid, the error class or the value.

    ``value`` is what kazoo's deserializer returns: ``(data, stat)``, a list of
    names, ``(names, stat)``, a stat, a created path, ``(path, stat)``, ``True``,
    a multi's result list, or ``None``.
    """

    xid: int
    zxid: int
    err: type[ZookeeperError] | None
    value: Any


@dataclass(frozen=True, slots=True)
class Notification:
    """A watch notification (xid :data:`WATCH_XID`): kazoo ``EventType`` and server path."""

    type: str
    path: str


class ClientEnd(Protocol):
    """The client side of a channel (``SimKazooClient``)."""

    @property
    def name(self) -> str:
        """The client's name (its streams are ``zk/<name>/...``)."""
        ...

    @property
    def owner(self) -> ActorContext | None:
        """The actor the client belongs to; deliveries to it run in its context."""
        ...

    @property
    def link_rng(self) -> random.Random:
        """The stream the channel's latencies are drawn from (``zk/<name>/link``)."""
        ...

    def _on_packet(self, channel: Channel, message: Any) -> None: ...

    def _on_eof(self, channel: Channel) -> None: ...


class ServerEnd(Protocol):
    """The server side of a channel (``SimEnsemble``)."""

    def _on_packet(self, channel: Channel, message: Any) -> None: ...

    def _on_eof(self, channel: Channel) -> None: ...


class Proxy(Protocol):
    """What a channel needs of the proxy it goes through (``SimZkLink``)."""

    @property
    def latency_s(self) -> float:
        """One-way delay added to every message, now."""
        ...

    @property
    def blackholed(self) -> bool:
        """Whether bytes are dropped now."""
        ...


Endpoint = Callable[[ClientEnd], "Channel"]
"""What an address leads to: given the connecting client, the new channel."""


class ChannelLatency:
    """A channel's one-way latency: the base draw plus the proxy's ``latency_s`` now.

    Args:
        base: the base model (baseline :data:`ZK_LINK_LATENCY`).
        via: the proxy the channel goes through, if any.
    """

    __slots__ = ("base", "via")

    def __init__(self, base: LatencyModel, via: Proxy | None) -> None:
        self.base = base
        self.via = via

    def __call__(self, rng: random.Random) -> int:
        """One draw, in ns."""
        extra = 0 if self.via is None else round(self.via.latency_s * 1_000_000_000)
        return self.base(rng) + extra


@dataclass(eq=False, slots=True)
class Channel:
    """One connection between a client and a member (through a proxy or not).

    The client writes with :meth:`to_server`, the server with :meth:`to_client`;
    each side closes with :meth:`close_by_client` / :meth:`close_by_server`. A
    message written by a side that has closed is not sent; a message arriving
    at a side that has closed is ignored by that side (it checks
    :attr:`client_open` / :attr:`server_open`).

    The server keeps its per-connection state here: the member, the session,
    the negotiated timeout and the connection's watches.
    """

    loop: SimEventLoop
    client: ClientEnd
    server: ServerEnd
    up: Link
    down: Link
    via: Proxy | None = None
    member: int | None = None
    client_open: bool = True
    server_open: bool = True
    session: Any = None
    timeout_ms: int = 0
    data_watches: set[str] = field(default_factory=set)
    child_watches: set[str] = field(default_factory=set)
    _up_last_ns: int = 0
    _down_last_ns: int = 0

    def to_server(self, message: Any) -> None:
        """Client -> server (dropped once the client closed)."""
        if self.client_open:
            at = self.up.send(self.server._on_packet, self, message)
            if at is not None:
                self._up_last_ns = at

    def to_client(self, message: Any) -> None:
        """Server -> client, in send order (dropped once the server closed)."""
        if self.server_open:
            at = self.down.send(self.client._on_packet, self, message)
            if at is not None:
                self._down_last_ns = at

    def set_mode(self, mode: LinkMode) -> None:
        """Put both directions in ``mode`` (PASS or BLACKHOLE)."""
        self.up.set_mode(mode)
        self.down.set_mode(mode)

    def close_by_server(self) -> None:
        """The server closes: the client sees EOF after what was sent before."""
        if not self.server_open:
            return
        self.server_open = False
        if self.client_open:
            at = max(self.loop.now_ns + self.down.latency(self.down.rng), self._down_last_ns)
            self.loop.call_at_ns(at, self._client_eof, context=self._client_context())

    def close_by_client(self) -> None:
        """The client closes: the server sees EOF after what was sent before."""
        if not self.client_open:
            return
        self.client_open = False
        if self.server_open:
            at = max(self.loop.now_ns + self.up.latency(self.up.rng), self._up_last_ns)
            self.loop.call_at_ns(at, self._server_eof, context=contextvars.Context())

    def reset(self, base: LatencyModel) -> None:
        """Both sockets aborted (a proxy going DOWN): what is in flight is lost.

        The server side is closed at once (the caller does the server's own
        bookkeeping); the client sees EOF after a ``base`` one-way draw.
        """
        self.set_mode(LinkMode.BLACKHOLE)  # in-flight messages are dropped on arrival
        self.server_open = False
        if self.client_open:
            at = self.loop.now_ns + base(self.down.rng)
            self.loop.call_at_ns(at, self._client_eof, context=self._client_context())

    def _client_context(self) -> contextvars.Context:
        owner = self.client.owner
        return contextvars.Context() if owner is None else owner.new_context()

    def _client_eof(self) -> None:
        if self.client_open:
            self.client_open = False
            self.client._on_eof(self)

    def _server_eof(self) -> None:
        self.server._on_eof(self)
