"""Deterministic replies of the test LLM server for the multi-step search schemas, by name.

`AnswerValidation` (COT): sufficient when the answer names every capitalised name of the
question; otherwise a follow-up about the newest name of the context (its last line) that the
question does not name (the far end of the newest triplet), so each round that found
something asks something new.
`SubQuestions` (DECOMPOSITION): the question split at " and " and commas.
`GraphSummary`: the first three context lines joined.
`SearchTypeChoice` (FEELING_LUCKY): CHUNKS when offered, else the first type offered.
`ToolChoice` (AGENTIC): GRAPH_COMPLETION, then CHUNKS, then "answer" (by "Tool calls so far").
"""

from __future__ import annotations

import re
from typing import Any

_NAME = re.compile(r"\b[A-Z][a-z0-9]+(?: [A-Z][a-z0-9]+)*")
_SKIP = {"What", "Who", "Why", "How", "When", "Where", "Which", "The", "A", "An", "Is", "Did"}
_LINE = re.compile(r"^\[\d+\] (.*?)(?: \(from [^)]*\))?$")
TOOL_ORDER = ("GRAPH_COMPLETION", "CHUNKS")


def multistep_reply(body: dict[str, Any], text: str) -> dict[str, Any] | None:
    """The JSON reply for a multi-step schema, or None for other schemas."""
    spec = (body.get("response_format") or {}).get("json_schema") or {}
    name, schema = spec.get("name"), spec.get("schema") or {}
    fields = _sections(text)
    question = fields.get("Question", "")
    if name == "AnswerValidation":
        return validate(question, fields.get("Answer", ""), _context(fields))
    if name == "SubQuestions":
        parts = [p.strip(" ?") for p in re.split(r",|\band\b", question) if p.strip(" ?")]
        return {"questions": [p + "?" for p in parts]}
    if name == "GraphSummary":
        return {"summary": " ".join(_context(fields)[:3])}
    if name == "SearchTypeChoice":
        offered = _enum(schema, "search_type")
        return {"search_type": "CHUNKS" if "CHUNKS" in offered else offered[0], "reason": "test"}
    if name == "ToolChoice":
        offered = _enum(schema, "tool")
        made = int(fields.get("Tool calls so far", "0") or 0)
        tool = TOOL_ORDER[made] if made < len(TOOL_ORDER) else "answer"
        return {"tool": tool if tool in offered else "answer", "query": question, "reason": "test"}
    return None


def validate(question: str, answer: str, context: list[str]) -> dict[str, Any]:
    """Sufficient iff the answer names every name of the question; else a follow-up."""
    missing = [n for n in names(question) if n.lower() not in answer.lower()]
    if not missing:
        return {"sufficient": True, "missing": "", "follow_up": ""}
    asked = {n.lower() for n in names(question)}
    newest = next(
        (n for line in context[-1:] for n in reversed(names(line)) if n.lower() not in asked),
        None,
    )
    follow_up = f"What else is known about {newest or missing[0]}?"
    return {"sufficient": False, "missing": ", ".join(missing), "follow_up": follow_up}


def names(text: str) -> list[str]:
    """Capitalised word runs, leading question words dropped."""
    found = []
    for match in _NAME.finditer(text):
        words = match.group().split()
        while words and words[0] in _SKIP:
            words.pop(0)
        if words:
            found.append(" ".join(words))
    return found


def _sections(text: str) -> dict[str, str]:
    """`Label: value` / `Label:\\nlines` paragraphs of a user message (retrieval.multistep)."""
    out: dict[str, str] = {}
    for block in text.split("\n\n"):
        label, sep, value = block.partition(":")
        if sep and "\n" not in label and len(label) < 40:
            out[label.strip()] = value.strip()
    return out


def _context(fields: dict[str, str]) -> list[str]:
    lines = []
    for raw in fields.get("Context", "").splitlines():
        match = _LINE.match(raw.strip())
        if match:
            lines.append(match.group(1))
    return lines


def _enum(schema: dict[str, Any], field: str) -> list[str]:
    spec = (schema.get("properties") or {}).get(field) or {}
    if "enum" in spec:
        return list(spec["enum"])
    if "const" in spec:
        return [spec["const"]]
    return []
