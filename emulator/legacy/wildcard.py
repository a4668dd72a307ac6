"""The 0.8 consumer's subscription by filter: ``createMessageStreamsByFilter``.

A Kafka 0.8.2.2 consumer subscribes either to named topics
(``createMessageStreams``, a ``StaticTopicCount``) or to a ``TopicFilter``
(``createMessageStreamsByFilter``, K@0.8.2.2 ``consumer/ZookeeperConsumerConnector.scala``
156-162, a ``WildcardTopicCount``). This module holds the pure parts of the
second (kafka-protocols.md A4; issue-19 facts A4):

* :class:`WildcardSubscription`: the filter and its stream count, the ids
  znode's ``subscription`` map ``{regex: numStreams}`` and ``pattern``
  (``white_list`` / ``black_list``) that ``WildcardTopicCount`` registers
  (``consumer/TopicCount.scala`` 128-148), and the topics it selects among the
  children of ``/brokers/topics`` (``getConsumerThreadIdsPerTopic``, 133-137).
* :func:`topic_event`: ``WildcardStreamsHandler.handleTopicEvent``
  (``ZookeeperConsumerConnector.scala`` 947-972), the added and deleted topics
  of one ``/brokers/topics`` change against the handler's ``wildcardTopics``.

The state machine (:mod:`emulator.legacy.consumer`) runs the steps around them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from emulator.topic_regex import WHITELIST, TopicFilter

__all__ = [
    "BLACK_LIST_PATTERN",
    "STATIC_PATTERN",
    "WHITE_LIST_PATTERN",
    "TopicChange",
    "WildcardSubscription",
    "topic_event",
]

STATIC_PATTERN: Final = "static"
"""``TopicCount.staticPattern`` (``consumer/TopicCount.scala`` 42)."""
WHITE_LIST_PATTERN: Final = "white_list"
"""``TopicCount.whiteListPattern`` (``consumer/TopicCount.scala`` 40)."""
BLACK_LIST_PATTERN: Final = "black_list"
"""``TopicCount.blackListPattern`` (``consumer/TopicCount.scala`` 41)."""


@dataclass(frozen=True)
class WildcardSubscription:
    """A ``createMessageStreamsByFilter(topicFilter, numStreams)`` subscription.

    Attributes:
        topic_filter: the ``Whitelist`` or ``Blacklist``
            (:class:`~emulator.topic_regex.TopicFilter`).
        streams: ``numStreams``: one thread id per stream on every topic it selects.
    """

    topic_filter: TopicFilter
    streams: int = 1

    def __post_init__(self) -> None:
        if self.streams < 1:
            raise ValueError("a wildcard subscription has at least one stream")

    @property
    def pattern(self) -> str:
        """``WildcardTopicCount.pattern``: ``white_list`` or ``black_list`` (141-146)."""
        return WHITE_LIST_PATTERN if self.topic_filter.kind == WHITELIST else BLACK_LIST_PATTERN

    @property
    def regex(self) -> str:
        """``topicFilter.regex``: the configured string as ``TopicFilter`` rewrote it."""
        return self.topic_filter.regex

    def topic_count_map(self) -> dict[str, int]:
        """``WildcardTopicCount.getTopicCountMap`` before its JSON escaping (TopicCount.scala 139).

        ``Map(Utils.JSONEscapeString(topicFilter.regex) -> numStreams)``: the one
        entry of the ids znode's ``subscription``. The escaping is the
        payload's business (the driver writes it); here the regex is as is.
        """
        return {self.regex: self.streams}

    def select(self, topics: Iterable[str], exclude_internal: bool) -> tuple[str, ...]:
        """The topics the filter allows, in the order given.

        ``topics.filter(topic => topicFilter.isTopicAllowed(topic, excludeInternalTopics))``
        as the bootstrap (``ZookeeperConsumerConnector.scala`` 930-932),
        ``handleTopicEvent`` (950) and ``getConsumerThreadIdsPerTopic``
        (``TopicCount.scala`` 134-135) all write it.

        Args:
            topics: children of ``/brokers/topics``.
            exclude_internal: ``exclude.internal.topics``.
        """
        return tuple(t for t in topics if self.topic_filter.allowed(t, exclude_internal))


@dataclass(frozen=True)
class TopicChange:
    """What one ``handleTopicEvent`` found.

    Attributes:
        topics: the new ``wildcardTopics`` (the filtered children, in their order).
        added: ``updatedTopics filterNot (wildcardTopics contains)``.
        deleted: ``wildcardTopics filterNot (updatedTopics contains)``.
    """

    topics: tuple[str, ...]
    added: tuple[str, ...]
    deleted: tuple[str, ...]

    @property
    def changed(self) -> bool:
        """``addedTopics.nonEmpty || deletedTopics.nonEmpty``: reinitialize (970-971)."""
        return bool(self.added or self.deleted)

    def describe(self) -> str:
        """Kafka's two info lines as one: ``added=a,b deleted=c`` (empty lists left out)."""
        parts = []
        if self.added:
            parts.append("added=" + ",".join(self.added))
        if self.deleted:
            parts.append("deleted=" + ",".join(self.deleted))
        return " ".join(parts) if parts else "unchanged"


def topic_event(
    current: Iterable[str],
    all_topics: Iterable[str],
    subscription: WildcardSubscription,
    exclude_internal: bool,
) -> TopicChange:
    """``WildcardStreamsHandler.handleTopicEvent``.

    K@0.8.2.2 ``consumer/ZookeeperConsumerConnector.scala`` 947-972.

    Args:
        current: the handler's ``wildcardTopics`` before the event.
        all_topics: the children of ``/brokers/topics`` it has just read
            (``ZookeeperTopicEventWatcher.scala`` 67).
        subscription: the filter.
        exclude_internal: ``exclude.internal.topics``.

    Returns:
        The new ``wildcardTopics`` with what was added and deleted. A change to
        a topic the filter does not allow changes neither list.
    """
    before = tuple(current)
    updated = subscription.select(all_topics, exclude_internal)
    added = tuple(t for t in updated if t not in before)
    deleted = tuple(t for t in before if t not in updated)
    return TopicChange(updated, added, deleted)
