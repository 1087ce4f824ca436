"""Diagnose Nsight Compute exports: per launch, the fired signals ranked by magnitude, with evidence,
the pattern pages and techniques they point to, and what could not be evaluated.

    >>> from kwiki.profiling.diagnose import diagnose_bytes, diagnose_metrics
    >>> r = diagnose_metrics({"launch__grid_size": 32, "launch__sm_count": 132})
    >>> r.launches[0].signals[0].signal
    'small-grid'
    >>> data = open("tests/data/ncu/tail_effect-bad.raw.csv", "rb").read()       # doctest: +SKIP
    >>> diagnose_bytes(data, "tail_effect-bad.raw.csv").launches[0].signals[0].signal  # doctest: +SKIP
    'tail-effect'

Profiling knows nothing of the index: ``SignalResult.pages`` stays empty here, and the service attaches
ranked pages as a step of its own (:mod:`kwiki.service.diagnosis`, once per distinct signal).
"""

from __future__ import annotations

import re
import time
from typing import Any

from pydantic import BaseModel, Field, computed_field

from kwiki.errors import BadInput, RequestTimeout

from .catalog import load_catalog
from .hotspots import HotspotReport, _plain, is_source_page, parse_source_page
from .messages import message_hits
from .ncu_csv import (
    MAX_BYTES,
    MAX_LAUNCHES,
    LaunchProfile,
    ParseResult,
    RuleResult,
    find_header,
    parse_bytes,
    parse_csv_text,
    parse_json_text,
    parse_metrics_dict,
)
from .next_step import NextStep, next_step
from .program import KernelShare, ProgramReading, rank_kernels, read_program, select_kernel
from .report_views import report_views
from .repz import unwrap as unwrap_repz
from .routing import route
from .rulebase import MATMUL_NAME, MATMUL_NAMED, Verdict
from .rules import Evidence, Missing, evaluate
from .signals import load_signals
from .timeline import Timeline, apply_timelines, attach_timelines, has_timeline
from .verdict import program_checks

#: Pasted text read for ``metric=value`` pairs and console lines (a pasted report is a few KiB).
TEXT_SCAN_CHARS = 200_000
#: Pasted text split into rule messages, and the most messages kept.
TEXT_RULE_CHARS, TEXT_MAX_RULES = 50_000, 200
#: Longer lines are not ncu console lines ("DRAM Throughput    %    92.51" is under 100 characters).
MAX_CONSOLE_LINE = 300
SHORT_LAUNCH_NS = 10_000.0
KEY_METRICS = ("duration", "grid_size", "block_size", "registers_per_thread", "waves_per_sm", "sm_throughput_pct",
               "memory_throughput_pct", "dram_throughput_pct", "l2_throughput_pct", "achieved_occupancy",
               "theoretical_occupancy", "issue_active_pct", "pipe_fma_cycles_pct", "threads_per_inst")


class PageRef(BaseModel):
    id: str
    title: str = ""
    type: str = ""
    corpus: str = ""
    confidence: str | None = None
    score: float | None = None
    via: str = "search"


class SignalResult(BaseModel):
    signal: str
    title: str
    magnitude: float
    source: str = "metrics"
    evidence: list[Evidence] = Field(default_factory=list)
    patterns: list[str] = Field(default_factory=list)
    symptoms: list[str] = Field(default_factory=list)
    techniques: list[str] = Field(default_factory=list)
    pages: list[PageRef] = Field(default_factory=list)
    by_design: bool = False


class LaunchDiagnosis(BaseModel):
    kernel: str
    launch_id: str
    name: str
    signals: list[SignalResult] = Field(default_factory=list)
    missing: list[Missing] = Field(default_factory=list)
    stall_shares: dict[str, float] = Field(default_factory=dict)
    key_metrics: dict[str, float] = Field(default_factory=dict)
    metrics_read: int = 0
    unknown_metrics: int = 0
    rules_read: int = 0
    verdict: Verdict | None = None
    next_step: NextStep | None = None
    timeline: Timeline | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def top(self) -> str | None:
        return self.signals[0].signal if self.signals else None


class DiagnoseResponse(BaseModel):
    filename: str = ""
    format: str = ""
    launches: list[LaunchDiagnosis] = Field(default_factory=list)
    text_signals: list[dict[str, Any]] = Field(default_factory=list)
    kernels: list[KernelShare] = Field(default_factory=list)
    program: ProgramReading | None = None  # an export of several launches read as one program
    hotspots: HotspotReport | None = None
    warnings: list[str] = Field(default_factory=list)
    took_ms: float = 0.0


# ------------------------------------------------------------------ deadline
def check_deadline(deadline: float | None) -> None:
    """Raise :class:`RequestTimeout` once ``time.monotonic()`` is past ``deadline`` (None: no deadline)."""
    if deadline is not None and time.monotonic() > deadline:
        raise RequestTimeout("the diagnosis took longer than the request time limit",
                             hint="upload fewer launches (ncu -k NAME -c N) or retry")


# ------------------------------------------------------------------ core
def diagnose_profile(p: LaunchProfile, context: dict[str, float] | None = None) -> LaunchDiagnosis:
    """Evaluate one launch."""
    named = {MATMUL_NAMED: 1.0} if MATMUL_NAME.search(p.kernel or p.name or "") else {}
    ev = evaluate(p.metrics, p.rules, {**(context or {}), **named})
    defs = load_signals()
    results = [SignalResult(signal=f.signal, title=defs[f.signal].title, magnitude=f.magnitude, source=f.source,
                            evidence=f.evidence, patterns=defs[f.signal].patterns, symptoms=defs[f.signal].symptoms,
                            techniques=defs[f.signal].techniques,
                            by_design=ev.verdict is not None and f.signal in ev.verdict.by_design)
               for f in ev.fired]
    return LaunchDiagnosis(
        kernel=p.kernel, launch_id=p.launch_id, name=p.name, signals=results, missing=ev.missing, stall_shares=ev.stall_shares,
        key_metrics={key: round(p.metrics[key], 4) for key in KEY_METRICS if key in p.metrics},
        metrics_read=len(p.metrics), unknown_metrics=p.unknown_count, rules_read=len(p.rules), verdict=ev.verdict,
        next_step=next_step(_next_signal(results, ev.verdict), p.kernel or p.name),
    )


def _next_signal(results: list[SignalResult], verdict: Verdict | None) -> str | None:
    """What the next capture should confirm: the first signal, "no-signal" on a complete export where nothing fired,
    None where the export is partial (capture the full set)."""
    if verdict is not None and verdict.status == "partial":
        return None
    if results:
        return results[0].signal
    return "no-signal" if verdict is not None and verdict.status == "no-signal" else None


def diagnose_parsed(parsed: ParseResult, filename: str = "", started: float | None = None,
                    kernel: str | None = None, deadline: float | None = None) -> DiagnoseResponse:
    """Diagnose every launch (at most :data:`MAX_LAUNCHES`); ``kernels`` ranks the kernels by their share of GPU
    time. ``deadline`` (a ``time.monotonic()`` value) stops the work with :class:`RequestTimeout` once passed."""
    started = time.perf_counter() if started is None else started
    profiles = select_kernel(parsed.profiles[:MAX_LAUNCHES], kernel) if kernel else parsed.profiles[:MAX_LAUNCHES]
    short = sum(1 for p in profiles if (p.metrics.get("duration") or float("inf")) < SHORT_LAUNCH_NS)
    resp = DiagnoseResponse(filename=filename[:300], format=parsed.format, warnings=list(parsed.warnings))
    shares = rank_kernels(profiles)
    for p in profiles:
        check_deadline(deadline)
        resp.launches.append(diagnose_profile(p, {"export_short_launches": float(short)}))
    by_kernel: dict[str, list[LaunchDiagnosis]] = {}
    for d in resp.launches:
        by_kernel.setdefault(d.kernel or d.name, []).append(d)
    for (name, i), check in program_checks({n: [d.key_metrics.get("duration", 0.0) for d in ds] for n, ds in by_kernel.items()}).items():
        verdict = by_kernel[name][i].verdict
        if verdict is not None:
            verdict.checks.append(check)
    resp.kernels = [s.model_copy(update={"top": by_kernel[s.kernel][s.longest].top if s.kernel in by_kernel else None}) for s in shares]
    resp.program = read_program(resp.kernels, [d.key_metrics.get("duration", 0.0) for d in resp.launches],
                                {s.kernel: [(x.signal, x.magnitude) for x in by_kernel[s.kernel][s.longest].signals
                                            if not x.by_design and x.signal != "speed-of-light"]
                                 for s in resp.kernels if s.kernel in by_kernel})
    if not any(d.metrics_read or d.rules_read for d in resp.launches):
        raise BadInput("no Nsight Compute metric in the input was recognized", hint="export with `--page raw --csv`")
    resp.took_ms = round((time.perf_counter() - started) * 1000, 2)
    return resp


def diagnose_bytes(data: bytes, filename: str, max_bytes: int = MAX_BYTES, kernel: str | None = None,
                   deadline: float | None = None) -> DiagnoseResponse:
    """Diagnose an uploaded export (raw/details/plain CSV, JSON, gzip, .ncu-rep). Raises :class:`BadInput`."""
    started = time.perf_counter()
    if not isinstance(data, (bytes, bytearray)):
        raise BadInput("expected bytes")
    if len(data) > max_bytes:
        raise BadInput(f"upload is {len(data)} bytes, over the {max_bytes}-byte limit")
    data, filename = unwrap_repz(bytes(data), filename, max_bytes)  # .ncu-repz -> .ncu-rep
    if is_source_page(bytes(data[:65536])):  # ncu --page source --csv: hotspots, no launch metrics
        return DiagnoseResponse(filename=filename[:300], format="source", hotspots=parse_source_page(bytes(data)),
                                took_ms=round((time.perf_counter() - started) * 1000, 2))
    resp = diagnose_parsed(parse_bytes(bytes(data), filename, max_bytes=max_bytes), filename, started,
                           kernel=kernel, deadline=deadline)
    if resp.format == "ncu-rep":  # the report itself: its PM-sampling series and per-PC samples (ncu_report)
        timelines, hotspots = report_views(_plain(bytes(data), max_bytes))
        apply_timelines(resp.launches, timelines)
        resp.hotspots = resp.hotspots or hotspots
    elif has_timeline(bytes(data)) or data[:2] == b"\x1f\x8b":  # a raw page with instances: PM-sampling timelines
        attach_timelines(resp.launches, bytes(data), max_bytes)
    return resp


def diagnose_metrics(metrics: dict[str, Any], deadline: float | None = None) -> DiagnoseResponse:
    """Diagnose ``{metric name: value}`` (any spelling the catalog knows; values may carry units: "45 %", "1.2 us")."""
    started = time.perf_counter()
    if not isinstance(metrics, dict):
        raise BadInput("metrics must be an object {metric name: value}")
    profile = parse_metrics_dict(metrics)
    if not profile.metrics and not profile.rules:
        raise BadInput("none of the metric names is known", hint="use ncu names such as sm__throughput.avg.pct_of_peak_sustained_elapsed; see GET /signals")
    return diagnose_parsed(ParseResult(format="json", profiles=[profile]), "", started, deadline=deadline)


# Every repeat in these patterns is bounded, so a match attempt costs a bounded number of steps wherever it starts and a
# scan is linear in the text: "a__." * 8000 made the unbounded `[a-z0-9_.]+` rescan the rest of the text from every start.
# A metric name starts where a run of name characters starts, so a scan tries each run once, not once per "a__" in it.
_NUMBER = r"[-+]?[\d,]{0,30}\.?\d{1,30}(?:[eE][-+]?\d{1,3})?"
_LINE = re.compile(r"^\s{0,100}([A-Za-z#][\w ./()%#-]{0,150}?[\w)%])\s{2,200}(?:([A-Za-z%/]{1,20})\s{1,100})?(" + _NUMBER + r")\s{0,100}$")
_PAIR = re.compile(r"(?<![\w.])([a-z][a-z0-9]{0,40}__[a-z0-9_.]{1,150})[ \t]{0,20}[:=]?[ \t]{0,20}(" + _NUMBER
                   + r")[ \t]{0,20}(%|[A-Za-z]{1,20}(?:/[A-Za-z]{1,20})?)?")
_BLANK_LINES = re.compile(r"\n(?:[^\S\n]{0,100}\n){1,1000}")


def diagnose_text(text: str, deadline: float | None = None) -> DiagnoseResponse:
    """Diagnose pasted text: a CSV or JSON export, ncu console output ("DRAM Throughput  %  92.51"),
    ``metric=value`` pairs and/or pasted rule messages. Always returns ``text_signals`` from :func:`route`."""
    started = time.perf_counter()
    if not isinstance(text, str):
        raise BadInput("expected text")
    if len(text) > MAX_BYTES:
        raise BadInput("text is over the size limit")
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        resp = diagnose_parsed(parse_json_text(stripped), "", started, deadline=deadline)
    elif find_header(text) is not None:
        resp = diagnose_parsed(parse_csv_text(text), "", started, deadline=deadline)
    else:
        cat = load_catalog()
        found: dict[str, Any] = {}
        scan = text[:TEXT_SCAN_CHARS]
        for m in _PAIR.finditer(scan):
            found.setdefault(m.group(1), f"{m.group(2)} {m.group(3) or ''}".strip())
        for line in scan.splitlines():
            row = _LINE.match(line) if len(line) <= MAX_CONSOLE_LINE else None
            if row and cat.resolve(row.group(1)) is not None:
                found.setdefault(row.group(1), f"{row.group(3)} {row.group(2) or ''}".strip())
        profile = parse_metrics_dict(found) if found else LaunchProfile()
        paras = _BLANK_LINES.split(text[:TEXT_RULE_CHARS])
        profile.rules = [RuleResult(name="pasted", description=para[:4000]) for para in paras if para.strip()][:TEXT_MAX_RULES]
        resp = DiagnoseResponse(format="text")
        if profile.metrics or message_hits(profile.rules):
            diag = diagnose_profile(profile)
            diag.rules_read = 0
            resp.launches.append(diag)
    resp.text_signals = route(text)
    resp.took_ms = round((time.perf_counter() - started) * 1000, 2)
    return resp

