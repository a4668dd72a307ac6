"""The anomaly vocabulary of the invariant checkers, and which anomalies each protocol may show.

Pure, in the core: the Spark checkers (:mod:`analysis.checkers`) write these
kinds and details into their rows; the metrics, compare's clock-skew check and
the experiment analysis (series names) read them, and so can a checker that runs
beside the emulator rather than over its logs. :data:`ALLOWED` lists the
anomalies each protocol is allowed to show, as Kafka's ``verifiable_consumer``
and Jepsen's Kafka workload list their allowed error types; :func:`allowed_kinds`
adjusts them to a run's commit mode. What each kind means, and how it is found,
is in :mod:`analysis.checkers`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

DOUBLE_OWNERSHIP: Final = "double_ownership"
DOUBLE_PROCESSING: Final = "double_processing"
ORDERING_OVERLAP: Final = "ordering_overlap"
LOSS: Final = "loss"
DUPLICATE: Final = "duplicate"
COMMIT_BY_NON_OWNER: Final = "commit_by_non_owner"
STRANDED_PARTITION: Final = "stranded_partition"
INVALID_ASSIGNMENT: Final = "invalid_assignment"
UNBALANCED_ASSIGNMENT: Final = "unbalanced_assignment"
DOUBLE_ACQUISITION: Final = "double_acquisition"
"""A share group's record acquired by a member while another still held its lock
(:mod:`analysis.share`): never allowed, the share-partition's lock rules it out."""

ANOMALY_KINDS: Final = (
    DOUBLE_OWNERSHIP,
    DOUBLE_PROCESSING,
    ORDERING_OVERLAP,
    LOSS,
    DUPLICATE,
    COMMIT_BY_NON_OWNER,
    STRANDED_PARTITION,
    INVALID_ASSIGNMENT,
    UNBALANCED_ASSIGNMENT,
    DOUBLE_ACQUISITION,
)

# Why an offset was processed again (the ``detail`` of a duplicate row).
WHY_UNCOMMITTED: Final = "uncommitted_after_revoke"
WHY_ZOMBIE: Final = "zombie"
WHY_CRASH: Final = "redelivered_after_crash"
WHY_OTHER: Final = "other"
# Why produced offsets were never processed (the ``detail`` of a loss row).
LOSS_COMMITTED_BEFORE_PROCESSED: Final = "committed_before_processed"
LOSS_AT_END: Final = "unprocessed_at_end"
LOSS_SKIPPED: Final = "skipped"

ALLOWED: Final[Mapping[str, frozenset[str]]] = {
    # The Kafka 0.8 ZooKeeper consumer (at-least-once, no fencing anywhere).
    "zookeeper": frozenset(
        {
            # A consumer whose session expired keeps fetching until its new session
            # (handleNewSession) while another claims its partitions: the zombie.
            DOUBLE_OWNERSHIP,
            DOUBLE_PROCESSING,
            # Auto-commit every auto.commit.interval.ms: work after the last commit is
            # done again by the next owner; the zombie re-does the new owner's work.
            DUPLICATE,
            # Offsets are plain ZooKeeper writes: a zombie's commit is not fenced.
            COMMIT_BY_NON_OWNER,
            # "can't rebalance after N retries": the consumer owns nothing until the
            # next watch event; a crashed consumer's partitions wait for its session.
            STRANDED_PARTITION,
            # Each consumer computes its own share from its own read of the group:
            # views differ mid-change, and a consumer that gave up owns nothing.
            INVALID_ASSIGNMENT,
            # range is per topic; a consumer that gave up holds no share.
            UNBALANCED_ASSIGNMENT,
        }
    ),
    # Classic group protocol, eager (stop-the-world) rebalancing (Kafka 3.9 client).
    "classic-eager": frozenset(
        {
            # A member paused past session.timeout.ms is removed and its partitions
            # given away; it learns only on its next heartbeat/commit (partitions lost).
            DOUBLE_OWNERSHIP,
            DOUBLE_PROCESSING,
            # At-least-once: processed but uncommitted offsets after a lost/revoked
            # partition (auto-commit interval, a crash) are processed again.
            DUPLICATE,
            # A crashed member's partitions wait session.timeout.ms for the coordinator.
            STRANDED_PARTITION,
            # RangeAssignor (the default's first entry) balances per topic only.
            UNBALANCED_ASSIGNMENT,
        }
    ),
    # Classic group protocol, cooperative (incremental) rebalancing.
    "classic-cooperative": frozenset(
        {
            DOUBLE_OWNERSHIP,  # as classic-eager: a removed member learns late
            DOUBLE_PROCESSING,
            DUPLICATE,
            # Revoked partitions are unowned between the first rebalance and the
            # follow-up one; a crashed member's wait for session.timeout.ms.
            STRANDED_PARTITION,
            # The first rebalance's assignment leaves the revoked partitions out
            # until the follow-up rebalance hands them over.
            INVALID_ASSIGNMENT,
            UNBALANCED_ASSIGNMENT,
        }
    ),
    # KIP-848 consumer protocol (server-side assignment, reconciliation).
    "consumer": frozenset(
        {
            # A member fenced after a pause learns on its next heartbeat.
            DOUBLE_OWNERSHIP,
            DOUBLE_PROCESSING,
            DUPLICATE,
            # A revoked partition goes to its new owner on that member's next
            # heartbeat (group.consumer.heartbeat.interval.ms); a crashed member's
            # partitions wait group.consumer.session.timeout.ms.
            STRANDED_PARTITION,
            # Members reconcile one by one: a settled view can miss a partition in
            # flight between its revoker and its new owner.
            INVALID_ASSIGNMENT,
            UNBALANCED_ASSIGNMENT,
        }
    ),
    # KIP-932 share group: a work queue, not a consumer group (Kafka 4.0+).
    "share": frozenset(
        {
            # Several members fetch from one partition by design (ceil(M/P) each).
            DOUBLE_OWNERSHIP,
            # A record whose lock ran out is acquired again while the slow member
            # still processes it: at least once, never at most once. (With it,
            # ordering_overlap: per-partition order is not a share group's promise.)
            DOUBLE_PROCESSING,
            # Redeliveries: a release, a lock expiry, a session's close.
            DUPLICATE,
            # A crashed member's partitions (shared by nobody else when there are
            # no more members than partitions) wait for its session to time out.
            STRANDED_PARTITION,
            # "One owner a partition" is a consumer group's rule, not a share group's.
            INVALID_ASSIGNMENT,
            UNBALANCED_ASSIGNMENT,
        }
    ),
}
"""The anomalies each protocol may show with auto-commit, as Kafka's verifiable_consumer
and Jepsen list them; :func:`allowed_kinds` adjusts them to a run's commit mode.

``ordering_overlap`` is allowed wherever ``double_processing`` is (a zombie
processes beside the new owner), and where a revocation does not wait for the
application (:func:`allowed_kinds`). ``loss`` only where the commit mode
commits records before they are processed (:attr:`DeliveryMode.allows_loss`).
``commit_by_non_owner`` is never allowed for the modern protocols (the
coordinator rejects a commit from a member outside the generation / member
epoch).
"""


SERIES_SEP: Final = "@"
"""An experiment's trials share one event table as series ``<protocol>@<trial id>``."""


def base_protocol(series: str) -> str:
    """The run protocol of a series name (``classic-eager@t1`` -> ``classic-eager``)."""
    return series.split(SERIES_SEP, 1)[0]


def allowed_kinds(
    protocol: str, commit_mode: str = "auto", allows_loss: bool = False
) -> frozenset[str]:
    """The anomaly kinds ``protocol`` may show under ``commit_mode`` (:mod:`emulator.delivery`).

    Args:
        protocol: the run protocol (or a series ``<protocol>@<trial>``).
        commit_mode: :attr:`emulator.delivery.DeliveryMode.key` (``auto`` if unknown).
        allows_loss: :attr:`emulator.delivery.DeliveryMode.allows_loss`.
    """
    protocol = base_protocol(protocol)
    kinds = set(ALLOWED.get(protocol, frozenset()))
    if DOUBLE_PROCESSING in kinds:
        kinds.add(ORDERING_OVERLAP)
    if protocol == "zookeeper":
        # closeFetchers: the new owner starts after the message still in hand.
        kinds.add(ORDERING_OVERLAP)
    if protocol == "consumer" and "listener" not in commit_mode:
        # A reconciliation that does not wait for the application.
        kinds.add(ORDERING_OVERLAP)
    if allows_loss:
        kinds.add(LOSS)
    return frozenset(kinds)


def converted_protocol(protocol: str) -> str:
    """The protocol a ``protocol`` run's group is judged by once it has converted
    (``group_converted``, online migration).

    A classic run's group becomes a consumer group (``consumer``); a ``consumer``
    run's becomes a classic group whose members use the Java client's default
    assignors, range first (``classic-eager``).
    """
    protocol = base_protocol(protocol)
    return "classic-eager" if protocol == "consumer" else "consumer"


def allowed_kinds_converted(
    protocol: str, commit_mode: str = "auto", allows_loss: bool = False
) -> frozenset[str]:
    """The anomaly kinds a ``protocol`` run may show once its group has converted, or
    held a member of the other protocol.

    From then on the group holds, or has held, members of both protocols and
    the coordinator has run it as a group of the other kind: what either
    protocol allows is allowed (:func:`allowed_kinds` of both). A consumer
    group reconciles its members one at a time, so a settled view can miss a
    partition in flight (``invalid_assignment``), which an eager classic group
    never shows. Emulator choice: the checkers judge by the group's kind over
    time, not by each member's protocol.
    """
    return allowed_kinds(protocol, commit_mode, allows_loss) | allowed_kinds(
        converted_protocol(protocol), commit_mode, allows_loss
    )
