"""Reload without downtime: clients querying without pause see no failed request while the
index is rebuilt and the server switches to it (POST /admin/reload)."""

from __future__ import annotations

import shutil
import threading
import time
from collections import Counter

import httpx
import pytest

from kwiki.index.build import build_index
from kwiki.ingest.corpus import CorpusRoot

from ..conftest import DATA, ServerThread

pytestmark = pytest.mark.slow

TOKEN = "reload-test-token"
QUERIES = ["only a few SMs are busy at the end", "tensor memory", "tail effect", "TMEM allocation", "persistent kernel"]


def test_queries_never_fail_across_rebuilds_and_reloads(tmp_path, embedder, embed_cache):
    from kwiki.service.app import create_app
    from kwiki.settings import Settings

    corpus = tmp_path / "corpus"
    shutil.copytree(DATA / "mini", corpus)
    index_dir = tmp_path / "index"
    first = build_index(index_dir, [CorpusRoot("mini", corpus)], embedder=embedder, cache_dir=embed_cache)
    app = create_app(Settings(index_dir=index_dir, admin_token=TOKEN))
    app.state.kwiki.embedder = embedder  # share the session's model instead of loading a second copy

    stop = threading.Event()
    failures: list[str] = []
    seen: list[tuple[float, float, str]] = []  # (sent, answered, build id)
    lock = threading.Lock()

    def client_loop(n: int, url: str) -> None:
        with httpx.Client(base_url=url, timeout=60) as c:
            i = n
            while not stop.is_set():
                i += 1
                sent = time.monotonic()
                try:
                    if i % 4 == 0:
                        r = c.get("/pages/pattern-mini-tail")
                        ok = r.status_code == 200 and r.json()["id"] == "pattern-mini-tail"
                        build = None
                    else:
                        r = c.get("/search", params={"q": QUERIES[i % len(QUERIES)], "k": 5})
                        ok = r.status_code == 200 and bool(r.json()["hits"])
                        build = r.json()["index"]["build_id"] if ok else None
                except httpx.HTTPError as exc:
                    with lock:
                        failures.append(f"{type(exc).__name__}: {exc}")
                    continue
                with lock:
                    if not ok:
                        failures.append(f"{r.status_code}: {r.text[:200]}")
                    elif build:
                        seen.append((sent, time.monotonic(), build))

    builds = [first.manifest.build_id]
    reloaded_at: list[float] = []
    with ServerThread(app) as srv:
        threads = [threading.Thread(target=client_loop, args=(n, srv.url)) for n in range(4)]
        for t in threads:
            t.start()
        def answered_by(build: str, after: float, n: int = 6) -> None:
            """Wait until ``n`` requests sent after ``after`` were answered by ``build`` (not a fixed sleep: on a
            loaded machine a second may pass without one answer)."""
            deadline = time.monotonic() + 120
            while True:
                with lock:
                    got = sum(1 for sent, _, b in seen if b == build and sent > after)
                if got >= n or failures or time.monotonic() > deadline:
                    return
                time.sleep(0.02)

        try:
            answered_by(builds[0], after=0.0)
            for round_ in range(3):
                # each rebuild changes the corpus, so the new build answers differently
                (corpus / "wiki" / "patterns" / f"added-{round_}.md").write_text(
                    f"---\nid: pattern-added-{round_}\ntitle: Added page {round_}\n---\n\n# Added\n\nTail effect note {round_}.\n")
                built = build_index(index_dir, [CorpusRoot("mini", corpus)], embedder=embedder, cache_dir=embed_cache)
                builds.append(built.manifest.build_id)
                r = httpx.post(f"{srv.url}/admin/reload", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120)
                assert r.status_code == 200 and r.json()["index"]["build_id"] == built.manifest.build_id
                reloaded_at.append(time.monotonic())
                answered_by(built.manifest.build_id, after=reloaded_at[-1])
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=60)

    assert not failures, f"{len(failures)} failed requests during reloads, e.g. {failures[:3]}"
    served = Counter(b for _, _, b in seen)
    assert set(served) == set(builds), f"every build should have answered: {served}"
    # a request sent after a reload returned is answered by that build or a newer one
    for n, t in enumerate(reloaded_at, 1):
        later = {b for sent, _, b in seen if sent > t}
        assert later <= set(builds[n:]), f"old build answered after reload {n}: {later}"
    assert len(seen) > 20
