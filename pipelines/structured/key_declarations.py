"""Declared keys of a dataset's tables: parsed from flags or YAML, kept on the Dataset node.

`cogmill add --keys keys.yaml`, `--primary-key TABLE=COLUMN` and `--foreign-key T.C=T2.C2`
declare keys; a declaration wins over a SQLite schema and over inference (foreign_keys.py).
Declarations accumulate per dataset: later ones update earlier ones table by table.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator

from core.errors import InvalidInput, problem
from core.models.documents import PIPELINE, PIPELINE_VERSION, STRUCTURED_PIPELINE
from core.models.graph import Node, dataset_id
from core.models.vocabulary import DATASET, DOCUMENT
from core.ports import GraphStore

DECLARATIONS = "table_keys"  # Dataset node property holding the declared keys
_NAME = re.compile(r"^[^.=\s][^.=]*$")


class KeyDeclarationError(InvalidInput):
    """A key declaration is malformed or names something that does not exist."""

    code = "invalid_key_declaration"


class TableDeclaration(BaseModel):
    """Declared keys of one table: its primary key column and `column: table.column` references."""

    primary_key: str | None = None
    foreign_keys: dict[str, str] = Field(default_factory=dict)

    @field_validator("foreign_keys")
    @classmethod
    def _targets(cls, value: dict[str, str]) -> dict[str, str]:
        for column, target in value.items():
            split_target(target, f"foreign key {column}")
        return value


class KeyDeclarations(BaseModel):
    """The declared keys of a dataset's tables, by table name."""

    tables: dict[str, TableDeclaration] = Field(default_factory=dict)

    def merged(self, more: KeyDeclarations) -> KeyDeclarations:
        """These declarations updated by `more` (its primary keys and references win)."""
        tables = {name: decl.model_copy(deep=True) for name, decl in self.tables.items()}
        for name, decl in more.tables.items():
            into = tables.setdefault(name, TableDeclaration())
            into.primary_key = decl.primary_key or into.primary_key
            into.foreign_keys.update(decl.foreign_keys)
        return KeyDeclarations(tables=tables)


def split_target(target: str, what: str) -> tuple[str, str]:
    """`table.column` as (table, column). Raises KeyDeclarationError saying the expected form."""
    table, dot, column = target.strip().rpartition(".")
    if not dot or not table or not column:
        raise KeyDeclarationError(
            f"{what}: {target!r} must be TABLE.COLUMN, e.g. customers.customer_id"
        )
    return table, column


def parse_keys_yaml(text: str, where: str = "keys file") -> KeyDeclarations:
    """Declarations from YAML: `tables: {orders: {primary_key: id, foreign_keys: {c: t.c}}}`."""
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        near = f" near line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise KeyDeclarationError(
            f"{where} is not valid YAML{near}; check its indentation, colons and brackets"
        ) from err
    if isinstance(data, dict) and "tables" not in data:
        data = {"tables": data}  # the `tables:` level may be left out
    try:
        return KeyDeclarations.model_validate(data)
    except ValidationError as err:
        said = problem(".".join(str(p) for p in err.errors()[0]["loc"]), err.errors()[0])
        # The example is YAML on one line: every face prints an error as one line.
        raise KeyDeclarationError(
            f"{where}: {said}; expected e.g. {{tables: {{orders: {{primary_key: order_id, "
            "foreign_keys: {customer_id: customers.customer_id}}}}"
        ) from err


def parse_key_flags(primary: Iterable[str], foreign: Iterable[str]) -> KeyDeclarations:
    """Declarations from `--primary-key TABLE=COLUMN` and `--foreign-key T.C=T2.C2` flags."""
    tables: dict[str, TableDeclaration] = {}
    for flag in primary:
        table, eq, column = flag.partition("=")
        if not eq or not _NAME.match(table.strip()) or not column.strip():
            raise KeyDeclarationError(
                f"--primary-key {flag!r} must be TABLE=COLUMN, e.g. orders=order_id"
            )
        tables.setdefault(table.strip(), TableDeclaration()).primary_key = column.strip()
    for flag in foreign:
        source, eq, target = flag.partition("=")
        if not eq:
            raise KeyDeclarationError(
                f"--foreign-key {flag!r} must be TABLE.COLUMN=TABLE.COLUMN, "
                "e.g. orders.customer_id=customers.customer_id"
            )
        table, column = split_target(source, f"--foreign-key {flag!r}")
        split_target(target, f"--foreign-key {flag!r}")
        tables.setdefault(table, TableDeclaration()).foreign_keys[column] = target.strip()
    return KeyDeclarations(tables=tables)


def load_declarations(graph: GraphStore, dataset: str) -> KeyDeclarations:
    """The keys declared for a dataset's tables (none when nothing was declared)."""
    nodes = graph.get_nodes([dataset_id(dataset)])
    stored = nodes[0].properties.get(DECLARATIONS) if nodes else None
    return KeyDeclarations.model_validate(stored or {})


def declare_keys(graph: GraphStore, dataset: str, more: KeyDeclarations) -> bool:
    """Merge declarations into the dataset's; True when they changed.

    A change marks the dataset's structured documents as needing work, so the next plain
    `cognify` relinks the tables with the new keys.
    """
    before = load_declarations(graph, dataset)
    after = before.merged(more)
    if after == before:
        return False
    graph.upsert_nodes(
        [
            Node(
                id=dataset_id(dataset),
                type=DATASET,
                dataset=dataset,
                name=dataset,
                properties={DECLARATIONS: after.model_dump()},
            )
        ]
    )
    stale, offset = [], 0
    while page := graph.find_nodes(dataset, DOCUMENT, limit=1000, offset=offset):
        stale += [d for d in page if d.properties.get(PIPELINE) == STRUCTURED_PIPELINE]
        offset += len(page)
    graph.upsert_nodes(
        [
            Node(id=d.id, type=DOCUMENT, dataset=dataset, properties={PIPELINE_VERSION: ""})
            for d in stale
        ]
    )
    return True
