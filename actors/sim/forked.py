"""A sim run's protocols in forked worker processes, ``K`` at once (``--parallel K``).

A protocol's world on the sim engine shares nothing with the others': its own
loop, random streams, network and simulated ensemble
(:meth:`actors.sim.run.SimEngine.begin_protocol`), seeded with the run's seed.
So the protocols of one run can be simulated at the same time in separate
processes and give the same event logs, byte for byte, as one after the other
(``tests/unit/sim/test_forked.py`` compares the digests). On this project's
2-core machine that halves the wall time of ``run --engine sim --protocol all``.

How (:func:`run_forked`): each protocol runs in a child forked from the driver
(the ``fork`` start method: the scenario, the engine and the imported modules
are there at once, nothing is pickled on the way in). The child runs the
protocol exactly as the sequential loop would, with the driver's manifest as it
was at the fork, and sends back over a pipe its live status (throttled), then
its :class:`~actors.orchestrator.ProtocolResult` and what it wrote into the
manifest for its protocol; the driver merges those, in the protocols' order,
and writes the manifest as each protocol ends. A child never writes the
manifest itself.

Failures and endings:

* a protocol that raises (a ``RunError`` of its set-up, an engine error) ends
  the run as in the sequential loop: its manifest entries are merged, the
  other children are stopped, the exception is raised in the driver;
* a child that dies without a word (killed, out of memory) is a ``RunError``
  naming the protocol and its exit code;
* Ctrl-C, SIGTERM or SIGHUP in the driver: each running child gets SIGTERM,
  which interrupts its protocol as the driver's signal interrupts a sequential
  run (its hurried teardown closes its logs); children that have not answered
  within :data:`INTERRUPT_GRACE_S` are killed. A terminal's Ctrl-C reaches the
  children too: they ignore SIGINT and wait for the driver's SIGTERM;
* a child dies with the driver (``PR_SET_PDEATHSIG``, set in the child right
  after the fork from the driver's main thread), so none outlives it.

The engine's per-run objects that live in the children (each protocol's
:class:`~actors.sim.system.SimActorSystem`, an online monitor) stay there:
what needs them (``--profile``'s checks, inspection by tests) runs the
protocols one after the other (``workers = 1``).
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING, Any

from actors.run_files import RunError

if TYPE_CHECKING:
    from actors.orchestrator import ProtocolResult

__all__ = ["INTERRUPT_GRACE_S", "STATUS_EVERY_S", "run_forked"]

Status = Callable[[dict[str, Any]], None]
RunOne = Callable[[str, "Status | None", Callable[[], None]], "ProtocolResult"]

STATUS_EVERY_S = 0.2
"""A child sends its live status at most this often (wall seconds)."""
INTERRUPT_GRACE_S = 10.0
"""After the driver's SIGTERM, how long an interrupted child may take to close its logs."""
POLL_S = 0.5
"""How often the driver looks up from its children's pipes when nothing arrives."""
_PR_SET_PDEATHSIG = 1


def run_forked(
    protocols: Sequence[str],
    workers: int,
    run_one: RunOne,
    status: Status | None,
    manifest: dict[str, Any],
    save: Callable[[], None],
) -> list[ProtocolResult]:
    """Run ``run_one(protocol, status, save)`` for each protocol, ``workers`` at once.

    Args:
        protocols: in the run's order (children start in this order; the
            results come back in it whatever order they end in).
        workers: how many protocols run at once (at least 1).
        run_one: runs one protocol and writes its entries into ``manifest``
            (in the child, a forked copy; its ``save`` does nothing there).
        status: the driver's live-status callback (children's statuses are
            forwarded to it), or ``None``.
        manifest: the run's manifest; each protocol's entries are merged into it.
        save: writes the manifest (called in the driver as each protocol ends).

    Returns:
        The protocols' results, in ``protocols``' order.

    Raises:
        RunError: a child died without answering.
        KeyboardInterrupt: the driver was interrupted (the children were stopped).
        BaseException: what a protocol's run raised (the first one, by start order).
    """
    ctx = multiprocessing.get_context("fork")
    queue = list(protocols)
    running: dict[Connection, tuple[str, BaseProcess]] = {}
    results: dict[str, ProtocolResult] = {}
    failures: dict[str, BaseException] = {}
    stopped: set[str] = set()  # children the driver stopped after another's failure
    parent = os.getpid()
    try:
        while queue or running:
            while queue and len(running) < max(1, workers) and not failures:
                protocol = queue.pop(0)
                receive, send = ctx.Pipe(duplex=False)
                proc = ctx.Process(
                    target=_child,
                    args=(protocol, run_one, send, manifest, parent),
                    name=f"sim-{protocol}",
                    daemon=True,
                )
                proc.start()
                send.close()
                running[receive] = (protocol, proc)
            if not running:
                break
            for conn in wait(list(running), timeout=POLL_S):
                assert isinstance(conn, Connection)
                name, worker = running[conn]
                ended = _receive(conn, name, worker, status, manifest, results, failures)
                if ended:
                    del running[conn]
                    conn.close()
                    worker.join(INTERRUPT_GRACE_S)
                    save()
            if failures:
                queue.clear()
                stopped.update(name for name, _w in running.values())
                _stop(running, manifest, results, failures)
    except KeyboardInterrupt:
        _stop(running, manifest, results, failures)
        save()
        raise
    save()
    # The first failure in the run's order, as the loop raises it; the children
    # stopped because of it were interrupted by the driver, not failed.
    first = [p for p in protocols if p in failures and p not in stopped]
    if first:
        raise failures[first[0]]
    return [results[p] for p in protocols]


def _receive(
    conn: Connection,
    protocol: str,
    proc: BaseProcess,
    status: Status | None,
    manifest: dict[str, Any],
    results: dict[str, ProtocolResult],
    failures: dict[str, BaseException],
) -> bool:
    """Read one message of a child; whether the child has ended."""
    try:
        kind, payload = conn.recv()
    except (EOFError, OSError):
        proc.join(INTERRUPT_GRACE_S)
        failures.setdefault(
            protocol,
            RunError(
                f"the sim worker of {protocol} ended without an answer (exit code "
                f"{proc.exitcode}); its logs are as far as it wrote them"
            ),
        )
        return True
    if kind == "status":
        if status is not None:
            status(payload)
        return False
    outcome, pieces = payload
    _merge(manifest, protocol, pieces)
    if kind == "done":
        results[protocol] = outcome
    else:
        failures[protocol] = outcome
    return True


def _stop(
    running: dict[Connection, tuple[str, BaseProcess]],
    manifest: dict[str, Any],
    results: dict[str, ProtocolResult],
    failures: dict[str, BaseException],
) -> None:
    """SIGTERM every running child; take their last words; kill the ones that keep silent."""
    for _protocol, proc in running.values():
        with contextlib.suppress(OSError):
            proc.terminate()
    deadline = time.monotonic() + INTERRUPT_GRACE_S
    while running and time.monotonic() < deadline:
        for conn in wait(list(running), timeout=max(0.0, deadline - time.monotonic())):
            assert isinstance(conn, Connection)
            protocol, proc = running[conn]
            if _receive(conn, protocol, proc, None, manifest, results, failures):
                del running[conn]
                conn.close()
    for conn, (_protocol, proc) in list(running.items()):
        with contextlib.suppress(OSError):
            proc.kill()
        proc.join(1.0)
        conn.close()
    running.clear()


def _pieces(manifest: dict[str, Any], protocol: str) -> dict[str, Any]:
    """What a protocol's run wrote into the manifest, to send to the driver."""
    out: dict[str, Any] = {}
    entry = manifest.get("protocols", {}).get(protocol)
    if entry is not None:
        out["protocols"] = entry
    stored = manifest.get("event_storage", {}).get("protocols", {})
    if protocol in stored:
        out["storage"] = stored[protocol]
    out["engine"] = {
        k: v[protocol]
        for k, v in manifest.get("engine", {}).items()
        if isinstance(v, dict) and protocol in v
    }
    return out


def _merge(manifest: dict[str, Any], protocol: str, pieces: dict[str, Any]) -> None:
    if "protocols" in pieces:
        manifest.setdefault("protocols", {})[protocol] = pieces["protocols"]
    if "storage" in pieces:
        manifest.setdefault("event_storage", {}).setdefault("protocols", {})[protocol] = pieces[
            "storage"
        ]
    engine = manifest.setdefault("engine", {})
    for key, value in pieces.get("engine", {}).items():
        engine.setdefault(key, {})[protocol] = value


# ------------------------------------------------------------------ child


def _child(
    protocol: str,
    run_one: RunOne,
    conn: Connection,
    manifest: dict[str, Any],
    parent: int,
) -> None:
    """A worker: one protocol's run, its status and outcome sent to the driver; never returns."""
    _die_with(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver decides (it sends SIGTERM)
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _interrupt_once)
    last = [0.0]

    def forward(st: dict[str, Any]) -> None:
        now = time.monotonic()
        if now - last[0] >= STATUS_EVERY_S:
            last[0] = now
            with contextlib.suppress(OSError, ValueError):
                conn.send(("status", st))

    code = 0
    try:
        result = run_one(protocol, forward, lambda: None)
        message: tuple[str, Any] = ("done", (result, _pieces(manifest, protocol)))
    except BaseException as exc:  # sent to the driver, which raises it there
        code = 1
        message = ("failed", (_portable(exc), _pieces(manifest, protocol)))
    try:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the answer goes out whole
        conn.send(message)
        conn.close()
    except (OSError, ValueError):
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)  # no atexit handler of the driver's runs in a child


def _interrupt_once(signum: int, _frame: object) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt(f"signal {signum} from the driver")


def _portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling, else a ``RuntimeError`` that says what it was."""
    import pickle

    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


def _die_with(parent: int) -> None:
    """Ask the kernel to kill this process when the driver's thread that forked it ends."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the driver died before the request took effect
        os._exit(1)
