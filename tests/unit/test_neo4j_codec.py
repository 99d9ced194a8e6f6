"""The Neo4j graph store's stored forms (core/stores/neo4j/codec.py) without a server."""

from __future__ import annotations

import json
import random

from core.models.graph import Support
from core.stores.neo4j import codec as codec
from core.stores.neo4j.connection import Rows

# Characters JSON escapes (quote, backslash, controls) beside ones it keeps as they are.
ALPHABET = [
    "a",
    "Z",
    "0",
    "-",
    ",",
    " ",
    '"',
    "\\",
    "\n",
    "\t",
    "\x00",
    "\x1f",
    "\x7f",
    "é",
    "北",
    "\u2028",
    "\x85",
    "/",
]


def test_strings_is_the_json_of_the_list_for_any_ids() -> None:
    # Support pairs and keys are matched as stored text (purges find a document's pairs by
    # their JSON prefix), so the fast join must give exactly the encoder's text.
    rng = random.Random(7)
    for _ in range(50_000):
        values = [
            "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 5)))
            for _ in range(rng.randint(1, 3))
        ]
        want = json.dumps(values, separators=(",", ":"), ensure_ascii=False)
        assert codec.strings(*values) == codec.to_json(values) == want, values


def test_a_pair_reads_back_whatever_its_ids_hold() -> None:
    for doc, chunk in [("d-1", "c-1"), ('d"1', "c\\1"), ("d,1", 'c","x'), ("", "北\n")]:
        stored = codec.pair(Support(document_id=doc, chunk_id=chunk))
        assert json.loads(stored) == [doc, chunk]
        assert codec.support({"_support": [stored]}) == [Support(document_id=doc, chunk_id=chunk)]


def test_rows_are_the_list_with_a_repr_of_their_length() -> None:
    # The driver reprs every RUN's parameters (debug logging on or off): write rows carrying
    # 384-d vectors and chunk texts go as Rows, whose repr does not format them.
    rows = [{"id": "a", "vector": [0.5] * 384}, {"id": "b", "vector": [0.25] * 384}]
    wrapped = Rows(rows)
    assert wrapped == rows and isinstance(wrapped, list)
    assert repr({"rows": wrapped}) == "{'rows': <2 rows>}"
