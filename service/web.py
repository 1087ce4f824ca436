"""The search page: server-rendered HTML over the same code paths as the JSON API.

    GET  /                      query box, filters, result cards   (run_search, as GET /search)
    GET  /ui/page/{id}          a page with its sources, related pages and artifacts (Searcher.page)
    GET  /ui/diagnose           upload form for an Nsight Compute export
    POST /ui/diagnose           fired signals with evidence and ranked pages (diagnose_request, as POST /diagnose)
    GET  /ui/static/{name}      the CSS and the little JavaScript

Registered in :func:`kwiki.service.app.create_app` with ``app.include_router(web.router)``.
Errors render as a message on the page (with the same text and hint as the JSON error), never a trace.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, File, Form, Query, Request, UploadFile
from fastapi.responses import FileResponse, HTMLResponse, Response
from fastapi.templating import Jinja2Templates
from markupsafe import Markup

from kwiki.errors import BadInput, BadRequest, KwikiError, NotFound
from kwiki.index.results import SearchResponse
from kwiki.index.search import Searcher
from kwiki.profiling.compare import Comparison
from kwiki.profiling.diagnose import DiagnoseResponse, PageRef

from .core import Kwiki, SearchFilters, SearchRequest
from .web_markdown import Resolver, http_url, render_markdown, render_snippet

HERE = Path(__file__).resolve().parent
STATIC = HERE / "static"
CONFIDENCE = ("verified", "source-reported", "inferred", "experimental")
#: offered in the architecture filter besides the index's own vocabulary (GPU names resolve through aliases)
GPU_NAMES = ("H100", "H200", "B200", "GB200")
_STOP = frozenset("the and for with are was that this from have has not but its into only of my our your a an to in on at is it".split())

router = APIRouter(include_in_schema=False)
templates = Jinja2Templates(directory=str(HERE / "templates"))


def query_terms(q: str) -> list[str]:
    """Words of the query worth highlighting (no stop words, no 1-letter tokens)."""
    return [w for w in re.findall(r"[A-Za-z0-9_.]+", q) if len(w) >= 3 and w.lower() not in _STOP]


def page_resolver(searcher: Searcher, corpus: str, path: str) -> Resolver:
    """Resolves the relative markdown links of the page at ``path`` of ``corpus`` (``../techniques/stream-k.md``)
    to the keys of the pages they name, so links between wiki pages open in the page view."""
    by_path = _paths(searcher).get(corpus, {})
    base = posixpath.dirname(path)

    def resolve(href: str) -> str | None:
        if "://" in href or not href.endswith(".md"):
            return None
        return by_path.get(posixpath.normpath(posixpath.join(base, href)))

    return resolve


_held: dict[str, tuple[Searcher, dict[str, dict[str, str]]]] = {}


def _paths(searcher: Searcher) -> dict[str, dict[str, str]]:
    """corpus -> page path -> page key, built once per open index (only the one being served is kept)."""
    held = _held.get("paths")
    if held is None or held[0] is not searcher:
        paths: dict[str, dict[str, str]] = {}
        for p in searcher.pages.values():
            paths.setdefault(p.corpus, {})[p.path] = p.key
        held = _held["paths"] = (searcher, paths)
    return held[1]


def hit_snippets(searcher: Searcher, resp: SearchResponse, terms: list[str]) -> dict[str, Markup]:
    """Each hit's snippet rendered from the page's own markdown over the hit chunk's lines (links, code and tables
    as such, headings as lead-ins, the query's terms marked); the API's plain snippet where the chunk has no lines
    of the body (a page's front matter)."""
    out = {}
    for h in resp.hits:
        page = searcher.pages.get(h.id)
        text = ""
        if page is not None and h.lines:
            text = "\n".join(page.body.splitlines()[max(0, h.lines[0] - page.body_line): max(0, h.lines[1] - page.body_line + 1)])
        out[h.id] = render_snippet(text if text.strip() else h.snippet, terms + h.why.matched_terms,
                                   page_resolver(searcher, h.corpus, h.path))
    return out


templates.env.filters["http_url"] = http_url


def _state(request: Request) -> Kwiki:
    state: Kwiki = request.app.state.kwiki
    return state


def _facet_options(searcher: Searcher | None) -> dict[str, list[str]]:
    if searcher is None:
        return {"type": [], "architecture": list(GPU_NAMES), "confidence": list(CONFIDENCE), "corpus": []}
    pages = searcher.pages.values()
    return {
        "type": sorted({p.type for p in pages}),
        "architecture": sorted(searcher.arch_vocab) + list(GPU_NAMES),
        "confidence": list(CONFIDENCE),
        "corpus": sorted({p.corpus for p in pages}),
    }


def _error(exc: KwikiError) -> dict[str, Any]:
    return {"code": exc.code, "message": exc.message, "hint": exc.hint}


def _render(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    return templates.TemplateResponse(request, name, context, status_code=status)


class PageQuery(SearchFilters):
    """The search page's query string: the filters every surface declares (``SearchFilters``), the query, and
    ``k`` read as text, so a bad value is shown on the page rather than answered with JSON."""

    q: str = ""
    k: str = "10"


@router.get("/", response_class=HTMLResponse)
def search_page(request: Request, page: Annotated[PageQuery, Query()]) -> HTMLResponse:
    """The search page; with ``q`` it runs the same search as ``GET /search`` and shows the hits as cards."""
    state = _state(request)
    # Empty selects submit "", which means "any" (``SearchFilters.filters`` drops them).
    chosen = page.filters()
    ctx: dict[str, Any] = {"q": page.q, "k": page.k, "chosen": chosen, "resp": None, "error": None,
                           "terms": query_terms(page.q)}
    status = 200
    try:
        searcher = state.get()
        ctx["options"] = _facet_options(searcher)
        if page.q.strip():
            ctx["resp"] = resp = state.search(SearchRequest(q=page.q, k=_int(page.k, "k"), **chosen))
            ctx["snippets"] = hit_snippets(searcher, resp, ctx["terms"])
    except KwikiError as exc:
        ctx.setdefault("options", _facet_options(None))
        ctx["error"], status = _error(exc), exc.status
    return _render(request, "search.html", status, **ctx)


@router.get("/ui/page/{page_id:path}", response_class=HTMLResponse)
def page_view(request: Request, page_id: str, q: Annotated[str, Query()] = "") -> HTMLResponse:
    """One page (the same document as ``GET /pages/{id}``) rendered, with links to its sources."""
    try:
        searcher = _state(request).get()
        page = _state(request).page(page_id)
    except KwikiError as exc:
        return _render(request, "page.html", exc.status, page=None, error=_error(exc), q=q)
    return _render(request, "page.html", page=page, error=None, q=q, body=render_markdown(page.body, page_resolver(searcher, page.corpus, page.path)))


@router.get("/ui/diagnose", response_class=HTMLResponse)
def diagnose_form(request: Request) -> HTMLResponse:
    return _render(request, "diagnose.html", result=None, error=None, filename="", text="",
                   indexed=_state(request).get_or_none() is not None)


@router.post("/ui/diagnose", response_class=HTMLResponse)
async def diagnose_upload(
    request: Request,
    file: Annotated[UploadFile | None, File(description="Nsight Compute export: raw/details CSV, JSON or .ncu-rep")] = None,
    text: Annotated[str, Form(description="or pasted ncu output / rule messages")] = "",
    k: Annotated[str, Form()] = "5",
    source: Annotated[UploadFile | None, File(description="the same report's --page source --csv export: hotspots")] = None,
    baseline: Annotated[UploadFile | None, File(description="the parent's export: compare the upload with it")] = None,
) -> HTMLResponse:
    """Diagnose an upload (or pasted text) with ``diagnose_request``, what ``POST /diagnose`` calls, and show it; with
    a ``baseline`` export, compare the upload with it (``kwiki diagnose AFTER --baseline BEFORE``) and show both."""
    import asyncio

    from .limits import within_deadline

    state = _state(request)
    settings = state.settings
    filename = (file.filename or "upload") if file is not None and file.filename else ""
    searcher = state.get_or_none()
    comparison: Comparison | None = None
    try:
        if filename:
            data = await file.read(settings.max_upload_bytes + 1)  # type: ignore[union-attr]
            if not data:
                raise BadInput("the uploaded file is empty", hint="choose an export from `ncu --page raw --csv`")
            kwargs: dict[str, Any] = {"data": data, "filename": filename}
            if source is not None and source.filename:
                kwargs["source"] = await source.read(settings.max_upload_bytes + 1)
            if baseline is not None and baseline.filename:
                kwargs["baseline"] = await baseline.read(settings.max_upload_bytes + 1)
                kwargs["baseline_filename"] = baseline.filename
                if not kwargs["baseline"]:
                    raise BadInput("the baseline file is empty", hint="choose the parent kernel's export, captured the same way")
        elif baseline is not None and baseline.filename:
            raise BadInput("a baseline needs an export to compare with it", hint="choose the candidate's export as the file")
        elif text.strip():
            kwargs = {"text": text}
        else:
            raise BadInput("choose an NCU export or paste ncu output", hint="export with `ncu --page raw --csv`")
        answer = await within_deadline(settings.request_timeout_s, state.diagnose, searcher=searcher, k=_int(k, "k"), **kwargs)
        if isinstance(answer, Comparison):
            comparison, result = answer, answer.after_diagnosis
        else:
            result = answer
    except KwikiError as exc:
        return _render(request, "diagnose.html", exc.status, result=None, error=_error(exc), filename=filename,
                       text=text, indexed=searcher is not None)
    charts = await asyncio.to_thread(_charts, result, comparison)
    return _render(request, "diagnose.html", result=result, comparison=comparison, error=None, filename=filename or "pasted text",
                   text=text, indexed=searcher is not None, reading=_reading_list(result) if result else [], charts=charts)


MAX_CHARTED = 3  # launches (and matched kernels) charted per page, the first in its order: 0.1-0.2 s a chart on 2 busy cores


@dataclass
class Charts:
    """The page's inline SVG charts: by launch id, and one per matched kernel of a comparison."""

    launch: dict[str, Markup] = field(default_factory=dict)
    timeline: dict[str, Markup] = field(default_factory=dict)
    compare: list[Markup] = field(default_factory=list)


def _charts(result: DiagnoseResponse | None, comparison: Comparison | None) -> Charts:
    from kwiki.profiling.charts import comparison_chart, launch_chart, timeline_chart

    out = Charts()
    for launch in (result.launches if result else [])[:MAX_CHARTED]:
        if (chart := launch_chart(launch)) is not None:
            out.launch[launch.launch_id] = chart
        if launch.timeline is not None and (chart := timeline_chart(launch.timeline)) is not None:
            out.timeline[launch.launch_id] = chart
    out.compare = [comparison_chart(kc) for kc in (comparison.kernels if comparison else [])[:MAX_CHARTED]]
    return out


def _reading_list(result: DiagnoseResponse, limit: int = 8) -> list[PageRef]:
    """Pages of the top launches' signals, in signal order, each once: what to read first."""
    seen: dict[str, PageRef] = {}
    for launch in result.launches[:3]:
        for sig in launch.signals[:3]:
            for p in sig.pages:
                seen.setdefault(p.id, p)
    return list(seen.values())[:limit]


def _int(text: str, name: str) -> int:
    """A form or query number; a value that is not one is a 400 shown on the page."""
    try:
        if len(text) > 20:
            raise ValueError
        return int(text)
    except ValueError:
        raise BadRequest(f"{name}={text[:40]!r} is not a whole number", hint=f"for example {name}=10") from None


@router.get("/ui/static/{name}")
def static_file(name: str) -> Response:
    """CSS and JS from service/static: only the names the folder holds, never a path built from the request
    (a 5,000-character name made the file system raise "name too long", a 500)."""
    if name not in _static_names():
        raise NotFound(f"no static file '{name[:60]}'")
    return FileResponse(STATIC / name, headers={"Cache-Control": "max-age=300"})


def _static_names() -> frozenset[str]:
    return frozenset(p.name for p in STATIC.iterdir() if p.is_file() and not p.name.startswith("."))
