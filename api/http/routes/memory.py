"""Session memory: remember, recall, improve, forget (the same use cases as the CLI commands).

Sessions are not per tenant yet, so a key may use these routes on datasets only: a session
(and improve, which reads one, and forget everything) answers 403 to every key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from fastapi import APIRouter, Response

from api.http.deps import Reader, RuntimeDep, Writer, check_bounds
from api.http.schemas import (
    ApiError,
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
from core.tenants import AccessDeniedError, Caller
from retrieval.memory import ImproveResult, RecallResponse


def no_session_for_keys(caller: Caller, session: str | None) -> None:
    """403 for a tenant's key naming a session: sessions are not scoped by tenant yet."""
    if caller.tenant is not None and session is not None:
        raise AccessDeniedError(
            "sessions are not per tenant yet, so API keys may not use them; remember into, "
            "recall from and forget datasets instead"
        )


router = APIRouter(prefix="/api/v1", tags=["memory"])
T = TypeVar("T")


def not_found(action: Callable[[], T]) -> T:
    """Run an action; a LookupError (unknown session, answer, dataset...) becomes a 404."""
    try:
        return action()
    except LookupError as err:
        raise ApiError(404, "not_found", str(err)) from err


@router.post(
    "/remember",
    response_model=RememberResult,
    response_model_exclude_none=True,
    responses={202: {"description": "Added to a dataset; a cognify job was started"},
               **error_responses(400, 422, 503)},
)  # fmt: skip
def remember(
    body: RememberRequest, runtime: RuntimeDep, response: Response, caller: Writer
) -> RememberResult:
    """Keep a note in a session (200), or add the text to a dataset and cognify it (202)."""
    no_session_for_keys(caller, body.session)
    if body.session is not None:
        note = memory.remember_note(runtime, body.session, body.text)
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
    no_session_for_keys(caller, body.session)
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
    no_session_for_keys(caller, body.session)
    score = memory.feedback_score(body.feedback)
    return not_found(lambda: memory.improve(runtime, body.session, body.qa_id, score, body.results))


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
    no_session_for_keys(caller, body.session)
    done = not_found(
        lambda: memory.forget(
            runtime,
            session=body.session,
            dataset=body.dataset,
            document=body.document,
            everything=body.everything,
            confirm=body.confirm,
            caller=caller,
        )
    )
    return ForgetResult(
        session_keys=done.session_keys,
        sessions=done.sessions,
        datasets=done.datasets,
        documents=done.documents,
        graph_items=done.graph_items,
    )
