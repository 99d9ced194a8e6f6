"""What the benches share: the repository on `sys.path`, the test services' addresses.

A bench runs as a script (`.venv/bin/python bench/NAME.py`, which puts bench/ on `sys.path`)
or as a module (`python -m bench.NAME`, which puts the working directory there): each one
puts the repository on `sys.path` itself and then imports its siblings as `bench.NAME`, so
both work. The services are the ones `eval "$(deploy/services.sh start)"` starts and exports.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.services import neo4j_problem, redis_problem  # noqa: E402

# deploy/services.sh's defaults, used when its exports are not in the environment.
DEFAULT_REDIS_URL = "redis://127.0.0.1:6390/0"
DEFAULT_NEO4J_URI = "bolt://127.0.0.1:7697"
START_HINT = 'start them with `eval "$(deploy/services.sh start)"`'


def services() -> tuple[str, str]:
    """The Redis URL and Neo4j URI (COGMILL_TEST_REDIS_URL, COGMILL_TEST_NEO4J_URI, else
    deploy/services.sh's defaults) once both answer; exits saying what to do otherwise."""
    redis_url = os.environ.get("COGMILL_TEST_REDIS_URL") or DEFAULT_REDIS_URL
    neo4j_uri = os.environ.get("COGMILL_TEST_NEO4J_URI") or DEFAULT_NEO4J_URI
    problems = [p for p in (redis_problem(redis_url), neo4j_problem(neo4j_uri)) if p]
    if problems:
        sys.exit(f"{'; '.join(problems)}: {START_HINT}")
    return redis_url, neo4j_uri
