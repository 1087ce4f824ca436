"""Issue 18 points 1 and 5: the CLI as a thin client of a running server, and links that resolve everywhere.

The server is the real app on a loopback port (``server``, over the corpus index); each command runs as a user runs
it, the console script in a fresh process.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys

import httpx
import pytest

from ..conftest import REPO, free_port

pytestmark = pytest.mark.slow

FIXTURES = REPO / "profiling" / "fixtures" / "verify"


def kwiki(*args: str, cwd, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    exe = shutil.which("kwiki")
    assert exe, "the kwiki console script is not installed"
    # KWIKI_PORT points at a port nothing listens on unless a test says otherwise: no server of the machine answers
    base = {k: v for k, v in os.environ.items() if not k.startswith("KWIKI_")} | {"KWIKI_PORT": str(free_port())}
    return subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=base | (env or {}))


def _ids(doc: dict) -> list[str]:
    return [h["id"] for h in doc["hits"]]


def test_search_over_http_has_the_hits_of_get_search(tmp_path, server, corpus_index):
    q = ["only 8 of my 132 SMs are busy at the end", "-k", "5", "--type", "pattern", "--arch", "H100"]
    api = httpx.get(f"{server.url}/search", params={"q": q[0], "k": 5, "type": "pattern", "architecture": "H100"},
                    timeout=60).json()
    # named: answered by the server although the local index does not exist
    named = kwiki("search", *q, "--json", "--url", server.url, "--index-dir", str(tmp_path / "none"), cwd=tmp_path)
    assert named.returncode == 0, named.stderr
    # found: the server at KWIKI_HOST:KWIKI_PORT serves the local index's build
    found = kwiki("search", *q, "--json", "--index-dir", str(corpus_index), cwd=tmp_path,
                  env={"KWIKI_PORT": str(server.port)})
    assert found.returncode == 0 and "note:" not in found.stderr, found.stderr
    local = kwiki("search", *q, "--json", "--local", "--index-dir", str(corpus_index), cwd=tmp_path,
                  env={"KWIKI_PORT": str(server.port)})
    assert _ids(api) and _ids(json.loads(named.stdout)) == _ids(json.loads(found.stdout)) == _ids(api)
    assert _ids(json.loads(local.stdout)) == _ids(api)
    text = kwiki("search", *q, "--url", server.url, cwd=tmp_path)
    text_local = kwiki("search", *q, "--local", "--index-dir", str(corpus_index), cwd=tmp_path)
    assert text.stdout == text_local.stdout and "\n 1. " in text.stdout


def test_a_server_on_another_build_is_not_asked(tmp_path, server, mini_index):
    """The server serves the corpus index; the local index is the mini one: the local answer, and a note why."""
    out = kwiki("search", "tail effect in the last wave", "--json", "--index-dir", str(mini_index), cwd=tmp_path,
                env={"KWIKI_PORT": str(server.port)})
    assert out.returncode == 0, out.stderr
    assert "not the local index's build" in out.stderr and "--url" in out.stderr
    assert all(h["corpus"] == "mini" for h in json.loads(out.stdout)["hits"])


def test_a_named_server_that_does_not_answer_is_exit_2(tmp_path, corpus_index):
    out = kwiki("search", "tail", "--url", f"http://127.0.0.1:{free_port()}", "--index-dir", str(corpus_index),
                cwd=tmp_path)
    assert out.returncode == 2 and "no kwiki server answers at" in out.stderr and "--local" in out.stderr
    bad = kwiki("page", "x", "--url", "ftp://nowhere", cwd=tmp_path)
    assert bad.returncode == 2 and "not a server URL" in bad.stderr


def test_errors_over_http_read_as_in_process(tmp_path, server, corpus_index):
    remote = kwiki("page", "pattern-tail-efect", "--url", server.url, cwd=tmp_path)
    local = kwiki("page", "pattern-tail-efect", "--local", "--index-dir", str(corpus_index), cwd=tmp_path)
    assert remote.returncode == local.returncode == 2
    assert remote.stderr == local.stderr and "did you mean pattern-tail-effect" in local.stderr
    bad = kwiki("search", "tail", "--arch", "zzz", "--url", server.url, cwd=tmp_path)
    assert bad.returncode == 2 and "unknown architecture 'zzz'" in bad.stderr and "sm90" in bad.stderr


LINKS = ["technique-stream-k", "../techniques/stream-k.md", "techniques/stream-k.md", "wiki/techniques/stream-k",
         "./stream-k.md#when-it-helps", str(REPO / "corpus" / "wiki" / "techniques" / "stream-k.md")]


@pytest.mark.parametrize("link", LINKS)
def test_page_links_resolve_on_every_surface(tmp_path, server, corpus_index, http, link):
    from kwiki.service.cli_remote import page_path

    assert http.get(page_path(link)).json()["id"] == "technique-stream-k"
    for how in (["--url", server.url], ["--local", "--index-dir", str(corpus_index)]):
        out = kwiki("page", link, "--json", *how, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["id"] == "technique-stream-k"


def test_page_paths_with_plain_slashes_resolve_over_http(http):
    assert http.get("/pages/wiki/techniques/stream-k").json()["id"] == "technique-stream-k"
    err = http.get("/pages/pattern-tail-efect").json()["error"]
    assert err["code"] == "page_not_found" and "did you mean pattern-tail-effect" in err["hint"]


def test_diagnose_over_http_is_the_local_diagnosis(tmp_path, server, corpus_index):
    for n in ("tail_effect-bad", "tail_effect-fixed"):
        (tmp_path / f"{n}.raw.csv").write_bytes(gzip.decompress((FIXTURES / f"{n}.raw.csv.gz").read_bytes()))
    args = ["diagnose", str(tmp_path / "tail_effect-fixed.raw.csv"), "--baseline", str(tmp_path / "tail_effect-bad.raw.csv")]
    remote = kwiki(*args, "--url", server.url, cwd=tmp_path)
    local = kwiki(*args, "--local", "--index-dir", str(corpus_index), cwd=tmp_path)
    assert remote.returncode == local.returncode == 0, remote.stderr + local.stderr
    assert remote.stdout == local.stdout and "improved" in remote.stdout
    one = ["diagnose", str(tmp_path / "tail_effect-bad.raw.csv"), "--json"]
    doc = json.loads(kwiki(*one, "--url", server.url, cwd=tmp_path).stdout)
    mine = json.loads(kwiki(*one, "--local", "--index-dir", str(corpus_index), cwd=tmp_path).stdout)
    assert [s["signal"] for d in doc["launches"] for s in d["signals"]] == [s["signal"] for d in mine["launches"] for s in d["signals"]]
    assert [p["id"] for d in doc["launches"] for s in d["signals"] for p in s["pages"]] == \
        [p["id"] for d in mine["launches"] for s in d["signals"] for p in s["pages"]]


def test_signals_and_ledger_search_over_http(tmp_path, server, corpus_index):
    remote = kwiki("signals", "--json", "--url", server.url, cwd=tmp_path)
    local = kwiki("signals", "--json", "--local", cwd=tmp_path)
    assert remote.returncode == 0 and remote.stdout == local.stdout
    tiers = kwiki("ledger", "search", "tail effect", "--json", "--url", server.url, cwd=tmp_path)
    assert tiers.returncode == 0, tiers.stderr
    assert json.loads(tiers.stdout)["pages"]["hits"]


#: Each CLI path in a fresh interpreter: what it loaded. FastAPI never; the client paths no search engine.
PROBE = """
import json, sys
from typer.testing import CliRunner
from kwiki.service.cli import app
r = CliRunner().invoke(app, sys.argv[1:])
heavy = ["fastapi", "starlette", "kwiki.index.search", "kwiki.index.bm25", "onnxruntime", "lancedb", "tantivy", "torch"]
print(json.dumps({"exit": r.exit_code, "output": r.output[-500:], "loaded": [m for m in heavy if m in sys.modules]}))
"""


def _probe(*args: str, port: int) -> dict:
    env = {"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "KWIKI_PORT": str(port)}
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_cli_paths_load_no_fastapi_and_the_client_paths_no_index(tmp_path, server, corpus_index):
    idx = ["--index-dir", str(corpus_index)]
    export = tmp_path / "bad.raw.csv"
    export.write_bytes(gzip.decompress((FIXTURES / "tail_effect-bad.raw.csv.gz").read_bytes()))
    client_paths = [["search", "long scoreboard", "-k", "3", *idx], ["page", "../patterns/tail-effect.md", *idx],
                    ["signals", "--url", server.url], ["diagnose", str(export), *idx], ["ledger", "search", "tail effect", *idx]]
    for args in client_paths:
        got = _probe(*args, port=server.port)
        assert got["exit"] == 0, (args, got["output"])
        assert got["loaded"] == [], (args, got["loaded"])  # asked the server: nothing of the engine was loaded
    page = _probe("page", "pattern-tail-effect", "--local", *idx, port=server.port)
    assert page["exit"] == 0 and page["loaded"] == [], page  # in process: the pages only, no model or vectors
    search = _probe("search", "tail effect", "--local", *idx, port=server.port)
    assert search["exit"] == 0 and "fastapi" not in search["loaded"] and "kwiki.index.search" in search["loaded"]


def test_the_page_store_answers_every_page_as_the_searcher_does(searcher, corpus_index):
    """``kwiki page`` in process reads the pages alone; each answer is the one the whole index gives."""
    from kwiki.index.pages import PageStore

    store = PageStore.open(corpus_index)
    assert store.manifest == searcher.manifest and set(store.pages) == set(searcher.pages)
    for key in store.pages:
        assert store.page(key) == searcher.page(key)
