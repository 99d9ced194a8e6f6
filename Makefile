# cogmill developer commands. `make install`, `make check` and `make test` work on a fresh
# Debian machine with Python 3.11 and network access to PyPI.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# pytest-xdist workers: `auto` is one per core. The full suite waits on servers, worker
# processes and jobs much of the time: four workers (with the Neo4j server) keep two cores
# ~85% busy (CONTRIBUTING.md has the figures).
CHECK_WORKERS ?= auto
TEST_WORKERS ?= 4
FAST := not slow and not services
# A module's tests on one worker (tests/conftest.py groups them), modules in collection order:
# the longest (tests/e2e/faults, worker processes) start first.
XDIST := --dist loadgroup --no-loadscope-reorder
# Bytecode caches on, even where the environment turns them off: without them every test
# process and every `cogmill` process a test starts compiles the project again (seconds each).
export PYTHONDONTWRITEBYTECODE :=
export COGMILL_TEST_REDIS_URL ?= redis://127.0.0.1:6390/0
export COGMILL_TEST_NEO4J_URI ?= bolt://127.0.0.1:7697
# The tests' Neo4j compiles its JIT at C1 only: a run sends thousands of distinct short
# queries, and C2 compiling them was 40% of Neo4j's CPU in a full run; C1 alone cut Neo4j's
# CPU on a Neo4j-heavy subset by a fifth (CONTRIBUTING.md). Not for a long-lived database.
export COGMILL_NEO4J_JAVA_OPTS ?= -XX:TieredStopAtLevel=1

.PHONY: install demo check lint test test-fast lock services services-stop bench clean

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

# The loop every change runs first (about 2 minutes on two quiet cores): lint, types, then
# the fast tier (neither `slow` nor `services`, see tests/conftest.py) in parallel.
check: lint
	$(BIN)/pytest -q -n $(CHECK_WORKERS) $(XDIST) -m "$(FAST)"

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy core pipelines retrieval runtime workers api cogmill_client

# Everything, with real Redis and Neo4j started (and stopped) around the run.
test: install
	deploy/install-system.sh
	deploy/services.sh start
	COGMILL_REQUIRE_SERVICES=1 $(BIN)/pytest -q -n $(TEST_WORKERS) $(XDIST) \
		--durations=30; status=$$?; deploy/services.sh stop; exit $$status

# The fast tier alone, without lint.
test-fast: install
	$(BIN)/pytest -q -n $(CHECK_WORKERS) $(XDIST) -m "$(FAST)"

services:
	deploy/services.sh start

services-stop:
	deploy/services.sh stop

bench: install
	$(BIN)/python bench/ingest_musique.py

clean:
	rm -rf .cogmill .services
