"""Issue 20, Medium 7-8 and Low 11-14: the HTTP surface on loopback, the way ``kwiki serve`` runs it
(``service.server.server_config``). Bounds are counts (connections, log lines), never time."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time

import httpx
import pytest

from kwiki.service.server import LOG_EVERY_S, ResourceErrorFilter, server_config
from kwiki.settings import Settings

from ..conftest import free_port

TOKEN = "t0ken"
MAX_CONN = 8


class Served:
    """The real app under the real uvicorn config of ``kwiki serve``, on a loopback port, in a thread."""

    def __init__(self, settings: Settings) -> None:
        import uvicorn

        from kwiki.service.app import create_app

        self.port = free_port()
        config = server_config(create_app(settings), settings, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "Served":
        self.thread.start()
        for _ in range(2400):
            if self.server.started:
                return self
            time.sleep(0.05)
        raise RuntimeError("server did not start")

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)

    def open_connections(self) -> int:
        return len(self.server.server_state.connections)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    base = tmp_path_factory.mktemp("bare")
    settings = Settings(index_dir=base / "none", ledger_dir=base / "ledger", admin_token=TOKEN,
                        max_connections=MAX_CONN, header_timeout_s=2.0, body_timeout_s=2.0, cors_origins=["https://ok.example"])
    with Served(settings) as srv:
        yield srv


@pytest.fixture(scope="module")
def client(served):
    with httpx.Client(base_url=served.url, timeout=60) as c:
        yield c


def _json_error(r: httpx.Response, status: int, code: str | None = None) -> dict:
    assert r.status_code == status, (r.status_code, r.text[:300])
    assert r.headers["content-type"].startswith("application/json"), r.headers
    err = r.json()["error"]
    assert err["message"] and "Traceback" not in r.text
    if code:
        assert err["code"] == code
    return err


def _recv_all(sock: socket.socket) -> bytes:
    out = b""
    while chunk := sock.recv(65536):
        out += chunk
    return out


# ------------------------------------------------------------------ 7: half-open connections
def _wait_for(condition, what: str, limit_s: float = 120.0) -> None:
    """Wait until ``condition()`` holds (a state of the server, not an amount of time); fail after ``limit_s``."""
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not reached in {limit_s:.0f} s")
        time.sleep(0.02)


@pytest.fixture(scope="module")
def patient(tmp_path_factory):
    """The connection bound without the 2 s head deadline: idle connections stay open until the test closes them,
    so what the extra connections get does not depend on how fast a loaded machine opens them."""
    base = tmp_path_factory.mktemp("patient")
    with Served(Settings(index_dir=base / "none", max_connections=MAX_CONN, header_timeout_s=600.0)) as srv:
        yield srv


def test_half_open_connections_are_bounded_and_refused_with_503(patient):
    """20,000 sockets that never sent a request exhausted the descriptors; now at most MAX_CONN are held."""
    idle = [socket.create_connection(("127.0.0.1", patient.port), timeout=60) for _ in range(MAX_CONN)]
    try:
        _wait_for(lambda: patient.open_connections() >= MAX_CONN, "the server accepted the idle connections")
        extra = [socket.create_connection(("127.0.0.1", patient.port), timeout=60) for _ in range(3 * MAX_CONN)]
        for s in extra:
            reply = _recv_all(s)  # answered and closed at once, before it sent a byte
            head, _, body = reply.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 503") and b"application/json" in head
            assert json.loads(body)["error"]["code"] == "unavailable"
            s.close()
        assert patient.open_connections() <= MAX_CONN
    finally:
        for s in idle:
            s.close()
    _wait_for(lambda: patient.open_connections() == 0, "the closed connections were let go")
    assert httpx.get(f"{patient.url}/signals", timeout=60).status_code == 200  # and the server serves again


def test_idle_connections_are_closed_at_the_head_deadline(served, client):
    """Connections that never send a byte are closed by the request-head deadline (2 s here), and the bound
    frees up for new clients."""
    _wait_for(lambda: served.open_connections() == 0, "no connection left from an earlier test")
    idle = [socket.create_connection(("127.0.0.1", served.port), timeout=60) for _ in range(MAX_CONN)]
    try:
        for s in idle:
            assert _recv_all(s) == b""  # closed by the server, with nothing sent
    finally:
        for s in idle:
            s.close()
    _wait_for(lambda: served.open_connections() == 0, "the server let the idle connections go")
    assert client.get("/signals").status_code == 200


def test_unfinished_request_head_is_closed(served):
    """A head that is started and never finished is closed at the deadline, like a silent connection."""
    with socket.create_connection(("127.0.0.1", served.port), timeout=60) as s:
        s.sendall(b"GET /signals HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        assert _recv_all(s) == b""


def test_dribbled_request_body_gets_408_and_is_closed(served, client):
    """A head with a body announced and sent a few bytes at a time held a worker for as long as the client liked;
    now the body has the head deadline plus ``body_timeout_s`` (2 s + 2 s here) to arrive."""
    with socket.create_connection(("127.0.0.1", served.port), timeout=60) as s:
        s.sendall(b"POST /search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
        start = time.monotonic()
        s.settimeout(0.5)
        reply = b""
        while time.monotonic() - start < 30:
            try:
                s.sendall(b" ")  # one byte every half second: never a whole body
                chunk = s.recv(65536)
            except socket.timeout:
                continue
            except OSError:  # closed by the server while we were still sending
                break
            if not chunk:
                break
            reply += chunk
        head, _, body = reply.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408"), reply[:200]
        assert json.loads(body)["error"]["code"] == "request_timeout"
    assert client.get("/signals").status_code == 200


def test_resource_error_log_line_is_rate_limited():
    clock = [0.0]
    filt = ResourceErrorFilter(clock=lambda: clock[0])
    logger = logging.getLogger("kwiki-test-rate")
    records = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    logger.addHandler(Keep())
    logger.addFilter(filt)
    logger.propagate = False
    logger.setLevel(logging.INFO)
    for i in range(5000):  # 12 s of a failing accept loop
        clock[0] = i * (12 / 5000)
        try:
            raise OSError(24, "Too many open files")
        except OSError:
            logger.error("socket.accept() out of system resource", exc_info=True)
    logger.info("something else")
    assert LOG_EVERY_S == 10
    assert records[:2] == ["socket.accept() out of system resource",  # t = 0 s and t = 10 s, nothing between
                           f"socket.accept() out of system resource ({round(10 / (12 / 5000)) - 1} more like it not logged)"]
    assert records[2:] == ["something else"]  # other records pass untouched


# ------------------------------------------------------------------ 12: error contract
def test_protocol_level_400_is_json(served):
    with socket.create_connection(("127.0.0.1", served.port), timeout=60) as s:
        s.sendall(b"GARBAGE\x00 / HTTP/1.1\r\n\r\n")
        head, _, body = _recv_all(s).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400") and b"application/json" in head
    assert json.loads(body)["error"]["code"] == "bad_request"


@pytest.mark.parametrize("body", [b"{not json", b'{"q": "x", "k": ' + b"9" * 5000 + b"}", b"\xff\xfe{"])
def test_malformed_search_body_is_bad_request(client, body):
    _json_error(client.post("/search", content=body, headers={"content-type": "application/json"}), 400, "bad_request")


@pytest.mark.parametrize("path", ["/signals", "/health", "/", "/ui/diagnose", "/ledger"])
def test_head_is_answered_on_get_routes(client, path):
    get, head = client.get(path), client.head(path)
    assert head.status_code == get.status_code != 405 and head.content == b""
    assert head.headers["content-type"] == get.headers["content-type"]


def test_refused_cors_preflight_is_json(client):
    r = client.options("/search", headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "GET"})
    _json_error(r, 400, "bad_request")
    ok = client.options("/search", headers={"Origin": "https://ok.example", "Access-Control-Request-Method": "GET"})
    assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == "https://ok.example"


def test_html_page_errors_are_html(client):
    r = client.get("/", params={"q": "tail", "k": "abc"})
    assert r.status_code >= 400 and r.headers["content-type"].startswith("text/html")


def test_long_static_name_is_404(client):
    _json_error(client.get("/ui/static/" + "a" * 5000), 404, "not_found")
    assert client.get("/ui/static/kwiki.css").status_code == 200


# ------------------------------------------------------------------ 13: CORS setting
def test_cors_origins_accept_a_comma_separated_list(monkeypatch):
    monkeypatch.setenv("KWIKI_CORS_ORIGINS", "https://a.example, https://b.example")
    assert Settings().cors_origins == ["https://a.example", "https://b.example"]
    monkeypatch.setenv("KWIKI_CORS_ORIGINS", '["https://a.example"]')
    assert Settings().cors_origins == ["https://a.example"]
    monkeypatch.setenv("KWIKI_CORS_ORIGINS", "a.example")
    with pytest.raises(ValueError, match="not an http"):
        Settings()


# ------------------------------------------------------------------ 14 and 8: the token
@pytest.mark.parametrize("header", [TOKEN, f"Basic {TOKEN}", "Bearer", "Bearer wrong", "Bearer ünïcødé", "Bearer \u2603"])
def test_token_needs_the_bearer_scheme_and_non_ascii_is_401(client, header):
    _json_error(client.post("/admin/reload", headers={"Authorization": header.encode("utf-8")}), 401, "unauthorized")


# ------------------------------------------------------------------ 8 and 11: the ledger
CAND = {"task": "transpose", "id": "c001", "status": "candidate", "kernel": "k"}


@pytest.mark.parametrize("body", [
    b'{"task": "transpose", "id": "c001", "notes": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    b'{"task": "transpose", "id": "c001", "notes": "\\ud800"}',
    b'{"task": "transpose", "id": "c001", "benchmarks": [{"metric": "time", "value": Infinity}]}',
    b'{"task": "transpose", "id": "c001", "benchmarks": [{"metric": "time", "value": 1e999}]}',
    b'{"task": "transpose", "id": "c001", "benchmarks": [{"metric": "time", "value": NaN}]}',
])
def test_ledger_post_errors_are_400_and_store_nothing(served, client, body):
    ledger = served.server.config.app.state.kwiki.settings.ledger_dir  # the live app's settings
    before = sorted(p.name for p in ledger.rglob("*")) if ledger.exists() else []
    r = client.post("/ledger", content=body, headers={"Authorization": f"Bearer {TOKEN}", "content-type": "application/json"})
    _json_error(r, 400, "bad_request")
    after = sorted(p.name for p in ledger.rglob("*")) if ledger.exists() else []
    assert after == before
    from kwiki.ledger import Ledger

    assert Ledger(ledger).find("transpose/c001") is None


def test_ledger_listing_does_not_show_the_server_path(served, client):
    r = client.post("/ledger", json=CAND | {"id": "c002", "benchmarks": [{"metric": "=cmd|' /C calc'!A0", "value": 1.0}]},
                    headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 201, r.text
    doc = client.get("/ledger").json()
    assert "/" not in doc["workspace"] and str(served.server.config.app.state.kwiki.settings.ledger_dir) not in json.dumps(doc)
    # 16: a formula-like value is stored and read back exactly as it was sent (no CSV is written any more)
    cands = {c["id"]: c for c in doc["candidates"]}
    assert cands["c002"]["benchmarks"][0]["metric"] == "=cmd|' /C calc'!A0"
