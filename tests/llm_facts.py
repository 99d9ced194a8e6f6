"""Deterministic replies of the test LLM server for the fact judge's schema (FactVerdicts,
pipelines/fact_judge.py), keyed on its name.

A pair conflicts when both relations are an `EXCLUSIVE` verb and the same one ("runs" and
"runs": one runs a company at a time); other pairs do not ("visited"). The later fact is the
one whose passage names the later year (0 when neither or both say the same), and `since` is
that year. `JUDGED` counts the pairs asked, per relation name, in this process (the server is
a thread of the test's process).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

EXCLUSIVE = frozenset({"runs", "leads", "heads", "manages", "coaches", "chairs"})
_FACT = re.compile(r"^\s*Fact (\d): .*? —(\S+)→ .*?\. Passage: (.*)$")
_PAIR = re.compile(r"^Pair (\d+):$")
_YEAR = re.compile(r"\b(1\d{3}|20\d{2})\b")
JUDGED: Counter[str] = Counter()


def facts_reply(body: dict[str, Any], text: str) -> dict[str, Any] | None:
    """The FactVerdicts JSON for the judge's pairs, or None for other schemas."""
    spec = (body.get("response_format") or {}).get("json_schema") or {}
    if spec.get("name") != "FactVerdicts":
        return None
    pairs: dict[int, dict[int, tuple[str, str]]] = {}
    current = 0
    for line in text.splitlines():
        if found := _PAIR.match(line.strip()):
            current = int(found.group(1))
            pairs[current] = {}
        elif (found := _FACT.match(line)) and current:
            pairs[current][int(found.group(1))] = (found.group(2), found.group(3))
    return {"verdicts": [_verdict(n, facts) for n, facts in pairs.items() if len(facts) == 2]}


def _verdict(number: int, facts: dict[int, tuple[str, str]]) -> dict[str, Any]:
    (first, passage_1), (second, passage_2) = facts[1], facts[2]
    JUDGED[first] += 1
    years = [max(map(int, _YEAR.findall(p)), default=0) for p in (passage_1, passage_2)]
    later = 0 if years[0] == years[1] else 1 + int(years[1] > years[0])
    conflict = first == second and first in EXCLUSIVE
    since = str(max(years)) if later else ""
    return {
        "pair": number,
        "conflict": conflict,
        "later": later if conflict else 0,
        "since": since if conflict else "",
    }
