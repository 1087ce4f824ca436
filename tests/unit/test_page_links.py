"""Issue 18 point 5: a page asked for by its id or by any link to its file, and "did you mean" for the rest."""

from __future__ import annotations

import pytest

from kwiki.index.pages import lookup, nearest, not_found

PATHS = {
    "technique-stream-k": "wiki/techniques/stream-k.md",
    "kernelwiki:technique-stream-k": "wiki/techniques/stream-k.md",  # the same page in a second corpus
    "pattern-tail-effect": "wiki/patterns/tail-effect.md",
    "doc-stream-k-paper": "sources/docs/stream-k.md",
}


@pytest.mark.parametrize("link, key", [
    ("technique-stream-k", "technique-stream-k"),
    ("kernelwiki:technique-stream-k", "kernelwiki:technique-stream-k"),  # an exact key wins
    ("../techniques/stream-k.md", "technique-stream-k"),
    ("techniques/stream-k.md", "technique-stream-k"),
    ("wiki/techniques/stream-k", "technique-stream-k"),
    ("/home/me/KernelWiki/wiki/techniques/stream-k.md", "technique-stream-k"),  # a path in a checkout
    ("../../sources/docs/stream-k.md#results", "doc-stream-k-paper"),
    ("./tail-effect.md?x=1", "pattern-tail-effect"),
])
def test_links_resolve_to_their_page(link, key):
    assert lookup(PATHS, link) == key


@pytest.mark.parametrize("link", ["techniques/../patterns/tail-effect.md", "../manifest.json", "/etc/passwd", "", "..",
                                  "wiki/other/stream-k.md", "x" * 5000])
def test_what_is_no_link_to_a_page_resolves_to_nothing(link):
    assert lookup(PATHS, link) is None


def test_a_name_two_files_share_is_no_answer_and_the_hint_names_both():
    assert lookup(PATHS, "stream-k") is None  # techniques/stream-k.md or docs/stream-k.md?
    assert {"technique-stream-k", "doc-stream-k-paper"} <= set(nearest(PATHS, "stream-k"))
    assert lookup(PATHS, "docs/stream-k") == "doc-stream-k-paper"


def test_an_unknown_id_gets_the_nearest_ids():
    assert nearest(PATHS, "pattern-tail-efect")[0] == "pattern-tail-effect"
    assert nearest(PATHS, "../techniques/stream-kk.md")[0] == "technique-stream-k"
    err = not_found(PATHS, "tail-efect")
    assert err.code == "page_not_found" and err.hint.startswith("did you mean pattern-tail-effect")
    assert nearest(PATHS, "zzzzqqqq") == [] and not_found(PATHS, "zzzzqqqq").hint.startswith("use an id")
