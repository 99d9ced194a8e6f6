"""The one place where settings choose adapters."""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.errors import NotConfigured, Unavailable
from core.ports import (
    BlobStore,
    CypherRunner,
    Embedder,
    Extractor,
    GraphStore,
    LexicalIndex,
    RateLimiter,
    StateStore,
    VectorStore,
)
from core.priority import Pause, no_pause
from core.settings import Settings

if TYPE_CHECKING:
    from core.llm.client import LLMClient


class NotAvailableError(Unavailable):
    """A setting asks for a backend this build cannot provide."""

    code = "backend_not_available"
    public_message = "a backend the server is configured to use is not available"


NO_CYPHER = (
    "Cypher needs the Neo4j graph store (set COGMILL_NEO4J_URI); "
    "the embedded SQLite graph has no Cypher"
)


def graph_store(settings: Settings) -> GraphStore:
    if settings.neo4j_uri:
        from core.stores.neo4j.graph import Neo4jGraphStore

        return Neo4jGraphStore(
            settings.neo4j_uri,
            user=settings.neo4j_user,
            password=settings.neo4j_password,
            database=settings.neo4j_database,
            pool_size=settings.neo4j_pool_size,
            batch_size=settings.write_batch_size,
        )
    from core.stores.sqlite.graph import SQLiteGraphStore

    return SQLiteGraphStore(settings.home / "graph.sqlite")


def cypher_runner(settings: Settings) -> CypherRunner:
    """Read-only Cypher on the Neo4j graph. NotConfigured on the embedded graph, which has none."""
    if not settings.neo4j_uri:
        raise NotConfigured(NO_CYPHER)
    from core.stores.neo4j.cypher import Neo4jCypherRunner

    return Neo4jCypherRunner(
        settings.neo4j_uri,
        user=settings.neo4j_user,
        password=settings.neo4j_password,
        database=settings.neo4j_database,
        pool_size=settings.neo4j_pool_size,
    )


def vector_store(settings: Settings, dim: int) -> VectorStore:
    kind = settings.vector_store
    if kind == "auto":
        kind = "qdrant" if settings.qdrant_url else "qdrant_edge"
    if kind == "qdrant":
        if not settings.qdrant_url:
            raise NotAvailableError("COGMILL_VECTOR_STORE=qdrant needs COGMILL_QDRANT_URL")
        from core.stores.qdrant.server import QdrantVectorStore

        return QdrantVectorStore(dim, url=settings.qdrant_url, api_key=settings.qdrant_api_key)
    if kind == "neo4j":
        if not settings.neo4j_uri:
            raise NotAvailableError("COGMILL_VECTOR_STORE=neo4j needs COGMILL_NEO4J_URI")
        from core.stores.neo4j.vectors import Neo4jVectorStore

        return Neo4jVectorStore(
            settings.neo4j_uri,
            dim,
            user=settings.neo4j_user,
            password=settings.neo4j_password,
            database=settings.neo4j_database,
        )
    from core.stores.qdrant.edge import QdrantEdgeVectorStore

    return QdrantEdgeVectorStore(
        settings.home / "vectors", dim, segment_points=settings.vector_segment_points
    )


def state_store(settings: Settings) -> StateStore:
    if settings.redis_url:
        from core.stores.redis.state import RedisStateStore

        return RedisStateStore(settings.redis_url, prefix=settings.redis_prefix)
    from core.stores.sqlite.state import SQLiteStateStore

    return SQLiteStateStore(settings.home / "state.sqlite")


def lexical_index(settings: Settings) -> LexicalIndex:
    """BM25 postings beside the state: in Redis when there is one, else in a SQLite file."""
    if settings.redis_url:
        from core.stores.redis.lexical import RedisLexicalIndex

        return RedisLexicalIndex(settings.redis_url, prefix=settings.redis_prefix)
    from core.stores.sqlite.lexical import SQLiteLexicalIndex

    return SQLiteLexicalIndex(settings.home / "lexical.sqlite")


def blob_store(settings: Settings) -> BlobStore:
    from core.stores.blob_fs import FileBlobStore

    return FileBlobStore(settings.home / "blobs")


def embedder(settings: Settings, pause: Pause = no_pause) -> Embedder:
    """The embeddings API's client when one is configured, else the local model, which calls
    `pause` between the half-layers of ingestion's batches (`core/priority.py`)."""
    if settings.embedding_base_url:
        from core.embeddings.openai_embedder import OpenAIEmbedder

        return OpenAIEmbedder(
            settings.embedding_base_url,
            settings.embedding_model,
            settings.embedding_dim,
            settings.embedding_api_key,
            timeout=settings.llm_timeout_seconds,
        )
    from core.embeddings.local import LocalEmbedder

    return LocalEmbedder(batch_size=settings.embed_batch_size, pause=pause)


def llm_client(settings: Settings, state: StateStore) -> LLMClient | None:
    """The LLM client for the configured endpoint (cached, rate-limited), or None without one."""
    if not settings.llm_base_url:
        return None
    from core.llm.cache import LLMCache
    from core.llm.client import LLMClient

    return LLMClient(
        settings.llm_base_url,
        settings.llm_model,
        settings.llm_api_key,
        timeout=settings.llm_timeout_seconds,
        max_attempts=settings.llm_max_attempts,
        limiter=rate_limiter(settings),
        cache=LLMCache(state, ttl=settings.llm_cache_ttl_seconds),
        max_in_flight=settings.llm_concurrency,
    )


def extractor(settings: Settings, client: LLMClient | None, pause: Pause = no_pause) -> Extractor:
    """The LLM extractor on `client` (see `llm_client`), the offline one without a client
    (which calls `pause` before each spaCy component of a batch)."""
    if client is None:
        from core.llm.offline.extractor import OfflineExtractor

        return OfflineExtractor(model=settings.spacy_model, pause=pause)
    from core.llm.extractor import LLMExtractor

    return LLMExtractor(client, concurrency=settings.llm_concurrency)


def rate_limiter(settings: Settings) -> RateLimiter | None:
    """One token bucket for every worker: in Redis when there is one, else in this process;
    None without limits."""
    rpm = settings.llm_requests_per_minute or None
    tpm = settings.llm_tokens_per_minute or None
    if rpm is None and tpm is None:
        return None
    if settings.redis_url:
        from core.llm.ratelimit import RedisRateLimiter

        key = f"{settings.redis_prefix}llm-rate:{settings.llm_model}"
        return RedisRateLimiter(settings.redis_url, key, rpm, tpm)
    from core.llm.ratelimit import LocalRateLimiter

    return LocalRateLimiter(rpm, tpm)
