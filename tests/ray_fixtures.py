"""A real local Ray for the tests that need one (started once per session), and a
three-node Ray cluster on this machine (``ray.cluster_utils.Cluster``)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


def start_local_ray() -> None:
    """``ray.init()`` on this machine as the tests use it (two CPUs, no dashboard)."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)


@pytest.fixture(scope="session")
def ray_local() -> Iterator[None]:
    """``ray.init()`` on this machine; shut down at the end of the session."""
    start_local_ray()
    yield
    import ray

    ray.shutdown()


@dataclass
class ThreeNodes:
    """A head (the driver's node) and three worker nodes, each a raylet of its own.

    ``broker``: resource ``emu_broker`` (room for three actors);
    ``consumer_a``/``consumer_b``: ``emu_consumer`` 1 each, room for one
    consumer host each, so two hosts land on different nodes.
    """

    cluster: Any
    broker: Any
    consumer_a: Any
    consumer_b: Any


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[ThreeNodes]:
    """A Ray cluster of several nodes on this machine, the driver connected to it.

    The session's local Ray (if any test started it) is shut down first and
    started again afterwards, so the tests after these find it as they expect.
    """
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray
    from ray.cluster_utils import Cluster

    was_local = ray.is_initialized()
    if was_local:
        ray.shutdown()
    # A short directory: Ray's socket paths under it must fit AF_UNIX's 107
    # bytes (a deeper pytest basetemp need not).
    tmp = Path(tempfile.mkdtemp(prefix="rc-", dir="/tmp"))
    (tmp / "ray").mkdir(exist_ok=True)
    old_tmp = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = str(tmp)
    cluster: Any = None
    try:
        cluster = Cluster(
            initialize_head=True,
            head_node_args={"num_cpus": 1, "include_dashboard": False},
        )
        broker = cluster.add_node(num_cpus=1, resources={"emu_broker": 3})
        consumer_a = cluster.add_node(num_cpus=1, resources={"emu_consumer": 1})
        consumer_b = cluster.add_node(num_cpus=1, resources={"emu_consumer": 1})
        cluster.wait_for_nodes(timeout=60)
        ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
        yield ThreeNodes(cluster, broker, consumer_a, consumer_b)
    finally:
        ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        if old_tmp is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = old_tmp
        shutil.rmtree(tmp, ignore_errors=True)
        if was_local:
            start_local_ray()
