"""`kwiki ingest --ledger DIR`: candidates go through the same index as the corpus pages."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from kwiki.service.cli import app
from tests.conftest import DATA

from .conftest import LEDGER

pytestmark = pytest.mark.slow


def test_ingest_with_a_ledger(tmp_path, ledger_mini_index, embed_cache):
    from kwiki.index.search import Searcher

    idx = tmp_path / "idx"
    shutil.copytree(embed_cache, idx / "cache")  # the session's vectors: this build embeds nothing new
    result = CliRunner().invoke(app, ["ingest", "-c", str(DATA / "mini"), "--ledger", str(LEDGER), "--index-dir", str(idx), "--json"])
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    assert "candidates.jsonl:21" in result.stderr  # the malformed line is reported, the rest indexed
    out = json.loads(result.stdout)
    assert out["report"]["pages_by_type"]["experience"] == 36
    assert out["manifest"]["corpora"]["ledger"] == str(LEDGER.resolve())
    s = Searcher.open(idx)
    assert s.page("cand-gemm-bf16-g08").title.startswith("[rejected] split-K")
    assert "ledger" in s.normalize_filters({"corpus": ["ledger"]}).corpus
