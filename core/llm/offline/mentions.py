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
# Entities whose first names the small model's NER often leaves out, and titles that are no
# first name ("CEO Tim Cook", "President Lula").
NAMED_LABELS = frozenset({"PERSON", "ORG", "GPE", "LOC", "NORP", "FAC", "EVENT", "PRODUCT"})
_TITLES = (
    "president professor dr mr mrs ms sir dame king queen prince princess lord lady general "
    "captain chairman chairwoman ceo director senator governor mayor minister judge saint st "
    "pope bishop father mother coach chief executive officer founder manager prof rev hon gen "
    "col lt sgt capt gov sen rep"
)
TITLES = frozenset(_TITLES.split())
PLACE_PREPS = frozenset({"in", "to", "from", "at", "near"})
# Sentence adverbs NER takes into a name that starts a sentence ("Later Nadia Novak").
_ADVERBS = "later then meanwhile afterwards subsequently earlier now today also however finally"
LEADING_ADVERBS = frozenset([*_ADVERBS.split(), "eventually", "recently", "soon"])
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
        span = with_first_name(doc, ent, covered) if ent.label_ in NAMED_LABELS else ent
        covered.update(range(span.start, span.end))
        found += [make_mention(part, type_) for part in lines_of(span)]
    for sent in doc.sents:
        subject = named_subject(sent, covered, is_word)
        if subject is not None:
            covered.update(range(subject.start, subject.end))
            found += [make_mention(part, "Thing") for part in lines_of(subject)]
    found += [make_mention(run, "Thing") for run in proper_noun_runs(doc, covered, is_word)]
    return sorted((m for m in found if m is not None), key=lambda m: m.start)


def with_first_name(doc: Any, ent: Any, covered: set[int]) -> Any:
    """An entity with the parts of its name NER left out but the parse joins to it: the
    capitalised compounds before it ("Teo Varga", NER "Varga"; not titles: "CEO", "President")
    and the name its last word is a compound of ("Nadia Takeda", NER "Nadia"); without a
    leading adverb NER took in ("Later Nadia Novak")."""
    start, end = ent.start, ent.end
    while start > ent.sent.start:
        tok = doc[start - 1]
        joined = tok.dep_ == "compound" and start <= tok.head.i < end
        if not (joined and _name_part(tok, start - 1, covered)) or tok.lower_.rstrip(".") in TITLES:
            break
        start -= 1
    while end < ent.sent.end and doc[end - 1].dep_ == "compound" and doc[end - 1].head.i == end:
        if not _name_part(doc[end], end, covered):
            break
        end += 1
    while end - start > 1 and doc[start].lower_ in LEADING_ADVERBS:
        start += 1
    return doc[start:end]


def _name_part(tok: Any, at: int, covered: set[int]) -> bool:
    return tok.tag_ == "NNP" and tok.text.istitle() and at not in covered


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
        # lone dictionary word is a capitalised common noun ("President", "Diocese"), unless
        # it is a bare place a preposition names ("relocated to Ghent", not "the Diocese").
        lone_word = len(run) == 1 and (len(run.text) < 3 or is_word(run.text.lower()))
        if lone_word and len(run.text) >= 3 and is_place(run[0]):
            lone_word = False
        return not lone_word and run.start - 1 not in covered and run.end not in covered

    return [run for run in runs if keep(run)]


def is_place(tok: Any) -> bool:
    """A capitalised word a place preposition names, with no article: "moved to Ghent"."""
    after = tok.dep_ == "pobj" and tok.head.lower_ in PLACE_PREPS and tok.i > tok.sent.start
    return after and not any(c.dep_ == "det" for c in tok.children)


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
