"""Deterministic replies of the test LLM server for the retrieval schemas, keyed on their name.

`Answer` (retrieval/answer.py): the context line sharing the most words with the question.
`StructuredAnswer` (a `response_model`): the caller's schema filled from that line.
`CypherQuery` (NATURAL_LANGUAGE): a fixed read-only query; a question containing "broken"
first gets a query with a syntax error and the fixed one once the error is sent back, a
question containing "sneaky" gets a write query (which must be refused), and a question that
quotes a query in backticks gets that query (as a model told to use it would write it).
"""

from __future__ import annotations

import re
from typing import Any

_LINE = re.compile(r"^\[(\d+)\] (.*?)(?: \(from [^)]*\))?$")
_WORD = re.compile(r"\w+")
_INT = re.compile(r"-?\d+")
_QUOTED = re.compile(r"`([^`]+)`")
SAFE_CYPHER = "MATCH (c:DocumentChunk) RETURN c ORDER BY c.id LIMIT 3"
BROKEN_CYPHER = "MATCH (c:DocumentChunk RETURN c"
WRITE_CYPHER = "MATCH (c:DocumentChunk) DETACH DELETE c"


def retrieval_reply(body: dict[str, Any], text: str) -> dict[str, Any] | None:
    """The JSON reply for a retrieval schema, or None for schemas handled elsewhere."""
    spec = (body.get("response_format") or {}).get("json_schema") or {}
    name = spec.get("name")
    if name == "Answer":
        number, line = best_line(text)
        return {"answer": line or "The context does not say.", "used": [number] if line else []}
    if name == "StructuredAnswer":
        return fill(spec.get("schema") or {}, best_line(text)[1])
    if name == "CypherQuery":
        retried = any("failed" in str(m.get("content", "")) for m in body["messages"][2:])
        question = text.lower()
        if quoted := _QUOTED.search(text):
            return {"cypher": quoted.group(1)}
        if "sneaky" in question:
            return {"cypher": WRITE_CYPHER}
        if "broken" in question and not retried:
            return {"cypher": BROKEN_CYPHER}
        return {"cypher": SAFE_CYPHER}
    return None


def best_line(text: str) -> tuple[int, str]:
    """(number, text) of the context line sharing the most words with the question line."""
    question, _, context = text.partition("\n\nContext:\n")
    asked = set(_WORD.findall(question.lower())) - {"question"}
    best = (0, 0, "")
    for raw in context.splitlines():
        match = _LINE.match(raw.strip())
        if match:
            shared = len(asked & set(_WORD.findall(match.group(2).lower())))
            if shared > best[0] or not best[2]:
                best = (shared, int(match.group(1)), match.group(2))
    return best[1], best[2]


def fill(schema: dict[str, Any], line: str) -> dict[str, Any]:
    """Every property of an object schema given a value taken from `line`."""
    return {name: _value(sub, line) for name, sub in (schema.get("properties") or {}).items()}


def _value(schema: dict[str, Any], line: str) -> Any:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "integer":
        found = _INT.search(line)
        return int(found.group()) if found else 0
    if kind == "number":
        found = _INT.search(line)
        return float(found.group()) if found else 0.0
    if kind == "boolean":
        return bool(line)
    if kind == "array":
        return [_value(schema.get("items") or {"type": "string"}, line)]
    if kind == "object":
        return fill(schema, line)
    return line
