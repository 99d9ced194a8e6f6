"""The `cogmill` command line: add, cognify, search, jobs, worker, serve, demo, eval.

Exit codes: 0 success, 1 failure, 2 usage error. Errors print one line, never a traceback.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from core.catalog import AddReport, CatalogError, iter_files
from core.models.jobs import Job
from core.ports import StoreError
from core.settings import Settings
from core.stores.factory import NotAvailableError
from retrieval.models import SearchResponse, SearchType
from retrieval.search import QA_ID_KEY
from retrieval.search import search as run_search

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="cogmill: knowledge-graph memory for LLM applications.",
)
jobs_app = typer.Typer(no_args_is_help=True, help="List, inspect and cancel cognify jobs.")
app.add_typer(jobs_app, name="jobs")
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

USAGE_ERRORS = (CatalogError, ValueError, LookupError)
FAILURES = (StoreError, NotAvailableError, OSError, RuntimeError)
T = TypeVar("T")

if TYPE_CHECKING:
    from pipelines.foreign_keys import KeyDeclarations
    from workers.runtime import Runtime


def fail(message: str, code: int = 1) -> NoReturn:
    err.print(f"error: {message}", markup=False)
    raise typer.Exit(code)


@contextmanager
def runtime_session(with_worker: bool = False) -> Iterator[object]:
    """A Runtime for this command (and embedded worker threads when the broker is in-process)."""
    from workers.embedded import open_runtime

    with open_runtime(Settings(), with_worker=with_worker) as runtime:
        yield runtime


def guarded(action: Callable[[], T]) -> T:
    """Run a command body, turning known errors into one line and the right exit code."""
    try:
        return action()
    except typer.Exit:
        raise
    except USAGE_ERRORS as error:
        fail(str(error), 2)
    except FAILURES as error:
        fail(str(error), 1)


PipelineOption = Annotated[
    str | None,
    typer.Option(
        "--pipeline",
        help="Pipeline for these documents; default: `structured` for record files "
        "(.csv, .tsv, .jsonl, a .json list of objects, SQLite databases), else `default`",
    ),
]
KeysOption = Annotated[
    Path | None,
    typer.Option(
        "--keys",
        exists=True,
        dir_okay=False,
        help="YAML declaring table keys (kept for the dataset), e.g. 'orders: {primary_key: "
        "order_id, foreign_keys: {customer_id: customers.customer_id}}'",
    ),
]
PrimaryKeyOption = Annotated[
    list[str] | None,
    typer.Option("--primary-key", help="Declare TABLE=COLUMN as a table's key (repeatable)"),
]
ForeignKeyOption = Annotated[
    list[str] | None,
    typer.Option(
        "--foreign-key",
        help="Declare TABLE.COLUMN=TABLE.COLUMN as a reference (repeatable); declared "
        "references replace the inferred ones of that table",
    ),
]


def read_declarations(
    keys: Path | None, primary: list[str] | None, foreign: list[str] | None
) -> KeyDeclarations | None:
    """The key declarations given on the command line (None when there are none)."""
    from pipelines.foreign_keys import KeyDeclarations, parse_key_flags, parse_keys_yaml

    if not (keys or primary or foreign):
        return None
    declared = KeyDeclarations()
    if keys is not None:
        declared = parse_keys_yaml(keys.read_text(encoding="utf-8"), str(keys))
    return declared.merged(parse_key_flags(primary or [], foreign or []))


def declare(rt: Runtime, dataset: str, declared: KeyDeclarations | None) -> None:
    """Store declared keys on the dataset; tell whether the tables will be relinked."""
    from pipelines.structured import declare_keys

    if declared is not None and declare_keys(rt.graph, dataset, declared):
        out.print(f"keys declared for {', '.join(sorted(declared.tables))}; the next cognify "
                  "relinks the dataset's tables")  # fmt: skip


def check_pipeline(name: str | None) -> None:
    from pipelines.definitions import get_pipeline

    if name is not None:
        get_pipeline(name)  # an unknown name is a usage error listing the known ones


@app.command()
def add(
    paths: Annotated[list[Path], typer.Argument(help="Files or directories (recursive)")],
    dataset: Annotated[str, typer.Option("--dataset", "-d", help="Dataset name")],
    node_set: Annotated[
        str | None,
        typer.Option("--node-set", help="Group the documents in a node set (e.g. coding_rules)"),
    ] = None,
    pipeline: PipelineOption = None,
    keys: KeysOption = None,
    primary_key: PrimaryKeyOption = None,
    foreign_key: ForeignKeyOption = None,
) -> None:
    """Add documents to a dataset (unchanged files are skipped by content hash).

    Record files become tables (the `structured` pipeline): rows are nodes, foreign keys
    REFERENCES edges. Keys are inferred unless declared with --keys, --primary-key or
    --foreign-key (declarations are kept for the dataset and apply to later cognify runs).
    """
    from pipelines.tables import check_source

    def body() -> AddReport:
        check_pipeline(pipeline)
        declared = read_declarations(keys, primary_key, foreign_key)
        with runtime_session() as rt:
            rt.catalog.ensure_dataset(dataset)
            report = AddReport()
            for path, problem in iter_files(paths):
                if problem:
                    report.rejected.append((str(path), problem))
                else:
                    rt.catalog.add_file(
                        dataset, path, path.name, report, check_source, node_set, pipeline
                    )
            declare(rt, dataset, declared)
            return report

    print_add_report(guarded(body), dataset)


@app.command("add-sql")
def add_sql(
    url: Annotated[str, typer.Argument(help="SQLAlchemy URL, e.g. sqlite:///shop.db")],
    dataset: Annotated[str, typer.Option("--dataset", "-d", help="Dataset name")],
    table: Annotated[
        list[str] | None, typer.Option("--table", "-t", help="Only this table (repeatable)")
    ] = None,
    keys: KeysOption = None,
    primary_key: PrimaryKeyOption = None,
    foreign_key: ForeignKeyOption = None,
) -> None:
    """Add the tables of a database reachable through a SQLAlchemy URL (`structured` pipeline).

    The tables are copied into a SQLite snapshot with their primary and foreign keys, stored
    as one document named after the URL (password hidden). Run add-sql again to take a new
    snapshot: unchanged data is skipped, changed data is relinked by the next cognify.
    Other databases need their SQLAlchemy driver installed (e.g. psycopg for PostgreSQL).
    """
    import tempfile

    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    from pipelines.tables import check_source, snapshot_sql

    def body() -> AddReport:
        declared = read_declarations(keys, primary_key, foreign_key)
        try:
            name = make_url(url).render_as_string(hide_password=True)
        except ArgumentError as error:
            raise ValueError(f"{error}; give a SQLAlchemy URL such as sqlite:///shop.db") from None
        with runtime_session() as rt, tempfile.TemporaryDirectory() as tmp:
            rt.catalog.ensure_dataset(dataset)
            snapshot = Path(tmp) / "snapshot.sqlite"
            copied = snapshot_sql(url, snapshot, table or [])
            out.print(f"copied tables {', '.join(copied)}", markup=False)
            report = AddReport()
            rt.catalog.add_file(dataset, snapshot, name, report, check_source, None, "structured")
            declare(rt, dataset, declared)
            return report

    print_add_report(guarded(body), dataset)


def print_add_report(report: AddReport, dataset: str) -> None:
    for name in report.added:
        out.print(f"added      {name}", markup=False)
    for name in report.replaced:
        out.print(f"replaced   {name} (content changed)", markup=False)
    for name in report.unchanged:
        out.print(f"unchanged  {name} (same content, skipped)", markup=False)
    for name, reason in report.rejected:
        out.print(f"rejected   {name}: {reason}", markup=False)
    stored = len(report.added) + len(report.replaced) + len(report.unchanged)
    out.print(
        f"{len(report.added)} added, {len(report.replaced)} replaced, "
        f"{len(report.unchanged)} unchanged, {len(report.rejected)} rejected "
        f"in dataset {dataset}"
    )
    if report.rejected and not stored:
        raise typer.Exit(1)


def wait_for(job: Job, show_progress: bool) -> Job:
    """Poll a job until it finishes, with a progress bar on a terminal."""
    from workers.jobs import JobTracker
    from workers.runtime import current_runtime

    tracker = JobTracker(current_runtime().state)
    columns = [
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} docs"),
        TimeElapsedColumn(),
    ]
    with Progress(*columns, console=err, disable=not show_progress, transient=True) as progress:
        bar = progress.add_task(f"cognify {job.dataset}", total=job.total_documents)
        while not job.status.finished:
            time.sleep(0.2)
            job = tracker.get(job.id)
            done = job.counts.get("documents", 0) + len({e.document_id for e in job.errors})
            progress.update(bar, completed=done)
    return tracker.get(job.id)


@app.command()
def cognify(
    dataset: Annotated[str, typer.Argument(help="Dataset to process")],
    all_documents: Annotated[bool, typer.Option("--all", help="Reprocess every document")] = False,
    pipeline: Annotated[
        str | None,
        typer.Option(help="Pipeline for every document (default: each document's own)"),
    ] = None,
    graph_model: Annotated[
        str | None,
        typer.Option(
            "--graph-model",
            help="JSON Schema file (or pydantic module:Class) of node classes that replaces the "
            "default extraction schema; add --all to re-extract processed documents",
        ),
    ] = None,
    ontology: Annotated[
        Path | None,
        typer.Option(
            "--ontology", help="OWL/RDF file (.owl .rdf .ttl .nt .jsonld) to align entities with"
        ),
    ] = None,
) -> None:
    """Build the knowledge graph and vectors of a dataset's new and changed documents."""
    from core.models.custom import load_graph_model
    from core.ontology import store_ontology_file
    from workers.orchestration import cognify as plan

    started = time.perf_counter()

    def body() -> Job:
        options = {"graph_model": load_graph_model(graph_model)} if graph_model else {}
        with runtime_session(with_worker=True) as rt:
            if ontology is not None:
                options["ontology"] = store_ontology_file(rt.blobs, ontology)
            mode = "all" if all_documents else "changed"
            job = plan(rt, dataset, pipeline, mode, options)
            return wait_for(job, sys.stderr.isatty())

    job = guarded(body)
    c = job.counts
    out.print(f"job {job.id}: {job.status.value}" + (f" ({job.message})" if job.message else ""))
    out.print(
        f"documents {c.get('documents', 0)}, chunks {c.get('chunks', 0)}, "
        f"entities {c.get('entities', 0)}, relationships {c.get('relationships', 0)}, "
        f"errors {len(job.errors)}, seconds {time.perf_counter() - started:.1f}"
    )
    for error in job.errors:
        out.print(f"  rejected {error.document_name}: {error.step}: {error.message}", markup=False)
    if job.status.value != "succeeded":
        raise typer.Exit(1)
    if job.errors:
        out.print(f"finished with {len(job.errors)} rejected document(s); the others are processed")


def print_response(response: SearchResponse, as_json: bool) -> None:
    if as_json:
        out.print_json(response.model_dump_json(exclude_none=True))
        return
    if response.note:
        out.print(f"[dim]{response.note}[/dim]")
    if not response.results:
        out.print("no results")
    for rank, result in enumerate(response.results, 1):
        names = ", ".join(dict.fromkeys(s.document_name for s in result.sources))
        out.print(f"[bold]{rank}.[/bold] ({result.score:.3f}) [cyan]{names}[/cyan]")
        out.print("   " + result.text.replace("\n", "\n   ")[:600], markup=False)


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="The question")],
    dataset: Annotated[list[str], typer.Option("--dataset", "-d", help="Dataset(s) to search")],
    search_type: Annotated[
        SearchType | None,
        typer.Option(
            "--type", "-t", case_sensitive=False, help="Search type (default: the query router's)"
        ),
    ] = None,
    top_k: Annotated[
        int | None,
        typer.Option("--top-k", "-k", min=1, max=1000, help="Results (default: from the query)"),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
    response_model: Annotated[
        Path | None,
        typer.Option(
            "--response-model",
            help="JSON Schema file: the answer follows it (printed in `answer_json`)",
        ),
    ] = None,
    session: Annotated[
        str | None,
        typer.Option("--session", "-s", help="Record the question and answer in this session"),
    ] = None,
) -> None:
    """Search datasets; results carry the chunks and documents they came from."""

    def body() -> SearchResponse:
        schema = None
        if response_model is not None:
            from retrieval.response_model import load_schema

            try:
                text = response_model.read_text(encoding="utf-8")
            except OSError as err:
                raise ValueError(f"cannot read --response-model {response_model}: {err}") from err
            schema = load_schema(text, origin=f"--response-model {response_model}")
        with runtime_session() as rt:
            ctx = rt.retrieval()
            response = run_search(ctx, query, dataset, search_type, top_k, schema, session)
            qa_ids.append(ctx.extras.get(QA_ID_KEY, ""))
            return response

    qa_ids: list[str] = []
    print_response(guarded(body), as_json)
    if session:  # on stderr with --json, so stdout stays one JSON object
        (err if as_json else out).print(f"qa id {qa_ids[0]} in session {session}", markup=False)


@app.command("route")
def route_query(
    query: Annotated[str, typer.Argument(help="The question")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
) -> None:
    """The search type the rule-based query router picks (no LLM, no stores)."""
    from retrieval.router import route

    chosen = guarded(lambda: route(query))
    if as_json:
        out.print_json(chosen.model_dump_json())
        return
    out.print(
        f"{chosen.search_type.value} (confidence {chosen.confidence:.2f}); runner-up "
        f"{chosen.runner_up.value} ({chosen.runner_up_score:.2f})"
    )


@app.command()
def delete(
    dataset: Annotated[str, typer.Option("--dataset", "-d", help="Dataset to delete from")],
    document: Annotated[
        str | None, typer.Option("--document", help="File name as added; omit for the dataset")
    ] = None,
) -> None:
    """Delete one document (and what only it supported) or a whole dataset."""

    def body() -> int:
        from workers.jobs import JobTracker

        with runtime_session() as rt:
            jobs = JobTracker(rt.state).list()
            running = [j.id for j in jobs if j.dataset == dataset and not j.status.finished]
            if running:  # deleting under a job races its writes (the API answers 409)
                fail(
                    f"a cognify job on {dataset!r} is running ({running[0]}); wait for it "
                    f"(`cogmill jobs watch {running[0]}`) or cancel it, then delete again"
                )
            if document is None:
                removed = rt.catalog.remove_dataset(dataset)
            else:
                removed = rt.catalog.remove_named(dataset, document)
            return len(removed.node_ids) + len(removed.edge_ids)

    count = guarded(body)
    target = f"document {document}" if document else "dataset"
    out.print(f"deleted {target} from {dataset}: {count} nodes and edges removed", markup=False)


@app.command("export")
def export_graph(
    dataset: Annotated[str, typer.Option("--dataset", "-d", help="Dataset to export")],
    fmt: Annotated[
        str, typer.Option("--format", "-f", help="jsonl (a node or edge per line) or graphml")
    ] = "jsonl",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", dir_okay=False, help="File (default: stdout)")
    ] = None,
) -> None:
    """Export a dataset's nodes and edges, written page by page."""
    from api.export import export_lines
    from core.catalog import check_dataset_name
    from core.models.graph import dataset_id

    def body() -> None:
        with runtime_session() as rt:
            if not rt.graph.get_nodes([dataset_id(check_dataset_name(dataset))]):
                raise CatalogError(f"dataset {dataset!r} does not exist; `cogmill add` first")
            lines = export_lines(rt.graph, dataset, fmt.lower())
            if output is None:
                for text in lines:
                    sys.stdout.write(text)
                return
            partial = output.with_name(output.name + ".partial")
            with partial.open("w", encoding="utf-8") as file:
                file.writelines(lines)
            partial.replace(output)  # a failed export never leaves a truncated file

    guarded(body)
    if output is not None:
        err.print(f"exported {dataset} to {output}", markup=False)


@jobs_app.command("list")
def jobs_list() -> None:
    """Jobs known to the state store, newest first."""
    from workers.jobs import JobTracker

    def body() -> list[Job]:
        with runtime_session() as rt:
            return sorted(JobTracker(rt.state).list(), key=lambda j: j.created_at, reverse=True)

    for job in guarded(body):
        out.print(
            f"{job.id}  {job.status.value:<9}  {job.dataset:<20} "
            f"{job.counts.get('documents', 0)}/{job.total_documents} docs  "
            f"{job.created_at:%Y-%m-%d %H:%M:%S}",
            markup=False,
        )


@jobs_app.command("show")
def jobs_show(job_id: str) -> None:
    """One job as JSON: status, counts and per-document errors."""
    from workers.jobs import JobTracker

    def body() -> Job:
        with runtime_session() as rt:
            return JobTracker(rt.state).get(job_id)

    out.print_json(guarded(body).model_dump_json())


@jobs_app.command("cancel")
def jobs_cancel(job_id: str) -> None:
    """Stop a job: queued batches are skipped, running steps stop at their next boundary."""
    from workers.jobs import JobTracker

    def body() -> Job:
        with runtime_session() as rt:
            return JobTracker(rt.state).cancel(job_id)

    job = guarded(body)
    out.print(
        f"job {job.id}: cancel requested"
        if not job.status.finished
        else f"job {job.id} already {job.status.value}"
    )


@app.command()
def worker(
    queues: Annotated[str, typer.Option(help="Comma-separated queues")] = "ingest,llm",
    concurrency: Annotated[int, typer.Option(min=1)] = 2,
    pool: Annotated[str, typer.Option(help="prefork, threads or solo")] = "threads",
) -> None:
    """Run a Celery worker process on the configured (Redis) broker."""
    from workers.celery_app import configure

    settings = Settings()
    if settings.embedded_broker:
        fail(
            "COGMILL_BROKER_URL is the in-process memory:// broker; set it to a Redis URL to "
            "run separate workers (embedded mode runs workers inside each command)",
            2,
        )
    if pool == "threads":
        from workers.runtime import share_cores_between_threads

        share_cores_between_threads(concurrency)
    configure(settings).worker_main(
        ["worker", "-Q", queues, "-c", str(concurrency), "-P", pool, "-E", "--loglevel", "INFO"]
    )


@jobs_app.command("watch")
def jobs_watch(
    job_id: str,
    after: Annotated[int, typer.Option(min=0, help="Skip events up to this id")] = 0,
) -> None:
    """Follow a job's events until it ends; exit 0 when it succeeded, 1 otherwise."""
    from api.export import follow_job
    from workers.jobs import JobTracker

    def body() -> str:
        status = ""
        with runtime_session() as rt:
            for event in follow_job(JobTracker(rt.state), job_id, after=after):
                if event is None:
                    continue
                fields = {k: v for k, v in event.data.items() if k not in ("event", "at")}
                detail = " ".join(f"{k}={v}" for k, v in fields.items() if v not in ("", None))
                label = f"#{event.seq}" if event.seq is not None else "  "
                out.print(f"{label} {event.kind} {detail}".rstrip(), markup=False)
                status = str(event.data.get("status", status))
        return status

    status = guarded(body)
    if status != "succeeded":
        raise typer.Exit(1)


# -- serve: the HTTP API ------------------------------------------------------------------------


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535)] = 8000,
) -> None:
    """Run the HTTP API (with embedded worker threads when the broker is in-process)."""
    import uvicorn

    from api.app import create_app

    # One process: the embedded stores and the memory:// broker cannot be shared by several.
    uvicorn.run(create_app(), host=host, port=port, workers=1)


@app.command()
def demo(
    dataset: Annotated[str, typer.Option(help="Dataset for the sample corpus")] = "demo",
) -> None:
    """Ingest the bundled sample corpus and answer a few sample questions."""
    from api.demo import QUESTIONS, SAMPLE_CORPUS

    add([SAMPLE_CORPUS], dataset)
    try:
        cognify(dataset)
    except typer.Exit as stop:
        if stop.exit_code:
            raise
    for question in QUESTIONS:
        out.rule(question)
        search(question, [dataset], SearchType.GRAPH_COMPLETION, 3, False)


@app.command("eval")
def eval_(
    bench: Annotated[
        list[str] | None, typer.Option("--bench", "-b", help="musique or hotpotqa (default: both)")
    ] = None,
    types: Annotated[
        list[str] | None,
        typer.Option(
            "--types", "-t", help="Search types, or AUTO for the routed search (repeatable)"
        ),
    ] = None,
    home: Annotated[
        Path | None, typer.Option(help="Keep the ingested benches here and reuse them")
    ] = None,
    data: Annotated[Path | None, typer.Option(help="Folder of the bench JSON files")] = None,
    limit: Annotated[int, typer.Option(min=0, help="Only the first N passages")] = 0,
    split: Annotated[
        str,
        typer.Option(help="Questions: all, tune (even positions) or test (odd positions)"),
    ] = "all",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
) -> None:
    """Recall@2/5/10 of the gold passages on the multi-hop benches, per search type."""
    import json

    from api.eval import Results, default_types, results_json, results_table, run_eval
    from retrieval.evaluation import BENCHES, default_data_dir, eval_type

    def body() -> Results:
        return run_eval(
            home,
            data or default_data_dir(),
            bench or list(BENCHES),
            [eval_type(name) for name in types] if types else default_types(),
            limit=limit,
            split=split,
            progress=lambda line: err.print(line, markup=False),
        )

    results = guarded(body)
    typer.echo(json.dumps(results_json(results)) if as_json else results_table(results))


# remember, recall, improve, forget register themselves on `app` (they import it from here).
import api.memory_cli  # noqa: E402, F401


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
