"""Ingestion commands: add, add-sql, cognify."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from api.cli.facts import DocumentDateOption
from api.cli.jobs import BUDGET_TOKENS_HELP, BUDGET_USD_HELP
from api.cli.render import guarded, out, print_added, runtime_session, wait_for
from api.services.add import Added, AddOptions, add_paths
from api.services.add import add_sql as run_add_sql
from api.services.cognify import OntologyFile
from api.services.cognify import cognify as run_cognify
from api.services.estimate import CognifyEstimate
from api.services.estimate import estimate as run_estimate
from api.services.jobs import JobReport
from api.services.webhooks import for_job as job_webhook

if TYPE_CHECKING:
    from pipelines.structured.key_declarations import KeyDeclarations

app = typer.Typer()

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
    typer.Option(
        "--primary-key",
        metavar="TABLE=COLUMN",
        help="Declare TABLE=COLUMN as a table's key (repeatable)",
    ),
]
ForeignKeyOption = Annotated[
    list[str] | None,
    typer.Option(
        "--foreign-key",
        metavar="TABLE.COLUMN=TABLE.COLUMN",
        help="Declare TABLE.COLUMN=TABLE.COLUMN as a reference (repeatable); declared "
        "references replace the inferred ones of that table",
    ),
]


def read_declarations(
    keys: Path | None, primary: list[str] | None, foreign: list[str] | None
) -> KeyDeclarations | None:
    """The key declarations given on the command line (None when there are none)."""
    from pipelines.structured.key_declarations import (
        KeyDeclarations,
        parse_key_flags,
        parse_keys_yaml,
    )

    if not (keys or primary or foreign):
        return None
    declared = KeyDeclarations()
    if keys is not None:
        declared = parse_keys_yaml(keys.read_text(encoding="utf-8"), str(keys))
    return declared.merged(parse_key_flags(primary or [], foreign or []))


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
    document_date: DocumentDateOption = None,
) -> None:
    """Add documents to a dataset (unchanged files are skipped by content hash).

    Record files become tables (the `structured` pipeline): rows are nodes, foreign keys
    REFERENCES edges. Keys are inferred unless declared with --keys, --primary-key or
    --foreign-key (declarations are kept for the dataset and apply to later cognify runs).
    """

    def body() -> Added:
        declared = read_declarations(keys, primary_key, foreign_key)
        options = AddOptions(
            node_set=node_set, pipeline=pipeline, keys=declared, document_date=document_date
        )
        with runtime_session() as rt:
            return add_paths(rt, dataset, paths, options)

    print_added(guarded(body))


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

    def body() -> Added:
        declared = read_declarations(keys, primary_key, foreign_key)
        with runtime_session() as rt:
            return run_add_sql(rt, dataset, url, table or [], declared)

    print_added(guarded(body))


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
            metavar="FILE",
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
    estimate: Annotated[
        bool,
        typer.Option(
            "--estimate",
            help="Count the LLM calls, tokens and cost it would take; run and store nothing",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="With --estimate: print JSON")] = False,
    webhook: Annotated[
        str | None,
        typer.Option(metavar="URL", help="POST the job record to this URL when it ends (signed)"),
    ] = None,
    budget_usd: Annotated[float | None, typer.Option(help=BUDGET_USD_HELP)] = None,
    budget_tokens: Annotated[int | None, typer.Option(help=BUDGET_TOKENS_HELP)] = None,
    llm_mode: Annotated[
        str | None,
        typer.Option(
            "--llm-mode",
            metavar="MODE",
            help="sync, or batch: LLM steps through the OpenAI Batch API (half price, answers "
            "within 24 h); default: COGMILL_LLM_MODE",
        ),
    ] = None,
) -> None:
    """Build the knowledge graph and vectors of a dataset's new and changed documents."""
    from core.models.custom import load_graph_model

    started = time.perf_counter()
    if estimate:
        print_estimate(dataset, all_documents, pipeline, graph_model, as_json)
        return

    def body() -> JobReport:
        model = load_graph_model(graph_model) if graph_model else None
        rules = OntologyFile.read(ontology) if ontology is not None else None
        with runtime_session(with_worker=True) as rt:
            hook = job_webhook(rt, webhook) if webhook else None
            if hook is not None:
                out.print(f"webhook {hook.id} secret (shown once): {hook.secret}", markup=False)
            job = run_cognify(
                rt,
                dataset,
                pipeline=pipeline,
                everything=all_documents,
                graph_model=model,
                ontology=rules,
                webhook=hook.id if hook else None,
                budget_usd=budget_usd,
                budget_tokens=budget_tokens,
                llm_mode=llm_mode,
            )
            return wait_for(job, sys.stderr.isatty())

    job = guarded(body)
    c = job.counts
    out.print(f"job {job.id}: {job.status.value}" + (f" ({job.message})" if job.message else ""))
    merged = (c.get("entities_merged", 0), c.get("relationships_merged", 0))
    out.print(
        f"documents {c.get('documents', 0)}, chunks {c.get('chunks', 0)}, "
        f"entities {c.get('entities', 0)}, relationships {c.get('relationships', 0)}, "
        f"errors {len(job.errors)}, seconds {time.perf_counter() - started:.1f}"
    )
    if any(merged):
        out.print(f"written again or merged: entities {merged[0]}, relationships {merged[1]}")
    llm, embeddings = job.llm, job.embeddings
    out.print(
        f"LLM calls {llm.calls} ({llm.cache_hits} from cache), tokens in {llm.prompt_tokens} "
        f"(cached {llm.cached_tokens}) out {llm.completion_tokens}, ${llm.cost_usd:.4f}; "
        f"embeddings tokens {embeddings.prompt_tokens}, ${embeddings.cost_usd:.4f}",
        markup=False,
    )
    for error in job.errors:
        out.print(f"  rejected {error.document_name}: {error.step}: {error.message}", markup=False)
    if job.status.value != "succeeded":
        raise typer.Exit(1)
    if job.errors:
        out.print(f"finished with {len(job.errors)} rejected document(s); the others are processed")


def print_estimate(
    dataset: str, everything: bool, pipeline: str | None, graph_model: str | None, as_json: bool
) -> None:
    """`cognify --estimate`: what the run would ask of the LLM, as text or JSON."""
    from core.models.custom import load_graph_model

    def body() -> CognifyEstimate:
        model = load_graph_model(graph_model) if graph_model else None
        with runtime_session() as rt:
            return run_estimate(
                rt, dataset, everything=everything, graph_model=model, pipeline=pipeline
            )

    guess = guarded(body)
    if as_json:
        out.print_json(guess.model_dump_json())
        return
    out.print(
        f"estimate for {dataset}: LLM calls {guess.calls}, prompt tokens {guess.prompt_tokens}, "
        f"completion tokens ~{guess.completion_tokens}, cost ${guess.cost_usd:.4f}",
        markup=False,
    )
