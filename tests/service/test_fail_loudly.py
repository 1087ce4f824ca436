"""Issue 18 point 2: mistakes fail loudly and lose nothing (ingest roots, empty builds, query parameters, eval)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from ..conftest import DATA, free_port

pytestmark = pytest.mark.slow


def kwiki(*args: str, cwd) -> subprocess.CompletedProcess:
    exe = shutil.which("kwiki")
    assert exe, "the kwiki console script is not installed"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KWIKI_")} | {"KWIKI_PORT": str(free_port())}
    return subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


def _built(tmp_path, embedder, embed_cache):
    from kwiki.index.build import build_index
    from kwiki.ingest.corpus import CorpusRoot

    index = tmp_path / "index"
    return index, build_index(index, [CorpusRoot("mini", DATA / "mini")], embedder=embedder, cache_dir=embed_cache)


# ------------------------------------------------------------------ ingest
def test_a_corpus_root_that_does_not_exist_is_exit_2_before_anything_is_built(tmp_path):
    out = kwiki("ingest", "--corpus", str(DATA / "mini"), "--corpus", str(tmp_path / "typo"),
                "--index-dir", str(tmp_path / "index"), cwd=tmp_path)
    assert out.returncode == 2 and f"no corpus folder at {tmp_path / 'typo'}" in out.stderr
    assert "hint: give a folder in the KernelWiki layout" in out.stderr
    assert not (tmp_path / "index").exists()  # no lock file, no builds folder, nothing


def test_a_build_of_no_page_never_replaces_one_with_pages(tmp_path, embedder, embed_cache):
    from kwiki.errors import EmptyBuild
    from kwiki.index.build import build_index, current_build
    from kwiki.ingest.corpus import CorpusRoot

    index, first = _built(tmp_path, embedder, embed_cache)
    empty = tmp_path / "empty"
    (empty / "wiki").mkdir(parents=True)
    with pytest.raises(EmptyBuild) as caught:
        build_index(index, [CorpusRoot("empty", empty)], embedder=embedder, cache_dir=embed_cache)
    assert first.manifest.build_id in caught.value.message and caught.value.hint
    assert current_build(index).name == first.manifest.build_id
    assert [p.name for p in (index / "builds").iterdir()] == [first.manifest.build_id]  # no .partial either
    out = kwiki("ingest", "--corpus", str(empty), "--index-dir", str(index), cwd=tmp_path)
    assert out.returncode == 2 and "the build read no page" in out.stderr and "is kept" in out.stderr


def test_skipped_roots_are_named_even_when_the_index_is_up_to_date(tmp_path, embedder, embed_cache):
    index, first = _built(tmp_path, embedder, embed_cache)
    parent = tmp_path / "not-a-corpus"
    (parent / "notes").mkdir(parents=True)
    out = kwiki("ingest", "--corpus", f"mini={DATA / 'mini'}", "--corpus", str(parent), "--index-dir", str(index),
                cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "index is up to date" in out.stderr
    assert f"skipped root not-a-corpus ({parent})" in out.stderr and "not a KernelWiki-layout corpus" in out.stderr
    doc = json.loads(kwiki("ingest", "--corpus", f"mini={DATA / 'mini'}", "--corpus", str(parent), "--index-dir",
                           str(index), "--json", cwd=tmp_path).stdout)
    assert doc["unchanged"] and [p["path"] for p in doc["skipped_roots"]] == [str(parent)]


# ------------------------------------------------------------------ query parameters
@pytest.mark.parametrize("path, params, known", [
    ("/search", {"q": "tail", "archh": "H100"}, "arch, architecture, confidence"),
    ("/health", {"verbose": "1"}, None),
    ("/signals", {"format": "csv"}, None),
    ("/pages/pattern-tail-effect", {"section": "x"}, None),
    ("/ledger", {"state": "rejected"}, "applies_to, kernel, status, task"),
    ("/ledger/search", {"q": "tail", "arch": "H100"}, "architecture"),
])
def test_unknown_query_parameters_are_400_naming_the_known_ones(http, path, params, known):
    r = http.get(path, params=params)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == "bad_request" and "unknown query parameter" in err["message"]
    assert (known in err["hint"]) if known else err["hint"] == "this endpoint takes no query parameters"


def test_arch_is_the_short_form_of_architecture(http):
    short = http.get("/search", params={"q": "tail effect", "arch": "H100", "k": 5}).json()
    long = http.get("/search", params={"q": "tail effect", "architecture": "H100", "k": 5}).json()
    assert short["filters"] == long["filters"] == {"architecture": ["sm90", "sm90a"]}
    assert [h["id"] for h in short["hits"]] == [h["id"] for h in long["hits"]]


@pytest.mark.parametrize("name", ["arch", "architecture"])
def test_an_unknown_architecture_is_400_naming_the_valid_ones(http, name):
    r = http.get("/search", params={"q": "tail", name: "zzz"})
    err = r.json()["error"]
    assert r.status_code == 400 and err["message"] == "unknown architecture 'zzz'"
    assert "sm90" in err["hint"] and "sm100" in err["hint"]


# ------------------------------------------------------------------ eval
def test_eval_checks_every_corpus_first_shows_progress_and_keeps_what_finished(tmp_path, monkeypatch):
    """The second suite fails while its index is built: the first suite's results are on disk, with a stamp that
    says what did not finish, and every step was reported as it ran."""
    from kwiki.errors import BadRequest
    from kwiki.evals import command

    with pytest.raises(BadRequest, match="corpus for suite 'kernelwiki' not found"):
        command.run_eval(["corpus", "kernelwiki"], ["bm25"], tmp_path / "idx", kernelwiki=tmp_path / "nowhere",
                         out_dir=tmp_path / "runs")
    assert not (tmp_path / "idx").exists() and not (tmp_path / "runs").exists()  # nothing started

    corpus_questions = [q for q in command.load_suite("corpus") if q.split == "test"][:5]
    monkeypatch.setattr(command, "SUITE_ROOTS", {"corpus": ("mini", DATA / "mini"), "kernelwiki": ("mini", DATA / "mini")})
    monkeypatch.setattr(command, "load_suite", lambda suite: corpus_questions)
    real_index = command.suite_index

    def second_fails(suite, *args, **kwargs):
        if suite == "kernelwiki":
            raise RuntimeError("stopped while indexing the second suite")
        return real_index(suite, *args, **kwargs)

    monkeypatch.setattr(command, "suite_index", second_fails)
    heard: list[tuple[str, int, int]] = []
    asked: list[str] = []
    with pytest.raises(RuntimeError, match="second suite"):
        command.run_eval(["corpus", "kernelwiki"], ["bm25"], tmp_path / "idx", out_dir=tmp_path / "runs",
                         progress=lambda name, total: asked.append(name), stage=lambda *a: heard.append(a))
    assert ("corpus: index", 1, 1) in heard and any(label == "corpus: read" for label, _, _ in heard)
    assert asked == ["corpus"] * len(corpus_questions)
    (run,) = (tmp_path / "runs").iterdir()
    doc = json.loads((run / "results.json").read_text())
    assert list(doc["suites"]) == ["corpus"] and doc["stamp"]["incomplete"] == ["kernelwiki"]
    assert (run / "report.md").exists()


def test_eval_cli_refuses_a_missing_suite_corpus_at_once(tmp_path):
    out = kwiki("eval", "--suite", "kernelwiki", "--kernelwiki", str(tmp_path / "nowhere"), cwd=tmp_path)
    assert out.returncode == 2 and "corpus for suite 'kernelwiki' not found" in out.stderr


def test_eval_refuses_an_unknown_question_file_before_any_work(tmp_path):
    """A mistyped ``--questions`` stem is an error naming the files there are, never an empty run."""
    from kwiki.errors import BadRequest
    from kwiki.evals import command

    with pytest.raises(BadRequest, match="no question file 'corpus-blind99'") as err:
        command.run_eval(["corpus"], ["bm25"], tmp_path / "idx", files=["corpus-blind99"], out_dir=tmp_path / "runs")
    assert "corpus-blind5" in (err.value.hint or "")
    assert not (tmp_path / "idx").exists() and not (tmp_path / "runs").exists()
