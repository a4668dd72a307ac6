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
from typing import NoReturn

from emulator.scenario.errors import ScenarioError, did_you_mean, int_requirement, show

__all__ = ["TableReader", "in_array", "in_section", "number_text", "one_of"]


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
