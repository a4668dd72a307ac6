"""Topic subscription patterns, matched the way each generation's Kafka matches them.

Three places in Kafka match a topic name against a subscription pattern, and
all three are *full* matches (kafka-protocols.md, issue-19 facts D1):

* the 0.8 consumer's ``Whitelist``/``Blacklist`` (K@0.8.2.2
  ``consumer/TopicFilter.scala``): ``topic.matches(regex)``, Java's
  ``String.matches``, after rewriting the configured string (:class:`TopicFilter`);
* the classic Java client's ``subscribe(Pattern)`` (K@3.9
  ``SubscriptionState.matchesSubscribedPattern``): ``pattern.matcher(topic).matches()``;
* KIP-848's broker-side regex (``subscribe(SubscriptionPattern)``, Kafka 4.0+;
  CK@4.1 ``GroupMetadataManager.refreshRegularExpressions``):
  ``com.google.re2j.Pattern.compile(regex).matcher(topic).matches()``, RE2/J 1.7
  in Kafka 4.0 and 1.8 from 4.1 (``gradle/dependencies.gradle``).

So ``^topic*`` matches ``topi``, ``topic`` and ``topiccc`` in every dialect and
never ``topic-1`` (librdkafka's classic client matched unanchored; that is
where KIP-848 changed what ``^topic*`` means, librdkafka#5251).

Two dialects (:data:`DIALECTS`):

* ``java``: ``java.util.regex``, read by Python's :mod:`re` after a translation
  of the constructs the two spell differently (``\\Q...\\E``, ``\\z``, ``\\Z``,
  ``(?<name>...)``, ``\\k<name>``, ``\\p{Alpha}`` and the other POSIX classes,
  ``\\e``, ``\\cX``, ``\\0nn``, ``\\x{h...h}``, leading ``(?i)``); what Java
  rejects is rejected (``x{,2}``, a ``{`` that is not a ``{n,m}``, ``(?P<n>...)``,
  ``(?#...)``), and what has no safe Python reading is refused with the
  construct named (Unicode ``\\p{L}``, nested classes ``[a[b]]`` and
  intersections ``[a&&b]``, embedded flags after the start, ``(?x)``,
  ``(?u)``, ``(?d)``, ``(?U)``, ``\\G``, ``\\h``, ``\\v``, ``\\R``, ...).
  Compiled with :data:`re.ASCII`, so ``\\w``, ``\\d``, ``\\s``, ``\\b`` and
  ``(?i)`` mean what they mean in Java without ``UNICODE_CHARACTER_CLASS`` and
  ``UNICODE_CASE``. Possessive quantifiers and atomic groups are read as
  Python 3.11 reads them, the same as Java. Where Java and Python differ only
  on characters a topic name cannot hold (line terminators for ``.`` and
  ``$``, non-ASCII letters), Python's reading is kept: the matcher is for topic
  names, ``[a-zA-Z0-9._-]``.
* ``re2j``: RE2/J, read by RE2 (the ``google-re2`` binding) with the two
  differences of RE2/J guarded: ``\\C`` (any byte) is refused, as RE2/J refuses
  it; ``(?<name>...)`` is refused under RE2/J 1.7 (Kafka 4.0), which knows only
  ``(?P<name>...)`` (RE2J@1.7 ``Parser.parsePerlFlags``; 1.8 added it, re2j
  commit 9b3f052). Lookarounds, back-references, possessive quantifiers and
  ``x{1001}`` are rejected by RE2 itself, as by RE2/J.

A bad pattern raises :class:`TopicRegexError`, one line naming the pattern, the
dialect and the construct. The module is pure: no clock, no randomness.
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol, cast

import re2  # google-re2: RE2's own binding (no type information; see _Re2Pattern)

from emulator.kafka_keys import kafka_version_at_least, parse_kafka_version
from emulator.modern.config import KIP848_REGEX_SINCE, RE2J_NAMED_GROUPS_SINCE

__all__ = [
    "BLACKLIST",
    "DIALECTS",
    "FILTER_KINDS",
    "INTERNAL_TOPICS",
    "KIP848_REGEX_SINCE",
    "RE2J_NAMED_GROUPS_SINCE",
    "RE2J_VERSIONS",
    "WHITELIST",
    "Dialect",
    "FilterKind",
    "Re2jVersion",
    "TopicFilter",
    "TopicMatcher",
    "TopicRegexError",
    "compile_pattern",
    "java_to_python",
    "re2j_version_for",
    "select_topics",
    "topic_filter_regex",
]

Dialect = Literal["java", "re2j"]
"""The regex dialect of a subscription pattern: Java's ``java.util.regex`` or RE2/J."""
DIALECTS: Final[tuple[Dialect, ...]] = ("java", "re2j")

Re2jVersion = Literal["1.7", "1.8"]
"""The RE2/J release a Kafka broker evaluates KIP-848 regexes with."""
RE2J_VERSIONS: Final[tuple[Re2jVersion, ...]] = ("1.7", "1.8")

FilterKind = Literal["whitelist", "blacklist"]
"""The 0.8 consumer's ``TopicFilter``: ``Whitelist`` or ``Blacklist``."""
WHITELIST: Final[FilterKind] = "whitelist"
BLACKLIST: Final[FilterKind] = "blacklist"
FILTER_KINDS: Final[tuple[FilterKind, ...]] = (WHITELIST, BLACKLIST)

INTERNAL_TOPICS: Final[frozenset[str]] = frozenset({"__consumer_offsets"})
"""``Topic.InternalTopics`` of 0.8.2.2 (K@0.8.2.2 ``common/Topic.scala`` 29): the offsets topic."""


class TopicRegexError(ValueError):
    """A subscription pattern the dialect rejects, or one the emulator cannot read faithfully.

    Attributes:
        pattern: the pattern as given.
        dialect: ``java`` or ``re2j``.
        reason: what is wrong, naming the construct.
    """

    def __init__(self, pattern: str, dialect: str, reason: str) -> None:
        super().__init__(f"topic pattern {pattern!r} ({_DIALECT_NAMES[dialect]}): {reason}")
        self.pattern = pattern
        self.dialect = dialect
        self.reason = reason


_DIALECT_NAMES: Final = {"java": "java.util.regex", "re2j": "RE2/J"}


class _Matcher(Protocol):
    """What this module uses of a compiled pattern, ``re``'s or ``re2``'s (which has no types)."""

    def fullmatch(self, text: str) -> object | None: ...


@dataclass(frozen=True)
class TopicMatcher:
    """A compiled subscription pattern; :meth:`matches` is Kafka's full match.

    Build it with :func:`compile_pattern`. It pickles as its pattern (compiled
    again on the other side), so it can ride an actor message.

    Attributes:
        pattern: the pattern as given.
        dialect: ``java`` or ``re2j``.
        re2j_version: the RE2/J release whose syntax was checked (``re2j`` only).
    """

    pattern: str
    dialect: Dialect
    re2j_version: Re2jVersion | None
    _compiled: _Matcher = field(repr=False, compare=False)

    def matches(self, topic: str) -> bool:
        """Whether ``topic`` matches in full (``Pattern.matcher(topic).matches()``)."""
        return self._compiled.fullmatch(topic) is not None

    def __reduce__(self) -> tuple[object, tuple[str, Dialect, Re2jVersion]]:
        return (_rebuild, (self.pattern, self.dialect, self.re2j_version or "1.8"))


def _rebuild(pattern: str, dialect: Dialect, re2j_version: Re2jVersion) -> TopicMatcher:
    return compile_pattern(pattern, dialect, re2j_version=re2j_version)


def compile_pattern(
    pattern: str, dialect: Dialect, *, re2j_version: Re2jVersion = "1.8"
) -> TopicMatcher:
    """Compile a subscription pattern in a dialect (cached: the same pattern, the same matcher).

    Args:
        pattern: the regex as the application gives it.
        dialect: ``java`` (0.8 filters, the classic client's ``Pattern``) or
            ``re2j`` (KIP-848's broker-side ``SubscriptionPattern``).
        re2j_version: for ``re2j``, the RE2/J release (:func:`re2j_version_for`).

    Returns:
        The matcher.

    Raises:
        TopicRegexError: the dialect rejects the pattern, or the emulator
            cannot read it faithfully (the message names the construct).
        ValueError: an unknown dialect or RE2/J release.
    """
    if dialect not in DIALECTS:
        raise ValueError(f"unknown regex dialect {dialect!r}; expected one of {DIALECTS}")
    if re2j_version not in RE2J_VERSIONS:
        raise ValueError(f"unknown RE2/J release {re2j_version!r}; expected one of {RE2J_VERSIONS}")
    return _compile(pattern, dialect, re2j_version if dialect == "re2j" else None)


@functools.lru_cache(maxsize=1024)
def _compile(pattern: str, dialect: Dialect, re2j_version: Re2jVersion | None) -> TopicMatcher:
    compiled: _Matcher
    if dialect == "java":
        python, flags = java_to_python(pattern)
        with warnings.catch_warnings():
            # Python warns (FutureWarning) where it may one day read set operations
            # ("--", "||", "&&", "~~", a nested "["): not Java's reading either way.
            warnings.simplefilter("error", FutureWarning)
            try:
                compiled = re.compile(python, flags | re.ASCII)
            except FutureWarning as warning:
                raise TopicRegexError(
                    pattern, dialect, f"{warning} (a character class Python may read as a set op)"
                ) from None
            except re.error as err:
                raise TopicRegexError(pattern, dialect, _python_error(err)) from None
            except OverflowError:
                raise TopicRegexError(
                    pattern, dialect, "a repetition count too large (Java: illegal repetition)"
                ) from None
            except RecursionError:
                raise TopicRegexError(
                    pattern, dialect, "groups nested too deeply for Python's re"
                ) from None
    else:
        assert re2j_version is not None
        _re2j_guards(pattern, re2j_version)
        options = re2.Options()
        options.log_errors = False  # RE2 logs every parse error to stderr otherwise
        try:
            compiled = cast(_Matcher, re2.compile(pattern, options))
        except re2.error as err:
            raise TopicRegexError(pattern, dialect, _re2_error(err)) from None
    return TopicMatcher(pattern, dialect, re2j_version, compiled)


def re2j_version_for(kafka_version: str) -> Re2jVersion:
    """The RE2/J release a Kafka broker of ``kafka_version`` resolves KIP-848 regexes with.

    Raises:
        ValueError: a malformed version, or one before 4.0 (no broker-side regex:
            3.9's ConsumerGroupHeartbeat v0 has no ``SubscribedTopicRegex``).
    """
    parse_kafka_version(kafka_version)
    if not kafka_version_at_least(kafka_version, KIP848_REGEX_SINCE):
        raise ValueError(
            f"Kafka {kafka_version} has no broker-side regex (KIP-848 SubscribedTopicRegex "
            "arrived in 4.0)"
        )
    return "1.8" if kafka_version_at_least(kafka_version, RE2J_NAMED_GROUPS_SINCE) else "1.7"


# --------------------------------------------------------------------------- 0.8 TopicFilter


def topic_filter_regex(raw: str) -> str:
    """``TopicFilter.regex``: the configured string as 0.8.2.2 rewrites it.

    ``rawRegex.trim.replace(',', '|').replace(" ", "")``, then leading and
    trailing runs of ``"`` and ``'`` stripped ("property files may bring
    quotes"); K@0.8.2.2 ``consumer/TopicFilter.scala`` 28-33. Java's ``trim``
    strips every character up to U+0020.
    """
    regex = _java_trim(raw).replace(",", "|").replace(" ", "")
    regex = re.sub(r"""^["']+""", "", regex)
    return re.sub(r"""["']+$""", "", regex)


def _java_trim(text: str) -> str:
    """``String.trim``: strips the characters <= U+0020 at both ends (not Unicode spaces)."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


@dataclass(frozen=True)
class TopicFilter:
    """The 0.8 consumer's ``Whitelist`` or ``Blacklist`` (K@0.8.2.2 ``consumer/TopicFilter.scala``).

    ``Whitelist.isTopicAllowed`` = ``topic.matches(regex) && !(internal && exclude)``;
    ``Blacklist.isTopicAllowed`` = ``!topic.matches(regex) && !(internal && exclude)``,
    with ``regex`` = :func:`topic_filter_regex` of the configured string, compiled
    once as Java does (an invalid one: ``RuntimeException("<regex> is an invalid
    regex.")``, here :class:`TopicRegexError`). A comma joins alternatives, and the
    full match covers the whole alternation: ``"a, b"`` allows ``a`` and ``b``.

    Attributes:
        raw: the configured string (what ``createMessageStreamsByFilter`` was given).
        kind: ``whitelist`` or ``blacklist``.
    """

    raw: str
    kind: FilterKind = WHITELIST
    matcher: TopicMatcher = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in FILTER_KINDS:
            raise ValueError(f"unknown topic filter {self.kind!r}; expected one of {FILTER_KINDS}")
        object.__setattr__(self, "matcher", compile_pattern(self.regex, "java"))

    @property
    def regex(self) -> str:
        """The regex 0.8 matches with (:func:`topic_filter_regex` of :attr:`raw`)."""
        return topic_filter_regex(self.raw)

    def allowed(self, topic: str, exclude_internal: bool = True) -> bool:
        """``isTopicAllowed(topic, excludeInternalTopics)``.

        Args:
            topic: a child of ``/brokers/topics``.
            exclude_internal: ``exclude.internal.topics`` (default true,
                K@0.8.2.2 ``consumer/ConsumerConfig.scala`` 51, 179).
        """
        if exclude_internal and topic in INTERNAL_TOPICS:
            return False
        return self.matcher.matches(topic) == (self.kind == WHITELIST)


def select_topics(
    topics: Iterable[str],
    pattern: str,
    kind: FilterKind = WHITELIST,
    *,
    dialect: Dialect = "java",
    exclude_internal: bool = True,
) -> tuple[str, ...]:
    """The topics a pattern subscription selects, in the order given.

    A full match of ``pattern`` as written (no 0.8 rewrite: see
    :class:`TopicFilter` for that), or for a ``blacklist`` every topic it does
    not match; internal topics are left out when ``exclude_internal``
    (``exclude.internal.topics``; a KIP-848 coordinator's RE2/J resolution keeps
    them: pass ``False``).

    Raises:
        TopicRegexError: as :func:`compile_pattern`.
    """
    matcher = compile_pattern(pattern, dialect)
    if kind not in FILTER_KINDS:
        raise ValueError(f"unknown topic filter {kind!r}; expected one of {FILTER_KINDS}")
    want = kind == WHITELIST
    return tuple(
        t
        for t in topics
        if not (exclude_internal and t in INTERNAL_TOPICS) and matcher.matches(t) == want
    )


# --------------------------------------------------------------------------- RE2/J


def _re2j_guards(pattern: str, version: Re2jVersion) -> None:
    """Refuse what RE2/J refuses and RE2 (C++) accepts: ``\\C``; ``(?<`` under 1.7.

    Outside ``\\Q...\\E`` and character classes only: inside a class RE2
    itself rejects ``\\C``, and ``(?<`` there is three literal characters.
    """
    for pos, token in _re2_tokens(pattern):
        if token == "\\C":
            raise TopicRegexError(
                pattern,
                "re2j",
                f"\\C at position {pos}: RE2/J rejects it (invalid escape sequence; RE2 C++ "
                "reads it as any byte)",
            )
        if token == "(?<" and version == "1.7":
            raise TopicRegexError(
                pattern,
                "re2j",
                f"(?< at position {pos}: RE2/J 1.7 (Kafka 4.0) knows named groups only as "
                "(?P<name>...); (?<name>...) came with RE2/J 1.8 (Kafka 4.1)",
            )


def _re2_tokens(pattern: str) -> list[tuple[int, str]]:
    """The ``\\C`` escapes and ``(?<`` openings of an RE2 pattern outside classes and quotes."""
    found: list[tuple[int, str]] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            if nxt == "Q":
                end = pattern.find("\\E", i + 2)
                i = n if end < 0 else end + 2
                continue
            if nxt == "C":
                found.append((i, "\\C"))
            i += 2
        elif c == "[":
            i = _skip_re2_class(pattern, i)
        elif pattern.startswith("(?<", i) and pattern[i + 3 : i + 4] not in ("=", "!"):
            found.append((i, "(?<"))  # a named group; look-behinds RE2 rejects itself
            i += 3
        else:
            i += 1
    return found


def _skip_re2_class(pattern: str, start: int) -> int:
    """The index after the character class opening at ``start`` (RE2's ``parseClass``).

    A ``]`` first (after an optional ``^``) is a literal, ``[:name:]`` is one
    item, a backslash escapes the next character. An unclosed class runs to the
    end (RE2 rejects it).
    """
    i, n = start + 1, len(pattern)
    if i < n and pattern[i] == "^":
        i += 1
    first = True
    while i < n:
        c = pattern[i]
        if c == "]" and not first:
            return i + 1
        first = False
        if c == "\\":
            i += 2
        elif pattern.startswith("[:", i):
            end = pattern.find(":]", i + 2)
            i = i + 1 if end < 0 else end + 2
        else:
            i += 1
    return n


def _re2_error(err: Exception) -> str:
    text = err.args[0] if err.args else str(err)
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return f"RE2 rejects it: {text}"


# --------------------------------------------------------------------------- Java -> Python

_POSIX_CLASSES: Final[dict[str, str]] = {
    # java.util.regex.Pattern, "POSIX character classes (US-ASCII only)"
    "Lower": "a-z",
    "Upper": "A-Z",
    "ASCII": "\\x00-\\x7f",
    "Alpha": "a-zA-Z",
    "Digit": "0-9",
    "Alnum": "a-zA-Z0-9",
    "Punct": "!-/:-@\\[-`{-~",
    "Graph": "!-~",
    "Print": " -~",
    "Blank": " \\t",
    "Cntrl": "\\x00-\\x1f\\x7f",
    "XDigit": "0-9a-fA-F",
    "Space": " \\t\\n\\x0b\\f\\r",
}
"""Java's POSIX classes as the body of a Python class (``\\p{Punct}``: the 32 ASCII symbols)."""

_SIMPLE_ESCAPES: Final[dict[str, str]] = {
    "t": "\\t",
    "n": "\\n",
    "r": "\\r",
    "f": "\\f",
    "a": "\\a",
    "e": "\\x1b",
}
_CLASS_SHORTHANDS: Final = frozenset("dDsSwW")
_JAVA_ONLY: Final[dict[str, str]] = {
    "G": "\\G (the end of the previous match)",
    "h": "\\h (horizontal whitespace)",
    "H": "\\H (not horizontal whitespace)",
    "v": "\\v (vertical whitespace in Java 8+, a single character in Python)",
    "V": "\\V (not vertical whitespace)",
    "R": "\\R (any line break)",
    "X": "\\X (an extended grapheme cluster)",
    "N": "\\N{...} (a character by Unicode name)",
    "b{": "\\b{g} (a grapheme boundary)",
}
_JAVA_FLAGS: Final = frozenset("idmsuxU")
_PYTHON_FLAGS: Final[dict[str, int]] = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL}
_FLAG_NAMES: Final[dict[str, str]] = {
    "d": "UNIX_LINES",
    "u": "UNICODE_CASE",
    "x": "COMMENTS",
    "U": "UNICODE_CHARACTER_CLASS",
}
_QUANTIFIER_RE: Final = re.compile(r"\{[0-9]+(?:,[0-9]*)?\}")
_GROUP_NAME_RE: Final = re.compile(r"[a-zA-Z][a-zA-Z0-9]*")
_FLAGS_RE: Final = re.compile(r"\(\?([a-zA-Z]*)(?:-([a-zA-Z]*))?([:)])")


def java_to_python(pattern: str) -> tuple[str, int]:
    """Translate a ``java.util.regex`` pattern for Python's :mod:`re`.

    Returns:
        ``(python_pattern, flags)``: the pattern and the :mod:`re` flags its
        leading embedded flags set (``(?i)`` -> :data:`re.IGNORECASE`, ...);
        compile with ``flags | re.ASCII``.

    Raises:
        TopicRegexError: Java rejects the pattern, or it holds a construct with
            no faithful Python reading (named in the message).
    """
    return _JavaTranslator(pattern).run()


class _JavaTranslator:
    """One pass over a Java pattern, writing its Python equivalent."""

    def __init__(self, pattern: str) -> None:
        self.src = pattern
        self.i = 0
        self.out: list[str] = []
        self.flags = 0

    def refuse(self, reason: str) -> TopicRegexError:
        return TopicRegexError(self.src, "java", reason)

    def run(self) -> tuple[str, int]:
        src, n = self.src, len(self.src)
        self.leading_flags()
        while self.i < n:
            c = src[self.i]
            if c == "\\":
                self.out.append(self.escape(in_class=False))
            elif c == "[":
                self.char_class()
            elif c == "(":
                self.group()
            elif c == "{":
                self.quantifier()
            else:
                self.out.append(c)
                self.i += 1
        return "".join(self.out), self.flags

    # ---- flags and groups

    def leading_flags(self) -> None:
        """``(?i)``, ``(?is)``, ``(?i-s)`` ... at the very start: the whole pattern's flags."""
        while True:
            m = _FLAGS_RE.match(self.src, self.i)
            if m is None or m.group(3) != ")":
                return
            on, off = m.group(1), m.group(2) or ""
            self.check_flags(on + off, m.start())
            for flag in on:
                self.flags |= _PYTHON_FLAGS[flag]
            for flag in off:
                self.flags &= ~_PYTHON_FLAGS[flag]
            self.i = m.end()

    def check_flags(self, letters: str, pos: int) -> None:
        for flag in letters:
            if flag not in _JAVA_FLAGS:
                raise self.refuse(
                    f"unknown inline modifier {flag!r} at position {pos}: Java rejects it"
                )
            if flag in _FLAG_NAMES:
                raise self.refuse(
                    f"(?{flag}) ({_FLAG_NAMES[flag]}) at position {pos}: no faithful Python reading"
                )

    def group(self) -> None:
        src, i = self.src, self.i
        if not src.startswith("(?", i):
            self.out.append("(")
            self.i += 1
            return
        rest = src[i + 2 : i + 4]
        if rest[:1] in (":", "=", "!", ">") or rest in ("<=", "<!"):
            # non-capturing, lookahead, atomic (Python 3.11), lookbehind: the same syntax
            width = 3 if rest[:1] in (":", "=", "!", ">") else 4
            self.out.append(src[i : i + width])
            self.i += width
            return
        if rest[:1] == "<":
            end = src.find(">", i + 3)
            name = src[i + 3 : end] if end >= 0 else ""
            if end < 0 or not _GROUP_NAME_RE.fullmatch(name):
                raise self.refuse(
                    f"named group at position {i}: Java needs (?<name>...) with a name of "
                    "ASCII letters and digits starting with a letter"
                )
            self.out.append(f"(?P<{name}>")
            self.i = end + 1
            return
        m = _FLAGS_RE.match(src, i)
        if m is None:
            shown = src[i : i + 3]
            raise self.refuse(
                f"{shown} at position {i}: Java rejects it (unknown inline modifier; "
                "(?P<name>...), (?P=name), (?#...) and (?(1)...) are not Java)"
            )
        on, off = m.group(1), m.group(2) or ""
        self.check_flags(on + off, i)
        if m.group(3) == ")":
            raise self.refuse(
                f"{m.group(0)} at position {i}: embedded flags after the start of the pattern "
                f"apply to the rest of the enclosing group in Java; write (?{on or '-' + off}:...) "
                "around the part they apply to, or put them first"
            )
        if not on and not off:
            self.out.append("(?:")
        else:
            self.out.append(f"(?{on}{'-' + off if off else ''}:")
        self.i = m.end()

    def quantifier(self) -> None:
        m = _QUANTIFIER_RE.match(self.src, self.i)
        if m is None:
            raise self.refuse(
                f"'{{' at position {self.i} does not open a {{n}}, {{n,}} or {{n,m}} "
                "quantifier: Java rejects it (illegal repetition; write \\{ for the character)"
            )
        self.out.append(m.group(0))
        self.i = m.end()

    # ---- escapes

    def escape(self, *, in_class: bool) -> str:
        """The Python text of the escape at ``self.i`` (a backslash); advances past it."""
        src, i = self.src, self.i
        if i + 1 >= len(src):
            raise self.refuse("a trailing backslash: Java rejects it")
        c = src[i + 1]
        self.i = i + 2
        if not c.isascii() or not c.isalnum():
            return re.escape(c)  # an escaped symbol is the symbol itself
        if c in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[c]
        if c in _CLASS_SHORTHANDS:
            return "\\" + c  # the same ASCII sets under re.ASCII
        if c == "Q":
            if in_class:
                raise self.refuse(f"\\Q at position {i} inside a character class: not translated")
            end = src.find("\\E", i + 2)
            literal = src[i + 2 :] if end < 0 else src[i + 2 : end]
            self.i = len(src) if end < 0 else end + 2
            return re.escape(literal)
        if c == "E":
            raise self.refuse(f"\\E at position {i} without a \\Q before it")
        if c in "pP":
            return self.property_class(c == "P", i, in_class)
        if c == "c":
            if self.i >= len(src):
                raise self.refuse(f"\\c at position {i} without its letter: Java rejects it")
            self.i += 1
            return _char(ord(src[i + 2]) ^ 64)
        if c == "x":
            return self.hex_escape(i)
        if c == "u":
            digits = src[i + 2 : i + 6]
            if len(digits) != 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise self.refuse(f"\\u at position {i} needs four hex digits: Java rejects it")
            self.i = i + 6
            return _char(int(digits, 16))
        if c == "0":
            return self.octal_escape(i)
        if c.isdigit() or c == "k":
            if in_class:
                raise self.refuse(f"a back-reference at position {i} inside a character class")
            return self.back_reference(c, i)
        if c in "AbBzZ" and in_class:
            raise self.refuse(f"\\{c} at position {i} inside a character class: Java rejects it")
        if c in "Ab":
            if src.startswith("\\b{", i):
                raise self.refuse(f"{_JAVA_ONLY['b{']} at position {i}: no Python equivalent")
            return "\\" + c
        if c == "B":
            return "\\B"
        if c == "z":
            return "\\Z"  # Python's \Z is the end of the input, Java's \z
        if c == "Z":
            # Java: the end of the input but for a final line terminator, if any
            return "(?=(?:\\r\\n|[\\n\\r\\x85\\u2028\\u2029])?\\Z)"
        if c in _JAVA_ONLY:
            raise self.refuse(f"{_JAVA_ONLY[c]} at position {i}: no faithful Python reading")
        raise self.refuse(f"\\{c} at position {i}: Java rejects it (illegal escape sequence)")

    def property_class(self, negated: bool, pos: int, in_class: bool) -> str:
        src = self.src
        if self.i < len(src) and src[self.i] == "{":
            end = src.find("}", self.i)
            if end < 0:
                raise self.refuse(f"\\p{{ at position {pos} is not closed: Java rejects it")
            name = src[self.i + 1 : end]
            self.i = end + 1
        elif self.i < len(src):
            name = src[self.i]
            self.i += 1
        else:
            raise self.refuse(f"\\p at position {pos} without a class name: Java rejects it")
        shown = f"\\{'P' if negated else 'p'}{{{name}}}"
        body = _POSIX_CLASSES.get(name)
        if body is None:
            raise self.refuse(
                f"{shown} at position {pos}: Java's Unicode classes have no Python re "
                "equivalent (only the POSIX classes \\p{Alpha}, \\p{Digit}, ... are translated; "
                "topic names are ASCII: write [A-Za-z])"
            )
        if in_class:
            if negated:
                raise self.refuse(f"{shown} at position {pos} inside a character class")
            return body
        return f"[{'^' if negated else ''}{body}]"

    def hex_escape(self, pos: int) -> str:
        src = self.src
        if self.i < len(src) and src[self.i] == "{":
            end = src.find("}", self.i)
            digits = src[self.i + 1 : end] if end >= 0 else ""
            if not digits or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise self.refuse(f"\\x{{...}} at position {pos} needs hex digits: Java rejects it")
            value = int(digits, 16)
            if value > 0x10FFFF:
                raise self.refuse(f"\\x{{{digits}}} at position {pos} is not a code point")
            self.i = end + 1
            return _char(value)
        digits = src[self.i : self.i + 2]
        if len(digits) != 2 or not all(d in "0123456789abcdefABCDEF" for d in digits):
            raise self.refuse(f"\\x at position {pos} needs two hex digits: Java rejects it")
        self.i += 2
        return _char(int(digits, 16))

    def octal_escape(self, pos: int) -> str:
        """Java's ``\\0n``, ``\\0nn``, ``\\0mnn`` (``m`` <= 3)."""
        src = self.src
        digits = ""
        while len(digits) < 3 and self.i < len(src) and src[self.i] in "01234567":
            if len(digits) == 2 and digits[0] > "3":
                break
            digits += src[self.i]
            self.i += 1
        if not digits:
            raise self.refuse(f"\\0 at position {pos} needs an octal digit: Java rejects it")
        return _char(int(digits, 8))

    def back_reference(self, c: str, pos: int) -> str:
        src = self.src
        if c == "k":
            m = re.compile(r"<([a-zA-Z][a-zA-Z0-9]*)>").match(src, self.i)
            if m is None:
                raise self.refuse(f"\\k at position {pos} needs <name>: Java rejects it")
            self.i = m.end()
            return f"(?P={m.group(1)})"
        if self.i < len(src) and src[self.i].isdigit():
            raise self.refuse(
                f"a multi-digit back-reference at position {pos}: Java reads as many digits "
                "as there are groups, Python all of them"
            )
        return "\\" + c

    # ---- character classes

    def char_class(self) -> None:
        """A ``[...]`` class; nested classes and ``&&`` are refused."""
        src, n = self.src, len(self.src)
        start = self.i
        parts = ["["]
        self.i += 1
        if self.i < n and src[self.i] == "^":
            parts.append("^")
            self.i += 1
        first = True
        while self.i < n:
            c = src[self.i]
            if c == "]" and not first:
                parts.append("]")
                self.i += 1
                self.out.append("".join(parts))
                return
            if c == "]":
                parts.append("\\]")  # a ']' first is a literal in Java and Python alike
                self.i += 1
            elif c == "[":
                raise self.refuse(
                    f"a nested class at position {self.i} (Java's union, as in [a[bc]] or "
                    "[[:alpha:]]): not translated"
                )
            elif src.startswith("&&", self.i):
                raise self.refuse(
                    f"&& at position {self.i}: Java's class intersection is not translated"
                )
            elif c == "\\":
                parts.append(self.escape(in_class=True))
            elif c in "|~&":
                parts.append("\\" + c)  # literal in both; escaped so Python sees no set op
                self.i += 1
            else:
                parts.append(c)
                self.i += 1
            first = False
        raise self.refuse(f"the character class at position {start} is not closed: Java rejects it")


def _char(code: int) -> str:
    """One character as a Python regex literal."""
    return re.escape(chr(code))


def _python_error(err: re.error) -> str:
    where = "" if err.pos is None else f" at position {err.pos} of the translation"
    return f"{err.msg}{where} (Python's re, standing in for java.util.regex, refuses it)"
