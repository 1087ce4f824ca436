"""/docs in Chromium with every request off the server refused: Swagger UI loads from the package
(fastapi-offline), so the API docs render on a machine with no network."""

from __future__ import annotations

import pytest

from .conftest import shot

pytestmark = pytest.mark.slow


@pytest.fixture()
def offline(page, server):
    """The page, with any request to another host than the server aborted and recorded."""
    refused: list[str] = []

    def route(r):
        if r.request.url.startswith(server.url + "/"):
            r.continue_()
        else:
            refused.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.refused = refused
    return page


def test_docs_render_every_operation_offline(offline, server, http):
    spec = http.get("/openapi.json").json()
    operations = {(method.upper(), path) for path, item in spec["paths"].items() for method in item}
    offline.goto(server.url + "/docs")
    offline.wait_for_selector(".opblock")
    shown = set(tuple(x) for x in offline.locator(".opblock").evaluate_all(
        "els => els.map(e => [e.querySelector('.opblock-summary-method').innerText.trim(), "
        "e.querySelector('.opblock-summary-path').dataset.path])"))
    assert shown == operations and len(operations) >= 8
    assert offline.refused == []  # nothing was asked of another host
    shot(offline, "docs-offline.png")


def test_docs_page_names_only_local_assets(http):
    import re

    html = http.get("/docs").text
    urls = re.findall(r'(?:src|href)="([^"]+)"', html) + re.findall(r"url: '([^']+)'", html)
    assert urls and all(u.startswith("/") for u in urls), urls
    assert http.get("/ui/docs-assets/swagger-ui-bundle.js").status_code == 200
    assert http.get("/ui/docs-assets/" + "a" * 5000).status_code == 404
    assert http.get("/redoc").status_code == 404  # ReDoc fetched its logo from the network: not served
