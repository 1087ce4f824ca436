"""kwiki's HTTP API (FastAPI): an adapter over the service core (:mod:`kwiki.service.core`).

    uvicorn --factory kwiki.service.app:create_app      # or: kwiki serve

The index is opened once at start-up and swapped whole on reload, so a request always sees
one consistent build. Every error is JSON ``{"error": {"code", "message", "hint"}}``.
"""

import asyncio
import hmac
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any, TypeVar

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, Response
from fastapi_offline import FastAPIOffline
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException

from kwiki import __version__
from kwiki.errors import BadRequest, Forbidden, KwikiError, RequestTimeout, Unauthorized
from kwiki.index.results import PageResponse, SearchResponse
from kwiki.settings import Settings, load_settings

from . import readiness
from .core import Kwiki, SearchQuery, SearchRequest
from .readiness import Health, NotReady, ReloadRequest, ReloadResponse

log = logging.getLogger("kwiki")
T = TypeVar("T")
#: Where Swagger UI's and ReDoc's scripts and styles are served from (fastapi-offline's copy, mounted read-only).
DOCS_ASSETS = "/ui/docs-assets"


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or load_settings()
    state = Kwiki(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            state.load()
        except KwikiError as exc:  # serve /health and clear 503s rather than refuse to start
            log.warning("kwiki: %s (%s)", exc.message, exc.hint)
        yield

    # FastAPIOffline: FastAPI whose /docs (Swagger UI) loads its script and style from the package's own copy under
    # DOCS_ASSETS, not from a CDN, so the API docs render on a machine with no network. No /redoc: ReDoc's page
    # still fetches its logo from the network, and /docs says the same.
    app = FastAPIOffline(title="kwiki", version=__version__, lifespan=lifespan, static_url=DOCS_ASSETS, redoc_url=None,
                         description="Ranked, sourced GPU-kernel optimization knowledge for Hopper and Blackwell.")
    app.state.kwiki = state
    if settings.cors_origins:
        app.add_middleware(JSONCORSMiddleware, allow_origins=settings.cors_origins, allow_methods=["GET", "POST"])

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
        # FastAPI answers a body it cannot parse (a 5,000-digit number, bad UTF-8) with HTTPException(400)
        code = HTTP_CODES.get(exc.status_code, "http_error")
        return JSONResponse({"error": {"code": code, "message": str(exc.detail)}}, status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("kwiki: unexpected error")  # the trace goes to the log, never to the client
        return JSONResponse({"error": {"code": "internal", "message": "internal error"}}, status_code=500)

    async def call(fn: Callable[..., T], *args: Any) -> T:
        try:
            return await asyncio.wait_for(asyncio.to_thread(fn, *args), settings.request_timeout_s)
        except asyncio.TimeoutError:
            raise RequestTimeout(f"request took longer than {settings.request_timeout_s:.0f} s",
                               hint="narrow the query or retry") from None

    known: dict[str, frozenset[str]] = {}

    async def known_query(request: Request) -> None:
        """Unknown query parameters are a 400 that names the known ones: ``?arch=H100`` on an endpoint that did not
        know ``arch`` used to be ignored, an unfiltered answer to a filtered question."""
        if request.method not in ("GET", "HEAD"):
            return
        if not known:  # the documented parameters of every GET route, as /docs lists them
            for path, ops in app.openapi()["paths"].items():
                if "get" in ops:
                    known[path] = frozenset(p["name"] for p in ops["get"].get("parameters", []) if p["in"] == "query")
        names = known.get(getattr(request.scope.get("route"), "path_format", ""))
        unknown = sorted(set(request.query_params) - names) if names is not None else []
        if unknown:
            raise BadRequest(f"unknown query parameter{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)[:200]}",
                             hint=f"this endpoint takes {', '.join(sorted(names))}" if names else "this endpoint takes no query parameters")

    checked = [Depends(known_query)]

    @app.get("/health", response_model=Health, dependencies=checked,
             responses={503: {"model": NotReady, "description": "Not ready: no build, or not the build it was told to serve"}})
    def health() -> Any:
        """Readiness and the build served: 200 when this replica serves the build it was told to (``KWIKI_BUILD``, a
        reload to a build id; any build when none was named), else 503 (``build_not_loaded``, ``no_index``, ...)."""
        status, body = readiness.health(state)
        return body if status == 200 else JSONResponse(body.model_dump(), status_code=status)

    @app.get("/search", response_model=SearchResponse, dependencies=checked)
    async def search_get(req: Annotated[SearchQuery, Query()], arch: Annotated[list[str] | None, Query(
            description="The short form of `architecture` (the CLI's --arch); both may be given")] = None) -> SearchResponse:
        if arch:
            req = req.model_copy(update={"architecture": [*req.architecture, *arch]})
        return await call(state.search, req)

    @app.post("/search", response_model=SearchResponse)
    async def search_post(req: SearchRequest) -> SearchResponse:
        return await call(state.search, req)

    @app.get("/pages/{page_id:path}", response_model=PageResponse, dependencies=checked)
    async def page(page_id: str) -> PageResponse:
        """A page by its id, or by a link to its file as page bodies write it (``../techniques/stream-k.md``,
        ``wiki/techniques/stream-k``); an unknown id is a 404 whose hint names the nearest ids."""
        return state.page(page_id)

    @app.post("/admin/reload", response_model=ReloadResponse)
    async def reload(request: Request, body: ReloadRequest | None = None) -> ReloadResponse:
        """Switch builds without dropping a request (needs ``KWIKI_ADMIN_TOKEN``): to published build ``build``
        (``kwiki publish``; this replica is then not ready until it serves it), else to the expected build or the
        index's newest. Requests in flight finish on the build they started with."""
        check_token(request, settings)
        await asyncio.to_thread(state.reload, body.build if body is not None else None)
        return readiness.reloaded(state)

    from kwiki.service import diagnose_api, ledger_api, web
    from kwiki.service.build_header import BuildHeader
    from kwiki.service.limits import BodySizeLimit, HeadAsGet

    app.include_router(diagnose_api.router, dependencies=checked)  # POST /diagnose, GET /signals
    app.include_router(web.router)  # the search page (GET /): a form, whatever a browser adds to its URL
    app.include_router(ledger_api.router, dependencies=checked)  # GET|POST /ledger

    app.add_middleware(BodySizeLimit, max_bytes=settings.max_upload_bytes)  # 413 before any endpoint reads a body
    app.add_middleware(HeadAsGet)  # HEAD on every GET route (health checks use it)
    app.add_middleware(BuildHeader, state=state)  # outermost: X-Kwiki-Build on every response, the 413s included
    return app


HTTP_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed",
              413: "payload_too_large", 422: "bad_request", 503: "unavailable"}


class JSONCORSMiddleware(CORSMiddleware):
    """Starlette's CORS middleware, with a refused preflight answered in kwiki's JSON error shape."""

    def preflight_response(self, request_headers: Headers) -> Response:
        resp = super().preflight_response(request_headers)
        if resp.status_code < 400:
            return resp
        err = BadRequest(f"CORS preflight refused: {bytes(resp.body).decode(errors='replace')}",
                         hint="the server's KWIKI_CORS_ORIGINS lists the allowed origins")
        return JSONResponse(err.to_dict(), status_code=resp.status_code)


def check_token(request: Request, settings: Settings) -> None:
    """State-changing endpoints are off without a configured token, and need ``Authorization: Bearer <token>``."""
    if not settings.admin_token:
        raise Forbidden("this endpoint is disabled", hint="set KWIKI_ADMIN_TOKEN on the server to enable it")
    scheme, _, given = request.headers.get("authorization", "").strip().partition(" ")
    # bytes: compare_digest refuses a str with non-ASCII characters (a 500 before)
    if scheme.lower() != "bearer" or not given.strip() or not hmac.compare_digest(
            given.strip().encode("utf-8", "surrogateescape"), settings.admin_token.encode("utf-8")):
        raise Unauthorized("missing or wrong token", hint="send 'Authorization: Bearer $KWIKI_ADMIN_TOKEN'")

