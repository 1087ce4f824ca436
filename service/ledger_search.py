"""Search in two tiers: the knowledge pages, then the candidates that tried a fix (type ``experience``).

Candidates carry a type prior of 0.7, so in a corpus of curated pages they rarely reach the first
ten hits of a plain search -- by design: they never outrank a curated page of equal relevance. This
module asks the same question twice through :func:`kwiki.service.app.run_search` (the one search
path): once as given, once restricted to ``experience`` pages, and returns both lists, each
candidate with its status and reason::

    >>> tiers = tiered_search(searcher, SearchRequest(q="bank conflicts in the transpose kernel"), settings)  # doctest: +SKIP
    >>> [(h["candidate"], h["status"]) for h in tiers["experience"]["hits"]][:2]                              # doctest: +SKIP
    [('transpose/t03', 'promoted'), ('transpose/t01', 'promoted')]

``status="rejected"`` answers "what was already tried and failed" for a topic.
"""

from __future__ import annotations

from typing import Any

from kwiki.errors import BadRequest
from kwiki.ingest.ledger import STATUSES
from kwiki.ingest.ledger_pages import PAGE_TYPE

DEFAULT_EXPERIENCE_K = 5


def _with_status(hit: Any, searcher: Any) -> dict[str, Any]:
    page = searcher.pages.get(hit.id)
    meta = page.meta if page is not None else {}
    record = meta.get("ledger") or {}
    return {**hit.model_dump(), "status": meta.get("status"), "candidate": meta.get("candidate"),
            "task": meta.get("task"), "reason": record.get("reason", ""), "mechanism": record.get("mechanism", ""),
            "correct": (record.get("correctness") or {}).get("passed")}


def experience_tier(searcher: Any, req: Any, settings: Any, k: int = DEFAULT_EXPERIENCE_K,
                    status: str | None = None) -> dict[str, Any]:
    """The candidates most relevant to ``req.q`` (same filters, type forced to ``experience``).

    Returns ``{"hits": [...], "total_candidates": n}``; each hit is a search hit plus ``status``,
    ``candidate`` (task/id), ``task``, ``reason``, ``mechanism`` and ``correct``. Empty when the index
    holds no candidates.
    """
    from kwiki.service.app import run_search

    if status and status not in STATUSES:
        raise BadRequest(f"unknown status '{status}'", hint=f"one of: {', '.join(STATUSES)}")
    total = sum(1 for p in searcher.pages.values() if p.type == PAGE_TYPE)
    if not total or (req.type and PAGE_TYPE not in req.type):
        return {"hits": [], "total_candidates": total}
    sub = req.model_copy(update={"type": [PAGE_TYPE], "k": max(1, min(int(k), settings.max_k)),
                                 "tag": list(req.tag) + ([status] if status else [])})
    resp = run_search(searcher, sub, settings)
    hits = [_with_status(h, searcher) for h in resp.hits]
    if status:  # the tag filter also matches a task or kernel named like a status; keep the real ones
        hits = [h for h in hits if h["status"] == status]
    return {"hits": hits, "total_candidates": total}


def tiered_search(searcher: Any, req: Any, settings: Any, experience_k: int = DEFAULT_EXPERIENCE_K,
                  status: str | None = None) -> dict[str, Any]:
    """``{"pages": <SearchResponse>, "experience": <experience_tier>}``; a candidate already among the
    pages is not repeated in the experience tier."""
    from kwiki.service.app import run_search

    pages = run_search(searcher, req, settings)
    tier = experience_tier(searcher, req, settings, k=experience_k + len(pages.hits), status=status)
    shown = {h.id for h in pages.hits}
    tier["hits"] = [h for h in tier["hits"] if h["id"] not in shown][:experience_k]
    return {"query": pages.query, "pages": pages.model_dump(), "experience": tier}
