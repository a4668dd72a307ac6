"""The conformance runner's pure parts: script parsing, normalization, comparison,
and the scripts/expected pairing (no ZooKeeper; the suite itself is tests/conformance)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conformance.runner import (
    EXPECTED_DIR,
    SCRIPTS_DIR,
    ScriptError,
    Sid,
    Zxid,
    compare,
    expected_path,
    normalize,
    parse_script,
    script_paths,
)


def write(tmp_path: Path, body: str, stem: str = "01-demo") -> Path:
    path = tmp_path / f"{stem}.toml"
    path.write_text(body)
    return path


HEAD = 'name = "demo"\nrelies_on = "a test"\n'


def test_every_script_parses_and_has_its_recording() -> None:
    paths = script_paths()
    assert len(paths) >= 20
    stems = [p.stem for p in paths]
    assert len(set(s[:2] for s in stems)) == len(stems), "two scripts share a number"
    for path in paths:
        script = parse_script(path)
        expected = expected_path(script)
        assert expected.exists(), f"{path.name} has no recording"
        assert json.loads(expected.read_text())["script"] == path.stem
    recorded = {p.stem for p in EXPECTED_DIR.glob("*.json")}
    assert recorded == set(stems), "a recording without its script"
    assert SCRIPTS_DIR.is_dir()


def test_a_minimal_script_parses(tmp_path: Path) -> None:
    script = parse_script(
        write(
            tmp_path,
            HEAD
            + """steps = [
  { open = "A", link = true, timeout_ms = 1200 },
  { op = "get", s = "A", path = "/x", watch = "w", id = "g", nowait = true },
  { mark = "t0" },
  { wait = "op", id = "g", since = "t0", within_ms = 100 },
  { check = "order", seq = ["watch:w", "op:g#1", "state:A:LOST#2"] },
]
""",
        )
    )
    assert (script.name, script.ensemble, script.tick_ms, script.stem) == (
        "demo",
        1,
        200,
        "01-demo",
    )
    assert [s.kind for s in script.steps] == ["open", "op", "mark", "wait", "check"]
    assert script.steps[1].get("watch") == "w"


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ('[{ open = "A", colour = 1 }]', "step 1: unknown key(s) ['colour'] for a open step"),
        ('[{ open = "A" }, { op = "frob", s = "A", path = "/" }]', "step 2: unknown op 'frob'"),
        ('[{ op = "get", s = "A", path = "/" }]', "step 1: session 'A' is not open"),
        ('[{ open = "A" }, { wait = "state", s = "A", state = "LOST" }]', "needs within_ms"),
        ('[{ open = "A" }, { wait = "op", id = "x", within_ms = 1 }]', "no op with id 'x'"),
        ('[{ open = "A" }, { op = "set", s = "A", path = "/", watch = "w" }]', "takes no watch"),
        ('[{ open = "A" }, { op = "get", s = "A", path = "/", nowait = true }]', "needs an 'id'"),
        ('[{ open = "A" }, { open = "A" }]', "opened twice"),
        ('[{ open = "A" }, { check = "order", seq = ["watch:w", "bogus"] }]', "bad reference"),
        ('[{ open = "A" }, { wait = "watch", name = "w", since = "t", within_ms = 1 }]', "no mark"),
        ('[{ open = "A", link = true }, { link_mode = "sideways", s = "A" }]', "link_mode must"),
        ("[{ kill_member = 'someone' }]", "kill_member takes"),
        ('[{ open = "A", op = "get" }]', "exactly one of"),
        (
            '[{ open = "A" }, { utils = "delete_recursive", s = "A", path = "/t", hold_at = 2 }]',
            "hold_at needs an 'id'",
        ),
        (
            '[{ open = "A" }, { utils = "read", s = "A", path = "/t", hold_at = 0, id = "h" }]',
            "hold_at must be a positive integer",
        ),
        ('[{ open = "A" }, { release = "h" }]', "no held idiom with id 'h'"),
        (
            '[{ open = "A" }, { utils = "read", s = "A", path = "/t", hold_at = 1, id = "h" }]',
            "held idiom(s) ['h'] never released",
        ),
    ],
)
def test_a_malformed_step_is_one_line_naming_file_and_step(
    tmp_path: Path, steps: str, message: str
) -> None:
    with pytest.raises(ScriptError) as info:
        parse_script(write(tmp_path, HEAD + f"steps = {steps}\n"))
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith("01-demo.toml: ")
    assert message in text


def test_a_held_idiom_parses_with_its_release(tmp_path: Path) -> None:
    script = parse_script(
        write(
            tmp_path,
            HEAD
            + """steps = [
  { open = "A" },
  { utils = "delete_recursive", s = "A", path = "/t", requests = true, hold_at = 3, id = "d" },
  { release = "d" },
  { wait = "op", id = "d", within_ms = 100 },
]
""",
        )
    )
    assert [s.kind for s in script.steps] == ["open", "utils", "release", "wait"]
    assert script.steps[1].get("hold_at") == 3


def test_top_level_errors(tmp_path: Path) -> None:
    with pytest.raises(ScriptError, match="must be 'demo'"):
        parse_script(write(tmp_path, 'name = "other"\nrelies_on = "x"\nsteps = [{ open = "A" }]'))
    with pytest.raises(ScriptError, match="relies_on"):
        parse_script(write(tmp_path, 'name = "demo"\nsteps = [{ open = "A" }]'))
    with pytest.raises(ScriptError, match="ensemble"):
        parse_script(write(tmp_path, HEAD + 'ensemble = 2\nsteps = [{ open = "A" }]'))
    with pytest.raises(ScriptError, match="unknown key"):
        parse_script(write(tmp_path, HEAD + 'seed = 1\nsteps = [{ open = "A" }]'))


def test_normalize_names_sessions_in_order_of_appearance_and_ranks_zxids() -> None:
    raw = {
        "steps": [
            {"open": "A", "session": Sid(0x200)},
            {"stat": {"czxid": Zxid(0x1_0000_0009), "ephemeralOwner": Sid(0x100)}},
            {"stat": {"czxid": Zxid(0x5), "mzxid": Zxid(0x1_0000_0009), "ephemeralOwner": 0}},
        ],
        "states": {"A": [{"state": "CONNECTED", "session": Sid(0x200)}], "B": [Sid(0x300)]},
    }
    out = normalize(raw, "/conformance/demo")
    assert out["steps"][0] == {"open": "A", "session": "S1"}
    assert out["steps"][1]["stat"] == {"czxid": 2, "ephemeralOwner": "S2"}
    assert out["steps"][2]["stat"] == {"czxid": 1, "mzxid": 2, "ephemeralOwner": 0}
    assert out["states"] == {"A": [{"state": "CONNECTED", "session": "S1"}], "B": ["S3"]}
    json.dumps(out)  # plain JSON values only


def test_normalize_replaces_only_the_chroot_prefix() -> None:
    raw = {
        "a": "/conformance/demo",
        "b": "/conformance/demo/x",
        "c": "/conformance/demo-2/x",
        "d": ["/x", "/conformance"],
    }
    assert normalize(raw, "/conformance/demo") == {
        "a": "{chroot}",
        "b": "{chroot}/x",
        "c": "/conformance/demo-2/x",
        "d": ["/x", "/conformance"],
    }


def test_compare_is_empty_when_equal_and_a_diff_otherwise() -> None:
    a = {"script": "x", "steps": [{"op": "get", "result": 1}]}
    assert compare(a, json.loads(json.dumps(a))) == []
    diff = compare(a, {"script": "x", "steps": [{"op": "get", "result": 2}]})
    assert '-   "result": 1' in diff
    assert '+   "result": 2' in diff
