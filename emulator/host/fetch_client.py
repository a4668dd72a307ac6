"""The consumer host's fetch-session client: one incremental fetch session per broker.

Kafka's fetch sessions (KIP-227) let a client send only what changed since its
last fetch. Here one consumer host holds one session per broker for all its
members: every fetch outstanding has a *slot*; a fetch that finds no data
stays parked at the broker (its long poll, ``fetch.max.wait.ms``), so a tick
sends a broker only the new fetches and the withdrawn slots, and a broker with
fetches parked always has a call outstanding. An answer frees its slot and goes
to the member's position (both in the broker's own wire formats,
:class:`~emulator.broker.messages.SessionFetch` and
:class:`~emulator.broker.messages.SessionAnswer`);
a failed call loses the session with every fetch in it, and those positions
are asked again (in a new session, from another leader if need be).

Emulator choices (not Kafka): one session per host rather than per consumer,
and slots instead of per-partition session entries.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from emulator.broker.messages import SessionAnswer, SessionFetch
from emulator.host.shell import MemberShell, TopicPartition


@dataclass(frozen=True)
class FetchCall:
    """One fetch-session call to a broker: what changed since the last one.

    Attributes:
        broker: the broker.
        session: the host's session key.
        new_session: open a new session (what the broker held before is dropped).
        adds: new fetches.
        withdrawn: slots no longer wanted.
        max_wait_ms: ``fetch.max.wait.ms`` (``fetch.wait.max.ms`` in 0.8): the long poll.
    """

    broker: int
    session: str
    new_session: bool
    adds: list[SessionFetch] = field(default_factory=list)
    withdrawn: list[int] = field(default_factory=list)
    max_wait_ms: float = 500.0


@dataclass(frozen=True)
class Slot:
    """An outstanding fetch: whose it is, which partition, at which epoch, at which broker."""

    member: MemberShell
    tp: TopicPartition
    epoch: int
    broker: int


class Leaders(Protocol):
    """The client's leader cache, as the fetch path uses it."""

    def leader(self, tp: TopicPartition) -> int | None:
        """The leader of ``tp`` as last known (``None``: unknown, a refresh is due)."""
        ...

    def not_leader(self, tp: TopicPartition) -> None:
        """A broker answered NotLeaderForPartition for ``tp``."""
        ...


class FetchSessionClient:
    """The fetch sessions of one consumer host.

    Args:
        session: the host's session key (``host-<index>``).
        max_messages: the most messages one fetch answer may hold.
        max_chunks: how many fetched chunks a stream may queue
            (``queued.max.message.chunks``).
        max_wait_ms: the long poll (``fetch.max.wait.ms``).
        reset: the reset policy sent with every fetch.
    """

    def __init__(
        self, session: str, max_messages: int, max_chunks: int, max_wait_ms: float, reset: str
    ) -> None:
        self.session = session
        self.max_messages = max_messages
        self.max_chunks = max_chunks
        self.max_wait_ms = max_wait_ms
        self.reset = reset
        self.inflight: set[int] = set()  # brokers with a call outstanding
        self.sessions_open: set[int] = set()
        self.slots: dict[int, Slot] = {}
        self._slot_seq = 0
        self._member_slots: dict[int, dict[TopicPartition, int]] = {}  # id(member) -> tp -> slot
        self._adds: dict[int, list[SessionFetch]] = {}
        self._withdrawn: dict[int, list[int]] = {}
        self._outstanding: dict[int, int] = defaultdict(int)  # broker -> slots there

    def calls(self, members: Iterable[MemberShell], leaders: Leaders) -> list[FetchCall]:
        """Give every position of ``members`` that wants a fetch a slot; return the calls to make.

        ``members`` are asked in the order given, which is the order of the
        new slots: the host passes, in its members' order, those visited or
        touched since its last call (no other member's wants can have
        changed). A broker gets a call when it has none outstanding and has
        slots (new or parked) or withdrawals; the caller must answer each call
        with :meth:`answered` or :meth:`failed`.
        """
        for member in members:
            wanted = member.fetch_requests(self.max_chunks)
            if not wanted:
                continue
            mine = self._member_slots.setdefault(id(member), {})
            for want in wanted:
                leader = leaders.leader(want.tp)
                if leader is None:
                    member.refetch(want.tp, want.epoch)
                    continue
                old = mine.get(want.tp)
                if old is not None:
                    self._withdraw(old)
                self._slot_seq += 1
                slot = self._slot_seq
                mine[want.tp] = slot
                self.slots[slot] = Slot(member, want.tp, want.epoch, leader)
                self._outstanding[leader] += 1
                self._adds.setdefault(leader, []).append(
                    SessionFetch(
                        slot, want.tp[0], want.tp[1], want.offset, self.reset, self.max_messages
                    )
                )
        out: list[FetchCall] = []
        for broker, n in list(self._outstanding.items()):
            if broker in self.inflight:
                continue
            if n <= 0 and broker not in self._withdrawn:
                del self._outstanding[broker]
                continue
            self.inflight.add(broker)
            out.append(
                FetchCall(
                    broker,
                    self.session,
                    broker not in self.sessions_open,
                    self._adds.pop(broker, []),
                    self._withdrawn.pop(broker, []),
                    self.max_wait_ms,
                )
            )
        return out

    def answered(self, broker: int, answers: Sequence[SessionAnswer], leaders: Leaders) -> None:
        """``broker`` answered its call: each answered slot goes to its member."""
        self.inflight.discard(broker)
        self.sessions_open.add(broker)
        for a in answers:
            entry = self._drop_slot(a.slot)
            if entry is None:
                continue  # withdrawn meanwhile
            if a.start < 0:
                leaders.not_leader(entry.tp)  # NotLeaderForPartition
            if entry.member.fetch_cut:
                entry.member.refetch(entry.tp, entry.epoch)  # cut off the brokers: lost
                continue
            entry.member.fetched(entry.tp, a.start, a.end, entry.epoch)

    def failed(self, broker: int) -> None:
        """The call to ``broker`` failed: the session is lost with every fetch in it."""
        self.inflight.discard(broker)
        self.sessions_open.discard(broker)
        self._adds.pop(broker, None)
        self._withdrawn.pop(broker, None)
        for slot in [s for s, entry in self.slots.items() if entry.broker == broker]:
            entry = self.slots[slot]
            self._drop_slot(slot)
            entry.member.refetch(entry.tp, entry.epoch)

    def unfetch(self, member: MemberShell, tps: list[TopicPartition]) -> None:
        """``member`` dropped these positions while their fetches were outstanding."""
        mine = self._member_slots.get(id(member))
        if mine:
            for tp in tps:
                slot = mine.get(tp)
                if slot is not None:
                    self._withdraw(slot)

    def unfetch_all(self, member: MemberShell) -> None:
        """Withdraw every fetch of a member that is gone."""
        mine = self._member_slots.pop(id(member), None)
        if mine:
            for slot in list(mine.values()):
                self._withdraw(slot)

    def _drop_slot(self, slot: int) -> Slot | None:
        entry = self.slots.pop(slot, None)
        if entry is None:
            return None
        mine = self._member_slots.get(id(entry.member))
        if mine is not None and mine.get(entry.tp) == slot:
            del mine[entry.tp]
        self._outstanding[entry.broker] -= 1
        return entry

    def _withdraw(self, slot: int) -> None:
        """Take an outstanding fetch back (its position was stopped or replaced)."""
        entry = self._drop_slot(slot)
        if entry is not None:
            self._withdrawn.setdefault(entry.broker, []).append(slot)
