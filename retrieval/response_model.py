"""`response_model`: a pydantic model class or a JSON Schema that a completion must follow.

The LLM client validates replies against a pydantic class, so a JSON Schema (from the API
body or `cogmill search --response-model schema.json`) becomes a pydantic model here. The
subset understood is what structured-output APIs accept: objects with typed properties,
arrays, enums, nullable types and local `$ref`s; the LLM is sent the caller's schema itself.
"""

from __future__ import annotations

import functools
import json
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

ResponseModel = type[BaseModel] | dict[str, Any]
# The name every structured completion is requested under (the `response_format` name).
STRUCTURED_NAME = "StructuredAnswer"
_SCALARS: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool}
_MAX_DEPTH = 16


class JsonSchemaModel(BaseModel):
    """Base of models built from a JSON Schema: reports the caller's schema, not its own."""

    model_config = ConfigDict(extra="allow")
    source_schema: ClassVar[dict[str, Any]] = {}

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        """The JSON Schema the caller gave (what the LLM is asked to follow)."""
        return cls.source_schema


def structured_model(spec: ResponseModel) -> type[BaseModel]:
    """The pydantic class to request for `spec`. ValueError names what is wrong with it."""
    if isinstance(spec, type) and issubclass(spec, BaseModel):
        return _named(spec)
    if isinstance(spec, dict):
        return _from_json(json.dumps(spec, sort_keys=True))
    raise ValueError(
        f"response_model must be a pydantic model class or a JSON Schema object, got "
        f"{type(spec).__name__}"
    )


def load_schema(text: str, origin: str = "response_model") -> dict[str, Any]:
    """A JSON Schema from JSON text, checked to be usable. ValueError says what to fix."""
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"{origin} is not valid JSON: {err}") from err
    if not isinstance(schema, dict):
        raise ValueError(f"{origin} must be a JSON object (a JSON Schema), got {type(schema)}")
    structured_model(schema)  # raises on an unusable schema
    return schema


@functools.lru_cache(maxsize=64)
def _named(model: type[BaseModel]) -> type[BaseModel]:
    """A subclass of the caller's model under the one structured-completion name."""
    return create_model(STRUCTURED_NAME, __base__=model)


@functools.lru_cache(maxsize=64)
def _from_json(text: str) -> type[BaseModel]:
    schema = json.loads(text)
    if schema.get("type", "object") != "object" or not isinstance(schema.get("properties"), dict):
        raise ValueError(
            'response_model JSON Schema must describe an object: {"type": "object", '
            '"properties": {...}}'
        )
    defs = {**schema.get("definitions", {}), **schema.get("$defs", {})}
    built = _object_model(STRUCTURED_NAME, schema, defs, 0, base=JsonSchemaModel)
    built.source_schema = schema  # type: ignore[attr-defined]
    return built


def _object_model(
    name: str,
    schema: dict[str, Any],
    defs: dict[str, Any],
    depth: int,
    base: type[BaseModel] = BaseModel,
) -> type[BaseModel]:
    """A pydantic model for an object schema; required properties have no default."""
    required = set(schema.get("required", []))
    fields: dict[str, Any] = {}
    for prop, sub in schema["properties"].items():
        if not isinstance(sub, dict):
            raise ValueError(f"response_model property {prop!r} must be a schema object")
        kind = _type_of(sub, defs, depth + 1, f"{name}_{prop}")
        info = Field(description=sub.get("description"))
        if prop in required:
            fields[prop] = (kind, info)
        else:
            fields[prop] = (kind | None, Field(default=None, description=sub.get("description")))
    if base is BaseModel:
        return create_model(name, __config__=ConfigDict(extra="allow"), **fields)
    return create_model(name, __base__=base, **fields)


def _type_of(schema: dict[str, Any], defs: dict[str, Any], depth: int, name: str) -> Any:
    """The Python type for one property schema."""
    if depth > _MAX_DEPTH:
        raise ValueError(f"response_model is nested deeper than {_MAX_DEPTH} levels")
    if "$ref" in schema:
        ref = str(schema["$ref"]).rsplit("/", 1)[-1]
        if ref not in defs:
            raise ValueError(f"response_model $ref {schema['$ref']!r} is not defined in $defs")
        return _type_of(defs[ref], defs, depth + 1, ref)
    if "enum" in schema:
        return Literal[tuple(schema["enum"])]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [_type_of(option, defs, depth + 1, name) for option in schema[key]]
            return functools.reduce(lambda a, b: a | b, options)
    kind = schema.get("type")
    if isinstance(kind, list):
        options = [_type_of({**schema, "type": k}, defs, depth + 1, name) for k in kind]
        return functools.reduce(lambda a, b: a | b, options)
    if kind in _SCALARS:
        return _SCALARS[kind]
    if kind == "null":
        return type(None)
    if kind == "array":
        items = schema.get("items")
        item = _type_of(items, defs, depth + 1, name) if isinstance(items, dict) else Any
        return list[item]  # type: ignore[valid-type]  # built at run time from the schema
    if kind == "object" or kind is None:
        if isinstance(schema.get("properties"), dict):
            return _object_model(name, schema, defs, depth)
        return dict[str, Any]
    raise ValueError(f"response_model uses an unknown JSON Schema type {kind!r}")
