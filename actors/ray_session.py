"""Joining or starting Ray, within bounds, without losing the process's signal handlers."""

from __future__ import annotations

import contextlib
import os
import socket
import time
from typing import Any

import ray

from actors.run_files import RunError

RAY_PROBE_TIMEOUT_S = 10.0
"""Bound on finding a Ray head at ``--ray-address`` before joining it."""


def probe_ray(address: str, timeout_s: float = RAY_PROBE_TIMEOUT_S) -> str:
    """The GCS address behind ``address`` once something there speaks gRPC, within the bound.

    ``ray.init(address=...)`` retries an unreachable GCS for minutes; this
    answers in at most ``timeout_s``: a TCP connect, then the HTTP/2
    connection preface, which a gRPC server answers with a SETTINGS frame.
    ``ray://`` (Ray Client) addresses get the TCP check only.

    Raises:
        RunError: one line: unreachable, or not a Ray head.
    """
    from ray._private.services import canonicalize_bootstrap_address

    target = address
    if address.startswith("ray://"):
        target = address.removeprefix("ray://")
    elif address == "auto":
        try:
            found = canonicalize_bootstrap_address("auto")
        except Exception as exc:
            raise RunError(f"--ray-address auto: {str(exc).splitlines()[0]}") from None
        if not found:
            raise RunError("--ray-address auto: no Ray cluster was started on this machine")
        target = str(found)
    host, _, port = target.rpartition(":")
    try:
        port_no = int(port)
    except ValueError:
        raise RunError(f"--ray-address {address!r}: not host:port") from None
    deadline = time.monotonic() + timeout_s
    try:
        with socket.create_connection((host or "127.0.0.1", port_no), timeout=timeout_s) as s:
            if address.startswith("ray://"):
                return address
            s.settimeout(max(0.1, deadline - time.monotonic()))
            s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
            head = s.recv(9)
    except TimeoutError:
        raise RunError(
            f"Ray at {address} did not answer within {timeout_s:g} s (is it a Ray head's GCS port?)"
        ) from None
    except OSError as exc:
        raise RunError(
            f"Ray at {address} is unreachable ({exc.strerror or type(exc).__name__})"
        ) from None
    if len(head) < 9 or head[3] != 0x04:
        raise RunError(f"{address} is not a Ray head (no gRPC answer on that port)")
    return target


def ensure_ray(address: str | None) -> None:
    """Start or join Ray once for this process.

    :func:`run_scenario` checks a cluster's address first (:func:`probe_ray`),
    so a wrong one fails in seconds. The process's SIGINT/SIGTERM/SIGHUP handlers are kept: Ray's
    driver installs its own SIGTERM handler (``sys.exit``), which would turn a
    polite stop into a failed run.
    """
    if ray.is_initialized():
        return
    kept = _signal_handlers()
    kwargs: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": False,
        "configure_logging": False,
    }
    if address:
        kwargs["address"] = address
    else:
        kwargs["num_cpus"] = max(2, (os.cpu_count() or 2))
    try:
        ray.init(**kwargs)
    except Exception as exc:
        raise RunError(
            f"cannot start or reach Ray{' at ' + address if address else ''}: "
            f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        ) from None
    finally:
        _restore_signal_handlers(kept)


_STOP_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")


def _signal_handlers() -> dict[int, Any]:
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return {}
    return {
        int(getattr(signal, n)): signal.getsignal(getattr(signal, n))
        for n in _STOP_SIGNALS
        if hasattr(signal, n)
    }


def _restore_signal_handlers(kept: dict[int, Any]) -> None:
    import signal

    for signum, handler in kept.items():
        if handler is not None:
            with contextlib.suppress(ValueError, OSError):
                signal.signal(signum, handler)


# Ray leaves these three functions unannotated; typed here, once.


def alive_nodes() -> list[dict[str, Any]]:
    """The cluster's live nodes, as ``ray.nodes()`` describes them."""
    nodes: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
    return [n for n in nodes if n.get("Alive")]


def cluster_resources() -> dict[str, float]:
    """``ray.cluster_resources()``: the cluster's total resources by name."""
    have: dict[str, float] = ray.cluster_resources()  # type: ignore[no-untyped-call]
    return have


def node_ip_address() -> str:
    """This process's node's IP address, as Ray knows it."""
    ip: str = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
    return ip
