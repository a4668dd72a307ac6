"""Java ``String`` semantics that Kafka's assignors depend on.

Kafka 0.8.2.2's ``RoundRobinAssignor`` orders topic-partitions by
``TopicAndPartition.toString.hashCode`` (``"[topic,partition]"``), and every
legacy assignor orders consumer threads by ``ConsumerThreadId.compare``, which
is ``toString.compare``, i.e. ``java.lang.String.compareTo``
(K@0.8.2.2 ``core/src/main/scala/kafka/consumer/PartitionAssignor.scala``,
``TopicCount.scala``; kafka-protocols.md A2 and A6).

Both work on UTF-16 code units, not on Unicode code points, so this module
goes through UTF-16 explicitly. For text inside the Basic Multilingual Plane
(every realistic topic or consumer id) the results equal Python's own string
order; outside it they differ, and Java's is the one emulated.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable

__all__ = ["java_hashmap_hash", "java_string_hashcode", "java_string_sort_key"]

_MASK32 = 0xFFFFFFFF
_SIGN32 = 0x80000000
_POWERS: dict[int, list[int]] = {}


def _powers_of_31(length: int) -> list[int]:
    powers = _POWERS.get(length)
    if powers is None:
        powers = [pow(31, length - 1 - i, 1 << 32) for i in range(length)]
        _POWERS[length] = powers
    return powers


def _utf16_units(s: str) -> bytes:
    # surrogatepass: a Java String may hold lone surrogates, so accept them too.
    return s.encode("utf-16-be", errors="surrogatepass")


def java_string_hashcode(s: str) -> int:
    """``java.lang.String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` in ``int``.

    The sum runs over UTF-16 code units with signed 32-bit wrap-around, exactly
    as the JDK computes it (``h = 31*h + c`` per unit, starting from 0).

    Args:
        s: the string, as Java would hold it.

    An ASCII string (one UTF-16 unit per character) takes the closed form
    ``sum(c[i] * 31**(n-1-i)) mod 2**32`` in one C-level pass.

    Returns:
        The hash as a Python ``int`` in ``[-2**31, 2**31 - 1]``.
    """
    if s.isascii():
        products: Iterable[int] = map(operator.mul, s.encode("ascii"), _powers_of_31(len(s)))
        h = sum(products) & _MASK32
    else:
        data = _utf16_units(s)
        h = 0
        for i in range(0, len(data), 2):
            h = (31 * h + ((data[i] << 8) | data[i + 1])) & _MASK32
    return h - (1 << 32) if h & _SIGN32 else h


def java_hashmap_hash(s: str) -> int:
    """``HashMap.hash(key)`` of a ``String`` key: ``h ^ (h >>> 16)``, unsigned 32 bits.

    A key's bucket in a table of ``n`` (a power of two) is ``java_hashmap_hash(key) & (n - 1)``.
    """
    h = java_string_hashcode(s) & _MASK32
    return h ^ (h >> 16)


def java_string_sort_key(s: str) -> bytes:
    """A key whose natural order is ``java.lang.String.compareTo``.

    ``compareTo`` is lexicographic over UTF-16 code units; comparing the
    big-endian UTF-16 bytes gives the same order (a proper prefix sorts first).

    Args:
        s: the string.

    Returns:
        Bytes to use as a ``sorted`` key.
    """
    return _utf16_units(s)
