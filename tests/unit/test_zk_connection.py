"""``zk_registry.connection``: a reply out of order drops the connection, as in the Java client.

kazoo's handler is driven directly, without a socket: a ``KazooClient`` is built
(unstarted: no thread, no connection) and its ``_read_response`` is fed reply
headers against the client's pending queue. The real-server behaviour is
conformance script 29.
"""

from __future__ import annotations

from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionDropped, ConnectionLoss
from kazoo.protocol.connection import ConnectionHandler
from kazoo.protocol.serialization import Exists, ReplyHeader
from kazoo.retry import KazooRetry

from zk_registry.client import ZkClient
from zk_registry.connection import JavaXidConnectionHandler, kazoo_client

HOSTS = "127.0.0.1:1"  # never connected to


def _pending(client: Any, *xids: int) -> list[Any]:
    """Queue an ``exists("/n<xid>")`` as sent with each xid; return their async results."""
    results = []
    for xid in xids:
        result = client.handler.async_result()
        client._pending.append((Exists(f"/n{xid}", None), result, xid))
        results.append(result)
    return results


def test_the_factory_installs_the_handler_on_its_client_only() -> None:
    retry = KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=1.0)
    client = kazoo_client(hosts=HOSTS, timeout=4.0, connection_retry=retry)
    handler = client._connection
    assert type(handler) is JavaXidConnectionHandler
    assert handler.client is client and handler.handler is client.handler
    assert handler.retry_sleeper.max_delay == 1.0 and handler.retry_sleeper.delay == 0.05
    assert type(KazooClient(hosts=HOSTS)._connection) is ConnectionHandler  # kazoo unpatched
    zk = ZkClient(HOSTS, 4.0)
    assert type(zk.kazoo._connection) is JavaXidConnectionHandler  # ZkClient's default


def test_a_reply_out_of_order_fails_the_oldest_request_and_drops_the_connection() -> None:
    client = kazoo_client(hosts=HOSTS)
    client.last_zxid = 5
    lost, answered = _pending(client, 1, 2)
    with pytest.raises(ConnectionDropped, match="expected 1 received 2"):
        client._connection._read_response(ReplyHeader(2, 9, 0), b"", 0)
    assert isinstance(lost.exception, ConnectionLoss)
    assert not answered.ready()  # still pending: kazoo's drop handling fails it
    assert [xid for _, _, xid in client._pending] == [2]
    assert client.last_zxid == 5  # as Java: a mismatched reply's zxid is not taken
    client._notify_pending("CONNECTING")  # what kazoo's loop does next
    assert isinstance(answered.exception, ConnectionLoss)


def test_a_reply_with_nothing_pending_drops_the_connection() -> None:
    client = kazoo_client(hosts=HOSTS)
    with pytest.raises(ConnectionDropped, match="nothing pending"):
        client._connection._read_response(ReplyHeader(3, 9, 0), b"", 0)


def test_a_reply_in_order_is_read_as_kazoo_reads_it() -> None:
    client = kazoo_client(hosts=HOSTS)
    first, second = _pending(client, 1, 2)
    no_node = -101
    assert client._connection._read_response(ReplyHeader(1, 7, no_node), b"", 0) is None
    assert first.ready() and first.value is None  # exists + NoNode: None
    assert client.last_zxid == 7
    assert not second.ready() and len(client._pending) == 1
