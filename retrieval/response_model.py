"""`response_model`: a pydantic model class or a JSON Schema that a completion must follow.

The LLM client validates replies against a pydantic class, so a JSON Schema (from the API
body or `cogmill search --response-model schema.json`) becomes a pydantic model here. The
subset understood is what structured-output APIs accept: objects with typed properties,
arrays, enums, nullable types and local `$ref`s; the LLM is sent the caller's schema itself.

The schema comes from outside, so building it is bounded: each `$defs` entry is
built once however often it is referenced (a fan-out of refs once cost minutes and GBs), and
the schema's size, nodes, properties and depth are capped by settings. Anything unusable or
over a cap is an InvalidResponseModel that says what to change.
"""

from __future__ import annotations

import functools
import json
import logging
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from core.errors import InvalidInput
from core.settings import Settings

ResponseModel = type[BaseModel] | dict[str, Any]
# The name every structured completion is requested under (the `response_format` name).
STRUCTURED_NAME = "StructuredAnswer"
_SCALARS: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool}
_ENUM_VALUES = (str, int, float, bool, type(None))
log = logging.getLogger("cogmill.response_model")


class InvalidResponseModel(InvalidInput):
    """A response_model cogmill cannot use (malformed, unsupported or over a cap)."""

    code = "invalid_response_model"


@dataclass(frozen=True)
class SchemaLimits:
    """Caps on a JSON Schema response_model (`COGMILL_RESPONSE_MODEL_MAX_*`)."""

    max_bytes: int
    max_nodes: int
    max_properties: int
    max_depth: int

    @classmethod
    def from_settings(cls, settings: Settings | None = None) -> SchemaLimits:
        """The limits of `settings`, or the settings' defaults."""
        if settings is None:
            fields = Settings.model_fields
            return cls(*(fields[f"response_model_max_{k}"].default for k in _LIMIT_KEYS))
        return cls(*(getattr(settings, f"response_model_max_{k}") for k in _LIMIT_KEYS))


_LIMIT_KEYS = ("bytes", "nodes", "properties", "depth")


class JsonSchemaModel(BaseModel):
    """Base of models built from a JSON Schema: reports the caller's schema, not its own."""

    model_config = ConfigDict(extra="allow")
    source_schema: ClassVar[dict[str, Any]] = {}

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        """The JSON Schema the caller gave (what the LLM is asked to follow)."""
        return cls.source_schema


def structured_model(spec: ResponseModel, settings: Settings | None = None) -> type[BaseModel]:
    """The pydantic class to request for `spec`. InvalidResponseModel names what is wrong
    with it."""
    if isinstance(spec, type) and issubclass(spec, BaseModel):
        return _named(spec)
    if isinstance(spec, dict):
        limits = SchemaLimits.from_settings(settings)
        try:
            text = json.dumps(spec, sort_keys=True)
        except (TypeError, ValueError) as err:
            raise InvalidResponseModel(
                "response_model JSON Schema must hold only JSON values"
            ) from err
        if len(text.encode()) > limits.max_bytes:
            raise InvalidResponseModel(
                f"response_model JSON Schema is {len(text.encode())} bytes, above the "
                f"{limits.max_bytes} allowed (COGMILL_RESPONSE_MODEL_MAX_BYTES); send a smaller "
                "schema"
            )
        return _from_json(text, limits)
    raise InvalidResponseModel(
        f"response_model must be a pydantic model class or a JSON Schema object, got "
        f"{type(spec).__name__}"
    )


def load_schema(
    text: str, origin: str = "response_model", settings: Settings | None = None
) -> dict[str, Any]:
    """A JSON Schema from JSON text, checked to be usable. InvalidResponseModel says what to fix."""
    try:
        schema = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as err:
        raise InvalidResponseModel(f"{origin} is not valid JSON (or is nested too deeply)") from err
    if not isinstance(schema, dict):
        raise InvalidResponseModel(
            f"{origin} must be a JSON object (a JSON Schema), got {type(schema)}"
        )
    structured_model(schema, settings)  # raises on an unusable schema
    return schema


@functools.lru_cache(maxsize=64)
def _named(model: type[BaseModel]) -> type[BaseModel]:
    """A subclass of the caller's model under the one structured-completion name."""
    return create_model(STRUCTURED_NAME, __base__=model)


@functools.lru_cache(maxsize=64)
def _from_json(text: str, limits: SchemaLimits) -> type[BaseModel]:
    schema = json.loads(text)
    if schema.get("type", "object") != "object" or not isinstance(schema.get("properties"), dict):
        raise InvalidResponseModel(
            'response_model JSON Schema must describe an object: {"type": "object", '
            '"properties": {...}}'
        )
    builder = _Builder(_definitions(schema), limits)
    try:
        built = builder.object_model(STRUCTURED_NAME, schema, 0, base=JsonSchemaModel)
    except RecursionError as err:
        raise InvalidResponseModel("response_model JSON Schema is nested too deeply") from err
    built.source_schema = schema  # type: ignore[attr-defined]
    return built


def _definitions(schema: dict[str, Any]) -> dict[str, Any]:
    """`definitions` and `$defs` merged; each must be an object of schema objects."""
    defs: dict[str, Any] = {}
    for key in ("definitions", "$defs"):
        part = schema.get(key, {})
        if not isinstance(part, dict) or not all(isinstance(d, dict) for d in part.values()):
            raise InvalidResponseModel(
                f"response_model {key!r} must be an object of schema objects"
            )
        defs.update(part)
    return defs


def _check_property_name(prop: str) -> None:
    """Names pydantic reserves cannot be fields; say so rather than fail inside pydantic."""
    if prop.startswith("_") or (prop.startswith("model_") and hasattr(JsonSchemaModel, prop)):
        raise InvalidResponseModel(
            f"response_model property name {prop!r} is not allowed: names may not start with "
            "'_' or be a pydantic model attribute (model_config, model_dump, ...); rename it"
        )
    if prop == "source_schema":
        raise InvalidResponseModel(
            "response_model property name 'source_schema' is reserved; rename it"
        )


class _Builder:
    """Builds one schema's types: each definition once, every node counted against the caps."""

    def __init__(self, defs: dict[str, Any], limits: SchemaLimits) -> None:
        self.defs = defs
        self.limits = limits
        self.built: dict[str, Any] = {}
        self.building: set[str] = set()
        self.nodes = 0
        self.properties = 0

    def object_model(
        self, name: str, schema: dict[str, Any], depth: int, base: type[BaseModel] = BaseModel
    ) -> type[BaseModel]:
        """A pydantic model for an object schema; required properties have no default."""
        required = schema.get("required", [])
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise InvalidResponseModel(
                f"response_model {name}: 'required' must be a list of property names"
            )
        fields: dict[str, Any] = {}
        for prop, sub in schema["properties"].items():
            self.properties += 1
            if self.properties > self.limits.max_properties:
                raise InvalidResponseModel(
                    f"response_model has more than {self.limits.max_properties} properties "
                    "(COGMILL_RESPONSE_MODEL_MAX_PROPERTIES); send a smaller schema"
                )
            _check_property_name(prop)
            if not isinstance(sub, dict):
                raise InvalidResponseModel(
                    f"response_model property {prop!r} must be a schema object"
                )
            kind = self.type_of(sub, depth + 1, f"{name}_{prop}")
            about = sub.get("description")
            about = about if isinstance(about, str) else None
            if prop in required:
                fields[prop] = (kind, Field(description=about))
            else:
                fields[prop] = (kind | None, Field(default=None, description=about))
        try:
            if base is BaseModel:
                return create_model(name, __config__=ConfigDict(extra="allow"), **fields)
            return create_model(name, __base__=base, **fields)
        except TypeError as err:  # pydantic's user errors are TypeErrors
            log.info("response_model_unbuildable name=%r error=%s", name, err)
            raise InvalidResponseModel(
                f"response_model object {name!r} cannot be built from its properties; rename "
                "properties that clash with Python or pydantic names"
            ) from err

    def type_of(self, schema: Any, depth: int, name: str) -> Any:
        """The Python type for one property schema."""
        if not isinstance(schema, dict):
            raise InvalidResponseModel(
                f"response_model {name}: every sub-schema must be a JSON object"
            )
        self.nodes += 1
        if self.nodes > self.limits.max_nodes:
            raise InvalidResponseModel(
                f"response_model has more than {self.limits.max_nodes} schema nodes "
                "(COGMILL_RESPONSE_MODEL_MAX_NODES); send a smaller schema"
            )
        if depth > self.limits.max_depth:
            raise InvalidResponseModel(
                f"response_model is nested deeper than {self.limits.max_depth} levels"
            )
        if "$ref" in schema:
            return self.reference(schema["$ref"], depth)
        if "enum" in schema:
            return _literal(schema["enum"], name)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                options = schema[key]
                if not isinstance(options, list) or not options:
                    raise InvalidResponseModel(
                        f"response_model {name}: {key!r} must be a non-empty list"
                    )
                return _union([self.type_of(option, depth + 1, name) for option in options])
        kind = schema.get("type")
        if isinstance(kind, list):
            if not kind or not all(isinstance(k, str) for k in kind):
                raise InvalidResponseModel(
                    f"response_model {name}: 'type' list must hold type names"
                )
            return _union([self.type_of({**schema, "type": k}, depth + 1, name) for k in kind])
        if kind is not None and not isinstance(kind, str):
            raise InvalidResponseModel(
                f"response_model {name}: 'type' must be a type name or a list"
            )
        return self.typed(kind, schema, depth, name)

    def typed(self, kind: str | None, schema: dict[str, Any], depth: int, name: str) -> Any:
        """The Python type for a schema of one JSON type (or none)."""
        if kind in _SCALARS:
            return _SCALARS[kind]
        if kind == "null":
            return type(None)
        if kind == "array":
            items = schema.get("items")
            item = self.type_of(items, depth + 1, name) if isinstance(items, dict) else Any
            return list[item]  # type: ignore[valid-type]  # built at run time from the schema
        if kind == "object" or kind is None:
            if isinstance(schema.get("properties"), dict):
                return self.object_model(name, schema, depth)
            return dict[str, Any]
        raise InvalidResponseModel(f"response_model uses an unknown JSON Schema type {kind!r}")

    def reference(self, ref: Any, depth: int) -> Any:
        """The type of a `$defs` entry, built the first time it is referenced."""
        key = str(ref).rsplit("/", 1)[-1]
        if key not in self.defs:
            raise InvalidResponseModel(f"response_model $ref {ref!r} is not defined in $defs")
        if key in self.built:
            return self.built[key]
        if key in self.building:
            raise InvalidResponseModel(
                f"response_model $ref {ref!r} is recursive, which is not supported"
            )
        self.building.add(key)
        self.built[key] = self.type_of(self.defs[key], depth + 1, key)
        self.building.discard(key)
        return self.built[key]


def _literal(values: Any, name: str) -> Any:
    """A Literal of an enum's values: a non-empty list of strings, numbers, booleans, null."""
    if not isinstance(values, list) or not values:
        raise InvalidResponseModel(f"response_model {name}: 'enum' must be a non-empty list")
    if not all(isinstance(v, _ENUM_VALUES) for v in values):
        raise InvalidResponseModel(
            f"response_model {name}: 'enum' values must be strings, numbers, booleans or null"
        )
    return Literal[tuple(values)]


def _union(options: list[Any]) -> Any:
    return functools.reduce(lambda a, b: a | b, options)
