"""The one place where settings choose adapters."""

from __future__ import annotations

from core.ports import BlobStore, Embedder, Extractor, GraphStore, StateStore, VectorStore
from core.settings import Settings


class NotAvailableError(RuntimeError):
    """A setting asks for a backend this build cannot provide."""


def graph_store(settings: Settings) -> GraphStore:
    if settings.neo4j_uri:
        raise NotAvailableError(
            "COGMILL_NEO4J_URI is set, but the Neo4j graph adapter is not "
            "in this build yet; unset it to use the embedded SQLite graph"
        )
    from core.stores.graph_sqlite import SQLiteGraphStore

    return SQLiteGraphStore(settings.home / "graph.sqlite")


def vector_store(settings: Settings, dim: int) -> VectorStore:
    if settings.qdrant_url:
        raise NotAvailableError(
            "COGMILL_QDRANT_URL is set, but the Qdrant server adapter is not "
            "in this build yet; unset it to use embedded Qdrant Edge"
        )
    from core.stores.vector_qdrant_edge import QdrantEdgeVectorStore

    return QdrantEdgeVectorStore(settings.home / "vectors", dim)


def state_store(settings: Settings) -> StateStore:
    if settings.redis_url:
        from core.stores.state_redis import RedisStateStore

        return RedisStateStore(settings.redis_url)
    from core.stores.state_sqlite import SQLiteStateStore

    return SQLiteStateStore(settings.home / "state.sqlite")


def blob_store(settings: Settings) -> BlobStore:
    from core.stores.blob_fs import FileBlobStore

    return FileBlobStore(settings.home / "blobs")


def embedder(settings: Settings) -> Embedder:
    from core.embeddings.local import LocalEmbedder

    return LocalEmbedder(batch_size=settings.embed_batch_size)


def extractor(settings: Settings) -> Extractor:
    if settings.llm_base_url:
        raise NotAvailableError(
            "COGMILL_LLM_BASE_URL is set, but the LLM gateway is not in this "
            "build yet; unset it to use the offline extractor"
        )
    from core.llm.offline import OfflineExtractor

    return OfflineExtractor(model=settings.spacy_model)
