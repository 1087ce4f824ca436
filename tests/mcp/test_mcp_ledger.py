"""The whole ledger loop over MCP alone: ``kwiki mcp --workspace WS`` spawned over stdio and driven by the SDK's
client, against a real index of the corpus and a workspace that holds an earlier, rejected attempt. Search what
was tried, add a baseline and a candidate, attach a diagnosis and a comparison,
promote one and reject another, read the tree; and every mistake an agent makes on the way is a tool error
``{"error", "reason", "hint"}`` that leaves the ledger as it was."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from ..conftest import REPO
from .test_mcp_server import _env, _err, _kwiki, _nulls, _ok

pytestmark = pytest.mark.slow

VERIFY = REPO / "profiling" / "fixtures" / "verify"
BAD, FIXED = str(VERIFY / "tail_effect-bad.raw.csv.gz"), str(VERIFY / "tail_effect-fixed.raw.csv.gz")
PAST = {"id": "t00", "task": "gemm", "kernel": "tail_effect_bad", "mechanism": "split-K by 2 to fill the last wave",
        "techniques": ["technique-split-k"], "patterns": ["pattern-tail-effect"], "status": "rejected",
        "reason": "the partial last wave stayed: 264 CTAs on 132 SMs still leave one thin wave"}


@pytest.fixture(scope="module")
def ledger_ws(tmp_path_factory) -> Path:
    """A workspace that holds one past attempt, a rejected one."""
    from kwiki.ledger import Candidate, Ledger

    ws = tmp_path_factory.mktemp("mcp-ledger-ws")
    Ledger(ws).append(Candidate.model_validate(PAST))
    return ws


@pytest.fixture(scope="module")
def loop(corpus_index, ledger_ws, tmp_path_factory) -> dict:
    """One session, the calls in the order an agent makes them (its mistakes included)."""
    from mcp import Client, StdioServerParameters

    index, ws = corpus_index, ledger_ws
    cwd = tmp_path_factory.mktemp("mcp-ledger-cwd")
    params = StdioServerParameters(command=_kwiki(), args=["mcp", "--workspace", str(ws)], env=_env(index), cwd=str(cwd))
    out: dict = {}

    async def scenario() -> None:
        async with Client(params, read_timeout_seconds=600) as c:
            call = c.call_tool
            out["past"] = await call("ledger_search", {"query": "partial last wave of my GEMM", "status": "rejected"})
            out["lookup"] = await call("lookup_metric", {"name": "launch__waves_per_multiprocessor"})
            out["fixes"] = await call("get_section", {"id": "pattern-tail-effect", "heading": "Candidate techniques"})
            out["add_base"] = await call("ledger_add", {"task": "gemm", "id": "t01", "kernel": "tail_effect_bad",
                                                        "mechanism": "baseline: one CTA of 1024 threads per 1024 elements"})
            out["add_cand"] = await call("ledger_add", {
                "task": "gemm", "parent": "t01", "kernel": "tail_effect_fixed",
                "mechanism": "size the grid to full waves: 2 CTAs per SM, each looping over its share",
                "techniques": ["technique-persistent-kernels"], "patterns": ["pattern-tail-effect"], "correct": True,
                "correctness_detail": "matches the reference",
                "benchmarks": [{"metric": "TFLOP/s", "value": 50.12, "baseline": 34.44, "unit": "TFLOP/s", "gpu": "H200"}]})
            cand = out["cand"] = json.loads(out["add_cand"].content[0].text).get("key", "gemm/c002")
            out["diag"] = await call("diagnose", {"path": BAD, "candidate": "gemm/t01"})
            out["compare"] = await call("compare", {"path": FIXED, "baseline": BAD, "candidate": cand})
            out["promote"] = await call("ledger_set_status", {"candidate": cand, "status": "promoted",
                                                              "reason": "tail effect resolved, 1.45x over t01"})
            out["add_worse"] = await call("ledger_add", {"task": "gemm", "id": "t03", "parent": cand,
                                                         "mechanism": "unroll the inner loop by 8"})
            out["reject"] = await call("ledger_set_status", {"candidate": "t03", "status": "rejected",
                                                             "reason": "no faster, 40 more registers"})
            out["tree"] = await call("ledger_tree", {"task": "gemm"})
            out["show"] = await call("ledger_show", {"candidate": cand})
            out["search_after"] = await call("ledger_search", {"query": "unroll the inner loop", "status": "rejected"})
            out["search_plain"] = await call("search", {"query": "size the grid to full waves", "k": 3})
            # mistakes, each answered with what to do, none of them written
            out["before_mistakes"] = [await call("ledger_tree", {}), await call("ledger_show", {"candidate": "t01"})]
            out["e_parent"] = await call("ledger_add", {"task": "gemm", "id": "t04", "parent": "t77", "mechanism": "x"})
            out["e_technique"] = await call("ledger_add", {"task": "gemm", "id": "t04", "mechanism": "x",
                                                           "techniques": ["technique-persistant-kernels"]})
            out["e_dup"] = await call("ledger_add", {"task": "gemm", "id": "t01", "mechanism": "again"})
            out["e_badid"] = await call("ledger_add", {"task": "gemm", "id": "no spaces!", "mechanism": "x"})
            out["e_nomech"] = await call("ledger_add", {"task": "gemm"})
            out["e_show"] = await call("ledger_show", {"candidate": "gemm/t99"})
            out["e_status"] = await call("ledger_set_status", {"candidate": "t01", "status": "kept", "reason": "x"})
            out["e_reason"] = await call("ledger_set_status", {"candidate": "t01", "status": "promoted", "reason": ""})
            out["e_attach"] = await call("compare", {"path": FIXED, "baseline": BAD, "candidate": "gemm/t99"})
            out["e_diag_attach"] = await call("diagnose", {"path": str(cwd / "missing.csv"), "candidate": "gemm/t01"})
            out["e_tree"] = await call("ledger_tree", {"task": "transpose"})
            out["e_section"] = await call("get_section", {"id": "pattern-tail-effect", "heading": "Zebra crossings"})
            out["e_metric"] = await call("lookup_metric", {"name": "launch__waves_per_multiprocesor"})
            out["e_tool"] = await call("ledger_delete", {"candidate": "t01"})
            out["e_search"] = await call("ledger_search", {"query": "tail", "status": "maybe"})
            out["e_diag"] = await call("diagnose", {})
            out["e_page"] = await call("get_page", {"id": "pattern-no-such-page"})
            out["after_mistakes"] = [await call("ledger_tree", {}), await call("ledger_show", {"candidate": "t01"})]

    anyio.run(scenario)
    from kwiki.ledger import Ledger

    out["ledger"] = {c.key: c for c in Ledger(ws).read().candidates}
    return out


def test_past_attempts_are_found_before_anything_is_tried(loop):
    doc = _ok(loop["past"])
    assert doc["candidates"] == 1
    assert [t["candidate"] for t in doc["tried"]] == ["gemm/t00"]
    assert doc["tried"][0]["status"] == "rejected" and "partial last wave stayed" in doc["tried"][0]["reason"]
    assert doc["hits"][0]["id"] == "pattern-tail-effect"  # the pages that explain it come first
    assert not any(h["type"] == "experience" for h in doc["hits"])


def test_the_knowledge_steps(loop):
    metric = _ok(loop["lookup"])
    assert metric["metrics"][0]["id"] == "waves_per_sm" and "tail-effect" in metric["metrics"][0]["signals"]
    assert "pattern-tail-effect" in metric["patterns"]
    section = _ok(loop["fixes"])
    assert section["heading"] == "Candidate techniques" and section["text"].startswith("## Candidate techniques")
    assert "stream-k" in section["text"].lower() and "## What you see" not in section["text"]


def test_add_attach_promote_reject(loop):
    base, cand = _ok(loop["add_base"]), _ok(loop["add_cand"])
    assert base["key"] == "gemm/t01" and base["status"] == "candidate"
    assert cand["key"] == loop["cand"] and cand["parent"] == "t01" and cand["correct"] is True
    assert cand["key"] not in ("gemm/t00", "gemm/t01") and cand["key"].startswith("gemm/c")  # the next free cNNN
    assert cand["benchmarks"] == ["TFLOP/s 50.12 TFLOP/s (baseline 34.44) H200"]
    diag = _ok(loop["diag"])
    assert diag["recorded"] == "gemm/t01" and diag["launches"][0]["signals"][0]["signal"] == "tail-effect"
    comp = _ok(loop["compare"])
    assert comp["recorded"] == loop["cand"] and comp["verdict"] == "improved" and comp["kernels"][0]["resolved"] == ["tail-effect"]
    promoted = _ok(loop["promote"])
    assert promoted["status"] == "promoted" and promoted["reason"] == "tail effect resolved, 1.45x over t01"
    assert promoted["comparison"].startswith("improved 1.4") and "resolved: tail-effect" in promoted["comparison"]
    assert promoted["techniques"] == ["technique-persistent-kernels"]  # a status change keeps the record
    assert _ok(loop["reject"])["status"] == "rejected"
    shown = _ok(loop["show"])
    assert shown == promoted and not _nulls(shown)
    # what the workspace holds, read through the ledger's own API
    led = loop["ledger"]
    assert led["gemm/t01"].evidence.signals[0] == "tail-effect" and led["gemm/t01"].evidence.reports == ["tail_effect-bad.raw.csv.gz"]
    assert led[loop["cand"]].evidence.model_extra["comparison"]["verdict"] == "improved"
    assert led["gemm/t03"].status == "rejected" and led["gemm/t00"].status == "rejected"


def test_the_tree_marks_the_promoted_path(loop):
    (tree,) = _ok(loop["tree"])["tasks"]
    rows = {r["id"]: r for r in tree["rows"]}
    cand = loop["cand"].split("/")[1]
    assert tree["promoted"] == [loop["cand"]] and tree["size"] == 4
    assert rows["t01"].get("on_promoted_path") and rows[cand]["parent"] == "t01" and rows[cand]["depth"] == 1
    assert rows["t03"]["parent"] == cand and rows["t03"]["status"] == "rejected" and not rows["t03"].get("on_promoted_path")
    assert rows["t00"]["status"] == "rejected" and rows["t00"].get("depth", 0) == 0


def test_a_new_candidate_is_searchable_at_once(loop):
    doc = _ok(loop["search_after"])
    assert doc["candidates"] == 4 and doc["tried"][0]["candidate"] == "gemm/t03"  # rejected a moment ago
    assert {t["status"] for t in doc["tried"]} == {"rejected"}
    plain = _ok(loop["search_plain"])  # a plain search shows the candidates on the topic after the pages
    assert loop["cand"] in [t["candidate"] for t in plain["tried"]]


@pytest.mark.parametrize("name, code, says", [
    ("e_parent", "unknown_reference", "unknown parent 't77'"),
    ("e_technique", "unknown_reference", "technique-persistant-kernels"),
    ("e_dup", "bad_request", "already in the ledger"),
    ("e_badid", "bad_request", "invalid candidate"),
    ("e_nomech", "bad_arguments", "mechanism"),
    ("e_show", "not_found", "no candidate 'gemm/t99'"),
    ("e_status", "bad_arguments", "status"),
    ("e_reason", "bad_arguments", "reason"),
    ("e_attach", "not_found", "no candidate 'gemm/t99'"),
    ("e_diag_attach", "bad_input", "no file at"),
    ("e_tree", "not_found", "no candidates of task 'transpose'"),
    ("e_section", "not_found", "no section 'Zebra crossings'"),
    ("e_metric", "not_found", "launch__waves_per_multiprocesor"),
    ("e_tool", "unknown_tool", "ledger_delete"),
    ("e_search", "bad_arguments", "status"),
    ("e_diag", "bad_request", "exactly one of"),
    ("e_page", "page_not_found", "pattern-no-such-page"),
])
def test_every_mistake_is_an_error_with_a_reason_and_a_hint(loop, name, code, says):
    doc = json.loads(_err(loop[name]))  # _err: {error, reason, hint}, each non-empty
    assert doc["error"] == code and says in doc["reason"], doc


def test_mistakes_wrote_nothing(loop):
    before, after = ([_ok(r) for r in calls] for calls in (loop["before_mistakes"], loop["after_mistakes"]))
    assert before == after and after[1]["updated_at"]  # the same tree, t01 not touched (its last version's stamp)
    assert set(loop["ledger"]) == {"gemm/t00", "gemm/t01", loop["cand"], "gemm/t03"}
    assert loop["ledger"]["gemm/t01"].status == "candidate" and loop["ledger"]["gemm/t01"].mechanism.startswith("baseline")


def test_hints_say_what_to_do(loop):
    hint = json.loads(_err(loop["e_section"]))["hint"]
    assert "What you see" in hint and "Candidate techniques" in hint  # the page's headings
    assert "launch__waves_per_multiprocessor" in json.loads(_err(loop["e_metric"]))["hint"]  # the nearest spelling
    assert "ledger_add" in json.loads(_err(loop["e_tool"]))["hint"]  # the tools there are
    assert "gemm" in json.loads(_err(loop["e_tree"]))["hint"]  # the tasks there are
    assert "technique-persistent-kernels" in json.loads(_err(loop["e_technique"]))["hint"]  # the nearest page id
