"""Settings: where the data lives, how jobs run, which stores hold what.

One part of `Settings` (core/settings/__init__.py); each field maps to `COGMILL_<FIELD>`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field


class DeploymentSettings(BaseModel):
    """Where the data lives, how jobs run, which stores hold what."""

    # Where
    # The data folder: the embedded graph, vectors and state, and the document files in both
    # modes (workers on other hosts need it on shared storage). A relative path is taken from
    # the working directory.
    home: Path = Field(default=Path(".cogmill"), description="Embedded data directory")
    # A label for the deployment (development, production); nothing reads it yet.
    environment: str = "development"

    # Orchestration
    # The Celery broker: `memory://` runs jobs on worker threads inside the cogmill process
    # (embedded); a Redis URL sends them to `cogmill worker` processes.
    broker_url: str = "memory://"
    # Celery's result backend (cogmill keeps no task results; job state is in the state store).
    result_backend: str = "cache+memory://"

    # Worker threads of an embedded process (the CLI, `cogmill serve`, `cogmill mcp`).
    worker_threads: int = Field(default=2, ge=1, le=64)
    # `cogmill serve` on the embedded broker runs jobs in its own worker threads; at this
    # niceness (Linux, per thread) they yield the cores to searches (0: same as the searches).
    serve_ingest_nice: int = Field(default=10, ge=0, le=19)

    # `cogmill serve` on Neo4j runs this many searches' retrievals at its start and after each
    # restart of the Neo4j server, so users' first searches meet it warm (0: none).
    serve_warm_up: int = Field(default=200, ge=0, le=10_000)

    # Documents per batch: one Celery chain each (see also segment_bytes).
    batch_size: int = Field(default=32, ge=1, le=10_000, description="Documents per batch")
    # How long a job's intermediate step outputs are kept in the state store (also a paused
    # job's parked work, which `jobs resume` needs).
    artifact_ttl_seconds: int = 86_400
    # A job that ended this many days ago is deleted with its keys (workers/retention.py; 0:
    # jobs are kept for ever).
    job_retention_days: float = Field(default=30.0, ge=0)

    # A message not acknowledged within this time is redelivered by Redis: keep it above the
    # longest task (the hard time limit) or long tasks run twice.
    visibility_timeout_seconds: int = Field(default=3600, ge=1)

    # Celery's soft and hard time limits of one task (the hard one kills it, on the prefork
    # pool only; see docs/architecture.md for the threads pool).
    task_soft_time_limit_seconds: int = Field(default=1800, ge=1)
    task_time_limit_seconds: int = Field(default=1900, ge=1)

    # A batch step delivered this many times (its worker died each time) is parked as failed.
    max_deliveries: int = Field(default=8, ge=1)
    # While another tenant's batches wait to start, a tenant's batches started and not yet
    # recorded (0: no cap); one over it goes back to its queue for `tenant_deferral_seconds`.
    tenant_batches_in_flight: int = Field(default=2, ge=0, le=10_000)
    tenant_deferral_seconds: float = Field(default=0.5, gt=0, le=60)

    # Every `sweep_interval_seconds` one worker re-publishes the batch steps that no live
    # worker has listed in its heartbeat (renewed every third of `worker_heartbeat_seconds`)
    # for a heartbeat period, and the unfinished batches of a job that made no progress for
    # `sweep_stall_seconds` with no step running and nothing queued (workers/sweeper.py).
    worker_heartbeat_seconds: float = Field(default=10.0, gt=0)
    sweep_interval_seconds: float = Field(default=5.0, gt=0)
    sweep_stall_seconds: float = Field(default=120.0, gt=0)

    # Stores
    # The graph (and catalog) in Neo4j instead of the SQLite file under `home`: its Bolt URI,
    # login and database, and the driver's connections per process.
    neo4j_uri: str | None = None
    neo4j_user: str = "neo4j"
    neo4j_password: str = ""
    neo4j_database: str = "neo4j"
    neo4j_pool_size: int = Field(default=50, ge=1)
    # Seconds after which Neo4j itself ends a CYPHER or NATURAL_LANGUAGE query's transaction.
    cypher_timeout_seconds: float = Field(default=30.0, gt=0, le=3600)

    # A Qdrant server for the vectors, and its API key.
    qdrant_url: str | None = None
    qdrant_api_key: str | None = None

    # auto: the Qdrant server when COGMILL_QDRANT_URL is set, else embedded Qdrant Edge.
    # neo4j: Neo4j's vector indexes; give that server
    # `internal.dbms.index.vector.standard_merge_factor=10` (neo4j.conf), or a vector query
    # searches ever more index segments as they pile up (docs/benchmarks.md).
    vector_store: Literal["auto", "qdrant_edge", "qdrant", "neo4j"] = "auto"
    # Qdrant Edge seals a collection's appendable segment (heap-held id map and payload index)
    # into a memory-mapped one and cuts its WAL every this many points written
    # (bench/vector_memory.py); 0 never seals, and heap and WAL then grow with the collection.
    vector_segment_points: int = Field(default=20_000, ge=0)

    # The state store (jobs, sessions, LLM cache, rate limits, lexical index) in Redis instead
    # of SQLite, and the prefix of every key cogmill writes there.
    redis_url: str | None = None
    redis_prefix: str = "cogmill:"
