"""HTTP surface of the candidate ledger (registered by ``create_app``).

    GET  /ledger                      candidates (filters: task, status, kernel), unreadable imported lines in "problems"
    GET  /ledger?applies_to=<page id> candidates that applied that technique/pattern, with promoted/rejected counts
    GET  /ledger/search?q=...         knowledge pages, then the candidates that tried a fix (status=rejected: what failed)
    GET  /ledger/attempts?kernel=...  the attempts (default: rejected) on a kernel, of a technique and/or a mechanism
    GET  /ledger/lineage/{task/id}    a candidate, its ancestors (root first) and its descendants
    GET  /ledger/{task/id or id}      one candidate
    POST /ledger                      add a candidate (JSON body)                          } need 'Authorization:
    POST /ledger/{task/id}/status     promote or reject one: {"status": ..., "reason": ...} }  Bearer $KWIKI_ADMIN_TOKEN'

The ledger is the workspace's SQLite file (``$KWIKI_LEDGER_DIR``, else ``<index_dir>/../ledger``) or the PostgreSQL
database of ``$KWIKI_LEDGER_URL``. A candidate is refused when its parent is not in the ledger or a technique or
pattern id names no page of the index (400 ``unknown_reference``, the nearest ids as the hint); once written it is
searchable at once, on every replica that shares the ledger.
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, ValidationError

from kwiki.errors import BadRequest, PayloadTooLarge, RequestTimeout
from kwiki.ledger import MAX_RECORD_BYTES, STATUSES, Candidate, Ledger, filter_candidates, ledger_summary, page_id, validation_reason

from .core import Kwiki, TieredQuery, parse_candidate

router = APIRouter(tags=["ledger"])


def _state(request: Request) -> Kwiki:
    state: Kwiki = request.app.state.kwiki
    return state


def _ledger(request: Request) -> Ledger:
    return _state(request).ledger


def _dump(c: Candidate) -> dict[str, Any]:
    return {**c.model_dump(mode="json", exclude_none=True), "key": c.key, "page": page_id(c)}


def _check_status(status: str | None) -> None:
    if status and status not in STATUSES:
        raise BadRequest(f"unknown status '{status}'", hint=f"one of: {', '.join(STATUSES)}")


@router.get("/ledger")
async def ledger_list(
    request: Request,
    task: Annotated[str | None, Query(max_length=120)] = None,
    status: Annotated[str | None, Query(description="candidate | promoted | rejected")] = None,
    kernel: Annotated[str | None, Query(max_length=200)] = None,
    applies_to: Annotated[str | None, Query(max_length=200, description="a technique or pattern page id")] = None,
) -> dict[str, Any]:
    """Candidates of the ledger; with ``applies_to``, the summary a page view shows (how its candidates fared)."""
    _check_status(status)
    led = _ledger(request)
    if applies_to:
        searcher = _state(request).searcher
        page = searcher.find_page(applies_to) if searcher is not None else None
        wanted = {applies_to} | ({page.id, page.key} if page is not None else set())
        cands = filter_candidates(await asyncio.to_thread(led.applying, wanted), task=task, status=status, kernel=kernel)
        return ledger_summary(applies_to, cands, page)
    read = await asyncio.to_thread(led.read, task, status, kernel)
    return {
        "workspace": led.name,  # the folder's (or database's) name only: the endpoint is open, the server's paths are not
        "backend": led.backend,
        "total": len(read.candidates),
        "counts": {s: sum(1 for c in read.candidates if c.status == s) for s in STATUSES},
        "candidates": [_dump(c) for c in read.candidates],
        "problems": [p.model_dump() for p in read.problems],
    }


@router.get("/ledger/search")
async def ledger_search(request: Request, req: Annotated[TieredQuery, Query()]) -> dict[str, Any]:
    """The pages that explain the question, then the candidates that tried a fix, each with its status
    (every search filter applies to both)."""
    state = _state(request)
    limit = state.settings.request_timeout_s
    try:
        return await asyncio.wait_for(asyncio.to_thread(state.tiered_search, req, req.experience_k, req.status), limit)
    except asyncio.TimeoutError:  # a 500 before
        raise RequestTimeout(f"request took longer than {limit:.0f} s", hint="narrow the query or retry") from None


@router.get("/ledger/attempts")
async def ledger_attempts(
    request: Request,
    kernel: Annotated[str | None, Query(max_length=200, description="kernel (function) name")] = None,
    technique: Annotated[str | None, Query(max_length=200, description="a technique or pattern page id")] = None,
    mechanism: Annotated[str | None, Query(max_length=500, description="words the mechanism must all contain")] = None,
    status: Annotated[str | None, Query(description="candidate | promoted | rejected (default rejected; 'any' for all)")] = "rejected",
    task: Annotated[str | None, Query(max_length=120)] = None,
) -> dict[str, Any]:
    """Every attempt (by default every rejected one) on a kernel, of a technique and/or a mechanism: what not to try again."""
    status = None if status == "any" else status
    _check_status(status)
    found = await asyncio.to_thread(_ledger(request).attempts, kernel, technique, mechanism, status, task)
    return {"kernel": kernel, "technique": technique, "mechanism": mechanism, "status": status, "total": len(found),
            "candidates": [_dump(c) for c in found]}


@router.get("/ledger/lineage/{cand_ref:path}")
async def ledger_lineage(request: Request, cand_ref: str) -> dict[str, Any]:
    """A candidate with its ancestors (root first) and its descendants (tree rows, pre-order)."""
    return await asyncio.to_thread(_state(request).lineage, cand_ref)


@router.get("/ledger/{cand_ref:path}")
async def ledger_show(request: Request, cand_ref: str) -> dict[str, Any]:
    """One candidate by ``task/id`` (or a bare id when only one task has it)."""
    return _dump(await asyncio.to_thread(_ledger(request).get, cand_ref))


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
    cand, auto_id = parse_candidate(doc)
    _check_storable(cand)  # before anything is written: an error answer must leave the ledger as it was
    state = _state(request)
    written = await asyncio.to_thread(state.add_candidate, cand, auto_id)
    return JSONResponse(_dump(written), status_code=201)


class StatusChange(BaseModel):
    status: str = Field(..., description="candidate | promoted | rejected")
    reason: str | None = Field(None, max_length=2000, description="why (kept on the candidate)")


@router.post("/ledger/{cand_ref:path}/status")
async def ledger_set_status(request: Request, cand_ref: str) -> dict[str, Any]:
    """Promote or reject a candidate (body ``{"status": ..., "reason": ...}``): a new version with that status and
    reason. Needs the admin token (checked before the body is read)."""
    from kwiki.service.app import check_token

    check_token(request, _state(request).settings)
    raw = await request.body()
    if len(raw) > MAX_RECORD_BYTES:
        raise PayloadTooLarge(f"body is {len(raw)} bytes, over {MAX_RECORD_BYTES}")
    try:
        change = StatusChange.model_validate_json(raw or b"{}")
    except ValidationError as exc:
        raise BadRequest(f"invalid status change: {validation_reason(exc)}", hint='{"status": "rejected", "reason": "why"}') from None
    _check_status(change.status)
    return _dump(await asyncio.to_thread(_state(request).set_status, cand_ref, change.status, change.reason))
