"""Operations on a ledger: which one to open, checking references, filtering, importing, attaching a diagnosis.

    >>> from kwiki.ledger import attach_diagnosis, import_dir, open_ledger
    >>> led = open_ledger(load_settings())                                          # doctest: +SKIP
    >>> resp = diagnose_bytes(open("v3.csv", "rb").read(), "v3.csv")                # doctest: +SKIP
    >>> attach_diagnosis(led, "transpose/t03", resp, report_path="reports/t03.ncu-rep").evidence.signals  # doctest: +SKIP
    ['shared-bank-conflicts']
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Collection

from pydantic import BaseModel, ValidationError

from kwiki.errors import BadRequest, NotFound, UnknownReference
from kwiki.ingest.models import Page, PageSource
from kwiki.settings import Settings

from .db import Ledger
from .pages import CORPUS, candidate_page
from .store import STATUSES, Candidate, Evidence, LineProblem, applies_to, nearest, now_iso, page_variants, validation_reason


def workspace_dir(settings: Settings, workspace: Path | None = None) -> Path:
    """``workspace``, else ``settings.ledger_dir`` (``$KWIKI_LEDGER_DIR``), else ``<index_dir>/../ledger``."""
    if workspace is not None:
        return Path(workspace)
    if settings.ledger_dir:
        return Path(settings.ledger_dir)
    return Path(settings.index_dir).parent / "ledger"


def open_ledger(settings: Settings, workspace: Path | None = None) -> Ledger:
    """The ledger a command or server uses: ``workspace`` when given (its SQLite file), else the PostgreSQL database
    of ``settings.ledger_url`` (``$KWIKI_LEDGER_URL``) when set, else the default workspace's SQLite file."""
    if workspace is None and settings.ledger_url:
        return Ledger(url=settings.ledger_url)
    return Ledger(workspace_dir(settings, workspace))


def check_references(ledger: Ledger, cand: Candidate, page_ids: Collection[str] | None) -> None:
    """Refuse a candidate whose parent is not in the ledger, or whose technique or pattern ids name no page of the
    index (``page_ids``; None: no index to check against). Raises :class:`~kwiki.errors.UnknownReference` with the
    nearest ids as the hint. References the stored version already had are not checked again (a new version of an
    imported candidate whose parent was lost stays writable)."""
    old = ledger.find(cand.key)
    pk = cand.parent_key
    if pk and (old is None or old.parent_key != pk):
        if pk == cand.key:
            raise UnknownReference(f"candidate {cand.key} cannot be its own parent", hint="name the candidate it was derived from")
        if ledger.find(pk) is None:
            task = pk.split("/", 1)[0]
            close = nearest(pk, ledger.keys(task) or ledger.keys())
            raise UnknownReference(f"unknown parent '{cand.parent}' of {cand.key}: no candidate {pk} in the ledger",
                                   hint=(f"nearest: {', '.join(close)}" if close else f"task {task} has no candidates yet")
                                   + "; add the parent first, or leave --parent out for a root")
    if page_ids is None:
        return
    known = set(page_ids)
    for kind, refs, was in (("technique", cand.techniques, old.techniques if old else []),
                            ("pattern", cand.patterns, old.patterns if old else [])):
        for ref in refs:
            if ref in was or page_variants(ref) & known:
                continue
            same_kind = sorted(p for p in known if p.startswith(f"{kind}-")) or sorted(known)
            close = nearest(ref if ref.startswith(f"{kind}-") else f"{kind}-{ref}", same_kind)
            raise UnknownReference(f"unknown {kind} id '{ref}': no page of that id in the index",
                                   hint=(f"nearest: {', '.join(close)}; " if close else "")
                                   + f"`kwiki search --type {kind} WORDS` finds the page ids")


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
                problems.append(LineProblem(file=str(path), line=n, reason=validation_reason(exc)))
    return out


def import_dir(ledger: Ledger, source: Path) -> dict[str, Any]:
    """Write the candidates of ``source`` (a workspace: its SQLite file, or its JSONL files; or a folder of ``*.json``
    candidates) into ``ledger``, in one transaction.

    A candidate already in the ledger with the same content is left alone; a different version of it is written
    as its newest version. References are not checked: lineage from elsewhere is kept as it was (a parent that is
    not there shows as a missing parent in the tree). Returns ``{"added", "unchanged", "problems"}``.
    """
    source = Path(source)
    if not source.is_dir():
        raise NotFound(f"no folder {source}", hint="give a workspace folder (ledger.sqlite3 or candidates.jsonl) or *.json files")
    if ledger.root is not None and source.resolve() == ledger.root.resolve():
        raise BadRequest("cannot import a ledger into itself")
    other = Ledger(source)
    read = other.read()
    problems = [p.model_copy(update={"file": str(source / p.file)}) for p in read.problems]
    incoming = read.candidates + _json_files(source, problems)
    current = {c.key: c for c in ledger.read().candidates}
    added, unchanged, todo = [], [], []
    skip = {"updated_at"}
    for cand in incoming:
        old = current.get(cand.key)
        if old is not None and old.model_dump(exclude=skip) == cand.model_dump(exclude=skip):
            unchanged.append(cand.key)
            continue
        todo.append(cand)
        current[cand.key] = cand
        added.append(cand.key)
    ledger.append_many(todo)
    return {"workspace": ledger.location, "source": str(source), "added": added, "unchanged": unchanged,
            "problems": [p.model_dump() for p in problems]}


def attach_diagnosis(ledger: Ledger, candidate_id: str, diagnosis: dict[str, Any] | BaseModel,
                     report_path: str | None = None) -> Candidate:
    """Record a ``kwiki diagnose`` result (a ``DiagnoseResponse`` or its dict) as the candidate's evidence.

    Fired signals (strongest first, deduplicated over launches), the key metrics and the report path are
    merged into ``evidence``; the candidate is written again as its new version (every version is kept)::

        resp = diagnose_bytes(data, "v3.ncu-rep")
        attach_diagnosis(Ledger(ws), "transpose/v3", resp.model_dump(), report_path="reports/v3.ncu-rep")
    """
    data = diagnosis.model_dump() if isinstance(diagnosis, BaseModel) else dict(diagnosis)
    cand = ledger.get(candidate_id)
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
    return ledger.append(cand.model_copy(update={"evidence": ev}))


def ledger_source(dirs: list[Path], corpus: str = CORPUS) -> tuple[PageSource, list[LineProblem]]:
    """The candidates of ``dirs`` as a page source for ``build_index(page_sources=...)``, and the skipped lines."""
    pages, problems = ledger_pages(dirs, corpus)
    origin = ", ".join(str(Path(d).resolve()) for d in dirs) or corpus
    return PageSource(name=corpus, origin=origin, pages=pages), problems


def ledger_pages(dirs: list[Path], corpus: str = CORPUS) -> tuple[list[Page], list[LineProblem]]:
    """Pages for every candidate of every workspace in ``dirs``; the second value lists skipped lines."""
    pages: list[Page] = []
    problems: list[LineProblem] = []
    for d in dirs:
        led = Ledger(Path(d))
        read = led.read()
        if not read.candidates and not read.problems:
            problems.append(LineProblem(file=str(d), line=0, reason="no candidates: not a ledger workspace"))
            continue
        problems += [p.model_copy(update={"file": str(Path(d) / p.file)}) for p in read.problems]
        pages += [candidate_page(c, Path(d).resolve(), corpus) for c in read.candidates]
    return pages, problems
