"""The records ingest produces: pages, chunks, artifacts and the ingest report."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field

FACETS = ("tags", "techniques", "hardware_features", "kernel_types", "languages", "architectures", "symptoms")
#: The one id grammar, for declared and derived ids alike: a letter or digit, then letters, digits, '.', '_', '-'.
#: No ':' (``corpus:id`` is how the index qualifies a key, so a page can never declare another corpus' id), no '/',
#: no spaces or invisible characters: every id is a URL path segment /pages/{id} can serve.
ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
ID_MAX_CHARS = 200


def id_problem(pid: str) -> str | None:
    """Why ``pid`` is not a valid page id, or None when it is.

    >>> id_problem("pattern-tail-effect") is None, id_problem("F:pattern-x"), id_problem("a b")[:24]
    (True, "id 'F:pattern-x' names a corpus ('F:'): the corpus prefix is added by the index, never declared", "id 'a b' is not a valid ")
    """
    shown = repr(pid[:60] + ("..." if len(pid) > 60 else ""))
    if ID_PATTERN.fullmatch(pid):
        return None
    if len(pid) > ID_MAX_CHARS:
        return f"id {shown} is {len(pid)} characters, over the {ID_MAX_CHARS}-character limit"
    if ":" in pid:
        return f"id {shown} names a corpus ('{pid.partition(':')[0][:40]}:'): the corpus prefix is added by the index, never declared"
    return (f"id {shown} is not a valid id: use letters, digits, '.', '_' and '-', starting with a letter or digit "
            "(no spaces, '/', ':' or invisible characters)")


class Provenance(BaseModel):
    """Where a page (and so each of its chunks) came from."""

    corpus: str
    path: str  # relative to the corpus root
    sha256: str
    url: str | None = None
    sources: list[str] = Field(default_factory=list)
    confidence: str | None = None
    retrieved_at: str | None = None


class Page(BaseModel):
    """One markdown page of a corpus, with normalized frontmatter.

    ``key`` is unique in an index: the page ``id`` or, when another corpus already
    has that id, ``<corpus>:<id>``.
    """

    key: str
    id: str
    type: str
    title: str
    path: str
    corpus: str
    facets: dict[str, list[str]] = Field(default_factory=dict)
    confidence: str | None = None
    reproducibility: str | None = None
    url: str | None = None
    sources: list[str] = Field(default_factory=list)
    related: list[str] = Field(default_factory=list)
    prerequisites: list[str] = Field(default_factory=list)
    candidate_techniques: list[str] = Field(default_factory=list)
    performance_claims: list[dict[str, Any]] = Field(default_factory=list)
    aliases: list[str] = Field(default_factory=list)
    questions: list[str] = Field(default_factory=list)  # questions the page answers, in a developer's words
    ncu_signals: list[dict[str, Any]] = Field(default_factory=list)
    artifacts: list[str] = Field(default_factory=list)
    provenance: Provenance
    meta: dict[str, Any] = Field(default_factory=dict)  # the whole frontmatter, unknown fields included
    body: str = ""
    body_line: int = 1

    def facet(self, name: str) -> list[str]:
        return self.facets.get(name, [])


class PageSource(BaseModel):
    """Pages made outside a corpus folder (e.g. ledger candidates), indexed beside the corpora: the index reads
    only the pages, ``name`` and ``origin`` (what the ingest report lists as the source's root)."""

    name: str
    origin: str
    pages: list[Page] = Field(default_factory=list)


class Chunk(BaseModel):
    """A retrievable piece of a page: one section, or part of a long one."""

    id: str  # "<page key>#<n>"
    page_key: str
    corpus: str
    heading_path: list[str]
    text: str
    line_start: int  # 1-based, in the page file
    line_end: int
    kind: str = "prose"  # prose | code | meta
    content_hash: str
    provenance: Provenance


class Artifact(BaseModel):
    """A code bundle described by a PROVENANCE.yaml or MANIFEST.yaml."""

    id: str
    corpus: str
    path: str  # the bundle folder, relative to the corpus root
    kind: str  # provenance | manifest
    page_ids: list[str] = Field(default_factory=list)
    files: list[dict[str, Any]] = Field(default_factory=list)
    asset_mode: str | None = None
    license: str | None = None
    origin_url: str | None = None
    measurements: list[dict[str, Any]] = Field(default_factory=list)
    meta: dict[str, Any] = Field(default_factory=dict)


class Problem(BaseModel):
    """A file that was skipped, or a page with a defect that did not stop it."""

    corpus: str
    path: str
    reason: str


class IngestReport(BaseModel):
    corpora: dict[str, str] = Field(default_factory=dict)  # name -> root
    pages_by_type: dict[str, int] = Field(default_factory=dict)
    chunks_by_type: dict[str, int] = Field(default_factory=dict)
    artifacts: int = 0
    skipped: list[Problem] = Field(default_factory=list)
    duplicates: list[Problem] = Field(default_factory=list)
    warnings: list[Problem] = Field(default_factory=list)
    unknown_vocabulary: dict[str, list[str]] = Field(default_factory=dict)  # facet -> values

    @property
    def pages(self) -> int:
        return sum(self.pages_by_type.values())

    @property
    def chunks(self) -> int:
        return sum(self.chunks_by_type.values())
