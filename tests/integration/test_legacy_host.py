"""Acceptance: legacy consumers inside a consumer host, in real time, on a real ZooKeeper.

:class:`~actors.consumer_host.ConsumerHostCore` runs here in-process, without
Ray: its tick loop drives real :class:`~emulator.legacy.consumer.LegacyConsumer`
machines, each with its own ZooKeeper session, on the run's
:class:`~emulator.clock.ScaledClock`. A small ``time_scale`` runs Kafka's
defaults fast (at 0.1 the 6 s session timeout is 0.6 s of wall time and the
2 s ``rebalance.backoff.ms`` 0.2 s). No broker actors: ``leaders`` is empty, so
nothing is fetched; only the group coordination runs.

Checked on the server (an independent session), through the host's
``owners()`` and in the event log read back with
:func:`emulator.eventlog.read_run_events`:

* a crashed consumer's ephemerals outlive it by about the session timeout,
  then vanish, and the survivors take its partitions; a consumer that leaves
  takes its ephemerals with it at once and the rest rebalance (A4.1);
* on a 3-member ensemble, killing a member that consumers are connected to
  changes nothing for the group: the sessions move to the other members, no
  session expires, no watch fires, nobody rebalances.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from actors.consumer_host import ConsumerHostCore
from actors.context import RunContext
from emulator.eventlog import ReadStats, read_run_events
from emulator.events import Event, EventKind, validate_event
from emulator.host.core import MemberSpec
from emulator.legacy.consumer import ConsumerState
from tests.integration.legacy_harness import Snapshot, eventually, snapshot
from zk_registry import layout as L
from zk_registry.brokers import (
    create_partition_states,
    create_topic,
    register_broker,
    setup_common_paths,
)
from zk_registry.client import ZkClient
from zk_registry.server import ZooKeeperEnsemble, parse_cons_timeouts

pytestmark = pytest.mark.zk

GROUP = "g"
TOPIC = "t"
PARTITIONS = 8
BROKERS = (0, 1)
SESSION_MS = 6000  # Kafka's zookeeper.session.timeout.ms default, emulated


# --------------------------------------------------------------------------- set-up


def run_context(events_dir: Path, zk_connect: str, zk_hosts: list[str], scale: float) -> RunContext:
    return RunContext(
        run_id=f"test-{uuid.uuid4().hex[:8]}",
        protocol="zookeeper",
        events_dir=str(events_dir),
        time_scale=scale,
        origin_wall=time.time(),
        zk_connect=zk_connect,
        zk_hosts=tuple(zk_hosts),
        seed=7,
        group=GROUP,
        kafka={},
        leaders={},  # no leaders: nothing is fetched, only coordination runs
        validate_events=True,
    )


def member_specs(names: list[str], proxied: frozenset[str] = frozenset()) -> list[MemberSpec]:
    return [
        MemberSpec(
            name,
            L.make_consumer_id(GROUP, f"host{i}", 1441996002307, f"{0x9A86B603 + i:08x}0000abcd"),
            {TOPIC: 1},
            use_proxy=name in proxied,
        )
        for i, name in enumerate(names)
    ]


class Cluster:
    """The run's chroot with live brokers and the topic, plus a session to inspect the group."""

    def __init__(self, parent: str, chroot: str = "/emu") -> None:
        self.parent = parent
        self.chroot = chroot
        self.connect = parent + chroot
        self.admin = ZkClient(self.connect, 4.0)

    async def start(self) -> None:
        root = ZkClient(self.parent, 4.0)  # the test's chroot: create the run's inside it
        await asyncio.wait_for(root.start_async(), 30)
        try:
            await root.create_persistent_recursive(self.chroot)
        finally:
            await root.stop_async()
        await asyncio.wait_for(self.admin.start_async(), 30)
        await setup_common_paths(self.admin)
        for b in BROKERS:  # live brokers: ephemeral, on this session
            await register_broker(
                self.admin, b, f"broker{b}", 9092 + b, timestamp_ms=1, session_timeout_s=4.0
            )
        assignment = await create_topic(
            self.admin, TOPIC, PARTITIONS, 2, random.Random(7), broker_ids=list(BROKERS)
        )
        states = await create_partition_states(
            self.admin, TOPIC, assignment, list(BROKERS), controller_epoch=1
        )
        assert sorted(states) == list(range(PARTITIONS))

    async def snapshot(self) -> Snapshot:
        return await snapshot(self.admin, GROUP, [TOPIC])

    async def stop(self) -> None:
        await self.admin.stop_async()


async def converged(host: ConsumerHostCore, cluster: Cluster, names: list[str]) -> Snapshot | None:
    """The snapshot if ``names`` are the group and own range over it, everywhere; else None."""
    snap = await cluster.snapshot()
    members = {n: host.members[n] for n in names if n in host.members}
    if len(members) != len(names):
        return None
    ids = {m.machine.consumer_id: n for n, m in members.items()}
    if set(snap.members) != set(ids) or dict(snap.owners) != snap.expected_range():
        return None
    if set(snap.owners) != snap.subscribed():
        return None
    owners = await host.owners()
    for name, m in members.items():
        mine = snap.owned_by(m.machine.consumer_id)
        if m.machine.state is not ConsumerState.STABLE or m.machine.owned != mine:
            return None
        if set(owners[name]) != set(mine):
            return None
        if any(snap.owner_sessions[tp] != m.zk.session_id for tp in mine):
            return None
        if snap.member_sessions[m.machine.consumer_id] != m.zk.session_id:
            return None
    return snap


async def wait_converged(
    host: ConsumerHostCore, cluster: Cluster, names: list[str], timeout: float = 20.0
) -> Snapshot:
    """Wait until :func:`converged`, and still so a few back-offs later (bounded)."""
    deadline = time.monotonic() + timeout
    settle_s = max(0.3, 2 * host.ctx.scaled_s(host.config.rebalance_backoff_ms))
    while time.monotonic() < deadline:
        snap = await converged(host, cluster, names)
        if snap is not None:
            await asyncio.sleep(settle_s)
            again = await converged(host, cluster, names)
            if again is not None and again == snap:
                return again
        await asyncio.sleep(0.05)
    snap = await cluster.snapshot()
    states = {n: m.machine.state.value for n, m in host.members.items()}
    raise AssertionError(
        f"group {names} did not converge in {timeout}s: owners={dict(snap.owners)} "
        f"expected={snap.expected_range()} states={states}"
    )


def run(scenario: Callable[[], Awaitable[None]], timeout: float = 55.0) -> None:
    async def main() -> None:
        await asyncio.wait_for(scenario(), timeout)

    asyncio.run(main())


def read_events(events_dir: Path) -> list[Event]:
    stats = ReadStats()
    events = list(read_run_events(events_dir, stats))
    assert stats.truncated_tail_bytes == 0
    for ev in events:
        validate_event(ev)
    return events


def of(events: list[Event], kind: EventKind, member: str | None = None) -> list[Event]:
    return [
        e
        for e in events
        if e["kind"] == kind.value and (member is None or e.get("member") == member)
    ]


def emu(ev: Event) -> float:
    t = ev["t_emu_ms"]
    assert isinstance(t, float)
    return t


# --------------------------------------------------------------------------- crash and leave


def test_crash_keeps_ephemerals_until_session_timeout_leave_drops_them_at_once(
    zk_connect: str, zk_server: ZooKeeperEnsemble, tmp_path: Path
) -> None:
    scale = 0.1
    parent = zk_connect
    connect = parent + "/emu"
    events_dir = tmp_path / "events"
    ctx = run_context(events_dir, connect, zk_server.hosts, scale)
    names = ["c-0", "c-1", "c-2", "c-3"]
    crashed, leaver = "c-3", "c-2"
    leave_called_ms: list[float] = []

    async def scenario() -> None:
        cluster = Cluster(parent)
        host = ConsumerHostCore(0, ctx, brokers={})
        stopped = False
        try:
            await cluster.start()
            await host.start()
            assert await host.add_consumers(member_specs(names, frozenset({crashed}))) == names
            snap = await wait_converged(host, cluster, names)
            assert len(snap.owners) == PARTITIONS and len(set(snap.owners.values())) == 4

            # crash(): no goodbye through its proxy; the server keeps its ephemerals
            # until the session times out.
            victim = host.members[crashed]
            assert victim.proxy is not None
            cid, sid = victim.machine.consumer_id, victim.zk.session_id
            negotiated_s = (victim.zk.negotiated_session_timeout_ms or 0) / 1000.0
            assert negotiated_s == pytest.approx(ctx.scaled_s(SESSION_MS))
            lost = set(snap.owned_by(cid))
            assert len(lost) == 2
            ids_path = L.consumer_id_path(GROUP, cid)
            # The server hears from the session now, so its expiry is not earlier
            # than t_touch + the timeout (a late ping under load cannot shorten it).
            t_touch = time.monotonic()
            assert await victim.zk.exists_async("/") is not None
            t0 = time.monotonic()
            assert await host.crash(crashed)
            crash_s = time.monotonic() - t0
            still = await cluster.admin.exists_async(ids_path)
            if crash_s < 0.5 * negotiated_s:  # crash() takes ~50 ms: checked in practice
                assert still is not None and still.ephemeralOwner == sid
                held = await cluster.snapshot()
                assert {tp for tp, s in held.owner_sessions.items() if s == sid} == lost
            gone_at: list[float] = []

            async def ids_gone() -> bool:
                if await cluster.admin.exists_async(ids_path) is None:
                    gone_at.append(time.monotonic())
                    return True
                return False

            deadline = time.monotonic() + negotiated_s + 5.0
            while not await ids_gone():
                assert time.monotonic() < deadline, "crashed consumer's session never expired"
                await asyncio.sleep(0.01)
            lived_s = gone_at[0] - t_touch
            # Expiry = the session's last touch (the request above, or a ping sent
            # before the crash cut it off) + the timeout, rounded up to the server's
            # tick; both clocks are this machine's monotonic one.
            assert 0.98 * negotiated_s <= lived_s <= negotiated_s + 2.0 + (t0 - t_touch), (
                lived_s,
                negotiated_s,
            )
            after = await cluster.snapshot()
            assert sid not in after.owner_sessions.values() and cid not in after.members

            survivors = [n for n in names if n != crashed]
            snap = await wait_converged(host, cluster, survivors)
            assert lost <= set(snap.owners)
            assert host.gone == {crashed: "crashed"}

            # leave(): the session is closed, its ephemerals go with it at once.
            leaving = host.members[leaver]
            lcid, lsid = leaving.machine.consumer_id, leaving.zk.session_id
            leave_called_ms.append(ctx.clock().now_ms())
            assert await host.leave(leaver)
            right_after = await cluster.snapshot()
            assert lcid not in right_after.members
            assert lsid not in right_after.owner_sessions.values()
            rest = [n for n in survivors if n != leaver]
            snap = await wait_converged(host, cluster, rest)
            assert dict(snap.owners) == snap.expected_range()
            assert {L.parse_thread_id(t)[0] for t in snap.owners.values()} == {
                host.members[n].machine.consumer_id for n in rest
            }
            stats = await host.stats()
            assert stats["members"] == 2 and stats["gave_up"] == 0
            final = {n: sorted(snap.owned_by(host.members[n].machine.consumer_id)) for n in rest}
            await host.stop()
            stopped = True
        finally:
            if not stopped:
                with contextlib.suppress(Exception):
                    await host.stop()
            await cluster.stop()

        events = read_events(events_dir)
        assert events and {e["actor"] for e in events} == {"host-0"}
        for n in names:
            assert [e.get("reason") for e in of(events, EventKind.CONSUMER_REGISTERED, n)] == [
                "start"
            ]
        assert len(of(events, EventKind.CONSUMER_CRASHED, crashed)) == 1
        assert of(events, EventKind.CONSUMER_STOPPED, crashed) == []
        for n in (leaver, *rest):
            assert len(of(events, EventKind.CONSUMER_STOPPED, n)) == 1
        assert of(events, EventKind.ZK_SESSION_EXPIRED) == []
        assert of(events, EventKind.REBALANCE_FAILED) == []
        # The survivors took the crashed consumer's partitions only after its
        # session expired: not before half the (emulated) session timeout.
        t_crash = emu(of(events, EventKind.CONSUMER_CRASHED, crashed)[0])
        takeover = [
            emu(e)
            for e in of(events, EventKind.OWNERSHIP_CLAIMED)
            if e.get("member") != crashed
            and (e["topic"], e["partition"]) in lost
            and emu(e) > t_crash
        ]
        assert takeover and min(takeover) - t_crash >= 0.5 * SESSION_MS
        # After the leave, the others were told at once (well inside a session timeout),
        # counted from the call of leave(): its session's close deletes the ids znode,
        # and the others' watches may fire before the leaver logs CONSUMER_STOPPED
        # (once the close has returned).
        (t_leave,) = leave_called_ms
        assert emu(of(events, EventKind.CONSUMER_STOPPED, leaver)[0]) >= t_leave
        told = [
            emu(e) for n in rest for e in of(events, EventKind.WATCH_FIRED, n) if emu(e) >= t_leave
        ]
        assert told and min(told) - t_leave < SESSION_MS
        # Each survivor's last completed rebalance reports what it ended with.
        for n in rest:
            done = of(events, EventKind.REBALANCE_COMPLETED, n)[-1]
            assert done["partitions"] == ",".join(f"{t}:{p}" for t, p in final[n])

    run(scenario)


# --------------------------------------------------------------------------- ensemble member loss


# What moves by itself: the tick-lag gauge and the process's resource use, and
# the reads a reconnected client makes to re-arm its watches (kazoo's
# SetWatches, done here as reads of the watched paths).
_GAUGES = frozenset({"tick_lag_max_ms", "wall", "cpu_s", "peak_rss_mib", "zk_reads"})


def counters(stats: dict[str, Any]) -> dict[str, Any]:
    """The host's group counters: members, rebalances, ZooKeeper writes and watch events."""
    return {k: v for k, v in stats.items() if k not in _GAUGES}


def sessions_by_member(ensemble: ZooKeeperEnsemble) -> dict[int, set[int]]:
    """Session ids connected to each live member (``cons``)."""
    out: dict[int, set[int]] = {}
    for i in range(ensemble.size):
        if ensemble.member_alive(i):
            with contextlib.suppress(OSError):
                out[i] = set(parse_cons_timeouts(ensemble.four_letter_word(i, "cons")))
    return out


@pytest.mark.parametrize("which", ["follower", "leader"])
def test_killing_an_ensemble_member_changes_nothing_for_the_group(
    zk_ensemble: ZooKeeperEnsemble, zk_ensemble_connect: str, tmp_path: Path, which: str
) -> None:
    """Sessions move to the surviving members; nothing expires, fires or rebalances.

    ``follower``: kill the follower most consumers are connected to (only they
    are cut off). ``leader``: kill the leader (every member drops its clients
    until a new leader is elected). While the member is down a fifth consumer
    joins: that rebalance needs no retry for an error. Then the member is
    restarted, and again nothing happens.
    """
    scale = 0.3  # session timeout 1.8 s wall: ample for a reconnect or an election
    parent = zk_ensemble_connect
    connect = parent + "/emu"
    events_dir = tmp_path / "events"
    ctx = run_context(events_dir, connect, zk_ensemble.hosts, scale)
    names = ["c-0", "c-1", "c-2", "c-3"]
    grown_names = [*names, "c-4"]
    session_s = ctx.scaled_s(SESSION_MS)
    loop_box: list[asyncio.AbstractEventLoop] = []
    marks: dict[str, float] = {}
    cut_off: set[str] = set()
    sids: dict[str, int | None] = {}

    async def blocking(fn: Callable[[], Any], timeout: float = 60.0) -> Any:
        return await asyncio.wait_for(loop_box[0].run_in_executor(None, fn), timeout)

    async def unchanged(host: ConsumerHostCore, cluster: Cluster, snap: Snapshot) -> None:
        for n, sid in sids.items():
            zk = host.members[n].zk
            assert zk.session_id == sid and zk.expirations == 0, n
        assert await converged(host, cluster, list(sids)) == snap

    async def scenario() -> None:
        loop_box.append(asyncio.get_running_loop())
        cluster = Cluster(parent)
        host = ConsumerHostCore(0, ctx, brokers={})
        stopped = False
        victim: int | None = None
        try:
            await cluster.start()
            await host.start()
            await host.add_consumers(member_specs(names))
            before = await wait_converged(host, cluster, names)
            sids.update({n: host.members[n].zk.session_id for n in names})
            by_member = await blocking(lambda: sessions_by_member(zk_ensemble))
            leader = await blocking(zk_ensemble.leader_index)
            assert leader is not None
            on = {i: {n for n, s in sids.items() if s in ss} for i, ss in by_member.items()}
            if which == "leader":
                victim = leader
                cut_off.update(names)  # followers drop their clients while they elect
            else:
                followers = [i for i in on if i != leader and on[i]]
                # (All four on the leader, about 1 run in 80: then the leader it is.)
                victim = max(followers, key=lambda i: len(on[i])) if followers else leader
                cut_off.update(on[victim])
            stats0 = counters(await host.stats())
            owners0 = await host.owners()
            marks["kill"] = host.clock.now_ms()

            killed: int = victim
            await blocking(lambda: zk_ensemble.kill_member(killed))
            await asyncio.sleep(0.2)
            await eventually(
                lambda: all(host.members[n].zk.connected for n in names),
                timeout=15,
                what="every consumer connected to a surviving member",
            )
            await asyncio.sleep(1.5 * session_s)  # well past a session timeout
            moved = await blocking(lambda: sessions_by_member(zk_ensemble))
            assert victim not in moved
            assert {sids[n] for n in names} <= set().union(*moved.values())
            await unchanged(host, cluster, before)
            assert await host.owners() == owners0
            assert counters(await host.stats()) == stats0

            # A membership change while the member is down rebalances as usual.
            marks["join"] = host.clock.now_ms()
            await host.add_consumers(member_specs(grown_names)[-1:])
            grown = await wait_converged(host, cluster, grown_names)
            sids["c-4"] = host.members["c-4"].zk.session_id

            marks["restart"] = host.clock.now_ms()
            await blocking(lambda: zk_ensemble.restart_member(killed, timeout=45))
            victim = None
            await asyncio.sleep(session_s)
            await unchanged(host, cluster, grown)
            marks["stop"] = host.clock.now_ms()  # leaving from here on makes the rest rebalance
            await host.stop()
            stopped = True
        finally:
            if not stopped:
                with contextlib.suppress(Exception):
                    await host.stop()
            await cluster.stop()
            if victim is not None:  # the fixture restarts it too; be tidy anyway
                down = victim
                with contextlib.suppress(Exception):
                    await blocking(lambda: zk_ensemble.restart_member(down, wait=False))

    run(scenario)

    events = read_events(events_dir)
    assert of(events, EventKind.ZK_SESSION_EXPIRED) == []
    assert of(events, EventKind.REBALANCE_FAILED) == []

    def during(kind: EventKind, start: str, end: str) -> list[Event]:
        return [e for e in of(events, kind) if marks[start] <= emu(e) < marks[end]]

    group_kinds = (
        EventKind.WATCH_FIRED,
        EventKind.REBALANCE_TRIGGERED,
        EventKind.REBALANCE_STARTED,
        EventKind.ATTEMPT_FINISHED,
        EventKind.OWNERSHIP_RELEASED,
        EventKind.OWNERSHIP_CLAIMED,
    )
    # Killing and restarting the member: not one watch, trigger, attempt or ownership change.
    for start, end in (("kill", "join"), ("restart", "stop")):
        assert [e for k in group_kinds for e in during(k, start, end)] == [], (start, end)
    # The join during the outage: the usual herd, and no attempt failed on an error.
    attempts = during(EventKind.ATTEMPT_FINISHED, "join", "restart")
    assert attempts
    assert [e for e in attempts if str(e["reason"]).startswith("error:")] == []
    # The cut-off consumers saw the connection drop and come back in the same session.
    for n in cut_off:
        states = [
            (e["state"], e.get("session_id"))
            for e in of(events, EventKind.ZK_SESSION_STATE, n)
            if marks["kill"] <= emu(e) < marks["join"]
        ]
        assert ("SUSPENDED", f"0x{sids[n]:x}") in states, (n, states)
        assert states[-1] == ("CONNECTED", f"0x{sids[n]:x}"), (n, states)
