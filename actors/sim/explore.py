"""``rebalance-emu explore``: many schedules of one scenario, every one checked online.

Design §5 (issue 18). Each seed is a whole sim run of the scenario under one
protocol with a schedule :class:`~emulator.sim.profile.Profile` (the ``explore``
profile by default) and the online invariant monitor armed
(:class:`actors.sim.run.SimEngine` with ``check``): the run stops at its first
violation. The scenario itself (its timeline, its seeded plan) is the same for
every seed; the seed draws the schedule.

Seeds ``first .. first + n - 1`` are run per protocol, in order; exploring a
protocol stops at its first violating seed (unless ``keep_going``). With
``parallel > 1`` the seeds run in batches, ``parallel`` at once: in worker
processes forked from this one (on this machine), or as Ray tasks on a Ray
cluster (``ray_address``; ``"local"`` starts a local Ray). A violation at seed
``s`` cancels batches of larger seeds and lets smaller ones finish, so the
seed reported is the *smallest* violating one whatever the parallelism.

What a violation leaves (under ``out_dir``): ``violation-<protocol>.json``
(the protocol, seed, profile, engine version, the invariant and its facts,
the log digest, the trace: the last events about the partition or members
plus every timeline action and fault), the violating run's directory
``<protocol>-s<seed>/`` (its logs stop at the violation) and the command that
replays it. ``explore.json`` sums up every protocol's seeds.

Runs write their logs to a temporary directory that a clean seed deletes; only
a kept run's logs are read back for its summary (the manifest's ``counts``).
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import ctypes
import json
import multiprocessing
import os
import shlex
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from actors.io import MakeCoordinatorFactory
from actors.orchestrator import run_scenario
from actors.run_files import RunError, write_manifest
from actors.sim.run import SimEngine
from emulator.eventlog import ReadStats, read_run_events
from emulator.events import Event
from emulator.scenario import Scenario
from emulator.sim import engine_version
from emulator.sim.profile import Profile, profile_to_toml
from emulator.summary import summarize

if TYPE_CHECKING:
    from actors.sim.shrink import ShrinkResult

__all__ = [
    "BATCH_SEEDS",
    "ExploreResult",
    "SeedOutcome",
    "explore",
    "format_trace",
    "replay_command",
    "run_seed",
]

BATCH_SEEDS = 20
"""Seeds per batch with ``parallel > 1`` (a worker or a Ray task runs one batch at a time)."""
TRACE_LIMIT = 200
"""Events of a violation's trace about its partition or members (design §5.3)."""

Say = Callable[[str], None]


@dataclass(frozen=True)
class SeedOutcome:
    """One seed's run.

    Attributes:
        protocol: the run protocol.
        seed: the sim seed (the schedule).
        status: the run's status (``completed``, ``degraded``, ``stopped`` at a
            violation, ``failed``).
        violation: the first violation (``Violation.to_dict()``), or ``None``.
        violations: how many the run found (the first stopped it).
        trace: the violation's trace (events), empty without one.
        digest: the sha256 of the run's event logs (``manifest.engine.log_digest``).
        virtual_s: the run's virtual time at its end.
        wall_s: its wall time.
        error: why a failed run failed ("" otherwise).
    """

    protocol: str
    seed: int
    status: str
    violation: dict[str, Any] | None = None
    violations: int = 0
    trace: list[Event] = field(default_factory=list)
    digest: str = ""
    virtual_s: float = 0.0
    wall_s: float = 0.0
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-able."""
        return {
            "protocol": self.protocol,
            "seed": self.seed,
            "status": self.status,
            "violation": self.violation,
            "violations": self.violations,
            "digest": self.digest,
            "virtual_s": self.virtual_s,
            "wall_s": round(self.wall_s, 3),
            "error": self.error,
        }


@dataclass
class ExploreResult:
    """What ``explore`` found, per protocol.

    Attributes:
        checked: seeds run to their end (or to a violation), per protocol.
        outcomes: every seed's outcome, by seed, per protocol.
        found: the smallest violating seed's outcome, per protocol that has one.
        failed: seeds whose run failed (not a violation: an engine or setup error).
        shrunk: the found seed's shrunk schedule, per protocol (with ``shrink``).
        wall_s: the whole exploration's wall time.
    """

    checked: dict[str, int] = field(default_factory=dict)
    outcomes: dict[str, list[SeedOutcome]] = field(default_factory=dict)
    found: dict[str, SeedOutcome] = field(default_factory=dict)
    failed: dict[str, list[SeedOutcome]] = field(default_factory=dict)
    shrunk: dict[str, ShrinkResult] = field(default_factory=dict)
    wall_s: float = 0.0


def run_seed(
    scenario: Scenario,
    protocol: str,
    seed: int,
    profile: Profile,
    *,
    coordinator_factory: MakeCoordinatorFactory | None = None,
    keep: Path | None = None,
) -> SeedOutcome:
    """One seed: a checked sim run of ``scenario`` under ``protocol``.

    Args:
        keep: where the run's directory goes when it found a violation (moved
            there; ``None``: deleted like a clean run's).
    """
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="explore-") as tmp:
        out = Path(tmp) / "run"
        # No summary (the logs read back) for a run that is deleted: a kept one gets it below.
        engine = SimEngine(
            seed,
            profile=profile,
            check=True,
            coordinator_factory=coordinator_factory,
            summaries=False,
        )
        try:
            results = run_scenario(scenario, [protocol], out, engine=engine)
        except RunError as exc:
            return SeedOutcome(
                protocol, seed, "failed", wall_s=time.monotonic() - t0, error=str(exc)
            )
        except Exception as exc:  # an engine error is this seed's failure, not the command's
            return SeedOutcome(
                protocol,
                seed,
                "failed",
                wall_s=time.monotonic() - t0,
                error=f"{type(exc).__name__}: {exc}".splitlines()[0][:400],
            )
        manifest = json.loads((out / "manifest.json").read_text())
        eng = manifest.get("engine", {})
        status = results[0].status
        monitor = engine.monitors.get(protocol)
        first = None if monitor is None else monitor.first
        error = ""
        if status == "failed":
            error = "; ".join(results[0].notes)[:400]
        outcome = SeedOutcome(
            protocol,
            seed,
            status,
            violation=None if first is None else first.to_dict(),
            violations=0 if monitor is None else len(monitor.violations),
            trace=[]
            if first is None or monitor is None
            else [dict(e) for e in monitor.trace(first, TRACE_LIMIT)],
            digest=str(eng.get("log_digest", {}).get(protocol, "")),
            virtual_s=float(eng.get("virtual_s", {}).get(protocol, 0.0)),
            wall_s=time.monotonic() - t0,
            error=error,
        )
        if first is not None and keep is not None:
            _sum_up(out, manifest, protocol)
            if keep.exists():
                shutil.rmtree(keep)
            keep.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(out), str(keep))
    return outcome


def _sum_up(run_dir: Path, manifest: dict[str, Any], protocol: str) -> None:
    """A kept run's manifest gets its protocol's summary, as a ``run`` writes it."""
    doc = manifest.get("protocols", {}).get(protocol)
    if doc is None:
        return
    doc["counts"] = summarize(read_run_events(run_dir / protocol / "events", ReadStats())).to_dict()
    write_manifest(run_dir / "manifest.json", manifest)


def _batches(seeds: Sequence[int], size: int) -> Iterator[list[int]]:
    for i in range(0, len(seeds), size):
        yield list(seeds[i : i + size])


def _run_batch(
    scenario: Scenario,
    protocol: str,
    seeds: list[int],
    profile: Profile,
    keep_going: bool,
) -> list[SeedOutcome]:
    """Seeds in order, in one worker; stops after the first violation unless ``keep_going``."""
    out: list[SeedOutcome] = []
    for s in seeds:
        o = run_seed(scenario, protocol, s, profile)
        out.append(o)
        if o.violation is not None and not keep_going:
            break
    return out


def explore(
    scenario: Scenario,
    protocols: Sequence[str],
    seeds: Sequence[int],
    profile: Profile,
    out_dir: Path,
    *,
    parallel: int = 1,
    ray_address: str | None = None,
    keep_going: bool = False,
    shrink: bool = False,
    coordinator_factory: MakeCoordinatorFactory | None = None,
    scenario_arg: str | None = None,
    profile_arg: str | None = None,
    say: Say | None = None,
    progress_every_s: float = 15.0,
) -> ExploreResult:
    """Run ``seeds`` of ``scenario`` under each protocol, checked; see the module docstring.

    Args:
        parallel: seeds at once; above 1 they run in batches in worker
            processes forked from this one, or as Ray tasks with ``ray_address``.
        ray_address: run the batches as Ray tasks on this cluster (``"local"``:
            a local Ray; ``"auto"``: the one ``ray.init`` finds); ``None``:
            forked workers on this machine (no Ray: its processes would take a
            share of the cores the seeds need).
        keep_going: run every seed even after a violation (each protocol's
            smallest violating seed is still the one reported).
        shrink: take away the profile's freedoms one at a time while the found
            seed still violates the same way (:func:`actors.sim.shrink.shrink`);
            the smaller profile goes to ``shrunk-<protocol>.toml``, the attempts
            to ``shrink-<protocol>.json``, the run to ``<protocol>-s<seed>-shrunk/``.
        coordinator_factory: replaces the brokers' coordinators (in-process
            runs only: a test's planted bug).
        scenario_arg: how the replay command names the scenario (default its source).
        profile_arg: how it names the profile (default its name; a file's path).
        say: progress lines (default: stderr).
    """
    tell = say or (lambda m: print(f"explore: {m}", file=sys.stderr, flush=True))
    if parallel > 1 and coordinator_factory is not None:
        raise ValueError("a planted coordinator runs in this process only (parallel=1)")
    t0 = time.monotonic()
    out_dir.mkdir(parents=True, exist_ok=True)
    result = ExploreResult()
    arg = scenario_arg or scenario.source
    parg = profile_arg or profile.name

    def replay(p: str, seed: int) -> str:
        return replay_command(arg, p, seed, parg)

    for protocol in protocols:
        keep = out_dir / f"{protocol}-s{{seed}}"
        if parallel > 1:
            runner: BatchRunner = (
                _ForkBatches(scenario, protocol, profile, keep_going, parallel)
                if ray_address is None
                else _RayBatches(scenario, protocol, profile, keep_going, ray_address)
            )
            try:
                outcomes = _explore_batches(
                    runner, protocol, seeds, parallel, keep_going, tell, progress_every_s
                )
            finally:
                runner.close()
        else:
            outcomes = _explore_here(
                scenario,
                protocol,
                seeds,
                profile,
                keep_going,
                coordinator_factory,
                tell,
                progress_every_s,
                keep,
            )
        result.checked[protocol] = len(outcomes)
        result.outcomes[protocol] = outcomes
        result.failed[protocol] = [o for o in outcomes if o.status == "failed"]
        bad = sorted((o for o in outcomes if o.violation is not None), key=lambda o: o.seed)
        if bad:
            first = bad[0]
            result.found[protocol] = first
            if parallel > 1:  # the worker's run directory is gone: replay it here, kept
                kept = run_seed(
                    scenario, protocol, first.seed, profile, keep=_kept(keep, first.seed)
                )
                result.found[protocol] = kept
            _write_violation(out_dir, scenario, result.found[protocol], profile, replay)
            if shrink:
                result.shrunk[protocol] = _shrink(
                    out_dir, scenario, result.found[protocol], profile, coordinator_factory,
                    arg, tell,
                )  # fmt: skip
        walls = [o.wall_s for o in outcomes]
        mean = sum(walls) / len(walls) if walls else 0.0
        verdict = (
            f"violation at seed {bad[0].seed}: {bad[0].violation and bad[0].violation['kind']}"
            if bad
            else "no violation"
        )
        tell(
            f"{protocol}: {len(outcomes)} seeds, {verdict}; "
            f"{len(result.failed[protocol])} failed runs; {mean:.2f} s per seed"
        )
    result.wall_s = time.monotonic() - t0
    write_manifest(
        out_dir / "explore.json",
        {
            "kind": "rebalance-emu explore",
            "scenario": scenario.name,
            "profile": profile.to_dict(),
            "engine_version": engine_version(),
            "seeds": [seeds[0], seeds[-1]] if seeds else [],
            "protocols": {
                p: {
                    "seeds_checked": result.checked.get(p, 0),
                    "violation": None
                    if p not in result.found
                    else result.found[p].to_dict() | {"replay": replay(p, result.found[p].seed)},
                    "failed_runs": [o.to_dict() for o in result.failed.get(p, [])],
                }
                for p in protocols
            },
            "wall_s": round(result.wall_s, 1),
        },
    )
    return result


def _shrink(
    out_dir: Path,
    scenario: Scenario,
    found: SeedOutcome,
    profile: Profile,
    coordinator_factory: MakeCoordinatorFactory | None,
    scenario_arg: str,
    tell: Say,
) -> ShrinkResult:
    from actors.sim.shrink import shrink

    p = found.protocol
    tell(f"{p}: shrinking seed {found.seed}'s schedule (one run per freedom of the profile)")
    r = shrink(
        scenario, p, found, profile, coordinator_factory=coordinator_factory,
        keep=out_dir / f"{p}-s{found.seed}-shrunk", say=tell,
    )  # fmt: skip
    profile_file = out_dir / f"shrunk-{p}.toml"
    profile_file.write_text(
        f"# explore --shrink: seed {found.seed} of {scenario.name} under {p} still violates "
        f"({(found.violation or {}).get('kind')}) without: {', '.join(r.removed) or 'nothing'}\n"
        + profile_to_toml(r.profile)
    )
    write_manifest(
        out_dir / f"shrink-{p}.json",
        {
            "protocol": p,
            "seed": found.seed,
            "from_profile": profile.to_dict(),
            "profile": r.profile.to_dict(),
            "profile_file": str(profile_file),
            "removed": r.removed,
            "needed": r.needed,
            "steps": [s.to_dict() for s in r.steps],
            "outcome": r.outcome.to_dict(),
            "replay": replay_command(scenario_arg, p, found.seed, str(profile_file)),
            "trace": r.outcome.trace,
        },
    )
    still = r.outcome.violation is not None
    tell(
        f"{p}: seed {found.seed} "
        + (
            f"needs {', '.join(r.needed) or 'none of the freedoms (it violates on the baseline)'}"
            if still
            else "did not violate again under the shrunk profile (reported as is)"
        )
    )
    return r


def _kept(pattern: Path, seed: int) -> Path:
    return pattern.with_name(pattern.name.replace("{seed}", str(seed)))


def _explore_here(
    scenario: Scenario,
    protocol: str,
    seeds: Sequence[int],
    profile: Profile,
    keep_going: bool,
    coordinator_factory: MakeCoordinatorFactory | None,
    tell: Say,
    every_s: float,
    keep: Path,
) -> list[SeedOutcome]:
    outcomes: list[SeedOutcome] = []
    last = time.monotonic()
    found = False
    for i, s in enumerate(seeds, 1):
        o = run_seed(
            scenario,
            protocol,
            s,
            profile,
            coordinator_factory=coordinator_factory,
            keep=None if found else _kept(keep, s),
        )
        outcomes.append(o)
        if o.status == "failed":
            tell(f"{protocol}: seed {s} failed: {o.error}")
        if o.violation is not None:
            found = True
            if not keep_going:
                break
        if time.monotonic() - last >= every_s:
            last = time.monotonic()
            tell(_progress(protocol, i, len(seeds), outcomes))
    return outcomes


def _progress(
    protocol: str, done: int, total: int, outcomes: Sequence[SeedOutcome], parallel: int = 1
) -> str:
    mean = sum(o.wall_s for o in outcomes) / max(1, len(outcomes))
    left = (total - done) * mean / max(1, parallel)
    bad = sum(1 for o in outcomes if o.violation is not None)
    return (
        f"{protocol}: {done}/{total} seeds, {bad} with a violation, {mean:.2f} s per seed, "
        f"~{left / 60:.1f} min left"
    )


class BatchRunner(Protocol):
    """Where batches of seeds run (Ray tasks): submit, wait for some, fetch, cancel."""

    def submit(self, seeds: list[int]) -> Any:
        """Start a batch; a handle to it."""
        ...

    def ready(self, handles: list[Any], timeout_s: float) -> list[Any]:
        """The handles whose batch has finished (at least one, unless the timeout passed)."""
        ...

    def result(self, handle: Any) -> list[SeedOutcome]:
        """A finished batch's outcomes."""
        ...

    def cancel(self, handle: Any) -> None:
        """Stop a batch; its outcomes are not wanted."""
        ...

    def close(self) -> None:
        """Let go of the workers (bounded)."""
        ...


def run_batches(
    runner: BatchRunner,
    seeds: Sequence[int],
    parallel: int,
    keep_going: bool,
    on_progress: Callable[[list[SeedOutcome]], None] | None = None,
    batch_size: int = BATCH_SEEDS,
) -> list[SeedOutcome]:
    """Batches of ``seeds``, ``parallel`` at once; the smallest violating seed is always run.

    A batch runs its seeds in order and stops after its first violation (unless
    ``keep_going``). Once a violation at seed ``s`` is known, batches that
    start after ``s`` are cancelled or never started, and those that start
    before it run to their end: a smaller violating seed may be among them. The
    result is therefore the same for every ``parallel`` (design §5.3).

    Returns:
        Every outcome received, by seed.
    """
    queue = list(_batches(seeds, batch_size))
    running: dict[Any, int] = {}  # handle -> the batch's first seed
    outcomes: list[SeedOutcome] = []
    smallest_bad: int | None = None
    try:
        while queue or running:
            while queue and len(running) < parallel:
                batch = queue.pop(0)
                running[runner.submit(batch)] = batch[0]
            for handle in runner.ready(list(running), 1.0):
                running.pop(handle)
                got = runner.result(handle)
                outcomes.extend(got)
                for o in got:
                    if o.violation is not None and (smallest_bad is None or o.seed < smallest_bad):
                        smallest_bad = o.seed
            if smallest_bad is not None and not keep_going:
                for handle, first in list(running.items()):
                    if first > smallest_bad:
                        runner.cancel(handle)
                        running.pop(handle)
                queue = [b for b in queue if b[0] < smallest_bad]
            if on_progress is not None:
                on_progress(outcomes)
    except BaseException:
        for handle in running:
            runner.cancel(handle)
        raise
    outcomes.sort(key=lambda o: o.seed)
    return outcomes


class _RayBatches:
    """:class:`BatchRunner` on Ray: one task per batch, one CPU each."""

    def __init__(
        self,
        scenario: Scenario,
        protocol: str,
        profile: Profile,
        keep_going: bool,
        address: str = "local",
    ):
        import ray

        from actors.ray_session import ensure_ray

        ensure_ray(None if address == "local" else address)
        self._ray = ray
        self._remote = ray.remote(num_cpus=1, max_retries=0)(_run_batch)
        self._args = (scenario, protocol)
        self._profile = profile
        self._keep_going = keep_going

    def submit(self, seeds: list[int]) -> Any:
        return self._remote.remote(*self._args, seeds, self._profile, self._keep_going)

    def ready(self, handles: list[Any], timeout_s: float) -> list[Any]:
        done, _ = self._ray.wait(handles, num_returns=1, timeout=timeout_s)
        return list(done)

    def result(self, handle: Any) -> list[SeedOutcome]:
        got: list[SeedOutcome] = self._ray.get(handle)
        return got

    def cancel(self, handle: Any) -> None:
        self._ray.cancel(handle, force=True)

    def close(self) -> None:
        pass  # Ray stays up for the process (the next protocol's batches)


_CLOSE_S = 5.0  # per wait when the fork workers are stopped


class _ForkBatches:
    """:class:`BatchRunner` on this machine: ``parallel`` workers forked from this process.

    The workers inherit the imported modules (no start-up per worker beyond the
    fork) and die with this process (``PR_SET_PDEATHSIG``); a terminal's Ctrl-C
    is this process's to handle (the workers ignore SIGINT and are stopped by
    :meth:`close`). A batch that has started cannot be stopped: its outcomes
    are dropped. A worker that dies fails its batch (``BrokenProcessPool``),
    which ends the exploration with that error.
    """

    def __init__(
        self, scenario: Scenario, protocol: str, profile: Profile, keep_going: bool, parallel: int
    ) -> None:
        self._pool = cf.ProcessPoolExecutor(
            max_workers=parallel,
            mp_context=multiprocessing.get_context("fork"),
            initializer=_worker_init,
            initargs=(os.getpid(),),
        )
        self._args = (scenario, protocol)
        self._profile = profile
        self._keep_going = keep_going

    def submit(self, seeds: list[int]) -> Any:
        return self._pool.submit(_run_batch, *self._args, seeds, self._profile, self._keep_going)

    def ready(self, handles: list[Any], timeout_s: float) -> list[Any]:
        done, _ = cf.wait(handles, timeout=timeout_s, return_when=cf.FIRST_COMPLETED)
        return list(done)

    def result(self, handle: Any) -> list[SeedOutcome]:
        got: list[SeedOutcome] = handle.result()
        return got

    def cancel(self, handle: Any) -> None:
        handle.cancel()

    def close(self) -> None:
        """Stop the workers and reap them, within bounds.

        The pool's manager thread joins the workers too; two threads waiting
        on one child race (the loser sees no child and leaves it unreaped for
        a moment), so the manager is waited for first and this thread only
        reaps what it left. A worker deaf to SIGTERM is killed.
        """
        pool = self._pool
        processes = list(getattr(pool, "_processes", {}).values())
        manager = getattr(pool, "_executor_manager_thread", None)
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in processes:  # a started batch runs on otherwise: stop it
            with contextlib.suppress(Exception):
                proc.terminate()
        if manager is not None:
            manager.join(_CLOSE_S)
        for proc in processes:
            with contextlib.suppress(Exception):
                proc.join(_CLOSE_S)
                if proc.is_alive():
                    proc.kill()
                    proc.join(_CLOSE_S)


def _worker_init(parent: int) -> None:
    """A forked explore worker: dies with the parent, leaves Ctrl-C to it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not a handler the parent had: close() ends it
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(1)


def _explore_batches(
    runner: BatchRunner,
    protocol: str,
    seeds: Sequence[int],
    parallel: int,
    keep_going: bool,
    tell: Say,
    every_s: float,
) -> list[SeedOutcome]:
    """Batches of seeds, ``parallel`` at once; the smallest violating seed wins."""
    last = [time.monotonic()]

    def progress(outcomes: list[SeedOutcome]) -> None:
        if time.monotonic() - last[0] >= every_s:
            last[0] = time.monotonic()
            tell(_progress(protocol, len(outcomes), len(seeds), outcomes, parallel))

    return run_batches(runner, seeds, parallel, keep_going, progress)


def replay_command(scenario_arg: str, protocol: str, seed: int, profile_arg: str) -> str:
    """The command that replays a seed's run, logs and all (design §5.3).

    ``scenario_arg`` and ``profile_arg`` name the scenario and the profile as
    the user did (a bundled name or a file's path).
    """
    return (
        f"rebalance-emu run {shlex.quote(scenario_arg)} --engine sim --protocol {protocol} "
        f"--seed {seed} --profile {shlex.quote(profile_arg)}"
    )


def format_trace(trace: Sequence[Event], limit: int | None = None) -> list[str]:
    """A trace as table lines: ``t_emu_ms actor kind member partitions generation detail``."""
    rows = list(trace)[-limit:] if limit else list(trace)
    lines = [f"{'t_emu_ms':>12}  {'actor':<14} {'kind':<26} {'member':<12} detail"]
    for ev in rows:
        t = ev.get("t_emu_ms")
        parts = ev.get("partitions") or (
            f"{ev.get('topic')}-{ev.get('partition')}" if ev.get("partition") is not None else ""
        )
        gen = ev.get("generation")
        extra = " ".join(
            str(x)
            for x in (
                parts,
                "" if gen is None else f"gen={gen}",
                str(ev.get("detail") or "")[:80],
            )
            if x
        )
        lines.append(
            f"{t if isinstance(t, int | float) else '?':>12}  {ev.get('actor', '')!s:<14} "
            f"{ev.get('kind', '')!s:<26} {ev.get('member') or ''!s:<12} {extra}"
        )
    return lines


def _write_violation(
    out_dir: Path,
    scenario: Scenario,
    o: SeedOutcome,
    profile: Profile,
    replay: Callable[[str, int], str],
) -> None:
    doc = {
        "scenario": scenario.name,
        "scenario_source": scenario.source,
        "engine_version": engine_version(),
        "profile": profile.to_dict(),
        **o.to_dict(),
        "replay": replay(o.protocol, o.seed),
        "run_dir": str(_kept(out_dir / f"{o.protocol}-s{{seed}}", o.seed)),
        "trace": o.trace,
    }
    write_manifest(out_dir / f"violation-{o.protocol}.json", doc)
