from kwiki.ingest.validate import validate_corpus

from ..conftest import DATA, REPO


def test_project_corpus_validates_with_zero_errors():
    problems = validate_corpus(REPO / "corpus")
    errors = [str(p) for p in problems if p.level == "error"]
    assert errors == []


def test_validator_reports_file_line_and_reason():
    problems = validate_corpus(DATA / "mini")
    text = [str(p) for p in problems]
    assert any("wiki/patterns/tail.md" in t and "candidate_techniques id 'technique-missing' does not resolve" in t for t in text)
    assert any("sources/docs/broken.md" in t and "malformed YAML" in t for t in text)
    assert any("duplicate id 'doc-mini-guide'" in t for t in text)
    assert all(p.line >= 1 for p in problems)


def test_corpus_minimums():
    wiki = REPO / "corpus" / "wiki"
    counts = {d.name: len(list(d.glob("*.md"))) for d in wiki.iterdir()}
    assert counts["patterns"] >= 30 and counts["ncu"] >= 25 and counts["techniques"] >= 30
    assert counts["hardware"] >= 15 and counts["kernels"] >= 12 and counts["languages"] >= 5 and counts["migration"] >= 4
    assert len(list((REPO / "corpus" / "sources").rglob("*.md"))) >= 60
    assert len(list((REPO / "corpus" / "artifacts").glob("*/PROVENANCE.yaml"))) >= 15


def test_questions_that_cannot_be_used_are_reported(tmp_path):
    import shutil

    root = tmp_path / "c"
    shutil.copytree(DATA / "mini", root)
    page = root / "wiki" / "patterns" / "tail.md"
    text = page.read_text()
    bad = 'questions:\n  - "why do the last CTAs run alone?"\n  - {nested: map}\n  - "' + "x" * 500 + '"\n'
    page.write_text(text.replace("\n---\n", "\n" + bad + "---\n", 1))
    problems = [p for p in validate_corpus(root) if p.path == "wiki/patterns/tail.md" and "questions" in p.message]
    assert len(problems) == 1 and problems[0].level == "warning" and problems[0].line > 1
    assert "2 of 3 questions ignored" in problems[0].message
