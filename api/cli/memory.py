"""Session-memory commands: remember, recall, improve, forget."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from api.cli.render import guarded, out, print_ranked, runtime_session, wait_for
from api.services import jobs, memory
from core.errors import InvalidInput
from retrieval.memory import DEFAULT_THRESHOLD, RecallResponse
from retrieval.models import SearchType
from retrieval.router import DEFAULT_TYPE

app = typer.Typer()

SessionOption = Annotated[str | None, typer.Option("--session", "-s", help="Session id")]


@app.command()
def remember(
    text: Annotated[str, typer.Argument(help="The text to remember")],
    session: SessionOption = None,
    dataset: Annotated[
        str | None, typer.Option("--dataset", "-d", help="Add permanently to this dataset")
    ] = None,
) -> None:
    """Remember a text in a session (expires with it) or permanently in a dataset."""

    def body() -> str:
        if (session is None) == (dataset is None):
            raise InvalidInput("give exactly one of --session or --dataset")
        if session is not None:
            with runtime_session() as rt:
                note = memory.remember_note(rt, session, text)
            return f"remembered in session {session} (note {note.id})"
        assert dataset is not None
        with runtime_session(with_worker=True) as rt:
            done = memory.remember_in_dataset(rt, dataset, text)
            job = wait_for(done.job, sys.stderr.isatty())
        if job.status.value != "succeeded" or job.errors:
            problems = "; ".join(e.message for e in job.errors) or job.message
            raise jobs.JobFailedError(f"job {job.id} {job.status.value}: {problems}")
        return f"remembered in dataset {dataset} as {done.document} (job {job.id})"

    out.print(guarded(body), markup=False)


def print_recall(response: RecallResponse, as_json: bool) -> None:
    if as_json:
        out.print_json(response.model_dump_json(exclude_none=True))
        return
    if response.note:
        out.print(f"[dim]{response.note}[/dim]")
    if response.answer:
        out.print(f"[bold]answer[/bold] ({response.answer_source}): {response.answer}")
    print_ranked(response.results, lambda result: f"[magenta]{result.source}[/magenta] ")
    if response.qa_id:
        out.print(
            f"qa id {response.qa_id} (cogmill improve --session {response.session} "
            f"--qa {response.qa_id} --feedback up|down)",
            markup=False,
        )


@app.command("recall")
def recall_command(
    query: Annotated[str, typer.Argument(help="The question")],
    session: SessionOption = None,
    dataset: Annotated[
        list[str] | None, typer.Option("--dataset", "-d", help="Dataset(s) to search")
    ] = None,
    scope: Annotated[
        str, typer.Option(help="auto, session, graph or both (auto: see docs/guide.md)")
    ] = "auto",
    top_k: Annotated[int, typer.Option("--top-k", "-k", min=1, max=1000)] = 10,
    search_type: Annotated[
        SearchType, typer.Option("--type", "-t", case_sensitive=False, help="Graph lane type")
    ] = DEFAULT_TYPE,
    threshold: Annotated[
        float, typer.Option(min=-1, max=1, help="Cosine at which a session hit answers alone")
    ] = DEFAULT_THRESHOLD,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
) -> None:
    """Recall from a session's notes and answers and/or the graph; results say their source."""

    def body() -> RecallResponse:
        with runtime_session() as rt:
            return memory.recall(
                rt,
                query,
                session=session,
                datasets=dataset or [],
                scope=scope,
                top_k=top_k,
                search_type=search_type,
                threshold=threshold,
            )

    print_recall(guarded(body), as_json)


@app.command("improve")
def improve_command(
    session: Annotated[str, typer.Option("--session", "-s", help="Session id")],
    qa: Annotated[str, typer.Option("--qa", help="The qa id search/recall printed")],
    feedback: Annotated[str, typer.Option(help="up, down, or a score in [-1, 1]")],
    result: Annotated[
        list[int] | None, typer.Option("--result", help="Only this result (1-based, repeatable)")
    ] = None,
) -> None:
    """Feedback on an answer: reweigh the graph edges its results were read from."""

    def body() -> str:
        score = memory.feedback_score(feedback)
        indexes = None if result is None else [i - 1 for i in result]
        with runtime_session() as rt:
            done = memory.improve(rt, session, qa, score, indexes)
        line = f"feedback {done.feedback:+g} on {qa}: {done.edges} edge weight(s) changed"
        return (
            line
            + (f", {done.missing} gone" if done.missing else "")
            + (f" ({done.note})" if done.note else "")
        )

    out.print(guarded(body), markup=False)


@app.command()
def forget(
    session: SessionOption = None,
    dataset: Annotated[str | None, typer.Option("--dataset", "-d", help="Dataset")] = None,
    document: Annotated[
        str | None, typer.Option("--document", help="Only this document of --dataset")
    ] = None,
    everything: Annotated[bool, typer.Option("--all", help="Every dataset and session")] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Confirm --all")] = False,
) -> None:
    """Forget a session, a document, a dataset, or everything (--all --yes)."""

    def body() -> memory.Forgotten:
        if everything and not yes:
            raise InvalidInput("--all deletes every dataset and session; add --yes to confirm")
        with runtime_session() as rt:
            return memory.forget(
                rt,
                session=session,
                dataset=dataset,
                document=document,
                everything=everything,
                confirm=yes,
            )

    done = guarded(body)
    parts = [f"{len(done.sessions)} session(s) ({done.session_keys} keys)"]
    parts += [f"{len(done.datasets)} dataset(s)", f"{len(done.documents)} document(s)"]
    out.print(f"forgot {', '.join(parts)}; {done.graph_items} graph items removed", markup=False)
