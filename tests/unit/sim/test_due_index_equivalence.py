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

Every digest was re-pinned when the followers' replica fetch became Kafka's
long poll (a leader holds a fetch that finds nothing new until an append, a
leader move or ``replica.fetch.wait.max.ms``; the follower fetches again as
soon as it applied an answer) instead of a poll every 25 ms. Two causes: the
run id (stamped on every event; part of the brokers' actor names, so of the
names of their random streams) holds a digest of the scenario, which changed
with the new Kafka key ``replica.fetch.wait.max.ms``; and an ``acks=all``
batch is now committed about 1 ms after its append instead of 25-50 ms, which
moves when consumers see, process and commit it. Both codes were run again
with one fixed run id: every run completed, every ISR change is the same, the
rebalance sequence is the same in sim-small (0.8 and KIP-848), quickstart,
and zombie-double-consume and sim-crowd (KIP-848); elsewhere the counts moved
by a few events (processing batches, a herd attempt in sim-crowd), and in
sim-faults the fault windows now catch members at different moments (under
0.8, c-1's ZooKeeper session no longer expires after its pause, so 5 fewer
rebalances and 11 duplicates instead of 128).
All were re-pinned again with issue 19's topics (create and delete, filters):
the scenario gained keys (the run id again), events are schema 3, and the
setup writes each topic's ``/emulator/topics`` record (13 ms more before the
run's t = 0, which shifts every later instant). Run again with one fixed run id
against the long-poll code: the same rebalance, assignment and ownership events
in sim-small (0.8 and KIP-848) and zombie-double-consume (0.8); processed,
produced and committed counts moved by a few batches (sim-small 0.8: 1433 ->
1430 processed).
The KIP-848 sim-small and zombie-double-consume digests were re-pinned when
the member's auto-commit went before its heartbeat in one poll (Kafka's
request managers' order): a commit due with the heartbeat that acknowledges a
new epoch is no longer judged by that epoch (the headline scenario's 15
STALE_MEMBER_EPOCH auto-commit failures per sim run went to 0).

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
# run_scenario per (scenario, protocol) with SimEngine(seed=<the scenario's seed>); all
# re-pinned when the replica fetch became Kafka's long poll (see the module docstring).
EXPECTED: dict[tuple[str, str], str] = {
    ("sim-small", "zookeeper"): (
        "0a5f0e983737bd7b647ca32f7f0c184350f99db8e6c7d5a7ab96f1030bae0147"
    ),
    ("sim-small", "classic-eager"): (
        "4d0cb709483e6b1f84324974353b40c3444169bd132eb5ae39559a2ae8e61dd6"
    ),
    ("sim-small", "consumer"): ("acaac08b7543698ee266a5676857276d2ff53fd2e453a5961cb4533e2ed2cc34"),
    ("quickstart", "zookeeper"): (
        "e6ebe231f4392c67089646c8298da5d87731be39ac370291ce47da30f2a8abbc"
    ),
    ("zombie-double-consume", "zookeeper"): (
        "fc8214d7f92ae36f6da9c920e95d6ebe4dbceb81601bd2a795e06f0b35fb4eeb"
    ),
    ("zombie-double-consume", "consumer"): (
        "3e616cea30960c897dd83fd6ca09ea84ce36408e1268ce8437d0f2e8e379dc08"
    ),
    ("sim-faults", "zookeeper"): (
        "2a613e8f96fd12430bd8b29ff25de35711ee20951f7d6c25d5fa0f63b5a116a9"
    ),
    ("sim-faults", "classic-eager"): (
        "e851a593f6782f9c6c720613c18672c9846c31ba11c61cfbd9b51383e6b83e50"
    ),
    ("sim-faults", "consumer"): (
        "70a8c841850fec6454c18fd148202d2d4df5c2711d55c3889c382b4767c65391"
    ),
    ("sim-crowd", "zookeeper"): (
        "2d3290a83d88be68203c11eb6ad691d24c7d933b0cc9068867dd19e0d6878775"
    ),
    ("sim-crowd", "consumer"): ("98552617ec770822a75e7584a51e68918ee57f54bbbd3d68432aa58a9702ad19"),
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
