"""Search snippets in Chromium: rendered from the chunk's markdown (links as links, code as code, tables as
tables), never shown as raw markdown syntax, with every link an http(s) URL or a page of the index."""

from __future__ import annotations

import re

import pytest

from .conftest import shot

pytestmark = pytest.mark.slow

#: Queries whose API snippets (GET /search) carry every kind of markdown the corpus writes: links, inline code,
#: code fences, bold and tables (the test checks they do, so it cannot pass on plain snippets).
QUERIES = ("coalesced loads float4", "ncu --set roofline charts", "UncoalescedGlobalAccess rule", "tail effect fixes")
#: Markdown syntax that must not reach the reader: a link, a fence, emphasis, a heading, a table's rule row.
RAW = {"link": r"\]\(", "fence": r"```|~~~", "inline code": r"`", "bold": r"\*\*|__\w", "heading": r"(^|\n)#{1,6} ",
       "table": r"\|\s*:?-{3,}"}


def test_snippets_show_no_markdown_syntax(page, server, http):
    seen = {"a": 0, "code": 0, "pre": 0, "table": 0}
    api_syntax: set[str] = set()
    for q in QUERIES:
        api = http.get("/search", params={"q": q, "k": 10}).json()
        api_syntax |= {name for h in api["hits"] for name, pat in RAW.items() if re.search(pat, h["snippet"])}
        page.goto(server.url + "/?q=" + q.replace(" ", "+"))
        page.wait_for_selector("li.hit")
        cards = page.locator("li.hit")
        assert [cards.nth(i).get_attribute("data-id") for i in range(cards.count())] == [h["id"] for h in api["hits"]]
        # The text a reader sees, code left out (code may hold `**` or `|` of its own): no markdown syntax in it.
        texts = page.locator(".snippet").evaluate_all(
            "els => els.map(e => { const c = e.cloneNode(true); c.querySelectorAll('code, pre').forEach(x => x.remove());"
            " return c.innerText; })")
        for text in texts:
            for name, pat in RAW.items():
                assert not re.search(pat, text), f"{name} syntax in the snippet for {q!r}: {text[:300]!r}"
        for tag in seen:
            seen[tag] += page.locator(f".snippet {tag}").count()
        hrefs = page.locator(".snippet a").evaluate_all("els => els.map(e => e.getAttribute('href'))")
        assert all(re.match(r"(https?://|/ui/page/)", h) for h in hrefs), hrefs
        for internal in {h for h in hrefs if h.startswith("/ui/page/")}:
            assert http.get(internal).status_code == 200
    assert {"link", "inline code", "fence", "bold", "table"} <= api_syntax  # the API's snippets do carry markdown
    assert all(seen.values()), seen  # and the page shows it as links, code, code blocks and tables
    shot(page, "snippets.png")
