"""The simulated network: one-way links with drawn latency, FIFO and fault modes.

A :class:`Link` carries messages one way, from a sender to a destination actor
(design §2, §4.3, §5.1). Sending draws an integer latency in nanoseconds from
the link's own named stream and schedules the delivery with ``loop.call_at_ns``
in a fresh context of the destination actor, so the delivery belongs to the
destination: a dead destination drops it, a stalled one defers it.

* **FIFO** (the default, as TCP and the baseline Ray links): ``deliver_at =
  max(now + latency, last_deliver_at)``; with equal delivery times the loop's
  FIFO tie order keeps the send order. On a loop that draws the order of ties
  (exploration) a FIFO link delivers at least 1 ns after its previous message
  instead, so the drawn order cannot swap them. A reordering link (``fifo=False``,
  exploration of Ray's async actors, design §1.3) skips the clamp.
* **Modes**, as the fault proxy's (``zk_registry/proxy.py``, design §3.5) as far
  as a generic one-way link goes:

  - ``PASS``: delivered after the latency;
  - ``BLACKHOLE``: accepted and silently dropped, both at sending and when a
    message in flight arrives while the link is blackholed (the sender learns
    nothing: it times out on its own);
  - ``DOWN``: refused: the sender's ``on_error`` is called with
    :class:`LinkRefused` (soon, in the sender's context), and messages in
    flight when the link went down are lost with the same error (the
    connection was reset under them), even if it is back up when they arrive.

:class:`Network` holds the links by ``(src, dst)`` name, built on first use
with the baseline Ray latency of §4.3: uniform in [0.3, 0.7] ms one way.
"""

from __future__ import annotations

import contextvars
import enum
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from emulator.sim.loop import ActorContext, SimEventLoop
from emulator.sim.rng import Streams, uniform_ns

__all__ = [
    "DRIVER",
    "RAY_LINK_LATENCY",
    "LatencyModel",
    "Link",
    "LinkMode",
    "LinkRefused",
    "Network",
    "UniformLatency",
]

LatencyModel = Callable[[random.Random], int]
"""Draws one one-way latency in integer nanoseconds from the link's stream."""

DRIVER = "driver"
"""The endpoint name used for code that runs in no actor (the orchestrator, tests)."""


@dataclass(frozen=True)
class UniformLatency:
    """Latency uniform in ``[lo_ns, hi_ns]`` (integers, both ends included)."""

    lo_ns: int
    hi_ns: int

    def __call__(self, rng: random.Random) -> int:
        """One draw."""
        return uniform_ns(rng, self.lo_ns, self.hi_ns)


RAY_LINK_LATENCY = UniformLatency(300_000, 700_000)
"""Baseline Ray call latency, one way: [0.3, 0.7] ms (manifests measure 0.86-1.28 ms RTT)."""


class LinkMode(enum.Enum):
    """What a link does with a message (the fault proxy's modes)."""

    PASS = "pass"
    BLACKHOLE = "blackhole"
    DOWN = "down"


class LinkRefused(ConnectionError):
    """The link is down: the message was refused, or lost when the link went down."""


def _name(end: ActorContext | None) -> str:
    return DRIVER if end is None else end.name


class Link:
    """One direction between two endpoints.

    Args:
        loop: the sim loop that delivers.
        src: the sending actor's name (:data:`DRIVER` for none).
        dst: the destination actor (``None``: deliveries run in no actor).
        rng: this link's stream.
        latency: draws the one-way latency in ns.
        fifo: keep send order (clamp delivery times); ``False`` lets a later
            message overtake an earlier one.
    """

    def __init__(
        self,
        loop: SimEventLoop,
        src: str,
        dst: ActorContext | None,
        rng: random.Random,
        latency: LatencyModel,
        *,
        fifo: bool = True,
    ) -> None:
        self.loop = loop
        self.src = src
        self.dst = dst
        self.rng = rng
        self.latency = latency
        self.fifo = fifo
        self._mode = LinkMode.PASS
        self._resets = 0  # times the link went DOWN: in-flight messages of an older one are lost
        self._last_ns = 0
        # the least gap between two deliveries of a FIFO link: 0 keeps their
        # order on a FIFO-tie loop; a drawn-tie loop could swap equal times
        self._gap = 1 if loop.draws_ties else 0
        self.sent = 0
        self.delivered = 0
        self.dropped = 0
        self.refused = 0

    @property
    def mode(self) -> LinkMode:
        """The current mode."""
        return self._mode

    def set_mode(self, mode: LinkMode) -> None:
        """Switch to ``mode``; going ``DOWN`` resets the link (in-flight messages are lost)."""
        if mode is LinkMode.DOWN and self._mode is not LinkMode.DOWN:
            self._resets += 1
        self._mode = mode

    def send(
        self,
        callback: Callable[..., object],
        *args: Any,
        on_error: Callable[[LinkRefused], object] | None = None,
    ) -> int | None:
        """Send: ``callback(*args)`` runs at the destination after the link's latency.

        Args:
            callback: what the delivery runs, in the destination's context.
            args: its arguments.
            on_error: called with :class:`LinkRefused` in the sender's context
                when the link is (or goes) down before delivery.

        Returns:
            The delivery time in ns, or ``None`` when the message was dropped or refused.
        """
        loop = self.loop
        # where a refusal is reported (only ever read with an on_error to call)
        sender = None if on_error is None else contextvars.copy_context()
        self.sent += 1
        if self._mode is LinkMode.BLACKHOLE:
            self.dropped += 1
            return None
        if self._mode is LinkMode.DOWN:
            self._refuse(on_error, sender)
            return None
        at = loop.now_ns + self.latency(self.rng)
        if self.fifo:
            at = max(at, self._last_ns + self._gap)
            self._last_ns = at
        ctx = contextvars.Context() if self.dst is None else self.dst.new_context()
        loop._call_at_ns(at, self._arrive, (self._resets, callback, args, on_error, sender), ctx)
        return at

    def _arrive(
        self,
        resets: int,
        callback: Callable[..., object],
        args: tuple[Any, ...],
        on_error: Callable[[LinkRefused], object] | None,
        sender: contextvars.Context | None,
    ) -> None:
        if resets != self._resets:
            self._refuse(on_error, sender)
            return
        if self._mode is LinkMode.BLACKHOLE:
            self.dropped += 1
            return
        self.delivered += 1
        callback(*args)

    def _refuse(
        self, on_error: Callable[[LinkRefused], object] | None, sender: contextvars.Context | None
    ) -> None:
        self.refused += 1
        if on_error is not None:
            err = LinkRefused(f"link {self.src}->{_name(self.dst)} is down")
            self.loop.call_soon(on_error, err, context=sender)

    def __repr__(self) -> str:
        return f"Link({self.src}->{_name(self.dst)}, {self._mode.value}, fifo={self.fifo})"


class Network:
    """The links of a run, by ``(src, dst)`` name, built on first use.

    Each link draws from the stream ``net/<src>-><dst>`` of ``streams``, so a
    link's draws depend only on the seed and on its own traffic.

    Args:
        loop: the sim loop.
        streams: the run's streams.
        latency: the latency model of new links (baseline: :data:`RAY_LINK_LATENCY`).
        fifo: whether new links keep send order.
    """

    def __init__(
        self,
        loop: SimEventLoop,
        streams: Streams,
        *,
        latency: LatencyModel = RAY_LINK_LATENCY,
        fifo: bool = True,
    ) -> None:
        self.loop = loop
        self.streams = streams
        self.latency = latency
        self.fifo = fifo
        self._links: dict[tuple[str, str], Link] = {}
        # the same links by the two ends' contexts (held, so never mistaken for
        # newer ones): found without building the names' key
        self._by_ends: dict[tuple[ActorContext | None, ActorContext | None], Link] = {}

    def link(self, src: ActorContext | None, dst: ActorContext | None) -> Link:
        """The link ``src -> dst`` (``None``: the driver), created on first use.

        A link is keyed by names, so an actor restarted under the same name (a
        new :class:`ActorContext`) keeps its links and their streams; the link
        then delivers to the new incarnation (what was in flight to the old
        one is lost with it).
        """
        link = self._by_ends.get((src, dst))
        if link is None:
            key = (_name(src), _name(dst))
            link = self._links.get(key)
            if link is None:
                rng = self.streams.stream(f"net/{key[0]}->{key[1]}")
                link = Link(self.loop, key[0], dst, rng, self.latency, fifo=self.fifo)
                self._links[key] = link
            self._by_ends[(src, dst)] = link
        if link.dst is not dst:
            link.dst = dst
        return link

    def send(
        self,
        src: ActorContext | None,
        dst: ActorContext | None,
        callback: Callable[..., object],
        *args: Any,
        on_error: Callable[[LinkRefused], object] | None = None,
    ) -> int | None:
        """``link(src, dst).send(callback, *args, on_error=on_error)``."""
        return self.link(src, dst).send(callback, *args, on_error=on_error)

    def links(self) -> list[Link]:
        """Every link created so far, sorted by ``(src, dst)``."""
        return [self._links[k] for k in sorted(self._links)]
