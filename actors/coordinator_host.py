"""The group coordinators one broker hosts, and the mailboxes of their answers.

A broker leads some partitions of ``__consumer_offsets``; every group that
maps to one of them (:func:`emulator.modern.placement.coordinator_partition`)
is coordinated here. Consumer hosts send their members' requests in one
batch per tick (:meth:`CoordinatorHost.exchange`) and get back every answer
that is ready for them, including JoinGroup and SyncGroup answers that the
coordinator parked until the group moved on. Timers (session expiry, join and
sync deadlines, rebalance timeouts) run from the broker's own loop through
:meth:`CoordinatorHost.poll`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from emulator.modern.errors import Errors
from emulator.modern.messages import (
    Emit,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    GroupRequest,
    GroupResponse,
)
from emulator.modern.placement import coordinator_partition

CoordinatorFactory = Callable[[str], Any]


class CoordinatorHost:
    """Coordinators of the groups whose offsets partition this broker leads.

    Args:
        broker_id: this broker.
        offsets_leaders: ``__consumer_offsets`` partition -> leader broker id.
        factory: makes the coordinator state machine of a new group (with the
            protocol's ``handle(now, request)``, ``poll(now)`` and
            ``next_deadline()``).
        emit: writes an event to this broker's log.
    """

    def __init__(
        self,
        broker_id: int,
        offsets_leaders: dict[int, int],
        factory: CoordinatorFactory,
        emit: Callable[..., None],
    ) -> None:
        self.broker_id = broker_id
        self.offsets_leaders = dict(offsets_leaders)
        self.num_partitions = len(offsets_leaders)
        self.factory = factory
        self._emit = emit
        self.coordinators: dict[str, Any] = {}
        self._partition_of: dict[str, int] = {}
        self._route: dict[int, str] = {}
        self._mailbox: dict[str, list[GroupResponse]] = defaultdict(list)
        self.requests = 0
        self.requests_by_kind: dict[str, int] = defaultdict(int)

    def coordinator_for(self, group_id: str) -> int:
        """The broker that coordinates ``group_id`` (the hash is cached per group)."""
        part = self._partition_of.get(group_id)
        if part is None:
            part = self._partition_of[group_id] = coordinator_partition(
                group_id, self.num_partitions
            )
        return self.offsets_leaders[part]

    def exchange(
        self, now_ms: float, host_key: str, requests: Iterable[GroupRequest]
    ) -> list[GroupResponse]:
        """Handle a host's batch of requests; return every answer ready for that host."""
        for req in requests:
            self.requests += 1
            self.requests_by_kind[type(req).__name__] += 1
            self._route[req.corr] = host_key
            if isinstance(req, FindCoordinatorRequest):
                self._deliver(
                    FindCoordinatorResponse(req.corr, node_id=self.coordinator_for(req.group_id))
                )
                continue
            if self.coordinator_for(req.group_id) != self.broker_id:
                self._deliver(error_response(req, Errors.NOT_COORDINATOR))
                continue
            coord = self.coordinators.get(req.group_id)
            if coord is None:
                coord = self.coordinators[req.group_id] = self.factory(req.group_id)
            self._dispatch(coord.handle(now_ms, req))
        return self._mailbox.pop(host_key, [])

    def poll(self, now_ms: float) -> None:
        """Run the timers of every coordinator that has one due."""
        for coord in list(self.coordinators.values()):
            deadline = coord.next_deadline()
            if deadline is not None and now_ms >= deadline:
                self._dispatch(coord.poll(now_ms))

    def _dispatch(self, outputs: Iterable[object]) -> None:
        for out in outputs:
            if isinstance(out, Emit):
                fields = dict(out.fields)
                fields.setdefault("broker", self.broker_id)
                self._emit(out.kind, **fields)
            elif isinstance(out, GroupResponse):
                self._deliver(out)

    def _deliver(self, resp: GroupResponse) -> None:
        host = self._route.pop(resp.corr, None)
        if host is not None:  # a host that is gone gets nothing
            self._mailbox[host].append(resp)

    def stats(self) -> dict[str, Any]:
        """Requests served, by kind, and the groups coordinated here."""
        return {
            "requests": self.requests,
            "by_kind": dict(self.requests_by_kind),
            "groups": sorted(self.coordinators),
        }


def error_response(req: GroupRequest, error: Errors) -> GroupResponse:
    """An error answer of the right response type for ``req``."""
    from emulator.modern import messages as m

    kinds: dict[type, type] = {
        m.JoinGroupRequest: m.JoinGroupResponse,
        m.SyncGroupRequest: m.SyncGroupResponse,
        m.HeartbeatRequest: m.HeartbeatResponse,
        m.LeaveGroupRequest: m.LeaveGroupResponse,
        m.OffsetCommitRequest: m.OffsetCommitResponse,
        m.OffsetFetchRequest: m.OffsetFetchResponse,
        m.ConsumerGroupHeartbeatRequest: m.ConsumerGroupHeartbeatResponse,
    }
    cls = kinds.get(type(req), GroupResponse)
    resp: GroupResponse = cls(req.corr, error)
    return resp
