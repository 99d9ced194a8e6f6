"""Session memory in the state store: notes, the questions asked and what answered them.

A session is a handful of keys under `session:{id}:` in the StateStore (SQLite embedded,
Redis distributed), each written with `session_ttl_seconds`; a tenant's sessions lie under
`tenants:session:{tenant}:{id}:` instead, so two tenants' `chat-1` share no key and neither
prefix is the start of the other:
- `note:{item}`   a remembered note (`remember --session`);
- `qa:{item}`     one search or recall: question, answer, search type, datasets;
- `trace:{item}`  what that answer was built from: the result texts with their sources and
                  the graph elements (edges, chunks) behind each result (`improve` reads it);
- `vec:{item}`    the cached embeddings of a note or qa/trace pair, so each is embedded once;
- `feedback:{item}` the feedback already applied to a qa (so repeating it is a no-op);
- `index:`        the set of the session's notes and qas (`note:{item}`, `qa:{item}`), which
                  expires with its last item: reads list a session from it, since a key scan
                  walks the whole store (Redis: 147 ms per recall beside 120,000 other keys).

One key per item (never one document per session that every search rewrites): concurrent
searches in one session cannot lose each other's writes, and nothing grows without bound in a
single value. Item ids are a nanosecond timestamp plus random bits, so keys sort by time, and
an index member whose item has expired is known by its id alone.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from core.errors import InvalidInput, NotFound
from core.migrations import once
from core.ports import Embedder, StateStore
from retrieval.models import SearchResponse, Source

SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")
ITEM_ID = re.compile(r"^[0-9]{20}[0-9a-f]{6}$")
PREFIX = "session:"
TENANT_PREFIX = "tenants:session:"
# A session's lane reads at most this many recent notes and questions (a session is small).
MAX_ITEMS = 200
# Results of one answer kept in its trace (the context an LLM saw is rarely longer).
MAX_TRACE_RESULTS = 20

ItemKind = Literal["note", "qa", "trace"]
# Set once a prefix's items from before the session index are in it (`_index_older_items`).
INDEXED = "sessions-indexed:"


class SessionError(InvalidInput):
    """A session request is invalid (a bad session or answer id, an empty note)."""

    code = "invalid_session_request"


class SessionNotFoundError(NotFound):
    """The session or the answer named does not exist (or has expired)."""

    code = "session_not_found"


class TraceElement(BaseModel):
    """A graph element one result was read from: an edge (source, name, target) or a chunk."""

    kind: Literal["edge", "chunk"]
    result: int = Field(description="Index of the result (0-based) this element produced")
    dataset: str = ""
    id: str = Field(default="", description="Chunk id (kind chunk)")
    source: str = ""
    name: str = ""
    target: str = ""


class TracedResult(BaseModel):
    text: str
    score: float
    sources: list[Source] = Field(default_factory=list)


class QARecord(BaseModel):
    """One answered question of a session (`qa` key) and its trace (`trace` key)."""

    id: str
    question: str
    answer: str | None = None
    search_type: str
    datasets: list[str] = Field(default_factory=list)
    created: float
    results: list[TracedResult] = Field(default_factory=list)
    elements: list[TraceElement] = Field(default_factory=list)


class Note(BaseModel):
    id: str
    text: str
    created: float


def check_session_id(session: str) -> str:
    """Return the id or raise SessionError saying what is allowed."""
    if not SESSION_ID.fullmatch(session):
        raise SessionError(
            f"invalid session id {session!r}: use 1-128 letters, digits, '_', '-' or '.', "
            "starting with a letter or digit (e.g. chat-42)"
        )
    return session


def session_prefix(tenant: str | None) -> str:
    """Where a tenant's sessions are kept (None: the local default tenant's)."""
    return PREFIX if tenant is None else f"{TENANT_PREFIX}{tenant}:"


def new_item_id() -> str:
    """A time-ordered item id: 20 digits of nanoseconds and 6 random hex digits."""
    return f"{time.time_ns():020d}{secrets.token_hex(3)}"


class SessionStore:
    """Reads and writes one tenant's sessions in a StateStore, every key with the session TTL.

    `tenant` None is the local default tenant (the embedded CLI, an API without keys)."""

    def __init__(
        self, state: StateStore | None, ttl_seconds: float, tenant: str | None = None
    ) -> None:
        if state is None:
            raise SessionError("session memory needs a state store; this context has none")
        if ttl_seconds <= 0:
            raise SessionError(f"session_ttl_seconds must be positive, got {ttl_seconds}")
        self.state, self.ttl = state, float(ttl_seconds)
        self.prefix = session_prefix(tenant)

    def _key(self, session: str, kind: str, item: str = "") -> str:
        return f"{self.prefix}{check_session_id(session)}:{kind}:{item}"

    def _put(self, key: str, record: dict[str, Any], ttl: float | None = None) -> None:
        self.state.put(key, json.dumps(record, ensure_ascii=False), ttl=ttl or self.ttl)

    def _index(self, session: str, kind: str, item: str) -> None:
        self.state.add_member(self._key(session, "index"), f"{kind}:{item}", ttl=self.ttl)

    def _load(self, key: str) -> dict[str, Any] | None:
        raw = self.state.get(key)
        return None if raw is None else json.loads(raw)

    # -- writes ------------------------------------------------------------------------------

    def add_note(self, session: str, text: str) -> Note:
        """Store a note in the session. SessionError on empty text."""
        if not text.strip():
            raise SessionError("the note is empty; pass the text to remember")
        note = Note(id=new_item_id(), text=text.strip(), created=time.time())
        self._put(self._key(session, "note", note.id), note.model_dump())
        self._index(session, "note", note.id)
        return note

    def record(
        self,
        session: str,
        response: SearchResponse,
        datasets: Sequence[str],
        elements: Sequence[TraceElement] = (),
    ) -> str:
        """Store a search's question, answer and trace in the session; returns the qa id."""
        qa_id = new_item_id()
        results = [
            TracedResult(text=r.text, score=r.score, sources=r.sources)
            for r in response.results[:MAX_TRACE_RESULTS]
        ]
        qa = {
            "id": qa_id,
            "question": response.query,
            "answer": response.answer,
            "search_type": str(response.search_type),
            "datasets": list(datasets),
            "created": time.time(),
        }
        trace = {
            "results": [r.model_dump() for r in results],
            "elements": [e.model_dump() for e in elements if e.result < len(results)],
        }
        # The trace first: a qa that is visible always has its trace.
        self._put(self._key(session, "trace", qa_id), trace)
        self._put(self._key(session, "qa", qa_id), qa)
        self._index(session, "qa", qa_id)
        return qa_id

    # -- reads -------------------------------------------------------------------------------

    def exists(self, session: str) -> bool:
        """Whether the session holds any live note or qa."""
        return bool(self._members(session))

    def _ids(self, session: str, kind: ItemKind) -> list[str]:
        start = f"{kind}:"
        ids = (m[len(start) :] for m in self._members(session) if m.startswith(start))
        return sorted(ids)[-MAX_ITEMS:]

    def _members(self, session: str) -> set[str]:
        """The session's live index members; those whose item has expired are dropped."""
        once(self.state, INDEXED + self.prefix, self._index_older_items)
        index = self._key(session, "index")
        members = self.state.add_members({index: []})[index]
        born_after = time.time_ns() - int(self.ttl * 1e9)
        expired = {m for m in members if int(m.partition(":")[2][:20] or 0) <= born_after}
        for member in expired:
            self.state.remove_member(index, member)
        return members - expired

    def _index_older_items(self) -> None:
        """Index the notes and qas written before sessions had an index (a key scan of this
        prefix, run once)."""
        for key in self.state.keys(self.prefix):
            session, kind, item = (key[len(self.prefix) :].split(":", 2) + ["", ""])[:3]
            if kind in ("note", "qa") and ITEM_ID.fullmatch(item) and SESSION_ID.fullmatch(session):
                self._index(session, kind, item)

    def notes(self, session: str) -> list[Note]:
        keys = [self._key(session, "note", i) for i in self._ids(session, "note")]
        return [Note.model_validate_json(raw) for raw in self.state.get_many(keys) if raw]

    def qa(self, session: str, qa_id: str) -> QARecord | None:
        """One qa with its trace, or None when missing or expired."""
        if not ITEM_ID.fullmatch(qa_id):
            raise SessionError(
                f"invalid answer id {qa_id!r}: use a qa_id returned by search or recall "
                "with this session"
            )
        found = self._records(session, [qa_id])
        return found[0] if found else None

    def qas(self, session: str) -> list[QARecord]:
        """The session's recent qa records (with traces), oldest first."""
        return self._records(session, self._ids(session, "qa"))

    def _records(self, session: str, ids: list[str]) -> list[QARecord]:
        """The qas of `ids` that are stored, each with its trace, read at once."""
        keys = [self._key(session, kind, i) for i in ids for kind in ("qa", "trace")]
        raws = self.state.get_many(keys)
        return [
            QARecord.model_validate({**json.loads(qa), **json.loads(trace or "{}")})
            for qa, trace in zip(raws[::2], raws[1::2], strict=True)
            if qa is not None
        ]

    def datasets(self, session: str) -> list[str]:
        """The datasets the session's questions searched, most recent first."""
        seen: dict[str, None] = {}
        for record in reversed(self.qas(session)):
            seen.update(dict.fromkeys(record.datasets))
        return list(seen)

    # -- embeddings cache --------------------------------------------------------------------

    def vectors(
        self, session: str, item: str, created: float, texts: list[str], embedder: Embedder
    ) -> list[list[float]]:
        """Embeddings of an item's texts, computed once and cached beside it (same expiry)."""
        key = self._key(session, "vec", item)
        cached = self._load(key)
        if cached and cached.get("model") == embedder.model_name and cached.get("n") == len(texts):
            return cached["vectors"]
        vectors = [[round(float(x), 6) for x in v] for v in embedder.embed(texts)]
        remaining = created + self.ttl - time.time()
        if remaining > 0:
            record = {"model": embedder.model_name, "n": len(texts), "vectors": vectors}
            self._put(key, record, ttl=remaining)
        return vectors

    # -- feedback bookkeeping ----------------------------------------------------------------

    def feedback_given(self, session: str, qa_id: str) -> dict[str, float]:
        """Feedback already applied to a qa, per result index (as a string)."""
        return self._load(self._key(session, "feedback", qa_id)) or {}

    def set_feedback(self, session: str, qa_id: str, given: dict[str, float]) -> None:
        self._put(self._key(session, "feedback", qa_id), given)

    # -- forgetting --------------------------------------------------------------------------

    def forget(self, session: str) -> int:
        """Delete every key of a session; returns how many items' keys there were."""
        return self._delete(self.state.keys(f"{self.prefix}{check_session_id(session)}:"))

    def sessions(self) -> list[str]:
        """Ids of the tenant's live sessions."""
        keys = self.state.keys(self.prefix)
        return sorted({key[len(self.prefix) :].split(":", 1)[0] for key in keys})

    def forget_all(self) -> int:
        """Delete every session of the tenant; returns how many items' keys there were."""
        return self._delete(self.state.keys(self.prefix))

    def _delete(self, keys: list[str]) -> int:
        for key in keys:
            self.state.delete(key)
        return sum(1 for key in keys if not key.endswith(":index:"))


def trace_elements(retriever: object, response: SearchResponse) -> list[TraceElement]:
    """What each result was read from: the retriever's own trace (graph edges) if it keeps one,
    plus the chunks named by every result's sources."""
    elements: list[TraceElement] = []
    for index, raw in getattr(retriever, "trace", None) or []:
        elements.append(TraceElement(kind="edge", result=index, **raw))
    for index, result in enumerate(response.results[:MAX_TRACE_RESULTS]):
        for source in result.sources:
            if source.chunk_id:
                elements.append(TraceElement(kind="chunk", result=index, id=source.chunk_id))
    return elements
