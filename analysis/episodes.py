"""What each membership change cost: episodes, from a change to a settled group.

Pure Python over small inputs (no Spark): :mod:`analysis.metrics` reduces a
protocol's events to a :class:`History` (the group's timeline, ownership
intervals, unowned and doubly owned spans, lag, a few counted marks, the
checkers' anomalies) and :func:`episodes` turns it into :class:`Episode` s.
Unit tests build histories by hand (``tests/unit/test_episodes.py``).

Definitions (times are emulated ms):

* A **change** is a timeline action the orchestrator carried out (join,
  leave, crash, pause, restart, slow, network partition, host crash, broker
  and ZooKeeper faults, partition growth, a subscription change, a host lost
  without being asked). Actions of one ``[[timeline]]`` entry (a rolling
  restart, a burst of joins) are one change. Skipped actions are none.
* The group is **disturbed** while a member is mid-rebalance or the
  coordinator's group is not Stable/Empty/Dead (the group timeline's ``reb``
  and ``coord_busy``), while a partition has no owner and a live member
  exists, or while a partition has two owners (not in a share group, whose
  members share partitions by design). Otherwise it is **settled**.
* An **episode** starts at its change and is **stable** at the end of the
  last disturbance that starts before the next change (or the end of the
  timeline), and not before a timed fault (pause, slow, network partition)
  cleared. No disturbance: stable at once (or at the clear). An episode still
  disturbed when the next change comes merges with it into one *overlapping*
  episode (kind ``crash+join``, ``overlapped``); one still disturbed at the
  end of the timeline is *not settled* (``time_to_stable_ms`` None).
* **Group formation** is the episode from the first member's start to the
  first settled moment, reported apart (kind ``formation``); a change during
  formation merges with it (``formation+join``).
* Costs are counted over the episode's **window**, from its change to the next
  change (or the end of the timeline), so they include the aftermath (records
  redelivered after the group settled, lag recovering):

  - ``partitions_revoked``: ownership ends by an explicit release (revoke,
    release, rollback, also one in the same instant as the member's stop;
    not a crash, a stop without a release, or a loss);
  - ``partitions_moved``: partitions whose owner when the episode was stable
    differs from their owner just before the change (owned both times);
  - ``revoked_without_need``: revocations of a partition that the same member
    owned again when the episode was stable;
  - ``partition_unavailable_s``: partition-seconds with no owner while a live
    member existed (a paused owner still counts as the owner);
  - ``idle_member_s``: member-seconds idle (live, owning nothing, not told
    to stop, not about to claim what its completed rebalance gave it:
    ``timelines.member_timeline``) while the group was disturbed, up to
    stable;
  - duplicates and losses by cause, double-processing and ordering-overlap
    seconds: the checkers' rows that start in the window (durations clipped);
  - ``peak_lag``: the highest lag (messages produced and not yet processed,
    per time bucket) in the window; ``lag_recovery_ms``: from the change to
    the end of the first bucket after the peak whose lag is back near the lag
    just before the change: within 10% of the rise or one bucket's worth of
    production (the run's mean), whichever is larger, so that the batching
    noise of a steady group is not a rise (0 when lag did not rise beyond
    that, None when it did not come back within the window);
  - ``commit_failures``, ``generation_bumps`` (classic generations, KIP-848
    group epochs; None for the 0.8 consumer), ``zk_ops`` (the legacy
    rebalance attempts' reads and writes; None for the others),
    ``coordinator_requests`` (every request the coordinators answered between
    the snapshots taken after this change and after the next; None for the
    0.8 consumer or a run without snapshots).

  - ``rebalances``: member rebalances started (a member's ``rebalance_started``);
    ``members_disturbed``: members told to rebalance or rebalancing
    (``rebalance_triggered`` / ``rebalance_started``).

  - share groups only (None for the others; :mod:`analysis.share`), from the
    share-partition leader's ``share_records`` in the window:
    ``share_redeliveries`` (records acquired again) and
    ``share_redeliveries_by_cause`` (what had made them available: ``release``,
    ``lock_expiry``, ``session_close``, ``failover``), ``share_archived``,
    ``share_lock_expiries``, ``share_acknowledged`` and
    ``share_acknowledged_per_s`` (over the window), ``share_ack_latency_mean_ms``
    and ``share_ack_latency_max_ms`` (from a record's ``produced`` to its
    ``acknowledged``, over the records acknowledged in the window).

* ``time_to_detect_ms`` (crash, pause, network partition, slow, host crash or
  loss): from the change to the group's first reaction, the coordinator
  removing a member or another member starting to rebalance; None when
  nothing reacted (a pause shorter than the session).

* Topic changes (``create_topic``, ``delete_topic``; :mod:`analysis.topics`
  for incarnations): the episode's ``topic`` is the first such change's topic.

  - ``topic_discovery_ms`` (``create_topic``): from the created incarnation's
    ``topic_created`` (the first of that name at or after the action) to the
    first moment a member owned one of its partitions, also after the
    episode's window; None when no member ever did (the group does not
    subscribe to it, or the run ended first) or the topic was not created. A
    name still held from a deleted incarnation is owned from the creation
    (carried over, :func:`analysis.ownership.split_at_incarnations`): 0.
  - ``topic_release_ms`` (``delete_topic``): from its ``topic_deleted`` (the
    first of that name at or after the action) until the last member holding
    one of its partitions let go (0 when none held one); None when a hold
    lasted to the run's end or into a new incarnation of the name, or the
    topic was not deleted (``delete.topic.enable`` false). ``time_to_stable_ms``
    says when the group settled.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from emulator.intervals import intersection, merge_spans, overlap_length

FORMATION = "formation"
"""The episode kind of group formation."""

DETECTED_ACTIONS = frozenset(
    {"crash", "pause", "network_partition", "slow", "host_crash", "host_lost"}
)
"""Changes the group has to notice by itself (no goodbye): they get a time to detect."""

TIMED_ACTIONS = frozenset({"pause", "slow", "network_partition"})
"""Faults that end by themselves; their episode is not stable before they clear."""

LAG_RECOVERY_SHARE = 0.1
"""Lag has recovered when back within this share of its rise above the pre-change lag."""


@dataclass(frozen=True)
class Change:
    """One timeline action as carried out.

    Attributes:
        t_ms: when the orchestrator applied it.
        action: the action (``join``, ``crash``, ...).
        members: the members it acts on.
        index: its ``[[timeline]]`` entry; actions of one entry are one change.
        cleared_ms: when a timed fault ended (None: not timed, or never cleared).
        topic: the topic a topic change (``create_topic``, ``delete_topic``) is about.
    """

    t_ms: float
    action: str
    members: tuple[str, ...] = ()
    index: int | None = None
    cleared_ms: float | None = None
    topic: str | None = None


@dataclass(frozen=True)
class Segment:
    """A stretch of the group timeline over ``[s, e)`` (see ``timelines.group_timeline``)."""

    s: float
    e: float
    live: int
    idle: int
    reb: int
    coord_busy: int


@dataclass(frozen=True)
class Owned:
    """One ownership interval of ``partition`` (``topic:p``) by ``member`` over ``[s, e)``.

    ``released``: it ended by an explicit release (a revocation).
    """

    partition: str
    member: str
    s: float
    e: float
    released: bool = False


@dataclass(frozen=True)
class TopicLife:
    """One incarnation of a topic (:mod:`analysis.topics`).

    ``key``: its key (``t``, ``t#2``) as the partitions of :class:`Owned` name it;
    ``name``: the topic's name; ``created`` / ``deleted``: its ``topic_created`` /
    ``topic_deleted`` (None: from the start / not deleted).
    """

    key: str
    name: str
    created: float | None
    deleted: float | None


@dataclass(frozen=True)
class Hold:
    """A member's hold of a deleted incarnation's partition (``topic:p``) over ``[s, e)``.

    ``detail``: ``released`` (it let go), ``carried_over`` (the name was created
    again while held) or ``held_to_end`` (:func:`analysis.ownership.split_at_incarnations`).
    """

    partition: str
    member: str
    s: float
    e: float
    detail: str


@dataclass(frozen=True)
class Span:
    """A span ``[s, e)`` of one partition (unowned, or owned twice)."""

    partition: str
    s: float
    e: float


@dataclass(frozen=True)
class Mark:
    """A point event the episodes count.

    ``what``: ``commit_failed``, ``generation`` (``n`` = the new generation or
    group epoch), ``zk_ops`` (``n`` operations), ``member_removed``,
    ``rebalance`` (a member was told to rebalance), ``rebalance_started`` (a
    member started a rebalance).
    """

    t: float
    what: str
    n: float = 1.0
    member: str | None = None


@dataclass(frozen=True)
class ShareCount:
    """Records of a share group that changed state at ``t`` (:mod:`analysis.share`).

    ``what``: ``redelivered`` (acquired again; ``cause`` what had made them
    available), ``archived`` (``cause`` why), ``lock_expired``.
    """

    t: float
    what: str
    n: int
    cause: str | None = None


@dataclass(frozen=True)
class ShareAcks:
    """Records acknowledged at ``t``: how many, and their produce-to-acknowledge
    latencies' sum and maximum (ms)."""

    t: float
    count: int
    latency_sum_ms: float
    latency_max_ms: float


@dataclass(frozen=True)
class AnomalyRow:
    """One checker row: ``kind`` (``duplicate``, ``loss``, ...), its cause, span and count."""

    kind: str
    cause: str | None
    s: float
    e: float
    count: int = 0


@dataclass
class History:
    """What the episode logic reads of one protocol's run (one group).

    Attributes:
        protocol: the protocol.
        t_start: the first member's start (formation begins).
        t_end: the end of the timeline (``run_finished``; else the last event).
        changes: the timeline's changes.
        segments: the group timeline, in time order.
        owned: ownership intervals.
        gaps: unowned spans (any, live or not: intersected with the timeline here).
        doubled: spans in which a partition had two owners.
        lag: ``(bucket start, lag)`` in time order.
        bucket_ms: the lag buckets' width.
        produced_per_bucket: messages produced per bucket, the run's mean.
        marks: counted point events.
        anomalies: the checkers' rows.
        requests: ``(t, cumulative coordinator requests)`` snapshots in time
            order; empty for the 0.8 consumer.
        complete: the run ended (``run_finished`` seen); else the last
            episode is cut short.
        topics: the incarnations of topics created or deleted during the run.
        holds: members' holds of deleted partitions.
        share: a share group's run (its episodes count :attr:`share_counts`
            and :attr:`share_acks`).
        share_counts: the share records' state changes, in time order.
        share_acks: the share records' acknowledgements, in time order.
    """

    protocol: str
    t_start: float
    t_end: float
    changes: list[Change] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    owned: list[Owned] = field(default_factory=list)
    gaps: list[Span] = field(default_factory=list)
    doubled: list[Span] = field(default_factory=list)
    lag: list[tuple[float, float]] = field(default_factory=list)
    bucket_ms: float = 1000.0
    produced_per_bucket: float = 0.0
    marks: list[Mark] = field(default_factory=list)
    anomalies: list[AnomalyRow] = field(default_factory=list)
    requests: list[tuple[float, int]] = field(default_factory=list)
    complete: bool = True
    topics: list[TopicLife] = field(default_factory=list)
    holds: list[Hold] = field(default_factory=list)
    share: bool = False
    share_counts: list[ShareCount] = field(default_factory=list)
    share_acks: list[ShareAcks] = field(default_factory=list)

    @property
    def legacy(self) -> bool:
        """The 0.8 consumer (ZooKeeper-coordinated)."""
        return self.protocol.split("@", 1)[0] == "zookeeper"


@dataclass
class Episode:
    """One episode and what it cost (see the module docstring)."""

    kind: str
    start_ms: float
    window_end_ms: float
    stable_ms: float | None
    actions: list[str]
    members: list[str]
    overlapped: bool = False
    time_to_detect_ms: float | None = None
    partitions_revoked: int = 0
    partitions_moved: int = 0
    revoked_without_need: int = 0
    partition_unavailable_s: float = 0.0
    idle_member_s: float = 0.0
    duplicates: int = 0
    duplicates_by_cause: dict[str, int] = field(default_factory=dict)
    loss: int = 0
    loss_by_cause: dict[str, int] = field(default_factory=dict)
    double_processing_s: float = 0.0
    ordering_overlap_s: float = 0.0
    peak_lag: int = 0
    lag_recovery_ms: float | None = 0.0
    commit_failures: int = 0
    generation_bumps: int | None = None
    zk_ops: int | None = None
    coordinator_requests: int | None = None
    rebalances: int = 0
    members_disturbed: int = 0
    topic: str | None = None
    topic_discovery_ms: float | None = None
    topic_release_ms: float | None = None
    share_redeliveries: int | None = None
    share_redeliveries_by_cause: dict[str, int] | None = None
    share_archived: int | None = None
    share_lock_expiries: int | None = None
    share_acknowledged: int | None = None
    share_acknowledged_per_s: float | None = None
    share_ack_latency_mean_ms: float | None = None
    share_ack_latency_max_ms: float | None = None
    cut_short: bool = False

    @property
    def settled(self) -> bool:
        """The group was settled again before the next change (or the end)."""
        return self.stable_ms is not None

    @property
    def time_to_stable_ms(self) -> float | None:
        """From the change to stable; None when it never settled."""
        return None if self.stable_ms is None else self.stable_ms - self.start_ms

    def to_dict(self) -> dict[str, Any]:
        """JSON-able, with ``time_to_stable_ms`` and ``settled``."""
        d = {k: v for k, v in self.__dict__.items()}
        d["time_to_stable_ms"] = self.time_to_stable_ms
        d["settled"] = self.settled
        return d


EPISODE_METRICS: tuple[tuple[str, str], ...] = (
    ("time_to_detect_ms", "ms from the change to the group's first reaction (crash, pause)"),
    ("time_to_stable_ms", "ms from the change to a settled group"),
    ("partitions_revoked", "partition revocations"),
    ("partitions_moved", "partitions whose owner changed"),
    ("revoked_without_need", "revocations of partitions the same member owned again"),
    ("partition_unavailable_s", "partition-seconds with no owner while a member lived"),
    ("idle_member_s", "member-seconds with nothing to fetch while disturbed"),
    ("duplicates", "messages processed again (all causes)"),
    ("loss", "messages never processed (all causes)"),
    ("double_processing_s", "seconds two members processed the same records"),
    ("ordering_overlap_s", "seconds two members processed one partition at once"),
    ("peak_lag", "highest lag in messages"),
    ("lag_recovery_ms", "ms from the change until lag was back"),
    ("commit_failures", "failed commits"),
    ("generation_bumps", "generation or group-epoch bumps"),
    ("zk_ops", "ZooKeeper reads and writes of rebalance attempts"),
    ("coordinator_requests", "requests the coordinators answered"),
    ("rebalances", "member rebalances started"),
    ("members_disturbed", "members that rebalanced or were told to"),
    ("topic_discovery_ms", "ms from a topic's creation until a member owned a partition of it"),
    ("topic_release_ms", "ms from a topic's deletion until no member held a partition of it"),
    ("share_redeliveries", "share-group records acquired again"),
    ("share_archived", "share-group records archived (rejected, or at the delivery limit)"),
    ("share_lock_expiries", "share-group acquisition locks that ran out"),
    ("share_acknowledged", "share-group records acknowledged"),
    ("share_acknowledged_per_s", "share-group records acknowledged per second"),
    ("share_ack_latency_mean_ms", "mean ms from a share record's produce to its acknowledgement"),
    ("share_ack_latency_max_ms", "longest ms from a share record's produce to its acknowledgement"),
)
"""Every numeric per-episode metric, with what it counts (the experiment report's rows)."""


# ----------------------------------------------------------------- helpers


def _live_spans(segments: Sequence[Segment]) -> list[tuple[float, float]]:
    return merge_spans((g.s, g.e) for g in segments if g.live > 0)


def disturbed_spans(h: History) -> list[tuple[float, float]]:
    """When the group was disturbed (see the module docstring), as disjoint spans."""
    live = _live_spans(h.segments)
    unowned_live = intersection(merge_spans((g.s, g.e) for g in h.gaps), live)
    busy = [(g.s, g.e) for g in h.segments if g.reb > 0 or g.coord_busy > 0]
    doubled = [(d.s, d.e) for d in h.doubled]
    return merge_spans([*busy, *unowned_live, *doubled])


class Owners:
    """Each partition's owner over time: at ``t``, the latest claim holding it
    then (``s <= t < e``, the greatest ``s``; of equal ones the first in the
    history's order), or ``None``.

    Built once per history (a sweep over each partition's claims: its owner is
    constant between two of their ends), then :meth:`at` is a binary search.
    An episode asks for every partition's owner before and after it, so a scan
    of the claims per question made the episodes quadratic in the claims
    (98,048 questions over 97,920 claims took 4.7 s at 10 M events).
    """

    def __init__(self, by_partition: dict[str, list[Owned]]) -> None:
        self._index: dict[str, tuple[list[float], list[str | None]]] = {}
        for partition, owned in by_partition.items():
            # a claim with s < e false (NaN included) holds at no t
            claims = sorted((o.s, i, o) for i, o in enumerate(owned) if o.s < o.e)
            points = sorted({x for _, _, o in claims for x in (o.s, o.e)})
            active: list[tuple[float, int, Owned]] = []  # (-s, order, claim): the best on top
            owners: list[str | None] = []
            j = 0
            for at in points:
                while j < len(claims) and claims[j][0] <= at:
                    s, i, o = claims[j]
                    heapq.heappush(active, (-s, i, o))
                    j += 1
                while active and active[0][2].e <= at:
                    heapq.heappop(active)
                owners.append(active[0][2].member if active else None)
            self._index[partition] = (points, owners)

    def at(self, partition: str, t: float) -> str | None:
        """The owner of ``partition`` at ``t``."""
        entry = self._index.get(partition)
        if entry is None:
            return None
        points, owners = entry
        i = bisect.bisect_right(points, t) - 1
        return owners[i] if i >= 0 else None


# ----------------------------------------------------------------- episodes


@dataclass
class _Draft:
    kind: list[str]
    start: float
    members: list[str]
    detect_after: list[tuple[float, tuple[str, ...]]]  # (change time, its members)
    not_before: float
    index: int | None = None
    overlapped: bool = False
    topics: list[tuple[str, str, float]] = field(default_factory=list)  # (action, topic, t)


def _drafts(h: History) -> list[_Draft]:
    """Formation, then one draft per change (actions of one timeline entry together)."""
    drafts = [_Draft([FORMATION], h.t_start, [], [], h.t_start)]
    for c in sorted(h.changes, key=lambda c: c.t_ms):
        last = drafts[-1]
        same_entry = (
            len(drafts) > 1
            and c.index is not None
            and last.kind == [c.action]
            and last.index == c.index
        )
        clear = c.cleared_ms if c.cleared_ms is not None else c.t_ms
        detect = [(c.t_ms, c.members)] if c.action in DETECTED_ACTIONS else []
        topics = [(c.action, c.topic, c.t_ms)] if c.topic is not None else []
        if same_entry:
            last.members.extend(m for m in c.members if m not in last.members)
            last.detect_after.extend(detect)
            last.not_before = max(last.not_before, clear)
            last.topics.extend(topics)
            continue
        drafts.append(
            _Draft(
                [c.action],
                c.t_ms,
                list(c.members),
                detect,
                max(c.t_ms, clear),
                c.index,
                topics=topics,
            )
        )
    return drafts


@dataclass
class _Run:
    """What every episode of one history reads, derived once from it."""

    disturbed: list[tuple[float, float]]
    disturbed_starts: list[float]
    by_partition: dict[str, list[Owned]]
    unowned_live: list[tuple[float, float]]  # each partition's unowned spans while a member lived
    owners: Owners

    @classmethod
    def of(cls, h: History) -> _Run:
        disturbed = disturbed_spans(h)
        by_partition: dict[str, list[Owned]] = {}
        for o in h.owned:
            by_partition.setdefault(o.partition, []).append(o)
        live = _live_spans(h.segments)
        unowned = [piece for g in h.gaps for piece in intersection([(g.s, g.e)], live)]
        return cls(
            disturbed, [s for s, _ in disturbed], by_partition, unowned, Owners(by_partition)
        )

    def stable_at(self, start: float, end: float, not_before: float) -> float:
        """Where a draft over ``[start, end)`` is stable (may exceed ``end``: still disturbed)."""
        stable = max(start, not_before)
        i = bisect.bisect_right(self.disturbed_starts, end)  # spans starting before `end`
        for s, e in self.disturbed[:i]:
            if e > start and s < end:
                stable = max(stable, e)
        return stable


def episodes(h: History) -> list[Episode]:
    """Every episode of one protocol's run, formation first (see the module docstring).

    Args:
        h: the protocol's history.

    Returns:
        The episodes in time order; overlapping changes merged.
    """
    run = _Run.of(h)
    drafts = _drafts(h)
    merged: list[tuple[_Draft, float, float | None]] = []
    i = 0
    while i < len(drafts):
        d = drafts[i]
        j = i
        while True:
            end = drafts[j + 1].start if j + 1 < len(drafts) else h.t_end
            stable = run.stable_at(d.start, end, d.not_before)
            if stable > end and j + 1 < len(drafts):
                nxt = drafts[j + 1]
                d.kind.extend(nxt.kind)
                d.members.extend(m for m in nxt.members if m not in d.members)
                d.detect_after.extend(nxt.detect_after)
                d.not_before = max(d.not_before, nxt.not_before)
                d.topics.extend(nxt.topics)
                d.overlapped = True
                j += 1
                continue
            break
        more = j + 1 < len(drafts)
        settled = stable if stable < end or (stable == end and more) else None
        merged.append((d, end, settled))
        i = j + 1
    out = [_measure(h, run, d, end, settled) for d, end, settled in merged]
    if out and not h.complete:
        out[-1].cut_short = True
        out[-1].stable_ms = None
    return out


def _measure(h: History, run: _Run, d: _Draft, end: float, stable: float | None) -> Episode:
    start = d.start
    kind = "+".join(dict.fromkeys(d.kind))
    ep = Episode(
        kind=kind,
        start_ms=start,
        window_end_ms=end,
        stable_ms=stable,
        actions=list(d.kind),
        members=list(d.members),
        overlapped=d.overlapped,
    )
    upto = stable if stable is not None else end
    # Time to detect: the first reaction after the change, by someone else.
    if d.detect_after:
        t0 = d.detect_after[0][0]
        affected = {m for _, ms in d.detect_after for m in ms}
        first = [
            m.t
            for m in h.marks
            if t0 <= m.t < end
            and (
                m.what == "member_removed"
                or (
                    m.what in _REBALANCE_MARKS and m.member is not None and m.member not in affected
                )
            )
        ]
        ep.time_to_detect_ms = (min(first) - t0) if first else None
    # Ownership: revocations, moves, revocations without need.
    by_part = run.by_partition
    before = start - 1e-6
    after = upto - 1e-6 if stable is None else upto
    moved = 0
    for p in by_part:
        owner_before, owner_after = run.owners.at(p, before), run.owners.at(p, after)
        if owner_before is not None and owner_after is not None and owner_before != owner_after:
            moved += 1
    ep.partitions_moved = moved
    revoked = [o for o in h.owned if o.released and start <= o.e < end]
    ep.partitions_revoked = len(revoked)
    ep.revoked_without_need = sum(
        1 for o in revoked if run.owners.at(o.partition, after) == o.member
    )
    # Unowned partition-seconds while a member lived; idle member-seconds while disturbed.
    unavailable = sum(overlap_length(s, e, start, end) for s, e in run.unowned_live)
    ep.partition_unavailable_s = unavailable / 1000.0
    busy = intersection(run.disturbed, [(start, upto)])
    idle = 0.0
    for g in h.segments:
        if g.idle > 0:
            for s, e in busy:
                idle += g.idle * overlap_length(g.s, g.e, s, e)
    ep.idle_member_s = idle / 1000.0
    # The checkers' rows.
    for a in h.anomalies:
        if not start <= a.s < end:
            continue
        cause = a.cause or "?"
        if a.kind == "duplicate":
            ep.duplicates += a.count
            ep.duplicates_by_cause[cause] = ep.duplicates_by_cause.get(cause, 0) + a.count
        elif a.kind == "loss":
            ep.loss += a.count
            ep.loss_by_cause[cause] = ep.loss_by_cause.get(cause, 0) + a.count
        elif a.kind == "double_processing":
            ep.double_processing_s += overlap_length(a.s, a.e, start, end) / 1000.0
        elif a.kind == "ordering_overlap":
            ep.ordering_overlap_s += overlap_length(a.s, a.e, start, end) / 1000.0
    # Lag.
    ep.peak_lag, ep.lag_recovery_ms = _lag(h.lag, start, end, h.bucket_ms, h.produced_per_bucket)
    # Rebalances and the members they disturbed.
    window = [m for m in h.marks if start <= m.t < end]
    ep.rebalances = sum(1 for m in window if m.what == "rebalance_started")
    ep.members_disturbed = len(
        {m.member for m in window if m.what in _REBALANCE_MARKS and m.member is not None}
    )
    # Topic changes.
    if d.topics:
        ep.topic = d.topics[0][1]
        created = next(((tp, t) for a, tp, t in d.topics if a == "create_topic"), None)
        deleted = next(((tp, t) for a, tp, t in d.topics if a == "delete_topic"), None)
        if created is not None:
            ep.topic_discovery_ms = _discovery(h, *created)
        if deleted is not None:
            ep.topic_release_ms = _release(h, *deleted)
    # Counted marks.
    ep.commit_failures = int(
        sum(m.n for m in h.marks if m.what == "commit_failed" and start <= m.t < end)
    )
    if not h.legacy:
        gens_before = [m.n for m in h.marks if m.what == "generation" and m.t < start]
        gens_in = [m.n for m in h.marks if m.what == "generation" and start <= m.t < end]
        base = max(gens_before) if gens_before else (min(gens_in) - 1 if gens_in else 0)
        ep.generation_bumps = int(max(0.0, (max(gens_in) - base))) if gens_in else 0
        ep.coordinator_requests = _requests(h.requests, start, end, d.kind[0] == FORMATION)
    else:
        ep.zk_ops = int(sum(m.n for m in h.marks if m.what == "zk_ops" and start <= m.t < end))
    if h.share:
        _share(h, ep, start, end)
    return ep


def _share(h: History, ep: Episode, start: float, end: float) -> None:
    """A share group's records in the window ``[start, end)``."""
    by_cause: dict[str, int] = {}
    archived = expired = 0
    for c in h.share_counts:
        if not start <= c.t < end:
            continue
        if c.what == "redelivered":
            cause = c.cause or "?"
            by_cause[cause] = by_cause.get(cause, 0) + c.n
        elif c.what == "archived":
            archived += c.n
        elif c.what == "lock_expired":
            expired += c.n
    acks = [a for a in h.share_acks if start <= a.t < end]
    count = sum(a.count for a in acks)
    ep.share_redeliveries = sum(by_cause.values())
    ep.share_redeliveries_by_cause = dict(sorted(by_cause.items()))
    ep.share_archived = archived
    ep.share_lock_expiries = expired
    ep.share_acknowledged = count
    span_s = (min(end, h.t_end) - start) / 1000.0
    ep.share_acknowledged_per_s = round(count / span_s, 2) if span_s > 0 else None
    if count:
        ep.share_ack_latency_mean_ms = sum(a.latency_sum_ms for a in acks) / count
        ep.share_ack_latency_max_ms = max(a.latency_max_ms for a in acks)


_REBALANCE_MARKS = frozenset({"rebalance", "rebalance_started"})
"""Marks of a member told to rebalance or starting to."""


def _life(h: History, topic: str, after: float, deleted: bool) -> TopicLife | None:
    """The first incarnation of ``topic`` created (or deleted) at or after ``after``."""
    best: tuple[float, TopicLife] | None = None
    for life in h.topics:
        when = life.deleted if deleted else life.created
        later = life.name == topic and when is not None and when >= after
        if later and when is not None and (best is None or when < best[0]):
            best = (when, life)
    return None if best is None else best[1]


def _key_of(partition: str) -> str:
    return partition.rpartition(":")[0]


def _discovery(h: History, topic: str, t: float) -> float | None:
    """ms from the incarnation a ``create_topic`` at ``t`` made until a member owned a partition."""
    life = _life(h, topic, t, deleted=False)
    if life is None or life.created is None:
        return None
    firsts = [o.s for o in h.owned if _key_of(o.partition) == life.key]
    return max(0.0, min(firsts) - life.created) if firsts else None


def _release(h: History, topic: str, t: float) -> float | None:
    """ms from the deletion a ``delete_topic`` at ``t`` led to until no member held a partition."""
    life = _life(h, topic, t, deleted=True)
    if life is None or life.deleted is None:
        return None
    holds = [x for x in h.holds if _key_of(x.partition) == life.key]
    if any(x.detail != "released" for x in holds):
        return None
    return max((x.e for x in holds), default=life.deleted) - life.deleted


def _lag(
    lag: Sequence[tuple[float, float]],
    start: float,
    end: float,
    bucket_ms: float,
    per_bucket: float = 0.0,
) -> tuple[int, float | None]:
    """Peak lag in ``[start, end)`` and the time from ``start`` until it came back."""
    base = 0.0
    inside: list[tuple[float, float]] = []
    for t, v in lag:
        if t + bucket_ms <= start:
            base = v  # the last bucket wholly before the change
        elif t < end:
            inside.append((t, v))
    if not inside:
        return 0, 0.0
    peak_i = max(range(len(inside)), key=lambda k: inside[k][1])
    peak = inside[peak_i][1]
    limit = base + max(LAG_RECOVERY_SHARE * (peak - base), per_bucket)
    if peak <= limit:
        return int(peak), 0.0
    for t, v in inside[peak_i:]:
        if v <= limit:
            return int(peak), max(0.0, t + bucket_ms - start)
    return int(peak), None


def _requests(
    snaps: Sequence[tuple[float, int]], start: float, end: float, formation: bool
) -> int | None:
    """Requests between the snapshot after ``start`` (0 for formation) and the one after ``end``.

    The orchestrator snapshots the coordinators' request counters right after
    each change it applies, and once at the end of the timeline.
    """
    if not snaps:
        return None
    times = [t for t, _ in snaps]

    def total_after(t: float) -> int | None:
        k = bisect.bisect_left(times, t)
        return snaps[k][1] if k < len(snaps) else None

    lo = 0 if formation else total_after(start)
    hi = total_after(end)
    if hi is None:
        hi = snaps[-1][1]
    if lo is None:
        return None
    return max(0, hi - lo)
