"""Typed reads of a TOML table, each failing with a one-line :class:`ScenarioError`.

:class:`TableReader` is what the scenario's parser (:mod:`emulator.scenario.parse`)
and its timeline reader (:mod:`emulator.scenario.timeline`) share: a value of a
table read as an integer, a number, a string, one of some choices or a list of
declared topics, checked against its range and its size bound, with the
message naming the key as written (``[group].consumers``, ``timeline[3].at_s``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Container, Mapping, Sequence
from typing import Final, NoReturn, cast

from emulator.scenario.errors import ScenarioError, did_you_mean, int_requirement, show
from emulator.scenario.limits import MAX_TOPIC_PATTERN_CHARS
from emulator.topic_regex import (
    FILTER_KINDS,
    INTERNAL_TOPICS,
    FilterKind,
    TopicFilter,
    TopicRegexError,
    compile_pattern,
)

__all__ = ["TOPIC_NAME_RE", "TableReader", "in_array", "in_section", "number_text", "one_of"]

TOPIC_NAME_RE: Final = re.compile(r"[A-Za-z0-9._-]+")
"""Kafka's legal topic characters (``Topic.legalChars``); at most 249 of them."""


class TableReader:
    """Reads values of one scenario's TOML tables, failing on the first error.

    Attributes:
        source: how messages name the scenario (its file name).
    """

    def __init__(self, source: str) -> None:
        self.source = source

    # ---- failures

    def fail(self, key: str, message: str) -> NoReturn:
        raise ScenarioError(self.source, key, message)

    def must(self, key: str, requirement: str, got: object) -> NoReturn:
        self.fail(key, f"{key} must be {requirement}, got {show(got)}")

    def check_keys(
        self, table: Mapping[str, object], allowed: Sequence[str], render: Callable[[str], str]
    ) -> None:
        for key in table:
            if key not in allowed:
                hint = did_you_mean(key, allowed, render)
                self.fail(render(key), f"{render(key)}: unknown key{hint}")

    # ---- typed getters

    def table(self, doc: Mapping[str, object], key: str) -> dict[str, object]:
        value = doc.get(key, {})
        if not isinstance(value, dict):
            self.must(f"[{key}]", "a table", value)
        return value

    def integer(
        self,
        table: Mapping[str, object],
        key: str,
        shown: str,
        default: int | None,
        minimum: int | None = None,
        maximum: int | None = None,
        bound_note: str = "",
        limit: int | None = None,
        limit_note: str = "",
    ) -> int:
        """An integer in ``[minimum, maximum]``, then at most ``limit`` (a size bound, its reason
        in ``limit_note``: "must be an integer <= 1000 (why), got 5000")."""
        if key not in table:
            if default is None:
                self.fail(shown, f"{shown} is required")
            return default
        value = table[key]
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or (minimum is not None and value < minimum)
            or (maximum is not None and value > maximum)
        ):
            self.must(shown, int_requirement(minimum, maximum, bound_note), value)
        if limit is not None and value > limit:
            self.must(shown, int_requirement(None, limit, limit_note), value)
        return value

    def number(
        self,
        table: Mapping[str, object],
        key: str,
        shown: str,
        default: float | None,
        requirement: str,
        accept: Callable[[float], bool],
        limit: float | None = None,
        limit_note: str = "",
    ) -> float:
        """A finite number ``accept`` takes, then at most ``limit`` (as in :meth:`integer`)."""
        if key not in table:
            if default is None:
                self.fail(shown, f"{shown} is required")
            return default
        value = table[key]
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or not accept(float(value))
        ):
            self.must(shown, requirement, value)
        if limit is not None and value > limit:
            self.must(shown, f"a number <= {number_text(limit)} ({limit_note})", value)
        return float(value)

    def string(
        self,
        table: Mapping[str, object],
        key: str,
        shown: str,
        default: str | None,
        pattern: re.Pattern[str] | None = None,
        max_len: int | None = None,
        requirement: str = "a string",
    ) -> str:
        if key not in table:
            if default is None:
                self.fail(shown, f"{shown} is required")
            return default
        value = table[key]
        if (
            not isinstance(value, str)
            or (pattern is not None and pattern.fullmatch(value) is None)
            or (max_len is not None and len(value) > max_len)
        ):
            self.must(shown, requirement, value)
        return value

    def choice(
        self,
        table: Mapping[str, object],
        key: str,
        shown: str,
        default: str | None,
        choices: Sequence[str],
        lookup: Container[str] | None = None,
    ) -> str:
        """One of ``choices`` (``lookup``: the same names, for an O(1) ``in``)."""
        fast = table.get(key)
        if isinstance(fast, str) and fast in (choices if lookup is None else lookup):
            return fast  # the common case, without building the message
        requirement = "one of " + one_of(choices)
        value = self.string(table, key, shown, default, requirement=requirement)
        if value not in choices:
            hint = did_you_mean(value, choices, json.dumps)
            self.fail(shown, f"{shown} must be {requirement}, got {show(value)}{hint}")
        return value

    def topic_list(
        self,
        table: Mapping[str, object],
        key: str,
        shown: str,
        known: Sequence[str],
        lookup: Container[str] | None = None,
    ) -> tuple[str, ...]:
        """Declared topics, each once (``lookup``: ``known`` as a set, for an O(1) ``in``)."""
        if key not in table:
            return tuple(known)
        value = table[key]
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            self.must(shown, "a non-empty array of topic names", value)
        names = frozenset(known) if lookup is None else lookup
        seen: set[str] = set()
        for i, name in enumerate(value):
            if name not in names:
                hint = did_you_mean(name, known, json.dumps)
                self.fail(f"{shown}[{i}]", f"{shown}[{i}]: no topic {show(name)} is defined{hint}")
            if name in seen:
                self.fail(f"{shown}[{i}]", f"{shown}[{i}]: topic {show(name)} is listed twice")
            seen.add(name)
        return tuple(value)

    def topic_name(self, table: Mapping[str, object], key: str, shown: str) -> str:
        """A name a topic may be created with (``Topic.validate``), not the internal one."""
        name = self.string(
            table,
            key,
            shown,
            None,
            TOPIC_NAME_RE,
            249,
            "a Kafka topic name: letters, digits, '.', '_' or '-' (at most 249)",
        )
        if name in (".", ".."):
            self.must(shown, "a Kafka topic name other than '.' or '..'", name)
        if name in INTERNAL_TOPICS:
            self.must(
                shown,
                "a topic name other than the brokers' internal offsets topic "
                "(the modern generations' coordinators use it)",
                name,
            )
        return name

    def topic_pattern(self, table: Mapping[str, object], key: str, shown: str) -> str:
        """A subscription pattern every Java-based generation reads (0.8 filter and classic).

        It must compile as written (``Pattern.compile``, the classic client's
        ``subscribe(Pattern)``) and as the 0.8 consumer's ``TopicFilter`` rewrites
        it (commas to ``|``, spaces and outer quotes dropped). Whether RE2/J takes
        it is a KIP-848 member's run-time answer (``INVALID_REGULAR_EXPRESSION``),
        not a scenario error.
        """
        value = self.string(
            table,
            key,
            shown,
            None,
            max_len=MAX_TOPIC_PATTERN_CHARS,
            requirement=f"a non-empty regex string of at most {MAX_TOPIC_PATTERN_CHARS} characters",
        )
        if not value:
            self.must(
                shown,
                f"a non-empty regex string of at most {MAX_TOPIC_PATTERN_CHARS} characters",
                value,
            )
        try:
            compile_pattern(value, "java")
        except TopicRegexError as err:
            self.fail(shown, f"{shown} {show(value)}: {err.reason}")
        try:
            TopicFilter(value)
        except TopicRegexError as err:
            self.fail(
                shown,
                f"{shown} {show(value)}: as the 0.8 consumer's TopicFilter rewrites it "
                f"({show(err.pattern)}): {err.reason}",
            )
        return value

    def topic_filter(
        self, table: Mapping[str, object], key: str, shown: str, pattern_shown: str
    ) -> FilterKind | None:
        """The 0.8 filter kind of the pattern ``pattern_shown`` names: ``whitelist`` by default,
        ``None`` (and the key refused) without a pattern."""
        pattern_key = pattern_shown.rsplit(".", 1)[-1]
        if pattern_key not in table:
            if key in table:
                self.fail(shown, f"{shown}: only allowed with {pattern_shown} (a 0.8 filter kind)")
            return None
        return cast(FilterKind, self.choice(table, key, shown, "whitelist", FILTER_KINDS))


def in_section(section: str) -> Callable[[str], str]:
    """How a key of ``[section]`` is written in messages: ``[section].key``."""
    return lambda key: f"[{section}].{key}"


def in_array(where: str) -> Callable[[str], str]:
    """How a key of an array entry is written in messages: ``topics[2].key``."""
    return lambda key: f"{where}.{key}"


def number_text(value: float) -> str:
    """A bound as messages show it: ``604800``, ``10000000``, ``0.01``."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def one_of(choices: Sequence[str], shown: int = 20) -> str:
    """``"a", "b", "c"``: the first ``shown`` choices, then how many there are in all."""
    listed = ", ".join(json.dumps(c) for c in choices[:shown])
    return listed if len(choices) <= shown else f"{listed}, ... ({len(choices)} in all)"
