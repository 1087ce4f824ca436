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
import re
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from kwiki import __version__
from kwiki.errors import BadRequest, BuildLocked, CorpusNotFound, EmptyBuild
from kwiki.ingest import chunking, corpus
from kwiki.ingest.corpus import (
    LAYOUT_FOLDERS,
    CorpusRoot,
    IngestResult,
    chunk_page,
    missing_roots,
    read_corpora,
    root_problems,
    shown_path,
    walk_tree,
)
from kwiki.ingest.models import Chunk, IngestReport, Page, PageSource, Problem
from kwiki.settings import ANN_MIN_ROWS, EMBED_THREADS, MAX_PAGE_BYTES

from . import bm25, vectors
from . import manifest as manifest_mod
from .manifest import CURRENT, Manifest, current_build, read_manifest

BUILDS = "builds"
KEEP_BUILDS = 3

#: Progress callback: (stage, done, total).
Progress = Callable[[str, int, int], None]


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


def corpus_hash(result: IngestResult) -> str:
    h = hashlib.sha256()
    for p in sorted(result.pages, key=lambda p: (p.corpus, p.path)):
        h.update(f"{p.corpus}\0{p.path}\0{p.provenance.sha256}\n".encode())
    for a in sorted(result.artifacts, key=lambda a: a.id):
        h.update(f"{a.id}\0{json.dumps(a.meta, sort_keys=True, default=str)}\n".encode())
    for name, voc in sorted(result.vocab.items()):
        h.update(json.dumps([name, sorted(voc.aliases.items())], default=str).encode())
    return h.hexdigest()


#: Lines the model gains nothing from: a bare file path (KernelWiki PR pages list every changed file, a third of
#: their word pieces) and checklist boxes of PR templates. BM25's identifier field still matches the paths.
_NOT_FOR_MODEL = re.compile(
    r"^\s*(?:[-*+]\s*)?(?:`?[\w.@+-]*(?:/[\w.@+-]+)+\.\w{1,6}`?[\s,;:]*(?:\([^)]*\))?|\[[ xX]\].*)\s*$"
)


def embed_text(title: str, heading_path: list[str], text: str) -> str:
    r"""What the model sees for a chunk: the page title and heading path give it context.

    >>> embed_text("Fix", ["Changed Files"], "Speeds up decode.\n- `csrc/attn/decode.cu`\n- [x] tests pass")
    'Fix. Changed Files\nSpeeds up decode.'
    """
    head = " > ".join(heading_path)
    body = "\n".join(line for line in text.splitlines() if not _NOT_FOR_MODEL.match(line))
    return f"{title}. {head}\n{body}" if head else f"{title}\n{body}"


def sentence_key(text: str) -> str:
    """Cache key of a sentence vector (chunks use their content hash)."""
    return hashlib.sha256(f"sentence\0{text}".encode()).hexdigest()


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


def add_pages(result: IngestResult, source: PageSource) -> None:
    """Add the pages of a source outside the corpora; a key already taken is reported and skipped."""
    taken = {p.key for p in result.pages}
    result.report.corpora.setdefault(source.name, source.origin)
    for page in source.pages:
        if page.key in taken:
            result.report.duplicates.append(Problem(corpus=page.corpus, path=page.path, reason=f"duplicate id '{page.key}'; skipped"))
            continue
        taken.add(page.key)
        chunks = chunk_page(page)
        result.pages.append(page)
        result.chunks += chunks
        result.report.pages_by_type[page.type] = result.report.pages_by_type.get(page.type, 0) + 1
        result.report.chunks_by_type[page.type] = result.report.chunks_by_type.get(page.type, 0) + len(chunks)


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
        result = read_corpora(
            roots, max_page_bytes=max_page_bytes, progress=(lambda d, t: progress("read", d, t)) if progress else None
        )
        for source in page_sources or []:
            add_pages(result, source)
        if not result.pages:
            serving = _serving_manifest(index_dir)
            if serving is not None and serving.counts.get("pages", 0) > 0:  # a build of nothing never replaces one
                raise EmptyBuild(
                    f"the build read no page from {', '.join(str(r.root) for r in roots) or 'no corpus'}; the index "
                    f"served (build {serving.build_id}, {serving.counts['pages']} pages) is kept",
                    hint="check the --corpus folders" + "".join(
                        f"; skipped {p.corpus}:{p.path}: {p.reason}" for p in result.report.skipped[:3]))
        pages = {p.key: p for p in result.pages}
        chunks = result.chunks
        stamp = _dt.datetime.now(_dt.timezone.utc)
        build_id = f"{stamp:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
        tmp = index_dir / BUILDS / f"{build_id}.partial"
        tmp.mkdir()

        bm25.write(tmp / "bm25", pages, chunks)
        bm25.write_pages(tmp / "bm25-pages", pages)

        cache = vectors.EmbeddingCache(Path(cache_dir) if cache_dir else index_dir / "cache", model)
        sentence_rows, sentence_texts = curated_sentences(pages, chunks, result.report)
        question_pages, question_texts = page_questions(pages, chunks)
        sentence_keys = [sentence_key(t) for t in sentence_texts + question_texts]
        todo = {c.content_hash: embed_text(pages[c.page_key].title, c.heading_path, c.text) for c in chunks}
        todo.update(zip(sentence_keys, sentence_texts + question_texts))
        embedded = _embed_missing(cache, todo, embedder, threads, progress, adapter)
        chunk_matrix = cache.get([c.content_hash for c in chunks])
        vectors.write_table(tmp / "vectors", [_vector_row(c) for c in chunks], chunk_matrix)
        sentence_matrix = cache.get(sentence_keys)
        question_rows = nearest_chunks(question_pages, sentence_matrix[len(sentence_texts):], chunks, chunk_matrix)
        vectors.write_sentences(tmp / "vectors", sentence_rows + question_rows, sentence_texts + question_texts, sentence_matrix,
                                questions=[False] * len(sentence_texts) + [True] * len(question_texts))
        ann = ann_indexes(tmp / "vectors", {vectors.TABLE: len(chunks), vectors.SENTENCES: len(sentence_keys)}, ann_min_rows)
        _write_records(tmp, result)
        manifest = Manifest(
            kwiki_version=__version__,
            model=model,
            model_dim=vectors.DIM,
            chunker_version=chunking.CHUNKER_VERSION,
            fingerprint=fingerprint,
            corpus_hash=corpus_hash(result),
            source_hash=quick,
            corpora=result.report.corpora,
            counts={"pages": len(result.pages), "chunks": len(chunks), "sentences": len(sentence_texts),
                    "questions": len(question_texts), "artifacts": len(result.artifacts),
                    "skipped": len(result.report.skipped), "duplicates": len(result.report.duplicates)},
            pages_by_type=result.report.pages_by_type,
            embedded=embedded,
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
        return BuildResult(path=final, manifest=manifest, report=result.report, skipped_roots=skipped_roots)


def ann_indexes(folder: Path, rows: dict[str, int], min_rows: int) -> dict[str, dict[str, int | str]]:
    """Give each vector table in ``folder`` with at least ``min_rows`` rows (``rows``: table -> rows) its approximate
    index; what each got, for the manifest."""
    return {name: vectors.create_ann_index(folder, name) for name, n in rows.items() if n >= min_rows}


#: Sentence vectors per page (a long curated page has a few hundred); a page with more is reported, the rest left out.
MAX_SENTENCES_PER_PAGE = 2000


def curated_sentences(pages: dict[str, Page], chunks: list[Chunk],
                      report: IngestReport | None = None) -> tuple[list[int], list[str]]:
    """(chunk row, sentence) of every sentence of the curated pages, as two lists (``vectors.write_sentences``);
    at most :data:`MAX_SENTENCES_PER_PAGE` per page, a page over it reported in ``report``."""
    pairs: list[tuple[int, str]] = []
    per_page: dict[str, int] = {}
    for row, c in enumerate(chunks):
        if pages[c.page_key].type not in chunking.SENTENCE_TYPES:
            continue
        for text in chunking.sentences(c.text, chunking.SENTENCE_MIN_WORDS):
            n = per_page[c.page_key] = per_page.get(c.page_key, 0) + 1
            if n <= MAX_SENTENCES_PER_PAGE:
                pairs.append((row, text))
    for key, n in per_page.items():
        if n > MAX_SENTENCES_PER_PAGE and report is not None:
            page = pages[key]
            report.warnings.append(Problem(corpus=page.corpus, path=page.path, reason=(
                f"page has {n} sentences, over the {MAX_SENTENCES_PER_PAGE}-sentence page limit; "
                f"the first {MAX_SENTENCES_PER_PAGE} get vectors")))
    return [r for r, _ in pairs], [t for _, t in pairs]


def page_questions(pages: dict[str, Page], chunks: list[Chunk]) -> tuple[list[str], list[str]]:
    """(page key, question) of every question a page lists that has a chunk in the index, as two lists."""
    chunked = {c.page_key for c in chunks}
    pairs = [(key, q) for key, p in pages.items() if key in chunked for q in p.questions]
    return [k for k, _ in pairs], [q for _, q in pairs]


def nearest_chunks(page_keys: list[str], question_vectors: np.ndarray, chunks: list[Chunk],
                   chunk_matrix: np.ndarray) -> list[int]:
    """For each question, the row of its page's chunk closest to it: the section that answers it, which the
    question's vector then stands for (as a sentence stands for its chunk)."""
    rows_of: dict[str, list[int]] = {}
    for row, c in enumerate(chunks):
        rows_of.setdefault(c.page_key, []).append(row)
    out = []
    for key, vec in zip(page_keys, question_vectors):
        rows = rows_of[key]
        out.append(rows[int(np.argmax(chunk_matrix[rows] @ vec))])
    return out


def _embed_missing(cache: vectors.EmbeddingCache, todo: dict[str, str], embedder: vectors.Embedder | None,
                   threads: int, progress: Progress | None, adapter: str | None = None) -> int:
    """Embed the texts (content key -> text) the cache lacks, chunks and sentences in one length-sorted
    queue; returns how many were embedded."""
    lacking = set(cache.missing(list(todo)))
    missing = [(h, text) for h, text in todo.items() if h in lacking]
    if not missing:
        return 0
    embedder = embedder or vectors.Embedder(threads=threads, adapter=adapter)
    done = 0

    def tick(n: int) -> None:
        nonlocal done
        done += n
        if progress:
            progress("embed", done, len(missing))

    cache.add([h for h, _ in missing], embedder.encode([text for _, text in missing], progress=tick))
    cache.save()
    return len(missing)


def _vector_row(c: Chunk) -> dict[str, object]:
    """The columns stored beside a chunk's vector in lancedb."""
    return {"chunk_id": c.id, "page_key": c.page_key, "corpus": c.corpus, "path": c.provenance.path,
            "heading": " > ".join(c.heading_path), "line_start": c.line_start, "line_end": c.line_end,
            "content_hash": c.content_hash}


def _write_records(folder: Path, result: IngestResult) -> None:
    """Pages, chunks, artifacts, vocabulary and the ingest report, as the searcher reads them."""
    with open(folder / "pages.jsonl", "w", encoding="utf-8") as fh:
        for p in result.pages:
            fh.write(p.model_dump_json() + "\n")
    with open(folder / "chunks.jsonl", "w", encoding="utf-8") as fh:
        for c in result.chunks:
            fh.write(c.model_dump_json(exclude={"provenance"}) + "\n")
    (folder / "artifacts.json").write_text(json.dumps([a.model_dump() for a in result.artifacts], default=str))
    (folder / "vocab.json").write_text(
        json.dumps({n: {"aliases": v.aliases, "tags": {k: sorted(s) for k, s in v.tags.items()}} for n, v in result.vocab.items()})
    )
    (folder / "report.json").write_text(result.report.model_dump_json(indent=2))
