"""The deployment files in ``deploy/`` parse, validate and agree with each other and the code."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import ray
import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def zoo_cfg(path: Path) -> dict[str, str]:
    """A ``zoo.cfg`` as key -> value (comments and blank lines skipped)."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def test_ray_up_config_passes_rays_own_validation() -> None:
    from ray.autoscaler._private.util import prepare_config, validate_config

    raw = yaml.safe_load((DEPLOY / "ray" / "cluster.yaml").read_text())
    validate_config(prepare_config(raw))
    types = raw["available_node_types"]
    assert types[raw["head_node_type"]]["resources"] == {"CPU": 0}
    assert types["broker"]["resources"] == {"emu_broker": 8}
    assert types["consumer"]["resources"] == {"emu_consumer": 8}
    assert raw["file_mounts"] == {"~/emu": "."}


def _kube(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / "kubernetes" / name).read_text()) if d]


def test_kuberay_cluster_matches_ray_and_the_placement_resources() -> None:
    docs = _kube("raycluster.yaml")
    rc = next(d for d in docs if d["kind"] == "RayCluster")
    assert rc["apiVersion"] == "ray.io/v1"
    assert rc["spec"]["rayVersion"] == ray.__version__
    groups = {g["groupName"]: g for g in rc["spec"]["workerGroupSpecs"]}
    for group, resource in (("broker", "emu_broker"), ("consumer", "emu_consumer")):
        param = groups[group]["rayStartParams"]["resources"]
        # KubeRay writes it into the shell command `ray start --resources=<value>`:
        # a double-quoted shell word whose \" the shell turns into "
        assert param.startswith('"') and param.endswith('"')
        assert json.loads(param[1:-1].replace('\\"', '"')) == {resource: 8}
    claims = {d["metadata"]["name"] for d in docs if d["kind"] == "PersistentVolumeClaim"}
    pods = [rc["spec"]["headGroupSpec"]["template"], *(g["template"] for g in groups.values())]
    for pod in pods:
        (vol,) = pod["spec"]["volumes"]
        assert vol["persistentVolumeClaim"]["claimName"] in claims
        (container,) = pod["spec"]["containers"]
        assert {"name": "shared", "mountPath": "/shared"} in container["volumeMounts"]


def test_dockerfile_uses_the_drivers_ray_and_python() -> None:
    text = (DEPLOY / "docker" / "Dockerfile").read_text()
    m = re.search(r"^FROM rayproject/ray:(\S+)-py(\d)(\d+)$", text, re.M)
    assert m, "FROM rayproject/ray:<version>-py<XY>"
    assert m.group(1) == ray.__version__
    assert (int(m.group(2)), int(m.group(3))) == sys.version_info[:2]


@pytest.mark.parametrize("members", [3, 5])
def test_zookeeper_ensemble_configs(members: int) -> None:
    cfg = zoo_cfg(DEPLOY / "zookeeper" / f"zoo-{members}.cfg")
    servers = {k: v for k, v in cfg.items() if k.startswith("server.")}
    assert sorted(servers) == [f"server.{i}" for i in range(1, members + 1)]
    assert all(re.fullmatch(r"zk-\d+:2888:3888", v) for v in servers.values())
    tick = int(cfg["tickTime"])
    # Kafka 0.8's zookeeper.session.timeout.ms default (6000) is granted as asked
    assert 2 * tick <= 6000 <= 20 * tick
    assert cfg["maxClientCnxns"] == "0"
    assert {"ruok", "srvr", "mntr"} <= set(cfg["4lw.commands.whitelist"].split(","))


def test_zookeeper_statefulset_matches_the_3_member_config() -> None:
    docs = _kube("zookeeper.yaml")
    sts = next(d for d in docs if d["kind"] == "StatefulSet")
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    servers = env["ZOO_SERVERS"].split()
    assert sts["spec"]["replicas"] == len(servers) == 3
    assert servers == [f"server.{i + 1}=zk-{i}.zk-hs:2888:3888;2181" for i in range(3)]
    cfg = zoo_cfg(DEPLOY / "zookeeper" / "zoo-3.cfg")
    assert env["ZOO_TICK_TIME"] == cfg["tickTime"]
    assert env["ZOO_INIT_LIMIT"] == cfg["initLimit"]
    assert env["ZOO_SYNC_LIMIT"] == cfg["syncLimit"]
    assert env["ZOO_MAX_CLIENT_CNXNS"] == cfg["maxClientCnxns"]
    assert env["ZOO_4LW_COMMANDS_WHITELIST"] == cfg["4lw.commands.whitelist"]
    pdb = next(d for d in docs if d["kind"] == "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == len(servers) // 2 + 1  # the quorum stays
