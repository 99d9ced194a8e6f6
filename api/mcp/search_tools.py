"""The MCP tools for answers and memory: search, recall, remember, improve, forget.

Bounds, role checks and the session rule are the HTTP routes' own functions (api/http/deps.py,
api/http/routes/memory.py), so a tool refuses exactly what the route refuses, with its words.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.types import ToolAnnotations
from pydantic import BeforeValidator, Field

from api.http.deps import check_bounds, reader, writer
from api.http.schemas import ForgetResult, RememberResult
from api.mcp.face import current
from api.mcp.tools import DESTRUCTIVE, READ, RECORDS, WRITE, Dataset, add_tool
from api.services import memory, shown
from api.services import search as service
from api.services.search import check_type_allowed
from core.errors import InvalidInput
from retrieval.memory import DEFAULT_THRESHOLD, ImproveResult, RecallResponse
from retrieval.models import SearchResponse, SearchType
from retrieval.registry import RETRIEVERS
from retrieval.router import DEFAULT_TYPE


def _upper(value: object) -> object:
    return value.upper() if isinstance(value, str) else value  # as the HTTP API accepts it


TypeName = Annotated[SearchType, BeforeValidator(_upper)]
Query = Annotated[str, Field(min_length=1, description="The question, in natural language")]
Datasets = Annotated[
    list[Dataset], Field(min_length=1, description="The datasets to search (list_datasets)")
]
TopK = Annotated[int | None, Field(default=None, ge=1, le=1000, description="Results wanted")]
Session = Annotated[
    str | None,
    Field(default=None, max_length=128, description="A conversation's session id, e.g. chat-42"),
]
AsOf = Annotated[
    str | None,
    Field(
        default=None,
        max_length=64,
        description="See facts as they held at this time (2019, March 2019, 2019-03-15); "
        "default: current facts",
    ),
]
KnownAt = Annotated[
    str | None,
    Field(
        default=None,
        max_length=64,
        description="See facts as cogmill had recorded them by this time (2026-12-07)",
    ),
]
SEARCH_GUIDE = """\
Search datasets and get ranked passages with their sources (document name and chunk), plus an
answer for the *_COMPLETION types when the server has an LLM. Leave search_type out: the
rule-based router picks a type from the question (GRAPH_PPR, graph search by personalised
PageRank, for most questions, including multi-hop ones whose answer spans documents) and says
which in `route`. Name a type only for a reason: CHUNKS_LEXICAL for exact words, names or
codes; CHUNKS for plain similarity; TEMPORAL for dates and periods; GRAPH_COMPLETION for an
answer from graph facts; GRAPH_SUMMARY_COMPLETION for an overview. Graph searches show
current facts first (superseded ones later, as history, each with its validity); as_of
asks about a past time, known_at about what was known then. CYPHER and
NATURAL_LANGUAGE need the Neo4j graph and an admin key. Every type:
"""


def search(
    query: Query,
    datasets: Datasets,
    search_type: TypeName | None = None,
    top_k: TopK = None,
    as_of: AsOf = None,
    known_at: KnownAt = None,
) -> SearchResponse:
    face = current()
    caller = reader(face.caller)
    check_bounds(face.runtime, query, datasets)
    searched = service.search(
        face.runtime,
        query,
        datasets,
        search_type,
        top_k,
        caller=caller,
        as_of=as_of,
        known_at=known_at,
    )
    return shown.search(caller, searched.response)


search.__doc__ = SEARCH_GUIDE + RETRIEVERS.describe([t.value for t in RETRIEVERS])


def recall(
    query: Query,
    datasets: Annotated[
        list[Dataset], Field(default_factory=list, description="Datasets of the graph lane")
    ],
    session: Session = None,
    scope: Annotated[
        Literal["auto", "session", "graph", "both"],
        Field(
            description="auto: both lanes with datasets; with only a session, a close "
            "session note answers alone, else the session's datasets are searched"
        ),
    ] = "auto",
    top_k: Annotated[int, Field(ge=1, le=1000)] = 10,
    search_type: TypeName = DEFAULT_TYPE,
    threshold: Annotated[
        float, Field(ge=-1, le=1, description="Cosine a session note needs to answer alone")
    ] = DEFAULT_THRESHOLD,
) -> RecallResponse:
    """Recall what is known about a question from a conversation's session notes and/or the
    datasets' graph; each result says which (`source`). Prefer search for plain questions over
    documents; use recall inside a conversation that used remember."""
    face = current()
    caller = reader(face.caller)
    check_type_allowed(caller, search_type)
    check_bounds(face.runtime, query, datasets)
    return memory.recall(
        face.runtime,
        query,
        session=session,
        datasets=datasets,
        scope=scope,
        top_k=top_k,
        search_type=search_type,
        threshold=threshold,
        caller=caller,
    )


def remember(
    text: Annotated[str, Field(min_length=1, description="The fact or note to keep")],
    dataset: Annotated[
        str | None, Field(default=None, max_length=128, description="Keep it for good here")
    ] = None,
    session: Session = None,
) -> RememberResult:
    """Keep a text: in a session (expires with it), or for good in a dataset,
    where it becomes a small document and a cognify job starts (poll job_status with the job
    id before searching for it). Give exactly one of dataset or session."""
    face = current()
    caller = writer(face.caller)
    if (session is None) == (dataset is None):
        raise InvalidInput("give exactly one of `session` or `dataset`")
    limit = face.runtime.settings.api_max_body_bytes  # the remember route's body bound
    if len(text.encode()) > limit:
        raise InvalidInput(
            f"the text is over {limit} bytes (COGMILL_API_MAX_BODY_BYTES); add a long text "
            "with add_text instead"
        )
    if session is not None:
        note = memory.remember_note(face.runtime, session, text, caller)
        return RememberResult(stored_in="session", session=session, note_id=note.id)
    assert dataset is not None
    done = memory.remember_in_dataset(face.runtime, dataset, text, caller)
    return RememberResult(
        stored_in="dataset",
        dataset=done.dataset,
        document=done.document,
        job_id=done.job.id,
        job_status=done.job.status,
    )


def improve(
    session: Annotated[str, Field(min_length=1, max_length=128)],
    qa_id: Annotated[str, Field(min_length=1, description="From recall with this session")],
    feedback: Annotated[
        float | Literal["up", "down"], Field(description="up (+1), down (-1) or a score in [-1, 1]")
    ],
    results: Annotated[
        list[int] | None, Field(default=None, description="Only these result indexes (0-based)")
    ] = None,
) -> ImproveResult:
    """Give feedback on an answer recalled in a session: the graph edges its results came from
    weigh more (up) or less (down) in later searches."""
    face = current()
    caller = writer(face.caller)
    score = memory.feedback_score(feedback)
    return memory.improve(face.runtime, session, qa_id, score, results, caller)


def forget(
    dataset: Annotated[str | None, Field(default=None, max_length=128)] = None,
    document: Annotated[
        str | None, Field(default=None, description="Only this document of the dataset")
    ] = None,
    session: Session = None,
) -> ForgetResult:
    """Forget permanently: a whole dataset (with everything built from it), one document of a
    dataset (give both), or a session's notes. Exactly one target. Refused while a cognify job
    runs on the dataset. To forget everything, use the `cogmill forget` command instead."""
    face = current()
    caller = writer(face.caller)
    done = memory.forget(
        face.runtime, session=session, dataset=dataset, document=document, caller=caller
    )
    return ForgetResult(
        session_keys=done.session_keys,
        sessions=done.sessions,
        datasets=done.datasets,
        documents=done.documents,
        graph_items=done.graph_items,
    )


def register(server: MCPServer[Any]) -> None:
    """Add the answer and memory tools to `server`."""
    entries: list[tuple[Callable[..., Any], ToolAnnotations]] = [
        (search, READ),
        (recall, RECORDS),  # a recall in a session is recorded there (for improve)
        (remember, WRITE),
        (improve, RECORDS),
        (forget, DESTRUCTIVE),
    ]
    for fn, hints in entries:
        add_tool(server, fn, fn.__name__, hints)
