# Every target creates the virtual environment it needs; a fresh clone needs nothing else.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
EXTRAS ?= dev

.DEFAULT_GOAL := help
.PHONY: help install run test test-fast lint bench clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
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

lint: $(STAMP) ## ruff and mypy
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: $(STAMP) ## Every benchmark, each with its same-run baseline (bench-*.json)
	$(BIN)/segmentstore bench append --json bench-append.json
	$(BIN)/segmentstore bench read --json bench-read.json
	$(BIN)/segmentstore bench writer --json bench-writer.json
	$(BIN)/segmentstore bench offset-at --json bench-offset-at.json
	$(BIN)/segmentstore bench http --json bench-http.json
	$(BIN)/segmentstore bench spark --json bench-spark.json

clean: ## Remove the virtual environment and caches
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
