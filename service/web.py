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

import re
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, File, Form, Query, Request, UploadFile
from fastapi.responses import FileResponse, HTMLResponse, Response
from fastapi.templating import Jinja2Templates
from markdown_it import MarkdownIt
from markupsafe import Markup, escape

from kwiki.errors import BadInput, BadRequest, KwikiError, NotFound
from kwiki.index.results import PageResponse
from kwiki.index.search import Searcher
from kwiki.profiling.diagnose import DiagnoseResponse, PageRef

from .core import Kwiki, SearchFilters, SearchRequest

HERE = Path(__file__).resolve().parent
STATIC = HERE / "static"
CONFIDENCE = ("verified", "source-reported", "inferred", "experimental")
#: offered in the architecture filter besides the index's own vocabulary (GPU names resolve through aliases)
GPU_NAMES = ("H100", "H200", "B200", "GB200")
_STOP = frozenset("the and for with are was that this from have has not but its into only of my our your a an to in on at is it".split())

router = APIRouter(include_in_schema=False)
templates = Jinja2Templates(directory=str(HERE / "templates"))
_md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")


def highlight(text: str, terms: list[str]) -> Markup:
    """``text`` HTML-escaped, with each of ``terms`` (case-insensitive, whole words) in ``<mark>``."""
    words = sorted({t.strip() for t in terms if t and len(t.strip()) >= 2}, key=len, reverse=True)
    if not words:
        return Markup(escape(text))
    pattern = re.compile(r"(?<![\w])(" + "|".join(re.escape(w) for w in words) + r")(?![\w])", re.I)
    out, last = [], 0
    for m in pattern.finditer(text):
        out.append(str(escape(text[last:m.start()])))
        out.append(f"<mark>{escape(m.group(0))}</mark>")
        last = m.end()
    out.append(str(escape(text[last:])))
    return Markup("".join(out))


def query_terms(q: str) -> list[str]:
    """Words of the query worth highlighting (no stop words, no 1-letter tokens)."""
    return [w for w in re.findall(r"[A-Za-z0-9_.]+", q) if len(w) >= 3 and w.lower() not in _STOP]


def render_markdown(text: str, links: dict[str, str] | None = None) -> Markup:
    """A page body as HTML; raw HTML in the markdown is escaped, not passed through.

    ``links`` maps the body's relative links (``../techniques/stream-k.md``) to page keys, so links between
    wiki pages open in the page view instead of pointing at markdown files that the server does not serve.
    """
    return Markup(_md.render(text, {"kwiki_links": links or {}}))


def _link_open(renderer: Any, tokens: list, idx: int, options: Any, env: dict) -> str:
    # bound as a renderer method by add_render_rule
    token = tokens[idx]
    key = env.get("kwiki_links", {}).get(str(token.attrGet("href") or "").split("#")[0])
    if key:
        token.attrSet("href", f"/ui/page/{key}")
    return renderer.renderToken(tokens, idx, options, env)


_md.add_render_rule("link_open", _link_open)


def page_links(searcher: Searcher, page: PageResponse) -> dict[str, str]:
    """Relative markdown links of ``page`` that name another page of the same corpus -> that page's key."""
    import posixpath

    by_path = {p.path: p.key for p in searcher.pages.values() if p.corpus == page.corpus}
    base = posixpath.dirname(page.path)
    out: dict[str, str] = {}
    for href in re.findall(r"\]\(([^)\s#]+\.md)(?:#[^)]*)?\)", page.body):
        if "://" not in href:
            key = by_path.get(posixpath.normpath(posixpath.join(base, href)))
            if key:
                out[href] = key
    return out


def http_url(url: object) -> str:
    """``url`` when it is an absolute http(s) URL, else "": only those become links (a page's ``url:
    javascript:...`` would run in the reader's browser).

    >>> http_url("https://docs.nvidia.com/x"), http_url("javascript:alert(1)"), http_url(" JaVaScRiPt:x"), http_url("//evil")
    ('https://docs.nvidia.com/x', '', '', '')
    """
    if not isinstance(url, str):
        return ""
    text = url.strip()
    if any(c.isspace() or ord(c) < 32 for c in text):
        return ""
    scheme, sep, rest = text.partition("://")
    return text if sep and scheme.lower() in ("http", "https") and rest and not rest.startswith("/") else ""


templates.env.filters["highlight"] = highlight
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
            ctx["resp"] = state.search(SearchRequest(q=page.q, k=_int(page.k, "k"), **chosen))
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
    return _render(request, "page.html", page=page, error=None, q=q, body=render_markdown(page.body, page_links(searcher, page)))


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
) -> HTMLResponse:
    """Diagnose an upload (or pasted text) with ``diagnose_request``, what ``POST /diagnose`` calls, and show it."""
    import asyncio

    from .limits import within_deadline

    state = _state(request)
    settings = state.settings
    filename = (file.filename or "upload") if file is not None and file.filename else ""
    searcher = state.get_or_none()
    try:
        if filename:
            data = await file.read(settings.max_upload_bytes + 1)  # type: ignore[union-attr]
            if not data:
                raise BadInput("the uploaded file is empty", hint="choose an export from `ncu --page raw --csv`")
            kwargs: dict[str, Any] = {"data": data, "filename": filename}
            if source is not None and source.filename:
                kwargs["source"] = await source.read(settings.max_upload_bytes + 1)
        elif text.strip():
            kwargs = {"text": text}
        else:
            raise BadInput("choose an NCU export or paste ncu output", hint="export with `ncu --page raw --csv`")
        result = await within_deadline(settings.request_timeout_s, state.diagnose, searcher=searcher, k=_int(k, "k"), **kwargs)
        assert isinstance(result, DiagnoseResponse)  # no baseline here: a diagnosis, never a comparison
    except KwikiError as exc:
        return _render(request, "diagnose.html", exc.status, result=None, error=_error(exc), filename=filename,
                       text=text, indexed=searcher is not None)
    charts = await asyncio.to_thread(_timeline_charts, result)
    return _render(request, "diagnose.html", result=result, error=None, filename=filename or "pasted text", text=text,
                   indexed=searcher is not None, reading=_reading_list(result), charts=charts)


MAX_CHARTS = 3  # PNG timelines drawn per page (each takes ~0.3 s with matplotlib)


def _timeline_charts(result: Any) -> dict[str, str]:
    """launch id -> a base64 PNG of its PM-sampling timeline; empty when matplotlib is not installed."""
    import base64
    import io

    from kwiki.profiling.timeline import plot

    out: dict[str, str] = {}
    for launch in [d for d in getattr(result, "launches", []) if d.timeline is not None][:MAX_CHARTS]:
        buf = io.BytesIO()
        if not plot(launch.timeline, buf):
            break
        out[launch.launch_id] = base64.b64encode(buf.getvalue()).decode()
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
