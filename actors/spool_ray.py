"""The Ray half of :mod:`actors.spool`: small tasks pinned to a node, and the visit of each node.

:func:`actors.spool.collect` loads this module only for the storage modes that
leave logs on the nodes (``shipped``, and ``shared`` with a URL), so a process
that writes its logs locally never imports Ray for them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors.ray_session import alive_nodes
from actors.spool import (
    CALL_TIMEOUT_S,
    NODE_LEFT,
    SHIP_CHUNK,
    LogPlace,
    destination_logs,
    first_line,
    spool_dir,
)
from emulator.storage import StorageError, resolve

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


# ------------------------------------------------------------------- driver


def visit_nodes(
    ctx: LogPlace,
    actor_nodes: Mapping[str, str],
    logs: dict[str, dict[str, Any]],
    missing: dict[str, dict[str, Any]],
) -> dict[str, str]:
    """Ship or upload what every live node holds in its spool, then remove the spool.

    Args:
        ctx: the protocol's run context (``shipped``, or ``shared`` with a URL).
        actor_nodes: actor name -> Ray node id (the placement report).
        logs: filled with each shipped or uploaded log (file stem -> where it came from).
        missing: filled with each log a node could not hand over.

    Returns:
        node id -> why it could not be visited (it left the cluster, or a call failed).
    """
    failed: dict[str, str] = {}
    mode = ctx.storage_mode
    alive = {str(n["NodeID"]) for n in alive_nodes()}
    nodes = sorted(alive - {ctx.driver_node}) if mode == "shipped" else sorted(alive)
    for node in nodes:
        d = str(spool_dir(ctx.spool_root, ctx.run_id, ctx.protocol, node))
        try:
            if mode == "shipped":
                _ship_node(ctx, node, d, logs, missing)
            else:
                taken = set(destination_logs(ctx))
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
            failed[node] = NODE_LEFT if gone else first_line(exc)
    for n in actor_nodes.values():
        if n not in alive:
            failed[n] = NODE_LEFT
    return failed


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
