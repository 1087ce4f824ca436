"""Issue 20, Low 17: the stdio MCP server answers every line: a malformed or non-object line, or arguments with
a lone surrogate, get a JSON-RPC error instead of silence (the client waited for ever)."""

from __future__ import annotations

import json
import subprocess

from ..robustness.conftest import cli_env, kwiki_cmd

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}


def test_every_bad_line_gets_a_jsonrpc_error(tmp_path):
    lines = [
        "{oops",                                                              # malformed
        "[1, 2]",                                                             # not an object
        '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "search", "arguments": {"query": "\\ud800"}}}',
        '{"jsonrpc": "2.0", "id": 8}',                                        # an object, not a message
        json.dumps(INIT),
    ]
    proc = subprocess.run(kwiki_cmd("mcp", "--index-dir", str(tmp_path / "none")), input="\n".join(lines) + "\n",
                          capture_output=True, text=True, timeout=120, env=cli_env())
    replies = [json.loads(x) for x in proc.stdout.splitlines() if x.strip()]
    errors = [r for r in replies if "error" in r]
    assert [(r["error"]["code"], r.get("id")) for r in errors] == [(-32700, None), (-32600, None), (-32700, 7), (-32600, 8)]
    assert all(r["error"]["message"] for r in errors)
    assert any(r.get("id") == 1 and "result" in r for r in replies)  # the good line after them is still served
