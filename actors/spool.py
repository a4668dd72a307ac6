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

The tasks and the visit of the nodes are in :mod:`actors.spool_ray`, loaded only
for ``shipped`` and ``shared`` with a URL: this module itself does not import
Ray, so a run context that writes its logs locally does not load it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

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
    """This process's Ray node id (``""`` outside Ray).

    Ray is imported here, not with the module: only the modes that spool
    (``shared`` with a URL, ``shipped``) and the driver ask.
    """
    import ray

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


def first_line(exc: BaseException) -> str:
    """``Type: first line of the message``: an error as the manifest shows it."""
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
        # Ray is loaded only for the modes that left logs on the nodes.
        from actors.spool_ray import visit_nodes

        failed = visit_nodes(ctx, actor_nodes, logs, missing)
    present = destination_logs(ctx)
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
                entry["checksum_error"] = first_line(exc)
    return {"logs": dict(sorted(logs.items())), "missing": dict(sorted(missing.items()))}


def _checksum(ctx: LogPlace, stem: str) -> tuple[int, str]:
    """Size and CRC32C of one gathered log, where the run directory is."""
    if ctx.storage_mode == "shared" and ctx.events_url:
        return resolve(ctx.events_url).checksum(f"{stem}.msgpack")
    return file_checksum(Path(ctx.events_dir) / f"{stem}.msgpack")


def destination_logs(ctx: LogPlace) -> dict[str, int]:
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
