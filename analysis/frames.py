"""Spark building blocks the checkers and the metrics share: keys, columns, sweeps.

Offsets are half-open ranges swept with window functions (:func:`sweep_coverage`,
:func:`islands`, :func:`merge_equal`), time intervals are swept the same way (:func:`busy_windows`,
the Spark form of :func:`emulator.intervals.overlap_windows`), and
:func:`union_frames` keeps the small control-plane frames in one partition.
"""

from __future__ import annotations

from typing import Final

from pyspark.sql import Column, DataFrame, Row, Window
from pyspark.sql import functions as F

from emulator.anomalies import SERIES_SEP
from emulator.events import EventKind as K

TP: Final = ["protocol", "topic", "partition"]
"""The keys of one partition's offsets (the data plane)."""
GTP: Final = ["protocol", "group", "topic", "partition"]
"""The keys of one partition's ownership within a group (the control plane)."""


HASH_COL: Final = "_key_hash"
"""The column :func:`with_key_hash` adds."""


def with_key_hash(df: DataFrame, keys: list[str]) -> DataFrame:
    """``df`` with :data:`HASH_COL`, a 64-bit hash of ``keys``, for :func:`hashed`."""
    return df.withColumn(HASH_COL, F.xxhash64(*keys))


def hashed(keys: list[str]) -> list[str]:
    """A window's partition keys led by :data:`HASH_COL` (:func:`with_key_hash`).

    The keys still part the rows (a hash collision cannot merge two), and the
    sort's prefix, its first key, then tells most rows apart by a long instead
    of by comparing strings (the protocol names share their first 8 bytes).
    Still clustered by ``keys``: a frame hash-partitioned by them is not
    shuffled again.
    """
    return [HASH_COL, *keys]


def base_protocol_col() -> Column:
    """The run protocol of the ``protocol`` column (:func:`emulator.anomalies.base_protocol`)."""
    return F.substring_index(F.col("protocol"), SERIES_SEP, 1)


def who_col() -> Column:
    """The processing identity :mod:`emulator.summary` uses: member id, else name."""
    return F.coalesce(
        F.when(F.col("member_id") != "", F.col("member_id")),
        F.when(F.col("member") != "", F.col("member")),
        F.lit("?"),
    )


def member_col() -> Column:
    """A member's scenario name (its id when the name is absent)."""
    return F.coalesce(F.col("member"), F.col("member_id"))


def explode_partitions(df: DataFrame) -> DataFrame:
    """Rows with a ``partitions`` list 'topic:p,topic:p' -> one row per partition."""
    tp = F.explode(F.split(F.coalesce(F.col("partitions"), F.lit("")), ","))
    out = df.withColumn("_tp", tp).where(F.col("_tp") != "")
    return out.withColumn("topic", F.regexp_extract("_tp", r"^(.*):(\d+)$", 1)).withColumn(
        "partition", F.regexp_extract("_tp", r"^(.*):(\d+)$", 2).cast("long")
    )


def run_bounds(events: DataFrame) -> DataFrame:
    """``(protocol, t_first, t_last)``: the emulated time each protocol's events span."""
    return events.groupBy("protocol").agg(
        F.min("t_emu_ms").alias("t_first"), F.max("t_emu_ms").alias("t_last")
    )


def _single_partition(df: DataFrame) -> bool:
    """Whether ``df``'s physical plan yields one partition (planning only, no job)."""
    try:
        qe = df._jdf.queryExecution()
        return int(qe.executedPlan().outputPartitioning().numPartitions()) == 1
    except Exception:  # a plan Spark cannot describe: assume the general case
        return False


def union_frames(a: DataFrame, b: DataFrame) -> DataFrame:
    """``a.unionByName(b)``, kept in one partition when both sides are in one.

    A union of single-partition frames has two partitions, so every window or
    aggregation after it would shuffle; coalescing back to one (no shuffle)
    keeps the small control-plane frames of :class:`SharedFrames` shuffle-free.
    """
    u = a.unionByName(b)
    if _single_partition(a) and _single_partition(b):
        return u.coalesce(1)
    return u


def busy_windows(iv: DataFrame, keys: list[str]) -> DataFrame:
    """Maximal windows in which two or more distinct ``who`` hold an interval.

    Args:
        iv: ``keys + [who, s, e]``, one row per interval (``e > s``).
        keys: the columns that separate independent timelines.

    Returns:
        ``keys + [w_start, w_end]``, windows of positive length; the same
        windows :func:`emulator.intervals.overlap_windows` finds
        (ends before starts at the same instant).
    """
    # An exact pre-filter, one sort and one window pass: only an interval that
    # overlaps another for a positive length can be in a window, and one does
    # when it starts before an interval sorted ahead of it (by start, then end)
    # has ended, or the next one starts before it ends. The rest (all of them,
    # in a run without anomalies) are dropped here; the windows stay the same,
    # as nothing else is held where a dropped interval is.
    ahead = Window.partitionBy(*hashed(keys)).orderBy("s", "e")
    over = F.coalesce(
        F.col("s") < F.max("e").over(ahead.rowsBetween(Window.unboundedPreceding, -1)),
        F.lit(False),
    ) | F.coalesce(F.lead("s").over(ahead) < F.col("e"), F.lit(False))
    iv = (
        with_key_hash(iv, keys)
        .withColumn("_over", over)
        .where(F.col("_over"))
        .drop("_over", HASH_COL)
    )
    pts = endpoints(iv, [*keys, "who"], "s", "e", "t")
    g = pts.groupBy(*keys, "who", "t", "d").agg(F.count(F.lit(1)).alias("n"))
    w_who = (
        Window.partitionBy(*keys, "who")
        .orderBy("t", "d")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    g = g.withColumn("_act", F.sum(F.col("d") * F.col("n")).over(w_who))
    g = g.withColumn("_before", F.col("_act") - F.col("d") * F.col("n"))
    g = g.withColumn(
        "dd",
        F.when((F.col("_before") == 0) & (F.col("_act") > 0), 1)
        .when((F.col("_before") > 0) & (F.col("_act") == 0), -1)
        .otherwise(0),
    )
    h = g.where(F.col("dd") != 0).groupBy(*keys, "t", "d").agg(F.sum("dd").alias("dd"))
    w = Window.partitionBy(*keys).orderBy("t", "d")
    h = h.withColumn(
        "_n", F.sum("dd").over(w.rowsBetween(Window.unboundedPreceding, Window.currentRow))
    )
    h = h.withColumn("_on", F.col("_n") >= 2)
    h = h.withColumn("_prev_on", F.coalesce(F.lag("_on").over(w), F.lit(False)))
    # Only the transitions (on -> off, off -> on) matter and they alternate, so a
    # window opened at a start closes at the next transition. (A "first later
    # row that is off" over an unbounded-following frame is quadratic in Spark.)
    tr = h.where(F.col("_on") != F.col("_prev_on"))
    tr = tr.withColumn("_next_off", F.lead("t").over(w))
    starts = tr.where(F.col("_on"))
    return starts.select(
        *keys, F.col("t").alias("w_start"), F.col("_next_off").alias("w_end")
    ).where(F.col("w_end") > F.col("w_start"))


def sweep_coverage(points: DataFrame, keys: list[str], cols: list[str]) -> DataFrame:
    """Sweep offset boundaries: ``keys + [s, e] + cols`` coverage per elementary segment.

    ``points`` has ``keys + [pos] + cols`` deltas; the result has each
    column's running sum over ``[s, e)``.
    """
    agg = points.groupBy(*keys, "pos").agg(*[F.sum(c).alias(c) for c in cols])
    w = Window.partitionBy(*keys).orderBy("pos")
    run = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    out = agg.select(
        *keys,
        F.col("pos").alias("s"),
        F.lead("pos").over(w).alias("e"),
        *[F.sum(c).over(run).alias(c) for c in cols],
    )
    return out.where(F.col("e").isNotNull())


def endpoints(df: DataFrame, keep: list[str], start: str, end: str, at: str) -> DataFrame:
    """``keep + [at, d]``: each row's ``start`` with ``d = 1`` and its ``end`` with
    ``d = -1``, the points a sweep sums.

    Both from one pass over ``df`` (a union of two selects would compute ``df``,
    a window over millions of rows, twice).
    """
    ends = F.array(
        F.struct(F.col(start).alias(at), F.lit(1).alias("d")),
        F.struct(F.col(end).alias(at), F.lit(-1).alias("d")),
    )
    return df.select(*keep, F.explode(ends).alias("_pt")).select(*keep, f"_pt.{at}", "_pt.d")


def merge_equal(seg: DataFrame, keys: list[str], cols: list[str], apart: Column) -> DataFrame:
    """Merge contiguous segments ``keys + [s, e] + cols`` whose ``cols`` are equal.

    A segment where ``apart`` holds is kept as it is (not merged with its
    neighbours), so that what reads those segments one by one still sees them.
    The result covers the same offsets with the same values: the sweep of a
    run without anomalies (every offset produced once and processed once)
    becomes one segment per partition instead of one per batch.
    """
    w = Window.partitionBy(*keys).orderBy("s")
    new = F.coalesce(F.lag("e").over(w) != F.col("s"), F.lit(True)) | apart
    for c in cols:
        new = new | (F.lag(c).over(w) != F.col(c))
    grp = F.sum(new.cast("long")).over(w.rowsBetween(Window.unboundedPreceding, Window.currentRow))
    return (
        seg.withColumn("_grp", grp)
        .groupBy(*keys, "_grp")
        .agg(F.min("s").alias("s"), F.max("e").alias("e"), *[F.min(c).alias(c) for c in cols])
        .drop("_grp")
    )


def islands(seg: DataFrame, keys: list[str], flag: Column) -> DataFrame:
    """Merge contiguous segments ``keys + [s, e]`` where ``flag`` holds into ranges."""
    w = Window.partitionBy(*keys).orderBy("s")
    df = seg.withColumn("_f", flag)
    df = df.withColumn(
        "_grp",
        F.sum(F.when(F.col("_f"), 0).otherwise(1)).over(
            w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
        ),
    )
    return (
        df.where(F.col("_f"))
        .groupBy(*keys, "_grp")
        .agg(F.min("s").alias("s"), F.max("e").alias("e"))
        .drop("_grp")
    )


#: The coordinator's membership and assignment events (the metrics' ``coordinator_requests``).
COORDINATOR_KINDS: Final = (
    K.MEMBER_JOINED.value,
    K.MEMBER_REMOVED.value,
    K.GROUP_STATE_CHANGED.value,
    K.TARGET_ASSIGNMENT.value,
)
#: The kinds :func:`protocol_summary` counts, each in a column named by its kind.
SUMMARY_COUNTED: Final = (
    K.REBALANCE_STARTED,
    K.ATTEMPT_STARTED,
    K.CLAIM_CONFLICT,
    K.REBALANCE_BACKOFF,
    K.REBALANCE_FAILED,
    K.REQUEST_ERROR,
    K.COMMIT_FAILED,
)


def protocol_summary(events: DataFrame) -> DataFrame:
    """One row per protocol, from one pass over the events.

    Columns: ``t_first``, ``t_last`` (:func:`run_bounds`); ``t_start`` (the
    first ``consumer_started``) and ``t_finished`` (the last ``run_finished``),
    the episodes' bounds; and the metrics' totals:
    ``events``, the ``produced`` and ``processed`` messages (offset ranges
    summed), a count per kind of :data:`SUMMARY_COUNTED`,
    ``coordinator_requests`` (:data:`COORDINATOR_KINDS`),
    ``membership_changes`` (consumers started, stopped, crashed) and the
    ZooKeeper operations ``zk_reads``, ``zk_writes``, ``zk_watches``.

    The run bounds, the metrics and the episodes each read these from a scan
    of every event; one aggregation gives them all. Every aggregate here has a
    fixed-width buffer, so Spark aggregates in a hash map: one string ``min``
    (the group) would turn it into a sort of every event (11 s instead of
    1 s at 10 M events), so :func:`protocol_groups` stays a pass of its own.
    """
    kind = F.col("kind")
    t = F.col("t_emu_ms")
    size = F.col("offset_end") - F.col("offset_start")

    def total(flag: Column, value: Column | int = 1) -> Column:
        return F.sum(F.when(flag, value).otherwise(0)).cast("long")

    changes = (K.CONSUMER_STARTED.value, K.CONSUMER_STOPPED.value, K.CONSUMER_CRASHED.value)
    return events.groupBy("protocol").agg(
        F.min(t).alias("t_first"),
        F.max(t).alias("t_last"),
        F.min(F.when(kind == K.CONSUMER_STARTED.value, t)).alias("t_start"),
        F.max(F.when(kind == K.RUN_FINISHED.value, t)).alias("t_finished"),
        F.count(F.lit(1)).alias("events"),
        total(kind == K.PRODUCED.value, size).alias("produced"),
        total(kind == K.PROCESSED.value, size).alias("processed"),
        *[total(kind == k.value).alias(k.value) for k in SUMMARY_COUNTED],
        total(kind.isin(*COORDINATOR_KINDS)).alias("coordinator_requests"),
        total(kind.isin(*changes)).alias("membership_changes"),
        *[
            F.coalesce(F.sum(c), F.lit(0)).cast("long").alias(c)
            for c in ("zk_reads", "zk_writes", "zk_watches")
        ],
    )


def protocol_groups(events: DataFrame) -> DataFrame:
    """``(protocol, group)``: the group of each protocol's consumers (first seen)."""
    return (
        events.where(F.col("member").isNotNull() & F.col("group").isNotNull())
        .groupBy("protocol")
        .agg(F.min("group").alias("group"))
    )


def optional_col(df: DataFrame, name: str, dtype: str) -> Column:
    """Column ``name`` of ``df``, or a typed null when ``df`` lacks it (an older table)."""
    return F.col(name) if name in df.columns else F.lit(None).cast(dtype)


def spread_aggs(col: str) -> list[Column]:
    """``p50``, ``p99`` and ``max`` of ``col`` (Spark's exact ``percentile``),
    for a ``groupBy().agg`` whose rows :func:`spread` reads back."""
    return [
        F.expr(f"percentile({col}, 0.5)").alias("p50"),
        F.expr(f"percentile({col}, 0.99)").alias("p99"),
        F.max(col).alias("max"),
    ]


def spread(row: Row, count: int) -> dict[str, float | int]:
    """``{count, p50, p99, max}`` from a row aggregated with :func:`spread_aggs`."""
    return {
        "count": count,
        "p50": float(row["p50"]),
        "p99": float(row["p99"]),
        "max": float(row["max"]),
    }
