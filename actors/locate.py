"""Where an actor runs: the ``where()`` every actor answers, without importing Ray.

The actor shells (:mod:`actors.broker`, :mod:`actors.consumer_host`,
:mod:`actors.producer`) subclass :class:`Locatable`; the driver calls
``where()`` on their handles and times the round trips
(:func:`actors.placement.measure_nodes`). Ray is imported only when
``where()`` is answered, which happens inside a Ray actor, so the shells'
modules stay importable by a process that never loads Ray.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any


def node_report() -> dict[str, Any]:
    """This process's node: Ray node id, address, host name, pid and wall clock."""
    import ray

    from actors.ray_session import node_ip_address

    ctx = ray.get_runtime_context()
    return {
        "node_id": ctx.get_node_id(),
        "ip": node_ip_address(),
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "wall": time.time(),
    }


class Locatable:
    """Gives an actor ``where()``: its node and wall clock, for ``measure_nodes``."""

    def where(self) -> dict[str, Any]:
        """This actor's node and wall clock (:func:`node_report`)."""
        return node_report()
