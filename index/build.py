"""Build an index atomically: every build goes to a new folder, switched in by renaming a link.

A build killed at any point leaves ``current`` pointing at the previous build; a lock file
stops two builds from running at once::

    >>> from kwiki.index.build import build_index
    >>> result = build_index(Path(".kwiki/index"), [corpus_root("corpus")])   # doctest: +SKIP
    >>> result.manifest.counts["pages"]                                       # doctest: +SKIP
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import hashlib
import json
import os
import shutil
import time
import uuid
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Iterator

from kwiki import __version__
from kwiki.errors import BadRequest, BuildLocked, CorpusNotFound, EmptyBuild
from kwiki.ingest import chunking, corpus
from kwiki.ingest.corpus import (
    LAYOUT_FOLDERS,
    CorpusReader,
    CorpusRoot,
    chunk_page,
    missing_roots,
    root_problems,
    shown_path,
    walk_tree,
)
from kwiki.ingest.models import Chunk, IngestReport, Page, PageSource, Problem
from kwiki.settings import ANN_MIN_ROWS, EMBED_THREADS, MAX_PAGE_BYTES

from . import bm25, vectors
from . import manifest as manifest_mod
from . import writer as writer_mod
from .manifest import CURRENT, Manifest, current_build, read_manifest
from .writer import _NOT_FOR_MODEL, BuildWriter, Progress

BUILDS = "builds"
KEEP_BUILDS = 3

@dataclass
class BuildResult:
    path: Path
    manifest: Manifest
    report: IngestReport
    unchanged: bool = False  # True when skip_unchanged found nothing to rebuild
    #: Roots that gave nothing (a folder without the KernelWiki layout), found on every run, unchanged or not.
    skipped_roots: list[Problem] = field(default_factory=list)


def build_fingerprint(max_page_bytes: int, extra: dict[str, str] | None = None, model: str | None = None,
                      ann_min_rows: int = ANN_MIN_ROWS) -> dict[str, str]:
    """Everything besides the corpus files that decides what a build contains, as named strings.

    It is stored in ``manifest.json`` and hashed into :func:`source_hash`, so a change to any of these
    rebuilds on the next ``kwiki ingest`` instead of answering "index is up to date" over a stale index.
    ``model`` is the id of the model that embeds (``vectors.model_id``: the base model and any adapter folded
    into it; the base model when None). ``extra`` adds a caller's own inputs (a ranking-relevant build
    parameter); its keys may not shadow the built-in ones.

    >>> fp = build_fingerprint(1024, {"adapter": "none"})
    >>> fp["max_page_bytes"], fp["adapter"], fp["sentence_types"].startswith("hardware,")
    ('1024', 'none', True)
    """
    fp = {
        "kwiki_version": __version__,
        "schema_version": str(manifest_mod.SCHEMA_VERSION),
        "chunker_version": chunking.CHUNKER_VERSION,
        "model": f"{model or vectors.model_id(None)} dim={vectors.DIM} max_tokens={vectors.MAX_TOKENS}",
        "embed_version": str(vectors.EMBED_VERSION),
        "embed_filter": hashlib.sha256(_NOT_FOR_MODEL.pattern.encode()).hexdigest()[:16],
        "sentence_types": ",".join(sorted(chunking.SENTENCE_TYPES)),
        "sentence_min_words": str(chunking.SENTENCE_MIN_WORDS),
        "questions": f"max={corpus.MAX_QUESTIONS} chars={corpus.MAX_QUESTION_CHARS}",
        "bm25_layout": bm25.layout(),
        "max_page_bytes": str(max_page_bytes),
        "ann": f"{vectors.ANN_INDEX} from {ann_min_rows} rows, sqrt(rows) partitions",
    }
    shadowed = sorted(set(extra or {}) & set(fp))
    if shadowed:
        raise BadRequest(f"fingerprint_extra may not redefine {shadowed}", hint="give your inputs their own names")
    return fp | {str(k): str(v) for k, v in (extra or {}).items()}


def fingerprint_hash(fingerprint: dict[str, str]) -> str:
    """The fingerprint as one stable hash (key order does not matter)."""
    return hashlib.sha256(json.dumps(fingerprint, sort_keys=True).encode()).hexdigest()


def source_hash(roots: list[CorpusRoot], extra: str = "") -> str:
    """A fast hash of every file an ingest would read (names and bytes), without parsing anything; ``extra``
    carries the build fingerprint's hash and the pages given beside the corpora."""
    h = hashlib.sha256(f"{extra}\n".encode())
    for root in roots:
        base = Path(root.root)
        for top in ("sources", "wiki", "artifacts", "data"):
            folder = base / top
            if not folder.is_dir():
                continue
            skipped: list[str] = []  # bad names and too-deep folders count in the hash by their printable name
            for dirpath, dirnames, filenames in walk_tree(folder, lambda p, why: skipped.append(shown_path(p))):
                for name in filenames:
                    path = Path(dirpath) / name
                    try:
                        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "-"
                    except OSError:
                        digest = "unreadable"
                    h.update(f"{root.name}\0{path.relative_to(base)}\0{digest}\n".encode())
            h.update("\0".join(skipped).encode())
    return h.hexdigest()


class BuildLock:
    """An exclusive ``flock`` on ``<index_dir>/.build.lock``; the kernel drops it if the process dies."""

    def __init__(self, index_dir: Path) -> None:
        self.path = index_dir / ".build.lock"
        self.fd: int | None = None

    def __enter__(self) -> "BuildLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise BuildLocked(
                f"another build of {self.path.parent} is running (pid {holder})",
                hint="wait for it to finish; the lock is released when that process exits",
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self.fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


def _switch(index_dir: Path, build_name: str) -> None:
    tmp_link = index_dir / f".{CURRENT}.{uuid.uuid4().hex}"
    os.symlink(Path(BUILDS) / build_name, tmp_link)
    os.replace(tmp_link, index_dir / CURRENT)  # atomic on POSIX


def _collect_garbage(index_dir: Path, keep: str) -> None:
    builds = index_dir / BUILDS
    finished = sorted((p for p in builds.iterdir() if p.is_dir() and not p.name.endswith(".partial")), key=lambda p: p.name)
    for old in finished[:-KEEP_BUILDS]:
        if old.name != keep:
            shutil.rmtree(old, ignore_errors=True)
    for partial in builds.glob("*.partial"):  # left by a killed build; we hold the lock, so none is live
        shutil.rmtree(partial, ignore_errors=True)


def _source_pages(reader: CorpusReader, sources: list[PageSource]) -> Iterator[tuple[Page, list[Chunk]]]:
    """The pages of sources outside the corpora (after the corpora's), with their chunks; a key already taken is
    reported and skipped."""
    for source in sources:
        reader.report.corpora.setdefault(source.name, source.origin)
        for page in source.pages:
            if page.key in reader.keys:
                reader.report.duplicates.append(Problem(corpus=page.corpus, path=page.path,
                                                        reason=f"duplicate id '{page.key}'; skipped"))
                continue
            reader.keys.add(page.key)
            chunks = chunk_page(page)
            reader.count(page, len(chunks))
            yield page, chunks


def _batches(pages: Iterator[tuple[Page, list[Chunk]]]) -> Iterator[list[tuple[Page, list[Chunk]]]]:
    """Consecutive batches of :data:`writer.BATCH_PAGES` pages (read from the module: tests shrink it)."""
    batch: list[tuple[Page, list[Chunk]]] = []
    for item in pages:
        batch.append(item)
        if len(batch) >= writer_mod.BATCH_PAGES:
            yield batch
            batch = []
    if batch:
        yield batch


def _serving_manifest(index_dir: Path) -> Manifest | None:
    try:
        return read_manifest(current_build(index_dir))
    except Exception:  # noqa: BLE001 - no usable serving index means: build
        return None


def build_index(
    index_dir: Path,
    roots: list[CorpusRoot],
    *,
    embedder: vectors.Embedder | None = None,
    threads: int = EMBED_THREADS,
    max_page_bytes: int = MAX_PAGE_BYTES,
    progress: Progress | None = None,
    cache_dir: Path | None = None,
    page_sources: list[PageSource] | None = None,
    skip_unchanged: bool = False,
    fingerprint_extra: dict[str, str] | None = None,
    adapter: str | None = None,
    ann_min_rows: int | None = None,
) -> BuildResult:
    """Ingest ``roots`` and build a new index under ``index_dir``, then switch ``current`` to it.

    With ``skip_unchanged``, a corpus whose files hash the same as the serving build's is not rebuilt
    (``BuildResult.unchanged``): re-running ``kwiki ingest`` on an unchanged corpus costs a file hash.

    ``page_sources`` (pages made outside a corpus folder, e.g. ``kwiki.ledger.ledger_source``) are indexed
    with the corpus pages. ``fingerprint_extra`` adds the caller's own build inputs to the
    fingerprint (:func:`build_fingerprint`): a change to any of them rebuilds.

    A vector table of at least ``ann_min_rows`` rows (default: the settings', ``KWIKI_ANN_MIN_ROWS``) also gets an
    approximate index (:func:`ann_indexes`), recorded in the manifest's ``ann``; search uses it.
    """
    started = time.monotonic()
    index_dir = Path(index_dir)
    missing = missing_roots(roots)
    if missing:  # before the lock, the folders, the hash: a typo builds nothing
        raise CorpusNotFound(
            f"no corpus folder at {', '.join(str(r.root) for r in missing)}",
            hint=f"give a folder in the KernelWiki layout ({', '.join(f'{t}/' for t in LAYOUT_FOLDERS)}), e.g. --corpus "
                 "corpus or a KernelWiki checkout; without --corpus kwiki ingest reads $KWIKI_CORPORA (corpus/)")
    skipped_roots = root_problems(roots)
    with BuildLock(index_dir):
        (index_dir / BUILDS).mkdir(parents=True, exist_ok=True)
        _collect_garbage(index_dir, keep=current_build(index_dir).name)
        model = embedder.model_id if embedder is not None else vectors.model_id(adapter)
        if ann_min_rows is None:
            from kwiki.settings import load_settings

            ann_min_rows = load_settings().ann_min_rows
        fingerprint = build_fingerprint(max_page_bytes, fingerprint_extra, model, ann_min_rows)
        extra = hashlib.sha256(b"".join(s.model_dump_json().encode() for s in page_sources or [])).hexdigest()
        quick = source_hash(roots, f"{fingerprint_hash(fingerprint)}\0{extra}")
        if skip_unchanged:
            serving = _serving_manifest(index_dir)
            if serving is not None and serving.source_hash == quick:
                report = IngestReport.model_validate_json((current_build(index_dir) / "report.json").read_text())
                return BuildResult(path=current_build(index_dir), manifest=serving, report=report, unchanged=True,
                                   skipped_roots=skipped_roots)
        stamp = _dt.datetime.now(_dt.timezone.utc)
        # the UTC time to the microsecond first, so ids sort in the order the builds were made (garbage collection
        # keeps the newest by name; two builds of one second sorted by their random part before)
        build_id = f"{stamp:%Y%m%dT%H%M%S%f}-{uuid.uuid4().hex[:8]}"
        tmp = index_dir / BUILDS / f"{build_id}.partial"
        tmp.mkdir()
        reader = CorpusReader(roots, max_page_bytes=max_page_bytes,
                              progress=(lambda d, t: progress("read", d, t)) if progress else None)
        cache = vectors.EmbeddingCache(Path(cache_dir) if cache_dir else index_dir / "cache", model)
        writer = BuildWriter(tmp, cache, embedder, threads, adapter, progress)
        for batch in _batches(chain(reader.pages(), _source_pages(reader, page_sources or []))):
            writer.add(batch, reader.report)
        report = reader.report
        writer.close(reader.artifacts, reader.vocab, report)
        if not writer.pages:
            serving = _serving_manifest(index_dir)
            if serving is not None and serving.counts.get("pages", 0) > 0:  # a build of nothing never replaces one
                shutil.rmtree(tmp, ignore_errors=True)
                raise EmptyBuild(
                    f"the build read no page from {', '.join(str(r.root) for r in roots) or 'no corpus'}; the index "
                    f"served (build {serving.build_id}, {serving.counts['pages']} pages) is kept",
                    hint="check the --corpus folders" + "".join(
                        f"; skipped {p.corpus}:{p.path}: {p.reason}" for p in report.skipped[:3]))
        ann = ann_indexes(tmp / "vectors", {vectors.TABLE: writer.chunks,
                                            vectors.SENTENCES: writer.sentences + writer.questions}, ann_min_rows)
        manifest = Manifest(
            kwiki_version=__version__,
            model=model,
            model_dim=vectors.DIM,
            chunker_version=chunking.CHUNKER_VERSION,
            fingerprint=fingerprint,
            corpus_hash=writer.corpus_hash(reader.artifacts, reader.vocab),
            source_hash=quick,
            corpora=report.corpora,
            counts={"pages": writer.pages, "chunks": writer.chunks, "sentences": writer.sentences,
                    "questions": writer.questions, "artifacts": len(reader.artifacts),
                    "skipped": len(report.skipped), "duplicates": len(report.duplicates)},
            pages_by_type=report.pages_by_type,
            embedded=writer.embedded,
            ann=ann,
            build_seconds=round(time.monotonic() - started, 2),
            created_at=stamp.isoformat(timespec="seconds"),
            build_id=build_id,
        )
        manifest.write(tmp)
        for f in tmp.rglob("*"):  # make the build durable before it becomes visible
            if f.is_file():
                with open(f, "rb") as fh:
                    os.fsync(fh.fileno())
        final = index_dir / BUILDS / build_id
        os.rename(tmp, final)
        _switch(index_dir, build_id)
        return BuildResult(path=final, manifest=manifest, report=report, skipped_roots=skipped_roots)


def ann_indexes(folder: Path, rows: dict[str, int], min_rows: int) -> dict[str, dict[str, int | str]]:
    """Give each vector table in ``folder`` with at least ``min_rows`` rows (``rows``: table -> rows) its approximate
    index; what each got, for the manifest."""
    return {name: vectors.create_ann_index(folder, name) for name, n in rows.items() if n >= min_rows}


