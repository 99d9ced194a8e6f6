"""The read-only filter in front of CYPHER and NATURAL_LANGUAGE (the first of two walls).

The query is tokenised the way Cypher reads it: strings ('...' and "..." with backslash
escapes), backticked names (`` `a``b` ``), `//` comments ended by any line terminator (\\n, \\r,
\\u2028, ... — a comment ended by \\r once hid a CREATE), `/* */` comments and parameters. On
those tokens:
- the query must start with a read clause (MATCH, OPTIONAL MATCH, WITH, UNWIND, RETURN, CALL);
- no bare word may be a write or administration keyword (CREATE, SET, SHOW, USE, ...), except
  as a property key, label, parameter or map key;
- CALL of a procedure is refused unless the procedure (its name parts joined, backticks or not)
  is in READ_PROCEDURES; CALL { ... } and CALL (x) { ... } subqueries are read on as above;
- a namespaced function (`ns.f(...)`) must be a built-in one (FUNCTION_NAMESPACES);
- one statement only.
What passes runs in a READ access-mode transaction, so the server refuses what this missed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from core.errors import InvalidInput

# Every character Neo4j or Python may treat as ending a line (and so a // comment).
_LINE_END = "\n\r\x0b\x0c\x85\u2028\u2029"
_TOKEN = re.compile(
    r"(?P<space>\s+)"
    rf"|(?P<line_comment>//[^{_LINE_END}]*)"
    r"|(?P<block_comment>/\*.*?\*/)"
    r"|(?P<string>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")"
    r"|(?P<name>`(?:[^`]|``)*`)"
    r"|(?P<number>\d+)"  # digits only: `1CREATE` must not hide a word inside a number
    r"|(?P<word>[^\W\d]\w*)"
    r"|(?P<symbol>.)",
    re.S,
)
READ_STARTS = frozenset({"MATCH", "OPTIONAL", "WITH", "UNWIND", "RETURN", "CALL"})
# Words that start a clause or command that writes, administers or leaves the database.
DENIED = frozenset(
    {
        "CREATE",
        "MERGE",
        "SET",
        "DELETE",
        "DETACH",
        "NODETACH",
        "REMOVE",
        "FOREACH",
        "LOAD",
        "INSERT",
        "USE",
        "SHOW",
        "TERMINATE",
        "GRANT",
        "DENY",
        "REVOKE",
        "ALTER",
        "DROP",
        "RENAME",
        "START",
        "STOP",
        "ENABLE",
        "IMPERSONATE",
        "TRANSACTIONS",
        "PERIODIC",
    }
)
_SHOWN_AS = {"LOAD": "LOAD CSV", "TRANSACTIONS": "IN TRANSACTIONS", "DETACH": "DETACH DELETE"}
READ_PROCEDURES = frozenset(
    {
        "db.labels",
        "db.relationshiptypes",
        "db.propertykeys",
        "db.schema.visualization",
        "db.schema.nodetypeproperties",
        "db.schema.reltypeproperties",
        "db.index.fulltext.querynodes",
        "db.index.fulltext.queryrelationships",
        "db.index.vector.querynodes",
        "db.info",
        "dbms.components",
    }
)
# Namespaces of Neo4j's built-in functions; a plugin's (apoc.*, gds.*) may run Cypher or I/O.
FUNCTION_NAMESPACES = frozenset(
    {"db", "vector", "point", "date", "datetime", "localdatetime", "localtime", "time", "duration"}
)


class ReadOnlyViolation(InvalidInput):
    """The query would write, or calls a procedure that is not known to be read-only."""

    code = "cypher_not_read_only"


class InvalidCypher(InvalidInput):
    """The query is empty, or only comments."""

    code = "invalid_cypher"


@dataclass(frozen=True)
class Token:
    """One significant token: its kind (word, name, string, number, symbol) and text."""

    kind: str
    text: str

    @property
    def part(self) -> str:
        """The name this token gives in a dotted name (a backticked name without quotes)."""
        return self.text[1:-1].replace("``", "`") if self.kind == "name" else self.text


def tokenize(query: str) -> list[Token]:
    """The query's significant tokens (no spaces or comments); ReadOnlyViolation when a
    string, backticked name or /* comment is not closed."""
    tokens: list[Token] = []
    for match in _TOKEN.finditer(query):
        kind, text = match.lastgroup or "symbol", match.group()
        if kind == "symbol" and (text in "'\"`" or query.startswith("/*", match.start())):
            what = "/* comment" if text == "/" else "backticked name" if text == "`" else "string"
            raise ReadOnlyViolation(
                f"refused: the query has an unclosed {what} at character {match.start()}; close it"
            )
        if kind not in ("space", "line_comment", "block_comment"):
            tokens.append(Token(kind, text))
    return tokens


def check_read_only(query: str) -> str:
    """The query when it is read-only; ReadOnlyViolation naming the offending part otherwise."""
    if not query.strip():
        raise InvalidCypher("the Cypher query is empty; pass a MATCH ... RETURN query")
    tokens = tokenize(query)
    if not tokens:
        raise InvalidCypher("the Cypher query is only comments; pass a MATCH ... RETURN query")
    for i, token in enumerate(tokens):
        if token.kind == "symbol" and token.text == ";" and i < len(tokens) - 1:
            raise ReadOnlyViolation("refused: one statement per query (no ';' between two)")
        if token.kind not in ("word", "name") or _not_a_keyword(tokens, i):
            continue
        word = token.text.upper() if token.kind == "word" else ""
        if word in DENIED:
            raise ReadOnlyViolation(
                f"refused: the query uses {_SHOWN_AS.get(word, word)}, which writes or "
                "administers the database; CYPHER runs read-only queries only (MATCH ... RETURN)"
            )
        if word == "CALL":
            _check_procedure(tokens, i + 1)
        elif _next_is(tokens, i, ".") and not _after_call(tokens, i):
            _check_function(tokens, i)
    first = tokens[0]
    if first.kind != "word" or first.text.upper() not in READ_STARTS:
        raise ReadOnlyViolation(
            f"refused: the query starts with {first.text[:40]!r}; CYPHER runs read-only queries "
            f"that start with {', '.join(sorted(READ_STARTS))}"
        )
    return query


def _after_call(tokens: list[Token], i: int) -> bool:
    """The word starts a procedure name (checked by `_check_procedure`)."""
    return i > 0 and tokens[i - 1].kind == "word" and tokens[i - 1].text.upper() == "CALL"


def _not_a_keyword(tokens: list[Token], i: int) -> bool:
    """A word after '.', ':' or '$' (property, label, parameter) or before ':' (map key)."""
    if tokens[i].kind == "name":
        return tokens[i - 1].text == "." if i else False  # backticked: never a keyword
    before = tokens[i - 1] if i else None
    if before is not None and before.kind == "symbol" and before.text in ".:$":
        # `1.CREATE` is not a property access: the word after a number's dot stays a word.
        return not (before.text == "." and i >= 2 and tokens[i - 2].kind == "number")
    return _next_is(tokens, i, ":")


def _next_is(tokens: list[Token], i: int, symbol: str) -> bool:
    return i + 1 < len(tokens) and tokens[i + 1].kind == "symbol" and tokens[i + 1].text == symbol


def _dotted(tokens: list[Token], start: int) -> tuple[str, int]:
    """The dotted name starting at `start` (words or backticked names) and the index after it."""
    parts, i = [], start
    while i < len(tokens) and tokens[i].kind in ("word", "name"):
        parts.append(tokens[i].part)
        if not _next_is(tokens, i, "."):
            i += 1
            break
        i += 2
    return ".".join(parts), i


def _check_procedure(tokens: list[Token], start: int) -> None:
    """CALL of a subquery passes (its body is checked as part of the query); a procedure
    must be on the allowlist, compared by its full name however it is quoted."""
    if start < len(tokens) and tokens[start].text in ("{", "("):
        return  # CALL { ... } or CALL (x) { ... }: a subquery
    name, _ = _dotted(tokens, start)
    name = name or (tokens[start].text if start < len(tokens) else "(none)")
    if name.lower() not in READ_PROCEDURES:
        allowed = ", ".join(sorted(READ_PROCEDURES))
        raise ReadOnlyViolation(
            f"refused: procedure {name[:80]} is not known to be read-only; CYPHER may call: "
            f"{allowed}"
        )


def _check_function(tokens: list[Token], start: int) -> None:
    """A namespaced name followed by '(' is a function call: built-in namespaces only."""
    if start and tokens[start - 1].kind == "symbol" and tokens[start - 1].text == ".":
        return  # the middle of a dotted name already checked from its first part
    name, after = _dotted(tokens, start)
    called = after < len(tokens) and tokens[after].text == "("
    if called and name.split(".", 1)[0].lower() not in FUNCTION_NAMESPACES:
        raise ReadOnlyViolation(
            f"refused: function {name[:80]} is not a built-in Neo4j function; CYPHER may call "
            f"functions of: {', '.join(sorted(FUNCTION_NAMESPACES))}"
        )
