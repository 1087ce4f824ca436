"""What ``GET /health`` and ``POST /admin/reload`` answer: readiness and the build served.

A replica is ready when it serves a build and, if it was told which one (``KWIKI_BUILD``, or a reload to a build id),
that very build. A load balancer's health check (haproxy ``option httpchk GET /health``) and ``kwiki rollout`` read
only the status code: 200 ready, 503 not. The body says which build is served and which one is expected, and the
503's error says why (``build_not_loaded``, ``no_index``, ``index_incompatible``, ...).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from kwiki import __version__

from .core import Kwiki


class Health(BaseModel):
    """``GET /health`` of a ready replica."""

    status: str = Field("ok", description="ok")
    ready: bool = Field(True, description="True: serving the build it was told to (any build when none was named)")
    version: str = Field(..., description="kwiki's version")
    build: str = Field(..., description="The id of the build served (also the X-Kwiki-Build header of every response)")
    expected_build: str | None = Field(None, description="The published build this replica was told to serve; null: "
                                       "the index root's current build")
    index: dict[str, Any] = Field(..., description="The served build's manifest (corpus names, no server paths)")


class NotReady(BaseModel):
    """``GET /health`` with status 503: no build, or not the build this replica was told to serve."""

    status: str = Field(..., description="not_ready, or the error code when no build is loaded (no_index, ...)")
    ready: bool = False
    version: str
    build: str | None = Field(None, description="The build still served, if any (it keeps answering requests)")
    expected_build: str | None = None
    error: dict[str, str] = Field(..., description="code, message and hint, as every kwiki error")


class ReloadRequest(BaseModel):
    """``POST /admin/reload``'s optional body."""

    build: str | None = Field(None, description="A published build to switch to (`kwiki publish`); it becomes the build "
                              "this replica must serve to be ready. Omitted: the expected build, else the index's current")


class ReloadResponse(BaseModel):
    status: str = "ok"
    build: str = Field(..., description="The build served from now on")
    expected_build: str | None = None
    index: dict[str, Any]


def health(state: Kwiki) -> tuple[int, Health | NotReady]:
    """(HTTP status, body) of ``GET /health``."""
    problem = state.readiness()
    searcher = state.searcher
    if problem is not None or searcher is None:
        err = problem.to_dict()["error"] if problem is not None else {"code": "no_index", "message": "no index loaded"}
        status = "not_ready" if searcher is not None or state.expected else err["code"]
        return 503, NotReady(status=status, version=__version__, build=state.build_id, expected_build=state.expected, error=err)
    # Names, not paths: the endpoint is open, and the server's file layout is nobody's business.
    manifest = searcher.manifest
    index = manifest.model_dump(exclude={"corpora"}) | {"corpora": sorted(manifest.corpora)}
    return 200, Health(version=__version__, build=manifest.build_id, expected_build=state.expected, index=index)


def reloaded(state: Kwiki) -> ReloadResponse:
    manifest = state.get().manifest
    return ReloadResponse(build=manifest.build_id, expected_build=state.expected, index=manifest.model_dump())
