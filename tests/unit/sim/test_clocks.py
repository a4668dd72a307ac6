"""``VirtualClocks`` and ``SIM_EPOCH``; the package's name and engine version."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from emulator.sim import ENGINE_NAME, engine_version, source_digest
from emulator.sim.clocks import SIM_EPOCH, SIM_EPOCH_MS, VirtualClocks
from emulator.sim.loop import SimEventLoop


def test_sim_epoch_is_the_start_of_2026() -> None:
    assert datetime.fromtimestamp(SIM_EPOCH, UTC) == datetime(2026, 1, 1, tzinfo=UTC)
    assert int(SIM_EPOCH) * 1000 == SIM_EPOCH_MS


def test_the_clocks_follow_the_loop() -> None:
    loop = SimEventLoop()
    try:
        clocks = VirtualClocks(loop)
        mono, wall = clocks.mono, clocks.wall  # plain callables, as ScaledClock takes them
        assert (mono(), wall(), clocks.wall_ms()) == (0.0, SIM_EPOCH, SIM_EPOCH_MS)
        seen: list[tuple[float, float, int]] = []
        loop.call_later(12.3456789, lambda: seen.append((mono(), wall(), clocks.wall_ms())))
        loop.run_until(100)
        assert seen == [(12.3456789, SIM_EPOCH + 12.3456789, SIM_EPOCH_MS + 12_345)]
        assert mono() == 100.0 and wall() == SIM_EPOCH + 100.0
    finally:
        loop.close()


def test_engine_name_and_version() -> None:
    assert ENGINE_NAME == "sim"
    version = engine_version()
    assert re.fullmatch(r"[0-9][^+]*\+[0-9a-f]{16}", version), version
    assert version.endswith("+" + source_digest()[:16])
    assert engine_version() is version  # computed once


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_source_digest_covers_the_three_packages(tmp_path: Path) -> None:
    base = {
        "emulator/a.py": "A = 1\n",
        "zk_registry/b.py": "B = 2\n",
        "actors/sub/c.py": "C = 3\n",
    }
    d0 = source_digest(_tree(tmp_path / "t0", base))
    assert d0 == source_digest(_tree(tmp_path / "t1", dict(reversed(base.items()))))
    for rel in base:
        changed = {**base, rel: base[rel] + "# edit\n"}
        assert source_digest(_tree(tmp_path / f"e{len(rel)}{rel[0]}", changed)) != d0
    # Other packages, other file types and moved code count as they should.
    ignored = {**base, "analysis/x.py": "X = 4\n", "emulator/notes.txt": "n"}
    assert source_digest(_tree(tmp_path / "ign", ignored)) == d0
    moved = {**base, "emulator/a.py": "", "emulator/a2.py": "A = 1\n"}
    assert source_digest(_tree(tmp_path / "mv", moved)) != d0


def test_the_real_digest_reads_the_repository() -> None:
    root = Path(__file__).resolve().parents[3]
    assert source_digest() == source_digest(root)
    assert (root / "emulator" / "sim" / "loop.py").is_file()
