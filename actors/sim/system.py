"""``SimActorSystem``: the :class:`~actors.system.ActorSystem` of the simulation engine.

Actors are plain instances of the real engine's shells living on one
:class:`~emulator.sim.loop.SimEventLoop`, each under its own
:class:`~emulator.sim.loop.ActorContext`; a call is a message over the run's
:class:`~emulator.sim.network.Network` (design §1.3, §1.5):

* ``handle.method.remote(*args)`` returns a :class:`SimRef` at once. The call
  travels the caller -> actor link (drawn latency, FIFO), runs in the actor's
  context (an ``async`` method as a task of the actor, a plain one right
  there, as Ray runs every method of an async actor on its one loop), and the
  result travels back over the actor -> caller link. Arguments and results
  are copied as Ray serializes them (equal values sharing nothing mutable;
  :mod:`actors.sim.copying`), except actor handles, which pass as themselves.
* **Death** is Ray's: :meth:`SimActorSystem.kill` ends the actor at once (no
  callback of it runs again, no ``finally``), every call in flight to it
  fails with :class:`SimActorDied`, and so does every later call. Its name is
  free again at once, so a restarted broker can take it.
* **Start-up**: an actor is built after a start delay drawn from
  ``actor/<name>/start`` (Ray's actor creation took ~0.4 s here,
  environment-notes); calls that arrive before are held and delivered in
  order once it is built. *Emulator choice*: the delay's range
  (:data:`START_DELAY_NS`) is a calibration, not a measurement of Ray.
* **The driver** (the orchestrator) runs in no actor: :meth:`get`, :meth:`wait`
  and :meth:`sleep` run the loop until the refs resolve or the virtual time
  has passed, so the synchronous orchestrator drives the whole simulation.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import math
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Generator, Mapping, Sequence
from types import CoroutineType
from typing import Any, TypeVar

from actors.sim.copying import copy_message
from emulator.sim.clocks import VirtualClocks
from emulator.sim.loop import NS_PER_S, ActorContext, SimEventLoop, current_actor
from emulator.sim.network import LinkRefused, Network
from emulator.sim.rng import Streams, uniform_ns
from zk_registry.client import ZkClient

_T = TypeVar("_T")

__all__ = [
    "START_DELAY_NS",
    "SimActorDied",
    "SimActorSystem",
    "SimGetTimeout",
    "SimHandle",
    "SimRef",
]

START_DELAY_NS = (200_000_000, 600_000_000)
"""An actor is built this long after it is spawned (uniform, ns): Ray's ~0.4 s creation."""

HOSTNAME = "sim"
"""The host name every simulated actor reports (consumer ids, event logs, the manifest)."""

ActorFactory = Callable[..., Any]
"""Builds one actor: ``factory(*args)`` returns the shell instance."""


class SimActorDied(RuntimeError):
    """A call to an actor that was killed (Ray's ``RayActorError``)."""


class SimGetTimeout(TimeoutError):
    """:meth:`SimActorSystem.get` ran out of (virtual) time (Ray's ``GetTimeoutError``)."""


class SimRef:
    """The pending result of one call: awaitable inside actors, resolved by ``get`` outside."""

    __slots__ = ("_actor", "_method", "future")

    def __init__(self, future: asyncio.Future[Any], actor: str, method: str) -> None:
        self.future = future
        self._actor = actor
        self._method = method

    @property
    def label(self) -> str:
        """``<actor>.<method>``: the call, for diagnostics."""
        return f"{self._actor}.{self._method}"

    def __await__(self) -> Generator[Any, None, Any]:
        return self.future.__await__()

    def as_future(self) -> asyncio.Future[Any]:
        """The call's future on the loop (as Ray's ``ObjectRef.as_future``)."""
        return self.future

    def __repr__(self) -> str:
        state = "done" if self.future.done() else "pending"
        return f"SimRef({self.label}, {state})"


class _Method:
    __slots__ = ("_handle", "_name")

    def __init__(self, handle: SimHandle, name: str) -> None:
        self._handle = handle
        self._name = name

    def remote(self, *args: Any) -> SimRef:
        return self._handle._system._call(self._handle, self._name, args)


class SimHandle:
    """What a simulated actor is called through: ``handle.method.remote(*args)``.

    Attributes:
        name: the actor's name (``broker-0``, ``host-2``, or the name it was spawned with).
        actor: its :class:`~emulator.sim.loop.ActorContext`.
        instance: the shell, once built (``None`` during its start delay).
    """

    def __init__(self, system: SimActorSystem, name: str, actor: ActorContext) -> None:
        self._system = system
        self.name = name
        self.actor = actor
        self.instance: Any = None
        self._held: list[tuple[str, tuple[Any, ...], asyncio.Future[Any], ActorContext | None]] = []
        # calls sent and not yet answered (in flight, held or running): failed if it is killed
        self._pending: dict[asyncio.Future[Any], None] = {}
        self._key = next(_HANDLE_KEYS)
        _HANDLES[self._key] = self

    def __getattr__(self, name: str) -> _Method:
        if name.startswith("_"):
            raise AttributeError(name)
        method = _Method(self, name)
        self.__dict__[name] = method  # found without __getattr__ from now on (it holds no state)
        return method

    def __reduce__(self) -> tuple[Any, tuple[int]]:
        # Copied into a message: the receiver gets this very handle (see _copy).
        return (_handle_of, (self._key,))

    def __repr__(self) -> str:
        return f"SimHandle({self.name}{', dead' if self.actor.dead else ''})"


_HANDLES: weakref.WeakValueDictionary[int, SimHandle] = weakref.WeakValueDictionary()
"""Every live handle by its key: what a copied message's handles are unpickled to."""
_HANDLE_KEYS = itertools.count(1)


def _handle_of(key: int) -> SimHandle:
    return _HANDLES[key]


class SimActorSystem:
    """Actors on one sim loop, calls over a simulated network, the loop's clocks.

    Args:
        loop: the run's loop.
        streams: the run's random streams (start delays).
        network: the links calls travel.
        factories: per role (``broker``, ``producer``, ``consumer_host``), what
            builds an actor from the orchestrator's constructor arguments (the
            sim passes its own ``io`` there).
        zk_client: builds the driver's admin ZooKeeper clients (the simulated ensemble's).
        copy_messages: copy arguments and results as Ray does (default); off,
            they are shared (faster, for code known not to mutate them).
    """

    engine = "sim"
    ActorDied: type[BaseException] = SimActorDied
    GetTimeout: type[BaseException] = SimGetTimeout

    def __init__(
        self,
        loop: SimEventLoop,
        streams: Streams,
        network: Network,
        factories: Mapping[str, ActorFactory],
        zk_client: Callable[..., ZkClient] | None = None,
        *,
        copy_messages: bool = True,
    ) -> None:
        self.loop = loop
        self.streams = streams
        self.network = network
        self.clocks = VirtualClocks(loop)
        self._factories = dict(factories)
        self._zk_client = zk_client
        self._copy = copy_message if copy_messages else (lambda v: v)
        self._names: dict[str, SimHandle] = {}  # live actors by name
        self._counts: dict[str, int] = {}  # unnamed actors per role, for their names
        self.handles: list[SimHandle] = []  # every actor spawned, in order
        self.on_kill: list[Callable[[SimHandle], None]] = []
        self._halt: BaseException | None = None  # to raise into the driver (halt)
        self.halted = False
        """Whether :meth:`halt` was called (the run was stopped)."""

    # ----------------------------------------------------------- actors

    def spawn(
        self,
        role: str,
        args: Sequence[Any],
        *,
        name: str | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> SimHandle:
        """An actor of ``role``, built after its start delay (``options`` are Ray's: ignored).

        Raises:
            ValueError: ``name`` is held by a live actor (as Ray's named actors).
            KeyError: no factory for ``role``.
        """
        del options
        factory = self._factories[role]
        if name is None:
            n = self._counts.get(role, 0)
            self._counts[role] = n + 1
            label = f"{role}-{n}"
        else:
            if name in self._names and not self._names[name].actor.dead:
                raise ValueError(f"an actor named {name!r} is alive")
            label = name
        actor = ActorContext(label)
        handle = SimHandle(self, label, actor)
        if name is not None:
            self._names[name] = handle
        self.handles.append(handle)
        delay = uniform_ns(self.streams.stream(f"actor/{label}/start"), *START_DELAY_NS)
        built_args = tuple(args)
        self.loop.call_at_ns(
            self.loop.now_ns + delay,
            self._build,
            handle,
            factory,
            built_args,
            context=actor.new_context(),
        )
        return handle

    def _build(self, handle: SimHandle, factory: ActorFactory, args: tuple[Any, ...]) -> None:
        handle.instance = factory(*args)
        held, handle._held = handle._held, []
        for method, call_args, fut, caller in held:
            self._run_call(handle, method, call_args, fut, caller)

    def lookup(self, name: str) -> SimHandle | None:
        """The live actor named ``name`` (``ray.get_actor``), else ``None``."""
        h = self._names.get(name)
        return None if h is None or h.actor.dead else h

    def kill(self, handle: Any, *, no_restart: bool = True) -> None:
        """End the actor now: nothing of it runs again; its callers get :class:`SimActorDied`."""
        del no_restart
        h: SimHandle = handle
        if h.actor.dead:
            return
        self.loop.kill(h.actor)
        for hook in self.on_kill:
            hook(h)
        err = f"actor {h.name} died (killed)"
        for fut in list(h._pending):
            _fail(fut, SimActorDied(err))
        h._pending.clear()
        for _m, _a, fut, _c in h._held:
            _fail(fut, SimActorDied(err))
        h._held.clear()
        if self._names.get(h.name) is h:
            del self._names[h.name]

    # ------------------------------------------------------------ calls

    def _call(self, handle: SimHandle, method: str, args: tuple[Any, ...]) -> SimRef:
        loop = self.loop
        caller = current_actor.get()
        fut: asyncio.Future[Any] = loop.create_future()
        ref = SimRef(fut, handle.name, method)
        if handle.actor.dead:
            loop.call_soon(_fail, fut, SimActorDied(f"actor {handle.name} is dead"))
            return ref
        payload = self._copy(args)
        handle._pending[fut] = None

        def refused(exc: LinkRefused) -> None:
            _fail(fut, SimActorDied(f"{handle.name}.{method}: {exc}"))

        self.network.send(
            caller, handle.actor, self._deliver, handle, method, payload, fut, caller,
            on_error=refused,
        )  # fmt: skip
        return ref

    def _deliver(
        self,
        handle: SimHandle,
        method: str,
        args: tuple[Any, ...],
        fut: asyncio.Future[Any],
        caller: ActorContext | None,
    ) -> None:
        if handle.instance is None:
            handle._held.append((method, args, fut, caller))
            return
        self._run_call(handle, method, args, fut, caller)

    def _run_call(
        self,
        handle: SimHandle,
        method: str,
        args: tuple[Any, ...],
        fut: asyncio.Future[Any],
        caller: ActorContext | None,
    ) -> None:
        try:
            fn = getattr(handle.instance, method)
            out = fn(*args)
        except Exception as exc:
            self._answer(handle, fut, caller, None, exc)
            return
        if type(out) is CoroutineType:  # an async method: its coroutine is the task's
            task = self.loop.create_task(out)
            task.add_done_callback(lambda t: self._finished(handle, fut, caller, t))
        elif type(out) not in _PLAIN and inspect.isawaitable(out):
            task = self.loop.create_task(_as_coroutine(out))
            task.add_done_callback(lambda t: self._finished(handle, fut, caller, t))
        else:
            self._answer(handle, fut, caller, out, None)

    def _finished(
        self,
        handle: SimHandle,
        fut: asyncio.Future[Any],
        caller: ActorContext | None,
        task: asyncio.Task[Any],
    ) -> None:
        if task.cancelled():
            self._answer(handle, fut, caller, None, asyncio.CancelledError())
            return
        exc = task.exception()
        self._answer(handle, fut, caller, None if exc else task.result(), exc)

    def _answer(
        self,
        handle: SimHandle,
        fut: asyncio.Future[Any],
        caller: ActorContext | None,
        result: Any,
        exc: BaseException | None,
    ) -> None:
        handle._pending.pop(fut, None)
        value = None if exc is not None else self._copy(result)
        self.network.send(
            handle.actor, caller, _settle, fut, value, exc,
            on_error=lambda e: _fail(fut, SimActorDied(f"{handle.name}: {e}")),
        )  # fmt: skip

    # ----------------------------------------------------------- driver

    def halt(self, exc: BaseException) -> None:
        """Stop the simulation at this instant and raise ``exc`` into the driver, once.

        Called from inside the loop (the online monitor's first violation): the
        loop stops after the running callback, and the driver's ``get``,
        ``wait``, ``sleep`` or ``run`` that was running it raises ``exc``.
        Called between two of those (an event the driver itself logged), the
        next one raises it before running anything. Later halts are ignored,
        so the driver's clean-up (the teardown) runs the loop on as usual.
        """
        if self.halted:
            return
        self.halted = True
        self._halt = exc
        if self.loop.is_running():
            self.loop.stop()

    def _raise_halt(self) -> None:
        exc, self._halt = self._halt, None
        if exc is not None:
            raise exc

    def _drive(self, aw: Awaitable[_T]) -> _T:
        """``run_until_complete(aw)``; a halt cancels ``aw`` and raises its exception."""
        if self._halt is not None:
            if inspect.iscoroutine(aw):
                aw.close()  # never started: nothing to cancel
            self._raise_halt()
        task = asyncio.ensure_future(aw, loop=self.loop)
        try:
            result = self.loop.run_until_complete(task)
        except RuntimeError:
            if self._halt is None or task.done():
                raise
            task.cancel()  # stopped under it: nobody waits for it any more
            self._raise_halt()
            raise  # pragma: no cover - _raise_halt raised
        self._raise_halt()
        return result

    def get(self, refs: Any, timeout: float) -> Any:
        """Run the loop until ``refs`` (one or a list) resolve; their results.

        Raises:
            SimActorDied: a call went to an actor that was or got killed.
            SimGetTimeout: not all resolved within ``timeout`` virtual seconds.
        """
        many = isinstance(refs, list)
        items: list[SimRef] = list(refs) if many else [refs]
        futs = [r.future for r in items]
        self._run_until_done(futs, timeout)
        if not all(f.done() for f in futs):
            raise SimGetTimeout(f"{len(futs)} call(s) not answered within {timeout} s")
        results = [f.result() for f in futs]  # raises the first failure, as ray.get
        return results if many else results[0]

    def peek(self, handle: Any, method: str, timeout: float) -> Any:
        """``method()`` of the actor's instance, called in place, in its context.

        No message travels and no virtual time passes: the driver's look at an
        actor's counters (the live status, twice a virtual second) is not part
        of the simulated world, so a run is the same whether it is watched or
        not, and costs no latency draws. The method must not wait: an
        ``async`` one is run to its end at once (:class:`RuntimeError` if it
        awaits something). An actor not built yet is called over the network
        (:meth:`get`).

        Raises:
            SimActorDied: the actor was killed.
        """
        h: SimHandle = handle
        if h.actor.dead:
            raise SimActorDied(f"actor {h.name} is dead")
        if h.instance is None:
            return self.get(self._call(h, method, ()), timeout)
        out = h.actor.new_context().run(getattr(h.instance, method))
        if type(out) is CoroutineType:
            try:
                out.send(None)
            except StopIteration as done:
                return done.value
            out.close()
            raise RuntimeError(f"{h.name}.{method}() waits: it cannot be peeked at")
        return out

    def wait(self, refs: Sequence[Any], timeout: float) -> list[Any]:
        """The refs that resolve within ``timeout`` virtual seconds (all of them at best)."""
        items: list[SimRef] = list(refs)
        self._run_until_done([r.future for r in items], max(0.0, timeout))
        return [r for r in items if r.future.done()]

    def _run_until_done(self, futs: list[asyncio.Future[Any]], timeout: float) -> None:
        pending = [f for f in futs if not f.done()]
        if not pending:
            return
        loop = self.loop
        all_done: asyncio.Future[None] = loop.create_future()
        left = len(pending)

        def one(_f: asyncio.Future[Any]) -> None:
            nonlocal left
            left -= 1
            if left == 0 and not all_done.done():
                all_done.set_result(None)

        for f in pending:
            f.add_done_callback(one)
        try:
            self._drive(asyncio.wait_for(all_done, timeout))
        except TimeoutError:
            pass  # the calls go on, as after ray.get's timeout
        finally:
            for f in pending:
                f.remove_done_callback(one)

    def sleep(self, seconds: float) -> None:
        """Run the simulation for ``seconds`` of virtual time (at least 1 ns, rounded up).

        Like ``time.sleep``, never shorter than asked: a caller that sleeps the
        float difference to a deadline is past it afterwards, not 0 ns short of it
        for ever.
        """
        self._raise_halt()
        if seconds > 0:
            loop = self.loop
            loop.run_until_ns(loop.now_ns + max(1, math.ceil(seconds * NS_PER_S)))
            self._raise_halt()

    def wall(self) -> float:
        """The virtual wall clock."""
        return self.clocks.wall()

    def monotonic(self) -> float:
        """The virtual monotonic clock (the loop's time)."""
        return self.clocks.mono()

    def mono_source(self) -> Callable[[], float] | None:
        """The loop's time, for every clock of the run (``loop.time`` itself: one call less)."""
        return self.loop.time

    def wall_source(self) -> Callable[[], float] | None:
        """The virtual wall clock, for every clock of the run."""
        return self.clocks.wall

    def run(self, factory: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        """Run an admin coroutine on the sim loop, in the driver's context."""
        return self._drive(factory())

    def zk_client(
        self, connect: str, timeout_s: float, *, chroot: str = "", auth: Any = None
    ) -> ZkClient:
        """An admin client on the simulated ensemble."""
        if self._zk_client is None:
            raise RuntimeError("this simulated system has no ZooKeeper")
        return self._zk_client(connect, timeout_s, chroot=chroot, auth=auth)

    def hostname(self) -> str:
        """:data:`HOSTNAME`."""
        return HOSTNAME

    def measure_nodes(self, actors: Mapping[str, Any]) -> dict[str, Any]:
        """One node, ``sim``, with no clock offset: every actor reads the same virtual clock."""
        names = sorted(actors)
        return {
            "actors": {n: HOSTNAME for n in names},
            "nodes": {
                HOSTNAME: {
                    "ip": "127.0.0.1",
                    "hostname": HOSTNAME,
                    "offset_ms": 0.0,
                    "bound_ms": 0.0,
                    "rtt_ms": 0.0,
                    "actors": names,
                }
            },
        }

    def actor_options(self, placement: Any, role: str) -> dict[str, Any]:
        """No placement in one process: ``{}``."""
        del placement, role
        return {}


_PLAIN: frozenset[type] = frozenset({dict, list, tuple, int, float, str, bool, type(None)})
"""Result types that are never awaitable (an answer of these needs no ``isawaitable``)."""


def _fail(fut: asyncio.Future[Any], exc: BaseException) -> None:
    if not fut.done():
        fut.set_exception(exc)
        fut.exception()  # a failed call nobody looks at is not an error of the run (as in Ray)


def _settle(fut: asyncio.Future[Any], value: Any, exc: BaseException | None) -> None:
    if fut.done():
        return
    if exc is not None:
        fut.set_exception(exc)
        fut.exception()  # as _fail
    else:
        fut.set_result(value)


async def _as_coroutine(aw: Any) -> Any:
    return await aw
