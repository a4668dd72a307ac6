"""One emulated share consumer (KIP-932) inside a consumer host.

A :class:`~emulator.host.modern_shell.ModernShell` around a
:class:`~emulator.modern.share_member.ShareMember` (the membership: its
ShareGroupHeartbeats go through the host's per-tick batch like any modern
member's group requests), with the share consumer's own fetch path instead of
offset positions: a :class:`~emulator.host.share_fetch_client.ShareFetchClient`
(ShareFetch and ShareAcknowledge to the partitions' leaders) and the
application's acknowledgements (:class:`~emulator.modern.share_acks.AckTracker`).

The application (``ShareConsumerImpl.poll``, ``notes/share-client-facts.md`` §2):

* acquired records wait in the poll loop's queue, one batch per acquired range
  (``batch_optimized``: whole batches, however ``max.poll.records`` falls);
* ``poll()`` first settles the previous batch: in implicit mode it accepts
  what the application did not acknowledge; then it returns the next batch if
  one is buffered (the acknowledgements go at once in a ShareAcknowledge), or
  asks for records (they ride on the next ShareFetch) and waits;
* in explicit mode the application acknowledges every record of a batch when
  it is done with it: RELEASE or REJECT for the scenario's shares of them
  (``[group].share_release`` and ``share_reject``, emulator knobs: the
  application is the emulator's), ACCEPT for the rest, drawn per record;
* ``close()`` sends what was acknowledged with a closing ShareAcknowledge
  (epoch -1) to every broker with a session (the broker releases what the
  member still holds), and then leaves the group.

A crash (no ``close()``) sends nothing; from 4.1 the brokers release the
member's records as its connections drop (``ShareSessionCache``'s
disconnect listener: the host tells them, :attr:`ShareShell.on_disconnect`),
in 4.0 they wait for the locks to expire.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from emulator.broker.share_partition import AckType
from emulator.events import EventKind
from emulator.host.modern_shell import STREAM, ModernShell
from emulator.host.share_fetch_client import ShareCall, ShareFetchClient
from emulator.host.shell import Chunk, EmitFn, Stream
from emulator.modern.messages import GroupRequest, MemberOutput, ShareAssignment, TopicPartition
from emulator.modern.share_acks import AckTracker
from emulator.modern.share_member import ShareMember

__all__ = ["ShareShell"]


class ShareShell(ModernShell):
    """The shell around one share consumer.

    Args:
        name: scenario name (``c-0``).
        machine: its membership.
        emit: writes an event.
        now_ms: the emulated clock.
        send: queues a group request for a broker.
        bootstrap: the broker FindCoordinator goes to first.
        client: its ShareFetch/ShareAcknowledge traffic.
        rng: the application's draws (which records it releases or rejects).
        release: the share of records the application releases (explicit mode).
        reject: the share of records it rejects (explicit mode).
        disconnect_releases: Kafka 4.1+: a crash's dropped connections release
            the member's records at once.
    """

    def __init__(
        self,
        name: str,
        machine: ShareMember,
        emit: EmitFn,
        now_ms: Callable[[], float],
        send: Callable[[int, GroupRequest], None],
        bootstrap: int,
        client: ShareFetchClient,
        rng: random.Random,
        *,
        release: float = 0.0,
        reject: float = 0.0,
        disconnect_releases: bool = True,
    ) -> None:
        super().__init__(name, machine, emit, now_ms, send, bootstrap)
        self.share = machine
        self.client = client
        mode = machine.config.acknowledgement_mode
        # 4.0 infers the mode: an application that releases or rejects calls acknowledge().
        self.implicit = mode == "implicit" or (mode == "inferred" and not (release or reject))
        self.tracker = AckTracker(implicit=self.implicit)
        self.rng = rng
        self.release_share = release
        self.reject_share = reject
        self.disconnect_releases = disconnect_releases
        self.streams[STREAM] = Stream(STREAM)
        # the broker each partition's records last came from (acknowledgements go there)
        self.fetched_from: dict[TopicPartition, int] = {}
        self.closing_share = False
        #: The host's: tell the brokers of a crash's dropped connections (4.1+).
        self.on_disconnect: Callable[[ShareShell, list[int]], None] | None = None

    # ----------------------------------------------------------- membership

    def apply(self, outputs: Sequence[MemberOutput]) -> None:
        """As the modern shell; the partitions to fetch from go to the share client."""
        rest: list[MemberOutput] = []
        for out in outputs:
            if isinstance(out, ShareAssignment):
                self.client.assign(out.partitions)
                self.touch()
            else:
                rest.append(out)
        super().apply(rest)

    # ----------------------------------------------------------- fetching

    def share_calls(
        self, leader_of: Callable[[TopicPartition], int | None], next_corr: Callable[[], int]
    ) -> list[ShareCall]:
        """The ShareFetch/ShareAcknowledge requests to send now (none while paused or cut off)."""
        if not self.alive or self.paused or self.fetch_cut:
            return []
        sendable: list[ShareCall] = []
        for c in self.client.calls(leader_of, next_corr):
            if self.unreachable(c.broker):
                self.client.failed(c.broker)  # the connection is refused: a new session later
                continue
            sendable.append(c)
        self._ack_events()
        return sendable

    def share_answered(self, broker: int, response: object) -> None:
        """A broker's answer: acquired records join the poll loop's queue."""
        from emulator.broker.share_fetch import ShareFetchResponse

        assert isinstance(response, ShareFetchResponse)
        self.touch()
        if not self.alive:
            return
        got = self.client.answered(broker, response)
        stream = self.streams[STREAM]
        for tp, acquired in got:
            self.fetched_from[tp] = broker
            stream.queue.append(
                Chunk(tp, acquired.first, acquired.last + 1, acquired.delivery_count)
            )
        if response.error.name != "NONE":
            self._emit(
                EventKind.REQUEST_ERROR,
                member=self.name,
                member_id=self.member_id or None,
                broker=broker,
                reason=response.error.name,
                detail="ShareFetch" if self.client.fetch_more else "ShareAcknowledge",
            )
        self._ack_events()
        self._maybe_leave()

    def share_failed(self, broker: int) -> None:
        """The call to ``broker`` failed (it is gone, or cut off)."""
        self.touch()
        self.client.failed(broker)
        self._ack_events()
        self._maybe_leave()

    def _ack_events(self) -> None:
        """Acknowledgements that failed are logged (their records come back later)."""
        for o in self.client.take_outcomes():
            if o.error is None or o.error.name == "NONE":
                continue
            self._emit(
                EventKind.REQUEST_ERROR,
                member=self.name,
                member_id=self.member_id or None,
                topic=o.tp[0],
                partition=o.tp[1],
                offset_start=o.batches[0].first,
                offset_end=o.batches[-1].last + 1,
                reason=o.error.name,
                detail="acknowledgement",
            )

    # ------------------------------------------------------ the application

    def on_poll(self) -> None:
        """``poll()`` with a batch buffered: settle the last one; its acknowledgements go alone."""
        super().on_poll()
        self._settle(separate=True)

    def on_idle(self) -> None:
        """``poll()`` with nothing buffered: settle the last batch and ask for records."""
        self._settle(separate=False)
        if not self.closing_share:
            self.client.want_records()
        super().on_idle()

    def on_batch_start(self, tp: TopicPartition, start: int, end: int) -> None:
        """``poll()`` returned records: the application holds them."""
        self.tracker.delivered(tp, range(start, end))
        super().on_batch_start(tp, start, end)

    def on_batch_done(self, tp: TopicPartition, end: int) -> None:
        """The batch is processed: in explicit mode the application acknowledges each record."""
        if not self.implicit:
            for offset in sorted(self.tracker.unacknowledged().get(tp, [])):
                self.tracker.acknowledge(tp, offset, self._decide())
        super().on_batch_done(tp, end)

    def _decide(self) -> AckType:
        u = self.rng.random()
        if u < self.release_share:
            return AckType.RELEASE
        if u < self.release_share + self.reject_share:
            return AckType.REJECT
        return AckType.ACCEPT

    def _settle(self, *, separate: bool) -> None:
        """The previous batch's acknowledgements become pending (implicit: accepted)."""
        if self.closing_share:
            return
        if not self.implicit and self.tracker.unacknowledged():
            return  # explicit: the application acknowledges when it is done with them
        self.tracker.on_poll()
        acks = self.tracker.take()
        if acks:
            self.client.acknowledge(acks, self.fetched_from, separate=separate)

    # ------------------------------------------------------------- lifecycle

    def close(self) -> None:
        """``close()``: acknowledgements and closing ShareAcknowledges first, then the leave."""
        self.touch()
        if self.closing_share:
            return
        self.closing_share = True
        acks = self.tracker.close()
        if acks:
            self.client.acknowledge(acks, self.fetched_from, separate=True)
        self.client.close()
        self.streams[STREAM].queue.clear()  # what is buffered goes back with the sessions
        self._maybe_leave()

    def _maybe_leave(self) -> None:
        if self.closing_share and self.client.closed and not self.machine.closed:
            self.apply(self.machine.close(self._now_ms()))

    def kill(self) -> None:
        """A crash: no acknowledgement, no leave; from 4.1 the dropped connections release."""
        brokers = sorted(b for b, s in self.client.sessions.items() if s.epoch != 0)
        super().kill()
        if self.disconnect_releases and brokers and self.on_disconnect is not None:
            self.on_disconnect(self, brokers)
