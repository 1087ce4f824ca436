"""Ledger candidates as searchable pages of type ``experience``, and the per-page summary of candidates.

Each candidate becomes one :class:`~kwiki.ingest.models.Page` (id ``cand-<task>-<id>``) whose title
carries its status and whose body says what was tried and how it went, so a search for a symptom finds
the pages that explain it *and* the candidates that tried a fix; the type prior (0.7) keeps them below
curated pages of equal relevance::

    >>> from kwiki.ledger import ledger_pages
    >>> source, problems = ledger_source([Path("tests/data/ledger")])   # doctest: +SKIP
    >>> build_index(index_dir, roots, page_sources=[source])              # doctest: +SKIP
    >>> ledger_summary("technique-shared-memory-padding", indexed_candidates(pages))["counts"]   # doctest: +SKIP
    {'promoted': 1, 'rejected': 2, 'candidate': 0}
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, Iterable

from kwiki.ingest.models import Page, Provenance

from .store import STATUSES, Candidate, applies_to

CORPUS = "ledger"
PAGE_TYPE = "experience"
_SLUG = re.compile(r"[^a-z0-9]+")
#: GPU names to the architecture tags the corpus uses, so ``--arch sm90`` also filters candidates.
_GPU_ARCH = {"h100": "sm90", "h200": "sm90", "h800": "sm90", "h20": "sm90", "gh200": "sm90",
             "b200": "sm100", "b100": "sm100", "gb200": "sm100", "b300": "sm100", "gb300": "sm100"}
_OUTCOME = {
    "promoted": "Promoted: tried, it worked and it was kept.",
    "rejected": "Rejected: tried and failed; it was not kept.",
    "candidate": "Candidate: tried, not decided yet.",
}


def page_id(cand: Candidate) -> str:
    """``cand-<task>-<id>``, lower-case and slugged, e.g. ``cand-transpose-c07``."""
    return "cand-" + _SLUG.sub("-", f"{cand.task}-{cand.id}".lower()).strip("-")


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def render_body(cand: Candidate) -> str:
    """A readable markdown page: outcome first, then mechanism, correctness, benchmark and profile."""
    parent = f", child of {cand.parent_key}" if cand.parent else " (a root: no parent)"
    lines = [f"# [{cand.status}] {cand.mechanism or cand.id}", "",
             f"Candidate {cand.key} of task {cand.task}"
             + (f" (kernel {cand.kernel})" if cand.kernel else "") + f"{parent}.", "",
             "## Outcome", "", _OUTCOME[cand.status] + (f" Reason: {cand.reason}" if cand.reason else ""), ""]
    lines += ["## Mechanism changed", "", cand.mechanism or "(not given)", ""]
    if cand.techniques:
        lines.append("Techniques applied: " + ", ".join(f"{t.removeprefix('technique-').replace('-', ' ')} ({t})" for t in cand.techniques) + ".")
    if cand.patterns:
        lines.append("Patterns addressed: " + ", ".join(f"{p.removeprefix('pattern-').replace('-', ' ')} ({p})" for p in cand.patterns) + ".")
    lines.append("")
    ok = cand.correctness
    verdict = {True: "passed", False: "FAILED (wrong results)", None: "not checked"}[ok.passed]
    lines += ["## Correctness", "", f"Correctness {verdict}" + (f": {ok.detail.rstrip('.')}." if ok.detail else ".")
              + (f" Max abs error {ok.max_abs_error:g}." if ok.max_abs_error is not None else ""), ""]
    if cand.benchmarks:
        lines += ["## Benchmark", "", "| shape | dtype | gpu | metric | value | baseline | ratio |", "|---|---|---|---|---|---|---|"]
        for b in cand.benchmarks:
            ratio = f"{b.speedup:.3g}x" if b.speedup is not None else "-"
            lines.append(f"| {b.shape} | {b.dtype} | {b.gpu} | {b.metric}{' (' + b.unit + ')' if b.unit else ''} "
                         f"| {_num(b.value)} | {_num(b.baseline)} | {ratio} |")
        lines.append("")
    ev = cand.evidence
    if ev.signals or ev.metrics or ev.reports or ev.notes:
        lines += ["## Profiling evidence", ""]
        if ev.signals:
            lines.append("Fired signals: " + ", ".join(ev.signals) + ".")
        if ev.metrics:
            lines.append("Key metrics: " + ", ".join(f"{k} = {v:g}" for k, v in ev.metrics.items()) + ".")
        if ev.notes:
            lines.append(ev.notes)
        if ev.reports:
            lines.append("Reports: " + ", ".join(ev.reports) + ".")
        lines.append("")
    if cand.author or cand.created_at:
        lines.append(f"Recorded{' by ' + str(cand.author) if cand.author else ''}{' on ' + cand.created_at if cand.created_at else ''}.")
    return "\n".join(lines).rstrip() + "\n"


def candidate_title(cand: Candidate) -> str:
    """``[status] mechanism (task/id)``, the mechanism cut at 120 characters."""
    mech = cand.mechanism or cand.id
    return f"[{cand.status}] {mech if len(mech) <= 120 else mech[:119] + '…'} ({cand.key})"


def candidate_architectures(cand: Candidate) -> list[str]:
    """The architecture tags of the GPUs its benchmarks ran on (``H100`` -> ``sm90``), so ``--arch`` filters candidates."""
    return sorted({_GPU_ARCH[g] for b in cand.benchmarks if (g := b.gpu.lower().replace(" ", "").removeprefix("nvidia")) in _GPU_ARCH})


def candidate_tags(cand: Candidate) -> set[str]:
    """What a ``tag`` filter matches on a candidate (lower case): its status, task, kernel, techniques (with and
    without the ``technique-`` prefix) and ``ledger-candidate``."""
    tags = {"ledger-candidate", cand.status, cand.task, cand.kernel, *cand.techniques, *cand.patterns,
            *(t.removeprefix("technique-") for t in cand.techniques)}
    return {t.lower() for t in tags if t}


def candidate_hit(cand: Candidate, score: float) -> dict[str, Any]:
    """A candidate as a hit of the experience tier: the fields of a search hit that apply (``id``, ``page_id``,
    ``title``, ``type``, ``corpus``, ``score``, ``snippet``) and the candidate's own (:func:`candidate_fields`)."""
    pid = page_id(cand)
    snippet = _OUTCOME[cand.status] + (f" Reason: {cand.reason}" if cand.reason else "")
    return {"id": pid, "page_id": pid, "title": candidate_title(cand),
            "type": PAGE_TYPE, "corpus": CORPUS, "score": score, "snippet": snippet[:300], "status": cand.status,
            "candidate": cand.key, "task": cand.task, "kernel": cand.kernel, "parent": cand.parent_key,
            "reason": cand.reason, "mechanism": cand.mechanism, "correct": cand.correctness.passed,
            "techniques": cand.techniques, "patterns": cand.patterns}


def candidate_page(cand: Candidate, ledger_dir: Path | None = None, corpus: str = CORPUS) -> Page:
    """The page for one candidate; ``meta['ledger']`` holds the whole record (unknown fields included)."""
    record = cand.model_dump(mode="json", exclude_none=True)
    sha = hashlib.sha256(cand.model_dump_json().encode()).hexdigest()
    pid = page_id(cand)
    archs = candidate_architectures(cand)
    title = candidate_title(cand)
    tags = list(dict.fromkeys(t for t in ("ledger-candidate", cand.status, cand.task, cand.kernel) if t))
    meta = {"id": pid, "type": PAGE_TYPE, "title": title, "status": cand.status, "task": cand.task,
            "candidate": cand.key, "ledger": record}
    if ledger_dir is not None:
        meta["ledger_dir"] = str(ledger_dir)
    prov = Provenance(corpus=corpus, path=f"{CORPUS}:{cand.key}", sha256=sha, retrieved_at=cand.updated_at)
    return Page(
        key=pid, id=pid, type=PAGE_TYPE, title=title, path=prov.path, corpus=corpus,
        facets={"tags": tags, "techniques": [t.removeprefix("technique-") for t in cand.techniques],
                "kernel_types": [cand.kernel] if cand.kernel else [], "architectures": archs},
        related=cand.applies(), provenance=prov, meta=meta, body=render_body(cand), body_line=1,
    )


def candidate_fields(page: Page | None) -> dict[str, Any]:
    """What a search hit on a candidate's page shows besides the hit: ``status``, ``candidate`` (task/id),
    ``task``, ``reason``, ``mechanism`` and ``correct`` (None for a page that is not a candidate's)."""
    meta = page.meta if page is not None else {}
    record = meta.get("ledger") or {}
    return {"status": meta.get("status"), "candidate": meta.get("candidate"), "task": meta.get("task"),
            "reason": record.get("reason", ""), "mechanism": record.get("mechanism", ""),
            "correct": (record.get("correctness") or {}).get("passed")}


def indexed_candidates(pages: Iterable[Page]) -> list[Candidate]:
    """The candidates among ``pages`` (an index's pages): its ``experience`` pages that came from a ledger."""
    out = []
    for p in pages:
        if p.type == PAGE_TYPE and isinstance(p.meta.get("ledger"), dict):
            out.append(Candidate.model_validate(p.meta["ledger"]))
    return out


def ledger_summary(page_id_: str, candidates: list[Candidate], page: Page | None = None) -> dict[str, Any]:
    """Candidates that applied the technique (or addressed the pattern) ``page_id_``, and how they fared.

    ``candidates`` are those of an index (:func:`indexed_candidates`) or of a live ledger; ``page`` is the
    index's page of that id, when it has one (its key and id both match). Returns ``{"page_id", "counts": {promoted, rejected, candidate}, "total", "candidates": [...]}``,
    promoted first, then rejected, then undecided.
    """
    wanted = {page_id_}
    if page is not None:
        wanted |= {page.id, page.key}
    matched = [c for c in candidates if applies_to(c, wanted)]
    rank = {"promoted": 0, "rejected": 1, "candidate": 2}
    matched.sort(key=lambda c: rank[c.status])
    counts = {s: sum(1 for c in matched if c.status == s) for s in STATUSES}
    return {
        "page_id": page.key if page is not None else page_id_,
        "counts": {"promoted": counts["promoted"], "rejected": counts["rejected"], "candidate": counts["candidate"]},
        "total": len(matched),
        "candidates": [
            {"key": c.key, "id": c.id, "task": c.task, "kernel": c.kernel, "mechanism": c.mechanism, "status": c.status,
             "reason": c.reason, "page": page_id(c), "correct": c.correctness.passed,
             "speedup": next((round(b.speedup, 4) for b in c.benchmarks if b.speedup is not None), None)}
            for c in matched
        ],
    }
