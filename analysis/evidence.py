"""Is a run's evidence complete? The event logs read against what the manifest says.

A comparison is only as good as its logs. Before any verdict, :func:`assess`
checks, per protocol:

* how the run ended (the manifest's status: ``completed``, or cut short:
  ``interrupted``, ``failed``, never finished, ``degraded`` by a host or
  broker lost without the timeline asking);
* the set of logs against the manifest's list (``event_storage``): a log
  missing, of another size or checksum than when the run closed it, or not
  listed at all;
* each log's own walk (:mod:`emulator.logformat`): empty, damaged (corrupt
  blocks, stray bytes: path and byte offset), cut short at its end, or not
  closed by its actor (an actor the timeline killed is expected to leave its
  log unclosed).

A protocol with any problem has **incomplete evidence**: the report says which
of its numbers are affected and how, and its anomalies are listed without a
verdict (``allowed`` is left empty, never *not allowed*). Pure Python: no Spark.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from emulator.logformat import FRAMED_VERSION, UNFRAMED_VERSION, FileReport, walk

COMPLETE: Final = "complete"
INCOMPLETE: Final = "incomplete evidence"


def affects(actor: str) -> str:
    """What a log's absence or damage does to the numbers, from the actor that wrote it."""
    if actor.startswith("producer"):
        return "what was produced is undercounted (loss understated)"
    if actor.startswith("host"):
        return (
            "what its members processed and committed is missing "
            "(loss overstated, duplicates and ownership windows understated)"
        )
    if actor.startswith("broker"):
        return "coordinator and replication events are missing"
    if actor == "orchestrator":
        return "the timeline and the run's commit settings are missing"
    return "its events are missing"


@dataclass
class Evidence:
    """One protocol's evidence: complete, or the problems that make it incomplete.

    Attributes:
        protocol: the protocol.
        problems: one line each; any problem makes the evidence incomplete.
        notes: what is worth knowing and changes no number (e.g. schema-1
            logs, which carry no checksums).
    """

    protocol: str
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """No problem found."""
        return not self.problems

    @property
    def verdict(self) -> str:
        """``complete`` or ``incomplete evidence``."""
        return COMPLETE if self.complete else INCOMPLETE

    def to_dict(self) -> dict[str, Any]:
        """For ``metrics.json``."""
        return {"verdict": self.verdict, "problems": self.problems, "notes": self.notes}


def _split(rel: str) -> tuple[str, str]:
    """``(protocol, actor)`` of a log path relative to the run (``<p>/events/<a>.msgpack``)."""
    parts = rel.replace("\\", "/").split("/")
    actor = parts[-1].removesuffix(".msgpack")
    protocol = parts[-3] if len(parts) >= 3 and parts[-2] == "events" else ""
    return protocol, actor


def _run_end(manifest: Mapping[str, Any], protocol: str) -> str | None:
    """Why a protocol's run did not end normally, or ``None``."""
    top = str(manifest.get("status", ""))
    entry = (manifest.get("protocols") or {}).get(protocol)
    if not isinstance(entry, Mapping):
        if top == "running":
            return "the run never finished (its manifest still says running: the CLI was killed)"
        return f"the manifest does not record how this protocol's run ended (run {top or '?'})"
    status = str(entry.get("status") or top)
    if status in ("completed", "degraded"):
        return None
    if status == "interrupted":
        return "the run was interrupted: its logs stop where it was stopped"
    if status == "stopped":
        return (
            "the sim engine stopped the run at its first invariant violation "
            "(manifest engine.checks): its logs stop there"
        )
    return f"the protocol's run ended {status or 'without a status'}"


def assess(
    manifest: Mapping[str, Any], files: Sequence[tuple[str, FileReport]]
) -> dict[str, Evidence]:
    """The evidence of each protocol with logs, or with logs the manifest lists.

    Args:
        manifest: the run's ``manifest.json``.
        files: ``(path relative to the run directory, walk report)`` of every
            log read.
    """
    by_proto: dict[str, dict[str, FileReport]] = {}
    for rel, rep in files:
        proto, actor = _split(rel)
        by_proto.setdefault(proto, {})[actor] = rep
    storage = (manifest.get("event_storage") or {}).get("protocols") or {}
    out: dict[str, Evidence] = {}
    for proto in sorted({*by_proto, *storage} - {""}):
        ev = Evidence(proto)
        out[proto] = ev
        present = by_proto.get(proto, {})
        entry = (manifest.get("protocols") or {}).get(proto) or {}
        why = _run_end(manifest, proto)
        if why is not None:
            ev.problems.append(why)
        for h in entry.get("lost_hosts") or []:
            ev.problems.append(
                f"consumer host {h} was lost without the timeline asking: its members died "
                f"with it ({affects('host')})"
            )
        for b in entry.get("lost_brokers") or []:
            ev.problems.append(f"broker {b} was lost without the timeline asking")
        killed = set(entry.get("killed_actors") or [])
        listed = (storage.get(proto) or {}).get("logs") or {}
        for actor, why_missing in sorted(((storage.get(proto) or {}).get("missing") or {}).items()):
            reason = why_missing.get("reason") if isinstance(why_missing, Mapping) else why_missing
            ev.problems.append(
                f"log {actor} never reached the run directory ({reason}): {affects(actor)}"
            )
        for actor, info in sorted(listed.items()):
            found = present.get(actor)
            want = int(info.get("bytes", -1)) if isinstance(info, Mapping) else -1
            if found is None:
                ev.problems.append(
                    f"log {actor} is missing (the manifest lists {want:,} bytes): {affects(actor)}"
                )
                continue
            if want >= 0 and found.size != want:
                ev.problems.append(
                    f"log {actor} is {found.size:,} bytes, the manifest lists {want:,}: "
                    f"changed after the run"
                )
            elif (
                isinstance(info, Mapping)
                and info.get("crc32c")
                and found.checksum
                and str(info["crc32c"]) != found.checksum
            ):
                ev.problems.append(
                    f"log {actor} changed after the run (CRC32C {found.checksum}, "
                    f"the manifest lists {info['crc32c']})"
                )
        if listed:
            for actor in sorted(set(present) - set(listed)):
                ev.problems.append(f"log {actor} is not listed in the manifest")
        for actor, rep in sorted(present.items()):
            _file_problems(ev, actor, rep, actor in killed)
    return out


def _file_problems(ev: Evidence, actor: str, rep: FileReport, killed: bool) -> None:
    if rep.size == 0:
        ev.problems.append(f"log {actor} is empty: {affects(actor)}")
        return
    for d in rep.damage:
        lost = f", {d.records:,} events" if d.records is not None else ""
        ev.problems.append(
            f"log {actor} is damaged at byte {d.offset:,}: {d.what} "
            f"({d.length:,} bytes{lost} skipped): {affects(actor)}"
        )
    if rep.truncated_tail_bytes:
        ev.problems.append(
            f"log {actor} is cut short: its last {rep.truncated_tail_bytes:,} bytes "
            f"are an unfinished write"
        )
    if rep.version == FRAMED_VERSION and rep.closed is False:
        if killed:
            ev.notes.append(f"log {actor} ends unclosed: the timeline killed its actor")
        elif not rep.damage and not rep.truncated_tail_bytes:
            ev.problems.append(
                f"log {actor} was not closed by its actor (it died or the run was stopped): "
                f"its last events may be missing"
            )
    if rep.version == UNFRAMED_VERSION:
        note = "schema-1 logs carry no checksums: damage inside a record cannot be detected"
        if note not in ev.notes:
            ev.notes.append(note)


def assess_run_dir(run_dir: str | Path) -> dict[str, Evidence]:
    """:func:`assess` of a local run directory: its manifest and every log walked (no Spark).

    Raises:
        ValueError: no readable ``manifest.json``.
    """
    root = Path(run_dir)
    try:
        manifest = json.loads((root / "manifest.json").read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{root / 'manifest.json'}: {exc}") from None
    files: list[tuple[str, FileReport]] = []
    for path in sorted(root.glob("*/events/*.msgpack")):
        rep = FileReport(str(path))
        with open(path, "rb") as f:
            for _ in walk(f, str(path), os.fstat(f.fileno()).st_size, rep, keep_payload=False):
                pass
        files.append((str(path.relative_to(root)), rep))
    return assess(manifest, files)
