"""GET/POST /ledger on a real uvicorn server over the real corpus index and a workspace of the JSONL era (its first
POST imports it into the SQLite file); one test runs the same app on a PostgreSQL ledger."""

from __future__ import annotations

import json
import shutil
import threading

import httpx
import pytest

from tests.conftest import ServerThread

from .conftest import LEDGER

pytestmark = pytest.mark.slow
TOKEN = "ledger-test-token"


@pytest.fixture(scope="module")
def ledger_server(tmp_path_factory, corpus_index, embedder):
    from kwiki.service.app import create_app
    from kwiki.settings import Settings

    ws = tmp_path_factory.mktemp("http-ledger") / "ws"
    shutil.copytree(LEDGER, ws, ignore=shutil.ignore_patterns("*.py"))
    app = create_app(Settings(index_dir=corpus_index, ledger_dir=ws, admin_token=TOKEN))
    app.state.kwiki.embedder = embedder  # the session's model: loaded once for every test
    with ServerThread(app) as srv:
        srv.workspace = ws
        yield srv


@pytest.fixture(scope="module")
def client(ledger_server):
    with httpx.Client(base_url=ledger_server.url, timeout=60) as c:
        yield c


AUTH = {"Authorization": f"Bearer {TOKEN}"}


def test_list_reports_candidates_and_the_malformed_line(client):
    body = client.get("/ledger").json()
    assert body["total"] >= 36
    assert {"transpose/t03", "gemm-bf16/g18"} <= {c["key"] for c in body["candidates"]}
    assert body["problems"][0]["line"] == 21
    rejected = client.get("/ledger", params={"task": "transpose", "status": "rejected"}).json()
    assert {c["id"] for c in rejected["candidates"]} == {"t02", "t04", "t05", "t06", "t08", "t09", "t10", "t13", "t14", "t16"}
    assert client.get("/ledger", params={"status": "bogus"}).status_code == 400


def test_show_one_candidate(client):
    t15 = client.get("/ledger/transpose/t15").json()
    assert t15["status"] == "promoted" and t15["page"] == "cand-transpose-t15"
    assert client.get("/ledger/t16").json()["reviewer"] == "ana"  # unknown fields are kept
    r = client.get("/ledger/nope")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"


def test_applies_to_counts_how_candidates_of_a_technique_fared(client):
    s = client.get("/ledger", params={"applies_to": "technique-shared-memory-padding"}).json()
    assert s["counts"] == {"promoted": 2, "rejected": 1, "candidate": 0}
    assert [c["id"] for c in s["candidates"]] == ["t03", "t11", "t05"]  # promoted first
    p = client.get("/ledger", params={"applies_to": "pattern-shared-memory-bank-conflicts"}).json()
    assert p["counts"] == {"promoted": 2, "rejected": 4, "candidate": 1}
    assert all(c["reason"] for c in p["candidates"] if c["status"] == "rejected")


def test_post_needs_the_token(client):
    doc = {"task": "transpose", "id": "h1", "parent": "t15", "mechanism": "unauthorized"}
    assert client.post("/ledger", json=doc).status_code == 401
    r = client.post("/ledger", json=doc, headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
    assert client.get("/ledger/transpose/h1").status_code == 404


def test_post_appends_durably_and_keeps_unknown_fields(client, ledger_server):
    doc = {"task": "transpose", "id": "h2", "parent": "t15", "mechanism": "tile 32x16 for B200",
           "techniques": ["technique-thread-coarsening"], "status": "rejected", "reason": "slower on B200",
           "author": "agent:http-test", "sweep": {"tiles": [16, 32]}}
    r = client.post("/ledger", json=doc, headers=AUTH)
    assert r.status_code == 201, r.text
    assert r.json()["created_at"] and r.json()["sweep"] == {"tiles": [16, 32]}
    got = client.get("/ledger/transpose/h2").json()
    assert got["status"] == "rejected" and got["author"] == {"kind": "agent", "name": "http-test"}
    from kwiki.ledger import Ledger

    assert Ledger(ledger_server.workspace).get("transpose/h2").model_extra["sweep"] == {"tiles": [16, 32]}  # durable


@pytest.mark.parametrize("body, code", [
    (b"{not json", 400), (b"[1, 2]", 400), (b'{"task": "t", "status": "maybe"}', 400),
    (b'{"id": "x"}', 400), (json.dumps({"task": "t", "id": "big", "notes": "x" * 300_000}).encode(), 413),
])
def test_post_rejects_bad_bodies(client, body, code):
    r = client.post("/ledger", content=body, headers={**AUTH, "content-type": "application/json"})
    assert r.status_code == code and r.json()["error"]["message"]


def test_concurrent_posts_lose_nothing(client):
    errors: list[str] = []

    def writer(name: str) -> None:
        with httpx.Client(base_url=str(client.base_url), timeout=60) as c:
            for i in range(15):
                r = c.post("/ledger", json={"task": "http-race", "mechanism": f"{name} {i}"}, headers=AUTH)
                if r.status_code != 201:
                    errors.append(r.text)

    threads = [threading.Thread(target=writer, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    race = client.get("/ledger", params={"task": "http-race"}).json()["candidates"]
    assert sorted(c["mechanism"] for c in race) == sorted(f"{n} {i}" for n in "ab" for i in range(15))
    assert len({c["id"] for c in race}) == 30


def test_post_is_off_without_a_configured_token(corpus_index, tmp_path):
    from kwiki.service.app import create_app
    from kwiki.settings import Settings

    app = create_app(Settings(index_dir=corpus_index, ledger_dir=tmp_path / "ws", admin_token=None))
    with ServerThread(app) as srv, httpx.Client(base_url=srv.url, timeout=60) as c:
        r = c.post("/ledger", json={"task": "t", "id": "a"}, headers=AUTH)
        assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"
        assert c.get("/ledger").json()["total"] == 0
    assert not (tmp_path / "ws").exists()


def test_ledger_search_returns_pages_then_candidates_with_status(client):
    r = client.get("/ledger/search", params={"q": "bank conflicts in the transpose kernel", "k": 3})
    assert r.status_code == 200, r.text
    tier = r.json()["experience"]["hits"]
    assert tier and all(h["status"] in ("promoted", "rejected", "candidate") for h in tier)
    assert tier[0]["candidate"].startswith("transpose/")
    failed = client.get("/ledger/search", params={"q": "what was already tried and failed", "status": "rejected"}).json()
    assert failed["experience"]["hits"] and {h["status"] for h in failed["experience"]["hits"]} == {"rejected"}


def test_ledger_search_takes_every_search_filter(client):
    """/ledger/search reads the one declared filter set (it used to drop language, confidence and corpus)."""
    q = "bank conflicts in the transpose kernel"
    for name in ("language", "confidence", "corpus"):
        r = client.get("/ledger/search", params={"q": q, name: "no-such-value"})
        if name == "language":  # free text: an unknown language just matches nothing
            assert r.status_code == 200 and r.json()["pages"]["hits"] == [] and r.json()["experience"]["hits"] == []
        else:
            assert r.status_code == 400 and r.json()["error"]["code"] == "bad_request", r.text
    kw = client.get("/ledger/search", params={"q": q, "corpus": "kwiki"}).json()
    assert kw["pages"]["hits"] and {h["corpus"] for h in kw["pages"]["hits"]} == {"kwiki"}
    assert kw["experience"]["hits"] == []  # the candidates are corpus "ledger"
    assert client.get("/ledger/search", params={"q": q, "corpus": "ledger"}).json()["experience"]["hits"]


def test_unknown_parent_or_technique_is_refused_with_a_hint(client):
    r = client.post("/ledger", json={"task": "transpose", "id": "u1", "parent": "t51", "mechanism": "x"}, headers=AUTH)
    assert r.status_code == 400 and r.json()["error"]["code"] == "unknown_reference"
    assert r.json()["error"]["hint"].startswith("nearest: transpose/t")
    r = client.post("/ledger", json={"task": "transpose", "id": "u1", "techniques": ["technique-smem-swizling"]}, headers=AUTH)
    assert r.status_code == 400 and "nearest: technique-smem-swizzling" in r.json()["error"]["hint"]
    assert client.get("/ledger/transpose/u1").status_code == 404


def test_a_posted_candidate_is_searchable_at_once(client):
    q = "register-blocked transpose with warp shuffles instead of shared memory"
    doc = {"task": "transpose", "id": "h3", "parent": "t15", "kernel": "transpose_tiled", "mechanism": q,
           "techniques": ["technique-warp-shuffle-reduction"], "status": "rejected", "reason": "shuffles cost more than the smem"}
    assert client.post("/ledger", json=doc, headers=AUTH).status_code == 201
    exp = client.get("/search", params={"q": q, "k": 3}).json()["experience"]
    assert exp[0]["candidate"] == "transpose/h3" and exp[0]["status"] == "rejected"
    page = client.get("/pages/technique-warp-shuffle-reduction").json()
    assert "transpose/h3" in [c["key"] for c in page["ledger"]["candidates"]]


def test_lineage_attempts_and_status(client):
    lin = client.get("/ledger/lineage/transpose/t11").json()
    assert [a["id"] for a in lin["ancestors"]] == ["t00", "t01", "t03", "t07"]
    assert {"t14", "t15"} <= {r["id"] for r in lin["descendants"]}
    att = client.get("/ledger/attempts", params={"kernel": "transpose_tiled", "technique": "technique-smem-swizzling"}).json()
    assert [c["id"] for c in att["candidates"]][:2] == ["t04", "t16"]
    assert client.post("/ledger/transpose/t14/status", json={"status": "promoted"}).status_code == 401
    r = client.post("/ledger/transpose/t14/status", json={"status": "promoted", "reason": "kept after all"}, headers=AUTH)
    assert r.status_code == 200 and r.json()["status"] == "promoted" and r.json()["reason"] == "kept after all"
    r = client.post("/ledger/transpose/t14/status", json={"status": "maybe"}, headers=AUTH)
    assert r.status_code == 400
    assert client.get("/ledger/lineage/transpose/nope").status_code == 404


def test_the_same_app_on_a_postgresql_ledger(corpus_index, embedder, pg_cluster):
    from kwiki.service.app import create_app
    from kwiki.settings import Settings

    app = create_app(Settings(index_dir=corpus_index, ledger_url=pg_cluster.new_schema(), admin_token=TOKEN))
    app.state.kwiki.embedder = embedder
    with ServerThread(app) as srv, httpx.Client(base_url=srv.url, timeout=60) as c:
        assert c.get("/ledger").json()["backend"] == "postgres"
        doc = {"task": "gemm", "id": "p1", "mechanism": "stream-K for the tail wave", "techniques": ["technique-stream-k"]}
        assert c.post("/ledger", json=doc, headers=AUTH).status_code == 201
        assert c.post("/ledger", json={"task": "gemm", "parent": "p1", "mechanism": "auto id"}, headers=AUTH).json()["id"] == "c001"
        assert c.get("/search", params={"q": "stream-K tail wave"}).json()["experience"][0]["candidate"] == "gemm/p1"
        assert [a["id"] for a in c.get("/ledger/lineage/gemm/c001").json()["ancestors"]] == ["p1"]
        assert c.get("/ledger").json()["workspace"] == "postgresql:postgres"
