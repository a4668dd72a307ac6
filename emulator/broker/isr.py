"""ISR maintenance on the leader: shrink and expand, as conditional writes of the state znode.

Every ``replica.lag.time.max.ms`` the leader removes the out-of-sync
followers from the ISR (``Partition.maybeShrinkIsr``); a follower whose LEO
reaches the HW is added back (``Partition.maybeExpandIsr``). Both write the
partition state znode conditionally on the cached zkVersion
(``ReplicationUtils.updateLeaderAndIsr``, K@0.8.2.2). The write is the
shell's (ZooKeeper I/O); the steps here decide what to write and apply what
came back, one :class:`IsrWrite` at a time per partition.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Literal

from emulator.broker.log import Replica
from emulator.broker.messages import TopicPartition
from emulator.controller import LeaderIsr, out_of_sync_replicas


@dataclass(frozen=True)
class IsrWrite:
    """One ISR change the leader is writing to ZooKeeper.

    Attributes:
        tp: the partition.
        replica: this broker's replica of it (the write applies to this
            object, even if the partition's replica is replaced meanwhile).
        leader_epoch: the leader epoch the change was decided under; the write
            is void if the epoch moved meanwhile.
        new_isr: the ISR to write.
        reason: ``shrink`` or ``expand`` (the ISR_CHANGED event's reason).
        removed: the followers a shrink drops.
    """

    tp: TopicPartition
    replica: Replica
    leader_epoch: int
    new_isr: tuple[int, ...]
    reason: Literal["shrink", "expand"]
    removed: frozenset[int] = frozenset()

    @property
    def needs_version(self) -> bool:
        """The cached zkVersion is unknown (a controller's state): read the znode first."""
        return self.replica.zk_version < 0

    @property
    def expected_version(self) -> int:
        """The zkVersion the conditional write expects."""
        return self.replica.zk_version

    def state(self, broker_id: int) -> LeaderIsr:
        """The state znode's new content."""
        return LeaderIsr(
            leader=broker_id,
            leader_epoch=self.leader_epoch,
            isr=self.new_isr,
            controller_epoch=self.replica.controller_epoch,
        )

    def still_leader(self, broker_id: int) -> bool:
        """The replica is still led by ``broker_id`` under the write's epoch."""
        return self.replica.leader == broker_id and self.replica.leader_epoch == self.leader_epoch


class WriteResult(Enum):
    """How a conditional ISR write ended."""

    WRITTEN = "written"
    #: The controller moved the partition meanwhile: nothing to apply.
    MOVED = "moved"
    #: The cached zkVersion was stale: re-read the znode (:func:`apply_reread`).
    CONFLICT = "conflict"


def plan_shrink(
    tp: TopicPartition,
    rep: Replica,
    broker_id: int,
    now_ms: float,
    lag_time_max_ms: float,
    lag_max_messages: int,
) -> IsrWrite | None:
    """``maybeShrinkIsr``: the ISR without its out-of-sync followers, if any are.

    None while another ISR write of the partition is under way. Marks the
    write pending when it returns one.
    """
    if rep.isr_write_pending:
        return None
    out = out_of_sync_replicas(
        broker_id,
        rep.isr,
        rep.follower_update_ms,
        rep.follower_leo,
        rep.leo,
        now_ms,
        lag_time_max_ms=lag_time_max_ms,
        lag_max_messages=lag_max_messages,
    )
    if not out:
        return None
    new_isr = tuple(r for r in rep.isr if r not in out)
    rep.isr_write_pending = True
    return IsrWrite(tp, rep, rep.leader_epoch, new_isr, "shrink", frozenset(out))


def plan_expand(tp: TopicPartition, rep: Replica, follower: int) -> IsrWrite | None:
    """``maybeExpandIsr``: the ISR with ``follower`` added, in assignment order.

    None while another ISR write is under way or the follower is in the ISR
    already. Marks the write pending when it returns one.
    """
    if rep.isr_write_pending or follower in rep.isr:
        return None
    order = [r for r in rep.replicas if r in rep.isr or r == follower]
    order += [r for r in rep.isr if r not in order]
    rep.isr_write_pending = True
    return IsrWrite(tp, rep, rep.leader_epoch, tuple(order), "expand")


def apply_version(write: IsrWrite, broker_id: int, got: tuple[LeaderIsr, int] | None) -> bool:
    """The znode read for an unknown zkVersion: keep it if this broker still leads there.

    Returns whether the write goes ahead.
    """
    if got is None:
        return False
    st, version = got
    if st.leader != broker_id or st.leader_epoch != write.leader_epoch:
        return False
    write.replica.zk_version = int(version)
    write.replica.controller_epoch = st.controller_epoch
    return True


def apply_result(write: IsrWrite, broker_id: int, version: int | None) -> WriteResult:
    """The conditional write's result: the new zkVersion, or None when it failed."""
    if not write.still_leader(broker_id):
        return WriteResult.MOVED
    if version is None:
        return WriteResult.CONFLICT
    write.replica.isr = write.new_isr
    write.replica.zk_version = int(version)
    return WriteResult.WRITTEN


def apply_reread(write: IsrWrite, broker_id: int, got: tuple[LeaderIsr, int] | None) -> None:
    """ "Cached zkVersion ... not equal to that in zookeeper, skip updating ISR".

    The znode as re-read: keep leading only what it says this broker leads.
    """
    if got is None:
        return
    st, version = got
    rep = write.replica
    if st.leader == broker_id and st.leader_epoch == rep.leader_epoch:
        rep.isr = tuple(st.isr)
        rep.zk_version = int(version)
        rep.controller_epoch = st.controller_epoch
