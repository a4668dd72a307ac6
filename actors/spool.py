"""Where each actor's event log goes, and how the driver gathers them at the end.

The driver picks one storage mode per run (recorded in the manifest's
``event_storage``):

``local``
    ``--out`` is a local path and the Ray cluster is this one machine: every
    actor appends to ``<out>/<protocol>/events/<actor>.msgpack``.
``shared``
    ``--out`` is a URL (``s3://``, ``gs://``, ``hdfs://``, ``file://``): every
    actor appends to a spool file on its node's local disk (a crash leaves
    whole records there) and copies it to ``<url>/<protocol>/events/`` when it
    closes its log (object stores cannot append). With ``--shared-storage``
    and a local path (an NFS mount on every node), actors append there
    directly.
``shipped``
    a Ray cluster of several nodes and a local ``--out`` that only the
    driver's machine sees: actors on the driver's node write straight into
    the run directory, the others into a spool on their own node, which the
    driver pulls in chunks of :data:`SHIP_CHUNK` bytes once the actors have
    stopped, then deletes.

After a protocol's actors stopped, :func:`collect` visits every live node with
a small Ray task pinned to it: it ships (``shipped``) or uploads
(``shared``) whatever spool files are left there, including the logs of
actors that were killed and never closed theirs, then removes the spool. A
node that left the cluster cannot be visited: the logs of its actors are
listed as missing.

Spool files live under ``<spool root>/<run id>/<protocol>/<node id>/``, the
root being ``$REBALANCE_EMU_SPOOL`` on the driver, else each node's
``<tmp>/rebalance-emu-spool``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors.ray_session import alive_nodes
from emulator.eventlog import file_checksum
from emulator.storage import StorageError, default_spool_root, resolve


class LogPlace(Protocol):
    """Where one protocol's event logs go: the fields of a run's context this module reads."""

    @property
    def run_id(self) -> str: ...

    @property
    def protocol(self) -> str: ...

    @property
    def events_dir(self) -> str: ...

    @property
    def storage_mode(self) -> str: ...

    @property
    def events_url(self) -> str: ...

    @property
    def spool_root(self) -> str: ...

    @property
    def driver_node(self) -> str: ...


MODES = ("local", "shared", "shipped")
SHIP_CHUNK = 8 * 1024 * 1024
"""Bytes per Ray call when the driver pulls a spooled log."""

NODE_LEFT = "its node left the Ray cluster: the log stayed on that node"

CALL_TIMEOUT_S = 120.0
"""Bound on each call of the gathering (one chunk, one listing, one upload)."""


def spool_root_setting() -> str:
    """The spool root the driver passes to the actors (``""``: each node's default)."""
    return os.environ.get("REBALANCE_EMU_SPOOL", "")


def spool_dir(spool_root: str, run_id: str, protocol: str, node: str) -> Path:
    """One node's spool directory for one protocol's run."""
    root = Path(spool_root) if spool_root else default_spool_root()
    return root / run_id / protocol / node


def current_node() -> str:
    """This process's Ray node id (``""`` outside Ray)."""
    if not ray.is_initialized():
        return ""
    return str(ray.get_runtime_context().get_node_id())


def log_target(ctx: LogPlace, actor: str) -> tuple[Path, Callable[[Path], None] | None]:
    """The local file an actor appends its log to, and what to do with it at close."""
    name = f"{actor}.msgpack"
    direct = Path(ctx.events_dir) / name
    mode = ctx.storage_mode
    if mode == "local" or (mode == "shared" and not ctx.events_url):
        return direct, None
    if mode not in MODES:
        raise ValueError(f"unknown event storage mode {mode!r} (one of {', '.join(MODES)})")
    node = current_node()
    if mode == "shipped" and node == ctx.driver_node:
        return direct, None
    spooled = spool_dir(ctx.spool_root, ctx.run_id, ctx.protocol, node or "driver") / name
    if mode == "shipped":
        return spooled, None
    url = ctx.events_url

    def publish(path: Path) -> None:
        resolve(url).upload(path, name)
        path.unlink()

    return spooled, publish


# ------------------------------------------------------- tasks pinned to a node


@ray.remote(num_cpus=0, max_retries=0)
def _spool_list(directory: str) -> list[tuple[str, int]]:
    d = Path(directory)
    if not d.is_dir():
        return []
    return sorted((p.name, p.stat().st_size) for p in d.glob("*.msgpack"))


@ray.remote(num_cpus=0, max_retries=0)
def _spool_read(path: str, offset: int, size: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(size)


@ray.remote(num_cpus=0, max_retries=0)
def _spool_upload(directory: str, events_url: str, taken: list[str]) -> dict[str, Any]:
    """Upload every spool file of ``directory`` to ``events_url``; name -> where or error."""
    out: dict[str, Any] = {}
    loc = resolve(events_url)
    for p in sorted(Path(directory).glob("*.msgpack")):
        name = p.name if p.name not in taken else _alternate(p.name, Path(directory).name)
        try:
            size = loc.upload(p, name)
        except StorageError as exc:
            out[p.name] = {"error": str(exc)}
            continue
        p.unlink()
        out[p.name] = {"file": name, "bytes": size}
    return out


@ray.remote(num_cpus=0, max_retries=0)
def _spool_remove(directory: str) -> None:
    d = Path(directory)
    shutil.rmtree(d, ignore_errors=True)
    for parent in (d.parent, d.parent.parent):  # <protocol>/, <run id>/ when empty
        with contextlib.suppress(OSError):
            parent.rmdir()


def _alternate(name: str, node: str) -> str:
    """A second log of one actor (restarted on another node): ``<actor>.<node>.msgpack``."""
    return f"{name.removesuffix('.msgpack')}.{node[:12]}.msgpack"


def _on(node: str) -> dict[str, Any]:
    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id=node, soft=False)}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")


# ------------------------------------------------------------------- driver


def collect(ctx: LogPlace, actor_nodes: Mapping[str, str]) -> dict[str, Any]:
    """Gather one protocol's spooled logs (call after its actors stopped).

    Args:
        ctx: the protocol's run context (mode, directories, driver node).
        actor_nodes: actor name -> Ray node id (the placement report).

    Returns:
        ``{"logs": {file stem: {"how": "direct" | "uploaded" | "shipped",
        "node": id, "bytes": n, "crc32c": hex}}, "missing": {actor: {"node": id, "reason":
        ...}}}``; ``missing`` names actors whose log is not in the run
        directory (their node left the cluster, or a copy failed).
    """
    logs: dict[str, dict[str, Any]] = {}
    missing: dict[str, dict[str, Any]] = {}
    failed: dict[str, str] = {}  # node -> why it could not be visited
    mode = ctx.storage_mode
    if mode == "shipped" or (mode == "shared" and ctx.events_url):
        alive = {str(n["NodeID"]) for n in alive_nodes()}
        nodes = sorted(alive - {ctx.driver_node}) if mode == "shipped" else sorted(alive)
        for node in nodes:
            d = str(spool_dir(ctx.spool_root, ctx.run_id, ctx.protocol, node))
            try:
                if mode == "shipped":
                    _ship_node(ctx, node, d, logs, missing)
                else:
                    taken = set(_destination_logs(ctx))
                    done = ray.get(
                        _spool_upload.options(**_on(node)).remote(d, ctx.events_url, sorted(taken)),
                        timeout=CALL_TIMEOUT_S * 4,
                    )
                    for name, res in done.items():
                        stem = name.removesuffix(".msgpack")
                        if "error" in res:
                            missing[stem] = {"node": node, "reason": res["error"]}
                        else:
                            logs[res["file"].removesuffix(".msgpack")] = {
                                "how": "uploaded",
                                "node": node,
                                "bytes": res["bytes"],
                            }
                ray.get(_spool_remove.options(**_on(node)).remote(d), timeout=CALL_TIMEOUT_S)
            except Exception as exc:  # the node went away meanwhile, or a call timed out
                gone = isinstance(exc, ray.exceptions.TaskUnschedulableError)
                failed[node] = NODE_LEFT if gone else _first_line(exc)
        for n in actor_nodes.values():
            if n not in alive:
                failed[n] = NODE_LEFT
    present = _destination_logs(ctx)
    for stem, size in present.items():
        if stem not in logs:
            how = "direct" if mode != "shared" or not ctx.events_url else "uploaded"
            logs[stem] = {"how": how, "bytes": size}
            if how == "uploaded":  # copied by the actor itself when it closed its log
                where = actor_nodes.get(stem)
                if where:
                    logs[stem]["node"] = where
    for actor, node in actor_nodes.items():
        if actor not in present and actor not in missing and node in failed:
            missing[actor] = {"node": node, "reason": failed[node]}
    for stem, entry in logs.items():  # what the evidence check compares with (compare)
        if stem in present:
            try:
                entry["bytes"], entry["crc32c"] = _checksum(ctx, stem)
            except (OSError, StorageError) as exc:
                entry["checksum_error"] = _first_line(exc)
    return {"logs": dict(sorted(logs.items())), "missing": dict(sorted(missing.items()))}


def _checksum(ctx: LogPlace, stem: str) -> tuple[int, str]:
    """Size and CRC32C of one gathered log, where the run directory is."""
    if ctx.storage_mode == "shared" and ctx.events_url:
        return resolve(ctx.events_url).checksum(f"{stem}.msgpack")
    return file_checksum(Path(ctx.events_dir) / f"{stem}.msgpack")


def _ship_node(
    ctx: LogPlace,
    node: str,
    directory: str,
    logs: dict[str, dict[str, Any]],
    missing: dict[str, dict[str, Any]],
) -> None:
    """Pull every spool file of one node into the run's events directory."""
    files = ray.get(_spool_list.options(**_on(node)).remote(directory), timeout=CALL_TIMEOUT_S)
    events = Path(ctx.events_dir)
    events.mkdir(parents=True, exist_ok=True)
    for name, size in files:
        target = events / name
        if target.exists():
            target = events / _alternate(name, node)
        part = target.with_name(target.name + ".part")
        got = 0
        with open(part, "wb") as out:
            while got < size:
                chunk = ray.get(
                    _spool_read.options(**_on(node)).remote(
                        f"{directory}/{name}", got, min(SHIP_CHUNK, size - got)
                    ),
                    timeout=CALL_TIMEOUT_S,
                )
                if not chunk:
                    break
                out.write(chunk)
                got += len(chunk)
        os.replace(part, target)
        stem = target.name.removesuffix(".msgpack")
        logs[stem] = {"how": "shipped", "node": node, "bytes": got}
        if got != size:
            missing[stem] = {"node": node, "reason": f"shipped {got} of {size} bytes"}


def _destination_logs(ctx: LogPlace) -> dict[str, int]:
    """Log file stem -> size of what is in the protocol's events directory now."""
    if ctx.storage_mode == "shared" and ctx.events_url:
        loc = resolve(ctx.events_url)
        return {
            rel.rsplit("/", 1)[-1].removesuffix(".msgpack"): loc.size(rel)
            for rel in loc.list_files("", ".msgpack")
        }
    events = Path(ctx.events_dir)
    if not events.is_dir():
        return {}
    return {p.name.removesuffix(".msgpack"): p.stat().st_size for p in events.glob("*.msgpack")}
