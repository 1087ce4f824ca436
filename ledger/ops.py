"""Workspace operations on a ledger: where it lives, filtering, importing, attaching a diagnosis.

    >>> from kwiki.ledger import attach_diagnosis, import_dir, workspace_dir
    >>> led = Ledger(workspace_dir(load_settings()))                               # doctest: +SKIP
    >>> resp = diagnose_bytes(open("v3.csv", "rb").read(), "v3.csv")                # doctest: +SKIP
    >>> attach_diagnosis(led, "transpose/t03", resp, report_path="reports/t03.ncu-rep").evidence.signals  # doctest: +SKIP
    ['shared-bank-conflicts']
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from kwiki.errors import BadRequest, NotFound
from kwiki.settings import Settings

from .store import STATUSES, Candidate, Evidence, Ledger, LineProblem, now_iso


def workspace_dir(settings: Settings, workspace: Path | None = None) -> Path:
    """``workspace``, else ``settings.ledger_dir`` (``$KWIKI_LEDGER_DIR``), else ``<index_dir>/../ledger``."""
    if workspace is not None:
        return Path(workspace)
    if settings.ledger_dir:
        return Path(settings.ledger_dir)
    return Path(settings.index_dir).parent / "ledger"


def _ids_of(value: str) -> set[str]:
    # "shared-memory-padding" means the technique page of that name, and "technique-x" matches "x"
    bare = value.removeprefix("technique-").removeprefix("pattern-")
    return {value, bare, f"technique-{bare}", f"pattern-{bare}"}


def applies_to(cand: Candidate, page_ids: set[str]) -> bool:
    """Does the candidate apply (technique) or address (pattern) one of ``page_ids``?"""
    return any(_ids_of(a) & page_ids for a in cand.applies())


def filter_candidates(cands: list[Candidate], task: str | None = None, status: str | None = None,
                      applies_to_id: str | None = None, kernel: str | None = None) -> list[Candidate]:
    """Filter by task, status (candidate|promoted|rejected), kernel and a technique/pattern id."""
    if status and status not in STATUSES:
        raise BadRequest(f"unknown status '{status}'", hint=f"one of: {', '.join(STATUSES)}")
    out = [c for c in cands if (not task or c.task == task) and (not status or c.status == status)
           and (not kernel or c.kernel == kernel)]
    if applies_to_id:
        out = [c for c in out if applies_to(c, {applies_to_id})]
    return out


def _json_files(source: Path, problems: list[LineProblem]) -> list[Candidate]:
    out: list[Candidate] = []
    for path in sorted(source.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            problems.append(LineProblem(file=str(path), line=0, reason=f"not JSON: {exc}"[:300]))
            continue
        for n, item in enumerate(data if isinstance(data, list) else [data], 1):
            try:
                out.append(Candidate.model_validate(item))
            except ValidationError as exc:
                why = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'record'}: {e['msg']}" for e in exc.errors()[:3])
                problems.append(LineProblem(file=str(path), line=n, reason=why[:300]))
    return out


def import_dir(ledger: Ledger, source: Path) -> dict[str, Any]:
    """Append the candidates of ``source`` (a workspace, or a folder of ``*.json`` candidates).

    A candidate already in the ledger with the same content is left alone; a different version of it is
    appended as its newest version. Returns ``{"added", "unchanged", "problems"}``.
    """
    source = Path(source)
    if not source.is_dir():
        raise NotFound(f"no folder {source}", hint="give a workspace folder with candidates.jsonl or *.json files")
    if source.resolve() == ledger.root.resolve():
        raise BadRequest("cannot import a ledger into itself")
    read = Ledger(source).read()
    problems = [p.model_copy(update={"file": str(source / p.file)}) for p in read.problems]
    incoming = read.candidates + _json_files(source, problems)
    current = {c.key: c for c in ledger.read().candidates}
    added, unchanged = [], []
    skip = {"updated_at"}
    for cand in incoming:
        old = current.get(cand.key)
        if old is not None and old.model_dump(exclude=skip) == cand.model_dump(exclude=skip):
            unchanged.append(cand.key)
            continue
        ledger.append(cand)
        current[cand.key] = cand
        added.append(cand.key)
    return {"workspace": str(ledger.root), "source": str(source), "added": added, "unchanged": unchanged,
            "problems": [p.model_dump() for p in problems]}


def attach_diagnosis(ledger: Ledger, candidate_id: str, diagnosis: dict[str, Any] | BaseModel,
                     report_path: str | None = None) -> Candidate:
    """Record a ``kwiki diagnose`` result (a ``DiagnoseResponse`` or its dict) as the candidate's evidence.

    Fired signals (strongest first, deduplicated over launches), the key metrics and the report path are
    merged into ``evidence``; the candidate is appended again as a new version (the file stays append-only)::

        resp = diagnose_bytes(data, "v3.ncu-rep")
        attach_diagnosis(Ledger(ws), "transpose/v3", resp.model_dump(), report_path="reports/v3.ncu-rep")
    """
    data = diagnosis.model_dump() if isinstance(diagnosis, BaseModel) else dict(diagnosis)
    cand = ledger.read().get(candidate_id)
    ev = cand.evidence.model_copy(deep=True)
    launches = [la for la in data.get("launches") or [] if isinstance(la, dict)]
    fired: list[tuple[float, str]] = []
    for la in launches:
        for sig in la.get("signals") or []:
            if isinstance(sig, dict) and sig.get("signal"):
                fired.append((float(sig.get("magnitude") or 0.0), str(sig["signal"])))
    fired.sort(key=lambda x: -x[0])
    text_sigs = [str(s["signal"]) for s in data.get("text_signals") or [] if isinstance(s, dict) and s.get("signal")]
    ev.signals = list(dict.fromkeys(ev.signals + [s for _, s in fired] + text_sigs))
    magnitudes = dict(getattr(ev, "magnitudes", None) or {})
    for mag, sig in fired:
        magnitudes[sig] = max(mag, magnitudes.get(sig, mag))
    for n, la in enumerate(launches):
        prefix = "" if len(launches) == 1 else f"{la.get('launch_id') or n}:"
        for name, value in (la.get("key_metrics") or {}).items():
            if isinstance(value, (int, float)):
                ev.metrics[f"{prefix}{name}"] = float(value)
    for path in (data.get("filename"), report_path):
        if path and str(path) not in ev.reports:
            ev.reports.append(str(path))
    ev.diagnosed_at = now_iso()
    extra = dict(ev.model_extra or {})
    extra["magnitudes"] = {k: round(v, 4) for k, v in magnitudes.items()}
    ev = Evidence.model_validate({**ev.model_dump(exclude=set(extra)), **extra})
    return ledger.append(cand.model_copy(update={"evidence": ev}), write_benchmarks=False)
