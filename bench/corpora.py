"""Distinct passages for the scale runs: MuSiQue, then 2WikiMultiHopQA, then renamed generations.

1x is MuSiQue (1,890 passages); a k-times run takes the first k x 1,890 passages of the pool
MuSiQue + 2Wiki = 8,009 distinct passages, so 4x is MuSiQue plus 5,670 2Wiki passages. Past
the pool (10x needs 18,900, 40x 75,600) the pool is taken again as generation 1, 2, ... of
bench/rewrite.py: the same passages with every name replaced by an invented one, the same
within a generation, so the graph grows by new entities rather than repeating the old ones.
`describe` says how many passages are renamed.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from bench.rewrite import rewrite

DATA = Path(__file__).resolve().parents[2] / "shared" / "bench" / "data"
BASE = 1890  # passages at 1x: MuSiQue's corpus
CORPORA = (("musique", "musique_train_corpus.json"), ("2wiki", "2wiki_corpus.json"))


@dataclass(frozen=True)
class Passage:
    source: str  # musique, 2wiki
    title: str
    text: str
    generation: int = 0  # 0: the passage itself; g > 0: bench/rewrite.py's generation g


def pool(data: Path = DATA) -> list[Passage]:
    """Every distinct passage, in order: MuSiQue, then 2Wiki."""
    missing = [name for _, name in CORPORA if not (data / name).is_file()]
    if missing:
        raise SystemExit(f"{data} lacks {', '.join(missing)}: see {data / 'README.md'}")
    seen: set[tuple[str, str]] = set()
    distinct = []
    for source, name in CORPORA:
        for p in json.loads((data / name).read_text(encoding="utf-8")):
            if (p["title"], p["text"]) not in seen:  # the corpora are distinct; this keeps it so
                seen.add((p["title"], p["text"]))
                distinct.append(Passage(source, p["title"], p["text"]))
    return distinct


def corpus(scale: int, base: int, passages: list[Passage]) -> list[Passage]:
    """`scale` x `base` passages from the pool, renamed (a generation per pass) past its end."""
    out = []
    for index in range(scale * base):
        p = passages[index % len(passages)]
        generation = index // len(passages)
        title, text = rewrite(p.title, generation), rewrite(p.text, generation)
        out.append(Passage(p.source, title, text, generation))
    return out


def describe(passages: list[Passage]) -> str:
    """E.g. '18,900 passages: 1,890 musique + 6,119 2wiki; 10,891 renamed (generations 1-2)'."""
    originals = Counter(p.source for p in passages if p.generation == 0)
    parts = " + ".join(f"{n:,} {source}" for source, n in originals.items())
    renamed = [p.generation for p in passages if p.generation]
    if not renamed:
        return f"{len(passages):,} passages: {parts}, all distinct"
    first, last = min(renamed), max(renamed)
    gens = f"generation {first}" if first == last else f"generations {first}-{last}"
    return f"{len(passages):,} passages: {parts}; {len(renamed):,} renamed ({gens})"


def write(folder: Path, passages: list[Passage], run: str) -> list[Path]:
    """One file per passage, its title tagged with the run: no text recurs across runs, so no
    LLM answer comes from the cache (the tag is lower case: no entity for the stand-in)."""
    paths = []
    for index, p in enumerate(passages):
        path = folder / f"{index:05d}.txt"
        path.write_text(f"{p.title} ({run})\n{p.text}", encoding="utf-8")
        paths.append(path)
    return paths
