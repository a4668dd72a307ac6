"""ZooKeeper faults that act on the server: real session expiry.

A ZooKeeper session only expires when the *server* decides so. kazoo's test
hook (``client._call(_SESSION_EXPIRED, None)``) only fakes it on the client side:
the server keeps the old ephemerals until its own timeout, which is not what a
legacy Kafka consumer sees when its session really expires (its
``/consumers/<group>/ids/<id>`` and ``.../owners/...`` znodes vanish and every
other member's watch fires).

:func:`expire_session` expires a session for real, the way ZooKeeper's own
tests and Curator's ``KillSession`` do: a second client connects with the
victim's ``(session_id, password)``, which moves the session to the new
connection (the server drops the victim's socket), then closes it (the server
deletes the session and its ephemerals). When the victim reconnects the server
answers "session expired" and kazoo reports ``KazooState.LOST``. The function
then checks the server side, bounded: the session is gone from every reachable
member's ``dump`` and, if a path is given, that ephemeral no longer exists
as seen from a third, independent client.
"""

from __future__ import annotations

import contextlib
import time

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.retry import KazooRetry

from zk_registry.server import (
    ZooKeeperError,
    four_letter_word,
    parse_connect_string,
    split_host_port,
)

__all__ = [
    "SessionExpiryError",
    "expire_session",
    "session_on_server",
    "split_connect_string",
]

_POLL_S = 0.02
_UNKNOWN = object()


class SessionExpiryError(ZooKeeperError):
    """The session could not be expired, or its expiry could not be confirmed in time."""


def split_connect_string(connect_string: str) -> tuple[list[tuple[str, int]], str]:
    """Split ``"h1:p1,h2:p2/chroot"`` into ``([("h1", p1), ("h2", p2)], "/chroot")``.

    The chroot is ``""`` when there is none (:func:`zk_registry.server.parse_connect_string`).

    Raises:
        ValueError: on a malformed host entry.
    """
    members, chroot = parse_connect_string(connect_string)
    return [split_host_port(m, connect_string) for m in members], chroot


def session_on_server(connect_string: str, session_id: int, timeout: float = 2.0) -> bool | None:
    """Whether any reachable member still tracks ``session_id``, from the 4lw ``dump``.

    ``dump`` lists the session tracker and the sessions with ephemerals (on the
    leader or a standalone server; followers list the global sessions).

    Returns:
        True or False, or None if no member answered a usable ``dump``
        (all down, or ``dump`` not in ``4lw.commands.whitelist``).
    """
    hosts, _ = split_connect_string(connect_string)
    needle = f"0x{session_id:x}"
    usable = False
    for host, port in hosts:
        try:
            text = four_letter_word(host, port, "dump", timeout=timeout)
        except OSError:
            continue
        if "SessionTracker dump" not in text:
            continue  # not whitelisted, or not serving
        usable = True
        tracked = text.split("Connections dump:", 1)[0]
        if needle in tracked:
            return True
    return False if usable else None


def expire_session(
    connect_string: str,
    session_id: int,
    password: bytes,
    *,
    ephemeral_path: str | None = None,
    timeout: float = 10.0,
) -> float:
    """Expire the session ``(session_id, password)`` on the server, and confirm it.

    Args:
        connect_string: the ensemble, optionally with a chroot (``ephemeral_path``
            is then relative to it, as for the victim).
        session_id, password: the victim's ``KazooClient.client_id``.
        ephemeral_path: an ephemeral znode owned by the session; if given, wait
            until another client sees it gone.
        timeout: bound on the whole operation, in seconds.

    Returns:
        Seconds from the start of the call until the expiry was confirmed.

    Raises:
        SessionExpiryError: if the session could not be taken over, or is still
            on the server (or its ephemeral still exists) when ``timeout`` ends,
            or there is no way to confirm (no path given and no usable ``dump``).
    """
    started = time.monotonic()
    deadline = started + timeout

    def remaining() -> float:
        return max(0.05, deadline - time.monotonic())

    intruder = KazooClient(
        hosts=connect_string,
        client_id=(session_id, password),
        timeout=remaining(),
        connection_retry=KazooRetry(max_tries=-1, delay=0.05, max_delay=0.5, deadline=timeout),
    )
    try:
        try:
            intruder.start(timeout=remaining())
        except Exception as exc:
            raise SessionExpiryError(
                f"could not connect with session 0x{session_id:x} to {connect_string}: {exc}"
            ) from exc
        intruder.stop()  # sends closeSession: the server deletes the session and its ephemerals
    finally:
        with contextlib.suppress(Exception):
            intruder.stop()
        with contextlib.suppress(Exception):
            intruder.close()

    if ephemeral_path is not None:
        _wait_node_gone(connect_string, ephemeral_path, deadline, session_id)

    confirmed_by_dump = False
    while True:
        tracked = session_on_server(connect_string, session_id, timeout=min(2.0, remaining()))
        if tracked is False:
            confirmed_by_dump = True
            break
        if tracked is None:
            break
        if time.monotonic() >= deadline:
            raise SessionExpiryError(
                f"session 0x{session_id:x} still tracked by the server {timeout}s after closing it"
            )
        time.sleep(_POLL_S)
    if not confirmed_by_dump and ephemeral_path is None:
        raise SessionExpiryError(
            "cannot confirm the expiry: no ephemeral_path given and no member answers 'dump' "
            "(is it in 4lw.commands.whitelist?)"
        )
    return time.monotonic() - started


def _wait_node_gone(connect_string: str, path: str, deadline: float, session_id: int) -> None:
    checker = KazooClient(hosts=connect_string, timeout=max(0.5, deadline - time.monotonic()))
    try:
        try:
            checker.start(timeout=max(0.05, deadline - time.monotonic()))
        except Exception as exc:
            raise SessionExpiryError(
                f"checker client could not connect to {connect_string}: {exc}"
            ) from exc
        while True:
            try:
                stat = checker.exists(path)
            except KazooException:
                stat = _UNKNOWN  # e.g. ConnectionLoss while a member restarts: ask again
            if stat is None:
                return
            if stat is not _UNKNOWN and stat.ephemeralOwner != session_id:
                return  # already re-created by a newer session
            if time.monotonic() >= deadline:
                raise SessionExpiryError(
                    f"ephemeral {path} of session 0x{session_id:x} still exists on the server"
                )
            time.sleep(_POLL_S)
    finally:
        with contextlib.suppress(Exception):
            checker.stop()
        with contextlib.suppress(Exception):
            checker.close()
