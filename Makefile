# cogmill developer commands. `make demo` and `make test` work on a fresh Debian machine.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export COGMILL_TEST_REDIS_URL ?= redis://127.0.0.1:6390/0
export COGMILL_TEST_NEO4J_URI ?= bolt://127.0.0.1:7697

.PHONY: install lock demo test test-fast services services-stop lint bench clean

# Exactly the versions in uv.lock (hashes checked; what the lock does not list is removed).
# `--locked` fails when pyproject.toml changed without `make lock`. uv itself is in the lock.
$(BIN)/cogmill: pyproject.toml uv.lock
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	test -x $(BIN)/uv || $(BIN)/python -m pip install -q uv==0.13.9
	UV_PROJECT_ENVIRONMENT=$(VENV) $(BIN)/uv sync -q --locked --extra dev
	touch $@

install: $(BIN)/cogmill

# After a change to the dependencies in pyproject.toml: resolve them again into uv.lock.
lock: install
	$(BIN)/uv lock

demo: install
	$(BIN)/cogmill demo

services:
	deploy/services.sh start

services-stop:
	deploy/services.sh stop

# Everything, with real Redis and Neo4j started (and stopped) around the run.
test: install
	deploy/install-system.sh
	deploy/services.sh start
	COGMILL_REQUIRE_SERVICES=1 $(BIN)/pytest -q; status=$$?; deploy/services.sh stop; exit $$status

# Without services: their tests are skipped.
test-fast: install
	$(BIN)/pytest -q -m "not services"

lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy core pipelines retrieval runtime workers api cogmill_client

bench: install
	$(BIN)/python bench/ingest_musique.py

clean:
	rm -rf .cogmill .services
