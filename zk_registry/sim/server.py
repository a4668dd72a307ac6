"""``SimEnsemble``: a simulated ZooKeeper 3.8.0 standalone server or ensemble.

The server layers on top of :mod:`zk_registry.sim.tree` (issue-18 design §3.3-§3.7):
members and their roles, sessions and their expiry, connections and their
watches, the request pipeline, and the surface of
:class:`zk_registry.server.ZooKeeperEnsemble` that the orchestrator and the
timeline use. Everything runs on the :class:`~emulator.sim.loop.SimEventLoop`
it is given, schedules through the loop and :mod:`emulator.sim.network` links
only, and draws from named streams of :class:`~emulator.sim.rng.Streams`:
``zk/ensemble/commit`` (quorum round trips), ``zk/ensemble/election``
(election durations and quorum-loss detection), ``zk/ensemble/start``
(member start-up) and ``zk/ensemble/clock`` (the phase of the expiry
buckets). Clients (:class:`~zk_registry.sim.client.SimKazooClient`) connect
through :class:`~zk_registry.sim.wire.Channel` s.

Sources: ``ZK@3.8.0`` is apache/zookeeper at ``release-3.8.0-1``, ``S =
zookeeper-server/src/main/java/org/apache/zookeeper/server``.

* **Session ids and passwords.** A member allocates ids from
  ``SessionTrackerImpl.initializeNextSessionId(myid)`` = ``(myid << 56) |
  ((elapsed_ms << 24) >>> 8)``, then counts up; a follower allocates its own
  clients' ids too (``quorum/LearnerSessionTracker.createSession`` with local
  sessions off), so an id names the member a session was created on. The
  tracker is rebuilt each time a member starts serving (a new
  ``ZooKeeperServer`` per epoch). ``elapsed_ms`` is virtual time here. The
  password is ``new Random(id ^ 0xB3415C00L).nextBytes(16)``
  (``ZooKeeperServer.generatePasswd``): :func:`session_password`.
* **Negotiation** (``ZooKeeperServer.processConnectRequest``): the requested
  timeout is clamped to ``[min, max]``, by default ``[2, 20] x tickTime``. A
  Connect with a session id first closes that session's other connections on
  the same member (``CLIENT_RECONNECT``), then checks the password and that the
  session is alive and not closing; a failure is answered with ``timeOut = 0``
  and the connection closed (``finishSessionInit(cnxn, false)``), which kazoo
  reports as an expired session. A new session is a ``createSession`` txn: its
  Connect is answered when it commits.
* **Expiry** (``SessionTrackerImpl`` + ``ExpiryQueue``): every packet from a
  client touches its session: its expiry moves to the bucket
  ``roundToNextInterval(now + timeout) = ((now + timeout) // tick + 1) * tick``,
  where ``now`` is ``Time.currentElapsedTime()`` (``System.nanoTime`` in ms:
  an origin unrelated to anything a client does, one per machine), so the
  bucket grid sits at a drawn phase in ``[0, tick)`` of virtual time
  (``zk/ensemble/clock``; the conformance recordings show the spread: an
  expiry 984-1360 ms after a 1200 ms session was cut off, script 17); the
  tracker expires a whole bucket when its time comes (sessions of a bucket
  in id order here; ZooKeeper's order is a hash set's). Expiry marks the
  session closing (touches fail, reconnects are refused) and submits a
  ``closeSession`` txn: at its commit the session's ephemerals are deleted
  (watches fire) and its connections closed (``FinalRequestProcessor``:
  ``connClosedByClient`` is ``request.cnxn == null``). A client's own ``Close``
  is the same txn through its session's pipeline, answered before its
  connection is closed. Touches are taken at once on whichever member the
  client is connected to (followers really batch them to the leader every
  half tick: not modelled).
* **Watches** (``WatchManager``, ``DataTree``): per connection, in two tables
  as ``DataTree`` keeps them: ``getData`` and ``exists`` set data watches
  (``exists`` even on a missing node, after the NUL check: an "exist watch" is
  a data watch on the server), ``getChildren`` child watches, a failed ``getData``/``getChildren``
  none. A change notifies each watching connection once per (path, event) and
  forgets the watch: create -> ``NodeCreated`` (data watches) and
  ``NodeChildrenChanged`` on the parent (child watches); setData ->
  ``NodeDataChanged``; delete -> ``NodeDeleted`` to data watches, then to child
  watches of connections not already notified, then the parent's
  ``NodeChildrenChanged``. A closed connection loses its watches.
* **Pipeline** (``CommitProcessor``): a session's requests are answered in
  order; a read waits behind the session's earlier writes and is then served
  from the committed tree (no follower lag is modelled); a write is proposed at
  once and commits after a drawn quorum round trip (0 for a standalone server),
  commits keep proposal order, and at a commit the notifications go to every
  watching connection *before* the write's own reply and any later reply
  (design §3.4). While the leader has no quorum (a follower died, the leader
  has not stepped down yet) proposals wait for one and commit in order if it
  comes back; proposals of a leader that is gone are lost with it (their
  connections were closed when the members stopped serving).
* **Packet size**: a request longer than ``jute.maxbuffer`` (0xfffff) makes the
  server close the connection without reading it (``NIOServerCnxn.readLength``).
* **Ensemble** (a model, design §3.7): one committed tree. ``kill_member`` closes
  the member's connections at once. Losing the leader stops every member
  serving (followers drop their clients) and starts an election of drawn
  duration (:data:`ELECTION_DELAY`) among the started members when a quorum is
  left: the new leader is
  the one with the highest myid (FastLeaderElection's tie-break; every member
  has the same zxid in this model), the zxid epoch moves up by one, and every
  session's expiry restarts from the election's end (the new leader's tracker
  adds every session with a fresh timeout). Losing a follower below quorum
  makes the leader step down at its next half-tick check (a drawn delay in
  ``[0, tick/2]``). Without quorum nothing serves, so clients stay
  SUSPENDED and no session expires. ``restart_member`` brings a member back
  after a drawn start-up delay (:data:`MEMBER_START_DELAY`, measured), as a
  follower if there is a leader, else into an election that it completes
  (:data:`JOIN_ELECTION_DELAY`) once a quorum has started. The delays are
  calibrated on the conformance suite's real runs (scripts 24, 25).
  ``start()`` makes every member serve at once (the highest myid
  leads, epoch 1; a standalone server uses epoch 0 throughout).

Sync and async: ``kill_member``, ``stop_member``, ``restart_member(wait=False)``,
``expire_session`` and ``start`` act at once and never wait.
``wait_ready``/``restart_member(wait=True)`` run the loop until the members
serve when called from outside it (the orchestrator's driver code), and raise
:class:`SimZkError` when called from inside the running loop; code on the loop
awaits :meth:`SimEnsemble.wait_ready_async` instead.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Self

from kazoo.exceptions import NoNodeError, UnimplementedError, ZookeeperError
from kazoo.protocol.states import EventType

from emulator.sim.clocks import SIM_EPOCH_MS
from emulator.sim.loop import ActorContext, SimEventLoop
from emulator.sim.network import LatencyModel, Link, LinkMode, UniformLatency
from emulator.sim.rng import PPM, QuantileTable, Streams, uniform_ns
from zk_registry.sim.tree import (
    ChangeKind,
    CheckOp,
    CreateOp,
    DataTree,
    DeleteOp,
    MultiOp,
    SetDataOp,
)
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
    MAX_BUFFER,
    MULTI,
    PING,
    SET_DATA,
    WRITE_CODES,
    ZK_LINK_LATENCY,
    Channel,
    ChannelLatency,
    ClientEnd,
    ConnectRequest,
    ConnectResponse,
    Endpoint,
    Notification,
    Op,
    Proxy,
    Reply,
    Request,
)
from zk_registry.timeouts import negotiated_session_timeout_ms

if TYPE_CHECKING:
    from zk_registry.sim.client import SimKazooClient

__all__ = [
    "COMMIT_LATENCY",
    "DEFAULT_TICK_TIME_MS",
    "ELECTION_DELAY",
    "JOIN_ELECTION_DELAY",
    "MEMBER_START_DELAY",
    "START_DELAY",
    "SimEnsemble",
    "SimMemberStatus",
    "SimZkError",
    "SimZkStartError",
    "initial_session_id",
    "java_random_bytes",
    "session_password",
]

DEFAULT_TICK_TIME_MS = 2000
"""ZooKeeper's default tickTime (as :data:`zk_registry.server.DEFAULT_TICK_TIME_MS`)."""
DEFAULT_STARTUP_TIMEOUT_S = 60.0
"""Bound of :meth:`SimEnsemble.wait_ready` (virtual seconds), as the real ensemble's."""

COMMIT_LATENCY = UniformLatency(200_000, 1_000_000)
"""A write's quorum round trip in a 3/5-member ensemble: [0.2, 1.0] ms (design §4.3)."""
ELECTION_DELAY = UniformLatency(400_000_000, 750_000_000)
"""From losing the leader (with a quorum left) to serving again: [0.4, 0.75] s.

Calibrated on the conformance suite's real runs (script 24, six runs of ZooKeeper
3.8.0, loopback, tickTime 200 ms): after the leader was killed both clients
reconnected on kazoo's fourth back-off attempt every time (739-828 ms after the
wait began), never on the third (~0.37 s after the drop), so each election
ended between ~0.4 and ~0.77 s after the kill.
"""
JOIN_ELECTION_DELAY = UniformLatency(0, 200_000_000)
"""An election completed by a member that (re)starts when the started members
make a quorum again: [0, 0.2] s after its start-up (:data:`MEMBER_START_DELAY`).

``FastLeaderElection.finalizeWait`` is 200 ms, but the start-up table already
counts a follower's own sync with its leader, which this path does too. The six
real runs of script 25 (quorum restored by restarting member 2) had the first
client back 1.47-2.54 s after the restart (mean 1.85 s) with kazoo retrying about
once a second: serving came ~1.35 s after the restart on average, no later than
a rejoining follower (mean 1.63 s), so this adds little. With it the sim's
mean is ~1.7 s: still slower than those six runs, within their spread.
"""
START_DELAY = UniformLatency(400_000_000, 800_000_000)
"""A standalone server's ``restart_member`` until it serves: [0.4, 0.8] s.

A standalone JVM answers ``ruok`` ~0.5 s after launch (environment notes); no
conformance script restarts a standalone server, so this stays a guess.
"""
MEMBER_START_DELAY = QuantileTable(
    [
        (0, 850_000_000),
        (250_000, 1_200_000_000),
        (500_000, 1_480_000_000),
        (750_000, 1_950_000_000),
        (940_000, 2_550_000_000),
        (PPM, 3_400_000_000),
    ]
)
"""An ensemble member's ``restart_member`` until it serves as a follower (JVM start,
finding the leader, the sync): measured, median ~1.5 s.

The quantiles are the 18 real follower rejoins of the conformance suite's scripts
24 and 25 (ZooKeeper 3.8.0, loopback, on the 2-core machine with a benchmark
running): 0.86, 0.99, 1.08, 1.18, 1.22, 1.23, 1.29, 1.43, 1.49, 1.50, 1.53,
1.64, 1.88, 1.96, 1.99, 2.05, 2.55 and 3.39 s from the restart to ``srvr``
reporting three members serving (polled every ~50 ms). The design's guess was
[0.4, 0.8] s.
"""

STREAM_PREFIX = "zk/ensemble"
"""The ensemble's streams: ``zk/ensemble/{commit,election,start,clock}``."""

_SUPER_SECRET = 0xB3415C00
_MASK48 = (1 << 48) - 1
_MASK64 = (1 << 64) - 1
_JAVA_MULTIPLIER = 0x5DEECE66D


class SimZkError(RuntimeError):
    """A request the simulated ensemble cannot honour (no quorum, wrong password, ...)."""


class SimZkStartError(SimZkError):
    """Members did not serve within the bound (``ZooKeeperStartError``'s counterpart)."""


def java_random_bytes(seed: int, count: int) -> bytes:
    """``new java.util.Random(seed)`` then ``nextBytes(new byte[count])``.

    ``Random`` scrambles the seed with ``0x5DEECE66D`` and steps a 48-bit LCG;
    ``nextBytes`` takes ``nextInt()`` values and spends each low byte first.
    """
    state = (seed ^ _JAVA_MULTIPLIER) & _MASK48
    out = bytearray()
    while len(out) < count:
        state = (state * _JAVA_MULTIPLIER + 0xB) & _MASK48
        rnd = state >> 16
        for _ in range(min(count - len(out), 4)):
            out.append(rnd & 0xFF)
            rnd >>= 8
    return bytes(out)


def java_next_int(seed: int) -> int:
    """The first ``new java.util.Random(seed).nextInt()`` (checks :func:`java_random_bytes`)."""
    state = (seed ^ _JAVA_MULTIPLIER) & _MASK48
    state = (state * _JAVA_MULTIPLIER + 0xB) & _MASK48
    value = state >> 16
    return value - (1 << 32) if value >= 1 << 31 else value


def session_password(session_id: int) -> bytes:
    """``ZooKeeperServer.generatePasswd``: 16 bytes of ``Random(id ^ 0xB3415C00)``."""
    return java_random_bytes(session_id ^ _SUPER_SECRET, 16)


def initial_session_id(server_id: int, elapsed_ms: int) -> int:
    """``SessionTrackerImpl.initializeNextSessionId``: ``(id << 56) | ((ms << 24) >>> 8)``."""
    value = (((elapsed_ms << 24) & _MASK64) >> 8) | ((server_id << 56) & _MASK64)
    return value - (1 << 64) if value >= 1 << 63 else value


@dataclass(frozen=True)
class SimMemberStatus:
    """One member as ``srvr`` would describe it (``mode`` None when it does not serve)."""

    index: int
    myid: int
    alive: bool
    mode: str | None
    zxid: int | None
    connections: int

    @property
    def serving(self) -> bool:
        """Whether it answers clients."""
        return self.mode is not None


@dataclass(eq=False)
class _Member:
    index: int
    myid: int
    address: str
    alive: bool = False
    started: bool = False  # the JVM listens (a restart takes a drawn delay)
    role: str | None = None  # "leader", "follower", "standalone"; None: not serving
    channels: dict[Channel, None] = field(default_factory=dict)
    next_sid: int = 0
    start_timer: asyncio.TimerHandle | None = None


@dataclass(eq=False)
class _Session:
    id: int
    password: bytes
    timeout_ms: int
    bucket_ms: int = -1
    closing: bool = False
    pipeline: deque[_Entry] = field(default_factory=deque)
    channels: dict[Channel, None] = field(default_factory=dict)


@dataclass(eq=False, slots=True)
class _Entry:
    channel: Channel
    xid: int
    op: Op
    write: bool


class SimEnsemble:
    """A simulated ZooKeeper: ``size`` members (1 is standalone) on ``loop``.

    Args:
        loop: the sim loop everything runs on.
        streams: the run's streams.
        size: members (1, 3 or 5; any positive size is accepted, quorum is a majority).
        tick_time_ms: tickTime (see :func:`zk_registry.timeouts.tick_time_for`).
        name: the host-name prefix of the members' addresses (``<name>-<myid>:2181``).
        min_session_timeout_ms, max_session_timeout_ms: the negotiation bounds
            (default ``2`` and ``20`` x tickTime).
        link_latency: one-way latency of a client connection (before any proxy latency;
            default :data:`ZK_LINK_LATENCY`).
        commit_latency: a write's quorum round trip (default :data:`COMMIT_LATENCY`,
            none for a standalone server).
        election_delay: an election after the leader's loss (:data:`ELECTION_DELAY`).
        join_election_delay: an election a starting member completes
            (:data:`JOIN_ELECTION_DELAY`).
        start_delay: a restarted member's start-up (default :data:`START_DELAY`
            standalone, :data:`MEMBER_START_DELAY` in an ensemble).
        expiry_phase_ms: where the session tracker's tick grid lies: expiry
            buckets are at ``phase + k * tickTime`` (default: drawn in
            ``[0, tickTime)`` from ``zk/ensemble/clock``).
    """

    def __init__(
        self,
        loop: SimEventLoop,
        streams: Streams,
        size: int = 1,
        tick_time_ms: int = DEFAULT_TICK_TIME_MS,
        *,
        name: str = "sim-zk",
        min_session_timeout_ms: int | None = None,
        max_session_timeout_ms: int | None = None,
        link_latency: LatencyModel | None = None,
        commit_latency: LatencyModel | None = None,
        election_delay: LatencyModel = ELECTION_DELAY,
        join_election_delay: LatencyModel = JOIN_ELECTION_DELAY,
        start_delay: LatencyModel | None = None,
        expiry_phase_ms: int | None = None,
    ) -> None:
        if size < 1:
            raise ValueError(f"ensemble size must be >= 1, got {size}")
        if tick_time_ms < 1:
            raise ValueError(f"tick_time_ms must be >= 1, got {tick_time_ms}")
        self.loop = loop
        self.streams = streams
        self.name = name
        self._size = size
        self._tick = tick_time_ms
        self._min_timeout = (
            2 * tick_time_ms if min_session_timeout_ms is None else min_session_timeout_ms
        )
        self._max_timeout = (
            20 * tick_time_ms if max_session_timeout_ms is None else max_session_timeout_ms
        )
        self.link_latency = ZK_LINK_LATENCY if link_latency is None else link_latency
        self._commit_latency = (
            None if size == 1 else (COMMIT_LATENCY if commit_latency is None else commit_latency)
        )
        self._election_delay = election_delay
        self._join_election_delay = join_election_delay
        if start_delay is None:
            start_delay = START_DELAY if size == 1 else MEMBER_START_DELAY
        self._start_delay = start_delay
        self._commit_rng = streams.stream(f"{STREAM_PREFIX}/commit")
        self._election_rng = streams.stream(f"{STREAM_PREFIX}/election")
        self._start_rng = streams.stream(f"{STREAM_PREFIX}/start")
        if expiry_phase_ms is None:
            clock_rng = streams.stream(f"{STREAM_PREFIX}/clock")
            expiry_phase_ms = clock_rng.randrange(tick_time_ms)
        if not 0 <= expiry_phase_ms < tick_time_ms:
            raise ValueError(
                f"expiry_phase_ms must be in [0, {tick_time_ms}), got {expiry_phase_ms}"
            )
        self._phase = expiry_phase_ms
        self._tree = DataTree()
        self._members = [_Member(i, i + 1, f"{name}-{i + 1}:2181".lower()) for i in range(size)]
        self._endpoints: dict[str, Endpoint] = {}
        for m in self._members:
            self._endpoints[m.address] = functools.partial(self._member_channel, m)
        self._leader: int | None = None
        self._gen = 0  # bumped whenever leadership is lost: older proposals are dropped
        self._epoch = 0
        self._counter = 0
        self._sessions: dict[int, _Session] = {}
        self._buckets: dict[int, dict[int, None]] = {}
        self._expiry_timer: asyncio.TimerHandle | None = None
        self._expiry_at_ms = -1
        self._election: asyncio.TimerHandle | None = None
        self._step_down: asyncio.TimerHandle | None = None
        self._last_commit_ns = 0
        self._stalled: deque[tuple[Callable[..., None], tuple[Any, ...]]] = deque()
        self._data_watches: dict[str, dict[Channel, None]] = {}
        self._child_watches: dict[str, dict[Channel, None]] = {}
        self._waiters: list[asyncio.Future[None]] = []
        self._client_names: dict[str, int] = {}
        self._link_ports = 0

    # ------------------------------------------------------------ properties

    @property
    def size(self) -> int:
        """Number of members."""
        return self._size

    @property
    def standalone(self) -> bool:
        """One member: standalone mode."""
        return self._size == 1

    @property
    def tick_time_ms(self) -> int:
        """tickTime."""
        return self._tick

    @property
    def min_session_timeout_ms(self) -> int:
        """The smallest timeout granted."""
        return self._min_timeout

    @property
    def max_session_timeout_ms(self) -> int:
        """The largest timeout granted."""
        return self._max_timeout

    @property
    def hosts(self) -> list[str]:
        """``["sim-zk-1:2181", ...]`` in member order."""
        return [m.address for m in self._members]

    @property
    def connect_string(self) -> str:
        """The members' addresses joined by commas (append ``/chroot`` yourself)."""
        return ",".join(self.hosts)

    @property
    def running(self) -> bool:
        """Whether any member is alive."""
        return any(m.alive for m in self._members)

    @property
    def tree(self) -> DataTree:
        """The committed tree (read it; never write to it directly)."""
        return self._tree

    @property
    def expiry_phase_ms(self) -> int:
        """Where the expiry buckets lie: at ``expiry_phase_ms + k * tick_time_ms``."""
        return self._phase

    @property
    def epoch(self) -> int:
        """The current zxid epoch."""
        return self._epoch

    def negotiate(self, requested_ms: int) -> int:
        """The timeout granted for ``requested_ms``: clamped to the bounds."""
        return negotiated_session_timeout_ms(
            requested_ms, self._tick, self._min_timeout, self._max_timeout
        )

    # ------------------------------------------------------------ lifecycle

    def start(self, timeout: float | None = None) -> Self:
        """Every member up and serving now (the highest myid leads).

        Raises:
            SimZkError: a member is already running.
        """
        del timeout  # nothing to wait for: start-up is not modelled for the first start
        if self.running:
            raise SimZkError("ensemble already running; stop() it first")
        for m in self._members:
            m.alive = True
            m.started = True
        self._finish_election()
        return self

    def stop(self, timeout: float = 0.0) -> None:
        """Stop every member (their connections close); sessions are kept in the data."""
        del timeout
        for m in self._members:
            self._down(m)
        self._lose_leadership()

    def kill_member(self, index: int) -> None:
        """Kill one member: its connections reset at once; see the module docstring."""
        m = self._member(index)
        if not m.alive:
            return
        was_leader = self._leader == index
        self._down(m)
        if self.standalone or was_leader:
            self._lose_leadership()
        else:
            self._check_quorum()

    def stop_member(self, index: int, timeout: float = 0.0) -> None:
        """Stop one member (a graceful shutdown also closes its connections: as a kill)."""
        del timeout
        self.kill_member(index)

    def restart_member(self, index: int, timeout: float | None = None, wait: bool = True) -> None:
        """(Re)start one member; it listens after a drawn start-up delay.

        Args:
            index: the member.
            timeout: bound of the wait (virtual seconds).
            wait: run the loop until it serves (only from outside the loop).

        Raises:
            SimZkError: ``wait`` from inside the running loop.
            SimZkStartError: it did not serve in time.
        """
        m = self._member(index)
        if m.alive:
            self.kill_member(index)
        m.alive = True
        delay = self._start_delay(self._start_rng)
        m.start_timer = self.loop.call_later_ns(
            delay, self._member_started, m, context=contextvars.Context()
        )
        if wait:
            self.wait_ready(timeout, [index])

    def member_alive(self, index: int) -> bool:
        """Whether the member's process runs (it may not serve yet)."""
        return self._member(index).alive

    def serving(self, index: int) -> bool:
        """Whether the member answers clients."""
        return self._serves(self._member(index))

    def wait_ready(
        self, timeout: float | None = None, members: Sequence[int] | None = None
    ) -> None:
        """Run the loop until the given (default: all) members serve.

        Raises:
            SimZkError: called from inside the running loop (await
                :meth:`wait_ready_async` there).
            SimZkStartError: a member is not running, or they did not serve in time.
        """
        if self.loop.is_running():
            raise SimZkError(
                "wait_ready would block the running sim loop: await wait_ready_async() instead"
            )
        self.loop.run_until_complete(self.wait_ready_async(timeout, members))

    async def wait_ready_async(
        self, timeout: float | None = None, members: Sequence[int] | None = None
    ) -> None:
        """Wait (virtual time) until the given (default: all) members serve.

        Raises:
            SimZkStartError: a member is not running, or they did not serve in time.
        """
        bound = DEFAULT_STARTUP_TIMEOUT_S if timeout is None else timeout
        indices = list(range(self._size)) if members is None else [int(i) for i in members]
        deadline = self.loop.time() + bound
        while True:
            dead = [i for i in indices if not self._member(i).alive]
            if dead:
                raise SimZkStartError(f"member(s) {dead} not running")
            waiting = [i for i in indices if not self._serves(self._members[i])]
            if not waiting:
                return
            remaining = deadline - self.loop.time()
            if remaining <= 0:
                raise SimZkStartError(f"member(s) {waiting} not serving after {bound:g} s")
            fut: asyncio.Future[None] = self.loop.create_future()
            self._waiters.append(fut)
            try:
                await asyncio.wait_for(fut, remaining)
            except TimeoutError:
                continue

    def member_status(self) -> list[SimMemberStatus]:
        """Every member: alive, mode, zxid, connections."""
        return [
            SimMemberStatus(
                m.index,
                m.myid,
                m.alive,
                m.role if self._serves(m) else None,
                self._tree.last_zxid if self._serves(m) else None,
                len(m.channels) if m.alive else 0,
            )
            for m in self._members
        ]

    def leader_index(self) -> int | None:
        """Index of the leader (or the standalone server) while it serves, else None."""
        return self._leader

    def session_timeouts(self) -> dict[int, int]:
        """Negotiated timeout of every connected session (``cons``)."""
        out: dict[int, int] = {}
        for m in self._members:
            for ch in m.channels:
                if ch.session is not None and ch.server_open:
                    out[ch.session.id] = ch.timeout_ms
        return out

    def member_of_session(self, session_id: int) -> int | None:
        """The member a session is connected to now (``cons`` lists it there), or None."""
        for m in self._members:
            if not self._serves(m):
                continue
            for ch in m.channels:
                if ch.server_open and ch.session is not None and ch.session.id == session_id:
                    return m.index
        return None

    def describe(self) -> dict[str, Any]:
        """A JSON-able record for a run manifest."""
        return {
            "size": self._size,
            "mode": "standalone" if self.standalone else "ensemble",
            "embedded": "sim",
            "connect_string": self.connect_string,
            "tick_time_ms": self._tick,
            "min_session_timeout_ms": self._min_timeout,
            "max_session_timeout_ms": self._max_timeout,
            "members": [
                {"index": m.index, "myid": m.myid, "address": m.address} for m in self._members
            ],
        }

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------ sessions

    def session_ids(self) -> list[int]:
        """Live sessions (closing ones included), in creation order."""
        return list(self._sessions)

    def session_expiry_ms(self, session_id: int) -> int | None:
        """The session's expiry bucket (virtual ms), None if unknown or not tracked."""
        s = self._sessions.get(session_id)
        return None if s is None or s.bucket_ms < 0 else s.bucket_ms

    def expire_session(self, session_id: int, password: bytes) -> bool:
        """Expire a session on the server now, as ``zk_registry.faults.expire_session`` does.

        The real fault's intruder client takes the session over (its connection
        closes) and closes it (a ``closeSession`` txn). Here: the session's
        connections close at once, it is marked closing (reconnects are answered
        "expired"), and its ``closeSession`` is proposed; ephemerals go and
        watches fire when it commits.

        Returns:
            True if expired now; False if the session was already gone or closing.

        Raises:
            SimZkError: no member serves (the intruder could not connect), or a
                wrong password.
        """
        if self._leader is None:
            raise SimZkError(f"cannot expire session 0x{session_id:x}: no member serves")
        s = self._sessions.get(session_id)
        if s is None or s.closing:
            return False
        if bytes(password) != s.password:
            raise SimZkError(f"wrong password for session 0x{session_id:x}")
        for ch in list(s.channels):
            self._close_channel(ch)
        self._expire(s)
        return True

    # ------------------------------------------------------------ clients

    def raw_factory(self, prefix: str = "client") -> Callable[..., SimKazooClient]:
        """A ``ZkClient(raw_factory=...)`` building :class:`SimKazooClient` s on this ensemble.

        Each client is named ``<prefix>-<n>`` (n counts per prefix from 1), which
        names its streams ``zk/<prefix>-<n>/{ping,hosts,retry,link}``.
        """
        from zk_registry.sim.client import SimKazooClient

        def make(**kwargs: Any) -> SimKazooClient:
            return SimKazooClient(self, name=self.client_name(prefix), **kwargs)

        return make

    def client_name(self, prefix: str) -> str:
        """The next unique client name for ``prefix``."""
        n = self._client_names.get(prefix, 0) + 1
        self._client_names[prefix] = n
        return f"{prefix}-{n}"

    def resolves(self, address: str) -> bool:
        """Whether ``host:port`` names a member or a started link."""
        return address.lower() in self._endpoints

    def open_channel(self, address: str, client: ClientEnd) -> Channel:
        """A client opens a connection to ``address`` (refused: closed at once)."""
        endpoint = self._endpoints.get(address.lower())
        if endpoint is None:
            return self.refused_channel(client)
        return endpoint(client)

    def abort_clients_of(self, actor: ActorContext) -> int:
        """The OS closes a killed process's sockets: close its clients' connections.

        No ``closeSession`` is sent; the sessions expire on their own.

        Returns:
            How many connections were closed.
        """
        n = 0
        for m in self._members:
            for ch in list(m.channels):
                if ch.client.owner is actor and ch.client_open:
                    ch.close_by_client()
                    n += 1
        return n

    def register_link(self, connect: Endpoint) -> str:
        """Give a link an address (``sim-link-<n>:<port>``) that ``connect`` answers.

        Returns:
            The address.
        """
        self._link_ports += 1
        port = 20000 + self._link_ports
        address = f"sim-link-{self._link_ports}:{port}"
        self._endpoints[address] = connect
        return address

    def unregister_link(self, address: str) -> None:
        """A closed link: new connections to its address are refused."""
        self._endpoints.pop(address.lower(), None)

    def member_for(self, address: str) -> int | None:
        """The index of the member at ``address``, or None."""
        for m in self._members:
            if m.address == address.lower():
                return m.index
        return None

    def accepts(self, index: int) -> bool:
        """Whether the member's client port accepts connections (running and started)."""
        m = self._member(index)
        return m.alive and m.started

    def member_channel(self, index: int, client: ClientEnd, via: Proxy | None) -> Channel:
        """A connection to member ``index`` (through ``via``), refused if it does not listen."""
        return self._member_channel(self._member(index), client, via)

    def refused_channel(self, client: ClientEnd, via: Proxy | None = None) -> Channel:
        """A connection refused (or reset at once): the client sees EOF."""
        ch = self._channel(client, None, via)
        ch.close_by_server()
        return ch

    def reset_channel(self, ch: Channel) -> None:
        """Abort both ends of ``ch`` (a proxy going DOWN): in-flight data is lost."""
        if ch.server_open:
            self._detach(ch)
        ch.reset(self.link_latency)

    # ------------------------------------------------------------ channels

    def _channel(self, client: ClientEnd, member: _Member | None, via: Proxy | None) -> Channel:
        latency = ChannelLatency(self.link_latency, via)
        src = self.name if member is None else member.address
        up = Link(self.loop, client.name, None, client.link_rng, latency)
        down = Link(self.loop, src, client.owner, client.link_rng, latency)
        ch = Channel(
            self.loop, client, self, up, down, via, None if member is None else member.index
        )
        if via is not None and via.blackholed:
            ch.set_mode(LinkMode.BLACKHOLE)
        return ch

    def _member_channel(self, m: _Member, client: ClientEnd, via: Proxy | None = None) -> Channel:
        ch = self._channel(client, m, via)
        if not (m.alive and m.started):
            ch.close_by_server()  # nothing listens: connection refused
            return ch
        m.channels[ch] = None
        return ch

    def _on_packet(self, ch: Channel, message: Any) -> None:
        """A packet from a client (run by the channel's up link)."""
        if not ch.server_open or ch.member is None:
            return
        m = self._members[ch.member]
        if type(message) is Request:
            self._on_request(ch, message)
        elif type(message) is ConnectRequest:
            self._on_connect(ch, m, message)

    def _on_eof(self, ch: Channel) -> None:
        """The client closed its side."""
        if ch.server_open:
            self._detach(ch)
            ch.server_open = False

    def _close_channel(self, ch: Channel) -> None:
        if ch.server_open:
            self._detach(ch)
            ch.close_by_server()

    def _detach(self, ch: Channel) -> None:
        for path in ch.data_watches:
            watchers = self._data_watches.get(path)
            if watchers is not None:
                watchers.pop(ch, None)
                if not watchers:
                    del self._data_watches[path]
        for path in ch.child_watches:
            watchers = self._child_watches.get(path)
            if watchers is not None:
                watchers.pop(ch, None)
                if not watchers:
                    del self._child_watches[path]
        ch.data_watches.clear()
        ch.child_watches.clear()
        if ch.member is not None:
            self._members[ch.member].channels.pop(ch, None)
        session: _Session | None = ch.session
        if session is not None:
            session.channels.pop(ch, None)

    # ------------------------------------------------------------ connect

    def _on_connect(self, ch: Channel, m: _Member, req: ConnectRequest) -> None:
        if not self._serves(m) or ch.session is not None or req.last_zxid > self._tree.last_zxid:
            self._close_channel(ch)  # "ZooKeeperServer not running", or refused
            return
        timeout = self.negotiate(req.timeout_ms)
        ch.timeout_ms = timeout
        if req.session_id == 0:
            sid = m.next_sid
            m.next_sid += 1
            self._propose(self._commit_create_session, ch, sid, timeout)
            return
        s = self._sessions.get(req.session_id)
        if s is not None:
            for other in list(s.channels):
                if other is not ch and other.member == m.index:
                    self._close_channel(other)  # CLIENT_RECONNECT
        if s is None or s.closing or bytes(req.password) != s.password:
            ch.to_client(ConnectResponse(0, 0, bytes(16)))
            self._close_channel(ch)
            return
        self._attach(ch, s)
        self._touch(s, timeout)
        ch.to_client(ConnectResponse(timeout, s.id, s.password))

    def _attach(self, ch: Channel, s: _Session) -> None:
        ch.session = s
        s.channels[ch] = None

    def _commit_create_session(self, ch: Channel, sid: int, timeout: int) -> None:
        self._tree.record_txn(self._next_zxid())
        s = _Session(sid, session_password(sid), timeout)
        self._sessions[sid] = s
        self._touch(s, timeout)
        if ch.server_open:
            self._attach(ch, s)
            ch.to_client(ConnectResponse(timeout, sid, s.password))

    # ------------------------------------------------------------ requests

    def _on_request(self, ch: Channel, req: Request) -> None:
        s: _Session | None = ch.session
        op = req.op
        if s is None or op.size > MAX_BUFFER or not self._touch(s, ch.timeout_ms):
            self._close_channel(ch)
            return
        if op.code in WRITE_CODES:
            entry = _Entry(ch, req.xid, op, True)
            s.pipeline.append(entry)
            self._propose(self._commit_write, s, entry)
        elif s.pipeline:
            s.pipeline.append(_Entry(ch, req.xid, op, False))
        else:
            self._answer(ch, req.xid, op)

    def _answer(self, ch: Channel, xid: int, op: Op) -> None:
        """Serve a read (or a ping) from the committed tree."""
        tree = self._tree
        code = op.code
        value: Any = None
        err: type[ZookeeperError] | None = None
        try:
            if code == PING:
                pass
            elif code == EXISTS:
                value = tree.exists(op.path)
                if op.watch:
                    self._add_watch(self._data_watches, ch.data_watches, ch, op.path)
                if value is None:
                    err = NoNodeError
            elif code == GET_DATA:
                value = tree.get_data(op.path)
                if op.watch:
                    self._add_watch(self._data_watches, ch.data_watches, ch, op.path)
            elif code == GET_CHILDREN:
                value = tree.get_children(op.path)
                if op.watch:
                    self._add_watch(self._child_watches, ch.child_watches, ch, op.path)
            elif code == GET_CHILDREN2:
                value = tree.get_children_with_stat(op.path)
                if op.watch:
                    self._add_watch(self._child_watches, ch.child_watches, ch, op.path)
            else:
                err = UnimplementedError
        except ZookeeperError as exc:
            err = type(exc)
            value = None
        ch.to_client(Reply(xid, tree.last_zxid, err, value))

    @staticmethod
    def _add_watch(
        table: dict[str, dict[Channel, None]], own: set[str], ch: Channel, path: str
    ) -> None:
        watchers = table.get(path)
        if watchers is None:
            table[path] = {ch: None}
        else:
            watchers[ch] = None
        own.add(path)

    def _commit_write(self, s: _Session, entry: _Entry) -> None:
        zxid = self._next_zxid()
        op = entry.op
        err: type[ZookeeperError] | None = None
        value: Any = None
        try:
            value, changes = self._apply(op, s.id, zxid)
        except ZookeeperError as exc:
            err = type(exc)
            changes = ()
        self._fire(changes)
        pipeline = s.pipeline
        if pipeline and pipeline[0] is entry:
            pipeline.popleft()
        elif entry in pipeline:
            pipeline.remove(entry)
        ch = entry.channel
        if ch.server_open:
            ch.to_client(Reply(entry.xid, zxid, err, value))
        if op.code == CLOSE:
            self._end_session(s)
            return
        while pipeline and not pipeline[0].write:
            read = pipeline.popleft()
            if read.channel.server_open:
                self._answer(read.channel, read.xid, read.op)

    def _apply(self, op: Op, owner: int, zxid: int) -> tuple[Any, tuple[Any, ...]]:
        tree = self._tree
        code = op.code
        if code in (CREATE, CREATE2):
            created = tree.create(
                op.path,
                op.data,
                owner if op.flags & 1 else 0,
                bool(op.flags & 2),
                zxid=zxid,
                time_ms=self._wall_ms(),
            )
            value = created.path if code == CREATE else (created.path, created.stat)
            return value, created.changes
        if code == DELETE:
            return True, tree.delete(op.path, op.version, zxid=zxid).changes
        if code == SET_DATA:
            result = tree.set_data(op.path, op.data, op.version, zxid=zxid, time_ms=self._wall_ms())
            return result.stat, result.changes
        if code == MULTI:
            multi = tree.multi(
                [_multi_op(o, owner) for o in op.ops], zxid=zxid, time_ms=self._wall_ms()
            )
            return list(multi.results), multi.changes
        if code == CLOSE:
            return None, tree.kill_session(owner, zxid=zxid).changes
        raise UnimplementedError()

    def _fire(self, changes: Sequence[Any]) -> None:
        """Notify the watching connections of each change, in the server's order."""
        for kind, path in changes:
            if kind is ChangeKind.CHILDREN_CHANGED:
                self._notify(self._child_watches.pop(path, None), path, EventType.CHILD, False)
            elif kind is ChangeKind.DELETED:
                data = self._data_watches.pop(path, None)
                child = self._child_watches.pop(path, None)
                self._notify(data, path, EventType.DELETED, True)
                if child is not None:
                    if data is not None:
                        for ch in child:
                            if ch in data:
                                ch.child_watches.discard(path)
                        child = {ch: None for ch in child if ch not in data}
                    self._notify(child, path, EventType.DELETED, False)
            elif kind is ChangeKind.CREATED:
                self._notify(self._data_watches.pop(path, None), path, EventType.CREATED, True)
            else:
                self._notify(self._data_watches.pop(path, None), path, EventType.CHANGED, True)

    @staticmethod
    def _notify(watchers: dict[Channel, None] | None, path: str, event: str, data: bool) -> None:
        if not watchers:
            return
        note = Notification(event, path)
        for ch in watchers:
            (ch.data_watches if data else ch.child_watches).discard(path)
            ch.to_client(note)

    # ------------------------------------------------------------ txns

    def _propose(self, commit: Callable[..., None], *args: Any) -> None:
        """Commit now (standalone) or after a drawn quorum round trip, in proposal order."""
        gen = self._gen
        if self._commit_latency is None:
            self._acked(gen, commit, args)
            return
        at = max(self.loop.now_ns + self._commit_latency(self._commit_rng), self._last_commit_ns)
        self._last_commit_ns = at
        self.loop.call_at_ns(at, self._acked, gen, commit, args, context=contextvars.Context())

    def _acked(self, gen: int, commit: Callable[..., None], args: tuple[Any, ...]) -> None:
        """A proposal's acks are due: commit it, or hold it until a quorum is back."""
        if gen != self._gen:
            return  # proposed under a leader that is gone: lost with it
        if self._stalled or not self._has_quorum():
            self._stalled.append((commit, args))  # no quorum acks it (yet); order kept
            return
        commit(*args)

    def _replay_stalled(self) -> None:
        """The leader has a quorum again: the held proposals commit, in order."""
        while self._stalled and self._has_quorum():
            commit, args = self._stalled.popleft()
            commit(*args)

    def _next_zxid(self) -> int:
        self._counter += 1
        return (self._epoch << 32) | self._counter

    def _wall_ms(self) -> int:
        return SIM_EPOCH_MS + self.loop.now_ns // 1_000_000

    def _has_quorum(self) -> bool:
        return self._leader is not None and self._started() >= self._quorum()

    # ------------------------------------------------------------ expiry

    def _touch(self, s: _Session, timeout_ms: int) -> bool:
        """``touchSession``: move the session to its new expiry bucket."""
        if s.closing or self._sessions.get(s.id) is not s:
            return False
        tick = self._tick
        phase = self._phase
        bucket = ((self.loop.now_ns // 1_000_000 + timeout_ms - phase) // tick + 1) * tick + phase
        if bucket != s.bucket_ms:
            buckets = self._buckets
            old = buckets.get(s.bucket_ms)
            if old is not None:
                old.pop(s.id, None)
                if not old:
                    del buckets[s.bucket_ms]
            members = buckets.get(bucket)
            if members is None:
                buckets[bucket] = {s.id: None}
            else:
                members[s.id] = None
            s.bucket_ms = bucket
            if self._expiry_timer is None or bucket < self._expiry_at_ms:
                self._schedule_expiry()
        return True

    def _untrack(self, s: _Session) -> None:
        old = self._buckets.get(s.bucket_ms)
        if old is not None:
            old.pop(s.id, None)
            if not old:
                del self._buckets[s.bucket_ms]
        s.bucket_ms = -1

    def _schedule_expiry(self) -> None:
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
            self._expiry_timer = None
        if self._leader is None or not self._buckets:
            return
        first = min(self._buckets)
        self._expiry_at_ms = first
        self._expiry_timer = self.loop.call_at_ns(
            first * 1_000_000, self._expire_due, context=contextvars.Context()
        )

    def _expire_due(self) -> None:
        self._expiry_timer = None
        if self._leader is None:
            return
        now_ms = self.loop.now_ns // 1_000_000
        for bucket in sorted(b for b in self._buckets if b <= now_ms):
            for sid in sorted(self._buckets.pop(bucket)):
                s = self._sessions[sid]
                s.bucket_ms = -1
                self._expire(s)
        self._schedule_expiry()

    def _expire(self, s: _Session) -> None:
        s.closing = True
        self._untrack(s)
        self._propose(self._commit_close_session, s)

    def _commit_close_session(self, s: _Session) -> None:
        if self._sessions.get(s.id) is not s:
            return
        result = self._tree.kill_session(s.id, zxid=self._next_zxid())
        self._fire(result.changes)
        self._end_session(s)

    def _end_session(self, s: _Session) -> None:
        self._sessions.pop(s.id, None)
        self._untrack(s)
        s.pipeline.clear()
        for ch in list(s.channels):
            self._close_channel(ch)

    def _retrack_sessions(self) -> None:
        """A new leader's tracker: every session gets a fresh timeout from now."""
        self._buckets.clear()
        for s in self._sessions.values():
            s.closing = False
            s.bucket_ms = -1
            self._touch(s, s.timeout_ms)
        self._schedule_expiry()

    # ------------------------------------------------------------ members

    def _member(self, index: int) -> _Member:
        if not 0 <= index < self._size:
            raise IndexError(f"no member {index} in an ensemble of {self._size}")
        return self._members[index]

    def _quorum(self) -> int:
        return self._size // 2 + 1

    def _started(self) -> int:
        return sum(1 for m in self._members if m.started)

    @staticmethod
    def _serves(m: _Member) -> bool:
        return m.alive and m.started and m.role is not None

    def _down(self, m: _Member) -> None:
        """The member's process is gone: its connections close."""
        m.alive = False
        m.started = False
        if m.start_timer is not None:
            m.start_timer.cancel()
            m.start_timer = None
        self._stop_serving(m)

    def _stop_serving(self, m: _Member) -> None:
        m.role = None
        for ch in list(m.channels):
            self._close_channel(ch)
        self._changed()

    def _start_serving(self, m: _Member, role: str) -> None:
        m.role = role
        first = initial_session_id(m.myid, self.loop.now_ns // 1_000_000)
        m.next_sid = max(first, m.next_sid)
        self._changed()

    def _member_started(self, m: _Member) -> None:
        m.start_timer = None
        if not m.alive:
            return
        m.started = True
        if self.standalone:
            self._finish_election()
        elif self._leader is not None:
            self._start_serving(m, "follower")
            self._replay_stalled()
        else:
            self._maybe_elect(self._join_election_delay)

    def _lose_leadership(self) -> None:
        self._leader = None
        self._gen += 1
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
            self._expiry_timer = None
        if self._step_down is not None:
            self._step_down.cancel()
            self._step_down = None
        self._stalled.clear()
        for s in self._sessions.values():
            s.pipeline.clear()
        for m in self._members:
            self._stop_serving(m)
        self._maybe_elect()

    def _check_quorum(self) -> None:
        if self._leader is None or self._step_down is not None:
            return
        if self._started() >= self._quorum():
            return
        delay = uniform_ns(self._election_rng, 0, self._tick * 1_000_000 // 2)
        self._step_down = self.loop.call_later_ns(
            delay, self._quorum_lost, context=contextvars.Context()
        )

    def _quorum_lost(self) -> None:
        self._step_down = None
        if self._leader is not None and self._started() < self._quorum():
            self._lose_leadership()

    def _maybe_elect(self, duration: LatencyModel | None = None) -> None:
        """Start an election (drawn ``duration``, default :data:`ELECTION_DELAY`) if one can run."""
        if self.standalone or self._leader is not None or self._election is not None:
            return
        if self._started() < self._quorum():
            return
        delay = (self._election_delay if duration is None else duration)(self._election_rng)
        self._election = self.loop.call_later_ns(
            delay, self._finish_election, context=contextvars.Context()
        )

    def _finish_election(self) -> None:
        self._election = None
        started = [m for m in self._members if m.started]
        if self.standalone:
            if not started:
                return
            roles = {0: "standalone"}
        else:
            if len(started) < self._quorum():
                return
            leader = max(started, key=lambda m: m.myid)
            self._epoch += 1
            self._counter = 0
            roles = {m.index: "leader" if m is leader else "follower" for m in started}
        self._leader = next(i for i, r in roles.items() if r in ("leader", "standalone"))
        for i, role in roles.items():
            self._start_serving(self._members[i], role)
        self._retrack_sessions()

    def _changed(self) -> None:
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)


def _multi_op(op: Op, owner: int) -> MultiOp:
    code = op.code
    if code == CREATE:
        return CreateOp(op.path, op.data, owner if op.flags & 1 else 0, bool(op.flags & 2))
    if code == DELETE:
        return DeleteOp(op.path, op.version)
    if code == SET_DATA:
        return SetDataOp(op.path, op.data, op.version)
    if code == CHECK:
        return CheckOp(op.path, op.version)
    raise ValueError(f"not a multi op: {op!r}")
