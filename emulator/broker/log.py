"""One broker's replica of a partition: the log as offsets, and the high watermark.

Messages are emulated as offset ranges, so a replica is its log start, its
log end offset (LEO) and, on the leader, the high watermark (HW) with the
leader's record of each follower's LEO (``cluster/Partition.scala``,
``cluster/Replica.scala``, K@0.8.2.2; kafka-protocols.md A8).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from emulator.broker.messages import NOT_LEADER, AckProduce


@dataclass(eq=False)
class Replica:
    """This broker's replica of one partition, and the leader's view of its followers.

    Attributes:
        replicas: the assigned replicas (head = preferred).
        leader: the leader's broker id (-1: none).
        leader_epoch, controller_epoch: from the partition state.
        isr: the in-sync replicas as last written to ZooKeeper.
        zk_version: the state znode's version, for conditional ISR writes
            (-1: unknown, read before the first write).
        leo, log_start, hw: the log.
        follower_leo: the leader's record of each follower's LEO (absent: unknown).
        follower_update_ms: when each follower's LEO was last updated
            (``logEndOffsetUpdateTimeMs``), emulated ms.
        follower_caught_up_ms: when each follower last reached the leader's LEO.
        waiters: ``(end, waiter)`` of the produces waiting for the HW to reach ``end``.
        isr_write_pending: an ISR write of this partition is under way.
    """

    replicas: tuple[int, ...]
    leader: int = -1
    leader_epoch: int = -1
    controller_epoch: int = 0
    isr: tuple[int, ...] = ()
    zk_version: int = 0
    leo: int = 0
    log_start: int = 0
    hw: int = 0
    follower_leo: dict[int, int] = field(default_factory=dict)
    follower_update_ms: dict[int, float] = field(default_factory=dict)
    follower_caught_up_ms: dict[int, float] = field(default_factory=dict)
    waiters: list[tuple[int, int]] = field(default_factory=list)
    isr_write_pending: bool = False

    def append(self, count: int, waiter: int | None = None) -> tuple[int, int]:
        """Append ``count`` messages on the leader; ``waiter`` waits for the HW to cover them.

        Returns the batch's ``[start, end)``.
        """
        start = self.leo
        self.leo += count
        if waiter is not None:
            self.waiters.append((self.leo, waiter))
        return start, self.leo

    def drop_waiter(self, waiter: int) -> None:
        """A produce stopped waiting (it timed out)."""
        self.waiters = [(e, w) for e, w in self.waiters if w != waiter]

    def advance_hw(self, broker_id: int) -> tuple[bool, list[AckProduce]]:
        """``maybeIncrementLeaderHW``: HW = the least LEO over the ISR (never backwards).

        Args:
            broker_id: this broker; nothing happens unless it leads.

        Returns:
            Whether the HW grew, and the produces it now covers (committed).
        """
        if self.leader != broker_id:
            return False, []
        hw = self.leo
        follower_leo = self.follower_leo
        for r in self.isr:
            if r == broker_id:
                continue
            leo = follower_leo.get(r)
            if leo is None:
                return False, []  # a follower of unknown LEO holds the HW where it is
            if leo < hw:
                hw = leo
        grew = hw > self.hw
        if grew:
            self.hw = hw
        acks: list[AckProduce] = []
        if self.waiters:
            keep: list[tuple[int, int]] = []
            for end, waiter in self.waiters:
                if end <= self.hw:
                    acks.append(AckProduce(waiter, True))
                else:
                    keep.append((end, waiter))
            self.waiters = keep
        return grew, acks

    def fail_waiters(self) -> list[AckProduce]:
        """Every waiting produce ends uncommitted (this broker stopped leading)."""
        acks = [AckProduce(waiter, False) for _end, waiter in self.waiters]
        self.waiters = []
        return acks

    def serve(self, offset: int | None, reset: str, max_messages: int) -> tuple[int, int]:
        """A consumer fetch's answer ``[start, end)`` from the leader, up to the HW.

        ``offset`` None or out of range (below the log start or above the LEO)
        is resolved by ``reset`` (``smallest``/``earliest``: the log start;
        otherwise the HW); an offset between the HW and the LEO gets an empty
        answer. The caller checks leadership.
        """
        if offset is None or offset < self.log_start or offset > self.leo:
            offset = self.log_start if reset in ("smallest", "earliest") else self.hw
        return offset, max(offset, min(self.hw, offset + max_messages))


def serve(
    replica: Replica | None, broker_id: int, offset: int | None, reset: str, max_messages: int
) -> tuple[int, int]:
    """A fetch answer from ``broker_id``'s replica: ``(NOT_LEADER, NOT_LEADER)`` unless it leads."""
    if replica is None or replica.leader != broker_id:
        return NOT_LEADER, NOT_LEADER
    return replica.serve(offset, reset, max_messages)
