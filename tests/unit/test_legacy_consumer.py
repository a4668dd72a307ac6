"""The Kafka 0.8.2.2 legacy consumer machine against a fake ZooKeeper (kafka-protocols.md A4-A7).

Every test drives :class:`~emulator.legacy.consumer.LegacyConsumer` through the
:class:`tests.unit.fakezk.World` on a fake clock: the rebalance steps in A5
order, the range assignment of A6 as the end state, commit-before-release, the
claim conflict with its full roll-back and the fixed ``rebalance.backoff.ms``
(lock-step retries), giving up after ``rebalance.max.retries`` attempts,
coalesced watch events, the session-expiry zombie window, the auto-committer,
shutdown and crash, ZooKeeper errors, the no-broker case, and a seeded sweep
of random membership timelines that must end with every partition owned
exactly once, as range assigns it over the live members.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial

import pytest

from emulator.events import EventKind as K
from emulator.legacy.assignors import AssignmentStrategy, assign_all
from emulator.legacy.config import LegacyConsumerConfig
from emulator.legacy.consumer import ConsumerState
from emulator.legacy.messages import (
    ClaimOwnership,
    CommitOffsets,
    FetchOffsets,
    ReadAssignmentContext,
    ReadCluster,
    ReadRebalanceContext,
    RegisterConsumer,
    ReleaseOwnership,
    Request,
    TopicPartition,
)
from tests.unit.fakezk import Trace, World

DEFAULTS = LegacyConsumerConfig()


# --------------------------------------------------------------------------- helpers


def whats(trace: list[Trace]) -> list[str]:
    return [e.what for e in trace]


def first(world: World, member: str, what: str | K, after: int = 0) -> int:
    """Index of the first trace line of ``member`` named ``what``, from line ``after`` on."""
    name = what.value if isinstance(what, K) else what
    for i in range(after, len(world.trace)):
        e = world.trace[i]
        if e.member == member and e.what == name:
            return i
    raise AssertionError(f"no {name} of {member} after trace line {after}")


def since(world: World, mark: int, member: str, what: str | K) -> list[Trace]:
    """Lines of ``member`` named ``what`` from trace line ``mark`` on."""
    name = what.value if isinstance(what, K) else what
    return [e for e in world.trace[mark:] if e.member == member and e.what == name]


def range_expected(world: World) -> dict[TopicPartition, str]:
    """Range (A6) over the live members as ZooKeeper lists them, as owner-node data."""
    whole = assign_all(AssignmentStrategy.RANGE, world.zk.members(), world.zk.partitions())
    return {tp: str(thread) for tp, thread in whole.items()}


def subscribed_partitions(world: World) -> set[TopicPartition]:
    topics = {t for sub in world.zk.members().values() for t in sub}
    return {(t, p) for t, ps in world.zk.partitions().items() if t in topics for p in ps}


def assert_converged(world: World) -> None:
    """Every subscribed partition has exactly one owner node, as range over live members says."""
    owners = world.zk.owner_nodes()
    assert {tp: n.data for tp, n in owners.items()} == range_expected(world)
    assert set(owners) == subscribed_partitions(world)
    by_id = {m.consumer.consumer_id: m for m in world.members.values()}
    for tp, node in owners.items():
        assert world.zk.alive(node.session), f"{tp} owned by a dead session"
        holder = by_id[node.data.rsplit("-", 1)[0]]
        assert node.session == holder.session, f"{tp} created by another session of its thread"
    for m in world.live():
        prefix = m.consumer.consumer_id + "-"
        mine = {tp: t for tp, t in world.zk.owners().items() if t.startswith(prefix)}
        assert m.consumer.owned == mine, m.name
        assert {tp: th for tp, (th, _) in m.fetching.items()} == mine, m.name
        assert m.consumer.state is ConsumerState.STABLE, m.name


def a7_reads(brokers: int, topics: int, consumers: int, assigned: int, conflicts: int = 0) -> int:
    """A7 reads of one attempt.

    getCluster; own topic count + getAllBrokersInCluster; AssignmentContext
    (own topic count, topics, ids children + each, ids children again); one
    offset read per assigned partition; one read-back per NodeExists.
    """
    cluster = 1 + brokers
    context = 1 + 1 + brokers
    assignment = 1 + topics + 1 + consumers + 1
    return cluster + context + assignment + assigned + conflicts


def slow(member: str, ms: float, other: float = 1.0) -> Callable[[str, Request], float]:
    """A latency function: ``ms`` for ``member``'s requests, ``other`` for the rest."""
    return lambda m, r: ms if m == member else other


# --------------------------------------------------------------------------- single consumer


def test_single_consumer_registers_rebalances_and_owns_everything_in_a5_order() -> None:
    w = World(topics={"t": 4})
    w.join("c0")
    w.settle()
    c0 = w.members["c0"]
    all4 = {("t", p): "g_c0-0" for p in range(4)}
    assert w.zk.owners() == all4
    assert c0.consumer.owned == all4
    assert c0.fetching == {tp: ("g_c0-0", None) for tp in all4}
    assert c0.consumer.state is ConsumerState.STABLE
    assert whats(w.events("c0")) == [
        "world:start",
        K.CONSUMER_STARTED,
        "RegisterConsumer", "done:RegisterConsumer",
        K.CONSUMER_REGISTERED,
        K.REBALANCE_STARTED,
        K.ATTEMPT_STARTED,
        "ReadCluster", "done:ReadCluster",
        "ReadRebalanceContext", "done:ReadRebalanceContext",
        # nothing owned and nothing fetching yet: no stop, commit or release
        "ReadAssignmentContext", "done:ReadAssignmentContext",
        K.ASSIGNMENT_COMPUTED,
        "FetchOffsets", "done:FetchOffsets",
        "ClaimOwnership", "done:ClaimOwnership",
        *[K.OWNERSHIP_CLAIMED] * 4,
        *[K.FETCHING_STARTED] * 4,
        "StartFetchers",
        K.ATTEMPT_FINISHED,
        K.REBALANCE_COMPLETED,
    ]
    fin = w.events("c0", K.ATTEMPT_FINISHED)[0].fields
    assert (fin["zk_reads"], fin["zk_writes"]) == (a7_reads(1, 1, 1, 4), 4)

    # Consume, then grow the topic: the data watch on /brokers/topics/t fires.
    w.consume("c0", ("t", 0), 10)
    w.consume("c0", ("t", 1), 20)
    mark = len(w.trace)
    w.set_partitions("t", 6)
    w.settle()
    assert w.events("c0", K.REBALANCE_TRIGGERED)[-1].fields["reason"] == "topic:t"
    order = [
        K.REBALANCE_STARTED,
        "ReadCluster",
        "ReadRebalanceContext",
        "StopFetchers",  # (b) stop fetchers ...
        "CommitOffsets",  # ... and commit before release
        "done:CommitOffsets",
        K.OFFSETS_COMMITTED,
        "ReleaseOwnership",  # (c)
        "done:ReleaseOwnership",
        K.OWNERSHIP_RELEASED,
        "ReadAssignmentContext",  # (d) after the release
        K.ASSIGNMENT_COMPUTED,
        "FetchOffsets",  # (e)
        "done:FetchOffsets",
        "ClaimOwnership",  # (f) after the offsets
        K.OWNERSHIP_CLAIMED,
        "StartFetchers",  # (g)
        K.REBALANCE_COMPLETED,
    ]
    at = mark
    for what in order:
        at = first(w, "c0", what, at) + 1
    commit = w.events("c0", "CommitOffsets")[-1].request
    assert isinstance(commit, CommitOffsets)
    assert dict(commit.offsets) == {("t", 0): 10, ("t", 1): 20}
    release = w.events("c0", "ReleaseOwnership")[-1].request
    assert isinstance(release, ReleaseOwnership)
    assert release.partitions == tuple(("t", p) for p in range(4)) and not release.rollback
    assert w.zk.owners() == {("t", p): "g_c0-0" for p in range(6)}
    assert c0.fetching[("t", 0)] == ("g_c0-0", 10)
    assert c0.fetching[("t", 1)] == ("g_c0-0", 20)
    assert c0.fetching[("t", 5)] == ("g_c0-0", None)
    fin = w.events("c0", K.ATTEMPT_FINISHED)[-1].fields
    # reads: 6 offset reads; writes: 2 changed offsets + 4 deletes + 6 creates
    assert (fin["zk_reads"], fin["zk_writes"]) == (a7_reads(1, 1, 1, 6), 2 + 4 + 6)


# --------------------------------------------------------------------------- three consumers


def test_three_consumers_end_with_the_range_assignment() -> None:
    # Ids chosen so that string order differs from numeric order (A2: "...-10" < "...-2").
    w = World(topics={"t1": 7, "t2": 3}, brokers=(1, 2))
    w.add("a", {"t1": 2, "t2": 1}, consumer_id="g_host-10")
    w.add("b", {"t1": 1}, consumer_id="g_host-2")
    w.add("c", {"t1": 1, "t2": 2}, consumer_id="g_host-9")
    w.start("a")
    w.at(5, lambda: w.start("b"))
    w.at(10, lambda: w.start("c"))
    w.settle()
    # By hand (A6): t1 threads host-10-0, host-10-1, host-2-0, host-9-0; 7 = 4*1 + 3.
    # t2 threads host-10-0, host-9-0, host-9-1; 3 = 3*1.
    expected = {
        ("t1", 0): "g_host-10-0", ("t1", 1): "g_host-10-0",
        ("t1", 2): "g_host-10-1", ("t1", 3): "g_host-10-1",
        ("t1", 4): "g_host-2-0", ("t1", 5): "g_host-2-0",
        ("t1", 6): "g_host-9-0",
        ("t2", 0): "g_host-10-0", ("t2", 1): "g_host-9-0", ("t2", 2): "g_host-9-1",
    }
    assert w.zk.owners() == expected
    assert_converged(w)
    assert w.overlaps == []
    # A7 read count of every successful last attempt, from each one's own view.
    for m in w.members.values():
        fin = w.events(m.name, K.ATTEMPT_FINISHED)[-1].fields
        assert fin["reason"] == "ok"
        topics = len(m.consumer.subscription)
        assert fin["zk_reads"] == a7_reads(2, topics, 3, len(m.consumer.owned))


def test_roundrobin_strategy_ends_with_the_roundrobin_assignment() -> None:
    cfg = LegacyConsumerConfig(partition_assignment_strategy="roundrobin")
    w = World(topics={"t1": 5, "t2": 4}, config=cfg)
    for i, name in enumerate(("a", "b", "c")):
        w.at(i * 3, partial(w.start, name))
        w.add(name, {"t1": 2, "t2": 2})
    w.settle()
    whole = assign_all(AssignmentStrategy.ROUNDROBIN, w.zk.members(), w.zk.partitions())
    assert w.zk.owners() == {tp: str(th) for tp, th in whole.items()}
    assert len(w.zk.owners()) == 9
    for m in w.members.values():
        assert m.consumer.state is ConsumerState.STABLE


# --------------------------------------------------------------------------- commits


def test_commit_before_release_hands_the_offsets_to_the_next_owner() -> None:
    w = World(topics={"t": 4})
    w.join("c0")
    w.settle()
    for p, off in enumerate((10, 20, 30, 40)):
        w.consume("c0", ("t", p), off)
    w.join("c1")
    w.settle()
    assert w.zk.owners() == {
        ("t", 0): "g_c0-0", ("t", 1): "g_c0-0", ("t", 2): "g_c1-0", ("t", 3): "g_c1-0",
    }
    assert w.zk.offsets() == {("t", 0): 10, ("t", 1): 20, ("t", 2): 30, ("t", 3): 40}
    # The new owner starts where the old one stopped.
    assert w.members["c1"].fetching == {("t", 2): ("g_c1-0", 30), ("t", 3): ("g_c1-0", 40)}
    assert w.members["c0"].fetching == {("t", 0): ("g_c0-0", 10), ("t", 1): ("g_c0-0", 20)}
    # c0's commit reached ZooKeeper before its release and before c1 read the
    # offsets; c1's claim landed after the release.
    committed = first(w, "c0", "done:CommitOffsets")
    released = first(w, "c0", "done:ReleaseOwnership")
    fetched = first(w, "c1", "done:FetchOffsets")
    claimed = first(w, "c1", "done:ClaimOwnership")
    assert committed < released < claimed
    assert committed < fetched < claimed
    assert [e.fields["reason"] for e in w.events("c1", K.ATTEMPT_FINISHED)] == ["ok"]
    assert w.overlaps == []


def test_auto_commit_runs_at_a_fixed_period_and_writes_only_changed_offsets() -> None:
    w = World(topics={"t": 2})
    w.run_until(123)
    w.join("c0")
    w.settle()
    w.run_until(1_000)
    w.consume("c0", ("t", 0), 5)
    w.run_until(130_000)
    w.consume("c0", ("t", 0), 5)  # unchanged: not written again
    w.consume("c0", ("t", 1), 7)
    w.run_until(250_000)
    commits = [(e.t, dict(e.request.offsets)) for e in w.events("c0", "CommitOffsets")
               if isinstance(e.request, CommitOffsets)]
    # Due at 60123, 120123, 180123, 240123; 120123 and 240123 have nothing new.
    assert commits == [(60_123, {("t", 0): 5}), (180_123, {("t", 1): 7})]
    assert {e.fields["reason"] for e in w.events("c0", K.OFFSETS_COMMITTED)} == {"auto"}
    assert w.zk.offsets() == {("t", 0): 5, ("t", 1): 7}
    assert w.members["c0"].ops["CommitOffsets.writes"] == 2


def test_an_auto_commit_in_flight_never_lands_after_the_rebalance_commit() -> None:
    """One session's operations apply in order, so offsets never move backwards."""
    w = World(topics={"t": 1}, latency=lambda m, r: 300 if isinstance(r, CommitOffsets) else 1)
    w.join("c0")
    w.settle()
    w.consume("c0", ("t", 0), 10)
    w.run_until(DEFAULTS.auto_commit_interval_ms + 1)  # auto-commit of 10 in flight
    w.consume("c0", ("t", 0), 12)
    w.fire("c0")  # its rebalance commits 12 before releasing
    w.settle()
    done = [e.request.offsets[("t", 0)] for e in w.events("c0", "done:CommitOffsets")
            if isinstance(e.request, CommitOffsets)]
    assert done == [10, 12]
    assert w.zk.offsets() == {("t", 0): 12}
    assert w.members["c0"].fetching == {("t", 0): ("g_c0-0", 12)}


# --------------------------------------------------------------------------- conflicts


def test_conflict_rolls_back_every_claim_backs_off_and_retries() -> None:
    w = World(topics={"t1": 2, "t2": 2}, latency=slow("c0", 500))
    w.join("c0", {"t1": 1})
    w.settle()
    t0 = w.now
    w.join("c1", {"t1": 1, "t2": 1})
    # c1 is fast: it claims t1:1 (still c0's, released ~1.5 s later) and both t2 partitions.
    w.run_until(t0 + 1_000)
    c1 = "c1"
    conflict = w.events(c1, K.CLAIM_CONFLICT)
    assert [(e.fields["topic"], e.fields["partition"], e.fields["detail"]) for e in conflict] == [
        ("t1", 1, "g_c0-0")
    ]
    claimed = {
        (e.fields["topic"], e.fields["partition"]) for e in w.events(c1, K.OWNERSHIP_CLAIMED)
    }
    assert claimed == {("t2", 0), ("t2", 1)}
    rollback = w.events(c1, "ReleaseOwnership")
    assert len(rollback) == 1
    req = rollback[0].request
    assert isinstance(req, ReleaseOwnership)
    assert req.rollback and set(req.partitions) == {("t2", 0), ("t2", 1)}
    assert {e.fields["reason"] for e in w.events(c1, K.OWNERSHIP_RELEASED)} == {"rollback"}
    # Roll-back is complete: c1 holds nothing while it sleeps.
    assert w.zk.owners() == {("t1", 0): "g_c0-0", ("t1", 1): "g_c0-0"}
    assert w.members[c1].consumer.state is ConsumerState.BACKOFF
    assert w.members[c1].consumer.owned == {}
    # A7: 3 creates, one read-back for the NodeExists.
    claim = w.events(c1, "done:ClaimOwnership")[0].result
    assert claim is not None and (claim.reads, claim.writes) == (1, 3)
    w.settle()
    fin = [e.fields["reason"] for e in w.events(c1, K.ATTEMPT_FINISHED)]
    assert fin[:2] == ["conflict", "ok"]
    backoff = w.events(c1, K.REBALANCE_BACKOFF)[0]
    assert backoff.fields["duration_ms"] == DEFAULTS.rebalance_backoff_ms
    retry = next(e for e in w.events(c1, K.ATTEMPT_STARTED) if e.fields["attempt"] == 1)
    assert retry.t == backoff.t + 2_000
    assert_converged(w)
    assert w.overlaps == []


def test_two_consumers_blocked_by_the_same_owner_retry_in_lock_step() -> None:
    w = World(topics={"t": 8}, latency=slow("c0", 500))
    w.join("c0")
    w.settle()
    t0 = w.now
    w.join("c1")
    w.join("c2")
    w.settle()
    starts = {
        n: [e.t for e in w.events(n, K.ATTEMPT_STARTED)] for n in ("c1", "c2")
    }
    backoffs = {n: [e.t for e in w.events(n, K.REBALANCE_BACKOFF)] for n in ("c1", "c2")}
    # Same trigger, same latency, same fixed back-off: identical attempt times.
    assert starts["c1"][:2] == starts["c2"][:2]
    assert starts["c1"][0] == t0 + 1
    assert backoffs["c1"][0] == backoffs["c2"][0]
    assert starts["c1"][1] == backoffs["c1"][0] + DEFAULTS.rebalance_backoff_ms
    for n in ("c1", "c2"):
        assert w.events(n, K.ATTEMPT_FINISHED)[0].fields["reason"] == "conflict"
    assert_converged(w)


@pytest.mark.parametrize(
    ("retries", "backoff"), [(DEFAULTS.rebalance_max_retries, 2_000), (2, 500)]
)
def test_gives_up_after_max_retries_owning_nothing_and_recovers_at_next_watch(
    retries: int, backoff: int
) -> None:
    cfg = LegacyConsumerConfig(rebalance_max_retries=retries, rebalance_backoff_ms=backoff)
    w = World(topics={"t": 2}, config=cfg)
    intruder = w.intrude_owner(("t", 1))  # a half-claimed node that never goes (kafka-node#981)
    w.join("c0")
    w.settle()
    c0 = w.members["c0"]
    attempts = w.events("c0", K.ATTEMPT_STARTED)
    backoffs = w.events("c0", K.REBALANCE_BACKOFF)
    failed = w.events("c0", K.REBALANCE_FAILED)
    assert [e.fields["attempt"] for e in attempts] == list(range(retries))
    assert len(backoffs) == retries  # a sleep after every failed attempt, the last one too
    for a, b in zip(attempts[1:], backoffs, strict=False):
        assert a.t == b.t + backoff
    assert len(failed) == 1 and failed[0].t == backoffs[-1].t + backoff
    assert failed[0].fields["reason"] == f"g_c0 can't rebalance after {retries} retries"
    finished = w.events("c0", K.ATTEMPT_FINISHED)
    assert [e.fields["reason"] for e in finished] == ["conflict"] * retries
    # Every attempt claimed t:0 and rolled it back.
    assert len(w.events("c0", K.OWNERSHIP_CLAIMED)) == retries
    assert len([e for e in w.events("c0", K.OWNERSHIP_RELEASED)
                if e.fields["reason"] == "rollback"]) == retries
    assert c0.consumer.state is ConsumerState.GAVE_UP
    assert c0.consumer.owned == {} and c0.fetching == {}
    assert w.zk.owners() == {("t", 1): "intruder-0"}
    # The blocker goes away, but owner nodes are not watched: c0 stays stranded.
    w.zk.end_session(intruder)
    w.run_for(60_000)
    assert len(w.events("c0", K.ATTEMPT_STARTED)) == retries
    assert w.zk.owners() == {}
    # The next group event brings it back.
    w.join("c1")
    w.settle()
    assert_converged(w)  # c0 included: STABLE and owning its share


# --------------------------------------------------------------------------- triggers


def test_watch_events_during_a_rebalance_coalesce_into_one_more() -> None:
    w = World(topics={"t": 4}, latency=100)
    w.join("c0")
    w.settle()
    c0 = w.members["c0"]
    before = c0.consumer.stats.rebalances
    t0, mark = w.now, len(w.trace)
    w.fire("c0", "ids")
    for dt, src in ((50, "ids"), (60, "topic:t"), (70, "ids"), (250, "ids")):
        w.at(t0 + dt, partial(w.fire, "c0", src))
    w.settle()
    started = since(w, mark, "c0", K.REBALANCE_STARTED)
    assert len(started) == 2
    assert c0.consumer.stats.rebalances == before + 2
    assert started[1].fields["reason"] == "ids,topic:t"
    assert len(since(w, mark, "c0", K.REBALANCE_TRIGGERED)) == 5
    # The second one starts when the first one ends (6 requests of 100 ms).
    done = since(w, mark, "c0", K.REBALANCE_COMPLETED)
    assert started[1].t == done[0].t == t0 + 600
    # Events during the second one give a third, and no more.
    t1, mark = w.now, len(w.trace)
    w.fire("c0", "ids")
    w.at(t1 + 150, lambda: w.fire("c0", "ids"))
    w.at(t1 + 160, lambda: w.fire("c0", "ids"))
    w.settle()
    assert len(since(w, mark, "c0", K.REBALANCE_STARTED)) == 2


def test_no_brokers_watches_brokers_and_succeeds_owning_nothing() -> None:
    w = World(topics={"t": 3}, brokers=())
    w.join("c0")
    w.settle()
    c0 = w.members["c0"]
    assert len(w.events("c0", "WatchBrokers")) == 1
    assert "StartFetchers" not in whats(w.events("c0"))
    done = w.events("c0", K.REBALANCE_COMPLETED)
    assert len(done) == 1 and done[0].fields["count"] == 0
    assert c0.consumer.state is ConsumerState.STABLE
    assert w.zk.owners() == {} and c0.consumer.owned == {}
    w.add_broker(7)
    w.settle()
    assert w.events("c0", K.REBALANCE_TRIGGERED)[-1].fields["reason"] == "brokers"
    assert_converged(w)


# --------------------------------------------------------------------------- sessions


def test_session_expiry_zombie_window_then_new_session_rebalance() -> None:
    w = World(topics={"t": 4})
    w.join("c0")
    w.join("c1")
    w.settle()
    c0, c1 = w.members["c0"], w.members["c1"]
    w.consume("c0", ("t", 0), 10)
    w.fire("c0")  # a rebalance commits 10 before releasing
    w.settle()
    assert w.zk.offsets() == {("t", 0): 10}
    zombie_parts = dict(c0.consumer.owned)
    assert set(zombie_parts) == {("t", 0), ("t", 1)}

    t_exp = w.now
    w.expire("c0")
    assert set(w.zk.members()) == {"g_c1"}
    assert all(v == "g_c1-0" for v in w.zk.owners().values())
    w.run_for(2_000)
    # c1 took everything; c0 does not know and keeps fetching: double fetching.
    assert w.zk.owners() == {("t", p): "g_c1-0" for p in range(4)}
    assert c1.fetching[("t", 0)] == ("g_c1-0", 10)
    assert c0.consumer.owned == zombie_parts
    assert set(c0.fetching) == set(zombie_parts)
    assert {(tp, names) for _, tp, names in w.overlaps} == {
        (("t", 0), ("c0", "c1")), (("t", 1), ("c0", "c1")),
    }
    assert all(t >= t_exp for t, _, _ in w.overlaps)
    w.consume("c0", ("t", 0), 50)  # the zombie's progress, never committed

    w.reconnect("c0")
    # handleNewSession: the registry is cleared, the fetchers are not stopped.
    assert c0.consumer.owned == {}
    assert set(c0.fetching) == set(zombie_parts)
    w.settle()
    regs = w.events("c0", K.CONSUMER_REGISTERED)
    assert [e.fields["reason"] for e in regs] == ["start", "new_session"]
    assert_converged(w)
    assert w.zk.offsets() == {("t", 0): 10}
    # c0 gets t:0 back and restarts from the committed 10, not its zombie 50.
    assert c0.fetching[("t", 0)] == ("g_c0-0", 10)
    last_overlap = max(t for t, _, _ in w.overlaps)
    assert last_overlap < w.events("c0", "StopFetchers")[-1].t + 1


def test_session_expiry_during_a_rebalance_reregisters_at_once() -> None:
    """handleNewSession registers outside rebalanceLock: the in-flight rebalance recovers.

    Kafka calls ``registerConsumerInZK`` from the zkclient event thread without
    the lock; only the following ``syncedRebalance`` waits for it. Queuing the
    registration behind the lock would make the in-flight ``syncedRebalance``
    fail every remaining attempt on its missing ids znode and give up.
    """
    w = World(topics={"t": 4}, latency=slow("c0", 300))
    w.join("c0")
    w.join("c1")
    w.settle()
    c0 = w.members["c0"]
    mark = len(w.trace)
    w.fire("c0")
    w.run_for(450)  # attempt 0: ReadCluster done, ReadRebalanceContext in flight
    assert c0.consumer.state is ConsumerState.REBALANCING
    w.expire("c0")
    w.run_for(1_000)
    t_new = w.now
    w.reconnect("c0")
    register = since(w, mark, "c0", "RegisterConsumer")
    assert [e.t for e in register] == [t_new]  # at once, while the old rebalance runs
    assert c0.consumer.state is ConsumerState.REBALANCING
    w.settle()
    assert since(w, mark, "c0", K.REBALANCE_FAILED) == []
    fin = [e.fields["reason"] for e in since(w, mark, "c0", K.ATTEMPT_FINISHED)]
    # The parked read ran on the new session before the registration landed.
    assert fin[0] == "error:NoNodeException" and fin[1] == "ok"
    reasons = [e.fields["reason"] for e in since(w, mark, "c0", K.REBALANCE_STARTED)]
    assert reasons[:2] == ["ids", "new_session"]
    assert_converged(w)


def test_failed_rollback_leaves_the_nodes_and_the_retry_reclaims_them() -> None:
    w = World(topics={"t1": 2, "t2": 2}, latency=slow("c0", 500))
    w.join("c0", {"t1": 1})
    w.settle()
    mark = len(w.trace)
    w.fail(ReleaseOwnership, member="c1")  # c1 owns nothing: its first release is the rollback
    w.join("c1", {"t1": 1, "t2": 1})
    w.run_for(1_000)
    fin = since(w, mark, "c1", K.ATTEMPT_FINISHED)
    assert [e.fields["reason"] for e in fin] == ["error:ConnectionLossException"]
    assert since(w, mark, "c1", K.OWNERSHIP_RELEASED) == []
    owners = w.zk.owners()
    assert owners[("t2", 0)] == owners[("t2", 1)] == "g_c1-0"  # still c1's
    w.settle()
    # createEphemeralPathExpectConflict: NodeExists with our own data is a success.
    retry = since(w, mark, "c1", "done:ClaimOwnership")[1].result
    assert retry is not None and retry.reads == 2 and retry.error is None
    assert [e.fields["reason"] for e in since(w, mark, "c1", K.ATTEMPT_FINISHED)][1] == "ok"
    assert_converged(w)


def test_graceful_shutdown_stops_commits_and_closes_then_peer_takes_over() -> None:
    w = World(topics={"t": 4})
    w.join("c0")
    w.join("c1")
    w.settle()
    w.consume("c0", ("t", 0), 10)
    w.consume("c0", ("t", 1), 11)
    mark = len(w.trace)
    w.shutdown("c0")
    w.settle()
    at = mark
    for what in ("StopFetchers", "CommitOffsets", "done:CommitOffsets", "CloseSession",
                 "done:CloseSession"):
        at = first(w, "c0", what, at) + 1
    assert w.members["c0"].consumer.state is ConsumerState.CLOSED
    assert len(w.events("c0", K.CONSUMER_STOPPED)) == 1
    assert set(w.zk.members()) == {"g_c1"}
    assert w.members["c1"].fetching == {
        ("t", 0): ("g_c1-0", 10), ("t", 1): ("g_c1-0", 11),
        ("t", 2): ("g_c1-0", None), ("t", 3): ("g_c1-0", None),
    }
    assert_converged(w)
    assert w.overlaps == []


def test_crashed_consumer_loses_its_partitions_after_the_session_timeout() -> None:
    w = World(topics={"t": 6})
    for n in ("c0", "c1", "c2"):
        w.join(n)
    w.settle()
    c2_parts = {tp for tp, t in w.zk.owners().items() if t == "g_c2-0"}
    assert c2_parts == {("t", 4), ("t", 5)}
    t_crash = w.now
    w.crash("c2")
    w.run_until(t_crash + DEFAULTS.zookeeper_session_timeout_ms - 1)
    assert {tp for tp, t in w.zk.owners().items() if t == "g_c2-0"} == c2_parts
    assert w.events("c0", K.REBALANCE_STARTED)[-1].t < t_crash
    w.settle()
    assert set(w.zk.members()) == {"g_c0", "g_c1"}
    assert_converged(w)
    takeover = [e.t for n in ("c0", "c1") for e in w.events(n, K.OWNERSHIP_CLAIMED)
                if (e.fields["topic"], e.fields["partition"]) in c2_parts]
    assert takeover and min(takeover) >= t_crash + DEFAULTS.zookeeper_session_timeout_ms


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "request_type",
    [ReadCluster, ReadRebalanceContext, ReleaseOwnership, ReadAssignmentContext, FetchOffsets,
     ClaimOwnership],
)
def test_zookeeper_error_fails_the_attempt_and_it_is_retried(request_type: type[Request]) -> None:
    w = World(topics={"t": 4})
    w.join("c0")
    w.join("c1")
    w.settle()
    w.consume("c0", ("t", 0), 7)
    mark = len(w.trace)
    w.fail(request_type, "ConnectionLossException", member="c0")
    w.fire("c0")
    w.run_for(1_000)
    # The failed attempt stopped the fetchers and committed (closeFetchersForQueues),
    # whether or not it got as far as step (b).
    c0 = w.members["c0"]
    assert c0.consumer.state is ConsumerState.BACKOFF
    assert c0.fetching == {}
    assert w.zk.offsets() == {("t", 0): 7}
    early = request_type in (ReadCluster, ReadRebalanceContext)
    commits = [e.fields["reason"] for e in since(w, mark, "c0", K.OFFSETS_COMMITTED)]
    assert commits == (["after_failed_attempt"] if early else ["rebalance"])
    w.settle()
    fin = since(w, mark, "c0", K.ATTEMPT_FINISHED)
    assert [e.fields["reason"] for e in fin] == ["error:ConnectionLossException", "ok"]
    backoff = since(w, mark, "c0", K.REBALANCE_BACKOFF)
    retry = since(w, mark, "c0", K.ATTEMPT_STARTED)[1]
    assert retry.t == backoff[0].t + DEFAULTS.rebalance_backoff_ms
    assert_converged(w)
    assert c0.fetching[("t", 0)] == ("g_c0-0", 7)


def test_register_error_leaves_the_consumer_unregistered() -> None:
    w = World(topics={"t": 2})
    w.fail(RegisterConsumer, "ConnectionLossException", member="c0")
    w.join("c0")
    w.settle()
    c0 = w.members["c0"]
    assert c0.consumer.state is ConsumerState.GAVE_UP
    failed = w.events("c0", K.REBALANCE_FAILED)
    assert [e.fields["reason"] for e in failed] == ["register:ConnectionLossException"]
    assert w.zk.members() == {} and w.zk.owners() == {}


# --------------------------------------------------------------------------- sweep


def _sweep(seed: int, n: int) -> tuple[World, bool, bool]:
    """Random joins, leaves, crashes and expiries; returns (world, used expiry, kicked)."""
    rng = random.Random(seed)
    topics = {f"t{i}": rng.randint(1, 24) for i in range(rng.randint(1, 3))}
    w = World(
        topics=topics,
        brokers=range(1, rng.randint(1, 3) + 1),
        latency=lambda m, r: round(w.rng.uniform(1, 80), 1),
        watch_latency=rng.choice([0.0, 5.0, 40.0]),
        seed=seed,
    )
    names = [f"c{i}" for i in range(n)]
    for name in names:
        chosen = rng.sample(sorted(topics), rng.randint(1, len(topics)))
        sub = {t: rng.randint(1, 3) for t in chosen}
        w.add(name, sub, consumer_id=f"g_h{rng.randint(1, 30)}-{name}")
    started: set[str] = set()
    gone: set[str] = set()
    used_expiry = False

    def start(name: str) -> None:
        if name not in started:
            started.add(name)
            w.start(name)

    def act(kind: str, name: str) -> None:
        if name not in started or name in gone:
            return
        if kind == "leave":
            gone.add(name)
            w.shutdown(name)
        elif kind == "crash":
            gone.add(name)
            w.crash(name)
        elif kind == "expire" and w.members[name].session is not None:
            w.expire(name, reconnect_after=rng.uniform(50, 9_000))

    first_wave = rng.randint(1, n)
    for name in names[:first_wave]:
        w.at(rng.uniform(0, 2_000), partial(start, name))
    for name in names[first_wave:]:
        w.at(rng.uniform(0, 15_000), partial(start, name))
    for _ in range(rng.randint(0, max(1, n // 2))):
        kind = rng.choice(["leave", "crash", "expire", "expire"])
        used_expiry |= kind == "expire"
        victim = rng.choice(names)
        w.at(rng.uniform(500, 15_000), partial(act, kind, victim))
    if rng.random() < 0.3:
        topic = rng.choice(sorted(topics))
        w.at(rng.uniform(0, 15_000), lambda: w.set_partitions(topic, topics[topic] + 3))
    w.run_until(16_000)
    w.settle()
    # A consumer whose last syncedRebalance gave up stays stranded until the
    # next event (A7); one more join is that event.
    kicked = any(m.consumer.state is ConsumerState.GAVE_UP for m in w.live())
    if kicked:
        for m in w.live():
            if m.consumer.state is ConsumerState.GAVE_UP:
                # Fetchers stopped after the failed attempts; registry and ZooKeeper agree.
                assert m.fetching == {}
                prefix = m.consumer.consumer_id + "-"
                mine = {tp: t for tp, t in w.zk.owners().items() if t.startswith(prefix)}
                assert m.consumer.owned == mine
        w.join("kick", {t: 1 for t in topics})
        w.settle()
    return w, used_expiry, kicked


SWEEP = [(seed, 2 + seed % 11) for seed in range(60)]


@pytest.mark.parametrize(("seed", "n"), SWEEP)
def test_random_timelines_converge_to_range_over_the_live_members(seed: int, n: int) -> None:
    w, used_expiry, _ = _sweep(seed, n)
    assert_converged(w)
    dead = w.zk.dead_sessions
    assert not any(node.session in dead for node in w.zk.nodes.values())
    members = {m.consumer.consumer_id for m in w.live()}
    assert set(w.zk.members()) == members
    # Without a session expiry, no partition was ever fetched by two consumers.
    if not used_expiry:
        assert w.overlaps == []


def test_sweep_is_deterministic() -> None:
    a, _, _ = _sweep(7, 9)
    b, _, _ = _sweep(7, 9)
    assert [(e.t, e.member, e.what) for e in a.trace] == [(e.t, e.member, e.what) for e in b.trace]
