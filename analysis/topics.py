"""Topics coming and going: which incarnation of a topic each event is about.

A topic deleted and created again under the same name is a new *incarnation*
(its offsets start from 0 again; Kafka's topic id from 2.8, KIP-516; the
emulator numbers them, :mod:`zk_registry.topics`). Offset 5 of incarnation 1
and offset 5 of incarnation 2 are different records, so every checker and
metric keys a partition by its incarnation. The events that are about a
partition (``produced``, ``processed``, ``offsets_committed``, claims, partition
lists ...) do not carry ``incarnation``; only the controller's ``topic_created``
and ``topic_deleted`` do. The rules (analysis choices, not Kafka behaviour):

* **Incarnation of an event**: the incarnation of the latest ``topic_created``
  of its topic (in its protocol's run) stamped at or before the event's
  ``t_emu_ms``. Before a topic's first ``topic_created``: the incarnation
  before that one, at least 1: the run's own topics exist from the start,
  have incarnation 1 and no ``topic_created`` (``BrokerController._learn_incarnations``
  announces only the topics someone created during the run). A ``topic_created``
  or ``topic_deleted`` is of the incarnation it names. Two controllers (a
  failover) announcing the same incarnation count once, at the earliest.
* **The key**: incarnation 1 keeps the topic's name (``t``), incarnation
  ``n >= 2`` is ``t#n`` (:func:`topic_key`), in the ``topic`` column and in
  every ``partitions`` list (``t#2:0``), so every checker, sweep and metric
  that keys by ``(protocol, topic, partition)`` keys by the incarnation, and
  every output names it. ``#`` is not a legal character of a Kafka topic name
  (K@0.8.2.2 ``kafka/common/Topic.scala`` ``legalChars``), so the key never
  collides with a name and :func:`topic_name_col` gives the name back.
  A run without a re-created topic keeps every name: its events are the
  same table (:meth:`Incarnations.keyed` returns it unchanged).
* **Lifetime**: an incarnation lives from its ``topic_created`` (from the
  start for the run's own topics) to its ``topic_deleted`` (to the end when
  it is not deleted). Between its deletion and the next creation the name
  belongs to the deleted incarnation, which is *dead*: events in that span
  (a claim, a commit, a batch still in hand) are about a partition that no
  longer exists.
* **Ownership is by name** (:func:`analysis.ownership.split_at_incarnations`):
  the 0.8 consumer's owner znode is ``/consumers/<g>/owners/<topic>/<p>``
  (K@0.8.2.2 ``ZookeeperConsumerConnector.reflectPartitionOwnershipDecision``)
  and the classic protocol assigns names: a re-created topic with the same
  partition count does not even trigger a rebalance (K@3.9
  ``ConsumerCoordinator.MetadataSnapshot.matches`` compares partitions per
  topic name). So an ownership interval is built from a member's claims and
  releases of the name, then cut at the incarnations' lifetimes: the part in
  an incarnation's lifetime is an interval of that incarnation, the part in a
  dead span is a hold of a deleted partition (an observation, not an owner),
  and a claim still held when the name is created again goes on as ownership
  of the new incarnation from its creation (*carried over*). KIP-848 assigns
  topic ids, so there the coordinator revokes and assigns explicitly.

Clocks: the incarnation of an event is read on two clocks, the controller's
(``topic_created``) and the event's node's. An event stamped within the skew
of a creation may land in the wrong incarnation; a topic's deletion and its
next creation are normally seconds apart, so only a re-creation within the
skew is at risk. The topic exists once the admin step wrote its znode, a few
ms before the controller's ``topic_created``: a 0.8 consumer's watcher can see
it first, and a claim in that gap counts as a hold of the dead incarnation
carried over at the creation.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from emulator.events import EventKind as K
from emulator.topic_incarnations import (
    INCARNATION_SEP,
    Incarnation,
    incarnations_from_rows,
)

LIFECYCLE_KINDS: Final = (K.TOPIC_CREATED.value, K.TOPIC_DELETED.value)
"""The events that say when an incarnation begins and ends (they carry ``incarnation``)."""

# What the analysis observes of deleted topics (analysis.checkers.topic_observations).
# Not anomalies: Kafka deletes a topic's records with it, and a member learns of a
# deletion only at its next metadata refresh or assignment; these say how much
# and how long.
DELETED_WITH_TOPIC: Final = "deleted_with_topic"
"""Produced records of a deleted incarnation that nobody had processed when it was deleted:
its unprocessed tail, after the last processed offset (``count`` = records). A gap
before that offset (skipped, committed before processed) stays ``loss``."""
OWNS_DELETED_PARTITION: Final = "owns_deleted_partition"
"""A member still held a partition after its incarnation's deletion, or claimed it in
that span (``t_start_ms`` .. ``t_end_ms``: from the deletion, or the claim, until the
member let go, the name was created again, or the run ended; ``count`` = 1;
``detail``: ``released`` | ``carried_over`` | ``held_to_end``)."""
PROCESSES_DELETED_PARTITION: Final = "processes_deleted_partition"
"""A processed batch of a deleted incarnation that ended after its deletion (``count`` =
records; ``detail``: ``in_hand_at_deletion`` when it began before it, else
``started_after_deletion``)."""
COMMITS_DELETED_PARTITION: Final = "commits_deleted_partition"
"""An ``offsets_committed`` of a deleted incarnation stored at or after its deletion
(``count`` = 1, ``offset_end`` = the offset); not judged as ``commit_by_non_owner``."""
OBSERVATION_KINDS: Final = (
    DELETED_WITH_TOPIC,
    OWNS_DELETED_PARTITION,
    PROCESSES_DELETED_PARTITION,
    COMMITS_DELETED_PARTITION,
)

SPAN_SCHEMA: Final = StructType(
    [
        StructField("protocol", StringType(), True),
        StructField("topic", StringType(), True),
        StructField("key", StringType(), True),
        StructField("incarnation", LongType(), True),
        StructField("start", DoubleType(), True),
        StructField("end", DoubleType(), True),
        StructField("created", DoubleType(), True),
        StructField("deleted", DoubleType(), True),
    ]
)
""":meth:`Incarnations.spans_frame`: one row per incarnation (see :class:`Incarnation`)."""

LIFETIME_SCHEMA: Final = StructType(
    [
        StructField("protocol", StringType(), True),
        StructField("topic", StringType(), True),
        StructField("created", DoubleType(), True),
        StructField("deleted", DoubleType(), True),
    ]
)
""":meth:`Incarnations.lifetimes_frame`: ``topic`` is the key; null ``created``: from the
start, null ``deleted``: to the end."""


def topic_key_col(name: Column, incarnation: Column) -> Column:
    """:func:`topic_key` as a Column (null name: null)."""
    return F.when(
        incarnation >= 2, F.concat(name, F.lit(INCARNATION_SEP), incarnation.cast("string"))
    ).otherwise(name)


def topic_name_col(topic: Column) -> Column:
    """The topic's name of a key column (``t#2`` -> ``t``; a name stays)."""
    return F.regexp_replace(topic, f"{INCARNATION_SEP}[0-9]+$", "")


class Incarnations:
    """Every topic's incarnations, per protocol, from the lifecycle events.

    Built once per event table by :meth:`of` (one small collect: the
    ``topic_created`` and ``topic_deleted`` rows); falsy when the run has none,
    and then nothing downstream changes.
    """

    def __init__(self, spans: Iterable[Incarnation], spark: SparkSession | None = None) -> None:
        self.spans: tuple[Incarnation, ...] = tuple(
            sorted(spans, key=lambda s: (s.protocol, s.topic, s.incarnation))
        )
        self._spark = spark

    @classmethod
    def of(cls, events: DataFrame) -> Incarnations:
        """The incarnations the events' ``topic_created`` / ``topic_deleted`` describe.

        A table without the schema-3 columns (an older frame) has none.
        """
        if not {"topic", "incarnation", "t_emu_ms", "protocol"} <= set(events.columns):
            return cls((), events.sparkSession)
        rows = (
            events.where(
                F.col("kind").isin(*LIFECYCLE_KINDS)
                & F.col("topic").isNotNull()
                & F.col("incarnation").isNotNull()
            )
            .groupBy("protocol", "topic", "kind", "incarnation")
            .agg(F.min("t_emu_ms").alias("t"))
            .collect()
        )
        return cls.from_rows(
            [
                (
                    str(r["protocol"]),
                    str(r["topic"]),
                    str(r["kind"]),
                    int(r["incarnation"]),
                    float(r["t"]),
                )
                for r in rows
                if r["t"] is not None
            ],
            events.sparkSession,
        )

    @classmethod
    def from_rows(
        cls,
        rows: Iterable[tuple[str, str, str, int, float]],
        spark: SparkSession | None = None,
    ) -> Incarnations:
        """From ``(protocol, topic, kind, incarnation, t)`` lifecycle rows (earliest per kind)."""
        return cls(incarnations_from_rows(rows), spark)

    def __bool__(self) -> bool:
        return bool(self.spans)

    @property
    def renamed(self) -> Sequence[Incarnation]:
        """The incarnations whose key is not the name (``n >= 2``): what :meth:`keyed` rewrites."""
        return [s for s in self.spans if s.incarnation >= 2]

    def incarnation_col(self, topic: Column, t: Column, protocol: Column | None = None) -> Column:
        """The incarnation (long) of a topic name at emulated time ``t``: the module doc's rule."""
        proto = F.col("protocol") if protocol is None else protocol
        out: Column | None = None
        for s in self.renamed:
            cond = (proto == s.protocol) & (topic == s.topic)
            if s.start is not None:
                cond = cond & (t >= s.start)
            if s.end is not None:
                cond = cond & (t < s.end)
            out = (
                F.when(cond, F.lit(s.incarnation))
                if out is None
                else out.when(cond, F.lit(s.incarnation))
            )
        one = F.lit(1).cast("long")
        return one if out is None else out.otherwise(one).cast("long")

    def key_col(self, topic: Column, t: Column, protocol: Column | None = None) -> Column:
        """The key of a topic name's incarnation at ``t`` (:func:`topic_key`)."""
        if not self.renamed:
            return topic
        return topic_key_col(topic, self.incarnation_col(topic, t, protocol))

    def partitions_col(
        self, partitions: Column, t: Column, protocol: Column | None = None
    ) -> Column:
        """A ``'t:0,u:1'`` list with each name replaced by its key at ``t``."""
        proto = F.col("protocol") if protocol is None else protocol
        out = partitions
        for s in self.renamed:
            cond = proto == s.protocol
            if s.start is not None:
                cond = cond & (t >= s.start)
            if s.end is not None:
                cond = cond & (t < s.end)
            # Legal topic characters need no escaping in the replacement; \Q..\E in the pattern.
            swapped = F.regexp_replace(out, rf"(^|,)\Q{s.topic}\E:", f"$1{s.key}:")
            out = F.when(cond, swapped).otherwise(out)
        return out

    def keyed(self, events: DataFrame) -> DataFrame:
        """``events`` with ``topic`` and ``partitions`` naming incarnations (the module doc).

        Returned unchanged (the same DataFrame) when no topic was created again.
        """
        if not self.renamed:
            return events
        t = F.col("t_emu_ms")
        own = F.col("kind").isin(*LIFECYCLE_KINDS) & F.col("incarnation").isNotNull()
        inc = F.when(own, F.col("incarnation")).otherwise(self.incarnation_col(F.col("topic"), t))
        cols = {
            "topic": F.when(F.col("topic").isNull(), F.col("topic")).otherwise(
                topic_key_col(F.col("topic"), inc)
            )
        }
        if "partitions" in events.columns:
            cols["partitions"] = self.partitions_col(F.col("partitions"), t)
        return events.withColumns(cols)

    def _session(self, spark: SparkSession | None) -> SparkSession:
        s = spark or self._spark or SparkSession.getActiveSession()
        if s is None:
            raise RuntimeError("no SparkSession for the incarnations' frames")
        return s

    def spans_frame(self, spark: SparkSession | None = None) -> DataFrame:
        """:data:`SPAN_SCHEMA`: one row per incarnation (one Spark partition)."""
        rows = [
            (s.protocol, s.topic, s.key, s.incarnation, s.start, s.end, s.created, s.deleted)
            for s in self.spans
        ]
        return self._session(spark).createDataFrame(rows, SPAN_SCHEMA).coalesce(1)

    def lifetimes_frame(self, spark: SparkSession | None = None) -> DataFrame:
        """:data:`LIFETIME_SCHEMA`: each incarnation's key, creation and deletion."""
        rows = [(s.protocol, s.key, s.created, s.deleted) for s in self.spans]
        return self._session(spark).createDataFrame(rows, LIFETIME_SCHEMA).coalesce(1)


def alive_at(t: Column) -> Column:
    """Whether the incarnation of a row joined with a lifetime (``created``, ``deleted``) lives at
    ``t``: created at or before it (or from the start), not deleted at or before it."""
    return (F.col("created").isNull() | (F.col("created") <= t)) & (
        F.col("deleted").isNull() | (t < F.col("deleted"))
    )
