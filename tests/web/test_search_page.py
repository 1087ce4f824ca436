"""The search page in a real browser: Debian's chromium, headless, driven by Playwright, against the real
server and index. Screenshots go to test-output/web/."""

from __future__ import annotations

import pytest
import yaml

from ..conftest import DATA
from .conftest import shot as _shot

pytestmark = pytest.mark.slow

TAIL_Q = "most SMs sit idle during the last wave of my GEMM"  # a tail-effect symptom that names no pattern
NCU = DATA / "ncu"
EXPECTED = yaml.safe_load((NCU / "expected.yaml").read_text())


def test_fixes_name_the_pattern_that_lifted_them(page, server, http):
    q = "my bf16 GEMM at N=4224 runs slower than at N=4096"
    page.goto(server.url + "/")
    page.fill("#q", q)
    page.click("#search-button")
    page.wait_for_selector("li.hit")
    api = http.get("/search", params={"q": q, "k": 10}).json()
    fixes = [(i, h["why"]["fix_of"]) for i, h in enumerate(api["hits"]) if h["why"]["fix_of"]]
    assert fixes and page.locator(".fix-of").count() == len(fixes)  # "a fix named by <pattern>", as the API says
    for i, pattern in fixes:
        assert page.locator("li.hit").nth(i).locator(".fix-of a").inner_text() == pattern
    related = [(i, h["why"]["related_to"]) for i, h in enumerate(api["hits"]) if h["why"]["related_to"]]
    assert page.locator(".related-to").count() == len(related)  # "related to <lead>", kept apart from the fixes
    for i, lead in related:
        assert page.locator("li.hit").nth(i).locator(".related-to a").inner_text() == lead


def test_query_shows_tail_effect_first_and_opens_it(page, server, http):
    page.goto(server.url + "/")
    page.fill("#q", TAIL_Q)
    page.click("#search-button")
    page.wait_for_selector("li.hit")
    cards = page.locator("li.hit")
    first = cards.first
    assert first.get_attribute("data-id") == "pattern-tail-effect"
    # The same answers as GET /search, in the same order.
    api = http.get("/search", params={"q": TAIL_Q, "k": 10}).json()
    assert [cards.nth(i).get_attribute("data-id") for i in range(cards.count())] == [h["id"] for h in api["hits"]]
    assert first.locator(".badge.confidence").inner_text() == api["hits"][0]["confidence"]
    assert first.locator(".badge.type").inner_text() == "pattern"
    assert first.locator(".snippet mark").count() > 0  # query terms highlighted
    assert first.locator(".sources a").count() > 0
    # the sentence that matched, as GET /search names it, on every card whose hit has one (and only there)
    with_sentence = [i for i, h in enumerate(api["hits"]) if h["why"].get("sentence")]
    assert with_sentence
    for i, h in enumerate(api["hits"]):
        card = cards.nth(i).locator(".matched")
        if i in with_sentence:
            assert h["why"]["sentence"] in card.inner_text()
        else:
            assert card.count() == 0 or not card.inner_text().strip()
    _shot(page, "search-tail-effect.png")

    first.locator("a.hit-title").click()
    page.wait_for_selector("#page-title")
    assert "tail effect" in page.inner_text("#page-title").lower()
    sources = page.locator("#sources li")
    assert sources.count() == len(http.get("/pages/pattern-tail-effect").json()["sources"])
    resolved = page.locator("#sources a.source[href^='/ui/page/']")
    assert resolved.count() > 0
    assert page.locator("article.page .body h2").count() > 0  # markdown rendered, not raw
    _shot(page, "page-tail-effect.png")

    resolved.first.click()  # follow a source into the index
    page.wait_for_selector("#page-title")
    assert page.locator("article.page").get_attribute("data-id").startswith(("doc-", "blog-", "paper-", "pr-"))


def test_filter_change_reruns_the_query(page, server):
    page.goto(server.url + "/?q=tensor+memory")
    page.wait_for_selector("li.hit")
    with page.expect_navigation():
        page.select_option("#filter-type", "hardware")  # the page's script submits on change
    assert "type=hardware" in page.url
    types = page.locator("li.hit").evaluate_all("els => els.map(e => e.dataset.type)")
    assert types and set(types) == {"hardware"}


@pytest.mark.parametrize("stem", ["tail_effect-bad", "small_grid-bad"])
def test_upload_an_ncu_csv_shows_the_diagnosis(page, server, stem):
    expected = EXPECTED[stem]["expected_top"]
    page.goto(server.url + "/ui/diagnose")
    page.set_input_files("#ncu-file", str(NCU / f"{stem}.raw.csv"))
    page.click("#diagnose-button")
    page.wait_for_selector("#diagnosis")
    top = page.locator("li.signal").first
    assert top.get_attribute("data-signal") == expected
    assert top.locator(".evidence li").count() > 0
    ranked = page.locator("#ranked-pages li").evaluate_all("els => els.map(e => e.dataset.id)")
    from kwiki.profiling.signals import load_signals

    assert load_signals()[expected].patterns[0] in ranked
    _shot(page, f"diagnose-{stem}.png")


def test_bad_upload_says_what_is_wrong(page, server, tmp_path):
    bad = tmp_path / "notes.csv"
    bad.write_text("this,is\nnot,ncu\n")
    page.goto(server.url + "/ui/diagnose")
    page.set_input_files("#ncu-file", str(bad))
    page.click("#diagnose-button")
    page.wait_for_selector(".error")
    assert "ncu" in page.inner_text(".error").lower() or "nsight" in page.inner_text(".error").lower()
