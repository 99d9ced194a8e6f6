"""Pipelines are checked when built; the graph builder follows the data model."""

from __future__ import annotations

from typing import ClassVar

import pytest
from pydantic import BaseModel

from core.models.extraction import ExtractedEntity, ExtractedRelationship, KnowledgeGraph
from core.models.graph import entity_id
from pipelines.base import Pipeline
from pipelines.definitions import DEFAULT, get_pipeline
from pipelines.graph_builder import build_graph
from pipelines.models import Chunk


class A(BaseModel):
    x: int = 0


class B(BaseModel):
    y: int = 0


class MakesB:
    name: ClassVar[str] = "makes_b"
    queue: ClassVar[str] = "ingest"

    @classmethod
    def build(cls, services: object, context: object) -> MakesB:
        return cls()

    def run(self, data: A) -> B:
        return B(y=data.x)


class TakesA:
    name: ClassVar[str] = "takes_a"
    queue: ClassVar[str] = "ingest"

    @classmethod
    def build(cls, services: object, context: object) -> TakesA:
        return cls()

    def run(self, data: A) -> A:
        return data


def test_mismatched_steps_fail_when_built() -> None:
    with pytest.raises(TypeError, match="MakesB returns B but TakesA takes A"):
        Pipeline("broken", "1", [MakesB, TakesA])


def test_default_pipeline_is_classify_chunk_extract_add() -> None:
    assert DEFAULT.step_names == [
        "classify",
        "chunk",
        "extract_graph",
        "summarize_documents",
        "resolve_entities",
        "add_data_points",
        "reconcile_entities",
        "judge_facts",
    ]
    assert get_pipeline("default") is DEFAULT
    with pytest.raises(ValueError, match="known: default"):
        get_pipeline("nope")


def _chunk(doc: str, index: int, text: str) -> Chunk:
    return Chunk(
        id=f"{doc}-{index}",
        document_id=doc,
        document_name=f"{doc}.txt",
        index=index,
        text=text,
        token_count=5,
    )


def test_graph_builder_merges_entities_and_keeps_provenance() -> None:
    graph = KnowledgeGraph(
        entities=[
            ExtractedEntity(name="Marie Curie", type="Person"),
            ExtractedEntity(name="Warsaw", type="Location"),
        ],
        relationships=[
            ExtractedRelationship(source="Marie Curie", target="Warsaw", name="born in"),
            ExtractedRelationship(source="Marie Curie", target="Nobody", name="knows"),
        ],
        summary="Marie Curie was born in Warsaw.",
    )
    again = KnowledgeGraph(entities=[ExtractedEntity(name="marie curie", type="Person")])
    built = build_graph("ds", [_chunk("d1", 0, "text"), _chunk("d2", 0, "more")], [graph, again])
    curie = built.nodes[entity_id("ds", "Marie Curie")]
    assert {s.document_id for s in curie.support} == {"d1", "d2"}
    relations = [e for e in built.edges.values() if e.name == "born_in"]
    assert len(relations) == 1 and relations[0].support[0].chunk_id == "d1-0"
    assert not [e for e in built.edges.values() if e.name == "knows"]  # unknown endpoint dropped
    assert {e.name for e in built.edges.values()} == {
        "PART_OF",
        "MENTIONS",
        "IS_A",
        "SUMMARIZES",
        "born_in",
    }
    assert set(built.to_embed) == {
        "DocumentChunk_text",
        "Entity_name",
        "TextSummary_text",
        "EdgeType_relationship_name",
    }


class _HalfFailing:
    """An extractor whose LLM gave up on the second text."""

    name = "half-failing"

    def extract(self, texts: list[str]) -> list[KnowledgeGraph]:
        from core.llm.client import LLMError
        from core.llm.extractor import ExtractionFailed

        results = [KnowledgeGraph(summary=t) for t in texts]
        results[1] = None  # type: ignore[call-overload]
        raise ExtractionFailed({1: LLMError("gave up after 6 attempts")}, results)


def test_llm_failures_fail_only_their_documents() -> None:
    from pipelines.extract_graph import ExtractGraph
    from pipelines.models import ChunkBatch, DocumentRef

    docs = [DocumentRef(id=d, dataset="ds", name=f"{d}.txt", blob_key=d) for d in ("d1", "d2")]
    batch = ChunkBatch(
        dataset="ds", documents=docs, chunks=[_chunk("d1", 0, "one"), _chunk("d2", 0, "two")]
    )
    out = ExtractGraph(_HalfFailing()).run(batch)
    assert [(e.document_id, e.step) for e in out.errors] == [("d2", "extract_graph")]
    assert "gave up" in out.errors[0].message
    assert len(out.graphs) == 2 and out.graphs[0].summary == "one"
