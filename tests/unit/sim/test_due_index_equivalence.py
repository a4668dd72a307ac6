"""The consumer host's due-index changes nothing but cost: sim log digests of the pre-index code.

:class:`emulator.host.core.HostCore` visits, each tick, only the members with
something due (a deadline, a batch end, an answer, a watch, a fault; R9 of
the issue-18 design). That must not change a single event: every expected
digest below is the ``engine.log_digest`` of a sim run (a sha256 over each
protocol's event logs, byte-identical for the same seed) produced by the
pre-index code, at commit 19ec08b9769c763740ae5340be0e22fb64c25a06, where
every tick visited every member. The scenarios reach every way a member is
touched between its visits: answers, fetches, crashes, leaves, joins, a pause
(answers held), slow processing, the three network partitions, a subscription
change, a restart, a broker crash (failed calls), a crowd of idle members and
a topic growing (metadata refreshes, one of them during a pause).

The modern protocols' digests were re-pinned when ``offsets_committed``
gained its ``duration_ms`` (when the coordinator stored the commit): a change
of what is logged, not of the schedule; the legacy digests stayed as they were.
The legacy sim-faults digest was re-pinned when a reply out of order became a
dropped connection (``zk_registry.connection.JavaXidConnectionHandler``, the Java
client's answer, conformance script 29): a request c-0 sent into its ZooKeeper
partition (9-11 s) is lost, and the reply to its next one (after add_partitions, at
11 s) comes back with a later xid, so c-0 now goes SUSPENDED and CONNECTED again in
the same session 109 emulated ms later instead of LOST (kazoo's dead connection
thread) with its session expired.

When the due-index landed, 22 digests matched: these and eleven more runs
(sim-small and sim-faults under classic-cooperative, sim-crowd and
zombie-double-consume under both classic assignors, quickstart under
classic-eager, classic-cooperative and consumer, sim-grow under
classic-eager and consumer). The suite keeps the cheaper half, about 20 s of
CPU, which still reaches every touch point.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from actors.orchestrator import run_scenario
from actors.sim.run import SimEngine
from emulator.scenario import Scenario, bundled_scenarios, load_scenario, parse_scenario
from tests.unit.sim.test_sim_runs import SCENARIO as SIM_SMALL

FAULTS = """
name = "sim-faults"
description = "every host-side fault on a small group: the due-index's touch points"
seed = 11
duration_s = 32.0
time_scale = 0.5

[cluster]
brokers = 3
zookeeper_ensemble = 1

[[topics]]
name = "a"
partitions = 4
replication_factor = 2

[[topics]]
name = "b"
partitions = 3
replication_factor = 2

[producer]
rate_per_s = 60.0
topics = ["a", "b"]

[group]
id = "faults-group"
consumers = 4
topics = ["a"]
processing_ms_per_message = 3.0
manual_commit = "sync"
rebalance_listener = "commit-on-revoke"

[kafka]
"zookeeper.session.timeout.ms" = 6000
"session.timeout.ms" = 10000
"group.consumer.min.session.timeout.ms" = 6000
"group.consumer.session.timeout.ms" = 10000
"auto.offset.reset" = "smallest"

[[timeline]]
at_s = 4.0
action = "pause"
member = "c-1"
duration_s = 3.0

[[timeline]]
at_s = 5.0
action = "slow"
member = "c-2"
duration_s = 4.0
processing_ms_per_message = 40.0

[[timeline]]
at_s = 6.0
action = "network_partition"
members = ["c-3"]
target = "brokers"
duration_s = 2.5

[[timeline]]
at_s = 8.0
action = "network_partition"
members = ["c-0"]
target = "coordinator"
duration_s = 2.0

[[timeline]]
at_s = 9.0
action = "network_partition"
members = ["c-0"]
target = "zookeeper"
duration_s = 2.0

[[timeline]]
at_s = 11.0
action = "add_partitions"
topic = "a"
partitions = 6

[[timeline]]
at_s = 13.0
action = "subscribe"
members = ["c-0", "c-3"]
topics = ["a", "b"]

[[timeline]]
at_s = 16.0
action = "restart"
members = ["c-2"]
downtime_s = 1.5

[[timeline]]
at_s = 19.0
action = "broker_crash"
broker = 1
restart_after_s = 4.0

[[timeline]]
at_s = 25.0
action = "join"
"""

CROWD = """
name = "sim-crowd"
description = "40 consumers on 8 partitions: most idle, one joins, one crashes, one leaves"
seed = 13
duration_s = 20.0
time_scale = 0.5

[cluster]
brokers = 3
zookeeper_ensemble = 1

[[topics]]
name = "events"
partitions = 8
replication_factor = 2

[producer]
rate_per_s = 80.0
topics = ["events"]

[group]
id = "crowd-group"
consumers = 40
topics = ["events"]
processing_ms_per_message = 2.0
consumers_per_host = 25

[kafka]
"zookeeper.session.timeout.ms" = 6000
"session.timeout.ms" = 10000
"group.consumer.min.session.timeout.ms" = 6000
"group.consumer.session.timeout.ms" = 10000
"auto.offset.reset" = "smallest"

[[timeline]]
at_s = 5.0
action = "join"

[[timeline]]
at_s = 8.0
action = "crash"
member = "c-3"

[[timeline]]
at_s = 12.0
action = "leave"
member = "c-5"
"""

GROW = """
name = "sim-grow"
description = "a topic grows; the modern members learn it at their metadata refresh (300 s)"
seed = 5
duration_s = 320.0
time_scale = 0.2

[cluster]
brokers = 3
zookeeper_ensemble = 1

[[topics]]
name = "a"
partitions = 4
replication_factor = 2

[producer]
rate_per_s = 20.0
topics = ["a"]

[group]
id = "grow-group"
consumers = 3
topics = ["a"]
processing_ms_per_message = 3.0

[kafka]
"auto.offset.reset" = "smallest"

[[timeline]]
at_s = 20.0
action = "add_partitions"
topic = "a"
partitions = 6

[[timeline]]
at_s = 100.0
action = "restart"
members = ["c-2"]
downtime_s = 0.0

[[timeline]]
at_s = 298.0
action = "pause"
member = "c-1"
duration_s = 6.0
"""

TEXTS = {"sim-small": SIM_SMALL, "sim-faults": FAULTS, "sim-crowd": CROWD, "sim-grow": GROW}

# Produced by the pre-index code (commit 19ec08b9769c763740ae5340be0e22fb64c25a06), one
# run_scenario per (scenario, protocol) with SimEngine(seed=<the scenario's seed>).
EXPECTED: dict[tuple[str, str], str] = {
    ("sim-small", "zookeeper"): (
        "5422a200fcc2a91cafa7debea0a0f7094359a72ebe2b8deb0274385f23388ad1"
    ),
    ("sim-small", "classic-eager"): (
        "a9b81bfdc01e52cdecf4907e77c9d9f8628949f558885a040a0170d0a90543b4"
    ),
    ("sim-small", "consumer"): ("e17cb10ef8379b39f267179a4fb129f0cd24bdf173812792353619dff67be65c"),
    ("quickstart", "zookeeper"): (
        "ed87af6bda36d2cdb9ffda317ef6e25fea45400189b99a18ec263cee88cb5201"
    ),
    ("zombie-double-consume", "zookeeper"): (
        "152282fc4a9dbd8ba52f43de3ef82ac12e0e7f35c6e9c48d4d5094c778491ddd"
    ),
    ("zombie-double-consume", "consumer"): (
        "c95172a77240e8e04653954449d5ec8c78552ae843aa8ec397da5107bf58b5b3"
    ),
    ("sim-faults", "zookeeper"): (  # re-pinned: a reply out of order drops the connection
        "92c126ecec5702cf4b0935fe84b2c81cab54b723fe0b643f1da8f84a0b08864d"
    ),
    ("sim-faults", "classic-eager"): (
        "c73d40ba4430f9e6266c5ba6c2cb3016340f44c124bb697de9446715aa2a9d21"
    ),
    ("sim-faults", "consumer"): (
        "4c39905ab0ef86dac6e2c0c5f39fb75b0d0087f04d62ebc0215daee119e1ad82"
    ),
    ("sim-crowd", "zookeeper"): (
        "5e9a78510208eb48e6fdfa6fe3d36f064de31b749742c68d1bc6a1670d5a65bb"
    ),
    ("sim-crowd", "consumer"): ("cb801cc7289a758efa0a918f746c01fadb5dc775c02ae7b3cf0a64942cdf1582"),
}


def _scenario(name: str) -> Scenario:
    if name in TEXTS:
        return parse_scenario(TEXTS[name], f"{name}.toml")
    return load_scenario(bundled_scenarios()[name])


@pytest.mark.parametrize(
    ("name", "protocol"),
    [pytest.param(name, protocol) for name, protocol in EXPECTED],
)
def test_the_log_digest_is_the_pre_index_codes(tmp_path: Path, name: str, protocol: str) -> None:
    scenario = _scenario(name)
    results = run_scenario(
        scenario, [protocol], tmp_path / "run", engine=SimEngine(seed=scenario.seed)
    )
    assert [r.status for r in results] == ["completed"]
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["engine"]["log_digest"][protocol] == EXPECTED[(name, protocol)]
