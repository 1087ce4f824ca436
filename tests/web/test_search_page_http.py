"""The search page's HTML over plain HTTP: escaping, errors rendered with their hint, static files."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.slow


def test_empty_page_has_the_form_and_filters(http):
    r = http.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    for name in ("q", "filter-type", "filter-architecture", "filter-confidence", "filter-corpus"):
        assert f'id="{name}"' in r.text
    assert 'value="pattern"' in r.text and 'value="verified"' in r.text


def test_query_text_is_escaped(http):
    r = http.get("/", params={"q": "<script>alert(1)</script> tail effect"})
    assert r.status_code == 200
    assert "<script>alert(1)</script>" not in r.text and "&lt;script&gt;" in r.text


def test_errors_render_with_hint(http):
    r = http.get("/", params={"q": "tail", "type": "no-such-type"})
    assert r.status_code == 400 and 'data-code="bad_request"' in r.text and "one of:" in r.text
    r = http.get("/ui/page/pattern-no-such-page")
    assert r.status_code == 404 and "pattern-tail-effect" in r.text  # the hint names a real id


def test_static_files_only_from_the_folder(http):
    assert http.get("/ui/static/kwiki.css").status_code == 200
    assert http.get("/ui/static/kwiki.js").status_code == 200
    assert http.get("/ui/static/..%2Fweb.py").status_code == 404
    assert http.get("/ui/static/nope.css").status_code == 404


def test_json_api_is_unchanged(http):
    assert http.get("/search", params={"q": "tail effect", "k": 1}).json()["hits"][0]["id"] == "pattern-tail-effect"


def test_pasted_text_is_diagnosed(http):
    r = http.post("/ui/diagnose", data={"text": "The kernel launch execute only 32 blocks, which is less than the GPU's 132 multiprocessors."})
    assert r.status_code == 200 and 'data-signal="small-grid"' in r.text


def test_empty_diagnose_form_says_what_to_do(http):
    r = http.post("/ui/diagnose", data={"text": "  "})
    assert r.status_code == 400 and "ncu --page raw --csv" in r.text


def test_links_between_wiki_pages_open_in_the_page_view(http):
    import re

    html = http.get("/ui/page/pattern-tail-effect").text
    body = html.split('class="body"', 1)[1].split('id="sources"', 1)[0]
    links = set(re.findall(r'href="(/ui/page/[^"?]+)"', body))
    assert "/ui/page/technique-stream-k" in links  # written as ../techniques/stream-k.md in the page
    assert not re.findall(r'href="[^"]+\.md"', body)
    assert all(http.get(link).status_code == 200 for link in links)


def test_page_view_lists_the_questions_the_page_answers(http):
    html = http.get("/ui/page/pattern-tail-effect").text
    doc = http.get("/pages/pattern-tail-effect").json()
    assert len(doc["questions"]) >= 5
    section = html.split('id="questions"', 1)[1].split("</section>", 1)[0]
    assert section.count("<li>") == len(doc["questions"])


def test_diagnose_page_shows_verdict_timeline_hotspots_and_next_step(http):
    from pathlib import Path

    verify = Path(__file__).resolve().parents[2] / "profiling" / "fixtures" / "verify"
    files = {"file": ("tail_effect-bad.rawinst.csv.gz", (verify / "tail_effect-bad.rawinst.csv.gz").read_bytes()),
             "source": ("tail_effect-bad.source.csv.gz", (verify / "tail_effect-bad.source.csv.gz").read_bytes())}
    r = http.post("/ui/diagnose", files=files)
    assert r.status_code == 200, r.text[:500]
    assert 'data-status="limited"' in r.text and 'data-signal="tail-effect"' in r.text
    assert 'class="sparkline"' in r.text and "last 33% of the run" in r.text
    assert 'id="hotspots"' in r.text and "tail_effect.cu:130" in r.text
    assert "--import-source yes" in r.text and "--print-source cuda,sass" in r.text  # the timeline is here: source next
    assert 'class="chart-box timeline-chart"><svg' in r.text and 'class="chart-box launch-chart"><svg' in r.text
    gemm = http.post("/ui/diagnose", files={"file": ("g.raw.csv.gz", (verify / "torch-gemm_bf16.raw.csv.gz").read_bytes())})
    assert 'data-status="speed-of-light"' in gemm.text and "check-clocks" in gemm.text
    model = http.post("/ui/diagnose", files={"file": ("m.raw.csv.gz", (verify / "torch-model.raw.csv.gz").read_bytes())})
    assert 'id="kernel-shares"' in model.text and "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT" in model.text


def test_snippet_links_are_http_or_internal_and_html_is_escaped(http):
    from kwiki.service.web_markdown import render_markdown, render_snippet

    md = ("The [tail](../patterns/tail-effect.md), [docs](https://docs.nvidia.com/cuda/) and [bad](javascript:alert(1)), "
          "[file](file:///etc/passwd), ![x](data:image/png;base64,AA) <script>alert(1)</script> `a<b`.")
    html = str(render_snippet(md, ["tail"], resolve=lambda href: "pattern-tail-effect" if href == "../patterns/tail-effect.md" else None))
    assert re.findall(r'href="([^"]+)"', html) == ["/ui/page/pattern-tail-effect", "https://docs.nvidia.com/cuda/"]
    assert "<script>" not in html and "&lt;script&gt;" in html and "<code>a&lt;b</code>" in html
    assert "javascript" not in html and "file:" not in html and "data:" not in html and "](" not in html
    body = str(render_markdown("[up](#fixes) [x](javascript:alert(1))"))
    assert 'href="#fixes"' in body and "javascript" not in body


def test_a_snippet_is_cut_at_blocks_and_closes_what_it_opens():
    from kwiki.service.web_markdown import SNIPPET_CHARS, render_snippet

    md = "## Intro\n\nnothing here\n\n- a\n- b\n- the **tail effect** and [a long link text](https://x.example) " + "word " * 200
    html = str(render_snippet(md, ["tail"]))
    assert html.startswith("<ul>") and "<li>a</li>" not in html and "Intro" not in html  # from the item that matches
    assert html.count("<strong>") == html.count("</strong>") and html.count("<a ") == html.count("</a>")
    assert len(re.sub(r"<[^>]+>", "", html)) <= SNIPPET_CHARS + 10 and html.rstrip().endswith("</ul>")
    fence = str(render_snippet("```cuda\n" + "int tail = 0;\n" * 100, ["tail"]))  # a chunk cut inside a long fence
    assert fence.startswith("<pre><code") and fence.rstrip().endswith("</code></pre>") and "```" not in fence


def test_a_baseline_needs_an_export_and_must_not_be_empty(http):
    from pathlib import Path

    fixed = Path(__file__).resolve().parents[2] / "profiling" / "fixtures" / "verify" / "tail_effect-fixed.raw.csv.gz"
    r = http.post("/ui/diagnose", files={"baseline": ("b.csv", b"x")}, data={"text": "anything"})
    assert r.status_code == 400 and "a baseline needs an export" in r.text and "candidate" in r.text
    r = http.post("/ui/diagnose", files={"file": (fixed.name, fixed.read_bytes()), "baseline": ("b.csv", b"")})
    assert r.status_code == 400 and "the baseline file is empty" in r.text
