import pytest

from kwiki.ingest.frontmatter import FrontmatterError, as_list, split_frontmatter


def test_dates_quoted_and_unquoted_become_iso_strings():
    meta, _, _ = split_frontmatter("---\ndate: 2025-08-20\nretrieved_at: '2026-05-20'\n---\nx")
    assert meta["date"] == "2025-08-20"
    assert meta["retrieved_at"] == "2026-05-20"


def test_flow_and_block_lists_and_folded_scalars():
    text = "---\ntags: [a, b]\narch:\n  - sm90\n  - sm100\ndesc: >\n  one\n  two\n---\nbody"
    meta, body, line = split_frontmatter(text)
    assert as_list(meta["tags"]) == ["a", "b"]
    assert as_list(meta["arch"]) == ["sm90", "sm100"]
    assert meta["desc"].strip() == "one two"
    assert body == "body" and line == 10


def test_title_with_colon_and_unknown_fields_kept():
    meta, _, _ = split_frontmatter('---\ntitle: "Tail: last wave"\nweird: {a: 1}\n---\n')
    assert meta["title"] == "Tail: last wave"
    assert meta["weird"] == {"a": 1}


def test_no_frontmatter_gives_empty_mapping():
    meta, body, line = split_frontmatter("# Title\ntext")
    assert meta == {} and body.startswith("# Title") and line == 1


BOMB = "---\nl0: &l0 [lol, lol]\n" + "".join(
    f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 10)
) + "---\n"


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("---\n- a\n- b\n---\n", "not a mapping"),
        ("---\ntitle: [unclosed\n---\n", "malformed YAML"),
        ("---\nid: x\n", "never closed"),
        (BOMB, "alias"),
        ("---\na: " + "[" * 200 + "]" * 200 + "\n---\n", "nested"),
    ],
)
def test_bad_headers_raise_a_clear_error(text, fragment):
    with pytest.raises(FrontmatterError, match=fragment):
        split_frontmatter(text)


def test_as_list_normalizes_scalars_and_none():
    assert as_list(None) == []
    assert as_list("a, b") == ["a", "b"]
    assert as_list([1, None, "x"]) == ["1", "x"]
