"""kwiki as an MCP server (official ``mcp`` SDK, 2.x: ``mcp.server.mcpserver.MCPServer``).

    kwiki mcp                     # stdio, for an agent that launches it
    kwiki mcp --http --port 8765  # streamable HTTP on http://127.0.0.1:8765/mcp

Tools: ``search``, ``get_page``, ``diagnose``, ``list_signals``. Every tool calls the service core the HTTP API
calls (:mod:`kwiki.service.core`: search, page, diagnose, signals) and returns a compact
projection (:mod:`kwiki.service.compact`) of the same response. A failure the caller can fix (bad
argument, unknown page, no index) comes back as a tool error (``is_error``) whose text says what to do.

Note: the SDK renamed ``FastMCP`` (1.x, ``mcp.server.fastmcp``) to ``MCPServer`` (2.x); pyproject pins 2.x.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, AsyncIterator, Callable, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from kwiki import __version__
from kwiki.errors import BadInput, KwikiError
from kwiki.profiling.compare import Comparison
from kwiki.profiling.diagnose import DiagnoseResponse
from kwiki.settings import Settings

from .compact import (
    CompactComparison,
    CompactDiagnosis,
    CompactPage,
    CompactSearch,
    compact_comparison,
    compact_diagnosis,
    compact_page,
    compact_search,
)
from .core import Kwiki, SearchFilters, SearchRequest

if TYPE_CHECKING:
    from mcp.shared._context_streams import ContextSendStream
    from mcp.shared.message import SessionMessage

log = logging.getLogger("kwiki.mcp")
T = TypeVar("T")
#: the schema's bound for k (annotations are evaluated at module level, so not the live settings;
#: a lower KWIKI_MAX_K is still enforced by the Searcher, as for HTTP)
MAX_K: int = Settings.model_fields["max_k"].default

INSTRUCTIONS = """\
kwiki answers GPU-kernel optimization questions for NVIDIA Hopper (sm_90) and Blackwell (sm_100) with
ranked wiki pages, each with a confidence tag and its sources. Use `search` for a symptom, an Nsight
Compute metric or rule message, a technique or a hardware feature; `get_page` for a hit's whole text;
`diagnose` for an Nsight Compute export (a CSV path) or a few metric values; `list_signals` for the
signals diagnose can detect. Prefer pages tagged `verified` or `source-reported`; `inferred` and
`experimental` claims need checking against the listed sources."""


class SignalInfo(BaseModel):
    id: str
    title: str
    patterns: list[str] = Field(default_factory=list, description="Pattern page ids (open with get_page)")
    techniques: list[str] = Field(default_factory=list)
    metrics: list[str] = Field(default_factory=list, description="Nsight Compute metrics the rule reads")


class SignalList(BaseModel):
    signals: list[SignalInfo]


class Backend:
    """The service core (the same one the HTTP app holds), its index loaded on first use (and retried on each
    call until an index exists)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.core = Kwiki(settings, lazy=True)

    def warm(self) -> None:
        """Open the index and load the model in the background so the first call is quick."""
        def run() -> None:
            try:
                self.core.get()
            except KwikiError as exc:
                log.warning("kwiki mcp: %s (%s)", exc.message, exc.hint)
        threading.Thread(target=run, name="kwiki-warm", daemon=True).start()


def _tool_error(exc: KwikiError) -> ToolError:
    text = f"{exc.code}: {exc.message}"
    if exc.hint:
        text += f" (hint: {exc.hint})"
    return ToolError(text)


def _guarded(fn: Callable[[], T]) -> T:
    """Run ``fn``; kwiki's own errors become tool errors the agent can read and act on, anything else a tool
    error that still says something (the trace goes to the server log)."""
    try:
        return fn()
    except KwikiError as exc:
        raise _tool_error(exc) from None
    except ToolError:
        raise
    except Exception as exc:  # noqa: BLE001 - never an empty reason
        log.exception("kwiki mcp: unexpected error in a tool")
        raise ToolError(f"internal: unexpected {type(exc).__name__}; the server log has the details") from None


def signal_list() -> SignalList:
    """``GET /signals``'s signals (``kwiki.profiling.signals.as_list``), each cut to what an agent needs."""
    from kwiki.profiling.signals import as_list

    return SignalList(signals=[
        SignalInfo(id=s["id"], title=s["title"], patterns=s.get("patterns", []), techniques=s.get("techniques", [])[:6],
                   metrics=s.get("metrics", [])[:8])
        for s in as_list()
    ])


def build_server(settings: Settings, backend: Backend | None = None) -> MCPServer:
    """The MCP server with kwiki's four tools (not started)."""
    kw = backend or Backend(settings)
    server = MCPServer("kwiki", title="kwiki", version=__version__, instructions=INSTRUCTIONS,
                       description="Ranked, sourced GPU-kernel optimization knowledge (Hopper, Blackwell)")

    @server.tool(description=(
        "Search kwiki for a question, symptom ('only 8 of 132 SMs busy at the end'), Nsight Compute metric or "
        "rule message, technique or hardware feature. Returns ranked pages: id, title, type, confidence, one "
        "snippet and sources. The same ranking as GET /search. Open a hit with get_page."))
    def search(
        query: Annotated[str, Field(description="The question, symptom, metric name or rule message", min_length=1)],
        k: Annotated[int, Field(description="Number of pages to return", ge=1, le=MAX_K)] = 5,
        filters: Annotated[SearchFilters | None, Field(description="Optional filters")] = None,
    ) -> CompactSearch:
        f = filters or SearchFilters()
        req = SearchRequest(q=query, k=k, **f.model_dump())
        return _guarded(lambda: compact_search(kw.core.search(req)))

    @server.tool(description=(
        "Get one page by id (from a search hit or a source reference): its whole markdown body, facets, "
        "confidence, resolved sources (ids you can open with get_page, and URLs), related pages and artifacts."))
    def get_page(
        id: Annotated[str, Field(description="Page id, e.g. pattern-tail-effect or kernelwiki:pattern-tail-effect", min_length=1)],
    ) -> CompactPage:
        return _guarded(lambda: compact_page(kw.core.page(id)))

    @server.tool(description=(
        "Diagnose an Nsight Compute profile. Give exactly one of: `path` (a file on this machine: `ncu --page raw "
        "--csv` export (best), `--page details --csv`, JSON or .ncu-rep), `metrics` ({ncu metric name: value}), or "
        "`text` (pasted ncu console output, metric=value pairs or rule messages); `source` adds the hotspots of the "
        "report's source page (a `path` that is a source page gets them too). Returns, per kernel launch, a verdict "
        "(speed-of-light first when a unit is at its peak, validity checks), the next ncu command, the "
        "fired signals ranked by the share of runtime at stake, their evidence and the pages that explain them "
        "(the same diagnosis as POST /diagnose). See list_signals for what it can detect."))
    def diagnose(
        path: Annotated[str | None, Field(description="Path to an NCU export on the machine running kwiki")] = None,
        metrics: Annotated[dict[str, float | str] | None, Field(
            description="Metric values, e.g. {\"launch__grid_size\": 32, \"launch__sm_count\": 132}")] = None,
        text: Annotated[str | None, Field(description="Pasted ncu output or rule messages", max_length=1_000_000)] = None,
        k: Annotated[int, Field(description="Pages per signal", ge=1, le=20)] = 5,
        source: Annotated[str | None, Field(description="With `path`: the same report's `--page source --csv` export, for hotspots")] = None,
    ) -> CompactDiagnosis:
        if sum(x is not None for x in (path, metrics, text)) != 1:
            raise ToolError("bad_request: give exactly one of `path`, `metrics` or `text`")
        return _guarded(lambda: compact_diagnosis(_diagnose(kw, path, metrics, text, k, source)))

    @server.tool(description=(
        "Compare a candidate kernel's Nsight Compute export with its parent's (both files on this machine, any format "
        "diagnose reads). Kernels are matched by name, then launch order and shape; per kernel: speedup (median "
        "duration before / after), a verdict (improved, regressed, within-noise) by the rule returned, the signals "
        "resolved, appeared and persisting, and the metrics that changed (the same as `kwiki diagnose AFTER --baseline BEFORE`)."))
    def compare(
        path: Annotated[str, Field(description="The candidate's export (after)", min_length=1)],
        baseline: Annotated[str, Field(description="The parent's export (before)", min_length=1)],
        kernel: Annotated[str | None, Field(description="Only kernels whose name contains this")] = None,
    ) -> CompactComparison:
        return _guarded(lambda: compact_comparison(_compare(kw, path, baseline, kernel)))

    @server.tool(description=(
        "List the Nsight Compute signals kwiki's diagnosis detects (tail effect, uncoalesced access, bank "
        "conflicts, ...), each with its pattern pages and the metrics it reads."))
    def list_signals() -> SignalList:
        return _guarded(signal_list)

    return server


def _diagnose(kw: Backend, path: str | None, metrics: dict[str, Any] | None, text: str | None, k: int,
              source: str | None = None) -> DiagnoseResponse:
    """Read ``path`` if given, then diagnose with the core, as POST /diagnose and the CLI do."""
    searcher = kw.core.get_or_none()  # the diagnosis itself needs no index; only the ranked pages do
    limit = kw.settings.max_upload_bytes
    data, filename = _read_export(path, limit) if path is not None else (None, "")
    src = _read_export(source, limit)[0] if source is not None else None
    resp = kw.core.diagnose(data=data, filename=filename, metrics=metrics, text=text, k=k, searcher=searcher, source=src,
                            deadline=time.monotonic() + kw.settings.request_timeout_s)
    assert isinstance(resp, DiagnoseResponse)  # no baseline: a diagnosis, never a comparison
    if searcher is None:
        resp.warnings.append("no index loaded, so no pages are ranked: run `kwiki ingest`")
    return resp


def _read_export(path: str, limit: int) -> tuple[bytes, str]:
    """An export's bytes and name; at most ``limit`` bytes, and only from a regular file."""
    file = Path(path).expanduser()
    if not file.is_file():  # a FIFO would block, a device stream for ever
        what = f"{file} is not a regular file" if file.exists() else f"no file at {file}"
        raise BadInput(what, hint="give the path of an NCU export, e.g. from `ncu --page raw --csv`")
    with open(file, "rb") as fh:
        data = fh.read(limit + 1)  # the size read, not the size stat says: the file may grow meanwhile
    if len(data) > limit:
        raise BadInput(f"{file} is over the {limit}-byte limit", hint="export only the kernels of interest (ncu -k)")
    return data, file.name


def _compare(kw: Backend, path: str, baseline: str, kernel: str | None) -> Comparison:
    """Read both exports, then diagnose with a baseline through the core: what POST /diagnose and the CLI call."""
    limit = kw.settings.max_upload_bytes
    data, name = _read_export(path, limit)
    base, base_name = _read_export(baseline, limit)
    resp = kw.core.diagnose(data=data, filename=name, baseline=base, baseline_filename=base_name, kernel=kernel)
    assert isinstance(resp, Comparison)
    return resp


def serve(settings: Settings, http: bool = False, port: int = 8765) -> None:
    """Run over stdio (default) or streamable HTTP on loopback (``http://127.0.0.1:{port}/mcp``)."""
    backend = Backend(settings)
    server = build_server(settings, backend)
    backend.warm()
    if http:
        # Loopback only: the SDK then also turns on DNS-rebinding protection (Host/Origin checks).
        server.run("streamable-http", host="127.0.0.1", port=port)
    else:
        import anyio

        anyio.run(_run_stdio_checked, server)


#: JSON-RPC 2.0 error codes for lines that are not a request.
PARSE_ERROR, INVALID_REQUEST = -32700, -32600


def check_line(line: str) -> tuple[int, str, object] | None:
    """Why one stdin line is not a JSON-RPC message, as ``(code, message, id)``, or None when it is one.

    >>> check_line('{"jsonrpc": "2.0", "id": 1, "method": "ping"}') is None, check_line("{oops")[0], check_line("[1]")[0]
    (True, -32700, -32600)
    """
    import json

    import mcp_types as types

    try:
        doc = json.loads(line)
    except (ValueError, RecursionError) as exc:
        return PARSE_ERROR, f"Parse error: {str(exc)[:200]}", None
    if not isinstance(doc, dict):
        return INVALID_REQUEST, f"Invalid Request: a message is a JSON object, not a {type(doc).__name__}", None
    rid = doc.get("id") if isinstance(doc.get("id"), (str, int)) and not isinstance(doc.get("id"), bool) else None
    try:
        json.dumps(doc, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        return PARSE_ERROR, f"Parse error: a lone surrogate at character {exc.start} is not valid Unicode", rid
    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except Exception as exc:  # noqa: BLE001 - pydantic's ValidationError or jiter's ValueError
        return INVALID_REQUEST, f"Invalid Request: {str(exc).splitlines()[0][:200]}", rid
    return None


class _CheckedStdin:
    """stdin lines for the SDK's transport; a line that is not a JSON-RPC message is answered with a JSON-RPC
    error here (the SDK only logs it, and the client waits for ever) and not passed on."""

    def __init__(self) -> None:
        import io

        import anyio

        self.lines = anyio.wrap_file(io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace"))
        self.write_stream: ContextSendStream[SessionMessage] | None = None

    async def __aiter__(self) -> AsyncIterator[str]:
        import mcp_types as types
        from mcp.shared.message import SessionMessage

        async for line in self.lines:
            if not line.strip():
                continue
            problem = check_line(line)
            if problem is None:
                yield line
                continue
            code, message, rid = problem
            log.warning("kwiki mcp: %s", message)
            if self.write_stream is not None:
                error = types.JSONRPCError(jsonrpc="2.0", id=rid if isinstance(rid, (int, str)) else None, error=types.ErrorData(code=code, message=message))
                await self.write_stream.send(SessionMessage(error))


async def _run_stdio_checked(server: MCPServer) -> None:
    from mcp.server.stdio import stdio_server

    stdin = _CheckedStdin()
    async with stdio_server(stdin=stdin) as (read_stream, write_stream):  # type: ignore[arg-type]
        stdin.write_stream = write_stream
        low = server._lowlevel_server  # noqa: SLF001 - run_stdio_async does exactly this, without the checked stdin
        await low.run(read_stream, write_stream, low.create_initialization_options())
