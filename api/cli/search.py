"""Search commands: search (with provenance) and route (the query router's choice)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from api.cli.facts import AsOfOption, KnownAtOption
from api.cli.render import err, guarded, out, print_response, runtime_session
from api.services import search as service
from core.errors import InvalidInput
from retrieval.models import SearchType

app = typer.Typer()
TYPE_NAMES = ", ".join(SearchType)


def parse_search_type(value: str | SearchType) -> SearchType:
    """A search type named in any case; BadParameter lists the types."""
    try:
        return SearchType(str(value).upper())
    except ValueError:
        raise typer.BadParameter(f"must be one of {TYPE_NAMES} (any case); got {value!r}") from None


def type_option(help: str) -> typer.models.OptionInfo:
    """`--type/-t TYPE`: a search type in any case."""
    return typer.Option(
        "--type",
        "-t",
        metavar="TYPE",
        parser=parse_search_type,
        help=f"{help}. One of (any case): {TYPE_NAMES}.",
    )


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="The question")],
    dataset: Annotated[list[str], typer.Option("--dataset", "-d", help="Dataset(s) to search")],
    search_type: Annotated[
        SearchType | None, type_option("Search type (default: the query router's choice)")
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
    as_of: AsOfOption = None,
    known_at: KnownAtOption = None,
) -> None:
    """Search datasets; results carry the chunks and documents they came from."""

    def body() -> service.Searched:
        schema = None
        if response_model is not None:
            from retrieval.response_model import load_schema

            try:
                text = response_model.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as err:
                why = getattr(err, "strerror", None) or "not readable UTF-8 text"
                raise InvalidInput(f"cannot read --response-model {response_model}: {why}") from err
            schema = load_schema(text, origin=f"--response-model {response_model}")
        with runtime_session() as rt:
            return service.search(
                rt,
                query,
                dataset,
                search_type,
                top_k,
                schema,
                session,
                as_of=as_of,
                known_at=known_at,
            )

    searched = guarded(body)
    print_response(searched.response, as_json)
    if session:  # on stderr with --json, so stdout stays one JSON object
        line = f"qa id {searched.qa_id} in session {session}"
        (err if as_json else out).print(line, markup=False)


@app.command("route")
def route_query(
    query: Annotated[str, typer.Argument(help="The question")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
) -> None:
    """The search type the rule-based query router picks (no LLM, no stores)."""
    chosen = guarded(lambda: service.route(query))
    if as_json:
        out.print_json(chosen.model_dump_json())
        return
    out.print(
        f"{chosen.search_type.value} (confidence {chosen.confidence:.2f}); runner-up "
        f"{chosen.runner_up.value} ({chosen.runner_up_score:.2f})"
    )
