"""The compact form of the MCP answers (``service/compact.py``), on the real corpus index: how much smaller a
10-hit search is than before (``benchmarks/mcp_size.py``), that it loses no hit, source or field with a value,
and the page sections ``get_section`` returns."""

from __future__ import annotations

import importlib.util
import json

import pytest

from kwiki.errors import BadRequest, NotFound
from kwiki.service.compact import compact_search, compact_section, headings, to_json, to_wire

from ..conftest import REPO

pytestmark = pytest.mark.slow

_spec = importlib.util.spec_from_file_location("mcp_size", REPO / "benchmarks" / "mcp_size.py")
assert _spec is not None and _spec.loader is not None
mcp_size = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mcp_size)


@pytest.fixture(scope="module")
def responses(searcher):
    return {q: searcher.search(q, k=10) for q in mcp_size.QUERIES}


def test_ten_hits_cost_at_most_two_thirds_of_the_bytes_they_did(responses):
    total = {"before_text": 0, "after_text": 0, "before_wire": 0, "after_wire": 0}
    for q, resp in responses.items():
        assert len(resp.hits) == 10, q
        s = mcp_size.sizes(resp)
        assert s["after_text"] <= 0.66 * s["before_text"], (q, s)  # measured: 56-60 %
        for key in total:
            total[key] += s[key]
    assert total["after_text"] <= 0.62 * total["before_text"], total
    assert total["after_wire"] <= 0.70 * total["before_wire"], total


def test_compact_keeps_every_hit_source_and_value(responses):
    for resp in responses.values():
        doc = json.loads(to_json(compact_search(resp)))
        assert [h["id"] for h in doc["hits"]] == [h.id for h in resp.hits]
        for mine, full in zip(doc["hits"], resp.hits):
            assert mine.get("sources", []) == [s.id for s in full.sources[:5]]
            for s in full.sources[:5]:
                info = doc["sources"][s.id]
                assert info.get("title") == s.title and info.get("resolved", False) == s.resolved
                assert info.get("url") == (None if s.resolved else s.url)  # a resolved one's URL is on its page
            assert mine.get("matched") == full.why.sentence and mine.get("fix_of") == full.why.fix_of
            assert mine["snippet"] == full.snippet[:320] and abs(mine["score"] - full.score) < 1e-4
        legacy = mcp_size.legacy_document(resp)
        assert sum(v is None for h in legacy["hits"] for v in h.values()) > 0  # what the old form spent bytes on
        assert json.dumps(doc, separators=(",", ":"), ensure_ascii=False) == to_json(compact_search(resp))


def test_to_wire_leaves_out_defaults_only():
    from kwiki.service.compact import CompactCandidate

    c = CompactCandidate(key="gemm/t01", status="candidate", correct=False, metrics={"x": 0.0})
    assert to_wire(c) == {"key": "gemm/t01", "status": "candidate", "correct": False, "metrics": {"x": 0.0}}


def test_a_section_is_one_heading_with_its_subsections(searcher):
    page = searcher.page("pattern-tail-effect")
    titles = [path for _, path, _, _ in headings(page.body)]
    assert ["Candidate techniques"] in titles and ["What you see"] in titles  # the page title is left out
    sec = compact_section(page, "candidate techniques")
    assert sec.heading == "Candidate techniques" and sec.text.startswith("## Candidate techniques")
    body = page.body.split("\n")
    assert sec.text == "\n".join(body[sec.lines[0] - 1:sec.lines[1]]).strip("\n")
    nxt = [path for _, path, start, _ in headings(page.body) if start == sec.lines[1]]
    assert nxt and len(nxt[0]) == 1  # it runs to the next heading of its level
    assert compact_section(page, "Candidate").heading == "Candidate techniques"  # the start of a heading
    with pytest.raises(NotFound) as err:
        compact_section(page, "Zebra crossings")
    assert "What you see" in (err.value.hint or "")
    with pytest.raises(BadRequest):
        compact_section(page, " > ")


def test_an_ambiguous_heading_asks_for_the_path():
    from kwiki.index.results import PageResponse

    body = "# T\n## Fixes\n### Cheap\na\n## Cause\n### Cheap\nb\n"
    page = PageResponse(id="p", page_id="p", title="T", type="pattern", corpus="kwiki", path="p.md", body=body)
    with pytest.raises(BadRequest) as err:
        compact_section(page, "Cheap")
    assert "Fixes > Cheap" in (err.value.hint or "")
    assert compact_section(page, "Cause > Cheap").text == "### Cheap\nb"
    assert compact_section(page, "fixes").text == "## Fixes\n### Cheap\na"
