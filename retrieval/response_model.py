"""`response_model`: a pydantic model class or a JSON Schema that a completion must follow.

The LLM client validates replies against a pydantic class, so a JSON Schema (from the API
body or `cogmill search --response-model schema.json`) becomes a pydantic model here. The
subset understood is what structured-output APIs accept: objects with typed properties,
arrays, enums, nullable types and local `$ref`s; the LLM is sent the caller's schema itself.

The schema comes from outside, so building it is bounded: each `$defs` entry is built once
however often it is referenced, and its size, nodes, properties, depth, enum values and
alternatives are capped by settings, checked by a survey before any type is built (pydantic
takes seconds over a union of 2,000 literals). A built model is kept by the schema's
canonical JSON, so a schema resent with its keys reordered is not built again. Anything
unusable or over a cap is an InvalidResponseModel that says what to change.
"""

from __future__ import annotations

import functools
import json
import logging
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, create_model

from core.errors import InvalidInput
from core.settings import Settings

log = logging.getLogger("cogmill.response_model")

ResponseModel = type[BaseModel] | dict[str, Any]
# The name every structured completion is requested under (the `response_format` name).
STRUCTURED_NAME = "StructuredAnswer"
_SCALARS: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool}
_ENUM_VALUES = (str, int, float, bool, type(None))


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
    max_enum_values: int
    max_alternatives: int

    @classmethod
    def from_settings(cls, settings: Settings | None = None) -> SchemaLimits:
        """The limits of `settings`, or the settings' defaults."""
        if settings is None:
            fields = Settings.model_fields
            return cls(*(fields[f"response_model_max_{k}"].default for k in _LIMIT_KEYS))
        return cls(*(getattr(settings, f"response_model_max_{k}") for k in _LIMIT_KEYS))


_LIMIT_KEYS = ("bytes", "nodes", "properties", "depth", "enum_values", "alternatives")


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
    defs = _definitions(schema)
    try:
        _Survey(defs, limits).object(STRUCTURED_NAME, schema, 0)
        built = _Builder(defs).object_model(STRUCTURED_NAME, schema, 0, base=JsonSchemaModel)
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


class _Survey:
    """Walks a schema as `_Builder` will, building nothing: every cap is checked (and every
    malformed part refused) before the first type is made. It stops at the node cap, so the
    walk itself is bounded too."""

    def __init__(self, defs: dict[str, Any], limits: SchemaLimits) -> None:
        self.defs, self.limits = defs, limits
        self.surveyed: set[str] = set()
        self.visiting: set[str] = set()
        self.nodes = self.properties = self.enum_values = self.alternatives = 0

    def object(self, name: str, schema: dict[str, Any], depth: int) -> None:
        """An object schema's properties (the caller checked `properties` is an object)."""
        required = schema.get("required", [])
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise InvalidResponseModel(
                f"response_model {name}: 'required' must be a list of property names"
            )
        more = len(schema["properties"])
        self.properties = self._within("properties", self.properties + more, "properties")
        for prop, sub in schema["properties"].items():
            _check_property_name(prop)
            if not isinstance(sub, dict):
                raise InvalidResponseModel(
                    f"response_model property {prop!r} must be a schema object"
                )
            self.node(sub, depth + 1, f"{name}_{prop}")

    def node(self, schema: Any, depth: int, name: str) -> None:
        """One sub-schema and what it holds."""
        if not isinstance(schema, dict):
            raise InvalidResponseModel(
                f"response_model {name}: every sub-schema must be a JSON object"
            )
        self.nodes = self._within("nodes", self.nodes + 1, "schema nodes")
        if depth > self.limits.max_depth:
            raise InvalidResponseModel(
                f"response_model is nested deeper than {self.limits.max_depth} levels"
            )
        if "$ref" in schema:
            self.reference(schema["$ref"], depth)
        elif "enum" in schema:
            values = schema["enum"]
            _literal_values(values, name)
            more = len(values)
            self.enum_values = self._within("enum_values", self.enum_values + more, "enum values")
        elif (key := next((k for k in ("anyOf", "oneOf") if k in schema), None)) is not None:
            options = schema[key]
            if not isinstance(options, list) or not options:
                raise InvalidResponseModel(
                    f"response_model {name}: {key!r} must be a non-empty list"
                )
            self._alternatives(len(options))
            for option in options:
                self.node(option, depth + 1, name)
        elif isinstance(kind := schema.get("type"), list):
            if not kind or not all(isinstance(k, str) for k in kind):
                raise InvalidResponseModel(
                    f"response_model {name}: 'type' list must hold type names"
                )
            self._alternatives(len(kind))
            for k in kind:
                self.node({**schema, "type": k}, depth + 1, name)
        else:
            self.typed(kind, schema, depth, name)

    def typed(self, kind: Any, schema: dict[str, Any], depth: int, name: str) -> None:
        if kind is not None and not isinstance(kind, str):
            raise InvalidResponseModel(
                f"response_model {name}: 'type' must be a type name or a list"
            )
        if kind == "array" and isinstance(items := schema.get("items"), dict):
            self.node(items, depth + 1, name)
        elif kind in ("object", None) and isinstance(schema.get("properties"), dict):
            self.object(name, schema, depth)
        elif kind not in (*_SCALARS, "null", "array", "object", None):
            raise InvalidResponseModel(f"response_model uses an unknown JSON Schema type {kind!r}")

    def reference(self, ref: Any, depth: int) -> None:
        key = str(ref).rsplit("/", 1)[-1]
        if key not in self.defs:
            raise InvalidResponseModel(f"response_model $ref {ref!r} is not defined in $defs")
        if key in self.visiting:
            raise InvalidResponseModel(
                f"response_model $ref {ref!r} is recursive, which is not supported"
            )
        if key not in self.surveyed:  # built once, so surveyed once
            self.visiting.add(key)
            self.node(self.defs[key], depth + 1, key)
            self.visiting.discard(key)
            self.surveyed.add(key)

    def _alternatives(self, count: int) -> None:
        what = "anyOf/oneOf/type-list alternatives"
        self.alternatives = self._within("alternatives", self.alternatives + count, what)

    def _within(self, key: str, total: int, what: str) -> int:
        """`total`, or an InvalidResponseModel naming the cap `max_<key>` it passes."""
        limit = getattr(self.limits, f"max_{key}")
        if total > limit:
            setting = f"COGMILL_RESPONSE_MODEL_MAX_{key.upper()}"
            raise InvalidResponseModel(
                f"response_model has more than {limit} {what} ({setting}); send a smaller schema"
            )
        return total


class _Builder:
    """Builds one schema's types, each definition once. `_Survey` walked the same schema
    first, checking the caps and refusing every malformed part, so nothing is checked here."""

    def __init__(self, defs: dict[str, Any]) -> None:
        self.defs = defs
        self.built: dict[str, Any] = {}

    def object_model(
        self, name: str, schema: dict[str, Any], depth: int, base: type[BaseModel] = BaseModel
    ) -> type[BaseModel]:
        """A pydantic model for an object schema; required properties have no default."""
        required = schema.get("required", [])
        fields: dict[str, Any] = {}
        for prop, sub in schema["properties"].items():
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
        if "$ref" in schema:
            return self.reference(schema["$ref"], depth)
        if "enum" in schema:
            return Literal[tuple(schema["enum"])]
        for key in ("anyOf", "oneOf"):
            if key in schema:
                options = schema[key]
                return _union([self.type_of(option, depth + 1, name) for option in options])
        kind = schema.get("type")
        if isinstance(kind, list):
            return _union([self.type_of({**schema, "type": k}, depth + 1, name) for k in kind])
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
        if key not in self.built:
            self.built[key] = self.type_of(self.defs[key], depth + 1, key)
        return self.built[key]


def _literal_values(values: Any, name: str) -> None:
    """Refuse an enum that is not a non-empty list of strings, numbers, booleans, null."""
    if not isinstance(values, list) or not values:
        raise InvalidResponseModel(f"response_model {name}: 'enum' must be a non-empty list")
    if not all(isinstance(v, _ENUM_VALUES) for v in values):
        raise InvalidResponseModel(
            f"response_model {name}: 'enum' values must be strings, numbers, booleans or null"
        )


def _union(options: list[Any]) -> Any:
    # One Union of all options: folding them with `|` pair by pair re-flattens the growing
    # union each time, quadratic in the options.
    return Union[tuple(options)]  # noqa: UP007  (the `X | Y` form cannot take a tuple)
