"""What a fault does to the members of a consumer host.

The run's fault plan (:mod:`emulator.scenario.faults`) says which fault hits which
member when, and whether it applies to a protocol at all
(:func:`emulator.scenario.faults.applicability`); :class:`HostFaults` applies it inside
the host: a process pause, slow processing, a network partition and a
subscription change. Durations are emulated ms. Each fault applied is recorded
as FAULT_INJECTED (reason = the fault kind, detail = JSON of its parameters)
and, when a timed fault ends, FAULT_CLEARED; a subscription change of a modern
member is instantaneous and has no FAULT_CLEARED.

A timed fault ends through an injected :class:`Timers` (the actor's asyncio
timers in real time; a fake in unit tests). Restarts, leaves and crashes need
the actor's I/O (ZooKeeper sessions, waiting for a drain) and are the actor's,
with :meth:`emulator.host.core.HostCore.crash` and
:meth:`~emulator.host.core.HostCore.retire` as their core.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from emulator.host.core import HostCore, Member, MemberSpec
from emulator.host.legacy_shell import LegacyShell
from emulator.host.modern_shell import ModernShell
from emulator.scenario.faults import PARTITION_TARGETS
from emulator.topic_regex import WHITELIST, FilterKind


class Timers(Protocol):
    """Runs a callback later, on the host's loop."""

    def after(self, key: tuple[str, str], delay_ms: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` ``delay_ms`` emulated ms from now; replaces ``key``'s pending timer."""
        ...


@dataclass(frozen=True)
class Subscribed:
    """What :meth:`HostFaults.subscribe` did.

    Attributes:
        ok: every named member was here.
        restarts: 0.8 consumers to restart with these specs (downtime 0),
            the emulation of their subscription change.
    """

    ok: bool
    restarts: list[MemberSpec] = field(default_factory=list)


class HostFaults:
    """The fault effects on one host's members.

    Args:
        core: the host.
        timers: ends the timed faults.
    """

    def __init__(self, core: HostCore, timers: Timers) -> None:
        self.core = core
        self.timers = timers

    def pause(self, name: str, duration_ms: float) -> bool:
        """A process pause (a long GC) of one member for ``duration_ms``.

        Everything of it stops: no poll, heartbeat or group request, no
        fetching, no processing (the batch in hand keeps its remaining time
        for after the wake). A legacy member's ZooKeeper connection goes
        through its fault proxy, cut for the pause, so the server expires its
        session for real once ``zookeeper.session.timeout.ms`` passes without
        a ping (the member needs ``MemberSpec.use_proxy``); the ZooKeeper
        callbacks that arrive meanwhile are delivered in order after the
        wake. Answers to a modern member's requests are held the same way. On
        waking the member acts on what it last knew until the protocol tells
        it otherwise.

        Returns:
            False if the member is not here or already paused.
        """
        core = self.core
        member = core.members.get(name)
        if member is None or member.paused or duration_ms <= 0:
            return False
        member.freeze(core.now_ms())
        detail: dict[str, Any] = {"duration_ms": duration_ms}
        if core.spec.members_use_zookeeper:
            cut = isinstance(member, LegacyShell) and member.hold_session("pause")
            detail["zookeeper"] = "blackholed" if cut else "no fault proxy: the session stays alive"
        core.fault("pause", name, duration_ms, **detail)

        def wake(m: Member = member) -> None:
            if not core.is_live(name, m):
                return  # left or crashed meanwhile
            if isinstance(m, LegacyShell):
                m.release_session("pause")
            now = core.now_ms()
            paused_at = m.paused_at if m.paused_at is not None else now
            # The wake is recorded before thaw() hands over what the pause held
            # (ZooKeeper callbacks, the frozen batch's end), so that every event
            # caused by the wake comes after its mark.
            core.fault(
                "pause", name, max(0.0, now - paused_at), cleared=True, duration_ms=duration_ms
            )
            m.thaw(now)

        self.timers.after((name, "pause"), duration_ms, wake)
        return True

    def slow(self, name: str, duration_ms: float, processing_ms_per_message: float) -> bool:
        """Processing costs ``processing_ms_per_message`` for this member for ``duration_ms``.

        The cost applies to every batch the member starts in the window (a
        batch's end is fixed when it starts). A modern member whose batch
        outlasts ``max.poll.interval.ms`` is handled by its state machine: the
        poll timer expires and the client leaves the group (classic dynamic
        members send LeaveGroup, B5; KIP-848 members send the leave heartbeat).
        """
        core = self.core
        member = core.members.get(name)
        if member is None or duration_ms <= 0 or processing_ms_per_message < 0:
            return False
        member.cost_override = float(processing_ms_per_message)
        core.fault(
            "slow",
            name,
            duration_ms,
            duration_ms=duration_ms,
            processing_ms_per_message=processing_ms_per_message,
        )

        def heal(m: Member = member) -> None:
            if not core.is_live(name, m):
                return
            m.cost_override = None
            core.fault("slow", name, duration_ms, cleared=True)

        self.timers.after((name, "slow"), duration_ms, heal)
        return True

    def partition(self, names: list[str], target: str, duration_ms: float) -> bool:
        """Cut these members off ``target`` for ``duration_ms``, then heal.

        ``zookeeper``: a legacy member's session traffic is cut by its proxy
            (the server expires the session if the cut outlasts
            ``zookeeper.session.timeout.ms``; kazoo reconnects after the heal
            and, after an expiry, ``handleNewSession`` runs). Consumers that
            hold no ZooKeeper session (modern ones): not applied.
        ``coordinator``: a modern member's requests to its group coordinator
            get no answer (FindCoordinator too if it goes there); each fails
            after ``request.timeout.ms`` as the member machine expects (the
            classic member times its requests out itself, the KIP-848 member
            is told). Fetches still work. Without a group coordinator (the 0.8
            consumer): not applied.
        ``brokers``: group requests to every broker are lost in the same way,
            and the member fetches nothing (its fetches are not sent).

        Whether a target means anything for the protocol is the protocol
        spec's (:attr:`~emulator.protocols.ProtocolSpec.members_use_zookeeper`,
        :attr:`~emulator.protocols.ProtocolSpec.has_coordinator`), as in
        :func:`emulator.scenario.faults.applicability`.

        Returns:
            True if the partition was applied to every named member.
        """
        if target not in PARTITION_TARGETS or duration_ms <= 0:
            return False
        core = self.core
        all_applied = True
        for name in names:
            member = core.members.get(name)
            if member is None:
                all_applied = False
                continue
            note = None
            if target == "zookeeper":
                if not core.spec.members_use_zookeeper:
                    note = "a modern consumer does not talk to ZooKeeper"
                elif not (isinstance(member, LegacyShell) and member.hold_session("partition")):
                    note = "no fault proxy: the session cannot be cut"
            elif target == "coordinator":
                if not core.spec.has_coordinator or not isinstance(member, ModernShell):
                    note = "the 0.8 consumer has no group coordinator"
                else:
                    member.cut_coordinator = True
                    if member.known_coordinator is None:
                        member.known_coordinator = member.machine.coordinator
            else:
                member.fetch_cut = True
                if isinstance(member, ModernShell):
                    member.cut = None
            applied = note is None
            all_applied = all_applied and applied
            detail: dict[str, Any] = {"target": target, "duration_ms": duration_ms}
            if note is not None:
                detail["skipped"] = note
            elif isinstance(member, ModernShell) and target == "coordinator":
                detail["broker"] = member.known_coordinator
            core.fault("network_partition", name, duration_ms, **detail)
            if not applied:
                continue

            def heal(name: str = name, m: Member = member) -> None:
                if not core.is_live(name, m):
                    return
                if target == "zookeeper":
                    if isinstance(m, LegacyShell):
                        m.release_session("partition")
                elif target == "coordinator":
                    if isinstance(m, ModernShell):
                        m.cut_coordinator = False
                else:
                    m.fetch_cut = False
                    if isinstance(m, ModernShell):
                        m.cut = set()
                core.fault("network_partition", name, duration_ms, cleared=True, target=target)

            self.timers.after((name, f"partition:{target}"), duration_ms, heal)
        return all_applied

    def subscribe(
        self,
        names: list[str],
        topics: list[str],
        topic_pattern: str | None = None,
        topic_filter: FilterKind = WHITELIST,
    ) -> Subscribed:
        """Change these members' subscription to ``topics`` (or to ``topic_pattern``).

        Classic members rejoin with the new subscription in their JoinGroup
        metadata (``subscribe()`` with another set makes
        ``rejoinNeededOrPending`` true; ``subscribe(Pattern)`` with a pattern,
        matched on their metadata); KIP-848 members send the new
        ``SubscribedTopicNames`` (what the pattern selects now) in their next
        heartbeat. A 0.8
        ``ZookeeperConsumerConnector`` cannot change its topics once its
        streams are created: this is emulated as a restart with downtime 0
        and the new subscription (same streams per topic as before), i.e. a
        graceful shutdown and a new consumer; the caller runs those restarts.
        """
        if not topics:
            return Subscribed(False)
        core = self.core
        new_topics = sorted(set(topics))
        ok = True
        restarts: list[MemberSpec] = []
        for name in names:
            member = core.members.get(name)
            spec = core.specs.get(name)
            if member is None or spec is None:
                ok = False
                continue
            streams = max(spec.subscription.values(), default=spec.pattern_streams)
            # By pattern, ``topics`` is what it selects now; a 0.8 consumer
            # subscribes by filter again (a new connector, as below).
            new = replace(
                spec,
                subscription={t: streams for t in new_topics},
                topic_pattern=topic_pattern,
                topic_filter=topic_filter,
                pattern_streams=streams if topic_pattern is not None else spec.pattern_streams,
            )
            core.specs[name] = new
            if isinstance(member, ModernShell):
                core.fault("subscribe", name, None, topics=new_topics)
                # A classic member subscribes by the pattern itself (matched on its
                # metadata); a KIP-848 member by the names it selects now.
                classic = core.spec.generation == "classic"
                member.subscribe(new_topics, topic_pattern if classic else None)
            else:
                core.fault("subscribe", name, 0.0, topics=new_topics, emulated="restart")
                restarts.append(new)
        return Subscribed(ok, restarts)
