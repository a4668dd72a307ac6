"""The scenario's one-line errors: :class:`ScenarioError` and the phrases its messages share.

Every invalid scenario fails with one line that names the key, for example
``scenario quickstart.toml: [group].consumers must be an integer >= 1, got "four"``;
the parser (:mod:`emulator.scenario.parse`) and the planner
(:mod:`emulator.scenario.plan`) build their messages from the pieces here, so a
value, a did-you-mean and a bound read the same wherever they are checked.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Iterable

__all__ = ["ScenarioError", "did_you_mean", "int_requirement", "show", "tighter"]


class ScenarioError(ValueError):
    """An invalid scenario. ``str()`` is one line naming the offending key.

    Attributes:
        source: the file (or source name) the scenario came from.
        key: the offending key as written in messages, e.g. ``[group].consumers``.
    """

    def __init__(self, source: str, key: str, message: str) -> None:
        line = f"scenario {source}: {message}".replace("\r", " ").replace("\n", " ")
        super().__init__(line)
        self.source = source
        self.key = key


def show(value: object) -> str:
    """A one-line rendering of a TOML value for error messages."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        text = value if len(value) <= 60 else value[:57] + "..."
        return json.dumps(text, ensure_ascii=False)
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return f"a {type(value).__name__}"


def did_you_mean(word: str, candidates: Iterable[str], render: Callable[[str], str]) -> str:
    """A did-you-mean suffix: the closest candidate, or one that extends ``word``."""
    pool = list(candidates)
    close = difflib.get_close_matches(word, pool, n=1, cutoff=0.6)
    if not close and len(word) >= 3:
        close = [c for c in pool if c.startswith(word) or word.startswith(c)][:1]
    return f"; did you mean {render(close[0])}?" if close else ""


def tighter(*limits: tuple[int, str]) -> tuple[int, str]:
    """The smallest of several size limits, with its reason."""
    return min(limits, key=lambda pair: pair[0])


def int_requirement(minimum: int | None, maximum: int | None, bound_note: str) -> str:
    """What an integer must be, after "must be": its range, then the bound's reason."""
    note = f" ({bound_note})" if bound_note else ""
    if minimum is not None and maximum is not None:
        return f"an integer between {minimum} and {maximum}{note}"
    if minimum is not None:
        return f"an integer >= {minimum}{note}"
    if maximum is not None:
        return f"an integer <= {maximum}{note}"
    return "an integer"
