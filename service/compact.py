"""Compact views of kwiki's responses, sized for an agent's context window.

The MCP tools return these instead of the full HTTP documents: the same hits in the same order
(they are projections of :class:`SearchResponse` / :class:`PageResponse` / ``DiagnoseResponse``,
never a second search), minus the ranking internals (``why``, scores of fused lists, line spans).
Three rules keep them small (``benchmarks/mcp_size.py`` measures what each saves):

* a field left at its default (None, ``""``, ``[]``, ``False``) is not written (:func:`to_wire`);
* JSON without indentation or spaces after separators (:func:`to_json`);
* a search lists each source once, in ``sources`` keyed by id, and a hit names its sources by id; a source that
  is a page of the index is named by title (its URL is one get_page away).

    >>> from kwiki.index.results import SearchResponse, Hit, SourceRef
    >>> src = SourceRef(id="doc-ncu", title="NCU guide", resolved=True)
    >>> resp = SearchResponse(query="q", k=2, hits=[Hit(id=f"pattern-{x}", page_id=f"pattern-{x}", title=x.upper(),
    ...     type="pattern", corpus="kwiki", path=f"wiki/{x}.md", score=1.0, snippet="s", sources=[src]) for x in "ab"])
    >>> to_json(compact_search(resp))
    '{"query":"q","hits":[{"id":"pattern-a","title":"A","type":"pattern","corpus":"kwiki","score":1.0,"snippet":"s","sources":["doc-ncu"]},{"id":"pattern-b","title":"B","type":"pattern","corpus":"kwiki","score":1.0,"snippet":"s","sources":["doc-ncu"]}],"sources":{"doc-ncu":{"title":"NCU guide","resolved":true}}}'
"""

from __future__ import annotations

import json
import re
from typing import Any

from markdown_it import MarkdownIt
from pydantic import BaseModel, Field

from kwiki.errors import BadRequest, NotFound
from kwiki.index.results import PageResponse, SearchResponse, SourceRef
from kwiki.ledger import Candidate, TaskTree
from kwiki.profiling.catalog import MetricDef
from kwiki.profiling.compare import Comparison
from kwiki.profiling.diagnose import DiagnoseResponse

#: sources listed per hit; get_page returns all of them
MAX_HIT_SOURCES = 5
SNIPPET_CHARS = 320
#: digits kept of a score: the order is what matters, and 0.8731 says as much as 0.873114583
SCORE_DIGITS = 4
#: metrics of a candidate's evidence shown by the ledger tools (a diagnosis records a few dozen)
MAX_CANDIDATE_METRICS = 12


def to_wire(model: BaseModel) -> dict[str, Any]:
    """The model as the tools send it: JSON types, fields left at their default (None, "", [], False) left out."""
    return model.model_dump(mode="json", exclude_defaults=True)


def to_json(model: BaseModel) -> str:
    """:func:`to_wire` as JSON without indentation (the text block of a tool result)."""
    return json.dumps(to_wire(model), ensure_ascii=False, separators=(",", ":"))


class Source(BaseModel):
    """A page's source: ``id`` opens with get_page when ``resolved``; ``url`` is the original."""

    id: str
    title: str | None = None
    url: str | None = None
    resolved: bool = False


class SourceInfo(BaseModel):
    """A source of a search's hits, listed once per response under its id. A resolved source is a page of the
    index: get_page of its id gives its text and its URL; an unresolved one carries its URL here."""

    title: str | None = None
    url: str | None = Field(default=None, description="The original, for a source that is not a page of the index")
    resolved: bool = Field(default=False, description="True: the source is a page of the index; open its id with get_page")


class CompactHit(BaseModel):
    id: str = Field(description="Page key: pass it to get_page (or get_section with a heading)")
    title: str
    type: str
    corpus: str
    confidence: str | None = Field(default=None, description="verified | source-reported | inferred | experimental")
    score: float
    snippet: str
    section: str | None = Field(default=None, description="The heading of the page's section the snippet comes from (get_section)")
    matched: str | None = Field(default=None, description="The page's sentence that matched the query, when one did")
    fix_of: str | None = Field(default=None, description="The leading pattern page that names this page as a fix")
    related_to: str | None = Field(default=None, description="The leading page that lists this page as related")
    clause: str | None = Field(default=None, description="For a long query: the clause this page answers most closely")
    sources: list[str] = Field(default_factory=list, description="Source ids; each is described once in the response's `sources`")


class TriedCandidate(BaseModel):
    """A ledger candidate a search found: what was tried, and how it fared."""

    candidate: str = Field(description="task/id: pass it to ledger_show")
    status: str = Field(description="candidate | promoted | rejected")
    mechanism: str = ""
    reason: str = ""
    correct: bool | None = None
    score: float = 0.0


class CompactSearch(BaseModel):
    query: str
    no_match: bool = Field(default=False, description="No page really matches the query: the hits are only the nearest pages")
    note: str | None = Field(default=None, description="Why the query has no real match, when it has none")
    hits: list[CompactHit]
    sources: dict[str, SourceInfo] = Field(default_factory=dict, description="Every source the hits name, once")
    tried: list[TriedCandidate] = Field(default_factory=list, description="Ledger candidates on the topic (own tier, after the pages)")
    signals: list[str] = Field(default_factory=list, description="NCU signals recognized in the query")
    corrections: list[str] = Field(default_factory=list, description="Likely typos, 'typed -> searched' (stemmed)")
    filters: dict[str, list[str]] = Field(default_factory=dict)


class CompactPage(BaseModel):
    id: str
    title: str
    type: str
    corpus: str
    path: str
    confidence: str | None = None
    reproducibility: str | None = None
    url: str | None = None
    facets: dict[str, list[str]] = Field(default_factory=dict)
    headings: list[str] = Field(default_factory=list, description="The page's section headings, for get_section")
    body: str
    sources: list[Source] = Field(default_factory=list)
    related: list[Source] = Field(default_factory=list)
    artifacts: list[dict[str, Any]] = Field(default_factory=list)
    ledger: dict[str, Any] | None = Field(default=None, description="Ledger candidates that applied this page: counts by status")


class CompactSection(BaseModel):
    id: str = Field(description="The page key")
    title: str = Field(description="The page's title")
    heading: str = Field(description="The section's heading path, outer headings first, joined by ' > '")
    lines: tuple[int, int] = Field(description="First and last line of the section in the page body (1-based)")
    confidence: str | None = None
    text: str = Field(description="The section's markdown, its heading and subsections included")


class DiagnosedSignal(BaseModel):
    signal: str
    title: str
    magnitude: float = Field(description="Estimated share of the kernel's runtime at stake (0..1)")
    evidence: list[str] = Field(default_factory=list, description="metric = value (threshold) lines")
    pages: list[dict[str, Any]] = Field(default_factory=list, description="Ranked pages: id, title, type, confidence")
    techniques: list[str] = Field(default_factory=list)
    by_design: bool = Field(default=False, description="A limiter the kernel has on purpose (e.g. one CTA per SM at the speed of light)")


class DiagnosedLaunch(BaseModel):
    kernel: str
    verdict: str = Field(default="", description="status: summary (speed-of-light, limited, partial, no-signal, invalid)")
    checks: list[str] = Field(default_factory=list, description="Validity checks that did not pass (clocks, zero counters, warm-up, ...)")
    signals: list[DiagnosedSignal] = Field(default_factory=list)
    not_evaluated: list[str] = Field(default_factory=list, description="Signals whose metrics are absent from the export")
    key_metrics: dict[str, float] = Field(default_factory=dict)
    next_step: str = Field(default="", description="The ncu command that confirms or localizes the diagnosis, then its export")
    timeline: str = Field(default="", description="PM-sampling SM activity as a sparkline, then what it shows (tail, idle stretches)")


class CompactDiagnosis(BaseModel):
    format: str = ""
    launches: list[DiagnosedLaunch] = Field(default_factory=list)
    launches_total: int = 0
    text_signals: list[str] = Field(default_factory=list, description="Signals recognized in pasted text")
    kernels: list[str] = Field(default_factory=list, description="Kernels by share of GPU time: 'share% name (top signal)'")
    program: str = Field(default="", description="An export of several kernels read as one program: where its wall time goes first")
    hotspots: list[str] = Field(default_factory=list, description="Source lines by warp-stall samples: 'share file:line code | stalls | facts -> signals'")
    warnings: list[str] = Field(default_factory=list)
    recorded: str | None = Field(default=None, description="The ledger candidate (task/id) the diagnosis was attached to")


class ComparedKernel(BaseModel):
    kernel: str
    speedup: float = Field(description="median duration before / after")
    verdict: str = Field(description="improved, regressed or within-noise (see rule)")
    noise: float
    resolved: list[str] = Field(default_factory=list)
    appeared: list[str] = Field(default_factory=list)
    persisting: list[str] = Field(default_factory=list, description="signal (magnitude before -> after)")
    deltas: list[str] = Field(default_factory=list, description="metric: before -> after")


class CompactComparison(BaseModel):
    verdict: str
    speedup: float | None = None
    rule: str
    kernels: list[ComparedKernel] = Field(default_factory=list)
    unmatched: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    recorded: str | None = Field(default=None, description="The ledger candidate (task/id) the comparison was attached to")


class CompactCandidate(BaseModel):
    """One ledger candidate, its evidence flattened to what an agent acts on."""

    key: str = Field(description="task/id: how the other ledger tools name it")
    parent: str | None = None
    kernel: str = ""
    mechanism: str = ""
    techniques: list[str] = Field(default_factory=list)
    patterns: list[str] = Field(default_factory=list)
    status: str = Field(description="candidate | promoted | rejected")
    reason: str = ""
    correct: bool | None = Field(default=None, description="Correctness check: true, false, or absent when not checked")
    correctness: str = ""
    benchmarks: list[str] = Field(default_factory=list, description="'metric value unit (baseline B) shape dtype gpu'")
    signals: list[str] = Field(default_factory=list, description="Signals of the attached diagnosis, strongest first")
    metrics: dict[str, float] = Field(default_factory=dict, description="Key metrics of the attached diagnosis")
    reports: list[str] = Field(default_factory=list)
    comparison: str = Field(default="", description="The attached comparison with the parent: verdict, speedup, signals resolved")
    author: str = ""
    updated_at: str | None = None


class TreeLine(BaseModel):
    id: str
    depth: int = 0
    parent: str | None = None
    status: str = Field(description="candidate | promoted | rejected")
    mechanism: str = ""
    reason: str = ""
    on_promoted_path: bool = False
    missing_parent: str | None = Field(default=None, description="The parent id it names, when that is not in the ledger")


class CompactTree(BaseModel):
    task: str
    size: int
    promoted: list[str] = Field(default_factory=list)
    rows: list[TreeLine] = Field(default_factory=list, description="Pre-order: a row's children follow it, one depth deeper")


class CompactTrees(BaseModel):
    workspace: str
    tasks: list[CompactTree] = Field(default_factory=list)
    problems: list[str] = Field(default_factory=list, description="Ledger lines skipped as unreadable")


class MetricInfo(BaseModel):
    id: str = Field(description="kwiki's canonical id")
    name: str = Field(description="The ncu name to collect or look for (sm_90 first)")
    unit: str = ""
    meaning: str = ""
    names: dict[str, str] = Field(default_factory=dict, description="ncu names per chip")
    other_names: list[str] = Field(default_factory=list, description="Older or newer spellings")
    display_names: list[str] = Field(default_factory=list, description="Labels of the --page details CSV")
    signals: list[str] = Field(default_factory=list, description="kwiki signals that read it (diagnose)")


class MetricLookup(BaseModel):
    query: str
    stall_reason: str | None = Field(default=None, description="The warp-stall reason the query names, when it names one")
    metrics: list[MetricInfo]
    patterns: list[str] = Field(default_factory=list, description="Pattern pages of those signals (get_page)")
    pages: list[str] = Field(default_factory=list, description="Pages that explain it, best first (get_page)")


def _score(value: float) -> float:
    return round(float(value), SCORE_DIGITS)


def compact_search(resp: SearchResponse) -> CompactSearch:
    """The hits of ``resp`` in the same order, each with one snippet and the ids of its first sources; every
    source once in ``sources``."""
    sources: dict[str, SourceInfo] = {}
    hits = []
    for h in resp.hits:
        refs = h.sources[:MAX_HIT_SOURCES]
        for s in refs:
            sources.setdefault(s.id, SourceInfo(title=s.title, url=None if s.resolved else s.url, resolved=s.resolved))
        hits.append(CompactHit(id=h.id, title=h.title, type=h.type, corpus=h.corpus, confidence=h.confidence,
                               score=_score(h.score), snippet=h.snippet[:SNIPPET_CHARS],
                               section=h.heading_path[-1] if h.heading_path else None, matched=h.why.sentence,
                               fix_of=h.why.fix_of, related_to=h.why.related_to, clause=h.why.clause,
                               sources=[s.id for s in refs]))
    return CompactSearch(
        query=resp.query, no_match=resp.no_match, note=resp.note, filters=resp.filters, hits=hits, sources=sources,
        tried=[_tried(e) for e in resp.experience],
        signals=[str(s.get("signal")) for s in resp.signals if s.get("signal")],
        corrections=[str(c) for c in resp.interpreted.corrections],
    )


def _tried(hit: dict[str, Any]) -> TriedCandidate:
    return TriedCandidate(candidate=str(hit.get("candidate") or hit.get("id")), status=str(hit.get("status") or "candidate"),
                          mechanism=str(hit.get("mechanism") or ""), reason=str(hit.get("reason") or ""),
                          correct=hit.get("correct"), score=_score(hit.get("score") or 0.0))


def _sources(refs: list[SourceRef], limit: int | None = None) -> list[Source]:
    return [Source(id=s.id, title=s.title, url=s.url, resolved=s.resolved) for s in refs[:limit]]


_md = MarkdownIt("commonmark").enable("table")


def headings(body: str) -> list[tuple[int, list[str], int, int]]:
    """The sections of a markdown body: ``(level, heading path, first line, end line)`` (0-based, end exclusive;
    a section runs to the next heading of its level or higher). A ``#`` inside a code fence is not a heading.
    A page's one top heading is its title: the paths below it leave it out.

    >>> [(lvl, path, a, b) for lvl, path, a, b in headings("# A\\nx\\n## B\\ny\\n```\\n# no\\n```\\n# C\\n")]
    [(1, ['A'], 0, 7), (2, ['A', 'B'], 2, 7), (1, ['C'], 7, 9)]
    >>> [path for _, path, _, _ in headings("# Title\\n## Fixes\\n### Stream-K\\n")]
    [['Title'], ['Fixes'], ['Fixes', 'Stream-K']]
    """
    tokens = _md.parse(body)
    n_lines = len(body.split("\n"))
    found: list[tuple[int, str, int]] = []
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open" and tok.level == 0 and tok.map is not None:
            found.append((int(tok.tag[1]), tokens[i + 1].content.strip() if i + 1 < len(tokens) else "", tok.map[0]))
    out = []
    path: list[tuple[int, str]] = []
    for j, (level, title, start) in enumerate(found):
        while path and path[-1][0] >= level:
            path.pop()
        path.append((level, title))
        end = next((s for lv, _, s in found[j + 1:] if lv <= level), n_lines)
        out.append((level, [t for _, t in path], start, end))
    tops = [s for s in out if len(s[1]) == 1]
    if len(tops) == 1 and out[0] is tops[0]:  # the title: its sections are named without it
        out = [out[0]] + [(lvl, path[1:], a, b) for lvl, path, a, b in out[1:]]
    return out


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[`*_#]", "", text).lower().split())


def compact_section(resp: PageResponse, heading: str) -> CompactSection:
    """One section of the page: the heading that matches ``heading`` (its text, or a path ``A > B``; case and
    markdown emphasis ignored; else the one heading that starts with it, else the one that contains it)."""
    sections = headings(resp.body)
    want = [_norm(p) for p in heading.split(">") if p.strip()]
    if not want:
        raise BadRequest("heading is empty", hint="give one of the page's headings (get_page lists them in `headings`)")
    exact = [s for s in sections if [_norm(t) for t in s[1][-len(want):]] == want]
    last = want[-1]
    found = (exact or [s for s in sections if _norm(s[1][-1]).startswith(last)]
             or [s for s in sections if last in _norm(s[1][-1])])
    listed = "; ".join(" > ".join(s[1]) for s in sections[:40]) or "(the page has no headings)"
    if not found:
        raise NotFound(f"page {resp.id} has no section '{heading[:120]}'", hint=f"its headings: {listed}")
    if len(found) > 1:
        raise BadRequest(f"'{heading[:120]}' matches {len(found)} sections of {resp.id}",
                         hint="give the heading path, e.g. " + "; ".join(" > ".join(s[1]) for s in found[:5]))
    _, path, start, end = found[0]
    lines = resp.body.split("\n")
    return CompactSection(id=resp.id, title=resp.title, heading=" > ".join(path), lines=(start + 1, end),
                          confidence=resp.confidence, text="\n".join(lines[start:end]).strip("\n"))


def compact_page(resp: PageResponse) -> CompactPage:
    """The whole page (body included) with resolved sources and its headings, without ingest provenance."""
    return CompactPage(
        id=resp.id, title=resp.title, type=resp.type, corpus=resp.corpus, path=resp.path, confidence=resp.confidence,
        reproducibility=resp.reproducibility, url=resp.url, facets=resp.facets, body=resp.body,
        headings=[" > ".join(path) for _, path, _, _ in headings(resp.body)],
        sources=_sources(resp.sources), related=_sources(resp.related),
        artifacts=[{k: v for k, v in a.items() if v not in (None, "", [], {})} for a in resp.artifacts],
        ledger={k: v for k, v in resp.ledger.items() if k in ("counts", "total")} if resp.ledger else None,
    )


def _evidence_line(ev: Any) -> str:
    line = f"{ev.metric} = {ev.value}"
    if getattr(ev, "threshold", None) is not None:
        line += f" (threshold {ev.threshold})"
    if getattr(ev, "note", ""):
        line += f": {ev.note}"
    return line


def _page_ref(p: Any) -> dict[str, Any]:
    return {k: v for k, v in {"id": p.id, "title": p.title, "type": p.type, "confidence": p.confidence}.items() if v}


def compact_diagnosis(resp: DiagnoseResponse, max_launches: int = 5, max_signals: int = 5) -> CompactDiagnosis:
    """The top signals of the first launches of a ``DiagnoseResponse``, evidence as one line each."""
    launches = []
    for launch in resp.launches[:max_launches]:
        signals = [
            DiagnosedSignal(
                signal=s.signal, title=s.title, magnitude=round(float(s.magnitude), 4),
                evidence=[_evidence_line(e) for e in s.evidence[:6]], techniques=list(s.techniques[:6]),
                pages=[_page_ref(p) for p in s.pages], by_design=bool(s.by_design),
            )
            for s in launch.signals[:max_signals]
        ]
        v, nxt = launch.verdict, launch.next_step
        launches.append(DiagnosedLaunch(kernel=launch.name or launch.kernel, signals=signals,
                                        verdict=f"{v.status}: {v.summary}" if v else "",
                                        checks=[f"{c.level} {c.check}: {c.message}" for c in v.checks] if v else [],
                                        not_evaluated=sorted({m.signal for m in launch.missing}),
                                        key_metrics=dict(launch.key_metrics),
                                        next_step=f"{nxt.command} && {nxt.export}" if nxt else "",
                                        timeline=_timeline_line(launch.timeline)))
    return CompactDiagnosis(format=resp.format, launches=launches, launches_total=len(resp.launches),
                            text_signals=[str(t.get("signal")) for t in resp.text_signals if t.get("signal")],
                            kernels=[f"{ks.share:.1%} {ks.kernel[:120]} ({ks.top or '-'})" for ks in resp.kernels[:10]],
                            program=resp.program.summary if resp.program is not None and len(resp.kernels) > 1 else "",
                            hotspots=_hotspot_lines(resp.hotspots),
                            warnings=list(resp.warnings[:10]))


def _timeline_line(t: Any) -> str:
    return f"{t.sparkline} | {'; '.join(t.evidence + t.warnings)}" if t is not None else ""


def _hotspot_lines(h: Any) -> list[str]:
    if h is None:
        return []
    out = []
    for spot in h.hotspots:
        where = f"{spot.file.rsplit('/', 1)[-1]}:{spot.line}" if spot.line is not None else str(spot.address)
        stalls = ", ".join(f"{r} {v:.0%}" for r, v in spot.stalls.items())
        out.append(f"{spot.share:.1%} {where} {spot.code[:100]} | {stalls} | {'; '.join(spot.facts)} -> {', '.join(spot.signals)}")
    return out + [f"warning: {w}" for w in h.warnings[:3]]


def compact_comparison(c: Comparison) -> CompactComparison:
    """A ``Comparison`` for agents: per matched kernel the speedup, verdict, signal changes and changed metrics."""
    kernels = [ComparedKernel(
        kernel=k.after_kernel if k.after_kernel == k.before_kernel else f"{k.before_kernel} -> {k.after_kernel}",
        speedup=k.speedup, verdict=k.verdict, noise=k.noise, resolved=[x.signal for x in k.resolved], appeared=[x.signal for x in k.appeared],
        persisting=[f"{x.signal} ({x.before or 0:.2f} -> {x.after or 0:.2f})" for x in k.persisting],
        deltas=[f"{d.metric}: {d.before:g} -> {d.after:g}" for d in k.deltas if d.before is not None and d.after is not None and d.before != d.after],
    ) for k in c.kernels[:20]]
    return CompactComparison(verdict=c.verdict, speedup=c.speedup, rule=c.rule, kernels=kernels,
                             unmatched=[f"before: {x}" for x in c.unmatched_before] + [f"after: {x}" for x in c.unmatched_after],
                             warnings=list(c.warnings[:10]))


def _bench_line(b: Any) -> str:
    line = f"{b.metric} {b.value:g} {b.unit}".strip() if b.value is not None else b.metric
    if b.baseline is not None:
        line += f" (baseline {b.baseline:g})"
    return " ".join(x for x in (line, b.shape, b.dtype, b.gpu) if x)


def _comparison_line(doc: Any) -> str:
    if not isinstance(doc, dict) or not doc.get("verdict"):
        return ""
    line = f"{doc['verdict']}"
    if isinstance(doc.get("speedup"), (int, float)):
        line += f" {doc['speedup']:.2f}x"
    if doc.get("baseline"):
        line += f" against {doc['baseline']}"
    resolved = sorted({s for k in doc.get("kernels") or [] if isinstance(k, dict) for s in k.get("resolved") or []})
    return line + (f"; resolved: {', '.join(resolved)}" if resolved else "")


def compact_candidate(c: Candidate) -> CompactCandidate:
    """A candidate record for the ledger tools: evidence flattened, its strongest metrics only."""
    ev = c.evidence
    extra = ev.model_extra or {}
    return CompactCandidate(
        key=c.key, parent=c.parent, kernel=c.kernel, mechanism=c.mechanism, techniques=c.techniques, patterns=c.patterns,
        status=c.status, reason=c.reason, correct=c.correctness.passed, correctness=c.correctness.detail,
        benchmarks=[_bench_line(b) for b in c.benchmarks], signals=ev.signals,
        metrics=dict(list(ev.metrics.items())[:MAX_CANDIDATE_METRICS]), reports=ev.reports,
        comparison=_comparison_line(extra.get("comparison")), author=str(c.author) if c.author else "",
        updated_at=c.updated_at,
    )


def compact_trees(trees: list[TaskTree], workspace: str, problems: list[str]) -> CompactTrees:
    return CompactTrees(workspace=workspace, problems=problems, tasks=[CompactTree(
        task=t.task, size=t.size, promoted=t.promoted,
        rows=[TreeLine(id=r.id, depth=r.depth, parent=r.parent.rsplit("/", 1)[-1] if r.parent and r.parent.startswith(f"{t.task}/") else r.parent,
                       status=r.status, mechanism=r.mechanism, reason=r.reason, on_promoted_path=r.on_promoted_path,
                       missing_parent=r.missing_parent) for r in t.rows]) for t in trees])


def metric_info(m: MetricDef) -> MetricInfo:
    return MetricInfo(id=m.id, name=m.primary, unit=m.unit, meaning=m.meaning, names=m.names, other_names=m.other_names,
                      display_names=m.display_names, signals=m.feeds)
