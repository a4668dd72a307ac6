"""``deploy/zookeeper/zoo-3.cfg``'s settings, run by the real ZooKeeper as a 3-member ensemble.

The file's settings (everything but the data directory, the client port and
the ``server.N`` host names, which only make sense on the real hosts) are
given to three loopback members of Debian's ZooKeeper: the ensemble must form
a quorum under them, answer the four-letter words the emulator asks, and grant
Kafka 0.8's default 6 s session timeout as asked.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.test_deploy_configs import zoo_cfg
from tests.zk_fixtures import close_client, make_client
from zk_registry.server import ZooKeeperEnsemble

pytestmark = [pytest.mark.zk]

CFG = Path(__file__).resolve().parents[2] / "deploy" / "zookeeper" / "zoo-3.cfg"
HOST_SPECIFIC = ("dataDir", "clientPort")


def test_the_deploy_settings_form_a_quorum(tmp_path: Path) -> None:
    cfg = zoo_cfg(CFG)
    servers = [k for k in cfg if k.startswith("server.")]
    settings = {k: v for k, v in cfg.items() if k not in HOST_SPECIFIC and k not in servers}
    tick = int(settings.pop("tickTime"))
    with ZooKeeperEnsemble(len(servers), tmp_path / "zk", tick, extra_config=settings) as zk:
        status = zk.member_status()
        assert sorted(s.mode for s in status) == ["follower", "follower", "leader"]
        client = make_client(zk.connect_string, timeout=6.0)
        try:
            client.ensure_path("/rebalance-emu/probe")
            assert client.exists("/rebalance-emu/probe") is not None
            # the session timeout the 0.8 consumer asks for is granted unchanged
            assert client._session_timeout == 6000
        finally:
            close_client(client)
