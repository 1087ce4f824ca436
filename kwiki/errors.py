"""kwiki's errors: each class carries an HTTP status and a stable code.

The service maps every :class:`KwikiError` to a JSON body in one handler
(``{"error": {"code": ..., "message": ..., "hint": ...}}``); the CLI prints
the message and hint and exits non-zero.
"""

from __future__ import annotations


class KwikiError(Exception):
    """Base class: ``status`` is the HTTP status, ``code`` a stable machine-readable id."""

    status: int = 500
    code: str = "internal"

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def to_dict(self) -> dict:
        body = {"code": self.code, "message": self.message}
        if self.hint:
            body["hint"] = self.hint
        return {"error": body}


class BadRequest(KwikiError):
    status, code = 400, "bad_request"


class QueryTooLong(BadRequest):
    code = "query_too_long"


class BadInput(BadRequest):
    """An upload or file that kwiki cannot read (not an NCU export, truncated, ...)."""

    code = "bad_input"


class Unauthorized(KwikiError):
    status, code = 401, "unauthorized"


class Forbidden(KwikiError):
    status, code = 403, "forbidden"


class NotFound(KwikiError):
    status, code = 404, "not_found"


class PageNotFound(NotFound):
    code = "page_not_found"


class PayloadTooLarge(KwikiError):
    status, code = 413, "payload_too_large"


class BuildLocked(KwikiError):
    status, code = 409, "build_locked"


class IndexMissing(KwikiError):
    status, code = 503, "no_index"


class IndexIncompatible(KwikiError):
    status, code = 503, "index_incompatible"


class Unavailable(KwikiError):
    status, code = 503, "unavailable"


class SlowRequest(KwikiError):
    """A request body still arriving past ``KWIKI_BODY_TIMEOUT_S`` (one dribbled a byte at a time holds a worker)."""

    status, code = 408, "request_timeout"


class RequestTimeout(KwikiError):
    """A request ran past ``KWIKI_REQUEST_TIMEOUT_S`` (searches and diagnoses alike); the server stays up."""

    status, code = 503, "timeout"


class BuildDamaged(KwikiError):
    """The build ``current`` points at cannot be opened (a file missing or corrupt); the previous one stays served."""

    status, code = 409, "build_damaged"


class ServerUnreachable(Unavailable):
    """The server the CLI was told to ask (``--url``, ``KWIKI_URL``) does not answer, or is not a kwiki server."""

    code = "server_unreachable"


class CorpusNotFound(BadRequest):
    """``kwiki ingest --corpus PATH`` names no folder: refused before anything is read or built."""

    code = "corpus_not_found"


class EmptyBuild(KwikiError):
    """A build read no page while the build served has pages: the served one is kept, nothing is switched."""

    status, code = 409, "empty_build"


class UnknownReference(BadRequest):
    """A ledger candidate names a parent, technique or pattern id that does not exist; the hint lists the nearest."""

    code = "unknown_reference"


class BuildNotFound(NotFound):
    """A build id that the builds store (``KWIKI_BUILDS_DIR``) does not hold, or that is not a build id at all."""

    code = "build_not_found"


class BuildNotLoaded(Unavailable):
    """A replica told to serve a build (``KWIKI_BUILD``, a rollout's reload) that it has not loaded: not ready."""

    code = "build_not_loaded"


class LoadBalancerError(Unavailable):
    """haproxy's admin socket cannot be reached, or refused a command (``kwiki rollout``)."""

    code = "load_balancer_unavailable"


class RolloutFailed(KwikiError):
    """A rollout stopped: a replica did not switch, or became ready, in time; the replicas not yet switched are kept."""

    status, code = 502, "rollout_failed"


class LedgerUnavailable(Unavailable):
    """The ledger's database cannot be reached or opened (``KWIKI_LEDGER_URL``, or a workspace's SQLite file)."""

    code = "ledger_unavailable"
