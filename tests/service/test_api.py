"""The HTTP API on a real uvicorn server over a real index."""

import pytest

pytestmark = pytest.mark.slow

HOSTILE = ['"unbalanced', "sm_80:", "-foo", "http://x.y", "a AND", "(x", "", "x" * 10_000, "%00", "' OR 1=1 --"]


def test_health_reports_the_manifest(http):
    body = http.get("/health").json()
    assert body["status"] == "ok" and body["index"]["counts"]["pages"] > 100
    assert body["index"]["corpora"] == ["kwiki"] and body["index"]["build_id"]
    # an open endpoint: corpus names and the build id, no file-system paths
    assert "index_path" not in body and not any(str(v).startswith("/") for v in body["index"].values())


def test_get_search_long_scoreboard(http):
    r = http.get("/search", params={"q": "long scoreboard", "k": 5})
    assert r.status_code == 200
    hits = r.json()["hits"]
    assert hits[0]["page_id"] in {"ncu-stall-long-scoreboard", "pattern-long-scoreboard-latency"}
    assert not any("longcat" in h["title"].lower() or "long context" in h["title"].lower() for h in hits)


def test_post_search_equals_get(http):
    a = http.get("/search", params={"q": "bank conflicts", "k": 5}).json()
    b = http.post("/search", json={"q": "bank conflicts", "k": 5}).json()
    assert [h["id"] for h in a["hits"]] == [h["id"] for h in b["hits"]]


@pytest.mark.parametrize("q", HOSTILE)
def test_hostile_queries_are_200_or_400(http, q):
    r = http.get("/search", params={"q": q})
    assert r.status_code in (200, 400), r.text
    if r.status_code == 400:
        assert r.json()["error"]["code"] in {"bad_request", "query_too_long"}


@pytest.mark.parametrize("params", [{"q": "x", "k": 0}, {"q": "x", "k": 10**9}, {"q": "x", "k": "abc"},
                                    {"q": "x", "type": "bogus"}, {"q": "x", "architecture": "sm_1234"}])
def test_bad_parameters_are_400_with_a_stable_code(http, params):
    r = http.get("/search", params=params)
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "bad_request" and r.json()["error"]["message"]


def test_pages_and_404s(http):
    r = http.get("/pages/pattern-tail-effect")
    assert r.status_code == 200 and r.json()["sources"]
    for bad in ["nope", "..%2F..%2Fetc%2Fpasswd", "%2Fetc%2Fpasswd", "../manifest.json"]:
        r = http.get(f"/pages/{bad}")
        assert r.status_code == 404, bad
        assert r.json()["error"]["code"] in {"page_not_found", "not_found"}


def test_openapi_docs(http):
    assert http.get("/docs").status_code == 200
    assert "/search" in http.get("/openapi.json").json()["paths"]


def test_reload_needs_the_token(http):
    assert http.post("/admin/reload").status_code == 401
    r = http.post("/admin/reload", headers={"Authorization": "Bearer test-token"})
    assert r.status_code == 200 and r.json()["status"] == "ok"


def test_no_index_is_503_with_a_hint(tmp_path):
    import httpx

    from kwiki.service.app import create_app
    from kwiki.settings import Settings

    from ..conftest import ServerThread

    with ServerThread(create_app(Settings(index_dir=tmp_path / "none"))) as srv:
        r = httpx.get(f"{srv.url}/search", params={"q": "x"})
        assert r.status_code == 503
        assert "kwiki ingest" in r.json()["error"]["hint"]
