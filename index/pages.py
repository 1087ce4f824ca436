"""Pages of a build without the rest of it: what ``kwiki page`` and ``GET /pages/{id}`` need.

A page is asked for by its key (``pattern-tail-effect``), or by the link a page body uses
(``../techniques/stream-k.md``, ``techniques/stream-k.md``, ``wiki/techniques/stream-k``, the file's path in a
KernelWiki checkout): :func:`lookup` resolves either to the key. A key that names no page gets the nearest keys as
the error's hint (:func:`nearest`), so every surface says "did you mean".

:class:`PageStore` opens only ``pages.jsonl``, ``artifacts.json`` and the manifest of a build: no model, no
vectors, no BM25 index (``kwiki page`` without a server reads nothing else). :class:`~kwiki.index.search.Searcher`
answers pages through the same :func:`page_response`.

    >>> paths = {"technique-stream-k": "wiki/techniques/stream-k.md", "pattern-tail-effect": "wiki/patterns/tail-effect.md"}
    >>> [lookup(paths, k) for k in ("../techniques/stream-k.md", "wiki/techniques/stream-k", "stream-k#why")]
    ['technique-stream-k', 'technique-stream-k', 'technique-stream-k']
    >>> nearest(paths, "pattern-tail-efect")
    ['pattern-tail-effect']
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kwiki.errors import IndexMissing, PageNotFound
from kwiki.ingest.models import Page

from .manifest import Manifest, current_build, read_manifest
from .results import PageResponse, SourceRef

_PAGE_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,200}$")
#: A link longer than this is no page's link; it is refused without a lookup (bounded work per request).
MAX_LINK_CHARS = 1000
#: How many near keys an unknown key's hint names, and how alike (rapidfuzz WRatio, 0-100) each must be.
HINTS = 3
HINT_MIN_SCORE = 70  # 60 let "nope-x" suggest three unrelated pages; a one-letter typo of an id scores 95+
DEFAULT_HINT = "use an id from a search hit, e.g. pattern-tail-effect"


def _parts(text: str) -> list[str] | None:
    """A link's path parts without ``.md``, leading ``./`` and ``../``, a ``#fragment`` or ``?query``; None when
    it climbs inside (``a/../b``): a link is matched against page paths, never walked."""
    text = text.strip().split("#", 1)[0].split("?", 1)[0].strip()
    parts = [p for p in text.split("/") if p not in ("", ".")]
    while parts and parts[0] == "..":
        parts.pop(0)
    if not parts or ".." in parts:
        return None
    parts[-1] = parts[-1].removesuffix(".md")
    return parts if parts[-1] else None


def lookup(paths: Mapping[str, str], key: str) -> str | None:
    """The key of the page ``key`` names: a key of ``paths`` (key -> the page's path in its corpus), or a link to
    the page's file whose parts end like the path's (or the path ends like the link: a path in a checkout). The
    longest match wins; the same file in two corpora is the first corpus' page (no ``corpus:`` prefix); two files
    that match alike (``stream-k`` for ``techniques/stream-k.md`` and ``papers/stream-k.md``) are no answer, and the
    error's hint names both."""
    if key in paths:
        return key
    if len(key) > MAX_LINK_CHARS:
        return None
    link = _parts(key)
    if link is None:
        return None
    longest = 0
    found: dict[str, list[str]] = {}  # path -> the keys of the pages with that path
    for page_key, path in paths.items():
        own = path.removesuffix(".md").split("/")
        n = min(len(own), len(link))
        if own[-n:] != link[-n:] or n < longest:
            continue
        if n > longest:
            longest, found = n, {}
        found.setdefault(path, []).append(page_key)
    if len(found) != 1:
        return None
    (keys,) = found.values()
    return min(keys, key=lambda k: (":" in k, k))


def nearest(paths: Mapping[str, str], key: str, limit: int = HINTS) -> list[str]:
    """The keys most like ``key`` (or like the file name it links to), best first."""
    from rapidfuzz import fuzz, process

    link = _parts(key[:MAX_LINK_CHARS]) or [key[:200]]
    found = process.extract(link[-1], list(paths), scorer=fuzz.WRatio, limit=limit, score_cutoff=HINT_MIN_SCORE)
    return [k for k, _, _ in found]


def not_found(paths: Mapping[str, str], key: str) -> PageNotFound:
    """The error for a key that names no page, its hint naming the nearest keys."""
    near = nearest(paths, key)
    hint = f"did you mean {', '.join(near)}? ({DEFAULT_HINT})" if near else DEFAULT_HINT
    return PageNotFound(f"no page '{key[:80]}'", hint=hint)


def find_page(pages: Mapping[str, Page], key: str, corpus: str | None = None) -> Page | None:
    """A page by key, preferring ``corpus``'s own page of that id (how a page's ``sources`` and ``related`` resolve)."""
    if corpus and f"{corpus}:{key}" in pages:
        return pages[f"{corpus}:{key}"]
    return pages.get(key)


def resolve(pages: Mapping[str, Page], ids: list[str], corpus: str) -> list[SourceRef]:
    out = []
    for sid in ids:
        p = find_page(pages, sid, corpus)
        if p is not None:
            out.append(SourceRef(id=p.key, title=p.title, url=p.url, type=p.type, resolved=True))
        else:
            out.append(SourceRef(id=sid, url=sid if sid.startswith(("http://", "https://")) else None))
    return out


def page_response(pages: Mapping[str, Page], artifacts: Mapping[str, dict[str, Any]], key: str) -> PageResponse:
    """``GET /pages/{key}``: the page ``key`` names (its key or a link to it), with its sources, related pages
    and artifacts resolved; :class:`PageNotFound` with the nearest keys otherwise."""
    paths = {k: p.path for k, p in pages.items()}
    found = key if key in pages else lookup(paths, key or "")
    if found is None or not _PAGE_KEY.match(found):
        raise not_found(paths, key or "")
    page = pages[found]
    return PageResponse(
        id=page.key, page_id=page.id, title=page.title, type=page.type, corpus=page.corpus, path=page.path,
        confidence=page.confidence, reproducibility=page.reproducibility, url=page.url, facets=page.facets,
        frontmatter=json.loads(json.dumps(page.meta, default=str)), body=page.body, questions=page.questions,
        sources=resolve(pages, page.sources, page.corpus),
        related=resolve(pages, page.related + [t for t in page.candidate_techniques if t not in page.related], page.corpus),
        artifacts=[artifacts[a] for a in page.artifacts if a in artifacts],
        provenance=page.provenance.model_dump(),
    )


@dataclass
class PageStore:
    """The pages of one build, read without its vectors, BM25 index or model."""

    path: Path
    manifest: Manifest
    pages: dict[str, Page]
    artifacts: dict[str, dict[str, Any]]
    known_types: set[str] = field(init=False)

    def __post_init__(self) -> None:
        self.known_types = {p.type for p in self.pages.values()}

    @classmethod
    def open(cls, index_dir: Path) -> PageStore:
        """Open ``<index_dir>/current`` (or ``index_dir`` itself when it is a build folder)."""
        index_dir = Path(index_dir)
        build = index_dir if (index_dir / "manifest.json").exists() else current_build(index_dir)
        if not build.exists():
            raise IndexMissing(f"no index at {index_dir}", hint="run `kwiki ingest` to build one")
        build = build.resolve()
        manifest = read_manifest(build)
        pages: dict[str, Page] = {}
        with open(build / "pages.jsonl", encoding="utf-8") as fh:
            for line in fh:
                p = Page.model_validate_json(line)
                pages[p.key] = p
        artifacts = {a["id"]: a for a in json.loads((build / "artifacts.json").read_text())}
        return cls(path=build, manifest=manifest, pages=pages, artifacts=artifacts)

    def find_page(self, key: str, corpus: str | None = None) -> Page | None:
        return find_page(self.pages, key, corpus)

    def page(self, key: str) -> PageResponse:
        return page_response(self.pages, self.artifacts, key)
