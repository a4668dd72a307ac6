"""Where a run's Ray actors go, and what the driver learns about the nodes.

A scenario's ``[placement]`` (:class:`emulator.scenario.PlacementSpec`) names,
per kind of actor, Ray's default scheduling, the SPREAD strategy, a Ray
custom resource of which each actor takes one unit (``resource:emu_consumer``:
a node started with ``emu_consumer: 8`` runs up to eight consumer hosts), or
one node (``node:10.0.0.5``). :func:`actor_options` turns that into
``.options(...)``; :func:`check_placement` fails the run up front, in one
line, when the cluster lacks a resource or has too little of it (Ray would
otherwise leave the actor pending for ever).

Every actor answers ``where()`` with :func:`actors.locate.node_report`; the driver times
those calls (:func:`measure_nodes`) to estimate each node's wall-clock offset
from its own, NTP-style: ``offset = t_node - (t_sent + t_back) / 2`` with the
uncertainty ``(t_back - t_sent) / 2``, the best of a few samples. The offsets
and bounds go in the manifest, and from them the analysis states under which
skew a reported double ownership across nodes is certain.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import ray

from actors.ray_session import cluster_resources
from emulator.scenario import PLACEMENT_ROLES, PlacementSpec

RESOURCE_SLIVER = 0.001
"""What an actor pinned with ``node:IP`` asks of that resource (Ray gives each
node exactly 1 of it, so a whole unit would fit only one actor there)."""

ACTOR_UNITS = 1.0
"""What an actor placed with ``resource:NAME`` asks of ``NAME``: one unit, so
a node started with ``NAME: 8`` takes up to eight such actors (about one per
core for consumer hosts, each an asyncio loop on one core)."""


class PlacementError(RuntimeError):
    """A placement the cluster cannot satisfy (one-line message)."""


def actor_options(placement: PlacementSpec, role: str) -> dict[str, Any]:
    """The ``.options(...)`` keyword arguments that place a ``role`` actor."""
    value = placement.of(role)
    if value == "spread":
        return {"scheduling_strategy": "SPREAD"}
    resource = placement.resource(role)
    if resource is None:
        return {}
    units = RESOURCE_SLIVER if value.startswith("node:") else ACTOR_UNITS
    return {"resources": {resource: units}}


def check_placement(
    placement: PlacementSpec,
    actors: Mapping[str, int],
    available: Mapping[str, float] | None = None,
) -> None:
    """Raise :class:`PlacementError` when the cluster cannot hold the run's actors.

    Ray would leave an actor it cannot place pending for ever; this says so up
    front, in one line, naming the ``[placement]`` key.

    Args:
        placement: the scenario's ``[placement]``.
        actors: how many actors of each role the run starts (``brokers``,
            ``producer``, ``consumer_hosts``).
        available: ``ray.cluster_resources()`` (read from Ray when None).
    """
    have = dict(available) if available is not None else cluster_resources()
    known = sorted(k for k in have if not k.startswith(("CPU", "GPU", "memory", "object_store")))
    need: dict[str, float] = {}
    roles: dict[str, list[str]] = {}
    for role in PLACEMENT_ROLES:
        resource = placement.resource(role)
        if resource is None:
            continue
        opts = actor_options(placement, role)["resources"]
        need[resource] = need.get(resource, 0.0) + opts[resource] * actors.get(role, 0)
        roles.setdefault(resource, []).append(role)
    for resource, amount in need.items():
        role = roles[resource][0]
        where = f"[placement].{role} = {placement.of(role)!r}"
        got = have.get(resource, 0.0)
        if got <= 0.0:
            raise PlacementError(
                f"{where}: no node of the Ray cluster has the resource {resource!r} "
                f"(custom resources and nodes: {', '.join(known) or 'none'})"
            )
        if got + 1e-9 < amount:
            who = " + ".join(f"{actors.get(r, 0)} {r}" for r in roles[resource])
            raise PlacementError(
                f"{where}: the run needs {amount:g} of {resource!r} ({who}, one each) and "
                f"the cluster has {got:g}; start nodes with more (ray start --resources "
                f"'{{\"{resource}\": 8}}')"
            )


def measure_nodes(actors: Mapping[str, Any], samples: int = 5) -> dict[str, Any]:
    """Each actor's node, and each node's clock offset from the driver's.

    Args:
        actors: actor name -> handle (each with a ``where()`` method).
        samples: round trips per actor; the shortest one is kept.

    Returns:
        ``{"actors": {name: node_id}, "nodes": {node_id: {ip, hostname,
        offset_ms, bound_ms, rtt_ms, actors}}}`` where ``offset_ms`` is the
        node's wall clock minus the driver's and ``bound_ms`` its uncertainty.
        Actors that do not answer are left out.
    """
    best: dict[str, tuple[float, float, dict[str, Any]]] = {}
    for _ in range(max(1, samples)):
        for name, handle in actors.items():
            sent = time.time()
            try:
                rep = ray.get(handle.where.remote(), timeout=30)
            except Exception:  # a dead or lost actor: nothing to measure
                continue
            back = time.time()
            rtt = back - sent
            offset = float(rep["wall"]) - (sent + back) / 2.0
            if name not in best or rtt < best[name][0]:
                best[name] = (rtt, offset, rep)
    placed = {name: str(rep["node_id"]) for name, (_, _, rep) in best.items()}
    nodes: dict[str, dict[str, Any]] = {}
    # tightest round trip first: a node's offset is its best-measured actor's
    for name, (rtt, offset, rep) in sorted(best.items(), key=lambda kv: kv[1][0]):
        node = nodes.setdefault(
            placed[name],
            {
                "ip": rep["ip"],
                "hostname": rep["hostname"],
                "offset_ms": round(offset * 1000.0, 3),
                "bound_ms": round(rtt / 2.0 * 1000.0, 3),
                "rtt_ms": round(rtt * 1000.0, 3),
                "actors": [],
            },
        )
        node["actors"].append(name)
    for node in nodes.values():
        node["actors"].sort()
    return {"actors": placed, "nodes": nodes}
