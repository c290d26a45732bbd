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

.PHONY: test demo lint clean

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

test: lint
	$(PY) -m pytest

demo: $(VENV)/.installed-base
	$(VENV)/bin/attnmt data stats configs/demo.yaml

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
