# kwiki: two commands for a fresh machine.
#   make serve   venv + install + build the index from corpus/ if there is none + serve on 127.0.0.1:8000
#   make test    venv + install (with test extras) + run the whole test suite
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
export HF_HUB_OFFLINE = 1
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: serve test install install-test index bench eval clean

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

test: install-test
	$(BIN)/python -m pytest -q

bench: install-test
	$(BIN)/python benchmarks/search_latency.py

eval: install
	$(BIN)/kwiki eval --suite all

clean:
	rm -rf .kwiki
