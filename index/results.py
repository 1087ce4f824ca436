"""Response models shared by the CLI (``--json``), HTTP and MCP surfaces."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class SourceRef(BaseModel):
    id: str
    title: str | None = None
    url: str | None = None
    type: str | None = None
    resolved: bool = False


class Why(BaseModel):
    bm25_rank: int | None = None
    vector_rank: int | None = None
    aliases: list[str] = Field(default_factory=list)
    signals: list[str] = Field(default_factory=list)
    type_prior: float = 1.0
    matched_terms: list[str] = Field(default_factory=list)
    sentence: str | None = Field(
        None, description="The page's sentence, or a question the page lists, whose vector ranked the chunk, when one did")
    fix_of: str | None = Field(None, description="The leading pattern page that names this page as a fix, when it lifted it")
    related_to: str | None = Field(None, description="The leading page that lists this page as related, when it lifted it")
    clause: str | None = Field(
        None, description="For a long query read clause by clause: the clause this page's sections match most closely")


class Hit(BaseModel):
    id: str  # the page key: use it with GET /pages/{id}
    page_id: str
    title: str
    type: str
    corpus: str
    path: str
    score: float
    confidence: str | None = None
    reproducibility: str | None = None
    snippet: str
    heading_path: list[str] = Field(default_factory=list)
    lines: tuple[int, int] | None = None
    sources: list[SourceRef] = Field(default_factory=list)
    why: Why = Field(default_factory=Why)


class Correction(BaseModel):
    typed: str = Field(description="A query word no index field has seen")
    searched: str = Field(description="The indexed term (as the analyzer stems it) searched in its place, at half weight")

    def __str__(self) -> str:
        return f"{self.typed} -> {self.searched}"


class Interpreted(BaseModel):
    """How kwiki read the query, beyond the words typed."""

    aliases: list[str] = Field(default_factory=list, description="Alias groups matched; their variants were searched too")
    corrections: list[Correction] = Field(default_factory=list, description="Likely typos and what was searched for them")
    clauses: list[str] = Field(default_factory=list, description="A long query's clauses, each embedded on its own")


class SearchResponse(BaseModel):
    query: str
    k: int
    filters: dict[str, list[str]] = Field(default_factory=dict)
    hits: list[Hit]
    signals: list[dict[str, Any]] = Field(default_factory=list)  # NCU vocabulary recognized in the query
    interpreted: Interpreted = Field(default_factory=Interpreted)
    experience: list[dict[str, Any]] = Field(default_factory=list)  # ledger candidates that tried a fix (own tier)
    no_match: bool = Field(False, description="No page really matches the query (the relevance floor): the hits "
                           "are only the nearest pages, few, and should not be read as answers")
    note: str | None = Field(None, description="Why the query has no real match, in words, when it has none")
    took_ms: float = 0.0
    stages_ms: dict[str, float] = Field(default_factory=dict, description="Time per pipeline stage (plan includes "
                                        "embedding the query), for finding what a slow query spent its time on")
    index: dict[str, Any] = Field(default_factory=dict)


class PageResponse(BaseModel):
    id: str
    page_id: str
    title: str
    type: str
    corpus: str
    path: str
    confidence: str | None = None
    reproducibility: str | None = None
    url: str | None = None
    facets: dict[str, list[str]] = Field(default_factory=dict)
    frontmatter: dict[str, Any] = Field(default_factory=dict)
    body: str
    questions: list[str] = Field(default_factory=list, description="Questions the page lists as answering")
    sources: list[SourceRef] = Field(default_factory=list)
    related: list[SourceRef] = Field(default_factory=list)
    artifacts: list[dict[str, Any]] = Field(default_factory=list)
    provenance: dict[str, Any] = Field(default_factory=dict)
    ledger: dict[str, Any] | None = None  # candidates that applied this page, promoted vs rejected
