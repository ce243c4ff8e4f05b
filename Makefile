# `make demo` and `make test` are the two commands of the README; both set up .venv and the tools below first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The pulumi CLI, kube-apiserver with etcd, pulumi-resource-kubernetes, actionlint... and the listener's image: each
# found, or built once into a cache (tools/*/build.sh), all at once; `tools` prints their folders as environment
# settings.
TOOLS := $(BIN)/python -m actions_runners_simulator tools

.PHONY: setup demo test suite lint docs bench soak clean plugin sdk wheel listener-image

setup: $(VENV)/.installed

# uv installs what pip would (the same files, pins and editable provider/), compiled, in a quarter of pip's time.
$(VENV)/.installed: requirements.txt requirements-dev.txt constraints.txt provider/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check uv -c constraints.txt
	$(BIN)/uv pip install --quiet --python $(BIN)/python --compile-bytecode -r requirements-dev.txt -c constraints.txt
	touch $@

demo: setup
	$(BIN)/python -m actions_runners_simulator demo  # finds or builds the tools itself

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	gofmt -l tools | (! grep .) && (cd tools/pulumi && go vet ./language-python) && (cd tools/pulumi-languages && go vet ./...)

# The documentation site into site/; --strict (mkdocs.yml) fails on a broken link or anchor, or a page left out.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --quiet

# The whole of it timed, setting up .venv included; the suite says its own wall time and workers (tests/conftest.py).
test:
	@started=$$(date +%s); $(MAKE) --no-print-directory lint docs suite; status=$$?; took=$$(($$(date +%s) - started)); \
	echo "make test: $$((took / 60)) min $$((took % 60)) s wall time (setup, lint, docs and the suite), exit $$status"; \
	exit $$status

# The tests that measure time first, on their own (-n 0), then the rest on several workers at once: each `alone`
# test would otherwise stop every worker until it ran (tests/conftest.py).
suite: setup
	tools/listener-image/install-packages.sh
	tools=$$($(TOOLS)) && env $$tools $(BIN)/python -m pytest -n 0 -m alone && env $$tools $(BIN)/python -m pytest -m "not alone"

bench: setup
	tools/listener-image/install-packages.sh
	tools=$$($(TOOLS)) && env $$tools $(BIN)/python bench/replace.py && env $$tools $(BIN)/python bench/rotation.py && env $$tools $(BIN)/python bench/refill.py && env $$tools $(BIN)/python bench/scaleset.py

# 2,000 replacements and teardowns (or 10 minutes) under injected faults and killed providers: SOAK_ARGS="--seed S".
soak: setup
	tools/listener-image/install-packages.sh
	tools=$$($(TOOLS)) && env $$tools $(BIN)/python bench/soak.py $(SOAK_ARGS)

# The provider plugin's archive for this platform (its path on the last line), for
# `pulumi plugin install resource actions-runners VERSION --file ARCHIVE`.
plugin: setup
	tools/plugin/build.sh

# The package's wheel and sdist (the wheel's path on the last line), for `pip install WHEEL -c constraints.txt`.
wheel: setup
	tools/wheel.sh $(OUT)

# sdk/: the schema and the SDKs `pulumi package gen-sdk` makes of it; tests/test_plugin_sdks.py checks they are current.
sdk: setup
	tools=$$($(TOOLS) pulumi pulumi-languages) && env $$tools sh -c 'PATH=$$PULUMI_LANGUAGES_DIR:$$PULUMI_CLI_DIR:$$PATH tools/plugin/gen-sdk.sh'

# The RunnerScaleSet listener's OCI image, from Debian's packages and the pinned wheels (no base image): an OCI image
# layout whose tag is the version, "PATH DIGEST SIZE" on the last line. Needs mmdebstrap and umoci, which
# install-packages.sh installs with apt-get (as root, or with a sudo that asks no password) or says how to.
# OUT=DIR builds into DIR; else into a cache, where a later build of the same inputs finds it.
listener-image: setup
	tools/listener-image/install-packages.sh
	tools/listener-image/build.sh $(OUT)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache site
