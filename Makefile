# Every target creates the virtual environment it needs; a fresh clone needs nothing else.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
EXTRAS ?= dev

.DEFAULT_GOAL := help
.PHONY: help install run test test-fast test-spark-cluster lint typecheck-tree bench clean

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

test: $(STAMP) ## Run the whole test suite
	$(BIN)/pytest -q

test-fast: $(STAMP) ## Run the suite without the slow kill and state-machine tests
	$(BIN)/pytest -q -m "not slow"

test-spark-cluster: $(STAMP) ## The Spark jobs on a standalone cluster (Master and Worker on 127.0.0.1) over S3 (moto)
	$(BIN)/pytest -q -m standalone

lint: $(STAMP) typecheck-tree ## ruff and mypy
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The package as it installs (setup.py maps tier1/ to segmentstore.tier1, ...), as symbolic
# links, for mypy, which cannot follow that mapping.
typecheck-tree:
	@rm -rf .typecheck && mkdir -p .typecheck/segmentstore
	@ln -s $(CURDIR)/segmentstore/* .typecheck/segmentstore/
	@for folder in tier1 tier2 cache api jobs; do \
		ln -s $(CURDIR)/$$folder .typecheck/segmentstore/$$folder; done

bench: $(STAMP) ## Every benchmark, each with its same-run baseline (bench-*.json)
	$(BIN)/segmentstore bench append --json bench-append.json
	$(BIN)/segmentstore bench read --json bench-read.json
	$(BIN)/segmentstore bench writer --json bench-writer.json
	$(BIN)/segmentstore bench offset-at --json bench-offset-at.json
	$(BIN)/segmentstore bench http --json bench-http.json
	$(BIN)/segmentstore bench tier1 --json bench-tier1.json
	$(BIN)/segmentstore bench spark --json bench-spark.json

clean: ## Remove the virtual environment and caches
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis .typecheck
