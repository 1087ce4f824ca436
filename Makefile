# kwiki: two commands for a fresh machine.
#   make serve   venv + install + build the index from corpus/ if there is none + serve on 127.0.0.1:8000
#   make test    venv + install (with test extras) + make check + run the whole test suite
#   make check   ruff (lint and import order) and mypy on the public seams
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
export HF_HUB_OFFLINE = 1
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: serve test check install install-test index bench eval clean

#: The modules whose types are checked: every package (capture scripts under fixtures/ excepted, pyproject.toml).
TYPED = kwiki.errors kwiki.settings kwiki.ingest kwiki.ledger kwiki.index kwiki.service kwiki.profiling kwiki.evals
#: mypy cannot follow setuptools' package-dir mapping (kwiki.index -> index/): it reads a tree of links instead.
TYPETREE = .kwiki/typecheck

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install -q -e .

install-test: $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'

index: install
	$(BIN)/kwiki ingest

serve: install
	$(BIN)/kwiki serve --build-if-missing

test: install-test check
	$(BIN)/python -m pytest -q

check: install-test
	$(BIN)/ruff check .
	rm -rf $(TYPETREE) && mkdir -p $(TYPETREE)/kwiki
	ln -s $(abspath kwiki)/*.py $(TYPETREE)/kwiki/
	for d in ingest ledger index service profiling evals; do ln -s $(abspath .)/$$d $(TYPETREE)/kwiki/$$d; done
	cd $(TYPETREE) && MYPYPATH=. $(abspath $(BIN))/mypy --config-file $(abspath pyproject.toml) \
		--python-executable $(abspath $(BIN))/python $(addprefix -p ,$(TYPED))

bench: install-test
	$(BIN)/python benchmarks/search_latency.py

eval: install
	$(BIN)/kwiki eval --suite all

clean:
	rm -rf .kwiki
