"""Which incarnation of a topic an instant belongs to (analysis.topics, no Spark job).

The rules are the module's: the latest ``topic_created`` at or before the
instant; before a topic's first creation the incarnation before it (1 for the
run's own topics); dead from ``topic_deleted`` until the next creation.
"""

from __future__ import annotations

from analysis.topics import Incarnations
from emulator.topic_incarnations import Incarnation, topic_key

CREATED = "topic_created"
DELETED = "topic_deleted"


def spans(rows: list[tuple[str, str, str, int, float]]) -> list[Incarnation]:
    return list(Incarnations.from_rows(rows).spans)


def test_a_run_without_topic_events_has_no_incarnations() -> None:
    inc = Incarnations.from_rows([])
    assert not inc and inc.renamed == []


def test_keys_keep_the_first_incarnation_s_name() -> None:
    assert [topic_key("t", n) for n in (1, 2, 3)] == ["t", "t#2", "t#3"]


def test_an_own_topic_deleted_and_created_again() -> None:
    got = spans(
        [
            ("p", "t", DELETED, 1, 100.0),
            ("p", "t", CREATED, 2, 200.0),
            ("p", "t", DELETED, 2, 300.0),
            ("p", "t", CREATED, 3, 400.0),
        ]
    )
    assert got == [
        Incarnation("p", "t", 1, None, 200.0, None, 100.0),
        Incarnation("p", "t", 2, 200.0, 400.0, 200.0, 300.0),
        Incarnation("p", "t", 3, 400.0, None, 400.0, None),
    ]
    assert [s.key for s in got] == ["t", "t#2", "t#3"]


def test_a_topic_created_during_the_run_is_incarnation_1_from_the_start() -> None:
    """Events stamped before its ``topic_created`` (another node's clock) are still its."""
    (only,) = spans([("p", "fresh", CREATED, 1, 5000.0), ("p", "fresh", CREATED, 1, 5003.0)])
    assert only == Incarnation("p", "fresh", 1, None, None, 5000.0, None)


def test_before_the_first_creation_the_incarnation_before_it() -> None:
    got = spans([("p", "t", CREATED, 3, 50.0)])
    assert [(s.incarnation, s.start, s.end) for s in got] == [(2, None, 50.0), (3, 50.0, None)]


def test_protocols_and_topics_are_apart() -> None:
    got = spans([("a", "t", CREATED, 2, 10.0), ("b", "t", DELETED, 1, 20.0)])
    assert [(s.protocol, s.incarnation, s.deleted) for s in got] == [
        ("a", 1, None),
        ("a", 2, None),
        ("b", 1, 20.0),
    ]


def test_a_deletion_stamped_after_the_next_creation_ends_at_it() -> None:
    """Two controllers' clocks out of step: the dead span is empty, never negative."""
    got = spans([("p", "t", DELETED, 1, 250.0), ("p", "t", CREATED, 2, 200.0)])
    assert [(s.incarnation, s.end, s.deleted) for s in got] == [(1, 200.0, 200.0), (2, None, None)]
