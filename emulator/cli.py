"""``rebalance-emu``: the command line.

::

    rebalance-emu run SCENARIO.toml [--protocol P ...] [--out DIR|URL]
                      [--zookeeper CONNECT] [--ray-address ADDR] [--shared-storage]
    rebalance-emu compare RUN_DIR [RUN_DIR ...] [--spark-master URL] [--out DIR]
    rebalance-emu experiment EXPERIMENT.toml [--out DIR] [--seeds N] [--protocol P]
                      [--parallel N] [--ray-address ADDR] [--retry-failed]
                      [--engine real|sim]
    rebalance-emu demo [--scenario NAME] [--out DIR]
    rebalance-emu explore SCENARIO [--seeds N] [--first-seed S] [--protocol P ...]
                      [--profile NAME|FILE] [--parallel K] [--out DIR] [--keep-going]
    rebalance-emu zk start|stop|status [--ensemble N]
    rebalance-emu scenarios

The core imports no Ray, kazoo or Spark; each command loads what it needs
when it runs. Bad input gets one line on stderr naming the problem and a
non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import BrokenExecutor
from pathlib import Path
from typing import Any

from emulator.clock import monotonic_s
from emulator.protocols import GROUP_PROTOCOLS, RUN_PROTOCOLS
from emulator.scenario import ScenarioError, bundled_scenarios, load_scenario
from emulator.storage import StorageError, is_url, resolve

ALL_PROTOCOLS = RUN_PROTOCOLS
"""Every protocol a run may name; ``all`` is :data:`GROUP_PROTOCOLS` (not ``share``)."""
EXIT_USAGE = 2
EXIT_FAILED = 1
EXIT_DEGRADED = 3
"""``run``: a host or broker was lost unasked; ``compare``: incomplete evidence."""


class Interrupted(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP, raised in the main thread: the run stops as on Ctrl-C.

    ``code`` is the exit status a shell expects (128 + the signal's number).
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.code = 128 + signum


def _exit_code(exc: KeyboardInterrupt) -> int:
    """128 + the signal that interrupted (130 for a plain KeyboardInterrupt)."""
    return exc.code if isinstance(exc, Interrupted) else 130


@contextlib.contextmanager
def stop_signals() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP raise :class:`Interrupted` once; later ones only hurry.

    The first signal unwinds the run (actors stopped within seconds, logs
    flushed, the manifest marked ``interrupted``). A second one while that
    cleanup runs does not cut it short (that is what left half a manifest):
    it is acknowledged on stderr and ignored.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    names = [n for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n)]
    kept = {n: signal.getsignal(getattr(signal, n)) for n in names}
    fired: list[int] = []

    def handler(signum: int, _frame: object) -> None:
        if fired:
            print(
                f"rebalance-emu: {signal.Signals(signum).name} again: still stopping "
                "(the logs and the manifest are being written)",
                file=sys.stderr,
                flush=True,
            )
            return
        fired.append(signum)
        print(
            f"rebalance-emu: {signal.Signals(signum).name}: stopping the run",
            file=sys.stderr,
            flush=True,
        )
        raise Interrupted(signum)

    for n in names:
        signal.signal(getattr(signal, n), handler)
    try:
        yield
    finally:
        for n, h in kept.items():
            if h is not None:
                signal.signal(getattr(signal, n), h)


def prepare_local_ray(joining: bool) -> None:
    """The environment Ray reads when it is imported, for this run's Ray.

    A local Ray (no ``--ray-address``) binds 127.0.0.1 only (Ray's
    single-machine mode, ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``: the node's
    address is the loopback and every gRPC server, the raylet, the workers
    and the dashboard agent listen there) and requires a token generated for
    this run (``RAY_AUTH_MODE=token``, ``RAY_AUTH_TOKEN``: in this process's
    environment only, never written to disk). Joining a cluster
    (``--ray-address``, or ``$RAY_ADDRESS`` as in a Ray job) keeps the
    cluster's own settings. Nothing changes once Ray is imported (it read its
    settings then: an embedding process decided).
    """
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if joining or os.environ.get("RAY_ADDRESS") or "ray" in sys.modules:
        return  # a cluster (--ray-address, or a Ray job's RAY_ADDRESS), or Ray already loaded
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN"] = secrets.token_urlsafe(32)
    os.environ.pop("RAY_AUTH_TOKEN_PATH", None)


class _Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line and exit 2."""

    def error(self, message: str) -> Any:
        self.exit(EXIT_USAGE, f"rebalance-emu: error: {message}\n")


def _fail(message: str, code: int = EXIT_FAILED) -> int:
    print(f"rebalance-emu: error: {message}", file=sys.stderr)
    return code


def _resolve_scenario(arg: str) -> Path:
    p = Path(arg)
    if p.exists():
        return p
    bundled = bundled_scenarios()
    if arg in bundled:
        return Path(str(bundled[arg]))
    raise ScenarioError(
        arg,
        "path",
        f"no such file, and no bundled scenario {arg!r} (bundled: {', '.join(sorted(bundled))})",
    )


def _protocols(values: Sequence[str] | None) -> list[str]:
    chosen: list[str] = []
    for v in values or ["zookeeper"]:
        for item in v.split(","):
            item = item.strip()
            if item == "all":
                names: Sequence[str] = GROUP_PROTOCOLS
            elif item in ALL_PROTOCOLS:
                names = (item,)
            else:
                raise ValueError(
                    f"unknown protocol {item!r} (choose from {', '.join(ALL_PROTOCOLS)} or all)"
                )
            chosen.extend(n for n in names if n not in chosen)
    return chosen


class _LiveStatus:
    """The live status: a line per protocol running (rich on a terminal, plain lines otherwise).

    A protocol's line stays while it reports (about twice a second); a sim run
    with ``--parallel`` shows several at once.
    """

    def __init__(self) -> None:
        self._live: Any = None
        self._last_plain = 0.0
        self._lines: dict[str, tuple[float, str]] = {}
        self.tty = sys.stderr.isatty()

    def __enter__(self) -> _LiveStatus:
        if self.tty:
            from rich.console import Console
            from rich.live import Live

            self._live = Live(
                "", console=Console(stderr=True), refresh_per_second=4, transient=False
            )
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)

    def __call__(self, st: dict[str, Any]) -> None:
        dur = float(st.get("duration_s", 0) or 0)
        emu = float(st.get("emu_s", 0) or 0)
        width = 24
        filled = int(width * min(1.0, emu / dur)) if dur else 0
        bar = "#" * filled + "-" * (width - filled)
        phase = st.get("phase", "running")
        extra = f" behind {st['behind']}" if phase == "draining" else ""
        # ZooKeeper claim attempts and conflicts exist only in the 0.8 consumer.
        legacy = (
            f"  attempts {st.get('attempts', 0)}  conflicts {st.get('conflicts', 0)}"
            if st.get("protocol") == "zookeeper"
            else ""
        )
        protocol = str(st.get("protocol"))
        line = (
            f"[{protocol}] {phase} [{bar}] {emu:6.1f}/{dur:.0f} s  "
            f"members {st.get('members', 0)}  produced {st.get('produced', 0)}  "
            f"processed {st.get('processed', 0)}  rebalances {st.get('rebalances', 0)}"
            f"{legacy}{extra}"
        )
        now = monotonic_s()
        self._lines[protocol] = (now, line)
        for other, (at, _line) in list(self._lines.items()):
            if other != protocol and now - at > STALE_STATUS_S:
                del self._lines[other]  # that protocol has ended (or stopped reporting)
        text = "\n".join(ln for _at, ln in self._lines.values())
        if self._live is not None:
            self._live.update(text)
        elif now - self._last_plain >= 5.0:
            self._last_plain = now
            print(text, file=sys.stderr, flush=True)


STALE_STATUS_S = 3.0
"""A protocol's live line goes once it has not been updated for this long (wall seconds)."""


def _print_summary(results: list[Any], out: Path | str) -> None:
    cols = (
        "rebalances",
        "attempts",
        "conflicts",
        "gave_up",
        "produced",
        "processed",
        "duplicates",
        "unprocessed",
        "double_processing",
        "ordering_overlap",
    )
    heads = {"double_processing": "double-proc", "ordering_overlap": "order-ovl"}
    header = f"{'protocol':<22}{'status':<11}" + "".join(f"{heads.get(c, c):>12}" for c in cols)
    print(header)
    legacy_only = {"attempts", "conflicts", "gave_up"}  # ZooKeeper claim attempts
    for r in results:
        d = r.summary.to_dict()
        cells = ["-" if c in legacy_only and r.protocol != "zookeeper" else str(d[c]) for c in cols]
        print(f"{r.protocol:<22}{r.status:<11}" + "".join(f"{c:>12}" for c in cells))
        if r.protocol == "share":
            _print_share(r.summary)
        elif r.summary.double_processing:
            print(
                f"  two members processed the same records at once: "
                f"{r.summary.double_processing} window(s), longest "
                f"{r.summary.double_processing_max_ms / 1000.0:.1f} s, total "
                f"{r.summary.double_processing_ms / 1000.0:.1f} s on "
                f"{', '.join(r.summary.double_processing_partitions[:8])}"
            )
        if r.summary.deleted_unprocessed:
            print(
                f"  {r.summary.deleted_unprocessed} produced messages went with a deleted topic "
                f"before anyone processed them (not counted as unprocessed)"
            )
        if r.summary.ordering_overlap and r.protocol != "share":
            print(
                f"  two members processed different records of one partition at once "
                f"(order broken): {r.summary.ordering_overlap} window(s), total "
                f"{r.summary.ordering_overlap_ms / 1000.0:.1f} s"
            )
        for note in r.notes:
            print(f"  note: {note}")
    print(f"run directory: {out}")


def _print_share(summary: Any) -> None:
    """A share group's record fates (KIP-932): several members per partition is its point."""
    s = summary
    print(
        f"  share group: {s.share_acquired} deliveries ({s.share_redelivered} redeliveries), "
        f"{s.share_acknowledged} records acknowledged, {s.share_archived} archived "
        f"(rejected, or delivered group.share.delivery.count.limit times), "
        f"{s.share_released} released, {s.share_lock_expired} locks expired"
    )
    if s.double_processing:
        print(
            f"  a record processed by two members at once (its lock ran out): "
            f"{s.double_processing} window(s), total {s.double_processing_ms / 1000.0:.1f} s "
            f"(at least once: allowed in a share group)"
        )


def _zk_auth(arg: str | None) -> Any:
    """``--zk-auth`` or ``$REBALANCE_EMU_ZK_AUTH`` as a ZkAuth, or ``None``."""
    text = arg if arg is not None else os.environ.get("REBALANCE_EMU_ZK_AUTH")
    if not text:
        return None
    from zk_registry.auth import parse_zk_auth

    return parse_zk_auth(text)


def cmd_run(args: argparse.Namespace) -> int:
    """``rebalance-emu run``."""
    try:
        path = _resolve_scenario(args.scenario)
        scenario = load_scenario(path)
        protocols = _protocols(args.protocol)
        zk_auth = _zk_auth(getattr(args, "zk_auth", None))
    except ScenarioError as exc:
        return _fail(str(exc), EXIT_USAGE)
    except (ValueError, OSError) as exc:
        return _fail(str(exc), EXIT_USAGE)
    out: Path | str = (
        (args.out if is_url(args.out) else Path(args.out))
        if args.out
        else Path("runs") / (f"{scenario.name}-{time.strftime('%Y%m%d-%H%M%S')}")
    )
    engine_name = getattr(args, "engine", "real") or "real"
    if engine_name == "sim":
        refused = _sim_refuses(args, out)
        if refused:
            return _fail(refused, EXIT_USAGE)
    if isinstance(out, str):
        try:
            loc = resolve(out)
            taken = loc.exists("manifest.json")
        except StorageError as exc:
            return _fail(f"--out {exc}", EXIT_USAGE)
        if taken and not args.force:
            return _fail(
                f"--out {loc.display()} holds a run already (use --force to write into it)",
                EXIT_USAGE,
            )
    elif out.exists() and not out.is_dir():
        return _fail(f"--out {out} is a file, not a directory", EXIT_USAGE)
    elif out.exists() and any(out.iterdir()) and not args.force:
        return _fail(
            f"--out {out} exists and is not empty (use --force to write into it)", EXIT_USAGE
        )
    seed = getattr(args, "seed", None)
    parallel = getattr(args, "parallel", None)
    profile_spec = getattr(args, "profile", None)
    engine: object = None
    if engine_name == "sim":
        sim_options: dict[str, Any] = {}
        if profile_spec is not None:
            from emulator.sim.profile import ProfileError, load_profile

            try:
                sim_options = {"profile": load_profile(profile_spec), "check": True}
            except ProfileError as exc:
                return _fail(str(exc), EXIT_USAGE)
        if parallel is not None and parallel < 1:
            return _fail(f"--parallel must be at least 1, not {parallel}", EXIT_USAGE)
        sim_options["workers"] = parallel if parallel is not None else (os.cpu_count() or 1)
        engine = importlib.import_module("actors.sim.run").SimEngine(seed=seed, **sim_options)
    elif parallel is not None:
        return _fail("--parallel runs sim worlds at once: use it with --engine sim", EXIT_USAGE)
    elif seed is not None:
        return _fail("--seed replays a run of the sim engine: use it with --engine sim", EXIT_USAGE)
    elif profile_spec is not None:
        return _fail("--profile draws a sim run's schedule: use it with --engine sim", EXIT_USAGE)
    else:
        prepare_local_ray(joining=bool(args.ray_address))
    orch = importlib.import_module("actors.orchestrator")
    print(
        f"running {scenario.name} ({scenario.duration_s:g} emulated s at time scale "
        f"{scenario.time_scale:g}) under {', '.join(protocols)} on the {engine_name} engine "
        f"-> {out}",
        file=sys.stderr,
    )
    try:
        with stop_signals(), _LiveStatus() as live:
            results = orch.run_scenario(
                scenario,
                protocols,
                out,
                zookeeper=args.zookeeper,
                ray_address=args.ray_address,
                status=live,
                shared_storage=bool(getattr(args, "shared_storage", False)),
                zk_auth=zk_auth,
                keep_zk_data=bool(getattr(args, "keep_zk_data", False)),
                engine=engine,
            )
    except orch.RunError as exc:
        return _fail(str(exc))
    except KeyboardInterrupt as exc:
        return _fail(f"interrupted; what was written is in {out}", _exit_code(exc))
    _print_summary(results, out)
    if profile_spec is not None:
        _print_checks(engine, results)
    statuses = {r.status for r in results}
    if statuses <= {"completed"} and not _violations(engine):
        return 0
    if statuses <= {"completed", "degraded"}:
        for r in results:
            if r.status == "degraded":
                print(
                    f"rebalance-emu: degraded: {r.protocol} lost what the timeline did not ask "
                    f"for ({'; '.join(n for n in r.notes if 'was lost' in n)})",
                    file=sys.stderr,
                )
        return EXIT_DEGRADED
    return EXIT_FAILED


def _violations(engine: object) -> int:
    """How many invariant violations a checked sim run found (0 for any other run)."""
    monitors = getattr(engine, "monitors", None) or {}
    return sum(len(m.violations) for m in monitors.values())


def _print_checks(engine: object, results: list[Any]) -> None:
    """A checked sim run: each protocol's first violation, or that it had none."""
    monitors = getattr(engine, "monitors", None) or {}
    for r in results:
        m = monitors.get(r.protocol)
        if m is None:
            continue
        mine = [v for v in m.violations if v.protocol == r.protocol]
        if not mine:
            print(f"{r.protocol}: online checks: no violation", file=sys.stderr)
            continue
        v = mine[0]
        print(
            f"{r.protocol}: online checks: {len(mine)} violation(s); the first, at "
            f"{v.t_end_ms:.1f} emulated ms: {v.kind}: {v.message}",
            file=sys.stderr,
        )


TRACE_LINES = 40
"""Lines of a violation's trace printed by ``explore`` (the whole trace is in its JSON)."""


def cmd_explore(args: argparse.Namespace) -> int:
    """``rebalance-emu explore``: seeds x protocols on the sim engine, checked online."""
    from emulator.sim.profile import ProfileError, load_profile

    try:
        path = _resolve_scenario(args.scenario)
        scenario = load_scenario(path)
        protocols = _protocols(args.protocol or ["all"])
        profile = load_profile(args.profile)
        if args.seeds < 1:
            raise ValueError(f"--seeds must be at least 1, got {args.seeds}")
        if args.first_seed < 0:
            raise ValueError(f"--first-seed must not be negative, got {args.first_seed}")
        if args.parallel < 1:
            raise ValueError(f"--parallel must be at least 1, got {args.parallel}")
    except (ScenarioError, ProfileError, ValueError, OSError) as exc:
        return _fail(str(exc), EXIT_USAGE)
    out = (
        Path(args.out)
        if args.out
        else Path("runs") / f"explore-{scenario.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    )
    if out.exists() and not out.is_dir():
        return _fail(f"--out {out} is a file, not a directory", EXIT_USAGE)
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    print(
        f"exploring {scenario.name} under {', '.join(protocols)}: seeds {seeds[0]}..{seeds[-1]}, "
        f"profile {profile.name}, {args.parallel} at a time"
        f"{' on Ray at ' + args.ray_address if args.ray_address and args.parallel > 1 else ''} "
        f"-> {out}",
        file=sys.stderr,
    )
    xp = importlib.import_module("actors.sim.explore")
    try:
        with stop_signals():
            result = xp.explore(
                scenario,
                protocols,
                seeds,
                profile,
                out,
                parallel=args.parallel,
                ray_address=getattr(args, "ray_address", None),
                keep_going=args.keep_going,
                shrink=args.shrink,
                scenario_arg=args.scenario,
                profile_arg=args.profile,
            )
    except KeyboardInterrupt as exc:
        return _fail(f"interrupted; what was found so far is in {out}", _exit_code(exc))
    except BrokenExecutor as exc:  # a forked worker died (killed, out of memory)
        return _fail(f"an explore worker process died: {exc}; what was found so far is in {out}")
    failed = 0
    for protocol in protocols:
        for o in result.failed.get(protocol, []):
            failed += 1
            print(f"{protocol}: seed {o.seed}: the run failed: {o.error}", file=sys.stderr)
        found = result.found.get(protocol)
        if found is None:
            print(
                f"{protocol}: {result.checked.get(protocol, 0)} seeds, no violation",
                file=sys.stderr,
            )
            continue
        v = found.violation or {}
        print(
            f"{protocol}: VIOLATION at seed {found.seed}: {v.get('kind')}: {v.get('message')}",
            file=sys.stderr,
        )
        for line in xp.format_trace(found.trace, TRACE_LINES):
            print(f"  {line}", file=sys.stderr)
        replay = xp.replay_command(args.scenario, protocol, found.seed, args.profile)
        print(f"  details: {out / f'violation-{protocol}.json'}", file=sys.stderr)
        print(
            f"  logs (cut at the violation): {out / f'{protocol}-s{found.seed}'}", file=sys.stderr
        )
        print(f"  replay: {replay}", file=sys.stderr)
        shrunk = result.shrunk.get(protocol)
        if shrunk is not None and shrunk.outcome.violation is not None:
            small = out / f"shrunk-{protocol}.toml"
            print(
                f"  shrunk: it needs {', '.join(shrunk.needed) or 'none of the freedoms'}; "
                f"replay: {xp.replay_command(args.scenario, protocol, found.seed, str(small))}",
                file=sys.stderr,
            )
    print(f"explored in {result.wall_s:.1f} s; summary in {out / 'explore.json'}", file=sys.stderr)
    return EXIT_FAILED if result.found or failed else 0


def _sim_refuses(args: argparse.Namespace, out: Path | str) -> str:
    """Why ``--engine sim`` cannot take these options ("" if it can).

    The sim engine runs everything in this process on a simulated ZooKeeper,
    so options about a real ZooKeeper, a Ray cluster or shared storage do not apply.
    """
    given = [
        opt
        for opt, attr in (
            ("--zookeeper", "zookeeper"),
            ("--ray-address", "ray_address"),
            ("--zk-auth", "zk_auth"),
            ("--shared-storage", "shared_storage"),
            ("--keep-zk-data", "keep_zk_data"),
        )
        if getattr(args, attr, None)
    ]
    if given:
        return (
            f"--engine sim runs on a simulated ZooKeeper in this process: "
            f"{', '.join(given)} do not apply"
        )
    if isinstance(out, str):
        return f"--engine sim writes a local run directory, not {out}"
    return ""


def cmd_submit(args: argparse.Namespace) -> int:
    """``rebalance-emu submit``: ``run`` as a Ray job, the project in its runtime_env."""
    import subprocess

    from emulator import submit

    try:
        root = submit.check_working_dir(
            Path(args.working_dir) if args.working_dir else submit.project_root()
        )
        scenario = submit.scenario_argument(args.scenario, root, list(bundled_scenarios()))
        load_scenario(_resolve_scenario(args.scenario))
        job = submit.entrypoint(
            scenario,
            _protocols(args.protocol),
            args.out,
            zookeeper=args.zookeeper,
            force=args.force,
            shared_storage=args.shared_storage,
        )
        cmd = submit.submit_command(
            submit.runtime_env(root, pip=args.pip),
            job,
            address=args.address,
            submission_id=args.submission_id,
            no_wait=args.no_wait,
        )
    except (ScenarioError, ValueError, OSError) as exc:
        return _fail(str(exc), EXIT_USAGE)
    if args.dry_run:
        print(submit.display(cmd))
        return 0
    print(f"submitting: {submit.display(cmd)}", file=sys.stderr, flush=True)
    env = dict(os.environ)
    env.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    env.setdefault("RAY_AUTH_MODE", "disabled")
    try:
        return subprocess.run(cmd, env=env, check=False).returncode
    except KeyboardInterrupt:
        return _fail("interrupted; the job goes on (ray job stop ID stops it)", 130)


def _resolve_experiment(arg: str) -> Path:
    from emulator.experiment import bundled_experiments

    path = Path(arg)
    if path.is_file():
        return path
    bundled = bundled_experiments()
    if arg in bundled:
        return bundled[arg]
    raise ValueError(
        f"experiment {arg!r}: no such file, and not a bundled experiment "
        f"({', '.join(bundled) or 'none'})"
    )


def cmd_experiment(args: argparse.Namespace) -> int:
    """``rebalance-emu experiment``: run (or resume) an experiment's trials, then its report."""
    from emulator.experiment import ExperimentError, load_experiment

    try:
        path = _resolve_experiment(args.experiment)
        protocols = _protocols(args.protocol) if args.protocol else None
        if args.seeds is not None and args.seeds < 1:
            raise ValueError(f"--seeds must be at least 1, got {args.seeds}")
        if args.parallel is not None and args.parallel < 1:
            raise ValueError(f"--parallel must be at least 1, got {args.parallel}")
        exp = load_experiment(path, seeds=args.seeds, protocols=protocols).on_engine(
            getattr(args, "engine", "real") or "real"
        )
        in_process = exp.engine == "sim" and args.parallel == 1
        if in_process and args.ray_address:
            raise ValueError(
                "--engine sim --parallel 1 runs the trials in this process: drop --ray-address "
                "(or ask for more than one trial at once)"
            )
    except (ExperimentError, ValueError) as exc:
        return _fail(str(exc), EXIT_USAGE)
    out = Path(args.out) if args.out else Path("runs") / exp.name
    if out.exists() and not out.is_dir():
        return _fail(f"--out {out} is a file, not a directory", EXIT_USAGE)
    if out.is_dir() and any(out.iterdir()) and not (out / "experiment.json").is_file():
        return _fail(f"--out {out} exists and holds no experiment", EXIT_USAGE)
    if (out / "experiment.json").is_file():
        try:
            held = json.loads((out / "experiment.json").read_text())["plan"]["name"]
        except (OSError, ValueError, KeyError, TypeError):
            return _fail(f"--out {out}: unreadable experiment.json", EXIT_USAGE)
        if held != exp.name:
            return _fail(
                f"--out {out} holds experiment {held!r}, not {exp.name!r} (use another --out)",
                EXIT_USAGE,
            )
    if not in_process:
        prepare_local_ray(joining=bool(args.ray_address))
    runner = importlib.import_module("actors.experiment")
    print(
        f"experiment {exp.name}: {len(exp.trials)} trials ({len(exp.scenarios)} scenarios x "
        f"{len(exp.protocols)} protocols x seeds x {exp.points} grid points) on the "
        f"{exp.engine} engine{' in this process' if in_process else ''} -> {out}",
        file=sys.stderr,
    )
    t0 = monotonic_s()
    try:
        with stop_signals():
            outcome = runner.run_experiment(
                exp,
                out,
                ray_address=args.ray_address,
                parallel=args.parallel,
                retry_failed=args.retry_failed,
            )
    except runner.ExperimentRunError as exc:
        return _fail(str(exc))
    except KeyboardInterrupt as exc:
        return _fail(
            f"interrupted; completed trials are kept in {out} (run the same command to resume)",
            _exit_code(exc),
        )
    bad = outcome.count("failed") + outcome.count("degraded")
    print(
        f"experiment: {outcome.count('completed')} of {len(exp.trials)} trials completed"
        + (f", {bad} failed or degraded (left out of the statistics)" if bad else "")
        + f"; {outcome.ran} run now in {monotonic_s() - t0:.0f} s",
        file=sys.stderr,
        flush=True,
    )
    if args.no_report:
        return EXIT_DEGRADED if bad else 0
    _stop_ray()
    code, report_dir = _compare_experiment(out, None, args.spark_master)
    _print_report(report_dir)
    return code or (EXIT_DEGRADED if bad else 0)


def _compare_experiment(
    exp_dir: Path, out: str | None, spark_master: str | None
) -> tuple[int, Path | None]:
    """The experiment report; an exit code and the report directory."""
    xp = _analysis_module("analysis.experiment")
    if xp is None:
        return EXIT_FAILED, None
    code, rep = _spark_job(
        lambda: xp.compare_experiment(
            exp_dir, Path(out) if out else None, spark_master, xp.stderr_progress()
        ),
        xp.ExperimentReportError,
        EXIT_USAGE,
    )
    if rep is None:
        return code, None
    if rep.excluded:
        print(
            f"rebalance-emu: {len(rep.excluded)} of {rep.trials} trials left out of the "
            f"statistics (the report lists them)",
            file=sys.stderr,
        )
    return 0, rep.report_dir


def _print_report(report_dir: Path | None) -> None:
    """Where a report was written (stdout), if it was."""
    if report_dir is not None:
        print(f"report: {report_dir / 'report.html'}")
        print(f"        {report_dir / 'report.md'}, {report_dir / 'metrics.json'}")


def cmd_compare(args: argparse.Namespace) -> int:
    """``rebalance-emu compare``: the comparison report of one or more run directories."""
    if len(args.run_dir) == 1 and (Path(args.run_dir[0]) / "experiment.json").is_file():
        code, report_dir = _compare_experiment(Path(args.run_dir[0]), args.out, args.spark_master)
        _print_report(report_dir)
        return code
    dirs: list[Path | str] = [d if is_url(d) else Path(d) for d in args.run_dir]
    code, report_dir = _compare(
        dirs, args.out, args.spark_master, args.allow_incomplete, cache=not args.no_cache
    )
    _print_report(report_dir)
    return code


def _compare(
    run_dirs: list[Path | str],
    out: str | None,
    spark_master: str | None,
    allow_incomplete: bool = False,
    cache: bool = True,
) -> tuple[int, Path | None]:
    """Run :func:`analysis.compare.compare_runs`; an exit code and the report directory.

    Incomplete evidence (:mod:`analysis.evidence`) exits :data:`EXIT_DEGRADED`
    with the report written, unless ``allow_incomplete``.
    """
    cmp = _analysis_module("analysis.compare")
    if cmp is None:
        return EXIT_FAILED, None
    try:
        for d in run_dirs:
            cmp.check_run_dir(d)
    except cmp.CompareError as exc:
        return _fail(str(exc), EXIT_USAGE), None
    code, outcome = _spark_job(
        lambda: cmp.compare_runs(
            run_dirs,
            out_dir=Path(out) if out else None,
            spark_master=spark_master,
            progress=cmp.stderr_progress(),
            cache=cache,
        ),
        cmp.CompareError,
        EXIT_FAILED,
    )
    if outcome is None:
        return code, None
    report_dir: Path = outcome.report_dir
    if outcome.incomplete:
        which = ", ".join(outcome.incomplete)
        if allow_incomplete:
            print(f"rebalance-emu: warning: incomplete evidence for {which}", file=sys.stderr)
            return 0, report_dir
        return (
            _fail(
                f"incomplete evidence for {which} (the report says what is missing; "
                f"--allow-incomplete accepts it)",
                EXIT_DEGRADED,
            ),
            report_dir,
        )
    return 0, report_dir


def _analysis_module(name: str) -> Any:
    """Import an analysis module for a Spark job (None, with the one line said, if it cannot).

    Spark binds the loopback; a Ctrl-C in a Spark job makes py4j log the broken
    gateway call, through its own loggers and the root one (logging.exception):
    the one line "interrupted" says it all.
    """
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    logging.getLogger().addFilter(_not_py4j)
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        _fail(f"the analysis needs pyspark, pandas and matplotlib: {exc}")
        return None


def _spark_job(
    job: Callable[[], Any], bad_input: type[Exception], bad_input_code: int
) -> tuple[int, Any]:
    """Run ``job`` under the stop signals; ``(0, result)`` or ``(exit code, None)``.

    ``bad_input`` errors are one line with ``bad_input_code``; any other failure
    (a Spark one) one line, not a JVM stack trace. A SparkSession this started
    is stopped; a session the caller had stays theirs.
    """
    stop_after = _active_spark() is None  # a session the caller had stays theirs
    try:
        with stop_signals():
            return 0, job()
    except bad_input as exc:
        return _fail(str(exc), bad_input_code), None
    except KeyboardInterrupt as exc:
        if stop_after:  # first: a JVM still starting would print after the one line
            stop_after = False  # and not again below: its gateway is gone
            _stop_spark(end_jvm=True)
        return _fail("interrupted", _exit_code(exc)), None
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        return _fail(f"compare failed: {type(exc).__name__}: {first[:300]}"), None
    finally:
        if stop_after:
            _stop_spark()


def _not_py4j(record: logging.LogRecord) -> bool:
    """A logging filter: drop what py4j logs on the root logger."""
    return "py4j" not in record.pathname


def _active_spark() -> Any:
    """This process's active SparkSession, if pyspark is loaded and one runs."""
    mod = sys.modules.get("pyspark.sql")
    return None if mod is None else mod.SparkSession.getActiveSession()


def _stop_spark(end_jvm: bool = False) -> None:
    """Stop the SparkSession this process started, if any; ``end_jvm``: its JVM too.

    An interrupted job ends the JVM, bounded, before the one line is said: a JVM
    interrupted while its SparkContext was starting goes on starting and prints
    its warnings on the shared stderr, after the line otherwise.
    """
    session = _active_spark()
    if session is not None:
        with contextlib.suppress(Exception):  # a context half made by the interrupted call
            session.stop()
    if not end_jvm:
        return
    from emulator import reaper

    context = getattr(sys.modules.get("pyspark"), "SparkContext", None)
    gateway: Any = getattr(context, "_gateway", None)
    if gateway is not None:
        with contextlib.suppress(Exception):
            gateway.shutdown()
    # The JVM by its command line: one caught starting is not the gateway's yet.
    reaper.end_children(b"org.apache.spark.deploy.SparkSubmit")
    if context is not None:
        context._gateway = None
        context._jvm = None


def cmd_demo(args: argparse.Namespace) -> int:
    """``rebalance-emu demo``: a bundled scenario under every protocol, then the report.

    Embedded ZooKeeper, a local Ray and a local Spark; the run's summary, then
    the comparison's progress, and the report's path at the end.
    """
    t0 = monotonic_s()
    out = args.out or str(Path("runs") / f"demo-{time.strftime('%Y%m%d-%H%M%S')}")
    ns = argparse.Namespace(
        scenario=args.scenario,
        protocol=list(GROUP_PROTOCOLS),
        out=out,
        zookeeper=None,
        ray_address=None,
        force=False,
        engine=getattr(args, "engine", "real"),
        seed=getattr(args, "seed", None),
        parallel=getattr(args, "parallel", None),
    )
    code = cmd_run(ns)
    if code not in (0, EXIT_FAILED, EXIT_DEGRADED) or not (Path(out) / "manifest.json").is_file():
        return code
    _stop_ray()
    print(
        f"demo: comparing the protocols with Spark (local) -> {Path(out) / 'report'}",
        file=sys.stderr,
        flush=True,
    )
    ccode, report_dir = _compare([Path(out)], None, None)
    print(f"demo: finished in {monotonic_s() - t0:.0f} s", file=sys.stderr, flush=True)
    if report_dir is not None:
        print(f"report: {report_dir / 'report.html'}")
    return code or ccode


def _stop_ray() -> None:
    """Shut down the local Ray the run started (frees the cores for Spark)."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


def cmd_scenarios(_args: argparse.Namespace) -> int:
    """``rebalance-emu scenarios``: list the bundled scenarios."""
    for name, path in sorted(bundled_scenarios().items()):
        try:
            desc = load_scenario(Path(str(path))).description.splitlines()[0]
        except (ScenarioError, IndexError):
            desc = ""
        print(f"{name:<24}{desc}")
    return 0


def _engine_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--engine",
        choices=("real", "sim"),
        default="real",
        help="real: Ray actors, a real ZooKeeper, scaled real time (default); sim: the same "
        "code in one process on a virtual clock and a simulated ZooKeeper, deterministic",
    )
    p.add_argument(
        "--seed",
        type=int,
        metavar="N",
        help="with --engine sim: run with this seed instead of the scenario's (the same "
        "seed replays a run exactly)",
    )
    p.add_argument(
        "--parallel",
        type=int,
        metavar="K",
        help="with --engine sim: simulate K protocols at once, each in a worker process "
        "(default: the machine's CPUs; the logs are the same for every K)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``rebalance-emu``."""
    parser = _Parser(
        prog="rebalance-emu",
        description=(
            "Emulate Kafka consumer-group coordination: the legacy ZooKeeper consumer "
            "against the broker-coordinated protocols."
        ),
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = sub.add_parser("run", help="run a scenario under one or more protocols")
    run.add_argument("scenario", help="a scenario file, or the name of a bundled one")
    run.add_argument(
        "--protocol",
        action="append",
        metavar="P",
        help=f"protocol to run, repeatable or comma-separated: "
        f"{', '.join(ALL_PROTOCOLS)}, all (the four consumer-group protocols; default zookeeper)",
    )
    run.add_argument(
        "--out",
        metavar="DIR|URL",
        help="run directory (default runs/<name>-<time>): a local path or a URL "
        "(s3://, gs://, hdfs://, file://) that every node writes its event logs to",
    )
    run.add_argument(
        "--zookeeper",
        metavar="CONNECT",
        help="use this ZooKeeper instead of starting an embedded one",
    )
    run.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="join this Ray cluster (auto, or host:port) instead of a local Ray",
    )
    run.add_argument(
        "--shared-storage",
        action="store_true",
        help="the local --out is the same shared directory on every Ray node: actors write "
        "there directly (without it, a multi-node run ships the logs to the driver at the end)",
    )
    run.add_argument(
        "--keep-zk-data",
        action="store_true",
        help="with --zookeeper: keep the run's znodes (by default each protocol's chroot "
        "/rebalance-emu/<run id>/<protocol> is deleted when it ends)",
    )
    run.add_argument(
        "--zk-auth",
        metavar="USER:PASSWORD",
        help="create every znode of the run with a ZooKeeper digest ACL for this identity "
        "only (or set $REBALANCE_EMU_ZK_AUTH, which keeps the password off the command line)",
    )
    run.add_argument("--force", action="store_true", help="write into a non-empty --out")
    _engine_options(run)
    run.add_argument(
        "--profile",
        metavar="NAME|FILE",
        help="with --engine sim: draw the schedule from this profile (baseline, explore, or a "
        "TOML file) and run the online invariant checks, stopping at the first violation "
        "(what explore does; its replay command uses this)",
    )
    run.set_defaults(func=cmd_run)
    sm = sub.add_parser(
        "submit",
        help="`run` as a Ray job (`ray job submit`), the project carried by the job's "
        "runtime_env (working_dir)",
    )
    sm.add_argument("scenario", help="a bundled scenario, or a file inside the working directory")
    sm.add_argument(
        "--out",
        metavar="DIR",
        required=True,
        help="run directory: an absolute path on the head, or a URL (as for run)",
    )
    sm.add_argument(
        "--address",
        metavar="URL",
        help="the Ray Jobs API, http://HEAD:8265 (default: $RAY_ADDRESS, else a local cluster)",
    )
    sm.add_argument(
        "--protocol", action="append", metavar="P", help="as for run (default zookeeper)"
    )
    sm.add_argument("--zookeeper", metavar="CONNECT", help="as for run")
    sm.add_argument("--shared-storage", action="store_true", help="as for run")
    sm.add_argument("--force", action="store_true", help="as for run")
    sm.add_argument(
        "--working-dir",
        metavar="DIR",
        help="the source tree to upload (default: the one this command runs from)",
    )
    sm.add_argument(
        "--pip",
        action="store_true",
        help="have Ray pip-install the run's dependencies on every node (for a cluster "
        "whose Python lacks them)",
    )
    sm.add_argument("--submission-id", metavar="ID", help="the job's id (default: Ray's)")
    sm.add_argument(
        "--no-wait", action="store_true", help="return once submitted (default: tail the logs)"
    )
    sm.add_argument(
        "--dry-run", action="store_true", help="print the `ray job submit` command only"
    )
    sm.set_defaults(func=cmd_submit)
    comp = sub.add_parser(
        "compare",
        help="check, measure and compare the protocols of run directories with Spark; "
        "writes report.md, report.html, metrics.json and plots/",
    )
    comp.add_argument(
        "run_dir", nargs="+", metavar="RUN_DIR", help="a run directory (a local path or a URL)"
    )
    comp.add_argument(
        "--spark-master",
        metavar="URL",
        help="Spark master URL (default local[*]), e.g. spark://host:7077",
    )
    comp.add_argument(
        "--out", metavar="DIR", help="report directory (default <first RUN_DIR>/report)"
    )
    comp.add_argument(
        "--allow-incomplete",
        action="store_true",
        help="exit 0 even when a protocol's evidence is incomplete (logs missing, "
        "damaged or cut short; the report says so either way)",
    )
    comp.add_argument(
        "--no-cache",
        action="store_true",
        help="read the msgpack logs through the Spark data source instead of the run's "
        "columnar cache (RUN_DIR/columnar-cache: Parquet written by the first compare, "
        "decoded again for any log whose checksum changed)",
    )
    comp.set_defaults(func=cmd_compare)
    ex = sub.add_parser(
        "experiment",
        help="run an experiment (scenarios x protocols x seeds x a grid of settings) as "
        "concurrent trials, resumable, then its report",
    )
    ex.add_argument("experiment", help="an EXPERIMENT.toml, or the name of a bundled one")
    ex.add_argument(
        "--out",
        metavar="DIR",
        help="experiment directory (default runs/<name>; running again resumes it)",
    )
    ex.add_argument("--seeds", type=int, metavar="N", help="N seeds instead of the file's")
    ex.add_argument(
        "--protocol", action="append", metavar="P", help="protocols instead of the file's"
    )
    ex.add_argument(
        "--parallel",
        type=int,
        metavar="N",
        help="at most N trials at once (default: what the cluster's CPUs hold at "
        "cpus_per_trial each); with --engine sim, 1 runs the trials one after another in "
        "this process, without Ray",
    )
    ex.add_argument("--ray-address", metavar="ADDR", help="as for run")
    ex.add_argument(
        "--engine",
        choices=("real", "sim"),
        default="real",
        help="the engine every trial runs on (as for run; sim trials take one CPU each, "
        "as Ray tasks, or in this process with --parallel 1)",
    )
    ex.add_argument(
        "--retry-failed", action="store_true", help="run failed and degraded trials again"
    )
    ex.add_argument("--no-report", action="store_true", help="run the trials only")
    ex.add_argument("--spark-master", metavar="URL", help="as for compare")
    ex.set_defaults(func=cmd_experiment)
    demo = sub.add_parser(
        "demo",
        help="run the bundled comparison scenario under every protocol, on an embedded "
        "ZooKeeper and a local Ray, then compare them with a local Spark",
    )
    demo.add_argument(
        "--scenario",
        default="generations",
        help="a bundled scenario name or a file (default generations)",
    )
    demo.add_argument("--out", metavar="DIR", help="run directory (default runs/demo-<time>)")
    _engine_options(demo)
    demo.set_defaults(func=cmd_demo)
    xp = sub.add_parser(
        "explore",
        help="run many seeds of a scenario on the sim engine, each a differently drawn "
        "schedule, with the online invariant checks; stop at the first violation and print "
        "how to replay it",
    )
    xp.add_argument("scenario", help="a scenario file, or the name of a bundled one")
    xp.add_argument("--seeds", type=int, default=100, metavar="N", help="seeds per protocol")
    xp.add_argument("--first-seed", type=int, default=1, metavar="S", help="the first seed")
    xp.add_argument(
        "--protocol",
        action="append",
        metavar="P",
        help=f"protocol to explore, repeatable or comma-separated: {', '.join(ALL_PROTOCOLS)}, "
        "all (default all)",
    )
    xp.add_argument(
        "--profile",
        default="explore",
        metavar="NAME|FILE",
        help="how schedules are drawn: explore (default), baseline, or a TOML file",
    )
    xp.add_argument(
        "--parallel",
        type=int,
        default=1,
        metavar="K",
        help="seeds at once; above 1 they run in batches in K worker processes on this "
        "machine, or as Ray tasks with --ray-address",
    )
    xp.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="with --parallel: run the batches as Ray tasks on this cluster (auto, host:port, "
        "or local for a local Ray)",
    )
    xp.add_argument(
        "--out", metavar="DIR", help="where findings go (default runs/explore-<name>-<time>)"
    )
    xp.add_argument(
        "--keep-going",
        action="store_true",
        help="run every seed even after a violation (the smallest violating seed is reported)",
    )
    xp.add_argument(
        "--shrink",
        action="store_true",
        help="after a violation, take the profile's freedoms away one at a time while the seed "
        "still violates the same way; write the smaller profile to DIR/shrunk-<protocol>.toml",
    )
    xp.set_defaults(func=cmd_explore)
    scen = sub.add_parser("scenarios", help="list the bundled scenarios")
    scen.set_defaults(func=cmd_scenarios)
    # ``zk``'s options belong to zk_registry.zk_cli, loaded only when the command runs.
    zk = sub.add_parser(
        "zk",
        add_help=False,
        help="start, stop or inspect a local ZooKeeper (standalone or ensemble): "
        "rebalance-emu zk --help",
    )
    zk.add_argument("zk_argv", nargs=argparse.REMAINDER)
    zk.set_defaults(func=lambda args: cmd_zk(["zk", *args.zk_argv]))
    return parser


def cmd_zk(argv: Sequence[str]) -> int:
    """``rebalance-emu zk ...``, handed whole to :mod:`zk_registry.zk_cli`.

    Its parser is the one source of the command's options; it is imported
    only now, so building ``rebalance-emu``'s parser loads no outer package.
    """
    zk_cli = importlib.import_module("zk_registry.zk_cli")
    code: int = zk_cli.main(list(argv))
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rebalance-emu`` console script.

    Whatever a command does not handle itself ends here as one line on stderr,
    with the traceback written to a file that the line names (exit 1); an
    interruption outside a run exits 128 + the signal's number.
    """
    given = list(sys.argv[1:] if argv is None else argv)
    if given[:1] == ["zk"]:
        return cmd_zk(given)  # its own options, --help included
    parser = build_parser()
    args = parser.parse_args(given)
    if argv is None and args.command in ("run", "demo", "compare", "experiment", "explore"):
        from emulator import reaper

        reaper.start()  # whatever this command starts dies with it (a SIGKILL too)
    try:
        code: int = args.func(args)
    except KeyboardInterrupt as exc:
        return _fail("interrupted", _exit_code(exc))
    except MemoryError:
        return _fail("out of memory (a size in the input is too large for this machine)")
    except Exception as exc:
        where = _write_traceback(exc)
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        return _fail(f"{type(exc).__name__}: {first} (traceback in {where})")
    return code


def _write_traceback(exc: BaseException) -> str:
    """Write ``exc``'s traceback to a fresh file under the temp directory; its path."""
    import tempfile
    import traceback

    d = Path(tempfile.gettempdir()) / "rebalance-emu-errors"
    path = d / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    try:
        d.mkdir(parents=True, exist_ok=True)
        path.write_text(
            f"rebalance-emu {' '.join(sys.argv[1:])}\n\n" + "".join(traceback.format_exception(exc))
        )
    except OSError:
        return "(could not be written)"
    return str(path)


if __name__ == "__main__":
    sys.exit(main())
