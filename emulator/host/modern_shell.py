"""One emulated modern consumer (classic or KIP-848) inside a consumer host.

The member state machine (:class:`emulator.modern.classic_member.ClassicMember`
or :class:`emulator.modern.consumer_member.ConsumerMember`) decides; this shell
routes its requests to the right broker through the host's per-tick batch,
hands the answers back, and runs its single poll loop: one stream whose
batches are what ``poll()`` returns (at most ``max.poll.records``). The
application "returns to poll()" when a batch is done or when it has nothing,
which is what resets the ``max.poll.interval.ms`` timer.

An application with nothing in hand sits in ``poll()``: the host's loop tells
the machine so at every tick (``app_idle``, which restarts its poll timer).
The host does not visit an idle member at every tick (its due-index, R9);
the shell remembers when its application last went idle (:attr:`ModernShell.idle_at`)
and, before the machine hears anything else, replays the one ``app_idle`` of
the host's last tick (:meth:`ModernShell.catch_up`): each ``app_idle`` that
changes nothing but the poll timer overwrites the one before, so the machine
is left exactly as a visit at every tick would have left it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from emulator.host.shell import EmitFn, MemberShell
from emulator.modern.machine import MemberMachine
from emulator.modern.messages import (
    Emit,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    GroupRequest,
    GroupResponse,
    MemberOutput,
    RequestMetadata,
    StartFetching,
    StopFetching,
    TopicPartition,
)

STREAM = "poll-loop"


class ModernShell(MemberShell):
    """The shell around one modern consumer: its requests, answers and poll loop.

    Args:
        name: scenario name (``c-0``).
        machine: the member state machine.
        emit: writes an event (kind, fields).
        now_ms: the emulated clock.
        send: queues a request for a broker (``send(broker_id, request)``).
        bootstrap: the broker FindCoordinator goes to.
    """

    def __init__(
        self,
        name: str,
        machine: MemberMachine,
        emit: EmitFn,
        now_ms: Callable[[], float],
        send: Callable[[int, GroupRequest], None],
        bootstrap: int,
    ) -> None:
        super().__init__(name, emit, now_ms)
        self.machine = machine
        self._send = send
        self.bootstrap = bootstrap
        self.broker_ids: tuple[int, ...] = ()  # for the next bootstrap broker, set by the host
        self.coordinator: int | None = None
        self.pending: set[int] = set()
        self.started_ms = now_ms()
        # The broker that answered the last FindCoordinator (kept when the
        # shell forgets the coordinator), for a partition from "the coordinator".
        self.known_coordinator: int | None = None
        # Network partition: brokers this member cannot reach (None: all of them).
        self.cut: set[int] | None = set()
        self.cut_coordinator = False
        # Requests lost in a partition: corr -> when request.timeout.ms runs out.
        self.lost: dict[int, float] = {}
        # Answers that arrived during a process pause, in order.
        self._held: list[GroupResponse] = []
        # The machine's next_deadline, cached until the machine is next called
        # (every tick asks; it changes only when the machine does). A cached
        # value may be earlier than the machine's, never later.
        self._due: float | None = None
        self._due_known = False
        # When its application last sat in poll() with nothing to do and only
        # its poll timer moved (``app_idle`` returned None), if nothing happened
        # to it since: the host's ticks it skipped would each have done the same.
        self.idle_at: float | None = None
        # The application's commit pattern (``[group].manual_commit``), an
        # emulator knob, and whether it waits in a commitSync now.
        self.manual_commit = "none"
        self._commit_wait = False
        self._polled_at: float | None = None  # when the application last called poll()
        # The host's metadata call for this member (set by the host; None: none made).
        self.on_metadata: Callable[[ModernShell, RequestMetadata], None] | None = None

    @property
    def member_id(self) -> str:  # type: ignore[override]
        """The protocol member id (empty until the coordinator gave one)."""
        return self.machine.member_id or ""

    def apply(self, outputs: Sequence[MemberOutput]) -> None:
        """Carry out the machine's requests and effects (after any call into the machine)."""
        self.touch()
        self._due_known = False
        self.idle_at = None
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
            elif isinstance(out, RequestMetadata):
                if self.on_metadata is not None:
                    self.on_metadata(self, out)
            elif isinstance(out, GroupRequest):
                if isinstance(out, FindCoordinatorRequest) or self.coordinator is None:
                    target = self.bootstrap
                else:
                    target = self.coordinator
                if self.unreachable(target):
                    # Sent into the partition: no answer ever comes back.
                    self.lost[out.corr] = self._now_ms() + self._request_timeout_ms()
                    continue
                self.pending.add(out.corr)
                self._send(target, out)

    def on_response(self, resp: GroupResponse) -> None:
        """An answer from a broker (held while the member is paused)."""
        self.touch()
        self.pending.discard(resp.corr)
        if not self.alive:
            return
        if self.paused:
            self._held.append(resp)
            return
        if isinstance(resp, FindCoordinatorResponse) and resp.node_id >= 0:
            self.coordinator = resp.node_id
            self.known_coordinator = resp.node_id
        self.apply(self.machine.on_response(self._now_ms(), resp))

    def on_unreachable(self, request: GroupRequest) -> None:
        """A request whose broker is gone (the call failed): a dropped connection.

        The machine hears of it at once (``DisconnectException``); the next
        FindCoordinator goes to the next broker of the bootstrap list, as the
        client's ``leastLoadedNode`` would pick a broker it can reach.
        """
        self.touch()
        self.pending.discard(request.corr)
        self.coordinator = None
        self._due_known = False
        if self.broker_ids and (
            isinstance(request, FindCoordinatorRequest) or self.bootstrap == self.known_coordinator
        ):
            i = self.broker_ids.index(self.bootstrap) if self.bootstrap in self.broker_ids else -1
            self.bootstrap = self.broker_ids[(i + 1) % len(self.broker_ids)]
        if self.alive and not self.paused:
            self.apply(self.machine.request_failed(self._now_ms(), request.corr))

    def unreachable(self, broker: int) -> bool:
        """Whether a network partition cuts this member off ``broker``."""
        if self.cut is None:
            return True
        if broker in self.cut:
            return True
        return self.cut_coordinator and broker == self.known_coordinator

    def _request_timeout_ms(self) -> float:
        return float(self.machine.config.request_timeout_ms)

    def poll(self, now_ms: float) -> None:
        """Let the machine see the time if it has a deadline; fail lost requests.

        A request lost in a partition fails after ``request.timeout.ms``. The
        classic member times its own requests out (its ``poll`` does); the
        KIP-848 member is told through ``request_failed``.
        """
        if not self.alive or self.paused:
            return
        if self.lost:
            due = sorted(c for c, t in self.lost.items() if now_ms >= t)
            for corr in due:
                del self.lost[corr]
                self.apply(self.machine.request_failed(now_ms, corr))
        if not self._due_known:
            self._due = self.machine.next_deadline()
            self._due_known = True
        if self._due is not None and now_ms >= self._due:
            self.apply(self.machine.poll(now_ms))

    def catch_up(self, tick_ms: float) -> None:
        """The ``app_idle`` of the host's tick at ``tick_ms``, which did not visit this member.

        Only the last of the skipped ticks matters: each one's ``app_idle``
        restarted the poll timer from its own time and changed nothing else
        (it returned None, and nothing happened to the member in between).
        """
        at = self.idle_at
        if at is None or at >= tick_ms:
            return
        self.idle_at = tick_ms
        out = self.machine.app_idle(tick_ms)
        if out is not None:  # not reached: the same call returned None at the last visit
            self.apply(out)

    def next_visit(self, now_ms: float) -> float | None:
        """When the host must visit this member again (after a visit at ``now_ms``).

        At the next tick when its deadline is to be read again (the machine
        changed since it was read), or when its application would call
        ``poll()`` again other than in the idle way :meth:`catch_up` replays;
        else at the earliest of its deadline, its lost requests' timeouts and
        the end of its batch in hand.
        """
        if not self.alive or self.paused:
            return None
        if not self._due_known:
            return now_ms
        if self.idle_at is None and self._idles_next():
            return now_ms
        best = self._streams_due(now_ms)
        if self._due is not None and (best is None or self._due < best):
            best = self._due
        if self.lost:
            lost = min(self.lost.values())
            if best is None or lost < best:
                best = lost
        return best

    def _idles_next(self) -> bool:
        """Whether the next :meth:`process` may find the application with nothing in hand."""
        if not self.streams:
            return True
        return not self.draining and any(
            s.current is None and not s.queue for s in self.streams.values()
        )

    def thaw(self, now_ms: float) -> float:
        """End a pause; hand over the answers that came in meanwhile, in order.

        The member then acts on what it last knew: its fetch positions stay,
        and only the answers (and its own timers, at the next poll) tell it
        that it was fenced or lost its membership.
        """
        frozen = super().thaw(now_ms)
        held, self._held = self._held, []
        for resp in held:
            self.on_response(resp)
        return frozen

    def subscribe(self, topics: list[str], topic_pattern: str | None = None) -> None:
        """``KafkaConsumer.subscribe`` with another set of topics, or a pattern."""
        self.touch()
        self.apply(self.machine.subscribe(self._now_ms(), topics, topic_pattern))

    def metadata_refresh(self, partitions_per_topic: dict[str, int]) -> None:
        """The answer to its metadata request: the cluster's partition counts.

        A classic member matches its pattern on it and its leader rejoins if
        what it assigned changed; the KIP-848 member asks for none (the
        coordinator assigns from its own metadata).
        """
        self.touch()
        if self.alive and not self.paused:
            self.apply(self.machine.update_metadata(self._now_ms(), partitions_per_topic))

    def metadata_failed(self) -> None:
        """No broker answered its metadata request."""
        self.touch()
        if self.alive and not self.paused:
            self.apply(self.machine.metadata_failed(self._now_ms()))

    def refetch(self, tp: TopicPartition, epoch: int) -> None:
        """The fetch came to nothing (no known leader, a failed call): the metadata
        may be stale (``Metadata.requestUpdate``, see
        :meth:`~emulator.modern.classic_member.ClassicMember.request_metadata_update`)."""
        live = self._live_position(tp, epoch)
        super().refetch(tp, epoch)
        if live:
            self._metadata_stale()

    def fetched(self, tp: TopicPartition, start: int, end: int, epoch: int) -> None:
        """A fetch answer; an error (NOT_LEADER, UNKNOWN_TOPIC_OR_PARTITION) also asks
        for metadata (``FetchCollector.handleInitializeErrors``)."""
        stale = start < 0 and self._live_position(tp, epoch)
        super().fetched(tp, start, end, epoch)
        if stale:
            self._metadata_stale()

    def _live_position(self, tp: TopicPartition, epoch: int) -> bool:
        pos = self.positions.get(tp)
        return self.alive and pos is not None and pos.epoch == epoch

    def _metadata_stale(self) -> None:
        """Tell the machine (the caller touched this member: its next visit reads the deadline)."""
        if self.alive and not self.paused:
            out = self.machine.request_metadata_update(self._now_ms())
            self._due_known = False  # a classic member's metadata request may now be due later
            if out:
                self.apply(out)

    def on_batch_done(self, tp: TopicPartition, end: int) -> None:
        """A poll batch is processed: the application commits (if it does), then polls.

        With ``[group].manual_commit`` the application commits after each
        batch; ``sync`` waits for the answer before it calls ``poll()`` again
        (:meth:`app_blocked`), ``async`` does not.
        """
        self._due_known = False
        if self.manual_commit != "none":
            sync = self.manual_commit == "sync"
            self.apply(self.machine.app_commit(self._now_ms(), sync=sync))
            if sync and self.machine.app_committing:
                self._commit_wait = True
                return
        self._polled_at = self._now_ms()
        self.apply(self.machine.app_polled(self._polled_at))

    def app_blocked(self) -> bool:
        """The application waits in ``commitSync``; once it returns, it calls ``poll()``."""
        if not self._commit_wait:
            return False
        if self.machine.app_committing:
            return True
        self._commit_wait = False
        self._due_known = False
        self._polled_at = self._now_ms()
        self.apply(self.machine.app_polled(self._polled_at))
        return False

    def on_batch_start(self, tp: TopicPartition, start: int, end: int) -> None:
        """poll() returned a batch: the position moves past it; the application is busy.

        Both clients move a partition's position when ``poll()`` hands the
        records out (``FetchCollector``), so ``allConsumed()`` includes the
        batch in hand from now on.
        """
        self._due_known = False
        now = self._now_ms()
        self.machine.consumed(tp, end)
        self.apply(self.machine.app_processing(now))

    def on_poll(self) -> None:
        """``poll()`` begins: its rebalance work and commits run before records are returned."""
        now = self._now_ms()
        if self._polled_at != now:  # unless poll() was just called here
            self._polled_at = now
            self._due_known = False
            self.apply(self.machine.app_polled(now))

    def on_idle(self) -> None:
        """Nothing in hand: the application sits in poll()."""
        # None: only the poll timer moved (later), so the cached deadline
        # stays valid (at worst early).
        now = self._now_ms()
        out = self.machine.app_idle(now)
        if out is None:
            self.idle_at = now
        else:
            self.apply(out)

    def close(self) -> None:
        """Graceful close (``KafkaConsumer.close()``)."""
        self.touch()
        self.apply(self.machine.close(self._now_ms()))
