"""Share groups (KIP-932): what became of each record, and the one safety rule of its leader.

A share group's records are acquired under locks, acknowledged one by one and
redelivered when released or when a lock runs out (the leader logs every
change as ``share_records``, :mod:`actors.share`). Several members reading one
partition, a record processed twice after its lock expired and records out of
order are what a share group allows (:data:`emulator.anomalies.ALLOWED`); what
it does not allow is checked here:

* :func:`check_double_acquisition`: a record acquired by a member while another
  still held it: the leader's ``acquired`` of an offset that an earlier
  ``acquired`` left without a transition in between (a leader change in
  between ends the earlier one: the new leader starts from the persisted
  state, where an acquisition is never written). Kind ``double_acquisition``,
  never allowed: the share-partition's lock rules it out.

:func:`share_metrics` gives each share series a ``share`` entry in its metrics:

* ``deliveries`` (records acquired, each delivery counted), ``redeliveries``
  (deliveries after a record's first; the leader's ``acquired`` says what had
  made it available again, as its delivery count need not: a session close
  lowers it from 4.1) and ``redeliveries_by_cause`` (``release`` by the application,
  ``lock_expiry``, ``session_close``: its member's share session closed, on a
  leave or a crash's dropped connections; ``failover``), and
  ``redeliveries_after_crash``: those of records whose holder had crashed when
  they came back (by a session close from 4.1, by their locks running out in 4.0);
* ``acknowledged`` (accepted), ``archived`` and ``archived_by_cause``
  (``reject``, ``delivery_limit``: ``group.share.delivery.count.limit``
  deliveries, ``gap``), ``lock_expiries``, ``released`` (records made available
  or archived by the application's release or by a session close);
* ``fates``: every produced record's last state at the end: ``acknowledged``,
  ``archived``, ``in_flight`` (acquired or available again) or
  ``never_delivered`` (produced, never acquired: before the share-partition's
  start offset, or not fetched yet); the four add up to ``produced``: nothing
  is left unexplained;
* ``ack_latency_ms``: from a record's ``produced`` to its ``acknowledged``
  (``p50``, ``p99``, ``max``, ``count``), and ``acknowledged_per_s`` over the
  run (first produce to last acknowledgement);
* ``by_second``: ``[s, what, records]``: per second, records ``redelivered:<cause>``,
  ``archived`` and ``lock_expired`` (the plot's input).

:func:`work_queue_metrics` puts every series of a report that holds a share
series side by side as a work queue (``work_queue``), by one definition for
consumer and share groups alike, from ``produced`` and ``processed``:

* ``records`` (produced), ``processed_records`` (processed at least once),
  ``processed_again`` (processings after a record's first: a consumer group's
  duplicates, a share group's redeliveries that reached the application),
  ``never_processed`` (produced, never processed by the end);
* ``latency_ms``: from a record's ``produced`` to the end of its first
  ``processed`` (``p50``, ``p99``, ``max``, ``count``); ``processed_per_s``:
  records processed the first time per second, from the first produce to the
  last such processing; ``by_second``: ``[s, records, p50 ms, max ms]`` per
  second of first processing (the plot's input).

The same changes and acknowledgements, in time order, are each share series'
:data:`ShareTimeline`: its episodes count them (:mod:`analysis.episodes`).

Time is the leader's ``t_emu_ms``; events of one instant go by their log's
``seq`` (one leader writes a partition's changes).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from analysis.episodes import ShareAcks, ShareCount
from analysis.frames import spread, spread_aggs
from emulator.anomalies import DOUBLE_ACQUISITION, base_protocol
from emulator.events import EventKind as K

__all__ = [
    "DOUBLE_ACQUISITION",
    "ShareTimeline",
    "check_double_acquisition",
    "share_metrics",
    "share_series",
    "work_queue_metrics",
]

_SHARE: Final = K.SHARE_RECORDS.value


def share_series(series: Iterable[str]) -> list[str]:
    """The share-group series among ``series`` (``share`` or ``share@<trial>``)."""
    return sorted(s for s in set(series) if base_protocol(s) == "share")


def _records(events: DataFrame) -> DataFrame:
    """One row per record and change: the ``share_records`` ranges, offset by offset."""
    return events.where(F.col("kind") == _SHARE).select(
        "protocol",
        "group",
        "topic",
        "partition",
        "state",
        "reason",
        "member_id",
        F.col("count").alias("delivery"),
        "detail",
        F.col("t_emu_ms").alias("t"),
        "seq",
        F.explode(F.sequence("offset_start", F.col("offset_end") - 1)).alias("offset"),
    )


def check_double_acquisition(events: DataFrame) -> DataFrame:
    """Records acquired while another acquisition of them was still open (see the module doc).

    Returns rows of :data:`analysis.checkers.ANOMALY_SCHEMA`: one per offending
    acquisition, ``member`` the new holder, ``other_member`` the earlier one,
    ``t_start_ms`` the earlier acquisition, ``t_end_ms`` the new one.
    """
    from analysis.checkers import _anomaly

    rec = _records(events)
    w = Window.partitionBy("protocol", "topic", "partition", "offset").orderBy("t", "seq")
    seq = rec.select(
        "protocol",
        "group",
        "topic",
        "partition",
        "offset",
        "state",
        "member_id",
        "t",
        F.lag("state").over(w).alias("prev_state"),
        F.lag("member_id").over(w).alias("prev_member"),
        F.lag("t").over(w).alias("prev_t"),
    )
    bad = seq.where((F.col("state") == "acquired") & (F.col("prev_state") == "acquired"))
    moves = events.where(F.col("kind") == K.LEADER_CHANGED.value).select(
        "protocol", "topic", "partition", F.col("t_emu_ms").alias("lt")
    )
    reset = bad.join(moves, ["protocol", "topic", "partition"]).where(
        (F.col("lt") >= F.col("prev_t")) & (F.col("lt") <= F.col("t"))
    )
    keys = ["protocol", "topic", "partition", "offset", "t"]
    left = bad.join(reset.select(*keys).distinct(), keys, "left_anti")
    return _anomaly(
        left,
        DOUBLE_ACQUISITION,
        member=F.col("member_id"),
        other_member=F.col("prev_member"),
        t_start_ms=F.col("prev_t"),
        t_end_ms=F.col("t"),
        offset_start=F.col("offset"),
        offset_end=F.col("offset") + 1,
        count=F.lit(1),
        detail=F.lit("acquired while another member held it"),
    )


ShareTimeline = tuple[list[ShareCount], list[ShareAcks]]
"""A share series' state changes and acknowledgements in time order (its episodes' input)."""


def share_metrics(
    events: DataFrame, series: Sequence[str]
) -> tuple[dict[str, dict[str, Any]], dict[str, ShareTimeline]]:
    """Each share series' ``share`` metrics (see the module doc), and its
    :data:`ShareTimeline` for :mod:`analysis.episodes`; empty without any."""
    if not series:
        return {}, {}
    ev = events.where(F.col("protocol").isin(list(series)))
    sr = ev.where(F.col("kind") == _SHARE).withColumn(
        "n", F.col("offset_end") - F.col("offset_start")
    )
    out: dict[str, dict[str, Any]] = {
        s: {
            "deliveries": 0,
            "redeliveries": 0,
            "redeliveries_by_cause": {},
            "acknowledged": 0,
            "archived": 0,
            "archived_by_cause": {},
            "lock_expiries": 0,
            "released": 0,
            "redeliveries_after_crash": 0,
        }
        for s in series
    }
    for r in (
        sr.groupBy("protocol", "state", "reason", "detail").agg(F.sum("n").alias("n")).collect()
    ):
        m = out.get(str(r["protocol"]))
        if m is None:
            continue
        n = int(r["n"] or 0)
        state, reason = str(r["state"]), str(r["reason"])
        if state == "acquired":
            m["deliveries"] += n
            if r["detail"]:  # what had made the record available again
                m["redeliveries"] += n
                cause = str(r["detail"])
                m["redeliveries_by_cause"][cause] = m["redeliveries_by_cause"].get(cause, 0) + n
        elif state == "acknowledged":
            m["acknowledged"] += n
        elif state == "archived":
            m["archived"] += n
            m["archived_by_cause"][reason] = m["archived_by_cause"].get(reason, 0) + n
        if reason == "lock_expiry":
            m["lock_expiries"] += n
        elif reason in ("release", "session_close") and state in ("available", "archived"):
            m["released"] += n
    _after_crash(ev, out)
    _fates(ev, out)
    acks = _latency(ev, out)
    timelines: dict[str, ShareTimeline] = {s: ([], acks.get(s, [])) for s in series}
    what = (
        F.when(F.col("state") == "acquired", F.lit("redelivered"))
        .when(F.col("state") == "archived", F.lit("archived"))
        .when(F.col("reason") == "lock_expiry", F.lit("lock_expired"))
    )
    why = F.when(F.col("state") == "acquired", F.col("detail")).otherwise(F.col("reason"))
    changes = (
        sr.where(F.col("detail").isNotNull() | (F.col("state") != "acquired"))
        .select(
            "protocol", F.col("t_emu_ms").alias("t"), what.alias("what"), why.alias("cause"), "n"
        )
        .where(F.col("what").isNotNull())
        .groupBy("protocol", "t", "what", "cause")
        .agg(F.sum("n").alias("n"))
        .orderBy("protocol", "t")
    )
    for r in changes.collect():
        tl = timelines.get(str(r["protocol"]))
        if tl is not None:
            tl[0].append(ShareCount(float(r["t"]), str(r["what"]), int(r["n"]), r["cause"]))
    for s, (counts, _) in timelines.items():
        per_s: dict[tuple[int, str], int] = {}
        for c in counts:
            key = (
                int(c.t // 1000),
                c.what if c.what != "redelivered" else f"redelivered:{c.cause}",
            )
            per_s[key] = per_s.get(key, 0) + c.n
        out[s]["by_second"] = [[sec, what, n] for (sec, what), n in sorted(per_s.items())]
    return out, timelines


def _after_crash(ev: DataFrame, out: dict[str, dict[str, Any]]) -> None:
    """``redeliveries_after_crash``: redeliveries of records whose holder had crashed
    when they came back (its share session closed by the dropped connections, 4.1+,
    or its locks ran out, 4.0)."""
    crashed = ev.where(F.col("kind") == K.CONSUMER_CRASHED.value).select(
        "protocol", "member", F.col("t_emu_ms").alias("t_crash")
    )
    ids = (
        ev.where(F.col("member").isNotNull() & F.col("member_id").isNotNull())
        .select("protocol", "member", "member_id")
        .distinct()
    )
    holders = crashed.join(ids, ["protocol", "member"]).select(
        "protocol", F.col("member_id").alias("prev_member"), "t_crash"
    )
    w = Window.partitionBy("protocol", "topic", "partition", "offset").orderBy("t", "seq")
    rec = _records(ev).select(
        "protocol",
        "state",
        "detail",
        F.lag("member_id").over(w).alias("prev_member"),
        F.lag("t").over(w).alias("prev_t"),
    )
    again = rec.where(
        (F.col("state") == "acquired") & F.col("detail").isin("lock_expiry", "session_close")
    )
    rows = (
        again.join(holders, ["protocol", "prev_member"])
        .where(F.col("t_crash") <= F.col("prev_t"))
        .groupBy("protocol")
        .count()
        .collect()
    )
    for r in rows:
        m = out.get(str(r["protocol"]))
        if m is not None:
            m["redeliveries_after_crash"] = int(r["count"])


def _fates(ev: DataFrame, out: dict[str, dict[str, Any]]) -> None:
    """Every produced record's last state (``fates``)."""
    rec = _records(ev)
    w = Window.partitionBy("protocol", "topic", "partition", "offset").orderBy(
        F.col("t").desc(), F.col("seq").desc()
    )
    last = rec.withColumn("i", F.row_number().over(w)).where(F.col("i") == 1)
    produced = {
        str(r["protocol"]): int(r["n"] or 0)
        for r in ev.where(F.col("kind") == K.PRODUCED.value)
        .groupBy("protocol")
        .agg(F.sum(F.col("offset_end") - F.col("offset_start")).alias("n"))
        .collect()
    }
    seen: dict[str, dict[str, int]] = {}
    for r in last.groupBy("protocol", "state").count().collect():
        seen.setdefault(str(r["protocol"]), {})[str(r["state"])] = int(r["count"])
    for s, m in out.items():
        st = seen.get(s, {})
        fates = {
            "acknowledged": st.get("acknowledged", 0),
            "archived": st.get("archived", 0),
            "in_flight": st.get("acquired", 0) + st.get("available", 0),
        }
        fates["never_delivered"] = max(0, produced.get(s, 0) - sum(fates.values()))
        m["fates"] = fates
        m["produced"] = produced.get(s, 0)


def _latency(ev: DataFrame, out: dict[str, dict[str, Any]]) -> dict[str, list[ShareAcks]]:
    """``ack_latency_ms`` (``produced`` to ``acknowledged``, per record), ``acknowledged_per_s``."""
    acked = (
        _records(ev)
        .where(F.col("state") == "acknowledged")
        .select("protocol", "topic", "partition", "offset", F.col("t").alias("t_ack"))
    )
    produced = ev.where(F.col("kind") == K.PRODUCED.value).select(
        "protocol",
        "topic",
        "partition",
        F.col("t_emu_ms").alias("t_prod"),
        F.explode(F.sequence("offset_start", F.col("offset_end") - 1)).alias("offset"),
    )
    lat = acked.join(produced, ["protocol", "topic", "partition", "offset"]).withColumn(
        "ms", F.col("t_ack") - F.col("t_prod")
    )
    stats = lat.groupBy("protocol").agg(
        F.count("ms").alias("count"),
        *spread_aggs("ms"),
        F.min("t_prod").alias("first"),
        F.max("t_ack").alias("last"),
    )
    for r in stats.collect():
        m = out.get(str(r["protocol"]))
        if m is None:
            continue
        m["ack_latency_ms"] = spread(r, int(r["count"]))
        span_s = (float(r["last"]) - float(r["first"])) / 1000.0
        m["acknowledged_per_s"] = round(m["acknowledged"] / span_s, 2) if span_s > 0 else None
    out_acks: dict[str, list[ShareAcks]] = {}
    per_t = (
        lat.groupBy("protocol", "t_ack")
        .agg(F.count("ms").alias("n"), F.sum("ms").alias("sum"), F.max("ms").alias("max"))
        .orderBy("protocol", "t_ack")
    )
    for r in per_t.collect():
        out_acks.setdefault(str(r["protocol"]), []).append(
            ShareAcks(float(r["t_ack"]), int(r["n"]), float(r["sum"]), float(r["max"]))
        )
    return out_acks


def _offsets(ev: DataFrame, kind: K, t: str) -> DataFrame:
    """One row per offset of ``kind``'s ranges: protocol, topic, partition, offset, ``t``."""
    return ev.where(F.col("kind") == kind.value).select(
        "protocol",
        "topic",
        "partition",
        F.col("t_emu_ms").alias(t),
        F.explode(F.sequence("offset_start", F.col("offset_end") - 1)).alias("offset"),
    )


def work_queue_metrics(events: DataFrame, series: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each series' ``work_queue`` metrics (see the module doc); ``{}`` without any."""
    if not series:
        return {}
    ev = events.where(F.col("protocol").isin(list(series)))
    keys = ["protocol", "topic", "partition", "offset"]
    first = (
        _offsets(ev, K.PROCESSED, "t_done")
        .groupBy(*keys)
        .agg(F.min("t_done").alias("t_done"), F.count(F.lit(1)).alias("times"))
    )
    rec = _offsets(ev, K.PRODUCED, "t_prod").join(first, keys, "left")
    rec = rec.withColumn("ms", F.col("t_done") - F.col("t_prod")).localCheckpoint()
    out: dict[str, dict[str, Any]] = {
        s: {
            "records": 0,
            "processed_records": 0,
            "processed_again": 0,
            "never_processed": 0,
            "latency_ms": {"count": 0, "p50": None, "p99": None, "max": None},
            "processed_per_s": None,
            "by_second": [],
        }
        for s in series
    }
    stats = rec.groupBy("protocol").agg(
        F.count(F.lit(1)).alias("records"),
        F.count("t_done").alias("done"),
        F.coalesce(F.sum(F.col("times") - 1), F.lit(0)).alias("again"),
        *spread_aggs("ms"),
        F.min("t_prod").alias("t0"),
        F.max("t_done").alias("t1"),
    )
    for r in stats.collect():
        m = out.get(str(r["protocol"]))
        if m is None:
            continue
        done = int(r["done"])
        m["records"] = int(r["records"])
        m["processed_records"] = done
        m["processed_again"] = int(r["again"])
        m["never_processed"] = int(r["records"]) - done
        if done:
            m["latency_ms"] = spread(r, done)
            span_s = (float(r["t1"]) - float(r["t0"])) / 1000.0
            m["processed_per_s"] = round(done / span_s, 2) if span_s > 0 else None
    per_s = (
        rec.where(F.col("t_done").isNotNull())
        .groupBy("protocol", F.floor(F.col("t_done") / 1000.0).alias("s"))
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.expr("percentile(ms, 0.5)").alias("p50"),
            F.max("ms").alias("max"),
        )
        .orderBy("protocol", "s")
    )
    for r in per_s.collect():
        m = out.get(str(r["protocol"]))
        if m is not None:
            m["by_second"].append(
                [int(r["s"]), int(r["n"]), round(float(r["p50"]), 1), round(float(r["max"]), 1)]
            )
    return out
