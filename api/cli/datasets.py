"""Commands on a dataset's stored graph: delete, export."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from api.cli.render import err, guarded, out, runtime_session
from api.services.delete import Deleted, delete_dataset, delete_document
from api.services.export import export_graph as run_export

app = typer.Typer()


@app.command()
def delete(
    dataset: Annotated[str, typer.Option("--dataset", "-d", help="Dataset to delete from")],
    document: Annotated[
        str | None, typer.Option("--document", help="File name as added; omit for the dataset")
    ] = None,
) -> None:
    """Delete one document (and what only it supported) or a whole dataset."""

    def body() -> Deleted:
        with runtime_session() as rt:
            if document is None:
                return delete_dataset(rt, dataset)
            return delete_document(rt, dataset, document)

    done = guarded(body)
    target = f"document {document}" if document else "dataset"
    count = done.nodes_removed + done.edges_removed
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

    def body() -> None:
        with runtime_session() as rt:
            lines = run_export(rt, dataset, fmt.lower())
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
