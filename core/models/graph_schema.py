"""A custom graph model's JSON Schema read into node classes and relationship names.

What the schema may hold is described in core/models/custom.py; everything here refuses, with
an `InvalidGraphModel` saying what to change, the shapes graph nodes cannot store.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from core.errors import InvalidInput
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

RESERVED_TYPES = frozenset(
    {
        DATASET,
        DOCUMENT,
        CHUNK,
        ENTITY,
        ENTITY_TYPE,
        EDGE_TYPE,
        TEXT_SUMMARY,
        EVENT,
        TIMESTAMP,
        INTERVAL,
        TABLE,
        TABLE_ROW,
        NODE_SET_LABEL,
        "Node",
    }
)
RESERVED_FIELDS = frozenset({"id", "type", "dataset", "properties", "ontology_uri", "support"})
SCALARS: dict[str, type] = {"string": str, "integer": int, "number": float, "boolean": bool}
# The offline extractor's types -> class names (lowercase) that take them.
OFFLINE_ALIASES: dict[str, frozenset[str]] = {
    "Person": frozenset(
        {
            "person",
            "people",
            "human",
            "individual",
            "scientist",
            "researcher",
            "author",
            "character",
            "employee",
            "artist",
        }
    ),
    "Organization": frozenset(
        {
            "organization",
            "organisation",
            "company",
            "business",
            "org",
            "corporation",
            "institution",
            "university",
            "agency",
            "firm",
        }
    ),
    "Location": frozenset(
        {"location", "place", "city", "country", "region", "area", "site", "gpe", "geo"}
    ),
    "Date": frozenset({"date", "time", "year", "period"}),
    "Work": frozenset({"work", "book", "film", "movie", "artwork", "publication", "creativework"}),
    "Group": frozenset({"group", "nationality", "religion", "norp"}),
    "Event": frozenset({"event", "happening", "occurrence"}),
    "Facility": frozenset({"facility", "building", "landmark", "venue"}),
    "Product": frozenset({"product", "device", "technology", "tool"}),
    "Language": frozenset({"language"}),
    "Law": frozenset({"law", "legislation", "treaty", "regulation"}),
    "Thing": frozenset({"thing", "concept", "topic", "other", "misc"}),
}
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
EXPECTED = (
    "expected a JSON Schema object whose `$defs` are node classes (objects with a string `name` "
    "property and flat fields), e.g. a pydantic model's model_json_schema()"
)


class InvalidGraphModel(InvalidInput):
    """A custom graph model that cogmill cannot use; the message says what to change."""

    code = "invalid_graph_model"


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


class SchemaReader:
    """Reads node classes out of one graph model's JSON Schema, resolving its `$defs`."""

    def __init__(self, defs: dict[str, Any]) -> None:
        self.defs = defs

    def node_class(self, name: str, sub: dict[str, Any]) -> NodeClass:
        """The node class `name` declared by `sub`; InvalidGraphModel for a bad name or field."""
        if not _NAME.fullmatch(name) or name in RESERVED_TYPES:
            raise InvalidGraphModel(
                f"node class {name!r}: a class name must be 1-64 letters, digits or `_` "
                "starting with a letter, and not one of cogmill's types "
                f"({', '.join(sorted(RESERVED_TYPES))})"
            )
        properties = sub.get("properties") or {}
        name_kind = self.field(name, "name", properties["name"])
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
            fields.append(self.field(name, field, field_schema))
        aliases = sub.get("x-aliases") or []
        if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
            raise InvalidGraphModel(f"node class {name}: `x-aliases` must be a list of strings")
        return NodeClass(
            name=name,
            description=str(sub.get("description") or ""),
            fields=tuple(fields),
            aliases=frozenset(a.lower() for a in aliases),
        )

    def field(self, owner: str, field: str, schema: Any) -> FieldSpec:
        """A field's spec from its JSON Schema; InvalidGraphModel for shapes nodes cannot store."""
        where = f"field {owner}.{field}"
        resolved = self.flatten(where, schema)
        many = resolved.get("type") == "array"
        item = self.flatten(where, resolved.get("items") or {}) if many else resolved
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

    def flatten(self, where: str, schema: Any, depth: int = 0) -> dict[str, Any]:
        """A field schema with local `$ref`s resolved and `null` alternatives dropped."""
        if not isinstance(schema, dict) or depth > 8:
            raise InvalidGraphModel(f"{where}: its schema must be a JSON object")
        if "$ref" in schema:
            target = str(schema["$ref"]).rsplit("/", 1)[-1]
            if target not in self.defs:
                raise InvalidGraphModel(f"{where}: $ref {schema['$ref']!r} names no `$defs` entry")
            merged = {**self.defs[target], **{k: v for k, v in schema.items() if k != "$ref"}}
            return self.flatten(where, merged, depth + 1)
        options = schema.get("anyOf") or schema.get("oneOf")
        if options:
            real = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
            if len(real) != 1:
                raise InvalidGraphModel(f"{where}: a field may have one type (or that or null)")
            rest = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
            return self.flatten(where, {**rest, **real[0]}, depth + 1)
        kind = schema.get("type")
        if isinstance(kind, list):
            kinds = [k for k in kind if k != "null"]
            if len(kinds) != 1:
                raise InvalidGraphModel(f"{where}: a field may have one type (or that or null)")
            return {**schema, "type": kinds[0]}
        return schema


def node_schemas(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Node class schemas by type name: `$defs` objects with `name`, or the schema itself."""
    found = {
        key: sub
        for key, sub in defs.items()
        if isinstance(sub, dict) and _has(sub, "name") and not _is_edge(sub)
    }
    if not found and _has(schema, "name"):
        found[model_name(str(schema.get("title") or ""))] = schema
    return found


def _has(schema: dict[str, Any], prop: str) -> bool:
    properties = schema.get("properties")
    return isinstance(properties, dict) and prop in properties


def _is_edge(schema: dict[str, Any]) -> bool:
    return _has(schema, "source") and _has(schema, "target")


def relationship_names(schema: dict[str, Any], defs: dict[str, Any]) -> list[str]:
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


def functional_relations(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, str]:
    """Relationship names that hold one value at a time -> the end holding it: edge classes
    marked `"functional": true` (with `"functional_side"`: "source", the default, "target"
    or "both"), and `"x-functional"` at the top (a list of names, or names -> sides)."""
    declared = schema.get("x-functional") or {}
    if isinstance(declared, list):
        declared = dict.fromkeys(declared, "source")
    if not isinstance(declared, dict):
        raise InvalidGraphModel(
            "`x-functional` must list relationship names (or map them to sides)"
        )
    found = dict(declared)
    for sub in defs.values():
        if not (isinstance(sub, dict) and _is_edge(sub) and sub.get("functional")):
            continue
        if sub["functional"] is not True:
            raise InvalidGraphModel("an edge class's `functional` must be true or false")
        spec = sub["properties"].get("name", {}) if _has(sub, "name") else {}
        names = spec.get("enum") or ([spec["const"]] if "const" in spec else [])
        found.update(dict.fromkeys(names, sub.get("functional_side", "source")))
    for name, side in found.items():
        if not isinstance(name, str) or side not in FUNCTIONAL_SIDES:
            raise InvalidGraphModel(
                f"functional relationship {name!r} has side {side!r}; use one of "
                f"{', '.join(FUNCTIONAL_SIDES)} (the end that holds one value at a time)"
            )
    return {"_".join(k.lower().split()): v for k, v in found.items()}


FUNCTIONAL_SIDES = ("source", "target", "both")


def model_name(title: str) -> str:
    """A name usable as a pydantic model and OpenAI schema name."""
    cleaned = re.sub(r"[^A-Za-z0-9_]", "", title.replace(" ", "_"))[:64]
    return cleaned if cleaned[:1].isalpha() else f"G{cleaned}"[:64]
