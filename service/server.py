"""How ``kwiki serve`` runs uvicorn: bounded connections, a deadline for request headers, JSON protocol errors.

uvicorn alone holds a connection that never finishes its request for ever: 20,000 such sockets used up the file
descriptors, new clients timed out and the accept loop logged 49.5 MiB of "Too many open files" in 12 s. Here:

- at most ``KWIKI_MAX_CONNECTIONS`` connections are open; one more is answered ``503 unavailable`` and closed;
- a connection that has not sent a whole request head ``KWIKI_HEADER_TIMEOUT_S`` after it opened (or after its
  last answer) is closed;
- a request whose body is still arriving ``KWIKI_BODY_TIMEOUT_S`` later (a body dribbled a byte at a time) is
  answered ``408 request_timeout`` and closed: the whole request has ``header + body`` seconds to arrive;
- the soft file-descriptor limit is raised to the hard one, so the bound is reached before the process' limit;
- the "out of system resource" accept error is logged at most once per :data:`LOG_EVERY_S`, with a count;
- uvicorn's own 400 for a malformed request is JSON, like every other error.

    config = server_config(create_app(settings), settings)
    uvicorn.Server(config).run()
"""

from __future__ import annotations

import asyncio
import json
import logging
import resource
import time
from typing import Any, Callable

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from kwiki.errors import BadRequest, SlowRequest, Unavailable
from kwiki.settings import Settings

log = logging.getLogger("kwiki")
#: A repeated resource error is logged at most once per this many seconds.
LOG_EVERY_S = 10.0
#: File descriptors kept for the index, the model and the logs besides the connections.
FD_RESERVE = 64


def _raw_response(status: int, reason: bytes, body: dict[str, Any]) -> bytes:
    data = json.dumps(body).encode()
    return (b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n"
            % (status, reason, len(data))) + data


BUSY = _raw_response(503, b"Service Unavailable", Unavailable(
    "too many open connections", hint="retry shortly; behind a proxy, limit connections per client").to_dict())
SLOW_BODY = _raw_response(408, b"Request Timeout", SlowRequest(
    "the request body did not arrive in time", hint="send the body at once; a 20 MiB upload needs ~1 MB/s").to_dict())


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a connection bound, a request-head deadline and a JSON 400."""

    max_connections = 512
    header_timeout_s = 10.0
    body_timeout_s = 60.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) >= self.max_connections:
            transport.write(BUSY)
            transport.close()
            self.transport = transport
            self._refused = True
            _limited_log("connections", "kwiki: %d connections open, the limit; refused one more with 503", len(self.connections))
            return
        self._refused = False
        super().connection_made(transport)
        self._arm_head_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        if getattr(self, "_refused", False):
            return
        self._cancel_head_deadline()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if getattr(self, "_refused", False):
            return
        super().data_received(data)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_head_deadline()  # the next request's head has the same deadline

    # ---------------------------------------------------------------- request-head deadline
    def _arm_head_deadline(self) -> None:
        self._cancel_head_deadline()
        armed_for = self.cycle
        self._head_timer: asyncio.TimerHandle | None = self.loop.call_later(self.header_timeout_s, self._head_deadline_passed, armed_for)

    def _cancel_head_deadline(self) -> None:
        timer = getattr(self, "_head_timer", None)
        if timer is not None:
            timer.cancel()
            self._head_timer = None

    def _head_deadline_passed(self, armed_for: object) -> None:
        self._head_timer = None
        if self.transport.is_closing():
            return
        waiting = self.cycle is armed_for and (self.cycle is None or self.cycle.response_complete)
        if waiting:
            self.transport.close()  # no whole request head since the deadline was armed
        elif self.cycle is not None and self.cycle.more_body:  # a head came; its body is still arriving
            self._head_timer = self.loop.call_later(self.body_timeout_s, self._body_deadline_passed, self.cycle)

    def _body_deadline_passed(self, cycle: object) -> None:
        self._head_timer = None
        if self.cycle is cycle and self.cycle is not None and self.cycle.more_body and not self.transport.is_closing():
            if not self.cycle.response_started:
                self.transport.write(SLOW_BODY)
            self.transport.close()  # the app reading the body sees a disconnect

    # ---------------------------------------------------------------- JSON protocol errors
    def send_400_response(self, msg: str) -> None:
        err = BadRequest(f"malformed HTTP request: {msg}", hint="send a well-formed HTTP/1.1 request")
        body = json.dumps(err.to_dict()).encode()
        try:
            for event in (h11.Response(status_code=400, reason=b"Bad Request",
                                       headers=[(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                                (b"connection", b"close")]),
                          h11.Data(data=body), h11.EndOfMessage()):
                self.transport.write(self.conn.send(event))
        except h11.LocalProtocolError:  # h11 cannot answer in this state: the raw bytes will do
            self.transport.write(_raw_response(400, b"Bad Request", err.to_dict()))
        self.transport.close()


_last_logged: dict[str, float] = {}
_suppressed: dict[str, int] = {}


def _limited_log(key: str, msg: str, *args: object, clock: Callable[[], float] = time.monotonic) -> bool:
    """Log ``msg`` at most once per :data:`LOG_EVERY_S` for ``key``; True when it was written."""
    now = clock()
    if now - _last_logged.get(key, float("-inf")) < LOG_EVERY_S:
        _suppressed[key] = _suppressed.get(key, 0) + 1
        return False
    skipped = _suppressed.pop(key, 0)
    _last_logged[key] = now
    log.warning(msg + (f" ({skipped} more like it not logged)" if skipped else ""), *args)
    return True


class ResourceErrorFilter(logging.Filter):
    """Lets one "out of system resource" / "Too many open files" record through per :data:`LOG_EVERY_S`."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.clock = clock
        self.last = float("-inf")
        self.suppressed = 0

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if "out of system resource" not in text and "Too many open files" not in text:
            return True
        now = self.clock()
        if now - self.last < LOG_EVERY_S:
            self.suppressed += 1
            return False
        if self.suppressed:
            record.msg, record.args = f"{text} ({self.suppressed} more like it not logged)", None
        record.exc_info = record.exc_text = None  # one line, not a traceback per failed accept
        self.last, self.suppressed = now, 0
        return True


def raise_fd_limit() -> int:
    """Raise the soft file-descriptor limit to the hard one; returns the soft limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if soft != resource.RLIM_INFINITY and soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (ValueError, OSError):
            pass
    return soft


def connection_bound(settings: Settings) -> int:
    """``settings.max_connections``, lowered to fit the process' file descriptors."""
    soft = raise_fd_limit()
    if soft == resource.RLIM_INFINITY:
        return settings.max_connections
    return max(1, min(settings.max_connections, soft - FD_RESERVE))


def server_config(app: Any, settings: Settings, **kwargs: Any) -> uvicorn.Config:
    """The uvicorn config ``kwiki serve`` runs (and the tests): one worker, bounded connections."""
    bound = connection_bound(settings)
    protocol = type("KwikiH11Protocol", (BoundedH11Protocol,),
                    {"max_connections": bound, "header_timeout_s": settings.header_timeout_s,
                     "body_timeout_s": settings.body_timeout_s})
    for name in ("asyncio", "uvicorn.error"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, ResourceErrorFilter) for f in logger.filters):
            logger.addFilter(ResourceErrorFilter())
    options: dict[str, Any] = {"host": settings.host, "port": settings.port, "log_level": "info", "http": protocol,
                               "timeout_keep_alive": 5}
    return uvicorn.Config(app, **(options | kwargs))
