"""analysis.spark_archive without a JVM: which archive belongs to which JVM and jars,
and when one is offered to Spark's driver."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis import spark_archive as sa

IDENT = sa.Identity(Path("/jvm/bin/java"), "/jvm/lib/server/libjvm.so:10:20", "4.3.0", Path("/j"))


def _built(directory: Path, size: int = 64, recorded: int | None = None) -> Path:
    """An archive of this machine's identity in ``directory`` with its sidecar."""
    ident = sa.identity()
    assert ident is not None
    archive = sa.archive_path(ident, directory)
    archive.parent.mkdir(parents=True, exist_ok=True)
    archive.write_bytes(b"x" * size)
    archive.with_suffix(".json").write_text(json.dumps({"size": recorded or size}))
    return archive


def test_the_archive_s_name_changes_with_the_jvm_build_and_the_jars() -> None:
    others = [
        sa.Identity(IDENT.java, "/jvm/lib/server/libjvm.so:10:21", "4.3.0", Path("/j")),
        sa.Identity(IDENT.java, IDENT.libjvm, "4.3.1", Path("/j")),
        sa.Identity(IDENT.java, IDENT.libjvm, "4.3.0", Path("/k")),
    ]
    names = {sa.archive_path(i, Path("/d")).name for i in [IDENT, *others]}
    assert len(names) == 4
    assert sa.archive_path(IDENT, Path("/d")) == sa.archive_path(IDENT, Path("/d"))


def test_a_whole_archive_is_offered_to_the_driver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(sa.ENV_SWITCH, raising=False)
    assert sa.java_options(tmp_path) is None  # none built
    archive = _built(tmp_path)
    opts = sa.java_options(tmp_path)
    assert opts is not None and opts.split()[0] == f"-XX:SharedArchiveFile={archive}"
    for off in ("off", "0", "false", "NO"):
        monkeypatch.setenv(sa.ENV_SWITCH, off)
        assert sa.java_options(tmp_path) is None
    monkeypatch.setenv(sa.ENV_SWITCH, "on")
    assert sa.java_options(tmp_path) == opts


def test_a_cut_short_or_unrecorded_archive_is_not_offered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A truncated archive crashes the JVM that maps it: its size must be the recorded one."""
    monkeypatch.delenv(sa.ENV_SWITCH, raising=False)
    archive = _built(tmp_path, size=64, recorded=128)
    assert not sa.usable(archive) and sa.java_options(tmp_path) is None
    archive.with_suffix(".json").write_text("{not json")
    assert not sa.usable(archive)
    archive.with_suffix(".json").unlink()
    assert not sa.usable(archive)


def test_without_java_nothing_is_offered_or_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    assert sa.java_binary() is None and sa.identity() is None
    assert sa.java_options(tmp_path) is None
    assert sa.build(tmp_path) is None
    assert sa.main(["--dir", str(tmp_path)]) == 1
    assert not list(tmp_path.iterdir())  # nothing written
