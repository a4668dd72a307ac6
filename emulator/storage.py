"""Where a run's files live: a local directory, or any filesystem pyarrow knows.

A run location is a local path (``runs/x``, ``/shared/runs/x``) or a URL
(``file:///...``, ``s3://bucket/runs/x``, ``gs://...``, ``hdfs://...``;
S3 options such as ``?endpoint_override=host:port&scheme=http`` as
``pyarrow.fs.FileSystem.from_uri`` takes them). :func:`resolve` turns it into
a :class:`Location` (a pyarrow filesystem and the run directory's path in
it) whose helpers read and write the small files of a run (the manifest),
list its event logs (``<protocol>/events/*.msgpack``), open them, and upload
a local file into it (object stores cannot append, so an event log is
written on local disk and copied whole).

Every failure to reach or use the storage is a :class:`StorageError` with a
one-line message naming the location (never its query string, which may
hold credentials). The core imports no Ray; pyarrow is imported when a
location is resolved.
"""

from __future__ import annotations

import os
import re
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from emulator.eventlog import ReadStats, iter_event_stream
from emulator.events import Event
from emulator.logformat import stream_checksum

EVENTS_GLOB = "*/events/*.msgpack"
"""Where a run directory's event logs are, relative to it."""

UPLOAD_CHUNK = 8 * 1024 * 1024
"""Bytes per write when copying a file into a location."""

_URL_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


class StorageError(RuntimeError):
    """A run location that cannot be resolved, reached or used (one-line message)."""


def is_url(location: str | Path) -> bool:
    """True for ``scheme://...``; False for a plain local path."""
    return isinstance(location, str) and _URL_RE.match(location) is not None


def default_spool_root() -> Path:
    """This machine's spool directory for event logs on their way elsewhere."""
    return Path(tempfile.gettempdir()) / "rebalance-emu-spool"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@dataclass(frozen=True)
class Location:
    """A run directory on some filesystem.

    Attributes:
        uri: the location as given (a local path is made absolute).
        scheme: ``""`` for a plain local path, else the URL's scheme.
        fs: the ``pyarrow.fs.FileSystem``.
        root: the run directory's path inside ``fs`` (no trailing ``/``).
    """

    uri: str
    scheme: str
    fs: Any
    root: str

    # --------------------------------------------------------------- names

    @property
    def is_url(self) -> bool:
        """True when the location was given as a URL (even ``file://``)."""
        return self.scheme != ""

    @property
    def local_path(self) -> Path | None:
        """The directory on this machine's filesystem, or None for remote storage."""
        import pyarrow.fs as pafs

        return Path(self.root) if isinstance(self.fs, pafs.LocalFileSystem) else None

    def path(self, rel: str = "") -> str:
        """The filesystem path of ``rel`` (``/``-separated) under the run directory."""
        rel = rel.strip("/")
        if not rel:
            return self.root
        return f"{self.root}/{rel}" if self.root else rel

    def display(self, rel: str = "") -> str:
        """A name for messages: the local path, or ``scheme://path`` without the query."""
        p = self.path(rel)
        if not self.scheme:
            return p
        if self.scheme == "file":
            return f"file://{p}"
        return f"{self.scheme}://{p}"

    def child_uri(self, rel: str) -> str:
        """The URI of ``rel`` under this location, keeping the URL's query (its options)."""
        rel = rel.strip("/")
        if not self.scheme:
            return str(Path(self.root) / rel) if rel else self.root
        parts = urlsplit(self.uri)
        path = parts.path.rstrip("/") + "/" + rel if rel else parts.path
        return urlunsplit((parts.scheme, parts.netloc, path, parts.query, parts.fragment))

    def child(self, rel: str) -> Location:
        """The location of ``rel`` under this one (same filesystem)."""
        return Location(self.child_uri(rel), self.scheme, self.fs, self.path(rel))

    def _error(self, what: str, rel: str, exc: BaseException) -> StorageError:
        return StorageError(f"{self.display(rel)}: {what}: {_first_line(exc)}")

    # -------------------------------------------------------------- queries

    def _info(self, rel: str) -> Any:
        try:
            return self.fs.get_file_info(self.path(rel))
        except Exception as exc:
            raise self._error("cannot reach storage", rel, exc) from None

    def exists(self, rel: str = "") -> bool:
        """True when ``rel`` (a file or a directory) exists."""
        import pyarrow.fs as pafs

        return bool(self._info(rel).type != pafs.FileType.NotFound)

    def is_file(self, rel: str) -> bool:
        """True when ``rel`` is a file."""
        import pyarrow.fs as pafs

        return bool(self._info(rel).type == pafs.FileType.File)

    def is_dir(self, rel: str = "") -> bool:
        """True when ``rel`` is a directory (on an object store: a prefix with objects)."""
        import pyarrow.fs as pafs

        return bool(self._info(rel).type == pafs.FileType.Directory)

    def size(self, rel: str) -> int:
        """The size in bytes of file ``rel``."""
        info = self._info(rel)
        if info.size is None:
            raise StorageError(f"{self.display(rel)}: no such file")
        return int(info.size)

    def list_files(self, rel_dir: str = "", suffix: str = "", recursive: bool = False) -> list[str]:
        """Files under ``rel_dir`` ending in ``suffix``, as paths relative to this location.

        A missing directory lists nothing.
        """
        import pyarrow.fs as pafs

        sel = pafs.FileSelector(self.path(rel_dir), allow_not_found=True, recursive=recursive)
        try:
            infos = self.fs.get_file_info(sel)
        except Exception as exc:
            raise self._error("cannot reach storage", rel_dir, exc) from None
        prefix = self.root + "/" if self.root else ""
        out = []
        for info in infos:
            if info.type != pafs.FileType.File or not info.path.endswith(suffix):
                continue
            p = str(info.path)
            out.append(p[len(prefix) :] if p.startswith(prefix) else p)
        return sorted(out)

    def event_logs(self, protocols: Sequence[str] | None = None) -> list[str]:
        """The run's event logs (``<protocol>/events/*.msgpack``), relative and sorted."""
        if protocols:
            return [f for p in protocols for f in self.list_files(f"{p}/events", ".msgpack")]
        out = []
        for f in self.list_files("", ".msgpack", recursive=True):
            parts = f.split("/")
            if len(parts) == 3 and parts[1] == "events":
                out.append(f)
        return out

    # ------------------------------------------------------- reads, writes

    def open_input(self, rel: str) -> Any:
        """A random-access binary file for ``rel`` (``read``, ``seek``, ``tell``, ``size``)."""
        try:
            return self.fs.open_input_file(self.path(rel))
        except FileNotFoundError:
            raise StorageError(f"{self.display(rel)}: no such file") from None
        except Exception as exc:
            raise self._error("cannot read", rel, exc) from None

    def read_bytes(self, rel: str) -> bytes:
        """The whole content of file ``rel``."""
        with self.open_input(rel) as f:
            try:
                return bytes(f.read())
            except Exception as exc:
                raise self._error("cannot read", rel, exc) from None

    def checksum(self, rel: str) -> tuple[int, str]:
        """File ``rel``'s size and CRC32C (hex), streamed in bounded memory."""
        with self.open_input(rel) as f:
            try:
                return stream_checksum(f)
            except Exception as exc:
                raise self._error("cannot read", rel, exc) from None

    def read_text(self, rel: str) -> str:
        """The whole content of file ``rel``, UTF-8."""
        return self.read_bytes(rel).decode("utf-8")

    def makedirs(self, rel: str = "") -> None:
        """Create directory ``rel`` and its parents (a no-op on object stores)."""
        try:
            self.fs.create_dir(self.path(rel), recursive=True)
        except Exception as exc:
            raise self._error("cannot create directory", rel, exc) from None

    def write_bytes(self, rel: str, data: bytes) -> None:
        """Write file ``rel`` whole: a reader sees the old content or the new, never half.

        Local files are written beside and renamed; an object store's PUT is atomic.
        """
        parent = rel.rsplit("/", 1)[0] if "/" in rel.strip("/") else ""
        self.makedirs(parent)
        local = self.local_path
        target = self.path(rel)
        try:
            if local is not None:
                tmp = f"{target}.{uuid.uuid4().hex[:8]}.tmp"
                with open(tmp, "wb") as f:
                    f.write(data)
                os.replace(tmp, target)
            else:
                with self.fs.open_output_stream(target) as out:
                    out.write(data)
        except Exception as exc:
            raise self._error("cannot write", rel, exc) from None

    def write_text(self, rel: str, text: str) -> None:
        """Write file ``rel`` whole, UTF-8 (see :meth:`write_bytes`)."""
        self.write_bytes(rel, text.encode("utf-8"))

    def upload(self, local_file: str | Path, rel: str) -> int:
        """Copy a local file to ``rel`` under this location; the bytes copied.

        Written in chunks to a temporary name and renamed on a local
        filesystem, streamed to one object on an object store: a reader never
        sees a partial file.
        """
        parent = rel.rsplit("/", 1)[0] if "/" in rel.strip("/") else ""
        self.makedirs(parent)
        target = self.path(rel)
        local = self.local_path
        dest = f"{target}.{uuid.uuid4().hex[:8]}.tmp" if local is not None else target
        copied = 0
        try:
            with open(local_file, "rb") as src, self.fs.open_output_stream(dest) as out:
                while chunk := src.read(UPLOAD_CHUNK):
                    out.write(chunk)
                    copied += len(chunk)
            if local is not None:
                os.replace(dest, target)
        except FileNotFoundError as exc:
            if not Path(local_file).exists():
                raise StorageError(f"{local_file}: no such file to upload") from None
            raise self._error("cannot write", rel, exc) from None
        except Exception as exc:
            raise self._error("cannot write", rel, exc) from None
        return copied

    def delete(self, rel: str) -> None:
        """Delete file ``rel`` (missing is fine)."""
        try:
            self.fs.delete_file(self.path(rel))
        except FileNotFoundError:
            return
        except Exception as exc:
            raise self._error("cannot delete", rel, exc) from None

    def iter_events(self, rel: str, stats: ReadStats | None = None) -> Iterator[Event]:
        """The complete events of log file ``rel`` (see :func:`emulator.eventlog.iter_events`)."""
        size = self.size(rel)
        with self.open_input(rel) as f:
            yield from iter_event_stream(f, self.display(rel), size, stats)

    def read_events(self, rel_dir: str, stats: ReadStats | None = None) -> Iterator[Event]:
        """The events of every ``*.msgpack`` file directly in ``rel_dir``, file by file."""
        for rel in self.list_files(rel_dir, ".msgpack"):
            yield from self.iter_events(rel, stats)


def resolve(location: str | Path) -> Location:
    """The :class:`Location` of a local path or a URL (not checked for reachability).

    Raises:
        StorageError: an unsupported scheme, a malformed URL, or a filesystem
            whose client library is missing (``hdfs://`` without libhdfs).
    """
    text = str(location)
    if not text:
        raise StorageError("empty run location")
    import pyarrow.fs as pafs

    if not is_url(text):
        root = os.path.abspath(os.path.expanduser(text))
        return Location(root, "", pafs.LocalFileSystem(), root.rstrip("/") or "/")
    scheme = text.split("://", 1)[0].lower()
    shown = f"{scheme}://{urlsplit(text).netloc.rpartition('@')[2]}{urlsplit(text).path}"
    try:
        fs, path = pafs.FileSystem.from_uri(text)
    except Exception as exc:
        why = _first_line(exc)
        if "Unrecognized filesystem type" in why:
            why = f"unsupported storage scheme {scheme!r} (local paths, file://, s3://, gs://, hdfs://)"
        raise StorageError(f"{shown}: cannot reach storage: {why}") from None
    return Location(text, scheme, fs, str(path).rstrip("/"))


def check_reachable(loc: Location) -> None:
    """Raise :class:`StorageError` unless the location's storage answers (one request)."""
    loc.exists()
