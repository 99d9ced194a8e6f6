"""The JSON schema a structured completion sends, its `response_format`, and the turn that
asks a model to repair a reply that does not validate.
"""

from __future__ import annotations

import functools
from typing import Any

import openai
from pydantic import BaseModel, ValidationError

from core.llm.retries import short


@functools.lru_cache(maxsize=64)
def schema_of(schema: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema as sent, computed once per class (it takes milliseconds).
    Read-only. Without pydantic's `title`s (each a field's or class's name again) or the
    top-level class's docstring (written for this code's readers): every call sends the
    schema, and they were a fifth of an extraction prompt's tokens."""
    sent = _untitled(schema.model_json_schema())
    sent.pop("description", None)
    return sent


def _untitled(node: Any, *, names: bool = False) -> Any:
    """A JSON schema without `title` keys; `names`: `node` maps property names to schemas
    (a property may itself be called "title")."""
    if isinstance(node, list):
        return [_untitled(item) for item in node]
    if not isinstance(node, dict):
        return node
    return {
        key: _untitled(value, names=key in ("properties", "$defs") and not names)
        for key, value in node.items()
        if names or key != "title"
    }


def response_format(
    schema: type[BaseModel], schema_json: dict[str, Any], json_schema: bool
) -> dict[str, Any]:
    """The `response_format` for a schema; `json_object` for servers without `json_schema`."""
    if not json_schema:
        return {"type": "json_object"}
    # strict=False: strict mode demands every field required and no defaults, which general
    # pydantic models do not satisfy; replies are validated here either way.
    spec = {"name": schema.__name__, "schema": schema_json, "strict": False}
    return {"type": "json_schema", "json_schema": spec}


def mentions_schema(err: openai.APIStatusError) -> bool:
    """Whether a 400/422 complains about the response format rather than the request."""
    text = f"{err.message} {err.body}".lower()
    return "response_format" in text or "schema" in text


def repair_messages(
    messages: list[dict[str, Any]], reply: str, err: ValidationError
) -> list[dict[str, Any]]:
    """The original conversation plus the bad reply and what was wrong with it."""
    fix = (
        f"Your reply was not valid: {short(err)}\n"
        "Answer again with only the corrected JSON object, no other text."
    )
    return [*messages, {"role": "assistant", "content": reply}, {"role": "user", "content": fix}]
