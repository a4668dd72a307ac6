"""Kafka's own metric names, computed from the event log, so users can map results onto dashboards.

Pure Python over small inputs; :func:`analysis.metrics.compute_metrics` feeds it.
Each value is what Kafka's sensor would have accumulated over the whole
timeline, summed or pooled over the group's clients (Kafka keeps one set per
client, and its ``-avg`` / ``-max`` cover only a sampled window of
``metrics.num.samples`` (2) x ``metrics.sample.window.ms`` (30 s): here they
cover the run). Sources (apache/kafka):

Client, ``consumer-coordinator-metrics``:

* classic (K@3.9 ``AbstractCoordinator`` 568-569, 583, 647, 828, 848-850,
  1351-1423; ``ConsumerCoordinator`` 1573-1576): ``rebalance-latency-*`` and
  ``rebalance-total`` count successful rebalances, from the first JoinGroup
  sent (``initiateJoinGroup``, kept across retries) to the successful
  SyncGroup: the member's ``rebalance_completed.duration_ms``.
  ``failed-rebalance-total``: one per failed JoinGroup or SyncGroup attempt
  (``MEMBER_ID_REQUIRED`` on a first join included): the member's
  ``request_error`` of a ``join`` or ``sync`` request. ``join-time-*`` /
  ``sync-time-*``: latencies of the successful JoinGroup / SyncGroup
  requests (carried in ``rebalance_completed.detail``).
  ``last-rebalance-seconds-ago``: from the member's last successful rebalance
  to the end of the timeline (-1 before the first). ``assigned-partitions``:
  what each member owned at the end of the timeline.
* KIP-848 ``AsyncKafkaConsumer`` (K@3.9 ``RebalanceMetricsManager`` 54-109,
  ``MembershipManagerImpl`` 353-375; K@4.0 ``ConsumerRebalanceMetricsManager``):
  a rebalance runs from entering RECONCILING to reaching ACKNOWLEDGING/STABLE
  (``rebalance_started`` to ``rebalance_completed``; a restarted
  reconciliation restarts the clock). ``failed-rebalance-total``: a
  ConsumerGroupHeartbeat error that is not retriable while a reconciliation
  runs (``onHeartbeatFailure``). No
  ``join-time``, ``sync-time`` or ``assigned-partitions`` in this client.
* 0.8.2 ``ZookeeperConsumerConnector`` (K@0.8.2.2 109, 527-531, 596-633):
  ``RebalanceRateAndTime``, one sample per ``syncedRebalance`` call (every
  attempt and back-off inside it, success or give-up), and
  ``OwnedPartitionsCount``.

Coordinator:

* classic groups, Kafka 3.x (``GroupMetadataManager.scala`` 135-178,
  ``GroupCoordinator.scala`` 81-89, 633): the ``NumGroups<State>`` gauges,
  given here as seconds the group spent in each state, and
  ``group-completed-rebalance-count`` (CompletingRebalance to Stable).
* ``consumer`` groups, Kafka 4.0 (``GroupCoordinatorMetrics`` 127-160, 231-238;
  ``GroupMetadataManager.java`` 2826): ``consumer-group-count{state}`` as
  seconds per state and ``consumer-group-rebalance-count``, the group-epoch
  bumps from a subscription change or a new member (not from members
  leaving or fenced).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

HOUR_MS = 3_600_000.0


@dataclass(frozen=True)
class Step:
    """A member's rebalance step at ``t``.

    ``what``: ``started``, ``completed``, ``failed`` (the 0.8 give-up), or
    ``fatal`` (a KIP-848 heartbeat failed with an error that is not retriable).
    """

    member: str
    what: str
    t: float
    duration_ms: float | None = None
    detail: str | None = None


@dataclass(frozen=True)
class GroupState:
    """A coordinator's group state change."""

    t: float
    state: str
    generation: int | None = None
    reason: str | None = None


def _stats(values: Sequence[float]) -> dict[str, float | None]:
    if not values:
        return {"avg": None, "max": None, "total": 0.0}
    return {
        "avg": sum(values) / len(values),
        "max": max(values),
        "total": float(sum(values)),
    }


def _per_hour(n: int, span_ms: float) -> float | None:
    return None if span_ms <= 0 else n * HOUR_MS / span_ms


def _state_seconds(states: Sequence[GroupState], t_end: float) -> dict[str, float]:
    out: dict[str, float] = {}
    ordered = sorted(states, key=lambda s: s.t)
    for i, a in enumerate(ordered):
        end = ordered[i + 1].t if i + 1 < len(ordered) else t_end
        if end > a.t:
            out[a.state] = out.get(a.state, 0.0) + (end - a.t) / 1000.0
    return dict(sorted(out.items()))


def kafka_metrics(
    protocol: str,
    steps: Sequence[Step],
    join_sync_errors: int,
    states: Sequence[GroupState],
    owned_at_end: Mapping[str, int],
    t_start: float,
    t_end: float,
) -> dict[str, Any]:
    """Kafka's metric names for one protocol's run (see the module docstring).

    Args:
        protocol: the protocol.
        steps: every member's rebalance steps, in time order.
        join_sync_errors: failed JoinGroup / SyncGroup responses (classic).
        states: the coordinator's group state changes (none for the 0.8 consumer).
        owned_at_end: partitions each live member owned at the end of the timeline.
        t_start: the first member's start; rates are per hour of ``[t_start, t_end]``.
        t_end: the end of the timeline.

    Returns:
        ``{"client": {...}, "coordinator": {...} | None, "scope": str}``.
    """
    protocol = protocol.split("@", 1)[0]  # an experiment's series: <protocol>@<trial>
    span = t_end - t_start
    ordered = sorted(steps, key=lambda s: s.t)
    last_done: dict[str, float] = {}
    members = sorted({s.member for s in ordered} | set(owned_at_end))
    client: dict[str, Any]
    if protocol == "zookeeper":
        open_at: dict[str, float] = {}
        times: list[float] = []
        for s in ordered:
            if s.what == "started":
                open_at[s.member] = s.t
            elif s.member in open_at:
                times.append(s.t - open_at.pop(s.member))
        st = _stats(times)
        client = {
            "mbean": "kafka.consumer:type=ZookeeperConsumerConnector",
            "RebalanceRateAndTime.count": len(times),
            "RebalanceRateAndTime.mean_ms": st["avg"],
            "RebalanceRateAndTime.max_ms": st["max"],
            "RebalanceRateAndTime.rate_per_hour": _per_hour(len(times), span),
            "OwnedPartitionsCount": dict(sorted(owned_at_end.items())),
        }
        return {"client": client, "coordinator": None, "scope": _SCOPE}
    latencies: list[float] = []
    failed = 0
    join_ms: list[float] = []
    sync_ms: list[float] = []
    started_at: dict[str, float] = {}
    for s in ordered:
        if s.what == "started":
            started_at[s.member] = s.t  # a restarted reconciliation restarts the clock
        elif s.what == "completed":
            begun = started_at.pop(s.member, None)
            if s.duration_ms is not None:
                latencies.append(s.duration_ms)
            elif begun is not None:
                latencies.append(s.t - begun)
            last_done[s.member] = s.t
            if s.detail:
                try:
                    d = json.loads(s.detail)
                except ValueError:
                    d = {}
                if isinstance(d, dict):
                    join_ms.extend(float(x) for x in d.get("join_ms") or [])
                    sync_ms.extend(float(x) for x in d.get("sync_ms") or [])
        elif s.what == "fatal" and s.member in started_at:
            failed += 1  # maybeRecordRebalanceFailed: only mid-reconciliation
            started_at.pop(s.member)
        elif s.what == "failed":
            started_at.pop(s.member, None)
    if protocol != "consumer":
        failed = join_sync_errors
    st = _stats(latencies)
    ago = {m: ((t_end - last_done[m]) / 1000.0 if m in last_done else -1.0) for m in members}
    client = {
        "metric_group": "consumer-coordinator-metrics",
        "rebalance-latency-avg": st["avg"],
        "rebalance-latency-max": st["max"],
        "rebalance-latency-total": st["total"],
        "rebalance-total": len(latencies),
        "rebalance-rate-per-hour": _per_hour(len(latencies), span),
        "failed-rebalance-total": failed,
        "failed-rebalance-rate-per-hour": _per_hour(failed, span),
        "last-rebalance-seconds-ago": {
            "min": min(ago.values()) if ago else None,
            "max": max(ago.values()) if ago else None,
        },
    }
    if protocol != "consumer":
        js, ss = _stats(join_ms), _stats(sync_ms)
        client.update(
            {
                "join-time-avg": js["avg"],
                "join-time-max": js["max"],
                "join-total": len(join_ms),
                "sync-time-avg": ss["avg"],
                "sync-time-max": ss["max"],
                "sync-total": len(sync_ms),
                "assigned-partitions": dict(sorted(owned_at_end.items())),
            }
        )
    seconds = _state_seconds(states, t_end)
    ordered_states = sorted(states, key=lambda s: s.t)
    if protocol == "consumer":
        bumps = 0
        epoch: int | None = None
        for gs in ordered_states:
            if gs.generation is None:
                continue
            if epoch is not None and gs.generation > epoch and gs.reason not in _NOT_A_REBALANCE:
                bumps += 1
            epoch = gs.generation if epoch is None else max(epoch, gs.generation)
        coordinator: dict[str, Any] = {
            "metric_group": "group-coordinator-metrics",
            "consumer-group-count.seconds_by_state": {k.lower(): v for k, v in seconds.items()},
            "consumer-group-rebalance-count": bumps,
            "consumer-group-rebalance-rate-per-hour": _per_hour(bumps, span),
        }
    else:
        completed = sum(
            1
            for a, b in itertools.pairwise(ordered_states)
            if a.state == "CompletingRebalance" and b.state == "Stable"
        )
        coordinator = {
            "mbean": "kafka.coordinator.group:type=GroupMetadataManager,name=NumGroups<State>",
            "NumGroups.seconds_by_state": seconds,
            "group-completed-rebalance-count": completed,
            "group-completed-rebalance-rate-per-hour": _per_hour(completed, span),
        }
    return {"client": client, "coordinator": coordinator, "scope": _SCOPE}


_NOT_A_REBALANCE = frozenset(
    {"leave", "static_leave", "session_timeout", "rebalance_timeout", "fenced"}
)
"""KIP-848 epoch bumps Kafka's consumer-group-rebalance sensor does not record."""

_SCOPE = (
    "over the whole timeline, pooled over the group's members (Kafka: per client, "
    "-avg/-max over 2 x 30 s sampled windows); coordinator gauges as seconds per state"
)
