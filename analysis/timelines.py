"""Group and member timelines in Spark: when members were live, idle or rebalancing.

The group timeline (members live, idle, mid-rebalance; the coordinator's
state), the partitions a group is expected to own and the spans they had no
owner, the group's settle points and each member's latest completed
assignment: what the stranded-partition and assignment checkers and the
metrics read.

A member told to stop (a timeline ``leave`` or ``restart``, or the run's end)
is *closing* until it stops: a clean close first gives its partitions up
(``onPartitionsRevoked``, ``ConsumerCoordinator.onLeavePrepare``), then
leaves the group (``LeaveGroup``) and stops. Between the release and the
stop it owns nothing while the coordinator does not yet know it is leaving:
it is on its way out, not an idle member waiting for work, so it is not
counted as idle. Its released partitions are unowned all the same
(:func:`unowned_spans`).

A member whose latest ``rebalance_completed`` lists partitions it did not
own at that instant (:func:`claims_due`) is *claiming* until it claims (its
owned count rises), or it stops, crashes, starts again, completes another
rebalance or begins one (``rebalance_triggered`` / ``rebalance_started`` /
``rebalance_failed``), whichever comes first. The classic members write
``rebalance_completed`` where the Java client completes the rebalance (the
SyncGroup response: ``MemberState.STABLE``, the rebalance-latency sensor),
before ``ConsumerCoordinator.onJoinComplete`` runs the
``onPartitionsAssigned`` callback and the claims: on a real engine the last
member to finish owns nothing for tens of microseconds in a group that is
otherwise settled. (The simulator writes all of it in one instant; the
ZooKeeper and KIP-848 members write their claims first, so nothing is due
after their completion.) It has its work; it is not an idle member waiting
for some, so it is not counted as idle. This is an analysis definition, not
protocol behaviour, and it has a cost: a member that never claims what it
was given is not idle until its next rebalance or its stop, so no
``stranded_partition`` is reported beside it, while those partitions stay
unowned (:func:`unowned_spans`) and count as unavailable.
"""

from __future__ import annotations

from typing import Final

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from analysis.frames import (
    GTP,
    TP,
    explode_partitions,
    islands,
    optional_col,
    run_bounds,
    union_frames,
)
from emulator.events import EventKind as K

# The coordinator's group states in which it is not rebalancing.
SETTLED_STATES: Final = ("Stable", "Empty", "Dead")

STOPPING_ACTIONS: Final = ("leave", "restart")
"""Timeline actions that stop a member cleanly: it releases its partitions, then stops."""


def stop_orders(events: DataFrame) -> DataFrame:
    """``(protocol, group, member, t)``: the instants a member was told to stop.

    A timeline action of :data:`STOPPING_ACTIONS` (the orchestrator's
    ``action_applied`` for its member, or each member its ``detail`` lists; a
    host's ``fault_injected`` of a restart, stamped on the member's own
    clock), not skipped; and the run's end (``run_finished``), after which the
    orchestrator stops every member of the run.
    """
    detail = optional_col(events, "detail", "string")
    listed = F.from_json(detail, "struct<members:array<string>>").getField("members")
    acts = events.where(
        F.col("kind").isin(K.ACTION_APPLIED.value, K.FAULT_INJECTED.value)
        & F.col("reason").isin(*STOPPING_ACTIONS)
        & (F.coalesce(optional_col(events, "state", "string"), F.lit("")) != "skipped")
        & F.col("group").isNotNull()
    ).select(
        "protocol",
        "group",
        F.explode(
            F.when(F.col("member").isNotNull(), F.array(F.col("member"))).otherwise(
                F.coalesce(listed, F.array().cast("array<string>"))
            )
        ).alias("member"),
        F.col("t_emu_ms").alias("t"),
    )
    members = (
        events.where(F.col("member").isNotNull() & F.col("group").isNotNull())
        .select("protocol", "group", "member")
        .distinct()
    )
    ends = (
        events.where(F.col("kind") == K.RUN_FINISHED.value)
        .groupBy("protocol")
        .agg(F.min("t_emu_ms").alias("t"))
        .join(members, "protocol")
        .select("protocol", "group", "member", "t")
    )
    return acts.transform(union_frames, ends)


_CLAIM_ENDS: Final = (
    K.CONSUMER_STARTED.value,
    K.CONSUMER_STOPPED.value,
    K.CONSUMER_CRASHED.value,
    K.REBALANCE_TRIGGERED.value,
    K.REBALANCE_STARTED.value,
    K.REBALANCE_FAILED.value,
)
"""A member's events after which it is no longer claiming what it was last given."""


def claims_due(events: DataFrame, intervals: DataFrame) -> DataFrame:
    """``(protocol, group, member, t, due)``: per member ``rebalance_completed``, how
    many of the partitions it lists the member did not own at that instant.

    Owned at ``t``: an ownership interval with ``s <= t < e``; a claim in the
    same instant as the completion (the simulator writes both at once) counts
    as owned, so nothing is due. A completion that lists nothing has ``due`` 0.
    """
    keys = ("protocol", "group", "member", "t")
    done = (
        events.where(
            (F.col("kind") == K.REBALANCE_COMPLETED.value)
            & F.col("member").isNotNull()
            & F.col("group").isNotNull()
        )
        .select(
            *keys[:3],
            F.col("t_emu_ms").alias("t"),
            optional_col(events, "partitions", "string").alias("partitions"),
        )
        .dropDuplicates(list(keys))
    )
    listed = explode_partitions(done).select(*keys, "topic", "partition")
    part_keys = ["protocol", "group", "member", "topic", "partition"]
    held = (
        listed.join(intervals.select(*part_keys, "s", "e"), part_keys)
        .where((F.col("s") <= F.col("t")) & (F.col("e") > F.col("t")))
        .select(*keys, "topic", "partition")
    )
    due = (
        listed.join(held, [*keys, "topic", "partition"], "left_anti")
        .groupBy(*keys)
        .agg(F.count(F.lit(1)).cast("int").alias("due"))
    )
    return (
        done.select(*keys)
        .join(due, list(keys), "left")
        .select(*keys, F.coalesce(F.col("due"), F.lit(0)).alias("due"))
    )


def _state_rows(
    df: DataFrame,
    *,
    order: Column,
    closing: Column | None = None,
    claim: Column | None = None,
    d_own: Column | None = None,
) -> DataFrame:
    """``df``'s ``(protocol, group, member, t)`` as member-timeline rows that set only
    the given state columns (the others null: unchanged) and ``d_own`` (default 0)."""
    unset = F.lit(None).cast("int")
    return df.select(
        "protocol",
        "group",
        "member",
        "t",
        unset.alias("alive_v"),
        unset.alias("reb_v"),
        (unset if closing is None else closing).alias("closing_v"),
        (unset if claim is None else claim).alias("claim_v"),
        (F.lit(0) if d_own is None else d_own).alias("d_own"),
        order.alias("ord"),
    )


def member_timeline(events: DataFrame, intervals: DataFrame) -> DataFrame:
    """Per member change points: ``protocol, group, member, t, ord, alive, reb, owned,
    closing, claiming, idle``.

    ``alive``: started and not stopped or crashed; ``reb``: mid-rebalance on its
    side (started and not yet through its first rebalance, or triggered / started
    and not yet completed or failed); ``owned``: partitions it holds;
    ``closing``: told to stop (:func:`stop_orders`) and not yet stopped, crashed
    or started again; ``claiming``: its latest ``rebalance_completed`` gave it
    partitions it did not own (:func:`claims_due`) and it has not claimed any
    since, nor stopped, crashed, started or begun another rebalance (see the
    module doc); ``idle``: alive, owning nothing, not closing and not claiming.
    Each row's values hold from ``t`` until the member's next row (``ord``
    orders the rows of one instant: a stop order first, the action before its
    effects).
    """
    life = (
        events.where(F.col("member").isNotNull() & F.col("group").isNotNull())
        .select(
            "protocol",
            "group",
            F.col("member"),
            F.col("t_emu_ms").alias("t"),
            F.when(F.col("kind") == K.CONSUMER_STARTED.value, 1)
            .when(F.col("kind").isin(K.CONSUMER_STOPPED.value, K.CONSUMER_CRASHED.value), 0)
            .alias("alive_v"),
            F.when(
                F.col("kind").isin(
                    K.CONSUMER_STARTED.value, K.REBALANCE_TRIGGERED.value, K.REBALANCE_STARTED.value
                ),
                1,
            )
            .when(
                F.col("kind").isin(
                    K.REBALANCE_COMPLETED.value,
                    K.REBALANCE_FAILED.value,
                    K.CONSUMER_STOPPED.value,
                    K.CONSUMER_CRASHED.value,
                ),
                0,
            )
            .alias("reb_v"),
            F.when(
                F.col("kind").isin(
                    K.CONSUMER_STARTED.value, K.CONSUMER_STOPPED.value, K.CONSUMER_CRASHED.value
                ),
                0,
            ).alias("closing_v"),
            F.when(F.col("kind").isin(*_CLAIM_ENDS), 0).alias("claim_v"),
            F.lit(0).alias("d_own"),
            F.when(F.col("kind") == K.CONSUMER_STARTED.value, 0).otherwise(2).alias("ord"),
        )
        .where(F.col("alive_v").isNotNull() | F.col("reb_v").isNotNull())
    )
    orders = _state_rows(stop_orders(events), closing=F.lit(1), order=F.lit(-1))
    # A completion's claims due, in its place among the member's events.
    due = _state_rows(claims_due(events, intervals), claim=F.col("due"), order=F.lit(2))
    life = life.transform(union_frames, orders).transform(union_frames, due)
    own = intervals.select(
        "protocol", "group", "member", F.col("s").alias("t"), F.lit(1).alias("d_own")
    ).transform(
        union_frames,
        intervals.select(
            "protocol", "group", "member", F.col("e").alias("t"), F.lit(-1).alias("d_own")
        ),
    )
    own = _state_rows(
        own,
        # A claim (the owned count rises) ends the claiming.
        claim=F.when(F.col("d_own") > 0, 0).cast("int"),
        d_own=F.col("d_own"),
        order=F.when(F.col("d_own") < 0, 1).otherwise(3),
    )
    pts = life.transform(union_frames, own)
    w = (
        Window.partitionBy("protocol", "group", "member")
        .orderBy("t", "ord")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    out = pts.select(
        "protocol",
        "group",
        "member",
        "t",
        "ord",
        F.coalesce(F.last("alive_v", ignorenulls=True).over(w), F.lit(0)).alias("alive"),
        F.coalesce(F.last("reb_v", ignorenulls=True).over(w), F.lit(0)).alias("reb"),
        F.sum("d_own").over(w).alias("owned"),
        F.coalesce(F.last("closing_v", ignorenulls=True).over(w), F.lit(0)).alias("closing"),
        (F.coalesce(F.last("claim_v", ignorenulls=True).over(w), F.lit(0)) > 0)
        .cast("int")
        .alias("claiming"),
    )
    idle = (
        (F.col("alive") == 1)
        & (F.col("owned") <= 0)
        & (F.col("closing") == 0)
        & (F.col("claiming") == 0)
    )
    return out.withColumn("idle", idle.cast("int"))


def group_timeline(
    events: DataFrame, intervals: DataFrame, bounds: DataFrame | None = None
) -> DataFrame:
    """Per group change points: ``protocol, group, t, t_next, live, idle, reb, coord_busy``.

    ``live``: live members; ``idle``: live members owning nothing, not closing,
    not claiming (:func:`member_timeline`); ``reb``: members mid-rebalance;
    ``coord_busy``: 1 while the coordinator's group state is not
    Stable/Empty/Dead. Values hold over ``[t, t_next)``.
    """
    mt = member_timeline(events, intervals)
    wm = Window.partitionBy("protocol", "group", "member").orderBy("t", "ord")
    idle = F.col("idle")
    live = F.col("alive").cast("int")
    mt = mt.select(
        "protocol",
        "group",
        "t",
        (live - F.coalesce(F.lag(live).over(wm), F.lit(0))).alias("d_live"),
        (idle - F.coalesce(F.lag(idle).over(wm), F.lit(0))).alias("d_idle"),
        (F.col("reb") - F.coalesce(F.lag("reb").over(wm), F.lit(0))).alias("d_reb"),
        F.lit(0).alias("d_busy"),
    )
    st = events.where(
        (F.col("kind") == K.GROUP_STATE_CHANGED.value) & F.col("group").isNotNull()
    ).select(
        "protocol",
        "group",
        F.col("t_emu_ms").alias("t"),
        F.when(F.col("state").isin(*SETTLED_STATES), 0).otherwise(1).alias("busy"),
    )
    wc = Window.partitionBy("protocol", "group").orderBy("t")
    st = st.select(
        "protocol",
        "group",
        "t",
        F.lit(0).alias("d_live"),
        F.lit(0).alias("d_idle"),
        F.lit(0).alias("d_reb"),
        (F.col("busy") - F.coalesce(F.lag("busy").over(wc), F.lit(0))).alias("d_busy"),
    )
    pts = (
        mt.transform(union_frames, st)
        .groupBy("protocol", "group", "t")
        .agg(*[F.sum(c).alias(c) for c in ("d_live", "d_idle", "d_reb", "d_busy")])
    )
    w = Window.partitionBy("protocol", "group").orderBy("t")
    run = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    bounds = bounds if bounds is not None else run_bounds(events)
    out = pts.select(
        "protocol",
        "group",
        "t",
        F.lead("t").over(w).alias("t_next"),
        F.sum("d_live").over(run).alias("live"),
        F.sum("d_idle").over(run).alias("idle"),
        F.sum("d_reb").over(run).alias("reb"),
        F.sum("d_busy").over(run).alias("coord_busy"),
    )
    return out.join(F.broadcast(bounds), "protocol").select(
        "protocol",
        "group",
        "t",
        F.coalesce(F.col("t_next"), F.greatest(F.col("t_last"), F.col("t"))).alias("t_next"),
        "live",
        "idle",
        "reb",
        "coord_busy",
    )


def partition_universe(
    events: DataFrame, intervals: DataFrame, produced: DataFrame | None = None
) -> DataFrame:
    """``GTP``: the partitions a group is expected to own.

    Those it ever claimed, and every produced partition of a topic it claimed from.
    """
    claimed = intervals.select(*GTP).distinct()
    topics = claimed.select("protocol", "group", "topic").distinct()
    if produced is None:
        produced = events.where(F.col("kind") == K.PRODUCED.value).select(*TP).distinct()
    more = produced.join(topics, ["protocol", "topic"]).select(*GTP)
    return claimed.transform(union_frames, more).distinct()


def unowned_spans(
    events: DataFrame,
    intervals: DataFrame,
    parts: DataFrame | None = None,
    bounds: DataFrame | None = None,
    lifetimes: DataFrame | None = None,
) -> DataFrame:
    """``GTP + [s, e]``: spans in which a partition had no owner (within the run).

    ``lifetimes`` (:meth:`analysis.topics.Incarnations.lifetimes_frame`): a
    partition of a topic created or deleted during the run is unowned only
    while its incarnation exists, from its ``topic_created`` to its
    ``topic_deleted``: not before it is there, not after it is gone.
    """
    parts = parts if parts is not None else partition_universe(events, intervals)
    bounds = bounds if bounds is not None else run_bounds(events)
    pts = intervals.select(*GTP, F.col("s").alias("t"), F.lit(1).alias("d")).transform(
        union_frames, intervals.select(*GTP, F.col("e").alias("t"), F.lit(-1).alias("d"))
    )
    first = parts.join(F.broadcast(bounds), "protocol").select(
        *GTP, F.col("t_first").alias("t"), F.lit(0).alias("d")
    )
    pts = pts.transform(union_frames, first).groupBy(*GTP, "t").agg(F.sum("d").alias("d"))
    w = Window.partitionBy(*GTP).orderBy("t")
    seg = pts.select(
        *GTP,
        F.col("t").alias("s"),
        F.lead("t").over(w).alias("e"),
        F.sum("d").over(w.rowsBetween(Window.unboundedPreceding, Window.currentRow)).alias("n"),
    )
    seg = seg.join(F.broadcast(bounds), "protocol").select(
        *GTP, "s", F.coalesce(F.col("e"), F.col("t_last")).alias("e"), "n"
    )
    gaps = islands(seg.where(F.col("e") >= F.col("s")), GTP, F.col("n") <= 0).where(
        F.col("e") > F.col("s")
    )
    if lifetimes is None:
        return gaps
    life = F.broadcast(lifetimes.select("protocol", "topic", "created", "deleted"))
    return (
        gaps.join(life, ["protocol", "topic"], "left")
        .select(
            *GTP,
            F.greatest(F.col("s"), F.coalesce(F.col("created"), F.col("s"))).alias("s"),
            F.least(F.col("e"), F.coalesce(F.col("deleted"), F.col("e"))).alias("e"),
        )
        .where(F.col("e") > F.col("s"))
    )


def settle_points(
    events: DataFrame, intervals: DataFrame, timeline: DataFrame | None = None
) -> DataFrame:
    """``(protocol, group, t)``: instants the group becomes settled after a rebalance."""
    gt = timeline if timeline is not None else group_timeline(events, intervals)
    settled = (F.col("reb") <= 0) & (F.col("coord_busy") <= 0)
    w = Window.partitionBy("protocol", "group").orderBy("t")
    gt = gt.withColumn("_set", settled).withColumn(
        "_was", F.coalesce(F.lag(settled).over(w), F.lit(True))
    )
    return gt.where(F.col("_set") & ~F.col("_was")).select("protocol", "group", "t")


def assignment_spans(events: DataFrame, bounds: DataFrame | None = None) -> DataFrame:
    """Each member's latest completed assignment: ``protocol, group, member, s, e, partitions``.

    From ``rebalance_completed`` (its ``partitions``) and ``rebalance_failed``
    (nothing) until the member's next one, its stop, its crash, or the
    coordinator's ``member_removed`` of its member id (``partitions`` null: not
    in the group). The last one is what the coordinator's assignment is about:
    a member expelled while paused still believes in its old assignment (the
    zombie, reported as double ownership), but the group's next assignment is
    computed without it.
    """
    ids = (
        events.where(F.col("member").isNotNull() & F.col("member_id").isNotNull())
        .select("protocol", "group", "member_id", "member")
        .distinct()
    )
    removed = (
        events.where(
            (F.col("kind") == K.MEMBER_REMOVED.value)
            & F.col("member").isNull()
            & F.col("member_id").isNotNull()
        )
        .select("protocol", "group", "member_id", F.col("t_emu_ms").alias("s"))
        .join(ids, ["protocol", "group", "member_id"])
        .select("protocol", "group", "member", "s", F.lit(None).cast("string").alias("partitions"))
    )
    ev = (
        events.where(
            F.col("member").isNotNull()
            & F.col("kind").isin(
                K.REBALANCE_COMPLETED.value,
                K.REBALANCE_FAILED.value,
                K.CONSUMER_STOPPED.value,
                K.CONSUMER_CRASHED.value,
            )
        )
        .select(
            "protocol",
            "group",
            "member",
            F.col("t_emu_ms").alias("s"),
            F.when(
                F.col("kind") == K.REBALANCE_COMPLETED.value, F.coalesce("partitions", F.lit(""))
            )
            .when(F.col("kind") == K.REBALANCE_FAILED.value, F.lit(""))
            .alias("partitions"),
        )
        .transform(union_frames, removed)
    )
    w = Window.partitionBy("protocol", "group", "member").orderBy("s")
    bounds = bounds if bounds is not None else run_bounds(events)
    ev = ev.withColumn("e", F.lead("s").over(w)).join(F.broadcast(bounds), "protocol")
    return ev.select(
        "protocol",
        "group",
        "member",
        "s",
        F.coalesce(F.col("e"), F.col("t_last") + 1.0).alias("e"),
        "partitions",
    ).where(F.col("partitions").isNotNull())
