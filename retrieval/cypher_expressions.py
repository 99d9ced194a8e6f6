"""Expressions of the confined Cypher subset, checked and written out (retrieval/cypher_confine.py
writes the clauses and patterns around them).

Each row's work stays bounded: Neo4j stops a timed-out query between rows but never inside one
expression, so only functions on the allowlist run, aggregates only at the top of a projection,
`collect` is cut to COLLECT_MAX items, and every string literal becomes a parameter.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from lark import Token, Tree

from core.errors import InvalidInput
from retrieval.cypher_subset import KEYWORDS

SCOPE_PARAM = "datasets"
COLLECT_MAX = 1000
AGGREGATES = frozenset({"count", "collect", "sum", "avg", "min", "max"})
# name (lower case) -> (the name written out, fewest and most arguments)
FUNCTIONS: dict[str, tuple[str, int, int]] = {
    name.lower(): (name, low, high)
    for name, low, high in (
        ("size", 1, 1),
        ("toLower", 1, 1),
        ("toUpper", 1, 1),
        ("trim", 1, 1),
        ("ltrim", 1, 1),
        ("rtrim", 1, 1),
        ("left", 2, 2),
        ("right", 2, 2),
        ("substring", 2, 3),
        ("split", 2, 2),
        ("toString", 1, 1),
        ("toInteger", 1, 1),
        ("toFloat", 1, 1),
        ("toBoolean", 1, 1),
        ("coalesce", 1, 8),
        ("labels", 1, 1),
        ("type", 1, 1),
        ("keys", 1, 1),
        ("properties", 1, 1),
        ("head", 1, 1),
        ("last", 1, 1),
        ("abs", 1, 1),
        ("ceil", 1, 1),
        ("floor", 1, 1),
        ("round", 1, 3),
        ("sign", 1, 1),
        ("sqrt", 1, 1),
    )
}
WHY_NOT = {
    "id": "node and relationship ids are not in the subset; match by properties",
    "elementid": "node and relationship ids are not in the subset; match by properties",
    "startnode": "startNode/endNode are not in the subset; name both ends in the pattern",
    "endnode": "startNode/endNode are not in the subset; name both ends in the pattern",
    "nodes": "paths are not in the subset; name the nodes in the pattern",
    "relationships": "paths are not in the subset; name the relationships in the pattern",
    "length": "paths are not in the subset; use size() of a string or list",
    "range": "range() loops inside one row, where Neo4j's timeout cannot stop it",
    "reduce": "reduce() loops inside one row, where Neo4j's timeout cannot stop it",
    "exists": "EXISTS is not in the subset; use OPTIONAL MATCH and IS NOT NULL",
}
SUBSET = (
    "the subset is MATCH / OPTIONAL MATCH with node and relationship patterns (no variable "
    "length, no named paths), WHERE, WITH, UNWIND, RETURN, ORDER BY, SKIP and LIMIT, the only "
    "parameter $datasets, and the functions "
    + ", ".join(sorted([*AGGREGATES, *(f[0] for f in FUNCTIONS.values())]))
)
PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)", re.S)
MAX_INT = 2**63 - 1


class CypherScopeError(InvalidInput):
    """The query is outside the subset a tenant may run (what and why is in the message)."""

    code = "cypher_out_of_scope"


def name(text: str) -> str:
    """A name written out: plain when it is a plain name and no keyword, else backticked."""
    if PLAIN_NAME.fullmatch(text) and text.lower() not in KEYWORDS:
        return text
    return "`" + text.replace("`", "``") + "`"


def symbol(tree: Tree) -> str:
    token: Any = tree.children[0]
    text = str(token)
    return text[1:-1].replace("``", "`") if token.type == "QUOTED_NAME" else text


def _string(token: str) -> str:
    body = token[1:-1]

    def unescape(match: re.Match[str]) -> str:
        code = match.group(1)
        if code[0] in "uU" and len(code) > 1:
            return chr(int(code[1:], 16))
        if code not in _ESCAPES:
            raise CypherScopeError(f"unknown escape \\{code} in the string {token[:40]}")
        return _ESCAPES[code]

    return _ESCAPE.sub(unescape, body)


def trees(tree: Tree) -> Iterator[Tree]:
    return (c for c in tree.children if isinstance(c, Tree))


@dataclass
class ExpressionWriter:
    """Writes checked expressions out; string literals go to `params`."""

    params: dict[str, Any] = field(default_factory=dict)

    def variable(self, tree: Tree) -> str:
        return name(symbol(tree.children[0]))

    # -- expressions --------------------------------------------------------------------------
    def expr(self, node: Tree, top: bool = False) -> str:
        kind = node.data
        kids = list(node.children)
        sub = [c for c in kids if isinstance(c, Tree)]
        ops = [str(c).upper() for c in kids if isinstance(c, Token)]
        if kind in ("call", "count_call", "count_star"):
            return self.call(node, top)
        if kind in ("bool_op", "binary"):
            return f"({self.expr(sub[0])} {ops[0]} {self.expr(sub[1])})"
        simple = {"minus": "-", "times": "*", "in_op": "IN", "contains": "CONTAINS"}
        simple |= {"starts_with": "STARTS WITH", "ends_with": "ENDS WITH"}
        if kind in simple:
            return f"({self.expr(sub[0])} {simple[kind]} {self.expr(sub[1])})"
        if kind == "not_op":
            return f"(NOT {self.expr(sub[0])})"
        if kind in ("is_null", "is_not_null"):
            return f"({self.expr(sub[0])} IS {'NOT ' if kind == 'is_not_null' else ''}NULL)"
        if kind == "negate":
            return f"(- {self.expr(sub[0])})"
        if kind == "property":
            return f"{self.expr(sub[0])}.{name(symbol(sub[1]))}"
        if kind == "index":
            return f"{self.expr(sub[0])}[{self.expr(sub[1])}]"
        if kind == "slice":
            at = next(i for i, c in enumerate(kids) if isinstance(c, Token) and c.type == "RANGE")
            low = self.expr(kids[at - 1]) if at > 1 else ""
            high = self.expr(kids[at + 1]) if at + 1 < len(kids) else ""
            return f"{self.expr(sub[0])}[{low}..{high}]"
        if kind == "variable":
            return self.variable(node)
        if kind == "parameter":
            if str(kids[0]) != SCOPE_PARAM:
                raise CypherScopeError(f"refused: the only parameter is ${SCOPE_PARAM}")
            return f"${SCOPE_PARAM}"
        if kind == "list_literal":
            return "[" + ", ".join(self.expr(c) for c in sub) + "]"
        if kind == "map_literal":
            entries = (f"{name(symbol(e.children[0]))}: {self.expr(e.children[1])}" for e in sub)
            return "{" + ", ".join(entries) + "}"
        if kind == "map_projection":
            return self.variable(sub[0]) + " {" + ", ".join(self.entry(e) for e in sub[1:]) + "}"
        if kind == "case_expr":
            return self.case(node)
        return self.literal(node)

    def entry(self, tree: Tree) -> str:
        if tree.data == "proj_all":
            return ".*"
        if tree.data == "proj_property":
            return "." + name(symbol(tree.children[0]))
        return f"{name(symbol(tree.children[0]))}: {self.expr(tree.children[1])}"

    def case(self, tree: Tree) -> str:
        text, after_else = "CASE", False
        for child in tree.children:
            if isinstance(child, Token):
                after_else = after_else or child.type == "ELSE"
                continue
            if child.data == "case_when":
                when, then = child.children[1], child.children[3]
                text += f" WHEN {self.expr(when)} THEN {self.expr(then)}"
            else:
                text += f" ELSE {self.expr(child)}" if after_else else f" {self.expr(child)}"
        return f"({text} END)"

    def call(self, tree: Tree, top: bool) -> str:
        star = tree.data == "count_star"
        first: Any = tree.children[0]
        name = "count" if tree.data != "call" else symbol(first)
        distinct = any(isinstance(c, Token) and c.type == "DISTINCT" for c in tree.children)
        args = [c for c in tree.children[1:] if isinstance(c, Tree)]
        lowered = name.lower()
        if lowered in AGGREGATES:
            if not top:
                raise CypherScopeError(
                    f"refused: {name}() may only be a whole RETURN or WITH item (e.g. "
                    f"`{lowered}(x) AS n`), not inside another expression"
                )
            if len(args) != (0 if star else 1):
                raise CypherScopeError(f"refused: {name}() takes one argument")
            if not star and any(True for _ in aggregates(args[0])):
                raise CypherScopeError(f"refused: an aggregate inside {name}()")
            inner = "*" if star else self.expr(args[0])
            text = f"{lowered}({'DISTINCT ' if distinct else ''}{inner})"
            return f"{text}[..{COLLECT_MAX}]" if lowered == "collect" else text
        if lowered in WHY_NOT:
            raise CypherScopeError(f"refused: {name}(): {WHY_NOT[lowered]}")
        if lowered not in FUNCTIONS:
            raise CypherScopeError(
                f"refused: function {name[:60]}() is not in the subset; {SUBSET}"
            )
        shown, low, high = FUNCTIONS[lowered]
        if distinct or not low <= len(args) <= high:
            raise CypherScopeError(f"refused: {shown}() takes {low} to {high} arguments")
        return f"{shown}(" + ", ".join(self.expr(a) for a in args) + ")"

    def literal(self, tree: Tree) -> str:
        kind, token = tree.data, (str(tree.children[0]) if tree.children else "")
        if kind == "string":
            key = f"s{len(self.params)}"
            self.params[key] = _string(token)
            return f"${key}"
        if kind == "integer":
            if int(token) > MAX_INT:
                raise CypherScopeError(f"refused: the integer {token[:30]} is too large")
            return str(int(token))
        if kind == "float":
            value = float(token)
            if not math.isfinite(value):
                raise CypherScopeError(f"refused: the number {token[:30]} is not finite")
            return repr(value)
        words = {"true": "true", "false": "false", "null": "null"}
        if kind in words:
            return words[kind]
        raise CypherScopeError(f"refused: {kind} is not in the subset")


def aggregates(tree: Tree) -> Iterator[Tree]:
    for node in tree.iter_subtrees():
        counted = node.data in ("count_call", "count_star")
        if counted or (node.data == "call" and symbol(node.children[0]).lower() in AGGREGATES):
            yield node
