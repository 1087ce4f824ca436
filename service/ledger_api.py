"""HTTP surface of the candidate ledger (registered by ``create_app``).

    GET  /ledger                      candidates (filters: task, status, kernel), skipped lines in "problems"
    GET  /ledger?applies_to=<page id> candidates that applied that technique/pattern, with promoted/rejected counts
    GET  /ledger/search?q=...         knowledge pages, then the candidates that tried a fix (status=rejected: what failed)
    GET  /ledger/{task/id or id}      one candidate
    POST /ledger                      append a candidate (JSON body); needs 'Authorization: Bearer $KWIKI_ADMIN_TOKEN'

The workspace is ``settings.ledger_dir`` (``$KWIKI_LEDGER_DIR``), else ``<index_dir>/../ledger``. Appends
are fsynced and safe with concurrent writers; a POSTed candidate is searchable after the next
``kwiki ingest --ledger DIR`` and ``POST /admin/reload``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from kwiki.errors import BadRequest, PayloadTooLarge, RequestTimeout
from kwiki.ledger import (
    MAX_RECORD_BYTES,
    STATUSES,
    Candidate,
    Ledger,
    filter_candidates,
    indexed_candidates,
    ledger_summary,
    page_id,
    workspace_dir,
)

from .core import Kwiki, TieredQuery

router = APIRouter(tags=["ledger"])


def _state(request: Request) -> Kwiki:
    state: Kwiki = request.app.state.kwiki
    return state


def _ledger(request: Request) -> Ledger:
    return Ledger(workspace_dir(_state(request).settings))


def _dump(c: Candidate) -> dict[str, Any]:
    return {**c.model_dump(mode="json", exclude_none=True), "key": c.key, "page": page_id(c)}


def _known_candidates(request: Request) -> list[Candidate]:
    """The live ledger's candidates, plus those only the served index holds (e.g. ingested from elsewhere)."""
    merged: dict[str, Candidate] = {}
    searcher = _state(request).searcher
    if searcher is not None:
        merged.update({c.key: c for c in indexed_candidates(searcher.pages.values())})
    merged.update({c.key: c for c in _ledger(request).read().candidates})
    return list(merged.values())


@router.get("/ledger")
async def ledger_list(
    request: Request,
    task: Annotated[str | None, Query(max_length=120)] = None,
    status: Annotated[str | None, Query(description="candidate | promoted | rejected")] = None,
    kernel: Annotated[str | None, Query(max_length=200)] = None,
    applies_to: Annotated[str | None, Query(max_length=200, description="a technique or pattern page id")] = None,
) -> dict[str, Any]:
    """Candidates of the ledger; with ``applies_to``, the summary a page view shows (how its candidates fared)."""
    if status and status not in STATUSES:
        raise BadRequest(f"unknown status '{status}'", hint=f"one of: {', '.join(STATUSES)}")
    if applies_to:
        cands = await asyncio.to_thread(_known_candidates, request)
        cands = filter_candidates(cands, task=task, status=status, kernel=kernel)
        searcher = _state(request).searcher
        return ledger_summary(applies_to, cands, searcher.find_page(applies_to) if searcher is not None else None)
    led = _ledger(request)
    read = await asyncio.to_thread(led.read)
    cands = filter_candidates(read.candidates, task=task, status=status, kernel=kernel)
    return {
        "workspace": led.root.name,  # the folder's name only: the endpoint is open, the server's paths are not
        "total": len(cands),
        "counts": {s: sum(1 for c in cands if c.status == s) for s in STATUSES},
        "candidates": [_dump(c) for c in cands],
        "problems": [p.model_dump() for p in read.problems],
    }


@router.get("/ledger/search")
async def ledger_search(request: Request, req: Annotated[TieredQuery, Query()]) -> dict[str, Any]:
    """The pages that explain the question, then the candidates that tried a fix, each with its status
    (every search filter applies to both)."""
    state = _state(request)
    limit = state.settings.request_timeout_s * 2  # two searches: the pages, then the candidates
    try:
        return await asyncio.wait_for(asyncio.to_thread(state.tiered_search, req, req.experience_k, req.status), limit)
    except asyncio.TimeoutError:  # a 500 before
        raise RequestTimeout(f"request took longer than {limit:.0f} s", hint="narrow the query or retry") from None


@router.get("/ledger/{cand_ref:path}")
async def ledger_show(request: Request, cand_ref: str) -> dict[str, Any]:
    """One candidate by ``task/id`` (or a bare id when only one task has it)."""
    read = await asyncio.to_thread(_ledger(request).read)
    return _dump(read.get(cand_ref))


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


def _check_storable(cand: Candidate) -> None:
    """The record and its answer must be standard JSON in UTF-8: no NaN/Infinity (1e999 parses to one), no lone
    surrogate. Checked on the answer's own encoding, so what is refused is exactly what would have failed after
    the write."""
    try:
        json.dumps(_dump(cand), allow_nan=False, ensure_ascii=False).encode("utf-8")
    except ValueError as exc:  # out-of-range float
        raise BadRequest(f"invalid candidate: {exc}", hint="numbers must be finite") from None
    except UnicodeEncodeError as exc:
        raise BadRequest(f"invalid candidate: text with a lone surrogate at character {exc.start}",
                         hint="send valid Unicode") from None


@router.post("/ledger", status_code=201)
async def ledger_append(request: Request) -> JSONResponse:
    """Append a candidate (the JSON of a :class:`Candidate`; unknown fields are kept). Needs the admin token."""
    from kwiki.service.app import check_token  # the one token scheme of the service

    check_token(request, _state(request).settings)
    raw = await request.body()
    if len(raw) > MAX_RECORD_BYTES:
        raise PayloadTooLarge(f"candidate is {len(raw)} bytes, over {MAX_RECORD_BYTES}",
                              hint="keep reports as files and list their paths in evidence.reports")
    try:
        doc = json.loads(raw or b"null", parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError and _no_constant's ValueError
        raise BadRequest(f"body is not JSON: {str(exc)[:200]}") from None
    except RecursionError:
        raise BadRequest("body is JSON nested too deeply", hint="a candidate is a flat record of a few levels") from None
    if not isinstance(doc, dict):
        raise BadRequest("body must be one JSON object (a candidate)", hint="see the Candidate model in /docs")
    auto_id = not doc.get("id")
    if auto_id:
        doc["id"] = "c000"  # numbered under the ledger lock
    try:
        cand = Candidate.model_validate(doc)
    except ValidationError as exc:
        why = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'record'}: {e['msg']}" for e in exc.errors()[:4])
        raise BadRequest(f"invalid candidate: {why}", hint="required: task, id; status is candidate|promoted|rejected") from None
    _check_storable(cand)  # before anything is written: an error answer must leave the ledger as it was
    written = await asyncio.to_thread(_ledger(request).append, cand, auto_id=auto_id)
    return JSONResponse(_dump(written), status_code=201)
