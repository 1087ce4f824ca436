"""The service core: what every surface calls. HTTP (``app``), the web page (``web``), the CLI (``cli``) and MCP
(``mcp_server``) are thin adapters over this module and never import each other; nothing here imports FastAPI.

    >>> kw = Kwiki(Settings(index_dir=Path(".kwiki/index")))                          # doctest: +SKIP
    >>> kw.search(SearchRequest(q="long scoreboard", k=3)).hits[0].id                  # doctest: +SKIP
    'pattern-long-scoreboard-stalls'

The search filters are declared once, in :class:`SearchFilters`; every surface takes its filter names, and
their descriptions, from it.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from pydantic import BaseModel, Field

from kwiki.errors import BadRequest, BuildDamaged, IndexMissing, KwikiError
from kwiki.index.results import PageResponse, SearchResponse
from kwiki.index.search import Searcher
from kwiki.index.vectors import Embedder
from kwiki.ledger import PAGE_TYPE, STATUSES, candidate_fields, indexed_candidates, ledger_summary
from kwiki.profiling.compare import Comparison
from kwiki.profiling.diagnose import DiagnoseResponse
from kwiki.settings import DEFAULT_K, PAGES_PER_SIGNAL, Settings

from .diagnosis import SignalPages, diagnose_request

log = logging.getLogger("kwiki")
#: Candidates shown in the experience tier of a search (``/search``'s ``experience``, ``/ledger/search``).
DEFAULT_EXPERIENCE_K = 5


class SearchFilters(BaseModel):
    """Optional filters; values within one filter are OR-ed, filters are AND-ed."""

    type: list[str] = Field(default_factory=list, description="Page types, e.g. pattern, technique, hardware, source-pr")
    tag: list[str] = Field(default_factory=list, description="Tags, techniques, hardware features or symptoms")
    architecture: list[str] = Field(default_factory=list, description="sm90, sm100 or a GPU name: H100, H200, B200")
    language: list[str] = Field(default_factory=list, description="Kernel languages, e.g. cuda, cute, triton")
    confidence: list[str] = Field(default_factory=list, description="verified, source-reported, inferred, experimental")
    corpus: list[str] = Field(default_factory=list, description="Corpus names, e.g. kwiki, kernelwiki")

    def filters(self) -> dict[str, list[str]]:
        """The filters as ``Searcher.search`` takes them (empty values dropped: a form's "any")."""
        return {name: [v for v in getattr(self, name) if v] for name in SearchFilters.model_fields}


#: The filter names, in the order every surface lists them.
FILTERS = tuple(SearchFilters.model_fields)


class SearchRequest(SearchFilters):
    q: str = Field(..., description="The question, symptom, metric name or rule message")
    k: int = Field(DEFAULT_K, description="Number of pages to return")


class SearchQuery(SearchRequest):
    """A search request read from a query string or a form (``GET /search``, the search page): ``q`` may be
    missing there, and the search then says why that is wrong."""

    q: str = ""


class TieredQuery(SearchQuery):
    """``/ledger/search``: a search, and how many candidates to show after the pages (of which status)."""

    experience_k: int = Field(DEFAULT_EXPERIENCE_K, ge=1, le=50, description="number of candidates")
    status: str | None = Field(None, description="only candidates with this status, e.g. rejected")


def check_text(*values: str) -> None:
    """Refuse text that is not valid Unicode (a lone surrogate such as ``"\\ud800"`` from a JSON escape):
    the tokenizer, the index and the JSON encoder of the answer all fail on it, which was a 500."""
    for value in values:
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise BadRequest(f"text contains a lone surrogate at character {exc.start}",
                                 hint="send valid Unicode: a \\ud800-\\udfff escape must be half of a pair") from None


def run_search(searcher: Searcher, req: SearchRequest, settings: Settings) -> SearchResponse:
    """The one search path: ``GET|POST /search``, the search page, ``kwiki search`` and MCP all call this.

    When the index holds ledger candidates and no type was asked for, they come as their own tier
    (``experience``), never mixed above curated pages.
    """
    check_text(req.q, *(v for values in req.filters().values() for v in values))
    resp = searcher.search(req.q, k=req.k, filters=req.filters(), max_chars=settings.max_query_chars,
                           max_k=settings.max_k)
    if not req.type and PAGE_TYPE in searcher.known_types:
        resp.experience = experience_tier(searcher, req, settings)["hits"]
    return resp


def page_view(searcher: Searcher, key: str) -> PageResponse:
    """``GET /pages/{id}``: the page, and when the index holds ledger candidates, how those that applied it fared."""
    resp = searcher.page(key)
    if PAGE_TYPE in searcher.known_types and resp.type != PAGE_TYPE:
        page = searcher.pages[resp.id]
        resp.ledger = ledger_summary(page.id, indexed_candidates(searcher.pages.values()), page)
    return resp


def experience_tier(searcher: Searcher, req: SearchRequest, settings: Settings, k: int = DEFAULT_EXPERIENCE_K,
                    status: str | None = None) -> dict[str, Any]:
    """The candidates most relevant to ``req.q`` (same filters, type forced to ``experience``).

    Candidates carry a type prior of 0.7, so in a corpus of curated pages they rarely reach the first ten hits of
    a plain search -- by design. Returns ``{"hits": [...], "total_candidates": n}``; each hit is a search hit
    plus the candidate's ``status``, ``candidate`` (task/id), ``task``, ``reason``, ``mechanism`` and ``correct``.
    """
    if status and status not in STATUSES:
        raise BadRequest(f"unknown status '{status}'", hint=f"one of: {', '.join(STATUSES)}")
    total = sum(1 for p in searcher.pages.values() if p.type == PAGE_TYPE)
    if not total or (req.type and PAGE_TYPE not in req.type):
        return {"hits": [], "total_candidates": total}
    sub = req.model_copy(update={"type": [PAGE_TYPE], "k": max(1, min(int(k), settings.max_k)),
                                 "tag": list(req.tag) + ([status] if status else [])})
    resp = run_search(searcher, sub, settings)
    hits = [{**h.model_dump(), **candidate_fields(searcher.pages.get(h.id))} for h in resp.hits]
    if status:  # the tag filter also matches a task or kernel named like a status; keep the real ones
        hits = [h for h in hits if h["status"] == status]
    return {"hits": hits, "total_candidates": total}


def tiered_search(searcher: Searcher, req: SearchRequest, settings: Settings,
                  experience_k: int = DEFAULT_EXPERIENCE_K, status: str | None = None) -> dict[str, Any]:
    """``{"query", "pages": <SearchResponse>, "experience": <experience_tier>}``: the pages that explain the
    question, then the candidates that tried a fix; a candidate already among the pages is not repeated.
    ``status="rejected"`` answers "what was already tried and failed" for a topic."""
    pages = run_search(searcher, req, settings)
    tier = experience_tier(searcher, req, settings, k=experience_k + len(pages.hits), status=status)
    shown = {h.id for h in pages.hits}
    tier["hits"] = [h for h in tier["hits"] if h["id"] not in shown][:experience_k]
    return {"query": pages.query, "pages": pages.model_dump(), "experience": tier}


def signals_doc() -> dict[str, Any]:
    """``GET /signals``: the NCU signals kwiki evaluates and the metric catalog."""
    from kwiki.profiling import catalog
    from kwiki.profiling import signals as sig

    return {"signals": sig.as_list(), "metrics": catalog.load_catalog().as_list()}


class Kwiki:
    """The open index of one process, shared by its surfaces; ``reload`` builds the new one aside and swaps it.

    It also keeps what belongs to the loaded index: the model (loaded once) and the diagnosis pages per signal.
    With ``lazy`` (MCP) the index is opened on first use, and retried on each call until one exists; otherwise
    (HTTP, CLI) the caller loads it.
    """

    def __init__(self, settings: Settings, lazy: bool = False) -> None:
        self.settings = settings
        self.lazy = lazy
        self.searcher: Searcher | None = None
        self.error: KwikiError | None = None
        self.lock = threading.Lock()
        self.embedder: Embedder | None = None
        self.signal_pages: SignalPages | None = None

    def load(self) -> None:
        try:
            try:
                new = Searcher.open(self.settings.index_dir, embedder=self.embedder, threads=self.settings.embed_threads)
            except KwikiError:
                raise
            except Exception as exc:  # noqa: BLE001 - a truncated or corrupt file of the build, whatever raised
                log.warning("kwiki: the build cannot be opened: %r", exc)
                raise BuildDamaged(f"the index build cannot be opened ({type(exc).__name__})",
                                   hint="rebuild it with `kwiki ingest --force`; the build served before is still served") from None
        except KwikiError as exc:
            if self.searcher is None:
                self.error = exc
            raise
        if self.embedder is None:
            self.embedder = new._embedder()  # load the model once, before serving
            new.embedder = self.embedder
        self.searcher, self.signal_pages, self.error = new, SignalPages(new), None

    def reload(self) -> None:
        """Switch to the newest build; one reload at a time."""
        with self.lock:
            self.load()

    def get(self) -> Searcher:
        """The open index, or the error that keeps it from opening."""
        if self.searcher is None and self.lazy:
            with self.lock:
                if self.searcher is None:
                    self.load()
        if self.searcher is None:
            raise self.error or IndexMissing("no index loaded", hint="run `kwiki ingest`, then restart the server")
        return self.searcher

    def get_or_none(self) -> Searcher | None:
        """The open index, or None: a diagnosis still works without one (no ranked pages then)."""
        try:
            return self.get()
        except KwikiError:
            return None

    # the operations, each over the open index
    def search(self, req: SearchRequest) -> SearchResponse:
        return run_search(self.get(), req, self.settings)

    def page(self, key: str) -> PageResponse:
        return page_view(self.get(), key)

    def tiered_search(self, req: SearchRequest, experience_k: int = DEFAULT_EXPERIENCE_K,
                      status: str | None = None) -> dict[str, Any]:
        return tiered_search(self.get(), req, self.settings, experience_k, status)

    def diagnose(self, *, data: bytes | None = None, filename: str = "", metrics: dict[str, Any] | None = None,
                 text: str | None = None, k: int = PAGES_PER_SIGNAL, searcher: Searcher | None = None, baseline: bytes | None = None,
                 baseline_filename: str = "", kernel: str | None = None,
                 source: bytes | None = None, deadline: float | None = None) -> DiagnoseResponse | Comparison:
        """Diagnose one export, metrics object or text (or compare an export with its ``baseline``); pages come
        from the open index when there is one (:func:`kwiki.service.diagnosis.diagnose_request`)."""
        searcher = searcher or self.get_or_none()
        return diagnose_request(data=data, filename=filename, metrics=metrics, text=text, searcher=searcher, k=k,
                                max_bytes=self.settings.max_upload_bytes,
                                pages=self.signal_pages if searcher is self.searcher else None, baseline=baseline,
                                baseline_filename=baseline_filename, kernel=kernel, source=source, deadline=deadline)


__all__ = ["DEFAULT_EXPERIENCE_K", "FILTERS", "Kwiki", "SearchFilters", "SearchQuery", "SearchRequest", "TieredQuery", "experience_tier",
           "page_view", "run_search", "signals_doc", "tiered_search"]
