"""Kafka's protocol errors, as Kafka names them (style.md item 5).

One taxonomy for every modern protocol message. ``retriable`` follows the
Java client's ``RetriableException`` hierarchy (``clients/.../common/errors``,
K@3.9); the codes are those of ``org.apache.kafka.common.protocol.Errors``.
"""

from __future__ import annotations

import enum


class Errors(enum.Enum):
    """A Kafka error: ``(code, retriable)``; ``name`` is Kafka's name."""

    UNKNOWN_SERVER_ERROR = (-1, False)
    NONE = (0, False)
    UNKNOWN_TOPIC_OR_PARTITION = (3, True)  # an InvalidMetadataException
    NOT_LEADER_OR_FOLLOWER = (6, True)  # an InvalidMetadataException
    NETWORK_EXCEPTION = (13, True)  # the connection broke before the answer came
    COORDINATOR_LOAD_IN_PROGRESS = (14, True)
    COORDINATOR_NOT_AVAILABLE = (15, True)
    NOT_COORDINATOR = (16, True)
    ILLEGAL_GENERATION = (22, False)
    INCONSISTENT_GROUP_PROTOCOL = (23, False)
    UNKNOWN_MEMBER_ID = (25, False)
    INVALID_SESSION_TIMEOUT = (26, False)
    REBALANCE_IN_PROGRESS = (27, False)
    INVALID_COMMIT_OFFSET_SIZE = (28, False)
    UNSUPPORTED_VERSION = (35, False)
    INVALID_REQUEST = (42, False)
    GROUP_ID_NOT_FOUND = (69, False)
    GROUP_MAX_SIZE_REACHED = (81, False)
    FENCED_INSTANCE_ID = (82, False)
    MEMBER_ID_REQUIRED = (79, False)
    UNRELEASED_INSTANCE_ID = (111, False)
    UNSUPPORTED_ASSIGNOR = (112, False)
    STALE_MEMBER_EPOCH = (113, False)
    FENCED_MEMBER_EPOCH = (110, False)
    INVALID_RECORD_STATE = (121, False)  # KIP-932: an acknowledgement of a record not held
    SHARE_SESSION_NOT_FOUND = (122, True)  # KIP-932 (a RetriableException)
    INVALID_SHARE_SESSION_EPOCH = (123, True)  # KIP-932 (a RetriableException)
    INVALID_REGULAR_EXPRESSION = (128, False)  # KIP-848 SubscribedTopicRegex (4.0+)

    @property
    def code(self) -> int:
        """Kafka's numeric error code."""
        return self.value[0]

    @property
    def retriable(self) -> bool:
        """Whether the Java client retries it as a ``RetriableException``."""
        return self.value[1]
