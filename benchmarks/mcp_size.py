"""How many bytes an agent receives for one MCP ``search`` of 10 hits: before and after the compact form.

Before (the ``search`` tool up to the eighth session): the SDK's default rendering of the tool's model, a text
block of JSON indented by 2 with every null field written out, each hit listing its sources in full, and the
same document again as structured content. After (:mod:`kwiki.service.compact`): JSON without indentation,
fields at their default left out, each source described once per response. Both are built from the same
:class:`~kwiki.index.results.SearchResponse`, so the difference is the form alone.

    python benchmarks/mcp_size.py [--index-dir DIR] [--k 10]

Deterministic for a given index (no timing): ``tests/mcp/test_mcp_compact.py`` asserts the reduction.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pydantic_core
from mcp_types import CallToolResult, TextContent

from kwiki.index.results import SearchResponse
from kwiki.service.compact import MAX_HIT_SOURCES, SNIPPET_CHARS, compact_search, to_json, to_wire

#: questions an agent asks (SKILL.md's worked examples and symptoms from the eval suites)
QUERIES = (
    "most SMs sit idle during the last wave of my GEMM",
    "long scoreboard stalls",
    "bank conflicts in the epilogue",
    "tensor memory allocation tcgen05.alloc",
    "uncoalesced global loads, sectors per request is 32",
    "only 8 of my 132 SMs are busy during the final part of the kernel",
)


def legacy_document(resp: SearchResponse) -> dict[str, Any]:
    """The ``search`` tool's document before the compact form (field for field, nulls included)."""
    return {
        "query": resp.query,
        "hits": [{"id": h.id, "title": h.title, "type": h.type, "corpus": h.corpus, "confidence": h.confidence,
                  "score": h.score, "snippet": h.snippet[:SNIPPET_CHARS], "matched": h.why.sentence, "fix_of": h.why.fix_of,
                  "related_to": h.why.related_to, "clause": h.why.clause,
                  "sources": [{"id": s.id, "title": s.title, "url": s.url, "resolved": s.resolved} for s in h.sources[:MAX_HIT_SOURCES]]}
                 for h in resp.hits],
        "signals": [str(s.get("signal")) for s in resp.signals if s.get("signal")],
        "corrections": [str(c) for c in resp.interpreted.corrections],
        "filters": resp.filters,
    }


def wire_bytes(result: CallToolResult) -> int:
    """The result as the SDK writes it into the JSON-RPC response."""
    return len(result.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8"))


def sizes(resp: SearchResponse) -> dict[str, int]:
    """``{"before_text", "after_text", "before_wire", "after_wire"}`` in bytes: the text block an agent reads, and
    the whole tool result (text block plus structured content)."""
    old = legacy_document(resp)
    old_text = pydantic_core.to_json(old, fallback=str, indent=2).decode()
    new = compact_search(resp)
    new_text = to_json(new)
    before = CallToolResult(content=[TextContent(type="text", text=old_text)], structured_content=old)
    after = CallToolResult(content=[TextContent(type="text", text=new_text)], structured_content=to_wire(new))
    return {"before_text": len(old_text.encode("utf-8")), "after_text": len(new_text.encode("utf-8")),
            "before_wire": wire_bytes(before), "after_wire": wire_bytes(after)}


def main() -> None:
    from kwiki.index.search import Searcher
    from kwiki.settings import load_settings

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--index-dir", type=Path, default=None)
    ap.add_argument("--k", type=int, default=10)
    args = ap.parse_args()
    searcher = Searcher.open(load_settings(index_dir=args.index_dir).index_dir)
    rows = []
    for q in QUERIES:
        s = sizes(searcher.search(q, k=args.k))
        rows.append(s)
        print(f"{q[:60]:62s} text {s['before_text']:6d} -> {s['after_text']:6d} B ({s['after_text'] / s['before_text']:.0%})"
              f"   result {s['before_wire']:6d} -> {s['after_wire']:6d} B ({s['after_wire'] / s['before_wire']:.0%})")
    total = {key: sum(r[key] for r in rows) for key in rows[0]}
    print(json.dumps({"k": args.k, "queries": len(rows), **total,
                      "text_ratio": round(total["after_text"] / total["before_text"], 3),
                      "wire_ratio": round(total["after_wire"] / total["before_wire"], 3)}))


if __name__ == "__main__":
    main()
