"""The real engine's :class:`~actors.engine.RunEngine`: real ZooKeeper, Ray actors.

An embedded ZooKeeper ensemble (or a user's ``--zookeeper``), local Ray or a
cluster (``--ray-address``), event logs written where the actors run and
gathered (local, shared or shipped storage), placement checked up front.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray

from actors.engine import EngineParts
from actors.placement import PlacementError, check_placement
from actors.ray_session import alive_nodes, ensure_ray, probe_ray
from actors.ray_system import RaySystem
from actors.run_files import EventStorage, RunError, new_run_id
from actors.spool import current_node, spool_root_setting
from emulator.scenario import Scenario
from emulator.storage import Location

if TYPE_CHECKING:
    from actors.orchestrator import ProtocolRun

ZK_PROBE_TIMEOUT_S = 10.0
"""Bound on checking that a user's ``--zookeeper`` is a serving ZooKeeper."""
ZK_CLEANUP_TIMEOUT_S = 60.0
"""Bound on deleting one protocol's chroot from a user's ZooKeeper."""


class RealEngine:
    """Real ZooKeeper and Ray.

    Args:
        zookeeper: a ZooKeeper connect string; ``None`` starts an embedded one.
        ray_address: a Ray cluster to join; ``None`` starts a local Ray.
        shared_storage: a local run directory is the same directory on every node.
        zk_auth: a :class:`zk_registry.auth.ZkAuth` for every znode of the run.
        keep_zk_data: on a user's ``--zookeeper``, keep each protocol's chroot.
    """

    name = "real"

    def __init__(
        self,
        zookeeper: str | None = None,
        ray_address: str | None = None,
        shared_storage: bool = False,
        zk_auth: Any = None,
        keep_zk_data: bool = False,
    ) -> None:
        self.zookeeper = zookeeper
        self.ray_address = ray_address
        self.shared_storage = shared_storage
        self.zk_auth = zk_auth
        self.keep_zk_data = keep_zk_data
        self._ensemble: Any = None
        self._zk_tmp: str | None = None
        self._parts: EngineParts | None = None

    def run_id(self, scenario: Scenario) -> str:
        """Scenario name, UTC time, a random suffix."""
        return new_run_id(scenario)

    def start(
        self,
        scenario: Scenario,
        loc: Location,
        out_path: Path,
        manifest: dict[str, Any],
        save: Callable[[], None],
    ) -> None:
        """ZooKeeper (embedded or checked), then Ray, storage and placement."""
        if self.ray_address and not ray.is_initialized():
            probe_ray(self.ray_address)  # a wrong address fails before anything is started
        if loc.is_url and self.zookeeper is None:  # embedded ZooKeeper data stays on local disk
            self._zk_tmp = tempfile.mkdtemp(prefix="rebalance-emu-zk-")
        zk_dir = Path(self._zk_tmp) if self._zk_tmp else out_path
        zk_hosts, zk_info = _zookeeper(scenario, zk_dir, self.zookeeper)
        self._ensemble = zk_info.pop("_ensemble", None)
        if self.zk_auth is not None:
            zk_info["auth"] = str(self.zk_auth)  # digest:<user>, never the password
        manifest["zookeeper"] = zk_info
        save()
        ensure_ray(self.ray_address)
        system = RaySystem()
        n_nodes = len(alive_nodes())
        manifest["ray"] = {"address": self.ray_address or "local", "nodes": n_nodes}
        mode = "shipped" if n_nodes > 1 else "local"
        if loc.is_url or self.shared_storage:
            mode = "shared"
        storage = EventStorage(mode, loc, spool_root_setting(), current_node())
        manifest["event_storage"] = {
            "mode": mode,
            "url": loc.display(),
            "spool": storage.spool_root or "<tmp>/rebalance-emu-spool on each node",
            "driver_node": storage.driver_node,
            "protocols": {},
        }
        try:
            check_placement(
                scenario.placement,
                {
                    "brokers": scenario.cluster.brokers,
                    "producer": 1,
                    "consumer_hosts": scenario.host_count,
                },
            )
        except PlacementError as exc:
            raise RunError(str(exc)) from None
        self._parts = EngineParts(
            zk_hosts=zk_hosts,
            zk_base=str(zk_info.get("chroot", "")),
            ensemble=self._ensemble,
            storage=storage,
            system=system,
            zk_auth=self.zk_auth,
        )

    def begin_protocol(self, protocol: str) -> EngineParts:
        """The shared ensemble and Ray (each protocol has its own chroot)."""
        del protocol
        if self._parts is None:
            raise RuntimeError("RealEngine.begin_protocol before start")
        return self._parts

    def protocol_done(self, run: ProtocolRun, manifest: dict[str, Any]) -> None:
        """On a user's ZooKeeper, delete (or keep) the protocol's chroot."""
        if self.zookeeper is not None:
            _clean_chroot(run, manifest["zookeeper"], self.keep_zk_data)

    def close(self) -> None:
        """Stop the embedded ensemble; remove its temporary data."""
        if self._ensemble is not None:
            with contextlib.suppress(Exception):
                self._ensemble.stop()
            self._ensemble = None
        if self._zk_tmp is not None:
            shutil.rmtree(self._zk_tmp, ignore_errors=True)
            self._zk_tmp = None


def _zookeeper(
    scenario: Scenario, out_dir: Path, connect: str | None
) -> tuple[list[str], dict[str, Any]]:
    """Start the embedded ensemble, or check a given one; return hosts and manifest info."""
    from zk_registry.server import ZooKeeperEnsemble, ZooKeeperError, tick_time_for

    session_ms = int(scenario.kafka_config("zookeeper.session.timeout.ms"))
    if connect:
        from zk_registry.server import parse_connect_string, probe_zookeeper

        try:
            hosts, base = parse_connect_string(connect)
        except ValueError as exc:
            raise RunError(f"--zookeeper {connect!r}: {exc}") from None
        try:
            probe_zookeeper(hosts, timeout_s=ZK_PROBE_TIMEOUT_S)
        except ZooKeeperError as exc:
            raise RunError(str(exc).splitlines()[0]) from None
        return hosts, {
            "connect": connect,
            "chroot": base,
            "embedded": False,
            "scaled_session_timeout_ms": session_ms * scenario.time_scale,
        }
    tick = tick_time_for(session_ms, scenario.time_scale)
    ens = ZooKeeperEnsemble(scenario.cluster.zookeeper_ensemble, out_dir / "zk", tick)
    try:
        ens.start()
    except ZooKeeperError as exc:
        raise RunError(f"embedded ZooKeeper did not start: {str(exc).splitlines()[0]}") from None
    return list(ens.hosts), {
        "connect": ens.connect_string,
        "embedded": True,
        "members": ens.size,
        "tick_time_ms": tick,
        "scaled_session_timeout_ms": session_ms * scenario.time_scale,
        "_ensemble": ens,
    }


def _clean_chroot(pr: ProtocolRun, info: dict[str, Any], keep: bool) -> None:
    """Delete a protocol's chroot on a user's ZooKeeper (unless ``keep``); say so in ``info``."""
    from zk_registry.client import delete_chroot

    done = info.setdefault("chroots", {})
    if keep:
        done[pr.protocol] = {"path": pr._chroot(), "kept": True}
        return
    try:
        # Relative to the user's own chroot: emptied parents are pruned up to it, never past.
        n = delete_chroot(
            ",".join(pr.zk_hosts) + pr.zk_base,
            pr._chroot().removeprefix(pr.zk_base),
            ZK_CLEANUP_TIMEOUT_S,
            pr.zk_auth,
        )
        done[pr.protocol] = {"path": pr._chroot(), "deleted_znodes": n}
    except Exception as exc:  # never lose the run's result over the cleanup
        first = (str(exc).strip().splitlines() or [""])[0]
        done[pr.protocol] = {"path": pr._chroot(), "error": f"{type(exc).__name__}: {first}"}
