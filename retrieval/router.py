"""The query router and query analysis: rule-based, no LLM, microseconds per query.

`route(query)` scores the specific search types from weighted cue patterns (English and
Chinese). A type wins only on a strong cue (a score of at least `STRONG_CUE`): Cypher text,
coding rules, quoted or exact wording, "summarise/overview", a question about how two named
things are related, several reasoning cues, or a question whose *subject* is a time ("what
happened in 2016", "events between 1910 and 1920", "latest changes"). A date or "before" that
only qualifies an entity ("the product that shipped in March 2019") is no time cue. Without
a strong cue the answer is `DEFAULT_TYPE`, the best general retriever `cogmill eval`
measures (GRAPH_PPR: docs/benchmarks.md, "Retrieval quality"). A cue preceded by a negation ("not
related to", "don't summarise", "没有关系") does not count.

A question about a fact at a time ("who was the CEO of X in 2019") keeps the default type
and gets `Route.as_of`, the time its graph search sees facts at (retrieval/as_of.py).

`route(query, limits)` also knows what the searched datasets can serve: `limits(type)` says
why they cannot (no Neo4j for CYPHER, no coding-rules node set, no events), and the router
then skips that type, or for TEMPORAL keeps it in its fallback mode; `Route.reason` says so.
`first_available` / `routed_type` keep a choice within the types a registry offers
(retrieval/registry.py): the routed type, else the runner-up, else the default.

`analyse(query)` sorts a query into factual / reasoning / comprehensive / fuzzy, pulls out
keywords and entity-like spans, rates its complexity, and derives the top-k and depth that
the search uses when the caller does not set them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container
from dataclasses import dataclass
from typing import Literal

from core.errors import InvalidInput
from retrieval.as_of import fact_time
from retrieval.models import Route, SearchType

S = SearchType
# The best general retriever by `cogmill eval` (R@5 on MuSiQue and HotpotQA, both splits).
DEFAULT_TYPE = S.GRAPH_PPR
# The default's score: a specific type needs at least as much (a strong cue) to win over it.
DEFAULT_SCORE = STRONG_CUE = 2.5
# Added to the denominator of the confidence, so one weak cue is not "certain".
CONFIDENCE_PRIOR = 0.3
_I = re.IGNORECASE
# Says why the searched datasets cannot serve a type, or None when they can.
Limits = Callable[[SearchType], "str | None"]


@dataclass(frozen=True)
class Cue:
    """A pattern that votes `weight` for a search type; `negatable` cues can be negated."""

    search_type: SearchType
    pattern: re.Pattern[str]
    weight: float
    negatable: bool = True


def _cue(kind: SearchType, pattern: str, weight: float, negatable: bool = True) -> Cue:
    return Cue(kind, re.compile(pattern, _I), weight, negatable)


# A time the question can be about: a year, a month, a decade, a range, a relative time.
_YEAR = r"(?:1[5-9]\d\d|20\d\d)"
_MONTH = (
    r"(?:january|february|march|april|may|june|july|august|september|october|november"
    r"|december|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)"
)
_TIME = (
    rf"(?:(?:{_MONTH}\s+)?{_YEAR}s?|the\s+{_YEAR}s|{_MONTH}"
    r"|(?:the\s+)?(?:last|past|previous|this)\s+(?:\d+\s+)?(?:days?|weeks?|months?|years?|decades?)"
    r"|yesterday|today|recently)"
)
# What happened / events / changes, then a time within a few words, and no relative clause
# in between: there the time qualifies an entity ("... the product that shipped in 2019").
_HAPPENINGS = (
    r"(?:what\s+(?:has\s+|had\s+)?(?:happened|changed|occurred|took\s+place|was\s+new)"
    r"|(?:which|what)\s+(?:events?|changes?|developments?|milestones?)"
    r"|(?:key\s+|major\s+|main\s+)?(?:events?|changes?|developments?|milestones?|news)"
    r"|timeline|chronolog\w*|history)"
)
_SUBJECT_TIME = re.compile(
    rf"\b{_HAPPENINGS}\b(?:(?!\b(?:that|which|who|whom|whose|where)\b)[^.?!]){{0,60}}?"
    rf"\b(?:in|during|between|from|after|before|since|until|of|over|around)\s+{_TIME}\b",
    _I,
)
_TIME_FIRST = re.compile(
    rf"^\s*(?:in|during|between|from|after|before|since)\s+{_TIME}\b[^?]{{0,40}}?"
    rf"\b(?:what\s+happened|what\s+changed|which\s+events?)\b",
    _I,
)
_RECENCY = re.compile(
    r"\b(?:latest|most\s+recent|recent|newest|new)\s+(?:changes?|updates?|news|events?"
    r"|developments?|releases?|announcements?)\b|\bwhat(?:'s|\s+is)\s+new\b"
    r"|\btimeline\b|\bchronolog(?:y|ical)\b",
    _I,
)
_RANGE = re.compile(
    rf"^\s*(?:events?|changes?|news|what\s+happened)?\W*(?:between|from)\s+{_YEAR}\s+"
    rf"(?:and|to|-|–)\s+{_YEAR}\b",
    _I,
)
_ZH_SUBJECT_TIME = re.compile(
    r"(\d{2,4}年|去年|今年|最近|近期|期间|之前|之后|以来).{0,8}(发生了?什么|发生了哪些|有哪些事件|哪些事|大事|变化|动态)"
    r"|(时间线|大事记|最新(的)?(变化|动态|消息|进展|更新)|最近(的)?(变化|动态|消息|进展|更新))"
)
TIME_SUBJECT_WEIGHT = 3.0


def time_is_subject(query: str) -> bool:
    """Whether the question asks what happened in a time, not about a thing a date qualifies."""
    return any(
        pattern.search(query)
        for pattern in (_SUBJECT_TIME, _TIME_FIRST, _RECENCY, _RANGE, _ZH_SUBJECT_TIME)
    )


CUES: tuple[Cue, ...] = (
    # Cypher: a query that reads like a Cypher statement.
    _cue(S.CYPHER, r"^\s*(optional\s+match|match|call|unwind|with)\b.*\breturn\b", 6.0, False),
    _cue(S.CYPHER, r"^\s*(match|merge|create)\s*\(", 5.0, False),
    _cue(S.CYPHER, r"\(\w*:\w+[^)]*\)\s*-\[", 3.0, False),
    _cue(S.CYPHER, r"\bcypher\b", 2.0),
    # Coding rules and code.
    _cue(S.CODING_RULES, r"\bcoding (rules?|standards?|guidelines?|conventions?)\b", 3.0),
    _cue(S.CODING_RULES, r"\b(style ?guide|lint(er|ing)?|naming conventions?|pep ?8)\b", 2.5),
    _cue(S.CODING_RULES, r"\bcode reviews?\b", 2.5),
    _cue(S.CODING_RULES, r"\bbest practices?\b", 1.0),
    _cue(S.CODING_RULES, r"\b(refactor\w*|snake_case|camelcase|type hints?|docstrings?)\b", 1.5),
    _cue(S.CODING_RULES, r"`[^`]+`|\b(def|class|import|return) \w+|\w+\(\)", 1.5, False),
    _cue(S.CODING_RULES, r"\b(python|typescript|javascript|java|golang|rust|c\+\+)\b", 1.0),
    _cue(S.CODING_RULES, r"编码规范|代码规范|编程规范|代码风格", 3.0),
    # Exact wording.
    _cue(S.CHUNKS_LEXICAL, r"^\s*([\"“「『'])[^\"“”「」『』']+([\"”」』'])\s*$", 5.0, False),
    _cue(S.CHUNKS_LEXICAL, r"\b(exact(ly)?|verbatim|word[- ]for[- ]word|literal(ly)?)\b", 2.5),
    _cue(S.CHUNKS_LEXICAL, r"\b(quote|quotation)\b", 1.5),
    _cue(S.CHUNKS_LEXICAL, r"原文|逐字|原话", 2.5),
    # Summaries and overviews.
    _cue(S.SUMMARIES, r"\bsummar(y|ies|ise|ize|ising|izing)\b", 2.5),
    _cue(S.SUMMARIES, r"\b(overview|recap|gist|tl;?dr|high[- ]level)\b", 2.5),
    _cue(S.SUMMARIES, r"\b(outline|in brief|main points|key points)\b", 1.5),
    _cue(S.SUMMARIES, r"总结|概述|概括|摘要|综述|要点", 2.5),
    # Reasoning: one cue is ordinary wording ("why"), two ask for the reasoning itself.
    _cue(S.GRAPH_COMPLETION_COT, r"\bwhy\b|\bhow come\b", 1.5),
    _cue(S.GRAPH_COMPLETION_COT, r"\bexplain\w*|\bexplanation\b", 1.5),
    _cue(S.GRAPH_COMPLETION_COT, r"\bstep[- ]by[- ]step\b|\breason(ing|s)?\b", 1.5),
    _cue(S.GRAPH_COMPLETION_COT, r"\b(caused?|because|consequences?)\b", 0.5),
    _cue(S.GRAPH_COMPLETION_COT, r"为什么|为何|原因", 1.5),
    _cue(S.GRAPH_COMPLETION_COT, r"解释|逐步|一步一步", 1.5),
    # Relationships between things.
    _cue(
        S.GRAPH_COMPLETION_CONTEXT_EXTENSION,
        r"\bhow (is|are|was|were|do|does|did)\b.{1,80}\b(relat|connect|link|tied)\w*",
        3.0,
    ),
    _cue(
        S.GRAPH_COMPLETION_CONTEXT_EXTENSION,
        r"\b(relat(ed|es|ion|ionships?)|connect(ed|ion|ions|s)?|linked) (to|between|with)\b",
        1.0,
    ),
    _cue(S.GRAPH_COMPLETION_CONTEXT_EXTENSION, r"\brelationships?\b|\bin common\b", 2.0),
    _cue(S.GRAPH_COMPLETION_CONTEXT_EXTENSION, r"是什么关系|有什么关系|有什么联系|之间的关系", 3.0),
    _cue(S.GRAPH_COMPLETION_CONTEXT_EXTENSION, r"关系|联系|关联", 1.0),
    # Time, weakly: a date or "when" in a question is mostly a qualifier or the answer sought,
    # so these only name TEMPORAL as the runner-up; `time_is_subject` makes it a strong cue.
    _cue(S.TEMPORAL, r"\bwhen\b|\bwhat (year|date|time)\b|\bhow long ago\b", 1.0),
    _cue(S.TEMPORAL, rf"\b{_YEAR}s?\b|\b(timeline|decades?)\b", 1.0),
    _cue(S.TEMPORAL, r"什么时候|何时|哪一年|哪年|\d{2,4}年", 1.0),
)

# A cue counts as negated when one of these ends the text just before it.
_NEGATED_EN = re.compile(
    r"\b(not|no|never|without|nothing|neither|nor|isn't|aren't|wasn't|weren't|don't|"
    r"doesn't|didn't|won't|can't|cannot|unrelated)\b(\s+\w+){0,2}\s*$",
    _I,
)
_NEGATED_ZH = re.compile(r"(不|没|没有|无|非|别|不要|不是|并非|并不)\w{0,1}$")
_CJK = re.compile(r"[\u4e00-\u9fff]")


def is_negated(text_before: str) -> bool:
    """Whether a cue is negated by the words right before it (English or Chinese)."""
    if _CJK.search(text_before[-3:] if text_before else ""):
        return bool(_NEGATED_ZH.search(text_before[-4:]))
    return bool(_NEGATED_EN.search(text_before[-40:]))


def scores(query: str) -> dict[SearchType, float]:
    """Each search type's cue score; each cue counts once, negated occurrences not at all.

    The default type holds `DEFAULT_SCORE`; TEMPORAL gains `TIME_SUBJECT_WEIGHT` when the
    question's subject is a time.
    """
    totals: dict[SearchType, float] = {DEFAULT_TYPE: DEFAULT_SCORE}
    for cue in CUES:
        for match in cue.pattern.finditer(query):
            if cue.negatable and is_negated(query[: match.start()]):
                continue
            totals[cue.search_type] = totals.get(cue.search_type, 0.0) + cue.weight
            break
    if time_is_subject(query):
        totals[S.TEMPORAL] = totals.get(S.TEMPORAL, 0.0) + TIME_SUBJECT_WEIGHT
    return totals


def route(query: str, limits: Limits | None = None) -> Route:
    """The search type for a query, how sure the rules are, the second choice, and why.

    `limits` (see the module docstring) keeps the router off types the datasets cannot serve.
    """
    if not query.strip():
        raise InvalidInput("the query is empty; pass the question to route")
    # Best first; a specific type reaching the default's score beats it.
    ranked = sorted(
        scores(query).items(), key=lambda item: (-item[1], item[0] is DEFAULT_TYPE, item[0].value)
    )
    skipped: list[str] = []
    index = 0
    while True:  # the default is always served, so this ends at it at the latest
        kind, best = ranked[index]
        missing = limits(kind) if limits is not None and kind is not DEFAULT_TYPE else None
        if missing is None or kind is S.TEMPORAL:
            break
        skipped.append(f"{kind.value} skipped: {missing}")
        index += 1
    as_of = fact_time(query) if kind is DEFAULT_TYPE else None
    if as_of is not None:
        reason = f"a question about a fact at a time: {kind.value} as of {as_of}"
    elif kind is DEFAULT_TYPE:
        reason = f"no strong specific cue: the default, {kind.value}"
    else:
        reason = f"a strong {kind.value} cue (score {best:.1f})"
    if missing is not None:  # TEMPORAL on datasets without events
        reason += f"; {missing}: TEMPORAL ranks the graph search's passages by their time"
    second_type, second = next(((k, v) for k, v in ranked[index + 1 :] if v > 0), (S.CHUNKS, 0.0))
    total = best + second + CONFIDENCE_PRIOR
    return Route(
        search_type=kind,
        confidence=round(best / total, 3),
        runner_up=second_type,
        runner_up_score=round(second / total, 3),
        reason="; ".join([reason, *skipped]),
        as_of=as_of,
    )


def first_available(routed: Route, available: Container[SearchType]) -> SearchType | None:
    """The routed type if available, else the runner-up if available; None when neither is."""
    for candidate in (routed.search_type, routed.runner_up):
        if candidate in available:
            return candidate
    return None


def routed_type(query: str, available: Container[SearchType]) -> tuple[SearchType, str]:
    """The router's type if available, else its runner-up, else the default; and who chose."""
    chosen = first_available(route(query), available)
    if chosen is not None:
        return chosen, "the query router"
    return DEFAULT_TYPE, "the default (the router's choices are not available)"


def top_cue(query: str) -> SearchType:
    """The specific type with the highest cue score, strong or not, else the default."""
    cued = {k: v for k, v in scores(query).items() if k is not DEFAULT_TYPE and v > 0}
    return max(sorted(cued, key=lambda k: k.value), key=cued.__getitem__, default=DEFAULT_TYPE)


# -- query analysis -----------------------------------------------------------------------------

QueryKind = Literal["factual", "reasoning", "comprehensive", "fuzzy"]
Complexity = Literal["simple", "moderate", "complex"]
_STOPWORDS = frozenset(
    re.findall(
        r"\S+",
        "a an the of to in on at for by with from and or but is are was were be been being do "
        "does did what which who whom whose when where why how that this these those it its as "
        "about into than then there their they them his her he she we you your i me my our can "
        "could would should will shall may might must has have had not no so if all any some "
        "tell me please give show list",
    )
)
_WORDS = re.compile(r"[A-Za-z0-9][A-Za-z0-9_'\-]*|[\u4e00-\u9fff]+")
_QUOTED = re.compile(r"[\"“「『]([^\"“”「」『』]{2,100})[\"”」』]")
_CAPITALISED = re.compile(r"\b[A-Z][\w\-]*(?:\s+(?:of\s+|the\s+|de\s+)?[A-Z][\w\-]*)*")
_QUESTION_WORDS = frozenset(
    re.findall(
        r"\S+",
        "What Which Who Whom Whose When Where Why How Is Are Was Were Do Does Did Can Could "
        "Should Would Will Tell Give Show List Explain Summarise Summarize Find The A An In On "
        "I Please",
    )
)
_COMPREHENSIVE = re.compile(
    r"\b(all|every|each|list|compare|comparison|overview|summar\w+|everything)\b"
    r"|所有|全部|列出|比较|总结|概述",
    _I,
)
_FUZZY = re.compile(
    r"\b(something|anything|stuff|kind of|sort of|maybe|perhaps|similar|like|roughly|about)\b"
    r"|类似|大概|也许|相关的",
    _I,
)
_CLAUSES = re.compile(r"\band\b|\bthen\b|[,;，；、]|以及|并且|和", _I)
KIND_TOP_K = {"factual": 1.0, "reasoning": 1.5, "comprehensive": 2.0, "fuzzy": 1.5}
REASONING_TYPES = {
    S.GRAPH_COMPLETION_COT,
    S.GRAPH_COMPLETION_CONTEXT_EXTENSION,
    S.GRAPH_COMPLETION_DECOMPOSITION,
}


@dataclass(frozen=True)
class QueryAnalysis:
    """What a query asks for and how widely and deeply to search for it."""

    kind: QueryKind
    keywords: list[str]
    entities: list[str]
    complexity: Complexity
    top_k: int
    depth: int


def entities_of(query: str) -> list[str]:
    """Quoted phrases and capitalised spans (leading question words dropped), in order."""
    found = [m.group(1).strip() for m in _QUOTED.finditer(query)]
    for match in _CAPITALISED.finditer(query):
        words = match.group().split()
        while words and words[0] in _QUESTION_WORDS:
            words.pop(0)
        if words:
            found.append(" ".join(words))
    return list(dict.fromkeys(f for f in found if f))


def keywords_of(query: str) -> list[str]:
    """Content words of the query, lower-cased, without stopwords, first occurrence order."""
    words = [w.lower().strip("'-") for w in _WORDS.findall(query)]
    return list(dict.fromkeys(w for w in words if w and w not in _STOPWORDS and len(w) > 1))


def analyse(query: str, base_top_k: int = 10, max_depth: int = 3) -> QueryAnalysis:
    """Kind, keywords, entities and complexity of a query, and the top-k and depth they imply."""
    if not query.strip():
        raise InvalidInput("the query is empty; pass the question to analyse")
    chosen = top_cue(query)
    keywords, entities = keywords_of(query), entities_of(query)
    if chosen in REASONING_TYPES:
        kind: QueryKind = "reasoning"
    elif chosen is S.GRAPH_SUMMARY_COMPLETION or _COMPREHENSIVE.search(query):
        kind = "comprehensive"
    elif (_FUZZY.search(query) or len(keywords) <= 2) and not entities:
        kind = "fuzzy"
    else:
        kind = "factual"
    clauses = len(_CLAUSES.findall(query))
    points = clauses + max(0, len(entities) - 1) + len(keywords) // 8
    points += 1 if kind in ("reasoning", "comprehensive") else 0
    complexity: Complexity = "simple" if points <= 1 else "moderate" if points <= 3 else "complex"
    scale = KIND_TOP_K[kind] * {"simple": 1.0, "moderate": 1.25, "complex": 1.5}[complexity]
    depth = {"simple": 1, "moderate": 2, "complex": 3}[complexity]
    if kind == "reasoning":
        depth += 1
    return QueryAnalysis(
        kind=kind,
        keywords=keywords,
        entities=entities,
        complexity=complexity,
        top_k=max(1, min(100, round(base_top_k * scale))),
        depth=max(1, min(max_depth, depth)),
    )
