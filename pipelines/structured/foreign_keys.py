"""Primary and foreign keys of a dataset's tables: declared, read from a schema, or inferred.

Precedence per table: a declaration (`cogmill add --keys keys.yaml`, `--primary-key`,
`--foreign-key`, kept on the Dataset node: key_declarations.py) wins over a SQLite schema,
which wins over inference.

Inference, from one profiling pass per table:
- primary key: a fully filled, unique column named like an id (`id`, `<table>_id`, `*_id`,
  `*_key`, `*_code`, `sku`, `uuid`), else the first column when it is unique, filled and not a
  number; without one, rows are keyed by their position.
- foreign key: a column whose sampled values are (nearly) all keys of another table, and whose
  name points at it (`orders.customer_id` -> `customers.customer_id`, `orders.customer` ->
  `customers.id`); without a name match only when every sampled value is a key and the values
  are not plain numbers (numbers 1..n match any integer key).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, Field

from pipelines.structured.key_declarations import KeyDeclarationError, KeyDeclarations, split_target
from pipelines.structured.tables import Row, key_text

log = logging.getLogger("cogmill.foreign_keys")

SAMPLE = 2000  # distinct values kept per column for foreign-key containment checks
NAMED_MIN_CONTAINMENT = 0.8  # some dangling references are tolerated when the name matches
_ID_SUFFIXES = ("_id", "id", "_key", "_code", "_uuid", "_no", "_number")
_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


# -- profiles -------------------------------------------------------------------------------


class ColumnProfile(BaseModel):
    """What one pass over a column tells key inference."""

    name: str
    filled: int = 0
    unique: bool = True  # exact for id-like columns and the first column, else not tracked
    numeric: bool = True  # every filled value is a plain number
    sample: list[str] = Field(default_factory=list)  # up to SAMPLE distinct key texts


class TableProfile(BaseModel):
    rows: int = 0
    columns: list[ColumnProfile] = Field(default_factory=list)


def id_like(column: str) -> bool:
    name = column.lower()
    return name in ("id", "key", "sku", "uuid", "code") or name.endswith(_ID_SUFFIXES)


def profile_rows(columns: list[str], rows: Iterator[Row]) -> tuple[list[str], TableProfile]:
    """One pass over a table's rows: the columns seen (in order) and their profiles."""
    order = list(columns)
    stats: dict[str, ColumnProfile] = {c: ColumnProfile(name=c) for c in order}
    seen: dict[str, set[str]] = {}
    samples: dict[str, dict[str, None]] = {c: {} for c in order}
    profile = TableProfile()
    for row in rows:
        profile.rows += 1
        for column, value in row.items():
            col = stats.get(column)
            if col is None:  # JSON records may add keys on any row
                col = stats[column] = ColumnProfile(name=column)
                order.append(column)
                samples[column] = {}
            if not value:
                continue
            col.filled += 1
            key = key_text(value)
            if col.numeric and not _NUMBER.match(key):
                col.numeric = False
            if id_like(column) or column == order[0]:
                values = seen.setdefault(column, set())
                if key in values:
                    col.unique = False
                values.add(key)
            if len(samples[column]) < SAMPLE:
                samples[column][key] = None
    for col in stats.values():
        col.sample = list(samples[col.name])
        if not (id_like(col.name) or col.name == order[0]):
            col.unique = False
    profile.columns = [stats[c] for c in order]
    return order, profile


# -- inference ------------------------------------------------------------------------------


def singular(table: str) -> str:
    name = table.lower()
    if name.endswith("ies"):
        return name[:-3] + "y"
    if name.endswith(("ses", "xes")):
        return name[:-2]
    return name[:-1] if name.endswith("s") and not name.endswith("ss") else name


def infer_primary_key(table: str, profile: TableProfile) -> list[str]:
    """The inferred key column of a table ([] when rows are keyed by position)."""
    full = [c for c in profile.columns if c.unique and profile.rows and c.filled == profile.rows]
    own = {"id", f"{singular(table)}_id", f"{table.lower()}_id", f"{singular(table)}id"}
    for ranked in (
        [c for c in full if c.name.lower() in own],
        [c for c in full if id_like(c.name)],
        [c for c in full[:1] if c.name == profile.columns[0].name and not c.numeric],
    ):
        if ranked:
            return [ranked[0].name]
    return []


def name_points_at(column: str, table: str, key: str) -> bool:
    """Whether a column's name says it refers to `table` keyed by `key`."""
    col, key_l, one = column.lower(), key.lower(), singular(table)
    if col == key_l:
        return key_l != "id"  # every table has an `id`; sharing it names no reference
    names = {one, f"{one}_id", f"{one}id", f"{table.lower()}_id", f"{one}_{key_l}"}
    return col in names or (key_l != "id" and col.endswith("_" + key_l))


class InferredReference(BaseModel):
    column: str
    ref_table: str
    ref_column: str
    containment: float


def infer_references(
    table: str,
    profile: TableProfile,
    own_key: list[str],
    keys: Mapping[str, tuple[str, Container[tuple[str, ...]]]],
) -> list[InferredReference]:
    """Foreign keys of one table, given every table's single-column key and its values."""
    found: list[InferredReference] = []
    for col in profile.columns:
        if not col.sample or [col.name] == own_key:
            continue
        best: tuple[tuple[int, float], InferredReference] | None = None
        for other, (key, values) in sorted(keys.items()):
            if other == table and col.name == key:
                continue
            named = name_points_at(col.name, other, key)
            contained = sum(1 for v in col.sample if (v,) in values) / len(col.sample)
            accepted = (named and contained >= NAMED_MIN_CONTAINMENT) or (
                contained == 1.0 and not col.numeric and other != table
            )
            rank = (int(named), contained)
            if accepted and (best is None or rank > best[0]):
                best = (
                    rank,
                    InferredReference(
                        column=col.name, ref_table=other, ref_column=key, containment=contained
                    ),
                )
        if best is not None:
            found.append(best[1])
    return found


# -- the plan: every table's key and references ------------------------------------------------


class TableLike(Protocol):
    """What planning reads of a table (read_tables.py's TableInfo)."""

    name: str
    columns: list[str]
    profile: TableProfile
    schema_primary_key: list[str]

    @property
    def document(self) -> Any: ...

    @property
    def schema_references(self) -> Sequence[Any]: ...


class Reference(BaseModel):
    """A foreign key: `columns` of a table hold `ref_columns` values of `ref_table`."""

    columns: list[str]
    ref_table: str
    ref_columns: list[str]
    origin: str  # declared, schema or inferred

    @property
    def target_key(self) -> tuple[str, tuple[str, ...]]:
        return self.ref_table, tuple(self.ref_columns)

    def describe(self) -> str:
        cols, refs = ",".join(self.columns), ",".join(self.ref_columns)
        return f"{cols} -> {self.ref_table}.{refs}"


Lookup = dict[tuple[str, ...], str]  # key values -> row id
# (table, key columns) -> the table's lookup on those columns and how many rows repeat a key
LookupReader = Callable[[str, list[str]], tuple[Lookup, int]]


@dataclass
class KeyPlan:
    primary_keys: dict[str, list[str]] = field(default_factory=dict)
    references: dict[str, list[Reference]] = field(default_factory=dict)
    lookups: dict[tuple[str, tuple[str, ...]], Lookup] = field(default_factory=dict)
    documents: dict[str, str] = field(default_factory=dict)  # table -> document id
    problems: dict[str, str] = field(default_factory=dict)  # table -> what is wrong


def plan_keys(
    tables: Sequence[TableLike], declarations: KeyDeclarations, read_lookup: LookupReader
) -> KeyPlan:
    """Every table's primary key and references, and the lookups that resolve references."""
    plan = KeyPlan(documents={t.name: t.document.id for t in tables})
    by_name = {t.name: t for t in tables}
    unknown = sorted(set(declarations.tables) - set(by_name))
    if unknown:
        log.warning("declared_keys_for_unknown_tables tables=%s", unknown)
    for table in tables:
        try:
            plan.primary_keys[table.name] = _primary_key(table, declarations)
        except KeyDeclarationError as err:
            plan.problems[table.name] = str(err)
    for table in tables:
        pk = plan.primary_keys.get(table.name)
        if pk:
            lookup, repeats = read_lookup(table.name, pk)
            plan.lookups[(table.name, tuple(pk))] = lookup
            if repeats and _declared_pk(table.name, declarations):
                plan.problems[table.name] = (
                    f"the declared primary key {table.name}.{','.join(pk)} repeats {repeats} "
                    "value(s); declare a unique column (or none to key rows by position)"
                )
    for table in tables:
        if table.name in plan.problems:
            continue
        try:
            refs = _references(table, by_name, declarations, plan)
        except KeyDeclarationError as err:
            plan.problems[table.name] = str(err)
            continue
        for ref in refs:
            if ref.target_key not in plan.lookups:
                plan.lookups[ref.target_key] = read_lookup(ref.ref_table, ref.ref_columns)[0]
        plan.references[table.name] = refs
    return plan


def _declared_pk(table: str, declarations: KeyDeclarations) -> bool:
    decl = declarations.tables.get(table)
    return bool(decl and decl.primary_key)


def _check_columns(table: TableLike, columns: Iterable[str], what: str) -> None:
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise KeyDeclarationError(
            f"{what}: table {table.name!r} has no column {missing[0]!r}; its columns: "
            f"{', '.join(table.columns)}. Fix the declaration (cogmill add --keys/--primary-key)"
        )


def _primary_key(table: TableLike, declarations: KeyDeclarations) -> list[str]:
    decl = declarations.tables.get(table.name)
    if decl and decl.primary_key:
        _check_columns(table, [decl.primary_key], "declared primary key")
        return [decl.primary_key]
    return list(table.schema_primary_key) or infer_primary_key(table.name, table.profile)


def _references(
    table: TableLike,
    by_name: Mapping[str, TableLike],
    declarations: KeyDeclarations,
    plan: KeyPlan,
) -> list[Reference]:
    decl = declarations.tables.get(table.name)
    if decl and decl.foreign_keys:
        return [_declared(table, col, target, by_name) for col, target in decl.foreign_keys.items()]
    if table.schema_references:
        refs = []
        for spec in table.schema_references:
            target = by_name.get(spec.ref_table)
            ref_columns = list(spec.ref_columns) or plan.primary_keys.get(spec.ref_table, [])
            if target is None or spec.ref_table in plan.problems or not ref_columns:
                continue  # a table outside this dataset: nothing to point at
            refs.append(
                Reference(
                    columns=list(spec.columns),
                    ref_table=spec.ref_table,
                    ref_columns=ref_columns,
                    origin="schema",
                )
            )
        return refs
    keys = {
        name: (pk[0], plan.lookups[(name, tuple(pk))])
        for name, pk in plan.primary_keys.items()
        if len(pk) == 1 and name not in plan.problems
    }
    own = plan.primary_keys.get(table.name, [])
    return [
        Reference(
            columns=[r.column], ref_table=r.ref_table, ref_columns=[r.ref_column], origin="inferred"
        )
        for r in infer_references(table.name, table.profile, own, keys)
    ]


def _declared(
    table: TableLike, column: str, target: str, by_name: Mapping[str, TableLike]
) -> Reference:
    what = f"declared foreign key {table.name}.{column} -> {target}"
    _check_columns(table, [column], what)
    ref_table, ref_column = split_target(target, what)
    if ref_table not in by_name:
        raise KeyDeclarationError(
            f"{what}: no table {ref_table!r} in this dataset; its tables: "
            f"{', '.join(sorted(by_name))}. Add that table or fix the declaration"
        )
    _check_columns(by_name[ref_table], [ref_column], what)
    return Reference(
        columns=[column], ref_table=ref_table, ref_columns=[ref_column], origin="declared"
    )
