"""Subscription patterns per dialect (emulator/topic_regex.py): Java via Python's re, RE2/J via RE2.

The dialect facts are the issue-19 notes' D1-D3 (RE2J@1.7/1.8 ``Parser.java``,
K@0.8.2.2 ``consumer/TopicFilter.scala``, ``java.util.regex.Pattern``).
"""

from __future__ import annotations

import pickle
import re

import pytest

from emulator.topic_regex import (
    INTERNAL_TOPICS,
    TopicFilter,
    TopicMatcher,
    TopicRegexError,
    compile_pattern,
    java_to_python,
    re2j_version_for,
    select_topics,
    topic_filter_regex,
)
from zk_registry import layout

TOPICS = ("topi", "topic", "topiccc", "topic-1", "topics", "events-1", "a.b", "axb")


def matched(pattern: str, dialect: str, version: str = "1.8") -> set[str]:
    m = compile_pattern(pattern, dialect, re2j_version=version)  # type: ignore[arg-type]
    return {t for t in TOPICS if m.matches(t)}


def refused(pattern: str, dialect: str, fragment: str, version: str = "1.8") -> str:
    with pytest.raises(TopicRegexError) as info:
        compile_pattern(pattern, dialect, re2j_version=version)  # type: ignore[arg-type]
    message = str(info.value)
    assert "\n" not in message
    assert repr(pattern) in message
    assert fragment in message, message
    assert info.value.pattern == pattern and info.value.dialect == dialect
    return message


# --------------------------------------------------------------------------- full match


@pytest.mark.parametrize("dialect", ["java", "re2j"])
def test_caret_topic_star_is_a_full_match_in_every_dialect(dialect: str) -> None:
    # KIP-848 docs' example: ^topic* no longer matches topic-1 (librdkafka matched it
    # unanchored); Java's matches() and RE2/J's matches() never did.
    assert matched("^topic*", dialect) == {"topi", "topic", "topiccc"}
    assert matched("topic.*", dialect) == {"topic", "topiccc", "topic-1", "topics"}
    assert matched("events-.*", dialect) == {"events-1"}
    assert matched("a|topic", dialect) == {"topic"}  # the whole alternation is anchored
    assert matched("a.b", dialect) == {"a.b", "axb"}
    assert matched(r"a\.b", dialect) == {"a.b"}


def test_an_unanchored_search_would_differ() -> None:
    # What librdkafka's classic client did (regexec): the difference the dialects avoid.
    assert re.search("^topic*", "topic-1") is not None
    assert not compile_pattern("^topic*", "java").matches("topic-1")
    assert not compile_pattern("^topic*", "re2j").matches("topic-1")


# --------------------------------------------------------------------------- Java


@pytest.mark.parametrize(
    ("java", "python", "topic", "expected"),
    [
        (r"\Qa.b\E", r"a\.b", "a.b", True),
        (r"\Qa.b\E", r"a\.b", "axb", False),
        (r"x\Q.*", r"x\.\*", "x.*", True),  # \Q without \E quotes to the end
        (r"ab\z", r"ab\Z", "ab", True),
        (r"(?<n>ab)\k<n>", "(?P<n>ab)(?P=n)", "abab", True),
        (r"\p{Alpha}+-\p{Digit}", "[a-zA-Z]+-[0-9]", "topic-1", True),
        (r"[\p{Lower}_]+", "[a-z_]+", "a_b", True),
        (r"\P{Digit}+", "[^0-9]+", "a1", False),
        (r"\p{Punct}", r"[!-/:-@\[-`{-~]", "_", True),
        (r"\e\cA\0101\x{42}\u0043", "\\x1b\x01ABC", "\x1b\x01ABC", True),
        ("a++b", "a++b", "aab", True),  # possessive: Python 3.11 reads it as Java
        ("(?>a|ab)c", "(?>a|ab)c", "abc", False),  # atomic: the same
        ("[]a]+", r"[\]a]+", "]a", True),  # a ']' first is a literal in both
        ("[a|b]", r"[a\|b]", "|", True),
    ],
)
def test_java_translations(java: str, python: str, topic: str, expected: bool) -> None:
    assert java_to_python(java)[0] == python
    assert compile_pattern(java, "java").matches(topic) is expected


def test_java_z_upper_allows_a_final_line_terminator() -> None:
    m = compile_pattern(r"ab\Z", "java")
    assert m.matches("ab") and not m.matches("abc")
    # Java's \Z stops before a final terminator; matches() still needs the whole input
    assert not m.matches("ab\n")
    assert compile_pattern(r"ab\Z\n", "java").matches("ab\n")
    assert compile_pattern(r"ab\Z\r\n", "java").matches("ab\r\n")


def test_java_leading_flags_become_compile_flags() -> None:
    assert java_to_python("(?i)Topic.*") == ("Topic.*", re.IGNORECASE)
    assert java_to_python("(?is)a")[1] == re.IGNORECASE | re.DOTALL
    assert java_to_python("(?i)(?-i)a")[1] == 0
    assert compile_pattern("(?i)TOPIC-1", "java").matches("topic-1")
    assert compile_pattern("(?i:T)opic", "java").matches("topic")
    assert not compile_pattern("(?i:T)opic", "java").matches("tOPIC")


def test_java_classes_are_ascii_as_in_java() -> None:
    # Without UNICODE_CHARACTER_CLASS Java's \w and \d are ASCII; re.ASCII makes Python's so.
    assert not compile_pattern(r"\w+", "java").matches("é")
    assert not compile_pattern(r"\d", "java").matches("٣")
    # Without UNICODE_CASE Java's (?i) folds ASCII only: the Kelvin sign is not a k.
    assert not compile_pattern("(?i)k", "java").matches("\u212a")


@pytest.mark.parametrize(
    ("pattern", "fragment"),
    [
        ("a{,2}", "does not open a {n}, {n,} or {n,m} quantifier: Java rejects it"),
        ("${topic}", "illegal repetition"),
        ("a{1, 3}", "does not open"),
        ("(?P<n>a)", "(?P at position 0: Java rejects it"),
        ("(?#note)a", "(?# at position 0: Java rejects it"),
        (r"\y", r"\y at position 0: Java rejects it"),
        ("a\\", "a trailing backslash"),
        ("[ab", "is not closed"),
        (r"\0", "needs an octal digit"),
        (r"\x4", "two hex digits"),
        ("(?<1a>x)", "named group at position 0"),
        ("(?z)a", "unknown inline modifier 'z'"),
        ("topic(", "missing ), unterminated subpattern"),
        ("*a", "nothing to repeat"),
    ],
)
def test_java_rejections(pattern: str, fragment: str) -> None:
    refused(pattern, "java", fragment)


@pytest.mark.parametrize(
    ("pattern", "fragment"),
    [
        (r"\p{L}+", r"\p{L} at position 0: Java's Unicode classes have no Python re equivalent"),
        (r"\pL", r"\p{L} at position 0"),
        (r"\p{IsLatin}", "Unicode classes"),
        ("[a[bc]]", "a nested class at position 2 (Java's union"),
        ("[[:alpha:]]+", "a nested class at position 1"),
        ("[a-z&&[^b]]", "&& at position 4: Java's class intersection"),
        ("a(?i)b", "(?i) at position 1: embedded flags after the start"),
        ("(?x)a b", "(?x) (COMMENTS)"),
        ("(?u)a", "(?u) (UNICODE_CASE)"),
        ("(?U)a", "(?U) (UNICODE_CHARACTER_CLASS)"),
        ("(?d)a", "(?d) (UNIX_LINES)"),
        (r"\Ga", r"\G (the end of the previous match)"),
        (r"\h", r"\h (horizontal whitespace)"),
        (r"\v", r"\v (vertical whitespace"),
        (r"\R", r"\R (any line break)"),
        (r"(a)\12", "a multi-digit back-reference"),
        (r"[\Qa\E]", r"\Q at position 1 inside a character class"),
        (r"[\P{Digit}]", "inside a character class"),
        ("[+--]", "Possible set difference"),
        (r"\E", r"\E at position 0 without a \Q"),
        ("(?<=a|bc)d", "look-behind requires fixed-width pattern"),  # Java accepts this one
        ("a{99999999999}", "a repetition count too large"),
        ("(" * 5000 + ")" * 5000, "groups nested too deeply"),
    ],
)
def test_java_constructs_without_a_faithful_python_reading_are_refused(
    pattern: str, fragment: str
) -> None:
    refused(pattern, "java", fragment)


# --------------------------------------------------------------------------- RE2/J


@pytest.mark.parametrize("version", ["1.7", "1.8"])
def test_re2j_reads_what_python_re_cannot(version: str) -> None:
    assert matched(r"\Qa.b\E", "re2j", version) == {"a.b"}
    assert matched(r"topic\z", "re2j", version) == {"topic"}
    assert matched(r"\pL+-\pN", "re2j", version) == {"topic-1", "events-1"}
    assert matched("[[:alpha:]]+", "re2j", version) == {"topi", "topic", "topiccc", "topics", "axb"}
    assert matched("(?P<n>topic)s", "re2j", version) == {"topics"}
    # An unparsable '{' is a literal in RE2/J (Parser: "If the repeat cannot be parsed,
    # { is a literal"), where Java rejects it and Python reads {0,2}.
    m = compile_pattern("a{,2}", "re2j", re2j_version=version)  # type: ignore[arg-type]
    assert m.matches("a{,2}") and not m.matches("aa")


@pytest.mark.parametrize("version", ["1.7", "1.8"])
@pytest.mark.parametrize(
    ("pattern", "fragment"),
    [
        ("(?=topic)topic", "RE2 rejects it: invalid perl operator: (?="),
        ("topic(?!-1).*", "invalid perl operator"),
        ("(?<=a)b", "invalid perl operator: (?<="),
        (r"\d++", "bad repetition operator"),
        ("(?>a)", "invalid perl operator"),
        (r"(a)\1", "invalid escape sequence"),
        (r"a\Z", r"invalid escape sequence: \Z"),
        ("x{1001}", "invalid repetition size"),
        (r"\C", r"\C at position 0: RE2/J rejects it"),
        (r"a(\C)", r"\C at position 2: RE2/J rejects it"),
        (r"[\C]", r"invalid escape sequence: \C"),
    ],
)
def test_re2j_rejections(version: str, pattern: str, fragment: str) -> None:
    refused(pattern, "re2j", fragment, version)


def test_backslash_c_is_refused_only_where_it_is_the_escape() -> None:
    assert compile_pattern(r"a\\C", "re2j").matches("a\\C")  # an escaped backslash, then C
    assert compile_pattern(r"\Q\C\E", "re2j").matches("\\C")  # quoted


def test_named_groups_angle_form_needs_re2j_1_8() -> None:
    assert compile_pattern("(?<n>topic)-1", "re2j", re2j_version="1.8").matches("topic-1")
    refused("(?<n>topic)-1", "re2j", "RE2/J 1.7 (Kafka 4.0) knows named groups only as", "1.7")
    # '(?<' inside a class or a quote is three characters, fine in 1.7
    assert compile_pattern("[(?<]+", "re2j", re2j_version="1.7").matches("(?<")
    assert compile_pattern(r"\Q(?<\E", "re2j", re2j_version="1.7").matches("(?<")
    assert compile_pattern("[]a](?P<x>b)", "re2j", re2j_version="1.7").matches("]b")


def test_where_java_and_re2j_differ() -> None:
    # Look-around and possessive: Java (Python) accepts, RE2/J rejects (a KIP-848
    # member gets INVALID_REGULAR_EXPRESSION where a classic one subscribes).
    for pattern in ("topic(?!-1).*", "topic-\\d++"):
        assert compile_pattern(pattern, "java").matches("topic-2")
        with pytest.raises(TopicRegexError):
            compile_pattern(pattern, "re2j")
    # \p{L}: RE2/J accepts, the Java translation refuses (no faithful Python reading).
    assert compile_pattern(r"\p{L}+", "re2j").matches("topic")
    with pytest.raises(TopicRegexError):
        compile_pattern(r"\p{L}+", "java")


def test_re2j_version_follows_the_kafka_release() -> None:
    assert re2j_version_for("4.0") == "1.7"
    assert re2j_version_for("4.0.1") == "1.7"
    assert re2j_version_for("4.1") == "1.8"
    assert re2j_version_for("4.2.0") == "1.8"
    with pytest.raises(ValueError, match="no broker-side regex"):
        re2j_version_for("3.9")


def test_unknown_dialect_or_release() -> None:
    with pytest.raises(ValueError, match="unknown regex dialect"):
        compile_pattern("a", "python")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown RE2/J release"):
        compile_pattern("a", "re2j", re2j_version="1.6")  # type: ignore[arg-type]


def test_re2_parse_errors_are_not_logged(capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(TopicRegexError):
        compile_pattern("(?=unlogged)", "re2j")
    assert capfd.readouterr().err == ""


def test_a_matcher_is_cached_and_pickles_as_its_pattern() -> None:
    m = compile_pattern("events-.*", "re2j", re2j_version="1.7")
    assert compile_pattern("events-.*", "re2j", re2j_version="1.7") is m
    back = pickle.loads(pickle.dumps(m))
    assert isinstance(back, TopicMatcher)
    assert (back.pattern, back.dialect, back.re2j_version) == ("events-.*", "re2j", "1.7")
    assert back.matches("events-9") and not back.matches("event")
    java = pickle.loads(pickle.dumps(compile_pattern("a+", "java")))
    assert java.dialect == "java" and java.re2j_version is None and java.matches("aaa")


# --------------------------------------------------------------------------- 0.8 TopicFilter


@pytest.mark.parametrize(
    ("raw", "regex"),
    [
        ("a,b", "a|b"),
        (" a , b ", "a|b"),  # trim, then every space goes
        ("\"'events.*'\"", "events.*"),  # leading and trailing quote runs (property files)
        ("'a','b'", "a'|'b"),  # only the outer runs: inner quotes stay
        ("\t x.* \n", "x.*"),  # String.trim: every character <= U+0020
        ("\u00a0x", "\u00a0x"),  # ... and not a no-break space
    ],
)
def test_topic_filter_rewrites_as_0_8_2_2(raw: str, regex: str) -> None:
    assert topic_filter_regex(raw) == regex
    assert TopicFilter(raw).regex == regex


def test_whitelist_and_blacklist() -> None:
    white = TopicFilter("a, b")
    assert white.allowed("a") and white.allowed("b")
    assert not white.allowed("ab") and not white.allowed("c")
    black = TopicFilter("foo.*", "blacklist")
    assert black.allowed("bar") and not black.allowed("foo1")


def test_internal_topics_are_excluded_unless_asked() -> None:
    assert set(INTERNAL_TOPICS) == {"__consumer_offsets"}
    assert not TopicFilter(".*").allowed("__consumer_offsets")
    assert TopicFilter(".*").allowed("__consumer_offsets", exclude_internal=False)
    # a blacklist that does not name it still keeps it out
    assert not TopicFilter("foo", "blacklist").allowed("__consumer_offsets")
    assert TopicFilter("foo", "blacklist").allowed("__consumer_offsets", exclude_internal=False)


def test_topic_filter_errors() -> None:
    with pytest.raises(TopicRegexError, match="Java rejects it"):
        TopicFilter("a{,2}")
    with pytest.raises(ValueError, match="unknown topic filter"):
        TopicFilter("a", "greylist")  # type: ignore[arg-type]


def test_zk_layout_delegates_to_the_filter() -> None:
    assert layout.topic_allowed("white_list", "foo.*", "foobar")
    assert not layout.topic_allowed("white_list", "foo.*", "barfoo")
    assert layout.topic_allowed("white_list", "a, b", "b")
    assert not layout.topic_allowed("white_list", ".*", "__consumer_offsets")
    assert layout.topic_allowed("white_list", ".*", "__consumer_offsets", exclude_internal=False)
    assert layout.topic_allowed("black_list", "foo.*", "bar")
    assert not layout.topic_allowed("black_list", "foo.*", "foo1")
    assert layout.topic_allowed("white_list", r"\Qa.b\E", "a.b")  # Java's quoting now reads
    with pytest.raises(ValueError, match="not a wildcard pattern"):
        layout.topic_allowed("static", "a", "a")


def test_select_topics() -> None:
    names = ("events-1", "__consumer_offsets", "audit", "events-2")
    assert select_topics(names, "events-.*") == ("events-1", "events-2")
    assert select_topics(names, "events-.*", "blacklist") == ("audit",)
    assert select_topics(names, ".*") == ("events-1", "audit", "events-2")
    # the KIP-848 coordinator resolves over every topic, internal ones included
    assert select_topics(names, "__.*", dialect="re2j", exclude_internal=False) == (
        "__consumer_offsets",
    )
    assert select_topics(names, "a, b") == ()  # as written: no 0.8 rewrite
    with pytest.raises(ValueError, match="unknown topic filter"):
        select_topics(names, "a", "greylist")  # type: ignore[arg-type]
