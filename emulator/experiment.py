"""An experiment: scenarios x protocols x seeds x a grid of settings, as trials.

``EXPERIMENT.toml`` (the bundled ones are in ``emulator/experiments/``)::

    name = "generations-sweep"
    scenarios = ["generations"]     # bundled names, or paths relative to this file
    protocols = ["all"]             # or a list of run protocols
    seeds = 3                       # N seeds from each scenario's own, or a list of seeds
    cpus_per_trial = 2              # Ray CPUs each running trial holds

    [grid]                          # scenario keys by their dotted path
    "group.consumers" = [5, 10]

    [grid.kafka]                    # [kafka] keys by their Kafka name
    "session.timeout.ms" = [10000, 45000]

Every combination of the grid's values is a *point*; each point runs every
scenario under every protocol with every seed, each a *trial* with its own run
directory. A trial's scenario is its scenario's TOML document with the
point's values and the seed written in, validated as a file would be, so a
value the scenario does not accept fails before anything runs.

Pure: no Ray, no I/O beyond reading the files (the runner is
:mod:`actors.experiment`).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
import json
import math
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from emulator.protocols import GROUP_PROTOCOLS, RUN_PROTOCOLS
from emulator.scenario import (
    Scenario,
    ScenarioError,
    bundled_scenarios,
    scenario_from_document,
)

MAX_TRIALS: Final = 10_000
"""The most trials one experiment may expand to."""

MAX_SEEDS: Final = 1_000
"""The most seeds per scenario, point and protocol."""

TOP_KEYS: Final = (
    "name",
    "description",
    "scenarios",
    "protocols",
    "seeds",
    "cpus_per_trial",
    "grid",
)

# Scenario keys a grid may vary: top-level values and keys of these tables.
_SCENARIO_TOP: Final = ("duration_s", "time_scale", "kafka_version")
_SCENARIO_TABLES: Final = ("cluster", "producer", "group")

_SLUG_RE: Final = re.compile(r"[^A-Za-z0-9._=+-]+")


ENGINES: Final = ("real", "sim")
"""The engines a trial can run on (``rebalance-emu experiment --engine``)."""


class ExperimentError(ValueError):
    """An experiment file that cannot be used (one line naming the problem)."""


@dataclass(frozen=True)
class Trial:
    """One run of one scenario, protocol, seed and grid point.

    Attributes:
        id: unique within the experiment; its run directory's name.
        scenario: the scenario's name.
        protocol: the run protocol.
        seed: the scenario seed.
        point: the grid point, ``((key, value), ...)`` in the grid's order.
        document: the scenario document with the point and the seed written in.
        source: where the scenario came from (for messages and the manifest).
    """

    id: str
    scenario: str
    protocol: str
    seed: int
    point: tuple[tuple[str, Any], ...]
    document: Mapping[str, Any]
    source: str
    engine: str = "real"

    @property
    def point_label(self) -> str:
        """``session.timeout.ms=10000, group.consumers=5`` (``defaults`` for no grid)."""
        return point_label(self.point)

    def fingerprint(self) -> str:
        """A hash of everything that decides what the trial runs."""
        what: dict[str, Any] = {"document": self.document, "protocol": self.protocol}
        if self.engine != "real":  # a real trial's fingerprint is what it always was
            what["engine"] = self.engine
        blob = json.dumps(what, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def scenario_object(self) -> Scenario:
        """The validated scenario this trial runs."""
        return scenario_from_document(self.document, self.source)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able (without the document)."""
        return {
            "id": self.id,
            "scenario": self.scenario,
            "protocol": self.protocol,
            "seed": self.seed,
            "point": [[k, v] for k, v in self.point],
            "point_label": self.point_label,
            "engine": self.engine,
            "fingerprint": self.fingerprint(),
        }


@dataclass(frozen=True)
class Experiment:
    """A validated experiment: its trials and how to run them."""

    name: str
    description: str
    source: str
    scenarios: tuple[str, ...]
    protocols: tuple[str, ...]
    seeds: Mapping[str, tuple[int, ...]]
    grid: tuple[tuple[str, tuple[Any, ...]], ...]
    cpus_per_trial: float
    trials: tuple[Trial, ...]
    engine: str = "real"

    @property
    def points(self) -> int:
        """Grid points (1 without a grid)."""
        return math.prod(len(values) for _k, values in self.grid)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: the plan, for ``experiment.json``."""
        return {
            "name": self.name,
            "description": self.description,
            "source": self.source,
            "scenarios": list(self.scenarios),
            "protocols": list(self.protocols),
            "seeds": {k: list(v) for k, v in self.seeds.items()},
            "grid": [[k, list(v)] for k, v in self.grid],
            "cpus_per_trial": self.cpus_per_trial,
            "engine": self.engine,
            "trials": [t.to_dict() for t in self.trials],
        }

    def on_engine(self, engine: str) -> Experiment:
        """The same experiment on ``engine`` (``real`` or ``sim``).

        A sim trial is one process on one core: it asks for one CPU whatever the
        file's ``cpus_per_trial`` (which sizes the real engine's trials).
        """
        if engine not in ENGINES:
            raise ExperimentError(f"unknown engine {engine!r} (choose from {', '.join(ENGINES)})")
        if engine == self.engine:
            return self
        cpus = 1.0 if engine == "sim" else self.cpus_per_trial
        trials = tuple(dataclasses.replace(t, engine=engine) for t in self.trials)
        return dataclasses.replace(self, engine=engine, cpus_per_trial=cpus, trials=trials)


def point_label(point: Sequence[tuple[str, Any]]) -> str:
    """A grid point as ``key=value, key=value`` (``defaults`` when the grid is empty)."""
    return ", ".join(f"{k}={v}" for k, v in point) or "defaults"


def _flatten(table: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """TOML tables back to dotted keys: ``session.timeout.ms = [..]`` parses as nested tables."""
    out: list[tuple[str, Any]] = []
    for k, v in table.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.extend(_flatten(v, key + "."))
        else:
            out.append((key, v))
    return out


def _apply(doc: dict[str, Any], key: str, value: Any) -> None:
    """Write one grid value into a scenario document (``kafka.<name>`` or a scenario path)."""
    if key.startswith("kafka."):
        doc.setdefault("kafka", {})[key.removeprefix("kafka.")] = value
        return
    if key in _SCENARIO_TOP:
        doc[key] = value
        return
    table, _, name = key.partition(".")
    if table not in _SCENARIO_TABLES or not name or "." in name:
        raise ExperimentError(
            f"[grid] {key!r}: not a scenario key the grid can vary (a top-level "
            f"{', '.join(_SCENARIO_TOP)}, or <table>.<key> of {', '.join(_SCENARIO_TABLES)}; "
            f"Kafka configs go in [grid.kafka])"
        )
    section = doc.setdefault(table, {})
    if not isinstance(section, dict):
        raise ExperimentError(f"[grid] {key!r}: the scenario's [{table}] is not a table")
    section[name] = value


def _slug(text: str) -> str:
    return _SLUG_RE.sub("_", text).strip("_") or "x"


def _scenario_docs(
    names: Sequence[str], base: Path, source: str
) -> list[tuple[str, str, dict[str, Any]]]:
    bundled = bundled_scenarios()
    out: list[tuple[str, str, dict[str, Any]]] = []
    for entry in names:
        path = bundled.get(entry)
        if path is None:
            candidate = Path(entry) if Path(entry).is_absolute() else base / entry
            if not candidate.is_file():
                raise ExperimentError(
                    f"{source}: scenarios: {entry!r} is neither a bundled scenario "
                    f"({', '.join(bundled)}) nor a file"
                )
            path = candidate
        try:
            doc = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ExperimentError(f"{source}: scenario {entry!r}: {exc}") from None
        try:
            sc = scenario_from_document(doc, path.name)
        except ScenarioError as exc:
            raise ExperimentError(f"{source}: {exc}") from None
        if any(sc.name == n for n, _, _ in out):
            raise ExperimentError(f"{source}: scenarios: {sc.name!r} is listed twice")
        out.append((sc.name, path.name, doc))
    return out


def _protocols(value: Any, source: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(p, str) for p in items):
        raise ExperimentError(f'{source}: protocols must be a list of protocol names or "all"')
    chosen: list[str] = []
    for item in items:
        for p in item.split(","):
            p = p.strip()
            names = GROUP_PROTOCOLS if p == "all" else (p,)
            for n in names:
                if n not in RUN_PROTOCOLS:
                    raise ExperimentError(
                        f"{source}: unknown protocol {n!r} "
                        f"(choose from {', '.join(RUN_PROTOCOLS)} or all)"
                    )
                if n not in chosen:
                    chosen.append(n)
    return tuple(chosen)


def _seeds(value: Any, base_seed: int, source: str) -> tuple[int, ...]:
    if isinstance(value, bool):
        raise ExperimentError(f"{source}: seeds must be a count or a list of seeds, got {value!r}")
    if isinstance(value, int):
        if not 1 <= value <= MAX_SEEDS:
            raise ExperimentError(f"{source}: seeds must be between 1 and {MAX_SEEDS}, got {value}")
        return tuple(base_seed + i for i in range(value))
    if (
        isinstance(value, list)
        and value
        and len(value) <= MAX_SEEDS
        and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in value)
    ):
        if len(set(value)) != len(value):
            raise ExperimentError(f"{source}: seeds lists a seed twice")
        return tuple(value)
    raise ExperimentError(
        f"{source}: seeds must be a count (1..{MAX_SEEDS}) or a list of distinct seeds >= 0"
    )


def load_experiment(
    path: str | Path,
    *,
    seeds: int | None = None,
    protocols: Sequence[str] | None = None,
) -> Experiment:
    """Read, expand and validate an experiment file.

    Args:
        path: the ``EXPERIMENT.toml``.
        seeds: overrides the file's ``seeds`` (a count).
        protocols: override the file's ``protocols``.

    Returns:
        The experiment with every trial's scenario validated.

    Raises:
        ExperimentError: the file, a scenario or a trial's settings are invalid.
    """
    file = Path(path)
    source = file.name
    try:
        doc = tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ExperimentError(f"cannot read {str(file)!r}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ExperimentError(f"{source}: invalid TOML: {exc}") from None
    for key in doc:
        if key not in TOP_KEYS:
            raise ExperimentError(
                f"{source}: unknown key {key!r} (an experiment has {', '.join(TOP_KEYS)})"
            )
    name = doc.get("name", file.stem)
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9._-]{1,100}", name):
        raise ExperimentError(f"{source}: name must be letters, digits, '.', '_' or '-'")
    description = doc.get("description", "")
    if not isinstance(description, str):
        raise ExperimentError(f"{source}: description must be a string")
    names = doc.get("scenarios")
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise ExperimentError(f"{source}: scenarios must be a non-empty list of scenario names")
    docs = _scenario_docs(names, file.parent, source)
    protos = _protocols(list(protocols) if protocols else doc.get("protocols", ["all"]), source)
    cpus = doc.get("cpus_per_trial", 2)
    if isinstance(cpus, bool) or not isinstance(cpus, int | float) or not 0 < cpus <= 1024:
        raise ExperimentError(f"{source}: cpus_per_trial must be a number in (0, 1024]")
    grid_doc = doc.get("grid", {})
    if not isinstance(grid_doc, dict):
        raise ExperimentError(f"{source}: [grid] must be a table")
    kafka_doc = grid_doc.get("kafka", {})
    if not isinstance(kafka_doc, dict):
        raise ExperimentError(f"{source}: [grid.kafka] must be a table")
    grid: list[tuple[str, tuple[Any, ...]]] = [
        (k, v) for k, v in _flatten({k: v for k, v in grid_doc.items() if k != "kafka"})
    ]
    grid += [(f"kafka.{k}", v) for k, v in _flatten(kafka_doc)]
    for key, values in grid:
        if not isinstance(values, list) or not values:
            raise ExperimentError(f"{source}: [grid] {key!r} must be a non-empty list of values")
        if len({json.dumps(v, sort_keys=True) for v in values}) != len(values):
            raise ExperimentError(f"{source}: [grid] {key!r} lists a value twice")
    grid_t = tuple((k, tuple(v)) for k, v in grid)
    seed_value = seeds if seeds is not None else doc.get("seeds", 1)
    seeds_by: dict[str, tuple[int, ...]] = {}
    for sname, _, sdoc in docs:
        base = sdoc.get("seed", 0)
        seeds_by[sname] = _seeds(seed_value, base if isinstance(base, int) else 0, source)
    points = list(itertools.product(*[[(k, v) for v in vals] for k, vals in grid_t]))
    n = len(docs) * len(points) * len(protos) * max(len(s) for s in seeds_by.values())
    if n > MAX_TRIALS:
        raise ExperimentError(f"{source}: {n} trials; at most {MAX_TRIALS}")
    trials: list[Trial] = []
    for sname, spath, sdoc in docs:
        for point in points:
            base_doc = copy.deepcopy(sdoc)
            for k, v in point:
                _apply(base_doc, k, v)
            try:
                scenario_from_document(base_doc, spath)
            except ScenarioError as exc:
                raise ExperimentError(f"{source}: at {point_label(point)}: {exc}") from None
            label = _slug(point_label(point).replace(", ", "+"))
            for seed in seeds_by[sname]:
                tdoc = copy.deepcopy(base_doc)
                tdoc["seed"] = seed
                for proto in protos:
                    tid = f"{_slug(sname)}.{label}.{proto}.s{seed}"
                    trials.append(Trial(tid, sname, proto, seed, tuple(point), tdoc, spath))
    ids = [t.id for t in trials]
    if len(set(ids)) != len(ids):
        raise ExperimentError(f"{source}: two grid points give the same trial name")
    return Experiment(
        name=name,
        description=description,
        source=str(file),
        scenarios=tuple(n for n, _, _ in docs),
        protocols=protos,
        seeds=seeds_by,
        grid=grid_t,
        cpus_per_trial=float(cpus),
        trials=tuple(trials),
    )


def bundled_experiments() -> dict[str, Path]:
    """The experiments shipped in ``emulator/experiments/``, by file stem."""
    root = Path(__file__).parent / "experiments"
    return {p.stem: p for p in sorted(root.glob("*.toml"))} if root.is_dir() else {}


# ----------------------------------------------------------------- progress


def eta_seconds(
    done_walls: Sequence[float], left: int, running: int, parallel: int
) -> float | None:
    """Seconds left: the mean trial's wall time x the trials not finished, over the parallelism.

    None before any trial finished.
    """
    if not done_walls:
        return None
    mean = sum(done_walls) / len(done_walls)
    waves = (left + running) / max(1, parallel)
    return mean * waves


def trial_state(trial_json: Mapping[str, Any] | None, manifest: Mapping[str, Any] | None) -> str:
    """What a trial directory holds: ``completed``, ``failed``, ``degraded`` or ``pending``.

    ``pending``: never run, or interrupted or cut short (its manifest still
    says ``running`` or ``interrupted``): a re-run runs it again. A trial the
    experiment recorded as ``interrupted`` (or still ``running``: the experiment
    itself was stopped before it collected the trial) is ``pending`` unless its
    run completed: a run that failed or lost a host while the experiment was
    cancelling it failed because of the cancel, and keeping it would leave it
    out of the statistics for good.
    """
    status = (manifest or {}).get("status") if manifest else None
    recorded = (trial_json or {}).get("status") if trial_json else None
    if recorded in ("interrupted", "running"):
        return "completed" if status == "completed" else "pending"
    if status in ("completed", "degraded", "failed"):
        return str(status)
    if recorded == "failed" and status is None:
        return "failed"  # it failed before writing a manifest
    return "pending"
