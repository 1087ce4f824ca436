"""Issue 20, Medium 6 and 8, Low 10: attacks that need a served index (a two-page corpus, really built)."""

from __future__ import annotations

import shutil

import httpx
import pytest

from kwiki.settings import Settings

from .test_bounded_http import TOKEN, Served

pytestmark = pytest.mark.slow

XSS = """---
id: pattern-xss
title: Hostile links
url: "javascript:alert(document.cookie)"
sources: [src-evil]
---

# Hostile links

Tail effect in the last wave, with a [body link](javascript:alert(1)).
"""
SOURCE = """---
id: src-evil
title: Evil source
url: "  JaVaScRiPt:alert(2)"
---

# Evil source

A source page about waves.
"""
GOOD = """---
id: pattern-good-link
title: Good link
url: https://docs.nvidia.com/cuda/
---

# Good link

Only a few SMs are busy at the end of the kernel.
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory, embedder, embed_cache):
    from kwiki.index.build import build_index
    from kwiki.ingest.corpus import CorpusRoot

    base = tmp_path_factory.mktemp("xss")
    corpus = base / "corpus"
    (corpus / "wiki" / "patterns").mkdir(parents=True)
    (corpus / "sources" / "docs").mkdir(parents=True)
    (corpus / "wiki" / "patterns" / "xss.md").write_text(XSS)
    (corpus / "wiki" / "patterns" / "good.md").write_text(GOOD)
    (corpus / "sources" / "docs" / "evil.md").write_text(SOURCE)
    index = base / "index"
    build_index(index, [CorpusRoot("c", corpus)], embedder=embedder, cache_dir=embed_cache)
    return corpus, index


@pytest.fixture(scope="module")
def served(built):
    _, index = built
    with Served(Settings(index_dir=index, admin_token=TOKEN, ledger_dir=index.parent / "ledger")) as srv:
        yield srv


def test_only_http_urls_become_links(served):
    html = httpx.get(f"{served.url}/ui/page/pattern-xss", timeout=60).text
    assert "Hostile links" in html
    assert "javascript:" not in html.lower().replace("javascript:alert(1)", "")  # the body link stays text
    assert 'href="javascript' not in html.lower() and "href=\"  javascript" not in html.lower()
    good = httpx.get(f"{served.url}/ui/page/pattern-good-link", timeout=60).text
    assert 'href="https://docs.nvidia.com/cuda/"' in good


@pytest.mark.parametrize("field", ["q", "tag"])
def test_lone_surrogate_in_post_search_is_400(served, field):
    body = '{"q": "tail", "%s": %s}' % (field, '"\\ud800"' if field == "q" else '["\\udfff"]')
    r = httpx.post(f"{served.url}/search", content=body, headers={"content-type": "application/json"}, timeout=60)
    assert r.status_code == 400 and r.json()["error"]["code"] == "bad_request", r.text


def test_reload_of_a_damaged_build_is_409_and_the_old_build_serves(built, served):
    from kwiki.index.build import current_build

    _, index = built
    good = current_build(index)
    damaged = good.parent / (good.name + "-damaged")
    shutil.copytree(good, damaged)
    (damaged / "pages.jsonl").write_text('{"key": "truncated')
    link = index / "current"
    target = link.readlink()
    tmp = index / ".current.test"
    tmp.symlink_to(target.parent / damaged.name)
    tmp.replace(link)
    try:
        r = httpx.post(f"{served.url}/admin/reload", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120)
        assert r.status_code == 409 and r.json()["error"]["code"] == "build_damaged", r.text
        assert "Traceback" not in r.text and str(index) not in r.text
        assert httpx.get(f"{served.url}/pages/pattern-xss", timeout=60).status_code == 200  # still the good build
    finally:
        tmp.symlink_to(target)
        tmp.replace(link)


def test_ledger_search_past_its_deadline_is_503_not_500(built):
    """A tiered search that has not finished by the deadline (blocked, not raced against a tiny timeout)."""
    from .test_http_limits import BlockedCall

    _, index = built
    with Served(Settings(index_dir=index, request_timeout_s=0.5, ledger_dir=index.parent / "ledger")) as srv:
        blocked = BlockedCall()
        srv.server.config.app.state.kwiki.tiered_search = blocked
        try:
            r = httpx.get(f"{srv.url}/ledger/search", params={"q": "tail effect in the last wave"}, timeout=60)
        finally:
            blocked.release.set()
        assert blocked.entered.is_set()
        assert r.status_code == 503 and r.json()["error"]["code"] == "timeout", r.text
