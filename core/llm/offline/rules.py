"""Rule-based relations over a spaCy dependency parse, for the offline extractor.

The rules read fine-grained tags (`tag_`) and dependency labels only, so the pipeline runs
without the attribute ruler and lemmatizer; the few lemmas relation names need come from
the lemmatizer's lookup tables (`Lemmatize`). Each sentence yields typed triples first and
then weak `related_to` edges for the entities no rule reached.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # spaCy itself is imported only when the offline extractor loads a model
    from spacy.tokens import Span, Token

NOUN_TAGS = frozenset({"NN", "NNS", "NNP", "NNPS"})
SUBJECT_DEPS = ("nsubj", "nsubjpass")
RELATIVE_WORDS = frozenset({"who", "whom", "which", "that", "whose"})
# Prepositions that tie a role noun to its owner: "mayor of", "professor at", "film by".
ROLE_PREPS = frozenset({"of", "for", "at", "in", "to", "with", "from", "by", "on"})
OWNER_TYPES = frozenset({"Organization", "Location", "Group", "Facility", "Event"})
# Light verbs whose complement carries the meaning ("became the mayor of Y").
COPULAS = frozenset({"be", "become", "remain", "serve", "elect", "name", "appoint", "make"})
# Irregular past tenses become participles so "X wrote Y" and "Y was written by X" match.
PAST_TO_PARTICIPLE = {
    "wrote": "written",
    "took": "taken",
    "began": "begun",
    "gave": "given",
    "became": "become",
    "drew": "drawn",
    "sang": "sung",
    "rode": "ridden",
    "grew": "grown",
    "chose": "chosen",
    "spoke": "spoken",
    "knew": "known",
    "flew": "flown",
    "ran": "run",
    "saw": "seen",
    "drove": "driven",
    "fell": "fallen",
    "rose": "risen",
    "forgot": "forgotten",
    "ate": "eaten",
}
# Words that make a title of a role noun ("chief executive officer", "vice president").
_TITLE_WORDS = "chief executive vice deputy prime managing general operating financial technology"
TITLE_WORDS = frozenset(
    [*_TITLE_WORDS.split(), "technical", "assistant", "acting", "interim", "co"]
)
# Verbs whose subject takes over its object's role: "X succeeded Y as CEO".
SUCCEEDING = frozenset({"succeed", "replace", "follow", "supersede"})
# A sentence listing twenty places must not add twenty weak edges.
MAX_WEAK_PER_SENTENCE = 6

Lemmatize = Callable[[str, str], str]


@dataclass(frozen=True)
class Mention:
    """One occurrence of an entity: its dedupe key, display name, type and token span."""

    key: str
    name: str
    type: str
    start: int
    end: int


@dataclass(frozen=True)
class Triple:
    """A relation between two mentions found in one sentence."""

    source: Mention
    name: str
    target: Mention
    sentence: Span


def relation_name(*parts: str) -> str:
    """A short lowercase snake_case relation name."""
    text = "_".join(p for p in parts if p)
    return re.sub(r"[^0-9a-z]+", "_", text.lower()).strip("_")[:48]


def _is_person(type_: str) -> bool:
    return type_ == "Person"


def _is_thing(type_: str) -> bool:
    return type_ not in ("Person", "Date")


PRONOUNS = {
    **dict.fromkeys(("he", "she", "him", "her", "his", "hers"), _is_person),
    **dict.fromkeys(("it", "its"), _is_thing),
}


class Coreference:
    """Resolves he/she/it to the latest fitting sentence subject of the passage."""

    def __init__(self, mentions: list[Mention]) -> None:
        self.mentions = mentions
        self.subjects: list[Mention] = []  # subjects of finished sentences, latest last
        self.current: Mention | None = None

    def resolve(self, token: Token) -> Mention | None:
        """The mention a pronoun refers to, or None."""
        fits = PRONOUNS.get(token.lower_)
        if fits is None:
            return None
        # "X said he ..." -> X, but "Her husband X ..." -> an earlier sentence's subject. "Its"
        # is the subject's whatever NER typed it ("Calder Pharma named X its chief executive").
        current = self.current
        its = token.lower_ == "its" and current is not None and current.type != "Date"
        if current is not None and current.end <= token.i and (fits(current.type) or its):
            return current
        earlier = [m for m in self.subjects if fits(m.type)]
        if earlier:
            return earlier[-1]
        # Before any subject is known, the passage's first person or thing is its topic; one
        # from the pronoun's own sentence is more often someone else ("The son of X, he ...").
        start = token.sent.start
        return next((m for m in self.mentions if m.end <= start and fits(m.type)), None)

    def start_sentence(self, subject: Mention | None) -> None:
        """Note the subject of the sentence about to be read."""
        self.current = subject

    def end_sentence(self) -> None:
        """Keep the finished sentence's subject for the pronouns of later ones."""
        if self.current is not None:
            self.subjects.append(self.current)
        self.current = None


def pobjs(tok: Token, preps: Iterable[str]) -> list[Token]:
    """Objects of the token's prepositions among `preps`."""
    wanted = set(preps)
    return [
        p
        for c in tok.children
        if c.dep_ == "prep" and c.lower_ in wanted
        for p in c.children
        if p.dep_ == "pobj"
    ]


class SentenceRules:
    """Finds the relations among the mentions of one sentence."""

    def __init__(
        self, sent: Span, ent_at: dict[int, Mention], coref: Coreference, lemma: Lemmatize
    ) -> None:
        self.sent, self.ent_at, self.coref, self.lemma = sent, ent_at, coref, lemma
        self.triples: dict[tuple[str, str, str], Triple] = {}

    def run(self) -> list[Triple]:
        """Typed triples of the sentence, then weak related_to edges for loose mentions."""
        subjects = self.mentions_of(self.subjects(self.sent.root))
        subject = subjects[0] if subjects else None
        self.coref.start_sentence(subject)
        for tok in self.sent:
            if tok.tag_.startswith("VB") and tok.dep_ not in ("aux", "auxpass"):
                self.verb_rules(tok)
            elif tok.i in self.ent_at:
                self.entity_rules(tok)
            elif tok.tag_ in NOUN_TAGS:
                self.role_rules(tok)
        self.weak_links(subject)
        self.coref.end_sentence()
        return list(self.triples.values())

    # -- finding the ends ----------------------------------------------------------------
    def mention(self, tok: Token) -> Mention | None:
        """The entity a token belongs to, resolving personal pronouns."""
        found = self.ent_at.get(tok.i)
        if found is None and tok.tag_ in ("PRP", "PRP$"):
            found = self.coref.resolve(tok)
        return found

    def mentions_of(self, tokens: Iterable[Token], through_of: bool = False) -> list[Mention]:
        """Mentions of the tokens and their conjuncts; `through_of` reads "the city of Y" as Y."""
        found: list[Mention] = []
        for tok in tokens:
            # A plain noun with an apposition stands for it: "her husband, Pierre Curie, ..."
            appos = [] if tok.i in self.ent_at else [c for c in tok.children if c.dep_ == "appos"]
            here = [m for t in (tok, *tok.conjuncts, *appos) if (m := self.mention(t))]
            if not here and through_of and tok.tag_ in NOUN_TAGS:
                here = self.mentions_of(pobjs(tok, ("of",)))
            found += [m for m in here if m not in found]
        return found

    def subjects(self, verb: Token, depth: int = 0) -> list[Token]:
        """Subject tokens of a verb, borrowed from the governing verb or noun when elided."""
        if depth > 3:
            return []
        subs = [c for c in verb.children if c.dep_ in SUBJECT_DEPS]
        if verb.dep_ == "relcl" and any(s.lower_ in RELATIVE_WORDS for s in subs):
            return self.stands_for(verb.head, depth)  # "X, who founded Y"
        if subs:
            return subs
        if verb.dep_ in ("relcl", "acl"):
            return self.stands_for(verb.head, depth)  # "Apple, founded by Jobs"
        if verb.dep_ in ("conj", "xcomp", "advcl") and verb.head.tag_.startswith("VB"):
            return self.subjects(verb.head, depth + 1)  # "X was born in Y and died in Z"
        return []

    def stands_for(self, noun: Token, depth: int) -> list[Token]:
        """What a modified noun refers to: in "X is a film directed by Y" the film is X."""
        if noun.i not in self.ent_at and noun.dep_ in ("attr", "oprd"):
            return self.subjects(noun.head, depth + 1)
        if noun.i not in self.ent_at and noun.dep_ == "appos":
            return [noun.head]
        return [noun]

    def add(self, source: Mention | None, name: str, target: Mention | None) -> None:
        """Record a triple unless an end is missing, it is a self-loop, or a duplicate."""
        if source is None or target is None or not name or source.key == target.key:
            return
        key = (source.key, name, target.key)
        self.triples.setdefault(key, Triple(source, name, target, self.sent))

    # -- rules ---------------------------------------------------------------------------
    def verb_name(self, verb: Token) -> str:
        """Relation name of a verb: participles as written ("born", "starring"), else the lemma."""
        word, lemma = verb.lower_, self.lemma(verb.lower_, "verb")
        if lemma == "be":
            base = "is"
        elif verb.tag_ in ("VBD", "VBN", "VBG"):
            base = PAST_TO_PARTICIPLE.get(word, word)
        else:
            base = lemma
        particle = next((c.lower_ for c in verb.children if c.dep_ == "prt"), "")
        negated = any(c.dep_ == "neg" for c in verb.children)
        return relation_name("not" if negated else "", base, particle)

    def verb_rules(self, verb: Token) -> None:
        """Subject–verb–object, passive agents and verb + preposition attachments."""
        name = self.verb_name(verb)
        subjects = self.mentions_of(self.subjects(verb))
        if not subjects:
            return
        objects = [c for c in verb.children if c.dep_ in ("dobj", "dative")]
        if verb.dep_ == "relcl" and any(c.lower_ in RELATIVE_WORDS for c in objects):
            objects = [verb.head]  # "Y, which X founded": the object is the noun Y
        agents = [p for c in verb.children if c.dep_ == "agent" for p in c.children]
        # Passive: "Y was founded by X" -> (X, founded, Y), as the active voice gives.
        self.link(self.mentions_of(agents, through_of=True), name, subjects)
        self.link(subjects, name, self.mentions_of(objects))
        light = self.lemma(verb.lower_, "verb") in COPULAS
        for obj in (o for o in objects if o.i not in self.ent_at and not light):
            # "X conquered the kingdom of Y" -> conquered; "X won a medal at Y" -> won_at
            for prep in (c for c in obj.children if c.dep_ == "prep"):
                label = name if prep.lower_ == "of" else relation_name(name, prep.lower_)
                self.link(subjects, label, self.mentions_of(pobjs(obj, (prep.lower_,))))
        for prep in (c for c in verb.children if c.dep_ == "prep" and c.lower_ != "as"):
            # "X was born in Y", "born in the city of Y" ("served as ..." is a role)
            targets = self.mentions_of(pobjs(verb, (prep.lower_,)), through_of=True)
            self.link(subjects, relation_name(name, prep.lower_), targets)
        for state in (c for c in verb.children if c.dep_ == "acomp" and c.tag_ in ("JJ", "VBN")):
            for prep in (c for c in state.children if c.dep_ == "prep"):  # "X is married to Y"
                targets = self.mentions_of(pobjs(state, (prep.lower_,)))
                self.link(subjects, relation_name(state.lower_, prep.lower_), targets)

    def link(self, sources: list[Mention], name: str, targets: list[Mention]) -> None:
        """Add (source, name, target) for every pair."""
        for source in sources:
            for target in targets:
                self.add(source, name, target)

    def role_rules(self, noun: Token) -> None:
        """(holder, role_prep, owner): "X, the director of Y", "X is the capital of Y"."""
        roles, extra_holders = self.roles(noun)
        if roles:
            for holder in self.holders(noun) + extra_holders:
                for name, owner in roles:
                    self.add(holder, name, owner)

    def roles(self, noun: Token) -> tuple[list[tuple[str, Mention]], list[Mention]]:
        """What a role noun is "of" (prepositional, possessive or compound owners)."""
        word = self.lemma(noun.lower_, "noun")
        roles: list[tuple[str, Mention]] = []
        holders: list[Mention] = []
        if not word.isalpha():  # URLs, codes and numbers are not roles
            return roles, holders
        # "chief executive officer", "vice president": the title's words name the role.
        titled = [
            c.lower_
            for c in noun.lefts
            if c.dep_ in ("amod", "compound") and c.lower_ in TITLE_WORDS and c.i not in self.ent_at
        ]
        word = relation_name(*titled, word) if titled else word
        for child in noun.children:
            if child.dep_ == "prep" and child.lower_ in ROLE_PREPS:
                name = relation_name(word, child.lower_)
                for pobj in pobjs(noun, (child.lower_,)):
                    holders += self.misattached_appos(pobj)
                    roles += [(name, m) for m in self.mentions_of([pobj])]
            owner = self.mention(child)
            owned = child.dep_ == "compound" and owner is not None and owner.type in OWNER_TYPES
            if child.dep_ == "poss" or owned:  # "Poland's capital", "the Apple CEO"
                roles += [(relation_name(word, "of"), m) for m in self.mentions_of([child])]
        return roles, holders

    def misattached_appos(self, pobj: Token) -> list[Mention]:
        """Holders the parser hung on the owner: "the mayor of Paris, Anne Hidalgo"."""
        owner, found = self.mention(pobj), []
        for other in (self.mention(c) for c in pobj.children if c.dep_ == "appos"):
            if owner is None or other is None:
                continue
            if owner.type == other.type == "Location":
                self.add(owner, "located_in", other)  # "the capital of Warsaw, Poland"
            else:
                found.append(other)
        return found

    def holders(self, noun: Token) -> list[Mention]:
        """The entities a role noun is said of: appositions, compounds, copula subjects."""
        head = noun.head
        if noun.dep_ == "conj" and head.tag_ in NOUN_TAGS and head.i not in self.ent_at:
            return self.holders(head)  # "the son of X and the brother of Y"
        tokens = [c for c in noun.children if c.dep_ == "appos"]
        if noun.dep_ in ("appos", "compound"):  # "X, the director of Y" / "CEO Tim Cook"
            tokens.append(head)
        if noun.dep_ in ("attr", "oprd"):  # "X is the capital of Y" / "X was elected president"
            # An object's complement is said of the object: "Y named X its chief executive".
            named = [
                c
                for c in head.children
                if c.dep_ == "dobj" or (c.dep_ == "oprd" and c != noun and c.i in self.ent_at)
            ]
            named = named if noun.dep_ == "oprd" else []
            tokens += named or self.subjects(head)
        if noun.dep_ == "pobj" and head.lower_ == "as" and head.head.tag_.startswith("VB"):
            tokens += self.subjects(head.head)  # "X served as mayor of Y"
        elif noun.dep_ == "pobj" and head.lower_ == "as" and head.head.dep_ == "dobj":
            # "as CEO" hung on the object: "X succeeded Y as CEO of Z" gives X the role,
            # "they named X as CEO of Z" gives it to X, the object.
            verb = head.head.head
            taker = self.lemma(verb.lower_, "verb") in SUCCEEDING
            tokens += self.subjects(verb) if taker else [head.head]
        if noun.dep_ in SUBJECT_DEPS:  # "The capital of Poland is Warsaw"
            tokens += [c for c in head.children if c.dep_ in ("attr", "oprd")]
        return self.mentions_of(tokens)

    def entity_rules(self, tok: Token) -> None:
        """Entity-to-entity links: "Warsaw, Poland", "Google's CEO X", "the Louvre in Paris"."""
        this = self.ent_at[tok.i]
        for child in tok.children:
            other = self.mention(child)
            if child.dep_ == "appos" and other and this.type == other.type == "Location":
                self.add(this, "located_in", other)
            elif child.dep_ == "poss" and other and not this.start <= child.i < this.end:
                self.add(this, self.title(tok), other)
            elif child.dep_ == "prep" and child.lower_ in ROLE_PREPS | {"near"}:
                self.link([this], child.lower_, self.mentions_of(pobjs(tok, (child.lower_,))))

    def title(self, tok: Token) -> str:
        """The title compound of a person as a role ("CEO Sundar Pichai" -> ceo_of), else "of"."""
        for child in tok.children:
            if child.dep_ == "compound" and child.i not in self.ent_at and child.tag_ in NOUN_TAGS:
                return relation_name(self.lemma(child.lower_, "noun"), "of")
        return "of"

    def weak_links(self, subject: Mention | None) -> None:
        """related_to edges from the sentence's subject to co-occurring entities no rule linked."""
        first_at: dict[str, tuple[Mention, int]] = {}
        for i in range(self.sent.start, self.sent.end):
            m = self.ent_at.get(i)
            # Dates shared by unrelated passages would become hubs; typed edges still reach them.
            if m is not None and m.type != "Date" and m.key not in first_at:
                first_at[m.key] = (m, i)
        if subject is None and first_at:
            subject = next(iter(first_at.values()))[0]
        if subject is None:
            return
        touched = {key for s, _, t in self.triples for key in (s, t)}
        anchor = first_at.get(subject.key, (subject, self.sent.root.i))[1]
        loose = [(m, i) for m, i in first_at.values() if m.key not in touched | {subject.key}]
        if subject.key not in touched and touched:  # tie the subject to the typed cluster too
            loose += [(m, i) for m, i in first_at.values() if m.key in touched][:1]
        loose.sort(key=lambda pair: abs(pair[1] - anchor))
        for other, _ in loose[:MAX_WEAK_PER_SENTENCE]:
            self.add(subject, "related_to", other)
