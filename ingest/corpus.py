"""Read KernelWiki-layout corpora into pages, chunks and artifacts.

Nothing in a corpus stops an ingest: a file that cannot be read or parsed is skipped
and reported with its reason; a duplicate id is reported and never overwrites::

    >>> from kwiki.ingest.corpus import read_corpora
    >>> result = read_corpora([CorpusRoot("kwiki", Path("corpus"))])   # doctest: +SKIP
    >>> result.report.pages_by_type["pattern"]                          # doctest: +SKIP
    33
"""

from __future__ import annotations

import hashlib
import os
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from kwiki.settings import EMBEDDED_CORPUS, MAX_PAGE_BYTES

from .chunking import split_sections
from .frontmatter import FrontmatterError, as_list, parse_yaml, split_frontmatter
from .models import FACETS, Artifact, Chunk, IngestReport, Page, Problem, Provenance, id_problem

#: Folder under wiki/ -> page type; sources/<folder> -> "source-<singular>".
WIKI_TYPES = {
    "hardware": "hardware",
    "techniques": "technique",
    "kernels": "kernel",
    "patterns": "pattern",
    "languages": "language",
    "migration": "migration",
    "ncu": "ncu",
}
_SLUG = re.compile(r"[^a-z0-9]+")
#: Folder levels read below a top folder (KernelWiki goes 4 deep). os.walk recursed and died at ~1,000 levels;
#: deeper folders are skipped and reported.
MAX_FOLDER_DEPTH = 32
#: ``data/tags.yaml`` and ``data/aliases.yaml`` are a few KiB; a larger one is skipped and reported.
MAX_VOCABULARY_BYTES = 1024 * 1024
#: Chunks indexed per page (KernelWiki's longest page has well under 100); the rest of a longer page is reported
#: and left out, like a page over the size limit.
MAX_CHUNKS_PER_PAGE = 1000


@dataclass
class CorpusRoot:
    name: str
    root: Path


@dataclass
class Vocabulary:
    """A corpus' ``data/tags.yaml`` and ``data/aliases.yaml``."""

    tags: dict[str, set[str]] = field(default_factory=dict)
    aliases: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class IngestResult:
    pages: list[Page]
    chunks: list[Chunk]
    artifacts: list[Artifact]
    vocab: dict[str, Vocabulary]
    report: IngestReport


def corpus_root(spec: str | Path) -> CorpusRoot:
    """``PATH`` or ``NAME=PATH``; the project's own ``corpus/`` (or its copy installed with the package) is named ``kwiki``."""
    text = str(spec)
    if "=" in text and not Path(text).exists():
        name, _, raw = text.partition("=")
        return CorpusRoot(name.strip(), Path(raw).expanduser())
    path = Path(text).expanduser()
    resolved = path.resolve()
    name = "kwiki" if resolved == EMBEDDED_CORPUS.resolve() or (resolved.name == "corpus" and (resolved.parent / "pyproject.toml").exists()) \
        else resolved.name
    return CorpusRoot(name, path)


#: The folders of the KernelWiki layout; a root with none of them holds nothing an ingest reads.
LAYOUT_FOLDERS = ("sources", "wiki", "artifacts", "data")


def missing_roots(roots: list[CorpusRoot]) -> list[CorpusRoot]:
    """The roots that are not folders: ``kwiki ingest`` refuses them before it reads or builds anything."""
    return [r for r in roots if not Path(r.root).is_dir()]


def root_problems(roots: list[CorpusRoot]) -> list[Problem]:
    """Why a root gives nothing: not a folder, or a folder with none of :data:`LAYOUT_FOLDERS` (a typo'd or
    parent folder). Checked on every ingest, so a skipped root is named even when the index is up to date."""
    out = []
    for r in roots:
        if not Path(r.root).is_dir():
            out.append(Problem(corpus=r.name, path=str(r.root), reason="corpus root is not a folder"))
        elif not any((Path(r.root) / top).is_dir() for top in LAYOUT_FOLDERS):
            out.append(Problem(corpus=r.name, path=str(r.root), reason=(
                f"no {', '.join(f'{t}/' for t in LAYOUT_FOLDERS)} folder: not a KernelWiki-layout corpus; nothing read")))
    return out


def page_type(rel: Path, meta: dict[str, Any]) -> str:
    parts = rel.parts
    if parts[0] == "sources" and len(parts) > 2:
        folder = parts[1]
        singular = folder[:-1] if folder.endswith("s") else folder
        return f"source-{singular}"
    declared = meta.get("type")
    if isinstance(declared, str) and declared.strip():
        return declared.strip()
    if parts[0] == "wiki" and len(parts) > 2:
        return WIKI_TYPES.get(parts[1], parts[1].rstrip("s"))
    return "page"


def derived_id(rel: Path) -> str:
    return _SLUG.sub("-", str(rel.with_suffix("")).lower()).strip("-")


def shown_path(path: Path | str) -> str:
    """A path as text that can always be printed and stored: bytes that are not UTF-8 become ``\\xNN``."""
    return os.fsencode(path).decode("utf-8", errors="backslashreplace")


def walk_tree(base: Path, skip: Callable[[Path, str], None]) -> Iterator[tuple[Path, list[str], list[str]]]:
    """``os.walk(base, followlinks=False)`` in sorted order, without recursion and never failing.

    Yields ``(folder, dirnames, filenames)``; the caller may remove names from ``dirnames`` to prune. A name
    that is not valid UTF-8, a folder nested deeper than :data:`MAX_FOLDER_DEPTH` or a folder that cannot be
    listed is passed to ``skip(path, reason)`` and left out.
    """
    stack: list[tuple[Path, int]] = [(base, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            skip(folder, f"folder cannot be read: {exc.strerror or exc}")
            continue
        dirnames: list[str] = []
        filenames: list[str] = []
        for entry in entries:
            try:
                entry.name.encode("utf-8")
            except UnicodeEncodeError:
                skip(folder / entry.name, "file name is not valid UTF-8")
                continue
            try:
                os.lstat(entry.path)  # a path over PATH_MAX fails here, not later in the caller
            except OSError as exc:
                skip(folder / entry.name, f"cannot be read: {exc.strerror or exc}")
                continue
            try:
                is_dir = entry.is_dir()  # through a link, as os.walk sorts them; links are never descended
            except OSError:  # a link loop: a file to the caller, which reports it
                is_dir = False
            (dirnames if is_dir else filenames).append(entry.name)
        yield folder, dirnames, filenames
        for name in reversed(dirnames):
            child = folder / name
            if child.is_symlink():
                continue
            if depth + 1 > MAX_FOLDER_DEPTH:
                skip(child, f"folder nested deeper than {MAX_FOLDER_DEPTH} levels; not read")
                continue
            stack.append((child, depth + 1))


def _read_text(path: Path, limit: int) -> str:
    if not path.is_file():  # a FIFO or device would block or stream forever
        raise ValueError("not a regular file")
    size = path.stat().st_size
    if size == 0:
        raise ValueError("empty file")
    if size > limit:
        raise ValueError(f"file is {size / 1e6:.1f} MB, over the {limit / 1e6:.0f} MB page limit")
    data = path.read_bytes()
    if b"\x00" in data[:8192]:
        raise ValueError("binary file (NUL bytes), not markdown")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not valid UTF-8 (byte {exc.start})") from exc


def _walk(root: Path, report: IngestReport, corpus: str) -> list[Path]:
    """Files under ``sources/``, ``wiki/``, ``artifacts/``; never follows a link out of the root."""
    real_root = root.resolve()
    files: list[Path] = []
    for top in ("sources", "wiki", "artifacts"):
        base = root / top
        if base.is_symlink():  # os.walk would follow a linked top folder wherever it points
            report.skipped.append(Problem(corpus=corpus, path=top, reason="symlinked folder not followed"))
            continue
        if not base.is_dir():
            continue
        def skip(path: Path, reason: str) -> None:
            report.skipped.append(Problem(corpus=corpus, path=shown_path(path.relative_to(root)), reason=reason))

        for dirpath, dirnames, filenames in walk_tree(base, skip):
            for d in list(dirnames):
                if (Path(dirpath) / d).is_symlink():
                    dirnames.remove(d)
                    rel = (Path(dirpath) / d).relative_to(root)
                    report.skipped.append(Problem(corpus=corpus, path=str(rel), reason="symlinked folder not followed"))
            for name in sorted(filenames):
                path = Path(dirpath) / name
                if path.is_symlink():
                    rel = path.relative_to(root)
                    try:
                        target = path.resolve()
                    except (OSError, RuntimeError):  # a link loop: 3.11 raises RuntimeError, 3.13 OSError
                        report.skipped.append(Problem(corpus=corpus, path=str(rel), reason="symlink loop"))
                        continue
                    if not target.exists():  # first: a dangling absolute link is missing, wherever it points
                        report.skipped.append(Problem(corpus=corpus, path=str(rel), reason="symlink to a missing file"))
                        continue
                    if not target.is_relative_to(real_root):
                        report.skipped.append(
                            Problem(corpus=corpus, path=str(rel), reason="symlink points outside the corpus root")
                        )
                        continue
                    if not target.is_file():
                        report.skipped.append(Problem(corpus=corpus, path=str(rel), reason="symlink to something not a file"))
                        continue
                files.append(path)
    return files


def load_vocabulary(root: Path, report: IngestReport | None = None, corpus: str = "") -> Vocabulary:
    """``data/tags.yaml`` and ``data/aliases.yaml``: read only from inside the root, up to :data:`MAX_VOCABULARY_BYTES`.
    A file that is skipped is reported in ``report`` (when given) with its reason."""
    vocab = Vocabulary()
    real_root = root.resolve()
    for name, attr in (("tags.yaml", "tags"), ("aliases.yaml", "aliases")):
        path = root / "data" / name

        def skip(reason: str) -> None:
            if report is not None:
                report.skipped.append(Problem(corpus=corpus, path=f"data/{name}", reason=reason))

        if not path.exists() and not path.is_symlink():
            continue
        try:
            real = path.resolve()
            if not real.is_relative_to(real_root):
                skip("symlink points outside the corpus root")
                continue
            if not real.is_file():
                skip("not a regular file")
                continue
            size = real.stat().st_size
            if size > MAX_VOCABULARY_BYTES:
                skip(f"file is {size / 1e6:.1f} MB, over the {MAX_VOCABULARY_BYTES / 1e6:.0f} MB vocabulary limit")
                continue
            data = parse_yaml(real.read_text(encoding="utf-8")) or {}
        except (OSError, RuntimeError, UnicodeDecodeError, FrontmatterError) as exc:
            skip(str(exc) or type(exc).__name__)
            continue
        if not isinstance(data, dict):
            skip(f"{name} is a {type(data).__name__}, not a mapping")
            continue
        if attr == "tags":
            vocab.tags = {str(k): set(as_list(v)) for k, v in data.items()}
        else:
            vocab.aliases = {str(k): as_list(v) for k, v in data.items()}
    return vocab


MAX_QUESTIONS = 40  # per page: more is a dump, not a list of what the page answers
MAX_QUESTION_CHARS = 400


def questions_of(value: Any) -> list[str]:
    """The ``questions:`` of a page: each item kept whole (commas included), empty and over-long ones dropped.

    >>> questions_of(["why, on B200, is it slow?", "", None]), questions_of("one question")
    (['why, on B200, is it slow?'], ['one question'])
    """
    items = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    out = [str(q).strip() for q in items if isinstance(q, (str, int, float)) and str(q).strip()]
    return [q for q in out if len(q) <= MAX_QUESTION_CHARS][:MAX_QUESTIONS]


def _make_page(meta: dict[str, Any], body: str, body_line: int, rel: Path, corpus: str, sha: str) -> Page:
    if isinstance(meta.get("id"), (dict, list, set)):
        raise ValueError(f"id is a {type(meta['id']).__name__}, not a string")
    pid = str(meta.get("id") or "").strip() or derived_id(rel)
    if why := id_problem(pid):
        raise ValueError(why)
    title = meta.get("title")
    if not title:
        heading = re.search(r"^#\s+(.+)$", body, re.M)
        title = heading.group(1).strip() if heading else rel.stem
    ptype = page_type(rel, meta)
    facets = {f: as_list(meta.get(f)) for f in FACETS}
    claims = meta.get("performance_claims")
    signals = meta.get("ncu_signals")
    prov = Provenance(
        corpus=corpus,
        path=str(rel),
        sha256=sha,
        url=str(meta["url"]) if meta.get("url") else None,
        sources=as_list(meta.get("sources")),
        confidence=str(meta["confidence"]) if meta.get("confidence") else None,
        retrieved_at=str(meta.get("retrieved_at") or meta.get("captured_at") or "") or None,
    )
    return Page(
        key=pid,
        id=pid,
        type=ptype,
        title=str(title).strip(),
        path=str(rel),
        corpus=corpus,
        facets=facets,
        confidence=prov.confidence,
        reproducibility=str(meta["reproducibility"]) if meta.get("reproducibility") else None,
        url=prov.url,
        sources=prov.sources,
        related=as_list(meta.get("related")),
        prerequisites=as_list(meta.get("prerequisites")),
        candidate_techniques=as_list(meta.get("candidate_techniques")),
        performance_claims=[c for c in claims if isinstance(c, dict)] if isinstance(claims, list) else [],
        aliases=as_list(meta.get("aliases")),
        questions=questions_of(meta.get("questions")),
        ncu_signals=[s for s in signals if isinstance(s, dict)] if isinstance(signals, list) else [],
        provenance=prov,
        meta=meta,
        body=body,
        body_line=body_line,
    )


def _meta_text(page: Page) -> str:
    """A chunk for pages whose body is empty: what the frontmatter says."""
    bits = [page.title]
    for key in ("description", "summary", "inclusion_reason"):
        if isinstance(page.meta.get(key), str):
            bits.append(page.meta[key])
    for facet in FACETS:
        if page.facet(facet):
            bits.append(f"{facet}: {', '.join(page.facet(facet))}")
    return "\n".join(bits)


def chunk_page(page: Page) -> list[Chunk]:
    parts = split_sections(page.body, page.body_line)
    chunks: list[Chunk] = []
    if not parts:
        text = _meta_text(page)
        parts_iter: list[tuple[list[str], str, int, int, str]] = [([], text, 1, max(page.body_line - 1, 1), "meta")]
    else:
        parts_iter = [(p.heading_path, p.text, p.line_start, p.line_end, p.kind) for p in parts]
    for n, (heading, text, start, end, kind) in enumerate(parts_iter):
        digest = hashlib.sha256(f"{page.title}\n{' > '.join(heading)}\n{text}".encode()).hexdigest()
        chunks.append(
            Chunk(
                id=f"{page.key}#{n}",
                page_key=page.key,
                corpus=page.corpus,
                heading_path=heading,
                text=text,
                line_start=start,
                line_end=end,
                kind=kind,
                content_hash=digest,
                provenance=page.provenance,
            )
        )
    return chunks


def _artifact(path: Path, rel: Path, corpus: str, data: Any) -> Artifact:
    if not isinstance(data, dict):
        raise ValueError(f"{path.name} is a {type(data).__name__}, not a mapping")
    bundle = rel.parent
    files = [f for f in data.get("files") or [] if isinstance(f, dict)]
    measures = data.get("measurements")
    return Artifact(
        id=f"{corpus}:{bundle}",
        corpus=corpus,
        path=str(bundle),
        kind="provenance" if path.name == "PROVENANCE.yaml" else "manifest",
        page_ids=as_list(data.get("page_ids")),
        files=files,
        asset_mode=str(data["asset_mode"]) if data.get("asset_mode") else None,
        license=str(data["license"]) if data.get("license") else None,
        origin_url=str(data["origin_url"]) if data.get("origin_url") else None,
        measurements=[m for m in measures if isinstance(m, dict)] if isinstance(measures, list) else [],
        meta=data,
    )


class CorpusReader:
    """The roots read page by page (:meth:`pages`), so an ingest holds one page at a time, not the corpus.

    Before the first page: the vocabularies (``vocab``), every artifact bundle (``artifacts``: a page is linked to
    its bundles as it is read) and the file list. ``report`` is complete once :meth:`pages` is exhausted; ``keys``
    holds every page key given out (a later source's page may not take one).
    """

    def __init__(self, roots: list[CorpusRoot], max_page_bytes: int = MAX_PAGE_BYTES,
                 progress: Callable[[int, int], None] | None = None) -> None:
        self.max_page_bytes = max_page_bytes
        self.progress = progress
        self.report = IngestReport()
        self.artifacts: list[Artifact] = []
        self.vocab: dict[str, Vocabulary] = {}
        self.keys: set[str] = set()
        self._corpus_of_key: dict[str, str] = {}  # page key -> its corpus (a same id in a later corpus is qualified)
        self._seen_in_corpus: dict[tuple[str, str], str] = {}  # (corpus, id) -> path of the first page with it
        self._types: Counter[str] = Counter()
        self._chunk_types: Counter[str] = Counter()
        self._unknown: dict[str, set[str]] = defaultdict(set)
        self._work: list[tuple[CorpusRoot, Path]] = []
        self.report.skipped += root_problems(roots)
        for croot in roots:
            if not croot.root.is_dir():
                continue
            self.report.corpora[croot.name] = str(croot.root.resolve())
            self.vocab[croot.name] = load_vocabulary(croot.root, self.report, croot.name)
            self._work += [(croot, p) for p in _walk(croot.root, self.report, croot.name)]
        for croot, path in self._work:
            rel = path.relative_to(croot.root)
            if path.name in ("PROVENANCE.yaml", "MANIFEST.yaml") and rel.parts[0] == "artifacts":
                try:
                    self.artifacts.append(_artifact(path, rel, croot.name, parse_yaml(_read_text(path, max_page_bytes))))
                except (OSError, ValueError, FrontmatterError, RecursionError) as exc:
                    self.report.skipped.append(Problem(corpus=croot.name, path=str(rel), reason=str(exc) or type(exc).__name__))
                except Exception as exc:  # noqa: BLE001 - a hostile file must never stop the ingest
                    self.report.skipped.append(Problem(corpus=croot.name, path=str(rel), reason=f"unreadable page: {exc!r}"[:300]))
        self._linker = _ArtifactLinker(self.artifacts)
        self.report.artifacts = len(self.artifacts)

    def pages(self) -> Iterator[tuple[Page, list[Chunk]]]:
        """Each page read, with its chunks, in file order; skipped files and duplicates go to ``report``."""
        for done, (croot, path) in enumerate(self._work, 1):
            if self.progress:
                self.progress(done, len(self._work))
            page = self._page(croot, path)
            if page is None:
                continue
            self._linker.link(page)
            chunks = chunk_page(page)
            if len(chunks) > MAX_CHUNKS_PER_PAGE:
                self.report.warnings.append(Problem(corpus=page.corpus, path=page.path, reason=(
                    f"page has {len(chunks)} chunks, over the {MAX_CHUNKS_PER_PAGE}-chunk page limit; "
                    f"the first {MAX_CHUNKS_PER_PAGE} are indexed")))
                chunks = chunks[:MAX_CHUNKS_PER_PAGE]
            self.count(page, len(chunks))
            _unknown_vocabulary(page, self.vocab, self._unknown)
            yield page, chunks
        self.report.unknown_vocabulary = {k: sorted(v) for k, v in sorted(self._unknown.items())}

    def count(self, page: Page, chunks: int) -> None:
        """Count a page (and its chunks) in the report's totals by type."""
        self._types[page.type] += 1
        self._chunk_types[page.type] += chunks
        self.report.pages_by_type = dict(sorted(self._types.items()))
        self.report.chunks_by_type = dict(sorted((t, n) for t, n in self._chunk_types.items() if n))

    def _page(self, croot: CorpusRoot, path: Path) -> Page | None:
        rel = path.relative_to(croot.root)
        name = croot.name
        if path.suffix.lower() != ".md" or rel.parts[0] == "artifacts":
            return None
        try:
            raw = _read_text(path, self.max_page_bytes)
            meta, body, body_line = split_frontmatter(raw)
            sha = hashlib.sha256(raw.encode("utf-8")).hexdigest()
            page = _make_page(meta, body, body_line, rel, name, sha)
            page.model_dump_json()  # a page the index cannot store must not stop the build later
        except (OSError, ValueError, FrontmatterError, RecursionError) as exc:
            self.report.skipped.append(Problem(corpus=name, path=str(rel), reason=str(exc) or type(exc).__name__))
            return None
        except Exception as exc:  # noqa: BLE001 - a hostile page must never stop the ingest
            self.report.skipped.append(Problem(corpus=name, path=str(rel), reason=f"unreadable page: {exc!r}"[:300]))
            return None
        first = self._seen_in_corpus.get((name, page.id))
        if first is not None:
            self.report.duplicates.append(
                Problem(corpus=name, path=str(rel), reason=f"duplicate id '{page.id}' (first in {first}); skipped"))
            return None
        self._seen_in_corpus[(name, page.id)] = str(rel)
        if page.id in self._corpus_of_key:
            page.key = f"{name}:{page.id}"
            self.report.warnings.append(Problem(corpus=name, path=str(rel), reason=(
                f"id '{page.id}' also in corpus '{self._corpus_of_key[page.id]}'; served as '{page.key}'")))
        self._corpus_of_key[page.key] = name
        self.keys.add(page.key)
        return page


def read_corpora(
    roots: list[CorpusRoot],
    max_page_bytes: int = MAX_PAGE_BYTES,
    progress: Callable[[int, int], None] | None = None,
) -> IngestResult:
    """Every root read whole (a :class:`CorpusReader` collected); pages keep their corpus, duplicates get a
    corpus-qualified key."""
    reader = CorpusReader(roots, max_page_bytes, progress)
    pages: list[Page] = []
    chunks: list[Chunk] = []
    for page, page_chunks in reader.pages():
        pages.append(page)
        chunks += page_chunks
    return IngestResult(pages=pages, chunks=chunks, artifacts=reader.artifacts, vocab=reader.vocab, report=reader.report)


class _ArtifactLinker:
    """Attaches bundles to a page as it is read: a bundle whose ``page_ids`` name it, or one under its
    ``artifact_dir``; the page joins the bundle's ``page_ids``."""

    def __init__(self, artifacts: list[Artifact]) -> None:
        self.artifacts = artifacts
        self.by_id: dict[tuple[str, str], list[int]] = defaultdict(list)  # (corpus, page id) -> bundles naming it
        self.by_dir: dict[tuple[str, str], list[int]] = defaultdict(list)  # (corpus, folder) -> bundles at or under it
        for i, art in enumerate(artifacts):
            for pid in dict.fromkeys(art.page_ids):
                self.by_id[(art.corpus, pid)].append(i)
            parts = art.path.removeprefix("artifacts/").split("/")
            for n in range(1, len(parts) + 1):
                self.by_dir[(art.corpus, "/".join(parts[:n]))].append(i)

    def link(self, page: Page) -> None:
        found = set(self.by_id.get((page.corpus, page.id), []))
        art_dir = page.meta.get("artifact_dir")
        if isinstance(art_dir, str):
            found |= set(self.by_dir.get((page.corpus, art_dir.strip("/").removeprefix("artifacts/")), []))
        for i in sorted(found):
            art = self.artifacts[i]
            if art.id not in page.artifacts:
                page.artifacts.append(art.id)
            if page.id not in art.page_ids:
                art.page_ids.append(page.id)


def _unknown_vocabulary(page: Page, vocab: dict[str, Vocabulary], unknown: dict[str, set[str]]) -> None:
    """Add the facet values of ``page`` its corpus' ``data/tags.yaml`` does not list to ``unknown`` (facet -> values)."""
    tags = vocab.get(page.corpus, Vocabulary()).tags
    if not tags:
        return
    every = set().union(*tags.values())
    for facet in FACETS:
        allowed = every if facet == "tags" else tags.get(facet)
        if allowed is None:
            continue
        for value in page.facet(facet):
            if value not in allowed:
                unknown[facet].add(value)
