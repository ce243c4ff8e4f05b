# `make demo` and `make test` are the two commands of the README; both set up .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup demo test lint bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: requirements.txt requirements-dev.txt constraints.txt provider/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt -c constraints.txt
	touch $@

demo: setup
	$(BIN)/python -m actions_runners_simulator demo

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint
	$(BIN)/python -m pytest

bench: setup
	$(BIN)/python bench/replace.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
