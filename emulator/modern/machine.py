"""The member state machines the consumer host drives, as one typed interface.

:class:`MemberMachine` is what :class:`emulator.modern.classic_member.ClassicMember`
(``group.protocol=classic``) and
:class:`emulator.modern.consumer_member.ConsumerMember` (KIP-848) have in
common: the host's member shell (:class:`emulator.host.modern_shell.ModernShell`)
calls nothing else. Every input takes the emulated time ``now_ms`` and returns
:data:`emulator.modern.messages.MemberOutput` values. A capability only one
protocol needs is still part of the interface: the other protocol implements it
as a documented no-op (``ConsumerMember.update_metadata``), so callers never
probe with ``getattr``.

:func:`make_member_machine` builds the machine of a run protocol from the
scenario's Kafka settings. ``[group].static_membership`` gives every member a
``group.instance.id``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Protocol

from emulator.modern.classic_member import ClassicMember
from emulator.modern.config import ClassicConsumerConfig, modern_properties
from emulator.modern.consumer_member import make_consumer_member
from emulator.modern.messages import GroupResponse, MemberOutput, TopicPartition
from emulator.modern.share_member import ShareConsumerConfig, ShareMember
from emulator.protocols import spec

__all__ = ["MemberConfig", "MemberCounters", "MemberMachine", "make_member_machine"]


class MemberConfig(Protocol):
    """The member settings the host reads."""

    @property
    def request_timeout_ms(self) -> int:
        """``request.timeout.ms``: how long a request waits for its answer."""
        ...


class MemberCounters(Protocol):
    """The running counters the host sums for the live display."""

    @property
    def rebalances(self) -> int:
        """Rebalances the member took part in."""
        ...

    @property
    def joins(self) -> int:
        """JoinGroup requests (classic) or joining heartbeats (KIP-848) sent."""
        ...


class MemberMachine(Protocol):
    """One modern consumer's group membership, as the host drives it.

    Attributes:
        member_id: the protocol member id (empty until the coordinator gave one).
        coordinator: the broker it believes is its group coordinator, if any.
        owned: the partitions it owns now.
        state: its protocol state (a string enum).
        stats: running counters.
        config: its settings.
        closed: whether ``close()`` finished.
        app_committing: whether the application's own ``commitSync`` is in flight.
    """

    @property
    def member_id(self) -> str: ...

    @property
    def coordinator(self) -> int | None: ...

    @property
    def owned(self) -> frozenset[TopicPartition]: ...

    @property
    def state(self) -> enum.Enum: ...

    @property
    def stats(self) -> MemberCounters: ...

    @property
    def config(self) -> MemberConfig: ...

    @property
    def closed(self) -> bool: ...

    @property
    def app_committing(self) -> bool: ...

    def start(self, now_ms: float) -> list[MemberOutput]:
        """Begin: look the coordinator up and join."""
        ...

    def on_response(self, now_ms: float, response: GroupResponse) -> list[MemberOutput]:
        """An answer to one of its requests."""
        ...

    def request_failed(self, now_ms: float, corr: int) -> list[MemberOutput]:
        """Request ``corr`` got no answer (its connection dropped or it timed out)."""
        ...

    def poll(self, now_ms: float) -> list[MemberOutput]:
        """Let time pass: heartbeats, retries, timers."""
        ...

    def next_deadline(self) -> float | None:
        """When :meth:`poll` next has work to do, if ever."""
        ...

    def app_polled(self, now_ms: float) -> list[MemberOutput]:
        """The application called ``poll()``."""
        ...

    def app_idle(self, now_ms: float) -> list[MemberOutput] | None:
        """The application sits in ``poll()`` with nothing to process (``None``: nothing to do)."""
        ...

    def app_processing(self, now_ms: float) -> list[MemberOutput]:
        """``poll()`` returned a batch: the application is busy with it."""
        ...

    def consumed(self, tp: TopicPartition, next_offset: int) -> None:
        """The position of ``tp`` moved to ``next_offset``."""
        ...

    def app_commit(self, now_ms: float, *, sync: bool) -> list[MemberOutput]:
        """The application commits what it consumed (``commitSync`` or ``commitAsync``)."""
        ...

    def subscribe(
        self, now_ms: float, topics: Sequence[str], topic_pattern: str | None = None
    ) -> list[MemberOutput]:
        """``KafkaConsumer.subscribe`` with another set of topics, or a pattern
        (classic: matched on its metadata; KIP-848: the broker-side regex, 4.0+)."""
        ...

    def update_metadata(
        self, now_ms: float, partitions_per_topic: Mapping[str, int]
    ) -> list[MemberOutput]:
        """The answer to its :class:`~emulator.modern.messages.RequestMetadata`:
        the cluster's partition counts."""
        ...

    def metadata_failed(self, now_ms: float) -> list[MemberOutput]:
        """No broker answered its :class:`~emulator.modern.messages.RequestMetadata`."""
        ...

    def request_metadata_update(self, now_ms: float) -> list[MemberOutput]:
        """A fetch error or a dropped connection says its metadata may be stale."""
        ...

    def close(self, now_ms: float) -> list[MemberOutput]:
        """``KafkaConsumer.close()``."""
        ...


def make_member_machine(
    protocol: str,
    *,
    name: str,
    group: str,
    topics: list[str],
    kafka: Mapping[str, object],
    partitions_per_topic: dict[str, int],
    assignor: str | None,
    static: bool,
    corr_start: int,
    seed: int | None = None,
    rebalance_listener: str = "none",
    topic_pattern: str | None = None,
) -> MemberMachine:
    """A modern member state machine for a run protocol.

    Args:
        protocol: a run protocol with a group coordinator.
        name: the member's scenario name (also its ``client.id``).
        group: ``group.id``.
        topics: the subscription.
        kafka: the scenario's Kafka settings by Kafka name.
        partitions_per_topic: the partition counts it starts with (classic).
        assignor: the client-side (classic; ``None``: the Java client's default,
            range then cooperative-sticky) or server-side (KIP-848; ``None``: the
            coordinator's choice) assignor.
        static: give it a ``group.instance.id``.
        corr_start: the correlation id before its first request.
        seed: the scenario's seed (KIP-848 retry jitter).
        rebalance_listener: the application's rebalance listener.
        topic_pattern: the group's subscription pattern, if any (``topics`` then
            holds what it selected when the run was planned). A classic member
            subscribes with it (``subscribe(Pattern)``, matched on its metadata);
            a KIP-848 member of Kafka 4.0+ too (the coordinator resolves it).

    Returns:
        A :class:`~emulator.modern.classic_member.ClassicMember`, a
        :class:`~emulator.modern.consumer_member.ConsumerMember` or a
        :class:`~emulator.modern.share_member.ShareMember` (KIP-932).
    """
    props = modern_properties(kafka)
    if spec(protocol).generation == "share":
        return make_share_member(name, group, topics, props, corr_start, seed)
    if static:
        props["group.instance.id"] = f"{group}-{name}"
    props.setdefault("client.id", name)
    if spec(protocol).generation == "classic":
        props["partition.assignment.strategy"] = assignor or "range,cooperative-sticky"
        cfg = ClassicConsumerConfig.from_kafka(props)
        return ClassicMember(
            member=name,
            group=group,
            topics=topics,
            config=cfg,
            partitions_per_topic=partitions_per_topic,
            corr_start=corr_start,
            rebalance_listener=rebalance_listener,
            topic_pattern=topic_pattern,
        )
    return make_consumer_member(
        name=name,
        group=group,
        topics=topics,
        props=props,
        server_assignor=assignor,
        corr_start=corr_start,
        seed=seed,
        rebalance_listener=rebalance_listener,
        topic_pattern=topic_pattern,
    )


def make_share_member(
    name: str,
    group: str,
    topics: Sequence[str],
    props: Mapping[str, object],
    corr_start: int,
    seed: int | None,
) -> ShareMember:
    """A share consumer's membership from the scenario's Kafka settings (KIP-932)."""
    import random

    from emulator.kafka_keys import DEFAULT_KAFKA_VERSION, KafkaSettings, kafka_version_at_least

    version = str(props.get("kafka.version") or DEFAULT_KAFKA_VERSION)
    explicit = {k: v for k, v in props.items() if isinstance(v, int | float | str | bool)}
    kafka = KafkaSettings("share", version, explicit)
    config = ShareConsumerConfig(
        max_poll_interval_ms=kafka.get_int("max.poll.interval.ms"),
        retry_backoff_ms=kafka.get_int("retry.backoff.ms"),
        retry_backoff_max_ms=kafka.get_int("retry.backoff.max.ms"),
        request_timeout_ms=kafka.get_int("request.timeout.ms"),
        max_poll_records=kafka.get_int("max.poll.records"),
        fetch_max_wait_ms=kafka.get_int("fetch.max.wait.ms"),
        acknowledgement_mode=(
            kafka.get_str("share.acknowledgement.mode")
            if kafka_version_at_least(version, (4, 1))
            else "inferred"
        ),
        ignore_negative_epoch=kafka_version_at_least(version, (4, 1)),
    )
    return ShareMember(
        member=name,
        group=group,
        topics=topics,
        config=config,
        rng=random.Random(f"{seed}/share-member/{name}/{corr_start}"),
        corr_start=corr_start,
    )
