"""The service core: what every surface calls. HTTP (``app``), the web page (``web``), the CLI (``cli``) and MCP
(``mcp_server``) are thin adapters over this module and never import each other; nothing here imports FastAPI.

    >>> kw = Kwiki(Settings(index_dir=Path(".kwiki/index")))                          # doctest: +SKIP
    >>> kw.search(SearchRequest(q="long scoreboard", k=3)).hits[0].id                  # doctest: +SKIP
    'pattern-long-scoreboard-stalls'

The search filters are declared once, in :class:`SearchFilters`; every surface takes its filter names, and
their descriptions, from it.
"""

from __future__ import annotations

import json
import logging
import threading
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from pydantic import BaseModel, Field, ValidationError

from kwiki.errors import BadRequest, BuildDamaged, BuildNotLoaded, IndexMissing, KwikiError, LedgerUnavailable
from kwiki.index.results import PageResponse, SearchResponse
from kwiki.ledger import (
    CORPUS,
    PAGE_TYPE,
    STATUSES,
    Candidate,
    Ledger,
    candidate_architectures,
    candidate_hit,
    candidate_tags,
    check_references,
    ledger_summary,
    lineage,
    open_ledger,
    validation_reason,
)
from kwiki.settings import DEFAULT_K, EXPERIENCE_K, MAX_EXPERIENCE_K, PAGES_PER_SIGNAL, Settings

if TYPE_CHECKING:  # imported where used: `kwiki page` and `kwiki signals` never load the search engine or the model
    from kwiki.index.pages import PageStore
    from kwiki.index.search import Searcher
    from kwiki.index.vectors import Embedder
    from kwiki.profiling.compare import Comparison
    from kwiki.profiling.diagnose import DiagnoseResponse

    from .diagnosis import SignalPages

log = logging.getLogger("kwiki")
#: The builds a request was answered from: an HTTP middleware (``service/build_header.py``) puts a list here for each
#: request and :meth:`Kwiki.get` appends the id of the build it hands out; the threads a request runs in share it.
answering_builds: ContextVar[list[str] | None] = ContextVar("kwiki_answering_builds", default=None)


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

    experience_k: int = Field(EXPERIENCE_K, ge=1, le=MAX_EXPERIENCE_K, description="number of candidates")
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


def run_search(searcher: Searcher, req: SearchRequest, settings: Settings, ledger: Ledger | None = None) -> SearchResponse:
    """The one search path: ``GET|POST /search``, the search page, ``kwiki search`` and MCP all call this.

    With a ``ledger``, the candidates most relevant to the same query come as their own tier (``experience``), from
    the ledger's own text index (one small query, no second corpus search), never mixed above curated pages. A
    ``type``/``corpus`` filter that names only the ledger (``experience`` / ``ledger``) asks for that tier alone.
    """
    check_text(req.q, *(v for values in req.filters().values() for v in values))
    filters, ledger_only = _corpus_filters(searcher, req)
    if ledger_only:  # the ledger's tier alone: the query checked by the corpus search's rules, no corpus search
        if not 1 <= int(req.k) <= settings.max_k:
            raise BadRequest(f"k={req.k} is out of range", hint=f"1 <= k <= {settings.max_k}")
        searcher.normalize_filters(dict(filters))  # unknown values are still a 400
        from kwiki.index.query import clean_query

        resp = SearchResponse(query=clean_query(req.q, settings.max_query_chars), k=req.k, filters=req.filters(), hits=[])
    else:
        resp = searcher.search(req.q, k=req.k, filters=filters, max_chars=settings.max_query_chars, max_k=settings.max_k)
    if ledger is not None:
        tier_k = req.k if ledger_only else EXPERIENCE_K
        shown = {h.id for h in resp.hits}  # a candidate also indexed as a page (kwiki ingest --ledger) is shown once
        try:
            tier = experience_tier(searcher, req, settings, k=tier_k + len(shown), ledger=ledger)["hits"]
        except LedgerUnavailable as exc:
            if ledger_only:
                raise
            log.warning("kwiki: search answered without its experience tier: %s", exc.message)  # the pages still stand
            tier = []
        resp.experience = [h for h in tier if h["id"] not in shown][:tier_k]
    return resp


def _corpus_filters(searcher: Searcher, req: SearchRequest) -> tuple[dict[str, list[str]], bool]:
    """The filters for the corpus search, without the ledger's own type and corpus names when the index has no
    such pages; and whether the request asks for the ledger's tier alone."""
    filters = req.filters()
    only = False
    for name, ledger_value, known in (("type", PAGE_TYPE, searcher.known_types), ("corpus", CORPUS, searcher.known_corpora)):
        values = filters[name]
        if ledger_value in values and ledger_value not in known:
            rest = [v for v in values if v != ledger_value]
            only = only or not rest
            filters[name] = rest
    return filters, only


def _tier_filter(searcher: Searcher, req: SearchRequest) -> Callable[[Candidate], bool] | None:
    """What the request's filters keep of the candidates, or None when they exclude the ledger altogether
    (a page type or corpus other than the ledger's, a language or confidence: candidates have neither)."""
    f = req.filters()
    if (f["type"] and PAGE_TYPE not in f["type"]) or (f["corpus"] and CORPUS not in f["corpus"]) or f["language"] or f["confidence"]:
        return None
    archs = set(searcher.normalize_filters({"architecture": f["architecture"]}).architecture) if f["architecture"] else set()
    tags = {t.lower() for t in f["tag"]}

    def keep(c: Candidate) -> bool:
        return (not tags or bool(tags & candidate_tags(c))) and (not archs or bool(archs & set(candidate_architectures(c))))

    return keep


def page_view(searcher: Searcher | PageStore, key: str, ledger: Ledger | None = None) -> PageResponse:
    """``GET /pages/{id}``: the page (by its id or a link to it), and with a ledger that holds candidates, how those
    that applied it fared. A :class:`~kwiki.index.pages.PageStore` will do: no vectors, no model."""
    resp = searcher.page(key)
    if ledger is not None and resp.type != PAGE_TYPE:
        page = searcher.pages[resp.id]
        try:
            cands = ledger.applying({page.id, page.key})
            if cands or ledger.count():
                resp.ledger = ledger_summary(page.id, cands, page)
        except LedgerUnavailable as exc:  # the page still stands, without its candidates
            log.warning("kwiki: page answered without its ledger summary: %s", exc.message)
    return resp


def experience_tier(searcher: Searcher, req: SearchRequest, settings: Settings, k: int = EXPERIENCE_K,
                    status: str | None = None, ledger: Ledger | None = None) -> dict[str, Any]:
    """The candidates of ``ledger`` most relevant to ``req.q`` under the same filters (the ledger's text search:
    :meth:`kwiki.ledger.Ledger.search`). Returns ``{"hits": [...], "total_candidates": n}``; each hit carries the
    search-hit fields and the candidate's ``status``, ``candidate`` (task/id), ``task``, ``reason``, ``mechanism``,
    ``correct`` (:func:`kwiki.ledger.candidate_hit`)."""
    if status and status not in STATUSES:
        raise BadRequest(f"unknown status '{status}'", hint=f"one of: {', '.join(STATUSES)}")
    if ledger is None:
        return {"hits": [], "total_candidates": 0}
    total = ledger.count()
    keep = _tier_filter(searcher, req)
    if not total or keep is None:
        return {"hits": [], "total_candidates": total}
    found = ledger.search(req.q, k=max(1, min(int(k), settings.max_k)), status=status, keep=keep)
    return {"hits": [candidate_hit(c, score) for c, score in found], "total_candidates": total}


def tiered_search(searcher: Searcher, req: SearchRequest, settings: Settings,
                  experience_k: int = EXPERIENCE_K, status: str | None = None,
                  ledger: Ledger | None = None) -> dict[str, Any]:
    """``{"query", "pages": <SearchResponse>, "experience": <experience_tier>}``: the pages that explain the
    question, then the candidates that tried a fix (one corpus search, one ledger query); a candidate already among
    the pages (indexed with ``kwiki ingest --ledger``) is not repeated. ``status="rejected"`` answers "what was
    already tried and failed" for a topic."""
    pages = run_search(searcher, req, settings)
    tier = experience_tier(searcher, req, settings, k=experience_k + len(pages.hits), status=status, ledger=ledger)
    shown = {h.id for h in pages.hits}
    tier["hits"] = [h for h in tier["hits"] if h["id"] not in shown][:experience_k]
    pages.experience = []
    return {"query": pages.query, "pages": pages.model_dump(), "experience": tier}


def parse_candidate(doc: dict[str, Any], hint: str = "required: task, id; status is candidate|promoted|rejected") -> tuple[Candidate, bool]:
    """A candidate document (JSON of a :class:`~kwiki.ledger.Candidate`) checked; without an id it gets the task's
    next free one when written (the second value says so)."""
    doc = dict(doc)
    auto_id = not doc.get("id")
    if auto_id:
        doc["id"] = "c000"  # replaced under the ledger's lock by the next free id
    try:
        return Candidate.model_validate(doc), auto_id
    except ValidationError as exc:
        raise BadRequest(f"invalid candidate: {validation_reason(exc, 4)}", hint=hint) from None


def add_candidate(ledger: Ledger, cand: Candidate, page_ids: set[str] | None, auto_id: bool = False) -> Candidate:
    """The one way every surface adds a candidate (``POST /ledger``, ``kwiki ledger add``, MCP): its parent must be in
    the ledger and its technique and pattern ids pages of the index (``page_ids``; None: no index to check against),
    else :class:`~kwiki.errors.UnknownReference` with the nearest ids. Written in one transaction, it is searchable
    at once: the experience tier reads the ledger itself."""
    check_references(ledger, cand, page_ids)
    return ledger.append(cand, auto_id=auto_id)


def set_status(ledger: Ledger, ref: str, status: str, reason: str | None = None) -> Candidate:
    """Promote or reject a candidate (or put it back to ``candidate``): a new version with that status and reason."""
    if status not in STATUSES:
        raise BadRequest(f"unknown status '{status}'", hint=f"one of: {', '.join(STATUSES)}")
    cand = ledger.get(ref)
    update: dict[str, Any] = {"status": status}
    if reason is not None:
        update["reason"] = reason
    return ledger.append(cand.model_copy(update=update))


def candidate_lineage(ledger: Ledger, ref: str) -> dict[str, Any]:
    """``{"candidate", "ancestors" (root first), "descendants" (tree rows, pre-order)}`` of one candidate."""
    cand = ledger.get(ref)
    below = ledger.descendants(cand.key)
    rows = [r.model_dump() for t in lineage([cand, *below]) for r in t.rows if r.key != cand.key]  # the subtree below it
    return {"candidate": cand.model_dump(mode="json", exclude_none=True),
            "ancestors": [c.model_dump(mode="json", exclude_none=True) for c in ledger.ancestors(cand.key)],
            "descendants": rows}


def index_page_ids(settings: Settings, searcher: Searcher | None = None) -> set[str] | None:
    """The page ids (and keys) of the served index, or of the current build on disk read without loading it (a
    CLI command checking a candidate's technique ids); None when there is no index."""
    if searcher is not None:
        return {p.id for p in searcher.pages.values()} | set(searcher.pages)
    from kwiki.index.build import current_build

    pages = current_build(Path(settings.index_dir)) / "pages.jsonl"
    if not pages.is_file():
        return None
    out: set[str] = set()
    with open(pages, encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            out |= {str(row.get("id") or ""), str(row.get("key") or "")}
    out.discard("")
    return out


def signals_doc() -> dict[str, Any]:
    """``GET /signals``: the NCU signals kwiki evaluates and the metric catalog."""
    from kwiki.profiling import catalog
    from kwiki.profiling import signals as sig

    return {"signals": sig.as_list(), "metrics": catalog.load_catalog().as_list()}


class Kwiki:
    """The open index of one process, shared by its surfaces; ``reload`` builds the new one aside and swaps it.

    It also keeps what belongs to the loaded index: the model (loaded once) and the diagnosis pages per signal; and
    the ledger (``workspace``, else ``KWIKI_LEDGER_URL``, else the default workspace: :func:`kwiki.ledger.open_ledger`).
    With ``lazy`` (MCP) the index is opened on first use, and retried on each call until one exists; otherwise
    (HTTP, CLI) the caller loads it.
    """

    def __init__(self, settings: Settings, lazy: bool = False, workspace: Path | None = None) -> None:
        self.settings = settings
        self.ledger = open_ledger(settings, workspace)
        self.lazy = lazy
        self.searcher: Searcher | None = None
        self.error: KwikiError | None = None
        self.lock = threading.Lock()
        self.embedder: Embedder | None = None
        self.signal_pages: SignalPages | None = None
        #: The published build this replica was told to serve (``KWIKI_BUILD``, a reload to a build); None: ``current``.
        self.expected: str | None = settings.build

    def load(self, build: str | None = None) -> None:
        """Open the build to serve and swap it in: published build ``build`` when given (it becomes the build this
        replica is told to serve, ``expected``), else the expected one, else the index root's ``current``.
        While the expected build is not the one served, the replica is not ready (:meth:`readiness`)."""
        from kwiki.index.search import Searcher

        from .diagnosis import SignalPages

        if build is not None:
            self.expected = build
        try:
            try:
                if self.expected:
                    from kwiki.index.publish import open_published

                    where = open_published(self.settings.published_dir, self.expected)
                else:
                    where = Path(self.settings.index_dir)
                new = Searcher.open(where, embedder=self.embedder, threads=self.settings.embed_threads)
            except KwikiError:
                raise
            except Exception as exc:  # noqa: BLE001 - a truncated or corrupt file of the build, whatever raised
                log.warning("kwiki: the build cannot be opened: %r", exc)
                raise BuildDamaged(f"the index build cannot be opened ({type(exc).__name__})",
                                   hint="rebuild it with `kwiki ingest --force`; the build served before is still served") from None
        except KwikiError as exc:
            if self.searcher is None or self.expected:
                self.error = exc
            raise
        if self.embedder is None:
            self.embedder = new._embedder()  # load the model once, before serving
            new.embedder = self.embedder
        self.searcher, self.signal_pages, self.error = new, SignalPages(new), None

    def reload(self, build: str | None = None) -> None:
        """Switch to published build ``build``, else to the expected build or the newest; one reload at a time.
        Requests keep the build they started with; the one being replaced serves until the new one is open."""
        with self.lock:
            self.load(build)

    @property
    def build_id(self) -> str | None:
        """The id of the build served now, or None."""
        return self.searcher.manifest.build_id if self.searcher is not None else None

    def readiness(self) -> KwikiError | None:
        """None when this replica serves what it was told to (the expected build, or any build when none is
        expected); else the error /health answers 503 with (:class:`~kwiki.errors.BuildNotLoaded`, ``no_index``)."""
        if self.expected and self.build_id != self.expected:
            why = f": {self.error.message}" if self.error is not None else " (loading)"
            return BuildNotLoaded(f"told to serve build {self.expected}, serving {self.build_id or 'none'}{why}",
                                  hint=(self.error.hint if self.error is not None and self.error.hint else
                                        "wait until it is loaded; a rollout (`kwiki rollout`) keeps it out of rotation meanwhile"))
        if self.searcher is None:
            return self.error or IndexMissing("no index loaded", hint="run `kwiki ingest`, then restart the server")
        return None

    def get(self) -> Searcher:
        """The open index, or the error that keeps it from opening."""
        if self.searcher is None and self.lazy:
            with self.lock:
                if self.searcher is None:
                    self.load()
        searcher = self.searcher  # once: a reload may swap it meanwhile, and this is the build that answers
        if searcher is None:  # told to serve a build it could not load: 503 build_not_loaded, whatever the cause
            raise (self.readiness() if self.expected else None) or self.error or IndexMissing(
                "no index loaded", hint="run `kwiki ingest`, then restart the server")
        answered = answering_builds.get()
        if answered is not None:
            answered.append(searcher.manifest.build_id)
        return searcher

    def get_or_none(self) -> Searcher | None:
        """The open index, or None: a diagnosis still works without one (no ranked pages then)."""
        try:
            return self.get()
        except KwikiError:
            return None

    # the operations, each over the open index (and the ledger)
    def search(self, req: SearchRequest) -> SearchResponse:
        return run_search(self.get(), req, self.settings, self.ledger)

    def page(self, key: str) -> PageResponse:
        return page_view(self.get(), key, self.ledger)

    def tiered_search(self, req: SearchRequest, experience_k: int = EXPERIENCE_K,
                      status: str | None = None) -> dict[str, Any]:
        return tiered_search(self.get(), req, self.settings, experience_k, status, self.ledger)

    def page_ids(self) -> set[str] | None:
        """The index's page ids (what a candidate's technique and pattern ids must name); None without an index."""
        return index_page_ids(self.settings, self.searcher)

    def add_candidate(self, doc: dict[str, Any] | Candidate, auto_id: bool = False) -> Candidate:
        """Check and write one candidate (:func:`add_candidate`); a document without an id gets the next free one."""
        if isinstance(doc, Candidate):
            return add_candidate(self.ledger, doc, self.page_ids(), auto_id=auto_id)
        cand, auto = parse_candidate(doc)
        return add_candidate(self.ledger, cand, self.page_ids(), auto_id=auto)

    def set_status(self, ref: str, status: str, reason: str | None = None) -> Candidate:
        return set_status(self.ledger, ref, status, reason)

    def lineage(self, ref: str) -> dict[str, Any]:
        return candidate_lineage(self.ledger, ref)

    def diagnose(self, *, data: bytes | None = None, filename: str = "", metrics: dict[str, Any] | None = None,
                 text: str | None = None, k: int = PAGES_PER_SIGNAL, searcher: Searcher | None = None, baseline: bytes | None = None,
                 baseline_filename: str = "", kernel: str | None = None,
                 source: bytes | None = None, deadline: float | None = None) -> DiagnoseResponse | Comparison:
        """Diagnose one export, metrics object or text (or compare an export with its ``baseline``); pages come
        from the open index when there is one (:func:`kwiki.service.diagnosis.diagnose_request`)."""
        from .diagnosis import diagnose_request

        searcher = searcher or self.get_or_none()
        return diagnose_request(data=data, filename=filename, metrics=metrics, text=text, searcher=searcher, k=k,
                                max_bytes=self.settings.max_upload_bytes,
                                pages=self.signal_pages if searcher is self.searcher else None, baseline=baseline,
                                baseline_filename=baseline_filename, kernel=kernel, source=source, deadline=deadline)


__all__ = ["FILTERS", "Kwiki", "SearchFilters", "SearchQuery", "SearchRequest", "TieredQuery", "answering_builds",
           "add_candidate", "candidate_lineage", "experience_tier", "index_page_ids", "page_view", "parse_candidate", "run_search",
           "set_status", "signals_doc", "tiered_search"]
