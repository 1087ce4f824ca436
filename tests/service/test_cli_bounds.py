"""Issue 20, Low 10 and 15: ``kwiki diagnose PATH`` reads at most the upload limit and never blocks;
``kwiki serve --build-if-missing`` builds in a child process, so the server does not keep the build's memory."""

from __future__ import annotations

import gzip
import os
import subprocess

import pytest

from ..robustness.conftest import cli_env, kwiki_cmd

RAW = "ID,Kernel Name,gpu__time_duration.sum,launch__grid_size,launch__sm_count\n,,nsecond,,\n0,k,1000,32,132\n"


def _diagnose(path: str, tmp_path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(kwiki_cmd("diagnose", path, "--index-dir", str(tmp_path / "none")), capture_output=True,
                          text=True, timeout=120, env=cli_env() | env)


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "corrupt-gzip", "too-big"])
def test_cli_diagnose_refuses_what_http_refuses(tmp_path, kind):
    if kind == "dev-zero":
        path, env = "/dev/zero", {}
    elif kind == "fifo":
        path, env = str(tmp_path / "export.csv"), {}
        os.mkfifo(path)  # reading it would block for ever
    elif kind == "corrupt-gzip":
        data = bytearray(gzip.compress(RAW.encode() * 50))
        data[10:20] = b"\xff" * 10
        path, env = str(tmp_path / "x.csv.gz"), {}
        open(path, "wb").write(bytes(data))
    else:
        path, env = str(tmp_path / "big.csv"), {"KWIKI_MAX_UPLOAD_BYTES": "2048"}
        open(path, "w").write(RAW + "1,k,1000,32,132\n" * 200)
    proc = _diagnose(path, tmp_path, **env)
    assert proc.returncode == 2, proc.stderr
    assert "error:" in proc.stderr and "Traceback" not in proc.stderr


def test_cli_diagnose_still_reads_a_file(tmp_path):
    path = tmp_path / "ok.csv"
    path.write_text(RAW)
    proc = _diagnose(str(path), tmp_path)
    assert proc.returncode == 0 and "small-grid" in proc.stdout, proc.stderr


def test_serve_builds_a_missing_index_in_a_child_process(tmp_path, monkeypatch):
    import uvicorn
    from typer.testing import CliRunner

    import kwiki.index.build
    from kwiki.service.cli import app

    calls: list[list[str]] = []
    monkeypatch.setattr(subprocess, "run", lambda args, check=False: calls.append(args) or subprocess.CompletedProcess(args, 0))
    monkeypatch.setattr(uvicorn.Server, "run", lambda self: None)
    monkeypatch.setattr(kwiki.index.build, "build_index", lambda *a, **k: pytest.fail("built in the serving process"))
    result = CliRunner().invoke(app, ["serve", "--build-if-missing", "--index-dir", str(tmp_path / "idx")])
    assert result.exit_code == 0, result.output
    (args,) = calls
    assert args[3:6] == ["ingest", "--index-dir", str(tmp_path / "idx")]
