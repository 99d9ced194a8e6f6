"""A generated corpus of facts that change over time, and its questions (bench/changing_facts.py).

Entities whose CEO, employer, home city or spouse change 1–4 times, each change told by a dated
document in one of several phrasings (with the date in the text, or only in the document's
date), plus documents that restate the current holder, mention a former one, or say something
else about the same entities (distractors). Documents come in a shuffled order, so later
facts are often added before earlier ones. Every seed gives another corpus; the same seed the
same one.

Questions: the current value of each history ("Who is the CEO of Holbeck Foods?") and its
value at a year inside one of its spans ("Who was the CEO of Holbeck Foods in 2012?"), each
with its answer and every value the history ever held (the candidates a result must not
confuse it with).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import date, timedelta


def _words(text: str) -> list[str]:
    return text.split()


FIRST = _words(
    "Mara Teo Lena Jonas Pedro Ines Oskar Nadia Felix Greta Tomas Irena Marco Selma Viktor Alma "
    "Boris Clara Dario Elin Farid Hana Ivo Jana Kasper Lara Milo Nora Otto Petra Rui Sven Tilda "
    "Vera Wim Yara Zora Emil Hugo Livia"
)
LAST = _words(
    "Quist Varga Ortiz Berg Lima Sousa Haldane Petrov Kowal Brandt Moreau Lindqvist Novak Ferraro "
    "Okafor Takeda Horvat Marsh Delgado Reyes Sato Vidal Kruger Molnar Dahl Keane Rossi Weber "
    "Silva Costa Andrade Falk Grimaldi Hecht Ibsen Jansen"
)
PREFIX = _words(
    "Holbeck Altamira Corvel Brixton Marlow Quenby Tessaly Vantor Ellery Drummond Kestrel Harrow "
    "Lindell Ostrava Pellam Rendale Sorrel Thorne Wexford Yarrow Calder Fenwick Garnet Ashby"
)
SUFFIX = _words("Foods Bank Systems Logistics Motors Pharma Energy Labs Textiles Media Airways")
CITIES = _words(
    "Leeds Porto Lyon Lisbon Bristol Utrecht Graz Krakow Turin Ghent Bergen Aarhus Seville "
    "Bologna Dresden Tallinn Riga Vilnius Zagreb Cork Galway Basel Geneva Bilbao Valencia Nantes "
    "Lille Rotterdam Antwerp Gdansk"
)
MONTHS = _words(
    "January February March April May June July August September October November December"
)
KINDS = ("ceo", "employer", "city", "spouse")
LAST_YEAR = 2025  # no change after this: the last value is current when the bench runs


@dataclass
class Change:
    """One value of a history: who or what, and the day it began."""

    value: str
    day: date


@dataclass
class History:
    """The values one subject held in turn: a company's CEOs, a person's employers..."""

    kind: str
    subject: str
    changes: list[Change]

    def value_in(self, year: int) -> str | None:
        """The value that held for the whole of `year`, or None (a change that year)."""
        holding = None
        for change in self.changes:
            if change.day.year == year:
                return None
            if change.day.year < year:
                holding = change.value
        return holding


@dataclass
class Document:
    name: str
    day: date
    text: str


@dataclass
class Question:
    text: str
    answer: str
    candidates: list[str]  # every value the history held
    kind: str  # ceo, employer, city, spouse
    as_of: int | None = None  # the year asked about (None: the current value)


@dataclass
class Corpus:
    seed: int
    histories: list[History] = field(default_factory=list)
    documents: list[Document] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)


def generate(seed: int, per_kind: int = 20) -> Corpus:
    """The corpus of a seed: `per_kind` histories of each kind (fewer spouses), shuffled."""
    rng = random.Random(seed)
    people = rng.sample([f"{f} {s}" for f in FIRST for s in LAST], 12 * per_kind)
    companies = rng.sample([f"{p} {s}" for p in PREFIX for s in SUFFIX], len(PREFIX) * len(SUFFIX))
    corpus = Corpus(seed)
    pick = _Picker(people, companies, rng)
    for kind in KINDS:
        count = per_kind if kind != "spouse" else max(1, per_kind * 2 // 3)
        for _ in range(count):
            history = pick.history(kind)
            corpus.histories.append(history)
            corpus.documents += _documents(history, rng, pick)
            corpus.questions += _questions(history, rng)
    corpus.documents += [_distractor(rng, pick) for _ in range(per_kind * 2)]
    rng.shuffle(corpus.documents)
    for n, doc in enumerate(corpus.documents):
        doc.name = f"doc-{n:04d}.txt"
    return corpus


class _Picker:
    """Draws subjects and values without reuse, so each history's names are its own."""

    def __init__(self, people: list[str], companies: list[str], rng: random.Random) -> None:
        self.people, self.companies, self.rng = people, companies, rng

    def person(self) -> str:
        return self.people.pop()

    def company(self) -> str:
        return self.companies.pop()

    def history(self, kind: str) -> History:
        rng = self.rng
        subject = self.company() if kind == "ceo" else self.person()
        changes = 2 + rng.randrange(4) if kind != "spouse" else 2 + rng.randrange(2)
        cities = rng.sample(CITIES, changes)
        day = date(2000 + rng.randrange(9), 1 + rng.randrange(12), 1)
        found = []
        for n in range(changes):
            if kind == "ceo" or kind == "spouse":
                value = self.person()
            else:
                value = self.company() if kind == "employer" else cities[n]
            found.append(Change(value, day))
            day = _later(day, 1 + rng.randrange(4), rng)
            if day.year > LAST_YEAR:
                break
        return History(kind, subject, found)


def _later(day: date, years: int, rng: random.Random) -> date:
    return date(day.year + years, 1 + rng.randrange(12), 1)


def _when(day: date, rng: random.Random) -> str:
    return f"{MONTHS[day.month - 1]} {day.year}" if rng.random() < 0.6 else str(day.year)


def _documents(history: History, rng: random.Random, pick: _Picker) -> list[Document]:
    """A dated document per change, some restating the holder later, some naming a former one."""
    docs = []
    for n, change in enumerate(history.changes):
        before = history.changes[n - 1].value if n else None
        written = change.day + timedelta(days=rng.randrange(90))
        text = _change_text(history, change, before, rng)
        docs.append(Document("", written, text))
        nxt = history.changes[n + 1].day if n + 1 < len(history.changes) else date(LAST_YEAR, 12, 1)
        if rng.random() < 0.5 and (nxt - written).days > 200:  # a restatement while it held
            later = written + timedelta(days=rng.randrange(100, (nxt - written).days))
            docs.append(Document("", later, _state_text(history, change.value, rng, pick)))
        if before is not None and rng.random() < 0.4:  # the one it replaced, named "former"
            later = written + timedelta(days=30 + rng.randrange(300))
            docs.append(Document("", later, _former_text(history, before, rng)))
    return docs


def _change_text(history: History, change: Change, before: str | None, rng: random.Random) -> str:
    s, v, when = history.subject, change.value, _when(change.day, rng)
    options = {
        "ceo": [
            f"{v} became CEO of {s} in {when}.",
            f"In {when}, {v} was appointed chief executive officer of {s}.",
            f"{s} named {v} its chief executive in {when}.",
            f"{v} took over as CEO of {s} in {when}.",
            *([f"{v} succeeded {before} as CEO of {s} in {when}."] if before else []),
        ],
        "employer": [
            f"{s} joined {v} in {when}.",
            f"In {when}, {s} started working for {v}.",
            f"{s} was hired by {v} in {when}.",
            *([f"{s} left {before} and joined {v} in {when}."] if before else []),
        ],
        "city": [
            f"{s} moved to {v} in {when}.",
            f"In {when}, {s} relocated to {v}.",
            f"{s} settled in {v} in {when}.",
        ],
        "spouse": [
            f"{s} married {v} in {when}.",
            f"In {when}, {s} married {v}.",
            *([f"{s} divorced {before} in {when}. Later {s} married {v}."] if before else []),
        ],
    }[history.kind]
    return rng.choice(options)


def _state_text(history: History, value: str, rng: random.Random, pick: _Picker) -> str:
    """A later document that names the holder without a date of its own."""
    s, v, city = history.subject, value, rng.choice(CITIES)
    options = {
        "ceo": [f"{v} is the CEO of {s}.", f"{s}'s CEO {v} opened a new office in {city}."],
        "employer": [f"{s} works for {v}.", f"{s}, an engineer at {v}, spoke at a meetup."],
        "city": [f"{s} lives in {v}.", f"{s}, who lives in {v}, opened a cafe."],
        "spouse": [f"{s} is married to {v}.", f"{s} and {v} hosted a dinner in {city}."],
    }[history.kind]
    return rng.choice(options)


def _former_text(history: History, before: str, rng: random.Random) -> str:
    s = history.subject
    return {
        "ceo": f"The former CEO of {s}, {before}, now advises startups.",
        "employer": f"{s} no longer works for {before}.",
        "city": f"{s} visited {before}, a city {s} used to call home.",
        "spouse": f"{s} and {before} remain friends.",
    }[history.kind]


def _distractor(rng: random.Random, pick: _Picker) -> Document:
    """A dated document about other people and places, in the same phrasings."""
    day = date(2000 + rng.randrange(26), 1 + rng.randrange(12), 1)
    a, b, city = pick.person(), pick.company(), rng.choice(CITIES)
    text = rng.choice(
        [
            f"{a} gave a talk about {b} in {city} in {day.year}.",
            f"{b} opened a warehouse in {city} in {day.year}.",
            f"{a} wrote a book about the history of {city}.",
        ]
    )
    return Document("", day, text)


def _questions(history: History, rng: random.Random) -> list[Question]:
    candidates = list(dict.fromkeys(c.value for c in history.changes))
    s, current = history.subject, history.changes[-1].value
    asked_now = {
        "ceo": f"Who is the CEO of {s}?",
        "employer": f"Which company does {s} work for?",
        "city": f"Where does {s} live?",
        "spouse": f"Who is {s} married to?",
    }[history.kind]
    found = [Question(asked_now, current, candidates, history.kind)]
    years = [
        y
        for y in range(history.changes[0].day.year, LAST_YEAR + 1)
        if history.value_in(y) not in (None, current)
    ]
    for year in rng.sample(years, min(2, len(years))):
        asked_then = {
            "ceo": f"Who was the CEO of {s} in {year}?",
            "employer": f"Which company did {s} work for in {year}?",
            "city": f"Where did {s} live in {year}?",
            "spouse": f"Who was {s} married to in {year}?",
        }[history.kind]
        answer = history.value_in(year)
        assert answer is not None
        found.append(Question(asked_then, answer, candidates, history.kind, as_of=year))
    return found
