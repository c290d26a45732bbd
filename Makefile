# Two commands for a newcomer: `make test` and `make demo`. Both create .venv on first use.
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
# torch is pinned through constraints.txt: a bare `torch` spec would pull a multi-GB CUDA build here.
PIP_INSTALL := $(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt

# Tests and the demo read corpora from ../shared/data when it exists (no network).
ifneq ($(wildcard ../shared/data),)
export ATTNMT_DATA ?= $(abspath ../shared/data)
endif

.PHONY: test demo lint typecheck notebook docs clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed-base: pyproject.toml constraints.txt | $(VENV)/bin/python
	$(PIP_INSTALL) torch==2.13.0
	$(PIP_INSTALL) -e .
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed-base
	$(PIP_INSTALL) -e '.[dev]'
	touch $@

lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check .

# mypy over attnmt/ as pyproject.toml configures it (check_untyped_defs, warn_unused_ignores)
typecheck: $(VENV)/.installed-dev
	$(VENV)/bin/mypy

# The suite in one process per core, at most 4 (each test runs one torch thread), each test file
# kept in one process so that its module fixtures (small trained runs) are made once; then the
# notebook alone, the longest test by far, whose kernel runs torch on every core (run beside
# other tests, its threads and theirs contend and it runs far slower); then the share of quoted
# figures that rest on runs older than the provenance rules, and every verdict word recomputed.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); echo $$(( n < 4 ? n : 4 )))

test: lint typecheck
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not notebook"
	$(PY) -m pytest tests/test_notebook.py -m notebook
	$(PY) -m tools.quote --share README.md docs/*.md docs/*/*.md
	$(PY) -m tools.verdicts README.md CHANGELOG.md docs/*.md docs/*/*.md  # every verdict word and its evidence

# The documentation site (mkdocs.yml) into site/, every warning an error: a broken link or anchor,
# a page missing from the navigation, an API reference that does not resolve.
docs: $(VENV)/.installed-dev
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

# Execute the guided notebook and save it with its outputs (commit the result).
notebook: $(VENV)/.installed-dev
	$(PY) notebooks/execute.py

# Train English->French (Tatoeba, short sentences) for 4 to 6 minutes on the CPU, then report test
# BLEU and show translations with their attention. A finished run is reused, never overwritten.
demo: $(VENV)/.installed-base
	$(VENV)/bin/attnmt demo   # the same as a pip user's `attnmt demo`: train (once), evaluate, translate

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache site
