"""Published builds: an index build as an immutable artifact that replicas load by its id.

``kwiki ingest`` writes builds into the index root (``builds/<id>``, the served one named by ``current``) and keeps
the last few. Publishing copies one of them into a builds store (``KWIKI_BUILDS_DIR``; a local folder now, object
storage later: the layout is one prefix per build id and nothing else) as ``<store>/<id>/``:

- every file of the build, its ``manifest.json`` (which carries the id) included;
- the vector matrices also as ``.npy`` files beside their lancedb tables (:data:`MATRICES`), which a replica maps
  into memory read-only (``vectors.load_matrix``), so the processes serving one build on a host share those pages;
- ``CHECKSUMS.sha256`` (the format ``sha256sum -c`` reads) over all of them, written last (a reader's lock file,
  which tantivy creates on open, is no part of it).

It is written as ``<id>.partial``, made durable, renamed, and its files made read-only; nothing changes it after
that. A replica opens a published build by id only through :func:`open_published`, which checks every checksum
first: a build that differs by one byte is refused, never served.

    >>> published = publish(Path(".kwiki/index"), Path("/srv/kwiki/builds"))     # doctest: +SKIP
    >>> open_published(Path("/srv/kwiki/builds"), published.build_id)            # doctest: +SKIP
    PosixPath('/srv/kwiki/builds/20261202T041500123456-1a2b3c4d')
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from kwiki.errors import BuildDamaged, BuildNotFound

from . import vectors
from .manifest import MANIFEST, current_build, read_manifest

#: The checksum list of a published build: ``<sha256>  <path relative to the build>`` per file, sorted by path.
CHECKSUMS = "CHECKSUMS.sha256"
#: The ``.npy`` copies of the vector tables that publishing adds (``vectors/<table>.npy``), memory-mapped when served.
MATRICES = (vectors.TABLE, vectors.SENTENCES)
#: What a build id may look like: ``build_index`` makes ``20261202T041500123456-1a2b3c4d`` (UTC to the microsecond,
#: so ids sort by age); anything that could climb out of the store (``..``, ``/``) or name a half-written one
#: (``.partial``) is no id.
_BUILD_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")
_READ_CHUNK = 1 << 20
#: Lock files a reader creates beside the data it opens (tantivy's ``.tantivy-meta.lock`` whenever an index is
#: opened): empty, not part of the build, neither copied nor checked; the folders stay writable for them.
_LOCK_FILE = re.compile(r"^\..*\.lock$")


class Published(BaseModel):
    """What :func:`publish` did: the build's id, where it now is, its size, and whether it was there already."""

    build_id: str
    path: str
    files: int
    bytes: int
    already: bool = False


def check_build_id(build_id: str) -> str:
    """``build_id`` when it can name a build, else :class:`~kwiki.errors.BuildNotFound` (400-class input never
    reaches the file system)."""
    if not _BUILD_ID.match(build_id or ""):
        raise BuildNotFound(f"'{build_id[:200]}' is not a build id", hint="build ids look like 20261202T041500123456-1a2b3c4d "
                            "(`kwiki publish --list`, or `build_id` in /health)")
    return build_id


def published_builds(store: Path) -> list[str]:
    """The ids of the complete published builds in ``store``, oldest first (ids start with their UTC time)."""
    if not store.is_dir():
        return []
    return sorted(p.name for p in store.iterdir() if p.is_dir() and _BUILD_ID.match(p.name) and (p / CHECKSUMS).is_file())


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(_READ_CHUNK):
            h.update(block)
    return h.hexdigest()


def _files(folder: Path) -> list[Path]:
    """The files of a build that are its content: not the checksum list, not a reader's lock file."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != CHECKSUMS and not _LOCK_FILE.match(p.name))


def write_checksums(folder: Path) -> int:
    """Write ``CHECKSUMS.sha256`` over every file of ``folder``; returns the bytes covered."""
    lines, total = [], 0
    for f in _files(folder):
        lines.append(f"{_sha256(f)}  {f.relative_to(folder).as_posix()}\n")
        total += f.stat().st_size
    (folder / CHECKSUMS).write_text("".join(lines), encoding="utf-8")
    return total


def verify(folder: Path) -> None:
    """Check every file of a published build against its checksum list; :class:`~kwiki.errors.BuildDamaged` names
    the first file missing, changed or unlisted."""
    listing = folder / CHECKSUMS
    if not listing.is_file():
        raise BuildDamaged(f"published build {folder.name} has no {CHECKSUMS}", hint="publish it again with `kwiki publish`")
    listed: dict[str, str] = {}
    for line in listing.read_text(encoding="utf-8").splitlines():
        digest, _, name = line.partition("  ")
        listed[name] = digest
    present = {f.relative_to(folder).as_posix() for f in _files(folder)}
    for name in sorted(present - set(listed)):
        raise BuildDamaged(f"published build {folder.name} holds {name}, which its checksums do not list",
                           hint="a published build is never changed: publish the index build again under its own id")
    for name, digest in listed.items():
        path = folder / name
        if name not in present:
            raise BuildDamaged(f"published build {folder.name} lacks {name}", hint="publish it again with `kwiki publish`")
        if _sha256(path) != digest:
            raise BuildDamaged(f"published build {folder.name}: {name} does not match its checksum",
                               hint="the copy is damaged; publish it again, or roll back to another build")


def open_published(store: Path, build_id: str) -> Path:
    """The folder of published build ``build_id`` in ``store``, checked file by file (:func:`verify`) and by its
    manifest (the id it carries, the schema this kwiki reads)."""
    folder = Path(store) / check_build_id(build_id)
    if not (folder / CHECKSUMS).is_file():
        known = published_builds(Path(store))
        raise BuildNotFound(f"build {build_id} is not published in {store}",
                            hint=f"publish it with `kwiki publish --build {build_id}`"
                            + (f"; published: {', '.join(known[-3:])}" if known else "; nothing is published there yet"))
    verify(folder)
    manifest = read_manifest(folder)
    if manifest.build_id != build_id:
        raise BuildDamaged(f"published build {build_id} carries the manifest of build {manifest.build_id}",
                           hint="publish the build again; a folder is named after the manifest it holds")
    return folder


def _write_matrices(folder: Path) -> None:
    """The vector tables' matrices as ``vectors/<table>.npy``, in table order (what ``vectors.load_matrix`` maps)."""
    _, chunks = vectors.load_matrix(folder / "vectors")
    _, _, sentences, _ = vectors.load_sentences(folder / "vectors")
    for name, matrix in zip(MATRICES, (chunks, sentences)):
        np.save(folder / "vectors" / f"{name}.npy", np.ascontiguousarray(matrix, dtype=np.float32))


def publish(index_dir: Path, store: Path, build_id: str | None = None) -> Published:
    """Copy build ``build_id`` of the index root ``index_dir`` (default: the one ``current`` names) into ``store``
    as an immutable published build. Publishing a build already there checks it and changes nothing."""
    index_dir, store = Path(index_dir), Path(store)
    source = index_dir / "builds" / check_build_id(build_id) if build_id else current_build(index_dir)
    if build_id and not source.is_dir():
        kept = sorted(p.name for p in (index_dir / "builds").glob("*") if p.is_dir() and not p.name.endswith(".partial"))
        raise BuildNotFound(f"build {build_id} is not in {index_dir / 'builds'}",
                            hint=f"the index keeps its last builds: {', '.join(kept) or 'none'}" if kept else "run `kwiki ingest` first")
    manifest = read_manifest(source)  # IndexMissing / IndexIncompatible: nothing to publish
    final = store / manifest.build_id
    if (final / CHECKSUMS).is_file():
        verify(final)
        files = _files(final)
        return Published(build_id=manifest.build_id, path=str(final), files=len(files),
                         bytes=sum(f.stat().st_size for f in files), already=True)
    store.mkdir(parents=True, exist_ok=True)
    tmp = store / f"{manifest.build_id}.partial"
    shutil.rmtree(tmp, ignore_errors=True)  # left by a publish that was killed
    shutil.copytree(source, tmp, ignore=lambda _, names: [n for n in names if _LOCK_FILE.match(n)])
    _write_matrices(tmp)
    total = write_checksums(tmp)
    files = _files(tmp)
    for f in [*files, tmp / CHECKSUMS]:  # durable before it becomes visible; read-only once it is
        with open(f, "rb") as fh:
            os.fsync(fh.fileno())
        f.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    if final.exists():  # a folder without its checksum list: a half-copied build from outside publish
        shutil.rmtree(final)
    os.rename(tmp, final)
    fd = os.open(store, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return Published(build_id=manifest.build_id, path=str(final), files=len(files), bytes=total)


__all__ = ["CHECKSUMS", "MANIFEST", "MATRICES", "Published", "check_build_id", "open_published", "publish",
           "published_builds", "verify", "write_checksums"]
