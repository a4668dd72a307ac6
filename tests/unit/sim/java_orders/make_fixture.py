"""Regenerate ``orders.json``: Java 17's ``HashSet<String>`` orders for the tree's tests.

Builds seeded command scripts, runs them through ``HashSetOrders.java`` on a real JVM
and stores the scripts with Java's answers, so ``test_zk_tree.py`` can replay them on
``JavaHashSet`` without Java. Not run by the test suite. Run from the repository root::

    chrt -i 0 nice -n 19 python tests/unit/sim/java_orders/make_fixture.py [JAVA]

``JAVA`` defaults to the Java 17 the embedded ZooKeeper uses
(``/usr/lib/jvm/java-17-openjdk-amd64/bin/java``).
"""

from __future__ import annotations

import json
import random
import string
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
JAVA17 = "/usr/lib/jvm/java-17-openjdk-amd64/bin/java"

Command = list[str]


def _growth() -> list[Command]:
    """Broker ids then partition numbers into ``HashSet(8)``, through five resizes."""
    cmds: list[Command] = [["new", "8"]]
    checkpoints = {6, 7, 12, 13, 24, 25, 48, 49, 96, 97, 150}
    for i in range(150):
        cmds.append(["add", str(i)])
        if i + 1 in checkpoints:
            cmds += [["order"], ["cap"]]
    return cmds


def _consumer_ids(rng: random.Random) -> list[Command]:
    """Kafka 0.8 consumer ids, some leaving and coming back."""
    ids = [
        f"group-{rng.randrange(3)}_host-{rng.randrange(50)}-{1700000000000 + rng.randrange(10**6)}"
        f"-{rng.getrandbits(32):08x}"
        for _ in range(40)
    ]
    cmds: list[Command] = [["new", "8"]] + [["add", c] for c in ids] + [["order"], ["cap"]]
    gone = rng.sample(ids, 15)
    cmds += [["remove", c] for c in gone] + [["order"]]
    cmds += [["add", c] for c in gone[:10]] + [["order"], ["cap"]]
    return cmds


def _same_hash(count: int) -> list[str]:
    """Strings of "Aa"/"BB" blocks: all have the same ``String.hashCode``."""
    out = []
    for bits in range(1 << 4):
        out.append("".join("BB" if bits >> k & 1 else "Aa" for k in range(4)))
    return out[:count]


def _collisions() -> list[Command]:
    """Three ordinary names, then one chain growing past 8 in a small table."""
    cmds: list[Command] = [["new", "8"], ["add", "ids"], ["add", "owners"], ["add", "offsets"]]
    for name in _same_hash(11):
        cmds += [["add", name], ["order"], ["cap"]]
    return cmds


def _treeified() -> list[Command]:
    """A chain of 12 equal hashes: the last insert treeifies a bucket of a 64-table."""
    cmds: list[Command] = [["new", "8"]] + [["add", n] for n in _same_hash(12)]
    return [*cmds, ["order"], ["cap"]]


def _unicode() -> list[Command]:
    names = ["é", "日本語", "\U0001f600x", "ÿ", "topic-ü", "Ω", "a\u00e9b", "z"]
    return [["new", "8"]] + [["add", n] for n in names] + [["order"], ["cap"]]


def _clones(rng: random.Random) -> list[Command]:
    """Session ephemeral sets (default capacity) of several sizes, shrunk, then cloned."""
    cmds: list[Command] = []
    for size, extra in [(1, 0), (2, 3), (3, 0), (3, 20), (6, 7), (7, 14), (12, 1), (13, 40)]:
        paths = [
            f"/consumers/g{rng.randrange(4)}/owners/t{rng.randrange(9)}/{i}" for i in range(size)
        ]
        paths += [f"/brokers/ids/{rng.randrange(10**6)}" for _ in range(extra)]
        rng.shuffle(paths)
        cmds.append(["new"])
        cmds += [["add", p] for p in paths]
        keep = set(rng.sample(paths, size))
        cmds += [["remove", p] for p in paths if p not in keep]
        cmds += [["order"], ["cap"], ["clone"], ["order"], ["cap"]]
    return cmds


def _random_ops(rng: random.Random) -> list[Command]:
    alphabet = string.ascii_letters + string.digits + "-_."
    pool = sorted({"".join(rng.choices(alphabet, k=rng.randint(1, 12))) for _ in range(120)})
    cmds: list[Command] = [["new", "8"]]
    for i in range(1, 1501):
        cmds.append(["add" if rng.random() < 0.6 else "remove", rng.choice(pool)])
        if i % 100 == 0:
            cmds += [["order"], ["cap"]]
    return cmds


def cases() -> dict[str, list[Command]]:
    """The scripts, by name."""
    rng = random.Random(18)
    return {
        "growth": _growth(),
        "consumer_ids": _consumer_ids(rng),
        "collisions": _collisions(),
        "treeified": _treeified(),
        "unicode": _unicode(),
        "clones": _clones(rng),
        "random_ops": _random_ops(rng),
    }


def main() -> None:
    java = sys.argv[1] if len(sys.argv) > 1 else JAVA17
    scripts = cases()
    stdin = "".join("\t".join(cmd) + "\n" for script in scripts.values() for cmd in script)
    proc = subprocess.run(
        [java, "--add-opens", "java.base/java.util=ALL-UNNAMED", str(HERE / "HashSetOrders.java")],
        input=stdin.encode(),
        capture_output=True,
        check=True,
        timeout=600,
    )
    lines = proc.stdout.decode("utf-8").rstrip("\n").split("\n")
    version = lines[0].split("\t")[1]
    answers = iter(lines[1:])
    cases_out: dict[str, dict[str, object]] = {}
    for name, script in scripts.items():
        expected: list[object] = []
        for cmd in script:
            if cmd[0] in ("order", "cap"):
                kind, _, rest = next(answers).partition("\t")
                assert kind == cmd[0], (kind, cmd)
                if kind == "cap":
                    expected.append(int(rest))
                else:
                    expected.append(rest.split("\t") if rest else [])
        cases_out[name] = {"commands": script, "expected": expected}
    assert next(answers, None) is None
    # One line per case keeps the file small and its diffs per case.
    body = ",\n".join(
        f"  {json.dumps(name)}: {json.dumps(case, ensure_ascii=False)}"
        for name, case in cases_out.items()
    )
    text = f'{{"java": {json.dumps(version)},\n "cases": {{\n{body}\n}}}}\n'
    (HERE / "orders.json").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
