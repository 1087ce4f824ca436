"""The CLI as a thin client of a running kwiki server, so a command costs a request, not an index load.

``kwiki search``, ``page``, ``diagnose``, ``signals`` and ``ledger search`` ask a server when there is one and answer
in process otherwise; the output is the same either way (the same documents, printed by the same code). Which
one answers (README, "The CLI and a running server"):

- ``--local``: in process, always.
- ``--url URL`` or ``KWIKI_URL``: that server, always; when it does not answer, or is not kwiki, the command fails
  (exit 2, ``server_unreachable``) instead of quietly loading the index.
- otherwise ``http://KWIKI_HOST:KWIKI_PORT`` (127.0.0.1:8000), tried with a :data:`CONNECT_TIMEOUT_S` connect
  timeout: its ``/health`` must answer with this kwiki's version and the build the local index serves
  (``<index_dir>/current``). A server serving another build (one built since it started, another index, or an index
  where there is none locally) is not asked: the command answers in process from the local index and says so on
  stderr, with the fix (``POST /admin/reload``, or ``--url`` to ask it anyway). So the answer is always the one the
  local index gives, only faster.

This module imports nothing of the search engine: the client path loads no model, no index, no FastAPI. Its
requests go through the standard library's ``http.client``: on this project's 2-core machine importing httpx took
a third of a client command's time (it loads its own command line's click, rich and pygments), and http.client
nothing measurable (``benchmarks/cli_latency.py``). httpx encodes the one multipart request, ``kwiki diagnose``'s
upload, where the export's size dwarfs an import.

    >>> server = find_server(load_settings(), url=None, local=False)      # doctest: +SKIP
    >>> server.post("/search", {"q": "tail effect", "k": 3})["hits"][0]["id"] if server else None   # doctest: +SKIP
"""

from __future__ import annotations

import http.client
import json
from typing import TYPE_CHECKING, Any, Callable, TypeVar
from urllib.parse import SplitResult, quote, urlencode, urlsplit

from kwiki import __version__
from kwiki.errors import KwikiError, ServerUnreachable

if TYPE_CHECKING:
    from kwiki.settings import Settings

T = TypeVar("T")

#: Connect timeout for the server the CLI looks for: loopback refuses at once when nothing listens, so this only
#: bounds a host that drops packets. The read timeout is the server's own deadline, twice (``/ledger/search``
#: runs two searches), plus :data:`READ_MARGIN_S` for the transfer.
CONNECT_TIMEOUT_S = 0.25
READ_MARGIN_S = 5.0
#: ``/health`` is answered on the server's event loop, in milliseconds even while searches queue: a port that
#: accepts and then says nothing for this long is not a kwiki server to wait for.
HEALTH_TIMEOUT_S = 5.0
#: A server bound to every address is reached on loopback.
ANY_ADDRESS = ("0.0.0.0", "::", "")


def default_url(settings: Settings) -> str:
    """``http://KWIKI_HOST:KWIKI_PORT``, loopback for a server bound to every address.

    >>> from kwiki.settings import Settings
    >>> default_url(Settings(host="0.0.0.0", port=9000)), default_url(Settings(host="::1"))
    ('http://127.0.0.1:9000', 'http://[::1]:8000')
    """
    host = "127.0.0.1" if settings.host in ANY_ADDRESS else settings.host
    return f"http://{f'[{host}]' if ':' in host else host}:{settings.port}"


def page_path(key: str) -> str:
    """``/pages/{key}`` with every character of ``key`` escaped, dots too: a link such as ``../techniques/x.md``
    reaches the server as one path parameter, not as segments a client would normalize away.

    >>> page_path("../techniques/stream-k.md")
    '/pages/%2E%2E%2Ftechniques%2Fstream-k%2Emd'
    """
    return "/pages/" + quote(key, safe="").replace(".", "%2E")


def _error_classes() -> dict[str, type[KwikiError]]:
    found: dict[str, type[KwikiError]] = {}
    todo: list[type[KwikiError]] = [KwikiError]
    while todo:
        cls = todo.pop()
        found.setdefault(cls.code, cls)
        todo += cls.__subclasses__()
    return found


def error_from(status: int, body: bytes, url: str) -> KwikiError:
    """The server's JSON error as the :class:`KwikiError` it was raised as (same class, message and hint), so the
    CLI reports it as if it had been raised in process.

    >>> err = error_from(404, b'{"error": {"code": "page_not_found", "message": "no page x", "hint": "h"}}', "u")
    >>> type(err).__name__, err.message, err.hint
    ('PageNotFound', 'no page x', 'h')
    """
    try:
        doc = json.loads(body)["error"]
        message, code, hint = str(doc["message"]), str(doc.get("code", "")), doc.get("hint")
    except (ValueError, KeyError, TypeError):
        return ServerUnreachable(f"{url} answered HTTP {status} without a kwiki error", hint=f"is {url} a kwiki server?")
    cls = _error_classes().get(code, KwikiError)
    err = cls(message, hint=hint)
    if cls is KwikiError:  # a code this CLI does not know (a newer server): keep what it said
        err.code, err.status = code, status
    return err


class ServerLost(Exception):
    """The server stopped answering after it was found (it was stopped, or restarted on another build)."""


class Server:
    """A kwiki server that answered ``/health``, over one kept-alive connection; each method returns the parsed JSON
    of a 2xx answer and raises the server's :class:`KwikiError` otherwise (:class:`ServerLost` when it is gone)."""

    def __init__(self, url: str, read_timeout_s: float, explicit: bool = False) -> None:
        self.url, self.read_timeout_s, self.explicit = url, read_timeout_s, explicit
        self.parts: SplitResult = urlsplit(url)
        self.conn: http.client.HTTPConnection | None = None
        self.health: dict[str, Any] = {}

    def _connect(self) -> http.client.HTTPConnection:
        p = self.parts
        if p.scheme == "https":
            import ssl

            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                p.hostname or "", p.port, timeout=CONNECT_TIMEOUT_S, context=ssl.create_default_context())
        else:
            conn = http.client.HTTPConnection(p.hostname or "", p.port, timeout=CONNECT_TIMEOUT_S)
        conn.connect()
        return conn  # connecting is quick or never; each request then sets how long its answer may take

    def _send(self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None,
              timeout_s: float | None = None) -> Any:
        target = self.parts.path.rstrip("/") + path
        for attempt in (1, 2):  # a kept-alive connection the server closed meanwhile is opened again, once
            try:
                if self.conn is None:
                    self.conn = self._connect()
                if self.conn.sock is not None:
                    self.conn.sock.settimeout(timeout_s or self.read_timeout_s)
                self.conn.request(method, target, body=body, headers={"accept": "application/json", **(headers or {})})
                response = self.conn.getresponse()
                data = response.read()
                break
            except (OSError, http.client.HTTPException) as exc:
                if self.conn is not None:
                    self.conn.close()
                self.conn = None
                if attempt == 2 or isinstance(exc, TimeoutError):
                    raise ServerLost(f"{self.url}: {type(exc).__name__}: {exc}") from None
        if response.status >= 400:
            raise error_from(response.status, data, self.url)
        return json.loads(data)

    def get(self, path: str, params: dict[str, Any] | None = None, timeout_s: float | None = None) -> Any:
        return self._send("GET", path + (f"?{urlencode(params, doseq=True)}" if params else ""), timeout_s=timeout_s)

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return self._send("POST", path, json.dumps(body).encode("utf-8"), {"content-type": "application/json"})

    def upload(self, path: str, files: dict[str, tuple[str, bytes]], data: dict[str, str],
               params: dict[str, Any]) -> Any:
        """A multipart upload (``POST /diagnose``), encoded by httpx."""
        import httpx

        try:
            response = httpx.post(self.url + path, files=files, data=data, params=params, trust_env=False,
                                  timeout=httpx.Timeout(self.read_timeout_s, connect=CONNECT_TIMEOUT_S))
        except httpx.TransportError as exc:
            raise ServerLost(f"{self.url}: {type(exc).__name__}: {exc}") from None
        if response.status_code >= 400:
            raise error_from(response.status_code, response.content, self.url)
        return response.json()

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def _local_build(settings: Settings) -> str | None:
    """The build id the local index serves, read from its manifest alone (None: no local index)."""
    from kwiki.index.manifest import MANIFEST, current_build

    try:
        return str(json.loads((current_build(settings.index_dir) / MANIFEST).read_text(encoding="utf-8"))["build_id"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _note(text: str) -> None:
    import typer

    typer.echo(f"note: {text}", err=True)


def find_server(settings: Settings, url: str | None, local: bool) -> Server | None:
    """The server this command asks, or None to answer in process (module docstring)."""
    if local:
        return None
    explicit = url or settings.url
    base = (explicit or default_url(settings)).rstrip("/")
    parts = urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ServerUnreachable(f"'{base}' is not a server URL", hint="give --url http://HOST:PORT (KWIKI_URL)")
    server = Server(base, settings.request_timeout_s * 2 + READ_MARGIN_S, explicit=bool(explicit))
    try:
        health = server.get("/health", timeout_s=HEALTH_TIMEOUT_S)
        if not isinstance(health, dict) or "status" not in health:
            raise ValueError("not a kwiki /health")
    except (ServerLost, ServerUnreachable, ValueError) as exc:
        server.close()
        if explicit:
            raise ServerUnreachable(f"no kwiki server answers at {base} ({str(exc)[:200]})",
                                    hint="start one with `kwiki serve`, or answer in process with --local") from None
        return None
    except KwikiError as exc:  # a 503 no_index is an answer: /health says why in its body
        health = {"status": exc.code}
    server.health = health
    index = health.get("index") or {}
    if explicit:
        if health.get("version") not in (None, __version__):
            _note(f"{base} runs kwiki {health.get('version')}, this CLI is {__version__}")
        return server
    local_build = _local_build(settings)
    if health.get("status") == "ok" and health.get("version") == __version__ and index.get("build_id") == local_build:
        return server
    server.close()
    if health.get("status") == "ok":
        served = index.get("build_id") if health.get("version") == __version__ else f"kwiki {health.get('version')}"
        _note(f"the server at {base} serves {served}, not the local index's build ({local_build or 'none'} in "
              f"{settings.index_dir}): answering in process (POST /admin/reload switches the server to the newest "
              f"build; --url {base} asks it anyway)")
    return None


def answer(server: Server | None, remote: Callable[[Server], T], local: Callable[[], T]) -> T:
    """``remote(server)`` when there is a server, else ``local()``. A server that stops answering mid-command is
    fatal when it was asked for by name (``--url``, ``KWIKI_URL``); a found one is replaced by ``local()``."""
    if server is not None:
        try:
            return remote(server)
        except ServerLost as exc:
            if server.explicit:
                raise ServerUnreachable(f"the server stopped answering: {exc}",
                                        hint="restart it, or answer in process with --local") from None
            _note(f"the server at {server.url} stopped answering; answering in process")
    return local()


__all__ = ["CONNECT_TIMEOUT_S", "Server", "ServerLost", "answer", "default_url", "error_from", "find_server", "page_path"]
