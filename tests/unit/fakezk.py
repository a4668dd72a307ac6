"""An in-memory ZooKeeper and a world of legacy consumers on a fake clock (tests only).

:class:`FakeZk` models only the znodes the Kafka 0.8.2.2 high-level consumer
touches (kafka-protocols.md A1): ``/brokers/ids/<id>``, ``/brokers/topics/<t>``,
``/consumers/<g>/ids/<consumerId>`` (ephemeral, the A1 JSON with the
subscription), ``/consumers/<g>/owners/<t>/<p>`` (ephemeral, the thread id) and
``/consumers/<g>/offsets/<t>/<p>`` (persistent, a decimal string). It is a
linearizable store with sessions: an ephemeral node belongs to a session, and
closing or expiring the session deletes the session's ephemerals and notifies
the listeners of their parents, as the server does.

:class:`World` is the driver a unit test needs: it holds several
:class:`~emulator.legacy.consumer.LegacyConsumer` on one
:class:`~emulator.clock.FakeClock`, performs their requests against the
:class:`FakeZk` after a configurable emulated latency (a request takes effect
*and* is answered when its latency has passed, so a test decides which
consumer's read lands before which other consumer's delete), counts the reads
and writes of each request as the real driver does (A7's per-attempt
operation count) in per-session FIFO order, delivers watches
(``watch_fired(now, "ids")`` on a change of the group's ``/ids`` children,
``topic:<t>`` on a change of ``/brokers/topics/<t>``, ``brokers`` once a
consumer asked for :class:`~emulator.legacy.messages.WatchBrokers`), wakes
sleepers through
``next_deadline()``/``poll()``, and applies StartFetchers/StopFetchers to a
per-consumer fetch set. Everything is deterministic: ties in time are broken
by scheduling order and the only randomness is a seeded ``random.Random``.

Driver choices that mirror zkclient (what Kafka 0.8.2.2 used):

* Watches are subscriptions that survive firing and reconnection
  (``subscribeChildChanges``); a consumer subscribes to ``/ids`` and to its
  topics once its :class:`RegisterConsumer` succeeded, so its own first
  registration does not wake it.
* After a session expiry, :meth:`World.reconnect` calls ``new_session`` and then,
  like zkclient's ``fireAllEvents``, fires the consumer's listeners once.
* ``retryUntilConnected``: a request that comes due while its consumer has no
  session (expired, not yet reconnected) waits; on reconnection it runs, after
  its latency again, on the *new* session. So an operation of a consumer whose
  session expired mid-rebalance lands late, as with zkclient.
"""

from __future__ import annotations

import heapq
import itertools
import json
import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from emulator.clock import FakeClock
from emulator.events import EventKind
from emulator.legacy.config import LegacyConsumerConfig
from emulator.legacy.consumer import ConsumerState, LegacyConsumer
from emulator.legacy.messages import (
    ClaimOwnership,
    ClaimResult,
    CloseSession,
    CommitOffsets,
    Emit,
    FetchOffsets,
    GroupView,
    IoResult,
    Output,
    ReadAssignmentContext,
    ReadCluster,
    ReadRebalanceContext,
    RebalanceContext,
    RegisterConsumer,
    ReleaseOwnership,
    Request,
    StartFetchers,
    StopFetchers,
    TopicPartition,
    WatchBrokers,
)

# --------------------------------------------------------------------------- the store


class ZkError(Exception):
    """A ZooKeeper exception, named as the Java client names it."""

    def __init__(self, name: str, path: str) -> None:
        super().__init__(f"{name}: {path}")
        self.name = name
        self.path = path


@dataclass
class Znode:
    """One node: its data and, for an ephemeral, the owning session."""

    data: str
    session: int | None = None  # None: persistent


class FakeZk:
    """The znodes of one consumer group and its cluster, with sessions.

    Reads and writes are counted in :attr:`reads` and :attr:`writes` (get,
    getChildren and exists are reads; create, set and delete are writes).
    :attr:`on_children_changed` and :attr:`on_data_changed` are called with the
    parent path (or the node path) after every change, for the driver's
    watches.
    """

    def __init__(self, group: str) -> None:
        self.group = group
        self.nodes: dict[str, Znode] = {}
        self.sessions: dict[int, str] = {}  # live session id -> client name
        self.dead_sessions: set[int] = set()
        self._session_ids = itertools.count(0x1000)
        self.reads = 0
        self.writes = 0
        self.on_children_changed: Callable[[str], None] = lambda path: None
        self.on_data_changed: Callable[[str], None] = lambda path: None

    # -- paths (ZkUtils.scala, A1)

    @property
    def ids_dir(self) -> str:
        return f"/consumers/{self.group}/ids"

    def owner_path(self, tp: TopicPartition) -> str:
        return f"/consumers/{self.group}/owners/{tp[0]}/{tp[1]}"

    def offset_path(self, tp: TopicPartition) -> str:
        return f"/consumers/{self.group}/offsets/{tp[0]}/{tp[1]}"

    # -- sessions

    def open_session(self, client: str) -> int:
        sid = next(self._session_ids)
        self.sessions[sid] = client
        return sid

    def alive(self, sid: int | None) -> bool:
        return sid is not None and sid in self.sessions

    def end_session(self, sid: int) -> list[str]:
        """Close or expire ``sid``: delete its ephemerals, then notify. Returns their paths."""
        if sid not in self.sessions:
            return []
        del self.sessions[sid]
        self.dead_sessions.add(sid)
        gone = sorted(p for p, n in self.nodes.items() if n.session == sid)
        for path in gone:
            del self.nodes[path]
        for parent in sorted({p.rsplit("/", 1)[0] for p in gone}):
            self.on_children_changed(parent)
        return gone

    # -- primitives

    def exists(self, path: str) -> bool:
        self.reads += 1
        return path in self.nodes

    def get(self, path: str) -> str:
        self.reads += 1
        node = self.nodes.get(path)
        if node is None:
            raise ZkError("NoNodeException", path)
        return node.data

    def get_maybe(self, path: str) -> str | None:
        self.reads += 1
        node = self.nodes.get(path)
        return None if node is None else node.data

    def children(self, path: str) -> list[str]:
        self.reads += 1
        prefix = path + "/"
        return sorted(
            {p[len(prefix) :].split("/", 1)[0] for p in self.nodes if p.startswith(prefix)}
        )

    def create(self, path: str, data: str, session: int | None = None) -> None:
        self.writes += 1
        if session is not None and session not in self.sessions:
            raise ZkError("SessionExpiredException", path)
        if path in self.nodes:
            raise ZkError("NodeExistsException", path)
        self.nodes[path] = Znode(data, session)
        self.on_children_changed(path.rsplit("/", 1)[0])

    def set_persistent(self, path: str, data: str) -> None:
        """``updatePersistentPath``: set, creating the node if it is absent."""
        self.writes += 1
        created = path not in self.nodes
        self.nodes[path] = Znode(data, None)
        if created:
            self.on_children_changed(path.rsplit("/", 1)[0])
        else:
            self.on_data_changed(path)

    def delete(self, path: str) -> bool:
        """``ZkUtils.deletePath``: a missing node is not an error. True if it was there."""
        self.writes += 1
        if path not in self.nodes:
            return False
        del self.nodes[path]
        self.on_children_changed(path.rsplit("/", 1)[0])
        return True

    # -- administration (not counted: brokers and admin tools, not the consumer)

    def admin_set(self, path: str, data: str, session: int | None = None) -> None:
        created = path not in self.nodes
        self.nodes[path] = Znode(data, session)
        if created:
            self.on_children_changed(path.rsplit("/", 1)[0])
        else:
            self.on_data_changed(path)

    def admin_delete(self, path: str) -> None:
        if self.nodes.pop(path, None) is not None:
            self.on_children_changed(path.rsplit("/", 1)[0])

    # -- views for assertions (not counted)

    def owner_nodes(self) -> dict[TopicPartition, Znode]:
        prefix = f"/consumers/{self.group}/owners/"
        out: dict[TopicPartition, Znode] = {}
        for path, node in self.nodes.items():
            if path.startswith(prefix):
                topic, part = path[len(prefix) :].split("/")
                out[(topic, int(part))] = node
        return dict(sorted(out.items()))

    def owners(self) -> dict[TopicPartition, str]:
        return {tp: n.data for tp, n in self.owner_nodes().items()}

    def offsets(self) -> dict[TopicPartition, int]:
        prefix = f"/consumers/{self.group}/offsets/"
        out: dict[TopicPartition, int] = {}
        for path, node in self.nodes.items():
            if path.startswith(prefix):
                topic, part = path[len(prefix) :].split("/")
                out[(topic, int(part))] = int(node.data)
        return dict(sorted(out.items()))

    def members(self) -> dict[str, dict[str, int]]:
        prefix = self.ids_dir + "/"
        return {
            p[len(prefix) :]: dict(json.loads(n.data)["subscription"])
            for p, n in sorted(self.nodes.items())
            if p.startswith(prefix)
        }

    def partitions(self) -> dict[str, tuple[int, ...]]:
        out: dict[str, tuple[int, ...]] = {}
        for path, node in sorted(self.nodes.items()):
            parts = path.split("/")
            if len(parts) == 4 and parts[1] == "brokers" and parts[2] == "topics":
                out[parts[3]] = tuple(sorted(int(p) for p in json.loads(node.data)["partitions"]))
        return out


# --------------------------------------------------------------------------- the world


@dataclass(frozen=True)
class Trace:
    """One line of the world's trace: an event, a request, an effect or a world action.

    ``what`` is the EventKind value for an Emit, the request's class name when
    it was issued (``done:<Name>`` when it was answered), ``StopFetchers`` /
    ``StartFetchers``, or ``world:<action>``.
    """

    t: float
    member: str
    what: str
    fields: Mapping[str, object] = field(default_factory=dict)
    request: Request | None = None
    result: IoResult | None = None


@dataclass
class Member:
    """A consumer in the world and the driver's state for it."""

    name: str
    consumer: LegacyConsumer
    session: int | None = None
    crashed: bool = False
    subscribed: bool = False  # /ids child watch and /brokers/topics/<t> data watches
    watching_brokers: bool = False
    fetching: dict[TopicPartition, tuple[str, int | None]] = field(default_factory=dict)
    parked: list[Request] = field(default_factory=list)  # waiting for a session
    last_due: float = 0.0  # when its latest request takes effect (FIFO order)
    closed: bool = False
    ops: Counter[str] = field(default_factory=Counter)  # "<Request>.reads" / ".writes"


Latency = Callable[[str, Request], float]


@dataclass
class _Fault:
    member: str | None
    request: type[Request]
    error: str
    times: int


_BUSY = frozenset(
    {
        ConsumerState.REGISTERING,
        ConsumerState.REBALANCING,
        ConsumerState.BACKOFF,
        ConsumerState.SHUTTING_DOWN,
    }
)


class World:
    """Legacy consumers of one group on a fake clock, against a :class:`FakeZk`.

    Args:
        topics: topic -> partition count (``/brokers/topics/<t>``).
        brokers: live broker ids (``/brokers/ids``).
        group: ``group.id``.
        config: the default consumer config.
        latency: emulated ms per request, or ``f(member, request) -> ms``.
        watch_latency: emulated ms from a znode change to the watch callback.
        seed: seeds :attr:`rng` (the only randomness).
    """

    def __init__(
        self,
        *,
        topics: Mapping[str, int],
        brokers: Iterable[int] = (1,),
        group: str = "g",
        config: LegacyConsumerConfig | None = None,
        latency: float | Latency = 1.0,
        watch_latency: float = 0.0,
        seed: int = 0,
    ) -> None:
        self.clock = FakeClock()
        self.rng = random.Random(seed)
        self.group = group
        self.config = config or LegacyConsumerConfig()
        self.zk = FakeZk(group)
        self.zk.on_children_changed = self._children_changed
        self.zk.on_data_changed = self._data_changed
        if callable(latency):
            self.latency: Latency = latency
        else:
            fixed = float(latency)
            self.latency = lambda m, r: fixed
        self.watch_latency = watch_latency
        self.members: dict[str, Member] = {}
        self.trace: list[Trace] = []
        self.overlaps: list[tuple[float, TopicPartition, tuple[str, ...]]] = []
        self._faults: list[_Fault] = []
        self._queue: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        for b in brokers:
            self.add_broker(b)
        for topic, n in topics.items():
            self.set_partitions(topic, n)

    # ------------------------------------------------------------- time

    @property
    def now(self) -> float:
        return self.clock.now_ms()

    def at(self, t: float, action: Callable[[], None]) -> None:
        """Run ``action`` at emulated time ``t`` (after what is already due then)."""
        heapq.heappush(self._queue, (max(t, self.now), next(self._seq), action))

    def after(self, ms: float, action: Callable[[], None]) -> None:
        self.at(self.now + ms, action)

    def _next_time(self) -> float | None:
        times = [self._queue[0][0]] if self._queue else []
        for m in self.members.values():
            if not m.crashed:
                d = m.consumer.next_deadline()
                if d is not None:
                    times.append(d)
        return min(times) if times else None

    def _step(self, limit: float) -> bool:
        t = self._next_time()
        if t is None or t > limit:
            return False
        if t > self.now:
            self.clock.advance(t - self.now)
        if self._queue and self._queue[0][0] <= self.now:
            _, _, action = heapq.heappop(self._queue)
            action()
        else:
            for m in list(self.members.values()):
                d = None if m.crashed else m.consumer.next_deadline()
                if d is not None and d <= self.now:
                    self._handle(m, m.consumer.poll(self.now))
        self._check_overlap()
        return True

    def run_until(self, t: float) -> None:
        """Process everything due up to ``t`` and leave the clock at ``t``."""
        while self._step(t):
            pass
        if t > self.now:
            self.clock.advance(t - self.now)

    def run_for(self, ms: float) -> None:
        self.run_until(self.now + ms)

    def busy(self) -> bool:
        return bool(self._queue) or any(
            not m.crashed and m.consumer.state in _BUSY for m in self.members.values()
        )

    def settle(self, max_ms: float = 600_000) -> float:
        """Run until nothing is scheduled and no consumer is mid-protocol. Returns the time."""
        limit = self.now + max_ms
        while self.busy():
            if not self._step(limit):
                raise AssertionError(f"the world did not settle within {max_ms} ms")
        return self.now

    # ------------------------------------------------------------- cluster

    def add_broker(self, broker_id: int) -> None:
        data = {"version": 1, "host": f"b{broker_id}", "port": 9092, "jmx_port": -1}
        self.zk.admin_set(f"/brokers/ids/{broker_id}", json.dumps(data), session=None)

    def remove_broker(self, broker_id: int) -> None:
        self.zk.admin_delete(f"/brokers/ids/{broker_id}")

    def set_partitions(self, topic: str, count: int) -> None:
        """Write ``/brokers/topics/<t>`` with ``count`` partitions (fires its data watch)."""
        brokers = sorted(int(b) for b in self._brokers())
        replicas = brokers[:1] or [0]
        data = {"version": 1, "partitions": {str(p): replicas for p in range(count)}}
        self.zk.admin_set(f"/brokers/topics/{topic}", json.dumps(data))

    def _brokers(self) -> list[str]:
        return sorted(p.rsplit("/", 1)[1] for p in self.zk.nodes if p.startswith("/brokers/ids/"))

    # ------------------------------------------------------------- members

    def add(
        self,
        name: str,
        subscription: Mapping[str, int] | None = None,
        *,
        consumer_id: str | None = None,
        config: LegacyConsumerConfig | None = None,
    ) -> Member:
        """Create a consumer (not started). Its id defaults to ``<group>_<name>``."""
        if name in self.members:
            raise ValueError(f"member {name} exists")
        sub = dict(subscription) if subscription is not None else {
            t: 1 for t in self.zk.partitions()
        }
        consumer = LegacyConsumer(
            member=name,
            consumer_id=consumer_id or f"{self.group}_{name}",
            group=self.group,
            subscription=sub,
            config=config or self.config,
        )
        m = Member(name, consumer)
        self.members[name] = m
        return m

    def start(self, name: str) -> None:
        m = self.members[name]
        m.session = self.zk.open_session(name)
        self._record(m, "world:start")
        self._handle(m, m.consumer.start(self.now))

    def join(
        self,
        name: str,
        subscription: Mapping[str, int] | None = None,
        *,
        consumer_id: str | None = None,
        config: LegacyConsumerConfig | None = None,
    ) -> Member:
        """:meth:`add` and :meth:`start`."""
        m = self.add(name, subscription, consumer_id=consumer_id, config=config)
        self.start(name)
        return m

    def shutdown(self, name: str) -> None:
        m = self.members[name]
        self._record(m, "world:shutdown")
        self._handle(m, m.consumer.shutdown(self.now))

    def crash(self, name: str) -> None:
        """Kill the process: silence; the server expires its session after the timeout."""
        m = self.members[name]
        m.crashed = True
        m.fetching.clear()
        self._record(m, "world:crash")
        sid = m.session
        if sid is not None:
            timeout = m.consumer.config.zookeeper_session_timeout_ms
            self.after(timeout, lambda: self._expire_session(m, sid))

    def expire(self, name: str, reconnect_after: float | None = None) -> None:
        """The server expires the session now (e.g. a GC pause past the timeout).

        The consumer is not told (``handleStateChanged`` is a no-op); its
        requests wait for a new session (``retryUntilConnected``). With ``reconnect_after``,
        :meth:`reconnect` runs that many ms later.
        """
        m = self.members[name]
        if m.session is not None:
            self._expire_session(m, m.session)
        if reconnect_after is not None:
            self.after(reconnect_after, lambda: self.reconnect(name))

    def _expire_session(self, m: Member, sid: int) -> None:
        if not self.zk.alive(sid):
            return
        self._record(m, "world:session_expired", {"session_id": hex(sid)})
        if m.session == sid:
            m.session = None
        self.zk.end_session(sid)

    def reconnect(self, name: str, *, fire_all: bool = True) -> None:
        """zkclient built a new session: ``handleNewSession``, then ``fireAllEvents``."""
        m = self.members[name]
        if m.crashed or m.session is not None:
            return
        m.session = self.zk.open_session(name)
        self._record(m, "world:new_session", {"session_id": hex(m.session)})
        parked, m.parked = m.parked, []
        for req in parked:
            self._send(m, req)
        self._handle(m, m.consumer.new_session(self.now))
        if fire_all and m.subscribed:
            self._handle(m, m.consumer.watch_fired(self.now, "ids"))

    def consume(self, name: str, tp: TopicPartition, next_offset: int) -> None:
        """The data path of ``name`` processed ``tp`` up to ``next_offset``."""
        m = self.members[name]
        if not m.crashed and tp in m.fetching:
            m.consumer.consumed(tp, next_offset)

    def fire(self, name: str, source: str = "ids") -> None:
        m = self.members[name]
        self._handle(m, m.consumer.watch_fired(self.now, source))

    def fail(
        self,
        request: type[Request],
        error: str = "ConnectionLossException",
        *,
        member: str | None = None,
        times: int = 1,
    ) -> None:
        """Answer the next ``times`` requests of that type (of ``member``) with ``error``."""
        self._faults.append(_Fault(member, request, error, times))

    def intrude_owner(self, tp: TopicPartition, data: str = "intruder-0") -> int:
        """Create an owner node held by a foreign live session; returns that session."""
        sid = self.zk.open_session("intruder")
        self.zk.admin_set(self.zk.owner_path(tp), data, session=sid)
        return sid

    # ------------------------------------------------------------- outputs

    def _record(
        self,
        m: Member,
        what: str,
        fields: Mapping[str, object] | None = None,
        request: Request | None = None,
        result: IoResult | None = None,
    ) -> None:
        self.trace.append(Trace(self.now, m.name, what, dict(fields or {}), request, result))

    def _handle(self, m: Member, outputs: list[Output]) -> None:
        for out in outputs:
            if isinstance(out, Emit):
                self._record(m, EventKind(out.kind).value, out.fields)
            elif isinstance(out, StopFetchers):
                m.fetching.clear()
                self._record(m, "StopFetchers")
            elif isinstance(out, StartFetchers):
                m.fetching = dict(out.positions)
                self._record(m, "StartFetchers", {"positions": dict(out.positions)})
            elif isinstance(out, Request):
                self._record(m, type(out).__name__, request=out)
                self._send(m, out)
            else:  # pragma: no cover - the machine has no other outputs
                raise AssertionError(f"unknown output {out!r}")

    def _send(self, m: Member, req: Request) -> None:
        # ZooKeeper applies one session's operations in order (FIFO client
        # order): a request never overtakes an earlier one of the same consumer.
        due = max(self.now + self.latency(m.name, req), m.last_due)
        m.last_due = due
        self.at(due, lambda: self._complete(m, req))

    def _complete(self, m: Member, req: Request) -> None:
        if m.crashed:
            return  # the process died with the request
        if m.session is None and not m.closed:
            m.parked.append(req)  # retryUntilConnected
            return
        result = self._execute(m, req, m.session)
        m.ops[f"{type(req).__name__}.reads"] += result.reads
        m.ops[f"{type(req).__name__}.writes"] += result.writes
        self._record(m, f"done:{type(req).__name__}", request=req, result=result)
        if req.rid in m.consumer.outstanding:
            self._handle(m, m.consumer.complete(self.now, req.rid, result))

    def _take_fault(self, m: Member, req: Request) -> str | None:
        for f in self._faults:
            if f.times > 0 and isinstance(req, f.request) and f.member in (None, m.name):
                f.times -= 1
                return f.error
        return None

    def _execute(self, m: Member, req: Request, sid: int | None) -> IoResult:
        zk = self.zk
        fault = self._take_fault(m, req)
        if fault is not None:
            return IoResult(error=fault)
        if isinstance(req, CloseSession):
            m.closed = True
            m.session = None
            m.subscribed = m.watching_brokers = False
            if sid is not None:
                zk.end_session(sid)
            return IoResult()
        if not zk.alive(sid):
            return IoResult(error="SessionExpiredException")
        r0, w0 = zk.reads, zk.writes
        try:
            value = self._perform(m, req, sid)
        except ZkError as exc:
            return IoResult(error=exc.name, reads=zk.reads - r0, writes=zk.writes - w0)
        return IoResult(value=value, reads=zk.reads - r0, writes=zk.writes - w0)

    def _cluster(self) -> list[int]:
        """``getCluster`` / ``getAllBrokersInCluster``: getChildren + one read per broker."""
        ids = self.zk.children("/brokers/ids")
        for b in ids:
            self.zk.get(f"/brokers/ids/{b}")
        return sorted(int(b) for b in ids)

    def _my_subscription(self, m: Member) -> dict[str, int]:
        data = self.zk.get(f"{self.zk.ids_dir}/{m.consumer.consumer_id}")
        return dict(json.loads(data)["subscription"])

    def _perform(self, m: Member, req: Request, sid: int | None) -> object:
        zk = self.zk
        if isinstance(req, RegisterConsumer):
            payload = {
                "version": 1,
                "subscription": dict(req.subscription),
                "pattern": "static",
                "timestamp": str(int(self.now)),
            }
            zk.create(f"{zk.ids_dir}/{m.consumer.consumer_id}", json.dumps(payload), sid)
            m.subscribed = True
            return None
        if isinstance(req, ReadCluster):
            return self._cluster()
        if isinstance(req, ReadRebalanceContext):
            mine = self._my_subscription(m)
            return RebalanceContext(mine, tuple(self._cluster()))
        if isinstance(req, CommitOffsets):
            for tp, off in sorted(req.offsets.items()):
                zk.set_persistent(zk.offset_path(tp), str(off))
            return sorted(req.offsets)
        if isinstance(req, ReleaseOwnership):
            for tp in req.partitions:
                zk.delete(zk.owner_path(tp))
            return None
        if isinstance(req, ReadAssignmentContext):
            # AssignmentContext: my topic count, the topics' partitions,
            # getConsumersPerTopic (children + each child), getConsumersInGroup.
            self._my_subscription(m)
            parts: dict[str, tuple[int, ...]] = {}
            for t in req.topics:
                raw = zk.get_maybe(f"/brokers/topics/{t}")
                if raw is not None:
                    parts[t] = tuple(int(p) for p in json.loads(raw)["partitions"])
            consumers: dict[str, dict[str, int]] = {}
            for cid in zk.children(zk.ids_dir):
                consumers[cid] = dict(json.loads(zk.get(f"{zk.ids_dir}/{cid}"))["subscription"])
            zk.children(zk.ids_dir)
            return GroupView(consumers, parts)
        if isinstance(req, FetchOffsets):
            out: dict[TopicPartition, int | None] = {}
            for tp in req.partitions:
                raw = zk.get_maybe(zk.offset_path(tp))
                out[tp] = None if raw is None else int(raw)
            return out
        if isinstance(req, ClaimOwnership):
            created: list[TopicPartition] = []
            conflicts: dict[TopicPartition, str | None] = {}
            for tp, thread in req.decision.items():
                path = zk.owner_path(tp)
                try:
                    zk.create(path, thread, sid)
                    created.append(tp)
                except ZkError as exc:
                    if exc.name != "NodeExistsException":
                        raise
                    # createEphemeralPathExpectConflict reads the node back: our
                    # own data counts as a successful create.
                    holder = zk.get_maybe(path)
                    if holder == thread:
                        created.append(tp)
                    else:
                        conflicts[tp] = holder
            return ClaimResult(tuple(created), conflicts)
        if isinstance(req, WatchBrokers):
            zk.children("/brokers/ids")
            m.watching_brokers = True
            return None
        raise AssertionError(f"unknown request {req!r}")  # pragma: no cover

    # ------------------------------------------------------------- watches

    def _children_changed(self, parent: str) -> None:
        if parent == self.zk.ids_dir:
            self._fire_watchers(lambda m: m.subscribed, "ids")
        elif parent == "/brokers/ids":
            self._fire_watchers(lambda m: m.watching_brokers, "brokers")
        elif parent == "/brokers/topics":
            pass  # only wildcard subscriptions watch this

    def _data_changed(self, path: str) -> None:
        if path.startswith("/brokers/topics/") and path.count("/") == 3:
            topic = path.rsplit("/", 1)[1]
            self._fire_watchers(
                lambda m: m.subscribed and topic in m.consumer.subscription, f"topic:{topic}"
            )

    def _fire_watchers(self, which: Callable[[Member], bool], source: str) -> None:
        for m in self.members.values():
            if m.crashed or not self.zk.alive(m.session) or not which(m):
                continue

            def deliver(m: Member = m) -> None:
                if not m.crashed:
                    self._handle(m, m.consumer.watch_fired(self.now, source))

            self.after(self.watch_latency, deliver)

    # ------------------------------------------------------------- observation

    def _check_overlap(self) -> None:
        seen: dict[TopicPartition, list[str]] = {}
        for m in self.members.values():
            for tp in m.fetching:
                seen.setdefault(tp, []).append(m.name)
        for tp, names in seen.items():
            if len(names) > 1:
                entry = (self.now, tp, tuple(names))
                if not self.overlaps or self.overlaps[-1][1:] != entry[1:]:
                    self.overlaps.append(entry)

    def events(
        self, member: str | None = None, *kinds: EventKind | str
    ) -> list[Trace]:
        """Trace lines of ``member`` (None: all) named one of ``kinds`` (none given: all)."""
        wanted = {k.value if isinstance(k, EventKind) else k for k in kinds}
        return [
            e
            for e in self.trace
            if (member is None or e.member == member) and (not wanted or e.what in wanted)
        ]

    def thread_owner(self) -> dict[TopicPartition, str]:
        """Owner znodes as ``tp -> thread id``."""
        return self.zk.owners()

    def live(self) -> list[Member]:
        return [m for m in self.members.values() if not m.crashed and self.zk.alive(m.session)]
