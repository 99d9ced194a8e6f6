"""Session memory: remember, recall, improve, forget (the same use cases as the CLI commands),
and the caller's sessions: list, history, delete.

A session belongs to the caller's tenant: another tenant's session of the same name is another
session, and one the caller has not used is a 404. Forget everything spans every tenant, so
no key may do it (403).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Response
from fastapi import Path as PathParam

from api.http.deps import Reader, RuntimeDep, Writer, check_bounds
from api.http.schemas import (
    ForgetRequest,
    ForgetResult,
    ImproveRequest,
    RecallRequest,
    RememberRequest,
    RememberResult,
    error_responses,
)
from api.services import memory
from api.services.search import check_type_allowed
from core.access import AccessDeniedError
from retrieval.memory import ImproveResult, RecallResponse

router = APIRouter(prefix="/api/v1", tags=["memory"])


@router.post(
    "/remember",
    response_model=RememberResult,
    response_model_exclude_none=True,
    responses={
        202: {
            "model": RememberResult,
            "description": "Added to a dataset; a cognify job was started",
        },
        **error_responses(400, 422, 503),
    },
)
def remember(
    body: RememberRequest, runtime: RuntimeDep, response: Response, caller: Writer
) -> RememberResult:
    """Keep a note in a session (200), or add the text to a dataset and cognify it (202)."""
    if body.session is not None:
        note = memory.remember_note(runtime, body.session, body.text, caller)
        return RememberResult(stored_in="session", session=body.session, note_id=note.id)
    assert body.dataset is not None
    done = memory.remember_in_dataset(runtime, body.dataset, body.text, caller)
    response.status_code = 202
    return RememberResult(
        stored_in="dataset",
        dataset=done.dataset,
        document=done.document,
        job_id=done.job.id,
        job_status=done.job.status,
    )


@router.post(
    "/recall",
    response_model=RecallResponse,
    response_model_exclude_none=True,
    responses=error_responses(400, 422, 503),
)
def recall_memory(body: RecallRequest, runtime: RuntimeDep, caller: Reader) -> RecallResponse:
    """Results from the session and/or the graph, each tagged with its `source`."""
    check_type_allowed(caller, body.search_type)
    check_bounds(runtime, body.query, body.datasets)
    return memory.recall(
        runtime,
        body.query,
        session=body.session,
        datasets=body.datasets,
        scope=body.scope,
        top_k=body.top_k,
        search_type=body.search_type,
        threshold=body.threshold,
        caller=caller,
    )


@router.post(
    "/improve",
    response_model=ImproveResult,
    response_model_exclude_none=True,
    responses=error_responses(404, 422, 503),
)
def improve_answer(body: ImproveRequest, runtime: RuntimeDep, caller: Writer) -> ImproveResult:
    """Feedback on an answer: reweigh the graph edges its results were read from."""
    score = memory.feedback_score(body.feedback)
    return memory.improve(runtime, body.session, body.qa_id, score, body.results, caller)


@router.post(
    "/forget",
    response_model=ForgetResult,
    responses=error_responses(400, 404, 409, 422, 503),
)
def forget(body: ForgetRequest, runtime: RuntimeDep, caller: Writer) -> ForgetResult:
    """Forget a session, a document, a dataset, or everything (`everything` + `confirm`, only
    without keys: it spans every tenant); 409 while a cognify job runs on a dataset it would
    remove from."""
    if body.everything and caller.tenant is not None:
        raise AccessDeniedError(
            "forget everything spans every tenant, so no API key may do it; forget your "
            "datasets one by one"
        )
    done = memory.forget(
        runtime,
        session=body.session,
        dataset=body.dataset,
        document=body.document,
        everything=body.everything,
        confirm=body.confirm,
        caller=caller,
    )
    return ForgetResult(
        session_keys=done.session_keys,
        sessions=done.sessions,
        datasets=done.datasets,
        documents=done.documents,
        graph_items=done.graph_items,
    )


SessionId = Annotated[str, PathParam(description="Session id (e.g. chat-42)", max_length=128)]


@router.get(
    "/sessions",
    response_model=list[memory.SessionSummary],
    responses=error_responses(503),
)
def list_sessions(runtime: RuntimeDep, caller: Reader) -> list[memory.SessionSummary]:
    """The caller's live sessions, with how many notes and questions each holds."""
    return memory.list_sessions(runtime, caller)


@router.get(
    "/sessions/{session}",
    response_model=memory.SessionHistory,
    response_model_exclude_none=True,
    responses=error_responses(404, 422, 503),
)
def session_history(
    session: SessionId, runtime: RuntimeDep, caller: Reader
) -> memory.SessionHistory:
    """A session's notes and questions (with their answers and qa ids), oldest first."""
    return memory.session_history(runtime, session, caller)


@router.delete(
    "/sessions/{session}",
    response_model=ForgetResult,
    responses=error_responses(404, 422, 503),
)
def delete_session(session: SessionId, runtime: RuntimeDep, caller: Writer) -> ForgetResult:
    """Forget a session: every note, question and trace it holds."""
    done = memory.forget(runtime, session=session, caller=caller)
    return ForgetResult(
        session_keys=done.session_keys,
        sessions=done.sessions,
        datasets=[],
        documents=[],
        graph_items=0,
    )
