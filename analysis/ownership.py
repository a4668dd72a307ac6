"""Ownership intervals in Spark: who held which partition when, in the protocol's order.

From the claim and release events (``ownership_claimed`` / ``partitions_assigned``
until ``ownership_released`` / ``partitions_revoked`` / ``partitions_lost``, a
crash, a graceful stop or a legacy session expiry), placed across nodes in the
protocol's order (czxids, generations, member epochs) rather than the skewed
clocks' order, with the places where the clocks contradict it.

Topics that come and go (:mod:`analysis.topics`): ownership is of a name, so
with a topic deleted or created during the run the intervals are built from
the claims and releases of the name and cut at its incarnations' lifetimes
(:func:`split_at_incarnations`): an interval ends at its incarnation's
``topic_deleted`` (an end ordered before any later claim, not a release), the
part after the deletion is a *hold* of a deleted partition
(:func:`analysis.checkers.topic_observations` reports it), and a name still
held when the topic is created again is owned in the new incarnation from
its ``topic_created`` on (carried over).
"""

from __future__ import annotations

from typing import Final

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from analysis.frames import (
    GTP,
    base_protocol_col,
    explode_partitions,
    member_col,
    optional_col,
    run_bounds,
    union_frames,
)
from analysis.topics import Incarnations, topic_name_col
from emulator.events import EventKind as K

CLAIM_KINDS: Final = (K.OWNERSHIP_CLAIMED.value, K.PARTITIONS_ASSIGNED.value)
"""The events that start an ownership interval (per partition, or a partition list)."""
RELEASE_KINDS: Final = (
    K.OWNERSHIP_RELEASED.value,
    K.PARTITIONS_REVOKED.value,
    K.PARTITIONS_LOST.value,
)
"""The events that end one (per partition, or a partition list)."""
MEMBER_END_KINDS: Final = (
    K.CONSUMER_CRASHED.value,
    K.CONSUMER_STOPPED.value,
    K.ZK_SESSION_EXPIRED.value,
)
"""The member-wide events that end all of a member's intervals."""


def ownership_changes(events: DataFrame, by_name: bool = False) -> DataFrame:
    """``(protocol, group, member, topic, partition, t, typ, node, okey, ordered, rel)``.

    ``by_name``: ``topic`` is the topic's name, not its incarnation's key
    (:func:`analysis.topics.topic_name_col`): ownership is of a name.

    ``typ`` 1 claim, 0 release. Per-partition claims and releases, the
    partition lists of the modern callbacks exploded, and the member-wide ends
    (crash, graceful stop, legacy session expiry) applied to every partition
    the member ever claimed. Duplicates (a modern member writes both the list
    and per-partition events at one instant) are merged.

    What orders the change across nodes (see :func:`protocol_intervals`):

    * ``node``: the emitting node (whose wall clock stamped ``t``);
    * ``okey`` (claims): the protocol's order of the claim, the owner znode's
      czxid for the legacy consumer (``zxid``), the generation / member epoch
      for the modern ones (``generation``); null when the log has none;
    * ``ordered`` (releases): the protocol puts this end before any later
      claim of the partition: a release (the owner znode deleted, the
      partitions revoked), a graceful stop or a crash (the session must end
      first). Not so for ``partitions_lost`` and a legacy session expiry: the
      zombie learns late, so only the clocks can tell;
    * ``rel`` (releases): an explicit release (``ownership_released`` /
      ``partitions_revoked``, not lost), stamped when it happened, also when
      the member's stop or crash falls in the same instant.
    """
    base = events.select(
        "protocol",
        "group",
        member_col().alias("member"),
        "kind",
        "topic",
        "partition",
        "partitions",
        F.col("t_emu_ms").alias("t"),
        optional_col(events, "node", "string").alias("node"),
        F.when(base_protocol_col() == "zookeeper", optional_col(events, "zxid", "long"))
        .otherwise(optional_col(events, "generation", "long"))
        .alias("okey"),
        optional_col(events, "reason", "string").alias("reason"),
    )
    explicit = (F.col("kind") == K.OWNERSHIP_RELEASED.value) & (
        F.coalesce(F.col("reason"), F.lit("")) != "lost"
    )
    single = base.where(
        F.col("kind").isin(K.OWNERSHIP_CLAIMED.value, K.OWNERSHIP_RELEASED.value)
    ).select(
        "protocol",
        "group",
        "member",
        "topic",
        "partition",
        "t",
        F.when(F.col("kind") == K.OWNERSHIP_CLAIMED.value, 1).otherwise(0).alias("typ"),
        "node",
        "okey",
        explicit.alias("ordered"),
        explicit.alias("rel"),
    )
    listed = explode_partitions(
        base.where(F.col("kind").isin(*CLAIM_KINDS[1:], *RELEASE_KINDS[1:]))
    ).select(
        "protocol",
        "group",
        "member",
        "topic",
        "partition",
        "t",
        F.when(F.col("kind") == K.PARTITIONS_ASSIGNED.value, 1).otherwise(0).alias("typ"),
        "node",
        "okey",
        (F.col("kind") == K.PARTITIONS_REVOKED.value).alias("ordered"),
        (F.col("kind") == K.PARTITIONS_REVOKED.value).alias("rel"),
    )
    changes = single.transform(union_frames, listed).where(F.col("member").isNotNull())
    if by_name:
        changes = changes.withColumn("topic", topic_name_col(F.col("topic")))
    claimed = changes.where(F.col("typ") == 1).select(*GTP, "member").distinct()
    ends = base.where(F.col("kind").isin(*MEMBER_END_KINDS)).select(
        "protocol",
        "group",
        "member",
        "t",
        "node",
        (F.col("kind") != K.ZK_SESSION_EXPIRED.value).alias("ordered"),
    )
    wide = ends.join(claimed, ["protocol", "group", "member"]).select(
        "protocol",
        "group",
        "member",
        "topic",
        "partition",
        "t",
        F.lit(0).alias("typ"),
        "node",
        F.lit(None).cast("long").alias("okey"),
        "ordered",
        F.lit(None).cast("boolean").alias("rel"),
    )
    # One row per change; an end that is also a lost / expiry is not ordered. The
    # member-wide end says nothing of how the partition went (``rel`` null): an
    # explicit release at the instant of the member's stop (the simulator writes
    # both in one instant) is still an explicit release; with a loss it is not.
    return (
        changes.transform(union_frames, wide)
        .groupBy("protocol", "group", "member", "topic", "partition", "t", "typ")
        .agg(
            F.max("node").alias("node"),
            F.max("okey").alias("okey"),
            F.min("ordered").alias("ordered"),
            F.coalesce(F.min("rel"), F.lit(False)).alias("rel"),
        )
    )


def ownership_intervals_all(
    events: DataFrame,
    bounds: DataFrame | None = None,
    incarnations: Incarnations | None = None,
) -> DataFrame:
    """Every ownership interval ``GTP + [member, s, e]`` (open ones end at the last event).

    Also ``node`` (the claimer's node), ``okey`` (the claim's protocol order,
    :func:`ownership_changes`), ``oend`` (the end is ordered before any later
    claim; false for an open interval) and ``rel`` (the end is an explicit release).

    ``incarnations``: the run's topics come and go; the intervals of the names
    are cut at the incarnations' lifetimes (:func:`split_at_incarnations`), and
    ``topic`` is the incarnation's key.
    """
    if incarnations:
        alive, _holds = split_at_incarnations(
            named_intervals(events, bounds), incarnations.spans_frame()
        )
        return alive
    return _intervals(ownership_changes(events), events, bounds)


def named_intervals(events: DataFrame, bounds: DataFrame | None = None) -> DataFrame:
    """:func:`ownership_intervals_all` of the topics' names, uncut, with ``open`` (no end
    event: the interval runs to the run's end)."""
    return _intervals(ownership_changes(events, by_name=True), events, bounds, with_open=True)


def _intervals(
    ch: DataFrame, events: DataFrame, bounds: DataFrame | None, with_open: bool = False
) -> DataFrame:
    w = Window.partitionBy(*GTP, "member").orderBy("t", "typ")
    ch = ch.withColumn("_prev", F.lag("typ").over(w))
    # Claims and releases alternate once repeats are dropped: an interval that
    # starts at a first claim ends at the next change, the first release after it.
    ch = ch.where(F.col("typ") != F.coalesce(F.col("_prev"), F.lit(0)))
    ch = (
        ch.withColumn("_end", F.lead("t").over(w))
        .withColumn("_oend", F.lead("ordered").over(w))
        .withColumn("_rel", F.lead("rel").over(w))
    )
    starts = ch.where(F.col("typ") == 1)
    bounds = bounds if bounds is not None else run_bounds(events)
    extra = [F.col("_end").isNull().alias("open")] if with_open else []
    return starts.join(F.broadcast(bounds), "protocol").select(
        *GTP,
        "member",
        F.col("t").alias("s"),
        F.coalesce(F.col("_end"), F.greatest(F.col("t_last"), F.col("t"))).alias("e"),
        "node",
        "okey",
        F.coalesce(F.col("_oend"), F.lit(False)).alias("oend"),
        F.coalesce(F.col("_rel"), F.lit(False)).alias("rel"),
        *extra,
    )


HOLD_RELEASED: Final = "released"
"""A hold of a deleted partition that ended by the member's release, loss, stop or crash."""
HOLD_CARRIED_OVER: Final = "carried_over"
"""A hold still there when the name was created again: it goes on in the new incarnation."""
HOLD_TO_END: Final = "held_to_end"
"""A hold that lasted until the run's end (no release, stop or crash)."""


def split_at_incarnations(named: DataFrame, spans: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Cut ownership intervals of names at the names' incarnations (:mod:`analysis.topics`).

    Args:
        named: :func:`named_intervals` (``topic`` a name, with ``open``).
        spans: :meth:`analysis.topics.Incarnations.spans_frame`.

    Returns:
        ``(intervals, holds)``. ``intervals``: as :func:`ownership_intervals_all`,
        ``topic`` the incarnation's key; the part of an interval within an
        incarnation's lifetime (its ``start`` to its deletion, else to the next
        creation); an interval cut there has ``oend`` (the deletion ends every
        owner's hold at once) and not ``rel`` (not a release). A name without
        incarnations keeps its intervals. ``holds``: ``GTP + [member, s, e,
        detail]``, the part of an interval after its incarnation's deletion and
        before the next creation (``topic``: the deleted incarnation's key);
        ``detail``: :data:`HOLD_RELEASED`, :data:`HOLD_CARRIED_OVER` or
        :data:`HOLD_TO_END`. A claim made in that span at an instant (``s = e``)
        is a hold too.
    """
    inf = F.lit(float("inf"))
    sp = spans.select(
        "protocol",
        "topic",
        "key",
        F.coalesce(F.col("start"), -inf).alias("_as"),
        F.coalesce(F.col("deleted"), F.col("end"), inf).alias("_ae"),
        F.col("deleted").alias("_ds"),
        F.coalesce(F.col("end"), inf).alias("_de"),
    )
    j = named.join(F.broadcast(sp), ["protocol", "topic"], "left")
    cols = [c for c in named.columns if c != "open"]
    plain = j.where(F.col("key").isNull()).select(*cols)
    ps = F.greatest(F.col("s"), F.col("_as"))
    pe = F.least(F.col("e"), F.col("_ae"))
    inside = (ps < pe) | (
        (F.col("s") == F.col("e")) & (F.col("_as") <= F.col("s")) & (F.col("s") < F.col("_ae"))
    )
    cut = pe < F.col("e")
    alive = (
        j.where(F.col("key").isNotNull() & inside)
        .withColumn("_cut", cut)
        .withColumn("s", ps)
        .withColumn("e", pe)
        .withColumn("oend", F.col("oend") | F.col("_cut"))
        .withColumn("rel", F.col("rel") & ~F.col("_cut"))
        .withColumn("topic", F.col("key"))
        .select(*cols)
    )
    hs = F.greatest(F.col("s"), F.col("_ds"))
    he = F.least(F.col("e"), F.col("_de"))
    dead = (hs < he) | (
        (F.col("s") == F.col("e")) & (F.col("_ds") <= F.col("s")) & (F.col("s") < F.col("_de"))
    )
    holds = j.where(F.col("_ds").isNotNull() & dead).select(
        "protocol",
        "group",
        F.col("key").alias("topic"),
        "partition",
        "member",
        hs.alias("s"),
        he.alias("e"),
        F.when(F.col("e") > F.col("_de"), F.lit(HOLD_CARRIED_OVER))
        .when(F.col("open"), F.lit(HOLD_TO_END))
        .otherwise(F.lit(HOLD_RELEASED))
        .alias("detail"),
    )
    return plain.transform(union_frames, alive), holds


def protocol_intervals(intervals: DataFrame) -> DataFrame:
    """Ownership intervals placed in the protocol's order of the claims (``ps``, ``pe``).

    Each node stamps its events with its own wall clock, so across nodes the
    clocks may disagree by their skew. The claims of one partition are ordered
    by the protocol instead: the legacy owner znodes' czxids (ZooKeeper's total
    order), the modern generations / member epochs, then time. Where a
    partition has a claim without that key (an old log, a hand-built history)
    it is ordered by time, as before. Within one node the clock is kept.

    Consecutive claims of a partition on one node form a *run*. Then:

    * ``ps``: a claim never comes before the claims of earlier runs: the
      largest stamp among them, if that is later than its own;
    * ``pe``: an end the protocol orders before later claims (``oend``: a
      release, a stop, a crash) is cut at the next run's first claim; the end
      of a zombie (lost partitions, a legacy session expiry, no end) stays
      where its own clock put it: a double ownership only the clocks can
      tell, within the skew bound (:func:`analysis.compare.clock_skew`).

    Also ``claim_inv`` / ``claim_inv_from`` (``member``, ``node``): how far a
    claim's stamp lies before the previous run's latest claim, which the
    protocol says came first; ``rel_inv`` / ``rel_inv_to``: how far an explicit
    release is stamped after the next run's first claim. Both are evidence of
    clock skew between the two nodes (a legacy release is stamped when its
    delete returns, so a few ms of ``rel_inv`` are also the reply's latency).
    """
    if "okey" not in intervals.columns or "node" not in intervals.columns:
        return intervals.select(
            "*",
            F.col("s").alias("ps"),
            F.col("e").alias("pe"),
            F.lit(None).cast("double").alias("claim_inv"),
            F.lit(None).cast("double").alias("rel_inv"),
        )
    wp = Window.partitionBy(*GTP)
    df = intervals.withColumn(
        "_ok",
        F.when(F.min(F.col("okey").isNotNull().cast("int")).over(wp) == 1, F.col("okey")),
    )
    w = wp.orderBy("_ok", "s", "member")
    chg = F.coalesce((F.lag("node").over(w) != F.col("node")).cast("int"), F.lit(0))
    df = df.withColumn("_chg", F.when(F.col("_ok").isNotNull(), chg).otherwise(F.lit(0)))
    df = df.withColumn(
        "_run", F.sum("_chg").over(w.rowsBetween(Window.unboundedPreceding, Window.currentRow))
    )
    wr = wp.orderBy("_run")
    df = df.withColumn(
        "_earlier", F.max("s").over(wr.rangeBetween(Window.unboundedPreceding, -1))
    ).withColumn("_prev", F.max(F.struct("s", "member", "node")).over(wr.rangeBetween(-1, -1)))
    df = df.withColumn("ps", F.greatest(F.col("s"), F.coalesce(F.col("_earlier"), F.col("s"))))
    df = df.withColumn("_next", F.min(F.struct("ps", "member", "node")).over(wr.rangeBetween(1, 1)))
    nxt = F.col("_next").getField("ps")
    df = df.withColumn(
        "pe",
        F.when(F.col("oend") & nxt.isNotNull(), F.least(F.col("e"), nxt)).otherwise(F.col("e")),
    )
    prev_s = F.col("_prev").getField("s")
    return df.select(
        *intervals.columns,
        "ps",
        "pe",
        F.when(prev_s > F.col("s"), prev_s - F.col("s")).alias("claim_inv"),
        F.col("_prev").getField("member").alias("claim_inv_from"),
        F.col("_prev").getField("node").alias("claim_inv_node"),
        F.when(F.col("rel") & (F.col("e") > nxt), F.col("e") - nxt).alias("rel_inv"),
        F.col("_next").getField("member").alias("rel_inv_to"),
        F.col("_next").getField("node").alias("rel_inv_node"),
    )


def protocol_order_inversions(intervals: DataFrame) -> DataFrame:
    """Where two nodes' clocks contradict the protocol's order of one partition's owners.

    One row per inversion (``intervals``: :func:`ownership_intervals_all` or
    :func:`protocol_intervals`): ``GTP + [what, member, node, other_member,
    other_node, t_ms, inversion_ms]``. ``what`` is ``claim`` (``member``'s claim
    is stamped ``inversion_ms`` before ``other_member``'s claim, which the
    protocol orders first) or ``release`` (``member``'s release is stamped
    ``inversion_ms`` after ``other_member``'s claim, which the protocol orders
    after it). ``t_ms``: the stamp of ``member``'s event. Not double ownership:
    evidence of clock skew between ``node`` and ``other_node`` (at least
    ``inversion_ms``, in emulated ms).
    """
    pv = intervals if "ps" in intervals.columns else protocol_intervals(intervals)
    claims = pv.where(F.col("claim_inv") > 0).select(
        *GTP,
        F.lit("claim").alias("what"),
        "member",
        "node",
        F.col("claim_inv_from").alias("other_member"),
        F.col("claim_inv_node").alias("other_node"),
        F.col("s").alias("t_ms"),
        F.col("claim_inv").alias("inversion_ms"),
    )
    releases = pv.where(F.col("rel_inv") > 0).select(
        *GTP,
        F.lit("release").alias("what"),
        "member",
        "node",
        F.col("rel_inv_to").alias("other_member"),
        F.col("rel_inv_node").alias("other_node"),
        F.col("e").alias("t_ms"),
        F.col("rel_inv").alias("inversion_ms"),
    )
    return claims.transform(union_frames, releases)


def effective_intervals(intervals: DataFrame) -> DataFrame:
    """Ownership cut at the next claim of the partition: who is the *current* owner.

    A member that never released (a zombie after a session expiry or a
    removal) stops being the current owner when another member claims the
    partition; the result's intervals of one partition never overlap.
    """
    if "ps" not in intervals.columns and "okey" in intervals.columns:
        intervals = protocol_intervals(intervals)
    if "ps" in intervals.columns:
        # The next claim in the protocol's order (time where a claim has no key).
        ok = F.when(
            F.min(F.col("okey").isNotNull().cast("int")).over(Window.partitionBy(*GTP)) == 1,
            F.col("okey"),
        )
        w = Window.partitionBy(*GTP).orderBy("_ok", "s", "member")
        df = intervals.withColumn("_ok", ok)
        return df.withColumn(
            "e", F.least(F.col("e"), F.coalesce(F.lead("ps").over(w), F.col("e")))
        ).drop("_ok")
    w = Window.partitionBy(*GTP).orderBy("s", "member")
    return intervals.withColumn(
        "e", F.least(F.col("e"), F.coalesce(F.lead("s").over(w), F.col("e")))
    )
