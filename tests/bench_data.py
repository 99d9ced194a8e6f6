"""A tiny bench data folder in the real files' formats, for the benches' smoke runs.

MuSiQue (`musique_train_corpus.json`, `musique_train.json` with supporting paragraphs),
2WikiMultiHopQA (`2wiki_corpus.json`) and HotpotQA (`hotpotqa_train_corpus.json`,
`hotpotqa_train.json`): passages of invented people, places and firms written so that both
the offline extractor and the stand-in LLM find entities and relations in them ("Ada Varn
founded Kestrel Works in 1901."), and two-hop questions whose gold passages share an entity.
"""

from __future__ import annotations

import json
from pathlib import Path

PEOPLE = ["Ada Varn", "Tomas Reel", "Ines Holt", "Bram Oster", "Lena Quist", "Oskar Vale"]
PLACES = ["Marlow", "Denholm", "Kestrel Bay", "Arden", "Pellham", "Corvin"]
FIRMS = ["Kestrel Works", "Oster Mills", "Vale Press", "Holt Foundry", "Quist Labs", "Reel Dock"]


def passages(count: int, offset: int = 0) -> list[dict[str, str]]:
    """`count` distinct passages: a firm, who founded it, where and when, and who ran it."""
    found = []
    for i in range(offset, offset + count):
        firm = f"{FIRMS[i % len(FIRMS)]} {i // len(FIRMS) + 1}"
        founder, place = PEOPLE[i % len(PEOPLE)], PLACES[(i * 5 + 1) % len(PLACES)]
        successor = PEOPLE[(i + 2) % len(PEOPLE)]
        text = (
            f"{firm} is a company in {place}. {founder} founded {firm} in {1880 + i}. "
            f"{successor} succeeded {founder} as head of {firm} in {1920 + i}. "
            f"The works of {firm} were sold to traders in {PLACES[i % len(PLACES)]}."
        )
        found.append({"title": firm, "text": text})
    return found


def write_bench_data(folder: Path, musique: int = 24, wiki: int = 12, hotpot: int = 6) -> Path:
    """The folder, with `musique` + `wiki` + `hotpot` passages and a question per passage pair."""
    folder.mkdir(parents=True, exist_ok=True)
    corpus = passages(musique)
    questions = []
    for i in range(0, musique - 1, 2):
        first, second = corpus[i], corpus[i + 1]
        paragraphs = [
            {"idx": j, "title": p["title"], "paragraph_text": p["text"], "is_supporting": True}
            for j, p in enumerate((first, second))
        ]
        founder = PEOPLE[i % len(PEOPLE)]
        question = f"Where was the company that {founder} founded in {1880 + i}?"
        questions.append({"id": f"q{i}", "question": question, "paragraphs": paragraphs})
    others = passages(wiki + hotpot, offset=musique)
    hotpot_corpus = {p["title"]: [p["text"]] for p in others[wiki:]}
    hotpot_questions = [
        {"_id": f"h{i}", "question": f"Who founded {title}?", "supporting_facts": [[title, 0]]}
        for i, title in enumerate(hotpot_corpus)
    ]
    files = {
        "musique_train_corpus.json": corpus,
        "musique_train.json": questions,
        "2wiki_corpus.json": others[:wiki],
        "hotpotqa_train_corpus.json": hotpot_corpus,
        "hotpotqa_train.json": hotpot_questions,
    }
    for name, content in files.items():
        (folder / name).write_text(json.dumps(content), encoding="utf-8")
    return folder
