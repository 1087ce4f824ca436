"""kwiki's HTTP API (FastAPI).

    uvicorn --factory kwiki.service.app:create_app      # or: kwiki serve

The index is opened once at start-up and swapped whole on reload, so a request always sees
one consistent build. Every error is JSON ``{"error": {"code", "message", "hint"}}``.
"""



import asyncio
import hmac
import logging
import threading
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Body, FastAPI, File, Form, Query, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from pydantic import BaseModel, Field

from kwiki import __version__
from kwiki.errors import (
    BadRequest,
    Forbidden,
    IndexMissing,
    KwikiError,
    PayloadTooLarge,
    Unauthorized,
)
from kwiki.index.results import PageResponse, SearchResponse
from kwiki.settings import Settings, get_settings

log = logging.getLogger("kwiki")


class SearchRequest(BaseModel):
    q: str = Field(..., description="The question, symptom, metric name or rule message")
    k: int = Field(10, description="Number of pages to return")
    type: list[str] = Field(default_factory=list)
    tag: list[str] = Field(default_factory=list)
    architecture: list[str] = Field(default_factory=list)
    language: list[str] = Field(default_factory=list)
    confidence: list[str] = Field(default_factory=list)
    corpus: list[str] = Field(default_factory=list)


class State:
    """Holds the open searcher; ``reload`` builds the new one aside and swaps the reference."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.searcher = None
        self.error: KwikiError | None = None
        self.lock = threading.Lock()
        self.embedder = None
        self.signal_pages = None  # diagnosis pages per signal for the loaded index (service.diagnosis.SignalPages)

    def load(self) -> None:
        from kwiki.index.search import Searcher

        try:
            new = Searcher.open(self.settings.index_dir, embedder=self.embedder, threads=self.settings.embed_threads)
        except KwikiError as exc:
            if self.searcher is None:
                self.error = exc
            raise
        if self.embedder is None:
            self.embedder = new._embedder()  # load the model once, before serving
            new.embedder = self.embedder
        from kwiki.service.diagnosis import SignalPages

        self.searcher, self.signal_pages, self.error = new, SignalPages(new), None

    def get(self):
        if self.searcher is None:
            raise self.error or IndexMissing("no index loaded", hint="run `kwiki ingest`, then restart the server")
        return self.searcher


def search_filters(req: SearchRequest) -> dict[str, list[str]]:
    return {n: getattr(req, n) for n in ("type", "tag", "architecture", "language", "confidence", "corpus")}


def run_search(searcher, req: SearchRequest, settings: Settings) -> SearchResponse:
    """The one search path: ``GET /search``, ``POST /search``, ``kwiki search --json`` and MCP all call this."""
    resp = searcher.search(req.q, k=req.k, filters=search_filters(req), max_chars=settings.max_query_chars,
                           max_k=settings.max_k)
    if not req.type and searcher.has_experience:
        # Candidates from the ledger come as their own tier, never mixed above curated pages.
        from kwiki.service.ledger_search import experience_tier

        resp.experience = experience_tier(searcher, req, settings)["hits"]
    return resp


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    state = State(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        try:
            state.load()
        except KwikiError as exc:  # serve /health and clear 503s rather than refuse to start
            log.warning("kwiki: %s (%s)", exc.message, exc.hint)
        yield

    app = FastAPI(title="kwiki", version=__version__, lifespan=lifespan,
                  description="Ranked, sourced GPU-kernel optimization knowledge for Hopper and Blackwell.")
    app.state.kwiki = state
    if settings.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=settings.cors_origins, allow_methods=["GET", "POST"])

    @app.exception_handler(KwikiError)
    async def kwiki_error(_: Request, exc: KwikiError) -> JSONResponse:
        return JSONResponse(exc.to_dict(), status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5])
        err = BadRequest(f"invalid request: {problems}", hint="see /docs for the parameters")
        return JSONResponse(err.to_dict(), status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}.get(exc.status_code, "http_error")
        return JSONResponse({"error": {"code": code, "message": str(exc.detail)}}, status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("kwiki: unexpected error")  # the trace goes to the log, never to the client
        return JSONResponse({"error": {"code": "internal", "message": "internal error"}}, status_code=500)

    async def call(fn, *args, **kwargs):
        try:
            return await asyncio.wait_for(asyncio.to_thread(fn, *args, **kwargs), settings.request_timeout_s)
        except asyncio.TimeoutError:
            raise KwikiTimeout(f"request took longer than {settings.request_timeout_s:.0f} s",
                               hint="narrow the query or retry") from None

    @app.get("/health")
    def health() -> dict[str, Any]:
        """Liveness and the manifest of the index being served."""
        if state.searcher is None:
            err = state.error or IndexMissing("no index loaded")
            return JSONResponse({"status": "no_index", **err.to_dict()}, status_code=503)
        # Names, not paths: the endpoint is open, and the server's file layout is nobody's business.
        manifest = state.searcher.manifest.model_dump(exclude={"corpora"})
        return {"status": "ok", "version": __version__, "index": manifest | {"corpora": sorted(state.searcher.manifest.corpora)}}

    @app.get("/search", response_model=SearchResponse)
    async def search_get(
        q: Annotated[str, Query(description="question, symptom, metric name or rule message")] = "",
        k: Annotated[int, Query(description="number of pages (1..max_k)")] = 10,
        type: Annotated[list[str], Query()] = [],  # noqa: B006 - FastAPI copies defaults
        tag: Annotated[list[str], Query()] = [],  # noqa: B006
        architecture: Annotated[list[str], Query()] = [],  # noqa: B006
        language: Annotated[list[str], Query()] = [],  # noqa: B006
        confidence: Annotated[list[str], Query()] = [],  # noqa: B006
        corpus: Annotated[list[str], Query()] = [],  # noqa: B006
    ) -> SearchResponse:
        req = SearchRequest(q=q, k=k, type=type, tag=tag, architecture=architecture, language=language,
                            confidence=confidence, corpus=corpus)
        return await call(run_search, state.get(), req, settings)

    @app.post("/search", response_model=SearchResponse)
    async def search_post(req: SearchRequest) -> SearchResponse:
        return await call(run_search, state.get(), req, settings)

    @app.get("/pages/{page_id:path}", response_model=PageResponse)
    async def page(page_id: str) -> PageResponse:
        return state.get().page(page_id)

    @app.post("/admin/reload")
    async def reload(request: Request) -> dict[str, Any]:
        """Switch to the newest build without dropping a request (needs ``KWIKI_ADMIN_TOKEN``)."""
        check_token(request, settings)
        await asyncio.to_thread(_reload_locked, state)
        return {"status": "ok", "index": state.get().manifest.model_dump()}

    from kwiki.service import diagnose_api; app.include_router(diagnose_api.router)  # noqa: E702 - /diagnose, /signals
    from kwiki.service import web; app.include_router(web.router)  # noqa: E702 - the search page (GET /)
    from kwiki.service import ledger_api; app.include_router(ledger_api.router)  # noqa: E702 - GET|POST /ledger
    from kwiki.service.limits import BodySizeLimit

    app.add_middleware(BodySizeLimit, max_bytes=settings.max_upload_bytes)  # 413 before any endpoint reads a body
    return app


def _reload_locked(state: State) -> None:
    with state.lock:
        state.load()


class KwikiTimeout(KwikiError):
    status, code = 503, "timeout"


def check_token(request: Request, settings: Settings) -> None:
    """State-changing endpoints are off without a configured token, and need it when on."""
    if not settings.admin_token:
        raise Forbidden("this endpoint is disabled", hint="set KWIKI_ADMIN_TOKEN on the server to enable it")
    given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
    if not given or not hmac.compare_digest(given, settings.admin_token):
        raise Unauthorized("missing or wrong token", hint="send 'Authorization: Bearer $KWIKI_ADMIN_TOKEN'")


__all__ = ["create_app", "run_search", "SearchRequest", "check_token", "PayloadTooLarge", "Body", "File", "Form", "UploadFile"]
