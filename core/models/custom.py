"""Custom graph models: a user's JSON Schema of node classes replaces the default extraction schema.

A custom graph model is a JSON Schema object (a file, or a pydantic model's `model_json_schema()`
converted at submit time, so workers need not import user code). What is accepted:

- Node classes are the object schemas under `$defs` (or `definitions`) that have a string
  `name` property; the `$defs` key is the node type (letters, digits, `_`; not one of cogmill's
  own types). A schema without `$defs` whose own properties include `name` is one node class,
  named by its `title`.
- A class's other properties are its fields: string, integer, number, boolean, an enum of
  those, or an array of them; `null` alternatives (pydantic's `X | None`) are allowed. Nested
  objects are not: graph nodes store flat values. `description` is the node's description.
- Embedded fields: `name` always, plus text fields marked `"x-index": true`, each into the
  `<Type>_<field>` vector collection. Names also go to `Entity_name`, where the graph
  retrievers look for entry points.
- Relationship names are free, unless the schema lists them: `"x-relationships": [...]` at the
  top, or edge classes in `$defs` (objects with `source` and `target` properties) whose `name`
  property is a `const` or `enum`.
- `"x-aliases": [...]` on a class names extracted types it also takes (see `conform`).
- `"functional": true` on an edge class (`"functional_side"`: "source", the default, "target"
  or "both"), or `"x-functional": [...]` at the top: relationships a subject holds one value
  of at a time; a later one ends the earlier (core/facts/functional.py).

Nodes of a custom class are written with the class as their node type (`Person`, not
`Entity`), their fields as properties, an IS_A edge to the EntityType of the same name, and
provenance like any entity, so deleting documents removes them. Without an LLM the offline
extractor's entities are mapped onto the classes by type name (PERSON -> Person/People/...,
ORG -> Organization/Company/..., GPE/LOC -> Place/Location/City/Country/...); field values
need an LLM and stay empty offline.
"""

from __future__ import annotations

import functools
import importlib
import json
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from core.models.extraction import ExtractedEntity, ExtractedRelationship, KnowledgeGraph
from core.models.graph import normalise_name
from core.models.graph_schema import (
    EXPECTED,
    SCALARS,
    InvalidGraphModel,
    NodeClass,
    SchemaReader,
    functional_relations,
    model_name,
    node_schemas,
    relationship_names,
)


class CustomNode(ExtractedEntity):
    """Base of the generated node classes: declared field values are kept in `properties`."""

    @model_validator(mode="after")
    def _collect_fields(self) -> CustomNode:
        for field in type(self).model_fields:
            value = getattr(self, field)
            if field not in ExtractedEntity.model_fields and value not in (None, [], ""):
                self.properties[field] = value
        return self


class CustomGraph(KnowledgeGraph):
    """Base of generated top-level models; the marker lets a test server recognise them."""

    model_config = ConfigDict(json_schema_extra={"x-cogmill": "custom-graph"})


class CustomGraphModel:
    """A validated custom graph model: its node classes, relationship names and LLM schema."""

    def __init__(self, schema: dict[str, Any]) -> None:
        if not isinstance(schema, dict):
            raise InvalidGraphModel(f"graph model is a {type(schema).__name__}; {EXPECTED}")
        self.schema = schema
        self.title = model_name(str(schema.get("title") or "CustomGraph"))
        self.description = str(schema.get("description") or "")
        defs = schema.get("$defs") or schema.get("definitions") or {}
        if not isinstance(defs, dict):
            raise InvalidGraphModel(f"`$defs` must be an object; {EXPECTED}")
        reader = SchemaReader(defs)
        found = node_schemas(schema, defs)
        if not found:
            raise InvalidGraphModel(f"the graph model declares no node class; {EXPECTED}")
        self.classes = {name: reader.node_class(name, sub) for name, sub in found.items()}
        self.relationships = relationship_names(schema, defs)
        # Relationship name -> the end holding one value at a time (facts over time).
        self.functional = functional_relations(schema, defs)

    @classmethod
    def from_pydantic(cls, model: type[BaseModel]) -> CustomGraphModel:
        """The graph model of a pydantic model (its JSON Schema is the portable form)."""
        return cls(model.model_json_schema())

    def class_for(self, type_name: str) -> NodeClass | None:
        """The class an extracted type belongs to: by name, then aliases; None drops it."""
        exact = [c for c in self.classes.values() if c.name.lower() == type_name.strip().lower()]
        return (
            exact[0]
            if exact
            else next((c for c in self.classes.values() if c.takes(type_name)), None)
        )

    def conform(self, graph: KnowledgeGraph) -> KnowledgeGraph:
        """The graph with only this model's classes (fields kept) and allowed relationships."""
        entities, kept = [], set()
        for entity in graph.entities:
            node_class = self.class_for(entity.type)
            if node_class is None:
                continue
            declared = {f.name for f in node_class.fields}
            properties = {k: v for k, v in entity.properties.items() if k in declared}
            entities.append(
                ExtractedEntity(
                    name=entity.name,
                    type=node_class.name,
                    description=entity.description,
                    properties=properties,
                )
            )
            kept.add(normalise_name(entity.name))
        allowed = set(self.relationships)
        relationships = [
            ExtractedRelationship.model_validate(rel.model_dump())
            for rel in graph.relationships
            if {normalise_name(rel.source), normalise_name(rel.target)} <= kept
            and (not allowed or "_".join(rel.name.lower().split()) in allowed)
        ]
        return KnowledgeGraph(
            entities=entities,
            relationships=relationships,
            summary=graph.summary,
            node_classes={c.name: c.index_fields for c in self.classes.values()},
            ontology=graph.ontology,
        )

    @functools.cached_property
    def pydantic_model(self) -> type[KnowledgeGraph]:
        """The model the LLM answers with: entities are a union of the node classes."""
        nodes = [_node_model(c) for c in self.classes.values()]
        entity: Any = nodes[0]
        if len(nodes) > 1:
            entity = Annotated[Union[tuple(nodes)], Field(discriminator="type")]  # noqa: UP007
        fields: dict[str, Any] = {"entities": (list[entity], Field(default_factory=list))}
        if self.relationships:
            names: Any = Literal[tuple(self.relationships)]  # type: ignore[valid-type]
            relation: Any = create_model(
                "Relationship", __base__=ExtractedRelationship, name=(names, ...)
            )
            fields["relationships"] = (list[relation], Field(default_factory=list))
        return create_model(self.title, __base__=CustomGraph, **fields)

    def prompt(self, base: str) -> str:
        """The extraction prompt: the default one, with its types replaced by these classes."""
        lines = [
            base.rstrip(),
            "",
            "This graph uses a custom model. The entity types and fields below replace the "
            "categories above: give every entity one of these types, and fill a field only "
            "when the passage states its value (else null).",
        ]
        if self.description:
            lines.append(self.description)
        for node_class in self.classes.values():
            about = f": {node_class.description}" if node_class.description else ""
            lines.append(f"- {node_class.name}{about}")
            for f in node_class.fields:
                kind = f"list of {f.kind}" if f.many else f.kind
                choices = f", one of {list(f.choices)}" if f.choices else ""
                tail = f": {f.description}" if f.description else ""
                lines.append(f"    - {f.name} ({kind}{choices}){tail}")
        if self.relationships:
            lines.append("Relationship names: only " + ", ".join(self.relationships) + ".")
        return "\n".join(lines)


def _node_model(node_class: NodeClass) -> type[CustomNode]:
    fields: dict[str, Any] = {"type": (Literal[node_class.name], ...)}
    for f in node_class.fields:
        kind: Any = Literal[f.choices] if f.choices else SCALARS[f.kind]  # type: ignore[valid-type]
        annotation = list[kind] | None if f.many else kind | None
        fields[f.name] = (annotation, Field(default=None, description=f.description or None))
    return create_model(
        node_class.name, __base__=CustomNode, __doc__=node_class.description or None, **fields
    )


@functools.lru_cache(maxsize=32)
def _cached(text: str) -> CustomGraphModel:
    return CustomGraphModel(json.loads(text))


def graph_model_of(schema: dict[str, Any]) -> CustomGraphModel:
    """The model of a job's `graph_model` option, built once per distinct schema."""
    if not isinstance(schema, dict):
        raise InvalidGraphModel(f"graph model is a {type(schema).__name__}; {EXPECTED}")
    return _cached(json.dumps(schema, sort_keys=True))


def load_graph_model(ref: str) -> dict[str, Any]:
    """A validated graph model's JSON Schema from a `.json` file or a `module:Class` model."""
    path = Path(ref).expanduser()
    if path.suffix.lower() == ".json" or path.is_file():
        try:
            schema = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InvalidGraphModel(f"graph model file {ref} does not exist") from None
        except json.JSONDecodeError as err:
            raise InvalidGraphModel(
                f"graph model file {ref} is not valid JSON (line {err.lineno}, column "
                f"{err.colno}); check it with a JSON validator"
            ) from err
        except (OSError, UnicodeDecodeError) as err:
            why = getattr(err, "strerror", None) or "not UTF-8 text"
            raise InvalidGraphModel(f"cannot read graph model file {ref}: {why}") from err
    elif ":" in ref:
        schema = _pydantic_schema(ref)
    else:
        raise InvalidGraphModel(
            f"graph model {ref!r}: pass a JSON Schema file (.json) or a pydantic model as "
            "module:Class"
        )
    graph_model_of(schema)  # validates
    return schema


def _pydantic_schema(ref: str) -> dict[str, Any]:
    module_name, _, class_name = ref.partition(":")
    try:
        model = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as err:
        raise InvalidGraphModel(f"cannot import graph model {ref}: {err}") from err
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise InvalidGraphModel(f"{ref} is not a pydantic model class")
    return model.model_json_schema()
