# `make demo` and `make test` are the two commands of the README; both set up .venv and the pulumi CLI first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The pulumi CLI and its Python host: found on PATH, or built once from Go modules into a cache (tools/pulumi).
CLI := tools/pulumi/build.sh

.PHONY: setup demo test lint bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: requirements.txt requirements-dev.txt constraints.txt provider/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt -c constraints.txt
	touch $@

demo: setup
	$(BIN)/python -m actions_runners_simulator demo  # builds or finds the CLI itself

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	cd tools/pulumi && gofmt -l . | (! grep .) && go vet ./language-python

test: lint
	cli=$$($(CLI)) && PULUMI_CLI_DIR="$$cli" $(BIN)/python -m pytest

bench: setup
	$(BIN)/python bench/replace.py
	$(BIN)/python bench/rotation.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
