"""New passages from old ones: every name in a passage replaced by an invented one, reproducibly.

The scale runs need more distinct text than the corpora hold (40 x 1,890 = 75,600 passages
from 8,009). Generation `g` (1, 2, ...) of a passage is the passage with every capitalised
word of two letters or more replaced by an invented word, except the grammatical words,
number words, months and weekdays in `KEPT` (sentence openers and dates, not names). The
invented word is drawn from SHA-256 of (g, word) alone, so within a generation a word
becomes the same invented word in every passage: entities shared by two passages stay
shared, and each generation is a world of its own with the original's shape. The graph
grows by one copy of that shape per generation instead of merging into the original
entities, which is what a larger corpus of the same kind would do. Lower-case words,
numbers, punctuation and the passage's length in words are kept, so chunking, extraction
and embedding cost about the same per passage.

Case is kept: `Paris` becomes a capitalised invention of about the same length, `NATO`
an upper-case one of the same length. A passage with no name at all (4 of the 8,009, such as
the stub "Where Are You\nWhere Are You may refer to:") has every capitalised word renamed, kept
ones too, so that it differs from its other generations as well. Generation 0 is the passage
itself.
"""

from __future__ import annotations

import functools
import hashlib
import re

# Runs of letters (any script): a word, or one part of "Jean-Luc" / "O'Brien".
_WORD = re.compile(r"[^\W\d_]+")

_GRAMMAR = """a about above after against all also although among an and another any are as at
be because been before being below between both but by can could did do does down during each
either even ever every few for from further had has have having he her here hers him his how i
if in into is it its just many may might more most much must my neither no nor not now of off
on once one only or other our out over per since so some such than that the their them then
there these they this those though through thus to too under unless until up upon us very was
we were what when where whereas whether which while who whom whose why will with within without
would yet you your"""
_NUMBERS = """two three four five six seven eight nine ten eleven twelve first second third
fourth fifth sixth seventh eighth ninth tenth hundred thousand million"""
_CALENDAR = """january february march april may june july august september october november
december monday tuesday wednesday thursday friday saturday sunday"""
_ROMAN = "ii iii iv v vi vii viii ix x xi xii xiii xiv xv xvi"
KEPT = frozenset(" ".join((_GRAMMAR, _NUMBERS, _CALENDAR, _ROMAN)).split())

# Syllables: an onset, a vowel (plain ones twice as likely) and, at the end, a coda.
_ONSETS = (
    "b c d f g h j k l m n p r s t v w z br cr dr fr gr kr pr tr bl cl fl gl pl sl st sk sp th"
)
_VOWELS = "a e i o u a e i o ai au ea ei ia io ou"
_CODAS = ["", "", "", "", "n", "r", "s", "l", "m", "nd", "rt", "sk", "th", "x"]
_LETTERS = "BCDFGHJKLMNPQRSTVWXZ"
_SYLLABLE = (_ONSETS.split(" "), _VOWELS.split(" "))


def rename(word: str, generation: int, *, keep: frozenset[str] = KEPT) -> str:
    """`word` as generation `generation` writes it: itself when kept, else its invented name."""
    if generation == 0 or len(word) < 2 or not word[0].isupper() or word.lower() in keep:
        return word
    return _invented(word, generation)


@functools.lru_cache(maxsize=1 << 17)
def _invented(word: str, generation: int) -> str:
    digest = hashlib.sha256(f"{generation}\x00{word}".encode()).digest()
    if word.isupper():  # an acronym: as many capitals
        return "".join(_LETTERS[b % len(_LETTERS)] for b in digest[: len(word)])
    syllables = min(5, max(2, round(len(word) / 3)))
    parts = []
    for k in range(syllables):
        onset, vowel, coda = digest[3 * k : 3 * k + 3]
        last = k == syllables - 1
        # A coda inside the word too, now and then: "Darnvel", not only "Dalove".
        ending = _CODAS[coda % len(_CODAS)] if last or coda % 4 == 0 else ""
        onsets, vowels = _SYLLABLE
        parts.append(onsets[onset % len(onsets)] + vowels[vowel % len(vowels)] + ending)
    return "".join(parts).capitalize()


def rewrite(text: str, generation: int) -> str:
    """`text` with every name renamed for `generation` (0: unchanged)."""
    if generation == 0:
        return text
    renamed = _WORD.sub(lambda match: rename(match.group(), generation), text)
    if renamed == text:  # no name in it: rename the kept words too
        renamed = _WORD.sub(lambda match: rename(match.group(), generation, keep=_NONE), text)
    return renamed


_NONE: frozenset[str] = frozenset()
