"""The MCP server end to end: ``kwiki mcp`` spawned over stdio (and over streamable HTTP), driven by the
official SDK's own client, against the real corpus index, compared with the real HTTP API."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import anyio
import pytest
import yaml

pytestmark = pytest.mark.slow

from ..conftest import DATA, free_port  # noqa: E402

TAIL_Q = "most SMs sit idle during the last wave of my GEMM"  # a tail-effect symptom that names no pattern
VERIFY = Path(__file__).resolve().parents[2] / "profiling" / "fixtures" / "verify"
NCU = DATA / "ncu"
#: an NCU Launch Statistics rule message, as an agent would paste it
SMALL_GRID_RULE = "The kernel launch execute only 32 blocks, which is less than the GPU's 132 multiprocessors."
EXPECTED = yaml.safe_load((NCU / "expected.yaml").read_text())


def _env(index: Path) -> dict[str, str]:
    return {"HF_HUB_OFFLINE": "1", "KWIKI_INDEX_DIR": str(index), "KWIKI_EMBED_THREADS": "1"}


def _kwiki() -> str:
    exe = shutil.which("kwiki")
    assert exe, "the kwiki console script is not installed"
    return exe


@pytest.fixture(scope="module")
def stdio_session(corpus_index, tmp_path_factory) -> dict:
    """One stdio session: every call the tests below look at, made in order (errors first, then more calls,
    so the later answers also show that a bad call did not take the server down)."""
    from mcp import Client, StdioServerParameters

    cwd = tmp_path_factory.mktemp("mcp-cwd")  # run from elsewhere, as an agent would
    params = StdioServerParameters(command=_kwiki(), args=["mcp"], env=_env(corpus_index), cwd=str(cwd))
    out: dict = {}

    async def scenario() -> None:
        async with Client(params, read_timeout_seconds=600) as c:
            out["tools"] = (await c.list_tools()).tools
            out["k0"] = await c.call_tool("search", {"query": TAIL_Q, "k": 0})
            out["k_text"] = await c.call_tool("search", {"query": TAIL_Q, "k": "many"})
            out["bad_type"] = await c.call_tool("search", {"query": TAIL_Q, "filters": {"type": ["no-such-type"]}})
            out["no_page"] = await c.call_tool("get_page", {"id": "pattern-no-such-page"})
            out["diag_none"] = await c.call_tool("diagnose", {})
            out["diag_nofile"] = await c.call_tool("diagnose", {"path": str(cwd / "missing.csv")})
            out["search"] = await c.call_tool("search", {"query": TAIL_Q, "k": 5})
            out["nonsense"] = await c.call_tool("search", {"query": "purple elephants juggling teacups", "k": 10})
            out["filtered"] = await c.call_tool("search", {"query": "tensor memory", "k": 5, "filters": {"type": ["hardware"]}})
            out["page"] = await c.call_tool("get_page", {"id": "pattern-tail-effect"})
            out["diag_file"] = await c.call_tool("diagnose", {"path": str(NCU / "tail_effect-bad.raw.csv")})
            out["diag_metrics"] = await c.call_tool("diagnose", {"metrics": {"launch__grid_size": 32, "launch__sm_count": 132}})
            out["diag_text"] = await c.call_tool("diagnose", {"text": SMALL_GRID_RULE})
            out["diag_two"] = await c.call_tool("diagnose", {"text": "x", "path": "y"})
            out["signals"] = await c.call_tool("list_signals", {})
            out["compare"] = await c.call_tool("compare", {"path": str(VERIFY / "tail_effect-fixed.raw.csv.gz"),
                                                           "baseline": str(VERIFY / "tail_effect-bad.raw.csv.gz")})
            out["diag_gemm"] = await c.call_tool("diagnose", {"path": str(VERIFY / "torch-gemm_bf16.raw.csv.gz")})

    anyio.run(scenario)
    return out


def _ok(result) -> dict:
    assert not result.is_error, result.content[0].text if result.content else result
    assert result.structured_content is not None
    # The text block carries the same document for clients that ignore structured content.
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


def _err(result) -> str:
    """The error's text; every tool error is ``{"error": CODE, "reason", "hint"}`` with a reason and a hint."""
    assert result.is_error, result
    text = result.content[0].text
    doc = json.loads(text)
    assert set(doc) == {"error", "reason", "hint"} and all(isinstance(v, str) and v.strip() for v in doc.values()), doc
    return text


def _nulls(doc) -> list:
    """The null values anywhere in a JSON document."""
    if isinstance(doc, dict):
        return [x for v in doc.values() for x in ([v] if v is None else _nulls(v))]
    if isinstance(doc, list):
        return [x for v in doc for x in ([v] if v is None else _nulls(v))]
    return []


TOOLS = {"search", "get_page", "get_section", "lookup_metric", "diagnose", "compare", "list_signals",
         "ledger_add", "ledger_show", "ledger_tree", "ledger_search", "ledger_set_status"}


def test_tools_are_listed_with_descriptions_and_schemas(stdio_session):
    tools = {t.name: t for t in stdio_session["tools"]}
    assert set(tools) == TOOLS
    for t in tools.values():
        assert t.description and len(t.description) > 60, t.name
        assert t.description.startswith("Use "), f"{t.name}: a description says when to use the tool"
        assert t.input_schema["type"] == "object"
        assert t.output_schema and t.output_schema["type"] == "object"
    search = tools["search"].input_schema
    assert search["required"] == ["query"] and {"query", "k", "filters"} <= set(search["properties"])
    assert set(tools["diagnose"].input_schema["properties"]) >= {"path", "metrics"}
    assert tools["get_page"].input_schema["required"] == ["id"]


def test_search_returns_the_tail_effect_page_first_as_get_search_does(stdio_session, http):
    doc = _ok(stdio_session["search"])
    assert doc["hits"][0]["id"] == "pattern-tail-effect"
    api = http.get("/search", params={"q": TAIL_Q, "k": 5}).json()
    assert [h["id"] for h in doc["hits"]] == [h["id"] for h in api["hits"]]
    assert [h.get("confidence") for h in doc["hits"]] == [h["confidence"] for h in api["hits"]]
    first = doc["hits"][0]
    assert set(first) <= {"id", "title", "type", "corpus", "confidence", "score", "snippet", "section", "matched",
                          "fix_of", "related_to", "clause", "sources"}
    # the sentence that matched, as GET /search says, on every hit that has one (and only there)
    assert [h.get("matched") for h in doc["hits"]] == [h["why"].get("sentence") for h in api["hits"]]
    assert any(h.get("matched") for h in doc["hits"])
    assert first["section"] == api["hits"][0]["heading_path"][-1]
    assert [h.get("fix_of") for h in doc["hits"]] == [h["why"]["fix_of"] for h in api["hits"]]
    assert [h.get("related_to") for h in doc["hits"]] == [h["why"]["related_to"] for h in api["hits"]]
    assert [h.get("clause") for h in doc["hits"]] == [h["why"]["clause"] for h in api["hits"]]
    assert first["sources"] and len(first["snippet"]) <= 320
    # Sources once per response: a hit names them by id, each described once, as GET /search's hits list them.
    assert first["sources"] == [s["id"] for s in api["hits"][0]["sources"][:5]]
    named = {i for h in doc["hits"] for i in h.get("sources", [])}
    assert named == set(doc["sources"]) and all(v.get("title") for v in doc["sources"].values())
    # Compact: no null anywhere, no indentation, and a fraction of the HTTP document.
    text = stdio_session["search"].content[0].text
    assert text == json.dumps(doc, ensure_ascii=False, separators=(",", ":")) and not _nulls(doc)
    assert len(text) < len(json.dumps(api)) / 2


def test_a_query_nothing_answers_says_so(stdio_session, http):
    doc = _ok(stdio_session["nonsense"])
    api = http.get("/search", params={"q": "purple elephants juggling teacups", "k": 10}).json()
    assert doc["no_match"] is True and doc["note"] == api["note"] and len(doc["hits"]) == len(api["hits"]) < 10


def test_search_filters_apply(stdio_session):
    doc = _ok(stdio_session["filtered"])
    assert doc["hits"] and {h["type"] for h in doc["hits"]} == {"hardware"}
    assert doc["filters"]["type"] == ["hardware"]


def test_bad_arguments_are_tool_errors_not_crashes(stdio_session):
    assert "k:" in _err(stdio_session["k0"]) and '"bad_arguments"' in _err(stdio_session["k0"])
    assert "k:" in _err(stdio_session["k_text"])
    assert "unknown type" in _err(stdio_session["bad_type"])  # the Searcher's own validation, as HTTP 400
    assert "page_not_found" in _err(stdio_session["no_page"])
    assert "exactly one of" in _err(stdio_session["diag_none"])
    assert "no file at" in _err(stdio_session["diag_nofile"])
    # ... and the server answered every later call in the same session.
    assert _ok(stdio_session["signals"])["signals"]


def test_get_page_has_the_whole_page_and_resolved_sources(stdio_session, http):
    doc = _ok(stdio_session["page"])
    api = http.get("/pages/pattern-tail-effect").json()
    assert doc["body"] == api["body"] and doc["title"] == api["title"]
    assert [s["id"] for s in doc["sources"]] == [s["id"] for s in api["sources"]]
    assert any(s.get("resolved") for s in doc["sources"])
    assert "What you see" in doc["headings"]


def test_diagnose_an_export_by_path_as_post_diagnose_does(stdio_session, http):
    doc = _ok(stdio_session["diag_file"])
    top = doc["launches"][0]["signals"][0]
    assert top["signal"] == EXPECTED["tail_effect-bad"]["expected_top"]
    assert top["evidence"]
    assert "pattern-tail-effect" in [p["id"] for p in top["pages"]]
    with open(NCU / "tail_effect-bad.raw.csv", "rb") as fh:
        api = http.post("/diagnose", files={"file": ("tail_effect-bad.raw.csv", fh)}).json()
    for mine, theirs in zip(doc["launches"], api["launches"]):
        assert [s["signal"] for s in mine["signals"]] == [s["signal"] for s in theirs["signals"][:5]]
        assert [p["id"] for p in mine["signals"][0]["pages"]] == [p["id"] for p in theirs["signals"][0]["pages"]]


def test_diagnose_metrics_and_text(stdio_session):
    assert _ok(stdio_session["diag_metrics"])["launches"][0]["signals"][0]["signal"] == "small-grid"
    text = _ok(stdio_session["diag_text"])
    assert text["launches"][0]["signals"][0]["signal"] == "small-grid" and text["text_signals"][0] == "small-grid"
    assert "exactly one of" in _err(stdio_session["diag_two"])


def test_compare_a_candidate_with_its_parent_as_post_diagnose_does(stdio_session, http):
    doc = _ok(stdio_session["compare"])
    assert doc["verdict"] == "improved" and 1.4 < doc["speedup"] < 1.5 and "noise band" in doc["rule"]
    (k,) = doc["kernels"]
    assert k["resolved"] == ["tail-effect"] and any(d.startswith("SM throughput %") for d in k["deltas"])
    with open(VERIFY / "tail_effect-fixed.raw.csv.gz", "rb") as after, open(VERIFY / "tail_effect-bad.raw.csv.gz", "rb") as before:
        api = http.post("/diagnose", files={"file": ("tail_effect-fixed.raw.csv.gz", after), "baseline": ("tail_effect-bad.raw.csv.gz", before)}).json()
    assert api["speedup"] == doc["speedup"] and [s["signal"] for s in api["kernels"][0]["resolved"]] == k["resolved"]


def test_diagnose_says_speed_of_light_and_the_next_command(stdio_session):
    launch = _ok(stdio_session["diag_gemm"])["launches"][0]
    assert launch["verdict"].startswith("speed-of-light:") and launch["signals"][0]["signal"] == "speed-of-light"
    assert any(s.get("by_design") for s in launch["signals"]) and launch["checks"][0].startswith("warning clocks")
    assert launch["next_step"].startswith("ncu --clock-control none --section SpeedOfLight")


def test_list_signals_as_get_signals(stdio_session, http):
    signals = {s["id"]: s for s in _ok(stdio_session["signals"])["signals"]}
    assert "pattern-tail-effect" in signals["tail-effect"]["patterns"]
    assert signals["tail-effect"]["metrics"]
    assert list(signals) == [s["id"] for s in http.get("/signals").json()["signals"]]


def test_streamable_http_on_loopback(corpus_index, tmp_path):
    from mcp import Client

    port = free_port()
    log = open(tmp_path / "mcp-http.log", "w")
    proc = subprocess.Popen([_kwiki(), "mcp", "--http", "--port", str(port)], cwd=tmp_path, stdout=log,
                            stderr=subprocess.STDOUT, env={**os.environ, **_env(corpus_index)})
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, (tmp_path / "mcp-http.log").read_text()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "kwiki mcp --http did not listen"
                time.sleep(0.2)
        out: dict = {}

        async def scenario() -> None:
            async with Client(f"http://127.0.0.1:{port}/mcp", read_timeout_seconds=300) as c:
                out["tools"] = {t.name for t in (await c.list_tools()).tools}
                out["search"] = await c.call_tool("search", {"query": TAIL_Q, "k": 3})

        anyio.run(scenario)
        assert out["tools"] == TOOLS
        assert _ok(out["search"])["hits"][0]["id"] == "pattern-tail-effect"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
