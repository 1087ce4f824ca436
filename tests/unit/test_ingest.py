from kwiki.ingest.corpus import CorpusRoot, read_corpora

from ..conftest import DATA


def _mini():
    return read_corpora([CorpusRoot("mini", DATA / "mini")])


def test_mini_corpus_pages_types_and_report():
    r = _mini()
    by_id = {p.id: p for p in r.pages}
    assert by_id["pattern-mini-tail"].type == "pattern"
    assert by_id["hw-mini-tmem"].type == "hardware"
    assert by_id["doc-mini-guide"].type == "source-doc"
    assert by_id["exp-mini-1"].type == "source-experience"  # unknown folder type kept
    assert by_id["pattern-mini-tail"].meta["custom_field"] == "kept"
    assert by_id["hw-mini-tmem"].meta["version_sensitive"] == "CUDA 12.8+"
    assert by_id["pattern-mini-tail"].meta["version_sensitive"]["id"] == "vs-1"
    # no frontmatter: id from the path, title from the heading
    assert by_id["sources-prs-demo-pr-7"].title == "No frontmatter here"
    assert all(p.corpus == "mini" for p in r.pages)


def test_duplicates_reported_not_overwritten_and_broken_skipped():
    r = _mini()
    assert [d.path for d in r.report.duplicates] == ["sources/docs/guide.md"] or [
        d.path for d in r.report.duplicates
    ] == ["sources/docs/dup.md"]
    kept = [p for p in r.pages if p.id == "doc-mini-guide"]
    assert len(kept) == 1
    assert any(s.path == "sources/docs/broken.md" and "malformed YAML" in s.reason for s in r.report.skipped)


def test_chunks_carry_provenance_and_headings():
    r = _mini()
    chunks = [c for c in r.chunks if c.page_key == "pattern-mini-tail"]
    assert chunks and all(c.provenance.corpus == "mini" and c.provenance.path == "wiki/patterns/tail.md" for c in chunks)
    assert any(c.heading_path == ["Tail", "What you see"] for c in chunks)
    assert all(c.line_start >= 14 for c in chunks)
    assert not any("hidden comment" in c.text or "img.png" in c.text for c in chunks)


def test_artifacts_are_linked_to_pages():
    r = _mini()
    page = next(p for p in r.pages if p.id == "pattern-mini-tail")
    assert page.artifacts == ["mini:artifacts/demo-bundle"]


def test_same_id_in_two_corpora_gets_a_qualified_key():
    r = read_corpora([CorpusRoot("a", DATA / "mini"), CorpusRoot("b", DATA / "mini")])
    keys = {p.key for p in r.pages if p.id == "pattern-mini-tail"}
    assert keys == {"pattern-mini-tail", "b:pattern-mini-tail"}
    assert r.report.warnings


def test_questions_are_kept_whole_and_bad_items_dropped():
    from kwiki.ingest.corpus import MAX_QUESTIONS, MAX_QUESTION_CHARS, questions_of

    assert questions_of(["why, on B200, is it slow?", " ", None, {"q": 1}, 3]) == ["why, on B200, is it slow?", "3"]
    assert questions_of("one question, with a comma") == ["one question, with a comma"]
    assert questions_of({"not": "a list"}) == [] and questions_of(None) == []
    assert questions_of(["x" * (MAX_QUESTION_CHARS + 1), "short"]) == ["short"]
    assert len(questions_of([f"q{i}" for i in range(100)])) == MAX_QUESTIONS


def test_the_corpus_pages_list_their_questions():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "corpus"
    pages = read_corpora([CorpusRoot("kwiki", root)]).pages
    # every page of our corpus lists the questions it answers (corpus/README.md, "questions:")
    assert pages and all(len(p.questions) >= 5 for p in pages)
