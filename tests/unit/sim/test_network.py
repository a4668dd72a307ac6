"""``Link`` and ``Network``: latency draws, FIFO, modes, actor contexts."""

from __future__ import annotations

import contextvars

from emulator.sim.loop import ActorContext, SimEventLoop, current_actor
from emulator.sim.network import (
    DRIVER,
    RAY_LINK_LATENCY,
    Link,
    LinkMode,
    LinkRefused,
    Network,
    UniformLatency,
)
from emulator.sim.rng import Streams


def _who() -> str | None:
    actor = current_actor.get()
    return None if actor is None else actor.name


def test_baseline_ray_latency_and_stream(loop: SimEventLoop) -> None:
    b = ActorContext("b")
    net = Network(loop, Streams(9))
    got: list[int] = []
    for i in range(500):
        loop.call_at_ns(i * 1_000_000, net.send, None, b, lambda: got.append(loop.now_ns))
    loop.run_until(1)
    lat = [t - i * 1_000_000 for i, t in enumerate(got)]
    assert len(got) == 500
    assert all(300_000 <= d <= 700_000 for d in lat)
    assert min(lat) < 320_000 and max(lat) > 680_000
    # The link draws from its own named stream and nothing else.
    ref = Streams(9).stream(f"net/{DRIVER}->b")
    assert lat == [RAY_LINK_LATENCY(ref) for _ in range(500)]


def _burst(loop: SimEventLoop, fifo: bool) -> list[tuple[int, int]]:
    rng = Streams(3).stream("l")
    link = Link(loop, "a", ActorContext("b"), rng, UniformLatency(0, 10_000_000), fifo=fifo)
    got: list[tuple[int, int]] = []
    for i in range(200):
        loop.call_at_ns(i * 100_000, link.send, lambda i=i: got.append((i, loop.now_ns)))
    loop.run_until(1)
    return got


def test_a_fifo_link_keeps_send_order(loop: SimEventLoop) -> None:
    got = _burst(loop, fifo=True)
    assert [i for i, _ in got] == list(range(200))
    assert [t for _, t in got] == sorted(t for _, t in got)


def test_a_reordering_link_lets_messages_overtake() -> None:
    loop = SimEventLoop()
    try:
        got = _burst(loop, fifo=False)
    finally:
        loop.close()
    order = [i for i, _ in got]
    assert sorted(order) == list(range(200)) and order != list(range(200))
    assert [t for _, t in got] == sorted(t for _, t in got)  # delivered by time


def test_delivery_runs_in_a_fresh_context_of_the_destination(loop: SimEventLoop) -> None:
    a, b = ActorContext("a"), ActorContext("b")
    net = Network(loop, Streams(1))
    var: contextvars.ContextVar[int] = contextvars.ContextVar("var", default=0)
    seen: list[tuple[str | None, int]] = []

    def on_message() -> None:
        seen.append((_who(), var.get()))
        var.set(99)

    async def sender() -> None:
        var.set(5)  # the sender's variables do not travel
        net.send(a, b, on_message)
        net.send(a, b, on_message)

    loop.run_until_complete(loop.spawn_in(a, sender()))
    loop.run_until(1)
    assert seen == [("b", 0), ("b", 0)]


def test_blackhole_drops_silently(loop: SimEventLoop) -> None:
    b = ActorContext("b")
    link = Network(loop, Streams(1)).link(None, b)
    got: list[str] = []
    errors: list[LinkRefused] = []
    link.send(got.append, "in flight", on_error=errors.append)
    link.set_mode(LinkMode.BLACKHOLE)
    assert link.send(got.append, "sent into the hole", on_error=errors.append) is None
    loop.run_until(1)
    assert got == [] and errors == []
    link.set_mode(LinkMode.PASS)
    link.send(got.append, "healed")
    loop.run_until(2)
    assert got == ["healed"]
    assert (link.sent, link.delivered, link.dropped, link.refused) == (3, 1, 2, 0)


def test_down_refuses_in_the_senders_context(loop: SimEventLoop) -> None:
    a, b = ActorContext("a"), ActorContext("b")
    net = Network(loop, Streams(1))
    link = net.link(a, b)
    got: list[str] = []
    errors: list[tuple[str | None, int, str]] = []

    def on_error(err: LinkRefused) -> None:
        errors.append((_who(), loop.now_ns, str(err)))

    def send(tag: str) -> None:
        link.send(got.append, tag, on_error=on_error)

    loop.call_soon_in(a, send, "in flight")
    loop.run_until(0.0001)  # sent at 0, arrives at >= 0.3 ms
    link.set_mode(LinkMode.DOWN)
    loop.call_soon_in(a, send, "refused")
    loop.run_until(0.0002)
    link.set_mode(LinkMode.PASS)  # back up before the in-flight one arrives: still lost
    loop.run_until(1)
    assert got == []
    assert [(who, t) for who, t, _ in errors] == [("a", 100_000), ("a", link._last_ns)]
    assert all(msg == "link a->b is down" for _, _, msg in errors)
    loop.call_soon_in(a, send, "after")
    loop.run_until(2)
    assert got == ["after"]
    assert (link.sent, link.delivered, link.refused) == (3, 1, 2)


def test_a_dead_destination_drops_and_a_dead_sender_hears_nothing(loop: SimEventLoop) -> None:
    a, b = ActorContext("a"), ActorContext("b")
    net = Network(loop, Streams(1))
    got: list[str] = []
    errors: list[LinkRefused] = []
    loop.call_soon_in(a, lambda: net.send(a, b, got.append, "x"))
    loop.run_until(0)
    loop.kill(b)
    loop.run_until(1)
    assert got == []
    net.link(a, b).set_mode(LinkMode.DOWN)

    def send_then_die() -> None:
        net.send(a, b, got.append, "y", on_error=errors.append)  # refusal scheduled ...
        loop.kill(a)  # ... and a dies before it runs

    loop.call_soon_in(a, send_then_die)
    loop.run_until(2)
    assert errors == [] and net.link(a, b).refused == 1


def test_a_stalled_destination_gets_its_messages_late(loop: SimEventLoop) -> None:
    b = ActorContext("b")
    net = Network(loop, Streams(1))
    got: list[tuple[str, int]] = []
    for tag in ("m1", "m2"):
        net.send(None, b, lambda tag=tag: got.append((tag, loop.now_ns)))
    loop.stall(b, 0.05)
    loop.run_until(1)
    assert got == [("m1", 50_000_000), ("m2", 50_000_000)]


def test_links_are_per_name_and_follow_a_restarted_actor(loop: SimEventLoop) -> None:
    a, b1 = ActorContext("a"), ActorContext("b")
    net = Network(loop, Streams(4))
    link = net.link(a, b1)
    assert net.link(a, b1) is link and net.link(b1, a) is not link
    got: list[tuple[str, int]] = []

    def deliver(tag: str) -> None:
        actor = current_actor.get()
        got.append((tag, id(actor)))

    net.send(a, b1, deliver, "to the old b")
    loop.kill(b1)
    b2 = ActorContext("b")  # restarted under the same name
    assert net.link(a, b2) is link and link.dst is b2
    net.send(a, b2, deliver, "to the new b")
    loop.run_until(1)
    assert got == [("to the new b", id(b2))]
    assert [(lk.src, lk.dst.name if lk.dst else None) for lk in net.links()] == [
        ("a", "b"),
        ("b", "a"),
    ]
