"""Operations: worker, serve, demo and eval."""

from __future__ import annotations

import ipaddress
import logging
from pathlib import Path
from typing import Annotated

import typer

from api.cli.ingest import add, cognify
from api.cli.render import err, fail, guarded, out
from api.cli.search import search
from core.settings import Settings

app = typer.Typer()


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
        from runtime import share_cores_between_threads

        share_cores_between_threads(concurrency)
    if pool != "prefork":  # prefork children open their own (workers/sweeper.py)
        from runtime import current_runtime

        current_runtime().open()
    # httpx logs every request at INFO: a line per LLM call, and 2% of a worker's CPU.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    configure(settings).worker_main(
        ["worker", "-Q", queues, "-c", str(concurrency), "-P", pool, "-E", "--loglevel", "INFO"]
    )


# -- serve: the HTTP API ------------------------------------------------------------------------


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve anywhere
        return False


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535)] = 8000,
) -> None:
    """Run the HTTP API (with embedded worker threads when the broker is in-process).

    A host other than loopback needs COGMILL_AUTH=required: every request then takes a key."""
    import uvicorn

    from api.http.app import create_app
    from api.http.connections import connection_cap, guarded_protocol

    settings = Settings()
    if not _loopback(host) and settings.auth != "required":
        fail(
            f"refusing to serve on {host}, reachable from other machines, without API keys: "
            "set COGMILL_AUTH=required (and `cogmill keys create`), or serve on 127.0.0.1",
            2,
        )

    # One process: the embedded stores and the memory:// broker cannot be shared by several.
    uvicorn.run(
        create_app(warm_up=True, schedules=True),
        host=host,
        port=port,
        workers=1,
        timeout_keep_alive=settings.api_keep_alive_seconds,
        http=guarded_protocol(
            connection_cap(settings.api_max_connections),
            settings.api_max_connections_per_client,
            settings.api_head_timeout_seconds,
            settings.api_body_idle_seconds,
        ),
    )


@app.command()
def demo(
    dataset: Annotated[str, typer.Option(help="Dataset for the sample corpus")] = "demo",
) -> None:
    """Ingest the bundled sample corpus and answer a few sample questions."""
    from api.services.demo import QUESTIONS, SAMPLE_CORPUS

    add([SAMPLE_CORPUS], dataset)
    try:
        cognify(dataset)
    except typer.Exit as stop:
        if stop.exit_code:
            raise
    for question in QUESTIONS:
        out.rule(question)
        search(question, [dataset], None, 3, False)  # routed, as `search` without --type


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

    from api.services.evaluation import (
        Results,
        default_types,
        results_json,
        results_table,
        run_eval,
    )
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
