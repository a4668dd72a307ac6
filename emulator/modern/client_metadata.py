"""The Java consumer's metadata cache and when it asks for more, without I/O.

Kafka 3.9's ``org.apache.kafka.clients.Metadata`` decides *when* a client
sends a MetadataRequest; ``ConsumerMetadata`` decides *what* it keeps of the
answer. :class:`ClientMetadata` holds both for one classic consumer
(:class:`emulator.modern.classic_member.ClassicMember`), which asks its host
for a refresh (:class:`emulator.modern.messages.RequestMetadata`) when
:meth:`ClientMetadata.request_due_at` comes and hands the answer back through
:meth:`ClientMetadata.update`.

When (K@3.9 ``clients/.../Metadata.java``):

* ``timeToNextUpdate(now)`` = max(time to expire, ``timeToAllowUpdate``),
  where the cache expires ``metadata.max.age.ms`` after the last successful
  refresh (``lastSuccessfulRefreshMs``), or at once when an update was
  requested (``needFullUpdate`` / ``needPartialUpdate``);
* ``timeToAllowUpdate(now)`` = the back-off after the last attempt
  (``lastRefreshMs`` + ``retry.backoff.ms``);
* ``requestUpdate`` sets ``needFullUpdate`` (a fetch error, a dropped
  connection, a pattern subscription about to rejoin);
  ``requestUpdateForNewTopics`` also sets ``lastRefreshMs`` to 0, so the
  request goes at once (a new subscription, the leader's group subscription);
* one request at a time (``NetworkClient.DefaultMetadataUpdater``: no new one
  while ``inProgress``); an answer is an ``update`` (``updateVersion`` + 1,
  both times set), a failure is ``failedUpdate`` (``lastRefreshMs`` only).

What (K@3.9 ``ConsumerMetadata.retainTopic``): a topic the member or, for a
leader, the group subscribes to; else not an internal topic when
``exclude.internal.topics``; else one its pattern matches in full. The
retention rule is the caller's (:meth:`update` takes the retained topics).

Emulator choices (not Kafka):

* The back-off is ``retry.backoff.ms`` fixed: Kafka 3.7+ grows it
  exponentially with failed attempts and with answers equal to the last one
  (KIP-580, up to ``retry.backoff.max.ms``), as the member's other back-offs
  are fixed here.
* Every answer is the broker's whole metadata cache, so every update is a
  full one (a partial update for new topics leaves ``lastSuccessfulRefreshMs``
  in Kafka).
* The member's first metadata is what its host knew when it was created, taken
  as the answer to the request Kafka sends at the first ``poll()`` (the
  ``ConsumerCoordinator`` constructor's ``requestUpdate(true)``):
  :meth:`bootstrap`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["ClientMetadata"]


@dataclass
class ClientMetadata:
    """One client's ``Metadata``: its cluster view, version and refresh timers.

    Args:
        max_age_ms: ``metadata.max.age.ms``.
        backoff_ms: ``retry.backoff.ms`` (the refresh back-off).

    Attributes:
        topics: topic -> partition count, as the last answer held them (retained topics).
        version: ``updateVersion``: 1 + the number of answers since :meth:`bootstrap`.
        last_refresh_ms: ``lastRefreshMs`` (the last answer or failure).
        last_success_ms: ``lastSuccessfulRefreshMs``.
        need_full: ``needFullUpdate``.
        need_partial: ``needPartialUpdate`` (new topics).
        in_flight: a request was handed to the host and is not answered yet.
        request_version: ``requestVersion``: new-topic requests so far.
        sent_version: the ``request_version`` of the request in flight.
        refreshes: answers received (a counter for tests and stats).
    """

    max_age_ms: float
    backoff_ms: float
    topics: dict[str, int] = field(default_factory=dict)
    version: int = 0
    last_refresh_ms: float = 0.0
    last_success_ms: float = 0.0
    need_full: bool = False
    need_partial: bool = False
    in_flight: bool = False
    request_version: int = 0
    sent_version: int = 0
    refreshes: int = 0

    def bootstrap(self, now_ms: float, topics: Mapping[str, int]) -> None:
        """The first metadata, taken as answered at ``now_ms`` (an emulator choice)."""
        self.topics = dict(topics)
        self.version = 1
        self.last_refresh_ms = self.last_success_ms = now_ms

    def request_update(self) -> int:
        """``requestUpdate``: a full update as soon as the back-off allows; returns ``version``."""
        self.need_full = True
        return self.version

    def request_update_for_new_topics(self) -> int:
        """``requestUpdateForNewTopics``: an update at once (``lastRefreshMs = 0``)."""
        self.last_refresh_ms = -math.inf
        self.need_partial = True
        self.request_version += 1
        return self.version

    @property
    def update_requested(self) -> bool:
        """``updateRequested``: an update was asked for and has not come yet."""
        return self.need_full or self.need_partial

    def time_to_allow_update(self, now_ms: float) -> float:
        """``timeToAllowUpdate``: ms until the back-off after the last attempt is over."""
        return max(self.last_refresh_ms + self.backoff_ms - now_ms, 0.0)

    def time_to_next_update(self, now_ms: float) -> float:
        """``timeToNextUpdate``: ms until a request is due (0: due now)."""
        expire = (
            0.0
            if self.update_requested
            else max(self.last_success_ms + self.max_age_ms - now_ms, 0.0)
        )
        return max(expire, self.time_to_allow_update(now_ms))

    def request_due_at(self, now_ms: float) -> float | None:
        """When the next request goes (``None``: one is in flight)."""
        if self.in_flight:
            return None
        return now_ms + self.time_to_next_update(now_ms)

    def sent(self) -> None:
        """A request was handed to the host (``newMetadataRequestAndVersion``)."""
        self.in_flight = True
        self.sent_version = self.request_version

    def update(self, now_ms: float, topics: Mapping[str, int]) -> None:
        """``Metadata.update``: an answer (a full one) with the retained ``topics``.

        New topics asked for after the request went are still wanted
        (``needPartialUpdate = requestVersion < this.requestVersion``).
        """
        self.topics = dict(topics)
        self.version += 1
        self.refreshes += 1
        self.last_refresh_ms = self.last_success_ms = now_ms
        self.need_full = False
        self.need_partial = self.sent_version < self.request_version
        self.in_flight = False

    def failed(self, now_ms: float) -> None:
        """``failedUpdate``: no broker answered; the next try waits the back-off."""
        self.last_refresh_ms = now_ms
        self.in_flight = False
