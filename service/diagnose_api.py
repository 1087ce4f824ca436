"""``POST /diagnose`` and ``GET /signals``: NCU evidence in, diagnosis and ranked pages out.

    curl -F file=@kernel.raw.csv 127.0.0.1:8000/diagnose
    curl -H 'content-type: application/json' -d '{"metrics": {"launch__grid_size": 32}}' 127.0.0.1:8000/diagnose

Both call the service core (:func:`kwiki.service.diagnosis.diagnose_request`), as the CLI's ``kwiki diagnose``
and MCP do, so all give the same document.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from kwiki.errors import BadInput
from kwiki.settings import PAGES_PER_SIGNAL

from .core import Kwiki, signals_doc

router = APIRouter()


@router.post("/diagnose")
async def diagnose(request: Request, k: int = Query(PAGES_PER_SIGNAL, description="pages per signal (1..50)")) -> Any:
    """Diagnose an NCU export (multipart ``file``) or JSON ``{"metrics": {...}}`` / ``{"text": "..."}``.

    With a second multipart field ``baseline`` (the parent's export) the answer is a comparison of ``file``
    against it: matched kernels, speedup with its noise rule and verdict, metric deltas, signals resolved,
    appeared and persisting (``kwiki diagnose FILE --baseline BASELINE``). A field ``kernel`` keeps one kernel; a field
    ``source`` (``--page source --csv`` of the same report) adds the hotspots (an upload that is itself a source page
    gets them too)."""
    from kwiki.service.limits import check_json_text, within_deadline

    state: Kwiki = request.app.state.kwiki
    settings = state.settings
    ctype = request.headers.get("content-type", "")
    kwargs: dict[str, Any] = {}
    if ctype.startswith("multipart/form-data"):
        form = await request.form(max_files=3, max_fields=6)
        upload = form.get("file")
        if upload is None or isinstance(upload, str):
            raise BadInput('no file in the upload', hint='send the export as multipart field "file"')
        kwargs = {"data": await upload.read(settings.max_upload_bytes + 1), "filename": upload.filename or ""}
        base = form.get("baseline")
        if base is not None and not isinstance(base, str):  # the parent's export: compare file against it
            kwargs |= {"baseline": await base.read(settings.max_upload_bytes + 1), "baseline_filename": base.filename or "baseline"}
        src = form.get("source")
        if src is not None and not isinstance(src, str):  # the same report's source page: hotspots
            kwargs["source"] = await src.read(settings.max_upload_bytes + 1)
        if isinstance(form.get("kernel"), str) and form.get("kernel"):
            kwargs["kernel"] = str(form.get("kernel"))[:500]  # a part of a kernel name; it is echoed in errors
    elif ctype.startswith("application/json"):
        try:
            body = await request.json()
        except ValueError as exc:  # includes a body that is not UTF-8
            raise BadInput(f"request body is not JSON: {str(exc)[:200]}") from None
        except RecursionError:
            raise BadInput("request body is JSON nested too deeply") from None
        check_json_text(body)  # a "\ud800" escape anywhere would fail the answer's encoding, after the work
        if not isinstance(body, dict) or not ({"metrics", "text"} & set(body)):
            raise BadInput('JSON body must be {"metrics": {...}} or {"text": "..."}')
        kwargs = {"metrics": body["metrics"]} if "metrics" in body else {"text": body["text"]}
        if "metrics" in kwargs and not isinstance(kwargs["metrics"], dict):
            raise BadInput("metrics must be an object {metric name: value}")
        if "text" in kwargs and not isinstance(kwargs["text"], str):
            raise BadInput("text must be a string")
    else:
        kwargs = {"data": await request.body(), "filename": request.headers.get("x-filename", "upload.csv")}

    def diagnose_json(**kw: Any) -> bytes:
        # serialized in the worker thread too: 1,000 launches are megabytes of JSON, which held the event loop
        return state.diagnose(**kw).model_dump_json().encode()

    answer = await within_deadline(settings.request_timeout_s, diagnose_json, k=k, **kwargs)
    return Response(answer, media_type="application/json")


@router.get("/signals")
def signals() -> dict[str, Any]:
    """The NCU signals kwiki evaluates and the metric catalog (canonical ids and names per GPU)."""
    return signals_doc()
