"""Issue 20, Medium 3-5 and Low 18-19: hostile corpus files are skipped and reported, the ingest always finishes.

Each test writes the hostile file into a small temporary corpus and reads it with the real ``read_corpora``
(what ``kwiki ingest`` and ``kwiki validate`` run); bounds are counts and sizes, never time.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kwiki.index.build import source_hash
from kwiki.ingest import chunking
from kwiki.ingest.corpus import MAX_CHUNKS_PER_PAGE, MAX_FOLDER_DEPTH, CorpusRoot, read_corpora
from kwiki.ingest.frontmatter import MAX_COMPOSED_NODES, FrontmatterError, parse_yaml
from kwiki.ingest.validate import validate_corpus

GOOD = "---\nid: pattern-good\ntitle: Good\n---\n\n# Good\n\nA good page about tail effects on the last wave.\n"


def _corpus(tmp_path: Path, name: str = "c") -> Path:
    root = tmp_path / name
    (root / "wiki" / "patterns").mkdir(parents=True)
    (root / "wiki" / "patterns" / "good.md").write_text(GOOD)
    return root


def _read(root: Path, name: str = "c"):
    result = read_corpora([CorpusRoot(name, root)])
    result.report.model_dump_json()  # the report is stored as JSON: every path in it must serialize
    return result


def _reasons(result) -> dict[str, str]:
    return {p.path: p.reason for p in [*result.report.skipped, *result.report.duplicates, *result.report.warnings]}


def test_file_name_that_is_not_utf8_is_one_skipped_entry(tmp_path):
    root = _corpus(tmp_path)
    bad = os.path.join(os.fsencode(root / "wiki" / "patterns"), b"bad-\xff\xfe.md")
    with open(bad, "wb") as fh:
        fh.write(GOOD.replace("pattern-good", "pattern-bad").encode())
    result = _read(root)
    assert [p.id for p in result.pages] == ["pattern-good"]
    assert _reasons(result) == {"wiki/patterns/bad-\\xff\\xfe.md": "file name is not valid UTF-8"}
    source_hash([CorpusRoot("c", root)])  # UnicodeEncodeError here stopped the whole ingest


def test_folders_nested_1100_deep_are_one_skipped_entry(tmp_path):
    root = _corpus(tmp_path)
    deep = root / "wiki" / "patterns"
    for _ in range(1100):  # one level at a time: Path.mkdir(parents=True) itself recurses
        deep = deep / "d"
        os.mkdir(deep)
    (deep / "deep.md").write_text(GOOD.replace("pattern-good", "pattern-deep"))
    try:
        result = _read(root)
        assert [p.id for p in result.pages] == ["pattern-good"]
        (path, reason), = _reasons(result).items()
        assert reason == f"folder nested deeper than {MAX_FOLDER_DEPTH} levels; not read"
        assert path.count("/") == MAX_FOLDER_DEPTH + 1  # wiki/ then 32 levels: patterns/ and 31 d/
        source_hash([CorpusRoot("c", root)])  # RecursionError in os.walk before
    finally:  # bottom-up, one level at a time: shutil.rmtree (and pytest's tmp cleanup) recurse too
        (deep / "deep.md").unlink()
        while deep != root / "wiki" / "patterns":
            os.rmdir(deep)
            deep = deep.parent


@pytest.mark.parametrize("name", ["tags.yaml", "aliases.yaml"])
def test_vocabulary_through_a_link_out_of_the_root_is_not_read(tmp_path, name):
    root = _corpus(tmp_path)
    outside = tmp_path / "outside.yaml"
    outside.write_text("architectures: [outsidecanary]\nsm_90: [outsidecanary]\n")
    (root / "data").mkdir()
    (root / "data" / name).symlink_to(outside)
    result = _read(root)
    assert _reasons(result) == {f"data/{name}": "symlink points outside the corpus root"}
    assert "outsidecanary" not in repr(result.vocab)


def test_oversized_vocabulary_is_skipped_by_size(tmp_path):
    root = _corpus(tmp_path)
    (root / "data").mkdir()
    with open(root / "data" / "aliases.yaml", "w") as fh:
        fh.write("a: [b]\n" * 300_000)  # 2.1 MB
    assert "over the 1 MB vocabulary limit" in _reasons(_read(root))["data/aliases.yaml"]


@pytest.mark.parametrize("declared", [
    '"../../etc/passwd"', '"a b c"', '"a\\nb"', '"zero\\u200bwidth"', "x" * 300, '"F:pattern-x"', '"G2:x"', '"-x"',
])
def test_ids_outside_the_grammar_are_refused_at_ingest_and_by_the_validator(tmp_path, declared):
    root = _corpus(tmp_path)
    (root / "wiki" / "patterns" / "hostile.md").write_text(f"---\nid: {declared}\ntitle: Hostile\n---\n\nbody text\n")
    result = _read(root)
    assert [p.id for p in result.pages] == ["pattern-good"]
    assert "id " in _reasons(result)["wiki/patterns/hostile.md"]
    problems = [str(p) for p in validate_corpus(root)]
    assert any(p.startswith("wiki/patterns/hostile.md:") and "skipped: id" in p for p in problems), problems


def test_a_page_cannot_take_over_another_corpus_id(tmp_path):
    """G1's page declaring `G2:x` was served under the key G2's renamed `x` gets; now it is refused."""
    f = _corpus(tmp_path, "F")
    (f / "wiki" / "patterns" / "x.md").write_text("---\nid: pattern-x\ntitle: F's x\n---\n\nreal\n")
    g = _corpus(tmp_path, "G")
    (g / "wiki" / "patterns" / "x.md").write_text("---\nid: pattern-x\ntitle: G's x\n---\n\nreal\n")
    (g / "wiki" / "patterns" / "hijack.md").write_text("---\nid: \"F:pattern-x\"\ntitle: Hijack\n---\n\nfake\n")
    result = read_corpora([CorpusRoot("F", f), CorpusRoot("G", g)])
    keys = {p.key: p.title for p in result.pages}
    assert keys["pattern-x"] == "F's x" and keys["G:pattern-x"] == "G's x" and "F:pattern-x" not in keys
    assert "Hijack" not in keys.values()


def test_dangling_absolute_link_is_called_missing(tmp_path):
    root = _corpus(tmp_path)
    (root / "wiki" / "patterns" / "gone.md").symlink_to("/nonexistent/kwiki/gone.md")
    assert _reasons(_read(root)) == {"wiki/patterns/gone.md": "symlink to a missing file"}


def test_long_plain_yaml_list_is_refused_by_size_not_called_a_bomb():
    with pytest.raises(FrontmatterError, match="over the 256 KiB limit"):
        parse_yaml("- a\n" * 1_200_000)
    with pytest.raises(FrontmatterError, match=f"more than {MAX_COMPOSED_NODES} values$"):
        parse_yaml("- a\n" * (MAX_COMPOSED_NODES + 10))


def test_one_huge_paragraph_is_cut_into_bounded_chunks(tmp_path):
    root = _corpus(tmp_path)
    words = " ".join(["x" * 5000] * 400)  # 2 MB, 400 "words": one paragraph, one chunk before
    (root / "wiki" / "patterns" / "para.md").write_text(f"---\nid: pattern-para\n---\n\n{words}\n")
    result = _read(root)
    chunks = [c for c in result.chunks if c.page_key == "pattern-para"]
    assert len(chunks) > 100 and max(len(c.text) for c in chunks) <= chunking.MAX_CHUNK_CHARS


def test_chunks_per_page_are_capped_and_reported(tmp_path):
    root = _corpus(tmp_path)
    fences = "```\nx = 1\n```\n\n" * (MAX_CHUNKS_PER_PAGE + 50)
    (root / "wiki" / "patterns" / "many.md").write_text(f"---\nid: pattern-many\n---\n\n{fences}")
    result = _read(root)
    assert sum(c.page_key == "pattern-many" for c in result.chunks) == MAX_CHUNKS_PER_PAGE
    assert f"over the {MAX_CHUNKS_PER_PAGE}-chunk page limit" in _reasons(result)["wiki/patterns/many.md"]
