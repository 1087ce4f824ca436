"""kwiki installed as a tool, the way `pipx install .` or `uv tool install .` does it: the wheel built from this
checkout, installed into a fresh virtual environment, run from another directory. The embedded corpus must come
from inside the package and the index must go to the user's data directory (or `KWIKI_INDEX_DIR`).

Offline: the wheel is built without build isolation (the test venv's setuptools) and installed with --no-deps;
the fresh venv finds the dependencies through a .pth line naming the test venv's site-packages (a plain path
line: the test venv's editable finder for the checkout is not loaded, so `kwiki` can only come from the wheel)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from ..conftest import REPO

pytestmark = pytest.mark.slow


def _run(args: list[str], cwd: Path, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def tool(tmp_path_factory, corpus_index, embed_cache):
    """(bin folder of the fresh venv, its environment, a working directory outside the checkout, the data dir)."""
    from kwiki.settings import Settings

    root = tmp_path_factory.mktemp("tool")
    # Built from a copy: setuptools writes build/ and *.egg-info beside the sources, and reuses a stale build/lib.
    src = root / "src"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(".git", ".venv", ".kwiki", "build", "dist", "*.egg-info", "__pycache__",
                                                             "test-output", "tests", "benchmarks", ".hypothesis"))
    wheels = root / "wheels"
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), str(src)],
                 cwd=root, env=dict(os.environ))
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = wheels.glob("kwiki-*.whl")
    venv.create(root / "venv", with_pip=True)  # ensurepip: pip's own bundled wheel, offline
    bin_dir = root / "venv" / "bin"
    site = Path(_run([str(bin_dir / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     cwd=root, env={"PATH": "/usr/bin:/bin"}).stdout.strip())
    (site / "test-venv-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    installed = _run([str(bin_dir / "pip"), "install", "-q", "--no-deps", "--no-index", str(wheel)], cwd=root,
                     env={"PATH": f"{bin_dir}:/usr/bin:/bin", "PIP_CONFIG_FILE": os.devnull})
    assert installed.returncode == 0, installed.stderr[-3000:]
    elsewhere = root / "elsewhere"
    elsewhere.mkdir()
    data = root / "xdg-data"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(root / "home"), "XDG_DATA_HOME": str(data), "HF_HUB_OFFLINE": "1",
           "KWIKI_MODEL_CACHE": str(Settings().model_cache)}  # the ONNX export, made once per machine
    # The build's embedding cache, seeded from the session's own build of the same corpus: the ingest below then
    # embeds nothing (the embedding itself is tested elsewhere); it still reads, chunks and indexes every page.
    cache = data / "kwiki" / "index" / "cache"
    cache.mkdir(parents=True)
    for f in embed_cache.glob("*.npz"):
        shutil.copy(f, cache / f.name)
    return bin_dir, env, elsewhere, data


def test_installed_kwiki_is_the_wheel_with_its_corpus_inside(tool):
    bin_dir, env, elsewhere, _ = tool
    out = _run([str(bin_dir / "python"), "-c", "import json, kwiki, kwiki.settings as s; print(json.dumps("
                "[kwiki.__file__, s.IN_CHECKOUT, str(s.EMBEDDED_CORPUS), str(s.load_settings().index_dir)]))"], elsewhere, env)
    assert out.returncode == 0, out.stderr
    module, in_checkout, corpus, index_dir = json.loads(out.stdout)
    venv_dir = bin_dir.parent
    assert Path(module).is_relative_to(venv_dir) and not in_checkout
    assert Path(corpus).is_relative_to(venv_dir) and (Path(corpus) / "wiki" / "patterns" / "tail-effect.md").is_file()
    assert index_dir == env["XDG_DATA_HOME"] + "/kwiki/index"


def test_page_and_search_from_another_directory(tool):
    bin_dir, env, elsewhere, data = tool
    missing = _run(["kwiki", "page", "pattern-tail-effect"], elsewhere, env)
    assert missing.returncode != 0 and "kwiki ingest" in missing.stderr + missing.stdout  # no index yet: says what to run
    built = _run(["kwiki", "ingest", "--json"], elsewhere, env)
    assert built.returncode == 0, built.stderr[-3000:]
    report = json.loads(built.stdout)
    assert Path(report["path"]).is_relative_to(data / "kwiki" / "index") and report["manifest"]["counts"]["pages"] >= 200
    (name, root), = report["manifest"]["corpora"].items()
    assert name == "kwiki" and Path(root).is_relative_to(bin_dir.parent)  # the corpus inside the package, named as in a checkout
    page = _run(["kwiki", "page", "pattern-tail-effect"], elsewhere, env)
    assert page.returncode == 0, page.stderr[-2000:]
    assert "tail effect" in page.stdout.lower()
    search = _run(["kwiki", "search", "only 8 of my 132 SMs are busy near the end", "--json"], elsewhere, env)
    assert search.returncode == 0, search.stderr[-2000:]
    assert json.loads(search.stdout)["hits"][0]["id"] == "pattern-tail-effect"
    assert list(elsewhere.iterdir()) == []  # nothing written to the working directory


def test_validate_checks_the_packaged_corpus_from_anywhere(tool):
    bin_dir, env, elsewhere, _ = tool
    out = _run(["kwiki", "validate", "--json"], elsewhere, env)
    problems = json.loads(out.stdout)
    # the same verdict as on the checkout's corpus/ (it was `corpus` relative to the working directory: not found)
    from kwiki.ingest.validate import validate_corpus

    assert not any("not a folder" in json.dumps(p) for p in problems)
    assert len(problems) == len(validate_corpus(REPO / "corpus")) and out.returncode in (0, 1)


def test_index_dir_setting_wins(tool, corpus_index):
    bin_dir, env, elsewhere, _ = tool
    out = _run(["kwiki", "page", "pattern-tail-effect", "--json"], elsewhere, env | {"KWIKI_INDEX_DIR": str(corpus_index)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout)["id"] == "pattern-tail-effect"
