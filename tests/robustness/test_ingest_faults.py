"""Ingest faults: a hostile corpus is ingested to the end, every bad file is reported with its
reason, no link out of the root is followed, and the index serves the good pages."""

from __future__ import annotations

import json

import pytest

from kwiki.ingest.corpus import CorpusRoot, read_corpora
from kwiki.ingest.frontmatter import FrontmatterError, parse_yaml, split_frontmatter

from .conftest import CANARY, EXPECTED_PROBLEMS, GOOD_PAGES, run_cli


def _problems(report) -> dict[str, str]:
    return {p.path: p.reason for p in report.skipped + report.duplicates}


def test_every_bad_file_is_reported_with_its_reason(hostile_corpus):
    result = read_corpora([CorpusRoot("hostile", hostile_corpus)])
    problems = _problems(result.report)
    for path, fragment in EXPECTED_PROBLEMS.items():
        assert path in problems, f"{path} not reported; report: {problems}"
        assert fragment in problems[path], f"{path}: {problems[path]!r} does not say {fragment!r}"
    assert set(problems) == set(EXPECTED_PROBLEMS), "a file was reported that is not in the fixture's list"


def test_only_the_good_pages_are_kept_and_nothing_from_outside(hostile_corpus):
    result = read_corpora([CorpusRoot("hostile", hostile_corpus)])
    assert sorted(p.key for p in result.pages) == sorted(GOOD_PAGES)
    # the first page with a colliding id wins; the later one never overwrites it
    tail = next(p for p in result.pages if p.key == "pattern-hostile-tail")
    assert tail.path == "wiki/patterns/good-tail.md"
    everything = json.dumps([p.model_dump() for p in result.pages]) + json.dumps([c.text for c in result.chunks])
    assert CANARY not in everything and "zanzibarcollision" not in everything
    assert result.artifacts == []  # the linked-out artifacts folder was not read


def test_odd_yaml_types_stay_storable(hostile_corpus):
    result = read_corpora([CorpusRoot("hostile", hostile_corpus)])
    page = next(p for p in result.pages if p.key == "pattern-hostile-odd-types")
    assert page.title == "42"
    assert page.meta["blob"] == "gIGC/w==" and sorted(page.meta["kinds"]) == ["a", "b"]
    json.loads(page.model_dump_json())  # what the index writes must be valid JSON


def test_frontmatter_only_page_gets_a_chunk_from_its_fields(hostile_corpus):
    result = read_corpora([CorpusRoot("hostile", hostile_corpus)])
    chunks = [c for c in result.chunks if c.page_key == "pattern-hostile-frontmatter-only"]
    assert len(chunks) == 1 and chunks[0].kind == "meta"
    assert "served from their fields" in chunks[0].text


@pytest.mark.parametrize("fanout, levels", [(2, 31), (3, 20), (4, 15)])
def test_alias_fanout_bombs_are_refused_quickly(fanout, levels):
    """Few aliases (under MAX_ALIASES) can still stand for fanout**levels values."""
    lines = [f"a0: &a0 [{', '.join(['x'] * fanout)}]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * fanout)}]" for i in range(1, levels + 1)]
    with pytest.raises(FrontmatterError, match="alias-expansion bomb"):
        split_frontmatter("---\n" + "\n".join(lines) + "\n---\nbody")


def test_shared_aliases_below_the_limit_are_kept():
    meta, _, _ = split_frontmatter("---\nbase: &b [sm90, sm100]\narchitectures: *b\nalso: *b\n---\nx")
    assert meta["architectures"] == ["sm90", "sm100"] and meta["also"] == ["sm90", "sm100"]


def test_recursive_anchor_is_refused():
    with pytest.raises(FrontmatterError):
        parse_yaml("a: &a [*a]\n")


@pytest.mark.slow
def test_cli_ingest_of_the_hostile_corpus_finishes_and_serves_the_good_pages(hostile_corpus, tmp_path, embedder):
    """The real ``kwiki ingest`` in a subprocess; then the real index answers for every good page."""
    from kwiki.index.search import Searcher

    index_dir = tmp_path / "index"
    proc = run_cli("ingest", "--corpus", f"hostile={hostile_corpus}", "--index-dir", str(index_dir), "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    reported = {p["path"]: p["reason"] for p in out["report"]["skipped"] + out["report"]["duplicates"]}
    assert set(reported) == set(EXPECTED_PROBLEMS)
    assert out["manifest"]["counts"]["pages"] == len(GOOD_PAGES)

    searcher = Searcher.open(index_dir, embedder=embedder)
    for key, query in GOOD_PAGES.items():
        hits = searcher.search(query, k=3).hits
        assert key in [h.id for h in hits], f"{query!r} did not find {key}: {[h.id for h in hits]}"
        assert searcher.page(key).id == key
    assert searcher.page("pattern-hostile-tail").path == "wiki/patterns/good-tail.md"
    assert not searcher.search(CANARY, k=10).hits or all(CANARY not in h.snippet for h in searcher.search(CANARY, k=10).hits)
    build_files = "".join(f.read_text(errors="replace") for f in searcher.path.glob("*.json*"))
    assert CANARY not in build_files
    # the report travels with the build
    saved = json.loads((searcher.path / "report.json").read_text())
    assert {p["path"] for p in saved["skipped"] + saved["duplicates"]} == set(EXPECTED_PROBLEMS)
