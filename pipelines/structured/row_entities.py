"""Table rows as graph citizens: the entity a row names, linked to it by MENTIONS.

A row's name cells (a `name`, `title` or `label` column, or `<table>_name`) and its primary key
when that holds words rather than codes (a table keyed by names) name what the row is about.
Each such value becomes an Entity keyed like the extractor's (`entity_id(dataset, name)`), so a
bio that names "Orvik Optics" and the supplier row whose name is "Orvik Optics" share one entity
node and graph search walks from the bio to the row (and on through the row's REFERENCES). The
entity IS_A the table's singular name ("suppliers" -> "supplier"); its support is the row, so
deleting the table's file removes what only the row supported.

Only the row's own columns count, never a cell that happens to equal some name elsewhere: what
a row links to must not depend on which documents were cognified before it.
"""

from __future__ import annotations

import re
from collections.abc import Container, Sequence

from core.models.graph import Edge, Node, Support, entity_id, entity_type_id, normalise_name
from core.models.vocabulary import ENTITY, ENTITY_COLLECTION, ENTITY_TYPE, IS_A, MENTIONS
from pipelines.built_graph import BuiltGraph, EmbedItem
from pipelines.structured.foreign_keys import ColumnProfile, id_like, singular

NAME_COLUMNS = frozenset({"name", "title", "label"})
MAX_NAME_CHARS = 120  # a longer cell is prose (a description), not a name
_NUMBER = re.compile(r"^[-+]?[\d.,:/ ]+%?$")  # amounts, dates written in digits, times
_SEPARATORS = re.compile(r"[\s_\-]+")


def name_columns(table: str, columns: Sequence[ColumnProfile], primary_key: list[str]) -> list[str]:
    """The columns whose values name what a row of `table` is about, in table order."""
    own = {f"{singular(table)} name", f"{table.lower()} name"}
    found = []
    for col in columns:
        words = _SEPARATORS.sub(" ", col.name.lower()).strip()
        if words in NAME_COLUMNS or words in own:
            found.append(col.name)
        elif [col.name] == primary_key and not id_like(col.name) and _words(col.sample):
            found.append(col.name)  # a table keyed by names ("country", "team"), not codes
    return found


def _words(values: Sequence[str]) -> bool:
    """Whether sampled key values read as names: no digits ("P1", "978-0-14", "2019" are codes)."""
    return bool(values) and not any(ch.isdigit() for value in values for ch in value)


def name_value(value: str) -> str | None:
    """A cell as an entity name, or None when it names nothing (empty, a number, prose)."""
    name = " ".join(value.split())
    if len(name) > MAX_NAME_CHARS or _NUMBER.match(name):
        return None
    key = normalise_name(name)
    return name if sum(ch.isalnum() for ch in key) >= 2 else None


def add_row_entities(
    built: BuiltGraph,
    dataset: str,
    table: str,
    row: dict[str, str],
    columns: Sequence[str],
    support: list[Support],
    embedded: Container[str] = (),
) -> list[str]:
    """Entity nodes for a row's name cells, MENTIONS edges from the row (`support`'s chunk) and
    the names to embed (but those `embedded` already); returns the entity ids."""
    row_id = support[0].chunk_id
    type_name = singular(table)
    tid = entity_type_id(dataset, type_name)
    ids = []
    for column in columns:
        name = name_value(row.get(column, ""))
        if name is None:
            continue
        eid = entity_id(dataset, name)
        built.add_node(Node(id=eid, type=ENTITY, dataset=dataset, name=name, support=support))
        built.add_node(
            Node(id=tid, type=ENTITY_TYPE, dataset=dataset, name=type_name, support=support)
        )
        built.add_edge(
            Edge(source=row_id, target=eid, name=MENTIONS, dataset=dataset, support=support)
        )
        built.add_edge(Edge(source=eid, target=tid, name=IS_A, dataset=dataset, support=support))
        if eid not in embedded:
            built.embed(ENTITY_COLLECTION, EmbedItem(eid, name, {"type": ENTITY}))
        ids.append(eid)
    return ids
