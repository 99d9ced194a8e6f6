"""remember, recall, improve, forget: the session-memory use cases every face calls.

Datasets and sessions are the caller's: datasets are scoped by its tenant
(api/services/datasets.py), sessions live in its tenant's own session store
(retrieval/sessions.py), so two tenants' `chat-1` share nothing and another tenant's session is
unknown (NotFound, a 404). What goes back names datasets as the caller does
(api/services/shown.py).
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, Field

from api.services import shown
from api.services.add import add_files
from api.services.cognify import cognify
from api.services.datasets import checked, ensure_idle, names
from api.services.delete import Deleted, delete_dataset, delete_document
from core.access import LOCAL, Caller
from core.errors import InvalidInput
from core.models.jobs import Job
from retrieval.memory import DEFAULT_THRESHOLD, ImproveResult, RecallResponse
from retrieval.memory import improve as improve_answer
from retrieval.memory import recall as recall_memory
from retrieval.models import SearchType
from retrieval.router import DEFAULT_TYPE
from retrieval.sessions import Note, SessionNotFoundError, SessionStore
from runtime import Runtime


def sessions(rt: Runtime, caller: Caller = LOCAL) -> SessionStore:
    """The caller's tenant's session store."""
    return SessionStore(rt.state, rt.settings.session_ttl_seconds, caller.tenant)


def remember_note(rt: Runtime, session: str, text: str, caller: Caller = LOCAL) -> Note:
    """Keep a note in a session (expires with the session TTL). Raises SessionError."""
    return sessions(rt, caller).add_note(session, text)


class SessionSummary(BaseModel):
    """One of the caller's live sessions and what it holds."""

    session: str
    notes: int
    questions: int


class SessionQuestion(BaseModel):
    """A question asked in a session (search or recall) and its answer, if one was given."""

    id: str = Field(description="The qa id (improve takes it)")
    question: str
    answer: str | None = None
    search_type: str
    datasets: list[str] = Field(description="The datasets it was answered from")
    created: float


class SessionHistory(BaseModel):
    """A session's notes and questions, oldest first (the most recent MAX_ITEMS of each)."""

    session: str
    notes: list[Note]
    questions: list[SessionQuestion]


def list_sessions(rt: Runtime, caller: Caller = LOCAL) -> list[SessionSummary]:
    """The caller's live sessions, by id."""
    store = sessions(rt, caller)
    return [
        SessionSummary(session=s, notes=len(store.notes(s)), questions=len(store.qas(s)))
        for s in store.sessions()
    ]


def session_history(rt: Runtime, session: str, caller: Caller = LOCAL) -> SessionHistory:
    """A session of the caller's: its notes and questions. Raises SessionError for a bad id,
    SessionNotFoundError (a NotFound) when the caller has no such live session."""
    store = sessions(rt, caller)
    if not store.exists(session):
        raise SessionNotFoundError(f"no session {session!r} (never used, forgotten or expired)")
    questions = [
        SessionQuestion(
            id=qa.id,
            question=qa.question,
            answer=qa.answer,
            search_type=qa.search_type,
            datasets=[shown.name(caller, d) for d in qa.datasets],
            created=qa.created,
        )
        for qa in store.qas(session)
    ]
    return SessionHistory(session=session, notes=store.notes(session), questions=questions)


def memory_document_name(text: str) -> str:
    """The document a remembered text becomes: named by its content, so remembering the same
    text twice is one document."""
    return f"memory-{hashlib.sha256(text.strip().encode()).hexdigest()[:16]}.txt"


@dataclass(frozen=True)
class Remembered:
    """A text remembered in a dataset: the document it became and the cognify job started
    for it (already finished when the text was known)."""

    dataset: str
    document: str
    job: Job


def remember_in_dataset(rt: Runtime, dataset: str, text: str, caller: Caller = LOCAL) -> Remembered:
    """Add the text to a dataset as a small document and start a cognify job for it.

    Raises InvalidInput (CatalogError for a bad dataset name) when there is nothing to store.
    """
    checked(dataset, caller)
    if not text.strip():
        raise InvalidInput("the text is empty; pass the text to remember")
    name = memory_document_name(text)
    with tempfile.TemporaryDirectory(prefix=".memory-", dir=rt.settings.home) as tmp:
        path = Path(tmp) / name
        path.write_text(text.strip() + "\n", encoding="utf-8")
        rejected = add_files(rt, dataset, [(name, path)], caller=caller).report.rejected
    if rejected:
        raise InvalidInput(f"cannot remember this text: {rejected[0][1]}")
    return Remembered(dataset, name, cognify(rt, dataset, caller=caller))


def recall(
    rt: Runtime,
    query: str,
    *,
    session: str | None = None,
    datasets: Sequence[str] = (),
    scope: str = "auto",
    top_k: int = 10,
    search_type: SearchType = DEFAULT_TYPE,
    threshold: float = DEFAULT_THRESHOLD,
    caller: Caller = LOCAL,
) -> RecallResponse:
    """Results from the session's lane and/or the graph's (see retrieval/memory.py), each
    tagged with its source. Raises InvalidInput for a bad request."""
    names = [checked(name, caller) for name in datasets]
    with rt.priority.urgent():  # as search's
        response = recall_memory(
            rt.retrieval(),
            query,
            session=session,
            datasets=names,
            scope=scope,
            top_k=top_k,
            search_type=search_type,
            threshold=threshold,
            sessions=sessions(rt, caller),
        )
    return shown.recall(caller, response)


def feedback_score(feedback: str | float) -> float:
    """The score of feedback given as `up` (+1), `down` (-1) or a number; `improve` checks
    its range. Raises InvalidInput for anything else."""
    if isinstance(feedback, str):
        named = {"up": 1.0, "down": -1.0}.get(feedback.strip().lower())
        if named is not None:
            return named
        try:
            return float(feedback)
        except ValueError:
            raise InvalidInput(f"feedback must be up, down or a number, got {feedback!r}") from None
    return float(feedback)


def improve(
    rt: Runtime,
    session: str,
    qa_id: str,
    feedback: float,
    results: Sequence[int] | None = None,
    caller: Caller = LOCAL,
) -> ImproveResult:
    """Reweigh the graph edges an answer's results (all, or the 0-based `results`) were read
    from. Raises NotFound (SessionNotFoundError) for an unknown answer (another tenant's
    too), InvalidInput else."""
    return improve_answer(rt.graph, sessions(rt, caller), session, qa_id, feedback, results)


@dataclass
class Forgotten:
    """What forget removed."""

    session_keys: int = 0
    sessions: list[str] = field(default_factory=list)
    datasets: list[str] = field(default_factory=list)
    documents: list[str] = field(default_factory=list)
    graph_items: int = 0

    def count(self, deleted: Deleted) -> None:
        self.graph_items += deleted.nodes_removed + deleted.edges_removed


def forget(
    rt: Runtime,
    *,
    session: str | None = None,
    dataset: str | None = None,
    document: str | None = None,
    everything: bool = False,
    confirm: bool = False,
    caller: Caller = LOCAL,
) -> Forgotten:
    """Forget one session, one document of a dataset, a dataset, or everything.

    Exactly one target: `session`, `dataset` (with `document` for one document), or
    `everything` (which needs `confirm`). Raises InvalidInput for a bad combination, NotFound
    for something that does not exist, and JobRunningError (nothing forgotten) while a
    cognify job runs on a dataset it would remove from.
    """
    targets = sum((session is not None, dataset is not None, everything))
    if targets != 1:
        raise InvalidInput(
            "forget needs exactly one target: a session, a dataset (optionally with a "
            "document), or everything"
        )
    if document is not None and dataset is None:
        raise InvalidInput("a document is forgotten from a dataset: give the dataset too")
    done = Forgotten()
    if everything:
        if not confirm:
            raise InvalidInput(
                "forgetting everything deletes every dataset and session; confirm it"
            )
        return _forget_everything(rt, done)
    if session is not None:
        store = sessions(rt, caller)
        if not store.exists(session):
            raise SessionNotFoundError(f"no session {session!r} (never used, forgotten or expired)")
        done.session_keys, done.sessions = store.forget(session), [session]
        return done
    assert dataset is not None
    if document is not None:
        done.count(delete_document(rt, dataset, document, caller))
        done.documents = [document]
    else:
        done.count(delete_dataset(rt, dataset, caller))
        done.datasets = [dataset]
    return done


def _forget_everything(rt: Runtime, done: Forgotten) -> Forgotten:
    known = names(rt)
    for name in known:  # every dataset idle before anything is removed
        ensure_idle(rt, name)
    store = sessions(rt)
    done.sessions = store.sessions()
    done.session_keys = store.forget_all()
    for name in known:
        done.count(delete_dataset(rt, name))
        done.datasets.append(name)
    return done
