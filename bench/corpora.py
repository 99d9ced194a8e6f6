"""Distinct passages for the scale runs: MuSiQue, then 2WikiMultiHopQA, then HotpotQA.

1x is MuSiQue (1,890 passages); a k-times run takes the first k x 1,890 passages of the pool
MuSiQue + 2Wiki (6,119) + HotpotQA (994) = 9,003 distinct passages, so 4x is MuSiQue plus
5,670 2Wiki passages. Only past the pool (10x needs 18,900) do passages repeat, as tagged
copies whose entities are the same as the original's; `describe` says how many.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "shared" / "bench" / "data"


@dataclass(frozen=True)
class Passage:
    source: str  # musique, 2wiki, hotpotqa
    title: str
    text: str
    copy: int = 0  # 0: the passage itself; n > 0: its n-th tagged repeat


def pool(data: Path = DATA) -> list[Passage]:
    """Every distinct passage, in order: MuSiQue, 2Wiki, HotpotQA (sentences joined)."""
    missing = [
        name
        for name in ("musique_train_corpus.json", "2wiki_corpus.json", "hotpotqa_train_corpus.json")
        if not (data / name).is_file()
    ]
    if missing:
        raise SystemExit(f"{data} lacks {', '.join(missing)}: see {data / 'README.md'}")
    passages = [
        Passage("musique", p["title"], p["text"])
        for p in json.loads((data / "musique_train_corpus.json").read_text())
    ]
    passages += [
        Passage("2wiki", p["title"], p["text"])
        for p in json.loads((data / "2wiki_corpus.json").read_text())
    ]
    hotpot = json.loads((data / "hotpotqa_train_corpus.json").read_text())
    passages += [Passage("hotpotqa", t, " ".join(s).strip()) for t, s in hotpot.items()]
    seen: set[tuple[str, str]] = set()
    distinct = []
    for p in passages:  # the corpora are distinct already; this keeps it so
        if (p.title, p.text) not in seen:
            seen.add((p.title, p.text))
            distinct.append(p)
    return distinct


def corpus(scale: int, base: int, passages: list[Passage]) -> list[Passage]:
    """`scale` x `base` passages from the pool, repeating it (tagged copies) only past its end."""
    wanted = scale * base
    out = []
    for index in range(wanted):
        p = passages[index % len(passages)]
        out.append(Passage(p.source, p.title, p.text, index // len(passages)))
    return out


def describe(passages: list[Passage]) -> str:
    """E.g. '7,560 passages: 1,890 musique + 5,670 2wiki, all distinct'."""
    originals = Counter(p.source for p in passages if p.copy == 0)
    repeats = sum(1 for p in passages if p.copy)
    parts = " + ".join(f"{n:,} {source}" for source, n in originals.items())
    tail = f"; {repeats:,} tagged repeats of those" if repeats else ", all distinct"
    return f"{len(passages):,} passages: {parts}{tail}"


def write(folder: Path, passages: list[Passage], run: str) -> list[Path]:
    """One file per passage, its title tagged with the run (and the repeat): no text recurs
    within a run or across runs, so no LLM answer comes from the cache."""
    paths = []
    for index, p in enumerate(passages):
        path = folder / f"{index:05d}.txt"
        tag = f" ({run} copy {p.copy})"
        path.write_text(f"{p.title}{tag}\n{p.text}", encoding="utf-8")
        paths.append(path)
    return paths
