"""``kwiki mcp``: the MCP server command (kept apart so ``kwiki`` starts without importing the SDK).

    kwiki mcp                         # stdio: configure an agent with {"command": "kwiki", "args": ["mcp"]}
    kwiki mcp --http --port 8765      # streamable HTTP at http://127.0.0.1:8765/mcp
    kwiki mcp --workspace ledger/     # the ledger tools' default workspace
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer


def mcp_command(
    http: Annotated[bool, typer.Option("--http", help="Serve streamable HTTP on 127.0.0.1 instead of stdio")] = False,
    port: Annotated[int, typer.Option(help="Port for --http (path /mcp)")] = 8765,
    index_dir: Annotated[Optional[Path], typer.Option("--index-dir", help="Index root (default: $KWIKI_INDEX_DIR or .kwiki/index)")] = None,
    workspace: Annotated[Optional[Path], typer.Option("--workspace", "-w", help="Default ledger workspace of the ledger tools (default: $KWIKI_LEDGER_DIR or <index_dir>/../ledger)")] = None,
) -> None:
    """Serve kwiki's tools to coding agents over MCP: search, get_page, get_section, lookup_metric, diagnose, compare,
    list_signals and the ledger's (ledger_add, ledger_show, ledger_tree, ledger_search, ledger_set_status)."""
    from kwiki.settings import load_settings

    from .mcp_server import serve

    settings = load_settings(index_dir=index_dir)
    if http:
        typer.echo(f"kwiki MCP server on http://127.0.0.1:{port}/mcp", err=True)
    serve(settings, http=http, port=port, workspace=workspace)
