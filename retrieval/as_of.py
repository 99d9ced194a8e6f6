"""The query router's as-of cue: a question about a fact at a time ("Who was the CEO of
Holbeck Foods in 2020?", "Where did Ana live in March 2019?", "Which company employed Jon
as of 2018?"). Such a question is searched as of that time (retrieval/fact_view.py) by the
graph search, where a question whose subject is a time ("what happened in 2019") goes to
TEMPORAL and one without a time sees current facts.
"""

from __future__ import annotations

import re

from core.time_expressions import find_spans

# A question asking for a value (who, what, where, which, whose) and what it is about.
_FACT_QUESTION = re.compile(r"^\W*(?:who|whom|whose|what|where|which)\b", re.IGNORECASE)
# Words before a time that make it the time of the fact asked about.
_AT_TIME = re.compile(
    r"\b(?:in|as of|during|on|at the (?:start|end) of|by|back in|around|since|until)"
    r"\s+(?:the\s+)?$",
    re.IGNORECASE,
)
MAX_QUERY = 1000
_BEFORE = re.compile(r"\b(?:in|as of|during|on|by|back in|around|at the (?:start|end) of)")


def fact_time(query: str) -> str | None:
    """The time a question asks a fact at, as written ("2020", "march 2019"), or None."""
    if not _FACT_QUESTION.search(query):
        return None
    text = query[:MAX_QUERY]
    lowered = text.lower()
    searched = 0
    for span in find_spans(text, bare_years=True):
        at = lowered.find(span.text, searched)
        if at < 0 or span.start is None and span.end is None:
            continue
        searched = at + len(span.text)
        if _AT_TIME.search(lowered[max(0, at - 30) : at]) or span.text.startswith(("in ", "as of")):
            return span.text
    return None


def without_time(query: str, time: str) -> str:
    """The question without the time it asks a fact at ("Who was the CEO of X in 2019?" ->
    "Who was the CEO of X?"): the time selects facts, it is not what they are about."""
    pattern = rf"\s*(?:{_BEFORE.pattern}\s+)?\b{re.escape(time.strip())}\b"
    found = re.sub(pattern, "", query, count=1, flags=re.IGNORECASE)
    return found if found.strip() else query
