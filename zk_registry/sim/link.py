"""``SimZkLink``: the simulated stand-in for :class:`zk_registry.proxy.FaultProxy`.

A legacy consumer that a fault will hit reaches ZooKeeper through its own
proxy (``ConsumerHostCore._add_legacy``); the proxy cuts it off the way a crash
or a partition does (design §3.5). This class has the proxy's surface --
``start()`` (returns a port), ``address``, ``latency_s``, ``set_mode``,
``close()``, ``mode`` -- and its meaning, read from ``zk_registry/proxy.py``:

* a new connection goes to the first member that accepts a TCP connection
  (running and listening; it may still refuse to *serve*, which ZooKeeper says
  by closing the connection), starting at the member used last;
* ``PASS``: bytes flow, each one-way trip delayed by ``latency_s`` on top of the
  loopback latency (``_deliver``), order kept;
* ``BLACKHOLE``: every byte is read and dropped, both ways, including what was
  in flight; sockets stay open, so the client's pings time out and, unless
  healed in time, the server expires the session. New connections are accepted
  (and their bytes dropped: the client's Connect times out). A close by either
  side still reaches the other (``_pipe`` aborts both writers on EOF);
* ``DOWN``: every connection is reset at once (the client sees it at once, the
  server closes its side) and new connections are reset as they come;
* ``close()``: ``DOWN`` and no longer listening.

The link itself holds no sockets: each connection through it is a
:class:`~zk_registry.sim.wire.Channel` of the ensemble whose latency adds the
link's ``latency_s`` and whose mode follows the link's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emulator.sim.network import LinkMode
from zk_registry.proxy import ProxyMode
from zk_registry.sim.wire import Channel, ClientEnd

if TYPE_CHECKING:
    from zk_registry.sim.server import SimEnsemble

__all__ = ["SimZkLink"]


class SimZkLink:
    """One client's proxy to the ensemble's members.

    Args:
        ensemble: the simulated ensemble.
        upstream: the members' ``host:port`` (``ensemble.hosts``).
        connect_timeout_s: kept for the proxy's signature (an upstream connect
            is answered at once here: a member listens or refuses).

    Raises:
        ValueError: no upstream, or one that is not a member of ``ensemble``.
    """

    def __init__(
        self, ensemble: SimEnsemble, upstream: list[str], connect_timeout_s: float = 2.0
    ) -> None:
        if not upstream:
            raise ValueError("a proxy needs at least one upstream server")
        indices: list[int] = []
        for address in upstream:
            index = ensemble.member_for(address)
            if index is None:
                raise ValueError(f"{address!r} is not a member of the simulated ensemble")
            indices.append(index)
        self._ensemble = ensemble
        self._upstream = indices
        self._next = 0
        self._connect_timeout_s = connect_timeout_s
        self._address: str | None = None
        self._channels: dict[Channel, None] = {}
        self.mode = ProxyMode.PASS
        self.port = 0
        self.latency_s = 0.0
        """One-way delay added to every message in both directions."""
        self.connections = 0
        """Connections accepted so far."""

    async def start(self) -> int:
        """Listen: the link gets an address; returns its port."""
        if self._address is None:
            self._address = self._ensemble.register_link(self._connect)
            self.port = int(self._address.rsplit(":", 1)[1])
        return self.port

    @property
    def address(self) -> str:
        """The ``host:port`` a client connects to."""
        if self._address is None:
            return f"sim-link-unstarted:{self.port}"
        return self._address

    @property
    def blackholed(self) -> bool:
        """Whether bytes are dropped now."""
        return self.mode is ProxyMode.BLACKHOLE

    def set_mode(self, mode: ProxyMode) -> None:
        """Change what the link does; ``DOWN`` resets every open connection at once."""
        self.mode = ProxyMode(mode)
        for ch in self._open_channels():
            if self.mode is ProxyMode.DOWN:
                self._ensemble.reset_channel(ch)
            else:
                ch.set_mode(LinkMode.BLACKHOLE if self.blackholed else LinkMode.PASS)

    async def close(self) -> None:
        """Stop listening and reset every connection."""
        self.mode = ProxyMode.DOWN
        if self._address is not None:
            self._ensemble.unregister_link(self._address)
        for ch in self._open_channels():
            self._ensemble.reset_channel(ch)

    def _open_channels(self) -> list[Channel]:
        live = [ch for ch in self._channels if ch.client_open or ch.server_open]
        self._channels = dict.fromkeys(live)
        return live

    def _connect(self, client: ClientEnd) -> Channel:
        """A client connects to the link's address (the ensemble routes it here)."""
        ens = self._ensemble
        if self.mode is ProxyMode.DOWN:
            return ens.refused_channel(client, self)
        n = len(self._upstream)
        for i in range(n):
            k = (self._next + i) % n
            if ens.accepts(self._upstream[k]):
                self._next = k
                ch = ens.member_channel(self._upstream[k], client, self)
                self._channels[ch] = None
                self.connections += 1
                return ch
        return ens.refused_channel(client, self)  # no upstream member accepted
