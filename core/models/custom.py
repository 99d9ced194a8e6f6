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
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from core.models.extraction import ExtractedEntity, ExtractedRelationship, KnowledgeGraph
from core.models.graph import normalise_name
from core.models.vocabulary import (
    CHUNK,
    DATASET,
    DOCUMENT,
    EDGE_TYPE,
    ENTITY,
    ENTITY_TYPE,
    EVENT,
    INTERVAL,
    NODE_SET_LABEL,
    TABLE,
    TABLE_ROW,
    TEXT_SUMMARY,
    TIMESTAMP,
)

RESERVED_TYPES = frozenset({
    DATASET, DOCUMENT, CHUNK, ENTITY, ENTITY_TYPE, EDGE_TYPE, TEXT_SUMMARY,
    EVENT, TIMESTAMP, INTERVAL, TABLE, TABLE_ROW, NODE_SET_LABEL, "Node",
})  # fmt: skip
RESERVED_FIELDS = frozenset({"id", "type", "dataset", "properties", "ontology_uri", "support"})
SCALARS: dict[str, type] = {"string": str, "integer": int, "number": float, "boolean": bool}
# The offline extractor's types -> class names (lowercase) that take them.
OFFLINE_ALIASES: dict[str, frozenset[str]] = {
    "Person": frozenset({"person", "people", "human", "individual", "scientist", "researcher",
                         "author", "character", "employee", "artist"}),
    "Organization": frozenset({"organization", "organisation", "company", "business", "org",
                               "corporation", "institution", "university", "agency", "firm"}),
    "Location": frozenset({"location", "place", "city", "country", "region", "area", "site",
                           "gpe", "geo"}),
    "Date": frozenset({"date", "time", "year", "period"}),
    "Work": frozenset({"work", "book", "film", "movie", "artwork", "publication", "creativework"}),
    "Group": frozenset({"group", "nationality", "religion", "norp"}),
    "Event": frozenset({"event", "happening", "occurrence"}),
    "Facility": frozenset({"facility", "building", "landmark", "venue"}),
    "Product": frozenset({"product", "device", "technology", "tool"}),
    "Language": frozenset({"language"}),
    "Law": frozenset({"law", "legislation", "treaty", "regulation"}),
    "Thing": frozenset({"thing", "concept", "topic", "other", "misc"}),
}  # fmt: skip
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
EXPECTED = (
    "expected a JSON Schema object whose `$defs` are node classes (objects with a string `name` "
    "property and flat fields), e.g. a pydantic model's model_json_schema()"
)


class InvalidGraphModel(ValueError):
    """A custom graph model that cogmill cannot use; the message says what to change."""


@dataclass(frozen=True)
class FieldSpec:
    """One declared field of a node class."""

    name: str
    kind: str  # a SCALARS key
    many: bool = False  # an array of `kind`
    choices: tuple[Any, ...] = ()  # enum / const values
    description: str = ""
    index: bool = False


@dataclass(frozen=True)
class NodeClass:
    """A node type of a custom graph model with its fields."""

    name: str
    description: str
    fields: tuple[FieldSpec, ...]
    aliases: frozenset[str]

    @property
    def index_fields(self) -> list[str]:
        return ["name", *(f.name for f in self.fields if f.index)]

    def takes(self, type_name: str) -> bool:
        """Whether an extracted entity of `type_name` becomes a node of this class."""
        lowered, own = type_name.strip().lower(), self.name.lower()
        return (
            lowered == own
            or lowered in self.aliases
            or own in OFFLINE_ALIASES.get(type_name.strip(), frozenset())
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
        self.title = _model_name(str(schema.get("title") or "CustomGraph"))
        self.description = str(schema.get("description") or "")
        defs = schema.get("$defs") or schema.get("definitions") or {}
        if not isinstance(defs, dict):
            raise InvalidGraphModel(f"`$defs` must be an object; {EXPECTED}")
        self._defs = defs
        found = _node_schemas(schema, defs)
        if not found:
            raise InvalidGraphModel(f"the graph model declares no node class; {EXPECTED}")
        self.classes = {name: self._node_class(name, sub) for name, sub in found.items()}
        self.relationships = _relationship_names(schema, defs)

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

    def _node_class(self, name: str, sub: dict[str, Any]) -> NodeClass:
        if not _NAME.fullmatch(name) or name in RESERVED_TYPES:
            raise InvalidGraphModel(
                f"node class {name!r}: a class name must be 1-64 letters, digits or `_` "
                "starting with a letter, and not one of cogmill's types "
                f"({', '.join(sorted(RESERVED_TYPES))})"
            )
        properties = sub.get("properties") or {}
        name_kind = self._field(name, "name", properties["name"])
        if name_kind.kind != "string" or name_kind.many:
            raise InvalidGraphModel(f"node class {name}: `name` must be a string")
        fields = []
        for field, field_schema in properties.items():
            if field in ("name", "description"):
                continue
            if field in RESERVED_FIELDS or not _NAME.fullmatch(field):
                raise InvalidGraphModel(
                    f"node class {name}: field {field!r} is reserved or not a plain name; "
                    f"rename it (reserved: {', '.join(sorted(RESERVED_FIELDS))})"
                )
            fields.append(self._field(name, field, field_schema))
        aliases = sub.get("x-aliases") or []
        if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
            raise InvalidGraphModel(f"node class {name}: `x-aliases` must be a list of strings")
        return NodeClass(
            name=name,
            description=str(sub.get("description") or ""),
            fields=tuple(fields),
            aliases=frozenset(a.lower() for a in aliases),
        )

    def _field(self, owner: str, field: str, schema: Any) -> FieldSpec:
        """A field's spec from its JSON Schema; InvalidGraphModel for shapes nodes cannot store."""
        where = f"field {owner}.{field}"
        resolved = self._flatten(where, schema)
        many = resolved.get("type") == "array"
        item = self._flatten(where, resolved.get("items") or {}) if many else resolved
        choices = tuple(item.get("enum") or (() if "const" not in item else (item["const"],)))
        kind = item.get("type")
        if kind is None and choices:
            kind = {str: "string", bool: "boolean", int: "integer", float: "number"}.get(
                type(choices[0])
            )
        if kind not in SCALARS:
            raise InvalidGraphModel(
                f"{where} has type {kind or 'unspecified'!s}: fields must be string, integer, "
                "number, boolean, an enum or an array of those (graph nodes store flat values; "
                "declare links between nodes as relationships)"
            )
        index = bool(schema.get("x-index") or resolved.get("x-index"))
        if index and kind != "string":
            raise InvalidGraphModel(f"{where}: only text fields can be embedded (`x-index`)")
        description = str(schema.get("description") or resolved.get("description") or "")
        return FieldSpec(field, kind, many, choices, description, index)

    def _flatten(self, where: str, schema: Any, depth: int = 0) -> dict[str, Any]:
        """A field schema with local `$ref`s resolved and `null` alternatives dropped."""
        if not isinstance(schema, dict) or depth > 8:
            raise InvalidGraphModel(f"{where}: its schema must be a JSON object")
        if "$ref" in schema:
            target = str(schema["$ref"]).rsplit("/", 1)[-1]
            if target not in self._defs:
                raise InvalidGraphModel(f"{where}: $ref {schema['$ref']!r} names no `$defs` entry")
            merged = {**self._defs[target], **{k: v for k, v in schema.items() if k != "$ref"}}
            return self._flatten(where, merged, depth + 1)
        options = schema.get("anyOf") or schema.get("oneOf")
        if options:
            real = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
            if len(real) != 1:
                raise InvalidGraphModel(f"{where}: a field may have one type (or that or null)")
            rest = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
            return self._flatten(where, {**rest, **real[0]}, depth + 1)
        kind = schema.get("type")
        if isinstance(kind, list):
            kinds = [k for k in kind if k != "null"]
            if len(kinds) != 1:
                raise InvalidGraphModel(f"{where}: a field may have one type (or that or null)")
            return {**schema, "type": kinds[0]}
        return schema


def _node_schemas(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Node class schemas by type name: `$defs` objects with `name`, or the schema itself."""
    found = {
        key: sub
        for key, sub in defs.items()
        if isinstance(sub, dict) and _has(sub, "name") and not _is_edge(sub)
    }
    if not found and _has(schema, "name"):
        found[_model_name(str(schema.get("title") or ""))] = schema
    return found


def _has(schema: dict[str, Any], prop: str) -> bool:
    properties = schema.get("properties")
    return isinstance(properties, dict) and prop in properties


def _is_edge(schema: dict[str, Any]) -> bool:
    return _has(schema, "source") and _has(schema, "target")


def _relationship_names(schema: dict[str, Any], defs: dict[str, Any]) -> list[str]:
    """Allowed relationship names in snake_case (empty: any name)."""
    listed = schema.get("x-relationships") or []
    if not isinstance(listed, list) or not all(isinstance(n, str) for n in listed):
        raise InvalidGraphModel("`x-relationships` must be a list of relationship names")
    names = list(listed)
    for sub in defs.values():
        if isinstance(sub, dict) and _is_edge(sub) and _has(sub, "name"):
            spec = sub["properties"]["name"]
            names += spec.get("enum") or ([spec["const"]] if "const" in spec else [])
    return list(dict.fromkeys("_".join(str(n).lower().split()) for n in names if str(n).strip()))


def _model_name(title: str) -> str:
    """A name usable as a pydantic model and OpenAI schema name."""
    cleaned = re.sub(r"[^A-Za-z0-9_]", "", title.replace(" ", "_"))[:64]
    return cleaned if cleaned[:1].isalpha() else f"G{cleaned}"[:64]


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
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise InvalidGraphModel(f"graph model file {ref} is not readable JSON: {err}") from err
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
