"""Request-size guard: bodies over ``settings.max_upload_bytes`` get a 413 JSON error.

Checked twice, because a client can lie or say nothing: the declared ``Content-Length`` is
refused before any byte is read, and a streamed (chunked) body is counted as it arrives and cut
off at the limit, so no endpoint ever buffers more than the limit::

    app.add_middleware(BodySizeLimit, max_bytes=settings.max_upload_bytes)

The error body is the service's usual ``{"error": {"code": "payload_too_large", ...}}``.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Awaitable, Callable, TypeVar

from starlette.exceptions import HTTPException

from kwiki.errors import BadRequest, PayloadTooLarge, RequestTimeout

T = TypeVar("T")

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class _BodyTooLarge(HTTPException):
    """Raised from ``receive`` when the streamed body passes the limit.

    An HTTPException, so body parsers that turn other errors into a 400 let it through.
    """

    def __init__(self) -> None:
        super().__init__(status_code=413, detail="request body is too large")


class BodySizeLimit:
    """Pure ASGI middleware (no buffering) that enforces a maximum request body size."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _error(self, size: int | None) -> PayloadTooLarge:
        said = f"{size} bytes" if size is not None else "more"
        return PayloadTooLarge(
            f"request body is {said}, the limit is {self.max_bytes} bytes",
            hint="send a smaller file (KWIKI_MAX_UPLOAD_BYTES sets the limit on the server)",
        )

    async def _reply(self, send: Send, err: PayloadTooLarge) -> None:
        body = json.dumps(err.to_dict()).encode()
        await send({"type": "http.response.start", "status": err.status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                size = None
            if size is not None and size > self.max_bytes:
                await self._reply(send, self._error(size))
                return
        seen = 0
        exceeded = started = replaced = False

        async def limited_receive() -> Message:
            nonlocal seen, exceeded
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    exceeded = True
                    raise _BodyTooLarge()
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started, replaced
            if exceeded and not started:
                # Whatever the app answers to the cut-off body (its parsers may say 400), the client gets the 413.
                if message["type"] == "http.response.start":
                    started = replaced = True
                    await self._reply(send, self._error(None))
                return
            if replaced:
                return  # the rest of the app's own answer
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except _BodyTooLarge:
            if not started:
                started = True
                await self._reply(send, self._error(None))


async def within_deadline(timeout_s: float, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run ``fn`` in the thread pool and answer 503 ``timeout`` after ``timeout_s`` (time queued included).

    A thread cannot be cancelled, so ``fn`` also gets ``deadline=`` (a ``time.monotonic()`` value) and stops
    its own work when it passes: the diagnosis checks it between launches and before each page search."""
    kwargs["deadline"] = time.monotonic() + timeout_s
    try:
        return await asyncio.wait_for(asyncio.to_thread(fn, *args, **kwargs), timeout_s)
    except asyncio.TimeoutError:
        raise RequestTimeout(f"request took longer than {timeout_s:.0f} s", hint="narrow the request or retry") from None


def check_json_text(doc: object) -> None:
    """:func:`kwiki.service.core.check_text` for every string (keys included) of a parsed JSON document."""
    try:
        json.dumps(doc, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise BadRequest(f"JSON text contains a lone surrogate at character {exc.start}",
                         hint="send valid Unicode: a \\ud800-\\udfff escape must be half of a pair") from None
    except (ValueError, RecursionError):  # NaN is valid to the reader here; depth was checked by the parser
        pass


class HeadAsGet:
    """Answer ``HEAD`` on every ``GET`` route: the app runs as for GET and the body is dropped (headers kept)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def headers_only(message: Message) -> None:
            if message["type"] == "http.response.body":
                if not message.get("more_body", False):
                    await send({"type": "http.response.body", "body": b""})
                return
            await send(message)

        await self.app(dict(scope, method="GET"), receive, headers_only)
