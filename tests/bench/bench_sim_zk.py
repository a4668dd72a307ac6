#!/usr/bin/env python
"""Benchmark: ZooKeeper operations per wall second on the simulated ZooKeeper (issue 18 §6 step 5).

What it measures: the CPU cost of one ZooKeeper operation of the sim engine,
through the whole stack the actors use: ``ZkUtils`` -> ``ZkClient`` (retry,
counting, ``_await``) -> ``SimKazooClient`` (queue, xid, ping bookkeeping) ->
two simulated network links -> ``SimEnsemble`` (session touch, pipeline,
``DataTree``) and back, all on one ``SimEventLoop`` (virtual time, so the
numbers are pure CPU: no waiting is ever real). Per ensemble size (1 =
standalone, no commit delay; 3 = a drawn quorum round trip per write):

* ``sequential``: one session, one operation at a time (``await`` each):
  ``create_persistent_path``, ``read``, ``update_persistent_path``,
  ``delete_path`` of ``--ops`` znodes each;
* ``concurrent``: ``--sessions`` sessions, each reading ``--ops`` /
  ``--sessions`` znodes with all reads in flight at once (``gather``);
* ``raw``: the same reads on one ``SimKazooClient`` directly
  (``get_async`` + ``rawlink``, no ``ZkClient``), the floor of the stack;
* ``herd``: ``--herd`` sessions ``watch_children`` one path (the legacy
  consumers' ids idiom), then one more child is created: every watcher is
  notified and re-reads (``exists`` + ``getChildren``); the wall time until
  every session has its delivery, and the operations it took.

Each phase reports wall seconds, process CPU seconds, operations (ZkClient's
own counter where it applies), operations per wall second, and the virtual
seconds it took. The numbers are noisy on a shared machine: read the CPU time
and prefer the median of several runs.

Results: a table on stdout and ``tests/bench/results/sim_zk.json``.

Usage::

    .venv/bin/python tests/bench/bench_sim_zk.py            # 20,000 ops, 200 sessions, herd 500
    .venv/bin/python tests/bench/bench_sim_zk.py --quick    # 2,000 ops, 50 sessions, herd 100
    .venv/bin/python tests/bench/bench_sim_zk.py --ensembles 3 --herd 1000
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from emulator.sim.loop import SimEventLoop  # noqa: E402
from emulator.sim.rng import Streams  # noqa: E402
from tests.bench import _document  # noqa: E402
from zk_registry.client import WatchEvent, ZkClient, ZkUtils, asyncio_dispatch  # noqa: E402
from zk_registry.sim.client import SimAsyncResult, SimKazooClient  # noqa: E402
from zk_registry.sim.server import SimEnsemble  # noqa: E402

RESULTS = ROOT / "tests" / "bench" / "results" / "sim_zk.json"


class Bench:
    """One ensemble on a fresh loop, and timing helpers."""

    def __init__(self, size: int, seed: int) -> None:
        self.loop = SimEventLoop()
        self.ens = SimEnsemble(self.loop, Streams(seed), size, tick_time_ms=2000).start()

    def client(self, name: str) -> ZkClient:
        zk = ZkClient(
            self.ens.connect_string,
            6.0,
            raw_factory=self.ens.raw_factory(name),
            dispatch=asyncio_dispatch(self.loop),
        )
        self.loop.run_until_complete(zk.start_async())
        return zk

    def timed(self, label: str, ops: int, body: Callable[[], Awaitable[Any]]) -> dict[str, Any]:
        """Run ``body`` to completion; ``ops`` is what it did (or a callable result)."""
        v0 = self.loop.time()
        c0 = time.process_time()
        w0 = time.perf_counter()
        result = self.loop.run_until_complete(body())
        wall = time.perf_counter() - w0
        cpu = time.process_time() - c0
        done = ops if ops else int(result)
        row = {
            "phase": label,
            "ops": done,
            "wall_s": round(wall, 4),
            "cpu_s": round(cpu, 4),
            "ops_per_wall_s": round(done / wall) if wall > 0 else None,
            "us_per_op_cpu": round(cpu / done * 1e6, 1) if done else None,
            "virtual_s": round(self.loop.time() - v0, 4),
        }
        return row

    def close(self) -> None:
        self.loop.close()
        if self.loop.errors:
            raise RuntimeError(f"loop errors: {self.loop.errors[:3]}")


def _counted(zk: ZkClient) -> int:
    reads, writes, _ = zk.counter.snapshot()
    return reads + writes


def run_size(size: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    b = Bench(size, args.seed)
    rows: list[dict[str, Any]] = []
    n: int = args.ops
    one = b.client("one")
    zk = ZkUtils(one)
    paths = [f"/bench/n{i:06d}" for i in range(n)]

    async def creates() -> int:
        before = _counted(one)
        for p in paths:
            await zk.create_persistent_path(p, b"x")
        return _counted(one) - before

    async def reads() -> int:
        for p in paths:
            await zk.read(p)
        return n

    async def updates() -> int:
        for p in paths:
            await zk.update_persistent_path(p, b"y")
        return n

    rows.append(b.timed("sequential create", 0, creates))
    rows.append(b.timed("sequential read", 0, reads))
    rows.append(b.timed("sequential update", 0, updates))

    sessions = [b.client(f"s{i}") for i in range(args.sessions)]
    per = max(1, n // len(sessions))

    async def concurrent() -> int:
        async def one_session(i: int, c: ZkClient) -> None:
            u = ZkUtils(c)
            await asyncio.gather(*(u.read(paths[(i * per + k) % n]) for k in range(per)))

        await asyncio.gather(*(one_session(i, c) for i, c in enumerate(sessions)))
        return per * len(sessions)

    rows.append(b.timed(f"concurrent read ({len(sessions)} sessions)", 0, concurrent))

    raw: SimKazooClient = one.kazoo

    async def raw_reads() -> int:
        fut: asyncio.Future[None] = b.loop.create_future()
        left = [n]

        def done(_: SimAsyncResult) -> None:
            left[0] -= 1
            if left[0] == 0:
                fut.set_result(None)

        for p in paths:
            raw.get_async(p).rawlink(done)
        await fut
        return n

    rows.append(b.timed("raw get_async (pipelined)", 0, raw_reads))

    async def deletes() -> int:
        for p in paths:
            await zk.delete_path(p)
        return n

    rows.append(b.timed("sequential delete", 0, deletes))

    herd = [b.client(f"h{i}") for i in range(args.herd)]
    delivered: list[int] = [0]

    def on_event(_: WatchEvent) -> None:
        delivered[0] += 1

    async def subscribe() -> int:
        await ZkUtils(herd[0]).make_sure_persistent_path_exists("/consumers/g/ids")
        for c in herd:
            await c.watch_children("/consumers/g/ids", on_event)
        return len(herd) * 2

    rows.append(b.timed(f"herd subscribe ({len(herd)})", 0, subscribe))

    async def change() -> int:
        before = sum(_counted(c) for c in herd)
        await herd[0].create_async("/consumers/g/ids/new", b"", ephemeral=True)
        while delivered[0] < len(herd):
            await asyncio.sleep(0.001)
        return sum(_counted(c) for c in herd) - before

    rows.append(b.timed(f"herd change ({len(herd)} watchers)", 0, change))
    for row in rows:
        row["ensemble"] = size
    for c in [one, *sessions, *herd]:
        b.loop.run_until_complete(c.stop_async())
    b.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", type=int, default=20_000)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--herd", type=int, default=500)
    parser.add_argument("--ensembles", default="1,3", help="comma-separated ensemble sizes")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="2,000 ops, 50 sessions, herd 100")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.quick:
        args.ops, args.sessions, args.herd = 2_000, 50, 100
    started = time.time()
    rows: list[dict[str, Any]] = []
    print(
        f"{'ens':>3} {'phase':<34} {'ops':>8} {'wall s':>8} {'cpu s':>8} {'ops/s':>8} "
        f"{'us/op':>7} {'virt s':>8}"
    )
    for size in (int(s) for s in args.ensembles.split(",")):
        for row in run_size(size, args):
            rows.append(row)
            print(
                f"{row['ensemble']:>3} {row['phase']:<34} {row['ops']:>8} {row['wall_s']:>8.3f} "
                f"{row['cpu_s']:>8.3f} {row['ops_per_wall_s'] or 0:>8} "
                f"{row['us_per_op_cpu'] or 0:>7} {row['virtual_s']:>8.3f}"
            )
    document = {**_document.header("sim_zk", started, args), "rows": rows}
    _document.write(args.out, document, ROOT)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
