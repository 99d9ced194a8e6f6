"""Where a parsed text names entities, for the offline extractor: NER spans, named subjects
and proper-noun runs NER missed, each cut at line breaks and given a cleaned name.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from core.llm.offline.rules import Mention
from core.models.graph import normalise_name

LABEL_TYPES = {
    "PERSON": "Person",
    "ORG": "Organization",
    "GPE": "Location",
    "LOC": "Location",
    "DATE": "Date",
    "WORK_OF_ART": "Work",
    "NORP": "Group",
    "EVENT": "Event",
    "FAC": "Facility",
    "PRODUCT": "Product",
    "LANGUAGE": "Language",
    "LAW": "Law",
}
# Numbers and amounts merge across a whole dataset by name ("two", "5%") and become hubs
# that link unrelated passages, so they are not entities.
SKIP_LABELS = frozenset({"CARDINAL", "ORDINAL", "PERCENT", "QUANTITY", "MONEY", "TIME"})
MONTHS = frozenset(
    {
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    }
)
_LEADING_THE = re.compile(r"^the\s+", re.IGNORECASE)
_POSSESSIVE = re.compile(r"(?:['’]s|(?<=s)['’])$")
_YEAR = re.compile(r"\b\d{3,4}s?\b")
_NAME_EDGES = "\"'`“”‘’,;:()[]{}<>*_ "


def find_mentions(doc: Any, is_word: Callable[[str], bool]) -> list[Mention]:
    """Mentions in text order: NER spans, then named subjects and proper nouns NER missed."""
    found: list[Mention | None] = []
    covered: set[int] = set()
    for ent in doc.ents:
        covered.update(range(ent.start, ent.end))
        if ent.label_ in SKIP_LABELS or (ent.label_ == "DATE" and not is_specific_date(ent.text)):
            continue
        type_ = LABEL_TYPES.get(ent.label_, "Thing")
        found += [make_mention(part, type_) for part in lines_of(ent)]
    for sent in doc.sents:
        subject = named_subject(sent, covered, is_word)
        if subject is not None:
            covered.update(range(subject.start, subject.end))
            found += [make_mention(part, "Thing") for part in lines_of(subject)]
    found += [make_mention(run, "Thing") for run in proper_noun_runs(doc, covered, is_word)]
    return sorted((m for m in found if m is not None), key=lambda m: m.start)


def lines_of(span: Any) -> list[Any]:
    """The parts of a span between line breaks: a name never spans two lines ("Ana Lima\nAna
    Lima is ..." names Ana Lima twice, not "Ana Lima Ana Lima")."""
    parts, start = [], span.start
    for tok in span:
        if "\n" in tok.text or "\n" in tok.whitespace_:
            end = tok.i if tok.is_space else tok.i + 1
            if end > start:
                parts.append(span.doc[start:end])
            start = tok.i + 1
    if span.end > start:
        parts.append(span.doc[start : span.end])
    return parts


def named_subject(sent: Any, covered: set[int], is_word: Callable[[str], bool]) -> Any | None:
    """A capitalised sentence subject NER missed: "Inception is a 2010 film directed by ..."."""
    subject = next((c for c in sent.root.children if c.dep_ in ("nsubj", "nsubjpass")), None)
    if subject is None or subject.tag_ not in ("NN", "NNS", "NNP", "NNPS"):
        return None
    start = subject.left_edge.i + (subject.left_edge.dep_ == "det")  # skip "The"
    span = sent.doc[start : subject.i + 1]
    if any(t.i in covered or not (t.text[:1].isupper() or t.is_digit) for t in span):
        return None
    # Outside definitions ("X is a ..."), a lone dictionary word is just sentence-initial.
    defining = any(c.dep_ == "attr" for c in sent.root.children)
    if len(span) == 1 and not defining and is_word(subject.lower_):
        return None
    return span


def proper_noun_runs(doc: Any, covered: set[int], is_word: Callable[[str], bool]) -> list[Any]:
    """Spans of capitalised NNP tokens outside and not touching any NER span."""
    runs, start = [], None
    for tok in [*doc, None]:
        proper = tok is not None and tok.tag_ in ("NNP", "NNPS") and tok.text[:1].isupper()
        if proper and tok.i not in covered:
            start = tok.i if start is None else start
            continue
        if start is not None:
            runs.append(doc[start : tok.i if tok is not None else len(doc)])
            start = None

    def keep(run: Any) -> bool:
        # A run touching an NER span is a title ("CEO Tim Cook") or a boundary error, and a
        # lone dictionary word is a capitalised common noun ("President", "Diocese").
        lone_word = len(run) == 1 and (len(run.text) < 3 or is_word(run.text.lower()))
        return not lone_word and run.start - 1 not in covered and run.end not in covered

    return [run for run in runs if keep(run)]


def make_mention(span: Any, type_: str) -> Mention | None:
    """A mention of a span with a cleaned name, or None when nothing name-like is left."""
    name = clean_name(span.text)
    key = normalise_name(name)
    if sum(ch.isalnum() for ch in key) < 2 or "°" in key:
        return None
    return Mention(key=key, name=name, type=type_, start=span.start, end=span.end)


def clean_name(text: str) -> str:
    """Entity name without a leading "the", a possessive "'s", stray quotes or spaces."""
    name = " ".join(text.split()).strip(_NAME_EDGES)
    name = _POSSESSIVE.sub("", _LEADING_THE.sub("", name))
    return name.strip(_NAME_EDGES)


def is_specific_date(text: str) -> bool:
    """Dates worth a node: with a year, month or century ("1867", "May 5"), not "annually"."""
    lowered = text.lower()
    if "°" in lowered:  # the small model tags temperatures as dates
        return False
    words = (w.strip(",.()") for w in lowered.split())
    return bool(_YEAR.search(lowered)) or "century" in lowered or any(w in MONTHS for w in words)
