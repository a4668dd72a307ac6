"""A loopback TCP proxy that can cut one client off ZooKeeper the way a crash does.

A legacy consumer whose connection goes through its own :class:`FaultProxy`
can be crashed (the TCP connection to the server drops without a
``closeSession``, so the server expires the session after its timeout) or
blackholed (bytes stop flowing both ways while the sockets stay open, as in a
network partition). No netem or toxiproxy is needed (environment-notes.md,
"Fault injection").

The proxy listens on 127.0.0.1 only and runs in the caller's asyncio loop.
For an ensemble it forwards each new connection to the first upstream member
that accepts, starting after the one used last, so a client keeps its session
when a member dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum


class ProxyMode(enum.StrEnum):
    """What the proxy does with traffic."""

    PASS = "pass"
    BLACKHOLE = "blackhole"  # hold the sockets, drop every byte
    DOWN = "down"  # connections are reset and new ones refused


class FaultProxy:
    """Forward one client's ZooKeeper connections to an upstream ensemble.

    Args:
        upstream: ``host:port`` of each ensemble member.
        connect_timeout_s: bound on each upstream connect.
    """

    def __init__(self, upstream: list[str], connect_timeout_s: float = 2.0) -> None:
        if not upstream:
            raise ValueError("a proxy needs at least one upstream server")
        self._upstream = [(h, int(p)) for h, p in (u.rsplit(":", 1) for u in upstream)]
        self._next = 0
        self._connect_timeout_s = connect_timeout_s
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.mode = ProxyMode.PASS
        self.port = 0
        self.bytes_forwarded = 0
        # One-way delay added to every byte in both directions (a client far
        # from the ensemble); order is kept and throughput is not reduced.
        self.latency_s = 0.0

    async def start(self) -> int:
        """Listen on 127.0.0.1 on a free port; return the port."""
        self._server = await asyncio.start_server(self._on_client, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    @property
    def address(self) -> str:
        """The ``host:port`` a client connects to."""
        return f"127.0.0.1:{self.port}"

    def set_mode(self, mode: ProxyMode) -> None:
        """Change what the proxy does; DOWN drops every open connection at once."""
        self.mode = mode
        if mode is ProxyMode.DOWN:
            self._drop_all()

    def _drop_all(self) -> None:
        for w in list(self._writers):
            transport = w.transport
            # abort(): RST, no FIN handshake and no closeSession from the client.
            transport.abort()
        self._writers.clear()

    async def close(self) -> None:
        """Stop listening and drop every connection."""
        self.mode = ProxyMode.DOWN
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            self._server = None
        self._drop_all()
        for t in list(self._tasks):
            t.cancel()

    async def _open_upstream(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        last: Exception | None = None
        for i in range(len(self._upstream)):
            host, port = self._upstream[(self._next + i) % len(self._upstream)]
            try:
                conn = await asyncio.wait_for(
                    asyncio.open_connection(host, port), self._connect_timeout_s
                )
            except (OSError, TimeoutError) as exc:
                last = exc
                continue
            self._next = (self._next + i) % len(self._upstream)
            return conn
        raise ConnectionError(f"no upstream ZooKeeper member accepted: {last}")

    async def _on_client(
        self, creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter
    ) -> None:
        if self.mode is ProxyMode.DOWN:
            cwriter.transport.abort()
            return
        try:
            ureader, uwriter = await self._open_upstream()
        except ConnectionError:
            cwriter.transport.abort()
            return
        self._writers.update((cwriter, uwriter))
        t1 = asyncio.ensure_future(self._pipe(creader, uwriter, cwriter))
        t2 = asyncio.ensure_future(self._pipe(ureader, cwriter, uwriter))
        self._tasks.update((t1, t2))
        t1.add_done_callback(self._tasks.discard)
        t2.add_done_callback(self._tasks.discard)

    async def _deliver(
        self, queue: asyncio.Queue[tuple[float, bytes] | None], writer: asyncio.StreamWriter
    ) -> None:
        """Write delayed chunks when their time comes (the ``latency_s`` path)."""
        loop = asyncio.get_running_loop()
        while True:
            item = await queue.get()
            try:
                if item is None:
                    return
                due, data = item
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                if self.mode is not ProxyMode.PASS:
                    continue  # cut meanwhile: bytes in flight are lost
                writer.write(data)
                self.bytes_forwarded += len(data)
                await writer.drain()
            finally:
                queue.task_done()

    async def _pipe(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        other: asyncio.StreamWriter,
    ) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()
        sender = asyncio.ensure_future(self._deliver(queue, writer))
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                if self.mode is ProxyMode.PASS:
                    if self.latency_s > 0:
                        queue.put_nowait((loop.time() + self.latency_s, data))
                    else:
                        await sender_idle(queue)
                        writer.write(data)
                        self.bytes_forwarded += len(data)
                        await writer.drain()
                elif self.mode is ProxyMode.DOWN:
                    break
                # BLACKHOLE: read and drop.
            queue.put_nowait(None)  # deliver what is in flight, then close
            with contextlib.suppress(Exception):
                await asyncio.wait_for(sender, self.latency_s + 2.0)
        except (ConnectionError, OSError, asyncio.CancelledError):
            pass
        finally:
            sender.cancel()
            for w in (writer, other):
                self._writers.discard(w)
                if self.mode is ProxyMode.PASS:
                    with contextlib.suppress(Exception):
                        w.close()
                else:
                    w.transport.abort()


async def sender_idle(queue: asyncio.Queue[tuple[float, bytes] | None]) -> None:
    """Wait until delayed chunks still queued are written (latency was just set to 0)."""
    if not queue.empty():
        await queue.join()
