"""Step 3: extract entities, relationships and a summary from every chunk."""

from __future__ import annotations

from typing import ClassVar

from core.ports import Extractor
from pipelines.models import ChunkBatch, ExtractedBatch


class ExtractGraph:
    """Runs the configured extractor (an LLM or the offline one) over a batch of chunks."""

    name: ClassVar[str] = "extract_graph"

    def __init__(self, extractor: Extractor) -> None:
        self.extractor = extractor

    def run(self, batch: ChunkBatch) -> ExtractedBatch:
        graphs = self.extractor.extract([chunk.text for chunk in batch.chunks])
        if len(graphs) != len(batch.chunks):
            # An extractor that loses outputs would silently misattribute facts; refuse.
            raise RuntimeError(
                f"extractor {self.extractor.name} returned {len(graphs)} graphs "
                f"for {len(batch.chunks)} chunks"
            )
        return ExtractedBatch(
            dataset=batch.dataset,
            documents=batch.documents,
            chunks=batch.chunks,
            graphs=graphs,
            errors=list(batch.errors),
        )
