"""Invariant checkers over a run's events: typed anomaly rows, in Spark.

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
  member epochs; :func:`protocol_intervals`), not the skewed clocks' order;
  where the clocks contradict it, :func:`protocol_order_inversions` says so.
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
  coordinator, if any, not rebalancing).
* ``invalid_assignment``: at a settle point (the group just finished
  rebalancing), a partition the live members' latest completed assignments
  give to no member or to several (``count`` = how many).
* ``unbalanced_assignment``: at a settle point, live members' partition counts
  differ by more than one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

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

from emulator.events import EventKind as K

DOUBLE_OWNERSHIP: Final = "double_ownership"
DOUBLE_PROCESSING: Final = "double_processing"
ORDERING_OVERLAP: Final = "ordering_overlap"
LOSS: Final = "loss"
DUPLICATE: Final = "duplicate"
COMMIT_BY_NON_OWNER: Final = "commit_by_non_owner"
STRANDED_PARTITION: Final = "stranded_partition"
INVALID_ASSIGNMENT: Final = "invalid_assignment"
UNBALANCED_ASSIGNMENT: Final = "unbalanced_assignment"

ANOMALY_KINDS: Final = (
    DOUBLE_OWNERSHIP,
    DOUBLE_PROCESSING,
    ORDERING_OVERLAP,
    LOSS,
    DUPLICATE,
    COMMIT_BY_NON_OWNER,
    STRANDED_PARTITION,
    INVALID_ASSIGNMENT,
    UNBALANCED_ASSIGNMENT,
)

# Why an offset was processed again (the ``detail`` of a duplicate row).
WHY_UNCOMMITTED: Final = "uncommitted_after_revoke"
WHY_ZOMBIE: Final = "zombie"
WHY_CRASH: Final = "redelivered_after_crash"
WHY_OTHER: Final = "other"
# Why produced offsets were never processed (the ``detail`` of a loss row).
LOSS_COMMITTED_BEFORE_PROCESSED: Final = "committed_before_processed"
LOSS_AT_END: Final = "unprocessed_at_end"
LOSS_SKIPPED: Final = "skipped"

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

ALLOWED: Final[Mapping[str, frozenset[str]]] = {
    # The Kafka 0.8 ZooKeeper consumer (at-least-once, no fencing anywhere).
    "zookeeper": frozenset(
        {
            # A consumer whose session expired keeps fetching until its new session
            # (handleNewSession) while another claims its partitions: the zombie.
            DOUBLE_OWNERSHIP,
            DOUBLE_PROCESSING,
            # Auto-commit every auto.commit.interval.ms: work after the last commit is
            # done again by the next owner; the zombie re-does the new owner's work.
            DUPLICATE,
            # Offsets are plain ZooKeeper writes: a zombie's commit is not fenced.
            COMMIT_BY_NON_OWNER,
            # "can't rebalance after N retries": the consumer owns nothing until the
            # next watch event; a crashed consumer's partitions wait for its session.
            STRANDED_PARTITION,
            # Each consumer computes its own share from its own read of the group:
            # views differ mid-change, and a consumer that gave up owns nothing.
            INVALID_ASSIGNMENT,
            # range is per topic; a consumer that gave up holds no share.
            UNBALANCED_ASSIGNMENT,
        }
    ),
    # Classic group protocol, eager (stop-the-world) rebalancing (Kafka 3.9 client).
    "classic-eager": frozenset(
        {
            # A member paused past session.timeout.ms is removed and its partitions
            # given away; it learns only on its next heartbeat/commit (partitions lost).
            DOUBLE_OWNERSHIP,
            DOUBLE_PROCESSING,
            # At-least-once: processed but uncommitted offsets after a lost/revoked
            # partition (auto-commit interval, a crash) are processed again.
            DUPLICATE,
            # A crashed member's partitions wait session.timeout.ms for the coordinator.
            STRANDED_PARTITION,
            # RangeAssignor (the default's first entry) balances per topic only.
            UNBALANCED_ASSIGNMENT,
        }
    ),
    # Classic group protocol, cooperative (incremental) rebalancing.
    "classic-cooperative": frozenset(
        {
            DOUBLE_OWNERSHIP,  # as classic-eager: a removed member learns late
            DOUBLE_PROCESSING,
            DUPLICATE,
            # Revoked partitions are unowned between the first rebalance and the
            # follow-up one; a crashed member's wait for session.timeout.ms.
            STRANDED_PARTITION,
            # The first rebalance's assignment leaves the revoked partitions out
            # until the follow-up rebalance hands them over.
            INVALID_ASSIGNMENT,
            UNBALANCED_ASSIGNMENT,
        }
    ),
    # KIP-848 consumer protocol (server-side assignment, reconciliation).
    "consumer": frozenset(
        {
            # A member fenced after a pause learns on its next heartbeat.
            DOUBLE_OWNERSHIP,
            DOUBLE_PROCESSING,
            DUPLICATE,
            # A revoked partition goes to its new owner on that member's next
            # heartbeat (group.consumer.heartbeat.interval.ms); a crashed member's
            # partitions wait group.consumer.session.timeout.ms.
            STRANDED_PARTITION,
            # Members reconcile one by one: a settled view can miss a partition in
            # flight between its revoker and its new owner.
            INVALID_ASSIGNMENT,
            UNBALANCED_ASSIGNMENT,
        }
    ),
}
"""The anomalies each protocol may show with auto-commit, as Kafka's verifiable_consumer
and Jepsen list them; :func:`allowed_kinds` adjusts them to a run's commit mode.

``ordering_overlap`` is allowed wherever ``double_processing`` is (a zombie
processes beside the new owner), and where a revocation does not wait for the
application (:func:`allowed_kinds`). ``loss`` only where the commit mode
commits records before they are processed (:attr:`DeliveryMode.allows_loss`).
``commit_by_non_owner`` is never allowed for the modern protocols (the
coordinator rejects a commit from a member outside the generation / member
epoch).
"""


SERIES_SEP: Final = "@"
"""An experiment's trials share one event table as series ``<protocol>@<trial id>``."""


def base_protocol(series: str) -> str:
    """The run protocol of a series name (``classic-eager@t1`` -> ``classic-eager``)."""
    return series.split(SERIES_SEP, 1)[0]


def _base_protocol_col() -> Column:
    return F.substring_index(F.col("protocol"), SERIES_SEP, 1)


def allowed_kinds(
    protocol: str, commit_mode: str = "auto", allows_loss: bool = False
) -> frozenset[str]:
    """The anomaly kinds ``protocol`` may show under ``commit_mode`` (:mod:`emulator.delivery`).

    Args:
        protocol: the run protocol (or a series ``<protocol>@<trial>``).
        commit_mode: :attr:`emulator.delivery.DeliveryMode.key` (``auto`` if unknown).
        allows_loss: :attr:`emulator.delivery.DeliveryMode.allows_loss`.
    """
    protocol = base_protocol(protocol)
    kinds = set(ALLOWED.get(protocol, frozenset()))
    if DOUBLE_PROCESSING in kinds:
        kinds.add(ORDERING_OVERLAP)
    if protocol == "zookeeper":
        # closeFetchers: the new owner starts after the message still in hand.
        kinds.add(ORDERING_OVERLAP)
    if protocol == "consumer" and "listener" not in commit_mode:
        # A reconciliation that does not wait for the application.
        kinds.add(ORDERING_OVERLAP)
    if allows_loss:
        kinds.add(LOSS)
    return frozenset(kinds)

TP: Final = ["protocol", "topic", "partition"]
GTP: Final = ["protocol", "group", "topic", "partition"]
BUCKET: Final = 4096  # offsets per bucket in the duplicate range join

_CLAIM_KINDS: Final = (K.OWNERSHIP_CLAIMED.value, K.PARTITIONS_ASSIGNED.value)
_RELEASE_KINDS: Final = (
    K.OWNERSHIP_RELEASED.value,
    K.PARTITIONS_REVOKED.value,
    K.PARTITIONS_LOST.value,
)
_MEMBER_END_KINDS: Final = (
    K.CONSUMER_CRASHED.value,
    K.CONSUMER_STOPPED.value,
    K.ZK_SESSION_EXPIRED.value,
)
# The coordinator's group states in which it is not rebalancing.
_SETTLED_STATES: Final = ("Stable", "Empty", "Dead")


# ------------------------------------------------------------------ helpers


def _who() -> Column:
    """The processing identity :mod:`emulator.summary` uses: member id, else name."""
    return F.coalesce(
        F.when(F.col("member_id") != "", F.col("member_id")),
        F.when(F.col("member") != "", F.col("member")),
        F.lit("?"),
    )


def _mem() -> Column:
    """A member's scenario name (its id when the name is absent)."""
    return F.coalesce(F.col("member"), F.col("member_id"))


def _explode_partitions(df: DataFrame) -> DataFrame:
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


def _union(a: DataFrame, b: DataFrame) -> DataFrame:
    """``a.unionByName(b)``, kept in one partition when both sides are in one.

    A union of single-partition frames has two partitions, so every window or
    aggregation after it would shuffle; coalescing back to one (no shuffle)
    keeps the small control-plane frames of :class:`SharedFrames` shuffle-free.
    """
    u = a.unionByName(b)
    if _single_partition(a) and _single_partition(b):
        return u.coalesce(1)
    return u


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
    pts = iv.select(*keys, "who", F.col("s").alias("t"), F.lit(1).alias("d")).transform(
        _union, iv.select(*keys, "who", F.col("e").alias("t"), F.lit(-1).alias("d"))
    )
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


def _coverage(points: DataFrame, keys: list[str], cols: list[str]) -> DataFrame:
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


def _islands(seg: DataFrame, keys: list[str], flag: Column) -> DataFrame:
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


def protocol_groups(events: DataFrame) -> DataFrame:
    """``(protocol, group)``: the group of each protocol's consumers (first seen)."""
    return (
        events.where(F.col("member").isNotNull() & F.col("group").isNotNull())
        .groupBy("protocol")
        .agg(F.min("group").alias("group"))
    )


# ------------------------------------------------------------- ownership


def _opt(df: DataFrame, name: str, dtype: str) -> Column:
    """Column ``name`` of ``df``, or a typed null when ``df`` lacks it (an older table)."""
    return F.col(name) if name in df.columns else F.lit(None).cast(dtype)


def ownership_changes(events: DataFrame) -> DataFrame:
    """``(protocol, group, member, topic, partition, t, typ, node, okey, ordered, rel)``.

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
      ``partitions_revoked``, not lost), stamped when it happened.
    """
    base = events.select(
        "protocol",
        "group",
        _mem().alias("member"),
        "kind",
        "topic",
        "partition",
        "partitions",
        F.col("t_emu_ms").alias("t"),
        _opt(events, "node", "string").alias("node"),
        F.when(_base_protocol_col() == "zookeeper", _opt(events, "zxid", "long"))
        .otherwise(_opt(events, "generation", "long"))
        .alias("okey"),
        _opt(events, "reason", "string").alias("reason"),
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
    listed = _explode_partitions(
        base.where(F.col("kind").isin(*_CLAIM_KINDS[1:], *_RELEASE_KINDS[1:]))
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
    changes = single.transform(_union, listed).where(F.col("member").isNotNull())
    claimed = changes.where(F.col("typ") == 1).select(*GTP, "member").distinct()
    ends = base.where(F.col("kind").isin(*_MEMBER_END_KINDS)).select(
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
        F.lit(False).alias("rel"),
    )
    # One row per change; an end that is also a lost / expiry is not ordered.
    return (
        changes.transform(_union, wide)
        .groupBy("protocol", "group", "member", "topic", "partition", "t", "typ")
        .agg(
            F.max("node").alias("node"),
            F.max("okey").alias("okey"),
            F.min("ordered").alias("ordered"),
            F.min("rel").alias("rel"),
        )
    )


def ownership_intervals_all(events: DataFrame, bounds: DataFrame | None = None) -> DataFrame:
    """Every ownership interval ``GTP + [member, s, e]`` (open ones end at the last event).

    Also ``node`` (the claimer's node), ``okey`` (the claim's protocol order,
    :func:`ownership_changes`), ``oend`` (the end is ordered before any later
    claim; false for an open interval) and ``rel`` (the end is an explicit release).
    """
    ch = ownership_changes(events)
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
    return starts.join(F.broadcast(bounds), "protocol").select(
        *GTP,
        "member",
        F.col("t").alias("s"),
        F.coalesce(F.col("_end"), F.greatest(F.col("t_last"), F.col("t"))).alias("e"),
        "node",
        "okey",
        F.coalesce(F.col("_oend"), F.lit(False)).alias("oend"),
        F.coalesce(F.col("_rel"), F.lit(False)).alias("rel"),
    )


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
    df = df.withColumn(
        "_next", F.min(F.struct("ps", "member", "node")).over(wr.rangeBetween(1, 1))
    )
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
    return claims.transform(_union, releases)


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


# -------------------------------------------------------------- checkers


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
    wins = busy_windows(iv.withColumnRenamed("member", "who"), GTP)
    j = wins.join(iv, GTP).where((F.col("s") < F.col("w_end")) & (F.col("w_start") < F.col("e")))
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
        _mem().alias("member"),
        _who().alias("who"),
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
    wins = busy_windows(b.select(*TP, "who", F.col("t0").alias("s"), F.col("t1").alias("e")), TP)
    j = wins.join(b, TP).where((F.col("t0") < F.col("w_end")) & (F.col("w_start") < F.col("t1")))
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


def offset_coverage(events: DataFrame) -> DataFrame:
    """``TP + [s, e, prod, proc]``: how often each offset segment was produced and processed."""
    r = events.where(
        F.col("kind").isin(K.PRODUCED.value, K.PROCESSED.value)
        & (F.col("offset_end") > F.col("offset_start"))
    ).select(
        *TP,
        (F.col("kind") == K.PRODUCED.value).alias("_p"),
        "offset_start",
        "offset_end",
    )
    one = F.lit(1).cast("long")
    zero = F.lit(0).cast("long")
    pts = r.select(
        *TP,
        F.col("offset_start").alias("pos"),
        F.when(F.col("_p"), one).otherwise(zero).alias("prod"),
        F.when(F.col("_p"), zero).otherwise(one).alias("proc"),
    ).transform(
        _union,
        r.select(
            *TP,
            F.col("offset_end").alias("pos"),
            F.when(F.col("_p"), -one).otherwise(zero).alias("prod"),
            F.when(F.col("_p"), zero).otherwise(-one).alias("proc"),
        ),
    )
    return _coverage(pts, TP, ["prod", "proc"])


def check_loss(
    events: DataFrame,
    coverage: DataFrame | None = None,
    intervals: DataFrame | None = None,
    groups: DataFrame | None = None,
) -> DataFrame:
    """Produced offset ranges that no member ever processed.

    ``group``: the group that owned the partition (the first by name), else
    the protocol's consumer group.
    """
    cov = coverage if coverage is not None else offset_coverage(events)
    iv = intervals if intervals is not None else ownership_intervals_all(events)
    lost = _islands(cov, TP, (F.col("prod") > 0) & (F.col("proc") == 0))
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
            .when(
                F.col("_last").isNull() | (F.col("s") >= F.col("_last")), F.lit(LOSS_AT_END)
            )
            .otherwise(F.lit(LOSS_SKIPPED)),
        )
    )
    owners = iv.groupBy(*TP).agg(F.min("group").alias("_g"))
    lost = (
        lost.join(owners, TP, "left")
        .join(
            F.broadcast(groups if groups is not None else protocol_groups(events)),
            "protocol",
            "left",
        )
        .withColumn("group", F.coalesce(F.col("_g"), F.col("group")))
    )
    return _anomaly(
        lost,
        LOSS,
        offset_start=F.col("s"),
        offset_end=F.col("e"),
        count=F.col("e") - F.col("s"),
        detail=F.col("_why"),
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
    bb = b.withColumn(
        "bucket",
        F.explode(
            F.sequence(
                F.floor(F.col("os") / BUCKET).cast("long"),
                F.floor((F.col("oe") - 1) / BUCKET).cast("long"),
            )
        ),
    ).where(F.col("oe") > F.col("os"))
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


def check_commit_by_non_owner(events: DataFrame, effective: DataFrame | None = None) -> DataFrame:
    """``offsets_committed`` by a member that was not the partition's current owner."""
    eff = (
        effective if effective is not None else effective_intervals(ownership_intervals_all(events))
    )
    commits = (
        events.where(F.col("kind") == K.OFFSETS_COMMITTED.value)
        .select(
            *GTP,
            _mem().alias("member"),
            F.col("t_emu_ms").alias("t"),
            F.col("offset_end").alias("off"),
        )
        .withColumn("cid", F.monotonically_increasing_id())
    )
    mine = eff.select(
        *GTP, F.col("member").alias("_m"), F.col("s").alias("_s"), F.col("e").alias("_e")
    )
    j = commits.join(mine, GTP, "left").withColumn(
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


def member_timeline(events: DataFrame, intervals: DataFrame) -> DataFrame:
    """Per member change points: ``protocol, group, member, t, alive, reb, owned``.

    ``alive``: started and not stopped or crashed; ``reb``: mid-rebalance on its
    side (started and not yet through its first rebalance, or triggered / started
    and not yet completed or failed); ``owned``:
    partitions it holds. Each row's values hold from ``t`` until the member's next row.
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
            F.lit(0).alias("d_own"),
            F.when(F.col("kind") == K.CONSUMER_STARTED.value, 0).otherwise(2).alias("ord"),
        )
        .where(F.col("alive_v").isNotNull() | F.col("reb_v").isNotNull())
    )
    own = intervals.select(
        "protocol", "group", "member", F.col("s").alias("t"), F.lit(1).alias("d_own")
    ).transform(
        _union,
        intervals.select(
            "protocol", "group", "member", F.col("e").alias("t"), F.lit(-1).alias("d_own")
        ),
    )
    own = own.select(
        "protocol",
        "group",
        "member",
        "t",
        F.lit(None).cast("int").alias("alive_v"),
        F.lit(None).cast("int").alias("reb_v"),
        "d_own",
        F.when(F.col("d_own") < 0, 1).otherwise(3).alias("ord"),
    )
    pts = life.transform(_union, own)
    w = (
        Window.partitionBy("protocol", "group", "member")
        .orderBy("t", "ord")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    return pts.select(
        "protocol",
        "group",
        "member",
        "t",
        "ord",
        F.coalesce(F.last("alive_v", ignorenulls=True).over(w), F.lit(0)).alias("alive"),
        F.coalesce(F.last("reb_v", ignorenulls=True).over(w), F.lit(0)).alias("reb"),
        F.sum("d_own").over(w).alias("owned"),
    )


def group_timeline(
    events: DataFrame, intervals: DataFrame, bounds: DataFrame | None = None
) -> DataFrame:
    """Per group change points: ``protocol, group, t, t_next, live, idle, reb, coord_busy``.

    ``live``: live members; ``idle``: live members owning nothing; ``reb``:
    members mid-rebalance; ``coord_busy``: 1 while the coordinator's group
    state is not Stable/Empty/Dead. Values hold over ``[t, t_next)``.
    """
    mt = member_timeline(events, intervals)
    wm = Window.partitionBy("protocol", "group", "member").orderBy("t", "ord")
    idle = ((F.col("alive") == 1) & (F.col("owned") <= 0)).cast("int")
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
        F.when(F.col("state").isin(*_SETTLED_STATES), 0).otherwise(1).alias("busy"),
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
        mt.transform(_union, st)
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
    return claimed.transform(_union, more).distinct()


def unowned_spans(
    events: DataFrame,
    intervals: DataFrame,
    parts: DataFrame | None = None,
    bounds: DataFrame | None = None,
) -> DataFrame:
    """``GTP + [s, e]``: spans in which a partition had no owner (within the run)."""
    parts = parts if parts is not None else partition_universe(events, intervals)
    bounds = bounds if bounds is not None else run_bounds(events)
    pts = intervals.select(*GTP, F.col("s").alias("t"), F.lit(1).alias("d")).transform(
        _union, intervals.select(*GTP, F.col("e").alias("t"), F.lit(-1).alias("d"))
    )
    first = parts.join(F.broadcast(bounds), "protocol").select(
        *GTP, F.col("t_first").alias("t"), F.lit(0).alias("d")
    )
    pts = pts.transform(_union, first).groupBy(*GTP, "t").agg(F.sum("d").alias("d"))
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
    return _islands(seg.where(F.col("e") >= F.col("s")), GTP, F.col("n") <= 0).where(
        F.col("e") > F.col("s")
    )


def check_stranded(
    events: DataFrame,
    intervals: DataFrame | None = None,
    timeline: DataFrame | None = None,
    gaps: DataFrame | None = None,
) -> DataFrame:
    """Partitions unowned while a live member owns nothing and the group is settled."""
    iv = intervals if intervals is not None else ownership_intervals_all(events)
    gt = timeline if timeline is not None else group_timeline(events, iv)
    bad = _islands(
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
        .select(
            "protocol", "group", "member", "s", F.lit(None).cast("string").alias("partitions")
        )
    )
    ev = events.where(
        F.col("member").isNotNull()
        & F.col("kind").isin(
            K.REBALANCE_COMPLETED.value,
            K.REBALANCE_FAILED.value,
            K.CONSUMER_STOPPED.value,
            K.CONSUMER_CRASHED.value,
        )
    ).select(
        "protocol",
        "group",
        "member",
        F.col("t_emu_ms").alias("s"),
        F.when(F.col("kind") == K.REBALANCE_COMPLETED.value, F.coalesce("partitions", F.lit("")))
        .when(F.col("kind") == K.REBALANCE_FAILED.value, F.lit(""))
        .alias("partitions"),
    ).transform(_union, removed)
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


def check_assignments(
    events: DataFrame,
    intervals: DataFrame | None = None,
    timeline: DataFrame | None = None,
    universe: DataFrame | None = None,
    bounds: DataFrame | None = None,
) -> DataFrame:
    """``invalid_assignment`` and ``unbalanced_assignment`` rows at each settle point."""
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
    given = _explode_partitions(snap).select(
        "protocol", "group", "t", "topic", "partition", "member"
    )
    universe = universe if universe is not None else partition_universe(events, iv)
    expect = counts.select("protocol", "group", "t").join(universe, ["protocol", "group"])
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


def mark_allowed(
    anomalies: DataFrame, modes: Mapping[str, tuple[str, bool, str]] | None = None
) -> DataFrame:
    """Set ``allowed`` per protocol, kind and commit mode (:func:`allowed_kinds`)."""
    cond: Column = F.lit(False)
    modes = modes or {}
    for proto in sorted(set(ALLOWED) | set(modes)):
        mode, loss, _g = modes.get(proto, ("auto", False, ""))
        kinds = allowed_kinds(proto, mode, loss)
        if kinds:
            cond = cond | ((F.col("protocol") == proto) & F.col("kind").isin(*sorted(kinds)))
    return anomalies.withColumn("allowed", cond)


# The event kinds the ownership, group-timeline and assignment logic reads.
_CONTROL_KINDS: Final = (
    *_CLAIM_KINDS,
    *_RELEASE_KINDS,
    *_MEMBER_END_KINDS,
    K.CONSUMER_STARTED.value,
    K.REBALANCE_TRIGGERED.value,
    K.REBALANCE_STARTED.value,
    K.REBALANCE_COMPLETED.value,
    K.REBALANCE_FAILED.value,
    K.GROUP_STATE_CHANGED.value,
    K.MEMBER_REMOVED.value,
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

    One partition for the control plane is the scaling assumption: those frames
    grow with partitions x rebalances (tens of thousands of rows for a
    tens-of-millions-event run), not with produced or processed messages.

    The many tiny stages of the original plans (~100 per run, each a scheduler
    round trip) were what cost the time, not the data.
    """

    def __init__(self, events: DataFrame) -> None:
        self.events = events
        self._cache: dict[str, DataFrame] = {}
        self._modes: dict[str, tuple[str, bool, str]] | None = None

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
                    built = built.coalesce(1)
                else:
                    n = int(spark.conf.get("spark.sql.shuffle.partitions") or "8")
                    built = built.repartition(n, *by)
                df = built.localCheckpoint()
                if by is None:
                    # An adaptive plan's checkpoint forgets its partitioning: say it again
                    # (a no-op coalesce of one partition, no shuffle).
                    df = df.coalesce(1)
            finally:
                sc.setJobDescription(None)  # type: ignore[arg-type]
            self._cache[name] = df
        return df

    @property
    def delivery_modes(self) -> dict[str, tuple[str, bool, str]]:
        """:func:`delivery_modes` of the events, read once (the checkers and metrics use it)."""
        if self._modes is None:
            self._modes = delivery_modes(self.events)
        return self._modes

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
    def bounds(self) -> DataFrame:
        """:func:`run_bounds`."""
        return self._get("bounds", lambda: run_bounds(self.events))

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
    def intervals(self) -> DataFrame:
        """:func:`ownership_intervals_all`."""
        return self._get("intervals", lambda: ownership_intervals_all(self.control, self.bounds))

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
        return self._get("coverage", lambda: offset_coverage(self.events), TP)

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
            lambda: unowned_spans(self.events, self.intervals, self.universe, self.bounds),
        )


def run_checkers(events: DataFrame, shared: SharedFrames | None = None) -> DataFrame:
    """Every checker over ``events``: a DataFrame with :data:`ANOMALY_SCHEMA`.

    ``shared``: the intermediate frames, when the caller (the metrics) reuses them.
    """
    sh = shared if shared is not None else SharedFrames(events)
    parts = [
        check_double_ownership(events, sh.ordered),
        check_double_processing(events, sh.batches),
        check_loss(events, sh.coverage, sh.intervals, sh.groups),
        check_duplicates(events, sh.coverage, sh.effective, sh.batches),
        check_commit_by_non_owner(events, sh.effective),
        check_stranded(events, sh.intervals, sh.timeline, sh.gaps),
        check_assignments(sh.control, sh.intervals, sh.timeline, sh.universe, sh.bounds),
    ]
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return mark_allowed(out, sh.delivery_modes)
