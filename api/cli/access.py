"""Access: tenants and their API keys (`cogmill tenants ...`, `cogmill keys ...`)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Annotated

import typer

from api.cli.render import err, guarded, out, runtime_session
from api.services.tenants import ApiKey, Tenants
from core.access import Role

tenants_app = typer.Typer(no_args_is_help=True, help="Tenants: who owns datasets and keys.")
keys_app = typer.Typer(no_args_is_help=True, help="API keys: create, list, revoke.")


def _when(stamp: float | None) -> str:
    if stamp is None:
        return "never"
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%d %H:%M UTC")


BudgetUsd = Annotated[
    float | None,
    typer.Option(
        "--budget-usd", help="LLM budget in USD of the tenant's cognify jobs started without one"
    ),
]


@tenants_app.command("create")
def create_tenant(
    name: Annotated[str, typer.Argument(help="lowercase name")], budget_usd: BudgetUsd = None
) -> None:
    """Create a tenant (then `cogmill keys create --tenant NAME`)."""

    def body() -> None:
        with runtime_session() as rt:
            tenants = Tenants(rt.state)
            tenants.create_tenant(name)
            if budget_usd is not None:
                tenants.set_budget(name, budget_usd)
        out.print(f"tenant {name} created", markup=False)

    guarded(body)


@tenants_app.command("budget")
def tenant_budget(
    name: Annotated[str, typer.Argument(help="tenant")],
    budget_usd: BudgetUsd = None,
    clear: Annotated[bool, typer.Option("--clear", help="no budget of the tenant's own")] = False,
) -> None:
    """Set the default job budget of a tenant (`--clear`: the COGMILL_JOB_BUDGET_USD setting)."""

    def body() -> None:
        if (budget_usd is None) == (not clear):
            err.print("give --budget-usd X or --clear", markup=False)
            raise typer.Exit(2)
        with runtime_session() as rt:
            tenant = Tenants(rt.state).set_budget(name, None if clear else budget_usd)
        shown = "none" if tenant.budget_usd is None else f"{tenant.budget_usd} USD"
        out.print(f"tenant {name}: default job budget {shown}", markup=False)

    guarded(body)


@tenants_app.command("list")
def list_tenants() -> None:
    """The tenants, with their creation time."""

    def body() -> None:
        with runtime_session() as rt:
            for tenant in Tenants(rt.state).tenants():
                budget = "" if tenant.budget_usd is None else f"\tbudget {tenant.budget_usd} USD"
                typer.echo(f"{tenant.name}\tcreated {_when(tenant.created)}{budget}")

    guarded(body)


@keys_app.command("create")
def create_key(
    tenant: Annotated[str | None, typer.Option(help="The tenant the key acts for")] = None,
    role: Annotated[Role, typer.Option(help="reader, writer or admin")] = Role.READER,
    operator: Annotated[
        bool,
        typer.Option(
            "--operator",
            help="A deployment-wide operator key (no tenant): raw Cypher over every tenant, "
            "every tenant's metrics, forget everything",
        ),
    ] = False,
    expires: Annotated[
        float | None, typer.Option(min=0.0001, help="Days until the key expires (default: never)")
    ] = None,
) -> None:
    """Create a key and print it once (only its salted hash is stored)."""

    def body() -> None:
        if operator == (tenant is not None):
            err.print("give --tenant NAME (a tenant's key) or --operator", markup=False)
            raise typer.Exit(2)
        with runtime_session() as rt:
            tenants = Tenants(rt.state)
            if tenant is None:
                key, record = tenants.create_operator_key(expires)
            else:
                key, record = tenants.create_key(tenant, role, expires)
        typer.echo(key)  # alone on stdout: KEY=$(cogmill keys create ...) captures it
        holder = "the deployment" if record.tenant is None else f"tenant {record.tenant}"
        err.print(
            f"key {record.id} for {holder} ({record.role.value}), expires "
            f"{_when(record.expires)}; store it now, it is not shown again",
            markup=False,
        )

    guarded(body)


def _state(key: ApiKey, now: float) -> str:
    if key.revoked:
        return "revoked"
    return "active" if key.usable(now) else "expired"


@keys_app.command("list")
def list_keys(
    tenant: Annotated[str | None, typer.Option(help="Only this tenant's keys")] = None,
) -> None:
    """Every key's id, tenant, role, state and expiry (never the key itself)."""

    def body() -> None:
        with runtime_session() as rt:
            records = Tenants(rt.state).keys(tenant)
        now = time.time()
        for key in sorted(records, key=lambda k: (k.tenant or "", k.created)):
            typer.echo(
                f"{key.id}\t{key.tenant or '(operator)'}\t{key.role.value}\t{_state(key, now)}\t"
                f"expires {_when(key.expires)}"
            )

    guarded(body)


@keys_app.command("revoke")
def revoke_key(key_id: Annotated[str, typer.Argument(help="The key id (`keys list`)")]) -> None:
    """Revoke a key at once; requests with it get 401."""

    def body() -> None:
        with runtime_session() as rt:
            Tenants(rt.state).revoke(key_id)
        out.print(f"key {key_id} revoked", markup=False)

    guarded(body)
