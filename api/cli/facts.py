"""Facts over time: `cogmill facts ENTITY` (a timeline with sources), and the time options
`add --document-date`, `search --as-of` and `search --known-at` share."""

from __future__ import annotations

from typing import Annotated

import typer

from api.cli.render import guarded, out, runtime_session
from retrieval.fact_timeline import Fact, FactTimeline

app = typer.Typer()

DocumentDateOption = Annotated[
    str | None,
    typer.Option(
        "--document-date",
        help="The day the documents speak of (2023-03-15, March 2023): their facts without "
        "a date of their own held then",
    ),
]
AsOfOption = Annotated[
    str | None,
    typer.Option("--as-of", help="See facts as they held then (2019, March 2019, 2019-03-15)"),
]
KnownAtOption = Annotated[
    str | None,
    typer.Option("--known-at", help="See facts as cogmill had recorded them by then"),
]


@app.command()
def facts(
    entity: Annotated[str, typer.Argument(help="The entity's name")],
    dataset: Annotated[str, typer.Option("--dataset", "-d", help="Dataset name")],
    relation: Annotated[
        str | None, typer.Option("--relation", "-r", help="Only relations with these words")
    ] = None,
    as_of: AsOfOption = None,
    known_at: KnownAtOption = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000, help="Facts at most")] = 100,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
) -> None:
    """An entity's facts in time order: when each held, what superseded it, its sources."""
    from api.services.facts import facts as run_facts

    def body() -> FactTimeline:
        with runtime_session() as rt:
            return run_facts(
                rt, dataset, entity, relation=relation, as_of=as_of, known_at=known_at, limit=limit
            )

    found = guarded(body)
    if as_json:
        out.print_json(found.model_dump_json())
        return
    out.print(f"{found.entity} ({found.dataset}): {len(found.facts)} facts", markup=False)
    for fact in found.facts:
        out.print(line(fact), markup=False)
        for s in fact.sources:
            said = s.said_from or (f"until {s.said_until}" if s.said_until else "undated")
            out.print(f"    {said}: {s.document_name or s.document_id}", markup=False)
    if found.truncated:
        out.print(f"(more than {limit}: raise --limit or pass --relation)", markup=False)


def line(fact: Fact) -> str:
    """One fact: its key, when it held, whether it holds, what superseded it."""
    when = f"{fact.valid_from or '…'} – {fact.valid_to or 'now'}"
    if not fact.spans:
        when = "undated"
    state = "holds" if fact.holds else "does not hold"
    ender = f", superseded by {fact.superseded_by}" if fact.superseded_by else ""
    return f"  {fact.source} —{fact.relation}→ {fact.target}  [{when}] {state}{ender}"
