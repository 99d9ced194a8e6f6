"""The stores, models and steps one process works with, built lazily from settings.

The CLI and the API build a Runtime and install it with `use_runtime`; a worker process that
starts from `celery -A workers.celery_app worker` builds one from the environment on first use.
Tests install their own.
"""

from __future__ import annotations

import threading
from functools import cached_property
from typing import TYPE_CHECKING, Any

from core.catalog import Catalog
from core.entity_keys import EntityKeyIndex
from core.ports import (
    BlobStore,
    CypherRunner,
    Embedder,
    Extractor,
    GraphStore,
    LexicalIndex,
    StateStore,
    VectorStore,
)
from core.settings import Settings
from core.stores import factory
from pipelines.add_data_points import AddDataPoints
from pipelines.base import Step
from pipelines.chunk import ChunkDocuments
from pipelines.classify import Classify
from pipelines.definitions import Pipeline
from pipelines.extract_events import ExtractEvents
from pipelines.extract_graph import ExtractGraph
from pipelines.formats.base import Limits
from pipelines.reconcile_entities import ReconcileEntities
from pipelines.resolve_entities import ResolveEntities
from pipelines.structured import LinkRows, ReadTables
from pipelines.summarize_documents import SummarizeDocuments
from retrieval.base import RetrievalContext

if TYPE_CHECKING:
    from core.llm.client import LLMClient


class Runtime:
    """Lazily opened stores and models; `close()` releases whatever was opened."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        settings.home.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()

    @cached_property
    def graph(self) -> GraphStore:
        with self._lock:
            return factory.graph_store(self.settings)

    @cached_property
    def embedder(self) -> Embedder:
        with self._lock:
            embedder = factory.embedder(self.settings)
            if embedder.dim != self.settings.embedding_dim:
                raise ValueError(
                    f"the embedder {embedder.model_name} makes {embedder.dim}-d vectors but "
                    f"COGMILL_EMBEDDING_DIM is {self.settings.embedding_dim}; "
                    f"set it to {embedder.dim}"
                )
            return embedder

    @cached_property
    def vectors(self) -> VectorStore:
        with self._lock:
            return factory.vector_store(self.settings, self.settings.embedding_dim)

    @cached_property
    def state(self) -> StateStore:
        with self._lock:
            return factory.state_store(self.settings)

    @cached_property
    def entity_keys(self) -> EntityKeyIndex:
        """Which stored entities an alias rule could join a name to (see core/entity_keys)."""
        with self._lock:
            keys = EntityKeyIndex(self.state)
            keys.upgrade()
            return keys

    @cached_property
    def lexical(self) -> LexicalIndex:
        """BM25 postings of chunks (CHUNKS_LEXICAL), kept up to date on writes and deletes."""
        with self._lock:
            return factory.lexical_index(self.settings)

    @cached_property
    def cypher(self) -> CypherRunner:
        """Read-only Cypher on the graph (CYPHER, NATURAL_LANGUAGE); ValueError on the
        embedded graph, which has none."""
        with self._lock:
            return factory.cypher_runner(self.settings)

    @cached_property
    def blobs(self) -> BlobStore:
        return factory.blob_store(self.settings)

    @cached_property
    def extractor(self) -> Extractor:
        client = self.llm  # one client per process: its in-flight cap covers every LLM step
        with self._lock:
            return factory.extractor(self.settings, client)

    @cached_property
    def llm(self) -> LLMClient | None:
        """The LLM client when one is configured (retrievers answer with it), else None."""
        with self._lock:
            return factory.llm_client(self.settings, self.state)

    def retrieval(self) -> RetrievalContext:
        """What the retrievers read: the stores, the embedder and the LLM (if any)."""
        return RetrievalContext(
            graph=self.graph,
            vectors=self.vectors,
            embedder=self.embedder,
            settings=self.settings,
            state=self.state,
            llm=self.llm,
            cypher=lambda: self.cypher,
            extras={"lexical": self.lexical},
        )

    @cached_property
    def catalog(self) -> Catalog:
        return Catalog(
            self.graph,
            self.vectors,
            self.blobs,
            self.settings.max_file_bytes,
            self.lexical,
            self.entity_keys,
        )

    def step(self, pipeline: Pipeline, name: str, options: dict[str, Any] | None = None) -> Step:
        """An instance of the named step of a pipeline, configured from settings and the job's
        options (see `Job.options`)."""
        if name not in pipeline.step_names:
            raise ValueError(f"pipeline {pipeline.name!r} has no step {name!r}")
        s, options = self.settings, options or {}
        builders = {
            Classify.name: lambda: Classify(
                self.blobs,
                s.max_file_bytes,
                Limits(
                    max_unpacked_bytes=s.max_unpacked_bytes,
                    max_compression_ratio=s.max_compression_ratio,
                ),
            ),
            ChunkDocuments.name: lambda: ChunkDocuments(s.chunk_tokens, s.chunk_overlap_tokens),
            ExtractGraph.name: lambda: self._extract_graph(options),
            SummarizeDocuments.name: lambda: SummarizeDocuments(
                self.llm, max_chars=s.document_summary_chars, concurrency=s.llm_concurrency
            ),
            ResolveEntities.name: lambda: ResolveEntities(self.graph),
            ReconcileEntities.name: lambda: ReconcileEntities(
                self.graph,
                self.vectors,
                self.embedder,
                self.entity_keys,
                threshold=s.entity_match_threshold,
                enabled=s.entity_reconcile,
            ),
            ExtractEvents.name: lambda: ExtractEvents.for_models(
                self.llm, self.extractor, concurrency=s.llm_concurrency, spacy_model=s.spacy_model
            ),
            AddDataPoints.name: lambda: AddDataPoints(
                self.graph,
                self.vectors,
                self.embedder,
                embed_batch_size=s.embed_batch_size,
                write_batch_size=s.write_batch_size,
                lexical=self.lexical,
            ),
            ReadTables.name: lambda: ReadTables(self.blobs, s.max_file_bytes),
            LinkRows.name: lambda: LinkRows(
                self.graph,
                self.vectors,
                self.embedder,
                self.blobs,
                pipeline_version=pipeline.version,
                embed_batch_size=s.embed_batch_size,
                write_batch_size=s.write_batch_size,
            ),
        }
        return builders[name]()

    def _extract_graph(self, options: dict[str, Any]) -> ExtractGraph:
        """Step 3 with the job's custom graph model and ontology (`cognify --graph-model`,
        `--ontology`), if any: an LLM answers in the model's schema; offline, the extractor's
        entities are mapped onto its classes."""
        from core.models.custom import graph_model_of
        from core.ontology import load_stored_ontology
        from pipelines.align_ontology import OntologyAligner

        model = graph_model_of(options["graph_model"]) if options.get("graph_model") else None
        extractor = self.extractor
        if model is not None and self.llm is not None:
            from core.llm.extractor import PROMPT_PATH, LLMExtractor

            base = PROMPT_PATH.read_text(encoding="utf-8")
            extractor = LLMExtractor(
                self.llm,
                concurrency=self.settings.llm_concurrency,
                graph_model=model.pydantic_model,
                prompt=model.prompt(base),
            )
        aligner = None
        if options.get("ontology"):
            ontology = load_stored_ontology(self.blobs, options["ontology"])
            aligner = OntologyAligner(ontology, self.settings.ontology_match_threshold)
        return ExtractGraph(extractor, graph_model=model, aligner=aligner)

    def close(self) -> None:
        for name in ("graph", "vectors", "state", "lexical", "cypher"):
            store = self.__dict__.pop(name, None)
            if store is not None:
                store.close()


def share_cores_between_threads(threads: int) -> None:
    """One BLAS thread per call when several worker threads embed at once.

    Each worker thread then keeps one core busy with the whole forward pass (numpy's
    element-wise work included), instead of every call spawning BLAS threads that fight the
    other worker threads for the same cores (measured: 15-20% faster ingestion on 2 cores).
    """
    if threads > 1:
        import numpy  # noqa: F401 - BLAS must be loaded for threadpoolctl to find it
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1, user_api="blas")


_current: Runtime | None = None


def use_runtime(runtime: Runtime | None) -> None:
    """Install the runtime that tasks in this process use (None to reset)."""
    global _current
    _current = runtime


def current_runtime() -> Runtime:
    """The installed runtime, or one built from the environment on first use."""
    global _current
    if _current is None:
        _current = Runtime(Settings())
    return _current
