"""Operations: worker, flower, serve, demo and eval."""

from __future__ import annotations

import ipaddress
import logging
import os
from pathlib import Path
from typing import Annotated

import typer

from api.cli.ingest import add, cognify
from api.cli.render import err, fail, guarded, out
from api.cli.search import search
from core.settings import Settings

app = typer.Typer()


def node_name(queues: str, name: str | None) -> str:
    """The worker's Celery node name: `name` (with `@%h` when it names no host), else one that
    is unique per process, `QUEUES-PID@HOST`, so Flower and `celery inspect` tell apart every
    worker of a host (two with one name show as one, and Celery warns)."""
    if name:
        return name if "@" in name else f"{name}@%h"
    label = "-".join(q.strip() for q in queues.split(",") if q.strip())
    return f"{label}-{os.getpid()}@%h"


@app.command()
def worker(
    queues: Annotated[str, typer.Option(help="Comma-separated queues")] = "ingest,llm",
    concurrency: Annotated[int, typer.Option(min=1, help="Tasks at a time")] = 2,
    pool: Annotated[str, typer.Option(help="prefork, threads or solo")] = "threads",
    name: Annotated[
        str | None,
        typer.Option(
            "--name",
            "-n",
            metavar="NAME",
            help="Node name, NAME@HOST (%h is the host name; @%h is added when no host is "
            "given). Default: QUEUES-PID@HOST, unique per process",
        ),
    ] = None,
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
    node = node_name(queues, name)
    configure(settings).worker_main(
        [
            "worker",
            "-Q",
            queues,
            "-c",
            str(concurrency),
            "-P",
            pool,
            "-E",
            # Workers coordinate through Redis (heartbeats, the sweeper), never through each
            # other: mingle's start-up exchange (a second's wait) and gossip's processing of
            # every other worker's events buy nothing. Flower reads events and replies to
            # broadcasts, neither of which needs them.
            "--without-mingle",
            "--without-gossip",
            "-n",
            node,
            "--loglevel",
            "INFO",
        ]
    )


@app.command()
def flower(
    address: Annotated[str, typer.Option(help="Interface to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535)] = 5555,
    basic_auth: Annotated[
        str | None,
        typer.Option(
            "--basic-auth",
            envvar="FLOWER_BASIC_AUTH",
            metavar="USER:PASSWORD",
            show_envvar=False,
            help="The login (or FLOWER_BASIC_AUTH). Default: user cogmill with a random "
            "password, printed at start",
        ),
    ] = None,
) -> None:
    """Run Flower, Celery's task monitor, on the configured (Redis) broker, behind a login.

    It shows every worker (`cogmill worker` names each uniquely) and every task: the step,
    its batch and job, retries and times. It listens on loopback unless --address says
    otherwise; reach it from elsewhere through an SSH tunnel or a TLS proxy."""
    import secrets

    from workers.celery_app import configure

    settings = Settings()
    if settings.embedded_broker:
        fail(
            "COGMILL_BROKER_URL is the in-process memory:// broker; Flower watches the "
            "workers of a Redis broker (see `cogmill worker`)",
            2,
        )
    if basic_auth is None:
        basic_auth = f"cogmill:{secrets.token_urlsafe(12)}"
        err.print(
            f"Flower login: {basic_auth.replace(':', ' / ', 1)} (choose one with "
            "--basic-auth USER:PASSWORD or FLOWER_BASIC_AUTH)",
            markup=False,
        )
    if ":" not in basic_auth.split(",")[0]:
        fail("--basic-auth takes USER:PASSWORD", 2)
    err.print(f"Flower on http://{address}:{port}/", markup=False)
    # The login goes through Flower's environment, not its argv: a command line is public.
    os.environ["FLOWER_BASIC_AUTH"] = basic_auth
    configure(settings).start(["flower", f"--address={address}", f"--port={port}"])


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
            "--types",
            "-t",
            metavar="TYPE",
            help="Search types, or AUTO for the routed search (repeatable)",
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
