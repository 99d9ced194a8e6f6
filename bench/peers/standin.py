"""The stand-in LLM and embeddings for all three systems: tests/llm_server.py, taught the peers'
reply formats so each system gets the same graph for the same passage.

One process serves one system (`--format`). cogmill's requests are answered exactly as in
its tests. LightRAG's extraction prompt is answered with the same entities and relationships
(`graph_for_text`) in its delimited rows, its gleaning turn with "nothing missed", its keyword
prompt with the question's capitalised names (low level) and first long lowercase words (high
level), so a mix query runs both its entity and its relation search. cognee's structured calls
are answered by filling the JSON schema it sends: its KnowledgeGraph from the same graph, any
other schema (summaries) with the passage's first sentence. Every answer is instant;
embeddings are the server's hashed bag-of-words vectors.

    python -m bench.peers.standin --format lightrag   # prints "listening URL PID"
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests import llm_server  # noqa: E402
from tests.llm_server import LLMTestServer, graph_for_text  # noqa: E402

_LR_INPUT = re.compile(r"---Input Text---\s*```\n?(.*?)\n?```", re.S)
_LR_QUERY = re.compile(r"User Query:\s*(.*?)\n\n---Output---", re.S)
FORMAT = "cogmill"  # whose reply formats this process speaks (--format)
_SCHEMA_IN_PROMPT = re.compile(r"conforming to this schema:\n```json\n(.*?)\n```", re.S)
_SEP = "<|#|>"
_ASKING = {"Who", "What", "When", "Where", "Which", "Why", "How", "Whose"}
_DONE = "<|COMPLETE|>"


def _users(body: dict[str, Any]) -> list[str]:
    texts = []
    for message in body.get("messages", []):
        if message.get("role") == "user":
            content = message.get("content", "")
            if isinstance(content, list):
                content = " ".join(part.get("text", "") for part in content)
            texts.append(str(content))
    return texts


def _flat(text: str) -> str:
    """A field without the row and tuple delimiters LightRAG parses on."""
    return " ".join(text.replace(_SEP, " ").split())


def lightrag_reply(body: dict[str, Any]) -> str | None:
    """LightRAG's extraction, gleaning and keyword replies, or None for other prompts."""
    users = _users(body)
    if not users:
        return None
    if "Based on the last extraction task" in users[-1]:
        return _DONE  # gleaning: the first answer missed nothing
    if (found := _LR_INPUT.search(users[0])) and _SEP in json.dumps(body.get("messages", [])):
        graph = graph_for_text(found.group(1))
        rows = [
            _SEP.join(["entity", _flat(e["name"]), e["type"], _flat(e["description"])])
            for e in graph["entities"]
        ]
        rows += [
            _SEP.join(
                [
                    "relation",
                    _flat(r["source"]),
                    _flat(r["target"]),
                    r["name"].replace("_", " "),
                    _flat(r["description"]),
                ]
            )
            for r in graph["relationships"]
        ]
        return "\n".join([*rows, _DONE])
    if "high_level_keywords" in users[-1] and (query := _LR_QUERY.search(users[-1])):
        question = query.group(1)
        names = [e["name"] for e in graph_for_text(question)["entities"]]
        names = [n for n in names if n not in _ASKING]
        themes = [w for w in re.findall(r"\b[a-z]{5,}\b", question)][:3]
        return json.dumps({"high_level_keywords": themes, "low_level_keywords": names})
    return None


class PeerHandler(llm_server._Handler):
    """The test server's handler with the peers' formats first."""

    def _chat(self, body: dict[str, Any], text: str, *, malformed: bool) -> None:
        content = None
        if FORMAT == "lightrag":
            content = lightrag_reply(body)
        elif FORMAT == "cognee":
            content = cognee_reply(body, text)
        if content is None:
            super()._chat(body, text, malformed=malformed)
            return
        message = {"role": "assistant", "content": content}
        self._json(
            200,
            {
                "id": "chatcmpl-peers",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "test"),
                "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            },
        )


def _schema(body: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """(name, JSON schema) of a structured call: response_format's, or the one cognee's
    JSON-object fallback writes into its system prompt."""
    spec = (body.get("response_format") or {}).get("json_schema") or {}
    if spec.get("schema"):
        return str(spec.get("name", "")), spec["schema"]
    for message in body.get("messages", []):
        content = str(message.get("content", ""))
        if message.get("role") == "system" and (found := _SCHEMA_IN_PROMPT.search(content)):
            schema = json.loads(found.group(1))
            return str(schema.get("title", "")), schema
    return None


def _resolve(spec: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in spec:
        return _resolve(defs[spec["$ref"].rsplit("/", 1)[-1]], defs)
    if alternatives := spec.get("anyOf"):
        spec = next((a for a in alternatives if a.get("type") != "null"), alternatives[0])
        return _resolve(spec, defs)
    return spec


def _fill(spec: dict[str, Any], defs: dict[str, Any], text: str) -> Any:
    """A value of the schema's type: strings are the passage's first sentence."""
    spec = _resolve(spec, defs)
    if spec.get("enum"):
        return spec["enum"][0]
    kind = spec.get("type")
    if kind == "object":
        props = spec.get("properties", {})
        return {name: _fill(sub, defs, text) for name, sub in props.items()}
    if kind == "array":
        return []
    return {"integer": 0, "number": 0.0, "boolean": False}.get(str(kind), text)


def cognee_reply(body: dict[str, Any], text: str) -> str | None:
    """A structured reply filled from the JSON schema sent: a graph (an object with `nodes`
    and `edges` whose items have `source_node_id`) from `graph_for_text`, anything else with
    the passage's first sentence in every string."""
    found = _schema(body)
    if found is None:
        return None
    _name, schema = found
    defs = schema.get("$defs", {})
    graph = graph_for_text(text)
    reply = _fill(schema, defs, graph["summary"] or text[:200])
    props = schema.get("properties", {})
    if {"nodes", "edges"} <= set(props) and isinstance(reply, dict):
        edge = _resolve(_resolve(props["edges"], defs).get("items", {}), defs)
        if "source_node_id" in edge.get("properties", {}):
            reply["nodes"] = [
                {
                    "id": e["name"],
                    "name": e["name"],
                    "type": e["type"],
                    "description": e["description"],
                    "label": e["name"],
                }
                for e in graph["entities"]
            ]
            reply["edges"] = [
                {
                    "source_node_id": r["source"],
                    "target_node_id": r["target"],
                    "relationship_name": r["name"],
                    "description": r["description"],
                }
                for r in graph["relationships"]
            ]
    return json.dumps(reply)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--embedding-dim", type=int, default=384)
    parser.add_argument("--format", choices=["cogmill", "lightrag", "cognee"], default="cogmill")
    args = parser.parse_args()
    global FORMAT
    FORMAT = args.format
    server = LLMTestServer(port=args.port, embedding_dim=args.embedding_dim)
    server._server.RequestHandlerClass = PeerHandler  # the test server, with the peers' formats
    print(f"listening {server.base_url} {os.getpid()}", flush=True)
    server.serve()


if __name__ == "__main__":
    main()
