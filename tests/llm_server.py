"""An OpenAI-compatible stand-in for a paid LLM API: deterministic answers, injected faults.

`POST /v1/chat/completions` answers a KnowledgeGraph-shaped JSON computed from the first user
message (capitalised word runs are entities, "A <few lowercase words> B" are relationships,
the first sentence is the summary). `POST /v1/embeddings` returns hashed bag-of-words unit
vectors. `GET /stats` counts requests and faults, and the most requests it ever held at
once (`peak_in_flight`, which proves a client's concurrency without timing it); `POST /control`
changes the faults.

Faults are drawn from a RNG seeded by (seed, path, subject, n-th request for that subject), so
a run injects the same faults whatever order concurrent requests arrive in.

    python -m tests.llm_server --port 8089 --latency-ms 1000
"""

from __future__ import annotations

import argparse
import base64
import functools
import hashlib
import json
import random
import re
import sys
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, fields
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

from core.embeddings.tokenizer import count_tokens
from tests.llm_answers import retrieval_reply
from tests.llm_facts import facts_reply
from tests.llm_multistep import multistep_reply
from tests.llm_server_batches import BatchBook

FAULTS = ("429", "500", "timeout", "malformed")
# The `fault_every` schedule's order: a malformed reply first, since it needs a chat request
# (one owed by an embeddings request waits for the next chat request, and a short job may
# send none after its last turns).
SCHEDULE = ("malformed", "429", "500", "timeout")
_NAME = re.compile(r"[A-Z][A-Za-z0-9]+(?: [A-Z][A-Za-z0-9]+)*")
_VERB = re.compile(r"^ ((?:[a-z]+ ){1,3})$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"\w+")
_LEADING = {"The", "A", "An", "In", "On", "At", "It", "He", "She", "They", "This", "That"}
_ORG_SUFFIX = {"Inc", "Corp", "Labs", "Ltd", "University", "Company", "Institute"}


@dataclass
class Faults:
    """What the server injects; rates are per request, drawn in the order of FAULTS."""

    rate_429: float = 0.0
    rate_500: float = 0.0
    rate_timeout: float = 0.0
    rate_malformed: float = 0.0  # chat only: the reply's JSON is cut in half
    latency_ms: float = 0.0
    embedding_latency_ms: float | None = None  # None: the same as latency_ms
    retry_after: float = 1.0  # seconds, sent in Retry-After with every 429
    hang_seconds: float = 5.0  # a "timeout" sleeps this long, longer than the client waits
    fail_first: int = 0  # the first N requests per subject fail with `fail_kind`
    fail_kind: str = "500"
    # The first N requests on each path fail with `fail_kind`, whatever they ask: an endpoint
    # that is down for a while.
    outage_requests: int = 0
    reject_json_schema: bool = False  # answer 400 to response_format json_schema
    embedding_dim: int = 64
    floats_only: bool = False  # embeddings as float lists even when base64 is asked
    seed: int = 0
    # Every n-th request (counted over all paths) fails, the kinds of SCHEDULE in turn: exactly
    # 1/n of the requests, every kind, whatever texts arrive (a "malformed" turn that falls on
    # an embeddings request answers 500 there and goes to the next chat request).
    fault_every: int = 0
    # How replies count tokens in `usage`: "chars" (~4 characters a token, of the messages),
    # "wordpiece" (the local tokenizer over the messages and the JSON schema sent, as a real
    # endpoint counts the schema too) or "omit" (no `usage`; the client must count).
    usage: str = "chars"
    cached_tokens: int = 0  # reported as cached in each chat reply (at most its prompt)


def graph_for_text(text: str) -> dict[str, Any]:
    """The deterministic KnowledgeGraph JSON the server answers for a text."""
    sentences = [s for s in _SENTENCE_END.split(text.strip()) if s]
    entities: dict[str, dict[str, str]] = {}
    relationships: list[dict[str, str]] = []
    for sentence in sentences:
        mentions = list(_mentions(sentence))
        for name, _start, _end in mentions:
            about = f"Mentioned: {sentence[:80]}"
            entities.setdefault(name, {"name": name, "type": _type(name), "description": about})
        for (left, _, end), (right, start, _) in zip(mentions, mentions[1:], strict=False):
            if match := _VERB.match(sentence[end:start]):
                name = "_".join(match.group(1).split())
                fact = {"source": left, "target": right, "name": name, "description": sentence}
                relationships.append(fact)
    summary = sentences[0] if sentences else ""
    return {"entities": list(entities.values()), "relationships": relationships, "summary": summary}


_DATED = re.compile(
    r"(?:(?:January|February|March|April|May|June|July|August|September|October|November"
    r"|December) )?\b(?:1\d{3}|20\d{2})s?\b"
)


def events_for_text(text: str) -> dict[str, Any]:
    """The EventList JSON the server answers: a sentence with a year is an event at it."""
    events = []
    for sentence in (s for s in _SENTENCE_END.split(text.strip()) if s):
        if found := _DATED.search(sentence):
            names = [name for name, _start, _end in _mentions(sentence)]
            events.append({"description": sentence, "time": found.group(), "entities": names})
    return {"events": events}


def custom_graph_for_text(text: str, schema: dict[str, Any]) -> dict[str, Any]:
    """A custom graph model's JSON: `graph_for_text` entities whose type is one of the schema's
    classes (the rest dropped), every declared field filled from the entity's name."""
    defs = schema.get("$defs", {})
    classes = {
        sub["properties"]["type"]["const"]: sub["properties"]
        for sub in defs.values()
        if "const" in sub.get("properties", {}).get("type", {})
    }
    names = (defs.get("Relationship", {}).get("properties", {}).get("name", {})).get("enum")
    graph = graph_for_text(text)
    entities = []
    for entity in graph["entities"]:
        if entity["type"] in classes:
            fields = classes[entity["type"]].items()
            entity.update(
                {
                    f: _field_value(spec, f, entity["name"])
                    for f, spec in fields
                    if f not in ("name", "type", "description")
                }
            )
            entities.append(entity)
    kept = {e["name"] for e in entities}
    relationships = [
        r
        for r in graph["relationships"]
        if {r["source"], r["target"]} <= kept and (names is None or r["name"] in names)
    ]
    return {"entities": entities, "relationships": relationships, "summary": graph["summary"]}


def _field_value(spec: dict[str, Any], field: str, name: str) -> Any:
    """A deterministic value of a field's type (the first non-null alternative)."""
    spec = next((o for o in spec.get("anyOf", []) if o.get("type") != "null"), spec)
    if spec.get("enum"):
        return spec["enum"][0]
    kind = spec.get("type")
    if kind == "array":
        return [f"{field} of {name}"]
    values = {"integer": len(name), "number": len(name) / 2, "boolean": True}
    return values.get(kind, f"{field} of {name}")


def _mentions(sentence: str) -> list[tuple[str, int, int]]:
    """Capitalised word runs (without a leading "The", "In", ...) with their spans."""
    found = []
    for match in _NAME.finditer(sentence):
        words, start = match.group().split(" "), match.start()
        while words and words[0] in _LEADING:
            start += len(words.pop(0)) + 1
        if words:
            found.append((" ".join(words), start, match.end()))
    return found


def _type(name: str) -> str:
    last = name.split(" ")[-1]
    if last in _ORG_SUFFIX:
        return "Organization"
    return "Person" if name.count(" ") == 1 else "Thing"


def embeddings_for_texts(texts: list[str], dim: int) -> np.ndarray:
    """Unit vectors from hashed words, a row per text: texts sharing words point the same way."""
    rows, where, signs = [], [], []
    for row, text in enumerate(texts):
        for token in _WORD.findall(text.lower()):
            for slot, sign in _slots(token, dim):
                rows.append(row)
                where.append(slot)
                signs.append(sign)
    vectors = np.zeros((len(texts), dim))
    np.add.at(vectors, (rows, where), signs)
    norms = np.linalg.norm(vectors, axis=1)
    empty = norms == 0
    vectors[empty, 0] = norms[empty] = 1.0
    return vectors / norms[:, None]


@functools.lru_cache(maxsize=1 << 16)
def _slots(token: str, dim: int) -> tuple[tuple[int, float], ...]:
    """A word's two (slot, sign) pairs (two soften collisions in small dims)."""
    digest = hashlib.sha256(token.encode()).digest()
    slot = [int.from_bytes(digest[4 * k : 4 * k + 4], "big") % dim for k in range(2)]
    return tuple((slot[k], 1.0 if digest[16 + k] & 1 else -1.0) for k in range(2))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # many concurrent clients connect at once

    def __init__(self, address: tuple[str, int], faults: Faults) -> None:
        super().__init__(address, _Handler)
        self.faults = faults
        self.lock = threading.Lock()
        self.closing = threading.Event()
        self.requests: Counter[str] = Counter()
        self.injected: Counter[str] = Counter()
        self.seen: Counter[tuple[str, str]] = Counter()
        self.per_path: Counter[str] = Counter()
        self.turns = 0  # requests drawn so far, for `fault_every`
        self.owed_malformed = 0  # malformed turns that fell on embeddings requests
        self.in_flight = 0
        self.peak_in_flight = 0
        # Tokens answered per path, as `usage` said (or would have said, with usage "omit").
        self.tokens: dict[str, Counter[str]] = {}
        self.batches = BatchBook(_user_text)  # the Files + Batches routes

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet about a client that hung up (it gave up on a hanging request); loud otherwise."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)

    def draw_fault(self, path: str, subject: str) -> str | None:
        """The fault for this request, if any (reproducible per subject and repetition)."""
        with self.lock:
            n = self.seen[(path, subject)]
            self.seen[(path, subject)] += 1
            on_path = self.per_path[path]
            self.per_path[path] += 1
            faults = self.faults
        down = n < faults.fail_first or on_path < faults.outage_requests
        kind = faults.fail_kind if down else None
        if kind is None and faults.fault_every:
            kind = self._turn(path, faults.fault_every)
        elif kind is None:
            roll = random.Random(f"{faults.seed}:{path}:{subject}:{n}").random()
            for name in FAULTS:
                roll -= getattr(faults, f"rate_{name}")
                if roll < 0:
                    kind = name
                    break
        if kind == "malformed" and not path.endswith("/chat/completions"):
            kind = None
        if kind:
            with self.lock:
                self.injected[kind] += 1
        return kind

    def _turn(self, path: str, every: int) -> str | None:
        """The fault of this request in the `fault_every` schedule, if it is its turn."""
        chat = path.endswith("/chat/completions")
        with self.lock:
            self.turns += 1
            if self.turns % every:
                if chat and self.owed_malformed:
                    self.owed_malformed -= 1
                    return "malformed"
                return None
            kind = SCHEDULE[(self.turns // every - 1) % len(SCHEDULE)]
            if kind == "malformed" and not chat:
                self.owed_malformed += 1
                return "500"
            return kind

    def count(self, path: str) -> None:
        """Count one request on `path`."""
        with self.lock:
            self.requests[path] += 1

    def tally(self, path: str, usage: dict[str, Any]) -> None:
        """Count one answered call's usage on `path`."""
        with self.lock:
            counter = self.tokens.setdefault(path, Counter())
            counter["calls"] += 1
            for name in ("prompt_tokens", "completion_tokens"):
                counter[name] += usage[name]
            counter["cached_tokens"] += (usage.get("prompt_tokens_details") or {}).get(
                "cached_tokens", 0
            )

    def enter(self) -> None:
        """A model call starts: count it in flight."""
        with self.lock:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    def leave(self) -> None:
        with self.lock:
            self.in_flight -= 1

    def stats(self) -> dict[str, Any]:
        """Requests per path, faults injected per kind, the current settings."""
        with self.lock:
            faults, config = dict(self.injected), asdict(self.faults)
            return {
                "requests": dict(self.requests),
                "faults": faults,
                "peak_in_flight": self.peak_in_flight,
                "usage": {path: dict(counter) for path, counter in self.tokens.items()},
                "config": config,
            }

    def configure(self, changes: dict[str, Any]) -> None:
        """Change some fault settings; TypeError on an unknown name."""
        with self.lock:
            self.faults = Faults(**{**asdict(self.faults), **changes})


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like a real API
    server: _Server
    timeout = 30  # drop idle keep-alive connections
    # Headers and body go out as two writes; with Nagle the body waits for a delayed ACK.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests and benchmarks print what matters."""

    def do_GET(self) -> None:
        if self.server.batches.route(self, "GET"):
            return
        if self.path == "/stats":
            self._json(200, self.server.stats())
        else:
            self._error(404, f"no route GET {self.path}")

    def do_POST(self) -> None:
        if self.server.batches.route(self, "POST"):
            return
        body = self._body()
        if self.path == "/control":
            self._control(body)
            return
        self.server.count(self.path)
        if self.path in ("/v1/chat/completions", "/v1/embeddings"):
            self.server.enter()
            try:
                self._model_call(body)
            finally:
                self.server.leave()
        else:
            self._error(404, f"no route POST {self.path}")

    def _control(self, body: dict[str, Any]) -> None:
        reset = body.pop("reset", False)
        try:
            self.server.configure(body)
        except TypeError as err:
            self._error(400, f"bad fault settings: {err}")
            return
        if reset:
            with self.server.lock:
                for counter in (self.server.requests, self.server.injected, self.server.seen):
                    counter.clear()
                self.server.tokens.clear()
                self.server.peak_in_flight = self.server.in_flight
        self._json(200, self.server.stats())

    def _model_call(self, body: dict[str, Any]) -> None:
        faults = self.server.faults
        chat = self.path.endswith("/chat/completions")
        subject = _user_text(body) if chat else json.dumps(body.get("input"))
        latency = faults.latency_ms
        if not chat and faults.embedding_latency_ms is not None:
            latency = faults.embedding_latency_ms
        time.sleep(latency / 1000)
        kind = self.server.draw_fault(self.path, subject)
        if kind == "429":
            self._error(
                429, "rate limit reached", headers={"Retry-After": f"{faults.retry_after:g}"}
            )
        elif kind == "500":
            self._error(500, "the server had an error while processing your request")
        elif kind == "timeout":
            self.server.closing.wait(faults.hang_seconds)
            self._error(504, "gateway timeout")
        elif chat:
            self._chat(body, subject, malformed=kind == "malformed")
        else:
            self._embeddings(body)

    def _chat(self, body: dict[str, Any], text: str, *, malformed: bool) -> None:
        fmt = (body.get("response_format") or {}).get("type")
        if fmt == "json_schema" and self.server.faults.reject_json_schema:
            self._error(400, "response_format json_schema is not supported by this server")
            return
        graph = graph_for_text(text)
        content = json.dumps(graph) if fmt in ("json_schema", "json_object") else graph["summary"]
        if (answer := retrieval_reply(body, text)) is not None:  # retrieval schemas, by name
            content = json.dumps(answer)
        if (step := multistep_reply(body, text)) is not None:  # multi-step search schemas
            content = json.dumps(step)
        if (verdicts := facts_reply(body, text)) is not None:  # the fact judge's schema
            content = json.dumps(verdicts)
        spec = (body.get("response_format") or {}).get("json_schema") or {}
        if spec.get("name") == "EventList":  # the temporal pipeline's schema
            content = json.dumps(events_for_text(text))
        if (spec.get("schema") or {}).get("x-cogmill") == "custom-graph":  # core/models/custom.py
            content = json.dumps(custom_graph_for_text(text, spec["schema"]))
        if malformed:
            content = content[: len(content) // 2]
        usage, finish = self._chat_usage(body, content), "stop"
        cap = body.get("max_tokens")
        if isinstance(cap, int) and usage["completion_tokens"] > cap:
            # As an endpoint does: the reply stops at max_tokens (and is then no valid JSON).
            content = content[: len(content) * cap // usage["completion_tokens"]]
            total = usage["prompt_tokens"] + cap
            usage = {**usage, "completion_tokens": cap, "total_tokens": total}
            finish = "length"
        message = {"role": "assistant", "content": content}
        reply = {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "test"),
            "choices": [{"index": 0, "finish_reason": finish, "message": message}],
            "usage": usage,
        }
        self._answer(reply)

    def _chat_usage(self, body: dict[str, Any], content: str) -> dict[str, Any]:
        """The reply's `usage`, counted the way the `usage` setting says."""
        texts = [str(m.get("content", "")) for m in body["messages"]]
        if self.server.faults.usage == "chars":
            usage = _usage(sum(len(t) for t in texts) // 4, len(content) // 4)
        else:
            schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema")
            sent = "\n".join(texts + ([json.dumps(schema)] if schema else []))
            prompt, completion = count_tokens([sent, content])
            usage = _usage(prompt, completion)
        cached = min(self.server.faults.cached_tokens, usage["prompt_tokens"])
        return {**usage, "prompt_tokens_details": {"cached_tokens": cached}}

    def _answer(self, reply: dict[str, Any]) -> None:
        """Send a model reply; its usage is tallied, and left out in usage mode "omit"."""
        self.server.tally(self.path, reply["usage"])
        if self.server.faults.usage == "omit":
            reply = {k: v for k, v in reply.items() if k != "usage"}
        self._json(200, reply)

    def _embeddings(self, body: dict[str, Any]) -> None:
        inputs = body.get("input", [])
        texts = [inputs] if isinstance(inputs, str) else list(inputs)
        dim = self.server.faults.embedding_dim
        # As the OpenAI API does: base64 of little-endian float32 when asked (the SDK's default).
        encode = (
            (lambda v: base64.b64encode(v.astype("<f4").tobytes()).decode())
            if body.get("encoding_format") == "base64" and not self.server.faults.floats_only
            else (lambda v: v.tolist())
        )
        data = [
            {"object": "embedding", "index": i, "embedding": encode(vector)}
            for i, vector in enumerate(embeddings_for_texts(texts, dim))
        ]
        if self.server.faults.usage == "chars":
            usage = _usage(sum(len(t) for t in texts) // 4, 0)
        else:
            usage = _usage(count_tokens(["\n".join(texts), ""])[0], 0)
        self._answer({"object": "list", "data": data, "model": "test", "usage": usage})

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            return {}
        return body if isinstance(body, dict) else {}

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        error = {"message": message, "type": "test_server_error", "code": str(status)}
        self._json(status, {"error": error}, headers)

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout fault): nothing left to answer


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _user_text(body: dict[str, Any]) -> str:
    """The first user message: the text to extract from (repair turns come later)."""
    for message in body.get("messages", []):
        if message.get("role") == "user":
            content = message.get("content", "")
            if isinstance(content, list):
                return " ".join(part.get("text", "") for part in content)
            return str(content)
    return ""


class LLMTestServer:
    """The test server in a background thread; a context manager."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1", **faults: Any) -> None:
        self._server = _Server((host, port), Faults(**faults))
        self.port = self._server.server_address[1]
        self.base_url = f"http://{host}:{self.port}/v1"
        self.batches = self._server.batches  # tests/llm_server_batches.py
        # A short poll interval: shutdown() waits up to one interval.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def __enter__(self) -> LLMTestServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def configure(self, **faults: Any) -> None:
        """Change fault settings (same names as the constructor's)."""
        self._server.configure(faults)

    def stats(self) -> dict[str, Any]:
        """Requests per path, faults injected per kind, the current settings."""
        return self._server.stats()

    def calls(self, path: str = "/v1/chat/completions") -> int:
        """Requests received on one path."""
        return self._server.stats()["requests"].get(path, 0)

    def serve(self) -> None:
        """Serve in the calling thread until interrupted (the command line)."""
        try:
            self._server.serve_forever(poll_interval=0.05)
        except KeyboardInterrupt:
            pass
        finally:
            self._server.server_close()

    def close(self) -> None:
        """Stop serving and close the socket."""
        self._server.closing.set()  # wakes requests hanging in a timeout fault
        if self._thread.is_alive():  # shutdown() waits forever on a server never started
            self._server.shutdown()
        self._server.server_close()


def main() -> None:
    parser = argparse.ArgumentParser(description="OpenAI-compatible test LLM server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8089)
    for f in fields(Faults):
        flag = "--" + f.name.replace("_", "-")
        kind = {"int": int, "float": float, "str": str}.get(str(f.type))
        if kind is not None:
            parser.add_argument(flag, type=kind, default=f.default)
    parser.add_argument("--reject-json-schema", action="store_true")
    args = vars(parser.parse_args())
    host, port = args.pop("host"), args.pop("port")
    server = LLMTestServer(port, host, **args)
    print(f"test LLM server at {server.base_url} faults={server.stats()['config']}", flush=True)
    server.serve()


if __name__ == "__main__":
    main()
