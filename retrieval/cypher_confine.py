"""Cypher confined to the searched datasets by construction (a tenant's CYPHER and
NATURAL_LANGUAGE).

The caller's text is parsed by the subset's grammar (retrieval/cypher_subset.py), checked, and
written out again from the tree: every node and relationship of every MATCH gets a variable
(a fresh one when it had none) and the MATCH's WHERE gets `v.dataset IN $datasets` for each,
so no pattern can bind anything outside the datasets, whatever the caller wrote. Neo4j runs
only the written-out text: comments, escapes and spacing of the original never reach it, every
string literal is passed as a parameter, and every name is written plainly or backticked.

Beyond the grammar, the checks keep each row's work bounded, because Neo4j stops a timed-out
query between rows but never inside one expression: no `reduce`, `range`, comprehensions or
regular expressions (the grammar has none), the expression checks of
retrieval/cypher_expressions.py, WITH passing on only variables, properties, literals and scalar
aggregates, and UNWIND only of `$datasets`, a list of literals, a variable or a property — so no
value can be doubled clause after clause.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from lark import Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from retrieval.cypher_expressions import (
    AGGREGATES,
    MAX_INT,
    SCOPE_PARAM,
    SUBSET,
    CypherScopeError,
    ExpressionWriter,
    name,
    symbol,
    trees,
)
from retrieval.cypher_subset import parse

MAX_DEPTH = 100  # of the parse tree; writing it out recurses once a level
REFUSED_WORDS = {
    "CALL": "procedures and CALL subqueries are not in the subset",
    "UNION": "UNION is not in the subset; send two queries",
    "USE": "USE is not in the subset",
    "LOAD": "LOAD CSV is not in the subset",
    "SHOW": "SHOW commands are not in the subset",
    "TERMINATE": "TERMINATE is not in the subset",
    "FOREACH": "FOREACH writes; CYPHER is read-only",
    "EXISTS": "EXISTS is not in the subset; use OPTIONAL MATCH and IS NOT NULL",
    "CYPHER": "query options are not in the subset",
    "REDUCE": "reduce() loops inside one row, where Neo4j's timeout cannot stop it",
    "EXPLAIN": "EXPLAIN is not in the subset",
    "PROFILE": "PROFILE is not in the subset",
}
REFUSED_WORDS.update(
    dict.fromkeys(
        ("CREATE", "MERGE", "SET", "DELETE", "DETACH", "REMOVE", "INSERT", "DROP", "ALTER"),
        "writes are not in the subset; CYPHER is read-only",
    )
)


@dataclass(frozen=True)
class ConfinedQuery:
    """The query Neo4j runs (written from the checked tree) and the parameters it needs
    besides `$datasets`."""

    text: str
    params: dict[str, Any]


def confine(query: str, limit: int) -> ConfinedQuery:
    """The query bound to `$datasets` and cut to `limit` rows; CypherScopeError when it is
    outside the subset."""
    if not query.strip():
        raise CypherScopeError("the Cypher query is empty; pass a MATCH ... RETURN query")
    try:
        tree = parse(query)
    except UnexpectedInput as err:
        raise CypherScopeError(_syntax_message(query, err)) from None
    if _depth(tree) > MAX_DEPTH:
        raise CypherScopeError(f"refused: expressions nest more than {MAX_DEPTH} levels deep")
    return _Writer(query, tree, limit).query()


def _syntax_message(query: str, err: UnexpectedInput) -> str:
    line: Any = err.line
    where = f"line {line}, column {err.column}" if line and line > 0 else "the end"
    if isinstance(err, UnexpectedCharacters):
        pos: Any = err.pos_in_stream
        char = query[pos] if pos is not None and pos < len(query) else ""
        if char and (not char.isascii() or not char.isprintable()):
            why = (
                f"character U+{ord(char):04X} is not allowed outside strings and backticked "
                "names (only ASCII letters, digits and spaces)"
            )
        else:
            why = f"{char!r} is not in the subset"
        return f"refused at {where}: {why}; {SUBSET}"
    if isinstance(err, UnexpectedEOF):
        return f"refused: the query ends too early; {SUBSET}"
    token = err.token if isinstance(err, UnexpectedToken) else None
    text = str(token) if token is not None else ""
    if text == "|" and re.search(r"\breduce\s*\(", query, re.IGNORECASE):
        text = "reduce"
    why = REFUSED_WORDS.get(text.upper()) or {
        "*": "variable-length relationships, `*` projections and WITH * are not in the subset",
        "|": "list and pattern comprehensions are not in the subset",
        "=": "named paths are not in the subset",
        "{": "subqueries and map projections of anything but a variable are not in the subset",
    }.get(text, f"{text[:40]!r} is not in the subset here")
    return f"refused at {where}: {why}; {SUBSET}"


class _Writer(ExpressionWriter):
    """Writes a parsed query out, clause by clause, with every pattern bound."""

    def __init__(self, source: str, tree: Tree, limit: int) -> None:
        super().__init__()
        self.source, self.tree, self.limit = source, tree, limit
        self.fresh = 0
        self.used = {symbol(t) for t in tree.find_data("symbol")}

    def query(self) -> ConfinedQuery:
        clauses = list(trees(self.tree))
        kinds = [c.data for c in clauses]
        if kinds[-1] != "return_clause" or "return_clause" in kinds[:-1]:
            raise CypherScopeError("refused: the query must end with its one RETURN clause")
        parts = [getattr(self, c.data)(c) for c in clauses]
        return ConfinedQuery(" ".join(parts), self.params)

    # -- clauses ------------------------------------------------------------------------------
    def match_clause(self, tree: Tree) -> str:
        optional = any(isinstance(c, Token) and c.type == "OPTIONAL" for c in tree.children)
        bound: list[str] = []
        patterns = [self.pattern(p, bound) for p in trees(tree) if p.data == "pattern"]
        where = [self.expr(w.children[1]) for w in trees(tree) if w.data == "where_clause"]
        scope = [f"{v}.dataset IN ${SCOPE_PARAM}" for v in dict.fromkeys(bound)]
        condition = " AND ".join(f"({c})" for c in [*where, *scope])
        head = "OPTIONAL MATCH" if optional else "MATCH"
        return f"{head} {', '.join(patterns)} WHERE {condition}"

    def unwind_clause(self, tree: Tree) -> str:
        value, variable = list(trees(tree))
        if not _passed_on(value, unwind=True):
            raise CypherScopeError(
                "refused: UNWIND takes $datasets, a list of literals, a variable or a property "
                "(a computed list could grow clause after clause)"
            )
        return f"UNWIND {self.expr(value)} AS {self.variable(variable)}"

    def with_clause(self, tree: Tree) -> str:
        for item in tree.find_data("proj_item"):
            value = item.children[0]
            if not _passed_on(value):
                raise CypherScopeError(
                    "refused: WITH passes on variables, properties, literals and count, sum, "
                    "avg, min or max of them; compute in RETURN (a computed value could grow "
                    "clause after clause)"
                )
        return "WITH " + self.projection_tail(tree, final=False)

    def return_clause(self, tree: Tree) -> str:
        return "RETURN " + self.projection_tail(tree, final=True)

    def projection_tail(self, tree: Tree, final: bool) -> str:
        distinct = any(isinstance(c, Token) and c.type == "DISTINCT" for c in tree.children)
        text = "DISTINCT " if distinct else ""
        parts = {t.data: t for t in trees(tree)}
        text += ", ".join(self.proj_item(i) for i in trees(parts["projection"]))
        if "order_clause" in parts:
            text += " ORDER BY " + ", ".join(
                self.expr(s.children[0])
                + (f" {str(s.children[1]).upper()}" if len(s.children) > 1 else "")
                for s in trees(parts["order_clause"])
            )
        if "skip_clause" in parts:
            text += f" SKIP {self.count(parts['skip_clause'])}"
        limit = self.count(parts["limit_clause"]) if "limit_clause" in parts else None
        if final:
            limit = self.limit if limit is None else min(limit, self.limit)
        if limit is not None:
            text += f" LIMIT {limit}"
        if "where_clause" in parts:
            text += " WHERE " + self.expr(parts["where_clause"].children[1])
        return text

    def count(self, tree: Tree) -> int:
        value = int(str(tree.children[1]))
        if value > MAX_INT:
            raise CypherScopeError(f"refused: {value} is too large for SKIP or LIMIT")
        return value

    def proj_item(self, tree: Tree) -> str:
        """An item, keeping the column name the caller's text gives it."""
        value = tree.children[0]
        text = self.expr(value, top=True)
        variables = [c for c in trees(tree) if c.data == "variable" and c is not value]
        if variables:
            return f"{text} AS {self.variable(variables[-1])}"
        if value.data == "variable":
            return text
        # The column keeps the name the caller wrote (its text, one line, no backslash).
        shown = " ".join(self.source[value.meta.start_pos : value.meta.end_pos].split())
        shown = re.sub(r"[^\x20-\x7e]|\\", "?", shown)[:200]
        return text if shown == text else f"{text} AS {name(shown)}"

    # -- patterns -----------------------------------------------------------------------------
    def pattern(self, tree: Tree, bound: list[str]) -> str:
        return "".join(
            self.node(part, bound) if part.data == "node_pattern" else self.rel(part, bound)
            for part in trees(tree)
        )

    def binder(self, tree: Tree, bound: list[str]) -> str:
        found = [c for c in trees(tree) if c.data == "variable"]
        if found:
            name = self.variable(found[0])
        else:
            while f"anon_{self.fresh}" in self.used:
                self.fresh += 1
            name, self.fresh = f"anon_{self.fresh}", self.fresh + 1
        bound.append(name)
        return name

    def node(self, tree: Tree, bound: list[str]) -> str:
        text = self.binder(tree, bound)
        for part in trees(tree):
            if part.data == "node_labels":
                text += "".join(":" + name(symbol(s)) for s in trees(part))
            elif part.data == "map_literal":
                text += " " + self.expr(part)
        return f"({text})"

    def rel(self, tree: Tree, bound: list[str]) -> str:
        tokens = {c.type for c in tree.children if isinstance(c, Token)}
        detail = next(trees(tree), None)
        text = self.binder(detail if detail is not None else Tree("rel_detail", []), bound)
        for part in trees(detail) if detail is not None else ():
            if part.data == "rel_types":
                text += ":" + "|".join(name(symbol(s)) for s in trees(part))
            elif part.data == "map_literal":
                text += " " + self.expr(part)
        left, right = ("<-" if "LT" in tokens else "-"), ("->" if "GT" in tokens else "-")
        return f"{left}[{text}]{right}"


def _depth(tree: Tree) -> int:
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((c, depth + 1) for c in trees(node))
    return deepest


def _passed_on(value: Tree, unwind: bool = False) -> bool:
    """Whether a WITH item (or an UNWIND list) is one of the values that cannot grow."""
    kind = value.data
    if kind in ("variable", "parameter"):
        return True
    if kind == "property":
        return value.children[0].data in ("variable", "property")
    if kind == "list_literal":
        return all(
            c.data in ("string", "integer", "float", "true", "false", "null") for c in trees(value)
        )
    if unwind:
        return False
    if kind in ("string", "integer", "float", "true", "false", "null", "count_star"):
        return True
    if kind in ("call", "count_call"):
        name = "count" if kind == "count_call" else symbol(value.children[0]).lower()
        args = [c for c in trees(value)][(0 if kind == "count_call" else 1) :]
        return name in AGGREGATES and name != "collect" and all(_passed_on(a) for a in args)
    return False
