"""Alias rules for entity resolution: when two names denote the same entity, and which wins.

Pure functions on names, no stores. The rules are deliberately narrow, because a wrong merge
is worse than a missed one (it fuses two people's facts, and nothing splits them again):
- titles and degrees ("Prof.", "Dr.", "PhD") and corporate suffixes ("Inc.", "Ltd.") are not
  part of a name: "Prof. Maria Lopez" is "Maria Lopez", "Acme Inc." is "Acme";
- an acronym stands for the capitalised words of a longer name: "NYC" ~ "New York City",
  "U.S." ~ "United States" (function words such as "of" are skipped);
- initials stand for given names when every other word agrees: "M. Lopez" ~ "Maria Lopez",
  "J. R. R. Tolkien" ~ "John Ronald Reuel Tolkien";
- two different full given names never match, whatever the surname: "Maria Lopez" and
  "Carlos Lopez" stay two.
An abbreviated name (acronym or initials) joins a full name only when exactly one full name
fits it: "M. Lopez" stays on its own beside both "Maria Lopez" and "Miguel Lopez".
The canonical name of a group is chosen by `name_rank` alone, so every order of arrival gives
the same canonical name (and hence the same entity id).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Iterable
from typing import NamedTuple

from core.models.graph import normalise_name

TITLES = frozenset(
    {
        "mr",
        "mrs",
        "ms",
        "miss",
        "mx",
        "dr",
        "prof",
        "professor",
        "sir",
        "dame",
        "rev",
        "reverend",
        "hon",
        "madam",
        "mme",
        "mlle",
        "herr",
        "frau",
    }
)
DEGREES = frozenset({"phd", "ph.d", "md", "m.d", "esq", "dphil", "mba"})
# Legal-form suffixes only: "Corp"/"Co" are often part of the name itself ("News Corp").
CORPORATE = frozenset(
    {
        "inc",
        "incorporated",
        "ltd",
        "limited",
        "llc",
        "plc",
        "gmbh",
        "ag",
        "sa",
        "s.a",
        "nv",
        "n.v",
        "bv",
        "b.v",
        "pty",
        "lp",
        "llp",
    }
)
# Words an acronym skips: "United States of America" is "USA", "Bank of England" is "BoE".
FUNCTION_WORDS = frozenset({"of", "the", "and", "for", "in", "on", "at", "to", "de", "&"})
_TOKEN = re.compile(r"[^\s,]+")
_DOTTED_INITIALS = re.compile(r"^(?:[A-Za-z]\.){2,}$")  # "J.R.R." or "U.S."
_ACRONYM = re.compile(r"^(?:[A-Z]{2,8}|(?:[A-Z]\.){2,8})$")


def _fold(text: str) -> str:
    """Lower case without accents, for comparing words ("López" ~ "lopez")."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def _bare(token: str) -> str:
    """A token folded and without edge dots, for matching titles and suffixes."""
    return _fold(token).strip(".")


def tokens(name: str) -> list[str]:
    """The words of a name as written (commas separate words too)."""
    return _TOKEN.findall(unicodedata.normalize("NFKC", name))


# Names recur across a batch's texts and every step compares them many times: the pure
# functions below are cached (their results are immutable strings, or copied on the way out).
# A few batches' names: each entry holds ~300 bytes, and a worker sees corpus after corpus
# (two caches of 65,536 held 35–43 MiB together and kept a distributed worker's RSS rising).
NAME_CACHE_SIZE = 4096


@functools.lru_cache(maxsize=NAME_CACHE_SIZE)
def strip_affixes(name: str) -> str:
    """The name without leading titles and trailing degrees or corporate suffixes.

    A name made only of affixes ("Dr.", "Inc.") is returned as it was.
    """
    words = tokens(name)
    start, end = 0, len(words)
    while start < end - 1 and _bare(words[start]) in TITLES:
        start += 1
    while end - 1 > start and _bare(words[end - 1]) in DEGREES | CORPORATE:
        end -= 1
    if (start, end) == (0, len(words)):
        return " ".join(name.split())
    kept = " ".join(words[start:end]).rstrip(",")
    return kept or " ".join(name.split())


def name_parts(name: str) -> list[str]:
    """Folded words of the stripped name; dotted initials split ("J.R.R." -> j, r, r)."""
    return list(_name_parts(name))


@functools.lru_cache(maxsize=NAME_CACHE_SIZE)
def _name_parts(name: str) -> tuple[str, ...]:
    parts: list[str] = []
    for word in tokens(strip_affixes(name)):
        if _DOTTED_INITIALS.match(word):
            parts.extend(_fold(c) for c in word if c.isalpha())
        else:
            bare = _bare(word).strip("\"'`“”‘’()[]{}")
            if bare:
                parts.append(bare)
    return tuple(parts)


def resolution_key(name: str) -> str:
    """Names with equal keys are the same entity: affixes, case, accents and dots ignored."""
    return " ".join(name_parts(name))


def acronym_letters(name: str) -> str | None:
    """The letters of a name written as an acronym ("NYC", "U.S."), else None."""
    words = tokens(strip_affixes(name))
    if len(words) != 1 or not _ACRONYM.match(words[0]):
        return None
    return "".join(c for c in words[0] if c.isalpha()).lower()


def initials_of(name: str) -> str:
    """First letters of a name's capitalised words, function words skipped ("nyc")."""
    words = [w for w in tokens(strip_affixes(name)) if _bare(w) not in FUNCTION_WORDS]
    if len(words) < 2 or not all(w[:1].isupper() for w in words):
        return ""
    return "".join(_fold(w[0]) for w in words)


def is_abbreviated(name: str) -> bool:
    """An acronym or a name with an initial ("M. Lopez"): it may stand for several names."""
    if acronym_letters(name) is not None:
        return True
    parts = name_parts(name)
    return len(parts) >= 2 and any(len(p) == 1 for p in parts[:-1])


def _initials_match(short: list[str], full: list[str]) -> bool:
    """Word by word equal or initial-of, with a real (not initial) surname on both sides."""
    if len(short) != len(full) or len(short) < 2 or len(short[-1]) < 2:
        return False
    if short[-1] != full[-1]:
        return False
    return all(
        a == b or (len(a) == 1 and b.startswith(a)) or (len(b) == 1 and a.startswith(b))
        for a, b in zip(short[:-1], full[:-1], strict=True)
    )


def same_entity(a: str, b: str) -> bool:
    """Whether an alias rule says `a` and `b` name the same entity (order does not matter)."""
    parts_a, parts_b = name_parts(a), name_parts(b)
    if not parts_a or not parts_b:
        return False
    if parts_a == parts_b:
        return True
    if len(parts_a) >= 2 and sorted(parts_a) == sorted(parts_b) and "," in a + b:
        return True  # "Lopez, Maria" ~ "Maria Lopez"
    if acronym_letters(a) is not None and acronym_letters(a) == acronym_letters(b):
        return True  # "N.Y.C." ~ "NYC"
    for short, long in ((a, b), (b, a)):
        letters = acronym_letters(short)
        if letters and len(letters) >= 2 and letters == initials_of(long):
            return True
    return _initials_match(parts_a, parts_b)


class MatchKeys(NamedTuple):
    """Where a name is filed, and where to look for the names an alias rule could join it to."""

    filed: frozenset[str]
    sought: frozenset[str]


def match_keys(name: str) -> MatchKeys:
    """Keys such that for two names `same_entity` accepts, each seeks a key the other is filed
    under: looking names up by them finds every candidate a rule could accept.

    One key per rule of `same_entity`: the sorted words (equal names, "Lopez, Maria"), the
    letters of an acronym and the initials of capitalised words ("NYC" ~ "New York City"), and
    the surname with the word count ("M. Lopez" ~ "Maria Lopez"). Only an abbreviated form can
    join a name of another form, so full names seek only the abbreviated ones: "Maria Lopez"
    never fetches every other "... Lopez", nor "New York City" every other "N... Y... C...".
    """
    parts = name_parts(name)
    if not parts:
        return MatchKeys(frozenset(), frozenset())
    words = "words:" + " ".join(sorted(parts))
    filed, sought = {words}, {words}
    if acronym := acronym_letters(name):  # another acronym, or the words it stands for
        filed.add(f"acronym:{acronym}")
        sought.update((f"acronym:{acronym}", f"initials:{acronym}"))
    elif initials := initials_of(name):
        filed.add(f"initials:{initials}")
        sought.add(f"acronym:{initials}")
    if len(parts) >= 2 and len(parts[-1]) >= 2:
        full, short = f"surname:{parts[-1]}:{len(parts)}", f"initial:{parts[-1]}:{len(parts)}"
        if any(len(p) == 1 for p in parts[:-1]):  # "M. Lopez": a full name or another initial
            filed.add(short)
            sought.update((short, full))
        else:
            filed.add(full)
            sought.add(short)
    return MatchKeys(frozenset(filed), frozenset(sought))


def name_rank(name: str) -> tuple:
    """Sort key of canonical names: full before abbreviated, then more words, then longer;
    ties broken by the text itself, so the choice never depends on order of arrival."""
    display = strip_affixes(name)
    return (
        is_abbreviated(display),
        -len(name_parts(display)),
        display.count(","),
        -len(display),
        display.casefold(),
        display,
    )


def canonical_name(names: Iterable[str]) -> str:
    """The name a group of aliases is stored under (affixes stripped). ValueError on none."""
    ranked = sorted((strip_affixes(n) for n in names if normalise_name(n)), key=name_rank)
    if not ranked:
        raise ValueError("canonical_name needs at least one non-empty name")
    return ranked[0]


def _blocking_keys(name: str) -> list[str]:
    """Keys under which a full name is found by the abbreviations that may stand for it."""
    parts = name_parts(name)
    keys = [f"key:{' '.join(parts)}"]
    if initials_of(name):
        keys.append(f"acr:{initials_of(name)}")
    if len(parts) >= 2:
        keys.append(f"sur:{parts[-1]}:{len(parts)}")
    return keys


def group_names(
    names: Iterable[str], compatible: Callable[[str, str], bool] | None = None
) -> dict[str, str]:
    """Each name mapped to the canonical name of its group (rules only, no store).

    Full names with equal keys group together; an abbreviated name joins the one group whose
    full names fit it, and stays alone when none or several do. `compatible(a, b)` may veto a
    join (e.g. different entity types). Linear in the number of names (blocking keys).
    """
    allowed = compatible or (lambda _a, _b: True)
    unique = list(dict.fromkeys(n for n in names if normalise_name(n)))
    parent = {n: n for n in unique}

    def find(n: str) -> str:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    blocks: dict[str, list[str]] = {}
    full = [n for n in unique if not is_abbreviated(n)]
    for name in full:
        for key in _blocking_keys(name):
            blocks.setdefault(key, []).append(name)
    for name in full:
        for other in blocks[f"key:{resolution_key(name)}"]:
            if other != name and allowed(name, other):
                parent[find(name)] = find(other)
    for name in (n for n in unique if is_abbreviated(n)):
        fits = {find(f) for f in _candidates(name, blocks) if same_entity(name, f)}
        fits = {root for root in fits if allowed(name, root)}
        if len(fits) == 1:
            parent[find(name)] = fits.pop()
    abbreviated_keys: dict[str, str] = {}  # "N.Y.C." and "NYC" alone still group together
    for name in unique:
        if find(name) == name and is_abbreviated(name):
            key = resolution_key(name).replace(" ", "")
            if key in abbreviated_keys and allowed(name, abbreviated_keys[key]):
                parent[name] = abbreviated_keys[key]
            else:
                abbreviated_keys.setdefault(key, name)
    members: dict[str, list[str]] = {}
    for name in unique:
        members.setdefault(find(name), []).append(name)
    canonical = {root: canonical_name(group) for root, group in members.items()}
    return {name: canonical[find(name)] for name in unique}


def _candidates(name: str, blocks: dict[str, list[str]]) -> list[str]:
    """Full names an abbreviated name might stand for, read from the blocking keys."""
    letters = acronym_letters(name)
    if letters:
        return blocks.get(f"acr:{letters}", [])
    parts = name_parts(name)
    return blocks.get(f"sur:{parts[-1]}:{len(parts)}", []) if parts else []
