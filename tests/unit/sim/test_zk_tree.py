"""The simulated ZooKeeper's data tree (``zk_registry/sim/tree.py``).

Expected values come from ZooKeeper 3.8.0's sources as cited in the module
docstring; children orders come from a real Java 17 (``java_orders/orders.json``,
produced once by ``java_orders/make_fixture.py`` with ``HashSetOrders.java``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypedDict

import pytest
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
)
from kazoo.protocol.states import EventType, ZnodeStat

from zk_registry.sim.tree import (
    Change,
    ChangeKind,
    CheckOp,
    CreateOp,
    DataTree,
    DeleteOp,
    JavaHashSet,
    SetDataOp,
    invalid_path_reason,
    java_hash,
    table_size_for,
)

ORDERS = json.loads((Path(__file__).parent / "java_orders" / "orders.json").read_text("utf-8"))
SID = 0x1000000ABC
OTHER_SID = 0x2000000DEF

C = ChangeKind.CREATED
D = ChangeKind.DELETED
M = ChangeKind.DATA_CHANGED
K = ChangeKind.CHILDREN_CHANGED


class Stamp(TypedDict):
    """A txn's zxid and time."""

    zxid: int
    time_ms: int


class Zxid(TypedDict):
    """A txn's zxid (delete and closeSession stamp no time)."""

    zxid: int


class Tx:
    """Hands out zxids and times the way a server would (one per txn)."""

    def __init__(self, tree: DataTree) -> None:
        self.tree = tree
        self.zxid = tree.last_zxid
        self.time = 1_000

    def next(self) -> Stamp:
        self.zxid += 1
        self.time += 10
        return {"zxid": self.zxid, "time_ms": self.time}

    def z(self) -> Zxid:
        self.zxid += 1
        return {"zxid": self.zxid}


@pytest.fixture
def tree() -> DataTree:
    return DataTree()


@pytest.fixture
def tx(tree: DataTree) -> Tx:
    return Tx(tree)


def _replay(commands: list[list[str]]) -> tuple[list[Any], list[bool]]:
    """Run a fixture script on JavaHashSet: the answers and ``exact`` at each answer."""
    s = JavaHashSet()
    answers: list[Any] = []
    exact: list[bool] = []
    for cmd in commands:
        op = cmd[0]
        if op == "new":
            s = JavaHashSet(int(cmd[1])) if len(cmd) > 1 else JavaHashSet()
        elif op == "add":
            s.add(cmd[1])
        elif op == "remove":
            s.remove(cmd[1])
        elif op == "clone":
            s = s.java_clone()
        elif op == "order":
            answers.append(list(s))
            exact.append(s.exact)
        elif op == "cap":
            answers.append(s.capacity)
            exact.append(s.exact)
        else:
            raise AssertionError(cmd)
    return answers, exact


# --- Java HashSet order ------------------------------------------------------


def test_java_hash_is_hashmaps_spread_of_string_hashcode() -> None:
    assert java_hash("Aa") == java_hash("BB") == 2112  # equal hashCodes, below 2**16
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE: 0x80000000 ^ 0x8000
    assert java_hash("polygenelubricants") == 0x80008000
    assert java_hash("") == 0


@pytest.mark.parametrize(
    ("requested", "size"), [(0, 1), (1, 1), (2, 2), (3, 4), (8, 8), (9, 16), (1 << 31, 1 << 30)]
)
def test_table_size_for(requested: int, size: int) -> None:
    assert table_size_for(requested) == size


def test_a_hand_computed_order() -> None:
    # hashCode("1") = 49, "9" = 57, "17" = 31 * 49 + 55 = 1574, "2".."5" = 50..53: all below
    # 2**16, so HashMap.hash leaves them as they are. In 8 buckets "9" and "1" share bucket
    # 1 (in insertion order), "17" is in bucket 1574 & 7 = 6.
    s = JavaHashSet(8)
    for name in ("9", "17", "1", "2", "3", "4"):
        s.add(name)
    assert list(s) == ["9", "1", "2", "3", "4", "17"]
    # The 7th name passes 0.75 * 8: 16 buckets, and 57 & 15 = 9 moves "9" to the end.
    s.add("5")
    assert s.capacity == 16
    assert list(s) == ["1", "2", "3", "4", "5", "17", "9"]


def test_the_fixture_comes_from_java_17() -> None:
    assert ORDERS["java"].startswith("17.")


@pytest.mark.parametrize(
    "case", ["growth", "consumer_ids", "unicode", "clones", "random_ops", "collisions"]
)
def test_orders_and_capacities_match_java(case: str) -> None:
    script = ORDERS["cases"][case]
    got, exact = _replay(script["commands"])
    expected = script["expected"]
    assert len(got) == len(expected)
    compared = [(g, e) for g, e, x in zip(got, expected, exact, strict=True) if x]
    assert len(compared) >= 2
    for g, e in compared:
        assert g == e
    if case != "collisions":
        assert all(exact)


def test_a_long_chain_in_a_small_table_doubles_it_instead_of_treeifying() -> None:
    # "collisions": three names, then names that all share one hashCode. A chain of 9 in
    # a table under 64 resizes (treeifyBin): capacities 8 -> 16 (load) -> 32 -> 64 (chain).
    script = ORDERS["cases"]["collisions"]
    got, exact = _replay(script["commands"])
    caps = [e for e in script["expected"] if isinstance(e, int)]
    assert caps == [8, 8, 8, 16, 16, 16, 16, 32, 64, 64, 64]
    assert [g for g in got if isinstance(g, int)] == caps
    # Once the chain reaches 9 in the 64-table Java builds a tree bin (its root moves to
    # the front): not modelled, and flagged at exactly that point.
    orders = [(g, e, x) for g, e, x in zip(got, script["expected"], exact, strict=True)]
    first_inexact = next(i for i, (_, _, x) in enumerate(orders) if not x)
    assert all(g == e for g, e, _ in orders[:first_inexact])
    assert orders[first_inexact][0] != orders[first_inexact][1]
    assert sorted(orders[-2][0]) == sorted(orders[-2][1])


def test_a_treeified_bucket_is_flagged_not_emulated() -> None:
    script = ORDERS["cases"]["treeified"]
    got, exact = _replay(script["commands"])
    assert exact == [False, False]
    assert got[1] == script["expected"][1] == 64
    assert sorted(got[0]) == sorted(script["expected"][0])


def test_hash_set_basics() -> None:
    s = JavaHashSet(8)
    assert s.capacity == 0 and len(s) == 0 and not s and list(s) == []
    assert s.add("a") and not s.add("a")
    assert s.capacity == 8 and len(s) == 1 and "a" in s and "b" not in s and 3 not in s
    assert not s.remove("b") and s.remove("a") and not s.remove("a")
    assert s.capacity == 8 and list(s) == []  # tables never shrink
    assert JavaHashSet().java_clone().capacity == 0
    d = JavaHashSet()
    d.add("x")
    assert d.capacity == 16
    with pytest.raises(ValueError):
        JavaHashSet(-1)


def test_a_clone_can_iterate_differently_from_its_source() -> None:
    # 13 paths grow the table to 32; after removing 6 the clone is pre-sized to 16.
    s = JavaHashSet()
    names = [f"/c/ids/{i}" for i in range(13)]
    for n in names:
        s.add(n)
    for n in names[:6]:
        s.remove(n)
    clone = s.java_clone()
    assert (s.capacity, clone.capacity) == (32, 16)
    assert sorted(clone) == sorted(s)
    assert list(clone) != list(s)


# --- paths ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    ["/", "/a", "/a.b", "/...", "/a/..b", "/.a", "/a.", "/é", "/日本", "/a b", "/a-b_c:9"],
)
def test_valid_paths(path: str) -> None:
    assert invalid_path_reason(path) is None


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("", "Path length must be > 0"),
        ("a", "Path must start with / character"),
        ("/a/", "Path must not end with / character"),
        ("//a", "empty node name specified @1"),
        ("/a//b", "empty node name specified @3"),
        ("/.", "relative paths not allowed @1"),
        ("/a/.", "relative paths not allowed @3"),
        ("/..", "relative paths not allowed @2"),
        ("/a/../b", "relative paths not allowed @4"),
        ("/a\0b", "null character not allowed @2"),
        ("/a\x1fb", "invalid character @2"),
        ("/\x7f", "invalid character @1"),
        ("/\x9f", "invalid character @1"),
        ("/x\U0001f600", "invalid character @2"),  # a surrogate pair
        ("/\ue000", "invalid character @1"),  # private use
        ("/\ufff0", "invalid character @1"),
    ],
)
def test_invalid_paths(path: str, reason: str) -> None:
    assert invalid_path_reason(path) == reason


# --- the initial tree ------------------------------------------------------------


def test_a_fresh_tree_is_a_fresh_server(tree: DataTree) -> None:
    assert tree.last_zxid == 0
    assert tree.stat("/") == ZnodeStat(0, 0, 0, 0, 0, -1, 0, 0, 0, 1, 0)
    assert tree.get_children("/") == ["zookeeper"]
    assert tree.get_data("/") == (b"", tree.stat("/"))
    assert tree.get_data("") == tree.get_data("/")  # "" is the root's alias
    assert tree.stat("/zookeeper").cversion == -2
    assert tree.stat("/zookeeper/config").aversion == -1  # setACL(path, acl, -1) at start-up
    assert sorted(tree.get_children("/zookeeper")) == ["config", "quota"]
    assert tree.node_count == 4
    assert tree.paths() == ["/", "/zookeeper", "/zookeeper/config", "/zookeeper/quota"]


def test_the_built_in_nodes_are_protected(tree: DataTree, tx: Tx) -> None:
    for path in ("/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"):
        with pytest.raises(BadArgumentsError):
            tree.delete(path, **tx.z())
    with pytest.raises(NoAuthError):
        tree.create("/zookeeper/config/x", b"", **tx.next())
    with pytest.raises(NoAuthError):
        tree.set_data("/zookeeper/config", b"x", **tx.next())
    assert tree.create("/zookeeper/quota/x", b"", **tx.next()).path == "/zookeeper/quota/x"


# --- stats -------------------------------------------------------------------


def test_create_stats_and_the_parents_cversion_and_pzxid(tree: DataTree, tx: Tx) -> None:
    t = tx.next()
    made = tree.create("/brokers", b"{}", **t)
    z, ms = t["zxid"], t["time_ms"]
    assert made.path == "/brokers"
    assert made.stat == ZnodeStat(z, z, ms, ms, 0, 0, 0, 0, 2, 0, z)
    assert tree.stat("/brokers") == made.stat
    root = tree.stat("/")
    assert (root.cversion, root.numChildren, root.pzxid, root.mzxid) == (0, 2, z, 0)
    assert made.changes == (Change(C, "/brokers"), Change(K, "/"))
    assert tree.last_zxid == z


def test_cversion_counts_creates_and_deletes_but_sequence_numbers_count_creates(
    tree: DataTree, tx: Tx
) -> None:
    tree.create("/p", None, **tx.next())
    tree.create("/p/a", None, **tx.next())
    assert tree.stat("/p").cversion == 1
    t = tx.next()
    tree.create("/p/b", None, **t)
    assert (tree.stat("/p").cversion, tree.stat("/p").pzxid) == (2, t["zxid"])
    d = tx.z()
    tree.delete("/p/a", **d)
    stat = tree.stat("/p")
    # copyStat: persisted 2 creates * 2 - 1 child = 3 changes; delete moved pzxid only.
    assert (stat.cversion, stat.numChildren, stat.pzxid) == (3, 1, d["zxid"])
    assert tree.node("/p") is not None and tree.node("/p").cversion == 2  # type: ignore[union-attr]
    # The next sequential name uses the persisted count, not the reported one.
    assert tree.create("/p/s-", b"", sequence=True, **tx.next()).path == "/p/s-0000000002"
    assert tree.stat("/p").cversion == 4


def test_null_and_empty_data(tree: DataTree, tx: Tx) -> None:
    tree.create("/n", None, **tx.next())
    tree.create("/e", b"", **tx.next())
    data, stat = tree.get_data("/n")
    assert data is None and stat.dataLength == 0
    data, stat = tree.get_data("/e")
    assert data == b"" and stat.dataLength == 0
    tree.set_data("/e", None, **tx.next())
    assert tree.get_data("/e")[0] is None


def test_set_data_moves_version_mzxid_and_mtime_only(tree: DataTree, tx: Tx) -> None:
    c = tx.next()
    tree.create("/s", b"1", **c)
    t = tx.next()
    result = tree.set_data("/s", b"22", 0, **t)
    assert result.stat == ZnodeStat(
        c["zxid"], t["zxid"], c["time_ms"], t["time_ms"], 1, 0, 0, 0, 2, 0, c["zxid"]
    )
    assert result.changes == (Change(M, "/s"),)
    assert tree.set_data("/s", b"3", -1, **tx.next()).stat.version == 2
    with pytest.raises(BadVersionError):
        tree.set_data("/s", b"4", 1, **tx.next())
    assert tree.get_data("/s")[0] == b"3"
    assert tree.stat("/").mzxid == 0  # a child's write leaves the parent's mzxid alone


def test_exists(tree: DataTree, tx: Tx) -> None:
    assert tree.exists("/x") is None
    tree.create("/x", b"ab", **tx.next())
    assert tree.exists("/x") == tree.stat("/x")
    with pytest.raises(BadArgumentsError):
        tree.exists("/x\0")
    with pytest.raises(NoNodeError):
        tree.stat("/y")


# --- errors and their order ---------------------------------------------------------


def test_create_errors_in_zookeepers_order(tree: DataTree, tx: Tx) -> None:
    tree.create("/a", b"", **tx.next())
    cases: list[tuple[str, type[Exception]]] = [
        ("a", BadArgumentsError),  # no slash at all
        ("/a\0", BadArgumentsError),
        ("a/b", NoNodeError),  # parent "a" does not exist: looked up before validatePath
        ("/missing/x/", NoNodeError),  # parent before the trailing-slash check
        ("/a//b", NoNodeError),  # parent "/a/" does not exist
        ("/a/", BadArgumentsError),  # parent exists: validatePath fails
        ("/a/.", BadArgumentsError),
        ("/a", NodeExistsError),
        ("/", NodeExistsError),
    ]
    for path, error in cases:
        with pytest.raises(error):
            tree.create(path, b"", **tx.next())
    # The trailing slash of a sequential create is completed by the number.
    assert tree.create("/a/", b"", sequence=True, **tx.next()).path == "/a/0000000000"


def test_ephemerals_cannot_have_children(tree: DataTree, tx: Tx) -> None:
    tree.create("/e", b"", SID, **tx.next())
    with pytest.raises(NoChildrenForEphemeralsError):
        tree.create("/e/x", b"", **tx.next())
    with pytest.raises(NoChildrenForEphemeralsError):
        tree.create("/e/", b"", sequence=True, **tx.next())
    with pytest.raises(NodeExistsError):  # existence is checked before the parent's kind
        tree.create("/e", b"", **tx.next())


def test_delete_errors_in_zookeepers_order(tree: DataTree, tx: Tx) -> None:
    tree.create("/a", b"", **tx.next())
    tree.create("/a/b", b"", **tx.next())
    cases: list[tuple[str, int, type[Exception]]] = [
        ("a", -1, BadArgumentsError),
        ("/a\0", -1, BadArgumentsError),
        ("/a/", -1, NoNodeError),  # no validatePath on delete: just no such node
        ("/x/y", -1, NoNodeError),
        ("/a/c", -1, NoNodeError),
        ("/a", 5, BadVersionError),  # the version is checked before the children
        ("/a", 0, NotEmptyError),
    ]
    for path, version, error in cases:
        with pytest.raises(error):
            tree.delete(path, version, **tx.z())
    result = tree.delete("/a/b", 0, **tx.z())
    assert result.changes == (Change(D, "/a/b"), Change(K, "/a"))
    assert tree.get_children("/a") == []
    tree.delete("/a", **tx.z())
    assert tree.exists("/a") is None


def test_set_data_errors(tree: DataTree, tx: Tx) -> None:
    with pytest.raises(BadArgumentsError):
        tree.set_data("/x/", b"", **tx.next())
    with pytest.raises(NoNodeError):
        tree.set_data("/x", b"", **tx.next())


def test_failed_writes_consume_their_zxid_and_bad_calls_do_not(tree: DataTree, tx: Tx) -> None:
    t = tx.next()
    with pytest.raises(NoNodeError):
        tree.create("/no/such", b"", **t)
    assert tree.last_zxid == t["zxid"]
    with pytest.raises(ValueError):
        tree.create("/a", b"", zxid=t["zxid"], time_ms=0)  # not above the last zxid
    with pytest.raises(TypeError):
        tree.create("/a", "text", zxid=t["zxid"] + 1, time_ms=0)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        tree.create("/a", b"", -(1 << 63), zxid=t["zxid"] + 1, time_ms=0)
    assert tree.last_zxid == t["zxid"] and tree.exists("/a") is None
    tree.record_txn(t["zxid"] + 1)  # a createSession
    made = tree.create("/a", b"", zxid=t["zxid"] + 2, time_ms=0)
    assert made.stat.czxid == t["zxid"] + 2


# --- children order ---------------------------------------------------------------


def test_get_children_is_javas_hash_set_order(tree: DataTree, tx: Tx) -> None:
    # The "growth" script adds "0".."149" to HashSet(8): DataNode.addChild's set.
    expected = ORDERS["cases"]["growth"]["expected"][-2]
    tree.create("/t", b"", **tx.next())
    for p in range(150):
        tree.create(f"/t/{p}", b"", **tx.next())
    assert tree.get_children("/t") == expected
    assert tree.get_children("/t") != sorted(expected)
    assert tree.get_children_with_stat("/t") == (expected, tree.stat("/t"))


def test_children_of_a_deleted_and_recreated_parent_start_from_a_fresh_set(
    tree: DataTree, tx: Tx
) -> None:
    tree.create("/g", b"", **tx.next())
    for i in range(20):
        tree.create(f"/g/{i}", b"", **tx.next())
    for i in range(20):
        tree.delete(f"/g/{i}", **tx.z())
    tree.delete("/g", **tx.z())
    tree.create("/g", b"", **tx.next())
    for name in ("b", "a", "c"):
        tree.create(f"/g/{name}", b"", **tx.next())
    fresh = JavaHashSet(8)
    for name in ("b", "a", "c"):
        fresh.add(name)
    assert tree.get_children("/g") == list(fresh)
    assert tree.node("/g").children.capacity == 8  # type: ignore[union-attr]


# --- ephemerals and sessions ---------------------------------------------------------


def test_ephemeral_owner_and_the_sessions_set(tree: DataTree, tx: Tx) -> None:
    tree.create("/ids", b"", **tx.next())
    made = tree.create("/ids/1", b"", SID, **tx.next())
    tree.create("/ids/2", b"", OTHER_SID, **tx.next())
    assert made.stat.ephemeralOwner == SID
    assert tree.stat("/ids").ephemeralOwner == 0
    assert tree.ephemerals(SID) == ("/ids/1",)
    assert tree.sessions_with_ephemerals() == [SID, OTHER_SID]
    tree.delete("/ids/1", **tx.z())
    assert tree.ephemerals(SID) == ()
    assert tree.sessions_with_ephemerals() == [OTHER_SID]


def test_kill_session_deletes_in_the_order_of_a_cloned_hash_set(tree: DataTree, tx: Tx) -> None:
    for path in ("/c", "/c/ids", "/c/owners", "/c/owners/t"):
        tree.create(path, b"", **tx.next())
    names = [f"/c/owners/t/{p}" for p in range(10)]
    for path in names:
        tree.create(path, b"", SID, **tx.next())
    tree.create("/c/ids/m1", b"", SID, **tx.next())
    tree.create("/c/ids/other", b"", OTHER_SID, **tx.next())
    for path in names[:6]:
        tree.delete(path, **tx.z())
    # The session's set grew to 16 buckets; closeSession iterates a clone pre-sized to 8.
    session_set = JavaHashSet()
    for path in [*names, "/c/ids/m1"]:
        session_set.add(path)
    for path in names[:6]:
        session_set.remove(path)
    order = list(session_set.java_clone())
    assert order != list(session_set)
    assert tree.ephemerals(SID) == tuple(order)
    cversion_before = tree.node("/c/owners/t").cversion  # type: ignore[union-attr]
    k = tx.z()
    result = tree.kill_session(SID, **k)
    assert result.deleted == tuple(order)
    assert result.changes == tuple(
        change for path in order for change in (Change(D, path), Change(K, path.rsplit("/", 1)[0]))
    )
    assert tree.get_children("/c/ids") == ["other"]
    assert tree.get_children("/c/owners/t") == []
    owners = tree.node("/c/owners/t")
    assert owners is not None and owners.cversion == cversion_before and owners.pzxid == k["zxid"]
    assert tree.stat("/c/owners/t").cversion == 2 * 10  # ten creates, ten deletes
    assert tree.ephemerals(SID) == () and tree.ephemerals(OTHER_SID) == ("/c/ids/other",)
    assert tree.last_zxid == k["zxid"]
    # A session without ephemerals still takes its closeSession zxid.
    again = tx.z()
    assert tree.kill_session(SID, **again).deleted == ()
    assert tree.last_zxid == again["zxid"]


# --- multi ----------------------------------------------------------------------------


def test_multi_applies_everything_under_one_zxid(tree: DataTree, tx: Tx) -> None:
    t = tx.next()
    result = tree.multi(
        [
            CreateOp("/m", b"x"),
            CreateOp("/m/a", None),  # sees the create before it
            SetDataOp("/m", b"yy", 0),
            CheckOp("/m", 1),  # sees the set before it
            CreateOp("/m/s-", b"", sequence=True),
            CreateOp("/m/s-", b"", SID, sequence=True),
            DeleteOp("/m/a", 0),
        ],
        **t,
    )
    z = t["zxid"]
    assert result.committed
    assert result.results[:2] == ("/m", "/m/a")
    # The set is applied after the create of /m/a: one child, cversion 2 * 1 - 1.
    assert result.results[2] == ZnodeStat(z, z, t["time_ms"], t["time_ms"], 1, 1, 0, 0, 2, 1, z)
    assert result.results[3:] == (True, "/m/s-0000000001", "/m/s-0000000002", True)
    assert tree.last_zxid == z
    assert sorted(tree.get_children("/m")) == ["s-0000000001", "s-0000000002"]
    stat = tree.stat("/m")
    assert (stat.czxid, stat.mzxid, stat.pzxid, stat.version) == (z, z, z, 1)
    assert (stat.cversion, stat.numChildren) == (2 * 3 - 2, 2)
    assert tree.ephemerals(SID) == ("/m/s-0000000002",)
    assert result.changes == (
        Change(C, "/m"),
        Change(K, "/"),
        Change(C, "/m/a"),
        Change(K, "/m"),
        Change(M, "/m"),
        Change(C, "/m/s-0000000001"),
        Change(K, "/m"),
        Change(C, "/m/s-0000000002"),
        Change(K, "/m"),
        Change(D, "/m/a"),
        Change(K, "/m"),
    )


def test_a_failed_multi_applies_nothing_and_reports_per_op(tree: DataTree, tx: Tx) -> None:
    tree.create("/z", b"0", **tx.next())
    before = tree.stat("/")
    t = tx.next()
    result = tree.multi(
        [CreateOp("/x"), SetDataOp("/z", b"1"), CreateOp("/missing/y"), DeleteOp("/z")], **t
    )
    assert [type(r) for r in result.results] == [
        RolledBackError,
        RolledBackError,
        NoNodeError,
        RuntimeInconsistency,
    ]
    assert not result.committed and result.changes == ()
    assert tree.exists("/x") is None and tree.get_data("/z")[0] == b"0"
    assert tree.stat("/") == before
    assert tree.last_zxid == t["zxid"]  # the multi's zxid is spent all the same


@pytest.mark.parametrize(
    ("ops", "failing", "error"),
    [
        ([CreateOp("/q"), CreateOp("/q")], 1, NodeExistsError),
        ([CreateOp("/q"), DeleteOp("/q"), DeleteOp("/q")], 2, NoNodeError),
        ([CreateOp("/q"), CreateOp("/q/c"), DeleteOp("/q")], 2, NotEmptyError),
        ([CreateOp("/q"), CheckOp("/q", 1)], 1, BadVersionError),
        ([CheckOp("/q/", -1)], 0, BadArgumentsError),
        ([CreateOp("/q", b"", SID), CreateOp("/q/c")], 1, NoChildrenForEphemeralsError),
    ],
)
def test_multi_ops_see_the_ops_before_them(
    tree: DataTree, tx: Tx, ops: list[Any], failing: int, error: type[Exception]
) -> None:
    result = tree.multi(ops, **tx.next())
    assert all(isinstance(r, RolledBackError) for r in result.results[:failing])
    assert type(result.results[failing]) is error
    assert all(isinstance(r, RuntimeInconsistency) for r in result.results[failing + 1 :])
    assert tree.exists("/q") is None and tree.ephemerals(SID) == ()


def test_a_multi_deletes_children_then_their_parent(tree: DataTree, tx: Tx) -> None:
    tree.create("/r", b"", **tx.next())
    tree.create("/r/a", b"", **tx.next())
    result = tree.multi([DeleteOp("/r/a"), DeleteOp("/r")], **tx.next())
    assert result.results == (True, True)
    assert tree.get_children("/") == ["zookeeper"]


def test_an_empty_multi_spends_a_zxid(tree: DataTree, tx: Tx) -> None:
    t = tx.next()
    result = tree.multi([], **t)
    assert result.results == () and result.committed and tree.last_zxid == t["zxid"]


def test_a_failed_multi_leaves_sequence_numbers_alone(tree: DataTree, tx: Tx) -> None:
    tree.create("/s", b"", **tx.next())
    tree.multi([CreateOp("/s/n-", sequence=True), CreateOp("/nope/x")], **tx.next())
    assert tree.create("/s/n-", b"", sequence=True, **tx.next()).path == "/s/n-0000000000"


def test_malformed_multi_ops_are_refused_before_spending_a_zxid(tree: DataTree) -> None:
    with pytest.raises(TypeError):
        tree.multi([CreateOp("/a", "text")], zxid=1, time_ms=0)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tree.multi(["/a"], zxid=1, time_ms=0)  # type: ignore[list-item]
    assert tree.last_zxid == 0


def test_change_kinds_are_kazoos_event_types() -> None:
    assert [k.value for k in ChangeKind] == [
        EventType.CREATED,
        EventType.DELETED,
        EventType.CHANGED,
        EventType.CHILD,
    ]
