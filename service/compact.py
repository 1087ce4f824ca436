"""Compact views of kwiki's responses, sized for an agent's context window.

The MCP tools return these instead of the full HTTP documents: the same hits in the same order
(they are projections of :class:`SearchResponse` / :class:`PageResponse` / ``DiagnoseResponse``,
never a second search), minus the ranking internals (``why``, scores of fused lists, line spans).

    >>> from kwiki.index.results import SearchResponse, Hit
    >>> resp = SearchResponse(query="q", k=1, hits=[Hit(id="pattern-x", page_id="pattern-x", title="X",
    ...     type="pattern", corpus="kwiki", path="wiki/x.md", score=1.0, snippet="s")])
    >>> compact_search(resp).hits[0].id
    'pattern-x'
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from kwiki.index.results import PageResponse, SearchResponse, SourceRef

#: sources listed per hit; get_page returns all of them
MAX_HIT_SOURCES = 5
SNIPPET_CHARS = 320


class Source(BaseModel):
    """A page's source: ``id`` opens with get_page when ``resolved``; ``url`` is the original."""

    id: str
    title: str | None = None
    url: str | None = None
    resolved: bool = False


class CompactHit(BaseModel):
    id: str = Field(description="Page key: pass it to get_page")
    title: str
    type: str
    corpus: str
    confidence: str | None = Field(None, description="verified | source-reported | inferred | experimental")
    score: float
    snippet: str
    matched: str | None = Field(None, description="The page's sentence that matched the query, when one did")
    fix_of: str | None = Field(None, description="The leading pattern page that names this page as a fix")
    related_to: str | None = Field(None, description="The leading page that lists this page as related")
    clause: str | None = Field(None, description="For a long query: the clause this page answers most closely")
    sources: list[Source] = Field(default_factory=list)


class CompactSearch(BaseModel):
    query: str
    hits: list[CompactHit]
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
    body: str
    sources: list[Source] = Field(default_factory=list)
    related: list[Source] = Field(default_factory=list)
    artifacts: list[dict[str, Any]] = Field(default_factory=list)


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
    hotspots: list[str] = Field(default_factory=list, description="Source lines by warp-stall samples: 'share file:line code | stalls | facts -> signals'")
    warnings: list[str] = Field(default_factory=list)


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


def _sources(refs: list[SourceRef], limit: int | None = None) -> list[Source]:
    return [Source(id=s.id, title=s.title, url=s.url, resolved=s.resolved) for s in refs[:limit]]


def compact_search(resp: SearchResponse) -> CompactSearch:
    """The hits of ``resp`` in the same order, each with one snippet and its first sources."""
    return CompactSearch(
        query=resp.query, filters=resp.filters,
        signals=[str(s.get("signal")) for s in resp.signals if s.get("signal")],
        corrections=[str(c) for c in resp.interpreted.corrections],
        hits=[CompactHit(id=h.id, title=h.title, type=h.type, corpus=h.corpus, confidence=h.confidence,
                         score=h.score, snippet=h.snippet[:SNIPPET_CHARS], matched=h.why.sentence, fix_of=h.why.fix_of,
                         related_to=h.why.related_to, clause=h.why.clause,
                         sources=_sources(h.sources, MAX_HIT_SOURCES))
              for h in resp.hits],
    )


def compact_page(resp: PageResponse) -> CompactPage:
    """The whole page (body included) with resolved sources, without ingest provenance."""
    return CompactPage(
        id=resp.id, title=resp.title, type=resp.type, corpus=resp.corpus, path=resp.path, confidence=resp.confidence,
        reproducibility=resp.reproducibility, url=resp.url, facets=resp.facets, body=resp.body,
        sources=_sources(resp.sources), related=_sources(resp.related), artifacts=resp.artifacts,
    )


def _evidence_line(ev: Any) -> str:
    line = f"{ev.metric} = {ev.value}"
    if getattr(ev, "threshold", None) is not None:
        line += f" (threshold {ev.threshold})"
    if getattr(ev, "note", ""):
        line += f": {ev.note}"
    return line


def compact_diagnosis(resp: Any, max_launches: int = 5, max_signals: int = 5) -> CompactDiagnosis:
    """The top signals of the first launches of a ``DiagnoseResponse``, evidence as one line each."""
    launches = []
    for launch in resp.launches[:max_launches]:
        signals = [
            DiagnosedSignal(
                signal=s.signal, title=s.title, magnitude=round(float(s.magnitude), 4),
                evidence=[_evidence_line(e) for e in s.evidence[:6]], techniques=list(s.techniques[:6]),
                pages=[{"id": p.id, "title": p.title, "type": p.type, "confidence": p.confidence} for p in s.pages],
                by_design=bool(getattr(s, "by_design", False)),
            )
            for s in launch.signals[:max_signals]
        ]
        v, nxt = getattr(launch, "verdict", None), getattr(launch, "next_step", None)
        launches.append(DiagnosedLaunch(kernel=launch.name or launch.kernel, signals=signals,
                                        verdict=f"{v.status}: {v.summary}" if v else "",
                                        checks=[f"{c.level} {c.check}: {c.message}" for c in v.checks] if v else [],
                                        not_evaluated=sorted({m.signal for m in launch.missing}),
                                        key_metrics=dict(launch.key_metrics),
                                        next_step=f"{nxt.command} && {nxt.export}" if nxt else "",
                                        timeline=_timeline_line(getattr(launch, "timeline", None))))
    return CompactDiagnosis(format=resp.format, launches=launches, launches_total=len(resp.launches),
                            text_signals=[str(t.get("signal")) for t in getattr(resp, "text_signals", []) if t.get("signal")],
                            kernels=[f"{ks.share:.1%} {ks.kernel[:120]} ({ks.top or '-'})" for ks in getattr(resp, "kernels", [])[:10]],
                            hotspots=_hotspot_lines(getattr(resp, "hotspots", None)),
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


def compact_comparison(c: Any) -> CompactComparison:
    """A ``Comparison`` for agents: per matched kernel the speedup, verdict, signal changes and changed metrics."""
    kernels = [ComparedKernel(
        kernel=k.after_kernel if k.after_kernel == k.before_kernel else f"{k.before_kernel} -> {k.after_kernel}",
        speedup=k.speedup, verdict=k.verdict, noise=k.noise, resolved=[x.signal for x in k.resolved], appeared=[x.signal for x in k.appeared],
        persisting=[f"{x.signal} ({x.before:.2f} -> {x.after:.2f})" for x in k.persisting],
        deltas=[f"{d.metric}: {d.before:g} -> {d.after:g}" for d in k.deltas if d.before is not None and d.after is not None and d.before != d.after],
    ) for k in c.kernels[:20]]
    return CompactComparison(verdict=c.verdict, speedup=c.speedup, rule=c.rule, kernels=kernels,
                             unmatched=[f"before: {x}" for x in c.unmatched_before] + [f"after: {x}" for x in c.unmatched_after],
                             warnings=list(c.warnings[:10]))
