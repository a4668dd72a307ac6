"""What each protocol cost, per protocol, from its events (Spark).

:func:`compute_metrics` returns a JSON-able dict keyed by protocol; the plot
frames (:func:`ownership_intervals`, :func:`throughput_lag`,
:func:`rebalance_durations`, :func:`fault_marks`) are small DataFrames a
report can ``toPandas()``. Only small per-protocol aggregates are collected.

Definitions (the event log is the record; times are emulated ms):

* ``rebalances``: ``rebalance_started`` events, as :mod:`emulator.summary`
  counts them (a legacy consumer's ``syncedRebalance`` runs; a modern
  member's join rounds plus the coordinator's); ``group_rebalances``: times the
  group went from settled to rebalancing (see below).
* a group is *settled* when no live member is mid-rebalance on its side (a new
  member until its first rebalance ends, or from ``rebalance_triggered`` /
  ``rebalance_started`` to ``rebalance_completed`` / ``rebalance_failed``) and
  the coordinator's group state, if any, is Stable, Empty or Dead.
  ``rebalance_ms``: the length of each unsettled span, trigger to settled.
* ``stop_the_world_partition_s``: partition-seconds with no owner while at
  least one live consumer exists.
* ``pause_ms``: per member, time it was idle (live, owning nothing, not
  closing, not claiming: :func:`analysis.timelines.member_timeline`) while
  the group was unsettled (an eager member from its revoke to the completed
  rebalance that gives it partitions).
* ``zk_*``: ZooKeeper reads and writes of the legacy rebalance attempts and
  watch notifications, also per membership change (consumer started, stopped
  or crashed): the herd effect.
* ``coordinator_requests``: group operations the coordinator logged (members
  joined and removed, state changes, target assignments); the event log holds
  no per-request record, so this counts what changed, not every heartbeat.
* ``protocol_order_inversions``: places where two nodes' clocks contradict
  the protocol's order of a partition's owners (ZooKeeper czxids, generations,
  member epochs; :func:`analysis.ownership.protocol_order_inversions`):
  ``claims`` (a claim stamped before one the protocol orders first),
  ``releases`` (a release stamped after the next owner's claim), ``count``
  (both) and ``largest_ms``, a lower bound of the clock skew the run saw.
  The checkers order such owners by the protocol, not as double ownership.
* ``topics`` (only for a run whose topics were created or deleted,
  :func:`topic_metrics`): incarnations created and deleted, and what became
  of the deleted ones' partitions (records deleted with their topic, holds,
  batches and commits after the deletion). Partitions are keyed by topic
  incarnation throughout (:mod:`analysis.topics`).
* ``migration`` (only for a run whose members switched group protocol or
  whose group converted, :mod:`analysis.migration`): the mixed window, each
  member's switch, the conversions and what the switch cost.
* ``share`` (only for a share group's series, :mod:`analysis.share`): deliveries
  and redeliveries by cause, records acknowledged, archived and released, lock
  expiries, every produced record's fate, produce-to-acknowledge latency;
  ``work_queue`` (every series, when one of them is a share group's): records
  processed, processed again, never processed, produce-to-processed latency,
  by one definition for consumer and share groups.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, Row, Window
from pyspark.sql import functions as F

from analysis import episodes as epi
from analysis import kafka_metrics as km
from analysis.checkers import SharedFrames, run_checkers, topic_observations
from analysis.frames import islands, protocol_summary, spread, spread_aggs
from analysis.migration import migration_metrics, migration_series
from analysis.ownership import (
    HOLD_CARRIED_OVER,
    HOLD_TO_END,
    ownership_intervals_all,
    protocol_order_inversions,
)
from analysis.share import ShareTimeline, share_metrics, share_series, work_queue_metrics
from analysis.timelines import group_timeline, member_timeline
from analysis.topics import (
    COMMITS_DELETED_PARTITION,
    DELETED_WITH_TOPIC,
    OWNS_DELETED_PARTITION,
    PROCESSES_DELETED_PARTITION,
)
from emulator.anomalies import (
    ANOMALY_KINDS,
    DOUBLE_OWNERSHIP,
    DOUBLE_PROCESSING,
    DUPLICATE,
    LOSS,
    ORDERING_OVERLAP,
    base_protocol,
)
from emulator.events import EventKind as K

# ------------------------------------------------------------- plot frames


def ownership_intervals(events: DataFrame, shared: SharedFrames | None = None) -> DataFrame:
    """``protocol, topic, partition, member, t_start_ms, t_end_ms, group``: who owned what when.

    ``shared``: the checkers' intermediate frames, when already computed.
    """
    iv = shared.intervals if shared is not None else ownership_intervals_all(events)
    return iv.select(
        "protocol",
        "topic",
        "partition",
        "member",
        F.col("s").alias("t_start_ms"),
        F.col("e").alias("t_end_ms"),
        "group",
    )


def throughput_lag(events: DataFrame, bucket_ms: float = 1000.0) -> DataFrame:
    """``protocol, t_ms, produced, processed, lag`` per time bucket.

    ``produced`` / ``processed``: messages in the bucket (processing counted each
    time); ``lag``: produced so far minus processed so far, at least 0.
    """
    r = events.where(F.col("kind").isin(K.PRODUCED.value, K.PROCESSED.value)).select(
        "protocol",
        (F.floor(F.col("t_emu_ms") / bucket_ms) * bucket_ms).cast("double").alias("t_ms"),
        F.when(F.col("kind") == K.PRODUCED.value, F.col("offset_end") - F.col("offset_start"))
        .otherwise(0)
        .alias("p"),
        F.when(F.col("kind") == K.PROCESSED.value, F.col("offset_end") - F.col("offset_start"))
        .otherwise(0)
        .alias("q"),
    )
    b = r.groupBy("protocol", "t_ms").agg(
        F.sum("p").cast("long").alias("produced"), F.sum("q").cast("long").alias("processed")
    )
    w = (
        Window.partitionBy("protocol")
        .orderBy("t_ms")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    lag = F.sum("produced").over(w) - F.sum("processed").over(w)
    return b.select(
        "protocol",
        "t_ms",
        "produced",
        "processed",
        F.greatest(lag, F.lit(0)).cast("long").alias("lag"),
    )


def _unsettled_spans(
    events: DataFrame, intervals: DataFrame, timeline: DataFrame | None = None
) -> DataFrame:
    gt = timeline if timeline is not None else group_timeline(events, intervals)
    spans = gt.select(
        "protocol",
        "group",
        F.col("t").alias("s"),
        F.col("t_next").alias("e"),
        "reb",
        "coord_busy",
    )
    return islands(
        spans, ["protocol", "group"], (F.col("reb") > 0) | (F.col("coord_busy") > 0)
    ).where(F.col("e") > F.col("s"))


def rebalance_durations(
    events: DataFrame, intervals: DataFrame | None = None, shared: SharedFrames | None = None
) -> DataFrame:
    """``protocol, t_ms, duration_ms``: each group rebalance, trigger to settled.

    ``shared``: the checkers' intermediate frames, when already computed.
    """
    if shared is not None:
        u = _unsettled_spans(events, shared.intervals, shared.timeline)
    else:
        iv = intervals if intervals is not None else ownership_intervals_all(events)
        u = _unsettled_spans(events, iv)
    return u.select(
        "protocol",
        F.col("s").alias("t_ms"),
        (F.col("e") - F.col("s")).alias("duration_ms"),
    )


def fault_marks(events: DataFrame) -> DataFrame:
    """``protocol, t_ms, reason, member``: faults, their end, crashes and session expiries."""
    kinds = (
        K.FAULT_INJECTED.value,
        K.FAULT_CLEARED.value,
        K.CONSUMER_CRASHED.value,
        K.BROKER_CRASHED.value,
        K.ZK_SESSION_EXPIRED.value,
    )
    ev = events.where(F.col("kind").isin(*kinds))
    reason = (
        F.when(F.col("kind") == K.FAULT_INJECTED.value, F.col("reason"))
        .when(F.col("kind") == K.FAULT_CLEARED.value, F.concat(F.col("reason"), F.lit(" cleared")))
        .otherwise(F.col("kind"))
    )
    who = F.coalesce(
        F.col("member"),
        F.when(F.col("broker").isNotNull(), F.concat(F.lit("broker-"), F.col("broker"))),
    )
    return ev.select(
        "protocol", F.col("t_emu_ms").alias("t_ms"), reason.alias("reason"), who.alias("member")
    )


# ------------------------------------------------------------------ metrics


def _overlap(a_s: str, a_e: str, b_s: str, b_e: str) -> Column:
    return F.greatest(
        F.least(F.col(a_e), F.col(b_e)) - F.greatest(F.col(a_s), F.col(b_s)), F.lit(0.0)
    )


def compute_metrics(
    events: DataFrame,
    anomalies: DataFrame | None = None,
    shared: SharedFrames | None = None,
    requests: Mapping[str, Sequence[tuple[float, int]]] | None = None,
    lag_rows: Sequence[Mapping[str, Any]] | None = None,
    bucket_ms: float = 1000.0,
) -> dict[str, dict[str, Any]]:
    """Every metric, per protocol (see the module docstring for definitions).

    Args:
        events: the event table (:func:`analysis.schema.spark_schema`).
        anomalies: :func:`analysis.checkers.run_checkers`'s result, if already computed.
        shared: the checkers' intermediate frames (:class:`analysis.checkers.SharedFrames`
            of ``events``), to reuse those ``run_checkers`` already materialized.
        requests: per protocol, the coordinators' cumulative request counts
            snapshotted after each change (:func:`request_snapshots`), for the
            episodes' ``coordinator_requests``.
        lag_rows: :func:`throughput_lag`'s rows at ``bucket_ms``, when the caller
            collected them already (the report's throughput plot).
        bucket_ms: the lag buckets' width.

    Returns:
        ``{protocol: {metric: value}}``, JSON-able.
    """
    sh = shared if shared is not None else SharedFrames(events)
    an = anomalies if anomalies is not None else run_checkers(events, sh)
    iv = sh.intervals
    gt = sh.timeline
    # One aggregation gives the run bounds, the groups and these totals.
    ours = events is sh.raw_events or events is sh.events
    base = sh.summary if ours else protocol_summary(events)
    out: dict[str, dict[str, Any]] = {}
    for r in base.collect():
        d = r.asDict()
        p = str(d["protocol"])
        changes = int(d["membership_changes"])
        zk_ops = int(d["zk_reads"]) + int(d["zk_writes"])
        out[p] = {
            "events": int(d["events"]),
            "duration_ms": float((d["t_last"] or 0.0) - (d["t_first"] or 0.0)),
            "produced": int(d["produced"]),
            "processed": int(d["processed"]),
            "duplicates": 0,
            "duplicates_by_cause": {},
            "loss": 0,
            "loss_by_cause": {},
            "rebalances": int(d[K.REBALANCE_STARTED.value]),
            "group_rebalances": 0,
            "attempts": int(d[K.ATTEMPT_STARTED.value]),
            "conflicts": int(d[K.CLAIM_CONFLICT.value]),
            "retries": int(d[K.REBALANCE_BACKOFF.value]),
            "gave_up": int(d[K.REBALANCE_FAILED.value]),
            "request_errors": int(d[K.REQUEST_ERROR.value]),
            "commit_failures": int(d[K.COMMIT_FAILED.value]),
            "coordinator_requests": int(d["coordinator_requests"]),
            "membership_changes": changes,
            "zk_reads": int(d["zk_reads"]),
            "zk_writes": int(d["zk_writes"]),
            "zk_watches": int(d["zk_watches"]),
            "zk_ops_per_change": (zk_ops / changes) if changes else 0.0,
            "zk_watches_per_change": (int(d["zk_watches"]) / changes) if changes else 0.0,
            "rebalance_ms": {"count": 0, "p50": 0.0, "p99": 0.0, "max": 0.0},
            "stop_the_world_partition_s": 0.0,
            "pause_ms": {},
            "pause_ms_total": 0.0,
            "pause_ms_max": 0.0,
            "double_ownership": {"count": 0, "total_ms": 0.0, "longest_ms": 0.0},
            "double_processing": {"count": 0, "total_ms": 0.0, "longest_ms": 0.0},
            "ordering_overlap": {"count": 0, "total_ms": 0.0, "longest_ms": 0.0},
            "anomalies": {k: 0 for k in ANOMALY_KINDS},
            "anomalies_not_allowed": 0,
            "protocol_order_inversions": {
                "count": 0,
                "claims": 0,
                "releases": 0,
                "largest_ms": 0.0,
            },
        }

    # Clocks that contradict the protocol's order of a partition's owners.
    inv = (
        protocol_order_inversions(sh.ordered)
        .groupBy("protocol")
        .agg(
            F.count(F.lit(1)).alias("count"),
            F.sum(F.when(F.col("what") == "claim", 1).otherwise(0)).cast("long").alias("claims"),
            F.max("inversion_ms").alias("largest"),
        )
    )
    for r in inv.collect():
        m = out.get(str(r["protocol"]))
        if m is not None:
            m["protocol_order_inversions"] = {
                "count": int(r["count"]),
                "claims": int(r["claims"]),
                "releases": int(r["count"]) - int(r["claims"]),
                "largest_ms": float(r["largest"] or 0.0),
            }

    # The commit mode and the delivery guarantee it gives (run_started).
    for proto, (mode, loss, guarantee) in sh.delivery_modes.items():
        m = out.get(proto)
        if m is not None:
            m["commit_mode"] = mode
            m["loss_possible"] = loss
            m["delivery_guarantee"] = guarantee

    # Anomaly-derived numbers (one small aggregate), duplicates and loss by
    # cause (the rows' detail).
    dur = F.col("t_end_ms") - F.col("t_start_ms")
    why = F.when(F.col("kind").isin(DUPLICATE, LOSS), F.coalesce(F.col("detail"), F.lit("?")))
    agg = an.groupBy("protocol", "kind", why.alias("why")).agg(
        F.count(F.lit(1)).alias("rows"),
        F.coalesce(F.sum("count"), F.lit(0)).cast("long").alias("n"),
        F.coalesce(F.sum(dur), F.lit(0.0)).alias("total"),
        F.coalesce(F.max(dur), F.lit(0.0)).alias("longest"),
        F.sum(F.when(~F.col("allowed"), 1).otherwise(0)).cast("long").alias("bad"),
    )
    for r in agg.collect():
        m = out.get(str(r["protocol"]))
        if m is None:
            continue
        k = str(r["kind"])
        m["anomalies"][k] += int(r["rows"])
        m["anomalies_not_allowed"] += int(r["bad"])
        if k in (DUPLICATE, LOSS):
            m["duplicates" if k == DUPLICATE else "loss"] += int(r["n"])
            m["duplicates_by_cause" if k == DUPLICATE else "loss_by_cause"][str(r["why"])] = int(
                r["n"]
            )
        elif k in (DOUBLE_OWNERSHIP, DOUBLE_PROCESSING, ORDERING_OVERLAP):
            m[k] = {
                "count": int(r["rows"]),
                "total_ms": float(r["total"]),
                "longest_ms": float(r["longest"]),
            }

    # Topics created or deleted during the run (analysis.topics).
    for proto, summary in topic_metrics(sh).items():
        m = out.get(proto)
        if m is not None:
            m["topics"] = summary

    # Rebalance durations, trigger to settled.
    uns_all = _unsettled_spans(events, iv, gt).localCheckpoint()
    rd = uns_all.select(
        "protocol", F.col("s").alias("t_ms"), (F.col("e") - F.col("s")).alias("duration_ms")
    )
    stats = rd.groupBy("protocol").agg(
        F.count(F.lit(1)).alias("count"), *spread_aggs("duration_ms")
    )
    for r in stats.collect():
        m = out.get(str(r["protocol"]))
        if m is not None:
            m["group_rebalances"] = int(r["count"])
            m["rebalance_ms"] = spread(r, int(r["count"]))

    # Online migration: the mixed window, each member's switch (analysis.migration).
    series = migration_series(sh.control, sh.conversions)
    for proto, summary in migration_metrics(events, series, iv, uns_all, an).items():
        m = out.get(proto)
        if m is not None:
            m["migration"] = summary

    # Share groups: what became of each record (analysis.share).
    shared_metrics, share_timelines = share_metrics(sh.events, share_series(out))
    for proto, summary in shared_metrics.items():
        m = out.get(proto)
        if m is not None:
            m["share"] = summary
    # Beside a share group, every series as a work queue (analysis.share).
    if shared_metrics:
        for proto, summary in work_queue_metrics(sh.events, sorted(out)).items():
            out[proto]["work_queue"] = summary

    # Stop-the-world: unowned partition time while any consumer is live.
    live = islands(
        gt.select("protocol", "group", F.col("t").alias("s"), F.col("t_next").alias("e"), "live"),
        ["protocol", "group"],
        F.col("live") > 0,
    ).select("protocol", "group", F.col("s").alias("ls"), F.col("e").alias("le"))
    gaps = sh.gaps
    stw = (
        gaps.join(live, ["protocol", "group"])
        .select("protocol", _overlap("s", "e", "ls", "le").alias("ms"))
        .groupBy("protocol")
        .agg(F.sum("ms").alias("ms"))
    )
    for r in stw.collect():
        m = out.get(str(r["protocol"]))
        if m is not None:
            m["stop_the_world_partition_s"] = float(r["ms"] or 0.0) / 1000.0

    # Per-member pause: idle (live, owning nothing, not on its way out, not about
    # to claim its new assignment) while the group is unsettled.
    mt = member_timeline(sh.control, iv)
    wm = Window.partitionBy("protocol", "group", "member").orderBy("t", "ord")
    bounds = sh.bounds
    mspans = (
        mt.withColumn("e", F.lead("t").over(wm))
        .join(F.broadcast(bounds), "protocol")
        .select(
            "protocol",
            "group",
            "member",
            F.col("t").alias("s"),
            F.coalesce(F.col("e"), F.col("t_last")).alias("e"),
            "idle",
        )
        .where((F.col("idle") == 1) & (F.col("e") > F.col("s")))
    )
    uns = uns_all.select("protocol", "group", F.col("s").alias("us"), F.col("e").alias("ue"))
    pause = (
        mspans.join(uns, ["protocol", "group"])
        .select("protocol", "member", _overlap("s", "e", "us", "ue").alias("ms"))
        .groupBy("protocol", "member")
        .agg(F.sum("ms").alias("ms"))
    )
    for r in pause.collect():
        m = out.get(str(r["protocol"]))
        if m is not None and r["ms"]:
            m["pause_ms"][str(r["member"])] = float(r["ms"])
    for m in out.values():
        vals = list(m["pause_ms"].values())
        m["pause_ms"] = dict(sorted(m["pause_ms"].items()))
        m["pause_ms_total"] = float(sum(vals))
        m["pause_ms_max"] = float(max(vals)) if vals else 0.0

    # What each membership change cost (analysis.episodes), and Kafka's metric names.
    hists = episode_histories(events, sh, an, bucket_ms, requests, lag_rows, share_timelines)
    for proto, hist in hists.items():
        m = out.get(proto)
        if m is not None:
            m["episodes"] = [e.to_dict() for e in epi.episodes(hist)]
    for proto, named in kafka_named_metrics(events, hists).items():
        m = out.get(proto)
        if m is not None:
            m["kafka_metrics"] = named
    return out


def topic_metrics(shared: SharedFrames) -> dict[str, dict[str, Any]]:
    """Per protocol whose run created or deleted a topic: what became of them.

    ``created`` / ``deleted``: incarnations created (``topic_created``) and
    deleted (``topic_deleted``) during the run; then the observations of
    :func:`analysis.checkers.topic_observations`: ``deleted_with_topic``
    (records that went with their topic, not counted as ``loss``),
    ``owns_deleted_partition`` (holds of deleted partitions: ``count``,
    ``total_ms``, ``longest_ms``, and how many were ``carried_over`` into a new
    incarnation or ``held_to_end``), ``processes_deleted_partition`` (records
    processed after their incarnation's deletion) and
    ``commits_deleted_partition`` (commits stored after it). Protocols without
    topic events get no entry.
    """
    sh = shared
    out: dict[str, dict[str, Any]] = {}
    for life in sh.incarnations.spans:
        d = out.setdefault(
            life.protocol,
            {
                "created": 0,
                "deleted": 0,
                DELETED_WITH_TOPIC: 0,
                OWNS_DELETED_PARTITION: {
                    "count": 0,
                    "total_ms": 0.0,
                    "longest_ms": 0.0,
                    HOLD_CARRIED_OVER: 0,
                    HOLD_TO_END: 0,
                },
                PROCESSES_DELETED_PARTITION: 0,
                COMMITS_DELETED_PARTITION: 0,
            },
        )
        d["created"] += int(life.created is not None)
        d["deleted"] += int(life.deleted is not None)
    if not out:
        return out
    dur = F.col("t_end_ms") - F.col("t_start_ms")
    agg = (
        topic_observations(sh)
        .groupBy("protocol", "kind", "detail")
        .agg(
            F.count(F.lit(1)).alias("rows"),
            F.coalesce(F.sum("count"), F.lit(0)).cast("long").alias("n"),
            F.coalesce(F.sum(dur), F.lit(0.0)).alias("total"),
            F.coalesce(F.max(dur), F.lit(0.0)).alias("longest"),
        )
    )
    for r in agg.collect():
        found = out.get(str(r["protocol"]))
        if found is None:
            continue
        d = found
        k = str(r["kind"])
        if k == OWNS_DELETED_PARTITION:
            held = d[k]
            held["count"] += int(r["rows"])
            held["total_ms"] += float(r["total"])
            held["longest_ms"] = max(held["longest_ms"], float(r["longest"]))
            if r["detail"] in (HOLD_CARRIED_OVER, HOLD_TO_END):
                held[str(r["detail"])] += int(r["rows"])
        elif k == COMMITS_DELETED_PARTITION:
            d[k] += int(r["rows"])
        else:
            d[k] += int(r["n"])
    return out


def kafka_named_metrics(
    events: DataFrame, hists: Mapping[str, epi.History]
) -> dict[str, dict[str, Any]]:
    """Per protocol, :func:`analysis.kafka_metrics.kafka_metrics` of its run."""
    from emulator.modern.errors import Errors

    kind = F.col("kind")
    rows = (
        events.where(
            F.col("member").isNotNull()
            & kind.isin(
                K.REBALANCE_STARTED.value,
                K.REBALANCE_COMPLETED.value,
                K.REBALANCE_FAILED.value,
                K.REQUEST_ERROR.value,
            )
        )
        .select("protocol", "member", "kind", "t_emu_ms", "duration_ms", "detail", "reason")
        .orderBy("protocol", "t_emu_ms")
        .collect()
    )
    states = (
        events.where((kind == K.GROUP_STATE_CHANGED.value) & F.col("member").isNull())
        .select("protocol", "group", "t_emu_ms", "state", "generation", "reason")
        .orderBy("protocol", "t_emu_ms")
        .collect()
    )
    retriable = {e.name for e in Errors if e.retriable} | {"REQUEST_TIMED_OUT"}
    steps: dict[str, list[km.Step]] = {}
    errors: dict[str, int] = {}
    for r in rows:
        p, k = str(r["protocol"]), r["kind"]
        if k == K.REQUEST_ERROR.value:
            if r["detail"] in ("join", "sync"):
                errors[p] = errors.get(p, 0) + 1
            elif r["detail"] == "ConsumerGroupHeartbeat" and r["reason"] not in retriable:
                steps.setdefault(p, []).append(km.Step(str(r["member"]), "fatal", r["t_emu_ms"]))
            continue
        what = {
            K.REBALANCE_STARTED.value: "started",
            K.REBALANCE_COMPLETED.value: "completed",
            K.REBALANCE_FAILED.value: "failed",
        }[k]
        steps.setdefault(p, []).append(
            km.Step(str(r["member"]), what, float(r["t_emu_ms"]), r["duration_ms"], r["detail"])
        )
    out: dict[str, dict[str, Any]] = {}
    for p, h in hists.items():
        group_states = [
            km.GroupState(float(r["t_emu_ms"]), str(r["state"]), r["generation"], r["reason"])
            for r in states
            if r["protocol"] == p and r["state"] is not None
        ]
        owned: dict[str, int] = {}
        for o in h.owned:
            if o.s <= h.t_end < o.e or (o.e == h.t_end and o.s < h.t_end and not o.released):
                owned[o.member] = owned.get(o.member, 0) + 1
        out[p] = km.kafka_metrics(
            p, steps.get(p, []), errors.get(p, 0), group_states, owned, h.t_start, h.t_end
        )
    return out


# ----------------------------------------------------------------- episodes

_MARK_KINDS = (
    K.COMMIT_FAILED.value,
    K.GROUP_STATE_CHANGED.value,
    K.ATTEMPT_FINISHED.value,
    K.MEMBER_REMOVED.value,
    K.REBALANCE_TRIGGERED.value,
    K.REBALANCE_STARTED.value,
)


def request_snapshots(manifest: Mapping[str, Any]) -> dict[str, list[tuple[float, int]]]:
    """Per protocol, ``(t_emu_ms, requests so far)`` from the manifest's coordinator snapshots.

    The orchestrator records the coordinators' request counters by kind after
    each change it applies and at the end of the timeline
    (``protocols.<p>.resources.coordinator``); empty for the 0.8 consumer.
    """
    out: dict[str, list[tuple[float, int]]] = {}
    for proto, entry in (manifest.get("protocols") or {}).items():
        snaps = ((entry or {}).get("resources") or {}).get("coordinator") or []
        rows = []
        for s in snaps:
            try:
                total = sum(int(v) for v in (s.get("requests_by_kind") or {}).values())
                rows.append((float(s["t_emu_ms"]), total))
            except (KeyError, TypeError, ValueError):
                continue
        if rows:
            out[str(proto)] = sorted(rows)
    return out


TOPIC_ACTIONS = ("create_topic", "delete_topic")
"""Timeline actions about a topic (their ``detail`` names it): their episodes get the topic."""


def _changes(rows: Sequence[Row], cleared: Sequence[Row]) -> list[epi.Change]:
    """The orchestrator's applied actions as changes; timed faults with their clear time."""
    out: list[epi.Change] = []
    for r in rows:
        if r["state"] == "skipped" or r["reason"] in (None, "producer_stopped"):
            continue
        params: dict[str, Any] = {}
        if r["detail"]:
            try:
                loaded = json.loads(r["detail"])
                params = loaded if isinstance(loaded, dict) else {}
            except ValueError:
                params = {}
        listed = params.get("members") or ([r["member"]] if r["member"] else [])
        members = tuple(str(m) for m in listed)
        action = str(r["reason"])
        t = float(r["t"])
        clear: float | None = None
        if action in epi.TIMED_ACTIONS:
            ends = [
                float(c["t"])
                for c in cleared
                if c["reason"] == action and c["member"] in members and float(c["t"]) >= t
            ]
            if ends:
                clear = min(ends)
            elif params.get("duration_s") is not None:
                clear = t + float(params["duration_s"]) * 1000.0
        index = params.get("event_index")
        topic = params.get("topic") if action in TOPIC_ACTIONS else None
        out.append(
            epi.Change(
                t,
                action,
                members,
                int(index) if index is not None else None,
                clear,
                str(topic) if topic is not None else None,
            )
        )
    return out


def episode_histories(
    events: DataFrame,
    shared: SharedFrames,
    anomalies: DataFrame,
    bucket_ms: float = 1000.0,
    requests: Mapping[str, Sequence[tuple[float, int]]] | None = None,
    lag_rows: Sequence[Mapping[str, Any]] | None = None,
    share: Mapping[str, ShareTimeline] | None = None,
) -> dict[str, epi.History]:
    """Per protocol, the :class:`analysis.episodes.History` of its group (small collects).

    ``lag_rows``: :func:`throughput_lag`'s rows at ``bucket_ms`` if already
    collected; otherwise they are computed here. ``share``: the share series'
    :data:`analysis.share.ShareTimeline` (:func:`analysis.share.share_metrics`).
    """
    sh = shared
    groups = {str(r["protocol"]): r["group"] for r in sh.groups.collect()}
    hist: dict[str, epi.History] = {}
    ours = events is sh.raw_events or events is sh.events
    bounds = (sh.summary if ours else protocol_summary(events)).collect()
    for r in bounds:
        p = str(r["protocol"])
        if p not in groups or r["t_start"] is None:
            continue
        finished = r["t_finished"]
        hist[p] = epi.History(
            protocol=p,
            t_start=float(r["t_start"]),
            t_end=float(finished if finished is not None else r["t_last"]),
            bucket_ms=bucket_ms,
            complete=finished is not None,
            requests=list((requests or {}).get(p, [])),
        )
    if not hist:
        return hist
    in_group = F.col("group").isNull() | F.create_map(
        *[x for p, g in groups.items() for x in (F.lit(p), F.lit(g))]
    )[F.col("protocol")].eqNullSafe(F.col("group"))
    orch = events.where(
        (F.col("actor") == "orchestrator")
        & F.col("kind").isin(K.ACTION_APPLIED.value, K.FAULT_INJECTED.value)
    ).select("protocol", F.col("t_emu_ms").alias("t"), "reason", "member", "state", "detail")
    cleared = events.where(F.col("kind") == K.FAULT_CLEARED.value).select(
        "protocol", F.col("t_emu_ms").alias("t"), "reason", "member"
    )
    by_p: dict[str, list[Any]] = {}
    for r in orch.collect():
        by_p.setdefault(str(r["protocol"]), []).append(r)
    clears: dict[str, list[Any]] = {}
    for r in cleared.collect():
        clears.setdefault(str(r["protocol"]), []).append(r)
    h: epi.History | None
    for p, h in hist.items():
        h.changes = _changes(sorted(by_p.get(p, []), key=lambda r: r["t"]), clears.get(p, []))
    for r in sh.timeline.where(in_group).orderBy("protocol", "t").collect():
        h = hist.get(str(r["protocol"]))
        if h is not None:
            h.segments.append(
                epi.Segment(
                    float(r["t"]),
                    float(r["t_next"]),
                    int(r["live"] or 0),
                    int(r["idle"] or 0),
                    int(r["reb"] or 0),
                    int(r["coord_busy"] or 0),
                )
            )
    for r in (
        sh.intervals.where(in_group)
        .select("protocol", "topic", "partition", "member", "s", "e", "rel")
        .collect()
    ):
        h = hist.get(str(r["protocol"]))
        if h is not None:
            h.owned.append(
                epi.Owned(
                    f"{r['topic']}:{r['partition']}",
                    str(r["member"]),
                    float(r["s"]),
                    float(r["e"]),
                    bool(r["rel"]),
                )
            )
    for r in sh.gaps.where(in_group).select("protocol", "topic", "partition", "s", "e").collect():
        h = hist.get(str(r["protocol"]))
        if h is not None:
            h.gaps.append(epi.Span(f"{r['topic']}:{r['partition']}", float(r["s"]), float(r["e"])))
    for r in anomalies.select(
        "protocol", "kind", "detail", "topic", "partition", "t_start_ms", "t_end_ms", "count"
    ).collect():
        h = hist.get(str(r["protocol"]))
        if h is None or r["t_start_ms"] is None:
            continue
        s = float(r["t_start_ms"])
        e = float(r["t_end_ms"]) if r["t_end_ms"] is not None else s
        if r["kind"] == DOUBLE_OWNERSHIP and base_protocol(h.protocol) != "share":
            # A share group's members share partitions by design: not a disturbance.
            h.doubled.append(epi.Span(f"{r['topic']}:{r['partition']}", s, e))
        h.anomalies.append(epi.AnomalyRow(str(r["kind"]), r["detail"], s, e, int(r["count"] or 0)))
    produced: dict[str, list[float]] = {}
    if lag_rows is None:
        lag_rows = [
            r.asDict()
            for r in throughput_lag(events, bucket_ms).orderBy("protocol", "t_ms").collect()
        ]
    for lr in sorted(lag_rows, key=lambda r: (str(r["protocol"]), float(r["t_ms"]))):
        h = hist.get(str(lr["protocol"]))
        if h is not None:
            h.lag.append((float(lr["t_ms"]), float(lr["lag"])))
            produced.setdefault(h.protocol, []).append(float(lr["produced"] or 0))
    for p, h in hist.items():
        rows = produced.get(p) or []
        busy = [x for x in rows if x > 0]  # buckets while the producer ran
        h.produced_per_bucket = sum(busy) / len(busy) if busy else 0.0
    kind = F.col("kind")
    marks = events.where(kind.isin(*_MARK_KINDS) & in_group).select(
        "protocol",
        F.col("t_emu_ms").alias("t"),
        F.when(kind == K.COMMIT_FAILED.value, F.lit("commit_failed"))
        .when(kind == K.GROUP_STATE_CHANGED.value, F.lit("generation"))
        .when(kind == K.ATTEMPT_FINISHED.value, F.lit("zk_ops"))
        .when(kind == K.MEMBER_REMOVED.value, F.lit("member_removed"))
        .when(kind == K.REBALANCE_STARTED.value, F.lit("rebalance_started"))
        .otherwise(F.lit("rebalance"))
        .alias("what"),
        F.when(kind == K.GROUP_STATE_CHANGED.value, F.col("generation").cast("double"))
        .when(
            kind == K.ATTEMPT_FINISHED.value,
            (
                F.coalesce(F.col("zk_reads"), F.lit(0)) + F.coalesce(F.col("zk_writes"), F.lit(0))
            ).cast("double"),
        )
        .otherwise(F.lit(1.0))
        .alias("n"),
        "member",
    )
    # A coordinator's own rebalance_started has no member: it is not a member's reaction.
    marks = marks.where(
        ~F.col("what").isin("rebalance", "rebalance_started") | F.col("member").isNotNull()
    ).where((F.col("what") != "generation") | F.col("n").isNotNull())
    for r in marks.orderBy("protocol", "t").collect():
        h = hist.get(str(r["protocol"]))
        if h is not None:
            h.marks.append(epi.Mark(float(r["t"]), str(r["what"]), float(r["n"]), r["member"]))
    # Topics created or deleted during the run, and the holds of deleted partitions.
    for life in sh.incarnations.spans:
        h = hist.get(life.protocol)
        if h is not None:
            h.topics.append(epi.TopicLife(life.key, life.topic, life.created, life.deleted))
    if sh.holds is not None:
        for r in (
            sh.holds.where(in_group)
            .select("protocol", "topic", "partition", "member", "s", "e", "detail")
            .collect()
        ):
            h = hist.get(str(r["protocol"]))
            if h is not None:
                h.holds.append(
                    epi.Hold(
                        f"{r['topic']}:{r['partition']}",
                        str(r["member"]),
                        float(r["s"]),
                        float(r["e"]),
                        str(r["detail"]),
                    )
                )
    for p, (counts, acks) in (share or {}).items():
        h = hist.get(p)
        if h is not None:
            h.share, h.share_counts, h.share_acks = True, counts, acks
    return hist
