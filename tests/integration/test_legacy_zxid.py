"""A legacy claim's ``ownership_claimed`` event carries its owner znode's czxid (real ZooKeeper).

The checkers order the claims of one partition by these zxids across nodes
(ZooKeeper's total order), so they must be the znodes' own ``czxid``.
"""

from __future__ import annotations

import pytest

from emulator.events import EventKind as K
from emulator.events import validate_event
from tests.integration.legacy_harness import GROUP, LegacyHarness, run_harness
from zk_registry import layout as L

pytestmark = pytest.mark.zk


def test_claim_events_carry_the_owner_znodes_czxid(zk_connect: str) -> None:
    async def scenario(h: LegacyHarness) -> None:
        await h.setup_cluster({"t": 2}, brokers=[1])
        await h.join_in_turn(["c0"])
        admin = await h.admin()
        first = {
            (r.fields["topic"], r.fields["partition"]): r.fields
            for r in h.events("c0", K.OWNERSHIP_CLAIMED)
        }
        assert set(first) == {("t", 0), ("t", 1)}
        for (topic, part), fields in first.items():
            _, stat = await admin.get_async(L.owner_path(GROUP, str(topic), int(part)))
            assert fields["zxid"] == stat.czxid
            validate_event({"v": 1, "seq": 0, "kind": K.OWNERSHIP_CLAIMED.value, **fields})

        # c1 joins: c0 releases t:1 (range: one each) and c1 creates its owner znode anew.
        mark = h.mark()
        await h.join_in_turn(["c1"])
        claims = h.events("c1", K.OWNERSHIP_CLAIMED, mark)
        assert [(r.fields["topic"], r.fields["partition"]) for r in claims] == [("t", 1)]
        _, stat = await admin.get_async(L.owner_path(GROUP, "t", 1))
        assert claims[0].fields["zxid"] == stat.czxid
        # ZooKeeper's order: the newer owner's claim has the larger zxid.
        assert int(str(claims[0].fields["zxid"])) > int(str(first[("t", 1)]["zxid"]))

    run_harness(zk_connect, scenario)
