"""kazoo's connection handler with the Java client's answer to a reply out of order.

**Emulator choice: it restores the behaviour of Kafka 0.8's ZooKeeper client.**
Kafka 0.8.2 talks to ZooKeeper through ZkClient 0.3 over the Java client
(``org.apache.zookeeper.ClientCnxn``, 3.3.4 up to 3.8). When a reply's xid is
not the one at the head of the pending queue, ``ClientCnxn.readResponse`` marks
that head packet ``CONNECTIONLOSS`` and throws an ``IOException`` ("Xid out of
order"; with an empty pending queue: "Nothing in the queue"). ``SendThread.run``
catches it like any broken connection: ``cleanup()`` fails every pending packet
with ``ConnectionLoss``, watchers get ``Disconnected``, and the thread
reconnects with the *same* session id and password (watches re-armed with
``SetWatches``, ephemerals kept), the session surviving if that happens within
its timeout.

kazoo 2.11's ``ConnectionHandler._read_response`` raises ``RuntimeError``
instead, which its connection loop does not catch: the connection thread dies,
the client goes ``LOST`` without a reconnect, every later request fails with
``ConnectionClosedError``, and the server expires the session a session timeout
later. This happens after a network blackhole shorter than kazoo's read timeout
during which a request was sent (its bytes dropped, no ping lost, so no drop
noticed): the next request's reply comes back with a later xid (conformance
script 29). A legacy member would lose its registration and ownership where
Kafka 0.8 reconnects in well under a second.

:class:`JavaXidConnectionHandler` turns the mismatch into what Java does: the
mismatched request fails with ``ConnectionLoss`` and a ``ConnectionDropped`` is
raised, so kazoo's own connection loop treats it as a dropped connection
(``SUSPENDED``, the other pending requests ``ConnectionLoss``, a reconnect with
the same session after the connection retry policy's back-off, ``CONNECTED``).
As in Java, the mismatched reply's zxid is not taken as the client's last zxid.
What stays kazoo's: the reconnect delay (the retry policy's, about 50 ms, where
Java sleeps a random 0-1 s) and the lost watches (kazoo sends no ``SetWatches``;
``ZkClient`` re-arms its subscriptions itself).

:func:`kazoo_client` builds a ``KazooClient`` with this handler; it is
``ZkClient``'s default raw factory. kazoo itself is not patched: every other
``KazooClient`` keeps kazoo's behaviour.
"""

from __future__ import annotations

from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionDropped, ConnectionLoss
from kazoo.protocol.connection import ConnectionHandler

__all__ = ["JavaXidConnectionHandler", "kazoo_client"]


class JavaXidConnectionHandler(ConnectionHandler):  # type: ignore[misc]  # kazoo is untyped
    """kazoo's ``ConnectionHandler`` whose reply-xid mismatch drops the connection.

    Emulator choice restoring the Java client (Kafka 0.8's): see the module
    docstring (``ClientCnxn.readResponse``'s "Xid out of order" ``IOException``,
    handled by ``SendThread.run`` as a lost connection).
    """

    def _read_response(self, header: Any, buffer: bytes, offset: int) -> Any:
        """Read a reply; a reply that is not for the oldest pending request drops the connection.

        Raises:
            ConnectionDropped: the reply's xid is not the oldest pending
                request's (that request has failed with ``ConnectionLoss``), or
                nothing is pending.
        """
        pending = self.client._pending
        if not pending:
            raise ConnectionDropped(f"nothing pending, but got a reply with xid {header.xid!r}")
        expected = pending[0][2]
        if header.xid != expected:
            _request, async_object, _xid = pending.popleft()
            if async_object is not None:
                async_object.set_exception(ConnectionLoss())
            raise ConnectionDropped(
                f"xids do not match, expected {expected!r} received {header.xid!r}"
            )
        return super()._read_response(header, buffer, offset)


def kazoo_client(**kwargs: Any) -> Any:
    """A new, unstarted ``KazooClient(**kwargs)`` using :class:`JavaXidConnectionHandler`.

    The handler kazoo built in ``__init__`` (not started yet) is replaced by one
    of the subclass with the same retry sleeper, logger and SASL options.
    """
    client = KazooClient(**kwargs)
    built = client._connection
    client._connection = JavaXidConnectionHandler(
        client,
        built.retry_sleeper,
        logger=built.logger,
        sasl_options=built.sasl_options,
    )
    return client
