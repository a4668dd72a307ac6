"""ZooKeeper digest authentication (``--zk-auth user:password``), without importing kazoo.

A :class:`ZkAuth` is what a run carries (it pickles, so it can travel in a
Ray actor's context); :class:`zk_registry.client.ZkClient` turns it into
kazoo's ``auth_data`` (``addauth digest user:password`` on every connection)
and ``default_acl`` (every znode it creates gets ``digest:user:<hash>`` with all
permissions, and no ``world:anyone`` entry). Without one nothing changes: znodes
get ZooKeeper's default, ``world:anyone`` with all permissions.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ZkAuth", "parse_zk_auth"]


@dataclass(frozen=True)
class ZkAuth:
    """A ZooKeeper digest identity. ``repr``/``str`` never show the password."""

    user: str
    password: str = field(repr=False)

    def __post_init__(self) -> None:
        if not self.user or ":" in self.user:
            raise ValueError("ZooKeeper digest user must be non-empty and contain no ':'")
        if not self.password:
            raise ValueError("ZooKeeper digest password must be non-empty")

    @property
    def auth_data(self) -> list[tuple[str, str]]:
        """kazoo's ``auth_data``: ``[("digest", "user:password")]``."""
        return [("digest", f"{self.user}:{self.password}")]

    @property
    def digest_id(self) -> str:
        """The ACL id ZooKeeper derives: ``user:base64(sha1("user:password"))``."""
        raw = hashlib.sha1(f"{self.user}:{self.password}".encode()).digest()
        return f"{self.user}:{base64.b64encode(raw).decode()}"

    def acl(self) -> list[Any]:
        """kazoo ``default_acl``: all permissions for this digest identity only."""
        from kazoo.security import make_digest_acl

        return [make_digest_acl(self.user, self.password, all=True)]

    def __str__(self) -> str:
        return f"digest:{self.user}"


def parse_zk_auth(text: str) -> ZkAuth:
    """``"user:password"`` -> :class:`ZkAuth` (the password may contain ``:``).

    Raises:
        ValueError: one line, without echoing the password.
    """
    user, sep, password = text.partition(":")
    if not sep or not user or not password or user != user.strip():
        raise ValueError("--zk-auth must be user:password (a non-empty user and password)")
    return ZkAuth(user, password)
