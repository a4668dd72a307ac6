"""Invariant checkers over a run's events: typed anomaly rows, in Spark.

The Spark jobs only: the anomaly vocabulary and the allowed table are in
:mod:`emulator.anomalies`, the shared keys and sweeps in :mod:`analysis.frames`,
the ownership intervals in :mod:`analysis.ownership` and the group timelines
in :mod:`analysis.timelines`.

Every checker is a DataFrame plan over the event table (no raw event is
collected), so it runs on tens of millions of events: offsets are handled as
half-open ranges swept with window functions, time as intervals swept the
same way, and the few range joins bucket offsets first.

What each checker finds (one row per anomaly, :data:`ANOMALY_SCHEMA`):

* ``double_ownership``: a window in which two or more members held the same
  partition by their ownership events (``ownership_claimed`` /
  ``partitions_assigned`` until ``ownership_released`` / ``partitions_revoked``
  / ``partitions_lost``, a crash, a graceful stop, or a legacy session expiry).
  ``member`` is the latest claimer, ``other_member`` the earliest holder.
  Across nodes the owners are in the protocol's order (czxids, generations,
  member epochs; :func:`analysis.ownership.protocol_intervals`), not the
  skewed clocks' order; where the clocks contradict it,
  :func:`analysis.ownership.protocol_order_inversions` says so.
* ``double_processing``: a window in which two or more members were processing
  the same partition (``processed`` intervals ``[t_emu_ms - duration_ms,
  t_emu_ms]``), exactly as :func:`emulator.intervals.overlap_windows`,
  and at least two of them the same records.
* ``ordering_overlap``: such a window in which the members processed
  *different* records of the partition (no duplicate, but per-partition order
  is broken: a revocation that does not wait for the application).
* ``loss``: produced offsets never processed (a range per row); ``detail`` =
  why: ``committed_before_processed`` (records a crashed member had been
  handed, ``records_abandoned``, past which its client had committed),
  ``unprocessed_at_end`` (after the last processed offset of the partition:
  the run ended first, e.g. a stranded partition) or ``skipped``.
* ``duplicate``: offsets processed more than once; one row per re-processing
  batch and the batch it repeated, ``count`` = offsets repeated, ``detail`` =
  why: ``zombie`` (one of the two was processed by a member that was not the
  partition's current owner, or the two overlapped in time),
  ``redelivered_after_crash`` (the earlier processor crashed before the repeat
  without committing it), ``uncommitted_after_revoke``
  (the earlier processor lost the partition before the repeat: work it had
  not committed was done again), or ``other``.
* ``commit_by_non_owner``: ``offsets_committed`` by a member that was not the
  partition's current owner at that time (the current owner is the latest
  claimer still holding it).
* ``stranded_partition``: a partition with no owner while a live consumer
  owns nothing and the group is settled (no member mid-rebalance, the
  coordinator, if any, not rebalancing): an assignment problem. A member told
  to stop (a timeline leave or restart, the run's end) is not such a consumer
  until it stops: it has given its partitions up before it leaves the group
  (:mod:`analysis.timelines`), which the coordinator has not yet seen. Nor is
  a member whose completed rebalance gave it partitions it has not claimed
  yet (a classic member's claims follow its ``rebalance_completed``).
* ``invalid_assignment``: at a settle point (the group just finished
  rebalancing), a partition the live members' latest completed assignments
  give to no member or to several (``count`` = how many).
* ``unbalanced_assignment``: at a settle point, live members' partition counts
  differ by more than one.
* ``double_acquisition`` (share groups only, :mod:`analysis.share`): a record
  acquired by a member while another still held its lock.

Topics created and deleted during the run (:mod:`analysis.topics`): every
checker reads the events keyed by topic incarnation (:attr:`SharedFrames.events`:
``t``, ``t#2`` ...), so offsets of two incarnations of a name are different
records; ownership intervals end at their incarnation's deletion
(:func:`analysis.ownership.split_at_incarnations`), so nothing is doubly owned
or stranded once a topic is gone, and a partition is expected (unowned spans,
assignments) only while its incarnation exists. What becomes of a deleted
topic's partitions is not an anomaly but an observation
(:func:`topic_observations`): its unprocessed tail is ``deleted_with_topic``,
not ``loss``; a commit stored after its deletion is
``commits_deleted_partition``, not ``commit_by_non_owner``; holds and batches
after it are ``owns_deleted_partition`` and ``processes_deleted_partition``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from analysis.frames import (
    GTP,
    TP,
    busy_windows,
    endpoints,
    explode_partitions,
    hashed,
    islands,
    member_col,
    merge_equal,
    protocol_groups,
    protocol_summary,
    run_bounds,
    sweep_coverage,
    union_frames,
    who_col,
    with_key_hash,
)
from analysis.ownership import (
    CLAIM_KINDS,
    MEMBER_END_KINDS,
    RELEASE_KINDS,
    effective_intervals,
    named_intervals,
    ownership_intervals_all,
    protocol_intervals,
    split_at_incarnations,
)
from analysis.share import check_double_acquisition, share_series
from analysis.timelines import (
    assignment_spans,
    group_timeline,
    partition_universe,
    settle_points,
    unowned_spans,
)
from analysis.topics import (
    COMMITS_DELETED_PARTITION,
    DELETED_WITH_TOPIC,
    OWNS_DELETED_PARTITION,
    PROCESSES_DELETED_PARTITION,
    Incarnations,
    alive_at,
    topic_name_col,
)
from emulator.anomalies import (
    ALLOWED,
    COMMIT_BY_NON_OWNER,
    DOUBLE_OWNERSHIP,
    DOUBLE_PROCESSING,
    DUPLICATE,
    INVALID_ASSIGNMENT,
    LOSS,
    LOSS_AT_END,
    LOSS_COMMITTED_BEFORE_PROCESSED,
    LOSS_SKIPPED,
    ORDERING_OVERLAP,
    STRANDED_PARTITION,
    UNBALANCED_ASSIGNMENT,
    WHY_CRASH,
    WHY_OTHER,
    WHY_UNCOMMITTED,
    WHY_ZOMBIE,
    allowed_kinds,
    allowed_kinds_converted,
)
from emulator.events import EventKind as K

ANOMALY_SCHEMA: Final = StructType(
    [
        StructField("protocol", StringType(), True),
        StructField("group", StringType(), True),
        StructField("kind", StringType(), True),
        StructField("topic", StringType(), True),
        StructField("partition", LongType(), True),
        StructField("member", StringType(), True),
        StructField("other_member", StringType(), True),
        StructField("t_start_ms", DoubleType(), True),
        StructField("t_end_ms", DoubleType(), True),
        StructField("offset_start", LongType(), True),
        StructField("offset_end", LongType(), True),
        StructField("count", LongType(), True),
        StructField("allowed", BooleanType(), True),
        StructField("detail", StringType(), True),
    ]
)

BUCKET: Final = 4096  # offsets per bucket in the duplicate range join


def _offset_buckets(start: str, end: str) -> Column:
    """Each :data:`BUCKET` of offsets the range ``[start, end)`` reaches, one row each."""
    return F.explode(
        F.sequence(
            F.floor(F.col(start) / BUCKET).cast("long"),
            F.floor((F.col(end) - 1) / BUCKET).cast("long"),
        )
    )


TIME_BUCKETS: Final = 1024
"""Time buckets of a protocol's run in the commit check's range join (at least 1 ms each)."""


def _anomaly(df: DataFrame, kind: str, **cols: Column) -> DataFrame:
    """Project ``df`` onto :data:`ANOMALY_SCHEMA` (missing columns are null)."""
    out = []
    for f in ANOMALY_SCHEMA.fields:
        if f.name == "kind":
            c = F.lit(kind)
        elif f.name == "allowed":
            c = F.lit(False)
        elif f.name in cols:
            c = cols[f.name]
        elif f.name in df.columns:
            c = F.col(f.name)
        else:
            c = F.lit(None)
        out.append(c.cast(f.dataType).alias(f.name))
    return df.select(*out)


# -------------------------------------------------------------- checkers

BROADCAST_WINDOWS_MAX = 200_000
"""Up to this many windows are broadcast to the join that finds their intervals."""


def _settled(wins: DataFrame) -> DataFrame:
    """Windows computed once (a checker joins them to its intervals and then
    to themselves) and, when there are few, marked for a broadcast join: the
    intervals are then not shuffled to meet them (a run without anomalies has
    none, and its millions of intervals stay where they are)."""
    wins = wins.localCheckpoint()
    few = wins.limit(BROADCAST_WINDOWS_MAX + 1).count() <= BROADCAST_WINDOWS_MAX
    return F.broadcast(wins) if few else wins


def check_double_ownership(events: DataFrame, intervals: DataFrame | None = None) -> DataFrame:
    """Windows in which two or more members held one partition by their ownership events.

    The intervals are placed in the protocol's order first (:func:`protocol_intervals`):
    across nodes a window the protocol rules out (an owner's release stamped
    after its successor's claim by a skewed clock) is not reported; that is a
    :func:`protocol_order_inversions` row instead.
    """
    iv = intervals if intervals is not None else ownership_intervals_all(events)
    pv = iv if "ps" in iv.columns else protocol_intervals(iv)
    iv = pv.select(*GTP, "member", F.col("ps").alias("s"), F.col("pe").alias("e"))
    iv = iv.where(F.col("e") > F.col("s"))
    wins = _settled(busy_windows(iv.withColumnRenamed("member", "who"), GTP))
    j = iv.join(wins, GTP).where((F.col("s") < F.col("w_end")) & (F.col("w_start") < F.col("e")))
    agg = j.groupBy(*GTP, "w_start", "w_end").agg(
        F.max(F.struct("s", "member")).getField("member").alias("member"),
        F.min(F.struct("s", "member")).getField("member").alias("other_member"),
        F.countDistinct("member").alias("count"),
        F.concat_ws(",", F.array_sort(F.collect_set("member"))).alias("detail"),
    )
    return _anomaly(
        agg,
        DOUBLE_OWNERSHIP,
        t_start_ms=F.col("w_start"),
        t_end_ms=F.col("w_end"),
        detail=F.concat(F.lit("members="), F.col("detail")),
    )


def processed_batches(events: DataFrame) -> DataFrame:
    """``PROCESSED`` as batches (``member, who, os, oe, t0, t1`` beside the keys)."""
    return events.where(F.col("kind") == K.PROCESSED.value).select(
        "protocol",
        "group",
        "topic",
        "partition",
        member_col().alias("member"),
        who_col().alias("who"),
        F.col("offset_start").alias("os"),
        F.col("offset_end").alias("oe"),
        (F.col("t_emu_ms") - F.coalesce(F.col("duration_ms"), F.lit(0.0))).alias("t0"),
        F.col("t_emu_ms").alias("t1"),
        F.col("duration_ms"),
    )


def double_processing_windows_df(events: DataFrame) -> DataFrame:
    """``TP + [w_start, w_end]``: :func:`emulator.intervals.overlap_windows` in Spark."""
    b = processed_batches(events).where(
        (F.col("duration_ms") > 0) & F.col("t1").isNotNull() & (F.col("t1") > F.col("t0"))
    )
    return busy_windows(b.select(*TP, "who", F.col("t0").alias("s"), F.col("t1").alias("e")), TP)


def check_double_processing(events: DataFrame, batches: DataFrame | None = None) -> DataFrame:
    """Windows in which two or more members were processing one partition at once."""
    b = (batches if batches is not None else processed_batches(events)).where(
        (F.col("duration_ms") > 0) & F.col("t1").isNotNull() & (F.col("t1") > F.col("t0"))
    )
    wins = _settled(
        busy_windows(b.select(*TP, "who", F.col("t0").alias("s"), F.col("t1").alias("e")), TP)
    )
    j = b.join(wins, TP).where((F.col("t0") < F.col("w_end")) & (F.col("w_start") < F.col("t1")))
    # Did two different members of the window process the same records?
    k = [*TP, "w_start", "w_end"]
    other = j.select(
        *k, F.col("who").alias("who2"), F.col("os").alias("os2"), F.col("oe").alias("oe2")
    )
    shared = (
        j.join(other, k)
        .where(
            (F.col("who") != F.col("who2"))
            & (F.col("os") < F.col("oe2"))
            & (F.col("os2") < F.col("oe"))
        )
        .select(*k)
        .distinct()
        .withColumn("_same", F.lit(True))
    )
    j = j.join(shared, k, "left")
    agg = j.groupBy(*TP, "w_start", "w_end").agg(
        F.max(F.coalesce(F.col("_same"), F.lit(False))).alias("_same"),
        F.min("group").alias("group"),
        F.max(F.struct("t0", "member")).getField("member").alias("member"),
        F.min(F.struct("t0", "member")).getField("member").alias("other_member"),
        F.countDistinct("who").alias("count"),
        F.min("os").alias("offset_start"),
        F.max("oe").alias("offset_end"),
        F.concat_ws(",", F.array_sort(F.collect_set("member"))).alias("detail"),
    )
    cols = {
        "t_start_ms": F.col("w_start"),
        "t_end_ms": F.col("w_end"),
        "detail": F.concat(F.lit("members="), F.col("detail")),
    }
    same = _anomaly(agg.where(F.col("_same")), DOUBLE_PROCESSING, **cols)
    order = _anomaly(agg.where(~F.col("_same")), ORDERING_OVERLAP, **cols)
    return same.unionByName(order)


def _offset_runs(ranges: DataFrame, produced: bool) -> DataFrame:
    """``TP + [_p, os, oe]``: ``ranges`` (``TP + [os, oe]``) joined into runs of
    back-to-back ranges, by offset (empty ranges left out); ``_p`` is ``produced``."""
    w = Window.partitionBy(*hashed(TP)).orderBy("os", "oe")
    new_run = F.coalesce(F.lag("oe").over(w) != F.col("os"), F.lit(True)).cast("long")
    return (
        with_key_hash(ranges.where(F.col("oe") > F.col("os")), TP)
        .withColumn("_new", new_run)
        .withColumn(
            "_run", F.sum("_new").over(w.rowsBetween(Window.unboundedPreceding, Window.currentRow))
        )
        .groupBy(*TP, "_run")
        .agg(F.min("os").alias("os"), F.max("oe").alias("oe"))
        .select(*TP, F.lit(produced).alias("_p"), "os", "oe")
    )


def offset_coverage(events: DataFrame, batches: DataFrame | None = None) -> DataFrame:
    """``TP + [s, e, prod, proc]``: how often each offset segment was produced and processed.

    Contiguous segments with the same counts are one row, except where an
    offset was processed twice or more: there the segments are cut at every
    boundary of a processed batch inside them, so that each is covered whole
    by the batches that processed it (what :func:`check_duplicates` matches).

    How: each kind's batches are first joined into *runs* (a batch that starts
    where the one before it, by offset, ended continues its run); the runs
    cover every offset as often as the batches do, so sweeping their ends
    gives the same counts as sweeping every batch's, from a few rows per
    partition instead of two per event. ``batches``: :func:`processed_batches`
    (the processed runs and the cuts are read from them; from ``events`` when
    not given).
    """
    b = batches if batches is not None else processed_batches(events)
    produced = events.where(F.col("kind") == K.PRODUCED.value).select(
        *TP, F.col("offset_start").alias("os"), F.col("offset_end").alias("oe")
    )
    # Each kind's runs apart: the processed batches' own partitioning by ``TP``
    # (SharedFrames.batches) then serves their window without a shuffle.
    runs = _offset_runs(produced, True).unionByName(_offset_runs(b.select(*TP, "os", "oe"), False))
    zero = F.lit(0).cast("long")
    d = F.col("d").cast("long")
    pts = endpoints(runs, [*TP, "_p"], "os", "oe", "pos").select(
        *TP,
        "pos",
        F.when(F.col("_p"), d).otherwise(zero).alias("prod"),
        F.when(F.col("_p"), zero).otherwise(d).alias("proc"),
    )
    twice = F.col("proc") >= 2
    # A few rows per partition, read twice below: computed once.
    cov = merge_equal(
        sweep_coverage(pts, TP, ["prod", "proc"]), TP, ["prod", "proc"], twice
    ).localCheckpoint()
    # Cut what was processed twice or more at the processed batches' boundaries inside it.
    dup = cov.where(twice)
    # Only the partitions with such segments: a semi-join on exactly ``TP`` keeps
    # the batches where their partitioning put them (the join on the buckets
    # below would shuffle every batch).
    bb = (
        b.where(F.col("oe") > F.col("os"))
        .select(*TP, "os", "oe")
        .join(dup.select(*TP).distinct(), TP, "left_semi")
        .withColumn("bucket", _offset_buckets("os", "oe"))
    )
    cuts = (
        dup.select(*TP, "s", "e", _offset_buckets("s", "e").alias("bucket"))
        .join(bb, [*TP, "bucket"])
        .where((F.col("os") < F.col("e")) & (F.col("s") < F.col("oe")))
        .select(*TP, "s", "e", F.explode(F.array("os", "oe")).alias("c"))
        .where((F.col("c") > F.col("s")) & (F.col("c") < F.col("e")))
    )
    at = dup.select(*TP, "s", "e", F.col("s").alias("c")).transform(union_frames, cuts).distinct()
    wc = Window.partitionBy(*TP, "s").orderBy("c")
    pieces = (
        at.select(*TP, "s", "c", F.coalesce(F.lead("c").over(wc), F.col("e")).alias("_to"))
        .join(dup, [*TP, "s"])
        .select(*TP, F.col("c").alias("s"), F.col("_to").alias("e"), "prod", "proc")
    )
    return cov.where(~twice).unionByName(pieces)


def check_loss(
    events: DataFrame,
    coverage: DataFrame | None = None,
    intervals: DataFrame | None = None,
    groups: DataFrame | None = None,
    lifetimes: DataFrame | None = None,
) -> DataFrame:
    """Produced offset ranges that no member ever processed.

    ``group``: the group that owned the partition (the first by name), else
    the protocol's consumer group. ``lifetimes``
    (:meth:`analysis.topics.Incarnations.lifetimes_frame`): the unprocessed
    tail of a deleted incarnation (what would be ``unprocessed_at_end``) went
    with its topic: not loss, a :data:`analysis.topics` observation
    (:func:`topic_observations`).
    """
    lost = lost_ranges(events, coverage, intervals, groups)
    if lifetimes is not None:
        lost = lost.join(_deletions(lifetimes), ["protocol", "topic"], "left").where(
            ~_went_with_topic()
        )
    return _anomaly(
        lost,
        LOSS,
        offset_start=F.col("s"),
        offset_end=F.col("e"),
        count=F.col("e") - F.col("s"),
        detail=F.col("_why"),
    )


def _deletions(lifetimes: DataFrame) -> DataFrame:
    """``protocol, topic, _deleted``: the deleted incarnations (keys) and when."""
    return F.broadcast(
        lifetimes.where(F.col("deleted").isNotNull()).select(
            "protocol", "topic", F.col("deleted").alias("_deleted")
        )
    )


def _went_with_topic() -> Column:
    """A lost range (joined with :func:`_deletions`) that is the tail of a deleted incarnation."""
    return F.col("_deleted").isNotNull() & (F.col("_why") == LOSS_AT_END)


def lost_ranges(
    events: DataFrame,
    coverage: DataFrame | None = None,
    intervals: DataFrame | None = None,
    groups: DataFrame | None = None,
) -> DataFrame:
    """``TP + [s, e, group, _why]``: produced offset ranges never processed, and why."""
    cov = coverage if coverage is not None else offset_coverage(events)
    iv = intervals if intervals is not None else ownership_intervals_all(events)
    lost = islands(cov, TP, (F.col("prod") > 0) & (F.col("proc") == 0))
    # Why: handed to a member that crashed (its client had committed past it),
    # after the last processed offset (the run ended first), or skipped.
    abandoned = events.where(F.col("kind") == K.RECORDS_ABANDONED.value).select(
        *TP, F.col("offset_start").alias("_as"), F.col("offset_end").alias("_ae")
    )
    hit = (
        lost.join(abandoned, TP)
        .where((F.col("_as") < F.col("e")) & (F.col("s") < F.col("_ae")))
        .select(*TP, "s")
        .distinct()
        .withColumn("_abandoned", F.lit(True))
    )
    last = (
        events.where(F.col("kind") == K.PROCESSED.value)
        .groupBy(*TP)
        .agg(F.max("offset_end").alias("_last"))
    )
    lost = (
        lost.join(hit, [*TP, "s"], "left")
        .join(last, TP, "left")
        .withColumn(
            "_why",
            F.when(F.col("_abandoned"), F.lit(LOSS_COMMITTED_BEFORE_PROCESSED))
            .when(F.col("_last").isNull() | (F.col("s") >= F.col("_last")), F.lit(LOSS_AT_END))
            .otherwise(F.lit(LOSS_SKIPPED)),
        )
    )
    owners = iv.groupBy(*TP).agg(F.min("group").alias("_g"))
    return (
        lost.join(owners, TP, "left")
        .join(
            F.broadcast(groups if groups is not None else protocol_groups(events)),
            "protocol",
            "left",
        )
        .withColumn("group", F.coalesce(F.col("_g"), F.col("group")))
        .select(*TP, "s", "e", "group", "_why")
    )


def check_duplicates(
    events: DataFrame,
    coverage: DataFrame | None = None,
    effective: DataFrame | None = None,
    batches: DataFrame | None = None,
) -> DataFrame:
    """Offsets processed more than once, one row per repeating batch, with why."""
    cov = coverage if coverage is not None else offset_coverage(events)
    segs = cov.where(F.col("proc") >= 2).select(
        *TP, "s", "e", (F.floor(F.col("s") / BUCKET)).cast("long").alias("bucket")
    )
    b = batches if batches is not None else processed_batches(events)
    if "bid" not in b.columns:
        b = b.withColumn("bid", F.monotonically_increasing_id())
    bb = b.withColumn("bucket", _offset_buckets("os", "oe")).where(F.col("oe") > F.col("os"))
    cover = segs.join(bb, [*TP, "bucket"]).where(
        (F.col("os") <= F.col("s")) & (F.col("e") <= F.col("oe"))
    )
    w = Window.partitionBy(*TP, "s").orderBy("t1", "t0", "bid")
    cover = cover.withColumn("_k", F.row_number().over(w))
    for c in ("bid", "member", "who", "t0", "t1"):
        cover = cover.withColumn(f"p_{c}", F.lag(c).over(w))
    rep = cover.where(F.col("_k") >= 2)
    eff = (
        effective if effective is not None else effective_intervals(ownership_intervals_all(events))
    )
    # Was each batch of the pair processed by the partition's current owner, and
    # did the earlier processor's ownership end before the repeat?
    owned_now = eff.select(*GTP, "member", F.col("s").alias("os_"), F.col("e").alias("oe_"))
    pairs = rep.select(
        *TP,
        "group",
        "s",
        "e",
        "bid",
        "member",
        "who",
        "t0",
        "t1",
        "p_bid",
        "p_member",
        "p_who",
        "p_t0",
        "p_t1",
    )

    def owner_flag(df: DataFrame, member: str, t: str, out: str) -> DataFrame:
        o = owned_now.withColumnRenamed("member", member)
        j = df.join(o, [*GTP, member], "left")
        hit = (F.col("os_") <= F.col(t)) & (F.col(t) <= F.col("oe_"))
        return j.groupBy(*df.columns).agg(F.max(F.when(hit, F.col("oe_"))).alias(out))

    pairs = owner_flag(pairs, "member", "t0", "_own_end")
    pairs = owner_flag(pairs, "p_member", "p_t0", "_p_own_end")
    zombie = (
        F.col("_own_end").isNull()
        | F.col("_p_own_end").isNull()
        | (
            (F.col("who") != F.col("p_who"))
            & (F.col("t0") < F.col("p_t1"))
            & (F.col("p_t0") < F.col("t1"))
        )
    )
    revoked = F.col("_p_own_end") <= F.col("t0")
    crashes = events.where(F.col("kind") == K.CONSUMER_CRASHED.value).select(
        "protocol", "group", F.col("member").alias("p_member"), F.col("t_emu_ms").alias("_tc")
    )
    crashed = (
        pairs.select("protocol", "group", "p_member", "p_t1", "t0", "bid", "p_bid")
        .join(crashes, ["protocol", "group", "p_member"])
        .where((F.col("_tc") >= F.col("p_t1")) & (F.col("_tc") <= F.col("t0")))
        .select("bid", "p_bid")
        .distinct()
        .withColumn("_crashed", F.lit(True))
    )
    pairs = pairs.join(crashed, ["bid", "p_bid"], "left")
    pairs = pairs.withColumn(
        "why",
        F.when(zombie, F.lit(WHY_ZOMBIE))
        .when(F.col("_crashed"), F.lit(WHY_CRASH))
        .when(revoked, F.lit(WHY_UNCOMMITTED))
        .otherwise(F.lit(WHY_OTHER)),
    )
    agg = pairs.groupBy(*TP, "bid", "p_bid", "why").agg(
        F.first("group").alias("group"),
        F.first("member").alias("member"),
        F.first("p_member").alias("other_member"),
        F.first("t0").alias("t_start_ms"),
        F.first("t1").alias("t_end_ms"),
        F.min("s").alias("offset_start"),
        F.max("e").alias("offset_end"),
        F.sum(F.col("e") - F.col("s")).alias("count"),
    )
    return _anomaly(agg, DUPLICATE, detail=F.col("why"))


def commits_stored(events: DataFrame) -> DataFrame:
    """``GTP + [member, t, off]``: each ``offsets_committed`` at the instant it was stored."""
    return events.where(F.col("kind") == K.OFFSETS_COMMITTED.value).select(
        *GTP,
        member_col().alias("member"),
        (F.col("t_emu_ms") - F.coalesce(F.col("duration_ms"), F.lit(0.0))).alias("t"),
        F.col("offset_end").alias("off"),
    )


def check_commit_by_non_owner(
    events: DataFrame,
    effective: DataFrame | None = None,
    lifetimes: DataFrame | None = None,
    bounds: DataFrame | None = None,
) -> DataFrame:
    """``offsets_committed`` by a member that was not the partition's current owner.

    The commit's instant is when the coordinator stored it: ``t_emu_ms`` less
    the event's ``duration_ms`` (the answer's delay; absent, 0, for the legacy
    consumer, whose event is the write itself). A commit stored while its
    member owned the partition is not a non-owner's even when the answer
    reaches the member after a rebalance (a pause between the two).

    ``lifetimes`` (:meth:`analysis.topics.Incarnations.lifetimes_frame`): a
    commit stored at or after its incarnation's deletion has no owner to be
    judged against (nobody owns a partition that is gone): it is a
    ``commits_deleted_partition`` observation (:func:`topic_observations`), not
    this anomaly.

    Each commit is matched only with the intervals that reach its time bucket
    (:data:`TIME_BUCKETS` of the protocol's run, ``bounds``: :func:`run_bounds`),
    not with every interval of its partition: the same matches (an interval
    that holds ``t`` reaches ``t``'s bucket) without a join that grows with
    commits x rebalances (75 M rows for a 10 M-event run).
    """
    eff = (
        effective if effective is not None else effective_intervals(ownership_intervals_all(events))
    )
    width = F.broadcast(
        (bounds if bounds is not None else run_bounds(events)).select(
            "protocol",
            F.greatest((F.col("t_last") - F.col("t_first")) / TIME_BUCKETS, F.lit(1.0)).alias("_w"),
        )
    )

    def bucket(t: Column) -> Column:  # after the join with ``width``
        return F.floor(t / F.coalesce(F.col("_w"), F.lit(1.0)))

    commits = commits_stored(events)
    if lifetimes is not None:
        commits = (
            commits.join(_deletions(lifetimes), ["protocol", "topic"], "left")
            .where(F.col("_deleted").isNull() | (F.col("t") < F.col("_deleted")))
            .drop("_deleted")
        )
    commits = (
        commits.withColumn("cid", F.monotonically_increasing_id())
        .join(width, "protocol", "left")
        .withColumn("_b", bucket(F.col("t")))
        .drop("_w")
    )
    # An interval with no end holds no commit (``t <= _e`` is never true): its start's bucket.
    mine = (
        eff.select(
            *GTP, F.col("member").alias("_m"), F.col("s").alias("_s"), F.col("e").alias("_e")
        )
        .join(width, "protocol", "left")
        .withColumn(
            "_b",
            F.explode(
                F.sequence(bucket(F.col("_s")), bucket(F.coalesce(F.col("_e"), F.col("_s"))))
            ),
        )
        .drop("_w")
    )
    j = commits.join(mine, [*GTP, "_b"], "left").withColumn(
        "_hit",
        (F.col("_m") == F.col("member"))
        & (F.col("_s") <= F.col("t"))
        & (F.col("t") <= F.col("_e")),
    )
    owner_now = F.when((F.col("_s") <= F.col("t")) & (F.col("t") < F.col("_e")), F.col("_m"))
    agg = j.groupBy(*GTP, "member", "t", "off", "cid").agg(
        F.max(F.coalesce(F.col("_hit"), F.lit(False))).alias("ok"),
        F.max(owner_now).alias("other_member"),
    )
    bad = agg.where(~F.col("ok"))
    return _anomaly(
        bad,
        COMMIT_BY_NON_OWNER,
        t_start_ms=F.col("t"),
        t_end_ms=F.col("t"),
        offset_end=F.col("off"),
        count=F.lit(1),
    )


def check_stranded(
    events: DataFrame,
    intervals: DataFrame | None = None,
    timeline: DataFrame | None = None,
    gaps: DataFrame | None = None,
) -> DataFrame:
    """Partitions unowned while an idle member waits in a settled group (``group_timeline``)."""
    iv = intervals if intervals is not None else ownership_intervals_all(events)
    gt = timeline if timeline is not None else group_timeline(events, iv)
    bad = islands(
        gt.select(
            "protocol",
            "group",
            F.col("t").alias("s"),
            F.col("t_next").alias("e"),
            "idle",
            "reb",
            "coord_busy",
        ),
        ["protocol", "group"],
        (F.col("idle") > 0) & (F.col("reb") <= 0) & (F.col("coord_busy") <= 0),
    )
    gaps = gaps if gaps is not None else unowned_spans(events, iv)
    j = gaps.join(
        bad.withColumnRenamed("s", "bs").withColumnRenamed("e", "be"), ["protocol", "group"]
    )
    j = j.select(
        *GTP,
        F.greatest("s", "bs").alias("t0"),
        F.least("e", "be").alias("t1"),
    ).where(F.col("t1") > F.col("t0"))
    return _anomaly(j, STRANDED_PARTITION, t_start_ms=F.col("t0"), t_end_ms=F.col("t1"))


def check_assignments(
    events: DataFrame,
    intervals: DataFrame | None = None,
    timeline: DataFrame | None = None,
    universe: DataFrame | None = None,
    bounds: DataFrame | None = None,
    incarnations: Incarnations | None = None,
) -> DataFrame:
    """``invalid_assignment`` and ``unbalanced_assignment`` rows at each settle point.

    ``incarnations`` (topics created or deleted during the run, :mod:`analysis.topics`):
    a partition is expected at a settle point only while its incarnation
    exists there, and an assignment names topics (as the members and the
    coordinator do): a member's latest completed assignment lists the
    incarnation of each name at the settle point.
    """
    iv = intervals if intervals is not None else ownership_intervals_all(events)
    pts = settle_points(events, iv, timeline)
    spans = assignment_spans(events, bounds)
    snap = pts.join(spans, ["protocol", "group"]).where(
        (F.col("s") <= F.col("t")) & (F.col("t") < F.col("e"))
    )
    per_member = snap.select(
        "protocol",
        "group",
        "t",
        "member",
        F.when(F.col("partitions") == "", 0)
        .otherwise(F.size(F.split("partitions", ",")))
        .alias("n"),
    )
    counts = per_member.groupBy("protocol", "group", "t").agg(
        F.min("n").alias("lo"), F.max("n").alias("hi"), F.count("member").alias("members")
    )
    unbalanced = counts.where(F.col("hi") - F.col("lo") > 1)
    unb = _anomaly(
        unbalanced,
        UNBALANCED_ASSIGNMENT,
        t_start_ms=F.col("t"),
        t_end_ms=F.col("t"),
        count=F.col("members"),
        detail=F.concat(
            F.lit("min="), F.col("lo").cast("string"), F.lit(" max="), F.col("hi").cast("string")
        ),
    )
    given = explode_partitions(snap).select(
        "protocol", "group", "t", "topic", "partition", "member"
    )
    universe = universe if universe is not None else partition_universe(events, iv)
    expect = counts.select("protocol", "group", "t").join(universe, ["protocol", "group"])
    if incarnations:
        given = given.withColumn(
            "topic", incarnations.key_col(topic_name_col(F.col("topic")), F.col("t"))
        )
        life = F.broadcast(incarnations.lifetimes_frame())
        expect = (
            expect.join(life, ["protocol", "topic"], "left")
            .where(alive_at(F.col("t")))
            .select(*expect.columns)
        )
    tally = (
        expect.join(given, [*GTP, "t"], "left")
        .groupBy(*GTP, "t")
        .agg(
            F.count("member").alias("n"),
            F.concat_ws(",", F.array_sort(F.collect_set("member"))).alias("who"),
        )
    )
    bad = tally.where(F.col("n") != 1)
    inv = _anomaly(
        bad,
        INVALID_ASSIGNMENT,
        t_start_ms=F.col("t"),
        t_end_ms=F.col("t"),
        count=F.col("n"),
        detail=F.when(F.col("n") == 0, F.lit("unassigned")).otherwise(
            F.concat(F.lit("assigned to "), F.col("who"))
        ),
    )
    return inv.unionByName(unb)


OBSERVATION_SCHEMA: Final = StructType([f for f in ANOMALY_SCHEMA.fields if f.name != "allowed"])
"""The rows of :func:`topic_observations`: the anomaly columns without a verdict."""


def topic_observations(shared: SharedFrames) -> DataFrame:
    """What became of deleted topics' partitions: :data:`OBSERVATION_SCHEMA` rows.

    The kinds are :data:`analysis.topics.OBSERVATION_KINDS` (what each counts is
    there): ``deleted_with_topic`` (records that went with their topic, not
    ``loss``), ``owns_deleted_partition`` (a member's hold past the deletion,
    :func:`analysis.ownership.split_at_incarnations`),
    ``processes_deleted_partition`` and ``commits_deleted_partition``. Not
    anomalies: no verdict, not in :func:`run_checkers`. Empty for a run
    without ``topic_deleted``.
    """
    sh = shared
    lifetimes, holds = sh.lifetimes, sh.holds
    ev = sh.events
    if lifetimes is None or holds is None:
        empty = ev.sparkSession.createDataFrame([], OBSERVATION_SCHEMA)
        return empty
    gone = _deletions(lifetimes)

    def obs(df: DataFrame, kind: str, **cols: Column) -> DataFrame:
        return _anomaly(df, kind, **cols).drop("allowed")

    lost = lost_ranges(ev, sh.coverage, sh.intervals, sh.groups).join(gone, ["protocol", "topic"])
    deleted = obs(
        lost.where(_went_with_topic()),
        DELETED_WITH_TOPIC,
        t_start_ms=F.col("_deleted"),
        t_end_ms=F.col("_deleted"),
        offset_start=F.col("s"),
        offset_end=F.col("e"),
        count=F.col("e") - F.col("s"),
        detail=F.lit(None),
    )
    held = obs(
        holds, OWNS_DELETED_PARTITION, t_start_ms=F.col("s"), t_end_ms=F.col("e"), count=F.lit(1)
    )
    batches = sh.batches.join(gone, ["protocol", "topic"]).where(F.col("t1") > F.col("_deleted"))
    processed = obs(
        batches,
        PROCESSES_DELETED_PARTITION,
        t_start_ms=F.col("t0"),
        t_end_ms=F.col("t1"),
        offset_start=F.col("os"),
        offset_end=F.col("oe"),
        count=F.col("oe") - F.col("os"),
        detail=F.when(F.col("t0") < F.col("_deleted"), F.lit("in_hand_at_deletion")).otherwise(
            F.lit("started_after_deletion")
        ),
    )
    commits = (
        commits_stored(ev).join(gone, ["protocol", "topic"]).where(F.col("t") >= F.col("_deleted"))
    )
    committed = obs(
        commits,
        COMMITS_DELETED_PARTITION,
        t_start_ms=F.col("t"),
        t_end_ms=F.col("t"),
        offset_end=F.col("off"),
        count=F.lit(1),
    )
    return deleted.unionByName(held).unionByName(processed).unionByName(committed)


def delivery_modes(events: DataFrame) -> dict[str, tuple[str, bool, str]]:
    """Per protocol, ``(commit_mode, allows_loss, guarantee)`` from its ``run_started``.

    Logs without them (older runs) are taken as auto-commit without loss.
    """
    rows = (
        events.where(F.col("kind") == K.RUN_STARTED.value)
        .select(
            "protocol",
            F.get_json_object("detail", "$.commit_mode").alias("mode"),
            F.get_json_object("detail", "$.allows_loss").alias("loss"),
            F.get_json_object("detail", "$.guarantee").alias("guarantee"),
        )
        .collect()
    )
    out: dict[str, tuple[str, bool, str]] = {}
    for r in rows:
        if r["protocol"] is None:
            continue
        out[str(r["protocol"])] = (
            str(r["mode"] or "auto"),
            str(r["loss"]).lower() == "true",
            str(r["guarantee"] or ""),
        )
    return out


def first_conversions(events: DataFrame) -> dict[str, float]:
    """Per protocol (series) of ``events`` (the event table, or the checkers' control
    frame), when its group first held both protocols' rules: its
    first ``group_converted`` event (online migration) or the first start of a
    member speaking the other protocol (``member_protocol``: a group that starts
    mixed, or an upgrade), whichever is earlier; protocols with neither are absent."""
    mixed = F.col("kind") == K.GROUP_CONVERTED.value
    if "member_protocol" in events.columns:
        mixed = mixed | (
            (F.col("kind") == K.CONSUMER_STARTED.value) & F.col("member_protocol").isNotNull()
        )
    rows = events.where(mixed).groupBy("protocol").agg(F.min("t_emu_ms").alias("t")).collect()
    return {str(r["protocol"]): float(r["t"]) for r in rows if r["protocol"] is not None}


def mark_allowed(
    anomalies: DataFrame,
    modes: Mapping[str, tuple[str, bool, str]] | None = None,
    conversions: Mapping[str, float] | None = None,
) -> DataFrame:
    """Set ``allowed`` per protocol, kind and commit mode (:func:`allowed_kinds`).

    ``conversions`` (:func:`first_conversions`): an anomaly that starts at or
    after its protocol's group first mixed or converted is judged by
    :func:`emulator.anomalies.allowed_kinds_converted` (what either protocol
    allows); one before it by the run protocol's rules alone.
    """
    cond: Column = F.lit(False)
    modes = modes or {}
    conversions = conversions or {}
    for proto in sorted(set(ALLOWED) | set(modes) | set(conversions)):
        mode, loss, _g = modes.get(proto, ("auto", False, ""))
        kinds = allowed_kinds(proto, mode, loss)
        mine = F.col("protocol") == proto
        if kinds:
            cond = cond | (mine & F.col("kind").isin(*sorted(kinds)))
        if proto in conversions:
            extra = allowed_kinds_converted(proto, mode, loss) - kinds
            if extra:
                after = F.col("t_start_ms") >= F.lit(conversions[proto])
                cond = cond | (mine & after & F.col("kind").isin(*sorted(extra)))
    return anomalies.withColumn("allowed", cond)


# The event kinds the ownership, group-timeline and assignment logic reads.
_CONTROL_KINDS: Final = (
    *CLAIM_KINDS,
    *RELEASE_KINDS,
    *MEMBER_END_KINDS,
    K.CONSUMER_STARTED.value,
    K.REBALANCE_TRIGGERED.value,
    K.REBALANCE_STARTED.value,
    K.REBALANCE_COMPLETED.value,
    K.REBALANCE_FAILED.value,
    K.GROUP_STATE_CHANGED.value,
    K.MEMBER_REMOVED.value,
    # What tells a member to stop (analysis.timelines.stop_orders).
    K.ACTION_APPLIED.value,
    K.FAULT_INJECTED.value,
    K.RUN_FINISHED.value,
    # When the group converted (online migration: first_conversions).
    K.GROUP_CONVERTED.value,
)
_CONTROL_COLS: Final = (
    "protocol",
    "group",
    "member",
    "member_id",
    "kind",
    "topic",
    "partition",
    "partitions",
    "state",
    "t_emu_ms",
    "node",
    "generation",
    "zxid",
    "reason",
    "detail",
    "member_protocol",
)


class SharedFrames:
    """The intermediate frames several checkers and metrics share, each computed once.

    Each frame is materialized with ``localCheckpoint()`` on first use: its
    lineage is cut, so a checker built on it plans and runs only its own
    stages instead of re-deriving it. The frames are also laid out so that
    the checkers' windows and aggregations over them need no shuffle:

    * the control-plane frames (``control``: the membership, rebalance and
      ownership events; ownership intervals; group timeline; partition
      universe; unowned spans; run bounds) hold a few rows per partition and
      rebalance, so they are kept in one Spark partition (``SinglePartition``
      satisfies every clustering requirement);
    * the data-plane frames (``batches``: processed batches; ``coverage``: offset
      segments) scale with the events and stay distributed, hash-partitioned by
      ``(protocol, topic, partition)`` (``spark.sql.shuffle.partitions`` partitions).
      A checkpoint forgets that partitioning (Spark plans its rows as
      ``UnknownPartitioning``), so every checker on them would shuffle their
      millions of rows again. With ``persist=True`` they are cached instead,
      which keeps it; the owner then calls :meth:`release` when done (the
      cache is not freed by the JVM's garbage collection, as checkpoints are).

    One partition for the control plane is the scaling assumption: those frames
    grow with partitions x rebalances (tens of thousands of rows for a
    tens-of-millions-event run), not with produced or processed messages.

    The many tiny stages of the original plans (~100 per run, each a scheduler
    round trip) were what cost the time, not the data.
    """

    def __init__(self, events: DataFrame, *, persist: bool = False) -> None:
        self.raw_events = events
        self.persist = persist
        self._persisted: list[DataFrame] = []
        self._keyed: DataFrame | None = None
        self._incarnations: Incarnations | None = None
        self._cache: dict[str, DataFrame] = {}
        self._modes: dict[str, tuple[str, bool, str]] | None = None
        self._conversions: dict[str, float] | None = None

    @property
    def incarnations(self) -> Incarnations:
        """The topics' incarnations (:class:`analysis.topics.Incarnations`), read once."""
        if self._incarnations is None:
            self._incarnations = Incarnations.of(self.raw_events)
        return self._incarnations

    @property
    def events(self) -> DataFrame:
        """The events keyed by topic incarnation (:meth:`analysis.topics.Incarnations.keyed`):
        what every checker and metric reads; the given events when no topic was created again."""
        if self._keyed is None:
            self._keyed = self.incarnations.keyed(self.raw_events)
        return self._keyed

    @property
    def lifetimes(self) -> DataFrame | None:
        """:meth:`analysis.topics.Incarnations.lifetimes_frame`; ``None`` without topic events."""
        if not self.incarnations:
            return None
        return self._get("lifetimes", self.incarnations.lifetimes_frame)

    def _get(
        self, name: str, build: Callable[[], DataFrame], by: list[str] | None = None
    ) -> DataFrame:
        df = self._cache.get(name)
        if df is None:
            spark = self.events.sparkSession
            sc = spark.sparkContext
            sc.setJobDescription(f"checkers: {name}")
            try:
                built = build()
                if by is None:
                    # An adaptive plan's checkpoint forgets its partitioning: say it again
                    # (a no-op coalesce of one partition, no shuffle).
                    df = built.coalesce(1).localCheckpoint().coalesce(1)
                else:
                    n = int(spark.conf.get("spark.sql.shuffle.partitions") or "8")
                    built = built.repartition(n, *by)
                    if self.persist:
                        # A cached table keeps its hash partitioning (a checkpoint
                        # forgets it), so the windows, aggregations and joins on
                        # ``by`` read it without shuffling it again.
                        df = built.persist(StorageLevel.MEMORY_AND_DISK)
                        self._persisted.append(df)
                        df.count()
                    else:
                        df = built.localCheckpoint()
            finally:
                # pyspark types the value as str, but None is what clears it.
                sc.setJobDescription(None)  # type: ignore[arg-type]
            self._cache[name] = df
        return df

    def release(self) -> None:
        """Unpersist the frames cached with ``persist`` (the others are the
        JVM's to free); the frames read after this are computed again."""
        for df in self._persisted:
            df.unpersist()
        self._persisted.clear()
        self._cache.clear()

    @property
    def delivery_modes(self) -> dict[str, tuple[str, bool, str]]:
        """:func:`delivery_modes` of the events, read once (the checkers and metrics use it)."""
        if self._modes is None:
            self._modes = delivery_modes(self.events)
        return self._modes

    @property
    def conversions(self) -> dict[str, float]:
        """:func:`first_conversions` of the control events, read once."""
        if self._conversions is None:
            self._conversions = first_conversions(self.control)
        return self._conversions

    @property
    def control(self) -> DataFrame:
        """The events the ownership, timeline and assignment logic reads (few columns)."""
        return self._get(
            "control",
            lambda: self.events.where(F.col("kind").isin(*_CONTROL_KINDS)).select(
                *[c for c in _CONTROL_COLS if c in self.events.columns]
            ),
        )

    @property
    def summary(self) -> DataFrame:
        """:func:`analysis.frames.protocol_summary` (one row per protocol)."""
        return self._get("summary", lambda: protocol_summary(self.events))

    @property
    def bounds(self) -> DataFrame:
        """:func:`run_bounds`, from :attr:`summary`."""
        return self.summary.select("protocol", "t_first", "t_last")

    @property
    def groups(self) -> DataFrame:
        """:func:`protocol_groups`."""
        return self._get("groups", lambda: protocol_groups(self.events))

    @property
    def produced_partitions(self) -> DataFrame:
        """``TP`` of every produced partition."""
        return self._get(
            "produced_partitions",
            lambda: self.events.where(F.col("kind") == K.PRODUCED.value).select(*TP).distinct(),
        )

    @property
    def named(self) -> DataFrame:
        """:func:`analysis.ownership.named_intervals` (the topics' names, uncut)."""
        return self._get("named", lambda: named_intervals(self.control, self.bounds))

    def _split(self) -> tuple[DataFrame, DataFrame]:
        return split_at_incarnations(self.named, self.incarnations.spans_frame())

    @property
    def intervals(self) -> DataFrame:
        """:func:`ownership_intervals_all` (cut at the topics' incarnations, if any)."""
        if self.incarnations:
            return self._get("intervals", lambda: self._split()[0])
        return self._get("intervals", lambda: ownership_intervals_all(self.control, self.bounds))

    @property
    def holds(self) -> DataFrame | None:
        """Holds of deleted partitions (:func:`analysis.ownership.split_at_incarnations`);
        ``None`` without topic events."""
        if not self.incarnations:
            return None
        return self._get("holds", lambda: self._split()[1])

    @property
    def ordered(self) -> DataFrame:
        """:func:`protocol_intervals` of :attr:`intervals`."""
        return self._get("ordered", lambda: protocol_intervals(self.intervals))

    @property
    def effective(self) -> DataFrame:
        """:func:`effective_intervals`."""
        return self._get("effective", lambda: effective_intervals(self.ordered))

    @property
    def batches(self) -> DataFrame:
        """:func:`processed_batches` with a batch id ``bid``."""
        return self._get(
            "batches",
            lambda: processed_batches(self.events).withColumn(
                "bid", F.monotonically_increasing_id()
            ),
            TP,
        )

    @property
    def coverage(self) -> DataFrame:
        """:func:`offset_coverage`."""
        return self._get("coverage", lambda: offset_coverage(self.events, self.batches), TP)

    @property
    def timeline(self) -> DataFrame:
        """:func:`group_timeline`."""
        return self._get(
            "timeline", lambda: group_timeline(self.control, self.intervals, self.bounds)
        )

    @property
    def universe(self) -> DataFrame:
        """:func:`partition_universe`."""
        return self._get(
            "universe",
            lambda: partition_universe(self.events, self.intervals, self.produced_partitions),
        )

    @property
    def gaps(self) -> DataFrame:
        """:func:`unowned_spans`."""
        return self._get(
            "gaps",
            lambda: unowned_spans(
                self.events, self.intervals, self.universe, self.bounds, self.lifetimes
            ),
        )


def run_checkers(events: DataFrame, shared: SharedFrames | None = None) -> DataFrame:
    """Every checker over ``events``: a DataFrame with :data:`ANOMALY_SCHEMA`.

    ``shared``: the intermediate frames, when the caller (the metrics) reuses them.
    """
    sh = shared if shared is not None else SharedFrames(events)
    ev = sh.events  # keyed by topic incarnation (analysis.topics)
    parts = [
        check_double_ownership(ev, sh.ordered),
        check_double_processing(ev, sh.batches),
        check_loss(ev, sh.coverage, sh.intervals, sh.groups, sh.lifetimes),
        check_duplicates(ev, sh.coverage, sh.effective, sh.batches),
        check_commit_by_non_owner(ev, sh.effective, sh.lifetimes, sh.bounds),
        check_stranded(ev, sh.intervals, sh.timeline, sh.gaps),
        check_assignments(
            sh.control,
            sh.intervals,
            sh.timeline,
            sh.universe,
            sh.bounds,
            sh.incarnations if sh.incarnations else None,
        ),
    ]
    if share_series(sh.delivery_modes):
        parts.append(check_double_acquisition(ev))
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return mark_allowed(out, sh.delivery_modes, sh.conversions)
