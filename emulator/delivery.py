"""What delivery guarantee a generation's commit settings give (kafka-protocols.md F1).

Where a client's commit sits relative to processing decides whether a crash
loses records, whether a moved partition's records are processed twice, and
whether two members process one partition at once. The clients move a
partition's position when records are handed to the application, before it
processes them (0.8 ``ConsumerIterator.next()``; the Java ``FetchCollector``),
and commit positions:

* **0.8 ZooKeeper consumer**: ``commitOffsets`` writes every stream's consumed
  offset, the message each stream's application holds included. The
  auto-commit thread runs beside the application every
  ``auto.commit.interval.ms`` (60 s); a crash after it loses the messages in
  hand. A rebalance commits after ``closeFetchers``: the next owner starts
  right after the message in hand, which the old owner still finishes.
* **Classic Java consumer**: auto-commit, ``onJoinPrepare``'s commit and the
  rebalance callbacks all run inside ``poll()``, when the batch the last
  ``poll()`` returned has been processed: a crash loses nothing, work after
  the last commit is repeated. Cooperative: a partition revoked in
  ``onJoinComplete`` is not committed there (only a listener can), so what was
  processed since ``onJoinPrepare``'s commit is processed again.
* **KIP-848 consumer before 4.0**: the background thread auto-commits
  ``allConsumed()`` whenever the interval runs out, the batch in hand included
  (a crash loses it), and a reconciliation commits it and revokes without
  waiting for the application (two members process one partition at once).
  **From 4.0** (KAFKA-18641) the auto-commit and, with it on, the start of a
  reconciliation happen in the application's ``poll()``.
* **Manual commits** (``[group].manual_commit``, an emulator knob naming the
  usual pattern): the application commits after each processed batch.
* **A rebalance listener** (``[group].rebalance_listener = "commit-on-revoke"``):
  the revocation waits for the application's ``poll()`` and commits first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from emulator.kafka_keys import kafka_version_at_least
from emulator.modern.config import KIP848_COMMIT_ON_POLL_SINCE

MANUAL_COMMIT_MODES: Final = ("none", "sync", "async")
"""``[group].manual_commit``: how the application commits when auto-commit is off."""

REBALANCE_LISTENERS: Final = ("none", "commit-on-revoke")
"""``[group].rebalance_listener``: the application's rebalance listener."""


@dataclass(frozen=True)
class DeliveryMode:
    """A protocol's commit settings in one run.

    Attributes:
        protocol: ``zookeeper`` | ``classic-eager`` | ``classic-cooperative`` | ``consumer``.
        auto_commit: ``auto.commit.enable`` (0.8) / ``enable.auto.commit``.
        manual_commit: ``none`` | ``sync`` | ``async`` (the application's commits).
        rebalance_listener: ``none`` | ``commit-on-revoke`` (``none`` for 0.8, which has none).
        kafka_version: the emulated client release (the KIP-848 timing changed in 4.0).
    """

    protocol: str
    auto_commit: bool = True
    manual_commit: str = "none"
    rebalance_listener: str = "none"
    kafka_version: str = "3.9"

    @property
    def key(self) -> str:
        """A short name: ``auto``, ``manual-sync``, ``none`` ... with ``+listener``."""
        if self.auto_commit:
            base = "auto"
        elif self.manual_commit != "none":
            base = f"manual-{self.manual_commit}"
        else:
            base = "none"
        if self.rebalance_listener != "none" and self.protocol != "zookeeper":
            base += "+listener"
        return base

    @property
    def _kip848_before_40(self) -> bool:
        return self.protocol == "consumer" and not kafka_version_at_least(
            self.kafka_version, KIP848_COMMIT_ON_POLL_SINCE
        )

    @property
    def allows_loss(self) -> bool:
        """Whether a crash can lose records the client had committed before processing."""
        if self.protocol == "zookeeper":
            # Auto-commit, or the application's commitOffsets(): both write every
            # stream's consumed offset, the messages in hand included.
            return self.auto_commit or self.manual_commit != "none"
        return self._kip848_before_40 and self.auto_commit

    @property
    def guarantee(self) -> str:
        """One sentence on what these settings guarantee, for the report."""
        if self.protocol == "zookeeper":
            if self.auto_commit:
                return (
                    "at-least-once except at a crash: commitOffsets (auto-commit every "
                    "auto.commit.interval.ms, and at each rebalance) writes the offset past "
                    "the message each stream has in hand, so a crash after a commit loses it"
                )
            if self.manual_commit != "none":
                return (
                    "at-least-once per stream: the application's commitOffsets() writes every "
                    "stream's consumed offset, so with several streams a crash can lose "
                    "another stream's message in hand; rebalances commit nothing"
                )
            return "no commits: a new owner re-reads from the last stored offset (duplicates)"
        listener = self.rebalance_listener != "none"
        if self.protocol.startswith("classic"):
            text = (
                "at-least-once: every commit runs inside poll(), after the batch in hand, so a "
                "crash loses nothing and work after the last commit is repeated"
            )
            if self.protocol == "classic-cooperative" and not listener:
                text += (
                    "; a partition revoked after the first cooperative rebalance is not "
                    "committed at revocation, so what was processed since onJoinPrepare's "
                    "commit is processed again"
                )
            return text
        if self.auto_commit and self._kip848_before_40:
            text = (
                "at-least-once except at a crash: the background auto-commit commits records "
                "poll() returned before they are processed, so a crash can lose them; "
            )
            if listener:
                return text + "revocations wait for poll() (the listener) and commit first"
            return text + (
                "a revocation commits the batch in hand and does not wait for the application "
                "(no duplicate, but two members process one partition at once)"
            )
        if self.auto_commit:
            return (
                "at-least-once: auto-commit and reconciliations run in the application's "
                "poll() (Kafka 4.0+, KAFKA-18641), after the batch in hand"
            )
        if listener:
            return (
                "at-least-once: the revocation waits for poll() and the listener commits "
                "the revoked partitions first"
            )
        return (
            "at-least-once, with repeats at every revocation: nothing is committed before it "
            "and it does not wait for the application, so the new owner processes the "
            "batch in hand again while the old owner still does"
        )
