"""The grammar of the Cypher a tenant may send: a small read-only subset, as an allowlist.

Anything this grammar does not derive is refused before it reaches Neo4j, so what is left out
needs no rule of its own: no CALL (procedures, subqueries), UNION, USE, LOAD CSV, SHOW, write
clauses, variable-length or named paths, pattern or list comprehensions, EXISTS/COUNT/COLLECT
subqueries, quantifiers, `reduce`, regular expressions or parameters other than `$datasets`.
What it does derive is turned into a tree that retrieval/cypher_confine.py checks and writes
out again (the query Neo4j runs is written from that tree, never from the caller's text).

Only ASCII whitespace separates tokens and unquoted names are ASCII: a unicode space, a
homoglyph or an escaped character outside a string or a backticked name is a syntax error.
"""

from __future__ import annotations

from functools import cache

from lark import Lark, Tree

GRAMMAR = r"""
query: clause+
?clause: match_clause | unwind_clause | with_clause | return_clause

match_clause: OPTIONAL? MATCH pattern ("," pattern)* where_clause?
where_clause: WHERE expr
unwind_clause: UNWIND expr AS variable
with_clause: WITH DISTINCT? projection order_clause? skip_clause? limit_clause? where_clause?
return_clause: RETURN DISTINCT? projection order_clause? skip_clause? limit_clause?
projection: proj_item ("," proj_item)*
proj_item: expr (AS variable)?
order_clause: ORDER BY sort_item ("," sort_item)*
sort_item: expr SORT_DIR?
skip_clause: SKIP INT
limit_clause: LIMIT INT

pattern: node_pattern (rel_pattern node_pattern)*
node_pattern: "(" variable? node_labels? map_literal? ")"
node_labels: (":" symbol)+
rel_pattern: LT? "-" rel_detail? "-" GT?
rel_detail: "[" variable? rel_types? map_literal? "]"
rel_types: ":" symbol ("|" symbol)*

?expr: or_expr
?or_expr: xor_expr | or_expr OR xor_expr -> bool_op
?xor_expr: and_expr | xor_expr XOR and_expr -> bool_op
?and_expr: not_expr | and_expr AND not_expr -> bool_op
?not_expr: comparison | NOT not_expr -> not_op
?comparison: predicate | comparison COMP_OP predicate -> binary
         | comparison LT predicate -> binary
         | comparison GT predicate -> binary
?predicate: add_expr
         | add_expr IS NULL -> is_null
         | add_expr IS NOT NULL -> is_not_null
         | add_expr IN add_expr -> in_op
         | add_expr STARTS WITH add_expr -> starts_with
         | add_expr ENDS WITH add_expr -> ends_with
         | add_expr CONTAINS add_expr -> contains
?add_expr: mul_expr | add_expr ADD_OP mul_expr -> binary
         | add_expr "-" mul_expr -> minus
?mul_expr: unary | mul_expr MUL_OP unary -> binary
         | mul_expr "*" unary -> times
?unary: postfix | "-" unary -> negate
?postfix: atom
        | postfix "." symbol -> property
        | postfix "[" expr "]" -> index
        | postfix "[" expr? RANGE expr? "]" -> slice
?atom: literal | parameter | variable | call | count_star | "(" expr ")"
     | list_literal | map_literal | case_expr | map_projection

call: fname "(" DISTINCT? (expr ("," expr)*)? ")"
    | COUNT "(" DISTINCT? expr ")" -> count_call
count_star: COUNT "(" "*" ")"
fname: NAME | QUOTED_NAME
list_literal: "[" (expr ("," expr)*)? "]"
map_literal: "{" (map_entry ("," map_entry)*)? "}"
map_entry: symbol ":" expr
map_projection: variable "{" proj_entry ("," proj_entry)* "}"
?proj_entry: "." symbol -> proj_property
           | "." "*" -> proj_all
           | symbol ":" expr -> proj_entry
case_expr: CASE expr? case_when+ (ELSE expr)? END
case_when: WHEN expr THEN expr

literal: STRING -> string | INT -> integer | FLOAT -> float
       | TRUE -> true | FALSE -> false | NULL -> null
parameter: "$" NAME
variable: symbol
symbol: NAME | QUOTED_NAME | COUNT

OPTIONAL.2: /optional\b/i
MATCH.2: /match\b/i
WHERE.2: /where\b/i
UNWIND.2: /unwind\b/i
AS.2: /as\b/i
WITH.2: /with\b/i
RETURN.2: /return\b/i
DISTINCT.2: /distinct\b/i
ORDER.2: /order\b/i
BY.2: /by\b/i
SKIP.2: /skip\b/i
LIMIT.2: /limit\b/i
SORT_DIR.2: /(ascending|asc|descending|desc)\b/i
OR.2: /or\b/i
XOR.2: /xor\b/i
AND.2: /and\b/i
NOT.2: /not\b/i
IS.2: /is\b/i
NULL.2: /null\b/i
IN.2: /in\b/i
STARTS.2: /starts\b/i
ENDS.2: /ends\b/i
CONTAINS.2: /contains\b/i
CASE.2: /case\b/i
WHEN.2: /when\b/i
THEN.2: /then\b/i
ELSE.2: /else\b/i
END.2: /end\b/i
TRUE.2: /true\b/i
FALSE.2: /false\b/i
COUNT.2: /count\b/i

COMP_OP: "=" | "<>" | "<=" | ">="
LT: "<"
GT: ">"
ADD_OP: "+"
MUL_OP: "/" | "%" | "^"
RANGE: ".."
NAME: /[A-Za-z_][A-Za-z0-9_]*/
QUOTED_NAME: /`(?:[^`\\\x00-\x1f]|``)+`/
STRING: /'(?:[^'\\\x00-\x1f]|\\.)*'/ | /"(?:[^"\\\x00-\x1f]|\\.)*"/
FLOAT: /[0-9]+\.[0-9]+(?:[eE][+-]?[0-9]+)?/ | /[0-9]+[eE][+-]?[0-9]+/
INT: /[0-9]+/

COMMENT: /\/\/[^\n]*/ | /\/\*(?:[^*]|\*(?!\/))*\*\//
%ignore /[ \t\r\n]+/
%ignore COMMENT
"""

# Words that Cypher reads as keywords somewhere: a name spelled like one is written backticked.
_KEYWORD_TEXT = """
    all and any as asc ascending by call case contains count create delete desc descending
    detach distinct else end ends exists false foreach in is limit load match merge none not
    null on optional or order remove return set single skip starts then true union unwind use
    when where with xor yield"""
KEYWORDS = frozenset(_KEYWORD_TEXT.split())


@cache
def parser() -> Lark:
    """The LALR parser of the subset (built once: ~50 ms)."""
    return Lark(GRAMMAR, start="query", parser="lalr", propagate_positions=True)


def parse(query: str) -> Tree:
    """The query's tree; lark's UnexpectedInput where the subset does not derive it."""
    return parser().parse(query)
