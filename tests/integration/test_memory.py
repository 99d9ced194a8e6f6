"""Session memory over a real embedded runtime (SQLite graph and state, Qdrant Edge, Celery
worker threads): remember, recall (session and graph lanes), improve, forget, session TTLs.
The LLM and embeddings are the local test server."""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import redis

from api.services.memory import forget, remember_in_dataset, remember_note, sessions
from core.settings import Settings
from core.stores.redis.state import RedisStateStore
from retrieval.base import RetrievalContext
from retrieval.memory import improve, recall
from retrieval.models import SearchType
from retrieval.search import QA_ID_KEY, search
from retrieval.sessions import SessionError, SessionNotFoundError, SessionStore
from runtime import Runtime
from tests.backends import finished, ingest, llm_settings, threaded_runtime, write_files
from tests.llm_server import LLMTestServer
from tests.services import redis_url

CORPUS = {
    "curie.txt": "Marie Curie was born in Warsaw. Marie Curie discovered Polonium with Pierre "
    "Curie. Marie Curie won two Nobel prizes.",
    "turing.txt": "Alan Turing was born in London. Alan Turing designed the Bombe at Bletchley "
    "Park. Alan Turing proposed the imitation game.",
    "danube.txt": "The Danube flows through Vienna. The Danube ends in the Black Sea. Vienna "
    "hosts the Danube Island festival.",
}
CURIE = "Where was Marie Curie born?"


class Counting:
    """The real store behind a call counter: proves which lanes read the graph or vectors."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.calls = inner, 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return attr(*args, **kwargs)

        return counted


class CountingEmbedder:
    def __init__(self, inner: Any) -> None:
        self.inner, self.texts = inner, 0
        self.dim, self.model_name = inner.dim, inner.model_name

    def embed(self, texts: list[str]) -> np.ndarray:
        self.texts += len(texts)
        return self.inner.embed(texts)


@pytest.fixture(scope="module")
def llm() -> Iterator[LLMTestServer]:
    with LLMTestServer() as server:
        yield server


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory, llm: LLMTestServer) -> Iterator[Runtime]:
    home = tmp_path_factory.mktemp("memory")
    settings = Settings(home=home / "home", session_ttl_seconds=3600, **llm_settings(llm))
    with threaded_runtime(settings) as rt:
        ingest(rt, "corpus", write_files(home / "files", CORPUS))
        yield rt


def asked(rt: Runtime, session: str, query: str = CURIE, top_k: int = 3) -> str:
    """A GRAPH_COMPLETION search recorded in the session; its qa id."""
    ctx = rt.retrieval()
    search(ctx, query, ["corpus"], SearchType.GRAPH_COMPLETION, top_k, session=session)
    return ctx.extras[QA_ID_KEY]


def counted_context(rt: Runtime) -> tuple[RetrievalContext, Counting, Counting, CountingEmbedder]:
    graph, vectors = Counting(rt.graph), Counting(rt.vectors)
    embedder = CountingEmbedder(rt.embedder)
    ctx = replace(rt.retrieval(), graph=graph, vectors=vectors, embedder=embedder)
    return ctx, graph, vectors, embedder


def test_search_with_a_session_records_question_answer_and_trace(runtime: Runtime) -> None:
    qa_id = asked(runtime, "rec")
    record = sessions(runtime).qa("rec", qa_id)
    assert record is not None and record.question == CURIE and record.answer
    assert record.search_type == "GRAPH_COMPLETION" and record.datasets == ["corpus"]
    assert "Warsaw" in record.results[0].text
    edges = [e for e in record.elements if e.kind == "edge"]
    chunks = [e for e in record.elements if e.kind == "chunk"]
    assert edges and chunks and {e.result for e in edges} <= {0, 1, 2}
    assert all(e.dataset == "corpus" for e in edges)


def test_a_session_hit_answers_without_reading_the_graph(runtime: Runtime) -> None:
    asked(runtime, "hit")
    ctx, graph, vectors, _ = counted_context(runtime)
    response = recall(ctx, CURIE, session="hit")
    assert response.lanes == ["session"]
    assert graph.calls == 0 and vectors.calls == 0
    top = response.results[0]
    assert top.source == "session_qa" and top.score > 0.99 and top.qa_id
    assert response.answer_source == "session_qa" and response.answer
    assert {r.source for r in response.results} >= {"session_qa", "session_trace"}
    assert any("Warsaw" in r.text for r in response.results if r.source == "session_trace")


def test_session_items_are_embedded_once(runtime: Runtime) -> None:
    asked(runtime, "once")
    ctx, _, _, embedder = counted_context(runtime)
    first = recall(ctx, "Polonium discovery", session="once", scope="session")
    before = embedder.texts
    recall(ctx, "Polonium discovery", session="once", scope="session")
    # Only the query and the items the first recall added (its qa and results) are new.
    assert embedder.texts - before == 1 + 1 + len(first.results)


def test_a_weak_session_hit_falls_back_to_the_sessions_datasets(runtime: Runtime) -> None:
    asked(runtime, "weak")
    ctx, graph, _, _ = counted_context(runtime)
    response = recall(ctx, "Who designed the Bombe at Bletchley Park?", session="weak")
    assert response.lanes == ["session", "graph"] and graph.calls > 0
    assert "corpus" in (response.note or "")
    graph_hits = [r for r in response.results if r.source == "graph"]
    assert graph_hits and graph_hits[0].sources[0].document_name == "turing.txt"
    assert response.answer_source == "llm"


def test_with_datasets_both_lanes_contribute(runtime: Runtime) -> None:
    asked(runtime, "both")
    response = recall(
        runtime.retrieval(),
        "Where was Marie Curie born, in Warsaw?",
        session="both",
        datasets=["corpus"],
        top_k=20,
    )
    assert response.lanes == ["session", "graph"]
    sources = {r.source for r in response.results}
    assert "graph" in sources and sources & {"session_qa", "session_trace"}
    scores = [r.score for r in response.results]
    assert scores == sorted(scores, reverse=True)
    # The recall itself is recorded in the session, so it can be improved.
    assert response.qa_id and sessions(runtime).qa("both", response.qa_id) is not None


def test_remember_a_note_in_a_session_and_recall_it(runtime: Runtime) -> None:
    note = remember_note(runtime, "notes", "My favourite river is the Danube")
    ctx, graph, _, _ = counted_context(runtime)
    response = recall(ctx, "What is my favourite river?", session="notes", scope="session")
    assert response.results[0].source == "session_note"
    assert response.results[0].text == "My favourite river is the Danube" and note.id
    assert graph.calls == 0
    with pytest.raises(SessionError, match="invalid session id"):
        remember_note(runtime, "no spaces allowed", "x")
    with pytest.raises(SessionError, match="empty"):
        remember_note(runtime, "notes", "   ")


def test_remember_in_a_dataset_then_search_finds_it(runtime: Runtime) -> None:
    text = "Ada Lovelace wrote the first program for the Analytical Engine."
    done = remember_in_dataset(runtime, "corpus", text)
    name = done.document
    assert finished(runtime, done.job).status.value == "succeeded" and done.dataset == "corpus"
    assert name.startswith("memory-") and name.endswith(".txt")
    found = search(runtime.retrieval(), "Analytical Engine program", ["corpus"], SearchType.CHUNKS)
    assert found.results[0].sources[0].document_name == name
    again = remember_in_dataset(runtime, "corpus", text)  # same text: same document
    assert again.document == name and "nothing to do" in finished(runtime, again.job).message
    forget(runtime, dataset="corpus", document=name)
    after = search(runtime.retrieval(), "Analytical Engine program", ["corpus"], SearchType.CHUNKS)
    assert all(s.document_name != name for r in after.results for s in r.sources)


def ranked_lines(rt: Runtime, query: str) -> list[str]:
    response = search(rt.retrieval(), query, ["corpus"], SearchType.GRAPH_COMPLETION, 8)
    return [r.text.split("\n")[0] for r in response.results]


def test_feedback_reranks_the_elements_an_answer_used(runtime: Runtime) -> None:
    query = "Which places are linked to Alan Turing and the Danube?"
    before = ranked_lines(runtime, query)
    assert len(before) >= 3, before  # one line per passage: its best triplet
    qa_id = asked(runtime, "fb", query, top_k=8)
    store = sessions(runtime)
    assert [r.text.split("\n")[0] for r in store.qa("fb", qa_id).results] == before
    down = improve(runtime.graph, store, "fb", qa_id, -1.0, results=[0])
    assert down.edges >= 1 and down.results == [0]
    after_down = ranked_lines(runtime, query)
    assert after_down.index(before[0]) > 0, after_down  # the disliked triplet ranks lower
    # Liking the disliked result (one passage with all its triplets) lifts it two steps (x2.25),
    # back above the passages that passed it.
    liked = 0
    improve(runtime.graph, store, "fb", qa_id, 1.0, results=[liked])
    after_up = ranked_lines(runtime, query)
    assert after_up.index(before[liked]) < after_down.index(before[liked]), after_up
    # Repeating the same feedback changes nothing; the weights stay within bounds.
    assert improve(runtime.graph, store, "fb", qa_id, 1.0, results=[liked]).edges == 0
    assert ranked_lines(runtime, query) == after_up
    # Undo: the original order comes back.
    improve(runtime.graph, store, "fb", qa_id, 0.0, results=[liked])
    assert ranked_lines(runtime, query) == before


def test_improve_rejects_unknown_answers_and_bad_feedback(runtime: Runtime) -> None:
    store = sessions(runtime)
    qa_id = asked(runtime, "bad")
    with pytest.raises(SessionNotFoundError, match="no answer"):
        improve(runtime.graph, store, "bad", "0" * 20 + "abcdef", 1.0)
    with pytest.raises(SessionError, match="invalid answer id"):
        improve(runtime.graph, store, "bad", "nope", 1.0)
    with pytest.raises(ValueError, match="between -1"):
        improve(runtime.graph, store, "bad", qa_id, 3.0)
    with pytest.raises(ValueError, match="results 0-2"):
        improve(runtime.graph, store, "bad", qa_id, 1.0, results=[7])


def test_recall_rejects_bad_requests(runtime: Runtime) -> None:
    ctx = runtime.retrieval()
    with pytest.raises(ValueError, match="session id, datasets"):
        recall(ctx, "x")
    with pytest.raises(ValueError, match="unknown scope"):
        recall(ctx, "x", session="s", scope="everywhere")
    with pytest.raises(ValueError, match="needs datasets"):
        recall(ctx, "x", session="never-searched", scope="graph")


def test_forget_a_session(runtime: Runtime) -> None:
    asked(runtime, "gone")
    remember_note(runtime, "gone", "a note")
    done = forget(runtime, session="gone")
    assert done.sessions == ["gone"] and done.session_keys == 3  # note, qa, trace
    assert runtime.state.keys("session:gone:") == []
    assert recall(runtime.retrieval(), CURIE, session="gone", scope="session").results == []
    with pytest.raises(LookupError, match="no session"):
        forget(runtime, session="gone")
    with pytest.raises(ValueError, match="exactly one target"):
        forget(runtime, session="a", dataset="corpus")


def test_session_keys_carry_the_ttl_in_sqlite(runtime: Runtime) -> None:
    asked(runtime, "ttl")
    recall(runtime.retrieval(), CURIE, session="ttl", scope="session")  # writes vec: keys
    conn = sqlite3.connect(runtime.settings.home / "state.sqlite")
    try:
        rows = conn.execute(
            "SELECT key, expires_at FROM kv WHERE key LIKE 'session:ttl:%'"
        ).fetchall()
    finally:
        conn.close()
    kinds = {key.split(":")[2] for key, _ in rows}
    assert kinds == {"qa", "trace", "vec"}, rows
    ttl = runtime.settings.session_ttl_seconds
    assert all(exp is not None and 0 < exp - time.time() <= ttl for _, exp in rows), rows


@pytest.mark.services
def test_session_keys_carry_the_ttl_in_redis(runtime: Runtime) -> None:
    url = redis_url()
    prefix = f"cogmill-test:{uuid.uuid4().hex}:"
    state = RedisStateStore(url, prefix=prefix)
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        ctx = replace(runtime.retrieval(), state=state)
        store = SessionStore(state, ctx.settings.session_ttl_seconds)
        store.add_note("r1", "Vienna is on the Danube")
        search(ctx, CURIE, ["corpus"], SearchType.GRAPH_COMPLETION, 2, session="r1")
        recall(ctx, CURIE, session="r1", scope="session")
        keys = state.keys("session:r1:")
        assert {k.split(":")[2] for k in keys} == {"index", "note", "qa", "trace", "vec"}, keys
        ttl_ms = ctx.settings.session_ttl_seconds * 1000
        for key in keys:  # the index set too: it goes with the session's last item
            assert ttl_ms - 60_000 < client.pttl(prefix + key) <= ttl_ms, key
        assert store.forget("r1") == len(keys) - 1 and state.keys("session:") == []
    finally:
        for key in state.keys(""):
            state.delete(key)
        state.close()
        client.close()


def test_forget_everything_needs_confirmation_and_removes_all(runtime: Runtime) -> None:
    # Last in the module: it removes the corpus the other tests read.
    asked(runtime, "all-1")
    remember_note(runtime, "all-2", "note")
    with pytest.raises(ValueError, match="confirm"):
        forget(runtime, everything=True)
    done = forget(runtime, everything=True, confirm=True)
    assert done.datasets == ["corpus"] and set(done.sessions) >= {"all-1", "all-2"}
    assert runtime.state.keys("session:") == []
    assert runtime.graph.count("corpus").get("DocumentChunk", 0) == 0
    with pytest.raises(LookupError, match="does not exist"):
        forget(runtime, dataset="corpus")
