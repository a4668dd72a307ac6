"""Acceptance: the legacy (0.8.2) consumer machine against a real ZooKeeper (A4-A7).

Each test drives real :class:`~emulator.legacy.consumer.LegacyConsumer`
machines through :class:`tests.integration.legacy_harness.LegacyHarness`: one
real ZooKeeper session per consumer on the session's standalone server (fresh
chroot per test), requests executed by the real
:class:`~zk_registry.legacy_driver.LegacyZkDriver`, watches delivered by the
server, and a fake clock that moves only when the test says so. Every
assertion about ownership is checked on the server, from an independent
session: the owner znodes, their data (the thread id) and their
``ephemeralOwner``.

Covered: the A5 steps and the A1 payloads; commit before release and the
hand-over of offsets; the claim conflict with its full roll-back, the exact
fixed back-off, ``rebalance.max.retries`` attempts and giving up (stranded,
A7) until the next group event; two consumers with different views of the
group (split brain, A7) that collide on NodeExists and converge; and a real
server-side session expiry (A4.4): the zombie window, the peers' take-over and
the re-registration on the new session, also while a rebalance is in flight.
"""

from __future__ import annotations

import pytest

from emulator.events import EventKind as K
from emulator.legacy.config import LegacyConsumerConfig
from emulator.legacy.consumer import ConsumerState
from emulator.legacy.messages import (
    ClaimOwnership,
    ReadAssignmentContext,
    ReadCluster,
    RegisterConsumer,
    ReleaseOwnership,
)
from tests.integration.legacy_harness import GROUP, LegacyHarness, Rec, eventually, run_harness
from zk_registry import layout as L

pytestmark = pytest.mark.zk

DEFAULTS = LegacyConsumerConfig()
BACKOFF = DEFAULTS.rebalance_backoff_ms  # 2000, = zookeeper.sync.time.ms
RETRIES = DEFAULTS.rebalance_max_retries  # 4


# --------------------------------------------------------------------------- helpers


def tps(*ps: int, topic: str = "t") -> set[tuple[str, int]]:
    return {(topic, p) for p in ps}


def partitions_of(recs: list[Rec]) -> set[tuple[str, int]]:
    return {(str(r.fields["topic"]), int(str(r.fields["partition"]))) for r in recs}


def kinds(h: LegacyHarness, name: str, since: int = 0) -> list[str]:
    """``name``'s trace without session-state lines (they arrive whenever kazoo says)."""
    return [r.what for r in h.events(name, since=since) if not r.what.startswith("state:")]


def seq_of(h: LegacyHarness, name: str, what: str | K, since: int = 0) -> int:
    recs = h.events(name, what, since)
    assert recs, f"no {what} of {name} since {since}"
    return recs[0].seq


def reasons(h: LegacyHarness, name: str, what: K, since: int = 0) -> list[object]:
    return [r.fields.get("reason") for r in h.events(name, what, since)]


# --------------------------------------------------------------------------- A5 steps


def test_rebalance_steps_commit_before_release_and_range_over_two(zk_connect: str) -> None:
    async def scenario(h: LegacyHarness) -> None:
        await h.setup_cluster({"t": 4}, brokers=[1, 2])
        c0 = await h.add("c0")
        h.start("c0")
        await h.converge()

        # The /ids znode: ephemeral, c0's session, the exact A1 payload (timestamp = now).
        admin = await h.admin()
        data, stat = await admin.get_async(L.consumer_id_path(GROUP, c0.consumer_id))
        assert data == (
            b'{"version":1,"subscription":{"t":1},"pattern":"static","timestamp":"5000"}'
        )
        assert stat.ephemeralOwner == c0.session_id
        assert c0.consumer_id == "g_host0-1441996002307-9a86b603"

        # A5 in order; nothing owned yet, so no stop, commit or release.
        assert kinds(h, "c0") == [
            K.CONSUMER_STARTED,
            "req:RegisterConsumer", "done:RegisterConsumer",
            K.CONSUMER_REGISTERED,
            K.REBALANCE_STARTED,
            K.ATTEMPT_STARTED,
            "req:ReadCluster", "done:ReadCluster",
            "req:ReadRebalanceContext", "done:ReadRebalanceContext",
            "req:ReadAssignmentContext", "done:ReadAssignmentContext",
            K.ASSIGNMENT_COMPUTED,
            "req:FetchOffsets", "done:FetchOffsets",
            "req:ClaimOwnership", "done:ClaimOwnership",
            *[K.OWNERSHIP_CLAIMED] * 4,
            *[K.FETCHING_STARTED] * 4,
            "StartFetchers",
            K.ATTEMPT_FINISHED,
            K.REBALANCE_COMPLETED,
        ]
        # The owner znodes hold the thread id and belong to c0's session.
        snap = await h.snapshot()
        assert dict(snap.owners) == {("t", p): "g_host0-1441996002307-9a86b603-0" for p in range(4)}
        assert set(snap.owner_sessions.values()) == {c0.session_id}
        # A7 reads of the attempt, counted on the real server: getCluster 1+2,
        # own node + getAllBrokers 1+1+2, AssignmentContext 1+1+1+1+1, 4 offset reads.
        fin = h.events("c0", K.ATTEMPT_FINISHED)[0].fields
        assert fin["reason"] == "ok" and fin["zk_reads"] == 3 + 4 + 5 + 4
        await h.assert_converged()

        # c0 makes progress; then c1 joins, held before its first attempt so that
        # c0's rebalance (woken by the real /ids watch) runs first.
        for p, off in enumerate((10, 20, 30, 40)):
            c0.machine.consumed(("t", p), off)
        mark = h.mark()
        c1 = await h.add("c1")
        h.hold("c1", ReadCluster)
        h.start("c1")
        await h.wait_held("c1", ReadCluster)
        await eventually(
            lambda: len(h.events("c0", K.REBALANCE_COMPLETED)) == 2, what="c0's second rebalance"
        )
        assert reasons(h, "c0", K.REBALANCE_TRIGGERED, mark) == ["ids"]
        assert reasons(h, "c0", K.REBALANCE_STARTED, mark) == ["ids"]
        # (b) stop fetchers and commit, before (c) release, before (d) the fresh read.
        order = [
            K.FETCHERS_STOPPED,
            "req:CommitOffsets",
            "done:CommitOffsets",
            K.OFFSETS_COMMITTED,
            "req:ReleaseOwnership",
            "done:ReleaseOwnership",
            K.OWNERSHIP_RELEASED,
            "req:ReadAssignmentContext",
            K.ASSIGNMENT_COMPUTED,
            "req:ClaimOwnership",
            K.OWNERSHIP_CLAIMED,
            K.REBALANCE_COMPLETED,
        ]
        seqs = [seq_of(h, "c0", what, mark) for what in order]
        assert seqs == sorted(seqs), list(zip(order, seqs, strict=True))
        # Every commit landed before the release was even issued.
        last_commit = h.events("c0", K.OFFSETS_COMMITTED, mark)[-1].seq
        assert last_commit < seq_of(h, "c0", "req:ReleaseOwnership", mark)
        committed = {
            (r.fields["partition"], r.fields["offset_end"], r.fields["reason"])
            for r in h.events("c0", K.OFFSETS_COMMITTED, mark)
        }
        assert committed == {(0, 10, "rebalance"), (1, 20, "rebalance"),
                             (2, 30, "rebalance"), (3, 40, "rebalance")}
        released = h.events("c0", K.OWNERSHIP_RELEASED, mark)
        assert partitions_of(released) == tps(0, 1, 2, 3)
        assert {r.fields["reason"] for r in released} == {"release"}
        for p, stored in enumerate((b"10", b"20", b"30", b"40")):
            assert (await admin.get_async(L.offset_path(GROUP, "t", p)))[0] == stored
        assert partitions_of(h.events("c0", K.OWNERSHIP_CLAIMED, mark)) == tps(0, 1)

        h.release("c1")
        await h.converge()
        snap = await h.assert_converged()
        assert dict(snap.owners) == {
            ("t", 0): c0.thread(), ("t", 1): c0.thread(),
            ("t", 2): c1.thread(), ("t", 3): c1.thread(),
        }
        # The next owner starts where the previous one committed.
        assert c1.fetching == {("t", 2): (c1.thread(), 30), ("t", 3): (c1.thread(), 40)}
        assert c0.fetching == {("t", 0): (c0.thread(), 10), ("t", 1): (c0.thread(), 20)}
        assert reasons(h, "c1", K.ATTEMPT_FINISHED) == ["ok"]
        assert reasons(h, "c0", K.ATTEMPT_FINISHED) == ["ok", "ok"]
        assert [r.fields["detail"] for r in h.events("c1", K.ASSIGNMENT_COMPUTED)] == [
            "members=2"
        ]

    run_harness(zk_connect, scenario, start_ms=5_000.0)


# --------------------------------------------------------------------------- conflicts


def test_conflict_rollback_exact_backoff_retries_give_up_and_recover(zk_connect: str) -> None:
    async def scenario(h: LegacyHarness) -> None:
        await h.setup_cluster({"t": 3})
        # A half-claimed owner node of another session (kafka-node#981), made beforehand.
        intruder = await h.session()
        await intruder.create_persistent_recursive(L.owners_topic_path(GROUP, "t"))
        blocker = L.owner_path(GROUP, "t", 1)
        await intruder.create_async(blocker, b"g_intruder-0", ephemeral=True)

        c0 = await h.add("c0")
        h.hold("c0", ReleaseOwnership)  # it owns nothing: its only release is the roll-back
        h.start("c0")
        await h.wait_held("c0", ReleaseOwnership)
        # Attempt 0 claimed t:0 and t:2 (every create is tried) and met NodeExists on t:1.
        snap = await h.snapshot()
        assert dict(snap.owners) == {
            ("t", 0): c0.thread(), ("t", 1): "g_intruder-0", ("t", 2): c0.thread()
        }
        assert snap.owner_sessions[("t", 0)] == snap.owner_sessions[("t", 2)] == c0.session_id
        assert snap.owner_sessions[("t", 1)] == intruder.session_id
        conflicts = h.events("c0", K.CLAIM_CONFLICT)
        assert [(r.fields["partition"], r.fields["detail"]) for r in conflicts] == [
            (1, "g_intruder-0")
        ]
        rollback = (await h.wait_held("c0", ReleaseOwnership))
        assert isinstance(rollback, ReleaseOwnership) and rollback.rollback
        assert set(rollback.partitions) == tps(0, 2)
        h.release("c0")
        await h.settle()
        # Every node of the attempt is gone from the server; the intruder's stays.
        snap = await h.snapshot()
        assert dict(snap.owners) == {("t", 1): "g_intruder-0"}
        assert partitions_of(h.events("c0", K.OWNERSHIP_RELEASED)) == tps(0, 2)
        assert reasons(h, "c0", K.OWNERSHIP_RELEASED) == ["rollback", "rollback"]
        assert c0.machine.state is ConsumerState.BACKOFF
        assert c0.machine.owned == {} and c0.fetching == {}

        # Each attempt backs off exactly rebalance.backoff.ms; none starts a ms earlier.
        for attempt in range(1, RETRIES):
            backoff = h.events("c0", K.REBALANCE_BACKOFF)[-1]
            assert backoff.fields == {**backoff.fields, "attempt": attempt - 1,
                                      "duration_ms": BACKOFF}
            assert c0.machine.next_deadline() == backoff.t + BACKOFF
            await h.advance_to(backoff.t + BACKOFF - 1)
            assert len(h.events("c0", K.ATTEMPT_STARTED)) == attempt
            assert c0.machine.state is ConsumerState.BACKOFF
            await h.advance(1)
            started = h.events("c0", K.ATTEMPT_STARTED)
            assert [r.fields["attempt"] for r in started] == list(range(attempt + 1))
            assert started[-1].t == backoff.t + BACKOFF
            assert reasons(h, "c0", K.ATTEMPT_FINISHED)[-1] == "conflict"
            assert dict((await h.snapshot()).owners) == {("t", 1): "g_intruder-0"}

        # A sleep after the last failed attempt too, then it gives up owning nothing.
        backoff = h.events("c0", K.REBALANCE_BACKOFF)[-1]
        assert backoff.fields["attempt"] == RETRIES - 1
        await h.advance_to(backoff.t + BACKOFF - 1)
        assert h.events("c0", K.REBALANCE_FAILED) == []
        await h.advance(1)
        failed = h.events("c0", K.REBALANCE_FAILED)
        assert len(failed) == 1 and failed[0].t == backoff.t + BACKOFF
        assert failed[0].fields["reason"] == (
            "g_host0-1441996002307-9a86b603 can't rebalance after 4 retries"
        )
        assert failed[0].fields["count"] == 0
        assert reasons(h, "c0", K.ATTEMPT_FINISHED) == ["conflict"] * RETRIES
        assert len(h.events("c0", K.REBALANCE_BACKOFF)) == RETRIES
        assert len(h.events("c0", K.CLAIM_CONFLICT)) == RETRIES
        assert len(h.events("c0", K.OWNERSHIP_CLAIMED)) == 2 * RETRIES
        assert reasons(h, "c0", K.OWNERSHIP_RELEASED) == ["rollback"] * (2 * RETRIES)
        assert c0.machine.state is ConsumerState.GAVE_UP
        assert c0.machine.owned == {} and c0.fetching == {}
        snap = await h.snapshot()
        assert snap.owned_by(c0.consumer_id) == {}
        assert dict(snap.owners) == {("t", 1): "g_intruder-0"}
        assert set(snap.members) == {c0.consumer_id}  # still registered, owning nothing

        # The blocker goes, but owner nodes are not watched: c0 stays stranded (A7).
        await intruder.delete_async(blocker)
        await h.advance(20_000)
        assert len(h.events("c0", K.ATTEMPT_STARTED)) == RETRIES
        assert dict((await h.snapshot()).owners) == {}
        assert c0.machine.state is ConsumerState.GAVE_UP

        # The next group event (a member joins) brings it back.
        mark = h.mark()
        c1 = await h.join("c1")
        await h.wait_watch(["c0"], since=mark)
        await h.converge()
        assert "ids" in reasons(h, "c0", K.REBALANCE_TRIGGERED, mark)
        snap = await h.assert_converged()
        assert dict(snap.owners) == {
            ("t", 0): c0.thread(), ("t", 1): c0.thread(), ("t", 2): c1.thread()
        }

    run_harness(zk_connect, scenario)


def test_split_views_collide_on_node_exists_then_converge(zk_connect: str) -> None:
    """A reads the group before B's registration is visible, B after: both claim t:2 and t:3."""

    async def scenario(h: LegacyHarness) -> None:
        await h.setup_cluster({"t": 4})
        a = await h.add("a")
        b = await h.add("b")
        h.hold("b", RegisterConsumer)
        h.hold("a", ClaimOwnership, ReleaseOwnership)
        h.start("a")
        h.start("b")
        await h.wait_held("a", ClaimOwnership)
        # A's view: itself alone, so all four partitions are its share.
        computed = h.events("a", K.ASSIGNMENT_COMPUTED)
        assert [(r.fields["count"], r.fields["detail"]) for r in computed] == [(4, "members=1")]
        assert set((await h.snapshot()).members) == {a.consumer_id}

        h.release("b")  # B registers now: A's /ids watch fires, B reads the group after
        await eventually(lambda: h.events("b", K.REBALANCE_COMPLETED), what="b's rebalance")
        await eventually(lambda: h.events("a", "watch:ids"), what="a's /ids watch")
        await h.settle()
        computed = h.events("b", K.ASSIGNMENT_COMPUTED)
        assert [(r.fields["partitions"], r.fields["detail"]) for r in computed] == [
            ("t:2,t:3", "members=2")
        ]
        assert dict((await h.snapshot()).owners) == {("t", 2): b.thread(), ("t", 3): b.thread()}

        h.release("a", ClaimOwnership)  # A claims its stale share: NodeExists on t:2, t:3
        rollback = await h.wait_held("a", ReleaseOwnership)
        snap = await h.snapshot()
        assert dict(snap.owners) == {
            ("t", 0): a.thread(), ("t", 1): a.thread(),
            ("t", 2): b.thread(), ("t", 3): b.thread(),
        }
        assert snap.owner_sessions[("t", 0)] == a.session_id
        conflicts = h.events("a", K.CLAIM_CONFLICT)
        assert [(r.fields["partition"], r.fields["detail"]) for r in conflicts] == [
            (2, b.thread()), (3, b.thread())
        ]
        assert isinstance(rollback, ReleaseOwnership) and set(rollback.partitions) == tps(0, 1)
        h.release("a")
        await h.settle()
        assert dict((await h.snapshot()).owners) == {("t", 2): b.thread(), ("t", 3): b.thread()}
        assert a.machine.state is ConsumerState.BACKOFF
        backoff = h.events("a", K.REBALANCE_BACKOFF)[0]
        await h.advance_to(backoff.t + BACKOFF - 1)
        assert len(h.events("a", K.ATTEMPT_STARTED)) == 1
        await h.advance(1)
        assert h.events("a", K.ATTEMPT_STARTED)[1].t == backoff.t + BACKOFF
        await h.converge()

        snap = await h.assert_converged()
        assert dict(snap.owners) == {
            ("t", 0): a.thread(), ("t", 1): a.thread(),
            ("t", 2): b.thread(), ("t", 3): b.thread(),
        }
        # A: the stale attempt, the retry, then the rebalance its coalesced /ids event queued.
        assert reasons(h, "a", K.ATTEMPT_FINISHED) == ["conflict", "ok", "ok"]
        assert reasons(h, "a", K.REBALANCE_STARTED) == ["start", "ids"]
        assert reasons(h, "b", K.ATTEMPT_FINISHED) == ["ok"]

    run_harness(zk_connect, scenario)


# --------------------------------------------------------------------------- sessions


def test_real_session_expiry_peers_take_over_then_new_session_reregisters(
    zk_connect: str,
) -> None:
    async def scenario(h: LegacyHarness) -> None:
        await h.setup_cluster({"t": 6})
        await h.join_in_turn(["c0", "c1", "c2"])
        snap = await h.assert_converged()
        c0, c1, c2 = (h.consumers[n] for n in ("c0", "c1", "c2"))
        assert snap.owned_by(c2.consumer_id) == {("t", 4): c2.thread(), ("t", 5): c2.thread()}

        # Expire c2's session on the server; hold its handleNewSession for now.
        h.pause("c2")
        mark = h.mark()
        old_sid = await h.expire("c2")
        snap = await h.snapshot()  # another session's view: c2's ephemerals are gone
        assert c2.consumer_id not in snap.members
        assert old_sid not in snap.owner_sessions.values()
        await eventually(lambda: ("new_session", "") in c2.queued, what="c2's new session")
        assert c2.client.session_id != old_sid and c2.client.expirations == 1

        # The peers' /ids watches fire; they rebalance and claim c2's partitions.
        await h.wait_watch(["c0", "c1"], since=mark)
        await h.converge()
        for name in ("c0", "c1"):
            assert "ids" in reasons(h, name, K.REBALANCE_STARTED, mark)
        snap = await h.assert_converged(live=["c0", "c1"])
        assert dict(snap.owners) == {
            **{("t", p): c0.thread() for p in (0, 1, 2)},
            **{("t", p): c1.thread() for p in (3, 4, 5)},
        }
        assert tps(4, 5) <= partitions_of(h.events("c1", K.OWNERSHIP_CLAIMED, mark))
        # The zombie window (A7): c2 has not heard yet, keeps its registry and its
        # fetchers, while c1 fetches the same partitions.
        assert c2.machine.owned == {("t", 4): c2.thread(), ("t", 5): c2.thread()}
        assert set(c2.fetching) == tps(4, 5) and tps(4, 5) <= set(c1.fetching)
        assert h.events("c2", since=mark, what=K.REBALANCE_TRIGGERED) == []

        # handleNewSession: clear the registry, re-register on the new session, rebalance.
        mark = h.mark()
        h.resume("c2")
        await h.wait_watch(["c0", "c1"], since=mark)
        await h.converge()
        assert reasons(h, "c2", K.CONSUMER_REGISTERED) == ["start", "new_session"]
        assert reasons(h, "c2", K.REBALANCE_STARTED, mark)[0] == "new_session"
        snap = await h.assert_converged()
        assert snap.member_sessions[c2.consumer_id] == c2.session_id != old_sid
        assert snap.owned_by(c2.consumer_id) == {("t", 4): c2.thread(), ("t", 5): c2.thread()}
        assert {snap.owner_sessions[tp] for tp in tps(4, 5)} == {c2.session_id}
        assert len(c2.sessions) == 2
        assert h.events("c2", K.REBALANCE_FAILED) == []

    run_harness(zk_connect, scenario)


def test_session_expiry_mid_rebalance_reregisters_outside_the_lock(zk_connect: str) -> None:
    """handleNewSession registers at once, outside rebalanceLock: the parked attempt recovers."""

    async def scenario(h: LegacyHarness) -> None:
        await h.setup_cluster({"t": 4})
        await h.join_in_turn(["c0", "c1"])
        await h.assert_converged()
        c0 = h.consumers["c0"]
        # A partition-count change (the topic znode rewritten) wakes both consumers.
        h.hold("c0", ReadAssignmentContext)
        mark = h.mark()
        admin = await h.admin()
        data, _ = await admin.get_async(L.topic_path("t"))
        assignment = L.decode_topic_assignment(data)
        assignment[4] = assignment[0]
        await admin.set_async(L.topic_path("t"), L.encode_topic_assignment(assignment))
        await h.wait_held("c0", ReadAssignmentContext)
        assert h.events("c0", K.OWNERSHIP_RELEASED, mark)  # released, about to read the group
        old_sid = await h.expire("c0")
        await eventually(lambda: h.events("c0", K.CONSUMER_REGISTERED, mark), what="re-register")
        assert c0.session_id != old_sid
        assert c0.machine.state is ConsumerState.REBALANCING  # the old syncedRebalance holds on
        h.release("c0")
        await h.converge()
        await h.assert_converged()
        # The parked read ran on the new session after the registration: it found its
        # /ids znode (no NoNode error). Its claim may still meet NodeExists: c1, alone in
        # the group while c0 was away, may have claimed everything meanwhile.
        first = reasons(h, "c0", K.ATTEMPT_FINISHED, mark)[0]
        assert first in ("ok", "conflict"), first
        assert h.events("c0", K.REBALANCE_FAILED) == []
        assert reasons(h, "c0", K.REBALANCE_STARTED, mark)[:2] == ["topic:t", "new_session"]
        assert len((await h.snapshot()).owners) == 5

    run_harness(zk_connect, scenario)
