"""One emulated modern consumer (classic or KIP-848) inside a consumer host.

The member state machine (:class:`emulator.modern.classic_member.ClassicMember`
or :class:`emulator.modern.consumer_member.ConsumerMember`) decides; this shell
routes its requests to the right broker through the host's per-tick batch,
hands the answers back, and runs its single poll loop: one stream whose
batches are what ``poll()`` returns (at most ``max.poll.records``). The
application "returns to poll()" when a batch is done or when it has nothing,
which is what resets the ``max.poll.interval.ms`` timer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actors.member_shell import MemberShell
from emulator.modern.messages import (
    Emit,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    GroupRequest,
    GroupResponse,
    StartFetching,
    StopFetching,
    TopicPartition,
)

STREAM = "poll-loop"


class ModernMember(MemberShell):
    """The I/O shell around one modern consumer.

    Args:
        name: scenario name (``c-0``).
        machine: the member state machine.
        emit: writes an event (kind, fields).
        now: the emulated clock.
        send: queues a request for a broker (``send(broker_id, request)``).
        bootstrap: the broker FindCoordinator goes to.
    """

    def __init__(
        self,
        name: str,
        machine: Any,
        emit: Callable[..., None],
        now: Callable[[], float],
        send: Callable[[int, GroupRequest], None],
        bootstrap: int,
    ) -> None:
        super().__init__(name, emit, now)
        self.machine = machine
        self._send = send
        self.bootstrap = bootstrap
        self.coordinator: int | None = None
        self.pending: set[int] = set()

    @property
    def member_id(self) -> str:  # type: ignore[override]
        """The protocol member id (empty until the coordinator gave one)."""
        return str(getattr(self.machine, "member_id", "") or "")

    def apply(self, outputs: list[Any]) -> None:
        """Carry out the machine's requests and effects."""
        for out in outputs:
            if not self.alive:
                return
            if isinstance(out, Emit):
                fields = dict(out.fields)
                fields.setdefault("member", self.name)
                self._emit(out.kind, **fields)
            elif isinstance(out, StopFetching):
                self.stop_fetchers(out.partitions, cut=False)
            elif isinstance(out, StartFetching):
                self.start_fetchers({tp: (STREAM, off) for tp, off in out.positions.items()})
            elif isinstance(out, GroupRequest):
                if isinstance(out, FindCoordinatorRequest) or self.coordinator is None:
                    target = self.bootstrap
                else:
                    target = self.coordinator
                self.pending.add(out.corr)
                self._send(target, out)

    def on_response(self, resp: GroupResponse) -> None:
        """An answer from a broker."""
        self.pending.discard(resp.corr)
        if not self.alive or self.paused:
            return
        if isinstance(resp, FindCoordinatorResponse) and resp.node_id >= 0:
            self.coordinator = resp.node_id
        self.apply(self.machine.on_response(self._now(), resp))

    def on_unreachable(self, request: GroupRequest) -> None:
        """A request whose broker did not answer (dead broker): rediscover."""
        self.pending.discard(request.corr)
        self.coordinator = None

    def poll(self, now: float) -> None:
        """Let the machine see the time if it has a deadline."""
        if not self.alive or self.paused:
            return
        deadline = self.machine.next_deadline()
        if deadline is not None and now >= deadline:
            self.apply(self.machine.poll(now))

    def on_batch_done(self, tp: TopicPartition, end: int) -> None:
        """A poll batch is processed: progress to commit, and the app is back in poll()."""
        self.machine.consumed(tp, end)
        self.apply(self.machine.app_polled(self._now()) or [])

    def on_batch_start(self, tp: TopicPartition) -> None:
        """poll() returned a batch: the application is busy until it is done."""
        self.apply(self.machine.app_processing(self._now()) or [])

    def on_idle(self) -> None:
        """Nothing in hand: the application sits in poll()."""
        self.apply(self.machine.app_polled(self._now()) or [])

    def close(self) -> None:
        """Graceful close (``KafkaConsumer.close()``)."""
        self.apply(self.machine.close(self._now()))
