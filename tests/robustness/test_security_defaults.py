"""Security defaults: loopback bind, open reads, token-gated state changes (off without a token),
CORS closed unless configured, and no stack trace in any response."""

from __future__ import annotations

import re

import httpx
import pytest

from ..conftest import ServerThread

#: POST endpoints that only read (they answer a question); everything else that is not GET changes state.
READ_ONLY_POSTS = {"/search", "/diagnose", "/ui/diagnose"}


def test_binds_loopback_unless_told_otherwise(monkeypatch):
    from kwiki.settings import Settings

    monkeypatch.delenv("KWIKI_HOST", raising=False)
    assert Settings().host == "127.0.0.1"
    monkeypatch.setenv("KWIKI_HOST", "0.0.0.0")
    assert Settings().host == "0.0.0.0"  # only when asked


def test_cli_serve_defaults_to_the_settings_host():
    import inspect

    from kwiki.service import cli

    host = inspect.signature(cli.serve).parameters["host"].default
    assert host is None  # None -> Settings().host -> 127.0.0.1


def test_state_changing_defaults_are_off():
    from kwiki.settings import Settings

    s = Settings(_env_file=None)
    assert s.admin_token is None and s.cors_origins == []


@pytest.fixture(scope="module")
def open_server(mini_index):
    """A server as it starts by default: no token, no CORS origins."""
    from kwiki.service.app import create_app
    from kwiki.settings import Settings

    app = create_app(Settings(index_dir=mini_index, admin_token=None, cors_origins=[]))

    @app.get("/__test_boom")
    def boom() -> dict:  # the real app's error handling, reached through a route only this test adds
        raise RuntimeError("secret detail /etc/kwiki-internal-path")

    @app.get("/__test_boom_async")
    async def boom_async() -> dict:
        {}["no-such-key"]

    with ServerThread(app) as srv:
        yield srv, app


def _all_routes(routes, prefix: str = ""):
    """(methods, path) of every route, through included routers (newer FastAPI keeps them nested)."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            ctx = getattr(route, "include_context", None)
            yield from _all_routes(inner.routes, prefix + (getattr(ctx, "prefix", "") or ""))
        elif getattr(route, "methods", None):
            yield set(route.methods), prefix + route.path


def _state_changing_routes(app) -> list[tuple[str, str]]:
    out = []
    for methods, path in _all_routes(app.routes):
        for m in sorted(methods - {"GET", "HEAD", "OPTIONS"}):
            if path not in READ_ONLY_POSTS:
                out.append((m, re.sub(r"\{[^}]+\}", "x", path)))
    return out


@pytest.mark.slow
def test_reads_are_open(open_server):
    srv, _ = open_server
    assert httpx.get(f"{srv.url}/health").status_code == 200
    assert httpx.get(f"{srv.url}/search", params={"q": "tail"}).status_code == 200
    assert httpx.post(f"{srv.url}/search", json={"q": "tail"}).status_code == 200
    assert httpx.get(f"{srv.url}/pages/pattern-mini-tail").status_code == 200


@pytest.mark.slow
def test_every_state_changing_endpoint_is_off_without_a_token(open_server):
    srv, app = open_server
    routes = _state_changing_routes(app)
    assert ("POST", "/admin/reload") in routes
    reads = {path for methods, path in _all_routes(app.routes) if "GET" in methods}
    assert {"/search", "/health", "/pages/{page_id:path}"} <= reads  # the walk sees the app's routes
    for method, path in routes:
        r = httpx.request(method, f"{srv.url}{path}", json={}, headers={"Authorization": "Bearer guess"})
        assert r.status_code == 403, f"{method} {path} answered {r.status_code} without a configured token"
        assert r.json()["error"]["code"] == "forbidden" and "KWIKI_ADMIN_TOKEN" in r.json()["error"]["hint"]


@pytest.mark.slow
def test_state_changing_endpoints_need_the_right_token(mini_index):
    from kwiki.service.app import create_app
    from kwiki.settings import Settings

    with ServerThread(create_app(Settings(index_dir=mini_index, admin_token="s3cret"))) as srv:
        url = f"{srv.url}/admin/reload"
        assert httpx.post(url).json()["error"]["code"] == "unauthorized"
        for header in ("Bearer wrong", "Bearer s3cre", "s3cre", "Basic czNjcmV0", "Bearer s3cret-and-more"):
            r = httpx.post(url, headers={"Authorization": header})
            assert r.status_code == 401, header
        ok = httpx.post(url, headers={"Authorization": "Bearer s3cret"}, timeout=120)
        assert ok.status_code == 200 and ok.json()["status"] == "ok"


@pytest.mark.slow
def test_cors_is_closed_by_default(open_server):
    srv, _ = open_server
    origin = {"Origin": "https://evil.example"}
    r = httpx.get(f"{srv.url}/search", params={"q": "tail"}, headers=origin)
    assert "access-control-allow-origin" not in r.headers
    pre = httpx.options(f"{srv.url}/search", headers={**origin, "Access-Control-Request-Method": "POST"})
    assert "access-control-allow-origin" not in pre.headers


@pytest.mark.slow
def test_cors_opens_only_for_configured_origins(mini_index):
    from kwiki.service.app import create_app
    from kwiki.settings import Settings

    app = create_app(Settings(index_dir=mini_index, cors_origins=["https://ok.example"]))
    with ServerThread(app) as srv:
        good = httpx.get(f"{srv.url}/health", headers={"Origin": "https://ok.example"})
        assert good.headers.get("access-control-allow-origin") == "https://ok.example"
        bad = httpx.get(f"{srv.url}/health", headers={"Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in bad.headers


@pytest.mark.slow
@pytest.mark.parametrize("path", ["/__test_boom", "/__test_boom_async"])
def test_internal_errors_carry_no_stack_trace(open_server, path):
    srv, _ = open_server
    r = httpx.get(f"{srv.url}{path}")
    assert r.status_code == 500
    assert r.json() == {"error": {"code": "internal", "message": "internal error"}}
    for leak in ("Traceback", "RuntimeError", "KeyError", "secret detail", "/etc/kwiki-internal-path", ".py"):
        assert leak not in r.text


@pytest.mark.slow
def test_client_errors_carry_no_stack_trace(open_server):
    srv, _ = open_server
    for r in (
        httpx.get(f"{srv.url}/search", params={"q": "x", "k": "NaN"}),
        httpx.post(f"{srv.url}/search", content=b"\xff\xfe", headers={"content-type": "application/json"}),
        httpx.get(f"{srv.url}/nope"),
        httpx.delete(f"{srv.url}/search"),
    ):
        assert 400 <= r.status_code < 500 and "error" in r.json()
        assert "Traceback" not in r.text and 'File "' not in r.text
