"""Query and upload faults: every limit answers with a clear JSON 400/413 (or 503 on time-out),
and /pages/{id} never reads outside the index."""

from __future__ import annotations

import threading

import httpx
import pytest

from ..conftest import ServerThread

pytestmark = pytest.mark.slow

LIMIT = 4096  # bytes; the smallest max_upload_bytes Settings allows is 1024


@pytest.fixture(scope="module")
def small_server(mini_index):
    from kwiki.service.app import create_app
    from kwiki.settings import Settings

    settings = Settings(index_dir=mini_index, max_upload_bytes=LIMIT, max_query_chars=200, max_k=20)
    with ServerThread(create_app(settings)) as srv:
        yield srv


@pytest.fixture(scope="module")
def client(small_server):
    with httpx.Client(base_url=small_server.url, timeout=60) as c:
        yield c


def _error(r: httpx.Response, status: int, code: str) -> dict:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    err = r.json()["error"]
    assert err["code"] == code and err["message"]
    assert "Traceback" not in r.text
    return err


def test_query_length_limit(client):
    err = _error(client.get("/search", params={"q": "x" * 201}), 400, "query_too_long")
    assert "200" in err["message"] and err["hint"]
    assert client.get("/search", params={"q": "tail " * 40}).status_code == 200  # 200 chars is allowed


@pytest.mark.parametrize("k", [0, -1, 21, 10**12])
def test_k_limit(client, k):
    err = _error(client.get("/search", params={"q": "tail", "k": k}), 400, "bad_request")
    assert "1 <= k <= 20" in err["hint"]


@pytest.mark.parametrize("params, fragment", [
    ({"type": "no-such-type"}, "unknown type"),
    ({"corpus": "elsewhere"}, "unknown corpus"),
    ({"confidence": "certain"}, "unknown confidence"),
    ({"architecture": "sm_1234"}, "unknown architecture"),
    ({"tag": "x" * 101}, "too many or too long"),
    ({"tag": [f"t{i}" for i in range(21)]}, "too many or too long"),
])
def test_filter_values_limits(client, params, fragment):
    err = _error(client.get("/search", params={"q": "tail", **params}), 400, "bad_request")
    assert fragment in err["message"] and err["hint"]


def test_post_search_validation_is_400_json(client):
    _error(client.post("/search", json={"k": 3}), 400, "bad_request")  # no q
    _error(client.post("/search", content=b"{not json", headers={"content-type": "application/json"}), 400, "bad_request")


class BlockedCall:
    """An operation of the service core that does not finish until released: a search slower than any deadline,
    whatever the machine's load (a 0.0001 s deadline against a real search raced it, and lost on an idle box)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, *args: object, **kwargs: object) -> None:
        self.entered.set()
        self.release.wait(600)  # released after the answer was checked: what it returns then goes nowhere


def test_request_time_limit(mini_index):
    """The deadline answers 503 ``timeout`` for a search that has not finished, and the server lives on."""
    from kwiki.service.app import create_app
    from kwiki.settings import Settings

    app = create_app(Settings(index_dir=mini_index, request_timeout_s=1.0))
    with ServerThread(app) as srv:
        blocked = BlockedCall()
        app.state.kwiki.search = blocked  # the seam: every surface calls the core's Kwiki.search
        try:
            r = httpx.get(f"{srv.url}/search", params={"q": "only a few SMs are busy at the end"}, timeout=60)
            assert blocked.entered.is_set()
            err = _error(r, 503, "timeout")
            assert "longer than" in err["message"] and err["hint"]
            assert httpx.get(f"{srv.url}/health", timeout=60).status_code == 200  # the server lives on
        finally:
            blocked.release.set()
        del app.state.kwiki.search  # the real search again
        assert httpx.get(f"{srv.url}/search", params={"q": "tail"}, timeout=60).status_code == 200


def test_declared_body_over_the_limit_is_413(client):
    err = _error(client.post("/search", content=b"x" * (LIMIT + 1), headers={"content-type": "application/json"}),
                 413, "payload_too_large")
    assert str(LIMIT + 1) in err["message"] and "KWIKI_MAX_UPLOAD_BYTES" in err["hint"]


def test_streamed_body_over_the_limit_is_413(client):
    """Chunked transfer: no Content-Length, so the guard counts the bytes as they arrive."""
    sent = []

    def chunks():
        for _ in range(64):  # 64 KiB offered, cut off after 4 KiB
            sent.append(1024)
            yield b'{"q": "' + b"a" * 1010 + b'",'

    r = client.post("/search", content=chunks(), headers={"content-type": "application/json"})
    assert "content-length" not in r.request.headers
    _error(r, 413, "payload_too_large")


def test_streamed_multipart_upload_over_the_limit_is_413(client):
    """A file upload to any endpoint (here one that does not exist for uploads) is cut off at the limit."""
    def body():
        yield b"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x.ncu-rep\"\r\n\r\n"
        for _ in range(16):
            yield b"\0" * 1024
        yield b"\r\n--b--\r\n"

    r = client.post("/search", content=body(), headers={"content-type": "multipart/form-data; boundary=b"})
    _error(r, 413, "payload_too_large")


def test_bodies_under_the_limit_still_work(client):
    r = client.post("/search", json={"q": "tail effect " * 10, "k": 3})
    assert r.status_code == 200 and r.json()["hits"]

    def chunks():
        yield b'{"q": "tail effect",'
        yield b' "k": 2}'

    r = client.post("/search", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 200 and len(r.json()["hits"]) <= 2


TRAVERSALS = [
    "../manifest.json", "..%2Fmanifest.json", "%2e%2e/manifest.json", "%2e%2e%2fmanifest.json",
    "%252e%252e%252fmanifest.json", "..%5cmanifest.json", "..\\manifest.json", "/etc/passwd", "%2Fetc%2Fpasswd",
    "//etc/passwd", "....//....//etc/passwd", "..;/manifest.json", "%c0%ae%c0%ae/manifest.json",
    "pattern-mini-tail/../../manifest.json", "pattern-mini-tail%00.json", "manifest.json", "pages.jsonl",
    "builds", "current/manifest.json", "file:///etc/passwd", "~/.ssh/id_rsa", "%ef%bc%8e%ef%bc%8e/manifest.json",
]


@pytest.mark.parametrize("bad", TRAVERSALS)
def test_pages_cannot_read_outside_the_index(client, mini_index, bad):
    # httpx would normalize "../" away; send the raw target so the server sees the trick itself.
    r = client.request("GET", httpx.URL(client.base_url.join("/")).copy_with(raw_path=f"/pages/{bad}".encode()))
    assert r.status_code in (400, 404), r.text
    assert r.json()["error"]["code"] in {"page_not_found", "not_found", "bad_request"}
    text = r.text
    assert "root:" not in text and "schema_version" not in text and "corpus_hash" not in text


def test_pages_serves_only_index_pages(client):
    r = client.get("/pages/pattern-mini-tail")
    assert r.status_code == 200 and r.json()["id"] == "pattern-mini-tail"
