"""ZooKeeper 3.8.0's data tree as a pure, synchronous, deterministic model.

This is the data layer of the simulated ZooKeeper (issue-18 design §3.1, §3.3,
§3.6): znodes, their ``Stat``, the order of their children, the write operations
with the server's validation order and error codes, ephemerals per session, and
``multi``. Sessions, connections, watches, the request pipeline and the ensemble
sit on top (``server.py``); this module only says *what changed* so that layer
can fire watches. It never reads a clock and never allocates a zxid: the caller
passes ``zxid`` and ``time_ms`` to every write.

Sources: ``ZK@3.8.0`` below is apache/zookeeper at tag ``release-3.8.0-1`` (the
"Prepared 3.8.0" release commit; the repository has no plain ``release-3.8.0``
tag; Debian's ``zookeeper 3.8.0-11`` is built from 3.8.0), with ``S =
zookeeper-server/src/main/java/org/apache/zookeeper``. The facts relied on:

* **Where a write is checked.** The leader's ``PrepRequestProcessor`` validates
  a write against the *outstanding change records* (``getRecordForPath``, S/server/
  PrepRequestProcessor.java 165-190) and turns it into a txn; ``DataTree.processTxn``
  then applies it without further checks. :class:`DataTree` does the same in one
  step: each write is prepared against a scratch view (:class:`_View`, the change
  records) and then applied. ``multi`` prepares all its ops against one view, so an
  op sees the ops before it (create ``/a`` then ``/a/b``; delete ``/a/b`` then ``/a``).
* **Check order and errors** (PrepRequestProcessor.java): ``create``
  (``pRequest2TxnCreate`` 657-740): no ``/`` or a NUL -> BadArguments
  (``validatePathForCreate`` 302-309); parent missing -> NoNode; the parent's ACL;
  for a sequential node the name gets ``%010d`` of the parent's *persisted*
  ``cversion``; ``PathUtils.validatePath`` of the final path -> BadArguments; the
  node exists -> NodeExists; ephemeral parent -> NoChildrenForEphemerals. So
  ``create("/missing/x/")`` is NoNode, ``create("/a/")`` with ``/a`` present is
  BadArguments, and with ``sequence`` it is the valid ``/a/0000000000``.
  ``delete`` (359-386): no ``/``, a NUL or a special path (``/``, ``/zookeeper``,
  ``/zookeeper/quota``, ``/zookeeper/config``) -> BadArguments
  (``getParentPathAndValidate`` 751-757; no ``validatePath``); parent missing ->
  NoNode; the parent's ACL; node missing -> NoNode; version -> BadVersion; children
  -> NotEmpty. ``setData`` (387-409): ``validatePath`` -> BadArguments; missing ->
  NoNode; ACL; version -> BadVersion. ``check`` (631-646): ``validatePath``,
  NoNode, BadVersion. A version of ``-1`` matches anything
  (``checkAndIncVersion`` 759-764).
* **Failed writes consume a zxid.** ``pRequestHelper`` calls ``zks.getNextZxid()``
  before preparing (PrepRequestProcessor.java 800-839) and ``pRequest2Txn`` sets the
  txn header first (320-324); a ``KeeperException`` turns the header into an
  ``OpCode.error`` txn with an ``ErrorTxn`` (934-937), which is proposed and logged
  like any txn (S/server/quorum/ProposalRequestProcessor.java 82-85) and advances
  ``lastProcessedZxid`` when applied (S/server/DataTree.java 957-959, 1105-1106). A
  ``multi`` takes one zxid for all its ops, failed or not (839). So every write
  here advances :attr:`DataTree.last_zxid` even when it raises; reads never do.
* **cversion and pzxid.** The *persisted* ``cversion`` counts child creations
  only: prepare sets the parent's to ``cversion + 1`` and its pzxid to the zxid on
  create (PrepRequestProcessor.java 706, 726-729; applied by ``DataTree.createNode``
  444-532: "only update when it's larger", 477-485); delete moves the parent's pzxid
  only (``deleteNode`` 543-630, 558-563), never its cversion. The ``Stat`` a client
  sees translates it: ``cversion * 2 - numChildren`` (``DataNode.copyStat``,
  S/server/DataNode.java 145-164). So creating a child shows cversion 1, deleting it
  2, while the next sequential name still uses the persisted 1.
* **Stat** (``copyStat``): ``dataLength`` is 0 for null data; ``ephemeralOwner`` is
  the session id (0 for persistent); ``numChildren`` the children count. A new node
  has czxid = mzxid = pzxid = zxid, ctime = mtime = time, versions 0
  (``DataTree.createStat`` 1928-1939). ``setData`` sets data, mtime, mzxid and
  version (632-663).
* **The initial tree** (``DataTree`` fields and constructor 269-309): ``/`` (data
  ``b""``, all-zero stat) with child ``zookeeper``; ``/zookeeper`` with children
  ``quota`` and ``config``, all added without moving cversion, so a fresh server
  reports ``/`` with cversion -1 and numChildren 1, and ``/zookeeper`` with cversion
  -2. ``""`` is an alias of ``/`` in the node map (290-292): a read of ``""`` reads
  the root. ``addConfigNode`` (317-333) gives ``/zookeeper/config`` ``READ_ACL_UNSAFE``
  through ``setACL(path, acl, -1)``, which leaves its aversion at -1; that is the one
  ACL modelled here: creating under it, deleting its children or setting its data is
  NoAuth. The data a quorum member writes there (its dynamic config) is not modelled
  (``b""``); nothing in the project reads ``/zookeeper``.
* **Reads.** ``getData``/``getChildren`` look the path up as given, no validation
  (S/server/FinalRequestProcessor.java 645-669); ``exists`` refuses a NUL with
  BadArguments first (364-372). ``getChildren`` returns
  ``new ArrayList<>(node.getChildren())`` (DataTree.java 723-749): the iteration
  order of the node's ``HashSet<String>``, created as ``new HashSet<String>(8)`` at
  the first child (``DataNode.addChild``, DataNode.java 101-107) -- see
  :class:`JavaHashSet`.
* **Ephemerals and closeSession.** ``createNode`` adds an ephemeral's path to the
  session's ``HashSet<String>`` (default capacity; DataTree.java 491-505);
  ``deleteNode`` removes it. ``closeSession`` (PrepRequestProcessor.java 588-628)
  takes ``getEphemerals(sessionId)`` -- a ``HashSet.clone()`` (DataTree.java
  194-204) -- and the txn lists it as ``new ArrayList<>(es)``; ``killSession``
  deletes in that list's order under the one zxid (DataTree.java 1120-1182). The
  clone re-hashes into a fresh table, so that order is the clone's
  (:meth:`JavaHashSet.java_clone`), not always the set's own.
* **multi** (PrepRequestProcessor.java 829-901; DataTree.java 965-1033;
  FinalRequestProcessor.java 229-269): ops are prepared in order; at the first
  failure the change records are rolled back and every later op becomes an
  ``ErrorTxn(RUNTIMEINCONSISTENCY)``; when applied, the ops before the failing one
  become ``ErrorTxn(0)``. The reply header's error is 0 and the per-op results
  carry the codes, which kazoo turns into ``RolledBackError`` (0), the failing op's
  error, and ``RuntimeInconsistency`` (-2) (kazoo 2.11 ``protocol/serialization.py``
  ``Transaction.deserialize``). A successful multi's results are, per op, the
  created path (kazoo sends ``Create``, not ``Create2``), ``True`` for delete and
  check, and the new ``ZnodeStat`` for setData.
* **Watch triggers** (what :class:`Change` reports, in the server's order):
  create -> ``NodeCreated`` on the path then ``NodeChildrenChanged`` on the parent
  (DataTree.java 530-531); delete -> ``NodeDeleted`` on the path (data and child
  watches of the path) then ``NodeChildrenChanged`` on the parent (627-629);
  setData -> ``NodeDataChanged`` (661). The parent of a top-level node is ``/``.

Not modelled: ACLs (beyond ``/zookeeper/config``), quotas, containers and TTL
nodes (``EphemeralType`` extended types are off by default), the digest, and what a
member rebuilt from a snapshot does to children order (one logical tree).
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeAlias

from kazoo.exceptions import (
    BadArgumentsError,
    BadVersionError,
    NoAuthError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    RuntimeInconsistency,
    ZookeeperError,
)
from kazoo.protocol.states import ZnodeStat

from emulator.javahash import java_hashmap_hash as java_hash

__all__ = [
    "ROOT",
    "Change",
    "ChangeKind",
    "CheckOp",
    "CloseSessionResult",
    "CreateOp",
    "CreateResult",
    "DataTree",
    "DeleteOp",
    "DeleteResult",
    "JavaHashSet",
    "MultiOp",
    "MultiResult",
    "SetDataOp",
    "SetDataResult",
    "Znode",
    "invalid_path_reason",
    "java_hash",
    "table_size_for",
]

ROOT = "/"
"""The root znode's path."""

_SPECIAL_PATHS = frozenset({"/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"})
"""``DataTree.isSpecialPath`` (DataTree.java 341-346): never deletable."""
_READ_ONLY = "/zookeeper/config"
"""The one znode whose ACL (``READ_ACL_UNSAFE``) refuses writes to every client."""

_INT32_MIN = -(1 << 31)
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


def _i32(value: int) -> int:
    """Java ``int`` wrap-around (versions and cversions are ``int``)."""
    return ((value - _INT32_MIN) & 0xFFFFFFFF) + _INT32_MIN


# ---------------------------------------------------------------------------
# java.util.HashSet<String> iteration order
# ---------------------------------------------------------------------------

_MAX_CAPACITY = 1 << 30  # HashMap.MAXIMUM_CAPACITY
_INT_MAX = (1 << 31) - 1
_DEFAULT_CAPACITY = 16  # HashMap.DEFAULT_INITIAL_CAPACITY
_TREEIFY_THRESHOLD = 8  # HashMap.TREEIFY_THRESHOLD
_MIN_TREEIFY_CAPACITY = 64  # HashMap.MIN_TREEIFY_CAPACITY

_Entry: TypeAlias = tuple[int, str]
_Table: TypeAlias = list[list[_Entry] | None]


def table_size_for(capacity: int) -> int:
    """``HashMap.tableSizeFor``: the smallest power of two >= ``capacity`` (at least 1).

    Args:
        capacity: a requested capacity, >= 0.

    Returns:
        The table size, capped at ``2**30``.
    """
    if capacity <= 1:
        return 1
    return min(1 << (capacity - 1).bit_length(), _MAX_CAPACITY)


def _f32(value: float) -> float:
    """Round to a Java ``float`` (IEEE binary32)."""
    rounded: float = struct.unpack("f", struct.pack("f", value))[0]
    return rounded


class JavaHashSet:
    """A set of strings that iterates in ``java.util.HashSet<String>`` order (OpenJDK 17).

    A ``HashSet`` is a ``HashMap`` whose keys are the elements. The map keeps a
    power-of-two table of buckets; a key goes to bucket ``java_hash(key) &
    (capacity - 1)`` and is appended at the end of that bucket's chain; iteration
    walks the buckets in index order and each chain in order. The table is
    allocated at the first insertion: ``HashSet(n)`` gets ``table_size_for(n)``
    buckets, ``HashSet()`` 16. When the size exceeds ``0.75 * capacity`` the table
    doubles and each chain is split into the entries that stay (``hash & oldCap ==
    0``) and those that move up by ``oldCap``, each keeping its relative order
    (``HashMap.resize``). A chain that reaches 9 entries in a table smaller than 64
    doubles the table instead of becoming a tree (``putVal`` -> ``treeifyBin``).
    Removal unlinks the entry; tables never shrink.

    Not modelled: *treeified* buckets (a chain reaching 9 entries in a table of 64
    or more becomes a red-black tree whose root moves to the front of the chain,
    which changes the iteration order inside that bucket). That needs 9 keys with
    the same low hash bits in one bucket -- rare for realistic znode names -- and
    flips :attr:`exact` to ``False``, after which the order inside that bucket may
    differ from Java's. Everything else was checked against Java 17.0.15
    (``tests/unit/sim/java_orders``).

    Args:
        initial_capacity: ``HashSet(initialCapacity)``; ``None`` for ``HashSet()``.
    """

    __slots__ = ("_exact", "_size", "_table", "_threshold")

    def __init__(self, initial_capacity: int | None = None) -> None:
        if initial_capacity is not None and initial_capacity < 0:
            raise ValueError(f"illegal initial capacity: {initial_capacity}")
        self._table: _Table | None = None
        # Before allocation the threshold holds the initial capacity (0: default).
        self._threshold = 0 if initial_capacity is None else table_size_for(initial_capacity)
        self._size = 0
        self._exact = True

    def __len__(self) -> int:
        return self._size

    def __bool__(self) -> bool:
        return self._size > 0

    def __iter__(self) -> Iterator[str]:
        table = self._table
        if table is None:
            return
        for bucket in table:
            if bucket is not None:
                for _, key in bucket:
                    yield key

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str) or self._table is None:
            return False
        h = java_hash(key)
        bucket = self._table[h & (len(self._table) - 1)]
        return bucket is not None and any(eh == h and ek == key for eh, ek in bucket)

    def __repr__(self) -> str:
        return f"JavaHashSet({list(self)!r})"

    @property
    def capacity(self) -> int:
        """The table's length (0 before the first insertion)."""
        return 0 if self._table is None else len(self._table)

    @property
    def exact(self) -> bool:
        """False once a bucket would have been treeified (order inside it may differ)."""
        return self._exact

    def add(self, key: str) -> bool:
        """``HashSet.add``: insert ``key`` at the end of its bucket.

        Args:
            key: the element.

        Returns:
            True if it was not present.
        """
        h = java_hash(key)
        table = self._table if self._table is not None else self._resize()
        i = h & (len(table) - 1)
        bucket = table[i]
        if bucket is None:
            table[i] = [(h, key)]
        else:
            for eh, ek in bucket:
                if eh == h and ek == key:
                    return False
            bucket.append((h, key))
            if len(bucket) > _TREEIFY_THRESHOLD:  # putVal: binCount >= TREEIFY_THRESHOLD - 1
                if len(table) < _MIN_TREEIFY_CAPACITY:
                    self._resize()  # treeifyBin on a small table resizes instead
                else:
                    self._exact = False  # a real tree bin: not modelled
        self._size += 1
        if self._size > self._threshold:
            self._resize()
        return True

    def remove(self, key: str) -> bool:
        """``HashSet.remove``: unlink ``key`` from its bucket.

        Args:
            key: the element.

        Returns:
            True if it was present.
        """
        table = self._table
        if table is None:
            return False
        h = java_hash(key)
        i = h & (len(table) - 1)
        bucket = table[i]
        if bucket is None:
            return False
        for j, (eh, ek) in enumerate(bucket):
            if eh == h and ek == key:
                del bucket[j]
                if not bucket:
                    table[i] = None
                self._size -= 1
                return True
        return False

    def java_clone(self) -> JavaHashSet:
        """``HashSet.clone()`` as OpenJDK 17 does it: a fresh, re-hashed table.

        ``HashMap.clone`` reinitializes the copy and calls ``putMapEntries``, which
        pre-sizes the table to ``tableSizeFor((int)((float)size / 0.75f + 1.0f))``
        and puts the entries in this set's iteration order. (JDK 19 changed that
        sizing to ``Math.ceil(size / 0.75)``; the ZooKeeper here runs on Java 17.)
        The clone's table can be smaller than this set's (which never shrinks), so
        its order can differ.

        Returns:
            The clone.
        """
        clone = JavaHashSet()
        if self._size > 0:
            ft = _f32(_f32(_f32(float(self._size)) / 0.75) + 1.0)
            t = int(ft) if ft < _MAX_CAPACITY else _MAX_CAPACITY
            if t > clone._threshold:
                clone._threshold = table_size_for(t)
            for key in self:
                clone.add(key)
        clone._exact = clone._exact and self._exact
        return clone

    def _resize(self) -> _Table:
        """``HashMap.resize``: allocate or double the table, splitting chains in order."""
        old = self._table
        old_cap = 0 if old is None else len(old)
        old_thr = self._threshold
        new_thr = 0
        if old_cap > 0:
            assert old is not None
            if old_cap >= _MAX_CAPACITY:
                self._threshold = _INT_MAX
                return old
            new_cap = old_cap << 1
            if new_cap < _MAX_CAPACITY and old_cap >= _DEFAULT_CAPACITY:
                new_thr = old_thr << 1
        elif old_thr > 0:
            new_cap = old_thr
        else:
            new_cap, new_thr = _DEFAULT_CAPACITY, _DEFAULT_CAPACITY * 3 // 4
        if new_thr == 0:
            new_thr = new_cap * 3 // 4 if new_cap < _MAX_CAPACITY else _INT_MAX
        self._threshold = new_thr
        table: _Table = [None] * new_cap
        if old is not None:
            for j, bucket in enumerate(old):
                if bucket is None:
                    continue
                lo = [e for e in bucket if not e[0] & old_cap]
                hi = [e for e in bucket if e[0] & old_cap]
                if lo:
                    table[j] = lo
                if hi:
                    table[j + old_cap] = hi
        self._table = table
        return table


# ---------------------------------------------------------------------------
# Paths
# ---------------------------------------------------------------------------

_SLASH = 0x2F
_DOT = 0x2E


def _utf16_units(s: str) -> list[int]:
    data = s.encode("utf-16-be", errors="surrogatepass")
    return [(data[i] << 8) | data[i + 1] for i in range(0, len(data), 2)]


def invalid_path_reason(path: str) -> str | None:
    """Why ``PathUtils.validatePath`` (ZK@3.8.0) rejects ``path``, or None if it is valid.

    On Java ``char`` s (UTF-16 code units), from S/common/PathUtils.java 41-96: the
    path must be non-empty and start with ``/``; ``/`` alone is valid; otherwise it
    must not end with ``/`` and may not hold a NUL, an empty name (``//``), a ``.``
    or ``..`` name, or a character in ``U+0001-U+001F``, ``U+007F-U+009F``,
    ``U+D800-U+F8FF`` (so no surrogate, hence nothing outside the BMP) or
    ``U+FFF0-U+FFFF``. A name that merely contains dots (``a.b``, ``...``) is fine.

    Args:
        path: a znode path (no chroot).

    Returns:
        The reason text Java would give, or None.
    """
    if not path:
        return "Path length must be > 0"
    if path[0] != "/":
        return "Path must start with / character"
    if len(path) == 1:
        return None
    if path[-1] == "/":
        return "Path must not end with / character"
    # Fast path: printable ASCII can only fail on empty, "." or ".." names.
    if (
        path.isascii()
        and path.isprintable()
        and all(name not in ("", ".", "..") for name in path[1:].split("/"))
    ):
        return None
    chars = _utf16_units(path)
    last = _SLASH
    for i in range(1, len(chars)):
        c = chars[i]
        at_end_of_name = i + 1 == len(chars) or chars[i + 1] == _SLASH
        if c == 0:
            return f"null character not allowed @{i}"
        if c == _SLASH and last == _SLASH:
            return f"empty node name specified @{i}"
        if c == _DOT and last == _DOT:
            if chars[i - 2] == _SLASH and at_end_of_name:
                return f"relative paths not allowed @{i}"
        elif c == _DOT:
            if chars[i - 1] == _SLASH and at_end_of_name:
                return f"relative paths not allowed @{i}"
        elif 0 < c <= 0x1F or 0x7F <= c <= 0x9F or 0xD800 <= c <= 0xF8FF or 0xFFF0 <= c <= 0xFFFF:
            return f"invalid character @{i}"
        last = c
    return None


def _parent_and_name(path: str) -> tuple[str, str]:
    """Split at the last ``/``; the parent of a top-level node is ``/``."""
    slash = path.rfind("/")
    return (path[:slash] or ROOT), path[slash + 1 :]


def _check_version(current: int, expected: int, path: str) -> int:
    """``checkAndIncVersion``: BadVersion unless ``expected`` is -1 or ``current``."""
    if expected != -1 and expected != current:
        raise BadVersionError(path)
    return _i32(current + 1)


# ---------------------------------------------------------------------------
# Znodes, results, ops
# ---------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class Znode:
    """One znode: ZooKeeper's ``DataNode`` with its ``StatPersisted``.

    ``cversion`` is the *persisted* value, the count of children ever created;
    :meth:`stat` reports ``2 * cversion - numChildren`` as ``copyStat`` does.
    ``children`` is None until the first child (``DataNode.addChild`` creates the
    ``HashSet(8)`` then).
    """

    data: bytes | None
    czxid: int = 0
    mzxid: int = 0
    pzxid: int = 0
    ctime: int = 0
    mtime: int = 0
    version: int = 0
    cversion: int = 0
    aversion: int = 0
    ephemeral_owner: int = 0
    children: JavaHashSet | None = None

    @property
    def num_children(self) -> int:
        """How many children the node has."""
        return 0 if self.children is None else len(self.children)

    def child_names(self) -> list[str]:
        """The children in Java ``HashSet`` order (``new ArrayList<>(getChildren())``)."""
        return [] if self.children is None else list(self.children)

    def stat(self) -> ZnodeStat:
        """``DataNode.copyStat`` as a kazoo ``ZnodeStat``."""
        n = self.num_children
        return ZnodeStat(
            self.czxid,
            self.mzxid,
            self.ctime,
            self.mtime,
            self.version,
            _i32(self.cversion * 2 - n),
            self.aversion,
            self.ephemeral_owner,
            0 if self.data is None else len(self.data),
            n,
            self.pzxid,
        )


class ChangeKind(enum.Enum):
    """How a write changed a path; values are kazoo's ``EventType`` names.

    Which server-side watches each one fires (programmer's guide, "ZooKeeper
    Watches"; DataTree.java ``triggerWatch`` calls):

    * ``CREATED``: data/exist watches of the path (``NodeCreated``);
    * ``DELETED``: data and child watches of the path (``NodeDeleted``);
    * ``DATA_CHANGED``: data watches of the path (``NodeDataChanged``);
    * ``CHILDREN_CHANGED``: child watches of the path, the parent of a created or
      deleted node (``NodeChildrenChanged``).
    """

    CREATED = "CREATED"
    DELETED = "DELETED"
    DATA_CHANGED = "CHANGED"
    CHILDREN_CHANGED = "CHILD"


class Change(NamedTuple):
    """One watch trigger of a write, in the order the server fires them."""

    kind: ChangeKind
    path: str


@dataclass(frozen=True, slots=True)
class CreateResult:
    """A created znode: its final path (with a sequence suffix), its stat, the triggers."""

    path: str
    stat: ZnodeStat  # the create2 response
    changes: tuple[Change, ...]


@dataclass(frozen=True, slots=True)
class DeleteResult:
    """A deleted znode and the triggers."""

    path: str
    changes: tuple[Change, ...]


@dataclass(frozen=True, slots=True)
class SetDataResult:
    """The znode's new stat and the trigger."""

    stat: ZnodeStat
    changes: tuple[Change, ...]


@dataclass(frozen=True, slots=True)
class CloseSessionResult:
    """The ephemerals a closed session lost, in deletion order, and the triggers."""

    deleted: tuple[str, ...]
    changes: tuple[Change, ...]


@dataclass(frozen=True, slots=True)
class MultiResult:
    """What kazoo's ``transaction().commit()`` returns, and the triggers.

    ``results`` has one entry per op: on success the created path, ``True`` (delete,
    check) or the new ``ZnodeStat`` (setData); on failure ``RolledBackError`` for
    the ops before the failing one, its own error, ``RuntimeInconsistency`` after.
    ``changes`` is empty on failure.
    """

    results: tuple[Any, ...]
    changes: tuple[Change, ...]

    @property
    def committed(self) -> bool:
        """True if every op was applied."""
        return not any(isinstance(r, ZookeeperError) for r in self.results)


@dataclass(frozen=True, slots=True)
class CreateOp:
    """A create in a multi (kazoo ``TransactionRequest.create``)."""

    path: str
    data: bytes | None = b""
    ephemeral_owner: int = 0
    sequence: bool = False


@dataclass(frozen=True, slots=True)
class DeleteOp:
    """A delete in a multi."""

    path: str
    version: int = -1


@dataclass(frozen=True, slots=True)
class SetDataOp:
    """A setData in a multi."""

    path: str
    data: bytes | None
    version: int = -1


@dataclass(frozen=True, slots=True)
class CheckOp:
    """A version check in a multi (``-1`` matches any version)."""

    path: str
    version: int


MultiOp: TypeAlias = CreateOp | DeleteOp | SetDataOp | CheckOp


# ---------------------------------------------------------------------------
# Prepared txns and the scratch view
# ---------------------------------------------------------------------------


@dataclass(slots=True)
class _Record:
    """A change record: what prepare needs of a node (``ZooKeeperServer.ChangeRecord``)."""

    version: int
    cversion: int
    child_count: int
    ephemeral_owner: int


class _View:
    """The outstanding change records of one request (or one multi) over the tree."""

    __slots__ = ("_nodes", "_records")

    def __init__(self, nodes: dict[str, Znode]) -> None:
        self._nodes = nodes
        self._records: dict[str, _Record | None] = {}

    def get(self, path: str) -> _Record:
        """``getRecordForPath``: the node as prepared so far, or NoNode."""
        key = path or ROOT  # "" is the root's alias
        if key in self._records:
            record = self._records[key]
        else:
            node = self._nodes.get(key)
            record = (
                None
                if node is None
                else _Record(node.version, node.cversion, node.num_children, node.ephemeral_owner)
            )
            self._records[key] = record
        if record is None:
            raise NoNodeError(path)
        return record

    def exists(self, path: str) -> bool:
        try:
            self.get(path)
        except NoNodeError:
            return False
        return True

    def put(self, path: str, record: _Record | None) -> None:
        self._records[path] = record


@dataclass(frozen=True, slots=True)
class _CreateTxn:
    path: str
    data: bytes | None
    ephemeral_owner: int
    parent_cversion: int


@dataclass(frozen=True, slots=True)
class _DeleteTxn:
    path: str


@dataclass(frozen=True, slots=True)
class _SetDataTxn:
    path: str
    data: bytes | None
    version: int


@dataclass(frozen=True, slots=True)
class _CheckTxn:
    path: str


_Txn: TypeAlias = _CreateTxn | _DeleteTxn | _SetDataTxn | _CheckTxn


def _check_data(data: object) -> None:
    if data is not None and not isinstance(data, bytes):
        raise TypeError(f"znode data must be bytes or None, not {type(data).__name__}")


def _check_owner(owner: object) -> None:
    if not isinstance(owner, int) or not _INT64_MIN < owner <= _INT64_MAX:
        # Long.MIN_VALUE is the container marker (EphemeralType.CONTAINER): not modelled.
        raise ValueError(f"ephemeral_owner must be a session id (a Java long), got {owner!r}")


def _check_version_arg(version: object) -> None:
    if not isinstance(version, int) or not _INT32_MIN <= version < -_INT32_MIN:
        raise ValueError(f"version must be a Java int, got {version!r}")


def _check_op(op: object) -> None:
    if isinstance(op, CreateOp):
        _check_data(op.data)
        _check_owner(op.ephemeral_owner)
    elif isinstance(op, SetDataOp):
        _check_data(op.data)
        _check_version_arg(op.version)
    elif isinstance(op, DeleteOp | CheckOp):
        _check_version_arg(op.version)
    else:
        raise TypeError(f"not a multi op: {op!r}")


# ---------------------------------------------------------------------------
# The tree
# ---------------------------------------------------------------------------


class DataTree:
    """ZooKeeper's ``DataTree`` with ``PrepRequestProcessor``'s checks in front.

    Every write takes the txn's ``zxid`` (strictly increasing; the caller allocates
    it, as ``getNextZxid`` does before the checks) and, where ZooKeeper stamps one,
    ``time_ms`` (the txn header's wall time). A write that raises a kazoo error has
    still consumed its zxid (an error txn): :attr:`last_zxid` moves either way. A
    ``TypeError``/``ValueError`` for a malformed call (not bytes, a zxid not above
    the last one) is a bug in the caller and consumes nothing.
    """

    __slots__ = ("_ephemerals", "_last_zxid", "_nodes")

    def __init__(self) -> None:
        root = Znode(b"")
        proc = Znode(b"")
        root.children = JavaHashSet(8)
        root.children.add("zookeeper")
        proc.children = JavaHashSet(8)
        proc.children.add("quota")
        proc.children.add("config")  # addConfigNode runs after the quota node
        self._nodes: dict[str, Znode] = {
            ROOT: root,
            "/zookeeper": proc,
            "/zookeeper/quota": Znode(b""),
            "/zookeeper/config": Znode(b"", aversion=-1),
        }
        self._ephemerals: dict[int, JavaHashSet] = {}
        self._last_zxid = 0

    # -- state -------------------------------------------------------------

    @property
    def last_zxid(self) -> int:
        """The last txn's zxid (``DataTree.lastProcessedZxid``); 0 on a fresh tree."""
        return self._last_zxid

    @property
    def node_count(self) -> int:
        """How many znodes exist, the four built-in ones included."""
        return len(self._nodes)

    def node(self, path: str) -> Znode | None:
        """The znode itself, for the server model's bookkeeping (do not mutate)."""
        return self._nodes.get(path or ROOT)

    def paths(self) -> list[str]:
        """Every znode path, sorted (for dumps and tests)."""
        return sorted(self._nodes)

    def ephemerals(self, session_id: int) -> tuple[str, ...]:
        """The session's ephemeral paths, in the order ``closeSession`` deletes them.

        That is the iteration order of ``getEphemerals(sessionId)``, a
        ``HashSet.clone()`` of the session's set (DataTree.java 194-204).

        Args:
            session_id: the session.

        Returns:
            The paths (empty if none).
        """
        owned = self._ephemerals.get(session_id)
        return () if owned is None else tuple(owned.java_clone())

    def sessions_with_ephemerals(self) -> list[int]:
        """Sessions that own at least one ephemeral, sorted."""
        return sorted(sid for sid, owned in self._ephemerals.items() if owned)

    def record_txn(self, zxid: int) -> None:
        """Account for a txn that does not touch the tree (``createSession``, an error txn).

        Args:
            zxid: the txn's zxid.

        Raises:
            ValueError: if ``zxid`` is not above :attr:`last_zxid`.
        """
        self._advance(zxid)

    # -- reads -------------------------------------------------------------

    def _get(self, path: str) -> Znode:
        node = self._nodes.get(path or ROOT)
        if node is None:
            raise NoNodeError(path)
        return node

    def get_data(self, path: str) -> tuple[bytes | None, ZnodeStat]:
        """``getData``: the data (None for null data) and the ``ZnodeStat``.

        Raises:
            NoNodeError: no such node (paths are looked up as given).
        """
        node = self._get(path)
        return node.data, node.stat()

    def get_children(self, path: str) -> list[str]:
        """``getChildren``: the children's names in Java ``HashSet`` order.

        Raises:
            NoNodeError: no such node.
        """
        return self._get(path).child_names()

    def get_children_with_stat(self, path: str) -> tuple[list[str], ZnodeStat]:
        """``getChildren2``: the children and the node's ``ZnodeStat``.

        Raises:
            NoNodeError: no such node.
        """
        node = self._get(path)
        return node.child_names(), node.stat()

    def stat(self, path: str) -> ZnodeStat:
        """The node's ``ZnodeStat``.

        Raises:
            NoNodeError: no such node.
        """
        return self._get(path).stat()

    def exists(self, path: str) -> ZnodeStat | None:
        """``exists``: the ``ZnodeStat``, or None if there is no such node.

        Raises:
            BadArgumentsError: the path holds a NUL (FinalRequestProcessor.java 370-372).
        """
        if "\0" in path:
            raise BadArgumentsError(path)
        node = self._nodes.get(path or ROOT)
        return None if node is None else node.stat()

    # -- writes ------------------------------------------------------------

    def create(
        self,
        path: str,
        data: bytes | None,
        ephemeral_owner: int = 0,
        sequence: bool = False,
        *,
        zxid: int,
        time_ms: int,
    ) -> CreateResult:
        """``create``/``create2``.

        Args:
            path: the path; with ``sequence`` the parent's persisted cversion is
                appended as ``%010d``.
            data: the data, None for null data.
            ephemeral_owner: the owning session id, 0 for a persistent node.
            sequence: a sequential node.
            zxid: the txn's zxid.
            time_ms: the txn's time (ctime and mtime).

        Returns:
            The final path, the new node's stat and the triggers.

        Raises:
            BadArgumentsError, NoNodeError, NoAuthError, NodeExistsError,
            NoChildrenForEphemeralsError: in ZooKeeper's order (module docstring).
        """
        _check_data(data)
        _check_owner(ephemeral_owner)
        self._advance(zxid)
        txn = self._prepare_create(
            _View(self._nodes), CreateOp(path, data, ephemeral_owner, sequence)
        )
        stat, changes = self._apply_create(txn, zxid, time_ms)
        return CreateResult(txn.path, stat, tuple(changes))

    def delete(self, path: str, version: int = -1, *, zxid: int) -> DeleteResult:
        """``delete``.

        Args:
            path: the node.
            version: the expected version, -1 for any.
            zxid: the txn's zxid.

        Returns:
            The triggers.

        Raises:
            BadArgumentsError, NoNodeError, NoAuthError, BadVersionError,
            NotEmptyError: in ZooKeeper's order.
        """
        _check_version_arg(version)
        self._advance(zxid)
        txn = self._prepare_delete(_View(self._nodes), DeleteOp(path, version))
        return DeleteResult(txn.path, tuple(self._apply_delete(txn.path, zxid)))

    def set_data(
        self, path: str, data: bytes | None, version: int = -1, *, zxid: int, time_ms: int
    ) -> SetDataResult:
        """``setData``.

        Args:
            path: the node.
            data: the new data, None for null data.
            version: the expected version, -1 for any.
            zxid: the txn's zxid (the new mzxid).
            time_ms: the txn's time (the new mtime).

        Returns:
            The new stat and the trigger.

        Raises:
            BadArgumentsError, NoNodeError, NoAuthError, BadVersionError.
        """
        _check_data(data)
        _check_version_arg(version)
        self._advance(zxid)
        txn = self._prepare_set_data(_View(self._nodes), SetDataOp(path, data, version))
        stat, changes = self._apply_set_data(txn, zxid, time_ms)
        return SetDataResult(stat, tuple(changes))

    def multi(self, ops: Sequence[MultiOp], *, zxid: int, time_ms: int) -> MultiResult:
        """``multi``: all ops under one zxid, or none.

        The ops are prepared in order against one scratch view, so each sees the
        ones before it; if one fails nothing is applied (the zxid is still consumed)
        and the results are ``RolledBackError`` before it, its error, and
        ``RuntimeInconsistency`` after it.

        Args:
            ops: the operations.
            zxid: the one zxid of the whole multi.
            time_ms: the txn's time.

        Returns:
            The per-op results and, if applied, the triggers in op order.
        """
        for op in ops:
            _check_op(op)
        self._advance(zxid)
        view = _View(self._nodes)
        txns: list[_Txn] = []
        for i, op in enumerate(ops):
            try:
                txns.append(self._prepare(view, op))
            except ZookeeperError as error:
                results: list[Any] = [RolledBackError() for _ in range(i)]
                results.append(error)
                results.extend(RuntimeInconsistency() for _ in range(i + 1, len(ops)))
                return MultiResult(tuple(results), ())
        values: list[Any] = []
        changes: list[Change] = []
        for txn in txns:
            if isinstance(txn, _CreateTxn):
                _, created = self._apply_create(txn, zxid, time_ms)
                values.append(txn.path)
                changes.extend(created)
            elif isinstance(txn, _DeleteTxn):
                changes.extend(self._apply_delete(txn.path, zxid))
                values.append(True)
            elif isinstance(txn, _SetDataTxn):
                stat, changed = self._apply_set_data(txn, zxid, time_ms)
                values.append(stat)
                changes.extend(changed)
            else:
                values.append(True)
        return MultiResult(tuple(values), tuple(changes))

    def kill_session(self, session_id: int, *, zxid: int) -> CloseSessionResult:
        """The ``closeSession`` txn (a close or an expiry): delete the session's ephemerals.

        Args:
            session_id: the session.
            zxid: the txn's zxid (consumed even with no ephemerals).

        Returns:
            The deleted paths in ZooKeeper's order and the triggers.
        """
        self._advance(zxid)
        owned = self._ephemerals.pop(session_id, None)
        paths = () if owned is None else tuple(owned.java_clone())
        changes: list[Change] = []
        deleted: list[str] = []
        for path in paths:
            if path in self._nodes:  # deleteNodes ignores NoNode
                changes.extend(self._apply_delete(path, zxid))
                deleted.append(path)
        return CloseSessionResult(tuple(deleted), tuple(changes))

    # -- prepare (PrepRequestProcessor) ------------------------------------

    def _prepare(self, view: _View, op: MultiOp) -> _Txn:
        if isinstance(op, CreateOp):
            return self._prepare_create(view, op)
        if isinstance(op, DeleteOp):
            return self._prepare_delete(view, op)
        if isinstance(op, SetDataOp):
            return self._prepare_set_data(view, op)
        return self._prepare_check(view, op)

    @staticmethod
    def _prepare_create(view: _View, op: CreateOp) -> _CreateTxn:
        path = op.path
        slash = path.rfind("/")
        if slash == -1 or "\0" in path:
            raise BadArgumentsError(path)
        parent_path = path[:slash] or ROOT
        parent = view.get(parent_path)
        if parent_path == _READ_ONLY:
            raise NoAuthError(path)
        if op.sequence:
            path = f"{path}{parent.cversion:010d}"
        if invalid_path_reason(path) is not None:
            raise BadArgumentsError(path)
        if view.exists(path):
            raise NodeExistsError(path)
        if parent.ephemeral_owner != 0:
            raise NoChildrenForEphemeralsError(path)
        parent.cversion = _i32(parent.cversion + 1)
        parent.child_count += 1
        view.put(path, _Record(0, 0, 0, op.ephemeral_owner))
        return _CreateTxn(path, op.data, op.ephemeral_owner, parent.cversion)

    @staticmethod
    def _prepare_delete(view: _View, op: DeleteOp) -> _DeleteTxn:
        path = op.path
        slash = path.rfind("/")
        if slash == -1 or "\0" in path or path in _SPECIAL_PATHS:
            raise BadArgumentsError(path)
        parent_path = path[:slash] or ROOT
        parent = view.get(parent_path)
        if parent_path == _READ_ONLY:
            raise NoAuthError(path)
        node = view.get(path)
        _check_version(node.version, op.version, path)
        if node.child_count > 0:
            raise NotEmptyError(path)
        parent.child_count -= 1
        view.put(path, None)
        return _DeleteTxn(path)

    @staticmethod
    def _prepare_set_data(view: _View, op: SetDataOp) -> _SetDataTxn:
        path = op.path
        if invalid_path_reason(path) is not None:
            raise BadArgumentsError(path)
        node = view.get(path)
        if path == _READ_ONLY:
            raise NoAuthError(path)
        node.version = _check_version(node.version, op.version, path)
        return _SetDataTxn(path, op.data, node.version)

    @staticmethod
    def _prepare_check(view: _View, op: CheckOp) -> _CheckTxn:
        path = op.path
        if invalid_path_reason(path) is not None:
            raise BadArgumentsError(path)
        node = view.get(path)
        _check_version(node.version, op.version, path)
        return _CheckTxn(path)

    # -- apply (DataTree.processTxn) ----------------------------------------

    def _advance(self, zxid: int) -> None:
        if not isinstance(zxid, int) or zxid <= self._last_zxid:
            raise ValueError(f"zxid {zxid!r} is not above the last zxid {self._last_zxid}")
        self._last_zxid = zxid

    def _apply_create(
        self, txn: _CreateTxn, zxid: int, time_ms: int
    ) -> tuple[ZnodeStat, list[Change]]:
        parent_path, name = _parent_and_name(txn.path)
        parent = self._nodes[parent_path]
        if txn.parent_cversion > parent.cversion:
            parent.cversion = txn.parent_cversion
            parent.pzxid = zxid
        node = Znode(
            txn.data,
            czxid=zxid,
            mzxid=zxid,
            pzxid=zxid,
            ctime=time_ms,
            mtime=time_ms,
            ephemeral_owner=txn.ephemeral_owner,
        )
        if parent.children is None:
            parent.children = JavaHashSet(8)
        parent.children.add(name)
        self._nodes[txn.path] = node
        if txn.ephemeral_owner != 0:
            owned = self._ephemerals.get(txn.ephemeral_owner)
            if owned is None:
                owned = self._ephemerals[txn.ephemeral_owner] = JavaHashSet()
            owned.add(txn.path)
        changes = [
            Change(ChangeKind.CREATED, txn.path),
            Change(ChangeKind.CHILDREN_CHANGED, parent_path),
        ]
        return node.stat(), changes

    def _apply_delete(self, path: str, zxid: int) -> list[Change]:
        parent_path, name = _parent_and_name(path)
        parent = self._nodes[parent_path]
        if parent.children is not None:
            parent.children.remove(name)
        if zxid > parent.pzxid:
            parent.pzxid = zxid
        node = self._nodes.pop(path)
        if node.ephemeral_owner != 0:
            owned = self._ephemerals.get(node.ephemeral_owner)
            if owned is not None:
                owned.remove(path)
        return [Change(ChangeKind.DELETED, path), Change(ChangeKind.CHILDREN_CHANGED, parent_path)]

    def _apply_set_data(
        self, txn: _SetDataTxn, zxid: int, time_ms: int
    ) -> tuple[ZnodeStat, list[Change]]:
        node = self._nodes[txn.path]
        node.data = txn.data
        node.mtime = time_ms
        node.mzxid = zxid
        node.version = txn.version
        return node.stat(), [Change(ChangeKind.DATA_CHANGED, txn.path)]
