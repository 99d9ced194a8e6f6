"""Step 3: extract entities, relationships and a summary from every chunk."""

from __future__ import annotations

from typing import ClassVar

from core.llm.extractor import PROMPT_PATH, ExtractionFailed, LLMExtractor
from core.models.custom import CustomGraphModel, graph_model_of
from core.models.extraction import KnowledgeGraph
from core.models.jobs import DocumentError
from core.ontology import InvalidOntology, load_stored_ontology
from core.ports import Extractor
from pipelines.align_ontology import OntologyAligner
from pipelines.base import LLM, StepContext, StepQueue, StepServices
from pipelines.models import ChunkBatch, ExtractedBatch


class ExtractGraph:
    """Runs the configured extractor (an LLM or the offline one) over a batch of chunks.

    When the LLM gives up on some chunks, only their documents fail (and are retried by the
    next cognify); the rest of the batch goes on. With a custom graph model the graphs are
    conformed to its classes (the offline extractor's types mapped onto them); with an ontology
    they are aligned with it (pipelines/align_ontology.py).
    """

    name: ClassVar[str] = "extract_graph"
    queue: ClassVar[StepQueue] = LLM

    @classmethod
    def build(cls, services: StepServices, context: StepContext) -> ExtractGraph:
        """With the job's custom graph model and ontology (`cognify --graph-model`,
        `--ontology`), if any: an LLM answers in the model's schema; offline, the extractor's
        entities are mapped onto its classes."""
        options, s = context.options, services.settings
        model = graph_model_of(options["graph_model"]) if options.get("graph_model") else None
        extractor = services.extractor
        if model is not None and services.llm is not None:
            extractor = LLMExtractor(
                services.llm,
                concurrency=s.llm_concurrency,
                graph_model=model.pydantic_model,
                prompt=model.prompt(PROMPT_PATH.read_text(encoding="utf-8")),
            )
        aligner = None
        if options.get("ontology"):
            # Parsed here in the worker, within COGMILL_ONTOLOGY_PARSE_SECONDS; one that will
            # not parse fails the batch's documents (run) instead of the task.
            try:
                ontology = load_stored_ontology(services.blobs, options["ontology"], s)
            except InvalidOntology as err:
                return cls(extractor, graph_model=model, refusal=err)
            aligner = OntologyAligner(ontology, s.ontology_match_threshold)
        return cls(extractor, graph_model=model, aligner=aligner)

    def __init__(
        self,
        extractor: Extractor,
        *,
        graph_model: CustomGraphModel | None = None,
        aligner: OntologyAligner | None = None,
        refusal: InvalidOntology | None = None,
    ) -> None:
        self.extractor = extractor
        self.graph_model = graph_model
        self.aligner = aligner
        self.refusal = refusal  # the job's ontology would not parse: every batch fails with it

    def run(self, batch: ChunkBatch) -> ExtractedBatch:
        if self.refusal is not None:
            raise InvalidOntology(str(self.refusal))
        errors = list(batch.errors)
        try:
            graphs = self.extractor.extract([chunk.text for chunk in batch.chunks])
        except ExtractionFailed as failure:
            graphs = [graph or KnowledgeGraph() for graph in failure.results]
            names = {doc.id: doc.name for doc in batch.documents}
            failed_docs = {batch.chunks[i].document_id: err for i, err in failure.failures.items()}
            errors += [
                DocumentError(
                    document_id=doc_id,
                    document_name=names.get(doc_id, ""),
                    step=self.name,
                    message=str(err),
                )
                for doc_id, err in failed_docs.items()
            ]
        if len(graphs) != len(batch.chunks):
            # An extractor that loses outputs would silently misattribute facts; refuse.
            raise RuntimeError(
                f"extractor {self.extractor.name} returned {len(graphs)} graphs "
                f"for {len(batch.chunks)} chunks"
            )
        if self.graph_model is not None:
            graphs = [self.graph_model.conform(graph) for graph in graphs]
        if self.aligner is not None:
            graphs = self.aligner.align(graphs)
        return ExtractedBatch(
            dataset=batch.dataset,
            documents=batch.documents,
            chunks=batch.chunks,
            graphs=graphs,
            errors=errors,
        )
