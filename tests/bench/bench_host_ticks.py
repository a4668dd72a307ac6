#!/usr/bin/env python
"""Benchmark: process CPU per emulated second of a large sim group, and the host ticks' part.

What it measures: one ``run_scenario`` on the sim engine of a generated
scenario (``--members`` consumers, 250 per consumer host, one topic of
``--partitions`` partitions, 200 messages/s, one join at 10 s, ``--duration``
emulated seconds at time scale 1) under one protocol (default KIP-848
``consumer``): the process CPU seconds of the run, per emulated second of the
scenario, and the CPU spent inside :meth:`emulator.host.core.HostCore.tick`
(the members' visits, the fetch wants, the group batches, the housekeeping),
with how many member visits the ticks made (``visits``) against the members
present at each tick (``member_ticks``: what a tick visiting every member
visits). Process CPU, not wall: the numbers
are meant for a busy machine. The run's log digest is printed too, so two
versions of the host core can be checked to produce the same run.

R9 (the host core's due-index) is the change this measures: run it on the
commit before and after (``git worktree`` or ``git archive`` of the older one,
run from that directory); ``visits`` is null on code without the index.

Usage::

    .venv/bin/python tests/bench/bench_host_ticks.py                       # 500 on 200, consumer
    .venv/bin/python tests/bench/bench_host_ticks.py --members 2000 --partitions 400
    .venv/bin/python tests/bench/bench_host_ticks.py --protocol classic-cooperative
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path.cwd()
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the code of the directory it is run from


def scenario_text(members: int, partitions: int, duration_s: float) -> str:
    """The generated scenario: a group of ``members`` on one topic, one join at 10 s."""
    return f"""
name = "host-ticks-{members}"
description = "{members} consumers on {partitions} partitions, one join"
seed = 3
duration_s = {duration_s}
time_scale = 1.0

[cluster]
brokers = 3
zookeeper_ensemble = 1

[[topics]]
name = "t"
partitions = {partitions}
replication_factor = 1

[producer]
rate_per_s = 200.0
partitioner = "round-robin"
batch_size = 50

[group]
id = "host-ticks-group"
consumers = {members}
processing_ms_per_message = 1.0
consumers_per_host = 250

[kafka]
"zookeeper.session.timeout.ms" = 6000
"session.timeout.ms" = 10000
"group.consumer.min.session.timeout.ms" = 6000
"group.consumer.session.timeout.ms" = 10000
"auto.offset.reset" = "smallest"

[[timeline]]
at_s = 10.0
action = "join"
"""


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def measure(members: int, partitions: int, protocol: str, duration_s: float) -> dict[str, Any]:
    """One run; its CPU figures, the host ticks' share and the log digest."""
    from actors.orchestrator import run_scenario
    from actors.sim.run import SimEngine
    from emulator.host import core as host_core
    from emulator.scenario import parse_scenario

    ticks = {"cpu_s": 0.0, "count": 0, "members": 0}
    visits: dict[str, int] = {"count": 0}
    tick = host_core.HostCore.tick

    def timed_tick(self: Any, now_ms: float) -> None:
        t0 = time.process_time()
        tick(self, now_ms)
        ticks["cpu_s"] += time.process_time() - t0
        ticks["count"] += 1
        ticks["members"] += len(self.members)

    host_core.HostCore.tick = timed_tick  # type: ignore[method-assign]
    visit = getattr(host_core.HostCore, "_visit", None)
    if visit is not None:

        def counted_visit(self: Any, *args: Any) -> None:
            visits["count"] += 1
            visit(self, *args)

        setattr(host_core.HostCore, "_visit", counted_visit)  # noqa: B010 (absent before R9)
    scenario = parse_scenario(scenario_text(members, partitions, duration_s), "host-ticks.toml")
    with tempfile.TemporaryDirectory() as d:
        c0, w0 = _cpu_s(), time.monotonic()
        (result,) = run_scenario(scenario, [protocol], Path(d) / "run", engine=SimEngine(seed=3))
        cpu, wall = _cpu_s() - c0, time.monotonic() - w0
        manifest = json.loads((Path(d) / "run" / "manifest.json").read_text())
    return {
        "members": members,
        "partitions": partitions,
        "protocol": protocol,
        "status": result.status,
        "scenario_s": duration_s,
        "cpu_s": round(cpu, 2),
        "wall_s": round(wall, 2),
        "cpu_per_scenario_s": round(cpu / duration_s, 3),
        "host_tick_cpu_s": round(ticks["cpu_s"], 2),
        "host_ticks": ticks["count"],
        "member_ticks": ticks["members"],
        "visits": visits["count"] if visit is not None else None,
        "processed": result.summary.to_dict().get("processed"),
        "log_digest": manifest["engine"]["log_digest"][protocol],
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--members", type=int, default=500)
    p.add_argument("--partitions", type=int, default=200)
    p.add_argument("--protocol", default="consumer")
    p.add_argument("--duration", type=float, default=30.0, help="emulated seconds")
    args = p.parse_args()
    print(json.dumps(measure(args.members, args.partitions, args.protocol, args.duration)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
