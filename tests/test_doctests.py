"""Every docstring example of the packages runs, under the module's installed name (``kwiki.index.build``, not
``index.build``: pytest's ``--doctest-modules`` would import each file a second time under its folder's name).

An example that needs a built index, the model or a file of the caller's is marked ``# doctest: +SKIP`` where
it stands; everything else must print what it says.
"""

from __future__ import annotations

import doctest
import importlib

import pytest

from .conftest import REPO

#: top-level folder -> the package it installs as (pyproject's package-dir)
PACKAGES = {"kwiki": "kwiki", "ingest": "kwiki.ingest", "ledger": "kwiki.ledger", "index": "kwiki.index",
            "service": "kwiki.service", "profiling": "kwiki.profiling", "evals": "kwiki.evals"}


def _modules_with_examples() -> list[str]:
    out = []
    for folder, package in PACKAGES.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            if ">>>" not in path.read_text(encoding="utf-8"):
                continue
            parts = path.relative_to(REPO / folder).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            out.append(".".join((package, *parts)))
    return out


MODULES = _modules_with_examples()


def test_the_packages_have_examples():
    assert len(MODULES) >= 10


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name, monkeypatch):
    monkeypatch.chdir(REPO)  # examples name files of the checkout (tests/data/...)
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = [t for t in finder.find(module, name) if t.examples]
    for test in tests:
        runner.run(test, out=lambda text: None)
    failed, attempted = runner.summarize(verbose=False)
    if failed:
        report: list[str] = []
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        for test in tests:
            runner.run(test, out=report.append)
        pytest.fail(f"{failed} of {attempted} examples failed in {name}:\n" + "".join(report)[-4000:])
