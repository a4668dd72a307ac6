"""The package rules of architecture.md, checked on the source.

* Heavy dependencies stay in their package: ray in ``actors``, kazoo in
  ``zk_registry``, pyspark in ``analysis``.
* Package edges: the core (``emulator``) imports no other package of the
  project; ``zk_registry`` and ``analysis`` import only the core; ``actors``
  imports the core and ``zk_registry``. The CLI (``emulator/cli.py``) is the
  composition root: the one module of the core that may load ``actors``,
  ``analysis`` and ``zk_registry``, and only lazily, inside a function.
* The core reads no clock, sleeps nowhere and draws from no global random
  generator, outside the clock adapter and the event writer.
* The simulated ZooKeeper (``zk_registry/sim``, issue-18 design §2) is a pure
  model: it imports the standard library (no sockets, no threads), the core,
  itself, ``zk_registry.proxy`` (``ProxyMode``) and kazoo's exception and
  state types only (``KazooTimeoutError`` included; never ``KazooClient``), and
  reads no clock and no global random either.

Imports are read from ``import`` statements *and* from ``importlib.import_module``
/ ``__import__`` calls with a literal name, wherever they stand.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("emulator", "zk_registry", "actors", "analysis")
OWNERS = {"ray": "actors", "kazoo": "zk_registry", "pyspark": "analysis"}
ALLOWED = {
    "emulator": frozenset[str](),
    "zk_registry": frozenset({"emulator"}),
    "actors": frozenset({"emulator", "zk_registry"}),
    "analysis": frozenset({"emulator"}),
}
"""Package -> the project packages it may import (architecture.md)."""
COMPOSITION_ROOT = "emulator/cli.py"

CLOCK_EXEMPT = {
    "emulator/clock.py": "the clock adapter: the core's one door to the machine's clock",
    "emulator/eventlog.py": "the event writer stamps ts_wall/ts_mono and flushes on an interval",
    "emulator/reaper.py": (
        "not the core's logic: the CLI's process watchdog, a separate standard-library-only "
        "process (python -I) that waits on a pipe and signals what outlived the CLI"
    ),
}
BANNED_CALLS = {
    ("time", "time"),
    ("time", "time_ns"),
    ("time", "monotonic"),
    ("time", "monotonic_ns"),
    ("time", "perf_counter"),
    ("time", "perf_counter_ns"),
    ("time", "sleep"),
    ("asyncio", "sleep"),
    ("datetime", "now"),
    ("datetime", "utcnow"),
}
RANDOM_ALLOWED = {"Random"}
"""The only names of :mod:`random` the core may use: seeded instances, never the global one."""

SIM_ZK = "zk_registry/sim"
SIM_ZK_KAZOO = frozenset({"kazoo.exceptions", "kazoo.protocol.states", "kazoo.handlers.threading"})
"""The kazoo modules the simulated ZooKeeper may import: error classes (``KazooTimeoutError``
lives in ``kazoo.handlers.threading``) and state/stat types -- never ``kazoo.client``."""
SIM_ZK_PROJECT = ("emulator", "zk_registry.sim", "zk_registry.proxy", "zk_registry.timeouts")
"""The project modules it may import: the core, its own package, ``zk_registry.proxy``
for ``ProxyMode`` (that module imports only asyncio, contextlib and enum) and
``zk_registry.timeouts`` (pure arithmetic)."""
SIM_ZK_BANNED_STDLIB = frozenset(
    (
        "socket",
        "ssl",
        "selectors",
        "subprocess",
        "threading",
        "_thread",
        "concurrent",
        "multiprocessing",
    )
)
"""Standard-library modules that would give the model real I/O or threads."""


@dataclass(frozen=True)
class Import:
    """One import seen in a file."""

    module: str  # the dotted name
    line: int
    module_level: bool  # runs when the file is imported
    how: str  # "import" or "importlib"

    @property
    def top(self) -> str:
        return self.module.split(".")[0]


def _module_of(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


class _ImportFinder(ast.NodeVisitor):
    """Imports and importlib loads, each with whether it runs at import time."""

    def __init__(self, module: str, is_package: bool = False) -> None:
        self.module = module
        self.is_package = is_package
        self.depth = 0  # functions entered
        self.found: list[Import] = []

    def _add(self, name: str, node: ast.AST, how: str) -> None:
        self.found.append(Import(name, getattr(node, "lineno", 0), self.depth == 0, how))

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._in_function(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._in_function(node)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._in_function(node)

    def _in_function(self, node: ast.AST) -> None:
        # Decorators and defaults run at definition time; the body does not.
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for d in node.decorator_list:
                self.visit(d)
            self.visit(node.args)
            body: list[ast.AST] = list(node.body)
        else:
            assert isinstance(node, ast.Lambda)
            self.visit(node.args)
            body = [node.body]
        self.depth += 1
        for stmt in body:
            self.visit(stmt)
        self.depth -= 1

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node, "import")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and node.module:
            self._add(node.module, node, "import")
        elif node.level > 0:
            base = self.module.split(".")
            pkg = base[: len(base) - node.level + (1 if self.is_package else 0)]
            self._add(".".join([*pkg, *([node.module] if node.module else [])]), node, "import")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
        if (
            name in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            self._add(node.args[0].value, node, "importlib")
        self.generic_visit(node)


def imports_of(path: Path) -> list[Import]:
    """Every import and literal importlib load in ``path``."""
    finder = _ImportFinder(_module_of(path), path.name == "__init__.py")
    finder.visit(ast.parse(path.read_text(), str(path)))
    return finder.found


def _files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@pytest.mark.parametrize("package", PACKAGES)
def test_heavy_dependencies_stay_in_their_package(package: str) -> None:
    bad = [
        f"{_rel(path)}:{imp.line} imports {imp.module} ({imp.how})"
        for path in _files(package)
        for imp in imports_of(path)
        if OWNERS.get(imp.top, package) != package
    ]
    assert bad == []


@pytest.mark.parametrize("package", PACKAGES)
def test_package_edges(package: str) -> None:
    bad = []
    for path in _files(package):
        root = _rel(path) == COMPOSITION_ROOT
        for imp in imports_of(path):
            if imp.top not in PACKAGES or imp.top == package or imp.top in ALLOWED[package]:
                continue
            if root and not imp.module_level and imp.top in ("actors", "analysis", "zk_registry"):
                continue  # the composition root, lazily inside a command
            where = "at import time" if imp.module_level else "inside a function"
            bad.append(f"{_rel(path)}:{imp.line} imports {imp.module} {where} ({imp.how})")
    assert bad == []


def test_building_the_cli_parser_loads_no_outer_package() -> None:
    code = (
        "import sys\n"
        "from emulator.cli import build_parser\n"
        "build_parser().format_help()\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} "
        "& {'actors', 'analysis', 'zk_registry', 'ray', 'kazoo', 'pyspark'}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


RAY_FREE_SHELLS = (
    "actors.broker",
    "actors.consumer_host",
    "actors.producer",
    "actors.legacy_member",
    "actors.metadata",
    "actors.context",
    "actors.system",
    "actors.engine",
    "actors.orchestrator",
    "actors.sim",
    "actors.sim.system",
    "actors.io",
)
"""The actor shells' modules and the sim engine's (``actors.sim``): what a one-process
engine imports, with no Ray and no Spark (``actors.remote`` holds the ``ray.remote``
wrappers, ``actors.spool_ray`` the spool's Ray tasks)."""


def test_the_actor_shells_load_no_ray_and_no_spark() -> None:
    # In a fresh interpreter: import the shells, write a local log through the
    # context and ask a leader cache for a broker it has no handle for (its
    # look-up by name); then, as a self-check that the probe sees Ray when it
    # is there, import the wrappers (which must load it).
    code = (
        "import asyncio, sys, tempfile\n"
        f"for m in {RAY_FREE_SHELLS!r}: __import__(m)\n"
        "from actors.context import RunContext\n"
        "from actors.metadata import LeaderCache\n"
        "def heavy(): return sorted({m.split('.')[0] for m in sys.modules} & {'ray', 'pyspark'})\n"
        "print(heavy())\n"
        "with tempfile.TemporaryDirectory() as d:\n"
        "    ctx = RunContext(run_id='r', protocol='zookeeper', events_dir=d, time_scale=1.0,\n"
        "                     origin_wall=0.0, zk_connect='', zk_hosts=(), seed=1, group='g')\n"
        "    ctx.writer('host-0').close()\n"
        "    async def look(): return LeaderCache(ctx, {}).handle(0)\n"
        "    assert asyncio.run(look()) is None\n"
        "print(heavy())\n"
        "import actors.remote\n"
        "print(heavy())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:3] == ["[]", "[]", "['ray']"]


def _clock_and_random_uses(path: Path, label: str | None = None) -> list[str]:
    """Reads of the machine clock, sleeps and global-random draws in ``path``."""
    label = label or _rel(path)
    tree = ast.parse(path.read_text(), str(path))
    modules: dict[str, str] = {}  # local name -> module (import time as t)
    names: dict[str, tuple[str, str]] = {}  # local name -> (module, attribute)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                modules[a.asname or a.name.split(".")[0]] = a.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for a in node.names:
                if node.module in ("time", "asyncio", "random", "datetime"):
                    names[a.asname or a.name] = (node.module, a.name)
    out: list[str] = []
    for node in ast.walk(tree):
        target: tuple[str, str] | None = None
        if isinstance(node, ast.Attribute):
            base = node.value
            if isinstance(base, ast.Name):
                if base.id in modules:
                    target = (modules[base.id], node.attr)
                elif base.id in names and names[base.id] == ("datetime", "datetime"):
                    target = ("datetime", node.attr)
            elif (
                isinstance(base, ast.Attribute)
                and isinstance(base.value, ast.Name)
                and modules.get(base.value.id) == "datetime"
            ):
                target = ("datetime", node.attr)
        elif isinstance(node, ast.Name) and node.id in names:
            target = names[node.id]
        if target is None:
            continue
        mod, attr = target
        assert isinstance(node, ast.Attribute | ast.Name)  # only these set a target
        if target in BANNED_CALLS or (mod == "random" and attr not in RANDOM_ALLOWED):
            out.append(f"{label}:{getattr(node, 'lineno', 0)} uses {mod}.{attr}")
    return sorted(set(out))


def test_the_core_reads_no_clock_and_no_global_random() -> None:
    bad = [
        use
        for path in _files("emulator")
        if _rel(path) not in CLOCK_EXEMPT
        for use in _clock_and_random_uses(path)
    ]
    assert bad == []


def _sim_zk_import_problems(imports: list[Import], label: str) -> list[str]:
    """The imports (of the file ``label``) that the simulated ZooKeeper may not make."""
    bad = []
    for imp in imports:
        if imp.top in PACKAGES:
            ok = any(imp.module == m or imp.module.startswith(m + ".") for m in SIM_ZK_PROJECT)
        elif imp.top == "kazoo":
            ok = imp.module in SIM_ZK_KAZOO
        else:
            ok = imp.top in sys.stdlib_module_names and imp.top not in SIM_ZK_BANNED_STDLIB
        if not ok:
            bad.append(f"{label}:{imp.line} imports {imp.module} ({imp.how})")
    return bad


def test_the_simulated_zookeeper_imports_only_the_core_and_kazoo_types() -> None:
    files = _files(SIM_ZK)
    assert files, f"{SIM_ZK} has no modules"
    bad = [p for path in files for p in _sim_zk_import_problems(imports_of(path), _rel(path))]
    assert bad == []


def test_the_simulated_zookeeper_reads_no_clock_and_no_global_random() -> None:
    assert [use for path in _files(SIM_ZK) for use in _clock_and_random_uses(path)] == []


def test_the_sim_core_is_checked_and_never_clock_exempt() -> None:
    """``emulator/sim`` runs on virtual time only (issue 18 design, §2).

    Its files are scanned by the rules above like the rest of the core, none of
    them may be exempted from the clock rule, and none imports :mod:`time` at all.
    """
    sim = [path for path in _files("emulator") if _rel(path).startswith("emulator/sim/")]
    assert ROOT / "emulator" / "sim" / "loop.py" in sim
    assert [p for p in CLOCK_EXEMPT if p.startswith("emulator/sim/")] == []
    bad = [
        f"{_rel(path)}:{imp.line} imports {imp.module}"
        for path in sim
        for imp in imports_of(path)
        if imp.top == "time"
    ]
    assert bad == []


def test_the_checkers_see_what_they_look_for(tmp_path: Path) -> None:
    """Guard against checkers that silently find nothing."""
    remote = {i.top for i in imports_of(ROOT / "actors" / "remote.py")}
    assert "ray" in remote
    cli = [i for i in imports_of(ROOT / COMPOSITION_ROOT) if i.top in ("actors", "zk_registry")]
    assert cli and all(not i.module_level for i in cli)
    assert any(i.how == "importlib" for i in cli)
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import time as t\nimport random\nfrom asyncio import sleep\n"
        "from datetime import datetime\n"
        "def f():\n    t.sleep(1); random.choice([1]); random.Random(3); sleep(0); datetime.now()\n"
        "    importlib.import_module('actors.orchestrator')\n"
    )
    uses = [u.split(" uses ")[1] for u in _clock_and_random_uses(sample, "sample")]
    assert uses == ["asyncio.sleep", "datetime.now", "random.choice", "time.sleep"]
    loads = [(i.module, i.module_level) for i in _imports_at(sample) if i.how == "importlib"]
    assert loads == [("actors.orchestrator", False)]
    assert "emulator/clock.py" in CLOCK_EXEMPT and (ROOT / "emulator" / "clock.py").is_file()
    sim = tmp_path / "sim_sample.py"
    sim.write_text(
        "import threading\nimport heapq\nfrom kazoo.client import KazooClient\n"
        "from kazoo.exceptions import NoNodeError\nfrom kazoo.protocol.states import ZnodeStat\n"
        "from emulator.javahash import java_string_hashcode\nfrom zk_registry import client\n"
        "import zk_registry.sim.tree\nimport numpy\n"
        "from kazoo.handlers.threading import KazooTimeoutError\n"
        "from zk_registry.proxy import ProxyMode\n"
    )
    flagged = [p.split(" imports ")[1] for p in _sim_zk_import_problems(_imports_at(sim), "sim")]
    assert flagged == [
        "threading (import)",
        "kazoo.client (import)",
        "zk_registry (import)",
        "numpy (import)",
    ]


def _imports_at(path: Path) -> list[Import]:
    finder = _ImportFinder("sample")
    finder.visit(ast.parse(path.read_text(), str(path)))
    return finder.found
