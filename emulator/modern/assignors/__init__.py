"""Partition assignors of the broker-coordinated protocols (kafka-protocols.md B7, B8, C6).

Pure functions over sorted input: no I/O, no clock, no randomness (style.md
item 1). Two families:

* **Client side** (classic protocol, run by the group leader):
  ``range``, ``roundrobin``, ``sticky`` (EAGER) and ``cooperative-sticky``
  (COOPERATIVE and EAGER), behind :class:`ClientAssignor`; look one up with
  :func:`client_assignor`. :func:`validate_cooperative_assignment` is the
  leader's KIP-429 check.
* **Server side** (KIP-848, run by the group coordinator): ``uniform`` and
  ``range``, behind :class:`ServerAssignor`; look one up with
  :func:`server_assignor`.

Each module's docstring names the Kafka source it follows and the places
where the emulation deliberately differs.
"""

from __future__ import annotations

from collections.abc import Callable

from emulator.modern.assignors.client import (
    ClientAssignment,
    ClientAssignor,
    MemberSubscription,
    RebalanceProtocol,
)
from emulator.modern.assignors.client_range import RangeAssignor
from emulator.modern.assignors.client_roundrobin import RoundRobinAssignor
from emulator.modern.assignors.cooperative import (
    CooperativeAssignmentError,
    CooperativeStickyAssignor,
    partitions_transferring_ownership,
    validate_cooperative_assignment,
)
from emulator.modern.assignors.server import (
    GroupSpec,
    MemberSpec,
    PartitionAssignorError,
    ServerAssignment,
    ServerAssignor,
    SubscriptionType,
)
from emulator.modern.assignors.server_range import ServerRangeAssignor
from emulator.modern.assignors.sticky import IllegalAssignorStateError, StickyAssignor
from emulator.modern.assignors.uniform import UniformAssignor

__all__ = [
    "CLIENT_ASSIGNORS",
    "SERVER_ASSIGNORS",
    "ClientAssignment",
    "ClientAssignor",
    "CooperativeAssignmentError",
    "CooperativeStickyAssignor",
    "GroupSpec",
    "IllegalAssignorStateError",
    "MemberSpec",
    "MemberSubscription",
    "PartitionAssignorError",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "ServerAssignment",
    "ServerAssignor",
    "ServerRangeAssignor",
    "StickyAssignor",
    "SubscriptionType",
    "UniformAssignor",
    "client_assignor",
    "partitions_transferring_ownership",
    "server_assignor",
    "validate_cooperative_assignment",
]

CLIENT_ASSIGNORS: dict[str, Callable[[], ClientAssignor]] = {
    "range": RangeAssignor,
    "roundrobin": RoundRobinAssignor,
    "sticky": StickyAssignor,
    "cooperative-sticky": CooperativeStickyAssignor,
}
"""``partition.assignment.strategy`` names -> assignor factories."""

SERVER_ASSIGNORS: dict[str, Callable[[], ServerAssignor]] = {
    "uniform": UniformAssignor,
    "range": ServerRangeAssignor,
}
"""``group.remote.assignor`` names -> assignor factories; ``uniform`` is the default."""


def client_assignor(name: str) -> ClientAssignor:
    """The client-side assignor called ``name``.

    Args:
        name: ``"range"``, ``"roundrobin"``, ``"sticky"`` or ``"cooperative-sticky"``.

    Returns:
        A new assignor instance.

    Raises:
        KeyError: no such assignor.
    """
    try:
        return CLIENT_ASSIGNORS[name]()
    except KeyError:
        known = sorted(CLIENT_ASSIGNORS)
        raise KeyError(f"unknown client assignor {name!r}; known: {known}") from None


def server_assignor(name: str) -> ServerAssignor:
    """The server-side assignor called ``name`` (Kafka answers UNSUPPORTED_ASSIGNOR otherwise).

    Args:
        name: ``"uniform"`` or ``"range"``.

    Returns:
        A new assignor instance.

    Raises:
        KeyError: no such assignor.
    """
    try:
        return SERVER_ASSIGNORS[name]()
    except KeyError:
        known = sorted(SERVER_ASSIGNORS)
        raise KeyError(f"unknown server assignor {name!r}; known: {known}") from None
