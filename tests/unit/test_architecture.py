"""The package import graph: one direction of flow, no cycles, and no CLI or MCP path that loads FastAPI.

``kwiki`` (errors, settings) is the base; ``profiling`` stands on it alone, ``ingest`` reads profiling's tables,
``ledger`` renders into ``ingest``'s pages;
``index`` may read ``ingest`` and profiling's tables; ``service`` and ``evals`` sit on top.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import REPO

#: top-level folder -> the kwiki sub-package it installs as (pyproject's package-dir)
PACKAGES = {"kwiki": "kwiki", "ingest": "ingest", "ledger": "ledger", "profiling": "profiling", "index": "index",
            "service": "service", "evals": "evals"}
#: what each package may import besides itself (the direction of flow)
ALLOWED = {
    "kwiki": set(),
    "profiling": {"kwiki"},
    "ingest": {"kwiki", "profiling"},  # the validator checks pages' ncu_signals against profiling's signal ids
    "ledger": {"kwiki", "ingest"},
    "index": {"kwiki", "ingest", "profiling"},
    "service": {"kwiki", "ingest", "profiling", "ledger", "index", "evals"},
    "evals": {"kwiki", "ingest", "profiling", "index"},
}


def _imports(path: Path, package: str) -> set[str]:
    """The kwiki packages a module imports, lazily or not (``kwiki.index.x`` -> ``index``; relative -> own)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                out.add(package)
                continue
            names = [node.module or ""]
        for name in names:
            parts = name.split(".")
            if parts[0] == "kwiki":
                out.add(parts[1] if len(parts) > 1 and parts[1] in PACKAGES else "kwiki")
    return out


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {p: set() for p in PACKAGES}
    for folder, package in PACKAGES.items():
        for path in (REPO / folder).rglob("*.py"):
            graph[package] |= _imports(path, package) - {package}
    return graph


def test_each_package_imports_only_what_lies_below_it():
    graph = _graph()
    wrong = {p: sorted(deps - ALLOWED[p]) for p, deps in graph.items() if deps - ALLOWED[p]}
    assert not wrong, f"imports against the direction of flow: {wrong}"
    for base in ("ingest", "profiling"):
        assert not graph[base] & {"index", "service"}


def test_no_cycle_between_packages():
    graph = _graph()
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                pytest.fail(f"import cycle: {' -> '.join([*path, node, dep])}")
            if dep not in state:
                visit(dep, [*path, node])
        state[node] = 2

    for p in PACKAGES:
        if p not in state:
            visit(p, [])


def test_the_graph_reader_sees_lazy_and_relative_imports(tmp_path):
    mod = tmp_path / "m.py"
    mod.write_text("def f():\n    from kwiki.index.search import Searcher\nfrom . import x\nimport kwiki.errors\n")
    assert _imports(mod, "profiling") == {"index", "profiling", "kwiki"}


#: service modules by surface; every surface may use the core (core, diagnosis) and nothing of another surface
SURFACES = {"http": {"app", "diagnose_api", "ledger_api", "server", "readiness", "build_header"}, "web": {"web", "web_markdown"},
            "cli": {"cli", "cli_common", "cli_ledger", "cli_profile", "cli_remote", "mcp_cli", "rollout", "haproxy"},
            "mcp": {"mcp_server", "compact"}}
CORE = {"core", "diagnosis"}
#: what the two surfaces served over HTTP (the API and the search page) share: body limits, deadlines
HTTP_COMMON = {"limits"}
#: a surface that starts another, and nothing more: `kwiki serve` -> create_app, `kwiki mcp` -> mcp_server.serve,
#: and the HTTP app mounting the search page's routes
LAUNCHES = {("cli", "app"), ("cli", "server"), ("mcp_cli", "mcp_server"), ("app", "web")}


def _service_imports(name: str) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse((REPO / "service" / f"{name}.py").read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level == 1 and mod:
                out.add(mod.split(".")[0])
            elif node.level == 1:
                out |= {a.name for a in node.names}
            elif mod.startswith("kwiki.service."):
                out.add(mod.split(".")[2])
            elif mod == "kwiki.service":
                out |= {a.name for a in node.names}
    return out


def test_the_surfaces_never_import_each_other():
    modules = {m for group in SURFACES.values() for m in group} | CORE | HTTP_COMMON
    assert modules == {p.stem for p in (REPO / "service").glob("*.py")} - {"__init__"}
    for surface, group in SURFACES.items():
        shared = HTTP_COMMON if surface in ("http", "web") else set()
        for name in group:
            foreign = _service_imports(name) - group - CORE - shared - {b for a, b in LAUNCHES if a == name}
            assert not foreign, f"service/{name}.py imports another surface: {sorted(foreign)}"
    for name in CORE:
        assert not _service_imports(name) - CORE, f"the core imports a surface: service/{name}.py"


@pytest.mark.slow
def test_cli_search_and_mcp_tool_call_never_load_fastapi(mini_index):
    """A CLI search and an MCP tool call, each in a fresh interpreter: FastAPI is never imported."""
    script = f"""
import json, sys
import anyio
from typer.testing import CliRunner
from kwiki.service.cli import app
r = CliRunner().invoke(app, ["search", "tail effect", "-k", "3", "--index-dir", {str(mini_index)!r}, "--json"])
assert r.exit_code == 0, r.output
cli_hits = [h["id"] for h in json.loads(r.stdout)["hits"]]
after_cli = "fastapi" in sys.modules
from kwiki.service.mcp_server import build_server
from kwiki.settings import Settings
server = build_server(Settings(index_dir={str(mini_index)!r}))
result = anyio.run(server.call_tool, "search", {{"query": "tail effect", "k": 3}})
print(json.dumps({{"cli_hits": cli_hits, "after_cli": after_cli, "after_mcp": "fastapi" in sys.modules,
                  "mcp_error": bool(getattr(result, "is_error", False) or getattr(result, "isError", False))}}))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(done.stdout.strip().splitlines()[-1])
    assert doc["cli_hits"] and not doc["mcp_error"]
    assert doc["after_cli"] is False and doc["after_mcp"] is False
