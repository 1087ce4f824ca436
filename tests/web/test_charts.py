"""The diagnosis page's charts in Chromium (drawn on the server by matplotlib as inline SVG), and the chart
module itself: what it draws is what the diagnosis says, and text from an export is escaped."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import shot

VERIFY = Path(__file__).resolve().parents[2] / "profiling" / "fixtures" / "verify"


def _chart_texts(page, selector: str) -> list[str]:
    return page.locator(f"{selector} svg text").evaluate_all("els => els.map(e => e.textContent.trim())")


def _drawn(page, selector: str) -> dict:
    return page.locator(f"{selector} svg").first.evaluate(
        "e => ({width: e.getBoundingClientRect().width, height: e.getBoundingClientRect().height,"
        " shapes: e.querySelectorAll('path').length})")


@pytest.mark.slow
def test_diagnose_page_draws_signals_stalls_and_timeline(page, server, http):
    export = VERIFY / "tail_effect-bad.rawinst.csv.gz"
    api = http.post("/diagnose", files={"file": (export.name, export.read_bytes())}).json()
    launch = api["launches"][0]
    page.goto(server.url + "/ui/diagnose")
    page.set_input_files("#ncu-file", str(export))
    page.click("#diagnose-button")
    page.wait_for_selector("#diagnosis")
    card = "article.launch:first-of-type figure.launch-chart"
    size = _drawn(page, card)
    assert size["width"] > 400 and size["height"] > 100 and size["shapes"] > 10  # a picture, not an empty box
    texts = _chart_texts(page, card)
    signals = [s["signal"] for s in launch["signals"]]
    assert [t for t in texts if t in signals] == signals  # every signal, in the diagnosis' order
    stalls = sorted((k for k, v in launch["stall_shares"].items() if v > 0), key=lambda k: -launch["stall_shares"][k])[:8]
    assert [t for t in texts if t in stalls] == stalls  # the largest stall reasons, largest first
    assert f"{launch['signals'][0]['magnitude'] * 100:.0f}%" in texts  # the bar's value, as the list says it
    timeline = "figure.timeline-chart"
    assert _drawn(page, timeline)["width"] > 400
    assert any(t == f"tail {launch['timeline']['tail_share']:.0%}" for t in _chart_texts(page, timeline))
    shot(page, "diagnose-charts.png")


@pytest.mark.slow
def test_baseline_upload_shows_the_comparison_chart(page, server, http):
    before, after = VERIFY / "tail_effect-bad.rawinst.csv.gz", VERIFY / "tail_effect-fixed.rawinst.csv.gz"
    api = http.post("/diagnose", files={"file": (after.name, after.read_bytes()),
                                        "baseline": (before.name, before.read_bytes())}).json()
    kc = api["kernels"][0]
    page.goto(server.url + "/ui/diagnose")
    page.set_input_files("#ncu-file", str(after))
    page.set_input_files("#ncu-baseline", str(before))
    page.click("#diagnose-button")
    page.wait_for_selector("#comparison")
    assert page.get_attribute("#comparison", "data-verdict") == api["verdict"] == "improved"
    assert page.locator("#comparison .resolved").first.get_attribute("data-signal") == "tail-effect"
    texts = _chart_texts(page, "figure.compare-chart")
    assert {"before", "after", "tail-effect"} <= set(texts)
    assert any(f"{kc['speedup']:.2f}x, improved" in t for t in texts)
    assert _drawn(page, "figure.compare-chart")["width"] > 400
    assert page.locator("#diagnosis figure.launch-chart svg").count() == 1  # the candidate's own diagnosis follows
    shot(page, "diagnose-comparison.png")


def test_chart_text_from_an_export_is_escaped():
    from kwiki.profiling.charts import timeline_chart
    from kwiki.profiling.timeline import Series, Timeline

    t = Timeline(launch_id="0", kernel="<script>alert(1)</script> f<$x$>", interval_us=1.5, samples=3,
                 activity="a", tail_share=0.5, series=[Series(metric="a", values=[1.0, 2.0, 0.1], step_us=1.5)])
    svg = str(timeline_chart(t))
    assert svg.startswith("<svg") and "<script" not in svg and "&lt;script&gt;" in svg
    assert "f&lt;$x$&gt;" in svg  # drawn as written: no mathtext
