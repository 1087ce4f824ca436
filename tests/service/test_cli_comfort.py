"""The command line's comforts: version, shell completion from typer, errors that say what to do."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest


def kwiki(*args: str, cwd, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    exe = shutil.which("kwiki")
    assert exe, "the kwiki console script is not installed"
    return subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200", **(env or {})})


def test_version(tmp_path):
    from kwiki import __version__

    out = kwiki("--version", cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == f"kwiki {__version__}"


def test_shell_completion(tmp_path):
    # The script `kwiki --show-completion` prints for bash. That flag detects the shell from the process tree, which
    # a test run under nohup or CI may not have; the completion variable names the shell and asks for the same script.
    script = kwiki(cwd=tmp_path, env={"_KWIKI_COMPLETE": "source_bash"})
    assert script.returncode == 0 and "_kwiki_completion" in script.stdout
    # What the installed script asks at a TAB: the sub-commands starting with what was typed.
    words = kwiki(cwd=tmp_path, env={"_KWIKI_COMPLETE": "complete_bash", "COMP_WORDS": "kwiki m", "COMP_CWORD": "1"})
    assert words.stdout.split() == ["mcp"]


@pytest.mark.parametrize("args", [["search", "tail effect"], ["page", "pattern-tail-effect"], ["search", "x", "--json"]])
def test_no_index_says_run_ingest(tmp_path, args):
    out = kwiki(*args, "--index-dir", str(tmp_path / "nothing"), cwd=tmp_path)
    assert out.returncode == 2
    assert "no index" in out.stderr and "kwiki ingest" in out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""


def test_mcp_command_is_registered(tmp_path):
    out = kwiki("mcp", "--help", cwd=tmp_path)
    assert out.returncode == 0 and "--http" in out.stdout and "--port" in out.stdout
