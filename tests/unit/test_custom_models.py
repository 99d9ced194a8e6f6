"""Custom graph models: JSON Schema in, node classes and an LLM schema out, nodes of their type."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from core.models.custom import CustomGraphModel, load_graph_model
from core.models.extraction import ExtractedEntity, ExtractedRelationship, KnowledgeGraph
from core.models.graph import entity_id
from core.models.graph_schema import InvalidGraphModel
from pipelines.graph_builder import build_graph
from pipelines.models import Chunk

pytestmark = pytest.mark.unit


class Scientist(BaseModel):
    """A person doing research."""

    name: str
    born: int | None = Field(None, description="year of birth")
    field: str | None = Field(None, json_schema_extra={"x-index": True})
    prizes: list[str] = []


class Institution(BaseModel):
    name: str
    kind: Literal["university", "lab"] | None = None


class WorkedAt(BaseModel):
    source: str
    target: str
    name: Literal["worked_at", "founded"]


class Research(BaseModel):
    """Who did research where."""

    scientists: list[Scientist]
    institutions: list[Institution]
    links: list[WorkedAt]


def chunk(text: str = "text") -> Chunk:
    return Chunk(
        id="c1", document_id="d1", document_name="a.txt", index=0, text=text, token_count=1
    )


def test_a_pydantic_model_round_trips_through_a_json_schema_file(tmp_path: Path) -> None:
    path = tmp_path / "research.json"
    path.write_text(json.dumps(Research.model_json_schema()))
    model = CustomGraphModel(load_graph_model(str(path)))
    assert set(model.classes) == {"Scientist", "Institution"}
    scientist = model.classes["Scientist"]
    assert [(f.name, f.kind, f.many) for f in scientist.fields] == [
        ("born", "integer", False),
        ("field", "string", False),
        ("prizes", "string", True),
    ]
    assert scientist.index_fields == ["name", "field"]
    assert model.classes["Institution"].fields[0].choices == ("university", "lab")
    assert model.relationships == ["worked_at", "founded"]
    # The same model straight from the class (as the CLI's module:Class converts it).
    assert CustomGraphModel.from_pydantic(Research).classes.keys() == model.classes.keys()


def test_the_llm_schema_validates_replies_and_keeps_fields_as_properties() -> None:
    model = CustomGraphModel.from_pydantic(Research)
    reply = {
        "entities": [
            {"name": "Marie Curie", "type": "Scientist", "born": 1867, "field": "physics"},
            {"name": "Sorbonne", "type": "Institution", "kind": "university"},
        ],
        "relationships": [{"source": "Marie Curie", "target": "Sorbonne", "name": "worked_at"}],
        "summary": "Curie at the Sorbonne.",
    }
    graph = model.conform(model.pydantic_model.model_validate(reply))
    assert [(e.name, e.type, e.properties) for e in graph.entities] == [
        ("Marie Curie", "Scientist", {"born": 1867, "field": "physics"}),
        ("Sorbonne", "Institution", {"kind": "university"}),
    ]
    assert graph.node_classes == {"Scientist": ["name", "field"], "Institution": ["name"]}
    schema = model.pydantic_model.model_json_schema()
    assert schema["x-cogmill"] == "custom-graph"
    assert "properties" not in schema["$defs"]["Scientist"]["properties"]  # cogmill's own field
    bad = {**reply, "entities": [{"name": "X", "type": "Planet"}]}
    with pytest.raises(ValueError, match="Planet|type"):
        model.pydantic_model.model_validate(bad)
    with pytest.raises(ValueError):
        model.pydantic_model.model_validate({**reply, "relationships": [
            {"source": "Marie Curie", "target": "Sorbonne", "name": "married"}
        ]})  # fmt: skip


def test_offline_types_map_onto_classes_and_the_rest_is_dropped() -> None:
    schema = {
        "title": "World",
        "$defs": {
            "People": {"properties": {"name": {"type": "string"}}},
            "Company": {"properties": {"name": {"type": "string"}}},
            "Planet": {"properties": {"name": {"type": "string"}}, "x-aliases": ["Thing"]},
        },
    }
    model = CustomGraphModel(schema)
    offline = KnowledgeGraph(
        entities=[
            ExtractedEntity(name="Ada Lovelace", type="Person"),
            ExtractedEntity(name="IBM", type="Organization"),
            ExtractedEntity(name="Mars", type="Thing"),
            ExtractedEntity(name="London", type="Location"),
        ],
        relationships=[
            ExtractedRelationship(source="Ada Lovelace", target="IBM", name="worked for"),
            ExtractedRelationship(source="Ada Lovelace", target="London", name="lived in"),
        ],
        summary="s",
    )
    graph = model.conform(offline)
    assert [(e.name, e.type) for e in graph.entities] == [
        ("Ada Lovelace", "People"),
        ("IBM", "Company"),
        ("Mars", "Planet"),
    ]
    assert [r.name for r in graph.relationships] == ["worked for"]  # London was dropped


def test_custom_nodes_get_their_type_fields_and_vectors() -> None:
    model = CustomGraphModel.from_pydantic(Research)
    graph = model.conform(
        KnowledgeGraph(
            entities=[
                ExtractedEntity(
                    name="Marie Curie",
                    type="Scientist",
                    properties={"field": "physics", "prizes": ["Nobel", "Davy"]},
                ),
                ExtractedEntity(name="Sorbonne", type="Institution"),
            ],
            relationships=[
                ExtractedRelationship(source="Marie Curie", target="Sorbonne", name="worked_at")
            ],
        )
    )
    built = build_graph("ds", [chunk()], [graph])
    curie = built.nodes[entity_id("ds", "Marie Curie")]
    assert curie.type == "Scientist"
    assert curie.properties["prizes"] == ["Nobel", "Davy"]
    assert curie.support[0].document_id == "d1"
    embedded = {name: [i.text for i in items] for name, items in built.to_embed.items()}
    assert embedded["Scientist_field"] == ["physics"]
    assert sorted(embedded["Scientist_name"]) == ["Marie Curie"]
    assert sorted(embedded["Entity_name"]) == ["Marie Curie", "Sorbonne"]
    assert (entity_id("ds", "Marie Curie"), "worked_at", entity_id("ds", "Sorbonne")) in built.edges
    types = {n.name for n in built.nodes.values() if n.type == "EntityType"}
    assert types == {"Scientist", "Institution"}


def one_class(**fields: object) -> dict[str, object]:
    """A schema with one class P: a string name plus `fields`."""
    return {"$defs": {"P": {"properties": {"name": {"type": "string"}, **fields}}}}


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ([1, 2], "JSON Schema object"),
        ({"title": "x", "properties": {"age": {"type": "integer"}}}, "no node class"),
        ({"$defs": {"Entity": {"properties": {"name": {"type": "string"}}}}}, "cogmill's types"),
        ({"$defs": {"P": {"properties": {"name": {"type": "integer"}}}}}, "must be a string"),
        (one_class(home={"type": "object"}), "P.home has type object"),
        (one_class(id={"type": "string"}), "reserved"),
        (one_class(n={"type": "integer", "x-index": True}), "only text fields"),
        (one_class(x={"anyOf": [{"type": "string"}, {"type": "integer"}]}), "one type"),
        (one_class(x={"$ref": "#/$defs/Missing"}), "names no `\\$defs` entry"),
    ],
)
def test_invalid_graph_models_are_refused_saying_what_to_change(
    schema: object, message: str
) -> None:
    with pytest.raises(InvalidGraphModel, match=message):
        CustomGraphModel(schema)  # type: ignore[arg-type]


def test_graph_model_references_that_cannot_load_say_why(tmp_path: Path) -> None:
    with pytest.raises(InvalidGraphModel, match="does not exist"):
        load_graph_model(str(tmp_path / "missing.json"))
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(InvalidGraphModel, match=r"not valid JSON \(line 1, column 2\)"):
        load_graph_model(str(broken))
    with pytest.raises(InvalidGraphModel, match="cannot import"):
        load_graph_model("no_such_module_xyz:Model")
    with pytest.raises(InvalidGraphModel, match="not a pydantic model"):
        load_graph_model("json:dumps")
    with pytest.raises(InvalidGraphModel, match="JSON Schema file"):
        load_graph_model("schema")
