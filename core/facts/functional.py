"""Which relations are functional (a subject holds one value at a time), and which end facts.

Three sources, the first that knows a relation name wins: a custom graph model's edge classes
marked `"functional": true` (core/models/graph_schema.py), an ontology's properties typed
owl:FunctionalProperty (the source holds one value) or owl:InverseFunctionalProperty (the
target does), and the default list below, matched on the name's stemmed words, so that
"ceo_of", "became_ceo_of" and "chief_executive_of" meet in one group. Relation names come
from any extractor ("works_for", "WORKS_FOR", "employed by").

A relation whose name says a fact ended ("left", "resigned_from", "divorced") is an ENDS fact:
its claims end the functional facts between the same two entities (core/stores/fact_intervals.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from core.models.facts import Side


@dataclass(frozen=True)
class Functional:
    """A relation's group (facts of one subject in it hold one value at a time) and which end
    is the subject."""

    group: str
    side: Side


@dataclass(frozen=True)
class _Rule:
    group: str
    side: Side
    parts: tuple[str, ...]  # each must match a word, in order; "x*" any word starting with x


def _rule(group: str, side: Side, pattern: str) -> _Rule:
    return _Rule(group, side, tuple(pattern.split()))


# Roles an organisation or place has one holder of at a time: (holder, role_of, owner).
_ROLES = {
    "ceo": ("ceo*", "chief execut*", "executive*"),
    "president": ("president*",),
    "chair": ("chairman", "chairwoman", "chairperson", "chair"),
    "mayor": ("mayor",),
    "governor": ("governor",),
    "prime_minister": ("prime minister", "premier"),
    "head": ("head",),
    "leader": ("leader",),
    "coach": ("coach",),
    "captain": ("captain",),
    "principal": ("principal",),
    "dean": ("dean",),
    "capital": ("capital",),
}
# Jobs whose "<job>_at" / "<job>_of" says whom someone works for.
_JOBS = (
    "engineer* analyst* professor* lecturer* manager* developer* designer* researcher* "
    "scientist* consultant* lawyer* accountant* teacher* nurse* doctor* employee* staff"
)
RULES: tuple[_Rule, ...] = (
    *(_rule(group, "target", words) for group, spellings in _ROLES.items() for words in spellings),
    # Someone's employer: (person, works_for, org); "hired" and "employed" name the org first.
    _rule("employer", "source", "employ* by"),
    *(_rule("employer", "source", job) for job in _JOBS.split()),
    _rule("employer", "target", "employ*"),
    _rule("employer", "target", "hire*"),
    _rule("employer", "source", "work*"),
    _rule("employer", "source", "join"),
    _rule("employer", "source", "joined"),
    # Where someone lives, or an organisation has its seat.
    *(
        _rule("residence", "source", words)
        for words in ("liv*", "resid*", "relocat*", "mov* to", "settl*", "headquarter*", "based")
    ),
    # Married to: each end holds one spouse at a time.
    *(_rule("spouse", "both", words) for words in ("marri*", "marry*", "wed*", "wife", "husband")),
    _rule("spouse", "both", "spouse*"),
)
# Entity types that are times: a relation to one ("born_in 1970") holds no value.
DATE_TYPES = frozenset({"date", "time", "year", "period"})
# Titles that qualify a role without being it ("vice president of" is not the president).
NOT_THE_ROLE = frozenset({"vice", "deputy", "assistant", "acting", "former", "ex"})
_ENDING = "left leav* resign* quit* retire* depart* divorc* separat* fired dismiss* oust* stepp*"
ENDING = (*_ENDING.split(), "step")
_WORD = re.compile(r"[a-z]+")
CACHE_SIZE = 50_000


def words_of(name: str) -> tuple[str, ...]:
    """The lower-case words of a relation name (snake_case, spaces or CamelCase)."""
    spaced = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", name)
    return tuple(_WORD.findall(spaced.lower()))


def _matches(part: str, word: str) -> bool:
    if part.endswith("*"):
        return word.startswith(part[:-1])
    return word in (part, f"{part}s", f"{part}es")


def _found(words: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    """Whether the parts match words of the name, in order (the first may start anywhere)."""
    for i in range(len(words) - len(parts) + 1):
        if all(_matches(p, w) for p, w in zip(parts, words[i : i + len(parts)], strict=True)):
            return True
    return False


class FunctionalRelations:
    """The functional relations of a job: declared ones first, then the default list."""

    def __init__(self, declared: Mapping[str, Side] | None = None, *, defaults: bool = True):
        """`declared`: relation name -> the subject's side (graph model, ontology)."""
        self.declared = {" ".join(words_of(k)): v for k, v in (declared or {}).items()}
        self.defaults = defaults
        # A corpus uses few relation names, each many times: matched once each.
        self._known: dict[str, Functional | None] = {}

    def of(self, name: str) -> Functional | None:
        """The group of a relation name, or None when it may hold several values at a time."""
        if name not in self._known:
            if len(self._known) >= CACHE_SIZE:
                self._known.clear()
            self._known[name] = self._match(name)
        return self._known[name]

    def _match(self, name: str) -> Functional | None:
        words = words_of(name)
        key = " ".join(words)
        if key in self.declared:
            return Functional(f"declared:{key}", self.declared[key])
        if not self.defaults or ends(name) or NOT_THE_ROLE.intersection(words):
            return None
        rule = next((r for r in RULES if _found(words, r.parts)), None)
        return Functional(rule.group, rule.side) if rule is not None else None

    def ending(self, name: str) -> bool:
        """Whether a relation says a fact between its ends ended (an ENDS fact)."""
        return self.defaults and ends(name)


def groups_named(text: str) -> frozenset[str]:
    """The default groups a text's words name: a question "Who is the CEO of X?" asks about
    the `ceo` group, "Where does X live?" about `residence`."""
    words = words_of(text)
    return frozenset(rule.group for rule in RULES if _found(words, rule.parts))


def ends(name: str) -> bool:
    """Whether a relation name says something ended: "left", "resigned_from", "divorced"."""
    words = words_of(name)[:2]
    return any(_matches(part, word) for part in ENDING for word in words)


def merged(*sources: Iterable[tuple[str, Side]]) -> dict[str, Side]:
    """Declarations from several sources, the first naming a relation winning."""
    found: dict[str, Side] = {}
    for source in sources:
        for name, side in source:
            found.setdefault(name, side)
    return found
