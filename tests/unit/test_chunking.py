from kwiki.ingest.chunking import MAX_WORDS, split_sections


def test_hash_inside_fence_is_not_a_heading_and_fence_stays_whole():
    body = "# Top\n\nintro\n\n```cuda\n# pragma unroll\n#define X 1\nint a;\n```\n\n## Sub\n\nmore\n"
    parts = split_sections(body, line_offset=1)
    code = [p for p in parts if p.kind == "code"]
    assert len(code) == 1 and "#define X 1" in code[0].text and code[0].text.startswith("```cuda")
    assert code[0].heading_path == ["Top"]
    assert {tuple(p.heading_path) for p in parts} == {("Top",), ("Top", "Sub")}


def test_comments_and_images_dropped():
    parts = split_sections("# A\n\ntext <!-- secret --> ![img](x.png) end\n\n<!-- block comment -->\n")
    text = " ".join(p.text for p in parts)
    assert "secret" not in text and "x.png" not in text and "block comment" not in text
    assert "text" in text and "end" in text


def test_line_ranges_point_into_the_file():
    filler = " ".join(["w"] * 100)
    body = f"intro {filler}\n\n# H\n\nsecond para {filler}\n"
    parts = split_sections(body, line_offset=10)
    assert parts[0].line_start == 10 and parts[0].line_end == 10
    assert parts[-1].line_start == 14 and "second para" in parts[-1].text


def test_long_sections_split_on_paragraphs_to_fit_the_model():
    para = " ".join(["word"] * 60)
    body = "# Long\n\n" + "\n\n".join(f"{para} p{i}" for i in range(10))
    parts = split_sections(body)
    assert len(parts) >= 4
    assert all(len(p.text.split()) <= MAX_WORDS for p in parts)
    assert all(p.heading_path == ["Long"] for p in parts)


def test_huge_single_paragraph_is_split():
    body = "# Big\n\n" + ". ".join(["sentence with five words"] * 2000)
    parts = split_sections(body)
    assert len(parts) > 10 and all(len(p.text.split()) <= MAX_WORDS for p in parts)


def test_small_sections_are_packed():
    body = "## Summary\n\nfixes a bug\n\n## Problem\n\nslow kernel\n\n## Changed Files\n\n- a.cu\n"
    parts = split_sections(body)
    assert len(parts) == 1 and "Problem: slow kernel" in parts[0].text
