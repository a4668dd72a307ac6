"""Run an experiment's trials, each a whole run in its own directory.

A trial is one run of :func:`actors.orchestrator.run_scenario` for one
scenario, protocol, seed and grid point (:func:`run_trial`), in its run
directory ``<experiment>/trials/<trial id>``. Two ways to run them, with the
same bookkeeping (``trial.json`` states, progress lines, resuming,
interrupts):

* **Ray tasks** (the real engine always; the sim engine unless
  ``parallel == 1``): each trial a Ray task holding ``cpus_per_trial`` Ray
  CPUs, so as many run at once as the cluster's CPUs hold (``--parallel``
  caps it). A real trial has its own embedded ZooKeeper, brokers, producer and
  consumer hosts (placed as the scenario's ``[placement]`` says). With a local
  experiment directory on a cluster of several nodes, trials run on the
  driver's node so that their directories land under it (a URL ``--out`` lets
  them run anywhere).
* **In this process** (``engine == "sim"`` and ``parallel == 1``): a sim
  trial is one in-process run on a virtual clock, so the trials run one after
  another here, and Ray is never imported.

Resuming: ``experiment.json`` and each trial's ``trial.json`` and manifest say
what is done. A re-run skips completed trials, keeps failed and degraded ones
as recorded (``retry_failed`` runs them again) and runs the rest (never run,
interrupted, cut short) afresh. A trial whose settings changed since it ran
(its fingerprint) stops the experiment: a new ``--out`` is needed.

An interrupt (Ctrl-C, SIGTERM) cancels the running trials (a Ray task's
worker is killed, Ray kills the actors it owned and their ZooKeeper's watchdog
ends it; an in-process sim trial unwinds with the interrupt and marks its
manifest) and records them as interrupted.
"""

from __future__ import annotations

import contextlib
import json
import resource
import shutil
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from actors.run_files import RunError, write_manifest
from emulator.experiment import Experiment, Trial, eta_seconds, trial_state

Say = Callable[[str], None]

EXPERIMENT_FILE = "experiment.json"
TRIAL_FILE = "trial.json"
TRIALS_DIR = "trials"


class ExperimentRunError(RuntimeError):
    """The experiment cannot run (one-line message)."""


@dataclass
class ExperimentOutcome:
    """What a (possibly resumed) experiment run ended with.

    Attributes:
        out_dir: the experiment directory.
        states: trial id -> ``completed``, ``failed``, ``degraded``, ``interrupted``
            or ``pending``.
        ran: trials run by this invocation.
        skipped: trials found done and not run again.
        wall_s: this invocation's wall time.
        in_process: the trials ran in this process (sim, ``parallel == 1``), not as Ray tasks.
    """

    out_dir: Path
    states: dict[str, str] = field(default_factory=dict)
    ran: int = 0
    skipped: int = 0
    wall_s: float = 0.0
    in_process: bool = False

    def count(self, state: str) -> int:
        """Trials in ``state``."""
        return sum(1 for s in self.states.values() if s == state)


def run_trial(
    document: dict[str, Any],
    source: str,
    protocol: str,
    out_dir: str,
    command: list[str] | None = None,
    engine: str = "real",
) -> dict[str, Any]:
    """One trial: a whole run of one protocol on ``engine``, into ``out_dir``.

    The body of both ways of running a trial: the Ray task
    (:data:`actors.remote.TrialTask`, inside a Ray worker) and the in-process
    path (sim trials with ``parallel == 1``).

    Returns:
        ``{"status", "notes", "wall_s", "cpu_s"}``, or ``{"status": "failed",
        "error", "wall_s"}`` when the run could not be set up. ``cpu_s``: this
        process's CPU seconds during the run: a sim trial's whole cost, a real
        trial's driver only (its actors are processes of their own, each in the
        manifest). The manifest's per-actor ``cpu_s`` of a sim run is the
        process's total since it started, which spans earlier trials when the
        process ran them too.
    """
    from actors.orchestrator import run_scenario
    from emulator.scenario import scenario_from_document

    t0 = time.monotonic()
    c0 = _process_cpu_s()
    scenario = scenario_from_document(document, source)
    sim: Any = None
    if engine == "sim":
        from actors.sim.run import SimEngine

        sim = SimEngine()
    try:
        results = run_scenario(scenario, [protocol], Path(out_dir), command=command, engine=sim)
    except RunError as exc:
        return {"status": "failed", "error": str(exc), "wall_s": time.monotonic() - t0}
    r = results[0]
    return {
        "status": r.status,
        "notes": list(r.notes),
        "wall_s": time.monotonic() - t0,
        "cpu_s": round(_process_cpu_s() - c0, 3),
    }


def _process_cpu_s() -> float:
    """This process's user + system CPU seconds so far."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _task_failed(exc: BaseException) -> dict[str, Any]:
    """A trial whose run raised (a Ray worker lost, an exception): failed, with the error."""
    return {"status": "failed", "error": f"{type(exc).__name__}: {exc}"[:500]}


Finished = tuple[str, dict[str, Any]]
"""A trial that ended: its id and :func:`run_trial`'s answer."""


class _Trials(Protocol):
    """Where trials run: Ray tasks or this process."""

    width: int

    def submit(self, trial: Trial, out_dir: Path, command: list[str]) -> None:
        """Start ``trial`` into ``out_dir``."""

    def wait(self, timeout_s: float, tick: Callable[[], None]) -> list[Finished]:
        """The trials that ended within about ``timeout_s`` (``tick``: a progress line)."""

    def cancel(self) -> None:
        """Stop every running trial (on an interrupt)."""


class _RayTrials:
    """Trials as Ray tasks holding ``cpus_per_trial`` CPUs each."""

    def __init__(self, exp: Experiment, ray_address: str | None, parallel: int | None) -> None:
        import ray

        from actors.ray_session import alive_nodes, ensure_ray, probe_ray
        from actors.remote import TrialTask

        try:
            if ray_address and not ray.is_initialized():
                probe_ray(ray_address)
            ensure_ray(ray_address)
        except RunError as exc:
            raise ExperimentRunError(str(exc)) from None
        self._ray = ray
        self._task = TrialTask
        self._cpus = exp.cpus_per_trial
        self.width = _parallelism(exp.cpus_per_trial, parallel)
        self._pin: dict[str, Any] = {}
        if len(alive_nodes()) > 1:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            here = ray.get_runtime_context().get_node_id()
            self._pin = {"scheduling_strategy": NodeAffinitySchedulingStrategy(here, soft=False)}
        self._refs: dict[Any, str] = {}

    def submit(self, trial: Trial, out_dir: Path, command: list[str]) -> None:
        ref = self._task.options(num_cpus=self._cpus, **self._pin).remote(
            dict(trial.document), trial.source, trial.protocol, str(out_dir), command, trial.engine
        )
        self._refs[ref] = trial.id

    def wait(self, timeout_s: float, tick: Callable[[], None]) -> list[Finished]:
        ready, _ = self._ray.wait(list(self._refs), num_returns=1, timeout=timeout_s)
        out: list[Finished] = []
        for ref in ready:
            tid = self._refs.pop(ref)
            try:
                res = self._ray.get(ref)
            except Exception as exc:  # the task died: a worker lost, an exception
                res = _task_failed(exc)
            out.append((tid, res))
        return out

    def cancel(self) -> None:
        for ref in self._refs:
            with contextlib.suppress(Exception):
                self._ray.cancel(ref, force=True)


class _InProcessTrials:
    """Sim trials one after another in this process (no Ray).

    :meth:`wait` runs the submitted trial to its end; meanwhile a timer thread
    calls ``tick`` every ``progress_every_s`` so that the status lines come
    as they do while Ray tasks run. An interrupt unwinds the trial's run (its
    manifest says ``interrupted``) and propagates.
    """

    width = 1

    def __init__(self, progress_every_s: float) -> None:
        self._every = progress_every_s
        self._next: tuple[Trial, Path, list[str]] | None = None

    def submit(self, trial: Trial, out_dir: Path, command: list[str]) -> None:
        assert self._next is None, "one trial at a time"
        self._next = (trial, out_dir, command)

    def wait(self, timeout_s: float, tick: Callable[[], None]) -> list[Finished]:
        if self._next is None:
            return []
        trial, out_dir, command = self._next
        stop = threading.Event()

        def ticker() -> None:
            while not stop.wait(self._every):
                tick()

        timer = threading.Thread(target=ticker, name="experiment-progress", daemon=True)
        timer.start()
        try:
            res = run_trial(
                dict(trial.document), trial.source, trial.protocol, str(out_dir), command, "sim"
            )
        except Exception as exc:  # as a Ray task's exception: the trial failed
            res = _task_failed(exc)
        finally:
            stop.set()
            timer.join()
        self._next = None
        return [(trial.id, res)]

    def cancel(self) -> None:
        self._next = None  # the interrupt already unwound the trial's run


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def trial_dir(out_dir: Path, trial: Trial) -> Path:
    """The trial's run directory."""
    return out_dir / TRIALS_DIR / trial.id


def existing_state(out_dir: Path, trial: Trial) -> str:
    """The trial's state on disk (:func:`emulator.experiment.trial_state`).

    Raises:
        ExperimentRunError: the trial ran with other settings.
    """
    d = trial_dir(out_dir, trial)
    tj = _read_json(d / TRIAL_FILE)
    if tj is not None and tj.get("fingerprint") not in (None, trial.fingerprint()):
        raise ExperimentRunError(
            f"{d}: this trial ran with other settings (the scenario or the experiment "
            f"changed); use a new --out"
        )
    return trial_state(tj, _read_json(d / "manifest.json"))


def _parallelism(cpus_per_trial: float, cap: int | None) -> int:
    from actors.ray_session import alive_nodes, cluster_resources

    nodes = alive_nodes()
    biggest = max((float(n.get("Resources", {}).get("CPU", 0)) for n in nodes), default=0.0)
    if cpus_per_trial > biggest:
        raise ExperimentRunError(
            f"cpus_per_trial = {cpus_per_trial:g} but the largest Ray node has {biggest:g} CPUs"
        )
    total = float(cluster_resources().get("CPU", 0))
    n = max(1, int(total // cpus_per_trial))
    return min(n, cap) if cap else n


def runs_in_process(exp: Experiment, parallel: int | None) -> bool:
    """Whether :func:`run_experiment` runs the trials in this process (sim, one at a time)."""
    return exp.engine == "sim" and parallel == 1


def run_experiment(
    exp: Experiment,
    out_dir: Path,
    *,
    ray_address: str | None = None,
    parallel: int | None = None,
    retry_failed: bool = False,
    say: Say | None = None,
    progress_every_s: float = 15.0,
) -> ExperimentOutcome:
    """Run (or resume) every trial of ``exp`` under ``out_dir``.

    Args:
        exp: the expanded experiment.
        out_dir: the experiment directory (created).
        ray_address: a Ray cluster to join; None starts a local Ray (unused in process).
        parallel: at most this many trials at once (default: what the cluster holds);
            1 on the sim engine runs them in this process, without Ray
            (:func:`runs_in_process`).
        retry_failed: run failed and degraded trials again.
        say: progress lines (default: stderr).
        progress_every_s: how often a status line is printed while trials run.

    Returns:
        Every trial's state.

    Raises:
        ExperimentRunError: Ray cannot be reached, or a trial ran with other settings.
        KeyboardInterrupt: interrupted; running trials were cancelled and recorded.
    """
    tell = say or (lambda m: print(f"experiment: {m}", file=sys.stderr, flush=True))
    t_start = time.monotonic()
    out_dir = Path(out_dir)
    (out_dir / TRIALS_DIR).mkdir(parents=True, exist_ok=True)
    outcome = ExperimentOutcome(out_dir, in_process=runs_in_process(exp, parallel))
    todo: list[Trial] = []
    for t in exp.trials:
        state = existing_state(out_dir, t)
        if state == "completed" or (state in ("failed", "degraded") and not retry_failed):
            outcome.states[t.id] = state
            outcome.skipped += 1
        else:
            outcome.states[t.id] = "pending"
            todo.append(t)
    record: dict[str, Any] = {
        "kind": "rebalance-emu experiment",
        "plan": exp.to_dict(),
        "status": "running",
        "states": outcome.states,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    write_manifest(out_dir / EXPERIMENT_FILE, record)
    if outcome.skipped:
        tell(f"{outcome.skipped} of {len(exp.trials)} trials already done; running {len(todo)}")
    if not todo:
        record["status"] = "finished"
        write_manifest(out_dir / EXPERIMENT_FILE, record)
        return outcome
    pool: _Trials
    if outcome.in_process:
        pool = _InProcessTrials(progress_every_s)
        how = "in this process"
    else:
        pool = _RayTrials(exp, ray_address, parallel)
        how = f"({exp.cpus_per_trial:g} CPUs each)"
    width = pool.width
    tell(f"{exp.name}: {len(todo)} trials to run, {width} at a time {how} -> {out_dir}")
    by_id = {t.id: t for t in todo}
    running: dict[str, tuple[Trial, float]] = {}
    walls: list[float] = []
    queue = list(todo)
    last_status = time.monotonic()

    def status_line() -> str:
        done = sum(1 for s in outcome.states.values() if s != "pending")
        left = len(queue)
        eta = eta_seconds(walls, left, len(running), width)
        failed = outcome.count("failed") + outcome.count("degraded")
        est = "" if eta is None else f"; ~{eta / 60:.1f} min left"
        bad = f" ({failed} failed or degraded)" if failed else ""
        return (
            f"{done}/{len(exp.trials)} trials done{bad}, {len(running)} running, {left} left{est}"
        )

    try:
        while queue or running:
            while queue and len(running) < width:
                t = queue.pop(0)
                d = trial_dir(out_dir, t)
                if d.exists():
                    shutil.rmtree(d)  # an interrupted or failed attempt: start afresh
                d.mkdir(parents=True)
                write_manifest(d / TRIAL_FILE, {**t.to_dict(), "status": "running"})
                pool.submit(t, d, [*sys.argv, f"(trial {t.id})"])
                running[t.id] = (t, time.monotonic())
            for tid, res in pool.wait(1.0, lambda: tell(status_line())):
                t, t0 = running.pop(tid)
                wall = time.monotonic() - t0
                d = trial_dir(out_dir, by_id[tid])
                manifest = _read_json(d / "manifest.json") or {}
                state = str(manifest.get("status") or res.get("status") or "failed")
                if state not in ("completed", "degraded"):
                    state = "failed"
                outcome.states[t.id] = state
                outcome.ran += 1
                walls.append(wall)
                write_manifest(
                    d / TRIAL_FILE, {**t.to_dict(), **res, "status": state, "wall_s": wall}
                )
                write_manifest(out_dir / EXPERIMENT_FILE, record)
                why = f": {res.get('error')}" if res.get("error") else ""
                tell(f"{t.id}: {state} in {wall:.0f} s{why}; {status_line()}")
            if time.monotonic() - last_status >= progress_every_s and running:
                last_status = time.monotonic()
                tell(status_line())
    except BaseException:
        pool.cancel()
        for t, _t0 in running.values():
            outcome.states[t.id] = "interrupted"
            d = trial_dir(out_dir, t)
            with contextlib.suppress(OSError):
                write_manifest(d / TRIAL_FILE, {**t.to_dict(), "status": "interrupted"})
        record["status"] = "interrupted"
        with contextlib.suppress(OSError):
            write_manifest(out_dir / EXPERIMENT_FILE, record)
        raise
    outcome.wall_s = time.monotonic() - t_start
    record["status"] = "finished"
    record["wall_s_last_invocation"] = round(outcome.wall_s, 1)
    write_manifest(out_dir / EXPERIMENT_FILE, record)
    return outcome
