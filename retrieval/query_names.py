"""Spans of a query that may name an entity: n-grams looked up by entity id (no scan, no NER
at query time) and runs of capitalised words linked to the nearest entity names (GRAPH_PPR)."""

from __future__ import annotations

import re

from core.models.graph import normalise_name

MAX_NGRAM = 6
_TOKEN = re.compile(r"[\w][\w'’.&-]*")
_POSSESSIVE = re.compile(r"['’]s?$")
# Words a question is made of that never name an entity on their own.
STOPWORDS = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "he",
        "her",
        "his",
        "how",
        "if",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "she",
        "that",
        "the",
        "their",
        "them",
        "they",
        "this",
        "to",
        "was",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "whose",
        "why",
        "with",
    }
)


def query_ngrams(query: str, max_len: int = MAX_NGRAM) -> list[str]:
    """Spans of the query that could name an entity, longest first.

    A span needs a capitalised or numeric token and may not start or end with a stopword;
    a trailing possessive is dropped ("Lilu's" -> "Lilu").
    """
    tokens = list(_TOKEN.finditer(query))
    spans: list[tuple[int, str]] = []
    for i in range(len(tokens)):
        for j in range(i, min(len(tokens), i + max_len)):
            words = [t.group() for t in tokens[i : j + 1]]
            if words[0].lower() in STOPWORDS or words[-1].lower() in STOPWORDS:
                continue
            if not any(w[0].isupper() or w[0].isdigit() for w in words):
                continue
            text = query[tokens[i].start() : tokens[j].end()]
            spans.append((j - i, _POSSESSIVE.sub("", text)))
    spans.sort(key=lambda s: -s[0])
    return list(dict.fromkeys(text for _, text in spans if normalise_name(text)))


_CONNECTORS = frozenset({"of", "the", "and", "de", "for", "on", "in", "la", "le", "von", "van"})


def name_spans(query: str) -> list[str]:
    """Runs of capitalised words (with inner connectors: "Journal of Psychotherapy Integration")
    that are not question words; what the query most likely names."""
    spans: list[str] = []
    run: list[re.Match[str]] = []
    for token in [*_TOKEN.finditer(query), None]:
        word = token.group() if token else ""
        if word[:1].isupper() or word[:1].isdigit():
            if run or word.lower() not in STOPWORDS:
                run.append(token)  # type: ignore[arg-type]
                continue
        elif run and word.lower() in _CONNECTORS:
            run.append(token)  # type: ignore[arg-type]
            continue
        while run and run[-1].group().lower() in _CONNECTORS:
            run.pop()
        if run:
            spans.append(_POSSESSIVE.sub("", query[run[0].start() : run[-1].end()]))
        run = []
    return list(dict.fromkeys(spans))


_WORD = re.compile(r"[^\W\d_]+")  # a run of letters: relation names split at "_" and digits


def stem(word: str) -> str:
    """A crude English stem, enough to match a question's words to relation names
    ("officers" ~ "officer", "licenses" ~ "licensed_from", "founder" ~ "founded")."""
    word = word.lower()
    if word.endswith("s") and not word.endswith("ss") and len(word) > 4:
        word = word[:-1]
    for suffix in ("ing", "ed", "er", "e"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def content_words(text: str) -> frozenset[str]:
    """The stems of the words of `text` that are not stopwords (three letters or more)."""
    words = _WORD.findall(text)
    return frozenset(stem(w) for w in words if len(w) > 2 and w.lower() not in STOPWORDS)
