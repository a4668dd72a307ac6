"""The share-group coordinator (KIP-932): ShareGroupHeartbeat and the simple assignor.

Follows the share-group paths of Kafka's ``GroupMetadataManager``
(``shareGroupHeartbeat``, ``shareGroupFenceMember``) and the share group's
model (``modern/share/ShareGroup``, ``ShareGroupAssignmentBuilder``), as read
into ``notes/share-facts.md`` (trunk of 2024-10-25 and the 2025 copies):

* **Join** with member epoch 0 and a non-empty subscription; a new member in a
  group of ``group.share.max.size`` (200) members gets GROUP_MAX_SIZE_REACHED.
  A member id the request does not bring is drawn as a Kafka UUID (the 4.x
  client brings its own, KIP-1082).
* **Epochs** (``throwIfShareGroupMemberEpochIsInvalid``): an epoch above the
  member's is FENCED_MEMBER_EPOCH; one below it only passes if it is the
  member's previous epoch (a lost response); an unknown member with an epoch
  other than 0 is UNKNOWN_MEMBER_ID.
* **The group epoch** goes up when a member's subscription changes (a join
  included) and when a member leaves (epoch -1) or its session of
  ``group.share.session.timeout.ms`` (45000) runs out (``shareGroupFenceMember``).
  A heartbeat that finds the group epoch ahead of the target assignment
  recomputes it with the simple assignor.
* **No reconciliation**: a member whose epoch trails the target assignment's
  takes its target at once (``ShareGroupAssignmentBuilder``: no revocation
  step, since several members may hold a partition); the response carries the
  assignment on a join or when it changed.
* **States**: Empty without members, Stable with (``ShareGroup.maybeUpdateGroupState``).
* A member leaving does not release its records: the share-partitions do that
  on the member's share-session close, or its locks expire
  (:mod:`emulator.broker.share_partition`).

The simple assignor (:func:`simple_assignment`) is the balanced one of
``SimpleHomogeneousAssignmentBuilder`` as it reached trunk in July 2025 (so in
4.2; 4.1 has it if it was picked into that branch, which is not verified): every
partition wants ``ceil(M / P)`` members; member ``i`` (in Java ``HashMap`` order
of the member ids, :func:`member_order`) wants ``ceil(d·(i+1)) - ceil(d·i)``
partitions with ``d = ceil(M/P)·P / M``. It keeps the current assignment where
that stays balanced: unsubscribed topics dropped, overfilled members' surplus
given back, over-shared partitions trimmed (lowest index first), then the
partitions short of members go to the members short of partitions, in turn.
Emulator choice: Kafka visits partitions in the hash order of their
``TopicIdPartition`` (which depends on the topic's UUID); here they go by topic
and number, so which member gets which partition may differ from Kafka's, never
how many. Earlier assignors (every member gets every partition before 2025;
hash and round-robin around 4.0) are not emulated.
"""

from __future__ import annotations

import base64
import enum
import heapq
import math
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from emulator.events import EventKind, format_partitions
from emulator.javahash import java_hashmap_hash
from emulator.modern.coordinator import CoordinatorOutput, GroupCoordinator
from emulator.modern.errors import Errors
from emulator.modern.messages import (
    LEAVE_GROUP_MEMBER_EPOCH,
    Emit,
    GroupRequest,
    GroupResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
    TopicPartition,
)

__all__ = [
    "DEFAULT_HEARTBEAT_INTERVAL_MS",
    "DEFAULT_MAX_SIZE",
    "DEFAULT_SESSION_TIMEOUT_MS",
    "ShareGroupCoordinator",
    "ShareGroupState",
    "ShareMember",
    "member_order",
    "simple_assignment",
]

DEFAULT_SESSION_TIMEOUT_MS = 45_000
"""``group.share.session.timeout.ms`` (45000; 45000..60000)."""
DEFAULT_HEARTBEAT_INTERVAL_MS = 5_000
"""``group.share.heartbeat.interval.ms`` (5000; 5000..15000)."""
DEFAULT_MAX_SIZE = 200
"""``group.share.max.size`` (200; 1..1000)."""


class ShareGroupState(enum.Enum):
    """``ShareGroup.ShareGroupState`` (Dead and Unknown are not reached here)."""

    EMPTY = "Empty"
    STABLE = "Stable"


@dataclass
class ShareMember:
    """One member of a share group (``ShareGroupMember``)."""

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    rack_id: str | None = None
    subscribed_topic_names: frozenset[str] = frozenset()
    assigned: frozenset[TopicPartition] = frozenset()


@dataclass(order=True)
class _Timer:
    deadline: float
    seq: int
    member_id: str = field(compare=False)
    cancelled: bool = field(default=False, compare=False)


def member_order(member_ids: Iterable[str]) -> list[str]:
    """The members in the order of a ``java.util.HashMap`` keyed by their ids, as the
    assignor numbers them (``new ArrayList<>(groupSpec.memberIds())``).

    Buckets are ``(h ^ h >>> 16) & (capacity - 1)`` of ``String.hashCode``, the
    capacity the smallest power of two from 16 that holds them at load factor
    0.75. Emulator choice: members of one bucket go by id (Kafka: by insertion).
    """
    ids = sorted(set(member_ids))
    cap = 16
    while len(ids) > 0.75 * cap:
        cap *= 2
    return sorted(ids, key=lambda mid: (java_hashmap_hash(mid) & (cap - 1), mid))


def simple_assignment(
    members: Mapping[str, frozenset[str]],
    current: Mapping[str, frozenset[TopicPartition]],
    topics: Mapping[str, int],
) -> dict[str, frozenset[TopicPartition]]:
    """The simple assignor's target assignment (``SimpleHomogeneousAssignmentBuilder``
    of 4.2; homogeneous subscriptions).

    Args:
        members: member id -> its subscribed topic names (all the same here).
        current: member id -> its current target partitions.
        topics: partition count of each existing topic.
    """
    ids = member_order(members)
    m = len(ids)
    if m == 0:
        return {}
    subscribed = set().union(*members.values()) & set(topics)
    targets = [(t, p) for t in sorted(subscribed) for p in range(topics[t])]
    if not targets:
        return {mid: frozenset() for mid in ids}
    n = len(targets)
    sharing = (m + n - 1) // n
    precise = sharing * n / m
    want = [math.ceil(precise * (i + 1)) - math.ceil(precise * i) for i in range(m)]
    # 1. revokeUnassignablePartitions: topics no longer subscribed go.
    by_member: list[set[TopicPartition]] = [
        {tp for tp in current.get(mid, frozenset()) if tp[0] in subscribed} for mid in ids
    ]
    by_partition: dict[TopicPartition, list[int]] = {}
    for i, held in enumerate(by_member):
        for tp in held:
            by_partition.setdefault(tp, []).append(i)
    unfilled = {i for i in range(m) if len(by_member[i]) < want[i]}
    # 2. revokeOverfilledMembers: each gives back its surplus (not marked unfilled).
    for i in range(m):
        surplus = len(by_member[i]) - want[i]
        for tp in sorted(by_member[i])[: max(0, surplus)]:
            by_member[i].discard(tp)
            by_partition[tp].remove(i)
    # 3. revokeOversharedPartitions: members past ceil(M/P) go, lowest index first.
    for tp in sorted(by_partition):
        holders = by_partition[tp]
        for i in sorted(holders):
            if len(holders) <= sharing:
                break
            holders.remove(i)
            by_member[i].discard(tp)
            unfilled.add(i)
    # 4. assignRemainingPartitions: one pass over the partitions, the unfilled
    #    members in a ring; a turn of the ring that places nothing leaves the rest
    #    short. The partition's member set is not updated during the pass (as in
    #    Kafka), so after a restart a member may be counted for one twice.
    ring = sorted(unfilled)
    pos = 0
    placed = False
    for tp in targets:
        holding: set[int] = set(by_partition.get(tp, ()))
        need = sharing - len(holding)
        while need > 0:
            if pos >= len(ring):
                if not placed or not ring:
                    break
                pos = 0
                placed = False
            i = ring[pos]
            if i in holding:
                pos += 1
                continue
            by_member[i].add(tp)
            need -= 1
            placed = True
            if len(by_member[i]) >= want[i]:
                ring.pop(pos)
            else:
                pos += 1
        if not ring:
            break
    return {mid: frozenset(by_member[i]) for i, mid in enumerate(ids)}


class ShareGroupCoordinator(GroupCoordinator):
    """The coordinator of one share group.

    Args:
        group_id: the group.
        topics: partition count of every existing topic.
        rng: the seeded generator for member ids.
        session_timeout_ms: ``group.share.session.timeout.ms``.
        heartbeat_interval_ms: ``group.share.heartbeat.interval.ms``.
        max_size: ``group.share.max.size``.
    """

    def __init__(
        self,
        group_id: str,
        *,
        topics: Mapping[str, int],
        rng: random.Random,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_INTERVAL_MS,
        max_size: int = DEFAULT_MAX_SIZE,
    ) -> None:
        self.group_id = group_id
        self._topics = dict(topics)
        self._rng = rng
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.max_size = max_size
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ShareMember] = {}
        self.target_assignment: dict[str, frozenset[TopicPartition]] = {}
        self.subscription_metadata: dict[str, int] = {}
        self.state = ShareGroupState.EMPTY
        self._timers: list[_Timer] = []
        self._timer_of: dict[str, _Timer] = {}
        self._seq = 0
        self._now = 0.0

    # --------------------------------------------------------------- protocol

    def handle(
        self, now_ms: float, request: GroupRequest, *, client_id: str = "consumer"
    ) -> list[CoordinatorOutput]:
        del client_id
        self._now = now_ms
        if not isinstance(request, ShareGroupHeartbeatRequest):
            return [GroupResponse(request.corr, error=Errors.INVALID_REQUEST)]
        return self._heartbeat(request)

    def poll(self, now_ms: float) -> list[CoordinatorOutput]:
        self._now = now_ms
        out: list[CoordinatorOutput] = []
        while self._timers and self._timers[0].deadline <= now_ms:
            t = heapq.heappop(self._timers)
            if t.cancelled:
                continue
            self._timer_of.pop(t.member_id, None)
            if t.member_id in self.members:
                out += self._fence(t.member_id, "session_timeout")
        return out

    def next_deadline(self) -> float | None:
        while self._timers and self._timers[0].cancelled:
            heapq.heappop(self._timers)
        return self._timers[0].deadline if self._timers else None

    def committed_offsets(self) -> dict[TopicPartition, int]:
        """A share group commits no offsets (its progress is the share-partitions' state)."""
        return {}

    def delete_offsets(self, now_ms: float, partitions: Iterable[TopicPartition]) -> None:
        del now_ms, partitions

    def update_topics(self, now_ms: float, topics: Mapping[str, int]) -> None:
        """A new metadata image: a subscribed topic that changed bumps the group epoch on
        the next heartbeat (the subscription metadata is recomputed there)."""
        del now_ms
        self._topics = dict(topics)

    # -------------------------------------------------------------- heartbeat

    def _heartbeat(self, req: ShareGroupHeartbeatRequest) -> list[CoordinatorOutput]:
        def fail(error: Errors, message: str) -> list[CoordinatorOutput]:
            return [ShareGroupHeartbeatResponse(req.corr, error=error, error_message=message)]

        if req.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
            return fail(Errors.INVALID_REQUEST, "MemberEpoch is invalid.")
        if req.member_epoch == 0 and not req.subscribed_topic_names:
            return fail(
                Errors.INVALID_REQUEST, "SubscribedTopicNames must be set in first request."
            )
        if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if req.member_id not in self.members:
                return fail(Errors.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member.")
            left = self._fence(req.member_id, "leave")
            left.append(
                ShareGroupHeartbeatResponse(
                    req.corr, member_id=req.member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH
                )
            )
            return left
        out: list[CoordinatorOutput] = []
        member = self.members.get(req.member_id) if req.member_id else None
        if member is None:
            if req.member_epoch != 0:
                return fail(Errors.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member.")
            if len(self.members) >= self.max_size:
                return fail(
                    Errors.GROUP_MAX_SIZE_REACHED,
                    f"The share group has reached its maximum capacity of {self.max_size} members.",
                )
            member = ShareMember(req.member_id or self._new_member_id())
            joined = True
        else:
            joined = False
            if req.member_epoch > member.member_epoch or (
                req.member_epoch < member.member_epoch
                and req.member_epoch != member.previous_member_epoch
            ):
                return fail(
                    Errors.FENCED_MEMBER_EPOCH,
                    f"The share group member has a mismatched member epoch "
                    f"({req.member_epoch} against {member.member_epoch}).",
                )
        bump = False
        if req.subscribed_topic_names is not None:
            topics = frozenset(req.subscribed_topic_names)
            bump = topics != member.subscribed_topic_names
            member.subscribed_topic_names = topics
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        if joined:
            self.members[member.member_id] = member
            out.append(
                self._emit(EventKind.MEMBER_JOINED, member_id=member.member_id, reason="new")
            )
        metadata = self._subscription_metadata()
        if metadata != self.subscription_metadata:
            self.subscription_metadata = metadata
            bump = True
        if bump:
            self.group_epoch += 1
        if self.group_epoch > self.assignment_epoch:
            out += self._update_target()
        before = member.assigned
        if member.member_epoch != self.assignment_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = self.assignment_epoch
            member.assigned = self.target_assignment.get(member.member_id, frozenset())
        self._schedule(member.member_id)
        out += self._state_events("heartbeat")
        changed = joined or req.member_epoch == 0 or member.assigned != before
        out.append(
            ShareGroupHeartbeatResponse(
                req.corr,
                member_id=member.member_id,
                member_epoch=member.member_epoch,
                heartbeat_interval_ms=self.heartbeat_interval_ms,
                assignment=tuple(sorted(member.assigned)) if changed else None,
            )
        )
        return out

    # ---------------------------------------------------------------- helpers

    def _subscription_metadata(self) -> dict[str, int]:
        names: set[str] = set()
        for m in self.members.values():
            names |= m.subscribed_topic_names
        return {t: self._topics[t] for t in sorted(names) if t in self._topics}

    def _update_target(self) -> list[CoordinatorOutput]:
        new = simple_assignment(
            {mid: m.subscribed_topic_names for mid, m in self.members.items()},
            self.target_assignment,
            self.subscription_metadata,
        )
        out: list[CoordinatorOutput] = []
        for mid, parts in sorted(new.items()):
            if parts != self.target_assignment.get(mid):
                out.append(
                    self._emit(
                        EventKind.TARGET_ASSIGNMENT,
                        member_id=mid,
                        group_epoch=self.group_epoch,
                        count=len(parts),
                        partitions=format_partitions(parts),
                        detail="assignor=simple",
                    )
                )
        self.target_assignment = new
        self.assignment_epoch = self.group_epoch
        return out

    def _fence(self, member_id: str, reason: str) -> list[CoordinatorOutput]:
        """``shareGroupFenceMember``: the member goes and the group epoch goes up."""
        self.members.pop(member_id, None)
        self.target_assignment.pop(member_id, None)
        timer = self._timer_of.pop(member_id, None)
        if timer is not None:
            timer.cancelled = True
        self.subscription_metadata = self._subscription_metadata()
        self.group_epoch += 1
        out: list[CoordinatorOutput] = [
            self._emit(EventKind.MEMBER_REMOVED, member_id=member_id, reason=reason)
        ]
        return out + self._state_events(reason)

    def _state_events(self, reason: str) -> list[CoordinatorOutput]:
        state = ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY
        if state is self.state:
            return []
        self.state = state
        return [
            self._emit(
                EventKind.GROUP_STATE_CHANGED,
                state=state.value,
                group_epoch=self.group_epoch,
                generation=self.group_epoch,
                count=len(self.members),
                reason=reason,
            )
        ]

    def _schedule(self, member_id: str) -> None:
        old = self._timer_of.get(member_id)
        if old is not None:
            old.cancelled = True
        self._seq += 1
        t = _Timer(self._now + self.session_timeout_ms, self._seq, member_id)
        self._timer_of[member_id] = t
        heapq.heappush(self._timers, t)

    def session_deadline(self, member_id: str) -> float | None:
        t = self._timer_of.get(member_id)
        return None if t is None else t.deadline

    def _new_member_id(self) -> str:
        """``Uuid.randomUuid().toString()``: 16 random bytes, URL-safe base64, no padding."""
        raw = self._rng.getrandbits(128).to_bytes(16, "big")
        return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")

    def _emit(self, kind: EventKind, **fields: object) -> Emit:
        base: dict[str, object] = {"group": self.group_id}
        base.update(fields)
        return Emit(kind, base)
