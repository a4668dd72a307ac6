"""Java collection orders that Kafka's assignors depend on (internal helpers).

Kafka's assignors are Java; where their result depends on the iteration order
of a ``java.util.HashMap`` or on ``String.compareTo``, the emulator reproduces
that order here so that the outputs match Kafka's, including Kafka's own unit
test expectations.

* ``String.compareTo`` (:func:`java_key`) compares UTF-16 code units. Python
  compares code points; the two agree unless a string holds a character
  outside the Basic Multilingual Plane, so such strings (only) are rewritten
  as their UTF-16 code units (lone surrogates are valid in a Python ``str``).
  This is :func:`emulator.javahash.java_string_sort_key`'s order, as a ``str``
  key, which is much cheaper for the common all-BMP case.
* ``HashMap<String, V>`` iteration (:func:`java_hashmap_order`): a map made by
  ``new HashMap<>()`` and filled with ``put`` has a table of 16 buckets that
  doubles whenever the size exceeds 3/4 of it (``HashMap.putVal``/``resize``,
  JDK 8+). Keys iterate by bucket index ``(h ^ (h >>> 16)) & (n - 1)`` where
  ``h = key.hashCode()``; keys sharing a bucket keep their insertion order
  (``resize`` splits a bucket into two lists that preserve relative order).
  Not emulated: a bucket of more than 8 keys in a table of 64 or more is
  turned into a red-black tree whose iteration order differs. With ``String``
  hashes that needs a run of deliberate collisions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from emulator.javahash import java_hashmap_hash

__all__ = [
    "java_hashmap_capacity",
    "java_hashmap_order",
    "java_key",
    "java_sorted",
    "static_first_key",
]

_FIRST_NON_BMP = "\U00010000"


def java_key(s: str) -> str:
    """Sort key whose order is ``java.lang.String.compareTo``.

    Args:
        s: the string.

    Returns:
        ``s`` itself when it has no character beyond U+FFFF; otherwise the
        string of its UTF-16 code units.
    """
    if s.isascii() or max(s) < _FIRST_NON_BMP:
        return s
    data = s.encode("utf-16-be", errors="surrogatepass")
    return "".join(chr((data[i] << 8) | data[i + 1]) for i in range(0, len(data), 2))


def java_sorted(strings: Iterable[str]) -> list[str]:
    """``Collections.sort`` of strings (``String.compareTo``)."""
    return sorted(strings, key=java_key)


def java_hashmap_capacity(size: int) -> int:
    """Table length of a ``new HashMap<>()`` after ``size`` distinct ``put`` calls.

    Args:
        size: number of entries.

    Returns:
        16, doubled while ``size`` exceeds three quarters of it.
    """
    capacity = 16
    while size > capacity * 3 // 4:
        capacity *= 2
    return capacity


def java_hashmap_order(keys: Sequence[str]) -> list[str]:
    """Iteration order of a ``new HashMap<String, V>()`` filled by ``put`` in ``keys`` order.

    Args:
        keys: distinct keys, in insertion order.

    Returns:
        The keys in the order ``keySet()`` / ``entrySet()`` iterates them.
    """
    mask = java_hashmap_capacity(len(keys)) - 1

    def bucket(key: str) -> int:
        return java_hashmap_hash(key) & mask

    decorated = sorted((bucket(k), i, k) for i, k in enumerate(keys))
    return [k for _, _, k in decorated]


def static_first_key(member_id: str, instance_id: str | None) -> tuple[int, str, str]:
    """Sort key of ``AbstractPartitionAssignor.MemberInfo.compareTo`` (KIP-345).

    Members with a ``group.instance.id`` come first, ordered by it; the others
    follow, ordered by member id; both with ``String.compareTo``. Java's
    ``compareTo`` returns 0 for two static members with the same instance id
    (impossible in a valid group) and the stable sort then keeps input order;
    here the member id breaks that tie so that the result never depends on
    input order.

    Args:
        member_id: the member id.
        instance_id: the ``group.instance.id``, or None for a dynamic member.

    Returns:
        A tuple to sort members by.
    """
    if instance_id is not None:
        return (0, java_key(instance_id), java_key(member_id))
    return (1, java_key(member_id), "")
