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

All were re-pinned again for issue 19 part 4 (the classic client's metadata and
pattern subscription). ``metadata.max.age.ms`` became a key a scenario may set,
which changes every scenario's ``kafka_effective`` and so the run id. Both codes
were run with one fixed run id: ten runs gave byte-identical logs; only
sim-faults under classic-eager changed, because a classic member now refreshes
its metadata when Kafka forces it (c-0's and c-3's ``subscribe`` at 13 s asks
for the new topics' metadata, ``requestUpdateForNewTopics``; fetches failing
around broker 1's crash at 19 s and dropped connections ask too,
``Metadata.requestUpdate``) and keeps only the topics it needs. So the leader
c-0 assigns from "a"'s grown count (6 partitions since the add_partitions at
11 s) at the 38 s rebalance, where before it still had the 4 it started with
and left a:4 and a:5 unassigned to the end (the drain stopped after 30 s with
210 messages unprocessed; now none is, and the run closes at 41 s instead of
92 s); its SyncGroup waits one
metadata answer (``ensureFreshMetadata`` with an update requested), and the
metadata calls on the host's links move a few later deliveries by 1 ms.

All were re-pinned again for issue 20 (online migration): the Kafka key
``group.consumer.migration.policy`` joined every scenario's ``kafka_effective`` (the
run id again) and events are schema 4. Both codes were run with one fixed run id:
every one of these eleven runs gave the same events, field for field, apart from
``v`` and the wall-clock stamps.
All were re-pinned again in the session of the sim's speed targets (issue 18), for
two changes of the schedule, not of any protocol's rules: the brokers run their
coordinators' timers at their deadlines (Kafka's 1 ms timing wheel) instead of
polling them every 10 ms, which moves every modern session, rebalance, join and
sync timeout by up to 10 ms; and the driver's live status (twice a virtual
second) reads the hosts' and the producer's counters in place instead of calling
them over the simulated network, which no longer draws latencies from their
links (every protocol's later deliveries on those links move). Both codes were
run on these eleven runs: rebalances, attempts, conflicts, duplicates and
unprocessed are the same in all; processed and produced are the same in all
but sim-faults under 0.8 (1928 -> 1922 processed, 1919 -> 1913 produced: the
producer's last batch before the end).

All were re-pinned again for issue 21 (share groups): the ``share`` generation and
its Kafka keys (``group.share.*``, ``share.*``) joined every scenario's
``kafka_effective`` (the run id again) and events are schema 5. Both codes were
run with one fixed run id: the eleven runs' summaries are the same, events
counted included.

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
        "01de206be08a060bf302441d87149159289bd5b024f44c8d4d96674c96b8a8b4"
    ),
    ("sim-small", "classic-eager"): (
        "1565acdc80f0986fee16ab48de5f8c37dd5015dfe9cef8146cfac00afc04b7ae"
    ),
    ("sim-small", "consumer"): ("3ca6587abe899da5561117c2142e88c2ecf19cd71ee5cb17f58185d0a74510f4"),
    ("quickstart", "zookeeper"): (
        "0f7c73b82203fc9c48d837e4ecde2fffdc3ee9e2a22cb71d21cb4e60f5c7abd9"
    ),
    ("zombie-double-consume", "zookeeper"): (
        "d8a35fc6b9e9f5beca09e9e99f7375b40248ee3f75e30d3a70522d774cb2af3c"
    ),
    ("zombie-double-consume", "consumer"): (
        "4ccd58c460b1a547002f4faf86960cdcd039bab2616eeb1566583be623f569c6"
    ),
    ("sim-faults", "zookeeper"): (
        "c3057275e082e9d61060f0f577624b37ef6b7c2fce23ce632d43842daad685ed"
    ),
    ("sim-faults", "classic-eager"): (
        "0f8ab9d552220e74b1a8397308b58ae20a4ebd35911438b4c50c2e41451a6805"
    ),
    ("sim-faults", "consumer"): (
        "c787072b9a7a75b9763d497a396dff9f6eafcb0e0a19322431f8b06043599b62"
    ),
    ("sim-crowd", "zookeeper"): (
        "3c513c84408758c1d0f9d9444da52cd413ae0a0454dd017ede2c0799803aa0e0"
    ),
    ("sim-crowd", "consumer"): ("cbfbee6402cbc10845e6bf956e549a1e5d9e53e986245bcd81e00cb88696685c"),
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
