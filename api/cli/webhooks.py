"""`cogmill webhooks add|list|remove` (a tenant's subscriptions) and `cogmill jobs webhooks ID`
(a job's delivery log)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated

import typer

from api.cli.render import guarded, out, runtime_session
from api.services import webhooks
from api.services.webhooks import Attempt
from workers.webhooks.subscriptions import Subscription

app = typer.Typer(no_args_is_help=True, help="Webhooks: POST a job's record when it ends.")
TenantOption = Annotated[
    str | None, typer.Option(help="The tenant (default: the local default tenant)")
]


def _when(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@app.command("add")
def add(
    url: Annotated[str, typer.Argument(help="http(s) URL with a public address")],
    tenant: TenantOption = None,
    events: Annotated[
        list[str] | None,
        typer.Option("--events", help="A finished status to send (repeatable; default: all)"),
    ] = None,
) -> None:
    """Subscribe a tenant to its jobs ending; prints the signing secret once."""

    def body() -> Subscription:
        with runtime_session() as rt:
            return webhooks.add(rt, url, events, tenant=tenant)

    sub = guarded(body)
    out.print(f"webhook {sub.id} -> {sub.url} ({', '.join(sub.events)})", markup=False)
    out.print(f"secret (shown once): {sub.secret}", markup=False)


@app.command("list")
def list_webhooks(tenant: TenantOption = None) -> None:
    """A tenant's subscriptions (without their secrets)."""

    def body() -> list[Subscription]:
        with runtime_session() as rt:
            return webhooks.list_subscriptions(rt, tenant=tenant)

    for sub in guarded(body):
        typer.echo(f"{sub.id}\t{sub.url}\t{','.join(sub.events)}\tcreated {_when(sub.created)}")


@app.command("remove")
def remove(
    webhook_id: Annotated[str, typer.Argument(help="The id `webhooks list` shows")],
    tenant: TenantOption = None,
) -> None:
    """Stop sending to a subscription."""

    def body() -> Subscription:
        with runtime_session() as rt:
            return webhooks.remove(rt, webhook_id, tenant=tenant)

    sub = guarded(body)
    out.print(f"webhook {sub.id} removed", markup=False)


def job_deliveries(
    job_id: str,
    as_json: Annotated[bool, typer.Option("--json", help="JSON lines (for scripts)")] = False,
) -> None:
    """A job's webhook delivery attempts, oldest first."""

    def body() -> list[Attempt]:
        with runtime_session() as rt:
            return webhooks.deliveries(rt, job_id)

    attempts = guarded(body)
    if not attempts and not as_json:
        out.print(f"no webhook deliveries for job {job_id}", markup=False)
    for a in attempts:
        if as_json:
            typer.echo(json.dumps(a.__dict__))
            continue
        status = a.status if a.status is not None else "-"
        detail = f"  {a.error}" if a.error else ""
        typer.echo(f"{_when(a.at)}  #{a.attempt} {a.outcome:<9} {status}  {a.url}{detail}")
