"""kwiki as an MCP server (official ``mcp`` SDK, 2.x: ``mcp.server.mcpserver.MCPServer``).

    kwiki mcp                     # stdio, for an agent that launches it
    kwiki mcp --http --port 8765  # streamable HTTP on http://127.0.0.1:8765/mcp

Tools (``docs/mcp.md`` says when to use each):

* knowledge: ``search``, ``get_page``, ``get_section`` (one heading's text of a page), ``lookup_metric`` (an
  Nsight Compute metric or warp-stall reason in the catalog), ``list_signals``;
* profiles: ``diagnose`` (one export), ``compare`` (a candidate's export against its parent's);
* the candidate ledger: ``ledger_add``, ``ledger_show``, ``ledger_tree``, ``ledger_search``, ``ledger_set_status``;
  ``diagnose`` and ``compare`` attach their result to a candidate when given one.

Every tool calls the service core the HTTP API calls (:mod:`kwiki.service.core`) or the ledger's public API
(:mod:`kwiki.ledger`), and answers with a compact projection (:mod:`kwiki.service.compact`): JSON without
indentation, fields at their default left out, a search's sources listed once. A failure comes back as a tool
error (``is_error``) whose text is ``{"error": CODE, "reason": ..., "hint": ...}``, the hint saying what to do;
bad arguments rejected by the schema get the same shape (:class:`KwikiMCP`).

Note: the SDK renamed ``FastMCP`` (1.x, ``mcp.server.fastmcp``) to ``MCPServer`` (2.x); pyproject pins 2.x.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, AsyncIterator, Callable, Literal, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, InputRequiredResult, TextContent
from pydantic import BaseModel, Field, ValidationError

from kwiki import __version__
from kwiki.errors import BadInput, BadRequest, KwikiError, NotFound
from kwiki.index.results import SearchResponse
from kwiki.ledger import PAGE_TYPE, Benchmark, Candidate, attach_diagnosis, candidate_fields, lineage
from kwiki.profiling.compare import Comparison
from kwiki.profiling.diagnose import DiagnoseResponse
from kwiki.settings import EXPERIENCE_K, MAX_EXPERIENCE_K, PAGES_PER_SIGNAL, Settings

from .compact import (
    CompactCandidate,
    CompactComparison,
    CompactDiagnosis,
    CompactPage,
    CompactSearch,
    CompactSection,
    CompactTrees,
    MetricLookup,
    compact_candidate,
    compact_comparison,
    compact_diagnosis,
    compact_page,
    compact_search,
    compact_section,
    compact_trees,
    metric_info,
    to_json,
    to_wire,
)
from .core import Kwiki, SearchFilters, SearchRequest

if TYPE_CHECKING:
    from mcp.shared._context_streams import ContextSendStream
    from mcp.shared.message import SessionMessage

log = logging.getLogger("kwiki.mcp")
T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
#: the schema's bound for k (annotations are evaluated at module level, so not the live settings;
#: a lower KWIKI_MAX_K is still enforced by the Searcher, as for HTTP)
MAX_K: int = Settings.model_fields["max_k"].default
#: an agent's context is the scarce resource: MCP searches return fewer pages than HTTP's DEFAULT_K (docs/mcp.md)
MCP_K = 5
#: pages above the candidates in an MCP ledger search (the candidates are what the agent asked for)
MCP_LEDGER_PAGES = 3
#: pages a metric lookup names (the catalog says what a metric is; these pages say what to do about it)
METRIC_PAGES = 3
#: spellings offered when a metric name is unknown
METRIC_SUGGESTIONS = 5
#: the hint of an error whose cause carries none (every tool error has one)
DEFAULT_HINT = "check the arguments against the tool's input schema (tools/list)"

INSTRUCTIONS = """\
kwiki answers GPU-kernel optimization questions for NVIDIA Hopper (sm_90) and Blackwell (sm_100) with
ranked wiki pages, each with a confidence tag and its sources, and keeps a ledger of the kernel candidates
tried. Find a direction: `search` (a symptom, an Nsight Compute metric or rule message, a technique, a
hardware feature), then `get_section` (one heading of a hit, e.g. "Fixes") or `get_page` (the whole page);
`lookup_metric` says what an ncu metric or stall reason measures. Verify it: `diagnose` an Nsight Compute
export, `compare` a candidate's export with its parent's. Record it: `ledger_add` a candidate, attach a
diagnosis or comparison (`candidate` argument of diagnose/compare), `ledger_set_status` promoted or
rejected with the reason, `ledger_tree` / `ledger_show` to review, `ledger_search` for what was tried
before. Prefer pages tagged `verified` or `source-reported`; check `inferred` and `experimental` claims
against their sources. Errors are JSON {error, reason, hint}: follow the hint."""


class ToolProblem(ToolError):
    """A tool failure with a stable code, a reason and a hint (the tool error's JSON text)."""

    def __init__(self, code: str, reason: str, hint: str | None = None) -> None:
        super().__init__(reason)
        self.code, self.reason, self.hint = code, reason, hint or DEFAULT_HINT


def error_result(problem: ToolProblem) -> CallToolResult:
    body = {"error": problem.code, "reason": problem.reason or "the tool failed", "hint": problem.hint}
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(body, ensure_ascii=False, separators=(",", ":")))],
                          is_error=True)


def _validation_problem(tool: str, exc: ValidationError) -> ToolProblem:
    why = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors()[:4])
    return ToolProblem("bad_arguments", f"{tool}: {why}",
                       f"fix those arguments of {tool}: its input schema (tools/list) gives each one's type and bounds")


class KwikiMCP(MCPServer):
    """The SDK's server, with every tool error answered as ``{"error", "reason", "hint"}`` (the SDK's own text for
    a schema violation or an unknown tool says what is wrong but not what to do)."""

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[Any, Any] | None = None) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except MCPError:
            raise
        except ToolError as exc:
            return error_result(self._problem(name, exc))

    def _problem(self, name: str, exc: ToolError) -> ToolProblem:
        cause = exc.__cause__
        if isinstance(cause, ToolProblem):
            log.info("kwiki mcp: %s: %s", name, cause.reason)
            return cause
        if isinstance(cause, ValidationError):
            return _validation_problem(name, cause)
        if isinstance(exc, UnexpectedToolError):
            log.error("kwiki mcp: tool %s failed", name, exc_info=exc)
            return ToolProblem("internal", f"{name} failed unexpectedly",
                               "the server's log (stderr of `kwiki mcp`) has the trace; the other tools still work")
        if str(exc).startswith("Unknown tool"):
            names = ", ".join(sorted(t.name for t in self._tool_manager.list_tools()))
            return ToolProblem("unknown_tool", str(exc), f"kwiki's tools are: {names}")
        return ToolProblem("tool_error", str(exc))


class Backend:
    """The service core (the same one the HTTP app holds): its index loaded on first use (and retried on each
    call until an index exists), and its ledger (``workspace``, else ``$KWIKI_LEDGER_URL``, else the default
    workspace), the one every ledger tool and a search's ``tried`` tier read."""

    def __init__(self, settings: Settings, workspace: Path | None = None) -> None:
        self.settings = settings
        self.core = Kwiki(settings, lazy=True, workspace=workspace)

    def warm(self) -> None:
        """Open the index and load the model in the background so the first call is quick."""
        def run() -> None:
            try:
                self.core.get()
            except KwikiError as exc:
                log.warning("kwiki mcp: %s (%s)", exc.message, exc.hint)
        threading.Thread(target=run, name="kwiki-warm", daemon=True).start()

    def page_ids(self) -> set[str] | None:
        """The index's page ids, which a candidate's technique and pattern ids must name (None: no index yet)."""
        self.core.get_or_none()
        return self.core.page_ids()


def respond(model: BaseModel) -> CallToolResult:
    """A tool's answer: the compact JSON text and the same document as structured content."""
    return CallToolResult(content=[TextContent(type="text", text=to_json(model))], structured_content=to_wire(model))


def _guarded(fn: Callable[[], M]) -> CallToolResult:
    """Run ``fn`` and answer with its model; kwiki's own errors become tool errors with their hint, anything else
    a tool error that still says something (the trace goes to the server log)."""
    try:
        return respond(fn())
    except KwikiError as exc:
        raise ToolProblem(exc.code, exc.message, exc.hint) from None
    except ToolError:
        raise
    except ValidationError as exc:  # a record built from the arguments (a ledger candidate)
        why = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'record'}: {e['msg']}" for e in exc.errors()[:4])
        raise ToolProblem("bad_request", f"invalid candidate: {why}",
                          "task and id are letters, digits, '_', '.', '-'; the mechanism is one line of at most 500 characters") from None
    except Exception as exc:  # noqa: BLE001 - never an empty reason
        log.exception("kwiki mcp: unexpected error in a tool")
        raise ToolProblem("internal", f"unexpected {type(exc).__name__}",
                          "the server's log (stderr of `kwiki mcp`) has the trace; the other tools still work") from None


class SignalInfo(BaseModel):
    id: str
    title: str
    patterns: list[str] = Field(default_factory=list, description="Pattern page ids (open with get_page)")
    techniques: list[str] = Field(default_factory=list)
    metrics: list[str] = Field(default_factory=list, description="Nsight Compute metrics the rule reads")


class SignalList(BaseModel):
    signals: list[SignalInfo]


class LedgerSearch(CompactSearch):
    candidates: int = Field(default=0, description="Candidates in the ledger (what `tried` is searched in)")


def signal_list() -> SignalList:
    """``GET /signals``'s signals (``kwiki.profiling.signals.as_list``), each cut to what an agent needs."""
    from kwiki.profiling.signals import as_list

    return SignalList(signals=[
        SignalInfo(id=s["id"], title=s["title"], patterns=s.get("patterns", []), techniques=s.get("techniques", [])[:6],
                   metrics=s.get("metrics", [])[:8])
        for s in as_list()
    ])


CandidateRef = Annotated[str, Field(description="The candidate: task/id (a bare id when only one task has it)", min_length=1)]


def build_server(settings: Settings, backend: Backend | None = None) -> MCPServer:
    """The MCP server with kwiki's tools (not started)."""
    kw = backend or Backend(settings)
    server = KwikiMCP("kwiki", title="kwiki", version=__version__, instructions=INSTRUCTIONS,
                      description="Ranked, sourced GPU-kernel optimization knowledge (Hopper, Blackwell) and a ledger of kernel candidates")

    @server.tool(description=(
        "Use first, for any question: a symptom ('only 8 of 132 SMs busy at the end'), an Nsight Compute metric "
        "or rule message, a technique or a hardware feature. Returns ranked pages (id, title, type, confidence, "
        "one snippet and the heading it is under, source ids; each source described once in `sources`) and, "
        "when the index holds ledger candidates, those tried on the topic (`tried`). The same ranking as "
        "GET /search. Then read a hit with get_section (its `section`) or get_page."))
    def search(
        query: Annotated[str, Field(description="The question, symptom, metric name or rule message", min_length=1)],
        k: Annotated[int, Field(description="Number of pages to return", ge=1, le=MAX_K)] = MCP_K,
        filters: Annotated[SearchFilters | None, Field(description="Optional filters")] = None,
    ) -> Annotated[CallToolResult, CompactSearch]:
        f = filters or SearchFilters()
        req = SearchRequest(q=query, k=k, **f.model_dump())
        return _guarded(lambda: compact_search(kw.core.search(req)))

    @server.tool(description=(
        "Use to read a whole page (a search hit or a source id): its markdown body, facets, confidence, resolved "
        "sources (ids you can open here too, and URLs), related pages, artifacts and its `headings`. When one "
        "section is enough (e.g. 'Fixes', 'What you see'), get_section costs a fraction of it."))
    def get_page(
        id: Annotated[str, Field(description="Page id, e.g. pattern-tail-effect or kernelwiki:pattern-tail-effect", min_length=1)],
    ) -> Annotated[CallToolResult, CompactPage]:
        return _guarded(lambda: compact_page(kw.core.page(id)))

    @server.tool(description=(
        "Use to read one section of a page: the text under one heading (with its subsections), e.g. heading "
        "'Fixes' of pattern-tail-effect. `heading` is a heading's text, a path 'Cause > Why', or the start of "
        "one; a search hit's `section` and get_page's `headings` name them. An unknown heading's error lists "
        "the page's headings."))
    def get_section(
        id: Annotated[str, Field(description="Page id, e.g. pattern-tail-effect", min_length=1)],
        heading: Annotated[str, Field(description="The heading, e.g. 'Fixes'", min_length=1, max_length=500)],
    ) -> Annotated[CallToolResult, CompactSection]:
        return _guarded(lambda: compact_section(kw.core.page(id), heading))

    @server.tool(description=(
        "Use when an Nsight Compute metric name or a warp-stall reason comes up (in a report, a page, your own "
        "profile) and you need what it measures: any spelling works (smsp__pcsamp_warps_issue_stalled_long_scoreboard, "
        "'Achieved Occupancy', 'long scoreboard', stall_mio_throttle). Returns the catalog's entries (ncu names "
        "per chip, unit, meaning), the signals of diagnose that read it, their pattern pages and the pages that "
        "explain it. An unknown name's error suggests the nearest ones."))
    def lookup_metric(
        name: Annotated[str, Field(description="A metric name (any chip or spelling) or a stall reason", min_length=1, max_length=300)],
    ) -> Annotated[CallToolResult, MetricLookup]:
        return _guarded(lambda: _lookup_metric(kw, name))

    @server.tool(description=(
        "Use when you have an Nsight Compute profile of one kernel version. Give exactly one of: `path` (a file "
        "on this machine: `ncu --import R.ncu-rep --page raw --csv` export (best), `--page details --csv`, "
        "`--page source --csv`, JSON, .ncu-rep or .ncu-repz), `metrics` ({ncu metric name: value}), or `text` "
        "(pasted ncu output, metric=value pairs or rule messages); `source` adds the hotspots of the report's "
        "source page. Returns per kernel launch a verdict (speed-of-light first when a unit is at its peak; "
        "validity checks), the next ncu command, the fired signals ranked by the share of runtime at stake, their "
        "evidence and the pages that explain them (the same diagnosis as POST /diagnose). With `candidate`, the "
        "diagnosis is attached to that ledger candidate as its evidence. For a before/after pair use compare."))
    def diagnose(
        path: Annotated[str | None, Field(description="Path to an NCU export on the machine running kwiki")] = None,
        metrics: Annotated[dict[str, float | str] | None, Field(
            description="Metric values, e.g. {\"launch__grid_size\": 32, \"launch__sm_count\": 132}")] = None,
        text: Annotated[str | None, Field(description="Pasted ncu output or rule messages", max_length=1_000_000)] = None,
        k: Annotated[int, Field(description="Pages per signal", ge=1, le=20)] = PAGES_PER_SIGNAL,
        source: Annotated[str | None, Field(description="With `path`: the same report's `--page source --csv` export, for hotspots")] = None,
        candidate: Annotated[str | None, Field(description="Ledger candidate (task/id) to attach the diagnosis to")] = None,
    ) -> Annotated[CallToolResult, CompactDiagnosis]:
        if sum(x is not None for x in (path, metrics, text)) != 1:
            raise ToolProblem("bad_request", "give exactly one of `path`, `metrics` or `text`",
                              "`path` for an export file, `metrics` for a few values, `text` for pasted ncu output")
        return _guarded(lambda: _diagnose(kw, path, metrics, text, k, source, candidate))

    @server.tool(description=(
        "Use after changing a kernel, to verify the change: compares the candidate's Nsight Compute export with "
        "its parent's (both files on this machine, any format diagnose reads). Kernels are matched by name, then "
        "launch order and shape; per kernel: speedup (median duration before / after), a verdict (improved, "
        "regressed, within-noise) by the rule returned, the signals resolved, appeared and persisting, and the "
        "metrics that changed (the same as `kwiki diagnose AFTER --baseline BEFORE`). With `candidate`, the "
        "comparison is attached to that ledger candidate; then promote or reject it with ledger_set_status."))
    def compare(
        path: Annotated[str, Field(description="The candidate's export (after)", min_length=1)],
        baseline: Annotated[str, Field(description="The parent's export (before)", min_length=1)],
        kernel: Annotated[str | None, Field(description="Only kernels whose name contains this")] = None,
        candidate: Annotated[str | None, Field(description="Ledger candidate (task/id) to attach the comparison to")] = None,
    ) -> Annotated[CallToolResult, CompactComparison]:
        return _guarded(lambda: _compare(kw, path, baseline, kernel, candidate))

    @server.tool(description=(
        "Use to see what diagnose can detect: the Nsight Compute signals (tail effect, uncoalesced access, bank "
        "conflicts, ...), each with its pattern pages and the metrics it reads."))
    def list_signals() -> Annotated[CallToolResult, SignalList]:
        return _guarded(signal_list)

    @server.tool(description=(
        "Use before you build or benchmark a new kernel variant: records it in the candidate ledger with its "
        "parent (the version it changes), the one mechanism it changes, the technique and pattern pages it applies "
        "(ids from search), and correctness and benchmark figures when you have them. Without `id` the next free "
        "cNNN is taken. Then attach evidence (diagnose/compare with `candidate`) and decide with ledger_set_status. "
        "Refuses an id already in the task (a candidate changes through ledger_set_status or an attachment)."))
    def ledger_add(
        task: Annotated[str, Field(description="The optimization task, e.g. transpose", min_length=1, max_length=120)],
        mechanism: Annotated[str, Field(description="The one mechanism changed relative to the parent, in one line", min_length=1, max_length=500)],
        id: Annotated[str | None, Field(description="Candidate id, unique in its task (default: next free cNNN)")] = None,
        parent: Annotated[str | None, Field(description="The parent candidate's id (same task), or task/id")] = None,
        kernel: Annotated[str, Field(description="Kernel (function) name")] = "",
        techniques: Annotated[list[str], Field(description="Technique page ids applied, e.g. technique-stream-k")] = [],  # noqa: B006 - pydantic copies defaults
        patterns: Annotated[list[str], Field(description="Pattern page ids addressed, e.g. pattern-tail-effect")] = [],  # noqa: B006
        correct: Annotated[bool | None, Field(description="Did it match the reference? (absent: not checked yet)")] = None,
        correctness_detail: Annotated[str, Field(description="How correctness was checked")] = "",
        benchmarks: Annotated[list[Benchmark], Field(description="Measured figures: shape, dtype, gpu, metric, value, baseline, unit")] = [],  # noqa: B006
        author: Annotated[str | None, Field(description="agent:NAME or person:NAME")] = None,
    ) -> Annotated[CallToolResult, CompactCandidate]:
        doc: dict[str, Any] = {"task": task, "mechanism": mechanism, "id": id or "c000", "parent": parent, "kernel": kernel,
                               "techniques": techniques, "patterns": patterns, "author": author,
                               "correctness": {"passed": correct, "detail": correctness_detail},
                               "benchmarks": [b.model_dump(exclude_none=True) for b in benchmarks]}
        return _guarded(lambda: compact_candidate(_ledger_add(kw, doc, auto_id=not id)))

    @server.tool(description=(
        "Use to read one ledger candidate: its parent, mechanism, techniques, status and reason, correctness, "
        "benchmarks, and the evidence attached (signals, key metrics, the comparison with its parent)."))
    def ledger_show(candidate: CandidateRef) -> Annotated[CallToolResult, CompactCandidate]:
        return _guarded(lambda: compact_candidate(kw.core.ledger.get(candidate)))

    @server.tool(description=(
        "Use to review a task's history: the lineage of its candidates (each row's parent, status, mechanism and "
        "reason; `on_promoted_path` marks the path to every promoted one), for every task or one."))
    def ledger_tree(
        task: Annotated[str | None, Field(description="Only this task")] = None,
    ) -> Annotated[CallToolResult, CompactTrees]:
        return _guarded(lambda: _ledger_tree(kw, task))

    @server.tool(description=(
        "Use before trying a fix, to learn what was already tried: the pages that explain the question, then the "
        "ledger candidates on the topic (`tried`: status, mechanism, reason). status='rejected' lists only what "
        "failed. A candidate is searchable as soon as it is added."))
    def ledger_search(
        query: Annotated[str, Field(description="The question, symptom or technique", min_length=1)],
        status: Annotated[Literal["candidate", "promoted", "rejected"] | None, Field(description="Only candidates with this status")] = None,
        k: Annotated[int, Field(description="Number of pages", ge=1, le=MAX_K)] = MCP_LEDGER_PAGES,
        experience_k: Annotated[int, Field(description="Number of candidates", ge=1, le=MAX_EXPERIENCE_K)] = EXPERIENCE_K,
    ) -> Annotated[CallToolResult, LedgerSearch]:
        return _guarded(lambda: _ledger_search(kw, query, status, k, experience_k))

    @server.tool(description=(
        "Use once the evidence is in: promote a candidate (it is kept: the next candidates build on it) or reject "
        "it (it stays in the ledger, searchable as what failed), always with the reason (e.g. 'tail effect "
        "resolved, 1.46x'). 'candidate' reopens it. Appends a new version; the record keeps everything else."))
    def ledger_set_status(
        candidate: CandidateRef,
        status: Annotated[Literal["candidate", "promoted", "rejected"], Field(description="promoted, rejected or candidate")],
        reason: Annotated[str, Field(description="Why: the evidence behind the decision", min_length=1, max_length=2000)],
    ) -> Annotated[CallToolResult, CompactCandidate]:
        return _guarded(lambda: compact_candidate(kw.core.set_status(candidate, status, " ".join(reason.split()))))

    return server


def _diagnose(kw: Backend, path: str | None, metrics: dict[str, Any] | None, text: str | None, k: int,
              source: str | None = None, candidate: str | None = None) -> CompactDiagnosis:
    """Read ``path`` if given, then diagnose with the core, as POST /diagnose and the CLI do; attach to ``candidate``."""
    searcher = kw.core.get_or_none()  # the diagnosis itself needs no index; only the ranked pages do
    limit = kw.settings.max_upload_bytes
    data, filename = _read_export(path, limit) if path is not None else (None, "")
    src = _read_export(source, limit)[0] if source is not None else None
    if candidate:
        kw.core.ledger.get(candidate)  # an unknown candidate fails before the work
    resp = kw.core.diagnose(data=data, filename=filename, metrics=metrics, text=text, k=k, searcher=searcher, source=src,
                            deadline=time.monotonic() + kw.settings.request_timeout_s)
    assert isinstance(resp, DiagnoseResponse)  # no baseline: a diagnosis, never a comparison
    if searcher is None:
        resp.warnings.append("no index loaded, so no pages are ranked: run `kwiki ingest`")
    out = compact_diagnosis(resp)
    if candidate:
        out.recorded = attach_diagnosis(kw.core.ledger, candidate, resp).key  # the export's name, as `kwiki diagnose --record` does
    return out


def _read_export(path: str, limit: int) -> tuple[bytes, str]:
    """An export's bytes and name; at most ``limit`` bytes, and only from a regular file."""
    file = Path(path).expanduser()
    if not file.is_file():  # a FIFO would block, a device stream for ever
        what = f"{file} is not a regular file" if file.exists() else f"no file at {file}"
        raise BadInput(what, hint="give the path of an NCU export on this machine, e.g. from `ncu --import R.ncu-rep --page raw --csv > R.raw.csv`")
    with open(file, "rb") as fh:
        data = fh.read(limit + 1)  # the size read, not the size stat says: the file may grow meanwhile
    if len(data) > limit:
        raise BadInput(f"{file} is over the {limit}-byte limit", hint="export only the kernels of interest (ncu -k)")
    return data, file.name


def _compare(kw: Backend, path: str, baseline: str, kernel: str | None, candidate: str | None = None) -> CompactComparison:
    """Read both exports, then diagnose with a baseline through the core: what POST /diagnose and the CLI call."""
    from .diagnosis import attach_comparison

    limit = kw.settings.max_upload_bytes
    data, name = _read_export(path, limit)
    base, base_name = _read_export(baseline, limit)
    if candidate:
        kw.core.ledger.get(candidate)  # an unknown candidate fails before the work
    resp = kw.core.diagnose(data=data, filename=name, baseline=base, baseline_filename=base_name, kernel=kernel)
    assert isinstance(resp, Comparison)
    out = compact_comparison(resp)
    if candidate:
        out.recorded = attach_comparison(kw.core.ledger, candidate, resp).key
    return out


def _lookup_metric(kw: Backend, name: str) -> MetricLookup:
    """The catalog entries for a metric name or a stall reason, the signals that read them, and their pages."""
    from rapidfuzz import process

    from kwiki.profiling.catalog import load_catalog
    from kwiki.profiling.signals import load_signals

    cat = load_catalog()
    reason_key = "_".join(name.strip().lower().replace("-", " ").split())
    reason_key = reason_key.removeprefix("stall_").removeprefix("warp_stall_")
    metrics = []
    stall = reason_key if reason_key in cat.stall_reasons else None
    if stall:
        metrics = [m for m in cat.metrics if m.id == f"stall_{stall}" or m.id.startswith(f"stall_{stall}_")]
    else:
        found = cat.resolve(name)
        metrics = [cat.by_id[found]] if found else []
    if not metrics:
        near = [str(m[0]) for m in process.extract(name.strip().lower(), list(cat.lookup) + list(cat.stall_reasons), limit=METRIC_SUGGESTIONS)]
        raise NotFound(f"no metric or stall reason '{name[:120]}' in the catalog",
                       hint=f"nearest: {', '.join(near)}; list_signals shows the metrics each signal reads")
    signals = load_signals()
    feeds = list(dict.fromkeys(s for m in metrics for s in m.feeds))
    patterns = list(dict.fromkeys(p for s in feeds if s in signals for p in signals[s].patterns))
    pages: list[str] = []
    searcher = kw.core.get_or_none()
    if searcher is not None:
        if stall and (page := searcher.find_page(f"ncu-stall-{stall.replace('_', '-')}")) is not None:
            pages.append(page.key)
        hits = kw.core.search(SearchRequest(q=stall.replace("_", " ") + " stall" if stall else metrics[0].primary, k=METRIC_PAGES))
        pages += [h.id for h in hits.hits if h.id not in pages]
    return MetricLookup(query=name, stall_reason=stall, metrics=[metric_info(m) for m in metrics], patterns=patterns,
                        pages=pages[:METRIC_PAGES])


def _ledger_add(kw: Backend, doc: dict[str, Any], auto_id: bool) -> Candidate:
    """Through the core (:meth:`Kwiki.add_candidate`: parent and page ids checked, searchable at once); an id
    already in the task is refused here (the core would write a new version of it)."""
    cand = Candidate.model_validate(doc)
    if not auto_id and kw.core.ledger.find(cand.key) is not None:
        raise BadRequest(f"candidate {cand.key} is already in the ledger",
                         hint="give a new id (or none for the next free cNNN); ledger_set_status changes a candidate's status")
    kw.page_ids()  # open the index (lazily) so the technique and pattern ids are checked against it
    return kw.core.add_candidate(cand, auto_id=auto_id)


def _ledger_tree(kw: Backend, task: str | None) -> CompactTrees:
    led = kw.core.ledger
    read = led.read(task=task)
    if task is not None and not read.candidates:
        tasks = sorted({c.task for c in led.read().candidates})
        raise NotFound(f"no candidates of task '{task[:120]}' in the ledger {led.name}",
                       hint=f"tasks there: {', '.join(tasks)}" if tasks else "ledger_add records the first candidate")
    return compact_trees(lineage(read.candidates), led.name, [f"{p.file}:{p.line}: {p.reason}" for p in read.problems])


def _ledger_search(kw: Backend, query: str, status: str | None, k: int, experience_k: int) -> LedgerSearch:
    """The core's tiered search (the pages, then the ledger's own text search); a candidate the index also holds
    as a page (``kwiki ingest --ledger``) that ranked among the pages is listed with the others in ``tried``."""
    tiers = kw.core.tiered_search(SearchRequest(q=query, k=k), experience_k, status)
    resp = SearchResponse.model_validate(tiers["pages"])
    pages = kw.core.get().pages
    among_pages = [{**h.model_dump(), **candidate_fields(pages.get(h.id))} for h in resp.hits if h.type == PAGE_TYPE]
    among_pages = [h for h in among_pages if h.get("candidate") and (status is None or h.get("status") == status)]
    resp.hits = [h for h in resp.hits if h.type != PAGE_TYPE]
    resp.experience = (among_pages + tiers["experience"]["hits"])[:experience_k]
    return LedgerSearch(**compact_search(resp).model_dump(), candidates=int(tiers["experience"]["total_candidates"]))


def serve(settings: Settings, http: bool = False, port: int = 8765, workspace: Path | None = None) -> None:
    """Run over stdio (default) or streamable HTTP on loopback (``http://127.0.0.1:{port}/mcp``)."""
    backend = Backend(settings, workspace)
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
