"""SKILL.md cannot drift: its frontmatter is checked, and every command in its fenced ``bash`` blocks is run
against a real index (and the real HTTP server for curl), with each ``# expect: PATH == VALUE`` line under a
command checked against the command's JSON output. Blocks marked ``bash norun`` (ingest, serve, mcp) are
checked against ``kwiki <command> --help``: the command and every option used must exist."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field

import pytest
import yaml

from ..conftest import REPO

SKILL = REPO / "SKILL.md"
_FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", re.M | re.S)
_EXPECT = re.compile(r"^#\s*expect:\s*(\S+)\s*==\s*(.+?)\s*$")


@dataclass
class Command:
    line: str
    run: bool
    expects: list[tuple[str, str]] = field(default_factory=list)


def skill_commands() -> list[Command]:
    out: list[Command] = []
    for info, body in _FENCE.findall(SKILL.read_text(encoding="utf-8")):
        words = info.split()
        if not words or words[0] != "bash":
            continue
        for raw in body.splitlines():
            line = raw.strip()
            if not line:
                continue
            m = _EXPECT.match(line)
            if m:
                assert out, f"'{line}' comes before any command"
                out[-1].expects.append((m.group(1), m.group(2)))
            elif not line.startswith("#"):
                out.append(Command(line, run="norun" not in words[1:]))
    return out


COMMANDS = skill_commands()


def lookup(doc, path: str):
    """``hits[0].id`` -> doc["hits"][0]["id"]."""
    for token in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        doc = doc[int(token[1:-1])] if token.startswith("[") else doc[token]
    return doc


def test_frontmatter():
    text = SKILL.read_text(encoding="utf-8")
    assert text.startswith("---\n")
    meta = yaml.safe_load(text.split("---\n", 2)[1])
    assert meta["name"] == "kwiki"
    assert 100 < len(meta["description"]) <= 1024  # what agents read to decide whether to load the skill
    tools = meta["allowed-tools"]
    assert "Bash(kwiki:*)" in tools and "mcp__kwiki__search" in tools
    for section in ("When to use it", "When not to use it", "Reading results", "Worked examples"):
        assert f"## {section}" in text
    assert sum(c.run for c in COMMANDS) >= 8 and sum(bool(c.expects) for c in COMMANDS) >= 6


@pytest.mark.slow
@pytest.mark.parametrize("cmd", [c for c in COMMANDS if c.run], ids=lambda c: c.line[:60])
def test_command_runs_and_answers_as_documented(cmd, corpus_index, server):
    assert cmd.line.startswith(("kwiki ", "curl ")), f"SKILL.md commands are kwiki or curl: {cmd.line}"
    if cmd.line.startswith("kwiki "):
        assert shutil.which("kwiki"), "the kwiki console script is not installed"
    line = cmd.line.replace("http://127.0.0.1:8000", server.url)
    env = {**os.environ, "KWIKI_INDEX_DIR": str(corpus_index), "HF_HUB_OFFLINE": "1", "KWIKI_EMBED_THREADS": "1"}
    out = subprocess.run(line, shell=True, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, f"{cmd.line}\n{out.stderr[-2000:]}"
    assert out.stdout.strip(), f"{cmd.line} printed nothing"
    if "--json" in line or line.startswith("curl "):
        doc = json.loads(out.stdout)
        assert not (isinstance(doc, dict) and "error" in doc), doc
        for path, want in cmd.expects:
            got = lookup(doc, path)
            assert str(got).lower() == want.lower(), f"{cmd.line}: {path} is {got!r}, SKILL.md says {want!r}"
    else:
        assert not cmd.expects, "expectations need --json output"


@pytest.mark.parametrize("cmd", [c for c in COMMANDS if not c.run], ids=lambda c: c.line[:60])
def test_setup_command_exists_with_its_options(cmd):
    args = shlex.split(cmd.line)
    assert args[0] == "kwiki" and len(args) > 1
    exe = shutil.which("kwiki")
    assert exe, "the kwiki console script is not installed"
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}
    help_out = subprocess.run([exe, args[1], "--help"], capture_output=True, text=True, timeout=120, env=env)
    assert help_out.returncode == 0, f"kwiki {args[1]}: {help_out.stderr}"
    for opt in (a for a in args[2:] if a.startswith("--")):
        assert opt in help_out.stdout, f"kwiki {args[1]} has no option {opt}"
