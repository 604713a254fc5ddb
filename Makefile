# Two entry points (README): `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell sha256sum pyproject.toml | cut -c1-12)

.PHONY: setup demo test lint bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	rm -f $(VENV)/.installed-* && touch $@

demo: setup
	$(VENV)/bin/quantgate demo -o demo-out

lint: setup
	$(VENV)/bin/ruff check quantgate tests benchmarks

test: setup lint
	$(PY) -m pytest -q -p no:cacheprovider

bench: setup
	$(PY) benchmarks/scoring_throughput.py
	$(PY) benchmarks/client_overhead.py

clean:
	rm -rf demo-out .pytest_cache .ruff_cache
